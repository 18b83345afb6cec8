//! `crashring`: recover ordered per-CPU traces from dumps, persistent
//! memory and region copies.
//!
//! Exit status: 0 everything intact; 1 recovered, with losses or damage;
//! 2 nothing recovered, or the input could not be read.

mod info;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use extractor::bundle::{self, AddLog, Recovered};
use extractor::container::{self, Dump};
use extractor::discover::{self, Found};
use extractor::output::{write_items, Format, NewFile};
use extractor::redact::{Class, Rules};
use extractor::select::{parse_time, Selection};
use extractor::source::{FileSource, Source};
use indicatif::{ProgressBar, ProgressStyle};
use pstore_ring::read::{HeaderTrust, LossKind, Problem, Region, Trace};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

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
    Extract {
        #[command(flatten)]
        input: InputArgs,
        #[arg(long, value_enum, default_value_t = FormatArg::Text)]
        format: FormatArg,
        /// Write here instead of standard output.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
        /// Only this CPU's kernel stream.
        #[arg(long, value_name = "N")]
        cpu: Option<u16>,
        /// Only from this time on (seconds, or 1500ms / 20us / 7ns).
        #[arg(long, value_name = "T", value_parser = parse_time)]
        since: Option<u64>,
        /// Only up to this time.
        #[arg(long, value_name = "T", value_parser = parse_time)]
        until: Option<u64>,
        /// Only events of this type (repeatable): printk, marker, crash, ...
        #[arg(long = "type", value_name = "NAME")]
        types: Vec<String>,
    },
    /// Describe the input and every region: header, state, pages, losses.
    #[command(after_help = INPUTS)]
    Info {
        #[command(flatten)]
        input: InputArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// List every page slot (a run of absent slots on one line).
        #[arg(long)]
        pages: bool,
    },
    /// Make a bug-report bundle: a .tar.gz with MANIFEST.json (checksums,
    /// per-CPU counts, crash), README.txt, dmesg.txt, CTF, trace.dat, a
    /// Perfetto archive, and added logs on the same timeline. Kernel
    /// addresses are hashed unless --raw-pointers.
    #[command(after_help = BUNDLE_HELP)]
    Bundle {
        #[command(flatten)]
        input: InputArgs,
        /// The archive to write (FILE.tar.gz).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Add a log (repeatable), placed on the trace's timeline where its
        /// lines carry times; NAME is its name in the bundle.
        #[arg(long = "add-log", value_name = "PATH[:NAME]", value_parser = AddLog::parse)]
        logs: Vec<AddLog>,
        /// Leave out or hash events (repeatable): TYPE drops its events,
        /// TYPE.FIELD hashes that field, TYPE=PREFIX drops the events whose
        /// text starts with PREFIX (printk=input: for input-device lines).
        #[arg(long, value_name = "CLASS", value_parser = Class::parse)]
        redact: Vec<Class>,
        /// Keep kernel addresses and oops Code: bytes as they are instead
        /// of hashing and masking them.
        #[arg(long)]
        raw_pointers: bool,
    },
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
}

#[derive(Args)]
struct InputArgs {
    /// A dump, an image or a device.
    input: PathBuf,
    /// Read the region at this physical address instead of scanning; SIZE
    /// (bytes, or with K/M/G) overrides the size in its header.
    #[arg(long, value_name = "ADDR[:SIZE]", value_parser = parse_phys)]
    phys: Option<(u64, Option<u64>)>,
    /// Use a region header whose CRC fails (with --phys).
    #[arg(long, requires = "phys")]
    trust_header: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line.
    Jsonl,
    /// A CTF 1.8 trace directory (-o DIR) for babeltrace2 and Trace Compass.
    Ctf,
    /// A Perfetto protobuf trace (.pftrace) for ui.perfetto.dev.
    Perfetto,
    /// Chrome trace event JSON, for ui.perfetto.dev and chrome://tracing.
    Chrome,
    /// trace-cmd's trace.dat (version 6, -o FILE) for trace-cmd and KernelShark.
    Tracedat,
}

impl FormatArg {
    /// The formats written item by item; CTF is a directory of files.
    fn lines(self) -> Option<Format> {
        match self {
            FormatArg::Text => Some(Format::Text),
            FormatArg::Jsonl => Some(Format::Jsonl),
            FormatArg::Chrome => Some(Format::Chrome),
            FormatArg::Perfetto => Some(Format::Perfetto),
            FormatArg::Ctf | FormatArg::Tracedat => None,
        }
    }
}

fn parse_number(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse(),
    };
    value
        .ok()
        .and_then(|v| v.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a number (decimal, 0x hex, optional K/M/G)"))
}

fn parse_phys(text: &str) -> Result<(u64, Option<u64>), String> {
    match text.split_once(':') {
        Some((a, s)) => Ok((parse_number(a)?, Some(parse_number(s)?))),
        None => Ok((parse_number(text)?, None)),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
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

/// An opened input and the regions read out of it.
struct Loaded {
    dump: Dump,
    found: Vec<Found>,
}

fn load(args: &InputArgs) -> Result<Loaded> {
    let path = &args.input;
    let source: Arc<dyn Source> =
        Arc::new(FileSource::open(path).with_context(|| format!("opening {}", path.display()))?);
    if source.len() == u64::MAX && args.phys.is_none() {
        bail!(
            "{} has no size to scan: give the region's address with --phys ADDR[:SIZE]",
            path.display()
        );
    }
    let dump = container::open(source).with_context(|| format!("reading {}", path.display()))?;
    for w in &dump.warnings {
        eprintln!("crashring: warning: {}: {w}", path.display());
    }
    let found = match args.phys {
        Some((addr, size)) => {
            let trust = if args.trust_header {
                HeaderTrust::Lenient
            } else {
                HeaderTrust::Checksummed
            };
            vec![discover::read_at(&*dump.memory, addr, size, trust)?]
        }
        None => scan_with_progress(&dump),
    };
    if found.is_empty() {
        let mut msg = format!(
            "no crashring region in {} ({}; {} bytes of memory searched)",
            path.display(),
            dump.container,
            dump.memory.map().present_bytes()
        );
        let lost = dump.memory.map().lost_bytes();
        if lost > 0 {
            msg += &format!(
                "; {lost} bytes of memory the dump should hold are not in it, see the warnings above"
            );
        }
        if dump.container.starts_with("ELF64 core (/proc/vmcore") {
            msg += "; a memmap= region is not System RAM and is not in /proc/vmcore: read it with --phys from /dev/mem";
        }
        bail!(msg);
    }
    Ok(Loaded { dump, found })
}

fn scan_with_progress(dump: &Dump) -> Vec<Found> {
    let total = dump.memory.map().present_bytes();
    let bar = (total > 1 << 30 && io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "scanning {bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let found = discover::scan(&*dump.memory, &mut |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    found
}

/// A region parsed over its bytes, with the dump's holes marked.
fn parse<'a>(f: &'a Found, trust: HeaderTrust) -> Result<Region<'a>> {
    let region = Region::parse(&f.bytes, trust)
        .with_context(|| format!("region at physical address {:#x}", f.addr))?;
    Ok(region.with_absent(f.absent.clone()))
}

/// Whether a trace is damaged, as opposed to merely old: overwritten and
/// writer-dropped events are what a flight recorder does, everything else
/// is damage. Pages the dump's filter left out count only if events were
/// lost with them (makedumpfile's zero-page filter leaves out every unused
/// page); pages lost or cut off count always, as nobody knows what they held.
/// A stream whose end is lost or unknown is damaged even when no count
/// could be put on it.
fn damaged(found: &Found, trace: &Trace) -> bool {
    found.unaccounted
        || trace
            .diagnostics
            .iter()
            .any(|d| !matches!(d.problem, Problem::Absent { .. }))
        || trace.streams.iter().any(|s| {
            s.lost(LossKind::Unreadable) > 0
                || s.lost(LossKind::Torn) > 0
                || s.losses.iter().any(|l| l.kind == LossKind::End)
        })
}

fn run(cli: Cli) -> Result<u8> {
    match cli.cmd {
        Cmd::Extract {
            input,
            format,
            output,
            cpu,
            since,
            until,
            types,
        } => {
            let selection = Selection {
                cpu,
                since_ns: since,
                until_ns: until,
                types,
            };
            let loaded = load(&input)?;
            if format == FormatArg::Ctf {
                let Some(dir) = &output else {
                    bail!("--format ctf writes a directory: give it with -o DIR");
                };
                return write_traces(&loaded, &input, dir, &selection);
            }
            if format == FormatArg::Tracedat {
                let Some(path) = &output else {
                    bail!("--format tracedat writes a file with an index: give it with -o FILE");
                };
                return write_tracedat(&loaded, &input, path, &selection);
            }
            let Some(lines) = format.lines() else {
                bail!("this format is written with -o");
            };
            let mut file = match &output {
                Some(path) => Some(
                    NewFile::create(path)
                        .with_context(|| format!("creating {}", path.display()))?,
                ),
                None => None,
            };
            let mut stdout = io::stdout().lock();
            let sink: &mut dyn Write = match &mut file {
                Some(f) => f,
                None => &mut stdout,
            };
            let mut out = BufWriter::with_capacity(1 << 16, sink);
            let several = loaded.found.len() > 1;
            let bad = each_region(&loaded, &input, |n, f, region, trace| {
                match lines {
                    Format::Text if several => {
                        writeln!(out, "# region {n} at physical address {:#x}", f.addr)?;
                    }
                    Format::Chrome => extractor::chrome::begin(&mut out, region, trace, n)?,
                    Format::Perfetto => extractor::perfetto::begin(&mut out, trace, n)?,
                    _ => {}
                }
                write_items(&mut out, region, trace, &selection, lines, n)?;
                Ok(())
            })?;
            if lines == Format::Chrome {
                extractor::chrome::end(&mut out)?;
            }
            out.flush()?;
            drop(out);
            if let (Some(file), Some(path)) = (file, &output) {
                file.persist()
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(bad)
        }
        Cmd::Info { input, json, pages } => {
            let loaded = load(&input)?;
            let regions = parse_all(&loaded, &input)?;
            let traces: Vec<Trace> = regions.iter().map(extractor::decode::decode).collect();
            let mut text = String::new();
            let view = info::View {
                input: &input.input,
                dump: &loaded.dump,
                found: &loaded.found,
                regions: &regions,
                traces: &traces,
            };
            if json {
                view.write_json(&mut text)?;
            } else {
                view.write_text(&mut text, pages)?;
            }
            io::stdout().lock().write_all(text.as_bytes())?;
            Ok(u8::from(
                loaded.found.iter().zip(&traces).any(|(f, t)| damaged(f, t)),
            ))
        }
        Cmd::Bundle {
            input,
            output,
            logs,
            redact,
            raw_pointers,
        } => {
            let loaded = load(&input)?;
            let regions = parse_all(&loaded, &input)?;
            let traces: Vec<Trace> = regions.iter().map(extractor::decode::decode).collect();
            let mut recovered = Vec::with_capacity(regions.len());
            for (n, ((f, region), trace)) in
                loaded.found.iter().zip(&regions).zip(&traces).enumerate()
            {
                report_damage(n, f, trace);
                recovered.push(Recovered {
                    addr: f.addr,
                    region,
                    trace,
                    damaged: damaged(f, trace),
                    holes: f.holes.clone(),
                });
            }
            let d = &loaded.dump;
            let source = bundle::Source {
                file: input.input.file_name().map_or_else(
                    || input.input.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                ),
                container: d.container.clone(),
                vmcoreinfo_kernel: d.vmcoreinfo_value("OSRELEASE").map(String::from),
                vmcoreinfo_crash_time: d.vmcoreinfo_value("CRASHTIME").map(String::from),
                warnings: d.warnings.clone(),
            };
            let rules = Rules {
                classes: redact,
                raw_pointers,
            };
            let summary = bundle::write(&output, &source, &recovered, &rules, &logs)
                .with_context(|| format!("bundling into {}", output.display()))?;
            report_clamped("CTF and trace.dat", summary.clamped);
            for l in &summary.logs {
                let r = &l.redaction;
                eprintln!(
                    "crashring: logs/{}: {} of {} lines placed on the timeline; {} redacted by class, {} kernel addresses hashed, {} Code: lines masked, {} overlong lines left out",
                    l.name,
                    l.placed.len(),
                    l.lines,
                    r.counts.per_class.iter().sum::<u64>(),
                    r.counts.pointers,
                    r.counts.code_lines,
                    r.too_long
                );
            }
            let redacted: u64 = summary.redacted.iter().flat_map(|c| &c.per_class).sum();
            let pointers: u64 = summary.redacted.iter().map(|c| c.pointers).sum();
            eprintln!(
                "crashring: wrote {} ({}/, {} files): {} events, {} lost; {redacted} redacted by class, {pointers} kernel addresses hashed",
                output.display(),
                summary.top,
                summary.files.len(),
                summary.events,
                summary.lost
            );
            Ok(u8::from(recovered.iter().any(|r| r.damaged)))
        }
        Cmd::CheckBundle { archive } => {
            let file = std::fs::File::open(&archive)
                .with_context(|| format!("opening {}", archive.display()))?;
            match bundle::check(io::BufReader::new(file)) {
                Ok(checked) => {
                    println!(
                        "{}: intact: {}/ with {} files, each as MANIFEST.json says",
                        archive.display(),
                        checked.top,
                        checked.files.len()
                    );
                    Ok(0)
                }
                Err(bundle::CheckError::Read(e)) => {
                    Err(e).with_context(|| format!("reading {}", archive.display()))
                }
                Err(e) => {
                    println!("{}: NOT intact: {e}", archive.display());
                    Ok(1)
                }
            }
        }
        Cmd::Verify { input } => {
            let loaded = load(&input)?;
            each_region(&loaded, &input, |n, f, _, trace| {
                let state = if damaged(f, trace) {
                    "damaged"
                } else {
                    "intact"
                };
                let at_least = if trace.lost_exact() { "" } else { "at least " };
                println!(
                    "region {n} at {:#x}: {state}: {} events, {at_least}{} lost",
                    f.addr,
                    trace.event_count(),
                    trace.lost_events()
                );
                Ok(())
            })
        }
    }
}

/// Parses and decodes every region found, reports its damage on stderr
/// and hands it to `each` with its index; returns 1 if any was damaged.
fn each_region(
    loaded: &Loaded,
    input: &InputArgs,
    mut each: impl FnMut(usize, &Found, &Region, &Trace) -> Result<()>,
) -> Result<u8> {
    let mut bad = false;
    for (n, f) in loaded.found.iter().enumerate() {
        let region = parse(f, trust_of(input))?;
        let trace = extractor::decode::decode(&region);
        report_damage(n, f, &trace);
        bad |= damaged(f, &trace);
        each(n, f, &region, &trace)?;
    }
    Ok(u8::from(bad))
}

/// Says how many events a writer moved forward in time: trace formats
/// need each stream's times never to go back. `whose` names the region.
fn report_clamped(whose: &str, clamped: u64) {
    if clamped > 0 {
        eprintln!(
            "crashring: {whose}: {clamped} events went back in time and were written at their predecessor's time (trace readers stop on a backwards event)"
        );
    }
}

/// `extract --format tracedat`: one file per region, `path` itself when
/// there is one region, else `path.N`.
fn write_tracedat(
    loaded: &Loaded,
    input: &InputArgs,
    path: &Path,
    selection: &Selection,
) -> Result<u8> {
    let several = loaded.found.len() > 1;
    each_region(loaded, input, |n, _, region, trace| {
        let mut out = path.as_os_str().to_owned();
        if several {
            out.push(format!(".{n}"));
        }
        let out = PathBuf::from(out);
        let file = NewFile::create(&out).with_context(|| format!("creating {}", out.display()))?;
        let mut w = io::BufWriter::with_capacity(1 << 16, file);
        let written = extractor::tracedat::write(&mut w, region, trace, selection)
            .and_then(|written| {
                let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
                file.persist().map(|()| written)
            })
            .with_context(|| format!("writing {}", out.display()))?;
        report_clamped(&format!("region {n}"), written.clamped);
        eprintln!(
            "crashring: region {n}: wrote {} events and {} dropped to {}",
            written.events,
            written.lost,
            out.display()
        );
        Ok(())
    })
}

/// `extract --format ctf`: one trace per region, in `dir` itself when
/// there is one region, else in `dir/region-N`.
fn write_traces(
    loaded: &Loaded,
    input: &InputArgs,
    dir: &Path,
    selection: &Selection,
) -> Result<u8> {
    let several = loaded.found.len() > 1;
    let source = loaded.dump.container.to_string();
    each_region(loaded, input, |n, _, region, trace| {
        let out = if several {
            dir.join(format!("region-{n}"))
        } else {
            dir.to_path_buf()
        };
        let w = extractor::ctf::write(
            &out,
            region,
            trace,
            selection,
            &source,
            n,
            &region.wall_clock(trace),
        )
        .with_context(|| format!("writing a CTF trace to {}", out.display()))?;
        report_clamped(&format!("region {n}"), w.clamped);
        eprintln!(
            "crashring: region {n}: wrote {} events and {} discarded to {} ({} files)",
            w.events,
            w.discarded,
            out.display(),
            w.files.len()
        );
        Ok(())
    })
}

/// Every region found, parsed.
fn parse_all<'a>(loaded: &'a Loaded, input: &InputArgs) -> Result<Vec<Region<'a>>> {
    loaded
        .found
        .iter()
        .map(|f| parse(f, trust_of(input)))
        .collect()
}

fn trust_of(input: &InputArgs) -> HeaderTrust {
    if input.trust_header {
        HeaderTrust::Lenient
    } else {
        HeaderTrust::Checksummed
    }
}

fn report_damage(n: usize, f: &Found, trace: &Trace) {
    for h in &f.holes {
        eprintln!("crashring: region {n} at {:#x}: {h}", f.addr);
    }
    for d in &trace.diagnostics {
        eprintln!("crashring: region {n} at {:#x}: {d}", f.addr);
    }
}
