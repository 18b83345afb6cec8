//! The dracut module for Fedora and RHEL's kdump-utils
//! (kexec-hooks/dracut/99crashring), which cannot be booted here: Debian's
//! dracut builds a capture initramfs with it, the binary and the kdump
//! pre.d hook must be inside, and the hook, run in that initramfs's own
//! tree (chroot) against a /proc/vmcore that is an ELF core holding a
//! region, must leave a checked bundle where kdump-utils mounts the root
//! file system: remounted read-write if it was read-only, and only where
//! the real system's /var is (none when its fstab gives /var a file system
//! of its own that is not mounted). Needs root (chroot, mounts) and
//! dracut.

mod common;

use common::skip_without;
use common::synth::{elf, image_of_generation, load};
use kexec_hooks::iomem::Placement;
use kexec_hooks::loader::{Armed, Loader};
use kexec_hooks::reserve::Reservation;
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

    // A crashed kernel's memory as /proc/vmcore shows it: an ELF core,
    // with another crashed region at 1 MiB (a stale copy in freed RAM,
    // here of a later generation, so that only the armed address tells
    // them apart) and the crashed kernel's own at 2 MiB, where the root
    // file system's record says `crashring arm` placed it.
    let mut memory = image_of_generation(1 << 20, 512, 16 * 1024, 400, 5);
    memory.resize(ARMED as usize, 0);
    memory.extend_from_slice(&image_of_generation(0, 512, 16 * 1024, 30, 1));
    let vmcore = tmp.path().join("vmcore");
    std::fs::write(
        &vmcore,
        elf(&memory, &[load(0, memory.len() as u64)], None, 2, false),
    )
    .unwrap();
    std::fs::write(tree.join("proc/vmcore"), b"").unwrap();

    let record = Armed {
        reservation: Reservation::Memmap(Placement {
            start: ARMED,
            size: 16 << 10,
        }),
        loader: Loader::Grub,
        added: Vec::new(),
        created_from: None,
        pending: None,
    };
    let record_file = tmp.path().join("armed");
    std::fs::write(&record_file, record.text()).unwrap();
    let armed = format!(
        "mkdir -p \"$1/sysroot/etc/crashring\"; cp {} \"$1/sysroot/etc/crashring/armed\"; ",
        record_file.display()
    );
    // kdump-utils's root file system at /sysroot: read-write, as the
    // initramfs left it read-only, and with a /var of its own, mounted
    // there or not.
    let fstab = "UUID=4c1f / ext4 errors=remount-ro 0 1\n# /var was on /dev/sda3\nUUID=77aa /var ext4 defaults 0 2\n";
    for (case, setup, bundled) in [
        ("read-write", "", true),
        ("read-only", "mount -o remount,ro \"$1/sysroot\"", true),
        (
            "/var of its own, mounted",
            &format!("printf '{fstab}' > \"$1/sysroot/etc/fstab\"; mount -t tmpfs var \"$1/sysroot/var\""),
            true,
        ),
        (
            "/var of its own, not mounted",
            &format!("printf '{fstab}' > \"$1/sysroot/etc/fstab\""),
            false,
        ),
    ] {
        let sysroot = tmp.path().join(format!("sysroot-{}", names_safe(case)));
        std::fs::create_dir(&sysroot).unwrap();
        let out = run_hook(&tree, &vmcore, &sysroot, &(armed.clone() + setup));
        let dir = sysroot.join("var/lib/crashring");
        if !bundled {
            assert!(
                !out.status.success() && !dir.exists(),
                "{case}: the hook wrote under /sysroot/var, which the real system's own /var hides: {out:?}"
            );
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains("crashring: /var is a file system of its own (/sysroot/etc/fstab) and is not mounted under /sysroot: no bundle"),
                "{case}: {said}"
            );
            continue;
        }
        assert!(
            out.status.success(),
            "{case}: the hook failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        check_bundle(case, &dir);
    }
}

fn names_safe(case: &str) -> String {
    case.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
}

/// Where the crashed kernel's region lies in the test's vmcore.
const ARMED: u64 = 2 << 20;

/// What kdump-utils does: the root file system (a tmpfs here, set up by
/// `setup` with the initramfs's tree as `$1`) at /sysroot, then pre.d;
/// what the hook left there is copied to `sysroot`. The initramfs's /tmp
/// is a tmpfs of one page, as little as the capture kernel's RAM can
/// spare a 64 MiB region: the hook's copy of the region must go to disk.
fn run_hook(tree: &Path, vmcore: &Path, sysroot: &Path, setup: &str) -> std::process::Output {
    let script = format!(
        r#"set -e
mount --bind "$2" "$1/proc/vmcore"
mount -t tmpfs sysroot "$1/sysroot"
mkdir -p "$1/tmp"
mount -t tmpfs -o size=4k tmp "$1/tmp"
mkdir -p "$1/sysroot/etc" "$1/sysroot/var"
{setup}
set +e
chroot "$1" /etc/kdump/pre.d/50-crashring
rc=$?
cp -a "$1/sysroot/." "$3/"
exit $rc"#
    );
    Command::new("unshare")
        .args(["--mount", "sh", "-c", &script, "sh"])
        .arg(tree)
        .arg(vmcore)
        .arg(sysroot)
        .output()
        .unwrap()
}

/// `dir` holds one checked bundle with its summary, which recovered
/// records.
fn check_bundle(case: &str, dir: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{case}: {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let [json, bundle] = &names[..] else {
        panic!(
            "{case}: the hook left {names:?} in /sysroot/var/lib/crashring, not a bundle and its summary"
        );
    };
    assert_eq!(json.strip_suffix(".json"), bundle.strip_suffix(".tar.gz"));
    let checked = extractor::bundle::check(std::fs::File::open(dir.join(bundle)).unwrap()).unwrap();
    let recovered = checked.manifest["regions"][0]["recovered"]
        .as_u64()
        .unwrap();
    assert!(
        recovered > 0,
        "{case}: the bundle recovered nothing: {}",
        checked.manifest
    );
    assert_eq!(
        checked.manifest["regions"][0]["physical_address"],
        format!("{ARMED:#x}"),
        "{case}: the bundle holds a region other than the armed one"
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}
