//! `crashring export --parquet` of bundles of dense regions, against
//! DuckDB reading the same events as JSON lines (the bundles' own
//! `events.jsonl`, unpacked: DuckDB reads no archive) and converting them
//! to Parquet, in the same run.

use crate::{booted_region, median, per_sec, MIB, REGION, RUNS, WRITTEN};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bundles exported: each its own crash day, so that the days are
/// written on every core as a fleet's would be.
const BUNDLES: u8 = 4;
const SIZE: usize = 16 << 20;

/// Where `cargo xtask setup` installs DuckDB (qemu-tests/src/env/setup.rs,
/// `EXPORT_READERS_PYTHON`).
const READERS_PYTHON: &str = "/usr/local/share/crashring/export-readers/venv/bin/python";

/// Times DuckDB running `sql` (with `{files}` the JSON lines' list) in a
/// Python that has imported it; prints nothing but the count the query
/// gives and the median seconds of three runs.
const DUCKDB_TIMED: &str = r#"
import sys, time, duckdb
sql, runs = sys.argv[1], []
for _ in range(3):
    con = duckdb.connect()
    start = time.perf_counter()
    n = con.execute(sql).fetchall()[0][0]
    runs.append(time.perf_counter() - start)
    con.close()
print(n, sorted(runs)[1])
"#;

/// The count and median time DuckDB gives for `sql`.
fn duckdb(sql: &str) -> (u64, Duration) {
    let out = Command::new(READERS_PYTHON)
        .args(["-c", DUCKDB_TIMED, sql])
        .output()
        .unwrap_or_else(|e| panic!("{READERS_PYTHON}: {e} (`cargo xtask setup` installs it)"));
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (n, secs) = text.trim().split_once(' ').expect("a count and a time");
    (
        n.parse().expect("a count"),
        Duration::from_secs_f64(secs.parse().expect("seconds")),
    )
}

/// The `events.jsonl` of `bundle`, unpacked into `dir`; with its lines.
fn unpack_events(bundle: &Path, dir: &Path, n: u8) -> (PathBuf, u64) {
    let file = std::fs::File::open(bundle).expect("opening the bundle");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    for entry in tar.entries().expect("reading the bundle") {
        let mut entry = entry.expect("reading the bundle");
        if entry.path_bytes().ends_with(b"/events.jsonl") {
            let mut data = Vec::new();
            entry.read_to_end(&mut data).expect("reading events.jsonl");
            let lines = data.iter().filter(|&&b| b == b'\n').count() as u64;
            let path = dir.join(format!("events-{n}.jsonl"));
            std::fs::write(&path, data).expect("writing events.jsonl");
            return (path, lines);
        }
    }
    panic!("{} holds no events.jsonl", bundle.display())
}

pub(crate) fn export_bench(scratch: &Path) {
    let dir = scratch.join("bench-export");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the export scratch directory");
    let crashring = env!("CARGO_BIN_EXE_crashring");
    let mut bundles = Vec::new();
    let mut jsonl = Vec::new();
    let mut lines = 0;
    for b in 0..BUNDLES {
        let (region, _) = booted_region(SIZE, WRITTEN * SIZE as u64 / REGION as u64, Some(b));
        let image = dir.join(format!("region-{b}.bin"));
        std::fs::write(&image, &region).expect("writing the region");
        let bundle = dir.join(format!("bundle-{b}.tar.gz"));
        let status = Command::new(crashring)
            .args(["bundle", "--raw-pointers"])
            .arg(&image)
            .arg("-o")
            .arg(&bundle)
            .stderr(Stdio::null())
            .status()
            .expect("running crashring bundle");
        assert!(
            status.code().is_some_and(|c| c <= 1),
            "crashring bundle: {status}"
        );
        std::fs::remove_file(&image).expect("removing the region");
        let (path, n) = unpack_events(&bundle, &dir, b);
        lines += n;
        jsonl.push(path);
        bundles.push(bundle);
    }
    let size: u64 = bundles
        .iter()
        .map(|b| std::fs::metadata(b).expect("a bundle").len())
        .sum();
    println!(
        "\nexport: {BUNDLES} bundles of {} MiB regions ({} MiB of archives), {lines} events and losses",
        SIZE as u64 / MIB,
        size / MIB
    );

    let out = dir.join("parquet");
    let mut rows = 0;
    let ours = median(RUNS, || {
        let _ = std::fs::remove_dir_all(&out);
        let start = Instant::now();
        let done = extractor::export::to_parquet(&out, &bundles, &|| {}).expect("exporting");
        let took = start.elapsed();
        assert!(done.refused.is_empty() && done.bad_lines == 0, "{done:?}");
        rows = done.events;
        took
    });
    assert_eq!(rows, lines, "events rows against the JSON lines");
    let glob = format!("{}/events-v1/*/*.parquet", out.display());
    let (read_back, _) = duckdb(&format!("SELECT count(*) FROM read_parquet('{glob}')"));
    assert_eq!(read_back, lines, "rows DuckDB reads back from the dataset");
    let ours = per_sec(lines, ours);
    println!(
        "  crashring export --parquet (archives read and checked, lines parsed, two tables): {:.2} M events/s",
        ours / 1e6
    );

    let files = jsonl
        .iter()
        .map(|p| format!("'{}'", p.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let source = format!("read_json([{files}], format = 'newline_delimited')");
    let (n, read) = duckdb(&format!(
        "SELECT count(*) FROM (SELECT sum(ts), max(type) FROM {source})"
    ));
    assert_eq!(n, 1);
    let copy = dir.join("duckdb.parquet");
    let (n, convert) = duckdb(&format!(
        "COPY (SELECT * FROM {source}) TO '{}' (FORMAT parquet)",
        copy.display()
    ));
    assert_eq!(n, lines, "rows DuckDB converted");
    let (read, convert) = (per_sec(lines, read), per_sec(lines, convert));
    println!(
        "  baseline, DuckDB reading the same JSON lines, unpacked: {:.2} M events/s; export is {:.2}x as fast",
        read / 1e6,
        ours / read
    );
    println!(
        "  baseline, DuckDB converting them to Parquet: {:.2} M events/s; export is {:.2}x as fast",
        convert / 1e6,
        ours / convert
    );
    let _ = std::fs::remove_dir_all(&dir);
}
