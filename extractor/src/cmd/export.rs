//! `crashring export`: many bundles as one dataset for the engines a
//! fleet already runs. The work is `extractor::export`'s; this finds the
//! bundles, shows progress and says what was left out.

use anyhow::{Context, Result};
use clap::Args;
use extractor::bundle::escaped;
use extractor::export;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct ExportArgs {
    /// Write a Parquet dataset into DIR (made if missing): crashes-v1/
    /// and events-v1/, filed by crash_date=; parts of an earlier export
    /// stay, so a collector appends batch by batch.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "sentry_envelope",
        conflicts_with = "sentry_envelope"
    )]
    parquet: Option<PathBuf>,
    /// Write a Sentry envelope of each bundle into DIR (made if missing),
    /// TOP.envelope: the crash as an event fingerprinted by its
    /// signature, its last events as breadcrumbs, dmesg.txt attached.
    /// Send one with `sentry-cli send-envelope FILE`.
    #[arg(long, value_name = "DIR")]
    sentry_envelope: Option<PathBuf>,
    /// Attach the bundle itself to each envelope too.
    #[arg(long, requires = "sentry_envelope")]
    attach_bundle: bool,
    /// Bundles (.tar.gz from `crashring bundle`, `recover` or a report),
    /// or directories searched for them.
    #[arg(required = true, value_name = "BUNDLE|DIR")]
    bundles: Vec<PathBuf>,
}

/// Every `.tar.gz` under `dir`, in name order.
fn bundles_under(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let kind = e
            .file_type()
            .with_context(|| format!("reading {}", path.display()))?;
        if kind.is_dir() {
            bundles_under(&path, found)?;
        } else if kind.is_file() && path.to_string_lossy().ends_with(".tar.gz") {
            found.push(path);
        }
    }
    Ok(())
}

pub fn run(args: ExportArgs) -> Result<u8> {
    let mut bundles = Vec::new();
    for b in &args.bundles {
        if b.is_dir() {
            bundles_under(b, &mut bundles)?;
        } else {
            bundles.push(b.clone());
        }
    }
    let bar = if io::stderr().is_terminal() {
        let bar = ProgressBar::new(bundles.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("exporting {bar:40} {pos}/{len} bundles {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let done = || bar.inc(1);
    let (exported, into, rows) = match (&args.parquet, &args.sentry_envelope) {
        (Some(dir), _) => (
            export::to_parquet(dir, &bundles, &done),
            dir,
            ["crashes rows", "events rows", "parts"],
        ),
        (None, Some(dir)) => (
            export::to_sentry(dir, &bundles, args.attach_bundle, &done),
            dir,
            ["events", "breadcrumbs", "envelopes"],
        ),
        (None, None) => unreachable!("clap requires one of --parquet and --sentry-envelope"),
    };
    let exported = exported.with_context(|| format!("exporting into {}", into.display()))?;
    bar.finish_and_clear();
    // Bundle file names come from elsewhere (a fleet's spool), as does
    // what is said of their contents: shown escaped.
    let shown = |p: &Path| escaped(&p.to_string_lossy());
    for r in &exported.refused {
        eprintln!(
            "crashring: {}: left out: {}",
            shown(&r.path),
            escaped(&r.why)
        );
    }
    for (p, first) in &exported.duplicates {
        eprintln!(
            "crashring: {}: the same crash as {}, exported once",
            shown(p),
            shown(first)
        );
    }
    for p in &exported.without_events {
        eprintln!(
            "crashring: {}: made before bundles held events.jsonl: its crash exported, no events",
            shown(p)
        );
    }
    for l in &exported.first_bad_lines {
        eprintln!(
            "crashring: {}: {} line {}: left out: {}",
            shown(&l.bundle),
            escaped(&l.file),
            l.line,
            escaped(&l.why)
        );
    }
    if exported.bad_lines > exported.first_bad_lines.len() as u64 {
        eprintln!(
            "crashring: {} more lines left out",
            exported.bad_lines - exported.first_bad_lines.len() as u64
        );
    }
    println!(
        "exported {} bundles into {}: {} {}, {} {}, {} {}",
        exported.bundles,
        into.display(),
        exported.crashes,
        rows[0],
        exported.events,
        rows[1],
        exported.parts.len(),
        rows[2]
    );
    Ok(u8::from(
        !exported.refused.is_empty() || exported.bad_lines > 0,
    ))
}
