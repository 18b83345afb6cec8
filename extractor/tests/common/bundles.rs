//! Reading what `crashring bundle` writes, for the bundle tests: the
//! archive's entries, the bundle's files by path, unpacking with tar(1),
//! and the logs and images they add.

use super::{crashring, run_ok, write_tmp};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Entry {
    pub mode: u32,
    pub uid: u64,
    pub mtime: u64,
    pub dir: bool,
    pub kind: tar::EntryType,
    pub link: Option<String>,
    pub data: Vec<u8>,
}

/// A `.tar.gz`'s entries by path, read with the tar crate.
pub fn entries(archive: &[u8]) -> BTreeMap<String, Entry> {
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

pub fn tmp(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    let _ = std::fs::remove_dir_all(&p);
    p
}

pub fn bundle(image: &Path, name: &str, extra: &[&str]) -> (Output, PathBuf) {
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
pub fn bundled(archive: &Path) -> (String, BTreeMap<String, Entry>) {
    let all = entries(&std::fs::read(archive).unwrap());
    let top = all.keys().next().unwrap().trim_end_matches('/').to_string();
    let files = all
        .into_iter()
        .filter(|(_, e)| !e.dir)
        .map(|(p, e)| (p.strip_prefix(&format!("{top}/")).unwrap().to_string(), e))
        .collect();
    (top, files)
}

pub fn text(e: &Entry) -> &str {
    std::str::from_utf8(&e.data).unwrap()
}

pub fn text_of(e: &Entry) -> String {
    String::from_utf8(e.data.clone()).unwrap()
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Unpacks a bundle with tar(1) into a fresh scratch directory `name`;
/// returns the bundle's top directory there.
pub fn unpack(archive: &Path, name: &str) -> PathBuf {
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

/// A console log whose kernel lines are the trace's printk lines 300 µs
/// late (the printk clock is not the trace's), and a Weston timeline.
pub fn logs() -> (PathBuf, PathBuf) {
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

pub fn jsonl_lines(image: &Path) -> Vec<String> {
    let out = crashring(&["extract", image.to_str().unwrap(), "--format", "jsonl"]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Every byte of a bundle's files, the Perfetto archive unpacked.
pub fn all_bytes(archive: &Path) -> Vec<u8> {
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

pub fn tmp_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}
