//! `crashring extract --format ctf -o DIR`: a CTF 1.8 trace, for
//! babeltrace2, Trace Compass and anything else that reads LTTng's traces.
//!
//! - `DIR/metadata`: TSDL text, starting `/* CTF 1.8 */` (older Trace
//!   Compass refuses metadata without it). One event class per type in
//!   the region's schema, plus `crashring_raw` for records whose type is
//!   unknown or whose payload does not fit it: type id and bytes, so
//!   nothing decoded is left out.
//! - One data stream file per ring stream that holds events or lost some
//!   (`RegionView::shown_streams`): `kernel_<cpu>` for a CPU's stream,
//!   `user_<index>` for a user-space one. Empty ones (most nesting lanes,
//!   a pool's free user streams) have none: the metadata declares a
//!   stream *class* per kind, kernel and user, never a stream instance,
//!   so readers need no file per ring stream.
//! - One packet per recovered page, with `timestamp_begin/end`,
//!   `packet_seq_num` (the page's sequence number, so readers report
//!   unreadable pages in the middle as discarded packets),
//!   `events_discarded` and `cpu_id` (user streams: `pid` and
//!   `stream_index` instead). Each stream opens with an empty packet whose
//!   counter is 0: readers report the counter's growth *between* packets,
//!   and without it the overwritten events before the oldest page (the
//!   usual loss of a flight recorder) would go unreported.
//! - Timestamps never go backwards within a stream, because readers stop
//!   on a backwards event: one older than its predecessor is written at its
//!   predecessor's time and counted in [`Written::clamped`](super::Written::clamped) and in the
//!   environment's `clamped_timestamps`. So is one past what a reader can
//!   place with the clock's offset ([`clock_ceiling`]: 2^63 ns from the
//!   origin), which a user stream may claim.
//! - Fields are re-encoded little-endian whatever the region's byte order;
//!   text fields become NUL-terminated UTF-8 (invalid bytes and NULs become
//!   U+FFFD). Field names carry a leading `_`, which readers drop, so a
//!   field may be called anything, keywords included.
//!
//! - The clock's `offset` (what readers add to show wall-clock time) is
//!   the region's wall-clock offset in effect at the crash, or with no
//!   crash at the newest event ([`WallClock`]): CTF has one offset per
//!   clock, so when the trace holds `clock` events (the wall clock was
//!   stepped while recording), times before the last step are shown
//!   with the offset after it, off by the step; the environment's
//!   `clock_steps` counts them, and the bundle's MANIFEST.json lists them.
//!
//! The output depends only on the input: the trace UUID is derived from
//! the region's boot id, generation and place in the dump.

use super::debug::Debug;
use super::{doing, NewFile, WriteError, Written};
use super::{RegionView, StreamView};
use crate::output::select::Selection;
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Item;
use pstore_ring::read::{
    is_debug_type, reason_name, Event, EventType, LossKind, Region, StreamInfo, WallClock,
};
use pstore_ring::schema::{FieldKind, Value};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

const PACKET_MAGIC: u32 = 0xC1FC_1FC1;
/// Stream classes: kernel per-CPU streams and user-space streams.
const KERNEL_CLASS: u32 = 0;
const USER_CLASS: u32 = 1;
/// The event class of records shown raw; schema ids are 0..=255.
const RAW_ID: u16 = 256;

/// CTF 1.8, one trace directory per region.
pub struct Ctf;

impl super::FileFormat for Ctf {
    fn needs_output(&self) -> &'static str {
        "writes a directory: give it with -o DIR"
    }

    fn region_output(&self, base: &Path, n: usize) -> PathBuf {
        base.join(format!("region-{n}"))
    }

    fn write(
        &self,
        out: &Path,
        r: &RegionView,
        selection: &Selection,
        source: &str,
    ) -> Result<Written, WriteError> {
        let wall = r.region.wall_clock_of_pages(r.trace);
        let written = write(out, r, selection, source, &wall);
        doing(written, || {
            format!("writing a CTF trace to {}", out.display())
        })
    }
}

/// Writes the events of `view` that `selection` admits as a CTF trace in
/// `dir` (created if missing). `source` describes the input (the
/// container), `wall` is the region's wall clock.
pub fn write(
    dir: &Path,
    view: &RegionView,
    selection: &Selection,
    source: &str,
    wall: &WallClock,
) -> io::Result<Written> {
    crate::output::create_dir(dir)?;
    let region = view.region;
    let uuid = trace_uuid(region, view.index);
    let mut written = Written {
        lost_as: "discarded",
        files: vec![PathBuf::from("metadata")],
        ..Written::default()
    };
    let clock = Clock {
        wall,
        at: clock_time(view),
    };
    let ceiling = clock_ceiling(clock.wall.offset_at(clock.at));
    let streams = selection.streams(view);
    let has_user = streams.iter().any(|st| st.info().kind != STREAM_KERNEL_CPU);
    // Stream files are independent: one per core at a time.
    let parts: Vec<io::Result<Written>> = streams
        .par_iter()
        .map(|st| {
            let name = stream_file_name(st.info());
            let mut out = BufWriter::with_capacity(1 << 16, NewFile::create(&dir.join(&name))?);
            let mut part = Written::default();
            let mut writer = StreamWriter {
                out: &mut out,
                region,
                selection,
                view,
                uuid,
                packet: Vec::with_capacity(region.header.page_size as usize * 2),
                begin_ts: None,
                last_ts: 0,
                ceiling,
                written: &mut part,
            };
            writer.stream(st)?;
            out.into_inner()
                .map_err(io::IntoInnerError::into_error)?
                .persist()?;
            part.files.push(PathBuf::from(name));
            Ok(part)
        })
        .collect();
    for part in parts {
        let part = part?;
        written.events += part.events;
        written.lost = written.lost.saturating_add(part.lost);
        written.clamped += part.clamped;
        written.files.extend(part.files);
    }
    let metadata = metadata(region, uuid, has_user, source, written.clamped, clock);
    let mut f = NewFile::create(&dir.join("metadata"))?;
    f.write_all(metadata.as_bytes())?;
    f.persist()?;
    remove_stale_streams(dir, &written.files)?;
    Ok(written)
}

/// Removes the stream files an earlier run left in `dir` that this one
/// did not write (`written`): a reader takes every file of the directory
/// as a stream of the trace, so another CPU selection's or another
/// input's would be read with this metadata, or refused by it.
fn remove_stale_streams(dir: &Path, written: &[PathBuf]) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let ours = name.to_str().is_some_and(is_stream_file_name);
        if ours && entry.file_type()?.is_file() && !written.iter().any(|w| w.as_os_str() == name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Whether `name` is one [`stream_file_name`] gives: `kernel_N`,
/// `kernel_N_laneM` or `user_N`, and nothing else a person may keep
/// beside a trace.
fn is_stream_file_name(name: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(n) = name.strip_prefix("user_") {
        return number(n);
    }
    let Some(rest) = name.strip_prefix("kernel_") else {
        return false;
    };
    match rest.split_once("_lane") {
        Some((cpu, lane)) => number(cpu) && number(lane),
        None => number(rest),
    }
}

/// The latest trace time a reader can place with the clock's `offset`:
/// babeltrace2 turns every time into signed 64-bit nanoseconds from the
/// origin and refuses the trace at one that overflows. A user stream may
/// stamp its events with any time; one past this would cost every stream
/// of the trace.
fn clock_ceiling(offset: i64) -> u64 {
    (i64::MAX - offset.max(0)) as u64
}

fn stream_file_name(info: &StreamInfo) -> String {
    if info.kind == STREAM_KERNEL_CPU && info.lane > 0 {
        format!("kernel_{}_lane{}", info.cpu, info.lane)
    } else if info.kind == STREAM_KERNEL_CPU {
        format!("kernel_{}", info.cpu)
    } else {
        format!("user_{}", info.index)
    }
}

/// A UUID (version 8, RFC 9562) from what identifies the region: traces
/// with one UUID are one trace to babeltrace2, so two regions of one boot
/// must differ.
fn trace_uuid(region: &Region, region_index: usize) -> [u8; 16] {
    let h = &region.header;
    let mut d = Sha256::new();
    d.update(b"crashring ctf trace");
    d.update(h.boot_id);
    d.update(h.generation.to_le_bytes());
    d.update(h.created_ns.to_le_bytes());
    d.update((region_index as u64).to_le_bytes());
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&d.finalize()[..16]);
    uuid[6] = (uuid[6] & 0x0f) | 0x80;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    uuid
}

fn uuid_text(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A TSDL string literal: quotes and backslashes escaped, anything else
/// outside printable ASCII replaced, so no input breaks the metadata.
fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

fn tsdl_type(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::U8 => "uint8_t",
        FieldKind::U16 => "uint16_t",
        FieldKind::U32 => "uint32_t",
        FieldKind::U64 => "uint64_t",
        FieldKind::I8 => "int8_t",
        FieldKind::I16 => "int16_t",
        FieldKind::I32 => "int32_t",
        FieldKind::I64 => "int64_t",
        FieldKind::Ptr => "ptr_t",
        FieldKind::Chars(_) | FieldKind::Str => "string",
        // Declared as a length and a sequence; see `event_class`.
        FieldKind::Bytes => "uint8_t",
    }
}

/// Field names made unique within their type: every identifier the
/// struct declares, a byte field's `_length` and a debug type's
/// `_message` among them (the reader maps names to identifiers, but two
/// may still collide, and babeltrace2 refuses a structure that declares a
/// member twice).
fn field_names(t: &EventType) -> Vec<String> {
    let mut taken: Vec<String> = Vec::with_capacity(t.fields.len() + 1);
    if is_debug_type(t) {
        taken.push("message".into());
    }
    let mut names = Vec::with_capacity(t.fields.len());
    for f in &t.fields {
        let declares = |name: &str| match f.kind {
            FieldKind::Bytes => vec![name.to_string(), format!("{name}_length")],
            _ => vec![name.to_string()],
        };
        let mut name = f.name.clone();
        let mut n = 2;
        while declares(&name).iter().any(|d| taken.contains(d)) {
            name = format!("{}_{n}", f.name);
            n += 1;
        }
        taken.extend(declares(&name));
        names.push(name);
    }
    names
}

fn event_class(out: &mut String, t: &EventType, stream_class: u32) {
    let _ = writeln!(out, "event {{\n\tname = {};", literal(&t.name));
    let _ = writeln!(out, "\tid = {};\n\tstream_id = {stream_class};", t.id);
    out.push_str("\tfields := struct {\n");
    for (f, name) in t.fields.iter().zip(field_names(t)) {
        if f.kind == FieldKind::Bytes {
            let _ = writeln!(out, "\t\tuint16_t _{name}_length;");
            let _ = writeln!(out, "\t\tuint8_t _{name}[_{name}_length];");
        } else {
            let _ = writeln!(out, "\t\t{} _{name};", tsdl_type(f.kind));
        }
    }
    if is_debug_type(t) {
        // The message, formatted when read (`Debug::field_text`).
        out.push_str("\t\tstring _message;\n");
    }
    out.push_str("\t};\n};\n\n");
}

fn raw_class(out: &mut String, stream_class: u32) {
    let _ = writeln!(
        out,
        "event {{\n\tname = \"crashring_raw\";\n\tid = {RAW_ID};\n\tstream_id = {stream_class};\n\
         \tfields := struct {{\n\t\tuint8_t _type_id;\n\t\tuint32_t _size;\n\
         \t\tuint8_t _payload[_size];\n\t}};\n}};\n"
    );
}

/// The wall clock and the trace time whose offset the CTF clock takes.
#[derive(Clone, Copy)]
struct Clock<'w> {
    wall: &'w WallClock,
    at: u64,
}

/// The crash's time, or with no crash the newest kernel event's (0 with
/// neither): the offset in effect then is the one the trace ends with.
fn clock_time(view: &RegionView) -> u64 {
    match &view.region.state {
        Ok(s) if s.is_crash() => s.crash_ns,
        _ => view.kernel_tally().span.map_or(0, |(_, last)| last),
    }
}

fn metadata(
    region: &Region,
    uuid: [u8; 16],
    has_user: bool,
    source: &str,
    clamped: u64,
    clock: Clock,
) -> String {
    let h = &region.header;
    let uuid = uuid_text(&uuid);
    let mut m = String::with_capacity(16 << 10);
    m.push_str("/* CTF 1.8 */\n\n");
    for (bits, signed) in [(8, false), (16, false), (32, false), (64, false)]
        .into_iter()
        .chain([(8, true), (16, true), (32, true), (64, true)])
    {
        let name = format!("{}int{bits}_t", if signed { "" } else { "u" });
        let _ = writeln!(
            m,
            "typealias integer {{ size = {bits}; align = 8; signed = {signed}; }} := {name};"
        );
    }
    m.push_str(
        "typealias integer { size = 64; align = 8; signed = false; base = 16; } := ptr_t;\n\
         typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } := uint64_clock_t;\n\n",
    );
    let _ = writeln!(
        m,
        "trace {{\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"{uuid}\";\n\tbyte_order = le;\n\
         \tpacket.header := struct {{\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\t\tuint32_t stream_id;\n\t}};\n}};\n"
    );
    let boot_id: String = h.boot_id.iter().map(|b| format!("{b:02x}")).collect();
    let mut env = vec![
        ("hostname", literal(&h.hostname)),
        ("domain", literal("kernel")),
        ("sysname", literal("Linux")),
        ("kernel_release", literal(&h.kernel_release)),
        ("tracer_name", literal("crashring")),
        ("tracer_major", version_part(0)),
        ("tracer_minor", version_part(1)),
        ("boot_id", literal(&boot_id)),
        ("producer", literal(&h.producer)),
        ("region_generation", h.generation.to_string()),
        ("source", literal(source)),
        ("clamped_timestamps", clamped.to_string()),
    ];
    if let Ok(s) = &region.state {
        env.push(("crash_state", literal(s.state_name())));
        if s.is_crash() {
            env.push(("crash_reason", literal(reason_name(s.reason))));
            env.push(("crash_time_ns", s.crash_ns.to_string()));
            env.push(("crash_cpu", s.crash_cpu.to_string()));
            env.push(("crash_message", literal(&s.message)));
        }
        if let Some(why) = s.shutdown_reason() {
            env.push(("shutdown_reason", literal(why)));
            env.push(("shutdown_reason_time_ns", s.crash_ns.to_string()));
        }
    }
    if !clock.wall.steps().is_empty() {
        env.push(("clock_steps", clock.wall.steps().len().to_string()));
    }
    m.push_str("env {\n");
    for (k, v) in env {
        let _ = writeln!(m, "\t{k} = {v};");
    }
    m.push_str("};\n\n");
    let offset = clock.wall.offset_at(clock.at);
    let _ = writeln!(
        m,
        "clock {{\n\tname = monotonic;\n\tuuid = \"{uuid}\";\n\
         \tdescription = \"CLOCK_MONOTONIC of the kernel that wrote the region\";\n\
         \tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = {};\n\toffset = {};\n\tabsolute = FALSE;\n}};\n",
        offset.div_euclid(1_000_000_000),
        offset.rem_euclid(1_000_000_000)
    );
    let context = "\t\tuint64_clock_t timestamp_begin;\n\t\tuint64_clock_t timestamp_end;\n\
                   \t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\
                   \t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n";
    let header =
        "\tevent.header := struct {\n\t\tuint16_t id;\n\t\tuint64_clock_t timestamp;\n\t};\n";
    let mut classes = vec![(KERNEL_CLASS, "\t\tuint32_t cpu_id;\n")];
    if has_user {
        classes.push((
            USER_CLASS,
            "\t\tuint32_t pid;\n\t\tuint16_t stream_index;\n",
        ));
    }
    for (id, own) in &classes {
        let _ = writeln!(
            m,
            "stream {{\n\tid = {id};\n\tpacket.context := struct {{\n{context}{own}\t}};\n{header}}};\n"
        );
    }
    for (id, _) in &classes {
        for t in region.schema.types() {
            event_class(&mut m, t, *id);
        }
        raw_class(&mut m, *id);
    }
    m
}

/// Component `n` of this tool's version, as a TSDL integer.
fn version_part(n: usize) -> String {
    env!("CARGO_PKG_VERSION")
        .split('.')
        .nth(n)
        .and_then(|p| p.parse::<u32>().ok())
        .unwrap_or(0)
        .to_string()
}

/// Writes one stream's packets.
struct StreamWriter<'w, 'r, 'a> {
    out: &'w mut BufWriter<NewFile>,
    region: &'r Region<'a>,
    selection: &'r Selection,
    view: &'r RegionView<'r, 'a>,
    uuid: [u8; 16],
    /// The packet being built; its context is patched when it is complete.
    packet: Vec<u8>,
    /// The time of the packet's first event, if it has one.
    begin_ts: Option<u64>,
    /// The stream's latest time so far: no event goes before it.
    last_ts: u64,
    /// The latest time the clock can hold ([`clock_ceiling`]).
    ceiling: u64,
    written: &'w mut Written,
}

/// Packets waiting for their discarded counter: a page's, built in
/// [`StreamWriter::packet`] (its times and sizes final, as no event comes
/// before it is written), and the empty ones after it, by `seq`.
#[derive(Default)]
struct Held {
    packet: bool,
    empty: Vec<u64>,
}

/// Where the packet context's fields sit in a packet.
const CONTEXT_AT: usize = 4 + 16 + 4;
const TS_BEGIN: usize = CONTEXT_AT;
const TS_END: usize = CONTEXT_AT + 8;
const CONTENT_SIZE: usize = CONTEXT_AT + 16;
const PACKET_SIZE: usize = CONTEXT_AT + 24;
const DISCARDED: usize = CONTEXT_AT + 40;

impl StreamWriter<'_, '_, '_> {
    /// One packet per recovered page, even one left empty by the
    /// selection: a gap in `packet_seq_num` means a page was lost. A
    /// packet's discarded counter takes the losses before the next
    /// packet's first event, which only a later page tells, so a page's
    /// packet is held, built, until then ([`Held`]): each page is walked
    /// once, in order, and only the page being written is resident.
    fn stream(&mut self, st: &StreamView) -> io::Result<()> {
        let admitted = |e: &Event| self.selection.admits(&Item::Event(e), self.region);
        let mut losses = st
            .losses()
            .iter()
            .filter(|l| self.selection.admits(&Item::Loss(l), self.region))
            .peekable();
        let info = st.info();
        let pages = st.decoded();
        let first_seq = pages.first().map_or(0, |p| p.seq.saturating_sub(1));
        let mut held = Held::default();
        let mut opened = false;
        let mut discarded = 0u64;
        for p in pages {
            let mut events = st.page_events(p).filter(admitted).peekable();
            let Some(first) = events.peek() else {
                held.empty.push(p.seq);
                continue;
            };
            if !opened {
                self.last_ts = first.ts.min(self.ceiling);
                self.open(info, first_seq)?;
                opened = true;
            }
            while let Some(l) = losses.next_if(|l| l.at_index < first.index) {
                discarded = discarded.saturating_add(l.events);
            }
            self.release(&mut held, info, discarded)?;
            self.begin(info, p.seq);
            for e in events {
                self.event(&e);
            }
            held.packet = true;
        }
        if !opened {
            self.last_ts = losses
                .peek()
                .and_then(|l| l.before_ts.or(l.after_ts))
                .unwrap_or(0)
                .min(self.ceiling);
            self.open(info, first_seq)?;
        }
        // What no later event follows is the last packets'; with no page
        // at all, one more empty packet carries it. The pages of the end
        // loss (after every page the stream has, counted or not) get an
        // empty packet after them, so that the gap in packet_seq_num says
        // them; a loss between pages is said by their own seqs.
        let (mut end_events, mut end_pages) = (0u64, 0u64);
        for l in losses {
            if l.kind == LossKind::End {
                end_events = end_events.saturating_add(l.events);
                end_pages = end_pages.saturating_add(l.pages);
            } else {
                discarded = discarded.saturating_add(l.events);
            }
        }
        if end_pages > 0 {
            // Readers place a packet's discarded events before it: the
            // packets read keep the count before the lost pages.
            self.release(&mut held, info, discarded)?;
            let last_seq = pages.last().map_or(first_seq, |p| p.seq);
            held.empty
                .push(last_seq.saturating_add(end_pages).saturating_add(1));
        }
        discarded = discarded.saturating_add(end_events);
        if pages.is_empty() && discarded > 0 && held.empty.is_empty() {
            held.empty.push(first_seq.saturating_add(1));
        }
        self.release(&mut held, info, discarded)?;
        self.written.lost = self.written.lost.saturating_add(discarded);
        Ok(())
    }

    /// The empty packet a stream opens with, at its first time: readers
    /// count discarded events from its counter, 0.
    fn open(&mut self, info: &StreamInfo, seq: u64) -> io::Result<()> {
        self.begin(info, seq);
        self.finish(0)
    }

    /// Writes the held packets with the discarded counter now known.
    fn release(&mut self, held: &mut Held, info: &StreamInfo, discarded: u64) -> io::Result<()> {
        if std::mem::take(&mut held.packet) {
            self.finish(discarded)?;
        }
        for seq in held.empty.drain(..) {
            self.begin(info, seq);
            self.finish(discarded)?;
        }
        Ok(())
    }

    /// Starts a packet: header and context, with sizes, times and the
    /// discarded counter left for [`Self::finish`].
    fn begin(&mut self, info: &StreamInfo, seq: u64) {
        let p = &mut self.packet;
        p.clear();
        p.extend_from_slice(&PACKET_MAGIC.to_le_bytes());
        p.extend_from_slice(&self.uuid);
        let class = if info.kind == STREAM_KERNEL_CPU {
            KERNEL_CLASS
        } else {
            USER_CLASS
        };
        p.extend_from_slice(&class.to_le_bytes());
        // timestamp_begin, timestamp_end, content_size, packet_size.
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(&seq.to_le_bytes());
        // events_discarded.
        p.extend_from_slice(&[0; 8]);
        if class == KERNEL_CLASS {
            p.extend_from_slice(&u32::from(info.cpu).to_le_bytes());
        } else {
            p.extend_from_slice(&info.pid.to_le_bytes());
            p.extend_from_slice(&info.index.to_le_bytes());
        }
        self.begin_ts = None;
    }

    /// Completes the packet and writes it. An empty packet begins and ends
    /// at the stream's latest time.
    fn finish(&mut self, discarded: u64) -> io::Result<()> {
        let end = self.last_ts;
        let begin = self.begin_ts.unwrap_or(end);
        let bits = (self.packet.len() as u64) * 8;
        let p = &mut self.packet;
        p[TS_BEGIN..TS_BEGIN + 8].copy_from_slice(&begin.to_le_bytes());
        p[TS_END..TS_END + 8].copy_from_slice(&end.to_le_bytes());
        p[CONTENT_SIZE..CONTENT_SIZE + 8].copy_from_slice(&bits.to_le_bytes());
        p[PACKET_SIZE..PACKET_SIZE + 8].copy_from_slice(&bits.to_le_bytes());
        p[DISCARDED..DISCARDED + 8].copy_from_slice(&discarded.to_le_bytes());
        self.out.write_all(p)
    }

    fn event(&mut self, e: &Event) {
        let ts = if e.ts < self.last_ts || e.ts > self.ceiling {
            self.written.clamped += 1;
            self.last_ts
        } else {
            e.ts
        };
        self.last_ts = ts;
        self.begin_ts.get_or_insert(ts);
        self.written.events += 1;
        let endian = self.region.header.endian;
        let p = &mut self.packet;
        let start = p.len();
        if let Some(t) = self.region.schema.get(e.type_id) {
            p.extend_from_slice(&u16::from(e.type_id).to_le_bytes());
            p.extend_from_slice(&ts.to_le_bytes());
            let mut fits = true;
            for (f, v) in t.fields.iter().zip(t.values(e.payload, endian)) {
                match v {
                    Ok(v) => field(p, f.kind, &v),
                    Err(_) => fits = false,
                }
            }
            if fits {
                if let Some(d) = Debug::of(self.view, e) {
                    field(p, FieldKind::Str, &Value::Str(&d.field_text()));
                }
                return;
            }
            p.truncate(start);
        }
        p.extend_from_slice(&RAW_ID.to_le_bytes());
        p.extend_from_slice(&ts.to_le_bytes());
        p.push(e.type_id);
        let len = u32::try_from(e.payload.len()).unwrap_or(u32::MAX);
        p.extend_from_slice(&len.to_le_bytes());
        p.extend_from_slice(e.payload.get(..len as usize).unwrap_or_default());
    }
}

/// Appends one field in the layout its TSDL declaration gives.
fn field(p: &mut Vec<u8>, kind: FieldKind, v: &Value) {
    // Integers only: text and bytes are written below with their lengths.
    let width = usize::from(kind.size()).clamp(1, 8);
    match *v {
        Value::Unsigned(x) | Value::Ptr(x) => p.extend_from_slice(&x.to_le_bytes()[..width]),
        Value::Signed(x) => p.extend_from_slice(&x.to_le_bytes()[..width]),
        Value::Chars(s) | Value::Str(s) => {
            let text = String::from_utf8_lossy(s);
            if text.contains('\0') {
                p.extend_from_slice(text.replace('\0', "\u{fffd}").as_bytes());
            } else {
                p.extend_from_slice(text.as_bytes());
            }
            p.push(0);
        }
        Value::Bytes(b) => {
            let len = u16::try_from(b.len()).unwrap_or(u16::MAX);
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(b.get(..usize::from(len)).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::Field;

    #[test]
    fn literals_cannot_break_the_metadata() {
        assert_eq!(literal("a\"b\\c\nd\u{e9}"), r#""a\"b\\c?d?""#);
    }

    #[test]
    fn colliding_field_names_are_made_unique() {
        let t = EventType::new(
            40,
            "x".into(),
            ["a", "a", "a_2", "a"]
                .iter()
                .map(|n| Field::new(n.to_string(), FieldKind::U8))
                .collect(),
        );
        assert_eq!(field_names(&t), ["a", "a_2", "a_2_2", "a_3"]);
    }

    #[test]
    fn a_byte_fields_length_and_a_debug_message_collide_with_nothing() {
        let t = EventType::new(
            40,
            "x".into(),
            [
                ("data_length", FieldKind::U32),
                ("data", FieldKind::Bytes),
                ("blob", FieldKind::Bytes),
                ("blob_length", FieldKind::U16),
            ]
            .iter()
            .map(|(n, k)| Field::new(n.to_string(), *k))
            .collect(),
        );
        assert_eq!(
            field_names(&t),
            ["data_length", "data_2", "blob", "blob_length_2"]
        );
        let mut out = String::new();
        event_class(&mut out, &t, 0);
        let members: Vec<&str> = out
            .lines()
            .filter_map(|l| l.trim().strip_suffix(';')?.split_whitespace().last())
            .filter(|m| m.starts_with('_'))
            .map(|m| m.split('[').next().unwrap_or(m))
            .collect();
        let mut unique = members.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(members.len(), unique.len(), "{out}");
    }
}
