//! The text rendering of events, modelled on `trace-cmd report`:
//!
//! ```text
//! [001]      12.000004711: printk: level=6 flags=0 caller=T1 seq=4 text="hello"
//! [001]      12.000009000: ** 3 events lost (overwritten) **
//! ```
//!
//! The bracket holds the CPU for kernel streams and, for user streams, the
//! stream's label (`user:weston`: the name escaped by [`push_label_name`]
//! after a prefix no kernel label has), so no name can pass for a CPU's
//! line; the time is seconds of the region's clock. Strings are quoted,
//! with `"`, `\` and every byte outside printable ASCII escaped, so one
//! event is always one line. Text for people outside quotes (a log line,
//! a crash message) goes through [`push_escaped`], which lets no control
//! character through.

use crate::debug_args::DebugArg;
use crate::endian::Endian;
use crate::kprintf::Pointers;
use crate::merge::Item;
use crate::read::{DebugEvent, EndCause, Event, EventType, Loss, LossKind, Region, StreamInfo};
use crate::schema::{Value, EVENT_DEBUG};
use alloc::vec::Vec;
use core::fmt;

mod summary;
pub use summary::{write_paged_summary, write_summary, EmptyStreams};

// Lines are built as bytes in a `Vec<u8>`, not through `core::fmt`: text
// output formats millions of events, and `core::fmt` with its per-call
// UTF-8 checks costs several times this. Every byte appended is ASCII or
// comes from a `str`, so a line is always valid UTF-8.

/// "00" to "99", for writing numbers two digits at a time.
const PAIRS: [u8; 200] = {
    let mut b = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        b[2 * i] = b'0' + (i / 10) as u8;
        b[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    b
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `x` in decimal, padded on the left to `width` (at most 20) with
/// `pad`.
fn decimal(out: &mut Vec<u8>, x: u64, width: usize, pad: u8) {
    let len = digits(x).max(width.min(20));
    // Twenty pad bytes (u64::MAX has 20 digits) go out in one fixed-size
    // copy, the digits are written over them from the right, and the rest
    // is cut off. Digits built in a stack buffer and then copied out stall
    // the CPU: a wide load of bytes just stored two at a time cannot be
    // forwarded from the store buffer.
    let at = out.len();
    out.extend_from_slice(&[pad; 20]);
    place_digits(&mut out[at..at + len], x);
    out.truncate(at + len);
}

fn digits(x: u64) -> usize {
    x.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Writes `x`'s digits at the end of `buf`, which must have room.
fn place_digits(buf: &mut [u8], x: u64) {
    // Most numbers written (a time's seconds and nanoseconds, CPUs, most
    // fields) fit 32 bits, whose divisions by 100 are cheaper.
    if let Ok(x) = u32::try_from(x) {
        return place_digits_u32(buf, x);
    }
    let mut i = buf.len();
    let mut n = x;
    while n >= 100 {
        let d = 2 * (n % 100) as usize;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
    }
    if n >= 10 {
        let d = 2 * n as usize;
        buf[i - 2..i].copy_from_slice(&PAIRS[d..d + 2]);
    } else {
        buf[i - 1] = b'0' + n as u8;
    }
}

/// [`place_digits`] for a number that fits 32 bits.
fn place_digits_u32(buf: &mut [u8], x: u32) {
    let mut i = buf.len();
    let mut n = x;
    while n >= 100 {
        let d = 2 * (n % 100) as usize;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
    }
    if n >= 10 {
        let d = 2 * n as usize;
        buf[i - 2..i].copy_from_slice(&PAIRS[d..d + 2]);
    } else {
        buf[i - 1] = b'0' + n as u8;
    }
}

/// `x` in decimal, for writers that go through `core::fmt`, where
/// formatting integers costs several times this.
pub fn decimal_str(x: u64, buf: &mut [u8; 20]) -> &str {
    let buf = &mut buf[..digits(x)];
    place_digits(buf, x);
    // Only ASCII digits were written.
    core::str::from_utf8(buf).unwrap_or("?")
}

fn signed(out: &mut Vec<u8>, x: i64) {
    if x < 0 {
        out.push(b'-');
    }
    decimal(out, x.unsigned_abs(), 0, b' ');
}

/// `0x` and the digits, as `{:#x}` writes them.
fn hex(out: &mut Vec<u8>, x: u64) {
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    let mut n = x;
    loop {
        i -= 1;
        buf[i] = HEX[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(b"0x");
    out.extend_from_slice(&buf[i..]);
}

/// Appends `0x` and two hex digits per byte.
pub fn hex_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(b"0x");
    for &b in bytes {
        out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
}

/// Appends `name` as a user stream's label shows it: printable ASCII as
/// it is, except `\`, `"`, `#`, `[` and `]`, and every other byte
/// (space, control bytes, UTF-8) as `\xNN`. The name is then one word
/// that cannot close a bracket, start a line or move a terminal's cursor.
pub fn push_label_name(out: &mut Vec<u8>, name: &[u8]) {
    for &b in name {
        if b.is_ascii_graphic() && !matches!(b, b'\\' | b'"' | b'#' | b'[' | b']') {
            out.push(b);
        } else {
            escape_byte(out, b);
        }
    }
}

/// Appends `\xNN`.
fn escape_byte(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&escaped_byte(b));
}

/// `\xNN`.
fn escaped_byte(b: u8) -> [u8; 4] {
    [
        b'\\',
        b'x',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 15)],
    ]
}

/// Whether `c` must not reach a terminal or a file a person reads as it
/// is: a C0 or C1 control or DEL (a newline or carriage return starts a
/// line the text did not, ESC and CSI drive the terminal, BEL rings it),
/// the Unicode line and paragraph separators, and the bidirectional
/// controls that reorder what a line shows. Tab is kept: it moves no line.
pub fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
        )
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends `text` for a line a person reads, unquoted (a log line, a crash
/// message): valid UTF-8 as it is but for the characters [`unsafe_char`]
/// names, each of whose bytes is written `\xNN`, as is every byte that is
/// not UTF-8, as the kernel writes control bytes in `/dev/kmsg`. What is
/// appended never holds a line break or a control character.
pub fn push_escaped(out: &mut Vec<u8>, text: &[u8]) {
    escaped_pieces(text, |piece, _| {
        out.extend_from_slice(piece);
        true
    });
}

/// As [`push_escaped`], at most `max` bytes of it: cut between one
/// character and the next, never inside a `\xNN` or a UTF-8 character,
/// for a field of fixed size.
pub fn push_escaped_within(out: &mut Vec<u8>, text: &[u8], max: usize) {
    let mut room = max;
    escaped_pieces(text, |piece, divisible| {
        if piece.len() <= room {
            out.extend_from_slice(piece);
            room -= piece.len();
            return true;
        }
        if divisible {
            // A run of valid UTF-8: as many whole characters as fit.
            let fits = core::str::from_utf8(piece)
                .map(|run| {
                    run.char_indices()
                        .map(|(at, c)| at + c.len_utf8())
                        .take_while(|&end| end <= room)
                        .last()
                        .unwrap_or(0)
                })
                .unwrap_or(0);
            out.extend_from_slice(&piece[..fits]);
        }
        false
    });
}

/// [`push_escaped`]'s output, piece by piece to `piece`, until it returns
/// false: runs of valid UTF-8 written as they are (`divisible`: they may
/// be cut between characters), and `\xNN` escapes, each one piece.
fn escaped_pieces(text: &[u8], mut piece: impl FnMut(&[u8], bool) -> bool) {
    for chunk in text.utf8_chunks() {
        let valid = chunk.valid().as_bytes();
        let mut from = 0;
        for (at, c) in chunk.valid().char_indices() {
            if unsafe_char(c) {
                if !piece(&valid[from..at], true) {
                    return;
                }
                for &b in &valid[at..at + c.len_utf8()] {
                    if !piece(&escaped_byte(b), false) {
                        return;
                    }
                }
                from = at + c.len_utf8();
            }
        }
        if !piece(&valid[from..], true) {
            return;
        }
        for &b in chunk.invalid() {
            if !piece(&escaped_byte(b), false) {
                return;
            }
        }
    }
}

/// Text shown as [`push_escaped`] writes it, for writers that go through
/// `core::fmt`.
pub struct Escaped<'a>(pub &'a [u8]);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(self.0.len());
        push_escaped(&mut out, self.0);
        // Only valid UTF-8 and ASCII escapes were pushed.
        f.write_str(core::str::from_utf8(&out).unwrap_or("?"))
    }
}

/// Appends `[cpu]` (kernel streams) or `[label]` (user streams: see
/// [`StreamInfo::label`]), a space, and the time: seconds right-aligned in
/// 8 columns, a point, nanoseconds in 9 digits.
fn stream_and_time(out: &mut Vec<u8>, info: Option<&StreamInfo>, stream: u16, ts: u64) {
    out.push(b'[');
    match info {
        Some(i) if i.is_kernel() => decimal(out, i.cpu.into(), 3, b'0'),
        Some(i) => {
            out.extend_from_slice(crate::read::USER_LABEL_PREFIX.as_bytes());
            i.push_user_name(out);
        }
        None => {
            out.push(b's');
            decimal(out, stream.into(), 0, b' ');
        }
    }
    out.extend_from_slice(b"] ");
    decimal(out, ts / 1_000_000_000, 8, b' ');
    out.push(b'.');
    decimal(out, ts % 1_000_000_000, 9, b'0');
}

/// Appends bytes as a quoted, escaped string.
fn quoted(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut rest = s;
    while !rest.is_empty() {
        // The longest run that needs no escape is copied in one piece.
        let plain = rest
            .iter()
            .position(|&b| !(0x20..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            .unwrap_or(rest.len());
        out.extend_from_slice(&rest[..plain]);
        let Some((&b, tail)) = rest[plain..].split_first() else {
            break;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b => escape_byte(out, b),
        }
        rest = tail;
    }
    out.push(b'"');
}

/// Bytes shown as a quoted, escaped string, as text lines show them.
pub struct Quoted<'a>(pub &'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(self.0.len() + 2);
        quoted(&mut out, self.0);
        f.write_str(&alloc::string::String::from_utf8_lossy(&out))
    }
}

fn value(out: &mut Vec<u8>, v: &Value<'_>) {
    match *v {
        Value::Unsigned(x) => decimal(out, x, 0, b' '),
        Value::Signed(x) => signed(out, x),
        Value::Ptr(x) => hex(out, x),
        Value::Chars(s) | Value::Str(s) => quoted(out, s),
        Value::Bytes(s) => hex_bytes(out, s),
    }
}

/// Appends an event's fields as `name=value` pairs; a payload that does
/// not fit its type, or a type the schema lacks, is shown as raw hex.
fn fields(out: &mut Vec<u8>, ty: Option<&EventType>, payload: &[u8], e: Endian) {
    let Some(t) = ty else {
        out.extend_from_slice(b"raw=");
        return hex_bytes(out, payload);
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
        out.extend_from_slice(b"<payload ends inside `");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"`> raw=");
        return hex_bytes(out, payload);
    }
    if t.fields.len() <= ON_STACK {
        labeled(out, t, stack[..n].iter().copied(), e);
    } else {
        labeled(out, t, t.values(payload, e).filter_map(Result::ok), e);
    }
}

/// Appends `name=value` pairs, space-separated.
fn labeled<'p>(
    out: &mut Vec<u8>,
    t: &EventType,
    values: impl Iterator<Item = Value<'p>>,
    e: Endian,
) {
    for (i, (f, v)) in t.fields.iter().zip(values).enumerate() {
        // The label's leading space separates fields; the first has none.
        let label = f.label.get(usize::from(i == 0)..).unwrap_or(&f.name);
        out.extend_from_slice(label.as_bytes());
        match v {
            Value::Bytes(args) if t.id == EVENT_DEBUG && f.name == "args" => {
                debug_args(out, args, e)
            }
            v => value(out, &v),
        }
    }
}

/// A `debug` event's arguments as a list (`[31, "1024x768", 0xffff...]`),
/// the same in either byte order; arguments that do not decode are shown
/// as far as they do, then the rest raw.
fn debug_args(out: &mut Vec<u8>, bytes: &[u8], e: Endian) {
    out.push(b'[');
    let mut walk = crate::debug_args::DebugArgs::new(bytes, e);
    let mut first = true;
    for arg in walk.by_ref() {
        if !first {
            out.extend_from_slice(b", ");
        }
        first = false;
        match arg {
            Ok(DebugArg::Int(x)) => decimal(out, x, 0, b' '),
            Ok(DebugArg::Addr(x)) => hex(out, x),
            Ok(DebugArg::Str(s) | DebugArg::Text(s)) => quoted(out, s),
            Err(err) => {
                out.extend_from_slice(b"<");
                out.extend_from_slice(alloc::format!("{err}").as_bytes());
                out.extend_from_slice(b"> raw=");
                hex_bytes(out, bytes);
            }
        }
    }
    out.push(b']');
}

pub fn loss_kind_name(kind: LossKind) -> &'static str {
    match kind {
        LossKind::Overwritten => "overwritten",
        LossKind::Unreadable => "unreadable pages",
        LossKind::Dropped => "dropped by the writer",
        LossKind::Torn => "torn",
        LossKind::End => "end of stream",
    }
}

/// Why an end loss's pages cannot be read, in words.
pub fn end_cause_name(cause: EndCause) -> &'static str {
    match cause {
        EndCause::Corrupt => "corrupt",
        EndCause::Absent => "not in the dump",
        EndCause::Cut => "cut off",
        EndCause::Replaced => "replaced before it was read",
    }
}

/// A loss's count and reason in words: `3 events lost (overwritten)`, or
/// for an end loss `465 events lost (end of stream: 2 pages corrupt)`, and
/// `at least 0 events lost (end of stream unknown: 1 page cut off)` when the
/// count is only a lower bound (`... unknown: replaced before it was
/// read` where a live reader lost a stream's end to its next holder).
pub struct LossLabel<'l>(pub &'l Loss);

impl fmt::Display for LossLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0;
        if !l.exact {
            f.write_str("at least ")?;
        }
        write!(f, "{} events lost (", l.events)?;
        LossReason(l).fmt(f)?;
        f.write_str(")")
    }
}

/// A loss's reason alone: its kind's name, and for an end loss how many
/// pages, why, and whether the stream's end is known.
pub struct LossReason<'l>(pub &'l Loss);

impl fmt::Display for LossReason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0;
        f.write_str(loss_kind_name(l.kind))?;
        if l.kind != LossKind::End {
            return Ok(());
        }
        if !l.exact {
            f.write_str(" unknown")?;
        }
        if let Some(c @ EndCause::Replaced) = l.cause {
            // A live reader never saw its pages: there are none to count.
            return write!(f, ": {}", end_cause_name(c));
        }
        let s = if l.pages == 1 { "" } else { "s" };
        write!(f, ": {} page{s}", l.pages)?;
        if let Some(c) = l.cause {
            write!(f, " {}", end_cause_name(c))?;
        }
        Ok(())
    }
}

/// Renders one merged item as one line (without the newline).
pub struct Line<'r, 'i, 't, 'a> {
    pub item: &'i Item<'t, 'a>,
    pub region: &'r Region<'r>,
    /// How a `debug` message shows kernel pointers.
    pub pointers: Pointers,
}

impl<'r, 'i, 't, 'a> Line<'r, 'i, 't, 'a> {
    /// The line for `item`, described by `region`'s schema and streams,
    /// kernel pointers in `debug` messages hidden ([`Pointers::Hidden`]).
    pub fn of(item: &'i Item<'t, 'a>, region: &'r Region<'r>) -> Self {
        Line {
            item,
            region,
            pointers: Pointers::Hidden,
        }
    }

    /// The same line, kernel pointers shown as `pointers` says.
    pub fn pointers(self, pointers: Pointers) -> Self {
        Line { pointers, ..self }
    }
}

impl Line<'_, '_, '_, '_> {
    /// Appends the line to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let info = |s: u16| self.region.streams.iter().find(|i| i.index == s);
        match self.item {
            Item::Event(ev) => event(out, ev, info(ev.stream), self.region, &self.pointers),
            Item::Loss(l) => loss(out, l, info(l.stream)),
        }
    }
}

impl fmt::Display for Line<'_, '_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::with_capacity(128);
        self.write_to(&mut out);
        f.write_str(&alloc::string::String::from_utf8_lossy(&out))
    }
}

fn event(
    out: &mut Vec<u8>,
    ev: &Event<'_>,
    info: Option<&StreamInfo>,
    region: &Region<'_>,
    pointers: &Pointers,
) {
    stream_and_time(out, info, ev.stream, ev.ts);
    let e = region.header.endian;
    let ty = region.schema.get(ev.type_id);
    match ty {
        Some(t) => out.extend_from_slice(t.heading.as_bytes()),
        None => {
            out.extend_from_slice(b": type");
            decimal(out, ev.type_id.into(), 0, b' ');
            out.extend_from_slice(b": ");
        }
    }
    let debug = ty.and_then(|t| DebugEvent::parse(t, ev.payload, e));
    match debug {
        Some(d) => debug_message(out, &d, ty, ev.payload, region, pointers),
        None => fields(out, ty, ev.payload, e),
    }
    // A hardware error in words after its fields: `<machine check, bank 4, ...>`.
    if let Some(words) = ty.and_then(|t| crate::ras::describe(t, ev.payload, e)) {
        out.extend_from_slice(b" <");
        push_escaped(out, words.as_bytes());
        out.push(b'>');
    }
}

/// A `debug` event as its tag and printk's text (`drm.KMS bochs-drm
/// 0000:00:02.0: [drm:...] ...`); one that cannot be formatted as its
/// fields, then why.
fn debug_message(
    out: &mut Vec<u8>,
    d: &DebugEvent<'_>,
    ty: Option<&EventType>,
    payload: &[u8],
    region: &Region<'_>,
    pointers: &Pointers,
) {
    let m = region.debug_message(d, pointers);
    match &m.text {
        Ok(text) => {
            out.extend_from_slice(&d.tag(m.callsite.as_ref()));
            if d.level != 7 {
                out.extend_from_slice(b" <");
                decimal(out, d.level.into(), 0, b' ');
                out.push(b'>');
            }
            out.push(b' ');
            // printk's text ends with its newline; a line may hold none.
            push_escaped(out, text.strip_suffix(b"\n").unwrap_or(text));
            if d.cut() {
                out.extend_from_slice(b" <cut by the writer>");
            }
        }
        Err(why) => {
            fields(out, ty, payload, region.header.endian);
            out.extend_from_slice(b" <");
            out.extend_from_slice(alloc::format!("{why}").as_bytes());
            out.push(b'>');
        }
    }
}

fn loss(out: &mut Vec<u8>, l: &Loss, info: Option<&StreamInfo>) {
    stream_and_time(out, info, l.stream, l.before_ts.or(l.after_ts).unwrap_or(0));
    out.extend_from_slice(b": ** ");
    out.extend_from_slice(alloc::format!("{}", LossLabel(l)).as_bytes());
    out.extend_from_slice(b" **");
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> alloc::string::String {
        let mut out = Vec::new();
        f(&mut out);
        alloc::string::String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_are_written_like_core_fmt_writes_them() {
        let cases = [0u64, 7, 10, 99, 100, 999, 1000, 1001, 123_456_789, u64::MAX];
        for x in cases {
            assert_eq!(text(|o| decimal(o, x, 0, b' ')), format!("{x}"));
            assert_eq!(text(|o| decimal(o, x, 9, b'0')), format!("{x:09}"));
            assert_eq!(text(|o| decimal(o, x, 8, b' ')), format!("{x:8}"));
            assert_eq!(text(|o| hex(o, x)), format!("{x:#x}"));
        }
        for x in cases {
            assert_eq!(decimal_str(x, &mut [0; 20]), format!("{x}"));
        }
        for x in [0i64, -1, -1000, i64::MIN, i64::MAX] {
            assert_eq!(text(|o| signed(o, x)), format!("{x}"));
        }
        assert_eq!(text(|o| hex_bytes(o, &[0, 0xab, 0x7f])), "0x00ab7f");
        assert_eq!(
            text(|o| stream_and_time(o, None, 7, 12_000_004_711)),
            "[s7]       12.000004711"
        );
    }

    #[test]
    fn escaped_text_within_a_size_is_cut_between_characters() {
        let within = |b: &[u8], max| text(|o| push_escaped_within(o, b, max));
        assert_eq!(within(b"ab\x01c", 16), "ab\\x01c");
        // Not inside the escape, nor inside a UTF-8 character.
        assert_eq!(within(b"ab\x01c", 5), "ab");
        assert_eq!(within(b"ab\x01c", 6), "ab\\x01");
        assert_eq!(within("a\u{e9}b".as_bytes(), 2), "a");
        assert_eq!(within("a\u{e9}b".as_bytes(), 3), "a\u{e9}");
        assert_eq!(within(b"\xffz", 3), "");
        assert_eq!(within(b"abc", 0), "");
    }

    #[test]
    fn escaped_text_holds_no_line_break_or_control() {
        let text = |b: &[u8]| text(|o| push_escaped(o, b));
        assert_eq!(text(b"plain \tt\xc3\xa9xt"), "plain \tt\u{e9}xt");
        assert_eq!(text(b"a\nb\rc"), r"a\x0ab\x0dc");
        assert_eq!(text(b"\x1b[2J\x07\x7f\x00"), r"\x1b[2J\x07\x7f\x00");
        // C1 as a code point and as a lone byte; a bidi override.
        assert_eq!(text(b"\xc2\x9b\x9b"), r"\xc2\x9b\x9b");
        assert_eq!(
            text("\u{202e}x\u{2028}".as_bytes()),
            r"\xe2\x80\xaex\xe2\x80\xa8"
        );
        assert_eq!(format!("{}", Escaped(b"a\nb")), r"a\x0ab");
    }

    #[test]
    fn user_labels_are_in_their_own_namespace_and_escaped() {
        use crate::layout::{STREAM_KERNEL_CPU, STREAM_USER};
        let info = |kind, name: &str| StreamInfo {
            index: 5,
            kind,
            cpu: if kind == STREAM_USER { u16::MAX } else { 0 },
            lane: 0,
            page_count: 1,
            pages_offset: 0,
            name: name.into(),
            pid: 1,
            uid: 1,
            keeps_tails: false,
        };
        let label = |name| info(STREAM_USER, name).label();
        assert_eq!(info(STREAM_KERNEL_CPU, "").label(), "cpu0");
        assert_eq!(label("cpu0"), "user:cpu0");
        assert_eq!(label("weston.1"), "user:weston.1");
        assert_eq!(label(""), "user:#5");
        assert_eq!(label("#5"), r"user:\x235");
        assert_eq!(
            label("a b]\n[000]\x1b"),
            r"user:a\x20b\x5d\x0a\x5b000\x5d\x1b"
        );
        assert_eq!(
            info(STREAM_USER, "my app.2").program_label(),
            r"user:my\x20app"
        );
        let line = text(|o| stream_and_time(o, Some(&info(STREAM_USER, "000")), 5, 1));
        assert_eq!(line, "[user:000]        0.000000001");
    }

    #[test]
    fn strings_are_quoted_on_one_line() {
        assert_eq!(
            text(|o| quoted(o, b"a \"b\" c\\d\n\t\x01\xff")),
            r#""a \"b\" c\\d\n\t\x01\xff""#
        );
        assert_eq!(format!("{}", Quoted(b"")), r#""""#);
    }
}
