//! Memory stored plainly in a file: raw images and ELF cores.

use crate::input::source::{FileOffset, Source, Window};
use crate::phys::{hole_at, read_pieces, Backing, MemoryMap, PhysAddr, PhysError, PhysMemory};
use std::sync::Arc;

/// Physical memory whose present runs are file ranges.
pub struct MappedMemory {
    source: Arc<dyn Source>,
    map: MemoryMap,
}

impl MappedMemory {
    pub fn new(source: Arc<dyn Source>, map: MemoryMap) -> MappedMemory {
        MappedMemory { source, map }
    }

    /// The file offset of `addr` and how many bytes follow it plainly.
    fn locate(&self, addr: PhysAddr) -> Result<(FileOffset, u64), PhysError> {
        match self.map.lookup(addr) {
            Some(r) if r.backing == Backing::Present => {
                let offset = r.offset.ok_or_else(|| hole_at(&self.map, addr))?;
                Ok((offset + (addr - r.start), r.end - addr))
            }
            _ => Err(hole_at(&self.map, addr)),
        }
    }
}

impl PhysMemory for MappedMemory {
    fn map(&self) -> &MemoryMap {
        &self.map
    }

    fn read(&self, addr: PhysAddr, buf: &mut [u8]) -> Result<(), PhysError> {
        read_pieces(addr, buf, |at, rest| {
            let (offset, room) = self.locate(at)?;
            let n = rest.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            self.source
                .read_exact_at(offset, &mut rest[..n])
                .map_err(|source| PhysError::Source { addr: at, source })?;
            Ok(n)
        })
    }

    fn window(&self, addr: PhysAddr, len: usize) -> Option<Window> {
        let (offset, room) = self.locate(addr).ok()?;
        if (len as u64) > room {
            return None;
        }
        self.source.window(offset, len)
    }
}
