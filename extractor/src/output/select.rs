//! Which merged items `crashring extract` prints: `--cpu`, `--since`,
//! `--until`, `--type`.

use super::view::{RegionView, StreamView};
use pstore_ring::layout::STREAM_KERNEL_CPU;
use pstore_ring::merge::Item;
use pstore_ring::read::Region;

/// A filter over merged items. Losses pass the CPU and time filters like
/// events but are never filtered by type: a loss may have held any type.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub cpu: Option<u16>,
    pub since_ns: Option<u64>,
    pub until_ns: Option<u64>,
    pub types: Vec<String>,
}

impl Selection {
    /// The streams `--cpu` leaves, for writers that go stream by stream.
    pub fn streams<'r, 'a>(&self, view: &RegionView<'r, 'a>) -> Vec<StreamView<'r, 'a>> {
        view.streams()
            .filter(|st| {
                let info = st.info();
                self.cpu
                    .is_none_or(|c| info.kind == STREAM_KERNEL_CPU && info.cpu == c)
            })
            .collect()
    }

    /// Whether every item is admitted, so none needs asking.
    pub fn admits_all(&self) -> bool {
        self.cpu.is_none()
            && self.since_ns.is_none()
            && self.until_ns.is_none()
            && self.types.is_empty()
    }

    pub fn admits(&self, item: &Item<'_, '_>, region: &Region<'_>) -> bool {
        let info = region.streams.iter().find(|s| s.index == item.stream());
        if let Some(cpu) = self.cpu {
            if !info.is_some_and(|i| i.kind == STREAM_KERNEL_CPU && i.cpu == cpu) {
                return false;
            }
        }
        let ts = match item {
            Item::Event(e) => e.ts,
            Item::Loss(l) => l.before_ts.or(l.after_ts).unwrap_or(0),
        };
        if self.since_ns.is_some_and(|t| ts < t) || self.until_ns.is_some_and(|t| ts > t) {
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
    use super::parse_time;

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
