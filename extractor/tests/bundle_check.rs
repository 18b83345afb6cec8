//! `crashring check-bundle` against archives altered after the fact: a
//! changed byte, a planted link, entries whose type or path would leave
//! the bundle; and `bundle` never writing through a link.

mod common;

use common::bundles::*;
use common::{crashring, rich_image, write_tmp};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

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

#[test]
fn check_bundle_prints_the_archive_s_names_escaped() {
    let image = write_tmp("bundle-escape.bin", &rich_image());
    let (_, archive) = bundle(&image, "escape.tar.gz", &[]);
    // The whole bundle under a top directory that would set the
    // terminal's title: intact, and said so without driving it.
    let renamed = repack(&archive, |list| {
        let top = list[0].0.trim_end_matches('/').to_string();
        for (p, _) in list.iter_mut() {
            *p = p.replacen(&top, "t\x1b]0;owned\x07", 1);
        }
    });
    let path = write_tmp("escape-\u{202e}1.tar.gz", &renamed);
    let out = crashring(&["check-bundle", path.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(r"escape-\xe2\x80\xae1.tar.gz: intact: t\x1b]0;owned\x07/"),
        "{said}"
    );
    assert!(!said.contains(['\x1b', '\x07', '\u{202e}']), "{said}");
}
