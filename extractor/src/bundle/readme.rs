//! `README.txt`: what the bundle holds and how to open each file, for the
//! person who receives it.

use super::{BundleFile, FileKind, Part, Request, Source};
use crate::bundle::logs::Log;
use crate::bundle::redact::Rules;
use crate::recover::report::{utc, wall};
use pstore_ring::layout::STATE_CLEAN;
use pstore_ring::read::reason_name;
use pstore_ring::text::Escaped;
use std::fmt::Write;

/// The heading of the list of files, which [`super::check`] reads back.
pub(super) const FILES_HEADING: &str = "Files, and how to open them";

/// What a reader is told about each kind of file.
fn how_to_open(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Manifest => {
            "Machine-readable summary: source, kernel, boot id, crash, per-CPU\n    \
             recovered and lost counts, clock offsets, redaction, and the size and\n    \
             SHA-256 of every other file (check with: sha256sum FILE)."
        }
        FileKind::Readme => "This file.",
        FileKind::Dmesg => {
            "The kernel log lines the trace holds, as dmesg prints them\n    \
             ([seconds since boot] text). Any text viewer."
        }
        FileKind::CtfMetadata => {
            "CTF 1.8 trace, the complete recovered trace: one stream per CPU (and\n    \
             per user stream) that recorded or lost events, one packet per\n    \
             recovered page, losses as discarded events. Open the directory with `babeltrace2 DIR`, or in Trace\n    \
             Compass (File > Open Trace, pick `metadata`)."
        }
        FileKind::CtfStream => "A CTF data stream of the trace whose `metadata` is beside it.",
        FileKind::TraceDat => {
            "trace-cmd trace.dat (version 6), the same events: `trace-cmd report -i\n    \
             FILE`, or open it in KernelShark. Lost events show as [N EVENTS DROPPED]."
        }
        FileKind::Events => {
            "The same events as JSON lines, one object per event or loss, as\n    \
             `crashring extract --format jsonl` writes them (extractor/SCHEMAS.md):\n    \
             for jq, DuckDB's read_json, or `crashring export`."
        }
        FileKind::PerfettoArchive => {
            "Perfetto trace archive: open https://ui.perfetto.dev and drop this file\n    \
             on it (it holds kernel.pftrace: per-CPU kernel events, context switches\n    \
             and IRQs on Perfetto's scheduling and IRQ tracks, printk lines and\n    \
             markers on named tracks, data loss per CPU, and every added log on the\n    \
             same timeline). trace_processor opens it too."
        }
        FileKind::Log => {
            "A log added with --add-log, as given but for what redaction (above)\n    \
             takes out."
        }
        FileKind::KernelPrintk => {
            "The crashed kernel's own printk log, all of it (dmesg.txt has the\n    \
             lines the trace recorded), read from the dump's memory through its\n    \
             VMCOREINFO, as dmesg prints it; redacted and placed on the timeline\n    \
             as an added log. Any text viewer."
        }
        FileKind::Ramoops => {
            "A pstore/ramoops record of the crashed kernel (a crash report, the\n    \
             console, pmsg, function calls), read from the dump's memory where\n    \
             the --ramoops parameters put it, as /sys/fs/pstore shows it;\n    \
             redacted and placed on the timeline as an added log."
        }
        FileKind::KernelFtrace => {
            "The crashed kernel's own persistent ftrace buffer (trace_instance=),\n    \
             every CPU's events merged in time order, read from the dump's memory\n    \
             as crashring ftrace prints it; its times are the kernel's trace\n    \
             clock, printk's by default, so it is redacted and placed on the\n    \
             timeline as the kernel's printk log is."
        }
        FileKind::NextBootPstore => {
            "A pstore record of the crashed boot (a crash report, the console,\n    \
             pmsg, function calls; from ramoops, EFI variables or ERST), copied\n    \
             from the next boot's /sys/fs/pstore before anything removed it;\n    \
             redacted and placed on the timeline as an added log."
        }
        FileKind::NextBootFtrace => {
            "A persistent ftrace instance's trace file (trace_instance=), the\n    \
             crashed boot's events as the next boot's kernel reads them; redacted\n    \
             as an added log. Its lines carry the trace clock's seconds after the\n    \
             CPU, so they stay unplaced."
        }
        FileKind::NextBootKernel => {
            "The lines the next boot's kernel logged, before crashring's module\n    \
             loaded, about how the crashed boot ended: the firmware's boot error\n    \
             records as the kernel printed them (BERT: ...), machine checks it\n    \
             found in the banks ([Hardware Error]: ...; left across a warm reset,\n    \
             or raised in its own first seconds), AMD's previous reset reason.\n    \
             Their seconds are the next boot's, so they stay unplaced; redacted as\n    \
             an added log."
        }
        FileKind::Firmware => {
            "The firmware's Boot Error Record Table as the next boot found it\n    \
             (/sys/firmware/acpi/tables/data/BERT): every error status block and\n    \
             CPER section in words, a memory error's address and type, and every\n    \
             section's bytes in hex; redacted as an added log."
        }
    }
}

/// Writes `text` wrapped at 72 columns.
fn wrap(s: &mut String, text: &str) -> std::fmt::Result {
    let mut width = 0;
    for word in text.split(' ') {
        if width > 0 && width + 1 + word.len() > 72 {
            writeln!(s)?;
            width = 0;
        } else if width > 0 {
            s.push(' ');
            width += 1;
        }
        s.push_str(word);
        width += word.len();
    }
    writeln!(s)
}

pub(super) fn render(
    source: &Source,
    parts: &[Part],
    logs: &[Log],
    rules: &Rules,
    files: &[BundleFile],
    request: Option<&Request>,
) -> String {
    let mut s = String::new();
    let _ = write_all(&mut s, source, parts, logs, rules, files, request);
    s
}

fn write_all(
    s: &mut String,
    source: &Source,
    parts: &[Part],
    logs: &[Log],
    rules: &Rules,
    files: &[BundleFile],
    request: Option<&Request>,
) -> std::fmt::Result {
    writeln!(s, "crashring bug-report bundle")?;
    writeln!(s, "===========================")?;
    writeln!(s)?;
    if let Some(r) = request {
        writeln!(
            s,
            "A snapshot of the recorder while it ran (no crash), asked for by uid {}\nat {}: {}",
            r.uid,
            utc(r.at_ns),
            Escaped(r.why.as_bytes())
        )?;
        writeln!(s)?;
    }
    writeln!(
        s,
        "Made by crashring {} from {} ({}).",
        env!("CARGO_PKG_VERSION"),
        Escaped(source.file.as_bytes()),
        Escaped(source.container.as_bytes())
    )?;
    for p in parts {
        let h = &p.region.header;
        writeln!(s)?;
        writeln!(
            s,
            "Region {}{}: kernel {} on {}, {} CPUs, boot id {}.",
            p.index,
            p.place.phrase(Escaped(source.file.as_bytes())),
            Escaped(h.kernel_release.as_bytes()),
            Escaped(h.hostname.as_bytes()),
            h.cpu_count,
            h.boot_id
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )?;
        let when = |ns: u64| wall(ns, &p.wall).map_or(String::new(), |w| format!(", {}", utc(w)));
        match &p.region.state {
            Ok(st) if st.is_crash() => {
                let when = when(st.crash_ns);
                writeln!(
                    s,
                    "Crashed: {} on CPU {} at {}.{:09} s after boot{when}: {}",
                    reason_name(st.reason),
                    st.crash_cpu,
                    st.crash_ns / 1_000_000_000,
                    st.crash_ns % 1_000_000_000,
                    Escaped(st.message.as_bytes())
                )?;
            }
            Ok(st) => match st.shutdown_reason() {
                Some(why) => writeln!(
                    s,
                    "{} (no crash): a shutdown was asked for at {}.{:09} s after boot{}: {}",
                    if st.state == STATE_CLEAN {
                        "Shut down on purpose"
                    } else {
                        "Reset on its way down"
                    },
                    st.crash_ns / 1_000_000_000,
                    st.crash_ns % 1_000_000_000,
                    when(st.crash_ns),
                    Escaped(why.as_bytes())
                )?,
                None => writeln!(s, "State: {} (no crash recorded).", st.state_name())?,
            },
            Err(why) => writeln!(s, "State: unreadable ({why}).")?,
        }
        let (kernel, user) = (p.view().kernel_tally(), p.view().user_tally());
        writeln!(
            s,
            "Recovered {} events; {} lost (overwritten by newer ones, unreadable or\ndropped; per CPU in MANIFEST.json).{}",
            kernel.events,
            kernel.lost,
            if p.damaged {
                "\nThe region was damaged: see the diagnostics in MANIFEST.json."
            } else {
                ""
            }
        )?;
        let empty = p.view().empty_streams();
        if empty.total() > 0 {
            // Listed one by one they would bury the streams that hold
            // events; the traces have no stream or track for them.
            writeln!(
                s,
                "Left out of the traces: {empty}, which recorded\nand lost nothing (each is in MANIFEST.json)."
            )?;
        }
        if user.streams > 0 {
            // A user stream's pages are its process's to write: its counts
            // are that process's word, never the kernel's.
            writeln!(
                s,
                "Not counted above: {} user streams (labelled user:NAME), whose pages\ntheir processes wrote, claim {} events and {} lost.",
                user.streams,
                user.events,
                user.lost,
            )?;
        }
    }
    writeln!(s)?;
    if rules.classes.is_empty() && rules.raw_pointers && rules.input_layer {
        writeln!(s, "Nothing was redacted.")?;
    } else {
        let scope = [
            ("Redaction applies to", super::manifest::REDACTION_SCOPE),
            ("Kernel addresses are", super::manifest::KERNEL_ADDRESSES),
            ("Oops Code: lines are", super::manifest::CODE_LINES),
            (
                "Input-layer debug messages are",
                super::manifest::INPUT_LAYER,
            ),
        ];
        let classes: Vec<String> = rules.classes.iter().map(ToString::to_string).collect();
        writeln!(
            s,
            "Redacted: {}{}.\nHashes are keyed: equal values hash alike within this bundle, but\ncannot be guessed from it.",
            if classes.is_empty() {
                "no event classes".to_string()
            } else {
                format!("event classes {}", classes.join(", "))
            },
            if rules.raw_pointers {
                ";\nkernel addresses kept as they were (--raw-pointers)"
            } else {
                ";\nkernel addresses replaced by hashes, as the kernel's %p does"
            }
        )?;
        for (what, rule) in scope {
            writeln!(s)?;
            wrap(s, &format!("{what} {rule}."))?;
        }
    }
    if let Some(t) = rules.since_ns {
        let left_out: u64 = parts.iter().map(|p| p.redacted.before_since).sum();
        writeln!(s)?;
        writeln!(
            s,
            "Events before {}.{:09} s on the region's clock were left out (--since): {left_out}.",
            t / 1_000_000_000,
            t % 1_000_000_000
        )?;
    }
    if !logs.is_empty() {
        writeln!(s)?;
    }
    for l in logs {
        let r = &l.redaction;
        writeln!(
            s,
            "Log logs/{}: {} of {} lines placed on the trace's timeline; redacted:\n{} lines left out or hashed by class, {} addresses hashed, {} Code: lines\nmasked, {} overlong lines left out.",
            l.name,
            l.placed.len(),
            l.lines,
            r.counts.per_class.iter().sum::<u64>(),
            r.counts.pointers,
            r.counts.code_lines,
            r.too_long,
        )?;
    }
    writeln!(s)?;
    writeln!(s, "{FILES_HEADING}")?;
    writeln!(s, "{}", "-".repeat(FILES_HEADING.len()))?;
    let mut said = Vec::new();
    for f in files {
        // Streams of one CTF trace share a sentence.
        if f.kind == FileKind::CtfStream && said.contains(&FileKind::CtfStream) {
            writeln!(s, "{}", f.path.display())?;
            continue;
        }
        writeln!(s, "{}", f.path.display())?;
        writeln!(s, "    {}", how_to_open(f.kind))?;
        said.push(f.kind);
    }
    Ok(())
}
