//! The kernel module's ring code (kernel/crashring_ring.c), compiled for
//! user space by build.rs, driven through FFI and checked against the Rust
//! reader: the golden image byte for byte, and concurrent writers with
//! wraparound decoding to exactly what they were fed.

#![cfg(test)]

use pstore_ring::write::RegionConfig;
use std::ffi::{c_char, c_int, c_void, CString};

#[repr(C)]
struct FieldDef {
    name: *const c_char,
    kind: u8,
    size: u16,
}

#[repr(C)]
struct EventDef {
    id: u8,
    name: *const c_char,
    nfields: u16,
    fields: *const FieldDef,
}

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
    custom: *const EventDef,
    boot_id: [u8; 16],
    generation: u64,
    created_ns: u64,
    wall_offset_ns: i64,
    kernel_release: *const c_char,
    hostname: *const c_char,
    producer: *const c_char,
}

/// `struct crashring_stream` is opaque here: its size comes from C.
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
    fn crashring_drop(s: *mut StreamState);
    fn crashring_close(s: *mut StreamState);
    fn crashring_set_state(
        mem: *mut c_void,
        state: u32,
        reason: u32,
        ns: u64,
        cpu: u32,
        msg: *const c_char,
    );
    fn crashring_region_size(mem: *const c_void) -> u64;
    fn cr_test_sizeof_stream() -> usize;
    fn cr_test_sizeof_config() -> usize;
}

/// The kernel's `crc32_le(seed, p, n)` (no pre- or post-inversion), for the
/// user-space build: crc32fast keeps its state inverted.
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

/// Owns everything a C `struct crashring_config` points at.
struct CConfig {
    _strings: Vec<CString>,
    _fields: Vec<Vec<FieldDef>>,
    _events: Vec<EventDef>,
    _streams: Vec<StreamSpec>,
    cfg: Config,
}

fn c_config(rc: &RegionConfig<'_>) -> CConfig {
    let mut strings = Vec::new();
    let mut cstr = |s: &str| {
        let c = CString::new(s).unwrap();
        let p = c.as_ptr();
        strings.push(c);
        p
    };
    let streams: Vec<StreamSpec> = rc
        .streams
        .iter()
        .map(|s| StreamSpec {
            kind: s.kind,
            cpu: s.cpu,
            name: cstr(s.name),
            pid: s.pid,
        })
        .collect();
    let fields: Vec<Vec<FieldDef>> = rc
        .custom_events
        .iter()
        .map(|e| {
            e.fields
                .iter()
                .map(|f| FieldDef {
                    name: cstr(f.name),
                    kind: f.kind.code(),
                    size: f.kind.size(),
                })
                .collect()
        })
        .collect();
    let events: Vec<EventDef> = rc
        .custom_events
        .iter()
        .zip(&fields)
        .map(|(e, f)| EventDef {
            id: e.id,
            name: cstr(e.name),
            nfields: f.len() as u16,
            fields: f.as_ptr(),
        })
        .collect();
    let cfg = Config {
        page_size: rc.page_size,
        pages_per_stream: rc.pages_per_stream.unwrap_or(0),
        word_size: rc.word_size,
        nstreams: streams.len() as u16,
        streams: streams.as_ptr(),
        ncustom: events.len() as u16,
        custom: events.as_ptr(),
        boot_id: rc.boot_id,
        generation: rc.generation,
        created_ns: rc.created_ns,
        wall_offset_ns: rc.wall_offset_ns,
        kernel_release: cstr(rc.kernel_release),
        hostname: cstr(rc.hostname),
        producer: cstr(rc.producer),
    };
    CConfig {
        _strings: strings,
        _fields: fields,
        _events: events,
        _streams: streams,
        cfg,
    }
}

/// A region formatted by the C code in 8-byte-aligned memory.
struct CRegion {
    mem: Vec<u64>,
    streams: Vec<StreamState>,
    _cfg: CConfig,
}

impl CRegion {
    fn format(rc: &RegionConfig<'_>, bytes: usize) -> Result<CRegion, c_int> {
        assert_eq!(std::mem::size_of::<StreamState>(), unsafe {
            cr_test_sizeof_stream()
        });
        assert_eq!(std::mem::size_of::<Config>(), unsafe {
            cr_test_sizeof_config()
        });
        let cfg = c_config(rc);
        let mut mem = vec![0u64; bytes.div_ceil(8)];
        let mut streams: Vec<StreamState> = (0..rc.streams.len())
            .map(|_| StreamState([0; 96]))
            .collect();
        let err = unsafe {
            crashring_format(
                mem.as_mut_ptr().cast(),
                bytes as u64,
                &cfg.cfg,
                streams.as_mut_ptr(),
            )
        };
        if err != 0 {
            return Err(err);
        }
        Ok(CRegion {
            mem,
            streams,
            _cfg: cfg,
        })
    }

    fn bytes(&self) -> &[u8] {
        let size = unsafe { crashring_region_size(self.mem.as_ptr().cast()) } as usize;
        let all = unsafe {
            std::slice::from_raw_parts(self.mem.as_ptr().cast::<u8>(), self.mem.len() * 8)
        };
        &all[..size.min(all.len())]
    }

    fn stream(&mut self, i: usize) -> *mut StreamState {
        &mut self.streams[i]
    }
}

mod golden {
    use super::*;
    use pstore_ring::Endian;

    use crate::golden_scenario as scenario;

    impl scenario::Recorder for CRegion {
        fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) {
            let s = self.stream(stream);
            let rc = unsafe {
                crashring_write(
                    s,
                    ts,
                    type_id,
                    payload.as_ptr().cast(),
                    payload.len() as u32,
                )
            };
            assert_eq!(
                rc,
                0,
                "stream {stream} ts {ts} type {type_id} len {}",
                payload.len()
            );
        }
        fn drop_event(&mut self, stream: usize) {
            unsafe { crashring_drop(self.stream(stream)) }
        }
        fn close(&mut self, stream: usize) {
            unsafe { crashring_close(self.stream(stream)) }
        }
        fn set_state(
            &mut self,
            state: u32,
            reason: u32,
            crash_ns: u64,
            crash_cpu: u32,
            message: &str,
        ) {
            let msg = CString::new(message).unwrap();
            unsafe {
                crashring_set_state(
                    self.mem.as_mut_ptr().cast(),
                    state,
                    reason,
                    crash_ns,
                    crash_cpu,
                    msg.as_ptr(),
                )
            }
        }
        fn endian(&self) -> Endian {
            Endian::NATIVE
        }
    }

    /// The C writer reproduces the Rust writer's golden image byte for
    /// byte. Only the native-order image can be compared: the kernel writes
    /// its own byte order, so the big-endian image is the Rust writer's
    /// alone (FORMAT.md, "Byte order").
    #[test]
    fn c_writer_reproduces_the_golden_image() {
        assert_eq!(
            Endian::NATIVE,
            Endian::Little,
            "this machine's golden image is v1-le"
        );
        let mut region =
            CRegion::format(&scenario::config(Endian::NATIVE), scenario::BUFFER_SIZE).unwrap();
        scenario::replay(&mut region);
        let want =
            std::fs::read(crate::project_root().join("pstore-ring/golden/v1-le.bin")).unwrap();
        let got = region.bytes();
        let first = want.iter().zip(got).position(|(a, b)| a != b);
        assert!(
            first.is_none() && want.len() == got.len(),
            "C image differs from v1-le.bin at {first:?}"
        );
    }
}

mod concurrency {
    use super::*;
    use pstore_ring::read::{HeaderTrust, LossKind, Region};
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::StreamSpec;
    use pstore_ring::Endian;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

    /// Moves a stream's state to the thread standing in for its CPU.
    struct Owned(*mut StreamState);
    unsafe impl Send for Owned {}

    fn encode(id: u8, values: &[Value<'_>]) -> Vec<u8> {
        let def = schema::builtin(id).unwrap();
        let mut buf = vec![0u8; 1024];
        let n = schema::encode_payload(def, values, Endian::NATIVE, &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    /// Events a thread feeds its stream: (ts, type, payload).
    fn workload(stream: u64, n: u64) -> Vec<(u64, u8, Vec<u8>)> {
        let mut seed = stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut ts = 1_000_000;
        (0..n)
            .map(|i| {
                ts += match next() % 100 {
                    0 => 5_000_000_000,
                    1..=5 => 200_000,
                    _ => next() % 3_000,
                };
                let text = "x".repeat((next() % 200) as usize);
                let (ty, payload) = if i % 3 == 0 {
                    let v = [
                        Value::Unsigned(stream),
                        Value::Chars(b"cpu"),
                        Value::Str(text.as_bytes()),
                    ];
                    (schema::EVENT_MARKER, encode(schema::EVENT_MARKER, &v))
                } else {
                    (
                        schema::EVENT_LOST,
                        encode(schema::EVENT_LOST, &[Value::Unsigned(i)]),
                    )
                };
                (ts, ty, payload)
            })
            .collect()
    }

    #[test]
    fn threads_as_cpus_decode_to_exactly_what_they_wrote() {
        let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
        let rc = RegionConfig {
            page_size: 1024,
            pages_per_stream: Some(8),
            streams: &specs,
            ..Default::default()
        };
        let mut region = CRegion::format(&rc, 64 * 1024).unwrap();
        let fed: Vec<_> = (0..4).map(|s| workload(s, 20_000)).collect();
        std::thread::scope(|scope| {
            for (i, events) in fed.iter().enumerate() {
                let s = Owned(region.stream(i));
                scope.spawn(move || {
                    let s = s;
                    for (ts, ty, p) in events {
                        assert_eq!(
                            unsafe {
                                crashring_write(s.0, *ts, *ty, p.as_ptr().cast(), p.len() as u32)
                            },
                            0
                        );
                    }
                    // Odd CPUs are closed by a panic path; even ones crash open.
                    if i % 2 == 1 {
                        unsafe { crashring_close(s.0) };
                    }
                });
            }
        });
        let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
        let trace = r.decode();
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        for (st, want) in trace.streams.iter().zip(&fed) {
            let skip = want.len() - st.events.len();
            assert!(skip > 0, "the ring should have wrapped");
            for (got, (ts, ty, p)) in st.events.iter().zip(&want[skip..]) {
                assert_eq!((got.ts, got.type_id), (*ts, *ty));
                assert_eq!(&got.payload[..p.len()], &p[..]);
            }
            let overwritten: u64 = st
                .losses
                .iter()
                .filter(|l| l.kind == LossKind::Overwritten)
                .map(|l| l.events)
                .sum();
            assert_eq!(overwritten, skip as u64);
            assert_eq!(
                st.lost_events(),
                skip as u64,
                "no loss other than overwriting"
            );
        }
    }

    static STREAM: AtomicPtr<StreamState> = AtomicPtr::new(std::ptr::null_mut());
    static NESTED_OK: AtomicU64 = AtomicU64::new(0);
    static NESTED_DROPPED: AtomicU64 = AtomicU64::new(0);
    static CLOCK: AtomicU64 = AtomicU64::new(0);

    /// Stands in for an interrupt handler: records on the CPU's own stream.
    extern "C" fn on_signal(_: c_int) {
        let s = STREAM.load(Ordering::Relaxed);
        let n = NESTED_OK.load(Ordering::Relaxed) + NESTED_DROPPED.load(Ordering::Relaxed);
        // irq_handler_exit { irq = 7, ret = n }, encoded by hand: no
        // allocation in a signal handler.
        let mut p = [0u8; 8];
        p[..4].copy_from_slice(&7u32.to_ne_bytes());
        p[4..].copy_from_slice(&(n as u32).to_ne_bytes());
        let ts = CLOCK.load(Ordering::Relaxed);
        if unsafe { crashring_write(s, ts, schema::EVENT_IRQ_EXIT, p.as_ptr().cast(), 8) } == 0 {
            NESTED_OK.fetch_add(1, Ordering::Relaxed);
        } else {
            NESTED_DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn an_interrupting_writer_is_recorded_or_counted_never_corrupts() {
        let specs = [StreamSpec::cpu(0)];
        let rc = RegionConfig {
            page_size: 4096,
            pages_per_stream: Some(1024),
            streams: &specs,
            ..Default::default()
        };
        let mut region = CRegion::format(&rc, 4200 * 1024).unwrap();
        STREAM.store(region.stream(0), Ordering::Relaxed);
        let handler: extern "C" fn(c_int) = on_signal;
        unsafe { libc::signal(libc::SIGUSR1, handler as libc::sighandler_t) };
        let payload = encode(schema::EVENT_LOST, &[Value::Unsigned(0)]);
        let stop = AtomicBool::new(false);
        let mut main_written = 0u64;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = &stop;
            scope.spawn(move || {
                let target: libc::pthread_t = rx.recv().unwrap();
                while !stop.load(Ordering::Relaxed) {
                    unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
                    std::thread::yield_now();
                }
            });
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            let s = STREAM.load(Ordering::Relaxed);
            // At least 100k writes, then on until the handler has both
            // recorded and been refused, within what the ring holds.
            let both = || {
                NESTED_OK.load(Ordering::Relaxed) > 0 && NESTED_DROPPED.load(Ordering::Relaxed) > 0
            };
            for i in (0..300_000u64).take_while(|&i| i < 100_000 || !both()) {
                CLOCK.store(1_000 + i * 10, Ordering::Relaxed);
                let rc = unsafe {
                    crashring_write(
                        s,
                        1_000 + i * 10,
                        schema::EVENT_LOST,
                        payload.as_ptr().cast(),
                        8,
                    )
                };
                assert_eq!(rc, 0, "nothing else writes while the owner does");
                main_written += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        // One more owner write folds drops counted after the last one.
        let s = STREAM.load(Ordering::Relaxed);
        unsafe { libc::signal(libc::SIGUSR1, libc::SIG_DFL) };
        assert_eq!(
            unsafe {
                crashring_write(
                    s,
                    u64::MAX / 2,
                    schema::EVENT_LOST,
                    payload.as_ptr().cast(),
                    8,
                )
            },
            0
        );
        main_written += 1;
        let ok = NESTED_OK.load(Ordering::Relaxed);
        let dropped = NESTED_DROPPED.load(Ordering::Relaxed);
        assert!(
            ok > 0 && dropped > 0,
            "nesting not exercised: {ok} recorded, {dropped} dropped"
        );

        let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
        let trace = r.decode();
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        let st = &trace.streams[0];
        let mains = st
            .events
            .iter()
            .filter(|e| e.type_id == schema::EVENT_LOST)
            .count() as u64;
        let nested = st
            .events
            .iter()
            .filter(|e| e.type_id == schema::EVENT_IRQ_EXIT)
            .count() as u64;
        assert_eq!(mains, main_written);
        assert_eq!(nested, ok);
        let drops: u64 = st
            .losses
            .iter()
            .filter(|l| l.kind == LossKind::Dropped)
            .map(|l| l.events)
            .sum();
        assert_eq!(
            drops, dropped,
            "every nested event that found the stream busy is counted"
        );
        assert_eq!(st.lost_events(), dropped);
        eprintln!("nested writes: {ok} recorded, {dropped} dropped and counted");
    }
}
