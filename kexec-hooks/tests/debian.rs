//! The crashring packages' maintainer scripts (kexec-hooks/debian/), run
//! under `DPKG_ROOT` against a machine `crashring arm` armed in a
//! temporary directory, as dpkg runs them for a chroot.

use kexec_hooks::arm::{self, MODPROBE};
use kexec_hooks::kdump_tools::KDUMP_TOOLS;
use kexec_hooks::loader::KERNEL_CMDLINE;
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
    sys.write("/usr/sbin/update-grub", "").unwrap();
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

/// A systemd-boot machine: the purge takes arm's words back out of
/// kernel-install's command line, the admin's own words stay, and a file
/// arm created goes.
#[test]
fn purge_takes_arms_words_out_of_kernel_installs_command_line() {
    for own in [None, Some("root=UUID=4c1f ro crash_kexec_post_notifiers\n")] {
        let (dir, sys) = machine();
        sys.remove("/usr/sbin/update-grub").unwrap();
        sys.write("/usr/bin/kernel-install", "").unwrap();
        sys.write("/usr/bin/bootctl", "").unwrap();
        sys.write("/proc/cmdline", "root=UUID=4c1f ro quiet\n")
            .unwrap();
        if let Some(line) = own {
            sys.write(KERNEL_CMDLINE, line).unwrap();
        }
        let before = sys.snapshot().unwrap();
        arm::plan_arm(&sys, None, "x86_64")
            .unwrap()
            .apply(&sys)
            .unwrap();
        let armed = sys.read(KERNEL_CMDLINE).unwrap().unwrap();
        assert!(armed.contains("memmap=64M$0x22c000000"), "{armed}");
        run_script("crashring/postrm", "purge", dir.path());
        assert_eq!(
            sys.snapshot().unwrap(),
            before,
            "purge left what arm wrote ({own:?})"
        );
    }
}

/// A disarm whose update-grub or kernel-install add failed has already
/// taken arm's words out of the files, leaving the record marked
/// `pending=`: the purge runs the loader's tool all the same, or the boot
/// entries keep the range (named here, under DPKG_ROOT, for that system
/// to run).
#[test]
fn purge_after_an_unfinished_disarm_runs_the_loaders_tool() {
    for kernel_install in [false, true] {
        let (dir, sys) = machine();
        let tool = if kernel_install {
            sys.remove("/usr/sbin/update-grub").unwrap();
            sys.write("/usr/bin/kernel-install", "").unwrap();
            sys.write("/usr/bin/bootctl", "").unwrap();
            // A kernel for kernel-install add to run for.
            sys.write("/boot/vmlinuz-6.1.0-test", "").unwrap();
            sys.write("/proc/cmdline", "root=UUID=4c1f ro quiet\n")
                .unwrap();
            "kernel-install"
        } else {
            "update-grub"
        };
        let before = sys.snapshot().unwrap();
        let plan = arm::plan_arm(&sys, None, "x86_64").unwrap();
        plan.apply(&sys).unwrap();
        plan.commands_done(&sys).unwrap();
        arm::plan_disarm(&sys, false).unwrap().apply(&sys).unwrap();
        let record = sys.read(kexec_hooks::loader::RECORD).unwrap().unwrap();
        assert!(record.contains("\npending="), "{record}");
        // dpkg-trigger, stubbed: the initramfs, whose rebuild the disarm
        // did not get to either, is built again.
        let bin = tempfile::tempdir().unwrap();
        let triggered = bin.path().join("triggered");
        let stub = bin.path().join("dpkg-trigger");
        std::fs::write(
            &stub,
            format!("#!/bin/sh\necho \"$@\" >> {}\n", triggered.display()),
        )
        .unwrap();
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap()
        );
        let out = Command::new("/bin/sh")
            .arg(script("crashring/postrm"))
            .arg("purge")
            .env("DPKG_ROOT", dir.path())
            .env("PATH", path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{tool}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "crashring: not running {tool} for {}: run it in that system\n",
                dir.path().display()
            )),
            "{tool}: {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&triggered).unwrap_or_default(),
            "--no-await update-initramfs\n",
            "{tool}"
        );
        assert_eq!(sys.snapshot().unwrap(), before, "{tool}");
    }
}

/// A purge frees the range at the next boot: while a generation waits
/// in it unarchived, it says so loudly (it cannot wait; the binary,
/// whose disarm refuses, is gone) and how to save it first.
#[test]
fn purge_warns_of_a_generation_waiting_in_the_range() {
    let summary = "/sys/kernel/crashring/previous_summary";
    for (waits, said) in [
        ("generation 7 slot 1 size 67108864\n", true),
        ("none\n", false),
        // What `cat` of an EIO gives back: nothing to tell by.
        ("", true),
    ] {
        let (dir, sys) = machine();
        arm::plan_arm(&sys, None, "x86_64")
            .unwrap()
            .apply(&sys)
            .unwrap();
        sys.write(summary, waits).unwrap();
        let out = run_script("crashring/postrm", "purge", dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.contains("WARNING"), said, "{waits:?}: {stderr}");
        if said {
            for line in [
                "crashring:   cp /sys/kernel/crashring/previous /var/tmp/crashring-previous.region\n",
                "crashring:   crashring bundle /var/tmp/crashring-previous.region -o crash.tar.gz\n",
            ] {
                assert!(stderr.contains(line), "{stderr}");
            }
        }
        // Nothing in the warning is run.
        assert!(!stderr.contains("not found"), "{stderr}");
        assert!(sys.read(kexec_hooks::loader::RECORD).unwrap().is_none());
    }
}

/// `crashring debug --persist`'s file goes with a purge, armed or not,
/// as with disarm: its dyndbg= options would keep other drivers' debug
/// messages on. An admin's file of that name stays.
#[test]
fn purge_takes_away_the_kept_debug_selection() {
    use kexec_hooks::debug::{plan_persist, Enable, DEBUG_MODPROBE};
    let e1000 = Enable {
        module: "e1000".into(),
        query: "func e1000_watchdog".into(),
        builtin: false,
    };
    for armed in [true, false] {
        let (dir, sys) = machine();
        let before = sys.snapshot().unwrap();
        if armed {
            arm::plan_arm(&sys, None, "x86_64")
                .unwrap()
                .apply(&sys)
                .unwrap();
        }
        plan_persist(&sys, "drm=KMS", std::slice::from_ref(&e1000))
            .unwrap()
            .apply(&sys)
            .unwrap();
        assert!(sys.read(DEBUG_MODPROBE).unwrap().is_some());
        run_script("crashring/postrm", "purge", dir.path());
        assert_eq!(
            sys.snapshot().unwrap(),
            before,
            "purge left the debug selection (armed: {armed})"
        );
    }
    let (dir, sys) = machine();
    sys.write(DEBUG_MODPROBE, "options e1000 dyndbg=+p\n")
        .unwrap();
    let before = sys.snapshot().unwrap();
    run_script("crashring/postrm", "purge", dir.path());
    assert_eq!(sys.snapshot().unwrap(), before);
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

#[test]
fn dkms_builds_for_6_1_and_later_only() {
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/dkms.conf");
    // dkms sources dkms.conf in bash and matches the pattern with =~.
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            r#". "$1"; echo "min=$BUILD_EXCLUSIVE_KERNEL_MIN"; shift
            for k; do [[ $k =~ $BUILD_EXCLUSIVE_KERNEL ]] && echo "$k"; done; true"#,
        )
        .arg("bash")
        .arg(&conf)
        .args([
            "5.10.0-30-amd64",
            "5.19.17",
            "6.0.12-1-amd64",
            "6.1.0-41-amd64",
            "6.9.2",
            "6.12.95+deb13-amd64",
            "6.16.1",
            "7.0.0",
            "10.1.2",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "min=6.1\n6.1.0-41-amd64\n6.9.2\n6.12.95+deb13-amd64\n6.16.1\n7.0.0\n10.1.2\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn crashring_dkms_recommends_the_headers() {
    // Debian 13's dkms no longer pulls them in; Debian 12's recommends
    // them as linux-headers-generic | ... | linux-headers-amd64.
    let manifest = include_str!("../Cargo.toml");
    let deb = &manifest[manifest.find("[package.metadata.deb]").unwrap()..];
    let recommends = deb
        .lines()
        .find_map(|l| l.strip_prefix("recommends = "))
        .unwrap();
    assert!(
        recommends.contains("linux-headers-generic | linux-headers-amd64"),
        "{recommends}"
    );
}

/// The dkms postinst's Secure Boot note, with a mokutil that says
/// `sb_state` and answers --test-key with `test_key`.
fn secure_boot_note(sb_state: &str, test_key: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mokutil = dir.path().join("mokutil");
    std::fs::write(
        &mokutil,
        format!(
            "#!/bin/sh\ncase \"$1\" in --sb-state) echo '{sb_state}' ;; --test-key) echo \"$2 {test_key}\" ;; esac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &mokutil,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    // Sourced without "configure": only its functions are defined.
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(". \"$1\"; secure_boot_note")
        .arg("sh")
        .arg(script("crashring-dkms/postinst"))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn secure_boot_without_an_enrolled_key_is_said_loudly() {
    assert_eq!(
        secure_boot_note("SecureBoot disabled", "is not enrolled"),
        ""
    );
    assert_eq!(
        secure_boot_note("SecureBoot enabled", "is already enrolled"),
        ""
    );
    let note = secure_boot_note("SecureBoot enabled", "is not enrolled");
    assert!(
        note.contains("WARNING: Secure Boot is on")
            && note.contains("will refuse to load crashring")
            && note.contains("mokutil --import /var/lib/dkms/mok.pub"),
        "{note}"
    );
}
