//! `crashring info`: the input, then every region, as text or JSON.
//!
//! The JSON document is one object: `input`, `container`, `warnings`,
//! `kernel` and `crash_time` (from VMCOREINFO, or null), `cpus`, and
//! `regions`, each with `addr` (hex string), `size`, `kernel_release`,
//! `hostname`, `boot_id`, `generation`, `state`, `crash` (null or
//! `{reason, cpu, ns, utc, message}`; `utc` is the crash's wall-clock time
//! with the offset in effect then, a later `clock` event's if the clock
//! was stepped, or null when the region has no wall clock), `copies`, `holes`, `diagnostics` and
//! `streams`: `{index, label, cpu (kernel streams), events, first_ts,
//! last_ts, lost: {overwritten, unreadable, dropped, torn, end}, lost_exact
//! (false when some count is a lower bound: the stream's end is unknown), pages:
//! {intact, salvaged, damaged, corrupt, truncated, resetting, absent,
//! unused}}`.

use super::InputArgs;
use anyhow::Result;
use extractor::bundle::{utc, wall};
use extractor::discover::Found;
use extractor::input::Dump;
use extractor::output::jsonl::json_string;
use extractor::recover::Recovered;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::read::{reason_name, LossKind, PageStatus, Region, Trace};
use pstore_ring::text::write_summary;
use std::fmt::{self, Write};
use std::io::{self, Write as _};
use std::path::Path;

/// Describes the input and its regions: text unless `json`, with every
/// page slot if `pages`.
pub fn run(input: &InputArgs, json: bool, pages: bool) -> Result<u8> {
    let loaded = input.load()?;
    let regions = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    let view = View {
        input: &input.input,
        dump: &loaded.dump,
        regions: &regions,
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
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

impl View<'_> {
    /// Each region with its index, where it was found, and its trace.
    fn each_region(&self) -> impl Iterator<Item = (usize, &Found, &Region<'_>, &Trace<'_>)> {
        self.regions
            .iter()
            .map(|r| (r.index, r.found, &r.region, &r.trace))
    }

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
        for (n, f, region, trace) in self.each_region() {
            writeln!(out, "region {n} at physical address {:#x}:", f.addr)?;
            let mut text = String::new();
            write_summary(&mut text, region, trace, pages)?;
            for line in text.lines() {
                writeln!(out, "  {line}")?;
            }
            if let Some(when) = crash_utc(region, trace) {
                writeln!(out, "  crash time (wall clock): {when}")?;
            }
            if let Some((first, last)) = span(trace) {
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

    fn write_json(&self, out: &mut impl Write) -> fmt::Result {
        let d = self.dump;
        out.write_str("{\"input\":")?;
        out.write_str(&json_string(self.input.display().to_string().as_bytes()))?;
        out.write_str(",\"container\":")?;
        out.write_str(&json_string(d.container.as_bytes()))?;
        out.write_str(",\"warnings\":")?;
        strings(out, d.warnings.iter().map(String::as_str))?;
        out.write_str(",\"kernel\":")?;
        opt_string(out, d.vmcoreinfo_value("OSRELEASE"))?;
        out.write_str(",\"crash_time\":")?;
        opt_string(out, d.vmcoreinfo_value("CRASHTIME"))?;
        match d.cpus {
            Some(n) => write!(out, ",\"cpus\":{n}")?,
            None => out.write_str(",\"cpus\":null")?,
        }
        out.write_str(",\"regions\":[")?;
        for (n, f, region, trace) in self.each_region() {
            if n > 0 {
                out.write_char(',')?;
            }
            region_json(out, f, region, trace)?;
        }
        out.write_str("]}\n")
    }
}

/// The crash's wall-clock time, with the offset in effect at the crash.
fn crash_utc(region: &Region, trace: &Trace) -> Option<String> {
    match &region.state {
        Ok(s) if s.reason != 0 => wall(s.crash_ns, &region.wall_clock(trace)).map(utc),
        _ => None,
    }
}

fn span(trace: &Trace) -> Option<(u64, u64)> {
    let first = trace
        .streams
        .iter()
        .filter_map(|s| s.events.first())
        .map(|e| e.ts)
        .min()?;
    let last = trace
        .streams
        .iter()
        .filter_map(|s| s.events.last())
        .map(|e| e.ts)
        .max()?;
    Some((first, last))
}

fn strings<'s>(out: &mut impl Write, items: impl Iterator<Item = &'s str>) -> fmt::Result {
    out.write_char('[')?;
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        out.write_str(&json_string(s.as_bytes()))?;
    }
    out.write_char(']')
}

fn opt_string(out: &mut impl Write, s: Option<&str>) -> fmt::Result {
    match s {
        Some(s) => out.write_str(&json_string(s.as_bytes())),
        None => out.write_str("null"),
    }
}

fn region_json(out: &mut impl Write, f: &Found, region: &Region, trace: &Trace) -> fmt::Result {
    let h = &region.header;
    write!(
        out,
        "{{\"addr\":\"{:#x}\",\"size\":{}",
        f.addr, h.region_size
    )?;
    out.write_str(",\"kernel_release\":")?;
    out.write_str(&json_string(h.kernel_release.as_bytes()))?;
    out.write_str(",\"hostname\":")?;
    out.write_str(&json_string(h.hostname.as_bytes()))?;
    let boot: String = h.boot_id.iter().map(|b| format!("{b:02x}")).collect();
    write!(
        out,
        ",\"boot_id\":\"{boot}\",\"generation\":{}",
        h.generation
    )?;
    match &region.state {
        Ok(s) => {
            write!(out, ",\"state\":\"{}\",\"crash\":", s.state_name())?;
            if s.reason == 0 {
                out.write_str("null")?;
            } else {
                write!(
                    out,
                    "{{\"reason\":\"{}\",\"cpu\":{},\"ns\":{},\"utc\":",
                    reason_name(s.reason),
                    s.crash_cpu,
                    s.crash_ns
                )?;
                opt_string(out, crash_utc(region, trace).as_deref())?;
                out.write_str(",\"message\":")?;
                out.write_str(&json_string(s.message.as_bytes()))?;
                out.write_char('}')?;
            }
        }
        Err(_) => out.write_str(",\"state\":\"unreadable\",\"crash\":null")?,
    }
    out.write_str(",\"copies\":")?;
    let copies: Vec<String> = f.copies.iter().map(|&c| hex(c)).collect();
    strings(out, copies.iter().map(String::as_str))?;
    out.write_str(",\"holes\":")?;
    strings(out, f.holes.iter().map(String::as_str))?;
    out.write_str(",\"diagnostics\":")?;
    let diags: Vec<String> = trace.diagnostics.iter().map(ToString::to_string).collect();
    strings(out, diags.iter().map(String::as_str))?;
    out.write_str(",\"streams\":[")?;
    for (i, s) in trace.streams.iter().enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        write!(out, "{{\"index\":{},\"label\":", s.info.index)?;
        out.write_str(&json_string(s.info.label().as_bytes()))?;
        if s.info.kind == STREAM_KERNEL_CPU {
            write!(out, ",\"cpu\":{}", s.info.cpu)?;
        }
        write!(out, ",\"events\":{}", s.events.len())?;
        match (s.events.first(), s.events.last()) {
            (Some(a), Some(b)) => write!(out, ",\"first_ts\":{},\"last_ts\":{}", a.ts, b.ts)?,
            _ => out.write_str(",\"first_ts\":null,\"last_ts\":null")?,
        }
        write!(
            out,
            ",\"lost\":{{\"overwritten\":{},\"unreadable\":{},\"dropped\":{},\"torn\":{},\"end\":{}}},\"lost_exact\":{}",
            s.lost(LossKind::Overwritten),
            s.lost(LossKind::Unreadable),
            s.lost(LossKind::Dropped),
            s.lost(LossKind::Torn),
            s.lost(LossKind::End),
            s.lost_exact()
        )?;
        let n = |st| s.pages_with(st);
        write!(
            out,
            ",\"pages\":{{\"intact\":{},\"salvaged\":{},\"damaged\":{},\"corrupt\":{},\"truncated\":{},\"resetting\":{},\"absent\":{},\"unused\":{}}}}}",
            n(PageStatus::Intact),
            n(PageStatus::Salvaged),
            n(PageStatus::Damaged),
            n(PageStatus::Corrupt),
            n(PageStatus::Truncated),
            n(PageStatus::Resetting),
            n(PageStatus::Absent),
            n(PageStatus::Unused)
        )?;
    }
    out.write_str("]}")
}
