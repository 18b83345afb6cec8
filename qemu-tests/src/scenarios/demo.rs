//! `cargo xtask demo`: the project's main job on a fresh machine. Installs
//! what it needs, then tells two stories. A Debian 12 box (a real systemd
//! guest in QEMU) gets the two packages the way a user installs them, is
//! armed, and crashes three times under a writer per CPU with nobody there;
//! each boot bundles the last crash by itself, keeping the newest two, and
//! the demo opens the newest bundle. Then Debian's 6.12 kernel panics once
//! more and a kexec capture kernel saves the trace (`/proc/vmcore` and
//! makedumpfile's dumps), summarised with the host's `crashring` binary.

use super::{host_crashring, run as run_scenario};
use crate::env::setup;
use anyhow::{Context, Result};
use std::path::Path;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell) -> Result<()> {
    setup::run(sh)?;
    let root = sh.current_dir().join("target/crashring-demo");
    let debian = root.join("debian");
    let kdump = root.join("kdump");
    sh.create_dir(&debian)?;
    sh.create_dir(&kdump)?;
    let box_verdict = run_scenario(sh, "signage-reboot-loop", "6.12", Some(debian.clone()))?;
    let kdump_verdict = run_scenario(sh, "kdump-vmcore", "6.12", Some(kdump.clone()))?;
    let crashring = host_crashring(sh)?;

    println!("\n== path 1: an unattended Debian box crashed three times and kept its traces ==");
    open_newest_bundle(sh, &debian)?;
    println!("check: {box_verdict}");

    println!("\n== path 2: a kdump capture kernel saved the memory ==");
    let dump = std::fs::canonicalize(kdump.join("capture/vmcore-zlib"))?;
    summarise(sh, &crashring, &dump, &kdump)?;
    println!("check: {kdump_verdict}");
    println!(
        "other dumps:   {} (makedumpfile -l, -F, -E; the capture kernel's own extract is trace.jsonl)",
        kdump.join("capture").display()
    );
    Ok(())
}

/// What the box's journal said at each recovery, the newest bundle's
/// summary and README (which says how to open each file), and the end of
/// its trace as babeltrace2 and trace-cmd read it.
fn open_newest_bundle(sh: &Shell, dir: &Path) -> Result<()> {
    let log = std::fs::read_to_string(dir.join("report.txt"))?;
    println!("the box's journal, one message per crash (journalctl MESSAGE_ID=...):");
    for l in log
        .lines()
        .filter_map(|l| l.split_once("crashring-test: all boots message "))
    {
        println!("  {}", l.1.trim());
    }
    let last_boot = log
        .lines()
        .rev()
        .filter_map(|l| l.split_once("crashring-test: boot "))
        .find_map(|(_, rest)| rest.split_once(" status "))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    println!("crashring status on the box's last boot:");
    let status = format!("crashring-test: boot {last_boot} status ");
    for l in log.lines().filter_map(|l| l.split_once(status.as_str())) {
        println!("  {}", l.1);
    }
    let bundles = dir.join("bundles/crashring");
    let mut names: Vec<String> = std::fs::read_dir(&bundles)?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".tar.gz")
                .map(String::from)
        })
        .collect();
    names.sort();
    let newest = names.last().context("the box kept no bundle")?;
    println!(
        "kept in /var/lib/crashring (copied to {}): {names:?}",
        bundles.display()
    );
    let summary = std::fs::read_to_string(bundles.join(format!("{newest}.json")))?;
    println!("{newest}.json (for a collector):\n  {}", summary.trim());
    let archive = bundles.join(format!("{newest}.tar.gz"));
    cmd!(sh, "tar -xzf {archive} -C {bundles}").quiet().run()?;
    let top = bundles.join(newest);
    let readme = std::fs::read_to_string(top.join("README.txt"))?;
    println!("\nunpacked in {}; its README.txt:\n", top.display());
    println!("{readme}");
    let ctf = top.join("kernel/ctf");
    let text = cmd!(sh, "babeltrace2 {ctf}").quiet().read()?;
    println!(
        "the last events before the crash (babeltrace2 {}):",
        ctf.display()
    );
    let lines: Vec<&str> = text.lines().collect();
    for l in &lines[lines.len().saturating_sub(8)..] {
        println!("  {l}");
    }
    let dat = top.join("kernel/trace.dat");
    let report = cmd!(sh, "trace-cmd report -i {dat}").quiet().read()?;
    println!("the same in trace-cmd report -i {}:", dat.display());
    let lines: Vec<&str> = report.lines().collect();
    for l in &lines[lines.len().saturating_sub(4)..] {
        println!("  {l}");
    }
    Ok(())
}

/// Prints `crashring info` of `input`, the last 20 events before the
/// panic, and where the files are; writes the full trace beside them.
fn summarise(sh: &Shell, crashring: &Path, input: &Path, dir: &Path) -> Result<()> {
    // Exit status 1 means "recovered, with losses": still a result to show.
    let info = cmd!(sh, "{crashring} info {input}")
        .ignore_status()
        .read()?;
    let text = cmd!(sh, "{crashring} extract {input}")
        .ignore_status()
        .read()?;
    let trace = dir.join("trace.txt");
    sh.write_file(&trace, &text)
        .with_context(|| format!("writing {}", trace.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    println!("{info}");
    println!("last 20 events before the panic:");
    for l in &lines[lines.len().saturating_sub(20)..] {
        println!("  {l}");
    }
    println!("serial log:    {}", dir.join("serial.log").display());
    println!("input:         {}", input.display());
    println!("full trace:    {} ({} lines)", trace.display(), lines.len());
    Ok(())
}
