//! `crashring`: recover ordered per-CPU traces from memory images.
//!
//! This first version reads raw images (a copy of a region, a pmem backing
//! file, a raw memory dump) and finds every region in them by its magic.
//! Dump containers (ELF vmcores, makedumpfile, QEMU dumps) come next; see
//! ARCHITECTURE.md.
//!
//! Exit status: 0 everything intact; 1 recovered, with losses or damage;
//! 2 nothing recovered, or the input could not be read.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use pstore_ring::merge::merge;
use pstore_ring::read::{HeaderTrust, Region, Trace};
use pstore_ring::scan::find_regions;
use pstore_ring::text::{write_summary, Line};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "crashring",
    version,
    about = "Recover crash-persistent traces from memory images"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every event of every region found, merged in time order.
    Extract {
        /// A raw image: a region copy, a pmem backing file, a memory dump.
        input: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Summarise every region found: header, state, pages and losses.
    Info { input: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if err
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("crashring: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<u8> {
    let (input, extract) = match &cli.cmd {
        Cmd::Extract {
            input,
            format: Format::Text,
        } => (input, true),
        Cmd::Info { input } => (input, false),
    };
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let regions: Vec<Region> = find_regions(&bytes)
        .filter_map(|at| Region::parse(&bytes[at..], HeaderTrust::Checksummed).ok())
        .collect();
    if regions.is_empty() {
        anyhow::bail!(
            "no crashring region found in {} ({} bytes scanned)",
            input.display(),
            bytes.len()
        );
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let mut damaged = false;
    for (n, region) in regions.iter().enumerate() {
        let trace = region.decode();
        damaged |= trace.lost_events() > 0 || !trace.diagnostics.is_empty();
        for d in &trace.diagnostics {
            eprintln!("crashring: region {n}: {d}");
        }
        if extract {
            write_events(&mut out, region, &trace)?;
        } else {
            write_info(&mut out, n, region, &trace)?;
        }
    }
    out.flush()?;
    Ok(u8::from(damaged))
}

fn write_events(out: &mut impl Write, region: &Region, trace: &Trace) -> Result<()> {
    for item in merge(&trace.streams) {
        let line = Line::of(&item, region);
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn write_info(out: &mut impl Write, n: usize, region: &Region, trace: &Trace) -> Result<()> {
    let mut text = String::new();
    write_summary(&mut text, region, trace, false)?;
    writeln!(out, "region {n}:")?;
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}
