//! Flattened files (makedumpfile -F) read like the dump they reassemble
//! to; a record that lies ends in an error, and bytes no record holds are
//! lost, never zeros.

mod common;

use common::containers::{
    kdump_page_data, load_offset_fields, lost, memory, raw_text, run_ok, stored, MEM,
};
use common::synth::{self, load, Kdump, PLAIN};
use common::{crashring, write_tmp};
use extractor::input;
use extractor::input::flat::FlatSource;
use extractor::phys::PhysAddr;
use std::sync::Arc;

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
