//! What the container tests share: the memory every container is built
//! around, the trace its raw image gives (which every container must give
//! too), where `synth` puts a segment's or a page's bytes, and the runs a
//! container's map should list.

use super::{crashring, image_sized, write_tmp};
use extractor::input;
use extractor::input::source::FileOffset;
use extractor::phys::{Backing, PhysAddr, Run};
use std::ops::Range;
use std::sync::Arc;

/// Physical address of the region in the test memory.
pub const REGION: u64 = 0x30000;
pub const MEM: usize = 0x100000;

/// 1 MiB of memory: filler, a 64 KiB region at 0x30000 with 4 KiB ring
/// pages (so dump pages and ring pages line up), zero pages after it.
pub fn memory() -> Vec<u8> {
    let mut mem = image_sized(REGION as usize, 4096, 0x10000, 3000);
    mem.resize(MEM, 0);
    mem
}

/// What `crashring extract` prints for `file`, written as `name`, with
/// `args`; it must succeed.
pub fn run_ok(name: &str, file: &[u8], args: &[&str]) -> String {
    let path = write_tmp(name, file);
    let mut all = vec!["extract", path.to_str().unwrap()];
    all.extend(args);
    let out = crashring(&all);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{name}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

/// What crashring prints for the raw memory: every container must match
/// it. Made once per process, as tests running in parallel would
/// otherwise rewrite the file while another one reads it, under a name of
/// the test binary's own for the same reason.
pub fn raw_text() -> String {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let name = concat!("mem-", env!("CARGO_CRATE_NAME"), ".raw");
    TEXT.get_or_init(|| run_ok(name, &memory(), &[])).clone()
}

/// The file offsets of an ELF core's PT_LOAD headers' `p_offset` fields.
pub fn load_offset_fields(core: &[u8]) -> Vec<usize> {
    let phoff = u64::from_le_bytes(core[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(core[56..58].try_into().unwrap()) as usize;
    (0..phnum)
        .map(|i| phoff + 56 * i)
        .filter(|&ph| core[ph..ph + 4] == 1u32.to_le_bytes())
        .map(|ph| ph + 8)
        .collect()
}

/// Where `synth::kdump` (with no excluded page) stored page `pfn`: the
/// data's file offset and size, from its descriptor.
pub fn kdump_page_data(file: &[u8], pfn: usize) -> (usize, usize) {
    let bitmap_blocks = u32::from_le_bytes(file[436..440].try_into().unwrap()) as usize;
    let desc = 4096 * (2 + bitmap_blocks) + 24 * pfn;
    let offset = u64::from_le_bytes(file[desc..desc + 8].try_into().unwrap());
    let size = u32::from_le_bytes(file[desc + 8..desc + 12].try_into().unwrap());
    (offset as usize, size as usize)
}

/// A present run of a raw image or ELF core: `start..end` stored plainly
/// at file offset `offset`.
pub fn stored(start: u64, end: u64, offset: u64) -> Run {
    Run {
        start: PhysAddr(start),
        end: PhysAddr(end),
        backing: Backing::Present,
        offset: Some(FileOffset(offset)),
    }
}

/// A run of memory the dump meant to hold and does not.
pub fn lost(range: Range<u64>) -> Run {
    Run::lost(PhysAddr(range.start)..PhysAddr(range.end))
}

/// Why opening `file` failed.
pub fn open_error(file: Vec<u8>) -> String {
    match input::open(Arc::new(file)) {
        Ok(dump) => panic!("opened: {}", dump.container),
        Err(e) => e.to_string(),
    }
}
