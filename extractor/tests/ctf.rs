//! `crashring extract --format ctf` read back by babeltrace2, the
//! reference CTF reader.

mod common;

use common::{
    crashring, end_loss_images, extract_to, jsonl_totals, markers_image, one_cpu_region, reader,
    rich_image, run_ok, write_tmp,
};
use std::path::Path;
use std::process::Command;

/// A fresh directory for an output under the test's scratch space.
fn tmp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The sum of N over babeltrace2's "discarded N events" warnings, and how
/// many packets it says were discarded.
fn discarded(warnings: &str) -> (u64, u64) {
    let count = |what: &str| -> u64 {
        warnings
            .lines()
            .filter_map(|l| l.strip_prefix("WARNING: Tracer discarded "))
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, rest)| rest.starts_with(what))
            .map(|(n, _)| n.parse::<u64>().unwrap())
            .sum()
    };
    (count("event"), count("packet"))
}

#[test]
fn babeltrace2_reads_every_event_and_every_loss() {
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    let image = write_tmp("rich-ctf.bin", &rich_image());
    let (out, dir) = extract_to(&image, "ctf", "rich-ctf");
    let err = String::from_utf8_lossy(&out.stderr);
    // The corrupt page is damage; the backwards page is clamped, and said.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("events went back in time"), "{err}");

    let read = Command::new(&bt).arg(&dir).output().unwrap();
    let text = String::from_utf8(read.stdout).unwrap();
    let warnings = String::from_utf8(read.stderr).unwrap();
    assert!(read.status.success(), "babeltrace2 failed: {warnings}");
    let (events, _, lost) = jsonl_totals(&image);
    assert!(events > 150 && lost > 0, "{events} events, {lost} lost");
    assert_eq!(text.lines().filter(|l| l.starts_with('[')).count(), events);
    assert_eq!(discarded(&warnings), (lost, 1), "{warnings}");

    // Every field kind, a keyword for a name, strings with escapes.
    let flip = text.lines().find(|l| l.contains("drm_flip:")).unwrap();
    for want in [
        "{ pid = 412, stream_index = 2 }",
        "crtc = 51",
        "comm = \"weston\"",
        r#"msg = "flip \"done\"\n""#,
        "blob_length = 3, blob = [ [0] = 222, [1] = 173,",
        "string = 7 }",
    ] {
        assert!(flip.contains(want), "{want} not in {flip}");
    }
    let crash = text.lines().find(|l| l.contains(" crash: ")).unwrap();
    assert!(crash.contains("{ cpu_id = 1 }"), "{crash}");

    // babeltrace2 writes what it read back out as CTF and reads that too.
    let again = dir.with_file_name("rich-ctf-rewritten");
    let _ = std::fs::remove_dir_all(&again);
    run_ok(
        Command::new(&bt)
            .arg(&dir)
            .args(["-o", "ctf", "-w"])
            .arg(&again),
    );
    let reread = Command::new(&bt).arg(&again).output().unwrap();
    let relines = String::from_utf8(reread.stdout).unwrap();
    assert_eq!(
        relines.lines().filter(|l| l.starts_with('[')).count(),
        events
    );
}

#[test]
fn a_time_past_what_the_clock_can_hold_costs_its_event_only() {
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    // babeltrace2 places times as signed 64-bit nanoseconds: 2^63 would
    // make it refuse the whole trace.
    let image = write_tmp("ceiling-ctf.bin", &markers_image(&[1_000, 2_000, 1 << 63]));
    let (out, dir) = extract_to(&image, "ctf", "ceiling-ctf");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(": 1 events went back in time (or past 2^63 ns"),
        "{err}"
    );
    let read = Command::new(&bt).arg(&dir).output().unwrap();
    let warnings = String::from_utf8_lossy(&read.stderr);
    assert!(read.status.success(), "babeltrace2 failed: {warnings}");
    let text = String::from_utf8(read.stdout).unwrap();
    let times: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once(']').map(|(t, _)| t))
        .collect();
    assert_eq!(
        times,
        [
            "00:00:00.000001000",
            "00:00:00.000002000",
            "00:00:00.000002000",
        ],
        "{text}"
    );
}

#[test]
fn pages_lost_after_the_last_read_are_discarded_packets() {
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    let (counted, blind) = end_loss_images();
    for (name, image, want) in [("counted", counted, (181, 2)), ("blind", blind, (0, 6))] {
        let got = ctf_discarded(&bt, &format!("end-loss-{name}"), &image, &[]);
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_loss_between_pages_is_no_end_loss_when_later_pages_are_left_out() {
    use pstore_ring::schema::{self, Value};
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    // Markers on the first pages, IRQ entries on the rest, one of whose
    // pages is corrupt: with --type marker, the loss between pages comes
    // after the last page with an event shown, and is said by the gap in
    // packet_seq_num alone.
    let marker = schema::builtin(schema::EVENT_MARKER).unwrap();
    let irq = schema::builtin(schema::EVENT_IRQ_ENTRY).unwrap();
    let mut mem = one_cpu_region(|w| {
        for i in 0..2000u64 {
            let ts = 1_000 + i * 1_000;
            if i < 150 {
                let v = [Value::Unsigned(1), Value::Chars(b"init"), Value::Str(b"m")];
                w.write_event(ts, marker, &v).unwrap();
            } else {
                w.write_event(ts, irq, &[Value::Unsigned(11), Value::Str(b"timer")])
                    .unwrap();
            }
        }
        w.close();
    });
    // The fourth page from the last holding the page magic.
    let pages: Vec<usize> = (0..mem.len())
        .step_by(4096)
        .filter(|&at| mem[at..at + 4] == 0x4750_5243u32.to_le_bytes())
        .collect();
    assert!(pages.len() > 6, "{pages:?}");
    let at = pages[pages.len() - 4];
    mem[at + 100] ^= 0xff;
    let (_, packets) = ctf_discarded(&bt, "mid-loss", &mem, &["--type", "marker"]);
    assert_eq!(packets, 1);
}

/// `bytes` extracted as CTF (with `args`), which babeltrace2 must read:
/// the events and packets it says were discarded. Recovered with damage,
/// as every image here is.
fn ctf_discarded(bt: &Path, name: &str, bytes: &[u8], args: &[&str]) -> (u64, u64) {
    let image = write_tmp(&format!("{name}.bin"), bytes);
    let dir = tmp_dir(&format!("{name}-ctf"));
    let mut all = vec!["extract", image.to_str().unwrap(), "--format", "ctf"];
    all.extend(args);
    all.extend(["-o", dir.to_str().unwrap()]);
    let out = crashring(&all);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let read = Command::new(bt).arg(&dir).output().unwrap();
    let warnings = String::from_utf8_lossy(&read.stderr);
    assert!(read.status.success(), "{name}: {warnings}");
    discarded(&warnings)
}

#[test]
fn the_same_input_gives_the_same_bytes_in_private_files() {
    use std::os::unix::fs::PermissionsExt;
    let image = write_tmp("rich-ctf-twice.bin", &rich_image());
    let (_, a) = extract_to(&image, "ctf", "rich-ctf-a");
    let (_, b) = extract_to(&image, "ctf", "rich-ctf-b");
    let mut names: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["kernel_0", "kernel_1", "metadata", "user_2"]);
    for name in names {
        let (fa, fb) = (a.join(&name), b.join(&name));
        assert_eq!(std::fs::read(&fa).unwrap(), std::fs::read(&fb).unwrap());
        let mode = std::fs::metadata(&fa).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", fa.display());
    }
    let metadata = std::fs::read_to_string(a.join("metadata")).unwrap();
    assert!(metadata.starts_with("/* CTF 1.8 */\n"));
    for want in [
        "hostname = \"signage-7\";",
        "domain = \"kernel\";",
        "kernel_release = \"6.12.48+deb12-amd64\";",
        "boot_id = \"30313233343536373839616263646566\";",
        "crash_reason = \"panic\";",
        "offset_s = 1795000000;",
        "offset = 123456789;",
    ] {
        assert!(metadata.contains(want), "{want} not in the metadata");
    }
}

#[test]
fn a_second_run_into_the_same_directory_leaves_no_stream_of_the_first() {
    let image = write_tmp("rich-ctf-again.bin", &rich_image());
    let (_, dir) = extract_to(&image, "ctf", "rich-ctf-again");
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert!(listing(&dir).len() > 2, "{:?}", listing(&dir));
    // Someone else's files stay, even named alike.
    for mine in [
        "notes.txt",
        "kernel_notes.txt",
        "user_1.bak",
        "kernel_2_lane",
    ] {
        std::fs::write(dir.join(mine), "mine").unwrap();
    }
    let again = crashring(&[
        "extract",
        image.to_str().unwrap(),
        "--format",
        "ctf",
        "--cpu",
        "0",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(
        listing(&dir),
        [
            "kernel_0",
            "kernel_2_lane",
            "kernel_notes.txt",
            "metadata",
            "notes.txt",
            "user_1.bak"
        ]
    );
}

#[test]
fn ctf_needs_a_directory() {
    let image = write_tmp("rich-ctf-nodir.bin", &rich_image());
    let out = crashring(&["extract", image.to_str().unwrap(), "--format", "ctf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o DIR"));
}
