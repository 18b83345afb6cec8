//! Damage costs only what it touches: flipped bits cost exactly their
//! pages, a cut costs only what lies past it, and garbage never panics.
//! What a stream loses after its newest readable page is counted from its
//! tail, and a tail that fails its checks is not believed.

mod common;

use common::*;
use proptest::prelude::*;
use pstore_ring::read::{
    HeaderError, HeaderTrust, LossKind, PageReport, PageStatus, Problem, Region, TailTable, Trace,
};
use pstore_ring::Endian;
use std::collections::BTreeSet;

fn written_total(m: &Model) -> u64 {
    m.want.streams.iter().map(|s| s.events.len() as u64).sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn flipped_bits_cost_exactly_their_pages(
        endian in prop_oneof![Just(Endian::Little), Just(Endian::Big)],
        page_size in prop_oneof![Just(256u32), Just(1024)],
        streams in 1usize..4,
        seed in any::<u64>(),
        picks in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..6),
    ) {
        let pages = 6;
        let model = closed_image(endian, page_size, streams, pages, seed);
        let clean = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
        let before = clean.decode();
        // Candidates: every intact page, the newest included (its stream's
        // tail says how many events it held).
        let mut candidates = Vec::new();
        for st in &before.streams {
            for p in &st.pages {
                if p.status == PageStatus::Intact {
                    candidates.push((st.info.index, p.slot, p.offset, p.records));
                }
            }
        }
        prop_assume!(!candidates.is_empty());
        let mut image = model.image.clone();
        let mut hit = BTreeSet::new();
        for (which, bit) in &picks {
            let (stream, slot, offset, _) = candidates[which.index(candidates.len())];
            if !hit.insert((stream, slot)) {
                continue;
            }
            // Any bit of the header or of the committed records.
            let e = clean.header.endian;
            let commit = pstore_ring::endian::U32(image[offset as usize + 32..offset as usize + 36].try_into().unwrap()).get(e);
            let span = (48 + commit as usize) * 8;
            let b = bit.index(span);
            image[offset as usize + b / 8] ^= 1 << (b % 8);
        }
        let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
        let after = region.decode();
        let corrupt: BTreeSet<(u16, u32)> = after
            .streams
            .iter()
            .flat_map(|s| s.pages.iter().filter(|p| p.status == PageStatus::Corrupt).map(move |p| (s.info.index, p.slot)))
            .collect();
        prop_assert_eq!(&corrupt, &hit, "corrupt pages reported");
        let diag_pages: BTreeSet<(u16, u32)> = after.diagnostics.iter().filter_map(|d| Some((d.stream?, d.page?))).collect();
        prop_assert_eq!(&diag_pages, &hit, "diagnostics name exactly the damaged pages");
        // Every other page decodes as before.
        for (b, a) in before.streams.iter().zip(&after.streams) {
            for (pb, pa) in b.pages.iter().zip(&a.pages) {
                if !hit.contains(&(b.info.index, pb.slot)) {
                    prop_assert_eq!(unplaced(pb), unplaced(pa));
                }
            }
        }
        // Events lost to the damage are exactly those of the hit pages.
        let hit_records: u64 = candidates.iter().filter(|c| hit.contains(&(c.0, c.1))).map(|c| u64::from(c.3)).sum();
        prop_assert_eq!(before.event_count() as u64 - after.event_count() as u64, hit_records);
        prop_assert!(after.lost_exact());
        prop_assert_eq!(after.event_count() as u64 + after.lost_events(), written_total(&model) + dropped(&after) );
    }

    #[test]
    fn a_cut_costs_only_what_lies_past_it(
        endian in prop_oneof![Just(Endian::Little), Just(Endian::Big)],
        seed in any::<u64>(),
        close in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut model = closed_image(endian, 512, 3, 4, seed);
        if !close {
            // Same events, current pages left open.
            let ops = (0..3 * 4 * 512 / 24).map(|n| {
                let n = n as u64 ^ seed;
                Op::Write { stream: (n % 3) as usize, shape: (n % 4) as u8, size: (n % 60) as usize, dt: (n % 90_000) as i64 }
            }).collect();
            model = build(&Setup { endian, word_size: 8, page_size: 512, streams: 3, pages: 4, lanes: 1, lane_pages: 2, ops, close_at_end: false });
        }
        let full = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
        let whole = full.decode();
        let cut = cut.index(model.image.len() + 1);
        let Ok(region) = Region::parse(&model.image[..cut], HeaderTrust::Checksummed) else {
            prop_assert!(cut < 256, "header present but refused at cut {}", cut);
            return Ok(());
        };
        let part = region.decode();
        if cut < model.image.len() {
            let reported = part.diagnostics.iter().any(|d| matches!(d.problem, Problem::RegionTruncated { .. }));
            prop_assert!(reported, "truncation not reported");
        }
        for (w, p) in whole.streams.iter().zip(&part.streams) {
            for (pw, pp) in w.pages.iter().zip(&p.pages) {
                let end = pw.offset as usize + 512;
                if end <= cut {
                    prop_assert_eq!(unplaced(pw), unplaced(pp), "page wholly before the cut");
                }
            }
            // What survives the cut is a subset of what the whole had.
            for e in &p.events {
                prop_assert!(w.events.iter().any(|x| x == e));
            }
        }
    }

    #[test]
    fn absent_slots_are_reported_as_runs_slot_for_slot(
        seed in any::<u64>(),
        holes in proptest::collection::vec((any::<prop::sample::Index>(), 1u64..3000), 0..6),
    ) {
        let model = closed_image(Endian::Little, 256, 2, 12, seed);
        let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
        let len = model.image.len() as u64;
        // Unsorted, possibly overlapping or touching: as a caller may give them.
        let holes: Vec<_> = holes
            .iter()
            .map(|&(at, n)| {
                let at = at.index(model.image.len()) as u64;
                at..(at + n).min(len)
            })
            .collect();
        let touched = |at: u64| holes.iter().any(|h| h.start < at + 256 && at < h.end);
        let before = region.decode();
        let after = region.clone().with_absent(holes.clone()).decode();
        // A stream whose descriptor lies in a hole is left out, and said.
        for b in &before.streams {
            let kept = after.streams.iter().any(|st| st.info.index == b.info.index);
            let said = after.diagnostics.iter().any(|d| {
                d.stream == Some(b.info.index) && d.problem == Problem::DescAbsent
            });
            prop_assert!(kept != said, "stream {}: kept {} said {}", b.info.index, kept, said);
        }
        for st in &after.streams {
            let Some(b) = before.streams.iter().find(|b| b.info.index == st.info.index) else {
                return Err(TestCaseError::fail(format!("stream {} is new", st.info.index)));
            };
            // Reports follow one another slot after slot; no two absent
            // ones touch, each stands for every slot of its run.
            let mut next = 0;
            let mut last_absent = false;
            for p in &st.pages {
                prop_assert_eq!(p.slot, next);
                prop_assert!(p.slots >= 1);
                let absent = p.status == PageStatus::Absent;
                prop_assert!(!(absent && last_absent), "two absent reports touch");
                prop_assert!(absent || p.slots == 1);
                for slot in p.slot..p.slot + p.slots {
                    prop_assert_eq!(touched(p.offset + u64::from(slot - p.slot) * 256), absent);
                    prop_assert_eq!(st.page(slot), Some(p));
                }
                next += p.slots;
                last_absent = absent;
            }
            prop_assert_eq!(next, st.info.page_count);
            prop_assert!(st.page(next).is_none());
            // Every slot is counted once, whatever its status.
            let all: usize = [
                PageStatus::Unused, PageStatus::Intact, PageStatus::Damaged,
                PageStatus::Salvaged, PageStatus::Resetting, PageStatus::Truncated,
                PageStatus::Absent, PageStatus::Corrupt,
            ].iter().map(|&s| st.pages_with(s)).sum();
            prop_assert_eq!(all, b.pages.len());
            // One diagnostic per absent report, with its count.
            let diags: Vec<_> = after
                .diagnostics
                .iter()
                .filter(|d| d.stream == Some(st.info.index))
                .filter_map(|d| match d.problem {
                    Problem::Absent { from, count } => Some((from, count)),
                    _ => None,
                })
                .collect();
            let runs: Vec<_> = st
                .pages
                .iter()
                .filter(|p| p.status == PageStatus::Absent)
                .map(|p| (p.slot, p.slots))
                .collect();
            prop_assert_eq!(diags, runs);
        }
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        for trust in [HeaderTrust::Checksummed, HeaderTrust::Lenient] {
            if let Ok(r) = Region::parse(&bytes, trust) {
                let t = r.decode();
                let _ = pstore_ring::merge::merge(&t.streams).count();
            }
        }
    }

    #[test]
    fn mutated_images_never_panic(
        seed in any::<u64>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..40),
    ) {
        let model = closed_image(Endian::Little, 256, 2, 3, seed);
        let mut image = model.image;
        for (at, v) in edits {
            let i = at.index(image.len());
            image[i] = v;
        }
        let r = Region::parse(&image, HeaderTrust::Lenient);
        if let Ok(r) = r {
            let t = r.decode();
            // Decoded pages split each stream's events into consecutive runs.
            for st in &t.streams {
                let mut next = 0;
                for p in st.decoded_pages() {
                    prop_assert_eq!(p.first_event, next);
                    next += p.records as usize;
                }
                prop_assert_eq!(next, st.events.len());
            }
            let mut out = String::new();
            for item in pstore_ring::merge::merge(&t.streams) {
                use std::fmt::Write;
                let line = pstore_ring::text::Line::of(&item, &r);
                writeln!(out, "{line}").unwrap();
            }
        }
    }
}

/// A page's report without its place in the event list, which moves when
/// pages before it lose events.
fn unplaced(p: &PageReport) -> PageReport {
    PageReport {
        first_event: 0,
        ..p.clone()
    }
}

fn dropped(t: &Trace<'_>) -> u64 {
    t.streams.iter().map(|s| s.lost(LossKind::Dropped)).sum()
}

#[test]
fn the_newest_page_damaged_is_reported_too() {
    let model = closed_image(Endian::Little, 256, 1, 4, 7);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    let newest = before.streams[0]
        .pages
        .iter()
        .max_by_key(|p| p.seq)
        .unwrap()
        .clone();
    let mut image = model.image.clone();
    image[newest.offset as usize + 60] ^= 0x10;
    let after = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert_eq!(
        after.streams[0].pages[newest.slot as usize].status,
        PageStatus::Corrupt
    );
    assert_eq!(
        before.event_count() - after.event_count(),
        newest.records as usize
    );
}

#[test]
fn a_damaged_header_is_refused_when_scanning_and_used_when_told() {
    let model = closed_image(Endian::Big, 256, 2, 3, 1);
    let mut image = model.image.clone();
    image[200] ^= 1; // inside `hostname`
    assert!(Region::parse(&image, HeaderTrust::Checksummed).is_err());
    let r = Region::parse(&image, HeaderTrust::Lenient).unwrap();
    assert!(matches!(
        r.diagnostics[0].problem,
        Problem::HeaderCrc { .. }
    ));
    let t = r.decode();
    let clean = Region::parse(&model.image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    assert_eq!(t.event_count(), clean.event_count());
}

#[test]
fn a_damaged_schema_table_falls_back_to_the_builtins() {
    let model = closed_image(Endian::Little, 256, 1, 3, 3);
    let mut image = model.image.clone();
    let r = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    image[r.header.schema_offset as usize + 20] ^= 0xff;
    let r2 = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    assert!(matches!(r2.diagnostics[0].problem, Problem::Schema(_)));
    // Built-in events still decode; the custom "blob" type is unknown but
    // closed pages keep its records.
    assert!(r2.schema.get(40).is_none());
    assert_eq!(r2.decode().event_count(), r.decode().event_count());
}

#[test]
fn a_damaged_descriptor_costs_its_stream_only() {
    let model = closed_image(Endian::Little, 256, 3, 3, 5);
    let mut image = model.image.clone();
    image[320 + 64 + 10] ^= 1; // stream 1's descriptor
    let r = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    assert_eq!(
        r.streams.iter().map(|s| s.index).collect::<Vec<_>>(),
        vec![0, 2]
    );
    assert_eq!(r.diagnostics[0].stream, Some(1));
    assert!(r.diagnostics[0]
        .to_string()
        .starts_with("stream 1 at region offset 0x180: CRC mismatch"));
}

/// What a reader made of a region's header.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Usable, with its tail table where the header put it, or refused
    /// (which costs only the tails).
    Usable(TailTable),
    /// Unusable, naming this field at this offset.
    Refused(&'static str, usize),
}

fn verdict(image: &[u8]) -> Verdict {
    match Region::parse(image, HeaderTrust::Checksummed) {
        Ok(r) => {
            let reported = r.diagnostics.iter().any(|d| {
                d.offset == 100
                    && matches!(d.problem, Problem::InvalidField { field, .. } if field == "tail_offset")
            });
            assert_eq!(
                reported,
                r.tails == TailTable::Invalid,
                "{:?}",
                r.diagnostics
            );
            Verdict::Usable(r.tails)
        }
        Err(HeaderError::InvalidField { field, offset, .. }) => Verdict::Refused(field, offset),
        Err(e) => panic!("refused for another reason: {e}"),
    }
}

/// Every check FORMAT.md section 3 puts on a header field, at its limit
/// and one past it: a limit off by one either way, or a check that names
/// the wrong field, would refuse good regions or accept ones whose tables
/// lie outside them.
#[test]
fn every_header_field_is_accepted_at_its_limit_and_refused_by_name_past_it() {
    use Verdict::*;
    let model = closed_image(Endian::Little, 256, 2, 3, 1);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let h = &region.header;
    let TailTable::At(tail) = region.tails else {
        panic!("no tail table");
    };
    let (size, streams) = (h.region_size, u64::from(h.stream_count));
    // A 64-byte descriptor and two 32-byte tail copies per stream.
    let (descs, tails) = (streams * 64, streams * 2 * 32);
    let ok = || Usable(TailTable::At(tail));
    // region_size 1 MiB: room for 4096 descriptors and their tails.
    let big = (32, 8, 1 << 20);
    /// A little-endian header field: (offset, width, value).
    type Edit = (usize, usize, u64);
    #[rustfmt::skip]
    let rows: Vec<(&str, Vec<Edit>, Verdict)> = vec![
        ("header_size 256", vec![(14, 2, 256)], ok()),
        ("header_size 257", vec![(14, 2, 257)], Refused("header_size", 14)),
        ("word_size 4", vec![(16, 1, 4)], ok()),
        ("word_size 8", vec![(16, 1, 8)], ok()),
        ("word_size 5", vec![(16, 1, 5)], Refused("word_size", 16)),
        ("stream_count 4096", vec![big, (18, 2, 4096)], ok()),
        ("stream_count 4097", vec![big, (18, 2, 4097)], Refused("stream_count", 18)),
        ("stream_count 0", vec![(18, 2, 0)], Refused("stream_count", 18)),
        ("cpu_count = stream_count", vec![(20, 2, streams)], ok()),
        ("cpu_count > stream_count", vec![(20, 2, streams + 1)], Refused("cpu_count", 20)),
        ("page_header_size 48", vec![(22, 2, 48)], ok()),
        ("page_header_size 49", vec![(22, 2, 49)], Refused("page_header_size", 22)),
        ("page_size 256", vec![(24, 4, 256)], ok()),
        ("page_size 128", vec![(24, 4, 128)], Refused("page_size", 24)),
        ("page_size 1 MiB", vec![(24, 4, 1 << 20)], ok()),
        ("page_size 2 MiB", vec![(24, 4, 2 << 20)], Refused("page_size", 24)),
        ("page_size 768", vec![(24, 4, 768)], Refused("page_size", 24)),
        ("desc_size 64", vec![(28, 4, 64)], ok()),
        ("desc_size 65", vec![(28, 4, 65)], Refused("desc_size", 28)),
        ("descriptors right after the state block", vec![(40, 4, 320)], ok()),
        ("descriptors over the state block", vec![(40, 4, 319)], Refused("desc_offset", 40)),
        ("descriptors ending at the region's end", vec![(40, 4, size - descs)], ok()),
        ("descriptors ending a byte past it", vec![(40, 4, size - descs + 1)], Refused("desc_offset", 40)),
        ("schema table ending at the region's end", vec![(44, 4, size - u64::from(h.schema_size))], ok()),
        ("schema table ending a byte past it", vec![(44, 4, size - u64::from(h.schema_size) + 1)], Refused("schema_offset", 44)),
        ("tail table right after the state block", vec![(100, 4, 320)], Usable(TailTable::At(320))),
        ("tail table over the state block", vec![(100, 4, 319)], Usable(TailTable::Invalid)),
        ("tail table ending at the region's end", vec![(100, 4, size - tails)], Usable(TailTable::At(size - tails))),
        ("tail table ending a byte past it", vec![(100, 4, size - tails + 1)], Usable(TailTable::Invalid)),
    ];
    for (what, edits, want) in rows {
        let mut image = model.image.clone();
        for (at, width, value) in edits {
            patch(&mut image, at, &value.to_le_bytes()[..width], 0..252);
        }
        assert_eq!(verdict(&image), want, "{what}");
    }
}

#[test]
fn checksummed_lies_about_sizes_cost_neither_time_nor_memory() {
    let model = closed_image(Endian::Little, 256, 2, 3, 9);
    let clean = Region::parse(&model.image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let mut image = model.image.clone();
    // A header claiming an enormous region, and stream 0 claiming 2^32 - 1
    // pages, both with valid CRCs: what a hostile writer can produce.
    patch(&mut image, 32, &(1u64 << 60).to_le_bytes(), 0..252);
    patch(&mut image, 320 + 4, &u32::MAX.to_le_bytes(), 320..380);
    let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
    let start = std::time::Instant::now();
    let trace = region.decode();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "decode took {:?}",
        start.elapsed()
    );
    let s0 = &trace.streams[0];
    assert!(s0.pages.len() < 64, "{} page reports", s0.pages.len());
    assert!(trace
        .diagnostics
        .iter()
        .any(|d| matches!(d.problem, Problem::PagesMissing { .. })));
    assert!(trace
        .diagnostics
        .iter()
        .any(|d| matches!(d.problem, Problem::RegionTruncated { .. })));
    // Stream 0's real pages still decode; its claimed later slots overlap
    // stream 1's pages and are refused as belonging to another stream.
    assert_eq!(s0.events, clean.streams[0].events);
    assert_eq!(trace.streams[1].events, clean.streams[1].events);
}

#[test]
fn absent_pages_are_not_decoded_even_when_their_bytes_look_valid() {
    let model = closed_image(Endian::Little, 256, 2, 5, 11);
    let region = Region::parse(&model.image, HeaderTrust::Checksummed).unwrap();
    let before = region.decode();
    // A middle page of stream 1 is a hole in the dump, but its placeholder
    // bytes are the real ones: they must still not be used.
    let mut intact: Vec<_> = before.streams[1]
        .pages
        .iter()
        .filter(|p| p.status == PageStatus::Intact)
        .collect();
    intact.sort_by_key(|p| p.seq);
    let victim = intact[intact.len() / 2].clone();
    let hole = victim.offset + 100..victim.offset + 101;
    let after = region.clone().with_absent(vec![hole]).decode();
    let st = &after.streams[1];
    assert_eq!(st.pages[victim.slot as usize].status, PageStatus::Absent);
    assert_eq!(
        before.event_count() - after.event_count(),
        victim.records as usize
    );
    assert!(after.diagnostics.iter().any(|d| d.page == Some(victim.slot)
        && d.problem
            == Problem::Absent {
                from: victim.slot,
                count: 1
            }));
    assert_eq!(st.lost(LossKind::Unreadable), u64::from(victim.records));
    assert_eq!(after.streams[0].events, before.streams[0].events);
}

#[test]
fn an_open_page_at_the_end_of_the_index_space_is_reported_not_a_panic() {
    // An open page has no CRC, so nothing stops `first_index` from being
    // u64::MAX; its events would then run past the end of the index space.
    let ops = (0..40)
        .map(|n| Op::Write {
            stream: 0,
            shape: 1,
            size: 0,
            dt: 1_000 + n,
        })
        .collect();
    let model = build(&Setup {
        endian: Endian::Little,
        word_size: 8,
        page_size: 256,
        streams: 1,
        pages: 4,
        lanes: 1,
        lane_pages: 2,
        ops,
        close_at_end: false,
    });
    let clean = Region::parse(&model.image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let open = clean.streams[0]
        .pages
        .iter()
        .find(|p| p.status == PageStatus::Salvaged && p.records > 0)
        .expect("an open page with events")
        .clone();
    let mut image = model.image.clone();
    let at = open.offset as usize + 24;
    image[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let trace = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .decode();
    let page = &trace.streams[0].pages[open.slot as usize];
    assert_eq!(page.records, open.records);
    let diag = trace
        .diagnostics
        .iter()
        .find(|d| d.page == Some(open.slot))
        .expect("a diagnostic for the page");
    assert_eq!(
        diag.problem,
        Problem::InvalidField {
            field: "first_index",
            value: u64::MAX
        },
        "{diag}"
    );
}
