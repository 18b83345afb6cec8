//! Tidy checks, run by `cargo test`: rules about the source tree that no
//! compiler enforces.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    crate::project_root()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The CRC FORMAT.md records for layout.rs. Changing the layout without
/// touching the spec fails here.
#[test]
fn format_md_tracks_the_layout() {
    let layout = std::fs::read(root().join("pstore-ring/src/layout.rs")).unwrap();
    let crc = pstore_ring::layout::crc32(&[&layout]);
    let spec = std::fs::read_to_string(root().join("pstore-ring/FORMAT.md")).unwrap();
    let want = format!("layout.rs crc32: {crc:#010x}");
    assert!(
        spec.contains(&want),
        "pstore-ring/src/layout.rs was changed without touching pstore-ring/FORMAT.md: \
         update the spec, then its marker line to `{want}`"
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["pstore-ring", "extractor", "kexec-hooks", "qemu-tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 10);
    let missing: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` module doc: {missing:?}"
    );
}
