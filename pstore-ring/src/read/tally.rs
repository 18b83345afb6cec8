//! A region's headline figures: what its kernel streams recovered and
//! lost, and the time they span. A user stream's figures are its writer's
//! claim (FORMAT.md, section 15: a process writes its pages, and may
//! write any `first_index` or time there), so they are summed apart and
//! never into the region's.

use super::{lost_events, Loss, PagedTrace, StreamInfo};

/// What some streams of a region recovered and lost, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Streams counted.
    pub streams: usize,
    /// Events recovered.
    pub events: usize,
    /// Events lost, for any reason. Saturates: one stream can claim more
    /// than 2^64.
    pub lost: u64,
    /// Whether `lost` is only a lower bound (some stream's end is
    /// unknown).
    pub lost_at_least: bool,
    /// The oldest and the newest event's times.
    pub span: Option<(u64, u64)>,
}

impl Tally {
    /// Counts one stream: `events` recovered, `losses`, and the times of
    /// its first and last event.
    pub fn add(&mut self, events: usize, losses: &[Loss], first: Option<u64>, last: Option<u64>) {
        self.streams += 1;
        self.events = self.events.saturating_add(events);
        self.lost = self.lost.saturating_add(lost_events(losses));
        self.lost_at_least |= losses.iter().any(|l| !l.exact);
        if let (Some(first), Some(last)) = (first, last) {
            self.span = Some(match self.span {
                Some((a, b)) => (a.min(first), b.max(last)),
                None => (first, last),
            });
        }
    }
}

impl PagedTrace<'_> {
    /// The region's own figures: its kernel streams'.
    pub fn kernel_tally(&self) -> Tally {
        self.tally(StreamInfo::is_kernel)
    }

    /// What its user streams claim, apart from [`Self::kernel_tally`].
    pub fn user_tally(&self) -> Tally {
        self.tally(|i| !i.is_kernel())
    }

    fn tally(&self, counts: impl Fn(&StreamInfo) -> bool) -> Tally {
        let mut t = Tally::default();
        for s in self.streams.iter().filter(|s| counts(&s.info)) {
            let first = s.first_event().map(|e| e.ts);
            let last = s.last_event().map(|e| e.ts);
            t.add(s.event_count(), &s.losses, first, last);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::STREAM_USER;
    use crate::read::{HeaderTrust, Region, Tally};
    use crate::schema::{self, Value, EVENT_LOST};
    use crate::write::{self, RegionConfig, StreamSpec};

    /// A user stream that claims 2^64 − 11 events before its page and an
    /// event at 2^63 ns changes the region's figures in nothing.
    #[test]
    fn user_claims_stay_out_of_the_kernel_tally() {
        let mut mem = vec![0u8; 64 * 1024];
        let specs = [
            StreamSpec::cpu(0),
            StreamSpec {
                kind: STREAM_USER,
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
            endian: crate::Endian::Little,
            ..Default::default()
        };
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let lost = schema::builtin(EVENT_LOST).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        let mut user = region.streams.next().unwrap();
        cpu0.write_event(100, lost, &[Value::Unsigned(1)]).unwrap();
        cpu0.write_event(200, lost, &[Value::Unsigned(2)]).unwrap();
        user.write_event(150, lost, &[Value::Unsigned(3)]).unwrap();
        user.write_event(1 << 63, lost, &[Value::Unsigned(4)])
            .unwrap();
        cpu0.close();
        // The user's page is open, so no CRC holds its `first_index`.
        let parsed = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let page = parsed.decode().streams[1].decoded_pages()[0].offset as usize;
        mem[page + 24..page + 32].copy_from_slice(&(u64::MAX - 10).to_le_bytes());

        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode_paged();
        let kernel = Tally {
            streams: 1,
            events: 2,
            lost: 0,
            lost_at_least: false,
            span: Some((100, 200)),
        };
        assert_eq!(trace.kernel_tally(), kernel);
        let user = trace.user_tally();
        assert_eq!((user.streams, user.events), (1, 2));
        assert_eq!(user.lost, u64::MAX - 10);
        assert_eq!(user.span, Some((150, 1 << 63)));
    }
}
