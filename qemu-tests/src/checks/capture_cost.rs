//! The capture paths end to end (`cargo xtask bench`): from a panic under
//! the standard workload to a checked bundle on disk, through the next
//! boot and through a kdump capture kernel, on each guest kernel.
//!
//! Spans that cross the crash come from the host, which notes when each
//! line first appears on the serial console ([`SerialClock`]); steps inside
//! one boot come from the guest's own clock (`/proc/uptime`, 10 ms). Each
//! figure has its baseline from the same run: panic to bundle beside panic
//! to the next boot's user space (the reboot every path pays), the bundle
//! step beside a raw copy of the same slot to the same disk; the capture
//! kernel's bundle step beside makedumpfile with kdump-tools' default
//! arguments on `/proc/vmcore`.

use crate::env::guest;
use crate::env::qemu::SerialClock;
use crate::scenarios::kdump::{capture_extract, run_kdump, KdumpPlan};
use crate::scenarios::{
    warm_reboot_run, workload_and_sysrq, Artifacts, WarmReboot, DONE, DONE_MIB,
};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::time::Duration;
use xshell::Shell;

/// The console line of a panic, at any log level.
const PANIC: &str = "Kernel panic - not syncing";
/// Prints a line with the guest's uptime in seconds.
const UPTIME: &str = "up() { cut -d ' ' -f 1 /proc/uptime; }\n";

/// The next-boot path: record the workload and panic (warm reboot with
/// panic=1); the next boot bundles the slot onto an ext2 disk, then copies
/// it raw to the same disk, and checks the bundle.
fn next_boot_script() -> String {
    format!(
        r#"insmod /lib/crashring.ko region=16M@0x40000000 || echo "crashring-test: insmod failed"
{UPTIME}if grep -q '^none' /sys/kernel/crashring/previous_summary; then
  echo "crashring-test: phase record"
  # A ring that has wrapped, as after a long uptime: 64-byte markers past
  # the writing CPU's share of the slot, then the standard workload.
  yes "bench fill: 64-byte markers cut from this repeated line" |
    dd of=/dev/crashring bs=64 count=200000 iflag=fullblock 2>/dev/null
{record}else
  booted=$(up)
  echo "crashring-test: phase recover"
  mount -t ext2 /dev/vdb /mnt || echo "crashring-test: mount failed"
  t0=$(up)
  crashring bundle /sys/kernel/crashring/previous -o /mnt/crash.tar.gz 2>/dev/null && sync
  bundled=$?
  t1=$(up)
  echo "crashring-capture: bundle on disk"
  dd if=/sys/kernel/crashring/previous of=/mnt/slot.bin bs=1M conv=fsync 2>/dev/null
  t2=$(up)
  crashring check-bundle /mnt/crash.tar.gz >/dev/null
  echo "crashring-capture: path=next-boot booted=$booted bundle=$t0:$t1 copy=$t1:$t2 bundled=$bundled checked=$?"
  umount /mnt
  echo "{DONE}" | dd of=/dev/vda bs=1M seek={DONE_MIB} conv=fsync 2>/dev/null
fi
poweroff -f
"#,
        record = workload_and_sysrq()
    )
}

/// The capture kernel's part of the kdump path: bundle the region from
/// `input` (what a hook ordered before kdump-tools' dump does), then
/// makedumpfile with kdump-tools' default arguments, then check the bundle.
fn capture_script(input: &str) -> String {
    format!(
        r#"{UPTIME}booted=$(up)
crashring bundle {input} -o /mnt/crash.tar.gz 2>/dev/null && sync
bundled=$?
t1=$(up)
say "bundle on disk"
makedumpfile -c -d 31 /proc/vmcore /mnt/vmcore >/dev/null 2>&1 && sync
dumped=$?
t2=$(up)
say "vmcore on disk"
crashring check-bundle /mnt/crash.tar.gz >/dev/null
checked=$?
echo "crashring-capture: path=kdump booted=$booted bundle=$booted:$t1 makedumpfile=$t1:$t2 bundled=$bundled dumped=$dumped checked=$checked"
{extract}"#,
        extract = capture_extract(input)
    )
}

/// `key=value` words of the `crashring-capture: path=` line.
fn timing_line(log: &str) -> Result<BTreeMap<String, String>> {
    let line = log
        .lines()
        .find_map(|l| l.split_once("crashring-capture: path=").map(|(_, t)| t))
        .context("the guest printed no timing line")?;
    Ok(format!("path={line}")
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// Seconds between the two uptimes of a `START:END` field.
fn span(fields: &BTreeMap<String, String>, key: &str) -> Result<f64> {
    let (a, b) = fields
        .get(key)
        .and_then(|v| v.split_once(':'))
        .with_context(|| format!("timing line without {key}=START:END"))?;
    let secs = |s: &str| s.parse::<f64>().with_context(|| format!("{key}: {s:?}"));
    Ok(secs(b)? - secs(a)?)
}

fn ensure_zero(fields: &BTreeMap<String, String>, keys: &[&str]) -> Result<()> {
    for k in keys {
        ensure!(
            fields.get(*k).map(String::as_str) == Some("0"),
            "{k} is not 0 in the timing line: {fields:?}"
        );
    }
    Ok(())
}

/// The host's span between two needles' first appearances.
fn between(seen: &[Option<Duration>], from: usize, to: usize, what: &str) -> Result<f64> {
    let (Some(a), Some(b)) = (seen[from], seen[to]) else {
        anyhow::bail!("the serial console never showed {what}");
    };
    Ok(b.saturating_sub(a).as_secs_f64())
}

fn artifacts(sh: &Shell, name: &str) -> Result<Artifacts> {
    let dir = crate::env::work_dir(sh).join("runs").join(name);
    sh.create_dir(&dir)?;
    Ok(Artifacts { dir, kept: false })
}

fn next_boot(sh: &Shell, k: &guest::Kernel) -> Result<()> {
    let art = artifacts(sh, &format!("capture-next-boot-{}", k.series))?;
    let plan = WarmReboot {
        name: "capture-next-boot",
        test_module: false,
        cpus: 2,
        script: Some(next_boot_script()),
        ext2_disk: true,
        ..WarmReboot::memmap(String::new())
    };
    let needles = [
        PANIC,
        "crashring-test: phase recover",
        "crashring-capture: bundle on disk",
    ];
    let clock = SerialClock::watch(&art.dir.join("serial.log"), &needles);
    let saved = warm_reboot_run(sh, k, &art, &plan);
    let seen = clock.stop();
    let saved = saved?;
    let f = timing_line(&saved.log)?;
    ensure_zero(&f, &["bundled", "checked"])?;
    let to_user = between(&seen, 0, 1, "the panic and then the next boot's user space")?;
    let total = between(&seen, 0, 2, "the panic and then the bundle")?;
    let booted = f
        .get("booted")
        .and_then(|b| b.parse::<f64>().ok())
        .context("timing line without booted=")?;
    let (bundle, copy) = (span(&f, "bundle")?, span(&f, "copy")?);
    println!(
        "\ncapture path, next boot, {} (QEMU TCG, 2 CPUs, 16 MiB region, one CPU's ring wrapped, then the standard workload):",
        k.release
    );
    println!("  panic -> next boot's user space  {to_user:>7.2} s (host clock; panic=1 waits 1 s; the kernel's own boot {booted:.2} s)");
    println!("  panic -> checked bundle on disk  {total:>7.2} s (host clock)");
    println!(
        "  to the bundle / to user space    {:>7.2}x",
        total / to_user
    );
    println!("  bundle step                      {bundle:>7.2} s (guest clock)");
    println!("  raw copy of the slot, fsync'd    {copy:>7.2} s (guest clock, same disk)");
    println!(
        "  bundle / raw copy                {:>7.2}x",
        bundle / copy.max(0.01)
    );
    Ok(())
}

fn kdump(sh: &Shell, k: &guest::Kernel) -> Result<()> {
    let art = artifacts(sh, &format!("capture-kdump-{}", k.series))?;
    // reserve_mem= (6.11+) puts the region in /proc/vmcore; before it, a
    // memmap= range is read from /dev/mem by address (kdump-direct).
    let (plan, input) = if k.has_reserve_mem() {
        let plan = KdumpPlan {
            name: "capture-kdump",
            region_append: "reserve_mem=16M:4096:crashring",
            module_args: "reserve_mem=crashring",
            capture: capture_script("/proc/vmcore"),
            before_crash: "",
        };
        (plan, "/proc/vmcore")
    } else {
        let input = "/dev/mem --phys 0x40000000:16M";
        let plan = KdumpPlan {
            name: "capture-kdump-direct",
            region_append: "memmap=16M$0x40000000",
            module_args: "region=16M@0x40000000",
            capture: capture_script(input),
            before_crash: "",
        };
        (plan, input)
    };
    let needles = [
        PANIC,
        "crashring-test: phase capture",
        "crashring-test: bundle on disk",
        "crashring-test: vmcore on disk",
    ];
    let clock = SerialClock::watch(&art.dir.join("serial.log"), &needles);
    let run = run_kdump(sh, k, &art, &plan);
    let seen = clock.stop();
    let run = run?;
    let _ = std::fs::remove_file(&run.disk);
    let f = timing_line(&run.log)?;
    ensure_zero(&f, &["bundled", "dumped", "checked"])?;
    let to_capture = between(
        &seen,
        0,
        1,
        "the panic and then the capture kernel's user space",
    )?;
    let to_bundle = between(&seen, 0, 2, "the panic and then the bundle")?;
    let to_vmcore = between(&seen, 0, 3, "the panic and then makedumpfile's dump")?;
    let (bundle, dump) = (span(&f, "bundle")?, span(&f, "makedumpfile")?);
    println!(
        "\ncapture path, kdump, {} (QEMU TCG, 4 CPUs then 1, 2 GiB, 16 MiB region, the standard workload):",
        k.release
    );
    println!("  panic -> capture kernel's user space {to_capture:>7.2} s (host clock)");
    println!("  panic -> checked bundle on disk      {to_bundle:>7.2} s (host clock)");
    println!(
        "  panic -> makedumpfile's dump on disk {to_vmcore:>7.2} s (host clock, after the bundle)"
    );
    println!("  bundle step                          {bundle:>7.2} s (guest clock, crashring bundle {input})");
    println!("  makedumpfile -c -d 31 step           {dump:>7.2} s (guest clock, /proc/vmcore)");
    println!(
        "  bundle / makedumpfile                {:>7.2}x",
        bundle / dump.max(0.01)
    );
    Ok(())
}

pub fn run(sh: &Shell) -> Result<()> {
    for series in ["6.12", "6.1"] {
        let k = guest::kernel(series)?;
        next_boot(sh, &k)?;
        kdump(sh, &k)?;
    }
    Ok(())
}
