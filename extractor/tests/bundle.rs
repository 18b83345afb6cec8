//! `crashring bundle`: the archive holds what its MANIFEST and README say,
//! byte for byte the same each time, with added logs and the kernel's own
//! on the trace's timeline, and its traces open in the real readers.
//! Redaction is in `bundle_redaction.rs`, `check-bundle` against altered
//! archives in `bundle_check.rs`.

mod common;

use common::bundles::*;
use common::{crashring, ftrace_area, jsonl_totals, reader, rich_image, run_ok, write_tmp};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Wall-clock seconds of the rich image's crash (300 µs after its clock's
/// zero, which is 1_795_000_000.123456789 s after the epoch).
const CRASH_SECS: u64 = 1_795_000_000;

#[test]
fn a_bundle_holds_exactly_what_its_manifest_and_readme_say() {
    let image = write_tmp("bundle-rich.bin", &rich_image());
    let (console, timeline) = logs();
    let console_arg = format!("{}:console.txt", console.display());
    let add = [
        "--add-log",
        &console_arg,
        "--add-log",
        timeline.to_str().unwrap(),
    ];
    let (out, archive) = bundle(&image, "rich.tar.gz", &add);
    let err = String::from_utf8_lossy(&out.stderr);
    // The rich image is damaged (a corrupt page): exit 1, as extract.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("logs/console.txt: 3 of 4 lines placed"),
        "{err}"
    );
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let all = entries(&std::fs::read(&archive).unwrap());
    let top = "crash-signage-7-20261118T110640Z-30313233";
    for (path, e) in &all {
        assert!(path.starts_with(top), "{path} outside {top}/");
        assert_eq!(e.mode, if e.dir { 0o700 } else { 0o600 }, "{path}");
        assert_eq!((e.uid, e.mtime), (0, CRASH_SECS), "{path}");
    }
    let (_, files) = bundled(&archive);

    // The manifest checks every file but itself, and nothing else; the
    // README names every file. The CLI says so too.
    let checked = extractor::bundle::check(&std::fs::read(&archive).unwrap()[..]).unwrap();
    assert_eq!(checked.top, top);
    let names: Vec<&str> = checked.files.keys().map(String::as_str).collect();
    assert_eq!(names, files.keys().map(String::as_str).collect::<Vec<_>>());
    assert!(
        names.contains(&"kernel/ctf/user_2") && names.contains(&"logs/console.txt"),
        "{names:?}"
    );
    let manifest = &checked.manifest;
    let readme = &checked.readme;
    let said = crashring(&["check-bundle", archive.to_str().unwrap()]);
    assert_eq!(said.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&said.stdout)
        .contains(&format!("intact: {top}/ with {} files", files.len())));
    sha256sum_agrees(&archive, manifest);
    for want in [
        "kernel 6.12.48+deb12-amd64 on signage-7",
        "Crashed: panic on CPU 1",
        "babeltrace2",
        "ui.perfetto.dev",
        "trace-cmd report",
        "logs/console.txt: 3 of 4 lines placed",
    ] {
        assert!(readme.contains(want), "{want} not in:\n{readme}");
    }

    // What the manifest says of the region agrees with extract: the
    // kernel's figures, and apart from them what the user stream claims.
    let (events, _, lost) = jsonl_totals(&image);
    let region = &manifest["regions"][0];
    let user = &region["user_streams"];
    assert_eq!(user["streams"], 1);
    let both = |key: &str| region[key].as_u64().unwrap() + user[key].as_u64().unwrap();
    assert_eq!(both("recovered") as usize, events);
    assert_eq!(both("lost"), lost);
    let per_stream: u64 = region["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["lost"].as_u64().unwrap())
        .sum();
    assert_eq!(per_stream, lost);
    assert_eq!(region["boot_id"], "30313233343536373839616263646566");
    assert_eq!(
        region["crash"]["time_utc"],
        "2026-11-18T11:06:40.123756789Z"
    );
    assert_eq!(
        region["clock"]["wall_offset_ns"],
        1_795_000_000_123_456_789i64
    );
    assert_eq!(region["damaged"], true);
    assert_eq!(manifest["tool"]["name"], "crashring");
    assert_eq!(manifest["source"]["file"], "bundle-rich.bin");

    // Logs: the console aligned by the two printk lines it shares with
    // the trace; the timeline as it is.
    let console = &manifest["logs"][0];
    assert_eq!(console["name"], "console.txt");
    assert_eq!(console["bracketed_alignment"]["matched_printk_lines"], 2);
    assert_eq!(console["bracketed_alignment"]["offset_ns"], -300_000);
    assert_eq!(console["bracketed_alignment"]["spread_ns"], 0);
    assert_eq!(console["unplaced"], 1);
    assert_eq!(manifest["logs"][1]["placed_by"]["weston_timeline"], 1);
    assert_eq!(
        files["logs/console.txt"].data,
        std::fs::read(logs().0).unwrap()
    );

    // dmesg.txt: every printk line, as dmesg prints them.
    let dmesg = text(&files["dmesg.txt"]);
    let printk = jsonl_lines(&image)
        .iter()
        .filter(|l| l.contains("\"type\":\"printk\""))
        .count();
    assert_eq!(dmesg.lines().count(), printk);
    assert!(
        dmesg
            .lines()
            .all(|l| l.starts_with('[') && l.as_bytes()[13] == b']'),
        "{dmesg}"
    );

    // The Perfetto archive holds one trace and nothing Perfetto cannot
    // parse; the logs are tracks in it.
    let perfetto = entries(&files["perfetto/crash.tar.gz"].data);
    let names: Vec<&str> = perfetto.keys().map(String::as_str).collect();
    assert_eq!(names, ["kernel.pftrace"]);
    let pftrace = &perfetto["kernel.pftrace"].data;
    for track in [
        "log console.txt",
        "log bundle-timeline.json",
        "core_repaint_begin",
        "weston[412]: unrelated console line",
    ] {
        assert!(
            contains(pftrace, track.as_bytes()),
            "{track} not in the trace"
        );
    }
}

/// Checks every file MANIFEST.json lists with coreutils' `sha256sum -c`,
/// as the README tells a recipient to: the manifest's digests are
/// computed and checked by the same crashring code, which would agree
/// with itself whatever hash it computed.
fn sha256sum_agrees(archive: &Path, manifest: &serde_json::Value) {
    let dir = unpack(archive, "bundle-sha256sum");
    let mut list = String::new();
    for f in manifest["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        let size = std::fs::metadata(dir.join(path)).unwrap().len();
        assert_eq!(Some(size), f["size"].as_u64(), "{path}");
        list += &format!("{}  {path}\n", f["sha256"].as_str().unwrap());
    }
    let sums = tmp_path("bundle-sha256sums");
    std::fs::write(&sums, list).unwrap();
    run_ok(
        Command::new("sha256sum")
            .args(["--check", "--strict", "--quiet"])
            .arg(&sums)
            .current_dir(&dir),
    );
}

#[test]
fn the_same_input_gives_the_same_bytes_whatever_the_workers() {
    let image = write_tmp("bundle-same.bin", &rich_image());
    let (a, first) = bundle(&image, "same-1.tar.gz", &[]);
    let (b, second) = bundle(&image, "same-2.tar.gz", &[]);
    assert_eq!(a.status.code(), b.status.code());
    let first = std::fs::read(first).unwrap();
    assert_eq!(first, std::fs::read(second).unwrap());
    // Files are written and compressed side by side: one worker or
    // several, the same archive.
    for workers in ["1", "3"] {
        let out = tmp(&format!("same-{workers}-workers.tar.gz"));
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_crashring"))
            .args(["bundle", image.to_str().unwrap(), "-o"])
            .arg(&out)
            .env("RAYON_NUM_THREADS", workers)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), a.status.code(), "{workers} workers");
        assert_eq!(std::fs::read(&out).unwrap(), first, "{workers} workers");
    }
    // Nothing is left behind beside the output.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".same-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_misspelt_class_or_a_bad_log_is_refused_and_leaves_nothing() {
    let image = write_tmp("bundle-refuse.bin", &rich_image());
    for (args, says) in [
        (
            &["--redact", "prinkt"][..],
            "no event type `prinkt`; the types are: aer, clock, crash, debug, drm_flip,",
        ),
        (
            &["--redact", "drm_flip.nope"][..],
            "`drm_flip` has no field `nope`; its fields are: crtc, seq,",
        ),
        (&["--redact", "not a class"][..], "is not a redaction class"),
        (
            &["--add-log", "/nonexistent/x.log"][..],
            "opening the log /nonexistent/x.log",
        ),
        (
            &["--add-log", "/etc/hostname:.."][..],
            "`..` cannot name a log",
        ),
        (
            &["--add-log", "/etc/hostname:x", "--add-log", "/etc/passwd:x"][..],
            "two logs would both be logs/x",
        ),
    ] {
        let (out, archive) = bundle(&image, "refused.tar.gz", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!archive.exists(), "{args:?} left an archive");
    }
}

#[test]
fn trace_cmd_reads_the_bundled_trace_dat() {
    let Some(tc) = reader("trace-cmd") else {
        return;
    };
    let image = write_tmp("bundle-tc.bin", &rich_image());
    let (_, archive) = bundle(&image, "tc.tar.gz", &[]);
    let top = unpack(&archive, "tc-unpacked");
    let report = run_ok(
        Command::new(tc)
            .args(["report", "-i"])
            .arg(top.join("kernel/trace.dat")),
    );
    let (events, _, _) = jsonl_totals(&image);
    let text = String::from_utf8_lossy(&report.stdout);
    let printed = text
        .lines()
        .filter(|l| l.contains(": ") && !l.contains("EVENTS DROPPED") && !l.starts_with("cpus="))
        .count();
    assert_eq!(printed, events);
}

/// `info --json` and the manifest describe a region with one type: with
/// nothing redacted, each region and the source are the same but for the
/// keys only one of them has.
#[test]
fn info_and_the_manifest_describe_regions_alike() {
    let image = write_tmp("bundle-alike.bin", &rich_image());
    let info = crashring(&["info", "--json", image.to_str().unwrap()]);
    let mut info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let (run, archive) = bundle(&image, "alike.tar.gz", &["--raw-pointers"]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let (_, files) = bundled(&archive);
    let mut manifest: serde_json::Value =
        serde_json::from_str(text(&files["MANIFEST.json"])).unwrap();
    let (info_region, bundle_region) = (&mut info["regions"][0], &mut manifest["regions"][0]);
    let drop = |v: &mut serde_json::Value, keys: &[&str]| {
        for k in keys {
            assert!(
                v.as_object_mut().unwrap().remove(*k).is_some(),
                "{k} missing"
            );
        }
    };
    drop(info_region, &["copies"]);
    for s in info_region["streams"].as_array_mut().unwrap() {
        drop(s, &["pages"]);
    }
    drop(bundle_region, &["clamped_timestamps", "redacted", "files"]);
    assert_eq!(info_region, bundle_region);
    assert_eq!(info_region["crash"]["reason"], "panic");
    assert_eq!(
        info_region["streams"][1]["lost_by_reason"]["unreadable"],
        12
    );
    info["source"]["file"] = manifest["source"]["file"].clone();
    assert_eq!(info["source"], manifest["source"]);
}

#[test]
fn a_persistent_ftrace_buffer_beside_the_region_is_bundled_as_ftrace_text() {
    // The rich image, then at the next page a buffer in the 6.15+ layout.
    let mut mem = rich_image();
    mem.resize(mem.len().next_multiple_of(4096), 0);
    let base = mem.len();
    // Its markers, and a function entry that a symbol map names.
    let mut area = ftrace_area::seed_area(0x0018_0020);
    // 6.15+ saved where it put _text: the seed's TEXT.
    let at = ftrace_area::TEXT;
    area.write(
        1,
        2_000_000 + (5 << 28),
        &ftrace_area::function_entry(8, at + 0x1238, at + 0x2010),
    );
    mem.extend(area.bytes);
    let image = write_tmp("bundle-ftrace.bin", &mem);
    let map = write_tmp("bundle-kallsyms", ftrace_area::KALLSYMS.as_bytes());
    let (out, archive) = bundle(
        &image,
        "bundle-ftrace.tar.gz",
        &["--symbols", map.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    // 1: the rich image's region is damaged on purpose.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "logs/kernel-ftrace-{base:x}.txt: 494 of 494 lines placed"
        )),
        "{err}"
    );
    let (_, files) = bundled(&archive);
    let name = format!("logs/kernel-ftrace-{base:x}.txt");
    let log = text(&files[&name]);
    assert!(
        log.contains("] cpu1 pid 8: print: cpu1 marker 4\n"),
        "{log}"
    );
    assert!(
        log.contains("] cpu1 pid 8: function: f+0x4 <- g+0x10\n"),
        "{log}"
    );
    assert_eq!(
        log.lines().count(),
        std::process::Command::new(env!("CARGO_BIN_EXE_crashring"))
            .args(["ftrace", image.to_str().unwrap()])
            .output()
            .unwrap()
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count()
    );
    let manifest: serde_json::Value = serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
    let listed = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == name.as_str())
        .unwrap();
    assert_eq!(listed["format"], "ftrace text");
    assert!(text(&files["README.txt"]).contains("persistent ftrace buffer"));
    // `info` lists it beside the region.
    let info = crashring(&["info", image.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&info.stdout);
    assert!(
        said.contains(&format!("kernel ftrace buffer at {base:#x}..")),
        "{said}"
    );
}

#[test]
fn an_added_log_is_a_regular_file_never_a_link_or_a_fifo() {
    let image = write_tmp("bundle-log-kinds.bin", &rich_image());
    let dir = tmp_path("bundle-log-kinds");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A log's place in a directory its user can write, the link put
    // there to a file of root's; and a FIFO nobody writes.
    let secret = dir.join("secret");
    std::fs::write(&secret, "root's own\n").unwrap();
    let link = dir.join("kiosk.log");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let fifo = dir.join("fifo.log");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    for (log, says) in [(&link, "symbolic link"), (&fifo, "not a regular file")] {
        let out = tmp_path("bundle-log-kinds.tar.gz");
        let _ = std::fs::remove_file(&out);
        let mut run = Command::new(env!("CARGO_BIN_EXE_crashring"))
            .args([
                "bundle",
                image.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ])
            .args(["--add-log", log.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Opening a FIFO for reading waits for a writer: bounded here.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while run.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                run.kill().unwrap();
                panic!("bundle --add-log {} did not end", log.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let done = run.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(log.to_str().unwrap()),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}
