//! A crash's signature: sixteen hex digits that two crashes of one cause
//! share, on any box, boot, KASLR offset or build of the same kernel
//! source, and that crashes of other causes do not (kerneloops' and
//! ABRT's duplicate hash, Sentry's fingerprint). A fleet groups its
//! bundles by it.
//!
//! It is the SHA-256 of its basis, a few lines a person can read (the
//! summary and `info --json` keep them beside it), each with what differs
//! between two crashes of one cause taken out ([`normalize`]: addresses,
//! offsets into functions, numbers):
//!
//! - `reason:` the crash's reason, and `message:` its message;
//! - `title:` the kernel's first line about the failure, the last one the
//!   crashing CPU printed before the crash (`BUG: …`, `WARNING: …`,
//!   `Oops: …`, a lockup or stall detector's, sysrq's);
//! - `at:` the function its registers name (`RIP:`, arm64's `pc :`), and
//!   `calls:` the first frames of the call trace after it that are not
//!   the report's own (`dump_stack`, `panic`, `__warn`…) nor marked
//!   unreliable (`?`);
//! - `hardware:` the fatal hardware error ([`pstore_ring::ras`]) with its
//!   address and raw status left out, its bank, class and error code kept;
//! - `debug:` the debug callsites among the crashing CPU's last events.
//!
//! The corrected hardware errors recorded before a crash are not in it:
//! whether one falls among the last events varies between crashes of one
//! cause (`machine-check` saw its injected page's `memory_failure` there
//! on one run and not on the next); the fatal one is `hardware:`.
//!
//! A shutdown asked for with a reason (a unit's watchdog) gets one from
//! that reason. The lines come from the crashing CPU's streams only, and
//! only from the last [`WINDOW_NS`] before the crash: what other CPUs or
//! earlier minutes printed is not the crash's.

use pstore_ring::read::{reason_name, DebugEvent, PagedTrace, Region};
use pstore_ring::schema::{Value, EVENT_CRASH, EVENT_DEBUG, EVENT_PRINTK};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, VecDeque};

/// A crash's signature and what it was made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Signature {
    /// The first 8 bytes of the SHA-256 of `basis` joined by newlines.
    pub id: String,
    pub basis: Vec<String>,
}

/// How far before the crash the crashing CPU's events are read.
pub const WINDOW_NS: u64 = 30_000_000_000;

/// The crashing CPU's last events looked at for debug callsites.
const LAST_EVENTS: usize = 16;

/// The crashing CPU's last events read at all, per stream: a report is a
/// few dozen lines, and a CPU writing flat out fills the window with
/// millions, which memory must not follow.
const READ_EVENTS: usize = 4096;

/// Call-trace frames kept after the function the registers name.
const CALLS: usize = 3;

/// The first words of the lines the kernel opens a failure report with.
const TITLES: &[&str] = &[
    "BUG: ",
    "kernel BUG at ",
    "WARNING: ",
    "Oops: ",
    "general protection fault",
    "Unable to handle kernel ",
    "Internal error: ",
    "watchdog: BUG: ",
    "watchdog: Watchdog detected hard LOCKUP",
    "NMI watchdog: Watchdog detected hard LOCKUP",
    "rcu: INFO: ",
    "INFO: task ",
    "sysrq: Trigger a crash",
];

/// Frames of the report itself, not of what failed.
const REPORTING: &[&str] = &[
    // arm64's dump_stack() goes through these.
    "dump_backtrace",
    "dump_stack",
    "dump_stack_lvl",
    "show_stack",
    "panic",
    "vpanic",
    "nmi_panic",
    "__warn",
    "warn_slowpath_fmt",
    "report_bug",
    "handle_bug",
    "exc_invalid_op",
    "asm_exc_invalid_op",
    "die",
    "__die",
    "__die_body",
    "die_addr",
    "oops_end",
];

/// The signature of the generation's crash or reasoned shutdown; `None`
/// when it records neither (still running, a plain clean shutdown).
pub fn of(region: &Region<'_>, trace: &PagedTrace<'_>) -> Option<Signature> {
    let state = region.state.as_ref().ok()?;
    let mut basis = vec![format!("reason: {}", reason_name(state.reason))];
    if let Some(why) = state.shutdown_reason() {
        basis.push(format!("message: {}", normalize(why)));
        return Some(Signature::from_basis(basis));
    }
    if !state.is_crash() {
        return None;
    }
    let last = crashing_cpu(region, trace, state.crash_cpu, state.crash_ns);
    // The state block keeps 35 bytes of the message, the crash event all.
    let message = last.crash_message.as_deref().unwrap_or(&state.message);
    basis.push(format!("message: {}", normalize(message)));
    basis.extend(report_lines(&last.printk));
    if let Some(error) = pstore_ring::ras::fatal_hardware_error(region, trace) {
        basis.push(format!("hardware: {}", without_values(&error)));
    }
    if !last.callsites.is_empty() {
        let sites: Vec<&str> = last.callsites.iter().map(String::as_str).collect();
        basis.push(format!("debug: {}", sites.join(", ")));
    }
    Some(Signature::from_basis(basis))
}

impl Signature {
    fn from_basis(basis: Vec<String>) -> Signature {
        let digest = Sha256::digest(basis.join("\n").as_bytes());
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Signature { id, basis }
    }
}

/// What the crashing CPU left in the window before the crash.
#[derive(Default)]
struct Last {
    /// Its printk lines, in time order.
    printk: Vec<String>,
    /// `module:function` of the debug callsites among its last events.
    callsites: BTreeSet<String>,
    /// The message of its last `crash` event.
    crash_message: Option<String>,
}

fn crashing_cpu(region: &Region<'_>, trace: &PagedTrace<'_>, cpu: u32, crash_ns: u64) -> Last {
    let from = crash_ns.saturating_sub(WINDOW_NS);
    let e = region.header.endian;
    let mut events: Vec<(u64, u8, &[u8])> = Vec::new();
    for s in trace
        .streams
        .iter()
        .filter(|s| s.info.is_kernel() && u32::from(s.info.cpu) == cpu)
    {
        let first = s.decoded.partition_point(|p| p.last_ts < from);
        let mut kept = VecDeque::with_capacity(READ_EVENTS);
        for ev in s.events_from(first) {
            if !(from..=crash_ns).contains(&ev.ts) {
                continue;
            }
            if kept.len() == READ_EVENTS {
                kept.pop_front();
            }
            kept.push_back((ev.ts, ev.type_id, ev.payload));
        }
        events.extend(kept);
    }
    events.sort_by_key(|&(ts, ..)| ts);
    let mut last = Last::default();
    // The one text field of a printk or crash event.
    let text = |type_id: u8, payload: &[u8]| {
        let values = region.schema.get(type_id)?.decode(payload, e).ok()?;
        values.into_iter().find_map(|v| match v {
            Value::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        })
    };
    for &(_, type_id, payload) in &events {
        match type_id {
            EVENT_PRINTK => last.printk.extend(text(type_id, payload)),
            EVENT_CRASH => last.crash_message = text(type_id, payload),
            _ => {}
        }
    }
    let start = events.len().saturating_sub(LAST_EVENTS);
    for &(_, type_id, payload) in &events[start..] {
        if type_id != EVENT_DEBUG {
            continue;
        }
        let site = region
            .schema
            .get(EVENT_DEBUG)
            .and_then(|t| DebugEvent::parse(t, payload, e))
            .and_then(|d| region.callsite(d.callsite).ok());
        if let Some(c) = site {
            last.callsites.insert(format!(
                "{}:{}",
                String::from_utf8_lossy(c.module),
                String::from_utf8_lossy(c.function)
            ));
        }
    }
    last
}

/// Lines of one report's opening: `BUG: …` is followed by its `#PF:`
/// lines and `Oops: …`, which title the same failure.
const OPENING: usize = 4;

/// arm64's `Internal error: Oops: …` comes after its `Unable to handle
/// kernel …` and the decoded fault between them (`Mem abort info:`, the
/// syndrome's fields, the page-table walk): a dozen lines.
const ARM64_OPENING: usize = 16;

/// What `panic()` prints first: the crash's message, which the basis has
/// already, and then (for a panic without a report before it) its own
/// call trace.
const PANIC: &str = "Kernel panic - not syncing: ";

/// `title:`, `at:` and `calls:` from the crashing CPU's printk lines: the
/// last report's title (its first title line), then the first registers
/// line and call trace after it; with no report, the call trace `panic()`
/// printed.
fn report_lines(printk: &[String]) -> Vec<String> {
    let starts = |l: &String, prefixes: &[&str]| {
        let l = l.trim_start();
        prefixes.iter().any(|p| l.starts_with(p))
    };
    let is_title = |l: &String| starts(l, TITLES);
    let mut out = Vec::new();
    let reach = |t: usize| match printk[t].trim_start().starts_with("Internal error: ") {
        true => ARM64_OPENING,
        false => OPENING,
    };
    let anchor = if let Some(mut t) = printk.iter().rposition(is_title) {
        while let Some(earlier) = printk[t.saturating_sub(reach(t))..t]
            .iter()
            .position(is_title)
        {
            t = t.saturating_sub(reach(t)) + earlier;
        }
        out.push(format!("title: {}", normalize(printk[t].trim())));
        t
    } else if let Some(p) = printk.iter().rposition(|l| starts(l, &[PANIC])) {
        p
    } else {
        return out;
    };
    let after = &printk[anchor + 1..];
    // x86's heading, and arm64's.
    let is_trace = |l: &&String| {
        let l = l.trim_start();
        l.starts_with("Call Trace:") || l.starts_with("Call trace:")
    };
    // The report's own registers come before its call trace; a trace
    // through an interrupt shows the interrupted task's after it.
    let at = after.iter().take_while(|l| !is_trace(l)).find_map(|l| {
        let l = l.trim_start();
        l.strip_prefix("RIP: 0010:")
            .or_else(|| l.strip_prefix("pc : "))
            .and_then(frame)
    });
    if let Some(at) = &at {
        out.push(format!("at: {at}"));
    }
    let calls: Vec<String> = after
        .iter()
        .skip_while(|l| !is_trace(l))
        .skip(1)
        .map(|l| l.trim())
        .filter(|l| !(l.starts_with('<') && l.ends_with('>')))
        .take_while(|l| frame(l.trim_start_matches("? ")).is_some())
        .filter(|l| !l.starts_with("? ") && !after_noreturn_call(l))
        .filter_map(frame)
        .filter(|f| {
            let name = f.split(' ').next().unwrap_or_default();
            !REPORTING.contains(&name) && Some(f) != at.as_ref()
        })
        .take(CALLS)
        .collect();
    if !calls.is_empty() {
        out.push(format!("calls: {}", calls.join(" < ")));
    }
    out
}

/// Whether a frame is a return address at a function's very start: that
/// of a call to a noreturn function (`panic()`) that ended the function
/// before it, which arm64's 6.1 prints by the address itself and so under
/// the wrong name (x86, and arm64 since, look the address up less one
/// byte, within the caller). Not the caller's name: left out.
fn after_noreturn_call(text: &str) -> bool {
    text.split_once('+')
        .is_some_and(|(_, offset)| offset.starts_with("0x0/"))
}

/// A stack frame's function and module, `name+0x1a/0x30 [module]` →
/// `name [module]`, without the suffix the compiler gives a part or copy
/// of a function (`.cold`, `.isra.0`, `.constprop.0`), which one build
/// splits off and another does not; `None` for anything else.
fn frame(text: &str) -> Option<String> {
    let (name, rest) = text.trim().split_once('+')?;
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    if name.is_empty() || !name.chars().all(ident) {
        return None;
    }
    let name = name.split('.').next().unwrap_or(name);
    let (offset, module) = rest.split_once(' ').unwrap_or((rest, ""));
    let (at, size) = offset.split_once('/')?;
    if !(at.starts_with("0x") && size.starts_with("0x")) {
        return None;
    }
    let module = module.trim();
    Some(if module.starts_with('[') && module.ends_with(']') {
        format!("{name} {module}")
    } else {
        name.to_string()
    })
}

/// `text` without what differs between two reports of one cause: offsets
/// into functions (`+0x1a/0x30`) dropped, hex values (`0x…`) and bare
/// addresses (8 or more hex digits) as `?`, numbers as `#` (identifiers
/// such as `eth0` or `x86_64` kept), runs of spaces as one.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let word_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if let Some(len) = function_offset(rest) {
            rest = &rest[len..];
        } else if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
            rest = rest.trim_start();
        } else if c.is_ascii_alphanumeric() {
            let word = &rest[..word_end];
            out.push_str(&normalize_word(word));
            rest = &rest[word_end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.trim().to_string()
}

fn normalize_word(word: &str) -> String {
    let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
    if let Some(digits) = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        if hex(digits) {
            return "0x?".into();
        }
    }
    if word.len() >= 8 && hex(word) {
        return "?".into();
    }
    if word.starts_with(|c: char| c.is_ascii_digit()) {
        // `22s`, `1:2` split by the caller: the digits go, a unit stays.
        let digits = word.trim_start_matches(|c: char| c.is_ascii_digit());
        return format!("#{digits}");
    }
    word.to_string()
}

/// The length of a function offset `+0x1a/0x30` at the start of `text`.
fn function_offset(text: &str) -> Option<usize> {
    let hex_run = |s: &str| s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
    let a = text.strip_prefix("+0x")?;
    let n = hex_run(a);
    let b = a.get(n..)?.strip_prefix("/0x")?;
    let m = hex_run(b);
    (n > 0 && m > 0).then(|| 3 + n + 3 + m)
}

/// A hardware error in words with the values of one occurrence left out:
/// hex numbers (the address, the raw status, MSCOD), keeping the bank,
/// the class words and the error code's name.
fn without_values(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            let (core, tail) = w.split_at(w.trim_end_matches([',', ':', ')', ';']).len());
            match core.strip_prefix("0x") {
                Some(d) if !d.is_empty() && d.chars().all(|c| c.is_ascii_hexdigit()) => {
                    format!("0x?{tail}")
                }
                _ => w.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
