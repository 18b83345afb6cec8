//! A region as every writer sees it: its streams' events, walked again
//! from the region's bytes page by page, with an [`Overlay`]'s changes
//! laid over them when there is one (a bundle's redaction). Writers take
//! events only from here, so `extract` and the bundle write through the
//! same code, and memory follows pages, not events.

use pstore_ring::kprintf::Pointers;
use pstore_ring::merge::{merge_events, PagedMerge};
use pstore_ring::read::{
    DecodedPage, Event, Loss, PageEvents, PagedTrace, Region, StreamEvents, StreamInfo,
    StreamPages, Tally,
};
use pstore_ring::text::EmptyStreams;
use std::iter::Skip;
use std::ops::Range;

/// One region as the writers see it: a recovered region
/// ([`crate::recover::Recovered::view`]) or its redacted copy in a bundle.
#[derive(Clone, Copy)]
pub struct RegionView<'r, 'a> {
    /// Its place among the input's regions, in `crashring info` order.
    pub index: usize,
    /// Physical address of its first byte.
    pub addr: u64,
    pub region: &'r Region<'a>,
    pub trace: &'r PagedTrace<'a>,
    /// Changes laid over the trace's events, if any.
    pub overlay: Option<&'r Overlay>,
    /// How `debug` messages show kernel pointers.
    pub pointers: Pointers,
}

impl<'r, 'a> RegionView<'r, 'a> {
    /// `region` read alone: the first of its input, at address 0, with
    /// nothing laid over `trace`.
    pub fn alone(
        region: &'r Region<'a>,
        trace: &'r PagedTrace<'a>,
        pointers: Pointers,
    ) -> RegionView<'r, 'a> {
        RegionView {
            index: 0,
            addr: 0,
            region,
            trace,
            overlay: None,
            pointers,
        }
    }

    /// Stream `s` (its position in the trace).
    pub fn stream(&self, s: usize) -> Option<StreamView<'r, 'a>> {
        let pages = self.trace.streams.get(s)?;
        let (changes, arena): (&[Change], &[u8]) = match self.overlay {
            Some(o) => (o.changes.get(s).map_or(&[], Vec::as_slice), &o.arena),
            None => (&[], &[]),
        };
        Some(StreamView {
            pages,
            changes,
            arena,
        })
    }

    /// Every stream, in the trace's order.
    pub fn streams(&self) -> impl Iterator<Item = StreamView<'r, 'a>> + '_ {
        (0..self.trace.streams.len()).filter_map(|s| self.stream(s))
    }

    /// The streams a trace format gives a stream (CTF) or a track
    /// (Perfetto, Chrome) and people see listed one by one: all but the
    /// empty ones ([`PagedTrace::is_empty_stream`]), which
    /// [`Self::empty_streams`] counts. Decided on the recovered trace,
    /// not the overlay, so a bundle keeps a stream whose events were all
    /// redacted, as `info` shows it.
    pub fn shown_streams(&self) -> impl Iterator<Item = StreamView<'r, 'a>> + '_ {
        self.streams()
            .filter(|s| !self.trace.is_empty_stream(s.pages))
    }

    /// The streams [`Self::shown_streams`] leaves out, by kind.
    pub fn empty_streams(&self) -> EmptyStreams {
        let mut empty = EmptyStreams::default();
        for s in self
            .streams()
            .filter(|s| self.trace.is_empty_stream(s.pages))
        {
            empty.add(s.info());
        }
        empty
    }

    /// Every stream's events and losses on one timeline, pulled page by
    /// page ([`merge_events`]).
    pub fn merged(&self) -> PagedMerge<'r, 'r, Events<'r, StreamEvents<'r, 'a>>> {
        merge_events(self.streams().map(|s| (s.events(), s.losses())))
    }

    /// As [`Self::merged`], over the kernel streams alone: what the
    /// kernel itself recorded ([`StreamInfo::is_kernel`]).
    pub fn merged_kernel(&self) -> PagedMerge<'r, 'r, Events<'r, StreamEvents<'r, 'a>>> {
        let kernel = self.streams().filter(|s| s.info().is_kernel());
        merge_events(kernel.map(|s| (s.events(), s.losses())))
    }

    /// Events, all streams.
    pub fn event_count(&self) -> usize {
        self.streams()
            .fold(0, |n, s| n.saturating_add(s.event_count()))
    }

    /// The region's headline figures, as [`PagedTrace::kernel_tally`]
    /// with the overlay's changes: only kernel streams speak for the
    /// region.
    pub fn kernel_tally(&self) -> Tally {
        self.tally(true)
    }

    /// What the user streams claim, as [`PagedTrace::user_tally`].
    pub fn user_tally(&self) -> Tally {
        self.tally(false)
    }

    fn tally(&self, kernel: bool) -> Tally {
        let mut t = Tally::default();
        for s in self.streams().filter(|s| s.info().is_kernel() == kernel) {
            let first = s.first_event().map(|e| e.ts);
            let last = s.last_event().map(|e| e.ts);
            t.add(s.event_count(), s.losses(), first, last);
        }
        t
    }
}

/// One stream of a [`RegionView`].
#[derive(Clone, Copy)]
pub struct StreamView<'r, 'a> {
    /// The stream as decoded: its pages, losses and info.
    pub pages: &'r StreamPages<'a>,
    /// The overlay's changes to this stream.
    changes: &'r [Change],
    arena: &'r [u8],
}

impl<'r, 'a> StreamView<'r, 'a> {
    pub fn info(&self) -> &'r StreamInfo {
        &self.pages.info
    }

    /// In stream order (by `at_index`): an overlay leaves losses alone.
    pub fn losses(&self) -> &'r [Loss] {
        &self.pages.losses
    }

    /// The pages events were decoded from, in stream order.
    pub fn decoded(&self) -> &'r [DecodedPage<'a>] {
        &self.pages.decoded
    }

    /// Every event, in stream order.
    pub fn events(&self) -> Events<'r, StreamEvents<'r, 'a>> {
        self.overlaid(0, self.pages.events())
    }

    /// The events from `from` on, up to `to` (not included; with none, to
    /// the end).
    pub fn events_between(
        &self,
        from: Cut,
        to: Option<Cut>,
    ) -> Events<'r, Skip<StreamEvents<'r, 'a>>> {
        let page = self.decoded().get(from.page);
        let skip = page.map_or(0, |p| from.at.saturating_sub(p.first_event));
        let mut events = self.overlaid(from.at, self.pages.events_from(from.page).skip(skip));
        events.end = to.map_or(usize::MAX, |c| c.at);
        events
    }

    /// Where the stream's first event at `t` or later is, given `page`,
    /// the first of [`Self::decoded`] whose last event is that late (their
    /// count when none is): found by walking that page alone, as time
    /// only goes forward within a page. An overlay does not move it.
    pub fn cut(&self, page: usize, t: u64) -> Cut {
        let at = match self.decoded().get(page) {
            Some(p) => p.first_event + self.pages.page_events(p).take_while(|e| e.ts < t).count(),
            None => self
                .decoded()
                .last()
                .map_or(0, |p| p.first_event + p.records as usize),
        };
        Cut { page, at }
    }

    /// The events of one of [`Self::decoded`]'s pages.
    pub fn page_events(&self, page: &DecodedPage<'a>) -> Events<'r, PageEvents<'a>> {
        self.overlaid(page.first_event, self.pages.page_events(page))
    }

    /// `events`, which start at position `at` of the stream, with the
    /// changes from there on laid over them.
    fn overlaid<I>(&self, at: usize, events: I) -> Events<'r, I> {
        let first = self.changes.partition_point(|c| c.at < at);
        Events {
            events,
            at,
            end: usize::MAX,
            changes: &self.changes[first..],
            arena: self.arena,
        }
    }

    /// Events, over all pages.
    pub fn event_count(&self) -> usize {
        let left_out = self.changes.iter().filter(|c| c.payload.is_none()).count();
        self.pages.event_count().saturating_sub(left_out)
    }

    pub fn first_event(&self) -> Option<Event<'r>> {
        self.events().next()
    }

    /// The last event: the last page with any, walked to its end.
    pub fn last_event(&self) -> Option<Event<'r>> {
        let pages = self.decoded().iter().rev();
        pages.filter_map(|d| self.page_events(d).last()).next()
    }
}

/// A place among a stream's events as decoded (an overlay's changes do
/// not move it): its page in [`StreamView::decoded`] (their count past
/// the last) and its position in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    pub page: usize,
    pub at: usize,
}

/// A stream's events with an overlay's changes laid over them: those it
/// leaves out are skipped, those it rewrites carry their new payloads.
#[derive(Clone, Debug)]
pub struct Events<'r, I> {
    events: I,
    /// The position in the stream of the next event `events` yields.
    at: usize,
    /// The position it stops at.
    end: usize,
    /// The changes from there on, by position.
    changes: &'r [Change],
    arena: &'r [u8],
}

impl<'r, 'a: 'r, I: Iterator<Item = Event<'a>>> Iterator for Events<'r, I> {
    type Item = Event<'r>;

    #[inline]
    fn next(&mut self) -> Option<Event<'r>> {
        loop {
            if self.at >= self.end {
                return None;
            }
            let mut ev: Event<'r> = self.events.next()?;
            let at = self.at;
            self.at += 1;
            if let Some((c, rest)) = self.changes.split_first().filter(|(c, _)| c.at == at) {
                self.changes = rest;
                match &c.payload {
                    Some(p) => ev.payload = &self.arena[p.clone()],
                    None => continue,
                }
            }
            return Some(ev);
        }
    }
}

/// Changes laid over a trace's events, by their position in their stream
/// (as [`StreamPages::events`] yields them): events left out, and events
/// given new payloads. Built by [`crate::bundle::redact::plan`].
#[derive(Clone, Debug, Default)]
pub struct Overlay {
    /// New payloads, back to back.
    arena: Vec<u8>,
    /// Per stream, by position.
    changes: Vec<Vec<Change>>,
}

#[derive(Clone, Debug)]
struct Change {
    at: usize,
    /// The new payload in the arena, or `None` to leave the event out.
    payload: Option<Range<usize>>,
}

impl Overlay {
    /// Leaves out event `at` of stream `s`. Changes to a stream are made
    /// in position order.
    pub fn leave_out(&mut self, s: usize, at: usize) {
        self.change(s, at, None);
    }

    /// Gives event `at` of stream `s` the payload `payload`.
    pub fn rewrite(&mut self, s: usize, at: usize, payload: &[u8]) {
        let start = self.arena.len();
        self.arena.extend_from_slice(payload);
        self.change(s, at, Some(start..self.arena.len()));
    }

    /// Adds `other`'s changes, to streams this overlay has not changed
    /// yet (an overlay planned apart for them).
    pub fn append(&mut self, other: Overlay) {
        let base = self.arena.len();
        self.arena.extend_from_slice(&other.arena);
        if self.changes.len() < other.changes.len() {
            self.changes.resize_with(other.changes.len(), Vec::new);
        }
        for (mine, theirs) in self.changes.iter_mut().zip(other.changes) {
            debug_assert!(
                mine.is_empty() || theirs.is_empty(),
                "a stream planned twice"
            );
            mine.extend(theirs.into_iter().map(|c| Change {
                at: c.at,
                payload: c.payload.map(|p| p.start + base..p.end + base),
            }));
        }
    }

    fn change(&mut self, s: usize, at: usize, payload: Option<Range<usize>>) {
        if self.changes.len() <= s {
            self.changes.resize_with(s + 1, Vec::new);
        }
        let stream = &mut self.changes[s];
        debug_assert!(stream.last().is_none_or(|c| c.at < at), "out of order");
        stream.push(Change { at, payload });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::HeaderTrust;
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    /// Two streams over several small pages, each event's `count` its
    /// number in its stream.
    fn region() -> Vec<u8> {
        let specs: Vec<StreamSpec> = (0..2).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 256,
            pages_per_stream: Some(8),
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 16 * 1024];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        let mut f = write::format(&mut buf, &cfg).unwrap();
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        for i in 0..120u64 {
            let s = (i % 2) as usize;
            ws[s]
                .write_event(i * 10, lost, &[Value::Unsigned(i / 2)])
                .unwrap();
        }
        ws.iter_mut().for_each(|w| w.close());
        drop(ws);
        buf
    }

    #[test]
    fn the_view_shows_the_streams_with_something_to_tell() {
        let specs = [
            StreamSpec::cpu(0),
            StreamSpec::nested(0, 1),
            StreamSpec::cpu(1),
        ];
        let cfg = RegionConfig {
            page_size: 256,
            pages_per_stream: Some(2),
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 8 * 1024];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        let mut f = write::format(&mut buf, &cfg).unwrap();
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        ws[0].write_event(10, lost, &[Value::Unsigned(1)]).unwrap();
        ws.iter_mut().for_each(|w| w.close());
        drop(ws);
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let view = RegionView::alone(&region, &trace, Pointers::Hidden);
        let shown: Vec<String> = view.shown_streams().map(|s| s.info().label()).collect();
        assert_eq!(shown, ["cpu0"]);
        assert_eq!(
            view.empty_streams().to_string(),
            "2 empty streams (1 CPU stream, 1 nesting lane)"
        );
    }

    #[test]
    fn an_overlay_leaves_out_and_rewrites_by_position_page_by_page_too() {
        let buf = region();
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let plain: Vec<Vec<Event>> = trace.streams.iter().map(|s| s.events().collect()).collect();
        let n = plain[1].len();
        assert!(trace.streams[1].decoded.len() > 2 && n > 10);
        // Stream 1: its first and last events left out, one on every
        // page boundary rewritten, every third one left out.
        let mut overlay = Overlay::default();
        let new = [0xAAu8; 8];
        let mut want = Vec::new();
        for (at, ev) in plain[1].iter().enumerate() {
            let boundary = trace.streams[1].decoded.iter().any(|d| d.first_event == at);
            if at == 0 || at == n - 1 || at % 3 == 1 {
                overlay.leave_out(1, at);
            } else if boundary {
                overlay.rewrite(1, at, &new);
                want.push(Event {
                    payload: &new[..],
                    ..*ev
                });
            } else {
                want.push(*ev);
            }
        }
        let mut view = RegionView {
            index: 0,
            addr: 0,
            region: &region,
            trace: &trace,
            overlay: Some(&overlay),
            pointers: Pointers::Hidden,
        };
        let untouched = view.stream(0).unwrap();
        assert_eq!(untouched.events().collect::<Vec<_>>(), plain[0]);
        let s = view.stream(1).unwrap();
        assert_eq!(s.events().collect::<Vec<_>>(), want);
        let paged: Vec<Event> = s.decoded().iter().flat_map(|d| s.page_events(d)).collect();
        assert_eq!(paged, want);
        assert_eq!(s.event_count(), want.len());
        assert_eq!(s.first_event(), want.first().copied());
        assert_eq!(s.last_event(), want.last().copied());
        assert_eq!(view.event_count(), plain[0].len() + want.len());
        let merged = view.merged().filter(|p| p.stream() == 1).count();
        assert_eq!(merged, want.len() + s.losses().len());
        view.overlay = None;
        let s = view.stream(1).unwrap();
        assert_eq!(s.events().collect::<Vec<_>>(), plain[1]);
        assert_eq!(s.last_event(), plain[1].last().copied());
    }
}
