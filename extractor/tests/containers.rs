//! Every container the extractor reads, built to its documented layout
//! around the same memory, must give the same trace as the raw memory;
//! holes must be reported as holes; damage must name its offset.

mod common;

use common::synth::{self, load, Kdump, Load, LZO, PLAIN, SNAPPY, ZLIB, ZSTD};
use common::{crashring, image_sized, write_tmp};
use extractor::input;
use extractor::input::flat::FlatSource;
use extractor::input::kdump::codecs::decompress_page;
use extractor::input::source::FileOffset;
use extractor::phys::{Backing, PhysAddr, PhysError, Run};
use std::ops::Range;
use std::sync::Arc;

/// Physical address of the region in the test memory.
const REGION: u64 = 0x30000;
const MEM: usize = 0x100000;

/// 1 MiB of memory: filler, a 64 KiB region at 0x30000 with 4 KiB ring
/// pages (so dump pages and ring pages line up), zero pages after it.
fn memory() -> Vec<u8> {
    let mut mem = image_sized(REGION as usize, 4096, 0x10000, 3000);
    mem.resize(MEM, 0);
    mem
}

fn run_ok(name: &str, file: &[u8], args: &[&str]) -> String {
    let path = write_tmp(name, file);
    let mut all = vec!["extract", path.to_str().unwrap()];
    all.extend(args);
    let out = crashring(&all);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{name}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

/// What crashring prints for the raw memory: every container must match
/// it. Made once per process, as tests running in parallel would
/// otherwise rewrite `mem.raw` while another one reads it.
fn raw_text() -> String {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| run_ok("mem.raw", &memory(), &[]))
        .clone()
}

#[test]
fn every_codec_fills_a_page_exactly_and_refuses_bombs() {
    let page: Vec<u8> = (0..4096u32)
        .map(|i| b"crashring!"[(i % 10) as usize] ^ (i / 512) as u8)
        .collect();
    for codec in [ZLIB, LZO, SNAPPY, ZSTD] {
        let packed = synth::compress(codec, &page);
        let mut got = vec![0; 4096];
        decompress_page(codec, &packed, &mut got).unwrap();
        assert_eq!(got, page, "codec {codec:#x}");
        // The same stream into a smaller page is a bomb; into a bigger one
        // it comes up short. Both are refused.
        assert!(decompress_page(codec, &packed, &mut [0; 1024]).is_err());
        assert!(decompress_page(codec, &packed, &mut [0; 8192]).is_err());
        for cut in [0, 1, packed.len() / 2, packed.len() - 1] {
            assert!(decompress_page(codec, &packed[..cut], &mut [0; 4096]).is_err());
        }
    }
}

#[test]
fn a_zstd_frame_asking_for_a_huge_window_is_refused() {
    // Window descriptor 0xf8: a 2 GiB window, no content size.
    let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf8, 0x01, 0x00, 0x00];
    let err = decompress_page(ZSTD, &frame, &mut [0; 4096]).unwrap_err();
    assert!(err.contains("zstd"), "{err}");
}

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

/// The file offsets of an ELF core's PT_LOAD headers' `p_offset` fields.
fn load_offset_fields(core: &[u8]) -> Vec<usize> {
    let phoff = u64::from_le_bytes(core[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(core[56..58].try_into().unwrap()) as usize;
    (0..phnum)
        .map(|i| phoff + 56 * i)
        .filter(|&ph| core[ph..ph + 4] == 1u32.to_le_bytes())
        .map(|ph| ph + 8)
        .collect()
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
fn kdump_files_read_like_the_raw_memory_in_every_codec_and_byte_order() {
    let mem = memory();
    let want = raw_text();
    for codec in [ZLIB, LZO, SNAPPY, ZSTD] {
        for big_endian in [false, true] {
            let k = Kdump {
                codec,
                big_endian,
                vmcoreinfo: Some("OSRELEASE=6.12.0-kd\n"),
                // Excluded pages outside the region cost nothing.
                excluded: &[1, 2, 0x80],
                ..Default::default()
            };
            let file = synth::kdump(&mem, &k);
            let name = format!("dump-{codec:x}-{big_endian}.kdump");
            assert_eq!(run_ok(&name, &file, &[]), want, "{name}");
            let flat = synth::flatten(&file);
            assert_eq!(
                run_ok(&format!("{name}.flat"), &flat, &[]),
                want,
                "{name} flattened"
            );
        }
    }
}

#[test]
fn flattened_elf_reads_too() {
    let mem = memory();
    let core = synth::elf(&mem, &[load(0, MEM as u64)], None, 2, false);
    assert_eq!(
        run_ok("core.elf.flat", &synth::flatten(&core), &[]),
        raw_text()
    );
}

#[test]
fn the_container_kind_is_what_decides_the_proc_vmcore_hint() {
    use extractor::input::{ContainerKind, ElfOrigin};
    use extractor::recover::{self, InputSpec};
    use pstore_ring::read::HeaderTrust;
    // Memory with no region in it.
    let mem = vec![0u8; MEM];
    let core = synth::elf(&mem, &[load(0, MEM as u64)], None, 2, false);
    let mut notes = Vec::new();
    synth::note(&mut notes, b"QEMU", 0, &[0; 8]);
    let qemu = synth::elf_with_notes(&mem, &[load(0, MEM as u64)], &notes, 1, false);
    let kdump = synth::kdump(&mem, &Kdump::default());
    let cases = [
        (core.clone(), ContainerKind::Elf(ElfOrigin::Vmcore)),
        (qemu, ContainerKind::Elf(ElfOrigin::Qemu)),
        (
            synth::flatten(&core),
            ContainerKind::Flattened(Box::new(ContainerKind::Elf(ElfOrigin::Vmcore))),
        ),
        (kdump.clone(), ContainerKind::Kdump),
        (
            synth::flatten(&kdump),
            ContainerKind::Flattened(Box::new(ContainerKind::Kdump)),
        ),
        (mem, ContainerKind::Raw),
    ];
    let hint = "a memmap= region is not System RAM and is not in /proc/vmcore";
    for (file, kind) in cases {
        let dump = input::open(Arc::new(file)).unwrap();
        assert_eq!(dump.kind, kind, "{}", dump.container);
        // Only an ELF core that nothing marks as another tool's is taken
        // for /proc/vmcore, and only then is its memmap= hint given.
        let spec = InputSpec {
            path: "dump".into(),
            phys: None,
            trust: HeaderTrust::Checksummed,
        };
        let err = match recover::find(dump, &spec, &mut |_, _| {}) {
            Ok(_) => panic!("a region found in {kind:?}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(err.contains(hint), kind.is_vmcore(), "{kind:?}: {err}");
        assert_eq!(
            kind.is_vmcore(),
            kind == ContainerKind::Elf(ElfOrigin::Vmcore)
        );
    }
}

#[test]
fn kdump_excluded_and_lost_pages_are_told_apart() {
    let mem = memory();
    let k = Kdump {
        excluded: &[0x31],
        lost: &[0x32],
        ..Default::default()
    };
    let file = synth::kdump(&mem, &k);
    let dump = input::open(Arc::new(file.clone())).unwrap();
    assert!(dump.warnings.iter().any(|w| w.contains("incomplete")));
    let mut b = [0u8; 4];
    let hole = |addr| match dump.memory.read(PhysAddr(addr), &mut [0u8; 4]) {
        Err(PhysError::Hole { backing, .. }) => Some(backing),
        _ => None,
    };
    assert_eq!(hole(0x31000), Some(Backing::Excluded));
    assert_eq!(hole(0x32010), Some(Backing::Lost));
    assert!(dump.memory.read(PhysAddr(0x30000), &mut b).is_ok());
    assert!(matches!(
        dump.memory.read(PhysAddr(MEM as u64), &mut b),
        Err(PhysError::Outside { .. })
    ));
    let path = write_tmp("holes.kdump", &file);
    let out = crashring(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("hole: region bytes 0x1000..0x2000: excluded by the dump's filter"),
        "{text}"
    );
    assert!(
        text.contains("hole: region bytes 0x2000..0x3000: lost (incomplete dump)"),
        "{text}"
    );
    assert!(text.contains("not in the dump"), "{text}");
}

#[test]
fn damaged_kdump_headers_are_refused_naming_the_field_and_offset() {
    let mem = memory();
    let good = synth::kdump(&mem, &Kdump::default());
    let cases: [(usize, &[u8], &str); 4] = [
        (428, &[0, 0x30, 0, 0], "`block_size` at file offset 0x1ac"),
        (
            436,
            &[0xff, 0xff, 0xff, 0x0f],
            "`bitmap_blocks` at file offset 0x1b4",
        ),
        (4096 + 100, &[1, 0, 0, 0], "max_mapnr is 4294967552"),
        (8, &[0, 1, 0, 0], "`header_version`"),
    ];
    for (at, bytes, want) in cases {
        let mut bad = good.clone();
        bad[at..at + bytes.len()].copy_from_slice(bytes);
        let path = write_tmp("bad.kdump", &bad);
        let out = crashring(&["info", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{want}: {err}");
    }
}

/// The text lines of the events on ring pages of `mem`'s region whose
/// bytes `held` says a cut dump still holds: what reading it must keep.
fn lines_on_held_pages(mem: &[u8], held: impl Fn(Range<u64>) -> bool) -> Vec<String> {
    use pstore_ring::merge::Item;
    use pstore_ring::read::{HeaderTrust, Region};
    use pstore_ring::text::Line;
    let region = Region::parse(&mem[REGION as usize..], HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    let page_size = u64::from(region.header.page_size);
    let mut lines = Vec::new();
    for stream in &trace.streams {
        for page in stream.decoded_pages() {
            let at = REGION + page.offset;
            if held(at..at + page_size) {
                let events = &stream.events[page.first_event..][..page.records as usize];
                lines.extend(
                    events
                        .iter()
                        .map(|e| Line::of(&Item::Event(e), &region).to_string()),
                );
            }
        }
    }
    lines
}

/// Where a dump's bytes for a range of physical memory end in the file.
type StoredEnd<'a> = &'a dyn Fn(Range<u64>) -> u64;

#[test]
fn truncated_dumps_keep_everything_before_the_cut() {
    let mem = memory();
    let want = raw_text();
    let kdump = synth::kdump(&mem, &Kdump::default());
    let elf = synth::elf(&mem, &[load(0, MEM as u64)], None, 1, false);
    // Where each dump's bytes for a physical range end in the file: the
    // ELF core holds memory as one segment from `p_offset` on, the kdump
    // file a page at a time, in order of address, after every descriptor.
    let elf_data = u64::from_le_bytes(elf[load_offset_fields(&elf)[0]..][..8].try_into().unwrap());
    let elf_end = |r: Range<u64>| elf_data + r.end;
    let kdump_end = |r: Range<u64>| {
        (r.start / 4096..r.end.div_ceil(4096))
            .map(|pfn| {
                let (at, size) = kdump_page_data(&kdump, pfn as usize);
                (at + size) as u64
            })
            .max()
            .unwrap_or(0)
    };
    let files: [(&str, &[u8], StoredEnd); 2] = [
        ("cut.kdump", &kdump, &kdump_end),
        ("cut.elf", &elf, &elf_end),
    ];
    let all = lines_on_held_pages(&mem, |_| true).len();
    for (name, file, stored_end) in files {
        let step = file.len() / 40;
        let mut kept_some = false;
        for cut in (0..file.len())
            .step_by(step)
            .chain([1, 100, file.len() - 1])
        {
            let path = write_tmp(name, &file[..cut]);
            let out = crashring(&["extract", path.to_str().unwrap()]);
            let code = out.status.code();
            assert!(matches!(code, Some(0..=2)), "{name} cut at {cut}: {code:?}");
            let text = String::from_utf8(out.stdout).unwrap();
            for line in text.lines().filter(|l| !l.contains("events lost")) {
                assert!(want.contains(line), "{name} cut at {cut} invented: {line}");
            }
            if code == Some(2) {
                assert!(!out.stderr.is_empty());
            }
            let got: std::collections::HashSet<&str> = text.lines().collect();
            let keep = lines_on_held_pages(&mem, |r| stored_end(r) <= cut as u64);
            for line in &keep {
                assert!(
                    got.contains(line.as_str()),
                    "{name} cut at {cut} lost: {line}"
                );
            }
            kept_some |= !keep.is_empty() && keep.len() < all;
        }
        // Some cut must fall among the ring's pages, or nothing above was
        // checked but the two ends.
        assert!(kept_some, "{name}: no cut left part of the ring");
    }
}

#[test]
fn flattened_record_loops_and_lies_end_in_errors_or_warnings() {
    let mem = memory();
    let file = synth::kdump(&mem, &Kdump::default());
    let mut flat = synth::flatten(&file);
    // A record whose size runs far past the end of the file.
    flat[4096 + 8..4096 + 16].copy_from_slice(&(1i64 << 40).to_be_bytes());
    let path = write_tmp("lying.flat", &flat);
    let out = crashring(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("record at 0x1000"), "{err}");
}

#[test]
fn a_flattened_file_cannot_claim_bitmaps_it_does_not_hold() {
    let mem = memory();
    let mut file = synth::kdump(&mem, &Kdump::default());
    // Bitmaps of 2^16 blocks (128 MiB each) for 2^30 pages ...
    file[436..440].copy_from_slice(&(1u32 << 16).to_le_bytes());
    file[4096 + 96..4096 + 104].copy_from_slice(&(1u64 << 30).to_le_bytes());
    // ... in a file one tiny record stretches to 1 GiB.
    let mut flat = synth::flatten(&file);
    synth::append_record(&mut flat, 1 << 30, &[0]);
    let path = write_tmp("bitmap-claim.flat", &flat);
    let out = crashring(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("`max_mapnr` at file offset 0x1060")
            && err.contains("more than the")
            && err.contains("bytes the input holds"),
        "{err}"
    );
}

#[test]
fn foreign_files_get_a_clear_message() {
    let cases: [(&[u8], &str); 3] = [
        (b"PAGEDU64\0\0\0\0", "Windows crash dump"),
        (b"\x1f\x8b\x08\0\0\0", "gzip"),
        (b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0\x04\0", "32-bit ELF"),
    ];
    for (bytes, want) in cases {
        let mut file = bytes.to_vec();
        file.resize(8192, 0);
        let path = write_tmp("foreign.bin", &file);
        let out = crashring(&["info", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(want), "{want}: {err}");
    }
}

#[test]
fn phys_reads_one_region_without_scanning() {
    let text = run_ok("phys.raw", &memory(), &["--phys", "0x30000"]);
    assert_eq!(text, raw_text());
    let path = write_tmp("phys2.raw", &memory());
    let out = crashring(&["extract", path.to_str().unwrap(), "--phys", "0x31000"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    // The cause is kept as the error's source and printed with it.
    assert!(
        err.contains(
            "no valid region header at physical address 0x31000: no region magic at offset 0"
        ),
        "{err}"
    );
}

#[test]
fn a_missing_header_keeps_why_as_its_source() {
    use extractor::discover::{read_at, DiscoverError, NoHeader};
    use pstore_ring::read::{HeaderError, HeaderTrust};
    let dump = input::open(Arc::new(memory())).unwrap();
    let err = read_at(
        &*dump.memory,
        PhysAddr(0x31000),
        None,
        HeaderTrust::Checksummed,
    )
    .unwrap_err();
    let source = std::error::Error::source(&err).expect("a source");
    assert!(source.downcast_ref::<NoHeader>().is_some(), "{source:?}");
    assert!(
        matches!(
            err,
            DiscoverError::NoHeader {
                addr: PhysAddr(0x31000),
                why: NoHeader::Invalid(HeaderError::BadMagic)
            }
        ),
        "{err:?}"
    );
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

/// Where `synth::kdump` (with no excluded page) stored page `pfn`: the
/// data's file offset and size, from its descriptor.
fn kdump_page_data(file: &[u8], pfn: usize) -> (usize, usize) {
    let bitmap_blocks = u32::from_le_bytes(file[436..440].try_into().unwrap()) as usize;
    let desc = 4096 * (2 + bitmap_blocks) + 24 * pfn;
    let offset = u64::from_le_bytes(file[desc..desc + 8].try_into().unwrap());
    let size = u32::from_le_bytes(file[desc + 8..desc + 12].try_into().unwrap());
    (offset as usize, size as usize)
}

#[test]
fn a_flattened_dump_missing_a_plain_page_has_a_hole_not_zeros() {
    let mem = memory();
    let want = raw_text();
    // Uncompressed pages, makedumpfile's default: nothing checks their
    // bytes, so a missing record must not read as a page of zeros.
    let k = Kdump {
        codec: PLAIN,
        ..Default::default()
    };
    let file = synth::kdump(&mem, &k);
    let (at, size) = kdump_page_data(&file, 0x35);
    let flat = synth::flatten_without(&file, at..at + size);
    let path = write_tmp("gap.flat", &flat);
    let out = crashring(&["extract", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 dumped pages (the first at physical address 0x35000) have descriptors or data the input does not hold")
            && err.contains("region bytes 0x5000..0x6000: lost (incomplete dump)"),
        "{err}"
    );
    let got = String::from_utf8(out.stdout).unwrap();
    assert!(got.lines().count() < want.lines().count() && got.contains("events lost"));
    for line in got.lines().filter(|l| !l.contains("events lost")) {
        assert!(want.contains(line), "invented: {line}");
    }
}

#[test]
fn a_kdump_file_cut_short_says_where_and_what_it_lost() {
    let mem = memory();
    let want = raw_text();
    let file = synth::kdump(&mem, &Kdump::default());
    // Cut in the middle of the data of the region's fifth page.
    let (at, size) = kdump_page_data(&file, 0x34);
    let cut = at + size / 2;
    let lost = (0..MEM / 4096)
        .filter(|&pfn| {
            let (at, size) = kdump_page_data(&file, pfn);
            at + size > cut
        })
        .count();
    let path = write_tmp("cut-data.kdump", &file[..cut]);
    let out = crashring(&["extract", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("the file is cut short: it ends at offset {cut:#x}, before the descriptors or data of {lost} dumped pages (the first at physical address 0x34000); they are lost"))
            && err.contains("region bytes 0x4000..0x9000: lost (incomplete dump)"),
        "{err}"
    );
    let got = String::from_utf8(out.stdout).unwrap();
    assert!(
        got.lines().count() > 10 && got.contains("events lost"),
        "{got}"
    );
    for line in got.lines().filter(|l| !l.contains("events lost")) {
        assert!(want.contains(line), "invented: {line}");
    }

    // Cut before the region's first page: nothing is found, and the user
    // is told the dump is cut short rather than only that nothing is there.
    let (at, _) = kdump_page_data(&file, 0x30);
    let path = write_tmp("cut-early.kdump", &file[..at]);
    let out = crashring(&["info", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("the file is cut short: it ends at offset {at:#x}"))
            && err.contains("no crashring region in")
            && err.contains("bytes of memory the dump should hold are not in it"),
        "{err}"
    );
}

/// A present run of a raw image or ELF core: `start..end` stored plainly
/// at file offset `offset`.
fn stored(start: u64, end: u64, offset: u64) -> Run {
    Run {
        start: PhysAddr(start),
        end: PhysAddr(end),
        backing: Backing::Present,
        offset: Some(FileOffset(offset)),
    }
}

#[test]
fn a_raw_image_with_gaps_maps_them_and_its_unheld_tail_as_lost() {
    // A reassembled flattened file that holds no dump is a raw image; a
    // record left out in the middle and an empty record stretching the
    // file past its last bytes are memory the image lacks, not zeros.
    let mem: Vec<u8> = (0..0x3000u32).map(|i| (i % 251) as u8).collect();
    let mut flat = synth::flatten_without(&mem, 0x1000..0x1800);
    synth::append_record(&mut flat, 0x4000, &[]);
    let source = FlatSource::open(Arc::new(flat)).unwrap();
    let dump = input::open(Arc::new(source)).unwrap();
    assert_eq!(dump.container, "raw memory image, 16384 bytes");
    assert_eq!(
        dump.memory.map().runs(),
        [
            stored(0, 0x1000, 0),
            lost(0x1000..0x1800),
            stored(0x1800, 0x3000, 0x1800),
            lost(0x3000..0x4000),
        ]
    );
    let mut b = [0u8; 0x10];
    dump.memory.read(PhysAddr(0x1ff8), &mut b).unwrap();
    assert_eq!(b, mem[0x1ff8..0x2008]);
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

/// Why opening `file` failed.
fn open_error(file: Vec<u8>) -> String {
    match input::open(Arc::new(file)) {
        Ok(dump) => panic!("opened: {}", dump.container),
        Err(e) => e.to_string(),
    }
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
fn bytes_a_flattened_core_lacks_inside_a_segment_are_lost_and_counted() {
    let mem = memory();
    let core = synth::elf(&mem, &[load(0, MEM as u64)], None, 1, false);
    let data = u64::from_le_bytes(
        core[load_offset_fields(&core)[0]..][..8]
            .try_into()
            .unwrap(),
    );
    // No record holds the segment's bytes for 0x31000..0x32800.
    let gap = data as usize + 0x31000..data as usize + 0x32800;
    let dump = input::open(Arc::new(synth::flatten_without(&core, gap))).unwrap();
    assert_eq!(
        dump.warnings,
        ["6144 bytes of the segment for 0x0..0x100000 are not in the file"]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [
            stored(0, 0x31000, data),
            lost(0x31000..0x32800),
            stored(0x32800, MEM as u64, data + 0x32800),
        ]
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

/// A run of memory the dump meant to hold and does not.
fn lost(range: Range<u64>) -> Run {
    Run::lost(PhysAddr(range.start)..PhysAddr(range.end))
}

/// A run of a kdump file's map: `start..end` held as `backing`, stored
/// compressed (no plain file offset).
fn paged(start: u64, end: u64, backing: Backing) -> Run {
    Run {
        start: PhysAddr(start),
        end: PhysAddr(end),
        backing,
        offset: None,
    }
}

/// Where the page descriptors of a `synth::kdump` file start.
fn kdump_descs(file: &[u8]) -> usize {
    let block = u32::from_le_bytes(file[428..432].try_into().unwrap()) as usize;
    let bitmap_blocks = u32::from_le_bytes(file[436..440].try_into().unwrap()) as usize;
    block * (2 + bitmap_blocks)
}

#[test]
fn a_kdump_file_gives_its_kernel_notes_cpus_and_excluded_runs_exactly() {
    let mem = memory();
    // A whole bitmap byte of excluded pages (0x38..0x40) and a lone one.
    let excluded: Vec<u64> = (0x38..0x40).chain([0x81]).collect();
    let k = Kdump {
        vmcoreinfo: Some("OSRELEASE=6.12.0-kd\n"),
        excluded: &excluded,
        ..Default::default()
    };
    let dump = input::open(Arc::new(synth::kdump(&mem, &k))).unwrap();
    assert_eq!(
        dump.container,
        "kdump-compressed dump v6, 4096-byte pages, kernel 6.12.0 (x86_64)"
    );
    assert_eq!(dump.vmcoreinfo.as_deref(), Some("OSRELEASE=6.12.0-kd\n"));
    assert_eq!(dump.cpus, Some(4));
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(
        dump.memory.map().runs(),
        [
            paged(0, 0x38000, Backing::Present),
            paged(0x38000, 0x40000, Backing::Excluded),
            paged(0x40000, 0x81000, Backing::Present),
            paged(0x81000, 0x82000, Backing::Excluded),
            paged(0x82000, MEM as u64, Backing::Present),
        ]
    );
    let mut b = [0u8; 0x20];
    dump.memory.read(PhysAddr(0x30ff0), &mut b).unwrap();
    assert_eq!(b, mem[0x30ff0..0x31010]);
}

#[test]
fn pages_that_are_no_ram_are_outside_a_kdump_file_and_whole_bytes_of_excluded_pages_excluded() {
    // 512-byte pages: 2048 of them, so the bitmaps are 256 bytes and the
    // byte skip has bytes of no RAM (the first and the upper half) to
    // skip, around a byte of excluded pages (16..24).
    let mem = memory();
    let not_ram: Vec<u64> = (0..8).chain(1024..2048).collect();
    let excluded: Vec<u64> = (16..24).collect();
    let k = Kdump {
        block: 512,
        not_ram: &not_ram,
        excluded: &excluded,
        ..Default::default()
    };
    let dump = input::open(Arc::new(synth::kdump(&mem, &k))).unwrap();
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(
        dump.memory.map().runs(),
        [
            paged(0x1000, 0x2000, Backing::Present),
            paged(0x2000, 0x3000, Backing::Excluded),
            paged(0x3000, 0x80000, Backing::Present),
        ]
    );
    let mut b = [0u8; 0x20];
    dump.memory.read(PhysAddr(0x30ff0), &mut b).unwrap();
    assert_eq!(b, mem[0x30ff0..0x31010]);
}

#[test]
fn a_vmcoreinfo_of_exactly_1_mib_is_read_and_one_byte_more_is_not() {
    let mem = memory();
    let mut file = synth::kdump(&mem, &Kdump::default());
    let at = file.len() as u64;
    let mut info = b"OSRELEASE=6.12.0-big\n".to_vec();
    info.resize((1 << 20) + 1, b'#');
    file.extend(&info);
    // kdump_sub_header's offset_vmcoreinfo and size_vmcoreinfo.
    file[4096 + 32..4096 + 40].copy_from_slice(&at.to_le_bytes());
    for (size, want) in [(1u64 << 20, Some(&info[..1 << 20])), ((1 << 20) + 1, None)] {
        file[4096 + 40..4096 + 48].copy_from_slice(&size.to_le_bytes());
        let dump = input::open(Arc::new(file.clone())).unwrap();
        assert_eq!(
            dump.vmcoreinfo.as_deref().map(str::as_bytes),
            want,
            "{size}"
        );
    }
}

#[test]
fn a_bad_kdump_version_is_named_when_the_block_size_reads_in_one_byte_order_only() {
    // 8192 little-endian is 2 MiB big-endian: no page size.
    let mem = memory();
    let mut file = synth::kdump(
        &mem,
        &Kdump {
            block: 8192,
            ..Default::default()
        },
    );
    file[8..12].copy_from_slice(&0x100u32.to_le_bytes());
    assert_eq!(
        open_error(file),
        "invalid kdump-compressed dump `header_version` at file offset 0x8: 256 is not a known version"
    );
}

#[test]
fn kdump_bitmaps_of_exactly_the_largest_size_are_accepted_and_one_block_more_is_not() {
    let mem = memory();
    let good = synth::kdump(&mem, &Kdump::default());
    let len = good.len();
    // 2^17 blocks of 4 KiB: two bitmaps of 256 MiB each, the most
    // accepted; this file then ends long before them.
    let mut file = good.clone();
    file[436..440].copy_from_slice(&(1u32 << 17).to_le_bytes());
    assert_eq!(
        open_error(file),
        format!("invalid kdump-compressed dump `bitmap_blocks` at file offset 0x1b4: the bitmaps end at 0x20002000, past the end of the file ({len:#x})")
    );
    let mut file = good;
    file[436..440].copy_from_slice(&((1u32 << 17) + 2).to_le_bytes());
    assert_eq!(
        open_error(file),
        "invalid kdump-compressed dump `bitmap_blocks` at file offset 0x1b4: bitmaps of 268439552 bytes each, more than the 268435456 accepted"
    );
}

#[test]
fn pages_an_incomplete_kdump_never_wrote_are_lost_each_where_it_is() {
    let mem = memory();
    // Two adjacent lost pages and one apart, all for the same reason.
    let k = Kdump {
        lost: &[0x32, 0x33, 0x35],
        ..Default::default()
    };
    let dump = input::open(Arc::new(synth::kdump(&mem, &k))).unwrap();
    assert_eq!(
        dump.warnings,
        ["the dump is incomplete (makedumpfile ran out of space): pages it did not write are lost"]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [
            paged(0, 0x32000, Backing::Present),
            paged(0x32000, 0x34000, Backing::Lost),
            paged(0x34000, 0x35000, Backing::Present),
            paged(0x35000, 0x36000, Backing::Lost),
            paged(0x36000, MEM as u64, Backing::Present),
        ]
    );
}

#[test]
fn a_kdump_file_cut_among_its_descriptors_loses_every_page_but_a_corrupt_one() {
    let mem = memory();
    let mut file = synth::kdump(&mem, &Kdump::default());
    let descs = kdump_descs(&file);
    // Descriptor 99, the last the cut file holds whole, says its page has
    // 0 bytes: corrupt, which reading the page reports, not missing.
    let d99 = descs + 24 * 99;
    let data = u64::from_le_bytes(file[d99..d99 + 8].try_into().unwrap());
    file[d99 + 8..d99 + 12].copy_from_slice(&0u32.to_le_bytes());
    let cut = d99 + 24 + 10;
    file.truncate(cut);
    let dump = input::open(Arc::new(file)).unwrap();
    assert_eq!(
        dump.warnings,
        [format!("the file is cut short: it ends at offset {cut:#x}, before the descriptors or data of 255 dumped pages (the first at physical address 0x0); they are lost")]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [
            paged(0, 0x63000, Backing::Lost),
            paged(0x63000, 0x64000, Backing::Present),
            paged(0x64000, MEM as u64, Backing::Lost),
        ]
    );
    let err = dump
        .memory
        .read(PhysAddr(0x63000), &mut [0; 8])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("physical address 0x63000: page descriptor 99 at file offset {d99:#x} (data at {data:#x}, 0 bytes, flags 0x1): size is not within 1..=4096")
    );
}

#[test]
fn a_kdump_file_of_more_descriptors_than_one_read_step_maps_every_page() {
    // 4200 pages of 512 bytes, more than the 4096 descriptors read (and
    // counted in the prefix counts) per step; each page starts with its
    // number where it is not zero.
    let pages = 4200u64;
    let mut mem = vec![0u8; pages as usize * 512];
    for pfn in [7, 4095, 4096, 4100, 4199] {
        mem[pfn * 512..pfn * 512 + 8].copy_from_slice(&(pfn as u64).to_le_bytes());
    }
    let k = Kdump {
        block: 512,
        ..Default::default()
    };
    let dump = input::open(Arc::new(synth::kdump(&mem, &k))).unwrap();
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(
        dump.memory.map().runs(),
        [paged(0, pages * 512, Backing::Present)]
    );
    for pfn in [7u64, 4095, 4096, 4100, 4199] {
        let mut b = [0u8; 8];
        dump.memory.read(PhysAddr(pfn * 512), &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), pfn);
    }
}

#[test]
fn kdump_descriptors_that_cannot_be_read_lose_their_pages() {
    let mem = memory();
    let file = synth::kdump(&mem, &Kdump::default());
    let descs = kdump_descs(&file) as u64;
    // Every descriptor is on a bad sector: the pages are lost, as they
    // are to a file missing them, and opening goes on.
    let source = synth::BadSectors {
        inner: file,
        bad: descs..descs + 24 * 256,
    };
    let dump = input::open(Arc::new(source)).unwrap();
    assert_eq!(
        dump.warnings,
        ["256 dumped pages (the first at physical address 0x0) have descriptors or data the input does not hold; they are lost"]
    );
    assert_eq!(
        dump.memory.map().runs(),
        [paged(0, MEM as u64, Backing::Lost)]
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
