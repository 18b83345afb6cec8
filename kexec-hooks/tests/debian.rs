//! The crashring packages' maintainer scripts (kexec-hooks/debian/), run
//! under `DPKG_ROOT` against a machine `crashring arm` armed in a
//! temporary directory, as dpkg runs them for a chroot.

use kexec_hooks::arm::{self, KDUMP_TOOLS, MODPROBE};
use kexec_hooks::system::System;
use std::path::{Path, PathBuf};
use std::process::Command;

fn script(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("debian")
        .join(path)
}

/// A machine with GRUB, kdump-tools, the module built for its kernel, and
/// a file of the admin's own in /etc/modules-load.d.
fn machine() -> (tempfile::TempDir, System) {
    let dir = tempfile::tempdir().unwrap();
    let sys = System::new(dir.path());
    sys.write("/proc/iomem", include_str!("data/iomem-qemu"))
        .unwrap();
    sys.write("/etc/default/grub", include_str!("data/grub-default"))
        .unwrap();
    sys.write(KDUMP_TOOLS, "USE_KDUMP=1\n#KDUMP_CMDLINE=\"\"\n")
        .unwrap();
    sys.write("/etc/modules-load.d/mine.conf", "loop\n")
        .unwrap();
    sys.write("/lib/modules/6.1.0-test/updates/dkms/crashring.ko", "")
        .unwrap();
    (dir, sys)
}

fn run_script(path: &str, arg: &str, root: &Path) -> std::process::Output {
    let out = Command::new("/bin/sh")
        .arg(script(path))
        .arg(arg)
        .env("DPKG_ROOT", root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{path} {arg}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn purge_takes_away_what_arm_wrote_and_remove_keeps_it() {
    let (dir, sys) = machine();
    let before = sys.snapshot().unwrap();
    arm::plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply(&sys)
        .unwrap();
    let armed = sys.snapshot().unwrap();
    assert_ne!(armed, before);
    run_script("crashring/postrm", "remove", dir.path());
    assert_eq!(sys.snapshot().unwrap(), armed, "remove changed the files");
    run_script("crashring/postrm", "purge", dir.path());
    assert_eq!(sys.snapshot().unwrap(), before, "purge left what arm wrote");
}

#[test]
fn purge_leaves_files_arm_did_not_write() {
    let (dir, sys) = machine();
    let mine = "options crashring region=1M@0x1000000\n";
    sys.write(MODPROBE, mine).unwrap();
    let before = sys.snapshot().unwrap();
    run_script("crashring/postrm", "purge", dir.path());
    assert_eq!(sys.snapshot().unwrap(), before);
}
