//! One physical-memory view over every container.
//!
//! A container says which physical ranges it holds ([`MemoryMap`]) and
//! reads by physical address ([`PhysMemory::read`]). A read fails at the
//! first byte the dump does not hold and says why, so a hole is reported as
//! a hole: excluded by the dump's filter, lost by an incomplete dump, or not
//! in the dump at all. Nothing is ever filled with zeros on the reader's
//! behalf.

use crate::input::source::{FileOffset, SourceError, Window};
use std::fmt;
use std::ops::{Add, Range, Sub};

/// A physical address: where a byte is in the crashed machine's memory.
/// Not a file offset ([`FileOffset`]) nor a place in a region
/// (`discover::RegionOffset`): only a container knows how one maps to the
/// others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysAddr(pub u64);

impl PhysAddr {
    /// The address `bytes` on, unless that is past 2^64.
    pub fn checked_add(self, bytes: u64) -> Option<PhysAddr> {
        self.0.checked_add(bytes).map(PhysAddr)
    }

    /// Bytes from `base` up to this address, unless `base` is above it.
    pub fn checked_offset_from(self, base: PhysAddr) -> Option<u64> {
        self.0.checked_sub(base.0)
    }
}

/// The address `bytes` on.
impl Add<u64> for PhysAddr {
    type Output = PhysAddr;
    fn add(self, bytes: u64) -> PhysAddr {
        PhysAddr(self.0 + bytes)
    }
}

/// Bytes from the right-hand address up to the left-hand one.
impl Sub for PhysAddr {
    type Output = u64;
    fn sub(self, base: PhysAddr) -> u64 {
        self.0 - base.0
    }
}

impl fmt::LowerHex for PhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// What a dump holds for a range of physical memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// The bytes are in the dump.
    Present,
    /// RAM the dump's filter left out (makedumpfile `-d`, QEMU's filter).
    Excluded,
    /// RAM an incomplete dump meant to write and did not.
    Lost,
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backing::Present => "present",
            Backing::Excluded => "excluded by the dump's filter",
            Backing::Lost => "lost (incomplete dump)",
        })
    }
}

/// A physical range `[start, end)` and what the dump holds for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: PhysAddr,
    pub end: PhysAddr,
    pub backing: Backing,
    /// Where the container stores `start` plainly, for containers that do
    /// (raw images, ELF cores); `None` for compressed pages and holes.
    pub offset: Option<FileOffset>,
}

impl Run {
    /// Memory the dump meant to hold and does not.
    pub fn lost(range: Range<PhysAddr>) -> Run {
        Run {
            start: range.start,
            end: range.end,
            backing: Backing::Lost,
            offset: None,
        }
    }

    /// Whether `next` continues this run: same backing, and file bytes
    /// that follow on where there are any.
    fn continued_by(&self, next: &Run) -> bool {
        self.end == next.start
            && self.backing == next.backing
            && match (self.offset, next.offset) {
                (None, None) => true,
                (Some(a), Some(b)) => a.checked_add(self.end - self.start) == Some(b),
                _ => false,
            }
    }
}

/// Sorted, non-overlapping runs. Anything not covered is outside the dump.
#[derive(Clone, Debug, Default)]
pub struct MemoryMap {
    runs: Vec<Run>,
}

impl MemoryMap {
    /// Builds a map from runs in any order. Where runs overlap, present
    /// bytes win over a hole: two ELF segments may claim the same memory,
    /// one storing it and the other leaving it out (a segment's filtered
    /// tail past its `p_filesz`), and the bytes stored are the memory's
    /// bytes. Otherwise the run starting first wins, and of two starting
    /// together the one given first (an ELF core maps the kernel image
    /// twice: by its text address and in the direct map). Adjacent runs of
    /// the same backing are joined.
    pub fn new(runs: Vec<Run>) -> MemoryMap {
        let (present, holes): (Vec<Run>, Vec<Run>) = runs
            .into_iter()
            .filter(|r| r.start < r.end)
            .partition(|r| r.backing == Backing::Present);
        let present = first_wins(present);
        // Each present run cuts at most one hole run in two, so the runs
        // stay fewer than twice those given.
        let mut runs = without(first_wins(holes), &present);
        runs.extend(present);
        runs.sort_by_key(|r| r.start);
        let mut out: Vec<Run> = Vec::with_capacity(runs.len());
        for r in runs {
            match out.last_mut() {
                Some(last) if last.continued_by(&r) => last.end = r.end,
                _ => out.push(r),
            }
        }
        MemoryMap { runs: out }
    }

    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The run holding `addr`, if the dump covers it at all.
    pub fn lookup(&self, addr: PhysAddr) -> Option<&Run> {
        let i = self.runs.partition_point(|r| r.end <= addr);
        self.runs.get(i).filter(|r| r.start <= addr)
    }

    /// Where the hole `addr` lies in ends, for one cause: the end of its
    /// excluded or lost run, or, when the dump does not cover `addr` at
    /// all, the start of the next run (the top of the address space past
    /// the last). `None` when `addr` is present. With [`hole_at`], a
    /// reader of a multi-GiB hole learns its extent in one step instead of
    /// page by page.
    pub fn hole_end(&self, addr: PhysAddr) -> Option<PhysAddr> {
        let i = self.runs.partition_point(|r| r.end <= addr);
        match self.runs.get(i) {
            Some(r) if r.start <= addr => (r.backing != Backing::Present).then_some(r.end),
            Some(r) => Some(r.start),
            None => Some(PhysAddr(u64::MAX)),
        }
    }

    /// Bytes of memory present in the dump.
    pub fn present_bytes(&self) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.backing == Backing::Present)
            .map(|r| r.end - r.start)
            .sum()
    }

    /// Bytes of memory the dump meant to hold and does not (cut short,
    /// records missing, pages never written).
    pub fn lost_bytes(&self) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.backing == Backing::Lost)
            .map(|r| r.end - r.start)
            .sum()
    }

    /// Present runs only.
    pub fn present(&self) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(|r| r.backing == Backing::Present)
    }
}

/// `runs` sorted and apart: where runs overlap, the one starting first
/// keeps the bytes, and of two starting together the one given first.
fn first_wins(mut runs: Vec<Run>) -> Vec<Run> {
    // Stable: among equal starts, the one given first stays first.
    runs.sort_by_key(|r| r.start);
    let mut out: Vec<Run> = Vec::with_capacity(runs.len());
    for mut r in runs {
        if let Some(last) = out.last() {
            if r.start < last.end {
                if r.end <= last.end {
                    continue;
                }
                r.offset = r.offset.map(|o| o + (last.end - r.start));
                r.start = last.end;
            }
        }
        out.push(r);
    }
    out
}

/// What is left of `runs` (sorted and apart) outside `cut` (sorted and
/// apart): each run split around the runs of `cut` it overlaps.
fn without(runs: Vec<Run>, cut: &[Run]) -> Vec<Run> {
    let mut out = Vec::with_capacity(runs.len());
    for r in runs {
        let piece = |start: PhysAddr, end: PhysAddr| Run {
            start,
            end,
            offset: r.offset.map(|o| o + (start - r.start)),
            ..r
        };
        let mut at = r.start;
        let mut i = cut.partition_point(|c| c.end <= r.start);
        while let Some(c) = cut.get(i).filter(|c| c.start < r.end) {
            if at < c.start {
                out.push(piece(at, c.start));
            }
            at = at.max(c.end);
            i += 1;
        }
        if at < r.end {
            out.push(piece(at, r.end));
        }
    }
    out
}

/// Why a physical read stopped.
#[derive(Debug, thiserror::Error)]
pub enum PhysError {
    #[error("physical address {addr:#x} is not in the dump")]
    Outside { addr: PhysAddr },
    #[error("physical address {addr:#x}: page {backing}")]
    Hole { addr: PhysAddr, backing: Backing },
    #[error("physical address {addr:#x}: {what}")]
    Corrupt { addr: PhysAddr, what: String },
    #[error("physical address {addr:#x}: {source}")]
    Source { addr: PhysAddr, source: SourceError },
}

impl PhysError {
    /// The first physical address that could not be read.
    pub fn addr(&self) -> PhysAddr {
        match *self {
            PhysError::Outside { addr }
            | PhysError::Hole { addr, .. }
            | PhysError::Corrupt { addr, .. }
            | PhysError::Source { addr, .. } => addr,
        }
    }
}

/// Physical memory as a dump holds it.
pub trait PhysMemory: Send + Sync {
    fn map(&self) -> &MemoryMap;

    /// Fills `buf` from `addr` on. Fails at the first byte the dump does
    /// not hold; bytes before it may have been written. An empty read
    /// succeeds.
    fn read(&self, addr: PhysAddr, buf: &mut [u8]) -> Result<(), PhysError>;

    /// A zero-copy view of present memory at `addr`, where the container
    /// stores it plainly in a mappable file. `None` means "use `read`".
    fn window(&self, _addr: PhysAddr, _len: usize) -> Option<Window> {
        None
    }
}

/// Fills `buf` from `addr` piece by piece: `piece(at, rest)` fills a
/// prefix of `rest` with the memory at `at` and returns its length (at
/// least 1), so containers only say how far one contiguous piece goes.
pub fn read_pieces(
    addr: PhysAddr,
    buf: &mut [u8],
    mut piece: impl FnMut(PhysAddr, &mut [u8]) -> Result<usize, PhysError>,
) -> Result<(), PhysError> {
    let mut done = 0;
    while done < buf.len() {
        let at = addr.checked_add(done as u64).ok_or(PhysError::Outside {
            addr: PhysAddr(u64::MAX),
        })?;
        done += piece(at, &mut buf[done..])?.max(1);
    }
    Ok(())
}

/// The hole error for `addr` by the map, for a container whose read found
/// no data there.
pub fn hole_at(map: &MemoryMap, addr: PhysAddr) -> PhysError {
    match map.lookup(addr) {
        Some(r) if r.backing != Backing::Present => PhysError::Hole {
            addr,
            backing: r.backing,
        },
        _ => PhysError::Outside { addr },
    }
}

/// Bytes a search of all memory looks at per step.
pub const SEARCH_CHUNK: usize = 8 << 20;
/// The granule of [`present_chunks`]' reads around a hole.
const PAGE: usize = 4096;

/// Calls `visit` with all present memory, [`SEARCH_CHUNK`] bytes at a time from
/// the dump's own mapping where it has one; the bytes of a hole inside a
/// chunk read as zeros (zeros hold no magic). Consecutive chunks overlap
/// by `overlap` bytes, so that a pattern across two is seen. `progress` is
/// called with the bytes searched so far.
pub fn present_chunks(
    mem: &dyn PhysMemory,
    overlap: usize,
    progress: &mut dyn FnMut(u64),
    visit: &mut dyn FnMut(PhysAddr, &[u8]),
) {
    let mut searched = 0u64;
    let mut buf = Vec::new();
    let runs: Vec<_> = mem.map().present().copied().collect();
    for run in runs {
        let mut addr = run.start;
        while addr < run.end {
            let len = usize::try_from(run.end - addr)
                .unwrap_or(usize::MAX)
                .min(SEARCH_CHUNK);
            let window = mem.window(addr, len);
            let chunk: &[u8] = match &window {
                Some(w) => w,
                None => {
                    buf.resize(len, 0);
                    fill_skipping_holes(mem, addr, &mut buf);
                    &buf
                }
            };
            visit(addr, chunk);
            let step = if len == SEARCH_CHUNK {
                len - overlap
            } else {
                len
            };
            addr = addr + step as u64;
            searched += step as u64;
            progress(searched);
        }
    }
}

/// Reads `buf.len()` bytes at `addr`, leaving zeros where the dump has
/// none (zeros hold no magic, so nothing is found there).
fn fill_skipping_holes(mem: &dyn PhysMemory, addr: PhysAddr, buf: &mut [u8]) {
    if mem.read(addr, buf).is_ok() {
        return;
    }
    let mut at = 0;
    while at < buf.len() {
        let g = (buf.len() - at).min(PAGE - (addr.0 as usize + at) % PAGE);
        if mem.read(addr + at as u64, &mut buf[at..at + g]).is_err() {
            buf[at..at + g].fill(0);
        }
        at += g;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, end: u64, backing: Backing) -> Run {
        Run {
            start: PhysAddr(start),
            end: PhysAddr(end),
            backing,
            offset: None,
        }
    }

    #[test]
    fn addresses_print_and_count_as_the_numbers_they_wrap() {
        let a = PhysAddr(0x3_0000);
        // Messages print addresses with `{:#x}`; the flags pass through.
        assert_eq!(
            format!("{a:#x} {a:x} {a:#010x}"),
            "0x30000 30000 0x00030000"
        );
        assert_eq!(a + 0x10, PhysAddr(0x3_0010));
        assert_eq!(PhysAddr(0x3_0010) - a, 0x10);
        assert_eq!(a.checked_add(u64::MAX), None);
        assert_eq!(
            PhysAddr(u64::MAX - 1).checked_add(1),
            Some(PhysAddr(u64::MAX))
        );
        assert_eq!(a.checked_offset_from(PhysAddr(0x2_0000)), Some(0x1_0000));
        assert_eq!(PhysAddr(0x2_0000).checked_offset_from(a), None);
    }

    #[test]
    fn overlaps_keep_the_first_given_and_neighbours_join() {
        let map = MemoryMap::new(vec![
            run(0x1000, 0x3000, Backing::Present),
            run(0x2000, 0x5000, Backing::Excluded),
            run(0x0, 0x1000, Backing::Present),
            run(0x8000, 0x9000, Backing::Present),
            run(0x8000, 0x8800, Backing::Lost),
        ]);
        assert_eq!(
            map.runs(),
            &[
                run(0x0, 0x3000, Backing::Present),
                run(0x3000, 0x5000, Backing::Excluded),
                run(0x8000, 0x9000, Backing::Present),
            ]
        );
        let at = PhysAddr;
        assert_eq!(
            map.lookup(at(0x4fff)).map(|r| r.backing),
            Some(Backing::Excluded)
        );
        assert!(map.lookup(at(0x5000)).is_none());
        assert!(map.lookup(at(u64::MAX)).is_none());
        assert_eq!(map.present_bytes(), 0x4000);
        assert_eq!(map.hole_end(at(0x2fff)), None);
        assert_eq!(map.hole_end(at(0x3000)), Some(at(0x5000)));
        assert_eq!(map.hole_end(at(0x5000)), Some(at(0x8000)));
        assert_eq!(map.hole_end(at(0x9000)), Some(at(u64::MAX)));
    }

    #[test]
    fn present_bytes_win_over_a_hole_claiming_them() {
        // An ELF segment's filtered tail (past p_filesz) over another
        // segment's stored bytes: those bytes are in the dump.
        let at = |start, end, offset| Run {
            offset: Some(FileOffset(offset)),
            ..run(start, end, Backing::Present)
        };
        let map = MemoryMap::new(vec![
            run(0x8000, 0x10000, Backing::Excluded),
            at(0x9000, 0xA000, 0x2000),
            at(0xC000, 0xC800, 0x3000),
            // Starting before the hole and ending inside it.
            at(0x7000, 0x8800, 0x5000),
            // A lost stretch wholly under present bytes is gone.
            run(0xC100, 0xC200, Backing::Lost),
        ]);
        assert_eq!(
            map.runs(),
            &[
                at(0x7000, 0x8800, 0x5000),
                run(0x8800, 0x9000, Backing::Excluded),
                at(0x9000, 0xA000, 0x2000),
                run(0xA000, 0xC000, Backing::Excluded),
                at(0xC000, 0xC800, 0x3000),
                run(0xC800, 0x10000, Backing::Excluded),
            ]
        );
        let backing = |a| map.lookup(PhysAddr(a)).map(|r| r.backing);
        assert_eq!(backing(0x9000), Some(Backing::Present));
        assert_eq!(backing(0xA000), Some(Backing::Excluded));
        assert_eq!(map.hole_end(PhysAddr(0x9fff)), None);
        assert_eq!(map.hole_end(PhysAddr(0x8800)), Some(PhysAddr(0x9000)));
    }

    #[test]
    fn file_backed_runs_join_only_where_the_file_continues() {
        let at = |start, end, offset| Run {
            offset: Some(FileOffset(offset)),
            ..run(start, end, Backing::Present)
        };
        let map = MemoryMap::new(vec![
            at(0, 0x1000, 0x100),
            at(0x1000, 0x2000, 0x1100),
            at(0x2000, 0x3000, 0x9000),
            at(0x2800, 0x4000, 0x7000),
        ]);
        assert_eq!(
            map.runs(),
            &[
                at(0, 0x2000, 0x100),
                at(0x2000, 0x3000, 0x9000),
                at(0x3000, 0x4000, 0x7800),
            ]
        );
    }
}
