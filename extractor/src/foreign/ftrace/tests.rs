//! The persistent ftrace buffer's reader against seeded areas of every
//! meta layout, damaged in each way it can be.

use super::ftrace_area::{self, seed_area, LAYOUTS, MARKERS0, PAGE};
use super::*;
use crate::input::mapped::MappedMemory;
use crate::input::source::FileOffset;
use crate::phys::{Backing, MemoryMap, Run};
use std::cell::Cell;
use std::sync::Arc;

const BASE: u64 = 0x3200_0000;

/// `bytes` at BASE, with the range `lost` (offsets) not in the dump.
fn image(bytes: Vec<u8>, lost: Option<std::ops::Range<u64>>) -> MappedMemory {
    let len = bytes.len() as u64;
    let lost = lost.unwrap_or(len..len);
    let present = |r: std::ops::Range<u64>| Run {
        start: PhysAddr(BASE + r.start),
        end: PhysAddr(BASE + r.end),
        backing: Backing::Present,
        offset: Some(FileOffset(r.start)),
    };
    let mut runs = vec![present(0..lost.start)];
    if !lost.is_empty() {
        runs.push(Run::lost(
            PhysAddr(BASE + lost.start)..PhysAddr(BASE + lost.end),
        ));
        runs.push(present(lost.end..len));
    }
    MappedMemory::new(Arc::new(bytes), MemoryMap::new(runs))
}

#[test]
fn each_layout_says_where_its_boot_put_the_kernel() {
    use crate::kmem::symbols::{SymbolMap, Symbolizer};
    let map = SymbolMap::parse(ftrace_area::KALLSYMS).unwrap();
    // The seed saves TEXT where each layout saves its anchor: 6.12
    // rb_meta_init_text_addr (0x500 into the text), 6.13-6.14 the
    // KASLR offset (from the link address), 6.15+ _text.
    let link = 0xffff_ffff_8100_0000u64;
    for (word, text) in [
        (56, ftrace_area::TEXT - 0x500),
        (48, link.wrapping_add(ftrace_area::TEXT)),
        (0x0018_0020, ftrace_area::TEXT),
        (0x0018_0028, ftrace_area::TEXT),
    ] {
        let mut area = ftrace_area::Area::new(word, 1, 4);
        let entry = ftrace_area::function_entry(3, text + 0x1238, text + 0x2010);
        area.write(0, 1_000, &entry);
        let i = read_at(&image(area.bytes, None), PhysAddr(BASE), None).unwrap();
        let symbols = Symbolizer::new(&map, None, i.kernel_text).unwrap();
        let mut out = Vec::new();
        write_text(&mut out, &i, None, Some(&symbols)).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[    0.000001000] cpu0 pid 3: function: f+0x4 <- g+0x10\n",
            "layout {word:#x}"
        );
    }
}

/// The markers of one CPU, as numbers after `prefix`.
fn markers(i: &Instance, cpu: usize, prefix: &str) -> Vec<u64> {
    let c = &i.cpus[cpu];
    c.events
        .iter()
        .filter_map(|e| {
            let text = event::describe(e.data(&c.data), None, None);
            text.strip_prefix(&format!("print: {prefix} marker "))?
                .parse()
                .ok()
        })
        .collect()
}

/// The markers a CPU-0 ring of the seed's size keeps: the newest ones,
/// contiguous up to the last written.
fn kept_tail(got: &[u64]) -> bool {
    !got.is_empty()
        && got.last() == Some(&(MARKERS0 - 1))
        && got.windows(2).all(|w| w[1] == w[0] + 1)
}

#[test]
fn every_layout_is_read_in_write_order_by_address_and_by_search() {
    for word in LAYOUTS {
        let mem = image(ftrace_area::seed(word), None);
        let by_addr = read_at(&mem, PhysAddr(BASE), None).unwrap();
        let found = find(&mem);
        assert_eq!(found.len(), 1, "layout {word:#x}");
        for i in [&by_addr, found[0].as_ref().unwrap()] {
            assert_eq!(i.generation.word(), word);
            assert_eq!(i.cpus.len(), 2, "layout {word:#x}");
            assert_eq!(i.end.0 - BASE, mem.map().present_bytes());
            let cpu0 = markers(i, 0, "cpu0");
            assert!(kept_tail(&cpu0), "layout {word:#x}: {cpu0:?}");
            // Five sub-buffers of the ring and the reader page: all
            // but what the ring overwrote.
            assert!(cpu0.len() > 450, "layout {word:#x}: {}", cpu0.len());
            assert_eq!(markers(i, 1, "cpu1"), [0, 1, 2, 3, 4]);
            for c in &i.cpus {
                assert_eq!(c.state, CpuState::Ordered);
                assert_eq!((c.tally.invalid, c.tally.unreadable), (0, 0));
            }
            assert!(!i.damaged());
            let merged: Vec<u64> = i.merged().map(|(_, ts, _)| ts).collect();
            assert!(merged.windows(2).all(|w| w[0] <= w[1]));
        }
        // Time extends carried CPU 1's stamps 2^28 ns apart.
        let ts: Vec<u64> = by_addr.cpus[1].events.iter().map(|e| e.ts).collect();
        assert_eq!(
            ts,
            (0..5).map(|i| 2_000_000 + (i << 28)).collect::<Vec<_>>()
        );
    }
}

/// Where CPU 0's sub-buffer at logical place `place` is in the seed.
fn cpu0_page(word: u32, place: usize) -> usize {
    let area = seed_area(word);
    area.page_at(0, area.phys(0, place))
}

/// Markers of the seed's CPU 0 without damage.
fn intact(word: u32) -> Vec<u64> {
    markers(
        &read_at(&image(ftrace_area::seed(word), None), PhysAddr(BASE), None).unwrap(),
        0,
        "cpu0",
    )
}

#[test]
fn a_damaged_sub_buffer_costs_that_sub_buffer_only() {
    for word in LAYOUTS {
        let all = intact(word);
        // An event length past the commit, in the third page of the ring.
        let mut bytes = ftrace_area::seed(word);
        let page = cpu0_page(word, 3);
        bytes[page + 16 + 40..page + 16 + 44].copy_from_slice(&0u32.to_le_bytes());
        let i = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap();
        let got = markers(&i, 0, "cpu0");
        let c = &i.cpus[0];
        assert_eq!(c.tally.invalid, 1, "layout {word:#x}: {:?}", c.losses);
        assert!(
            c.losses[0].to_string().starts_with("sub-buffer "),
            "{:?}",
            c.losses
        );
        assert!(i.damaged());
        // What is left is what was there, less one page's run.
        let lost: Vec<u64> = all.iter().copied().filter(|m| !got.contains(m)).collect();
        assert!(!lost.is_empty() && lost.len() < 110, "{}", lost.len());
        assert!(lost.windows(2).all(|w| w[1] == w[0] + 1), "{lost:?}");
        assert_eq!(got.len() + lost.len(), all.len());
        assert_eq!(markers(&i, 1, "cpu1").len(), 5);
    }
}

#[test]
fn a_zeroed_sub_buffer_between_head_and_commit_is_a_loss() {
    for word in LAYOUTS {
        let area = seed_area(word);
        let generation = Generation::from_word(word).unwrap();
        let mem = image(area.bytes.clone(), None);
        let m = meta::cpu_meta(&mem, generation, PhysAddr(BASE + area.meta_at(0) as u64));
        let sequence = write_order(&mem, generation, &m.unwrap()).unwrap();
        assert!(sequence.len() > 3, "{sequence:?}");
        // The sub-buffer after the head, written and then zeroed.
        let page = area.page_at(0, sequence[2] as usize);
        let mut bytes = area.bytes.clone();
        bytes[page..page + PAGE].fill(0);
        let i = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap();
        let c = &i.cpus[0];
        assert_eq!(c.state, CpuState::Ordered);
        assert_eq!(c.tally.invalid, 1, "layout {word:#x}: {:?}", c.losses);
        assert!(c.losses[0].why.starts_with("zeroed"), "{:?}", c.losses);
        assert!(i.damaged());
    }
}

#[test]
fn a_page_stamp_out_of_order_costs_that_page_only() {
    let word = LAYOUTS[1];
    let all = intact(word);
    for (stamp, what) in [(u64::MAX / 2, "far ahead"), (1, "behind")] {
        let mut bytes = ftrace_area::seed(word);
        let page = cpu0_page(word, 3);
        bytes[page..page + 8].copy_from_slice(&stamp.to_le_bytes());
        let i = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap();
        let c = &i.cpus[0];
        assert_eq!(c.tally.invalid, 1, "{what}: {:?}", c.losses);
        assert!(c.losses[0].why.contains("out of order"), "{:?}", c.losses);
        assert!(all.len() - markers(&i, 0, "cpu0").len() < 110, "{what}");
    }
}

#[test]
fn one_bad_stamp_costs_its_own_page_at_either_end() {
    let pages = |stamps: &[u64]| -> Vec<(u32, Page)> {
        stamps
            .iter()
            .enumerate()
            .map(|(i, &time_stamp)| {
                let page = Page {
                    time_stamp,
                    commit: 0,
                    missed: false,
                    events: 0,
                    end_ts: time_stamp,
                };
                (i as u32, page)
            })
            .collect()
    };
    // The second page's stamp is bad, not the first's.
    assert_eq!(out_of_order(&pages(&[100, 1, 300, 400])), [1]);
    assert_eq!(out_of_order(&pages(&[500, 1, 300, 400])), [0]);
    assert_eq!(out_of_order(&pages(&[100, 200, 300, 1])), [3]);
    assert_eq!(out_of_order(&pages(&[100, 200, 900, 400])), [2]);
    assert_eq!(out_of_order(&pages(&[100, 50, 60, 70])), [0]);
    assert_eq!(out_of_order(&pages(&[100, 1, 300])), [1]);
    // Two pages give no third stamp: the first is flagged, as the
    // kernel's check flags it.
    assert_eq!(out_of_order(&pages(&[100, 1])), [0]);
    assert!(out_of_order(&pages(&[1, 100])).is_empty());
    assert!(out_of_order(&pages(&[7])).is_empty());
}

#[test]
fn a_broken_order_falls_back_to_the_page_stamps() {
    for word in LAYOUTS {
        let all = intact(word);
        let area = seed_area(word);
        let meta = area.meta_at(0);
        let buffers = meta + ftrace_area_meta_size(word);
        let head_at = meta + ftrace_area_pointers_at(word) + 8;
        for (at, value, why) in [
            (buffers + 4, 0u64, "repeats"),
            (head_at, 0x1234, "head pointer"),
        ] {
            let mut bytes = area.bytes.clone();
            let width = if at == head_at { 8 } else { 4 };
            bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            let i = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap();
            match &i.cpus[0].state {
                CpuState::ByTimeStamps(w) => assert!(w.contains(why), "{w}"),
                s => panic!("layout {word:#x}: {s:?}"),
            }
            assert_eq!(markers(&i, 0, "cpu0"), all, "layout {word:#x}, {why}");
        }
    }
}

fn ftrace_area_meta_size(word: u32) -> usize {
    Generation::from_word(word).unwrap().cpu_meta_size() as usize
}

fn ftrace_area_pointers_at(word: u32) -> usize {
    match Generation::from_word(word).unwrap().has_global_meta() {
        true => 0,
        false => ftrace_area_meta_size(word) - 32,
    }
}

#[test]
fn a_damaged_descriptor_costs_its_cpu_only() {
    for word in LAYOUTS {
        let area = seed_area(word);
        let mut bytes = area.bytes.clone();
        // CPU 1's sub-buffer size, or (per-CPU layouts) its magic.
        let at = area.meta_at(1)
            + if Generation::from_word(word).unwrap().has_global_meta() {
                24
            } else {
                0
            };
        bytes[at..at + 4].copy_from_slice(&7u32.to_le_bytes());
        let i = read_at(
            &image(bytes, None),
            PhysAddr(BASE),
            Some(area.bytes.len() as u64 + PAGE as u64),
        )
        .unwrap();
        assert_eq!(i.cpus.len(), 2, "layout {word:#x}");
        assert!(kept_tail(&markers(&i, 0, "cpu0")));
        assert!(
            matches!(i.cpus[1].state, CpuState::Unreadable(_)),
            "{:?}",
            i.cpus[1].state
        );
        assert!(i.damaged());
    }
}

#[test]
fn a_damaged_cpu0_descriptor_leaves_the_next_cpus_their_numbers() {
    // 6.12-6.14 sign each CPU's chunk: CPU 1's is found on its own.
    for word in LAYOUTS.into_iter().filter(|&w| w < 0x10000) {
        let area = seed_area(word);
        let len = area.bytes.len() as u64;
        let check = |i: &Instance, how: &str| {
            assert_eq!(i.base, PhysAddr(BASE), "{word}, {how}");
            assert_eq!(i.cpus.len(), 2, "{word}, {how}");
            assert!(
                matches!(i.cpus[0].state, CpuState::Unreadable(_)),
                "{word}, {how}: {:?}",
                i.cpus[0].state
            );
            assert_eq!(i.cpus[1].cpu, 1, "{word}, {how}");
            assert_eq!(markers(i, 1, "cpu1"), [0, 1, 2, 3, 4], "{word}, {how}");
            assert!(i.damaged());
        };
        // CPU 0's sub-buffer size broken, its magic left: found by search.
        let mut bytes = area.bytes.clone();
        let at = area.meta_at(0) + ftrace_area_pointers_at(word) + 24;
        bytes[at..at + 4].copy_from_slice(&7u32.to_le_bytes());
        let found = find(&image(bytes.clone(), None));
        assert_eq!(found.len(), 1, "{word}: {found:?}");
        check(found[0].as_ref().unwrap(), "search");
        check(
            &read_at(&image(bytes, None), PhysAddr(BASE), Some(len)).unwrap(),
            "bad size, at the area",
        );
        // Its magic gone too: read at the area with its size.
        let mut bytes = area.bytes.clone();
        bytes[..4].copy_from_slice(&[0; 4]);
        check(
            &read_at(&image(bytes.clone(), None), PhysAddr(BASE), Some(len)).unwrap(),
            "no magic, at the area",
        );
        assert!(read_at(&image(bytes, None), PhysAddr(BASE), None).is_err());
    }
}

#[test]
fn the_cleared_rest_of_a_range_is_no_cpu() {
    // The kernel sizes chunks with room to spare (7.3 left four
    // chunks' worth of its range blank behind 64 CPUs).
    for word in LAYOUTS {
        let mut bytes = ftrace_area::seed(word);
        let chunk = (bytes.len() - seed_area(word).meta_at(1)) as u64;
        let range = bytes.len() as u64 + 3 * chunk;
        bytes.resize(range as usize, 0);
        if Generation::from_word(word).unwrap().has_global_meta() {
            bytes[8..16].copy_from_slice(&range.to_le_bytes());
        }
        let i = read_at(&image(bytes, None), PhysAddr(BASE), Some(range)).unwrap();
        assert_eq!(i.cpus.len(), 2, "layout {word:#x}");
        assert!(!i.damaged());
    }
}

#[test]
fn pages_the_dump_lacks_are_reported_not_read_as_zeros() {
    let word = LAYOUTS[2];
    let all = intact(word);
    // Places 3 and 4 of CPU 0's ring: sub-buffers 3 and 4, in a row.
    let page = cpu0_page(word, 3) as u64;
    assert_eq!(cpu0_page(word, 4) as u64, page + PAGE as u64);
    let i = read_at(
        &image(ftrace_area::seed(word), Some(page..page + 2 * PAGE as u64)),
        PhysAddr(BASE),
        None,
    )
    .unwrap();
    let c = &i.cpus[0];
    assert_eq!(
        (c.tally.unreadable, c.tally.invalid),
        (2, 0),
        "{:?}",
        c.losses
    );
    assert_eq!(c.losses.len(), 1, "{:?}", c.losses);
    let said = c.losses[0].to_string();
    assert!(
        said.starts_with(&format!("sub-buffers 3-4 from {:#x}: ", BASE + page)),
        "{said}"
    );
    assert!(said.contains("lost"), "{said}");
    assert!(markers(&i, 0, "cpu0").len() < all.len());
}

#[test]
fn a_page_an_earlier_boot_dropped_is_counted() {
    let word = LAYOUTS[3];
    let mut bytes = ftrace_area::seed(word);
    let page = cpu0_page(word, 3);
    bytes[page + 8..page + 16].copy_from_slice(&page::MISSED_EVENTS.to_le_bytes());
    let i = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap();
    let c = &i.cpus[0];
    assert_eq!((c.tally.dropped_earlier, c.tally.invalid), (1, 0));
    assert!(!i.damaged());
}

#[test]
fn a_count_past_the_dumps_memory_is_refused_unread() {
    for word in LAYOUTS {
        let area = seed_area(word);
        let mut bytes = area.bytes.clone();
        let at = area.meta_at(0) + ftrace_area_pointers_at(word) + 28;
        bytes[at..at + 4].copy_from_slice(&100_000u32.to_le_bytes());
        let e = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap_err();
        assert!(matches!(e, MetaError::PastEnd(..)), "layout {word:#x}: {e}");
    }
}

#[test]
fn buffers_past_the_top_of_the_address_space_are_refused() {
    let mut bytes = seed_area(0x0018_0020).bytes;
    let offset = u64::MAX - 0x1000;
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    bytes[16..24].copy_from_slice(&offset.to_le_bytes());
    let e = read_at(&image(bytes, None), PhysAddr(BASE), None).unwrap_err();
    assert_eq!(
        e,
        MetaError::BuffersOffset(PhysAddr(BASE), offset, u64::MAX)
    );
}

#[test]
fn no_magic_is_an_error_naming_the_address() {
    let mem = image(vec![0u8; 2 * PAGE], None);
    let e = read_at(&mem, PhysAddr(BASE), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no persistent ftrace descriptor (magic 0xbadfeed) at 0x32000000"
    );
    assert!(find(&mem).is_empty());
}

#[test]
fn a_damaged_cpu0_is_found_whether_its_chunk_is_longer_or_shorter() {
    // 8 KiB sub-buffers: an area that starts off their alignment has a
    // first chunk up to a sub-buffer less a page longer or shorter than
    // the rest. Only CPU 0's magic is left of its descriptor.
    let word = 56;
    let generation = Generation::from_word(word).unwrap();
    let first = |at: u64| meta::CpuMeta {
        addr: PhysAddr(at),
        first_buffer: 0,
        head_buffer: 0,
        commit_buffer: 0,
        subbuf_size: 8192,
        nr_subbufs: 4,
        tested: None,
        text_addr: None,
    };
    for offset in [0u64, 0x1000] {
        let base = BASE + offset;
        let m = first(base);
        let (_, cpu1) = meta::chunk_geometry(generation, PhysAddr(base), 8192, 4).unwrap();
        let len = (cpu1.0 - BASE) as usize + 0x4000;
        let mut bytes = vec![0u8; len];
        let at = offset as usize;
        bytes[at..at + 4].copy_from_slice(&meta::MAGIC.to_le_bytes());
        bytes[at + 4..at + 8].copy_from_slice(&word.to_le_bytes());
        let mem = image(bytes, None);
        assert_eq!(
            damaged_chunk_before(&mem, generation, &m, cpu1),
            Some(PhysAddr(base)),
            "area at {offset:#x} off the sub-buffers' alignment"
        );
    }
}

/// A read that counts how often its reach is asked for.
struct Counted<'a> {
    end: Option<PhysAddr>,
    asked: &'a Cell<u64>,
}

impl Reach for Counted<'_> {
    fn end(&self) -> Option<PhysAddr> {
        self.asked.set(self.asked.get() + 1);
        self.end
    }
}

#[test]
fn each_hit_costs_the_same_however_many_came_before() {
    // Hostile memory: a magic on each of 10,000 pages, whose reads fail
    // but every 100th, a signed chunk that takes the failed reads of the
    // two pages before it as its damaged chunks.
    const STEP: u64 = 4096;
    let pages = 10_000;
    let asked = Cell::new(0);
    let mut found = Found::default();
    for page in 0..pages {
        let hit = PhysAddr(page * STEP);
        assert!(!found.inside(hit), "page {page}");
        let end = if page % 100 == 99 {
            found.drop_failed_from(PhysAddr(hit.0 - 2 * STEP));
            Some(PhysAddr(hit.0 + STEP))
        } else {
            None
        };
        found.push(hit, Counted { end, asked: &asked });
    }
    assert!(found.inside(PhysAddr(pages * STEP - 1)));
    assert!(!found.inside(PhysAddr(pages * STEP)));
    let kept = |ok: bool| {
        found
            .reads
            .iter()
            .filter(|(_, r)| r.end.is_some() == ok)
            .count()
    };
    assert_eq!((kept(true), kept(false)), (100, 9_700));
    // A few looks per hit, not one per earlier hit.
    assert!(asked.get() <= 2 * pages, "{} looks", asked.get());
}
