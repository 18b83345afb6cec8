//! `crashring extract --format jsonl`: one JSON object per line.
//!
//! The schema is stable; fields may be added, never renamed or removed.
//!
//! ```text
//! {"kind":"event","region":0,"stream":1,"cpu":1,"ts":12000004711,
//!  "type":"printk","salvaged":false,"fields":{"level":6,"text":"hello"}}
//! {"kind":"loss","region":0,"stream":1,"cpu":1,"ts":12000009000,
//!  "reason":"overwritten","events":3,"pages":1,"after_ts":null,"before_ts":12000009000}
//! ```
//!
//! - `kind`: `event` or `loss`. `region`: index in `crashring info` order.
//! - `stream`: the stream index; `cpu`: the CPU for kernel streams, absent
//!   for user streams, which carry `name` instead.
//! - `ts`, `after_ts`, `before_ts`: nanoseconds on the region's clock, as
//!   integers (exact below 2^53, 104 days of uptime; beyond that a
//!   JavaScript reader loses precision).
//! - `type`: the event type's name, or `type<N>` if the schema lacks it;
//!   `fields`: by name. Integers are numbers, pointers are hex strings
//!   (`"0xffff..."`), strings are UTF-8 with invalid bytes replaced by
//!   U+FFFD, byte arrays are hex strings. A payload that does not fit its
//!   type appears as `"raw"` (hex) instead of `fields`.
//! - `salvaged`: the event came from a page that was open at the crash.
//! - `reason`: `overwritten`, `unreadable`, `dropped` or `torn`.

use pstore_ring::endian::Endian;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Item;
use pstore_ring::read::{EventType, LossKind, Region, StreamInfo};
use pstore_ring::schema::Value;
use std::fmt::{self, Write};

/// Writes `s` as a JSON string: invalid UTF-8 becomes U+FFFD, as
/// `String::from_utf8_lossy` has it, and runs that need no escape go out
/// in one piece.
pub fn write_string(out: &mut impl Write, s: &[u8]) -> fmt::Result {
    out.write_char('"')?;
    for chunk in s.utf8_chunks() {
        let mut rest = chunk.valid();
        while !rest.is_empty() {
            let plain = rest
                .bytes()
                .position(|b| b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f)
                .unwrap_or(rest.len());
            out.write_str(&rest[..plain])?;
            // The byte that stopped the run is ASCII.
            let Some(&b) = rest.as_bytes().get(plain) else {
                break;
            };
            match b {
                b'"' => out.write_str("\\\"")?,
                b'\\' => out.write_str("\\\\")?,
                b'\n' => out.write_str("\\n")?,
                b'\r' => out.write_str("\\r")?,
                b'\t' => out.write_str("\\t")?,
                b => write!(out, "\\u{b:04x}")?,
            }
            rest = &rest[plain + 1..];
        }
        if !chunk.invalid().is_empty() {
            out.write_char('\u{fffd}')?;
        }
    }
    out.write_char('"')
}

pub fn write_u64(out: &mut impl Write, x: u64) -> fmt::Result {
    out.write_str(pstore_ring::text::decimal_str(x, &mut [0; 20]))
}

pub fn write_hex(out: &mut impl Write, bytes: &[u8]) -> fmt::Result {
    out.write_str("\"0x")?;
    bytes.iter().try_for_each(|b| write!(out, "{b:02x}"))?;
    out.write_char('"')
}

fn write_value(out: &mut impl Write, v: &Value<'_>) -> fmt::Result {
    match *v {
        Value::Unsigned(x) => write_u64(out, x),
        Value::Signed(x) => {
            if x < 0 {
                out.write_char('-')?;
            }
            write_u64(out, x.unsigned_abs())
        }
        Value::Ptr(x) => write!(out, "\"{x:#x}\""),
        Value::Chars(s) => {
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            write_string(out, &s[..end])
        }
        Value::Str(s) => write_string(out, s),
        Value::Bytes(s) => write_hex(out, s),
    }
}

fn write_stream(out: &mut impl Write, stream: u16, info: Option<&StreamInfo>) -> fmt::Result {
    write!(out, ",\"stream\":{stream}")?;
    match info {
        Some(i) if i.kind == STREAM_KERNEL_CPU => write!(out, ",\"cpu\":{}", i.cpu),
        Some(i) => {
            out.write_str(",\"name\":")?;
            write_string(out, i.label().as_bytes())
        }
        None => Ok(()),
    }
}

pub fn reason(kind: LossKind) -> &'static str {
    match kind {
        LossKind::Overwritten => "overwritten",
        LossKind::Unreadable => "unreadable",
        LossKind::Dropped => "dropped",
        LossKind::Torn => "torn",
    }
}

fn write_opt(out: &mut impl Write, v: Option<u64>) -> fmt::Result {
    match v {
        Some(v) => write!(out, "{v}"),
        None => out.write_str("null"),
    }
}

/// Writes decoded fields as a JSON object, by name.
pub fn write_fields(out: &mut impl Write, t: &EventType, values: &[Value<'_>]) -> fmt::Result {
    out.write_char('{')?;
    for (i, (f, v)) in t.fields.iter().zip(values).enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        write_string(out, f.name.as_bytes())?;
        out.write_char(':')?;
        write_value(out, v)?;
    }
    out.write_char('}')
}

/// Writes one item as one JSON line (without the newline).
pub fn write_item(
    out: &mut impl Write,
    item: &Item<'_, '_>,
    region: &Region<'_>,
    region_index: usize,
) -> fmt::Result {
    let info = region.streams.iter().find(|s| s.index == item.stream());
    match item {
        Item::Event(ev) => {
            write!(out, "{{\"kind\":\"event\",\"region\":{region_index}")?;
            write_stream(out, ev.stream, info)?;
            write!(out, ",\"ts\":{},\"type\":", ev.ts)?;
            let ty = region.schema.get(ev.type_id);
            match ty {
                Some(t) => write_string(out, t.name.as_bytes())?,
                None => write!(out, "\"type{}\"", ev.type_id)?,
            }
            write!(out, ",\"salvaged\":{}", ev.salvaged)?;
            let e: Endian = region.header.endian;
            match ty.map(|t| (t, t.decode(ev.payload, e))) {
                Some((t, Ok(values))) => {
                    out.write_str(",\"fields\":")?;
                    write_fields(out, t, &values)?;
                }
                _ => {
                    out.write_str(",\"raw\":")?;
                    write_hex(out, ev.payload)?;
                }
            }
            out.write_char('}')
        }
        Item::Loss(l) => {
            write!(out, "{{\"kind\":\"loss\",\"region\":{region_index}")?;
            write_stream(out, l.stream, info)?;
            write!(
                out,
                ",\"ts\":{},\"reason\":\"{}\",\"events\":{},\"pages\":{},\"after_ts\":",
                l.before_ts.or(l.after_ts).unwrap_or(0),
                reason(l.kind),
                l.events,
                l.pages
            )?;
            write_opt(out, l.after_ts)?;
            out.write_str(",\"before_ts\":")?;
            write_opt(out, l.before_ts)?;
            out.write_char('}')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::write_string;

    #[test]
    fn strings_are_valid_json_whatever_the_bytes() {
        let mut s = String::new();
        write_string(&mut s, b"a\"b\\c\n\x01\xff\x7f").unwrap();
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\u{fffd}\\u007f\"");
    }
}
