//! How `arm` has the kernel set the region aside at every boot: a fixed
//! range by `memmap=SIZE$ADDR`, placed from `/proc/iomem` (x86 only), or
//! `reserve_mem=SIZE:ALIGN:crashring`, a range of that size the kernel
//! places itself early in every boot (Linux 6.11 and later, any
//! architecture: arm64's way, which has no `memmap=`). The module finds
//! the latter by its label; booted the same way, the kernel puts it at the
//! same address, and `status` says when it did not.

use crate::iomem::{self, Placement};
use std::fmt;

/// The label of arm's `reserve_mem=` range, and the module's
/// `reserve_mem=` parameter.
pub const LABEL: &str = "crashring";

/// The first release with `reserve_mem=`.
pub const RESERVE_MEM_SINCE: (u32, u32) = (6, 11);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// `memmap=SIZE$ADDR` and the module's `region=SIZE@ADDR`.
    Memmap(Placement),
    /// `reserve_mem=SIZE:2M:crashring` and the module's
    /// `reserve_mem=crashring`.
    ReserveMem { size: u64 },
}

impl Reservation {
    pub fn size(&self) -> u64 {
        match self {
            Reservation::Memmap(p) => p.size,
            Reservation::ReserveMem { size } => *size,
        }
    }

    /// The fixed range, where there is one.
    pub fn placement(&self) -> Option<Placement> {
        match self {
            Reservation::Memmap(p) => Some(*p),
            Reservation::ReserveMem { .. } => None,
        }
    }

    /// The kernel command line's word, as the kernel reads it.
    pub fn kernel_word(&self) -> String {
        match self {
            Reservation::Memmap(p) => {
                format!("memmap={}${:#x}", iomem::size_text(p.size), p.start)
            }
            Reservation::ReserveMem { size } => format!(
                "reserve_mem={}:{}:{LABEL}",
                iomem::size_text(*size),
                iomem::size_text(iomem::ALIGN)
            ),
        }
    }

    /// The module's parameter that names the range.
    pub fn module_parameter(&self) -> String {
        match self {
            Reservation::Memmap(p) => format!("region={p}"),
            Reservation::ReserveMem { .. } => format!("reserve_mem={LABEL}"),
        }
    }

    /// The record's line ([`crate::loader::RECORD`]): `range=SIZE@ADDR`
    /// (what every record said before `reserve_mem=`) or
    /// `reserve-mem=SIZE`.
    pub fn record_line(&self) -> String {
        match self {
            Reservation::Memmap(p) => format!("range={p}"),
            Reservation::ReserveMem { size } => {
                format!("reserve-mem={}", iomem::size_text(*size))
            }
        }
    }

    /// A record's text back, from its `key=value` lines.
    pub fn from_record<'t>(value: impl Fn(&str) -> Option<&'t str>) -> Option<Reservation> {
        if let Some(range) = value("range") {
            let (size, start) = range.split_once('@')?;
            let placement = Placement {
                size: iomem::parse_size(size)?,
                start: iomem::parse_size(start)?,
            };
            // One past the end of memory is no record arm wrote.
            return placement.fits().then_some(Reservation::Memmap(placement));
        }
        let size = iomem::parse_size(value("reserve-mem")?)?;
        Some(Reservation::ReserveMem { size })
    }
}

impl fmt::Display for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reservation::Memmap(p) => write!(f, "memmap {p}"),
            Reservation::ReserveMem { size } => write!(
                f,
                "reserve_mem {} (label {LABEL}, placed by the kernel at every boot)",
                iomem::size_text(*size)
            ),
        }
    }
}

/// Whether `release` (`6.12.48+deb12-arm64`) is 6.11 or later.
pub fn has_reserve_mem(release: &str) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= RESERVE_MEM_SINCE,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_words_and_its_record() {
        let memmap = Reservation::Memmap(Placement {
            start: 0x2_2c00_0000,
            size: 64 << 20,
        });
        assert_eq!(memmap.kernel_word(), "memmap=64M$0x22c000000");
        assert_eq!(memmap.module_parameter(), "region=64M@0x22c000000");
        assert_eq!(memmap.record_line(), "range=64M@0x22c000000");
        let reserve = Reservation::ReserveMem { size: 64 << 20 };
        assert_eq!(reserve.kernel_word(), "reserve_mem=64M:2M:crashring");
        assert_eq!(reserve.module_parameter(), "reserve_mem=crashring");
        assert_eq!(reserve.record_line(), "reserve-mem=64M");
        for r in [memmap, reserve] {
            let line = r.record_line();
            let (key, value) = line.split_once('=').unwrap();
            let read = Reservation::from_record(|k| (k == key).then_some(value));
            assert_eq!(read, Some(r));
        }
        assert_eq!(Reservation::from_record(|_| None), None);
        // Past the end of memory: no record arm wrote.
        let wraps = |k: &str| (k == "range").then_some("4M@0xffffffffffe00000");
        assert_eq!(Reservation::from_record(wraps), None);
    }

    #[test]
    fn reserve_mem_came_in_6_11() {
        assert!(has_reserve_mem("6.12.48+deb12-arm64"));
        assert!(has_reserve_mem("6.11.0"));
        assert!(has_reserve_mem("7.3.4+deb13-arm64"));
        assert!(!has_reserve_mem("6.1.0-41-arm64"));
        assert!(!has_reserve_mem("5.19.0"));
        assert!(!has_reserve_mem("garbage"));
    }
}
