//! What a slot of a followed stream holds, and which of a stream's pages
//! read in one go while its writer went on a poll can hand over.

use super::Span;
use pstore_ring::layout::{
    PageHeader, PAGE_CLOSED, PAGE_HEADER_SIZE, PAGE_MAGIC, PAGE_OPEN, PAGE_RESETTING,
};
use zerocopy::FromBytes;

/// The page header at region offset `at` of `buf`, if it is one of
/// stream `stream`'s pages.
pub(super) fn header(
    buf: &[u8],
    at: u64,
    stream: u16,
    e: pstore_ring::Endian,
) -> Option<PageHeader> {
    let at = usize::try_from(at).ok()?;
    page_header(buf.get(at..at.checked_add(PAGE_HEADER_SIZE)?)?, stream, e)
}

/// `bytes` as a page header of stream `stream`, open or closed: its
/// magic, stream number and state, which a slot not yet written, a user
/// stream's page caught while its writer rewrote the header, or a page
/// being opened (`PAGE_RESETTING`: its `first_ts` may be the new page's,
/// its `seq` still the old one's) do not have. Anything else in it may
/// still be wrong (a user stream is any bytes its writer stores).
pub(super) fn page_header(bytes: &[u8], stream: u16, e: pstore_ring::Endian) -> Option<PageHeader> {
    let h = PageHeader::read_from_bytes(bytes).ok()?;
    let state = h.flags.get(e);
    (h.magic.get(e) == PAGE_MAGIC
        && h.stream.get(e) == stream
        && (state == PAGE_OPEN || state == PAGE_CLOSED))
        .then_some(h)
}

/// What a slot of a stream holds, as far as a reader can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// One of the stream's pages: its seq, and whether it was open.
    Page { seq: u64, open: bool },
    /// Nothing yet (all zeros, as an unused page) or a page being
    /// opened: the page wanted may still come.
    Pending,
    /// Bytes that are no page of the stream and will not become one by
    /// waiting: memory the copy could not read (FORMAT.md: its `magic`
    /// is not the page magic), or a header that is none.
    Corrupt,
}

/// What the slot at region offset `at` of `buf` holds of stream `stream`.
pub(super) fn slot_state(buf: &[u8], at: u64, stream: u16, e: pstore_ring::Endian) -> Slot {
    if let Some(h) = header(buf, at, stream, e) {
        let open = h.flags.get(e) == PAGE_OPEN;
        return Slot::Page {
            seq: h.seq.get(e),
            open,
        };
    }
    let bytes = usize::try_from(at)
        .ok()
        .and_then(|at| buf.get(at..at.checked_add(PAGE_HEADER_SIZE)?));
    let Some(h) = bytes.and_then(|b| PageHeader::read_from_bytes(b).ok()) else {
        return Slot::Corrupt;
    };
    let magic = h.magic.get(e);
    let opening =
        magic == PAGE_MAGIC && h.stream.get(e) == stream && h.flags.get(e) == PAGE_RESETTING;
    if magic == 0 || opening {
        Slot::Pending
    } else {
        Slot::Corrupt
    }
}

/// Of a stream's pages read in one go while its writer went on: the
/// slots to hand over, and the seq of the page its next events are in.
///
/// The pages are read one after another, so a slot may be read before
/// the writer comes back to it. A page missing between two that were
/// read is then still in the ring, unread: it and everything after it
/// wait for the next poll, which reads on from it, rather than being
/// counted missed. So does the rest of a page read open before a newer
/// one: its writer filled it after the copy. A page missing whose slot
/// holds a newer one was written over before the reader came, and one
/// whose slot cannot be read will never be: each a loss, as it is.
/// Otherwise the next events are in the newest page (the one the writer
/// is in).
pub(super) fn settle(
    buf: &[u8],
    span: &Span,
    page: u64,
    e: pstore_ring::Endian,
) -> (Vec<u64>, u64) {
    let count = u64::from(span.pages);
    let state = |slot: u64| slot_state(buf, span.start + slot * page, span.index, e);
    // Whether the page of `seq` may still be read from its slot.
    let to_come = |seq: u64| match state((seq - 1) % count) {
        Slot::Page { seq: there, .. } => there < seq,
        Slot::Pending => true,
        Slot::Corrupt => false,
    };
    let mut read: Vec<(u64, u64, bool)> = (0..count)
        .filter_map(|slot| match state(slot) {
            Slot::Page { seq, open } if seq != 0 => Some((seq, slot, open)),
            _ => None,
        })
        .collect();
    read.sort_unstable();
    let mut kept = Vec::with_capacity(read.len());
    let mut last: Option<(u64, bool)> = None;
    for (seq, slot, open) in read {
        if let Some((last, last_open)) = last {
            if last_open {
                return (kept, last);
            }
            // Only the last `count` seqs up to this page can still be in
            // the ring with it.
            let missing = last.saturating_add(1).max(seq.saturating_sub(count - 1))..seq;
            if let Some(unread) = missing.into_iter().find(|&m| to_come(m)) {
                return (kept, unread);
            }
        }
        kept.push(slot);
        last = Some((seq, open));
    }
    (kept, last.map_or(1, |(seq, _)| seq))
}
