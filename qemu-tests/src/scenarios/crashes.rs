//! The ways a kernel goes down besides a sysrq panic, each on the
//! warm-reboot path with crashring_test.ko doing the damage: a panic in
//! hard IRQ context, a CPU hung with interrupts off, and a panic while
//! every CPU is writing flat out.

use super::{
    check_region_with, ensure_crashed_by_panic, follow, parse_saved, warm_reboot_run,
    workload_writes, Artifacts, CrashExpect, WarmReboot,
};
use crate::env::guest::Kernel;
use anyhow::{ensure, Context, Result};
use pstore_ring::layout::{REASON_PANIC, STREAM_KERNEL_CPU};
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{LossKind, Region};
use pstore_ring::schema::{Value, EVENT_CRASH, EVENT_MARKER, EVENT_PRINTK};
use std::collections::BTreeMap;
use xshell::Shell;

pub fn panic_in_irq(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let record = workload_writes()
        + "insmod /lib/crashring_test.ko action=panic_irq\n\
           sleep 30\n";
    let plan = WarmReboot {
        name: "panic-in-irq",
        test_module: true,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    saved.check(|image| {
        let expect = CrashExpect {
            messages: &["crashring-test: panic in hard IRQ context"],
            cause: Some("panicking from a timer interrupt"),
            signature: &["calls: panic_timer_fn [crashring_test]"],
        };
        check_region_with(&parse_saved(image)?, &expect)
    })
}

/// The detectors a hung CPU can trip, with what each puts in the panic
/// message. Under TCG the perf-based NMI watchdog has no PMU to count with
/// (the serial log says so), so the hard-lockup detector cannot fire; the
/// RCU stall detector, running on the other CPUs' ticks, is the closest
/// real equivalent and is armed to panic.
pub const LOCKUP_PANICS: &[&str] = &["Hard LOCKUP", "hard LOCKUP", "RCU Stall", "softlockup"];

/// The kernel command line of a lockup run: every detector armed to panic.
pub const LOCKUP_APPEND: &str = "nmi_watchdog=1 hardlockup_panic=1 softlockup_panic=1 \
                                 sysctl.kernel.panic_on_rcu_stall=1 rcupdate.rcu_cpu_stall_timeout=5";

pub fn hard_lockup(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let record = workload_writes()
        + "dmesg | grep -i 'NMI watchdog' | sed 's/^/crashring-test: /'\n\
           insmod /lib/crashring_test.ko action=lockup\n\
           sleep 240\n";
    // The HPET as the clocksource, as a kernel picks it wherever it finds
    // the TSC unstable (TCG guests under load do): its read takes a lock.
    // crash_kexec_post_notifiers, as kdump setups that keep pstore use:
    // the panic stops the other CPUs by NMI at once, so the spinning CPU,
    // reading the clock, is stopped inside that lock, and the panic path
    // must record the crash without waiting for it.
    let append = format!("{LOCKUP_APPEND} clocksource=hpet crash_kexec_post_notifiers");
    let plan = WarmReboot {
        name: "hard-lockup",
        extra_append: &append,
        test_module: true,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    // What the kernel said about its NMI watchdog, as the guest echoed it.
    let nmi = saved
        .log
        .lines()
        .filter_map(|l| l.split_once("crashring-test: ").map(|(_, t)| t))
        .find(|t| t.contains("NMI watchdog"))
        .map_or(
            "the kernel said nothing about its NMI watchdog".to_string(),
            |t| format!("kernel: {:?}", t.trim()),
        );
    // The test module's counts, printed after crashring's panic notifier.
    let said = saved
        .log
        .lines()
        .find_map(|l| l.split_once("crashring-test: HPET reads: ").map(|(_, t)| t))
        .context("the test module printed no HPET read counts")?;
    let (all, after_stop) = said
        .split_once(", on the panic path after the stop: ")
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)))
        .with_context(|| format!("reading the test module's counts from {said:?}"))?;
    ensure!(
        all > 0,
        "the guest never read the HPET, so its clocksource was not the HPET and the \
         panic path's reads went uncounted (serial log {})",
        saved.serial.display()
    );
    ensure!(
        after_stop == 0,
        "the panic path read the clocksource {after_stop} time(s) after stopping the other \
         CPUs, where a CPU stopped inside read_hpet() would hang it (serial log {})",
        saved.serial.display()
    );
    let summary = saved.check(|image| {
        let expect = CrashExpect {
            messages: LOCKUP_PANICS,
            cause: Some("CPU 1 spins with interrupts off, reading the clock"),
            // The detector's report: RCU's stall, or the NMI watchdog's.
            signature: &["title: "],
        };
        check_region_with(&parse_saved(image)?, &expect)
    })?;
    Ok(format!(
        "{summary}; {nmi}; {all} HPET reads, none on the panic path after the stop"
    ))
}

pub fn crash_under_load(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    // Only the load threads and the crash write: every CPU's stream is its
    // thread's numbered events, so loss counts can be checked exactly, by
    // `crashring follow` live and after the crash. The load goes on from
    // its pause, its numbers unbroken.
    let record = format!(
        "{}sleep 2\n\
         echo c > /proc/sysrq-trigger\n",
        follow::STEPS
    );
    let plan = WarmReboot {
        name: "crash-under-load",
        module_args: "region=16M@0x40000000 sources=marker,crash",
        test_module: true,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    let followed = follow::check(&saved.log, plan.cpus)
        .with_context(|| format!("crashring follow (serial log {})", saved.serial.display()))?;
    let recovered = saved.check(|image| check_load(&parse_saved(image)?, plan.cpus))?;
    Ok(format!("{followed}; after the crash: {recovered}"))
}

pub fn nested_under_load(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    // The NMI backtraces come while every CPU's thread writes, and the
    // second round just before the crash, so its lines are not overwritten.
    let record = "insmod /lib/crashring_test.ko action=nested\n\
                  sleep 1\n\
                  echo l > /proc/sysrq-trigger\n\
                  sleep 1\n\
                  echo l > /proc/sysrq-trigger\n\
                  echo c > /proc/sysrq-trigger\n"
        .to_string();
    let plan = WarmReboot {
        name: "nested-under-load",
        module_args: "region=16M@0x40000000 sources=printk,marker,sched,irq,crash",
        test_module: true,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    let want = Exactness {
        writers: NESTED_WRITERS,
        nmi_backtraces: k.has_cpu_backtraces(),
        nesting: true,
        panic: &["sysrq triggered crash"],
    };
    saved.check(|image| check_exact(&parse_saved(image)?, plan.cpus, &want))
}

/// The numbered writers of crashring_test.ko's `action=nested`.
pub const NESTED_WRITERS: &[&str] = &["load", "irq", "softirq"];

/// What a crash under crashring_test.ko's numbered writers must leave.
pub struct Exactness<'a> {
    /// The writers every CPU ran (`load`, `irq`, `softirq`).
    pub writers: &'a [&'a str],
    /// Whether every CPU printed NMI backtrace lines (sysrq l).
    pub nmi_backtraces: bool,
    /// Whether some events must be on lanes above 0.
    pub nesting: bool,
    /// What the panic message may start with.
    pub panic: &'a [&'a str],
}

/// What crashring_test.ko's `action=nested` writers log: `KIND cpu=C
/// seq=S`, each kind numbering its own events per CPU.
fn numbered(text: &str) -> Option<(&str, u16, u64)> {
    let mut words = text.split(' ');
    let kind = words.next()?;
    let cpu = words.next()?.strip_prefix("cpu=")?.parse().ok()?;
    let seq = words.next()?.strip_prefix("seq=")?.parse().ok()?;
    Some((kind, cpu, seq))
}

/// Every kernel stream (each CPU's lanes) loses nothing but overwritten
/// pages and, where the panic stopped or interrupted a writer, its record
/// in flight. Each writer's numbered events are in order on the merged
/// timeline and none is missing after the oldest moment all of its CPU's
/// lanes still cover; none is invented or duplicated. The panic's crash
/// event is there once, the last event of its CPU, with the reason and
/// message expected. As asked: events on lanes above 0, NMI backtrace
/// lines from every CPU.
pub fn check_exact(region: &Region, cpus: u32, want: &Exactness) -> Result<String> {
    ensure_crashed_by_panic(region)?;
    let trace = region.decode();
    ensure!(
        trace.diagnostics.is_empty(),
        "diagnostics: {:?}",
        trace.diagnostics
    );
    let e = region.header.endian;
    let mut covered_since = vec![0u64; cpus as usize];
    let mut by_lane = BTreeMap::<u8, usize>::new();
    for s in &trace.streams {
        let (cpu, lane) = (s.info.cpu, s.info.lane);
        ensure!(
            s.lost(LossKind::Unreadable) == 0
                && s.lost(LossKind::Torn) == 0
                && s.lost(LossKind::Dropped) <= 1
                && s.losses.iter().all(|l| l.kind != LossKind::End),
            "cpu{cpu} lane {lane}: lost more than overwritten pages and a record in flight: {:?}",
            s.losses
        );
        if s.lost(LossKind::Overwritten) > 0 {
            if let (Some(first), Some(since)) =
                (s.events.first(), covered_since.get_mut(cpu as usize))
            {
                *since = (*since).max(first.ts);
            }
        }
        *by_lane.entry(lane).or_default() += s.events.len();
    }
    let marker = region.schema.get(EVENT_MARKER).context("no marker type")?;
    let printk = region.schema.get(EVENT_PRINTK).context("no printk type")?;
    let crash_def = region.schema.get(EVENT_CRASH).context("no crash type")?;
    let mut last = BTreeMap::<(String, u16), (u64, u64)>::new();
    let mut nmi_lines = BTreeMap::<u16, usize>::new();
    // Per CPU, whether its newest event so far is the panic's crash event.
    let mut panicked = BTreeMap::<u16, bool>::new();
    let mut panics = Vec::new();
    for item in merge(&trace.streams) {
        let Item::Event(ev) = item else { continue };
        let info = &trace.streams[usize::from(ev.stream)].info;
        let is_panic = ev.type_id == EVENT_CRASH
            && matches!(
                crash_def.decode(ev.payload, e).ok().as_deref(),
                Some([Value::Unsigned(r), ..]) if *r == u64::from(REASON_PANIC)
            );
        panicked.insert(info.cpu, is_panic);
        if is_panic {
            let values = crash_def.decode(ev.payload, e).unwrap_or_default();
            let message = match values.get(2) {
                Some(Value::Str(m)) => String::from_utf8_lossy(m).into_owned(),
                _ => String::new(),
            };
            panics.push((info.cpu, message));
        }
        let text = |def: &pstore_ring::read::EventType, at: usize| match def
            .decode(ev.payload, e)
            .ok()?
            .get(at)
        {
            Some(Value::Str(t)) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => None,
        };
        if ev.type_id == EVENT_PRINTK {
            if text(printk, 4).is_some_and(|t| t.contains("NMI backtrace for cpu")) {
                *nmi_lines.entry(info.cpu).or_default() += 1;
            }
            continue;
        }
        if ev.type_id != EVENT_MARKER {
            continue;
        }
        let Some(t) = text(marker, 2) else { continue };
        let Some((kind, cpu, seq)) = numbered(&t) else {
            continue;
        };
        ensure!(
            cpu == info.cpu,
            "{t:?} recorded on cpu{} lane {}",
            info.cpu,
            info.lane
        );
        let since = covered_since.get(usize::from(cpu)).copied().unwrap_or(0);
        if let Some(&(prev, prev_ts)) = last.get(&(kind.to_owned(), cpu)) {
            ensure!(
                seq > prev,
                "{t:?} (lane {}) merged after seq {prev}: out of order",
                info.lane
            );
            ensure!(
                prev_ts < since || seq == prev + 1,
                "{kind} cpu={cpu}: seq {prev} then {seq} at {} ns, after every lane's oldest surviving event ({since} ns): events missing",
                ev.ts
            );
        }
        last.insert((kind.to_owned(), cpu), (seq, ev.ts));
    }
    for cpu in 0..cpus as u16 {
        for kind in want.writers {
            ensure!(
                last.contains_key(&((*kind).to_owned(), cpu)),
                "no {kind} events from cpu{cpu}"
            );
        }
    }
    let [(cpu, message)] = panics.as_slice() else {
        anyhow::bail!(
            "{} panic crash events, expected one: {panics:?}",
            panics.len()
        );
    };
    ensure!(
        panicked.get(cpu) == Some(&true),
        "the panic's crash event is not the last event of cpu{cpu}"
    );
    ensure!(
        want.panic.iter().any(|p| message.contains(p)),
        "the panic says {message:?}, expected one of {:?}",
        want.panic
    );
    let nested: usize = by_lane.range(1..).map(|(_, n)| n).sum();
    ensure!(
        !want.nesting || nested > 0,
        "no event on a lane above 0: nothing nested ({by_lane:?})"
    );
    ensure!(
        !want.nmi_backtraces || nmi_lines.len() == cpus as usize,
        "NMI backtrace lines from CPUs {:?}, the guest has {cpus}",
        nmi_lines.keys().collect::<Vec<_>>()
    );
    let dropped: u64 = trace
        .streams
        .iter()
        .map(|s| s.lost(LossKind::Dropped))
        .sum();
    Ok(format!(
        "events by lane {by_lane:?}, NMI backtrace lines by CPU {nmi_lines:?}, {dropped} records in flight at the panic, every writer's events in order and none missing ({} writers with events), panic on cpu{cpu} last: {message:?}",
        last.len()
    ))
}

/// One stream per CPU of the guest, each holding `load cpu=C seq=S`
/// markers with C its CPU and S its stream index (so none is missing,
/// reordered or invented, and the loss count before the first is exact),
/// then, on one of them, the sysrq crash. The records in flight when the
/// panic stopped the other CPUs lie past their pages' commit and the panic
/// closed those pages there (FORMAT.md section 12, case 7): nothing is torn.
fn check_load(region: &Region, cpus: u32) -> Result<String> {
    ensure_crashed_by_panic(region)?;
    let cpu_streams: Vec<u16> = region
        .streams
        .iter()
        .filter(|s| s.kind == STREAM_KERNEL_CPU && s.lane == 0)
        .map(|s| s.cpu)
        .collect();
    ensure!(
        cpu_streams == (0..cpus).map(|c| c as u16).collect::<Vec<_>>(),
        "CPU streams for CPUs {cpu_streams:?}, the guest has {cpus}"
    );
    let trace = region.decode();
    ensure!(
        trace.diagnostics.is_empty(),
        "diagnostics: {:?}",
        trace.diagnostics
    );
    let e = region.header.endian;
    let marker = region.schema.get(EVENT_MARKER).context("no marker type")?;
    let mut lines = Vec::new();
    let mut crashes = 0;
    for s in &trace.streams {
        if s.info.kind != STREAM_KERNEL_CPU {
            continue;
        }
        let cpu = s.info.cpu;
        if s.info.lane > 0 {
            // Only the crash may nest here: the load writes from tasks.
            ensure!(
                s.events.iter().all(|ev| ev.type_id == EVENT_CRASH) && s.lost_events() == 0,
                "cpu{cpu} lane {}: {} events, {:?} lost, where nothing nests",
                s.info.lane,
                s.events.len(),
                s.losses
            );
            crashes += s.events.len();
            continue;
        }
        let mut loads = 0u64;
        for (n, ev) in s.events.iter().enumerate() {
            if ev.type_id == EVENT_CRASH {
                ensure!(
                    n + 1 == s.events.len(),
                    "cpu{cpu}: the crash is event {} of {}, not the last",
                    ev.index,
                    s.events.len()
                );
                let crash = region.schema.get(EVENT_CRASH).context("no crash type")?;
                let values = crash
                    .decode(ev.payload, e)
                    .map_err(|f| anyhow::anyhow!("cpu{cpu}: the crash's field {f}"))?;
                ensure!(
                    matches!(values.get(2), Some(Value::Str(m)) if m.starts_with(b"sysrq triggered crash")),
                    "cpu{cpu}: the crash marker says {:?}, not sysrq's",
                    values.get(2)
                );
                crashes += 1;
                continue;
            }
            ensure!(
                ev.type_id == EVENT_MARKER,
                "cpu{cpu}: event {} has type {}, only load markers were on",
                ev.index,
                ev.type_id
            );
            let values = marker
                .decode(ev.payload, e)
                .map_err(|f| anyhow::anyhow!("cpu{cpu}: event {}: field {f}", ev.index))?;
            let text = match values.get(2) {
                Some(Value::Str(t)) => String::from_utf8_lossy(t).into_owned(),
                _ => String::new(),
            };
            let want = format!("load cpu={cpu} seq={}", ev.index);
            ensure!(
                text == want,
                "cpu{cpu}: event {} says {text:?}, expected {want:?} (missing, reordered or invented)",
                ev.index
            );
            loads += 1;
        }
        let first = s.events.first().map_or(0, |ev| ev.index);
        let overwritten = s.lost(LossKind::Overwritten);
        ensure!(
            overwritten == first,
            "cpu{cpu}: {overwritten} events reported overwritten, but the first recovered is number {first}"
        );
        ensure!(
            s.lost(LossKind::Unreadable) == 0 && s.lost(LossKind::Dropped) <= 1,
            "cpu{cpu}: {} events unreadable, {} dropped: more than its record in flight",
            s.lost(LossKind::Unreadable),
            s.lost(LossKind::Dropped)
        );
        ensure!(
            s.losses.iter().all(|l| l.kind != LossKind::End),
            "cpu{cpu}: the stream ends in a loss: {:?}",
            s.losses
        );
        ensure!(
            s.lost(LossKind::Torn) == 0,
            "cpu{cpu}: {} torn events; the one in flight was past its commit",
            s.lost(LossKind::Torn)
        );
        ensure!(loads > 0, "cpu{cpu}: no load events recovered");
        lines.push(format!(
            "cpu{cpu} {loads} events (seq {first}..={}) after {overwritten} overwritten, {} torn, {} in flight",
            first + loads - 1,
            s.lost(LossKind::Torn),
            s.lost(LossKind::Dropped)
        ));
    }
    ensure!(crashes == 1, "{crashes} crash events, expected one");
    let state = region.state.as_ref().map_err(|p| anyhow::anyhow!("{p}"))?;
    ensure!(
        state.message.starts_with("sysrq triggered crash"),
        "the state block's crash message is {:?}",
        state.message
    );
    Ok(lines.join("; "))
}
