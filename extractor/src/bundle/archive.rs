//! Deterministic `.tar.gz` archives and the private staging directory a
//! bundle's files are written to first.

use crate::output::create_private;
use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// A directory only its owner can read, removed with everything in it
/// when dropped (the bundle is done, or failed half-way).
pub struct Staging {
    pub dir: PathBuf,
}

impl Staging {
    /// A fresh directory beside `out`, so that the finished archive can
    /// be renamed into place.
    pub fn beside(out: &Path) -> io::Result<Staging> {
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = out
            .file_name()
            .map_or("bundle".into(), |n| n.to_string_lossy());
        let dir = parent.join(format!(".{name}.{}.staging", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Staging { dir })
    }

    /// Creates the directories of `relative` (0700).
    pub fn make_dirs(&self, relative: &Path) -> io::Result<PathBuf> {
        let path = self.dir.join(relative);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&path)?;
        Ok(path)
    }

    /// Creates the file `relative` (0600), with its directories.
    pub fn create(&self, relative: &Path) -> io::Result<File> {
        if let Some(parent) = relative.parent() {
            self.make_dirs(parent)?;
        }
        create_private(&self.dir.join(relative))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes a gzip-compressed tar of `files` (paths relative to `root`,
/// stored under `prefix/`) to `out`, the same bytes for the same files:
/// every entry has `mtime`, owner 0, mode 0600 (directories 0700), no
/// user or group names, and the gzip header has no name and no time.
pub fn tar_gz(
    out: File,
    root: &Path,
    prefix: &Path,
    files: &[PathBuf],
    mtime: u64,
) -> io::Result<()> {
    let gz: GzEncoder<BufWriter<File>> = GzBuilder::new().operating_system(255).write(
        BufWriter::with_capacity(1 << 16, out),
        Compression::default(),
    );
    let mut tar = tar::Builder::new(gz);
    let mut dirs_done: Vec<PathBuf> = Vec::new();
    for rel in files {
        // Each directory once, before its first file.
        let mut ancestors: Vec<&Path> = rel
            .ancestors()
            .skip(1)
            .filter(|a| !a.as_os_str().is_empty())
            .collect();
        ancestors.reverse();
        let mut todo = vec![prefix.to_path_buf()];
        todo.extend(ancestors.into_iter().map(|a| prefix.join(a)));
        for dir in todo {
            if !prefix.as_os_str().is_empty() && !dirs_done.contains(&dir) {
                let mut h = header(0, mtime, 0o700, tar::EntryType::Directory);
                tar.append_data(&mut h, &dir, io::empty())?;
                dirs_done.push(dir);
            }
        }
        let mut file = File::open(root.join(rel))?;
        let size = file.metadata()?.len();
        let mut h = header(size, mtime, 0o600, tar::EntryType::Regular);
        tar.append_data(&mut h, prefix.join(rel), (&mut file).take(size))?;
    }
    let mut w = tar.into_inner()?.finish()?;
    w.flush()?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()
}

fn header(size: u64, mtime: u64, mode: u32, kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    h
}
