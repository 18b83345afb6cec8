//! Which merged items `crashring extract` prints: `--cpu`, `--stream`,
//! `--since`, `--until`, `--type`.

use super::view::{RegionView, StreamView};
use pstore_ring::merge::Item;
use pstore_ring::read::{Region, StreamInfo, USER_LABEL_PREFIX};

/// A filter over merged items. Losses pass the stream and time filters
/// like events but are never filtered by type: a loss may have held any
/// type.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// With `streams`, the streams kept: each names some; with neither,
    /// every stream is kept.
    pub cpu: Option<u16>,
    /// Stream labels: a kernel stream's (`cpu3`, `cpu3.lane1`), or a user
    /// stream's, in the user namespace: `user:NAME` (`user:weston` also
    /// keeps `weston.0`, `weston.1`, … of a program with several; NAME as
    /// the label escapes it, or as the stream names itself). A name
    /// without `user:` never selects a user stream, so `cpu0` is always
    /// the kernel's CPU 0.
    pub streams: Vec<String>,
    pub since_ns: Option<u64>,
    pub until_ns: Option<u64>,
    pub types: Vec<String>,
}

impl Selection {
    /// The streams `--cpu` and `--stream` leave, for writers that go
    /// stream by stream: of those the view shows
    /// ([`RegionView::shown_streams`]), as an empty stream has nothing
    /// for a stream file to hold.
    pub fn streams<'r, 'a>(&self, view: &RegionView<'r, 'a>) -> Vec<StreamView<'r, 'a>> {
        view.shown_streams()
            .filter(|st| self.keeps(st.info()))
            .collect()
    }

    /// Whether it keeps every stream (it names none, nor a CPU).
    pub(crate) fn keeps_every_stream(&self) -> bool {
        self.cpu.is_none() && self.streams.is_empty()
    }

    pub(crate) fn keeps(&self, info: &StreamInfo) -> bool {
        if self.keeps_every_stream() {
            return true;
        }
        let kernel = info.is_kernel();
        let cpu = self.cpu.is_some_and(|c| kernel && info.cpu == c);
        let label = info.label();
        let named = self.streams.iter().any(|n| {
            if *n == label {
                return true;
            }
            let Some(user) = n.strip_prefix(USER_LABEL_PREFIX) else {
                return false;
            };
            !kernel && (user == info.name || user == info.program() || *n == info.program_label())
        });
        cpu || named
    }

    /// Whether every item is admitted, so none needs asking.
    pub fn admits_all(&self) -> bool {
        self.cpu.is_none()
            && self.streams.is_empty()
            && self.since_ns.is_none()
            && self.until_ns.is_none()
            && self.types.is_empty()
    }

    pub fn admits(&self, item: &Item<'_, '_>, region: &Region<'_>) -> bool {
        let info = region.streams.iter().find(|s| s.index == item.stream());
        if !info.map_or(self.cpu.is_none() && self.streams.is_empty(), |i| {
            self.keeps(i)
        }) {
            return false;
        }
        if !self.admits_time(item.time()) {
            return false;
        }
        match item {
            Item::Event(e) if !self.types.is_empty() => {
                let name = region.schema.get(e.type_id).map(|t| t.name.as_str());
                name.is_some_and(|n| self.types.iter().any(|t| t == n))
            }
            _ => true,
        }
    }
}

impl Selection {
    fn admits_time(&self, ts: u64) -> bool {
        !(self.since_ns.is_some_and(|t| ts < t) || self.until_ns.is_some_and(|t| ts > t))
    }

    /// Whether a line of a log the kernel kept itself, placed at `ts`, is
    /// admitted: a selection of streams or CPUs leaves them out, one of
    /// types keeps them only when it names `log`.
    pub fn admits_log_line(&self, ts: u64) -> bool {
        self.cpu.is_none()
            && self.streams.is_empty()
            && (self.types.is_empty() || self.types.iter().any(|t| t == LOG_TYPE))
            && self.admits_time(ts)
    }
}

/// The `--type` that names the lines of the kernel's own logs.
pub const LOG_TYPE: &str = "log";

/// Parses a time on the region's clock: seconds with an optional fraction
/// (`12.5`), or an integer with a unit (`1500ms`, `20us`, `7ns`, `3s`).
pub fn parse_time(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let units: [(&str, u64); 4] = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ];
    for (suffix, scale) in units {
        if let Some(n) = t.strip_suffix(suffix) {
            if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() {
                return n
                    .parse::<u64>()
                    .ok()
                    .and_then(|v| v.checked_mul(scale))
                    .ok_or_else(|| format!("`{text}` is out of range"));
            }
        }
    }
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 9 {
        return Err(format!(
            "`{text}` is not a time: use seconds (12.5) or a unit (1500ms, 20us, 7ns)"
        ));
    }
    let s: u64 = whole
        .parse()
        .map_err(|_| format!("`{text}` is out of range"))?;
    let ns: u64 = format!("{frac:0<9}").parse().unwrap_or(0);
    s.checked_mul(1_000_000_000)
        .and_then(|v| v.checked_add(ns))
        .ok_or_else(|| format!("`{text}` is out of range"))
}

#[cfg(test)]
mod tests {
    use super::{parse_time, Selection};
    use pstore_ring::layout::{STREAM_KERNEL_CPU, STREAM_USER};
    use pstore_ring::read::StreamInfo;

    fn info(index: u16, kind: u16, cpu: u16, lane: u8, name: &str) -> StreamInfo {
        StreamInfo {
            index,
            kind,
            cpu,
            lane,
            page_count: 2,
            pages_offset: 0,
            name: name.into(),
            pid: 7,
            uid: 1000,
            keeps_tails: true,
        }
    }

    #[test]
    fn streams_are_chosen_by_cpu_program_or_label() {
        let all = [
            info(0, STREAM_KERNEL_CPU, 0, 0, ""),
            info(1, STREAM_KERNEL_CPU, 1, 0, ""),
            info(2, STREAM_KERNEL_CPU, 1, 1, ""),
            info(3, STREAM_USER, u16::MAX, 0, "weston.0"),
            info(4, STREAM_USER, u16::MAX, 0, "weston.1"),
            info(5, STREAM_USER, u16::MAX, 0, "org.gnome.Shell"),
            info(6, STREAM_USER, u16::MAX, 0, "westonx"),
            info(7, STREAM_USER, u16::MAX, 0, "cpu0"),
            info(8, STREAM_USER, u16::MAX, 0, "my app\n"),
        ];
        let kept = |cpu: Option<u16>, streams: &[&str]| {
            let sel = Selection {
                cpu,
                streams: streams.iter().map(|s| s.to_string()).collect(),
                ..Selection::default()
            };
            all.iter()
                .filter(|i| sel.keeps(i))
                .map(|i| i.index)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(None, &[]), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(kept(Some(1), &[]), [1, 2]);
        assert_eq!(kept(None, &["user:weston"]), [3, 4]);
        assert_eq!(kept(None, &["user:weston.1"]), [4]);
        assert_eq!(kept(None, &["user:org.gnome.Shell"]), [5]);
        assert_eq!(kept(None, &["user:org.gnome"]), Vec::<u16>::new());
        assert_eq!(kept(None, &["cpu1.lane1", "user:westonx"]), [2, 6]);
        assert_eq!(kept(Some(0), &["user:weston"]), [0, 3, 4]);
        // A user stream's name alone is no label: only the kernel's CPU 0
        // is `cpu0`, and the user stream so named is `user:cpu0`.
        assert_eq!(kept(None, &["weston"]), Vec::<u16>::new());
        assert_eq!(kept(None, &["cpu0"]), [0]);
        assert_eq!(kept(None, &["user:cpu0"]), [7]);
        assert_eq!(kept(Some(0), &[]), [0]);
        // As the label escapes the name, or as the stream names itself.
        assert_eq!(kept(None, &["user:my\\x20app\\x0a"]), [8]);
        assert_eq!(kept(None, &["user:my app\n"]), [8]);
    }

    #[test]
    fn times_read_as_seconds_or_with_units() {
        assert_eq!(parse_time("12.5"), Ok(12_500_000_000));
        assert_eq!(parse_time("0.000000001"), Ok(1));
        assert_eq!(parse_time("3"), Ok(3_000_000_000));
        assert_eq!(parse_time("1500ms"), Ok(1_500_000_000));
        assert_eq!(parse_time("20us"), Ok(20_000));
        assert_eq!(parse_time("7ns"), Ok(7));
        assert!(parse_time("1.0000000001").is_err());
        assert!(parse_time("-1").is_err());
        assert!(parse_time("99999999999999999999s").is_err());
        assert!(parse_time("soon").is_err());
    }
}
