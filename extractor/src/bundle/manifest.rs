//! `MANIFEST.json`: what the bundle holds, for machines. Keys are sorted
//! (the bytes depend only on the content); see the module docs of
//! [`super`] for the fields.

use super::{BundleFile, Part};
use crate::bundle::logs::Log;
use crate::bundle::redact::Rules;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::read::{reason_name, LossKind, WallClock};
use serde_json::{json, Value};

/// Schema version of the manifest; bump on incompatible changes.
pub const VERSION: u64 = 1;

/// What redaction reaches, for the manifest and README.txt (one text, so
/// they cannot disagree).
pub(super) const REDACTION_SCOPE: &str = "every file: dmesg.txt, the CTF trace, trace.dat and the Perfetto trace are written from the redacted trace (events of a dropped class left out, hashed fields as h: and 16 hex digits); in logs/ and the log tracks of the Perfetto trace, a kernel message (a bracketed console or dmesg line, a journal entry with _TRANSPORT=kernel) meets the printk classes as a printk event would (a dropped line is left out, a hashed text replaced by its hash), and a line over 1 MiB is left out unchecked";
pub(super) const KERNEL_ADDRESSES: &str = "hashed unless raw_pointers, with the trace's key (equal addresses hash alike in every file): in 64-bit regions 0xffff000000000000 and up, written as 16 hex digits; in 32-bit regions 0xbf000000 and up (the default 3G/1G split; lower kernel addresses of other splits are missed, higher non-addresses hashed), written as 8 hex digits; error pointers (the last 4095 values) kept; looked for in pointer fields, integer fields of the word size or wider, text, binary fields and undecodable payloads (words at any offset), and every line of every log";
pub(super) const CODE_LINES: &str = "masked unless raw_pointers: every hex digit of the bytes of an oops Code: line becomes x, as machine code carries kernel addresses in immediates that cannot be told apart from opcodes";

/// Nanoseconds since the Unix epoch as UTC, `2026-11-22T10:11:12.123456789Z`.
pub fn utc(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by
    // 400-year eras of 146097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A region's time as wall-clock time, with the offset in effect at `ts`
/// (the header's, or a later `clock` event's), when it is known (not 0).
pub fn wall(ts: u64, clock: &WallClock) -> Option<i128> {
    (clock.offset_at(ts) != 0).then(|| clock.wall_at(ts))
}

fn region(part: &Part) -> Value {
    let (r, t) = (&part.region, &part.trace);
    let h = &r.header;
    let when = |ts: u64| wall(ts, &part.wall).map(utc);
    let crash = match &r.state {
        Ok(s) if s.reason != 0 => json!({
            "reason": reason_name(s.reason),
            "cpu": s.crash_cpu,
            "time_ns": s.crash_ns,
            "time_utc": when(s.crash_ns),
            "message": s.message,
        }),
        _ => Value::Null,
    };
    let streams: Vec<Value> = t
        .streams
        .iter()
        .map(|s| {
            let kernel = s.info.kind == STREAM_KERNEL_CPU;
            json!({
                "index": s.info.index,
                "label": s.info.label(),
                "kind": if kernel { "kernel" } else { "user" },
                "cpu": kernel.then_some(s.info.cpu),
                "pid": (!kernel && s.info.pid != 0).then_some(s.info.pid),
                "recovered": s.events.len(),
                "lost": s.lost_events(),
                "lost_exact": s.lost_exact(),
                "lost_by_reason": {
                    "overwritten": s.lost(LossKind::Overwritten),
                    "unreadable": s.lost(LossKind::Unreadable),
                    "dropped": s.lost(LossKind::Dropped),
                    "torn": s.lost(LossKind::Torn),
                    "end": s.lost(LossKind::End),
                },
                "oldest_ns": s.events.first().map(|e| e.ts),
                "newest_ns": s.events.last().map(|e| e.ts),
            })
        })
        .collect();
    let mut clock = json!({
        "domain": "CLOCK_MONOTONIC",
        "wall_offset_ns": h.wall_offset_ns,
        "created_ns": h.created_ns,
        "created_utc": when(h.created_ns),
    });
    // Only when the wall clock was stepped, so a region without steps
    // keeps the manifest it always had.
    if !part.wall.steps().is_empty() {
        clock["steps"] = part
            .wall
            .steps()
            .iter()
            .map(|s| {
                json!({
                    "ns": s.ts,
                    "wall_offset_ns": s.wall_offset_ns,
                    "utc": wall(s.ts, &part.wall).map(utc),
                })
            })
            .collect();
    }
    json!({
        "index": part.index,
        "physical_address": format!("{:#x}", part.addr),
        "size": h.region_size,
        "kernel_release": h.kernel_release,
        "hostname": h.hostname,
        "boot_id": hex(&h.boot_id),
        "generation": h.generation,
        "cpus": h.cpu_count,
        "clock": clock,
        "state": r.state.as_ref().map_or("unreadable", |s| s.state_name()),
        "crash": crash,
        "damaged": part.damaged,
        "diagnostics": t.diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "holes": part.holes,
        "streams": streams,
        "recovered": t.event_count(),
        "lost": t.lost_events(),
        "clamped_timestamps": part.clamped,
        "redacted": {
            "per_class": part.redacted.per_class,
            "pointers_hashed": part.redacted.pointers,
            "code_lines_masked": part.redacted.code_lines,
        },
        "files": {
            "ctf": part.ctf_dir.display().to_string(),
            "tracedat": part.tracedat.display().to_string(),
        },
    })
}

fn log(l: &Log) -> Value {
    let p = &l.placement;
    json!({
        "name": l.name,
        "file": format!("logs/{}", l.name),
        "lines": l.lines,
        "placed": l.placed.len(),
        "unplaced": p.unplaced,
        "placed_by": {
            "weston_timeline": p.timeline,
            "journal_monotonic": p.journal_monotonic,
            "journal_realtime": p.journal_realtime,
            "bracketed_seconds": p.bracketed,
        },
        "bracketed_alignment": {
            "matched_printk_lines": p.matched,
            "offset_ns": p.offset_ns,
            "spread_ns": p.spread_ns,
        },
        "redacted": {
            "per_class": l.redaction.counts.per_class,
            "pointers_hashed": l.redaction.counts.pointers,
            "code_lines_masked": l.redaction.counts.code_lines,
            "long_lines_left_out": l.redaction.too_long,
        },
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The manifest's text.
pub(super) fn render(
    source: &super::Source,
    parts: &[Part],
    logs: &[Log],
    rules: &Rules,
    files: &[BundleFile],
) -> String {
    let manifest = json!({
        "manifest_version": VERSION,
        "tool": { "name": "crashring", "version": env!("CARGO_PKG_VERSION") },
        "source": {
            "file": source.file,
            "container": source.container,
            "vmcoreinfo_kernel": source.vmcoreinfo_kernel,
            "vmcoreinfo_crash_time": source.vmcoreinfo_crash_time,
            "warnings": source.warnings,
        },
        "regions": parts.iter().map(region).collect::<Vec<_>>(),
        "logs": logs.iter().map(log).collect::<Vec<_>>(),
        "redaction": {
            "classes": rules.classes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "raw_pointers": rules.raw_pointers,
            "hash_key": "SHA-256 of each region's bytes, which the bundle does not hold; logs use the first region's",
            "applies_to": REDACTION_SCOPE,
            "kernel_addresses": KERNEL_ADDRESSES,
            "code_lines": CODE_LINES,
        },
        "files": files.iter().map(|f| json!({
            "path": f.path.display().to_string(),
            "size": f.size,
            "sha256": f.sha256,
            "media_type": f.kind.media_type(),
            "format": f.kind.format(),
        })).collect::<Vec<_>>(),
    });
    let mut text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_matches_known_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(
            utc(1_795_350_896_500_000_000),
            "2026-11-22T12:34:56.500000000Z"
        );
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999999999Z");
    }
}
