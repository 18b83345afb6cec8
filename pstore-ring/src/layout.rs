//! The raw on-media structures and constants of the format: this file is the
//! crate's equivalent of a C header and the single source of truth for the
//! layout. `FORMAT.md` describes the same bytes in prose; the C module is
//! checked against the constants here.
//!
//! Every struct is `repr(C)`, built only from byte arrays (alignment 1, no
//! padding), so a view of one can be taken at any offset. Integer fields are
//! also placed at their natural alignment, so the equivalent C struct has no
//! padding either.

use crate::endian::{Endian, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Format version written by this crate. It also reads version 1, which
/// differs only in its checksums ([`Checksum`]).
pub const FORMAT_VERSION: u16 = 2;

/// The region magic as written in documentation and code. The region stores
/// its bitwise complement ([`MAGIC_STORED`]), so a scan of a dump does not
/// stop on this constant inside the writer's own program text.
pub const MAGIC_PLAIN: [u8; 8] = *b"CRASHRNG";

/// The eight bytes at offset 0 of every region.
pub const MAGIC_STORED: [u8; 8] = {
    let mut out = [0u8; 8];
    let mut i = 0;
    while i < 8 {
        out[i] = !MAGIC_PLAIN[i];
        i += 1;
    }
    out
};

/// Written as a `u32` in the writer's byte order; a reader tells the order
/// from the bytes it finds.
pub const ENDIAN_TAG: u32 = 0x0A0B_0C0D;

pub const HEADER_SIZE: usize = 256;
pub const STATE_OFFSET: usize = HEADER_SIZE;
pub const STATE_SIZE: usize = 64;
/// Where the stream descriptor table starts in every region written by v1
/// writers; readers use the header's `desc_offset` instead.
pub const DESC_OFFSET: usize = STATE_OFFSET + STATE_SIZE;
pub const DESC_SIZE: usize = 64;
pub const PAGE_HEADER_SIZE: usize = 48;
/// One copy of a stream's tail ([`StreamTail`]); each stream has
/// [`TAIL_COPIES`] of them, side by side, in the tail table.
pub const TAIL_SIZE: usize = 32;
/// Copy `seq & 1` is rewritten; the other keeps the update before it.
pub const TAIL_COPIES: usize = 2;
pub const SCHEMA_HEADER_SIZE: usize = 16;
pub const EVENT_DESC_SIZE: usize = 40;
pub const FIELD_DESC_SIZE: usize = 24;

pub const MIN_PAGE_SIZE: u32 = 256;
pub const MAX_PAGE_SIZE: u32 = 1 << 20;
/// Records start at 4-byte boundaries and their length is counted in words.
pub const RECORD_ALIGN: usize = 4;
pub const RECORD_HEADER_SIZE: usize = 4;
/// The largest record the 8-bit length-in-words field can describe.
pub const MAX_RECORD_SIZE: usize = 255 * RECORD_ALIGN;
/// Most stream descriptors a header may announce.
pub const MAX_STREAMS: u16 = 4096;
/// Most events a schema table may describe, and fields per event.
pub const MAX_EVENT_TYPES: u32 = 256;
pub const MAX_FIELDS: u16 = 32;

/// `clock_id` values: which clock record timestamps come from.
pub const CLOCK_MONOTONIC: u32 = 1;

/// Header `flags` bits. A reader ignores bits it does not know.
/// The region has a tail table at `tail_offset` (FORMAT.md, "Stream tails").
pub const HEADER_FLAG_TAILS: u32 = 1;
/// The region is a copy read while it was being recorded (a live
/// snapshot, FORMAT.md "Reading a live region"): each page is as its
/// writer left it at some moment, the tail table older than the pages.
pub const HEADER_FLAG_LIVE_COPY: u32 = 2;

/// Generation states (`StateBlock::state`).
pub const STATE_RUNNING: u32 = 1;
pub const STATE_CRASHED: u32 = 2;
pub const STATE_CLEAN: u32 = 3;

/// Crash reasons (`StateBlock::reason` and the `crash` event's `reason`),
/// and [`REASON_SHUTDOWN`].
pub const REASON_NONE: u32 = 0;
pub const REASON_PANIC: u32 = 1;
pub const REASON_OOPS: u32 = 2;
pub const REASON_DIE: u32 = 3;
pub const REASON_WATCHDOG: u32 = 4;
pub const REASON_EMERGENCY_RESTART: u32 = 5;
/// Not a crash: a restart, halt or power-off was asked for with a reason
/// (the state block's `message`, whole in a `shutdown` event). The state
/// is clean once the machine went down, still running if a reset came
/// first (a hang on the way down that a watchdog ended).
pub const REASON_SHUTDOWN: u32 = 6;

/// Stream kinds (`StreamDesc::kind`).
pub const STREAM_KERNEL_CPU: u16 = 1;
pub const STREAM_USER: u16 = 2;
/// Not a stream: the region's callsite area (FORMAT.md, section 18), its
/// `page_count × page_size` bytes one append-only area.
pub const STREAM_CALLSITES: u16 = 3;

/// `StreamDesc::flags` bits 0-3: the nesting lane of a kernel CPU stream
/// (FORMAT.md, "Nesting lanes"). Lane 0 records what a CPU writes outside
/// any other write; lane *d* what it writes while *d* writes of that CPU
/// are interrupted. The other bits are 0 but [`DESC_NO_TAILS`].
pub const DESC_LANE_MASK: u32 = 0xF;
/// Lanes a CPU can have: the values `DESC_LANE_MASK` can hold.
pub const MAX_LANES: u32 = 16;
/// `StreamDesc::flags` bit 4: the stream's writer does not keep its tail
/// copies (a user stream of the kernel module's pool, which a process
/// writes through a mapping of its pages alone); readers ignore them.
pub const DESC_NO_TAILS: u32 = 0x10;

/// Page header magic, a `u32` in region byte order ("CRPG" little-endian).
pub const PAGE_MAGIC: u32 = 0x4750_5243;
/// Page states (`PageHeader::flags`). The values are far apart in Hamming
/// distance so that one flipped bit never turns one state into another.
pub const PAGE_RESETTING: u16 = 0x0000;
pub const PAGE_OPEN: u16 = 0x4F50;
pub const PAGE_CLOSED: u16 = 0x434C;
/// Tail states (`StreamTail::state`), the page states' values: the tail
/// describes a page that is open (its end not yet known) or closed.
pub const TAIL_OPEN: u16 = PAGE_OPEN;
pub const TAIL_CLOSED: u16 = PAGE_CLOSED;

/// Record type ids 0..=15 are the format's own; 16..=31 are the built-in
/// events; 32..=255 are free for writers, described by the schema table.
pub const TYPE_INVALID: u8 = 0;
pub const TYPE_PADDING: u8 = 1;
pub const TYPE_TIME_EXTEND: u8 = 2;
pub const TYPE_TIME_ABS: u8 = 3;
pub const FIRST_EVENT_TYPE: u8 = 16;
pub const FIRST_CUSTOM_TYPE: u8 = 32;

/// Width of the time delta in a record header; larger gaps need a
/// time-extend or an absolute-time record first.
pub const DELTA_BITS: u32 = 16;
pub const DELTA_MAX: u64 = (1 << DELTA_BITS) - 1;

/// Schema table magic ("CRSC" little-endian).
pub const SCHEMA_MAGIC: u32 = 0x4353_5243;

/// Callsite area magic ("CRCS" little-endian).
pub const CALLSITE_MAGIC: u32 = 0x5343_5243;
pub const CALLSITE_HEADER_SIZE: usize = 16;
/// The fixed part of a callsite entry; its four strings follow.
pub const CALLSITE_ENTRY_SIZE: usize = 16;
/// The largest callsite entry: a callsite whose strings do not fit is not
/// added (its messages are recorded formatted), so that a reader's work
/// per entry stays small whatever a region claims.
pub const MAX_CALLSITE_SIZE: usize = 2048;
/// `CallsiteEntry::source`: which kernel interface the callsite uses.
pub const CALLSITE_DYNDBG: u8 = 1;
pub const CALLSITE_DRM: u8 = 2;
/// `CallsiteEntry::category` of a callsite outside DRM's categories.
pub const CATEGORY_NONE: u16 = 0xFFFF;

/// Offset 0: what every region starts with. Written once when the region is
/// formatted; `header_crc` covers bytes `0..252`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RegionHeader {
    pub magic: [u8; 8],
    pub endian_tag: U32,
    pub version: U16,
    pub header_size: U16,
    pub word_size: u8,
    pub reserved0: u8,
    pub stream_count: U16,
    pub cpu_count: U16,
    pub page_header_size: U16,
    pub page_size: U32,
    pub desc_size: U32,
    pub region_size: U64,
    pub desc_offset: U32,
    pub schema_offset: U32,
    pub schema_size: U32,
    pub clock_id: U32,
    pub boot_id: [u8; 16],
    pub generation: U64,
    pub created_ns: U64,
    pub wall_offset_ns: U64,
    pub flags: U32,
    /// Offset of the tail table when `flags` has [`HEADER_FLAG_TAILS`];
    /// 0 (and reserved) in regions written before tails existed.
    pub tail_offset: U32,
    pub kernel_release: [u8; 64],
    pub hostname: [u8; 64],
    pub producer: [u8; 16],
    pub reserved2: U32,
    pub header_crc: U32,
}

/// Offset 256: the part of the header that changes while the generation
/// lives (running → crashed or clean). It has its own CRC so a torn update
/// costs only this block. `crc` covers bytes `0..60`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct StateBlock {
    pub state: U32,
    pub reason: U32,
    pub crash_ns: U64,
    pub crash_cpu: U32,
    pub updates: U32,
    pub message: [u8; 36],
    pub crc: U32,
}

/// One per stream, `desc_size` bytes apart from `desc_offset`. `crc` covers
/// bytes `0..60`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct StreamDesc {
    pub kind: U16,
    pub cpu: U16,
    pub page_count: U32,
    pub pages_offset: U64,
    pub name: [u8; 32],
    pub pid: U32,
    pub flags: U32,
    pub uid: U32,
    pub crc: U32,
}

/// The first 48 bytes of every ring page. `crc` covers bytes `0..44` of the
/// header followed by the `commit` bytes of record data, and is meaningful
/// only when `flags == PAGE_CLOSED`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct PageHeader {
    pub magic: U32,
    pub stream: U16,
    pub flags: U16,
    pub seq: U64,
    pub first_ts: U64,
    pub first_index: U64,
    pub commit: U32,
    pub count: U32,
    pub dropped: U32,
    pub crc: U32,
}

/// How far one stream has gone: the page it most recently opened and, once
/// that page is closed, the index after its last event. Rewritten whole at
/// every page open and close, alternating between the stream's two copies
/// by `seq & 1`; `crc` covers bytes `0..28`, so a copy caught mid-rewrite
/// fails it and the other copy still holds the previous update.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct StreamTail {
    pub seq: U64,
    pub first_index: U64,
    pub end_index: U64,
    pub stream: U16,
    pub state: U16,
    pub crc: U32,
}

/// Starts the schema table. `crc` covers bytes `0..12` of this header and
/// then the `size - 16` bytes of entries that follow it.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct SchemaHeader {
    pub magic: U32,
    pub count: U32,
    pub size: U32,
    pub crc: U32,
}

/// One event type; `field_count` [`FieldDesc`]s follow it directly.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct EventDesc {
    pub type_id: U16,
    pub field_count: U16,
    pub flags: U32,
    pub name: [u8; 32],
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FieldDesc {
    pub name: [u8; 20],
    pub kind: u8,
    pub reserved: u8,
    pub size: U16,
}

/// Starts the callsite area (FORMAT.md, section 18).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CallsiteHeader {
    pub magic: U32,
    /// Callsites the writer could not add for lack of room.
    pub refused: U32,
    pub reserved: U64,
}

/// A callsite entry's fixed part, at the entry's id (its offset in the
/// area); its `module`, `function`, `file` and `format` strings follow,
/// each a `u16` length and its bytes, then zeros to a 4-byte boundary.
/// `crc` covers the region's generation (8 bytes) and bytes `8..size`.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct CallsiteEntry {
    pub size: U32,
    pub crc: U32,
    pub source: u8,
    pub level: u8,
    pub category: U16,
    pub line: U32,
}

/// Field kinds (`FieldDesc::kind`).
pub const FIELD_U8: u8 = 1;
pub const FIELD_U16: u8 = 2;
pub const FIELD_U32: u8 = 3;
pub const FIELD_U64: u8 = 4;
pub const FIELD_I8: u8 = 5;
pub const FIELD_I16: u8 = 6;
pub const FIELD_I32: u8 = 7;
pub const FIELD_I64: u8 = 8;
/// A fixed-size, NUL-padded character array of `size` bytes.
pub const FIELD_CHARS: u8 = 9;
/// A `u16` byte length followed by that many bytes of text.
pub const FIELD_STR: u8 = 10;
/// A `u16` byte length followed by that many bytes of binary data.
pub const FIELD_BYTES: u8 = 11;
/// A kernel address (`u64`): printed in hex and hashed when redacting.
pub const FIELD_PTR: u8 = 12;

/// Packs a record header word: type in bits 0..8, length in 4-byte words
/// (header included) in bits 8..16, time delta in ns in bits 16..32.
pub const fn record_header(type_id: u8, len_words: u8, delta: u16) -> u32 {
    (type_id as u32) | ((len_words as u32) << 8) | ((delta as u32) << 16)
}

/// Unpacks a record header word into (type, length in words, delta).
pub const fn split_record_header(word: u32) -> (u8, u8, u16) {
    (word as u8, (word >> 8) as u8, (word >> 16) as u16)
}

/// The CRC of every checksum in a region, fixed by its format version.
/// Both are reflected CRC-32s with initial value and final xor 0xFFFFFFFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Version 1: CRC-32/ISO-HDLC (IEEE, polynomial 0xEDB88320), as the
    /// kernel's `crc32_le(~0, p, n) ^ ~0`.
    Ieee,
    /// Version 2: CRC-32C (Castagnoli, polynomial 0x82F63B78), as the
    /// kernel's `__crc32c_le(~0, p, n) ^ ~0`. x86 (SSE4.2) and arm64
    /// compute it in one instruction per 8 bytes, in any context: the
    /// kernel writer's page CRC cost a quarter of its record with IEEE.
    Castagnoli,
}

impl Checksum {
    /// What this crate writes.
    pub const WRITTEN: Checksum = Checksum::Castagnoli;

    /// The checksum of format `version`, when this crate reads it.
    pub const fn of_version(version: u16) -> Option<Checksum> {
        match version {
            1 => Some(Checksum::Ieee),
            2 => Some(Checksum::Castagnoli),
            _ => None,
        }
    }

    /// The CRC of `parts`, one after another.
    pub fn crc(self, parts: &[&[u8]]) -> u32 {
        match self {
            Checksum::Ieee => {
                const IEEE: crc::Crc<u32, crc::Table<16>> =
                    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);
                let mut d = IEEE.digest();
                parts.iter().for_each(|p| d.update(p));
                d.finalize()
            }
            Checksum::Castagnoli => castagnoli(parts),
        }
    }
}

#[cfg(feature = "std")]
fn castagnoli(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |crc, p| crc32c::crc32c_append(crc, p))
}

#[cfg(not(feature = "std"))]
fn castagnoli(parts: &[&[u8]]) -> u32 {
    const CASTAGNOLI: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    let mut d = CASTAGNOLI.digest();
    parts.iter().for_each(|p| d.update(p));
    d.finalize()
}

/// The CRC this crate writes ([`Checksum::WRITTEN`]) of `parts`.
pub fn crc32(parts: &[&[u8]]) -> u32 {
    Checksum::WRITTEN.crc(parts)
}

/// Tells the byte order from a header's `endian_tag` bytes.
pub fn endian_from_tag(tag: [u8; 4]) -> Option<Endian> {
    if U32(tag).get(Endian::Little) == ENDIAN_TAG {
        Some(Endian::Little)
    } else if U32(tag).get(Endian::Big) == ENDIAN_TAG {
        Some(Endian::Big)
    } else {
        None
    }
}

/// Rounds a payload up to whole record words, header included; `None` when
/// it cannot be one record.
pub const fn record_words(payload_len: usize) -> Option<u8> {
    let total = RECORD_HEADER_SIZE + payload_len;
    if total > MAX_RECORD_SIZE {
        return None;
    }
    Some(total.div_ceil(RECORD_ALIGN) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_the_spec() {
        assert_eq!(size_of::<RegionHeader>(), HEADER_SIZE);
        assert_eq!(size_of::<StateBlock>(), STATE_SIZE);
        assert_eq!(size_of::<StreamDesc>(), DESC_SIZE);
        assert_eq!(size_of::<PageHeader>(), PAGE_HEADER_SIZE);
        assert_eq!(size_of::<SchemaHeader>(), SCHEMA_HEADER_SIZE);
        assert_eq!(size_of::<EventDesc>(), EVENT_DESC_SIZE);
        assert_eq!(size_of::<FieldDesc>(), FIELD_DESC_SIZE);
        assert_eq!(size_of::<CallsiteHeader>(), CALLSITE_HEADER_SIZE);
        assert_eq!(size_of::<CallsiteEntry>(), CALLSITE_ENTRY_SIZE);
        assert_eq!(size_of::<StreamTail>(), TAIL_SIZE);
    }

    #[test]
    fn checksums_sit_at_the_end_of_what_they_cover() {
        assert_eq!(offset_of!(RegionHeader, header_crc), 252);
        assert_eq!(offset_of!(StateBlock, crc), 60);
        assert_eq!(offset_of!(StreamDesc, crc), 60);
        assert_eq!(offset_of!(PageHeader, crc), 44);
        assert_eq!(offset_of!(SchemaHeader, crc), 12);
        assert_eq!(offset_of!(StreamTail, crc), 28);
    }

    #[test]
    fn integer_fields_are_naturally_aligned() {
        // A C struct with the same members then has no padding.
        assert_eq!(offset_of!(RegionHeader, region_size) % 8, 0);
        assert_eq!(offset_of!(RegionHeader, generation) % 8, 0);
        assert_eq!(offset_of!(RegionHeader, created_ns) % 8, 0);
        assert_eq!(offset_of!(RegionHeader, wall_offset_ns) % 8, 0);
        assert_eq!(offset_of!(StateBlock, crash_ns) % 8, 0);
        assert_eq!(offset_of!(StreamDesc, pages_offset) % 8, 0);
        assert_eq!(offset_of!(PageHeader, seq) % 8, 0);
        assert_eq!(offset_of!(PageHeader, first_ts) % 8, 0);
        assert_eq!(offset_of!(PageHeader, first_index) % 8, 0);
        assert_eq!(offset_of!(StreamTail, end_index) % 8, 0);
    }

    #[test]
    fn page_states_survive_no_single_bit_flip() {
        let states = [PAGE_RESETTING, PAGE_OPEN, PAGE_CLOSED];
        for a in states {
            for b in states {
                if a != b {
                    assert!((a ^ b).count_ones() >= 2, "{a:#x} vs {b:#x}");
                }
            }
        }
    }

    #[test]
    fn checksums_give_their_check_values() {
        // The catalogue's check values of CRC-32/ISO-HDLC and CRC-32C.
        for (sum, check) in [
            (Checksum::Ieee, 0xCBF4_3926),
            (Checksum::Castagnoli, 0xE306_9283),
        ] {
            assert_eq!(sum.crc(&[b"123456789"]), check);
            assert_eq!(sum.crc(&[b"1234", b"", b"56789"]), check);
        }
        assert_eq!(crc32(&[b"123456789"]), 0xE306_9283);
        assert_eq!(
            Checksum::of_version(FORMAT_VERSION),
            Some(Checksum::WRITTEN)
        );
    }

    #[test]
    fn record_header_packs_three_fields() {
        let w = record_header(TYPE_TIME_EXTEND, 1, 0xBEEF);
        assert_eq!(split_record_header(w), (TYPE_TIME_EXTEND, 1, 0xBEEF));
        assert_eq!(record_words(8), Some(3));
        assert_eq!(record_words(9), Some(4));
        assert_eq!(record_words(MAX_RECORD_SIZE - 4), Some(255));
        assert_eq!(record_words(MAX_RECORD_SIZE - 3), None);
    }

    #[test]
    fn magic_is_stored_complemented() {
        assert_eq!(MAGIC_STORED[0], !b'C');
        assert_ne!(MAGIC_STORED, MAGIC_PLAIN);
    }
}
