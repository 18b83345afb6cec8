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

/// A `crash` event's payload as the panic path writes it: reason 1 (a
/// panic), CPU 0, then the message.
fn crash_payload(msg: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 8];
    p[..4].copy_from_slice(&1u32.to_ne_bytes());
    p.extend_from_slice(&(msg.len() as u16).to_ne_bytes());
    p.extend_from_slice(msg);
    p
}

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
        fn abandon(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) {
            let s = self.stream(stream);
            unsafe {
                let dst = crashring_reserve(s, ts, type_id, payload.len() as u32);
                assert!(!dst.is_null(), "stream {stream} reserves");
                std::ptr::copy_nonoverlapping(payload.as_ptr(), dst.cast(), payload.len());
            }
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
        fn add_callsite(&mut self, c: &pstore_ring::debug_args::Callsite<'_>) -> u32 {
            let strings: Vec<CString> = [c.module, c.function, c.file, c.format]
                .iter()
                .map(|s| CString::new(s.to_vec()).unwrap())
                .collect();
            let site = CCallsite {
                source: c.source,
                level: c.level,
                category: c.category,
                line: c.line,
                module: strings[0].as_ptr(),
                function: strings[1].as_ptr(),
                file: strings[2].as_ptr(),
                format: strings[3].as_ptr(),
            };
            let mut id = 0;
            let rc = unsafe { crashring_callsite_add(&mut *self.callsites, &site, &mut id) };
            assert_eq!(rc, 0, "the callsite is added");
            id
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
            "this machine's golden image is v2-le"
        );
        let want =
            std::fs::read(crate::env::project_root().join("pstore-ring/golden/v2-le.bin")).unwrap();
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
                "C image (durable: {durable}) differs from v2-le.bin at {first:?}"
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
            std::fs::read(crate::env::project_root().join("pstore-ring/golden/v2-le.bin")).unwrap()
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
}

/// Nesting lanes (FORMAT.md, "Nesting lanes"): signals stand in for the
/// interrupts, softirqs and NMIs that start a record while their CPU is in
/// the middle of another, at every depth the lanes have and one past it.
mod nesting {
    use super::*;
    use pstore_ring::merge::{merge, Item};
    use pstore_ring::read::{HeaderTrust, LossKind, PageStatus, Region};
    use pstore_ring::schema;
    use pstore_ring::write::StreamSpec;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

    const LANES: usize = 4;

    /// CPU 0's lanes, formatted as the kernel module lays them out.
    fn lanes_region(pages: u32) -> (CRegion, Box<CpuLanes>) {
        let specs: Vec<StreamSpec> = (0..LANES as u8).map(|d| StreamSpec::nested(0, d)).collect();
        let rc = RegionConfig {
            page_size: 4096,
            pages_per_stream: Some(pages),
            lane_pages: pages,
            streams: &specs,
            ..Default::default()
        };
        let mut region = CRegion::format(&rc, (LANES * pages as usize + 16) * 4096).unwrap();
        let mut cpu = Box::new(CpuLanes {
            depth: 0,
            nlanes: LANES as u32,
            lane: [std::ptr::null_mut(); pstore_ring::layout::MAX_LANES as usize],
        });
        for d in 0..LANES {
            cpu.lane[d] = region.stream(d);
        }
        (region, cpu)
    }

    static CPU: AtomicPtr<CpuLanes> = AtomicPtr::new(std::ptr::null_mut());
    /// The timestamp source: every record gets the next value, so the
    /// merged trace must hold each recorded value once, in order.
    static CLOCK: AtomicU64 = AtomicU64::new(1_000);
    static RECORDED: [AtomicU64; LANES] = [const { AtomicU64::new(0) }; LANES];
    /// Refusals of writes nested deeper than the lanes, and of any other.
    static REFUSED_DEEPER: AtomicU64 = AtomicU64::new(0);
    static REFUSED_OTHER: AtomicU64 = AtomicU64::new(0);
    /// The signals of the chain, outermost first: each handler raises the
    /// next while its own record is reserved and not yet committed.
    static CHAIN: [AtomicU64; LANES + 1] = [const { AtomicU64::new(0) }; LANES + 1];
    /// Chains that started inside one of the test thread's own writes.
    static LANDED_INSIDE: AtomicU64 = AtomicU64::new(0);

    /// One record as cr_emit() makes it: enter, reserve (timestamp read
    /// inside), fill, commit, leave; `nest` runs between reserve and commit.
    fn record(nest: impl FnOnce()) {
        let c = CPU.load(Ordering::Relaxed);
        unsafe {
            let s = crashring_enter(c);
            let depth = ((*c).depth - 1) as usize;
            let lane = (*c).lane.iter().position(|&l| l == s).unwrap_or(LANES);
            let ts = CLOCK.fetch_add(1, Ordering::SeqCst);
            let dst = crashring_reserve(s, ts, schema::EVENT_IRQ_EXIT, 8);
            if dst.is_null() {
                if depth >= LANES {
                    REFUSED_DEEPER.fetch_add(1, Ordering::Relaxed);
                } else {
                    REFUSED_OTHER.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                // irq_handler_exit { irq = depth, ret = lane }, by hand: no
                // allocation in a signal handler.
                let p = [(depth as u32).to_ne_bytes(), (lane as u32).to_ne_bytes()].concat();
                std::ptr::copy_nonoverlapping(p.as_ptr(), dst.cast(), 8);
                nest();
                crashring_commit(s);
                RECORDED[lane].fetch_add(1, Ordering::Relaxed);
            }
            crashring_leave(c);
        }
    }

    extern "C" fn on_signal(sig: c_int) {
        let at = CHAIN
            .iter()
            .position(|c| c.load(Ordering::Relaxed) == sig as u64)
            .unwrap_or(LANES);
        let next = CHAIN
            .get(at + 1)
            .map(|c| c.load(Ordering::Relaxed) as c_int);
        if at == 0 && unsafe { (*CPU.load(Ordering::Relaxed)).depth } > 0 {
            LANDED_INSIDE.fetch_add(1, Ordering::Relaxed);
        }
        record(|| {
            if let Some(next) = next {
                unsafe { libc::raise(next) };
            }
        });
    }

    /// Pages per lane: more than every record below needs, so nothing is
    /// overwritten and every loss the reader reports is a refusal.
    const PAGES: u32 = 4096;

    #[test]
    fn every_nested_write_is_recorded_on_its_lane_and_merged_in_order() {
        let (region, mut cpu) = lanes_region(PAGES);
        CPU.store(&mut *cpu, Ordering::Relaxed);
        let handler: extern "C" fn(c_int) = on_signal;
        let signals = [
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGRTMIN(),
            libc::SIGRTMIN() + 1,
            libc::SIGRTMIN() + 2,
        ];
        for (c, &sig) in CHAIN.iter().zip(&signals) {
            c.store(sig as u64, Ordering::Relaxed);
            unsafe { libc::signal(sig, handler as libc::sighandler_t) };
        }
        let stop = AtomicBool::new(false);
        let mut main_written = 0u64;
        // Records per lane the room allows, with a margin for prefixes.
        let capacity = u64::from(PAGES) * (4096 - 48) / 16 / 2;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = &stop;
            scope.spawn(move || {
                let target: libc::pthread_t = rx.recv().unwrap();
                while !stop.load(Ordering::Relaxed) {
                    unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            });
            tx.send(unsafe { libc::pthread_self() }).unwrap();
            // On until chains have started inside the thread's own writes
            // (as well as between them), bounded by the room.
            let enough = || LANDED_INSIDE.load(Ordering::Relaxed) >= 20;
            for i in 0..capacity {
                if i >= 20_000 && enough() {
                    break;
                }
                for _ in 0..(i % 64) {
                    std::hint::spin_loop();
                }
                record(|| {});
                main_written += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        for &sig in &signals {
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
        for d in 0..LANES {
            unsafe { crashring_close(cpu.lane[d]) };
        }
        let recorded: Vec<u64> = RECORDED.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        let deeper = REFUSED_DEEPER.load(Ordering::Relaxed);
        assert_eq!(
            REFUSED_OTHER.load(Ordering::Relaxed),
            0,
            "a write within the lanes was refused"
        );
        assert!(
            recorded.iter().all(|&n| n > 0) && deeper > 0,
            "nesting not exercised at every depth: {recorded:?} recorded by lane, {deeper} deeper"
        );

        let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
        let trace = r.decode();
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        for (d, st) in trace.streams.iter().enumerate() {
            assert_eq!(st.info.lane as usize, d);
            assert_eq!(st.events.len() as u64, recorded[d], "lane {d}");
            for e in &st.events {
                let lane = u32::from_ne_bytes(e.payload[4..8].try_into().unwrap());
                assert_eq!(lane as usize, d, "event {} of lane {d}", e.index);
            }
            let want_dropped = if d == LANES - 1 { deeper } else { 0 };
            assert_eq!(st.lost(LossKind::Dropped), want_dropped, "lane {d}");
            assert_eq!(st.lost_events(), want_dropped, "lane {d}: only refusals");
        }
        // Merged, every recorded timestamp once and in order: the outer
        // record (its time taken before it was interrupted) first.
        let ts: Vec<u64> = merge(&trace.streams)
            .filter_map(|i| match i {
                Item::Event(e) => Some(e.ts),
                Item::Loss(_) => None,
            })
            .collect();
        assert_eq!(ts.len() as u64, recorded.iter().sum::<u64>());
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "merge out of order");
        assert!(recorded[0] >= main_written);
        let inside = LANDED_INSIDE.load(Ordering::Relaxed);
        eprintln!(
            "lanes recorded {recorded:?} ({inside} chains began inside a write), \
             {deeper} nested deeper than the lanes, counted"
        );
    }

    /// A panic in a context nested as deep as the lanes go: every write it
    /// interrupted stays uncommitted for good. The crash event is still
    /// recorded, last on the CPU, and every record in flight is counted.
    #[test]
    fn the_panic_path_records_its_crash_whatever_it_interrupted() {
        let (region, mut cpu) = lanes_region(4);
        let c: *mut CpuLanes = &mut *cpu;
        let payload = [0u8; 8];
        unsafe {
            for d in 0..LANES {
                let s = crashring_enter(c);
                assert_eq!(s, cpu.lane[d]);
                let ok = crashring_write(
                    s,
                    1_000 + d as u64,
                    schema::EVENT_IRQ_EXIT,
                    payload.as_ptr().cast(),
                    8,
                );
                assert_eq!(ok, 0);
                let dst = crashring_reserve(s, 2_000 + d as u64, schema::EVENT_IRQ_EXIT, 8);
                assert!(!dst.is_null(), "lane {d} reserves");
            }
            // One more level: no lane left, refused and counted.
            let s = crashring_enter(c);
            assert!(crashring_reserve(s, 3_000, schema::EVENT_IRQ_EXIT, 8).is_null());
            crashring_leave(c);
            // The panic path.
            crashring_take_innermost(c);
            let s = crashring_enter(c);
            let p = crash_payload(b"Kernel panic - not syncing: nested");
            assert_eq!(
                crashring_write(
                    s,
                    4_000,
                    schema::EVENT_CRASH,
                    p.as_ptr().cast(),
                    p.len() as u32
                ),
                0
            );
            crashring_leave(c);
            for d in 0..LANES {
                crashring_close(cpu.lane[d]);
            }
        }
        let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
        let trace = r.decode();
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        let dropped: Vec<u64> = trace
            .streams
            .iter()
            .map(|s| s.lost(LossKind::Dropped))
            .collect();
        // Lanes 0-2: their record in flight; lane 3: its record in flight
        // and the write nested past it.
        assert_eq!(dropped, [1, 1, 1, 2]);
        let last = merge(&trace.streams)
            .filter_map(|i| match i {
                Item::Event(e) => Some(e),
                Item::Loss(_) => None,
            })
            .last()
            .unwrap();
        assert_eq!(last.type_id, schema::EVENT_CRASH);
        assert_eq!(last.stream, (LANES - 1) as u16);
        for st in &trace.streams {
            assert_eq!(st.pages_with(PageStatus::Salvaged), 0, "every page closed");
        }
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

    /// The stop points of a write that moves to the next page, in order:
    /// in cr_close_page(), after the CRC and after `flags` <- closed; then in
    /// cr_open_page(), after the writer's own state moved on, after `flags`
    /// <- resetting, in the middle of the header fields, after all of them,
    /// after `seq`.
    const STOP_POINTS: c_int = 7;
    /// The first of them in cr_open_page().
    const FIRST_OPEN_POINT: c_int = 3;

    /// A CPU stopped at each ordered step of closing a page and opening the
    /// next, then the panic path's close: until the resetting store the old
    /// page is whole (closed by the panic path if its writer had not); from
    /// it until `flags` <- open the new page reads as resetting and its old
    /// events as overwritten (FORMAT.md section 12, cases 3 and 4).
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
            let want = if stop_at <= FIRST_OPEN_POINT { 0 } else { 1 };
            assert_eq!(resetting, want, "stop point {stop_at}: {:?}", st.pages);
            assert_eq!(st.pages_with(PageStatus::Intact), 4 - want);
            assert_exact(st, written);
        }
    }

    /// The panic on a CPU whose innermost lane's writer it stopped at any
    /// step of closing its page or opening the next: crashring_take_innermost()
    /// hands the lane over and the crash record lands in a page of its own,
    /// readable and last, never in one that reads as resetting or one whose
    /// CRC it would break.
    #[test]
    fn the_crash_record_survives_a_lane_taken_mid_close_or_mid_open() {
        for stop_at in 1..=STOP_POINTS {
            let mut region = one_stream(256, 4);
            let s = region.stream(0);
            let mut lane = [std::ptr::null_mut(); pstore_ring::layout::MAX_LANES as usize];
            lane[0] = s;
            let mut cpu = CpuLanes {
                depth: 0,
                nlanes: 1,
                lane,
            };
            let c: *mut CpuLanes = &mut cpu;
            let mut written = 0;
            unsafe {
                loop {
                    let s = crashring_enter(c);
                    let (ts, p) = event(written);
                    let rc = cr_test_write_stopping_at(
                        s,
                        ts,
                        schema::EVENT_LOST,
                        p.as_ptr().cast(),
                        8,
                        if written < 60 { 0 } else { stop_at },
                    );
                    if rc == 1 {
                        // Stopped inside: the write never leaves its lane.
                        break;
                    }
                    assert_eq!(rc, 0);
                    crashring_leave(c);
                    written += 1;
                }
                // The panic path on this CPU.
                crashring_take_innermost(c);
                let s = crashring_enter(c);
                let p = crash_payload(b"Kernel panic - not syncing: mid-page");
                let rc = crashring_write(
                    s,
                    1_000_000,
                    schema::EVENT_CRASH,
                    p.as_ptr().cast(),
                    p.len() as u32,
                );
                assert_eq!(rc, 0, "stop point {stop_at}");
                crashring_leave(c);
                crashring_close(s);
            }
            let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
            let trace = r.decode();
            let st = &trace.streams[0];
            assert_eq!(
                st.pages_with(PageStatus::Corrupt),
                0,
                "stop point {stop_at}: {:?}",
                st.pages
            );
            let last = st.events.last().expect("events");
            assert_eq!(
                last.type_id,
                schema::EVENT_CRASH,
                "stop point {stop_at}: the crash record is missing: {:?}",
                st.pages
            );
            // Every event before it is the one written at its index.
            for e in &st.events[..st.events.len() - 1] {
                let (ts, p) = event(e.index);
                assert_eq!((e.ts, e.payload), (ts, &p[..]), "event {}", e.index);
            }
        }
    }
}

/// The periodic write-back's choice of pages (crashring_write_back_new):
/// what it writes back covers every byte the writer changed since the last
/// pass, and an idle stream costs nothing.
mod write_back {
    use super::*;
    use pstore_ring::schema;
    use pstore_ring::write::StreamSpec;

    const PAGE: u32 = 256;
    const PAGES: u32 = 8;

    fn covers(ranges: &[WbRange], addr: usize) -> bool {
        ranges
            .iter()
            .any(|r| (r.p as usize..r.p as usize + r.len).contains(&addr))
    }

    /// One pass, with what it wrote back: (pages it says, ranges logged).
    fn pass(s: *mut StreamState, mark: &mut WbMark) -> (u32, Vec<WbRange>) {
        let mut log = vec![
            WbRange {
                p: std::ptr::null(),
                len: 0
            };
            WB_LOG
        ];
        unsafe { cr_test_log_write_backs(log.as_mut_ptr()) };
        let n = unsafe { crashring_write_back_new(s, mark) };
        let count = unsafe { cr_test_write_backs() };
        unsafe { cr_test_log_write_backs(std::ptr::null_mut()) };
        assert!(count <= WB_LOG);
        log.truncate(count);
        (n, log)
    }

    #[test]
    fn every_byte_written_since_the_last_pass_is_written_back_and_nothing_when_idle() {
        let specs = [StreamSpec::cpu(0)];
        let rc = RegionConfig {
            page_size: PAGE,
            pages_per_stream: Some(PAGES),
            streams: &specs,
            ..Default::default()
        };
        let mut region = CRegion::format(&rc, (PAGES * PAGE) as usize + 8192).unwrap();
        let s = region.stream(0);
        let payload = [7u8; 8];
        let mut mark = WbMark::default();
        let mut before = region.bytes().to_vec();
        let mut written = 0u64;
        // Bursts within a page, across a few pages, and past the whole ring.
        for burst in [0u64, 0, 1, 1, 3, 40, 0, 7, 500, 2, 0] {
            for _ in 0..burst {
                let rc = unsafe {
                    crashring_write(
                        s,
                        1_000 + written,
                        schema::EVENT_LOST,
                        payload.as_ptr().cast(),
                        8,
                    )
                };
                assert_eq!(rc, 0);
                written += 1;
            }
            let first = mark == WbMark::default();
            let (n, ranges) = pass(s, &mut mark);
            let after = region.bytes();
            let base = after.as_ptr() as usize;
            for (i, (b, a)) in before.iter().zip(after).enumerate() {
                assert!(
                    b == a || covers(&ranges, base + i),
                    "after a burst of {burst}: byte {i} changed but was not written back ({n} pages)"
                );
            }
            if before == after && !first {
                assert_eq!((n, ranges.len()), (0, 0), "an idle stream is written back");
            } else {
                assert!((1..=PAGES).contains(&n), "{n} pages");
                // n whole pages, then the tails.
                assert_eq!(ranges.len(), n as usize + 1);
                assert!(ranges[..n as usize].iter().all(|r| r.len == PAGE as usize));
            }
            before = after.to_vec();
        }
        // Past the whole ring, each page once.
        assert_eq!(pass(s, &mut WbMark { seq: 1, bytes: 0 }).0, PAGES);
        // A mark from a generation further along counts from the first page.
        let (n, ranges) = pass(
            s,
            &mut WbMark {
                seq: u64::MAX / 2,
                bytes: 0,
            },
        );
        assert_eq!(n, PAGES);
        let mut starts: Vec<usize> = ranges[..PAGES as usize]
            .iter()
            .map(|r| r.p as usize)
            .collect();
        starts.sort();
        starts.dedup();
        assert_eq!(starts.len(), PAGES as usize, "a page twice");
    }
}

/// The C writer's callsite entries are the Rust writer's, byte for byte,
/// and it refuses what the Rust writer refuses.
mod callsites {
    use super::*;
    use proptest::prelude::*;
    use pstore_ring::debug_args::Callsite;
    use pstore_ring::read::{HeaderTrust, Region};
    use pstore_ring::write::{format, Refused, StreamSpec};

    /// What the C writer says to a callsite whose format is `n` bytes long
    /// and whose other strings are empty.
    fn c_add_format_of(n: usize) -> c_int {
        let mut area = vec![0u8; 8192];
        let mut state = CCallsites {
            area: std::ptr::null_mut(),
            size: 0,
            generation: 0,
            next: 0,
        };
        let empty = CString::default();
        let format = CString::new(vec![b'x'; n]).unwrap();
        let c = CCallsite {
            source: 1,
            level: 7,
            category: 0,
            line: 0,
            module: empty.as_ptr(),
            function: empty.as_ptr(),
            file: empty.as_ptr(),
            format: format.as_ptr(),
        };
        let mut id = 0;
        unsafe {
            crashring_callsites_init(&mut state, area.as_mut_ptr().cast(), 8192, 1);
            crashring_callsite_add(&mut state, &c, &mut id)
        }
    }

    #[test]
    fn an_entry_of_the_largest_size_is_added_and_one_word_more_is_not() {
        use pstore_ring::layout::{CALLSITE_ENTRY_SIZE, MAX_CALLSITE_SIZE};
        // The fixed part, four length words, and the format.
        let fits = MAX_CALLSITE_SIZE - CALLSITE_ENTRY_SIZE - 8;
        assert_eq!(c_add_format_of(fits), 0);
        assert_eq!(c_add_format_of(fits + 1), -libc::E2BIG);
    }

    fn text() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(1u8..=255, 0..700)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn c_and_rust_add_the_same_entries(
            sites in proptest::collection::vec(
                (any::<u8>(), 0u8..8, any::<u16>(), any::<u32>(), text(), text(), text(), text()),
                1..12),
            generation in any::<u64>(),
        ) {
            let specs = [StreamSpec::cpu(0)];
            let cfg = RegionConfig {
                page_size: 1024,
                pages_per_stream: Some(2),
                streams: &specs,
                callsite_pages: 3,
                generation,
                ..Default::default()
            };
            let mut mem = vec![0u8; 16384];
            let mut rust_ids = Vec::new();
            {
                let mut f = format(&mut mem, &cfg).unwrap();
                let area = f.callsites.as_mut().unwrap();
                for (source, level, category, line, m, func, file, fmt) in &sites {
                    rust_ids.push(area.add(&Callsite {
                        source: *source, level: *level, category: *category, line: *line,
                        module: m, function: func, file, format: fmt,
                    }));
                }
            }
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            let range = region.callsites.clone().unwrap().range;
            let rust_area = &mem[range.start as usize..range.end as usize];

            let mut c_area = vec![0xA5u8; rust_area.len()];
            let mut state = CCallsites { area: std::ptr::null_mut(), size: 0, generation: 0, next: 0 };
            let mut c_ids = Vec::new();
            unsafe {
                crashring_callsites_init(&mut state, c_area.as_mut_ptr().cast(), c_area.len() as u32, generation);
            }
            for (source, level, category, line, m, func, file, fmt) in &sites {
                let strings: Vec<CString> = [m, func, file, fmt]
                    .iter()
                    .map(|s| CString::new(s.to_vec()).unwrap())
                    .collect();
                let c = CCallsite {
                    source: *source, level: *level, category: *category, line: *line,
                    module: strings[0].as_ptr(), function: strings[1].as_ptr(),
                    file: strings[2].as_ptr(), format: strings[3].as_ptr(),
                };
                let mut id = 0u32;
                let rc = unsafe { crashring_callsite_add(&mut state, &c, &mut id) };
                c_ids.push(match rc {
                    0 => Ok(id),
                    rc if rc == -libc::E2BIG => Err("too large"),
                    rc if rc == -libc::ENOSPC => Err("full"),
                    rc => panic!("crashring_callsite_add returned {rc}"),
                });
            }
            let rust_ids: Vec<Result<u32, &str>> = rust_ids
                .into_iter()
                .map(|r| r.map_err(|e| match e { Refused::TooLarge(_) => "too large", Refused::Full => "full" }))
                .collect();
            prop_assert_eq!(c_ids, rust_ids);
            prop_assert!(c_area == rust_area, "the areas differ");
        }
    }
}
