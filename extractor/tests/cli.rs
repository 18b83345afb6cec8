//! Drives the real `crashring` binary on images made by the format crate's
//! writer: what it prints and the exit status it documents.

mod common;

use common::{crashring, image, write_tmp};

#[test]
fn extract_finds_a_region_anywhere_in_an_image_and_prints_events_in_order() {
    let path = write_tmp("intact.bin", &image(12_345, false));
    let out = crashring(&["extract", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 11);
    assert_eq!(
        lines[0],
        "[000]        0.000001000: printk: level=6 flags=0 caller=1 seq=0 text=\"message 0\""
    );
    assert!(
        lines[10].contains("crash: reason=1 cpu=1 message=\"Kernel panic - not syncing: test\"")
    );
}

#[test]
fn overwritten_events_are_reported_but_are_no_damage() {
    let path = write_tmp("wrapped.bin", &image(0, true));
    let out = crashring(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("state crashed (panic)"), "{text}");
    assert!(text.contains("(overwritten)"), "{text}");
}

#[test]
fn damage_is_reported_on_stderr_with_its_location() {
    let mut img = image(0, false);
    // Flip a bit in the first page of stream 0 (after the metadata).
    let region =
        pstore_ring::read::Region::parse(&img, pstore_ring::read::HeaderTrust::Checksummed)
            .unwrap();
    let first_page = region.streams[0].pages_offset as usize;
    img[first_page + 60] ^= 1;
    let path = write_tmp("flipped.bin", &img);
    let out = crashring(&["extract", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "stream 0 page 0 at region offset {first_page:#x}: CRC mismatch"
        )),
        "{err}"
    );
}

#[test]
fn no_region_and_no_file_exit_2_with_a_message() {
    let path = write_tmp("random.bin", &[0x42; 10_000]);
    let out = crashring(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("crashring: no crashring region in") && err.contains("raw memory image"),
        "{err}"
    );
    let out = crashring(&["info", "/nonexistent/file"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("opening /nonexistent/file"));
}

#[test]
fn a_region_copy_cut_short_keeps_the_streams_before_the_cut() {
    let img = image(0, false);
    let region =
        pstore_ring::read::Region::parse(&img, pstore_ring::read::HeaderTrust::Checksummed)
            .unwrap();
    let cut = region.streams[1].pages_offset as usize;
    let path = write_tmp("cut-region.bin", &img[..cut]);
    let out = crashring(&["extract", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("not in the dump"), "{err}");
    let text = String::from_utf8(out.stdout).unwrap();
    let cpu0: Vec<&str> = text.lines().filter(|l| l.starts_with("[000]")).collect();
    assert_eq!(cpu0.len(), 5, "{text}");
    // Every page of cpu1, its crash record among them, lies past the cut;
    // its tail still says how many events it had.
    let cpu1: Vec<&str> = text.lines().filter(|l| l.starts_with("[001]")).collect();
    assert_eq!(cpu1.len(), 1, "{text}");
    assert!(
        cpu1[0].ends_with(": ** 6 events lost (end of stream: 1 page cut off) **"),
        "{text}"
    );
    let out = crashring(&["verify", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(said.contains(": damaged: 5 events, 6 lost"), "{said}");
}

/// `-o -` is standard output, never a file named `-`;
/// a format that writes a directory or a file with an index refuses it.
#[test]
fn dash_output_is_standard_output() {
    let image = write_tmp("dash.bin", &image(0, false));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dash-out");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_crashring"))
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let path = image.to_str().unwrap();
    let plain = run(&["extract", path]);
    let dashed = run(&["extract", path, "-o", "-"]);
    assert_eq!(dashed.status.code(), plain.status.code());
    assert!(!dashed.stdout.is_empty());
    assert_eq!(dashed.stdout, plain.stdout);
    assert!(!dir.join("-").exists(), "-o - wrote a file named -");
    for (format, says) in [("ctf", "writes a directory"), ("tracedat", "index")] {
        let out = run(&["extract", path, "--format", format, "-o", "-"]);
        assert_eq!(out.status.code(), Some(2), "{format}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains("-o -"),
            "{format}: {err}"
        );
        assert!(!dir.join("-").exists(), "{format} wrote -");
    }
    let out = run(&["bundle", path, "-o", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o -"));
    assert!(!dir.join("-").exists(), "bundle wrote -");
}
