//! The extractor's throughput and memory, each next to a baseline measured
//! in the same run: `cargo bench -p extractor` (or `cargo xtask bench`).
//!
//! - scan: finding and reading a 64 MiB region in a 4 GiB raw image of
//!   pseudo-random memory (in the page cache), against memcpy bandwidth;
//! - decode: parse, CRC, decode, merge and text (and JSON lines) output of
//!   a dense 64 MiB 4-CPU region, in events per second, against memcpy of
//!   the region;
//! - writers: parse, decode and each file format written (CTF, Perfetto,
//!   Chrome JSON, trace.dat), against babeltrace2 converting the same CTF
//!   trace to CTF (reading and writing the same format, the nearest like
//!   for like) and to text;
//! - memory: peak RSS of `crashring extract` on sparse raw dumps of 1 GiB
//!   and 16 GiB holding the same 64 MiB region, against the peak RSS of
//!   `crashring --version`;
//! - dense: peak RSS and time of `crashring extract --format text` (to
//!   /dev/null) on dense regions of 256 MiB and 1 GiB, with the sampled
//!   peaks of anonymous memory (what the reader allocates) and of
//!   file-backed memory (the region's snapshot), and of `crashring bundle`
//!   on the 256 MiB one, plain and redacting a quarter of its events; with
//!   `CRASHRING_BENCH_BASELINE` naming another crashring binary (one built
//!   before a change), the same runs of it beside them.
//!
//! Every time is the median of several runs; only ratios are meant to be
//! compared between machines. No figure is printed before the work it
//! times was checked: events written and decoded, the region found and
//! read whole, every output read back with the count it must hold, every
//! process exited successfully. Scratch files go to
//! `CRASHRING_BENCH_DIR`, or the target directory's tmp.

use extractor::discover;
use extractor::input;
use extractor::input::source::FileSource;
use extractor::output::select::Selection;
use extractor::output::{write_items, Format, RegionView, Writer};
use pstore_ring::read::{HeaderTrust, LossKind, PagedTrace, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::fs::File;
use std::hint::black_box;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const REGION: usize = 64 << 20;
/// Events written into the dense region: enough to wrap every ring about
/// twice, so pages are all full.
const WRITTEN: u64 = 6_000_000;

/// What the dense region holds, checked once and then expected of every
/// output.
#[derive(Clone, Copy)]
struct Counts {
    events: u64,
    /// Events and losses: what a merge yields and each output writes.
    items: u64,
}

fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut t: Vec<Duration> = (0..runs).map(|_| f()).collect();
    t.sort();
    t[runs / 2]
}

fn per_sec(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64()
}

/// RAM-to-RAM copy bandwidth over buffers far bigger than the caches.
fn memcpy_bandwidth() -> f64 {
    let src = vec![0x5Au8; 256 << 20];
    let mut dst = vec![0u8; src.len()];
    let d = median(RUNS, || {
        let start = Instant::now();
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
        start.elapsed()
    });
    per_sec(src.len() as u64, d)
}

/// A 4-CPU region of `size` bytes filled to the brim with a realistic
/// mix: IRQ entry and exit, scheduler switches, printk lines; as many
/// events per byte as [`WRITTEN`] in [`REGION`], so every ring wraps about
/// twice.
fn dense_region(size: usize) -> (Vec<u8>, Counts) {
    region_of(size, WRITTEN * (size / REGION) as u64)
}

/// A 4-CPU region of `size` bytes holding `written` events of
/// [`dense_region`]'s mix.
fn region_of(size: usize, written: u64) -> (Vec<u8>, Counts) {
    let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        ..Default::default()
    };
    let mut buf = vec![0u8; size];
    let def = |id| schema::builtin(id).expect("built-in event type");
    let (entry, exit, switch, printk) = (
        def(schema::EVENT_IRQ_ENTRY),
        def(schema::EVENT_IRQ_EXIT),
        def(schema::EVENT_SCHED_SWITCH),
        def(schema::EVENT_PRINTK),
    );
    let mut f = write::format(&mut buf, &cfg).expect("region fits");
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    let mut t = 1_000_000u64;
    for i in 0..written {
        t += 37;
        let w = &mut ws[(i % 4) as usize];
        let written = match i % 8 {
            0 | 4 => w.write_event(t, entry, &[Value::Unsigned(11), Value::Str(b"timer")]),
            1 | 5 => w.write_event(t, exit, &[Value::Unsigned(11), Value::Unsigned(1)]),
            2 | 6 => w.write_event(
                t,
                switch,
                &[
                    Value::Signed(1000 + (i % 97) as i64),
                    Value::Signed(120),
                    Value::Unsigned(1),
                    Value::Signed(0),
                    Value::Signed(120),
                    Value::Chars(b"kworker/2:1"),
                    Value::Chars(b"swapper/2"),
                ],
            ),
            _ => w.write_event(
                t,
                printk,
                &[
                    Value::Unsigned(6),
                    Value::Unsigned(0),
                    Value::Unsigned(2),
                    Value::Unsigned(i),
                    Value::Str(b"drm: [CRTC:51:crtc-0] vblank wait timed out"),
                ],
            ),
        };
        written.expect("the writer records every event");
    }
    ws.iter_mut().for_each(|w| w.close());
    let trace = Region::parse(&buf, HeaderTrust::Checksummed)
        .expect("bench region parses")
        .decode_paged();
    // The rings keep the newest events; every other one must be accounted
    // for as overwritten, so the benches time a region as written.
    let overwritten: u64 = trace
        .streams
        .iter()
        .map(|s| s.lost(LossKind::Overwritten))
        .sum();
    let events = trace.event_count() as u64;
    assert!(events > 0, "no event decoded");
    assert_eq!(
        events + overwritten,
        written,
        "events decoded + overwritten"
    );
    assert_eq!(trace.lost_events(), overwritten, "events lost otherwise");
    let losses: usize = trace.streams.iter().map(|s| s.losses.len()).sum();
    let items = events + losses as u64;
    (buf, Counts { events, items })
}

fn decode_bench(region: &[u8], counts: Counts, memcpy: f64) {
    let Counts { events, items } = counts;
    println!(
        "\ndecode: {} MiB region, 4 CPUs, {events} events (IRQ entry/exit, sched_switch, printk)",
        region.len() >> 20
    );
    let d = median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = region.decode_paged();
        let merged = black_box(pstore_ring::merge::merge_pages(&trace.streams).count());
        let took = start.elapsed();
        assert_eq!(merged as u64, items, "items merged");
        took
    });
    println!(
        "  parse + CRC + decode + merge, one thread, no output: {:.1} M events/s; region at {:.0} MiB/s vs memcpy: ratio {:.3}",
        per_sec(events, d) / 1e6,
        per_sec(region.len() as u64, d) / MIB as f64,
        per_sec(region.len() as u64, d) / memcpy
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for format in [Format::Text, Format::Jsonl] {
        let mut bytes = 0u64;
        let d = median(RUNS, || {
            let mut sink = Counter::default();
            let start = Instant::now();
            let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
                .expect("bench region parses");
            let trace = extractor::recover::decode(&region, &|_| {});
            let mut out = BufWriter::with_capacity(1 << 16, &mut sink);
            let Writer::Items(writer) = format.writer() else {
                unreachable!("text and JSON lines are written item by item")
            };
            write_items(
                &mut out,
                &view(&region, &trace),
                &Selection::default(),
                writer,
            )
            .expect("writing to a counter cannot fail");
            drop(out);
            let took = start.elapsed();
            // Both formats write one line per item.
            assert_eq!(sink.lines, items, "{format:?} lines written");
            bytes = sink.bytes;
            took
        });
        println!(
            "  parse + CRC + decode + merge + {format:?}, {threads} threads: {:.1} M events/s, {:.0} MiB/s of output; \
             region at {:.0} MiB/s vs memcpy {:.0} MiB/s: ratio {:.3}",
            per_sec(events, d) / 1e6,
            per_sec(bytes, d) / MIB as f64,
            per_sec(region.len() as u64, d) / MIB as f64,
            memcpy / MIB as f64,
            per_sec(region.len() as u64, d) / memcpy
        );
    }
}

/// A region and its trace as the writers take them.
fn view<'r, 'a>(region: &'r Region<'a>, trace: &'r PagedTrace<'a>) -> RegionView<'r, 'a> {
    RegionView {
        index: 0,
        addr: 0,
        region,
        trace,
        overlay: None,
        pointers: pstore_ring::kprintf::Pointers::Hidden,
    }
}

/// A sink that only counts bytes and lines, so output cost is formatting,
/// not storage.
#[derive(Default)]
struct Counter {
    bytes: u64,
    lines: u64,
}

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len() as u64;
        self.lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::var_os("CRASHRING_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    dir
}

/// A raw image of `size` bytes of pseudo-random memory (xorshift, so the
/// magic's rare-byte prefilter works as hard as on real memory) with the
/// region near the end.
fn random_image(path: &Path, size: u64, region: &[u8]) {
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
fn sparse_image(path: &Path, size: u64, region: &[u8]) {
    let mut f = File::create(path).expect("creating image");
    f.set_len(size).expect("sizing image");
    f.seek(SeekFrom::Start(size - 2 * REGION as u64))
        .expect("seeking");
    f.write_all(region).expect("writing the region");
}

fn scan_bench(dir: &Path, region: &[u8], memcpy: f64) {
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

/// Set in a copy of this bench started only to measure one run of
/// crashring: the copy is small when it starts crashring, and a child's
/// peak RSS counts its parent's memory at the moment it was started.
const RSS_PROBE: &str = "CRASHRING_BENCH_RSS_OF";
/// With [`RSS_PROBE`]: the crashring binary to run, if not this build's.
const RSS_PROBE_BIN: &str = "CRASHRING_BENCH_RSS_BIN";
/// Another crashring binary to measure beside this build's (`dense`).
const BASELINE: &str = "CRASHRING_BENCH_BASELINE";

/// Peak RSS in KiB of the crashring binary run with `args`, measured by a
/// fresh copy of this bench (see [`RSS_PROBE`]).
fn peak_rss_kib(args: &[&str]) -> i64 {
    probe(None, args).kib
}

/// What a probe measured of one run.
struct Probed {
    /// Peak RSS, KiB.
    kib: i64,
    took: Duration,
    /// The peaks of anonymous and file-backed resident memory (KiB), as
    /// sampled every few milliseconds: what the process allocated against
    /// the pages of files it mapped (the region's snapshot).
    anon_kib: i64,
    file_kib: i64,
}

/// Peak RSS and wall time of `bin` (this build's crashring if `None`) run
/// with `args`, its standard output going to /dev/null, measured by a
/// fresh copy of this bench (see [`RSS_PROBE`]).
fn probe(bin: Option<&Path>, args: &[&str]) -> Probed {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(exe);
    cmd.env(RSS_PROBE, args.join("\u{1f}"));
    if let Some(bin) = bin {
        cmd.env(RSS_PROBE_BIN, bin);
    }
    let out = cmd.output().expect("running the RSS probe");
    assert!(
        out.status.success(),
        "the RSS probe of crashring {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<i64> = said
        .split_whitespace()
        .map(|f| {
            f.parse()
                .unwrap_or_else(|_| panic!("the RSS probe said {out:?}"))
        })
        .collect();
    let [kib, ns, anon_kib, file_kib] = fields[..] else {
        panic!("the RSS probe said {out:?}");
    };
    Probed {
        kib,
        took: Duration::from_nanos(ns as u64),
        anon_kib,
        file_kib,
    }
}

/// A `/proc/PID/status` field in KiB, 0 if missing.
fn status_kib(status: &str, field: &str) -> i64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The probe's body: runs crashring with the arguments in `RSS_PROBE` and
/// prints its peak RSS in KiB, its wall time in ns and its sampled peaks
/// of anonymous and file-backed RSS in KiB, once crashring exited
/// successfully (a run that failed early would look small).
// The child is reaped by wait4, which also returns its resource usage.
#[allow(clippy::zombie_processes)]
fn rss_probe(args: &str) {
    let bin = std::env::var_os(RSS_PROBE_BIN).map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_crashring")),
        PathBuf::from,
    );
    let start = Instant::now();
    let child = Command::new(&bin)
        .args(args.split('\u{1f}'))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("running crashring");
    let id = child.id() as i32;
    let mut status = 0;
    // SAFETY: plain FFI calls with valid pointers; waits for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let (mut anon, mut file) = (0, 0);
    loop {
        // SAFETY: as above.
        let pid = unsafe { libc::wait4(id, &mut status, libc::WNOHANG, &mut usage) };
        if pid == id {
            break;
        }
        assert_eq!(pid, 0, "wait4 failed");
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{id}/status")) {
            anon = anon.max(status_kib(&s, "RssAnon:"));
            file = file.max(status_kib(&s, "RssFile:"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let took = start.elapsed();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} {args:?} failed: wait status {status:#x}",
        bin.display()
    );
    println!("{} {} {anon} {file}", usage.ru_maxrss, took.as_nanos());
}

/// Lines `bin` writes to its standard output when run with `args`; fails
/// unless it succeeds.
fn output_lines(bin: &Path, args: &[&str]) -> u64 {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("running crashring");
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
    let mut lines = 0;
    loop {
        let buf = out.fill_buf().expect("reading crashring's output");
        if buf.is_empty() {
            break;
        }
        lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        let n = buf.len();
        out.consume(n);
    }
    let status = child.wait().expect("waiting for crashring");
    assert!(
        status.success(),
        "{} {args:?} failed: {status}",
        bin.display()
    );
    lines
}

/// `crashring extract --format text` on raw images each holding one dense
/// region (256 MiB, then 1 GiB), standard output to /dev/null: peak RSS
/// (and its anonymous and file-backed parts) and throughput, the median of 3 runs after one whose lines are
/// counted; the same for the binary `CRASHRING_BENCH_BASELINE` names, if
/// set.
/// Events a recorder holds a few minutes into a quiet boot (the Debian
/// guest's, when its compositor asks for a report): what a report
/// without a crash usually bundles.
const QUIET_BOOT: u64 = 20_000;

/// `crashring snapshot` (a report's work) of a 64 MiB region, dense
/// (issue: under a second) and as a quiet boot leaves it, read from a
/// file here: the bundle it writes is the work; the module's page-by-page
/// copy is at memcpy speed (the user-space C build is timed in
/// qemu-tests' c_ring bench). With one worker and with one per core
/// (what the bundle's parallel writers and compression gain), against
/// copying the region once and `bundle` of the same file, in the same
/// run.
fn snapshot_bench(dir: &Path, region: &[u8], counts: Counts, memcpy: f64) {
    snapshot_of(dir, "dense", region, counts, memcpy);
    let (quiet, counts) = region_of(region.len(), QUIET_BOOT);
    snapshot_of(dir, "quiet", &quiet, counts, memcpy);
}

fn snapshot_of(dir: &Path, what: &str, region: &[u8], counts: Counts, memcpy: f64) {
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

fn dense_bench(dir: &Path) {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_crashring"));
    let baseline = std::env::var_os(BASELINE).map(PathBuf::from);
    let mut bins = vec![("this build", this)];
    if let Some(b) = baseline {
        bins.push(("baseline", b));
    }
    println!(
        "\ndense: crashring extract --format text > /dev/null on a raw image of one dense region"
    );
    for (name, bin) in &bins {
        let base = probe(Some(bin), &["--version"]).kib;
        println!(
            "  {name} ({}): crashring --version peaks at {:.1} MiB",
            bin.display(),
            base as f64 / 1024.0
        );
    }
    for size in [256 * MIB as usize, GIB as usize] {
        let (region, counts) = dense_region(size);
        let path = dir.join(format!("dense-{}m.raw", size >> 20));
        std::fs::write(&path, &region).expect("writing the image");
        drop(region);
        let p = path.to_str().expect("UTF-8 scratch path");
        let args = ["extract", p, "--format", "text"];
        println!(
            "  {} MiB region, {} events, {} items:",
            size >> 20,
            counts.events,
            counts.items
        );
        let mut figures = Vec::new();
        for (name, bin) in &bins {
            // The text has a line per item: all of them were extracted.
            assert_eq!(output_lines(bin, &args), counts.items, "{name}: lines");
            let runs: Vec<Probed> = (0..3).map(|_| probe(Some(bin), &args)).collect();
            let peak = |f: fn(&Probed) -> i64| runs.iter().map(f).max().unwrap_or(0);
            let (rss, anon, file) = (peak(|r| r.kib), peak(|r| r.anon_kib), peak(|r| r.file_kib));
            let mut times: Vec<Duration> = runs.iter().map(|r| r.took).collect();
            times.sort();
            let d = times[times.len() / 2];
            println!(
                "    {name}: peak RSS {} MiB (sampled peaks: anonymous {} MiB, file-backed {} MiB); \
                 {:.2} s, {:.1} M events/s, region at {:.0} MiB/s",
                rss >> 10,
                anon >> 10,
                file >> 10,
                d.as_secs_f64(),
                per_sec(counts.events, d) / 1e6,
                per_sec(size as u64, d) / MIB as f64
            );
            figures.push((rss, anon, d));
        }
        if let [(mine, mine_anon, t), (theirs, theirs_anon, t0)] = figures[..] {
            println!(
                "    this build: {:.2}x the baseline's peak RSS, {:.2}x its anonymous memory, at {:.2}x its speed",
                mine as f64 / theirs as f64,
                mine_anon as f64 / theirs_anon as f64,
                t0.as_secs_f64() / t.as_secs_f64()
            );
        }
        if size == 256 * MIB as usize {
            // The bundle writes every format; redacting a quarter of the
            // events away takes an overlay of them.
            let bundle = dir.join("dense-bundle.tar.gz");
            let b = bundle.to_str().expect("UTF-8 scratch path");
            for redact in [&[][..], &["--redact", "sched_switch"][..]] {
                let mut args = vec!["bundle", p, "-o", b];
                args.extend(redact);
                for (name, bin) in &bins {
                    let r = probe(Some(bin), &args);
                    let _ = std::fs::remove_file(&bundle);
                    println!(
                        "    {name}, bundle {}: peak RSS {} MiB (sampled peaks: anonymous {} MiB, file-backed {} MiB); {:.2} s",
                        redact.join(" "),
                        r.kib >> 10,
                        r.anon_kib >> 10,
                        r.file_kib >> 10,
                        r.took.as_secs_f64()
                    );
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// Lines in the file at `path`.
fn count_lines(path: &Path) -> u64 {
    let mut f = BufReader::with_capacity(1 << 20, File::open(path).expect("opening the output"));
    let mut lines = 0;
    loop {
        let buf = f.fill_buf().expect("reading the output");
        if buf.is_empty() {
            return lines;
        }
        lines += memchr::memchr_iter(b'\n', buf).count() as u64;
        let n = buf.len();
        f.consume(n);
    }
}

fn memory_bench(dir: &Path, region: &[u8], counts: Counts) {
    println!("\nmemory: crashring extract -o FILE on sparse raw images holding the region");
    let base = peak_rss_kib(&["--version"]);
    println!("  baseline (crashring --version): {} MiB", base / 1024);
    for size in [GIB, 16 * GIB] {
        let path = dir.join(format!("sparse-{}g.raw", size / GIB));
        sparse_image(&path, size, region);
        let p = path.to_str().expect("UTF-8 scratch path");
        let text = dir.join("sparse.txt");
        let t = text.to_str().expect("UTF-8 scratch path");
        let rss = peak_rss_kib(&["extract", p, "-o", t]);
        let _ = std::fs::remove_file(&path);
        // The text output has a line per item: all of them were extracted.
        assert_eq!(count_lines(&text), counts.items, "lines extracted");
        let _ = std::fs::remove_file(&text);
        println!(
            "  {:>2} GiB image: peak RSS {} MiB ({:.1}x baseline)",
            size / GIB,
            rss / 1024,
            rss as f64 / base as f64
        );
    }
}

/// Median time of parsing and decoding `region` and writing it with
/// `write` to a file at `path` (which the CTF writer, making its own
/// files, leaves empty).
fn time_writer(
    region: &[u8],
    path: &Path,
    mut write: impl FnMut(&RegionView, &mut BufWriter<File>),
) -> Duration {
    median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = extractor::recover::decode(&region, &|_| {});
        let file = File::create(path).expect("creating the output");
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&view(&region, &trace), &mut out);
        out.flush().expect("writing the output");
        start.elapsed()
    })
}

/// Runs `cmd` with its standard output piped to `count`, which reads it
/// line by line; fails unless the command succeeds.
fn run_counting(cmd: &mut Command, count: impl Fn(&str) -> bool) -> u64 {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (`cargo xtask setup` installs it)"));
    let out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
    // Lines are counted as bytes: readers print field text as it is.
    let n = out
        .split(b'\n')
        .map(|l| l.expect("reading the reader's output"))
        .filter(|l| count(&String::from_utf8_lossy(l)))
        .count();
    let status = child.wait().expect("waiting for the reader");
    assert!(status.success(), "{cmd:?} failed: {status}");
    n as u64
}

/// Events babeltrace2 reads from the CTF trace(s) under `dir`: its text
/// output has one line per event (losses go to standard error).
fn babeltrace2_events(dir: &Path) -> u64 {
    run_counting(Command::new("babeltrace2").arg(dir), |_| true)
}

/// The fields of a protobuf message: (number, payload) for length-delimited
/// ones, (number, empty) for the rest; walked to the last byte, so a cut or
/// malformed message fails.
fn proto_fields(b: &[u8]) -> Vec<(u64, &[u8])> {
    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return v;
            }
        }
        panic!("a varint over 10 bytes before {at}");
    }
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let tag = varint(b, &mut at);
        let len = match tag & 7 {
            0 => {
                varint(b, &mut at);
                0
            }
            1 => 8,
            2 => varint(b, &mut at) as usize,
            5 => 4,
            t => panic!("wire type {t} at {at}"),
        };
        let body = &b[at..at + len];
        at += len;
        out.push((tag >> 3, if tag & 7 == 2 { body } else { &[][..] }));
    }
    out
}

/// Items in our Perfetto trace: a `TrackEvent` packet each (printk lines,
/// markers, crashes, losses, user events) plus every event of the
/// `ftrace_events` bundles; track descriptors are not items.
fn perfetto_items(bytes: &[u8]) -> u64 {
    const PACKET: u64 = 1;
    const FTRACE_EVENTS: u64 = 1;
    const BUNDLE_EVENT: u64 = 2;
    const TRACK_EVENT: u64 = 11;
    let mut items = 0;
    for (n, packet) in proto_fields(bytes) {
        assert_eq!(n, PACKET, "a Trace field other than packet");
        for (n, body) in proto_fields(packet) {
            match n {
                TRACK_EVENT => items += 1,
                FTRACE_EVENTS => {
                    let events = proto_fields(body)
                        .iter()
                        .filter(|f| f.0 == BUNDLE_EVENT)
                        .count();
                    items += events as u64;
                }
                _ => {}
            }
        }
    }
    items
}

/// Items in a Chrome trace JSON file as our writer lays it out (`[`, one
/// object per line, each ending in a comma, `{}`, `]`): every line must be
/// JSON; metadata (`"ph":"M"`) and the closing `{}` are not items.
fn chrome_items(path: &Path) -> u64 {
    let f = BufReader::with_capacity(1 << 20, File::open(path).expect("opening the output"));
    let mut lines = f.lines().map(|l| l.expect("reading the output"));
    assert_eq!(lines.next().as_deref(), Some("["));
    let mut items = 0;
    let mut last = String::new();
    for line in lines {
        if line == "]" {
            assert_eq!(last, "{}", "the array's closing object");
            return items;
        }
        let obj: serde_json::Value = serde_json::from_str(line.trim_end_matches(','))
            .unwrap_or_else(|e| panic!("{e}: {line}"));
        if obj.get("ph").is_some_and(|ph| ph != "M") {
            items += 1;
        }
        last = line;
    }
    panic!("the JSON array is not closed");
}

/// Event lines of `trace-cmd report`: `comm-pid [cpu] secs.usecs: name: ...`.
fn tracedat_events(path: &Path) -> u64 {
    run_counting(Command::new("trace-cmd").arg("report").arg(path), |l| {
        l.split_once("] ").is_some_and(|(_, rest)| {
            rest.trim_start().split_once(": ").is_some_and(|(ts, _)| {
                ts.contains('.') && ts.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            })
        })
    })
}

/// Median time of `cmd` (babeltrace2), which must succeed.
fn time_command(mut cmd: impl FnMut() -> Command) -> Duration {
    median(3, || {
        let mut cmd = cmd();
        let start = Instant::now();
        let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
        let took = start.elapsed();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "{cmd:?}: {status:?} (`cargo xtask setup` installs babeltrace2)"
        );
        took
    })
}

/// Each file writer on the dense region (parse, decode and write to the
/// scratch directory), each output then read back and counted; against
/// babeltrace2 on our CTF trace, converting it to CTF (the same output
/// format: reading CTF instead of decoding a region) and to text.
fn writers_bench(dir: &Path, region: &[u8], counts: Counts) {
    let Counts { events, items } = counts;
    println!("\nwriters: the dense region, {events} events, written to files");
    let out = dir.join("bench-ctf");
    let file = dir.join("bench-trace");
    let all = Selection::default();
    let d = time_writer(region, &file, |view, _| {
        let _ = std::fs::remove_dir_all(&out);
        let wall = view.region.wall_clock_of_pages(view.trace);
        extractor::output::ctf::write(&out, view, &all, "bench", &wall).expect("writing CTF");
    });
    assert_eq!(
        babeltrace2_events(&out),
        events,
        "events babeltrace2 reads from our CTF"
    );
    let ctf = per_sec(events, d);
    println!("  parse + decode + CTF: {:.1} M events/s", ctf / 1e6);
    for format in [Format::Perfetto, Format::Chrome] {
        let d = time_writer(region, &file, |view, out| {
            let Writer::Items(writer) = format.writer() else {
                unreachable!("Perfetto and Chrome are written item by item")
            };
            writer.begin(out, view, false).expect("writing");
            write_items(out, view, &all, writer).expect("writing the trace");
            writer.end(out).expect("writing");
        });
        if format == Format::Perfetto {
            let mut bytes = Vec::new();
            File::open(&file)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .expect("reading the output");
            assert_eq!(perfetto_items(&bytes), items, "Perfetto items");
        } else {
            assert_eq!(chrome_items(&file), items, "Chrome trace items");
        }
        println!(
            "  parse + decode + {format:?}: {:.1} M events/s",
            per_sec(events, d) / 1e6
        );
    }
    let d = time_writer(region, &file, |view, out| {
        extractor::output::tracedat::write(out, view, &all).expect("writing the trace.dat");
    });
    assert_eq!(tracedat_events(&file), events, "events trace-cmd reports");
    println!(
        "  parse + decode + trace.dat: {:.1} M events/s",
        per_sec(events, d) / 1e6
    );
    let _ = std::fs::remove_file(&file);

    let copy = dir.join("bench-ctf-copy");
    let bt_ctf = time_command(|| {
        let _ = std::fs::remove_dir_all(&copy);
        let mut cmd = Command::new("babeltrace2");
        cmd.arg("convert")
            .arg(&out)
            .arg("--component=sink.ctf.fs")
            .arg(format!("--params=path=\"{}\"", copy.display()));
        cmd
    });
    assert_eq!(
        babeltrace2_events(&copy),
        events,
        "events in babeltrace2's CTF copy"
    );
    let _ = std::fs::remove_dir_all(&copy);
    let bt_ctf = per_sec(events, bt_ctf);
    let bt_text = time_command(|| {
        let mut cmd = Command::new("babeltrace2");
        cmd.arg(&out);
        cmd
    });
    let bt_text = per_sec(events, bt_text);
    println!(
        "  baseline, babeltrace2 CTF to CTF: {:.2} M events/s; our region to CTF is {:.1}x as fast",
        bt_ctf / 1e6,
        ctf / bt_ctf
    );
    println!(
        "  baseline, babeltrace2 CTF to text: {:.2} M events/s (its reading speed on our output); \
         our region to CTF is {:.1}x as fast",
        bt_text / 1e6,
        ctf / bt_text
    );
    let _ = std::fs::remove_dir_all(&out);
}

fn main() {
    if let Ok(args) = std::env::var(RSS_PROBE) {
        return rss_probe(&args);
    }
    // `cargo test --benches` runs this with --bench absent; skip the work.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = scratch_dir();
    let memcpy = memcpy_bandwidth();
    println!("memcpy baseline: {:.0} MiB/s", memcpy / MIB as f64);
    // `cargo bench -p extractor -- decode` runs only the benches named.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let (region, counts) = dense_region(REGION);
    if wanted("decode") {
        decode_bench(&region, counts, memcpy);
    }
    if wanted("memory") {
        memory_bench(&dir, &region, counts);
    }
    if wanted("writers") {
        writers_bench(&dir, &region, counts);
    }
    if wanted("scan") {
        scan_bench(&dir, &region, memcpy);
    }
    if wanted("snapshot") {
        snapshot_bench(&dir, &region, counts, memcpy);
    }
    if wanted("dense") {
        drop(region);
        dense_bench(&dir);
    }
}
