//! Deterministic `.tar.gz` archives and the private staging directory a
//! bundle's files are written to first.

use super::gzip::{gzip, Source};
use crate::output::create_new;
use crate::output::files::parent_of;
use flate2::Compression;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Every archive's compression: zlib's level 2 compresses a dense
/// trace about 9% worse than the default level 6 at nearly three times
/// its speed (0.66 s against 1.72 s for a 64 MiB region's 200 MB of
/// files), and a snapshot's bundle is mostly compression. The level is
/// part of the bytes: the same input still makes the same archive.
const LEVEL: Compression = Compression::new(2);

/// A directory only its owner can read, with a random name (so nobody can
/// plant anything at it in advance), removed with everything in it when
/// dropped (the bundle is done, or failed half-way).
pub struct Staging {
    dir: tempfile::TempDir,
}

impl Staging {
    /// A fresh directory beside `out`: on the same file system, which
    /// holds the archive too, rather than in a small or shared /tmp.
    /// Its files are written and read back by path, so where someone
    /// else could rename it away and put a link in its place (a
    /// directory of theirs on the way to `out`, or one anyone may write
    /// to that is not sticky), it is made in the temporary directory
    /// instead, if that is safe (in a user namespace whose `/` shows an
    /// unmapped owner neither is, and it stays beside `out`).
    pub fn beside(out: &Path) -> io::Result<Staging> {
        let name = out
            .file_name()
            .map_or("bundle".into(), |n| n.to_string_lossy());
        let parent = std::fs::canonicalize(parent_of(out))?;
        let tmp = std::fs::canonicalize(std::env::temp_dir()).ok();
        let within = staging_parent(parent, tmp)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".staging")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(within)?;
        Ok(Staging { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates the directories of `relative` (0700).
    pub fn make_dirs(&self, relative: &Path) -> io::Result<PathBuf> {
        let path = self.path().join(relative);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&path)?;
        Ok(path)
    }

    /// Creates the file `relative` (0600), with its directories; it must
    /// not exist yet.
    pub fn create(&self, relative: &Path) -> io::Result<File> {
        if let Some(parent) = relative.parent() {
            self.make_dirs(parent)?;
        }
        create_new(&self.path().join(relative))
    }
}

/// Where to stage for an output in `parent`: there, unless others can
/// rename in it and the temporary directory `tmp` is safe from that.
fn staging_parent(parent: PathBuf, tmp: Option<PathBuf>) -> io::Result<PathBuf> {
    if only_caller_can_rename_in(&parent)? {
        return Ok(parent);
    }
    Ok(tmp
        .filter(|t| only_caller_can_rename_in(t).unwrap_or(false))
        .unwrap_or(parent))
}

/// Whether no one but the caller (and root) can rename what is in `dir`
/// (an absolute path without links) or in any directory above it: each
/// is owned by root or the caller, and writable by no one else unless
/// sticky.
fn only_caller_can_rename_in(dir: &Path) -> io::Result<bool> {
    let caller = rustix::process::geteuid().as_raw();
    for d in dir.ancestors() {
        let meta = std::fs::metadata(d)?;
        let owner_trusted = meta.uid() == 0 || meta.uid() == caller;
        let others_write = meta.mode() & 0o022 != 0;
        let sticky = meta.mode() & 0o1000 != 0;
        if !owner_trusted || (others_write && !sticky) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How a file's bytes go into an archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    Deflate,
    /// As they are: the file is compressed already. Only the archive's
    /// blocks that hold nothing else are stored.
    Store,
}

/// Writes a gzip-compressed tar of `files` (paths relative to `root`,
/// stored under `prefix/`, each packed as it says) to `out`, the same
/// bytes for the same files:
/// every entry has `mtime`, owner 0, mode 0600 (directories 0700), no
/// user or group names, and the gzip header has no name and no time.
/// Returns `out`, flushed.
pub fn tar_gz<W: Write>(
    out: W,
    root: &Path,
    prefix: &Path,
    files: &[(PathBuf, Packing)],
    mtime: u64,
) -> io::Result<W> {
    let tar = Tar::of(root, prefix, files, mtime)?;
    let mut out = BufWriter::with_capacity(1 << 16, out);
    gzip(&mut out, LEVEL, &tar)?;
    out.flush()?;
    out.into_inner().map_err(io::IntoInnerError::into_error)
}

/// A tar stream laid out before it is read: its headers and padding in
/// memory, its files' contents read from the files, by range, as the
/// compressing cores ask for them.
struct Tar {
    /// Each piece with its offset in the stream, in order.
    pieces: Vec<(u64, Piece)>,
    len: u64,
}

enum Piece {
    Bytes(Vec<u8>),
    /// `len` bytes of `file`, staged as `name`.
    File {
        file: File,
        len: u64,
        name: PathBuf,
        packing: Packing,
    },
}

impl Tar {
    fn of(root: &Path, prefix: &Path, files: &[(PathBuf, Packing)], mtime: u64) -> io::Result<Tar> {
        // The tar crate writes the headers (and a long name's extra
        // entry), each followed by no data; the files' contents and their
        // padding are put between them here.
        let mut tar = tar::Builder::new(Tar {
            pieces: Vec::new(),
            len: 0,
        });
        let mut dirs_done: Vec<PathBuf> = Vec::new();
        for (rel, packing) in files {
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
            let file = File::open(root.join(rel))?;
            let size = file.metadata()?.len();
            let mut h = header(size, mtime, 0o600, tar::EntryType::Regular);
            tar.append_data(&mut h, prefix.join(rel), io::empty())?;
            let stream = tar.get_mut();
            stream.push(Piece::File {
                file,
                len: size,
                name: rel.clone(),
                packing: *packing,
            });
            let padding = size.next_multiple_of(512) - size;
            stream.write_all(&vec![0; padding as usize])?;
        }
        // Two zero blocks end the archive.
        tar.into_inner()
    }

    /// The pieces that hold some of `range`, each with its offset.
    fn pieces_in(&self, range: Range<u64>) -> impl Iterator<Item = &(u64, Piece)> {
        // The last piece starting at or before the range, and on.
        let first = self.pieces.partition_point(|(at, _)| *at <= range.start);
        self.pieces[first.saturating_sub(1)..]
            .iter()
            .take_while(move |(at, _)| *at < range.end)
    }

    fn push(&mut self, piece: Piece) {
        let len = match &piece {
            Piece::Bytes(bytes) => bytes.len() as u64,
            Piece::File { len, .. } => *len,
        };
        self.pieces.push((self.len, piece));
        self.len += len;
    }
}

/// What the tar crate writes: headers, and the archive's end.
impl Write for Tar {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.pieces.last_mut() {
            Some((_, Piece::Bytes(bytes))) => {
                bytes.extend_from_slice(buf);
                self.len += buf.len() as u64;
            }
            _ => self.push(Piece::Bytes(buf.to_vec())),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Tar {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, range: Range<u64>, out: &mut Vec<u8>) -> io::Result<()> {
        for (at, piece) in self.pieces_in(range.clone()) {
            let from = range.start.max(*at) - at;
            match piece {
                Piece::Bytes(bytes) => {
                    let to = usize::try_from((range.end - at).min(bytes.len() as u64))
                        .map_err(io::Error::other)?;
                    out.extend_from_slice(&bytes[from as usize..to]);
                }
                Piece::File {
                    file, len, name, ..
                } => {
                    let to = (range.end - at).min(*len);
                    let old = out.len();
                    out.resize(old + (to - from) as usize, 0);
                    // A staged file that shrank fails here: its bytes are
                    // never made up.
                    file.read_exact_at(&mut out[old..], from).map_err(|e| {
                        io::Error::new(e.kind(), format!("reading {}: {e}", name.display()))
                    })?;
                }
            }
        }
        Ok(())
    }

    fn compressed(&self, range: Range<u64>) -> bool {
        self.pieces_in(range).all(|(_, piece)| {
            matches!(
                piece,
                Piece::File {
                    packing: Packing::Store,
                    ..
                }
            )
        })
    }
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

#[cfg(test)]
mod tests {
    use super::super::gzip::tests::holds_verbatim;
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    /// Staging goes beside the archive unless another user could rename
    /// it there: in a directory anyone may write to that is not sticky,
    /// it goes to the temporary directory, if that is safe.
    #[test]
    fn staging_stays_out_of_a_directory_others_can_rename_in() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let root = std::fs::canonicalize(scratch.path()).expect("its path");
        let dir = |mode: u32| {
            let dir = root.join(format!("{mode:o}"));
            std::fs::create_dir(&dir).expect("a directory");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
                .expect("its mode");
            dir
        };
        let (tmp, open_to_all) = (dir(0o700), dir(0o777));
        for (mode, beside) in [(0o755, true), (0o1777, true), (0o775, false)] {
            let parent = dir(mode);
            let within = staging_parent(parent.clone(), Some(tmp.clone())).expect("a place");
            assert_eq!(within == parent, beside, "{mode:o}");
            // With no safe temporary directory, beside it, as before.
            let within = staging_parent(parent.clone(), Some(open_to_all.clone()));
            assert_eq!(within.expect("a place"), parent, "{mode:o}");
        }
        let within = staging_parent(open_to_all.clone(), Some(tmp.clone())).expect("a place");
        assert_eq!(within, tmp);
        let staging = Staging::beside(&tmp.join("b.tar.gz")).expect("staging");
        assert!(staging.path().starts_with(&tmp));
    }

    /// Files of the sizes a tar's padding and a long name's extra entry
    /// get wrong: empty, a block exactly, a block and one byte, and
    /// longer than a compressed block.
    fn files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let long = format!("{}/deep.txt", "a-directory-with-a-long-name".repeat(5));
        let sizes = [("empty", 0), ("block", 512), ("block-and-one", 513)];
        let mut files: Vec<(PathBuf, Vec<u8>)> = sizes
            .iter()
            .map(|&(name, size)| (PathBuf::from(name), vec![b'x'; size]))
            .collect();
        // Numbered lines: text deflate shrinks, with no 4 KiB of it twice.
        let big: Vec<u8> = (0..)
            .flat_map(|i: u32| format!("line {i:07} of the big file\n").into_bytes())
            .take((3 << 20) + 7)
            .collect();
        files.push((PathBuf::from("kernel/big"), big));
        files.push((PathBuf::from(long), b"at the end of a long path\n".to_vec()));
        for (path, data) in &files {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(root.join(dir)).expect("a scratch directory");
            }
            std::fs::write(root.join(path), data).expect("a scratch file");
        }
        files
    }

    fn deflated(files: &[(PathBuf, Vec<u8>)]) -> Vec<(PathBuf, Packing)> {
        files
            .iter()
            .map(|(p, _)| (p.clone(), Packing::Deflate))
            .collect()
    }

    /// The archive's contents, regular files only.
    fn unpack(gz: &[u8]) -> Vec<(PathBuf, Vec<u8>)> {
        let mut tar = tar::Archive::new(GzDecoder::new(gz));
        let mut regular = Vec::new();
        for entry in tar.entries().expect("a tar stream") {
            let mut entry = entry.expect("an entry");
            if entry.header().entry_type().is_file() {
                let path = entry.path().expect("a path").into_owned();
                let mut data = Vec::new();
                entry.read_to_end(&mut data).expect("an entry's data");
                regular.push((path, data));
            }
        }
        regular
    }

    #[test]
    fn a_stored_file_is_stored_whole_blocks_at_a_time() {
        let root = tempfile::tempdir().expect("a scratch directory");
        let files = files(root.path());
        let mut paths = deflated(&files);
        let big = paths
            .iter()
            .position(|(p, _)| p == Path::new("kernel/big"))
            .expect("the big file");
        paths[big].1 = Packing::Store;
        let archive = |paths: &[(PathBuf, Packing)]| {
            tar_gz(Vec::new(), root.path(), Path::new(""), paths, 0)
                .expect("archiving scratch files")
        };
        let gz = archive(&paths);
        assert_eq!(unpack(&gz), files);
        // The archive's second and third 1 MiB blocks are the file's
        // alone; the first and fourth hold headers or other files too.
        // Deflate would have shrunk its lines: a block's first 4 KiB
        // found as they are (nowhere else in the file) were stored.
        let tar = Tar::of(root.path(), Path::new(""), &paths, 0).expect("laying out");
        let block_starts = |gz: &[u8], at: u64| {
            let mut bytes = Vec::new();
            tar.read_range(at..at + 4096, &mut bytes)
                .expect("the layout");
            holds_verbatim(gz, &bytes)
        };
        assert!(block_starts(&gz, 1 << 20), "the second block deflated");
        assert!(block_starts(&gz, 2 << 20), "the third block deflated");
        assert!(!block_starts(&gz, 0), "the first block stored");
        assert!(!block_starts(&gz, 3 << 20), "the fourth block stored");
        let all_deflated = archive(&deflated(&files));
        assert!(!block_starts(&all_deflated, 1 << 20));
    }

    #[test]
    fn only_ranges_of_stored_files_alone_are_compressed() {
        let root = tempfile::tempdir().expect("a scratch directory");
        let write = |name: &str, len: usize| {
            std::fs::write(root.path().join(name), vec![b'x'; len]).expect("a scratch file");
            PathBuf::from(name)
        };
        // Each after its 512-byte header: `a` at 512..2048 (three whole
        // blocks, no padding), `empty` at 2560, `b` at 3072..3584.
        let paths = [
            (write("a", 1536), Packing::Store),
            (write("empty", 0), Packing::Store),
            (write("b", 512), Packing::Store),
        ];
        let tar = Tar::of(root.path(), Path::new(""), &paths, 0).expect("laying out");
        assert!(tar.compressed(512..2048) && tar.compressed(1000..1001));
        assert!(tar.compressed(3072..3584));
        // A header's byte on either side.
        assert!(!tar.compressed(511..2048) && !tar.compressed(512..2049));
        assert!(!tar.compressed(2048..2560) && !tar.compressed(3071..3584));
        assert!(!tar.compressed(3072..3585));
        let deflate_b = [
            paths[0].clone(),
            paths[1].clone(),
            (paths[2].0.clone(), Packing::Deflate),
        ];
        let tar = Tar::of(root.path(), Path::new(""), &deflate_b, 0).expect("laying out");
        assert!(tar.compressed(512..2048) && !tar.compressed(3072..3584));
    }

    #[test]
    fn every_file_comes_back_whole_under_its_prefix_with_fixed_metadata() {
        let root = tempfile::tempdir().expect("a scratch directory");
        let files = files(root.path());
        let paths = deflated(&files);
        let gz = tar_gz(Vec::new(), root.path(), Path::new("top"), &paths, 1234)
            .expect("archiving scratch files");
        let mut tar = tar::Archive::new(GzDecoder::new(&gz[..]));
        let mut regular = Vec::new();
        for entry in tar.entries().expect("a tar stream") {
            let mut entry = entry.expect("an entry");
            let h = entry.header();
            assert_eq!(
                (h.mtime().ok(), h.uid().ok(), h.gid().ok()),
                (Some(1234), Some(0), Some(0))
            );
            let path = entry.path().expect("a path").into_owned();
            if h.entry_type().is_dir() {
                assert_eq!(h.mode().ok(), Some(0o700), "{}", path.display());
                continue;
            }
            assert_eq!(h.mode().ok(), Some(0o600), "{}", path.display());
            let mut data = Vec::new();
            entry.read_to_end(&mut data).expect("an entry's data");
            regular.push((path, data));
        }
        let expected: Vec<(PathBuf, Vec<u8>)> = files
            .into_iter()
            .map(|(p, d)| (Path::new("top").join(p), d))
            .collect();
        assert_eq!(regular, expected);
    }

    #[test]
    fn a_file_that_shrank_after_its_header_is_an_error() {
        let root = tempfile::tempdir().expect("a scratch directory");
        let files = files(root.path());
        let paths = deflated(&files);
        let tar = Tar::of(root.path(), Path::new("top"), &paths, 0).expect("laying out");
        std::fs::write(root.path().join("kernel/big"), b"short").expect("a scratch file");
        let mut out = Vec::new();
        let err = gzip(&mut out, LEVEL, &tar).expect_err("a file shorter than its header");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().starts_with("reading kernel/big: "), "{err}");
    }
}
