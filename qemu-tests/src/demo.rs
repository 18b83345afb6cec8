//! `cargo xtask demo`: the project's main job on a fresh machine. Installs
//! what it needs, boots Debian's 6.12 kernel in QEMU with crashring.ko,
//! runs a workload, panics the guest, recovers the trace on the next boot,
//! and summarises it with the `crashring` binary.

use crate::{guest, run_scenario, setup};
use anyhow::Result;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell) -> Result<()> {
    setup::run(sh)?;
    let dir = sh.current_dir().join("target/crashring-demo");
    sh.create_dir(&dir)?;
    let verdict = run_scenario(sh, "warm-reboot", "6.12", Some(dir.clone()))?;
    let dir = std::fs::canonicalize(&dir)?;
    let image = dir.join("previous.img");
    let crashring = guest::build_guest_crashring(sh)?;
    // Exit status 1 means "recovered, with losses": still a result to show.
    let info = cmd!(sh, "{crashring} info {image}")
        .ignore_status()
        .read()?;
    let text = cmd!(sh, "{crashring} extract {image}")
        .ignore_status()
        .read()?;
    let trace = dir.join("trace.txt");
    sh.write_file(&trace, &text)?;
    let lines: Vec<&str> = text.lines().collect();
    println!("\n== what the crashed guest left behind ==\n{info}");
    println!("last 20 events before the panic:");
    for l in &lines[lines.len().saturating_sub(20)..] {
        println!("  {l}");
    }
    println!("\ncheck: {verdict}");
    println!("serial log:    {}", dir.join("serial.log").display());
    println!("region image:  {}", image.display());
    println!("full trace:    {} ({} lines)", trace.display(), lines.len());
    Ok(())
}
