//! One description of a recovered region, for machines: `crashring info
//! --json` and the bundle's `MANIFEST.json` both write a [`RegionReport`]
//! (each adds its own few keys), so a region, its crash and its losses
//! have the same names in both. extractor/SCHEMAS.md documents the
//! fields.

use super::signature::{self, Signature};
use crate::input::Dump;
use crate::output::{RegionView, StreamView};
use pstore_ring::layout::STATE_CLEAN;
use pstore_ring::ras;
use pstore_ring::read::{reason_name, LossKind, Tally, WallClock};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Display;

/// What the input was.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SourceReport {
    /// The input as named (`info`), or its file name alone (a bundle must
    /// not depend on where the input was read from).
    pub file: String,
    /// What the input is, e.g. "ELF64 core (/proc/vmcore)".
    pub container: String,
    pub vmcoreinfo_kernel: Option<String>,
    pub vmcoreinfo_crash_time: Option<String>,
    /// What the user should know about the dump itself.
    pub warnings: Vec<String>,
}

impl SourceReport {
    /// Describes `dump`, read from `file`.
    pub fn of(dump: &Dump, file: String) -> SourceReport {
        SourceReport {
            file,
            container: dump.container.clone(),
            vmcoreinfo_kernel: dump.vmcoreinfo_value("OSRELEASE").map(String::from),
            vmcoreinfo_crash_time: dump.vmcoreinfo_value("CRASHTIME").map(String::from),
            warnings: dump.warnings.clone(),
        }
    }
}

/// A recovered region.
#[derive(Clone, Debug, Serialize)]
pub struct RegionReport {
    /// Its place among the input's regions, in `crashring info` order.
    pub index: usize,
    /// Of its first byte, as `0x` hex.
    pub physical_address: String,
    pub size: u64,
    pub kernel_release: String,
    pub hostname: String,
    /// 32 hex digits.
    pub boot_id: String,
    pub generation: u64,
    /// CPUs the region's header was made for.
    pub cpus: u16,
    pub clock: ClockReport,
    /// The generation's state (`running`, `crashed`, ...), or
    /// `unreadable`.
    pub state: &'static str,
    pub crash: Option<CrashReport>,
    /// A restart, halt or power-off asked for with a reason; absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<ShutdownReport>,
    /// The crash's (or the reasoned shutdown's) signature, which crashes
    /// of one cause share ([`super::signature`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// Whether anything beyond what a flight recorder loses by design was
    /// lost ([`crate::recover::Recovered::damaged`]).
    pub damaged: bool,
    pub diagnostics: Vec<String>,
    /// What the dump lacks of the region, one sentence each.
    pub holes: Vec<String>,
    pub streams: Vec<StreamReport>,
    /// Events recovered, kernel streams: a user stream's figures are its
    /// writer's claim, in `user_streams` and its own `streams` entry.
    pub recovered: usize,
    /// Events lost, kernel streams (a lower bound unless `lost_exact`).
    pub lost: u64,
    pub lost_exact: bool,
    /// What the user streams claim, summed; absent without user streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_streams: Option<TallyReport>,
}

/// Figures summed over some streams.
#[derive(Clone, Debug, Serialize)]
pub struct TallyReport {
    pub streams: usize,
    pub recovered: usize,
    pub lost: u64,
    pub lost_exact: bool,
}

impl From<Tally> for TallyReport {
    fn from(t: Tally) -> TallyReport {
        TallyReport {
            streams: t.streams,
            recovered: t.events,
            lost: t.lost,
            lost_exact: !t.lost_at_least,
        }
    }
}

/// The region's clock: CLOCK_MONOTONIC, and wall-clock time by offsets.
#[derive(Clone, Debug, Serialize)]
pub struct ClockReport {
    pub domain: &'static str,
    pub wall_offset_ns: i64,
    pub created_ns: u64,
    pub created_utc: Option<String>,
    /// Only when the wall clock was stepped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// Steps older than the newest the clock keeps, not used (only when
    /// some are).
    #[serde(skip_serializing_if = "is_zero")]
    pub steps_ignored: usize,
    /// With steps ignored, the offset the newest of them set: in effect
    /// before the first of `steps`, in place of `wall_offset_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_before_steps_ns: Option<i64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A wall-clock step a `clock` event recorded.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub ns: u64,
    pub wall_offset_ns: i64,
    pub utc: Option<String>,
}

/// The crash the region's state records.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub reason: &'static str,
    pub cpu: u32,
    /// On the region's clock.
    pub time_ns: u64,
    /// With the wall-clock offset in effect at the crash; null without one.
    pub time_utc: Option<String>,
    pub message: String,
    /// The hardware error that brought the kernel down, in words: a
    /// machine check as the panic path read it from the banks, or the
    /// page a memory failure panicked on; absent for any other crash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_error: Option<String>,
}

/// The shutdown asked for that the region's state records.
#[derive(Clone, Debug, Serialize)]
pub struct ShutdownReport {
    /// The reason given: its first 35 bytes (the whole is in the trace's
    /// `shutdown` event).
    pub reason: String,
    /// Whether the machine then went down cleanly; false: it was reset on
    /// its way down.
    pub completed: bool,
    /// When the reason was given, on the region's clock.
    pub time_ns: u64,
    pub time_utc: Option<String>,
}

/// One stream of the region.
#[derive(Clone, Debug, Serialize)]
pub struct StreamReport {
    pub index: u16,
    pub label: String,
    /// `kernel` (a CPU's stream) or `user`.
    pub kind: &'static str,
    /// Kernel streams only.
    pub cpu: Option<u16>,
    /// Kernel streams only: the nesting lane (0 outside any other write).
    pub lane: Option<u8>,
    /// User streams whose writer's pid is known.
    pub pid: Option<u32>,
    /// The writer's user, with its pid.
    pub uid: Option<u32>,
    pub recovered: usize,
    pub lost: u64,
    /// False when some count is a lower bound (the stream's end is unknown).
    pub lost_exact: bool,
    /// Keyed by [`LossKind::name`].
    pub lost_by_reason: BTreeMap<&'static str, u64>,
    pub oldest_ns: Option<u64>,
    pub newest_ns: Option<u64>,
}

/// A region's time as wall-clock time, with the offset in effect at `ts`
/// (the header's, or a later `clock` event's), when it is known (not 0).
pub fn wall(ts: u64, clock: &WallClock) -> Option<i128> {
    (clock.offset_at(ts) != 0).then(|| clock.wall_at(ts))
}

/// Nanoseconds since the Unix epoch as UTC, `2026-11-22T10:11:12.123456789Z`.
pub fn utc(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by
    // 400-year eras of 146097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The nanoseconds since the Unix epoch that [`utc`] wrote as `text`;
/// `None` for any other text.
pub fn parse_utc(text: &str) -> Option<i128> {
    let b = text.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd.dddddddddZ";
    let fits = b.len() == shape.len()
        && b.iter().zip(shape).all(|(&c, &s)| match s {
            b'd' => c.is_ascii_digit(),
            _ => c == s,
        });
    if !fits {
        return None;
    }
    let n = |r: std::ops::Range<usize>| text[r].parse::<i128>().ok();
    let (year, month, day) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hour, minute, second, nanos) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..29)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    // Days since 1970-01-01 from the civil date, the inverse of utc()'s.
    let y = year - i128::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ns = ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1_000_000_000) + nanos;
    // A day past the month's end (02-30) is refused, not carried over.
    (utc(ns) == text).then_some(ns)
}

impl RegionReport {
    /// Describes `view`, whose wall clock is `wall` (a bundle's redacted
    /// trace keeps the unredacted trace's) and whose dump lacks `holes`.
    pub fn of(
        view: &RegionView,
        wall_clock: &WallClock,
        damaged: bool,
        holes: &[impl Display],
    ) -> RegionReport {
        let (r, t) = (view.region, view.trace);
        let h = &r.header;
        let when = |ts: u64| wall(ts, wall_clock).map(utc);
        let crash = match &r.state {
            Ok(s) if s.is_crash() => Some(CrashReport {
                reason: reason_name(s.reason),
                cpu: s.crash_cpu,
                time_ns: s.crash_ns,
                time_utc: when(s.crash_ns),
                message: s.message.clone(),
                hardware_error: ras::fatal_hardware_error(r, t),
            }),
            _ => None,
        };
        let shutdown = r.state.as_ref().ok().and_then(|s| {
            s.shutdown_reason().map(|why| ShutdownReport {
                reason: why.to_string(),
                completed: s.state == STATE_CLEAN,
                time_ns: s.crash_ns,
                time_utc: when(s.crash_ns),
            })
        });
        let steps = wall_clock
            .steps()
            .iter()
            .map(|s| StepReport {
                ns: s.ts,
                wall_offset_ns: s.wall_offset_ns,
                utc: when(s.ts),
            })
            .collect();
        let (kernel, user) = (view.kernel_tally(), view.user_tally());
        RegionReport {
            index: view.index,
            physical_address: format!("{:#x}", view.addr),
            size: h.region_size,
            kernel_release: h.kernel_release.clone(),
            hostname: h.hostname.clone(),
            boot_id: h.boot_id.iter().map(|b| format!("{b:02x}")).collect(),
            generation: h.generation,
            cpus: h.cpu_count,
            clock: ClockReport {
                domain: "CLOCK_MONOTONIC",
                wall_offset_ns: h.wall_offset_ns,
                created_ns: h.created_ns,
                created_utc: when(h.created_ns),
                steps,
                steps_ignored: wall_clock.ignored_steps(),
                offset_before_steps_ns: (wall_clock.ignored_steps() > 0)
                    .then(|| wall_clock.base_ns()),
            },
            state: r.state.as_ref().map_or("unreadable", |s| s.state_name()),
            crash,
            shutdown,
            signature: signature::of(r, t),
            damaged,
            diagnostics: t.diagnostics.iter().map(ToString::to_string).collect(),
            holes: holes.iter().map(ToString::to_string).collect(),
            streams: view.streams().map(|s| StreamReport::of(&s)).collect(),
            recovered: kernel.events,
            lost: kernel.lost,
            lost_exact: !kernel.lost_at_least,
            user_streams: (user.streams > 0).then(|| user.into()),
        }
    }
}

impl StreamReport {
    fn of(view: &StreamView) -> StreamReport {
        let (s, info) = (view.pages, view.info());
        let kernel = info.is_kernel();
        StreamReport {
            index: info.index,
            label: info.label(),
            kind: if kernel { "kernel" } else { "user" },
            cpu: kernel.then_some(info.cpu),
            lane: kernel.then_some(info.lane),
            pid: (!kernel && info.pid != 0).then_some(info.pid),
            uid: (!kernel && info.pid != 0).then_some(info.uid),
            recovered: view.event_count(),
            lost: s.lost_events(),
            lost_exact: s.lost_exact(),
            lost_by_reason: LossKind::ALL
                .iter()
                .map(|&k| (k.name(), s.lost(k)))
                .collect(),
            oldest_ns: view.first_event().map(|e| e.ts),
            newest_ns: view.last_event().map(|e| e.ts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_utc, utc};

    #[test]
    fn utc_matches_known_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(
            utc(1_795_350_896_500_000_000),
            "2026-11-22T12:34:56.500000000Z"
        );
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn parse_utc_reads_back_what_utc_wrote() {
        for ns in [
            0,
            -1,
            951_782_400_000_000_001,
            1_795_350_896_500_000_000,
            4_102_444_799_999_999_999,
        ] {
            assert_eq!(parse_utc(&utc(ns)), Some(ns), "{}", utc(ns));
        }
        for bad in [
            "",
            "2026-02-30T00:00:00.000000000Z",
            "2026-11-22T24:00:00.000000000Z",
            "2026-11-22 12:34:56.500000000Z",
            "2026-11-22T12:34:56Z",
            "+026-11-22T12:34:56.500000000Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
