//! One timeline from many streams.
//!
//! Streams are already in their own order (by event index); the merge picks
//! the earliest head each time, breaking ties by stream and then index, so
//! the output is the same however the streams were produced. A loss sorts
//! just before the event that follows it in its stream.

use crate::read::{Event, Loss, StreamTrace};
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
}

/// Sort key: time, stream, index in stream, then losses before events.
type Key = (u64, u16, u64, u8);

fn event_key(e: &Event<'_>) -> Key {
    (e.ts, e.stream, e.index, 1)
}

fn loss_key(l: &Loss) -> Key {
    let ts = l.before_ts.or(l.after_ts).unwrap_or(0);
    (ts, l.stream, l.at_index, 0)
}

/// A heap entry: a stream's next item, packed so that one integer
/// comparison orders entries by time and then stream (stream indexes are
/// distinct, so the index in stream and the loss-before-event rule, which
/// only order items of one stream, are settled in [`head`]). The low bits
/// carry the position in the stream slice and whether the item is an
/// event.
type Entry = u128;

fn entry(key: Key, s: usize, is_event: bool) -> Entry {
    let (ts, stream, _, _) = key;
    (u128::from(ts) << 64)
        | (u128::from(stream) << 48)
        | ((s as u128 & 0xffff) << 1)
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
    let event = streams[s].events.get(e).map(event_key);
    let loss = streams[s].losses.get(l).map(loss_key);
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
        let (s, is_event) = ((packed >> 1) as usize & 0xffff, packed & 1 == 1);
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
