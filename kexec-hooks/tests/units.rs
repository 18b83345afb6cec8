//! The systemd units kexec-hooks ships, checked by systemd's own
//! `systemd-analyze verify` (with ExecStart pointed at /bin/true, since
//! the crashring binary is not installed here).

#[test]
fn the_recovery_unit_verifies() {
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
    let unit = include_str!("../systemd/crashring-recover.service");
    assert!(unit.contains("ExecStart=/usr/bin/crashring recover\n"));
    let path = dir.path().join("crashring-recover.service");
    std::fs::write(
        &path,
        unit.replace("/usr/bin/crashring recover", "/bin/true"),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
