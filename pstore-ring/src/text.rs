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

/// Writes `[cpu]` or `[name]` padded for alignment.
fn write_stream(out: &mut impl Write, info: Option<&StreamInfo>, stream: u16) -> fmt::Result {
    match info {
        Some(i) if i.kind == STREAM_KERNEL_CPU => write!(out, "[{:03}]", i.cpu),
        Some(i) => write!(out, "[{}]", i.label()),
        None => write!(out, "[s{stream}]"),
    }
}

fn write_time(out: &mut impl Write, ts: u64) -> fmt::Result {
    write!(out, "{:>8}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000)
}

/// Writes bytes as a quoted, escaped string.
pub fn write_quoted(out: &mut impl Write, s: &[u8]) -> fmt::Result {
    out.write_char('"')?;
    for &b in s {
        match b {
            b'"' => out.write_str("\\\"")?,
            b'\\' => out.write_str("\\\\")?,
            b'\n' => out.write_str("\\n")?,
            b'\t' => out.write_str("\\t")?,
            0x20..=0x7e => out.write_char(b as char)?,
            _ => write!(out, "\\x{b:02x}")?,
        }
    }
    out.write_char('"')
}

pub fn write_value(out: &mut impl Write, v: &Value<'_>) -> fmt::Result {
    match *v {
        Value::Unsigned(x) => write!(out, "{x}"),
        Value::Signed(x) => write!(out, "{x}"),
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
    let decoded = ty.map(|t| (t, t.decode(payload, e)));
    match decoded {
        Some((t, Ok(values))) => {
            for (i, (f, v)) in t.fields.iter().zip(&values).enumerate() {
                if i > 0 {
                    out.write_char(' ')?;
                }
                write!(out, "{}=", f.name)?;
                write_value(out, v)?;
            }
            Ok(())
        }
        Some((t, Err(field))) => {
            let name = t.fields.get(field).map_or("?", |f| f.name.as_str());
            write!(out, "<payload ends inside `{name}`> raw=")?;
            write_value(out, &Value::Bytes(payload))
        }
        None => {
            out.write_str("raw=")?;
            write_value(out, &Value::Bytes(payload))
        }
    }
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

impl fmt::Display for Line<'_, '_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = |s: u16| self.streams.iter().find(|i| i.index == s);
        match self.item {
            Item::Event(ev) => write_event(f, ev, info(ev.stream), self.schema, self.endian),
            Item::Loss(l) => write_loss(f, l, info(l.stream)),
        }
    }
}

pub fn write_event(
    out: &mut impl Write,
    ev: &Event<'_>,
    info: Option<&StreamInfo>,
    schema: &Schema,
    e: Endian,
) -> fmt::Result {
    write_stream(out, info, ev.stream)?;
    out.write_char(' ')?;
    write_time(out, ev.ts)?;
    let ty = schema.get(ev.type_id);
    match ty {
        Some(t) => write!(out, ": {}: ", t.name)?,
        None => write!(out, ": type{}: ", ev.type_id)?,
    }
    write_fields(out, ty, ev.payload, e)
}

pub fn write_loss(out: &mut impl Write, l: &Loss, info: Option<&StreamInfo>) -> fmt::Result {
    write_stream(out, info, l.stream)?;
    out.write_char(' ')?;
    write_time(out, l.before_ts.or(l.after_ts).unwrap_or(0))?;
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
