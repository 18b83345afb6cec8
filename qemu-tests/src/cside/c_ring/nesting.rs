//! Nesting lanes (FORMAT.md, "Nesting lanes"): signals stand in for the
//! interrupts, softirqs and NMIs that start a record while their CPU is in
//! the middle of another, at every depth the lanes have and one past it.

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
            // irq_handler_exit { irq = depth, ret = lane }, by hand and on
            // the stack: a signal that lands inside malloc() must not
            // call it again (glibc's tcache is not reentrant: a Vec here
            // once aborted the run with "free(): too many chunks detected
            // in tcache", and hung it under AddressSanitizer).
            let mut p = [0u8; 8];
            p[..4].copy_from_slice(&(depth as u32).to_ne_bytes());
            p[4..].copy_from_slice(&(lane as u32).to_ne_bytes());
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
