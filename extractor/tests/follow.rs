//! `crashring follow` over a region file (the live device is followed in
//! qemu-tests' c_snapshot, under running writers): from the start, one
//! poll prints each event `extract` prints, and counts the ones the ring
//! no longer holds as missed.

mod common;

use common::{crashring, rich_image, write_tmp};

/// The lines of `text` that are events, sorted.
fn events(text: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(text)
        .lines()
        .filter(|l| l.starts_with("{\"kind\":\"event\""))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn following_from_the_start_prints_what_extract_prints_and_counts_the_rest_missed() {
    let region = write_tmp("follow-region.bin", &rich_image());
    let path = region.to_str().unwrap();
    let extracted = crashring(&["extract", "--format", "jsonl", path]);
    let followed = crashring(&[
        "follow",
        "--format",
        "jsonl",
        "--from-start",
        "--stop-after",
        "0",
        "--from",
        path,
    ]);
    let (want, got) = (events(&extracted.stdout), events(&followed.stdout));
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // The rich image's rings wrapped: what they no longer hold was missed.
    assert_eq!(followed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&followed.stderr);
    assert!(
        stderr.contains("crashring: followed cpu0: 84 events printed or filtered, 16 missed"),
        "{stderr}"
    );
    let losses = String::from_utf8_lossy(&followed.stdout)
        .lines()
        .filter(|l| l.starts_with("{\"kind\":\"loss\""))
        .count();
    assert!(losses > 0);
}

#[test]
fn following_from_now_prints_nothing_already_there() {
    let region = write_tmp("follow-now-region.bin", &rich_image());
    let followed = crashring(&[
        "follow",
        "--stop-after",
        "0",
        "--from",
        region.to_str().unwrap(),
    ]);
    assert_eq!(followed.status.code(), Some(0));
    assert!(
        followed.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&followed.stdout)
    );
}

#[test]
fn an_interrupted_follow_ends_with_its_summary() {
    let region = write_tmp("follow-interrupted-region.bin", &rich_image());
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_crashring"))
            .args(["follow", "--from-start", "--every", "10ms", "--from"])
            .arg(&region)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Polling until then, as `follow` without --stop-after does.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, signal).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("crashring: followed cpu0: 84 events printed or filtered, 16 missed"),
            "{signal:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(1), "{signal:?}: {stderr}");
    }
}
