//! Bundles made entry by entry for tests, each of which can then be
//! altered the way a bundle made elsewhere could be.

use super::readme::FILES_HEADING;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use std::io;

/// SHA-256 in hex, as a manifest lists it.
pub(crate) fn sha(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files of an intact bundle under `b1/` (MANIFEST.json and
/// README.txt made to list `files`), in archive order.
pub(crate) fn bundle_files(files: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    bundle_files_with(files, serde_json::json!({ "manifest_version": 1 }))
}

/// [`bundle_files`], with the manifest `manifest` and its files list.
pub(crate) fn bundle_files_with(
    files: &[(&str, &[u8])],
    mut manifest: serde_json::Value,
) -> Vec<(String, Vec<u8>)> {
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
    manifest["files"] = listed.into();
    out.insert(
        0,
        ("MANIFEST.json".into(), manifest.to_string().into_bytes()),
    );
    out
}

/// `files` as a ustar archive under `b1/`, without its end blocks.
pub(crate) fn tar_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    tar_with(files, |_, _| {})
}

/// A pax extended header of `records`, for the entry after it.
pub(crate) fn pax(tar: &mut tar::Builder<Vec<u8>>, records: &[(&str, &str)]) {
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

/// A directory entry named `path`.
pub(crate) fn dir(tar: &mut tar::Builder<Vec<u8>>, path: &str) {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    tar.append_data(&mut h, path, io::empty()).unwrap();
}

/// [`tar_of`], with `before` called before each file's entry.
pub(crate) fn tar_with(
    files: &[(String, Vec<u8>)],
    before: impl Fn(&str, &mut tar::Builder<Vec<u8>>),
) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    dir(&mut tar, "b1/");
    for (p, d) in files {
        before(p, &mut tar);
        let mut h = tar::Header::new_ustar();
        h.set_size(d.len() as u64);
        tar.append_data(&mut h, format!("b1/{p}"), &d[..]).unwrap();
    }
    tar.get_ref().clone()
}

pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
    gzip_at(data, flate2::Compression::fast())
}

/// `data` as one gzip member of stored blocks: quick for large tests.
pub(crate) fn gzip_stored(data: &[u8]) -> Vec<u8> {
    gzip_at(data, flate2::Compression::none())
}

fn gzip_at(data: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), level);
    io::Write::write_all(&mut gz, data).unwrap();
    gz.finish().unwrap()
}

/// A tar's two end blocks.
pub(crate) const END: [u8; 1024] = [0; 1024];

pub(crate) fn intact() -> Vec<u8> {
    let files = bundle_files(&[("dmesg.txt", b"[0.0] hi\n")]);
    [tar_of(&files), END.to_vec()].concat()
}
