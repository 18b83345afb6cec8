//! Decoding page by page changes where events are kept, never what they
//! are: over every shape of region the other tests build (the model's
//! clean, wrapped and clamped regions in both byte orders and word sizes,
//! regions with bytes overwritten, pages rewritten with a matching CRC,
//! cut, with absent stretches, corrupt newest pages, `clock` events, the
//! golden images), the events walked again from each page are exactly
//! those the decoding walk counted and timed (its page reports, its
//! `clock` steps), each page walked alone or backwards gives its slice of
//! the stream, [`Region::decode`] (the paged decoding walked into vectors,
//! which the model and corruption tests hold to what was written) agrees
//! with it in everything, and [`merge_pages`] yields exactly [`merge`]'s
//! items in [`merge`]'s order, rendered to the same text, also when some
//! events are left out on the way ([`merge_events`]).

mod common;

use common::*;
use proptest::prelude::*;
use pstore_ring::endian::{U16, U32, U64};
use pstore_ring::layout::{crc32, PAGE_CLOSED, PAGE_HEADER_SIZE, PAGE_OPEN, PAGE_RESETTING};
use pstore_ring::merge::{merge, merge_events, merge_pages, Item, Pulled};
use pstore_ring::read::{
    ClockStep, Event, HeaderTrust, LossKind, PageStatus, Region, StreamPages, StreamTrace,
};
use pstore_ring::record::Records;
use pstore_ring::schema::{self, Value};
use pstore_ring::text::{write_paged_summary, write_summary, Line};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use pstore_ring::Endian;

const STATUSES: [PageStatus; 8] = [
    PageStatus::Unused,
    PageStatus::Intact,
    PageStatus::Damaged,
    PageStatus::Salvaged,
    PageStatus::Resetting,
    PageStatus::Truncated,
    PageStatus::Absent,
    PageStatus::Corrupt,
];

const KINDS: [LossKind; 5] = [
    LossKind::Overwritten,
    LossKind::Unreadable,
    LossKind::Dropped,
    LossKind::Torn,
    LossKind::End,
];

/// One stream decoded both ways agrees in everything.
fn same_stream(p: &StreamPages<'_>, w: &StreamTrace<'_>, e: Endian) -> Result<(), TestCaseError> {
    let s = w.info.index;
    prop_assert_eq!(&p.info, &w.info);
    prop_assert_eq!(&p.pages, &w.pages, "stream {} page reports", s);
    prop_assert_eq!(&p.losses, &w.losses, "stream {} losses", s);
    let events: Vec<Event<'_>> = p.events().collect();
    prop_assert_eq!(&events, &w.events, "stream {} events", s);
    prop_assert_eq!(p.event_count(), w.events.len());
    prop_assert_eq!(p.first_event(), w.events.first().copied());
    prop_assert_eq!(p.last_event(), w.events.last().copied());
    prop_assert_eq!(p.lost_events(), w.lost_events());
    prop_assert_eq!(p.lost_exact(), w.lost_exact());
    for kind in KINDS {
        prop_assert_eq!(p.lost(kind), w.lost(kind));
    }
    for status in STATUSES {
        prop_assert_eq!(p.pages_with(status), w.pages_with(status));
    }
    for slot in 0..=w.info.page_count.min(1 << 12) {
        prop_assert_eq!(p.page(slot), w.page(slot));
    }
    // The decoded pages are the whole decode's, in its order, and each
    // walked alone gives exactly its slice of the events.
    let reports = w.decoded_pages();
    prop_assert_eq!(p.decoded.len(), reports.len(), "stream {} decoded pages", s);
    for (d, r) in p.decoded.iter().zip(&reports) {
        prop_assert_eq!(
            (d.slot, d.seq, d.records, d.first_event),
            (r.slot, r.seq, r.records, r.first_event)
        );
        let mine: Vec<Event<'_>> = p.page_events(d).collect();
        // Walked again, the page gives every event the decoding walk
        // counted, at the times it reported.
        prop_assert_eq!(
            mine.len(),
            d.records as usize,
            "stream {} slot {}",
            s,
            d.slot
        );
        // Its latest time, by which windows find it, is its last event's.
        if let Some(last) = mine.last() {
            prop_assert_eq!(d.last_ts, last.ts, "stream {} slot {}", s, d.slot);
        }
        let theirs = w
            .events
            .get(r.first_event..r.first_event + r.records as usize);
        prop_assert_eq!(Some(&mine[..]), theirs, "stream {} slot {}", s, d.slot);
    }
    // Walked backwards, page by page: no page needs the one before it.
    let mut back: Vec<Event<'_>> = Vec::new();
    for d in p.decoded.iter().rev() {
        let mut page: Vec<Event<'_>> = p.page_events(d).collect();
        page.extend(back);
        back = page;
    }
    prop_assert_eq!(&back, &w.events, "stream {} pages walked backwards", s);
    let clock: Vec<ClockStep> = w
        .events
        .iter()
        .filter_map(|ev| ClockStep::of(ev, e))
        .collect();
    prop_assert_eq!(p.clock_steps(), &clock[..]);
    let t = p.to_trace();
    prop_assert_eq!(
        (&t.info, &t.pages, &t.events, &t.losses),
        (&w.info, &w.pages, &w.events, &w.losses)
    );
    Ok(())
}

/// A region decoded both ways agrees in everything, merged and rendered
/// alike.
fn same(region: &Region<'_>) -> Result<(), TestCaseError> {
    let whole = region.decode();
    let paged = region.decode_paged();
    prop_assert_eq!(&paged.diagnostics, &whole.diagnostics);
    prop_assert_eq!(paged.streams.len(), whole.streams.len());
    prop_assert_eq!(paged.event_count(), whole.event_count());
    prop_assert_eq!(paged.lost_events(), whole.lost_events());
    prop_assert_eq!(paged.lost_exact(), whole.lost_exact());
    let e = region.header.endian;
    for (p, w) in paged.streams.iter().zip(&whole.streams) {
        same_stream(p, w, e)?;
    }
    // Streams decoded one by one, as a caller with threads would.
    let mut diags = region.diagnostics.clone();
    for (info, p) in region.streams.iter().zip(&paged.streams) {
        // Told what it walked, page by page: each page whose header was
        // read, and again each page whose records were.
        let mut walked = Vec::new();
        let one = region.decode_stream_paged_walked(info, &mut diags, &mut |r| walked.push(r));
        prop_assert_eq!((&one.pages, &one.decoded), (&p.pages, &p.decoded));
        let size = u64::from(region.header.page_size);
        let slot = |s: u32| {
            let start = info.pages_offset + u64::from(s) * size;
            start..start + size
        };
        let times = |r: &std::ops::Range<u64>| walked.iter().filter(|w| *w == r).count();
        for d in &p.decoded {
            prop_assert_eq!(times(&slot(d.slot)), 2, "slot {}", d.slot);
        }
        for page in p.pages.iter().filter(|pg| pg.status != PageStatus::Absent) {
            prop_assert!(times(&slot(page.slot)) >= 1, "slot {}", page.slot);
        }
    }
    prop_assert_eq!(&diags, &paged.diagnostics);
    prop_assert_eq!(
        region.wall_clock_of_pages(&paged),
        region.wall_clock(&whole)
    );

    let want: Vec<Pulled<'_, '_>> = merge(&whole.streams)
        .map(|item| match item {
            Item::Event(e) => Pulled::Event(*e),
            Item::Loss(l) => Pulled::Loss(l),
        })
        .collect();
    let got: Vec<Pulled<'_, '_>> = merge_pages(&paged.streams).collect();
    prop_assert_eq!(&got, &want, "merged items");

    // Events left out on the way, as a redaction or a selection would:
    // the same as merging streams whose vectors left them out.
    let keep = |e: &Event<'_>| !(e.index ^ e.ts).is_multiple_of(3);
    let mut kept = whole.streams.clone();
    for st in &mut kept {
        st.events.retain(keep);
    }
    let want: Vec<Pulled<'_, '_>> = merge(&kept)
        .map(|item| match item {
            Item::Event(e) => Pulled::Event(*e),
            Item::Loss(l) => Pulled::Loss(l),
        })
        .collect();
    let got: Vec<Pulled<'_, '_>> = merge_events(
        paged
            .streams
            .iter()
            .map(|st| (st.events().filter(keep), &st.losses[..])),
    )
    .collect();
    prop_assert_eq!(&got, &want, "merged items, some left out");

    let mut text_whole = String::new();
    let mut text_paged = String::new();
    write_summary(&mut text_whole, region, &whole, true).unwrap();
    write_paged_summary(&mut text_paged, region, &paged, true).unwrap();
    for item in merge(&whole.streams) {
        text_whole.push_str(&Line::of(&item, region).to_string());
        text_whole.push('\n');
    }
    for item in merge_pages(&paged.streams) {
        text_paged.push_str(&Line::of(&item.as_item(), region).to_string());
        text_paged.push('\n');
    }
    prop_assert_eq!(text_paged, text_whole);
    Ok(())
}

/// Both trust levels, when the header allows.
fn same_bytes(image: &[u8]) -> Result<(), TestCaseError> {
    for trust in [HeaderTrust::Checksummed, HeaderTrust::Lenient] {
        if let Ok(region) = Region::parse(image, trust) {
            same(&region)?;
        }
    }
    Ok(())
}

/// What happens to a model image before it is read.
#[derive(Clone, Debug)]
enum Damage {
    None,
    /// Bytes overwritten anywhere.
    Bytes(Vec<(prop::sample::Index, u8)>),
    /// Bytes of one page (header or data, not its CRC) overwritten, then
    /// its CRC recomputed if it is closed: the page passes its checks, and
    /// its records, `count`, `first_index`, `seq`... do not add up.
    Page {
        page: prop::sample::Index,
        edits: Vec<(prop::sample::Index, u8)>,
    },
    /// A page's flags set: resetting, open (a closed page salvaged) or
    /// closed (an open page with a bad CRC).
    Flags {
        page: prop::sample::Index,
        flags: u16,
    },
    /// One event record of a page made a word longer or shorter, the
    /// page's CRC recomputed: a closed page's walk goes astray, an open
    /// page's payload no longer fits its type.
    Resize {
        page: prop::sample::Index,
        record: prop::sample::Index,
        grow: bool,
    },
    /// A page slot's bytes copied over another's: the same `seq` twice in
    /// a stream, or a page in another stream's ring.
    Copy {
        from: prop::sample::Index,
        to: prop::sample::Index,
        /// Whether `to` is in `from`'s stream.
        same: bool,
    },
    /// A page's `first_index` set near the end of the index space, its
    /// CRC recomputed: its events' indexes saturate.
    IndexEnd {
        page: prop::sample::Index,
        below_max: u8,
    },
    /// The image cut short.
    Cut(prop::sample::Index),
    /// Stretches the container could not supply.
    Absent(Vec<(prop::sample::Index, u64)>),
    /// The `k` newest pages of a stream corrupted.
    Newest {
        stream: prop::sample::Index,
        k: usize,
    },
}

fn damage_strategy() -> impl Strategy<Value = Damage> {
    let edit = (any::<prop::sample::Index>(), any::<u8>());
    prop_oneof![
        2 => Just(Damage::None),
        2 => proptest::collection::vec(edit.clone(), 1..20).prop_map(Damage::Bytes),
        3 => (any::<prop::sample::Index>(), proptest::collection::vec(edit, 1..6))
            .prop_map(|(page, edits)| Damage::Page { page, edits }),
        1 => (
            any::<prop::sample::Index>(),
            prop_oneof![Just(PAGE_RESETTING), Just(PAGE_OPEN), Just(PAGE_CLOSED)]
        )
            .prop_map(|(page, flags)| Damage::Flags { page, flags }),
        2 => (any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(page, record, grow)| Damage::Resize { page, record, grow }),
        2 => (any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<bool>())
            .prop_map(|(from, to, same)| Damage::Copy { from, to, same }),
        1 => (any::<prop::sample::Index>(), 0u8..16)
            .prop_map(|(page, below_max)| Damage::IndexEnd { page, below_max }),
        1 => any::<prop::sample::Index>().prop_map(Damage::Cut),
        1 => proptest::collection::vec((any::<prop::sample::Index>(), 1u64..5000), 1..4)
            .prop_map(Damage::Absent),
        1 => (any::<prop::sample::Index>(), 1usize..4)
            .prop_map(|(stream, k)| Damage::Newest { stream, k }),
    ]
}

/// Every page slot's region offset, by stream (lanes have rings of their
/// own size).
fn page_rings(region: &Region<'_>) -> Vec<Vec<usize>> {
    let size = u64::from(region.header.page_size);
    region
        .streams
        .iter()
        .map(|s| {
            (0..u64::from(s.page_count))
                .map(|k| (s.pages_offset + k * size) as usize)
                .collect()
        })
        .collect()
}

/// Recomputes the CRC of the closed page at `at`, so it passes its checks
/// whatever was written into it.
fn fix_crc(image: &mut [u8], at: usize, page_size: usize, e: Endian) {
    let page = &image[at..at + page_size];
    if U16([page[6], page[7]]).get(e) != PAGE_CLOSED {
        return;
    }
    let commit = U32([page[32], page[33], page[34], page[35]]).get(e) as usize;
    let Some(data) = page.get(PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + commit) else {
        return;
    };
    let crc = crc32(&[&page[..44], data]);
    image[at + 44..at + 48].copy_from_slice(&U32::new(e, crc).0);
}

/// The model image of `setup` with `damage` done, and the stretches to
/// mark absent.
fn damaged(setup: &Setup, damage: &Damage) -> (Vec<u8>, Vec<std::ops::Range<u64>>) {
    let model = build(setup);
    let mut image = model.image;
    let clean = Region::parse(&image, HeaderTrust::Checksummed).expect("parses");
    let e = clean.header.endian;
    let page_size = clean.header.page_size as usize;
    let rings = page_rings(&clean);
    let offsets = rings.concat();
    // Each stream's decoded pages, newest first.
    let newest: Vec<Vec<u64>> = clean
        .decode()
        .streams
        .iter()
        .map(|st| {
            let mut pages = st.decoded_pages();
            pages.sort_by_key(|p| std::cmp::Reverse(p.seq));
            pages.iter().map(|p| p.offset).collect()
        })
        .collect();
    let mut absent = Vec::new();
    match damage {
        Damage::None => {}
        Damage::Bytes(edits) => {
            let len = image.len();
            for (at, v) in edits {
                image[at.index(len)] = *v;
            }
        }
        Damage::Page { page, edits } => {
            let at = offsets[page.index(offsets.len())];
            for (i, v) in edits {
                // Mostly the header and the first records, where the
                // fields and records are.
                let off = i.index(page_size.min(200) - 4);
                let off = if off >= 44 { off + 4 } else { off };
                image[at + off] = *v;
            }
            fix_crc(&mut image, at, page_size, e);
        }
        Damage::Flags { page, flags } => {
            let at = offsets[page.index(offsets.len())];
            image[at + 6..at + 8].copy_from_slice(&U16::new(e, *flags).0);
        }
        Damage::Resize { page, record, grow } => {
            let at = offsets[page.index(offsets.len())];
            let hdr = &image[at..at + PAGE_HEADER_SIZE];
            let commit = U32([hdr[32], hdr[33], hdr[34], hdr[35]]).get(e) as usize;
            let data = &image[at + PAGE_HEADER_SIZE..][..commit.min(page_size - PAGE_HEADER_SIZE)];
            let starts: Vec<usize> = Records::new(data, 0, e)
                .map_while(Result::ok)
                .map(|r| r.offset)
                .collect();
            if !starts.is_empty() {
                let word = at + PAGE_HEADER_SIZE + starts[record.index(starts.len())];
                // The length is bits 8..16 of the header word.
                let len = word + if e == Endian::Little { 1 } else { 2 };
                image[len] = if *grow {
                    image[len].saturating_add(1)
                } else {
                    image[len].saturating_sub(1).max(1)
                };
                fix_crc(&mut image, at, page_size, e);
            }
        }
        Damage::Copy { from, to, same } => {
            let from = offsets[from.index(offsets.len())];
            let to = match rings.iter().find(|r| r.contains(&from)) {
                Some(ring) if *same => ring[to.index(ring.len())],
                _ => offsets[to.index(offsets.len())],
            };
            image.copy_within(from..from + page_size, to);
        }
        Damage::IndexEnd { page, below_max } => {
            let at = offsets[page.index(offsets.len())];
            let index = u64::MAX - u64::from(*below_max);
            image[at + 24..at + 32].copy_from_slice(&U64::new(e, index).0);
            fix_crc(&mut image, at, page_size, e);
        }
        Damage::Cut(at) => {
            let at = at.index(image.len() + 1);
            image.truncate(at);
        }
        Damage::Absent(holes) => {
            let len = image.len() as u64;
            for (at, n) in holes {
                let at = at.index(image.len()) as u64;
                absent.push(at..(at + n).min(len));
            }
        }
        Damage::Newest { stream, k } => {
            for &at in newest[stream.index(newest.len())].iter().take(*k) {
                image[at as usize] ^= 0xff;
            }
        }
    }
    (image, absent)
}

fn check_damaged(setup: &Setup, damage: &Damage) -> Result<(), TestCaseError> {
    let (image, absent) = damaged(setup, damage);
    for trust in [HeaderTrust::Checksummed, HeaderTrust::Lenient] {
        if let Ok(region) = Region::parse(&image, trust) {
            same(&region.with_absent(absent.clone()))?;
        }
    }
    Ok(())
}

/// A region of `clock` and `lost` events, some pages left open, some
/// `clock` payloads malformed (not a step).
fn clock_image(e: Endian, events: &[(usize, u8, u64, i64)], close: &[bool]) -> Vec<u8> {
    let mut mem = vec![0u8; 64 * 1024];
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1), StreamSpec::cpu(2)];
    let cfg = RegionConfig {
        page_size: 256,
        pages_per_stream: Some(4),
        streams: &specs,
        endian: e,
        wall_offset_ns: -5,
        ..Default::default()
    };
    {
        let mut f = write::format(&mut mem, &cfg).unwrap();
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        let clock = schema::builtin(schema::EVENT_CLOCK).unwrap();
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        let mut t = 1_000u64;
        for &(s, kind, dt, off) in events {
            t = t.saturating_add(dt);
            let w = &mut ws[s % 3];
            let _ = match kind % 3 {
                0 => w.write_event(t, clock, &[Value::Signed(off)]),
                1 => w.write(
                    t,
                    schema::EVENT_CLOCK,
                    &off.to_le_bytes()[..(off as usize % 8)],
                ),
                _ => w.write_event(t, lost, &[Value::Unsigned(off as u64)]),
            };
        }
        for (w, &c) in ws.iter_mut().zip(close) {
            if c {
                w.close();
            }
        }
    }
    let size = Region::parse(&mem, HeaderTrust::Checksummed)
        .unwrap()
        .header
        .region_size as usize;
    mem.truncate(size);
    mem
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn paged_decoding_is_the_whole_decoding(
        setup in setup_strategy(500),
        damage in damage_strategy(),
    ) {
        check_damaged(&setup, &damage)?;
    }

    #[test]
    fn clock_steps_are_kept_while_decoding(
        e in prop_oneof![Just(Endian::Little), Just(Endian::Big)],
        events in proptest::collection::vec((0usize..3, any::<u8>(), 0u64..100_000, any::<i64>()), 0..200),
        close in proptest::collection::vec(any::<bool>(), 3),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut image = clock_image(e, &events, &close);
        let len = image.len();
        for (at, v) in edits {
            image[at.index(len)] = v;
        }
        same_bytes(&image)?;
    }

    #[test]
    fn garbage_decodes_alike(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        same_bytes(&bytes)?;
    }
}

#[test]
fn many_wraparounds_decode_alike() {
    let ops: Vec<Op> = (0..5000)
        .map(|n| Op::Write {
            stream: n % 3,
            shape: (n % 4) as u8,
            size: n % 90,
            dt: (n as i64 * 7919) % 100_000 - 20_000,
        })
        .collect();
    for close_at_end in [false, true] {
        for endian in [Endian::Little, Endian::Big] {
            for word_size in [4, 8] {
                let setup = Setup {
                    endian,
                    word_size,
                    page_size: 256,
                    streams: 3,
                    pages: 3,
                    lanes: 1,
                    lane_pages: 2,
                    ops: ops.clone(),
                    close_at_end,
                };
                check_damaged(&setup, &Damage::None).unwrap();
            }
        }
    }
}

/// The committed golden images decode page by page to the committed text.
#[test]
fn golden_images_decode_alike_and_to_the_golden_text() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden");
    for name in ["v2-le", "v2-be", "v1-le", "v1-be"] {
        let image = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let want = std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap();
        same_bytes(&image).unwrap();
        // As `tests/golden.rs` renders it, from the paged decoding.
        let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let mut out = String::new();
        write_paged_summary(&mut out, &region, &trace, true).unwrap();
        for d in &trace.diagnostics {
            out.push_str(&format!("diagnostic: {d}\n"));
        }
        out.push_str("events:\n");
        for item in merge_pages(&trace.streams) {
            out.push_str(&format!("{}\n", Line::of(&item.as_item(), &region)));
        }
        assert_eq!(out, want, "{name}");
    }
}

/// The property proves only what its regions reach. Over a fixed sample of
/// what it generates, as many as a run draws, every page status, loss
/// kind and page problem the reader has is met in at least a few regions.
#[test]
fn the_damaged_regions_reach_every_page_status_loss_and_problem() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeMap;

    let mut runner = TestRunner::deterministic();
    let strategy = (setup_strategy(500), damage_strategy());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..400 {
        let (setup, damage) = strategy.new_tree(&mut runner).unwrap().current();
        let (image, absent) = damaged(&setup, &damage);
        let Ok(region) = Region::parse(&image, HeaderTrust::Checksummed) else {
            continue;
        };
        let trace = region.with_absent(absent).decode_paged();
        let mut hit = std::collections::BTreeSet::new();
        for st in &trace.streams {
            for p in &st.pages {
                hit.insert(format!("{:?}", p.status));
            }
            for l in &st.losses {
                hit.insert(format!("{:?}", l.kind));
            }
            hit.extend(
                st.decoded
                    .iter()
                    .filter(|d| d.first_index > 0)
                    .map(|_| "first_index > 0".into()),
            );
        }
        for d in &trace.diagnostics {
            let name = format!("{:?}", d.problem);
            hit.insert(name.split(['(', ' ']).next().unwrap().to_string());
        }
        for h in hit {
            *seen.entry(h).or_default() += 1;
        }
    }
    let want = [
        "Unused",
        "Intact",
        "Damaged",
        "Salvaged",
        "Resetting",
        "Truncated",
        "Absent",
        "Corrupt",
        "Overwritten",
        "Unreadable",
        "Dropped",
        "Torn",
        "End",
        "first_index > 0",
        "Record",
        "UnknownType",
        "PayloadMismatch",
        "CountMismatch",
        "IndexMismatch",
        "DuplicateSeq",
        "Crc",
        "BadMagic",
        "RegionTruncated",
    ];
    let rare: Vec<_> = want
        .iter()
        .map(|w| (w, seen.get(*w).copied().unwrap_or(0)))
        .filter(|(_, n)| *n < 3)
        .collect();
    assert!(
        rare.is_empty(),
        "reached in too few regions: {rare:?} of {seen:?}"
    );
}
