//! What a newcomer sees of a region laid out as the kernel module lays
//! one out (issue 32, item 20): 2 CPUs of 5 nesting lanes and a pool of
//! free user streams, only lane 0 holding events. `info`, the bundle's
//! README and file list, the CTF directory and the Perfetto trace show
//! the streams that hold events and count the empty ones in one line;
//! `info --pages` and `--json` keep every stream; a region read from a
//! copy of itself claims no physical address.

mod common;

use common::{
    crashring, extract_to, image, lanes_image, reader, run_ok, write_tmp, LANES_CPUS,
    LANES_PER_CPU, LANES_POOL,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every stream of [`lanes_image`].
const STREAMS: usize = LANES_CPUS as usize * LANES_PER_CPU as usize + LANES_POOL;

/// What `info --pages` and `--json` name and the rest leave out.
const EMPTY: &str = "10 empty streams (8 nesting lanes, 2 free user streams)";

fn stdout(args: &[&str]) -> String {
    let out = crashring(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The stream lines of `info`'s text: `  LABEL: N events, ...`.
fn stream_labels(info: &str) -> Vec<&str> {
    info.lines()
        .filter(|l| l.contains(" events, "))
        .filter_map(|l| l.trim().split_once(": ").map(|(label, _)| label))
        .collect()
}

#[test]
fn info_lists_the_streams_with_events_and_counts_the_rest() {
    let image = write_tmp("newcomer-info.bin", &lanes_image());
    let path = image.to_str().unwrap();
    let info = stdout(&["info", path]);
    assert_eq!(stream_labels(&info), ["cpu0", "cpu1"], "{info}");
    assert!(
        info.contains(&format!("\n  + {EMPTY}; --pages lists them\n")),
        "{info}"
    );
    // --pages lists every stream, and says nothing is left out.
    let pages = stdout(&["info", path, "--pages"]);
    let mut all: Vec<String> = (0..LANES_CPUS)
        .flat_map(|c| {
            (0..LANES_PER_CPU).map(move |l| match l {
                0 => format!("cpu{c}"),
                _ => format!("cpu{c}.lane{l}"),
            })
        })
        .collect();
    all.extend((0..LANES_POOL).map(|i| format!("user:#{}", STREAMS - LANES_POOL + i)));
    assert_eq!(stream_labels(&pages), all, "{pages}");
    assert!(!pages.contains("empty streams"), "{pages}");
    // So does the JSON, for machines.
    let json: serde_json::Value = serde_json::from_str(&stdout(&["info", path, "--json"])).unwrap();
    let streams = json["regions"][0]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), STREAMS);
}

#[test]
fn a_region_copy_claims_no_physical_address() {
    // A raw file that starts with the region (/sys/kernel/crashring/previous).
    let copy = write_tmp("previous", &lanes_image());
    let info = stdout(&["info", copy.to_str().unwrap()]);
    let want = format!(
        "region 0, read from {} (a copy of the region; its physical address is not known from the file):",
        copy.display()
    );
    assert!(info.contains(&want), "{info}");
    assert!(!info.contains("physical address 0x0"), "{info}");
    // A memory image: byte N is physical address N.
    let memory = write_tmp("newcomer-memory.raw", &image(0x3000, false));
    let info = stdout(&["info", memory.to_str().unwrap()]);
    assert!(
        info.contains("region 0 at physical address 0x3000:"),
        "{info}"
    );
}

/// The CTF trace's stream files, sorted.
fn ctf_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// babeltrace2's event lines for the CTF trace in `dir`, if it is here.
fn babeltrace2_events(dir: &Path) -> Option<usize> {
    let bt = reader("babeltrace2")?;
    let read = run_ok(Command::new(bt).arg(dir));
    let text = String::from_utf8(read.stdout).unwrap();
    Some(text.lines().filter(|l| l.starts_with('[')).count())
}

#[test]
fn ctf_has_no_stream_file_for_an_empty_stream_and_still_reads() {
    let image = write_tmp("newcomer-ctf.bin", &lanes_image());
    let (out, dir) = extract_to(&image, "ctf", "newcomer-ctf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ctf_files(&dir), ["kernel_0", "kernel_1", "metadata"]);
    if let Some(events) = babeltrace2_events(&dir) {
        assert_eq!(events, 20);
    }
}

#[test]
fn perfetto_and_chrome_have_no_track_for_an_empty_stream() {
    let image = write_tmp("newcomer-perfetto.bin", &lanes_image());
    let (out, file) = extract_to(&image, "perfetto", "newcomer.pftrace");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read(&file).unwrap();
    let has = |name: &str| trace.windows(name.len()).any(|w| w == name.as_bytes());
    assert!(has("cpu0") && has("cpu1"));
    assert!(!has("lane") && !has("user:"), "a track for an empty stream");

    let chrome = stdout(&["extract", image.to_str().unwrap(), "--format", "chrome"]);
    let names: Vec<&str> = chrome
        .lines()
        .filter(|l| l.contains("\"thread_name\""))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// Makes a bundle of `image` and unpacks it; returns its top directory.
fn bundle(image: &Path, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("bundle.tar.gz");
    stdout(&[
        "bundle",
        image.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ]);
    run_ok(
        Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&dir),
    );
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap()
}

#[test]
fn a_bundle_shows_what_holds_events_and_where_the_region_came_from() {
    // Named as the module names it, apart from the other test's copy.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("newcomer-bundle-input");
    std::fs::create_dir_all(&dir).unwrap();
    let image = dir.join("previous");
    std::fs::write(&image, lanes_image()).unwrap();
    let top = bundle(&image, "newcomer-bundle");
    let readme = std::fs::read_to_string(top.join("README.txt")).unwrap();
    assert!(
        readme.contains(
            "Region 0, read from previous (a copy of the region; its physical address is not known from the file):"
        ),
        "{readme}"
    );
    assert!(!readme.contains("physical address 0x0"), "{readme}");
    assert!(
        readme.contains(&format!(
            "Left out of the traces: {EMPTY}, which recorded\nand lost nothing"
        )),
        "{readme}"
    );
    // The file list names the stream files there are: two.
    let ctf_streams: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("kernel/ctf/") && !l.ends_with("metadata"))
        .collect();
    assert_eq!(ctf_streams, ["kernel/ctf/kernel_0", "kernel/ctf/kernel_1"]);
    let ctf = top.join("kernel/ctf");
    assert_eq!(ctf_files(&ctf), ["kernel_0", "kernel_1", "metadata"]);
    // The manifest keeps every stream, for machines.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(top.join("MANIFEST.json")).unwrap()).unwrap();
    let streams = manifest["regions"][0]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), STREAMS);
    if let Some(events) = babeltrace2_events(&ctf) {
        assert_eq!(events, 20);
    }
}
