//! The copier against a region file that changes between its reads, as
//! one its process still writes does: scripted, read by read.

use super::*;
use pstore_ring::read::Region;
use pstore_ring::schema::EVENT_LOST;
use pstore_ring::write::StreamWriter;
use std::sync::atomic::{AtomicUsize, Ordering};

const PAGE: usize = 256;
const PAGES: usize = 4;

/// A region with CPU 0's stream and one user stream named `name`, 4
/// pages of 256 bytes each; and where the user stream's pages are.
fn region(name: &str) -> (Vec<u8>, Range<usize>) {
    crate::follow::tests::user_region(name, 7, 1, PAGE, PAGES)
}

const DESC_OFFSET_OF_USER: usize = pstore_ring::layout::DESC_OFFSET + DESC_SIZE;

/// The user stream written until it opens page `to`, each event its own
/// number, at 1 000 + its number.
fn written_to(to: u64) -> (Vec<u8>, Range<usize>) {
    let (mut buf, pages) = region("ui");
    let mut w = StreamWriter::start(
        &mut buf[pages.clone()],
        None,
        1,
        Endian::NATIVE,
        PAGE,
        1_000,
    )
    .unwrap();
    let mut i = 0u64;
    while w.page_seq() < to {
        w.write(1_000 + i, EVENT_LOST, &i.to_le_bytes()).unwrap();
        i += 1;
    }
    (buf, pages)
}

/// A file whose bytes are `moments[which(n)]` at its `n`-th read (from
/// 0), or an error where `fails` says.
pub(crate) struct Script {
    moments: Vec<Vec<u8>>,
    which: fn(usize) -> usize,
    fails: Option<Range<u64>>,
    reads: AtomicUsize,
}

impl Script {
    fn new(moments: Vec<Vec<u8>>, which: fn(usize) -> usize) -> Script {
        Script {
            moments,
            which,
            fails: None,
            reads: AtomicUsize::new(0),
        }
    }

    /// `bytes`, but a read of any of `bad` fails (EIO).
    pub(crate) fn failing(bytes: Vec<u8>, bad: Range<u64>) -> Script {
        Script {
            fails: Some(bad),
            ..Script::new(vec![bytes], |_| 0)
        }
    }
}

impl Source for Script {
    fn len(&self) -> Option<u64> {
        Some(self.moments[0].len() as u64)
    }

    fn read_at(&self, at: FileOffset, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        let end = at.0 + buf.len() as u64;
        if self
            .fails
            .as_ref()
            .is_some_and(|f| at.0 < f.end && f.start < end)
        {
            return Err(io::Error::from_raw_os_error(5));
        }
        let moment = &self.moments[(self.which)(n).min(self.moments.len() - 1)];
        moment.read_at(at, buf)
    }
}

/// What `copy` reads of the user stream's slot `slot`.
fn slot(copy: &dyn Source, pages: &Range<usize>, slot: usize) -> Vec<u8> {
    let mut page = vec![0u8; PAGE];
    copy.read_exact_at(FileOffset((pages.start + slot * PAGE) as u64), &mut page)
        .unwrap();
    page
}

fn page_flags(page: &[u8]) -> u16 {
    PageHeader::read_from_bytes(&page[..size_of::<PageHeader>()])
        .unwrap()
        .flags
        .get(Endian::NATIVE)
}

/// Reads made by [`LiveCopy::new`] of a file that holds still: the
/// header, and the descriptors twice.
const START_READS: usize = 3;

#[test]
fn a_page_its_writer_reopened_while_it_was_copied_is_copied_again() {
    // Slot 0 holds page 1 until the copier has read its seq, flags and
    // commit, then page 5: what the first try copies is page 5's bytes
    // under page 1's header.
    let (before, pages) = written_to(4);
    let (after, _) = written_to(7);
    let live = Script::new(vec![before, after.clone()], |n| {
        usize::from(n >= START_READS + 3)
    });
    let copy = LiveCopy::new(live).unwrap();
    assert_eq!(slot(&copy, &pages, 0), after[pages.start..][..PAGE]);
}

#[test]
fn a_page_closed_while_it_was_copied_is_taken_as_read_open() {
    // The writer closes slot 3's page 4 after its commit was read: the
    // bytes up to that commit are the same, so one try is enough.
    let (open, pages) = written_to(4);
    let (closed, _) = written_to(5);
    assert_eq!(page_flags(&closed[pages.start + 3 * PAGE..]), PAGE_CLOSED);
    let live = Script::new(vec![open.clone(), closed], |n| {
        usize::from(n >= START_READS + 3)
    });
    let copy = LiveCopy::new(live).unwrap();
    let page = slot(&copy, &pages, 3);
    assert_eq!(page_flags(&page), PAGE_OPEN);
    // The header as first read; the bytes after the commit are the
    // writer's business.
    let h = PageHeader::read_from_bytes(&page[..size_of::<PageHeader>()]).unwrap();
    let was =
        PageHeader::read_from_bytes(&open[pages.start + 3 * PAGE..][..size_of::<PageHeader>()])
            .unwrap();
    assert_eq!(h.commit.get(Endian::NATIVE), was.commit.get(Endian::NATIVE));
    let records =
        size_of::<PageHeader>()..size_of::<PageHeader>() + h.commit.get(Endian::NATIVE) as usize;
    assert_eq!(
        page[records.clone()],
        open[pages.start + 3 * PAGE..][records]
    );
}

#[test]
fn a_page_rewritten_under_every_try_is_shown_being_reset() {
    // Each read of the page sees the other moment.
    let (before, pages) = written_to(4);
    let (after, _) = written_to(7);
    let live = Script::new(vec![before, after], |n| {
        if n < START_READS {
            0
        } else {
            (n - START_READS) % 6 / 3
        }
    });
    let copy = LiveCopy::new(live).unwrap();
    let page = slot(&copy, &pages, 0);
    assert_eq!(page_flags(&page), PAGE_RESETTING);
    // Six reads a try, then the holder's descriptor once.
    assert_eq!(
        copy.inner.reads.load(Ordering::Relaxed),
        START_READS + TRIES * 6 + 1
    );
}

#[test]
fn a_page_that_cannot_be_read_is_shown_corrupt_and_the_rest_is_read() {
    let (buf, pages) = written_to(3);
    let mut live = Script::new(vec![buf.clone()], |_| 0);
    let bad = (pages.start + PAGE) as u64;
    live.fails = Some(bad + 100..bad + 101);
    let copy = LiveCopy::new(live).unwrap();
    // Slot 0 first: nothing of it stays in the copy of slot 1.
    assert_eq!(slot(&copy, &pages, 0), buf[pages.start..][..PAGE]);
    let page = slot(&copy, &pages, 1);
    assert_eq!(
        PageHeader::read_from_bytes(&page[..size_of::<PageHeader>()])
            .unwrap()
            .magic
            .get(Endian::NATIVE),
        !PAGE_MAGIC
    );
    assert!(page[4..].iter().all(|&b| b == 0));
    assert_eq!(slot(&copy, &pages, 0), buf[pages.start..][..PAGE]);
}

#[test]
fn the_copy_says_it_is_one_and_is_read_as_the_region() {
    let (buf, _) = written_to(3);
    let copy = LiveCopy::new(Script::new(vec![buf.clone()], |_| 0)).unwrap();
    let mut all = vec![0u8; buf.len()];
    copy.read_exact_at(FileOffset(0), &mut all).unwrap();
    let region = Region::parse(&all, HeaderTrust::Checksummed).unwrap();
    assert_ne!(region.header.flags & HEADER_FLAG_LIVE_COPY, 0);
    // But for the header's flag and CRC, the bytes of a file at rest.
    assert_eq!(all[HEADER_SIZE..], buf[HEADER_SIZE..]);
    let events = |bytes: &[u8]| {
        let r = Region::parse(bytes, HeaderTrust::Checksummed).unwrap();
        r.decode().streams[1].events.len()
    };
    assert_eq!(events(&all), events(&buf));
    // A copy already (the module's device): read as it is.
    let again = LiveCopy::new(all.clone()).unwrap();
    assert!(again.copier.is_none());
}

#[test]
fn a_user_stream_handed_to_another_holder_shows_unused_pages() {
    let (buf, pages) = written_to(3);
    let (mut other, _) = region("kiosk");
    other[pages.clone()].copy_from_slice(&buf[pages.clone()]);
    let live = Script::new(vec![buf, other], |n| usize::from(n >= START_READS));
    let copy = LiveCopy::new(live).unwrap();
    assert!(slot(&copy, &pages, 0).iter().all(|&b| b == 0));
    // The descriptors as they were at the start.
    let mut desc = vec![0u8; DESC_SIZE];
    copy.read_exact_at(FileOffset(DESC_OFFSET_OF_USER as u64), &mut desc)
        .unwrap();
    assert_eq!(&desc[16..18], b"ui");
}

#[test]
fn streams_whose_pages_overlap_are_refused() {
    let (mut buf, _) = written_to(2);
    let at = DESC_OFFSET_OF_USER;
    let mut desc = StreamDesc::read_from_bytes(&buf[at..at + DESC_SIZE]).unwrap();
    let cpu0 = StreamDesc::read_from_bytes(&buf[at - DESC_SIZE..at]).unwrap();
    desc.pages_offset = cpu0.pages_offset;
    buf[at..at + DESC_SIZE].copy_from_slice(desc.as_bytes());
    let err = LiveCopy::new(buf).err().unwrap();
    assert!(matches!(err, LiveError::Layout { index: 1, .. }), "{err}");
}

#[test]
fn a_region_longer_than_its_file_is_refused() {
    let (mut buf, pages) = written_to(2);
    buf.truncate(pages.start + PAGE);
    let err = LiveCopy::new(buf).err().unwrap();
    assert!(matches!(err, LiveError::Short { .. }), "{err}");
}

#[test]
fn a_file_cut_after_the_start_is_an_error_not_a_corrupt_page() {
    let (buf, pages) = written_to(3);
    let mut cut = buf.clone();
    cut.truncate(pages.start + PAGE);
    let live = Script::new(vec![buf, cut], |n| usize::from(n >= START_READS));
    let copy = LiveCopy::new(live).unwrap();
    let mut page = vec![0u8; PAGE];
    let read = copy.read_exact_at(FileOffset((pages.start + PAGE) as u64), &mut page);
    assert!(read.is_err(), "{:?}", &page[..8]);
}

#[test]
fn tables_are_read_until_two_reads_agree() {
    let len = 2 * STEADY_CHUNK + 100;
    let before: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut after = before.clone();
    // Rewritten after the first read, in the last chunk compared.
    after[len - 1] ^= 1;
    let live = Script::new(vec![before, after.clone()], |n| usize::from(n > 0));
    let mut tables = vec![0u8; len];
    read_steady(&live, 0, &mut tables).unwrap();
    assert_eq!(tables, after);
    // The first read, then two rounds of three chunks: one in which the
    // last chunk changed, one in which all agreed.
    assert_eq!(live.reads.load(Ordering::Relaxed), 1 + 2 * 3);
}

#[test]
fn pages_that_claim_the_tables_are_refused() {
    let (mut buf, _) = written_to(2);
    let at = pstore_ring::layout::DESC_OFFSET;
    let mut cpu0 = StreamDesc::read_from_bytes(&buf[at..at + DESC_SIZE]).unwrap();
    cpu0.pages_offset = pstore_ring::endian::U64::new(Endian::NATIVE, 0);
    buf[at..at + DESC_SIZE].copy_from_slice(cpu0.as_bytes());
    let err = LiveCopy::new(buf).err().unwrap();
    assert!(matches!(err, LiveError::Layout { index: 0, .. }), "{err}");
}
