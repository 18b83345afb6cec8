//! ELF cores (/proc/vmcore, makedumpfile -E, QEMU's) read like the raw
//! memory they hold; what a segment leaves out or reuses is a hole, and a
//! damaged program header is refused naming its field.

mod common;

use common::containers::{
    load_offset_fields, lost, memory, open_error, raw_text, run_ok, stored, MEM,
};
use common::synth::{self, load, Load};
use common::{crashring, image_sized, write_tmp};
use extractor::input;
use extractor::phys::{Backing, PhysAddr, PhysError};
use std::sync::Arc;

#[test]
fn elf_cores_read_like_the_raw_memory() {
    let mem = memory();
    let want = raw_text();
    let loads = [load(0, 0x20000), load(0x20000, 0xe0000)];
    let plain = synth::elf(
        &mem,
        &loads,
        Some("OSRELEASE=6.12.0-test\nCRASHTIME=1\n"),
        4,
        false,
    );
    assert_eq!(run_ok("core.elf", &plain, &[]), want);
    // Segment count in section header 0, as QEMU writes it.
    let xnum = synth::elf(&mem, &loads, None, 4, true);
    assert_eq!(run_ok("xnum.elf", &xnum, &[]), want);
    // A kernel-text alias: the same physical memory mapped twice.
    let alias = [load(0x20000, 0x20000), load(0, 0x100000)];
    let aliased = synth::elf(&mem, &alias, None, 1, false);
    assert_eq!(run_ok("alias.elf", &aliased, &[]), want);

    let path = write_tmp("info.elf", &plain);
    let out = crashring(&["info", "--json", path.to_str().unwrap()]);
    let json = String::from_utf8(out.stdout).unwrap();
    assert!(
        json.contains("\"vmcoreinfo_kernel\":\"6.12.0-test\""),
        "{json}"
    );
    assert!(json.contains("\"cpus\":4"), "{json}");
    assert!(json.contains("\"physical_address\":\"0x30000\""), "{json}");
}

#[test]
fn segments_reusing_file_bytes_at_other_addresses_are_not_memory() {
    let mem = memory();
    // Both halves of memory, the second pointed at the first's bytes, as a
    // hostile file would do a thousand times to claim terabytes.
    let mut core = synth::elf(
        &mem,
        &[load(0, 0x80000), load(0x80000, 0x80000)],
        None,
        1,
        false,
    );
    let fields = load_offset_fields(&core);
    let first = core[fields[0]..fields[0] + 8].to_vec();
    core[fields[1]..fields[1] + 8].copy_from_slice(&first);
    let path = write_tmp("reused.elf", &core);
    let out = crashring(&["info", path.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("1 segments (the first for 0x80000..0x100000) reuse file bytes"),
        "{text}"
    );
    // The region, in the first half, is still read.
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("region 0 at physical address 0x30000"),
        "{text}"
    );
}

#[test]
fn pages_makedumpfile_e_leaves_out_are_holes_not_zeros() {
    let mem = memory();
    // The segment holding the region's last page stores only its first
    // part: the rest is p_memsz past p_filesz.
    let loads = [
        load(0, 0x33000),
        Load {
            paddr: 0x33000,
            memsz: 0x1000,
            filesz: 0,
        },
        load(0x34000, 0xcc000),
    ];
    let core = synth::elf(&mem, &loads, None, 1, false);
    let dump = input::open(Arc::new(core.clone())).unwrap();
    let mut b = [0u8; 8];
    match dump.memory.read(PhysAddr(0x33100), &mut b) {
        Err(PhysError::Hole { addr, backing }) => {
            assert_eq!((addr, backing), (PhysAddr(0x33100), Backing::Excluded))
        }
        other => panic!("{other:?}"),
    }
    let path = write_tmp("filtered.elf", &core);
    let out = crashring(&["extract", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("region bytes 0x3000..0x4000: excluded by the dump's filter"),
        "{err}"
    );
    assert!(err.contains("not in the input"), "{err}");
    let got = String::from_utf8(out.stdout).unwrap();
    let want = raw_text();
    assert!(got.lines().count() > 10 && got.lines().count() < want.lines().count());
    for line in got.lines().filter(|l| !l.contains("events lost")) {
        assert!(want.contains(line), "invented: {line}");
    }
}

#[test]
fn a_region_at_the_top_of_the_address_space_is_read_without_overflow() {
    // A 36 KiB region whose last 4 KiB page the dump lacks, ending exactly
    // at 2^64: its end is not a u64.
    let mut mem = image_sized(0, 4096, 0x9000, 10);
    let top = 0u64.wrapping_sub(0x9000);
    // Another magic inside the region (in an unused page), so the scan
    // asks whether a hit lies in a region it has already read.
    mem[0x7800..0x7808].copy_from_slice(&pstore_ring::layout::MAGIC_STORED);
    let mut core = synth::elf(&mem, &[load(0, 0x8000)], None, 1, false);
    for field in load_offset_fields(&core) {
        // p_vaddr and p_paddr follow p_offset.
        core[field + 8..field + 16].copy_from_slice(&top.to_le_bytes());
        core[field + 16..field + 24].copy_from_slice(&top.to_le_bytes());
    }
    let path = write_tmp("top.elf", &core);
    let path = path.to_str().unwrap();
    let out = crashring(&["info", path]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        text.contains(&format!("region 0 at physical address {top:#x}"))
            && text.contains("region bytes 0x8000..0x9000: not in the dump"),
        "{text}"
    );
    // Told to read 1 MiB there, the part past 2^64 is a hole that says so.
    let out = crashring(&["info", path, "--phys", &format!("{top:#x}:1M")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        text.contains("region bytes 0x8000..0x9000: not in the dump")
            && text.contains(
                "region bytes 0x9000..0x100000: past the top of the physical address space"
            ),
        "{text}"
    );
}

#[test]
fn a_segment_reusing_the_bytes_of_a_later_segment_is_not_memory() {
    let mem = memory();
    // The third segment points at the second's bytes: the file reach the
    // check compares against must have grown past the first segment.
    let loads = [
        load(0, 0x40000),
        load(0x40000, 0x40000),
        load(0x80000, 0x80000),
    ];
    let mut core = synth::elf(&mem, &loads, None, 1, false);
    let fields = load_offset_fields(&core);
    let second = core[fields[1]..fields[1] + 8].to_vec();
    core[fields[2]..fields[2] + 8].copy_from_slice(&second);
    let first = u64::from_le_bytes(core[fields[0]..fields[0] + 8].try_into().unwrap());
    let dump = input::open(Arc::new(core)).unwrap();
    assert_eq!(
        dump.warnings,
        ["1 segments (the first for 0x80000..0x100000) reuse file bytes another segment maps at a different address; their memory is treated as lost"]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [stored(0, 0x80000, first), lost(0x80000..0x100000)]
    );
}

#[test]
fn a_complete_elf_core_counts_its_segments_and_warns_of_nothing() {
    let mem = memory();
    let loads = [load(0, 0x80000), load(0x80000, 0x80000)];
    let core = synth::elf(&mem, &loads, None, 3, false);
    let data = u64::from_le_bytes(
        core[load_offset_fields(&core)[0]..][..8]
            .try_into()
            .unwrap(),
    );
    let dump = input::open(Arc::new(core)).unwrap();
    // Every segment stores all its memory (p_filesz == p_memsz): nothing
    // was filtered, so this is no makedumpfile -E file.
    assert_eq!(
        dump.container,
        "ELF64 core (/proc/vmcore or compatible), 2 PT_LOAD segments"
    );
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(dump.cpus, Some(3));
    assert_eq!(dump.memory.map().runs(), [stored(0, MEM as u64, data)]);
}

/// A kernel core's "CORE" notes are per CPU only when they are
/// NT_PRSTATUS; the registers and process notes other dumpers add beside
/// them (NT_PRFPREG, NT_PRPSINFO) are no CPUs.
#[test]
fn only_prstatus_notes_count_as_cpus() {
    let mem = vec![0u8; MEM];
    let mut notes = Vec::new();
    for ty in [1, 2, 3, 1] {
        synth::note(&mut notes, b"CORE", ty, &[0; 336]);
    }
    let core = synth::elf_with_notes(&mem, &[load(0, MEM as u64)], &notes, 1, false);
    let dump = input::open(Arc::new(core)).unwrap();
    assert_eq!(dump.cpus, Some(2));
}

#[test]
fn a_wrapping_segment_is_refused_naming_its_own_header_field() {
    let mem = memory();
    let loads = [load(0, 0x80000), load(0x80000, 0x80000)];
    let good = synth::elf(&mem, &loads, None, 1, false);
    // Program header 2 (after the notes' and the first segment's), so the
    // offset named is that header's, not the table's start.
    let field = load_offset_fields(&good)[1];
    assert_eq!(field, 64 + 2 * 56 + 8);
    let mut bad = good.clone();
    bad[field..field + 8].copy_from_slice(&(u64::MAX - 0x1000).to_le_bytes());
    assert_eq!(
        open_error(bad),
        "invalid ELF core `p_offset` at file offset 0xb8: segment wraps the file"
    );
    let mut bad = good;
    let paddr = u64::MAX - 0x1000;
    bad[field + 16..field + 24].copy_from_slice(&paddr.to_le_bytes());
    assert_eq!(
        open_error(bad),
        format!("invalid ELF core `p_memsz` at file offset 0xd8: segment at {paddr:#x} wraps")
    );
}

#[test]
fn exactly_the_most_program_headers_accepted_open_and_one_more_is_refused() {
    const MAX: u32 = 1 << 20;
    let mem = memory();
    let core = synth::elf(&mem, &[load(0, MEM as u64)], None, 1, true);
    // Program header 1, after the notes' (e_phnum is PN_XNUM here, so
    // `load_offset_fields` cannot count them).
    let data = u64::from_le_bytes(core[64 + 56 + 8..][..8].try_into().unwrap());
    // PN_XNUM: the count is section header 0's sh_info, at the file's end.
    let count = core.len() - 64 + 44;
    // The note and load headers again at the end of the file, then empty
    // (PT_NULL) ones the source does not store, up to the count.
    let with_count = |n: u32| {
        let mut head = core.clone();
        head[count..count + 4].copy_from_slice(&n.to_le_bytes());
        let table = head.len() as u64;
        head.extend_from_within(64..64 + 2 * 56);
        head[32..40].copy_from_slice(&table.to_le_bytes());
        let len = table + 56 * u64::from(n);
        Arc::new(synth::ZeroTail { head, len })
    };
    let dump = input::open(with_count(MAX)).unwrap();
    assert_eq!(
        dump.container,
        "ELF64 core (/proc/vmcore or compatible), 1 PT_LOAD segments"
    );
    assert_eq!(dump.memory.map().runs(), [stored(0, MEM as u64, data)]);
    let err = match input::open(with_count(MAX + 1)) {
        Ok(dump) => panic!("opened: {}", dump.container),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        err,
        "invalid ELF core `e_phnum` at file offset 0x38: 1048577 program headers, more than the 1048576 accepted"
    );
}

#[test]
fn a_core_cut_short_and_flagged_incomplete_says_so_and_loses_exactly_its_tail() {
    let mem = memory();
    let mut core = synth::elf(&mem, &[load(0, MEM as u64)], None, 1, false);
    let data = u64::from_le_bytes(
        core[load_offset_fields(&core)[0]..][..8]
            .try_into()
            .unwrap(),
    );
    // e_flags bit 0: makedumpfile ran out of space, and the file ends
    // partway through the segment.
    core[48..52].copy_from_slice(&1u32.to_le_bytes());
    core.truncate(data as usize + 0x31800);
    let dump = input::open(Arc::new(core)).unwrap();
    assert_eq!(
        dump.container,
        "ELF64 core (makedumpfile -E), 1 PT_LOAD segments"
    );
    assert_eq!(
        dump.warnings,
        [
            "845824 bytes of the segment for 0x0..0x100000 are not in the file",
            "the dump is incomplete (makedumpfile ran out of space)",
        ]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [stored(0, 0x31800, data), lost(0x31800..MEM as u64)]
    );
}

#[test]
fn a_window_is_lent_up_to_the_end_of_a_run_and_never_across_it() {
    use extractor::input::source::FileSource;
    let mem = memory();
    // Two segments the file stores back to back, at physical addresses
    // apart: the file goes on where the first run ends, memory does not.
    let core = synth::elf(
        &mem,
        &[load(0, 0x40000), load(0x80000, 0x80000)],
        None,
        1,
        false,
    );
    let path = write_tmp("window.elf", &core);
    let dump = input::open(Arc::new(FileSource::open(&path).unwrap())).unwrap();
    let window = dump
        .memory
        .window(PhysAddr(0x3f000), 0x1000)
        .expect("a window");
    assert_eq!(&window[..], &mem[0x3f000..0x40000]);
    assert!(dump.memory.window(PhysAddr(0x3f000), 0x1001).is_none());
}
