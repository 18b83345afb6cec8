//! `crashring dmesg`: the crashed kernel's own printk log, read from a
//! dump by its VMCOREINFO, armed or not, without debuginfo.

use super::{is_stdout, write_to, DumpArgs};
use anyhow::{anyhow, Result};
use clap::Args;
use extractor::foreign::printk;
use extractor::output::kernel_log;
use std::path::PathBuf;

#[derive(Args)]
pub struct DmesgArgs {
    #[command(flatten)]
    input: DumpArgs,
    /// One JSON object per record (sequence number, time, level, facility,
    /// caller, continuation, text, device) instead of dmesg's lines.
    #[arg(long)]
    json: bool,
    /// Write here instead of standard output (`-`: standard output).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
}

pub fn run(args: DmesgArgs) -> Result<u8> {
    // The log is found through VMCOREINFO: no scan for regions.
    let dump = args.input.open_unscanned()?;
    let path = args.input.input.display();
    let log = match printk::of_dump(&dump) {
        None => {
            return Err(anyhow!(
                "{path} has no VMCOREINFO ({}): the kernel's printk log is found only through it",
                dump.container
            ))
        }
        Some(Err(e)) => return Err(anyhow!("reading the printk log of {path}: {e}")),
        Some(Ok(log)) => log,
    };
    let log = &log;
    let output = args.output.filter(|o| !is_stdout(o));
    write_to(output.as_deref(), |out| {
        if args.json {
            kernel_log::write_jsonl(out, log)?;
        } else {
            kernel_log::write_text(out, log)?;
        }
        Ok(())
    })?;
    let (first, last) = match (log.records.first(), log.records.last()) {
        (Some(f), Some(l)) => (f.seq, l.seq),
        _ => (0, 0),
    };
    eprintln!(
        "crashring: {path}: {} printk records (seq {first}..{last}); {} unreadable between tail and head{}; {} the kernel could not store{}",
        log.records.len(),
        log.skipped,
        log.absent_note(),
        log.failed,
        log.tail_note()
    );
    // Records the kernel kept and the dump lacks are lost to the reader,
    // as a region's are to `extract`.
    Ok(u8::from(log.absent > 0))
}
