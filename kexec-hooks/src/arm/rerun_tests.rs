//! `crashring arm` and `disarm` run again after their commands did not
//! all succeed: the files already say what they want, and the record's
//! pending mark (or the boot entries themselves) says what is left.

use super::tests::{
    grub_replaced_by_systemd_boot, kernel_install_commands, kernel_install_machine, machine, QEMU,
};
use super::*;

fn update_initramfs() -> Vec<String> {
    ["update-initramfs", "-u", "-k", "all"]
        .map(String::from)
        .to_vec()
}

#[test]
fn kernel_install_that_did_not_succeed_runs_again() {
    let (dir, sys) = kernel_install_machine();
    sys.write(crate::initramfs::INITRAMFS_TOOLS_HOOK, "")
        .unwrap();
    sys.write("/usr/sbin/update-initramfs", "").unwrap();
    let before = sys.snapshot().unwrap();
    let all: Vec<Vec<String>> = std::iter::once(update_initramfs())
        .chain(kernel_install_commands())
        .collect();
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(plan.commands, all);
    // update-initramfs failed: the files are written, no entry has the
    // range, and arming again must not call that armed.
    plan.apply(&sys).unwrap();
    let again = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(again.commands, all);
    assert!(
        again.notes.iter().any(|n| n.contains("did not finish")
            && n.contains("`update-initramfs -u -k all; kernel-install add 6.1.0-41-amd64")),
        "{:?}",
        again.notes
    );
    // The dry run shows the mark going.
    assert!(
        again
            .diff()
            .contains("-pending=arm: update-initramfs -u -k all; kernel-install add"),
        "{}",
        again.diff()
    );
    // Failed again: still pending.
    again.apply(&sys).unwrap();
    assert_eq!(plan_arm(&sys, None, "x86_64").unwrap().commands, all);
    again.commands_done(&sys).unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());

    // Disarm likewise: the record stays, marked, until its commands
    // succeed, since it is all that says what to undo.
    let disarm = plan_disarm(&sys, false).unwrap();
    assert_eq!(disarm.commands, all);
    disarm.apply(&sys).unwrap();
    assert!(loader::armed(&sys).unwrap().unwrap().pending.is_some());
    let again = plan_disarm(&sys, false).unwrap();
    assert_eq!(again.commands, all);
    again.apply_succeeded(&sys);
    assert!(plan_disarm(&sys, false).unwrap().is_empty());
    assert_eq!(
        sys.snapshot().unwrap(),
        before,
        "in {}",
        dir.path().display()
    );
}

#[test]
fn grub_and_grubby_that_did_not_succeed_run_again() {
    // No grub.cfg to check, as in a machine's copy: only the mark tells.
    let (_dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
    assert_eq!(
        plan_arm(&sys, None, "x86_64").unwrap().commands,
        [["update-grub"]]
    );
    let disarm = plan_disarm(&sys, false).unwrap();
    disarm.apply(&sys).unwrap();
    assert_eq!(
        plan_disarm(&sys, false).unwrap().commands,
        [["update-grub"]]
    );

    let (_dir, sys) = machine(QEMU);
    sys.remove("/usr/sbin/update-grub").unwrap();
    sys.write("/usr/sbin/grubby", "").unwrap();
    let plan = plan_arm(&sys, None, "x86_64").unwrap();
    plan.apply(&sys).unwrap();
    assert_eq!(
        plan_arm(&sys, None, "x86_64").unwrap().commands,
        plan.commands
    );
    plan.commands_done(&sys).unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
}

/// A machine armed before the record kept a mark, or whose kernel-install
/// add failed some other way: the entry of an installed kernel that
/// boots without the range has kernel-install add run again.
#[test]
fn a_boot_entry_without_the_range_has_kernel_install_run_again() {
    let (_dir, sys) = kernel_install_machine();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    let entry = "/boot/efi/loader/entries/6b1f-6.1.0-41-amd64.conf";
    let options = "options root=UUID=4c1f ro quiet";
    sys.write(
        entry,
        &format!("title Debian\nversion 6.1.0-41-amd64\n{options}\n"),
    )
    .unwrap();
    let again = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(again.commands, kernel_install_commands());
    assert!(
        again
            .notes
            .iter()
            .any(|n| n.starts_with(&format!("{entry} boots without memmap=64M$0x22c000000"))),
        "{:?}",
        again.notes
    );
    sys.write(
        entry,
        &format!(
            "version 6.1.0-41-amd64\n{options} memmap=64M$0x22c000000 crash_kexec_post_notifiers\n"
        ),
    )
    .unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
    // A kernel no longer installed is no one's to rewrite.
    sys.write(
        "/boot/efi/loader/entries/6b1f-5.10.0-9-amd64.conf",
        &format!("version 5.10.0-9-amd64\n{options}\n"),
    )
    .unwrap();
    assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
}

/// A GRUB machine moved to systemd-boot, grub2-common purged: the
/// disarm whose update-grub was not found leaves the record pending, and
/// update-grub, not there to run, must not be planned again, or every
/// disarm fails and every arm refuses (the record names another loader).
#[test]
fn a_pending_command_whose_tool_is_gone_is_not_run_again() {
    let (_dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    grub_replaced_by_systemd_boot(&sys);
    plan_disarm(&sys, false).unwrap().apply(&sys).unwrap();
    assert!(loader::armed(&sys).unwrap().unwrap().pending.is_some());
    let again = plan_disarm(&sys, false).unwrap();
    assert!(again.commands.is_empty(), "{:?}", again.commands);
    assert!(
        again.notes.iter().any(|n| n.starts_with(
            "update-grub is not installed (/usr/sbin/update-grub, /sbin/update-grub)"
        )),
        "{:?}",
        again.notes
    );
    again.apply_succeeded(&sys);
    assert_eq!(loader::armed(&sys).unwrap(), None);
    // Arming through the new loader no longer refuses.
    sys.write("/proc/cmdline", "root=UUID=4c1f ro quiet\n")
        .unwrap();
    let arm = plan_arm(&sys, None, "x86_64").unwrap();
    assert!(
        arm.changes.iter().any(|c| c.path == loader::KERNEL_CMDLINE),
        "{:?}",
        arm.changes
    );
}

/// An initramfs rebuild left unfinished whose generator is gone since:
/// not planned again, and said, since the images built before still hold
/// the module and the options of then.
#[test]
fn an_unfinished_initramfs_rebuild_that_cannot_run_again_is_said() {
    let (_dir, sys) = kernel_install_machine();
    sys.write(crate::initramfs::INITRAMFS_TOOLS_HOOK, "")
        .unwrap();
    sys.write("/usr/sbin/update-initramfs", "").unwrap();
    plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
    sys.remove("/usr/sbin/update-initramfs").unwrap();
    let said = |notes: &[String]| {
        notes.iter().any(|n| {
            n.starts_with("the initramfs rebuild an earlier arm or disarm left unfinished (`update-initramfs -u -k all; kernel-install add")
                && n.contains("cannot run again")
        })
    };
    let again = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(again.commands, kernel_install_commands());
    assert!(said(&again.notes), "{:?}", again.notes);
    let disarm = plan_disarm(&sys, false).unwrap();
    assert!(said(&disarm.notes), "{:?}", disarm.notes);
    // Once the commands that can run succeeded, nothing is pending.
    again.apply_succeeded(&sys);
    assert!(!said(&plan_arm(&sys, None, "x86_64").unwrap().notes));
}

/// A command that is there but fails every time: `disarm --force` takes
/// the record away with the files, whatever the command does.
#[test]
fn a_forced_disarm_drops_the_pending_mark() {
    let (_dir, sys) = kernel_install_machine();
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    plan_disarm(&sys, false).unwrap().apply(&sys).unwrap();
    let forced = plan_disarm(&sys, true).unwrap();
    assert_eq!(forced.commands, kernel_install_commands());
    assert!(!forced.resumable());
    assert!(
        forced
            .notes
            .iter()
            .any(|n| n.starts_with("--force: /etc/crashring/armed goes now")),
        "{:?}",
        forced.notes
    );
    // kernel-install add failed again: nothing is left to run it.
    forced.apply(&sys).unwrap();
    assert_eq!(loader::armed(&sys).unwrap(), None);
    assert!(plan_disarm(&sys, false).unwrap().is_empty());
}

/// grubby armed both words and the machine booted with them, then a
/// command did not succeed: arming again must keep the notifiers arm's,
/// as the record had them, or no disarm takes them back.
#[test]
fn grubby_run_again_keeps_the_words_it_added() {
    let (_dir, sys) = machine(QEMU);
    sys.remove("/usr/sbin/update-grub").unwrap();
    sys.write("/usr/sbin/grubby", "").unwrap();
    let both = ["memmap=64M$0x22c000000", loader::POST_NOTIFIERS].map(String::from);
    let record = Armed {
        reservation: plan_arm(&sys, None, "x86_64").unwrap().reservation.unwrap(),
        loader: Loader::Grubby,
        added: both.to_vec(),
        created_from: None,
        pending: Some("grubby --update-kernel=ALL --remove-args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers".into()),
    };
    sys.write(loader::RECORD, &record.text()).unwrap();
    sys.write(
        "/proc/cmdline",
        "BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=UUID=4c1f ro memmap=64M$0x22c000000 crash_kexec_post_notifiers\n",
    )
    .unwrap();
    let again = plan_arm(&sys, None, "x86_64").unwrap();
    assert_eq!(
        again.commands,
        [[
            "grubby",
            "--update-kernel=ALL",
            "--args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers"
        ]]
    );
    again.apply_succeeded(&sys);
    assert_eq!(loader::armed(&sys).unwrap().unwrap().added, both);
}

/// Booted armed, a disarm whose commands failed removed the module's
/// options: a bare `modprobe crashring` then refuses (no memory given),
/// so the advice to load it and recover spells out the range.
#[test]
fn not_loaded_after_an_unfinished_disarm_names_the_range() {
    let (dir, sys) = machine(QEMU);
    plan_arm(&sys, None, "x86_64")
        .unwrap()
        .apply_succeeded(&sys);
    let live = System::live_at(dir.path());
    let not_loaded = |cmdline: &str| {
        sys.write("/proc/cmdline", cmdline).unwrap();
        let err = plan_disarm(&live, false).unwrap_err();
        assert!(matches!(err, ArmError::NotLoaded { .. }), "{err}");
        err.to_string()
    };
    let booted = "BOOT_IMAGE=/vmlinuz ro memmap=64M$0x22c000000 crash_kexec_post_notifiers\n";
    assert!(not_loaded(booted).contains("(`modprobe crashring`)"));
    plan_disarm(&sys, false).unwrap().apply(&sys).unwrap();
    let said = not_loaded(booted);
    assert!(
        said.contains("(`modprobe crashring region=64M@0x22c000000 user_streams=8`)"),
        "{said}"
    );
    // reserve_mem=: the module takes the kernel's range by its name.
    let mut record = loader::armed(&sys).unwrap().unwrap();
    record.reservation = Reservation::ReserveMem { size: 64 << 20 };
    sys.write(loader::RECORD, &record.text()).unwrap();
    let said = not_loaded("ro reserve_mem=64M:2M:crashring crash_kexec_post_notifiers\n");
    assert!(
        said.contains("(`modprobe crashring reserve_mem=crashring user_streams=8`)"),
        "{said}"
    );
}
