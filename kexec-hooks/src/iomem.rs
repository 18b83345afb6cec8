//! `/proc/iomem` and where in it a `memmap=` range can go.
//!
//! A `memmap=SIZE$ADDR` range stays put from boot to boot because the
//! kernel takes it out of RAM before anything else is placed: the
//! decompressor's KASLR avoids it, and memblock never hands it out. It
//! must lie inside RAM the firmware reports on every boot (a top-level
//! `System RAM` entry) and clear of what the running kernel has placed in
//! that RAM (its image, a crashkernel reservation: the entries nested
//! under it), so that arming does not depend on this boot's KASLR draw.

use std::fmt;
use std::ops::Range;

/// One line of `/proc/iomem`: an inclusive range, its name, and how deep
/// it is nested (two spaces per level).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    pub start: u64,
    /// Inclusive, as the file prints it.
    pub end: u64,
    pub name: String,
    pub depth: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IomemError {
    #[error("/proc/iomem line {line}: {what}: {text:?}")]
    Line {
        line: usize,
        what: &'static str,
        text: String,
    },
    #[error("/proc/iomem shows every address as 0: only root sees them")]
    Hidden,
    #[error("/proc/iomem lists no System RAM")]
    NoRam,
}

/// Parses `/proc/iomem`'s text.
pub fn parse(text: &str) -> Result<Vec<Resource>, IomemError> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |what| IomemError::Line {
            line: n + 1,
            what,
            text: raw.to_string(),
        };
        let body = raw.trim_start_matches(' ');
        let indent = raw.len() - body.len();
        let (range, name) = body.split_once(" : ").ok_or_else(|| bad("no \" : \""))?;
        let (start, end) = range.split_once('-').ok_or_else(|| bad("no range"))?;
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad("not hexadecimal"));
        let (start, end) = (hex(start)?, hex(end)?);
        if end < start {
            return Err(bad("ends before it starts"));
        }
        out.push(Resource {
            start,
            end,
            name: name.to_string(),
            depth: indent / 2,
        });
    }
    if !out.is_empty() && out.iter().all(|r| r.start == 0 && r.end == 0) {
        return Err(IomemError::Hidden);
    }
    Ok(out)
}

/// A `memmap=` range: `size` bytes from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub start: u64,
    pub size: u64,
}

impl Placement {
    /// Its addresses. [`place`] and a record ([`crate::reserve`]) never
    /// give one past the end of the address space; any other (the
    /// module's line, say) is cut off there rather than overflowing.
    pub fn range(&self) -> Range<u64> {
        self.start..self.start.saturating_add(self.size)
    }

    /// Whether it lies within the address space.
    pub fn fits(&self) -> bool {
        self.start.checked_add(self.size).is_some()
    }
}

/// The bytes of System RAM the firmware reports (top-level entries).
pub fn total_ram(resources: &[Resource]) -> u64 {
    resources
        .iter()
        .filter(|r| r.depth == 0 && r.name == "System RAM")
        .fold(0u64, |sum, r| {
            sum.saturating_add((r.end - r.start).saturating_add(1))
        })
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{:#x}", size_text(self.size), self.start)
    }
}

/// `size` as the kernel's memparse reads it: the largest unit that
/// divides it.
pub fn size_text(size: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (unit, suffix) in UNITS {
        if size >= unit && size.is_multiple_of(unit) {
            return format!("{}{suffix}", size / unit);
        }
    }
    size.to_string()
}

/// Ranges are aligned to 2 MiB (a huge page) and kept off the first 16 MiB,
/// which old DMA and the boot path use. On arm64, reserve_mem= at this
/// alignment also absorbs the page by which an EFI stub's allocations
/// above the range vary from boot to boot (`warm-reboot-arm64`).
pub const ALIGN: u64 = 2 << 20;
const LOW_LIMIT: u64 = 16 << 20;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlaceError {
    #[error(transparent)]
    Iomem(#[from] IomemError),
    #[error(
        "no room for {size} bytes: no System RAM range above 16 MiB holds {size} bytes, 2 MiB aligned, clear of what the kernel placed in it, of the 256 MiB below 2 GiB, 4 GiB and the top of RAM where firmware and boot loaders allocate, and of this boot's initrd and configured memmap= ranges (largest free stretch: {largest} bytes); try a smaller --size"
    )]
    NoRoom { size: u64, largest: u64 },
}

/// Firmware and boot loaders allocate top-down, from the top of RAM below
/// a limit, before the kernel has read its command line, so a `memmap=`
/// range there is theirs to overwrite at every boot:
/// - x86's boot protocol lets a BIOS boot loader put the initrd anywhere
///   below `initrd_addr_max` (2 GiB), and GRUB's BIOS loader and QEMU's
///   `-initrd` put it as high as they can: seen in a 2 GiB Debian guest,
///   whose 33 MiB initrd wiped the top half of a range at the top of its
///   RAM between a crash and the recovery;
/// - UEFI firmware (EDK2) keeps its boot-time allocations, which Linux
///   later sees as free RAM, below 4 GiB, from the top;
/// - the kernel's EFI stub loads the initrd through LoadFile2 (GRUB 2.12,
///   systemd-boot) below no limit: at the top of all RAM.
const TOP_DOWN_LIMITS: [u64; 3] = [2 << 30, 4 << 30, u64::MAX];
/// How far below each limit's top of RAM they reach: Debian's initrd is
/// 30-70 MiB, one with every firmware file 200.
const LOADER_WINDOW: u64 = 256 << 20;

/// The ranges firmware and boot loaders may take: the top
/// [`LOADER_WINDOW`] of System RAM below each of [`TOP_DOWN_LIMITS`].
fn loader_windows(resources: &[Resource]) -> Vec<Range<u64>> {
    TOP_DOWN_LIMITS
        .iter()
        .filter_map(|&limit| {
            let top = resources
                .iter()
                .filter(|r| r.depth == 0 && r.name == "System RAM" && r.start < limit)
                .map(|r| r.end.saturating_add(1).min(limit))
                .max()?;
            Some(top.saturating_sub(LOADER_WINDOW)..top)
        })
        .collect()
}

/// Where `size` bytes go: the highest 2 MiB-aligned stretch inside a
/// top-level System RAM entry, clear of every entry nested in it, of what
/// firmware and boot loaders take ([`loader_windows`]) and of `avoid`
/// (this boot's initrd, `memmap=` ranges configured for the next boot).
/// The highest that is left, because the kernel and its allocations fill
/// RAM from the bottom, so the top moves least between boots.
pub fn place(
    resources: &[Resource],
    size: u64,
    avoid: &[Range<u64>],
) -> Result<Placement, PlaceError> {
    let windows = loader_windows(resources);
    let mut best: Option<Placement> = None;
    let mut largest = 0;
    let mut saw_ram = false;
    for (i, ram) in resources.iter().enumerate() {
        if ram.depth != 0 || ram.name != "System RAM" {
            continue;
        }
        saw_ram = true;
        // What is nested in it: the entries after it, deeper than it.
        let taken: Vec<Range<u64>> = resources[i + 1..]
            .iter()
            .take_while(|r| r.depth > 0)
            .map(|r| r.start..r.end.saturating_add(1))
            .chain(windows.iter().cloned())
            .chain(avoid.iter().cloned())
            .collect();
        let mut free: Vec<Range<u64>> =
            std::iter::once(ram.start.max(LOW_LIMIT)..ram.end.saturating_add(1)).collect();
        for t in &taken {
            free = free
                .into_iter()
                .flat_map(|f| {
                    [f.start..t.start.min(f.end), t.end.max(f.start)..f.end]
                        .into_iter()
                        .filter(|r| r.start < r.end)
                })
                .collect();
        }
        for f in free {
            let top = f.end / ALIGN * ALIGN;
            // Checked: a --size near 2^64 passes the alignment check, and
            // a stretch at the very top of the address space has no
            // aligned start; either would wrap into a nonsense memmap=.
            let Some(start) = f.start.checked_next_multiple_of(ALIGN) else {
                continue;
            };
            largest = largest.max(top.saturating_sub(start));
            let Some(at) = top.checked_sub(size).filter(|&at| at >= start) else {
                continue;
            };
            if best.is_none_or(|b| at > b.start) {
                best = Some(Placement { start: at, size });
            }
        }
    }
    if !saw_ram {
        return Err(IomemError::NoRam.into());
    }
    best.ok_or(PlaceError::NoRoom { size, largest })
}

/// Parses a size or an address as the kernel's memparse does: a number
/// (decimal, or hex with 0x) and an optional K, M or G.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'K' | 'k') => (&t[..i], 10),
        (i, 'M' | 'm') => (&t[..i], 20),
        (i, 'G' | 'g') => (&t[..i], 30),
        (i, 'T' | 't') => (&t[..i], 40),
        (i, 'P' | 'p') => (&t[..i], 50),
        _ => (t, 0),
    };
    let n = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = include_str!("../tests/data/iomem-host");
    const QEMU: &str = include_str!("../tests/data/iomem-qemu");

    #[test]
    fn reads_nesting_and_ranges() {
        let r = parse(HOST).unwrap();
        let code = r.iter().find(|r| r.name == "Kernel code").unwrap();
        assert_eq!(
            (code.start, code.end, code.depth),
            (0x100_0000, 0x220_90c7, 1)
        );
        assert_eq!(r.iter().filter(|r| r.name == "System RAM").count(), 3);
    }

    #[test]
    fn places_below_the_top_of_the_highest_ram_clear_of_the_kernel() {
        // 256 MiB below the top of the highest RAM, where an EFI stub's
        // initrd goes.
        let host = place(&parse(HOST).unwrap(), 16 << 20, &[]).unwrap();
        assert_eq!(host.range(), 0x6_2f00_0000..0x6_3000_0000);
        // An 8 GiB QEMU guest whose KASLR put the kernel above 4 GiB.
        let qemu = place(&parse(QEMU).unwrap(), 64 << 20, &[]).unwrap();
        assert_eq!(qemu.range(), 0x2_2c00_0000..0x2_3000_0000);
    }

    #[test]
    fn never_overlaps_a_nested_entry_or_leaves_its_ram() {
        // 512 MiB of RAM at 4 GiB, its top 256 MiB the loaders'.
        let text = "00001000-0009fbff : System RAM\n\
                    100000000-11fffffff : System RAM\n\
                    \x20 106000000-107dfffff : Crash kernel\n\
                    \x20 101000000-101ffffff : Kernel code\n";
        let r = parse(text).unwrap();
        let p = place(&r, 16 << 20, &[]).unwrap();
        assert_eq!(p.range(), 0x1_0f00_0000..0x1_1000_0000);
        // This boot's initrd above the crashkernel: 2 MiB is left there;
        // below it, 16..32 MiB is the kernel's, so 32..96 MiB is the
        // highest room for 16 MiB.
        let initrd_range = 0x1_0800_0000..0x1_1000_0000;
        let initrd = std::slice::from_ref(&initrd_range);
        let p = place(&r, 16 << 20, initrd).unwrap();
        assert_eq!(p.range(), 0x1_0500_0000..0x1_0600_0000);
        assert_eq!(
            place(&r, 2 << 20, initrd).unwrap().range(),
            0x1_07e0_0000..0x1_0800_0000
        );
        assert_eq!(
            place(&r, 96 << 20, initrd),
            Err(PlaceError::NoRoom {
                size: 96 << 20,
                largest: 64 << 20
            })
        );
    }

    #[test]
    fn keeps_off_where_boot_loaders_put_the_initrd() {
        // The 2 GiB Debian guest: its initrd went to the top of its RAM.
        let text = "00001000-0009fbff : System RAM\n\
                    00100000-7ffdffff : System RAM\n\
                    \x20 2b000000-2c1fffff : Kernel code\n\
                    7ffe0000-7fffffff : Reserved\n";
        let p = place(&parse(text).unwrap(), 64 << 20, &[]).unwrap();
        assert_eq!(p.range(), 0x6be0_0000..0x6fe0_0000);
        assert!(p.range().end <= 0x7ffe_0000 - (256 << 20));
        // RAM up to 3 GiB: its top 256 MiB is below 4 GiB, where UEFI
        // firmware allocates.
        let text = "00100000-bffdffff : System RAM\n";
        let p = place(&parse(text).unwrap(), 64 << 20, &[]).unwrap();
        assert_eq!(p.range(), 0xabe0_0000..0xafe0_0000);
        // 8 GiB on UEFI: below 2 and 4 GiB and the top of all RAM.
        let text = "00100000-7fffffff : System RAM\n\
                    100000000-27fffffff : System RAM\n";
        let r = parse(text).unwrap();
        assert_eq!(
            loader_windows(&r),
            [
                0x7000_0000..0x8000_0000,
                0x7000_0000..0x8000_0000,
                0x2_7000_0000..0x2_8000_0000
            ]
        );
        let p = place(&r, 64 << 20, &[]).unwrap();
        assert_eq!(p.range(), 0x2_6c00_0000..0x2_7000_0000);
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        assert_eq!(
            parse("00000000-00000000 : System RAM\n00000000-00000000 : Reserved\n"),
            Err(IomemError::Hidden)
        );
        assert!(matches!(
            parse("00001000 : System RAM"),
            Err(IomemError::Line { line: 1, .. })
        ));
        assert_eq!(
            place(
                &parse("00000000-000fffff : Reserved\n").unwrap(),
                1 << 20,
                &[]
            ),
            Err(PlaceError::Iomem(IomemError::NoRam))
        );
    }

    /// A size near 2^64 (2 MiB aligned, so `--size` lets it through) is
    /// no room, never a range that wraps past the end of memory.
    #[test]
    fn a_size_beyond_the_address_space_is_no_room() {
        let r = parse(QEMU).unwrap();
        // The 2 MiB multiple nearest 2^64 (u64::MAX & !(ALIGN - 1)), 2^63.
        for size in [!(ALIGN - 1), 1 << 63] {
            assert!(
                matches!(place(&r, size, &[]), Err(PlaceError::NoRoom { .. })),
                "{size:#x}"
            );
        }
        // RAM at the very top of the address space: no aligned start.
        let top = parse("ffffffffffff0000-ffffffffffffffff : System RAM\n").unwrap();
        assert!(matches!(
            place(&top, ALIGN, &[]),
            Err(PlaceError::NoRoom { .. })
        ));
        assert_eq!(total_ram(&top), 0x1_0000);
        // 8 GiB less the BIOS's holes.
        assert_eq!(total_ram(&r), 0x1_fff7_ec00);
        let end = Placement {
            start: u64::MAX - (1 << 20),
            size: 2 << 20,
        };
        assert!(!end.fits());
        assert_eq!(end.range().end, u64::MAX);
    }

    #[test]
    fn sizes_read_as_memparse_does() {
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("0x1000000"), Some(16 << 20));
        assert_eq!(parse_size("0X10k"), Some(16 << 10));
        assert_eq!(parse_size("12x"), None);
        assert_eq!(parse_size("99999999999G"), None);
        assert_eq!(size_text(16 << 20), "16M");
        assert_eq!(size_text(3 << 30), "3G");
        assert_eq!(size_text(1536 << 10), "1536K");
    }
}
