//! The ramoops reader against a seeded area: each zone kind, ECC, and
//! what a dump lacks.

use super::ramoops_area::{self, console_text, header, put};
use super::*;
use crate::input::mapped::MappedMemory;
use crate::input::source::FileOffset;
use crate::phys::{Backing, MemoryMap, PhysAddr, Run};
use std::sync::Arc;

/// `bytes` at physical address `base`, nothing else.
fn image(base: u64, bytes: Vec<u8>) -> MappedMemory {
    let map = MemoryMap::new(vec![Run {
        start: PhysAddr(base),
        end: PhysAddr(base + bytes.len() as u64),
        backing: Backing::Present,
        offset: Some(FileOffset(0)),
    }]);
    MappedMemory::new(Arc::new(bytes), map)
}

const BASE: u64 = 0x1000_0000;

/// The seed's layout, moved to BASE.
fn layout() -> Layout {
    ramoops_area::LAYOUT
        .replacen("0:", &format!("{BASE:#x}:"), 1)
        .parse()
        .unwrap()
}

/// The ECC seed at BASE, its layout, and the panic it holds.
fn ecc_area() -> (Vec<u8>, Layout, Vec<u8>) {
    let rs = Codec::new(16).unwrap();
    let area = ramoops_area::seed_ecc(&|b: &[u8]| rs.encode(b));
    let layout = ramoops_area::ECC_LAYOUT
        .replacen("0:", &format!("{BASE:#x}:"), 1)
        .parse()
        .unwrap();
    (area, layout, ramoops_area::ecc_panic())
}

#[test]
fn with_ecc_a_clean_record_reads_as_without_and_says_so() {
    let (area, layout, panic) = ecc_area();
    let (_, zones) = read(&image(BASE, area), &layout).unwrap();
    let dmesg = text(zone(&zones, ZoneKind::Dmesg, 0));
    assert_eq!(dmesg.bytes, panic);
    assert_eq!(dmesg.ecc, Some(EccTally::default()));
    let (record, _) = zones[0].record().unwrap();
    assert!(record.ends_with(b" line 299\n\nECC: No errors detected\n"));
    let console = text(zone(&zones, ZoneKind::Console, 0));
    assert!(console.wrapped);
    assert_eq!(console.ecc, Some(EccTally::default()));
}

#[test]
fn with_ecc_damage_is_corrected_or_counted_as_the_kernel_counts_it() {
    let (clean, ecc, panic) = ecc_area();
    let mut area = clean.clone();
    // Two bytes of the dmesg zone's first block, one of its header's
    // size word, one of the console's parity.
    area[12 + 3] ^= 0x40;
    area[12 + 100] ^= 0x01;
    area[9] ^= 0x80;
    let (console_buffer, _) = ramoops_area::ecc_buffer(0x2000, 16);
    area[0xc000 + 12 + console_buffer + 5] ^= 0xff;
    let (_, zones) = read(&image(BASE, area.clone()), &ecc).unwrap();
    let dmesg = text(zone(&zones, ZoneKind::Dmesg, 0));
    assert_eq!(dmesg.bytes, panic);
    let three = EccTally {
        corrected_bytes: 3,
        bad_blocks: 0,
    };
    assert_eq!(dmesg.ecc, Some(three));
    assert!(zones[0]
        .record()
        .unwrap()
        .0
        .ends_with(b"\nECC: 3 Corrected bytes, 0 unrecoverable blocks\n"));
    let console = text(zone(&zones, ZoneKind::Console, 0));
    assert_eq!(
        console.ecc.map(|e| (e.corrected_bytes, e.bad_blocks)),
        Some((1, 0))
    );
    // A block past its parity's reach is left as it is and counted:
    // here the compressed record then no longer inflates.
    for b in &mut area[12 + 128 * 3..12 + 128 * 3 + 20] {
        *b ^= 0x5a;
    }
    let (_, zones) = read(&image(BASE, area), &ecc).unwrap();
    assert!(
        matches!(
            zone(&zones, ZoneKind::Dmesg, 0),
            ZoneState::BadCompression(_)
        ),
        "{}",
        zone(&zones, ZoneKind::Dmesg, 0)
    );
    // Without ECC the same memory reads as it lies: the flipped size
    // word makes the header invalid.
    let plain = layout();
    let mut damaged = clean;
    damaged[9] ^= 0x80;
    let (_, zones) = read(&image(BASE, damaged), &plain).unwrap();
    assert!(matches!(
        zone(&zones, ZoneKind::Dmesg, 0),
        ZoneState::Invalid { .. }
    ));
}

#[test]
fn a_block_whose_parity_the_dump_lacks_is_kept_unchecked_and_said() {
    let (mut area, ecc, _) = ecc_area();
    let len = area.len() as u64;
    let (_, zones) = read(&image(BASE, area.clone()), &ecc).unwrap();
    let clean = text(zone(&zones, ZoneKind::Console, 0)).bytes.clone();
    // The console's first block has a flipped byte, and the dump lacks
    // that block's parity (its first 16 parity bytes) only.
    let (console_buffer, _) = ramoops_area::ecc_buffer(0x2000, 16);
    let data_at = 0xc000 + 12;
    let parity_at = (data_at + console_buffer) as u64;
    area[data_at + 5] ^= 0xff;
    let map = MemoryMap::new(vec![
        present(0..parity_at),
        Run::lost(PhysAddr(BASE + parity_at)..PhysAddr(BASE + parity_at + 16)),
        present(parity_at + 16..len),
    ]);
    let (_, zones) = read(&MappedMemory::new(Arc::new(area), map), &ecc).unwrap();
    let state = zone(&zones, ZoneKind::Console, 0);
    let console = text(state);
    assert_eq!(console.unchecked_blocks, 1);
    assert_eq!(console.ecc, Some(EccTally::default()));
    assert!(console.missing.is_empty());
    assert!(!state.lost());
    assert!(
        state
            .to_string()
            .contains(", 1 ECC block unchecked: the dump lacks part of its parity or data"),
        "{state}"
    );
    // The block is kept as it lies, not corrected.
    let changed = clean.iter().zip(&console.bytes).filter(|(a, b)| a != b);
    assert_eq!(changed.count(), 1);
    assert_eq!(text(zone(&zones, ZoneKind::Dmesg, 0)).unchecked_blocks, 0);
}

#[test]
fn a_header_whose_parity_the_dump_lacks_is_read_unchecked_and_said() {
    let (area, ecc, _) = ecc_area();
    let len = area.len() as u64;
    let (_, zones) = read(&image(BASE, area.clone()), &ecc).unwrap();
    let clean = text(zone(&zones, ZoneKind::Console, 0)).bytes.clone();
    // The console header's parity lies after its data blocks' parity.
    let (console_buffer, blocks) = ramoops_area::ecc_buffer(0x2000, 16);
    let header_parity = (0xc000 + 12 + console_buffer + blocks * 16) as u64;
    let map = MemoryMap::new(vec![
        present(0..header_parity),
        Run::lost(PhysAddr(BASE + header_parity)..PhysAddr(BASE + header_parity + 16)),
        present(header_parity + 16..len),
    ]);
    let (_, zones) = read(&MappedMemory::new(Arc::new(area), map), &ecc).unwrap();
    let state = zone(&zones, ZoneKind::Console, 0);
    let console = text(state);
    assert_eq!(console.bytes, clean);
    assert_eq!(console.unchecked_blocks, 1);
    assert_eq!(console.ecc, Some(EccTally::default()));
    assert!(!state.lost());
    assert!(
        state
            .to_string()
            .contains(", 1 ECC block unchecked: the dump lacks part of its parity or data"),
        "{state}"
    );
}

#[test]
fn a_block_the_dump_lacks_part_of_is_kept_unchecked_and_said() {
    let (mut area, ecc, _) = ecc_area();
    let (_, zones) = read(&image(BASE, area.clone()), &ecc).unwrap();
    let clean = text(zone(&zones, ZoneKind::Console, 0)).bytes.clone();
    // The console's 4th block lacks 16 bytes and has a flipped byte; its
    // 6th has a flipped byte too.
    let data_at = 0xc000 + 12;
    area[data_at + 3 * 128 + 5] ^= 0xff;
    area[data_at + 5 * 128 + 5] ^= 0xff;
    let hole = (data_at + 3 * 128 + 40) as u64..(data_at + 3 * 128 + 56) as u64;
    let (_, zones) = read(&with_hole(area, hole), &ecc).unwrap();
    let state = zone(&zones, ZoneKind::Console, 0);
    let console = text(state);
    assert_eq!(console.unchecked_blocks, 1);
    // The 6th block is corrected, the 4th kept as it lies.
    assert_eq!(
        console.ecc,
        Some(EccTally {
            corrected_bytes: 1,
            bad_blocks: 0,
        })
    );
    let gap = console.missing[0].at;
    let kept = [&clean[..gap], &clean[gap + 16..]].concat();
    let changed = kept.iter().zip(&console.bytes).filter(|(a, b)| a != b);
    assert_eq!(changed.count(), 1);
    assert!(
        state
            .to_string()
            .contains(", 1 ECC block unchecked: the dump lacks part of its parity or data;"),
        "{state}"
    );
}

/// The zone of `kind` and `index` among `zones`.
fn zone(zones: &[Zone], kind: ZoneKind, index: u32) -> &ZoneState {
    &zones
        .iter()
        .find(|z| z.plan.kind == kind && z.plan.index == index)
        .expect("planned")
        .state
}

fn text(state: &ZoneState) -> &ZoneText {
    match state {
        ZoneState::Text(t) => t,
        other => panic!("{other}"),
    }
}

#[test]
fn every_kind_of_zone_reads_as_pstore_shows_it_in_either_order() {
    for (pmsg_first, order) in [(true, Order::PmsgFirst), (false, Order::FtraceFirst)] {
        let (found, zones) =
            read(&image(BASE, ramoops_area::seed_in(pmsg_first)), &layout()).unwrap();
        assert_eq!(found, order);
        let dmesg = |i| zone(&zones, ZoneKind::Dmesg, i);
        assert_eq!(
            text(dmesg(0)).bytes,
            b"<0>Kernel panic - not syncing: plain\n"
        );
        assert_eq!(text(dmesg(0)).time, Some((1700000000, 5)));
        assert!(!text(dmesg(0)).compressed);
        // Written once from the start: its position is at its end.
        assert!(!text(dmesg(0)).wrapped);
        assert_eq!(
            text(dmesg(1)).bytes,
            b"<0>Kernel panic - not syncing: compressed\n"
        );
        assert!(text(dmesg(1)).compressed);
        assert!(matches!(dmesg(2), ZoneState::Empty));
        // The console zone went round its buffer: the oldest text is gone.
        let console = text(zone(&zones, ZoneKind::Console, 0));
        let written = console_text();
        assert_eq!(console.bytes, &written[written.len() - (0x2000 - 12)..]);
        assert!(console.wrapped);
        assert_eq!(
            text(zone(&zones, ZoneKind::Pmsg, 0)).bytes,
            b"compositor: frame 7 late\n"
        );
        let ftrace = text(zone(&zones, ZoneKind::Ftrace, 0));
        assert_eq!(ftrace.version, Some(0x060c75));
        assert_eq!(
            ftrace_lines(ftrace),
            (
                "CPU:1 ts:77 0xffffffff81000010 <- 0xffffffff81000020\n".to_string(),
                0
            )
        );
        // Never written since ramoops set it up: no signature of its own.
        assert!(matches!(
            zone(&zones, ZoneKind::Ftrace, 1),
            ZoneState::NotRamoops { found: 0 }
        ));
    }
    let (_, zones) = read(&image(BASE, ramoops_area::seed()), &layout()).unwrap();
    assert_eq!(zones[1].file_name(), "dmesg-ramoops-1");
}

#[test]
fn zones_the_kernel_would_discard_are_reported_and_the_rest_read() {
    let sig = ramoops_area::SIG;
    let mut mem = ramoops_area::seed();
    put(&mut mem, 0, sig, 0x4000 - 12, b"no header\n");
    put(
        &mut mem,
        0x4000,
        sig,
        0x4000 - 12,
        b"====1.000001-C\nnot deflate",
    );
    // Start past size; size past the buffer.
    header(&mut mem, 0x8000, sig, 9, 8);
    header(&mut mem, 0xf800, sig ^ 0x060100, 0, 0x800);
    let (_, zones) = read(&image(BASE, mem.clone()), &layout()).unwrap();
    let dmesg = |i| zone(&zones, ZoneKind::Dmesg, i);
    assert!(matches!(dmesg(0), ZoneState::NoDmesgHeader));
    assert!(matches!(dmesg(1), ZoneState::BadCompression(_)));
    assert!(matches!(dmesg(2), ZoneState::Invalid { start: 9, size: 8 }));
    assert!(matches!(
        zone(&zones, ZoneKind::Console, 0),
        ZoneState::Text(_)
    ));
    assert!(matches!(
        zone(&zones, ZoneKind::Ftrace, 1),
        ZoneState::Invalid {
            start: 0,
            size: 0x800
        }
    ));
    // An area the dump holds only part of: each zone past it says so.
    let (_, zones) = read(&image(BASE, mem[..0xc006].to_vec()), &layout()).unwrap();
    assert!(matches!(
        zone(&zones, ZoneKind::Dmesg, 2),
        ZoneState::Invalid { .. }
    ));
    for kind in [ZoneKind::Console, ZoneKind::Pmsg, ZoneKind::Ftrace] {
        assert!(matches!(zone(&zones, kind, 0), ZoneState::Unreadable(_)));
    }
}

/// Area bytes `r`, in the dump at the area's offsets.
fn present(r: Range<u64>) -> Run {
    Run {
        start: PhysAddr(BASE + r.start),
        end: PhysAddr(BASE + r.end),
        backing: Backing::Present,
        offset: Some(FileOffset(r.start)),
    }
}

#[test]
fn a_page_the_dump_lacks_costs_a_text_zone_that_page_only() {
    // The console zone's second page (0xd000 in the area) is a hole.
    let area = ramoops_area::seed();
    let len = area.len() as u64;
    let map = MemoryMap::new(vec![
        present(0..0xd000),
        Run::lost(PhysAddr(BASE + 0xd000)..PhysAddr(BASE + 0xe000)),
        present(0xe000..len),
    ]);
    let mem = MappedMemory::new(Arc::new(area), map);
    let (_, zones) = read(&mem, &layout()).unwrap();
    let state = zone(&zones, ZoneKind::Console, 0);
    assert!(state.lost());
    let console = text(state);
    // Gone round to position 0x24: text from there, then the buffer's
    // start; the hole is the buffer's 0xff4..0x1ff4.
    let written = console_text();
    let kept = &written[written.len() - (0x2000 - 12)..];
    let hole = 0xff4 - 0x24..0x1ff4 - 0x24;
    assert_eq!(console.bytes.len(), kept.len() - 0x1000);
    assert_eq!(console.bytes[..hole.start], kept[..hole.start]);
    assert_eq!(console.bytes[hole.start..], kept[hole.end..]);
    assert_eq!(
        console.missing,
        [Missing {
            addr: PhysAddr(BASE + 0xd000),
            len: 0x1000,
            at: hole.start,
        }]
    );
    assert!(
        state
            .to_string()
            .ends_with("; 4096 bytes not in the dump left out (4096 at 0x1000d000)"),
        "{state}"
    );
    // Its neighbours are read whole.
    assert_eq!(
        text(zone(&zones, ZoneKind::Pmsg, 0)).bytes,
        b"compositor: frame 7 late\n"
    );
    assert!(text(zone(&zones, ZoneKind::Dmesg, 0)).missing.is_empty());
}

#[test]
fn a_text_zone_the_dump_lacks_all_of_is_unreadable() {
    let area = ramoops_area::seed();
    let len = area.len() as u64;
    // The header's page is there, its text's pages are not.
    let mut bytes = area;
    header(&mut bytes, 0xc000, ramoops_area::SIG, 0, 0x1000);
    let map = MemoryMap::new(vec![
        present(0..0xc000 + 12),
        Run::lost(PhysAddr(BASE + 0xc000 + 12)..PhysAddr(BASE + 0xe000)),
        present(0xe000..len),
    ]);
    let mem = MappedMemory::new(Arc::new(bytes), map);
    let (_, zones) = read(&mem, &layout()).unwrap();
    assert!(matches!(
        zone(&zones, ZoneKind::Console, 0),
        ZoneState::Unreadable(_)
    ));
}

/// The seed with `count` records in its first ftrace zone, and where
/// that zone's data starts in the area.
fn ftrace_area(count: u64) -> (Vec<u8>, u64) {
    let mut area = ramoops_area::seed();
    let at = ramoops_area::put_ftrace_records(&mut area, count);
    (area, at as u64 + 12)
}

/// `area` at BASE without its bytes `hole`.
fn with_hole(area: Vec<u8>, hole: Range<u64>) -> MappedMemory {
    let len = area.len() as u64;
    let map = MemoryMap::new(vec![
        present(0..hole.start),
        Run::lost(PhysAddr(BASE + hole.start)..PhysAddr(BASE + hole.end)),
        present(hole.end..len),
    ]);
    MappedMemory::new(Arc::new(area), map)
}

/// The first ftrace zone's lines and partial bytes.
fn ftrace_zone(zones: &[Zone]) -> (Vec<String>, usize) {
    let (lines, partial) = ftrace_lines(text(zone(zones, ZoneKind::Ftrace, 0)));
    (lines.lines().map(String::from).collect(), partial)
}

#[test]
fn a_wrapped_ftrace_zone_is_read_in_step_with_its_newest_record() {
    // 100 records into a 2036-byte buffer (84 fit, with 20 bytes over):
    // the writer went round, the oldest record kept is cut at the front.
    let (area, _) = ftrace_area(100);
    let (_, zones) = read(&image(BASE, area), &layout()).unwrap();
    assert!(text(zone(&zones, ZoneKind::Ftrace, 0)).wrapped);
    let (lines, partial) = ftrace_zone(&zones);
    assert_eq!(partial, 2036 % 24);
    assert_eq!(lines.len(), 84);
    assert_eq!(
        lines[0],
        "CPU:1 ts:16 0x0000000000001010 <- 0x0000000000002010"
    );
    assert_eq!(
        lines[83],
        "CPU:1 ts:99 0x0000000000001063 <- 0x0000000000002063"
    );
}

#[test]
fn an_ftrace_zone_keeps_the_records_around_a_hole_in_their_places() {
    // 50 records from the buffer's start; the dump lacks 53 bytes from
    // the 6th of record 10 on, into record 12.
    let (area, data) = ftrace_area(50);
    let (_, zones) = read(&image(BASE, area.clone()), &layout()).unwrap();
    let (all, _) = ftrace_zone(&zones);
    let hole = data + 10 * 24 + 5..data + 10 * 24 + 5 + 53;
    let (_, zones) = read(&with_hole(area, hole.clone()), &layout()).unwrap();
    let state = zone(&zones, ZoneKind::Ftrace, 0);
    assert!(state.lost());
    let ftrace = text(state);
    assert_eq!(ftrace.torn_records, 3);
    assert_eq!(
        ftrace.missing,
        [Missing {
            addr: PhysAddr(BASE + hole.start),
            len: 53,
            at: 10 * 24 + 5,
        }]
    );
    let (lines, partial) = ftrace_zone(&zones);
    assert_eq!(partial, 0);
    let kept: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| !(10..=12).contains(i))
        .map(|(_, l)| l.clone())
        .collect();
    assert_eq!(lines, kept);
    let note = format!(
        "; 53 bytes not in the dump left out (53 at {:#x}), and the 3 ftrace records that touch them",
        BASE + hole.start
    );
    assert!(state.to_string().ends_with(&note), "{state}");
}

#[test]
fn a_hole_across_a_record_boundary_costs_both_records_and_joins_none() {
    // The wrapped zone's text starts at its buffer's byte 364, 20 bytes
    // of a partial record first: text bytes 161..167 (buffer bytes
    // 525..531) end record 5 and start record 6. Then a hole of exactly
    // record 50 (text 1220..1244, buffer 1584..1608).
    let (area, data) = ftrace_area(100);
    let (_, zones) = read(&image(BASE, area.clone()), &layout()).unwrap();
    let (all, _) = ftrace_zone(&zones);
    for (hole, torn) in [(525..531, &[5, 6][..]), (1584..1608, &[50])] {
        let (_, zones) = read(
            &with_hole(area.clone(), data + hole.start..data + hole.end),
            &layout(),
        )
        .unwrap();
        assert_eq!(
            text(zone(&zones, ZoneKind::Ftrace, 0)).torn_records,
            torn.len() as u64
        );
        let (lines, partial) = ftrace_zone(&zones);
        assert_eq!(partial, 20);
        let kept: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| !torn.contains(i))
            .map(|(_, l)| l.clone())
            .collect();
        assert_eq!(lines, kept, "hole {hole:?}");
    }
}

#[test]
fn a_plain_dmesg_record_keeps_its_text_around_a_hole() {
    // The seed's first record, its header 19 bytes long; the dump lacks
    // text bytes 30..35, after it.
    let hole = 12 + 30..12 + 35;
    let (_, zones) = read(&with_hole(ramoops_area::seed(), hole.clone()), &layout()).unwrap();
    let state = zone(&zones, ZoneKind::Dmesg, 0);
    assert!(state.lost());
    let dmesg = text(state);
    let written = b"<0>Kernel panic - not syncing: plain\n";
    assert_eq!(dmesg.bytes, [&written[..11], &written[16..]].concat());
    assert_eq!(dmesg.time, Some((1700000000, 5)));
    assert_eq!(
        dmesg.missing,
        [Missing {
            addr: PhysAddr(BASE + hole.start),
            len: 5,
            at: 11,
        }]
    );
    assert!(
        state
            .to_string()
            .ends_with(&format!("left out (5 at {:#x})", BASE + hole.start)),
        "{state}"
    );
}

#[test]
fn a_compressed_dmesg_record_inflates_up_to_its_first_hole() {
    // The ECC seed's long panic, compressed in the second dmesg zone; the
    // dump lacks 50 of its compressed bytes from offset 1000 on.
    let mut area = ramoops_area::seed();
    let record = ramoops_area::compressed_record(&ramoops_area::ecc_panic());
    put(&mut area, 0x4000, ramoops_area::SIG, 0x4000 - 12, &record);
    let header = b"====1700000000.123456-C\n".len() as u64;
    let gap = 0x4000 + 12 + header + 1000;
    let (_, zones) = read(&with_hole(area, gap..gap + 50), &layout()).unwrap();
    let state = zone(&zones, ZoneKind::Dmesg, 1);
    assert!(state.lost());
    let dmesg = text(state);
    let panic = ramoops_area::ecc_panic();
    assert!(dmesg.bytes.len() > 1000, "{}", dmesg.bytes.len());
    assert!(dmesg.bytes.len() < panic.len());
    assert!(panic.starts_with(&dmesg.bytes));
    let rest = Uninflated {
        offset: 1000,
        addr: PhysAddr(BASE + gap),
        len: record.len() as u64 - header - 1000,
    };
    assert_eq!(dmesg.uninflated, Some(rest));
    assert_eq!(
        dmesg.missing,
        [Missing {
            addr: PhysAddr(BASE + gap),
            len: 50,
            at: dmesg.bytes.len(),
        }]
    );
    let note = format!(
        "its last {} compressed bytes, from offset 1000 ({:#x}) on, are lost",
        rest.len, rest.addr
    );
    assert!(state.to_string().ends_with(&note), "{state}");
}

#[test]
fn a_record_inflating_past_the_kernels_limit_is_kept_compressed_and_said() {
    // The second dmesg zone's buffer is 0x4000 - 12 bytes: pstore inflates
    // up to 3 times that, and no further.
    let limit = 3 * (0x4000 - 12);
    let header = b"====1700000000.123456-C\n".len();
    let read_zone = |inflated: usize| {
        let mut area = ramoops_area::seed();
        let record = ramoops_area::compressed_record(&vec![b'x'; inflated]);
        put(&mut area, 0x4000, ramoops_area::SIG, 0x4000 - 12, &record);
        let (_, mut zones) = read(&image(BASE, area), &layout()).unwrap();
        (zones.remove(1), record[header..].to_vec())
    };
    let (at_limit, _) = read_zone(limit);
    assert_eq!(text(&at_limit.state).bytes.len(), limit);
    assert_eq!(text(&at_limit.state).inflate_refused, None);
    assert_eq!(at_limit.file_name(), "dmesg-ramoops-1");
    // One byte more: the kernel's own refusal, and only the compressed
    // bytes are held.
    let (past, deflated) = read_zone(limit + 1);
    let dmesg = text(&past.state);
    assert_eq!(dmesg.inflate_refused, Some(limit as u64));
    assert!(dmesg.compressed);
    assert_eq!(dmesg.bytes, deflated);
    assert_eq!(past.file_name(), "dmesg-ramoops-1.enc.z");
    assert!(past.state.lost());
    assert!(
        past.state.to_string().contains(&format!(
            "stored compressed and kept so: it inflates past {limit} bytes"
        )),
        "{}",
        past.state
    );
}

#[test]
fn a_dmesg_record_whose_header_the_dump_lacks_part_of_is_unreadable() {
    // "====17" then a hole over "00": read around, the rest would still
    // make a header, with another time.
    let hole = 12 + 6..12 + 8;
    let (_, zones) = read(&with_hole(ramoops_area::seed(), hole.clone()), &layout()).unwrap();
    match zone(&zones, ZoneKind::Dmesg, 0) {
        ZoneState::Unreadable(e) => assert_eq!(e.addr(), PhysAddr(BASE + hole.start)),
        other => panic!("{other}"),
    }
    // The zones beside it are read.
    assert!(text(zone(&zones, ZoneKind::Dmesg, 1)).missing.is_empty());
    // Bytes before the hole that no header begins with are no record, as
    // the kernel says, hole or not.
    for at in [1, 4] {
        let mut area = ramoops_area::seed();
        area[12 + at] = b'x';
        let (_, zones) = read(&with_hole(area, hole.clone()), &layout()).unwrap();
        assert!(
            matches!(zone(&zones, ZoneKind::Dmesg, 0), ZoneState::NoDmesgHeader),
            "{at}"
        );
    }
}

#[test]
fn dmesg_headers_are_read_as_the_kernel_reads_them() {
    assert_eq!(
        dmesg_header(b"====12.000345-D\nx"),
        Some(((12, 345), false, 16))
    );
    assert_eq!(dmesg_header(b"====12.5\nx"), Some(((12, 5), false, 9)));
    assert_eq!(dmesg_header(b"====-3.1-C\n"), Some(((-3, 1), true, 11)));
    for bad in [
        &b"===12.5\n"[..],
        b"====12\n",
        b"====12.5-X\n",
        b"====1.5",
        b"====a.5\n",
        b"====.5\n",
    ] {
        assert_eq!(
            dmesg_header(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}
