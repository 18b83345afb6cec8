//! The user-space writer against LTTng-UST, in the same run:
//! `cargo bench -p crashring-user` (or `cargo xtask bench`).
//!
//! benches/writers.c writes the same payloads through crashring-user's C
//! API and through LTTng-UST (tracepoints with an 8-byte integer and a
//! 64-byte array, `tracef()` against `crashring_log()` for a formatted
//! line), into an overwrite-mode channel of a snapshot session, the
//! flight-recorder set-up, with as much memory as crashring's stream.
//! Both read the same clock per event, which writers.c also times alone.
//! `write()` to /dev/null stands for a system call per event. The Rust
//! API's 8-byte figure comes from this process. Last, a log line of a
//! category switched off (`crashring_enabled()` tested before anything is
//! formatted; the recorder's own word here, the kernel's mapped control
//! page in its pool: the same load and test), beside a call of an empty
//! function, in C and in Rust.
//!
//! Each figure is checked before it is printed: the crashring region
//! must hold every event written (kept or overwritten, nothing else), and
//! LTTng's snapshot the newest events of each kind, or a writer that
//! recorded nothing would look fast.

#[path = "../tests/common/mod.rs"]
mod common;

use crashring_user::{Config, Level, Recorder};
use pstore_ring::read::{HeaderTrust, LossKind, Region};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const EVENTS: u64 = 1_000_000;
const RUNS: u32 = 7;

fn sh(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// writers.c built against the bench profile's cdylib and LTTng-UST.
fn build(dir: &Path) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut flags = vec![format!("-I{}", here.join("benches").display())];
    flags.extend(
        sh("pkg-config", &["--libs", "lttng-ust"])
            .split_whitespace()
            .map(String::from),
    );
    common::build(
        dir,
        "writers",
        &["benches/writers.c", "benches/bench_tp.c"],
        &flags,
    )
}

/// A snapshot session with an overwrite-mode channel of 4 × 64 KiB (a
/// stream's 64 pages of 4 KiB) per kind of writers.c's events; destroyed,
/// with the session daemon if this started one, when dropped.
struct Lttng {
    session: String,
    output: PathBuf,
    started_daemon: bool,
}

impl Lttng {
    fn start(dir: &Path) -> Lttng {
        let running = Command::new("pgrep")
            .args(["-x", "lttng-sessiond"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !running {
            sh("lttng-sessiond", &["--daemonize"]);
        }
        let session = format!("crashring-bench-{}", std::process::id());
        let output = dir.join("lttng");
        let out = output.to_str().unwrap();
        sh(
            "lttng",
            &["create", &session, "--snapshot", "--output", out],
        );
        let this = Lttng {
            session,
            output,
            started_daemon: !running,
        };
        let s = this.session.as_str();
        // A channel per kind, as crashring has a stream per kind, so each
        // kind's newest events are in the snapshot.
        for (channel, events) in [
            ("p8", "crashring_bench:p8"),
            ("p64", "crashring_bench:p64"),
            ("line", "lttng_ust_tracef:*"),
        ] {
            sh(
                "lttng",
                &[
                    "enable-channel",
                    "-u",
                    "-s",
                    s,
                    channel,
                    "--overwrite",
                    "--subbuf-size",
                    "64K",
                    "--num-subbuf",
                    "4",
                ],
            );
            sh(
                "lttng",
                &["enable-event", "-u", "-s", s, "-c", channel, events],
            );
        }
        sh("lttng", &["start", s]);
        this
    }

    /// Stops tracing and returns the snapshot's events as babeltrace2
    /// prints them.
    fn snapshot(&self) -> String {
        let s = self.session.as_str();
        sh("lttng", &["stop", s]);
        sh("lttng", &["snapshot", "record", "-s", s]);
        sh("babeltrace2", &[self.output.to_str().unwrap()])
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        let _ = Command::new("lttng")
            .args(["destroy", &self.session])
            .output();
        if self.started_daemon {
            let _ = Command::new("pkill")
                .args(["-x", "lttng-sessiond"])
                .status();
        }
    }
}

/// The crashring region writers.c left: three streams (8 bytes, 64
/// bytes, lines), each given `written` events, all kept or overwritten.
fn check_region(path: &Path, written: u64) {
    let bytes = std::fs::read(path).unwrap();
    let region = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    assert_eq!(trace.streams.len(), 3);
    for st in &trace.streams {
        let kept = st.events.len() as u64;
        let overwritten = st.lost(LossKind::Overwritten);
        assert!(
            kept > 0 && st.lost_events() == overwritten,
            "{:?}",
            st.losses
        );
        assert_eq!(kept + overwritten, written, "stream {}", st.info.name);
    }
}

/// The newest event of each kind is in LTTng's snapshot.
fn check_snapshot(text: &str) {
    let last = EVENTS - 1;
    assert!(
        text.contains(&format!("{{ v = {last} }}")),
        "no p8 event {last} in LTTng's snapshot"
    );
    assert!(text.contains("crashring_bench:p64:"), "no p64 event");
    assert!(
        text.contains(&format!("msg = \"frame {last} took 16 us\"")),
        "no tracef line {last}"
    );
}

/// ns/event of the Rust API writing 8 bytes, median of [`RUNS`].
fn rust_8(dir: &Path) -> f64 {
    let rec = Recorder::create(&Config {
        path: Some(dir.join("rust.crashring")),
        streams: 1,
        ..Config::new("rust")
    })
    .unwrap();
    let mut s = rec.stream().unwrap();
    let mut runs: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            for i in 0..EVENTS {
                s.write(40, &i.to_ne_bytes()).unwrap();
            }
            start.elapsed().as_nanos() as f64 / EVENTS as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[RUNS as usize / 2]
}

/// A call the compiler must make, and that does nothing.
#[inline(never)]
fn empty(v: u64) {
    std::hint::black_box(v);
}

/// ns/event of a log line whose category is off, and of an empty call,
/// medians of [`RUNS`], from the Rust API.
fn rust_disabled(dir: &Path) -> (f64, f64) {
    let rec = Recorder::create(&Config {
        path: Some(dir.join("rust-disabled.crashring")),
        streams: 1,
        categories: &["frame", "input"],
        categories_off: 0b10,
        ..Config::new("rust")
    })
    .unwrap();
    let input = rec.category("input").unwrap();
    let mut s = rec.stream().unwrap();
    let mut disabled = Vec::new();
    let mut calls = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        for i in 0..EVENTS {
            if std::hint::black_box(&rec).enabled(input) {
                s.log_fmt(Level::Debug, "input", format_args!("pointer {i}"))
                    .unwrap();
            }
        }
        disabled.push(start.elapsed().as_nanos() as f64 / EVENTS as f64);
        let start = Instant::now();
        for i in 0..EVENTS {
            empty(i);
        }
        calls.push(start.elapsed().as_nanos() as f64 / EVENTS as f64);
    }
    for v in [&mut disabled, &mut calls] {
        v.sort_by(f64::total_cmp);
    }
    (disabled[RUNS as usize / 2], calls[RUNS as usize / 2])
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let writers = build(dir.path());
    let region = dir.path().join("bench.crashring");
    let lttng = Lttng::start(dir.path());
    let out = common::run(&writers)
        .arg(&region)
        .args([EVENTS.to_string(), RUNS.to_string()])
        // Wait for the session daemon, so no event precedes registration.
        .env("LTTNG_UST_REGISTER_TIMEOUT", "-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "writers: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_snapshot(&lttng.snapshot());
    drop(lttng);
    let text = String::from_utf8(out.stdout).unwrap();
    let ns: BTreeMap<&str, f64> = text
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect();
    check_region(&region, ns["written"] as u64);
    let rust = rust_8(dir.path());
    let (rust_off, rust_empty) = rust_disabled(dir.path());

    println!("user-space writers, ns/event (median of {RUNS} runs of {EVENTS}; same run):");
    let clock = ns["clock"];
    for (what, ours, theirs) in [
        ("8-byte payload", "crashring 8", "lttng 8"),
        ("64-byte payload", "crashring 64", "lttng 64"),
        ("formatted line", "crashring line", "lttng line"),
    ] {
        let (a, b) = (ns[ours], ns[theirs]);
        println!(
            "  {what:16} crashring {a:7.1}  LTTng-UST {b:7.1}  LTTng/crashring {:4.2}x  \
             without the clock read {:4.2}x",
            b / a,
            (b - clock) / (a - clock)
        );
    }
    println!("  clock read (CLOCK_MONOTONIC, vDSO), both pay it per event: {clock:.1}");
    println!(
        "  write() of 8 bytes to /dev/null: {:.1} ({:.1}x crashring's 8-byte event)",
        ns["write() 8"],
        ns["write() 8"] / ns["crashring 8"]
    );
    println!(
        "  Rust API, 8 bytes: {rust:.1} (the C API: {:.1})",
        ns["crashring 8"]
    );
    println!(
        "  a log line of a category switched off: C {:.2} beside an empty call's {:.2} ({:+.2}); Rust {rust_off:.2} beside {rust_empty:.2} ({:+.2}); target within 2 ns",
        ns["disabled line"],
        ns["empty call"],
        ns["disabled line"] - ns["empty call"],
        rust_off - rust_empty
    );
}
