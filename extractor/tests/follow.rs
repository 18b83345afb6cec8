//! `crashring follow` over a region file (the live device is followed in
//! qemu-tests' c_snapshot, under running writers): from the start, one
//! poll prints each event `extract` prints, and counts the ones the ring
//! no longer holds as missed.

mod common;

use common::synth::image_of_generation;
use common::{crashring, rich_image, write_tmp};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

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
fn a_follow_whose_reader_went_away_still_says_what_it_missed() {
    let region = write_tmp("follow-closed-region.bin", &rich_image());
    let mut child = Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args(["follow", "--from-start", "--stop-after", "0", "--from"])
        .arg(&region)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `follow | head -n 0`: the pipe is closed before anything is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("16 missed"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

#[test]
fn a_follow_of_some_streams_says_and_counts_only_their_misses() {
    let region = write_tmp("follow-some-region.bin", &rich_image());
    let out = crashring(&[
        "follow",
        "--from-start",
        "--stop-after",
        "0",
        "--stream",
        "user:none-such",
        "--from",
        region.to_str().unwrap(),
    ]);
    // cpu0 missed 16 (above), but was not asked for.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("followed cpu0"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn a_follow_that_would_look_without_pause_is_refused() {
    let region = write_tmp("follow-every-region.bin", &rich_image());
    // Accepted, it would look once and stop, not run on without pause.
    let out = crashring(&[
        "follow",
        "--every",
        "0",
        "--stop-after",
        "0",
        "--from",
        region.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--every") && stderr.contains("without pause"),
        "{stderr}"
    );
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

/// `crashring follow --from-start` of `path`, polling every 10 ms, and
/// its output lines as they come.
fn follow_live(path: &Path) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args([
            "follow",
            "--format",
            "jsonl",
            "--from-start",
            "--every",
            "10ms",
        ])
        .arg("--from")
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The next lines of `lines` up to the `n`-th event line, or fewer if
/// they do not come within a minute.
fn next_lines(lines: &Receiver<String>, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    let mut events = 0;
    while events < n {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                events += usize::from(is_event(&l));
                got.push(l);
            }
            Err(_) => break,
        }
    }
    got
}

fn is_event(line: &str) -> bool {
    line.starts_with("{\"kind\":\"event\"")
}

/// The next `n` event lines of `lines`, or fewer if they do not come
/// within a minute.
fn next_events(lines: &Receiver<String>, n: usize) -> Vec<String> {
    let mut events = next_lines(lines, n);
    events.retain(|l| is_event(l));
    events
}

/// `child`'s end, within a minute (killed after that).
fn end_of(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("follow did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

/// The module loaded again records a new generation in the other slot: a
/// region of the same size and layout, whose streams start over at index
/// 0. Its events are new, all of them; what the old one wrote after the
/// last look is lost, nobody knows how much.
#[test]
fn a_new_generation_of_the_same_size_is_followed_from_its_first_event() {
    let size = 64 << 10;
    let path = write_tmp(
        "follow-generations.bin",
        &image_of_generation(0, 4096, size, 10, 1),
    );
    let (child, lines) = follow_live(&path);
    // Ten printk lines and the crash, then six and the crash.
    assert_eq!(next_events(&lines, 11).len(), 11);
    let next = write_tmp(
        "follow-generations.next",
        &image_of_generation(0, 4096, size, 6, 2),
    );
    std::fs::rename(&next, &path).unwrap();
    let seen = next_lines(&lines, 7);
    let events: Vec<&String> = seen.iter().filter(|l| is_event(l)).collect();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let out = end_of(child);
    assert_eq!(events.len(), 7, "{events:#?}");
    assert!(events[..6]
        .iter()
        .zip(0..)
        .all(|(e, i)| e.contains(&format!("message {i}"))));
    // Each CPU's end, unread, before the new generation's first event.
    let replaced = seen
        .iter()
        .take_while(|l| !is_event(l))
        .filter(|l| l.contains("\"cause\":\"replaced\",\"exact\":false"))
        .count();
    assert_eq!(replaced, 2, "{seen:#?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("crashring: followed cpu0: 8 events printed or filtered, at least 0 missed"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

#[test]
fn a_region_that_goes_away_ends_the_follow_after_its_summary() {
    let path = write_tmp(
        "follow-gone.bin",
        &image_of_generation(0, 4096, 64 << 10, 10, 1),
    );
    let (child, lines) = follow_live(&path);
    assert_eq!(next_events(&lines, 11).len(), 11);
    std::fs::remove_file(&path).unwrap();
    let out = end_of(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("crashring: followed cpu1: 6 events printed or filtered, 0 missed"),
        "{stderr}"
    );
    assert!(stderr.contains("opening"), "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}
