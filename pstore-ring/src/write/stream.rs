//! Recording into one stream's ring of pages, in the order the format's
//! crash analysis assumes (see the module above).

use crate::endian::{Endian, U16, U32, U64};
use crate::layout::*;
use crate::schema::{self, EventDef};
use core::sync::atomic::{fence, Ordering};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Hands out one [`StreamWriter`] per stream, in stream order.
pub struct StreamWriters<'a> {
    pub(super) rest: &'a mut [u8],
    /// The tail pairs of the streams not yet handed out.
    pub(super) tails: &'a mut [u8],
    /// The descriptors, which say how many pages each stream has.
    pub(super) descs: &'a [u8],
    pub(super) next: u16,
    pub(super) count: u16,
    pub(super) e: Endian,
    pub(super) page_size: usize,
    pub(super) start_ts: u64,
}

impl<'a> Iterator for StreamWriters<'a> {
    type Item = StreamWriter<'a>;

    fn next(&mut self) -> Option<StreamWriter<'a>> {
        if self.next == self.count {
            return None;
        }
        let at = usize::from(self.next) * DESC_SIZE;
        let desc = StreamDesc::read_from_bytes(self.descs.get(at..at + DESC_SIZE)?).ok()?;
        let pages = desc.page_count.get(self.e);
        let len = pages as usize * self.page_size;
        let (mine, rest) = core::mem::take(&mut self.rest).split_at_mut(len);
        self.rest = rest;
        let (tail, tails) = core::mem::take(&mut self.tails).split_at_mut(TAIL_COPIES * TAIL_SIZE);
        self.tails = tails;
        let w = StreamWriter::start(
            mine,
            Some(tail),
            self.next,
            self.e,
            self.page_size,
            self.start_ts,
        )?;
        self.next += 1;
        Some(w)
    }
}

/// Why an event was not recorded. The writer has counted it in the current
/// page's `dropped`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    #[error("event payload of {0} bytes does not fit one record")]
    TooLarge(usize),
    #[error("type id {0} is reserved for the format")]
    ReservedType(u8),
    #[error("values do not match the fields of event type {0}")]
    Unencodable(u8),
}

/// Records into one stream's ring of pages.
pub struct StreamWriter<'a> {
    pages: &'a mut [u8],
    /// The stream's two tail copies; `None` where they are not the
    /// writer's to write (a user stream the kernel module handed out: the
    /// tail table is the kernel's).
    pub(super) tail: Option<&'a mut [u8]>,
    pub(super) e: Endian,
    page_size: usize,
    page_count: u32,
    pub(super) stream: u16,
    cur: u32,
    seq: u64,
    next_index: u64,
    /// The timestamp the next record's delta is taken from.
    pub(super) time: u64,
    pub(super) commit: usize,
    count: u32,
    open: bool,
    /// A [`Reservation`] on the current page was let go uncommitted: the
    /// record is lost, and counted in the page's `dropped` by the next
    /// reserve or close, as the kernel's panic path counts the record a
    /// stopped or interrupted writer left in flight.
    in_flight: bool,
}

impl<'a> StreamWriter<'a> {
    /// Starts stream `stream` of a region laid out elsewhere (the kernel
    /// module's pool of user streams, say) over its `pages`, whole pages
    /// of `page_size` bytes whose headers nothing else writes any more:
    /// opens page 0 with `seq` 1 and index 0 at time `start_ts`, as
    /// [`format`] starts every stream. `tail` is the stream's pair of tail
    /// copies, or `None` if they are not the writer's. `None` when the
    /// page size is not the format's or `pages` holds less than a page.
    pub fn start(
        pages: &'a mut [u8],
        tail: Option<&'a mut [u8]>,
        stream: u16,
        e: Endian,
        page_size: usize,
        start_ts: u64,
    ) -> Option<StreamWriter<'a>> {
        let sizes = MIN_PAGE_SIZE as usize..=MAX_PAGE_SIZE as usize;
        if !sizes.contains(&page_size) || pages.len() < page_size {
            return None;
        }
        if tail
            .as_ref()
            .is_some_and(|t| t.len() < TAIL_COPIES * TAIL_SIZE)
        {
            return None;
        }
        let page_count = u32::try_from(pages.len() / page_size).ok()?;
        let mut w = StreamWriter {
            pages,
            tail,
            e,
            page_size,
            page_count,
            stream,
            cur: 0,
            seq: 0,
            next_index: 0,
            time: start_ts,
            commit: 0,
            count: 0,
            open: false,
            in_flight: false,
        };
        w.open_page(0, start_ts);
        Some(w)
    }

    pub fn stream(&self) -> u16 {
        self.stream
    }

    /// Records committed so far; the per-stream index of the next one.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Page slots in this stream's ring.
    pub fn page_count(&self) -> u32 {
        self.page_count
    }

    /// The sequence number of the current page.
    pub fn page_seq(&self) -> u64 {
        self.seq
    }

    fn page(&mut self, slot: u32) -> &mut [u8] {
        let at = slot as usize * self.page_size;
        &mut self.pages[at..at + self.page_size]
    }

    pub(super) fn header_mut(&mut self) -> &mut PageHeader {
        let slot = self.cur;
        let page = self.page(slot);
        // The page slice is at least PAGE_HEADER_SIZE long by construction.
        PageHeader::mut_from_prefix(page)
            .map(|(h, _)| h)
            .expect("page holds a header")
    }

    fn open_page(&mut self, slot: u32, ts: u64) {
        let e = self.e;
        self.seq += 1;
        self.cur = slot;
        self.time = ts;
        self.commit = 0;
        self.count = 0;
        self.open = true;
        let (seq, index, stream) = (self.seq, self.next_index, self.stream);
        let h = self.header_mut();
        // Invalidate first, so a crash while the rest is rewritten leaves a
        // page that reads as "being reset", never as a mix of two pages.
        h.flags = U16::new(e, PAGE_RESETTING);
        fence(Ordering::Release);
        h.magic = U32::new(e, PAGE_MAGIC);
        h.stream = U16::new(e, stream);
        h.first_ts = U64::new(e, ts);
        h.first_index = U64::new(e, index);
        h.commit = U32::new(e, 0);
        h.count = U32::new(e, 0);
        h.dropped = U32::new(e, 0);
        h.crc = U32::new(e, 0);
        h.seq = U64::new(e, seq);
        fence(Ordering::Release);
        h.flags = U16::new(e, PAGE_OPEN);
        self.put_tail(seq, index, index, TAIL_OPEN);
    }

    /// Rewrites copy `seq & 1` of the stream's tail, whole, after the page
    /// stores it describes. Its CRC goes with it: a copy caught half
    /// rewritten fails it, and the other copy still holds the update before.
    fn put_tail(&mut self, seq: u64, first_index: u64, end_index: u64, state: u16) {
        let e = self.e;
        let mut t = StreamTail::new_zeroed();
        t.seq = U64::new(e, seq);
        t.first_index = U64::new(e, first_index);
        t.end_index = U64::new(e, end_index);
        t.stream = U16::new(e, self.stream);
        t.state = U16::new(e, state);
        t.crc = U32::new(e, crc32(&[&t.as_bytes()[..TAIL_SIZE - 4]]));
        let at = (seq & 1) as usize * TAIL_SIZE;
        fence(Ordering::Release);
        if let Some(tail) = self.tail.as_deref_mut() {
            tail[at..at + TAIL_SIZE].copy_from_slice(t.as_bytes());
        }
    }

    /// Closes the current page: CRC first, then the flag that makes the CRC
    /// count. Writing after a close opens the next page. A record reserved
    /// on the page and never committed is counted in its `dropped` first.
    pub fn close(&mut self) {
        if !self.open {
            return;
        }
        self.count_in_flight();
        let e = self.e;
        let commit = self.commit;
        let slot = self.cur;
        let page = self.page(slot);
        let (head, data) = page.split_at_mut(PAGE_HEADER_SIZE);
        let Ok(h) = PageHeader::mut_from_bytes(head) else {
            return;
        };
        // The CRC covers the header as it will read once closed; computed on
        // a copy, so the page never shows "closed" before its CRC is there.
        let mut closed = *h;
        closed.flags = U16::new(e, PAGE_CLOSED);
        let crc = crc32(&[&closed.as_bytes()[..PAGE_HEADER_SIZE - 4], &data[..commit]]);
        h.crc = U32::new(e, crc);
        fence(Ordering::Release);
        h.flags = U16::new(e, PAGE_CLOSED);
        self.open = false;
        // The end comes from what the header published, as in the C writer,
        // whose panic path closes pages of CPUs stopped mid-record.
        let (seq, first) = (closed.seq.get(e), closed.first_index.get(e));
        let end = first.saturating_add(closed.count.get(e).into());
        self.put_tail(seq, first, end, TAIL_CLOSED);
    }

    /// Counts one event that could not be recorded.
    pub fn drop_event(&mut self) {
        let e = self.e;
        if !self.open {
            let next = (self.cur + 1) % self.page_count;
            let t = self.time;
            self.open_page(next, t);
        }
        let h = self.header_mut();
        h.dropped = U32::new(e, h.dropped.get(e).saturating_add(1));
    }

    /// Counts the record a let-go [`Reservation`] left on the current page.
    fn count_in_flight(&mut self) {
        if core::mem::take(&mut self.in_flight) {
            self.drop_event();
        }
    }

    /// Records one event whose payload is already encoded.
    pub fn write(&mut self, ts: u64, type_id: u8, payload: &[u8]) -> Result<(), Dropped> {
        self.write_with(ts, type_id, payload.len(), |dst| {
            dst.copy_from_slice(payload)
        })
    }

    /// Records one event of `len` payload bytes, filled in place by `fill`.
    /// Timestamps are clamped so they never go backwards within a stream.
    pub fn write_with(
        &mut self,
        ts: u64,
        type_id: u8,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), Dropped> {
        let mut r = self.reserve(ts, type_id, len)?;
        fill(r.payload());
        r.commit();
        Ok(())
    }

    /// Starts a record of `len` payload bytes: its time prefix, header and
    /// padding are written past `commit`, where no reader looks, and the
    /// payload is the caller's to fill before [`Reservation::commit`]. A
    /// reservation let go without a commit is a record in flight when its
    /// writer stopped: it stays invisible and is counted as dropped on its
    /// page by the next reserve or close (FORMAT.md, "Nesting lanes").
    pub fn reserve(
        &mut self,
        ts: u64,
        type_id: u8,
        len: usize,
    ) -> Result<Reservation<'_, 'a>, Dropped> {
        self.count_in_flight();
        if type_id < FIRST_EVENT_TYPE {
            self.drop_event();
            return Err(Dropped::ReservedType(type_id));
        }
        let Some(words) = record_words(len) else {
            self.drop_event();
            return Err(Dropped::TooLarge(len));
        };
        let body = words as usize * RECORD_ALIGN;
        if body > self.page_size - PAGE_HEADER_SIZE {
            self.drop_event();
            return Err(Dropped::TooLarge(len));
        }
        let ts = ts.max(self.time);
        let mut need = body + time_prefix_len(ts - self.time);
        if !self.open || self.commit + need > self.page_size - PAGE_HEADER_SIZE {
            self.close();
            let next = (self.cur + 1) % self.page_count;
            self.open_page(next, ts);
            need = body;
        }
        let e = self.e;
        let delta = ts - self.time;
        let start = PAGE_HEADER_SIZE + self.commit;
        let slot = self.cur;
        let page = self.page(slot);
        let rec = &mut page[start..start + need];
        let (prefix, record) = rec.split_at_mut(need - body);
        let low = write_time_prefix(prefix, delta, ts, e);
        record[..4].copy_from_slice(&U32::new(e, record_header(type_id, words, low)).0);
        record[4 + len..].fill(0);
        self.time = ts;
        self.in_flight = true;
        let at = start + need - body + RECORD_HEADER_SIZE;
        Ok(Reservation {
            payload: at..at + len,
            len: need,
            w: self,
        })
    }
}

/// A record [`StreamWriter::reserve`] placed and not yet committed.
pub struct Reservation<'w, 'a> {
    w: &'w mut StreamWriter<'a>,
    /// The payload's bytes in the current page.
    payload: core::ops::Range<usize>,
    /// Bytes `commit` grows by: time prefix and record.
    len: usize,
}

impl Reservation<'_, '_> {
    /// The payload, to be filled before the commit.
    pub fn payload(&mut self) -> &mut [u8] {
        let slot = self.w.cur;
        &mut self.w.page(slot)[self.payload.clone()]
    }

    /// Makes the record visible: `commit` and `count` cover it.
    pub fn commit(self) {
        let w = self.w;
        let e = w.e;
        w.in_flight = false;
        w.commit += self.len;
        w.count += 1;
        w.next_index += 1;
        let (commit, count) = (w.commit as u32, w.count);
        fence(Ordering::Release);
        let h = w.header_mut();
        h.commit = U32::new(e, commit);
        fence(Ordering::Release);
        h.count = U32::new(e, count);
    }
}

/// Bytes of time-extend or absolute-time record a delta needs before the
/// record itself.
fn time_prefix_len(delta: u64) -> usize {
    if delta <= DELTA_MAX {
        0
    } else if delta <= u64::from(u32::MAX) {
        4
    } else {
        12
    }
}

/// Writes the prefix [`time_prefix_len`] asked for and returns the delta
/// left for the record's own header.
fn write_time_prefix(prefix: &mut [u8], delta: u64, ts: u64, e: Endian) -> u16 {
    match prefix.len() {
        0 => delta as u16,
        4 => {
            let hi = (delta >> DELTA_BITS) as u16;
            prefix.copy_from_slice(&U32::new(e, record_header(TYPE_TIME_EXTEND, 1, hi)).0);
            delta as u16
        }
        _ => {
            prefix[..4].copy_from_slice(&U32::new(e, record_header(TYPE_TIME_ABS, 3, 0)).0);
            prefix[4..12].copy_from_slice(&U64::new(e, ts).0);
            0
        }
    }
}

impl StreamWriter<'_> {
    /// Encodes `values` as an event of type `def` and records it.
    pub fn write_event(
        &mut self,
        ts: u64,
        def: &EventDef<'_>,
        values: &[schema::Value<'_>],
    ) -> Result<(), Dropped> {
        let Ok(len) = schema::payload_len(def, values) else {
            self.drop_event();
            return Err(Dropped::Unencodable(def.id));
        };
        let e = self.e;
        self.write_with(ts, def.id, len, |dst| {
            // `len` came from the same values, so this cannot fail.
            let _ = schema::encode_payload(def, values, e, dst);
        })
    }
}
