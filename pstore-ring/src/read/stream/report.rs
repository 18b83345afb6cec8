//! What rebuilding a stream found: its events, each page slot's status,
//! and every loss, with why.

use super::*;

/// One recovered event. `payload` borrows from the region's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    pub stream: u16,
    /// The event's position among all events ever committed to its stream.
    pub index: u64,
    pub ts: u64,
    pub type_id: u8,
    /// The payload with up to three bytes of record padding.
    pub payload: &'a [u8],
    /// Whether it came from a page that was still open (no CRC to check).
    pub salvaged: bool,
}

/// What became of a page slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageStatus {
    /// Never written in this generation.
    Unused,
    /// Closed, CRC verified, every record decoded.
    Intact,
    /// Closed and CRC verified, but its records do not add up.
    Damaged,
    /// Still open at the end: salvaged record by record.
    Salvaged,
    /// Caught being recycled: its old contents are gone, its new ones not
    /// yet there.
    Resetting,
    /// The input ends before the page's committed bytes do.
    Truncated,
    /// The input does not hold the page: a dump excluded or lost it.
    Absent,
    /// Fails its checks; nothing in it is used.
    Corrupt,
}

/// A page slot's fate, for `info` output and tests. A run of consecutive
/// [`PageStatus::Absent`] slots is one report for all of them, so a dump
/// that leaves out gigabytes costs one report, not one per page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageReport {
    /// The first slot reported.
    pub slot: u32,
    /// Slots reported, from `slot` on: 1, except for a run of absent ones.
    pub slots: u32,
    /// From the start of the region.
    pub offset: u64,
    pub status: PageStatus,
    /// As stored; only meaningful for readable pages.
    pub seq: u64,
    /// Events decoded from it: `events[first_event..][..records]` of its
    /// stream's trace.
    pub records: u32,
    pub first_event: usize,
}

/// Why events are missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// Their pages were reused by the ring.
    Overwritten,
    /// Their pages are present but corrupt, truncated or caught mid-reset.
    Unreadable,
    /// The writer could not record them (nesting, size) and counted them.
    Dropped,
    /// Committed to an open page after the point where salvage stopped, or
    /// past a malformed record in a closed one.
    Torn,
    /// After the stream's newest readable page: on pages its tail says it
    /// wrote, or (tail unreadable) may have written, that are corrupt,
    /// absent or cut off. [`Loss::cause`] says which, [`Loss::exact`]
    /// whether the count is known.
    End,
}

impl LossKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [LossKind; 5] = [
        LossKind::Overwritten,
        LossKind::Unreadable,
        LossKind::Dropped,
        LossKind::Torn,
        LossKind::End,
    ];

    /// The kind's name in machine-readable output (JSON lines, `info
    /// --json`, the bundle's manifest): one word, the same everywhere.
    pub fn name(self) -> &'static str {
        match self {
            LossKind::Overwritten => "overwritten",
            LossKind::Unreadable => "unreadable",
            LossKind::Dropped => "dropped",
            LossKind::Torn => "torn",
            LossKind::End => "end",
        }
    }
}

/// Why the pages of an end loss cannot be read: the first of them decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndCause {
    /// Present but failing their checks (or holding an older page than the
    /// tail says they should).
    Corrupt,
    /// The input does not hold them: a dump excluded or lost them.
    Absent,
    /// The input ends before them: a cut dump or image.
    Cut,
    /// Written over before a live reader reached them: the stream was
    /// handed to another holder, or the region to another generation,
    /// between two looks (`crashring follow`). Nothing says how many.
    Replaced,
}

impl EndCause {
    /// The cause's name in machine-readable output.
    pub fn name(self) -> &'static str {
        match self {
            EndCause::Corrupt => "corrupt",
            EndCause::Absent => "absent",
            EndCause::Cut => "cut",
            EndCause::Replaced => "replaced",
        }
    }
}

/// A run of missing events in one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loss {
    pub stream: u16,
    pub kind: LossKind,
    pub events: u64,
    /// Whole pages the loss spans, where known.
    pub pages: u64,
    /// The last recovered time before the loss, if any.
    pub after_ts: Option<u64>,
    /// The first recovered time after it, if any.
    pub before_ts: Option<u64>,
    /// The index of the first event after the loss: where it belongs in the
    /// stream. For an end loss, the index after its last known event.
    pub at_index: u64,
    /// For [`LossKind::Dropped`]: the seq of the page whose header counts
    /// them, which names the page while its count grows (two pages may
    /// start at the same time); `None` for the other kinds.
    pub page_seq: Option<u64>,
    /// For [`LossKind::End`]: why its pages cannot be read.
    pub cause: Option<EndCause>,
    /// Whether `events` is the exact count. When it is not, `events` is a
    /// lower bound (possibly 0): the stream's end is unknown.
    pub exact: bool,
}

/// A stream rebuilt.
#[derive(Clone, Debug)]
pub struct StreamTrace<'a> {
    pub info: StreamInfo,
    pub pages: Vec<PageReport>,
    /// In stream order (by index).
    pub events: Vec<Event<'a>>,
    /// In stream order (by `at_index`).
    pub losses: Vec<Loss>,
}

impl StreamTrace<'_> {
    /// Saturates: a hostile region can claim more than 2^64 lost events.
    pub fn lost_events(&self) -> u64 {
        lost_events(&self.losses)
    }

    /// Whether [`Self::lost_events`] is exact; if not it is a lower bound,
    /// as the stream's end is unknown.
    pub fn lost_exact(&self) -> bool {
        self.losses.iter().all(|l| l.exact)
    }

    /// Events lost for one reason. Saturates, like [`Self::lost_events`].
    pub fn lost(&self, kind: LossKind) -> u64 {
        lost(&self.losses, kind)
    }

    /// The pages events were decoded from, in stream order (by `seq`).
    pub fn decoded_pages(&self) -> Vec<&PageReport> {
        let mut pages: Vec<&PageReport> = self
            .pages
            .iter()
            .filter(|p| {
                matches!(
                    p.status,
                    PageStatus::Intact | PageStatus::Damaged | PageStatus::Salvaged
                )
            })
            .collect();
        pages.sort_by_key(|p| (p.first_event, p.seq));
        pages
    }

    /// Page slots with `status`, counting every slot of a run.
    pub fn pages_with(&self, status: PageStatus) -> usize {
        pages_with(&self.pages, status)
    }

    /// The report covering `slot`, if the slot is in the input.
    pub fn page(&self, slot: u32) -> Option<&PageReport> {
        report_of(&self.pages, slot).map(|i| &self.pages[i])
    }
}

/// Saturates: a hostile region can claim more than 2^64 lost events.
pub(crate) fn lost_events(losses: &[Loss]) -> u64 {
    losses.iter().fold(0, |n, l| n.saturating_add(l.events))
}

pub(super) fn lost(losses: &[Loss], kind: LossKind) -> u64 {
    losses
        .iter()
        .filter(|l| l.kind == kind)
        .fold(0, |n, l| n.saturating_add(l.events))
}

/// Page slots with `status`, counting every slot of a run.
pub(crate) fn pages_with(pages: &[PageReport], status: PageStatus) -> usize {
    pages
        .iter()
        .filter(|p| p.status == status)
        .fold(0, |n, p| n.saturating_add(p.slots as usize))
}
