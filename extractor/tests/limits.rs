//! Hostile inputs cost memory in proportion to the bytes they hold, not to
//! what their headers claim: each case runs the real binary and bounds
//! its peak RSS, and checks that what is missing is reported, not invented.

mod common;

use common::synth::{self, load};
use common::{
    crashring, crashring_peak_rss, crashring_peak_rss_with, ftrace_area, image_sized, write_tmp,
};
use pstore_ring::layout::crc32;
use std::path::{Path, PathBuf};

#[test]
fn rss_probe() {
    common::rss_probe();
}

/// Peak RSS allowed for a run on an input of a few KiB. crashring itself
/// (binary, libc, allocator, one 8 MiB scan window) stays below 16 MiB on
/// such inputs; a per-claimed-page cost for a multi-GiB claim is hundreds
/// of MiB to GiBs.
const SMALL_INPUT_RSS_KIB: u64 = 64 << 10;

/// Rewrites a little-endian field and the CRC stored after `crc_range`.
fn patch(image: &mut [u8], at: usize, bytes: &[u8], crc_range: std::ops::Range<usize>) {
    image[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = crc32(&[&image[crc_range.clone()]]);
    image[crc_range.end..crc_range.end + 4].copy_from_slice(&crc.to_le_bytes());
}

/// `real` (256-byte pages) with a checksummed header claiming `claim`
/// bytes, and stream 0's checksummed descriptor claiming every page of
/// them.
fn claiming(real: &[u8], claim: u64) -> Vec<u8> {
    let mut image = real.to_vec();
    patch(&mut image, 32, &claim.to_le_bytes(), 0..252);
    let desc = descriptor_0(&image);
    let pages = u32::try_from((claim - pages_offset(&image)) / 256).unwrap();
    patch(&mut image, desc + 4, &pages.to_le_bytes(), desc..desc + 60);
    image
}

/// Where stream 0's descriptor is.
fn descriptor_0(image: &[u8]) -> usize {
    u32::from_le_bytes(image[40..44].try_into().unwrap()) as usize
}

/// Where stream 0's pages start, as its descriptor says.
fn pages_offset(image: &[u8]) -> u64 {
    let desc = descriptor_0(image);
    u64::from_le_bytes(image[desc + 8..desc + 16].try_into().unwrap())
}

#[test]
fn a_header_claiming_gigabytes_costs_only_the_bytes_present() {
    let real = image_sized(0, 256, 8192, 20);
    let want = String::from_utf8(
        crashring(&[
            "extract",
            write_tmp("claim-real.raw", &real).to_str().unwrap(),
        ])
        .stdout,
    )
    .unwrap();
    for claim in [4u64 << 30, 16 << 30] {
        let image = claiming(&real, claim);
        let path = write_tmp(&format!("claim-{}g.raw", claim >> 30), &image);
        let path = path.to_str().unwrap();
        for args in [
            &["info", path][..],
            &["info", path, "--phys", "0"],
            &["extract", path],
            &["extract", path, "--phys", "0"],
        ] {
            let (out, kib) = crashring_peak_rss(args);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                kib < SMALL_INPUT_RSS_KIB,
                "{args:?}: peak RSS {} MiB\n{stderr}",
                kib >> 10
            );
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            let all = format!("{stdout}{stderr}");
            assert!(
                all.contains(&format!("region bytes 0x2000..{claim:#x}: not in the dump")),
                "{args:?}: {all}"
            );
            if args[0] == "extract" {
                for line in stdout.lines().filter(|l| !l.contains("events lost")) {
                    assert!(want.contains(line), "{args:?} invented: {line}");
                }
                assert!(stdout.lines().count() > 10, "{args:?}: {stdout}");
            }
        }
    }
}

#[test]
fn overlapping_note_segments_are_read_into_one_buffer_with_a_total_cap() {
    // 16 MiB of notes (VMCOREINFO, then one note padding the rest) seen
    // through 64 PT_NOTE headers, each starting 4 bytes further in: 64
    // distinct reads of nearly 16 MiB, which a reader keeping every read
    // holds all at once.
    let mut notes = Vec::new();
    synth::note(&mut notes, b"VMCOREINFO", 0, b"OSRELEASE=6.12.0-notes\n");
    let pad = (16 << 20) - notes.len() - 12 - 4;
    synth::note(&mut notes, b"PAD", 0, &vec![0; pad]);
    assert_eq!(notes.len(), 16 << 20);
    let mem = image_sized(0x3000, 4096, 0x10000, 50);
    let core = synth::elf_with_notes(&mem, &[load(0, mem.len() as u64)], &notes, 64, false);
    let path = write_tmp("notes.elf", &core);
    let path = path.to_str().unwrap();
    let (out, kib) = crashring_peak_rss(&["info", "--json", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // One 16 MiB buffer for the notes plus crashring's own ~8 MiB, with
    // room to spare; a copy per segment is over 1 GiB.
    assert!(kib < 128 << 10, "peak RSS {} MiB\n{stderr}", kib >> 10);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("63 note segments (the first at file offset 0x"),
        "{stderr}"
    );
    // What the notes hold and the region are still read.
    assert!(
        stdout.contains("\"vmcoreinfo_kernel\":\"6.12.0-notes\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("\"physical_address\":\"0x3000\""),
        "{stdout}"
    );
}

#[test]
fn a_segment_claiming_gigabytes_of_filtered_memory_costs_only_the_bytes_present() {
    // An 8 KiB region whose checksummed header claims 4 GiB, inside a
    // PT_LOAD whose `p_memsz` claims the same 4 GiB with only the 8 KiB in
    // the file: every claimed page past them is a hole the dump's filter
    // made, one run of absent pages, never one record per page.
    let claim = 4u64 << 30;
    let real = image_sized(0, 256, 8192, 20);
    let image = claiming(&real, claim);
    let segment = synth::Load {
        paddr: 0,
        memsz: claim,
        filesz: image.len() as u64,
    };
    let core = synth::elf(&image, &[segment], None, 1, false);
    let path = write_tmp("filtered-4g.elf", &core);
    let path = path.to_str().unwrap();
    for args in [&["info", path][..], &["extract", path]] {
        let start = std::time::Instant::now();
        let (out, kib) = crashring_peak_rss(args);
        let took = start.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            kib < SMALL_INPUT_RSS_KIB,
            "{args:?}: peak RSS {} MiB, {took:?}\n{stderr}",
            kib >> 10
        );
        assert!(
            took < std::time::Duration::from_secs(10),
            "{args:?}: {took:?}"
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let all = format!("{stdout}{stderr}");
        assert!(
            all.contains(&format!(
                "region bytes 0x2000..{claim:#x}: excluded by the dump's filter"
            )),
            "{args:?}: {all}"
        );
        if args[0] == "info" {
            // Stream 0's claimed slots past the 8 KiB, counted in one
            // report and one diagnostic.
            let absent = (claim - 0x2000) / 256;
            assert!(
                stdout.contains(&format!(", {absent} not in the dump")),
                "{stdout}"
            );
            let first = (0x2000 - pages_offset(&image)) / 256;
            assert!(
                stdout.contains(&format!(
                    "pages {first}.. ({absent} of them) are not in the input"
                )),
                "{stdout}"
            );
        }
    }
}

/// Memory follows the pages being read, not the region's size nor the
/// worker count: a dense region of 16 CPU streams (every ring wrapped) is
/// extracted to text and to CTF by 16 workers with a small part of it
/// resident. Its size follows the build: 4 GiB under 256 MiB each in an
/// optimized build (`cargo xtask test` runs this binary so), 512 MiB in a
/// debug build (`cargo test`), where 4 GiB would take minutes.
///
/// What is resident is crashring itself, under a MiB of text per worker,
/// the decoded pages' index (about 150 bytes a page: 19 MiB at 512 MiB,
/// 150 MiB at 4 GiB) and the pages of a few milliseconds' reading. At 512
/// MiB, in a debug build: about 90 MiB for text and 60 for CTF. Two ways
/// past the bounds, both seen there: CTF walking every page once ahead of
/// writing, touching only each page's first event, which runs through the
/// region faster than its pages are given back (230 to 280 MiB; 1.2 GiB
/// at 4 GiB), and workers formatting 4096 items between hand-overs of 1
/// MiB pieces (135 to 140 MiB for text).
#[test]
fn a_dense_region_is_extracted_by_16_workers_without_holding_it() {
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    // The region's size, and each format's bound in MiB.
    let (size, bounds): (u64, [(&str, u64); 2]) = if cfg!(debug_assertions) {
        (512 << 20, [("text", 128), ("ctf", 96)])
    } else {
        (4 << 30, [("text", 256), ("ctf", 256)])
    };
    const STREAMS: u16 = 16;
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dense-16.bin");
    let written = {
        // Written through a mapping of a sparse file: the test holds no
        // copy of the region either.
        let file = std::fs::File::create_new(&path)
            .or_else(|_| {
                std::fs::remove_file(&path)?;
                std::fs::File::create_new(&path)
            })
            .unwrap();
        file.set_len(size).unwrap();
        // SAFETY: the file was just created by this test, which alone
        // writes it, and is not truncated while mapped.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.unwrap();
        let specs: Vec<StreamSpec> = (0..STREAMS).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
        let text = [b'x'; 200];
        // A third more than the rings hold.
        let n = size / 180;
        {
            let mut f = write::format(&mut map, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            for i in 0..n {
                let v = [
                    Value::Unsigned(6),
                    Value::Unsigned(0),
                    Value::Unsigned(1),
                    Value::Unsigned(i),
                    Value::Str(&text),
                ];
                ws[(i % u64::from(STREAMS)) as usize]
                    .write_event(1000 + i, printk, &v)
                    .unwrap();
            }
        }
        map.flush().unwrap();
        n
    };
    let input = path.to_str().unwrap();
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    for (format, bound_mib) in bounds {
        let out = tmp.join(format!("dense-16.{format}"));
        let _ = std::fs::remove_dir_all(&out);
        let out = out.to_str().unwrap();
        let (run, kib) = crashring_peak_rss_with(
            &["extract", input, "--format", format, "-o", out],
            &[("RAYON_NUM_THREADS", "16")],
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "{format}: {stderr}");
        // Every event written is extracted or counted lost.
        let (events, lost) = if format == "ctf" {
            let said = |what: &str| -> u64 {
                let words: Vec<&str> = stderr.split_whitespace().collect();
                let at = words.iter().position(|w| *w == what);
                at.and_then(|at| words.get(at.checked_sub(1)?)?.parse().ok())
                    .unwrap_or_else(|| panic!("no {what:?} in {stderr}"))
            };
            (said("events"), said("discarded"))
        } else {
            text_totals(Path::new(out))
        };
        assert_eq!(events + lost, written, "{format}: {stderr}");
        assert!(lost > 0 && events > written / 2, "{format}: {stderr}");
        assert!(
            kib < bound_mib << 10,
            "{format}, 16 workers: peak RSS {} MiB for a {} MiB region\n{stderr}",
            kib >> 10,
            size >> 20
        );
        let _ = std::fs::remove_dir_all(out);
        let _ = std::fs::remove_file(out);
    }
    let _ = std::fs::remove_file(&path);
}

/// Events and events lost in a text output.
fn text_totals(path: &Path) -> (u64, u64) {
    use std::io::BufRead;
    let mut totals = (0, 0);
    for line in std::io::BufReader::new(std::fs::File::open(path).unwrap()).lines() {
        let line = line.unwrap();
        match line
            .split_once(": ** ")
            .and_then(|(_, l)| l.split_once(" events lost"))
        {
            Some((n, _)) => totals.1 += n.parse::<u64>().unwrap(),
            None => totals.0 += 1,
        }
    }
    totals
}

/// A region whose header checks out but whose bytes cannot be copied (no
/// room for the snapshot: here no temporary directory at all) is reported
/// as that, naming the region, never as a dump without a region.
#[test]
fn a_region_that_cannot_be_copied_is_reported_not_missed() {
    let path = write_tmp("no-room.bin", &image_sized(4096, 512, 16 * 1024, 10));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crashring"))
        .arg("info")
        .arg(&path)
        .env("TMPDIR", "/nonexistent/crashring-tmp")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(
            "no room to copy the 7680-byte region at physical address 0x1000 into a temporary file"
        ) && !err.contains("no crashring region"),
        "{err}"
    );
}

/// A persistent ftrace buffer of Linux 6.12's layout, one CPU of `nr`
/// sub-buffers, each full of the smallest events (a 4-byte header word
/// and 4 bytes of data, a nanosecond apart), in the order written.
fn dense_ftrace(nr: usize) -> Vec<u8> {
    let page = ftrace_area::PAGE;
    let subbufs = (56 + 4 * nr).next_multiple_of(page);
    let first = ftrace_area::VA + subbufs as u64;
    let mut bytes = vec![0u8; subbufs];
    let mut put = |at: usize, field: &[u8]| bytes[at..at + field.len()].copy_from_slice(field);
    put(0, &0x0BAD_FEEDu32.to_le_bytes());
    put(4, &56u32.to_le_bytes());
    put(8, &ftrace_area::TEXT.to_le_bytes());
    put(16, &(ftrace_area::TEXT + (16 << 20)).to_le_bytes());
    // The first sub-buffer, the head (after the reader page), the commit.
    put(24, &first.to_le_bytes());
    put(32, &(first + page as u64).to_le_bytes());
    put(40, &(first + ((nr - 1) * page) as u64).to_le_bytes());
    put(48, &(page as u32).to_le_bytes());
    put(52, &(nr as u32).to_le_bytes());
    for i in 0..nr {
        put(56 + 4 * i, &(i as u32).to_le_bytes());
    }
    let event = [1 | 1 << 5, 0x4141_4141u32].map(u32::to_le_bytes).concat();
    let body = event.repeat((page - 16) / 8);
    for i in 0..nr {
        bytes.extend_from_slice(&(1_000_000 + i as u64 * 10_000).to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&body);
    }
    bytes
}

/// A dense persistent ftrace buffer (8 bytes an event) is held as offsets
/// into one copy of its bytes: a few times the buffer, not a heap buffer
/// per event (14 times the buffer, once).
#[test]
fn a_dense_persistent_ftrace_buffer_costs_a_few_times_its_bytes() {
    // 16 MiB of sub-buffers, about 2 million events.
    let nr = 4096;
    let path = write_tmp("ftrace-dense.img", &dense_ftrace(nr));
    let (out, kib) = crashring_peak_rss(&["ftrace", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = out.stdout.iter().filter(|&&b| b == b'\n').count();
    let per_page = (ftrace_area::PAGE - 16) / 8;
    assert_eq!(events, nr * per_page, "{stderr}");
    // crashring's own ~16 MiB, the dump's pages as read, and 16 bytes an
    // event beside its 8: 60 MiB (236 when each event had its own buffer).
    assert!(kib < 96 << 10, "peak RSS {} MiB\n{stderr}", kib >> 10);
}
