//! Debian's kdump-tools on an armed machine: the part `arm` adds to its
//! configuration, so that the capture kernel boots with a command line
//! kdump-config's `eval` cannot mangle, and its repair when a later
//! install of kdump-tools (or ucf) leaves the file without it.

use crate::arm::{ArmError, Change, Plan};
use crate::loader::{self, read};
use crate::reserve::{self, Reservation};
use crate::system::System;

/// Debian's kdump-tools configuration: its presence means a capture
/// kernel may boot with this machine's command line. It is not ours, so
/// `arm` only adds a marked part to it (see [`kdump_part`]).
pub const KDUMP_TOOLS: &str = "/etc/default/kdump-tools";
const KDUMP_PART_BEGIN: &str =
    "# >>> Added by `crashring arm`; `crashring disarm` removes it, to the end mark.";
const KDUMP_PART_END: &str = "# <<< End of crashring arm's part.";

/// What `arm` adds to kdump-tools' configuration. kdump-config builds the
/// capture kernel's command line from /proc/cmdline and runs the kexec
/// command through `eval`, which expands the `$` of memmap=SIZE$ADDR (to
/// `$0`, the script's name): the capture kernel gets a bare memmap=SIZE,
/// which takes all its memory above SIZE away, and dies before its
/// console starts. The capture kernel needs no range reserved (the
/// module there only reads it), so every memmap= with a `$` is left out,
/// with what kdump-config leaves out itself and its escaping of `"`.
///
/// A `reserve_mem=` range (arm's way on arm64) is left out too: the
/// capture kernel would set another aside in the little memory
/// `crashkernel=` gives it, for nothing.
///
/// When the admin set a KDUMP_CMDLINE of their own above the part, it is
/// kept, less such words; an empty one is none. The part cannot ask the shell whether
/// KDUMP_CMDLINE is set: kdump-tools.service also reads the file as an
/// EnvironmentFile=, which sets it (to the text of the file's last
/// assignment) before kdump-config sources the file. So `arm` looks at
/// the file instead, and writes the part that fits it.
fn kdump_part(admin_cmdline: bool, reservation: Reservation) -> String {
    let (leave_out, why) = match reservation {
        Reservation::Memmap(_) => (
            "s/(^| )memmap=[^ ]*[$][^ ]*//g".to_string(),
            "# kdump-config's eval would expand the `$` of memmap=SIZE$ADDR: the\n\
             # capture kernel's command line without it (it needs no range reserved).",
        ),
        Reservation::ReserveMem { .. } => (
            format!(
                "s/(^| )memmap=[^ ]*[$][^ ]*//g;s/(^| )reserve_mem=[^ ]*:{}( |$)/\\2/g",
                reserve::LABEL
            ),
            "# The capture kernel's command line without crashring's reserve_mem=\n\
             # (it needs no range reserved), nor a memmap= kdump-config's eval would mangle.",
        ),
    };
    let from_proc = format!("sed -re 's/(^| )(crashkernel|hugepages|hugepagesz|abm)=[^ ]*//g;{leave_out};s/\"/\\\\\\\\\"/' /proc/cmdline");
    // An admin's empty KDUMP_CMDLINE="" (an uncommented default) is none:
    // kdump-config would then take /proc/cmdline itself, past the part,
    // and hand the capture kernel a bare memmap=SIZE. One assignment on
    // one line, as EnvironmentFile= reads the file too.
    let assignment = if admin_cmdline {
        format!("KDUMP_CMDLINE=$(if [ -n \"$KDUMP_CMDLINE\" ]; then printf '%s\\n' \"$KDUMP_CMDLINE\" | sed -re '{leave_out}'; else {from_proc}; fi)")
    } else {
        format!("KDUMP_CMDLINE=$({from_proc})")
    };
    format!(
        "{KDUMP_PART_BEGIN}\n\
         {why}\n\
         {assignment}\n\
         {KDUMP_PART_END}\n"
    )
}

/// Whether the file (without our part) assigns KDUMP_CMDLINE itself.
fn has_admin_cmdline(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("KDUMP_CMDLINE="))
}

/// Whether kdump-tools' configuration, when there is one, lacks the part
/// an armed machine's capture kernel needs: installing kdump-tools after
/// `arm`, or ucf's "install the maintainer's version", leaves it without,
/// and the capture kernel then boots with a bare memmap=SIZE.
pub fn kdump_part_missing(sys: &System) -> bool {
    match loader::armed(sys) {
        Ok(Some(armed)) => change(sys, Some(armed.reservation)).is_ok_and(|c| c.is_some()),
        // Not armed, no reservation to fit a part to: whether it has one.
        _ => read(sys, KDUMP_TOOLS)
            .ok()
            .flatten()
            .is_some_and(|text| !text.contains(KDUMP_PART_BEGIN)),
    }
}

/// `arm --kdump-tools` (crashring-kdump-tools.service, before kdump-tools
/// loads its capture kernel on every boot): the part put back where it is
/// missing, on an armed machine only; nothing else changes.
pub fn plan_kdump_repair(sys: &System) -> Result<Plan, ArmError> {
    let Some(armed) = loader::armed(sys)? else {
        return Ok(Plan::default());
    };
    Ok(Plan {
        changes: change(sys, Some(armed.reservation))?.into_iter().collect(),
        reservation: Some(armed.reservation),
        ..Plan::default()
    })
}

/// `text` without a part of ours.
fn without_kdump_part(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        match line.trim_end() {
            KDUMP_PART_BEGIN => inside = true,
            KDUMP_PART_END if inside => inside = false,
            _ if !inside => out.push_str(line),
            _ => {}
        }
    }
    out
}

/// kdump-tools' configuration with our part for `arming`'s reservation
/// at its end, or (`None`) without it, if the file exists and that
/// changes it.
pub(crate) fn change(
    sys: &System,
    arming: Option<Reservation>,
) -> Result<Option<Change>, ArmError> {
    let Some(old) = read(sys, KDUMP_TOOLS)? else {
        return Ok(None);
    };
    let mut new = without_kdump_part(&old);
    if let Some(reservation) = arming {
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        let admin = has_admin_cmdline(&new);
        new.push_str(&kdump_part(admin, reservation));
    }
    Ok((new != old).then_some(Change {
        path: KDUMP_TOOLS,
        old: Some(old),
        new: Some(new),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::plan_arm;
    use crate::arm::tests::{disarm_restores, machine, QEMU};

    /// Debian 12's /etc/default/kdump-tools, in part.
    const KDUMP_DEFAULTS: &str =
        "USE_KDUMP=1\nKDUMP_KERNEL=/var/lib/kdump/vmlinuz\n#KDUMP_CMDLINE=\"\"\n";

    #[test]
    fn kdump_tools_gets_a_part_that_disarm_takes_away() {
        let (dir, sys) = machine(QEMU);
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        assert!(plan
            .notes
            .iter()
            .any(|n| n.starts_with("kdump-tools is installed")));
        assert!(plan.diff().contains(&format!("+{KDUMP_PART_BEGIN}\n")));
        plan.apply_succeeded(&sys);
        let armed = sys.read(KDUMP_TOOLS).unwrap().unwrap();
        let reservation = plan.reservation.unwrap();
        assert!(
            armed.starts_with(KDUMP_DEFAULTS) && armed.ends_with(&kdump_part(false, reservation))
        );
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
        disarm_restores(&sys, dir.path(), &before);
    }

    /// What kdump-config does with the command line (kdump_load in
    /// kdump-tools 1.8.1): its defaults sourced, then the kexec command
    /// built in a string and run through eval; echo stands in for kexec.
    fn capture_command_line(defaults: &str, cmdline: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let proc_cmdline = dir.path().join("cmdline");
        std::fs::write(&proc_cmdline, cmdline).unwrap();
        // kdump-tools.service reads the file as an EnvironmentFile= first:
        // KDUMP_CMDLINE is set, to its last assignment's text, before
        // kdump-config sources the file.
        let environment = defaults
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("KDUMP_CMDLINE="))
            .map(|v| v.trim_matches('"').to_string());
        let script = r#"defaults="$1"; . "$defaults"
if [ -z "$KDUMP_CMDLINE" ] ; then
	KDUMP_CMDLINE=$(sed -re 's/(^| )(crashkernel|hugepages|hugepagesz|abm)=[^ ]*//g;s/"/\\\\"/' "$2")
fi
KDUMP_CMDLINE="$KDUMP_CMDLINE reset_devices"
KEXEC_CMD="echo --command-line=\"$KDUMP_CMDLINE\""
eval $KEXEC_CMD"#;
        let file = dir.path().join("kdump-tools");
        std::fs::write(
            &file,
            defaults.replace("/proc/cmdline", &proc_cmdline.to_string_lossy()),
        )
        .unwrap();
        let mut sh = std::process::Command::new("/bin/sh");
        if let Some(v) = environment {
            sh.env("KDUMP_CMDLINE", v);
        }
        let out = sh
            .args(["-c", script, "kdump-config"])
            .arg(&file)
            .arg(&proc_cmdline)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn an_admins_own_capture_command_line_is_kept() {
        let cmdline = "root=UUID=4c1f ro memmap=64M$0x6be00000 console=ttyS0\n";
        let (_dir, sys) = machine(QEMU);
        let own = "KDUMP_CMDLINE=\"root=/dev/sda1 ro nr_cpus=1 irqpoll\"\n";
        sys.write(KDUMP_TOOLS, &format!("{KDUMP_DEFAULTS}{own}"))
            .unwrap();
        plan_arm(&sys, None, "x86_64")
            .unwrap()
            .apply_succeeded(&sys);
        let admin = sys.read(KDUMP_TOOLS).unwrap().unwrap();
        assert_eq!(
            capture_command_line(&admin, cmdline),
            "--command-line=root=/dev/sda1 ro nr_cpus=1 irqpoll reset_devices\n"
        );
    }

    #[test]
    fn a_lost_kdump_part_is_seen_and_put_back_on_an_armed_machine_only() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, sys) = machine(QEMU);
        // kdump-tools installed after arm: no part.
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        assert!(kdump_part_missing(&sys));
        assert!(plan_kdump_repair(&sys).unwrap().is_empty(), "not armed");
        plan_arm(&sys, Some(64 << 20), "x86_64")
            .unwrap()
            .apply_succeeded(&sys);
        assert!(!kdump_part_missing(&sys));
        // ucf's "install the maintainer's version", 0600 as the admin made it.
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        let path = sys.path(KDUMP_TOOLS);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(kdump_part_missing(&sys));
        let repair = plan_kdump_repair(&sys).unwrap();
        assert_eq!(repair.changes.len(), 1);
        assert!(repair.commands.is_empty());
        repair.apply_succeeded(&sys);
        assert!(!kdump_part_missing(&sys));
        assert!(plan_kdump_repair(&sys).unwrap().is_empty());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the file holds FTP_PASSWORD: its mode stays");
    }

    #[test]
    fn kdump_configs_eval_gets_a_command_line_without_our_dollar() {
        let cmdline = "root=UUID=4c1f ro memmap=64M$0x6be00000 crash_kexec_post_notifiers console=ttyS0 crashkernel=384M-:128M\n";
        // What kdump-tools alone makes of it: a bare memmap=64M.
        let bare = capture_command_line(KDUMP_DEFAULTS, cmdline);
        assert!(bare.contains("memmap=64Mkdump-configx6be00000"), "{bare}");
        let memmap = Reservation::Memmap(crate::iomem::Placement {
            start: 0x6be0_0000,
            size: 64 << 20,
        });
        let with_part = format!("{KDUMP_DEFAULTS}{}", kdump_part(false, memmap));
        assert_eq!(
            capture_command_line(&with_part, cmdline),
            "--command-line=root=UUID=4c1f ro crash_kexec_post_notifiers console=ttyS0 reset_devices\n"
        );
    }

    #[test]
    fn the_capture_kernel_reserves_no_reserve_mem_range_of_ours() {
        // arm64's line: the range is arm's reserve_mem=, beside one of
        // the admin's own for ftrace, which stays.
        let cmdline = "root=UUID=4c1f ro reserve_mem=64M:2M:crashring reserve_mem=4M:4096:trace crash_kexec_post_notifiers crashkernel=384M-:128M reserve_mem=8M:2M:crashring\n";
        let ours = Reservation::ReserveMem { size: 64 << 20 };
        let with_part = format!("{KDUMP_DEFAULTS}{}", kdump_part(false, ours));
        assert_eq!(
            capture_command_line(&with_part, cmdline),
            "--command-line=root=UUID=4c1f ro reserve_mem=4M:4096:trace crash_kexec_post_notifiers reset_devices\n"
        );
        // An admin's own KDUMP_CMDLINE loses it too.
        let admin = format!(
            "{KDUMP_DEFAULTS}KDUMP_CMDLINE=\"ro reserve_mem=64M:2M:crashring quiet\"\n{}",
            kdump_part(true, ours)
        );
        assert_eq!(
            capture_command_line(&admin, cmdline),
            "--command-line=ro quiet reset_devices\n"
        );
    }

    /// An uncommented `KDUMP_CMDLINE=""` sets none: the capture kernel
    /// gets what it would without one, never a bare memmap=64M (which
    /// leaves it no memory).
    #[test]
    fn an_empty_admin_command_line_is_none() {
        let cmdline =
            "root=UUID=4c1f ro memmap=64M$0x6be00000 console=ttyS0 crashkernel=384M-:128M\n";
        let memmap = Reservation::Memmap(crate::iomem::Placement {
            start: 0x6be0_0000,
            size: 64 << 20,
        });
        let plain = capture_command_line(
            &format!("{KDUMP_DEFAULTS}{}", kdump_part(false, memmap)),
            cmdline,
        );
        assert_eq!(
            plain,
            "--command-line=root=UUID=4c1f ro console=ttyS0 reset_devices\n"
        );
        let empty = format!("{KDUMP_DEFAULTS}KDUMP_CMDLINE=\"\"\n");
        assert!(has_admin_cmdline(&empty));
        let got = capture_command_line(&format!("{empty}{}", kdump_part(true, memmap)), cmdline);
        assert!(!got.contains("memmap=64M"), "{got}");
        assert_eq!(got, plain);
    }
}
