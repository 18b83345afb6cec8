//! The systemd units kexec-hooks ships, checked by systemd's own
//! `systemd-analyze verify` (with ExecStart pointed at /bin/true, since
//! the crashring binary is not installed here). kdump-tools-dump.service
//! need not exist: a Before= or WantedBy= on a unit that is not installed
//! is no error.

/// Each unit, with the command its ExecStart= must run and the exposure
/// (`systemd-analyze security`, 0 to 10) it may not exceed: the units
/// that parse bytes the crashring group's members wrote score 0.7
/// ("SAFE") today, unsandboxed 9.4 ("UNSAFE"); the upload unit keeps the
/// network for the site's command, and the kdump-tools one writes /etc.
const UNITS: [(&str, &str, &str, &str); 7] = [
    (
        "crashring-recover.service",
        include_str!("../systemd/crashring-recover.service"),
        "/usr/bin/crashring recover\n",
        "1.5",
    ),
    (
        "crashring-capture.service",
        include_str!("../systemd/crashring-capture.service"),
        "/usr/bin/crashring recover --capture\n",
        "1.5",
    ),
    (
        "crashring-device.service",
        include_str!("../systemd/crashring-device.service"),
        "/usr/bin/udevadm trigger --settle --action=add --subsystem-match=misc --sysname-match=crashring\n",
        "3.0",
    ),
    (
        "crashring-kdump-tools.service",
        include_str!("../systemd/crashring-kdump-tools.service"),
        "/usr/bin/crashring arm --kdump-tools\n",
        "3.0",
    ),
    (
        "crashring-upload.service",
        include_str!("../systemd/crashring-upload.service"),
        "/usr/bin/crashring upload\n",
        "3.0",
    ),
    // The template, checked as an instance of it.
    (
        "crashring-request@1.service",
        include_str!("../systemd/crashring-request@.service"),
        "/usr/bin/crashring serve-request\n",
        "1.5",
    ),
    // A socket runs nothing and has no exposure of its own.
    (
        "crashring-request.socket",
        include_str!("../systemd/crashring-request.socket"),
        "",
        "",
    ),
];

/// The units in a directory, as `systemd-analyze verify` finds them: a
/// socket's service beside it (`Accept=yes`: the template), each
/// ExecStart= pointed at /bin/true.
fn unit_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, unit, command, _) in UNITS {
        let exec = format!("ExecStart={command}");
        assert!(
            command.is_empty() || unit.contains(&exec),
            "{name} does not run {command}"
        );
        let unit = if command.is_empty() {
            unit.to_string()
        } else {
            unit.replace(&exec, "ExecStart=/bin/true\n")
        };
        std::fs::write(dir.path().join(name), &unit).unwrap();
        if let Some(template) = name.strip_suffix("@1.service") {
            std::fs::write(dir.path().join(format!("{template}@.service")), &unit).unwrap();
        }
    }
    dir
}

#[test]
fn every_unit_verifies() {
    let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is missing (CI must check the units)"
        );
        eprintln!("skipped: no systemd-analyze");
        return;
    };
    assert!(out.status.success());
    let dir = unit_dir();
    for (name, ..) in UNITS {
        let path = dir.path().join(name);
        let out = std::process::Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_unit_is_sandboxed() {
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is missing (CI must check the units)"
        );
        eprintln!("skipped: no systemd-analyze");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, unit, _, at_most) in UNITS {
        if at_most.is_empty() {
            continue;
        }
        // --threshold counts tenths (systemd 250 and later, Debian 12's 252).
        let (whole, tenths) = at_most.split_once('.').unwrap();
        let threshold = format!("--threshold={whole}{tenths}");
        let path = dir.path().join(name);
        std::fs::write(&path, unit).unwrap();
        let out = std::process::Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager", &threshold])
            .arg(&path)
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && table.contains("Overall exposure level"),
            "{name} is exposed beyond {at_most}:\n{table}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// In a capture boot the region is copied to a temporary file before it
/// is read: that copy must go to the bundle directory on disk (the unit's
/// StateDirectory=), never to a tmpfs /tmp in the capture kernel's small
/// RAM, where a 64 MiB region can run it out of memory.
#[test]
fn the_capture_unit_snapshots_on_disk() {
    let unit = include_str!("../systemd/crashring-capture.service");
    let setting = |key: &str| {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key))
            .collect::<Vec<_>>()
    };
    assert_eq!(setting("StateDirectory="), ["crashring"]);
    assert_eq!(
        setting("Environment=TMPDIR="),
        ["/var/lib/crashring"],
        "crashring-capture.service's TMPDIR is not its bundle directory"
    );
}

/// The recovery unit runs where the module is loaded and also where the
/// machine is armed without it (DKMS built no module for the kernel,
/// Secure Boot refused it): there `crashring recover` says NOT_RECORDING,
/// which a box skipped by the condition would never say. Either triggers
/// (`|`); a capture boot (/proc/vmcore) never, nor a container, whose
/// /sys is the host's.
#[test]
fn the_recovery_unit_runs_on_an_armed_machine_without_the_module() {
    let unit = include_str!("../systemd/crashring-recover.service");
    assert!(unit
        .lines()
        .any(|l| l == "ConditionVirtualization=!container"));
    let conditions: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("ConditionPathExists="))
        .collect();
    assert_eq!(
        conditions,
        [
            "|/sys/kernel/crashring/previous_summary",
            &format!("|{}", kexec_hooks::loader::RECORD),
            "!/proc/vmcore",
        ]
    );
}
