//! The warm-reboot runner: boots a guest whose first boot brings the
//! kernel down and whose next boot saves what the module kept (the
//! previous generation) to a disk, and checks the guest's own reading of
//! it against the host's.

use super::{boot_script, host_crashring, raw_disk, Artifacts, ACK, DONE, DONE_MIB, SAVE_DISK_MIB};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{self, Start, Vm};
use crate::env::Arch;
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use xshell::{cmd, Shell};

/// What drives a running guest from outside ([`WarmReboot::monitor`]).
pub type Monitor = dyn Fn(&mut qemu::Running) -> Result<()>;

/// A warm-reboot scenario: where the region is, and what the first boot
/// does to bring the kernel down.
pub struct WarmReboot<'a> {
    pub name: &'a str,
    pub region_append: &'a str,
    pub module_args: &'a str,
    /// More kernel command line (detectors to arm, say).
    pub extra_append: &'a str,
    /// Runs on every boot before the module loads (see [`boot_script`]).
    pub before_insmod: &'a str,
    /// The record phase (see [`boot_script`]).
    pub record: String,
    /// Whether the guest needs crashring_test.ko at /lib.
    pub test_module: bool,
    /// The guest's CPUs.
    pub cpus: u32,
    /// The whole /init body, instead of [`boot_script`]'s.
    pub script: Option<String>,
    /// Whether the guest gets an empty ext2 disk as /dev/vdb, to write
    /// files as a real machine would (the saved slot stays raw on vda).
    pub ext2_disk: bool,
    /// Host programs the guest runs, at the same paths, with their
    /// libraries.
    pub programs: &'a [&'a str],
    /// Other host files the guest reads: (source, path in the initramfs).
    pub files: &'a [(&'a Path, &'a str)],
    /// More QEMU options (how its clock runs, say).
    pub qemu_args: &'a [&'a str],
    /// Kernel modules the record phase loads itself (`load_later`).
    pub later_modules: &'a [&'a str],
    /// Drives the machine from outside while it runs (QEMU's monitor
    /// injecting hardware errors, say); returns once its part is done.
    pub monitor: Option<&'a Monitor>,
    /// How the next boot releases the generation once saved (see
    /// [`boot_script`]).
    pub release: &'a str,
    /// What the next boot does once the verdict's facts are gathered (see
    /// [`boot_script`]).
    pub after_saving: &'a str,
}

impl WarmReboot<'_> {
    /// A 16 MiB memmap= region at 1 GiB, which every kernel supports.
    pub fn memmap(record: String) -> WarmReboot<'static> {
        WarmReboot {
            name: "warm-reboot",
            region_append: "memmap=16M$0x40000000",
            module_args: "region=16M@0x40000000",
            extra_append: "",
            before_insmod: "",
            record,
            test_module: false,
            cpus: 4,
            script: None,
            ext2_disk: false,
            programs: &[],
            files: &[],
            qemu_args: &[],
            later_modules: &[],
            monitor: None,
            release: ACK,
            after_saving: "",
        }
    }
}

/// Where arm64's virt machine has its RAM: from 1 GiB on, where QEMU
/// loads the kernel.
const ARM64_RAM_BASE: u64 = 1 << 30;

/// A scenario's region as the guest's machine reserves it. Scenarios name
/// the PC's ranges: memmap=SIZE$ADDR on the command line and
/// region=SIZE@ADDR for the module. arm64 has no memmap=, and a PC's
/// address there would lie on the kernel (its RAM starts at
/// [`ARM64_RAM_BASE`]): on arm64 the range moves up by that base and a
/// reserved-memory node of the device tree, marked no-map, sets it aside.
/// reserve_mem= is the same on both.
pub struct Placement {
    pub append: String,
    pub module_args: String,
    /// The range the device tree reserves: (address, size).
    pub no_map: Option<(u64, u64)>,
}

impl Placement {
    pub fn of(k: &Kernel, region_append: &str, module_args: &str) -> Result<Placement> {
        if k.arch == Arch::X86_64 {
            return Ok(Placement {
                append: region_append.to_string(),
                module_args: module_args.to_string(),
                no_map: None,
            });
        }
        let mut no_map = None;
        let mut append = Vec::new();
        for word in region_append.split_whitespace() {
            let Some(range) = word.strip_prefix("memmap=") else {
                append.push(word);
                continue;
            };
            let (size, at) = range
                .split_once('$')
                .with_context(|| format!("{word}: arm64 reserves ranges only as memory"))?;
            no_map = Some((address(at)? + ARM64_RAM_BASE, bytes(size)?));
        }
        let module_args = module_args
            .split_whitespace()
            .map(|word| match word.strip_prefix("region=") {
                None => Ok(word.to_string()),
                Some(range) => {
                    let (size, at) = range
                        .split_once('@')
                        .with_context(|| format!("{word} is not region=SIZE@ADDR"))?;
                    Ok(format!(
                        "region={size}@{:#x}",
                        address(at)? + ARM64_RAM_BASE
                    ))
                }
            })
            .collect::<Result<Vec<_>>>()?
            .join(" ");
        Ok(Placement {
            append: append.join(" "),
            module_args,
            no_map,
        })
    }
}

impl Placement {
    /// Where the range is: the module's `region=` address, moved as the
    /// range was.
    pub fn region_address(&self) -> Option<u64> {
        self.module_args
            .split_whitespace()
            .find_map(|w| w.strip_prefix("region=")?.split_once('@'))
            .and_then(|(_, at)| address(at).ok())
    }

    /// Gives `vm` the device tree that reserves the range, where it needs
    /// one (written into the run's folder).
    pub fn reserve(&self, vm: &mut Vm, art: &Artifacts) -> Result<()> {
        if let Some((phys, size)) = self.no_map {
            let dtb = art.dir.join("reserving.dtb");
            vm.device_tree_reserving(phys, size, &dtb)?;
            vm.extra
                .extend(["-dtb".to_string(), dtb.display().to_string()]);
        }
        Ok(())
    }
}

/// A hexadecimal address of a kernel parameter (`0x40000000`).
fn address(text: &str) -> Result<u64> {
    let hex = text
        .strip_prefix("0x")
        .with_context(|| format!("{text} is not a 0x address"))?;
    u64::from_str_radix(hex, 16).with_context(|| format!("address {text}"))
}

/// A size of a kernel parameter, as memparse() reads it (`16M`).
fn bytes(text: &str) -> Result<u64> {
    let (digits, shift) = match text.as_bytes().last() {
        Some(b'K') => (&text[..text.len() - 1], 10),
        Some(b'M') => (&text[..text.len() - 1], 20),
        Some(b'G') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let n: u64 = digits.parse().with_context(|| format!("size {text}"))?;
    Ok(n << shift)
}

/// What a warm-reboot run saved: the previous generation as the second
/// boot read it, the serial log, and the time both boots took.
pub struct Saved {
    pub image: Vec<u8>,
    pub serial: PathBuf,
    pub log: String,
    pub took: Duration,
}

impl Saved {
    /// Whether a line of the serial log contains `what`.
    pub fn said(&self, what: &str) -> bool {
        self.log.lines().any(|l| l.contains(what))
    }

    /// Runs `check` on the saved image, naming the files if it fails.
    pub fn check(&self, check: impl Fn(&[u8]) -> Result<String>) -> Result<String> {
        let summary = check(&self.image).with_context(|| {
            format!(
                "checking the saved region (serial log {})",
                self.serial.display()
            )
        })?;
        Ok(format!("{summary}; {:.1} s", self.took.as_secs_f64()))
    }
}

/// Boots, lets the record phase bring the kernel down, reboots (panic=1)
/// and saves what the module kept.
pub fn warm_reboot_run(
    sh: &Shell,
    k: &Kernel,
    art: &Artifacts,
    plan: &WarmReboot,
) -> Result<Saved> {
    let module = guest::build_module(sh, k)?;
    let crashring = guest::guest_crashring(sh, k)?;
    let placed = Placement::of(k, plan.region_append, plan.module_args)?;
    let test_modules = if plan.test_module {
        Some(guest::build_test_modules(sh, k)?)
    } else {
        None
    };
    let kernel_modules = if plan.ext2_disk {
        k.ext2_disk_modules()?
    } else {
        vec!["virtio_pci", "virtio_blk"]
    };
    let test_modules: Vec<(PathBuf, String)> = test_modules
        .iter()
        .flat_map(|dir| guest::TEST_MODULES.map(|m| (dir.join(m), format!("lib/{m}"))))
        .collect();
    let files: Vec<(&Path, &str)> = test_modules
        .iter()
        .map(|(p, dest)| (p.as_path(), dest.as_str()))
        .chain(plan.files.iter().copied())
        .collect();
    let script = plan.script.clone().unwrap_or_else(|| {
        boot_script(
            &placed.module_args,
            plan.before_insmod,
            &plan.record,
            plan.release,
            plan.after_saving,
        )
    });
    let initrd = guest::initramfs(
        sh,
        &format!("{}-{}", plan.name, k.series),
        &Initramfs {
            kernel: k,
            module: &module,
            crashring: &crashring,
            kernel_modules: &kernel_modules,
            later_modules: plan.later_modules,
            programs: plan.programs,
            files: &files,
            script: &script,
        },
    )?;
    let out = art.dir.join("previous.img");
    raw_disk(&out, SAVE_DISK_MIB << 20)?;
    let mut disks = vec![out.clone()];
    if plan.ext2_disk {
        let ext2 = art.dir.join("files.ext2");
        let _ = std::fs::remove_file(&ext2);
        raw_disk(&ext2, 512 << 20)?;
        cmd!(sh, "mkfs.ext2 -q -F {ext2}").run()?;
        disks.push(ext2);
    }
    let serial = art.dir.join("serial.log");
    let mut vm = Vm {
        arch: k.arch,
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd: &initrd,
            // panic_on_warn: a WARN the module causes on the way (6.1's console
            // tracepoint in NMI context, say) panics with another message than
            // the one the scenario expects, and its check of the crash fails.
            append: format!(
                "console={} panic=1 panic_on_warn=1 {} loglevel=4 {}",
                k.console(),
                placed.append,
                plan.extra_append
            ),
        },
        memory: "2G",
        cpus: plan.cpus,
        disks,
        extra: plan.qemu_args.iter().map(|a| a.to_string()).collect(),
        serial: serial.clone(),
        timeout: Duration::from_secs(300),
    };
    placed.reserve(&mut vm, art)?;
    let took = match plan.monitor {
        None => vm.run()?,
        Some(drive) => {
            let mut running = vm.start(&art.dir.join("qmp.sock"))?;
            drive(&mut running)?;
            running.wait_for_exit(vm.timeout)?
        }
    };
    let log = std::fs::read_to_string(&serial).unwrap_or_default();
    let image = std::fs::read(&out)?;
    let verdict = image
        .get((DONE_MIB << 20) as usize..)
        .map_or(String::new(), |tail| {
            let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
            String::from_utf8_lossy(&tail[..end]).into_owned()
        });
    if !verdict.starts_with(DONE) {
        let why = if !log.contains("crashring-test: phase record") {
            "the first boot never recorded"
        } else if !log.contains("crashring-test: phase recover") {
            "the guest did not come back after the crash"
        } else {
            "recovery did not finish"
        };
        bail!(
            "{why} (no verdict on {}):\n{}",
            out.display(),
            qemu::tail(&serial, 40)
        );
    }
    if plan.script.is_none() {
        check_guest_reading(sh, &verdict, &out)
            .with_context(|| format!("the verdict on {}", out.display()))?;
    }
    Ok(Saved {
        image,
        serial,
        log,
        took,
    })
}

/// What [`boot_script`]'s recovery phase wrote after its verdict: the
/// exit statuses of the guest's `crashring info` (text and JSON) and of
/// the ack (2: an ack naming another generation was taken), the first
/// line of `previous_summary` after the ack, and the
/// JSON. The guest's crashring must have exited as the host's does on the
/// same bytes and described the same regions, and the ack must have left
/// no previous generation.
fn check_guest_reading(sh: &Shell, verdict: &str, saved: &Path) -> Result<()> {
    let mut lines = verdict.lines().skip(1);
    let statuses = lines.next().unwrap_or_default();
    let guest_json = lines.collect::<Vec<_>>().join("\n");
    let crashring = host_crashring(sh)?;
    let host = std::process::Command::new(&crashring)
        .args(["info", "--json"])
        .arg(saved)
        .output()?;
    let code = host
        .status
        .code()
        .context("the host's crashring info was killed")?;
    let want = format!("info {code} json {code} ack 0; after the ack: none");
    ensure!(
        statuses == want,
        "the guest said {statuses:?}; expected {want:?} (the host's crashring info exits {code} on what it saved)"
    );
    if code > 1 {
        // No region to describe (a damaged header): both said so, and the
        // scenario's own checks read it with the header's CRC ignored.
        ensure!(
            guest_json.is_empty(),
            "the guest's crashring info --json printed {guest_json}"
        );
        return Ok(());
    }
    let regions = |json: &[u8]| -> Result<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_slice(json)?;
        Ok(v["regions"].clone())
    };
    let (guest, host) = (
        regions(guest_json.as_bytes()).context("the guest's info --json")?,
        regions(&host.stdout).context("the host's info --json")?,
    );
    ensure!(
        host.as_array().is_some_and(|r| r.len() == 1),
        "the host found {host} in what the guest saved, not one region"
    );
    ensure!(
        guest == host,
        "the guest's crashring info --json describes {guest}\nthe host's, on the bytes it saved, {host}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Placement;
    use crate::env::guest::Kernel;
    use crate::env::Arch;
    use std::path::PathBuf;

    fn kernel(arch: Arch) -> Kernel {
        Kernel {
            series: "6.1",
            arch,
            release: format!("6.1.0-57-{}", arch.debian()),
            root: PathBuf::from("/"),
            vmlinuz: PathBuf::new(),
            modules: PathBuf::new(),
            headers: PathBuf::new(),
        }
    }

    #[test]
    fn arm64_moves_a_pc_range_above_its_ram_into_the_device_tree() {
        let k = kernel(Arch::Arm64);
        let p = Placement::of(
            &k,
            "memmap=64M$0x40000000 maxcpus=2",
            "region=64M@0x40000000 sources=marker",
        )
        .unwrap();
        assert_eq!(p.no_map, Some((0x8000_0000, 64 << 20)));
        assert_eq!(p.append, "maxcpus=2");
        assert_eq!(p.module_args, "region=64M@0x80000000 sources=marker");
        // reserve_mem= is arm64's as much as the PC's.
        let p = Placement::of(
            &k,
            "reserve_mem=16M:4096:crashring",
            "reserve_mem=crashring",
        )
        .unwrap();
        assert_eq!(p.no_map, None);
        assert_eq!(p.append, "reserve_mem=16M:4096:crashring");
        assert_eq!(p.module_args, "reserve_mem=crashring");
        // Legacy persistent memory (memmap=SIZE!ADDR) has no arm64 form.
        assert!(Placement::of(&k, "memmap=16M!0x40000000", "").is_err());
    }

    #[test]
    fn the_pc_keeps_its_ranges_as_named() {
        let p = Placement::of(
            &kernel(Arch::X86_64),
            "memmap=16M$0x40000000",
            "region=16M@0x40000000",
        )
        .unwrap();
        assert_eq!(p.no_map, None);
        assert_eq!(p.append, "memmap=16M$0x40000000");
        assert_eq!(p.module_args, "region=16M@0x40000000");
    }
}
