//! `crashring arm`'s tests, on a machine built in a temporary folder.

use super::*;
use crate::loader::{GRUB_CFG, GRUB_DROP_IN, KERNEL_CMDLINE, RECORD};

impl Plan {
    /// Applies the plan as `crashring arm` does when every command
    /// succeeds.
    pub(crate) fn apply_succeeded(&self, sys: &System) {
        self.apply(sys).unwrap();
        self.commands_done(sys).unwrap();
    }
}

pub(crate) fn machine(iomem: &str) -> (tempfile::TempDir, System) {
    let dir = tempfile::tempdir().unwrap();
    let sys = System::new(dir.path());
    sys.write("/proc/iomem", iomem).unwrap();
    sys.write(
        "/etc/default/grub",
        include_str!("../../tests/data/grub-default"),
    )
    .unwrap();
    sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-amd64\n")
        .unwrap();
    sys.write(MODULE, "").unwrap();
    sys.write("/usr/sbin/update-grub", "").unwrap();
    (dir, sys)
}

/// Where DKMS installs the module for the machine's kernel.
const MODULE: &str = "/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko";

pub(crate) const QEMU: &str = include_str!("../../tests/data/iomem-qemu");

/// Disarming leaves every file under `root` as it was `before` arm.
pub(crate) fn disarm_restores(
    sys: &System,
    root: &std::path::Path,
    before: &[(std::path::PathBuf, Vec<u8>)],
) {
    plan_disarm(sys, false).unwrap().apply_succeeded(sys);
    assert_eq!(sys.snapshot().unwrap(), before, "in {}", root.display());
}

#[test]
fn arm_then_disarm_leaves_the_machine_as_it_was() {
    let (dir, sys) = machine(QEMU);
    let before = sys.snapshot().unwrap();
    let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
    assert_eq!(
        plan.reservation.unwrap().to_string(),
        "memmap 64M@0x22c000000"
    );
    assert_eq!(plan.commands, [["update-grub"]]);
    plan.apply_succeeded(&sys);
    assert_eq!(
        sys.read(MODPROBE).unwrap().unwrap(),
        format!("{MARK}\noptions crashring region=64M@0x22c000000 user_streams=8\n")
    );
    // Arming again changes nothing and keeps the range, with or
    // without the same --size.
    for size in [None, Some(64 << 20)] {
        let again = plan_arm(&sys, size, "x86_64").unwrap();
        assert!(again.is_empty(), "{:?}", again.changes);
        assert_eq!(again.reservation, plan.reservation);
    }
    disarm_restores(&sys, dir.path(), &before);
    assert!(plan_disarm(&sys, false).unwrap().is_empty());
}

/// Disarming frees the range at the next boot: while a generation waits
/// in it unarchived (a failed recovery's, one `Clean=keep` left), disarm
/// refuses unless forced, and says how to archive it first.
#[test]
fn disarm_keeps_a_waiting_generation_unless_forced() {
    let (_dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    let summary = "/sys/kernel/crashring/previous_summary";
    sys.write(
        summary,
        "generation 7 slot 1 size 67108864\nkernel 6.1.0-41-amd64 host box cpus 4 page_size 4096\nstate crashed reason 1 at 5 ns on cpu 0: Kernel panic\n",
    )
    .unwrap();
    let err = plan_disarm(&sys, false).unwrap_err();
    assert!(matches!(err, ArmError::Waiting { .. }), "{err}");
    let said = err.to_string();
    assert!(
        said.contains("(generation 7 slot 1 size 67108864; state crashed reason 1")
            && said.contains("`crashring recover`")
            && said.contains("--force"),
        "{said}"
    );
    // A summary the kernel could not give (EIO) may hide one too.
    sys.remove(summary).unwrap();
    std::fs::create_dir(sys.path(summary)).unwrap();
    assert!(matches!(
        plan_disarm(&sys, false),
        Err(ArmError::Waiting { .. })
    ));
    std::fs::remove_dir(sys.path(summary)).unwrap();
    sys.write(summary, "generation 7 slot 1 size 67108864\n")
        .unwrap();
    let forced = plan_disarm(&sys, true).unwrap();
    assert!(!forced.is_empty());
    assert!(
        forced.notes.iter().any(|n| n.contains("generation 7")),
        "{:?}",
        forced.notes
    );
    // Archived and acknowledged: nothing waits.
    sys.write(summary, "none\n").unwrap();
    let plan = plan_disarm(&sys, false).unwrap();
    assert_eq!(plan.changes.len(), forced.changes.len());
    plan.apply_succeeded(&sys);
    // Not armed, nothing to free: nothing refused either.
    sys.write(summary, "generation 7 slot 1 size 67108864\n")
        .unwrap();
    assert!(plan_disarm(&sys, false).unwrap().is_empty());
}

/// The running machine, booted armed, without the module loaded (it
/// failed to load, or was unloaded): no previous_summary can say that
/// nothing waits, so disarm refuses unless forced; a machine's copy has
/// no /sys and is disarmed as before.
#[test]
fn disarm_without_the_module_cannot_tell_and_refuses() {
    let (dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    assert!(!plan_disarm(&sys, false).unwrap().is_empty());
    let live = System::live_at(dir.path());
    // Armed, not rebooted yet: the range holds nothing.
    sys.write("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=4c1f ro\n")
        .unwrap();
    assert!(!plan_disarm(&live, false).unwrap().is_empty());
    sys.write(
        "/proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=UUID=4c1f ro memmap=64M$0x22c000000 crash_kexec_post_notifiers\n",
    )
    .unwrap();
    let err = plan_disarm(&live, false).unwrap_err();
    assert!(matches!(err, ArmError::NotLoaded { .. }), "{err}");
    let said = err.to_string();
    assert!(
        said.contains("nothing can tell whether a generation waits")
            && said.contains("`modprobe crashring`")
            && said.contains("`crashring recover`")
            && said.contains("--force"),
        "{said}"
    );
    let forced = plan_disarm(&live, true).unwrap();
    assert!(
        forced
            .notes
            .iter()
            .any(|n| n.starts_with("--force: the module is not loaded")),
        "{:?}",
        forced.notes
    );
    // Loaded, and nothing waits: disarmed.
    sys.write("/sys/kernel/crashring/previous_summary", "none\n")
        .unwrap();
    assert!(!plan_disarm(&live, false).unwrap().is_empty());
    forced.apply_succeeded(&live);
    // Not armed: nothing to lose, nothing refused.
    std::fs::remove_dir_all(sys.path("/sys/kernel/crashring")).unwrap();
    assert!(plan_disarm(&live, false).unwrap().is_empty());
}

/// The CLI prints an error with its sources (anyhow's `{:#}`): each
/// cause once.
#[test]
fn a_file_that_cannot_be_read_is_said_once() {
    let (_dir, sys) = machine(QEMU);
    std::fs::create_dir_all(sys.path(RECORD)).unwrap();
    let err = plan_arm(&sys, None, "x86_64").unwrap_err();
    let mut chain = vec![err.to_string()];
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        chain.push(e.to_string());
        source = e.source();
    }
    let said = chain.join(": ");
    assert!(said.starts_with("reading /etc/crashring/armed: "), "{said}");
    assert_eq!(said.matches("(os error 21)").count(), 1, "{said}");
}

/// With crashring's initramfs-tools hook installed, arm and disarm
/// build the initramfs images again after writing what they hold
/// (the hook reads the list and the options); arming again with
/// nothing to change builds nothing.
#[test]
fn the_initramfs_is_built_again_where_the_hook_puts_the_module_in() {
    let (_dir, sys) = machine(QEMU);
    sys.write(crate::initramfs::INITRAMFS_TOOLS_HOOK, "")
        .unwrap();
    sys.write("/usr/sbin/update-initramfs", "").unwrap();
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    let rebuild = ["update-initramfs", "-u", "-k", "all"];
    assert_eq!(plan.commands, [&rebuild[..], &["update-grub"][..]]);
    assert!(plan
        .diff()
        .ends_with("# then: update-initramfs -u -k all\n# then: update-grub\n"));
    plan.apply_succeeded(&sys);
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
    let disarm = plan_disarm(&sys, false).unwrap();
    assert_eq!(disarm.commands[0], rebuild);
    disarm.apply_succeeded(&sys);
    assert!(plan_disarm(&sys, false).unwrap().is_empty());
}

#[test]
fn the_dry_run_diff_shows_every_file() {
    let (_dir, sys) = machine(QEMU);
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    let diff = plan.diff();
    for path in [RECORD, GRUB_DROP_IN, MODPROBE, MODULES_LOAD] {
        assert!(diff.contains(&format!("+++ b{path}\n")), "{diff}");
    }
    assert!(diff.ends_with("# then: update-grub\n"), "{diff}");
    assert!(diff.contains(
        "+GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap=64M\\\\\\$0x22c000000 crash_kexec_post_notifiers\"\n"
    ), "{diff}");
    // Nothing was written.
    assert_eq!(sys.read(GRUB_DROP_IN).unwrap(), None);
}

#[test]
fn the_drop_in_gives_grub_the_escaped_dollar_through_a_real_shell() {
    // grub-mkconfig is a /bin/sh script that sources /etc/default/grub
    // and then the drop-ins, and 10_linux echoes the arguments into
    // grub.cfg's linux line; run the same steps.
    let (dir, sys) = machine(QEMU);
    plan_arm(&sys, Some(16 << 20), "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    let root = dir.path();
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(
            ". \"$1/etc/default/grub\"; for x in \"$1\"/etc/default/grub.d/*.cfg; do . \"$x\"; done; \
             echo \"linux /vmlinuz ro ${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}\"",
        )
        .arg("sh")
        .arg(root)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "linux /vmlinuz ro  memmap=16M\\$0x22f000000 crash_kexec_post_notifiers quiet\n"
    );
}

#[test]
fn refuses_with_a_reason() {
    let (_dir, sys) = machine(QEMU);
    assert!(matches!(
        plan_arm(&sys, None, "riscv64"),
        Err(ArmError::Unsupported(a)) if a == "riscv64"
    ));
    // arm64 before 6.11: no reserve_mem=, and no memmap= at all.
    sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-arm64\n")
        .unwrap();
    let err = plan_arm(&sys, None, "aarch64").unwrap_err();
    assert!(matches!(&err, ArmError::NoReserveMem(r) if r == "6.1.0-41-arm64"));
    assert!(
        err.to_string()
            .contains("reserved-memory node marked no-map"),
        "{err}"
    );
    sys.remove("/proc/sys/kernel/osrelease").unwrap();
    assert!(matches!(
        plan_arm(&sys, None, "aarch64"),
        Err(ArmError::NoRelease)
    ));
    sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-amd64\n")
        .unwrap();
    assert!(matches!(
        plan_arm(&sys, Some(3 << 20), "x86_64"),
        Err(ArmError::Size(_))
    ));
    let err = plan_arm(&sys, Some(6 << 30), "x86_64").unwrap_err();
    assert!(err.to_string().starts_with("no room for"), "{err}");
    // More than all its RAM (8 GiB less the BIOS's holes), to the 2 MiB
    // multiple nearest 2^64 that --size lets through: said as such, on
    // arm64 too, where nothing is placed; and nothing overflows.
    sys.write("/proc/sys/kernel/osrelease", "6.12.48+deb12-arm64\n")
        .unwrap();
    sys.write("/lib/modules/6.12.48+deb12-arm64/crashring.ko", "")
        .unwrap();
    for (size, arch) in [
        (64 << 30, "x86_64"),
        (0xFFFF_FFFF_FFE0_0000, "x86_64"),
        (0xFFFF_FFFF_FFE0_0000, "aarch64"),
    ] {
        let err = plan_arm(&sys, Some(size), arch).unwrap_err();
        assert!(
            matches!(err, ArmError::TooLarge { size: s, ram: 0x1_fff7_ec00 } if s == size),
            "{arch}: {err}"
        );
    }
    sys.remove("/lib/modules/6.12.48+deb12-arm64/crashring.ko")
        .unwrap();
    sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-amd64\n")
        .unwrap();
    sys.write(MODPROBE, "options crashring region=1M@0x1000000\n")
        .unwrap();
    assert!(matches!(
        plan_arm(&sys, None, "x86_64"),
        Err(ArmError::NotOurs(p)) if p == MODPROBE
    ));
    // Disarm leaves a file that is not ours.
    let plan = plan_disarm(&sys, false).unwrap();
    assert!(plan.is_empty() && plan.notes[0].contains("not written by crashring arm"));
    sys.remove(MODPROBE).unwrap();
    plan_arm(&sys, Some(16 << 20), "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    assert!(matches!(
        plan_arm(&sys, Some(32 << 20), "x86_64"),
        Err(ArmError::Rearm { current }) if current.size() == 16 << 20
    ));
}

/// An arm64 machine with Debian 12's backports kernel, GRUB and the
/// module, whose /proc/iomem (no memmap= there) arm does not read.
fn arm64_machine() -> (tempfile::TempDir, System) {
    let (dir, sys) = machine("");
    sys.write("/proc/sys/kernel/osrelease", "6.12.48+deb12-arm64\n")
        .unwrap();
    sys.write(
        "/lib/modules/6.12.48+deb12-arm64/updates/dkms/crashring.ko",
        "",
    )
    .unwrap();
    (dir, sys)
}

#[test]
fn arm64_reserves_by_reserve_mem_and_disarms_to_what_it_was() {
    let (dir, sys) = arm64_machine();
    let before = sys.snapshot().unwrap();
    let plan = plan_arm(&sys, None, "aarch64").unwrap();
    assert_eq!(
        plan.reservation,
        Some(Reservation::ReserveMem { size: DEFAULT_SIZE })
    );
    plan.apply_succeeded(&sys);
    assert_eq!(
        sys.read(MODPROBE).unwrap().unwrap(),
        format!("{MARK}\noptions crashring reserve_mem=crashring user_streams={USER_STREAMS}\n")
    );
    let drop_in = sys.read(GRUB_DROP_IN).unwrap().unwrap();
    assert!(
        drop_in.contains(
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX reserve_mem=64M:2M:crashring crash_kexec_post_notifiers\""
        ),
        "{drop_in}"
    );
    let record = crate::loader::armed(&sys).unwrap().unwrap();
    assert_eq!(
        record.reservation,
        Reservation::ReserveMem { size: 64 << 20 }
    );
    assert_eq!(
        record.added,
        ["reserve_mem=64M:2M:crashring", "crash_kexec_post_notifiers"]
    );
    // Arming again keeps it; another size is refused.
    let again = plan_arm(&sys, None, "aarch64").unwrap();
    assert!(again.notes[0].starts_with("already armed with reserve_mem 64M"));
    assert!(matches!(
        plan_arm(&sys, Some(32 << 20), "aarch64"),
        Err(ArmError::Rearm {
            current: Reservation::ReserveMem { .. }
        })
    ));
    plan_disarm(&sys, false).unwrap().apply_succeeded(&sys);
    assert_eq!(sys.snapshot().unwrap(), before);
    drop(dir);
}

#[test]
fn arm_writes_nothing_without_a_boot_loader_it_drives() {
    for (files, loader) in [
        (&[KERNEL_CMDLINE][..], "systemd-boot or /etc/kernel/cmdline"),
        (
            &["/usr/bin/bootctl"][..],
            "systemd-boot or /etc/kernel/cmdline",
        ),
        (&[][..], "GRUB's settings, but no update-grub"),
    ] {
        let (_dir, sys) = machine(QEMU);
        // GRUB's settings, but no update-grub to carry them out.
        sys.remove("/usr/sbin/update-grub").unwrap();
        for f in files {
            sys.write(f, "root=UUID=4c1f ro quiet\n").unwrap();
        }
        let before = sys.snapshot().unwrap();
        let err = plan_arm(&sys, None, "x86_64").unwrap_err();
        assert!(
            matches!(err, ArmError::BootLoader { loader: l, .. } if l.starts_with(loader)),
            "{files:?}: {err}"
        );
        // The parameters as the kernel reads them, not as GRUB's
        // shell-sourced drop-in escapes them.
        let err = err.to_string();
        assert!(err.contains("nothing was written"), "{err}");
        assert!(
            err.contains("add `memmap=64M$0x22c000000 crash_kexec_post_notifiers`")
                && err.contains("`options crashring region=64M@0x22c000000 user_streams=8`"),
            "{err}"
        );
        assert_eq!(sys.snapshot().unwrap(), before);
    }
}

/// A systemd-boot machine: no GRUB, kernel-install writing each
/// kernel's entry from /etc/kernel/cmdline.
/// GRUB's package purged from `sys`, systemd-boot's installed.
pub(crate) fn grub_replaced_by_systemd_boot(sys: &System) {
    sys.remove("/usr/sbin/update-grub").unwrap();
    sys.write("/usr/bin/kernel-install", "").unwrap();
    sys.write("/usr/bin/bootctl", "").unwrap();
}

pub(crate) fn kernel_install_machine() -> (tempfile::TempDir, System) {
    let (dir, sys) = machine(QEMU);
    for f in ["/usr/sbin/update-grub", "/etc/default/grub"] {
        sys.remove(f).unwrap();
    }
    for f in [
        "/usr/bin/kernel-install",
        "/usr/bin/bootctl",
        "/boot/vmlinuz-6.1.0-41-amd64",
        "/boot/vmlinuz-6.12.57+deb12-amd64",
        "/lib/modules/6.12.57+deb12-amd64/modules.dep",
    ] {
        sys.write(f, "").unwrap();
    }
    sys.write("/proc/cmdline", BOOTED).unwrap();
    (dir, sys)
}

/// systemd-boot's command line for an entry, with the initrd it adds.
const BOOTED: &str =
    "initrd=\\6b1f\\6.1.0-41-amd64\\initrd.img-6.1.0-41-amd64 root=UUID=4c1f ro quiet\n";

pub(crate) fn kernel_install_commands() -> Vec<Vec<String>> {
    ["6.1.0-41-amd64", "6.12.57+deb12-amd64"]
        .map(|v| {
            ["kernel-install", "add", v, &format!("/boot/vmlinuz-{v}")]
                .map(String::from)
                .to_vec()
        })
        .to_vec()
}

#[test]
fn kernel_install_gets_the_range_in_etc_kernel_cmdline_and_every_entry() {
    let (dir, sys) = kernel_install_machine();
    let before = sys.snapshot().unwrap();
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(plan.commands, kernel_install_commands());
    plan.apply_succeeded(&sys);
    // kernel-install's own default (the running line without the boot
    // loader's initrd=), plus arm's words, `$` as the kernel reads it.
    assert_eq!(
        sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
        "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers\n"
    );
    let record = loader::armed(&sys).unwrap().unwrap();
    assert_eq!(record.loader, loader::Loader::KernelInstall);
    assert_eq!(
        record.created_from.as_deref(),
        Some("root=UUID=4c1f ro quiet")
    );
    assert!(sys.read(GRUB_DROP_IN).unwrap().is_none());
    // Booted armed: the running line has the range; arming again
    // changes nothing and runs nothing.
    sys.write(
        "/proc/cmdline",
        "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers\n",
    )
    .unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
    let disarm = plan_disarm(&sys, false).unwrap();
    assert_eq!(disarm.commands, kernel_install_commands());
    sys.write("/proc/cmdline", BOOTED).unwrap();
    disarm_restores(&sys, dir.path(), &before);
}

#[test]
fn an_admins_own_kernel_command_line_keeps_its_words() {
    let (dir, sys) = kernel_install_machine();
    sys.write(
        KERNEL_CMDLINE,
        "root=UUID=4c1f ro crash_kexec_post_notifiers\n",
    )
    .unwrap();
    let before = sys.snapshot().unwrap();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    assert_eq!(
        sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
        "root=UUID=4c1f ro crash_kexec_post_notifiers memmap=64M$0x22c000000\n"
    );
    // Only the range is arm's: disarm leaves the admin's notifiers.
    assert_eq!(
        loader::armed(&sys).unwrap().unwrap().added,
        ["memmap=64M$0x22c000000"]
    );
    disarm_restores(&sys, dir.path(), &before);

    // A file arm created and the admin changed since stays, less
    // arm's words.
    let (_dir, sys) = kernel_install_machine();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    sys.write(
        KERNEL_CMDLINE,
        "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers mitigations=auto\n",
    )
    .unwrap();
    plan_disarm(&sys, false).unwrap().apply_succeeded(&sys);
    assert_eq!(
        sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
        "root=UUID=4c1f ro quiet mitigations=auto\n"
    );
}

#[test]
fn grubby_is_told_with_the_dollar_escaped_for_grub() {
    let (_dir, sys) = machine(QEMU);
    sys.remove("/usr/sbin/update-grub").unwrap();
    sys.write("/usr/sbin/grubby", "").unwrap();
    sys.write(
        "/proc/cmdline",
        "BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=UUID=4c1f ro\n",
    )
    .unwrap();
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(
        plan.commands,
        [[
            "grubby",
            "--update-kernel=ALL",
            "--args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers"
        ]]
    );
    plan.apply_succeeded(&sys);
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
    let disarm = plan_disarm(&sys, false).unwrap();
    assert_eq!(
        disarm.commands,
        [[
            "grubby",
            "--update-kernel=ALL",
            "--remove-args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers"
        ]]
    );
    // The notifiers already on: only the range is added and removed.
    let (_dir, sys) = machine(QEMU);
    sys.remove("/usr/sbin/update-grub").unwrap();
    sys.write("/sbin/grubby", "").unwrap();
    sys.write(
        "/proc/cmdline",
        "root=UUID=4c1f ro crash_kexec_post_notifiers\n",
    )
    .unwrap();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    assert_eq!(
        plan_disarm(&sys, false).unwrap().commands,
        [[
            "grubby",
            "--update-kernel=ALL",
            "--remove-args=memmap=64M\\$0x22c000000"
        ]]
    );
}

#[test]
fn a_machine_armed_through_grub_that_now_boots_otherwise_is_refused() {
    let (_dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    grub_replaced_by_systemd_boot(&sys);
    let before = sys.snapshot().unwrap();
    let err = plan_arm(&sys, None, "x86_64").unwrap_err().to_string();
    assert!(
        err.starts_with("armed through grub (/etc/crashring/armed), and this machine now boots with kernel-install")
            && err.contains("memmap=64M$0x22c000000"),
        "{err}"
    );
    assert_eq!(sys.snapshot().unwrap(), before);
}

#[test]
fn the_record_reads_back_and_a_damaged_one_is_refused() {
    let (_dir, sys) = kernel_install_machine();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    let record = sys.read(RECORD).unwrap().unwrap();
    assert_eq!(
        loader::Armed::parse(&record).unwrap().text(),
        record,
        "{record}"
    );
    sys.write(RECORD, &record.replace("range=64M@", "range=64M#"))
        .unwrap();
    for err in [
        plan_arm(&sys, None, "x86_64").unwrap_err(),
        plan_disarm(&sys, false).unwrap_err(),
    ] {
        assert!(
            err.to_string()
                .starts_with("/etc/crashring/armed is ours but cannot be read"),
            "{err}"
        );
    }
}

#[test]
fn an_armed_machine_whose_grub_cfg_lacks_the_range_runs_update_grub_again() {
    let (_dir, sys) = machine(QEMU);
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    plan.apply_succeeded(&sys);
    // update-grub failed, or never ran: the menu boots without it.
    sys.write(
        GRUB_CFG,
        "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro quiet\n",
    )
    .unwrap();
    let again = plan_arm(&sys, None, "x86_64").unwrap();
    assert!(
        again.changes.is_empty() && again.commands == [["update-grub"]],
        "{again:?}"
    );
    assert!(again
        .notes
        .iter()
        .any(|n| n.contains("update-grub runs again")));
    // As update-grub writes it, the `$` escaped for GRUB's parser.
    sys.write(
        GRUB_CFG,
        "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro memmap=64M\\$0x22c000000 crash_kexec_post_notifiers quiet\n",
    )
    .unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
}

/// update-grub can succeed and still leave the range out of grub.cfg (a
/// grub-mkconfig that does not read the drop-ins): checked after it ran,
/// and said, rather than every boot left unrecorded.
#[test]
fn update_grub_that_leaves_the_range_out_is_an_error() {
    let (_dir, sys) = machine(QEMU);
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    plan.apply_succeeded(&sys);
    // What the command wrote: the menu without the range.
    sys.write(
        GRUB_CFG,
        "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro quiet\n",
    )
    .unwrap();
    let err = plan.verify(&sys).unwrap_err();
    assert!(
        matches!(&err, ArmError::GrubCfgLacks { word } if word == "memmap=64M$0x22c000000"),
        "{err}"
    );
    sys.write(
        GRUB_CFG,
        "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro memmap=64M\\$0x22c000000 crash_kexec_post_notifiers quiet\n",
    )
    .unwrap();
    plan.verify(&sys).unwrap();
}

/// The Boot Loader Interface's LoaderInfo variable naming `name`.
fn loader_info(sys: &System, name: &str) {
    let mut bytes = vec![6, 0, 0, 0];
    for u in name.encode_utf16().chain([0]) {
        bytes.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::create_dir_all(sys.path("/sys/firmware/efi/efivars")).unwrap();
    std::fs::write(sys.path(loader::LOADER_INFO), bytes).unwrap();
}

/// GRUB's settings stay when systemd-boot takes over (Debian keeps
/// grub-common): the loader that booted this boot decides, and evidence
/// both ways is refused rather than guessed at.
#[test]
fn the_loader_that_booted_wins_over_grubs_leftover_settings() {
    let (_dir, sys) = kernel_install_machine();
    sys.write("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n")
        .unwrap();
    sys.write("/usr/sbin/update-grub", "").unwrap();
    loader_info(&sys, "systemd-boot 257.7-1");
    assert_eq!(loader::detect(&sys), Ok(Loader::KernelInstall));
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(plan.commands, kernel_install_commands());
    assert!(plan.changes.iter().all(|c| c.path != GRUB_DROP_IN));
    // Without kernel-install, GRUB's settings are no way in.
    sys.remove("/usr/bin/kernel-install").unwrap();
    let err = loader::detect(&sys).unwrap_err();
    assert!(err.contains("systemd-boot, which booted it"), "{err}");
    sys.write("/usr/bin/kernel-install", "").unwrap();
    // GRUB's own word on the command line too: which is it?
    sys.write("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=4c1f ro\n")
        .unwrap();
    let err = plan_arm(&sys, None, "x86_64").unwrap_err();
    assert!(
        matches!(&err, ArmError::BootLoader { loader, .. } if loader.starts_with("conflicting evidence")),
        "{err}"
    );
    // GRUB 2.12's bli module names itself: GRUB it is.
    loader_info(&sys, "GRUB 2.12");
    assert_eq!(loader::detect(&sys), Ok(Loader::Grub));
}

#[test]
fn arm_refuses_without_the_module_for_the_kernel() {
    let (dir, sys) = machine(QEMU);
    sys.remove(MODULE).unwrap();
    // Built for another kernel only.
    sys.write(
        "/lib/modules/6.12.95+deb13-amd64/updates/dkms/crashring.ko.xz",
        "",
    )
    .unwrap();
    let before = sys.snapshot().unwrap();
    let err = plan_arm(&sys, None, "x86_64").unwrap_err();
    assert!(
        err.to_string().starts_with(
            "the crashring module is not installed for the running kernel, 6.1.0-41-amd64 (no crashring.ko under /lib/modules/6.1.0-41-amd64)"
        ),
        "{err}"
    );
    assert_eq!(sys.snapshot().unwrap(), before);
    // Compressed, under the merged /usr.
    sys.write(
        "/usr/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko.zst",
        "",
    )
    .unwrap();
    plan_arm(&sys, None, "x86_64").unwrap();
    // A machine's copy (no /proc): a module for any of its kernels.
    sys.remove("/proc/sys/kernel/osrelease").unwrap();
    std::fs::remove_dir_all(dir.path().join("usr/lib/modules/6.1.0-41-amd64")).unwrap();
    plan_arm(&sys, None, "x86_64").unwrap();
    std::fs::remove_dir_all(dir.path().join("lib/modules")).unwrap();
    let err = plan_arm(&sys, None, "x86_64").unwrap_err();
    assert!(
        matches!(err, ArmError::NoModule(ref w) if w.starts_with("any kernel of")),
        "{err}"
    );
}

#[test]
fn hidden_addresses_are_refused() {
    let hidden: String = QEMU
        .lines()
        .map(|l| {
            let (range, name) = l.split_once(" : ").unwrap();
            let indent = &range[..range.len() - range.trim_start().len()];
            format!("{indent}00000000-00000000 : {name}\n")
        })
        .collect();
    let (_dir, sys) = machine(&hidden);
    let err = plan_arm(&sys, None, "x86_64").unwrap_err();
    assert!(err.to_string().contains("only root sees them"), "{err}");
    // A --size cannot be checked against RAM it cannot see: said, on
    // arm64 too, where nothing is placed and it once went through.
    sys.write("/proc/sys/kernel/osrelease", "6.12.48+deb12-arm64\n")
        .unwrap();
    sys.write("/lib/modules/6.12.48+deb12-arm64/crashring.ko", "")
        .unwrap();
    for (size, arch) in [
        (64 << 20, "x86_64"),
        (64 << 20, "aarch64"),
        (64 << 30, "aarch64"),
    ] {
        let err = plan_arm(&sys, Some(size), arch).unwrap_err();
        assert!(
            matches!(err, ArmError::SizeUnchecked(s) if s == size),
            "{arch}: {err}"
        );
        assert!(
            err.to_string()
                .ends_with("run crashring arm as root, outside a container"),
            "{err}"
        );
    }
}

/// What the next boot will have that this one's /proc/iomem does not
/// show: ramoops' memmap= in GRUB's configuration, and this boot's
/// initrd, which the boot loader puts there again; and a firmware that
/// wipes memory is said.
#[test]
fn placement_keeps_off_configured_memmap_ranges_and_the_initrd() {
    let (_dir, sys) = machine(QEMU);
    sys.write(
        "/etc/default/grub.d/ramoops.cfg",
        "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap=32M\\\\\\$0x22e000000 ramoops.mem_address=0x22e000000\"\n",
    )
    .unwrap();
    let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
    assert_eq!(
        plan.reservation.unwrap().to_string(),
        "memmap 64M@0x22a000000"
    );
    let mut params = vec![0u8; 4096];
    params[0x218..0x21c].copy_from_slice(&0x2800_0000u32.to_le_bytes());
    params[0x21c..0x220].copy_from_slice(&0x0400_0000u32.to_le_bytes());
    params[0x0c0..0x0c4].copy_from_slice(&2u32.to_le_bytes());
    sys.write("/sys/kernel/boot_params/data", "").unwrap();
    std::fs::write(sys.path("/sys/kernel/boot_params/data"), &params).unwrap();
    let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
    assert_eq!(
        plan.reservation.unwrap().to_string(),
        "memmap 64M@0x224000000"
    );
    assert!(!plan.notes.iter().any(|n| n.contains("wipes memory")));
    sys.write("/sys/firmware/efi/systab", "").unwrap();
    sys.write(boot::MOR_VARIABLE, "").unwrap();
    std::fs::write(sys.path(boot::MOR_VARIABLE), [7, 0, 0, 0, 1]).unwrap();
    let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
    assert!(
        plan.notes
            .iter()
            .any(|n| n.contains("firmware wipes memory")),
        "{:?}",
        plan.notes
    );
}
