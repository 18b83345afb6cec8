//! The callsite area's writer: entries added one after another, each
//! `size` first and its CRC last (FORMAT.md, section 18).

use crate::debug_args::Callsite;
use crate::endian::{Endian, U16, U32, U64};
use crate::layout::*;
use core::sync::atomic::{fence, Ordering};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Why a callsite was not added; the area's `refused` counts it, and its
/// messages are to be recorded formatted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the callsite's entry of {0} bytes is larger than an entry may be")]
    TooLarge(usize),
    #[error("the callsite area is full")]
    Full,
}

/// Adds entries to the callsite area, one after another.
pub struct CallsiteWriter<'a> {
    area: &'a mut [u8],
    e: Endian,
    generation: u64,
    /// Where the next entry goes: the reservation cursor the kernel keeps
    /// outside the region.
    next: usize,
}

impl<'a> CallsiteWriter<'a> {
    /// Zeroes the area and writes its header.
    pub(super) fn start(area: &'a mut [u8], e: Endian, generation: u64) -> CallsiteWriter<'a> {
        area.fill(0);
        let mut h = CallsiteHeader::new_zeroed();
        h.magic = U32::new(e, CALLSITE_MAGIC);
        area[..CALLSITE_HEADER_SIZE].copy_from_slice(h.as_bytes());
        CallsiteWriter {
            area,
            e,
            generation,
            next: CALLSITE_HEADER_SIZE,
        }
    }

    /// Adds `def` and returns its id: `size` is written first, then the
    /// body, then `crc`, so a torn entry keeps a `size` a walk can skip.
    pub fn add(&mut self, def: &Callsite<'_>) -> Result<u32, Refused> {
        let strings = [def.module, def.function, def.file, def.format];
        let unpadded = CALLSITE_ENTRY_SIZE + strings.iter().map(|s| 2 + s.len()).sum::<usize>();
        let size = unpadded.next_multiple_of(RECORD_ALIGN);
        let refused = if size > MAX_CALLSITE_SIZE || strings.iter().any(|s| s.len() > 0xFFFF) {
            Some(Refused::TooLarge(size))
        } else if self.next + size > self.area.len() {
            Some(Refused::Full)
        } else {
            None
        };
        if let Some(why) = refused {
            self.count_refused();
            return Err(why);
        }
        let (e, id) = (self.e, self.next);
        self.next += size;
        let entry = &mut self.area[id..id + size];
        entry[..4].copy_from_slice(&U32::new(e, size as u32).0);
        fence(Ordering::Release);
        let mut head = CallsiteEntry::new_zeroed();
        head.size = U32::new(e, size as u32);
        head.source = def.source;
        head.level = def.level;
        head.category = U16::new(e, def.category);
        head.line = U32::new(e, def.line);
        entry[8..CALLSITE_ENTRY_SIZE].copy_from_slice(&head.as_bytes()[8..]);
        let mut at = CALLSITE_ENTRY_SIZE;
        for s in strings {
            entry[at..at + 2].copy_from_slice(&U16::new(e, s.len() as u16).0);
            entry[at + 2..at + 2 + s.len()].copy_from_slice(s);
            at += 2 + s.len();
        }
        let generation = U64::new(e, self.generation);
        let crc = crc32(&[&generation.0, &entry[8..]]);
        fence(Ordering::Release);
        entry[4..8].copy_from_slice(&U32::new(e, crc).0);
        Ok(id as u32)
    }

    fn count_refused(&mut self) {
        let e = self.e;
        if let Ok(h) = CallsiteHeader::mut_from_bytes(&mut self.area[..CALLSITE_HEADER_SIZE]) {
            h.refused = U32::new(e, h.refused.get(e).saturating_add(1));
        }
    }
}
