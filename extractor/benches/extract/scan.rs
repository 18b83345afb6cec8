//! Finding a region: the scan of a 4 GiB image against memcpy, and
//! `crashring snapshot` of a 64 MiB region.

use crate::writers::time_command;
use crate::{median, per_sec, region_of, Counts, GIB, MIB, REGION};
use extractor::discover;
use extractor::input;
use extractor::input::source::FileSource;
use pstore_ring::read::{HeaderTrust, Region};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

/// A raw image of `size` bytes of pseudo-random memory (xorshift, so the
/// magic's rare-byte prefilter works as hard as on real memory) with the
/// region near the end.
pub(crate) fn random_image(path: &Path, size: u64, region: &[u8]) {
    let mut f = BufWriter::with_capacity(8 << 20, File::create(path).expect("creating image"));
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..size / block.len() as u64 {
        for w in block.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&block).expect("writing image");
    }
    let f = f.into_inner().expect("flushing image");
    f.write_all_at(region, size - 2 * REGION as u64)
        .expect("writing the region");
}

/// A sparse raw image of `size` bytes: holes, and the region near the end.
pub(crate) fn sparse_image(path: &Path, size: u64, region: &[u8]) {
    let mut f = File::create(path).expect("creating image");
    f.set_len(size).expect("sizing image");
    f.seek(SeekFrom::Start(size - 2 * REGION as u64))
        .expect("seeking");
    f.write_all(region).expect("writing the region");
}

pub(crate) fn scan_bench(dir: &Path, region: &[u8], memcpy: f64) {
    let size = 4 * GIB;
    let path = dir.join("scan-4g.raw");
    random_image(&path, size, region);
    let mut found = Vec::new();
    let d = median(3, || {
        let start = Instant::now();
        let source = Arc::new(FileSource::open(&path).expect("opening image"));
        let dump = input::open(source).expect("a raw image opens");
        let this_run = discover::scan(&*dump.memory, &mut |_| {}, &mut |_, _| {}).found;
        let took = start.elapsed();
        found = this_run;
        took
    });
    let _ = std::fs::remove_file(&path);
    // A scan that missed the region, found a false one or read it short
    // would look fast.
    let [hit] = &found[..] else {
        panic!("{} regions found, not 1", found.len());
    };
    assert_eq!(
        hit.addr.0,
        size - 2 * REGION as u64,
        "where the region was found"
    );
    assert!(
        hit.holes.is_empty(),
        "the region read with holes: {:?}",
        hit.holes
    );
    // The region is as long as its header says (whole pages of the
    // buffer); the buffer's rest is not the region's.
    let len = Region::parse(region, HeaderTrust::Checksummed)
        .expect("bench region parses")
        .header
        .region_size;
    assert_eq!(hit.bytes.len() as u64, len, "bytes of the region read");
    assert!(
        region.starts_with(&hit.bytes),
        "the region read differs from the one written"
    );
    let bw = per_sec(size, d);
    println!(
        "\nscan: {} GiB raw image of pseudo-random memory, the region found at {:#x} and read whole",
        size / GIB,
        hit.addr
    );
    println!(
        "  scan {:.0} MiB/s vs memcpy {:.0} MiB/s: ratio {:.3}",
        bw / MIB as f64,
        memcpy / MIB as f64,
        bw / memcpy
    );
}

/// Events a recorder holds a few minutes into a quiet boot (the Debian
/// guest's, when its compositor asks for a report): what a report
/// without a crash usually bundles.
pub(crate) const QUIET_BOOT: u64 = 20_000;

/// `crashring snapshot` (a report's work) of a 64 MiB region, dense
/// (issue: under a second) and as a quiet boot leaves it, read from a
/// file here: the bundle it writes is the work; the module's page-by-page
/// copy is at memcpy speed (the user-space C build is timed in
/// qemu-tests' c_ring bench). With one worker and with one per core
/// (what the bundle's parallel writers and compression gain), against
/// copying the region once and `bundle` of the same file, in the same
/// run.
pub(crate) fn snapshot_bench(dir: &Path, region: &[u8], counts: Counts, memcpy: f64) {
    snapshot_of(dir, "dense", region, counts, memcpy);
    let (quiet, counts) = region_of(region.len(), QUIET_BOOT);
    snapshot_of(dir, "quiet", &quiet, counts, memcpy);
}

pub(crate) fn snapshot_of(dir: &Path, what: &str, region: &[u8], counts: Counts, memcpy: f64) {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_crashring"));
    let path = dir.join("snapshot-64m.raw");
    std::fs::write(&path, region).expect("writing the region");
    let out = dir.join("snapshot.tar.gz");
    let (p, o) = (
        path.to_str().expect("UTF-8 scratch path"),
        out.to_str().expect("UTF-8 scratch path"),
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // RAYON_NUM_THREADS sizes the workers; unset, one per core.
    let time = |args: &[&str], workers: Option<usize>| {
        time_command(|| {
            let _ = std::fs::remove_file(&out);
            let mut c = Command::new(&this);
            c.args(args).env_remove("RAYON_NUM_THREADS");
            if let Some(n) = workers {
                c.env("RAYON_NUM_THREADS", n.to_string());
            }
            c
        })
    };
    let snapshot = ["snapshot", "--from", p, "--why", "bench", "-o", o];
    let one = time(&snapshot, Some(1));
    let all = time(&snapshot, None);
    let bundle = time(&["bundle", p, "-o", o], None);
    let copy = region.len() as f64 / memcpy;
    println!(
        "\nsnapshot: a {what} {} MiB region, {} events\n  crashring snapshot, 1 worker: {:.2} s; {cores} workers: {:.2} s ({:.1}x; {:.0}x a memcpy of the region, {:.3} s)\n  crashring bundle of the same file: {:.2} s (snapshot / bundle: {:.2}x)",
        region.len() >> 20,
        counts.events,
        one.as_secs_f64(),
        all.as_secs_f64(),
        one.as_secs_f64() / all.as_secs_f64(),
        all.as_secs_f64() / copy,
        copy,
        bundle.as_secs_f64(),
        all.as_secs_f64() / bundle.as_secs_f64()
    );
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&path);
}
