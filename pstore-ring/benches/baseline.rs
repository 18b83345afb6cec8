//! What every writer benchmark is measured against and checked with.
//! Included by pstore-ring's and qemu-tests' benches.

use pstore_ring::read::{HeaderTrust, LossKind, Region};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The record type, first timestamp and spacing of the events every writer
/// bench writes, so [`assert_ring_holds`] knows what to expect.
pub const TYPE: u8 = 40;
pub const T0: u64 = 1_000;
pub const STEP: u64 = 300;

/// The baseline: each record's bytes (header and payload, padded to 4
/// bytes) copied into `ring` laid out as pages of `page` bytes after a
/// 48-byte header, wrapping the same way the ring does.
pub fn memcpy_records(ring: &mut [u8], page: usize, payload: usize, n: u64) -> Duration {
    let rec = (4 + payload).div_ceil(4) * 4;
    let src = vec![0xA5u8; rec];
    let pages = ring.len() / page;
    let per_page = (page - 48) / rec;
    let (mut p, mut in_page, mut at) = (0usize, 0usize, 0usize);
    let start = Instant::now();
    for _ in 0..n {
        if in_page == per_page {
            (p, in_page) = ((p + 1) % pages, 0);
        }
        at = p * page + 48 + in_page * rec;
        ring[at..at + rec].copy_from_slice(black_box(&src));
        in_page += 1;
    }
    black_box(&ring);
    let took = start.elapsed();
    assert!(
        n > 0 && ring[at..at + rec] == src,
        "the baseline did not copy"
    );
    took
}

/// Decodes what a writer bench wrote into `image`: one stream of `n`
/// events of type [`TYPE`] carrying `payload`, [`STEP`] ns apart from
/// [`T0`]. The ring's newest events must all decode, in order, with their
/// times and bytes, and every older one must be accounted for as
/// overwritten, nothing lost otherwise. A writer that dropped, refused or
/// garbled events would look faster; it fails here before any figure.
pub fn assert_ring_holds(image: &[u8], n: u64, payload: &[u8]) {
    let region = Region::parse(image, HeaderTrust::Checksummed).expect("the bench's region parses");
    let trace = region.decode();
    let [s] = &trace.streams[..] else {
        panic!("{} streams decoded, not 1", trace.streams.len());
    };
    let kept = s.events.len() as u64;
    let overwritten = s.lost(LossKind::Overwritten);
    assert!(kept > 0, "the writer left no event to decode");
    assert_eq!(
        kept + overwritten,
        n,
        "{kept} events decoded and {overwritten} overwritten, {n} written"
    );
    assert_eq!(s.lost_events(), overwritten, "events lost: {:?}", s.losses);
    for (e, i) in s.events.iter().zip(n - kept..) {
        assert_eq!(
            (e.index, e.ts, e.type_id, e.payload),
            (i, T0 + i * STEP, TYPE, payload),
            "event {i} decoded wrong"
        );
    }
}
