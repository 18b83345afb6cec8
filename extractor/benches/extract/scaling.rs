//! How the item writers scale with workers: the dense region, decoded
//! once, written as text, JSON lines, Chrome JSON and Perfetto with one
//! worker and with every core, and the part that stays on one thread
//! timed on its own (cutting the timeline into windows, writing the
//! windows' texts out), with the speedup it leaves possible (Amdahl).

use crate::{median, view, Counts, RUNS};
use extractor::output::select::Selection;
use extractor::output::{windows, write_items, Format, Writer};
use pstore_ring::read::{HeaderTrust, Region};
use std::hint::black_box;
use std::io::{self, BufWriter, Write};
use std::time::{Duration, Instant};

/// What a worker hands over at once (as `output/items.rs`).
const PIECE: usize = 1 << 20;

pub(crate) fn scaling_bench(region: &[u8], counts: Counts) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = |workers| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .build()
            .expect("a thread pool")
    };
    println!(
        "\nscaling: the decoded {} MiB region ({} events) written by 1 and {cores} workers",
        region.len() >> 20,
        counts.events
    );
    let region = Region::parse(region, HeaderTrust::Checksummed).expect("bench region parses");
    let decode = |workers| {
        pool(workers).install(|| {
            median(RUNS, || {
                let start = Instant::now();
                let trace = extractor::recover::decode(black_box(&region), &|_| {});
                let took = start.elapsed();
                assert_eq!(trace.event_count() as u64, counts.events, "events decoded");
                took
            })
        })
    };
    let (one, all) = (decode(1), decode(cores));
    println!(
        "  decode (a stream per worker): 1 worker {:.0} ms, {cores} workers {:.0} ms: {:.2}x",
        ms(one),
        ms(all),
        one.as_secs_f64() / all.as_secs_f64()
    );
    let trace = extractor::recover::decode(&region, &|_| {});
    let view = view(&region, &trace);
    let selection = Selection::default();
    // Before windows, one thread merged every item for the workers.
    let merge = median(RUNS, || {
        let start = Instant::now();
        let merged = black_box(view.merged().count());
        let took = start.elapsed();
        assert_eq!(merged as u64, counts.items, "items merged");
        took
    });
    println!(
        "  one merge of every item on one thread (what stayed serial before windows): {:.0} ms",
        ms(merge)
    );
    for format in [
        Format::Text,
        Format::Jsonl,
        Format::Chrome,
        Format::Perfetto,
    ] {
        let Writer::Items(writer) = format.writer() else {
            unreachable!("{format:?} is written item by item")
        };
        let output = |workers| {
            let mut out = Vec::new();
            pool(workers)
                .install(|| write_items(&mut out, &view, &selection, writer))
                .expect("writing to memory");
            out
        };
        // The bytes first: the same whatever the workers.
        let bytes = output(1);
        assert!(
            bytes == output(cores),
            "{format:?}: the same bytes from 1 and {cores} workers"
        );
        if matches!(format, Format::Text | Format::Jsonl) {
            let lines = memchr::memchr_iter(b'\n', &bytes).count() as u64;
            assert_eq!(lines, counts.items, "{format:?} lines written");
        }
        let timed = |workers| {
            pool(workers).install(|| {
                median(RUNS, || {
                    let mut sink = Bytes::default();
                    let start = Instant::now();
                    let mut out = BufWriter::with_capacity(1 << 16, &mut sink);
                    write_items(&mut out, &view, &selection, writer).expect("writing to a counter");
                    drop(out);
                    let took = start.elapsed();
                    assert_eq!(sink.0, bytes.len() as u64, "{format:?} bytes written");
                    took
                })
            })
        };
        let (one, all) = (timed(1), timed(cores));
        // What one thread does whatever the workers: the windows' plan,
        // and every byte written out, one window at a time.
        let serial = median(RUNS, || {
            let start = Instant::now();
            black_box(windows(&view, &selection).count());
            let mut sink = Bytes::default();
            let mut out = BufWriter::with_capacity(1 << 16, &mut sink);
            for piece in bytes.chunks(PIECE) {
                out.write_all(black_box(piece))
                    .expect("writing to a counter");
            }
            drop(out);
            start.elapsed()
        });
        let s = serial.as_secs_f64() / one.as_secs_f64();
        let before = merge.as_secs_f64() / one.as_secs_f64();
        println!(
            "  {format:?}: 1 worker {:.0} ms, {cores} workers {:.0} ms: {:.2}x; serial {:.1} ms, {:.1}% of one worker: \
             at most {:.1}x on {cores} cores, {:.0}x on any (before windows: {:.0}% serial, at most {:.1}x on any)",
            ms(one),
            ms(all),
            one.as_secs_f64() / all.as_secs_f64(),
            ms(serial),
            100.0 * s,
            1.0 / (s + (1.0 - s) / cores as f64),
            1.0 / s,
            100.0 * before,
            1.0 / before
        );
    }
}

/// A sink that counts bytes: what stays serial is the extractor's, not a
/// file system's.
#[derive(Default)]
struct Bytes(u64);

impl Write for Bytes {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
