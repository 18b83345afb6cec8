//! `crashring extract`: every region's items in one format, to standard
//! output, a file, or a file or directory per region.

use super::{is_stdout, report_damage, report_written, write_to, InputArgs};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use extractor::output::select::{parse_time, Selection};
use extractor::output::{write_items, Format, RegionView, Writer};
use extractor::recover::Recovered;
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
    match args.format.writer() {
        Writer::Files(files) => {
            let Some(base) = &output else {
                let name = args
                    .format
                    .to_possible_value()
                    .map(|v| v.get_name().to_owned());
                let stdout = if stdout_named {
                    " (standard output, `-o -`, cannot hold it)"
                } else {
                    ""
                };
                bail!(
                    "--format {} {}{stdout}",
                    name.unwrap_or_default(),
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
                    write_items(out, &view, &selection, items)?;
                }
                items.end(out)?;
                Ok(())
            })?;
        }
    }
    Ok(u8::from(bad))
}

/// The region as written, kernel pointers raw when asked for.
fn view<'r, 'a>(r: &'r Recovered<'a>, raw_pointers: bool) -> RegionView<'r, 'a> {
    let mut view = r.view();
    if raw_pointers {
        view.pointers = Pointers::Raw;
    }
    view
}
