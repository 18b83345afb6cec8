//! The ramoops area's parameters ([`Layout`], parsed as `--ramoops` takes
//! them) and its zones planned from them as `ramoops_probe()` and
//! `ramoops_init_przs()` plan them, in either order ([`Order`]).

use super::{DEFAULT_ZONE_SIZE, ECC_BLOCK, HEADER_SIZE};
use crate::foreign::reed_solomon::Codec;
use crate::phys::PhysAddr;
use std::str::FromStr;

/// The ramoops area and its parameters, as the kernel was given them
/// (`ramoops.mem_address=`, `mem_size=`, `record_size=`, `console_size=`,
/// `ftrace_size=`, `pmsg_size=`, `ecc=`; `/sys/module/ramoops/parameters/`
/// shows them on a running box).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub base: PhysAddr,
    pub size: u64,
    pub record_size: u64,
    pub console_size: u64,
    pub ftrace_size: u64,
    pub pmsg_size: u64,
    /// How many zones the ftrace part is cut into: the writer's CPU count
    /// when ramoops was set up by module parameters, else 1.
    pub ftrace_zones: u32,
    /// Bytes of Reed-Solomon parity per 128-byte block (`ramoops.ecc=`;
    /// 1 means 16), 0 without.
    pub ecc_size: u32,
}

/// Why a [`Layout`] could not be parsed or planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayoutError {
    #[error("`{0}` is not ADDR:SIZE[,record=N][,console=N][,ftrace=N][,pmsg=N][,cpus=N][,ecc=N]")]
    Syntax(String),
    #[error("`{0}`: not a number (decimal, 0x hex, optional K/M/G)")]
    Number(String),
    #[error("unknown ramoops parameter `{0}`")]
    Unknown(String),
    #[error("the console, ftrace and pmsg zones ({0} bytes) do not fit in the area ({1} bytes)")]
    TooSmall(u64, u64),
    #[error("the area ends past the top of the address space")]
    Overflow,
    #[error("ecc={0}: the parity would not leave room for data in a {1}-byte zone")]
    Ecc(u32, u64),
    #[error("the {0} part ({1} bytes) cut into {2} zones leaves them no bytes")]
    NoZoneSize(&'static str, u64, u64),
}

impl FromStr for Layout {
    type Err = LayoutError;

    /// `ADDR:SIZE` and, after commas, `record=`, `console=`, `ftrace=`,
    /// `pmsg=` (bytes; ramoops' defaults when left out), `cpus=` (the
    /// ftrace zone count) and `ecc=`. Sizes are rounded down to a power of
    /// two, as `ramoops_probe()` rounds them.
    fn from_str(text: &str) -> Result<Layout, LayoutError> {
        let number = |s: &str| {
            kexec_hooks::iomem::parse_size(s).ok_or_else(|| LayoutError::Number(s.to_string()))
        };
        let mut parts = text.split(',');
        let area = parts.next().unwrap_or_default();
        let (addr, size) = area
            .split_once(':')
            .ok_or_else(|| LayoutError::Syntax(text.to_string()))?;
        let mut layout = Layout {
            base: PhysAddr(number(addr)?),
            size: number(size)?,
            record_size: DEFAULT_ZONE_SIZE,
            console_size: DEFAULT_ZONE_SIZE,
            ftrace_size: DEFAULT_ZONE_SIZE,
            pmsg_size: DEFAULT_ZONE_SIZE,
            ftrace_zones: 1,
            ecc_size: 0,
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| LayoutError::Syntax(text.to_string()))?;
            let value = number(value)?;
            let small = |v: u64| u32::try_from(v).map_err(|_| LayoutError::Number(part.into()));
            match key {
                "record" => layout.record_size = pow2_floor(value),
                "console" => layout.console_size = pow2_floor(value),
                "ftrace" => layout.ftrace_size = pow2_floor(value),
                "pmsg" => layout.pmsg_size = pow2_floor(value),
                "cpus" => layout.ftrace_zones = small(value)?.max(1),
                "ecc" => layout.ecc_size = if value == 1 { 16 } else { small(value)? },
                _ => return Err(LayoutError::Unknown(key.to_string())),
            }
        }
        layout.zones(Order::PmsgFirst)?;
        Ok(layout)
    }
}

fn pow2_floor(v: u64) -> u64 {
    if v == 0 {
        0
    } else {
        1 << (63 - v.leading_zeros())
    }
}

/// What a zone holds, by its place in the area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneKind {
    Dmesg,
    Console,
    Ftrace,
    Pmsg,
}

impl ZoneKind {
    /// pstore's name for the kind, as in `/sys/fs/pstore` file names.
    pub fn name(self) -> &'static str {
        match self {
            ZoneKind::Dmesg => "dmesg",
            ZoneKind::Console => "console",
            ZoneKind::Ftrace => "ftrace",
            ZoneKind::Pmsg => "pmsg",
        }
    }
}

/// One zone as planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZonePlan {
    pub kind: ZoneKind,
    /// Its number among the zones of its kind.
    pub index: u32,
    pub addr: PhysAddr,
    pub size: u64,
}

/// Where a kernel puts the pmsg zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Before the ftrace zones, at a place that does not depend on the CPU
    /// count (current kernels).
    PmsgFirst,
    /// Last, after the ftrace zones (older kernels).
    FtraceFirst,
}

impl Layout {
    /// The zones in a kernel's order, where its `ramoops_probe()` puts them.
    pub fn zones(&self, order: Order) -> Result<Vec<ZonePlan>, LayoutError> {
        let others = self
            .console_size
            .checked_add(self.ftrace_size)
            .and_then(|s| s.checked_add(self.pmsg_size))
            .filter(|&s| s <= self.size)
            .ok_or(LayoutError::TooSmall(
                self.console_size
                    .saturating_add(self.ftrace_size)
                    .saturating_add(self.pmsg_size),
                self.size,
            ))?;
        self.base
            .checked_add(self.size)
            .ok_or(LayoutError::Overflow)?;
        let mut zones = Vec::new();
        let mut at = self.base;
        let mut add = |kind, total: u64, count: u64, zones: &mut Vec<ZonePlan>| {
            if total == 0 || count == 0 {
                return Ok(());
            }
            let mut size = total / count;
            // The zones cut from a part (`ramoops_init_przs()`: dmesg and
            // ftrace) are rounded down to an even size since 6.3 ("Fix
            // crash when setting number of cpus to an odd number"), which
            // keeps the next zone's header aligned; none left fails the
            // probe. The single zones (`ramoops_init_prz()`) are not.
            if matches!(kind, ZoneKind::Dmesg | ZoneKind::Ftrace) {
                size &= !1;
                if size == 0 {
                    return Err(LayoutError::NoZoneSize(kind.name(), total, count));
                }
            }
            for index in 0..count {
                zones.push(ZonePlan {
                    kind,
                    index: index as u32,
                    addr: at,
                    size,
                });
                at = at + size;
            }
            Ok(())
        };
        let dump = self.size - others;
        let records = dump.checked_div(self.record_size).unwrap_or(0);
        add(ZoneKind::Dmesg, dump, records, &mut zones)?;
        add(ZoneKind::Console, self.console_size, 1, &mut zones)?;
        if order == Order::PmsgFirst {
            add(ZoneKind::Pmsg, self.pmsg_size, 1, &mut zones)?;
        }
        add(
            ZoneKind::Ftrace,
            self.ftrace_size,
            self.ftrace_zones.into(),
            &mut zones,
        )?;
        if order == Order::FtraceFirst {
            add(ZoneKind::Pmsg, self.pmsg_size, 1, &mut zones)?;
        }
        for z in &zones {
            self.buffer_size(z.size)
                .ok_or(LayoutError::Ecc(self.ecc_size, z.size))?;
        }
        Ok(zones)
    }

    /// The data bytes of a zone of `size` bytes, after the header and the
    /// parity (`persistent_ram_init_ecc()`).
    fn buffer_size(&self, size: u64) -> Option<u64> {
        self.geometry(size).map(|(buffer, _)| buffer)
    }

    /// A zone's data bytes and its count of parity blocks before the
    /// header's (0 without ECC): the parity follows the data, block by
    /// block, then the header's.
    pub(super) fn geometry(&self, size: u64) -> Option<(u64, u64)> {
        let buffer = size.checked_sub(HEADER_SIZE)?;
        if self.ecc_size == 0 {
            return Some((buffer, 0));
        }
        let ecc = u64::from(self.ecc_size);
        let blocks = buffer.checked_sub(ecc)?.div_ceil(ECC_BLOCK + ecc);
        let total = (blocks + 1) * ecc;
        (total < buffer).then(|| (buffer - total, blocks))
    }

    /// The code the zones' parity is in, with ECC.
    pub(super) fn codec(&self) -> Option<Codec> {
        Codec::new(self.ecc_size as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1000_0000;

    /// The seed's layout, moved to BASE.
    fn layout() -> Layout {
        super::super::ramoops_area::LAYOUT
            .replacen("0:", &format!("{BASE:#x}:"), 1)
            .parse()
            .unwrap()
    }

    #[test]
    fn the_plan_follows_ramoops_probe_in_either_order() {
        let plan = |order| -> Vec<_> {
            layout()
                .zones(order)
                .unwrap()
                .iter()
                .map(|z| (z.kind, z.index, z.addr.0 - BASE, z.size))
                .collect()
        };
        let head = [
            (ZoneKind::Dmesg, 0, 0, 0x4000),
            (ZoneKind::Dmesg, 1, 0x4000, 0x4000),
            (ZoneKind::Dmesg, 2, 0x8000, 0x4000),
            (ZoneKind::Console, 0, 0xc000, 0x2000),
        ];
        let current = [
            (ZoneKind::Pmsg, 0, 0xe000, 0x1000),
            (ZoneKind::Ftrace, 0, 0xf000, 0x800),
            (ZoneKind::Ftrace, 1, 0xf800, 0x800),
        ];
        let older = [
            (ZoneKind::Ftrace, 0, 0xe000, 0x800),
            (ZoneKind::Ftrace, 1, 0xe800, 0x800),
            (ZoneKind::Pmsg, 0, 0xf000, 0x1000),
        ];
        assert_eq!(plan(Order::PmsgFirst), [&head[..], &current].concat());
        assert_eq!(plan(Order::FtraceFirst), [&head[..], &older].concat());
        // A dmesg part that is no multiple of the record size is shared
        // out, as ramoops_init_przs() does (zone = part / count).
        let sizes = |layout: &str| -> Vec<_> {
            let l: Layout = layout.parse().unwrap();
            l.zones(Order::PmsgFirst)
                .unwrap()
                .iter()
                .map(|z| z.size)
                .collect()
        };
        let dmesg_only = ",record=4096,console=0,ftrace=0,pmsg=0";
        assert_eq!(sizes(&format!("0:20000{dmesg_only}")), [5000; 4]);
        // Zones cut from a part are rounded down to an even size
        // (ALIGN_DOWN(zone_sz, 2)), and each starts where the last ended.
        let ftrace: Vec<_> = "0:64K,record=16K,console=8K,ftrace=4K,pmsg=4K,cpus=3"
            .parse::<Layout>()
            .unwrap()
            .zones(Order::PmsgFirst)
            .unwrap()
            .iter()
            .filter(|z| z.kind == ZoneKind::Ftrace)
            .map(|z| (z.addr.0 - 0xf000, z.size))
            .collect();
        assert_eq!(ftrace, [(0, 1364), (1364, 1364), (2728, 1364)]);
        // 19999 bytes of dmesg in four: 4999 each, rounded to 4998.
        assert_eq!(sizes(&format!("0:19999{dmesg_only}")), [4998; 4]);
        // Sizes are rounded down to powers of two, as the kernel rounds them.
        let l: Layout = "0:1M,record=5000".parse().unwrap();
        assert_eq!(l.record_size, 4096);
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let err = |s: &str| s.parse::<Layout>().unwrap_err();
        assert_eq!(err("0x1000"), LayoutError::Syntax("0x1000".into()));
        assert_eq!(err("0:1M,speed=3"), LayoutError::Unknown("speed".into()));
        assert_eq!(err("0:x"), LayoutError::Number("x".into()));
        assert_eq!(err("0:8K"), LayoutError::TooSmall(12288, 8192));
        assert_eq!(
            err("0xffffffffffffff00:1M,console=0,ftrace=0,pmsg=0"),
            LayoutError::Overflow
        );
        assert_eq!(
            err("0:64,record=16,console=16,ftrace=16,pmsg=16,ecc=16"),
            LayoutError::Ecc(16, 16)
        );
        // More CPUs than ftrace bytes (or a zone of one byte) leaves zones
        // of none: ramoops_init_przs() fails the probe.
        assert_eq!(
            err("0:1M,ftrace=1K,cpus=1025"),
            LayoutError::NoZoneSize("ftrace", 1024, 1025)
        );
        assert_eq!(
            err("0:1M,ftrace=1K,cpus=1024"),
            LayoutError::NoZoneSize("ftrace", 1024, 1024)
        );
    }
}
