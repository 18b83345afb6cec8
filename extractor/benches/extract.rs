//! The extractor's throughput and memory, each next to a baseline measured
//! in the same run: `cargo bench -p extractor` (or `cargo xtask bench`).
//!
//! - scan: finding and reading a 64 MiB region in a 4 GiB raw image of
//!   pseudo-random memory (in the page cache), against memcpy bandwidth;
//! - decode: parse, CRC, decode, merge and text (and JSON lines) output of
//!   a dense 64 MiB 4-CPU region, in events per second, against memcpy of
//!   the region;
//! - writers: parse, decode and each file format written (CTF, Perfetto,
//!   Chrome JSON, trace.dat), against
//!   babeltrace2 converting the same CTF trace to text;
//! - memory: peak RSS of `crashring extract` on sparse raw dumps of 1 GiB
//!   and 16 GiB holding the same 64 MiB region, against the peak RSS of
//!   `crashring --version`.
//!
//! Every time is the median of several runs; only ratios are meant to be
//! compared between machines. Scratch files go to `CRASHRING_BENCH_DIR`,
//! or the target directory's tmp.

use extractor::container;
use extractor::discover;
use extractor::output::{write_items, Format};
use extractor::select::Selection;
use extractor::source::FileSource;
use pstore_ring::read::{HeaderTrust, Region, Trace};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::fs::File;
use std::hint::black_box;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 5;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const REGION: usize = 64 << 20;

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

/// A 4-CPU region of `REGION` bytes filled to the brim with a realistic
/// mix: IRQ entry and exit, scheduler switches, printk lines.
fn dense_region() -> Vec<u8> {
    let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        ..Default::default()
    };
    let mut buf = vec![0u8; REGION];
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
    // Enough to wrap every ring about twice, so pages are all full.
    for i in 0..6_000_000u64 {
        t += 37;
        let w = &mut ws[(i % 4) as usize];
        let _ = match i % 8 {
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
    }
    ws.iter_mut().for_each(|w| w.close());
    buf
}

fn decode_bench(region: &[u8], memcpy: f64) {
    let parsed = Region::parse(region, HeaderTrust::Checksummed).expect("bench region parses");
    let events = parsed.decode().event_count() as u64;
    println!(
        "\ndecode: {} MiB region, 4 CPUs, {events} events (IRQ entry/exit, sched_switch, printk)",
        region.len() >> 20
    );
    let d = median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = region.decode();
        black_box(pstore_ring::merge::merge(&trace.streams).count());
        start.elapsed()
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
            let mut sink = Counter(0);
            let start = Instant::now();
            let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
                .expect("bench region parses");
            let trace = extractor::decode::decode(&region);
            let mut out = BufWriter::with_capacity(1 << 16, &mut sink);
            write_items(&mut out, &region, &trace, &Selection::default(), format, 0)
                .expect("writing to a counter cannot fail");
            drop(out);
            let took = start.elapsed();
            bytes = sink.0;
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

/// A sink that only counts, so output cost is formatting, not storage.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
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
    let mut events = 0;
    let d = median(3, || {
        let start = Instant::now();
        let source = Arc::new(FileSource::open(&path).expect("opening image"));
        let dump = container::open(source).expect("a raw image opens");
        let found = discover::scan(&*dump.memory, &mut |_| {});
        let took = start.elapsed();
        events = found.len();
        took
    });
    let _ = std::fs::remove_file(&path);
    let bw = per_sec(size, d);
    println!(
        "\nscan: {} GiB raw image of pseudo-random memory, {events} region found and read",
        size / GIB
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

/// Peak RSS in KiB of the crashring binary run with `args`, measured by a
/// fresh copy of this bench (see [`RSS_PROBE`]).
fn peak_rss_kib(args: &[&str]) -> i64 {
    let exe = std::env::current_exe().expect("the bench's own path");
    let out = Command::new(exe)
        .env(RSS_PROBE, args.join("\u{1f}"))
        .output()
        .expect("running the RSS probe");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the RSS probe said {:?}", out))
}

/// The probe's body: runs crashring with the arguments in `RSS_PROBE` and
/// prints its peak RSS in KiB.
// The child is reaped by wait4, which also returns its resource usage.
#[allow(clippy::zombie_processes)]
fn rss_probe(args: &str) {
    let child = Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args(args.split('\u{1f}'))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("running crashring");
    let mut status = 0;
    // SAFETY: plain FFI calls with valid pointers; waits for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    println!("{}", usage.ru_maxrss);
}

fn memory_bench(dir: &Path, region: &[u8]) {
    println!("\nmemory: crashring extract -o /dev/null on sparse raw images holding the region");
    let base = peak_rss_kib(&["--version"]);
    println!("  baseline (crashring --version): {} MiB", base / 1024);
    for size in [GIB, 16 * GIB] {
        let path = dir.join(format!("sparse-{}g.raw", size / GIB));
        sparse_image(&path, size, region);
        let p = path.to_str().expect("UTF-8 scratch path");
        let rss = peak_rss_kib(&["extract", p, "-o", "/dev/null"]);
        let _ = std::fs::remove_file(&path);
        println!(
            "  {:>2} GiB image: peak RSS {} MiB ({:.1}x baseline)",
            size / GIB,
            rss / 1024,
            rss as f64 / base as f64
        );
    }
}

/// Each file writer on the dense region (parse, decode and write to the
/// scratch directory), against babeltrace2 converting the same CTF trace
/// to text, which is the reference reader's own speed on our output.
/// Median time of parsing and decoding `region` and writing it with
/// `write` to a file at `path` (which the CTF writer, making its own
/// files, leaves empty).
fn time_writer(
    region: &[u8],
    path: &Path,
    mut write: impl FnMut(&Region, &Trace, &mut BufWriter<File>),
) -> Duration {
    median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = extractor::decode::decode(&region);
        let file = File::create(path).expect("creating the output");
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&region, &trace, &mut out);
        out.flush().expect("writing the output");
        start.elapsed()
    })
}

/// Each file writer on the dense region (parse, decode and write to the
/// scratch directory), against babeltrace2 converting the same CTF trace
/// to text, which is the reference reader's own speed on our output.
fn writers_bench(dir: &Path, region: &[u8]) {
    let parsed = Region::parse(region, HeaderTrust::Checksummed).expect("bench region parses");
    let events = parsed.decode().event_count() as u64;
    println!("\nwriters: the dense region, {events} events, written to files");
    let out = dir.join("bench-ctf");
    let file = dir.join("bench-trace");
    let all = Selection::default();
    let d = time_writer(region, &file, |region, trace, _| {
        let _ = std::fs::remove_dir_all(&out);
        extractor::ctf::write(
            &out,
            region,
            trace,
            &all,
            "bench",
            0,
            &region.wall_clock(trace),
        )
        .expect("writing CTF");
    });
    let ctf = per_sec(events, d);
    println!("  parse + decode + CTF: {:.1} M events/s", ctf / 1e6);
    for format in [Format::Perfetto, Format::Chrome] {
        let d = time_writer(region, &file, |region, trace, out| {
            if format == Format::Perfetto {
                extractor::perfetto::begin(out, trace, 0).expect("writing");
            } else {
                extractor::chrome::begin(out, region, trace, 0).expect("writing");
            }
            write_items(out, region, trace, &all, format, 0).expect("writing the trace");
            if format == Format::Chrome {
                extractor::chrome::end(out).expect("writing");
            }
        });
        println!(
            "  parse + decode + {format:?}: {:.1} M events/s",
            per_sec(events, d) / 1e6
        );
    }
    let d = time_writer(region, &file, |region, trace, out| {
        extractor::tracedat::write(out, region, trace, &all).expect("writing the trace.dat");
    });
    println!(
        "  parse + decode + trace.dat: {:.1} M events/s",
        per_sec(events, d) / 1e6
    );
    let _ = std::fs::remove_file(&file);
    let bt = median(3, || {
        let start = Instant::now();
        let status = Command::new("babeltrace2")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "babeltrace2 could not read the trace (`cargo xtask setup` installs it)"
        );
        start.elapsed()
    });
    let bt = per_sec(events, bt);
    println!(
        "  baseline, babeltrace2 CTF to text: {:.2} M events/s; CTF writer ratio {:.1}x",
        bt / 1e6,
        ctf / bt
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
    let region = dense_region();
    if wanted("decode") {
        decode_bench(&region, memcpy);
    }
    if wanted("memory") {
        memory_bench(&dir, &region);
    }
    if wanted("writers") {
        writers_bench(&dir, &region);
    }
    if wanted("scan") {
        scan_bench(&dir, &region, memcpy);
    }
}
