//! `crashring`: recover ordered per-CPU traces from dumps, persistent
//! memory and region copies.
//!
//! Exit status: 0 everything intact; 1 recovered, with losses or damage;
//! 2 nothing recovered, or the input could not be read.

mod cmd;

use clap::{Parser, Subcommand};
use cmd::{bundle::BundleArgs, extract::ExtractArgs, InputArgs};
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

const INPUTS: &str = "\
INPUTS (recognised by their contents, never by name):
  ELF64 cores       /proc/vmcore, makedumpfile -E, QEMU dump-guest-memory (elf)
  kdump-compressed  makedumpfile -c/-l/-p/-z, QEMU kdump-raw-* (zlib, lzo, snappy, zstd)
  flattened         makedumpfile -F, QEMU kdump-zlib/lzo/snappy (no -R step needed)
  raw images        a copy of /sys/kernel/crashring/previous, a pmem backing file,
                    a QEMU memory-backend file, /dev/pmemN, /dev/daxN.M,
                    /dev/mem (with --phys); byte N is physical address N
Regions are found by scanning all memory the dump holds for the region magic,
unless --phys gives the address. Pages a dump filtered out or lost are
reported as such and never decoded.

EXAMPLES:
  crashring extract /var/crash/202611211200/dump.202611211200
  crashring extract vmcore --format jsonl --cpu 2 --since 120.5 -o cpu2.jsonl
  crashring info --json guest-memory.elf
  crashring dmesg vmcore            (the kernel's own log, armed or not)
  crashring pstore vmcore --ramoops 0x7f000000:1M,record=64K -o pstore/
  crashring ftrace vmcore --ftrace-formats events-6.12/   (trace_instance= buffers)
  crashring extract /dev/mem --phys 0x40000000:16M     (in a kdump kernel)
  crashring verify /sys/kernel/crashring/previous && echo intact
  crashring extract vmcore --format ctf -o trace-ctf        (babeltrace2 trace-ctf)
  crashring extract vmcore --format perfetto -o crash.pftrace  (ui.perfetto.dev)
  crashring extract vmcore --format tracedat -o trace.dat   (trace-cmd report, KernelShark)
  crashring bundle vmcore -o crash.tar.gz --add-log weston-timeline.json \
      --add-log journal.json:journal-prev-boot.json --redact printk=input:

EXIT STATUS: 0 intact; 1 recovered with losses or damage; 2 nothing found or
the input could not be read.";

const BUNDLE_HELP: &str = "\
LOGS: lines are placed on the trace's clock (the crashed kernel's
CLOCK_MONOTONIC) when they are Weston timeline JSON ({\"T\":[s,ns],...}),
journal JSON (journalctl -o json: monotonic time for the same boot, else
wall-clock time), or start with [seconds] (a serial console, dmesg,
journalctl -o short-monotonic; aligned by the kernel messages they share
with the trace). MANIFEST.json says how each log was placed.

REDACTION: every file, logs included. A log's kernel messages (bracketed
console or dmesg lines, journal entries with _TRANSPORT=kernel) meet the
printk classes as printk events do. Unless --raw-pointers, kernel
addresses (16 hex digits from 0xffff000000000000 in 64-bit regions, 8 from
0xbf000000 in 32-bit ones) are hashed with one key per bundle, and oops
Code: bytes are masked. README.txt in the bundle says exactly what.

EXAMPLES:
  crashring bundle /var/crash/202611211200/dump.202611211200 -o crash.tar.gz
  crashring bundle /sys/kernel/crashring/previous -o crash.tar.gz \\
      --add-log weston-timeline.json --add-log serial.log:console.txt \\
      --redact printk=input: --redact drm_flip.connector
  tar -xzf crash.tar.gz && cd crash-*/ && sha256sum -c <(jq -r '.files[] | \"\\(.sha256)  \\(.path)\"' MANIFEST.json)";

const EXPORT_HELP: &str = "\
EXAMPLES:
  crashring export --sentry-envelope out/ crash.tar.gz && sentry-cli send-envelope out/*.envelope
  crashring export --parquet fleet/ /srv/bundles/
  duckdb -c \"SELECT signature, kernel_release, count(*) FROM
      read_parquet('fleet/crashes-v1/*/*.parquet', hive_partitioning = true)
      GROUP BY ALL ORDER BY 3 DESC\"

extractor/SCHEMAS.md documents both tables and the envelopes.";

#[derive(Parser)]
#[command(
    name = "crashring",
    version,
    about = "Recover crash-persistent traces from dumps, persistent memory and region copies",
    after_help = INPUTS
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every event of every region found, merged in time order.
    #[command(after_help = INPUTS)]
    Extract(ExtractArgs),
    /// Print the crashed kernel's own printk log from a dump with
    /// VMCOREINFO (a vmcore, a makedumpfile or QEMU dump), whether
    /// crashring was armed or not, as dmesg prints it or as JSON lines;
    /// stderr says how many records could not be read.
    #[command(after_help = INPUTS)]
    Dmesg(cmd::dmesg::DmesgArgs),
    /// Print pstore/ramoops records (crash reports, the console log, pmsg,
    /// function traces) from a dump or an image, by the parameters ramoops
    /// was given, or write them as /sys/fs/pstore names them; stderr says
    /// what each zone holds.
    #[command(after_help = INPUTS)]
    Pstore(cmd::pstore::PstoreArgs),
    /// Print the kernel's own persistent ftrace buffer (trace_instance= in
    /// reserved memory, Linux 6.12+) from a dump or an image, every CPU
    /// merged in time order; stderr says what each CPU held and which
    /// sub-buffers were lost and why.
    #[command(after_help = INPUTS)]
    Ftrace(cmd::ftrace::FtraceArgs),
    /// Describe the input, every region (header, state, pages, losses) and
    /// what the kernel kept itself: its printk log when the dump has one,
    /// its persistent ftrace buffers, and its ramoops zones (--ramoops).
    #[command(after_help = INPUTS)]
    Info {
        #[command(flatten)]
        input: InputArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// List every stream, the empty ones too, and every page slot (a run
        /// of absent slots on one line).
        #[arg(long)]
        pages: bool,
        /// Also list the pstore/ramoops zones where these parameters put
        /// them (as `crashring pstore` takes them).
        #[arg(
            long,
            value_name = "ADDR:SIZE[,record=N][,console=N][,ftrace=N][,pmsg=N][,cpus=N][,ecc=N]"
        )]
        ramoops: Option<extractor::foreign::ramoops::Layout>,
    },
    /// Make a bug-report bundle: a .tar.gz with MANIFEST.json (checksums,
    /// per-CPU counts, crash), README.txt, dmesg.txt, CTF, trace.dat, a
    /// Perfetto archive, and added logs on the same timeline. Kernel
    /// addresses are hashed unless --raw-pointers.
    #[command(after_help = BUNDLE_HELP)]
    Bundle(BundleArgs),
    /// Export bundles for a fleet's tools: one Parquet dataset for
    /// DuckDB, Spark, Trino, ClickHouse or BigQuery (a crashes table, a
    /// row per crash: host, boot, kernel, time, reason, signature, counts;
    /// an events table, a row per event or loss), or a Sentry envelope
    /// per bundle. Each bundle is checked first; one that is not intact is
    /// named and left out. Exit 0 all exported, 1 some left out.
    #[command(after_help = EXPORT_HELP)]
    Export(cmd::export::ExportArgs),
    /// Bundle the recorder as it runs, without a crash: the generation
    /// being recorded, read from /dev/crashring-current (root only) without
    /// stopping its writers, as `bundle` would, its manifest saying it is a
    /// snapshot, who asked and why.
    Snapshot(cmd::snapshot::SnapshotArgs),
    /// Print the recorder's events as they are written (root only), like
    /// trace_pipe but consuming nothing: each poll reads
    /// /dev/crashring-current from where it left off, and a stream whose
    /// writer went past it gets a line saying exactly how many events it
    /// missed. Exit 1 if any were.
    Follow(cmd::follow::FollowArgs),
    /// Ask crashring-request.socket for a bug report of your own session
    /// without a crash (as crashring_request_report() does): your own
    /// streams and the kernel events crashring.conf's [Request] grants,
    /// redacted, written by the service into the bundle directory.
    /// Prints the bundle's name; exit 75 when rate-limited.
    Report(cmd::report::ReportArgs),
    /// Serve one connection to crashring-request.socket, given as standard
    /// input (what crashring-request@.service runs).
    ServeRequest(cmd::serve_request::ServeRequestArgs),
    /// Check a bundle as its recipient: every entry is a regular file or
    /// directory inside its one top directory (no link, device, absolute
    /// or `..` path), every file the manifest lists is there with its size
    /// and SHA-256, nothing else is, and the README names them all. Exit 0
    /// intact, 1 not, 2 unreadable.
    CheckBundle {
        /// A .tar.gz made by `crashring bundle`.
        archive: PathBuf,
    },
    /// Check the input: exit 0 intact, 1 recovered with damage, 2 nothing.
    #[command(after_help = INPUTS)]
    Verify {
        #[command(flatten)]
        input: InputArgs,
    },
    /// Make this machine record across crashes: reserve a range of RAM at
    /// every boot (x86: memmap=, placed from /proc/iomem; arm64:
    /// reserve_mem=, 6.11+) on the command line of GRUB, kernel-install
    /// or grubby, and load the module over it with
    /// crash_kexec_post_notifiers on. Root only; runs the boot loader's
    /// tool (update-grub, kernel-install add, grubby).
    Arm(cmd::arm::ArmArgs),
    /// Archive every generation the module keeps (what
    /// crashring-recover.service runs at boot): each a bundle in the bundle
    /// directory with a .json summary, checked, then acknowledged; on any
    /// failure it stays in the region. Retention per
    /// /etc/crashring/crashring.conf; new bundles are spooled for OnBundle=.
    Recover(cmd::recovery::RecoverArgs),
    /// Hand every spooled bundle to the OnBundle= command (what
    /// crashring-upload.service runs once the network is up), each within
    /// a timeout; a failed one stays spooled, and the exit status is 1.
    Upload(cmd::upload::UploadArgs),
    /// Undo exactly what arm wrote (files marked as its own, the words it
    /// added), then run the boot loader's tool; refused while a generation
    /// waits unarchived in the range, unless --force.
    Disarm(cmd::arm::DisarmArgs),
    /// Kernel debug messages (DRM's categories, dynamic debug's callsites)
    /// diverted into the recorder instead of printk: show, list, select,
    /// clear; --persist keeps the choice across boots.
    Debug(cmd::debug::DebugArgs),
    /// Armed or not, the region and its generation, an unarchived
    /// previous one, the last bundle, and what a crash now would leave.
    Status {
        /// The system tree to look at.
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
    /// The manual page or a shell's completions, for packaging.
    #[command(hide = true)]
    Generate {
        #[arg(value_enum)]
        what: Generated,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Generated {
    Man,
    Bash,
    Zsh,
    Fish,
}

/// Writes the manual page or a shell's completions to stdout.
fn generate(what: Generated) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    let out = &mut io::stdout();
    let shell = match what {
        Generated::Man => {
            clap_mangen::Man::new(cli).render(out)?;
            return Ok(0);
        }
        Generated::Bash => clap_complete::Shell::Bash,
        Generated::Zsh => clap_complete::Shell::Zsh,
        Generated::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut cli, "crashring", out);
    Ok(0)
}

fn main() -> ExitCode {
    let done = match Cli::parse().cmd {
        Cmd::Extract(args) => cmd::extract::run(args),
        Cmd::Info {
            input,
            json,
            pages,
            ramoops,
        } => cmd::info::run(&input, json, pages, ramoops.as_ref()),
        Cmd::Bundle(args) => cmd::bundle::run(args),
        Cmd::Export(args) => cmd::export::run(args),
        Cmd::Snapshot(args) => cmd::snapshot::run(args),
        Cmd::Follow(args) => cmd::follow::run(args),
        Cmd::Report(args) => cmd::report::run(args),
        Cmd::ServeRequest(args) => cmd::serve_request::run(args),
        Cmd::CheckBundle { archive } => cmd::check_bundle::run(&archive),
        Cmd::Verify { input } => cmd::verify::run(&input),
        Cmd::Arm(args) => cmd::arm::arm(args),
        Cmd::Recover(args) => cmd::recovery::run(args),
        Cmd::Upload(args) => cmd::upload::run(args),
        Cmd::Disarm(how) => cmd::arm::disarm(how),
        Cmd::Debug(args) => cmd::debug::run(args),
        Cmd::Dmesg(args) => cmd::dmesg::run(args),
        Cmd::Pstore(args) => cmd::pstore::run(args),
        Cmd::Ftrace(args) => cmd::ftrace::run(args),
        Cmd::Status { root } => cmd::arm::status(root),
        Cmd::Generate { what } => generate(what),
    };
    match done {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if err
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("crashring: {err:#}");
            ExitCode::from(2)
        }
    }
}
