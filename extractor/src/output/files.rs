//! How every output file and directory the CLI writes is created: made
//! afresh and private, renamed into place when complete, never written
//! through a link.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// An output file being written. It is made under a random name in its
/// destination's directory, created exclusively (so nothing planted there
/// is ever opened), and renamed over the destination by
/// [`NewFile::persist`]. So the destination ends a new file readable by
/// its owner only (a trace holds whatever the kernel logged) whatever was
/// there before, a half-written file never appears under its name, and
/// a symbolic link is never written through.
pub struct NewFile {
    tmp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl NewFile {
    /// Starts the file that becomes `dest`, which must be missing or a
    /// regular file (replaced, not rewritten: a hard link to it keeps the
    /// old contents). Anything else there, a symbolic link above all, is
    /// refused with [`NotAFile`].
    pub fn create(dest: &Path) -> io::Result<NewFile> {
        refuse_unless(dest, "a regular file", std::fs::FileType::is_file)?;
        let name = dest
            .file_name()
            .map_or("out".into(), |n| n.to_string_lossy());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .tempfile_in(parent_of(dest))?;
        make_private(tmp.as_file())?;
        Ok(NewFile {
            tmp,
            dest: dest.to_path_buf(),
        })
    }

    pub fn file(&self) -> &File {
        self.tmp.as_file()
    }

    /// Renames the finished file over its destination. Dropping a
    /// `NewFile` instead removes it.
    pub fn persist(self) -> io::Result<()> {
        self.tmp.persist(&self.dest).map(drop).map_err(|e| e.error)
    }
}

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.as_file().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tmp.as_file().flush()
    }
}

/// trace.dat's writer goes back to fill in sizes.
impl io::Seek for NewFile {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        self.tmp.as_file().seek(pos)
    }
}

/// Makes `dir` an output directory: created (0700, with any missing
/// parents) unless it is a directory already. A symbolic link or anything
/// else there is refused with [`NotAFile`], so files are never written
/// into a directory someone linked in place of the one asked for.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    refuse_unless(dir, "a directory", std::fs::FileType::is_dir)?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
}

/// Creates a file that must not exist yet, mode 0600: for the files of a
/// private staging directory. `O_CREAT | O_EXCL` never opens an existing
/// file and never follows a symbolic link.
pub fn create_new(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    make_private(&file)?;
    Ok(file)
}

/// Mode exactly 0600, whatever the umask took away (or a reused file had).
fn make_private(file: &File) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

/// The directory `path` is in (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// What is at an output path, when it is not what an output may replace.
#[derive(Debug, thiserror::Error)]
#[error("{} is {found}: an output replaces only {want}, and is never written through a link", path.display())]
pub struct NotAFile {
    pub path: PathBuf,
    pub found: &'static str,
    pub want: &'static str,
}

/// Fails with [`NotAFile`] unless `path` is missing or `ok` says its own
/// type (not a link's target's) is acceptable.
fn refuse_unless(
    path: &Path,
    want: &'static str,
    ok: fn(&std::fs::FileType) -> bool,
) -> io::Result<()> {
    let kind = match std::fs::symlink_metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if ok(&kind) {
        return Ok(());
    }
    let found = if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a device, FIFO or socket"
    };
    let err = NotAFile {
        path: path.to_path_buf(),
        found,
        want,
    };
    Err(io::Error::new(io::ErrorKind::AlreadyExists, err))
}
