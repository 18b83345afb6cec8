//! The wall clock of a region: the header's `wall_offset_ns`, superseded
//! from each `clock` event's timestamp on by the offset it carries
//! (FORMAT.md sections 3 and 9). Only kernel streams' `clock` events move
//! it: a user stream's are its writer's claim (FORMAT.md, section 15),
//! shown among its events and nowhere else.
//!
//! Every wall time a reader derives goes through [`WallClock`]: forward
//! with [`WallClock::offset_at`] (the offset in effect at a trace time) and
//! back with [`WallClock::mono_at`] (the trace time a wall time was read
//! at). Arithmetic is in `i128`, where a `u64` time plus an `i64` offset
//! cannot overflow; results that do not fit are `None`, never a panic.

use super::{Event, PagedTrace, Trace};
use crate::endian::Endian;
use crate::schema::{decode_field, FieldKind, Value, EVENT_CLOCK};
use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

/// The most `clock` steps a wall clock keeps, the newest (and, while
/// decoding, the most one stream keeps): a kernel steps the wall clock a
/// few times a boot, and a forged region full of `clock` events must not
/// cost some 30 times its size in the clock's map.
pub const MAX_CLOCK_STEPS: usize = 65_536;

/// A `clock` event: from `ts` on, wall time = ts + `wall_offset_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockStep {
    pub ts: u64,
    pub stream: u16,
    pub index: u64,
    pub wall_offset_ns: i64,
}

impl ClockStep {
    /// The step `ev` is, if it is a `clock` event whose payload decodes,
    /// in a region of byte order `e`.
    pub fn of(ev: &Event<'_>, e: Endian) -> Option<ClockStep> {
        if ev.type_id != EVENT_CLOCK {
            return None;
        }
        Some(ClockStep {
            ts: ev.ts,
            stream: ev.stream,
            index: ev.index,
            wall_offset_ns: clock_offset(ev.payload, e)?,
        })
    }
}

/// How a stretch of wall time maps back onto the trace clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Back {
    /// Trace time = wall − offset.
    Shift(i64),
    /// The wall clock jumped over this stretch at this trace time.
    At(u64),
}

/// A region's wall clock: its header's offset and the steps its trace
/// recorded, in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WallClock {
    base_ns: i64,
    steps: Vec<ClockStep>,
    /// Steps older than the newest [`MAX_CLOCK_STEPS`], not used.
    ignored: usize,
    /// Disjoint wall-time stretches `[start, end)`, sorted, with how each
    /// maps back; built once, so [`Self::mono_at`] is a binary search.
    back: Vec<(i128, i128, Back)>,
}

/// Decodes a `clock` payload (an `i64`, plus up to 3 bytes of record
/// padding); `None` for any other size.
fn clock_offset(payload: &[u8], e: Endian) -> Option<i64> {
    if !(8..12).contains(&payload.len()) {
        return None;
    }
    match decode_field(FieldKind::I64, payload, 0, e)? {
        (Value::Signed(v), _) => Some(v),
        _ => None,
    }
}

impl WallClock {
    /// The clock of a region whose header offset is `base_ns`, written in
    /// byte order `e`, from the `clock` events of `trace`'s kernel streams
    /// ([`super::StreamInfo::is_kernel`]). Events whose payload does not
    /// decode are ignored. Steps at the same time apply in stream, then
    /// index order.
    pub fn new(base_ns: i64, e: Endian, trace: &Trace<'_>) -> WallClock {
        let steps: Vec<ClockStep> = trace
            .streams
            .iter()
            .filter(|s| s.info.is_kernel())
            .flat_map(|s| &s.events)
            .filter_map(|ev| ClockStep::of(ev, e))
            .collect();
        WallClock::from_steps(base_ns, steps)
    }

    /// As [`Self::new`], from a trace decoded page by page: its streams
    /// kept their `clock` events while decoding, so no event is walked
    /// again.
    ///
    /// A stream with more than [`MAX_CLOCK_STEPS`] kept only its newest
    /// and the newest of those it left out. That one joins the steps
    /// given to [`Self::from_steps`]: with [`MAX_CLOCK_STEPS`] newer steps
    /// in its own stream it is never kept, but it may be the newest left
    /// out, whose offset is in effect before the oldest kept. The others
    /// are counted as ignored.
    pub fn of_pages(base_ns: i64, trace: &PagedTrace<'_>) -> WallClock {
        let kernel = || trace.streams.iter().filter(|s| s.info.is_kernel());
        let mut steps: Vec<ClockStep> = kernel().flat_map(|s| s.clock_steps()).copied().collect();
        let mut left_out = 0usize;
        for (newest, count) in kernel().filter_map(|s| s.clock_steps_left_out()) {
            steps.push(newest);
            let others = usize::try_from(count.saturating_sub(1)).unwrap_or(usize::MAX);
            left_out = left_out.saturating_add(others);
        }
        let mut clock = WallClock::from_steps(base_ns, steps);
        clock.ignored = clock.ignored.saturating_add(left_out);
        clock
    }

    /// A clock with no steps: the header's offset throughout.
    pub fn fixed(base_ns: i64) -> WallClock {
        WallClock::from_steps(base_ns, Vec::new())
    }

    /// A clock from its steps, in any order (they are sorted by time,
    /// stream and index); of more than [`MAX_CLOCK_STEPS`], the newest.
    pub fn from_steps(base_ns: i64, mut steps: Vec<ClockStep>) -> WallClock {
        steps.sort_by_key(|s| (s.ts, s.stream, s.index));
        let ignored = steps.len().saturating_sub(MAX_CLOCK_STEPS);
        // Before the oldest step kept, the newest left out was in effect.
        let base_ns = match ignored {
            0 => base_ns,
            n => steps[n - 1].wall_offset_ns,
        };
        steps.drain(..ignored);
        let mut clock = WallClock {
            base_ns,
            steps,
            ignored,
            back: Vec::new(),
        };
        clock.back = clock.back_map();
        clock
    }

    /// The offset in effect before the first step: the header's, or
    /// with steps left out, the newest of them's.
    pub fn base_ns(&self) -> i64 {
        self.base_ns
    }

    /// The `clock` events, in the order they apply.
    pub fn steps(&self) -> &[ClockStep] {
        &self.steps
    }

    /// How many steps older than the newest [`MAX_CLOCK_STEPS`] are not
    /// used: times before the oldest kept are placed by the offset the
    /// newest of them set.
    pub fn ignored_steps(&self) -> usize {
        self.ignored
    }

    /// The offset in effect at trace time `ts`: that of the last step at
    /// or before `ts`, else the header's.
    pub fn offset_at(&self, ts: u64) -> i64 {
        let after = self.steps.partition_point(|s| s.ts <= ts);
        match after.checked_sub(1).and_then(|i| self.steps.get(i)) {
            Some(s) => s.wall_offset_ns,
            None => self.base_ns,
        }
    }

    /// Trace time `ts` as nanoseconds since the Unix epoch.
    pub fn wall_at(&self, ts: u64) -> i128 {
        i128::from(ts) + i128::from(self.offset_at(ts))
    }

    /// The trace time at which the wall clock read `wall` (nanoseconds
    /// since the Unix epoch): the time in the segment between two steps
    /// whose wall-clock span covers `wall`. When the clock was stepped
    /// back, two segments may cover it and the later one wins; when it
    /// was stepped forward over `wall`, the step's own time is returned.
    /// `None` before the trace clock's zero.
    pub fn mono_at(&self, wall: i128) -> Option<u64> {
        let at = self.back.partition_point(|&(start, _, _)| start <= wall);
        let &(_, end, back) = self.back.get(at.checked_sub(1)?)?;
        if wall >= end {
            return None;
        }
        match back {
            Back::Shift(off) => u64::try_from(wall - i128::from(off)).ok(),
            Back::At(ts) => Some(ts),
        }
    }

    /// The segments between steps as wall-clock stretches, each with a
    /// priority (later segments win; a jump over a stretch loses to any
    /// segment), flattened into disjoint stretches by a sweep.
    fn back_map(&self) -> Vec<(i128, i128, Back)> {
        // (start, end, priority, mapping); priority 0 for jumps.
        let mut pieces: Vec<(i128, i128, usize, Back)> =
            Vec::with_capacity(self.steps.len() * 2 + 1);
        let mut from: i128 = 0;
        let mut off = self.base_ns;
        let end_of_time = i128::from(u64::MAX) + 1;
        for (n, s) in self.steps.iter().enumerate() {
            let to = i128::from(s.ts);
            let (w0, w1) = (from + i128::from(off), to + i128::from(off));
            pieces.push((w0, w1, n + 1, Back::Shift(off)));
            let w2 = to + i128::from(s.wall_offset_ns);
            if w2 > w1 {
                pieces.push((w1, w2, 0, Back::At(s.ts)));
            }
            from = to;
            off = s.wall_offset_ns;
        }
        let n = self.steps.len() + 1;
        pieces.push((
            from + i128::from(off),
            end_of_time + i128::from(off),
            n,
            Back::Shift(off),
        ));
        pieces.retain(|p| p.0 < p.1);
        let mut bounds: Vec<i128> = pieces.iter().flat_map(|p| [p.0, p.1]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut by_start: Vec<usize> = (0..pieces.len()).collect();
        by_start.sort_by_key(|&i| pieces[i].0);
        let mut next = 0;
        // Max-heap by priority of the pieces that started; those that
        // ended are dropped when they surface.
        let mut open: BinaryHeap<(usize, Reverse<i128>, usize)> = BinaryHeap::new();
        let mut out: Vec<(i128, i128, Back)> = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while let Some(&i) = by_start.get(next).filter(|&&i| pieces[i].0 <= lo) {
                open.push((pieces[i].2, Reverse(pieces[i].1), i));
                next += 1;
            }
            while open.peek().is_some_and(|&(_, Reverse(end), _)| end <= lo) {
                open.pop();
            }
            let Some(&(_, _, i)) = open.peek() else {
                continue;
            };
            let back = pieces[i].3;
            match out.last_mut() {
                Some(last) if last.1 == lo && last.2 == back => last.1 = hi,
                _ => out.push((lo, hi, back)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{HeaderTrust, Region};
    use crate::schema::{self, Value as V};
    use crate::write::{self, RegionConfig, StreamSpec};
    use proptest::prelude::*;

    fn step(ts: u64, wall_offset_ns: i64) -> ClockStep {
        ClockStep {
            ts,
            stream: 0,
            index: ts,
            wall_offset_ns,
        }
    }

    #[test]
    fn offsets_apply_from_their_step_on() {
        let c = WallClock::from_steps(100, vec![step(10, 1_000), step(20, 50)]);
        assert_eq!(c.offset_at(0), 100);
        assert_eq!(c.offset_at(9), 100);
        assert_eq!(c.offset_at(10), 1_000);
        assert_eq!(c.offset_at(19), 1_000);
        assert_eq!(c.offset_at(20), 50);
        assert_eq!(c.offset_at(u64::MAX), 50);
        assert_eq!(c.wall_at(u64::MAX), i128::from(u64::MAX) + 50);
    }

    #[test]
    fn wall_times_map_back_segment_by_segment() {
        // Stepped forward at 10 (+900), then back at 20 (−5).
        let c = WallClock::from_steps(100, vec![step(10, 1_000), step(20, 995)]);
        assert_eq!(c.mono_at(99), None);
        assert_eq!(c.mono_at(100), Some(0));
        assert_eq!(c.mono_at(109), Some(9));
        // Jumped over by the forward step: placed at the step.
        assert_eq!(c.mono_at(110), Some(10));
        assert_eq!(c.mono_at(1_009), Some(10));
        assert_eq!(c.mono_at(1_010), Some(10));
        assert_eq!(c.mono_at(1_014), Some(14));
        // 1015..1020 was read twice; the later reading wins.
        assert_eq!(c.mono_at(1_015), Some(20));
        assert_eq!(c.mono_at(1_019), Some(24));
        assert_eq!(c.mono_at(1_020), Some(25));
        assert_eq!(
            c.mono_at(i128::from(u64::MAX) + 995),
            Some(u64::MAX),
            "the last segment runs to the end of time"
        );
        assert_eq!(c.mono_at(i128::from(u64::MAX) + 996), None);
    }

    /// The wall times a forward step skips were never read: each maps to
    /// the step itself, up to the first reading of the new offset. Small
    /// times and offsets, including negative ones, so that no product or
    /// other combination of time and offset stands in for their sum.
    #[test]
    fn every_wall_time_a_forward_step_skips_maps_to_the_step() {
        for (base, ts, off) in [
            (100, 0, 1_000),
            (100, 1, 1_000),
            (0, 7, 8),
            (-1_000, 100, -500),
        ] {
            let c = WallClock::from_steps(base, vec![step(ts, off)]);
            let skipped = i128::from(ts) + i128::from(base)..=i128::from(ts) + i128::from(off);
            for wall in skipped {
                assert_eq!(
                    c.mono_at(wall),
                    Some(ts),
                    "base {base}, step to {off} at {ts}: wall {wall}"
                );
            }
        }
    }

    #[test]
    fn without_steps_the_header_offset_holds() {
        let c = WallClock::fixed(-5);
        assert_eq!(c.offset_at(7), -5);
        assert_eq!(c.mono_at(0), Some(5));
        assert_eq!(c.mono_at(-6), None);
        assert!(c.steps().is_empty());
    }

    #[test]
    fn payloads_of_the_wrong_size_are_not_steps() {
        assert_eq!(
            clock_offset(&[1, 0, 0, 0, 0, 0, 0, 0], Endian::Little),
            Some(1)
        );
        assert_eq!(
            clock_offset(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], Endian::Big),
            Some(1)
        );
        assert_eq!(clock_offset(&[0xff; 7], Endian::Little), None);
        assert_eq!(clock_offset(&[0xff; 12], Endian::Little), None);
        assert_eq!(clock_offset(&[], Endian::Big), None);
    }

    /// A region with `clock` events written by the reference writer on
    /// two streams, one of them with a payload of the wrong size.
    #[test]
    fn clock_events_are_read_from_every_stream_and_bad_ones_ignored() {
        for e in [Endian::Little, Endian::Big] {
            let mut mem = vec![0u8; 64 * 1024];
            let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
            let cfg = RegionConfig {
                page_size: 1024,
                streams: &specs,
                endian: e,
                wall_offset_ns: 7,
                ..Default::default()
            };
            let mut region = write::format(&mut mem, &cfg).unwrap();
            let def = schema::builtin(EVENT_CLOCK).unwrap();
            let mut cpu0 = region.streams.next().unwrap();
            let mut cpu1 = region.streams.next().unwrap();
            cpu0.write_event(100, def, &[V::Signed(-3)]).unwrap();
            cpu1.write_event(200, def, &[V::Signed(i64::MAX)]).unwrap();
            cpu1.write(250, EVENT_CLOCK, &[1, 2, 3, 4]).unwrap();
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            let c = region.wall_clock(&region.decode());
            assert_eq!(c.base_ns(), 7);
            let got: Vec<(u64, u16, i64)> = c
                .steps()
                .iter()
                .map(|s| (s.ts, s.stream, s.wall_offset_ns))
                .collect();
            assert_eq!(got, [(100, 0, -3), (200, 1, i64::MAX)]);
            assert_eq!(c.offset_at(99), 7);
            assert_eq!(c.offset_at(199), -3);
            assert_eq!(
                c.wall_at(u64::MAX),
                i128::from(u64::MAX) + i128::from(i64::MAX)
            );
        }
    }

    /// A stream full of `clock` events keeps its newest MAX_CLOCK_STEPS,
    /// says how many it did not, and so does the clock.
    #[test]
    fn a_flood_of_clock_events_keeps_the_newest_and_says_so() {
        let n = MAX_CLOCK_STEPS + 10;
        let mut mem = vec![0u8; (n * 12 / 4000 + 8) * 4096];
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let def = schema::builtin(EVENT_CLOCK).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        for i in 0..n as u64 {
            cpu0.write_event(i, def, &[V::Signed(i as i64 % 2)])
                .unwrap();
        }
        cpu0.close();
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let steps = trace.streams[0].clock_steps();
        assert_eq!(steps.len(), MAX_CLOCK_STEPS);
        assert_eq!(steps[0].ts, 10);
        let said: Vec<String> = trace.diagnostics.iter().map(|d| d.to_string()).collect();
        assert!(
            said.iter()
                .any(|d| d.contains("10 `clock` events before the stream's newest 65536")),
            "{said:?}"
        );
        // The clock of the pages: before the oldest step kept, the
        // newest left out (9, offset 1) is in effect, not the header's 0.
        let paged = region.wall_clock_of_pages(&trace);
        assert_eq!(paged.ignored_steps(), 10);
        assert_eq!(paged.offset_at(9), 1);
        assert!(
            paged == region.wall_clock(&region.decode()),
            "the clocks differ"
        );
        // The clock, given them all, keeps the newest too.
        let all: Vec<ClockStep> = (0..n as u64).map(|i| step(i, i as i64)).collect();
        let c = WallClock::from_steps(0, all);
        assert_eq!(c.steps().len(), MAX_CLOCK_STEPS);
        assert_eq!(c.ignored_steps(), 10);
        assert_eq!(c.offset_at(5), 9);
        assert_eq!(c.offset_at(u64::MAX), n as i64 - 1);
    }

    /// One stream floods the clock late, another stepped it early: the
    /// clock of the pages is the clock of every step, the newest left
    /// out (the flooding stream's) in effect before the oldest kept.
    #[test]
    fn a_clock_of_pages_left_out_steps_of_one_stream_is_the_clock_of_all() {
        let n = MAX_CLOCK_STEPS + 10;
        let mut mem = vec![0u8; 2 * (n * 12 / 4000 + 8) * 4096];
        let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            wall_offset_ns: -1,
            ..Default::default()
        };
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let def = schema::builtin(EVENT_CLOCK).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        let mut cpu1 = region.streams.next().unwrap();
        for i in 0..5u64 {
            cpu1.write_event(i, def, &[V::Signed(100 + i as i64)])
                .unwrap();
        }
        for i in 0..n as u64 {
            cpu0.write_event(1000 + i, def, &[V::Signed(i as i64)])
                .unwrap();
        }
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let paged = region.wall_clock_of_pages(&region.decode_paged());
        assert!(
            paged == region.wall_clock(&region.decode()),
            "the clocks differ"
        );
        assert_eq!(paged.ignored_steps(), 15);
        assert_eq!(paged.base_ns(), 9);
        assert_eq!(paged.offset_at(1009), 9);
        assert_eq!(paged.offset_at(1010), 10);
    }

    /// A user stream's `clock` events are its writer's claim: the
    /// region's clock is the header's and its kernel streams' steps.
    #[test]
    fn user_streams_do_not_step_the_wall_clock() {
        let mut mem = vec![0u8; 64 * 1024];
        let specs = [
            StreamSpec::cpu(0),
            StreamSpec {
                kind: crate::layout::STREAM_USER,
                cpu: u16::MAX,
                lane: 0,
                name: "cpu0",
                pid: 666,
                uid: 1001,
            },
        ];
        let cfg = RegionConfig {
            page_size: 1024,
            streams: &specs,
            wall_offset_ns: 7,
            ..Default::default()
        };
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let def = schema::builtin(EVENT_CLOCK).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        let mut user = region.streams.next().unwrap();
        user.write_event(50, def, &[V::Signed(i64::MAX)]).unwrap();
        cpu0.write_event(100, def, &[V::Signed(-3)]).unwrap();
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        for c in [
            region.wall_clock(&region.decode()),
            region.wall_clock_of_pages(&region.decode_paged()),
        ] {
            let got: Vec<(u64, u16)> = c.steps().iter().map(|s| (s.ts, s.stream)).collect();
            assert_eq!(got, [(100, 0)]);
            assert_eq!(c.offset_at(60), 7);
        }
    }

    fn arb_steps() -> impl Strategy<Value = Vec<ClockStep>> {
        let ts = prop_oneof![0..64u64, Just(u64::MAX), any::<u64>()];
        let off = prop_oneof![-64..64i64, Just(i64::MIN), Just(i64::MAX), any::<i64>()];
        prop::collection::vec((ts, off), 0..12).prop_map(|v| {
            let mut steps: Vec<ClockStep> = v
                .into_iter()
                .enumerate()
                .map(|(i, (ts, off))| ClockStep {
                    ts,
                    stream: 0,
                    index: i as u64,
                    wall_offset_ns: off,
                })
                .collect();
            steps.sort_by_key(|s| (s.ts, s.stream, s.index));
            steps
        })
    }

    proptest! {
        /// Any steps, any times: no panic, and every trace time's wall
        /// time maps back onto a time with the same wall time.
        #[test]
        fn wall_and_back_agree(
            base in prop_oneof![-64..64i64, Just(i64::MIN), Just(i64::MAX), any::<i64>()],
            steps in arb_steps(),
            probes in prop::collection::vec(prop_oneof![0..80u64, any::<u64>()], 1..16),
            walls in prop::collection::vec(any::<i128>(), 1..8),
        ) {
            let c = WallClock::from_steps(base, steps);
            for ts in probes {
                let w = c.wall_at(ts);
                let back = c.mono_at(w);
                prop_assert!(back.is_some(), "{ts} -> {w} -> nothing");
                prop_assert_eq!(back.map(|b| c.wall_at(b)), Some(w));
            }
            for w in walls {
                let _ = c.mono_at(w);
            }
            for piece in c.back.windows(2) {
                prop_assert!(piece[0].1 <= piece[1].0);
            }
        }

        /// Arbitrary payload bytes as `clock` events never panic.
        #[test]
        fn hostile_payloads_do_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..16)) {
            let _ = clock_offset(&bytes, Endian::Little);
            let _ = clock_offset(&bytes, Endian::Big);
        }
    }
}
