//! Writers stopped where a crash or a shutdown can stop them: the pages
//! they leave read as FORMAT.md section 12 says, never as corrupt, and
//! never as intact with someone else's header.

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

/// A writer that enters after the stop sees `stopped` and leaves without
/// touching its page, but holds `busy` while it passes. A stopper that
/// catches it there must close the page all the same: it saw the writer
/// outside before, so every write begun before the stop had ended. Where
/// a second look at `busy` left such a page open, a clean shutdown left
/// it for the reader to salvage (ci31, round 128 of the test above);
/// here the writer enters at that moment every time.
#[test]
fn a_writer_passing_after_the_stop_leaves_the_page_closed() {
    let mut region = one_stream(256, 16);
    let s = region.stream(0);
    for i in 0..10 {
        assert_eq!(write(s, i), 0);
    }
    unsafe { cr_test_stop_all_with_late_writers(s, 1) };
    let r = Region::parse(region.bytes(), HeaderTrust::Checksummed).unwrap();
    let trace = r.decode();
    let st = &trace.streams[0];
    assert_eq!(
        st.pages_with(PageStatus::Salvaged),
        0,
        "the stop closes the page"
    );
    assert_exact(st, 10);
    // The stream is stopped: a writer that comes later records nothing.
    assert_ne!(write(s, 10), 0);
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
                cr_test_write_stopping_at(s, ts, schema::EVENT_LOST, p.as_ptr().cast(), 8, stop_at)
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
