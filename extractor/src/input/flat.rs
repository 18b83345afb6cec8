//! makedumpfile's flattened format (`-F`, and QEMU `kdump-zlib/lzo/snappy`):
//! the bytes of a kdump-compressed or ELF file, as records saying "these
//! bytes belong at offset X", so the file can be written to a pipe.
//!
//! ```text
//! 0       "makedumpfile\0\0\0\0", type = 1 (BE i64), version = 1 (BE i64)
//! 4096    { offset: BE i64, size: BE i64, size bytes }  repeated
//! end     offset = -1, size = -1
//! ```
//!
//! [`FlatSource`] indexes the records once and then reads the reassembled
//! file directly: no `makedumpfile -R` step, no second copy. Where records
//! overlap the later one wins, as it would when reassembling; bytes no
//! record supplies read as zeros, as they would in the sparse file `-R`
//! writes, and [`Source::held_ranges`] says which those are, so that the
//! containers inside map them as lost memory, never as zeros.

use super::OpenError;
use crate::input::source::{FileOffset, Source, SourceError};
use pstore_ring::endian::{Endian, I64};
use std::collections::BTreeMap;
use std::io;
use std::mem::{offset_of, size_of};
use std::ops::Range;
use std::sync::Arc;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `struct makedumpfile_header`, at file offset 0, big-endian whatever
/// the machine, as are the record headers.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct MakedumpfileHeader {
    /// `signature`: "makedumpfile" NUL-padded (`SIG_LEN_MDF`, 16).
    signature: [u8; 16],
    /// `type`: `TYPE_FLAT_HEADER`, 1.
    ty: I64,
    /// `version`: `VERSION_FLAT_HEADER`, 1.
    version: I64,
}

/// `struct makedumpfile_data_header`: one record's header; `buf_size`
/// bytes of data follow it.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct MakedumpfileDataHeader {
    /// Where the data belongs in the reassembled file; `END_FLAG_FLAT_HEADER`
    /// (-1) ends the records.
    offset: I64,
    buf_size: I64,
}

const _: () = assert!(size_of::<MakedumpfileHeader>() == 32);
const _: () = assert!(size_of::<MakedumpfileDataHeader>() == 16);

/// The flattened format's byte order.
const BE: Endian = Endian::Big;
/// Where the records start: the header has a block of its own
/// (`MAX_SIZE_MDF_HEADER`).
const RECORDS_START: FileOffset = FileOffset(4096);
const RECORD_HEADER: u64 = size_of::<MakedumpfileDataHeader>() as u64;

/// A reassembled view of a flattened file.
pub struct FlatSource {
    inner: Arc<dyn Source>,
    /// Reassembled offset → (end, offset in the flattened file).
    pieces: BTreeMap<FileOffset, (FileOffset, FileOffset)>,
    len: u64,
    /// Record bytes indexed, overlaps counted twice: at most the flattened
    /// file's size.
    held: u64,
    warnings: Vec<String>,
}

fn invalid(field: &'static str, offset: FileOffset, why: impl Into<String>) -> OpenError {
    OpenError::invalid("flattened dump", field, offset, why)
}

impl FlatSource {
    pub fn open(inner: Arc<dyn Source>) -> Result<FlatSource, OpenError> {
        let mut head = MakedumpfileHeader::new_zeroed();
        inner.read_exact_at(FileOffset(0), head.as_mut_bytes())?;
        let at = |field| FileOffset(field as u64);
        let ty = head.ty.get(BE);
        if ty != 1 {
            return Err(invalid(
                "type",
                at(offset_of!(MakedumpfileHeader, ty)),
                format!("{ty}, expected 1"),
            ));
        }
        let version = head.version.get(BE);
        if version != 1 {
            return Err(invalid(
                "version",
                at(offset_of!(MakedumpfileHeader, version)),
                format!("{version}, expected 1"),
            ));
        }
        let mut flat = FlatSource {
            inner,
            pieces: BTreeMap::new(),
            len: 0,
            held: 0,
            warnings: Vec::new(),
        };
        flat.index()?;
        Ok(flat)
    }

    /// What was wrong with the records that did not stop reading.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Walks the records. Each step moves forward in the flattened file,
    /// so the walk ends; a record that runs past the end keeps what is
    /// there and ends the walk with a warning.
    fn index(&mut self) -> Result<(), OpenError> {
        let total = self.inner.len();
        let mut at = RECORDS_START;
        loop {
            let mut rh = MakedumpfileDataHeader::new_zeroed();
            match self.inner.read_exact_at(at, rh.as_mut_bytes()) {
                Ok(()) => {}
                Err(SourceError::Truncated { .. }) => {
                    self.warnings.push(format!(
                        "the flattened file ends at {at:#x} without its end marker; records up to there are used"
                    ));
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            let (offset, size) = (rh.offset.get(BE), rh.buf_size.get(BE));
            if offset == -1 {
                return Ok(());
            }
            let (Ok(offset), Ok(size)) = (u64::try_from(offset), u64::try_from(size)) else {
                return Err(invalid(
                    "record",
                    at,
                    format!("offset {offset} and size {size} must not be negative"),
                ));
            };
            let data = at + RECORD_HEADER;
            let have = total.map_or(size, |total| total.saturating_sub(data.0).min(size));
            let end = offset.checked_add(have).ok_or_else(|| {
                invalid("record offset", at, format!("{offset:#x} + {size} wraps"))
            })?;
            self.insert(FileOffset(offset), FileOffset(end), data);
            self.len = self.len.max(end);
            self.held += have;
            if have < size {
                self.warnings.push(format!(
                    "the record at {at:#x} holds {size} bytes but the file ends after {have}; the rest is missing"
                ));
                return Ok(());
            }
            at = data + size;
        }
    }

    /// Adds a record over whatever earlier records it covers.
    fn insert(&mut self, start: FileOffset, end: FileOffset, src: FileOffset) {
        if start == end {
            return;
        }
        // Trim or split earlier pieces that overlap [start, end).
        let overlapping: Vec<(FileOffset, (FileOffset, FileOffset))> = self
            .pieces
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(s, v)| (*s, *v))
            .collect();
        for (s, (e, o)) in overlapping {
            self.pieces.remove(&s);
            if s < start {
                self.pieces.insert(s, (start, o));
            }
            if e > end {
                self.pieces.insert(end, (e, o + (end - s)));
            }
        }
        self.pieces.insert(start, (end, src));
    }
}

impl Source for FlatSource {
    fn len(&self) -> Option<u64> {
        Some(self.len)
    }

    fn held(&self) -> Option<u64> {
        Some(self.held.min(self.len))
    }

    fn held_ranges(&self, range: Range<FileOffset>) -> Vec<Range<FileOffset>> {
        let mut out: Vec<Range<FileOffset>> = Vec::new();
        let first = self
            .pieces
            .range(..=range.start)
            .next_back()
            .map_or(range.start, |(s, _)| *s);
        for (&s, &(e, _)) in self.pieces.range(first..range.end) {
            let (from, to) = (s.max(range.start), e.min(range.end));
            if from >= to {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == from => last.end = to,
                _ => out.push(from..to),
            }
        }
        out
    }

    fn read_at(&self, offset: FileOffset, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.len.saturating_sub(offset.0)).unwrap_or(usize::MAX));
        let buf = &mut buf[..n];
        buf.fill(0);
        let end = offset + n as u64;
        let first = self
            .pieces
            .range(..=offset)
            .next_back()
            .map_or(offset, |(s, _)| *s);
        for (&s, &(e, src)) in self.pieces.range(first..end) {
            let from = s.max(offset);
            let to = e.min(end);
            if from >= to {
                continue;
            }
            let dst = &mut buf[(from - offset) as usize..(to - offset) as usize];
            self.inner
                .read_exact_at(src + (from - s), dst)
                .map_err(|e| io::Error::new(io::ErrorKind::UnexpectedEof, e))?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(records: &[(i64, &[u8])], end: bool) -> Vec<u8> {
        let mut f = b"makedumpfile\0\0\0\0".to_vec();
        f.extend(1i64.to_be_bytes());
        f.extend(1i64.to_be_bytes());
        f.resize(4096, 0);
        for (off, data) in records {
            f.extend(off.to_be_bytes());
            f.extend((data.len() as i64).to_be_bytes());
            f.extend(*data);
        }
        if end {
            f.extend((-1i64).to_be_bytes());
            f.extend((-1i64).to_be_bytes());
        }
        f
    }

    fn read_all(s: &FlatSource) -> Vec<u8> {
        let mut out = vec![0; s.len().unwrap() as usize];
        s.read_exact_at(FileOffset(0), &mut out).unwrap();
        out
    }

    #[test]
    fn records_reassemble_in_any_order_and_later_ones_win() {
        let f = flat(
            &[
                (6, b"world"),
                (0, b"hello "),
                (2, b"LL"),
                (20, b"!"),
                (8, b"RLDxx"),
            ],
            true,
        );
        let s = FlatSource::open(Arc::new(f)).unwrap();
        assert!(s.warnings().is_empty());
        assert_eq!(read_all(&s), b"heLLo woRLDxx\0\0\0\0\0\0\0!");
        let mut mid = [0u8; 4];
        s.read_exact_at(FileOffset(3), &mut mid).unwrap();
        assert_eq!(&mid, b"Lo w");
    }

    #[test]
    fn a_cut_file_keeps_what_is_there() {
        let mut f = flat(&[(0, b"abcdef"), (6, b"ghijkl")], false);
        f.truncate(f.len() - 3);
        let s = FlatSource::open(Arc::new(f)).unwrap();
        assert_eq!(read_all(&s), b"abcdefghi");
        assert_eq!(s.warnings().len(), 1);
    }

    #[test]
    fn headers_sit_where_makedumpfile_puts_them() {
        assert_eq!(offset_of!(MakedumpfileHeader, ty), 16);
        assert_eq!(offset_of!(MakedumpfileHeader, version), 24);
        assert_eq!(size_of::<MakedumpfileHeader>(), 32);
        assert_eq!(offset_of!(MakedumpfileDataHeader, buf_size), 8);
        assert_eq!(size_of::<MakedumpfileDataHeader>(), 16);
    }

    #[test]
    fn a_header_of_another_type_or_version_is_refused_naming_the_field() {
        for (at, field) in [(16, "type"), (24, "version")] {
            let mut f = flat(&[(0, b"ab")], true);
            f[at..at + 8].copy_from_slice(&(-2i64).to_be_bytes());
            let err = FlatSource::open(Arc::new(f)).err().unwrap().to_string();
            assert_eq!(
                err,
                format!("invalid flattened dump `{field}` at file offset {at:#x}: -2, expected 1")
            );
        }
    }

    #[test]
    fn negative_records_are_refused_with_their_offset() {
        let f = flat(&[(0, b"ab"), (-5, b"cd")], true);
        let err = FlatSource::open(Arc::new(f)).err().unwrap().to_string();
        assert!(err.contains("0x1012"), "{err}");
    }
}
