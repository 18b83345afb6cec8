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

    /// A generation formatted before the system named itself takes the
    /// name it is given later (the module follows it every write-back
    /// pass): the reader finds the new name under a valid header, a
    /// name longer than the header's 63 bytes cut, the same name again
    /// changes nothing.
    #[test]
    fn the_host_name_followed_after_formatting_keeps_the_header_valid() {
        use pstore_ring::read::{HeaderTrust, Region};
        let specs = [pstore_ring::write::StreamSpec::cpu(0)];
        let rc = RegionConfig {
            page_size: 1024,
            streams: &specs,
            hostname: "(none)",
            ..Default::default()
        };
        let mut r = CRegion::format(&rc, 16 * 1024).unwrap();
        let host = |r: &CRegion| {
            let region = Region::parse(r.bytes(), HeaderTrust::Checksummed).unwrap();
            region.header.hostname.clone()
        };
        assert_eq!(host(&r), "(none)");
        let set = |r: &mut CRegion, name: &str| {
            let name = CString::new(name).unwrap();
            unsafe { crashring_set_hostname(r.mem.as_mut_ptr().cast(), name.as_ptr()) }
        };
        assert!(set(&mut r, "signage-17"));
        assert_eq!(host(&r), "signage-17");
        assert!(!set(&mut r, "signage-17"));
        let long = "h".repeat(70);
        assert!(set(&mut r, &long));
        assert_eq!(host(&r), long[..63]);
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
mod nesting;

/// Writers stopped where a crash or a shutdown can stop them: the pages
/// they leave read as FORMAT.md section 12 says, never as corrupt, and
/// never as intact with someone else's header.
mod stopping;

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
