//! The kernel module's ring code (kernel/crashring_ring.c), compiled for
//! user space by build.rs, driven through FFI and checked against the Rust
//! reader: the golden image byte for byte, and concurrent writers with
//! wraparound decoding to exactly what they were fed.

#![cfg(test)]

use super::*;
use pstore_ring::write::RegionConfig;
use std::ffi::{c_int, CString};

/// pstore-ring's golden scenario, which its own golden test replays
/// through the Rust writer.
#[path = "../../../pstore-ring/golden/scenario.rs"]
mod golden_scenario;

mod golden {
    use super::*;
    use pstore_ring::Endian;

    use super::golden_scenario as scenario;

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
        let want =
            std::fs::read(crate::env::project_root().join("pstore-ring/golden/v1-le.bin")).unwrap();
        // Writing every ordered step back (persistent memory) changes when
        // bytes reach memory, never which bytes.
        for durable in [false, true] {
            let config = scenario::config(Endian::NATIVE);
            let mut region = CRegion::format(&config, scenario::BUFFER_SIZE).unwrap();
            for i in 0..config.streams.len() {
                unsafe { crashring_set_durable(region.stream(i), durable) };
            }
            scenario::replay(&mut region);
            let got = region.bytes();
            let first = want.iter().zip(got).position(|(a, b)| a != b);
            assert!(
                first.is_none() && want.len() == got.len(),
                "C image (durable: {durable}) differs from v1-le.bin at {first:?}"
            );
        }
    }

    /// The check the module's `previous_summary` makes of a state block
    /// holds for the block the golden scenario wrote, and fails once any
    /// byte the CRC covers, or the CRC itself, changes.
    #[test]
    fn a_state_block_is_valid_until_any_of_its_bytes_changes() {
        use pstore_ring::layout::{STATE_OFFSET, STATE_SIZE};
        let mut block =
            std::fs::read(crate::env::project_root().join("pstore-ring/golden/v1-le.bin")).unwrap()
                [STATE_OFFSET..STATE_OFFSET + STATE_SIZE]
                .to_vec();
        assert!(unsafe { crashring_state_valid(block.as_ptr().cast()) });
        for at in 0..STATE_SIZE {
            block[at] ^= 0x20;
            let valid = unsafe { crashring_state_valid(block.as_ptr().cast()) };
            block[at] ^= 0x20;
            assert!(
                !valid,
                "a flip at byte {at} of the state block went unnoticed"
            );
        }
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
            let overwritten: u64 = st.lost(LossKind::Overwritten);
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

    /// Pages of the ring below: room for 4 M owner writes of 16 bytes, so
    /// that nothing is overwritten however long the signals take to land.
    const NESTING_PAGES: u32 = 16 * 1024;

    #[test]
    fn an_interrupting_writer_is_recorded_or_counted_never_corrupts() {
        let specs = [StreamSpec::cpu(0)];
        let rc = RegionConfig {
            page_size: 4096,
            pages_per_stream: Some(NESTING_PAGES),
            streams: &specs,
            ..Default::default()
        };
        let mut region = CRegion::format(&rc, (NESTING_PAGES as usize + 64) * 4096).unwrap();
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
            // recorded and been refused: bounded by what the ring holds,
            // not by a count the signal thread may not keep up with on a
            // loaded machine. Some time between writes lets signals land
            // outside a write as well as inside.
            let both = || {
                NESTED_OK.load(Ordering::Relaxed) > 0 && NESTED_DROPPED.load(Ordering::Relaxed) > 0
            };
            // Three quarters of the room: nested records and time prefixes
            // take the rest.
            let capacity = u64::from(NESTING_PAGES) * (4096 - 48) / 16 * 3 / 4;
            for i in (0..capacity).take_while(|&i| i < 100_000 || !both()) {
                for _ in 0..(i % 64) {
                    std::hint::spin_loop();
                }
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
        let drops: u64 = st.lost(LossKind::Dropped);
        assert_eq!(
            drops, dropped,
            "every nested event that found the stream busy is counted"
        );
        assert_eq!(st.lost_events(), dropped);
        eprintln!("nested writes: {ok} recorded, {dropped} dropped and counted");
    }
}

/// Writers stopped where a crash or a shutdown can stop them: the pages
/// they leave read as FORMAT.md section 12 says, never as corrupt, and
/// never as intact with someone else's header.
mod stopping {
    use super::*;
    use pstore_ring::read::{HeaderTrust, LossKind, PageStatus, Region, StreamTrace};
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::StreamSpec;
    use pstore_ring::Endian;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Owned(*mut StreamState);
    unsafe impl Send for Owned {}
    unsafe impl Sync for Owned {}

    /// Event `i`: at `1000 + 10 i` ns, a `lost` event whose value is `i`.
    fn event(i: u64) -> (u64, [u8; 8]) {
        let mut p = [0u8; 8];
        let def = schema::builtin(schema::EVENT_LOST).unwrap();
        schema::encode_payload(def, &[Value::Unsigned(i)], Endian::NATIVE, &mut p).unwrap();
        (1_000 + 10 * i, p)
    }

    fn write(s: *mut StreamState, i: u64) -> c_int {
        let (ts, p) = event(i);
        unsafe { crashring_write(s, ts, schema::EVENT_LOST, p.as_ptr().cast(), 8) }
    }

    /// Every event recovered is the one written at its index, the newest
    /// `written` are all there up to the first lost one, and whatever is
    /// missing is accounted as overwritten.
    fn assert_exact(st: &StreamTrace<'_>, written: u64) {
        for e in &st.events {
            let (ts, p) = event(e.index);
            assert_eq!((e.ts, e.payload), (ts, &p[..]), "event {}", e.index);
        }
        let first = st.events.first().map_or(written, |e| e.index);
        let indices: Vec<u64> = st.events.iter().map(|e| e.index).collect();
        let want: Vec<u64> = (first..written).collect();
        assert_eq!(indices, want, "a gap or an extra event in the newest ones");
        assert_eq!(st.lost(LossKind::Overwritten), first, "{:?}", st.losses);
        assert_eq!(st.lost_events(), first, "{:?}", st.losses);
    }

    fn one_stream(page_size: u32, pages: u32) -> CRegion {
        let specs = [StreamSpec::cpu(0)];
        let rc = RegionConfig {
            page_size,
            pages_per_stream: Some(pages),
            streams: &specs,
            ..Default::default()
        };
        CRegion::format(&rc, (pages * page_size) as usize + 8192).unwrap()
    }

    /// A clean shutdown stops and closes every CPU's page while that CPU may
    /// be in the middle of a record (crashring_stop_all): no page may end
    /// up corrupt, and every event committed before the stop is recovered.
    #[test]
    fn stopping_while_a_writer_runs_never_corrupts_a_page() {
        for round in 0..400u64 {
            let mut region = one_stream(256, 16);
            let s = Owned(region.stream(0));
            let written = AtomicU64::new(0);
            std::thread::scope(|scope| {
                let (s, written) = (&s, &written);
                scope.spawn(move || {
                    for i in 0..20_000 {
                        if write(s.0, i) != 0 {
                            break;
                        }
                        written.store(i + 1, Ordering::Release);
                    }
                });
                while written.load(Ordering::Acquire) < round % 97 {
                    std::hint::spin_loop();
                }
                unsafe { crashring_stop_all(s.0, 1) };
            });
            let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
            let trace = r.decode();
            assert!(
                trace.diagnostics.is_empty(),
                "round {round}: {:?}",
                trace.diagnostics
            );
            let st = &trace.streams[0];
            assert_eq!(st.pages_with(PageStatus::Corrupt), 0, "round {round}");
            assert_eq!(
                st.pages_with(PageStatus::Salvaged),
                0,
                "round {round}: the stop closes the page"
            );
            assert_exact(st, written.load(Ordering::Acquire));
        }
    }

    /// The stop points in cr_open_page(), in order: after the writer's own
    /// state moved on, after `flags` <- resetting, in the middle of the
    /// header fields, after all of them, after `seq`.
    const STOP_POINTS: c_int = 5;

    /// A CPU stopped at each ordered step of opening a page, then the panic
    /// path's close: before the resetting store the old page is still
    /// whole; from it until `flags` <- open the page reads as resetting and
    /// its old events as overwritten (FORMAT.md section 12, cases 3 and 4).
    #[test]
    fn a_page_stopped_while_opening_reads_as_the_crash_analysis_says() {
        for stop_at in 1..=STOP_POINTS {
            // 256-byte pages hold 13 of these 16-byte records.
            let mut region = one_stream(256, 4);
            let s = region.stream(0);
            let mut written = 0;
            while written < 60 {
                assert_eq!(write(s, written), 0);
                written += 1;
            }
            loop {
                let (ts, p) = event(written);
                let rc = unsafe {
                    cr_test_write_stopping_at(
                        s,
                        ts,
                        schema::EVENT_LOST,
                        p.as_ptr().cast(),
                        8,
                        stop_at,
                    )
                };
                if rc == 1 {
                    break;
                }
                assert_eq!(rc, 0);
                written += 1;
            }
            // The panic path, for this stopped CPU.
            unsafe { crashring_close(s) };
            let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
            let trace = r.decode();
            assert!(
                trace.diagnostics.is_empty(),
                "stop point {stop_at}: {:?}",
                trace.diagnostics
            );
            let st = &trace.streams[0];
            let resetting = st.pages_with(PageStatus::Resetting);
            let want = if stop_at == 1 { 0 } else { 1 };
            assert_eq!(resetting, want, "stop point {stop_at}: {:?}", st.pages);
            assert_eq!(st.pages_with(PageStatus::Intact), 4 - want);
            assert_exact(st, written);
        }
    }
}
