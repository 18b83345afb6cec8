//! A region's timeline (of the streams kept) cut into windows of time
//! that are merged apart, each on its own core, to exactly the items, in
//! exactly the order, of the one merge of the whole
//! ([`RegionView::merged`]).
//!
//! Why a window's merge is the whole merge's: the merge yields the least
//! head of every stream's events and of its losses by (time, stream,
//! index) each time. Take the first moment at which every head is at time
//! `t` or later: every item yielded before had a time before `t`, so no
//! head has yet passed an item at `t` or later, and every head is at one.
//! Each stream's events and its losses therefore stand at their first
//! item at `t` or later, whether or not a stream's time goes back between
//! its pages. A window merges each stream from there to where it stands
//! at the next window's start: up to that moment the items it leaves out
//! were never the least head, so the merge yields what the whole merge
//! does in between, and every stream ends there. Within a page time only
//! goes forward, so a stream's first event at `t` or later is in its first
//! page whose latest event is, found by binary search over the running
//! latest time of its pages; where it stands does not depend on an
//! overlay, so events a bundle leaves out are skipped within the window
//! alone.

use super::view::{Events, RegionView};
use pstore_ring::merge::{merge_events, PagedMerge};
use pstore_ring::read::{Loss, StreamEvents, StreamInfo};
use std::iter::Skip;

/// A view's timeline from a time on, cut into windows.
pub struct Windows<'v, 'r, 'a> {
    view: &'v RegionView<'r, 'a>,
    /// Where each window starts; each ends where the next starts, the
    /// last with the timeline.
    starts: Vec<u64>,
    /// The streams merged, by position in the view.
    kept: Vec<usize>,
    /// Per stream merged.
    streams: Vec<Latest>,
}

/// A stream's running latest times: of its decoded pages (their last
/// events) and of its losses, each over everything up to it, so that the
/// first one at a time or later is a binary search away.
struct Latest {
    pages: Vec<u64>,
    losses: Vec<u64>,
}

/// A window's events of one stream.
pub type WindowEvents<'r, 'a> = Events<'r, Skip<StreamEvents<'r, 'a>>>;

impl<'v, 'r, 'a> Windows<'v, 'r, 'a> {
    /// Cuts the timeline of `view` from time `from` on into windows of
    /// about `events` events each, by its pages' times (a window holds
    /// whole pages but where the windows' edges cut one).
    pub fn plan(
        view: &'v RegionView<'r, 'a>,
        keep: &dyn Fn(&StreamInfo) -> bool,
        from: u64,
        events: usize,
    ) -> Self {
        let kept: Vec<usize> = (0..view.trace.streams.len())
            .filter(|&s| view.stream(s).is_some_and(|s| keep(s.info())))
            .collect();
        let streams: Vec<Latest> = kept
            .iter()
            .filter_map(|&s| view.stream(s))
            .map(|s| Latest {
                pages: running_max(s.decoded().iter().map(|p| {
                    if p.records > 0 {
                        p.last_ts
                    } else {
                        0
                    }
                })),
                losses: running_max(s.losses().iter().map(loss_time)),
            })
            .collect();
        // Pages by their last event's time: a window ends after enough
        // pages' events, at the last one's time, so that events of one
        // time go to two windows where other streams have more of it.
        let mut pages: Vec<(u64, u32)> = kept
            .iter()
            .filter_map(|&s| view.stream(s))
            .flat_map(|s| s.decoded().iter())
            .filter(|p| p.records > 0 && p.last_ts >= from)
            .map(|p| (p.last_ts, p.records))
            .collect();
        pages.sort_unstable();
        let mut starts = vec![from];
        let mut held = 0usize;
        for (last, records) in pages {
            held = held.saturating_add(records as usize);
            if held >= events && starts.last().is_some_and(|&s| last > s) {
                starts.push(last);
                held = 0;
            }
        }
        Windows {
            view,
            starts,
            kept,
            streams,
        }
    }

    /// How many windows there are: one at least.
    pub fn count(&self) -> usize {
        self.starts.len()
    }

    /// Window `w`'s time span: from its start, to the next window's or,
    /// for the last, on.
    pub fn span(&self, w: usize) -> (u64, Option<u64>) {
        let start = self.starts.get(w).copied().unwrap_or(u64::MAX);
        (start, self.starts.get(w + 1).copied())
    }

    /// Window `w`'s items, in the whole merge's order.
    pub fn items(&self, w: usize) -> PagedMerge<'r, 'r, WindowEvents<'r, 'a>> {
        let (start, end) = self.span(w);
        let kept = self.kept.iter().filter_map(|&s| self.view.stream(s));
        let streams = kept.zip(&self.streams).map(move |(s, latest)| {
            let cut = |t: u64| s.cut(latest.pages.partition_point(|&m| m < t), t);
            let events = s.events_between(cut(start), end.map(cut));
            let loss_cut = |t: u64| latest.losses.partition_point(|&m| m < t);
            let losses = s.losses();
            let to = end.map_or(losses.len(), loss_cut);
            (events, losses.get(loss_cut(start)..to).unwrap_or_default())
        });
        merge_events(streams)
    }
}

/// Each value replaced by the greatest up to it.
fn running_max(values: impl Iterator<Item = u64>) -> Vec<u64> {
    values
        .scan(0, |max, v| {
            *max = v.max(*max);
            Some(*max)
        })
        .collect()
}

fn loss_time(l: &Loss) -> u64 {
    pstore_ring::merge::Item::Loss(l).time()
}
