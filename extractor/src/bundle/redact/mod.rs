//! Redaction for bug-report bundles: events a user does not want to share
//! are dropped or have fields replaced by keyed hashes, and kernel
//! addresses are hashed (as the kernel's own `%p` does) so a bundle does
//! not give away the crashed kernel's KASLR offset.
//!
//! Redaction rewrites the trace, not an output format: its [`Plan`] is an
//! [`Overlay`] that every file of a bundle is written through, so none
//! can leak what another hides. Added logs go through [`TextRedactor`], with the same
//! key and rules (see [`crate::bundle::logs::redact`]). Hashes are keyed by a
//! digest of the whole region, which a bundle does not contain: the same
//! value hashes the same way within a bundle (so a hashed pointer or
//! device name can still be followed from event to event, and from the
//! trace to a log), and the same input gives the same bytes, yet nobody
//! holding only the bundle can test guesses against a hash.
//!
//! What counts as a kernel address, and how it is found and hashed in
//! text and binary data: [`scrub`].

mod scrub;

use super::grant::Grant;
use crate::output::Overlay;
use crate::recover::RegionKey;
use pstore_ring::endian::Endian;
use pstore_ring::read::{
    drm_category_name, DebugEvent, EventType, PagedTrace, Region, StateInfo, StreamPages,
};
use pstore_ring::schema::{
    encode_payload, payload_len, EventDef, FieldDef, FieldKind, Value, EVENT_PRINTK,
};
use rayon::prelude::*;
use scrub::{mask_code, scrub_binary, scrub_pointers, Hasher, Word};
use std::fmt;

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

    /// Whether this class leaves out an event of its type whose text (its
    /// last text field) is `text`: a printk event, or a log's kernel
    /// message ([`TextRedactor::printk`]).
    fn drops(&self, text: Option<&[u8]>) -> bool {
        match self {
            Class::Drop { .. } => true,
            Class::DropPrefix { prefix, .. } => {
                text.is_some_and(|t| t.starts_with(prefix.as_bytes()))
            }
            Class::Hash { .. } => false,
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
    /// Keep the debug messages of input-layer callsites, which can carry
    /// what a person typed: only bundles root makes keep them.
    pub input_layer: bool,
    /// Leave out every event before this time on the region's clock
    /// (`--since`): a snapshot of the last moments, not of everything.
    pub since_ns: Option<u64>,
    /// Only what a report asked for without a crash may hold
    /// ([`super::grant`]).
    pub grant: Option<Grant>,
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
    /// Oops `Code:` lines whose bytes were masked.
    pub code_lines: u64,
    /// Debug messages of input-layer callsites left out.
    pub input_layer: u64,
    /// Events before [`Rules::since_ns`] left out.
    pub before_since: u64,
    /// Events outside [`Rules::grant`] left out.
    pub outside_grant: u64,
}

impl Counts {
    /// Addresses hashed and lines masked: grows when a scrub changed
    /// something.
    pub fn scrubbed(&self) -> u64 {
        self.pointers + self.code_lines
    }

    /// Adds what `other` counted, for the same rules.
    fn add(&mut self, other: &Counts) {
        for (c, o) in self.per_class.iter_mut().zip(&other.per_class) {
            *c += o;
        }
        self.pointers += other.pointers;
        self.code_lines += other.code_lines;
        self.input_layer += other.input_layer;
        self.before_since += other.before_since;
        self.outside_grant += other.outside_grant;
    }
}

/// A redacted trace's rewritten payloads and left-out events, to be laid
/// over the trace it was planned on (a [`crate::output::RegionView`]'s
/// overlay), and its redacted crash message ([`Plan::region`]).
pub struct Plan {
    /// Left-out events and rewritten payloads.
    pub overlay: Overlay,
    /// The crash message with its kernel addresses hashed.
    message: Option<String>,
    pub counts: Counts,
}

/// Whether the event is a debug message whose callsite is the input
/// layer's. With `unnamed_too` (a report for someone other than root),
/// also one whose callsite the region cannot name, unless it is one of
/// DRM's: the kernel records a message formatted, with no callsite, when
/// its callsite area is full or missing, and such a message may be the
/// input layer's (selected by root with `input`).
fn is_input_layer(region: &Region, t: &EventType, payload: &[u8], unnamed_too: bool) -> bool {
    let Some(d) = DebugEvent::parse(t, payload, region.header.endian) else {
        return false;
    };
    match region.callsite(d.callsite) {
        Ok(c) => c.is_input_layer(),
        Err(_) => unnamed_too && drm_category_name(d.category).is_none(),
    }
}

/// What redaction does to text outside a trace, the lines of an added
/// log: the same key, word size and rules as a region's trace, so that a
/// value hashes alike in both, and a kernel message in a log meets the
/// same `printk` classes as the trace's printk events.
pub struct TextRedactor<'r> {
    hasher: Hasher,
    word: Word,
    e: Endian,
    rules: &'r Rules,
    /// The printk type's name and the name of its text field, which a
    /// log's kernel message is.
    printk: Option<(String, Option<String>)>,
}

/// What the classes say of a kernel message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Left out, by this class (index in [`Rules::classes`]).
    Drop(usize),
    /// Its text replaced by its keyed hash, by this class.
    Hash(usize),
}

impl<'r> TextRedactor<'r> {
    /// Keyed by `key`, that of `region`, the one whose trace the text
    /// goes with.
    pub fn new(region: &Region, key: &RegionKey, rules: &'r Rules) -> TextRedactor<'r> {
        let printk = region.schema.get(EVENT_PRINTK);
        TextRedactor {
            hasher: Hasher::new(key),
            word: Word::of(region),
            e: region.header.endian,
            rules,
            printk: printk.map(|t| {
                let text = text_field(t).map(|i| t.fields[i].name.clone());
                (t.name.clone(), text)
            }),
        }
    }

    /// What the `printk` classes say of a kernel message `text`, in the
    /// order they were given, drops first: as [`plan`] decides for a
    /// printk event with that text.
    pub fn printk(&self, text: &[u8]) -> Verdict {
        let Some((name, text_name)) = &self.printk else {
            return Verdict::Keep;
        };
        let classes = || {
            let all = self.rules.classes.iter().enumerate();
            all.filter(|(_, c)| c.event() == name)
        };
        if let Some((i, _)) = classes().find(|(_, c)| c.drops(Some(text))) {
            return Verdict::Drop(i);
        }
        let hashes = |c: &Class| match c {
            Class::Hash { field, .. } => Some(field) == text_name.as_ref(),
            _ => false,
        };
        match classes().find(|(_, c)| hashes(c)) {
            Some((i, _)) => Verdict::Hash(i),
            None => Verdict::Keep,
        }
    }

    /// `text`'s keyed hash, as a hashed text field is written.
    pub fn hash_text(&self, text: &[u8]) -> Vec<u8> {
        self.hasher.text(text)
    }

    /// Masks `Code:` bytes and hashes kernel addresses in `text`, in
    /// place (its length stays), unless the rules keep raw pointers;
    /// counts what it did.
    pub fn scrub(&self, text: &mut [u8], counts: &mut Counts) {
        if self.rules.raw_pointers {
            return;
        }
        counts.code_lines += mask_code(text);
        counts.pointers += scrub_pointers(text, &self.hasher, self.word);
    }

    /// As [`TextRedactor::scrub`], for binary data: text in it, then
    /// words.
    fn scrub_bytes(&self, data: &mut [u8], counts: &mut Counts) {
        if self.rules.raw_pointers {
            return;
        }
        self.scrub(data, counts);
        counts.pointers += scrub_binary(data, self.e, self.word, &self.hasher);
    }

    /// Counts sized for the rules.
    pub fn counts(&self) -> Counts {
        Counts {
            per_class: vec![0; self.rules.classes.len()],
            ..Counts::default()
        }
    }
}

/// Plans the redaction of `trace` (decoded from `region`, whose key is
/// `key`) by `rules`, walking its events once, page by page; the
/// streams on every core.
pub fn plan(region: &Region, key: &RegionKey, trace: &PagedTrace, rules: &Rules) -> Plan {
    let r = TextRedactor::new(region, key, rules);
    // Per type id: the type's definition for re-encoding, and which
    // classes apply to it.
    let mut defs: Vec<Option<TypePlan>> = vec![None; 256];
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
    let streams: Vec<(Overlay, Counts)> = trace
        .streams
        .par_iter()
        .enumerate()
        .map(|(s, stream)| plan_stream(region, &r, &defs, s, stream))
        .collect();
    let mut overlay = Overlay::default();
    let mut counts = r.counts();
    for (o, c) in streams {
        overlay.append(o);
        counts.add(&c);
    }
    let message = region.state.as_ref().ok().map(|s: &StateInfo| {
        let mut text = s.message.clone().into_bytes();
        r.scrub(&mut text, &mut counts);
        String::from_utf8_lossy(&text).into_owned()
    });
    Plan {
        overlay,
        message,
        counts,
    }
}

/// A type's fields, for re-encoding, and the classes that apply to it.
type TypePlan<'s> = (Vec<FieldDef<'s>>, Vec<usize>);

/// [`plan`] for stream `s`: what it leaves out and rewrites, and counts.
fn plan_stream(
    region: &Region,
    r: &TextRedactor,
    defs: &[Option<TypePlan>],
    s: usize,
    stream: &StreamPages,
) -> (Overlay, Counts) {
    let rules = r.rules;
    let e = region.header.endian;
    let mut overlay = Overlay::default();
    let mut counts = r.counts();
    // Buffers every event reuses (most events change nothing; an
    // allocation each would cost more than the rest of the walk): a
    // rewritten payload before it goes into the overlay, the decoded
    // values, which of them change and their owned copies, a string
    // being scrubbed.
    let mut payload = Vec::new();
    let mut values_buf: Vec<Value> = Vec::new();
    let mut changed: Vec<Option<usize>> = Vec::new();
    let mut owned: Vec<Vec<u8>> = Vec::new();
    let mut scratch: Vec<u8> = Vec::new();
    let granted = rules.grant.as_ref().is_none_or(|g| g.stream(&stream.info));
    // Of a granted kernel stream, only the events the grant names.
    let judged = rules.grant.as_ref().filter(|_| stream.info.is_kernel());
    for (at, ev) in stream.events().enumerate() {
        if rules.since_ns.is_some_and(|t| ev.ts < t) {
            counts.before_since += 1;
            overlay.leave_out(s, at);
            continue;
        }
        let typed = region
            .schema
            .get(ev.type_id)
            .zip(defs[usize::from(ev.type_id)].as_ref());
        let decoded = match typed {
            Some((t, _)) if t.decode_into(ev.payload, e, &mut values_buf).is_ok() => {
                Some(values_buf.as_slice())
            }
            _ => None,
        };
        let outside = !granted
            || judged.is_some_and(|g| match (typed, &decoded) {
                (Some((t, _)), Some(values)) => !g.kernel_event(t, ev.payload, values, e),
                // What cannot be decoded cannot be judged.
                _ => true,
            });
        if outside {
            counts.outside_grant += 1;
            overlay.leave_out(s, at);
            continue;
        }
        let (Some((t, (fields, classes))), Some(decoded)) = (typed, decoded) else {
            // Shown raw: only what looks like an address, as text or
            // as a word, can be told apart.
            let mut raw = ev.payload.to_vec();
            let before = counts.scrubbed();
            r.scrub_bytes(&mut raw, &mut counts);
            if counts.scrubbed() != before {
                overlay.rewrite(s, at, &raw);
            }
            continue;
        };
        if !rules.input_layer && is_input_layer(region, t, ev.payload, rules.grant.is_some()) {
            counts.input_layer += 1;
            overlay.leave_out(s, at);
            continue;
        }
        let text = text_field(t).and_then(|i| match decoded[i] {
            Value::Str(s) | Value::Chars(s) => Some(s),
            _ => None,
        });
        if let Some(c) = classes
            .iter()
            .copied()
            .find(|&c| rules.classes[c].drops(text))
        {
            counts.per_class[c] += 1;
            overlay.leave_out(s, at);
            continue;
        }
        // Owned copies of every value this event changes.
        owned.clear();
        changed.clear();
        changed.resize(decoded.len(), None);
        for &c in classes {
            let Class::Hash { field, .. } = &rules.classes[c] else {
                continue;
            };
            let Some(i) = t.fields.iter().position(|f| &f.name == field) else {
                continue;
            };
            counts.per_class[c] += 1;
            owned.push(hash_value(&r.hasher, &decoded[i], t.fields[i].kind));
            changed[i] = Some(owned.len() - 1);
        }
        // Integers holding kernel addresses, by their hashes.
        let mut pointer_fields: Vec<(usize, Value)> = Vec::new();
        if !rules.raw_pointers {
            for (i, v) in decoded.iter().enumerate() {
                // A field hashed by a class holds no address any more.
                if changed[i].is_some() {
                    continue;
                }
                let kind = t.fields[i].kind;
                match *v {
                    Value::Ptr(a) if r.word.is_kernel(a) => {
                        pointer_fields.push((i, Value::Ptr(r.hasher.pointer(a, r.word))));
                        counts.pointers += 1;
                    }
                    Value::Unsigned(_) | Value::Signed(_) => {
                        let Some(a) = r.word.address_in(kind, v) else {
                            continue;
                        };
                        let h = r.hasher.pointer(a, r.word);
                        let hashed = match v {
                            Value::Signed(_) => Value::Signed(h as i64),
                            _ => Value::Unsigned(h),
                        };
                        pointer_fields.push((i, hashed));
                        counts.pointers += 1;
                    }
                    Value::Str(s) | Value::Chars(s) | Value::Bytes(s) => {
                        scratch.clear();
                        scratch.extend_from_slice(s);
                        let before = counts.scrubbed();
                        if matches!(v, Value::Bytes(_)) {
                            r.scrub_bytes(&mut scratch, &mut counts);
                        } else {
                            r.scrub(&mut scratch, &mut counts);
                        }
                        if counts.scrubbed() != before {
                            owned.push(std::mem::take(&mut scratch));
                            changed[i] = Some(owned.len() - 1);
                        }
                    }
                    Value::Ptr(_) => {}
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
                    Some(&(_, hashed)) => hashed,
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
        payload.clear();
        payload.resize(len, 0);
        if encode_payload(&def, &values, e, &mut payload).is_err() {
            // Cannot happen (the length came from the same values);
            // leaving the event out is the safe side.
            overlay.leave_out(s, at);
            continue;
        }
        overlay.rewrite(s, at, &payload);
    }
    (overlay, counts)
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

    /// `addr` in all three.
    fn region_with_addresses(word_size: u8, addr: u64) -> Vec<u8> {
        use pstore_ring::write::{self, RegionConfig, StreamSpec};
        let f = |name, kind| FieldDef { name, kind };
        let fields = [
            f("ip", FieldKind::U64),
            f("raw", FieldKind::Bytes),
            f("msg", FieldKind::Str),
        ];
        let custom = [EventDef {
            id: 40,
            name: "probe",
            fields: &fields,
        }];
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            word_size,
            endian: Endian::Little,
            page_size: 512,
            pages_per_stream: Some(2),
            streams: &specs,
            custom_events: &custom,
            ..Default::default()
        };
        let mut mem = vec![0u8; 8192];
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let mut ws: Vec<_> = region.streams.by_ref().collect();
        let digits = usize::from(word_size) * 2;
        let text = format!("fault at {addr:0digits$x}");
        let mut raw = vec![0xaa];
        raw.extend_from_slice(&addr.to_le_bytes()[..usize::from(word_size)]);
        let v = [
            Value::Unsigned(addr),
            Value::Bytes(&raw),
            Value::Str(text.as_bytes()),
        ];
        ws[0].write_event(1_000, &custom[0], &v).unwrap();
        ws.iter_mut().for_each(|w| w.close());
        drop(ws);
        mem
    }

    /// A debug message about a DRM device and one of the input layer's,
    /// with a kernel address among its arguments.
    fn region_with_debug_messages() -> Vec<u8> {
        region_with_debug_messages_and(&[])
    }

    /// [`region_with_debug_messages`], then messages recorded formatted,
    /// with no callsite, each of a DRM category (or none) and its text.
    fn region_with_debug_messages_and(formatted: &[(u16, &[u8])]) -> Vec<u8> {
        use pstore_ring::debug_args::{encode, encoded_len, Callsite, DebugArg};
        use pstore_ring::layout::{CALLSITE_DRM, CALLSITE_DYNDBG};
        use pstore_ring::schema::{builtin, EVENT_DEBUG};
        use pstore_ring::write::{self, RegionConfig, StreamSpec};
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 1024,
            streams: &specs,
            callsite_pages: 1,
            ..Default::default()
        };
        let mut mem = vec![0u8; 16 * 1024];
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let mut area = region.callsites.take().unwrap();
        let drm = area
            .add(&Callsite {
                source: CALLSITE_DRM,
                level: 7,
                category: 4,
                line: 0,
                module: b"drm",
                function: b"drm_atomic_state_init [drm]",
                file: b"",
                format: b"Allocated atomic state %p\n",
            })
            .unwrap();
        let keys = area
            .add(&Callsite {
                source: CALLSITE_DYNDBG,
                level: 7,
                category: 0xffff,
                line: 700,
                module: b"hid",
                function: b"hidinput_hid_event",
                file: b"drivers/hid/hid-input.c",
                format: b"key %d\n",
            })
            .unwrap();
        let def = builtin(EVENT_DEBUG).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        for (ts, id, arg) in [
            (1, drm, DebugArg::Addr(0xffff_8880_0123_4567)),
            (2, keys, DebugArg::Int(30)),
        ] {
            let mut bytes = vec![0u8; encoded_len(&[arg])];
            encode(&mut bytes, &[arg], Endian::Little).unwrap();
            let values = [
                Value::Unsigned(id.into()),
                Value::Unsigned(7),
                Value::Unsigned(0),
                Value::Unsigned(4),
                Value::Str(b""),
                Value::Bytes(&bytes),
            ];
            cpu0.write_event(ts, def, &values).unwrap();
        }
        for (ts, &(category, text)) in (3..).zip(formatted) {
            let values = [
                Value::Unsigned(0),
                Value::Unsigned(7),
                Value::Unsigned(pstore_ring::schema::DEBUG_FORMATTED.into()),
                Value::Unsigned(category.into()),
                Value::Str(b""),
                Value::Bytes(text),
            ];
            cpu0.write_event(ts, def, &values).unwrap();
        }
        mem
    }

    #[test]
    fn a_grant_leaves_out_a_message_it_cannot_tell_from_the_input_layers() {
        use pstore_ring::layout::CATEGORY_NONE;
        use pstore_ring::read::HeaderTrust;
        let mem = region_with_debug_messages_and(&[
            (CATEGORY_NONE, b"hid-generic: key 31\n"),
            (2, b"[drm] a KMS line\n"),
        ]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let counts = |grant: Option<Grant>| {
            let rules = Rules {
                grant,
                ..Rules::default()
            };
            plan(&region, &RegionKey::of(&region), &trace, &rules).counts
        };
        // Every debug message granted: the named input-layer callsite and
        // the unnamed message of no DRM category are left out; the DRM
        // ones, named or not, stay.
        let all = counts(Some(Grant {
            uid: 1000,
            kernel_events: vec!["debug".into()],
            ..Grant::default()
        }));
        assert_eq!((all.outside_grant, all.input_layer), (0, 2));
        // Root's bundle leaves out only what it knows is the input
        // layer's.
        assert_eq!(counts(None).input_layer, 1);
    }

    #[test]
    fn a_grant_keeps_only_what_it_names_and_never_the_input_layer() {
        use pstore_ring::read::HeaderTrust;
        let mem = region_with_debug_messages();
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let granted = |kernel_events: &[&str]| {
            let rules = Rules {
                grant: Some(Grant {
                    uid: 1000,
                    kernel_events: kernel_events.iter().map(|e| e.to_string()).collect(),
                    ..Grant::default()
                }),
                ..Rules::default()
            };
            plan(&region, &RegionKey::of(&region), &trace, &rules).counts
        };
        // Every debug message granted: the input layer's is left out all
        // the same.
        let all = granted(&["debug"]);
        assert_eq!((all.outside_grant, all.input_layer), (0, 1));
        // None granted: both are outside the grant.
        let none = granted(&[]);
        assert_eq!((none.outside_grant, none.input_layer), (2, 0));
    }

    #[test]
    fn input_layer_messages_stay_only_in_roots_bundles_and_addresses_are_hashed() {
        use pstore_ring::read::{DebugEvent, HeaderTrust};
        let mem = region_with_debug_messages();
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let messages = |rules: &Rules| {
            let plan = plan(&region, &RegionKey::of(&region), &trace, rules);
            let view = crate::output::RegionView {
                index: 0,
                addr: 0,
                region: &region,
                trace: &trace,
                overlay: Some(&plan.overlay),
                pointers: pstore_ring::kprintf::Pointers::Raw,
            };
            let t = region.schema.get(pstore_ring::schema::EVENT_DEBUG).unwrap();
            let texts: Vec<String> = view
                .stream(0)
                .unwrap()
                .events()
                .map(|ev| {
                    let d = DebugEvent::parse(t, ev.payload, Endian::Little).unwrap();
                    let m = region.debug_message(&d, &view.pointers);
                    String::from_utf8(m.text.unwrap()).unwrap()
                })
                .collect();
            (texts, plan.counts)
        };
        let (texts, counts) = messages(&Rules::default());
        assert_eq!(counts.input_layer, 1);
        assert_eq!(texts.len(), 1, "{texts:?}");
        // The address became a hash of %p's shape: 8 zeros, 8 digits.
        let id = texts[0]
            .strip_prefix("[drm:drm_atomic_state_init [drm]] Allocated atomic state 00000000")
            .unwrap_or_else(|| panic!("{texts:?}"));
        assert_eq!(id.trim_end().len(), 8, "{texts:?}");
        let (texts, counts) = messages(&Rules {
            input_layer: true,
            raw_pointers: true,
            ..Rules::default()
        });
        assert_eq!(counts.input_layer, 0);
        assert_eq!(
            texts,
            [
                "[drm:drm_atomic_state_init [drm]] Allocated atomic state ffff888001234567\n",
                "key 30\n"
            ]
        );
    }

    #[test]
    fn u64_binary_and_text_fields_are_hashed_alike_in_both_word_sizes() {
        use pstore_ring::read::HeaderTrust;
        for (word_size, addr) in [(8u8, 0xffff_ffff_8123_4567u64), (4, 0xc123_4567)] {
            let mem = region_with_addresses(word_size, addr);
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            let trace = region.decode_paged();
            let plan = plan(&region, &RegionKey::of(&region), &trace, &Rules::default());
            assert_eq!(plan.counts.pointers, 3, "word size {word_size}");
            let view = crate::output::RegionView {
                index: 0,
                addr: 0,
                region: &region,
                trace: &trace,
                overlay: Some(&plan.overlay),
                pointers: pstore_ring::kprintf::Pointers::Raw,
            };
            let ev = view.stream(0).unwrap().events().next().unwrap();
            let t = region.schema.get(40).unwrap();
            let values = t.decode(ev.payload, region.header.endian).unwrap();
            let word = Word::of(&region);
            let h = Hasher::new(&RegionKey::of(&region)).pointer(addr, word);
            let digits = usize::from(word_size) * 2;
            let n = usize::from(word_size);
            assert_eq!(values[0], Value::Unsigned(h));
            let Value::Bytes(raw) = values[1] else {
                panic!("{values:?}")
            };
            assert_eq!(raw[1..], h.to_le_bytes()[..n]);
            assert_eq!(
                values[2],
                Value::Str(format!("fault at {h:0digits$x}").as_bytes())
            );
            // Kept with --raw-pointers.
            let raw_rules = Rules {
                raw_pointers: true,
                ..Rules::default()
            };
            assert_eq!(
                super::plan(&region, &RegionKey::of(&region), &trace, &raw_rules)
                    .counts
                    .pointers,
                0
            );
        }
    }
}
