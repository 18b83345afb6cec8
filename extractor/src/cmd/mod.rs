//! The subcommands, one file each; what they share: the input options,
//! loading with a progress bar, and what is said on stderr.

pub mod arm;
pub mod bundle;
pub mod check_bundle;
pub mod debug;
pub mod dmesg;
pub mod export;
pub mod extract;
pub mod follow;
pub mod ftrace;
pub mod info;
pub mod pstore;
pub mod recovery;
pub mod report;
pub mod serve_request;
pub mod snapshot;
pub mod upload;
pub mod verify;

use anyhow::{Context, Result};
use clap::Args;
use extractor::input::Dump;
use extractor::output::{NewFile, Written};
use extractor::phys::PhysAddr;
use extractor::recover::{self, InputSpec, LoadError, Loaded, Recovered};
use indicatif::{ProgressBar, ProgressStyle};
use pstore_ring::read::HeaderTrust;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// The input of a command that reads what a dump holds besides regions
/// (the printk log, ramoops, ftrace): no region options.
#[derive(Args)]
pub struct DumpArgs {
    /// A dump, an image or a device.
    pub input: PathBuf,
}

impl DumpArgs {
    fn spec(&self) -> InputSpec {
        InputSpec {
            path: self.input.clone(),
            phys: None,
            trust: HeaderTrust::Checksummed,
        }
    }

    /// Opens the input for a search of all of it (it needs a size).
    pub fn open(&self) -> Result<Dump> {
        warn(&self.input, recover::open(&self.spec())?)
    }

    /// Opens the input for reading by addresses given or found
    /// (VMCOREINFO's, `--ramoops`, `--ftrace`), never by a search:
    /// `/dev/mem` is an input like any other.
    pub fn open_unscanned(&self) -> Result<Dump> {
        warn(&self.input, recover::open_unscanned(&self.spec())?)
    }
}

/// Says what is wrong with the dump itself.
fn warn(path: &Path, dump: Dump) -> Result<Dump> {
    for w in &dump.warnings {
        eprintln!("crashring: warning: {}: {w}", path.display());
    }
    Ok(dump)
}

#[derive(Args)]
pub struct InputArgs {
    /// A dump, an image or a device.
    pub input: PathBuf,
    /// Read the region at this physical address instead of scanning; SIZE
    /// (bytes, or with K/M/G) overrides the size in its header.
    #[arg(long, value_name = "ADDR[:SIZE]", value_parser = parse_phys)]
    pub phys: Option<(PhysAddr, Option<u64>)>,
    /// Use a region header whose CRC fails (with --phys).
    #[arg(long, requires = "phys")]
    pub trust_header: bool,
}

impl InputArgs {
    fn spec(&self) -> InputSpec {
        InputSpec {
            path: self.input.clone(),
            phys: self.phys,
            trust: if self.trust_header {
                HeaderTrust::Lenient
            } else {
                HeaderTrust::Checksummed
            },
        }
    }

    /// Opens the input and says what is wrong with the dump itself.
    pub fn open(&self) -> Result<Dump> {
        warn(&self.input, recover::open(&self.spec())?)
    }

    /// Opens the input, says what is wrong with the dump itself, and
    /// reads its regions out (with a progress bar for a long scan).
    pub fn load(&self) -> Result<Loaded> {
        self.load_by(recover::find)
    }

    /// [`Self::load`], an input with nothing of crashring's or the
    /// kernel's logs in it included (`info --ramoops` looks for more).
    pub fn load_any(&self) -> Result<Loaded> {
        self.load_by(recover::find_any)
    }

    fn load_by(&self, find: Finder) -> Result<Loaded> {
        let spec = self.spec();
        let dump = self.open()?;
        let mut bar = None;
        let loaded = find(dump, &spec, &mut |done, total| {
            let bar = bar.get_or_insert_with(|| scan_bar(total));
            if let Some(b) = bar {
                b.set_position(done);
            }
        });
        if let Some(Some(b)) = bar {
            b.finish_and_clear();
        }
        let loaded = loaded?;
        for e in &loaded.unread {
            eprintln!("crashring: warning: {}: {e}", spec.path.display());
        }
        Ok(loaded)
    }

    /// [`Self::load`], for the commands that read regions: an input with
    /// none is the error that says what else it holds.
    pub fn load_regions(&self) -> Result<Loaded> {
        let loaded = self.load()?;
        if loaded.found.is_empty() {
            return Err(loaded.no_region(&self.spec()).into());
        }
        Ok(loaded)
    }
}

/// [`recover::find`] or [`recover::find_any`].
type Finder = fn(Dump, &InputSpec, &mut dyn FnMut(u64, u64)) -> Result<Loaded, LoadError>;

/// A progress bar for a scan of more than 1 GiB, when someone watches.
fn scan_bar(total: u64) -> Option<ProgressBar> {
    (total > 1 << 30 && io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "scanning {bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    })
}

fn parse_number(text: &str) -> Result<u64, String> {
    kexec_hooks::iomem::parse_size(text)
        .ok_or_else(|| format!("`{text}` is not a number (decimal, 0x hex, optional K/M/G)"))
}

pub(crate) fn parse_phys(text: &str) -> Result<(PhysAddr, Option<u64>), String> {
    match text.split_once(':') {
        Some((a, s)) => Ok((PhysAddr(parse_number(a)?), Some(parse_number(s)?))),
        None => Ok((PhysAddr(parse_number(text)?), None)),
    }
}

/// Whether `-o` named standard output: `-`, as for most tools, never a
/// file of that name.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Runs `write` over `output` (a new file, renamed into place once all of
/// it is written) or, without one, standard output, buffered.
pub fn write_to(
    output: Option<&Path>,
    write: impl FnOnce(&mut BufWriter<&mut (dyn Write + Send)>) -> Result<()>,
) -> Result<()> {
    let mut file = match output {
        Some(path) => {
            Some(NewFile::create(path).with_context(|| format!("creating {}", path.display()))?)
        }
        None => None,
    };
    // Not locked: the item formats write from whichever of their worker
    // threads holds the next window's text.
    let mut stdout = io::stdout();
    let sink: &mut (dyn Write + Send) = match &mut file {
        Some(f) => f,
        None => &mut stdout,
    };
    let mut out = BufWriter::with_capacity(1 << 16, sink);
    write(&mut out)?;
    out.flush()?;
    drop(out);
    if let (Some(file), Some(path)) = (file, output) {
        file.persist()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Says on stderr what the dump lacked of a region and what decoding it
/// found wrong.
pub fn report_damage(r: &Recovered) {
    for h in &r.found.holes {
        eprintln!("crashring: region {} at {:#x}: {h}", r.index, r.addr());
    }
    for d in &r.trace.diagnostics {
        eprintln!("crashring: region {} at {:#x}: {d}", r.index, r.addr());
    }
}

/// Says how many events a writer moved forward in time: trace formats
/// need each stream's times never to go back. `whose` names the region.
pub fn report_clamped(whose: &str, clamped: u64) {
    if clamped > 0 {
        eprintln!(
            "crashring: {whose}: {clamped} events went back in time (or past 2^63 ns from the clock's origin) and were written at their predecessor's time (trace readers stop on a backwards event, and on one they cannot place)"
        );
    }
}

/// Says what a file or directory writer wrote for region `n`.
pub fn report_written(n: usize, out: &Path, w: &Written) {
    report_clamped(&format!("region {n}"), w.clamped);
    let files = if w.files.is_empty() {
        String::new()
    } else {
        format!(" ({} files)", w.files.len())
    };
    eprintln!(
        "crashring: region {n}: wrote {} events and {} {} to {}{files}",
        w.events,
        w.lost,
        w.lost_as,
        out.display()
    );
}
