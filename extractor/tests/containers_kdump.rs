//! kdump-compressed files read like the raw memory in every codec and
//! byte order; excluded, lost and no-RAM pages are told apart, and a
//! damaged header or a file cut short says where.

mod common;

use common::containers::{kdump_page_data, memory, open_error, raw_text, run_ok, MEM};
use common::synth::{self, Kdump, LZO, SNAPPY, ZLIB, ZSTD};
use common::{crashring, write_tmp};
use extractor::input;
use extractor::input::kdump::codecs::decompress_page;
use extractor::phys::{Backing, PhysAddr, PhysError, Run};
use std::sync::Arc;

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
