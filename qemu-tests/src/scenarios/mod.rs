//! The QEMU scenarios: each boots real kernels, crashes them one way, and
//! compares what was recovered with what the guest's workload wrote.
//!
//! This module owns the scenario table and running it (`cargo xtask list`,
//! `scenario`, and each scenario of `test`), and what the scenarios share:
//! the guest's workload and the checks of what came back ([`WorkloadSeq`],
//! [`recover_workload`], [`check_region`]), the warm-reboot runner
//! ([`warm_reboot_run`], in `runner`) and the host's `crashring`
//! ([`host_crashring`]).
//! Each family of scenarios is a child: `warm_reboot` (the runner's own
//! scenarios), `crashes` (the test module brings the kernel down), `dumps`
//! (the trace comes back in a memory dump), `pmem` (a power cut on an
//! NVDIMM), `debian` (a real Debian guest with the packages installed),
//! `user_streams` (a program's own stream from the module's pool), `drm`
//! (kernel debug messages diverted from printk on a real DRM driver),
//! `ras` (hardware errors injected through QEMU's monitor);
//! `demo` runs two of them with a human summary.
//!
//! Import rule: a child takes what it shares from here (`super::`), and
//! the environment from `crate::env`; it never imports from a sibling.
//! Whatever two children need lives in this file.

mod arm64;
mod bert;
pub mod crashes;
mod debian;
pub mod demo;
mod dracut;
mod drm;
pub(crate) mod dumps;
mod follow;
mod ftrace;
pub(crate) mod kdump;
mod pmem;
mod printk_log;
mod ramoops;
mod ras;
mod reset;
mod runner;
mod user_streams;
mod warm_reboot;

pub use crate::env::guest::host_crashring;
use crate::env::guest::{self, Kernel};
use crate::env::work_dir;
use anyhow::{bail, ensure, Context, Result};
pub use debian::prepare as prepare_debian;
use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED, STATE_RUNNING};
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{Event, HeaderTrust, LossKind, Problem, Region, StreamTrace, Trace};
use pstore_ring::scan::find_regions;
use pstore_ring::schema::{Value, EVENT_CRASH, EVENT_MARKER, EVENT_PRINTK};
pub use runner::{warm_reboot_run, Placement, WarmReboot};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use xshell::Shell;

/// Where a scenario keeps its files.
pub struct Artifacts {
    pub dir: PathBuf,
    /// Whether the user asked to keep the files (`--keep`); if not, big
    /// ones (memory dumps) are deleted once checked.
    pub kept: bool,
}

pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    /// Why the scenario runs on the 6.12 kernel only, if it does.
    pub only_612: Option<&'static str>,
    /// Whether it also runs on the newest kernel Debian ships, where every
    /// release may change what the module depends on.
    pub newest: bool,
    /// The machines it runs on.
    pub arches: Arches,
    pub run: fn(&Shell, &Kernel, &Artifacts) -> Result<String>,
}

const NO_RESERVE_MEM: &str = "it needs reserve_mem=, which 6.1 lacks";
/// The Debian guest installs the kernel `setup` takes from backports.
const DEBIAN_612: &str = "the Debian guest runs the 6.12 kernel from bookworm-backports";

/// In the order `cargo xtask test` runs them: the Debian guests last, for
/// the common machine installed ahead of them, beside the busybox guests
/// ([`prepare_debian`]), to be ready when they begin.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "warm-reboot",
        about: "memmap= region; hibernation refused while recording; workload, during which the periodic write-back writes back its pages and no idle stream's; markers into a persistent ftrace instance beside it (6.12+); sysrq panic; warm reboot; the module keeps the previous generation; the guest's crashring reads it; ack; crashring ftrace reads the instance through /dev/mem as the kernel's own reader does",
        only_612: None,
        newest: true,
        arches: Arches::Pc,
        run: warm_reboot::warm_reboot,
    },
    Scenario {
        name: "warm-reboot-reserve-mem",
        about: "the same with a reserve_mem= range (6.11+) that is not page-aligned (16000000:64), found again by label on the next boot; the module uses its whole pages, and a user stream maps its own header first and nothing its last holder left",
        only_612: Some(NO_RESERVE_MEM),
        newest: false,
        arches: Arches::Pc,
        run: warm_reboot::warm_reboot_reserve_mem,
    },
    Scenario {
        name: "damaged-header",
        about: "memmap= region; workload; sysrq panic; before the module loads again one bit of the crashed generation's header is flipped: the module keeps it as a damaged previous and records into the other slot; --trust-header recovers it all",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: warm_reboot::damaged_header,
    },
    Scenario {
        name: "two-generations",
        about: "memmap= region; two crashes without an ack fill both slots; on the third boot a reader holding previous (generation 2) across its ack is refused instead of reading on into generation 1, which is then saved whole",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: warm_reboot::two_generations,
    },
    Scenario {
        name: "recover-next-boot",
        about: "memmap= region; workload; sysrq panic; warm reboot; crashring pstore reads the ramoops area beside the region through /dev/mem: the panic's compressed record equal byte for byte to the next boot's /sys/fs/pstore (on 6.12 with ecc=16 and 3 bytes of the zone damaged first, both readers correcting them alike), every other zone where ramoops_probe() puts it; crashring recover (what crashring-recover.service runs) bundles the previous generation onto an ext2 disk with a .json summary, checks it, acknowledges it, with the next boot's /sys/fs/pstore records and (6.12) the persistent ftrace instance's trace file in the bundle, as the kernel showed them, and the firmware's BERT record (QEMU's -acpitable and loader: a fatal memory error) decoded beside the lines the kernel's bert.c printed of it and an AMD reset reason line, as the module kept them at load; a second run finds nothing; the host checks the bundle off the disk; then a shutdown reason written to shutdown_reason and a reset without a shutdown (sysrq b, as a watchdog's): the third boot bundles that generation as shutdown-…, its summary, manifest and README saying it was reset on its way down, and why",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: warm_reboot::recover_next_boot,
    },
    Scenario {
        name: "qemu-dump",
        about: "memmap= region; workload; panic with -no-shutdown; dump-guest-memory in every Linux format QEMU lists, with and without paging, with ramoops and a persistent ftrace instance (6.12) beside the region; the host extractor reads each and every ftrace marker in it, bundles the first with its ramoops records (the panic's among them), and from each the kernel's printk log (crashring dmesg), the same from all and holding the guest's own dmesg printed before the crash; on arm64 (no ramoops or ftrace there) every format QEMU offers an arm64 guest, read by the amd64 extractor, the printk log through arm64's kernel image and linear map",
        only_612: None,
        newest: false,
        arches: Arches::PcAndArm64,
        run: dumps::qemu_dump,
    },
    Scenario {
        name: "kdump-vmcore",
        about: "reserve_mem= region; kexec_file_load capture kernel; panic; in the capture kernel crashring reads /proc/vmcore and makedumpfile writes -c, -l, -F and -E dumps that the host extractor reads; their printk log equal to makedumpfile --dump-dmesg's and holding the guest's own dmesg; on arm64 the capture kernel loaded with kexec_load (Debian's arm64 kernels lack kexec_file_load) and Debian's arm64 kexec and makedumpfile with their libraries in its initramfs, the dumps read by the amd64 extractor, their printk logs the same from all",
        only_612: Some(NO_RESERVE_MEM),
        newest: false,
        arches: Arches::PcAndArm64,
        run: kdump::kdump_vmcore,
    },
    Scenario {
        name: "kdump-direct",
        about: "memmap= region; kexec_file_load capture kernel; panic; in the capture kernel crashring reads the region from /dev/mem by physical address; makedumpfile -c of /proc/vmcore, which the region is not in, is a vmcore as an unarmed machine leaves it: info describes it, extract refuses it naming crashring dmesg, its printk log equals makedumpfile --dump-dmesg's and the guest's own dmesg",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: kdump::kdump_direct,
    },
    Scenario {
        name: "pmem-power-loss",
        about: "region on an emulated NVDIMM; QEMU killed mid-workload (no panic, no flush); the host reads the backing file, a second boot reads /dev/pmem0",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: pmem::pmem_power_loss,
    },
    Scenario {
        name: "warm-reboot-arm64",
        about: "arm64's virt board: the range reserved by reserve_mem= (6.12) or, on 6.1, which has neither that nor memmap=, by a reserved-memory node of the device tree marked no-map; workload; sysrq panic; warm reboot (PSCI); the guest's static arm64 crashring reads the previous generation as the host's does, and the golden images written on amd64 (format v1 and v2, little- and big-endian) to the same bytes of info --json and JSON lines; on 6.12, five warm reboots with KASLR and five without say where reserve_mem= put the range each time",
        only_612: None,
        newest: false,
        arches: Arches::Arm64,
        run: arm64::warm_reboot_arm64,
    },
    Scenario {
        name: "panic-in-irq",
        about: "memmap= region; workload; a test module's timer panics in hard IRQ context; warm reboot; the trace shows the cause and the panic",
        only_612: None,
        newest: false,
        arches: Arches::PcAndArm64,
        run: crashes::panic_in_irq,
    },
    Scenario {
        name: "hard-lockup",
        about: "memmap= region; workload; a test module spins CPU 1 with interrupts off, reading the clock, until a detector panics (under TCG the perf NMI watchdog cannot run, so the RCU stall detector, armed to panic, is the one that fires); with the HPET as clocksource and crash_kexec_post_notifiers (the panic stops CPU 1 by NMI, maybe inside the HPET read's lock), the panic path reads no clocksource after the stop, records the crash and reboots",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: crashes::hard_lockup,
    },
    Scenario {
        name: "machine-check",
        about: "memmap= region on a q35 machine with a PCIe root port; before the module loads, QEMU's monitor latches a corrected error into bank 3 and the kernel logs it; the module backfills the boot's printk lines from before it loaded, those among them (and in a bundle's dmesg.txt); the kernel polls its machine-check banks every second; workload; QEMU's monitor latches a corrected error into CPU 0's bank 1, recorded by the kernel's mce_record tracepoint as injected, and raises a correctable PCIe error in the root port, recorded with the status the kernel's AER driver prints; the hwpoison injector takes a page out of service, recorded with the kernel's own name for it and its result, as its printk line says; the test module fires EDAC's mc_event, non_standard_event, arm_event and extlog_mem_event, each recorded as a hw_error with every field as fired; a storm of 100 000 corrected memory errors the test module logs through the kernel's mce_log() with the workload writing beside it, held to the budget; then an uncorrected error with processor context corrupt, raised as #MC: the kernel panics in the handler, before the tracepoint could run, and the panic path records the bank as injected just before the crash record; ramoops beside the region keeps the panic's dmesg record; the next boot recovers all of it, its crashring recover (what crashring-recover.service runs) bundles the generation with the panic's record from /sys/fs/pstore, the summary naming the machine check, and the host's text output, info --json and a bundle name the errors in words",
        only_612: None,
        newest: true,
        arches: Arches::Pc,
        run: ras::machine_check,
    },
    Scenario {
        name: "memory-failure-panic",
        about: "memmap= region; workload; vm.memory_failure_recovery=0 and the hwpoison injector hands memory_failure() a page: the kernel panics before it examines the page or fires memory_failure_event; the next boot recovers the workload and the injector's printk line, no memory_failure event, and info --json names the crash as a memory failure on that page",
        only_612: None,
        newest: true,
        arches: Arches::Pc,
        run: ras::memory_failure_panic,
    },
    Scenario {
        name: "dracut-early",
        about: "memmap= region; Debian's dracut builds a generic initramfs for the kernel with crashring's dracut module (90crashring-early), arm's modules-load.d and modprobe.d files and the module as DKMS installs it; dracut's own init loads the module in its pre-udev hook, with arm's range; a hook after it, before udev starts, writes a marker; QEMU dumps the guest's memory, and the region in it is recording, with the marker and the boot's printk lines from before the module loaded, backfilled",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: dracut::dracut_early,
    },
    Scenario {
        name: "crash-under-load",
        about: "memmap= region; a thread per CPU writes numbered events flat out, followed live by `crashring follow` until its interrupt, after the threads paused: every event it printed in order, printed + missed = written per CPU; sysrq panic under the load; every stream's events are exactly its indices, losses exact, the torn record invisible",
        only_612: None,
        newest: true,
        arches: Arches::PcAndArm64,
        run: crashes::crash_under_load,
    },
    Scenario {
        name: "nested-under-load",
        about: "memmap= region; a thread per CPU writes flat out while each CPU's timer interrupt and tasklet write into the middle of its records, sysrq NMI backtraces print on every CPU, printk, sched and irq sources on; sysrq panic; nothing dropped but records in flight, every writer's numbered events present and in order",
        only_612: None,
        newest: false,
        arches: Arches::PcAndArm64,
        run: crashes::nested_under_load,
    },
    Scenario {
        name: "held-reset",
        about: "memmap= region (arm64: a no-map reserved-memory node); the workload writes without end and reports its progress; QEMU's monitor resets the machine (system_reset) with no panic, notifier or shutdown, as a watchdog's reset line would; the next boot finds the generation still running, every marker and printk line the guest reported and none it did not, in order, nothing lost or torn",
        only_612: None,
        newest: false,
        arches: Arches::PcAndArm64,
        run: reset::held_reset,
    },
    Scenario {
        name: "compositor-crash",
        about: "memmap= region with a pool of user streams; an unprivileged compositor (uid 1000, crashring group) records frames into its own kernel stream while a test module prints DRM debug lines, after checks of what it and a user outside the group may not do (stale pages, a write-only file, root writing through its descriptor), a flood of its markers and stream, and two members flooding CPU 1 with 994-byte markers beside one writing once a second, each within its own byte budget; sysrq panic; the next boot recovers both on one timeline, with CPU 1's lines from before the flood",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: user_streams::compositor_crash,
    },
    Scenario {
        name: "drm-flight-recorder",
        about: "memmap= region; QEMU's standard VGA (bochs-drm); crashring.ko selects DRM's KMS, ATOMIC and STATE categories and a test module's pr_debug() by file:line before bochs loads; its probe and a program's modesets (raw KMS ioctls) go to the recorder, not printk; the module is unloaded and loaded again three times under a modeset flood (panic_on_warn); a compositor-like member records its stream, its \"input\" category switched on and off by crashring debug while it runs; then \"printk\" is selected too; sysrq panic; the next boot formats every message, none was printed before, each one after is the kernel's own printk line, on one timeline with the compositor's frames, its input lines only while selected (also on the newest kernel)",
        only_612: None,
        newest: true,
        arches: Arches::Pc,
        run: drm::drm_flight_recorder,
    },
    Scenario {
        name: "signage-reboot-loop",
        about: "a Debian 12 guest with systemd: apt installs the two packages (DKMS builds the module), crashring arm, update-grub; a UEFI machine, OVMF boots GRUB's EFI build from an EFI System Partition, which reads the guest's grub.cfg (panic=5, MaxBundles=2), after every crash, and each boot's status gives its initrd and kernel clear of the range and no memory wipe requested; it crashes three times under a writer per CPU and reboots by itself; each boot's crashring-recover.service bundles the last crash; the two newest bundles are kept, each passes check-bundle with its own boot's markers, one journal message per crash; then report-without-crash in the last boot, which does not crash: a compositor-like program (uid 1000) calls crashring_request_report_of() through crashring-request.socket and has its checked report (its stream, the granted kernel line, nothing of uid 1001's), uid 1001 asking for its stream is refused, a flood is rate-limited, a report never pushes out a crash, one journal message per report",
        only_612: Some(DEBIAN_612),
        newest: false,
        arches: Arches::Pc,
        run: debian::signage_reboot_loop,
    },
    Scenario {
        name: "systemd-boot",
        about: "a Debian 12 guest that boots with systemd-boot (no GRUB; kernel-install writes the entries on its ESP from /etc/kernel/cmdline): crashring arm adds the range to the admin's line and runs kernel-install; OVMF boots systemd-boot, which boots the entry with the range reserved; a crash under a writer per CPU, recovered by the next boot, check-bundle passes; crashring disarm gives the admin's line back, in /etc/kernel/cmdline and in the entry",
        only_612: Some(DEBIAN_612),
        newest: false,
        arches: Arches::Pc,
        run: debian::systemd_boot,
    },
    Scenario {
        name: "kdump-tools",
        about: "a Debian 12 guest imaged with kdump-tools and both packages (installed in its image, as a fleet's machines are built), armed in its first boot; then kdump-tools' configuration put back without crashring's part (as ucf or a later install of kdump-tools would), which status flags and the next boot repairs, privately, before kdump-tools loads; panic; the capture kernel boots the root file system, where crashring-capture.service bundles the crash before kdump-tools saves its dump; the next boot finds the region intact and the crash archived, and only acknowledges it; the bundle holds every workload event; then apt-get purge leaves nothing of arm's: no drop-in, no memmap= in grub.cfg, no part in kdump-tools' configuration, no module",
        only_612: Some(DEBIAN_612),
        newest: false,
        arches: Arches::Pc,
        run: debian::kdump_tools,
    },
];

/// The machines a scenario runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Arches {
    /// The PC (x86-64) only.
    Pc,
    /// The PC and arm64's virt board.
    PcAndArm64,
    /// arm64 only: what only arm64 has to show.
    Arm64,
}

impl Scenario {
    /// Why the scenario does not run on `series`, if it does not.
    pub fn skips(&self, series: &str) -> Option<&'static str> {
        let arm64 = series.starts_with("arm64-");
        match (series, self.only_612) {
            _ if arm64 && self.arches == Arches::Pc => Some(NOT_ON_ARM64),
            _ if !arm64 && self.arches == Arches::Arm64 => Some(ONLY_ON_ARM64),
            ("newest", _) if !self.newest => Some(NOT_ON_NEWEST),
            ("6.1" | "newest" | "arm64-6.1", Some(why)) => Some(why),
            _ => None,
        }
    }
}

/// The newest kernel boots the scenarios that exercise what a new kernel
/// can break (the module's build, its load, the panic path, the writer
/// under load, the functions the debug source diverts, whose signatures
/// and flags change between releases); the rest would only repeat them
/// at an hour's cost.
const NOT_ON_NEWEST: &str =
    "the newest kernel runs warm-reboot, machine-check, memory-failure-panic, crash-under-load and drm-flight-recorder, what a new release can break";

/// The arm64 guests run what the architecture can change: the module's
/// build and load, the region reserved its way, the panic and reset
/// paths, the writer under load and nesting, and the static crashring
/// reading what they kept.
const NOT_ON_ARM64: &str =
    "arm64 runs warm-reboot-arm64, qemu-dump, kdump-vmcore, panic-in-irq, crash-under-load, nested-under-load and held-reset";
/// What is arm64's own: how its region is reserved and placed.
const ONLY_ON_ARM64: &str = "it checks what only arm64 has";

pub fn find(name: &str) -> Result<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name).with_context(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        format!("no scenario {name}; there are: {}", names.join(", "))
    })
}

/// Prints the table (`cargo xtask list`).
pub fn list() {
    for s in SCENARIOS {
        println!("{:<24} {}", s.name, s.about);
    }
}

/// Runs one scenario and prints its outcome; the files stay in `keep` or,
/// without it, in target/crashring/runs.
pub fn run(sh: &Shell, name: &str, series: &str, keep: Option<PathBuf>) -> Result<String> {
    let scenario = find(name)?;
    if let Some(why) = scenario.skips(series) {
        bail!("{name} does not run on {series}: {why}");
    }
    let k = guest::kernel(series)?;
    let kept = keep.is_some();
    let dir = keep.unwrap_or_else(|| work_dir(sh).join("runs").join(format!("{name}-{series}")));
    sh.create_dir(&dir)?;
    let dir = std::fs::canonicalize(&dir)?;
    eprintln!(
        "== scenario {name} on {} (files in {})",
        k.release,
        dir.display()
    );
    let summary = (scenario.run)(
        sh,
        &k,
        &Artifacts {
            dir: dir.clone(),
            kept,
        },
    )
    .map_err(|e| e.context(format!("scenario {name} on {}", k.release)))?;
    println!("PASS {name} [{}]: {summary}", k.release);
    if !kept {
        prune_passed(&dir)?;
    }
    Ok(summary)
}

/// Above this, a file of a passed run is a disk, a dump or an initramfs.
const PRUNE_ABOVE: u64 = 16 << 20;

/// Deletes what a passed run no longer needs: its disks, dumps and
/// initramfs, gigabytes over a whole suite (a CI run once ran out of disk).
/// Its reports, logs and bundles stay for a look after the run.
fn prune_passed(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_file() && meta.len() > PRUNE_ABOVE {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Markers and printk lines the workload writes before it crashes the guest.
pub const WORKLOAD_EVENTS: u32 = 400;

/// The workload's writing: markers through /dev/crashring and printk lines
/// through /dev/kmsg, numbered so the check can tell what is missing.
pub fn workload_writes() -> String {
    format!(
        r#"i=1
while [ $i -le {WORKLOAD_EVENTS} ]; do
  echo "workload marker $i" > /dev/crashring
  echo "<6>crashring-workload: printk $i" > /dev/kmsg
  i=$((i+1))
done
cat /sys/kernel/crashring/stats
"#
    )
}

/// The workload, then a sysrq panic.
pub fn workload_and_sysrq() -> String {
    workload_then_sysrq("")
}

/// The workload, `before_crash`'s shell lines, then a sysrq panic.
pub fn workload_then_sysrq(before_crash: &str) -> String {
    workload_writes() + before_crash + "echo c > /proc/sysrq-trigger\n"
}

/// What the second boot writes at [`DONE_MIB`] MiB of its disk once it
/// has saved the previous generation.
pub const DONE: &str = "crashring-test: done";
/// Past the largest slot a scenario saves (a 64 MiB range's 32 MiB).
pub const DONE_MIB: u64 = 40;
/// The second boot's disk: the saved slot, then the verdict.
const SAVE_DISK_MIB: u64 = DONE_MIB + 1;

/// How [`boot_script`]'s recovery phase releases the generation it saved
/// when a scenario gives nothing else: an ack naming it.
pub const ACK: &str = r#"echo "generation=$gen" > /sys/kernel/crashring/previous_ack || { echo "crashring-test: ack failed"; ack=1; }
"#;

/// A guest's /init body for the warm-reboot path: `before` runs on every
/// boot before the module loads; on the first boot (no previous
/// generation) `record` runs and must bring the kernel down; on the next
/// boot the previous generation is copied to /dev/vda and released by
/// `release` ([`ACK`], or `crashring recover`, which acks what it
/// bundled), which sets `ack=1` if it fails.
pub fn boot_script(module_args: &str, before: &str, record: &str, release: &str) -> String {
    format!(
        r#"{before}insmod /lib/crashring.ko {module_args} || echo "crashring-test: insmod failed"
if grep -q '^none' /sys/kernel/crashring/previous_summary; then
  echo "crashring-test: phase record"
{record}  echo "crashring-test: the kernel survived the record phase"
else
  echo "crashring-test: phase recover"
  cat /sys/kernel/crashring/previous_summary
  echo "crashring-test: region $(cat /sys/kernel/crashring/region)"
  echo "crashring-test: status before ack $(cat /sys/kernel/crashring/status)"
  # Here, not before a panic, whose output can cut the console short.
  echo "crashring-test: stats $(wc -l < /sys/kernel/crashring/stats) lines, last $(tail -n 1 /sys/kernel/crashring/stats | cut -d ' ' -f 1)"
  crashring info /sys/kernel/crashring/previous
  info=$?
  crashring info --json /sys/kernel/crashring/previous > /info.json
  json=$?
  exec 3< /sys/kernel/crashring/previous
  dd bs=4096 count=1 <&3 >/dev/null 2>&1
  dd if=/sys/kernel/crashring/previous of=/dev/vda bs=1M conv=fsync 2>/dev/null
  ack=0
  # The ack names the generation it releases; one naming another releases
  # nothing (a second recovery that lost the race, say).
  gen=$(head -n 1 /sys/kernel/crashring/previous_summary | sed -n 's/.*generation \([0-9]*\) .*/\1/p')
  echo "generation=$((gen + 1))" > /sys/kernel/crashring/previous_ack 2>/dev/null && ack=2
{release}  # A reader that opened previous before the ack must not read on into
  # whatever comes next.
  if dd bs=4096 count=1 <&3 >/dev/null 2>&1; then
    echo "crashring-test: previous still read after the ack"
  else
    echo "crashring-test: previous refused after the ack"
  fi
  exec 3<&-
  echo "crashring-test: status $(cat /sys/kernel/crashring/status)"
  # The verdict goes on the disk too: the console is for diagnosis (after
  # a panic reboot its output has been seen to go missing).
  {{
    echo "{DONE}"
    echo "info $info json $json ack $ack; after the ack: $(head -n 1 /sys/kernel/crashring/previous_summary)"
    cat /info.json
  }} | dd of=/dev/vda bs=1M seek={DONE_MIB} conv=fsync 2>/dev/null
  echo "{DONE}"
fi
poweroff -f
"#
    )
}

/// The standard scenario script: the workload, a sysrq panic, recovery.
pub fn workload_script(module_args: &str, before_crash: &str) -> String {
    boot_script(module_args, "", &workload_then_sysrq(before_crash), ACK)
}

pub fn raw_disk(path: &Path, bytes: u64) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.set_len(bytes)?;
    Ok(())
}

/// How the kernel went down, as the crash marker and the trace must show.
pub struct CrashExpect<'a> {
    /// The panic message contains one of these.
    pub messages: &'a [&'a str],
    /// A marker the cause logged just before it brought the kernel down.
    pub cause: Option<&'a str>,
    /// The starts of lines the crash's signature must be made of
    /// (`extractor::recover::signature`), besides its reason and message.
    pub signature: &'a [&'a str],
}

/// A sysrq-triggered crash (`echo c > /proc/sysrq-trigger`).
pub const SYSRQ: CrashExpect<'static> = CrashExpect {
    messages: &["sysrq triggered crash"],
    cause: None,
    signature: &[
        "title: sysrq: Trigger a crash",
        "calls: sysrq_handle_crash < __handle_sysrq < write_sysrq_trigger",
    ],
};

/// A sysrq crash as the kernel that recorded `release` reports it. 6.1 on
/// arm64 names the return address of sysrq_handle_crash()'s call to
/// panic(), its last instruction, after the function behind it, a frame
/// the signature leaves out (`signature::after_noreturn_call`).
pub fn sysrq_as_reported_by(release: &str) -> CrashExpect<'static> {
    const ARM64_6_1: CrashExpect<'static> = CrashExpect {
        signature: &[
            "title: sysrq: Trigger a crash",
            "calls: __handle_sysrq < write_sysrq_trigger",
        ],
        ..SYSRQ
    };
    match release.starts_with("6.1.") && release.ends_with("-arm64") {
        true => ARM64_6_1,
        false => SYSRQ,
    }
}

/// The region in what the guest saved.
pub fn parse_saved(image: &[u8]) -> Result<Region<'_>> {
    let at = find_regions(image)
        .next()
        .context("no crashring region in what the guest saved")?;
    Ok(Region::parse(&image[at..], HeaderTrust::Checksummed)?)
}

/// Checks one recovered region against the workload: state crashed by a
/// panic; markers and printk lines 1..=N all present, once, in order, with
/// the right level; nothing else of the workload's invented; no loss; the
/// crash marker last.
pub fn check_warm_reboot(image: &[u8]) -> Result<String> {
    check_region(&parse_saved(image)?)
}

/// What a region holds of the workload's writing.
pub struct Recovered<'a> {
    pub trace: Trace<'a>,
    /// The workload's sequences as far as they were found.
    pub seq: WorkloadSeq,
    /// The last event of the merged trace and its decoded fields.
    pub last: Option<(u8, Vec<Value<'a>>)>,
}

/// The workload's two numbered sequences as a trace presents them: each
/// marker and printk line must be the next of its sequence, so any one
/// missing, repeated, reordered or invented fails, named. Shared by the
/// checks on a region and on the JSON lines a guest's crashring wrote.
#[derive(Default)]
pub struct WorkloadSeq {
    /// Markers and printk lines 1..=N seen so far.
    pub markers: u32,
    pub printk: u32,
    /// The texts of markers that are not the workload's (a test module's
    /// "about to crash" markers), in order.
    pub causes: Vec<String>,
}

impl WorkloadSeq {
    /// A marker event's text, at `ts` ns.
    pub fn marker(&mut self, text: &str, ts: u64) -> Result<()> {
        let Some(n) = text.strip_prefix("workload marker ") else {
            self.causes.push(text.to_owned());
            return Ok(());
        };
        let n: u32 = n
            .parse()
            .with_context(|| format!("marker {text:?} is not the workload's"))?;
        let want = self.markers + 1;
        ensure!(
            n == want,
            "marker {n} at {ts} ns, expected marker {want} (missing, repeated, reordered or invented)"
        );
        self.markers = n;
        Ok(())
    }

    /// A printk event's text and level, at `ts` ns; lines not the
    /// workload's are the kernel's own.
    pub fn printk(&mut self, text: &str, level: Option<u64>, ts: u64) -> Result<()> {
        let Some(n) = text.strip_prefix("crashring-workload: printk ") else {
            return Ok(());
        };
        let n: u32 = n
            .parse()
            .with_context(|| format!("printk {text:?} is not the workload's"))?;
        let want = self.printk + 1;
        ensure!(
            n == want,
            "printk line {n} at {ts} ns, expected line {want} (missing, repeated, reordered or invented)"
        );
        ensure!(
            level == Some(6),
            "printk line {n} has level {level:?}, the workload wrote 6"
        );
        self.printk = n;
        Ok(())
    }

    /// Both sequences are complete: `n` markers, then `n` printk lines.
    pub fn ensure_complete(&self, n: u32) -> Result<()> {
        ensure!(
            self.markers == n,
            "markers 1..={} recovered, the workload wrote {n}",
            self.markers
        );
        ensure!(
            self.printk == n,
            "printk lines 1..={} recovered, the workload wrote {n}",
            self.printk
        );
        Ok(())
    }
}

/// Walks a region's merged events through [`WorkloadSeq`]. Pages a dump
/// left out are allowed (makedumpfile's zero-page filter drops unused
/// pages); whether events went with them is the callers' loss check.
pub fn recover_workload<'a>(region: &Region<'a>) -> Result<Recovered<'a>> {
    let trace = region.decode();
    let damage: Vec<_> = trace
        .diagnostics
        .iter()
        // A header read without its CRC (HeaderTrust::Lenient) reports the
        // mismatch its caller chose to read past.
        .filter(|d| {
            !matches!(
                d.problem,
                Problem::Absent { .. } | Problem::HeaderCrc { .. }
            )
        })
        .collect();
    ensure!(damage.is_empty(), "diagnostics: {damage:?}");
    // Whatever brought the kernel down, each stream's tail says how far it
    // got and its newest pages are readable: no stream may end in a loss.
    let ends: Vec<_> = trace
        .streams
        .iter()
        .flat_map(|s| &s.losses)
        .filter(|l| l.kind == LossKind::End)
        .collect();
    ensure!(ends.is_empty(), "streams end in losses: {ends:?}");
    let e = region.header.endian;
    let mut seq = WorkloadSeq::default();
    let mut last = None;
    for item in merge(&trace.streams) {
        let Item::Event(ev) = item else { continue };
        let Some(ty) = region.schema.get(ev.type_id) else {
            last = Some((ev.type_id, Vec::new()));
            continue;
        };
        let values = ty.decode(ev.payload, e).map_err(|f| {
            anyhow::anyhow!(
                "event {} of stream {}: field {f} does not decode",
                ev.index,
                ev.stream
            )
        })?;
        let text = |i: usize| match values.get(i) {
            Some(Value::Str(s)) => String::from_utf8_lossy(s).into_owned(),
            _ => String::new(),
        };
        match ev.type_id {
            EVENT_MARKER => seq.marker(&text(2), ev.ts)?,
            EVENT_PRINTK => {
                let level = match values.first() {
                    Some(Value::Unsigned(l)) => Some(*l),
                    _ => None,
                };
                seq.printk(&text(4), level, ev.ts)?;
            }
            _ => {}
        }
        last = Some((ev.type_id, values));
    }
    Ok(Recovered { trace, seq, last })
}

/// [`check_warm_reboot`] on a parsed region.
pub fn check_region(region: &Region) -> Result<String> {
    check_region_with(region, &sysrq_as_reported_by(&region.header.kernel_release))
}

/// Fails unless the region's state block says the generation was still
/// running: nothing marked a crash or a shutdown, as `why` explains.
pub fn ensure_running(region: &Region, why: &str) -> Result<()> {
    let state = region
        .state
        .as_ref()
        .map_err(|p| anyhow::anyhow!("state block unreadable: {p}"))?;
    ensure!(
        state.state == STATE_RUNNING,
        "state is {state:?}, expected running ({why})"
    );
    Ok(())
}

/// The guest reports every this many markers of [`endless_workload`].
pub const REPORT_EVERY: u32 = 50;

/// The workload's writing without end, for a machine stopped from outside
/// (a power cut, a reset): each marker and its printk line, numbered, and
/// on the console every [`REPORT_EVERY`] markers how far it got.
pub fn endless_workload() -> String {
    format!(
        r#"i=1
while true; do
  echo "workload marker $i" > /dev/crashring
  echo "<6>crashring-workload: printk $i" > /dev/kmsg
  if [ $((i % {REPORT_EVERY})) -eq 0 ]; then echo "crashring-test: wrote $i"; fi
  i=$((i+1))
done
"#
    )
}

/// The most markers [`endless_workload`] said it wrote, in a serial log.
pub fn reported_progress(log: &str) -> Result<u32> {
    log.lines()
        .filter_map(|l| l.trim().strip_prefix("crashring-test: wrote "))
        .filter_map(|n| n.parse::<u32>().ok())
        .max()
        .context("the guest never reported progress")
}

/// A region whose machine was stopped from outside while
/// [`endless_workload`] wrote (`why`: how): still running (nobody marked
/// a crash), the workload's markers 1..=M in order with M at least what
/// the guest reported, printk lines 1..=P with P = M or M - 1 (each marker
/// is written before its printk line), and nothing lost at all: the
/// record in flight lies past its page's commit and is invisible
/// (FORMAT.md section 12, case 1), and QEMU's memory has no cache left
/// unwritten.
pub fn check_cut_short(region: &Region, reported: u32, why: &str) -> Result<String> {
    ensure_running(region, why)?;
    let r = recover_workload(region)?;
    let (markers, printk) = (r.seq.markers, r.seq.printk);
    ensure!(
        markers >= reported && reported > 0,
        "markers 1..={markers} recovered, but the guest reported writing {reported}"
    );
    ensure!(
        printk == markers || printk + 1 == markers,
        "printk lines 1..={printk} recovered after markers 1..={markers}: each marker's printk line follows it"
    );
    for s in &r.trace.streams {
        ensure!(
            s.lost_events() == 0,
            "stream {} lost events: {:?}",
            s.info.index,
            s.losses
        );
    }
    Ok(format!(
        "state running, {} events, markers 1..={markers} and printk lines 1..={printk} in order, none lost or torn",
        r.trace.event_count(),
    ))
}

/// Fails unless the region's state block says a panic crashed the kernel.
pub fn ensure_crashed_by_panic(region: &Region) -> Result<()> {
    let state = region
        .state
        .as_ref()
        .map_err(|p| anyhow::anyhow!("state block unreadable: {p}"))?;
    ensure!(
        state.state == STATE_CRASHED && state.reason == REASON_PANIC,
        "state is {state:?}, expected crashed by panic"
    );
    Ok(())
}

/// The events a stream lost beyond what a crash may cost it: the record
/// each stopped or interrupted writer had in flight, which the panic path
/// counts as dropped (FORMAT.md, "Nesting lanes"), at most one per stream.
pub fn lost_beyond_in_flight(s: &StreamTrace) -> u64 {
    s.lost_events() - s.lost(LossKind::Dropped).min(1)
}

/// [`check_region`] for a crash other than sysrq's.
pub fn check_region_with(region: &Region, expect: &CrashExpect) -> Result<String> {
    ensure_crashed_by_panic(region)?;
    let r = recover_workload(region)?;
    let lost: u64 = r.trace.streams.iter().map(lost_beyond_in_flight).sum();
    ensure!(
        lost == 0,
        "{lost} events lost: {:?}",
        r.trace
            .streams
            .iter()
            .map(|s| &s.losses)
            .collect::<Vec<_>>()
    );
    r.seq.ensure_complete(WORKLOAD_EVENTS)?;
    let (last_type, crash) = r.last.as_ref().context("no events at all")?;
    ensure!(
        *last_type == EVENT_CRASH,
        "the last event is type {last_type}, not the crash marker"
    );
    ensure!(
        crash.first() == Some(&Value::Unsigned(REASON_PANIC.into())),
        "crash marker reason {:?}",
        crash.first()
    );
    let message = match crash.get(2) {
        Some(Value::Str(m)) => String::from_utf8_lossy(m).into_owned(),
        other => bail!("crash marker message {other:?} is not text"),
    };
    ensure!(
        expect.messages.iter().any(|m| message.contains(m)),
        "crash marker message {message:?} is none of {:?}",
        expect.messages
    );
    if let Some(cause) = expect.cause {
        ensure!(
            r.seq.causes.iter().any(|c| c == cause),
            "no marker {cause:?} before the crash; markers of other sources: {:?}",
            r.seq.causes
        );
    }
    let signature = check_signature(region, &message, expect.signature)?;
    Ok(format!(
        "{} events over {} streams, {WORKLOAD_EVENTS} markers and {WORKLOAD_EVENTS} printk lines in order, none lost, crash marker last: {:?}; {signature}",
        r.trace.event_count(),
        r.trace.streams.len(),
        message.trim_end()
    ))
}

/// The crash's signature is made of its reason, its whole `message` and
/// lines starting with each of `lines`. Says it and its lines.
fn check_signature(region: &Region, message: &str, lines: &[&str]) -> Result<String> {
    use extractor::recover::signature;
    let s = signature::of(region, &region.decode_paged())
        .context("the crashed generation has no signature")?;
    let reason = format!("message: {}", signature::normalize(message));
    ensure!(
        s.basis.get(1) == Some(&reason),
        "the signature's basis {:?} does not have {reason:?} second",
        s.basis
    );
    for line in lines {
        ensure!(
            s.basis.iter().any(|b| b.starts_with(line)),
            "the signature's basis {:?} has no line starting {line:?}",
            s.basis
        );
    }
    Ok(format!("signature {} of {:?}", s.id, &s.basis[1..]))
}

/// An event's fields by name, as the region's schema names them.
pub fn fields<'a>(region: &Region, ev: &Event<'a>) -> Result<BTreeMap<String, Value<'a>>> {
    let t = region
        .schema
        .get(ev.type_id)
        .with_context(|| format!("event type {} is not in the schema", ev.type_id))?;
    let values = t
        .decode(ev.payload, region.header.endian)
        .map_err(|f| anyhow::anyhow!("a {} event does not decode at field {f}", t.name))?;
    Ok(t.fields
        .iter()
        .map(|f| f.name.clone())
        .zip(values)
        .collect())
}

/// An unsigned field of [`fields`].
pub fn uint(f: &BTreeMap<String, Value>, name: &str) -> Result<u64> {
    match f.get(name) {
        Some(Value::Unsigned(x)) => Ok(*x),
        other => bail!("field {name} is {other:?}"),
    }
}

/// A string field of [`fields`], as text.
pub fn text(f: &BTreeMap<String, Value>, name: &str) -> Result<String> {
    match f.get(name) {
        Some(Value::Str(s) | Value::Chars(s)) => Ok(String::from_utf8_lossy(s).into_owned()),
        other => bail!("field {name} is {other:?}"),
    }
}

/// The boot's printk lines from before the module loaded, recorded when
/// it did (`printk` is every printk event, `backfilled` those flagged so,
/// each with its time): as many as the module said it recorded, from the
/// kernel's banner on, at their own times, in time order and all before
/// the module's line.
pub fn check_backfill(
    region: &Region,
    printk: &[(u64, String)],
    backfilled: &[(u64, String)],
) -> Result<String> {
    // "..., 406 earlier printk lines recorded in 5210 us".
    const SAID: &str = " earlier printk lines recorded in ";
    let (at, said, micros) = printk
        .iter()
        .find_map(|(ts, t)| {
            let (before, after) = t.split_once(SAID)?;
            let n = before.rsplit(' ').next()?.parse::<usize>().ok()?;
            let us = after.strip_suffix(" us")?.parse::<u64>().ok()?;
            Some((*ts, n, us))
        })
        .context(
            "the module's recording line, with its count of earlier lines, is not in the region",
        )?;
    ensure!(
        said == backfilled.len() && said > 0,
        "the module said it recorded {said} earlier printk lines, the region holds {} flagged so",
        backfilled.len()
    );
    ensure!(
        backfilled[0].1.starts_with("Linux version "),
        "the first backfilled line is {:?}, not the kernel's banner",
        backfilled[0].1
    );
    ensure!(
        backfilled.windows(2).all(|w| w[0].0 <= w[1].0) && backfilled.iter().all(|b| b.0 <= at),
        "backfilled lines out of time order, or after the module's line at {at} ns"
    );
    // At their own times: the banner long before the region was made.
    let created = region.header.created_ns;
    ensure!(
        backfilled[0].0 < created / 2,
        "the banner is backfilled at {} ns, the region made at {created} ns: not at its own time",
        backfilled[0].0
    );
    Ok(format!(
        "the {said} printk lines of the boot before the module loaded, backfilled from the banner \
         on, in {micros} us"
    ))
}
