//! The machine's files, under a root: `/` on the machine itself, a copy
//! of one in tests and image builders (`crashring arm --root DIR`).

use std::io;
use std::path::{Path, PathBuf};

pub struct System {
    root: PathBuf,
    live: bool,
}

impl System {
    pub fn new(root: impl Into<PathBuf>) -> System {
        let root = root.into();
        let live = root == Path::new("/");
        System { root, live }
    }

    /// A copy under `root` standing in for the machine itself, for tests
    /// of what only a live system does.
    #[cfg(test)]
    pub(crate) fn live_at(root: impl Into<PathBuf>) -> System {
        System {
            root: root.into(),
            live: true,
        }
    }

    /// Where the machine's absolute `path` is under the root.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Whether this is the running machine (`/`), whose /sys and /proc
    /// are its own, rather than a copy or an image.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The file's text, or `None` if it does not exist.
    pub fn read(&self, path: &str) -> io::Result<Option<String>> {
        self.read_bytes(path)?
            .map(|b| {
                String::from_utf8(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            })
            .transpose()
    }

    /// The file's bytes, or `None` if it does not exist.
    pub fn read_bytes(&self, path: &str) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path(path)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces the file atomically (a temporary file in the same
    /// directory, renamed over it), creating its directory. A new file is
    /// mode 0644; one that exists keeps its mode and owner (a file holding
    /// a password, such as kdump-tools' FTP_PASSWORD, stays private).
    pub fn write(&self, path: &str, text: &str) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dest = self.path(path);
        let dir = dest.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(text.as_bytes())?;
        match std::fs::metadata(&dest) {
            Ok(old) => {
                // Only where the owner differs: chown is a privileged
                // system call that the sandboxed units may not make
                // (SystemCallFilter=~@privileged answers EPERM).
                let new = tmp.as_file().metadata()?;
                if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
                    std::os::unix::fs::fchown(tmp.as_file(), Some(old.uid()), Some(old.gid()))?;
                }
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => tmp
                .as_file()
                .set_permissions(std::fs::Permissions::from_mode(0o644))?,
            Err(e) => return Err(e),
        }
        tmp.as_file().sync_all()?;
        tmp.persist(&dest).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes the file; one already gone is fine.
    pub fn remove(&self, path: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(path)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every file under the root with its contents, sorted (directories
    /// themselves are not compared).
    pub fn snapshot(&self) -> io::Result<Vec<(PathBuf, Vec<u8>)>> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) -> io::Result<()> {
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                if path.is_dir() {
                    walk(&path, out)?;
                } else {
                    out.push((path.clone(), std::fs::read(&path)?));
                }
            }
            Ok(())
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out)?;
        out.sort();
        Ok(out)
    }
}
