//! The crashed kernel's memory by its own virtual addresses, for the
//! readers of what the kernel itself keeps (its printk log): where
//! VMCOREINFO says its symbols are ([`vmcoreinfo`]) and how the kernel
//! maps them: x86-64's page tables ([`x86_64`]), arm64's image and
//! linear map ([`arm64`]); over any dump's [`PhysMemory`].
//!
//! A read fails at the first byte that is not mapped or not in the dump,
//! and says which and why: nothing is read as zeros.

pub mod arm64;
pub mod symbols;
pub mod vmcoreinfo;
pub mod x86_64;

use crate::phys::{PhysAddr, PhysError, PhysMemory};
use arm64::Arm64;
use std::fmt;
use std::ops::Add;
use vmcoreinfo::{InfoError, VmcoreInfo};
use x86_64::X86_64;

/// A virtual address of the crashed kernel: a pointer read from its
/// memory or a symbol VMCOREINFO gives. Not a [`PhysAddr`]: only its page
/// tables map one to the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtAddr(pub u64);

/// The address `bytes` on. It wraps as the CPU's arithmetic does: a
/// pointer read from a damaged dump can be anything, and the walk then
/// says where it leads (nowhere canonical, or nothing mapped).
impl Add<u64> for VirtAddr {
    type Output = VirtAddr;
    fn add(self, bytes: u64) -> VirtAddr {
        VirtAddr(self.0.wrapping_add(bytes))
    }
}

impl fmt::LowerHex for VirtAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Why a kernel virtual address could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    #[error("{virt:#x} is not a canonical address")]
    NotCanonical { virt: VirtAddr },
    #[error("{virt:#x} is not mapped (no level-{level} page-table entry)")]
    NotMapped { virt: VirtAddr, level: u32 },
    #[error("the level-{level} page table for {virt:#x} cannot be read: {source}")]
    Table {
        virt: VirtAddr,
        level: u32,
        source: PhysError,
    },
    #[error("{virt:#x} is in neither the kernel image nor the linear map (arm64: crashring does not walk its page tables)")]
    NotLinear { virt: VirtAddr },
    #[error("{virt:#x} (physical {phys:#x}): {source}")]
    Read {
        virt: VirtAddr,
        phys: PhysAddr,
        source: PhysError,
    },
}

/// How the crashed kernel mapped its addresses, by its architecture.
enum Mapping {
    X86_64(X86_64),
    Arm64(Arm64),
}

impl Mapping {
    /// The architecture is the one whose own entries the note has:
    /// arm64's `NUMBER(kimage_voffset)`, else x86-64's.
    fn from_vmcoreinfo(info: &VmcoreInfo) -> Result<Mapping, InfoError> {
        match info.has("NUMBER(kimage_voffset)") {
            true => Arm64::from_vmcoreinfo(info).map(Mapping::Arm64),
            false => X86_64::from_vmcoreinfo(info).map(Mapping::X86_64),
        }
    }

    fn translate(&self, mem: &dyn PhysMemory, virt: VirtAddr) -> Result<PhysAddr, TranslateError> {
        match self {
            Mapping::X86_64(x) => x.translate(mem, virt),
            Mapping::Arm64(a) => a.translate(virt),
        }
    }
}

/// A dump's memory read by the crashed kernel's virtual addresses.
pub struct KernelMemory<'m> {
    mem: &'m dyn PhysMemory,
    arch: Mapping,
}

impl<'m> KernelMemory<'m> {
    /// `mem` as the kernel that VMCOREINFO describes mapped it.
    pub fn new(mem: &'m dyn PhysMemory, info: &VmcoreInfo) -> Result<KernelMemory<'m>, InfoError> {
        Ok(KernelMemory {
            mem,
            arch: Mapping::from_vmcoreinfo(info)?,
        })
    }

    /// Fills `buf` from `virt` on, page by page.
    pub fn read(&self, virt: VirtAddr, buf: &mut [u8]) -> Result<(), TranslateError> {
        let mut done = 0;
        while done < buf.len() {
            let at = virt + done as u64;
            let phys = self.arch.translate(self.mem, at)?;
            // Up to the end of the smallest page the address can be in.
            let len = (4096 - (at.0 & 0xfff) as usize).min(buf.len() - done);
            self.mem
                .read(phys, &mut buf[done..done + len])
                .map_err(|source| TranslateError::Read {
                    virt: at,
                    phys,
                    source,
                })?;
            done += len;
        }
        Ok(())
    }

    /// The little-endian u64 at `virt`.
    pub fn u64(&self, virt: VirtAddr) -> Result<u64, TranslateError> {
        let mut b = [0u8; 8];
        self.read(virt, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Memory for the tests of the readers above this layer.
#[cfg(test)]
pub(crate) mod testing {
    use crate::phys::{Backing, MemoryMap, PhysAddr, PhysError, PhysMemory, Run};

    /// RAM from physical 0 on, all present.
    pub(crate) struct Ram {
        bytes: Vec<u8>,
        map: MemoryMap,
    }

    impl Ram {
        pub(crate) fn new(size: usize) -> Ram {
            Ram::of(vec![0; size])
        }

        /// `bytes` from physical 0 on.
        pub(crate) fn of(bytes: Vec<u8>) -> Ram {
            let end = PhysAddr(bytes.len() as u64);
            Ram {
                bytes,
                map: MemoryMap::new(vec![Run {
                    start: PhysAddr(0),
                    end,
                    backing: Backing::Present,
                    offset: None,
                }]),
            }
        }

        /// The 8-byte entry `index` of the page table at `table`.
        pub(crate) fn entry(&mut self, table: u64, index: u64, value: u64) {
            self.put(table + index * 8, &value.to_le_bytes());
        }

        pub(crate) fn put(&mut self, at: u64, bytes: &[u8]) {
            let at = at as usize;
            self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }

    impl PhysMemory for Ram {
        fn map(&self) -> &MemoryMap {
            &self.map
        }

        fn read(&self, addr: PhysAddr, buf: &mut [u8]) -> Result<(), PhysError> {
            let start = addr.0 as usize;
            let bytes = self
                .bytes
                .get(start..start + buf.len())
                .ok_or(PhysError::Outside { addr })?;
            buf.copy_from_slice(bytes);
            Ok(())
        }
    }
}
