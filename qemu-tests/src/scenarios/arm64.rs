//! What only arm64 has to show: its region reserved its own ways
//! (reserve_mem= on 6.12; on 6.1, which has neither memmap= nor
//! reserve_mem=, a device-tree reserved-memory node marked no-map), where
//! reserve_mem= puts the range boot after boot with and without KASLR and
//! through UEFI firmware, a
//! sysrq panic recovered by the next boot, and the guest's own static
//! arm64 `crashring` reading the golden images written on amd64 (both
//! byte orders, both format versions) exactly as the host's reads them.

use super::{
    check_region, parse_saved, warm_reboot_run, workload_and_sysrq, Artifacts, WarmReboot, ACK,
};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{Start, Vm};
use anyhow::{ensure, Context, Result};
use kexec_hooks::reserve::Reservation;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xshell::{cmd, Shell};

/// The golden images, in pstore-ring/golden.
const GOLDEN: [&str; 4] = ["v1-le.bin", "v1-be.bin", "v2-le.bin", "v2-be.bin"];

/// What the guest and the host each run on every golden image, in the
/// image's folder: the digests of `info --json` and of the JSON lines.
const READ_GOLDEN: &str = r#"cd /golden
for f in *.bin; do
  echo "crashring-test: golden $f info $(crashring info --json $f | sha256sum | cut -c 1-64) extract $(crashring extract --format jsonl $f | sha256sum | cut -c 1-64)"
done
cd /
"#;

/// How many boots each placement run makes.
const PLACEMENT_BOOTS: u32 = 5;

/// QEMU's EDK2 build for arm64's virt board (package qemu-efi-aarch64),
/// which boots the kernel QEMU is given (`-kernel`) through its EFI stub.
const AAVMF: &str = "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd";

/// How a placement run boots the kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Boot {
    /// QEMU loads the kernel itself and hands it a device tree, as U-Boot
    /// does on most boards.
    Direct { kaslr: bool },
    /// UEFI firmware starts the kernel's EFI stub, which may place the
    /// kernel at random physically (with KASLR, from EFI_RNG_PROTOCOL):
    /// an arm64 server's way, and memblock's top-down allocation for
    /// reserve_mem= then sees another memory map. The range is aligned
    /// to a page, as in the direct boots, or as `crashring arm` writes it.
    Uefi { as_arm_writes: bool },
}

/// The placement runs on a kernel with reserve_mem=.
const PLACEMENTS: [Boot; 4] = [
    Boot::Direct { kaslr: true },
    Boot::Direct { kaslr: false },
    Boot::Uefi {
        as_arm_writes: false,
    },
    Boot::Uefi {
        as_arm_writes: true,
    },
];

impl Boot {
    fn name(self) -> String {
        match self {
            Boot::Direct { kaslr: true } => "kaslr".into(),
            Boot::Direct { kaslr: false } => "nokaslr".into(),
            Boot::Uefi {
                as_arm_writes: false,
            } => "uefi".into(),
            Boot::Uefi {
                as_arm_writes: true,
            } => format!("uefi with {}", self.append()),
        }
    }

    /// The kernel's command line, past the console.
    fn append(self) -> String {
        match self {
            Boot::Direct { kaslr } => format!(
                "reserve_mem=16M:4096:crashring{}",
                if kaslr { "" } else { " nokaslr" }
            ),
            Boot::Uefi {
                as_arm_writes: false,
            } => "reserve_mem=16M:4096:crashring".into(),
            Boot::Uefi {
                as_arm_writes: true,
            } => Reservation::ReserveMem { size: 16 << 20 }.kernel_word(),
        }
    }
}

pub fn warm_reboot_arm64(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let golden_dir = sh.current_dir().join("pstore-ring/golden");
    let sources: Vec<(PathBuf, String)> = GOLDEN
        .iter()
        .map(|name| (golden_dir.join(name), format!("golden/{name}")))
        .collect();
    let files: Vec<(&Path, &str)> = sources
        .iter()
        .map(|(from, to)| (from.as_path(), to.as_str()))
        .collect();
    let release = format!("{READ_GOLDEN}{ACK}");
    let (region_append, module_args) = match k.has_reserve_mem() {
        true => ("reserve_mem=16M:4096:crashring", "reserve_mem=crashring"),
        // The runner turns memmap= into arm64's device-tree node.
        false => ("memmap=16M$0x40000000", "region=16M@0x40000000"),
    };
    let plan = WarmReboot {
        name: "warm-reboot-arm64",
        region_append,
        module_args,
        files: &files,
        release: &release,
        ..WarmReboot::memmap(workload_and_sysrq())
    };
    let run = warm_reboot_run(sh, k, art, &plan)?;
    let recovered = run.check(|image| check_region(&parse_saved(image)?))?;
    let golden = check_golden(sh, &golden_dir, &run.log)?;
    let placement = match k.has_reserve_mem() {
        true => {
            let runs = PLACEMENTS
                .iter()
                .map(|&boot| placement(sh, k, art, boot))
                .collect::<Result<Vec<_>>>()?;
            format!("; {}", runs.join("; "))
        }
        false => "; the range reserved by a no-map reserved-memory node".to_string(),
    };
    Ok(format!("{recovered}; {golden}{placement}"))
}

/// The guest's digests of what its crashring made of each golden image
/// equal the host's.
fn check_golden(sh: &Shell, dir: &Path, log: &str) -> Result<String> {
    let crashring = guest::host_crashring(sh)?;
    let _dir = sh.push_dir(dir);
    let mut checked = 0;
    for name in GOLDEN {
        let digest = |text: &str| -> Option<String> {
            text.lines()
                .find_map(|l| l.split_once(&format!("crashring-test: golden {name} ")))
                .map(|(_, rest)| rest.trim().to_string())
        };
        let guest = digest(log).with_context(|| format!("the guest read no {name}"))?;
        let info = cmd!(sh, "{crashring} info --json {name}")
            .ignore_status()
            .output()?;
        let extract = cmd!(sh, "{crashring} extract --format jsonl {name}")
            .ignore_status()
            .output()?;
        let sha = |bytes: &[u8]| {
            use sha2::{Digest, Sha256};
            format!("{:x}", Sha256::digest(bytes))
        };
        let want = format!(
            "info {} extract {}",
            sha(&info.stdout),
            sha(&extract.stdout)
        );
        ensure!(
            guest == want,
            "the arm64 crashring read {name} as {guest}, the host's as {want}"
        );
        checked += 1;
    }
    Ok(format!(
        "the guest's arm64 crashring read the {checked} golden images (v1 and v2, little- and big-endian) as the host's does"
    ))
}

/// Boots `k` [`PLACEMENT_BOOTS`] times, each in a new VM (a cold boot:
/// QEMU draws the device tree's kaslr-seed when it starts, so warm
/// reboots of one VM keep one KASLR offset), the way `boot` says, and
/// says where reserve_mem= put the range each time and where the kernel's
/// text was, virtually and physically. KASLR moves the kernel's virtual
/// addresses; booted by QEMU itself, the kernel's physical place, and so
/// memblock's top-down allocation for reserve_mem=, stay. Booted by UEFI,
/// which the guest must confirm (/sys/firmware/efi), the run reports
/// what moved.
fn placement(sh: &Shell, k: &Kernel, art: &Artifacts, boot: Boot) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let crashring = guest::guest_crashring(sh, k)?;
    let script = "echo 0 > /proc/sys/kernel/kptr_restrict\n\
        insmod /lib/crashring.ko reserve_mem=crashring || echo \"crashring-test: insmod failed\"\n\
        echo \"crashring-test: placed $(grep -o 'phys=0x[0-9a-f]*' /sys/kernel/crashring/region | head -n 1) text=$(grep -m 1 ' _text$' /proc/kallsyms | cut -d ' ' -f 1) code=$(grep -m 1 'Kernel code' /proc/iomem | cut -d - -f 1 | tr -d ' ') efi=$(test -d /sys/firmware/efi && echo yes || echo no)\"\n\
        poweroff -f\n";
    let initrd = guest::initramfs(
        sh,
        &format!("placement-{}", k.series),
        &Initramfs {
            kernel: k,
            module: &module,
            crashring: &crashring,
            kernel_modules: &[],
            later_modules: &[],
            programs: &[],
            files: &[],
            script,
        },
    )?;
    let how = boot.name();
    let extra = match boot {
        Boot::Direct { .. } => Vec::new(),
        // With an entropy source the firmware offers EFI_RNG_PROTOCOL
        // (VirtioRngDxe), from which the stub draws the kernel's
        // physical place, as on a server with a hardware RNG.
        Boot::Uefi { .. } => ["-bios", AAVMF, "-device", "virtio-rng-pci"]
            .map(String::from)
            .to_vec(),
    };
    let mut boots = Vec::new();
    for n in 1..=PLACEMENT_BOOTS {
        let serial = art
            .dir
            .join(format!("placement-{}-{n}.log", how.replace([',', ' '], "")));
        Vm {
            arch: k.arch,
            start: Start::Kernel {
                kernel: &k.vmlinuz,
                initrd: &initrd,
                append: format!(
                    "console={} panic=1 loglevel=4 {}",
                    k.console(),
                    boot.append()
                ),
            },
            memory: "2G",
            cpus: 2,
            disks: Vec::new(),
            extra: extra.clone(),
            serial: serial.clone(),
            timeout: Duration::from_secs(180),
        }
        .run()?;
        let log = std::fs::read_to_string(&serial)?;
        let placed = log
            .lines()
            .find_map(|l| Placed::parse(l.split_once("crashring-test: placed ")?.1))
            .with_context(|| {
                format!(
                    "boot {n} ({how}) did not say where the range and the kernel were (serial log {})",
                    serial.display()
                )
            })?;
        ensure!(
            placed.efi == matches!(boot, Boot::Uefi { .. }),
            "boot {n} ({how}): /sys/firmware/efi {} (serial log {})",
            if placed.efi { "exists" } else { "is missing" },
            serial.display()
        );
        boots.push(placed);
    }
    let ranges: BTreeSet<&str> = boots.iter().map(|b| b.range.as_str()).collect();
    let texts: BTreeSet<&str> = boots.iter().map(|b| b.text.as_str()).collect();
    let codes: BTreeSet<&str> = boots.iter().map(|b| b.code.as_str()).collect();
    let moves = boots
        .windows(2)
        .filter(|w| w[0].range != w[1].range)
        .count();
    match boot {
        Boot::Direct { kaslr: true } => ensure!(
            texts.len() > 1,
            "KASLR on, yet the kernel's text was at {texts:?} in all {PLACEMENT_BOOTS} boots"
        ),
        Boot::Direct { kaslr: false } => ensure!(
            texts.len() == 1,
            "nokaslr, yet the kernel's text moved: {texts:?}"
        ),
        // The stub's allocations above the range differ by a page from
        // one placement of the kernel to the next: seen moving the
        // page-aligned range by a page in 1 or 2 of 5 boots, so that
        // run only reports.
        Boot::Uefi { as_arm_writes: false } => {}
        Boot::Uefi { as_arm_writes: true } => ensure!(
            ranges.len() == 1,
            "booted by UEFI, {} moved the range: {ranges:?}; crashring arm's alignment no longer absorbs what moves above it",
            boot.append()
        ),
    }
    if let Boot::Direct { .. } = boot {
        ensure!(
            codes.len() == 1 && ranges.len() == 1,
            "booted by QEMU itself, the kernel's code ({codes:?}) or the range ({ranges:?}) moved physically"
        );
    }
    Ok(format!(
        "{how}: reserve_mem= put the range at {ranges:?} over {PLACEMENT_BOOTS} cold boots ({moves} moves), the kernel's text at {} virtual and {codes:?} physical addresses",
        texts.len()
    ))
}

/// Where one boot put the range and the kernel, as the guest said it:
/// `phys=` (the range), `text=` (`_text`'s virtual address), `code=`
/// (where /proc/iomem's "Kernel code" starts) and `efi=`.
#[derive(Debug, PartialEq)]
struct Placed {
    range: String,
    text: String,
    code: String,
    efi: bool,
}

impl Placed {
    fn parse(said: &str) -> Option<Placed> {
        let field = |name: &str| {
            said.split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        Some(Placed {
            range: field("phys")?,
            text: field("text")?,
            code: field("code")?,
            efi: field("efi")? == "yes",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Placed;

    #[test]
    fn a_boot_says_every_field_or_is_not_read() {
        let said = "phys=0xbf000000 text=ffffa3c2b8e00000 code=40210000 efi=no";
        assert_eq!(
            Placed::parse(said),
            Some(Placed {
                range: "0xbf000000".into(),
                text: "ffffa3c2b8e00000".into(),
                code: "40210000".into(),
                efi: false,
            })
        );
        assert!(Placed::parse("phys=0xbf000000 text=ffffa3c2b8e00000 code= efi=yes").is_none());
        assert!(Placed::parse("phys=0xbf000000 text=ffffa3c2b8e00000 efi=yes").is_none());
        assert_eq!(
            Placed::parse(&said.replace("efi=no", "efi=yes")).map(|p| p.efi),
            Some(true)
        );
    }
}
