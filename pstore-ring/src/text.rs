//! The text rendering of events, modelled on `trace-cmd report`:
//!
//! ```text
//! [001]      12.000004711: printk: level=6 flags=0 caller=T1 seq=4 text="hello"
//! [001]      12.000009000: ** 3 events lost (overwritten) **
//! ```
//!
//! The bracket holds the CPU for kernel streams and the stream's name for
//! user streams; the time is seconds of the region's clock. Strings are
//! quoted, with `"`, `\` and every byte outside printable ASCII escaped, so
//! one event is always one line.

use crate::endian::Endian;
use crate::layout::STREAM_KERNEL_CPU;
use crate::merge::Item;
use crate::read::Event;
use crate::read::{EventType, Loss, LossKind, Schema, StreamInfo};
use crate::schema::Value;
use core::fmt::{self, Write};

/// "000" to "999", for writing numbers three digits at a time without
/// `core::fmt` (text output formats millions of numbers, and `core::fmt`
/// costs several times this).
const TRIPLETS: [u8; 3000] = {
    let mut b = [0u8; 3000];
    let mut i = 0;
    while i < 1000 {
        b[3 * i] = b'0' + (i / 100) as u8;
        b[3 * i + 1] = b'0' + (i / 10 % 10) as u8;
        b[3 * i + 2] = b'0' + (i % 10) as u8;
        i += 1;
    }
    b
};

/// A few ASCII bytes built on the stack and written in one call.
struct Ascii {
    bytes: [u8; 48],
    len: usize,
}

impl Ascii {
    fn new() -> Ascii {
        Ascii {
            bytes: [0; 48],
            len: 0,
        }
    }

    /// Appends `label` if a number (a sign and 20 digits) still fits
    /// after it; says whether it did.
    fn label(&mut self, label: &str) -> bool {
        label.len() + 21 <= self.bytes.len() - self.len && self.str(label)
    }

    /// Appends `s` if it fits; says whether it did.
    fn str(&mut self, s: &str) -> bool {
        let Some(dst) = self.bytes.get_mut(self.len..self.len + s.len()) else {
            return false;
        };
        dst.copy_from_slice(s.as_bytes());
        self.len += s.len();
        true
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// `x` in decimal, padded on the left to `width` with `pad`.
    fn decimal(&mut self, x: u64, width: usize, pad: u8) {
        // Base-1000 groups, least significant first.
        let mut groups = [0u16; 7];
        let (mut n, mut rest) = (0, x);
        loop {
            groups[n] = (rest % 1000) as u16;
            rest /= 1000;
            n += 1;
            if rest == 0 {
                break;
            }
        }
        let top = groups[n - 1];
        let top_digits = 1 + usize::from(top >= 10) + usize::from(top >= 100);
        for _ in top_digits + 3 * (n - 1)..width {
            self.push(pad);
        }
        for (i, g) in groups[..n].iter().rev().enumerate() {
            let at = 3 * usize::from(*g);
            let skip = if i == 0 { 3 - top_digits } else { 0 };
            for &d in &TRIPLETS[at + skip..at + 3] {
                self.push(d);
            }
        }
    }

    fn signed(&mut self, x: i64) {
        if x < 0 {
            self.push(b'-');
        }
        self.decimal(x.unsigned_abs(), 0, b' ');
    }

    fn write(&self, out: &mut impl Write) -> fmt::Result {
        // Only ASCII bytes and whole strs are ever added.
        out.write_str(core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?"))
    }
}

fn write_unsigned(out: &mut impl Write, x: u64) -> fmt::Result {
    let mut a = Ascii::new();
    a.decimal(x, 0, b' ');
    a.write(out)
}

fn write_signed(out: &mut impl Write, x: i64) -> fmt::Result {
    let mut a = Ascii::new();
    a.signed(x);
    a.write(out)
}

/// Writes `[cpu]` or `[name]` padded for alignment, a space, and the time:
/// seconds right-aligned in 8 columns, a point, nanoseconds in 9 digits.
fn write_stream_and_time(
    out: &mut impl Write,
    info: Option<&StreamInfo>,
    stream: u16,
    ts: u64,
) -> fmt::Result {
    let mut a = Ascii::new();
    match info {
        Some(i) if i.kind == STREAM_KERNEL_CPU => {
            a.push(b'[');
            a.decimal(i.cpu.into(), 3, b'0');
            a.push(b']');
        }
        Some(i) => write!(out, "[{}]", i.label())?,
        None => write!(out, "[s{stream}]")?,
    }
    a.push(b' ');
    a.decimal(ts / 1_000_000_000, 8, b' ');
    a.push(b'.');
    a.decimal(ts % 1_000_000_000, 9, b'0');
    a.write(out)
}

/// Writes bytes as a quoted, escaped string.
pub fn write_quoted(out: &mut impl Write, s: &[u8]) -> fmt::Result {
    out.write_char('"')?;
    let mut rest = s;
    while !rest.is_empty() {
        // The longest run that needs no escape is written in one call.
        let plain = rest
            .iter()
            .position(|&b| !(0x20..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            .unwrap_or(rest.len());
        if plain > 0 {
            // Printable ASCII is valid UTF-8.
            out.write_str(core::str::from_utf8(&rest[..plain]).unwrap_or("?"))?;
            rest = &rest[plain..];
            continue;
        }
        match rest[0] {
            b'"' => out.write_str("\\\"")?,
            b'\\' => out.write_str("\\\\")?,
            b'\n' => out.write_str("\\n")?,
            b'\t' => out.write_str("\\t")?,
            b => write!(out, "\\x{b:02x}")?,
        }
        rest = &rest[1..];
    }
    out.write_char('"')
}

pub fn write_value(out: &mut impl Write, v: &Value<'_>) -> fmt::Result {
    match *v {
        Value::Unsigned(x) => write_unsigned(out, x),
        Value::Signed(x) => write_signed(out, x),
        Value::Ptr(x) => write!(out, "{x:#x}"),
        Value::Chars(s) | Value::Str(s) => write_quoted(out, s),
        Value::Bytes(s) => {
            out.write_str("0x")?;
            s.iter().try_for_each(|b| write!(out, "{b:02x}"))
        }
    }
}

/// Writes an event's fields as `name=value` pairs; a payload that does not
/// fit its type, or a type the schema lacks, is shown as raw hex.
pub fn write_fields(
    out: &mut impl Write,
    ty: Option<&EventType>,
    payload: &[u8],
    e: Endian,
) -> fmt::Result {
    let Some(t) = ty else {
        out.write_str("raw=")?;
        return write_value(out, &Value::Bytes(payload));
    };
    // Every field is decoded before any is written, so that a misfit
    // prints no half-written fields: on the stack when they fit (text
    // output decodes millions of events), else decoded twice.
    const ON_STACK: usize = 16;
    let mut stack = [Value::Unsigned(0); ON_STACK];
    let mut n = 0;
    let misfit = if t.fields.len() <= ON_STACK {
        let mut misfit = None;
        for v in t.values(payload, e) {
            match v {
                Ok(v) => {
                    stack[n] = v;
                    n += 1;
                }
                Err(field) => misfit = Some(field),
            }
        }
        misfit
    } else {
        t.misfit(payload, e)
    };
    if let Some(field) = misfit {
        let name = t.fields.get(field).map_or("?", |f| f.name.as_str());
        write!(out, "<payload ends inside `{name}`> raw=")?;
        return write_value(out, &Value::Bytes(payload));
    }
    if t.fields.len() <= ON_STACK {
        write_labeled(out, t, stack[..n].iter().copied())
    } else {
        write_labeled(out, t, t.values(payload, e).filter_map(Result::ok))
    }
}

/// Writes `name=value` pairs, space-separated.
fn write_labeled<'p>(
    out: &mut impl Write,
    t: &EventType,
    values: impl Iterator<Item = Value<'p>>,
) -> fmt::Result {
    for (i, (f, v)) in t.fields.iter().zip(values).enumerate() {
        // The label's leading space separates fields; the first has none.
        let label = f.label.get(usize::from(i == 0)..).unwrap_or(&f.name);
        // A number and its label go out in one piece where they fit.
        let mut a = Ascii::new();
        match v {
            Value::Unsigned(x) if a.label(label) => {
                a.decimal(x, 0, b' ');
                a.write(out)?;
            }
            Value::Signed(x) if a.label(label) => {
                a.signed(x);
                a.write(out)?;
            }
            _ => {
                out.write_str(label)?;
                write_value(out, &v)?;
            }
        }
    }
    Ok(())
}

pub fn loss_kind_name(kind: LossKind) -> &'static str {
    match kind {
        LossKind::Overwritten => "overwritten",
        LossKind::Unreadable => "unreadable pages",
        LossKind::Dropped => "dropped by the writer",
        LossKind::Torn => "torn",
    }
}

/// Renders one merged item as one line (without the newline).
pub struct Line<'r, 'i, 't, 'a> {
    pub item: &'i Item<'t, 'a>,
    pub schema: &'r Schema,
    pub streams: &'r [StreamInfo],
    pub endian: Endian,
}

impl<'r, 'i, 't, 'a> Line<'r, 'i, 't, 'a> {
    /// The line for `item`, described by `region`'s schema and streams.
    pub fn of(item: &'i Item<'t, 'a>, region: &'r crate::read::Region<'_>) -> Self {
        Line {
            item,
            schema: &region.schema,
            streams: &region.streams,
            endian: region.header.endian,
        }
    }
}

impl Line<'_, '_, '_, '_> {
    /// Writes the line to any writer; straight to a `String` this avoids
    /// the `Formatter` indirection `Display` goes through.
    pub fn write_to(&self, out: &mut impl Write) -> fmt::Result {
        let info = |s: u16| self.streams.iter().find(|i| i.index == s);
        match self.item {
            Item::Event(ev) => write_event(out, ev, info(ev.stream), self.schema, self.endian),
            Item::Loss(l) => write_loss(out, l, info(l.stream)),
        }
    }
}

impl fmt::Display for Line<'_, '_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

pub fn write_event(
    out: &mut impl Write,
    ev: &Event<'_>,
    info: Option<&StreamInfo>,
    schema: &Schema,
    e: Endian,
) -> fmt::Result {
    write_stream_and_time(out, info, ev.stream, ev.ts)?;
    let ty = schema.get(ev.type_id);
    match ty {
        Some(t) => out.write_str(&t.heading)?,
        None => write!(out, ": type{}: ", ev.type_id)?,
    }
    write_fields(out, ty, ev.payload, e)
}

pub fn write_loss(out: &mut impl Write, l: &Loss, info: Option<&StreamInfo>) -> fmt::Result {
    write_stream_and_time(out, info, l.stream, l.before_ts.or(l.after_ts).unwrap_or(0))?;
    write!(
        out,
        ": ** {} events lost ({}) **",
        l.events,
        loss_kind_name(l.kind)
    )
}

/// Writes a region's summary: header, state, then per stream its counts,
/// its losses and, when `pages` is set, every page slot.
pub fn write_summary(
    out: &mut impl Write,
    region: &crate::read::Region<'_>,
    trace: &crate::read::Trace<'_>,
    pages: bool,
) -> fmt::Result {
    use crate::read::{reason_name, PageStatus};
    let h = &region.header;
    let order = match h.endian {
        Endian::Little => "little",
        Endian::Big => "big",
    };
    writeln!(
        out,
        "format v{}, {order}-endian, {}-bit, {} bytes, page size {}",
        h.version,
        h.word_size * 8,
        h.region_size,
        h.page_size
    )?;
    write!(out, "kernel ")?;
    write_quoted(out, h.kernel_release.as_bytes())?;
    write!(out, " host ")?;
    write_quoted(out, h.hostname.as_bytes())?;
    write!(out, " producer ")?;
    write_quoted(out, h.producer.as_bytes())?;
    writeln!(
        out,
        " generation {} created {} ns wall offset {} ns",
        h.generation, h.created_ns, h.wall_offset_ns
    )?;
    match &region.state {
        Ok(s) => {
            write!(out, "state {}", s.state_name())?;
            if s.reason != 0 {
                write!(
                    out,
                    " ({}) at {} ns on cpu {}: ",
                    reason_name(s.reason),
                    s.crash_ns,
                    s.crash_cpu
                )?;
                write_quoted(out, s.message.as_bytes())?;
            }
            writeln!(out)?;
        }
        Err(p) => writeln!(out, "state unreadable: {p}")?,
    }
    for st in &trace.streams {
        let n = |s| st.pages_with(s);
        write!(
            out,
            "{}: {} events, {} lost; pages: {} intact, {} salvaged",
            st.info.label(),
            st.events.len(),
            st.lost_events(),
            n(PageStatus::Intact),
            n(PageStatus::Salvaged)
        )?;
        let bad = n(PageStatus::Corrupt)
            + n(PageStatus::Damaged)
            + n(PageStatus::Truncated)
            + n(PageStatus::Resetting);
        write!(out, ", {bad} unreadable")?;
        if n(PageStatus::Absent) > 0 {
            write!(out, ", {} not in the dump", n(PageStatus::Absent))?;
        }
        writeln!(out, ", {} unused", n(PageStatus::Unused))?;
        for l in &st.losses {
            write!(
                out,
                "  lost {} ({}) before index {}",
                l.events,
                loss_kind_name(l.kind),
                l.at_index
            )?;
            if let Some(t) = l.after_ts {
                write!(out, " after {t} ns")?;
            }
            if let Some(t) = l.before_ts {
                write!(out, " before {t} ns")?;
            }
            writeln!(out)?;
        }
        if pages {
            for p in &st.pages {
                write!(out, "  page {} at {:#x}: {:?}", p.slot, p.offset, p.status)?;
                if p.seq != 0 {
                    write!(out, " seq {}", p.seq)?;
                }
                if p.records != 0 {
                    write!(out, " {} records", p.records)?;
                }
                writeln!(out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn numbers_are_written_like_core_fmt_writes_them() {
        let cases = [0u64, 7, 10, 99, 100, 999, 1000, 1001, 123_456_789, u64::MAX];
        for x in cases {
            let mut s = String::new();
            write_unsigned(&mut s, x).unwrap();
            assert_eq!(s, alloc::format!("{x}"));
            let mut a = Ascii::new();
            a.decimal(x, 9, b'0');
            let mut s = String::new();
            a.write(&mut s).unwrap();
            assert_eq!(s, alloc::format!("{x:09}"));
        }
        for x in [0i64, -1, -1000, i64::MIN, i64::MAX] {
            let mut s = String::new();
            write_signed(&mut s, x).unwrap();
            assert_eq!(s, alloc::format!("{x}"));
        }
        let mut a = Ascii::new();
        assert!(!a.label(&"x".repeat(28)));
        assert!(a.label(&"x".repeat(27)));
        a.decimal(u64::MAX, 0, b' ');
        let mut s = String::new();
        a.write(&mut s).unwrap();
        assert_eq!(s, alloc::format!("{}{}", "x".repeat(27), u64::MAX));
        let mut s = String::new();
        write_stream_and_time(&mut s, None, 7, 12_000_004_711).unwrap();
        assert_eq!(s, "[s7]       12.000004711");
    }
}
