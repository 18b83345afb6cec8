//! A program's file-backed flight recorder (crashring-user), read by the
//! real `crashring extract`: written by a process killed with SIGKILL
//! mid-write, everything it committed comes back, named and in order.

mod common;

use common::crashring;
use crashring_user::{Config, EventDef, FieldDef, FieldKind, Level, Recorder, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Set to a region path, the test binary runs [`record_until_killed`].
const WRITER: &str = "CRASHRING_TEST_WRITER";

const FRAME: EventDef<'static> = EventDef {
    id: 32,
    name: "frame",
    fields: &[FieldDef {
        name: "seq",
        kind: FieldKind::U64,
    }],
};

/// Two threads, each with its stream, log a numbered line and a `frame`
/// event in turn; every 1024th pair committed, a thread prints
/// `THREAD N`. Not a test: the child process of the test below.
#[test]
#[ignore = "the writer the SIGKILL test runs and kills"]
fn record_until_killed() {
    let path = std::env::var_os(WRITER).expect("run by the SIGKILL test");
    let rec = Recorder::create(&Config {
        path: Some(path.into()),
        streams: 2,
        pages_per_stream: 8,
        events: &[FRAME],
        ..Config::new("compositor")
    })
    .unwrap();
    std::thread::scope(|s| {
        for t in 0..2 {
            let rec = &rec;
            s.spawn(move || {
                let mut st = rec.stream().unwrap();
                for i in 0u64.. {
                    st.log_fmt(Level::Info, "render", format_args!("thread {t} line {i}"))
                        .unwrap();
                    st.event(&FRAME, &[Value::Unsigned(i)]).unwrap();
                    if i % 1024 == 0 {
                        println!("{t} {i}");
                    }
                }
            });
        }
    });
}

fn jsonl(region: &Path, more: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["extract", "--format", "jsonl"];
    args.extend(more);
    args.push(region.to_str().unwrap());
    let out = crashring(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn extract_recovers_everything_a_killed_writer_committed() {
    let dir = tempfile::tempdir().unwrap();
    let region = dir.path().join("compositor.crashring");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "record_until_killed", "--ignored", "--nocapture"])
        .env(WRITER, &region)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // The test harness's own lines are not the writer's.
        let Some((t, i)) = line.split_once(' ') else {
            continue;
        };
        let (Ok(t), Ok(i)) = (t.parse(), i.parse()) else {
            continue;
        };
        seen.insert(t, i);
        if seen.len() == 2 && seen.values().all(|&i| i >= 30_000) {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let items = jsonl(&region, &[]);
    // SAFETY: getuid cannot fail.
    let uid = u64::from(unsafe { libc::getuid() });
    let mut last: HashMap<String, (u64, u64)> = HashMap::new();
    let mut expect_frame = HashMap::new();
    for it in &items {
        let name = it["name"].as_str().unwrap().to_string();
        assert!(
            name == "user:compositor.0" || name == "user:compositor.1",
            "{it}"
        );
        assert_eq!(it["pid"], u64::from(pid));
        assert_eq!(it["uid"], uid);
        if it["kind"] == "loss" {
            assert_eq!(it["reason"], "overwritten", "{it}");
            continue;
        }
        match it["type"].as_str().unwrap() {
            "log" => {
                let f = &it["fields"];
                assert_eq!(
                    (f["level"].as_u64(), f["category"].as_str()),
                    (Some(6), Some("render"))
                );
                let words: Vec<&str> = f["text"].as_str().unwrap().split(' ').collect();
                let (t, i): (u64, u64) = (words[1].parse().unwrap(), words[3].parse().unwrap());
                if let Some(&(pt, pi)) = last.get(&name) {
                    assert_eq!((t, i), (pt, pi + 1), "{name}: a gap or another thread");
                }
                last.insert(name.clone(), (t, i));
                expect_frame.insert(name, i);
            }
            "frame" => {
                if let Some(i) = expect_frame.remove(&name) {
                    assert_eq!(it["fields"]["seq"], i);
                }
            }
            other => panic!("unexpected event type {other}"),
        }
    }
    assert_eq!(last.len(), 2);
    for (t, i) in last.values() {
        assert!(
            *i >= seen[t],
            "thread {t}: last line {i}, reported {}",
            seen[t]
        );
    }

    // --stream keeps one stream, or a program's all, by its label in the
    // user namespace; text names them by label.
    let one = jsonl(&region, &["--stream", "user:compositor.1"]);
    assert!(!one.is_empty() && one.iter().all(|it| it["name"] == "user:compositor.1"));
    assert_eq!(
        jsonl(&region, &["--stream", "user:compositor"]).len(),
        items.len()
    );
    assert!(jsonl(&region, &["--stream", "user:compositor.2"]).is_empty());
    assert!(jsonl(&region, &["--stream", "compositor.1"]).is_empty());
    let text = crashring(&["extract", region.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.lines().all(|l| l.starts_with("[user:compositor.")),
        "{text:.300}"
    );
    assert!(text.contains("log: level=6 category=\"render\" text=\"thread "));
}
