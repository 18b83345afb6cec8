//! The bytes of a region its input could not supply: a dump's excluded or
//! lost pages. They hold no data, so whatever touches them is reported as
//! absent, never checked or decoded.

use alloc::vec::Vec;
use core::ops::Range;

/// Byte ranges from the region's start, sorted, apart and not empty.
#[derive(Clone, Debug, Default)]
pub(crate) struct Absent(Vec<Range<u64>>);

impl Absent {
    /// Ranges in any order, overlapping or not; touching ones are joined,
    /// so a multi-GiB hole is one range however it was given.
    pub(crate) fn new(mut ranges: Vec<Range<u64>>) -> Absent {
        ranges.retain(|r| r.start < r.end);
        ranges.sort_by_key(|r| r.start);
        let mut joined: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match joined.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => joined.push(r),
            }
        }
        Absent(joined)
    }

    /// Whether any byte of `range` is absent.
    pub(crate) fn touches(&self, range: Range<u64>) -> bool {
        self.until(range).is_some()
    }

    /// Where the absent stretch holding some byte of `range` ends, if any
    /// byte of it is absent.
    pub(crate) fn until(&self, range: Range<u64>) -> Option<u64> {
        let after = self.0.partition_point(|r| r.end <= range.start);
        self.0
            .get(after)
            .filter(|r| r.start < range.end)
            .map(|r| r.end)
    }
}
