//! The follower against regions that change between and during its reads,
//! as a live one does: a pool stream handed out again under the same
//! descriptor, and a stream read whole while its writer laps the reader.

use super::*;
use crate::input::live::tests::Script;
use pstore_ring::endian::{Endian, U16, U32, U64};
use pstore_ring::layout::{crc32, PageHeader, DESC_NO_TAILS, DESC_OFFSET, PAGE_MAGIC, STREAM_USER};
use pstore_ring::schema::{Value, EVENT_LOST};
use pstore_ring::write::{self, RegionConfig, StreamSpec, StreamWriter};
use std::sync::atomic::{AtomicUsize, Ordering};
use zerocopy::IntoBytes;

const PAGE: usize = 256;
const PAGES: usize = 4;

/// A region with CPU 0's stream and one user stream, 4 pages of 256
/// bytes each, the user stream handed out as the module hands out a
/// stream of its pool (tails not kept); and where its pages are.
fn pool_region() -> (Vec<u8>, Range<usize>) {
    pool_region_held_by("ui", 7, 1)
}

/// As [`pool_region`], of generation `generation`, its user stream held
/// by `name` and `pid` (free: "" and 0).
fn pool_region_held_by(name: &str, pid: u32, generation: u64) -> (Vec<u8>, Range<usize>) {
    user_region(name, pid, generation, PAGE, PAGES)
}

/// As [`pool_region_held_by`], with `pages` pages of `page` bytes each
/// (also the live copier's tests' region).
pub(crate) fn user_region(
    name: &str,
    pid: u32,
    generation: u64,
    page: usize,
    pages: usize,
) -> (Vec<u8>, Range<usize>) {
    let specs = [
        StreamSpec::cpu(0),
        StreamSpec {
            kind: STREAM_USER,
            cpu: u16::MAX,
            lane: 0,
            name,
            pid,
            uid: 1000,
        },
    ];
    let cfg = RegionConfig {
        page_size: page as u32,
        pages_per_stream: Some(pages as u32),
        streams: &specs,
        generation,
        ..Default::default()
    };
    let mut buf = vec![0u8; write::region_size(&cfg).unwrap()];
    write::format(&mut buf, &cfg).unwrap();
    let at = DESC_OFFSET + DESC_SIZE;
    let mut desc = StreamDesc::read_from_bytes(&buf[at..at + DESC_SIZE]).unwrap();
    desc.flags = U32::new(Endian::NATIVE, DESC_NO_TAILS);
    desc.crc = U32::new(Endian::NATIVE, crc32(&[&desc.as_bytes()[..DESC_SIZE - 4]]));
    buf[at..at + DESC_SIZE].copy_from_slice(desc.as_bytes());
    let start = desc.pages_offset.get(Endian::NATIVE) as usize;
    (buf, start..start + pages * page)
}

/// The user stream of `buf` started over at `start_ts`, as the module
/// does for a new holder (every page zeroed, page 1 opened), with events
/// `from..to` written (each its number, at `start_ts` + its number).
fn hand_out(buf: &mut [u8], pages: &Range<usize>, start_ts: u64, events: Range<u64>) {
    let pages = &mut buf[pages.clone()];
    pages.fill(0);
    let mut w = StreamWriter::start(pages, None, 1, Endian::NATIVE, PAGE, start_ts).unwrap();
    for i in events {
        w.write(start_ts + i, EVENT_LOST, &i.to_le_bytes()).unwrap();
    }
}

/// One poll of `live`: the indexes of stream `stream`'s events handed over.
fn poll(f: &mut Follower, live: &dyn Source, stream: u16) -> Vec<u64> {
    let mut got = Vec::new();
    f.poll(live, |_, items| {
        got.extend(items.iter().filter_map(|p| match p {
            Pulled::Event(e) if e.stream == stream => Some(e.index),
            _ => None,
        }));
    })
    .unwrap();
    got
}

#[test]
fn a_pool_stream_handed_out_again_under_the_same_descriptor_starts_over() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
    // The same process asks again under the same name: the descriptor's
    // bytes do not change, its pages start over, taken later.
    hand_out(&mut buf, &pages, 2_000, 0..3);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2]);
    // Written on, it is followed on.
    let mut more = buf.clone();
    hand_out(&mut more, &pages, 2_000, 0..4);
    assert_eq!(poll(&mut f, &more, 1), [3]);
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.stream == 1).unwrap();
    assert_eq!((ui.handed, ui.missed), (9, 0));
    // What the first holder wrote after the first look is unknown.
    assert!(!ui.missed_exact && !ui.dropped_exact);
}

/// One poll of `live`, as `crashring follow` prints it.
fn printed(f: &mut Follower, live: &dyn Source) -> String {
    let crate::output::Writer::Items(text) = crate::output::Format::Text.writer() else {
        unreachable!("text is an item format")
    };
    let mut out = Vec::new();
    f.poll(live, |view, items| text.items(&mut out, items, view))
        .unwrap();
    String::from_utf8(out).unwrap()
}

const REPLACED: &str =
    "at least 0 events lost (end of stream unknown: replaced before it was read)";

#[test]
fn a_pool_streams_end_taken_by_a_new_holder_is_lost_unknown_under_the_old_name() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
    // Another process takes the stream between two looks.
    let (mut next, _) = pool_region_held_by("kiosk", 9, 1);
    hand_out(&mut next, &pages, 2_000, 0..3);
    let text = printed(&mut f, &next);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].contains(REPLACED), "{text}");
    assert!(
        lines[0].contains("ui") && !lines[0].contains("kiosk"),
        "{text}"
    );
    assert!(lines[1..].iter().all(|l| l.contains("kiosk")), "{text}");
    // Each holder's counts under its own name; the first's end unknown.
    let counts = f.counts(&Selection::default());
    let by = |name: &str| counts.iter().find(|c| c.label.contains(name)).unwrap();
    let (ui, kiosk) = (by("ui"), by("kiosk"));
    assert_eq!((ui.handed, ui.missed, ui.missed_exact), (5, 0, false));
    assert_eq!(
        (kiosk.handed, kiosk.missed, kiosk.missed_exact),
        (3, 0, true)
    );
}

#[test]
fn a_followed_holder_replaced_by_one_not_asked_for_keeps_its_counts_and_unread_end() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let ui = Selection {
        streams: vec!["user:ui".into()],
        ..Selection::default()
    };
    let mut f = Follower::new(true, Pointers::Raw).selecting(ui.clone());
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
    // Freed, then taken by another program, then by ui again: the first
    // ui's end went unread, whatever came between.
    let (free, _) = pool_region_held_by("", 0, 1);
    let text = printed(&mut f, &free);
    assert!(text.contains(REPLACED) && text.contains("ui"), "{text}");
    let (mut kiosk, _) = pool_region_held_by("kiosk", 9, 1);
    hand_out(&mut kiosk, &pages, 2_000, 0..3);
    assert_eq!(printed(&mut f, &kiosk), "");
    let counts = f.counts(&ui);
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!((counts[0].handed, counts[0].missed_exact), (5, false));
    let (mut again, _) = pool_region();
    hand_out(&mut again, &pages, 3_000, 0..2);
    assert_eq!(poll(&mut f, &again, 1), [0, 1]);
    let counts = f.counts(&ui);
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!((counts[0].handed, counts[0].missed_exact), (7, false));
}

#[test]
fn a_new_generation_with_fewer_streams_keeps_the_old_ones_counts() {
    let (mut old, pages) = pool_region();
    hand_out(&mut old, &pages, 1_000, 0..5);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &old, 1), [0, 1, 2, 3, 4]);
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: PAGE as u32,
        pages_per_stream: Some(PAGES as u32),
        streams: &specs,
        generation: 2,
        ..Default::default()
    };
    let mut new = vec![0u8; write::region_size(&cfg).unwrap()];
    write::format(&mut new, &cfg).unwrap();
    let text = printed(&mut f, &new);
    assert_eq!(text.matches(REPLACED).count(), 2, "{text}");
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.label.contains("ui")).unwrap();
    assert_eq!((ui.handed, ui.missed_exact), (5, false));
}

#[test]
fn a_free_pool_stream_taken_loses_nothing() {
    let (free, pages) = pool_region_held_by("", 0, 1);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(printed(&mut f, &free), "");
    let (mut held, _) = pool_region();
    hand_out(&mut held, &pages, 2_000, 0..3);
    let text = printed(&mut f, &held);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("events lost"), "{text}");
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.stream == 1).unwrap();
    assert!(ui.missed_exact && ui.dropped_exact);
}

#[test]
fn a_generation_replaced_between_two_looks_loses_every_streams_end_unknown() {
    let (mut old, pages) = pool_region();
    hand_out(&mut old, &pages, 1_000, 0..5);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &old, 1), [0, 1, 2, 3, 4]);
    let (mut new, _) = pool_region_held_by("ui", 7, 2);
    hand_out(&mut new, &pages, 2_000, 0..2);
    let text = printed(&mut f, &new);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    // CPU 0's stream and the user stream's, then the new generation's.
    assert!(lines[..2].iter().all(|l| l.contains(REPLACED)), "{text}");
    assert!(
        lines[0].contains("[000]") && lines[1].contains("ui"),
        "{text}"
    );
    assert!(
        !lines[2..].iter().any(|l| l.contains("events lost")),
        "{text}"
    );
    let counts = f.counts(&Selection::default());
    assert!(counts.iter().all(|c| !c.missed_exact), "{counts:?}");
}

/// `before` until the `tear_on`-th read that reaches past `cut`, which
/// takes its bytes from `before` below `cut` and from `after` on; `after`
/// from then on. A stream's pages read whole while its writer goes on.
struct Torn {
    before: Vec<u8>,
    after: Vec<u8>,
    cut: u64,
    tear_on: usize,
    reached: AtomicUsize,
}

impl Torn {
    fn new(before: &[u8], after: &[u8], cut: usize, tear_on: usize) -> Torn {
        Torn {
            before: before.to_vec(),
            after: after.to_vec(),
            cut: cut as u64,
            tear_on,
            reached: AtomicUsize::new(0),
        }
    }
}

impl Source for Torn {
    fn len(&self) -> Option<u64> {
        Some(self.after.len() as u64)
    }

    fn read_at(&self, at: FileOffset, buf: &mut [u8]) -> std::io::Result<usize> {
        let end = at.0 + buf.len() as u64;
        let reached = self.reached.load(Ordering::Relaxed);
        if reached >= self.tear_on {
            return self.after.read_at(at, buf);
        }
        if end <= self.cut {
            return self.before.read_at(at, buf);
        }
        self.reached.store(reached + 1, Ordering::Relaxed);
        if reached + 1 < self.tear_on {
            return self.before.read_at(at, buf);
        }
        let below = self.cut.saturating_sub(at.0) as usize;
        let before = self.before.read_at(at, &mut buf[..below])?;
        if before < below {
            return Ok(before);
        }
        let after = self
            .after
            .read_at(FileOffset(at.0 + below as u64), &mut buf[below..])?;
        Ok(below + after)
    }
}

/// The user stream written from its start until `done`, events numbered
/// from 0, each at 1 000 + its number; and how many were written.
fn written(done: impl Fn(&StreamWriter<'_>, u64) -> bool) -> (Vec<u8>, Range<usize>, u64) {
    let (mut buf, range) = pool_region();
    let slots = &mut buf[range.clone()];
    let mut w = StreamWriter::start(slots, None, 1, Endian::NATIVE, PAGE, 1_000).unwrap();
    let mut i = 0;
    while !done(&w, i) {
        w.write(1_000 + i, EVENT_LOST, &i.to_le_bytes()).unwrap();
        i += 1;
    }
    (buf, range, i)
}

/// The user stream written until it opens page `pages`.
fn written_to(pages: u64) -> (Vec<u8>, Range<usize>, u64) {
    written(|w, _| w.page_seq() >= pages)
}

/// The first index of the page in `slot` of `buf`'s user stream.
fn first_index(buf: &[u8], pages: &Range<usize>, slot: usize) -> u64 {
    header(buf, (pages.start + slot * PAGE) as u64, 1, Endian::NATIVE)
        .unwrap()
        .first_index
        .get(Endian::NATIVE)
}

#[test]
fn pages_still_in_the_ring_are_not_counted_missed_when_the_writer_laps_a_whole_read() {
    // Before: pages 5, 6, 7 and 8 (open) in slots 0 to 3. After: 9, 10,
    // 11 (open) and 8, in the same slots.
    let (before, pages, _) = written_to(8);
    let (after, _, total) = written_to(11);
    // Slots 0 and 1 are read before the writer comes back to them (pages
    // 5 and 6), slots 2 and 3 after (11 and 8): page 7 was written over,
    // pages 9 and 10 are in the ring, unread.
    let live = Torn::new(&before, &after, pages.start + 2 * PAGE, 1);
    let mut f = Follower::new(true, Pointers::Raw);
    let mut handed = poll(&mut f, &live, 1);
    handed.extend(poll(&mut f, &live, 1));
    // Pages 5 and 6 as read, and everything the ring holds after.
    let page7 = first_index(&before, &pages, 2);
    let page8 = first_index(&after, &pages, 3);
    let want: Vec<u64> = (first_index(&before, &pages, 0)..page7)
        .chain(page8..total)
        .collect();
    assert_eq!(handed, want);
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.stream == 1).unwrap();
    assert_eq!(ui.missed, total - want.len() as u64);
    // Page 7 went unread, and any drops it counted with it.
    assert!(ui.missed_exact && !ui.dropped_exact);
}

#[test]
fn a_slot_of_bytes_that_are_no_page_does_not_stop_the_stream() {
    // Page 2 open with one event, then with three; slots 2 and 3 hold
    // bytes whose seq would read as the largest there is.
    let (mut now, pages, n) = written_to(2);
    let (mut later, _, total) = written(|_, i| i >= n + 2);
    for buf in [&mut now, &mut later] {
        let unwritten = &mut buf[pages.start + 2 * PAGE..pages.end];
        assert!(
            unwritten.iter().all(|&b| b == 0),
            "the writer reached slot 2"
        );
        unwritten.fill(0xFF);
    }
    let mut f = Follower::new(true, Pointers::Raw);
    let mut handed = poll(&mut f, &now, 1);
    handed.extend(poll(&mut f, &later, 1));
    assert_eq!(handed, (0..total).collect::<Vec<_>>());
}

#[test]
fn pages_still_in_the_ring_are_not_counted_missed_when_the_writer_laps_between_polls() {
    // First pages 1 to 3; then, the reader coming back to page 3, pages
    // 5 to 8 (7 in slot 2), and while it reads the stream whole, 9 to 11.
    let (first, pages, read_first) = written_to(3);
    let (before, _, _) = written_to(8);
    let (after, _, total) = written_to(11);
    // Slot 2's page 7 says the reader was lapped; the whole read then
    // takes slots 0 and 1 before the writer comes back to them (pages 5
    // and 6), slots 2 and 3 after (11 and 8).
    let live = Torn::new(&before, &after, pages.start + 2 * PAGE, 2);
    let mut f = Follower::new(true, Pointers::Raw);
    let mut handed = poll(&mut f, &first, 1);
    assert_eq!(handed.len() as u64, read_first);
    handed.extend(poll(&mut f, &live, 1));
    handed.extend(poll(&mut f, &after, 1));
    let page7 = first_index(&before, &pages, 2);
    let page8 = first_index(&after, &pages, 3);
    let want: Vec<u64> = (0..read_first)
        .chain(first_index(&before, &pages, 0)..page7)
        .chain(page8..total)
        .collect();
    assert_eq!(handed, want);
}

#[test]
fn a_pool_stream_handed_out_again_and_wrapped_past_its_old_first_slot_starts_over() {
    // The old holder: small events, two pages of them. The new one: big
    // events, six pages, so that its first slot holds page 5, past the
    // old holder's page 1, and every event it still has is numbered below
    // where the old one had got to.
    let (mut buf, pages) = pool_region();
    let slots = &mut buf[pages.clone()];
    let mut w = StreamWriter::start(slots, None, 1, Endian::NATIVE, PAGE, 1_000).unwrap();
    let mut old = 0;
    while w.page_seq() < 2 {
        w.write(1_000 + old, EVENT_LOST, &old.to_le_bytes())
            .unwrap();
        old += 1;
    }
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), (0..old).collect::<Vec<_>>());
    let slots = &mut buf[pages.clone()];
    slots.fill(0);
    let mut w = StreamWriter::start(slots, None, 1, Endian::NATIVE, PAGE, 5_000).unwrap();
    let log = pstore_ring::schema::builtin(pstore_ring::schema::EVENT_LOG).unwrap();
    let line = [
        Value::Unsigned(6),
        Value::Chars(b"ui"),
        Value::Str(&[b'x'; 80]),
    ];
    let mut new = 0;
    while w.page_seq() < 6 {
        w.write_event(5_000 + new, log, &line).unwrap();
        new += 1;
    }
    assert!(
        new < old,
        "{new} events, not fewer than the old holder's {old}"
    );
    let handed = poll(&mut f, &buf, 1);
    let kept = first_index(&buf, &pages, 2);
    assert_eq!(handed, (kept..new).collect::<Vec<_>>());
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.stream == 1).unwrap();
    assert_eq!(ui.missed, kept, "the new holder's pages written over");
}

#[test]
fn a_first_slot_caught_being_opened_is_no_new_holder() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..3);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2]);
    // Read while its writer opens a page there: the new first time is
    // stored, the seq not yet, the page marked as being opened.
    let mut opening = buf.clone();
    let at = pages.start;
    let mut h = PageHeader::read_from_bytes(&opening[at..at + PAGE_HEADER_SIZE]).unwrap();
    h.flags = U16::new(Endian::NATIVE, pstore_ring::layout::PAGE_RESETTING);
    h.first_ts = U64::new(Endian::NATIVE, 9_000);
    opening[at..at + PAGE_HEADER_SIZE].copy_from_slice(h.as_bytes());
    assert_eq!(poll(&mut f, &opening, 1), [] as [u64; 0]);
    // Its writer went on: only what is new comes.
    hand_out(&mut buf, &pages, 1_000, 0..5);
    assert_eq!(poll(&mut f, &buf, 1), [3, 4]);
}

/// The user stream of `buf` handed to a new holder at `start_ts`, which
/// writes log lines of 80 bytes until it opens page `to`; how many.
fn held_anew_to(buf: &mut [u8], pages: &Range<usize>, start_ts: u64, to: u64) -> u64 {
    let slots = &mut buf[pages.clone()];
    slots.fill(0);
    let mut w = StreamWriter::start(slots, None, 1, Endian::NATIVE, PAGE, start_ts).unwrap();
    let log = pstore_ring::schema::builtin(pstore_ring::schema::EVENT_LOG).unwrap();
    let line = [
        Value::Unsigned(6),
        Value::Chars(b"ui"),
        Value::Str(&[b'x'; 80]),
    ];
    let mut n = 0;
    while w.page_seq() < to {
        w.write_event(start_ts + n, log, &line).unwrap();
        n += 1;
    }
    n
}

#[test]
fn a_pool_stream_handed_out_again_as_far_as_its_old_first_slot_starts_over() {
    // The old holder got to page 7, the new one to page 6: page 5 in the
    // first slot either way, and not yet a page 7 to find.
    let (mut buf, pages, _) = written_to(7);
    let mut f = Follower::new(true, Pointers::Raw);
    poll(&mut f, &buf, 1);
    let new = held_anew_to(&mut buf, &pages, 50_000, 6);
    let kept = first_index(&buf, &pages, 2);
    assert_eq!(poll(&mut f, &buf, 1), (kept..new).collect::<Vec<_>>());
}

#[test]
fn a_pool_stream_handed_out_again_as_far_as_the_page_it_was_in_starts_over() {
    // The old holder got to page 2; the new one to page 5, so that page 2
    // is in its slot again, and the first slot holds a newer page.
    let (mut buf, pages, _) = written_to(2);
    let mut f = Follower::new(true, Pointers::Raw);
    poll(&mut f, &buf, 1);
    let new = held_anew_to(&mut buf, &pages, 50_000, 5);
    let kept = first_index(&buf, &pages, 1);
    assert_eq!(poll(&mut f, &buf, 1), (kept..new).collect::<Vec<_>>());
}

/// The user stream written as far as page 4 by a writer that gives every
/// event one time, so that its pages all start at the same time, and
/// counts a drop on each page it opens, and `more` drops on the last;
/// and how many drops it counted.
fn dropping_at_one_time(more: u32) -> (Vec<u8>, u32) {
    let (mut buf, range) = pool_region();
    let slots = &mut buf[range];
    let mut w = StreamWriter::start(slots, None, 1, Endian::NATIVE, PAGE, 1_000).unwrap();
    let (mut page, mut drops, mut i) = (0, 0, 0u64);
    while w.page_seq() < 4 {
        if w.page_seq() != page {
            page = w.page_seq();
            w.drop_event();
            drops += 1;
        }
        w.write(1_000, EVENT_LOST, &i.to_le_bytes()).unwrap();
        i += 1;
    }
    for _ in 0..more {
        w.drop_event();
    }
    (buf, drops + more)
}

#[test]
fn drops_on_pages_that_start_at_the_same_time_are_each_counted() {
    let (before, counted) = dropping_at_one_time(0);
    let (after, all) = dropping_at_one_time(2);
    let mut f = Follower::new(true, Pointers::Raw);
    let dropped = |f: &Follower| {
        f.counts(&Selection::default())
            .iter()
            .find(|c| c.stream == 1)
            .unwrap()
            .dropped
    };
    poll(&mut f, &before, 1);
    assert_eq!(dropped(&f), u64::from(counted));
    poll(&mut f, &after, 1);
    assert_eq!(dropped(&f), u64::from(all));
    let counts = f.counts(&Selection::default());
    assert!(counts.iter().all(|c| c.missed_exact && c.dropped_exact));
}

#[test]
fn an_open_page_read_before_its_writer_went_on_is_read_on_not_counted_missed() {
    // Before: pages 5, 6, 7 (open, one event) and 4 in slots 0 to 3.
    // After: page 7 closed full, page 8 opened in slot 3. The whole read
    // takes slots 0 to 2 before (page 7 with its one event), slot 3 after.
    let (before, pages, _) = written_to(7);
    let (after, _, total) = written_to(8);
    let live = Torn::new(&before, &after, pages.start + 3 * PAGE, 1);
    let mut f = Follower::new(true, Pointers::Raw);
    let mut handed = poll(&mut f, &live, 1);
    handed.extend(poll(&mut f, &after, 1));
    // Page 7's events after its first are in the ring: read on, not missed.
    let page5 = first_index(&before, &pages, 0);
    assert_eq!(handed, (page5..total).collect::<Vec<_>>());
    let ui = f
        .counts(&Selection::default())
        .into_iter()
        .find(|c| c.stream == 1)
        .unwrap();
    assert_eq!(ui.missed, page5);
}

/// `buf`'s user stream with the page in `slot` as the module's copy
/// leaves one whose memory could not be read: zeros, and a magic that is
/// not the page magic.
fn unreadable(buf: &mut [u8], pages: &Range<usize>, slot: usize) {
    let at = pages.start + slot * PAGE;
    buf[at..at + PAGE].fill(0);
    buf[at..at + 4].copy_from_slice(&(!PAGE_MAGIC).to_ne_bytes());
}

#[test]
fn a_page_the_copy_could_not_read_is_counted_missed_and_the_stream_goes_on() {
    // First pages 3 to 6 (open, one event); then 7 and 8, page 6 in
    // slot 1 unreadable. Each poll sees it again; once the writer is
    // past it, it is a loss, not a wait.
    let (first, pages, _) = written_to(6);
    let (mut later, _, total) = written_to(8);
    unreadable(&mut later, &pages, 1);
    let mut f = Follower::new(true, Pointers::Raw);
    let mut handed = poll(&mut f, &first, 1);
    for _ in 0..3 {
        handed.extend(poll(&mut f, &later, 1));
    }
    let page6 = first_index(&first, &pages, 1);
    let page7 = first_index(&later, &pages, 2);
    // Pages 3 and 4 were in slots 2 and 3 at the first poll.
    let want: Vec<u64> = (first_index(&first, &pages, 2)..=page6)
        .chain(page7..total)
        .collect();
    assert_eq!(handed, want);
    // Read whole from the start, the same.
    let mut whole = Follower::new(true, Pointers::Raw);
    let handed = poll(&mut whole, &later, 1);
    let from = first_index(&later, &pages, 0);
    assert_eq!(
        handed,
        (from..page6).chain(page7..total).collect::<Vec<_>>()
    );
}

#[test]
fn a_stream_after_a_descriptor_that_fails_its_checks_keeps_its_name() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    // CPU 0's descriptor, its CRC broken: the region lists stream 1 only.
    buf[DESC_OFFSET + DESC_SIZE - 1] ^= 0xFF;
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
    let counts = f.counts(&Selection::default());
    let ui = counts.iter().find(|c| c.stream == 1).unwrap();
    assert!(ui.label.contains("ui"), "{counts:?}");
}

#[test]
fn a_descriptor_whose_pages_lie_past_any_region_is_passed_over() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let at = DESC_OFFSET + DESC_SIZE;
    let mut desc = StreamDesc::read_from_bytes(&buf[at..at + DESC_SIZE]).unwrap();
    desc.pages_offset = U64::new(Endian::NATIVE, u64::MAX - 1);
    desc.crc = U32::new(Endian::NATIVE, crc32(&[&desc.as_bytes()[..DESC_SIZE - 4]]));
    buf[at..at + DESC_SIZE].copy_from_slice(desc.as_bytes());
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [] as [u64; 0]);
}

#[test]
fn a_poll_hands_over_its_events_a_chunk_at_a_time_in_order() {
    let (mut buf, pages) = user_region("ui", 7, 1, 4096, 256);
    let mut w = StreamWriter::start(&mut buf[pages], None, 1, Endian::NATIVE, 4096, 1_000).unwrap();
    let n = 2 * CHUNK as u64 + 100;
    for i in 0..n {
        w.write(1_000 + i, EVENT_LOST, &i.to_le_bytes()).unwrap();
    }
    let mut f = Follower::new(true, Pointers::Raw);
    let (mut sizes, mut indexes) = (Vec::new(), Vec::new());
    f.poll(&buf, |_, items| {
        sizes.push(items.len());
        indexes.extend(items.iter().filter_map(|p| match p {
            Pulled::Event(e) => Some(e.index),
            Pulled::Loss(_) => None,
        }));
    })
    .unwrap();
    assert_eq!(sizes, [CHUNK, CHUNK, 100]);
    assert_eq!(indexes, (0..n).collect::<Vec<_>>());
}

#[test]
fn a_follow_of_some_streams_reads_no_other() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let cpu0 = StreamDesc::read_from_bytes(&buf[DESC_OFFSET..DESC_OFFSET + DESC_SIZE]).unwrap();
    let start = cpu0.pages_offset.get(Endian::NATIVE);
    let live = Script::failing(buf, start..start + (PAGES * PAGE) as u64);
    let mut all = Follower::new(true, Pointers::Raw);
    assert!(all.poll(&live, |_, _| {}).is_err());
    let ui = Selection {
        streams: vec!["user:ui".into()],
        ..Selection::default()
    };
    let mut some = Follower::new(true, Pointers::Raw).selecting(ui.clone());
    assert_eq!(poll(&mut some, &live, 1), [0, 1, 2, 3, 4]);
    let counts = some.counts(&Selection::default());
    assert_eq!(counts.iter().map(|c| c.stream).collect::<Vec<_>>(), [1]);
}

#[test]
fn a_poll_that_fails_after_a_new_generation_still_hands_over_the_old_ends() {
    // The old generation's tables are longer than the whole new region.
    let specs: Vec<StreamSpec> = (0..64).map(StreamSpec::cpu).collect();
    let old_cfg = RegionConfig {
        page_size: PAGE as u32,
        pages_per_stream: Some(PAGES as u32),
        streams: &specs,
        ..Default::default()
    };
    let mut old = vec![0u8; write::region_size(&old_cfg).unwrap()];
    write::format(&mut old, &old_cfg).unwrap();
    let new_cfg = RegionConfig {
        page_size: PAGE as u32,
        pages_per_stream: Some(2),
        streams: &specs[..1],
        generation: 2,
        ..Default::default()
    };
    let mut new = vec![0u8; write::region_size(&new_cfg).unwrap()];
    write::format(&mut new, &new_cfg).unwrap();
    let mut f = Follower::new(true, Pointers::Raw);
    f.poll(&old, |_, _| {}).unwrap();
    assert!(f.tables.len() > new.len());
    // The new generation's descriptors cannot be read this time.
    let failing = Script::failing(
        new.clone(),
        DESC_OFFSET as u64..(DESC_OFFSET + DESC_SIZE) as u64,
    );
    let mut replaced = 0;
    let polled = f.poll(&failing, |_, items| replaced += items.len());
    assert!(polled.is_err());
    assert_eq!(replaced, 64);
    f.poll(&new, |_, _| {}).unwrap();
}

#[test]
fn an_end_replaced_after_a_start_from_now_is_placed_after_what_was_there() {
    let (mut old, pages) = pool_region();
    hand_out(&mut old, &pages, 1_000, 0..5);
    let mut f = Follower::new(false, Pointers::Raw);
    assert_eq!(printed(&mut f, &old), "");
    let (new, _) = pool_region_held_by("ui", 7, 2);
    let text = printed(&mut f, &new);
    let ui = text.lines().find(|l| l.contains("ui")).unwrap();
    assert!(
        ui.contains("0.000001004") && ui.contains(REPLACED),
        "{text}"
    );
}

#[test]
fn an_end_found_after_a_failed_poll_keeps_the_old_holders_name() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    let mut f = Follower::new(true, Pointers::Raw);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
    // Another program's now; the descriptors are read, what follows them
    // is not.
    let (mut kiosk, _) = pool_region_held_by("kiosk", 9, 1);
    hand_out(&mut kiosk, &pages, 2_000, 0..3);
    let after_descs = (DESC_OFFSET + 2 * DESC_SIZE) as u64;
    let failing = Script::failing(kiosk.clone(), after_descs..after_descs + 1);
    assert!(f.poll(&failing, |_, _| {}).is_err());
    let text = printed(&mut f, &kiosk);
    let lost = text.lines().find(|l| l.contains(REPLACED)).unwrap();
    assert!(lost.contains("ui") && !lost.contains("kiosk"), "{text}");
}

#[test]
fn a_descriptor_whose_pages_claim_the_header_does_not_stop_a_selecting_follow() {
    let (mut buf, pages) = pool_region();
    hand_out(&mut buf, &pages, 1_000, 0..5);
    // CPU 0's descriptor says its pages start at the region's start (its
    // CRC then fails too: a user region file's bytes are its writer's).
    let mut cpu0 = StreamDesc::read_from_bytes(&buf[DESC_OFFSET..DESC_OFFSET + DESC_SIZE]).unwrap();
    cpu0.pages_offset = U64::new(Endian::NATIVE, 0);
    buf[DESC_OFFSET..DESC_OFFSET + DESC_SIZE].copy_from_slice(cpu0.as_bytes());
    let ui = Selection {
        streams: vec!["user:ui".into()],
        ..Selection::default()
    };
    let mut f = Follower::new(true, Pointers::Raw).selecting(ui);
    assert_eq!(poll(&mut f, &buf, 1), [0, 1, 2, 3, 4]);
}
