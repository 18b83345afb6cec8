//! The systemd units kexec-hooks ships, checked by systemd's own
//! `systemd-analyze verify` (with ExecStart pointed at /bin/true, since
//! the crashring binary is not installed here). kdump-tools-dump.service
//! need not exist: a Before= or WantedBy= on a unit that is not installed
//! is no error.

/// Each unit, with the command its ExecStart= must run.
const UNITS: [(&str, &str, &str); 2] = [
    (
        "crashring-recover.service",
        include_str!("../systemd/crashring-recover.service"),
        "/usr/bin/crashring recover\n",
    ),
    (
        "crashring-capture.service",
        include_str!("../systemd/crashring-capture.service"),
        "/usr/bin/crashring recover --capture\n",
    ),
];

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
    let dir = tempfile::tempdir().unwrap();
    for (name, unit, command) in UNITS {
        let exec = format!("ExecStart={command}");
        assert!(unit.contains(&exec), "{name} does not run {command}");
        let path = dir.path().join(name);
        std::fs::write(&path, unit.replace(&exec, "ExecStart=/bin/true\n")).unwrap();
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
