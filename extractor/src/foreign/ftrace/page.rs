//! One sub-buffer of a persistent ftrace buffer, checked and walked on its
//! own, so that a damaged one costs only itself.
//!
//! A sub-buffer (`struct buffer_data_page`) is the time stamp of its first
//! event (u64), `commit` (a `long`: the bytes written, with
//! `RB_MISSED_EVENTS` and `RB_MISSED_STORED` in bits 31 and 30), then the
//! events. Each event starts with a word holding `type_len` (5 bits) and a
//! time delta (27 bits):
//!
//! - `type_len` 1 to 28: data of `type_len * 4` bytes after the word;
//! - 0: the word after holds the length (itself included), data after it;
//! - 29 (padding): the rest of the page when the delta is 0, else a
//!   discarded event of the next word's length, whose delta still counts
//!   unless it is 1 (the padding that closes a page). The kernel writes
//!   the null one (delta 0) only past the commit (`rb_reset_tail()` sets
//!   the write back to before it), so one before the commit is damage;
//! - 30 (time extend): the next word's value << 27, added to the delta;
//! - 31 (time stamp): an absolute stamp of 59 bits.
//!
//! A sub-buffer is refused as `rb_read_data_buffer()` refuses it, and as
//! 7.2's `__rb_validate_buffer()` does: a commit past the page, an event
//! that runs past the commit or has no length, an absolute stamp that goes
//! backwards; and here, a null padding event before the commit.

use super::meta::{u32_at, u64_at};
use std::fmt;
use std::ops::Range;

/// `BUF_PAGE_HDR_SIZE` on a 64-bit kernel: `time_stamp` and `commit`.
pub const PAGE_HEADER: usize = 16;
/// `RB_MISSED_EVENTS`: events were lost before this sub-buffer. Alone
/// (no bytes committed), 7.2's mark of a sub-buffer an earlier boot
/// dropped as invalid.
pub const MISSED_EVENTS: u64 = 1 << 31;
/// `RB_MISSED_STORED`: the count of lost events is stored after the data.
pub const MISSED_STORED: u64 = 1 << 30;
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
/// The bits of a stamp a `TIME_STAMP` event cannot hold
/// (`rb_fix_abs_ts()`).
const TS_MSB: u64 = 0xf8 << 56;

/// When an event was written, and where its data lie among its CPU's
/// bytes ([`append`]). Offsets, not a buffer of its own: a dense buffer
/// holds millions of 8-byte events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent {
    pub ts: u64,
    at: u32,
    len: u32,
}

impl RawEvent {
    /// Its data in `bytes`, those it was read with.
    pub fn data<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        let at = self.at as usize;
        bytes.get(at..at + self.len as usize).unwrap_or_default()
    }
}

/// A sub-buffer read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub time_stamp: u64,
    /// Bytes committed.
    pub commit: usize,
    /// `RB_MISSED_EVENTS`: the writer lost events before this page.
    pub missed: bool,
    /// How many events it holds.
    pub events: usize,
    /// The stamp after the last event.
    pub end_ts: u64,
}

impl Page {
    /// Never written: the state every sub-buffer starts in.
    pub fn unused(&self) -> bool {
        self.time_stamp == 0 && self.commit == 0 && !self.missed
    }

    /// 7.2's mark of a sub-buffer an earlier boot dropped as invalid.
    pub fn dropped_by_kernel(&self) -> bool {
        self.commit == 0 && self.missed
    }
}

/// Why a sub-buffer was refused, with the byte of its data area it
/// failed at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageError {
    Commit(u64),
    NoLength(usize),
    PastCommit(usize),
    Backwards(usize, u64, u64),
    NullPadding(usize),
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::Commit(c) => write!(f, "commit {c:#x} is past the sub-buffer"),
            PageError::NoLength(at) => write!(f, "event at data +{at:#x} has no length"),
            PageError::PastCommit(at) => {
                write!(f, "event at data +{at:#x} runs past the commit")
            }
            PageError::NullPadding(at) => write!(
                f,
                "null padding at data +{at:#x}, before the commit, would hide the events after it"
            ),
            PageError::Backwards(at, from, to) => {
                write!(
                    f,
                    "time stamp at data +{at:#x} goes back from {from} to {to}"
                )
            }
        }
    }
}

/// Checks and walks the sub-buffer `bytes` (the whole sub-buffer).
pub fn read(bytes: &[u8]) -> Result<Page, PageError> {
    walk(bytes, |_, _| {})
}

/// [`read`], with the sub-buffer's events put on `events` and its
/// committed bytes on `data`, which their offsets point into (`data`
/// stays under 4 GiB: the caller's to check). Nothing is put on either
/// when it is refused.
pub fn append(
    bytes: &[u8],
    events: &mut Vec<RawEvent>,
    data: &mut Vec<u8>,
) -> Result<Page, PageError> {
    let (had, base) = (events.len(), data.len());
    let page = walk(bytes, |ts, span| {
        events.push(RawEvent {
            ts,
            at: (base + span.start) as u32,
            len: span.len() as u32,
        })
    })
    .inspect_err(|_| events.truncate(had))?;
    data.extend_from_slice(&bytes[PAGE_HEADER..PAGE_HEADER + page.commit]);
    Ok(page)
}

/// [`read`], handing `event` each event's stamp and where its data lie
/// among the committed bytes.
fn walk(bytes: &[u8], mut event: impl FnMut(u64, Range<usize>)) -> Result<Page, PageError> {
    let time_stamp = u64_at(bytes, 0);
    let raw_commit = u64_at(bytes, 8);
    let missed = raw_commit & MISSED_EVENTS != 0;
    let commit = raw_commit & !(MISSED_EVENTS | MISSED_STORED);
    let data = &bytes[PAGE_HEADER..];
    let commit = usize::try_from(commit)
        .ok()
        .filter(|&c| c <= data.len())
        .ok_or(PageError::Commit(raw_commit))?;
    let data = &data[..commit];
    let mut ts = time_stamp;
    let mut events = 0;
    let mut at = 0;
    while at < commit {
        let word = |off: usize| -> Result<u32, PageError> {
            data.get(at + off..at + off + 4)
                .map(|w| u32_at(w, 0))
                .ok_or(PageError::PastCommit(at))
        };
        let head = word(0)?;
        let type_len = head & 0x1f;
        let delta = u64::from(head >> 5);
        let length = match type_len {
            0 => {
                let len = word(4)? as usize;
                if len < 4 {
                    return Err(PageError::NoLength(at));
                }
                let end = (at + 4).checked_add(len).ok_or(PageError::PastCommit(at))?;
                data.get(at + 8..end).ok_or(PageError::PastCommit(at))?;
                ts = ts.wrapping_add(delta);
                event(ts, at + 8..end);
                events += 1;
                len + 4
            }
            1..=28 => {
                let end = at + 4 + 4 * type_len as usize;
                data.get(at + 4..end).ok_or(PageError::PastCommit(at))?;
                ts = ts.wrapping_add(delta);
                event(ts, at + 4..end);
                events += 1;
                end - at
            }
            TYPE_PADDING if delta == 0 => return Err(PageError::NullPadding(at)),
            TYPE_PADDING => {
                let len = word(4)? as usize;
                if len == 0 {
                    return Err(PageError::NoLength(at));
                }
                if delta != 1 {
                    ts = ts.wrapping_add(delta);
                }
                len + 4
            }
            TYPE_TIME_EXTEND => {
                ts = ts.wrapping_add(u64::from(word(4)?) << 27 | delta);
                8
            }
            // TIME_STAMP, the last of the 32 types.
            _ => {
                let stamp = fix_abs_ts(u64::from(word(4)?) << 27 | delta, ts);
                if stamp < ts {
                    return Err(PageError::Backwards(at, ts, stamp));
                }
                ts = stamp;
                8
            }
        };
        at = at
            .checked_add(length)
            .filter(|&end| end <= commit)
            .ok_or(PageError::PastCommit(at))?;
    }
    Ok(Page {
        time_stamp,
        commit,
        missed,
        events,
        end_ts: ts,
    })
}

/// The top bits an absolute stamp could not store, taken from the stamp
/// before it (`rb_fix_abs_ts()`).
fn fix_abs_ts(abs: u64, before: u64) -> u64 {
    if before & TS_MSB == 0 {
        return abs;
    }
    let abs = abs | (before & TS_MSB);
    if abs < before {
        abs.wrapping_add(1 << 59)
    } else {
        abs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sub-buffer of 4 KiB stamped 1000 with `events` committed.
    fn page(events: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[..8].copy_from_slice(&1000u64.to_le_bytes());
        b[8..16].copy_from_slice(&(events.len() as u64).to_le_bytes());
        b[PAGE_HEADER..PAGE_HEADER + events.len()].copy_from_slice(events);
        b
    }

    /// A 4-byte data event `delta` after the one before it.
    fn event(delta: u32, data: u32) -> [u8; 8] {
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&(1 | delta << 5).to_le_bytes());
        e[4..].copy_from_slice(&data.to_le_bytes());
        e
    }

    #[test]
    fn null_padding_past_the_commit_ends_the_page_and_before_it_is_damage() {
        let mut events = [event(1, 7), event(2, 8)].concat();
        let mut bytes = page(&events);
        // Where the writer stopped, past the commit: the kernel's null padding.
        bytes[PAGE_HEADER + events.len()] = 29;
        let p = read(&bytes).unwrap();
        assert_eq!(p.events, 2);
        assert_eq!(p.end_ts, 1003);
        // The same word between two committed events.
        events.splice(8..8, [29, 0, 0, 0]);
        assert_eq!(read(&page(&events)), Err(PageError::NullPadding(8)));
        assert_eq!(
            PageError::NullPadding(8).to_string(),
            "null padding at data +0x8, before the commit, would hide the events after it"
        );
    }
}
