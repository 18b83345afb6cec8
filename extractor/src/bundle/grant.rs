//! What a report asked for without a crash may hold: the asker's own
//! user streams and the kernel events crashring.conf's `[Request]` policy
//! grants (`crashring serve-request`). Everything else is left out of
//! every file of the bundle, as redaction leaves events out: a granted
//! bundle is the redacted trace of [`super::redact::plan`] with the grant
//! applied first, so no output can show what the grant withholds.

use crate::recover::Recovered;
use pstore_ring::endian::Endian;
use pstore_ring::read::{DebugEvent, EventType, StreamInfo};
use pstore_ring::schema::{Value, EVENT_CLOCK, EVENT_LOST, EVENT_PRINTK};

/// A report's grant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// The asker: only the user streams this user wrote.
    pub uid: u32,
    /// Of those, only the streams of these names; all when empty.
    pub streams: Vec<String>,
    /// printk lines up to this level; none when `None`.
    pub printk_level: Option<u8>,
    /// DRM debug messages of these categories (bit numbers).
    pub drm_categories: Vec<u16>,
    /// Other kernel event types, by name.
    pub kernel_events: Vec<String>,
}

impl Grant {
    /// Whether the report may hold this stream's events (kernel streams:
    /// the events [`Grant::kernel_event`] allows).
    pub fn stream(&self, info: &StreamInfo) -> bool {
        info.is_kernel()
            || (info.uid == self.uid
                && (self.streams.is_empty() || self.streams.contains(&info.name)))
    }

    /// Whether the report may hold this kernel event, decoded as `t`.
    /// The clock and loss records always go in: without them the
    /// timeline and the count of what is missing would be wrong.
    pub fn kernel_event(&self, t: &EventType, payload: &[u8], values: &[Value], e: Endian) -> bool {
        match t.id {
            EVENT_CLOCK | EVENT_LOST => return true,
            EVENT_PRINTK => {
                let level = values.first().and_then(|v| match v {
                    Value::Unsigned(l) => Some(*l),
                    _ => None,
                });
                return level
                    .zip(self.printk_level)
                    .is_some_and(|(l, max)| l <= u64::from(max));
            }
            _ => {}
        }
        if let Some(d) = DebugEvent::parse(t, payload, e) {
            if self.drm_categories.contains(&d.category) {
                return true;
            }
        }
        self.kernel_events.contains(&t.name)
    }
}

/// Takes out of `r` every user stream the grant does not give the asker,
/// its descriptor and what the reader said about it included, so that
/// the report does not even name another user's stream. Returns how
/// many streams were taken out.
pub fn narrow(r: &mut Recovered, grant: &Grant) -> usize {
    let out: Vec<u16> = r
        .region
        .streams
        .iter()
        .filter(|s| !grant.stream(s))
        .map(|s| s.index)
        .collect();
    let kept = |s: &Option<u16>| s.is_none_or(|s| !out.contains(&s));
    r.region.streams.retain(|s| !out.contains(&s.index));
    r.region.diagnostics.retain(|d| kept(&d.stream));
    r.trace.streams.retain(|s| !out.contains(&s.info.index));
    r.trace.diagnostics.retain(|d| kept(&d.stream));
    out.len()
}
