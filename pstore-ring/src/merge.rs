//! One timeline from many streams.
//!
//! Streams are already in their own order (by event index); the merge picks
//! the earliest head each time, breaking ties by stream and then index, so
//! the output is the same however the streams were produced. A loss sorts
//! just before the event that follows it in its stream.

use crate::read::{Event, Loss, StreamEvents, StreamPages, StreamTrace};
use alloc::collections::binary_heap::{BinaryHeap, PeekMut};
use alloc::vec::Vec;
use core::cmp::Reverse;

/// One item of the merged timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'t, 'a> {
    Event(&'t Event<'a>),
    Loss(&'t Loss),
}

impl Item<'_, '_> {
    pub fn stream(&self) -> u16 {
        match self {
            Item::Event(e) => e.stream,
            Item::Loss(l) => l.stream,
        }
    }

    /// The time the merge places it at: an event's own; a loss's, that
    /// of the event after it, else of the one before it, else 0.
    #[inline]
    pub fn time(&self) -> u64 {
        match self {
            Item::Event(e) => e.ts,
            Item::Loss(l) => loss_time(l),
        }
    }
}

/// Sort key: time, stream, index in stream, then losses before events.
type Key = (u64, u16, u64, u8);

#[inline]
fn event_key(e: &Event<'_>) -> Key {
    (e.ts, e.stream, e.index, 1)
}

#[inline]
fn loss_key(l: &Loss) -> Key {
    (loss_time(l), l.stream, l.at_index, 0)
}

#[inline]
fn loss_time(l: &Loss) -> u64 {
    l.before_ts.or(l.after_ts).unwrap_or(0)
}

/// A heap entry: a stream's next item, packed so that one integer
/// comparison orders entries by time and then stream (stream indexes are
/// distinct, so the index in stream and the loss-before-event rule, which
/// only order items of one stream, are settled in [`pick`]). The low bits
/// carry the position in the stream slice and whether the item is an
/// event.
type Entry = u128;

/// The bits below the stream's for the position in the stream slice: 47,
/// more than any slice holds, so no two positions share an entry.
const POSITION: u128 = (1 << 47) - 1;

#[inline]
fn entry(key: Key, s: usize, is_event: bool) -> Entry {
    let (ts, stream, _, _) = key;
    (u128::from(ts) << 64)
        | (u128::from(stream) << 48)
        | ((s as u128 & POSITION) << 1)
        | u128::from(is_event)
}

/// Iterator over all streams' events and losses in time order.
pub struct Merge<'t, 'a> {
    streams: &'t [StreamTrace<'a>],
    /// Per stream: next event, next loss.
    cursors: Vec<(usize, usize)>,
    /// One entry per stream with anything left.
    heap: BinaryHeap<Reverse<Entry>>,
}

/// Merges `streams` into one timeline.
pub fn merge<'t, 'a>(streams: &'t [StreamTrace<'a>]) -> Merge<'t, 'a> {
    let mut m = Merge {
        streams,
        cursors: alloc::vec![(0, 0); streams.len()],
        heap: BinaryHeap::with_capacity(streams.len()),
    };
    for s in 0..streams.len() {
        if let Some(h) = head(streams, (0, 0), s) {
            m.heap.push(Reverse(h));
        }
    }
    m
}

/// The next item of stream `s` past `cursor`: its event or its loss,
/// whichever sorts first.
fn head(streams: &[StreamTrace<'_>], cursor: (usize, usize), s: usize) -> Option<Entry> {
    let (e, l) = cursor;
    let event = streams[s].events.get(e);
    let loss = streams[s].losses.get(l);
    pick(event, loss, s)
}

/// The heap entry for stream `s`, whose next event and next loss are
/// these: whichever sorts first. Both merges decide here, so they order
/// items alike.
#[inline]
fn pick(event: Option<&Event<'_>>, loss: Option<&Loss>, s: usize) -> Option<Entry> {
    let event = event.map(event_key);
    let loss = loss.map(loss_key);
    match (event, loss) {
        (Some(ek), Some(lk)) if lk < ek => Some(entry(lk, s, false)),
        (Some(ek), _) => Some(entry(ek, s, true)),
        (None, Some(lk)) => Some(entry(lk, s, false)),
        (None, None) => None,
    }
}

impl<'t, 'a> Iterator for Merge<'t, 'a> {
    type Item = Item<'t, 'a>;

    fn next(&mut self) -> Option<Item<'t, 'a>> {
        // The top is replaced in place by its stream's next item: one sift
        // per item instead of a pop and a push.
        let mut top = self.heap.peek_mut()?;
        let Reverse(packed) = *top;
        let (s, is_event) = (((packed >> 1) & POSITION) as usize, packed & 1 == 1);
        let streams = self.streams;
        let item = if is_event {
            let item = &streams[s].events[self.cursors[s].0];
            self.cursors[s].0 += 1;
            Item::Event(item)
        } else {
            let item = &streams[s].losses[self.cursors[s].1];
            self.cursors[s].1 += 1;
            Item::Loss(item)
        };
        match head(streams, self.cursors[s], s) {
            Some(next) => *top = Reverse(next),
            None => {
                PeekMut::pop(top);
            }
        }
        Some(item)
    }
}

/// One item of a merge of streams decoded page by page: the event itself,
/// walked again from the region's bytes, rather than a reference to one
/// held in a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pulled<'t, 'a> {
    Event(Event<'a>),
    Loss(&'t Loss),
}

impl<'a> Pulled<'_, 'a> {
    pub fn stream(&self) -> u16 {
        self.as_item().stream()
    }

    /// The same item as [`merge`] yields it, for what takes an [`Item`]
    /// (`text::Line`, filters).
    #[inline]
    pub fn as_item(&self) -> Item<'_, 'a> {
        match self {
            Pulled::Event(e) => Item::Event(e),
            Pulled::Loss(l) => Item::Loss(l),
        }
    }
}

/// One stream's place in a [`PagedMerge`]: its event walk, the event it
/// holds ready, and its losses with the next one's position.
struct Cursor<'t, 'a, I> {
    events: I,
    event: Option<Event<'a>>,
    losses: &'t [Loss],
    loss: usize,
}

/// Iterator over streams decoded page by page, in exactly [`merge`]'s
/// order: each stream's events are walked again one page at a time as the
/// merge reaches them, so it holds one page walk and one event per stream,
/// whatever the region's size.
pub struct PagedMerge<'t, 'a, I = StreamEvents<'t, 'a>> {
    cursors: Vec<Cursor<'t, 'a, I>>,
    /// One entry per stream with anything left.
    heap: BinaryHeap<Reverse<Entry>>,
}

/// Merges streams decoded page by page into one timeline: the items
/// [`merge`] yields for the same streams decoded whole, in the same order.
pub fn merge_pages<'t, 'a>(streams: &'t [StreamPages<'a>]) -> PagedMerge<'t, 'a> {
    merge_events(streams.iter().map(|s| (s.events(), &s.losses[..])))
}

/// Merges one timeline from each stream's events (in stream order: by
/// index) and losses (by `at_index`), in [`merge`]'s order, whatever
/// supplies the events: [`StreamPages::events`], or an adaptor over it
/// that leaves some out or rewrites payloads.
pub fn merge_events<'t, 'a, I>(
    streams: impl IntoIterator<Item = (I, &'t [Loss])>,
) -> PagedMerge<'t, 'a, I>
where
    I: Iterator<Item = Event<'a>>,
{
    let cursors: Vec<Cursor<'t, 'a, I>> = streams
        .into_iter()
        .map(|(mut events, losses)| {
            let event = events.next();
            Cursor {
                events,
                event,
                losses,
                loss: 0,
            }
        })
        .collect();
    let mut heap = BinaryHeap::with_capacity(cursors.len());
    for (s, c) in cursors.iter().enumerate() {
        if let Some(h) = pick(c.event.as_ref(), c.losses.first(), s) {
            heap.push(Reverse(h));
        }
    }
    PagedMerge { cursors, heap }
}

impl<'t, 'a, I> Iterator for PagedMerge<'t, 'a, I>
where
    I: Iterator<Item = Event<'a>>,
{
    type Item = Pulled<'t, 'a>;

    fn next(&mut self) -> Option<Pulled<'t, 'a>> {
        // As in `Merge`: the top is replaced in place by its stream's next
        // item.
        let mut top = self.heap.peek_mut()?;
        let Reverse(packed) = *top;
        let (s, is_event) = (((packed >> 1) & POSITION) as usize, packed & 1 == 1);
        let c = self.cursors.get_mut(s)?;
        let item = if is_event {
            let ev = c.event.take()?;
            c.event = c.events.next();
            Pulled::Event(ev)
        } else {
            let loss = c.losses.get(c.loss)?;
            c.loss += 1;
            Pulled::Loss(loss)
        };
        match pick(c.event.as_ref(), c.losses.get(c.loss), s) {
            Some(next) => *top = Reverse(next),
            None => {
                PeekMut::pop(top);
            }
        }
        Some(item)
    }
}
