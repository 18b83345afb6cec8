//! What only arm64 has to show: its region reserved its own ways
//! (reserve_mem= on 6.12; on 6.1, which has neither memmap= nor
//! reserve_mem=, a device-tree reserved-memory node marked no-map), where
//! reserve_mem= puts the range boot after boot with and without KASLR, a
//! sysrq panic recovered by the next boot, and the guest's own static
//! arm64 `crashring` reading the golden images written on amd64 (both
//! byte orders, both format versions) exactly as the host's reads them.

use super::{
    check_region, parse_saved, warm_reboot_run, workload_and_sysrq, Artifacts, WarmReboot, ACK,
};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{Start, Vm};
use anyhow::{ensure, Context, Result};
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
        true => format!(
            "; {}; {}",
            placement(sh, k, art, true)?,
            placement(sh, k, art, false)?
        ),
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
/// reboots of one VM keep one KASLR offset), with or without KASLR, and
/// says where reserve_mem= put the range each time and where the kernel's
/// text was. KASLR moves the kernel's virtual addresses; booted by QEMU
/// itself, the kernel's physical place, and so memblock's top-down
/// allocation for reserve_mem=, stay (a UEFI boot's stub may place the
/// kernel at random physically: not measured here).
fn placement(sh: &Shell, k: &Kernel, art: &Artifacts, kaslr: bool) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let crashring = guest::guest_crashring(sh, k)?;
    let script = "echo 0 > /proc/sys/kernel/kptr_restrict\n\
        insmod /lib/crashring.ko reserve_mem=crashring || echo \"crashring-test: insmod failed\"\n\
        echo \"crashring-test: placed $(grep -o 'phys=0x[0-9a-f]*' /sys/kernel/crashring/region | head -n 1) text=$(grep -m 1 ' _text$' /proc/kallsyms | cut -d ' ' -f 1)\"\n\
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
    let how = if kaslr { "kaslr" } else { "nokaslr" };
    let mut boots = Vec::new();
    for boot in 1..=PLACEMENT_BOOTS {
        let serial = art.dir.join(format!("placement-{how}-{boot}.log"));
        Vm {
            arch: k.arch,
            start: Start::Kernel {
                kernel: &k.vmlinuz,
                initrd: &initrd,
                append: format!(
                    "console={} panic=1 loglevel=4 reserve_mem=16M:4096:crashring{}",
                    k.console(),
                    if kaslr { "" } else { " nokaslr" }
                ),
            },
            memory: "2G",
            cpus: 2,
            disks: Vec::new(),
            extra: Vec::new(),
            serial: serial.clone(),
            timeout: Duration::from_secs(120),
        }
        .run()?;
        let log = std::fs::read_to_string(&serial)?;
        let said = log
            .lines()
            .find_map(|l| l.split_once("crashring-test: placed ").map(|(_, rest)| rest))
            .and_then(|rest| {
                let phys = rest.split_once("phys=")?.1.split(' ').next()?;
                let text = rest.split_once("text=")?.1.trim();
                (!phys.is_empty() && !text.is_empty()).then(|| (phys.to_string(), text.to_string()))
            })
            .with_context(|| {
                format!(
                    "boot {boot} ({how}) did not say where the range and the kernel were (serial log {})",
                    serial.display()
                )
            })?;
        boots.push(said);
    }
    let ranges: BTreeSet<&str> = boots.iter().map(|(p, _)| p.as_str()).collect();
    let texts: BTreeSet<&str> = boots.iter().map(|(_, t)| t.as_str()).collect();
    let moves = boots.windows(2).filter(|w| w[0].0 != w[1].0).count();
    match kaslr {
        true => ensure!(
            texts.len() > 1,
            "KASLR on, yet the kernel's text was at {texts:?} in all {PLACEMENT_BOOTS} boots"
        ),
        false => ensure!(
            texts.len() == 1,
            "nokaslr, yet the kernel's text moved: {texts:?}"
        ),
    }
    Ok(format!(
        "{how}: reserve_mem= put the range at {ranges:?} over {PLACEMENT_BOOTS} cold boots ({moves} moves), the kernel's text at {} addresses",
        texts.len()
    ))
}
