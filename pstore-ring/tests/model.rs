//! Property: for any event stream, page size, CPU count, word size and
//! byte order, with any number of wraparounds, crashed or closed, the
//! writer refuses exactly what the format says it must, and the reader
//! returns exactly the events of the pages the ring still holds (the
//! newest `pages` of each stream, as predicted from the format's rules,
//! not from the writer) and counts every other event as lost: recovered +
//! lost = written, also when a stream's newest pages are then corrupted
//! (its tail tells how far it went).

mod common;

use common::*;
use proptest::prelude::*;
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{HeaderTrust, LossKind, PageReport, PageStatus, Region};

fn check(setup: &Setup) -> Result<(), TestCaseError> {
    let model = build(setup);
    for (n, (got, want)) in model.results.iter().zip(&model.want.results).enumerate() {
        prop_assert_eq!(got, want, "op {}: {:?}", n, setup.ops[n]);
    }
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).expect("parses");
    prop_assert_eq!(region.header.endian, setup.endian);
    prop_assert_eq!(region.header.word_size, setup.word_size);
    let trace = region.decode();
    check_decoded(setup, &model.want, &trace)?;
    // The merge yields every event once, in (time, stream, index) order.
    let merged: Vec<_> = merge(&trace.streams)
        .filter_map(|it| match it {
            Item::Event(e) => Some((e.ts, e.stream, e.index)),
            Item::Loss(_) => None,
        })
        .collect();
    prop_assert_eq!(merged.len(), trace.event_count());
    prop_assert!(merged.windows(2).all(|w| w[0] < w[1]));
    Ok(())
}

/// Corrupts the `k` newest readable pages of stream `victim` (their magic),
/// as decayed memory would, and checks that every stream still adds up:
/// recovered + lost = written, exactly when the reader says its count is
/// exact (always, when the pages were closed and the tail says so), and
/// never more than written when the stream's end is unknown.
fn check_newest_damaged(setup: &Setup, victim: usize, k: usize) -> Result<(), TestCaseError> {
    let model = build(setup);
    let clean = Region::parse(&model.image, HeaderTrust::Checksummed)
        .expect("parses")
        .decode();
    let mut newest: Vec<&PageReport> = clean.streams[victim]
        .pages
        .iter()
        .filter(|p| matches!(p.status, PageStatus::Intact | PageStatus::Salvaged))
        .collect();
    newest.sort_by_key(|p| std::cmp::Reverse(p.seq));
    newest.truncate(k);
    let mut image = model.image.clone();
    for p in &newest {
        image[p.offset as usize] ^= 0xff;
    }
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .expect("parses")
        .decode();
    for (i, st) in trace.streams.iter().enumerate() {
        let written = model.want.streams[i].events.len() as u64;
        let recovered = st.events.len() as u64;
        let lost = st.lost_events() - st.lost(LossKind::Dropped);
        if st.lost_exact() {
            prop_assert_eq!(recovered + lost, written, "stream {}: {:?}", i, st.losses);
        } else {
            prop_assert!(recovered + lost <= written, "stream {}: {:?}", i, st.losses);
        }
        if setup.close_at_end {
            prop_assert!(
                st.lost_exact(),
                "stream {} closed, yet its end is unknown",
                i
            );
        }
        if i == victim && !newest.is_empty() {
            let end: Vec<_> = st
                .losses
                .iter()
                .filter(|l| l.kind == LossKind::End)
                .collect();
            prop_assert_eq!(end.len(), 1, "stream {}: {:?}", i, st.losses);
            // With no readable page left, the loss spans every page the
            // ring can hold.
            let pages = if st.decoded_pages().is_empty() {
                newest[0].seq.min(u64::from(setup.pages_of(i)))
            } else {
                newest.len() as u64
            };
            prop_assert_eq!(end[0].pages, pages);
        } else {
            prop_assert!(st.losses.iter().all(|l| l.kind != LossKind::End));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn reader_returns_exactly_the_surviving_events(setup in setup_strategy(600)) {
        check(&setup)?;
    }

    #[test]
    fn corrupt_newest_pages_are_counted_at_the_stream_end(
        setup in setup_strategy(600),
        victim in any::<prop::sample::Index>(),
        k in 1usize..4,
    ) {
        let victim = victim.index(setup.streams);
        check_newest_damaged(&setup, victim, k)?;
    }
}

#[test]
fn many_wraparounds_on_tiny_rings() {
    let ops: Vec<Op> = (0..5000)
        .map(|n| Op::Write {
            stream: n % 3,
            shape: (n % 4) as u8,
            size: n % 90,
            dt: (n as i64 * 7919) % 100_000,
        })
        .collect();
    for close_at_end in [false, true] {
        for endian in [pstore_ring::Endian::Little, pstore_ring::Endian::Big] {
            let setup = Setup {
                endian,
                word_size: 8,
                page_size: 256,
                streams: 3,
                pages: 3,
                lanes: 1,
                lane_pages: 2,
                ops: ops.clone(),
                close_at_end,
            };
            check(&setup).unwrap();
        }
    }
}

/// The property tests above prove only what their setups reach. Over a
/// fixed sample of what `setup_strategy` generates, as many setups as a
/// test run draws, every edge of the writer rules the model knows is hit
/// in at least `min` setups.
#[test]
fn the_generators_reach_every_edge_of_the_writer_rules() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use pstore_ring::layout::{MAX_RECORD_SIZE, PAGE_HEADER_SIZE, RECORD_ALIGN};
    use pstore_ring::write::Dropped;
    use std::collections::BTreeMap;

    let mut runner = TestRunner::deterministic();
    let strategy = setup_strategy(600);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..300 {
        let s = strategy.new_tree(&mut runner).unwrap().current();
        let p = predict(&s);
        let largest = largest_record(s.page_size);
        let data = s.page_size as usize - PAGE_HEADER_SIZE;
        let mut hit = vec![
            ("little-endian", s.endian == pstore_ring::Endian::Little),
            ("big-endian", s.endian == pstore_ring::Endian::Big),
            ("word size 4", s.word_size == 4),
            ("word size 8", s.word_size == 8),
            ("closed at the end", s.close_at_end),
            ("open at the end", !s.close_at_end),
        ];
        // Refused for one word too many, by the page or by the length
        // field (pages of 2048 bytes and more hold more than 255 words).
        let too_large = |limit: usize| {
            p.results.iter().flatten().any(|r| {
                matches!(r, Err(Dropped::TooLarge(n)) if record_size(*n) == limit + RECORD_ALIGN)
            })
        };
        hit.push((
            "refused: a word over a page",
            largest < MAX_RECORD_SIZE && too_large(largest),
        ));
        hit.push(("refused: a word over 255", too_large(MAX_RECORD_SIZE)));
        let reserved = |r: &Result<(), Dropped>| matches!(r, Err(Dropped::ReservedType(_)));
        hit.push((
            "refused: reserved type",
            p.results.iter().flatten().any(reserved),
        ));
        let events = || p.streams.iter().flat_map(|st| &st.events);
        let pages = || p.streams.iter().flat_map(|st| &st.pages);
        hit.push((
            "largest record",
            events().any(|w| record_size(w.payload.len()) == largest),
        ));
        hit.push(("page filled exactly", pages().any(|pg| pg.commit == data)));
        hit.push(("time-extend", events().any(|w| w.prefix == 4)));
        hit.push(("absolute time", events().any(|w| w.prefix == 12)));
        hit.push((
            "ring wrapped",
            p.streams
                .iter()
                .enumerate()
                .any(|(i, st)| st.pages.len() > s.pages_of(i) as usize),
        ));
        hit.push((
            "page opened by a drop",
            pages().any(|pg| pg.seq > 1 && pg.count == 0 && pg.dropped > 0),
        ));
        // A write clamped: committed later than it asked.
        let mut next = vec![0; s.streams];
        let mut clamped = false;
        for (call, r) in calls(&s).iter().zip(&p.results) {
            if let (Call::Write { stream, ts, .. }, Some(Ok(()))) = (call, r) {
                clamped |= p.streams[*stream].events[next[*stream]].ts > *ts;
                next[*stream] += 1;
            }
        }
        hit.push(("clamped", clamped));
        // A close mid-stream: the stream goes on after it.
        let mut closed = vec![false; s.streams];
        let mut reopened = false;
        for op in &s.ops {
            match *op {
                Op::Close { stream } => closed[stream] = true,
                Op::Write { stream, .. } | Op::Drop { stream } => reopened |= closed[stream],
            }
        }
        hit.push(("written after a close", reopened));
        // Lanes are streams with rings of their own size.
        hit.push((
            "a nesting lane's ring wrapped",
            p.streams
                .iter()
                .enumerate()
                .any(|(i, st)| i >= s.cpus() && st.pages.len() > s.lane_pages as usize),
        ));
        for (what, yes) in hit {
            *seen.entry(what).or_default() += usize::from(yes);
        }
    }
    let rare: Vec<_> = seen.iter().filter(|(_, &n)| n < 15).collect();
    assert!(
        rare.is_empty(),
        "reached in too few setups: {rare:?} of {seen:?}"
    );
}
