//! `cargo xtask`: crashring's harness.
//!
//! One binary, one `Shell` rooted at the workspace, one function per
//! subcommand. Commands are built with `cmd!`, so every value is its own
//! argv entry and none is spliced into a shell's text.
//!
//! `setup` installs what everything needs; `test` runs the hermetic checks,
//! builds the kernel module for every kernel, runs checkpatch and boots
//! every QEMU scenario on 6.12 and 6.1 (two of them on the newest); `demo` is one scenario with a human summary;
//! `mutants` is mutation testing, run by hand.
//!
//! This file only parses the command line and hands each subcommand to the
//! folder that owns it: `env` (setup, guest images, QEMU), `scenarios`
//! (the QEMU scenario table and its families), `codegen` (the files
//! generated from pstore-ring), `cside` (the kernel's ring code built for
//! user space, and its tests) and `checks` (the whole suite, benchmarks,
//! mutation testing, tidy tests). A module imports from its parent, from
//! its own children, or from another folder through that folder's
//! `mod.rs`; never from a sibling.

mod checks;
mod codegen;
#[cfg(test)]
mod cside;
mod env;
mod scenarios;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use xshell::Shell;

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
    /// the 6.12 and 6.1 kernels with headers, the newest kernel Debian
    /// ships (in a Debian 13 build root), busybox, kexec-tools,
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
    /// Build crashring.ko for every kernel and the guest's crashring.
    Build,
    /// List the QEMU scenarios.
    List,
    /// Run one QEMU scenario.
    Scenario {
        name: String,
        /// 6.12 (bookworm-backports), 6.1 (stock bookworm) or newest (the
        /// newest kernel Debian ships, from trixie-backports).
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// Keep the serial log, disk images and outputs in this directory.
        #[arg(long)]
        keep: Option<PathBuf>,
    },
    /// Regenerate kernel/crashring_format.h, crashring_schema.h and
    /// FORMAT.md's tables from pstore-ring.
    GenHeader,
    /// Build the Debian packages crashring and crashring-dkms (cargo-deb,
    /// installed if missing) into target/crashring/package, and check them
    /// with lintian.
    Package,
    /// Run the benchmarks (ring writer and reader, the kernel ring code, the
    /// extractor's scan, decode and memory), each against a baseline.
    Bench {
        /// Only the kernel's costs, measured in guests (the writer against
        /// ftrace's, debug messages, user streams, printk capture).
        #[arg(long)]
        kernel: bool,
    },
    /// Crashes at random moments under full load, each run drawn from a
    /// seed (kernel, CPUs, page size, sources, load, the way down: sysrq,
    /// hard IRQ, NMI, BUG, oops, lockup, hung task), each checked for
    /// exactness; prints a table by crash kind and kernel, and the seed
    /// that replays each failure.
    Campaign {
        #[arg(long, default_value_t = 100)]
        runs: u64,
        /// Run i uses seed + i.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
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
    sh.change_dir(env::project_root());
    match cli.cmd {
        Cmd::Setup => env::setup::run(&sh).map(drop),
        Cmd::Test => checks::test(&sh),
        Cmd::Demo => scenarios::demo::run(&sh),
        Cmd::BlessGolden => codegen::bless_golden(&sh),
        Cmd::Build => env::guest::build_all(&sh),
        Cmd::List => {
            scenarios::list();
            Ok(())
        }
        Cmd::Scenario { name, kernel, keep } => scenarios::run(&sh, &name, &kernel, keep).map(drop),
        Cmd::GenHeader => codegen::gen_header(&sh),
        Cmd::Bench { kernel } => checks::bench(&sh, kernel),
        Cmd::Package => {
            env::setup::run(&sh)?;
            checks::package::run(&sh).map(drop)
        }
        Cmd::Campaign { runs, seed } => checks::campaign::run(&sh, runs, seed),
        Cmd::Mutants { files, extra } => checks::mutants::run(&sh, &files, &extra),
    }
}
