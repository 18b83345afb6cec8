//! Finding regions in a larger image (a dump, a memory file) by their
//! stored magic, keeping only hits whose header CRC holds.

use crate::layout::{endian_from_tag, Checksum, HEADER_SIZE, MAGIC_STORED};

/// Offsets in `haystack` where a region with a valid header starts.
pub fn find_regions(haystack: &[u8]) -> impl Iterator<Item = usize> + '_ {
    magic_hits(haystack).filter(move |&at| header_checks_out(&haystack[at..]))
}

/// Offsets in `haystack` where the stored magic starts: candidates for
/// [`header_checks_out`], for a caller whose memory comes in pieces (a
/// header may straddle two of them).
pub fn magic_hits(haystack: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memmem::find_iter(haystack, &MAGIC_STORED)
}

/// Whether `bytes` starts with a region header whose CRC matches.
pub fn header_checks_out(bytes: &[u8]) -> bool {
    let Some(h) = bytes.get(..HEADER_SIZE) else {
        return false;
    };
    let Some(e) = endian_from_tag([h[8], h[9], h[10], h[11]]) else {
        return false;
    };
    let stored = crate::endian::u32_at(h, HEADER_SIZE - 4, e);
    let checksum = crate::endian::u16_at(h, 12, e).and_then(Checksum::of_version);
    checksum.is_some_and(|c| stored == Some(c.crc(&[&h[..HEADER_SIZE - 4]])))
}
