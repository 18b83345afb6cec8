//! Finding regions in physical memory and reading them out.
//!
//! With an address (`--phys`), the region there is read. Otherwise every
//! present byte is searched for the region magic (memchr-class speed), and
//! hits whose header CRC fails are dropped. Of places holding the same
//! header, the one whose bytes hold the most of the region (pages, then
//! events) is read as it, the others listed as copies: a header alone
//! says nothing of which is the region. A region is read page by page:
//! bytes the dump does not hold become absent ranges that the reader
//! reports, never zeros it decodes.

use crate::phys::{hole_at, present_chunks, Backing, PhysAddr, PhysError, PhysMemory};
use memmap2::{Mmap, UncheckedAdvice};
use pstore_ring::layout::{HEADER_SIZE, MAGIC_STORED};
use pstore_ring::read::{parse_header, HeaderError, HeaderTrust};
use pstore_ring::scan::magic_hits;
use std::fmt;
use std::fs::File;
use std::ops::{Deref, Range};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// Granule for reads that fail: a hole costs at most this much.
const GRANULE: usize = 4096;
/// The most bytes of one region read. Only the part a dump reaches counts
/// (the rest is a hole, whatever the header says); a region spanning more
/// of the dump than this is refused: the header is checksummed, but a
/// checksum is not a reason to allocate terabytes (`/dev/mem` reaches
/// everywhere).
pub const MAX_REGION: u64 = 4 << 30;

/// A byte's place in a region: bytes from the region's first byte. Not a
/// physical address: the region may start anywhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionOffset(pub u64);

impl fmt::LowerHex for RegionOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Bytes of a region the dump does not give, and why. It prints itself
/// as the one line `crashring` says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hole {
    pub range: Range<RegionOffset>,
    pub cause: HoleCause,
}

impl fmt::Display for Hole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "region bytes {:#x}..{:#x}: {}",
            self.range.start, self.range.end, self.cause
        )
    }
}

/// Why a dump does not give some bytes of a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HoleCause {
    /// Left out by the dump's filter ([`Backing::Excluded`]).
    Excluded,
    /// Meant to be written by an incomplete dump and not ([`Backing::Lost`]).
    Lost,
    /// Not covered by the dump at all: outside its memory map, or past
    /// the last byte it reaches.
    NotInDump,
    /// Past 2^64: the bytes have no physical address.
    PastTop,
    /// In the dump, but reading them failed (a corrupt page, an I/O
    /// error): what the read said.
    Unreadable(String),
}

impl HoleCause {
    /// What a failed read says of the bytes it could not read.
    fn of(e: &PhysError) -> HoleCause {
        match e {
            PhysError::Outside { .. } => HoleCause::NotInDump,
            PhysError::Hole {
                backing: Backing::Excluded,
                ..
            } => HoleCause::Excluded,
            PhysError::Hole {
                backing: Backing::Lost,
                ..
            } => HoleCause::Lost,
            // Present memory is no hole; a container saying otherwise is
            // told as it said it, with the rest of what fails reads.
            other => HoleCause::Unreadable(other.to_string()),
        }
    }
}

impl fmt::Display for HoleCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoleCause::Excluded => Backing::Excluded.fmt(f),
            HoleCause::Lost => Backing::Lost.fmt(f),
            HoleCause::NotInDump => f.write_str("not in the dump"),
            HoleCause::PastTop => f.write_str("past the top of the physical address space"),
            HoleCause::Unreadable(why) => f.write_str(why),
        }
    }
}

/// A region read out of a dump.
#[derive(Debug)]
pub struct Found {
    /// Physical address of the region's first byte.
    pub addr: PhysAddr,
    /// The region's bytes; the holes' bytes are zeros that must not be
    /// used.
    pub bytes: RegionBytes,
    /// What the dump does not give of the region and why, in order, each
    /// joined to the next where it continues it for the same cause.
    pub holes: Vec<Hole>,
    /// Addresses of byte-identical copies of this region's header found
    /// elsewhere (a copy in the page cache, a saved file in RAM).
    pub copies: Vec<PhysAddr>,
}

impl Found {
    /// The holes' ranges, as the reader takes them
    /// ([`pstore_ring::read::Region::with_absent`]).
    pub fn absent(&self) -> Vec<Range<u64>> {
        self.holes
            .iter()
            .map(|h| h.range.start.0..h.range.end.0)
            .collect()
    }

    /// Whether some absent bytes were lost or outside the dump rather than
    /// left out by the dump's filter. Filtered pages are of a kind the
    /// dump's maker chose to drop (makedumpfile's zero-page filter drops
    /// every unused ring page); lost ones held something nobody can know.
    pub fn unaccounted(&self) -> bool {
        self.holes.iter().any(|h| h.cause != HoleCause::Excluded)
    }
}

/// Why discovery found nothing to read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("no valid region header at physical address {addr:#x}")]
    NoHeader {
        addr: PhysAddr,
        #[source]
        why: NoHeader,
    },
    #[error("the region at physical address {addr:#x} spans {size} bytes of the dump, more than the {MAX_REGION} this tool reads: give a smaller size with --phys ADDR:SIZE")]
    TooBig { addr: PhysAddr, size: u64 },
    #[error("no room to copy the {size}-byte region at physical address {addr:#x} into a temporary file (in $TMPDIR, else /tmp): {why}")]
    NoRoom {
        addr: PhysAddr,
        size: u64,
        why: std::io::Error,
    },
}

/// Why there is no region header at an address: kept as the source of
/// [`DiscoverError::NoHeader`], so a caller can tell a hole in the dump
/// from bytes that are not a header.
#[derive(Debug, thiserror::Error)]
pub enum NoHeader {
    #[error(transparent)]
    Unreadable(PhysError),
    #[error(transparent)]
    Invalid(HeaderError),
}

/// A region's bytes: a snapshot of what the dump gives, in a private
/// temporary file (unnamed, in `$TMPDIR`) mapped read-only. Pages the dump
/// lacks are never written, so they are holes in the file and cost no
/// space. Being backed by a file, pages can be given back
/// ([`RegionBytes::release`], [`RegionBytes::sweep_every`]) and come back
/// from the page cache when read again: resident memory follows the pages
/// in use, not the region's size.
#[derive(Debug)]
pub struct RegionBytes {
    /// `None` for an empty region (a mapping cannot be empty).
    map: Option<Arc<Mmap>>,
}

impl RegionBytes {
    /// An empty snapshot of `len` bytes, and the file to write it through.
    fn create(len: u64) -> std::io::Result<(File, u64)> {
        let file = tempfile::tempfile()?;
        file.set_len(len)?;
        Ok((file, len))
    }

    /// Maps the finished snapshot.
    fn map(file: &File, len: u64) -> std::io::Result<RegionBytes> {
        if len == 0 {
            return Ok(RegionBytes { map: None });
        }
        // SAFETY: the file is our own unnamed temporary file, which nobody
        // else can open, truncate or write.
        let map = unsafe { Mmap::map(file)? };
        Ok(RegionBytes {
            map: Some(Arc::new(map)),
        })
    }

    /// Drops the pages holding `range` (widened to whole pages) from this
    /// process's memory; reading them again faults them back in from the
    /// file. Does nothing for a range past the end.
    pub fn release(&self, range: Range<usize>) {
        if let Some(map) = &self.map {
            drop_pages(map, range);
        }
    }

    /// Gives every page back every `interval` until the returned guard is
    /// dropped. Readers walk a region page by page, a few pages per stream
    /// at a time, and come back to none they left long ago, so resident
    /// memory stays at what they read in one interval, whatever the
    /// region's size; a page still in use is simply read in again.
    pub fn sweep_every(&self, interval: Duration) -> Sweeper {
        let Some(map) = self.map.clone() else {
            return Sweeper { stop: None };
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                drop_pages(&map, 0..map.len());
            }
        });
        Sweeper {
            stop: Some((stop, thread)),
        }
    }
}

/// Drops `range` of `map` from this process's memory.
fn drop_pages(map: &Mmap, range: Range<usize>) {
    let end = range.end.min(map.len());
    if range.start >= end {
        return;
    }
    // SAFETY: MADV_DONTNEED on a read-only mapping of a file only drops
    // page table entries: the bytes stay in the page cache and the file,
    // and every later read of them sees the same values, so no slice
    // borrowed from the mapping changes. It is only unsound on private
    // writable or anonymous mappings, which zero-fill.
    let _ = unsafe {
        map.unchecked_advise_range(UncheckedAdvice::DontNeed, range.start, end - range.start)
    };
}

/// The thread [`RegionBytes::sweep_every`] started; dropping it stops the
/// thread and waits for it.
pub struct Sweeper {
    stop: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.stop.take() {
            drop(stop);
            let _ = thread.join();
        }
    }
}

impl Deref for RegionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |m| &m[..])
    }
}

/// Reads the region whose header is at `addr`. `size` overrides the
/// header's size (to read less of a huge region, or past a damaged one).
///
/// Only the part of the region the dump reaches is allocated and read:
/// past the map's last run the dump knows nothing, so the rest is one
/// hole, and the reader sees a region cut short there. Memory and work
/// follow the dump, whatever size the (checksummed) header claims.
pub fn read_at(
    mem: &dyn PhysMemory,
    addr: PhysAddr,
    size: Option<u64>,
    trust: HeaderTrust,
) -> Result<Found, DiscoverError> {
    let mut header = [0u8; HEADER_SIZE];
    mem.read(addr, &mut header)
        .map_err(|e| DiscoverError::NoHeader {
            addr,
            why: NoHeader::Unreadable(e),
        })?;
    read_with_header(mem, addr, &header, size, trust)
}

/// [`read_at`] with the header's bytes already read: the one place a
/// header is checked before the region is parsed.
fn read_with_header(
    mem: &dyn PhysMemory,
    addr: PhysAddr,
    header: &[u8; HEADER_SIZE],
    size: Option<u64>,
    trust: HeaderTrust,
) -> Result<Found, DiscoverError> {
    let info = parse_header(header, trust).map_err(|e| DiscoverError::NoHeader {
        addr,
        why: NoHeader::Invalid(e),
    })?;
    let claimed = size.unwrap_or(info.region_size);
    let dump_end = mem.map().runs().last().map_or(PhysAddr(0), |r| r.end);
    let readable = dump_end.checked_offset_from(addr).unwrap_or(0).min(claimed);
    if readable > MAX_REGION {
        return Err(DiscoverError::TooBig {
            addr,
            size: readable,
        });
    }
    let no_room = |why| DiscoverError::NoRoom {
        addr,
        size: readable,
        why,
    };
    let (file, len) = RegionBytes::create(readable).map_err(no_room)?;
    let holes = copy_region(mem, addr, &file, len).map_err(no_room)?;
    let bytes = RegionBytes::map(&file, len).map_err(no_room)?;
    Ok(found_region(addr, claimed, bytes, holes))
}

/// Copies the `readable` bytes of the region at `addr` the dump holds into
/// `file`, a chunk at a time, and returns the holes among them. What the
/// dump lacks is never written, so it reads as zeros that the holes say
/// must not be used.
fn copy_region(
    mem: &dyn PhysMemory,
    addr: PhysAddr,
    file: &File,
    readable: u64,
) -> std::io::Result<Vec<Hole>> {
    const STEP: usize = 1 << 20;
    let readable = readable as usize;
    let mut buf = vec![0u8; readable.min(STEP)];
    let mut holes: Vec<Hole> = Vec::new();
    let mut at = 0usize;
    while at < readable {
        // Large reads first; a failure is retried granule by granule so a
        // hole costs only its own pages.
        let n = (readable - at).min(STEP);
        if mem.read(addr + at as u64, &mut buf[..n]).is_ok() {
            file.write_all_at(&buf[..n], at as u64)?;
            at += n;
            continue;
        }
        let end = at + n;
        while at < end {
            let g = (end - at).min(GRANULE - (addr.0 as usize + at) % GRANULE);
            match mem.read(addr + at as u64, &mut buf[..g]) {
                Ok(()) => file.write_all_at(&buf[..g], at as u64)?,
                Err(e) => {
                    // A hole of the map fails every read in it alike: its
                    // whole granules are taken in one step, so work follows
                    // the runs of the map, not the size of the hole.
                    let hole = skip_hole(mem, &e, addr, at + g, readable);
                    note_hole(&mut holes, at as u64..hole as u64, HoleCause::of(&e));
                    at = hole;
                    continue;
                }
            }
            at += g;
        }
    }
    Ok(holes)
}

/// The region of `claimed` bytes at `addr` whose first `bytes.len()` were
/// read, with `holes` among them; the rest is reported as holes too.
fn found_region(addr: PhysAddr, claimed: u64, bytes: RegionBytes, mut holes: Vec<Hole>) -> Found {
    // Bytes from 2^64 - addr on have no physical address at all: a region
    // that claims them is reported as running past the top, and no address
    // is ever computed for them.
    let readable = bytes.len() as u64;
    let room = Some(0u64.wrapping_sub(addr.0))
        .filter(|&r| r != 0)
        .unwrap_or(u64::MAX)
        .min(claimed);
    if readable < room {
        note_hole(&mut holes, readable..room, HoleCause::NotInDump);
    }
    if room < claimed {
        note_hole(&mut holes, room..claimed, HoleCause::PastTop);
    }
    Found {
        addr,
        bytes,
        holes,
        copies: Vec::new(),
    }
}

/// Where the failed read `e` of the granule ending at region byte `from`
/// lets the reading resume: at `from`, unless `e` is the map's own hole
/// there, whose whole granules up to `readable` are skipped too (reading
/// them would fail the same way). The granule holding the hole's end is
/// read as before, so holes come out exactly as granule by granule.
fn skip_hole(
    mem: &dyn PhysMemory,
    e: &PhysError,
    addr: PhysAddr,
    from: usize,
    readable: usize,
) -> usize {
    let map = mem.map();
    let at = e.addr();
    let same = match (e, hole_at(map, at)) {
        (PhysError::Hole { backing: a, .. }, PhysError::Hole { backing: b, .. }) => *a == b,
        (PhysError::Outside { .. }, PhysError::Outside { .. }) => true,
        _ => false,
    };
    map.hole_end(at)
        .filter(|_| same)
        .map(|end| (end.0 - end.0 % GRANULE as u64).saturating_sub(addr.0))
        .map(|end| end.min(readable as u64) as usize)
        .map_or(from, |end| end.max(from))
}

/// Records a hole of region bytes `r`, joining it to the previous one
/// when it continues it for the same cause.
fn note_hole(holes: &mut Vec<Hole>, r: Range<u64>, cause: HoleCause) {
    let range = RegionOffset(r.start)..RegionOffset(r.end);
    match holes.last_mut() {
        Some(last) if last.range.end == range.start && last.cause == cause => {
            last.range.end = range.end;
        }
        _ => holes.push(Hole { range, cause }),
    }
}

/// Searches all present memory for regions and reads each one. `progress`
/// is called with the bytes searched so far; `also` sees every chunk
/// searched, for other readers' searches to ride the same pass.
pub fn scan(
    mem: &dyn PhysMemory,
    progress: &mut dyn FnMut(u64),
    also: &mut dyn FnMut(PhysAddr, &[u8]),
) -> Scanned {
    let mut found: Vec<Candidate> = Vec::new();
    let mut unread: Vec<DiscoverError> = Vec::new();
    // Overlap by the magic's length so a magic across two chunks is
    // still seen.
    let overlap = MAGIC_STORED.len() - 1;
    present_chunks(mem, overlap, progress, &mut |addr, chunk| {
        also(addr, chunk);
        // Every hit is looked at, those inside a region read already too:
        // what was read there may be a copy of a header (or an older
        // generation's) lying below the region it hides.
        for hit in magic_hits(chunk) {
            consider(mem, addr + hit as u64, &mut found, &mut unread);
        }
    });
    // In address order, as found before one could take another's place.
    let mut found: Vec<Found> = found.into_iter().map(|c| c.found).collect();
    found.sort_by_key(|f| f.addr);
    Scanned { found, unread }
}

/// What a scan found: the regions it read, and those whose header checked
/// out but whose bytes could not be read (too big, no room for the
/// snapshot), each with why, never dropped as if there were no region.
pub struct Scanned {
    pub found: Vec<Found>,
    pub unread: Vec<DiscoverError>,
}

/// Places holding the same header read and decoded against a region at
/// most: enough for the copies a machine makes (the page cache, a saved
/// file); past them a copy is only listed, so that thousands of copies
/// cost no more than a few regions' reading.
const MAX_RIVALS: usize = 8;

/// A region the scan read, with what decides it against another place
/// holding its header.
struct Candidate {
    found: Found,
    /// What its bytes hold ([`held`]), worked out when its header first
    /// turns up again: most regions have no copy and are not decoded here.
    held: Option<Held>,
    /// Places holding its header read and decoded against it so far.
    rivals: usize,
}

/// What a region's bytes hold of it: pages whose checks pass, then events
/// decoded from them. A header alone (a copy in the page cache, followed
/// by zeros that read as unused slots, or by junk) holds none; the region
/// it was copied from holds its pages.
type Held = (usize, usize);

/// [`Held`] of `found`, decoded as its reading will decode it, its pages
/// given back as they are walked.
fn held(found: &Found) -> Held {
    use pstore_ring::read::{PageStatus, Region};
    let Ok(region) = Region::parse(&found.bytes, HeaderTrust::Checksummed) else {
        return (0, 0);
    };
    let region = region.with_absent(found.absent());
    let trace = crate::recover::decode(&region, &|walked| found.bytes.release(walked));
    let valid = [
        PageStatus::Intact,
        PageStatus::Damaged,
        PageStatus::Salvaged,
    ];
    trace.streams.iter().fold((0, 0), |(pages, events), s| {
        let p: usize = valid.iter().map(|&v| s.pages_with(v)).sum();
        (
            pages.saturating_add(p),
            events.saturating_add(s.event_count()),
        )
    })
}

/// Reads the region at `at` if its header checks out. A header
/// byte-identical to a region's already read is as valid as that one, and
/// a header match alone does not say which place is the region: the place
/// whose bytes hold more of it is kept, the other listed as a copy.
fn consider(
    mem: &dyn PhysMemory,
    at: PhysAddr,
    found: &mut Vec<Candidate>,
    unread: &mut Vec<DiscoverError>,
) {
    let mut header = [0u8; HEADER_SIZE];
    if mem.read(at, &mut header).is_err() {
        return;
    }
    let read = || read_with_header(mem, at, &header, None, HeaderTrust::Checksummed);
    let Some(c) = found
        .iter_mut()
        .find(|c| c.found.bytes.get(..HEADER_SIZE) == Some(&header[..]))
    else {
        match read() {
            Ok(found_here) => found.push(Candidate {
                found: found_here,
                held: None,
                rivals: 0,
            }),
            // Bytes that only look like a header: not a region.
            Err(DiscoverError::NoHeader { .. }) => {}
            Err(e) => unread.push(e),
        }
        return;
    };
    if c.rivals >= MAX_RIVALS {
        c.found.copies.push(at);
        return;
    }
    c.rivals += 1;
    let rival = match read() {
        Ok(rival) => rival,
        Err(e) => {
            // Not read, so not weighed: it may be the region itself.
            c.found.copies.push(at);
            unread.push(e);
            return;
        }
    };
    let ours = *c.held.get_or_insert_with(|| held(&c.found));
    let theirs = held(&rival);
    // A tie keeps the first found: the same pages either way.
    if theirs <= ours {
        c.found.copies.push(at);
        return;
    }
    let was = std::mem::replace(&mut c.found, rival);
    // Hits come in address order: the one replaced and its copies all
    // lie below this one.
    c.found.copies = std::iter::once(was.addr).chain(was.copies).collect();
    c.held = Some(theirs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(start: u64, end: u64, cause: HoleCause) -> Hole {
        Hole {
            range: RegionOffset(start)..RegionOffset(end),
            cause,
        }
    }

    #[test]
    fn a_hole_says_its_range_and_its_cause() {
        let says = |cause| hole(0x4000, 0x5000, cause).to_string();
        assert_eq!(
            says(HoleCause::Excluded),
            "region bytes 0x4000..0x5000: excluded by the dump's filter"
        );
        assert_eq!(
            says(HoleCause::Lost),
            "region bytes 0x4000..0x5000: lost (incomplete dump)"
        );
        assert_eq!(
            says(HoleCause::NotInDump),
            "region bytes 0x4000..0x5000: not in the dump"
        );
        assert_eq!(
            says(HoleCause::PastTop),
            "region bytes 0x4000..0x5000: past the top of the physical address space"
        );
        let corrupt = PhysError::Corrupt {
            addr: PhysAddr(0x34000),
            what: "page descriptor 3: size is not within 1..=4096".into(),
        };
        assert_eq!(
            says(HoleCause::of(&corrupt)),
            "region bytes 0x4000..0x5000: physical address 0x34000: page descriptor 3: size is not within 1..=4096"
        );
    }

    #[test]
    fn a_failed_read_gives_the_cause_of_its_hole() {
        let addr = PhysAddr(0x1000);
        let of = |e: PhysError| HoleCause::of(&e);
        assert_eq!(of(PhysError::Outside { addr }), HoleCause::NotInDump);
        let hole = |backing| PhysError::Hole { addr, backing };
        assert_eq!(of(hole(Backing::Excluded)), HoleCause::Excluded);
        assert_eq!(of(hole(Backing::Lost)), HoleCause::Lost);
        let io = PhysError::Source {
            addr,
            source: crate::input::source::SourceError::Truncated {
                offset: crate::input::source::FileOffset(0x200),
                wanted: 8,
                got: 0,
            },
        };
        assert_eq!(
            of(io),
            HoleCause::Unreadable(
                "physical address 0x1000: file offset 0x200: the input ends after 0 of 8 bytes"
                    .into()
            )
        );
    }

    #[test]
    fn holes_join_only_where_one_continues_another_for_the_same_cause() {
        let mut holes = Vec::new();
        note_hole(&mut holes, 0x1000..0x2000, HoleCause::Excluded);
        note_hole(&mut holes, 0x2000..0x3000, HoleCause::Excluded);
        // Touching, another cause.
        note_hole(&mut holes, 0x3000..0x4000, HoleCause::Lost);
        // The same cause, not touching.
        note_hole(&mut holes, 0x5000..0x6000, HoleCause::Lost);
        // Reads failing alike join; failing differently do not.
        let bad = |at: &str| HoleCause::Unreadable(format!("physical address {at}: bad"));
        note_hole(&mut holes, 0x6000..0x7000, bad("0x6000"));
        note_hole(&mut holes, 0x7000..0x8000, bad("0x6000"));
        note_hole(&mut holes, 0x8000..0x9000, bad("0x8000"));
        assert_eq!(
            holes,
            [
                hole(0x1000, 0x3000, HoleCause::Excluded),
                hole(0x3000, 0x4000, HoleCause::Lost),
                hole(0x5000, 0x6000, HoleCause::Lost),
                hole(0x6000, 0x8000, bad("0x6000")),
                hole(0x8000, 0x9000, bad("0x8000")),
            ]
        );
    }

    #[test]
    fn released_pages_read_back_the_same() {
        let data: Vec<u8> = (0..5 * 4096u32).map(|i| (i * 7 % 251) as u8).collect();
        let (file, len) = RegionBytes::create(data.len() as u64).unwrap();
        file.write_all_at(&data[..4096], 0).unwrap();
        file.write_all_at(&data[8192..], 8192).unwrap();
        let bytes = RegionBytes::map(&file, len).unwrap();
        let mut want = data.clone();
        want[4096..8192].fill(0);
        assert!(*bytes == want[..]);
        bytes.release(100..9000);
        bytes.release(0..bytes.len() + 4096);
        assert!(*bytes == want[..]);
        let empty = RegionBytes::map(&RegionBytes::create(0).unwrap().0, 0).unwrap();
        assert!(empty.is_empty());
        empty.release(0..10);
    }

    #[test]
    fn only_holes_the_filter_made_are_accounted_for() {
        let found = |holes: Vec<Hole>| Found {
            addr: PhysAddr(0x30000),
            bytes: RegionBytes::map(&RegionBytes::create(0x3000).unwrap().0, 0x3000).unwrap(),
            holes,
            copies: Vec::new(),
        };
        let filtered = found(vec![hole(0x1000, 0x2000, HoleCause::Excluded)]);
        let absent = filtered.absent();
        assert_eq!(absent.len(), 1);
        assert_eq!(absent[0], 0x1000..0x2000);
        assert!(!filtered.unaccounted());
        for cause in [
            HoleCause::Lost,
            HoleCause::NotInDump,
            HoleCause::PastTop,
            HoleCause::Unreadable("bad".into()),
        ] {
            let f = found(vec![
                hole(0x1000, 0x2000, HoleCause::Excluded),
                hole(0x2000, 0x3000, cause),
            ]);
            assert_eq!(f.absent(), [0x1000..0x2000, 0x2000..0x3000]);
            assert!(f.unaccounted());
        }
        assert!(!found(Vec::new()).unaccounted());
    }

    use crate::input::mapped::MappedMemory;
    use crate::input::source::FileOffset;
    use crate::phys::{MemoryMap, Run};
    use pstore_ring::read::Region;
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    /// `image` as a raw dump: byte N at physical address N, all present.
    fn raw(image: Vec<u8>) -> MappedMemory {
        let run = Run {
            start: PhysAddr(0),
            end: PhysAddr(image.len() as u64),
            backing: Backing::Present,
            offset: Some(FileOffset(0)),
        };
        MappedMemory::new(Arc::new(image), MemoryMap::new(vec![run]))
    }

    /// A region of `size` bytes and generation `generation` holding `n`
    /// events.
    fn region(size: usize, generation: u64, n: u64) -> Vec<u8> {
        let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
        let cfg = RegionConfig {
            streams: &specs,
            generation,
            ..Default::default()
        };
        let mut bytes = vec![0u8; size];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        {
            let mut f = write::format(&mut bytes, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            for i in 0..n {
                ws[(i % 2) as usize]
                    .write_event(1_000 + i * 10, lost, &[Value::Unsigned(i)])
                    .unwrap();
            }
        }
        bytes
    }

    /// Events decoded from `bytes`, with `absent` left out.
    fn events(bytes: &[u8], absent: Vec<Range<u64>>) -> usize {
        let region = Region::parse(bytes, HeaderTrust::Checksummed).unwrap();
        region.with_absent(absent).decode_paged().event_count()
    }

    fn scan_all(mem: &dyn PhysMemory) -> Scanned {
        scan(mem, &mut |_| {}, &mut |_, _| {})
    }

    #[test]
    fn a_copy_of_the_header_below_the_region_does_not_hide_it() {
        // Below the region by more than its size, and by less (the region
        // read from the copy would hold the real header).
        for size in [64 << 10, 2 << 20] {
            let real = region(size, 7, 200);
            let want = events(&real, Vec::new());
            assert!(want > 0);
            let mut image = vec![0u8; 4 << 20];
            image[0x20_0000..][..size].copy_from_slice(&real);
            // Only the header page, as a page cache holds it; the zeros
            // after it read as unused slots: a clean, empty region.
            image[0x10_0000..][..4096].copy_from_slice(&real[..4096]);
            let scanned = scan_all(&raw(image));
            assert!(scanned.unread.is_empty(), "{size}: {:?}", scanned.unread);
            assert_eq!(scanned.found.len(), 1, "{size}");
            let f = &scanned.found[0];
            assert_eq!(f.addr, PhysAddr(0x20_0000), "{size}");
            assert_eq!(events(&f.bytes, f.absent()), want, "{size}");
            assert_eq!(f.copies, [PhysAddr(0x10_0000)], "{size}");
        }
    }

    #[test]
    fn a_stale_header_below_the_region_does_not_hide_it() {
        // An older generation's header page, less than its region's size
        // below the current region: both are regions of their own.
        let size = 2 << 20;
        let stale = region(size, 6, 10);
        let real = region(size, 7, 200);
        let mut image = vec![0u8; 4 << 20];
        image[0x20_0000..][..size].copy_from_slice(&real);
        image[0x10_0000..][..4096].copy_from_slice(&stale[..4096]);
        let scanned = scan_all(&raw(image));
        let addrs: Vec<_> = scanned.found.iter().map(|f| f.addr).collect();
        assert_eq!(addrs, [PhysAddr(0x10_0000), PhysAddr(0x20_0000)]);
        let f = &scanned.found[1];
        assert_eq!(events(&f.bytes, f.absent()), events(&real, Vec::new()));
        assert!(f.copies.is_empty());
    }
}
