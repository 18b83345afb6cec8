//! `crashring arm`, `disarm` and `status` through the real binary, on a
//! copy of a machine: Debian's /etc/default/grub and a QEMU guest's
//! /proc/iomem (kexec-hooks/tests/data), and the module DKMS built.

mod common;

use common::crashring;
use kexec_hooks::system::System;

fn machine() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../kexec-hooks/tests/data");
    let sys = System::new(dir.path());
    for (path, file) in [
        ("/proc/iomem", "iomem-qemu"),
        ("/etc/default/grub", "grub-default"),
    ] {
        let text = std::fs::read_to_string(format!("{data}/{file}")).unwrap();
        sys.write(path, &text).unwrap();
    }
    // What DKMS installed (arm refuses without the module).
    sys.write("/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko", "")
        .unwrap();
    sys.write("/usr/sbin/update-grub", "").unwrap();
    let root = dir.path().to_str().unwrap().to_string();
    (dir, root)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn dry_run_arm_status_disarm_round_trip() {
    let (dir, root) = machine();
    let sys = System::new(dir.path());
    let before = sys.snapshot().unwrap();

    let dry = crashring(&["arm", "--dry-run", "--size", "16M", "--root", &root]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let diff = text(&dry.stdout);
    assert!(
        diff.contains("+++ b/etc/default/grub.d/crashring.cfg"),
        "{diff}"
    );
    assert!(
        diff.contains("+options crashring region=16M@0x22f000000"),
        "{diff}"
    );
    assert!(
        diff.contains("+++ b/etc/modules-load.d/crashring.conf"),
        "{diff}"
    );
    assert!(diff.ends_with("# then: update-grub\n"), "{diff}");
    assert_eq!(sys.snapshot().unwrap(), before, "a dry run changed files");

    let armed = crashring(&["arm", "--size", "16M", "--root", &root]);
    assert!(armed.status.success(), "{}", text(&armed.stderr));
    let said = text(&armed.stderr);
    assert!(said.contains("not running `update-grub`"), "{said}");
    assert!(said.contains("armed with memmap 16M@0x22f000000"), "{said}");

    let status = crashring(&["status", "--root", &root]);
    let out = text(&status.stdout);
    assert!(
        out.starts_with("armed      yes, memmap 16M@0x22f000000"),
        "{out}"
    );
    assert!(out.contains("on crash   nothing would be kept"), "{out}");

    // Arming again is a no-op; disarming restores every file.
    let again = crashring(&["arm", "--dry-run", "--root", &root]);
    assert_eq!(text(&again.stdout), "");
    let disarmed = crashring(&["disarm", "--root", &root]);
    assert!(disarmed.status.success(), "{}", text(&disarmed.stderr));
    assert_eq!(sys.snapshot().unwrap(), before);
}

#[test]
fn refusals_name_the_reason_and_exit_2() {
    let (_dir, root) = machine();
    for (args, says) in [
        (vec!["--size", "3M"], "multiple of 2 MiB"),
        (vec!["--size", "6G"], "no room for"),
        (vec!["--size", "64G"], "more than this machine's System RAM"),
        (
            vec!["--size", "0xFFFFFFFFFFE00000"],
            "more than this machine's System RAM",
        ),
        (vec!["--size", "lots"], "is not a number"),
    ] {
        let out = crashring(&[&["arm", "--root", &root][..], &args[..]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
