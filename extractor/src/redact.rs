//! Redaction for bug-report bundles: events a user does not want to share
//! are dropped or have fields replaced by keyed hashes, and kernel
//! addresses are hashed (as the kernel's own `%p` does) so a bundle does
//! not give away the crashed kernel's KASLR offset.
//!
//! Redaction rewrites the trace, not an output format: every file of a
//! bundle is written from the redacted trace, so none can leak what
//! another hides. Hashes are keyed by a digest of the whole region, which
//! a bundle does not contain: the same value hashes the same way within a
//! bundle (so a hashed pointer or device name can still be followed from
//! event to event), and the same input gives the same bytes, yet nobody
//! holding only the bundle can test guesses against a hash.

use pstore_ring::endian::Endian;
use pstore_ring::read::{Event, EventType, Region, StateInfo, StreamTrace, Trace};
use pstore_ring::schema::{encode_payload, payload_len, EventDef, FieldDef, FieldKind, Value};
use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::Range;

/// One `--redact` class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    /// `TYPE`: every event of the type is left out.
    Drop { event: String },
    /// `TYPE=PREFIX`: events of the type whose text (their last text
    /// field) starts with `PREFIX` are left out, e.g. `printk=input:`.
    DropPrefix { event: String, prefix: String },
    /// `TYPE.FIELD`: the field's value is replaced by a keyed hash.
    Hash { event: String, field: String },
}

impl Class {
    /// Parses `TYPE`, `TYPE.FIELD` or `TYPE=PREFIX`.
    pub fn parse(text: &str) -> Result<Class, String> {
        let ident =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let bad = || {
            format!(
                "`{text}` is not a redaction class: give TYPE (drop its events), TYPE.FIELD (hash that field) or TYPE=PREFIX (drop events whose text starts with PREFIX)"
            )
        };
        if let Some((event, prefix)) = text.split_once('=') {
            if !ident(event) || prefix.is_empty() {
                return Err(bad());
            }
            return Ok(Class::DropPrefix {
                event: event.into(),
                prefix: prefix.into(),
            });
        }
        match text.split_once('.') {
            Some((event, field)) if ident(event) && ident(field) => Ok(Class::Hash {
                event: event.into(),
                field: field.into(),
            }),
            None if ident(text) => Ok(Class::Drop { event: text.into() }),
            _ => Err(bad()),
        }
    }

    fn event(&self) -> &str {
        match self {
            Class::Drop { event } | Class::DropPrefix { event, .. } | Class::Hash { event, .. } => {
                event
            }
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Class::Drop { event } => write!(f, "{event}"),
            Class::DropPrefix { event, prefix } => write!(f, "{event}={prefix}"),
            Class::Hash { event, field } => write!(f, "{event}.{field}"),
        }
    }
}

/// What to redact.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub classes: Vec<Class>,
    /// Keep kernel addresses as they are.
    pub raw_pointers: bool,
}

/// A class that names nothing in any region: refused rather than
/// ignored, because a misspelt class would otherwise share what the user
/// meant to hide.
#[derive(Debug, thiserror::Error)]
#[error("--redact {class}: {why}")]
pub struct UnknownClass {
    pub class: String,
    pub why: String,
}

impl Rules {
    /// Checks that every class names an event type, and a field of it,
    /// in at least one of `regions`.
    pub fn check(&self, regions: &[&Region]) -> Result<(), UnknownClass> {
        for class in &self.classes {
            let types: Vec<&EventType> = regions
                .iter()
                .flat_map(|r| r.schema.types())
                .filter(|t| t.name == class.event())
                .collect();
            let unknown = |why: String| UnknownClass {
                class: class.to_string(),
                why,
            };
            if types.is_empty() {
                let mut names: Vec<&str> = regions
                    .iter()
                    .flat_map(|r| r.schema.types())
                    .map(|t| t.name.as_str())
                    .collect();
                names.sort_unstable();
                names.dedup();
                return Err(unknown(format!(
                    "no event type `{}`; the types are: {}",
                    class.event(),
                    names.join(", ")
                )));
            }
            match class {
                Class::Hash { field, .. } => {
                    if !types
                        .iter()
                        .any(|t| t.fields.iter().any(|f| &f.name == field))
                    {
                        let fields: Vec<&str> =
                            types[0].fields.iter().map(|f| f.name.as_str()).collect();
                        return Err(unknown(format!(
                            "`{}` has no field `{field}`; its fields are: {}",
                            class.event(),
                            fields.join(", ")
                        )));
                    }
                }
                Class::DropPrefix { .. } => {
                    if !types.iter().any(|t| text_field(t).is_some()) {
                        return Err(unknown(format!("`{}` has no text field", class.event())));
                    }
                }
                Class::Drop { .. } => {}
            }
        }
        Ok(())
    }
}

/// The index of a type's last text field: what a printk line, marker or
/// crash says.
fn text_field(t: &EventType) -> Option<usize> {
    t.fields
        .iter()
        .rposition(|f| matches!(f.kind, FieldKind::Str | FieldKind::Chars(_)))
}

/// What redaction did, for the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Per class (in [`Rules::classes`] order): events dropped or fields
    /// hashed.
    pub per_class: Vec<u64>,
    /// Kernel addresses replaced by hashes.
    pub pointers: u64,
}

/// A redacted trace's rewritten payloads and left-out events, to be laid
/// over the trace it was planned on with [`Plan::apply`].
pub struct Plan {
    /// Rewritten payloads, back to back.
    arena: Vec<u8>,
    /// Per stream, sorted by event position: the event's new payload in
    /// `arena`, or `None` to leave it out.
    changes: Vec<Vec<(usize, Option<Range<usize>>)>>,
    /// The crash message with its kernel addresses hashed.
    message: Option<String>,
    pub counts: Counts,
}

/// The keyed hasher: SHA-256 over a key derived from the region's bytes.
struct Hasher {
    key: [u8; 32],
}

impl Hasher {
    fn new(region: &Region) -> Hasher {
        let mut h = Sha256::new();
        h.update(b"crashring redaction key v1\0");
        h.update(region.bytes());
        Hasher {
            key: h.finalize().into(),
        }
    }

    fn digest(&self, what: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(what);
        h.finalize().into()
    }

    fn u64(&self, what: &[u8]) -> u64 {
        let d = self.digest(what);
        u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    }

    /// A kernel address becomes 32 bits of hash, zero-extended: the shape
    /// of the kernel's own hashed `%p`, which kernel developers know.
    fn pointer(&self, addr: u64) -> u64 {
        self.u64(&addr.to_be_bytes()) >> 32
    }

    /// A hashed field value, as text: `h:` and 16 hex digits.
    fn text(&self, value: &[u8]) -> Vec<u8> {
        format!("h:{:016x}", self.u64(value)).into_bytes()
    }
}

/// Whether `addr` is a kernel address worth hiding: in the upper half, and
/// not an error pointer (the last 4095 values), which says only which
/// error occurred. NULL and small numbers are no secret either.
fn is_kernel_pointer(addr: u64) -> bool {
    addr >= 0xffff_0000_0000_0000 && addr < 0u64.wrapping_sub(4095)
}

/// Replaces every kernel address written as 16 hex digits (with or
/// without `0x`) in `text` by its hash, keeping the text's length so a
/// fixed-size field still fits; returns how many were replaced.
fn scrub_pointers(text: &mut [u8], hasher: &Hasher) -> u64 {
    let mut replaced = 0;
    let mut at = 0;
    while at + 16 <= text.len() {
        let starts_token = token_starts(text, at);
        let ends_token = text.get(at + 16).is_none_or(|b| !b.is_ascii_alphanumeric());
        let digits = &text[at..at + 16];
        if starts_token && ends_token && digits.iter().all(u8::is_ascii_hexdigit) {
            let addr = std::str::from_utf8(digits)
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok());
            if let Some(addr) = addr.filter(|&a| is_kernel_pointer(a)) {
                let hashed = format!("{:016x}", hasher.pointer(addr));
                text[at..at + 16].copy_from_slice(hashed.as_bytes());
                replaced += 1;
            }
            at += 16;
        } else {
            at += 1;
        }
    }
    replaced
}

/// Whether a token can start at `at`: nothing alphanumeric just before
/// it, or a `0x` that nothing alphanumeric precedes.
fn token_starts(text: &[u8], at: usize) -> bool {
    let before = |n: usize| at.checked_sub(n).map(|i| text[i]);
    let free = |b: Option<u8>| b.is_none_or(|b| !b.is_ascii_alphanumeric());
    free(before(1))
        || (matches!(before(1), Some(b'x' | b'X')) && before(2) == Some(b'0') && free(before(3)))
}

/// Replaces every aligned 8-byte word of an undecodable payload that
/// holds a kernel address by its hash; returns how many were replaced.
fn scrub_raw_pointers(payload: &mut [u8], e: Endian, hasher: &Hasher) -> u64 {
    let mut replaced = 0;
    for word in payload.chunks_exact_mut(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(word);
        let addr = match e {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        };
        if is_kernel_pointer(addr) {
            let h = hasher.pointer(addr);
            word.copy_from_slice(&match e {
                Endian::Little => h.to_le_bytes(),
                Endian::Big => h.to_be_bytes(),
            });
            replaced += 1;
        }
    }
    replaced
}

/// Plans the redaction of `trace` (decoded from `region`) by `rules`.
pub fn plan(region: &Region, trace: &Trace, rules: &Rules) -> Plan {
    let hasher = Hasher::new(region);
    let e = region.header.endian;
    let mut arena = Vec::new();
    let mut counts = Counts {
        per_class: vec![0; rules.classes.len()],
        pointers: 0,
    };
    // Per type id: the type's definition for re-encoding, and which
    // classes apply to it.
    let mut defs: Vec<Option<(Vec<FieldDef>, Vec<usize>)>> = vec![None; 256];
    for t in region.schema.types() {
        let fields = t
            .fields
            .iter()
            .map(|f| FieldDef {
                name: &f.name,
                kind: f.kind,
            })
            .collect();
        let classes = (0..rules.classes.len())
            .filter(|&c| rules.classes[c].event() == t.name)
            .collect();
        defs[usize::from(t.id)] = Some((fields, classes));
    }
    let mut changes = Vec::with_capacity(trace.streams.len());
    let mut owned: Vec<Vec<u8>> = Vec::new();
    for stream in &trace.streams {
        let mut stream_changes = Vec::new();
        for (at, ev) in stream.events.iter().enumerate() {
            let typed = region
                .schema
                .get(ev.type_id)
                .zip(defs[usize::from(ev.type_id)].as_ref());
            let decoded = typed.and_then(|(t, _)| t.decode(ev.payload, e).ok());
            let (Some((t, (fields, classes))), Some(decoded)) = (typed, decoded) else {
                // Shown raw: only the words that look like addresses can
                // be told apart.
                if !rules.raw_pointers {
                    let mut raw = ev.payload.to_vec();
                    let n = scrub_raw_pointers(&mut raw, e, &hasher);
                    if n > 0 {
                        counts.pointers += n;
                        let start = arena.len();
                        arena.extend_from_slice(&raw);
                        stream_changes.push((at, Some(start..arena.len())));
                    }
                }
                continue;
            };
            if let Some(c) = classes
                .iter()
                .copied()
                .find(|&c| drops(&rules.classes[c], t, &decoded))
            {
                counts.per_class[c] += 1;
                stream_changes.push((at, None));
                continue;
            }
            // Owned copies of every value this event changes.
            owned.clear();
            let mut changed: Vec<Option<usize>> = vec![None; decoded.len()];
            for &c in classes {
                let Class::Hash { field, .. } = &rules.classes[c] else {
                    continue;
                };
                let Some(i) = t.fields.iter().position(|f| &f.name == field) else {
                    continue;
                };
                counts.per_class[c] += 1;
                owned.push(hash_value(&hasher, &decoded[i], t.fields[i].kind));
                changed[i] = Some(owned.len() - 1);
            }
            let mut pointer_fields = Vec::new();
            if !rules.raw_pointers {
                for (i, v) in decoded.iter().enumerate() {
                    match *v {
                        Value::Ptr(a) if changed[i].is_none() && is_kernel_pointer(a) => {
                            pointer_fields.push((i, hasher.pointer(a)));
                            counts.pointers += 1;
                        }
                        Value::Str(s) | Value::Chars(s) => {
                            let mut text = match changed[i] {
                                Some(o) => owned[o].clone(),
                                None => s.to_vec(),
                            };
                            let n = scrub_pointers(&mut text, &hasher);
                            if n > 0 {
                                counts.pointers += n;
                                owned.push(text);
                                changed[i] = Some(owned.len() - 1);
                            }
                        }
                        _ => {}
                    }
                }
            }
            if changed.iter().all(Option::is_none) && pointer_fields.is_empty() {
                continue;
            }
            let mut values = Vec::with_capacity(decoded.len());
            for (i, v) in decoded.iter().enumerate() {
                values.push(match changed[i] {
                    Some(o) => retyped(*v, &owned[o]),
                    None => match pointer_fields.iter().find(|p| p.0 == i) {
                        Some(&(_, h)) => Value::Ptr(h),
                        None => *v,
                    },
                });
            }
            let def = EventDef {
                id: t.id,
                name: &t.name,
                fields,
            };
            let Ok(len) = payload_len(&def, &values) else {
                continue;
            };
            let start = arena.len();
            arena.resize(start + len, 0);
            if encode_payload(&def, &values, e, &mut arena[start..]).is_err() {
                // Cannot happen (the length came from the same values);
                // leaving the event out is the safe side.
                arena.truncate(start);
                stream_changes.push((at, None));
                continue;
            }
            stream_changes.push((at, Some(start..start + len)));
        }
        changes.push(stream_changes);
    }
    let message = region.state.as_ref().ok().map(|s: &StateInfo| {
        let mut text = s.message.clone().into_bytes();
        if !rules.raw_pointers {
            counts.pointers += scrub_pointers(&mut text, &hasher);
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    Plan {
        arena,
        changes,
        message,
        counts,
    }
}

/// Whether a drop class leaves this event out.
fn drops(class: &Class, t: &EventType, values: &[Value]) -> bool {
    match class {
        Class::Drop { .. } => true,
        Class::DropPrefix { prefix, .. } => text_field(t).is_some_and(|i| match values[i] {
            Value::Str(s) | Value::Chars(s) => s.starts_with(prefix.as_bytes()),
            _ => false,
        }),
        Class::Hash { .. } => false,
    }
}

/// A field's value hashed, as the bytes of its new value: integers as
/// 8 bytes (the encoder keeps the field's width), text as `h:` and hex
/// digits (cut to a character array's size), binary as 8 bytes.
fn hash_value(hasher: &Hasher, v: &Value, kind: FieldKind) -> Vec<u8> {
    match *v {
        Value::Unsigned(x) | Value::Ptr(x) => hasher.u64(&x.to_be_bytes()).to_be_bytes().to_vec(),
        Value::Signed(x) => hasher.u64(&x.to_be_bytes()).to_be_bytes().to_vec(),
        Value::Str(s) | Value::Chars(s) => {
            let mut text = hasher.text(s);
            if let FieldKind::Chars(n) = kind {
                text.truncate(usize::from(n));
            }
            text
        }
        Value::Bytes(b) => hasher.u64(b).to_be_bytes().to_vec(),
    }
}

/// `original`'s kind with the new bytes `new` (integers as 8 big-endian
/// bytes).
fn retyped<'v>(original: Value, new: &'v [u8]) -> Value<'v> {
    let int = || {
        let mut b = [0u8; 8];
        b.copy_from_slice(&new[..8.min(new.len())]);
        u64::from_be_bytes(b)
    };
    match original {
        Value::Unsigned(_) => Value::Unsigned(int()),
        Value::Signed(_) => Value::Signed(int() as i64),
        Value::Ptr(_) => Value::Ptr(int()),
        Value::Chars(_) => Value::Chars(new),
        Value::Str(_) => Value::Str(new),
        Value::Bytes(_) => Value::Bytes(new),
    }
}

impl Plan {
    /// The trace with the plan's changes laid over it: left-out events are
    /// gone (their pages' event ranges shrink to match), rewritten ones
    /// carry their new payloads. Losses are untouched: redaction is not
    /// loss.
    pub fn apply<'b>(&'b self, trace: &Trace<'b>) -> Trace<'b> {
        let mut out = trace.clone();
        for (stream, changes) in out.streams.iter_mut().zip(&self.changes) {
            if !changes.is_empty() {
                self.apply_stream(stream, changes);
            }
        }
        out
    }

    fn apply_stream<'b>(
        &'b self,
        stream: &mut StreamTrace<'b>,
        changes: &[(usize, Option<Range<usize>>)],
    ) {
        let old: Vec<Event<'b>> = std::mem::take(&mut stream.events);
        // kept_before[i]: events kept among the first i.
        let mut kept_before = Vec::with_capacity(old.len() + 1);
        let mut changes = changes.iter().peekable();
        let mut kept = 0usize;
        for (i, mut ev) in old.into_iter().enumerate() {
            kept_before.push(kept);
            match changes.next_if(|c| c.0 == i) {
                Some((_, None)) => continue,
                Some((_, Some(range))) => ev.payload = &self.arena[range.clone()],
                None => {}
            }
            stream.events.push(ev);
            kept += 1;
        }
        kept_before.push(kept);
        let at = |i: usize| kept_before[i.min(kept_before.len() - 1)];
        for page in &mut stream.pages {
            let first = at(page.first_event);
            let end = at(page.first_event.saturating_add(page.records as usize));
            page.first_event = first;
            page.records = (end - first) as u32;
        }
    }

    /// The region with its crash message redacted.
    pub fn region<'r>(&self, region: &Region<'r>) -> Region<'r> {
        let mut out = region.clone();
        if let (Ok(state), Some(message)) = (&mut out.state, &self.message) {
            state.message.clone_from(message);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_parse_and_print_back() {
        for text in ["printk", "drm_flip.connector", "printk=input:"] {
            assert_eq!(Class::parse(text).unwrap().to_string(), text);
        }
        for bad in ["", "a.b.c", "printk=", "=x", "bad name", ".field"] {
            assert!(Class::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kernel_addresses_in_text_are_hashed_in_place() {
        let hasher = Hasher { key: [7; 32] };
        let mut text = b"RIP: 0010:foo+0x1/0x2 at ffffffff81234567, 0xffff888012345678 err fffffffffffffff4 user 00007ffd12345678 xffffffff81234567".to_vec();
        let before = text.clone();
        assert_eq!(scrub_pointers(&mut text, &hasher), 2);
        assert_eq!(text.len(), before.len());
        let s = String::from_utf8(text).unwrap();
        assert!(!s.contains("ffffffff81234567,"), "{s}");
        assert!(!s.contains("ffff888012345678"), "{s}");
        assert!(s.contains(&format!(
            "at {:016x},",
            hasher.pointer(0xffff_ffff_8123_4567)
        )));
        // Error pointers, user addresses and hex inside a longer word stay.
        assert!(s.contains("fffffffffffffff4"));
        assert!(s.contains("00007ffd12345678"));
        assert!(s.contains("xffffffff81234567"));
    }

    #[test]
    fn the_same_pointer_hashes_the_same_way_and_keys_differ() {
        let a = Hasher { key: [1; 32] };
        let b = Hasher { key: [2; 32] };
        let p = 0xffff_ffff_8100_0000;
        assert_eq!(a.pointer(p), a.pointer(p));
        assert_ne!(a.pointer(p), b.pointer(p));
        assert!(a.pointer(p) <= u64::from(u32::MAX));
    }
}
