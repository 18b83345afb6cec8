//! `crashring snapshot`: a bundle of the recorder as it runs, read from
//! /dev/crashring-current without stopping it (FORMAT.md, "Reading a live
//! region"): the crash bundle's layout, its manifest saying it is a
//! snapshot, who asked and why.

use super::bundle::RedactArgs;
use super::{report_damage, InputArgs};
use anyhow::{bail, Result};
use clap::Args;
use extractor::bundle::Request;
use pstore_ring::text::unsafe_char;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// The module's view of the generation it is recording (root only).
pub const LIVE: &str = "/dev/crashring-current";

#[derive(Args)]
pub struct SnapshotArgs {
    /// The archive to write (FILE.tar.gz).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Why it is taken: one line, kept in MANIFEST.json and README.txt.
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "asked for on the command line"
    )]
    why: String,
    /// Read this live region (or a copy of one) instead.
    #[arg(long, value_name = "PATH", default_value = LIVE)]
    from: PathBuf,
    #[command(flatten)]
    redaction: RedactArgs,
}

pub fn run(args: SnapshotArgs) -> Result<u8> {
    if super::is_stdout(&args.output) {
        bail!("a snapshot is a bundle, written to a file and renamed into place when complete: give it with -o FILE.tar.gz");
    }
    if args.why.chars().any(|c| c.is_control() || unsafe_char(c)) {
        bail!(
            "--why is one line of text, without control characters or line or bidirectional marks"
        );
    }
    let rules = args.redaction.rules()?;
    let input = InputArgs {
        input: args.from,
        phys: None,
        trust_header: false,
    };
    let loaded = input.load()?;
    let recovered = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    recovered.iter().for_each(report_damage);
    let request = Request {
        why: args.why,
        uid: rustix::process::getuid().as_raw(),
        at_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128),
    };
    super::bundle::write(
        &loaded,
        &recovered,
        &input.input,
        &args.output,
        &rules,
        &[],
        Some(&request),
    )?;
    Ok(u8::from(recovered.iter().any(|r| r.damaged())))
}
