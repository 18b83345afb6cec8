//! The kernel module's ring code (kernel/crashring_ring.c, built for user
//! space by build.rs): ns per event for 8- and 64-byte payloads, next to a
//! memcpy of the same record bytes into the same ring, measured in the
//! same run. `cargo bench -p qemu-tests` (or `cargo xtask bench`).

use std::ffi::{c_char, c_int, c_void};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[repr(C)]
struct StreamSpec {
    kind: u16,
    cpu: u16,
    name: *const c_char,
    pid: u32,
}

#[repr(C)]
struct Config {
    page_size: u32,
    pages_per_stream: u32,
    word_size: u8,
    nstreams: u16,
    streams: *const StreamSpec,
    ncustom: u16,
    custom: *const c_void,
    boot_id: [u8; 16],
    generation: u64,
    created_ns: u64,
    wall_offset_ns: i64,
    kernel_release: *const c_char,
    hostname: *const c_char,
    producer: *const c_char,
}

#[repr(C, align(8))]
struct StreamState([u8; 96]);

extern "C" {
    fn crashring_format(
        mem: *mut c_void,
        size: u64,
        cfg: *const Config,
        streams: *mut StreamState,
    ) -> c_int;
    fn crashring_write(
        s: *mut StreamState,
        ts: u64,
        ty: u8,
        payload: *const c_void,
        len: u32,
    ) -> c_int;
    fn crashring_close(s: *mut StreamState);
    fn cr_test_sizeof_stream() -> usize;
}

#[no_mangle]
extern "C" fn crashring_user_crc32(seed: u32, p: *const c_void, len: usize) -> u32 {
    let data = if len == 0 {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    };
    let mut h = crc32fast::Hasher::new_with_initial(!seed);
    h.update(data);
    !h.finalize()
}

const RUNS: usize = 9;
const PAGE: u32 = 4096;
const PAGES: u32 = 256;
const EVENTS: u64 = 2_000_000;

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..RUNS).map(|_| f()).collect();
    t.sort();
    t[RUNS / 2]
}

fn c_writer(mem: &mut [u64], payload: usize) -> Duration {
    let spec = StreamSpec {
        kind: 1,
        cpu: 0,
        name: std::ptr::null(),
        pid: 0,
    };
    let empty = c"";
    let cfg = Config {
        page_size: PAGE,
        pages_per_stream: PAGES,
        word_size: 8,
        nstreams: 1,
        streams: &spec,
        ncustom: 0,
        custom: std::ptr::null(),
        boot_id: [0; 16],
        generation: 1,
        created_ns: 0,
        wall_offset_ns: 0,
        kernel_release: empty.as_ptr(),
        hostname: empty.as_ptr(),
        producer: empty.as_ptr(),
    };
    let mut s = StreamState([0; 96]);
    let rc = unsafe {
        crashring_format(
            mem.as_mut_ptr().cast(),
            (mem.len() * 8) as u64,
            &cfg,
            &mut s,
        )
    };
    assert_eq!(rc, 0);
    let data = vec![0xA5u8; payload];
    let start = Instant::now();
    for i in 0..EVENTS {
        unsafe {
            crashring_write(
                &mut s,
                1_000 + i * 300,
                40,
                black_box(data.as_ptr()).cast(),
                payload as u32,
            )
        };
    }
    unsafe { crashring_close(&mut s) };
    start.elapsed()
}

/// The baseline: each record's bytes copied into the same ring memory,
/// wrapping the same way.
fn memcpy_events(mem: &mut [u64], payload: usize) -> Duration {
    let rec = (4 + payload).div_ceil(4) * 4;
    let src = vec![0xA5u8; rec];
    let ring = unsafe {
        std::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), (PAGES * PAGE) as usize)
    };
    let per_page = (PAGE as usize - 48) / rec;
    let (mut page, mut in_page) = (0usize, 0usize);
    let start = Instant::now();
    for _ in 0..EVENTS {
        if in_page == per_page {
            (page, in_page) = ((page + 1) % PAGES as usize, 0);
        }
        let at = page * PAGE as usize + 48 + in_page * rec;
        ring[at..at + rec].copy_from_slice(black_box(&src));
        in_page += 1;
    }
    black_box(&ring);
    start.elapsed()
}

fn main() {
    assert_eq!(std::mem::size_of::<StreamState>(), unsafe {
        cr_test_sizeof_stream()
    });
    let mut mem = vec![0u64; (64 * 1024 + (PAGES * PAGE) as usize) / 8];
    println!("kernel ring code in user space (median of {RUNS} runs), one stream, {PAGES} pages of {PAGE} bytes");
    for payload in [8usize, 64] {
        let c = median(|| c_writer(&mut mem, payload));
        let m = median(|| memcpy_events(&mut mem, payload));
        let (c_ns, m_ns) = (
            c.as_nanos() as f64 / EVENTS as f64,
            m.as_nanos() as f64 / EVENTS as f64,
        );
        println!(
            "  {payload:>2}-byte payload: crashring_write {c_ns:6.2} ns/event, memcpy baseline {m_ns:6.2} ns/event, ratio {:.2}x",
            c_ns / m_ns
        );
    }
}
