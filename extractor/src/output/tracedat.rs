//! `crashring extract --format tracedat -o FILE`: trace-cmd's `trace.dat`
//! version 6, for `trace-cmd report` and KernelShark (trace-cmd.dat.v6(5);
//! research notes output-formats.md §3).
//!
//! - Each ring stream is a "CPU" of the file: kernel streams keep their
//!   CPU number, user streams come after the highest one, and their pid
//!   and name go into the saved command lines. Empty streams
//!   (`RegionView::shown_streams`) have none: a pool's free user streams
//!   would be empty CPUs.
//! - Each event type becomes an event of the `crashring` system, with
//!   tracefs-style format text: the four common fields, then the type's
//!   fields (fixed ones in place, strings as `__data_loc`), and a print
//!   format that prints `name=value` like `crashring extract`'s text.
//!   Byte arrays are stored as their hex text. Records whose type is
//!   unknown or whose payload does not fit become `crashring_raw`
//!   (type id and payload in hex), so nothing decoded is left out.
//!   Text is stored as `crashring extract` prints it (controls, line
//!   breaks and bytes that are not UTF-8 as `\xNN`): `trace-cmd report`
//!   prints strings as they are, and a user stream's text must not start
//!   a line of its own or drive the terminal.
//! - Events are re-encoded into 4 KiB ring-buffer pages. The first page
//!   after a loss carries the missed-events flag and the count, which
//!   `trace-cmd report` shows as `[N EVENTS DROPPED]` before the page's
//!   first record. A loss that count cannot show (one after a stream's
//!   last event, with no record to follow, or one of unknown size) also
//!   gets a `crashring_loss` record (events, whether exact, pages, kind).
//!   Gaps of 2^27 ns or more get a time-extend record, of 2^59 ns or more
//!   a page of their own.
//! - As in the CTF writer, an event older than its predecessor is written
//!   at its predecessor's time and counted.
//!
//! The file depends only on the input.

use super::debug::Debug;
use super::select::Selection;
use super::{doing, NewFile, WriteError, Written};
use super::{RegionView, StreamView};
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Item;
use pstore_ring::read::{is_debug_type, Event, EventType, Loss, Region, StreamInfo};
use pstore_ring::schema::{FieldKind, Value};
use pstore_ring::text::{push_escaped, push_escaped_within};
use std::fmt::Write as _;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const PAGE: usize = 4096;
/// Page header: `u64` timestamp, `u64` commit (flags in the high bits).
const PAGE_HEADER: usize = 16;
/// `commit` flags: events were lost before this page, and their count is
/// stored as a `u64` after the page's data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// Event header `type_len` values.
const TIME_EXTEND: u32 = 30;
const MAX_DATA_TYPE_LEN: usize = 28;
const DELTA_BITS: u32 = 27;
/// The event id of records shown raw; schema ids are 0..=255.
const RAW_ID: u16 = 256;
/// `crashring_loss`: a loss the missed-events count cannot show.
const LOSS_ID: u16 = 257;
const SYSTEM: &str = "crashring";

const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";

const HEADER_EVENT: &str = "# compressed entry header\n\
\ttype_len    :    5 bits\n\
\ttime_delta  :   27 bits\n\
\tarray       :   32 bits\n\
\n\
\tpadding     : type == 29\n\
\ttime_extend : type == 30\n\
\ttime_stamp : type == 31\n\
\tdata max type_len  == 28\n";

/// The CPU number each stream gets in the file: a kernel stream its CPU's
/// (a CPU's nesting lanes share it), a user stream one past the CPUs.
fn cpu_numbers(streams: &[StreamView]) -> Vec<u32> {
    let first_user = streams
        .iter()
        .filter(|s| s.info().kind == STREAM_KERNEL_CPU)
        .map(|s| u32::from(s.info().cpu) + 1)
        .max()
        .unwrap_or(0);
    let mut next_user = first_user;
    streams
        .iter()
        .map(|s| {
            if s.info().kind == STREAM_KERNEL_CPU {
                u32::from(s.info().cpu)
            } else {
                next_user += 1;
                next_user - 1
            }
        })
        .collect()
}

/// trace-cmd's trace.dat, one file per region.
pub struct Tracedat;

impl super::FileFormat for Tracedat {
    fn needs_output(&self) -> &'static str {
        "writes a file with an index: give it with -o FILE"
    }

    fn region_output(&self, base: &Path, n: usize) -> PathBuf {
        let mut path = base.as_os_str().to_owned();
        path.push(format!(".{n}"));
        PathBuf::from(path)
    }

    fn write(
        &self,
        out: &Path,
        r: &RegionView,
        selection: &Selection,
        _source: &str,
    ) -> Result<Written, WriteError> {
        let file = doing(NewFile::create(out), || {
            format!("creating {}", out.display())
        })?;
        let mut w = io::BufWriter::with_capacity(1 << 16, file);
        let written = write(&mut w, r, selection).and_then(|written| {
            let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
            file.persist().map(|()| written)
        });
        doing(written, || format!("writing {}", out.display()))
    }
}

/// Writes the events of `view` that `selection` admits as a trace.dat
/// file.
pub fn write(
    out: &mut (impl Write + Seek),
    view: &RegionView,
    selection: &Selection,
) -> io::Result<Written> {
    let region = view.region;
    let streams = selection.streams(view);
    let cpus = cpu_numbers(&streams);
    let cpu_count = cpus.iter().max().map_or(0, |m| m + 1);

    let mut h = Vec::with_capacity(64 << 10);
    h.extend_from_slice(b"\x17\x08\x44tracing6\0");
    h.push(0); // little-endian
    h.push(8); // long size
    h.extend_from_slice(&(PAGE as u32).to_le_bytes());
    h.extend_from_slice(b"header_page\0");
    h.extend_from_slice(&(HEADER_PAGE.len() as u64).to_le_bytes());
    h.extend_from_slice(HEADER_PAGE.as_bytes());
    h.extend_from_slice(b"header_event\0");
    h.extend_from_slice(&(HEADER_EVENT.len() as u64).to_le_bytes());
    h.extend_from_slice(HEADER_EVENT.as_bytes());
    h.extend_from_slice(&0u32.to_le_bytes()); // ftrace's own formats
    let formats: Vec<String> = region
        .schema
        .types()
        .map(format_text)
        .chain([raw_format_text(), loss_format_text()])
        .collect();
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(SYSTEM.as_bytes());
    h.push(0);
    h.extend_from_slice(&(formats.len() as u32).to_le_bytes());
    for f in &formats {
        h.extend_from_slice(&(f.len() as u64).to_le_bytes());
        h.extend_from_slice(f.as_bytes());
    }
    h.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
    h.extend_from_slice(&0u32.to_le_bytes()); // printk formats
    let cmdlines = cmdlines(&streams);
    h.extend_from_slice(&(cmdlines.len() as u64).to_le_bytes());
    h.extend_from_slice(cmdlines.as_bytes());
    h.extend_from_slice(&cpu_count.to_le_bytes());
    h.extend_from_slice(b"options  \0");
    h.extend_from_slice(&0u16.to_le_bytes()); // no options
    h.extend_from_slice(b"flyrecord\0");
    // The table of (offset, size) per CPU follows; data starts on a page.
    let table_at = h.len() as u64;
    let data_at = (table_at + 16 * u64::from(cpu_count)).next_multiple_of(PAGE as u64);
    h.resize(data_at as usize, 0);
    out.write_all(&h)?;

    let mut table = vec![(0u64, 0u64); cpu_count as usize];
    let mut written = Written {
        lost_as: "dropped",
        ..Written::default()
    };
    let mut at = data_at;
    for cpu in 0..cpu_count {
        let lanes: Vec<&StreamView> = streams
            .iter()
            .zip(&cpus)
            .filter(|(_, c)| **c == cpu)
            .map(|(st, _)| st)
            .collect();
        if lanes.is_empty() {
            continue;
        }
        let mut pages = Pages::new(view, selection, &mut written);
        pages.streams(&lanes, &mut *out)?;
        let size = pages.count * PAGE as u64;
        table[cpu as usize] = (if size > 0 { at } else { 0 }, size);
        at += size;
    }
    out.seek(SeekFrom::Start(table_at))?;
    let mut t = Vec::with_capacity(table.len() * 16);
    for (offset, size) in table {
        t.extend_from_slice(&offset.to_le_bytes());
        t.extend_from_slice(&size.to_le_bytes());
    }
    out.write_all(&t)?;
    out.seek(SeekFrom::Start(at))?;
    Ok(written)
}

/// `pid comm` lines for the user streams.
fn cmdlines(streams: &[StreamView]) -> String {
    let mut s = String::new();
    for st in streams {
        let i: &StreamInfo = st.info();
        if i.kind != STREAM_KERNEL_CPU && i.pid != 0 {
            // A label holds no space or control byte to break the line.
            let _ = writeln!(s, "{} {}", i.pid, i.label());
        }
    }
    s
}

const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";
/// Bytes of the common fields every record starts with.
const COMMON_SIZE: usize = 8;

/// (C type, signed, printf conversion) of a fixed-size field kind (an
/// array of `char` for `chars`); `None` for the kinds stored as
/// `__data_loc` strings.
fn c_type(kind: FieldKind) -> Option<(&'static str, bool, &'static str)> {
    Some(match kind {
        FieldKind::U8 => ("unsigned char", false, "%u"),
        FieldKind::U16 => ("unsigned short", false, "%u"),
        FieldKind::U32 => ("unsigned int", false, "%u"),
        FieldKind::U64 => ("unsigned long long", false, "%llu"),
        FieldKind::I8 => ("signed char", true, "%d"),
        FieldKind::I16 => ("short", true, "%d"),
        FieldKind::I32 => ("int", true, "%d"),
        FieldKind::I64 => ("long long", true, "%lld"),
        FieldKind::Ptr => ("unsigned long", false, "0x%lx"),
        FieldKind::Chars(_) => ("char", true, "\"%s\""),
        FieldKind::Str | FieldKind::Bytes => return None,
    })
}

/// Bytes a field takes in a record's fixed part: its width, or the
/// `__data_loc` word of a string.
fn stored_size(kind: FieldKind) -> usize {
    match kind.size() {
        0 => 4,
        n => usize::from(n),
    }
}

/// A type's format text, as tracefs shows `events/<system>/<name>/format`.
fn format_text(t: &EventType) -> String {
    let mut f = format!("name: {}\nID: {}\nformat:\n{COMMON}", t.name, t.id);
    let mut offset = COMMON_SIZE;
    let mut print = String::new();
    let mut args = String::new();
    for (i, field) in t.fields.iter().enumerate() {
        let name = &field.name;
        let (conv, arg) = match c_type(field.kind) {
            Some((c, signed, conv)) => {
                let size = stored_size(field.kind);
                let decl = match field.kind {
                    FieldKind::Chars(n) => format!("{c} {name}[{n}]"),
                    _ => format!("{c} {name}"),
                };
                let _ = writeln!(
                    f,
                    "\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:{};",
                    u8::from(signed)
                );
                offset += size;
                (conv, format!("REC->{name}"))
            }
            None => {
                let _ = writeln!(
                    f,
                    "\tfield:__data_loc char[] {name};\toffset:{offset};\tsize:4;\tsigned:1;"
                );
                offset += 4;
                let conv = if field.kind == FieldKind::Str {
                    "\"%s\""
                } else {
                    "%s"
                };
                (conv, format!("__get_str({name})"))
            }
        };
        let sep = if i == 0 { "" } else { " " };
        let _ = write!(print, "{sep}{name}={conv}");
        let _ = write!(args, ", {arg}");
    }
    if is_debug_type(t) {
        // The message, formatted when read (`Debug::field_text`): what
        // `trace-cmd report` prints of the event.
        let _ = writeln!(
            f,
            "\tfield:__data_loc char[] message;\toffset:{offset};\tsize:4;\tsigned:1;"
        );
        print = "%s".into();
        args = ", __get_str(message)".into();
    }
    let _ = write!(f, "\nprint fmt: \"{}\"{args}\n", print.replace('"', "\\\""));
    f
}

fn raw_format_text() -> String {
    format!(
        "name: crashring_raw\nID: {RAW_ID}\nformat:\n{COMMON}\
         \tfield:unsigned char type_id;\toffset:8;\tsize:1;\tsigned:0;\n\
         \tfield:__data_loc char[] payload;\toffset:9;\tsize:4;\tsigned:1;\n\n\
         print fmt: \"type_id=%u payload=%s\", REC->type_id, __get_str(payload)\n"
    )
}

fn loss_format_text() -> String {
    format!(
        "name: crashring_loss\nID: {LOSS_ID}\nformat:\n{COMMON}\
         \tfield:unsigned long long events;\toffset:8;\tsize:8;\tsigned:0;\n\
         \tfield:unsigned long long pages;\toffset:16;\tsize:8;\tsigned:0;\n\
         \tfield:unsigned char exact;\toffset:24;\tsize:1;\tsigned:0;\n\
         \tfield:__data_loc char[] reason;\toffset:25;\tsize:4;\tsigned:1;\n\n\
         print fmt: \"events=%llu exact=%u pages=%llu reason=%s\", REC->events, REC->exact, REC->pages, __get_str(reason)\n"
    )
}

/// Encodes a `crashring_loss` record of `l`: its count (a lower bound
/// unless `exact`), whole pages and kind.
fn loss_record(l: &Loss, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&LOSS_ID.to_le_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&l.events.to_le_bytes());
    out.extend_from_slice(&l.pages.to_le_bytes());
    out.push(u8::from(l.exact));
    out.extend_from_slice(&[0; 4]);
    dynamic(out, 25, |out| {
        out.extend_from_slice(l.kind.name().as_bytes())
    });
}

/// Encodes one event's record: common fields, fixed fields, then the
/// `__data_loc` data; a payload that does not fit its type is encoded as
/// `crashring_raw`.
fn record(view: &RegionView, e: &Event, pid: u32, out: &mut Vec<u8>) {
    let region = view.region;
    out.clear();
    let endian = region.header.endian;
    let ty = region.schema.get(e.type_id);
    let common = |out: &mut Vec<u8>, id: u16| {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&pid.to_le_bytes());
    };
    let Some(t) = ty.filter(|t| t.misfit(e.payload, endian).is_none()) else {
        common(out, RAW_ID);
        out.push(e.type_id);
        out.extend_from_slice(&[0; 4]);
        dynamic(out, 9, |out| pstore_ring::text::hex_bytes(out, e.payload));
        return;
    };
    common(out, u16::from(e.type_id));
    // The fixed part first, a placeholder for each `__data_loc`; then,
    // decoding again rather than allocating, the dynamic data.
    for (f, v) in t.fields.iter().zip(t.values(e.payload, endian)) {
        let size = stored_size(f.kind);
        match v {
            Ok(Value::Unsigned(x) | Value::Ptr(x)) => {
                out.extend_from_slice(&x.to_le_bytes()[..size])
            }
            Ok(Value::Signed(x)) => out.extend_from_slice(&x.to_le_bytes()[..size]),
            // A full array has no NUL; readers stop at the size.
            Ok(Value::Chars(s)) => {
                let at = out.len();
                push_escaped_within(out, s, size);
                out.resize(at + size, 0);
            }
            Ok(Value::Str(_) | Value::Bytes(_)) => out.extend_from_slice(&[0; 4]),
            Err(_) => break,
        }
    }
    let debug = Debug::of(view, e);
    if debug.is_some() {
        out.extend_from_slice(&[0; 4]);
    }
    let mut loc_at = COMMON_SIZE;
    for (f, v) in t.fields.iter().zip(t.values(e.payload, endian)) {
        match v {
            Ok(Value::Str(s)) => dynamic(out, loc_at, |out| push_escaped(out, s)),
            Ok(Value::Bytes(s)) => dynamic(out, loc_at, |out| pstore_ring::text::hex_bytes(out, s)),
            _ => {}
        }
        loc_at += stored_size(f.kind);
    }
    if let Some(d) = debug {
        dynamic(out, loc_at, |out| push_escaped(out, &d.field_text()));
    }
}

/// Appends a `__data_loc` field's data (what `data` appends, then a NUL)
/// and points the word at `loc_at` to it: length in the high half, offset
/// from the record's start in the low.
fn dynamic(out: &mut Vec<u8>, loc_at: usize, data: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    data(out);
    out.push(0);
    // A length that does not fit the word is cut (a record that long
    // cannot fit a page anyway).
    let len = (out.len() - start).min(0xffff);
    out.truncate(start + len);
    let loc = ((len as u32) << 16) | (start as u32 & 0xffff);
    out[loc_at..loc_at + 4].copy_from_slice(&loc.to_le_bytes());
}

/// Builds and writes one stream's ring-buffer pages.
struct Pages<'w, 'r, 'a> {
    view: &'r RegionView<'r, 'a>,
    region: &'r Region<'a>,
    selection: &'r Selection,
    written: &'w mut Written,
    page: Vec<u8>,
    /// Time of the last event written to the page (the page's own time
    /// before the first).
    last_ts: u64,
    /// Events lost before the next page.
    missed: u64,
    count: u64,
}

impl<'w, 'r, 'a> Pages<'w, 'r, 'a> {
    fn new(
        view: &'r RegionView<'r, 'a>,
        selection: &'r Selection,
        written: &'w mut Written,
    ) -> Self {
        Pages {
            view,
            region: view.region,
            selection,
            written,
            page: Vec::with_capacity(PAGE),
            last_ts: 0,
            missed: 0,
            count: 0,
        }
    }

    /// One CPU's buffer from its streams (its nesting lanes, in lane
    /// order), merged by time; at equal times the interrupted lane first.
    fn streams(&mut self, lanes: &[&StreamView], out: &mut impl Write) -> io::Result<()> {
        let mut events: Vec<_> = lanes.iter().map(|st| st.events().peekable()).collect();
        let mut losses: Vec<_> = lanes
            .iter()
            .map(|st| st.losses().iter().peekable())
            .collect();
        let mut rec = Vec::with_capacity(256);
        loop {
            let next = events
                .iter_mut()
                .enumerate()
                .filter_map(|(i, it)| it.peek().map(|e| (e.ts, i)))
                .min();
            let Some((_, i)) = next else { break };
            let Some(e) = events[i].next() else { break };
            while let Some(l) = losses[i].next_if(|l| l.at_index <= e.index) {
                if self.selection.admits(&Item::Loss(l), self.region) {
                    // The events after a loss start a page that says so.
                    self.flush(out)?;
                    self.missed = self.missed.saturating_add(l.events);
                    if !l.exact {
                        self.loss(l, &mut rec, out)?;
                    }
                }
            }
            if !self.selection.admits(&Item::Event(&e), self.region) {
                continue;
            }
            let info = lanes[i].info();
            let pid = if info.kind == STREAM_KERNEL_CPU {
                0
            } else {
                info.pid
            };
            record(self.view, &e, pid, &mut rec);
            self.event(e.ts, &rec, out)?;
        }
        // Losses after the last event: trace-cmd shows a page's missed
        // events beside its first record only, so each has a record of
        // its own, on a page that counts them.
        for l in losses.into_iter().flatten() {
            if self.selection.admits(&Item::Loss(l), self.region) {
                self.flush(out)?;
                self.missed = self.missed.saturating_add(l.events);
                self.loss(l, &mut rec, out)?;
            }
        }
        self.flush(out)
    }

    fn start(&mut self, ts: u64) {
        self.page.clear();
        self.page.extend_from_slice(&ts.to_le_bytes());
        self.page.extend_from_slice(&[0; 8]);
        self.last_ts = ts;
    }

    /// Room left for records, keeping 8 bytes for a missed-events count.
    fn room(&self) -> usize {
        let reserve = if self.missed > 0 { 8 } else { 0 };
        PAGE - reserve - self.page.len()
    }

    /// Writes `l`'s `crashring_loss` record at its time (or the stream's
    /// latest, never before it: a loss moves no event's count).
    fn loss(&mut self, l: &Loss, rec: &mut Vec<u8>, out: &mut impl Write) -> io::Result<()> {
        loss_record(l, rec);
        let ts = Item::Loss(l).time().max(self.last_ts);
        self.put(ts, rec, out).map(drop)
    }

    fn event(&mut self, ts: u64, rec: &[u8], out: &mut impl Write) -> io::Result<()> {
        let ts = if ts < self.last_ts {
            self.written.clamped += 1;
            self.last_ts
        } else {
            ts
        };
        if self.put(ts, rec, out)? {
            self.written.events += 1;
        }
        Ok(())
    }

    /// Puts a record on the page (a new one when it does not fit);
    /// `false` when no page can hold it: counted as missed.
    fn put(&mut self, ts: u64, rec: &[u8], out: &mut impl Write) -> io::Result<bool> {
        let padded = rec.len().next_multiple_of(4);
        let header = if padded / 4 <= MAX_DATA_TYPE_LEN {
            4
        } else {
            8
        };
        let need = |page: &Self| {
            let extend = if ts - page.last_ts >= 1 << DELTA_BITS {
                8
            } else {
                0
            };
            extend + header + padded
        };
        // A time extend carries 59 bits of delta (27 and a 32-bit word):
        // a larger step starts a page, whose header holds the whole time.
        let beyond_extend = ts - self.last_ts >= 1 << (DELTA_BITS + 32);
        if self.page.is_empty() || beyond_extend || need(self) > self.room() {
            self.flush(out)?;
            self.start(ts);
        }
        if need(self) > self.room() {
            // Larger than a page can hold: counted as missed.
            self.missed += 1;
            return Ok(false);
        }
        let mut delta = ts - self.last_ts;
        if delta >= 1 << DELTA_BITS {
            let low = (delta & ((1 << DELTA_BITS) - 1)) as u32;
            self.page
                .extend_from_slice(&(TIME_EXTEND | low << 5).to_le_bytes());
            self.page
                .extend_from_slice(&((delta >> DELTA_BITS) as u32).to_le_bytes());
            delta = 0;
        }
        let delta = delta as u32;
        if header == 4 {
            self.page
                .extend_from_slice(&((padded / 4) as u32 | delta << 5).to_le_bytes());
        } else {
            self.page.extend_from_slice(&(delta << 5).to_le_bytes());
            self.page
                .extend_from_slice(&((padded + 4) as u32).to_le_bytes());
        }
        self.page.extend_from_slice(rec);
        self.page.resize(self.page.len() + padded - rec.len(), 0);
        self.last_ts = ts;
        Ok(true)
    }

    /// Completes the page (commit, missed events) and writes it.
    fn flush(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.page.is_empty() {
            return Ok(());
        }
        let mut commit = (self.page.len() - PAGE_HEADER) as u64;
        if self.missed > 0 {
            let missed = self.missed;
            commit |= MISSED_EVENTS | MISSED_STORED;
            self.page.extend_from_slice(&missed.to_le_bytes());
            self.written.lost = self.written.lost.saturating_add(missed);
            self.missed = 0;
        }
        self.page[8..16].copy_from_slice(&commit.to_le_bytes());
        self.page.resize(PAGE, 0);
        out.write_all(&self.page)?;
        self.page.clear();
        self.count += 1;
        Ok(())
    }
}
