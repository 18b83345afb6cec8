//! `crashring extract --format chrome`: Chrome trace event JSON, the
//! simple fallback that ui.perfetto.dev, chrome://tracing and Trace
//! Compass open, and that other logs (a compositor's timeline) are easily
//! merged with.
//!
//! - The array form, one event per line, so a truncated file still loads.
//! - A process per region's kernel (`pid` 1, 3, 5, ... by region) with a
//!   thread per CPU (`tid` = CPU), and a process per user stream (its
//!   `pid` when known); `M` events name them, for every stream but the
//!   empty ones (`RegionView::shown_streams`).
//! - Every event is an instant (`"ph":"i"`, thread scope) named by its
//!   type, or for printk lines, markers and crashes by their text; fields
//!   are `args`. Each loss is an instant "N events lost (reason)".
//! - `ts` is microseconds on the region's clock (CLOCK_MONOTONIC), written
//!   with three decimals so nanoseconds survive.

use super::debug::Debug;
use super::RegionView;
use crate::output::jsonl::{write_fields, write_hex, write_string, write_u64};
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::{Item, Pulled};
use pstore_ring::ras;
use pstore_ring::read::{Event, StreamInfo};
use pstore_ring::schema::Value;
use std::io::{self, Write};

/// Pids and tids made up for what has none of its own lie above every
/// Linux pid (`PID_MAX_LIMIT`, 2^22), so that no user stream's real pid
/// meets them.
const MADE_UP: u64 = 1 << 22;

fn kernel_pid(region_index: usize) -> u64 {
    MADE_UP + 2 * region_index as u64 + 1
}

/// (pid, tid) of a stream's events: a thread of its own for each stream
/// (the viewer names a thread once). A kernel CPU's thread is its number,
/// a nesting lane's its number after the lane's hundred thousands; a user
/// stream is a thread of its process (or, without a pid, of one process
/// for them all).
fn ids(region_index: usize, info: &StreamInfo) -> (u64, u64) {
    let kernel_pid = kernel_pid(region_index);
    let own = MADE_UP + u64::from(info.index);
    if info.kind == STREAM_KERNEL_CPU {
        let tid = u64::from(info.lane) * 100_000 + u64::from(info.cpu);
        (kernel_pid, tid)
    } else if info.pid != 0 {
        (info.pid.into(), own)
    } else {
        (kernel_pid + 1, own)
    }
}

/// The Chrome trace event format.
pub struct Chrome;

impl super::ItemFormat for Chrome {
    fn begin(&self, out: &mut dyn Write, region: &RegionView, _several: bool) -> io::Result<()> {
        begin(out, region)
    }

    fn items(&self, out: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
        write_items(out, items, view);
    }

    fn end(&self, out: &mut dyn Write) -> io::Result<()> {
        // Every event line ends in a comma; an empty object keeps it valid.
        out.write_all(b"{}\n]\n")
    }
}

/// Starts the array (for the first region) and names the region's
/// processes and threads; its items follow as [`write_items`] lines, and
/// [`Chrome::end`] closes the array.
fn begin(out: &mut dyn Write, view: &RegionView) -> io::Result<()> {
    let (region, region_index) = (view.region, view.index);
    let mut lines = Vec::with_capacity(1024);
    if region_index == 0 {
        lines.extend_from_slice(b"[\n");
    }
    let h = &region.header;
    let kernel_pid = kernel_pid(region_index);
    let name = format!("kernel {} ({})", h.kernel_release, h.hostname);
    metadata(&mut lines, "process_name", kernel_pid, None, &name);
    // Named for the streams the view shows: an empty one has no event
    // to put on a thread.
    for st in view.shown_streams() {
        let info = st.info();
        let (pid, tid) = ids(region_index, info);
        if pid != kernel_pid {
            metadata(&mut lines, "process_name", pid, None, &info.label());
        }
        metadata(&mut lines, "thread_name", pid, Some(tid), &info.label());
    }
    out.write_all(&lines)
}

/// Each item as one line ending in a comma and a newline.
fn write_items(out: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
    let mut values = Vec::with_capacity(16);
    for item in items {
        write_item(out, &item.as_item(), view, &mut values);
        out.push(b'\n');
    }
}

/// One item as one line (without the newline), ending in a comma;
/// `values` is scratch space.
pub fn write_item<'a>(
    out: &mut Vec<u8>,
    item: &Item<'_, 'a>,
    view: &RegionView<'_, 'a>,
    values: &mut Vec<Value<'a>>,
) {
    let (region, region_index) = (view.region, view.index);
    let info = region.streams.iter().find(|s| s.index == item.stream());
    let (pid, tid) = info.map_or((kernel_pid(region_index), 0), |i| ids(region_index, i));
    match item {
        Item::Event(e) => event(out, view, e, pid, tid, values),
        Item::Loss(l) => {
            let ts = l.before_ts.or(l.after_ts).unwrap_or(0);
            let name = pstore_ring::text::LossLabel(l).to_string();
            instant(out, name.as_bytes(), "loss", ts, pid, tid);
            out.extend_from_slice(b",\"args\":{\"events\":");
            write_u64(out, l.events);
            out.extend_from_slice(b",\"pages\":");
            write_u64(out, l.pages);
            out.extend_from_slice(b",\"reason\":\"");
            out.extend_from_slice(l.kind.name().as_bytes());
            out.extend_from_slice(b"\"}},");
        }
    }
}

fn metadata(out: &mut Vec<u8>, what: &str, pid: u64, tid: Option<u64>, name: &str) {
    out.extend_from_slice(b"{\"ph\":\"M\",\"name\":\"");
    out.extend_from_slice(what.as_bytes());
    out.extend_from_slice(b"\",\"pid\":");
    write_u64(out, pid);
    if let Some(tid) = tid {
        out.extend_from_slice(b",\"tid\":");
        write_u64(out, tid);
    }
    out.extend_from_slice(b",\"args\":{\"name\":");
    write_string(out, name.as_bytes());
    out.extend_from_slice(b"}},\n");
}

/// The common part of an instant, up to (not including) its `args`.
fn instant(out: &mut Vec<u8>, name: &[u8], cat: &str, ts: u64, pid: u64, tid: u64) {
    out.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"t\",\"name\":");
    write_string(out, name);
    out.extend_from_slice(b",\"cat\":\"");
    out.extend_from_slice(cat.as_bytes());
    out.extend_from_slice(b"\",\"ts\":");
    write_u64(out, ts / 1000);
    let fraction = ts % 1000;
    out.extend_from_slice(if fraction < 10 {
        b".00"
    } else if fraction < 100 {
        b".0"
    } else {
        b"."
    });
    write_u64(out, fraction);
    out.extend_from_slice(b",\"pid\":");
    write_u64(out, pid);
    out.extend_from_slice(b",\"tid\":");
    write_u64(out, tid);
}

fn event<'a>(
    out: &mut Vec<u8>,
    view: &RegionView<'_, 'a>,
    e: &Event<'a>,
    pid: u64,
    tid: u64,
    values: &mut Vec<Value<'a>>,
) {
    let region = view.region;
    let ty = region.schema.get(e.type_id);
    let Some(t) = ty.filter(|t| {
        t.decode_into(e.payload, region.header.endian, values)
            .is_ok()
    }) else {
        let name = format!("crashring_raw type {}", e.type_id);
        instant(out, name.as_bytes(), "raw", e.ts, pid, tid);
        out.extend_from_slice(b",\"args\":{\"payload\":");
        write_hex(out, e.payload);
        out.extend_from_slice(b"}},");
        return;
    };
    let debug = Debug::of(view, e);
    match &debug {
        Some(d) => instant(out, &d.name(), &t.name, e.ts, pid, tid),
        None => {
            let name = crate::output::perfetto::instant_name(e.type_id, t, values);
            instant(out, name, &t.name, e.ts, pid, tid)
        }
    }
    out.extend_from_slice(b",\"args\":");
    write_fields(out, t, values);
    // The message's keys, or a hardware error's words, go inside the args
    // object.
    if let Some(d) = &debug {
        out.pop();
        d.write_json(out);
        out.push(b'}');
    }
    if let Some(words) = ras::describe(t, e.payload, region.header.endian) {
        out.pop();
        out.extend_from_slice(b",\"described\":");
        write_string(out, words.as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b"},");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(index: u16, kind: u16, cpu: u16, lane: u8, pid: u32) -> StreamInfo {
        StreamInfo {
            index,
            kind,
            cpu,
            lane,
            page_count: 1,
            pages_offset: 0,
            name: String::new(),
            pid,
            uid: 0,
            keeps_tails: true,
        }
    }

    #[test]
    fn every_stream_is_a_thread_of_its_own() {
        let user = STREAM_KERNEL_CPU + 1;
        let streams = [
            stream(0, STREAM_KERNEL_CPU, 0, 0, 0),
            stream(1, STREAM_KERNEL_CPU, 0, 1, 0),
            stream(2, STREAM_KERNEL_CPU, 1, 0, 0),
            // Two threads of one process, and init's.
            stream(3, user, 0, 0, 412),
            stream(4, user, 0, 0, 412),
            stream(5, user, 0, 0, 1),
            stream(6, user, 0, 0, 0),
        ];
        let mut ids: Vec<(u64, u64)> = streams.iter().map(|s| ids(0, s)).collect();
        assert_eq!(ids[0], (kernel_pid(0), 0));
        assert_eq!(ids[2], (kernel_pid(0), 1));
        assert_eq!(ids[3].0, 412);
        assert_eq!(ids[5].0, 1);
        assert_ne!(kernel_pid(0), 1);
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), streams.len());
    }
}
