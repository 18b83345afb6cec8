//! `crashring arm`, `disarm` and `status`: the machine's side, planned and
//! applied by kexec-hooks; this file reads the options, prints the plan or
//! applies it, and runs the boot loader's tool.

use anyhow::{Context, Result};
use clap::Args;
use extractor::recovery::event_formats;
use extractor::recovery::next_boot;
use kexec_hooks::arm::{self, Plan};
use kexec_hooks::kdump_tools;
use kexec_hooks::system::System;
use std::path::PathBuf;

#[derive(Args)]
pub struct ArmArgs {
    /// The region's size (K, M or G; a multiple of 2 MiB). Default 64M;
    /// an armed machine keeps its range.
    #[arg(long, value_name = "SIZE", value_parser = super::parse_number)]
    size: Option<u64>,
    /// Only put crashring's part back into kdump-tools' configuration, if
    /// the machine is armed and the part is missing (what
    /// crashring-kdump-tools.service runs before kdump-tools loads its
    /// capture kernel).
    #[arg(long, conflicts_with = "size")]
    kdump_tools: bool,
    #[command(flatten)]
    how: ChangeArgs,
}

#[derive(Args)]
pub struct ChangeArgs {
    /// Print every change as a diff and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Work on the system tree under DIR (a copy of a machine, an image
    /// being built) instead of /; the boot loader's tool is then left to
    /// that system.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
}

/// Prints the plan (`--dry-run`) or applies it and runs its commands (the
/// initramfs generator, and the boot loader's tool carrying the command
/// line into its entries).
pub(crate) fn carry_out(plan: &Plan, how: &ChangeArgs, sys: &System) -> Result<()> {
    for note in &plan.notes {
        eprintln!("crashring: {note}");
    }
    if how.dry_run {
        print!("{}", plan.diff());
        return Ok(());
    }
    plan.apply(sys)?;
    for c in &plan.changes {
        let verb = if c.new.is_some() { "wrote" } else { "removed" };
        eprintln!("crashring: {verb} {}", sys.path(c.path).display());
    }
    for command in &plan.commands {
        let line = command.join(" ");
        if !sys.is_live() {
            eprintln!(
                "crashring: not running `{line}` for {}: run it in that system",
                how.root.display()
            );
            continue;
        }
        eprintln!("crashring: running {line}");
        let again = match plan.resumable() {
            true => " (the files are written: the same crashring command run again runs the commands again)",
            false => "",
        };
        let status = std::process::Command::new(&command[0])
            .args(&command[1..])
            .status()
            .with_context(|| format!("running {line}{again}"))?;
        anyhow::ensure!(status.success(), "`{line}` failed: {status}{again}");
    }
    if sys.is_live() && !plan.commands.is_empty() {
        plan.verify(sys)?;
    }
    // Run, or handed to the system under --root to run: nothing is left
    // for this tool to run again.
    plan.commands_done(sys)?;
    Ok(())
}

pub fn arm(args: ArmArgs) -> Result<u8> {
    let sys = System::new(&args.how.root);
    if args.kdump_tools {
        let plan = kdump_tools::plan_kdump_repair(&sys)?;
        carry_out(&plan, &args.how, &sys)?;
        return Ok(0);
    }
    let plan = arm::plan_arm(&sys, args.size, std::env::consts::ARCH)?;
    carry_out(&plan, &args.how, &sys)?;
    if let (Some(p), false) = (plan.reservation, args.how.dry_run) {
        if !plan.is_empty() {
            eprintln!(
                "crashring: armed with {p}: the range is reserved and the module loaded from the next boot on"
            );
        }
    }
    if sys.is_live() && !args.how.dry_run {
        keep_event_formats(&sys);
    }
    Ok(0)
}

/// Keeps the running kernel's event formats for its persistent ftrace
/// buffer's dumps, as every boot's `crashring recover` does; a failure
/// is said and arming stands.
fn keep_event_formats(sys: &System) {
    let Ok(release) = std::fs::read_to_string(sys.path("/proc/sys/kernel/osrelease")) else {
        return;
    };
    let bundles = sys.path(kexec_hooks::status::BUNDLE_DIR);
    super::recovery::say_formats(&event_formats::keep(
        &sys.path(next_boot::TRACING),
        release.trim(),
        &bundles,
    ));
}

#[derive(Args)]
pub struct DisarmArgs {
    /// Disarm although a generation waits unarchived in the range (a
    /// failed recovery's, or one Clean=keep left): the next boot's kernel
    /// then reuses that memory and it is lost. Also removes the record at
    /// once, so that a command that fails leaves nothing pending.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    how: ChangeArgs,
}

pub fn disarm(args: DisarmArgs) -> Result<u8> {
    let sys = System::new(&args.how.root);
    let plan = arm::plan_disarm(&sys, args.force)?;
    carry_out(&plan, &args.how, &sys)?;
    Ok(0)
}

/// Exits 1 when something needs attention (said on stderr), so that a
/// monitor can poll it.
pub fn status(root: PathBuf) -> Result<u8> {
    let status = kexec_hooks::status::status(&System::new(root));
    print!("{status}");
    for why in &status.attention {
        eprintln!("crashring: attention: {why}");
    }
    Ok(u8::from(!status.attention.is_empty()))
}
