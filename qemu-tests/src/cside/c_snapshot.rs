//! The live snapshot (kernel/crashring_snapshot.c) taken while writers run
//! flat out: every snapshot must decode to events that are exactly what
//! their writers wrote under each number, in order, with every missing
//! one counted, and never a torn page.

use super::*;
use extractor::output::select::Selection;
use pstore_ring::read::{HeaderTrust, PageStatus, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{RegionConfig, StreamSpec};
use pstore_ring::Endian;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const STREAMS: usize = 3;
const SNAPSHOTS: usize = 10_000;
/// Pages per stream: the rings wrap every few milliseconds.
const PAGES: u32 = 8;

/// A snapshot's state, in memory of the size the C code asks for.
struct Snapshot {
    mem: Vec<u64>,
}

impl Snapshot {
    fn of(live: *const u8, size: usize) -> Snapshot {
        let bytes = unsafe { crashring_snapshot_bytes(live.cast(), size as u64) };
        assert!(bytes > 0, "the live region's header was refused");
        let mut mem = vec![0u64; (bytes as usize).div_ceil(8)];
        let s =
            unsafe { crashring_snapshot_init(mem.as_mut_ptr().cast(), live.cast(), size as u64) };
        assert!(!s.is_null(), "the live region's tables were refused");
        Snapshot { mem }
    }

    /// The whole region, read in `chunks` sizes in turn, as a reader of
    /// /dev/crashring-current might.
    fn read_all(&mut self, size: usize, chunks: &[usize]) -> Vec<u8> {
        let mut out = vec![0u8; size];
        let mut at = 0;
        for &want in chunks.iter().cycle() {
            if at == size {
                break;
            }
            let want = want.min(size - at);
            let n = unsafe {
                crashring_snapshot_read(
                    self.mem.as_mut_ptr().cast(),
                    at as u64,
                    out[at..].as_mut_ptr().cast(),
                    want,
                )
            };
            assert!(n > 0, "read at {at} gave {n}");
            at += n as usize;
        }
        out
    }
}

/// The text events carry repeats every `TEXTS` numbers.
const TEXTS: u64 = 1950;

/// Event `i` of stream `s`: its time and payload, both from its number,
/// so that a torn or invented event cannot pass for one.
fn event(s: usize, i: u64) -> (u64, Vec<u8>) {
    let text = vec![b'a' + (i % 26) as u8; (i % 150) as usize];
    let def = schema::builtin(schema::EVENT_MARKER).unwrap();
    let values = [
        Value::Unsigned(number(s, i).into()),
        Value::Chars(b"live"),
        Value::Str(&text),
    ];
    let mut buf = vec![0u8; 512];
    let n = schema::encode_payload(def, &values, Endian::NATIVE, &mut buf).unwrap();
    buf.truncate(n);
    (1_000 + 3 * i, buf)
}

/// The marker's first field (a `u32`): the event's number, with its
/// stream in the top bits.
fn number(s: usize, i: u64) -> u32 {
    (i as u32 & 0x0fff_ffff) | (s as u32) << 28
}

/// Checks events against what their writers wrote without encoding each
/// again: the payload is the number's 4 bytes, then what depends on the
/// number modulo [`TEXTS`] only.
struct Expected {
    tails: Vec<Vec<u8>>,
}

impl Expected {
    fn new() -> Expected {
        let tails = (0..TEXTS).map(|k| event(0, k).1[4..].to_vec()).collect();
        Expected { tails }
    }

    fn matches(&self, s: usize, e: &pstore_ring::read::Event<'_>) -> bool {
        let i = e.index;
        let tail = &self.tails[(i % TEXTS) as usize];
        e.ts == 1_000 + 3 * i
            && e.payload.len() >= 4 + tail.len()
            && e.payload[..4] == number(s, i).to_ne_bytes()
            && e.payload[4..4 + tail.len()] == tail[..]
    }
}

/// Stands a region's stream state in for a CPU of another thread.
struct Owned(*mut StreamState);
unsafe impl Send for Owned {}

/// Writes stream `s`'s events, numbered from `from`, as fast as it can,
/// each while `more` (told its number) says so; returns the next number.
fn write_numbered(st: Owned, s: usize, from: u64, mut more: impl FnMut(u64) -> bool) -> u64 {
    let mut i = from;
    while more(i) {
        let (ts, p) = event(s, i);
        let err = unsafe {
            crashring_write(
                st.0,
                ts,
                schema::EVENT_MARKER,
                p.as_ptr().cast(),
                p.len() as u32,
            )
        };
        assert_eq!(err, 0);
        i += 1;
    }
    i
}

/// The region's bytes, read by the snapshotting thread while others write.
#[derive(Clone, Copy)]
struct Live(*const u8, usize);
unsafe impl Send for Live {}

#[test]
fn snapshots_under_running_writers_show_only_what_was_written() {
    let specs: Vec<StreamSpec> = (0..STREAMS as u16).map(StreamSpec::cpu).collect();
    let rc = RegionConfig {
        page_size: 4096,
        pages_per_stream: Some(PAGES),
        streams: &specs,
        callsite_pages: 2,
        ..Default::default()
    };
    let mut region = CRegion::format(&rc, (STREAMS * PAGES as usize + 8) * 4096).unwrap();
    let live = Live(region.bytes().as_ptr(), region.bytes().len());
    let written: Vec<AtomicU64> = (0..STREAMS).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let mut resetting = 0;
    let expected = Expected::new();
    std::thread::scope(|scope| {
        for (s, count) in written.iter().enumerate() {
            let st = Owned(region.stream(s));
            let stop = &stop;
            scope.spawn(move || {
                write_numbered(st, s, 0, |i| {
                    count.store(i, Ordering::Release);
                    !stop.load(Ordering::Relaxed)
                })
            });
        }
        // Stops the writers however the snapshots end, a failed check included.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        // Each ring has wrapped before the first snapshot.
        while written.iter().any(|c| c.load(Ordering::Acquire) < 10_000) {
            std::thread::yield_now();
        }
        let chunks: [&[usize]; 3] = [&[1 << 20], &[4096], &[1000, 777, 65536, 1]];
        for n in 0..SNAPSHOTS {
            let before: Vec<u64> = written.iter().map(|c| c.load(Ordering::Acquire)).collect();
            let mut snap = Snapshot::of(live.0, live.1);
            let bytes = snap.read_all(live.1, chunks[n % chunks.len()]);
            let after: Vec<u64> = written.iter().map(|c| c.load(Ordering::Acquire)).collect();
            resetting += check(&bytes, &before, &after, n, &expected);
        }
    });
    // Rewritten under every try is for writers faster than a page copy,
    // which these are not: a rare page at most.
    assert!(
        resetting < SNAPSHOTS / 100,
        "{resetting} pages shown resetting in {SNAPSHOTS} snapshots"
    );
}

/// Checks one snapshot, taken when each stream had written `before` and
/// before it had written `after` (the event numbered `after` possibly
/// under way); returns how many pages it shows resetting.
fn check(bytes: &[u8], before: &[u64], after: &[u64], n: usize, expected: &Expected) -> usize {
    let region = Region::parse(bytes, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    let mut resetting = 0;
    for (s, st) in trace.streams.iter().enumerate() {
        for p in &st.pages {
            match p.status {
                PageStatus::Intact | PageStatus::Salvaged | PageStatus::Unused => {}
                PageStatus::Resetting => resetting += 1,
                other => panic!("snapshot {n}: stream {s} page {} is {other:?}", p.slot),
            }
        }
        let mut last = None;
        for e in &st.events {
            assert!(
                expected.matches(s, e),
                "snapshot {n}: stream {s} event {} is not what was written: {e:?}",
                e.index
            );
            assert!(
                last < Some(e.index),
                "snapshot {n}: stream {s} out of order"
            );
            last = Some(e.index);
        }
        let newest = last.expect("every stream has events");
        // Every event up to the newest is shown or counted lost, and so
        // are those of a gap the writer left after it: a page copied
        // before its writer filled it and moved on to the next page,
        // which was copied after with no event yet (FORMAT.md, "Reading
        // a live region"). A gap counts only events that were written.
        let end = st
            .losses
            .iter()
            .map(|l| l.at_index)
            .fold(newest + 1, u64::max);
        assert_eq!(
            st.events.len() as u64 + st.lost_events(),
            end,
            "snapshot {n}: stream {s}: {:?}",
            st.losses
        );
        assert!(
            end <= after[s] + 1,
            "snapshot {n}: stream {s} counts events up to {end} lost, {} were begun after it",
            after[s] + 1
        );
        // The snapshot is of now: events written before it started are in
        // it, unless the open page changed at every try.
        if !st.pages.iter().any(|p| p.status == PageStatus::Resetting) {
            assert!(
                newest + 1 >= before[s],
                "snapshot {n}: stream {s} ends at {newest}, {} were written before it",
                before[s]
            );
        }
    }
    assert!(
        trace.diagnostics.iter().all(|d| {
            let status = d.stream.zip(d.page).and_then(|(s, p)| {
                trace
                    .streams
                    .get(s as usize)?
                    .pages
                    .iter()
                    .find(|r| r.slot == p)
            });
            status.is_some_and(|r| r.status == PageStatus::Resetting)
        }),
        "snapshot {n}: {:?}",
        trace.diagnostics
    );
    resetting
}

/// The live region as `crashring follow` reads /dev/crashring-current: a
/// fresh snapshot per poll, read through the extractor's `Source`.
struct LiveSource {
    snap: std::sync::Mutex<Snapshot>,
    size: u64,
}

impl extractor::input::source::Source for LiveSource {
    fn len(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read_at(
        &self,
        offset: extractor::input::source::FileOffset,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        let mut snap = self.snap.lock().unwrap();
        let n = unsafe {
            crashring_snapshot_read(
                snap.mem.as_mut_ptr().cast(),
                offset.0,
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        usize::try_from(n).map_err(|_| std::io::Error::from_raw_os_error(-n))
    }
}

#[test]
fn following_running_writers_hands_each_event_once_and_counts_every_one_missed() {
    use extractor::follow::Follower;
    use pstore_ring::kprintf::Pointers;
    use pstore_ring::merge::Pulled;

    const EACH: u64 = 300_000;
    let specs: Vec<StreamSpec> = (0..STREAMS as u16).map(StreamSpec::cpu).collect();
    let rc = RegionConfig {
        page_size: 4096,
        pages_per_stream: Some(PAGES),
        streams: &specs,
        ..Default::default()
    };
    let mut region = CRegion::format(&rc, (STREAMS * PAGES as usize + 8) * 4096).unwrap();
    let live = Live(region.bytes().as_ptr(), region.bytes().len());
    let expected = Expected::new();
    let done = AtomicU64::new(0);
    let mut follower = Follower::new(true, Pointers::Hidden);
    // Per stream: the indexes handed over, and the events missed.
    let mut handed: Vec<Vec<u64>> = vec![Vec::new(); STREAMS];
    let mut missed = [0u64; STREAMS];
    let mut poll = |follower: &mut Follower| {
        let source = LiveSource {
            snap: std::sync::Mutex::new(Snapshot::of(live.0, live.1)),
            size: live.1 as u64,
        };
        follower
            .poll(&source, |_, items| {
                for item in items {
                    match item {
                        Pulled::Event(e) => {
                            let s = usize::from(e.stream);
                            assert!(expected.matches(s, e), "not what was written: {e:?}");
                            handed[s].push(e.index);
                        }
                        Pulled::Loss(l) => missed[usize::from(l.stream)] += l.events,
                    }
                }
            })
            .unwrap();
    };
    // Following from before the first event: every one is handed or missed.
    poll(&mut follower);
    std::thread::scope(|scope| {
        for s in 0..STREAMS {
            let st = Owned(region.stream(s));
            let done = &done;
            scope.spawn(move || {
                write_numbered(st, s, 0, |i| i < EACH);
                done.fetch_add(1, Ordering::Release);
            });
        }
        while done.load(Ordering::Acquire) < STREAMS as u64 {
            poll(&mut follower);
        }
    });
    // The writers are done: one more poll sees their last events.
    poll(&mut follower);
    let counts = follower.counts(&Selection::default());
    for s in 0..STREAMS {
        assert!(
            handed[s].windows(2).all(|w| w[0] < w[1]),
            "stream {s}: handed over out of order"
        );
        assert_eq!(
            handed[s].len() as u64 + missed[s],
            EACH,
            "stream {s}: {} handed and {} missed of {EACH} written",
            handed[s].len(),
            missed[s]
        );
        assert_eq!(counts[s].handed, handed[s].len() as u64);
        assert_eq!(counts[s].missed, missed[s]);
        assert!(!handed[s].is_empty());
    }
}

#[test]
fn following_counts_each_drop_of_the_writer_once() {
    use extractor::follow::Follower;
    use pstore_ring::kprintf::Pointers;
    use pstore_ring::merge::Pulled;
    use pstore_ring::read::LossKind;

    let specs = [StreamSpec::cpu(0)];
    let rc = RegionConfig {
        page_size: 4096,
        pages_per_stream: Some(64),
        streams: &specs,
        ..Default::default()
    };
    let mut region = CRegion::format(&rc, 70 * 4096).unwrap();
    let live = Live(region.bytes().as_ptr(), region.bytes().len());
    let st = Owned(region.stream(0));
    let mut written = 0u64;
    // `events` numbered events, then `drops` the writer cannot record (a
    // payload over a page): it counts them on its current page.
    let mut write = |events: u64, drops: u64| {
        let end = written + events;
        written = write_numbered(Owned(st.0), 0, written, |i| i < end);
        let big = vec![0u8; 5000];
        for _ in 0..drops {
            let err = unsafe {
                crashring_write(st.0, 0, schema::EVENT_MARKER, big.as_ptr().cast(), 5000)
            };
            assert_ne!(err, 0, "a payload over a page was recorded");
        }
    };
    let poll = |follower: &mut Follower| {
        let source = LiveSource {
            snap: std::sync::Mutex::new(Snapshot::of(live.0, live.1)),
            size: live.1 as u64,
        };
        let mut dropped = 0;
        follower
            .poll(&source, |_, items| {
                for item in items {
                    if let Pulled::Loss(l) = item {
                        assert_eq!(l.kind, LossKind::Dropped, "{l:?}");
                        dropped += l.events;
                    }
                }
            })
            .unwrap();
        dropped
    };
    write(10, 2);
    // One follower from the start sees those; one from now does not.
    let (mut all, mut now) = (
        Follower::new(true, Pointers::Hidden),
        Follower::new(false, Pointers::Hidden),
    );
    assert_eq!((poll(&mut all), poll(&mut now)), (2, 0));
    // More on the same page: only the new ones count, once.
    write(5, 3);
    assert_eq!((poll(&mut all), poll(&mut now)), (3, 3));
    assert_eq!((poll(&mut all), poll(&mut now)), (0, 0));
    // Pages later, more drops.
    write(2000, 1);
    assert_eq!((poll(&mut all), poll(&mut now)), (1, 1));
    // Drops alone on a page (pages on) whose events were all handed over
    // before.
    write(200, 0);
    assert_eq!((poll(&mut all), poll(&mut now)), (0, 0));
    write(0, 2);
    assert_eq!((poll(&mut all), poll(&mut now)), (2, 2));
    let counts = (
        all.counts(&Selection::default())[0].dropped,
        now.counts(&Selection::default())[0].dropped,
    );
    assert_eq!(counts, (8, 6));
    assert_eq!(all.counts(&Selection::default())[0].handed, written);
}
