//! The kernel's own persistent ftrace buffer beside crashring, read by
//! `crashring ftrace` from the memory a crash left.
//!
//! The guest boots with a `trace_instance=` on a `memmap=` range of its
//! own (6.12+: the kernels that have persistent instances). One writer
//! pinned to each online CPU writes numbered markers into the instance's
//! `trace_marker`, so that several CPUs' chunks of the range hold events;
//! then the guest crashes. From a dump ([`check_dump`]), every marker must
//! come back on the CPU that wrote it, once, in order, with nothing lost,
//! and `info` must list the buffer with its events.
//! On the next boot ([`NEXT_BOOT`], [`check_next_boot`]), the kernel
//! attaches to the buffer again; `crashring ftrace` reads it through
//! `/dev/mem` and must give the same markers, in the same order, as the
//! kernel's own reader (the instance's `trace` file).

use anyhow::{ensure, Context, Result};
use std::path::Path;
use xshell::Shell;

/// The range and the instance on it (after `qemu-dump`'s ramoops area,
/// below every scenario's crashring region).
pub const APPEND: &str = "memmap=4M$0x32000000 trace_instance=crashring@0x32000000:4M";
/// Markers each writer writes.
const MARKERS: u32 = 250;
/// The guest's symbols the host names the function entry by, as its
/// `/proc/kallsyms` gives them (a map of the crashed boot), and the
/// anchors VMCOREINFO places such a map by.
const KALLSYMS: &str =
    "_text|_stext|_etext|init_uts_ns|rb_meta_init_text_addr|sysrq_handle_crash|__handle_sysrq";
/// The function entry the crash leaves, its caller's name after `<-`.
const FUNCTION: &str = "sysrq_handle_crash";
const CALLER: &str = "__handle_sysrq";

/// The guest's part before the crash: one writer per online CPU (`cpus`
/// of them) writes its markers, `crashring-ftrace CPU N`; then the
/// instance traces [`FUNCTION`], which the crash calls once, and the
/// guest says the symbols of [`KALLSYMS`].
pub fn script(cpus: u32) -> String {
    format!(
        r#"mount -t tracefs nodev /sys/kernel/tracing
t=/sys/kernel/tracing/instances/crashring
if [ -d $t ]; then
  # One function entry, at the crash. First: a tracer set empties the
  # buffer.
  echo sysrq_handle_crash > $t/set_ftrace_filter && echo function > $t/current_tracer || echo "crashring-test: no function tracing"
  for c in $(seq 0 {last}); do
    taskset -c $c sh -c "for i in \$(seq 1 {MARKERS}); do echo \"crashring-ftrace $c \$i\" > $t/trace_marker; done" &
  done
  wait
  grep -E ' ({KALLSYMS})$' /proc/kallsyms | sed 's/^/crashring-test: kallsyms /'
else
  echo "crashring-test: no ftrace instance"
fi
"#,
        last = cpus - 1
    )
}

/// The next boot, before anything else: if the instance holds the
/// previous boot's markers, `crashring ftrace` reads the range through
/// `/dev/mem`, naming code by this boot's own `/proc/kallsyms` (the same
/// kernel, placed elsewhere by KASLR), and the markers it gives (count,
/// digest, count per CPU) and the kernel's (count, digest) are said on
/// the console, and the function entry as each names it.
pub const NEXT_BOOT: &str = r#"mount -t tracefs nodev /sys/kernel/tracing
t=/sys/kernel/tracing/instances/crashring
if grep -q crashring-ftrace $t/trace 2>/dev/null; then
  crashring ftrace /dev/mem --ftrace 0x32000000:4M --symbols /proc/kallsyms > /ftrace.txt 2> /ftrace.err
  echo "crashring-test: ftrace read $?"
  sed 's/^/crashring-test: ftrace says /' /ftrace.err
  grep -o 'crashring-ftrace [0-9]* [0-9]*' /ftrace.txt > /ftrace-ours
  grep -o 'crashring-ftrace [0-9]* [0-9]*' $t/trace > /ftrace-kernel
  echo "crashring-test: ftrace ours $(wc -l < /ftrace-ours) $(md5sum < /ftrace-ours)"
  echo "crashring-test: ftrace kernel's $(wc -l < /ftrace-kernel) $(md5sum < /ftrace-kernel)"
  per=; for c in 0 1 2 3; do per="$per $(grep -c "\] cpu$c pid .* crashring-ftrace $c " /ftrace.txt)"; done
  echo "crashring-test: ftrace per cpu$per"
  echo "crashring-test: ftrace function ours $(grep -o 'function: .*' /ftrace.txt | sed 's/+0x[0-9a-f]*//g')"
  echo "crashring-test: ftrace function kernel's $(grep -o '[^ ]* <-[^ ]*$' $t/trace)"
fi
"#;

/// `crashring ftrace` on `dump`: one buffer, nothing lost, and on each of
/// the first `cpus` CPUs its writer's markers 1 to [`MARKERS`], each once
/// and in order.
pub fn check_dump(
    sh: &Shell,
    crashring: &Path,
    dump: &Path,
    cpus: u32,
    serial: &Path,
) -> Result<String> {
    let map = kallsyms_said(serial)?;
    let out = xshell::cmd!(sh, "{crashring} ftrace {dump} --symbols {map}")
        .quiet()
        .ignore_status()
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(0),
        "crashring ftrace {} exited {:?}:\n{stderr}",
        dump.display(),
        out.status.code()
    );
    check_markers(&stdout, cpus, ours)
        .with_context(|| format!("crashring ftrace {}:\n{stderr}", dump.display()))?;
    let functions: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once(": function: ").map(|(_, f)| f))
        .collect();
    let named = |f: &str| {
        let (callee, caller) = f.split_once(" <- ").unwrap_or_default();
        callee.split('+').next() == Some(FUNCTION) && caller.split('+').next() == Some(CALLER)
    };
    ensure!(
        functions.len() == 1 && named(functions[0]),
        "crashring ftrace --symbols gave the function entries {functions:?}, not {FUNCTION} called by {CALLER}:\n{stderr}"
    );
    ensure!(
        stderr.contains("placed by VMCOREINFO's _stext"),
        "the symbol map was not placed by VMCOREINFO:\n{stderr}"
    );
    // `info` lists it among what the dump holds.
    let info = xshell::cmd!(sh, "{crashring} info --json {dump}")
        .quiet()
        .read()?;
    let info: serde_json::Value = serde_json::from_str(&info)?;
    let listed = &info["ftrace"];
    ensure!(
        listed.as_array().map(Vec::len) == Some(1)
            && listed[0]["events"].as_u64() == Some(u64::from(MARKERS * cpus + 1))
            && listed[0]["invalid"] == 0
            && listed[0]["unreadable"] == 0,
        "crashring info --json {} lists the ftrace buffers {listed}",
        dump.display()
    );
    Ok(format!(
        "the persistent ftrace instance ({}): {MARKERS} markers of {MARKERS} on each of {cpus} CPUs, in order, the crash's function entry named {}, and listed by info",
        layout(&stderr),
        functions[0]
    ))
}

/// A symbol map of the lines the guest said of its `/proc/kallsyms`
/// ([`KALLSYMS`]), written beside `serial`.
fn kallsyms_said(serial: &Path) -> Result<std::path::PathBuf> {
    let log = std::fs::read_to_string(serial)?;
    let lines: Vec<&str> = log
        .lines()
        .filter_map(|l| {
            l.split_once("crashring-test: kallsyms ")
                .map(|(_, s)| s.trim())
        })
        .collect();
    ensure!(
        lines.len() == KALLSYMS.split('|').count(),
        "the guest said {} of its symbols, not {}: {lines:?}",
        lines.len(),
        KALLSYMS.split('|').count()
    );
    let path = serial.with_file_name("kallsyms");
    std::fs::write(&path, lines.join("\n") + "\n")?;
    Ok(path)
}

/// Reads a marker line of one text: its CPU and the words after the
/// marker's prefix; `None` for any other line.
type MarkerLine = fn(&str) -> Option<(Option<usize>, &str)>;

/// A marker line as `crashring ftrace` prints it: its CPU (from
/// `[    5.070412236] cpu1 pid 1: `) and the words after the marker's
/// prefix.
fn ours(line: &str) -> Option<(Option<usize>, &str)> {
    let (head, marker) = line.split_once(" print: crashring-ftrace ")?;
    let cpu = head
        .split_once("] cpu")
        .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok());
    Some((cpu, marker))
}

/// A marker line as the kernel's `trace` file shows it: its CPU (from
/// `  sh-95  [001] .....  5.070412: `) and the words after the marker's
/// prefix.
fn kernels(line: &str) -> Option<(Option<usize>, &str)> {
    let (head, marker) = line.split_once(": tracing_mark_write: crashring-ftrace ")?;
    let cpu = head
        .split_once('[')
        .and_then(|(_, rest)| rest.split(']').next()?.parse().ok());
    Some((cpu, marker))
}

/// In `text` (lines read by `split`): on each of the first `cpus` CPUs,
/// its writer's markers 1 to [`MARKERS`], each once and in order, and no
/// marker on another CPU.
fn check_markers(text: &str, cpus: u32, split: MarkerLine) -> Result<()> {
    let mut per_cpu = vec![Vec::new(); cpus as usize];
    for line in text.lines() {
        let Some((cpu, marker)) = split(line) else {
            continue;
        };
        let (writer, n) = marker.split_once(' ').unwrap_or_default();
        ensure!(
            cpu.is_some_and(|c| c < per_cpu.len() && writer.parse() == Ok(c)),
            "a marker on the wrong CPU: {line}"
        );
        per_cpu[cpu.unwrap_or_default()].push(n.parse::<u32>()?);
    }
    let expected: Vec<u32> = (1..=MARKERS).collect();
    for (cpu, got) in per_cpu.iter().enumerate() {
        ensure!(
            *got == expected,
            "CPU {cpu} holds {} markers, not 1..={MARKERS} in order (first {:?})",
            got.len(),
            got.iter().take(5).collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// The buffer among the logs of a bundle (`manifest` and its unpacked
/// `top`): listed as ftrace text, every line placed on the timeline by
/// the printk log's offset, and every marker of `cpus` writers in it.
pub fn check_bundled(manifest: &serde_json::Value, top: &Path, cpus: u32) -> Result<String> {
    let name = "kernel-ftrace-32000000.txt";
    let path = format!("logs/{name}");
    let listed = manifest["files"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["path"] == path.as_str()));
    ensure!(
        listed.is_some_and(|f| f["format"] == "ftrace text"),
        "{path} is not listed as ftrace text: {}",
        manifest["files"]
    );
    let log = manifest["logs"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["name"] == name))
        .context("the manifest's logs do not describe the ftrace buffer")?;
    // The markers and the crash's function entry.
    let total = u64::from(MARKERS * cpus + 1);
    ensure!(
        log["lines"] == total && log["placed"] == total,
        "the bundled ftrace buffer's lines are not all placed on the timeline: {log}"
    );
    ensure!(
        log["bracketed_alignment"]["from_printk_log"] == true,
        "the bundled ftrace buffer was not placed by the printk log's offset: {log}"
    );
    check_markers(&std::fs::read_to_string(top.join(&path))?, cpus, ours)
        .with_context(|| format!("the bundle's {path}"))?;
    Ok(format!(
        "the ftrace buffer bundled as {path}, its {total} lines on the timeline by the printk log's offset"
    ))
}

/// The layout `crashring ftrace` named on its first line.
fn layout(stderr: &str) -> &str {
    stderr
        .lines()
        .next()
        .and_then(|l| l.split_once(" (").map(|(_, rest)| rest))
        .and_then(|l| l.split(')').next())
        .unwrap_or_default()
}

/// What [`NEXT_BOOT`] said in `log`, the console of a guest whose first
/// boot ran [`script`] on `cpus` CPUs: `crashring ftrace /dev/mem`
/// succeeded, gave every marker, [`MARKERS`] on each CPU where they were
/// written, and the same markers in the same order as the kernel's
/// reader.
pub fn check_next_boot(log: &str, cpus: u32) -> Result<String> {
    let said = |what: &str| {
        let key = format!("crashring-test: ftrace {what} ");
        log.lines().find_map(|l| {
            l.split_once(key.as_str())
                .map(|(_, rest)| rest.trim().to_string())
        })
    };
    let says: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("crashring-test: ftrace says ").map(|(_, r)| r))
        .collect();
    ensure!(
        said("read").as_deref() == Some("0"),
        "crashring ftrace /dev/mem on the next boot said {:?}:\n{}",
        said("read"),
        says.join("\n")
    );
    let ours = said("ours").unwrap_or_default();
    let kernels = said("kernel's").unwrap_or_default();
    let total = MARKERS * cpus;
    ensure!(
        ours.starts_with(&format!("{total} ")) && ours == kernels,
        "markers (count, digest) crashring read: {ours:?}; the kernel's reader: {kernels:?}:\n{}",
        says.join("\n")
    );
    let per: Vec<String> = (0..4)
        .map(|c| if c < cpus { MARKERS } else { 0 }.to_string())
        .collect();
    ensure!(
        said("per cpu") == Some(per.join(" ")),
        "markers per CPU {:?}, not {per:?}",
        said("per cpu")
    );
    // This boot's kallsyms placed by the address ftrace saved of the
    // crashed boot's _text: the same names as the kernel's reader gives.
    // The caller may be its cold part (`__handle_sysrq.cold` on 7.3).
    let (ours, kernels) = (said("function ours"), said("function kernel's"));
    let caller = kernels
        .as_deref()
        .and_then(|k| k.strip_prefix(&format!("{FUNCTION} <-")))
        .filter(|c| c.starts_with(CALLER));
    ensure!(
        caller.is_some_and(|c| ours == Some(format!("function: {FUNCTION} <- {c}"))),
        "the crash's function entry named {ours:?} by crashring with this boot's kallsyms, {kernels:?} by the kernel's reader:\n{}",
        says.join("\n")
    );
    ensure!(
        says.iter().any(|l| l.contains("placed by ftrace's saved ")),
        "the symbol map was not placed by what ftrace saved:\n{}",
        says.join("\n")
    );
    Ok(format!(
        "the persistent ftrace instance on the next boot ({}): {total} markers through /dev/mem, the same and in the same order as the kernel's reader, and the crash's function entry named {FUNCTION} <- {} by this boot's kallsyms as by the kernel's reader",
        layout(&says.join("\n")),
        caller.unwrap_or_default()
    ))
}

/// The instance's `trace` file among the logs of a bundle the next boot's
/// `crashring recover` made (`manifest` and its unpacked `top`): listed as
/// the kernel's trace file, every marker of `cpus` writers in it, as the
/// kernel read them.
pub fn check_next_boot_bundled(
    manifest: &serde_json::Value,
    top: &Path,
    cpus: u32,
) -> Result<String> {
    let path = "logs/ftrace-instance-crashring.txt";
    let listed = manifest["files"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["path"] == path));
    ensure!(
        listed.is_some_and(|f| f["format"] == "ftrace trace file"),
        "{path} is not listed as the kernel's trace file: {}",
        manifest["files"]
    );
    check_markers(&std::fs::read_to_string(top.join(path))?, cpus, kernels)
        .with_context(|| format!("the bundle's {path}"))?;
    Ok(format!(
        "the persistent ftrace instance bundled as {path}, {} markers as the kernel read them",
        MARKERS * cpus
    ))
}

/// `crashring extract --kernel-logs` on `dump`: the kernel's printk log
/// aligned by the printk lines the region holds too, the ftrace buffer
/// moved by the same offset (one kernel clock), every marker of `cpus`
/// writers among the region's events, all in time order, and every
/// marker before the region's crash record.
pub fn check_merged(sh: &Shell, crashring: &Path, dump: &Path, cpus: u32) -> Result<String> {
    let out = xshell::cmd!(
        sh,
        "{crashring} extract {dump} --kernel-logs --format jsonl"
    )
    .quiet()
    .ignore_status()
    .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.code() == Some(0),
        "crashring extract --kernel-logs exited {:?}:\n{stderr}",
        out.status.code()
    );
    let said = |log: &str| {
        stderr
            .lines()
            .find_map(|l| {
                l.split_once(&format!("--kernel-logs: {log}: "))
                    .map(|(_, r)| r)
            })
            .unwrap_or_default()
    };
    let printk = said("kernel-printk.txt");
    let matched: u64 = printk
        .split_once("aligned by ")
        .and_then(|(_, r)| r.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    ensure!(
        matched > 0,
        "the printk log was not aligned with the region:\n{stderr}"
    );
    ensure!(
        said("kernel-ftrace-32000000.txt").contains("moved by the printk log's offset"),
        "the ftrace buffer was not moved by the printk log's offset:\n{stderr}"
    );
    let mut last = 0u64;
    let (mut markers, mut crash_at, mut latest_marker) = (0u32, None, 0u64);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let ts = v["ts"].as_u64().context("a line without a time")?;
        ensure!(ts >= last, "out of time order at {line}");
        last = ts;
        if v["type"] == "crash" {
            crash_at.get_or_insert(ts);
        }
        if v["source"] == "kernel ftrace buffer"
            && v["text"]
                .as_str()
                .is_some_and(|t| t.contains(" print: crashring-ftrace "))
        {
            markers += 1;
            latest_marker = ts;
        }
    }
    ensure!(
        markers == MARKERS * cpus,
        "{markers} ftrace markers merged, not {}",
        MARKERS * cpus
    );
    let crash_at = crash_at.context("no crash record in the region")?;
    ensure!(
        latest_marker < crash_at,
        "the last ftrace marker lands at {latest_marker} ns, after the crash at {crash_at} ns"
    );
    Ok(format!(
        "extract --kernel-logs: the printk log aligned by {matched} printk lines, the ftrace buffer by the same offset, its {markers} markers merged in time order before the crash"
    ))
}

/// The event formats `crashring recover` kept on a box with a persistent
/// instance (`log`: the guest said where, and the file's mode, after
/// `crashring-test: formats `): a private file named by the release,
/// on the ext2 `disk`, whose formats include ftrace's own print event
/// and the scheduler's, as the running kernel numbered them.
pub fn check_kept_formats(
    sh: &Shell,
    art: &super::Artifacts,
    disk: &Path,
    log: &str,
    release: &str,
) -> Result<String> {
    let said = super::warm_reboot::said_after(log, "formats").unwrap_or_default();
    ensure!(
        said == format!("{release} 600"),
        "crashring recover kept {said:?}, not {release}'s formats as a private file"
    );
    let bytes = super::warm_reboot::copied_off(
        sh,
        art,
        disk,
        &format!("bundles/ftrace-formats/{release}"),
    )?;
    let path = art.dir.join(release);
    std::fs::write(&path, &bytes)?;
    let formats = extractor::foreign::ftrace::event::Formats::load(&path)?;
    let text = String::from_utf8_lossy(&bytes);
    ensure!(
        formats.len() > 500
            && text.contains("name: print\nID: 5\n")
            && text.contains("name: sched_switch\n"),
        "the kept formats hold {} events, or lack print (ID 5) or sched_switch",
        formats.len()
    );
    Ok(format!(
        "{} event formats of {release} kept for its dumps",
        formats.len()
    ))
}
