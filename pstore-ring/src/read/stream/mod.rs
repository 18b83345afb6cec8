//! Rebuilding one stream: classify every page slot, order the readable
//! pages by sequence number, decode or salvage them, and account for every
//! event that is not there, including those after the newest readable page
//! (from the stream's tail, or by walking the ring when it has none).

use super::{ClockStep, Diagnostic, Problem, Region, StreamInfo, TailTable, MAX_CLOCK_STEPS};
use crate::endian::Endian;
use crate::layout::*;
use crate::record::Records;
use alloc::vec::Vec;
use core::ops::Range;
use zerocopy::FromBytes;

mod end;
mod report;

use end::{end_loss, read_tail, Newest};
use report::lost;
pub(crate) use report::{lost_events, pages_with};
pub use report::{EndCause, Event, Loss, LossKind, PageReport, PageStatus, StreamTrace};

/// A page events were decoded from, with what it takes to walk them again:
/// a page's events depend on nothing but its own header and committed
/// bytes (the running time starts from its `first_ts`, indexes from its
/// `first_index`), so any page can be walked alone, in any order, any
/// number of times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodedPage<'a> {
    pub slot: u32,
    pub seq: u64,
    /// The header's `first_ts`, where the page's running time starts (the
    /// report's `first_ts` is its first event's time).
    pub start_ts: u64,
    /// The header's `first_index`: the page's first event's index.
    pub first_index: u64,
    /// Events decoded from it: the first `records` records of its walk
    /// (the walk stopped, or salvage ended, after them).
    pub records: u32,
    /// The time of its last event decoded (`start_ts` when none): the
    /// latest of its events, as time only goes forward within a page.
    pub last_ts: u64,
    /// Events of its stream before it, as [`PageReport::first_event`].
    pub first_event: usize,
    /// Whether the page was open, its events salvaged.
    pub salvaged: bool,
    /// The page's committed bytes, after its header in its slot: the
    /// slot says where, so a page costs 4 bytes here rather than a
    /// slice's 16 (a 4 GiB region has a million pages).
    commit: u32,
    /// For the region's bytes, which the stream holds.
    _region: core::marker::PhantomData<&'a [u8]>,
}

/// A stream rebuilt without holding its events: what [`StreamTrace`]
/// holds but the events, which are walked again from the region's bytes,
/// page by page, when asked for. Its memory follows the stream's pages,
/// not its events.
#[derive(Clone, Debug)]
pub struct StreamPages<'a> {
    pub info: StreamInfo,
    /// As [`StreamTrace::pages`].
    pub pages: Vec<PageReport>,
    /// The pages events were decoded from, in stream order (by `seq`):
    /// [`StreamTrace::decoded_pages`]'s pages, walkable.
    pub decoded: Vec<DecodedPage<'a>>,
    /// As [`StreamTrace::losses`].
    pub losses: Vec<Loss>,
    /// The stream's `clock` events, kept from the one decoding walk: the
    /// wall clock needs every one of them before the first line is out.
    /// Of a stream with more, the newest [`MAX_CLOCK_STEPS`].
    clock: Vec<ClockStep>,
    /// The steps older than those, left out: the newest of them (the
    /// offset in effect before the oldest kept) and how many.
    clock_left_out: Option<(ClockStep, u64)>,
    endian: Endian,
    /// The region's bytes and page size: where each decoded page's
    /// committed bytes are.
    bytes: &'a [u8],
    page_size: u64,
}

impl<'a> StreamPages<'a> {
    /// Events decoded, over all pages.
    pub fn event_count(&self) -> usize {
        self.decoded
            .iter()
            .fold(0, |n, p| n.saturating_add(p.records as usize))
    }

    /// Every event, in stream order, walked again page by page: exactly
    /// [`StreamTrace::events`].
    pub fn events(&self) -> StreamEvents<'_, 'a> {
        self.events_from(0)
    }

    /// The events of [`Self::decoded`]'s pages from `page` on, in stream
    /// order.
    pub fn events_from(&self, page: usize) -> StreamEvents<'_, 'a> {
        StreamEvents {
            stream: self,
            pages: self.decoded.get(page..).unwrap_or_default().iter(),
            page: None,
        }
    }

    /// The events of one of [`Self::decoded`]'s pages: exactly
    /// `events[page.first_event..][..page.records]` of the stream's
    /// [`StreamTrace`].
    pub fn page_events(&self, page: &DecodedPage<'a>) -> PageEvents<'a> {
        PageEvents::new(self.info.index, self.endian, page, self.data(page))
    }

    /// `page`'s committed bytes. Empty for a page not of this stream,
    /// which [`Self::decoded`] holds none of.
    fn data(&self, page: &DecodedPage<'a>) -> &'a [u8] {
        let at = self.info.pages_offset
            + u64::from(page.slot) * self.page_size
            + PAGE_HEADER_SIZE as u64;
        usize::try_from(at)
            .ok()
            .and_then(|at| self.bytes.get(at..)?.get(..page.commit as usize))
            .unwrap_or_default()
    }

    /// The stream's first event: its first page with any.
    pub fn first_event(&self) -> Option<Event<'a>> {
        let page = self.decoded.iter().find(|p| p.records > 0)?;
        self.page_events(page).next()
    }

    /// The stream's last event: its last page with any, walked to its end.
    pub fn last_event(&self) -> Option<Event<'a>> {
        let page = self.decoded.iter().rev().find(|p| p.records > 0)?;
        self.page_events(page).last()
    }

    /// The stream's `clock` events whose payload decodes, in stream order:
    /// of more than [`MAX_CLOCK_STEPS`], the newest.
    pub fn clock_steps(&self) -> &[ClockStep] {
        &self.clock
    }

    /// The `clock` events older than [`Self::clock_steps`], left out: the
    /// newest of them and how many (`None` when none were).
    pub fn clock_steps_left_out(&self) -> Option<(ClockStep, u64)> {
        self.clock_left_out
    }

    /// The same stream with its events held: what
    /// [`Region::decode_stream`] returns.
    pub fn to_trace(&self) -> StreamTrace<'a> {
        StreamTrace {
            info: self.info.clone(),
            pages: self.pages.clone(),
            events: self.events().collect(),
            losses: self.losses.clone(),
        }
    }

    /// As [`StreamTrace::lost_events`].
    pub fn lost_events(&self) -> u64 {
        lost_events(&self.losses)
    }

    /// As [`StreamTrace::lost_exact`].
    pub fn lost_exact(&self) -> bool {
        self.losses.iter().all(|l| l.exact)
    }

    /// As [`StreamTrace::lost`].
    pub fn lost(&self, kind: LossKind) -> u64 {
        lost(&self.losses, kind)
    }

    /// As [`StreamTrace::pages_with`].
    pub fn pages_with(&self, status: PageStatus) -> usize {
        pages_with(&self.pages, status)
    }

    /// As [`StreamTrace::page`].
    pub fn page(&self, slot: u32) -> Option<&PageReport> {
        report_of(&self.pages, slot).map(|i| &self.pages[i])
    }
}

/// The events of one decoded page, walked again from its bytes.
#[derive(Clone, Debug)]
pub struct PageEvents<'a> {
    records: Records<'a>,
    stream: u16,
    first_index: u64,
    /// Events yielded so far, and how many the page has.
    done: u32,
    records_total: u32,
    salvaged: bool,
}

impl<'a> PageEvents<'a> {
    #[inline]
    fn new(stream: u16, endian: Endian, page: &DecodedPage<'a>, data: &'a [u8]) -> Self {
        PageEvents {
            records: Records::new(data, page.start_ts, endian),
            stream,
            first_index: page.first_index,
            done: 0,
            records_total: page.records,
            salvaged: page.salvaged,
        }
    }
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = Event<'a>;

    #[inline]
    fn next(&mut self) -> Option<Event<'a>> {
        if self.done >= self.records_total {
            return None;
        }
        // The first `records` records decoded once, and the bytes are
        // borrowed, so cannot have changed: they decode again. The schema
        // checks of a salvaged page passed for each of them, so are not
        // repeated. Should the walk end early anyway, the page just ends.
        let rec = match self.records.next() {
            Some(Ok(rec)) => rec,
            _ => {
                self.done = self.records_total;
                return None;
            }
        };
        let event = Event {
            stream: self.stream,
            index: self.first_index.saturating_add(u64::from(self.done)),
            ts: rec.ts,
            type_id: rec.type_id,
            payload: rec.payload,
            salvaged: self.salvaged,
        };
        self.done += 1;
        Some(event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some((self.records_total - self.done) as usize))
    }
}

impl core::iter::FusedIterator for PageEvents<'_> {}

/// A stream's events, in stream order, walked page by page: one page's
/// walk is all it holds.
#[derive(Clone, Debug)]
pub struct StreamEvents<'p, 'a> {
    stream: &'p StreamPages<'a>,
    pages: core::slice::Iter<'p, DecodedPage<'a>>,
    page: Option<PageEvents<'a>>,
}

impl<'a> Iterator for StreamEvents<'_, 'a> {
    type Item = Event<'a>;

    #[inline]
    fn next(&mut self) -> Option<Event<'a>> {
        loop {
            if let Some(ev) = self.page.as_mut().and_then(Iterator::next) {
                return Some(ev);
            }
            let page = self.pages.next()?;
            self.page = Some(self.stream.page_events(page));
        }
    }
}

impl core::iter::FusedIterator for StreamEvents<'_, '_> {}

/// Where in `pages` (sorted by slot, one report per slot or run) the
/// report covering `slot` is.
fn report_of(pages: &[PageReport], slot: u32) -> Option<usize> {
    let i = pages.partition_point(|p| u64::from(p.slot) + u64::from(p.slots) <= u64::from(slot));
    pages.get(i).filter(|p| p.slot <= slot).map(|_| i)
}

/// One diagnostic per run of absent slots: a filtered dump can leave out
/// thousands of (typically unused, all-zero) pages.
fn report_absent(info: &StreamInfo, pages: &[PageReport], diags: &mut Vec<Diagnostic>) {
    for p in pages.iter().filter(|p| p.status == PageStatus::Absent) {
        diags.push(Diagnostic {
            stream: Some(info.index),
            page: Some(p.slot),
            offset: p.offset,
            problem: Problem::Absent {
                from: p.slot,
                count: p.slots,
            },
        });
    }
}

/// A page that passed the header checks.
struct Readable<'a> {
    slot: u32,
    seq: u64,
    first_ts: u64,
    first_index: u64,
    count: u32,
    dropped: u32,
    open: bool,
    data: &'a [u8],
}

/// Decodes one stream into a [`StreamPages`]: every page is walked once,
/// to check it and count its events, but only its `clock` events are
/// kept; the rest are walked again on demand.
pub(super) fn decode_paged<'a>(
    region: &Region<'a>,
    info: &StreamInfo,
    diags: &mut Vec<Diagnostic>,
    walked: &mut dyn FnMut(Range<u64>),
) -> StreamPages<'a> {
    let e = region.header.endian;
    // Only kernel streams step the region's wall clock (WallClock): a
    // user stream's steps are not kept. Of a stream's, the newest
    // MAX_CLOCK_STEPS, trimmed as they come so memory stays bounded.
    let kernel = info.is_kernel();
    let mut clock = Vec::new();
    let mut left_out: Option<(ClockStep, u64)> = None;
    // Leaves out all but the newest `keep` steps, remembering the newest
    // left out: the offset in effect before the oldest kept.
    let mut trim = |clock: &mut Vec<ClockStep>, keep: usize| {
        let over = clock.len().saturating_sub(keep);
        if let Some(&newest) = over.checked_sub(1).and_then(|i| clock.get(i)) {
            let before = left_out.map_or(0, |(_, n)| n);
            left_out = Some((newest, before + over as u64));
            clock.drain(..over);
        }
    };
    let sink = |ev: Event<'a>| {
        if let Some(step) = ClockStep::of(&ev, e).filter(|_| kernel) {
            if clock.len() == 2 * MAX_CLOCK_STEPS {
                trim(&mut clock, MAX_CLOCK_STEPS);
            }
            clock.push(step);
        }
    };
    let r = rebuild(region, info, diags, sink, walked);
    trim(&mut clock, MAX_CLOCK_STEPS);
    if let Some((_, ignored)) = left_out {
        diags.push(Diagnostic {
            stream: Some(info.index),
            page: None,
            offset: info.pages_offset,
            problem: Problem::ClockSteps { ignored },
        });
    }
    StreamPages {
        info: r.info,
        pages: r.pages,
        decoded: r.decoded,
        losses: r.losses,
        clock,
        clock_left_out: left_out,
        endian: e,
        bytes: region.bytes(),
        page_size: u64::from(region.header.page_size),
    }
}

/// A stream rebuilt, whatever becomes of its events.
struct Rebuilt<'a> {
    info: StreamInfo,
    pages: Vec<PageReport>,
    decoded: Vec<DecodedPage<'a>>,
    losses: Vec<Loss>,
}

/// Rebuilds one stream: its page reports, decoded pages and losses, with
/// its diagnostics appended to `diags`. Every event decoded goes to `sink`
/// once, in stream order. This is the one decoding walk: a
/// [`StreamTrace`]'s events too are [`StreamPages::events`] walked again.
fn rebuild<'a>(
    region: &Region<'a>,
    info: &StreamInfo,
    diags: &mut Vec<Diagnostic>,
    mut sink: impl FnMut(Event<'a>),
    walked: &mut dyn FnMut(Range<u64>),
) -> Rebuilt<'a> {
    let h = &region.header;
    let page_size = h.page_size as u64;
    // Slots that start past the end of the input are reported together, so
    // work and memory follow the bytes present, not what a header claims.
    let have = region.bytes().len() as u64;
    let present = have.saturating_sub(info.pages_offset).div_ceil(page_size);
    let present = u32::try_from(present)
        .unwrap_or(u32::MAX)
        .min(info.page_count);
    if present < info.page_count {
        let offset = info.pages_offset + u64::from(present) * page_size;
        let problem = Problem::PagesMissing {
            from: present,
            count: info.page_count - present,
        };
        diags.push(Diagnostic {
            stream: Some(info.index),
            page: Some(present),
            offset,
            problem,
        });
    }
    // Not reserved for `present` reports: a run of absent slots is one
    // report, so the count follows the slots the input holds.
    let mut pages: Vec<PageReport> = Vec::new();
    let mut readable = Vec::new();
    let mut slot = 0;
    while slot < present {
        let offset = info.pages_offset + u64::from(slot) * page_size;
        // Every slot starting before the absent stretch ends touches it:
        // the whole run is one report, found in one step.
        if let Some(end) = region.absent_until(offset..offset + page_size) {
            let next = end.saturating_sub(info.pages_offset).div_ceil(page_size);
            let next = u32::try_from(next)
                .unwrap_or(u32::MAX)
                .clamp(slot + 1, present);
            match pages.last_mut() {
                Some(last)
                    if last.status == PageStatus::Absent
                        && u64::from(last.slot) + u64::from(last.slots) == u64::from(slot) =>
                {
                    last.slots = next - last.slot;
                }
                _ => pages.push(PageReport {
                    slot,
                    slots: next - slot,
                    offset,
                    status: PageStatus::Absent,
                    seq: 0,
                    records: 0,
                    first_event: 0,
                }),
            }
            slot = next;
            continue;
        }
        let mut report = PageReport {
            slot,
            slots: 1,
            offset,
            status: PageStatus::Unused,
            seq: 0,
            records: 0,
            first_event: 0,
        };
        let class = classify(region, info, offset);
        walked(offset..offset + page_size);
        match class {
            Ok(Some(r)) => {
                report.seq = r.seq;
                readable.push(r);
            }
            Ok(None) => {}
            Err((status, seq, problem)) => {
                report.status = status;
                report.seq = seq;
                if let Some(problem) = problem {
                    diags.push(Diagnostic {
                        stream: Some(info.index),
                        page: Some(slot),
                        offset,
                        problem,
                    });
                }
            }
        }
        pages.push(report);
        slot += 1;
    }
    report_absent(info, &pages, diags);
    readable.sort_by_key(|r| (r.seq, r.slot));
    readable.dedup_by(|later, earlier| {
        let dup = later.seq == earlier.seq;
        if dup {
            let offset = info.pages_offset + u64::from(later.slot) * page_size;
            let problem = Problem::DuplicateSeq(later.seq);
            diags.push(Diagnostic {
                stream: Some(info.index),
                page: Some(later.slot),
                offset,
                problem,
            });
            if let Some(i) = report_of(&pages, later.slot) {
                pages[i].status = PageStatus::Corrupt;
            }
        }
        dup
    });

    let unreadable = present < info.page_count
        || pages.iter().any(|p| {
            matches!(
                p.status,
                PageStatus::Corrupt | PageStatus::Truncated | PageStatus::Absent
            )
        });
    let mut trace = Rebuilt {
        info: info.clone(),
        pages,
        decoded: Vec::new(),
        losses: Vec::new(),
    };
    // Events decoded so far: where the next page's start in the stream.
    let mut first_event: usize = 0;
    let newest = readable.last().map_or(0, |r| r.seq);
    let tail = read_tail(region, info, newest, diags);
    // A believed tail newer than every readable page also tells which
    // pages have left the ring.
    let max_seq = tail.best.map_or(newest, |t| t.seq.max(newest));
    let oldest_present = max_seq.saturating_sub(u64::from(info.page_count)) + 1;
    // Where the previous readable page ended: (seq, next index, last time).
    let mut prev: Option<(u64, u64, u64)> = None;
    // The newest readable page: its slot and the index up to which its
    // events are decoded or counted lost.
    let mut last: Option<(u32, u64)> = None;
    for r in &readable {
        let offset = info.pages_offset + u64::from(r.slot) * page_size;
        let mut note = |problem| {
            diags.push(Diagnostic {
                stream: Some(info.index),
                page: Some(r.slot),
                offset,
                problem,
            })
        };
        let walk = decode_page(region, info.index, r, &mut sink);
        walked(offset..offset + page_size);
        let status = walk.status;
        if let Some(p) = walk.stopped {
            note(p);
        }
        let decoded = walk.decoded;
        let first_ts = walk.first_ts.unwrap_or(r.first_ts);
        let last_ts = walk.last_ts.unwrap_or(r.first_ts);
        trace.decoded.push(DecodedPage {
            slot: r.slot,
            seq: r.seq,
            start_ts: r.first_ts,
            first_index: r.first_index,
            records: decoded,
            last_ts,
            first_event,
            salvaged: r.open,
            commit: r.data.len() as u32,
            _region: core::marker::PhantomData,
        });

        let gap_kind;
        let (gap_events, gap_pages, after_ts) = match prev {
            None => {
                gap_kind = if !unreadable || r.seq <= oldest_present {
                    LossKind::Overwritten
                } else {
                    LossKind::Unreadable
                };
                (r.first_index, r.seq - 1, None)
            }
            Some((pseq, pend, pts)) => {
                gap_kind = LossKind::Unreadable;
                if r.first_index < pend {
                    note(Problem::IndexMismatch {
                        expected: pend,
                        found: r.first_index,
                    });
                }
                (
                    r.first_index.saturating_sub(pend),
                    r.seq - pseq - 1,
                    Some(pts),
                )
            }
        };
        if gap_events > 0 {
            trace.losses.push(Loss {
                stream: info.index,
                kind: gap_kind,
                events: gap_events,
                pages: gap_pages,
                after_ts,
                before_ts: Some(first_ts),
                at_index: r.first_index,
                page_seq: None,
                cause: None,
                exact: true,
            });
        }
        if r.dropped > 0 {
            trace.losses.push(Loss {
                stream: info.index,
                kind: LossKind::Dropped,
                events: r.dropped.into(),
                pages: 0,
                after_ts: Some(r.first_ts),
                before_ts: Some(last_ts),
                at_index: r.first_index.saturating_add(u64::from(decoded)),
                page_seq: Some(r.seq),
                cause: None,
                exact: true,
            });
        }
        let mut status = status;
        if !r.open && r.count != decoded {
            note(Problem::CountMismatch {
                header: r.count,
                decoded,
            });
            status = PageStatus::Damaged;
        }
        // A closed page's `count` is covered by its CRC, so the next page
        // starts after it even when fewer records decoded; an open page's
        // `count` may run one ahead of `commit` and is only advisory.
        let span = u64::from(if r.open {
            decoded
        } else {
            r.count.max(decoded)
        });
        // An open page has no CRC: its `first_index` can be anything, up
        // to u64::MAX. Events past the end of the index space keep the
        // saturated index `decode_page` gave them; the page says why.
        let end = r.first_index.checked_add(span).unwrap_or_else(|| {
            note(Problem::InvalidField {
                field: "first_index",
                value: r.first_index,
            });
            u64::MAX
        });
        if r.count > decoded {
            trace.losses.push(Loss {
                stream: info.index,
                kind: LossKind::Torn,
                events: u64::from(r.count - decoded),
                pages: 0,
                after_ts: Some(last_ts),
                before_ts: None,
                at_index: r.first_index.saturating_add(u64::from(decoded)),
                page_seq: None,
                cause: None,
                exact: true,
            });
        }
        if let Some(i) = report_of(&trace.pages, r.slot) {
            let report = &mut trace.pages[i];
            report.status = status;
            report.records = decoded;
            report.first_event = first_event;
        }
        first_event = first_event.saturating_add(decoded as usize);
        prev = Some((r.seq, end, last_ts));
        let covered = r
            .first_index
            .saturating_add(u64::from(r.count.max(decoded)));
        last = Some((r.slot, covered));
    }
    let newest = match (prev, last) {
        (Some((seq, _, ts)), Some((slot, covered))) => Some(Newest {
            slot,
            seq,
            covered,
            ts,
        }),
        _ => None,
    };
    if let Some(loss) = end_loss(info, &trace.pages, newest, &tail) {
        trace.losses.push(loss);
    }
    trace
}

type Unreadable = (PageStatus, u64, Option<Problem>);

/// Checks a page header the input holds (absent slots never get here):
/// `Ok(None)` for an unused slot, `Ok(Some)` for a page worth decoding,
/// `Err` with the status and reason otherwise.
fn classify<'a>(
    region: &Region<'a>,
    info: &StreamInfo,
    offset: u64,
) -> Result<Option<Readable<'a>>, Unreadable> {
    let h = &region.header;
    let e = h.endian;
    let page = usize::try_from(offset)
        .ok()
        .and_then(|o| region.bytes().get(o..))
        .map(|p| &p[..p.len().min(h.page_size as usize)]);
    let Some((ph, rest)) = page.and_then(|p| PageHeader::read_from_prefix(p).ok()) else {
        return Err((PageStatus::Truncated, 0, Some(Problem::Truncated)));
    };
    if ph.magic.0 == [0; 4] && ph.seq.0 == [0; 8] && ph.flags.0 == [0; 2] {
        return Ok(None);
    }
    let seq = ph.seq.get(e);
    let corrupt = |p| Err((PageStatus::Corrupt, seq, Some(p)));
    if ph.magic.get(e) != PAGE_MAGIC {
        return corrupt(Problem::BadMagic(ph.magic.get(e)));
    }
    if ph.stream.get(e) != info.index {
        return corrupt(Problem::WrongStream(ph.stream.get(e)));
    }
    let open = match ph.flags.get(e) {
        PAGE_OPEN => true,
        PAGE_CLOSED => false,
        PAGE_RESETTING => return Err((PageStatus::Resetting, seq, None)),
        other => return corrupt(Problem::BadFlags(other)),
    };
    let commit = ph.commit.get(e);
    if commit as usize > h.page_size as usize - PAGE_HEADER_SIZE {
        return corrupt(Problem::CommitOutOfRange(commit));
    }
    let Some(data) = rest.get(..commit as usize) else {
        return Err((PageStatus::Truncated, seq, Some(Problem::Truncated)));
    };
    if !open {
        let stored = ph.crc.get(e);
        let computed = h.checksum.crc(&[
            &zerocopy::IntoBytes::as_bytes(&ph)[..PAGE_HEADER_SIZE - 4],
            data,
        ]);
        if stored != computed {
            return corrupt(Problem::Crc { stored, computed });
        }
    }
    if seq == 0 {
        return corrupt(Problem::InvalidField {
            field: "seq",
            value: 0,
        });
    }
    Ok(Some(Readable {
        slot: ((offset - info.pages_offset) / u64::from(h.page_size)) as u32,
        seq,
        first_ts: ph.first_ts.get(e),
        first_index: ph.first_index.get(e),
        count: ph.count.get(e),
        dropped: ph.dropped.get(e),
        open,
        data,
    }))
}

/// What walking one page found.
struct Walk {
    status: PageStatus,
    /// What stopped the walk before the end of the committed bytes.
    stopped: Option<Problem>,
    /// Events decoded: always the first records of the walk.
    decoded: u32,
    /// The first and last decoded event's times.
    first_ts: Option<u64>,
    last_ts: Option<u64>,
}

/// Passes a page's events to `sink`; returns its status and what stopped
/// the walk. A closed page keeps every well-formed record, known type or
/// not. An open page has no CRC, so each record must also be of a known
/// type whose fields fill its payload exactly.
///
/// The events are always the first `decoded` records the page's
/// [`Records`] walk yields, and nothing but the page itself decides them:
/// [`PageEvents`] relies on this to walk them again.
fn decode_page<'a>(
    region: &Region<'a>,
    stream: u16,
    r: &Readable<'a>,
    sink: &mut impl FnMut(Event<'a>),
) -> Walk {
    let e = region.header.endian;
    let mut walk = Walk {
        status: if r.open {
            PageStatus::Salvaged
        } else {
            PageStatus::Intact
        },
        stopped: None,
        decoded: 0,
        first_ts: None,
        last_ts: None,
    };
    for rec in Records::new(r.data, r.first_ts, e) {
        let rec = match rec {
            Ok(rec) => rec,
            Err(err) => {
                if !r.open {
                    walk.status = PageStatus::Damaged;
                }
                walk.stopped = Some(Problem::Record(err));
                return walk;
            }
        };
        if r.open {
            let Some(ty) = region.schema.get(rec.type_id) else {
                walk.stopped = Some(Problem::UnknownType {
                    offset: rec.offset,
                    type_id: rec.type_id,
                });
                return walk;
            };
            if !ty.matches(rec.payload, e) {
                walk.stopped = Some(Problem::PayloadMismatch {
                    offset: rec.offset,
                    type_id: rec.type_id,
                });
                return walk;
            }
        }
        sink(Event {
            stream,
            // Not `(first_index..).zip(..)`: a hostile `first_index` near
            // u64::MAX would overflow the range.
            index: r.first_index.saturating_add(u64::from(walk.decoded)),
            ts: rec.ts,
            type_id: rec.type_id,
            payload: rec.payload,
            salvaged: r.open,
        });
        walk.first_ts.get_or_insert(rec.ts);
        walk.last_ts = Some(rec.ts);
        // A record takes at least 4 of a page's at most 2^32 bytes.
        walk.decoded = walk.decoded.saturating_add(1);
    }
    walk
}
