//! The firmware's own record of a boot's fatal error, as ACPI's Boot
//! Error Record Table hands it to the next boot: the Boot Error Region
//! (`/sys/firmware/acpi/tables/data/BERT`, root-only), a run of Generic
//! Error Status Blocks (ACPI 6.5 §18.3.2.7.1), each holding Generic Error
//! Data Entries (§18.3.2.7.2) in UEFI's Common Platform Error Record
//! section layouts (UEFI 2.10 appendix N).
//!
//! Decoded into text for a bundle: every block and every section header
//! in words, a platform-memory section's address and error type, and
//! every byte of every section in hex (up to [`MAX_HEX`] in all, the rest
//! counted), so that nothing the firmware wrote is left out or guessed.
//!
//! The kernel prints the region at boot (drivers/acpi/apei/bert.c) and
//! then zeroes each printed block's Block Status in the region itself, so
//! a block read later may say "no error" over intact entries: the run of
//! blocks ends at a header that is zero throughout, not at a zero status.

use pstore_ring::ras::{cper_severity, guid_text};
use std::fmt::Write;

/// The Block Status, Raw Data Offset, Raw Data Length, Data Length and
/// Error Severity words.
const BLOCK_HEADER: usize = 20;
/// A Generic Error Data Entry's header before revision 3.0 (no timestamp).
const ENTRY_HEADER: usize = 64;
/// A Generic Error Data Entry's header from revision 3.0 on.
const ENTRY_HEADER_V3: usize = 72;
/// Section bytes shown in hex at most, over the whole region: a region is
/// a few KiB on real machines, but its length is the firmware's word.
pub const MAX_HEX: usize = 256 << 10;

/// One Generic Error Status Block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its offset in the region.
    pub at: usize,
    pub status: u32,
    pub severity: u32,
    pub sections: Vec<Section>,
    /// The block's raw data (the Raw Data Offset and Length words) as far
    /// as the region holds it.
    pub raw: std::ops::Range<usize>,
    /// What is wrong with it, if something is: the sections before the
    /// fault are kept.
    pub fault: Option<String>,
}

/// One Generic Error Data Entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub at: usize,
    pub guid: [u8; 16],
    pub severity: u32,
    pub revision: u16,
    pub validation: u8,
    pub flags: u8,
    /// Its error data, in the region.
    pub data: std::ops::Range<usize>,
}

/// The region's blocks, in order, and what stopped the walk when it was
/// not the end of the records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub len: usize,
    pub blocks: Vec<Block>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | u64::from(u32_at(b, at + 4)) << 32
}

/// Walks the region's blocks. Never fails: what cannot be decoded is a
/// block's `fault`, and the walk stops there.
pub fn parse(bytes: &[u8]) -> Region {
    let mut region = Region {
        len: bytes.len(),
        blocks: Vec::new(),
    };
    let mut at = 0;
    while bytes.len() - at >= BLOCK_HEADER {
        let header = &bytes[at..at + BLOCK_HEADER];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let (raw_offset, raw_len, data_len) = (
            u32_at(header, 4) as usize,
            u32_at(header, 8) as usize,
            u32_at(header, 12) as usize,
        );
        let mut block = Block {
            at,
            status: u32_at(header, 0),
            severity: u32_at(header, 16),
            sections: Vec::new(),
            raw: 0..0,
            fault: None,
        };
        // As the kernel's cper_estatus_len(): the raw data may lie past
        // the entries, inside the block.
        let entries_end = BLOCK_HEADER.saturating_add(data_len);
        let raw_end = if raw_offset != 0 {
            raw_offset.saturating_add(raw_len)
        } else {
            0
        };
        let len = entries_end.max(raw_end);
        let left = bytes.len() - at;
        if len > left {
            block.fault = Some(format!(
                "its lengths (entries {data_len} bytes, raw data {raw_len} at +{raw_offset}) run {} bytes past the region's end",
                len - left
            ));
        }
        let block_bytes = &bytes[at..at + len.min(left)];
        sections(
            block_bytes,
            at,
            entries_end.min(block_bytes.len()),
            &mut block,
        );
        if raw_offset != 0 && raw_len != 0 {
            let start = raw_offset.min(block_bytes.len());
            block.raw = at + start..at + raw_end.min(block_bytes.len());
        }
        let stop = block.fault.is_some();
        region.blocks.push(block);
        if stop {
            break;
        }
        at += len;
    }
    region
}

/// The entries of a block (`b`, at `base` in the region) up to `end`.
fn sections(b: &[u8], base: usize, end: usize, block: &mut Block) {
    let mut at = BLOCK_HEADER;
    while at < end {
        if end - at < ENTRY_HEADER {
            block.fault.get_or_insert_with(|| {
                format!(
                    "{} bytes at +{at:#x} are too few for a section header",
                    end - at
                )
            });
            return;
        }
        let revision = u16_at(b, at + 20);
        let header = if revision >> 8 >= 3 {
            ENTRY_HEADER_V3
        } else {
            ENTRY_HEADER
        };
        let data_len = u32_at(b, at + 24) as usize;
        let data_end = at.saturating_add(header).saturating_add(data_len);
        if data_end > end {
            block.fault.get_or_insert_with(|| {
                format!(
                    "the section at +{at:#x} says {data_len} bytes of data, {} more than the block's entries hold",
                    data_end - end
                )
            });
            return;
        }
        let mut guid = [0; 16];
        guid.copy_from_slice(&b[at..at + 16]);
        block.sections.push(Section {
            at: base + at,
            guid,
            severity: u32_at(b, at + 16),
            revision,
            validation: b[at + 22],
            flags: b[at + 23],
            data: base + at + header..base + data_end,
        });
        at = data_end;
    }
}

/// The platform memory section (UEFI N.2.5).
pub const PLATFORM_MEMORY: &str = "a5bc1114-6f64-4ede-b863-3e83ed7c83b1";

/// UEFI's section types (appendix N.2.2), as include/linux/cper.h has them.
fn section_name(guid: &str) -> Option<&'static str> {
    Some(match guid {
        "9876ccad-47b4-4bdb-b65e-16f193c4f3db" => "processor generic error",
        "dc3ea0b0-a144-4797-b95b-53fa242b6e1d" => "x86 processor error",
        "e429faf1-3cb7-11d4-bca7-0080c73c8881" => "IA-64 processor error",
        "e19e3d16-bc11-11e4-9caa-c2051d5d46b0" => "ARM processor error",
        PLATFORM_MEMORY => "platform memory error",
        "61ec04fc-48e6-d813-25c9-8daa44750b12" => "platform memory error (2)",
        "d995e954-bbc1-430f-ad91-b44dcb3c6f35" => "PCI Express error",
        "81212a96-09ed-4996-9471-8d729c8e69ed" => "firmware error record reference",
        "c5753963-3b84-4095-bf78-eddad3f9c9dd" => "PCI/PCI-X bus error",
        "eb5e4685-ca66-4769-b6a2-26068b001326" => "PCI component error",
        "5b51fef7-c79d-4434-8f1b-aa62de3e2c64" => "DMA remapping error",
        _ => return None,
    })
}

/// Memory error types (UEFI N.2.5), as cper.c names them.
const MEMORY_ERROR_TYPES: [&str; 16] = [
    "unknown",
    "no error",
    "single-bit ECC",
    "multi-bit ECC",
    "single-symbol chipkill ECC",
    "multi-symbol chipkill ECC",
    "master abort",
    "target abort",
    "parity error",
    "watchdog timeout",
    "invalid address",
    "mirror broken",
    "memory sparing",
    "scrub corrected error",
    "scrub uncorrected error",
    "physical memory map-out event",
];

/// What a platform memory section says in words: its physical address,
/// node and error type where their validation bits say they are valid.
fn memory_words(d: &[u8]) -> Option<String> {
    // Validation bits, error status, address, mask, then node (u16 at 32)
    // ... target id (u64 at 64), error type (u8 at 72).
    if d.len() < 73 {
        return None;
    }
    let valid = u64_at(d, 0);
    let mut words = Vec::new();
    if valid & 0x2 != 0 {
        words.push(format!("physical address {:#x}", u64_at(d, 16)));
    }
    if valid & 0x8 != 0 {
        words.push(format!("node {}", u16_at(d, 32)));
    }
    if valid & 0x4000 != 0 {
        let t = d[72];
        words.push(
            MEMORY_ERROR_TYPES
                .get(usize::from(t))
                .map_or_else(|| format!("memory error type {t}"), |n| (*n).into()),
        );
    }
    Some(words.join(", "))
}

/// A section's one-line description: severity, type, and what a memory
/// section says.
fn section_words(bytes: &[u8], s: &Section) -> String {
    let guid = guid_text(&s.guid).unwrap_or_default();
    let mut words = format!(
        "{} {}",
        cper_severity(s.severity.into()),
        section_name(&guid).unwrap_or("error of an unknown section type")
    );
    if guid == PLATFORM_MEMORY {
        if let Some(m) = memory_words(&bytes[s.data.clone()]).filter(|m| !m.is_empty()) {
            words += ", ";
            words += &m;
        }
    }
    words
}

impl Region {
    /// The first section's words ("fatal platform memory error, physical
    /// address 0x76543000, multi-bit ECC"), or `None` when the region holds
    /// no record.
    pub fn headline(&self, bytes: &[u8]) -> Option<String> {
        let s = self.blocks.iter().flat_map(|b| &b.sections).next()?;
        Some(section_words(bytes, s))
    }
}

/// The CPER timestamp (UEFI N.2.1.1): BCD seconds, minutes, hours, a
/// precision flag, day, month, year, century.
fn timestamp_text(t: &[u8]) -> String {
    let bcd = |b: u8| (b >> 4) * 10 + (b & 0xf);
    format!(
        "{:02}{:02}-{:02}-{:02} {:02}:{:02}:{:02}{}",
        bcd(t[7]),
        bcd(t[6]),
        bcd(t[5]),
        bcd(t[4]),
        bcd(t[2]),
        bcd(t[1]),
        bcd(t[0]),
        if t[3] & 1 != 0 { " (precise)" } else { "" }
    )
}

/// Writes `bytes[range]` in hex, 16 to a line, charging `budget`.
fn hex(out: &mut String, bytes: &[u8], range: std::ops::Range<usize>, budget: &mut usize) {
    let len = range.len();
    let shown = len.min(*budget);
    *budget -= shown;
    for (i, line) in bytes[range.start..range.start + shown]
        .chunks(16)
        .enumerate()
    {
        let _ = write!(out, "      {:06x}:", i * 16);
        for b in line {
            let _ = write!(out, " {b:02x}");
        }
        out.push('\n');
    }
    if shown < len {
        let _ = writeln!(out, "      ({} more bytes not shown)", len - shown);
    }
}

/// The whole region in text, as bundled (`logs/firmware-BERT.txt`).
pub fn text(bytes: &[u8]) -> String {
    let region = parse(bytes);
    let mut out = format!(
        "ACPI Boot Error Record Table: the firmware's record of errors in the boot before this one\nboot error region: {} bytes, {} error status block{}\n",
        region.len,
        region.blocks.len(),
        if region.blocks.len() == 1 { "" } else { "s" }
    );
    let mut budget = MAX_HEX;
    for (i, b) in region.blocks.iter().enumerate() {
        let status = if b.status == 0 {
            "block status 0: the kernel printed it at boot and cleared it".to_string()
        } else {
            let mut bits = Vec::new();
            for (bit, name) in [
                (0, "uncorrectable"),
                (1, "correctable"),
                (2, "multiple uncorrectable"),
                (3, "multiple correctable"),
            ] {
                if b.status & 1 << bit != 0 {
                    bits.push(name);
                }
            }
            format!(
                "block status {:#x} ({}; {} entries)",
                b.status,
                bits.join(", "),
                b.status >> 4 & 0x3ff
            )
        };
        let _ = writeln!(
            out,
            "block {i} at {:#x}: {}, {status}",
            b.at,
            cper_severity(b.severity.into())
        );
        for (j, s) in b.sections.iter().enumerate() {
            let guid = guid_text(&s.guid).unwrap_or_default();
            let _ = writeln!(
                out,
                "  section {j} at {:#x}: {}\n    type {guid}, revision {:#06x}, flags {:#04x}, {} bytes of data",
                s.at,
                section_words(bytes, s),
                s.revision,
                s.flags,
                s.data.len()
            );
            let header = s.at..s.data.start;
            if s.validation & 0x1 != 0 {
                let _ = writeln!(
                    out,
                    "    FRU id {}",
                    guid_text(&bytes[header.start + 28..header.start + 44]).unwrap_or_default()
                );
            }
            if s.validation & 0x2 != 0 {
                let fru = &bytes[header.start + 44..header.start + 64];
                let end = fru.iter().position(|&c| c == 0).unwrap_or(fru.len());
                let _ = writeln!(
                    out,
                    "    FRU text {:?}",
                    String::from_utf8_lossy(&fru[..end])
                );
            }
            if s.validation & 0x4 != 0 && header.len() == ENTRY_HEADER_V3 {
                let _ = writeln!(
                    out,
                    "    time {}",
                    timestamp_text(&bytes[header.start + 64..header.start + 72])
                );
            }
            hex(&mut out, bytes, s.data.clone(), &mut budget);
        }
        if !b.raw.is_empty() {
            let _ = writeln!(out, "  raw data, {} bytes", b.raw.len());
            hex(&mut out, bytes, b.raw.clone(), &mut budget);
        }
        if let Some(fault) = &b.fault {
            let _ = writeln!(out, "  not decoded further: {fault}");
        }
    }
    out
}

#[cfg(test)]
#[path = "../../tests/common/bert_region.rs"]
pub mod bert_region;

#[cfg(test)]
mod tests {
    use super::bert_region::{block, memory_section};
    use super::*;

    #[test]
    fn a_fatal_memory_error_in_words_with_every_byte() {
        let mut region = block(1, 0x11, &memory_section(0x7654_3000, 3));
        region.resize(4096, 0);
        let parsed = parse(&region);
        assert_eq!(parsed.blocks.len(), 1);
        assert_eq!(parsed.blocks[0].sections.len(), 1);
        assert_eq!(parsed.blocks[0].fault, None);
        assert_eq!(
            parsed.headline(&region).unwrap(),
            "fatal platform memory error, physical address 0x76543000, node 1, multi-bit ECC"
        );
        let text = text(&region);
        for want in [
            "boot error region: 4096 bytes, 1 error status block\n",
            "block 0 at 0x0: fatal, block status 0x11 (uncorrectable; 1 entries)",
            "type a5bc1114-6f64-4ede-b863-3e83ed7c83b1, revision 0x0300, flags 0x01, 80 bytes of data",
            "FRU text \"DIMM A1\"",
            "time 2026-11-29 05:59:30 (precise)",
            "      000010: 00 30 54 76 00 00 00 00",
            "      000040:",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
    }

    #[test]
    fn a_block_the_kernel_cleared_is_still_read_and_the_run_ends_at_zeros() {
        let mut region = block(1, 0, &memory_section(0x1000, 2));
        region.extend(block(2, 0x12, &memory_section(0x2000, 13)));
        region.resize(1024, 0);
        let parsed = parse(&region);
        assert_eq!(parsed.blocks.len(), 2);
        let text = text(&region);
        assert!(text.contains("block status 0: the kernel printed it at boot and cleared it"));
        assert!(text.contains("corrected platform memory error, physical address 0x2000, node 1, scrub corrected error"));
    }

    #[test]
    fn lengths_past_the_region_are_named_and_what_fits_is_kept() {
        let mut region = block(1, 0x11, &memory_section(0x1000, 3));
        // Entries say 4 KiB more than there is.
        let len = u32_at(&region, 12) + 4096;
        region[12..16].copy_from_slice(&len.to_le_bytes());
        let parsed = parse(&region);
        let b = &parsed.blocks[0];
        assert_eq!(b.sections.len(), 1);
        assert!(b
            .fault
            .as_deref()
            .unwrap()
            .contains("run 4096 bytes past the region's end"));
        // A section whose data runs past its block.
        let mut region = block(1, 0x11, &memory_section(0x1000, 3));
        region[20 + 24..20 + 28].copy_from_slice(&1000u32.to_le_bytes());
        let parsed = parse(&region);
        assert!(parsed.blocks[0].sections.is_empty());
        assert!(text(&region).contains("not decoded further: the section at +0x14 says 1000 bytes"));
    }

    #[test]
    fn hex_stops_at_its_budget_and_says_how_much_it_left() {
        let big = vec![0xab; MAX_HEX + 100];
        let mut region = block(3, 0x1, &big);
        region.resize(region.len() + 20, 0);
        let text = text(&region);
        assert!(
            text.contains("(100 more bytes not shown)"),
            "{}",
            &text[..300]
        );
    }

    #[test]
    fn an_unknown_section_type_and_severity_are_said_as_such() {
        let mut region = block(7, 0x11, &[1, 2, 3]);
        region[20] ^= 0xff;
        assert!(text(&region).contains("unknown severity error of an unknown section type"));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_without_panic_within_bounds(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let region = parse(&bytes);
            for b in &region.blocks {
                proptest::prop_assert!(b.raw.end <= bytes.len());
                for s in &b.sections {
                    proptest::prop_assert!(s.data.end <= bytes.len());
                }
            }
            let t = text(&bytes);
            proptest::prop_assert!(t.len() < 64 * 1024 + 4 * bytes.len());
        }

        #[test]
        fn a_damaged_memory_record_still_decodes(flips in proptest::collection::vec((0usize..172, proptest::num::u8::ANY), 0..6)) {
            let mut region = block(1, 0x11, &memory_section(0x7654_3000, 3));
            for (at, v) in flips {
                region[at] = v;
            }
            let _ = text(&region);
        }
    }
}
