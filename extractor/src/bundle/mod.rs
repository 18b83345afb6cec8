//! `crashring bundle`: everything a bug report needs from a crash, in one
//! `.tar.gz` that the same input always turns into the same bytes.
//!
//! ```text
//! crash-<hostname>-<crash time, UTC>-<boot id, 8 hex>/
//!   MANIFEST.json          source, kernel, boot id, crash, per-CPU counts,
//!                          clocks, redaction, and every other file's size
//!                          and SHA-256
//!   README.txt             what each file is and how to open it
//!   dmesg.txt              the printk lines, as dmesg prints them
//!   kernel/ctf/            CTF 1.8 (region-N/ctf/ when there are several)
//!   kernel/trace.dat       trace-cmd v6
//!   kernel/events.jsonl    the same events as `extract --format jsonl`
//!                          writes them, for `crashring export` and any
//!                          JSON reader
//!   perfetto/crash.tar.gz  kernel.pftrace only: Perfetto refuses an
//!                          archive holding a file it cannot parse, so the
//!                          text files stay out; added logs are tracks in it
//!   logs/NAME              each --add-log file, redacted like the trace
//!   logs/kernel-printk.txt the crashed kernel's whole printk log, from a
//!                          dump with VMCOREINFO, as an added log
//! ```
//!
//! Every file is written through the redaction's overlay
//! ([`crate::bundle::redact`]), page by page as `extract` writes;
//! added logs are redacted with the same key and rules
//! ([`crate::bundle::logs::redact`]) and placed on the timeline from that copy.
//! Files are staged in a private directory with a random name beside the
//! output, and the archive is written under a random name there too and
//! renamed into place when complete ([`NewFile`]), so a failed run leaves
//! nothing half-written and nothing planted beside the output is
//! followed. Archive entries are 0600 (directories 0700),
//! owned by 0, and dated at the crash (or the region's creation).

mod add_log;
mod archive;
mod check;
mod digest;
mod dmesg;
#[cfg(test)]
pub(crate) mod fixture;
pub mod grant;
mod gzip;
pub mod logs;
mod manifest;
mod readme;
pub mod redact;

pub use add_log::{AddLog, LogSource, KERNEL_PRINTK};
pub use check::{check, escaped, CheckError, Checked};

use archive::Packing;
use digest::{digest, Digested, Digesting};

use crate::discover::Hole;
use crate::output::jsonl::Jsonl;
use crate::output::perfetto::Perfetto;
use crate::output::select::Selection;
use crate::output::{write_items, ItemFormat, NewFile, Overlay, RegionView};
use crate::phys::PhysAddr;
use crate::recover::report::{utc, wall};
use crate::recover::{Place, Recovered};
use logs::Log;
use pstore_ring::kprintf::Pointers;
use pstore_ring::read::{PagedTrace, Region, WallClock};
use rayon::prelude::*;
use redact::{Counts, Rules, UnknownClass};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub use crate::recover::report::SourceReport as Source;

/// Why a bundle could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("no region to bundle")]
    NoRegion,
    #[error(transparent)]
    Redact(#[from] UnknownClass),
    #[error("two logs would both be logs/{0}: name one with PATH:NAME")]
    SameLogName(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

trait Context<T> {
    fn what(self, what: impl FnOnce() -> String) -> Result<T, BundleError>;
}

impl<T> Context<T> for io::Result<T> {
    fn what(self, what: impl FnOnce() -> String) -> Result<T, BundleError> {
        self.map_err(|source| BundleError::Io {
            what: what(),
            source,
        })
    }
}

/// The kinds of file in a bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Manifest,
    Readme,
    Dmesg,
    CtfMetadata,
    CtfStream,
    TraceDat,
    Events,
    PerfettoArchive,
    Log,
    KernelPrintk,
    Ramoops,
    KernelFtrace,
    NextBootPstore,
    NextBootFtrace,
    NextBootKernel,
    Firmware,
}

impl FileKind {
    /// How the bundle's archive packs it: a compressed file is stored.
    fn packing(self) -> Packing {
        match self {
            FileKind::PerfettoArchive => Packing::Store,
            _ => Packing::Deflate,
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            FileKind::Manifest => "application/json",
            FileKind::Readme
            | FileKind::Dmesg
            | FileKind::CtfMetadata
            | FileKind::Log
            | FileKind::KernelPrintk
            | FileKind::Ramoops
            | FileKind::KernelFtrace
            | FileKind::NextBootPstore
            | FileKind::NextBootFtrace
            | FileKind::NextBootKernel
            | FileKind::Firmware => "text/plain",
            FileKind::CtfStream | FileKind::TraceDat => "application/octet-stream",
            FileKind::Events => "application/jsonl",
            FileKind::PerfettoArchive => "application/gzip",
        }
    }

    fn format(self) -> &'static str {
        match self {
            FileKind::Manifest => "crashring manifest 1",
            FileKind::Readme => "text",
            FileKind::Dmesg => "dmesg text",
            FileKind::CtfMetadata => "CTF 1.8 metadata (TSDL)",
            FileKind::CtfStream => "CTF 1.8 data stream",
            FileKind::TraceDat => "trace-cmd trace.dat v6",
            FileKind::Events => "crashring jsonl 1",
            FileKind::PerfettoArchive => "tar.gz of Perfetto protobuf traces",
            FileKind::Log => "as added",
            FileKind::KernelPrintk => "dmesg text",
            FileKind::Ramoops | FileKind::NextBootPstore => "pstore record",
            FileKind::KernelFtrace => "ftrace text",
            FileKind::NextBootFtrace => "ftrace trace file",
            FileKind::NextBootKernel => "dmesg text of the next boot",
            FileKind::Firmware => "ACPI boot error records, decoded",
        }
    }
}

/// One file of the bundle, relative to its top directory.
#[derive(Clone, Debug)]
pub struct BundleFile {
    pub path: PathBuf,
    pub kind: FileKind,
    pub size: u64,
    pub sha256: String,
}

/// A staged file of the bundle, with its digest when it was hashed as
/// it was written (the others are read back).
type Staged = (PathBuf, FileKind, Option<Digested>);

/// A region as it goes into the bundle: redacted, with what was written.
struct Part<'p, 'b> {
    index: usize,
    addr: PhysAddr,
    /// Where it was read from, as the README says it.
    place: Place,
    /// With its crash message redacted.
    region: Region<'b>,
    trace: &'p PagedTrace<'b>,
    /// The redaction of the trace's events.
    overlay: &'p Overlay,
    /// From the unredacted trace: redaction leaves wall times alone.
    wall: WallClock,
    damaged: bool,
    holes: Vec<Hole>,
    redacted: Counts,
    /// The manifest leaves out the crash's summaries ([`redact::Plan`]).
    summaries_withheld: bool,
    clamped: u64,
    ctf_dir: PathBuf,
    tracedat: PathBuf,
    events: PathBuf,
}

impl<'b> Part<'_, 'b> {
    /// The redacted region, as every file of the bundle is written from.
    fn view(&self) -> RegionView<'_, 'b> {
        RegionView {
            index: self.index,
            addr: self.addr.0,
            region: &self.region,
            trace: self.trace,
            overlay: Some(self.overlay),
            // Redaction has hashed every kernel address already (unless
            // --raw-pointers kept them): messages show what it left.
            pointers: Pointers::Raw,
        }
    }
}

/// Why a bundle of a running recorder was made, and for whom: a
/// snapshot (`crashring snapshot`) rather than a crash.
#[derive(Clone, Debug)]
pub struct Request {
    /// What the asker said, one line.
    pub why: String,
    /// Who asked.
    pub uid: u32,
    /// When, in nanoseconds since the Unix epoch.
    pub at_ns: i128,
}

/// What was bundled.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The top directory inside the archive.
    pub top: String,
    pub files: Vec<BundleFile>,
    pub events: u64,
    pub lost: u64,
    /// The user streams' events, apart: a program's claim, not the
    /// kernel's.
    pub user_events: u64,
    /// Events moved forward in time for the trace formats.
    pub clamped: u64,
    pub logs: Vec<Log>,
    pub redacted: Vec<Counts>,
}

/// Writes the bundle of `regions` to `out`: of a crash, or of the
/// recorder as it ran when `request` asked for it.
pub fn write(
    out: &Path,
    source: &Source,
    regions: &[Recovered],
    rules: &Rules,
    add_logs: &[AddLog],
    request: Option<&Request>,
) -> Result<Summary, BundleError> {
    if regions.is_empty() {
        return Err(BundleError::NoRegion);
    }
    let all: Vec<&Region> = regions.iter().map(|r| &r.region).collect();
    rules.check(&all)?;
    for (i, l) in add_logs.iter().enumerate() {
        if add_logs[..i].iter().any(|m| m.name == l.name) {
            return Err(BundleError::SameLogName(l.name.clone()));
        }
    }
    let plans: Vec<redact::Plan> = regions
        .iter()
        .map(|r| redact::plan(&r.region, r.key(), &r.trace, rules))
        .collect();
    let several = regions.len() > 1;
    let mut parts: Vec<Part> = regions
        .iter()
        .zip(&plans)
        .enumerate()
        .map(|(n, (r, plan))| {
            let base = if several {
                PathBuf::from(format!("region-{n}"))
            } else {
                PathBuf::from("kernel")
            };
            Part {
                index: n,
                addr: r.addr(),
                place: r.place,
                region: plan.region(&r.region),
                trace: &r.trace,
                overlay: &plan.overlay,
                wall: r.region.wall_clock_of_pages(&r.trace),
                damaged: r.damaged(),
                holes: r.found.holes.clone(),
                redacted: plan.counts.clone(),
                summaries_withheld: plan.summaries_withheld,
                clamped: 0,
                ctf_dir: base.join("ctf"),
                tracedat: base.join("trace.dat"),
                events: base.join(EVENTS),
            }
        })
        .collect();

    // The archive first: a destination it may not replace is refused
    // before any work is done.
    let archive = NewFile::create(out).what(|| format!("creating {}", out.display()))?;
    let staging = archive::Staging::beside(out)
        .what(|| format!("creating a staging directory for {}", out.display()))?;

    // Logs first: the Perfetto trace shows them as tracks.
    let (placed_logs, logs_written) = place_logs(&staging, &parts, regions, rules, add_logs)?;
    let mtime = request.map_or_else(|| archive_time(&parts[0]), request_time);
    // Each file is written on its own core: they read the same trace
    // and write nothing the others read.
    let ((dmesg, perfetto), traces) = rayon::join(
        || {
            rayon::join(
                || write_dmesg(&staging, &parts),
                || write_perfetto(&staging, &parts, &placed_logs, mtime),
            )
        },
        || {
            parts
                .par_iter()
                .map(|p| write_traces(&staging, p, source))
                .collect::<Vec<_>>()
        },
    );
    let mut files: Vec<Staged> = vec![dmesg?];
    for (p, traces) in parts.iter_mut().zip(traces) {
        let (written, clamped) = traces?;
        p.clamped = clamped;
        files.extend(written);
    }
    // Placed in the order they were added.
    let logs = placed_logs.iter().zip(add_logs).zip(logs_written);
    files.extend(logs.map(|((l, a), written)| {
        let kind = match a.source {
            LogSource::File(_) => FileKind::Log,
            LogSource::KernelPrintk(_) => FileKind::KernelPrintk,
            LogSource::Ramoops(_) => FileKind::Ramoops,
            LogSource::KernelFtrace(_) => FileKind::KernelFtrace,
            LogSource::NextBootPstore(_) => FileKind::NextBootPstore,
            LogSource::NextBootFtrace(_) => FileKind::NextBootFtrace,
            LogSource::NextBootKernel(_) => FileKind::NextBootKernel,
            LogSource::Firmware(_) => FileKind::Firmware,
        };
        (log_path(l), kind, Some(written))
    }));
    files.push(perfetto?);

    // README lists every file, itself and the manifest included; the
    // manifest checks every file but itself.
    let mut listed: Vec<BundleFile> = Vec::with_capacity(files.len() + 2);
    for (path, kind) in [
        ("MANIFEST.json", FileKind::Manifest),
        ("README.txt", FileKind::Readme),
    ] {
        listed.push(BundleFile {
            path: path.into(),
            kind,
            size: 0,
            sha256: String::new(),
        });
    }
    let digests: Vec<_> = files
        .into_par_iter()
        .map(|(path, kind, digested)| {
            let Digested { size, sha256 } = match digested {
                Some(d) => d,
                None => File::open(staging.path().join(&path))
                    .and_then(|f| digest(f, |_| Ok(())))
                    .what(|| format!("reading back {}", path.display()))?,
            };
            Ok(BundleFile {
                path,
                kind,
                size,
                sha256,
            })
        })
        .collect::<Result<_, BundleError>>()?;
    listed.extend(digests);
    let readme = readme::render(source, &parts, &placed_logs, rules, &listed, request);
    write_text(&staging, &mut listed[1], &readme)?;
    let manifest = manifest::render(source, &parts, &placed_logs, rules, &listed[1..], request);
    write_text(&staging, &mut listed[0], &manifest)?;

    let top = top_name(&parts[0], request.is_some(), mtime);
    let paths: Vec<(PathBuf, Packing)> = listed
        .iter()
        .map(|f| (f.path.clone(), f.kind.packing()))
        .collect();
    archive::tar_gz(archive, staging.path(), Path::new(&top), &paths, mtime)
        .and_then(|archive| {
            archive.file().sync_all()?;
            archive.persist()
        })
        .what(|| format!("writing {}", out.display()))?;
    Ok(Summary {
        top,
        files: listed,
        events: parts
            .iter()
            .map(|p| p.view().kernel_tally().events as u64)
            .sum(),
        lost: parts
            .iter()
            .map(|p| p.view().kernel_tally().lost)
            .fold(0, u64::saturating_add),
        user_events: parts
            .iter()
            .map(|p| p.view().user_tally().events as u64)
            .sum(),
        clamped: parts.iter().map(|p| p.clamped).sum(),
        logs: placed_logs,
        redacted: parts.into_iter().map(|p| p.redacted).collect(),
    })
}

/// `dmesg.txt`: every region's printk lines.
fn write_dmesg(staging: &archive::Staging, parts: &[Part]) -> Result<Staged, BundleError> {
    let dmesg = Path::new("dmesg.txt");
    let several = parts.len() > 1;
    let digested = write_file(staging, dmesg, |w| {
        for p in parts {
            if several {
                writeln!(w, "# region {} at physical address {:#x}", p.index, p.addr)?;
            }
            dmesg::write(w, &p.view())?;
        }
        Ok(())
    })?;
    Ok((dmesg.into(), FileKind::Dmesg, Some(digested)))
}

/// A region's events as JSON lines, in each region's directory.
pub const EVENTS: &str = "events.jsonl";

/// A region's CTF trace, trace.dat and JSON lines, side by side; with the
/// events the trace formats moved forward in time.
fn write_traces(
    staging: &archive::Staging,
    p: &Part,
    source: &Source,
) -> Result<(Vec<Staged>, u64), BundleError> {
    let ((ctf, tracedat), events) = rayon::join(
        || write_ctf_and_tracedat(staging, p, source),
        || {
            write_file(staging, &p.events, |w| {
                write_items(w, &p.view(), &Selection::default(), &Jsonl)
            })
        },
    );
    let ctf = ctf?;
    tracedat?;
    let events = events?;
    // CTF's streams and trace.dat (which seeks back) are read back.
    let mut files: Vec<Staged> = ctf
        .files
        .iter()
        .map(|f| {
            let kind = if f.as_path() == Path::new("metadata") {
                FileKind::CtfMetadata
            } else {
                FileKind::CtfStream
            };
            (p.ctf_dir.join(f), kind, None)
        })
        .collect();
    files.push((p.tracedat.clone(), FileKind::TraceDat, None));
    files.push((p.events.clone(), FileKind::Events, Some(events)));
    Ok((files, ctf.clamped))
}

/// A region's CTF trace and trace.dat, each on its own core.
fn write_ctf_and_tracedat(
    staging: &archive::Staging,
    p: &Part,
    source: &Source,
) -> (
    Result<crate::output::Written, BundleError>,
    Result<(), BundleError>,
) {
    rayon::join(
        || {
            let dir = staging
                .make_dirs(&p.ctf_dir)
                .what(|| format!("creating {}", p.ctf_dir.display()))?;
            crate::output::ctf::write(
                &dir,
                &p.view(),
                &Selection::default(),
                &source.container,
                &p.wall,
            )
            .what(|| format!("writing the CTF trace {}", p.ctf_dir.display()))
        },
        || {
            let file = staging
                .create(&p.tracedat)
                .what(|| format!("creating {}", p.tracedat.display()))?;
            let mut w = BufWriter::with_capacity(1 << 16, file);
            crate::output::tracedat::write(&mut w, &p.view(), &Selection::default())
                .and_then(|_| w.flush())
                .what(|| format!("writing {}", p.tracedat.display()))
        },
    )
}

/// Where a log is in the bundle.
fn log_path(log: &Log) -> PathBuf {
    Path::new("logs").join(&log.name)
}

/// Each added log, redacted into `logs/`, and placed on the first
/// region's timeline from that copy; with what each copy holds.
fn place_logs(
    staging: &archive::Staging,
    parts: &[Part],
    regions: &[Recovered],
    rules: &Rules,
    add_logs: &[AddLog],
) -> Result<(Vec<Log>, Vec<Digested>), BundleError> {
    // Made for the first log, if any: it holds every printk line's text.
    let mut clock = None;
    // Logs go with the first region's trace: its key, so an address in a
    // log hashes as it does in that trace.
    let text_redactor = redact::TextRedactor::new(&regions[0].region, regions[0].key(), rules);
    let mut placed_logs = Vec::with_capacity(add_logs.len());
    let mut written = Vec::with_capacity(add_logs.len());
    for l in add_logs {
        let rel = Path::new("logs").join(&l.name);
        let input: Box<dyn Read> = match &l.source {
            LogSource::File(path) => {
                let file = add_log::open_log(path);
                Box::new(file.what(|| format!("opening the log {}", path.display()))?)
            }
            LogSource::KernelPrintk(text)
            | LogSource::Ramoops(text)
            | LogSource::KernelFtrace(text)
            | LogSource::NextBootPstore(text)
            | LogSource::NextBootFtrace(text)
            | LogSource::NextBootKernel(text)
            | LogSource::Firmware(text) => Box::new(&text[..]),
        };
        let mut redaction = None;
        written.push(write_file(staging, &rel, |w| {
            let input = BufReader::with_capacity(1 << 16, input);
            redaction = Some(logs::redact(input, w, &text_redactor)?);
            Ok(())
        })?);
        // Placed from the redacted copy: the Perfetto track shows what
        // the copy does, no more.
        let copy = File::open(staging.path().join(&rel))
            .what(|| format!("reading back {}", rel.display()))?;
        let copy = BufReader::with_capacity(1 << 16, copy);
        if !l.source.on_the_crashed_boots_clock() {
            let mut log =
                logs::unplaced(&l.name, copy).what(|| format!("reading back {}", rel.display()))?;
            log.redaction = redaction.unwrap_or_default();
            placed_logs.push(log);
            continue;
        }
        let clock = clock.get_or_insert_with(|| {
            let view = parts[0].view();
            // Aligned by the kernel's printk lines only: a user stream's
            // records of that type are its process's, not the kernel log.
            let kernel = view.streams().filter(|s| s.info().is_kernel());
            let events = kernel.flat_map(|s| s.events());
            logs::Clock::new(view.region, events, parts[0].wall.clone())
        });
        let mut log = clock
            .place(&l.name, copy)
            .what(|| format!("reading back {}", rel.display()))?;
        log.redaction = redaction.unwrap_or_default();
        // The ftrace buffer is stamped by the printk log's clock.
        if let LogSource::KernelFtrace(_) = l.source {
            if let Some(printk) = placed_logs.iter().find(|p: &&Log| p.name == KERNEL_PRINTK) {
                log.borrow_alignment(printk);
            }
        }
        placed_logs.push(log);
    }
    Ok((placed_logs, written))
}

/// `perfetto/crash.tar.gz`: every region's trace and the logs' tracks in
/// one Perfetto trace, archived alone.
fn write_perfetto(
    staging: &archive::Staging,
    parts: &[Part],
    placed_logs: &[Log],
    mtime: u64,
) -> Result<Staged, BundleError> {
    let pftrace = Path::new("kernel.pftrace");
    let perfetto_dir = archive::Staging::beside(&staging.path().join("perfetto"))
        .what(|| "creating a staging directory for the Perfetto trace".into())?;
    let several = parts.len() > 1;
    // Not hashed: the manifest lists the archive it goes in.
    fill_file(
        &perfetto_dir,
        pftrace,
        |file| file,
        |w| {
            for p in parts {
                let view = p.view();
                Perfetto.begin(w, &view, several)?;
                write_items(w, &view, &Selection::default(), &Perfetto)?;
            }
            for (i, l) in placed_logs.iter().enumerate() {
                crate::output::perfetto::log_track(w, &format!("log {}", l.name), i, &l.placed)?;
            }
            Ok(())
        },
    )?;
    let perfetto = Path::new("perfetto/crash.tar.gz");
    let file = staging
        .create(perfetto)
        .what(|| "creating perfetto/crash.tar.gz".into())?;
    let (_, digested) = archive::tar_gz(
        Digesting::new(file),
        perfetto_dir.path(),
        Path::new(""),
        &[(pftrace.to_path_buf(), Packing::Deflate)],
        mtime,
    )
    .what(|| "writing perfetto/crash.tar.gz".into())?
    .finish();
    Ok((perfetto.into(), FileKind::PerfettoArchive, Some(digested)))
}

/// Creates `relative` in `staging` and fills it with `fill`; returns
/// what was written.
fn write_file(
    staging: &archive::Staging,
    relative: &Path,
    fill: impl FnOnce(&mut BufWriter<Digesting<File>>) -> io::Result<()>,
) -> Result<Digested, BundleError> {
    Ok(fill_file(staging, relative, Digesting::new, fill)?
        .finish()
        .1)
}

/// Creates `relative` in `staging`, wraps it with `wrap` and fills it
/// with `fill`; returns the wrapper, flushed.
fn fill_file<W: Write>(
    staging: &archive::Staging,
    relative: &Path,
    wrap: impl FnOnce(File) -> W,
    fill: impl FnOnce(&mut BufWriter<W>) -> io::Result<()>,
) -> Result<W, BundleError> {
    let what = || format!("writing {}", relative.display());
    let file = staging.create(relative).what(what)?;
    let mut w = BufWriter::with_capacity(1 << 16, wrap(file));
    fill(&mut w).and_then(|()| w.flush()).what(what)?;
    w.into_inner()
        .map_err(io::IntoInnerError::into_error)
        .what(what)
}

/// Writes `text` as `file` and records its size and SHA-256.
fn write_text(
    staging: &archive::Staging,
    file: &mut BundleFile,
    text: &str,
) -> Result<(), BundleError> {
    let written = write_file(staging, &file.path, |w| w.write_all(text.as_bytes()))?;
    (file.size, file.sha256) = (written.size, written.sha256);
    Ok(())
}

/// The archive's entries are dated at the crash, or else at the region's
/// creation, as wall-clock seconds (0 when the region has no wall clock).
fn archive_time(part: &Part) -> u64 {
    let region = &part.region;
    let ts = match &region.state {
        Ok(s) if s.crash_ns != 0 => s.crash_ns,
        _ => region.header.created_ns,
    };
    wall(ts, &part.wall)
        .and_then(|w| u64::try_from(w.div_euclid(1_000_000_000)).ok())
        .unwrap_or(0)
}

/// Seconds since the epoch when `request` was made, for the archive's dates.
fn request_time(request: &Request) -> u64 {
    u64::try_from(request.at_ns.div_euclid(1_000_000_000)).unwrap_or(0)
}

/// `crash-<hostname>-<UTC yyyymmddThhmmssZ>-<boot id, 8 hex>` at `secs`
/// (`snapshot-…` for a snapshot, `shutdown-…` for a generation brought
/// down on purpose for a reason); the host name keeps only characters
/// safe in a file name.
fn top_name(part: &Part, snapshot: bool, secs: u64) -> String {
    let h = &part.region.header;
    let host: String = h
        .hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let host = if host.is_empty() {
        "unknown".into()
    } else {
        host
    };
    let stamp: String = utc(i128::from(secs) * 1_000_000_000)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(15)
        .collect();
    let boot: String = h.boot_id[..4].iter().map(|b| format!("{b:02x}")).collect();
    let asked_down = || {
        part.region
            .state
            .as_ref()
            .is_ok_and(|s| s.shutdown_reason().is_some())
    };
    // Retention tells a report from a crash by this prefix alone.
    let what = if snapshot {
        kexec_hooks::retention::REPORT_PREFIX
    } else if asked_down() {
        "shutdown-"
    } else {
        "crash-"
    };
    format!("{what}{host}-{stamp}Z-{boot}")
}
