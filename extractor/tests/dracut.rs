//! The dracut module for Fedora and RHEL's kdump-utils
//! (kexec-hooks/dracut/99crashring), which cannot be booted here: Debian's
//! dracut builds a capture initramfs with it, the binary and the kdump
//! pre.d hook must be inside, and the hook, run in that initramfs's own
//! tree (chroot) against a /proc/vmcore that is an ELF core holding a
//! region, must leave a checked bundle where kdump-utils mounts the root
//! file system. Needs root (chroot, a bind mount) and dracut.

mod common;

use common::synth::{elf, load};
use common::{image, skip_without};
use std::path::{Path, PathBuf};
use std::process::Command;

fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kexec-hooks/dracut/99crashring")
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_capture_initramfs_bundles_the_crash_from_vmcore() {
    let dracut = Path::new("/usr/lib/dracut");
    if !dracut.join("dracut-functions.sh").exists() {
        return skip_without("dracut (dracut-core)");
    }
    if !is_root() {
        return skip_without("root (chroot and a bind mount)");
    }
    let tmp = tempfile::tempdir().unwrap();
    // dracut's own modules plus ours, as the package installs it.
    let base = tmp.path().join("dracut");
    run(Command::new("cp").arg("-a").arg(dracut).arg(&base));
    run(Command::new("cp")
        .arg("-a")
        .arg(module_dir())
        .arg(base.join("modules.d/99crashring")));
    let conf = tmp.path().join("conf.d");
    std::fs::create_dir(&conf).unwrap();
    let initrd = tmp.path().join("initrd.img");
    let bin = Path::new(env!("CARGO_BIN_EXE_crashring")).parent().unwrap();
    // dracut sets its own PATH from DRACUT_PATH: the binary under test
    // is found there as /usr/bin/crashring would be.
    run(Command::new("dracut")
        .env("dracutbasedir", &base)
        .env(
            "DRACUT_PATH",
            format!("{} /sbin /bin /usr/sbin /usr/bin", bin.display()),
        )
        .args([
            "--quiet",
            "--no-hostonly",
            "--no-kernel",
            "--no-early-microcode",
        ])
        .args(["--no-compress", "--conf", "/dev/null", "--confdir"])
        .arg(&conf)
        .args(["--modules", "base crashring", "--force"])
        .arg(&initrd));
    let tree = tmp.path().join("initramfs");
    std::fs::create_dir(&tree).unwrap();
    run(Command::new("cpio")
        .args(["-idm", "--quiet", "-D"])
        .arg(&tree)
        .stdin(std::fs::File::open(&initrd).unwrap()));
    let hook = tree.join("etc/kdump/pre.d/50-crashring");
    assert_eq!(
        std::fs::read(&hook).unwrap(),
        std::fs::read(module_dir().join("kdump-pre.sh")).unwrap(),
        "the initramfs's pre.d hook is not kdump-pre.sh"
    );
    assert!(
        tree.join("usr/bin/crashring").is_file(),
        "no crashring in the initramfs"
    );

    // A crashed kernel's memory as /proc/vmcore shows it: an ELF core.
    let memory = image(1 << 20, true);
    let vmcore = tmp.path().join("vmcore");
    std::fs::write(
        &vmcore,
        elf(&memory, &[load(0, memory.len() as u64)], None, 2, false),
    )
    .unwrap();
    std::fs::write(tree.join("proc/vmcore"), b"").unwrap();
    // What kdump-utils does: the root file system at /sysroot, then pre.d.
    let out = Command::new("unshare")
        .args(["--mount", "sh", "-c"])
        .arg("mount --bind \"$1\" \"$2/proc/vmcore\" && exec chroot \"$2\" /etc/kdump/pre.d/50-crashring")
        .args(["sh"])
        .arg(&vmcore)
        .arg(&tree)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the hook failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tree.join("sysroot/var/lib/crashring");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let [json, bundle] = &names[..] else {
        panic!(
            "the hook left {names:?} in /sysroot/var/lib/crashring, not a bundle and its summary"
        );
    };
    assert_eq!(json.strip_suffix(".json"), bundle.strip_suffix(".tar.gz"));
    let checked = extractor::bundle::check(std::fs::File::open(dir.join(bundle)).unwrap()).unwrap();
    let recovered = checked.manifest["regions"][0]["recovered"]
        .as_u64()
        .unwrap();
    assert!(
        recovered > 0,
        "the bundle recovered nothing: {}",
        checked.manifest
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}
