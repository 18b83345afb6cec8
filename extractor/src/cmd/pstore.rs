//! `crashring pstore`: pstore/ramoops records read from a dump or an image,
//! as the next boot's `/sys/fs/pstore` would show them, for a box that
//! never booted again or a dump taken before it did.

use super::{write_to, DumpArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use extractor::foreign::ramoops::{self, Layout, Order, Zone, ZoneState};
use extractor::output::files::{create_dir, NewFile};
use pstore_ring::text::push_escaped;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct PstoreArgs {
    #[command(flatten)]
    input: DumpArgs,
    /// The ramoops area and its parameters, as the kernel was given them
    /// (ramoops.mem_address, mem_size, record_size, console_size,
    /// ftrace_size, pmsg_size, ecc; cpus: the ftrace zone count). Left-out
    /// sizes take ramoops' defaults (4 KiB each).
    #[arg(
        long,
        value_name = "ADDR:SIZE[,record=N][,console=N][,ftrace=N][,pmsg=N][,cpus=N][,ecc=N]"
    )]
    ramoops: Layout,
    /// Write each record to a file in this directory (created, 0700), named
    /// as /sys/fs/pstore names it, instead of printing them all.
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
}

pub fn run(args: PstoreArgs) -> Result<u8> {
    let dump = args.input.open_unscanned()?;
    let path = args.input.input.display();
    let (order, zones) = ramoops::read(dump.memory.as_ref(), &args.ramoops)?;
    if order == Order::FtraceFirst {
        eprintln!("crashring: {path}: the zones are in older kernels' order (ftrace before pmsg)");
    }
    let mut records = 0;
    for z in &zones {
        eprintln!(
            "crashring: {path}: {} at {:#x} ({} bytes): {}",
            z.file_name(),
            z.plan.addr,
            z.plan.size,
            z.state
        );
        records += matches!(z.state, ZoneState::Text(_)) as usize;
    }
    if zones
        .iter()
        .all(|z| matches!(z.state, ZoneState::NotRamoops { .. }))
    {
        bail!("{path}: no ramoops zone where these parameters put them");
    }
    match &args.output {
        Some(dir) => {
            create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
            for z in &zones {
                if let Some(bytes) = contents(z) {
                    let dest = dir.join(z.file_name());
                    let mut file = NewFile::create(&dest)
                        .with_context(|| format!("creating {}", dest.display()))?;
                    file.write_all(&bytes)?;
                    file.persist()
                        .with_context(|| format!("writing {}", dest.display()))?;
                }
            }
        }
        // On a terminal: every control byte but the line breaks written
        // \xNN, since pmsg holds whatever user space wrote. The files keep
        // the bytes, as /sys/fs/pstore does.
        None => write_to(None, |out| {
            let mut line = Vec::new();
            for z in &zones {
                if let Some(bytes) = contents(z) {
                    writeln!(out, "==== {} ====", z.file_name())?;
                    for text in bytes
                        .strip_suffix(b"\n")
                        .unwrap_or(&bytes)
                        .split(|&b| b == b'\n')
                    {
                        line.clear();
                        push_escaped(&mut line, text);
                        line.push(b'\n');
                        out.write_all(&line)?;
                    }
                }
            }
            Ok(())
        })?,
    }
    eprintln!(
        "crashring: {path}: {records} ramoops records in {} zones",
        zones.len()
    );
    // Something the kernel wrote could not be read: say so by the status.
    Ok(u8::from(zones.iter().any(|z| z.state.lost())))
}

/// A zone's record, saying what of it was left out.
fn contents(z: &Zone) -> Option<Vec<u8>> {
    let (bytes, partial) = z.record()?;
    if partial > 0 {
        eprintln!(
            "crashring: {}: {partial} bytes of a partial record at its start (the oldest, cut by the wrap) left out",
            z.file_name()
        );
    }
    Some(bytes)
}
