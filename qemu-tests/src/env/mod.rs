//! The environment the scenarios run in: `setup` installs what the
//! harness needs (packages, kernels, readers, checkpatch), `guest` builds
//! what a guest boots with (crashring.ko per kernel, a static `crashring`,
//! busybox initramfs images), `debian` builds a real Debian 12 guest with
//! systemd, and `qemu` runs a guest.
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

/// Where the harness keeps what it builds and runs: target/crashring.
pub fn work_dir(sh: &Shell) -> PathBuf {
    sh.current_dir().join("target/crashring")
}
