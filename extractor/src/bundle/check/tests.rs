//! Archives made here, entry by entry, each altered in one way a bundle
//! made elsewhere could be: the check refuses it, naming what it found.

use super::*;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

fn sha(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files of an intact bundle under `b1/` (MANIFEST.json and
/// README.txt made to list `files`), in archive order.
fn bundle_files(files: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    let mut readme = format!("A bundle.\n\n{FILES_HEADING}\n---\nMANIFEST.json\nREADME.txt\n");
    for (p, _) in files {
        readme.push_str(&format!("{p}\n    A file.\n"));
    }
    let mut out: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, d)| (p.to_string(), d.to_vec()))
        .collect();
    out.push(("README.txt".into(), readme.into_bytes()));
    let listed: Vec<_> = out
        .iter()
        .map(|(p, d)| serde_json::json!({ "path": p, "size": d.len(), "sha256": sha(d) }))
        .collect();
    let manifest = serde_json::json!({ "manifest_version": 1, "files": listed });
    out.insert(
        0,
        ("MANIFEST.json".into(), manifest.to_string().into_bytes()),
    );
    out
}

/// `files` as a ustar archive under `b1/`, without its end blocks.
fn tar_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    tar_with(files, |_, _| {})
}

/// A pax extended header of `records`, for the entry after it.
fn pax(tar: &mut tar::Builder<Vec<u8>>, records: &[(&str, &str)]) {
    let mut data = Vec::new();
    for (k, v) in records {
        let record = format!(" {k}={v}\n");
        // The length counts its own digits.
        let mut len = record.len();
        while record.len() + len.to_string().len() != len {
            len = record.len() + len.to_string().len();
        }
        data.extend_from_slice(format!("{len}{record}").as_bytes());
    }
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::XHeader);
    h.set_size(data.len() as u64);
    tar.append_data(&mut h, "PaxHeaders/x", &data[..]).unwrap();
}

/// [`tar_of`], with `before` called before each file's entry.
fn tar_with(
    files: &[(String, Vec<u8>)],
    before: impl Fn(&str, &mut tar::Builder<Vec<u8>>),
) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    tar.append_data(&mut h, "b1/", io::empty()).unwrap();
    for (p, d) in files {
        before(p, &mut tar);
        let mut h = tar::Header::new_ustar();
        h.set_size(d.len() as u64);
        tar.append_data(&mut h, format!("b1/{p}"), &d[..]).unwrap();
    }
    tar.get_ref().clone()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    io::Write::write_all(&mut gz, data).unwrap();
    gz.finish().unwrap()
}

/// A tar's two end blocks.
const END: [u8; 1024] = [0; 1024];

fn intact() -> Vec<u8> {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    [tar_of(&files), END.to_vec()].concat()
}

fn layout_error(archive: &[u8]) -> String {
    match check(archive) {
        Err(e @ CheckError::Layout(_)) => e.to_string(),
        other => panic!("not a layout error: {other:?}"),
    }
}

#[test]
fn an_intact_bundle_and_its_padding_pass() {
    let checked = check(&gzip(&intact())[..]).unwrap();
    assert_eq!(checked.top, "b1");
    assert_eq!(checked.files.len(), 3);
    // As GNU tar writes it: padded with zeros to a 10240-byte record.
    let mut padded = intact();
    padded.resize(10240, 0);
    check(&gzip(&padded)[..]).unwrap();
}

#[test]
fn a_second_gzip_member_is_refused() {
    // The first member's tar has no end blocks: `tar xzf` reads on into
    // the second member, whose file would replace the checked one.
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    let evil = tar_of(&[("dmesg.txt".into(), b"replaced\n".to_vec())]);
    let archive = [gzip(&tar_of(&files)), gzip(&[evil, END.to_vec()].concat())].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
    // Even an intact one, or zeros.
    let archive = [gzip(&intact()), gzip(&intact())].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
    let archive = [gzip(&intact()), vec![0; 10]].concat();
    assert!(layout_error(&archive).contains("after the gzip member"));
}

#[test]
fn data_after_the_tar_end_is_refused() {
    let mut archive = intact();
    archive.extend_from_slice(&tar_of(&[("dmesg.txt".into(), b"replaced\n".to_vec())]));
    assert!(layout_error(&gzip(&archive)).contains("after the tar archive's end"));
}

#[test]
fn a_pax_record_an_unpacker_would_act_on_is_refused() {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n"), ("notes.txt", b"x")]);
    // What GNU tar and Python's tarfile write passes.
    let plain = tar_with(&files, |p, tar| {
        pax(
            tar,
            &[
                ("mtime", "1.5"),
                ("atime", "2"),
                ("path", &format!("b1/{p}")),
            ],
        )
    });
    check(&gzip(&[plain, END.to_vec()].concat())[..]).unwrap();
    // A sparse 1.0 file: GNU tar unpacks it as /tmp/evil.
    let sparse = tar_with(&files, |p, tar| {
        if p == "notes.txt" {
            pax(
                tar,
                &[("GNU.sparse.major", "1"), ("GNU.sparse.name", "/tmp/evil")],
            )
        }
    });
    match check(&gzip(&[sparse, END.to_vec()].concat())[..]) {
        Err(e @ CheckError::Unsafe { .. }) => {
            let e = e.to_string();
            assert!(e.starts_with("b1/notes.txt: "), "{e}");
            assert!(e.contains("record `GNU.sparse.major`"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}
