//! `crashring info`: the input, then every region, as text or JSON.
//!
//! The text lists the streams that hold events, lost some or were
//! damaged, and counts the empty ones in one line; `--pages` lists every
//! stream and every page slot, and the JSON every stream.
//!
//! The JSON document (extractor/SCHEMAS.md) is one object: `info_version`,
//! `source` and `regions` as the bundle's manifest has them, the dump's
//! `cpus`, per region its header's `copies` and per stream its `pages`
//! by status, the kernel's own `printk` log and its persistent `ftrace`
//! buffers.
//!
//! A dump with no region but the kernel's printk log or a persistent
//! ftrace buffer is described too: a vmcore of a machine that never ran
//! crashring.

use super::InputArgs;
use anyhow::Result;
use extractor::foreign::ftrace::{meta::MetaError, CpuState, Instance};
use extractor::foreign::printk::{Log, PrintkError};
use extractor::foreign::ramoops::{self, Layout, LayoutError, Order, Zone, ZoneState};
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
/// stream and page slot if `pages`, and the ramoops zones `ramoops` puts.
pub fn run(input: &InputArgs, json: bool, pages: bool, ramoops: Option<&Layout>) -> Result<u8> {
    // With --ramoops, the zones may be all the input holds.
    let loaded = match ramoops {
        Some(_) => input.load_any()?,
        None => input.load()?,
    };
    let regions = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    let ramoops = ramoops.map(|l| ramoops::read(loaded.dump.memory.as_ref(), l));
    let view = View {
        input: &input.input,
        dump: &loaded.dump,
        regions: &regions,
        printk: loaded.printk(),
        ftrace: loaded.ftrace(),
        ramoops: ramoops.as_ref(),
    };
    let mut text = String::new();
    if json {
        view.write_json(&mut text)?;
    } else {
        view.write_text(&mut text, pages)?;
    }
    io::stdout().lock().write_all(text.as_bytes())?;
    let ftrace_damaged = loaded
        .ftrace()
        .iter()
        .any(|f| f.as_ref().is_ok_and(Instance::damaged));
    let ramoops_lost =
        matches!(&ramoops, Some(Ok((_, zones))) if zones.iter().any(|z| z.state.lost()));
    Ok(u8::from(
        regions.iter().any(Recovered::damaged) || ftrace_damaged || ramoops_lost,
    ))
}

struct View<'a> {
    input: &'a Path,
    dump: &'a Dump,
    regions: &'a [Recovered<'a>],
    printk: Option<&'a Result<Log, PrintkError>>,
    ftrace: &'a [Result<Instance, MetaError>],
    /// The ramoops zones, when asked for.
    ramoops: Option<&'a Result<(Order, Vec<Zone>), LayoutError>>,
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
                    "; {} unreadable between tail and head{}, {} the kernel could not store{}; `crashring dmesg` prints it",
                    log.skipped,
                    log.absent_note(),
                    log.failed,
                    log.tail_note()
                )?;
            }
            Some(Err(e)) => writeln!(out, "kernel printk log: not read: {e}")?,
            None => {}
        }
        for f in self.ftrace {
            match f {
                Ok(i) => {
                    let t = FtraceTally::of(i);
                    write!(
                        out,
                        "kernel ftrace buffer at {:#x}..{:#x} ({}): {} CPUs, {} events in {} sub-buffers",
                        i.base, i.end, i.generation, t.cpus, t.events, t.kept
                    )?;
                    if let (Some(a), Some(b)) = (t.first_ns, t.last_ns) {
                        write!(out, ", {a} .. {b} ns (its trace clock)")?;
                    }
                    write!(
                        out,
                        "; {} sub-buffers invalid, {} not in the dump",
                        t.invalid, t.unreadable
                    )?;
                    if t.unreadable_cpus > 0 {
                        write!(out, ", {} CPUs unreadable", t.unreadable_cpus)?;
                    }
                    writeln!(out, "; `crashring ftrace` prints it")?;
                }
                Err(e) => writeln!(out, "kernel ftrace buffer: not read: {e}")?,
            }
        }
        match self.ramoops {
            Some(Ok((order, zones))) => write_ramoops(out, *order, zones)?,
            Some(Err(e)) => writeln!(out, "ramoops: not read: {e}")?,
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
            "ftrace": self.ftrace.iter().map(ftrace_json).collect::<Vec<_>>(),
            "ramoops": self.ramoops.map(ramoops_json),
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
                "absent": log.absent,
                "absent_at": log.absent_at.as_ref().map(|e| e.to_string()),
                "failed": log.failed,
                "damaged_tail_id": log.bad_tail,
            })
        }
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// What one persistent ftrace buffer holds, over all its CPUs.
struct FtraceTally {
    cpus: usize,
    events: usize,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    kept: u32,
    invalid: u32,
    unreadable: u32,
    dropped_earlier: u32,
    unreadable_cpus: usize,
}

impl FtraceTally {
    fn of(i: &Instance) -> FtraceTally {
        let events = i.cpus.iter().flat_map(|c| &c.events);
        let sum = |f: fn(&extractor::foreign::ftrace::Tally) -> u32| {
            i.cpus.iter().map(|c| f(&c.tally)).sum()
        };
        FtraceTally {
            cpus: i.cpus.len(),
            events: i.cpus.iter().map(|c| c.events.len()).sum(),
            first_ns: events.clone().map(|e| e.ts).min(),
            last_ns: events.map(|e| e.ts).max(),
            kept: sum(|t| t.kept),
            invalid: sum(|t| t.invalid),
            unreadable: sum(|t| t.unreadable),
            dropped_earlier: sum(|t| t.dropped_earlier),
            unreadable_cpus: i
                .cpus
                .iter()
                .filter(|c| matches!(c.state, CpuState::Unreadable(_)))
                .count(),
        }
    }
}

/// One persistent ftrace buffer, or why it was not read.
fn ftrace_json(found: &Result<Instance, MetaError>) -> Value {
    match found {
        Ok(i) => {
            let t = FtraceTally::of(i);
            json!({
                "addr": format!("{:#x}", i.base),
                "end": format!("{:#x}", i.end),
                "layout": i.generation.kernels(),
                "cpus": t.cpus,
                "events": t.events,
                "first_ns": t.first_ns,
                "last_ns": t.last_ns,
                "kept": t.kept,
                "invalid": t.invalid,
                "unreadable": t.unreadable,
                "dropped_earlier": t.dropped_earlier,
                "unreadable_cpus": t.unreadable_cpus,
            })
        }
        Err(e) => json!({ "addr": format!("{:#x}", e.addr()), "error": e.to_string() }),
    }
}

/// The ramoops zones: each that holds a record or could not be read on
/// its own line, the empty ones and those never set up counted.
fn write_ramoops(out: &mut impl Write, order: Order, zones: &[Zone]) -> fmt::Result {
    let count = |f: fn(&ZoneState) -> bool| zones.iter().filter(|z| f(&z.state)).count();
    let empty = count(|s| matches!(s, ZoneState::Empty));
    let absent = count(|s| matches!(s, ZoneState::NotRamoops { .. }));
    writeln!(
        out,
        "ramoops (--ramoops): {} zones in {}; {empty} empty, {absent} not set up with these parameters; `crashring pstore` prints the records",
        zones.len(),
        order_name(order)
    )?;
    for z in zones {
        if !matches!(z.state, ZoneState::Empty | ZoneState::NotRamoops { .. }) {
            writeln!(
                out,
                "  {} at {:#x} ({} bytes): {}",
                z.file_name(),
                z.plan.addr,
                z.plan.size,
                z.state
            )?;
        }
    }
    Ok(())
}

fn order_name(order: Order) -> &'static str {
    match order {
        Order::PmsgFirst => "the current order",
        Order::FtraceFirst => "older kernels' order (ftrace before pmsg)",
    }
}

/// Every ramoops zone: its name, place, size and what it holds.
fn ramoops_json(read: &Result<(Order, Vec<Zone>), LayoutError>) -> Value {
    match read {
        Ok((order, zones)) => json!({
            "order": match order {
                Order::PmsgFirst => "current",
                Order::FtraceFirst => "older",
            },
            "zones": zones.iter().map(|z| {
                let text = match &z.state {
                    ZoneState::Text(t) => Some(t),
                    _ => None,
                };
                json!({
                    "name": z.file_name(),
                    "addr": format!("{:#x}", z.plan.addr),
                    "size": z.plan.size,
                    "state": zone_state(&z.state),
                    "says": z.state.to_string(),
                    "bytes": text.map(|t| t.bytes.len()),
                    "compressed": text.map(|t| t.compressed),
                    "inflate_refused": text.and_then(|t| t.inflate_refused),
                    "missing_bytes": text.map(|t| t.missing_bytes()),
                    "torn_records": text.map(|t| t.torn_records),
                    "uninflated": text.and_then(|t| t.uninflated.map(|u| json!({
                        "offset": u.offset,
                        "addr": format!("{:#x}", u.addr),
                        "bytes": u.len,
                    }))),
                    "ecc": text.and_then(|t| t.ecc.map(|e| json!({
                        "corrected_bytes": e.corrected_bytes,
                        "bad_blocks": e.bad_blocks,
                        "unchecked_blocks": t.unchecked_blocks,
                    }))),
                })
            }).collect::<Vec<_>>(),
        }),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// A zone's state by name, for machines.
fn zone_state(state: &ZoneState) -> &'static str {
    match state {
        ZoneState::NotRamoops { .. } => "not_ramoops",
        ZoneState::Empty => "empty",
        ZoneState::Invalid { .. } => "invalid",
        ZoneState::Unreadable(_) => "unreadable",
        ZoneState::NoDmesgHeader => "no_dmesg_header",
        ZoneState::BadCompression(_) => "bad_compression",
        ZoneState::Text(_) => "record",
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
