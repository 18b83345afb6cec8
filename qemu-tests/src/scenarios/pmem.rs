//! The power-loss scenario: the region lives on an emulated NVDIMM whose
//! backing file is the "persistent" medium, and QEMU is killed in the
//! middle of the workload, with no panic and no flush.

use super::{
    check_cut_short, endless_workload, host_crashring, raw_disk, reported_progress, Artifacts,
};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{self, Start, Vm};
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::read::{HeaderTrust, Region};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// Where QEMU puts the first NVDIMM of a 2 GiB guest (above 4 GiB) and how
/// big the backing file is; the module records into all of it.
const PMEM_ADDR: u64 = 0x1_0000_0000;
const PMEM_MIB: u64 = 64;
/// The host cuts the power once the guest reported (every
/// [`super::REPORT_EVERY`] markers) this many.
const CUT_AFTER: u32 = 300;

fn vm<'a>(k: &'a Kernel, initrd: &'a Path, pmem: &Path, disk: PathBuf, serial: PathBuf) -> Vm<'a> {
    Vm {
        arch: k.arch,
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd,
            append: "console=ttyS0 panic=-1 loglevel=4".into(),
        },
        memory: "2G,slots=2,maxmem=4G",
        cpus: 4,
        disks: vec![disk],
        extra: vec![
            "-machine".into(),
            "pc,nvdimm=on".into(),
            "-object".into(),
            format!(
                "memory-backend-file,id=pmem1,share=on,mem-path={},size={PMEM_MIB}M",
                pmem.display()
            ),
            "-device".into(),
            "nvdimm,id=nv1,memdev=pmem1".into(),
        ],
        serial,
        timeout: Duration::from_secs(240),
    }
}

/// Boot 1 records into the NVDIMM by physical address until the power is
/// cut; it reports its progress on the console.
fn record_script() -> String {
    format!(
        r#"insmod /lib/crashring.ko region={PMEM_MIB}M@{PMEM_ADDR:#x} || echo "crashring-test: insmod failed"
echo "crashring-test: phase record"
{}"#,
        endless_workload()
    )
}

/// `region=` values crashring.ko must refuse, before writing anything, in
/// boot 2, and what it says for each: the NVDIMM range while the pmem
/// driver's namespace holds it, System RAM, an unaligned range, the local
/// APIC's MMIO page, and the NVDIMM with as much again past its end, where
/// /proc/iomem has no entry at all.
const REFUSED: [(&str, &str); 5] = [
    ("64M@0x100000000", "is in use by another driver"),
    ("16M@0x1000000", "overlaps System RAM in use"),
    ("16M@0x40000100", "must be multiples of"),
    (
        "4K@0xfee00000",
        "is not wholly reserved or persistent memory",
    ),
    (
        "128M@0x100000000",
        "is not wholly reserved or persistent memory",
    ),
];

/// How the module names a `region=` value in its messages: as given, or
/// as `%pa+SIZE` once parsed.
fn region_names(range: &str) -> Result<[String; 2]> {
    let (size, addr) = range.split_once('@').context("a range without @")?;
    let (digits, unit) = size.split_at(size.len() - 1);
    let shift = match unit {
        "K" => 10,
        "M" => 20,
        _ => bail!("a size in neither K nor M: {size}"),
    };
    let bytes = digits.parse::<u64>()? << shift;
    let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16)?;
    Ok([format!("region={range}"), format!("{addr:#018x}+{bytes} ")])
}

/// Boot 2 binds the NVDIMM to the pmem driver, tries the [`REFUSED`]
/// ranges, and reads `/dev/pmem0` with the guest's crashring; the JSON
/// lines go to the raw disk.
fn read_script() -> String {
    let tries: String = REFUSED
        .iter()
        .map(|(r, _)| {
            format!(
                "if insmod /lib/crashring.ko region={r}; then echo \"crashring-test: region={r} accepted\"; rmmod crashring; else echo \"crashring-test: region={r} refused\"; fi\n"
            )
        })
        .collect();
    format!(
        r#"echo "crashring-test: phase read"
i=0
while [ ! -b /dev/pmem0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
{tries}crashring info /dev/pmem0
crashring extract --format jsonl /dev/pmem0 > /dev/vda
echo "crashring-test: pmem extract $?"
sync
poweroff -f
"#
    )
}

/// Every [`REFUSED`] range was refused with its reason. That nothing was
/// written before the refusal shows in the pmem contents read afterwards,
/// which must still equal the backing file as boot 1 left it.
fn check_refusals(log: &str) -> Result<()> {
    for (range, why) in REFUSED {
        ensure!(
            log.contains(&format!("crashring-test: region={range} refused")),
            "region={range} was not refused"
        );
        let names = region_names(range)?;
        ensure!(
            log.lines().any(|l| l.contains("crashring: ")
                && l.contains(why)
                && names.iter().any(|n| l.contains(n.as_str()))),
            "no \"{why}\" in the kernel log for region={range}"
        );
    }
    Ok(())
}

pub fn pmem_power_loss(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let crashring = host_crashring(sh)?;
    let record = record_script();
    let spec = |kernel_modules, script| Initramfs {
        kernel: k,
        module: &module,
        crashring: &crashring,
        kernel_modules,
        later_modules: &[],
        programs: &[],
        files: &[],
        script,
    };
    let record_initrd = guest::initramfs(
        sh,
        &format!("pmem-record-{}", k.series),
        // nfit describes the NVDIMM's range as Persistent Memory in
        // /proc/iomem, which crashring.ko checks region= against; nd_pmem
        // is left out so that no namespace claims the range.
        &spec(&["virtio_pci", "virtio_blk", "nfit"], &record),
    )?;
    let read_initrd = guest::initramfs(
        sh,
        &format!("pmem-read-{}", k.series),
        &spec(
            &["virtio_pci", "virtio_blk", "nfit", "nd_pmem"],
            &read_script(),
        ),
    )?;
    let pmem = art.dir.join("pmem.img");
    let _ = std::fs::remove_file(&pmem);
    raw_disk(&pmem, PMEM_MIB << 20)?;
    let disk = art.dir.join("out.img");
    raw_disk(&disk, 64 << 20)?;

    // Boot 1: record, and cut the power mid-workload.
    let serial = art.dir.join("serial-record.log");
    let started = Instant::now();
    let mut running = vm(k, &record_initrd, &pmem, disk.clone(), serial.clone())
        .start(&art.dir.join("qmp.sock"))?;
    running.wait_for_serial(
        &format!("crashring-test: wrote {CUT_AFTER}"),
        Duration::from_secs(180),
    )?;
    running.power_cut();
    let recorded = started.elapsed();
    let reported = reported_progress(&std::fs::read_to_string(&serial).unwrap_or_default())?;

    // The host reads the backing file.
    let image = std::fs::read(&pmem)?;
    let region = Region::parse(&image, HeaderTrust::Checksummed)
        .with_context(|| format!("no region at the start of {}", pmem.display()))?;
    let summary = check_cut_short(&region, reported, "the power was cut").with_context(|| {
        format!(
            "checking {} (serial log {})",
            pmem.display(),
            serial.display()
        )
    })?;
    // Nothing lost, so nothing to report: the host's extract exits 0, and
    // its every line is an event.
    let host_jsonl = cmd!(sh, "{crashring} extract --format jsonl {pmem}")
        .quiet()
        .read()
        .context("crashring extract on the backing file")?;
    let host_events = host_jsonl
        .lines()
        .filter(|l| l.starts_with(r#"{"kind":"event""#))
        .count();
    let events = region.decode().event_count();
    ensure!(
        host_events == events && host_events == host_jsonl.lines().count(),
        "crashring extract on the backing file gave {} lines, {host_events} of them events; the region holds {events}",
        host_jsonl.lines().count(),
    );

    // Boot 2: the guest reads the same medium through /dev/pmem0.
    let serial2 = art.dir.join("serial-read.log");
    let took2 = vm(k, &read_initrd, &pmem, disk.clone(), serial2.clone()).run()?;
    let log2 = std::fs::read_to_string(&serial2).unwrap_or_default();
    ensure!(
        log2.contains("crashring-test: pmem extract 0"),
        "crashring extract /dev/pmem0 did not exit 0 in the second boot:\n{}",
        qemu::tail(&serial2, 40)
    );
    check_refusals(&log2).with_context(|| format!("serial log {}", serial2.display()))?;
    let out = std::fs::read(&disk)?;
    let guest_jsonl =
        String::from_utf8_lossy(&out[..out.iter().position(|&b| b == 0).unwrap_or(out.len())]);
    ensure!(
        guest_jsonl.trim_end() == host_jsonl.trim_end(),
        "crashring extract /dev/pmem0 in the guest ({} lines) differs from the host's on the backing file ({} lines); serial log {}",
        guest_jsonl.lines().count(),
        host_jsonl.lines().count(),
        serial2.display()
    );
    if !art.kept {
        let _ = std::fs::remove_file(&pmem);
    }
    Ok(format!(
        "power cut {:.1} s after boot, after the guest reported {reported} markers; \
         backing file: {summary}\n  \
         second boot: {} bad region= ranges refused untouched; crashring extract /dev/pmem0 gave the same {} JSON lines as the host on the backing file ({:.1} s)",
        recorded.as_secs_f64(),
        REFUSED.len(),
        host_jsonl.lines().count(),
        took2.as_secs_f64()
    ))
}
