//! The checks beyond the scenarios: `cargo xtask test` (every check
//! there is, hermetic and QEMU) and `bench`, here; mutation testing
//! (`mutants`, run by hand); and the tidy tests (`tidy`, rules about the
//! source tree, run by `cargo test`).
//!
//! Import rule: the children import nothing from one another; the
//! environment and the scenarios are used through their modules
//! (`crate::env`, `crate::scenarios`).

use crate::env::{guest, setup};
use crate::scenarios;
use anyhow::Result;
use beside::{Beside, Check};
use std::path::PathBuf;
use xshell::{cmd, Shell};

mod beside;
pub mod campaign;
mod capture_cost;
mod kernel_cost;
pub mod mutants;
pub mod package;
#[cfg(test)]
mod tidy;

fn step(what: &str) {
    eprintln!("\n== xtask: {what}");
}

/// Builds crashring.ko for every kernel (warnings fail) and runs
/// checkpatch on every file of the module.
fn kernel_checks(sh: &Shell) -> Result<()> {
    for series in guest::SERIES {
        let k = guest::kernel(series)?;
        step(&format!(
            "crashring.ko and the test modules build warning-free against {}",
            k.release
        ));
        guest::build_module(sh, &k)?;
        guest::build_test_modules(sh, &k)?;
    }
    step("checkpatch.pl --no-tree on kernel/ and kernel/test/");
    let checkpatch = setup::CHECKPATCH;
    // The test module times ftrace's trace_printk() and trace_puts()
    // against crashring's writer: only there are they allowed.
    for (dir, ignore) in [("kernel", "NONE"), ("kernel/test", "TRACE_PRINTK")] {
        let files: Vec<PathBuf> = std::fs::read_dir(sh.current_dir().join(dir))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "h"))
            .collect();
        cmd!(
            sh,
            "perl {checkpatch} --no-tree --terse --quiet --ignore {ignore} -f {files...}"
        )
        .run()?;
    }
    Ok(())
}

/// `cargo xtask test`: formatting, lints, the no_std build, the fuzz
/// targets, the workspace's tests, the kernel module's builds and
/// checkpatch, and every QEMU scenario on each kernel it runs on. What
/// boots nothing and builds nothing the scenarios use runs beside them
/// ([`beside`]), and the Debian guests' root file systems are built
/// while the busybox scenarios run.
pub fn test(sh: &Shell) -> Result<()> {
    step("setup: install what the tests need");
    setup::run(sh)?;
    step("cargo fmt --check");
    cmd!(sh, "cargo fmt --all --check").run()?;
    kernel_checks(sh)?;
    step("Debian packages: cargo xtask package, lintian");
    package::run(sh)?;
    let log = crate::env::work_dir(sh).join("beside-the-scenarios.log");
    step(&format!(
        "beside the scenarios, niced: {} (log in {})",
        host_checks()
            .iter()
            .map(|c| c.what.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        log.display()
    ));
    let mut beside = Beside::start(&sh.current_dir(), log, host_checks())?;
    let debian = scenarios::prepare_debian(sh)?;
    let mut times = Vec::new();
    for scenario in scenarios::SCENARIOS {
        for series in guest::SERIES {
            if let Some(why) = scenario.skips(series) {
                eprintln!("{} does not run on {series}: {why}", scenario.name);
                continue;
            }
            beside.poll()?;
            step(&format!("QEMU scenario {} on {series}", scenario.name));
            let started = std::time::Instant::now();
            scenarios::run(sh, scenario.name, series, None)?;
            times.push((scenario.name, series, started.elapsed()));
        }
    }
    println!("\nscenario wall times (builds included):");
    for (name, series, took) in &times {
        println!("  {name:<24} {series:<10} {:>6.1} s", took.as_secs_f64());
    }
    println!("{} passed, 0 failed", times.len());
    debian
        .join()
        .map_err(|_| anyhow::anyhow!("building the Debian root file system panicked"))?;
    step(&format!(
        "crash campaign, a fixed batch: {CAMPAIGN_BATCH} runs from seed {CAMPAIGN_SEED}"
    ));
    campaign::run(sh, CAMPAIGN_BATCH, CAMPAIGN_SEED)?;
    step("the checks beside the scenarios");
    for (what, took) in beside.finish()? {
        println!("  {what:<40} {:>6.1} s", took.as_secs_f64());
    }
    Ok(())
}

/// The checks that run beside the scenarios: each a command whose exit
/// status is the check.
fn host_checks() -> Vec<Check> {
    let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
    let mut checks = vec![
        Check {
            what: "cargo clippy (all targets, warnings are errors)".into(),
            argv: argv("cargo clippy --workspace --all-targets --quiet -- -D warnings"),
            env: vec![],
        },
        Check {
            what: "pstore-ring builds with no_std and no allocator".into(),
            argv: argv("cargo build --quiet -p pstore-ring --no-default-features"),
            env: vec![],
        },
    ];
    // The fuzz targets: workspaces of their own, outside the checks above.
    for dir in ["pstore-ring/fuzz", "extractor/fuzz"] {
        let manifest = format!("{dir}/Cargo.toml");
        checks.push(Check {
            what: format!("{dir} is formatted"),
            argv: argv(&format!("cargo fmt --check --manifest-path {manifest}")),
            env: vec![],
        });
        checks.push(Check {
            what: format!("{dir}'s targets build"),
            argv: argv(&format!(
                "cargo check --quiet --locked --bins --manifest-path {manifest}"
            )),
            env: vec![],
        });
    }
    checks.push(Check {
        what: "cargo test --workspace".into(),
        argv: argv("cargo test --workspace"),
        // The readers are installed by now: a test missing one fails, not
        // skips.
        env: vec![("CRASHRING_REQUIRE_READERS", "1")],
    });
    // The limits at full size: an optimized build extracts a dense 4 GiB
    // region (a debug build, 512 MiB). A target directory of its own, so
    // that the scenarios' release builds never wait on its lock.
    checks.push(Check {
        what: "extractor limits, optimized: a 4 GiB region under 256 MiB".into(),
        argv: argv("cargo test --release --quiet -p extractor --test limits"),
        env: vec![("CARGO_TARGET_DIR", "target/optimized-tests")],
    });
    checks
}

/// The campaign runs `cargo xtask test` makes (seeds 9 to 12: BUG() on
/// 6.12 and 6.1, a panic in NMI context, an oops; nesting writers and
/// not; 2 to 8 CPUs). The other ways down have scenarios of their own.
const CAMPAIGN_BATCH: u64 = 4;
const CAMPAIGN_SEED: u64 = 9;

/// `cargo xtask bench`: the ring writer and reader, the user-space writer
/// against LTTng-UST, the kernel ring code, the extractor's scan, decode
/// and memory, each against a baseline; then the kernel writer against
/// ftrace's in one guest; `kernel_only`: that last part alone.
pub fn bench(sh: &Shell, kernel_only: bool) -> Result<()> {
    if kernel_only {
        return kernel_cost::run(sh);
    }
    cmd!(sh, "cargo bench -p pstore-ring --bench ring").run()?;
    cmd!(sh, "cargo bench -p crashring-user --bench user").run()?;
    cmd!(sh, "cargo bench -p extractor --bench extract").run()?;
    cmd!(sh, "cargo bench -p qemu-tests --bench c_ring").run()?;
    kernel_cost::run(sh)?;
    capture_cost::run(sh)
}
