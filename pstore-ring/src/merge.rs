//! One timeline from many streams.
//!
//! Streams are already in their own order (by event index); the merge picks
//! the earliest head each time, breaking ties by stream and then index, so
//! the output is the same however the streams were produced. A loss sorts
//! just before the event that follows it in its stream.

use crate::read::{Event, Loss, StreamTrace};
use alloc::collections::BinaryHeap;
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

/// Iterator over all streams' events and losses in time order.
pub struct Merge<'t, 'a> {
    streams: &'t [StreamTrace<'a>],
    /// Per stream: next event, next loss.
    cursors: Vec<(usize, usize)>,
    heap: BinaryHeap<Reverse<(Key, usize, bool)>>,
}

/// Merges `streams` into one timeline.
pub fn merge<'t, 'a>(streams: &'t [StreamTrace<'a>]) -> Merge<'t, 'a> {
    let mut m = Merge {
        streams,
        cursors: alloc::vec![(0, 0); streams.len()],
        heap: BinaryHeap::new(),
    };
    for i in 0..streams.len() {
        m.push_event(i);
        m.push_loss(i);
    }
    m
}

impl Merge<'_, '_> {
    fn push_event(&mut self, s: usize) {
        if let Some(e) = self.streams[s].events.get(self.cursors[s].0) {
            self.heap.push(Reverse((event_key(e), s, true)));
        }
    }

    fn push_loss(&mut self, s: usize) {
        if let Some(l) = self.streams[s].losses.get(self.cursors[s].1) {
            self.heap.push(Reverse((loss_key(l), s, false)));
        }
    }
}

impl<'t, 'a> Iterator for Merge<'t, 'a> {
    type Item = Item<'t, 'a>;

    fn next(&mut self) -> Option<Item<'t, 'a>> {
        let Reverse((_, s, is_event)) = self.heap.pop()?;
        let streams = self.streams;
        if is_event {
            let item = &streams[s].events[self.cursors[s].0];
            self.cursors[s].0 += 1;
            self.push_event(s);
            Some(Item::Event(item))
        } else {
            let item = &streams[s].losses[self.cursors[s].1];
            self.cursors[s].1 += 1;
            self.push_loss(s);
            Some(Item::Loss(item))
        }
    }
}
