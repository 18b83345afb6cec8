//! `cargo xtask campaign`: crashes at random moments under full load, each
//! run drawn from a seed (kernel, CPU count, page size, sources, load mix,
//! the way down), each checked for exactness by
//! [`crashes::check_exact`]: per-writer order, nothing invented or
//! duplicated, losses only where pages were overwritten plus the records in
//! flight, the crash record last on its CPU with the right reason.

use crate::env::{guest, work_dir};
use crate::scenarios::crashes::{self, Exactness, NESTED_WRITERS};
use crate::scenarios::{parse_saved, warm_reboot_run, Artifacts, WarmReboot};
use anyhow::Result;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use xshell::Shell;

/// splitmix64: a whole run follows from its seed, so a failure's seed
/// replays it (`cargo xtask campaign --runs 1 --seed S`).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len() as u64) as usize]
    }
}

/// A way down: what crashring_test.ko's `crash=` is (none for sysrq), what
/// the command line arms, what the panic says.
struct Crash {
    name: &'static str,
    module_crash: Option<&'static str>,
    append: &'static str,
    panic: &'static [&'static str],
    /// Needs a second CPU (one that locks up, or one to send the NMI to).
    needs_two_cpus: bool,
    /// The other CPUs' writers may stop before the end: a CPU that waits
    /// for the locked one (a cross-CPU call) runs only its interrupts, whose
    /// events may then overwrite all of its thread's. Their events are
    /// still checked; that each writer has some left is not.
    writers_may_stall: bool,
}

const CRASHES: &[Crash] = &[
    Crash {
        name: "sysrq",
        module_crash: None,
        append: "",
        panic: &["sysrq triggered crash"],
        needs_two_cpus: false,
        writers_may_stall: false,
    },
    Crash {
        name: "irq",
        module_crash: Some("irq"),
        append: "",
        panic: &["crashring-test: panic in hard IRQ context"],
        needs_two_cpus: false,
        writers_may_stall: false,
    },
    Crash {
        name: "nmi",
        module_crash: Some("nmi"),
        append: "",
        panic: &["crashring-test: panic in NMI context"],
        needs_two_cpus: true,
        writers_may_stall: false,
    },
    Crash {
        name: "bug",
        module_crash: Some("bug"),
        append: "oops=panic",
        panic: &["Fatal exception"],
        needs_two_cpus: false,
        writers_may_stall: false,
    },
    Crash {
        name: "oops",
        module_crash: Some("oops"),
        append: "oops=panic",
        panic: &["Fatal exception"],
        needs_two_cpus: false,
        writers_may_stall: false,
    },
    Crash {
        name: "lockup",
        module_crash: Some("lockup"),
        append: crashes::LOCKUP_APPEND,
        panic: crashes::LOCKUP_PANICS,
        needs_two_cpus: true,
        writers_may_stall: true,
    },
    Crash {
        name: "hung",
        module_crash: Some("hung"),
        append: "hung_task_panic=1 sysctl.kernel.hung_task_timeout_secs=2",
        panic: &["hung_task: blocked tasks"],
        needs_two_cpus: false,
        writers_may_stall: false,
    },
];

/// One run, as its seed draws it.
struct Run {
    seed: u64,
    series: &'static str,
    cpus: u32,
    page_size: u32,
    sources: String,
    nested: bool,
    crash: &'static Crash,
    crash_ms: u64,
}

impl Run {
    fn draw(seed: u64) -> Run {
        let mut rng = Rng(seed);
        let series = *rng.pick(&["6.12", "6.1"]);
        let cpus = 1 + rng.below(8) as u32;
        let page_size = *rng.pick(&[1024, 4096, 16384]);
        let mut sources = String::from("marker,crash");
        for optional in ["printk", "sched", "irq"] {
            if rng.below(2) == 1 {
                sources = sources + "," + optional;
            }
        }
        let nested = rng.below(2) == 1;
        let crash = loop {
            let c = rng.pick(CRASHES);
            if cpus > 1 || !c.needs_two_cpus {
                break c;
            }
        };
        let crash_ms = 300 + rng.below(1700);
        Run {
            seed,
            series,
            cpus,
            page_size,
            sources,
            nested,
            crash,
            crash_ms,
        }
    }

    fn describe(&self) -> String {
        format!(
            "seed {} {} {} CPUs, {} B pages, sources {}, {} load, {} at {} ms",
            self.seed,
            self.series,
            self.cpus,
            self.page_size,
            self.sources,
            if self.nested { "nested" } else { "flat" },
            self.crash.name,
            self.crash_ms
        )
    }

    /// The first boot's record phase: the load, then the crash.
    fn record(&self) -> String {
        let action = if self.nested { "nested" } else { "load" };
        let mut script = format!("insmod /lib/crashring_test.ko action={action}");
        if let Some(c) = self.crash.module_crash {
            let _ = write!(script, " crash={c} crash_ms={}", self.crash_ms);
        }
        script += "\n";
        let wait = format!("usleep {}000 2>/dev/null || sleep 1\n", self.crash_ms);
        match self.crash.name {
            "sysrq" => script = script + &wait + "echo c > /proc/sysrq-trigger\n",
            "nmi" => script = script + &wait + "echo l > /proc/sysrq-trigger\n",
            _ => {}
        }
        script + "sleep 120\n"
    }

    fn execute(&self, sh: &Shell) -> Result<String> {
        let k = guest::kernel(self.series)?;
        // Kept if the run fails: the serial log and the saved region.
        let dir = work_dir(sh)
            .join("runs")
            .join("campaign")
            .join(format!("seed-{}", self.seed));
        sh.create_dir(&dir)?;
        let module_args = format!(
            "region=16M@0x40000000 page_size={} sources={}",
            self.page_size, self.sources
        );
        let plan = WarmReboot {
            name: "campaign",
            module_args: &module_args,
            extra_append: self.crash.append,
            test_module: true,
            cpus: self.cpus,
            ..WarmReboot::memmap(self.record())
        };
        let art = Artifacts { dir, kept: false };
        let saved = warm_reboot_run(sh, &k, &art, &plan)?;
        let want = Exactness {
            writers: if self.crash.writers_may_stall {
                &[]
            } else if self.nested {
                NESTED_WRITERS
            } else {
                &["load"]
            },
            nmi_backtraces: false,
            nesting: false,
            panic: self.crash.panic,
        };
        let summary =
            saved.check(|image| crashes::check_exact(&parse_saved(image)?, self.cpus, &want))?;
        sh.remove_path(&art.dir)?;
        Ok(summary)
    }
}

/// Runs `runs` crashes from seeds `seed`, `seed + 1`, ...; prints each
/// result and the table by crash kind and kernel. Fails if any run did.
pub fn run(sh: &Shell, runs: u64, seed: u64) -> Result<()> {
    // (crash, kernel) -> (runs, exact, seeds that failed)
    let mut table = BTreeMap::<(&str, &str), (u32, u32, Vec<u64>)>::new();
    for i in 0..runs {
        let run = Run::draw(seed.wrapping_add(i));
        eprintln!("== campaign run {}/{runs}: {}", i + 1, run.describe());
        let row = table.entry((run.crash.name, run.series)).or_default();
        row.0 += 1;
        match run.execute(sh) {
            Ok(summary) => {
                row.1 += 1;
                println!("EXACT {}: {summary}", run.describe());
            }
            Err(e) => {
                row.2.push(run.seed);
                println!(
                    "FAIL {}: {e:#}\n  replay: cargo xtask campaign --runs 1 --seed {}",
                    run.describe(),
                    run.seed
                );
            }
        }
    }
    println!("\n| crash | kernel | runs | exact | failed (seeds) |\n|---|---|---:|---:|---|");
    let mut failed = 0;
    for ((crash, series), (n, exact, seeds)) in &table {
        failed += seeds.len();
        println!("| {crash} | {series} | {n} | {exact} | {seeds:?} |");
    }
    anyhow::ensure!(failed == 0, "{failed} of {runs} campaign runs failed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hundred_runs_reach_every_way_down_on_both_kernels_and_replay_from_their_seed() {
        let mut seen = BTreeMap::<(&str, &str), u32>::new();
        for seed in 1..=100 {
            let run = Run::draw(seed);
            assert!((1..=8).contains(&run.cpus));
            assert!(
                run.cpus > 1 || !run.crash.needs_two_cpus,
                "{}",
                run.describe()
            );
            assert_eq!(Run::draw(seed).describe(), run.describe());
            *seen.entry((run.crash.name, run.series)).or_default() += 1;
        }
        for c in CRASHES {
            for series in ["6.12", "6.1"] {
                assert!(
                    seen.contains_key(&(c.name, series)),
                    "{} on {series}: {seen:?}",
                    c.name
                );
            }
        }
        let batch: Vec<String> = (0..CAMPAIGN_BATCH_FOR_TEST)
            .map(|i| Run::draw(1 + i).describe())
            .collect();
        eprintln!("{batch:#?}");
    }

    const CAMPAIGN_BATCH_FOR_TEST: u64 = 12;
}
