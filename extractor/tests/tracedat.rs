//! `crashring extract --format tracedat` read back by `trace-cmd report`.

mod common;

use common::{
    crashring, end_loss_images, extract_to, jsonl_totals, markers_image, reader, rich_image,
    run_ok, write_tmp,
};
use std::collections::BTreeMap;
use std::process::Command;

/// Event lines as (CPU, name and fields) → their times in ns, from either tool: our
/// text is `[cpu] secs.nanos: name: fields`, trace-cmd's (with -t)
/// `comm-pid [cpu] secs.nanos: name:   fields`.
fn events(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((head, rest)) = line.split_once("] ") else {
            continue;
        };
        // The user stream is the file's CPU after the kernel's two.
        let cpu = match head.rsplit_once('[') {
            Some((_, "weston")) => "002",
            Some((_, cpu)) => cpu,
            None => continue,
        };
        let Some((ts, event)) = rest.trim_start().split_once(": ") else {
            continue;
        };
        let Some((secs, nanos)) = ts.split_once('.') else {
            continue;
        };
        let (Ok(secs), Ok(nanos)) = (secs.parse::<u64>(), nanos.parse::<u64>()) else {
            continue;
        };
        let Some((name, fields)) = event.split_once(':') else {
            continue;
        };
        let key = format!("[{cpu}] {name}: {}", fields.trim_start());
        out.entry(key)
            .or_insert_with(Vec::new)
            .push(secs * 1_000_000_000 + nanos);
    }
    for times in out.values_mut() {
        times.sort();
    }
    out
}

#[test]
fn trace_cmd_reports_the_events_and_losses_of_our_text_output() {
    let Some(trace_cmd) = reader("trace-cmd") else {
        return;
    };
    let image = write_tmp("rich-tracedat.bin", &rich_image());
    let (out, dat) = extract_to(&image, "tracedat", "rich.dat");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let clamped: usize = err
        .lines()
        .find_map(|l| {
            let (n, rest) = l.split_once("region 0: ")?.1.split_once(' ')?;
            rest.starts_with("events went back in time")
                .then(|| n.parse().ok())?
        })
        .expect("the backwards page is reported");

    let report = run_ok(
        Command::new(trace_cmd)
            .args(["report", "-t", "-i"])
            .arg(&dat),
    );
    let theirs_text = String::from_utf8(report.stdout).unwrap();
    let ours_text =
        String::from_utf8(crashring(&["extract", image.to_str().unwrap()]).stdout).unwrap();
    // Our text quotes strings and escapes them C-style inside; trace.dat
    // holds them escaped as a log line is: compare the events whose text
    // needs no escape, and count all of them.
    let ours_all = events(&ours_text);
    let theirs = events(&theirs_text);
    let count = |m: &BTreeMap<String, Vec<u64>>| m.values().map(Vec::len).sum::<usize>();
    assert_eq!(count(&theirs), count(&ours_all), "same number of events");
    let mut moved = 0;
    let mut compared = 0;
    for (event, times) in ours_all.iter().filter(|(k, _)| !k.contains('\\')) {
        let Some(their_times) = theirs.get(event) else {
            panic!("trace-cmd lacks {event}");
        };
        assert_eq!(their_times.len(), times.len(), "{event}");
        // Times only move forward; count ours that trace-cmd lacks.
        let mut unmatched = their_times.clone();
        for t in times {
            match unmatched.iter().position(|u| u == t) {
                Some(i) => {
                    unmatched.swap_remove(i);
                }
                None => moved += 1,
            }
        }
        assert!(
            their_times.iter().sum::<u64>() >= times.iter().sum::<u64>(),
            "{event} moved back in time"
        );
        compared += times.len();
    }
    assert!(compared > count(&ours_all) / 2, "only {compared} compared");
    assert_eq!(moved, clamped);

    // Every loss, as trace-cmd's "[N EVENTS DROPPED]".
    let dropped: u64 = theirs_text
        .lines()
        .filter_map(|l| l.split_once(" [")?.1.strip_suffix(" EVENTS DROPPED]"))
        .map(|n| n.parse::<u64>().unwrap())
        .sum();
    let (_, _, lost) = jsonl_totals(&image);
    assert!(lost > 0);
    assert_eq!(dropped, lost);
}

#[test]
fn long_gaps_keep_their_nanoseconds_through_time_extends() {
    let Some(trace_cmd) = reader("trace-cmd") else {
        return;
    };
    let times = [
        1_000u64,
        134_217_728 + 1_000,
        10_000_000_007,
        3_600_000_000_123,
        // More than a time extend's 59 bits from the last.
        (1 << 62) + 5,
        (1 << 63) + 7,
    ];
    let mem = markers_image(&times);
    let image = write_tmp("gaps-tracedat.bin", &mem);
    let (out, dat) = extract_to(&image, "tracedat", "gaps.dat");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = Command::new(trace_cmd)
        .args(["report", "-t", "-i"])
        .arg(&dat)
        .output()
        .unwrap();
    let text = String::from_utf8(report.stdout).unwrap();
    let got: Vec<u64> = events(&text).into_values().flatten().collect();
    let mut want = times.to_vec();
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(got_sorted, want, "{text}");
}

#[test]
fn a_loss_after_the_last_event_or_of_unknown_size_is_reported_too() {
    let Some(trace_cmd) = reader("trace-cmd") else {
        return;
    };
    let (counted, blind) = end_loss_images();
    for (name, image, want) in [
        ("counted", counted, "events=181 exact=1 pages=2 reason=end"),
        ("uncounted", blind, "events=0 exact=0 pages=6 reason=end"),
    ] {
        let image = write_tmp(&format!("end-loss-{name}.bin"), &image);
        let (out, dat) = extract_to(&image, "tracedat", &format!("end-loss-{name}.dat"));
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = run_ok(Command::new(&trace_cmd).args(["report", "-i"]).arg(&dat));
        let text = String::from_utf8(report.stdout).unwrap();
        let lines: Vec<&str> = text.lines().rev().take(2).collect();
        let loss = lines[0]
            .split_once("crashring_loss:")
            .map(|(_, l)| l.trim());
        assert_eq!(loss, Some(want), "{name}: {lines:?}");
        // trace-cmd says a count before the record that follows it.
        assert_eq!(
            lines[1] == "CPU:0 [181 EVENTS DROPPED]",
            name == "counted",
            "{name}: {lines:?}"
        );
    }
}
