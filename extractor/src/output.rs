//! `crashring extract`'s output: the merged items of one region, selected
//! and written in the chosen format; and how every output file and
//! directory the CLI writes is created ([`NewFile`], [`create_dir`]).

use crate::jsonl;
use crate::select::Selection;
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{Region, Trace};
use pstore_ring::text::Line;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

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

/// The formats `extract` writes item by item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line ([`crate::jsonl`]).
    Jsonl,
    /// Chrome trace event JSON lines ([`crate::chrome`]), between
    /// [`crate::chrome::begin`] and [`crate::chrome::end`].
    Chrome,
    /// Perfetto trace packets ([`crate::perfetto`]), after
    /// [`crate::perfetto::begin`].
    Perfetto,
}

/// Items formatted per job: big enough that passing a job costs nothing
/// next to formatting it, small enough that memory stays a few MiB.
const CHUNK: usize = 16 * 1024;

/// Writes the items of `trace` that `selection` admits; `region_index` is
/// the region's place in `crashring info` order.
///
/// Merging is sequential, formatting (most of the cost) is not: this
/// thread merges the items into chunks and deals them round-robin to one
/// formatting thread per core, two chunks ahead, and writes the results
/// back in the order it dealt them, so the output is the same bytes
/// whatever the thread count. Item and text buffers go round and round
/// rather than being allocated per chunk.
pub fn write_items(
    out: &mut impl Write,
    region: &Region,
    trace: &Trace,
    selection: &Selection,
    format: Format,
    region_index: usize,
) -> io::Result<()> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut merged = merge(&trace.streams).filter(|item| selection.admits(item, region));
    let mut next_chunk = |items: &mut Vec<_>| refill(items, &mut merged);
    let format_chunk = |items: &[Item], text: &mut Vec<u8>| {
        text.clear();
        format_items(text, items, region, format, region_index)
    };
    // A lane's thread ends only if this one has gone, or panicked.
    let failed = || io::Error::other("a formatting thread stopped");
    let new_job = || Job {
        items: Vec::with_capacity(CHUNK),
        text: Vec::with_capacity(CHUNK * 128),
    };
    if workers == 1 {
        let mut job = new_job();
        while next_chunk(&mut job.items) {
            format_chunk(&job.items, &mut job.text);
            out.write_all(&job.text)?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let mut lanes = Vec::with_capacity(workers);
        for _ in 0..workers {
            // One job queued and one being formatted per lane.
            let (jobs, job_rx) = mpsc::sync_channel::<Job>(1);
            let (done_tx, done) = mpsc::sync_channel(1);
            scope.spawn(move || {
                for mut job in job_rx {
                    format_chunk(&job.items, &mut job.text);
                    if done_tx.send(job).is_err() {
                        return;
                    }
                }
            });
            lanes.push((jobs, done));
        }
        // Deal two chunks to every lane, then keep each lane two ahead.
        let mut dealt = 0usize;
        'deal: for _ in 0..2 {
            for (jobs, _) in &lanes {
                let mut job = new_job();
                if !next_chunk(&mut job.items) {
                    break 'deal;
                }
                jobs.send(job).map_err(|_| failed())?;
                dealt += 1;
            }
        }
        let mut n = 0;
        while n < dealt {
            let (jobs, done) = &lanes[n % workers];
            let mut job: Job = done.recv().map_err(|_| failed())?;
            out.write_all(&job.text)?;
            if next_chunk(&mut job.items) {
                jobs.send(job).map_err(|_| failed())?;
                dealt += 1;
            }
            n += 1;
        }
        Ok(())
    })
}

/// Refills `items` with the next [`CHUNK`] merged items; false when none
/// are left.
fn refill<'t, 'a: 't>(
    items: &mut Vec<Item<'t, 'a>>,
    merged: &mut impl Iterator<Item = Item<'t, 'a>>,
) -> bool {
    items.clear();
    items.extend(merged.take(CHUNK));
    !items.is_empty()
}

/// A chunk of merged items and the text they format to.
struct Job<'t, 'a> {
    items: Vec<Item<'t, 'a>>,
    text: Vec<u8>,
}

/// Appends `items` in `format`: one line each, except Perfetto's binary
/// packets.
fn format_items(
    text: &mut Vec<u8>,
    items: &[Item],
    region: &Region,
    format: Format,
    region_index: usize,
) {
    match format {
        Format::Text => {
            for item in items {
                Line::of(item, region).write_to(text);
                text.push(b'\n');
            }
        }
        Format::Perfetto => crate::perfetto::chunk(text, items, region, region_index),
        Format::Jsonl => {
            let mut values = Vec::with_capacity(16);
            for item in items {
                jsonl::write_item(text, item, region, region_index, &mut values);
                text.push(b'\n');
            }
        }
        Format::Chrome => crate::chrome::write_items(text, items, region, region_index),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::HeaderTrust;
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    #[test]
    fn many_chunks_come_out_in_merge_order() {
        let specs: Vec<StreamSpec> = (0..3).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 8 << 20];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        {
            let mut f = write::format(&mut buf, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            // Uneven streams and times, so the merge interleaves them.
            for i in 0..200_000u64 {
                let s = (i * 7 % 11 % 3) as usize;
                let _ = ws[s].write_event(i * 13 + s as u64, lost, &[Value::Unsigned(i)]);
            }
            ws.iter_mut().for_each(|w| w.close());
        }
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let mut want = Vec::new();
        for item in merge(&trace.streams) {
            Line::of(&item, &region).write_to(&mut want);
            want.push(b'\n');
        }
        assert!(want.iter().filter(|&&b| b == b'\n').count() > 10 * CHUNK);
        let mut got = Vec::new();
        write_items(
            &mut got,
            &region,
            &trace,
            &Selection::default(),
            Format::Text,
            0,
        )
        .unwrap();
        assert!(got == want);
    }
}
