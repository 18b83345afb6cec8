//! The QEMU scenarios: each boots real kernels, crashes them one way, and
//! compares what was recovered with what the guest's workload wrote.

use crate::guest::{self, Initramfs, Kernel};
use crate::qemu::{self, Vm};
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED};
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{HeaderTrust, Problem, Region, Trace};
use pstore_ring::scan::find_regions;
use pstore_ring::schema::{Value, EVENT_CRASH, EVENT_MARKER, EVENT_PRINTK};
use std::path::{Path, PathBuf};
use std::time::Duration;
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
    pub needs_reserve_mem: bool,
    pub run: fn(&Shell, &Kernel, &Artifacts) -> Result<String>,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "warm-reboot",
        about: "memmap= region; workload; sysrq panic; warm reboot; the module keeps the previous generation; the guest's crashring reads it; ack",
        needs_reserve_mem: false,
        run: warm_reboot,
    },
    Scenario {
        name: "warm-reboot-reserve-mem",
        about: "the same with a reserve_mem= range (6.11+), found again by label on the next boot",
        needs_reserve_mem: true,
        run: warm_reboot_reserve_mem,
    },
    Scenario {
        name: "qemu-dump",
        about: "memmap= region; workload; panic with -no-shutdown; dump-guest-memory in every Linux format QEMU lists, with and without paging; the host extractor reads each",
        needs_reserve_mem: false,
        run: crate::dumps::qemu_dump,
    },
    Scenario {
        name: "kdump-vmcore",
        about: "reserve_mem= region; kexec_file_load capture kernel; panic; in the capture kernel crashring reads /proc/vmcore and makedumpfile writes -c, -l, -F and -E dumps that the host extractor reads",
        needs_reserve_mem: true,
        run: crate::dumps::kdump_vmcore,
    },
    Scenario {
        name: "kdump-direct",
        about: "memmap= region; kexec_file_load capture kernel; panic; in the capture kernel crashring reads the region from /dev/mem by physical address",
        needs_reserve_mem: false,
        run: crate::dumps::kdump_direct,
    },
    Scenario {
        name: "pmem-power-loss",
        about: "region on an emulated NVDIMM; QEMU killed mid-workload (no panic, no flush); the host reads the backing file, a second boot reads /dev/pmem0",
        needs_reserve_mem: false,
        run: crate::pmem::pmem_power_loss,
    },
];

pub fn find(name: &str) -> Result<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name).with_context(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        format!("no scenario {name}; there are: {}", names.join(", "))
    })
}

/// Markers and printk lines the workload writes before it crashes the guest.
const WORKLOAD_EVENTS: u32 = 400;

pub fn workload_script(module_args: &str) -> String {
    format!(
        r#"insmod /lib/crashring.ko {module_args} || echo "crashring-test: insmod failed"
if grep -q '^none' /sys/kernel/crashring/previous_summary; then
  echo "crashring-test: phase record"
  i=1
  while [ $i -le {n} ]; do
    echo "workload marker $i" > /dev/crashring
    echo "<6>crashring-workload: printk $i" > /dev/kmsg
    i=$((i+1))
  done
  cat /sys/kernel/crashring/stats
  echo c > /proc/sysrq-trigger
else
  echo "crashring-test: phase recover"
  cat /sys/kernel/crashring/previous_summary
  crashring info /sys/kernel/crashring/previous
  dd if=/sys/kernel/crashring/previous of=/dev/vda bs=1M conv=fsync 2>/dev/null
  echo 1 > /sys/kernel/crashring/previous_ack
  echo "crashring-test: status $(cat /sys/kernel/crashring/status)"
  echo "crashring-test: done"
fi
poweroff -f
"#,
        n = WORKLOAD_EVENTS
    )
}

pub fn raw_disk(path: &Path, bytes: u64) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.set_len(bytes)?;
    Ok(())
}

/// Checks one recovered region against the workload: state crashed by a
/// panic; markers and printk lines 1..=N all present, once, in order, with
/// the right level; nothing else of the workload's invented; no loss; the
/// crash marker last.
pub fn check_warm_reboot(image: &[u8]) -> Result<String> {
    let at = find_regions(image)
        .next()
        .context("no crashring region in what the guest saved")?;
    check_region(&Region::parse(&image[at..], HeaderTrust::Checksummed)?)
}

/// What a region holds of the workload's writing.
pub struct Recovered<'a> {
    pub trace: Trace<'a>,
    /// Markers and printk lines 1..=N found, each once, in order.
    pub markers: u32,
    pub printk: u32,
    /// The last event of the merged trace and its decoded fields.
    pub last: Option<(u8, Vec<Value<'a>>)>,
}

/// Walks a region's merged events and checks the workload's markers and
/// printk lines form the sequences 1, 2, 3, ... with level 6: any missing,
/// reordered or invented one fails, named. Pages a dump left out are
/// allowed (makedumpfile's zero-page filter drops unused pages); whether
/// events went with them is the callers' loss check.
pub fn recover_workload<'a>(region: &Region<'a>) -> Result<Recovered<'a>> {
    let trace = region.decode();
    let damage: Vec<_> = trace
        .diagnostics
        .iter()
        .filter(|d| !matches!(d.problem, Problem::Absent { .. }))
        .collect();
    ensure!(damage.is_empty(), "diagnostics: {damage:?}");
    let e = region.header.endian;
    let (mut next_marker, mut next_printk) = (1u32, 1u32);
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
            EVENT_MARKER => {
                let t = text(2);
                if let Some(n) = t.strip_prefix("workload marker ") {
                    let n: u32 = n
                        .parse()
                        .with_context(|| format!("marker {t:?} is not the workload's"))?;
                    ensure!(n == next_marker, "marker {n} at {} ns, expected marker {next_marker} (missing, reordered or invented)", ev.ts);
                    next_marker += 1;
                }
            }
            EVENT_PRINTK => {
                let t = text(4);
                if let Some(n) = t.strip_prefix("crashring-workload: printk ") {
                    let n: u32 = n
                        .parse()
                        .with_context(|| format!("printk {t:?} is not the workload's"))?;
                    ensure!(
                        n == next_printk,
                        "printk line {n} at {} ns, expected line {next_printk}",
                        ev.ts
                    );
                    ensure!(
                        values.first() == Some(&Value::Unsigned(6)),
                        "printk line {n} has level {:?}, the workload wrote 6",
                        values.first()
                    );
                    next_printk += 1;
                }
            }
            _ => {}
        }
        last = Some((ev.type_id, values));
    }
    Ok(Recovered {
        trace,
        markers: next_marker - 1,
        printk: next_printk - 1,
        last,
    })
}

/// [`check_warm_reboot`] on a parsed region.
pub fn check_region(region: &Region) -> Result<String> {
    let state = region
        .state
        .as_ref()
        .map_err(|p| anyhow::anyhow!("state block unreadable: {p}"))?;
    ensure!(
        state.state == STATE_CRASHED && state.reason == REASON_PANIC,
        "state is {state:?}, expected crashed by panic"
    );
    let r = recover_workload(region)?;
    ensure!(
        r.trace.lost_events() == 0,
        "{} events lost: {:?}",
        r.trace.lost_events(),
        r.trace
            .streams
            .iter()
            .map(|s| &s.losses)
            .collect::<Vec<_>>()
    );
    ensure!(
        r.markers == WORKLOAD_EVENTS,
        "markers 1..={} recovered, the workload wrote {WORKLOAD_EVENTS}",
        r.markers
    );
    ensure!(
        r.printk == WORKLOAD_EVENTS,
        "printk lines 1..={} recovered, the workload wrote {WORKLOAD_EVENTS}",
        r.printk
    );
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
    match crash.get(2) {
        Some(Value::Str(m)) if String::from_utf8_lossy(m).contains("sysrq triggered crash") => {}
        other => bail!("crash marker message {other:?} is not the sysrq panic"),
    }
    Ok(format!(
        "{} events over {} CPUs, {WORKLOAD_EVENTS} markers and {WORKLOAD_EVENTS} printk lines in order, none lost, crash marker last",
        r.trace.event_count(),
        r.trace.streams.len()
    ))
}

fn warm_reboot(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    warm_reboot_with(sh, k, art, "memmap=16M$0x40000000", "region=16M@0x40000000")
}

/// reserve_mem= ranges are placed by memblock at boot, so they are found
/// again only if the next boot lays memory out the same way: nokaslr keeps
/// the kernel image from landing in a different place (with KASLR the
/// range moves on about one boot in five, per the ftrace maintainers), and
/// an alignment of the range's size makes its place depend on less.
fn warm_reboot_reserve_mem(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    warm_reboot_with(
        sh,
        k,
        art,
        "reserve_mem=16M:16M:crashring nokaslr",
        "reserve_mem=crashring",
    )
}

fn warm_reboot_with(
    sh: &Shell,
    k: &Kernel,
    art: &Artifacts,
    region_append: &str,
    module_args: &str,
) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let crashring = guest::build_guest_crashring(sh)?;
    let script = workload_script(module_args);
    let name = module_args.split('=').next().unwrap_or("region");
    let initrd = guest::initramfs(
        sh,
        &format!("warm-reboot-{name}-{}", k.series),
        &Initramfs {
            kernel: k,
            module: &module,
            crashring: &crashring,
            kernel_modules: &["virtio_pci", "virtio_blk"],
            programs: &[],
            files: &[],
            script: &script,
        },
    )?;
    let out = art.dir.join("previous.img");
    raw_disk(&out, 32 << 20)?;
    let serial = art.dir.join("serial.log");
    let vm = Vm {
        kernel: &k.vmlinuz,
        initrd: &initrd,
        append: format!("console=ttyS0 panic=1 {region_append} loglevel=4"),
        memory: "2G",
        cpus: 4,
        disks: vec![out.clone()],
        extra: vec![],
        serial: serial.clone(),
        timeout: Duration::from_secs(240),
    };
    let took = vm.run()?;
    let log = std::fs::read_to_string(&serial).unwrap_or_default();
    ensure!(
        log.contains("crashring-test: phase record"),
        "the first boot never recorded:\n{}",
        qemu::tail(&serial, 40)
    );
    ensure!(
        log.contains("crashring-test: phase recover"),
        "the guest did not come back after the panic:\n{}",
        qemu::tail(&serial, 40)
    );
    ensure!(
        log.contains("crashring-test: done"),
        "recovery did not finish:\n{}",
        qemu::tail(&serial, 40)
    );
    let image = std::fs::read(&out)?;
    let summary = check_warm_reboot(&image).with_context(|| {
        format!(
            "checking {} (serial log {})",
            out.display(),
            serial.display()
        )
    })?;
    Ok(format!("{summary}; {:.1} s", took.as_secs_f64()))
}
