//! `crashring bundle`: every region and the added logs in one archive.

use super::{report_clamped, report_damage, InputArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use extractor::bundle::redact::{Class, Rules};
use extractor::bundle::{self, AddLog};
use extractor::foreign::ftrace::event::Formats;
use extractor::foreign::ramoops::Layout;
use extractor::kmem::symbols::SymbolMap;
use extractor::output::select::parse_time;
use extractor::recover::{Loaded, Recovered};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct BundleArgs {
    #[command(flatten)]
    input: InputArgs,
    /// The archive to write (FILE.tar.gz).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Add a log (repeatable), placed on the trace's timeline where its
    /// lines carry times; NAME is its name in the bundle.
    #[arg(long = "add-log", value_name = "PATH[:NAME]", value_parser = AddLog::parse)]
    logs: Vec<AddLog>,
    /// Add the dump's pstore/ramoops records (as `crashring pstore`
    /// reads them) as logs/pstore-NAME.
    #[arg(
        long,
        value_name = "ADDR:SIZE[,record=N][,console=N][,ftrace=N][,pmsg=N][,cpus=N][,ecc=N]"
    )]
    ramoops: Option<Layout>,
    /// The crashed kernel's event formats (a copy of its
    /// /sys/kernel/tracing/events, or the file `crashring recover` keeps
    /// of each release in /var/lib/crashring/ftrace-formats/), naming the
    /// events of its persistent ftrace buffers.
    #[arg(long, value_name = "PATH")]
    ftrace_formats: Option<PathBuf>,
    /// The crashed kernel's System.map or a copy of /proc/kallsyms of any
    /// boot of it, naming the code addresses of its persistent ftrace
    /// buffers' function entries (as `crashring ftrace --symbols`).
    #[arg(long, value_name = "FILE")]
    symbols: Option<PathBuf>,
    #[command(flatten)]
    redaction: RedactArgs,
}

/// What a bundle leaves out or hashes (`bundle` and `snapshot`).
#[derive(Args)]
pub struct RedactArgs {
    /// Leave out or hash events (repeatable): TYPE drops its events,
    /// TYPE.FIELD hashes that field, TYPE=PREFIX drops the events whose
    /// text starts with PREFIX (printk=input: for input-device lines).
    #[arg(long, value_name = "CLASS", value_parser = Class::parse)]
    redact: Vec<Class>,
    /// Keep kernel addresses and oops Code: bytes as they are instead
    /// of hashing and masking them.
    #[arg(long)]
    raw_pointers: bool,
    /// Keep the debug messages of input-layer callsites (input core,
    /// HID, keyboards, touch), which can carry what a person typed; root
    /// only (crashring recover keeps them too).
    #[arg(long)]
    input_layer: bool,
    /// Leave out every event before this time on the region's clock
    /// (seconds, or 1500ms / 20us / 7ns), as `extract --since`.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    since: Option<u64>,
}

impl RedactArgs {
    /// The rules, once the input layer's messages are known to be asked
    /// for by root.
    pub fn rules(self) -> Result<Rules> {
        if self.input_layer && !rustix::process::geteuid().is_root() {
            bail!("--input-layer keeps what a person may have typed: only root may make such a bundle");
        }
        Ok(Rules {
            classes: self.redact,
            raw_pointers: self.raw_pointers,
            input_layer: self.input_layer,
            since_ns: self.since,
            grant: None,
        })
    }
}

pub fn run(args: BundleArgs) -> Result<u8> {
    if super::is_stdout(&args.output) {
        // The archive is written beside its destination under a random
        // name and renamed over it when complete (NewFile): standard
        // output cannot be renamed into place.
        bail!("a bundle is written to a file and renamed into place when complete: give it with -o FILE.tar.gz (standard output, `-o -`, cannot hold it)");
    }
    let rules = args.redaction.rules()?;
    let formats = match &args.ftrace_formats {
        Some(path) => Some(Formats::load(path).context("reading the event formats")?),
        None => None,
    };
    let symbols = match &args.symbols {
        Some(file) => Some(SymbolMap::load(file).context("reading the symbol map")?),
        None => None,
    };
    let loaded = args.input.load_regions()?;
    let recovered = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    recovered.iter().for_each(report_damage);
    let logs = kernels_logs(
        &loaded,
        args.ramoops.as_ref(),
        formats.as_ref(),
        symbols.as_ref(),
        args.logs,
    );
    write(
        &loaded,
        &recovered,
        &args.input.input,
        &args.output,
        &rules,
        &logs,
        None,
    )?;
    Ok(u8::from(recovered.iter().any(|r| r.damaged())))
}

/// The kernel's own logs first: its printk log and persistent ftrace
/// buffers, when the dump holds them, and the ramoops records where
/// `ramoops` puts them; then `logs`. What could not be read is a warning.
fn kernels_logs(
    loaded: &Loaded,
    ramoops: Option<&Layout>,
    formats: Option<&Formats>,
    symbols: Option<&SymbolMap>,
    logs: Vec<AddLog>,
) -> Vec<AddLog> {
    let (mut all, warnings) = AddLog::kernels_own(loaded, formats, symbols);
    for w in warnings {
        eprintln!("crashring: warning: {w}");
    }
    if let Some(layout) = ramoops {
        let (records, warnings) = AddLog::ramoops(loaded, layout);
        for w in warnings {
            eprintln!("crashring: warning: {w}");
        }
        all.extend(records);
    }
    all.extend(logs);
    all
}

/// Writes the bundle of what was recovered from `input` to `output`, and
/// says on stderr what went into it.
pub fn write(
    loaded: &Loaded,
    recovered: &[Recovered],
    input: &Path,
    output: &Path,
    rules: &Rules,
    logs: &[AddLog],
    request: Option<&bundle::Request>,
) -> Result<bundle::Summary> {
    let file = input.file_name().map_or_else(
        || input.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let source = bundle::Source::of(&loaded.dump, file);
    let summary = bundle::write(output, &source, recovered, rules, logs, request)
        .with_context(|| format!("bundling into {}", output.display()))?;
    report_clamped("CTF and trace.dat", summary.clamped);
    for l in &summary.logs {
        let r = &l.redaction;
        eprintln!(
            "crashring: logs/{}: {} of {} lines placed on the timeline; {} redacted by class, {} kernel addresses hashed, {} Code: lines masked, {} overlong lines left out",
            l.name,
            l.placed.len(),
            l.lines,
            r.counts.per_class.iter().sum::<u64>(),
            r.counts.pointers,
            r.counts.code_lines,
            r.too_long
        );
    }
    let redacted: u64 = summary.redacted.iter().flat_map(|c| &c.per_class).sum();
    let pointers: u64 = summary.redacted.iter().map(|c| c.pointers).sum();
    eprintln!(
        "crashring: wrote {} ({}/, {} files): {} events, {} lost; {redacted} redacted by class, {pointers} kernel addresses hashed",
        output.display(),
        summary.top,
        summary.files.len(),
        summary.events,
        summary.lost
    );
    Ok(summary)
}
