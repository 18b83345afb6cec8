//! The QEMU scenarios: each boots real kernels, crashes them one way, and
//! compares what was recovered with what the guest's workload wrote.
//!
//! This module runs the scenario table (`table`: `cargo xtask list`,
//! `scenario`, and each scenario of `test`) and holds what the scenarios share:
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
//! Whatever two children need lives in this file. The one exception is
//! `table`, the list of scenarios, which names each child's entry points.

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
mod table;
mod user_streams;
mod warm_reboot;

use crate::env::guest;
pub use crate::env::guest::host_crashring;
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
pub use table::{find, list, SCENARIOS};
use xshell::Shell;

/// Where a scenario keeps its files.
pub struct Artifacts {
    pub dir: PathBuf,
    /// Whether the user asked to keep the files (`--keep`); if not, big
    /// ones (memory dumps) are deleted once checked.
    pub kept: bool,
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
/// Where the second boot's `after` phase (see [`boot_script`]) writes what
/// it saw: past the largest slot, before the verdict.
pub const CONTROL_MIB: u64 = 32;
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
/// bundled), which sets `ack=1` if it fails. `after` runs once the
/// verdict's facts are gathered, before it is written: the module may be
/// unloaded there, and what it saw goes on the disk at [`CONTROL_MIB`].
pub fn boot_script(
    module_args: &str,
    before: &str,
    record: &str,
    release: &str,
    after: &str,
) -> String {
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
  acked=$(head -n 1 /sys/kernel/crashring/previous_summary)
{after}  # The verdict goes on the disk too: the console is for diagnosis (after
  # a panic reboot its output has been seen to go missing).
  {{
    echo "{DONE}"
    echo "info $info json $json ack $ack; after the ack: $acked"
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
    boot_script(module_args, "", &workload_then_sysrq(before_crash), ACK, "")
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
