//! Hardware errors, injected from outside the guest the way a machine
//! reports them: QEMU's monitor latches machine checks into a vCPU's banks
//! (a corrected one, found by the kernel's poll, and a fatal one, raised
//! as #MC) and raises a PCIe error in a root port's AER capability, and
//! the kernel's hwpoison injector takes a page out of service.

use super::{
    check_backfill, check_region_with, fields, host_crashring, parse_saved, ramoops, text, uint,
    warm_reboot, warm_reboot_run, workload_writes, Artifacts, CrashExpect, WarmReboot,
};
use crate::env::guest::Kernel;
use crate::env::qemu::Running;
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::read::Region;
use pstore_ring::schema::{
    Value, EVENT_AER, EVENT_CRASH, EVENT_HW_ERROR, EVENT_MCE, EVENT_MEMORY_FAILURE, EVENT_PRINTK,
    EVENT_SUPPRESSED, HW_ERROR_ARM, HW_ERROR_EDAC, HW_ERROR_EXTLOG, HW_ERROR_NON_STANDARD,
    MCE_FROM_PANIC, MCE_FROM_TRACEPOINT, PRINTK_BACKFILLED,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use xshell::{cmd, Shell};

/// A machine check as QEMU's `mce` command latches it into CPU 0's bank.
struct Injected {
    bank: u64,
    status: u64,
    mcg_status: u64,
    addr: u64,
    /// Bits 5:0 give the address's least significant valid bit (12: a
    /// page), bits 8:6 its mode (2: physical), so that the kernel, which
    /// masks the address by them, keeps it whole.
    misc: u64,
}

impl Injected {
    fn command(&self) -> String {
        format!(
            "mce 0 {} {:#x} {:#x} {:#x} {:#x}",
            self.bank, self.status, self.mcg_status, self.addr, self.misc
        )
    }
}

/// Corrected (VAL EN MISCV ADDRV), internal parity error: not a memory
/// error on either vendor, so the kernel's corrected-error collector
/// (RAS_CEC), which swallows corrected DRAM errors, lets it through.
const CORRECTED: Injected = Injected {
    bank: 1,
    status: 0x9c00_0000_0000_0005,
    mcg_status: 0,
    addr: 0x1234_5000,
    misc: 0x8c,
};

/// The same error on another bank and address, latched before the module
/// loads: the kernel's printk lines about it reach the ring only as the
/// boot's backfill (its tracepoint fired with nobody attached).
const EARLY: Injected = Injected {
    bank: 3,
    status: 0x9c00_0000_0000_0005,
    mcg_status: 0,
    addr: 0x0fed_c000,
    misc: 0x8c,
};

/// The kernel's line for a polled machine check (arch/x86/kernel/cpu/mce/
/// core.c, __print_mce()): "... Machine Check: 0 Bank 3: 9c00000000000005".
fn logged(e: &Injected) -> String {
    format!("Bank {}: {:016x}", e.bank, e.status)
}

/// Before the module loads, on the first boot only (the region is still
/// zeros): the kernel polls the banks every second, the host latches
/// [`EARLY`], and the guest waits for the kernel to log it. The guest runs
/// from its initramfs throughout, as a box's early boot does.
fn early() -> String {
    format!(
        r#"if [ "$(devmem {REGION_AT:#x} 32)" = "0x00000000" ]; then
  echo 1 > /sys/devices/system/machinecheck/machinecheck0/check_interval
  echo "crashring-test: inject early"
  i=0
  until dmesg | grep -q "{logged}"; do
    i=$((i+1))
    if [ $i -gt 60 ]; then echo "crashring-test: early was not recorded"; break; fi
    sleep 1
  done
fi
"#,
        logged = logged(&EARLY)
    )
}

/// Uncorrected, processor context corrupt (VAL UC EN MISCV ADDRV PCC),
/// internal timer error, raised as #MC (MCG_STATUS RIPV EIPV MCIP): the
/// kernel must panic.
const FATAL: Injected = Injected {
    bank: 4,
    status: 0xbe00_0000_0000_0400,
    mcg_status: 0x7,
    addr: 0x0abc_d000,
    misc: 0x8c,
};

/// A PCIe root port on a q35 machine, whose AER capability QEMU's
/// monitor raises errors in: the kernel's AER driver (ACPI's _OSC grants
/// it control) reports each through aer_event.
const ROOT_PORT: &str = "rp0";
const MACHINE: &[&str] = &[
    "-machine",
    "q35",
    "-device",
    "pcie-root-port,id=rp0,chassis=1,slot=1",
];
/// A correctable Receiver Error: bit 0 of the Correctable Error Status,
/// given to the monitor as the number (with -c, correctable).
const AER_STATUS: u64 = 0x1;

/// The page the hwpoison injector takes out of service: one that
/// `memmap=` keeps from the allocator ([`POISONED_PAGE`]), so that no
/// process or cache holds it and the kernel, which cannot handle a
/// reserved page, ignores it the same way on every boot. (A page of
/// the allocator's was free on most boots, and in use on one.)
const POISONED_PFN: u64 = 0x30000;
const POISONED_PAGE: &str = "memmap=4K$0x30000000";

/// The storm: corrected memory errors the test module logs through
/// mce_log() (kernel/test/crashring_test.c, `mce_storm`), as a failing
/// DIMM's would come from the kernel's poll, each at the page after the
/// last one's: a trip through the kernel's record pool and decoder chain
/// to the tracepoint (those that find the pool full are dropped before
/// it, and are not counted).
const STORM: Injected = Injected {
    bank: 2,
    status: 0x9c00_0000_0000_009f,
    mcg_status: 0,
    addr: 0x5678_9000,
    misc: 0x8c,
};
const STORM_ERRORS: u64 = 100_000;
/// The region: 64 MiB, for the kernel's own lines about the storm. 7.3
/// logs "mce: [Hardware Error]: Machine check events logged" for nearly
/// every error that reaches the tracepoint (6.1 and 6.12 rate-limit it):
/// some 90 000 printk lines, which a 16 MiB region's CPU streams cannot
/// hold beside the workload's. After ramoops' area at 0x41000000.
const REGION_AT: u64 = 0x4800_0000;
const REGION_MIB: u64 = 64;

/// The module's budget in this scenario, hardware-error events per CPU
/// per second: far below what the storm brings.
const BUDGET: u64 = 20;

/// The record phase: the kernel polls the banks every second; each
/// injection in turn, the guest saying when it is ready for the next;
/// the storm with the workload writing beside it, counted by the kernel's
/// own trace of the tracepoint; the fatal error, which must bring the
/// kernel down.
fn record() -> String {
    format!(
        r#"# Asks the host for injection $1 and waits up to a minute for an event
# of type $2 whose line holds $3 in the generation being recorded.
injected() {{
  echo "crashring-test: inject $1"
  i=0
  until crashring extract /dev/crashring-current --type $2 2>/dev/null | grep -q "$3"; do
    i=$((i+1))
    if [ $i -gt 60 ]; then echo "crashring-test: $1 was not recorded"; break; fi
    sleep 1
  done
}}
echo 1 > /sys/devices/system/machinecheck/machinecheck0/check_interval
injected corrected mce 'bank={ce_bank} '
injected aer aer 'aer: '
mount -t tracefs tracefs /sys/kernel/tracing
# What the kernel's own trace of the tracepoint counts: what each CPU's
# buffer holds and what it overwrote.
traced() {{ cat /sys/kernel/tracing/per_cpu/cpu*/stats | awk '/^(entries|overrun):/ {{ n += $2 }} END {{ print n }}'; }}
echo 1 > /sys/kernel/tracing/events/mce/mce_record/enable
# The RAS tracepoints no QEMU device fires, fired as a driver would, then
# the storm, with the workload writing beside it.
({workload}) > /dev/null &
insmod /lib/crashring_test.ko action=ras mce_storm={storm} || echo "crashring-test: ras insmod failed"
wait
# Until the decoder chain's work has caught up (the tracepoint's count
# stops moving).
before=-1
now=$(traced)
while [ "$now" != "$before" ]; do sleep 1; before=$now; now=$(traced); done
echo 0 > /sys/kernel/tracing/events/mce/mce_record/enable
echo "crashring-test: storm traced $now"
load_later
mount -t debugfs debugfs /sys/kernel/debug
# A fresh budget second for the page's event, after the storm.
sleep 2
# The kernel refuses a reserved page (EBUSY), and says so in its log.
echo {pfn:#x} > /sys/kernel/debug/hwpoison/corrupt-pfn 2>/dev/null
echo "crashring-test: inject fatal"
sleep 120
"#,
        workload = workload_writes(),
        ce_bank = CORRECTED.bank,
        pfn = POISONED_PFN,
        storm = STORM_ERRORS,
    )
}

/// Runs `line` on QEMU's human monitor. Its errors come back as text: a
/// command that took says nothing (`mce`) or begins with OK
/// (`pcie_aer_inject_error`).
fn monitor(vm: &mut Running, line: &str) -> Result<()> {
    let reply = vm.execute(&format!(
        r#"{{"execute":"human-monitor-command","arguments":{{"command-line":"{line}"}}}}"#
    ))?;
    let said: serde_json::Value = serde_json::from_str(&reply)?;
    let said = said["return"].as_str().unwrap_or("no answer");
    ensure!(
        said.is_empty() || said.starts_with("OK "),
        "QEMU's monitor refused `{line}`: {}",
        said.trim()
    );
    Ok(())
}

fn inject(vm: &mut Running) -> Result<()> {
    vm.wait_for_serial("crashring-test: inject early", Duration::from_secs(200))?;
    monitor(vm, &EARLY.command())?;
    vm.wait_for_serial("crashring-test: inject corrected", Duration::from_secs(200))?;
    monitor(vm, &CORRECTED.command())?;
    vm.wait_for_serial("crashring-test: inject aer", Duration::from_secs(120))?;
    monitor(
        vm,
        &format!("pcie_aer_inject_error -c {ROOT_PORT} {AER_STATUS:#x}"),
    )?;
    vm.wait_for_serial("crashring-test: inject fatal", Duration::from_secs(120))?;
    monitor(vm, &FATAL.command())
}

/// The fatal machine check in words, as every output names it.
fn fatal_words() -> String {
    format!(
        "machine check, bank {}, addr {:#x}, uncorrected, processor context corrupt",
        FATAL.bank, FATAL.addr
    )
}

/// The next boot's release of the generation: what
/// crashring-recover.service runs, onto the ext2 disk, with ramoops'
/// records of the crash mounted for it (the kernel's copy beside them).
fn recover_next_boot() -> String {
    format!(
        r#"  mount -t ext2 /dev/vdb /mnt || echo "crashring-test: mount failed"
{pstore}  crashring recover --dir /mnt/bundles || {{ echo "crashring-test: ack failed"; ack=1; }}
  echo "crashring-test: files $(ls -p /mnt/bundles | grep -v / | tr '\n' ' ')"
  umount /mnt
"#,
        pstore = ramoops::recover_script(false)
    )
}

pub fn machine_check(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let module_args = format!("region={REGION_MIB}M@{REGION_AT:#x} ras_events_per_sec={BUDGET}");
    let region = format!("memmap={REGION_MIB}M${REGION_AT:#x}");
    let early = early();
    let append = format!("{POISONED_PAGE} {}", ramoops::APPEND);
    let release = recover_next_boot();
    let plan = WarmReboot {
        name: "machine-check",
        region_append: &region,
        module_args: &module_args,
        extra_append: &append,
        before_insmod: &early,
        qemu_args: MACHINE,
        cpus: 2,
        later_modules: &["hwpoison-inject", "ramoops"],
        test_module: true,
        monitor: Some(&inject),
        ext2_disk: true,
        release: &release,
        ..WarmReboot::memmap(ramoops::record_script(false) + &record())
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    for (what, asked) in [
        ("machine check before the module loaded", "early"),
        ("corrected machine check", "corrected"),
        ("PCIe error", "aer"),
    ] {
        ensure!(
            !saved.said(&format!("crashring-test: {asked} was not recorded")),
            "the {what} was not recorded within a minute (serial log {})",
            saved.serial.display()
        );
    }
    let traced: u64 = saved
        .log
        .lines()
        .find_map(|l| {
            l.split_once("crashring-test: storm traced ")
                .map(|(_, n)| n)
        })
        .and_then(|n| n.trim().parse().ok())
        .context("the guest did not say how many mce_record events the kernel traced")?;
    let summary = saved.check(|image| {
        let region = parse_saved(image)?;
        let expect = CrashExpect {
            messages: &["machine check"],
            cause: None,
            signature: &["hardware: machine check, bank "],
        };
        let workload = check_region_with(&region, &expect)?;
        let errors = check_errors(&region, traced)?;
        let others = check_hw_errors(&region, k.series != "6.1")?;
        Ok(format!("{workload}; {errors}; {others}"))
    })?;
    let described = check_text(sh, &art.dir.join("previous.img"))?;
    // The panic's message as the ring recorded it ("Fatal local machine
    // check" where the CPU offers local machine checks, as QEMU's do).
    let panic = match &parse_saved(&saved.image)?.state {
        Ok(state) => state.message.clone(),
        Err(e) => bail!("the state block is unreadable: {e}"),
    };
    let recovered = check_recovered(sh, art, &saved.log, &panic)?;
    Ok(format!("{summary}; {described}; {recovered}"))
}

/// The bundle the next boot's `crashring recover` made: its summary
/// names the machine check, and it carries the panic's ramoops record
/// (`panic`, its message) from the next boot's /sys/fs/pstore.
fn check_recovered(sh: &Shell, art: &Artifacts, log: &str, panic: &str) -> Result<String> {
    let (json, bundle) = warm_reboot::one_bundle(log, "files")?;
    let disk = art.dir.join("files.ext2");
    let checked = warm_reboot::checked_off(sh, art, &disk, &format!("bundles/{bundle}"))?;
    let summary: serde_json::Value = serde_json::from_slice(&warm_reboot::copied_off(
        sh,
        art,
        &disk,
        &format!("bundles/{json}"),
    )?)?;
    let want = fatal_words();
    ensure!(
        summary["hardware_error"]
            .as_str()
            .is_some_and(|e| e.starts_with(&want)),
        "the summary does not name the machine check: {summary}"
    );
    let unpacked = art.dir.join("bundle");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked)?;
    let archive = art.dir.join(bundle);
    cmd!(sh, "tar -xzf {archive} -C {unpacked}").quiet().run()?;
    let top = unpacked.join(&checked.top);
    let pstore = ramoops::check_next_boot_bundled(sh, art, &disk, &checked.manifest, &top, panic)?;
    Ok(format!(
        "the next boot's crashring recover bundled it as {bundle}, its summary naming the machine check; {pstore}"
    ))
}

/// Whether `f`, an mce event's fields, holds exactly what was injected.
fn is(f: &BTreeMap<String, Value>, origin: u8, want: &Injected) -> Result<bool> {
    Ok(is_at(f, origin, want)? && uint(f, "addr")? == want.addr)
}

/// [`is`] but for the address.
fn is_at(f: &BTreeMap<String, Value>, origin: u8, want: &Injected) -> Result<bool> {
    Ok(uint(f, "origin")? == u64::from(origin)
        && uint(f, "bank")? == want.bank
        && uint(f, "status")? == want.status
        && uint(f, "misc")? == want.misc)
}

/// One of the storm's errors: [`STORM`] at one of its pages.
fn is_storm(f: &BTreeMap<String, Value>) -> Result<bool> {
    let page = uint(f, "addr")?.wrapping_sub(STORM.addr);
    Ok(is_at(f, MCE_FROM_TRACEPOINT, &STORM)?
        && page.is_multiple_of(4096)
        && page / 4096 < STORM_ERRORS)
}

/// The corrected machine check from the kernel's tracepoint, the fatal
/// one read by the panic path just before the crash record on the same
/// stream, the poisoned page as the kernel's own printk line names it,
/// and the storm: each CPU within its budget, and what it let in plus
/// what it counted as suppressed exactly what the kernel `traced`.
fn check_errors(region: &Region, traced: u64) -> Result<String> {
    let trace = region.decode();
    let (mut corrected, mut fatal_before_crash, mut poisoned) = (0, 0, None);
    let mut printk = Vec::new();
    // Per CPU: storm events let in, and the first and last budget second.
    let mut storm: BTreeMap<u16, (u64, u64, u64)> = BTreeMap::new();
    let mut suppressed = 0;
    let mut pcie = Vec::new();
    let mut backfilled = Vec::new();
    for st in &trace.streams {
        for (i, ev) in st.events.iter().enumerate() {
            match ev.type_id {
                EVENT_MCE => {
                    let f = fields(region, ev)?;
                    if is(&f, MCE_FROM_TRACEPOINT, &CORRECTED)? {
                        corrected += 1;
                    } else if is_storm(&f)? {
                        let second = ev.ts >> 30;
                        let e = storm.entry(st.info.cpu).or_insert((0, second, second));
                        *e = (e.0 + 1, e.1.min(second), e.2.max(second));
                    } else if is(&f, MCE_FROM_PANIC, &FATAL)? {
                        let next = st.events.get(i + 1).map(|e| e.type_id);
                        ensure!(
                            next == Some(EVENT_CRASH),
                            "the fatal machine check is followed by type {next:?}, not the crash record"
                        );
                        fatal_before_crash += 1;
                    } else {
                        bail!("an mce event that was never injected: {f:?}");
                    }
                }
                EVENT_MEMORY_FAILURE => {
                    let f = fields(region, ev)?;
                    poisoned = Some((uint(&f, "pfn")?, text(&f, "page")?, uint(&f, "result")?));
                }
                EVENT_AER => {
                    let f = fields(region, ev)?;
                    pcie.push((
                        text(&f, "device")?,
                        uint(&f, "severity")?,
                        uint(&f, "status")?,
                    ));
                }
                EVENT_PRINTK => {
                    let f = fields(region, ev)?;
                    let line = text(&f, "text")?;
                    if uint(&f, "flags")? & u64::from(PRINTK_BACKFILLED) != 0 {
                        backfilled.push((ev.ts, line.clone()));
                    }
                    printk.push((ev.ts, line));
                }
                EVENT_SUPPRESSED => {
                    let f = fields(region, ev)?;
                    ensure!(text(&f, "source")? == "ras", "suppressed {f:?}");
                    suppressed += uint(&f, "count")?;
                }
                _ => {}
            }
        }
    }
    ensure!(
        corrected == 1,
        "{corrected} corrected machine checks recorded, not 1"
    );
    ensure!(
        fatal_before_crash == 1,
        "{fatal_before_crash} fatal machine checks read by the panic path, not 1"
    );
    let let_in: u64 = storm.values().map(|s| s.0).sum();
    ensure!(
        let_in + suppressed == traced,
        "the storm: {let_in} events recorded and {suppressed} suppressed, but the kernel traced {traced}"
    );
    ensure!(suppressed > 0, "the storm of {traced} never met the budget");
    for (cpu, (n, first, last)) in &storm {
        // A budget second is 2^30 ns; the event's stamp may fall in the
        // second after the one that let it in.
        let most = BUDGET * (last - first + 2);
        ensure!(
            *n <= most,
            "CPU {cpu} recorded {n} storm events over budget seconds {first}..={last}, more than {most}"
        );
    }
    // drivers/pci/pcie/aer.c prints the status the tracepoint passes.
    let [(device, severity, status)] = &pcie[..] else {
        bail!("aer events {pcie:?}, not the one injected");
    };
    ensure!(
        *severity == 2 && *status == AER_STATUS,
        "the PCIe error recorded as severity {severity}, status {status:#x}"
    );
    let said = format!("{device}:   device [");
    let status_line = format!("error status/mask={status:08x}/");
    ensure!(
        printk
            .iter()
            .any(|(_, t)| t.contains(&said) && t.contains(&status_line)),
        "no printk line of {device} with {status_line:?}"
    );
    let (pfn, page, result) = poisoned.context("no memory_failure event")?;
    ensure!(pfn == POISONED_PFN, "memory_failure pfn {pfn:#x}");
    // mm/memory-failure.c: "%#lx: recovery action for %s: %s\n".
    let result_name = pstore_ring::ras::memory_failure_result(result);
    let said = format!("{pfn:#x}: recovery action for {page}: ");
    // The kernel's line ends with the result's name, capitalised.
    let (_, line) = printk
        .iter()
        .find(|(_, t)| t.contains(&said))
        .with_context(|| format!("no printk line with {said:?}"))?;
    ensure!(
        line.to_lowercase().trim_end().ends_with(result_name),
        "the kernel said {line:?}, the event says {result_name}"
    );
    let backfill = check_backfill(region, &printk, &backfilled)?;
    let early = logged(&EARLY);
    ensure!(
        backfilled.iter().any(|(_, t)| t.contains(&early)),
        "the kernel's line about the machine check before the module loaded ({early:?}) is not backfilled"
    );
    Ok(format!(
        "{backfill}, the machine check latched then among them; the corrected and the fatal machine check as injected, the fatal one read by the \
         panic path just before the crash record; {device}'s corrected PCIe error with the \
         status the kernel printed; pfn {pfn:#x} recorded as the kernel's printk named it \
         ({page}: {result_name}); a storm of {STORM_ERRORS} corrected memory errors through \
         mce_log(), {traced} of them past the kernel's pool to the tracepoint: {let_in} recorded \
         within {BUDGET} a second per CPU, {suppressed} counted as suppressed"
    ))
}

/// The GUIDs the test module's non_standard_event and extlog_mem_event
/// pass (kernel/test/crashring_test.c), as a CPER record stores them.
const SECTION_GUID: [u8; 16] = [
    0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
];
const FRU_GUID: [u8; 16] = [
    0x98, 0xba, 0xdc, 0xfe, 0x54, 0x76, 0x10, 0x32, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
];
/// The vendor bytes of its non_standard_event, NUL included.
const VENDOR_DATA: &[u8] = b"crashring-test vendor data\0";
/// `struct cper_sec_proc_arm` and `struct cper_sec_mem_err`, as the
/// kernels lay them out.
const ARM_SECTION_BYTES: usize = 40;
const MEMORY_SECTION_BYTES: usize = 80;

/// The four `hw_error` events the test module's action=ras fired, each
/// exactly as fired: every field, by name. `arm_parts`: the kernel's
/// arm_event passes the severity and CPU (6.12 and later).
fn check_hw_errors(region: &Region, arm_parts: bool) -> Result<String> {
    let trace = region.decode();
    let mut seen = BTreeMap::new();
    for ev in trace.streams.iter().flat_map(|s| &s.events) {
        if ev.type_id == EVENT_HW_ERROR {
            let f = fields(region, ev)?;
            let source = uint(&f, "source")?;
            ensure!(
                seen.insert(source, f).is_none(),
                "two hw_error events of source {source}"
            );
        }
    }
    let u = Value::Unsigned;
    let (arm_severity, arm_cpu) = if arm_parts { (2, 1) } else { (255, -1) };
    #[rustfmt::skip]
    let want: [(u8, [Value; 14]); 4] = [
        (HW_ERROR_EDAC, [u(HW_ERROR_EDAC.into()), u(0), u(12), u(2), Value::Signed(-1), u(0x0001_02ff), u(0), u(0x1234_5000), u(0x55), Value::Bytes(b""), Value::Bytes(b""), Value::Str(b"DIMM_A1"), Value::Str(b"read error; channel 1"), Value::Bytes(b"")]),
        (HW_ERROR_NON_STANDARD, [u(HW_ERROR_NON_STANDARD.into()), u(1), u(0), u(1), Value::Signed(-1), u(0), u(0), u(0), u(0), Value::Bytes(&SECTION_GUID), Value::Bytes(&FRU_GUID), Value::Str(b"CPU 0"), Value::Str(b""), Value::Bytes(VENDOR_DATA)]),
        (HW_ERROR_ARM, [u(HW_ERROR_ARM.into()), u(arm_severity), u(0), u(1), Value::Signed(arm_cpu), u(1 << 24 | 1), u(0x40), u(0x8000_0001), u(0x410f_d034), Value::Bytes(b""), Value::Bytes(b""), Value::Str(b""), Value::Str(b""), Value::Bytes(&[])]),
        (HW_ERROR_EXTLOG, [u(HW_ERROR_EXTLOG.into()), u(2), u(0), u(1), Value::Signed(-1), u(0), u(7), u(0x7654_3000), u(0), Value::Bytes(b""), Value::Bytes(&FRU_GUID), Value::Str(b"DIMM B2"), Value::Str(b""), Value::Bytes(&[])]),
    ];
    let names = [
        "source", "severity", "grain", "count", "cpu", "layers", "sequence", "address", "syndrome",
        "section", "fru_id", "label", "message", "data",
    ];
    for (source, values) in want {
        let got = seen
            .remove(&u64::from(source))
            .with_context(|| format!("no hw_error event of source {source}"))?;
        for (name, want) in names.iter().zip(values) {
            let value = got.get(*name).copied();
            // The sections are the kernel's structs: their length is checked,
            // and the fields they hold are the event's own.
            let same = match (name, value) {
                (&"data", Some(Value::Bytes(b))) if source == HW_ERROR_ARM => {
                    b.len() == ARM_SECTION_BYTES
                }
                (&"data", Some(Value::Bytes(b))) if source == HW_ERROR_EXTLOG => {
                    b.len() == MEMORY_SECTION_BYTES && b[16..24] == 0x7654_3000u64.to_le_bytes()
                }
                _ => value == Some(want),
            };
            ensure!(
                same,
                "hw_error of source {source}: {name} is {value:?}, the test module gave {want:?}"
            );
        }
    }
    ensure!(seen.is_empty(), "hw_error events never fired: {seen:?}");
    Ok("EDAC's mc_event, non_standard_event, arm_event and extlog_mem_event each recorded with every field as fired".into())
}

/// The host's text output names the PCIe error and the fatal machine
/// check in words, and its `info --json` and a bundle's manifest name the
/// machine check.
fn check_text(sh: &Shell, image: &Path) -> Result<String> {
    let crashring = host_crashring(sh)?;
    let want = fatal_words();
    let out = cmd!(
        sh,
        "{crashring} extract {image} --type mce --type aer --type hw_error"
    )
    .quiet()
    .ignore_status()
    .read()?;
    let pcie = format!(", corrected, status {AER_STATUS:#010x} (Receiver Error)>");
    let edac = "<EDAC memory error, corrected, 2 errors on memory controller 0, location 1:2:-, \
                address 0x12345000 (grain 4096 bytes), syndrome 0x55, label DIMM_A1: read error; \
                channel 1>"
        .to_string();
    for words in [format!("<{want}"), pcie, edac] {
        ensure!(
            out.contains(&words),
            "crashring extract does not say {words:?}:\n{out}"
        );
    }
    let info = cmd!(sh, "{crashring} info --json {image}")
        .quiet()
        .ignore_status()
        .read()?;
    let info: serde_json::Value = serde_json::from_str(&info)?;
    let named = |region: &serde_json::Value| {
        region["crash"]["hardware_error"]
            .as_str()
            .is_some_and(|e| e.starts_with(&want))
    };
    ensure!(
        named(&info["regions"][0]),
        "info --json does not name the machine check: {}",
        info["regions"][0]["crash"]
    );
    let bundle = image.with_extension("tar.gz");
    cmd!(sh, "{crashring} bundle {image} -o {bundle}")
        .quiet()
        .ignore_status()
        .run()?;
    let checked = extractor::bundle::check(std::io::BufReader::new(std::fs::File::open(&bundle)?))?;
    ensure!(
        named(&checked.manifest["regions"][0]),
        "the bundle's manifest does not name the machine check: {}",
        checked.manifest["regions"][0]["crash"]
    );
    let dmesg = format!("{}/dmesg.txt", checked.top);
    let dmesg = cmd!(sh, "tar -xzOf {bundle} {dmesg}").quiet().read()?;
    let early = logged(&EARLY);
    ensure!(
        dmesg.contains(&early),
        "the bundle's dmesg.txt does not hold the early machine check's {early:?}"
    );
    Ok("the text output, info --json and a bundle's manifest name it; the bundle's dmesg.txt holds the early one".into())
}

/// The record phase of `memory-failure-panic`: the workload, then the
/// hwpoison injector hands memory_failure() a page with recovery off,
/// and the kernel panics.
fn memory_failure_panic_record() -> String {
    workload_writes()
        + &format!(
            r#"load_later
mount -t debugfs debugfs /sys/kernel/debug
echo 0 > /proc/sys/vm/memory_failure_recovery
echo {POISONED_PFN:#x} > /sys/kernel/debug/hwpoison/corrupt-pfn
"#
        )
}

/// A memory failure the kernel panics on (`vm.memory_failure_recovery`
/// 0): memory_failure() panics before its tracepoint, so the region must
/// hold no memory_failure event, the injector's line before the crash
/// record, and a crash that every output names by its page.
pub fn memory_failure_panic(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let plan = WarmReboot {
        name: "memory-failure-panic",
        extra_append: POISONED_PAGE,
        cpus: 2,
        later_modules: &["hwpoison-inject"],
        ..WarmReboot::memmap(memory_failure_panic_record())
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    let message = format!("Memory failure on page {POISONED_PFN:x}");
    let summary = saved.check(|image| {
        let region = parse_saved(image)?;
        let expect = CrashExpect {
            messages: &[&message],
            cause: None,
            signature: &["hardware: memory failure, pfn 0x?, fatal"],
        };
        let workload = check_region_with(&region, &expect)?;
        let trace = region.decode();
        let events = || trace.streams.iter().flat_map(|s| &s.events);
        ensure!(
            !events().any(|ev| ev.type_id == EVENT_MEMORY_FAILURE),
            "a memory_failure event was recorded: the tracepoint fired before the panic"
        );
        // mm/hwpoison-inject.c, just before it calls memory_failure().
        let injecting = format!("Injecting memory failure at pfn {POISONED_PFN:#x}");
        let said = events()
            .filter(|ev| ev.type_id == EVENT_PRINTK)
            .map(|ev| text(&fields(&region, ev)?, "text"))
            .collect::<Result<Vec<_>>>()?;
        ensure!(
            said.iter().any(|t| t.contains(&injecting)),
            "no printk line says {injecting:?}"
        );
        Ok(workload)
    })?;
    let crashring = host_crashring(sh)?;
    let image = art.dir.join("previous.img");
    let info = cmd!(sh, "{crashring} info --json {image}")
        .quiet()
        .ignore_status()
        .read()?;
    let info: serde_json::Value = serde_json::from_str(&info)?;
    let named = &info["regions"][0]["crash"]["hardware_error"];
    let want = format!("memory failure, pfn {POISONED_PFN:#x}, fatal: ");
    ensure!(
        named.as_str().is_some_and(|e| e.starts_with(&want)),
        "info --json names the crash's hardware error {named}, not {want:?}..."
    );
    Ok(format!(
        "{summary}; no memory_failure event (the kernel panics before its tracepoint), the \
         injector's line recorded before the crash, and info --json names the crash \"{}\"",
        named.as_str().unwrap_or_default(),
    ))
}
