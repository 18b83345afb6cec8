//! `crashring follow` under flat-out writers on every CPU, in
//! crash-under-load's record phase before its crash: started from the
//! start before crashring_test.ko's load threads, interrupted (SIGINT)
//! once they are paused, each having said how many events it wrote. Every
//! event it printed must be in order per CPU, and printed + reported
//! missed must equal what that CPU's thread wrote.

use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;

/// The guest's part: follow (its text format, the default), the load, the
/// pause, the interrupt, and what follow printed summed up per CPU by awk
/// (the guest is busybox), each on a `crashring-test:` line; then the
/// load goes on for the crash.
pub const STEPS: &str = r#"crashring follow --from-start > /tmp/follow.txt 2> /tmp/follow.err &
follow=$!
insmod /lib/crashring_test.ko action=load
sleep 1
echo 1 > /sys/module/crashring_test/parameters/paused
sleep 1
kill -INT $follow
wait $follow
echo "crashring-test: follow exit $?"
dmesg | grep -o 'load cpu=[0-9]* paused after [0-9]* events' | sed 's/^/crashring-test: /'
sed 's/^/crashring-test: /' /tmp/follow.err
awk '
match($0, /load cpu=[0-9]+ seq=[0-9]+/) {
  split(substr($0, RSTART + 9, RLENGTH - 9), f, / seq=/)
  c = f[1] + 0; s = f[2] + 0
  if ((c in last) && s <= last[c]) disorder[c]++
  last[c] = s; printed[c]++
}
/^\[[0-9]+\] .* events lost \(overwritten\) \*\*$/ {
  c = substr($1, 2, length($1) - 2) + 0
  match($0, /\*\* [0-9]+ events lost/)
  lost[c] += substr($0, RSTART + 3, RLENGTH - 15)
}
END {
  for (c in printed)
    printf "crashring-test: follow cpu %d printed %d last %d disorder %d lost %d\n", c, printed[c], last[c], disorder[c] + 0, lost[c] + 0
}' /tmp/follow.txt
# What else follow printed, if anything: the load and its losses should
# be all (a check that fails shows these lines).
grep -v -E 'load cpu=[0-9]+ seq=[0-9]+|events lost \(overwritten\)' /tmp/follow.txt | head -n 5 | sed 's/^/crashring-test: follow other /'
echo 0 > /sys/module/crashring_test/parameters/paused
"#;

/// One CPU's numbers: what its thread wrote, what follow said it handed
/// over and missed, and what its output holds.
#[derive(Debug, Default)]
struct Cpu {
    wrote: Option<u64>,
    handed: Option<u64>,
    missed: Option<u64>,
    /// Whether follow could only say it missed at least that many.
    missed_at_least: bool,
    /// Printed, the last seq printed, out-of-order events, lost per the
    /// loss items.
    printed: Option<(u64, u64, u64, u64)>,
}

/// The guest's lines after `crashring-test: `.
fn said(log: &str) -> impl Iterator<Item = &str> {
    log.lines().filter_map(|l| {
        l.split_once("crashring-test: ")
            .map(|(_, rest)| rest.trim())
    })
}

fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Checks what [`STEPS`] said for a guest of `cpus` CPUs; a summary.
pub fn check(log: &str, cpus: u32) -> Result<String> {
    let mut per: BTreeMap<u64, Cpu> = BTreeMap::new();
    let mut exit = None;
    let mut other = Vec::new();
    for line in said(log) {
        if let Some(rest) = line.strip_prefix("follow exit ") {
            exit = rest.parse::<i32>().ok();
        } else if let Some(rest) = line.strip_prefix("follow other ") {
            other.push(rest);
        } else if line.starts_with("load cpu=") && line.contains(" paused after ") {
            if let [cpu, n] = numbers(line)[..] {
                per.entry(cpu).or_default().wrote = Some(n);
            }
        } else if let Some(rest) = line.strip_prefix("crashring: followed cpu") {
            // "C: H events printed or filtered, M missed (...)", for lane
            // 0's stream; the nesting lanes' ("C.laneL: ...") hold nothing.
            let Some((cpu, counts)) = rest.split_once(": ") else {
                continue;
            };
            if let (Ok(cpu), [handed, missed, ..]) = (cpu.parse(), &numbers(counts)[..]) {
                let c = per.entry(cpu).or_default();
                (c.handed, c.missed) = (Some(*handed), Some(*missed));
                c.missed_at_least = counts
                    .split(" missed")
                    .next()
                    .is_some_and(|before| before.contains("at least"));
            }
        } else if let Some(rest) = line.strip_prefix("follow cpu ") {
            if let [cpu, printed, last, disorder, lost] = numbers(rest)[..] {
                per.entry(cpu).or_default().printed = Some((printed, last, disorder, lost));
            }
        }
    }
    let exit = exit.context("follow's exit status was not said")?;
    let mut lines = Vec::new();
    let mut missed_any = false;
    for cpu in 0..u64::from(cpus) {
        let c = per
            .get(&cpu)
            .with_context(|| format!("nothing said of cpu{cpu}"))?;
        let wrote = c
            .wrote
            .with_context(|| format!("cpu{cpu}'s thread did not say it paused: {c:?}"))?;
        let (Some(handed), Some(missed)) = (c.handed, c.missed) else {
            anyhow::bail!("follow's summary on SIGINT has no cpu{cpu}: {c:?}");
        };
        ensure!(
            !c.missed_at_least,
            "cpu{cpu}: follow could only say it missed at least {missed}"
        );
        let (printed, last, disorder, lost) = c.printed.unwrap_or_default();
        ensure!(
            disorder == 0,
            "cpu{cpu}: {disorder} events printed out of order"
        );
        ensure!(
            printed == handed,
            "cpu{cpu}: {printed} events printed, follow says it handed over {handed}; the lines it printed that are neither the load nor a loss: {other:?}"
        );
        ensure!(
            lost == missed,
            "cpu{cpu}: the loss items count {lost} missed, the summary {missed}"
        );
        ensure!(
            handed + missed == wrote,
            "cpu{cpu}: {handed} printed + {missed} missed, but its thread wrote {wrote}"
        );
        ensure!(
            printed == 0 || last + 1 == wrote,
            "cpu{cpu}: the last event printed is seq {last}, the thread's last {}",
            wrote - 1
        );
        missed_any |= missed > 0;
        lines.push(format!("cpu{cpu} {handed} + {missed} = {wrote}"));
    }
    ensure!(
        exit == i32::from(missed_any),
        "follow exited {exit}, expected {} (it missed {}events)",
        i32::from(missed_any),
        if missed_any { "" } else { "no " }
    );
    Ok(format!(
        "follow, interrupted, printed + missed = written: {}",
        lines.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAID: &str = "crashring-test: follow exit 1
crashring-test: load cpu=0 paused after 100 events
crashring-test: load cpu=1 paused after 50 events
crashring-test: crashring: followed cpu0: 90 events printed or filtered, 10 missed (written over before they were read)
crashring-test: crashring: followed cpu1: 50 events printed or filtered, 0 missed (written over before they were read)
crashring-test: crashring: followed cpu0.lane1: 0 events printed or filtered, 0 missed (written over before they were read), 0 dropped by its writer
crashring-test: follow cpu 0 printed 90 last 99 disorder 0 lost 10
crashring-test: follow cpu 1 printed 50 last 49 disorder 0 lost 0
";

    #[test]
    fn counts_that_add_up_pass_and_any_that_do_not_fail() {
        assert_eq!(
            check(SAID, 2).unwrap(),
            "follow, interrupted, printed + missed = written: cpu0 90 + 10 = 100, cpu1 50 + 0 = 50"
        );
        for (from, to) in [
            ("paused after 50", "paused after 51"),
            ("disorder 0 lost 10", "disorder 1 lost 10"),
            ("lost 10", "lost 9"),
            ("last 49", "last 48"),
            ("follow exit 1", "follow exit 0"),
            ("10 missed", "at least 10 missed"),
            (
                "crashring-test: crashring: followed cpu1",
                "crashring-test: crashring: followed cpu7",
            ),
        ] {
            let broken = SAID.replace(from, to);
            assert!(check(&broken, 2).is_err(), "{from} -> {to} passed");
        }
        assert!(check(SAID, 3).is_err(), "a CPU said nothing of passed");
    }

    #[test]
    fn an_event_printed_that_is_not_the_load_is_shown() {
        let said = SAID.replace("printed 90 last", "printed 89 last")
            + "crashring-test: follow other [000] 1.000000000: clock: wall_offset_ns=5\n";
        let err = format!("{:#}", check(&said, 2).unwrap_err());
        assert!(
            err.contains("89 events printed") && err.contains("clock: wall_offset_ns=5"),
            "{err}"
        );
    }
}
