//! makedumpfile's on-disk structures (`diskdump_mod.h`), 64-bit layout,
//! as pstore-ring's `layout.rs` writes its own: `repr(C)` structs of byte
//! arrays and [`pstore_ring::endian`] integers (alignment 1, padding
//! spelled out), so a header is read straight into one and each field is
//! taken in the byte order the header turns out to have. Field names are
//! makedumpfile's; the C `int` fields are read unsigned, as ever.

use pstore_ring::endian::{U32, U64};
use std::mem::size_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `struct new_utsname`: the crashed kernel's `uname`, NUL-padded.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct NewUtsname {
    pub sysname: [u8; 65],
    pub nodename: [u8; 65],
    pub release: [u8; 65],
    pub version: [u8; 65],
    pub machine: [u8; 65],
    pub domainname: [u8; 65],
}

/// `struct disk_dump_header`: block 0 of the file.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct DiskDumpHeader {
    /// `KDUMP_SIGNATURE`, "KDUMP   ".
    pub signature: [u8; 8],
    /// 6 for the layout read here (the sub-header's 64-bit page counts).
    pub header_version: U32,
    pub utsname: NewUtsname,
    /// What a 64-bit C compiler puts before `timestamp` to align it.
    pub pad: [u8; 6],
    /// `struct timeval timestamp`: `tv_sec`, `tv_usec`.
    pub timestamp: [U64; 2],
    /// `DUMP_DH_*` flags ([`DUMP_DH_COMPRESSED_INCOMPLETE`]).
    pub status: U32,
    /// Bytes per block: the page size.
    pub block_size: U32,
    /// Blocks of the sub-header, notes and VMCOREINFO after block 0.
    pub sub_hdr_size: U32,
    /// Blocks of the two bitmaps together.
    pub bitmap_blocks: U32,
    /// Pages covered, for headers before version 6 (32 bits only).
    pub max_mapnr: U32,
    pub total_ram_blocks: U32,
    pub device_blocks: U32,
    pub written_blocks: U32,
    pub current_cpu: U32,
    pub nr_cpus: U32,
}

/// `DUMP_DH_COMPRESSED_INCOMPLETE`, a `status` bit: makedumpfile ran out
/// of space and pages it meant to write are not in the file.
pub const DUMP_DH_COMPRESSED_INCOMPLETE: u32 = 0x08;

/// `struct kdump_sub_header`: at block 1.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct KdumpSubHeader {
    pub phys_base: U64,
    pub dump_level: U32,
    /// Non-zero in one file of a split dump (`--split`), version 2 on.
    pub split: U32,
    pub start_pfn: U64,
    pub end_pfn: U64,
    /// Where the VMCOREINFO text is, and its bytes; version 3 on.
    pub offset_vmcoreinfo: U64,
    pub size_vmcoreinfo: U64,
    pub offset_note: U64,
    pub size_note: U64,
    pub offset_eraseinfo: U64,
    pub size_eraseinfo: U64,
    /// The pages this file of a split dump holds, `start_pfn_64` to
    /// `end_pfn_64`; version 6 on.
    pub start_pfn_64: U64,
    pub end_pfn_64: U64,
    /// Pages covered; version 6 on.
    pub max_mapnr_64: U64,
}

/// `struct page_desc`: one per dumped page, in page order, after the
/// bitmaps.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct PageDesc {
    /// Where the page's data is; 0 for a page an incomplete dump never
    /// wrote.
    pub offset: U64,
    /// Bytes of data, compressed or a whole block.
    pub size: U32,
    /// `DUMP_DH_COMPRESSED_*`: the codec, none for a plain page.
    pub flags: U32,
    pub page_flags: U64,
}

// The sizes makedumpfile writes, checked where the structs are built.
const _: () = assert!(size_of::<DiskDumpHeader>() == 464);
const _: () = assert!(size_of::<KdumpSubHeader>() == 104);
const _: () = assert!(size_of::<PageDesc>() == 24);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// The offsets a 64-bit build of makedumpfile's `diskdump_mod.h`
    /// gives (`offsetof` on x86-64).
    #[test]
    fn fields_sit_where_makedumpfile_puts_them() {
        let h = |at, want| assert_eq!(at, want);
        h(offset_of!(DiskDumpHeader, header_version), 8);
        h(offset_of!(DiskDumpHeader, utsname), 12);
        h(offset_of!(DiskDumpHeader, utsname.release), 12 + 65 * 2);
        h(offset_of!(DiskDumpHeader, utsname.machine), 12 + 65 * 4);
        h(offset_of!(DiskDumpHeader, timestamp), 408);
        h(offset_of!(DiskDumpHeader, status), 424);
        h(offset_of!(DiskDumpHeader, block_size), 428);
        h(offset_of!(DiskDumpHeader, sub_hdr_size), 432);
        h(offset_of!(DiskDumpHeader, bitmap_blocks), 436);
        h(offset_of!(DiskDumpHeader, max_mapnr), 440);
        h(offset_of!(DiskDumpHeader, current_cpu), 456);
        h(offset_of!(DiskDumpHeader, nr_cpus), 460);
        h(size_of::<DiskDumpHeader>(), 464);

        h(offset_of!(KdumpSubHeader, dump_level), 8);
        h(offset_of!(KdumpSubHeader, split), 12);
        h(offset_of!(KdumpSubHeader, start_pfn), 16);
        h(offset_of!(KdumpSubHeader, offset_vmcoreinfo), 32);
        h(offset_of!(KdumpSubHeader, size_vmcoreinfo), 40);
        h(offset_of!(KdumpSubHeader, offset_eraseinfo), 64);
        h(offset_of!(KdumpSubHeader, start_pfn_64), 80);
        h(offset_of!(KdumpSubHeader, end_pfn_64), 88);
        h(offset_of!(KdumpSubHeader, max_mapnr_64), 96);
        h(size_of::<KdumpSubHeader>(), 104);

        h(offset_of!(PageDesc, size), 8);
        h(offset_of!(PageDesc, flags), 12);
        h(offset_of!(PageDesc, page_flags), 16);
        h(size_of::<PageDesc>(), 24);
    }

    #[test]
    fn integer_fields_are_naturally_aligned() {
        // As in C, so the structs need no padding beyond what they spell out.
        assert_eq!(offset_of!(DiskDumpHeader, timestamp) % 8, 0);
        assert_eq!(offset_of!(KdumpSubHeader, start_pfn) % 8, 0);
        assert_eq!(offset_of!(KdumpSubHeader, max_mapnr_64) % 8, 0);
        assert_eq!(offset_of!(PageDesc, page_flags) % 8, 0);
    }
}
