//! Every event a stream does not give back is counted, by why: after
//! its newest readable page (from its tail, or by walking its slots when
//! the tail is missing or fails its checks), before its oldest, torn on an
//! open page, or on a page a duplicate replaced.

mod common;

use common::*;
use pstore_ring::read::{
    Diagnostic, EndCause, HeaderTrust, Loss, LossKind, PageReport, PageStatus, Problem, Region,
    StreamTrace, TailTable,
};
use pstore_ring::Endian;

/// The stream's one loss of kind [`LossKind::End`], if any.
fn end_loss(st: &StreamTrace<'_>) -> Option<Loss> {
    let mut end = st.losses.iter().filter(|l| l.kind == LossKind::End);
    let first = end.next().copied();
    assert!(end.next().is_none(), "two end losses: {:?}", st.losses);
    first
}

/// A stream's pages, newest first.
fn newest_first(st: &StreamTrace<'_>) -> Vec<PageReport> {
    let mut pages: Vec<PageReport> = st.pages.iter().filter(|p| p.seq != 0).cloned().collect();
    pages.sort_by_key(|p| std::cmp::Reverse(p.seq));
    pages
}

/// Events written to stream `i`, recovered from `st` plus lost, not
/// counting writer drops (the model does not count them as written).
fn accounted(st: &StreamTrace<'_>) -> u64 {
    st.events.len() as u64 + st.lost_events() - st.lost(LossKind::Dropped)
}

#[test]
fn a_corrupt_newest_page_is_an_exact_end_loss() {
    let model = closed_image(Endian::Little, 256, 2, 4, 7);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    let pages = newest_first(&before.streams[1]);
    let mut image = model.image.clone();
    // A bit in the newest page's header, then in the next newest's.
    image[pages[0].offset as usize + 16] ^= 0x10;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let st = &after.streams[1];
    let loss = end_loss(st).expect("an end loss");
    assert_eq!(loss.events, u64::from(pages[0].records));
    assert_eq!(loss.pages, 1);
    assert_eq!(loss.cause, Some(EndCause::Corrupt));
    assert!(loss.exact);
    // After the next newest page's last event.
    let last = &before.streams[1].events[pages[1].first_event + pages[1].records as usize - 1];
    assert_eq!(loss.after_ts, Some(last.ts));
    assert_eq!(accounted(st), model.want.streams[1].events.len() as u64);

    image[pages[1].offset as usize + 8] ^= 0x01;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let st = &after.streams[1];
    let loss = end_loss(st).expect("an end loss");
    assert_eq!(loss.events, u64::from(pages[0].records + pages[1].records));
    assert_eq!((loss.pages, loss.exact), (2, true));
    assert_eq!(accounted(st), model.want.streams[1].events.len() as u64);
    // The text says so.
    let mut text = String::new();
    pstore_ring::text::write_summary(
        &mut text,
        &Region::parse(&image, HeaderTrust::Checksummed).unwrap(),
        &after,
        false,
    )
    .unwrap();
    let want = format!(
        "  lost {} (end of stream: 2 pages corrupt) before index {}",
        loss.events, loss.at_index
    );
    assert!(text.contains(&want), "{text}");
}

#[test]
fn a_region_cut_inside_a_streams_newest_pages_reports_pages_and_events() {
    // The last stream's two newest pages are in adjacent slots, so that a
    // cut inside the older of them removes both (and any older page in
    // the slots after them) but not the pages before them, and nothing of
    // another stream.
    let model = (0..64)
        .map(|seed| closed_image(Endian::Big, 512, 3, 5, seed))
        .find(|m| {
            let r = Region::parse(&m.image, HeaderTrust::Checksummed).unwrap();
            let pages = newest_first(&r.decode().streams[2]);
            pages[1].slot >= 1 && pages[0].slot == pages[1].slot + 1
        })
        .expect("a seed whose last stream's newest pages are in order");
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    let pages = newest_first(&before.streams[2]);
    let cut = pages[1].offset as usize + 100;
    let part = Region::parse(&model.image[..cut], HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let st = &part.streams[2];
    // The slots past the cut are one diagnostic, at the first of them.
    let missing: Vec<_> = part
        .diagnostics
        .iter()
        .filter(|d| matches!(d.problem, Problem::PagesMissing { .. }))
        .collect();
    assert_eq!(
        missing,
        [&Diagnostic {
            stream: Some(2),
            page: Some(pages[0].slot),
            offset: pages[0].offset,
            problem: Problem::PagesMissing {
                from: pages[0].slot,
                count: 5 - pages[0].slot
            }
        }]
    );
    let loss = end_loss(st).expect("an end loss");
    assert_eq!(loss.pages, 2);
    assert_eq!(loss.events, u64::from(pages[0].records + pages[1].records));
    assert_eq!(loss.cause, Some(EndCause::Cut));
    assert!(loss.exact);
    assert_eq!(loss.at_index, model.want.streams[2].events.len() as u64);
    assert_eq!(accounted(st), model.want.streams[2].events.len() as u64);
    // The other streams lie before the cut and lose nothing at their end.
    assert!(end_loss(&part.streams[0]).is_none());
    assert!(end_loss(&part.streams[1]).is_none());
}

/// The region offset of stream `stream`'s tail copy `copy`.
fn tail_copy(region: &Region<'_>, stream: u16, copy: u64) -> usize {
    let TailTable::At(base) = region.tails else {
        panic!("no tail table");
    };
    (base + u64::from(stream) * 64 + copy * 32) as usize
}

#[test]
fn a_torn_tail_is_not_believed_and_the_end_is_unknown() {
    let model = closed_image(Endian::Little, 256, 2, 4, 3);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    let pages = newest_first(&before.streams[0]);
    let newest = pages[0].seq;
    let mut image = model.image.clone();
    // The newest page is corrupt (a bit of its `first_ts`), and the tail
    // copy describing it was caught half rewritten: its end_index is not
    // what its CRC covers.
    image[pages[0].offset as usize + 16] ^= 0x10;
    let torn = tail_copy(&region, 0, newest & 1);
    image[torn + 16] ^= 0x04;
    let r = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    let after = r.decode();
    assert!(
        after.diagnostics.iter().any(|d| d.stream == Some(0)
            && d.page.is_none()
            && d.offset == torn as u64
            && matches!(d.problem, Problem::TailCrc { copy, .. } if u64::from(copy) == newest & 1)),
        "{:?}",
        after.diagnostics
    );
    let st = &after.streams[0];
    let loss = end_loss(st).expect("an end loss");
    // The other copy says the page before was closed; the newest page may
    // hold any number of events: counted as a page, never as a guess.
    assert!(!loss.exact);
    assert_eq!(loss.pages, 1);
    assert_eq!(loss.events, 0);
    assert_eq!(loss.cause, Some(EndCause::Corrupt));
    assert!(!after.lost_exact());
    assert!(accounted(st) < model.want.streams[0].events.len() as u64);
    let label = pstore_ring::text::LossLabel(&loss).to_string();
    assert_eq!(
        label,
        "at least 0 events lost (end of stream unknown: 1 page corrupt)"
    );

    // Both copies torn: the slots after the newest readable page decide.
    image[tail_copy(&region, 0, (newest + 1) & 1) + 3] ^= 0x80;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let loss = end_loss(&after.streams[0]).expect("an end loss");
    assert_eq!((loss.pages, loss.events, loss.exact), (1, 0, false));

    // A torn tail over readable pages costs nothing but is reported.
    let mut image = model.image.clone();
    image[torn + 16] ^= 0x04;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert!(end_loss(&after.streams[0]).is_none());
    assert_eq!(after.event_count(), before.event_count());
    assert!(after
        .diagnostics
        .iter()
        .any(|d| matches!(d.problem, Problem::TailCrc { .. })));
}

#[test]
fn a_region_without_tails_walks_its_slots() {
    // A region written before tails existed: flags bit 0 clear.
    let model = closed_image(Endian::Little, 256, 1, 4, 5);
    let mut image = model.image.clone();
    patch(&mut image, 96, &0u32.to_le_bytes(), 0..252);
    let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    assert_eq!(region.tails, TailTable::None);
    let before = region.decode();
    assert!(end_loss(&before.streams[0]).is_none());
    let pages = newest_first(&before.streams[0]);
    image[pages[0].offset as usize + 16] ^= 0x10;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let loss = end_loss(&after.streams[0]).expect("an end loss");
    assert_eq!((loss.pages, loss.events, loss.exact), (1, 0, false));
    assert!(after.diagnostics.iter().all(|d| !matches!(
        d.problem,
        Problem::TailCrc { .. } | Problem::TailField { .. }
    )));
}

/// Slots are found by their report, not by their index in the report
/// list: a run of absent slots is one report, so indexing by slot would
/// read the wrong reports after it and call the unused slots after the
/// newest page cut off.
#[test]
fn an_absent_run_before_the_newest_page_costs_no_end_loss() {
    // 100 slots of 256 bytes; about 70 of them written (some 6 of these
    // records fit a page), so the newest page has unused slots after it.
    let ops = (0..420)
        .map(|n: u64| Op::Write {
            stream: 0,
            shape: (n % 4) as u8,
            size: (n % 60) as usize,
            dt: (n % 90_000) as i64,
        })
        .collect();
    let model = build(&Setup {
        endian: Endian::Little,
        word_size: 8,
        page_size: 256,
        streams: 1,
        pages: 100,
        lanes: 1,
        lane_pages: 2,
        ops,
        close_at_end: true,
    });
    // Without tails, the reader must walk the slots to find the end.
    let mut image = model.image.clone();
    patch(&mut image, 96, &0u32.to_le_bytes(), 0..252);
    let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    let st = &before.streams[0];
    let newest = newest_first(st)[0].slot;
    assert!(
        (55..95).contains(&newest),
        "the ring should be about 70% used, newest slot {newest}"
    );
    assert_eq!(st.pages_with(PageStatus::Unused), 99 - newest as usize);
    // A dump that left out slots 5..50 (old pages, all before the newest).
    let holes = std::iter::once(st.pages[5].offset..st.pages[50].offset).collect();
    let after = region.with_absent(holes).decode();
    let st = &after.streams[0];
    assert_eq!(st.pages_with(PageStatus::Absent), 45);
    assert!(end_loss(st).is_none(), "{:?}", st.losses);
}

/// `streams` streams of 4 slots of 256 bytes, each given `events`
/// irq_handler_exit events of 12 bytes, the streams taking turns 1 us
/// apart (no time prefixes): 17 fill a page, so a stream's page `seq` s
/// holds events 17 (s - 1) .. 17 s and lies in slot (s - 1) % 4. Numbers a
/// test can state exactly.
fn even_pages(streams: usize, events: usize, close_at_end: bool) -> Model {
    build(&Setup {
        endian: Endian::Little,
        word_size: 8,
        page_size: 256,
        streams,
        pages: 4,
        lanes: 1,
        lane_pages: 2,
        ops: (0..streams * events)
            .map(|n| Op::Write {
                stream: n % streams,
                shape: 1,
                size: 0,
                dt: 1_000,
            })
            .collect(),
        close_at_end,
    })
}

/// An open page's `count` says how many events it committed, and nothing
/// checks its records but their own shape: the events past the point
/// where salvage stops, or that `count` claims past `commit`, are one torn
/// loss right after the last decoded event.
#[test]
fn an_open_page_counting_more_than_decodes_is_one_torn_loss() {
    // 17 events fill page 1, the other 13 are on page 2, left open.
    let model = even_pages(1, 30, false);
    let want = &model.want.streams[0];
    let open = want.pages.last().unwrap();
    assert_eq!((open.seq, open.first_index, open.count), (2, 17, 13));
    assert!(!open.closed);
    let page = {
        let r = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
        r.streams[0].pages_offset as usize + 256
    };
    let data = page + 48;
    fn decode(image: &[u8]) -> (StreamTrace<'_>, Vec<Diagnostic>) {
        let mut trace = Region::parse(image, HeaderTrust::Checksummed)
            .unwrap()
            .decode();
        (trace.streams.remove(0), trace.diagnostics)
    }

    // Salvage stops at the 6th record of the open page: its type (the
    // header word's low byte) is one the schema does not know.
    let mut image = model.image.clone();
    image[data + 5 * 12] = 99;
    let (st, diags) = decode(&image);
    assert_eq!(st.events.len(), 17 + 5);
    // Reported at the page (slot 1) that holds the record, whose offset
    // within the page's data the problem gives.
    assert_eq!(
        diags,
        [Diagnostic {
            stream: Some(0),
            page: Some(1),
            offset: page as u64,
            problem: Problem::UnknownType {
                offset: 5 * 12,
                type_id: 99
            }
        }]
    );
    let torn = Loss {
        stream: 0,
        kind: LossKind::Torn,
        events: 13 - 5,
        pages: 0,
        after_ts: Some(want.events[21].ts),
        before_ts: None,
        at_index: 22,
        page_seq: None,
        cause: None,
        exact: true,
    };
    assert_eq!(st.losses, [torn]);

    // Every record decodes, but `count` claims two more than `commit`
    // covers.
    let mut image = model.image.clone();
    image[page + 36..page + 40].copy_from_slice(&15u32.to_le_bytes());
    let (st, diags) = decode(&image);
    assert_eq!(st.events.len(), 30);
    assert!(diags.is_empty(), "{diags:?}");
    let torn = Loss {
        events: 2,
        after_ts: Some(want.events[29].ts),
        at_index: 30,
        page_seq: None,
        ..torn
    };
    assert_eq!(st.losses, [torn]);
}

/// The region offset of slot `slot` of stream `stream` in a region built
/// by [`even_pages`].
fn slot_at(image: &[u8], stream: usize, slot: usize) -> usize {
    let region = Region::parse(image, HeaderTrust::Checksummed).unwrap();
    region.streams[stream].pages_offset as usize + slot * 256
}

/// The loss of the events before stream 0's oldest readable page, whose
/// first event is `index` and whose seq is `seq`: overwritten or
/// unreadable.
fn loss_before(model: &Model, kind: LossKind, seq: u64, index: u64) -> Loss {
    Loss {
        stream: 0,
        kind,
        events: index,
        pages: seq - 1,
        after_ts: None,
        before_ts: Some(model.want.streams[0].events[index as usize].ts),
        at_index: index,
        page_seq: None,
        cause: None,
        exact: true,
    }
}

/// A page copied over a later slot (seq 3, slot 2, over seq 4 in slot 3)
/// is a duplicate: the copy in the later slot is refused, reported at
/// that slot, and the page it replaced is one page of unreadable events
/// between seq 3 and seq 5.
#[test]
fn a_duplicate_page_is_reported_at_its_slot_and_costs_the_page_it_replaced() {
    // Seqs 5, 6, 3, 4 in slots 0..4.
    let model = even_pages(1, 90, true);
    let mut image = model.image.clone();
    let (from, to) = (slot_at(&image, 0, 2), slot_at(&image, 0, 3));
    image.copy_within(from..from + 256, to);
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert_eq!(
        trace.diagnostics,
        [Diagnostic {
            stream: Some(0),
            page: Some(3),
            offset: to as u64,
            problem: Problem::DuplicateSeq(3),
        }]
    );
    let st = &trace.streams[0];
    assert_eq!(st.pages[3].status, PageStatus::Corrupt);
    let ts = |i: usize| Some(model.want.streams[0].events[i].ts);
    assert_eq!(
        st.losses,
        [
            // Seqs 1 and 2 have left the ring.
            loss_before(&model, LossKind::Overwritten, 3, 34),
            // Seq 4: events 51..68, between seq 3's last and seq 5's first.
            Loss {
                stream: 0,
                kind: LossKind::Unreadable,
                events: 17,
                pages: 1,
                after_ts: ts(50),
                before_ts: ts(68),
                at_index: 68,
                page_seq: None,
                cause: None,
                exact: true,
            },
        ]
    );
}

/// Seqs 3 and 4 (slots 2 and 3) are cut off whole: no slot is truncated,
/// but the slots past the input are unreadable all the same, so the
/// events before the oldest readable page (seq 5) were partly on pages
/// the ring still held (FORMAT.md section 11, "Before P1").
#[test]
fn a_cut_at_a_page_boundary_makes_the_events_before_the_oldest_readable_page_unreadable() {
    let model = even_pages(1, 90, true);
    let cut = slot_at(&model.image, 0, 2);
    let trace = Region::parse(&model.image[..cut], HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let st = &trace.streams[0];
    assert_eq!(st.pages_with(PageStatus::Truncated), 0);
    assert_eq!(
        st.losses,
        [loss_before(&model, LossKind::Unreadable, 5, 68)]
    );
}

/// A crash while the writer recycles slot 2 (FORMAT.md section 12, case
/// 3) leaves it resetting: seq 3's events were being overwritten, and no
/// page is unreadable, so everything before the oldest readable page
/// (seq 4) is overwritten, not unreadable.
#[test]
fn a_slot_caught_resetting_leaves_the_events_before_the_oldest_readable_page_overwritten() {
    let model = even_pages(1, 90, true);
    let mut image = model.image.clone();
    let at = slot_at(&image, 0, 2) + 6;
    image[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
    let st = &trace.streams[0];
    assert_eq!(st.pages[2].status, PageStatus::Resetting);
    assert_eq!(
        st.losses,
        [loss_before(&model, LossKind::Overwritten, 4, 51)]
    );
}

/// Without tails the end of a stream is found by walking the slots after
/// its newest readable page (seq 6, slot 1): slot 2 is cut inside, slot 3
/// lies past the input, and both may hold newer pages, so the end loss is
/// two pages, counted across the truncated slot and the missing ones.
#[test]
fn a_walk_without_tails_counts_a_truncated_slot_and_the_slots_past_the_input() {
    let model = even_pages(1, 90, true);
    let mut image = model.image.clone();
    // flags bit 0 clear: no tail table.
    patch(&mut image, 96, &0u32.to_le_bytes(), 0..252);
    let cut = slot_at(&image, 0, 2) + 100;
    let region = Region::parse(&image[..cut], HeaderTrust::Checksummed).unwrap();
    assert_eq!(region.tails, TailTable::None);
    let trace = region.decode();
    let st = &trace.streams[0];
    assert_eq!(st.pages[2].status, PageStatus::Truncated);
    assert_eq!(
        st.losses,
        [
            loss_before(&model, LossKind::Unreadable, 5, 68),
            Loss {
                stream: 0,
                kind: LossKind::End,
                events: 0,
                pages: 2,
                after_ts: Some(model.want.streams[0].events[89].ts),
                before_ts: None,
                at_index: 90,
                page_seq: None,
                cause: Some(EndCause::Cut),
                exact: false,
            },
        ]
    );
}

/// Copy 1 is written from a stream's first page on, so an empty one is a
/// copy the writer should have filled: reported at that copy, of stream
/// 1 so that the stream's place in the table counts too. It costs
/// nothing while the pages are readable.
#[test]
fn an_empty_tail_copy_1_is_reported_at_its_own_offset() {
    let model = even_pages(2, 90, true);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let clean = region.decode();
    let copy = tail_copy(&region, 1, 1);
    let mut image = model.image.clone();
    image[copy..copy + 32].fill(0);
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert_eq!(
        trace.diagnostics,
        [Diagnostic {
            stream: Some(1),
            page: None,
            offset: copy as u64,
            problem: Problem::TailField {
                copy: 1,
                field: "seq",
                value: 0
            },
        }]
    );
    assert_eq!(trace.streams[1].losses, clean.streams[1].losses);
    assert_eq!(trace.event_count(), clean.event_count());
}

/// Stream 1's tail left as it was at its page 3 (persistent memory that
/// lost the tail's cache lines, FORMAT.md section 12, case 9) while its
/// pages went on to page 6: not believed, and reported at the start of
/// the stream's pair of copies.
#[test]
fn a_tail_more_than_a_page_behind_is_reported_at_its_streams_copies() {
    let model = even_pages(2, 90, true);
    let earlier = even_pages(2, 40, true);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let pair = tail_copy(&region, 1, 0);
    let mut image = model.image.clone();
    image[pair..pair + 64].copy_from_slice(&earlier.image[pair..pair + 64]);
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert_eq!(
        trace.diagnostics,
        [Diagnostic {
            stream: Some(1),
            page: None,
            offset: pair as u64,
            problem: Problem::TailBehind { tail: 3, newest: 6 },
        }]
    );
    // The walk finds the older page 3 right after page 6: nothing lost.
    assert!(end_loss(&trace.streams[1]).is_none());
}
