//! The kernel writer's cost against ftrace's, in the same guest and the
//! same boot (`cargo xtask bench`): crashring_test.ko's `action=cost` times
//! `crashring_log()`, `trace_puts()`, `trace_printk()` and an empty loop on
//! every CPU, then the parts of a crashring record (its clock, an empty
//! record, the CRC its bytes add to their page); then a DRM debug message
//! each way it can go ([`debug`]); then user space writes
//! 32-byte markers with `dd` into `/dev/crashring`, tracefs' `trace_marker`
//! and `/dev/null`; then a program (csrc/compositor.c) writes 8-byte
//! events into a user stream of the module's pool and, for the same
//! payloads, `write()`s to `/dev/crashring`; last, `dd` writes printk
//! lines into `/dev/kmsg` with nothing, crashring's printk source or
//! ftrace's `printk:console` event capturing them. First of all, the
//! module's load as a boot pays it ([`load_script`]).
//!
//! Each kernel boots twice. The timed boot runs on TCG's own clock, where
//! an emulated instruction's cost has little to do with a real CPU's (a
//! helper call for `rdtsc`, a softmmu lookup per load) and figures move by
//! about 10% between runs. The counted boot runs with `-icount shift=0`:
//! the guest's clock advances one nanosecond per guest instruction, so
//! the same figures become instructions per event, repeatable to a few
//! hundredths. That clock is the machine's, advanced by every vCPU's
//! instructions, so the counted boot has one CPU: with two, what the other
//! CPU ran landed in the measured one's count (703 against 551 in one run).
//! An instruction count weighs an HPET read or a cache miss like an add,
//! so neither figure is a hardware one; together they bound it. The page
//! CRC is the extreme: TCG runs each crc32 instruction in a helper call
//! that divides one bit at a time (QEMU's `helper_crc32` in
//! target/i386/ops_sse.h: 64 steps for a `crc32q`, about 55 ns for 8
//! bytes, against a table lookup's few), `-icount` counts it as one
//! instruction; `benches/c_ring.rs` times the module's loop on the host's
//! own CPU.

mod debug;

use crate::env::guest;
use crate::scenarios::{warm_reboot_run, Artifacts, WarmReboot, DONE, DONE_MIB};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use xshell::Shell;

/// Records per writer, CPU and round in the kernel; writes per target in
/// user space.
const KERNEL_EVENTS: u32 = 100_000;
const USER_WRITES: u32 = 100_000;

/// What the test module times, writers first (`what=` of its lines).
const WRITERS: [&str; 4] = ["crashring_log", "trace_puts", "trace_printk", "empty-loop"];

/// The parts of a crashring record it times after the writers, and what
/// each stands for.
const PARTS: [(&str, &str); 3] = [
    ("clock", "ktime_get_mono_fast_ns(), read once per record"),
    (
        "crashring_log-empty",
        "a record with empty tag and text: the fixed cost",
    ),
    (
        "crc32c-64B",
        "the format's CRC-32C of 64 bytes, as the module computes it: a 64-byte record's share of its page's CRC",
    ),
];

/// Events the program writes each way.
const STREAM_EVENTS: u32 = 200_000;

/// printk lines written through `/dev/kmsg` per way of capturing them:
/// enough that /proc/uptime's 10 ms moves a line's figure by 25 ns.
const PRINTK_LINES: u32 = 400_000;

/// What captures those lines, in the order measured: nothing, crashring's
/// printk source, ftrace's `printk:console` event. crashring stays loaded
/// throughout, so its hook on vprintk_store() (a line's level; before 6.3
/// its text too when the source is on) runs in every round.
const PRINTK_CAPTURES: [&str; 3] = ["none", "crashring", "ftrace"];

/// How the guest's clock runs, and so what its nanoseconds measure.
#[derive(Clone, Copy)]
enum Clock {
    /// TCG's real time: emulated nanoseconds.
    Timed,
    /// One nanosecond per guest instruction.
    Counted,
}

impl Clock {
    /// The guest's CPUs: every CPU the timed way; one when counting, as
    /// the clock counts the instructions of all of them.
    fn cpus(self) -> u32 {
        match self {
            Clock::Timed => 2,
            Clock::Counted => 1,
        }
    }

    fn qemu_args(self) -> &'static [&'static str] {
        match self {
            Clock::Timed => &[],
            Clock::Counted => &["-icount", "shift=0,sleep=off"],
        }
    }

    /// What the guest's nanoseconds count.
    fn unit(self) -> &'static str {
        match self {
            Clock::Timed => "ns",
            Clock::Counted => "insns",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Clock::Timed => "QEMU TCG, timed",
            Clock::Counted => "QEMU TCG -icount shift=0: guest instructions",
        }
    }
}

/// The module's load as a boot that loads it from its initramfs pays it:
/// `insmod` with the default sources (the printk backfill and the walk
/// for the reset's evidence included), from a line written just before
/// to one just after, on the kernel's printk clock (microseconds). The
/// first line's time is the boot so far, up to the initramfs's /init:
/// the baseline. Then the sources the measurements below want.
fn load_script() -> &'static str {
    r#"echo "<6>crashring-cost: load begins" > /dev/kmsg
insmod /lib/crashring.ko region=16M@0x40000000 user_streams=1 || echo "crashring-test: insmod failed"
echo "<6>crashring-cost: load ends" > /dev/kmsg
dmesg | sed -n 's/^\[ *\([0-9.]*\)\] crashring-cost: load \([a-z]*\)$/crashring-cost: load \2 at=\1/p'
echo marker,crash,debug > /sys/kernel/crashring/sources
"#
}

fn script(program: &str) -> String {
    let captures = PRINTK_CAPTURES.join(" ");
    let debug = debug::script();
    let load = load_script();
    format!(
        r#"{load}mount -t tracefs nodev /sys/kernel/tracing
insmod /lib/crashring_test.ko action=cost cost_events={KERNEL_EVENTS}
dmesg | grep 'crashring-cost:' | sed 's/^.*crashring-cost:/crashring-cost:/'
{debug}echo "crashring-cost: clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
for target in /dev/null /dev/crashring /sys/kernel/tracing/trace_marker; do
  start=$(cut -d ' ' -f 1 /proc/uptime)
  dd if=/dev/zero of=$target bs=32 count={USER_WRITES} 2>/dev/null
  end=$(cut -d ' ' -f 1 /proc/uptime)
  echo "crashring-cost: user target=$target start=$start end=$end writes={USER_WRITES}"
done
yes "<7>printk cost line 01234567890" | head -n {PRINTK_LINES} > /tmp/printk-lines
for capture in {captures}; do
  case $capture in
    crashring) echo printk,marker,crash > /sys/kernel/crashring/sources ;;
    ftrace) echo marker,crash > /sys/kernel/crashring/sources
            echo 1 > /sys/kernel/tracing/events/printk/console/enable ;;
  esac
  start=$(cut -d ' ' -f 1 /proc/uptime)
  dd if=/tmp/printk-lines of=/dev/kmsg bs=32 count={PRINTK_LINES} 2>/dev/null
  end=$(cut -d ' ' -f 1 /proc/uptime)
  echo "crashring-cost: printk capture=$capture start=$start end=$end lines={PRINTK_LINES}"
done
echo 0 > /sys/kernel/tracing/events/printk/console/enable
{program} bench {STREAM_EVENTS}
echo "{DONE}" | dd of=/dev/vda bs=1M seek={DONE_MIB} conv=fsync 2>/dev/null
poweroff -f
"#
    )
}

/// `key=value` words of a `crashring-cost:` line.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

pub fn run(sh: &Shell) -> Result<()> {
    let program = guest::build_compositor(sh)?;
    let program = program.to_str().context("a path that is not UTF-8")?;
    for series in ["6.12", "6.1"] {
        for clock in [Clock::Timed, Clock::Counted] {
            measure(sh, series, clock, program)?;
        }
    }
    Ok(())
}

/// Boots `series` once with `clock` and prints what the guest measured.
fn measure(sh: &Shell, series: &'static str, clock: Clock, program: &str) -> Result<()> {
    let k = guest::kernel(series)?;
    let run = match clock {
        Clock::Timed => format!("cost-{series}"),
        Clock::Counted => format!("cost-{series}-icount"),
    };
    let dir = crate::env::work_dir(sh).join("runs").join(run);
    sh.create_dir(&dir)?;
    let plan = WarmReboot {
        name: "kernel-cost",
        test_module: true,
        cpus: clock.cpus(),
        script: Some(script(program)),
        programs: &[program],
        later_modules: &["drm"],
        qemu_args: clock.qemu_args(),
        // Else /dev/kmsg takes ten lines per five seconds from dd.
        extra_append: "printk.devkmsg=on",
        ..WarmReboot::memmap(String::new())
    };
    let saved = warm_reboot_run(sh, &k, &Artifacts { dir, kept: false }, &plan)?;
    let lines: Vec<&str> = saved
        .log
        .lines()
        .filter_map(|l| l.split_once("crashring-cost: ").map(|(_, t)| t))
        .collect();
    let (unit, cpus) = (clock.unit(), clock.cpus());
    // Per event by writer, one figure per CPU.
    let mut kernel = BTreeMap::<&str, Vec<f64>>::new();
    for l in lines.iter().filter(|l| l.starts_with("cpu=")) {
        let f = fields(l);
        let (Some(what), Some(ns), Some(n)) = (f.get("what"), f.get("ns"), f.get("events")) else {
            continue;
        };
        let per = ns.parse::<f64>()? / n.parse::<f64>()?;
        kernel.entry(what).or_default().push(per);
    }
    ensure!(
        kernel.values().all(|v| v.len() == cpus as usize)
            && kernel.len() == WRITERS.len() + PARTS.len(),
        "cost lines missing from the serial log: {lines:?}"
    );
    let mean = |w: &str| {
        kernel
            .get(w)
            .map_or(f64::NAN, |v| v.iter().sum::<f64>() / v.len() as f64)
    };
    let empty = mean("empty-loop");
    let clocksource = lines
        .iter()
        .find_map(|l| l.strip_prefix("clocksource="))
        .unwrap_or("unknown");
    println!(
        "\nkernel writer, {} ({}, {cpus} CPU(s), {KERNEL_EVENTS} records per CPU, best of 3 rounds, mean over CPUs; clocksource {clocksource}):",
        k.release,
        clock.describe()
    );
    for w in WRITERS {
        println!(
            "  {w:<14} {:>8.1} {unit}/event ({:>8.1} above the empty loop)",
            mean(w),
            mean(w) - empty
        );
    }
    for base in ["trace_puts", "trace_printk"] {
        println!(
            "  crashring_log / {base}: {:.2}x",
            (mean("crashring_log") - empty) / (mean(base) - empty)
        );
    }
    println!("  parts of crashring_log's record (above the empty loop):");
    for (w, what) in PARTS {
        println!("    {w:<20} {:>8.1} {unit}  {what}", mean(w) - empty);
    }
    report_load(&lines, unit)?;
    debug::report(&lines, unit)?;
    let mut user = BTreeMap::<&str, f64>::new();
    for l in lines.iter().filter(|l| l.starts_with("user ")) {
        let f = fields(l);
        let target = f.get("target").copied().unwrap_or_default();
        user.insert(target, per_write(&f, USER_WRITES)?);
    }
    ensure!(user.len() == 3, "user cost lines missing: {lines:?}");
    println!(
        "user markers, write() of 32 bytes ({USER_WRITES} by dd, /proc/uptime's 10 ms clock):"
    );
    for (target, ns) in &user {
        println!("  {target:<34} {ns:>8.0} {unit}/write");
    }
    let null = user.get("/dev/null").copied().unwrap_or(f64::NAN);
    let ours = user.get("/dev/crashring").copied().unwrap_or(f64::NAN);
    let ftrace = user
        .get("/sys/kernel/tracing/trace_marker")
        .copied()
        .unwrap_or(f64::NAN);
    println!(
        "  /dev/crashring / trace_marker: {:.2}x ({:.2}x above the /dev/null write)",
        ours / ftrace,
        (ours - null) / (ftrace - null)
    );
    let mut stream = BTreeMap::<&str, f64>::new();
    for l in lines.iter().filter(|l| l.starts_with("stream ")) {
        let f = fields(l);
        if let (Some(what), Some(ns), Some(n)) = (f.get("what"), f.get("ns"), f.get("events")) {
            stream.insert(what, ns.parse::<f64>()? / n.parse::<f64>()?);
        }
    }
    let (Some(mapped), Some(write)) = (stream.get("user-stream"), stream.get("marker-write"))
    else {
        anyhow::bail!("user stream cost lines missing: {lines:?}");
    };
    println!(
        "a program's 8-byte events ({STREAM_EVENTS} each way, CLOCK_MONOTONIC in the program):"
    );
    println!("  into its user stream (crashring-user, mapped) {mapped:>8.1} {unit}/event");
    println!("  write() to /dev/crashring                     {write:>8.1} {unit}/event");
    println!("  write() / user stream: {:.1}x", write / mapped);
    let mut printk = BTreeMap::<&str, f64>::new();
    for l in lines.iter().filter(|l| l.starts_with("printk ")) {
        let f = fields(l);
        let capture = f.get("capture").copied().unwrap_or_default();
        printk.insert(capture, per_write(&f, PRINTK_LINES)?);
    }
    ensure!(
        PRINTK_CAPTURES.iter().all(|c| printk.contains_key(c)),
        "printk cost lines missing: {lines:?}"
    );
    println!("printk lines, write() of 32 bytes to /dev/kmsg ({PRINTK_LINES} by dd), captured by:");
    let none = printk["none"];
    for c in PRINTK_CAPTURES {
        println!(
            "  {c:<10} {:>8.0} {unit}/line ({:>6.0} above none)",
            printk[c],
            printk[c] - none
        );
    }
    println!(
        "  crashring / ftrace's printk:console, above none: {:.2}x",
        (printk["crashring"] - none) / (printk["ftrace"] - none)
    );
    Ok(())
}

/// The load's figures ([`load_script`]'s lines), in millions of the
/// clock's `unit`.
fn report_load(lines: &[&str], unit: &str) -> Result<()> {
    let at = |what: &str| -> Result<f64> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("load {what} at=")))
            .with_context(|| format!("no load {what} line: {lines:?}"))?;
        let secs = fields(line).get("at").copied().unwrap_or_default();
        Ok(secs.parse::<f64>().context("a load line's time")? * 1e3)
    };
    let (booted, loaded) = (at("begins")?, at("ends")? - at("begins")?);
    let scale = if unit == "ns" { "ms" } else { "M insns" };
    println!("the module's load from the initramfs (insmod, default sources, printk's clock):");
    println!("  insmod crashring.ko {loaded:>10.2} {scale}");
    println!("  the boot up to /init {booted:>9.2} {scale}  (baseline)");
    println!("  load / boot: {:.1}%", loaded / booted * 100.0);
    Ok(())
}

/// Nanoseconds per write of a `start=` `end=` line (/proc/uptime seconds).
fn per_write(f: &BTreeMap<&str, &str>, writes: u32) -> Result<f64> {
    let secs = |k: &str| -> Result<f64> {
        f.get(k)
            .context("cost line without its time")?
            .parse::<f64>()
            .context("cost line time")
    };
    Ok((secs("end")? - secs("start")?) * 1e9 / f64::from(writes))
}
