//! `cargo xtask`: crashring's harness.
//!
//! One binary, one `Shell` rooted at the workspace, one function per
//! subcommand. Commands are built with `cmd!`, so every value is its own
//! argv entry and nothing goes through `sh -c`.
//!
//! `setup` installs what everything needs; `test` runs the hermetic checks,
//! builds the kernel module for both kernels, runs checkpatch and boots
//! every QEMU scenario on both; `demo` is one scenario with a human summary;
//! `mutants` is mutation testing, run by hand.

mod checks;
mod codegen;
#[cfg(test)]
mod cside;
mod env;
#[cfg(test)]
#[path = "../../pstore-ring/golden/scenario.rs"]
mod golden_scenario;
#[cfg(test)]
#[path = "../../pstore-ring/tests/common/mod.rs"]
mod ring_model;
mod scenarios;

use anyhow::Result;
use checks::mutants;
use clap::{Parser, Subcommand};
use codegen::{cheader, formatdoc};
use env::{guest, setup};
use scenarios::demo;
use std::path::PathBuf;
use xshell::{cmd, Shell};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "crashring's build, test and demo harness"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what the rest needs (root): bookworm-backports, QEMU 10,
    /// the 6.12 and 6.1 kernels with headers, busybox, kexec-tools,
    /// makedumpfile, babeltrace2, trace-cmd.
    Setup,
    /// Run every test: formatting, lints, the no_std build, the whole
    /// workspace's tests (property, corruption, golden and fuzz-regression
    /// tests included).
    Test,
    /// The main job: install, boot a real kernel in QEMU with crashring.ko,
    /// crash it, recover the trace on the next boot, and summarise it.
    Demo,
    /// Regenerate pstore-ring's golden images and their decoded text.
    BlessGolden,
    /// Build crashring.ko for both kernels and the guest's crashring.
    Build,
    /// List the QEMU scenarios.
    List,
    /// Run one QEMU scenario.
    Scenario {
        name: String,
        /// 6.12 (backports) or 6.1 (stock bookworm).
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// Keep the serial log, disk images and outputs in this directory.
        #[arg(long)]
        keep: Option<PathBuf>,
    },
    /// Regenerate kernel/crashring_format.h, crashring_schema.h and
    /// FORMAT.md's tables from pstore-ring.
    GenHeader,
    /// Run the benchmarks (ring writer and reader, the kernel ring code, the
    /// extractor's scan, decode and memory), each against a baseline.
    Bench,
    /// Mutation testing, hours on two cores (so not part of `test`):
    /// cargo-mutants (installed if missing) over the format's reader and
    /// writer and the extractor's containers (.cargo/mutants.toml), each
    /// mutant against its package's hermetic tests and survivors against
    /// the workspace's; then hand-written mutations of
    /// kernel/crashring_ring.c against its user-space tests. Prints the
    /// kill rate per file and the survivors, also written to
    /// target/crashring/mutants/summary.txt.
    Mutants {
        /// Only mutate files matching this glob (repeatable);
        /// `kernel/crashring_ring.c` selects the hand-written C mutations.
        #[arg(long = "file", value_name = "GLOB")]
        files: Vec<String>,
        /// Passed on to cargo-mutants' first pass, e.g. `-- --shard 1/4`.
        #[arg(last = true)]
        extra: Vec<String>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let sh = Shell::new()?;
    sh.change_dir(project_root());
    match cli.cmd {
        Cmd::Setup => setup::run(&sh).map(drop),
        Cmd::Test => test(&sh),
        Cmd::Demo => demo::run(&sh),
        Cmd::BlessGolden => {
            let _env = sh.push_env("UPDATE_GOLDEN", "1");
            cmd!(sh, "cargo test -p pstore-ring --test golden").run()?;
            Ok(())
        }
        Cmd::Build => {
            for series in ["6.12", "6.1"] {
                let k = guest::kernel(series)?;
                let ko = guest::build_module(&sh, &k)?;
                eprintln!("built {}", ko.display());
            }
            let bin = guest::build_guest_crashring(&sh)?;
            eprintln!("built {}", bin.display());
            Ok(())
        }
        Cmd::List => {
            for s in scenarios::SCENARIOS {
                println!("{:<24} {}", s.name, s.about);
            }
            Ok(())
        }
        Cmd::Scenario { name, kernel, keep } => {
            let series = match kernel.as_str() {
                "6.12" => "6.12",
                "6.1" => "6.1",
                other => anyhow::bail!("--kernel {other}: use 6.12 or 6.1"),
            };
            run_scenario(&sh, &name, series, keep).map(drop)
        }
        Cmd::GenHeader => {
            sh.write_file("kernel/crashring_format.h", cheader::generate())?;
            sh.write_file("kernel/crashring_schema.h", cheader::generate_schema())?;
            let spec = formatdoc::update(&sh.read_file(formatdoc::PATH)?)?;
            sh.write_file(formatdoc::PATH, spec)?;
            Ok(())
        }
        Cmd::Bench => {
            cmd!(sh, "cargo bench -p pstore-ring --bench ring").run()?;
            cmd!(sh, "cargo bench -p extractor --bench extract").run()?;
            cmd!(sh, "cargo bench -p qemu-tests --bench c_ring").run()?;
            Ok(())
        }
        Cmd::Mutants { files, extra } => mutants::run(&sh, &files, &extra),
    }
}

fn project_root() -> PathBuf {
    let dir = env!("CARGO_MANIFEST_DIR");
    PathBuf::from(dir)
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(dir))
}

fn step(what: &str) {
    eprintln!("\n== xtask: {what}");
}

/// Runs one scenario and prints its outcome; the files stay in `keep` or,
/// without it, in target/crashring/runs.
fn run_scenario(
    sh: &Shell,
    name: &str,
    series: &'static str,
    keep: Option<PathBuf>,
) -> Result<String> {
    let scenario = scenarios::find(name)?;
    let k = guest::kernel(series)?;
    anyhow::ensure!(
        !scenario.needs_reserve_mem || k.has_reserve_mem(),
        "{name} needs reserve_mem=, which {} lacks",
        k.release
    );
    let kept = keep.is_some();
    let dir = keep.unwrap_or_else(|| {
        guest::work_dir(sh)
            .join("runs")
            .join(format!("{name}-{series}"))
    });
    sh.create_dir(&dir)?;
    let dir = std::fs::canonicalize(&dir)?;
    eprintln!(
        "== scenario {name} on {} (files in {})",
        k.release,
        dir.display()
    );
    let summary = (scenario.run)(sh, &k, &scenarios::Artifacts { dir, kept })
        .map_err(|e| e.context(format!("scenario {name} on {}", k.release)))?;
    println!("PASS {name} [{}]: {summary}", k.release);
    Ok(summary)
}

/// Builds crashring.ko for both kernels (warnings fail) and runs
/// checkpatch on every file of the module.
fn kernel_checks(sh: &Shell) -> Result<()> {
    for series in ["6.12", "6.1"] {
        let k = guest::kernel(series)?;
        step(&format!(
            "crashring.ko and crashring_test.ko build warning-free against {}",
            k.release
        ));
        guest::build_module(sh, &k)?;
        guest::build_test_module(sh, &k)?;
    }
    step("checkpatch.pl --no-tree on kernel/ and kernel/test/");
    let checkpatch = setup::CHECKPATCH;
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["kernel", "kernel/test"] {
        files.extend(
            std::fs::read_dir(sh.current_dir().join(dir))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "h")),
        );
    }
    cmd!(
        sh,
        "perl {checkpatch} --no-tree --terse --quiet -f {files...}"
    )
    .run()?;
    Ok(())
}

fn test(sh: &Shell) -> Result<()> {
    step("setup: install what the tests need");
    setup::run(sh)?;
    step("cargo fmt --check");
    cmd!(sh, "cargo fmt --all --check").run()?;
    step("cargo clippy (all targets, warnings are errors)");
    cmd!(
        sh,
        "cargo clippy --workspace --all-targets --quiet -- -D warnings"
    )
    .run()?;
    step("pstore-ring builds with no_std and no allocator");
    cmd!(
        sh,
        "cargo build --quiet -p pstore-ring --no-default-features"
    )
    .run()?;
    step(
        "fuzz targets are formatted and build (workspaces of their own, outside the checks above)",
    );
    for dir in ["pstore-ring/fuzz", "extractor/fuzz"] {
        let manifest = format!("{dir}/Cargo.toml");
        cmd!(sh, "cargo fmt --check --manifest-path {manifest}").run()?;
        cmd!(
            sh,
            "cargo check --quiet --locked --bins --manifest-path {manifest}"
        )
        .run()?;
    }
    step("cargo test --workspace");
    // The readers are installed by now: a test missing one fails, not skips.
    cmd!(sh, "cargo test --workspace")
        .env("CRASHRING_REQUIRE_READERS", "1")
        .run()?;
    kernel_checks(sh)?;
    let mut times = Vec::new();
    for scenario in scenarios::SCENARIOS {
        for series in ["6.12", "6.1"] {
            if scenario.needs_reserve_mem && series == "6.1" {
                eprintln!(
                    "{} does not run on 6.1: the kernel has no reserve_mem=",
                    scenario.name
                );
                continue;
            }
            step(&format!("QEMU scenario {} on {series}", scenario.name));
            let started = std::time::Instant::now();
            run_scenario(sh, scenario.name, series, None)?;
            times.push((scenario.name, series, started.elapsed()));
        }
    }
    println!("\nscenario wall times (builds included):");
    for (name, series, took) in &times {
        println!("  {name:<24} {series:<5} {:>6.1} s", took.as_secs_f64());
    }
    println!("{} passed, 0 failed", times.len());
    Ok(())
}
