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
    encode_payload, payload_len, EventDef, FieldDef, FieldKind, Value, EVENT_AER, EVENT_CRASH,
    EVENT_DEBUG, EVENT_HW_ERROR, EVENT_MCE, EVENT_MEMORY_FAILURE, EVENT_PRINTK,
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
    /// The crash message with its kernel addresses hashed, or as the
    /// crash classes redact the crash event's text.
    message: Option<String>,
    /// Whether the rules leave out or change events that the crash's
    /// summaries (its signature's basis, its hardware error) are read
    /// from, which the manifest then withholds: the summaries are made
    /// from the whole trace, so that a crash's signature is the same
    /// in a redacted bundle and an unredacted one.
    pub summaries_withheld: bool,
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
    printk: Option<TextType>,
    /// The crash type's, whose text the state block's crash message is.
    crash: Option<TextType>,
}

/// A type's name and the name of its text field, if it has one.
type TextType = (String, Option<String>);

/// The types whose events a crash's summaries in the manifest are read
/// from: its signature's basis (the crash's message, the crashing CPU's
/// printk lines and debug callsites, the fatal hardware error) and its
/// hardware error.
const SUMMARY_TYPES: [u8; 7] = [
    EVENT_CRASH,
    EVENT_PRINTK,
    EVENT_DEBUG,
    EVENT_MCE,
    EVENT_MEMORY_FAILURE,
    EVENT_AER,
    EVENT_HW_ERROR,
];

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
        let text_type = |id| {
            region.schema.get(id).map(|t: &EventType| {
                let text = text_field(t).map(|i| t.fields[i].name.clone());
                (t.name.clone(), text)
            })
        };
        TextRedactor {
            hasher: Hasher::new(key),
            word: Word::of(region),
            e: region.header.endian,
            rules,
            printk: text_type(EVENT_PRINTK),
            crash: text_type(EVENT_CRASH),
        }
    }

    /// What the `printk` classes say of a kernel message `text`, in the
    /// order they were given, drops first: as [`plan`] decides for a
    /// printk event with that text.
    pub fn printk(&self, text: &[u8]) -> Verdict {
        self.verdict(self.printk.as_ref(), text)
    }

    /// What the classes of type `of` (its name and text field's) say of
    /// an event of it whose text is `text`.
    fn verdict(&self, of: Option<&TextType>, text: &[u8]) -> Verdict {
        let Some((name, text_name)) = of else {
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

    /// The state block's crash message as a bundle shows it: the crash
    /// event's text cut short, so the crash classes apply to it as to
    /// the event, and else it is scrubbed.
    pub fn crash_message(&self, message: &str, counts: &mut Counts) -> String {
        let mut text = message.as_bytes().to_vec();
        match self.verdict(self.crash.as_ref(), &text) {
            Verdict::Drop(_) => text.clear(),
            Verdict::Hash(_) => text = self.hash_text(&text),
            Verdict::Keep => self.scrub(&mut text, counts),
        }
        String::from_utf8_lossy(&text).into_owned()
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
    let message = region
        .state
        .as_ref()
        .ok()
        .map(|s: &StateInfo| r.crash_message(&s.message, &mut counts));
    let names_summary_type = |c: &Class| {
        SUMMARY_TYPES
            .iter()
            .filter_map(|&id| region.schema.get(id))
            .any(|t| t.name == c.event())
    };
    let summaries_withheld = rules.grant.is_some()
        || rules.since_ns.is_some()
        || rules.classes.iter().any(names_summary_type);
    Plan {
        overlay,
        message,
        summaries_withheld,
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
mod tests;
