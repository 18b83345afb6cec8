//! The descriptors of a persistent ftrace buffer (`kernel/trace/ring_buffer.c`,
//! `reserve_mem=… trace_instance=NAME@LABEL` or `trace_instance=NAME@ADDR:SIZE`):
//! where each CPU's sub-buffers lie and in which order the previous boot
//! wrote them.
//!
//! Three generations share the magic `0xBADFEED` and tell themselves apart
//! by the word after it:
//!
//! | kernels | at the area's start | word at +4 | per-CPU descriptor |
//! |---|---|---|---|
//! | 6.12 (Debian's 6.12.117) | CPU 0's descriptor | 56 (`struct_size`) | magic, size, text and data addresses, first/head/commit, sizes, order |
//! | 6.13–6.14 | CPU 0's descriptor | 48 | one `kaslr_addr` for the two addresses |
//! | 6.15+ (Debian's 7.3.4) | a global descriptor (magic, sizes, `total_size`, `buffers_offset`), then tracing's scratch area | `0x00180020` | 32 bytes: first/head/commit, sizes, order |
//! | 6.15+ with the invalid-page test's fields | the same | `0x00180028` | 40 bytes: also `nr_invalid`, `entry_bytes` |
//!
//! (The 40-byte descriptor is described for 7.2; Debian's 7.3.4 still
//! writes the 32-byte one, so it is told by its size, not a version.)
//!
//! After each CPU's descriptor and its `int buffers[nr_subbufs]` (logical
//! index to physical sub-buffer, `[0]` the reader page), aligned up to the
//! sub-buffer size, come its sub-buffers; the next CPU's chunk follows.
//! Every chunk has CPU 0's sub-buffer count (`rb_range_meta()`). The
//! head and commit pointers are the previous boot's virtual addresses; like
//! the kernel, the reader relocates them against `first_buffer`.

use crate::kmem::symbols::KernelText;
use crate::phys::{PhysAddr, PhysMemory};
use std::fmt;

/// `RING_BUFFER_META_MAGIC`.
pub const MAGIC: u32 = 0x0BAD_FEED;
/// `sizeof(struct ring_buffer_meta)` of 6.15+: magic, struct sizes,
/// `total_size`, `buffers_offset`.
pub const GLOBAL_META_SIZE: u64 = 24;
/// The most sub-buffers one CPU may claim (1 GiB of 4 KiB pages): a count
/// the memory could never hold is refused before anything is allocated
/// for it.
pub const MAX_SUBBUFS: u32 = 1 << 18;

/// Which kernel wrote the buffer, as far as its descriptors tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// 6.12: a descriptor per CPU with the text and data addresses.
    PerCpuTextData,
    /// 6.13 and 6.14: a descriptor per CPU with `kaslr_addr`.
    PerCpuKaslr,
    /// 6.15 and later: a global descriptor, then 32-byte CPU descriptors.
    Global,
    /// The same with 40-byte CPU descriptors, which add the invalid-page
    /// test's counts.
    GlobalTested,
}

impl Generation {
    /// The generation whose descriptor has `word` after the magic.
    pub fn from_word(word: u32) -> Option<Generation> {
        match word {
            56 => Some(Generation::PerCpuTextData),
            48 => Some(Generation::PerCpuKaslr),
            0x0018_0020 => Some(Generation::Global),
            0x0018_0028 => Some(Generation::GlobalTested),
            _ => None,
        }
    }

    /// The word after the magic.
    pub fn word(self) -> u32 {
        match self {
            Generation::PerCpuTextData => 56,
            Generation::PerCpuKaslr => 48,
            Generation::Global => 0x0018_0020,
            Generation::GlobalTested => 0x0018_0028,
        }
    }

    pub fn has_global_meta(self) -> bool {
        matches!(self, Generation::Global | Generation::GlobalTested)
    }

    /// Bytes of one CPU's descriptor before its `buffers[]`.
    pub fn cpu_meta_size(self) -> u64 {
        match self {
            Generation::PerCpuTextData => 56,
            Generation::PerCpuKaslr => 48,
            Generation::Global => 32,
            Generation::GlobalTested => 40,
        }
    }

    /// Where `first_buffer` is in a CPU's descriptor; head, commit, the
    /// sub-buffer size and count follow it.
    fn pointers_at(self) -> usize {
        match self {
            Generation::PerCpuTextData => 24,
            Generation::PerCpuKaslr => 16,
            Generation::Global | Generation::GlobalTested => 0,
        }
    }

    /// The kernels that write this generation.
    pub fn kernels(self) -> &'static str {
        match self {
            Generation::PerCpuTextData => "6.12",
            Generation::PerCpuKaslr => "6.13-6.14",
            Generation::Global => "6.15+",
            Generation::GlobalTested => "6.15+ (with test counts)",
        }
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Linux {} layout", self.kernels())
    }
}

/// One CPU's descriptor, as the previous boot left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuMeta {
    /// Where the descriptor is.
    pub addr: PhysAddr,
    pub first_buffer: u64,
    pub head_buffer: u64,
    pub commit_buffer: u64,
    pub subbuf_size: u32,
    pub nr_subbufs: u32,
    /// The invalid-page test's counts (40-byte descriptors): pages it
    /// corrupted at the panic, and the bytes it expects to stay readable.
    pub tested: Option<(u32, u32)>,
    /// `rb_meta_init_text_addr`'s address (6.12) or the KASLR offset
    /// (6.13, 6.14), from a per-CPU descriptor.
    pub text_addr: Option<u64>,
}

/// Where a 64-bit kernel's image is: the upper half of the address space
/// (x86-64 links it at 0xffffffff81000000, arm64 at KIMAGE_VADDR). What a
/// saved `_text` must be at least.
const KERNEL_IMAGE_FLOOR: u64 = 0xffff_8000_0000_0000;

/// Where the writing boot put the kernel, as the area says: CPU 0's
/// descriptor (6.12: the address of `rb_meta_init_text_addr`, the
/// function that saves it; 6.13–6.14: the KASLR offset), or tracing's
/// scratch area after the global one (6.15+: `_text`). The scratch area
/// began as `{text_addr, nr_entries, entries[]}` and later gained a
/// leading `unsigned int clock_id`; it is zeroed when the buffer is set
/// up, so the padding after `clock_id` is 0 and the first word that is a
/// kernel image address is `_text`.
pub fn kernel_text(mem: &dyn PhysMemory, head: &Head, first: &CpuMeta) -> Option<KernelText> {
    match head.generation {
        Generation::PerCpuTextData => first
            .text_addr
            .filter(|&addr| addr >= KERNEL_IMAGE_FLOOR)
            .map(|addr| KernelText::Symbol {
                name: "rb_meta_init_text_addr",
                addr,
            }),
        Generation::PerCpuKaslr => first.text_addr.map(KernelText::KaslrOffset),
        Generation::Global | Generation::GlobalTested => {
            // Both words must lie before the first chunk; an area at the
            // top of the address space has no room for them.
            let scratch = head.base.checked_add(GLOBAL_META_SIZE)?;
            if scratch
                .checked_add(16)
                .is_none_or(|end| head.first_chunk < end)
            {
                return None;
            }
            let mut words = [0u8; 16];
            mem.read(scratch, &mut words).ok()?;
            [u64_at(&words, 0), u64_at(&words, 8)]
                .into_iter()
                .find(|&w| w >= KERNEL_IMAGE_FLOOR)
                .map(|addr| KernelText::Symbol {
                    name: "_text",
                    addr,
                })
        }
    }
}

/// Why a descriptor cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("no persistent ftrace descriptor (magic {MAGIC:#x}) at {0:#x}")]
    NoMagic(PhysAddr),
    #[error("descriptor at {0:#x}: unknown struct size {1:#x}")]
    UnknownSize(PhysAddr, u32),
    #[error("descriptor at {0:#x} is not in the dump")]
    Unreadable(PhysAddr),
    #[error("descriptor at {0:#x}: sub-buffer size {1} is not a page size (4 KiB to 64 KiB)")]
    SubbufSize(PhysAddr, u32),
    #[error("descriptor at {0:#x}: {1} sub-buffers (at least 2, at most {MAX_SUBBUFS})")]
    SubbufCount(PhysAddr, u32),
    #[error("global descriptor at {0:#x}: buffers at {1:#x} past the area's {2:#x} bytes")]
    BuffersOffset(PhysAddr, u64, u64),
    #[error("descriptor at {0:#x}: its sub-buffers run to {1:#x}, past {2}")]
    PastEnd(PhysAddr, PhysAddr, &'static str),
}

impl MetaError {
    /// Where the descriptor at fault is.
    pub fn addr(&self) -> PhysAddr {
        match *self {
            MetaError::NoMagic(a)
            | MetaError::UnknownSize(a, _)
            | MetaError::Unreadable(a)
            | MetaError::SubbufSize(a, _)
            | MetaError::SubbufCount(a, _)
            | MetaError::BuffersOffset(a, _, _)
            | MetaError::PastEnd(a, _, _) => a,
        }
    }
}

/// The area's head: its generation, and where CPU 0's chunk starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub base: PhysAddr,
    pub generation: Generation,
    /// `total_size` of a global descriptor.
    pub total_size: Option<u64>,
    pub first_chunk: PhysAddr,
}

/// Reads the magic and the word after it at `at`.
pub fn magic_at(mem: &dyn PhysMemory, at: PhysAddr) -> Result<Generation, MetaError> {
    let mut word = [0u8; 8];
    mem.read(at, &mut word)
        .map_err(|_| MetaError::Unreadable(at))?;
    if u32_at(&word, 0) != MAGIC {
        return Err(MetaError::NoMagic(at));
    }
    let size = u32_at(&word, 4);
    Generation::from_word(size).ok_or(MetaError::UnknownSize(at, size))
}

/// Reads the area's head at `base`.
pub fn head(mem: &dyn PhysMemory, base: PhysAddr) -> Result<Head, MetaError> {
    let generation = magic_at(mem, base)?;
    if !generation.has_global_meta() {
        return Ok(Head {
            base,
            generation,
            total_size: None,
            first_chunk: base,
        });
    }
    let mut meta = [0u8; GLOBAL_META_SIZE as usize];
    mem.read(base, &mut meta)
        .map_err(|_| MetaError::Unreadable(base))?;
    let total_size = u64_at(&meta, 8);
    let buffers_offset = u64_at(&meta, 16);
    // The kernel also requires the offset it would compute itself
    // (the scratch area's size is its own business); a reader only
    // needs it to stay inside the area, which ends below 2^64.
    let first_chunk = base
        .checked_add(buffers_offset)
        .filter(|_| (GLOBAL_META_SIZE..total_size).contains(&buffers_offset))
        .ok_or(MetaError::BuffersOffset(base, buffers_offset, total_size))?;
    Ok(Head {
        base,
        generation,
        total_size: Some(total_size),
        first_chunk,
    })
}

/// Reads the CPU descriptor at `at`, checking what the chunk's geometry
/// depends on.
pub fn cpu_meta(
    mem: &dyn PhysMemory,
    generation: Generation,
    at: PhysAddr,
) -> Result<CpuMeta, MetaError> {
    if !generation.has_global_meta() {
        let found = magic_at(mem, at)?;
        if found != generation {
            return Err(MetaError::UnknownSize(at, found.word()));
        }
    }
    let mut meta = [0u8; 56];
    let size = generation.cpu_meta_size() as usize;
    mem.read(at, &mut meta[..size])
        .map_err(|_| MetaError::Unreadable(at))?;
    let p = generation.pointers_at();
    let m = CpuMeta {
        addr: at,
        first_buffer: u64_at(&meta, p),
        head_buffer: u64_at(&meta, p + 8),
        commit_buffer: u64_at(&meta, p + 16),
        subbuf_size: u32_at(&meta, p + 24),
        nr_subbufs: u32_at(&meta, p + 28),
        tested: (generation == Generation::GlobalTested)
            .then(|| (u32_at(&meta, 32), u32_at(&meta, 36))),
        text_addr: (!generation.has_global_meta()).then(|| u64_at(&meta, 8)),
    };
    if !(4096..=65536).contains(&m.subbuf_size) || !m.subbuf_size.is_power_of_two() {
        return Err(MetaError::SubbufSize(at, m.subbuf_size));
    }
    if !(2..=MAX_SUBBUFS).contains(&m.nr_subbufs) {
        return Err(MetaError::SubbufCount(at, m.nr_subbufs));
    }
    Ok(m)
}

/// A CPU chunk's sub-buffers and its end, for a chunk whose descriptor is
/// at `at` (`rb_range_align_subbuf()`): the descriptor and its order
/// array, aligned up to the sub-buffer size, then the sub-buffers.
pub fn chunk_geometry(
    generation: Generation,
    at: PhysAddr,
    subbuf_size: u32,
    nr_subbufs: u32,
) -> Option<(PhysAddr, PhysAddr)> {
    let ss = u64::from(subbuf_size);
    let n = u64::from(nr_subbufs);
    let past_meta =
        at.0.checked_add(generation.cpu_meta_size())?
            .checked_add(4 * n)?;
    let subbufs = past_meta.checked_next_multiple_of(ss)?;
    let end = subbufs.checked_add(ss.checked_mul(n)?)?;
    Some((PhysAddr(subbufs), PhysAddr(end)))
}

/// Reads `buffers[]` of the descriptor `m`.
pub fn order(
    mem: &dyn PhysMemory,
    generation: Generation,
    m: &CpuMeta,
) -> Result<Vec<i32>, MetaError> {
    let at = m.addr + generation.cpu_meta_size();
    let mut raw = vec![0u8; 4 * m.nr_subbufs as usize];
    mem.read(at, &mut raw)
        .map_err(|_| MetaError::Unreadable(at))?;
    Ok(raw
        .chunks_exact(4)
        .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::mapped::MappedMemory;
    use crate::phys::MemoryMap;
    use std::sync::Arc;

    #[test]
    fn a_scratch_area_at_the_top_of_the_address_space_is_none() {
        let mem = MappedMemory::new(Arc::new(Vec::new()), MemoryMap::new(Vec::new()));
        let first = CpuMeta {
            addr: PhysAddr(u64::MAX - 4),
            first_buffer: 0,
            head_buffer: 0,
            commit_buffer: 0,
            subbuf_size: 4096,
            nr_subbufs: 2,
            tested: None,
            text_addr: None,
        };
        for base in [u64::MAX - GLOBAL_META_SIZE - 8, u64::MAX - 8] {
            let head = Head {
                base: PhysAddr(base),
                generation: Generation::Global,
                total_size: Some(64),
                first_chunk: PhysAddr(u64::MAX - 4),
            };
            assert_eq!(kernel_text(&mem, &head, &first), None);
        }
    }
}
