//! `crashring snapshot`: a bundle of a running recorder, laid out as a
//! crash bundle, whose manifest and README say it is a snapshot, who
//! asked and why. (`/dev/crashring-current` itself is read in the QEMU
//! scenarios; here `--from` gives a region file.)

mod common;

use common::{crashring, rich_image, write_tmp};
use std::io::Read;
use std::path::PathBuf;
use std::process::Output;

fn entries(archive: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let file = std::fs::File::open(archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let path = e.path().unwrap().display().to_string();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (path, data)
        })
        .collect()
}

fn out(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// `crashring snapshot` of the rich image with `args`, saved as `name`:
/// its output and the archive's path.
fn snapshot(name: &str, args: &[&str]) -> (Output, PathBuf) {
    let region = write_tmp(&format!("{name}.bin"), &rich_image());
    let archive = out(&format!("{name}.tar.gz"));
    let mut all = vec!["snapshot", "--from", region.to_str().unwrap()];
    all.extend(args);
    all.extend(["-o", archive.to_str().unwrap()]);
    (crashring(&all), archive)
}

#[test]
fn a_snapshot_is_a_checked_bundle_that_says_who_asked_and_why() {
    let (made, archive) = snapshot("snapshot", &["--why", "weston: atomic commit failed"]);
    // The rich image holds a damaged page: bundled, with exit status 1.
    assert_eq!(
        made.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let checked = crashring(&["check-bundle", archive.to_str().unwrap()]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let files = entries(&archive);
    let top = files[0].0.split('/').next().unwrap().to_string();
    assert!(top.starts_with("snapshot-"), "{top}");
    let text = |name: &str| {
        let (_, data) = files
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .unwrap_or_else(|| panic!("no {name}"));
        String::from_utf8(data.clone()).unwrap()
    };
    let manifest: serde_json::Value = serde_json::from_str(&text("MANIFEST.json")).unwrap();
    let request = &manifest["request"];
    assert_eq!(request["reason"], "snapshot");
    assert_eq!(request["why"], "weston: atomic commit failed");
    assert_eq!(request["uid"], rustix::process::getuid().as_raw());
    assert!(text("README.txt")
        .contains("A snapshot of the recorder while it ran (no crash), asked for by uid"));
}

#[test]
fn a_crash_bundle_says_nothing_of_a_request() {
    let region = write_tmp("snapshot-crash-region.bin", &rich_image());
    let archive = out("snapshot-crash.tar.gz");
    let made = crashring(&[
        "bundle",
        region.to_str().unwrap(),
        "-o",
        archive.to_str().unwrap(),
    ]);
    // The rich image holds a damaged page: bundled, with exit status 1.
    assert_eq!(
        made.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let files = entries(&archive);
    assert!(files[0].0.starts_with("crash-"));
    let manifest = &files
        .iter()
        .find(|(p, _)| p.ends_with("MANIFEST.json"))
        .unwrap()
        .1;
    let manifest: serde_json::Value = serde_json::from_slice(manifest).unwrap();
    assert!(manifest.get("request").is_none());
}

#[test]
fn a_reason_of_more_than_one_line_is_refused() {
    let (made, archive) = snapshot(
        "snapshot-refused",
        &["--why", "one\nREADME line of its own"],
    );
    assert!(!made.status.success());
    assert!(String::from_utf8_lossy(&made.stderr).contains("--why is one line"));
    assert!(!archive.exists());
}

#[test]
fn since_leaves_out_the_events_before_it_and_says_how_many() {
    let (all, archive) = snapshot("snapshot-all", &[]);
    assert_eq!(all.status.code(), Some(1));
    let manifest = |archive: &std::path::Path| -> serde_json::Value {
        let files = entries(archive);
        let (_, data) = files
            .iter()
            .find(|(p, _)| p.ends_with("MANIFEST.json"))
            .unwrap();
        serde_json::from_slice(data).unwrap()
    };
    let everything = manifest(&archive)["regions"][0]["recovered"]
        .as_u64()
        .unwrap();
    let (made, since) = snapshot("snapshot-since", &["--since", "150us"]);
    assert_eq!(
        made.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let m = manifest(&since);
    let kept = m["regions"][0]["recovered"].as_u64().unwrap();
    let left_out = m["regions"][0]["redacted"]["before_since_left_out"]
        .as_u64()
        .unwrap();
    assert!(left_out > 0 && kept > 0, "{left_out} left out, {kept} kept");
    assert_eq!(m["redaction"]["since_ns"], 150_000);
    assert!(kept < everything, "{kept} of {everything}");
    assert!(manifest(&archive)["redaction"].get("since_ns").is_none());
}
