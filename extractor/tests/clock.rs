//! A wall clock stepped while recording (NTP, `date -s`): every wall time
//! crashring reports uses the offset in effect at that time, the `clock`
//! event's after the step, not the header's.

mod common;

use common::{crashring, extract_to, write_tmp};
use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED};
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::path::PathBuf;

const SEC: u64 = 1_000_000_000;
/// 2023-11-14T22:13:20Z at the clock's zero, when the region is formatted.
const BOOT_OFFSET: i64 = 1_700_000_000_000_000_000;
/// At 5 s the wall clock is stepped forward one hour.
const STEP_AT: u64 = 5 * SEC;
const STEPPED_OFFSET: i64 = BOOT_OFFSET + 3_600_000_000_000;
const CRASH_AT: u64 = 10 * SEC;

/// Two CPUs: printk lines on CPU 0 either side of the step, the `clock`
/// event and the crash on CPU 1.
fn stepped_image() -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size: 1024,
        streams: &specs,
        boot_id: *b"0123456789abcdef",
        wall_offset_ns: BOOT_OFFSET,
        hostname: "clockhost",
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    for (i, ts) in [1, 2, 6, 8].into_iter().enumerate() {
        let text = format!("line {i}");
        let v = [
            Value::Unsigned(6),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(i as u64 + 1),
            Value::Str(text.as_bytes()),
        ];
        ws[0].write_event(ts * SEC, printk, &v).unwrap();
    }
    let clock = schema::builtin(schema::EVENT_CLOCK).unwrap();
    ws[1]
        .write_event(STEP_AT, clock, &[Value::Signed(STEPPED_OFFSET)])
        .unwrap();
    let crash = schema::builtin(schema::EVENT_CRASH).unwrap();
    let msg = b"Kernel panic - not syncing: test";
    ws[1]
        .write_event(
            CRASH_AT,
            crash,
            &[Value::Unsigned(1), Value::Unsigned(1), Value::Str(msg)],
        )
        .unwrap();
    region.control.set_state(
        STATE_CRASHED,
        REASON_PANIC,
        CRASH_AT,
        1,
        "Kernel panic - not syncing: test",
    );
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    mem
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn info_gives_the_crash_time_with_the_offset_after_the_step() {
    let image = write_tmp("clock-info.bin", &stepped_image());
    let info = json(&crashring(&["info", "--json", image.to_str().unwrap()]));
    let crash = &info["regions"][0]["crash"];
    assert_eq!(crash["time_ns"], CRASH_AT);
    assert_eq!(crash["time_utc"], "2023-11-14T23:13:30.000000000Z");
    let text = crashring(&["info", image.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("crash time (wall clock): 2023-11-14T23:13:30.000000000Z"),
        "{text}"
    );
}

#[test]
fn a_bundle_is_named_and_dated_with_the_offset_after_the_step() {
    let image = write_tmp("clock-bundle.bin", &stepped_image());
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("clock-bundle.tar.gz");
    let _ = std::fs::remove_file(&out);
    let run = crashring(&[
        "bundle",
        image.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(&out).unwrap(),
    ));
    let mut manifest = None;
    let mut readme = None;
    let mut top = None;
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        if top.is_none() {
            top = Some(path.trim_end_matches('/').to_string());
            assert_eq!(e.header().mtime().unwrap(), 1_700_003_610);
        }
        let mut text = String::new();
        if path.ends_with("/MANIFEST.json") {
            std::io::Read::read_to_string(&mut e, &mut text).unwrap();
            manifest = Some(text);
        } else if path.ends_with("/README.txt") {
            std::io::Read::read_to_string(&mut e, &mut text).unwrap();
            readme = Some(text);
        }
    }
    assert_eq!(
        top.as_deref(),
        Some("crash-clockhost-20231114T231330Z-30313233")
    );
    let manifest: serde_json::Value = serde_json::from_str(&manifest.unwrap()).unwrap();
    let region = &manifest["regions"][0];
    assert_eq!(
        region["crash"]["time_utc"],
        "2023-11-14T23:13:30.000000000Z"
    );
    assert_eq!(region["clock"]["wall_offset_ns"], BOOT_OFFSET);
    assert_eq!(
        region["clock"]["created_utc"],
        "2023-11-14T22:13:20.000000000Z"
    );
    assert_eq!(
        region["clock"]["steps"],
        serde_json::json!([{
            "ns": STEP_AT,
            "wall_offset_ns": STEPPED_OFFSET,
            "utc": "2023-11-14T23:13:25.000000000Z",
        }])
    );
    let readme = readme.unwrap();
    assert!(
        readme.contains("s after boot, 2023-11-14T23:13:30.000000000Z"),
        "{readme}"
    );
}

#[test]
fn ctf_takes_the_offset_in_effect_at_the_crash() {
    let image = write_tmp("clock-ctf.bin", &stepped_image());
    let (out, dir) = extract_to(&image, "ctf", "clock-ctf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(
        metadata.contains("\toffset_s = 1700003600;\n\toffset = 0;\n"),
        "{metadata}"
    );
    assert!(metadata.contains("\tclock_steps = 1;\n"), "{metadata}");
}

/// Journal entries of another boot carry only wall-clock times: those
/// written after the step are placed with the offset after it.
#[test]
fn wall_clock_log_lines_land_on_the_monotonic_time_they_were_written_at() {
    let mem = stepped_image();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode_paged();
    let clock = extractor::bundle::logs::Clock::new(
        &region,
        trace.streams.iter().flat_map(|s| s.events()),
        region.wall_clock_of_pages(&trace),
    );
    let us = |wall_ns: i64| wall_ns / 1_000;
    let log = format!(
        "{{\"MESSAGE\":\"before\",\"_BOOT_ID\":\"ff\",\"__REALTIME_TIMESTAMP\":\"{}\"}}\n\
         {{\"MESSAGE\":\"after\",\"_BOOT_ID\":\"ff\",\"__REALTIME_TIMESTAMP\":\"{}\"}}\n",
        us(BOOT_OFFSET + 2 * SEC as i64),
        us(STEPPED_OFFSET + 8 * SEC as i64),
    );
    let placed = clock.place("journal", log.as_bytes()).unwrap();
    assert_eq!(placed.placement.journal_realtime, 2);
    let got: Vec<(u64, &str)> = placed
        .placed
        .iter()
        .map(|(t, s)| (*t, s.as_str()))
        .collect();
    assert_eq!(got, [(2 * SEC, "before"), (8 * SEC, "after")]);
}

/// More steps than the clock keeps: `info --json` says how many it left
/// out and the offset the newest of them set, which holds before the
/// oldest kept (and which `export` takes as its clock's base).
#[test]
fn steps_left_out_are_counted_and_the_newest_of_them_is_in_effect() {
    let n = pstore_ring::read::MAX_CLOCK_STEPS as u64 + 10;
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        wall_offset_ns: BOOT_OFFSET,
        ..Default::default()
    };
    let mut mem = vec![0u8; (n as usize * 12 / 4000 + 8) * 4096];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let clock = schema::builtin(schema::EVENT_CLOCK).unwrap();
    let mut cpu0 = region.streams.next().unwrap();
    for i in 0..n {
        cpu0.write_event(i, clock, &[Value::Signed(BOOT_OFFSET + i as i64)])
            .unwrap();
    }
    cpu0.close();
    let image = write_tmp("clock-flood.bin", &mem);
    // The steps left out are a diagnostic: `info` exits 1.
    let out = crashring(&["info", "--json", image.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let clock = &info["regions"][0]["clock"];
    assert_eq!(clock["steps_ignored"], 10);
    assert_eq!(clock["offset_before_steps_ns"], BOOT_OFFSET + 9);
    assert_eq!(clock["wall_offset_ns"], BOOT_OFFSET);
    assert_eq!(clock["steps"][0]["ns"], 10);
}
