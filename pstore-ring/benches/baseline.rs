//! The baseline every writer benchmark is measured against: each record's
//! bytes (header and payload, padded to 4 bytes) copied into `ring` laid
//! out as pages of `page` bytes after a 48-byte header, wrapping the same
//! way the ring does. Included by pstore-ring's and qemu-tests' benches.

use std::hint::black_box;
use std::time::{Duration, Instant};

pub fn memcpy_records(ring: &mut [u8], page: usize, payload: usize, n: u64) -> Duration {
    let rec = (4 + payload).div_ceil(4) * 4;
    let src = vec![0xA5u8; rec];
    let pages = ring.len() / page;
    let per_page = (page - 48) / rec;
    let (mut p, mut in_page) = (0usize, 0usize);
    let start = Instant::now();
    for _ in 0..n {
        if in_page == per_page {
            (p, in_page) = ((p + 1) % pages, 0);
        }
        let at = p * page + 48 + in_page * rec;
        ring[at..at + rec].copy_from_slice(black_box(&src));
        in_page += 1;
    }
    black_box(&ring);
    start.elapsed()
}
