//! `cargo xtask demo`: the project's main job on a fresh machine. Installs
//! what it needs, boots Debian's 6.12 kernel in QEMU with crashring.ko,
//! runs a workload and panics the guest twice: once to recover the trace
//! on the next boot, once to recover it through a kexec capture kernel
//! (`/proc/vmcore` and makedumpfile's dumps). Then it summarises both with
//! the host's `crashring` binary.

use super::{host_crashring, run as run_scenario};
use crate::env::setup;
use anyhow::{Context, Result};
use std::path::Path;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell) -> Result<()> {
    setup::run(sh)?;
    let root = sh.current_dir().join("target/crashring-demo");
    let next_boot = root.join("next-boot");
    let kdump = root.join("kdump");
    sh.create_dir(&next_boot)?;
    sh.create_dir(&kdump)?;
    let boot_verdict = run_scenario(sh, "warm-reboot", "6.12", Some(next_boot.clone()))?;
    let kdump_verdict = run_scenario(sh, "kdump-vmcore", "6.12", Some(kdump.clone()))?;
    let crashring = host_crashring(sh)?;

    println!("\n== path 1: the next boot kept the crashed generation ==");
    let image = std::fs::canonicalize(next_boot.join("previous.img"))?;
    summarise(sh, &crashring, &image, &next_boot)?;
    println!("check: {boot_verdict}");

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
