//! Reading bundles for export: the bytes read for rows are the bytes
//! checked.

use super::*;
use crate::bundle::fixture::*;

/// An event line of region 0 at `ts`.
fn event(ts: u64) -> String {
    format!(
        "{{\"kind\":\"event\",\"region\":0,\"stream\":0,\"cpu\":0,\"ts\":{ts},\"type\":\"printk\",\
         \"salvaged\":false,\"fields\":{{\"level\":3,\"text\":\"hi\"}}}}\n"
    )
}

/// A manifest with one crashed region, its events in `events`.
fn manifest(events: &str) -> serde_json::Value {
    serde_json::json!({
        "manifest_version": 1,
        "tool": { "name": "crashring", "version": "x" },
        "regions": [{
            "index": 0, "hostname": "h", "boot_id": "b", "kernel_release": "6.1",
            "generation": 1, "state": "crashed",
            "clock": { "wall_offset_ns": 1_700_000_000_000_000_000u64,
                       "created_utc": "2024-01-01T00:00:00.000000000Z" },
            "crash": { "reason": "panic", "cpu": 0, "time_ns": 100,
                       "time_utc": "2024-01-01T00:00:01.000000000Z", "message": "m" },
            "damaged": false, "recovered": 1, "lost": 0, "lost_exact": true,
            "files": { "events": events },
        }],
    })
}

/// A `.tar.gz` bundle `b1` whose one event is at `ts`.
fn bundle_saying(ts: u64) -> Vec<u8> {
    let events = event(ts);
    let files = bundle_files_with(
        &[("kernel/events.jsonl", events.as_bytes())],
        manifest("kernel/events.jsonl"),
    );
    gzip(&[tar_of(&files), END.to_vec()].concat())
}

/// The times of the events read from `b`'s archive.
fn times(b: &Ready) -> Result<Vec<u64>, String> {
    let mut said = Vec::new();
    let read = read_bundle(
        b,
        &mut Exported::default(),
        |_, e| {
            said.push(e.ts());
            Ok(())
        },
        |_, _| Ok(()),
    );
    match read {
        Ok(()) => Ok(said),
        Err(Stop::Archive(e)) => Err(e.to_string()),
        Err(Stop::Output(e)) => panic!("{e}"),
    }
}

#[test]
fn a_bundle_replaced_after_its_check_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.tar.gz");
    std::fs::write(&path, bundle_saying(5)).unwrap();
    let (b, _) = ready(&path).unwrap();
    assert_eq!(times(&b).unwrap(), [5]);

    // Its mode changed by the spool's housekeeping: the same bytes.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(times(&b).unwrap(), [5]);

    // Renamed over it.
    let other = dir.path().join("other");
    std::fs::write(&other, bundle_saying(6)).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let e = times(&b).unwrap_err();
    assert!(e.contains("replaced"), "{e}");

    // A FIFO in its place: refused, not waited on.
    std::fs::remove_file(&path).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = times(&b).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    let e = ready(&path).err().unwrap();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn events_files_the_manifest_names_must_be_checked_files_each_of_one_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.tar.gz");
    let events = event(5);
    let refused = |manifest: serde_json::Value| {
        let files = bundle_files_with(&[("kernel/events.jsonl", events.as_bytes())], manifest);
        std::fs::write(&path, gzip(&[tar_of(&files), END.to_vec()].concat())).unwrap();
        ready(&path).err().unwrap()
    };
    let e = refused(manifest("kernel/missing.jsonl"));
    assert_eq!(
        e,
        "MANIFEST.json: region 0's events file kernel/missing.jsonl is not in the bundle"
    );
    let mut twice = manifest("kernel/events.jsonl");
    let mut second = twice["regions"][0].clone();
    second["index"] = 1.into();
    twice["regions"].as_array_mut().unwrap().push(second);
    let e = refused(twice);
    assert!(
        e.contains("region 1's events file kernel/events.jsonl is another region's too"),
        "{e}"
    );
}

/// `files` as a bundle whose top directory is `top`.
fn bundle_under(top: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (p, d) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(d.len() as u64);
        tar.append_data(&mut h, format!("{top}/{p}"), &d[..])
            .unwrap();
    }
    gzip(&tar.into_inner().unwrap())
}

#[test]
fn a_top_directory_that_makes_no_file_name_is_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let events = event(5);
    let files = bundle_files_with(
        &[("kernel/events.jsonl", events.as_bytes())],
        manifest("kernel/events.jsonl"),
    );
    let path = dir.path().join("b.tar.gz");
    let good = "crash-h-20240101T000001Z-00000000";
    std::fs::write(&path, bundle_under(good, &files)).unwrap();
    assert_eq!(ready(&path).unwrap().0.top, good);
    // Its Sentry envelope's name would be too long for any file system.
    let long = "x".repeat(250);
    std::fs::write(&path, bundle_under(&long, &files)).unwrap();
    let e = ready(&path).err().unwrap();
    assert!(e.contains("no name crashring gives a bundle"), "{e}");
}
