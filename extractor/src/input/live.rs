//! A region its writers are still recording, read from an ordinary file (a
//! crashring-user region in `/dev/shm` whose process runs on) as the
//! kernel module copies the generation it records for
//! `/dev/crashring-current` (FORMAT.md, "Reading a live region";
//! `kernel/crashring_snapshot.c`).
//!
//! A plain `pread` of a page its writer is rewriting can mix two of the
//! page's moments: the header of one and records of another, which a
//! reader would decode as events that never were. Here each ring page is
//! copied as a seqlock reader copies it: its `seq`, `flags`, then `commit`
//! and `count`, each by a read of its own, then the page, then `flags` and
//! `seq` again, and copied again when they changed. A page rewritten under
//! every try is shown as resetting, one whose bytes cannot be read as
//! corrupt. The tables are read until two reads agree; the header says
//! the copy is one ([`HEADER_FLAG_LIVE_COPY`]: its tails are older than
//! its pages) and the descriptors are those at the start, a user stream
//! handed to another holder since showing its pages unused.
//!
//! Each read of the file is a system call that completes before the next
//! one starts, which orders them as the barriers between the kernel
//! copier's loads do.

use crate::input::source::{FileOffset, Source, SourceError};
use pstore_ring::endian::{U16, U32};
use pstore_ring::layout::{
    PageHeader, RegionHeader, StreamDesc, DESC_SIZE, HEADER_FLAG_LIVE_COPY, HEADER_SIZE,
    PAGE_CLOSED, PAGE_MAGIC, PAGE_OPEN, PAGE_RESETTING, STREAM_CALLSITES, STREAM_USER,
};
use pstore_ring::read::{parse_header, HeaderError, HeaderTrust};
use pstore_ring::Endian;
use std::io;
use std::mem::offset_of;
use std::ops::Range;
use std::sync::Mutex;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Copies of a page, or of the tables, before it is given up (the
/// module's `CR_SNAPSHOT_TRIES`).
const TRIES: usize = 8;

/// Byte offsets of the page header's fields the copier reads alone.
const FLAGS_AT: u64 = offset_of!(PageHeader, flags) as u64;
const SEQ_AT: u64 = offset_of!(PageHeader, seq) as u64;
const COMMIT_AT: u64 = offset_of!(PageHeader, commit) as u64;

/// Why a live copy could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Read(#[from] SourceError),
    #[error("the region's header: {0}")]
    Header(#[from] HeaderError),
    #[error("the region claims {claims} bytes, but the file holds {holds}")]
    Short { claims: u64, holds: u64 },
    #[error(
        "stream descriptor {index}: its pages ({start:#x}, {bytes} bytes) start among the \
         descriptors or before the end of an earlier stream's pages, or end past the region's \
         {size} bytes, so they cannot be copied page by page"
    )]
    Layout {
        index: usize,
        start: u64,
        bytes: u64,
        size: u64,
    },
}

/// One stream's pages.
#[derive(Clone, Debug)]
struct Span {
    pages: Range<u64>,
    kind: u16,
    /// Its descriptor's offset in the region.
    desc_at: u64,
}

/// The copier's state: a ring page is copied whole and kept, so that
/// reads of any sizes see each page once (as the module's device does).
struct Held {
    at: Option<u64>,
    page: Vec<u8>,
}

/// `S` read as a live region, each page whole and consistent; or as it
/// is, when it is one already (the module's own copy).
pub struct LiveCopy<S> {
    inner: S,
    copier: Option<Copier>,
}

struct Copier {
    size: u64,
    page_size: u64,
    endian: Endian,
    /// The header, marked as a copy's, and the descriptors as they were
    /// at the start.
    header: RegionHeader,
    descs: Vec<u8>,
    desc_offset: u64,
    /// By where their pages start.
    spans: Vec<Span>,
    held: Mutex<Held>,
}

impl<S: Source> LiveCopy<S> {
    /// Starts a copy of the region at the start of `inner`.
    pub fn new(inner: S) -> Result<LiveCopy<S>, LiveError> {
        let mut header = RegionHeader::new_zeroed();
        inner.read_exact_at(FileOffset(0), header.as_mut_bytes())?;
        let info = parse_header(header.as_bytes(), HeaderTrust::Checksummed)?;
        // A page past the file's end is no page its writer left: the
        // module's copier refuses such a region too.
        if let Some(holds) = inner.len().filter(|&n| n < info.region_size) {
            return Err(LiveError::Short {
                claims: info.region_size,
                holds,
            });
        }
        if info.flags & HEADER_FLAG_LIVE_COPY != 0 {
            return Ok(LiveCopy {
                inner,
                copier: None,
            });
        }
        let e = info.endian;
        header.flags = U32::new(e, info.flags | HEADER_FLAG_LIVE_COPY);
        let crc = info.checksum.crc(&[&header.as_bytes()[..HEADER_SIZE - 4]]);
        header.header_crc = U32::new(e, crc);
        let desc_offset = u64::from(info.desc_offset);
        let mut descs = vec![0u8; usize::from(info.stream_count) * DESC_SIZE];
        read_steady(&inner, desc_offset, &mut descs)?;
        let page_size = u64::from(info.page_size);
        let mut spans: Vec<Span> = Vec::with_capacity(usize::from(info.stream_count));
        // Pages lie past the header and descriptors, which the copy
        // shows as they were at the start, and in the descriptors' order.
        let descs_end = desc_offset + descs.len() as u64;
        for (index, d) in descs.chunks_exact(DESC_SIZE).enumerate() {
            let Ok(desc) = StreamDesc::read_from_bytes(d) else {
                continue;
            };
            let start = desc.pages_offset.get(e);
            let bytes = u64::from(desc.page_count.get(e)) * page_size;
            let after = spans.last().map_or(descs_end, |s| s.pages.end);
            let end = start
                .checked_add(bytes)
                .filter(|&end| end <= info.region_size);
            let Some(end) = end.filter(|_| start >= after) else {
                return Err(LiveError::Layout {
                    index,
                    start,
                    bytes,
                    size: info.region_size,
                });
            };
            spans.push(Span {
                pages: start..end,
                kind: desc.kind.get(e),
                desc_at: desc_offset + (index * DESC_SIZE) as u64,
            });
        }
        Ok(LiveCopy {
            inner,
            copier: Some(Copier {
                size: info.region_size,
                page_size,
                endian: e,
                header,
                descs,
                desc_offset,
                spans,
                held: Mutex::new(Held {
                    at: None,
                    page: vec![0; page_size as usize],
                }),
            }),
        })
    }
}

impl<S: Source> Source for LiveCopy<S> {
    fn len(&self) -> Option<u64> {
        match &self.copier {
            Some(c) => Some(c.size),
            None => self.inner.len(),
        }
    }

    fn read_at(&self, offset: FileOffset, buf: &mut [u8]) -> io::Result<usize> {
        let Some(c) = &self.copier else {
            return self.inner.read_at(offset, buf);
        };
        let mut off = offset.0;
        let len = (buf.len() as u64).min(c.size.saturating_sub(off)) as usize;
        let mut done = 0;
        while done < len {
            let span = c.spans.iter().find(|s| s.pages.contains(&off));
            let n = match span {
                Some(span) if span.kind != STREAM_CALLSITES => {
                    let page =
                        span.pages.start + (off - span.pages.start) / c.page_size * c.page_size;
                    let mut held = c.held.lock().unwrap_or_else(|p| p.into_inner());
                    if held.at != Some(page) {
                        held.at = None;
                        c.copy_page(&self.inner, span, page, &mut held.page)
                            .map_err(io::Error::other)?;
                        held.at = Some(page);
                    }
                    let n = ((page + c.page_size - off) as usize).min(len - done);
                    let from = (off - page) as usize;
                    buf[done..done + n].copy_from_slice(&held.page[from..from + n]);
                    n
                }
                // Append-only, each entry checked by its own CRC.
                Some(span) => {
                    let n = ((span.pages.end - off) as usize).min(len - done);
                    read_all(&self.inner, off, &mut buf[done..done + n])?;
                    n
                }
                None => {
                    let next = c
                        .spans
                        .iter()
                        .map(|s| s.pages.start)
                        .filter(|&s| s > off)
                        .min()
                        .unwrap_or(c.size);
                    let n = ((next - off) as usize).min(len - done);
                    let out = &mut buf[done..done + n];
                    read_steady(&self.inner, off, out).map_err(io::Error::other)?;
                    put_fixed(c.header.as_bytes(), 0, off, out);
                    put_fixed(&c.descs, c.desc_offset, off, out);
                    n
                }
            };
            off += n as u64;
            done += n;
        }
        Ok(done)
    }
}

impl Copier {
    /// Copies the page at `at` of `span` into `page` as its writer left it
    /// at some moment.
    /// A file that ends before the page (cut since the start) is an
    /// error, not damage in the region.
    fn copy_page(
        &self,
        live: &dyn Source,
        span: &Span,
        at: u64,
        page: &mut [u8],
    ) -> Result<(), SourceError> {
        let mut steady = false;
        for _ in 0..TRIES {
            match self.try_page(live, at, page) {
                Ok(s) => steady = s,
                Err(SourceError::Io { .. }) => {
                    // Unreadable: a header no reader takes for a page, and
                    // nothing of a try's partial copy.
                    page.fill(0);
                    page[..4].copy_from_slice(&U32::new(self.endian, !PAGE_MAGIC).0);
                    return Ok(());
                }
                Err(cut) => return Err(cut),
            }
            if steady {
                break;
            }
        }
        if !steady {
            // Rewritten under every try: being reset, as a crash now
            // could leave it.
            page[FLAGS_AT as usize..][..2]
                .copy_from_slice(&U16::new(self.endian, PAGE_RESETTING).0);
        }
        if !self.same_holder(live, span) {
            page.fill(0);
        }
        Ok(())
    }

    /// One try at copying the page at `at`; whether it held still. Reads
    /// in the opposite order to the writer's stores (FORMAT.md, section
    /// 10): `seq`, `flags`, `commit` and `count`, the bytes, `flags`,
    /// `seq`. Taken when `seq` did not change, the page was not being
    /// reset, and its `flags` stayed or went from open to closed (the
    /// bytes up to the `commit` read are the same either way).
    fn try_page(&self, live: &dyn Source, at: u64, page: &mut [u8]) -> Result<bool, SourceError> {
        let e = self.endian;
        let seq = read_word::<8>(live, at + SEQ_AT)?;
        let flags = read_word::<2>(live, at + FLAGS_AT)?;
        let published = read_word::<8>(live, at + COMMIT_AT)?;
        live.read_exact_at(FileOffset(at), page)?;
        let flags_now = read_word::<2>(live, at + FLAGS_AT)?;
        let seq_now = read_word::<8>(live, at + SEQ_AT)?;
        // The fields as first read, in the copy's header.
        page[SEQ_AT as usize..][..8].copy_from_slice(&seq);
        page[FLAGS_AT as usize..][..2].copy_from_slice(&flags);
        page[COMMIT_AT as usize..][..8].copy_from_slice(&published);
        let (then, now) = (U16(flags).get(e), U16(flags_now).get(e));
        let mut steady =
            seq_now == seq && (now == then || (then == PAGE_OPEN && now == PAGE_CLOSED));
        if then == PAGE_RESETTING {
            // An unused page is all zeros, its flags a page being reset's.
            let h =
                PageHeader::read_from_bytes(&page[..size_of::<PageHeader>()]).map_err(|_| {
                    SourceError::Truncated {
                        offset: FileOffset(at),
                        wanted: size_of::<PageHeader>(),
                        got: page.len(),
                    }
                })?;
            steady &= h.seq.get(e) == 0 && h.magic.get(e) == 0;
        }
        Ok(steady)
    }

    /// Whether user stream `span` still has the holder it had at the
    /// start: a new holder's events are never shown under the old one's
    /// name. A descriptor that cannot be read is another holder's.
    fn same_holder(&self, live: &dyn Source, span: &Span) -> bool {
        if span.kind != STREAM_USER {
            return true;
        }
        let mut now = [0u8; DESC_SIZE];
        let then = (span.desc_at - self.desc_offset) as usize;
        live.read_exact_at(FileOffset(span.desc_at), &mut now)
            .is_ok()
            && self.descs[then..then + DESC_SIZE] == now
    }
}

/// `N` bytes at `at`, read by a read of their own.
fn read_word<const N: usize>(live: &dyn Source, at: u64) -> Result<[u8; N], SourceError> {
    let mut word = [0u8; N];
    live.read_exact_at(FileOffset(at), &mut word)?;
    Ok(word)
}

fn read_all(live: &dyn Source, at: u64, out: &mut [u8]) -> io::Result<()> {
    live.read_exact_at(FileOffset(at), out)
        .map_err(io::Error::other)
}

/// Bytes of the tables compared at a time: a second copy of them all
/// would double what a hostile layout (tables gigabytes long) costs.
const STEADY_CHUNK: usize = 64 << 10;

/// Reads `out.len()` bytes at `at` until two reads agree (at most
/// [`TRIES`]); still changing, the last read stands, each of its parts
/// checked by its own CRC, as a crash now would leave them.
fn read_steady(live: &dyn Source, at: u64, out: &mut [u8]) -> Result<(), SourceError> {
    live.read_exact_at(FileOffset(at), out)?;
    let mut again = vec![0u8; out.len().min(STEADY_CHUNK)];
    for _ in 1..TRIES {
        let mut agreed = true;
        for (from, part) in (at..)
            .step_by(STEADY_CHUNK)
            .zip(out.chunks_mut(STEADY_CHUNK))
        {
            let again = &mut again[..part.len()];
            live.read_exact_at(FileOffset(from), again)?;
            if again != part {
                part.copy_from_slice(again);
                agreed = false;
            }
        }
        if agreed {
            return Ok(());
        }
    }
    Ok(())
}

/// Puts `fixed`, the copy's bytes from region offset `start`, over those
/// of `out`, which holds the bytes from region offset `off`.
fn put_fixed(fixed: &[u8], start: u64, off: u64, out: &mut [u8]) {
    let from = off.max(start);
    let to = (off + out.len() as u64).min(start + fixed.len() as u64);
    if from < to {
        out[(from - off) as usize..(to - off) as usize]
            .copy_from_slice(&fixed[(from - start) as usize..(to - start) as usize]);
    }
}

#[cfg(test)]
pub(crate) mod tests;
