//! Byte sources: where a container's bytes come from.
//!
//! A [`Source`] reads by file offset. Regular files and character devices
//! (`/dev/dax*`) can also lend a zero-copy window ([`Source::window`]), which
//! the region scan uses to search gigabytes without copying them; windows
//! are mapped one at a time, so memory use follows the window, not the file.
//! Block devices (`/dev/pmem*`) and `/dev/mem` are read with `pread`.

use memmap2::{Mmap, MmapOptions};
use std::fmt;
use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::ops::{Add, Deref, Range, Sub};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;

/// A byte's place in a source: an offset into the file as it is read
/// (for a flattened file, into the file it reassembles to). Not a physical
/// address: a container says where memory is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileOffset(pub u64);

impl FileOffset {
    /// The offset `bytes` on, unless that is past 2^64.
    pub fn checked_add(self, bytes: u64) -> Option<FileOffset> {
        self.0.checked_add(bytes).map(FileOffset)
    }

    /// The offset `bytes` on, or the last one there is.
    pub fn saturating_add(self, bytes: u64) -> FileOffset {
        FileOffset(self.0.saturating_add(bytes))
    }
}

/// The offset `bytes` on.
impl Add<u64> for FileOffset {
    type Output = FileOffset;
    fn add(self, bytes: u64) -> FileOffset {
        FileOffset(self.0 + bytes)
    }
}

/// Bytes from the right-hand offset up to the left-hand one.
impl Sub for FileOffset {
    type Output = u64;
    fn sub(self, base: FileOffset) -> u64 {
        self.0 - base.0
    }
}

impl fmt::LowerHex for FileOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Why bytes could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("file offset {offset:#x}: the input ends after {got} of {wanted} bytes")]
    Truncated {
        offset: FileOffset,
        wanted: usize,
        got: usize,
    },
    #[error("reading file offset {offset:#x}: {source}")]
    Io {
        offset: FileOffset,
        source: io::Error,
    },
}

/// Bytes at file offsets. Implementations must be safe to share: readers
/// read concurrently and never seek.
pub trait Source: Send + Sync {
    /// Bytes in the source; `None` when it has no size (`/dev/mem`).
    fn len(&self) -> Option<u64>;

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end.
    fn read_at(&self, offset: FileOffset, buf: &mut [u8]) -> io::Result<usize>;

    /// A zero-copy view of `len` bytes at `offset`, where the source can
    /// lend one. `None` means "copy with `read_at` instead".
    fn window(&self, _offset: FileOffset, _len: usize) -> Option<Window> {
        None
    }

    /// Bytes the source really holds. Less than [`Source::len`] where
    /// reads of unheld bytes give zeros (a flattened file's gaps), so that
    /// readers can bound what they allocate by what the input contains.
    /// `None` when the source has no size.
    fn held(&self) -> Option<u64> {
        self.len()
    }

    /// The parts of `range` the source really holds, in order and joined
    /// where they touch. Containers map only these as present memory: a
    /// flattened file's gaps are not in the dump, whatever they read as.
    fn held_ranges(&self, range: Range<FileOffset>) -> Vec<Range<FileOffset>> {
        let end = self
            .len()
            .map_or(range.end, |len| range.end.min(FileOffset(len)));
        std::iter::once(range.start..end)
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// Whether the source has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, offset: FileOffset, buf: &mut [u8]) -> Result<(), SourceError> {
        let mut got = 0;
        while got < buf.len() {
            let at = offset.saturating_add(got as u64);
            match self.read_at(at, &mut buf[got..]) {
                Ok(0) => {
                    return Err(SourceError::Truncated {
                        offset,
                        wanted: buf.len(),
                        got,
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(SourceError::Io { offset: at, source }),
            }
        }
        Ok(())
    }
}

/// A mapped window of a source.
pub struct Window(Mmap);

impl Deref for Window {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A file or device opened for reading.
pub struct FileSource {
    file: File,
    /// `None` for a device that has no size (`/dev/mem`).
    len: Option<u64>,
    mappable: bool,
    /// Device DAX: `read` is not supported, every read goes through a map.
    map_only: bool,
}

impl FileSource {
    /// Opens `path`. Regular files and DAX character devices are mapped
    /// window by window; block devices are read; other character devices
    /// are read, with the length they seek to (`/dev/crashring-current`)
    /// or none (`/dev/mem`).
    pub fn open(path: &Path) -> io::Result<FileSource> {
        let mut file = File::open(path)?;
        let ty = file.metadata()?.file_type();
        let (len, mappable, map_only) = if ty.is_file() {
            (Some(file.metadata()?.len()), true, false)
        } else if ty.is_block_device() {
            (Some(file.seek(SeekFrom::End(0))?), false, false)
        } else if ty.is_char_device() {
            match dax_size(path) {
                Some(len) => (Some(len), true, true),
                None => (char_device_size(&mut file), false, false),
            }
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a file or a device",
            ));
        };
        Ok(FileSource {
            file,
            len,
            mappable,
            map_only,
        })
    }
}

/// A character device's size where it has one: `/dev/crashring-current`
/// seeks like a file of the region's size; `/dev/mem` refuses to seek from
/// its end, and devices that seek nowhere say 0.
fn char_device_size(file: &mut File) -> Option<u64> {
    let len = file.seek(SeekFrom::End(0)).ok().filter(|&n| n > 0)?;
    file.seek(SeekFrom::Start(0)).ok()?;
    Some(len)
}

/// A device-DAX node's size, from sysfs (such devices cannot be read, only
/// mapped, and report no size of their own).
fn dax_size(path: &Path) -> Option<u64> {
    let name = path.canonicalize().ok()?;
    let name = name.file_name()?.to_str()?;
    if !name.starts_with("dax") {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/bus/dax/devices/{name}/size")).ok()?;
    text.trim().parse().ok()
}

impl Source for FileSource {
    fn len(&self) -> Option<u64> {
        self.len
    }

    fn read_at(&self, offset: FileOffset, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.len {
            Some(len) => {
                let room = len.saturating_sub(offset.0);
                buf.len().min(usize::try_from(room).unwrap_or(usize::MAX))
            }
            None => buf.len(),
        };
        if self.map_only {
            return match self.window(offset, n) {
                Some(w) => {
                    buf[..n].copy_from_slice(&w);
                    Ok(n)
                }
                None => Ok(0),
            };
        }
        self.file.read_at(&mut buf[..n], offset.0)
    }

    fn window(&self, offset: FileOffset, len: usize) -> Option<Window> {
        if !self.mappable || len == 0 || offset.0.checked_add(len as u64)? > self.len? {
            return None;
        }
        // SAFETY: mapping is unsafe because another process may truncate or
        // modify the file while it is mapped. Dumps are evidence nobody
        // writes while we read them; if one does, we see changed bytes,
        // which every parser here treats as untrusted anyway. A truncation
        // under us would fault: the same risk every mmap reader accepts.
        let map = unsafe { MmapOptions::new().offset(offset.0).len(len).map(&self.file) };
        map.ok().map(Window)
    }
}

/// An in-memory source, for tests and small inputs.
impl Source for Vec<u8> {
    fn len(&self) -> Option<u64> {
        Some(self.as_slice().len() as u64)
    }

    fn read_at(&self, offset: FileOffset, buf: &mut [u8]) -> io::Result<usize> {
        let Some(rest) = usize::try_from(offset.0).ok().and_then(|o| self.get(o..)) else {
            return Ok(0);
        };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_print_and_count_as_the_numbers_they_wrap() {
        let o = FileOffset(0x1ac);
        assert_eq!(format!("{o:#x} {o:x}"), "0x1ac 1ac");
        assert_eq!(o + 4, FileOffset(0x1b0));
        assert_eq!(FileOffset(0x1b0) - o, 4);
        assert_eq!(o.checked_add(u64::MAX), None);
        assert_eq!(o.saturating_add(u64::MAX), FileOffset(u64::MAX));
    }

    #[test]
    fn a_short_source_says_where_and_how_much_it_lacked() {
        let source = vec![7u8; 10];
        let mut buf = [0u8; 4];
        source.read_exact_at(FileOffset(6), &mut buf).unwrap();
        let err = source.read_exact_at(FileOffset(8), &mut buf).unwrap_err();
        assert_eq!(
            err.to_string(),
            "file offset 0x8: the input ends after 2 of 4 bytes"
        );
        assert_eq!(
            source.held_ranges(FileOffset(4)..FileOffset(20)),
            [FileOffset(4)..FileOffset(10)]
        );
    }
}
