//! `crashring follow`: the recorder's events as they are written, like
//! `trace_pipe` but consuming nothing (the flight recorder keeps its last
//! N), and exactly how many events each writer wrote past the reader.
//!
//! Each poll reads a live region (a fresh open of /dev/crashring-current,
//! whose reads copy each page whole and consistently: FORMAT.md, "Reading
//! a live region"; a region file is copied so by [`crate::input::live`])
//! as far as it must: the tables, then per stream only the
//! pages from the one it was in at the last poll on. A stream's page of
//! `seq` N sits in slot (N − 1) mod `page_count` (writers take slots in
//! order from slot 0, seq 1), so the next page is found without reading
//! the others; where the slot holds a newer page, the writer lapped the
//! reader and the whole stream is read again. A whole read takes the
//! pages one after another while the writer goes on, so it hands over
//! only as far as the first page still in the ring that it read too
//! early, or read open before a newer one ([`settle`]); the next poll
//! reads on from there. A slot whose memory the copy could not read is
//! a loss once the writer is past it, never a page to wait for. A pool stream
//! handed out again starts over, even under the same descriptor: its
//! first slot holds an older page or one opened at another time, the
//! page it was in was opened again, or a page after that one starts
//! below its next event; so does every stream of a generation that
//! replaced the one followed. What the old holder or generation wrote
//! after the last look is gone unread: a loss of at least none
//! ([`EndCause::Replaced`]), under the name it had. Pages not read
//! this poll, or caught being opened, are absent to the reader, never
//! zeros. The poll's events are decoded
//! by pstore-ring as any region's are, and those whose index was not yet
//! handed over are; a gap in a stream's indexes is a loss of exactly that
//! many events, handed over where it happened. Events a writer could not
//! record are counted on its page (`dropped`), which grows while the page
//! is current: each is handed over once, as a loss, when first seen.

use crate::input::source::{FileOffset, Source, SourceError};
use crate::output::select::Selection;
use crate::output::RegionView;
use pstore_ring::kprintf::Pointers;
use pstore_ring::layout::{
    StreamDesc, DESC_SIZE, HEADER_SIZE, PAGE_CLOSED, PAGE_HEADER_SIZE, STREAM_CALLSITES,
    STREAM_USER,
};
use pstore_ring::merge::{merge_events, Pulled};
use pstore_ring::read::{
    parse_header, EndCause, Event, HeaderError, HeaderTrust, LossKind, PagedTrace, Region,
    StreamInfo,
};
use slots::{header, page_header, settle, slot_state, Slot};
use std::collections::BTreeMap;
use std::ops::Range;
use zerocopy::FromBytes;

/// The largest live region followed: the buffer that holds its pages is
/// mapped lazily, but its size is still memory promised.
const MAX_REGION: u64 = 4 << 30;

/// Why a poll failed.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Read(#[from] SourceError),
    #[error("the live region's header: {0}")]
    Header(#[from] HeaderError),
    #[error("the live region claims {0} bytes, more than the {MAX_REGION} followed")]
    TooBig(u64),
}

/// One stream as the reader left it at the last poll.
#[derive(Clone, Debug, Default)]
struct Followed {
    /// Its descriptor then: a user stream handed to another holder starts
    /// again, its pages from slot 0.
    desc: Vec<u8>,
    /// The seq of the page its next events are in; 0 until found.
    next_seq: u64,
    /// The seq and first time of the page in its first slot when last
    /// read: a pool stream handed out again holds an older seq there, or
    /// the same seq opened at another time.
    first_page: Option<(u64, u64)>,
    /// The seq, first time and first index of the page at `next_seq`
    /// when last read: one of the same seq with another time or index is
    /// a new holder's.
    at_page: Option<(u64, u64, u64)>,
    /// The index of its next event to hand over; `None` until placed.
    next_index: Option<u64>,
    /// The time of the last event handed over: where an end that was
    /// never read is placed.
    last_ts: Option<u64>,
    handed: u64,
    missed: u64,
    /// Events its writer could not record, counted on its pages.
    dropped: u64,
    /// The drops counted so far on its newest pages with any, by the
    /// page's seq: a page's count grows while it is current.
    drops: BTreeMap<u64, u64>,
}

/// Pages whose drop counts a follower keeps: only the current one's can
/// still grow, and it is the newest.
const DROP_PAGES: usize = 8;

/// What a follower handed over, per stream, for its summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamCount {
    pub stream: u16,
    pub label: String,
    pub handed: u64,
    pub missed: u64,
    pub dropped: u64,
    /// Whether `missed` is exact, not a lower bound: no end of the stream
    /// was replaced before it was read.
    pub missed_exact: bool,
    /// Whether `dropped` is exact: besides, no page was written over
    /// unread, taking its count of drops with it.
    pub dropped_exact: bool,
}

/// The counts of a stream's earlier holder, or of an earlier generation's
/// stream, kept under its name: its end was replaced unread, so its
/// missed and dropped counts are lower bounds.
struct Retired {
    info: StreamInfo,
    label: String,
    handed: u64,
    missed: u64,
    dropped: u64,
}

/// Names of earlier holders whose counts are kept apart: a program in
/// the `crashring` group can take pool streams under new names without
/// end. The counts of any more go under [`MORE_RETIRED`].
const MAX_RETIRED: usize = 1024;
const MORE_RETIRED: &str = "(more streams handed on)";

/// Follows one live region from poll to poll.
pub struct Follower {
    streams: Vec<Followed>,
    /// Each stream's descriptor as last decoded, by stream number; `None`
    /// for one that failed its checks.
    infos: Vec<Option<StreamInfo>>,
    /// The region's bytes as read: the tables and, each poll, the pages it read.
    buf: Vec<u8>,
    /// The first poll hands over what the region already holds, or only
    /// what comes after it.
    from_start: bool,
    /// Whether a poll was made: a generation that replaces the one
    /// followed is all new, from its first event.
    polled: bool,
    /// The generation followed: its boot id, number and creation time.
    generation: Option<([u8; 16], u64, u64)>,
    /// The header and descriptors as the last poll that read the tables
    /// read them: a stream found replaced is named as they named it, even
    /// after a poll that failed.
    tables: Vec<u8>,
    /// The streams read: those of others are left unread.
    selection: Selection,
    /// The ends this poll found replaced before they were read: handed
    /// over first, under the labels of the tables they were read with.
    unread: Vec<pstore_ring::read::Loss>,
    /// The counts of streams replaced since, by name, and of those past
    /// [`MAX_RETIRED`] names.
    retired: Vec<Retired>,
    more_retired: Option<StreamCount>,
    pointers: Pointers,
}

impl Follower {
    /// A follower whose first poll hands over the events the region
    /// already holds (`from_start`) or none of them; debug messages show
    /// kernel addresses as `pointers` says (hashed with a key of the
    /// caller's, the same throughout).
    pub fn new(from_start: bool, pointers: Pointers) -> Follower {
        Follower {
            streams: Vec::new(),
            infos: Vec::new(),
            buf: Vec::new(),
            from_start,
            polled: false,
            generation: None,
            tables: Vec::new(),
            selection: Selection::default(),
            unread: Vec::new(),
            retired: Vec::new(),
            more_retired: None,
            pointers,
        }
    }

    /// The follower, reading only the streams `selection` keeps (its
    /// streams; its types and times do not count): the pages of others
    /// are neither read nor decoded.
    pub fn selecting(mut self, selection: Selection) -> Follower {
        self.selection = selection;
        self
    }

    /// The counts so far of each stream `selection` keeps (its streams;
    /// its types and times do not count), those of its earlier holders or
    /// generations under the same name added in (a label names one
    /// stream at a time; two programs that name their streams alike are
    /// counted as one, then as at least).
    pub fn counts(&self, selection: &Selection) -> Vec<StreamCount> {
        let mut counts: Vec<StreamCount> = self
            .streams
            .iter()
            .zip(&self.infos)
            .enumerate()
            .filter_map(|(i, (f, info))| Some((i, f, info.as_ref()?)))
            .filter(|(_, f, info)| f.next_index.is_some() && selection.keeps(info))
            .map(|(i, f, info)| StreamCount {
                stream: i as u16,
                label: info.label(),
                handed: f.handed,
                missed: f.missed,
                dropped: f.dropped,
                missed_exact: true,
                // Pages written over unread took their drop counts along.
                dropped_exact: f.missed == 0,
            })
            .collect();
        for r in self.retired.iter().filter(|r| selection.keeps(&r.info)) {
            let at = match counts.iter().position(|c| c.label == r.label) {
                Some(at) => at,
                None => {
                    counts.push(StreamCount {
                        stream: r.info.index,
                        label: r.label.clone(),
                        handed: 0,
                        missed: 0,
                        dropped: 0,
                        missed_exact: false,
                        dropped_exact: false,
                    });
                    counts.len() - 1
                }
            };
            add_retired(&mut counts[at], r.handed, r.missed, r.dropped);
        }
        // Of streams the follower's own selection kept (no other is
        // followed), whatever `selection` is: they have no names left.
        counts.extend(self.more_retired.clone());
        counts
    }

    /// Reads `live` as far as this poll must and hands `emit` the events
    /// not handed over before, merged in time order, with a loss item
    /// where a stream's writer went past the reader.
    pub fn poll(
        &mut self,
        live: &dyn Source,
        mut emit: impl FnMut(&RegionView, &[Pulled]),
    ) -> Result<(), FollowError> {
        let mut head = [0u8; HEADER_SIZE];
        live.read_exact_at(FileOffset(0), &mut head)?;
        let info = parse_header(&head, HeaderTrust::Checksummed)?;
        if info.region_size > MAX_REGION {
            return Err(FollowError::TooBig(info.region_size));
        }
        let size = info.region_size as usize;
        let generation = Some((info.boot_id, info.generation, info.created_ns));
        let before = self.tables.clone();
        if self.generation != generation || self.buf.len() != size {
            // Another generation (the module loaded again; in the other
            // slot, a region of the same size looks the same but for
            // this): its streams start over, at their first event, the
            // old ones' counts kept under their names.
            self.generation = generation;
            self.buf = vec![0; size];
            for i in 0..self.streams.len() {
                self.start_over(i, Vec::new());
            }
        }
        let read = self.read_pages(live, &info);
        // Ends found replaced go out even when the read then failed.
        if !self.unread.is_empty() {
            self.hand_over_unread(&before, &mut emit);
        }
        let (wanted, present) = read?;
        let absent = complement(&present, size as u64);
        let region = Region::parse(&self.buf, HeaderTrust::Checksummed)?.with_absent(absent);
        let trace = region.decode_paged();
        let view = RegionView::alone(&region, &trace, self.pointers);
        // By stream number, as `streams`: a descriptor that failed its
        // checks is missing from `region.streams`.
        self.infos = vec![None; self.streams.len()];
        for s in &region.streams {
            if let Some(info) = self.infos.get_mut(usize::from(s.index)) {
                *info = Some(s.clone());
            }
        }
        // Each stream's new events, and a loss before each gap: counted
        // here, then handed over merged, a chunk at a time, so that what a
        // poll holds follows the pages it read, not the events they hold.
        let first = !std::mem::replace(&mut self.polled, true);
        let mut plans: Vec<Plan> = Vec::new();
        let streams = (0..trace.streams.len()).filter_map(|pos| Some((pos, view.stream(pos)?)));
        for (pos, st) in streams {
            let i = usize::from(st.info().index);
            let Some(f) = self.streams.get_mut(i).filter(|_| wanted[i]) else {
                continue;
            };
            // A stream seen for the first time starts at its first event,
            // unless the follower started now: then what is already there
            // is neither handed over nor missed.
            let baseline = f.next_index.is_none() && first && !self.from_start;
            let start = match f.next_index {
                Some(n) => n,
                None if baseline => {
                    let last = st.events().last();
                    f.last_ts = last.as_ref().map(|e| e.ts);
                    last.map_or(0, |e| e.index + 1)
                }
                None => 0,
            };
            let mut losses = Vec::new();
            let dropped = st.losses().iter().filter(|l| l.kind == LossKind::Dropped);
            for l in dropped {
                let fresh = new_drops(f, l, baseline);
                if fresh > 0 {
                    f.dropped = f.dropped.saturating_add(fresh);
                    losses.push(pstore_ring::read::Loss {
                        events: fresh,
                        ..*l
                    });
                }
            }
            let mut next = start;
            for e in new_events(st.events(), start) {
                if e.index > next {
                    // Saturating: a user stream's pages claim any indexes.
                    f.missed = f.missed.saturating_add(e.index - next);
                    losses.push(lapped(st.info().index, next, e.index, e.ts));
                }
                f.handed += 1;
                f.last_ts = Some(e.ts);
                next = e.index + 1;
            }
            f.next_index = Some(next);
            // In the order the merge takes them.
            losses.sort_by_key(|l| (l.before_ts.or(l.after_ts).unwrap_or(0), l.at_index));
            plans.push(Plan { pos, start, losses });
        }
        let merged = merge_events(plans.iter().filter_map(|p| {
            let st = view.stream(p.pos)?;
            Some((new_events(st.events(), p.start), &p.losses[..]))
        }));
        let mut chunk = Vec::with_capacity(CHUNK);
        for item in merged {
            chunk.push(item);
            if chunk.len() == CHUNK {
                emit(&view, &chunk);
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            emit(&view, &chunk);
        }
        Ok(())
    }

    /// Reads the tables, then the pages of each stream the selection keeps
    /// that this poll needs; which streams those are, and what was read.
    fn read_pages(
        &mut self,
        live: &dyn Source,
        info: &pstore_ring::read::HeaderInfo,
    ) -> Result<(Vec<bool>, Vec<Range<u64>>), FollowError> {
        let tables = self.read_tables(live, info)?;
        // The header and descriptors are what name the streams.
        self.tables = self.buf[..tables.descs_end].to_vec();
        let mut present: Vec<Range<u64>> = Vec::with_capacity(tables.spans.len() + 1);
        present.push(0..tables.end);
        let wanted = self.wanted(&tables)?;
        for (i, span) in tables.spans.iter().enumerate() {
            if span.kind == STREAM_CALLSITES {
                self.read(live, span.range(), &mut present)?;
            } else if wanted[i] {
                self.read_stream(live, i, span, info.endian, &mut present)?;
            } else if self.streams[i].next_index.is_some() && self.streams[i].desc != span.desc {
                // Followed under a holder the selection keeps, now another's
                // it does not: that holder's end is gone unread.
                self.start_over(i, span.desc.clone());
            }
        }
        Ok((wanted, present))
    }

    /// Starts stream `i` over as `desc` describes it, from its first page
    /// and event. If it was followed under a holder (a kernel stream, or a
    /// pool stream a process had taken), whatever that holder wrote after
    /// the last look is gone unread: a loss of at least none, which this
    /// poll hands over first, and the holder's counts are kept under its
    /// name.
    fn start_over(&mut self, i: usize, desc: Vec<u8>) {
        let Some(f) = self.streams.get_mut(i) else {
            return;
        };
        let was = std::mem::replace(
            f,
            Followed {
                desc,
                ..Followed::default()
            },
        );
        let holder = self.infos.get(i).and_then(Option::as_ref);
        let holder = holder.filter(|info| !info.is_free()).cloned();
        let (Some(at_index), Some(holder)) = (was.next_index, holder) else {
            return;
        };
        self.unread.push(pstore_ring::read::Loss {
            stream: i as u16,
            kind: LossKind::End,
            events: 0,
            pages: 0,
            after_ts: was.last_ts,
            before_ts: None,
            at_index,
            page_seq: None,
            cause: Some(EndCause::Replaced),
            exact: false,
        });
        self.retire(holder, &was);
    }

    /// Keeps `f`'s counts under `info`'s name.
    fn retire(&mut self, info: StreamInfo, f: &Followed) {
        let label = info.label();
        if let Some(r) = self.retired.iter_mut().find(|r| r.label == label) {
            r.handed = r.handed.saturating_add(f.handed);
            r.missed = r.missed.saturating_add(f.missed);
            r.dropped = r.dropped.saturating_add(f.dropped);
        } else if self.retired.len() < MAX_RETIRED {
            self.retired.push(Retired {
                info,
                label,
                handed: f.handed,
                missed: f.missed,
                dropped: f.dropped,
            });
        } else {
            let more = self.more_retired.get_or_insert_with(|| StreamCount {
                stream: u16::MAX,
                label: MORE_RETIRED.into(),
                handed: 0,
                missed: 0,
                dropped: 0,
                missed_exact: false,
                dropped_exact: false,
            });
            add_retired(more, f.handed, f.missed, f.dropped);
        }
    }

    /// Hands `emit` the ends found replaced this poll, named as `tables`
    /// (the header and descriptors the last poll read) named their
    /// streams: a pool stream's new holder is not the one that lost them.
    fn hand_over_unread(&mut self, tables: &[u8], emit: &mut impl FnMut(&RegionView, &[Pulled])) {
        let unread = std::mem::take(&mut self.unread);
        // The last poll parsed the same header.
        let Ok(region) = Region::parse(tables, HeaderTrust::Checksummed) else {
            return;
        };
        let trace = PagedTrace {
            streams: Vec::new(),
            diagnostics: Vec::new(),
        };
        let view = RegionView::alone(&region, &trace, self.pointers);
        let items: Vec<Pulled> = unread.iter().map(Pulled::Loss).collect();
        emit(&view, &items);
    }

    /// Which streams of `tables` to read, by stream number: those the
    /// selection keeps, as their descriptors (checked) describe them.
    fn wanted(&self, tables: &Tables) -> Result<Vec<bool>, FollowError> {
        if self.selection.keeps_every_stream() {
            return Ok(vec![true; tables.spans.len()]);
        }
        let listed = Region::parse(&self.buf[..tables.end as usize], HeaderTrust::Checksummed)?;
        Ok(tables
            .spans
            .iter()
            .map(|span| {
                listed
                    .streams
                    .iter()
                    .any(|s| s.index == span.index && self.selection.keeps(s))
            })
            .collect())
    }

    /// Reads the header, descriptors and tail table, and lays out where
    /// each stream's pages are.
    fn read_tables(
        &mut self,
        live: &dyn Source,
        info: &pstore_ring::read::HeaderInfo,
    ) -> Result<Tables, FollowError> {
        let descs = info.desc_offset as usize
            ..info.desc_offset as usize + usize::from(info.stream_count) * DESC_SIZE;
        let upto = descs.end.min(self.buf.len());
        live.read_exact_at(FileOffset(0), &mut self.buf[..upto])?;
        let e = info.endian;
        let mut spans = Vec::with_capacity(usize::from(info.stream_count));
        let descs = descs.start.min(upto)..upto;
        for (index, d) in (0..).zip(self.buf[descs].chunks_exact(DESC_SIZE)) {
            let Ok(desc) = StreamDesc::read_from_bytes(d) else {
                continue;
            };
            spans.push(Span {
                index,
                kind: desc.kind.get(e),
                start: desc.pages_offset.get(e),
                bytes: u64::from(desc.page_count.get(e)) * u64::from(info.page_size),
                pages: desc.page_count.get(e),
                desc: d.to_vec(),
            });
        }
        // The tables end where the first pages start that lie past the
        // descriptors: a descriptor may claim any offset (a user region
        // file's bytes are its writer's), and one among the tables would
        // leave them unread.
        let end = spans
            .iter()
            .map(|s| s.start)
            .filter(|&start| start >= upto as u64)
            .min()
            .unwrap_or(self.buf.len() as u64)
            .min(self.buf.len() as u64);
        live.read_exact_at(FileOffset(0), &mut self.buf[..end as usize])?;
        self.streams.resize_with(spans.len(), Followed::default);
        Ok(Tables {
            end,
            descs_end: upto,
            spans,
        })
    }

    /// Reads the pages of stream `i` the poll needs into the buffer.
    fn read_stream(
        &mut self,
        live: &dyn Source,
        i: usize,
        span: &Span,
        e: pstore_ring::Endian,
        present: &mut Vec<Range<u64>>,
    ) -> Result<(), FollowError> {
        if span.pages == 0 || span.range().end > self.buf.len() as u64 {
            return Ok(());
        }
        let page = span.bytes / u64::from(span.pages);
        if self.streams[i].desc != span.desc {
            self.start_over(i, span.desc.clone());
        }
        if self.streams[i].next_seq != 0
            && span.kind == STREAM_USER
            && self.first_slot_started_over(live, i, span, e)?
        {
            self.start_over(i, span.desc.clone());
        }
        if self.streams[i].next_seq == 0 {
            return self.read_whole(live, i, span, page, e, present);
        }
        // From the page the stream was in, on, while each is closed.
        let mut seq = self.streams[i].next_seq;
        let read_before = present.len();
        let mut at_page = None;
        for _ in 0..span.pages {
            let at = span.start + (seq - 1) % u64::from(span.pages) * page;
            self.read(live, at..at + page, present)?;
            let Some(h) = header(&self.buf, at, span.index, e) else {
                // Bytes that will not become the page by waiting (memory
                // the copy could not read): the whole read counts it
                // lost and goes on past it, once the writer has.
                if matches!(slot_state(&self.buf, at, span.index, e), Slot::Corrupt) {
                    present.truncate(read_before);
                    return self.read_whole(live, i, span, page, e, present);
                }
                break;
            };
            let found = h.seq.get(e);
            let identity = (found, h.first_ts.get(e), h.first_index.get(e));
            // The page it was in, opened again by a pool stream's new
            // holder, which has come as far.
            let taken_again = span.kind == STREAM_USER
                && self.streams[i]
                    .at_page
                    .is_some_and(|p| p.0 == found && p != identity);
            if found > seq || taken_again {
                // Lapped, or started over: the pages in between were
                // taken again. What this loop read is read again, and
                // kept only as the whole read settles.
                present.truncate(read_before);
                if taken_again {
                    self.start_over(i, span.desc.clone());
                }
                return self.read_whole(live, i, span, page, e, present);
            }
            if found < seq {
                break;
            }
            at_page = Some(identity);
            if h.flags.get(e) != PAGE_CLOSED {
                break;
            }
            let Some(after) = seq.checked_add(1) else {
                break;
            };
            seq = after;
        }
        let f = &mut self.streams[i];
        f.next_seq = seq;
        f.at_page = at_page.filter(|p| p.0 == seq);
        Ok(())
    }

    /// Reads all of stream `i`'s pages, keeps those [`settle`] hands over
    /// as present, and goes on next poll from where it says.
    fn read_whole(
        &mut self,
        live: &dyn Source,
        i: usize,
        span: &Span,
        page: u64,
        e: pstore_ring::Endian,
        present: &mut Vec<Range<u64>>,
    ) -> Result<(), FollowError> {
        let mut whole = Vec::new();
        self.read(live, span.range(), &mut whole)?;
        if span.kind == STREAM_USER && self.numbered_over(i, span, page, e) {
            self.start_over(i, span.desc.clone());
        }
        let (slots, next_seq) = settle(&self.buf, span, page, e);
        present.extend(slots.into_iter().map(|s| {
            let at = span.start + s * page;
            at..at + page
        }));
        let slot_of = |seq: u64| span.start + (seq - 1) % u64::from(span.pages) * page;
        let f = &mut self.streams[i];
        f.next_seq = next_seq;
        f.first_page =
            header(&self.buf, span.start, span.index, e).map(|h| (h.seq.get(e), h.first_ts.get(e)));
        f.at_page = header(&self.buf, slot_of(next_seq), span.index, e)
            .map(|h| (h.seq.get(e), h.first_ts.get(e), h.first_index.get(e)))
            .filter(|p| p.0 == next_seq);
        Ok(())
    }

    /// Whether pool stream `i` was handed out again since the last poll,
    /// as its first slot tells: the descriptor does not, when the same
    /// process asked again under the same name. A new holder's stream
    /// starts at page 1 again, so its first slot holds an older page than
    /// before, or one of the same seq opened at another time (a user
    /// page's first time is set once, when it is opened; one caught
    /// being opened is no page here). Notes the slot for the next poll.
    fn first_slot_started_over(
        &mut self,
        live: &dyn Source,
        i: usize,
        span: &Span,
        e: pstore_ring::Endian,
    ) -> Result<bool, FollowError> {
        let mut first = [0u8; PAGE_HEADER_SIZE];
        live.read_exact_at(FileOffset(span.start), &mut first)?;
        let Some(now) =
            page_header(&first, span.index, e).map(|h| (h.seq.get(e), h.first_ts.get(e)))
        else {
            return Ok(false);
        };
        let then = self.streams[i].first_page.replace(now);
        Ok(then.is_some_and(|then| now.0 < then.0 || (now.0 == then.0 && now.1 != then.1)))
    }

    /// Whether the pages of pool stream `i` just read number its events
    /// anew: a page after the one it was in that starts below the next
    /// event to hand over. A holder that took it again and wrapped its
    /// first slot past the old one's is found so.
    fn numbered_over(&self, i: usize, span: &Span, page: u64, e: pstore_ring::Endian) -> bool {
        let f = &self.streams[i];
        let Some(next_index) = f.next_index.filter(|_| f.next_seq != 0) else {
            return false;
        };
        (0..u64::from(span.pages))
            .filter_map(|slot| header(&self.buf, span.start + slot * page, span.index, e))
            .any(|h| h.seq.get(e) > f.next_seq && h.first_index.get(e) < next_index)
    }

    /// Reads `range` of the live region into the buffer, as present.
    fn read(
        &mut self,
        live: &dyn Source,
        range: Range<u64>,
        present: &mut Vec<Range<u64>>,
    ) -> Result<(), FollowError> {
        let end = range.end.min(self.buf.len() as u64);
        if range.start >= end {
            return Ok(());
        }
        live.read_exact_at(
            FileOffset(range.start),
            &mut self.buf[range.start as usize..end as usize],
        )?;
        present.push(range.start..end);
        Ok(())
    }
}

/// Where the tables and the descriptors end, and each descriptor's
/// pages are.
struct Tables {
    end: u64,
    descs_end: usize,
    spans: Vec<Span>,
}

struct Span {
    /// The stream's number, which its pages' headers carry.
    index: u16,
    kind: u16,
    start: u64,
    bytes: u64,
    pages: u32,
    desc: Vec<u8>,
}

impl Span {
    /// Where its pages lie, as its descriptor says: an end past any
    /// region (a descriptor of a user stream's making) is past this one.
    fn range(&self) -> Range<u64> {
        self.start..self.start.saturating_add(self.bytes)
    }
}

/// Adds a replaced stream's counts to `c`, which are then lower bounds.
fn add_retired(c: &mut StreamCount, handed: u64, missed: u64, dropped: u64) {
    c.handed = c.handed.saturating_add(handed);
    c.missed = c.missed.saturating_add(missed);
    c.dropped = c.dropped.saturating_add(dropped);
    c.missed_exact = false;
    c.dropped_exact = false;
}

/// Items handed to the caller at a time: what a poll holds besides the
/// region's bytes.
const CHUNK: usize = 4096;

/// One stream's part of a poll: its place in the view, the index its new
/// events start at, and its losses to hand over.
struct Plan {
    pos: usize,
    start: u64,
    losses: Vec<pstore_ring::read::Loss>,
}

/// The events of a stream not handed over before: from index `next` on,
/// each past the one before it (a user stream's pages may claim any
/// indexes), and none once its numbering ran out.
fn new_events<'a>(
    events: impl Iterator<Item = Event<'a>>,
    next: u64,
) -> impl Iterator<Item = Event<'a>> {
    events
        .scan(next, |next, e| {
            if e.index < *next {
                return Some(None);
            }
            *next = e.index.checked_add(1)?;
            Some(Some(e))
        })
        .flatten()
}

/// A loss of the events `from..to` of `stream`, before the event at `ts`:
/// written and taken again before the reader came.
fn lapped(stream: u16, from: u64, to: u64, ts: u64) -> pstore_ring::read::Loss {
    pstore_ring::read::Loss {
        stream,
        kind: LossKind::Overwritten,
        events: to - from,
        pages: 0,
        after_ts: None,
        before_ts: Some(ts),
        at_index: to,
        page_seq: None,
        cause: None,
        exact: true,
    }
}

/// How many of the drops loss `l` counts on its page are new to `f`: those
/// beyond the count seen before on a page seen with drops before; all of
/// them on another page that ends at or past the stream's next event to
/// hand over (the current page, whose events were all handed over before
/// its first drop, ends there); none on an older page (read again after a
/// lap) or, at a `baseline` (the first poll of a follower that started
/// now), on any. Notes the page's count.
fn new_drops(f: &mut Followed, l: &pstore_ring::read::Loss, baseline: bool) -> u64 {
    let page = l.page_seq.unwrap_or(0);
    let fresh = match f.drops.get(&page) {
        Some(&seen) => l.events.saturating_sub(seen),
        None if baseline => 0,
        None if f.next_index.is_none_or(|n| l.at_index >= n) => l.events,
        None => 0,
    };
    f.drops
        .insert(page, l.events.max(f.drops.get(&page).copied().unwrap_or(0)));
    while f.drops.len() > DROP_PAGES {
        f.drops.pop_first();
    }
    fresh
}

/// The parts of `0..size` no range of `present` covers.
fn complement(present: &[Range<u64>], size: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = present.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    let mut at = 0;
    for r in sorted {
        if r.start > at {
            out.push(at..r.start);
        }
        at = at.max(r.end);
    }
    if at < size {
        out.push(at..size);
    }
    out
}

mod slots;
#[cfg(test)]
pub(crate) mod tests;
