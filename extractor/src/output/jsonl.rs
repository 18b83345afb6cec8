//! `crashring extract --format jsonl`: one JSON object per line.
//!
//! The schema, with `info --json`'s and the bundle manifest's, is in
//! extractor/SCHEMAS.md.

use super::debug::Debug;
use super::RegionView;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::{Item, Pulled};
use pstore_ring::ras;
use pstore_ring::read::{EventType, StreamInfo};
use pstore_ring::schema::Value;

/// Appends `s` as a JSON string: invalid UTF-8 becomes U+FFFD, as
/// `String::from_utf8_lossy` has it, and runs that need no escape go out
/// in one piece. Bytes, not `fmt`: JSON output is written a line per
/// event, and `fmt` cost more than the escaping.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    if s.is_ascii() {
        escape_runs(out, s);
    } else {
        for chunk in s.utf8_chunks() {
            escape_c1(out, chunk.valid());
            if !chunk.invalid().is_empty() {
                out.extend_from_slice("\u{fffd}".as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Appends valid UTF-8 as [`escape_runs`] does, with the C1 controls
/// (U+0080..U+009F, which JSON allows raw) escaped too: a person reading
/// the lines in a terminal must not have it driven by them (U+009B is a
/// CSI).
fn escape_c1(out: &mut Vec<u8>, text: &str) {
    let mut from = 0;
    for (at, c) in text
        .char_indices()
        .filter(|(_, c)| ('\u{80}'..='\u{9f}').contains(c))
    {
        escape_runs(out, &text.as_bytes()[from..at]);
        out.extend_from_slice(format!("\\u{:04x}", u32::from(c)).as_bytes());
        from = at + c.len_utf8();
    }
    escape_runs(out, &text.as_bytes()[from..]);
}

/// Appends valid UTF-8 with JSON's escapes (all of them ASCII).
fn escape_runs(out: &mut Vec<u8>, mut rest: &[u8]) {
    while let Some(at) = rest
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f)
    {
        out.extend_from_slice(&rest[..at]);
        match rest[at] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

pub fn write_u64(out: &mut Vec<u8>, x: u64) {
    out.extend_from_slice(pstore_ring::text::decimal_str(x, &mut [0; 20]).as_bytes());
}

fn write_i64(out: &mut Vec<u8>, x: i64) {
    if x < 0 {
        out.push(b'-');
    }
    write_u64(out, x.unsigned_abs());
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    pstore_ring::text::hex_bytes(out, bytes);
    out.push(b'"');
}

/// A pointer as `"0x..."` without leading zeros.
fn write_ptr(out: &mut Vec<u8>, x: u64) {
    out.extend_from_slice(b"\"0x");
    let digits = (64 - x.leading_zeros() as usize).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(HEX[(x >> (4 * i)) as usize & 15]);
    }
    out.push(b'"');
}

fn write_value(out: &mut Vec<u8>, v: &Value<'_>) {
    match *v {
        Value::Unsigned(x) => write_u64(out, x),
        Value::Signed(x) => write_i64(out, x),
        Value::Ptr(x) => write_ptr(out, x),
        Value::Chars(s) => {
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            write_string(out, &s[..end])
        }
        Value::Str(s) => write_string(out, s),
        Value::Bytes(s) => write_hex(out, s),
    }
}

fn write_stream(out: &mut Vec<u8>, stream: u16, info: Option<&StreamInfo>) {
    out.extend_from_slice(b",\"stream\":");
    write_u64(out, stream.into());
    match info {
        Some(i) if i.kind == STREAM_KERNEL_CPU => {
            out.extend_from_slice(b",\"cpu\":");
            write_u64(out, i.cpu.into());
            if i.lane > 0 {
                out.extend_from_slice(b",\"lane\":");
                write_u64(out, i.lane.into());
            }
        }
        Some(i) => {
            out.extend_from_slice(b",\"name\":");
            write_string(out, i.label().as_bytes());
            if i.pid != 0 {
                out.extend_from_slice(b",\"pid\":");
                write_u64(out, i.pid.into());
                out.extend_from_slice(b",\"uid\":");
                write_u64(out, i.uid.into());
            }
        }
        None => {}
    }
}

fn write_opt(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => write_u64(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

/// Writes decoded fields as a JSON object, by name.
pub fn write_fields(out: &mut Vec<u8>, t: &EventType, values: &[Value<'_>]) {
    out.push(b'{');
    for (i, (f, v)) in t.fields.iter().zip(values).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, f.name.as_bytes());
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
}

/// JSON lines.
pub struct Jsonl;

impl super::ItemFormat for Jsonl {
    fn items(&self, out: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
        let mut values = Vec::with_capacity(16);
        for item in items {
            write_item(out, &item.as_item(), view, &mut values);
            out.push(b'\n');
        }
    }

    /// `{"kind":"log","region":0,"source":"kernel printk log","ts":…,"text":"…"}`.
    fn log_lines(&self, out: &mut Vec<u8>, lines: &[super::LogLine], view: &RegionView) {
        for l in lines {
            out.extend_from_slice(b"{\"kind\":\"log\",\"region\":");
            write_u64(out, view.index as u64);
            out.extend_from_slice(b",\"source\":");
            write_string(out, l.source.as_bytes());
            out.extend_from_slice(b",\"ts\":");
            write_u64(out, l.ts);
            out.extend_from_slice(b",\"text\":");
            write_string(out, l.text.as_bytes());
            out.extend_from_slice(b"}\n");
        }
    }
}

/// Writes one item as one JSON line (without the newline); `values` is
/// scratch space.
pub fn write_item<'a>(
    out: &mut Vec<u8>,
    item: &Item<'_, 'a>,
    view: &RegionView<'_, 'a>,
    values: &mut Vec<Value<'a>>,
) {
    let (region, region_index) = (view.region, view.index);
    let info = region.streams.iter().find(|s| s.index == item.stream());
    match item {
        Item::Event(ev) => {
            out.extend_from_slice(b"{\"kind\":\"event\",\"region\":");
            write_u64(out, region_index as u64);
            write_stream(out, ev.stream, info);
            out.extend_from_slice(b",\"ts\":");
            write_u64(out, ev.ts);
            out.extend_from_slice(b",\"type\":");
            let ty = region.schema.get(ev.type_id);
            match ty {
                Some(t) => write_string(out, t.name.as_bytes()),
                None => {
                    out.extend_from_slice(b"\"type");
                    write_u64(out, ev.type_id.into());
                    out.push(b'"');
                }
            }
            out.extend_from_slice(if ev.salvaged {
                b",\"salvaged\":true"
            } else {
                b",\"salvaged\":false"
            });
            match ty {
                Some(t)
                    if t.decode_into(ev.payload, region.header.endian, values)
                        .is_ok() =>
                {
                    out.extend_from_slice(b",\"fields\":");
                    write_fields(out, t, values);
                    if let Some(debug) = Debug::of(view, ev) {
                        debug.write_json(out);
                    }
                    if let Some(words) = ras::describe(t, ev.payload, region.header.endian) {
                        out.extend_from_slice(b",\"described\":");
                        write_string(out, words.as_bytes());
                    }
                }
                _ => {
                    out.extend_from_slice(b",\"raw\":");
                    write_hex(out, ev.payload);
                }
            }
            out.push(b'}');
        }
        Item::Loss(l) => {
            out.extend_from_slice(b"{\"kind\":\"loss\",\"region\":");
            write_u64(out, region_index as u64);
            write_stream(out, l.stream, info);
            out.extend_from_slice(b",\"ts\":");
            write_u64(out, l.before_ts.or(l.after_ts).unwrap_or(0));
            out.extend_from_slice(b",\"reason\":\"");
            out.extend_from_slice(l.kind.name().as_bytes());
            out.extend_from_slice(b"\",\"events\":");
            write_u64(out, l.events);
            out.extend_from_slice(b",\"pages\":");
            write_u64(out, l.pages);
            out.extend_from_slice(b",\"after_ts\":");
            write_opt(out, l.after_ts);
            out.extend_from_slice(b",\"before_ts\":");
            write_opt(out, l.before_ts);
            out.extend_from_slice(b",\"cause\":");
            match l.cause {
                Some(c) => {
                    out.push(b'"');
                    out.extend_from_slice(c.name().as_bytes());
                    out.push(b'"');
                }
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(if l.exact {
                b",\"exact\":true}"
            } else {
                b",\"exact\":false}"
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{write_string, write_value};
    use pstore_ring::schema::Value;

    #[test]
    fn strings_are_valid_json_whatever_the_bytes() {
        let mut out = Vec::new();
        write_string(&mut out, b"a\"b\\c\n\x01\xff\x7f\xc3\xa9");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\n\\u0001\u{fffd}\\u007f\u{e9}\""
        );
    }

    #[test]
    fn pointers_are_hex_strings_without_leading_zeros() {
        for (p, want) in [
            (0xffff_8880_0000_0002u64, "\"0xffff888000000002\""),
            (0x123, "\"0x123\""),
            (0, "\"0x0\""),
        ] {
            let mut out = Vec::new();
            write_value(&mut out, &Value::Ptr(p));
            assert_eq!(String::from_utf8(out).unwrap(), want);
        }
    }
}
