//! The scenarios built on the warm-reboot runner alone
//! ([`super::warm_reboot_run`]): the plain one (a bad load refused, printk
//! metadata, a wall clock step, 64 CPUs, a persistent ftrace instance), its
//! reserve_mem= twin, a crashed
//! generation whose header decayed, and two generations left unacked.

use super::{
    bert, check_region, check_warm_reboot, ensure_crashed_by_panic, ftrace, parse_saved, ramoops,
    warm_reboot_run, workload_and_sysrq, workload_writes, Artifacts, WarmReboot, ACK, DONE,
    DONE_MIB,
};
use crate::env::guest::{self, Kernel};
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::read::{HeaderTrust, Region, Trace};
use pstore_ring::schema::{Value, EVENT_MARKER, EVENT_PRINTK};
use std::path::Path;
use xshell::Shell;

/// Before the workload, lines whose printk metadata is easy to get wrong:
/// the default message level set to 5 (the compiled-in default is 4), a
/// hex dump at KERN_ERR whose level printk takes from an argument, a line
/// at the default level, and NMI backtraces of the other CPUs (sysrq l).
/// The boot id goes to the console, to compare with the region's.
const PRINTK_METADATA: &str = r#"echo "crashring-test: boot_id $(cat /proc/sys/kernel/random/boot_id)"
echo "4 5 1 7" > /proc/sys/kernel/printk
insmod /lib/crashring_test.ko action=printk || echo "crashring-test: insmod crashring_test.ko failed"
echo l > /proc/sysrq-trigger
"#;

/// The wall clock stepped an hour forward after recording started, as NTP
/// or `date -s` would; after more than the module's 1 s poll, a printk line
/// carries the wall time the guest then had.
const CLOCK_STEP: &str = r#"date -s "@$(( $(date +%s) + 3600 ))" > /dev/null
sleep 3
echo "<6>crashring-clock: wall=$(date +%s)" > /dev/kmsg
"#;

/// Hibernation while recording: the image would restore the writer's
/// state as it froze it while the region, not part of the image, kept
/// what came after, so the module refuses it (its PM notifier) before any
/// process is frozen.
const HIBERNATE: &str = r#"if echo disk > /sys/power/state 2>/dev/null; then echo "crashring-test: hibernated"; fi
dmesg | grep -q 'crashring: hibernation refused while recording' && echo "crashring-test: hibernation refused"
"#;

/// The periodic write-back's counters (the `region` line) before and two
/// passes after the workload, as a printk line: recorded in the region,
/// where [`check_write_back`] reads it, since console output written just
/// before a panic can be cut short.
const WRITE_BACK_BEFORE: &str = r#"wb() { grep -o 'writeback_ms=[0-9]* writeback_passes=[0-9]* writeback_pages=[0-9]*' /sys/kernel/crashring/region; }
wb_before=$(wb)
"#;
const WRITE_BACK_AFTER: &str = r#"sleep 2
echo "<6>crashring-write-back: $wb_before then $(wb)" > /dev/kmsg
"#;

/// The first printk line of `trace` that starts with `prefix`: its time
/// and the rest of its text.
fn printk_after(region: &Region, trace: &Trace, prefix: &str) -> Option<(u64, String)> {
    let e = region.header.endian;
    trace
        .streams
        .iter()
        .flat_map(|s| &s.events)
        .filter(|ev| ev.type_id == EVENT_PRINTK)
        .find_map(|ev| {
            let values = region.schema.get(ev.type_id)?.decode(ev.payload, e).ok()?;
            let Some(Value::Str(text)) = values.get(4) else {
                return None;
            };
            let rest = std::str::from_utf8(text).ok()?.strip_prefix(prefix)?;
            Some((ev.ts, rest.to_string()))
        })
}

/// The periodic write-back ran while the workload wrote, and wrote back
/// the pages it filled, not every stream's: 64 CPUs of 5 lanes are 320
/// streams, and all but the shell's CPU's were idle.
fn check_write_back(region: &Region) -> Result<String> {
    let (_, line) = printk_after(region, &region.decode(), "crashring-write-back: ")
        .context("no write-back line in the region: the workload's end was not recorded")?;
    let field = |text: &str, name: &str| -> Result<u64> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .with_context(|| {
                format!("no {name} in {line:?}: the region line lacks the write-back's fields")
            })?
            .parse()
            .with_context(|| format!("{name} in {line:?}"))
    };
    let (before, after) = line
        .split_once(" then ")
        .with_context(|| format!("write-back line {line:?}"))?;
    ensure!(
        field(after, "writeback_ms")? == 1000,
        "writeback_ms is not its default 1000: {line}"
    );
    let passes = field(after, "writeback_passes")? - field(before, "writeback_passes")?;
    let pages = field(after, "writeback_pages")? - field(before, "writeback_pages")?;
    ensure!(
        passes >= 1,
        "no write-back pass while the workload ran: {line}"
    );
    // 400 markers of at least 17 bytes fill two 4 KiB pages, whatever
    // else lands beside them.
    ensure!(
        (2..(passes + 1) * 64).contains(&pages),
        "{pages} pages written back in {passes} passes: the workload's pages were missed, or idle streams written back again: {line}"
    );
    Ok(format!("{pages} pages written back in {passes} passes"))
}

/// The next boot's release: what previous_summary says to a user who is
/// not root (no crash message), whether such a user can read `stats`
/// (whose counters would time the kernel's logging past `dmesg_restrict`),
/// then the ack.
fn member_summary_then_ack() -> String {
    format!(
        "  mkdir -p /etc\n\
         \x20 echo 'root:x:0:0::/:/bin/sh' > /etc/passwd\n\
         \x20 echo 'member:x:1000:1000::/:/bin/sh' >> /etc/passwd\n\
         \x20 echo \"crashring-test: a member reads $(su member -c 'grep ^state /sys/kernel/crashring/previous_summary')\"\n\
         \x20 if su member -c 'cat /sys/kernel/crashring/stats' > /dev/null 2>&1; then echo 'crashring-test: a member read stats'; else echo 'crashring-test: stats refused to a member'; fi\n\
         {ACK}"
    )
}

/// The warm-reboot guest's CPUs: one stream each, more `stats` lines than
/// one 4 KiB sysfs page holds. (QEMU's hot-pluggable CPUs would not do:
/// its MADT does not mark them online-capable, so Linux ignores them.)
const POSSIBLE_CPUS: u32 = 64;

/// Of those, the ones the kernel brings up: the module gives every
/// possible CPU its streams, online or not, and starting 62 more CPUs
/// costs each boot a minute of emulated time.
const ONLINE: u32 = 2;

/// The module's default `nest_lanes`: streams per CPU.
const NEST_LANES: u32 = 5;

/// Before the real load on each boot, one that must fail on a bad
/// parameter and leave both slots as they were: a formatted slot left
/// behind would make the first boot skip recording and the second find the
/// wrong previous generation.
const BAD_LOAD: &str = r#"if insmod /lib/crashring.ko region=64M@0x40000000 sources=bogus 2>/dev/null; then
  echo "crashring-test: sources=bogus accepted"
  rmmod crashring
fi
"#;

/// The longest host name Linux takes (64 characters); the header's field
/// keeps 63 and a NUL, and the module must load all the same.
const LONG_HOSTNAME: &str =
    "hostname hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\n";

pub fn warm_reboot(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    // A persistent ftrace instance beside the region, where the kernel
    // has them: 64 possible CPUs' chunks, markers from the 2 online ones,
    // read on the next boot against the kernel's own reader.
    let ftrace = k.has_reserve_mem();
    let (ftrace_next, ftrace_record, ftrace_append) = match ftrace {
        true => (ftrace::NEXT_BOOT, ftrace::script(ONLINE), ftrace::APPEND),
        false => ("", String::new(), ""),
    };
    let before = format!("{LONG_HOSTNAME}{BAD_LOAD}{ftrace_next}");
    let append = format!("maxcpus={ONLINE} {ftrace_append}");
    let release = member_summary_then_ack();
    let plan = WarmReboot {
        test_module: true,
        before_insmod: &before,
        // 64 streams: a 64 MiB range keeps each one 512 KiB per slot.
        region_append: "memmap=64M$0x40000000",
        module_args: "region=64M@0x40000000",
        extra_append: &append,
        cpus: POSSIBLE_CPUS,
        release: &release,
        ..WarmReboot::memmap(
            ftrace_record
                + PRINTK_METADATA
                + HIBERNATE
                + CLOCK_STEP
                + WRITE_BACK_BEFORE
                + &workload_writes()
                + WRITE_BACK_AFTER
                + "echo c > /proc/sysrq-trigger\n",
        )
    };
    let run = warm_reboot_run(sh, k, art, &plan)?;
    let said = |what: &str| run.said(what);
    ensure!(
        said("crashring-test: hibernation refused") && !said("crashring-test: hibernated"),
        "hibernation was not refused while recording"
    );
    ensure!(
        !said("sources=bogus accepted"),
        "a bad sources= was accepted"
    );
    ensure!(
        said("crashring-test: phase record"),
        "the first boot found a previous generation and never recorded: the failed load left one"
    );
    let stats = format!(
        "crashring-test: stats {} lines, last cpu{}.lane{}",
        POSSIBLE_CPUS * NEST_LANES,
        POSSIBLE_CPUS - 1,
        NEST_LANES - 1
    );
    ensure!(
        said(&stats),
        "stats does not list all {POSSIBLE_CPUS} CPUs (a sysfs page's worth?)"
    );
    ensure!(
        said(&format!(
            " cpus={POSSIBLE_CPUS} lanes={NEST_LANES} user_streams=0 "
        )),
        "region does not give {POSSIBLE_CPUS} CPUs of {NEST_LANES} lanes"
    );
    ensure!(
        said("crashring-test: previous refused after the ack"),
        "a reader of previous that opened it before the ack read on after it"
    );
    ensure!(
        run.log
            .lines()
            .any(|l| l.starts_with("state crashed reason 1 at ")
                && l.trim_end().ends_with(": sysrq triggered crash")),
        "previous_summary does not give the crashed state block's panic and message"
    );
    ensure!(
        run.log.lines().any(|l| l
            .strip_prefix("crashring-test: a member reads state crashed reason 1 at ")
            .is_some_and(|rest| !rest.contains(':'))),
        "previous_summary does not give a user who is not root the crash without its message"
    );
    ensure!(
        said("crashring-test: stats refused to a member"),
        "a user who is not root read stats, whose counters time the kernel's logging"
    );
    run.check(|image| {
        let region = parse_saved(image)?;
        ensure!(
            region.header.cpu_count == POSSIBLE_CPUS as u16
                && region.streams.len() == (POSSIBLE_CPUS * NEST_LANES) as usize,
            "{} CPUs, {} streams: the kernel has {POSSIBLE_CPUS} possible CPUs, {NEST_LANES} lanes each",
            region.header.cpu_count,
            region.streams.len()
        );
        ensure!(
            region.header.hostname == "h".repeat(63),
            "the header's host name is {:?}, not the 64-character one's first 63",
            region.header.hostname
        );
        let workload = check_region(&region)?;
        let metadata = check_printk_metadata(&region, &run.log)?;
        let clock = check_clock_step(&region)?;
        let write_back = check_write_back(&region)?;
        Ok(format!(
            "{workload}; {metadata}; {clock}; {write_back}; stats lists all {POSSIBLE_CPUS} CPUs; a 64-character host name kept to 63"
        ))
    })
    .and_then(|line| match ftrace {
        true => Ok(format!(
            "{line}; {}",
            ftrace::check_next_boot(&run.log, ONLINE)?
        )),
        false => Ok(line),
    })
}

/// After [`CLOCK_STEP`], the region holds one `clock` event, about an
/// hour past the header's offset (nothing else moved the wall clock: an
/// offset taken apart from the module's check would add a step nobody
/// took), and the wall time of the line printed after it is within the
/// second the guest printed (busybox's `date` has whole seconds only).
fn check_clock_step(region: &Region) -> Result<String> {
    let trace = region.decode();
    let clock = region.wall_clock(&trace);
    let step = match clock.steps() {
        [] => bail!("no clock event: the module did not see the wall clock step"),
        [step] => step,
        steps => bail!(
            "{} clock events, the guest stepped the wall clock once (header offset {}): {steps:?}",
            steps.len(),
            region.header.wall_offset_ns
        ),
    };
    let moved = i128::from(step.wall_offset_ns) - i128::from(region.header.wall_offset_ns);
    // `date -s` sets a whole second, and runs a little after the `date`
    // that read the clock: the step is 3600 s less up to a second, less
    // the time busybox took in between.
    ensure!(
        (3_598_000_000_000..=3_600_100_000_000).contains(&moved),
        "the clock event moves the wall clock by {moved} ns, the guest stepped it by about 3599-3600 s"
    );
    let (ts, printed) = printk_after(region, &trace, "crashring-clock: wall=")
        .and_then(|(ts, wall)| Some((ts, wall.parse::<i128>().ok()? * 1_000_000_000)))
        .context("the crashring-clock line is not in the trace")?;
    // Printed within the second `date` said, give or take the printk.
    let off = clock.wall_at(ts) - printed;
    ensure!(
        (-50_000_000..1_050_000_000).contains(&off),
        "the line printed in wall second {printed} ns is placed at {} ns ({off} ns off)",
        clock.wall_at(ts)
    );
    Ok(format!(
        "wall clock stepped {:.3} s and recorded; a line after it placed {:.1} ms from its wall time",
        moved as f64 / 1e9,
        off as f64 / 1e6
    ))
}

/// The region's boot id is the kernel's, and the [`PRINTK_METADATA`]
/// lines carry the level printk gave them: 3 for the hex dump, 5 for the
/// default-level line, 4 for NMI backtraces (`pr_warn` in
/// lib/nmi_backtrace.c), which are recorded with their CPU as the caller
/// (not a task).
fn check_printk_metadata(region: &Region, log: &str) -> Result<String> {
    let printed = log
        .lines()
        .find_map(|l| l.trim().strip_prefix("crashring-test: boot_id "))
        .context("the guest did not print its boot id")?;
    let boot_id: String = region
        .header
        .boot_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    ensure!(
        boot_id == printed.replace('-', ""),
        "the region's boot id {boot_id} is not the kernel's {printed}"
    );
    let e = region.header.endian;
    let trace = region.decode();
    let (mut hexdump, mut default, mut nmi) = (0, 0, 0);
    for ev in trace.streams.iter().flat_map(|s| &s.events) {
        if ev.type_id != EVENT_PRINTK {
            continue;
        }
        let Some(values) = region
            .schema
            .get(ev.type_id)
            .and_then(|t| t.decode(ev.payload, e).ok())
        else {
            continue;
        };
        let (Some(Value::Unsigned(level)), Some(Value::Unsigned(caller)), Some(Value::Str(text))) =
            (values.first(), values.get(2), values.get(4))
        else {
            continue;
        };
        let text = String::from_utf8_lossy(text);
        let want = if text.starts_with("crashring-hexdump: ") {
            hexdump += 1;
            3
        } else if text == "crashring-test: default level" {
            default += 1;
            5
        } else if text.starts_with("NMI backtrace for cpu ") && caller & 0x8000_0000 != 0 {
            nmi += 1;
            4
        } else {
            continue;
        };
        ensure!(
            *level == want,
            "printk {text:?} has level {level}, printk gave it {want}"
        );
    }
    ensure!(
        hexdump == 1,
        "{hexdump} hex dump lines recorded, the test module printed 1"
    );
    ensure!(
        default == 1,
        "{default} default-level lines recorded, the test module printed 1"
    );
    ensure!(nmi >= 1, "no NMI backtrace line recorded from NMI context");
    Ok(format!(
        "boot id {printed}; hex dump, default-level and {nmi} NMI printk lines at their levels"
    ))
}

/// On the boot after the crash, before crashring.ko loads, one bit of the
/// kernel release in the crashed generation's header (slot 0, at the
/// region's start) is flipped through /dev/mem, as a decayed bit would be:
/// its CRC fails from then on.
const FLIP_HEADER_BIT: &str = r#"if [ $(($(devmem 0x40000000 64))) -eq $((0xB8B1ADB7ACBEADBC)) ]; then
  v=$(devmem 0x40000068 8)
  devmem 0x40000068 8 $((v ^ 1))
  echo "crashring-test: flipped a bit of the previous generation's header"
fi
"#;

/// A crashed generation whose header no longer checks out is kept, not
/// reformatted: recording goes to the empty slot, `status` and
/// `previous_summary` say the header is damaged, `previous` serves the
/// whole slot, and the header read without its CRC gives every event.
pub fn damaged_header(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let plan = WarmReboot {
        name: "damaged-header",
        before_insmod: FLIP_HEADER_BIT,
        ..WarmReboot::memmap(workload_and_sysrq())
    };
    let run = warm_reboot_run(sh, k, art, &plan)?;
    let said = |what: &str| run.said(what);
    ensure!(
        said("crashring-test: flipped a bit"),
        "the second boot did not find the crashed generation to damage"
    );
    ensure!(
        said("crashring-test: status before ack slot 0") && said("header is damaged"),
        "status does not say slot 0's header is damaged"
    );
    ensure!(
        said("damaged header slot 0"),
        "previous_summary does not say the header is damaged"
    );
    ensure!(
        said("recording_slot=1 recording_phys=0x0000000040800000 generation=2"),
        "the module did not record generation 2 into the empty slot 1"
    );
    ensure!(!said("ack failed"), "previous_ack refused the damaged slot");
    // `previous` starts with the slot, so the region is at offset 0.
    run.check(|image| {
        ensure!(
            Region::parse(image, HeaderTrust::Checksummed).is_err(),
            "the saved header still passes its CRC: nothing was damaged"
        );
        let summary = check_region(&Region::parse(image, HeaderTrust::Lenient)?)?;
        Ok(format!(
            "header damaged and kept; read without its CRC: {summary}"
        ))
    })
}

/// Three boots: the first two each mark and crash without acking, so
/// both slots hold a generation; the third opens `previous` (generation
/// 2), reads a page, acks it, which exposes generation 1, and reads again
/// on the same open file.
fn two_generations_script() -> String {
    format!(
        r#"insmod /lib/crashring.ko region=16M@0x40000000 || echo "crashring-test: insmod failed"
summary=$(head -n 1 /sys/kernel/crashring/previous_summary)
case "$summary" in
none*)
  echo "crashring-test: phase record"
  echo "generation one" > /dev/crashring
  echo c > /proc/sysrq-trigger ;;
"generation 1 "*)
  echo "crashring-test: phase record again"
  echo "generation two" > /dev/crashring
  echo c > /proc/sysrq-trigger ;;
*)
  echo "crashring-test: phase recover"
  echo "crashring-test: previous first: $summary"
  exec 3< /sys/kernel/crashring/previous
  dd bs=4096 count=1 <&3 >/dev/null 2>&1
  echo 1 > /sys/kernel/crashring/previous_ack || echo "crashring-test: ack failed"
  if dd bs=4096 count=1 <&3 >/dev/null 2>&1; then
    echo "crashring-test: previous read on across the ack"
  else
    echo "crashring-test: previous refused after the ack"
  fi
  exec 3<&-
  echo "crashring-test: previous then: $(head -n 1 /sys/kernel/crashring/previous_summary)"
  dd if=/sys/kernel/crashring/previous of=/dev/vda bs=1M conv=fsync 2>/dev/null
  echo 1 > /sys/kernel/crashring/previous_ack || echo "crashring-test: ack failed"
  echo "{DONE}" | dd of=/dev/vda bs=1M seek={DONE_MIB} conv=fsync 2>/dev/null
  echo "{DONE}" ;;
esac
poweroff -f
"#
    )
}

pub fn two_generations(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let plan = WarmReboot {
        name: "two-generations",
        script: Some(two_generations_script()),
        ..WarmReboot::memmap(String::new())
    };
    let run = warm_reboot_run(sh, k, art, &plan)?;
    let said = |what: &str| run.said(what);
    ensure!(
        said("crashring-test: previous first: generation 2 ")
            && said("crashring-test: previous then: generation 1 "),
        "previous was not generation 2 and then, after its ack, generation 1"
    );
    ensure!(
        said("crashring-test: previous refused after the ack"),
        "a reader that opened previous at generation 2 read on into generation 1 after the ack"
    );
    ensure!(!said("ack failed"), "an ack was refused");
    run.check(|image| {
        let region = parse_saved(image)?;
        ensure!(
            region.header.generation == 1,
            "saved generation {}, not 1",
            region.header.generation
        );
        ensure_crashed_by_panic(&region)?;
        let trace = region.decode();
        let e = region.header.endian;
        let marked = trace.streams.iter().flat_map(|s| &s.events).any(|ev| {
            ev.type_id == EVENT_MARKER
                && region
                    .schema
                    .get(ev.type_id)
                    .and_then(|t| t.decode(ev.payload, e).ok())
                    .is_some_and(|v| v.get(2) == Some(&Value::Str(b"generation one")))
        });
        ensure!(marked, "generation 1 lacks its marker");
        Ok("generation 2 refused to a reader across its ack; generation 1 then saved whole, with its marker".into())
    })
}

/// reserve_mem= ranges are placed by memblock at boot, so they are found
/// again only if the next boot lays memory out the same way: nokaslr keeps
/// the kernel image from landing in a different place (with KASLR the
/// range moves on about one boot in five, per the ftrace maintainers).
/// The range's size is no multiple of a page and its alignment 64 bytes,
/// so it starts inside a page: the module must use its page-aligned part,
/// or a user stream's mapping would start before the stream's pages
/// (`compositor fresh` compares its first bytes with the header the
/// module wrote there, and looks for what the stream's last holder left).
pub fn warm_reboot_reserve_mem(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let program = guest::build_compositor(sh)?;
    let prog = program.to_str().context("a path that is not UTF-8")?;
    let plan = WarmReboot {
        region_append: "reserve_mem=16000000:64:crashring nokaslr",
        module_args: "reserve_mem=crashring user_streams=2",
        programs: &[prog],
        ..WarmReboot::memmap(format!("{prog} fresh\n") + &workload_and_sysrq())
    };
    let run = warm_reboot_run(sh, k, art, &plan)?;
    for check in ["fresh-header", "fresh-stale"] {
        let answer = run
            .log
            .lines()
            .find_map(|l| {
                Some(
                    l.split_once(&format!("crashring-test: security {check} "))?
                        .1,
                )
            })
            .unwrap_or("(no answer)");
        ensure!(
            answer.trim() == "ok",
            "a user stream on an unaligned reserve_mem= range: {check} {answer}"
        );
    }
    // The region it used: the range's whole pages.
    let region = run
        .log
        .lines()
        .find_map(|l| l.split_once("crashring-test: region ").map(|(_, r)| r))
        .context("the guest did not print the module's region")?;
    let word = |key: &str| {
        region
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_default()
    };
    let phys = u64::from_str_radix(word("phys").trim_start_matches("0x"), 16)?;
    let size: u64 = word("size").parse()?;
    ensure!(
        phys.is_multiple_of(4096) && size.is_multiple_of(4096) && size < 16_000_000,
        "the module used {phys:#x}+{size} of a range that is not page-aligned"
    );
    run.check(check_warm_reboot)
        .map(|s| format!("{s}; a user stream maps its own, zeroed pages"))
}

/// Why `recover-next-boot`'s second boot is reset: as a watchdog daemon
/// would say it before the reset came (at most the state block's 35 bytes).
const RESET_REASON: &str = "watchdog: display hung";

/// The second boot's part of `recover-next-boot`: what
/// crashring-recover.service runs, onto an ext2 disk, twice; then a
/// shutdown reason, and a reset without a shutdown (sysrq b, as a
/// watchdog's). The third boot recovers that generation.
fn recover_script(ecc: bool) -> String {
    // The persistent ftrace instance where the kernel has one (the
    // script says when it has not).
    format!(
        r#"{amd_reset_reason}insmod /lib/crashring.ko region=16M@0x40000000 || echo "crashring-test: insmod failed"
if grep -q '^none' /sys/kernel/crashring/previous_summary; then
  echo "crashring-test: phase record"
{ftrace_record}{ramoops_record}{record}elif grep -q '^state running.* reason 6 at ' /sys/kernel/crashring/previous_summary; then
  echo "crashring-test: phase reset"
  mount -t ext2 /dev/vdb /mnt || echo "crashring-test: mount failed"
  crashring recover --dir /mnt/reset
  echo "crashring-test: reset recover $?"
  echo "crashring-test: reset files $(ls /mnt/reset | tr '\n' ' ')"
  umount /mnt
  echo "{DONE}" | dd of=/dev/vda bs=1M seek={DONE_MIB} conv=fsync 2>/dev/null
else
  echo "crashring-test: phase recover"
  mount -t ext2 /dev/vdb /mnt || echo "crashring-test: mount failed"
{ramoops_recover}  mount -t tracefs nodev /sys/kernel/tracing
  crashring recover --dir /mnt/bundles
  echo "crashring-test: recover $?"
  echo "crashring-test: previous after $(head -n 1 /sys/kernel/crashring/previous_summary)"
  crashring recover --dir /mnt/bundles
  echo "crashring-test: again $?"
  echo "crashring-test: files $(ls -p /mnt/bundles | grep -v / | tr '\n' ' ')"
  echo "crashring-test: modes $(stat -c %a /mnt/bundles /mnt/bundles/*.* | tr "\n" " ")"
  echo "crashring-test: formats $(ls /mnt/bundles/ftrace-formats 2>/dev/null) $(stat -c %a /mnt/bundles/ftrace-formats/* 2>/dev/null)"
  echo "crashring-test: recording $(cat /sys/kernel/crashring/enabled)"
  crashring status | sed 's/^/crashring-test: status /'
  echo "{RESET_REASON}" > /sys/kernel/crashring/shutdown_reason
  # On the disk: the reset can come before the console has sent a line.
  echo "$(stat -c %a /sys/kernel/crashring/shutdown_reason) $(cat /sys/kernel/crashring/shutdown_reason)" > /mnt/reason
  umount /mnt
  echo b > /proc/sysrq-trigger
fi
poweroff -f
"#,
        amd_reset_reason = bert::log_amd_reset_reason(),
        record = workload_and_sysrq(),
        ftrace_record = ftrace::script(2),
        ramoops_record = ramoops::record_script(ecc),
        ramoops_recover = ramoops::recover_script(ecc),
    )
}

/// The words after `crashring-test: {what} ` on the console.
pub(super) fn said_after<'a>(log: &'a str, what: &str) -> Option<&'a str> {
    let key = format!("crashring-test: {what} ");
    log.lines()
        .find_map(|l| l.split_once(key.as_str()).map(|(_, rest)| rest.trim()))
}

pub fn recover_next_boot(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let ftrace = k.has_reserve_mem();
    let mut append = format!("{} {}", ramoops::APPEND, bert::APPEND);
    if ftrace {
        append = format!("{append} {}", ftrace::APPEND);
    }
    let firmware = bert::qemu_args(&art.dir)?;
    let qemu_args: Vec<&str> = firmware.iter().map(String::as_str).collect();
    let plan = WarmReboot {
        name: "recover-next-boot",
        cpus: 2,
        script: Some(recover_script(ramoops::ecc_on(k))),
        ext2_disk: true,
        extra_append: &append,
        qemu_args: &qemu_args,
        later_modules: ramoops::MODULES,
        ..WarmReboot::memmap(String::new())
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    let log = &saved.log;
    for (what, want) in [
        ("recover", "0"),
        ("previous after", "none"),
        ("again", "0"),
        ("recording", "1"),
    ] {
        ensure!(
            said_after(log, what) == Some(want),
            "the guest said {what} {:?}, not {want:?}:\n{}",
            said_after(log, what),
            crate::env::qemu::tail(&saved.serial, 30)
        );
    }
    // `crashring status` against the real sysfs: recording again, the
    // crash archived, no kdump kernel.
    for (what, want) in [
        ("status module", "loaded, recording;"),
        ("status region", "16777216 bytes at 0x"),
        ("status previous", "none waiting to be archived"),
        ("status on crash", "the next boot archives the region"),
    ] {
        let said = said_after(log, what).unwrap_or_default();
        ensure!(
            said.starts_with(want),
            "crashring status said {what} {said:?}, not {want:?}..."
        );
    }
    ensure!(
        said_after(log, "status region").is_some_and(|r| r.contains(", generation ")),
        "crashring status names no generation being recorded: {:?}",
        said_after(log, "status region")
    );
    let (json, bundle) = one_bundle(log, "files")?;
    ensure!(
        said_after(log, "modes") == Some("700 600 600"),
        "modes of the directory, summary and bundle: {:?}",
        said_after(log, "modes")
    );
    // Off the ext2 disk, as a collector would find it.
    let disk = art.dir.join("files.ext2");
    let checked = checked_off(sh, art, &disk, &format!("bundles/{bundle}"))?;
    let region = &checked.manifest["regions"][0];
    let recovered = region["recovered"].as_u64().unwrap_or(0);
    ensure!(
        region["kernel_release"] == k.release.as_str()
            && region["crash"]["reason"] == "panic"
            && recovered >= 2 * u64::from(super::WORKLOAD_EVENTS),
        "the bundle's manifest does not hold the workload's {} events and the panic: {region}",
        2 * super::WORKLOAD_EVENTS
    );
    let reset = check_reset(sh, art, &disk, log)?;
    let mut pstore = ramoops::check(sh, art, &disk, log, k)?;
    // What the kernel showed of the crashed boot went with its crash.
    let unpacked = art.dir.join("bundle");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked)?;
    let archive = art.dir.join(bundle);
    xshell::cmd!(sh, "tar -xzf {archive} -C {unpacked}")
        .quiet()
        .run()?;
    let top = unpacked.join(&checked.top);
    pstore += "; ";
    pstore += &ramoops::check_next_boot_bundled(
        sh,
        art,
        &disk,
        &checked.manifest,
        &top,
        super::SYSRQ.messages[0],
    )?;
    pstore += "; ";
    let summary = copied_off(sh, art, &disk, &format!("bundles/{json}"))?;
    pstore += &bert::check_bundled(&checked.manifest, &serde_json::from_slice(&summary)?, &top)?;
    if ftrace {
        pstore += "; ";
        pstore += &ftrace::check_next_boot_bundled(&checked.manifest, &top, 2)?;
        pstore += "; ";
        pstore += &ftrace::check_kept_formats(sh, art, &disk, log, &k.release)?;
    }
    if !art.kept {
        let _ = std::fs::remove_file(&disk);
    }
    Ok(format!(
        "crashring recover on the next boot: {bundle} (0600, in a 0700 directory) with {json}, intact, {recovered} events and the panic; acknowledged, a second run found nothing, recording on, and crashring status says so; {reset}; {pstore}; {:.1} s",
        saved.took.as_secs_f64()
    ))
}

/// The one bundle and its summary a directory held, as the guest listed it
/// after `crashring-test: {what} `.
pub(super) fn one_bundle<'a>(log: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    let files: Vec<&str> = said_after(log, what)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let [json, bundle] = files[..] else {
        bail!("{what}: the directory holds {files:?}, not one bundle and its summary");
    };
    ensure!(
        json.strip_suffix(".json") == bundle.strip_suffix(".tar.gz"),
        "{json} is not {bundle}'s summary"
    );
    Ok((json, bundle))
}

/// File `path` of the ext2 disk, copied out.
pub(super) fn copied_off(sh: &Shell, art: &Artifacts, disk: &Path, path: &str) -> Result<Vec<u8>> {
    let out = art.dir.join(path.rsplit('/').next().unwrap_or(path));
    let _ = std::fs::remove_file(&out);
    let req = format!("dump /{path} {}", out.display());
    xshell::cmd!(sh, "debugfs -R {req} {disk}")
        .quiet()
        .ignore_stderr()
        .run()?;
    std::fs::read(&out).with_context(|| format!("{path} is not on the disk"))
}

/// Bundle `path` of the ext2 disk, as `check-bundle` passes it.
pub(super) fn checked_off(
    sh: &Shell,
    art: &Artifacts,
    disk: &Path,
    path: &str,
) -> Result<extractor::bundle::Checked> {
    let bytes = copied_off(sh, art, disk, path)?;
    Ok(extractor::bundle::check(bytes.as_slice())?)
}

/// The third boot of `recover-next-boot`: the second, given a reason
/// (`shutdown_reason`, root's alone) and then reset without a shutdown as
/// a watchdog resets, is bundled, and every place says it was reset on
/// its way down, for that reason.
fn check_reset(sh: &Shell, art: &Artifacts, disk: &Path, log: &str) -> Result<String> {
    let given = format!("600 {RESET_REASON}\n");
    let read_back = copied_off(sh, art, disk, "reason")?;
    ensure!(
        read_back == given.as_bytes(),
        "shutdown_reason read back {:?}, not {given:?}",
        String::from_utf8_lossy(&read_back)
    );
    ensure!(
        said_after(log, "reset recover") == Some("0"),
        "crashring recover of the reset generation said {:?}",
        said_after(log, "reset recover")
    );
    let (json, bundle) = one_bundle(log, "reset files")?;
    let summary: serde_json::Value =
        serde_json::from_slice(&copied_off(sh, art, disk, &format!("reset/{json}"))?)?;
    ensure!(
        summary["state"] == "running"
            && summary["reason"] == "shutdown"
            && summary["message"] == RESET_REASON,
        "{json} does not say the generation was reset on its way down for {RESET_REASON:?}: {summary}"
    );
    let checked = checked_off(sh, art, disk, &format!("reset/{bundle}"))?;
    let region = &checked.manifest["regions"][0];
    ensure!(
        region["crash"].is_null()
            && region["shutdown"]["reason"] == RESET_REASON
            && region["shutdown"]["completed"] == false,
        "the reset generation's manifest does not say it was reset on its way down: {region}"
    );
    let said = "Reset on its way down (no crash): a shutdown was asked for at";
    ensure!(
        checked.readme.contains(said) && checked.readme.contains(RESET_REASON),
        "the reset generation's README does not say why: {}",
        checked.readme
    );
    Ok(format!(
        "a reason given and then a reset without a shutdown: bundled as {bundle}, its summary, manifest and README saying \"{RESET_REASON}\", reset on the way down"
    ))
}
