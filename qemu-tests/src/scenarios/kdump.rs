//! The kdump scenarios: a capture kernel loaded, a panic, and the
//! crashed kernel's trace read in the capture kernel (from
//! `/proc/vmcore`, makedumpfile's files, the module's `previous`, or the
//! range through `/dev/mem`) and bundled there, nothing acknowledged.

use super::dumps::{check_dump, check_printk_logs};
use super::printk_log;
use super::{
    check_warm_reboot, host_crashring, raw_disk, workload_script, Artifacts, Placement,
    WorkloadSeq, WORKLOAD_EVENTS,
};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{Start, Vm};
use crate::env::{setup, Arch};
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::layout::REASON_PANIC;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xshell::{cmd, Shell};

/// makedumpfile runs in the capture kernel: (file name, arguments). Debian's
/// 1.7.2 has zlib and lzo only; snappy and zstd are covered by the
/// extractor's tests on files built to the layout.
const MAKEDUMPFILE_RUNS: &[(&str, &str)] = &[
    ("vmcore-zlib", "-c -d 31"),
    ("vmcore-lzo", "-l -d 31"),
    ("vmcore-flat", "-F -c -d 31"),
    ("vmcore-elf", "-E -d 31"),
];

/// What differs between the kdump scenarios.
pub(crate) struct KdumpPlan {
    /// Prefix of the initramfs names.
    pub name: &'static str,
    /// Where the first kernel's region is: its command-line part and the
    /// module's arguments.
    pub region_append: &'static str,
    pub module_args: &'static str,
    /// Shell lines the capture kernel runs with the results disk at /mnt;
    /// `say` reports a line on the console and in /mnt/status.
    pub capture: String,
    /// Shell lines the first kernel runs after the workload, just before
    /// the crash.
    pub before_crash: &'static str,
}

/// What a kdump run left: the serial log's text, the status lines the
/// capture kernel wrote to the results disk, the disk, and how long the
/// VM ran.
pub(crate) struct KdumpRun {
    pub log: String,
    pub status: String,
    serial: PathBuf,
    pub disk: PathBuf,
    took: Duration,
}

impl KdumpRun {
    fn tail(&self) -> String {
        crate::env::qemu::tail(&self.serial, 40)
    }

    /// Whether the capture kernel reported `crashring-test: {what}` on the
    /// results disk (or, for the first kernel's lines, on the console).
    fn ensure_reported(&self, what: &str) -> Result<()> {
        let line = format!("crashring-test: {what}");
        ensure!(
            self.status.contains(&line) || self.log.contains(&line),
            "the guest did not report `{what}`; the capture kernel's status file:\n{}\nend of the serial log:\n{}",
            self.status,
            self.tail()
        );
        Ok(())
    }

    /// Copies `name` off the results disk into `dir`.
    fn take(&self, sh: &Shell, dir: &Path, name: &str) -> Result<PathBuf> {
        let dest = dir.join(name);
        let _ = std::fs::remove_file(&dest);
        let req = format!("dump /{name} {}", dest.display());
        let disk = &self.disk;
        cmd!(sh, "debugfs -R {req} {disk}")
            .quiet()
            .ignore_stderr()
            .run()?;
        ensure!(dest.exists(), "{name} is not on the capture disk");
        Ok(dest)
    }
}

/// Commands in the capture kernel that extract from `input` with the
/// guest's crashring and save the JSON lines as /mnt/trace.jsonl.
pub(crate) fn capture_extract(input: &str) -> String {
    format!(
        r#"crashring info {input}
crashring extract --format jsonl {input} -o /mnt/trace.jsonl
say "capture extract $?"
crashring verify {input}
say "capture verify $?"
"#
    )
}

/// What crashring-capture.service runs in the capture kernel: a bundle
/// of the crashed kernel's generation, nothing acknowledged.
const CAPTURE_RECOVER: &str = r#"crashring recover --capture --dir /mnt/bundles
say "capture recover $?"
say "capture bundles $(ls /mnt/bundles | tr '\n' ' ')"
"#;

/// Checks the bundle [`CAPTURE_RECOVER`] left on the results disk: one
/// bundle with its summary, intact, holding the workload and the panic.
fn check_capture_bundle(run: &KdumpRun, sh: &Shell, dir: &Path, k: &Kernel) -> Result<String> {
    run.ensure_reported("capture recover 0")?;
    let line = format!("{}\n", run.status);
    let files: Vec<&str> = line
        .lines()
        .find_map(|l| l.strip_prefix("crashring-test: capture bundles "))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let [json, bundle] = files[..] else {
        bail!(
            "the capture kernel's bundle directory holds {files:?}, not one bundle and its summary"
        );
    };
    ensure!(
        json.strip_suffix(".json") == bundle.strip_suffix(".tar.gz"),
        "{json} is not {bundle}'s summary"
    );
    sh.create_dir(dir.join("bundles"))?;
    let path = run.take(sh, dir, &format!("bundles/{bundle}"))?;
    let checked = extractor::bundle::check(std::io::BufReader::new(std::fs::File::open(&path)?))?;
    let region = &checked.manifest["regions"][0];
    let recovered = region["recovered"].as_u64().unwrap_or(0);
    ensure!(
        region["kernel_release"] == k.release.as_str()
            && region["crash"]["reason"] == "panic"
            && recovered >= 2 * u64::from(WORKLOAD_EVENTS),
        "the capture kernel's bundle does not hold the workload and the panic: {region}"
    );
    Ok(format!(
        "crashring recover --capture: {bundle} with its summary, intact, {recovered} events and the panic, nothing acknowledged"
    ))
}

/// `kdump_script`'s view of where the region is, as the machine reserves
/// it ([`Placement`]), and how kexec loads the capture kernel:
/// kexec_file_load where the kernel has it (x86's Debian kernels), else
/// kexec_load (Debian's arm64 kernels are built without KEXEC_FILE).
fn kdump_script(
    plan: &KdumpPlan,
    placed: &Placement,
    kexec_load: &str,
    capture_append: &str,
) -> String {
    let capture = &plan.capture;
    format!(
        r#"if [ -e /proc/vmcore ]; then
echo "crashring-test: phase capture"
mount -t ext2 /dev/vda /mnt || echo "crashring-test: mount failed"
# Status goes to the results disk too: the console is for diagnosis.
say() {{ echo "crashring-test: $*"; echo "crashring-test: $*" >> /mnt/status; }}
say "phase capture"
{capture}say "done"
umount /mnt
sync
poweroff -f
fi
insmod /lib/crashring.ko {args} || echo "crashring-test: insmod failed"
kexec {kexec_load} /boot/vmlinuz --initrd=/boot/capture.cpio --append="{capture_append}" || echo "crashring-test: kexec load failed"
echo "crashring-test: capture kernel loaded: $(cat /sys/kernel/kexec_crash_loaded)"
{workload}"#,
        args = placed.module_args,
        workload = workload_script(&placed.module_args, plan.before_crash)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Boots a kernel with a capture kernel loaded, runs the workload, panics,
/// and lets the capture kernel run the plan's commands.
pub(crate) fn run_kdump(
    sh: &Shell,
    k: &Kernel,
    art: &Artifacts,
    plan: &KdumpPlan,
) -> Result<KdumpRun> {
    let module = guest::build_module(sh, k)?;
    let crashring = guest::guest_crashring(sh, k)?;
    let placed = Placement::of(k, plan.region_append, plan.module_args)?;
    let capture_append = format!(
        "console={} maxcpus=1 reset_devices loglevel=4 panic=-1",
        k.console()
    );
    let kexec_load = match k.arch {
        Arch::X86_64 => "-s -p",
        Arch::Arm64 => "-p",
    };
    let script = kdump_script(plan, &placed, kexec_load, &capture_append);
    let modules = k.ext2_disk_modules()?;
    // The host's own, or Debian's arm64 builds setup unpacked.
    let programs: &[&str] = match k.arch {
        Arch::X86_64 => &["/usr/sbin/kexec", "/usr/bin/makedumpfile"],
        Arch::Arm64 => &setup::ARM64_PROGRAMS,
    };
    let spec = |files| Initramfs {
        kernel: k,
        module: &module,
        crashring: &crashring,
        kernel_modules: &modules,
        later_modules: &[],
        programs,
        files,
        script: &script,
    };
    // The capture kernel boots the same kernel with this initramfs; the
    // first boot carries both.
    let capture = guest::initramfs(
        sh,
        &format!("{}-capture-{}", plan.name, k.series),
        &spec(&[]),
    )?;
    let boot_files: [(&Path, &str); 2] = [
        (&k.vmlinuz, "boot/vmlinuz"),
        (&capture, "boot/capture.cpio"),
    ];
    let initrd = guest::initramfs(
        sh,
        &format!("{}-{}", plan.name, k.series),
        &spec(&boot_files),
    )?;
    let disk = art.dir.join("capture.ext2");
    let _ = std::fs::remove_file(&disk);
    raw_disk(&disk, 3 << 30)?;
    cmd!(sh, "mkfs.ext2 -q -F {disk}").run()?;
    let serial = art.dir.join("serial.log");
    let mut vm = Vm {
        arch: k.arch,
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd: &initrd,
            append: format!(
                "console={} crashkernel=256M {} nokaslr crash_kexec_post_notifiers panic=1 loglevel=4",
                k.console(),
                placed.append
            ),
        },
        memory: "2G",
        cpus: 4,
        disks: vec![disk.clone()],
        extra: vec!["-no-reboot".into()],
        serial: serial.clone(),
        timeout: Duration::from_secs(480),
    };
    if k.arch == Arch::Arm64 {
        // kexec-tools' arm64 loader refuses a device tree whose kaslr-seed
        // the kernel did not consume and zero ("kaslr-seed is not wiped
        // to 0"), as a nokaslr kernel leaves it: QEMU gives none.
        vm.extra
            .extend(["-machine".to_string(), "dtb-kaslr-seed=off".to_string()]);
    }
    placed.reserve(&mut vm, art)?;
    let took = vm.run()?;
    let mut run = KdumpRun {
        log: std::fs::read_to_string(&serial).unwrap_or_default(),
        status: String::new(),
        serial,
        disk,
        took,
    };
    run.ensure_reported("capture kernel loaded: 1")?;
    let out_dir = art.dir.join("capture");
    sh.create_dir(&out_dir)?;
    if let Ok(status) = run.take(sh, &out_dir, "status") {
        run.status = std::fs::read_to_string(status).unwrap_or_default();
    }
    run.ensure_reported("phase capture")?;
    run.ensure_reported("done")?;
    run.ensure_reported("capture extract 0")?;
    run.ensure_reported("capture verify 0")?;
    Ok(run)
}

/// Checks the JSON lines the capture kernel's crashring wrote: every line
/// an event (nothing lost), the workload's markers and printk lines each
/// once and in order, the sysrq crash last.
fn check_capture_trace(run: &KdumpRun, sh: &Shell, dir: &Path, input: &str) -> Result<String> {
    let path = run.take(sh, dir, "trace.jsonl")?;
    let trace = std::fs::read_to_string(&path)?;
    check_workload_jsonl(&trace).with_context(|| {
        format!(
            "the capture kernel's extract of {input} ({})",
            path.display()
        )
    })?;
    Ok(format!(
        "capture kernel: crashring extract {input} gave {} events, the workload's {WORKLOAD_EVENTS} markers and printk lines in order, none lost, the crash last",
        trace.lines().count()
    ))
}

/// [`recover_workload`]'s checks on `crashring extract --format jsonl`
/// output, with the crash marker last and no loss line.
fn check_workload_jsonl(jsonl: &str) -> Result<()> {
    let mut seq = WorkloadSeq::default();
    let mut last = serde_json::Value::Null;
    for (n, line) in jsonl.lines().enumerate() {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {} is not JSON", n + 1))?;
        ensure!(v["kind"] == "event", "line {}: {line}", n + 1);
        let ts = v["ts"].as_u64().unwrap_or_default();
        let text = v["fields"]["text"].as_str().unwrap_or_default();
        match v["type"].as_str() {
            Some("marker") => seq.marker(text, ts)?,
            Some("printk") => seq.printk(text, v["fields"]["level"].as_u64(), ts)?,
            _ => {}
        }
        last = v;
    }
    seq.ensure_complete(WORKLOAD_EVENTS)?;
    ensure!(
        last["type"] == "crash"
            && last["fields"]["reason"] == u64::from(REASON_PANIC)
            && last["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("sysrq triggered crash")),
        "the last line is not the sysrq panic's crash marker: {last}"
    );
    Ok(())
}

/// What Debian 12's makedumpfile (1.7.2) says of 6.12's arm64 kernel, a
/// 52-bit build whose 4 KiB pages then take LPA2's page tables, which it
/// cannot walk. It decides by the build's VA_BITS alone, so a CPU without
/// LPA2 does not help, and no release up to 1.7.9 reads such a kernel
/// (upstream's b7587f1, 2026-06-24, is on master only): on arm64 the
/// scenario requires that refusal, so that a makedumpfile that reads the
/// kernel makes it check the dumps again.
const MAKEDUMPFILE_ARM64_REFUSAL: &str = "PAGE SIZE 0x1000 and VA Bits 52 not supported";

pub fn kdump_vmcore(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let mut capture = capture_extract("/proc/vmcore") + CAPTURE_RECOVER;
    if k.arch == Arch::Arm64 {
        capture +=
            "makedumpfile -c -d 31 /proc/vmcore /mnt/vmcore-zlib 2>&1 | tee /mnt/makedumpfile.txt
";
    }
    let runs = match k.arch {
        Arch::X86_64 => MAKEDUMPFILE_RUNS,
        Arch::Arm64 => &[],
    };
    for (name, args) in runs {
        if args.starts_with("-F") {
            capture += &format!("makedumpfile {args} /proc/vmcore > /mnt/{name}\n");
        } else {
            capture += &format!("makedumpfile {args} /proc/vmcore /mnt/{name}\n");
        }
        capture += &format!("say \"makedumpfile {name} $?\"\n");
    }
    let plan = KdumpPlan {
        name: "kdump",
        region_append: "reserve_mem=16M:4096:crashring",
        module_args: "reserve_mem=crashring",
        capture,
        // The guest's own dmesg, for the log read from each dump.
        before_crash: printk_log::GUEST_DMESG,
    };
    let crashring = host_crashring(sh)?;
    let run = run_kdump(sh, k, art, &plan)?;
    let mut lines = vec![format!(
        "boot, workload, panic, kdump and capture in {:.1} s",
        run.took.as_secs_f64()
    )];
    let out_dir = art.dir.join("capture");
    sh.create_dir(&out_dir)?;
    lines.push(check_capture_trace(&run, sh, &out_dir, "/proc/vmcore")?);
    lines.push(check_capture_bundle(&run, sh, &out_dir, k)?);
    if k.arch == Arch::Arm64 {
        let said = std::fs::read_to_string(run.take(sh, &out_dir, "makedumpfile.txt")?)?;
        ensure!(
            said.contains(MAKEDUMPFILE_ARM64_REFUSAL),
            "makedumpfile in the arm64 capture kernel did not refuse as Debian 12's does ({MAKEDUMPFILE_ARM64_REFUSAL:?}): it said {said:?}; check its dumps as on x86"
        );
        lines.push(format!(
            "makedumpfile 1.7.2 refuses the kernel ({MAKEDUMPFILE_ARM64_REFUSAL}): no dump of it"
        ));
        if !art.kept {
            let _ = std::fs::remove_file(&run.disk);
        }
        return Ok(lines.join("\n  "));
    }
    let mut dumps = Vec::new();
    for (name, _) in MAKEDUMPFILE_RUNS {
        run.ensure_reported(&format!("makedumpfile {name} 0"))?;
        dumps.push(run.take(sh, &out_dir, name)?);
    }
    let paths: Vec<&Path> = dumps.iter().map(PathBuf::as_path).collect();
    // The host's makedumpfile reads its own architecture's dumps only.
    lines.push(check_printk_logs(
        sh,
        &crashring,
        &paths,
        &run.serial,
        k.arch == Arch::X86_64,
    )?);
    for path in &dumps {
        let size = std::fs::metadata(path)?.len();
        let line = check_dump(sh, &crashring, path, None, Some(&k.release)).with_context(|| {
            format!(
                "checking {} (serial log {})",
                path.display(),
                run.serial.display()
            )
        })?;
        lines.push(format!("{line}; {size} bytes"));
        if !art.kept {
            let _ = std::fs::remove_file(path);
        }
    }
    if !art.kept {
        let _ = std::fs::remove_file(&run.disk);
    }
    Ok(lines.join("\n  "))
}

/// What kexec-tools says when it loads a capture kernel for Debian's
/// arm64 6.1, built without KALLSYMS_ALL, whose /proc/kallsyms then has
/// no `_text`: `get_page_offset()` (kexec/arch/arm64/kexec-arm64.c, in
/// bookworm's 2.0.26 and upstream alike) gives up, and the elfcorehdr it
/// writes maps the kernel's text at virtual address -1 and the linear map
/// at 0, so that reading /proc/vmcore takes a synchronous external abort
/// in the capture kernel. The scenario requires the message, so that a
/// kexec-tools that finds the page offset makes it check the vmcore again.
const KEXEC_ARM64_NO_TEXT: &str = "Can't get the symbol of _text to calculate page_offset.";

/// kdump-direct's region as the PC reserves it; [`Placement`] moves it
/// on arm64.
const DIRECT_APPEND: &str = "memmap=16M$0x40000000";
const DIRECT_MODULE_ARGS: &str = "region=16M@0x40000000";
const DIRECT_MIB: u64 = 16;

/// The module's view of the crashed kernel's generation.
const PREVIOUS: &str = "/sys/kernel/crashring/previous";

/// What the capture kernel does with the module loaded with the crashed
/// kernel's parameters, as modules-load.d would: it must offer the crash
/// as `previous`, refuse the ack, and leave the range alone. `first` runs
/// right after the load.
fn capture_with_module(insmod: &str, first: &str) -> String {
    format!(
        r#"{insmod}
say "capture insmod $?"
say "capture status $(cat /sys/kernel/crashring/status)"
{first}crashring extract --format jsonl {PREVIOUS} -o /mnt/previous.jsonl 2>/dev/null
say "capture previous extract $?"
echo 1 > /sys/kernel/crashring/previous_ack 2>/dev/null
say "capture ack $?"
{CAPTURE_RECOVER}rmmod crashring
"#
    )
}

/// The capture kernel's commands in kdump-direct, which copy the range
/// before and after the module's visit (region.bin, region-after.bin).
///
/// A memmap= range on the PC is not System RAM, so it is neither in
/// /proc/vmcore nor refused by STRICT_DEVMEM: crashring reads it from
/// /dev/mem by address, and dd copies all of it. arm64's /dev/mem reads
/// only memory the running kernel maps (`valid_phys_addr_range()`,
/// arch/arm64/mm/mmap.c), which the crashed kernel's no-map node is not:
/// there the module is the way in, and the copies are its `previous`.
fn direct_capture(k: &Kernel, placed: &Placement) -> Result<String> {
    let insmod = format!("insmod /lib/crashring.ko {}", placed.module_args);
    Ok(match k.arch {
        Arch::X86_64 => {
            let addr = placed
                .region_address()
                .context("kdump-direct's module arguments name no region=")?;
            let copy = |name: &str| {
                format!(
                    "dd if=/dev/mem of=/mnt/{name} bs=1M skip={} count={DIRECT_MIB} 2>/dev/null\n\
                     say \"copy {name} $?\"\n",
                    addr >> 20
                )
            };
            capture_extract(&format!("/dev/mem --phys {addr:#x}"))
                + &copy("region.bin")
                + &capture_with_module(&insmod, "")
                + &copy("region-after.bin")
        }
        Arch::Arm64 => {
            let copy =
                |name: &str| format!("cat {PREVIOUS} > /mnt/{name}\nsay \"copy {name} $?\"\n");
            let first = copy("region.bin") + &capture_extract(PREVIOUS);
            capture_with_module(&insmod, &first)
                + &format!("{insmod}\n")
                + &copy("region-after.bin")
                + "rmmod crashring\n"
        }
    })
}

pub fn kdump_direct(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let placed = Placement::of(k, DIRECT_APPEND, DIRECT_MODULE_ARGS)?;
    let mut capture = direct_capture(k, &placed)?;
    if k.arch == Arch::X86_64 {
        // The vmcore without the region: what a machine never armed leaves.
        capture += &format!(
            "makedumpfile {UNARMED_ARGS} /proc/vmcore /mnt/{UNARMED}\nsay \"makedumpfile {UNARMED} $?\"\n"
        );
    }
    let plan = KdumpPlan {
        name: "kdump-direct",
        region_append: DIRECT_APPEND,
        module_args: DIRECT_MODULE_ARGS,
        capture,
        before_crash: printk_log::GUEST_DMESG,
    };
    let run = run_kdump(sh, k, art, &plan)?;
    run.ensure_reported("copy region.bin 0")?;
    run.ensure_reported("copy region-after.bin 0")?;
    run.ensure_reported("capture insmod 0")?;
    run.ensure_reported("capture status capture kernel: not recording")?;
    run.ensure_reported("capture previous extract 0")?;
    // 1: the shell's status for a refused write.
    run.ensure_reported("capture ack 1")?;
    let out_dir = art.dir.join("capture");
    sh.create_dir(&out_dir)?;
    let (read_from, copied) = match k.arch {
        Arch::X86_64 => ("/dev/mem", "region copied from /dev/mem"),
        Arch::Arm64 => (PREVIOUS, "generation copied from the module's previous"),
    };
    let trace_line = check_capture_trace(&run, sh, &out_dir, read_from)?;
    let bundle_line = check_capture_bundle(&run, sh, &out_dir, k)?;
    let previous = run.take(sh, &out_dir, "previous.jsonl")?;
    check_workload_jsonl(&std::fs::read_to_string(&previous)?).with_context(|| {
        format!(
            "the capture kernel's extract of {PREVIOUS} ({})",
            previous.display()
        )
    })?;
    let copy = run.take(sh, &out_dir, "region.bin")?;
    let after = run.take(sh, &out_dir, "region-after.bin")?;
    let before = std::fs::read(&copy)?;
    let after_bytes = std::fs::read(&after)?;
    let changed = before
        .iter()
        .zip(&after_bytes)
        .position(|(a, b)| a != b)
        .or((before.len() != after_bytes.len()).then_some(before.len().min(after_bytes.len())));
    ensure!(
        changed.is_none(),
        "the module loaded in the capture kernel changed the range: byte {:#x} differs between {} and {}",
        changed.unwrap_or_default(),
        copy.display(),
        after.display()
    );
    let summary = check_warm_reboot(&before)
        .with_context(|| format!("checking {} read in the capture kernel", copy.display()))?;
    let vmcore_line = match k.arch {
        Arch::X86_64 => {
            run.ensure_reported(&format!("makedumpfile {UNARMED} 0"))?;
            let unarmed = run.take(sh, &out_dir, UNARMED)?;
            let line = check_unarmed_vmcore(sh, &host_crashring(sh)?, &unarmed, &run.serial)
                .with_context(|| format!("checking {}", unarmed.display()))?;
            if !art.kept {
                let _ = std::fs::remove_file(&unarmed);
            }
            line
        }
        Arch::Arm64 => {
            ensure!(
                run.log.contains(KEXEC_ARM64_NO_TEXT),
                "kexec did not say {KEXEC_ARM64_NO_TEXT:?} on {}: if it now finds the kernel's page offset, /proc/vmcore may be right; check a makedumpfile dump of it as on the PC",
                k.release
            );
            format!("kexec-tools: {KEXEC_ARM64_NO_TEXT:?} (no _text in /proc/kallsyms without KALLSYMS_ALL), so /proc/vmcore maps the kernel wrongly and is not read: the module was the way in")
        }
    };
    if !art.kept {
        let _ = std::fs::remove_file(&run.disk);
    }
    Ok(format!(
        "boot, workload, panic, kdump and capture in {:.1} s\n  {trace_line}\n  {copied}: {summary}\n  the module in the capture kernel: the same events from {PREVIOUS}, the ack refused, every byte as it was\n  {bundle_line}\n  {vmcore_line}",
        run.took.as_secs_f64()
    ))
}

/// The capture kernel's makedumpfile dump of /proc/vmcore in kdump-direct,
/// which a memmap= region is not in: a vmcore as a machine never armed
/// leaves it.
const UNARMED: &str = "vmcore-unarmed";
const UNARMED_ARGS: &str = "-c -d 31";

/// Checks a vmcore without a region: `info` describes it and its printk
/// log, `extract` refuses it naming `crashring dmesg`, and the log is
/// makedumpfile's and holds the guest's own dmesg.
fn check_unarmed_vmcore(
    sh: &Shell,
    crashring: &Path,
    dump: &Path,
    serial: &Path,
) -> Result<String> {
    let info = cmd!(sh, "{crashring} info --json {dump}").quiet().read()?;
    let doc: serde_json::Value = serde_json::from_str(&info)?;
    ensure!(
        doc["regions"].as_array().is_some_and(Vec::is_empty)
            && doc["printk"]["records"].as_u64() > Some(0),
        "info --json describes no printk log and no empty list of regions: {info}"
    );
    let out = cmd!(sh, "{crashring} extract {dump}")
        .quiet()
        .ignore_status()
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(2)
            && err.contains("no crashring region")
            && err.contains("crashring dmesg"),
        "extract of a vmcore without a region exited {:?}: {err}",
        out.status.code()
    );
    let line = check_printk_logs(sh, crashring, &[dump], serial, true)?;
    Ok(format!("{UNARMED} (makedumpfile {UNARMED_ARGS}, no region in it): info describes it, extract refuses it naming crashring dmesg; {line}"))
}

#[cfg(test)]
mod tests {
    use super::{check_workload_jsonl, WORKLOAD_EVENTS};

    /// The workload's lines as `crashring extract --format jsonl` writes
    /// them, with the crash last, after `edit` had its way.
    fn jsonl(edit: impl Fn(&mut Vec<String>)) -> String {
        let mut lines = Vec::new();
        for i in 1..=WORKLOAD_EVENTS {
            lines.push(format!(r#"{{"kind":"event","ts":{i}0,"type":"marker","fields":{{"text":"workload marker {i}"}}}}"#));
            lines.push(format!(r#"{{"kind":"event","ts":{i}1,"type":"printk","fields":{{"level":6,"text":"crashring-workload: printk {i}"}}}}"#));
        }
        lines.push(r#"{"kind":"event","ts":99999,"type":"crash","fields":{"reason":1,"message":"sysrq triggered crash\n"}}"#.into());
        edit(&mut lines);
        lines.join("\n")
    }

    #[test]
    fn the_workload_passes_and_every_kind_of_damage_fails() {
        check_workload_jsonl(&jsonl(|_| {})).unwrap();
        type Edit<'a> = &'a dyn Fn(&mut Vec<String>);
        let broken: [(&str, Edit); 6] = [
            ("a marker missing", &|l| drop(l.remove(10))),
            ("a printk repeated", &|l| l.insert(4, l[3].clone())),
            ("two swapped", &|l| l.swap(2, 4)),
            ("a loss line", &|l| l.insert(0, r#"{"kind":"loss"}"#.into())),
            ("the crash not last", &|l| drop(l.pop())),
            ("a wrong level", &|l| l[1] = l[1].replace(":6,", ":4,")),
        ];
        for (what, edit) in broken {
            assert!(check_workload_jsonl(&jsonl(edit)).is_err(), "{what} passed");
        }
    }
}
