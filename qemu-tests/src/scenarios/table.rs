//! The scenario table: every QEMU scenario with what it shows, the
//! kernels and machines it runs on, and its entry point in a sibling
//! module; `cargo xtask list` prints it and `test` runs it in order.

use super::{
    arm64, crashes, debian, dracut, drm, dumps, kdump, pmem, ras, reset, user_streams, warm_reboot,
    Artifacts,
};
use crate::env::guest::Kernel;
use anyhow::{Context, Result};
use xshell::Shell;

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
        about: "memmap= region; hibernation refused while recording; workload, during which the periodic write-back writes back its pages and no idle stream's; markers into a persistent ftrace instance beside it (6.12+); sysrq panic; warm reboot; the module keeps the previous generation; the guest's crashring reads it; a user who is not root reads previous_summary without the crash message and is refused stats; ack; crashring ftrace reads the instance through /dev/mem as the kernel's own reader does",
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
        about: "memmap= region; kexec_file_load capture kernel; panic; in the capture kernel crashring reads the region from /dev/mem by physical address; makedumpfile -c of /proc/vmcore, which the region is not in, is a vmcore as an unarmed machine leaves it: info describes it, extract refuses it naming crashring dmesg, its printk log equals makedumpfile --dump-dmesg's and the guest's own dmesg; on arm64 6.1 the range is a no-map device-tree node, which arm64's /dev/mem does not read: the module in the capture kernel offers it as previous, and kexec-tools, finding no _text in 6.1's kallsyms, is required to say so (its /proc/vmcore is wrong)",
        only_612: None,
        newest: false,
        arches: Arches::PcAndArm64On61,
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
        about: "arm64's virt board: the range reserved by reserve_mem= (6.12) or, on 6.1, which has neither that nor memmap=, by a reserved-memory node of the device tree marked no-map; workload; sysrq panic; warm reboot (PSCI); the guest's static arm64 crashring reads the previous generation as the host's does, and the golden images written on amd64 (format v1 and v2, little- and big-endian) to the same bytes of info --json and JSON lines; on 6.12, five cold boots each way say where reserve_mem= put the range: by QEMU with KASLR and without (it stays), and by UEFI firmware (AAVMF) with an entropy source, whose stub places the kernel at random physically: a page-aligned range moves by a page, the 2 MiB alignment crashring arm writes must keep it in place",
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
        about: "memmap= region with a pool of user streams; an unprivileged compositor (uid 1000, crashring group) records frames into its own kernel stream while a test module prints DRM debug lines, and a program set-user-ID to uid 1000 that uid 1001 runs holds a stream that must be uid 1000's, after checks of what it and a user outside the group may not do (stale pages, a write-only file, root writing through its descriptor; sysfs debug read by root through a descriptor the member opened shows the member's view), a flood of its markers and stream, and two members flooding CPU 1 with 994-byte markers beside one writing once a second, each within its own byte budget; sysrq panic; the next boot recovers both on one timeline, with CPU 1's lines from before the flood, and previous_summary's crash message is shown to root's descriptor, not to one the member opened",
        only_612: None,
        newest: false,
        arches: Arches::Pc,
        run: user_streams::compositor_crash,
    },
    Scenario {
        name: "drm-flight-recorder",
        about: "memmap= region; QEMU's standard VGA (bochs-drm); crashring.ko selects DRM's KMS, ATOMIC and STATE categories and a test module's pr_debug() by file:line before bochs loads; its probe and a program's modesets (raw KMS ioctls) go to the recorder, not printk; the module is unloaded and loaded again three times under a modeset flood (panic_on_warn); a compositor-like member records its stream, its \"input\" category switched on and off by crashring debug while it runs; then \"printk\" is selected too; sysrq panic; the next boot formats every message, none was printed before, each one after is the kernel's own printk line, each DRM one a line printk printed without the module in a control run on the next boot (addresses and numbers aside), on one timeline with the compositor's frames, its input lines only while selected (also on the newest kernel); on 6.1 without a callsite area (callsite_pages=0), so that every message is the writer's formatted fallback, dynamic debug's prefix and the device inside it, held to the same checks",
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
    /// The PC, and arm64's virt board with 6.1 only: 6.1's own way,
    /// where 6.12 has reserve_mem= (`kdump-vmcore` covers it there).
    PcAndArm64On61,
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
            ("arm64-6.12", _) if self.arches == Arches::PcAndArm64On61 => Some(ARM64_61_WAY),
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
    "arm64 runs warm-reboot-arm64, qemu-dump, kdump-vmcore, kdump-direct (6.1), panic-in-irq, crash-under-load, nested-under-load and held-reset";
/// On arm64 6.12, the capture kernel reads a reserve_mem= range from
/// /proc/vmcore (kdump-vmcore); a no-map node is what 6.1 has.
const ARM64_61_WAY: &str =
    "on arm64 it shows 6.1's way, a no-map node read through the module; kdump-vmcore covers 6.12";
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
