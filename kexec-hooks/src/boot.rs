//! What the firmware and the boot loader do to memory before the kernel
//! reserves the range, which no `/proc/iomem` of a running system shows:
//! whether the firmware wipes memory at the next reset, where this boot's
//! initrd and kernel image were loaded, and which `memmap=` ranges the
//! boot loader's configuration reserves for other uses from the next boot
//! on.

use crate::iomem::parse_size;
use crate::system::System;
use std::ops::Range;

/// The TCG Platform Reset Attack Mitigation variable. Debian's kernels
/// (`CONFIG_RESET_ATTACK_MITIGATION=y`) set it in the EFI stub at every
/// boot where the firmware has it, and such a firmware clears all memory
/// at the next reset unless an orderly shutdown cleared the request: after
/// a crash, the region is wiped before the next boot can read it.
pub const MOR_VARIABLE: &str =
    "/sys/firmware/efi/efivars/MemoryOverwriteRequestControl-e20939be-32d4-41be-a150-897f85d49829";
const EFI: &str = "/sys/firmware/efi";
/// x86's boot parameters as the boot loader filled them (the "zero page").
const BOOT_PARAMS: &str = "/sys/kernel/boot_params/data";

/// How this machine's firmware treats memory across a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firmware {
    /// BIOS (or no EFI runtime): no wipe request exists.
    Bios,
    /// UEFI without a memory-overwrite request.
    Uefi,
    /// UEFI with MOR's "clear memory" bit set: the next reset wipes RAM.
    UefiWipesMemory,
}

pub fn firmware(sys: &System) -> Firmware {
    if !sys.path(EFI).is_dir() {
        return Firmware::Bios;
    }
    // efivarfs: 4 bytes of attributes, then the variable's one byte.
    match sys.read_bytes(MOR_VARIABLE) {
        Ok(Some(bytes)) if bytes.get(4).is_some_and(|b| b & 1 == 1) => Firmware::UefiWipesMemory,
        _ => Firmware::Uefi,
    }
}

/// Where the boot loader put this boot's initrd (the boot parameters'
/// `ramdisk_image` and `ramdisk_size`, with their high halves), if it
/// loaded one and the parameters can be read (x86, root).
pub fn initrd(sys: &System) -> Option<Range<u64>> {
    let p = sys.read_bytes(BOOT_PARAMS).ok()??;
    let u32_at = |at: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            p.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    // Documentation/arch/x86/zero-page.rst and boot.rst.
    let start = u32_at(0x218)? | u32_at(0x0c0)? << 32;
    let size = u32_at(0x21c)? | u32_at(0x0c4)? << 32;
    // Odd parameters (past the end of memory) are no initrd to avoid.
    (size > 0).then_some(())?;
    Some(start..start.checked_add(size)?)
}

/// Where this boot's kernel image lies: `/proc/iomem`'s "Kernel code"
/// through "Kernel bss".
pub fn kernel_image(sys: &System) -> Option<Range<u64>> {
    let iomem = sys.read("/proc/iomem").ok()??;
    let parts: Vec<Range<u64>> = iomem
        .lines()
        .filter_map(|l| {
            let (range, name) = l.trim().split_once(" : ")?;
            name.starts_with("Kernel ").then_some(())?;
            let (a, b) = range.split_once('-')?;
            let (a, b) = (
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            );
            Some(a..b.saturating_add(1))
        })
        .collect();
    let start = parts.iter().map(|r| r.start).min()?;
    let end = parts.iter().map(|r| r.end).max()?;
    // Addresses read as zero without root.
    (end > start && start > 0).then_some(start..end)
}

/// The `memmap=SIZE$ADDR` (reserve) and `memmap=SIZE!ADDR` (persistent
/// memory) ranges in kernel command-line text: what another tool (ramoops,
/// a pmem emulation) keeps out of RAM.
pub fn memmap_ranges(text: &str) -> Vec<Range<u64>> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .filter_map(|w| w.strip_prefix("memmap="))
        .flat_map(|m| m.split(','))
        .filter_map(|m| {
            // GRUB's configuration escapes `$` as `\$` (or more backslashes).
            let m = m.replace('\\', "");
            let (size, addr) = m.split_once(['$', '!'])?;
            let (size, addr) = (parse_size(size)?, parse_size(addr)?);
            Some(addr..addr.checked_add(size)?)
        })
        .collect()
}

/// Whether two ranges share a byte.
pub fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, System) {
        let dir = tempfile::tempdir().unwrap();
        for (path, bytes) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        let sys = System::new(dir.path());
        (dir, sys)
    }

    #[test]
    fn the_memory_overwrite_request_is_read_from_its_efi_variable() {
        let (_d, sys) = sys_with(&[]);
        assert_eq!(firmware(&sys), Firmware::Bios);
        let (_d, sys) = sys_with(&[("/sys/firmware/efi/systab", b"")]);
        assert_eq!(firmware(&sys), Firmware::Uefi);
        let (_d, sys) = sys_with(&[
            ("/sys/firmware/efi/systab", b""),
            (MOR_VARIABLE, &[7, 0, 0, 0, 0]),
        ]);
        assert_eq!(firmware(&sys), Firmware::Uefi);
        let (_d, sys) = sys_with(&[
            ("/sys/firmware/efi/systab", b""),
            (MOR_VARIABLE, &[7, 0, 0, 0, 1]),
        ]);
        assert_eq!(firmware(&sys), Firmware::UefiWipesMemory);
    }

    #[test]
    fn the_initrd_comes_from_the_boot_parameters_with_their_high_halves() {
        let mut p = vec![0u8; 4096];
        p[0x218..0x21c].copy_from_slice(&0x33ea_3000u32.to_le_bytes());
        p[0x21c..0x220].copy_from_slice(&0x020a_6000u32.to_le_bytes());
        let (_d, sys) = sys_with(&[(BOOT_PARAMS, &p)]);
        assert_eq!(initrd(&sys), Some(0x33ea_3000..0x35f4_9000));
        p[0x0c0..0x0c4].copy_from_slice(&2u32.to_le_bytes());
        let (_d, sys) = sys_with(&[(BOOT_PARAMS, &p)]);
        assert_eq!(initrd(&sys), Some(0x2_33ea_3000..0x2_35f4_9000));
        let (_d, sys) = sys_with(&[(BOOT_PARAMS, &p[..0x100])]);
        assert_eq!(initrd(&sys), None, "a short read is no initrd");
        // Past the end of memory: odd parameters, no initrd, no overflow.
        p[0x0c0..0x0c8].copy_from_slice(&[0xff; 8]);
        let (_d, sys) = sys_with(&[(BOOT_PARAMS, &p)]);
        assert_eq!(initrd(&sys), None);
    }

    #[test]
    fn the_kernel_image_spans_code_to_bss() {
        let iomem = "00100000-7fffffff : System RAM\n  47800000-487fffff : Kernel code\n  48800000-4905ffff : Kernel rodata\n  49200000-4946ffff : Kernel data\n  49a00000-49bfffff : Kernel bss\n";
        let (_d, sys) = sys_with(&[("/proc/iomem", iomem.as_bytes())]);
        assert_eq!(kernel_image(&sys), Some(0x4780_0000..0x49c0_0000));
        let zeroed = "00000000-00000000 : System RAM\n  00000000-00000000 : Kernel code\n";
        let (_d, sys) = sys_with(&[("/proc/iomem", zeroed.as_bytes())]);
        assert_eq!(kernel_image(&sys), None, "read without root");
    }

    #[test]
    fn configured_memmap_reservations_are_found_however_escaped() {
        let text = "GRUB_CMDLINE_LINUX=\"quiet memmap=16M\\\\\\$0x90000000 ramoops.mem_size=1M\"\nGRUB_CMDLINE_LINUX_DEFAULT='memmap=1G!4G,2M$0x1000000 memmap=exactmap'";
        assert_eq!(
            memmap_ranges(text),
            [
                0x9000_0000..0x9100_0000,
                0x1_0000_0000..0x1_4000_0000,
                0x100_0000..0x120_0000
            ]
        );
    }
}
