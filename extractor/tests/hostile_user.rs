//! A member of the `crashring` group owns its user streams' bytes and can
//! write anything there (common::hostile_image): what it writes stays its
//! own claim, under its own label, and never reads as the kernel's. Each
//! test drives the real binary over that region.

mod common;

use common::hostile::*;
use common::{crashring, extract_to, hostile_image, reader, run_ok, write_tmp};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn image(name: &str) -> PathBuf {
    write_tmp(name, &hostile_image())
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn info_json(image: &Path) -> Value {
    let out = crashring(&["info", "--json", image.to_str().unwrap()]);
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// A line a person reads: no line break inside, no control character
/// (C0, DEL, C1 as a code point or a lone byte).
fn assert_no_controls(what: &str, text: &[u8]) {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    let shown = String::from_utf8_lossy(text);
    assert!(
        std::str::from_utf8(text).is_ok(),
        "{what}: not UTF-8: {shown:?}"
    );
    assert!(!shown.chars().any(bad), "{what}: {shown:?}");
}

/// Unpacks a bundle of `image` and returns its top directory.
fn bundle(image: &Path, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("b.tar.gz");
    let out = crashring(&[
        "bundle",
        image.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ]);
    stdout(&out);
    let file = std::fs::File::open(&archive).unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(file))
        .unpack(&dir)
        .unwrap();
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap()
}

/// Item 9: a user stream's `clock` event does not move the region's wall
/// clock, and its claims (2^64 − 101 lost events, an event at 2^63 ns)
/// stay out of the region's totals and time span.
#[test]
fn a_user_stream_moves_neither_the_wall_clock_nor_the_totals() {
    let image = image("hostile-clock.bin");
    let doc = info_json(&image);
    let region = &doc["regions"][0];
    let steps = region["clock"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["ns"], KERNEL_STEP_NS);
    assert_eq!(steps[0]["wall_offset_ns"], KERNEL_STEP_OFFSET_NS);
    let crash = &region["crash"];
    assert_eq!(crash["message"], CRASH_MESSAGE);
    let utc = crash["time_utc"].as_str().unwrap();
    assert!(utc.starts_with("2026-"), "{utc}");
    // The region's figures are the kernel's: 4 events, nothing lost.
    assert_eq!(region["recovered"], 4);
    assert_eq!(region["lost"], 0);
    // The forger's claim is still there, as its own.
    let user = &region["user_streams"];
    assert_eq!(user["streams"], 3);
    assert!(user["lost"].as_u64().unwrap() >= u64::MAX - 100, "{user}");
    let forger = region["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == format!("user:{FORGER}"))
        .unwrap();
    assert_eq!(forger["newest_ns"], 1u64 << 63);

    let text = stdout(&crashring(&["info", image.to_str().unwrap()]));
    assert!(
        text.contains(&format!("time span: 2000 .. {KERNEL_LAST_NS} ns")),
        "{text}"
    );
    assert!(!text.contains("2100-"), "{text}");

    let top = bundle(&image, "hostile-clock-bundle");
    let name = top.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("crash-kiosk-2026"), "{name}");
    let readme = std::fs::read_to_string(top.join("README.txt")).unwrap();
    assert!(readme.contains("Recovered 4 events; 0 lost"), "{readme}");
    assert!(!readme.contains("2100-"), "{readme}");
    // The forger's losses are shown only as what the user streams claim.
    for line in readme.lines().filter(|l| l.contains("18446744073709551")) {
        assert!(line.contains("claim"), "{line}");
    }
    let manifest = std::fs::read_to_string(top.join("MANIFEST.json")).unwrap();
    assert!(!manifest.contains("2100-"), "{manifest}");
}

/// Item 10: a user stream's kernel-type records never join the kernel's
/// evidence (dmesg.txt), and no record's text writes a line of its own or
/// a control byte anywhere a person reads.
#[test]
fn user_records_are_never_kernel_evidence_and_text_is_escaped() {
    let image = image("hostile-evidence.bin");
    let top = bundle(&image, "hostile-evidence-bundle");
    let dmesg = std::fs::read(top.join("dmesg.txt")).unwrap();
    assert_no_controls("dmesg.txt", &dmesg);
    let dmesg = String::from_utf8(dmesg).unwrap();
    assert!(!dmesg.contains(FORGED_PANIC), "{dmesg}");
    assert!(!dmesg.contains("pretending"), "{dmesg}");
    assert!(!dmesg.contains("forged"), "{dmesg}");
    assert_eq!(
        dmesg.lines().collect::<Vec<_>>(),
        [
            "[    0.000002] hello from cpu0",
            "[    0.000010] kernel line 2"
        ]
    );
    let readme = std::fs::read(top.join("README.txt")).unwrap();
    assert_no_controls("README.txt", &readme);
    let readme = String::from_utf8(readme).unwrap();
    assert!(readme.contains("Crashed: panic on CPU 1"), "{readme}");
    assert!(!readme.contains("forged"), "{readme}");

    let text = crashring(&["extract", image.to_str().unwrap()]);
    let out = stdout(&text);
    assert_no_controls("text output", out.as_bytes());
    assert_no_controls("stderr", &text.stderr);
    for line in out.lines() {
        // Every line names its stream first: a CPU's bracket, or a user
        // stream's label.
        let kernel = line.starts_with("[000] ") || line.starts_with("[001] ");
        assert!(kernel || line.starts_with("[user:"), "{line}");
        if kernel {
            assert!(!line.contains("forged"), "{line}");
            assert!(!line.contains("pretending"), "{line}");
        }
    }
    assert!(out.contains(&format!("[user:{FORGER}] ")), "{out}");
    let info = crashring(&["info", image.to_str().unwrap()]);
    assert_no_controls("info", &info.stdout);
    assert_no_controls("info stderr", &info.stderr);
    let jsonl = stdout(&crashring(&[
        "extract",
        "--format",
        "jsonl",
        image.to_str().unwrap(),
    ]));
    assert_no_controls("jsonl", jsonl.as_bytes());
    for line in jsonl.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["cpu"].is_number() {
            assert!(!line.contains("forged"), "{line}");
        }
    }
    // trace-cmd prints a string as the file holds it.
    let Some(trace_cmd) = reader("trace-cmd") else {
        return;
    };
    let (out, dat) = extract_to(&image, "tracedat", "hostile-evidence.dat");
    stdout(&out);
    let report = run_ok(Command::new(trace_cmd).args(["report", "-i"]).arg(&dat));
    assert_no_controls("trace-cmd report", &report.stdout);
    let report = String::from_utf8(report.stdout).unwrap();
    assert!(report.contains("forged"), "{report}");
}

/// Item 11: user streams are labelled in their own namespace everywhere:
/// `--stream cpu0` is the kernel's CPU 0 only, no user stream shows in a
/// CPU's bracket, and names with control bytes are escaped.
#[test]
fn user_stream_names_cannot_pass_for_kernel_labels() {
    let image = image("hostile-names.bin");
    let path = image.to_str().unwrap();
    let cpu0 = stdout(&crashring(&["extract", "--stream", "cpu0", path]));
    let lines: Vec<&str> = cpu0.lines().collect();
    assert_eq!(lines.len(), 3, "{cpu0}");
    assert!(lines.iter().all(|l| l.starts_with("[000] ")), "{cpu0}");
    let forger = stdout(&crashring(&["extract", "--stream", "user:cpu0", path]));
    assert!(forger.lines().count() > 3, "{forger}");
    assert!(
        forger.lines().all(|l| l.starts_with("[user:cpu0] ")),
        "{forger}"
    );
    let all = stdout(&crashring(&["extract", path]));
    let zero: Vec<&str> = all.lines().filter(|l| l.starts_with("[000]")).collect();
    assert_eq!(zero.len(), 3, "{all}");
    assert!(all.contains("[user:000] "), "{all}");
    let escaped = "[user:e\\x1b\\x5b31m\\x0d\\x0a\\x5b000\\x5d\\x20x] ";
    assert!(all.contains(escaped), "{all}");

    let info = stdout(&crashring(&["info", path]));
    let labels: Vec<&str> = info
        .lines()
        .filter_map(|l| l.trim_start().split_once(": ").map(|(a, _)| a))
        .filter(|a| a.starts_with("cpu") || a.starts_with("user:"))
        .collect();
    assert_eq!(
        labels,
        [
            "cpu0",
            "cpu1",
            "user:cpu0",
            "user:000",
            "user:e\\x1b\\x5b31m\\x0d\\x0a\\x5b000\\x5d\\x20x"
        ],
        "{info}"
    );
    for format in ["chrome", "perfetto"] {
        let out = crashring(&["extract", "--format", format, path]);
        let bytes = out.stdout;
        let find = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
        assert!(find(b"user:cpu0"), "{format}");
        assert!(!find(b"\x1b[31m"), "{format}: a raw control sequence");
    }
}
