//! makedumpfile's kdump-compressed format (`KDUMP   `, header version 6),
//! as makedumpfile `-c/-l/-p/-z` and QEMU `kdump-raw-*` write it.
//!
//! ```text
//! block 0                 disk_dump_header
//! block 1..               kdump_sub_header, VMCOREINFO, ELF notes
//! (1 + sub_hdr_size)·bs   1st bitmap (RAM), then 2nd bitmap (dumped)
//! … + bitmap_blocks·bs    page_desc[one per dumped page], 24 bytes each
//! then                    page data
//! ```
//!
//! A page whose 2nd-bitmap bit is clear was excluded by the filter (or is
//! no RAM, if its 1st-bitmap bit is clear too). Its descriptor is found by
//! counting the set bits before it; a prefix count every 4096 pages keeps
//! that cheap. A descriptor with offset 0 is a page an incomplete dump
//! lost. Only the 64-bit header layout is read, in either byte order;
//! its structures are in `layout.rs`, with makedumpfile's names.
//!
//! One file of a split dump (`makedumpfile --split`) has both bitmaps
//! whole but descriptors only for the dumped pages of its range, the
//! table starting with the range's first: pages outside the range are
//! not in it, and a descriptor's index counts from the range's start.
//!
//! Every descriptor is read once when the file is opened, so that pages
//! whose descriptor or data the file does not hold (a file cut short when
//! the disk filled, a flattened file's missing records) are lost memory in
//! the map and reported, never zeros: an uncompressed page would otherwise
//! read a flattened file's gap as a page of zeros. Bitmap bytes the
//! input lacks are not zeros either: the pages they describe are lost,
//! and so is every dumped page after them, whose descriptor index counts
//! the bits nobody has.

pub mod codecs;
mod layout;
mod lzo;

use super::{ContainerKind, Dump, OpenError};
use crate::input::source::{FileOffset, Source};
use crate::phys::{hole_at, read_pieces, Backing, MemoryMap, PhysAddr, PhysError, PhysMemory, Run};
use layout::{DiskDumpHeader, KdumpSubHeader, PageDesc, DUMP_DH_COMPRESSED_INCOMPLETE};
use pstore_ring::endian::{Endian, U32};
use std::mem::{offset_of, size_of};
use std::sync::{Arc, Mutex};
use zerocopy::{FromZeros, IntoBytes};

pub const MAGIC: &[u8; 8] = b"KDUMP   ";

/// Bytes per page descriptor.
const DESC_SIZE: u64 = size_of::<PageDesc>() as u64;
/// Pages per prefix-count entry.
const RANK_STEP: u64 = 4096;
/// The largest bitmap accepted, per half: 2^31 pages, 8 TiB of 4 KiB pages.
const MAX_BITMAP: u64 = 256 << 20;
/// Decompressed pages kept.
const CACHE_PAGES: usize = 64;
/// Runs of the memory map allowed beyond four per descriptor the input
/// holds: 2.5 MiB of them.
const MAX_SPARE_RUNS: usize = 1 << 16;
/// Descriptors read per step when the file is opened.
const DESC_CHUNK: u64 = 4096;
/// Where a header in the 32-bit layout is taken to hold `block_size`, to
/// say that layout is not read: 16 bytes before the 64-bit layout's, as
/// this check has always looked. (An i386 build of `diskdump_mod.h`,
/// with its 8-byte `timeval` 4-byte aligned, puts it 12 bytes before.)
const BLOCK_SIZE_32: usize = offset_of!(DiskDumpHeader, block_size) - 16;

/// The file offset of a `disk_dump_header` field, for messages: the
/// header is at offset 0.
macro_rules! header_at {
    ($field:ident) => {
        FileOffset(offset_of!(DiskDumpHeader, $field) as u64)
    };
}

fn invalid(field: &'static str, offset: FileOffset, why: impl Into<String>) -> OpenError {
    OpenError::invalid("kdump-compressed dump", field, offset, why)
}

/// A NUL-padded text field.
fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn plausible_block_size(bs: u32) -> bool {
    bs.is_power_of_two() && (512..=1 << 20).contains(&bs)
}

/// Whether the header reads sensibly in byte order `e`: a page-sized
/// block and a small version. One field alone is not enough (4096 read
/// the wrong way round is 1 MiB, also a power of two).
fn plausible(h: &DiskDumpHeader, e: Endian) -> bool {
    plausible_block_size(h.block_size.get(e)) && (1..=64).contains(&h.header_version.get(e))
}

pub fn open(source: Arc<dyn Source>) -> Result<Dump, OpenError> {
    let mut h = DiskDumpHeader::new_zeroed();
    source.read_exact_at(FileOffset(0), h.as_mut_bytes())?;
    let le = Endian::Little;
    let e = if plausible(&h, le) {
        le
    } else if plausible(&h, Endian::Big) {
        Endian::Big
    } else if plausible_block_size(h.block_size.get(le))
        || plausible_block_size(h.block_size.get(Endian::Big))
    {
        return Err(invalid(
            "header_version",
            header_at!(header_version),
            format!("{} is not a known version", h.header_version.get(le)),
        ));
    } else if h
        .as_bytes()
        .get(BLOCK_SIZE_32..BLOCK_SIZE_32 + 4)
        .and_then(|b| b.try_into().ok())
        .is_some_and(|b| plausible_block_size(U32(b).get(le)))
    {
        return Err(OpenError::Unsupported(
            "the input is a kdump-compressed dump with the 32-bit header layout, which crashring does not read".into(),
        ));
    } else {
        return Err(invalid(
            "block_size",
            header_at!(block_size),
            format!("{:#x} is not a page size", h.block_size.get(le)),
        ));
    };
    let version = h.header_version.get(e);
    let bs = u64::from(h.block_size.get(e));
    let sub_blocks = u64::from(h.sub_hdr_size.get(e));
    let bitmap_blocks = u64::from(h.bitmap_blocks.get(e));
    let status = h.status.get(e);

    // The sub-header is block 1.
    let sub_at = FileOffset(bs);
    let mut s = KdumpSubHeader::new_zeroed();
    source.read_exact_at(sub_at, s.as_mut_bytes())?;
    let (max_mapnr, max_mapnr_at) = if version >= 6 {
        (
            s.max_mapnr_64.get(e),
            sub_at + offset_of!(KdumpSubHeader, max_mapnr_64) as u64,
        )
    } else {
        (u64::from(h.max_mapnr.get(e)), header_at!(max_mapnr))
    };
    let bitmap_off = (1 + sub_blocks)
        .checked_mul(bs)
        .map(FileOffset)
        .ok_or_else(|| invalid("sub_hdr_size", header_at!(sub_hdr_size), "overflows"))?;
    let half = bitmap_blocks
        .checked_mul(bs)
        .map(|b| b / 2)
        .ok_or_else(|| invalid("bitmap_blocks", header_at!(bitmap_blocks), "overflows"))?;
    if half > MAX_BITMAP {
        return Err(invalid(
            "bitmap_blocks",
            header_at!(bitmap_blocks),
            format!("bitmaps of {half} bytes each, more than the {MAX_BITMAP} accepted"),
        ));
    }
    if half.saturating_mul(8) < max_mapnr {
        return Err(invalid(
            "bitmap_blocks",
            header_at!(bitmap_blocks),
            format!("bitmaps cover {} pages, max_mapnr is {max_mapnr}", half * 8),
        ));
    }
    let desc_off = bitmap_off + 2 * half;
    if let Some(len) = source.len().filter(|&len| desc_off > FileOffset(len)) {
        return Err(invalid(
            "bitmap_blocks",
            header_at!(bitmap_blocks),
            format!("the bitmaps end at {desc_off:#x}, past the end of the file ({len:#x})"),
        ));
    }
    // Only the pages max_mapnr covers are read; bits past it are ignored.
    let used = max_mapnr.div_ceil(8);
    if let Some(held) = source.held().filter(|&held| 2 * used > held) {
        return Err(invalid(
            "max_mapnr",
            max_mapnr_at,
            format!(
                "{max_mapnr} pages need {} bytes of bitmaps, more than the {held} bytes the input holds",
                2 * used,
            ),
        ));
    }
    let used = used as usize;
    let mut ram = vec![0u8; used];
    source.read_exact_at(bitmap_off, &mut ram)?;
    let mut dumped = vec![0u8; used];
    source.read_exact_at(bitmap_off + half, &mut dumped)?;

    let mut warnings = Vec::new();
    let mut range = 0..max_mapnr;
    // `split` and the range came in version 2; version 6 widened the range
    // to `start_pfn_64`/`end_pfn_64` and keeps the old fields, clamped to
    // 32 bits, only for older readers (makedumpfile's write_kdump_header).
    if version >= 2 && s.split.get(e) != 0 {
        let (a, b) = if version >= 6 {
            (s.start_pfn_64.get(e), s.end_pfn_64.get(e))
        } else {
            (s.start_pfn.get(e), s.end_pfn.get(e))
        };
        warnings.push(format!(
            "this file is one part of a split dump (pages {a:#x}..{b:#x}); the rest are in the other files"
        ));
        range = a.min(max_mapnr)..b.min(max_mapnr);
    }
    if status & DUMP_DH_COMPRESSED_INCOMPLETE != 0 {
        warnings.push(
            "the dump is incomplete (makedumpfile ran out of space): pages it did not write are lost"
                .into(),
        );
    }
    let vmcoreinfo = if version >= 3 {
        read_vmcoreinfo(
            &*source,
            FileOffset(s.offset_vmcoreinfo.get(e)),
            s.size_vmcoreinfo.get(e),
        )
    } else {
        None
    };
    let nr_cpus = h.nr_cpus.get(e);
    let mut ranks = Vec::with_capacity((max_mapnr / RANK_STEP + 1) as usize);
    let mut count = 0u64;
    for chunk in dumped.chunks((RANK_STEP / 8) as usize) {
        ranks.push(count);
        count += chunk.iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
    }
    // The total too, so that the rank of max_mapnr itself (a range's end)
    // is found where max_mapnr is a multiple of RANK_STEP.
    ranks.push(count);
    // A split file holds the whole 2nd bitmap but descriptors only for the
    // dumped pages of its range, from the start of the table
    // (write_kdump_pages_cyclic), as crash's pfn_to_pos counts them: a
    // page's descriptor index counts from the range's start.
    let first_rank = rank(&dumped, &ranks, range.start);
    let descs = rank(&dumped, &ranks, range.end).saturating_sub(first_rank);
    let missing = missing_pages(&*source, e, bs, desc_off, descs);
    let bitmap_at = [bitmap_off, bitmap_off + half];
    let unheld = bitmap_at.map(|at| unheld_bits(&*source, at, used as u64, max_mapnr));
    let lost = |cause| {
        missing
            .iter()
            .filter(|(_, c)| *c == cause)
            .map(|(r, _)| r.end - r.start)
            .sum::<u64>()
    };
    let (cut, gaps) = (lost(Missing::Cut), lost(Missing::Gap));
    // A run of pages costs the file nothing: bitmaps of alternating bits
    // make one per page, 40 bytes each, some 300 for each byte of bitmap
    // (a file of a few MiB would take GiBs). What a real dump splits its
    // memory into follows its descriptors: each present run holds one at
    // least, with an excluded run, a lost one, or a hole beside it. The
    // rest are allowed a fixed number, for the runs of RAM and for what a
    // file cut short lost.
    let held_descs = descs.saturating_sub(cut + gaps);
    let max_runs = usize::try_from(held_descs.saturating_mul(4))
        .unwrap_or(usize::MAX)
        .saturating_add(MAX_SPARE_RUNS);
    let mapped = runs(
        [&ram, &dumped],
        [&unheld[0], &unheld[1]],
        range,
        bs,
        &missing,
        max_runs,
    );
    let first = mapped.first;
    let map = MemoryMap::new(mapped.runs);
    let at = |cause: Missing| {
        first[cause as usize]
            .map(|a| format!(" (the first at physical address {a:#x})"))
            .unwrap_or_default()
    };
    // Only a source with an end can cut pages off.
    if let Some(len) = source.len().filter(|_| cut > 0) {
        warnings.push(format!(
            "the file is cut short: it ends at offset {len:#x}, before the descriptors or data of {cut} dumped pages{}; they are lost",
            at(Missing::Cut)
        ));
    }
    if gaps > 0 {
        warnings.push(format!(
            "{gaps} dumped pages{} have descriptors or data the input does not hold; they are lost",
            at(Missing::Gap)
        ));
    }
    if let Some(pfn) = mapped.capped {
        warnings.push(format!(
            "the page bitmaps split memory into more runs than the {max_runs} its {held_descs} page descriptors allow (a corrupt or hostile bitmap, its 2nd half's bits for the page at physical address {:#x} at file offset {:#x}): from that page on, memory the file does not hold is taken as lost, whatever the bitmaps say, and what it holds is read",
            pfn * bs,
            bitmap_at[1] + pfn / 8,
        ));
    }
    if let Some(addr) = first[Missing::Bitmap as usize] {
        let offset = (0..2)
            .filter_map(|i| Some(bitmap_at[i] + unheld[i].first()?.start / 8))
            .min()
            .unwrap_or_default();
        warnings.push(format!(
            "the input lacks part of the page bitmaps (the first byte missing at file offset {offset:#x}): the pages they describe, and every dumped page after them (its descriptor is found by counting bits), are lost, the first at physical address {addr:#x}"
        ));
    }
    let machine = text(&h.utsname.machine);
    let release = text(&h.utsname.release);
    let mut container = format!("kdump-compressed dump v{version}, {bs}-byte pages");
    if !release.is_empty() {
        container += &format!(", kernel {release}");
    }
    if !machine.is_empty() {
        container += &format!(" ({machine})");
    }
    Ok(Dump {
        container,
        kind: ContainerKind::Kdump,
        memory: Box::new(KdumpMemory {
            source,
            endian: e,
            bs,
            desc_off,
            first_rank,
            descs,
            dumped,
            ranks,
            map,
            cache: Mutex::new(Vec::new()),
        }),
        vmcoreinfo,
        cpus: (nr_cpus > 0).then_some(nr_cpus),
        warnings,
    })
}

fn read_vmcoreinfo(source: &dyn Source, offset: FileOffset, size: u64) -> Option<String> {
    if offset == FileOffset(0) || size == 0 || size > 1 << 20 {
        return None;
    }
    let mut buf = vec![0u8; size as usize];
    source.read_exact_at(offset, &mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Why a dumped page's bytes are not in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Missing {
    /// Its descriptor or data lies past the end of the file.
    Cut,
    /// Its descriptor or data lies where the input holds no bytes (a
    /// flattened file's missing record), or could not be read.
    Gap,
    /// Its descriptor has offset 0: an incomplete dump never wrote it.
    Unwritten,
    /// Its bitmap bits, or bits its descriptor index is counted from, are
    /// where the input holds no bytes.
    Bitmap,
}

/// Reads every descriptor the file holds, once, and returns the runs of
/// descriptor indexes (ranks) whose page the file does not hold, in order.
/// Work and memory follow the descriptors present: those past the end of
/// the file are one run, never read.
fn missing_pages(
    source: &dyn Source,
    e: Endian,
    bs: u64,
    desc_off: FileOffset,
    descs: u64,
) -> Vec<(std::ops::Range<u64>, Missing)> {
    let len = source.len();
    // A source without a size holds whatever its offsets reach.
    let held = source.held_ranges(FileOffset(0)..FileOffset(len.unwrap_or(u64::MAX)));
    // Whether the input holds all of `[start, start + size)`; `held` is
    // sorted, and joined where ranges touch.
    let holds = |start: FileOffset, size: u64| {
        let i = held.partition_point(|h| h.end <= start);
        held.get(i)
            .is_some_and(|h| h.start <= start && start.saturating_add(size) <= h.end)
    };
    let mut out: Vec<(std::ops::Range<u64>, Missing)> = Vec::new();
    let mut note = |rank: u64, cause: Missing| match out.last_mut() {
        Some((r, c)) if r.end == rank && *c == cause => r.end += 1,
        _ => out.push((rank..rank + 1, cause)),
    };
    let in_file = len.map_or(descs, |len| {
        (len.saturating_sub(desc_off.0) / DESC_SIZE).min(descs)
    });
    let mut buf = vec![PageDesc::new_zeroed(); DESC_CHUNK.min(in_file) as usize];
    let mut rank = 0;
    while rank < in_file {
        let n = (in_file - rank).min(DESC_CHUNK);
        let chunk = &mut buf[..n as usize];
        if source
            .read_exact_at(desc_off + rank * DESC_SIZE, chunk.as_mut_bytes())
            .is_err()
        {
            // Descriptors that cannot be read are as good as absent.
            for _ in 0..n {
                note(rank, Missing::Gap);
                rank += 1;
            }
            continue;
        }
        for d in chunk.iter() {
            let (offset, size) = (FileOffset(d.offset.get(e)), u64::from(d.size.get(e)));
            if !holds(desc_off + rank * DESC_SIZE, DESC_SIZE) {
                note(rank, Missing::Gap);
            } else if offset == FileOffset(0) {
                note(rank, Missing::Unwritten);
            } else if size == 0 || size > bs {
                // Corrupt, not missing: reading the page says so.
            } else if len.is_some_and(|len| offset.saturating_add(size) > FileOffset(len)) {
                note(rank, Missing::Cut);
            } else if !holds(offset, size) {
                note(rank, Missing::Gap);
            }
            rank += 1;
        }
    }
    if in_file < descs {
        match out.last_mut() {
            Some((r, Missing::Cut)) if r.end == in_file => r.end = descs,
            _ => out.push((in_file..descs, Missing::Cut)),
        }
    }
    out
}

fn bit(bitmap: &[u8], pfn: u64) -> bool {
    bitmap
        .get((pfn / 8) as usize)
        .is_some_and(|b| b & (1 << (pfn % 8)) != 0)
}

/// The pages whose bits in the bitmap of `used` bytes at `at` the input
/// does not hold (a flattened file's missing record), as pfn ranges below
/// `max_mapnr`, in order. Those bits read as zeros, which would say "not
/// dumped" of pages that may well be.
fn unheld_bits(
    source: &dyn Source,
    at: FileOffset,
    used: u64,
    max_mapnr: u64,
) -> Vec<std::ops::Range<u64>> {
    let pfns = |from: u64, to: u64| from * 8..(to * 8).min(max_mapnr);
    let mut out = Vec::new();
    let mut next = 0;
    for held in source.held_ranges(at..at + used) {
        let (from, to) = (held.start - at, held.end - at);
        if from > next {
            out.push(pfns(next, from));
        }
        next = to;
    }
    if next < used {
        out.push(pfns(next, used));
    }
    out
}

/// The end of the range of `ranges` holding `pfn`, if one does; `ranges`
/// is sorted and each call's `pfn` at least the last one's.
fn covering(
    ranges: &mut std::iter::Peekable<std::slice::Iter<'_, std::ops::Range<u64>>>,
    pfn: u64,
) -> Option<u64> {
    while ranges.next_if(|r| r.end <= pfn).is_some() {}
    ranges.peek().filter(|r| r.start <= pfn).map(|r| r.end)
}

/// Present runs where the 2nd bitmap is set, lost runs where it is set
/// but the page is `missing` (by descriptor index, counted from the start
/// of `range`), excluded runs where only the 1st is. Pages whose bits are
/// in `unheld` (per bitmap, from [`unheld_bits`]) are lost, and so is
/// every dumped page after a 2nd-bitmap bit the input lacks: its
/// descriptor index counts bits nobody knows. Past `max_runs` runs, every
/// page but a present one is lost, so that the runs from there on are as
/// many as the present ones the file's descriptors bound.
fn runs(
    bitmaps: [&[u8]; 2],
    unheld: [&[std::ops::Range<u64>]; 2],
    range: std::ops::Range<u64>,
    bs: u64,
    missing: &[(std::ops::Range<u64>, Missing)],
    max_runs: usize,
) -> Mapped {
    let [ram, dumped] = bitmaps;
    let mut out: Vec<Run> = Vec::new();
    let mut first = [None; 4];
    let mut capped = None;
    // Adds pages to the map (`None`: no RAM, left out). Past `max_runs`,
    // every page the file does not hold is lost, a hole included, so that
    // only present pages (each a descriptor the file holds) start runs.
    let add = |out: &mut Vec<Run>,
               capped: &mut Option<u64>,
               pfns: std::ops::Range<u64>,
               backing: Option<Backing>| {
        let (start, end) = (PhysAddr(pfns.start * bs), PhysAddr(pfns.end * bs));
        // Whether the pages lengthen the last run rather than start one.
        let extend = |last: Option<&Run>, backing: Backing| {
            last.is_some_and(|r| r.end == start && r.backing == backing)
        };
        // Only pages that would start a run past the limit reach it.
        if capped.is_none()
            && backing.is_some_and(|b| !extend(out.last(), b))
            && out.len() >= max_runs
        {
            *capped = Some(pfns.start);
        }
        let backing = match (capped.is_some(), backing) {
            (true, Some(Backing::Present)) => Backing::Present,
            (true, _) => Backing::Lost,
            (false, Some(b)) => b,
            (false, None) => return,
        };
        match out.last_mut() {
            Some(r) if extend(Some(r), backing) => r.end = end,
            _ => out.push(Run {
                start,
                end,
                backing,
                offset: None,
            }),
        }
    };
    // From here on no dumped page's descriptor index is known.
    let rank_end = unheld[1]
        .iter()
        .find(|r| r.end > range.start)
        .map_or(u64::MAX, |r| r.start.max(range.start));
    let mut pfn = range.start;
    // The descriptor index of the next dumped page, the next run of
    // missing ones and of unheld bits: all only move forward.
    let mut rank = 0;
    let mut next = missing.iter().peekable();
    let mut unheld = unheld.map(|u| u.iter().peekable());
    while pfn < range.end {
        let lost_bitmap = |first: &mut [Option<PhysAddr>; 4]| {
            first[Missing::Bitmap as usize].get_or_insert(PhysAddr(pfn * bs));
            Some(Backing::Lost)
        };
        let ram_unheld = covering(&mut unheld[0], pfn).is_some();
        if let Some(end) = covering(&mut unheld[1], pfn) {
            // Whether these pages were dumped is unknown: all lost at once.
            lost_bitmap(&mut first);
            let end = end.min(range.end);
            add(&mut out, &mut capped, pfn..end, Some(Backing::Lost));
            pfn = end;
            continue;
        }
        // Whole bytes with no bit in either bitmap are skipped at once
        // (unheld bits are no bits: they read as zeros).
        if pfn.is_multiple_of(8)
            && !ram_unheld
            && ram.get((pfn / 8) as usize) == Some(&0)
            && dumped.get((pfn / 8) as usize) == Some(&0)
        {
            add(&mut out, &mut capped, pfn..(pfn + 8).min(range.end), None);
            pfn += 8;
            continue;
        }
        let backing = if bit(dumped, pfn) && pfn >= rank_end {
            lost_bitmap(&mut first)
        } else if bit(dumped, pfn) {
            while next.next_if(|(r, _)| r.end <= rank).is_some() {}
            let lost = next.peek().filter(|(r, _)| r.start <= rank);
            rank += 1;
            match lost {
                Some((_, cause)) => {
                    first[*cause as usize].get_or_insert(PhysAddr(pfn * bs));
                    Some(Backing::Lost)
                }
                None => Some(Backing::Present),
            }
        } else if ram_unheld {
            // Excluded or no RAM: nobody knows which.
            lost_bitmap(&mut first)
        } else if bit(ram, pfn) {
            Some(Backing::Excluded)
        } else {
            None
        };
        add(&mut out, &mut capped, pfn..pfn + 1, backing);
        pfn += 1;
    }
    if capped.is_some() && pfn < range.end {
        // To the range's end, what no bit names is lost too.
        add(&mut out, &mut capped, pfn..range.end, None);
    }
    Mapped {
        runs: out,
        first,
        capped,
    }
}

/// What [`runs`] makes of the bitmaps.
struct Mapped {
    runs: Vec<Run>,
    /// Per [`Missing`] cause, the first physical address lost to it.
    first: [Option<PhysAddr>; 4],
    /// The page from which on memory not in the file was taken as lost,
    /// the runs the bitmaps split it into being too many.
    capped: Option<u64>,
}

pub struct KdumpMemory {
    source: Arc<dyn Source>,
    endian: Endian,
    bs: u64,
    desc_off: FileOffset,
    /// Dumped pages before the range this file holds (a split file's
    /// part): the table's first descriptor is the next one's.
    first_rank: u64,
    /// Descriptors in the table: the range's dumped pages.
    descs: u64,
    dumped: Vec<u8>,
    /// Set bits of `dumped` before each `RANK_STEP` pages.
    ranks: Vec<u64>,
    map: MemoryMap,
    /// Recently decompressed pages, oldest first.
    cache: Mutex<Vec<(u64, Arc<[u8]>)>>,
}

/// Set bits of `dumped` before `pfn`, counted from the prefix counts
/// `ranks`: the descriptor index of a dumped page.
fn rank(dumped: &[u8], ranks: &[u64], pfn: u64) -> u64 {
    let step = pfn / RANK_STEP;
    let base = ranks.get(step as usize).copied().unwrap_or(0);
    let from = (step * RANK_STEP / 8) as usize;
    let to = (pfn / 8) as usize;
    let whole: u64 = dumped
        .get(from..to)
        .unwrap_or_default()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let partial = dumped.get(to).map_or(0, |b| b & ((1u8 << (pfn % 8)) - 1));
    base + whole + u64::from(partial.count_ones())
}

impl KdumpMemory {
    /// The descriptor index of a dumped page of the file's range.
    fn rank(&self, pfn: u64) -> u64 {
        rank(&self.dumped, &self.ranks, pfn).saturating_sub(self.first_rank)
    }

    fn page(&self, pfn: u64) -> Result<Arc<[u8]>, PhysError> {
        let addr = PhysAddr(pfn * self.bs);
        if let Ok(cache) = self.cache.lock() {
            if let Some((_, p)) = cache.iter().find(|(n, _)| *n == pfn) {
                return Ok(p.clone());
            }
        }
        // The map knows which dumped pages the file lacks.
        if self.map.lookup(addr).map(|r| r.backing) != Some(Backing::Present) {
            return Err(hole_at(&self.map, addr));
        }
        let index = self.rank(pfn);
        let corrupt = |what: String| PhysError::Corrupt { addr, what };
        if index >= self.descs {
            return Err(corrupt(format!("page descriptor {index} is past the last")));
        }
        let at = self.desc_off + index * DESC_SIZE;
        let mut d = PageDesc::new_zeroed();
        self.source
            .read_exact_at(at, d.as_mut_bytes())
            .map_err(|source| PhysError::Source { addr, source })?;
        let e = self.endian;
        let (offset, size, flags) = (FileOffset(d.offset.get(e)), d.size.get(e), d.flags.get(e));
        if offset == FileOffset(0) {
            return Err(PhysError::Hole {
                addr,
                backing: Backing::Lost,
            });
        }
        let what = |why: String| {
            corrupt(format!(
                "page descriptor {index} at file offset {at:#x} (data at {offset:#x}, {size} bytes, flags {flags:#x}): {why}"
            ))
        };
        if u64::from(size) > self.bs || size == 0 {
            return Err(what(format!("size is not within 1..={}", self.bs)));
        }
        let mut stored = vec![0u8; size as usize];
        self.source
            .read_exact_at(offset, &mut stored)
            .map_err(|e| what(e.to_string()))?;
        let page: Arc<[u8]> =
            if flags & (codecs::ZLIB | codecs::LZO | codecs::SNAPPY | codecs::ZSTD) == 0 {
                if u64::from(size) != self.bs {
                    return Err(what("an uncompressed page must fill the block".into()));
                }
                stored.into()
            } else {
                let mut page = vec![0u8; self.bs as usize];
                codecs::decompress_page(flags, &stored, &mut page).map_err(what)?;
                page.into()
            };
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_PAGES {
                cache.remove(0);
            }
            cache.push((pfn, page.clone()));
        }
        Ok(page)
    }
}

impl PhysMemory for KdumpMemory {
    fn map(&self) -> &MemoryMap {
        &self.map
    }

    fn read(&self, addr: PhysAddr, buf: &mut [u8]) -> Result<(), PhysError> {
        read_pieces(addr, buf, |at, rest| {
            let page = self.page(at.0 / self.bs)?;
            let from = (at.0 % self.bs) as usize;
            let n = rest.len().min(page.len() - from);
            rest[..n].copy_from_slice(&page[from..from + n]);
            Ok(n)
        })
    }
}

#[cfg(test)]
mod tests;
