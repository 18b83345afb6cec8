//! The kernel module's ring code (kernel/crashring_ring.c, built for user
//! space by build.rs): ns per event for 8- and 64-byte payloads, next to a
//! memcpy of the same record bytes into the same ring, measured in the
//! same run. `cargo bench -p qemu-tests` (or `cargo xtask bench`).
//!
//! The user-space build stands in atomics with a lock prefix for the
//! kernel's `local_t` operations, so the kernel's own cost is lower.
//!
//! "durable" is the same writer with every ordered step written back to
//! memory (CLWB, or CLFLUSH where the CPU lacks it) and fenced, as the
//! module does on persistent memory (FORMAT.md section 13): the price of a
//! trace that survives a power cut without eADR. On RAM the write-back
//! reaches DRAM, which is no slower than a real NVDIMM's ADR domain.
//!
//! "a write-back pass every N events" is the plain writer interrupted by
//! the periodic write-back's pass (crashring_write_back_new: the pages
//! written since the last pass and the tails, CLWB or CLFLUSH), far more
//! often than the module's default of once a second.
//!
//! Then a closed page's CRC on this machine's CPU, as the module computes
//! it: format version 2's CRC-32C on SSE4.2's crc32 instruction, against
//! version 1's CRC-32/IEEE from tables (the kernel's `crc32_le()` is
//! slice-by-8; the crc crate's `Table<16>`, slice-by-16, is if anything
//! faster, so the ratio understates), and a memcpy of the page. QEMU's figures cannot say this: TCG runs
//! crc32 in a helper call, and `-icount` counts it as one instruction.

#[path = "../../pstore-ring/benches/baseline.rs"]
mod baseline;
#[path = "../src/cside/c_ffi.rs"]
mod c_ffi;

use c_ffi::{
    cr_test_crc, crashring_close, crashring_set_durable, crashring_write, crashring_write_back_new,
    CRegion, WbMark,
};
use pstore_ring::write::{RegionConfig, StreamSpec};
use std::hint::black_box;
use std::time::{Duration, Instant};

const RUNS: usize = 9;
const PAGE: u32 = 4096;
const PAGES: u32 = 256;
const EVENTS: u64 = 2_000_000;
/// The periodic write-back's pass (default every 1000 ms) run every 50,000
/// events instead: about every millisecond of a writer running flat out,
/// a thousand times its default rate, so its cost shows.
const PASS_EVERY: u64 = 50_000;

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..RUNS).map(|_| f()).collect();
    t.sort();
    t[RUNS / 2]
}

/// The writer, durable or not, with the periodic write-back's pass run
/// every `pass_every` events (0: never), in the same thread.
fn c_writer(payload: usize, durable: bool, pass_every: u64) -> Duration {
    let specs = [StreamSpec::cpu(0)];
    let rc = RegionConfig {
        page_size: PAGE,
        pages_per_stream: Some(PAGES),
        streams: &specs,
        ..Default::default()
    };
    let mut region = CRegion::format(&rc, 64 * 1024 + (PAGES * PAGE) as usize).expect("format");
    let s = region.stream(0);
    unsafe { crashring_set_durable(s, durable) };
    let data = vec![0xA5u8; payload];
    let start = Instant::now();
    let mut refused = 0u64;
    let mut mark = WbMark::default();
    for i in 0..EVENTS {
        if pass_every != 0 && i % pass_every == 0 {
            black_box(unsafe { crashring_write_back_new(s, &mut mark) });
        }
        let rc = unsafe {
            crashring_write(
                s,
                baseline::T0 + i * baseline::STEP,
                baseline::TYPE,
                black_box(data.as_ptr()).cast(),
                payload as u32,
            )
        };
        refused += u64::from(rc != 0);
    }
    unsafe { crashring_close(s) };
    let took = start.elapsed();
    // A writer that refused events would look faster: none may be refused.
    assert_eq!(refused, 0, "the C writer refused {refused} events");
    // Nor may it lose or garble what it accepted.
    baseline::assert_ring_holds(region.bytes(), EVENTS, &data);
    took
}

/// Page CRCs per timing, to time more than the clock's resolution.
const CRC_PAGES: usize = 20_000;

/// ns per 4 KiB page for each way: (module's CRC-32C, IEEE slice-by-8, memcpy).
fn page_crc() -> (f64, f64, f64) {
    const IEEE: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);
    let page: Vec<u8> = (0..PAGE).map(|i| (i * 7 + 3) as u8).collect();
    // The module's loop is the format's CRC: it must agree with the reader's.
    let c_crc = unsafe { cr_test_crc(page.as_ptr().cast(), page.len()) };
    assert_eq!(c_crc, pstore_ring::layout::crc32(&[&page]));
    let mut copy = vec![0u8; page.len()];
    let per_page = |d: Duration| d.as_nanos() as f64 / CRC_PAGES as f64;
    let time = |f: &mut dyn FnMut()| {
        per_page(median(|| {
            let start = Instant::now();
            for _ in 0..CRC_PAGES {
                f();
            }
            start.elapsed()
        }))
    };
    let v2 = time(&mut || {
        black_box(unsafe { cr_test_crc(black_box(page.as_ptr()).cast(), page.len()) });
    });
    let v1 = time(&mut || {
        black_box(IEEE.checksum(black_box(&page)));
    });
    let copied = time(&mut || {
        copy.copy_from_slice(black_box(&page));
        black_box(&copy);
    });
    (v2, v1, copied)
}

fn main() {
    let mut ring = vec![0u8; (PAGES * PAGE) as usize];
    println!("kernel ring code in user space (median of {RUNS} runs), one stream, {PAGES} pages of {PAGE} bytes");
    let ns = |d: Duration| d.as_nanos() as f64 / EVENTS as f64;
    for payload in [8usize, 64] {
        let c = ns(median(|| c_writer(payload, false, 0)));
        let d = ns(median(|| c_writer(payload, true, 0)));
        let w = ns(median(|| c_writer(payload, false, PASS_EVERY)));
        let m = ns(median(|| {
            baseline::memcpy_records(&mut ring, PAGE as usize, payload, EVENTS)
        }));
        println!(
            "  {payload:>2}-byte payload: crashring_write {c:6.2} ns/event, memcpy baseline {m:6.2} ns/event, ratio {:.2}x",
            c / m
        );
        println!(
            "  {payload:>2}-byte payload, durable: {d:6.2} ns/event, {:.2}x the plain writer, {:+.2} ns/event",
            d / c,
            d - c
        );
        println!(
            "  {payload:>2}-byte payload, a write-back pass every {PASS_EVERY} events: {w:6.2} ns/event, {:.2}x the plain writer, {:+.2} ns/event",
            w / c,
            w - c
        );
    }
    let (v2, v1, copied) = page_crc();
    println!("a closed page's CRC, {PAGE} bytes (median of {RUNS} runs of {CRC_PAGES}):");
    println!("  CRC-32C, the module's SSE4.2 loop (version 2)  {v2:8.1} ns/page");
    println!("  CRC-32/IEEE, slice-by-16 tables (version 1)    {v1:8.1} ns/page");
    println!("  memcpy of the page                             {copied:8.1} ns/page");
    println!(
        "  version 1 / version 2: {:.1}x; version 2 / memcpy: {:.1}x",
        v1 / v2,
        v2 / copied
    );
}
