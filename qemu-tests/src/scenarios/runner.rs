//! The warm-reboot runner: boots a guest whose first boot brings the
//! kernel down and whose next boot saves what the module kept (the
//! previous generation) to a disk, and checks the guest's own reading of
//! it against the host's.

use super::{boot_script, host_crashring, raw_disk, Artifacts, ACK, DONE, DONE_MIB, SAVE_DISK_MIB};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{self, Start, Vm};
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
            qemu_args: &[],
            later_modules: &[],
            monitor: None,
            release: ACK,
        }
    }
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
    let crashring = host_crashring(sh)?;
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
        .collect();
    let script = plan.script.clone().unwrap_or_else(|| {
        boot_script(
            plan.module_args,
            plan.before_insmod,
            &plan.record,
            plan.release,
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
    let vm = Vm {
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd: &initrd,
            // panic_on_warn: a WARN the module causes on the way (6.1's console
            // tracepoint in NMI context, say) panics with another message than
            // the one the scenario expects, and its check of the crash fails.
            append: format!(
                "console=ttyS0 panic=1 panic_on_warn=1 {} loglevel=4 {}",
                plan.region_append, plan.extra_append
            ),
        },
        memory: "2G",
        cpus: plan.cpus,
        disks,
        extra: plan.qemu_args.iter().map(|a| a.to_string()).collect(),
        serial: serial.clone(),
        timeout: Duration::from_secs(300),
    };
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
