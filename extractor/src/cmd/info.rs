//! `crashring info`: the input, then every region, as text or JSON.
//!
//! The text lists the streams that hold events, lost some or were
//! damaged, and counts the empty ones in one line; `--pages` lists every
//! stream and every page slot, and the JSON every stream.
//!
//! The JSON document (extractor/SCHEMAS.md) is one object: `info_version`,
//! `source` and `regions` as the bundle's manifest has them, the dump's
//! `cpus`, per region its header's `copies` and per stream its `pages`
//! by status, and the kernel's own `printk` log.
//!
//! A dump with no region but the kernel's printk log is described too:
//! a vmcore of a machine that never ran crashring.

use super::InputArgs;
use anyhow::Result;
use extractor::foreign::printk::{Log, PrintkError};
use extractor::input::Dump;
use extractor::recover::report::{utc, wall, RegionReport, SourceReport};
use extractor::recover::Recovered;
use pstore_ring::read::{PageStatus, PagedTrace, Region, StreamPages};
use pstore_ring::text::write_paged_summary;
use serde_json::{json, Value};
use std::fmt::{self, Write};
use std::io::{self, Write as _};
use std::path::Path;

/// Describes the input and its regions: text unless `json`, with every
/// stream and page slot if `pages`.
pub fn run(input: &InputArgs, json: bool, pages: bool) -> Result<u8> {
    let loaded = input.load()?;
    let regions = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    let view = View {
        input: &input.input,
        dump: &loaded.dump,
        regions: &regions,
        printk: loaded.printk(),
    };
    let mut text = String::new();
    if json {
        view.write_json(&mut text)?;
    } else {
        view.write_text(&mut text, pages)?;
    }
    io::stdout().lock().write_all(text.as_bytes())?;
    Ok(u8::from(regions.iter().any(Recovered::damaged)))
}

struct View<'a> {
    input: &'a Path,
    dump: &'a Dump,
    regions: &'a [Recovered<'a>],
    printk: Option<&'a Result<Log, PrintkError>>,
}

impl View<'_> {
    fn write_text(&self, out: &mut impl Write, pages: bool) -> fmt::Result {
        let d = self.dump;
        writeln!(out, "input: {}: {}", self.input.display(), d.container)?;
        let map = d.memory.map();
        writeln!(
            out,
            "memory: {} bytes present in {} runs",
            map.present_bytes(),
            map.runs().len()
        )?;
        if let Some(release) = d.vmcoreinfo_value("OSRELEASE") {
            write!(out, "crashed kernel (VMCOREINFO): {release}")?;
            if let Some(t) = d.vmcoreinfo_value("CRASHTIME") {
                write!(out, ", crash time {t}")?;
            }
            writeln!(out)?;
        }
        if let Some(n) = d.cpus {
            writeln!(out, "CPUs in the dump: {n}")?;
        }
        for w in &d.warnings {
            writeln!(out, "warning: {w}")?;
        }
        match self.printk {
            Some(Ok(log)) => {
                write!(
                    out,
                    "kernel printk log (VMCOREINFO): {} records",
                    log.records.len()
                )?;
                if let (Some(a), Some(b)) = (log.records.first(), log.records.last()) {
                    write!(
                        out,
                        ", seq {}..{}, {} .. {} ns",
                        a.seq, b.seq, a.ts_nsec, b.ts_nsec
                    )?;
                }
                writeln!(
                    out,
                    "; {} unreadable between tail and head, {} the kernel could not store; `crashring dmesg` prints it",
                    log.skipped, log.failed
                )?;
            }
            Some(Err(e)) => writeln!(out, "kernel printk log: not read: {e}")?,
            None => {}
        }
        if self.regions.is_empty() {
            writeln!(
                out,
                "no crashring region ({} bytes of memory searched)",
                map.present_bytes()
            )?;
        }
        for r in self.regions {
            let (n, f, region, trace) = (r.index, r.found, &r.region, &r.trace);
            writeln!(out, "region {n}{}:", r.place.phrase(self.input.display()))?;
            let mut text = String::new();
            let empty = write_paged_summary(&mut text, region, trace, pages)?;
            for line in text.lines() {
                writeln!(out, "  {line}")?;
            }
            if empty.total() > 0 {
                let them = if empty.total() == 1 { "it" } else { "them" };
                writeln!(out, "  + {empty}; --pages lists {them}")?;
            }
            if let Some(when) = crash_utc(region, trace) {
                writeln!(out, "  crash time (wall clock): {when}")?;
            }
            // The region's span is its kernel streams'; a user stream's
            // times are its process's claim, in its own line above.
            if let Some((first, last)) = trace.kernel_tally().span {
                writeln!(out, "  time span: {first} .. {last} ns")?;
            }
            for h in &f.holes {
                writeln!(out, "  hole: {h}")?;
            }
            for c in &f.copies {
                writeln!(out, "  identical copy at physical address {c:#x}")?;
            }
            for diag in &trace.diagnostics {
                writeln!(out, "  problem: {diag}")?;
            }
        }
        Ok(())
    }

    /// The [`SourceReport`], the dump's CPU count, and each region's
    /// [`RegionReport`] with its header's copies and each stream's pages.
    fn write_json(&self, out: &mut impl Write) -> fmt::Result {
        let d = self.dump;
        let regions: Vec<Value> = self
            .regions
            .iter()
            .map(|r| {
                let wall = r.region.wall_clock_of_pages(&r.trace);
                let report = RegionReport::of(&r.view(), &wall, r.damaged(), &r.found.holes);
                let mut v = serde_json::to_value(report).unwrap_or_default();
                v["copies"] = json!(r
                    .found
                    .copies
                    .iter()
                    .map(|c| format!("{c:#x}"))
                    .collect::<Vec<_>>());
                for (s, st) in r.trace.streams.iter().enumerate() {
                    v["streams"][s]["pages"] = pages(st);
                }
                v
            })
            .collect();
        let doc = json!({
            "info_version": INFO_VERSION,
            "source": SourceReport::of(d, self.input.display().to_string()),
            "cpus": d.cpus,
            "regions": regions,
            "printk": self.printk.map(printk_json),
        });
        writeln!(out, "{doc}")
    }
}

/// Schema version of `info --json` (extractor/SCHEMAS.md); bump on
/// incompatible changes.
const INFO_VERSION: u64 = 1;

/// What the kernel's printk log holds, or why it was not read.
fn printk_json(log: &Result<Log, PrintkError>) -> Value {
    match log {
        Ok(log) => {
            let (first, last) = (log.records.first(), log.records.last());
            json!({
                "records": log.records.len(),
                "first_seq": first.map(|r| r.seq),
                "last_seq": last.map(|r| r.seq),
                "first_ns": first.map(|r| r.ts_nsec),
                "last_ns": last.map(|r| r.ts_nsec),
                "unreadable": log.skipped,
                "failed": log.failed,
            })
        }
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// A stream's page slots by status.
fn pages(st: &StreamPages) -> Value {
    let n = |status| st.pages_with(status);
    json!({
        "intact": n(PageStatus::Intact),
        "salvaged": n(PageStatus::Salvaged),
        "damaged": n(PageStatus::Damaged),
        "corrupt": n(PageStatus::Corrupt),
        "truncated": n(PageStatus::Truncated),
        "resetting": n(PageStatus::Resetting),
        "absent": n(PageStatus::Absent),
        "unused": n(PageStatus::Unused),
    })
}

/// The crash's wall-clock time, with the offset in effect at the crash.
fn crash_utc(region: &Region, trace: &PagedTrace) -> Option<String> {
    match &region.state {
        Ok(s) if s.is_crash() => wall(s.crash_ns, &region.wall_clock_of_pages(trace)).map(utc),
        _ => None,
    }
}
