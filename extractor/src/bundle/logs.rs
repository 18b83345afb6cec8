//! User logs added to a bundle (`--add-log`), placed on the recovered
//! trace's timeline (the crashed kernel's CLOCK_MONOTONIC) where their
//! lines carry times.
//!
//! Lines are recognised one by one, by content:
//!
//! - **Weston timeline JSON** `{"T":[sec,nsec],"N":"name",...}`: already
//!   CLOCK_MONOTONIC.
//! - **journal JSON** (`journalctl -o json`): `__MONOTONIC_TIMESTAMP` when
//!   `_BOOT_ID` is the region's boot, else `__REALTIME_TIMESTAMP` moved by
//!   the region's wall-clock offset in effect when the line was written
//!   ([`WallClock::mono_at`]: after the wall clock was stepped, by the
//!   offset after the step).
//! - **Bracketed seconds** `[   12.345678] text`: a serial console, `dmesg`
//!   or `journalctl -o short-monotonic`. Console times are the printk
//!   clock, not CLOCK_MONOTONIC, so the log is aligned by the kernel
//!   messages it shares with the trace: the offset is the median over
//!   every line whose text is a printk line the trace holds exactly once.
//!   With no such line, the times are taken as CLOCK_MONOTONIC, and the
//!   manifest says so.
//!
//! Anything else stays in the bundle's copy of the log, unplaced.
//!
//! The copy is redacted first ([`redact`]), and lines are placed from
//! the copy, so the Perfetto trace shows no more of a log than the copy
//! does.

use crate::bundle::redact::{Counts, TextRedactor, Verdict};
use pstore_ring::read::{Event, Region, WallClock};
use pstore_ring::schema::{Value, EVENT_PRINTK, PRINTK_BACKFILLED};
use std::collections::HashMap;
use std::io::{self, BufRead, Write};

/// Longest line considered; longer ones are kept in the copy, unplaced.
const MAX_LINE: usize = 1 << 20;
/// Lines placed per log at most, so a huge log cannot exhaust memory.
pub const MAX_PLACED: usize = 1_000_000;
/// Longest text kept for a placed line.
const MAX_TEXT: usize = 512;

/// How a log's lines were put on the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Weston timeline lines (CLOCK_MONOTONIC).
    pub timeline: u64,
    /// Journal lines of the region's boot, by their monotonic time.
    pub journal_monotonic: u64,
    /// Journal lines of another boot, by their wall-clock time.
    pub journal_realtime: u64,
    /// Bracketed-seconds lines.
    pub bracketed: u64,
    /// Bracketed lines that matched a printk line of the trace: the
    /// alignment's evidence.
    pub matched: u64,
    /// Added to bracketed times (nanoseconds); 0 when nothing matched.
    pub offset_ns: i64,
    /// How far the matched lines' own offsets stray from `offset_ns` at
    /// most: the alignment's precision.
    pub spread_ns: u64,
    /// Whether `offset_ns` and `spread_ns` are the kernel printk log's,
    /// taken by a log of the same clock ([`Log::borrow_alignment`]).
    pub from_printk_log: bool,
    /// Lines with no time we understand, too long, before the clock's
    /// zero, or over [`MAX_PLACED`].
    pub unplaced: u64,
}

/// A log read for a bundle.
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// Its name in the bundle (`logs/NAME`).
    pub name: String,
    pub lines: u64,
    pub placement: Placement,
    /// (time on the trace's clock, text), in file order.
    pub placed: Vec<(u64, String)>,
    /// What [`redact`] did to the copy the lines were placed from.
    pub redaction: Redaction,
}

/// What redacting a log did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redaction {
    /// Lines left out or hashed per class, addresses hashed, `Code:`
    /// lines masked.
    pub counts: Counts,
    /// Lines over [`MAX_LINE`], left out: too long to check.
    pub too_long: u64,
}

impl Log {
    /// Takes `reference`'s alignment for a log that found none of its own
    /// (no printk line of the trace in it) and is stamped by the same
    /// clock: the kernel's ftrace buffer beside its printk log, both on
    /// the kernel's local clock. Returns whether it did.
    pub fn borrow_alignment(&mut self, reference: &Log) -> bool {
        let (own, theirs) = (&mut self.placement, &reference.placement);
        // Every line bracketed: the offset applies to them all.
        let all_bracketed = own.bracketed > 0 && own.bracketed == self.placed.len() as u64;
        if own.matched > 0 || theirs.matched == 0 || !all_bracketed {
            return false;
        }
        let offset = i128::from(theirs.offset_ns);
        let before = self.placed.len();
        self.placed
            .retain_mut(|(ts, _)| match u64::try_from(i128::from(*ts) + offset) {
                Ok(moved) => {
                    *ts = moved;
                    true
                }
                Err(_) => false,
            });
        let gone = (before - self.placed.len()) as u64;
        own.bracketed -= gone;
        own.unplaced += gone;
        own.offset_ns = theirs.offset_ns;
        own.spread_ns = theirs.spread_ns;
        own.from_printk_log = true;
        true
    }
}

/// Copies the log `input` to `out`, redacted as the trace it goes with
/// (`r` holds that trace's key and rules):
///
/// - A kernel message meets the `printk` classes, as a printk event of
///   the trace with that text would: a line a class drops is left out,
///   one whose text a class hashes keeps its time and prefix with the
///   text replaced by its hash. A kernel message is the text of a
///   bracketed line (a serial console, `dmesg`: every such line is a
///   printk line), after a `HOST kernel: ` prefix if it has one
///   (`journalctl -o short-monotonic`), or the `MESSAGE` of a journal
///   entry whose `_TRANSPORT` is `kernel`.
/// - Every line, kernel message or not, has its kernel addresses hashed
///   and `Code:` bytes masked (unless the rules keep raw pointers), a
///   journal `MESSAGE` given as an array of bytes included.
/// - A line too long to check is left out.
///
/// Other lines are copied byte for byte.
pub fn redact(
    input: impl BufRead,
    out: &mut impl Write,
    r: &TextRedactor,
) -> io::Result<Redaction> {
    let mut done = Redaction {
        counts: r.counts(),
        too_long: 0,
    };
    for line in split_lines(input) {
        let Some(mut line) = line? else {
            done.too_long += 1;
            continue;
        };
        if redact_line(&mut line, r, &mut done.counts) {
            out.write_all(&line)?;
        }
    }
    Ok(done)
}

/// Redacts one line in place; `false` to leave it out.
fn redact_line(line: &mut Vec<u8>, r: &TextRedactor, counts: &mut Counts) -> bool {
    if line.starts_with(b"{") {
        if let Ok(serde_json::Value::Object(entry)) = serde_json::from_slice(line) {
            return redact_journal(line, entry, r, counts);
        }
    }
    let start = match (bracketed(line), syslog_kernel_text(line)) {
        (Some((_, at)), _) => at + kernel_text_at(&line[at..]),
        (None, Some(at)) => at,
        (None, None) => {
            r.scrub(line, counts);
            return true;
        }
    };
    let end = start + line[start..].trim_ascii_end().len();
    match r.printk(&line[start..end]) {
        Verdict::Drop(c) => {
            counts.per_class[c] += 1;
            false
        }
        Verdict::Hash(c) => {
            counts.per_class[c] += 1;
            let hash = r.hash_text(&line[start..end]);
            let after = start + hash.len();
            line.splice(start..end, hash);
            // The hash is no address: only what surrounds it is scrubbed.
            let (head, rest) = line.split_at_mut(start);
            r.scrub(head, counts);
            r.scrub(&mut rest[after - start..], counts);
            true
        }
        Verdict::Keep => {
            r.scrub(line, counts);
            true
        }
    }
}

/// Redacts a journal entry (`journalctl -o json`), written back as JSON
/// when a value changes; `false` to leave it out. Every field's value is
/// scrubbed as its text decodes, not as the line spells it: an escape
/// (`\n` before an address, `\u0066` for an `f`) would hide an address
/// from a scrub of the line, and a field the journal gives as an array
/// of bytes (not UTF-8) is no text in the line at all.
fn redact_journal(
    line: &mut Vec<u8>,
    mut entry: serde_json::Map<String, serde_json::Value>,
    r: &TextRedactor,
    counts: &mut Counts,
) -> bool {
    use serde_json::Value as J;
    let kernel = entry.get("_TRANSPORT").and_then(J::as_str) == Some("kernel");
    let message = entry.get("MESSAGE").and_then(journal_bytes);
    let mut changed = false;
    if let (true, Some(text)) = (kernel, &message) {
        match r.printk(text.trim_ascii()) {
            Verdict::Drop(c) => {
                counts.per_class[c] += 1;
                return false;
            }
            Verdict::Hash(c) => {
                counts.per_class[c] += 1;
                let hash = r.hash_text(text.trim_ascii());
                let hash = J::String(String::from_utf8_lossy(&hash).into_owned());
                entry.insert("MESSAGE".into(), hash);
                changed = true;
            }
            Verdict::Keep => {}
        }
    }
    for value in entry.values_mut() {
        let Some(mut text) = journal_bytes(value) else {
            continue;
        };
        let before = counts.scrubbed();
        r.scrub(&mut text, counts);
        if counts.scrubbed() == before {
            continue;
        }
        // A scrub rewrites digits in place: text stays text.
        *value = match value {
            J::String(_) => J::String(String::from_utf8_lossy(&text).into_owned()),
            _ => J::Array(text.into_iter().map(J::from).collect()),
        };
        changed = true;
    }
    if changed {
        let ending = line.len() - line.trim_ascii_end().len();
        let ending = line.split_off(line.len() - ending);
        *line = J::Object(entry).to_string().into_bytes();
        line.extend_from_slice(&ending);
    }
    r.scrub(line, counts);
    true
}

/// A journal field's bytes: a string, or the array of bytes the journal
/// writes for one that is not UTF-8.
fn journal_bytes(v: &serde_json::Value) -> Option<Vec<u8>> {
    match v {
        serde_json::Value::String(s) => Some(s.clone().into_bytes()),
        serde_json::Value::Array(bytes) => Some(
            bytes
                .iter()
                .filter_map(|b| b.as_u64())
                .map(|b| b as u8)
                .collect(),
        ),
        _ => None,
    }
}

/// A line's time as it reads.
enum Stamp {
    Monotonic(u64),
    Realtime(u64),
    Bracketed(u64),
}

/// The trace clock the logs are placed on: the first region's.
pub struct Clock<'t> {
    boot_id: String,
    wall: WallClock,
    /// printk text → its time, or `None` if the trace holds it twice.
    printk: HashMap<&'t [u8], Option<u64>>,
}

impl<'t> Clock<'t> {
    /// The clock of `region`, whose (possibly redacted) `events` supply
    /// the printk lines bracketed times are aligned by; `wall` is its
    /// wall clock, from the unredacted trace
    /// ([`Region::wall_clock_of_pages`]).
    pub fn new(
        region: &Region,
        events: impl IntoIterator<Item = Event<'t>>,
        wall: WallClock,
    ) -> Clock<'t> {
        let e = region.header.endian;
        let mut printk: HashMap<&[u8], Option<u64>> = HashMap::new();
        if let Some(t) = region.schema.get(EVENT_PRINTK) {
            let flags = t.fields.iter().position(|f| f.name == "flags");
            for ev in events {
                if ev.type_id != EVENT_PRINTK {
                    continue;
                }
                let (mut text, mut backfilled) = (None, false);
                for (i, v) in t.values(ev.payload, e).filter_map(Result::ok).enumerate() {
                    match v {
                        Value::Unsigned(f) if Some(i) == flags => {
                            backfilled = f & u64::from(PRINTK_BACKFILLED) != 0
                        }
                        Value::Str(s) if text.is_none() => text = Some(s),
                        _ => {}
                    }
                }
                // A backfilled line's time was worked out from printk's,
                // not seen: it cannot tell how the two clocks relate.
                if backfilled {
                    continue;
                }
                if let Some(text) = text.map(trim).filter(|t| !t.is_empty()) {
                    printk
                        .entry(text)
                        .and_modify(|seen| *seen = None)
                        .or_insert(Some(ev.ts));
                }
            }
        }
        Clock {
            boot_id: region
                .header
                .boot_id
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            wall,
            printk,
        }
    }

    /// Reads `input` and places its lines.
    pub fn place(&self, name: &str, input: impl BufRead) -> io::Result<Log> {
        let mut log = Log {
            name: name.into(),
            ..Log::default()
        };
        let mut bracketed = Vec::new();
        let mut offsets = Vec::new();
        for line in split_lines(input) {
            let line = line?;
            log.lines += 1;
            let Some(line) = line else {
                log.placement.unplaced += 1;
                continue;
            };
            let line = String::from_utf8_lossy(trim(&line)).into_owned();
            let Some((stamp, text)) = self.stamp(&line) else {
                log.placement.unplaced += 1;
                continue;
            };
            // A bracketed line that is one of the trace's printk lines:
            // how far its time is from the trace's.
            let mut matched = None;
            let ts = match stamp {
                Stamp::Monotonic(ts) => Some(ts),
                Stamp::Realtime(wall) => self.wall.mono_at(i128::from(wall)),
                Stamp::Bracketed(ts) => {
                    if let Some(Some(at)) = self.printk.get(kernel_text(&text).as_bytes()) {
                        matched = Some(i128::from(*at) - i128::from(ts));
                    }
                    bracketed.push(log.placed.len());
                    Some(ts)
                }
            };
            match ts {
                Some(ts) if log.placed.len() < MAX_PLACED => {
                    // Only placed lines count: what a log holds past
                    // MAX_PLACED is not held in memory, offsets included.
                    offsets.extend(matched);
                    let p = &mut log.placement;
                    match stamp {
                        Stamp::Monotonic(_) if line.starts_with("{\"T\"") => p.timeline += 1,
                        Stamp::Monotonic(_) => p.journal_monotonic += 1,
                        Stamp::Realtime(_) => p.journal_realtime += 1,
                        Stamp::Bracketed(_) => p.bracketed += 1,
                    }
                    log.placed.push((ts, cut(text)));
                }
                _ => {
                    if matches!(stamp, Stamp::Bracketed(_)) {
                        bracketed.pop();
                    }
                    log.placement.unplaced += 1;
                }
            }
        }
        offsets.sort_unstable();
        log.placement.matched = offsets.len() as u64;
        let offset = offsets.get(offsets.len() / 2).copied().unwrap_or(0);
        let spread = offsets
            .iter()
            .map(|o| (o - offset).unsigned_abs())
            .max()
            .unwrap_or(0);
        log.placement.spread_ns = u64::try_from(spread).unwrap_or(u64::MAX);
        log.placement.offset_ns = offset.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        if offset != 0 {
            let mut gone = Vec::new();
            for &i in &bracketed {
                match u64::try_from(i128::from(log.placed[i].0) + offset) {
                    Ok(ts) => log.placed[i].0 = ts,
                    Err(_) => gone.push(i),
                }
            }
            // Lines the offset puts before the clock's zero are unplaced.
            let mut at = 0;
            log.placed.retain(|_| {
                at += 1;
                gone.binary_search(&(at - 1)).is_err()
            });
            log.placement.bracketed -= gone.len() as u64;
            log.placement.unplaced += gone.len() as u64;
        }
        Ok(log)
    }

    /// A line's time and the text to show for it.
    fn stamp(&self, line: &str) -> Option<(Stamp, String)> {
        if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            return self.json_stamp(&v);
        }
        let (ns, at) = bracketed(line.as_bytes())?;
        Some((Stamp::Bracketed(ns), line[at..].to_string()))
    }

    fn json_stamp(&self, v: &serde_json::Value) -> Option<(Stamp, String)> {
        if let Some(t) = v.get("T").and_then(|t| t.as_array()) {
            let (s, ns) = (t.first()?.as_u64()?, t.get(1)?.as_u64()?);
            let ts = s.checked_mul(1_000_000_000)?.checked_add(ns)?;
            let name = v.get("N").and_then(|n| n.as_str()).unwrap_or("timeline");
            return Some((Stamp::Monotonic(ts), name.to_string()));
        }
        let micros = |key: &str| v.get(key)?.as_str()?.parse::<u64>().ok()?.checked_mul(1000);
        let message = String::from_utf8_lossy(&journal_bytes(v.get("MESSAGE")?)?).into_owned();
        let who = v
            .get("SYSLOG_IDENTIFIER")
            .or_else(|| v.get("_COMM"))
            .and_then(|w| w.as_str());
        let text = match who {
            Some(w) => format!("{w}: {message}"),
            None => message,
        };
        let same_boot = v.get("_BOOT_ID").and_then(|b| b.as_str()) == Some(self.boot_id.as_str());
        match (
            same_boot,
            micros("__MONOTONIC_TIMESTAMP"),
            micros("__REALTIME_TIMESTAMP"),
        ) {
            (true, Some(ts), _) => Some((Stamp::Monotonic(ts), text)),
            (_, _, Some(wall)) => Some((Stamp::Realtime(wall), text)),
            _ => None,
        }
    }
}

/// `[   12.345678] text`, or with the syslog priority `kmsg_dump()` puts
/// before it in a pstore record (`<6>[   12.345678] text`): the time, and
/// where the text starts.
fn bracketed(line: &[u8]) -> Option<(u64, usize)> {
    let priority = syslog_priority(line);
    let rest = line[priority..].strip_prefix(b"[")?;
    let close = memchr::memchr(b']', rest)?;
    let ns = seconds(std::str::from_utf8(&rest[..close]).ok()?.trim())?;
    let text = &rest[close + 1..];
    let skipped = text.len() - text.trim_ascii_start().len();
    Some((ns, priority + 1 + close + 1 + skipped))
}

/// Where the kernel's message starts in a syslog line of the kernel, as
/// `journalctl -o short`, kern.log and syslog write them: a time (BSD
/// `Nov 30 12:00:00`, or one RFC 3339 word), the host, `kernel: `, and
/// the message, after the console's `[   12.345678] ` where the kernel's
/// time is kept too.
fn syslog_kernel_text(line: &[u8]) -> Option<usize> {
    const TAG: &[u8] = b" kernel: ";
    // A time and a host name fit well within this.
    let head = &line[..line.len().min(128)];
    let tag = memchr::memmem::find(head, TAG)?;
    let space = memchr::memrchr(b' ', &head[..tag])?;
    let (stamp, host) = (&head[..space], &head[space + 1..tag]);
    let bsd = |s: &[u8]| {
        let words: Vec<&[u8]> = s.split(|&b| b == b' ').filter(|w| !w.is_empty()).collect();
        matches!(words[..], [month, day, time]
            if month.len() == 3 && month.iter().all(u8::is_ascii_alphabetic)
                && (1..=2).contains(&day.len()) && day.iter().all(u8::is_ascii_digit)
                && time.len() == 8 && time[2] == b':' && time[5] == b':')
    };
    // One word: 2026-11-30T12:00:00, then any fraction and offset.
    let rfc3339 = |s: &[u8]| {
        let digits = |r: std::ops::Range<usize>| s[r].iter().all(u8::is_ascii_digit);
        s.len() >= 19
            && !s.contains(&b' ')
            && (s[4], s[7], s[10], s[13], s[16]) == (b'-', b'-', b'T', b':', b':')
            && [0..4, 5..7, 8..10, 11..13, 14..16, 17..19]
                .into_iter()
                .all(digits)
    };
    if host.is_empty() || !(bsd(stamp) || rfc3339(stamp)) {
        return None;
    }
    let at = tag + TAG.len();
    Some(bracketed(&line[at..]).map_or(at, |(_, text)| at + text))
}

/// The length of a leading `<N>` (facility and level, at most 3 digits:
/// `print_syslog()`), 0 without one.
fn syslog_priority(line: &[u8]) -> usize {
    let Some(rest) = line.strip_prefix(b"<") else {
        return 0;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    match rest.get(digits) {
        Some(b'>') if (1..=3).contains(&digits) => digits + 2,
        _ => 0,
    }
}

/// A console line's kernel message: the journal's `HOST kernel: ` (one
/// word before it, so a message merely containing " kernel: " is not
/// cut) or `kernel: ` prefix off.
fn kernel_text(text: &str) -> &str {
    // The offset follows ASCII: a character boundary.
    &text[kernel_text_at(text.as_bytes())..]
}

fn kernel_text_at(text: &[u8]) -> usize {
    const TAG: &[u8] = b"kernel: ";
    if text.starts_with(TAG) {
        return TAG.len();
    }
    match memchr::memchr(b' ', text) {
        Some(space) if text[space + 1..].starts_with(TAG) => space + 1 + TAG.len(),
        _ => 0,
    }
}

/// `12.345678` as nanoseconds (up to nine decimals).
fn seconds(text: &str) -> Option<u64> {
    let (s, frac) = text.split_once('.').unwrap_or((text, ""));
    if s.is_empty() || frac.len() > 9 || !s.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut ns: u64 = frac.parse().unwrap_or(0);
    for _ in frac.len()..9 {
        ns *= 10;
    }
    s.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(ns)
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut at = MAX_TEXT;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
    }
    text
}

/// A log on another boot's clock (the boot after the crash): its lines
/// counted, none placed on the crashed boot's timeline.
pub fn unplaced(name: &str, input: impl BufRead) -> io::Result<Log> {
    let mut log = Log {
        name: name.into(),
        ..Log::default()
    };
    for line in split_lines(input) {
        line?;
        log.lines += 1;
    }
    log.placement.unplaced = log.lines;
    Ok(log)
}

/// The lines of `input`; `None` for one longer than [`MAX_LINE`], which
/// is skipped without being held in memory.
fn split_lines(mut input: impl BufRead) -> impl Iterator<Item = io::Result<Option<Vec<u8>>>> {
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let buf = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(Err(e)),
            };
            if buf.is_empty() {
                done = true;
                if line.is_empty() && !too_long {
                    return None;
                }
                break;
            }
            let (take, end) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !too_long {
                if line.len() + take > MAX_LINE {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(&buf[..take]);
                }
            }
            input.consume(take);
            if end {
                break;
            }
        }
        Some(Ok((!too_long).then_some(line)))
    })
}

#[cfg(test)]
mod tests;
