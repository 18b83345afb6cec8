//! x86-64 kernel virtual addresses to physical ones, through the crashed
//! kernel's own page tables: four levels, or five where VMCOREINFO says
//! `NUMBER(pgtable_l5_enabled)=1`, with 1 GiB and 2 MiB pages
//! (`arch/x86/include/asm/pgtable_types.h`, `pgtable_64_types.h`). The
//! top table, `init_top_pgt`, is found through the kernel image's own
//! mapping (`__pa_symbol`: `virt - __START_KERNEL_map + phys_base`).

use super::vmcoreinfo::{InfoError, VmcoreInfo};
use super::{TranslateError, VirtAddr};
use crate::phys::{PhysAddr, PhysError, PhysMemory};

/// `__START_KERNEL_map`: where the kernel image's mapping begins.
const START_KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;
/// `_PAGE_PRESENT`.
const PRESENT: u64 = 1;
/// `_PAGE_PSE`: the entry maps a 1 GiB or 2 MiB page itself.
const HUGE: u64 = 1 << 7;
/// The physical address bits of an entry (`__PHYSICAL_MASK_SHIFT` 52),
/// above the 4 KiB page offset.
const ADDRESS: u64 = 0x000f_ffff_ffff_f000;

/// How the crashed kernel maps its virtual addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct X86_64 {
    /// `init_top_pgt`'s physical address.
    top: PhysAddr,
    /// 4 or 5.
    levels: u32,
    phys_base: u64,
    /// AMD SME's encryption bit, set in page-table entries, not part of
    /// the address (`NUMBER(sme_mask)`; 0 without SME).
    sme_mask: u64,
}

impl X86_64 {
    /// The mapping VMCOREINFO describes.
    pub fn from_vmcoreinfo(info: &VmcoreInfo) -> Result<X86_64, InfoError> {
        // Signed in the note (`%ld`); the kernel uses it as unsigned.
        let phys_base = info.number("phys_base")? as u64;
        let levels = match info.number("pgtable_l5_enabled") {
            Ok(1) => 5,
            // Kernels before 4.14 did not say: four levels.
            Ok(0) | Err(InfoError::Missing(_)) => 4,
            Ok(n) => {
                return Err(InfoError::Invalid {
                    key: "NUMBER(pgtable_l5_enabled)".into(),
                    value: n.to_string(),
                    what: "0 or 1",
                })
            }
            Err(e) => return Err(e),
        };
        let sme_mask = match info.number("sme_mask") {
            Ok(mask) => mask as u64,
            Err(InfoError::Missing(_)) => 0,
            Err(e) => return Err(e),
        };
        let top_virt = info.symbol("init_top_pgt")?;
        let top = image_phys(top_virt, phys_base).ok_or_else(|| InfoError::Invalid {
            key: "SYMBOL(init_top_pgt)".into(),
            value: format!("{top_virt:x}"),
            what: "an address in the kernel image",
        })?;
        // A page table is a page: the top one at any other place is no
        // kernel's (and one near 2^64 would have its entries past it).
        if top.0 % 4096 != 0 {
            return Err(InfoError::Invalid {
                key: "NUMBER(phys_base)".into(),
                value: (phys_base as i64).to_string(),
                what: "an offset that leaves init_top_pgt page-aligned",
            });
        }
        Ok(X86_64 {
            top,
            levels,
            phys_base,
            sme_mask,
        })
    }

    /// The physical address of `virt`, by walking the page tables.
    pub fn translate(
        &self,
        mem: &dyn PhysMemory,
        virt: VirtAddr,
    ) -> Result<PhysAddr, TranslateError> {
        let (addr, bits) = (virt.0, 12 + 9 * self.levels);
        // Canonical: the bits above the top level's copy its highest one.
        let high = (addr as i64) >> (bits - 1);
        if high != 0 && high != -1 {
            return Err(TranslateError::NotCanonical { virt });
        }
        let mut table = self.top;
        for level in (1..=self.levels).rev() {
            let shift = 12 + 9 * (level - 1);
            let index = (addr >> shift) & 0x1ff;
            let table_error = |source| TranslateError::Table {
                virt,
                level,
                source,
            };
            let at = table
                .checked_add(index * 8)
                .ok_or(table_error(PhysError::Outside {
                    addr: PhysAddr(u64::MAX),
                }))?;
            let mut raw = [0u8; 8];
            mem.read(at, &mut raw).map_err(table_error)?;
            let entry = u64::from_le_bytes(raw) & !self.sme_mask;
            if entry & PRESENT == 0 {
                return Err(TranslateError::NotMapped { virt, level });
            }
            let page = 1u64 << shift;
            // A 1 GiB (level 3) or 2 MiB (level 2) page, or a 4 KiB one.
            if level == 1 || ((level == 2 || level == 3) && entry & HUGE != 0) {
                return Ok(PhysAddr(
                    (entry & ADDRESS & !(page - 1)) | (addr & (page - 1)),
                ));
            }
            table = PhysAddr(entry & ADDRESS);
        }
        unreachable!("level 1 always returns")
    }

    /// `__pa_symbol`: the physical address of a kernel-image address,
    /// without the page tables.
    pub fn image_phys(&self, virt: VirtAddr) -> Option<PhysAddr> {
        image_phys(virt.0, self.phys_base)
    }
}

/// `__pa_symbol()`: with KASLR the image can sit lower in physical memory
/// than its virtual offset says, and phys_base is then "negative" (the
/// note prints -111149056): the sum wraps, as the kernel's does.
fn image_phys(virt: u64, phys_base: u64) -> Option<PhysAddr> {
    let within = virt.checked_sub(START_KERNEL_MAP)?;
    Some(PhysAddr(within.wrapping_add(phys_base)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmem::testing::Ram;
    use crate::kmem::VirtAddr;

    const PHYS_BASE: u64 = 0x1000_0000;
    /// init_top_pgt's address: image offset 0x10000 in physical memory.
    const TOP: u64 = START_KERNEL_MAP + 0x1_0000;

    fn info(levels: u8, sme_mask: u64) -> VmcoreInfo {
        VmcoreInfo::parse(&format!(
            "SYMBOL(init_top_pgt)={TOP:x}\nNUMBER(phys_base)={PHYS_BASE}\n\
             NUMBER(pgtable_l5_enabled)={}\nNUMBER(sme_mask)={sme_mask}\n",
            u8::from(levels == 5)
        ))
    }

    /// Page tables at 0x1001_0000 (top), 0x2000, 0x3000, 0x4000 in a
    /// 4-level walk of the direct map's 0xffff_8880_0000_0000 on.
    fn four_levels(sme: u64) -> (Ram, X86_64) {
        let mut ram = Ram::new(0x1002_0000);
        let top = 0x1001_0000;
        let direct = 0xffff_8880_0000_0000u64;
        ram.entry(top, (direct >> 39) & 0x1ff, 0x2000 | PRESENT | sme);
        // 1 GiB page at physical 0x4000_0000 for the first GiB.
        ram.entry(0x2000, 0, 0x4000_0000 | PRESENT | HUGE | sme);
        // Then a table for the second GiB: a 2 MiB page and a 4 KiB table.
        ram.entry(0x2000, 1, 0x3000 | PRESENT | sme);
        ram.entry(0x3000, 0, 0x0060_0000 | PRESENT | HUGE | sme);
        ram.entry(0x3000, 1, 0x4000 | PRESENT | sme);
        ram.entry(0x4000, 5, 0x0007_f000 | PRESENT | sme);
        let x = X86_64::from_vmcoreinfo(&info(4, sme)).unwrap();
        (ram, x)
    }

    #[test]
    fn four_levels_with_each_page_size() {
        let (ram, x) = four_levels(0);
        let direct = 0xffff_8880_0000_0000u64;
        assert_eq!(
            x.translate(&ram, VirtAddr(direct + 0x123)).unwrap(),
            PhysAddr(0x4000_0123)
        );
        let second = direct + (1 << 30);
        assert_eq!(
            x.translate(&ram, VirtAddr(second + 0x1_2345)).unwrap(),
            PhysAddr(0x61_2345)
        );
        let small = second + (1 << 21) + 5 * 4096 + 0x9a;
        assert_eq!(
            x.translate(&ram, VirtAddr(small)).unwrap(),
            PhysAddr(0x7f09a)
        );
        // An entry not present names its level.
        let unmapped = second + (2 << 21);
        assert!(matches!(
            x.translate(&ram, VirtAddr(unmapped)),
            Err(TranslateError::NotMapped { virt, level: 2 }) if virt == VirtAddr(unmapped)
        ));
    }

    #[test]
    fn a_negative_phys_base_puts_the_image_below_its_virtual_offset() {
        // As a KASLR kernel's note has it: the image 0x6a0_0000 below
        // where its virtual offset alone would put it.
        let note = VmcoreInfo::parse(
            "SYMBOL(init_top_pgt)=ffffffffb3622000\nNUMBER(phys_base)=-111149056\n",
        );
        let x = X86_64::from_vmcoreinfo(&note).unwrap();
        assert_eq!(x.top, PhysAddr(0x3362_2000 - 0x6a0_0000));
    }

    #[test]
    fn the_sme_bit_is_not_part_of_the_address() {
        let sme = 1 << 47;
        let (ram, x) = four_levels(sme);
        let direct = 0xffff_8880_0000_0000u64;
        assert_eq!(
            x.translate(&ram, VirtAddr(direct + 7)).unwrap(),
            PhysAddr(0x4000_0007)
        );
    }

    #[test]
    fn a_non_canonical_address_or_a_table_outside_the_dump_is_an_error() {
        let (ram, x) = four_levels(0);
        assert!(matches!(
            x.translate(&ram, VirtAddr(0x0000_8000_0000_0000)),
            Err(TranslateError::NotCanonical {
                virt: VirtAddr(0x0000_8000_0000_0000)
            })
        ));
        let mut far = Ram::new(0x1002_0000);
        far.entry(0x1001_0000, 0, 0x7fff_f000 | PRESENT);
        assert!(matches!(
            x.translate(&far, VirtAddr(0x1000)),
            Err(TranslateError::Table { level: 3, .. })
        ));
    }

    #[test]
    fn a_top_table_that_is_no_page_is_refused() {
        // phys_base puts init_top_pgt 8 bytes below 2^64.
        let note = VmcoreInfo::parse(&format!(
            "SYMBOL(init_top_pgt)={TOP:x}\nNUMBER(phys_base)=-65544\n"
        ));
        assert_eq!(
            X86_64::from_vmcoreinfo(&note).unwrap_err().to_string(),
            "VMCOREINFO's NUMBER(phys_base) is \"-65544\", not an offset that \
             leaves init_top_pgt page-aligned"
        );
        // Walked all the same, its entries past 2^64 are not read.
        let x = X86_64 {
            top: PhysAddr(u64::MAX - 7),
            levels: 4,
            phys_base: 0,
            sme_mask: 0,
        };
        assert!(matches!(
            x.translate(&Ram::new(0x1000), VirtAddr(0xffff_8880_0000_0000)),
            Err(TranslateError::Table { level: 4, .. })
        ));
    }

    #[test]
    fn five_levels_take_57_bit_addresses() {
        let mut ram = Ram::new(0x1002_0000);
        let virt = 0xff11_0000_0000_0000u64;
        ram.entry(0x1001_0000, (virt >> 48) & 0x1ff, 0x2000 | PRESENT);
        ram.entry(0x2000, (virt >> 39) & 0x1ff, 0x3000 | PRESENT);
        ram.entry(0x3000, (virt >> 30) & 0x1ff, 0x8000_0000 | PRESENT | HUGE);
        let x = X86_64::from_vmcoreinfo(&info(5, 0)).unwrap();
        assert_eq!(
            x.translate(&ram, VirtAddr(virt + 0x42)).unwrap(),
            PhysAddr(0x8000_0042)
        );
        // Canonical for five levels, not for four.
        let four = X86_64::from_vmcoreinfo(&info(4, 0)).unwrap();
        assert!(matches!(
            four.translate(&ram, VirtAddr(virt)),
            Err(TranslateError::NotCanonical { .. })
        ));
    }

    #[test]
    fn the_image_is_mapped_by_phys_base() {
        let x = X86_64::from_vmcoreinfo(&info(4, 0)).unwrap();
        assert_eq!(
            x.image_phys(VirtAddr(START_KERNEL_MAP + 0x100_0000)),
            Some(PhysAddr(PHYS_BASE + 0x100_0000))
        );
        assert_eq!(x.image_phys(VirtAddr(0xffff_8880_0000_0000)), None);
    }
}
