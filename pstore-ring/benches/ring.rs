//! Writer and reader throughput, each next to a baseline measured in the
//! same run: `cargo bench -p pstore-ring` (or `cargo xtask bench`).
//!
//! - writer: ns per event for 8- and 64-byte payloads, against a plain
//!   memcpy of the same record bytes into a ring of the same size;
//! - reader: events per second to parse, CRC-check, decode and merge a
//!   4-CPU region, whole and page by page, against memcpy of the whole
//!   region.
//!
//! Every figure is the median of several runs; only the ratios are meant
//! to be compared between machines.

#[path = "baseline.rs"]
mod baseline;

use pstore_ring::merge::{merge, merge_pages};
use pstore_ring::read::{HeaderTrust, LossKind, Region};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::hint::black_box;
use std::time::{Duration, Instant};

const RUNS: usize = 9;
const PAGE: u32 = 4096;
const PAGES: u32 = 256;
/// Events written into the reader's region, more than it holds.
const WRITTEN: u64 = 4_000_000;

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..RUNS).map(|_| f()).collect();
    t.sort();
    t[RUNS / 2]
}

fn region_buf(streams: usize) -> Vec<u8> {
    vec![0u8; 64 * 1024 + streams * (PAGES * PAGE) as usize]
}

fn config(specs: &[StreamSpec<'static>]) -> RegionConfig<'static> {
    // The specs outlive every use; leaking keeps the signature simple.
    let specs: &'static [StreamSpec<'static>] = Box::leak(specs.to_vec().into_boxed_slice());
    RegionConfig {
        page_size: PAGE,
        pages_per_stream: Some(PAGES),
        streams: specs,
        ..Default::default()
    }
}

/// Writes `n` events of `payload` bytes (the baseline module's type and
/// times) into one stream; returns the time taken, once the region was
/// checked to hold them.
fn write_events(buf: &mut [u8], n: u64, payload: usize) -> Duration {
    let cfg = config(&[StreamSpec::cpu(0)]);
    let data = vec![0xA5u8; payload];
    let mut refused = 0u64;
    let took = {
        let mut f = write::format(buf, &cfg).unwrap();
        let mut w = f.streams.next().unwrap();
        let start = Instant::now();
        for i in 0..n {
            let r = w.write(
                baseline::T0 + i * baseline::STEP,
                baseline::TYPE,
                black_box(&data),
            );
            refused += u64::from(r.is_err());
        }
        w.close();
        start.elapsed()
    };
    assert_eq!(refused, 0, "the writer refused {refused} events");
    baseline::assert_ring_holds(buf, n, &data);
    took
}

/// A full 4-CPU region of `lost` events (one `u64`, 12 bytes a record),
/// how many of them it holds, and how many items (events and losses) a
/// merge of it yields.
fn busy_region() -> (Vec<u8>, u64, u64) {
    let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
    let cfg = config(&specs);
    let mut buf = region_buf(4);
    let lost = pstore_ring::schema::builtin(pstore_ring::schema::EVENT_LOST).unwrap();
    {
        let mut f = write::format(&mut buf, &cfg).unwrap();
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        let mut t = 1_000u64;
        for i in 0..WRITTEN {
            t += 97;
            let w = &mut ws[(i % 4) as usize];
            w.write_event(t, lost, &[pstore_ring::schema::Value::Unsigned(i)])
                .expect("the writer records every event");
        }
        ws.iter_mut().for_each(|w| w.close());
    }
    let trace = Region::parse(&buf, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    // The ring keeps the newest events; the rest must be accounted for as
    // overwritten, so the reader is timed on a region as the writer left it.
    let overwritten: u64 = trace
        .streams
        .iter()
        .map(|s| s.lost(LossKind::Overwritten))
        .sum();
    let events = trace.event_count() as u64;
    assert!(events > 0 && events + overwritten == WRITTEN && trace.lost_events() == overwritten);
    let losses: usize = trace.streams.iter().map(|s| s.losses.len()).sum();
    (buf, events, events + losses as u64)
}

fn main() {
    println!("pstore-ring benchmark (median of {RUNS} runs)\n");
    println!("writer: one stream, {PAGES} pages of {PAGE} bytes, events 300 ns apart");
    let mut buf = region_buf(1);
    let n = 2_000_000u64;
    for payload in [8usize, 64] {
        let w = median(|| write_events(&mut buf, n, payload));
        let ring = (PAGES * PAGE) as usize;
        let m = median(|| baseline::memcpy_records(&mut buf[..ring], PAGE as usize, payload, n));
        let (w_ns, m_ns) = (
            w.as_nanos() as f64 / n as f64,
            m.as_nanos() as f64 / n as f64,
        );
        println!(
            "  {payload:>2}-byte payload: writer {w_ns:6.2} ns/event, memcpy baseline {m_ns:6.2} ns/event, ratio {:.2}x",
            w_ns / m_ns
        );
    }

    let (image, events, items) = busy_region();
    println!(
        "\nreader: 4 streams x {PAGES} pages of {PAGE} bytes ({} MiB), {events} events of 12 bytes",
        image.len() >> 20
    );
    let decode = median(|| {
        let start = Instant::now();
        let region = Region::parse(black_box(&image), HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let merged = merge(&trace.streams).count();
        black_box(merged);
        let took = start.elapsed();
        assert_eq!(merged as u64, items, "the merge lost or added items");
        took
    });
    // The same, decoded page by page: no event vector, each page walked
    // again as the merge reaches it.
    let paged = median(|| {
        let start = Instant::now();
        let region = Region::parse(black_box(&image), HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let merged = merge_pages(&trace.streams).count();
        black_box(merged);
        let took = start.elapsed();
        assert_eq!(merged as u64, items, "the paged merge lost or added items");
        took
    });
    let mut copy = vec![0u8; image.len()];
    let memcpy = median(|| {
        let start = Instant::now();
        copy.copy_from_slice(black_box(&image));
        black_box(&copy);
        start.elapsed()
    });
    assert!(copy == image, "the baseline did not copy");
    let eps = events as f64 / decode.as_secs_f64();
    let mib = |d: Duration| image.len() as f64 / d.as_secs_f64() / (1 << 20) as f64;
    println!(
        "  parse + CRC + decode + merge: {:.1} M events/s ({:.0} MiB/s); memcpy baseline {:.0} MiB/s; ratio {:.3}",
        eps / 1e6,
        mib(decode),
        mib(memcpy),
        mib(decode) / mib(memcpy)
    );
    println!(
        "  the same page by page:        {:.1} M events/s ({:.0} MiB/s); ratio {:.3}",
        events as f64 / paged.as_secs_f64() / 1e6,
        mib(paged),
        mib(paged) / mib(memcpy)
    );
}
