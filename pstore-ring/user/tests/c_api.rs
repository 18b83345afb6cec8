//! The C API, driven by a C program built against the installed header
//! and the cdylib: a clean run, a run killed with SIGKILL, the refusals.

use pstore_ring::layout::{STATE_CLEAN, STATE_RUNNING};
use pstore_ring::read::{HeaderTrust, LossKind, PageStatus, Region, StreamTrace};
use pstore_ring::schema::EVENT_LOG;
mod common;

use common::{build, run};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Builds tests/c/writer.c.
fn writer(dir: &Path) -> PathBuf {
    build(dir, "writer", &["tests/c/writer.c"], &[])
}

/// Checks one stream of the writer's region: pairs of a `log` line and a
/// `frame` with the same number, consecutive, nothing lost but what the
/// ring overwrote. Returns the writer's thread and its last number.
fn check_stream(st: &StreamTrace<'_>) -> (u64, u64) {
    let kinds: Vec<_> = st.losses.iter().map(|l| l.kind).collect();
    assert!(
        kinds.iter().all(|&k| k == LossKind::Overwritten),
        "stream {}: {:?}",
        st.info.name,
        st.losses
    );
    let mut evs = st.events.iter().peekable();
    // The ring may have overwritten the line of the oldest pair.
    if evs.peek().is_some_and(|e| e.type_id == 32) {
        evs.next();
    }
    let (mut thread, mut last) = (None, None);
    while let Some(line) = evs.next() {
        assert_eq!(line.type_id, EVENT_LOG);
        assert_eq!(line.payload[0], 6);
        assert_eq!(&line.payload[1..7], b"render");
        let len = u16::from_le_bytes([line.payload[17], line.payload[18]]) as usize;
        let text = std::str::from_utf8(&line.payload[19..19 + len]).unwrap();
        let words: Vec<&str> = text.split(' ').collect();
        let (t, i): (u64, u64) = (words[1].parse().unwrap(), words[3].parse().unwrap());
        assert_eq!(*thread.get_or_insert(t), t, "one thread per stream");
        if let Some(prev) = last {
            assert_eq!(i, prev + 1, "stream {}: a gap", st.info.name);
        }
        last = Some(i);
        let Some(frame) = evs.next() else {
            break; // killed between the line and its frame
        };
        assert_eq!(frame.type_id, 32);
        assert_eq!(frame.payload[..8], i.to_le_bytes());
        assert_eq!(&frame.payload[8..16], b"HDMI-A-1");
    }
    (thread.unwrap(), last.unwrap())
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn a_c_program_records_and_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let bin = writer(dir.path());
    let region = dir.path().join("c.crashring");
    let ok = run(&bin).arg(&region).args(["2", "3000"]).status().unwrap();
    assert!(ok.success());
    let bytes = read(&region);
    let r = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
    assert_eq!(r.state.as_ref().unwrap().state, STATE_CLEAN);
    assert_eq!(r.header.producer, "crashring-user");
    assert_eq!(r.schema.get(32).unwrap().name, "frame");
    let trace = r.decode();
    let mut threads: Vec<u64> = trace
        .streams
        .iter()
        .map(|st| {
            assert!(st.events.iter().all(|e| !e.salvaged), "pages closed");
            let (t, last) = check_stream(st);
            assert_eq!(last, 2999);
            assert!(st.lost(LossKind::Overwritten) > 0, "the ring wrapped");
            t
        })
        .collect();
    threads.sort();
    assert_eq!(threads, [0, 1]);

    // The recording is never replaced by a second run.
    let again = run(&bin).arg(&region).args(["1", "1"]).output().unwrap();
    assert_eq!(again.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&again.stderr).contains("File exists"));
    assert_eq!(read(&region), bytes);
}

#[test]
fn every_committed_event_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let bin = writer(dir.path());
    let region = dir.path().join("k.crashring");
    let mut child = run(&bin)
        .arg(&region)
        .args(["2", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Each thread's newest committed pair, once both have wrapped their
    // ring many times over.
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let (t, i) = line.split_once(' ').unwrap();
        seen.insert(t.parse().unwrap(), i.parse().unwrap());
        if seen.len() == 2 && seen.values().all(|&i| i >= 50_000) {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let bytes = read(&region);
    let r = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
    assert_eq!(r.state.as_ref().unwrap().state, STATE_RUNNING);
    let trace = r.decode();
    for st in &trace.streams {
        let (t, last) = check_stream(st);
        assert!(last >= seen[&t], "thread {t}: {last} < {}", seen[&t]);
        // Whatever instruction the kill stopped at, every page reads as
        // closed, open (salvaged), caught being opened, or never used;
        // none fails its checks. Its newest page need not be open: a kill
        // between closing a page and opening the next leaves none open,
        // and failed an earlier form of this test under load.
        for p in &st.pages {
            assert!(
                matches!(
                    p.status,
                    PageStatus::Intact
                        | PageStatus::Salvaged
                        | PageStatus::Resetting
                        | PageStatus::Unused
                ),
                "thread {t}: {p:?}"
            );
        }
    }
}

#[test]
fn categories_start_as_the_program_says_and_bad_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bin = writer(dir.path());
    let out = run(&bin)
        .arg(dir.path().join("c.crashring"))
        .arg("categories")
        .output()
        .unwrap();
    assert!(out.status.success());
    // render on, input off (categories_off), drm on, bit 3 names nothing.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1010\nEINVAL\n");
}

#[test]
fn a_second_stream_of_one_is_refused_with_ebusy() {
    let dir = tempfile::tempdir().unwrap();
    let bin = writer(dir.path());
    let out = run(&bin)
        .arg(dir.path().join("b.crashring"))
        .arg("busy")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"EBUSY\n");
}

/// `crashring_request_report()` and `_of()` against a service that
/// answers as crashring's does: the request as the program gave it, the
/// answer and the descriptor back in `struct crashring_report`, and a
/// refusal as `-EPERM` with its reason; and against one that sends a copy
/// not asked for, `-EIO` and no descriptor.
#[test]
fn a_c_program_asks_for_a_report_and_reads_the_answer() {
    use crashring_user::request::{self, Reply, Request};
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "report", &["tests/c/report.c"], &[]);
    let socket = dir.path().join("request.socket");
    // Close-on-exec, as every descriptor here: the other tests of this
    // binary start programs meanwhile, and one that inherited the
    // listening socket would keep it open, so the last connection below
    // would be queued and then reset rather than refused.
    let fd = rustix::net::socket_with(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    rustix::net::bind(&fd, &rustix::net::SocketAddrUnix::new(&socket).unwrap()).unwrap();
    rustix::net::listen(&fd, 4).unwrap();
    let service = std::thread::spawn(move || {
        let mut asked = Vec::new();
        for answer in [
            Reply::Written {
                bundle: "snapshot-kiosk-1.tar.gz".into(),
                events: 42,
                copy_bytes: Some(6),
            },
            Reply::Refused {
                why: "uid 1001 has no stream named \"kiosk-ui\"".into(),
            },
            Reply::Written {
                bundle: "snapshot-kiosk-2.tar.gz".into(),
                events: 42,
                copy_bytes: Some(6),
            },
        ] {
            let conn = rustix::net::accept_with(&fd, rustix::net::SocketFlags::CLOEXEC).unwrap();
            let bytes = request::receive_message(&conn).unwrap();
            let r = Request::parse(&bytes).unwrap();
            request::send(&conn, &answer.encode()).unwrap();
            // Whether asked for or not: the asker that did not may have
            // hung up by now.
            if let Reply::Written {
                copy_bytes: Some(len),
                ..
            } = answer
            {
                let mut copy = tempfile::tempfile().unwrap();
                std::io::Write::write_all(&mut copy, b"BUNDLE").unwrap();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                let sent = request::send_copy(&conn, &copy, len, deadline);
                if r.copy {
                    sent.unwrap();
                }
            }
            asked.push(r);
        }
        asked
    });
    let ask = |args: &[&str]| {
        let out = run(&bin)
            .args(args)
            .env(request::SOCKET_VAR, &socket)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        ask(&["black screen", "kiosk-ui"]),
        "rc 0 bundle snapshot-kiosk-1.tar.gz events 42 copy BUNDLE why \n"
    );
    assert_eq!(
        ask(&["curious"]),
        format!(
            "rc -{} bundle  events 0 copy none why refused: uid 1001 has no stream named \"kiosk-ui\"\n",
            libc::EPERM
        )
    );
    let unasked = ask(&["no copy, please"]);
    assert!(
        unasked.starts_with(&format!(
            "rc -{} bundle  events 0 copy none why the request service broke the protocol: ",
            libc::EIO
        )),
        "{unasked}"
    );
    let asked = service.join().unwrap();
    assert_eq!(
        asked,
        [
            Request {
                reason: "black screen".into(),
                streams: vec!["kiosk-ui".into()],
                copy: true
            },
            Request {
                reason: "curious".into(),
                streams: vec![],
                copy: false
            },
            Request {
                reason: "no copy, please".into(),
                streams: vec![],
                copy: false
            }
        ]
    );
    // No service: the socket's error.
    let gone = ask(&["anyone?"]);
    assert!(
        gone.starts_with(&format!("rc -{} ", libc::ECONNREFUSED)),
        "{gone}"
    );
}
