//! `crashring ftrace`: the kernel's own persistent ftrace buffer
//! (`trace_instance=` in reserved memory, 6.12+) read from a dump or an
//! image, whatever kernel boots next.

use super::{parse_phys, write_to, DumpArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use extractor::foreign::ftrace::event::Formats;
use extractor::foreign::ftrace::{self, CpuState, Instance};
use extractor::kmem::symbols::{SymbolMap, Symbolizer, SymbolsError};
use extractor::kmem::vmcoreinfo::VmcoreInfo;
use extractor::phys::PhysAddr;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct FtraceArgs {
    #[command(flatten)]
    input: DumpArgs,
    /// Read the buffer at this physical address (the start of its
    /// reserve_mem or memmap range) instead of searching the dump for it;
    /// SIZE bounds it. A device such as /dev/mem needs it.
    #[arg(long, value_name = "ADDR[:SIZE]", value_parser = parse_phys)]
    ftrace: Option<(PhysAddr, Option<u64>)>,
    /// A copy of the writing boot's /sys/kernel/tracing/events (or the
    /// file `crashring recover` keeps of each kernel release in
    /// /var/lib/crashring/ftrace-formats/), which names its events and
    /// their fields; without it an event other than ftrace's own shows as
    /// its id and bytes.
    #[arg(long, value_name = "PATH")]
    ftrace_formats: Option<PathBuf>,
    /// The writing kernel's symbols: its System.map (the real one, from
    /// Debian's -dbg package) or a copy of /proc/kallsyms of any boot of
    /// that kernel (the next boot's own will do), which names the code
    /// addresses of function entries. The writing boot's placement comes
    /// from the dump's VMCOREINFO or from what ftrace saved beside the
    /// buffer.
    #[arg(long, value_name = "FILE")]
    symbols: Option<PathBuf>,
}

pub fn run(args: FtraceArgs) -> Result<u8> {
    let path = args.input.input.display();
    let formats = match &args.ftrace_formats {
        Some(dir) => Some(Formats::load(dir).context("reading the event formats")?),
        None => None,
    };
    let map = match &args.symbols {
        Some(file) => Some(SymbolMap::load(file).context("reading the symbol map")?),
        None => None,
    };
    // A buffer found but unreadable is said here and makes the exit
    // status 1, as a damaged one does.
    let mut unreadable = false;
    let (instances, dump): (Vec<Instance>, _) = match args.ftrace {
        Some((base, size)) => {
            let dump = args.input.open_unscanned()?;
            let i = ftrace::read_at(dump.memory.as_ref(), base, size)
                .with_context(|| format!("{path}"))?;
            (vec![i], dump)
        }
        None => {
            let dump = args.input.open()?;
            let mut found = Vec::new();
            for f in ftrace::find(dump.memory.as_ref()) {
                match f {
                    Ok(i) => found.push(i),
                    Err(e) => {
                        eprintln!("crashring: {path}: {e}");
                        unreadable = true;
                    }
                }
            }
            (found, dump)
        }
    };
    if instances.is_empty() {
        bail!("{path}: no persistent ftrace buffer found");
    }
    for i in &instances {
        report(&path.to_string(), i);
    }
    let info = dump.vmcoreinfo.as_deref().map(VmcoreInfo::parse);
    let symbolizers = match &map {
        Some(map) => instances
            .iter()
            .map(|i| symbolizer(i, map, info.as_ref()))
            .collect::<Result<Vec<_>>>()?,
        None => instances.iter().map(|_| None).collect(),
    };
    write_to(None, |out| {
        for (i, symbols) in instances.iter().zip(&symbolizers) {
            if instances.len() > 1 {
                writeln!(out, "==== ftrace buffer at {:#x} ====", i.base)?;
            }
            ftrace::write_text(out, i, formats.as_ref(), symbols.as_ref())?;
        }
        Ok(())
    })?;
    Ok(u8::from(
        unreadable || instances.iter().any(Instance::damaged),
    ))
}

/// `map` placed where the boot that wrote `i` put the kernel, said on
/// stderr; without anything to place it by, the addresses stay numbers
/// (said too). A map of another kernel is an error.
fn symbolizer<'a>(
    i: &Instance,
    map: &'a SymbolMap,
    info: Option<&VmcoreInfo>,
) -> Result<Option<Symbolizer<'a>>> {
    match Symbolizer::new(map, info, i.kernel_text) {
        Ok(s) => {
            eprintln!(
                "crashring: ftrace buffer at {:#x}: code addresses named by the symbol map, placed by {}",
                i.base, s.anchor
            );
            Ok(Some(s))
        }
        Err(e @ SymbolsError::NoAnchor) => {
            eprintln!(
                "crashring: ftrace buffer at {:#x}: code addresses stay numbers: {e}",
                i.base
            );
            Ok(None)
        }
        Err(e) => {
            Err(e).with_context(|| format!("the symbol map for the ftrace buffer at {:#x}", i.base))
        }
    }
}

/// What was found, on stderr: the buffer, then each CPU and its losses
/// (a run of empty CPUs on one line: a box has many possible CPUs).
fn report(path: &str, i: &Instance) {
    eprintln!(
        "crashring: {path}: ftrace buffer at {:#x}..{:#x} ({}), {} CPUs; time stamps are the writing boot's trace clock (\"local\" unless it was changed), in nanoseconds",
        i.base,
        i.end,
        i.generation,
        i.cpus.len()
    );
    let mut empty: Option<(u32, u32)> = None;
    let flush = |empty: &mut Option<(u32, u32)>| match empty.take() {
        Some((a, b)) if a == b => eprintln!("crashring:   cpu {a}: empty"),
        Some((a, b)) => eprintln!("crashring:   cpus {a}-{b}: empty"),
        None => {}
    };
    for c in &i.cpus {
        if c.state == CpuState::Empty {
            empty = Some(empty.map_or((c.cpu, c.cpu), |(a, _)| (a, c.cpu)));
            continue;
        }
        flush(&mut empty);
        let t = &c.tally;
        eprint!(
            "crashring:   cpu {}: {} events in {} sub-buffers, {}",
            c.cpu,
            c.events.len(),
            t.kept,
            c.state
        );
        if t.invalid + t.unreadable > 0 {
            eprint!("; {} invalid, {} not in the dump", t.invalid, t.unreadable);
        }
        if t.dropped_earlier > 0 {
            eprint!("; {} dropped by an earlier boot", t.dropped_earlier);
        }
        if t.after_loss > 0 {
            eprint!("; {} follow events the writer lost", t.after_loss);
        }
        eprintln!();
        for loss in &c.losses {
            eprintln!("crashring:     {loss}");
        }
    }
    flush(&mut empty);
}
