//! The files `crashring extract -o` writes, in every format: made afresh,
//! readable by their owner only whatever was at the path before, and never
//! written through a symbolic link planted at the path.

mod common;

use common::{crashring, rich_image, write_tmp};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// The formats written as one file.
const FILE_FORMATS: [&str; 5] = ["text", "jsonl", "chrome", "perfetto", "tracedat"];

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn extract(image: &Path, format: &str, out: &Path) -> std::process::Output {
    crashring(&[
        "extract",
        image.to_str().unwrap(),
        "--format",
        format,
        "-o",
        out.to_str().unwrap(),
    ])
}

#[test]
fn an_existing_0644_output_ends_0600_in_every_format() {
    let image = write_tmp("outputs-mode.bin", &rich_image());
    let dir = scratch("outputs-mode");
    for format in FILE_FORMATS {
        let out = dir.join(format);
        std::fs::write(&out, b"old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
        let run = extract(&image, format, &out);
        assert_eq!(run.status.code(), Some(1), "{format}: {run:?}");
        assert_eq!(mode(&out), 0o600, "{format}");
        assert_ne!(std::fs::read(&out).unwrap(), b"old", "{format}");
    }
    // A CTF directory's files likewise.
    let ctf = dir.join("ctf");
    std::fs::create_dir(&ctf).unwrap();
    let metadata = ctf.join("metadata");
    std::fs::write(&metadata, b"old").unwrap();
    std::fs::set_permissions(&metadata, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = extract(&image, "ctf", &ctf);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    for name in ["metadata", "kernel_0", "kernel_1", "user_2"] {
        assert_eq!(mode(&ctf.join(name)), 0o600, "ctf/{name}");
    }
    // Nothing but the outputs is left beside them.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(&ctf).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    left.sort();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_symlink_planted_at_an_output_path_is_not_followed() {
    let image = write_tmp("outputs-link.bin", &rich_image());
    let dir = scratch("outputs-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    let refused = |run: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains("is a symbolic link"), "{what}: {err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched", "{what}");
    };
    for format in FILE_FORMATS {
        let out = dir.join(format);
        symlink(&victim, &out).unwrap();
        refused(&extract(&image, format, &out), format);
        assert!(std::fs::symlink_metadata(&out).unwrap().is_symlink());
    }
    // A link in place of one of a CTF directory's files, or of the
    // directory itself.
    let ctf = dir.join("ctf");
    std::fs::create_dir(&ctf).unwrap();
    symlink(&victim, ctf.join("kernel_0")).unwrap();
    refused(&extract(&image, "ctf", &ctf), "ctf/kernel_0");
    let elsewhere = scratch("outputs-link-elsewhere");
    let linked = dir.join("ctf-link");
    symlink(&elsewhere, &linked).unwrap();
    refused(&extract(&image, "ctf", &linked), "a linked CTF directory");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
