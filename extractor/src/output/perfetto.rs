//! `crashring extract --format perfetto -o FILE.pftrace`: a Perfetto
//! protobuf trace for ui.perfetto.dev and trace_processor, encoded by hand
//! (field numbers from Perfetto's `trace.proto`; a test decodes our output
//! strictly against it).
//!
//! - Kernel events other than printk, markers, crashes, debug messages
//!   and hardware errors go into `ftrace_events` bundles per CPU (below
//!   CPU 1024, the most trace_processor takes; a higher CPU's events are
//!   instants on its track), at most [`BUNDLE`] events per
//!   bundle: `sched_switch`, `irq_handler_entry` and `irq_handler_exit` as
//!   Perfetto's own messages for them ([`TYPED`]: trace_processor builds
//!   its CPU scheduling and IRQ tracks from those), the others as generic
//!   ftrace events (name and fields). The first bundle after a loss has
//!   `lost_events` set, which trace_processor records as data loss on
//!   that CPU.
//! - Every stream but the empty ones (`RegionView::shown_streams`) has a
//!   track (`cpu3`, or a user stream's `user:` label) of
//!   `TrackEvent` instants: printk lines, markers, crashes and debug
//!   messages named by their text, hardware errors by their words (also a
//!   `described` annotation), all events of user streams named by their
//!   type, and each loss as "N events lost (reason)"; fields become debug
//!   annotations.
//! - Timestamps are the region's clock (CLOCK_MONOTONIC) in nanoseconds,
//!   written as trace time.
//! - Text becomes valid UTF-8 (protobuf strings must be); bytes become hex.

use super::debug::Debug;
use super::RegionView;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Pulled;
use pstore_ring::ras;
use pstore_ring::read::{Event, EventType, Loss, Region};
use pstore_ring::schema::{self, Value};
use std::io::{self, Write};

/// trace_processor refuses a whole trace holding an `ftrace_events`
/// bundle of a CPU from this one up ("likely because of trace
/// corruption"): such a CPU's events are instants on its track instead.
const MAX_BUNDLE_CPU: u16 = 1024;

/// Generic events per `ftrace_events` bundle.
pub const BUNDLE: usize = 1024;

/// The sequence every `TrackEvent` and track descriptor is written on.
const SEQUENCE: u64 = 1;
/// `TracePacket.sequence_flags`: SEQ_INCREMENTAL_STATE_CLEARED.
const STATE_CLEARED: u64 = 1;
/// `TrackEvent.type`: TYPE_INSTANT.
const INSTANT: u64 = 3;

// Field numbers, from perfetto/protos/perfetto/trace/perfetto_trace.proto.
mod field {
    pub const TRACE_PACKET: u32 = 1;
    pub mod packet {
        pub const FTRACE_EVENTS: u32 = 1;
        pub const TIMESTAMP: u32 = 8;
        pub const SEQUENCE_ID: u32 = 10;
        pub const TRACK_EVENT: u32 = 11;
        pub const SEQUENCE_FLAGS: u32 = 13;
        pub const TRACK_DESCRIPTOR: u32 = 60;
    }
    pub mod bundle {
        pub const CPU: u32 = 1;
        pub const EVENT: u32 = 2;
        pub const LOST_EVENTS: u32 = 3;
    }
    pub mod ftrace {
        pub const TIMESTAMP: u32 = 1;
        pub const SCHED_SWITCH: u32 = 4;
        pub const IRQ_HANDLER_ENTRY: u32 = 36;
        pub const IRQ_HANDLER_EXIT: u32 = 37;
        pub const GENERIC: u32 = 327;
    }
    pub mod generic {
        pub const EVENT_NAME: u32 = 1;
        pub const FIELD: u32 = 2;
        pub const NAME: u32 = 1;
        pub const STR_VALUE: u32 = 3;
        pub const INT_VALUE: u32 = 4;
        pub const UINT_VALUE: u32 = 5;
    }
    pub mod track {
        pub const UUID: u32 = 1;
        pub const NAME: u32 = 2;
        pub const PROCESS: u32 = 3;
        pub const PARENT_UUID: u32 = 5;
    }
    pub mod process {
        pub const PID: u32 = 1;
        pub const PROCESS_NAME: u32 = 6;
    }
    pub mod track_event {
        pub const DEBUG_ANNOTATIONS: u32 = 4;
        pub const TYPE: u32 = 9;
        pub const TRACK_UUID: u32 = 11;
        pub const NAME: u32 = 23;
    }
    pub mod annotation {
        pub const UINT_VALUE: u32 = 3;
        pub const INT_VALUE: u32 = 4;
        pub const STRING_VALUE: u32 = 6;
        pub const POINTER_VALUE: u32 = 7;
        pub const NAME: u32 = 10;
    }
}

/// Protobuf wire encoding into a byte buffer.
mod wire {
    pub fn varint(b: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            b.push(v as u8 | 0x80);
            v >>= 7;
        }
        b.push(v as u8);
    }

    fn key(b: &mut Vec<u8>, field: u32, wire_type: u8) {
        varint(b, u64::from(field) << 3 | u64::from(wire_type));
    }

    pub fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
        key(b, field, 0);
        varint(b, v);
    }

    /// `int64`: negative values take ten bytes, as protobuf specifies.
    pub fn int(b: &mut Vec<u8>, field: u32, v: i64) {
        uint(b, field, v as u64);
    }

    pub fn bytes(b: &mut Vec<u8>, field: u32, data: &[u8]) {
        key(b, field, 2);
        varint(b, data.len() as u64);
        b.extend_from_slice(data);
    }

    /// A nested message, built in place after a one-byte length; a longer
    /// length (128 bytes and up) moves the body along.
    pub fn message(b: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
        key(b, field, 2);
        let at = b.len();
        b.push(0);
        body(b);
        let len = (b.len() - at - 1) as u64;
        if len < 0x80 {
            b[at] = len as u8;
            return;
        }
        let mut encoded = [0u8; 10];
        let mut n = 0;
        let mut v = len;
        while v >= 0x80 {
            encoded[n] = v as u8 | 0x80;
            v >>= 7;
            n += 1;
        }
        encoded[n] = v as u8;
        b[at] = encoded[0];
        b.splice(at + 1..at + 1, encoded[1..=n].iter().copied());
    }
}

/// Perfetto's protobuf trace.
pub struct Perfetto;

impl super::ItemFormat for Perfetto {
    fn begin(&self, out: &mut dyn Write, region: &RegionView, _several: bool) -> io::Result<()> {
        begin(out, region)
    }

    fn items(&self, out: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
        chunk(out, items, view);
    }
}

/// Writes the region's track descriptors, one per stream it shows
/// ([`RegionView::shown_streams`]: an empty stream would be an empty
/// track); its items follow as [`chunk`]s. The traces of several regions
/// (`region_index` in `crashring info` order) concatenate into one.
fn begin(out: &mut dyn Write, view: &RegionView) -> io::Result<()> {
    let region_index = view.index;
    let mut packet = Vec::with_capacity(4096);
    let mut first = region_index == 0;
    let mut descriptor = |packet: &mut Vec<u8>, fill: &mut dyn FnMut(&mut Vec<u8>)| {
        wire::message(packet, field::TRACE_PACKET, |p| {
            wire::uint(p, field::packet::SEQUENCE_ID, SEQUENCE);
            if core::mem::take(&mut first) {
                wire::uint(p, field::packet::SEQUENCE_FLAGS, STATE_CLEARED);
            }
            wire::message(p, field::packet::TRACK_DESCRIPTOR, |t| fill(t));
        });
    };
    // A process track for each process that wrote user streams, named
    // after the program (the stream name up to its `.N`).
    let mut processes = std::collections::BTreeMap::new();
    for st in view.shown_streams().map(|s| s.info()) {
        if st.kind != STREAM_KERNEL_CPU && st.pid != 0 {
            processes.entry(st.pid).or_insert(st.program_label());
        }
    }
    for (&pid, name) in &processes {
        descriptor(&mut packet, &mut |t| {
            wire::uint(t, field::track::UUID, process_uuid(region_index, pid));
            wire::message(t, field::track::PROCESS, |p| {
                wire::uint(p, field::process::PID, pid.into());
                wire::bytes(p, field::process::PROCESS_NAME, name.as_bytes());
            });
        });
    }
    for st in view.shown_streams() {
        let info = st.info();
        descriptor(&mut packet, &mut |t| {
            wire::uint(t, field::track::UUID, track_uuid(region_index, info.index));
            wire::bytes(t, field::track::NAME, info.label().as_bytes());
            if processes.contains_key(&info.pid) && info.kind != STREAM_KERNEL_CPU {
                let parent = process_uuid(region_index, info.pid);
                wire::uint(t, field::track::PARENT_UUID, parent);
            }
        });
    }
    out.write_all(&packet)
}

/// Writes a track named `name` holding one instant per `(time, text)`:
/// a user log placed on the trace's timeline (see [`crate::bundle::logs`]).
/// `log_index` tells the logs of one trace apart.
pub fn log_track(
    out: &mut impl Write,
    name: &str,
    log_index: usize,
    lines: &[(u64, String)],
) -> io::Result<()> {
    let track = 0xC0DE_0001_0000_0000 + log_index as u64;
    let mut packet = Vec::with_capacity(1 << 16);
    wire::message(&mut packet, field::TRACE_PACKET, |p| {
        wire::uint(p, field::packet::SEQUENCE_ID, SEQUENCE);
        wire::message(p, field::packet::TRACK_DESCRIPTOR, |t| {
            wire::uint(t, field::track::UUID, track);
            wire::bytes(t, field::track::NAME, name.as_bytes());
        });
    });
    for (ts, text) in lines {
        track_event(&mut packet, track, *ts, text.as_bytes(), |_| {});
        if packet.len() >= 1 << 16 {
            out.write_all(&packet)?;
            packet.clear();
        }
    }
    out.write_all(&packet)
}

/// A track per stream, distinct across the regions of one dump.
fn track_uuid(region_index: usize, stream: u16) -> u64 {
    0xC0DE_0000_0000 + ((region_index as u64) << 16) + u64::from(stream)
}

/// A process track per pid of a region's user streams, apart from the
/// stream tracks.
fn process_uuid(region_index: usize, pid: u32) -> u64 {
    0xC0DF_0000_0000_0000 + ((region_index as u64) << 32) + u64::from(pid)
}

/// printk lines, markers, crashes and debug messages are shown by
/// their text.
fn is_named_by_text(type_id: u8) -> bool {
    matches!(
        type_id,
        schema::EVENT_PRINTK | schema::EVENT_MARKER | schema::EVENT_CRASH | schema::EVENT_DEBUG
    )
}

/// Events an instant each on their stream's track rather than a line of
/// their CPU's ftrace bundle: those shown by their text, and hardware
/// errors, which are rare and what a reader looks for, named by their
/// words.
fn is_instant(type_id: u8) -> bool {
    is_named_by_text(type_id)
        || matches!(
            type_id,
            schema::EVENT_MCE | schema::EVENT_MEMORY_FAILURE | schema::EVENT_AER
        )
}

/// A debug message's text (or why there is none) and its callsite, as
/// annotations.
fn debug_annotations(out: &mut Vec<u8>, d: &Debug) {
    match &d.message.text {
        Ok(text) => annotation(out, "message", &Value::Str(text)),
        Err(why) => annotation(
            out,
            "message_error",
            &Value::Str(why.to_string().as_bytes()),
        ),
    }
    if let Some(c) = &d.message.callsite {
        let source = super::debug::source_name(c.source);
        annotation(out, "source", &Value::Str(source.as_bytes()));
        annotation(out, "module", &Value::Str(c.module));
        annotation(out, "function", &Value::Str(c.function));
        annotation(out, "file", &Value::Str(c.file));
        annotation(out, "line", &Value::Unsigned(c.line.into()));
    }
}

/// What an event is called on a timeline: the text of a printk line,
/// marker or crash (their last text field), else its type's name.
pub(crate) fn instant_name<'p>(type_id: u8, t: &'p EventType, values: &[Value<'p>]) -> &'p [u8] {
    let text = values.iter().rev().find_map(|v| match v {
        Value::Str(s) | Value::Chars(s) if is_named_by_text(type_id) => Some(*s),
        _ => None,
    });
    text.unwrap_or(t.name.as_bytes())
}

/// Appends the packets of a run of merged items: per CPU, its generic
/// events in bundles of at most [`BUNDLE`]; every other item as a
/// `TrackEvent` instant. A CPU's first bundle after one of its losses has
/// `lost_events` set; a loss with no event of its CPU after it in the run
/// gets an empty bundle of its own that says so.
fn chunk(buf: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
    let (region, region_index) = (view.region, view.index);
    // Each event's decoded fields, in one buffer for the whole run.
    let mut values = Vec::new();
    // Per stream: its bundle's events so far, and whether a loss precedes.
    let mut bundles: Vec<(u16, u16, Vec<&Event>, bool)> = Vec::new();
    for item in items {
        let info = region.streams.iter().find(|s| s.index == item.stream());
        let kernel_cpu = info
            .filter(|i| i.kind == STREAM_KERNEL_CPU && i.cpu < MAX_BUNDLE_CPU)
            .map(|i| i.cpu);
        let track = track_uuid(region_index, item.stream());
        match item {
            Pulled::Event(e) if kernel_cpu.is_some() && !is_instant(e.type_id) => {
                let at = match bundles.iter().position(|b| b.0 == e.stream) {
                    Some(at) => at,
                    None => {
                        let cpu = kernel_cpu.unwrap_or_default();
                        bundles.push((e.stream, cpu, Vec::with_capacity(BUNDLE), false));
                        bundles.len() - 1
                    }
                };
                let b = &mut bundles[at];
                b.2.push(e);
                if b.2.len() == BUNDLE {
                    bundle(buf, region, b.1, &b.2, b.3, &mut values);
                    b.2.clear();
                    b.3 = false;
                }
            }
            Pulled::Event(e) => instant(buf, view, e, track, &mut values),
            Pulled::Loss(l) => {
                if let Some(b) = bundles.iter_mut().find(|b| b.0 == l.stream) {
                    if !b.2.is_empty() {
                        bundle(buf, region, b.1, &b.2, b.3, &mut values);
                        b.2.clear();
                    }
                    b.3 = true;
                } else if let Some(cpu) = kernel_cpu {
                    bundles.push((l.stream, cpu, Vec::with_capacity(BUNDLE), true));
                }
                loss(buf, l, track);
            }
        }
    }
    for (_, cpu, events, lost) in &bundles {
        if !events.is_empty() || *lost {
            bundle(buf, region, *cpu, events, *lost, &mut values);
        }
    }
}

fn bundle<'e>(
    buf: &mut Vec<u8>,
    region: &Region,
    cpu: u16,
    events: &[&Event<'e>],
    lost_before: bool,
    values: &mut Vec<Value<'e>>,
) {
    wire::message(buf, field::TRACE_PACKET, |p| {
        wire::message(p, field::packet::FTRACE_EVENTS, |b| {
            wire::uint(b, field::bundle::CPU, u64::from(cpu));
            for e in events {
                wire::message(b, field::bundle::EVENT, |f| {
                    ftrace_event(f, region, e, values)
                });
            }
            if lost_before {
                wire::uint(b, field::bundle::LOST_EVENTS, 1);
            }
        });
    });
}

/// A `TrackEvent` instant on a stream's track.
fn track_event(
    buf: &mut Vec<u8>,
    track: u64,
    ts: u64,
    name: &[u8],
    annotate: impl FnOnce(&mut Vec<u8>),
) {
    wire::message(buf, field::TRACE_PACKET, |p| {
        wire::uint(p, field::packet::TIMESTAMP, ts);
        wire::uint(p, field::packet::SEQUENCE_ID, SEQUENCE);
        wire::message(p, field::packet::TRACK_EVENT, |t| {
            wire::uint(t, field::track_event::TYPE, INSTANT);
            wire::uint(t, field::track_event::TRACK_UUID, track);
            wire::bytes(t, field::track_event::NAME, utf8(name).as_bytes());
            annotate(t);
        });
    });
}

fn instant<'e>(
    buf: &mut Vec<u8>,
    view: &RegionView,
    e: &Event<'e>,
    track: u64,
    values: &mut Vec<Value<'e>>,
) {
    let region = view.region;
    let ty = region.schema.get(e.type_id);
    let decoded = ty.and_then(|t| t.decode_into(e.payload, region.header.endian, values).ok());
    let (Some(t), Some(())) = (ty, decoded) else {
        let name = format!("crashring_raw type {}", e.type_id);
        return track_event(buf, track, e.ts, name.as_bytes(), |t| {
            annotation(t, "payload", &Value::Bytes(e.payload));
        });
    };
    let debug = Debug::of(view, e);
    let debug_name = debug.as_ref().map(Debug::name);
    let words = ras::describe(t, e.payload, region.header.endian);
    let name = debug_name
        .as_deref()
        .or(words.as_ref().map(String::as_bytes))
        .unwrap_or_else(|| instant_name(e.type_id, t, values));
    track_event(buf, track, e.ts, name, |out| {
        for (f, v) in t.fields.iter().zip(values.iter()) {
            annotation(out, &f.name, v);
        }
        if let Some(d) = &debug {
            debug_annotations(out, d);
        }
        if let Some(words) = &words {
            annotation(out, "described", &Value::Str(words.as_bytes()));
        }
    })
}

fn loss(buf: &mut Vec<u8>, l: &Loss, track: u64) {
    let name = pstore_ring::text::LossLabel(l).to_string();
    let ts = l.before_ts.or(l.after_ts).unwrap_or(0);
    track_event(buf, track, ts, name.as_bytes(), |t| {
        annotation(t, "events", &Value::Unsigned(l.events));
        annotation(t, "pages", &Value::Unsigned(l.pages));
    })
}

/// A field of one of Perfetto's typed ftrace messages, as trace.proto
/// declares it.
#[derive(Clone, Copy)]
enum Proto {
    String,
    Int32,
    Int64,
}

/// One of `FtraceEvent`'s typed messages, for the built-in type of its
/// name: its field number in `FtraceEvent`, and each of the type's fields
/// by name with its number and type in the message.
struct Typed {
    name: &'static str,
    number: u32,
    fields: &'static [(&'static str, u32, Proto)],
}

/// The built-in types written as Perfetto's own messages.
const TYPED: &[Typed] = &[
    Typed {
        name: "sched_switch",
        number: field::ftrace::SCHED_SWITCH,
        fields: &[
            ("prev_comm", 1, Proto::String),
            ("prev_pid", 2, Proto::Int32),
            ("prev_prio", 3, Proto::Int32),
            ("prev_state", 4, Proto::Int64),
            ("next_comm", 5, Proto::String),
            ("next_pid", 6, Proto::Int32),
            ("next_prio", 7, Proto::Int32),
        ],
    },
    Typed {
        name: "irq_handler_entry",
        number: field::ftrace::IRQ_HANDLER_ENTRY,
        fields: &[("irq", 1, Proto::Int32), ("name", 2, Proto::String)],
    },
    Typed {
        name: "irq_handler_exit",
        number: field::ftrace::IRQ_HANDLER_EXIT,
        fields: &[("irq", 1, Proto::Int32), ("ret", 2, Proto::Int32)],
    },
];

/// One `FtraceEvent`: Perfetto's typed message where [`typed`] finds
/// one, else a `GenericFtraceEvent`.
fn ftrace_event<'e>(f: &mut Vec<u8>, region: &Region, e: &Event<'e>, values: &mut Vec<Value<'e>>) {
    wire::uint(f, field::ftrace::TIMESTAMP, e.ts);
    let ty = region.schema.get(e.type_id);
    let decoded = ty.filter(|t| {
        t.decode_into(e.payload, region.header.endian, values)
            .is_ok()
    });
    match decoded {
        Some(t) => {
            if typed(f, t, values) {
                return;
            }
            wire::message(f, field::ftrace::GENERIC, |g| {
                wire::bytes(g, field::generic::EVENT_NAME, t.name.as_bytes());
                for (fd, v) in t.fields.iter().zip(values.iter()) {
                    generic_field(g, &fd.name, v);
                }
            });
        }
        None => wire::message(f, field::ftrace::GENERIC, |g| {
            wire::bytes(g, field::generic::EVENT_NAME, b"crashring_raw");
            generic_field(g, "type_id", &Value::Unsigned(e.type_id.into()));
            generic_field(g, "payload", &Value::Bytes(e.payload));
        }),
    }
}

/// Writes `values` as the [`TYPED`] message of type `t`, if the type has
/// one and every field is there by name with a value its field holds
/// exactly (a region's schema may define any type under a built-in's
/// name); false, having written nothing, if not.
fn typed(f: &mut Vec<u8>, t: &EventType, values: &[Value]) -> bool {
    let Some(&Typed { number, fields, .. }) = TYPED.iter().find(|m| m.name == t.name) else {
        return false;
    };
    if t.fields.len() != fields.len() {
        return false;
    }
    let mut encoded = [(0u32, Value::Unsigned(0)); 8];
    // Each of the message's fields once: a type that names one twice
    // lacks another, which the message would show as 0.
    let mut seen = 0u32;
    for (slot, (fd, v)) in encoded.iter_mut().zip(t.fields.iter().zip(values)) {
        let Some(&(_, n, proto)) = fields.iter().find(|p| p.0 == fd.name) else {
            return false;
        };
        if seen & 1 << n != 0 {
            return false;
        }
        seen |= 1 << n;
        let fits = match (proto, *v) {
            (Proto::String, Value::Str(_) | Value::Chars(_)) => true,
            (Proto::Int32, Value::Signed(x)) => i32::try_from(x).is_ok(),
            (Proto::Int32, Value::Unsigned(x)) => i32::try_from(x).is_ok(),
            (Proto::Int64, Value::Signed(_)) => true,
            (Proto::Int64, Value::Unsigned(x)) => i64::try_from(x).is_ok(),
            _ => false,
        };
        if !fits {
            return false;
        }
        *slot = (n, *v);
    }
    wire::message(f, number, |m| {
        for &(n, v) in &encoded[..fields.len()] {
            match v {
                Value::Str(s) | Value::Chars(s) => wire::bytes(m, n, utf8(s).as_bytes()),
                // In range of the field's type, checked above.
                Value::Signed(x) => wire::int(m, n, x),
                Value::Unsigned(x) => wire::uint(m, n, x),
                _ => {}
            }
        }
    });
    true
}

fn generic_field(g: &mut Vec<u8>, name: &str, v: &Value) {
    use field::generic::*;
    wire::message(g, FIELD, |f| {
        wire::bytes(f, NAME, name.as_bytes());
        match *v {
            Value::Unsigned(x) | Value::Ptr(x) => wire::uint(f, UINT_VALUE, x),
            Value::Signed(x) => wire::int(f, INT_VALUE, x),
            Value::Chars(s) | Value::Str(s) => wire::bytes(f, STR_VALUE, utf8(s).as_bytes()),
            Value::Bytes(s) => wire::bytes(f, STR_VALUE, &hex(s)),
        }
    });
}

fn annotation(t: &mut Vec<u8>, name: &str, v: &Value) {
    use field::annotation::*;
    wire::message(t, field::track_event::DEBUG_ANNOTATIONS, |a| {
        wire::bytes(a, NAME, name.as_bytes());
        match *v {
            Value::Unsigned(x) => wire::uint(a, UINT_VALUE, x),
            Value::Ptr(x) => wire::uint(a, POINTER_VALUE, x),
            Value::Signed(x) => wire::int(a, INT_VALUE, x),
            Value::Chars(s) | Value::Str(s) => wire::bytes(a, STRING_VALUE, utf8(s).as_bytes()),
            Value::Bytes(s) => wire::bytes(a, STRING_VALUE, &hex(s)),
        }
    });
}

fn utf8(s: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(s)
}

fn hex(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 * s.len());
    pstore_ring::text::hex_bytes(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::{typed, wire};
    use pstore_ring::read::{EventType, Field};
    use pstore_ring::schema::{FieldKind, Value};

    fn irq_exit(names: [&str; 2]) -> EventType {
        let fields = names
            .iter()
            .map(|n| Field::new(n.to_string(), FieldKind::U32))
            .collect();
        EventType::new(40, "irq_handler_exit".into(), fields)
    }

    /// A region may define a type under a built-in's name with fields of
    /// its own: only one with each of the message's fields, once, is
    /// written as the message.
    #[test]
    fn a_type_is_written_as_perfettos_message_only_with_its_fields() {
        let values = [Value::Unsigned(11), Value::Unsigned(1)];
        let mut b = Vec::new();
        assert!(typed(&mut b, &irq_exit(["irq", "ret"]), &values));
        // FtraceEvent field 37, 4 bytes: irq (1) = 11, ret (2) = 1.
        assert_eq!(b, [0xaa, 0x02, 0x04, 0x08, 0x0b, 0x10, 0x01]);
        for names in [["irq", "irq"], ["irq", "status"]] {
            b.clear();
            assert!(!typed(&mut b, &irq_exit(names), &values), "{names:?}");
            assert!(b.is_empty(), "{names:?}: nothing written");
        }
    }

    #[test]
    fn varints_and_nested_lengths_follow_the_wire_format() {
        let mut b = Vec::new();
        wire::varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
        b.clear();
        wire::int(&mut b, 1, -1);
        assert_eq!(
            b,
            [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        b.clear();
        wire::message(&mut b, 2, |m| wire::bytes(m, 1, &[7; 200]));
        assert_eq!(&b[..5], [0x12, 0xcb, 0x01, 0x0a, 0xc8]);
        assert_eq!(b.len(), 3 + 3 + 200);
    }
}
