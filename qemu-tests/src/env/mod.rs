//! The environment the scenarios run in: `setup` installs what the
//! harness needs (packages, kernels, readers, checkpatch), `guest` builds
//! what a guest boots with (crashring.ko per kernel, the host's `crashring`
//! with its libraries, busybox initramfs images), `debian` builds a real
//! Debian 12 guest with systemd, and `qemu` runs a guest.
//!
//! This module owns what they share: where the workspace is and where the
//! harness keeps its files. Import rule: the children import from here
//! (`super::`), never from one another; the rest of the harness uses them
//! through this module (`crate::env::guest`, ...).

use std::path::PathBuf;
use xshell::Shell;

pub mod debian;
pub mod guest;
pub mod qemu;
pub mod setup;

/// The workspace: the harness's shell runs there, and the tests read the
/// committed files from there.
pub fn project_root() -> PathBuf {
    let dir = env!("CARGO_MANIFEST_DIR");
    PathBuf::from(dir)
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(dir))
}

/// A Debian 13 root file system holding the newest kernel Debian ships
/// (trixie-backports), its headers, and the compiler it was built with.
/// That kernel's build tools (linux-kbuild) are linked against trixie's
/// libc and its headers ask for gcc-14, neither of which bookworm has: the
/// module is built for it inside this root (`guest::build_module`), and
/// guests boot its vmlinuz and modules from there.
pub const NEWEST_ROOT: &str = "/usr/local/share/crashring/trixie-root";

/// The root where `setup` unpacks Debian's arm64 kernels (image, modules
/// and headers, for [`guest`] to cross-build the module against) and
/// arm64 busybox, without installing them: the host is amd64.
pub const ARM64_ROOT: &str = "/usr/local/share/crashring/arm64-root";

/// The machine a kernel is built for, and the one its guest emulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Arm64,
}

impl Arch {
    /// Debian's name for it, which ends its kernels' release strings.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// The generic flavour of `arch`: `-amd64`, not `-rt-amd64` or
/// `-cloud-amd64`; `-arm64`, not `-rt-arm64` or `-cloud-arm64`.
pub fn is_plain_flavour(release: &str, arch: Arch) -> bool {
    release
        .strip_suffix(arch.debian())
        .and_then(|r| r.strip_suffix('-'))
        .is_some_and(|r| !r.ends_with("-rt") && !r.ends_with("-cloud"))
}

/// Orders release strings by their numeric parts.
pub fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The nice value of the work that runs beside the scenarios' guests:
/// the guest booted in the foreground comes first.
pub const NICE_BESIDE: i32 = 10;

/// Sets the calling thread's nice value, and so that of every process it
/// starts from now on: Linux keeps one per thread, and a child begins
/// with its parent thread's.
pub fn nice_this_thread(nice: i32) -> std::io::Result<()> {
    // SAFETY: neither call takes a pointer; `gettid` cannot fail.
    let done = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Where the harness keeps what it builds and runs: target/crashring.
pub fn work_dir(sh: &Shell) -> PathBuf {
    sh.current_dir().join("target/crashring")
}
