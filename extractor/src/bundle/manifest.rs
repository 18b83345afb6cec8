//! `MANIFEST.json`: what the bundle holds, for machines. Keys are sorted
//! (the bytes depend only on the content); see the module docs of
//! [`super`] for the fields.

use super::{BundleFile, Part};
use crate::bundle::logs::Log;
use crate::bundle::redact::Rules;
use crate::recover::report::{utc, RegionReport};
use serde_json::{json, Value};

/// Schema version of the manifest; bump on incompatible changes.
pub const VERSION: u64 = 1;

/// What redaction reaches, for the manifest and README.txt (one text, so
/// they cannot disagree).
pub(super) const REDACTION_SCOPE: &str = "every file: dmesg.txt, the CTF trace, trace.dat, events.jsonl and the Perfetto trace are written from the redacted trace (events of a dropped class left out, hashed fields as h: and 16 hex digits); in logs/ and the log tracks of the Perfetto trace, a kernel message (a bracketed console or dmesg line, a syslog line tagged HOST kernel:, a journal entry with _TRANSPORT=kernel) meets the printk classes as a printk event would (a dropped line is left out, a hashed text replaced by its hash), every value of a journal entry is scrubbed as it decodes (past JSON escapes, and in fields given as bytes), and a line over 1 MiB is left out unchecked; in MANIFEST.json, the crash's message meets the crash classes as the crash event's text does, and where a class applies to the crash, printk, debug or hardware-error events (or --since, or a report's grant) the signature keeps its id but not its basis and a hardware error is withheld";
pub(super) const KERNEL_ADDRESSES: &str = "hashed unless raw_pointers, with the trace's key (equal addresses hash alike in every file): in 64-bit regions 0xffff000000000000 and up, written as 16 hex digits; in 32-bit regions 0xbf000000 and up (the default 3G/1G split; lower kernel addresses of other splits are missed, higher non-addresses hashed), written as 8 hex digits; error pointers (the last 4095 values) kept; looked for in pointer fields, integer fields of the word size or wider, text, binary fields and undecodable payloads (words at any offset), and every line of every log";
pub(super) const INPUT_LAYER: &str = "left out unless input_layer (a bundle root made with --input-layer, or crashring recover): the debug messages of input-layer callsites (input core, HID, keyboards, touch; by their file or module), which can carry what a person typed; in a report asked for without a crash, also a debug message of no DRM category recorded formatted, without a callsite (the kernel's callsite area full or missing), which could be the input layer's";
pub(super) const GRANT: &str = "a report asked for without a crash holds only the asker's own user streams (no other stream is named) and, of the kernel's streams, the clock and loss records, printk lines up to printk_level, DRM debug messages of drm_categories and the kernel_events types; everything else is left out of every file";
/// A crash's hardware error in words, in a bundle whose redaction
/// reaches the events it is read from.
const SUMMARY_WITHHELD: &str =
    "withheld: the bundle's redaction applies to the events it is read from";
pub(super) const CODE_LINES: &str = "masked unless raw_pointers: every hex digit of the bytes of an oops Code: line becomes x, as machine code carries kernel addresses in immediates that cannot be told apart from opcodes";

/// The region's [`RegionReport`], and what the bundle made of it.
fn region(part: &Part, rules: &Rules) -> Value {
    let mut report = RegionReport::of(&part.view(), &part.wall, part.damaged, &part.holes);
    if part.summaries_withheld {
        if let Some(s) = &mut report.signature {
            s.basis.clear();
        }
        if let Some(error) = report
            .crash
            .as_mut()
            .and_then(|c| c.hardware_error.as_mut())
        {
            *error = SUMMARY_WITHHELD.into();
        }
    }
    let mut region = serde_json::to_value(report).unwrap_or_default();
    region["clamped_timestamps"] = json!(part.clamped);
    region["redacted"] = json!({
        "per_class": part.redacted.per_class,
        "pointers_hashed": part.redacted.pointers,
        "code_lines_masked": part.redacted.code_lines,
        "input_layer_left_out": part.redacted.input_layer,
    });
    // Only a bundle made --since says what that left out.
    if rules.since_ns.is_some() {
        region["redacted"]["before_since_left_out"] = json!(part.redacted.before_since);
    }
    // Only a report's, whose grant leaves out what it does not name.
    if rules.grant.is_some() {
        region["redacted"]["outside_grant_left_out"] = json!(part.redacted.outside_grant);
    }
    region["files"] = json!({
        "ctf": part.ctf_dir.display().to_string(),
        "tracedat": part.tracedat.display().to_string(),
        "events": part.events.display().to_string(),
    });
    region
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
            "from_printk_log": p.from_printk_log,
        },
        "redacted": {
            "per_class": l.redaction.counts.per_class,
            "pointers_hashed": l.redaction.counts.pointers,
            "code_lines_masked": l.redaction.counts.code_lines,
            "long_lines_left_out": l.redaction.too_long,
        },
    })
}

/// The manifest's text.
pub(super) fn render(
    source: &super::Source,
    parts: &[Part],
    logs: &[Log],
    rules: &Rules,
    files: &[BundleFile],
    request: Option<&super::Request>,
) -> String {
    let mut manifest = json!({
        "manifest_version": VERSION,
        "tool": { "name": "crashring", "version": env!("CARGO_PKG_VERSION") },
        "source": source,
        "regions": parts.iter().map(|p| region(p, rules)).collect::<Vec<_>>(),
        "logs": logs.iter().map(log).collect::<Vec<_>>(),
        "redaction": {
            "classes": rules.classes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "raw_pointers": rules.raw_pointers,
            "input_layer": rules.input_layer,
            "hash_key": "derived from a SHA-256 of each region's bytes, which the bundle does not hold; logs use the first region's",
            "applies_to": REDACTION_SCOPE,
            "kernel_addresses": KERNEL_ADDRESSES,
            "code_lines": CODE_LINES,
            "input_layer_messages": INPUT_LAYER,
        },
        "files": files.iter().map(|f| json!({
            "path": f.path.display().to_string(),
            "size": f.size,
            "sha256": f.sha256,
            "media_type": f.kind.media_type(),
            "format": f.kind.format(),
        })).collect::<Vec<_>>(),
    });
    if let (Some(t), Some(r)) = (rules.since_ns, manifest["redaction"].as_object_mut()) {
        r.insert("since_ns".into(), json!(t));
    }
    if let (Some(g), Some(r)) = (&rules.grant, manifest["redaction"].as_object_mut()) {
        let categories: Vec<&str> = g
            .drm_categories
            .iter()
            .filter_map(|&c| pstore_ring::read::drm_category_name(c))
            .collect();
        r.insert(
            "grant".into(),
            json!({
                "uid": g.uid,
                "streams": if g.streams.is_empty() { json!("all of the asker's") } else { json!(g.streams) },
                "printk_level": g.printk_level,
                "drm_categories": categories,
                "kernel_events": g.kernel_events,
                "holds": GRANT,
            }),
        );
    }
    // A crash bundle's manifest is as it always was; a snapshot says so.
    if let (Some(r), Some(m)) = (request, manifest.as_object_mut()) {
        m.insert(
            "request".into(),
            json!({
                "reason": "snapshot",
                "uid": r.uid,
                "why": r.why,
                "time": utc(r.at_ns),
            }),
        );
    }
    let mut text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    text.push('\n');
    text
}
