//! Every container the extractor reads, built to its documented layout
//! around the same memory, must give the same trace as the raw memory;
//! holes must be reported as holes; damage must name its offset. Each
//! container has a file of its own (containers_elf.rs, containers_kdump.rs,
//! containers_flattened.rs); this one holds what is true whatever the
//! container: its kind decides the hints, a dump cut anywhere keeps what
//! it holds before the cut, foreign files are named, and a raw image is
//! read at a given address.

mod common;

use common::containers::{
    kdump_page_data, load_offset_fields, memory, raw_text, run_ok, MEM, REGION,
};
use common::synth::{self, load, Kdump};
use common::{crashring, write_tmp};
use extractor::input;
use extractor::phys::PhysAddr;
use std::ops::Range;
use std::sync::Arc;

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
