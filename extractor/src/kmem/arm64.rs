//! arm64 kernel virtual addresses to physical ones, for the two mappings
//! the crashed kernel's own bookkeeping lies in, each a constant offset
//! (`arch/arm64/include/asm/memory.h`): the kernel image
//! (`__kimg_to_phys`: `virt - kimage_voffset`) and the linear map of all
//! memory (`__lm_to_phys`: `virt - PAGE_OFFSET + PHYS_OFFSET`). The printk
//! ring is in one or the other: its static buffers in the image, a
//! `log_buf_len=` buffer from memblock in the linear map. Other addresses
//! (vmalloc, modules) are refused by name: they would need a walk of the
//! page tables, which on Debian's 6.12 are LPA2's, five levels deep.

use super::vmcoreinfo::{InfoError, VmcoreInfo};
use super::{TranslateError, VirtAddr};
use crate::phys::PhysAddr;
use std::ops::Range;

/// The kernel image's alignment (`MIN_KIMG_ALIGN`, 2 MiB): `_text` lies
/// on it, `_stext` just after.
const IMAGE_ALIGN: u64 = 2 << 20;

/// How far past `_text` an address is taken for the image's. VMCOREINFO
/// gives no `_end`; Debian's images (text, data and bss) are under
/// 48 MiB.
const IMAGE_SPAN: u64 = 128 << 20;

/// How the crashed kernel maps its image and its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arm64 {
    kimage_voffset: u64,
    phys_offset: u64,
    /// The linear map: `PAGE_OFFSET..PAGE_END`.
    linear: Range<u64>,
    image: Range<u64>,
}

impl Arm64 {
    /// The mappings VMCOREINFO describes: `NUMBER(VA_BITS)` and
    /// `NUMBER(TCR_EL1_T1SZ)` (the bits the CPU actually gave the
    /// kernel's half, 64 − T1SZ: a 52-bit build on a CPU without LPA2
    /// runs with 48), `NUMBER(kimage_voffset)`, `NUMBER(PHYS_OFFSET)` and
    /// `SYMBOL(_stext)`.
    pub fn from_vmcoreinfo(info: &VmcoreInfo) -> Result<Arm64, InfoError> {
        let va_bits = info.number("VA_BITS")?;
        if !(36..=52).contains(&va_bits) {
            return Err(InfoError::Invalid {
                key: "NUMBER(VA_BITS)".into(),
                value: va_bits.to_string(),
                what: "36 to 52",
            });
        }
        let va_bits = va_bits as u32;
        let actual = match info.unsigned("TCR_EL1_T1SZ") {
            Ok(t1sz) if (12..=28).contains(&t1sz) => 64 - t1sz as u32,
            Ok(t1sz) => {
                return Err(InfoError::Invalid {
                    key: "NUMBER(TCR_EL1_T1SZ)".into(),
                    value: format!("{t1sz:#x}"),
                    what: "12 to 28",
                })
            }
            // Before 5.9 the note did not say: the build's.
            Err(InfoError::Missing(_)) => va_bits,
            Err(e) => return Err(e),
        };
        // PAGE_OFFSET = -(1 << vabits_actual); PAGE_END =
        // -(1 << (VA_BITS_MIN - 1)), VA_BITS_MIN being 48 for 52-bit builds.
        let linear = (u64::MAX << actual)..(u64::MAX << (va_bits.min(48) - 1));
        let stext = info.symbol("_stext")?;
        let start = stext & !(IMAGE_ALIGN - 1);
        Ok(Arm64 {
            kimage_voffset: info.unsigned("kimage_voffset")?,
            phys_offset: info.unsigned("PHYS_OFFSET")?,
            linear,
            image: start..start.saturating_add(IMAGE_SPAN),
        })
    }

    /// The physical address of `virt`, if it is in the image or the
    /// linear map.
    pub fn translate(&self, virt: VirtAddr) -> Result<PhysAddr, TranslateError> {
        let addr = virt.0;
        if self.linear.contains(&addr) {
            return Ok(PhysAddr(
                (addr - self.linear.start).wrapping_add(self.phys_offset),
            ));
        }
        if self.image.contains(&addr) {
            return Ok(PhysAddr(addr.wrapping_sub(self.kimage_voffset)));
        }
        Err(TranslateError::NotLinear { virt })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of the note Debian's arm64 6.12 wrote into a QEMU dump
    /// (a 52-bit build on a CPU with LPA2, KASLR on).
    const NOTE_6_12: &str = "SYMBOL(_stext)=ffff9f87bf010000\n\
        SYMBOL(prb)=ffff9f87c16a9e10\n\
        SYMBOL(mem_section)=fff000003fc03bc0\n\
        NUMBER(VA_BITS)=52\n\
        NUMBER(kimage_voffset)=0xffff9f877ee00000\n\
        NUMBER(PHYS_OFFSET)=0x40000000\n\
        NUMBER(TCR_EL1_T1SZ)=0xc\n\
        KERNELOFFSET=1f873f000000\n";

    #[test]
    fn the_image_and_the_linear_map_each_by_their_offset() {
        let info = VmcoreInfo::parse(NOTE_6_12);
        let a = Arm64::from_vmcoreinfo(&info).unwrap();
        // prb, in the image's data.
        assert_eq!(
            a.translate(VirtAddr(info.symbol("prb").unwrap())).unwrap(),
            PhysAddr(0x428a_9e10)
        );
        // mem_section's array, from memblock: the linear map, which
        // starts at PHYS_OFFSET.
        assert_eq!(
            a.translate(VirtAddr(0xfff0_0000_3fc0_3bc0)).unwrap(),
            PhysAddr(0x7fc0_3bc0)
        );
        assert_eq!(
            a.translate(VirtAddr(0xfff0_0000_0000_0000)).unwrap(),
            PhysAddr(0x4000_0000)
        );
    }

    #[test]
    fn a_48_bit_kernel_s_linear_map_starts_lower_in_the_address_space() {
        // 6.1's layout: VA_BITS 48, PAGE_OFFSET 0xffff000000000000.
        let info = VmcoreInfo::parse(
            "SYMBOL(_stext)=ffffa0d0a9410000\nNUMBER(VA_BITS)=48\n\
             NUMBER(kimage_voffset)=0xffffa0d068e00000\nNUMBER(PHYS_OFFSET)=0x40000000\n\
             NUMBER(TCR_EL1_T1SZ)=0x10\n",
        );
        let a = Arm64::from_vmcoreinfo(&info).unwrap();
        assert_eq!(
            a.translate(VirtAddr(0xffff_0000_0123_4567)).unwrap(),
            PhysAddr(0x4123_4567)
        );
        assert_eq!(
            a.translate(VirtAddr(0xffff_a0d0_a940_0000)).unwrap(),
            PhysAddr(0x4060_0000)
        );
    }

    #[test]
    fn vmalloc_modules_and_user_addresses_are_refused_by_name() {
        let a = Arm64::from_vmcoreinfo(&VmcoreInfo::parse(NOTE_6_12)).unwrap();
        for virt in [
            // A module's, a vmalloc's far from the image, a user's.
            0xffff_8000_0012_3000u64,
            0xffff_c000_0000_0000,
            0x0000_aaaa_0000_0000,
            // Past the image's span.
            0xffff_9f87_bf00_0000 + IMAGE_SPAN,
        ] {
            assert!(matches!(
                a.translate(VirtAddr(virt)),
                Err(TranslateError::NotLinear { virt: v }) if v == VirtAddr(virt)
            ));
        }
    }

    #[test]
    fn a_malformed_or_missing_note_is_named() {
        let missing = VmcoreInfo::parse("NUMBER(VA_BITS)=48\n");
        assert_eq!(
            Arm64::from_vmcoreinfo(&missing),
            Err(InfoError::Missing("SYMBOL(_stext)".into()))
        );
        let odd = VmcoreInfo::parse("NUMBER(VA_BITS)=64\n");
        assert!(matches!(
            Arm64::from_vmcoreinfo(&odd),
            Err(InfoError::Invalid { .. })
        ));
    }
}
