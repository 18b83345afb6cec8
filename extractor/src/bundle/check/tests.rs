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
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    tar.append_data(&mut h, "b1/", io::empty()).unwrap();
    for (p, d) in files {
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
