//! `crashring bundle`: the archive holds what its MANIFEST and README say,
//! byte for byte the same each time, private, redacted, with added logs
//! on the trace's timeline, and its traces open in the real readers.

mod common;

use common::{crashring, jsonl_totals, reader, rich_image, run_ok, write_tmp};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Wall-clock seconds of the rich image's crash (300 µs after its clock's
/// zero, which is 1_795_000_000.123456789 s after the epoch).
const CRASH_SECS: u64 = 1_795_000_000;

struct Entry {
    mode: u32,
    uid: u64,
    mtime: u64,
    dir: bool,
    kind: tar::EntryType,
    link: Option<String>,
    data: Vec<u8>,
}

/// A `.tar.gz`'s entries by path, read with the tar crate.
fn entries(archive: &[u8]) -> BTreeMap<String, Entry> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut out = BTreeMap::new();
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        let path = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        out.insert(
            path,
            Entry {
                mode: h.mode().unwrap(),
                uid: h.uid().unwrap(),
                mtime: h.mtime().unwrap(),
                dir: h.entry_type().is_dir(),
                kind: h.entry_type(),
                link: e.link_name().unwrap().map(|l| l.display().to_string()),
                data,
            },
        );
    }
    out
}

fn tmp(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn bundle(image: &Path, name: &str, extra: &[&str]) -> (Output, PathBuf) {
    let out = tmp(name);
    let mut args = vec![
        "bundle",
        image.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (crashring(&args), out)
}

/// The files of a bundle by their path inside its top directory.
fn bundled(archive: &Path) -> (String, BTreeMap<String, Entry>) {
    let all = entries(&std::fs::read(archive).unwrap());
    let top = all.keys().next().unwrap().trim_end_matches('/').to_string();
    let files = all
        .into_iter()
        .filter(|(_, e)| !e.dir)
        .map(|(p, e)| (p.strip_prefix(&format!("{top}/")).unwrap().to_string(), e))
        .collect();
    (top, files)
}

fn text(e: &Entry) -> &str {
    std::str::from_utf8(&e.data).unwrap()
}

/// A console log whose kernel lines are the trace's printk lines 300 µs
/// late (the printk clock is not the trace's), and a Weston timeline.
fn logs() -> (PathBuf, PathBuf) {
    // printk "message 40" is at 42 us, "message 42" at 44 us.
    let console = "\
[    0.000342] message 40\r
[    0.000344] message 42\r
[    0.000400] weston[412]: unrelated console line\r
no time at all\r
";
    let timeline = "{\"T\":[0,150000],\"N\":\"core_repaint_begin\",\"wo\":7}\n";
    (
        write_tmp("bundle-console.log", console.as_bytes()),
        write_tmp("bundle-timeline.json", timeline.as_bytes()),
    )
}

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

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn jsonl_lines(image: &Path) -> Vec<String> {
    let out = crashring(&["extract", image.to_str().unwrap(), "--format", "jsonl"]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
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

/// Every byte of a bundle's files, the Perfetto archive unpacked.
fn all_bytes(archive: &Path) -> Vec<u8> {
    let (_, files) = bundled(archive);
    let mut all = Vec::new();
    for (path, e) in &files {
        if path.ends_with(".tar.gz") {
            for inner in entries(&e.data).values() {
                all.extend_from_slice(&inner.data);
            }
        } else {
            all.extend_from_slice(&e.data);
        }
    }
    all
}

#[test]
fn kernel_addresses_are_hashed_unless_asked_for() {
    let image = write_tmp("bundle-ptr.bin", &rich_image());
    let (_, hashed) = bundle(&image, "ptr-hashed.tar.gz", &[]);
    let (_, raw) = bundle(&image, "ptr-raw.tar.gz", &["--raw-pointers"]);
    let (hashed, raw) = (all_bytes(&hashed), all_bytes(&raw));
    // In printk text, and as a pointer field (8 little-endian bytes in
    // the CTF streams, hex in trace.dat's and CTF's text-free formats).
    let text = b"ffffffff81230043";
    let field = (0xffff_8880_0000_0002u64).to_le_bytes();
    assert!(contains(&raw, text) && contains(&raw, &field));
    assert!(!contains(&hashed, text) && !contains(&hashed, &field));
    // Same length in text, the kernel's hashed-%p shape.
    let (_, files) = bundled(&tmp_path("ptr-hashed.tar.gz"));
    let dmesg = text_of(&files["dmesg.txt"]);
    let line = dmesg
        .lines()
        .find(|l| l.contains("input: keyboard 67 at "))
        .unwrap();
    let hash = line.rsplit(' ').next().unwrap();
    assert!(hash.len() == 16 && hash.starts_with("00000000"), "{line}");
    let manifest: serde_json::Value = serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
    assert!(
        manifest["regions"][0]["redacted"]["pointers_hashed"]
            .as_u64()
            .unwrap()
            > 20
    );
}

/// Unpacks a bundle with tar(1) into a fresh scratch directory `name`;
/// returns the bundle's top directory there.
fn unpack(archive: &Path, name: &str) -> PathBuf {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    run_ok(
        Command::new("tar")
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(&dir),
    );
    dir.join(bundled(archive).0)
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

fn tmp_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn text_of(e: &Entry) -> String {
    String::from_utf8(e.data.clone()).unwrap()
}

#[test]
fn redaction_drops_and_hashes_what_it_is_told_in_every_file() {
    let image = write_tmp("bundle-redact.bin", &rich_image());
    let args = [
        "--redact",
        "printk=input:",
        "--redact",
        "drm_flip.comm",
        "--redact",
        "irq_handler_entry",
    ];
    let (out, archive) = bundle(&image, "redacted.tar.gz", &args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = all_bytes(&archive);
    assert!(!contains(&all, b"input: keyboard"));
    assert!(!contains(&all, b"weston\0"), "a hashed comm is left");
    assert!(
        !contains(&all, b"timer"),
        "a dropped irq_handler_entry is left"
    );
    let (_, files) = bundled(&archive);
    let manifest: serde_json::Value = serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
    let lines = jsonl_lines(&image);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count() as u64;
    let counts: Vec<u64> = manifest["regions"][0]["redacted"]["per_class"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(
        counts,
        [
            count("input: keyboard"),
            count("\"type\":\"drm_flip\""),
            count("\"type\":\"irq_handler_entry\"")
        ]
    );
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    // Redaction is not loss: the manifest's losses are extract's.
    let (events, _, lost) = jsonl_totals(&image);
    let region = &manifest["regions"][0];
    let user = &region["user_streams"];
    let both = |key: &str| region[key].as_u64().unwrap() + user[key].as_u64().unwrap();
    assert_eq!(both("lost"), lost);
    assert_eq!(both("recovered"), events as u64 - counts[0] - counts[2]);
    assert_eq!(manifest["redaction"]["classes"][0], "printk=input:");

    // The redacted CTF still reads, with the same losses.
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    let top = unpack(&archive, "redacted-unpacked");
    let read = run_ok(Command::new(&bt).arg(top.join("kernel/ctf")));
    let printed = String::from_utf8(read.stdout).unwrap();
    assert_eq!(
        printed.lines().filter(|l| l.starts_with('[')).count() as u64,
        both("recovered")
    );
    assert!(
        printed.contains("comm = \"h:"),
        "the hashed comm is not shown"
    );
}

#[test]
fn a_misspelt_class_or_a_bad_log_is_refused_and_leaves_nothing() {
    let image = write_tmp("bundle-refuse.bin", &rich_image());
    for (args, says) in [
        (
            &["--redact", "prinkt"][..],
            "no event type `prinkt`; the types are: clock, crash, debug, drm_flip,",
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

/// The archive's entries again, after `edit`, as a `.tar.gz`.
fn repack(archive: &Path, edit: impl Fn(&mut Vec<(String, Entry)>)) -> Vec<u8> {
    let mut list: Vec<(String, Entry)> = entries(&std::fs::read(archive).unwrap())
        .into_iter()
        .collect();
    edit(&mut list);
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, e) in &list {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(e.kind);
        h.set_size(e.data.len() as u64);
        h.set_mode(e.mode);
        if let Some(link) = &e.link {
            h.set_link_name(link).unwrap();
        }
        // The name as given, `..` included (set_path would refuse it).
        let name = &mut h.as_old_mut().name;
        assert!(path.len() < name.len(), "{path}");
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        tar.append(&h, &e.data[..]).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

#[test]
fn check_bundle_names_what_was_changed() {
    let image = write_tmp("bundle-tamper.bin", &rich_image());
    let (_, archive) = bundle(&image, "tamper.tar.gz", &[]);
    let check = |bytes: &[u8], name: &str| {
        let path = write_tmp(name, bytes);
        crashring(&["check-bundle", path.to_str().unwrap()])
    };
    let flipped = repack(&archive, |list| {
        let dmesg = list
            .iter_mut()
            .find(|(p, _)| p.ends_with("/dmesg.txt"))
            .unwrap();
        dmesg.1.data[3] ^= 1;
    });
    let out = check(&flipped, "tamper-1.tar.gz");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NOT intact: dmesg.txt: SHA-256"),
        "{out:?}"
    );

    let extra = repack(&archive, |list| {
        let top = list[0].0.trim_end_matches('/').to_string();
        let e = Entry {
            mode: 0o600,
            uid: 0,
            mtime: 0,
            dir: false,
            kind: tar::EntryType::Regular,
            link: None,
            data: b"hi".to_vec(),
        };
        list.push((format!("{top}/smuggled.txt"), e));
    });
    let out = check(&extra, "tamper-2.tar.gz");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("smuggled.txt: in the archive, not in MANIFEST.json"),
        "{out:?}"
    );

    let whole = std::fs::read(&archive).unwrap();
    let out = check(&whole[..whole.len() / 2], "tamper-3.tar.gz");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reading"),
        "{out:?}"
    );
}

#[test]
fn a_bundle_is_never_written_through_a_planted_link_and_ends_private() {
    use std::os::unix::fs::symlink;
    let image = write_tmp("bundle-links.bin", &rich_image());
    let dir = tmp("bundle-links");
    std::fs::create_dir_all(&dir).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    let victim_dir = dir.join("victim-dir");
    std::fs::create_dir(&victim_dir).unwrap();
    let image = image.to_str().unwrap();

    // At the output path: refused, the link and its target as they were.
    let out = dir.join("linked.tar.gz");
    symlink(&victim, &out).unwrap();
    let run = crashring(&["bundle", image, "-o", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    assert!(std::fs::read(&victim).unwrap() == b"untouched");

    // At every name a staging directory or half-written archive could
    // have that is derived from the output's name and a process id: the
    // next few hundred pids are planted, so a predictable name is caught.
    let out = dir.join("planted.tar.gz");
    let last_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last_pid..last_pid + 400 {
        symlink(&victim, dir.join(format!("planted.tar.gz.{pid}.partial"))).unwrap();
        symlink(
            &victim_dir,
            dir.join(format!(".planted.tar.gz.{pid}.staging")),
        )
        .unwrap();
    }
    // An existing 0644 archive is replaced by a private one.
    std::fs::write(&out, b"old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = crashring(&["bundle", image, "-o", out.to_str().unwrap()]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        std::fs::read(&victim).unwrap() == b"untouched",
        "a planted link's target was written"
    );
    assert_eq!(std::fs::read_dir(&victim_dir).unwrap().count(), 0);
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert!(extractor::bundle::check(std::fs::File::open(&out).unwrap()).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The bundle with one more entry, `rel` under its top directory, of
/// type `kind` (a link to `link`), that MANIFEST.json and README.txt list
/// as they would a file, with its size and SHA-256: only the entry's type
/// or its path can give it away.
fn smuggle(archive: &Path, rel: &str, kind: tar::EntryType, link: Option<&str>) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    repack(archive, |list| {
        let top = list[0].0.trim_end_matches('/').to_string();
        let sha = |data: &[u8]| -> String {
            Sha256::digest(data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        let at = |name: &str| list.iter().position(|(p, _)| p.ends_with(name)).unwrap();
        let (readme, manifest) = (at("/README.txt"), at("/MANIFEST.json"));
        let readme = &mut list[readme].1.data;
        readme.extend_from_slice(format!("{rel}\n    Smuggled.\n").as_bytes());
        let readme = (readme.len(), sha(readme));
        let manifest = &mut list[manifest].1.data;
        let mut m: serde_json::Value = serde_json::from_slice(manifest).unwrap();
        let files = m["files"].as_array_mut().unwrap();
        for f in files.iter_mut().filter(|f| f["path"] == "README.txt") {
            f["size"] = readme.0.into();
            f["sha256"] = readme.1.clone().into();
        }
        files.push(serde_json::json!({ "path": rel, "size": 0, "sha256": sha(b"") }));
        *manifest = serde_json::to_vec_pretty(&m).unwrap();
        let e = Entry {
            mode: 0o600,
            uid: 0,
            mtime: 0,
            dir: false,
            kind,
            link: link.map(String::from),
            data: Vec::new(),
        };
        list.push((format!("{top}/{rel}"), e));
    })
}

#[test]
fn check_bundle_refuses_links_and_paths_that_leave_the_bundle() {
    let image = write_tmp("bundle-smuggle.bin", &rich_image());
    let (_, archive) = bundle(&image, "smuggle.tar.gz", &[]);
    // The crafted archives are otherwise intact: a plain file smuggled
    // the same way passes.
    let plain = smuggle(&archive, "logs/plain", tar::EntryType::Regular, None);
    let path = write_tmp("smuggle-0.tar.gz", &plain);
    let out = crashring(&["check-bundle", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for (n, (rel, kind, link, says)) in [
        (
            "logs/evil",
            tar::EntryType::Symlink,
            Some("/etc/shadow"),
            "logs/evil: a symbolic link",
        ),
        (
            "logs/hard",
            tar::EntryType::Link,
            Some("/etc/shadow"),
            "logs/hard: a hard link",
        ),
        (
            "../x",
            tar::EntryType::Regular,
            None,
            "../x: a `..` component",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let crafted = smuggle(&archive, rel, kind, link);
        let path = write_tmp(&format!("smuggle-{}.tar.gz", n + 1), &crafted);
        let out = crashring(&["check-bundle", path.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{rel}: {said}");
        assert!(
            said.contains("NOT intact") && said.contains(says),
            "{rel}: {said}"
        );
    }
}

/// Every file of a bundle unpacked with tar(1), archives inside it
/// unpacked too, by path; the bytes of each.
fn unpacked_files(archive: &Path, name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
                continue;
            }
            if path.to_string_lossy().ends_with(".tar.gz") {
                let inner = path.with_extension("unpacked");
                std::fs::create_dir(&inner).unwrap();
                run_ok(
                    Command::new("tar")
                        .arg("-xzf")
                        .arg(&path)
                        .arg("-C")
                        .arg(&inner),
                );
                walk(&inner, out);
            }
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    let top = unpack(archive, name);
    let mut out = Vec::new();
    walk(&top, &mut out);
    out
}

#[test]
fn added_logs_are_redacted_like_the_trace_in_every_file() {
    let image = write_tmp("bundle-log-redact.bin", &rich_image());
    // A console log with an input-device line and kernel addresses, an
    // oops's code bytes, and a journal entry from the kernel.
    let console = "\
[    0.000342] message 40
[    0.000343] input: secret-keyboard as /devices/platform/i8042/serio0/input/input3
[    0.000344] message 42
[    0.000345] BUG: unable to handle page fault for address: ffffffff8badf00d
[    0.000346] Code: 48 c7 c7 a0 12 34 82 e8 <0f> 0b
{\"MESSAGE\":\"input: journal-mouse\",\"_TRANSPORT\":\"kernel\",\"__REALTIME_TIMESTAMP\":\"1795000000123800\"}
weston: client buffer at 0xffff888012340000
";
    let log = write_tmp("bundle-log-redact.log", console.as_bytes());
    let add = format!("{}:console.txt", log.display());
    let secrets = [
        "ffffffff8badf00d",
        "ffff888012340000",
        "secret-keyboard",
        "journal-mouse",
        "a0 12 34 82",
    ];
    let (out, archive) = bundle(
        &image,
        "log-redact.tar.gz",
        &["--add-log", &add, "--redact", "printk=input:"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = unpacked_files(&archive, "log-redact-unpacked");
    let names: Vec<String> = files
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"kernel.pftrace".into()) && names.contains(&"console.txt".into()),
        "{names:?}"
    );
    for (path, bytes) in &files {
        for secret in secrets {
            assert!(
                !contains(bytes, secret.as_bytes()),
                "{secret} is in {}",
                path.display()
            );
        }
    }
    // What is not secret stays, and the console is still aligned by the
    // printk lines it shares with the trace.
    let (_, copy) = files
        .iter()
        .find(|(p, _)| p.ends_with("logs/console.txt"))
        .unwrap();
    let copy = String::from_utf8_lossy(copy);
    assert!(copy.contains("[    0.000344] message 42\n"), "{copy}");
    assert!(copy.contains("Code: "), "{copy}");
    let (_, manifest) = files
        .iter()
        .find(|(p, _)| p.ends_with("MANIFEST.json"))
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(manifest).unwrap();
    let log = &manifest["logs"][0];
    assert_eq!(log["bracketed_alignment"]["matched_printk_lines"], 2);
    assert_eq!(log["redacted"]["per_class"][0], 2, "{log}");
    assert_eq!(log["redacted"]["pointers_hashed"], 2, "{log}");
    assert_eq!(log["redacted"]["code_lines_masked"], 1, "{log}");

    // With --raw-pointers and no class, the log's addresses and code
    // bytes are left as they are, in the copy and in the Perfetto trace.
    let (_, archive) = bundle(
        &image,
        "log-raw.tar.gz",
        &["--add-log", &add, "--raw-pointers"],
    );
    let files = unpacked_files(&archive, "log-raw-unpacked");
    for name in ["console.txt", "kernel.pftrace"] {
        let (_, bytes) = files.iter().find(|(p, _)| p.ends_with(name)).unwrap();
        for secret in ["ffffffff8badf00d", "secret-keyboard"] {
            assert!(contains(bytes, secret.as_bytes()), "{secret} not in {name}");
        }
    }
}

/// A region of `word_size` whose events hold the kernel address `addr`
/// in every kind of place: a printk line, an oops `Code:` line whose
/// bytes hold it as an immediate, and a custom event's word-sized
/// integer, `u64` and binary fields.
fn addresses_image(word_size: u8, addr: u64) -> Vec<u8> {
    use pstore_ring::endian::Endian;
    use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let f = |name, kind| FieldDef { name, kind };
    let word = if word_size == 4 {
        FieldKind::U32
    } else {
        FieldKind::U64
    };
    let fields = [
        f("ip", word),
        f("wide", FieldKind::U64),
        f("raw", FieldKind::Bytes),
    ];
    let custom = [EventDef {
        id: 40,
        name: "probe",
        fields: &fields,
    }];
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        word_size,
        endian: Endian::Little,
        page_size: 512,
        pages_per_stream: Some(4),
        streams: &specs,
        custom_events: &custom,
        hostname: "addr",
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let n = usize::from(word_size);
    let le = &addr.to_le_bytes()[..n];
    let code: Vec<String> = le.iter().map(|b| format!("{b:02x}")).collect();
    let lines = [
        format!("BUG: unable to handle page fault at {addr:0w$x}", w = n * 2),
        format!("Code: 48 c7 c7 {} e8 <0f> 0b", code.join(" ")),
    ];
    for (i, text) in lines.iter().enumerate() {
        let v = [
            Value::Unsigned(1),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(i as u64),
            Value::Str(text.as_bytes()),
        ];
        ws[0].write_event(1_000 + i as u64, printk, &v).unwrap();
    }
    let mut raw = vec![0x5a];
    raw.extend_from_slice(le);
    let v = [
        Value::Unsigned(addr),
        Value::Unsigned(addr),
        Value::Bytes(&raw),
    ];
    ws[0].write_event(2_000, &custom[0], &v).unwrap();
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    mem
}

#[test]
fn addresses_are_hashed_in_every_field_kind_and_word_size() {
    for (word_size, addr) in [(8u8, 0xffff_ffff_8123_4567u64), (4, 0xc123_4567)] {
        let name = format!("bundle-addr-{word_size}");
        let image = write_tmp(&format!("{name}.bin"), &addresses_image(word_size, addr));
        let n = usize::from(word_size);
        let text = format!("{addr:0w$x}", w = n * 2);
        let le = addr.to_le_bytes()[..n].to_vec();
        let code: Vec<String> = le.iter().map(|b| format!("{b:02x}")).collect();
        let code = code.join(" ");
        let (out, archive) = bundle(&image, &format!("{name}.tar.gz"), &[]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let all = all_bytes(&archive);
        for (what, secret) in [
            ("as text", text.as_bytes()),
            ("as code bytes", code.as_bytes()),
            ("as a binary word", &le[..]),
        ] {
            assert!(!contains(&all, secret), "{word_size}-byte words: {what}");
        }
        let (_, files) = bundled(&archive);
        let dmesg = text_of(&files["dmesg.txt"]);
        assert!(dmesg.contains("Code: xx xx xx "), "{dmesg}");
        let (out, archive) = bundle(&image, &format!("{name}-raw.tar.gz"), &["--raw-pointers"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let all = all_bytes(&archive);
        assert!(contains(&all, text.as_bytes()) && contains(&all, code.as_bytes()));
    }
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
    mem.extend(common::ftrace_area::seed(0x0018_0020));
    let image = write_tmp("bundle-ftrace.bin", &mem);
    let (out, archive) = bundle(&image, "bundle-ftrace.tar.gz", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    // 1: the rich image's region is damaged on purpose.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "logs/kernel-ftrace-{base:x}.txt: 493 of 493 lines placed"
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
