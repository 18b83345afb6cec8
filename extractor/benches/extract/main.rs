//! The extractor's throughput and memory, each next to a baseline measured
//! in the same run: `cargo bench -p extractor` (or `cargo xtask bench`).
//!
//! - scan: finding and reading a 64 MiB region in a 4 GiB raw image of
//!   pseudo-random memory (in the page cache), against memcpy bandwidth;
//! - decode: parse, CRC, decode, merge and text (and JSON lines) output of
//!   a dense 64 MiB 4-CPU region, in events per second, against memcpy of
//!   the region;
//! - scaling: the item formats written from the decoded region by one
//!   worker and by every core, and the part that stays serial timed
//!   alone;
//! - writers: parse, decode and each file format written (CTF, Perfetto,
//!   Chrome JSON, trace.dat), against babeltrace2 converting the same CTF
//!   trace to CTF (reading and writing the same format, the nearest like
//!   for like) and to text;
//! - memory: peak RSS of `crashring extract` on sparse raw dumps of 1 GiB
//!   and 16 GiB holding the same 64 MiB region, against the peak RSS of
//!   `crashring --version`;
//! - dense: peak RSS and time of `crashring extract --format text` (to
//!   /dev/null) on dense regions of 256 MiB and 1 GiB, with the sampled
//!   peaks of anonymous memory (what the reader allocates) and of
//!   file-backed memory (the region's snapshot), and of `crashring bundle`
//!   on the 256 MiB one, plain and redacting a quarter of its events; with
//!   `CRASHRING_BENCH_BASELINE` naming another crashring binary (one built
//!   before a change), the same runs of it beside them;
//! - workers: peak RSS and time of `crashring extract` in each output
//!   format on a dense 4 GiB region, by 1, 16 and 64 workers;
//! - export: `crashring export --parquet` of four bundles of dense
//!   regions (their archives read, checked, every JSON line parsed, two
//!   tables written), in events per second, against DuckDB reading the
//!   same JSON lines (unpacked) and converting them to Parquet.
//!
//! Every time is the median of several runs; only ratios are meant to be
//! compared between machines. No figure is printed before the work it
//! times was checked: events written and decoded, the region found and
//! read whole, every output read back with the count it must hold, every
//! process exited successfully. Scratch files go to
//! `CRASHRING_BENCH_DIR`, or the target directory's tmp.

mod export;
mod rss;
mod scaling;
mod scan;
mod writers;

use export::export_bench;
use extractor::output::select::Selection;
use extractor::output::{write_items, Format, RegionView, Writer};
use pstore_ring::read::{HeaderTrust, LossKind, PagedTrace, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use rss::{dense_bench, memory_bench, rss_probe, workers_bench, RSS_PROBE};
use scaling::scaling_bench;
use scan::{scan_bench, snapshot_bench};
use std::hint::black_box;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use writers::writers_bench;

pub(crate) const RUNS: usize = 5;
pub(crate) const MIB: u64 = 1 << 20;
pub(crate) const GIB: u64 = 1 << 30;
pub(crate) const REGION: usize = 64 << 20;
/// Events written into the dense region: enough to wrap every ring about
/// twice, so pages are all full.
pub(crate) const WRITTEN: u64 = 6_000_000;

/// What the dense region holds, checked once and then expected of every
/// output.
#[derive(Clone, Copy)]
pub(crate) struct Counts {
    events: u64,
    /// Events and losses: what a merge yields and each output writes.
    items: u64,
}

pub(crate) fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..runs).map(|_| f()).collect();
    t.sort();
    t[runs / 2]
}

pub(crate) fn per_sec(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64()
}

/// RAM-to-RAM copy bandwidth over buffers far bigger than the caches.
pub(crate) fn memcpy_bandwidth() -> f64 {
    let src = vec![0x5Au8; 256 << 20];
    let mut dst = vec![0u8; src.len()];
    let d = median(RUNS, || {
        let start = Instant::now();
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
        start.elapsed()
    });
    per_sec(src.len() as u64, d)
}

/// A 4-CPU region of `size` bytes filled to the brim with a realistic
/// mix: IRQ entry and exit, scheduler switches, printk lines; as many
/// events per byte as [`WRITTEN`] in [`REGION`], so every ring wraps about
/// twice.
pub(crate) fn dense_region(size: usize) -> (Vec<u8>, Counts) {
    region_of(size, WRITTEN * (size / REGION) as u64)
}

/// A 4-CPU region of `size` bytes holding `written` events of
/// [`dense_region`]'s mix.
pub(crate) fn region_of(size: usize, written: u64) -> (Vec<u8>, Counts) {
    booted_region(size, written, None)
}

/// [`region_of`], of boot `boot` when given: its own boot id, host
/// name and wall clock (a day after boot `boot - 1`'s), so that each
/// boot's bundle is another crash's.
pub(crate) fn booted_region(size: usize, written: u64, boot: Option<u8>) -> (Vec<u8>, Counts) {
    let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
    let host = boot.map(|b| format!("bench-{b}")).unwrap_or_default();
    let mut cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        ..Default::default()
    };
    if let Some(b) = boot {
        cfg.boot_id = [b; 16];
        cfg.hostname = &host;
        cfg.wall_offset_ns = 1_790_000_000_000_000_000 + i64::from(b) * 86_400_000_000_000;
    }
    let mut buf = vec![0u8; size];
    let def = |id| schema::builtin(id).expect("built-in event type");
    let (entry, exit, switch, printk) = (
        def(schema::EVENT_IRQ_ENTRY),
        def(schema::EVENT_IRQ_EXIT),
        def(schema::EVENT_SCHED_SWITCH),
        def(schema::EVENT_PRINTK),
    );
    let mut f = write::format(&mut buf, &cfg).expect("region fits");
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    let mut t = 1_000_000u64;
    for i in 0..written {
        t += 37;
        let w = &mut ws[(i % 4) as usize];
        let written = match i % 8 {
            0 | 4 => w.write_event(t, entry, &[Value::Unsigned(11), Value::Str(b"timer")]),
            1 | 5 => w.write_event(t, exit, &[Value::Unsigned(11), Value::Unsigned(1)]),
            2 | 6 => w.write_event(
                t,
                switch,
                &[
                    Value::Signed(1000 + (i % 97) as i64),
                    Value::Signed(120),
                    Value::Unsigned(1),
                    Value::Signed(0),
                    Value::Signed(120),
                    Value::Chars(b"kworker/2:1"),
                    Value::Chars(b"swapper/2"),
                ],
            ),
            _ => w.write_event(
                t,
                printk,
                &[
                    Value::Unsigned(6),
                    Value::Unsigned(0),
                    Value::Unsigned(2),
                    Value::Unsigned(i),
                    Value::Str(b"drm: [CRTC:51:crtc-0] vblank wait timed out"),
                ],
            ),
        };
        written.expect("the writer records every event");
    }
    ws.iter_mut().for_each(|w| w.close());
    let trace = Region::parse(&buf, HeaderTrust::Checksummed)
        .expect("bench region parses")
        .decode_paged();
    // The rings keep the newest events; every other one must be accounted
    // for as overwritten, so the benches time a region as written.
    let overwritten: u64 = trace
        .streams
        .iter()
        .map(|s| s.lost(LossKind::Overwritten))
        .sum();
    let events = trace.event_count() as u64;
    assert!(events > 0, "no event decoded");
    assert_eq!(
        events + overwritten,
        written,
        "events decoded + overwritten"
    );
    assert_eq!(trace.lost_events(), overwritten, "events lost otherwise");
    let losses: usize = trace.streams.iter().map(|s| s.losses.len()).sum();
    let items = events + losses as u64;
    (buf, Counts { events, items })
}

pub(crate) fn decode_bench(region: &[u8], counts: Counts, memcpy: f64) {
    let Counts { events, items } = counts;
    println!(
        "\ndecode: {} MiB region, 4 CPUs, {events} events (IRQ entry/exit, sched_switch, printk)",
        region.len() >> 20
    );
    let d = median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = region.decode_paged();
        let merged = black_box(pstore_ring::merge::merge_pages(&trace.streams).count());
        let took = start.elapsed();
        assert_eq!(merged as u64, items, "items merged");
        took
    });
    println!(
        "  parse + CRC + decode + merge, one thread, no output: {:.1} M events/s; region at {:.0} MiB/s vs memcpy: ratio {:.3}",
        per_sec(events, d) / 1e6,
        per_sec(region.len() as u64, d) / MIB as f64,
        per_sec(region.len() as u64, d) / memcpy
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for format in [Format::Text, Format::Jsonl] {
        let mut bytes = 0u64;
        let d = median(RUNS, || {
            let mut sink = Counter::default();
            let start = Instant::now();
            let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
                .expect("bench region parses");
            let trace = extractor::recover::decode(&region, &|_| {});
            let mut out = BufWriter::with_capacity(1 << 16, &mut sink);
            let Writer::Items(writer) = format.writer() else {
                unreachable!("text and JSON lines are written item by item")
            };
            write_items(
                &mut out,
                &view(&region, &trace),
                &Selection::default(),
                writer,
            )
            .expect("writing to a counter cannot fail");
            drop(out);
            let took = start.elapsed();
            // Both formats write one line per item.
            assert_eq!(sink.lines, items, "{format:?} lines written");
            bytes = sink.bytes;
            took
        });
        println!(
            "  parse + CRC + decode + merge + {format:?}, {threads} threads: {:.1} M events/s, {:.0} MiB/s of output; \
             region at {:.0} MiB/s vs memcpy {:.0} MiB/s: ratio {:.3}",
            per_sec(events, d) / 1e6,
            per_sec(bytes, d) / MIB as f64,
            per_sec(region.len() as u64, d) / MIB as f64,
            memcpy / MIB as f64,
            per_sec(region.len() as u64, d) / memcpy
        );
    }
}

/// A region and its trace as the writers take them.
pub(crate) fn view<'r, 'a>(
    region: &'r Region<'a>,
    trace: &'r PagedTrace<'a>,
) -> RegionView<'r, 'a> {
    RegionView::alone(region, trace, pstore_ring::kprintf::Pointers::Hidden)
}

/// A sink that only counts bytes and lines, so output cost is formatting,
/// not storage.
#[derive(Default)]
pub(crate) struct Counter {
    bytes: u64,
    lines: u64,
}

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len() as u64;
        self.lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(crate) fn scratch_dir() -> PathBuf {
    let dir = std::env::var_os("CRASHRING_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    dir
}

fn main() {
    if let Ok(args) = std::env::var(RSS_PROBE) {
        return rss_probe(&args);
    }
    // `cargo test --benches` runs this with --bench absent; skip the work.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = scratch_dir();
    let memcpy = memcpy_bandwidth();
    println!("memcpy baseline: {:.0} MiB/s", memcpy / MIB as f64);
    // `cargo bench -p extractor -- decode` runs only the benches named.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let (region, counts) = dense_region(REGION);
    if wanted("decode") {
        decode_bench(&region, counts, memcpy);
    }
    if wanted("scaling") {
        scaling_bench(&region, counts);
    }
    if wanted("memory") {
        memory_bench(&dir, &region, counts);
    }
    if wanted("writers") {
        writers_bench(&dir, &region, counts);
    }
    if wanted("scan") {
        scan_bench(&dir, &region, memcpy);
    }
    if wanted("snapshot") {
        snapshot_bench(&dir, &region, counts, memcpy);
    }
    drop(region);
    if wanted("export") {
        export_bench(&dir);
    }
    if wanted("dense") {
        dense_bench(&dir);
    }
    if wanted("workers") {
        workers_bench(&dir);
    }
}
