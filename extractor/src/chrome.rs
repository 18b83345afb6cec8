//! `crashring extract --format chrome`: Chrome trace event JSON, the
//! simple fallback that ui.perfetto.dev, chrome://tracing and Trace
//! Compass open, and that other logs (a compositor's timeline) are easily
//! merged with.
//!
//! - The array form, one event per line, so a truncated file still loads.
//! - A process per region's kernel (`pid` 1, 3, 5, ... by region) with a
//!   thread per CPU (`tid` = CPU), and a process per user stream (its
//!   `pid` when known); `M` events name them.
//! - Every event is an instant (`"ph":"i"`, thread scope) named by its
//!   type, or for printk lines, markers and crashes by their text; fields
//!   are `args`. Each loss is an instant "N events lost (reason)".
//! - `ts` is microseconds on the region's clock (CLOCK_MONOTONIC), written
//!   with three decimals so nanoseconds survive.

use crate::jsonl::{reason, write_fields, write_hex, write_string, write_u64};
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Item;
use pstore_ring::read::{Region, StreamInfo, Trace};
use std::fmt;
use std::io::{self, Write};

fn kernel_pid(region_index: usize) -> u64 {
    2 * region_index as u64 + 1
}

/// (pid, tid) of a stream's events.
fn ids(region_index: usize, info: &StreamInfo) -> (u64, u64) {
    let kernel_pid = kernel_pid(region_index);
    if info.kind == STREAM_KERNEL_CPU {
        (kernel_pid, info.cpu.into())
    } else if info.pid != 0 {
        (info.pid.into(), info.pid.into())
    } else {
        (kernel_pid + 1, 100_000 + u64::from(info.index))
    }
}

/// Starts the array (for the first region) and names the region's
/// processes and threads; its items follow as [`write_item`] lines, and
/// [`end`] closes the array.
pub fn begin(
    out: &mut impl Write,
    region: &Region,
    trace: &Trace,
    region_index: usize,
) -> io::Result<()> {
    let mut lines = String::with_capacity(1024);
    if region_index == 0 {
        lines.push_str("[\n");
    }
    let h = &region.header;
    let kernel_pid = kernel_pid(region_index);
    let name = format!("kernel {} ({})", h.kernel_release, h.hostname);
    let failed = |_| io::Error::other("formatting metadata failed");
    metadata(&mut lines, "process_name", kernel_pid, None, &name).map_err(failed)?;
    for st in &trace.streams {
        let (pid, tid) = ids(region_index, &st.info);
        if pid != kernel_pid {
            metadata(&mut lines, "process_name", pid, None, &st.info.label()).map_err(failed)?;
        }
        metadata(&mut lines, "thread_name", pid, Some(tid), &st.info.label()).map_err(failed)?;
    }
    out.write_all(lines.as_bytes())
}

pub fn end(out: &mut impl Write) -> io::Result<()> {
    // Every event line ends in a comma; an empty object keeps it valid.
    out.write_all(b"{}\n]\n")
}

/// One item as one line (without the newline), ending in a comma.
pub fn write_item(
    out: &mut impl fmt::Write,
    item: &Item,
    region: &Region,
    region_index: usize,
) -> fmt::Result {
    let info = region.streams.iter().find(|s| s.index == item.stream());
    let (pid, tid) = info.map_or((kernel_pid(region_index), 0), |i| ids(region_index, i));
    match item {
        Item::Event(e) => event(out, region, e, pid, tid),
        Item::Loss(l) => {
            let ts = l.before_ts.or(l.after_ts).unwrap_or(0);
            let name = format!(
                "{} events lost ({})",
                l.events,
                pstore_ring::text::loss_kind_name(l.kind)
            );
            instant(out, name.as_bytes(), "loss", ts, pid, tid)?;
            write!(
                out,
                ",\"args\":{{\"events\":{},\"pages\":{},\"reason\":\"{}\"}}}},",
                l.events,
                l.pages,
                reason(l.kind)
            )
        }
    }
}

fn metadata(
    out: &mut impl fmt::Write,
    what: &str,
    pid: u64,
    tid: Option<u64>,
    name: &str,
) -> fmt::Result {
    write!(out, "{{\"ph\":\"M\",\"name\":\"{what}\",\"pid\":{pid}")?;
    if let Some(tid) = tid {
        write!(out, ",\"tid\":{tid}")?;
    }
    out.write_str(",\"args\":{\"name\":")?;
    write_string(out, name.as_bytes())?;
    out.write_str("}},\n")
}

/// The common part of an instant, up to (not including) its `args`.
fn instant(
    out: &mut impl fmt::Write,
    name: &[u8],
    cat: &str,
    ts: u64,
    pid: u64,
    tid: u64,
) -> fmt::Result {
    out.write_str("{\"ph\":\"i\",\"s\":\"t\",\"name\":")?;
    write_string(out, name)?;
    out.write_str(",\"cat\":\"")?;
    out.write_str(cat)?;
    out.write_str("\",\"ts\":")?;
    write_u64(out, ts / 1000)?;
    let fraction = ts % 1000;
    out.write_str(if fraction < 10 {
        ".00"
    } else if fraction < 100 {
        ".0"
    } else {
        "."
    })?;
    write_u64(out, fraction)?;
    out.write_str(",\"pid\":")?;
    write_u64(out, pid)?;
    out.write_str(",\"tid\":")?;
    write_u64(out, tid)
}

fn event(
    out: &mut impl fmt::Write,
    region: &Region,
    e: &pstore_ring::read::Event,
    pid: u64,
    tid: u64,
) -> fmt::Result {
    let ty = region.schema.get(e.type_id);
    let values = ty.and_then(|t| t.decode(e.payload, region.header.endian).ok());
    let (Some(t), Some(values)) = (ty, values) else {
        let name = format!("crashring_raw type {}", e.type_id);
        instant(out, name.as_bytes(), "raw", e.ts, pid, tid)?;
        out.write_str(",\"args\":{\"payload\":")?;
        write_hex(out, e.payload)?;
        return out.write_str("}},");
    };
    let name = crate::perfetto::instant_name(e.type_id, t, &values);
    instant(out, name, &t.name, e.ts, pid, tid)?;
    out.write_str(",\"args\":")?;
    write_fields(out, t, &values)?;
    out.write_str("},")
}
