//! Memory and time of reading a large dense region to text, decoded whole
//! (`Region::decode`, every event in a vector) against page by page
//! (`Region::decode_paged` and `merge_pages`):
//!
//! ```text
//! cargo run --release -p pstore-ring --example paged_memory -- [MiB] [streams]
//! ```
//!
//! The region (default 256 MiB over 16 streams of 4 KiB pages) is filled
//! by the Rust writer with small events (mostly 12-byte `lost` records,
//! some `marker`s), every ring wrapped. Each way runs in a child process
//! of its own, so that its peak RSS (`VmHWM`) is its own; a counting
//! allocator gives the heap's peak beyond the region itself, which is what
//! the reader adds. The text is rendered line by line, as the extractor
//! does, into a buffer emptied into `io::sink` every 64 KiB.

use pstore_ring::merge::{merge, merge_pages};
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::text::Line;
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every call is passed on to `System` unchanged; only counters
// are updated around it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const PAGE: u32 = 4096;

/// A region of `mib` MiB over `streams` streams, every ring wrapped.
fn dense_region(mib: usize, streams: u16) -> Vec<u8> {
    let pages = ((mib << 20) / streams as usize / PAGE as usize) as u32;
    let specs: Vec<StreamSpec> = (0..streams).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: PAGE,
        pages_per_stream: Some(pages),
        streams: &specs,
        ..Default::default()
    };
    let mut buf = vec![0u8; 64 * 1024 + streams as usize * pages as usize * PAGE as usize];
    let lost = schema::builtin(schema::EVENT_LOST).unwrap();
    let marker = schema::builtin(schema::EVENT_MARKER).unwrap();
    {
        let mut f = write::format(&mut buf, &cfg).unwrap();
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        // Records take 14.5 bytes on average: one per 8 bytes of the
        // region wraps every ring about twice.
        let n = (mib as u64) << 20 >> 3;
        let mut t = 1_000u64;
        for i in 0..n {
            t += 37;
            let w = &mut ws[(i % u64::from(streams)) as usize];
            let r = if i % 8 == 0 {
                w.write_event(
                    t,
                    marker,
                    &[Value::Unsigned(i), Value::Chars(b"m"), Value::Str(b"dense")],
                )
            } else {
                w.write_event(t, lost, &[Value::Unsigned(i)])
            };
            r.expect("the writer records every event");
        }
        // Half the streams crashed with their page open.
        for (k, w) in ws.iter_mut().enumerate() {
            if k % 2 == 0 {
                w.close();
            }
        }
    }
    buf
}

/// The process's peak resident set, from /proc/self/status.
fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Renders one line per item, flushing to `io::sink` every 64 KiB.
struct Sink {
    out: Vec<u8>,
    lines: u64,
}

impl Sink {
    fn line(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        f(&mut self.out);
        self.out.push(b'\n');
        self.lines += 1;
        if self.out.len() >= 64 * 1024 {
            std::io::sink().write_all(&self.out).unwrap();
            self.out.clear();
        }
    }
}

/// One way of reading, in this process: prints its figures as one line.
fn run(way: &str, mib: usize, streams: u16) {
    let image = dense_region(mib, streams);
    let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let mut sink = Sink {
        out: Vec::with_capacity(128 * 1024),
        lines: 0,
    };
    let start = Instant::now();
    let (events, decoded_at);
    match way {
        "whole" => {
            let trace = region.decode();
            decoded_at = start.elapsed();
            events = trace.event_count();
            let clock = region.wall_clock(&trace);
            std::hint::black_box(clock);
            for item in merge(&trace.streams) {
                sink.line(|out| Line::of(&item, &region).write_to(out));
            }
        }
        _ => {
            let trace = region.decode_paged();
            decoded_at = start.elapsed();
            events = trace.event_count();
            let clock = region.wall_clock_of_pages(&trace);
            std::hint::black_box(clock);
            for item in merge_pages(&trace.streams) {
                sink.line(|out| Line::of(&item.as_item(), &region).write_to(out));
            }
        }
    }
    let total = start.elapsed();
    let heap = PEAK.load(Relaxed) - base;
    println!(
        "{way:5} {:>9} {:>9} {:>9.3} {:>9.3} {:>12.1} {:>11.1} {:>10.1}",
        events,
        sink.lines,
        decoded_at.as_secs_f64(),
        total.as_secs_f64(),
        events as f64 / total.as_secs_f64() / 1e6,
        heap as f64 / (1 << 20) as f64,
        vm_hwm_kib().unwrap_or(0) as f64 / 1024.0,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, child, way, mib, streams] = &args[..] {
        if child == "--child" {
            return run(way, mib.parse().unwrap(), streams.parse().unwrap());
        }
    }
    let mib: usize = args.get(1).map_or(256, |a| a.parse().expect("MiB"));
    let streams: u16 = args.get(2).map_or(16, |a| a.parse().expect("streams"));
    println!(
        "{mib} MiB region, {streams} streams of {PAGE}-byte pages; read to text \
         (region itself: {mib} MiB of the RSS)\n"
    );
    println!(
        "{:5} {:>9} {:>9} {:>9} {:>9} {:>12} {:>11} {:>10}",
        "way", "events", "lines", "decode s", "total s", "M events/s", "heap+ MiB", "VmHWM MiB"
    );
    let exe = std::env::current_exe().unwrap();
    for way in ["whole", "paged"] {
        let status = std::process::Command::new(&exe)
            .args(["--child", way, &mib.to_string(), &streams.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "{way}: {status}");
    }
}
