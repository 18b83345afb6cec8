//! `crashring extract`: every region's items in one format, to standard
//! output, a file, or a file or directory per region.

use super::{is_stdout, report_damage, report_written, write_to, InputArgs};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use extractor::bundle::logs::{Clock, Log};
use extractor::bundle::{AddLog, LogSource};
use extractor::output::select::{parse_time, Selection};
use extractor::output::{
    perfetto, write_items, write_items_and_logs, Format, LogLine, RegionView, Writer,
};
use extractor::recover::{Loaded, Recovered};
use pstore_ring::kprintf::Pointers;
use std::path::PathBuf;

#[derive(Args)]
pub struct ExtractArgs {
    #[command(flatten)]
    input: InputArgs,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write here instead of standard output (`-`: standard output).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Only this CPU's kernel stream (and those of --stream).
    #[arg(long, value_name = "N")]
    cpu: Option<u16>,
    /// Only this stream (repeatable): a kernel stream's label (`cpu3`,
    /// `cpu3.lane1`) or a user stream's, `user:NAME` (`user:weston` keeps
    /// `weston.0`, `weston.1`, …).
    #[arg(long = "stream", value_name = "NAME")]
    streams: Vec<String>,
    /// Only from this time on (seconds, or 1500ms / 20us / 7ns).
    #[arg(long, value_name = "T", value_parser = parse_time)]
    since: Option<u64>,
    /// Only up to this time.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    until: Option<u64>,
    /// Only events of this type (repeatable): printk, marker, crash, ...
    #[arg(long = "type", value_name = "NAME")]
    types: Vec<String>,
    /// Show kernel pointers in debug messages as they were (`%px`), not
    /// hashed as the kernel's `%p` shows them.
    #[arg(long)]
    raw_pointers: bool,
    /// Merge what the crashed kernel kept itself in the dump (its printk
    /// log, its persistent ftrace buffers) into the first region's
    /// timeline, placed on its clock by the printk lines both hold: among
    /// the events in text and jsonl (`--type log` selects them), a track
    /// each in perfetto.
    #[arg(long)]
    kernel_logs: bool,
}

pub fn run(args: ExtractArgs) -> Result<u8> {
    let selection = Selection {
        cpu: args.cpu,
        streams: args.streams,
        since_ns: args.since,
        until_ns: args.until,
        types: args.types,
    };
    // `-o -` is standard output, as for most tools, never a file named `-`.
    let stdout_named = args.output.as_deref().is_some_and(is_stdout);
    let output = args.output.filter(|o| !is_stdout(o));
    let loaded = args.input.load_regions()?;
    let several = loaded.several();
    let source = loaded.dump.container.to_string();
    let mut bad = false;
    let merges = matches!(args.format, Format::Text | Format::Jsonl);
    if args.kernel_logs && !merges && args.format != Format::Perfetto {
        bail!(
            "--kernel-logs: --format {} cannot hold them (text, jsonl and perfetto can)",
            format_name(args.format)
        );
    }
    match args.format.writer() {
        Writer::Files(files) => {
            let Some(base) = &output else {
                let stdout = if stdout_named {
                    " (standard output, `-o -`, cannot hold it)"
                } else {
                    ""
                };
                bail!(
                    "--format {} {}{stdout}",
                    format_name(args.format),
                    files.needs_output()
                );
            };
            for r in loaded.regions() {
                let r = r?;
                report_damage(&r);
                bad |= r.damaged();
                let out = if several {
                    files.region_output(base, r.index)
                } else {
                    base.clone()
                };
                let written =
                    files.write(&out, &view(&r, args.raw_pointers), &selection, &source)?;
                report_written(r.index, &out, &written);
            }
        }
        Writer::Items(items) => {
            write_to(output.as_deref(), |out| {
                for r in loaded.regions() {
                    let r = r?;
                    report_damage(&r);
                    bad |= r.damaged();
                    let view = view(&r, args.raw_pointers);
                    items.begin(out, &view, several)?;
                    // The kernel's logs go with the first region.
                    let logs = match args.kernel_logs && r.index == 0 {
                        true => placed_kernel_logs(&loaded, &r),
                        false => Vec::new(),
                    };
                    if merges {
                        let lines = log_lines(&logs);
                        write_items_and_logs(out, &view, &selection, items, &lines)?;
                    } else {
                        write_items(out, &view, &selection, items)?;
                        for (i, (log, _)) in logs.iter().enumerate() {
                            perfetto::log_track(out, &format!("log {}", log.name), i, &log.placed)?;
                        }
                    }
                }
                items.end(out)?;
                Ok(())
            })?;
        }
    }
    Ok(u8::from(bad))
}

/// The `--format` name of `format`.
fn format_name(format: Format) -> String {
    format
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The crashed kernel's own logs in `loaded`'s dump, placed on `r`'s
/// clock, each with the source it names in the output; how each was
/// placed is said on stderr.
fn placed_kernel_logs(loaded: &Loaded, r: &Recovered) -> Vec<(Log, &'static str)> {
    let (logs, unread) = AddLog::kernels_own(loaded, None, None);
    for why in unread {
        eprintln!("crashring: --kernel-logs: {why}");
    }
    if logs.is_empty() {
        eprintln!("crashring: --kernel-logs: the dump holds no printk log or persistent ftrace buffer of the kernel's");
    }
    let view = r.view();
    let kernel = view.streams().filter(|s| s.info().is_kernel());
    let clock = Clock::new(
        view.region,
        kernel.flat_map(|s| s.events()),
        r.region.wall_clock_of_pages(&r.trace),
    );
    let mut placed: Vec<(Log, &'static str)> = Vec::new();
    for l in &logs {
        let (text, source) = match &l.source {
            LogSource::KernelPrintk(t) => (t, "kernel printk log"),
            LogSource::KernelFtrace(t) => (t, "kernel ftrace buffer"),
            _ => continue,
        };
        // Placing lines held in memory cannot fail to read them.
        let Ok(mut log) = clock.place(&l.name, &text[..]) else {
            continue;
        };
        if let (LogSource::KernelFtrace(_), Some((printk, _))) = (&l.source, placed.first()) {
            log.borrow_alignment(printk);
        }
        report_placement(&log);
        placed.push((log, source));
    }
    placed
}

/// How a log was placed, on stderr.
fn report_placement(log: &Log) {
    let p = &log.placement;
    let how = if p.from_printk_log {
        format!(
            "moved by the printk log's offset ({:+.3} ms): the same kernel clock",
            p.offset_ns as f64 / 1e6
        )
    } else if p.matched > 0 {
        format!(
            "aligned by {} printk lines the region also holds (offset {:+.3} ms, within {:.3} ms)",
            p.matched,
            p.offset_ns as f64 / 1e6,
            p.spread_ns as f64 / 1e6
        )
    } else {
        "no printk line in common with the region: its times are taken as the region's clock"
            .to_string()
    };
    eprintln!(
        "crashring: --kernel-logs: {}: {} lines placed, {how}; {} not placed",
        log.name,
        log.placed.len(),
        p.unplaced
    );
}

/// Every placed line of `logs`, in time order (the file order among
/// lines of one time).
fn log_lines<'l>(logs: &'l [(Log, &'static str)]) -> Vec<LogLine<'l>> {
    let mut lines: Vec<LogLine> = logs
        .iter()
        .flat_map(|(log, source)| {
            log.placed.iter().map(|(ts, text)| LogLine {
                ts: *ts,
                source,
                text,
            })
        })
        .collect();
    lines.sort_by_key(|l| l.ts);
    lines
}

/// The region as written, kernel pointers raw when asked for.
fn view<'r, 'a>(r: &'r Recovered<'a>, raw_pointers: bool) -> RegionView<'r, 'a> {
    let mut view = r.view();
    if raw_pointers {
        view.pointers = Pointers::Raw;
    }
    view
}
