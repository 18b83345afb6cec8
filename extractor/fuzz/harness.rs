//! The bodies of the extractor's fuzz targets, shared with the test that
//! replays committed findings under `cargo test`
//! (`tests/fuzz_regressions.rs`). The including crate provides `synth`
//! (`tests/common/synth.rs`), which builds the seed dumps,
//! `printk_ring` (`tests/common/printk_ring.rs`), a kernel's printk ring,
//! `ramoops_area` (`tests/common/ramoops_area.rs`), a ramoops area, and
//! `ftrace_area` (`tests/common/ftrace_area.rs`), a persistent ftrace
//! buffer.
//!
//! Every target but `decompress` takes the same input encoding. The first
//! byte picks the mode: odd means "the rest is the whole file"; even means
//! "take seed dump number `data[1]` (modulo the target's seeds) and
//! overwrite bytes of it with the rest, as (24-bit LE offset, value)
//! quadruples", which gets the fuzzer past checksums and magic numbers it
//! would not find alone.
//!
//! Property: no panic, no hang, memory bounded by the input. Every target
//! exercises what a container leads to (memory map, reads, scan, decode,
//! the summary and merged text); `open_dump`, the whole command's target,
//! also runs every output writer and redaction over each region found.
//! Those consume decoded regions, whatever container carried them, so the
//! single-container targets leave them out and run two to three times as
//! many inputs a second on their own parser. What it found is returned as text (the container, its
//! warnings and present bytes, each region's summary and diagnostics), for
//! the regression test to check that each committed finding still reaches
//! the code it was about.

use crate::ftrace_area;
use crate::printk_ring;
use crate::ramoops_area;
use crate::synth::{self, load, Kdump, Load, LZO, SNAPPY, ZLIB, ZSTD};
use extractor::discover::{self, Found};
use extractor::foreign::bert;
use extractor::foreign::ftrace;
use extractor::foreign::ftrace::event::Formats;
use extractor::foreign::printk;
use extractor::foreign::ramoops::{self, Layout, ZoneKind};
use extractor::foreign::reed_solomon;
use extractor::input::kdump::codecs::decompress_page;
use extractor::input::source::Source;
use extractor::input::{self, flat::FlatSource, Dump};
use extractor::kmem::symbols::{KernelText, SymbolMap, Symbolizer};
use extractor::output::select::Selection;
use extractor::output::{kernel_log, tracedat, Format, Overlay, RegionView, Writer};
use extractor::phys::PhysAddr;
use extractor::recover::RegionKey;
use pstore_ring::read::{HeaderTrust, PagedTrace, Region};
use pstore_ring::text::{write_paged_summary, Line};
use std::fmt::Write;
use std::sync::{Arc, OnceLock};

/// Which parser a target drives.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// Detection and whichever container the bytes turn out to be.
    Open,
    /// The ELF core reader alone.
    Elf,
    /// The kdump-compressed reader alone.
    Kdump,
    /// The flattened-format reassembly, then what it holds.
    Flattened,
    /// One page through a codec: `data[0]` picks zlib, lzo, snappy or
    /// zstd, `data[1]` the page size (low 2 bits) and whether the rest is
    /// the compressed page (bit 7 clear) or (16-bit LE offset, value)
    /// patches to a real compressed page of seed memory (bit 7 set).
    Decompress,
    /// A user log placed on a seed region's clock (`--add-log`): the
    /// input is the log.
    Logs,
    /// A recorded debug message formatted as the kernel would: the
    /// first byte is the format's length, the format follows, the rest
    /// is the recorded arguments (pstore-ring's `debug_args`).
    DebugMessage,
    /// A message on crashring-request.socket: the input is parsed as the
    /// service parses a request and as the client parses an answer; what
    /// parses must encode back to a message that parses the same.
    Request,
    /// The kernel's printk ring read from a dump through its VMCOREINFO
    /// (x86-64's page-table walk or arm64's image and linear map, the
    /// ring's descriptors, infos and data), then written as `crashring
    /// dmesg` writes it: seeds are an ELF and a kdump-compressed vmcore of
    /// a ring, and an arm64 kernel's ELF vmcore of it.
    Printk,
    /// pstore/ramoops zones read from a raw image by a layout (the seed's,
    /// with ECC, or cut for 3 CPUs, picked by the input's last byte), as
    /// `crashring pstore` reads them: headers, wrapped text, dmesg
    /// headers, inflation, ftrace records. The seed is an area with a zone
    /// of every kind.
    Ramoops,
    /// The kernel's persistent ftrace buffers in a raw image, found by a
    /// search and read at the image's start, as `crashring ftrace` reads
    /// them: descriptors, order, sub-buffers, events. Seeds are a buffer
    /// in each of the three layouts (four descriptor sizes).
    Ftrace,
    /// Event formats as `--ftrace-formats FILE` reads them (the input is
    /// the file), then an event of each id they give described by them:
    /// fields at hostile offsets and sizes, `__data_loc` strings. The seed
    /// is five of 6.12's formats.
    FtraceFormats,
    /// A symbol map as `--symbols FILE` reads it (the input is the file),
    /// placed 2 MiB from where it says, then addresses across its text
    /// named as a function entry names them. The seed is the lines of a
    /// 6.12 guest's kallsyms the qemu-dump scenario uses.
    SymbolMap,
    /// ACPI's Boot Error Region as `/sys/firmware/acpi/tables/data/BERT`
    /// shows it: the input is the region, walked block by block and
    /// written as `logs/firmware-BERT.txt` writes it. The seed is a fatal
    /// memory error beside a corrected one the kernel cleared.
    Bert,
    /// A bundle's `MANIFEST.json`, a NUL byte, then its `events.jsonl`,
    /// made into rows as `crashring export --parquet` makes them: the
    /// crashes rows of the manifest's regions, then an events row of each
    /// line. The seed is a bundle's two files.
    Export,
}

impl Target {
    /// Every target with its `fuzz_targets/` name, which is also its folder
    /// under `regressions/`.
    pub const ALL: [(&'static str, Target); 15] = [
        ("open_dump", Target::Open),
        ("elf", Target::Elf),
        ("kdump", Target::Kdump),
        ("flattened", Target::Flattened),
        ("decompress", Target::Decompress),
        ("logs", Target::Logs),
        ("debug_message", Target::DebugMessage),
        ("request", Target::Request),
        ("printk", Target::Printk),
        ("ramoops", Target::Ramoops),
        ("ftrace", Target::Ftrace),
        ("ftrace_formats", Target::FtraceFormats),
        ("symbol_map", Target::SymbolMap),
        ("bert", Target::Bert),
        ("export", Target::Export),
    ];
}

/// Where the seeds' region lives, and how much memory they cover.
const REGION: usize = 0x4000;
const REGION_SIZE: usize = 0x10000;
const MEM: usize = 0x18000;

/// The seeds' memory, built once per process.
fn memory() -> &'static [u8] {
    static MEMORY: OnceLock<Vec<u8>> = OnceLock::new();
    MEMORY.get_or_init(|| {
        let mut mem = synth::image_sized(REGION, 4096, REGION_SIZE, 150);
        mem.resize(MEM, 0);
        mem
    })
}

fn elf_seeds(mem: &[u8]) -> Vec<Vec<u8>> {
    let filtered = [
        load(0, 0x14000),
        Load {
            paddr: 0x14000,
            memsz: 0x4000,
            filesz: 0x1000,
        },
    ];
    vec![
        synth::elf(
            mem,
            &[load(0, MEM as u64)],
            Some("OSRELEASE=6.12.0\n"),
            2,
            false,
        ),
        synth::elf(
            mem,
            &[load(0, 0x8000), load(0x8000, 0x10000)],
            None,
            1,
            true,
        ),
        synth::elf(mem, &filtered, None, 4, false),
    ]
}

fn kdump_seeds(mem: &[u8]) -> Vec<Vec<u8>> {
    let k = |codec, big_endian| Kdump {
        codec,
        excluded: &[0x15, 0x16],
        lost: &[0x17],
        vmcoreinfo: Some("OSRELEASE=6.1.0\nCRASHTIME=1700000000\n"),
        big_endian,
        ..Default::default()
    };
    vec![
        synth::kdump(mem, &k(ZLIB, false)),
        synth::kdump(mem, &k(LZO, true)),
        synth::kdump(mem, &k(SNAPPY, false)),
        synth::kdump(mem, &k(ZSTD, false)),
    ]
}

/// Vmcores of a printk ring: ELF and kdump-compressed, and an arm64
/// kernel's ELF (the ring by its image and linear map).
fn printk_seeds() -> Vec<Vec<u8>> {
    let mem = printk_ring::six_records();
    let note = printk_ring::note();
    let kdump = Kdump {
        codec: ZLIB,
        vmcoreinfo: Some(&note),
        ..Default::default()
    };
    let mut arm64 = mem.clone();
    printk_ring::arm64::repoint(&mut arm64);
    let arm64_note = printk_ring::arm64::note();
    vec![
        synth::elf(&mem, &[load(0, mem.len() as u64)], Some(&note), 1, false),
        synth::kdump(&mem, &kdump),
        synth::elf(
            &arm64,
            &[load(0, arm64.len() as u64)],
            Some(&arm64_note),
            1,
            false,
        ),
    ]
}

/// The seed dumps of a target, built once per process.
fn seeds(target: Target) -> &'static [Vec<u8>] {
    static ALL: OnceLock<[Vec<Vec<u8>>; 7]> = OnceLock::new();
    let [open, elf, kdump, flat, printk, ramoops, ftrace] = ALL.get_or_init(|| {
        let mem = memory();
        let elf = elf_seeds(mem);
        let kdump = kdump_seeds(mem);
        let flat = vec![synth::flatten(&kdump[0]), synth::flatten(&elf[0])];
        let open = [vec![mem.to_vec()], elf.clone(), kdump.clone(), flat.clone()].concat();
        [
            open,
            elf,
            kdump,
            flat,
            printk_seeds(),
            ramoops_seeds(),
            ftrace_area::LAYOUTS.map(ftrace_area::seed).to_vec(),
        ]
    });
    match target {
        Target::Open => open,
        Target::Elf => elf,
        Target::Kdump => kdump,
        Target::Flattened => flat,
        Target::Printk => printk,
        Target::Ramoops => ramoops,
        Target::Ftrace => ftrace,
        Target::Decompress
        | Target::Logs
        | Target::DebugMessage
        | Target::Request
        | Target::FtraceFormats
        | Target::SymbolMap
        | Target::Bert
        | Target::Export => &[],
    }
}

/// The file an input stands for (see the module comment).
fn file_of(target: Target, data: &[u8]) -> Option<Vec<u8>> {
    let (&mode, rest) = data.split_first()?;
    if mode & 1 == 1 {
        return Some(rest.to_vec());
    }
    let (&pick, patches) = rest.split_first()?;
    let seeds = seeds(target);
    let mut file = seeds.get(usize::from(pick) % seeds.len())?.clone();
    for p in patches.chunks_exact(4) {
        let at = u32::from_le_bytes([p[0], p[1], p[2], 0]) as usize % file.len();
        file[at] = p[3];
    }
    Some(file)
}

pub fn run(target: Target, data: &[u8]) -> String {
    match target {
        Target::Decompress => return decompress(data),
        Target::Logs => return logs(data),
        Target::DebugMessage => return debug_message(data),
        Target::Request => return request(data),
        Target::FtraceFormats => return ftrace_formats(data),
        Target::SymbolMap => return symbol_map(data),
        Target::Bert => return bert::text(data),
        Target::Export => return export_rows(data),
        _ => {}
    }
    let Some(file) = file_of(target, data) else {
        return String::new();
    };
    match target {
        Target::Ramoops => return ramoops_zones(file, data.last().copied().unwrap_or(0)),
        Target::Ftrace => return ftrace_buffers(file),
        _ => {}
    }
    let source: Arc<dyn Source> = Arc::new(file);
    let dump = match target {
        Target::Elf => input::elf::open(source),
        Target::Kdump => input::kdump::open(source),
        Target::Flattened => match FlatSource::open(source) {
            Ok(flat) => input::open(Arc::new(flat)),
            Err(e) => Err(e),
        },
        _ => input::open(source),
    };
    let outputs = matches!(target, Target::Open);
    let mut out = String::new();
    match dump {
        Ok(dump) if matches!(target, Target::Printk) => kernel_printk(&dump, &mut out),
        Ok(dump) => exercise(&dump, outputs, &mut out),
        Err(e) => {
            let _ = writeln!(out, "{e}");
        }
    }
    out
}

/// The ramoops target's areas: the plain seed, and the ECC one with the
/// parity ramoops keeps.
fn ramoops_seeds() -> Vec<Vec<u8>> {
    let Some(rs) = reed_solomon::Codec::new(16) else {
        return vec![ramoops_area::seed()];
    };
    vec![
        ramoops_area::seed(),
        ramoops_area::seed_ecc(&|block: &[u8]| rs.encode(block)),
    ]
}

/// The layouts the ramoops target reads its image by.
const RAMOOPS_LAYOUTS: [&str; 3] = [
    ramoops_area::LAYOUT,
    ramoops_area::ECC_LAYOUT,
    "0:64K,record=4K,console=0,ftrace=0,pmsg=0",
];

/// Every zone of a raw image, by the layout `pick` names.
fn ramoops_zones(file: Vec<u8>, pick: u8) -> String {
    let Ok(layout) = RAMOOPS_LAYOUTS[usize::from(pick) % RAMOOPS_LAYOUTS.len()].parse::<Layout>()
    else {
        return "bad layout".to_string();
    };
    let dump = match input::open(Arc::new(file)) {
        Ok(dump) => dump,
        Err(e) => return e.to_string(),
    };
    let zones = match ramoops::read(dump.memory.as_ref(), &layout) {
        Ok((_, zones)) => zones,
        Err(e) => return e.to_string(),
    };
    let mut out = String::new();
    for z in &zones {
        let _ = writeln!(out, "{}: {}", z.file_name(), z.state);
        if let (ZoneKind::Ftrace, Some((lines, _))) = (z.plan.kind, z.record()) {
            out.push_str(&String::from_utf8_lossy(&lines));
        }
    }
    out
}

/// The formats in `data`, and a 64-byte event of each of their first ids
/// described by them.
fn ftrace_formats(data: &[u8]) -> String {
    let formats = Formats::parse(&String::from_utf8_lossy(data));
    let mut out = String::new();
    for id in formats.ids().into_iter().take(32) {
        let mut event: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
        event[..2].copy_from_slice(&id.to_le_bytes());
        let _ = writeln!(
            out,
            "{}",
            ftrace::event::describe(&event, Some(&formats), None)
        );
    }
    out
}

/// The map in `data` placed 2 MiB higher, and 17 function entries across
/// its text (4 bytes into each sixteenth) named by it.
fn symbol_map(data: &[u8]) -> String {
    let map = match SymbolMap::parse(&String::from_utf8_lossy(data)) {
        Ok(map) => map,
        Err(e) => return e.to_string(),
    };
    let Some(start) = map.address("_text") else {
        return String::new();
    };
    let end = map.address("_etext").unwrap_or(start.wrapping_add(0x1000));
    let shift = 0x20_0000u64;
    let text = KernelText::Symbol {
        name: "_text",
        addr: start.wrapping_add(shift),
    };
    let symbols = match Symbolizer::new(&map, None, Some(text)) {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    let step = end.wrapping_sub(start) / 16;
    let mut out = String::new();
    for i in 0..=16u64 {
        let at = start
            .wrapping_add(step.wrapping_mul(i))
            .wrapping_add(4 + shift);
        let mut event = vec![1, 0, 0, 0, 1, 0, 0, 0];
        event.extend(at.to_le_bytes());
        event.extend(start.wrapping_add(shift).to_le_bytes());
        let _ = writeln!(
            out,
            "{}",
            ftrace::event::describe(&event, None, Some(&symbols))
        );
    }
    out
}

/// The persistent ftrace buffers of a raw image: searched for, and read
/// at its start; each CPU's state, tally and losses, and every event as
/// `crashring ftrace` prints it.
fn ftrace_buffers(file: Vec<u8>) -> String {
    let len = file.len() as u64;
    let dump = match input::open(Arc::new(file)) {
        Ok(dump) => dump,
        Err(e) => return e.to_string(),
    };
    let mem = dump.memory.as_ref();
    let mut out = String::new();
    let at_start = ftrace::read_at(mem, PhysAddr(0), Some(len));
    for found in ftrace::find(mem).into_iter().chain([at_start]) {
        let instance = match found {
            Ok(i) => i,
            Err(e) => {
                let _ = writeln!(out, "{e}");
                continue;
            }
        };
        let _ = writeln!(out, "{:#x}: {}", instance.base, instance.generation);
        for c in &instance.cpus {
            let _ = writeln!(out, "cpu {}: {}, {:?}", c.cpu, c.state, c.tally);
            for loss in &c.losses {
                let _ = writeln!(out, "{loss}");
            }
        }
        // The first and last events said in full: the rest only repeat
        // the same code at the price of a string each.
        let mut count = 0usize;
        let mut last = std::collections::VecDeque::with_capacity(16);
        for (cpu, ts, data) in instance.merged() {
            if count < 16 {
                let _ = writeln!(
                    out,
                    "[{cpu}] {ts} {}",
                    ftrace::event::describe(data, None, None)
                );
            } else {
                if last.len() == 16 {
                    last.pop_front();
                }
                last.push_back((cpu, ts, data));
            }
            count += 1;
        }
        for (cpu, ts, data) in last {
            let _ = writeln!(
                out,
                "[{cpu}] {ts} {}",
                ftrace::event::describe(data, None, None)
            );
        }
        let _ = writeln!(out, "{count} events");
    }
    out
}

/// The dump's printk log, read and written both ways.
fn kernel_printk(dump: &Dump, out: &mut String) {
    match printk::of_dump(dump) {
        Some(Ok(log)) => {
            let (mut text, mut json) = (Vec::new(), Vec::new());
            let _ = kernel_log::write_text(&mut text, &log);
            let _ = kernel_log::write_jsonl(&mut json, &log);
            let _ = writeln!(
                out,
                "{} records, {} unreadable, {} failed",
                log.records.len(),
                log.skipped,
                log.failed
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "{e}");
        }
        None => {
            let _ = writeln!(out, "no VMCOREINFO");
        }
    }
}

fn decompress(data: &[u8]) -> String {
    let [codec, size, rest @ ..] = data else {
        return String::new();
    };
    let codec = [ZLIB, LZO, SNAPPY, ZSTD][usize::from(*codec) % 4];
    let mut page = vec![0u8; 512 << (size % 4)];
    let input = if size & 0x80 == 0 {
        rest.to_vec()
    } else {
        let mem = memory();
        let mut input = synth::compress(codec, &mem[REGION..REGION + page.len()]);
        for p in rest.chunks_exact(3) {
            let at = usize::from(u16::from_le_bytes([p[0], p[1]])) % input.len();
            input[at] = p[2];
        }
        input
    };
    match decompress_page(codec, &input, &mut page) {
        Ok(()) => "decompressed".into(),
        Err(e) => e,
    }
}

/// What every `logs` input is placed with: the seed region's clock and
/// the redactor a bundle runs its logs through, built once per process
/// (they depend only on the seed region, not on the input).
struct LogSetup {
    clock: extractor::bundle::logs::Clock<'static>,
    redactor: extractor::bundle::redact::TextRedactor<'static>,
}

fn log_setup() -> Option<&'static LogSetup> {
    use extractor::bundle::redact::{Class, Rules, TextRedactor};
    static RULES: OnceLock<Rules> = OnceLock::new();
    static SETUP: OnceLock<Option<LogSetup>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let mem = memory();
            let region =
                Region::parse(&mem[REGION..REGION + REGION_SIZE], HeaderTrust::Checksummed).ok()?;
            let trace = region.decode_paged();
            let clock = extractor::bundle::logs::Clock::new(
                &region,
                trace.streams.iter().flat_map(|s| s.events()),
                region.wall_clock_of_pages(&trace),
            );
            // Redacted as a bundle does, then placed from the copy.
            let rules = RULES.get_or_init(|| Rules {
                classes: vec![
                    Class::DropPrefix {
                        event: "printk".into(),
                        prefix: "x".into(),
                    },
                    Class::Hash {
                        event: "printk".into(),
                        field: "text".into(),
                    },
                ],
                raw_pointers: false,
                input_layer: false,
                since_ns: None,
                grant: None,
            });
            let redactor = TextRedactor::new(&region, &RegionKey::of(&region), rules);
            Some(LogSetup { clock, redactor })
        })
        .as_ref()
}

fn logs(data: &[u8]) -> String {
    let Some(setup) = log_setup() else {
        return String::new();
    };
    let mut copy = Vec::new();
    if let Err(e) = extractor::bundle::logs::redact(data, &mut copy, &setup.redactor) {
        return e.to_string();
    }
    match setup.clock.place("fuzz", &copy[..]) {
        Ok(log) => {
            assert!(log.placed.len() as u64 + log.placement.unplaced <= log.lines);
            let mut bytes = Vec::new();
            let _ = extractor::output::perfetto::log_track(&mut bytes, "fuzz", 0, &log.placed);
            format!("{} of {} lines placed", log.placed.len(), log.lines)
        }
        Err(e) => e.to_string(),
    }
}

/// The longest line printk keeps, the limit the formatter is given.
const LINE_MAX: usize = pstore_ring::read::PRINTK_LINE_MAX;

fn export_rows(data: &[u8]) -> String {
    use extractor::export::rows::{crashes, Event};
    let (manifest, lines) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let manifest: serde_json::Value = match serde_json::from_slice(manifest) {
        Ok(m) => m,
        Err(e) => return format!("MANIFEST.json is not JSON: {e}"),
    };
    let (rows, created) = match crashes(&manifest) {
        Ok(r) => r,
        Err(missing) => return format!("MANIFEST.json lacks {missing}"),
    };
    let mut out = format!(
        "{} crashes rows, filed under {}",
        rows.len(),
        rows[0].day(created)
    );
    for r in &rows {
        let cells = r.cells("bundle", "tool");
        let _ = write!(out, "\n{:?} {:?} {:?}", cells[2], cells[7], cells[13]);
    }
    let (mut events, mut left_out) = (0, 0);
    for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(Event::parse);
        match parsed {
            Ok(e) => {
                let cells = e.cells("bundle", &rows[0]);
                if events == 0 {
                    let _ = write!(
                        out,
                        "\nfirst event: {:?} {:?} {:?} {:?}",
                        cells[9], cells[11], cells[13], cells[14]
                    );
                }
                events += 1;
            }
            Err(_) => left_out += 1,
        }
    }
    let _ = write!(out, "\n{events} events rows, {left_out} lines left out");
    out
}

fn request(data: &[u8]) -> String {
    use crashring_request::{Reply, Request};
    let asked = match Request::parse(data) {
        Ok(r) => {
            assert_eq!(Request::parse(&r.encode()).as_ref(), Ok(&r));
            format!("request {r:?}")
        }
        Err(e) => format!("refused request: {e}"),
    };
    let answered = match Reply::parse(data) {
        Ok(r) => {
            assert_eq!(Reply::parse(&r.encode()).as_ref(), Ok(&r));
            format!("reply {r:?}")
        }
        Err(e) => format!("refused reply: {e}"),
    };
    format!("{asked}\n{answered}")
}

fn debug_message(data: &[u8]) -> String {
    use pstore_ring::debug_args::DebugArgs;
    use pstore_ring::kprintf::{format, Pointers};
    let Some((&n, rest)) = data.split_first() else {
        return String::new();
    };
    let (fmt, args) = rest.split_at(usize::from(n).min(rest.len()));
    for endian in [pstore_ring::Endian::Little, pstore_ring::Endian::Big] {
        if let Ok(out) = format(
            fmt,
            &mut DebugArgs::new(args, endian),
            &Pointers::Hashed([1; 16]),
            LINE_MAX,
        ) {
            assert!(out.text.len() <= LINE_MAX && out.len >= out.text.len());
        }
    }
    match format(
        fmt,
        &mut DebugArgs::new(args, pstore_ring::Endian::Little),
        &Pointers::Raw,
        LINE_MAX,
    ) {
        Ok(out) => String::from_utf8_lossy(&out.text).into_owned(),
        Err(e) => e.to_string(),
    }
}

/// What the CLI does with an opened dump; with `outputs`, everything.
fn exercise(dump: &Dump, outputs: bool, out: &mut String) {
    let _ = (dump.vmcoreinfo_value("OSRELEASE"), dump.cpus);
    let mem = &*dump.memory;
    let _ = writeln!(
        out,
        "{}: {} bytes present",
        dump.container,
        mem.map().present_bytes()
    );
    for w in &dump.warnings {
        let _ = writeln!(out, "{w}");
    }
    let mut page = [0u8; 4096];
    for run in mem.map().runs().iter().take(64) {
        let _ = mem.read(run.start, &mut page);
        let _ = mem.read(PhysAddr(run.end.0.saturating_sub(100)), &mut page);
    }
    // The search takes the kernel's ftrace descriptors on the way, as
    // `crashring info` does.
    let mut ftrace_hits = Vec::new();
    let scanned = discover::scan(mem, &mut |_| {}, &mut |addr, chunk| {
        ftrace_hits.extend(ftrace::descriptor_hits(addr, chunk));
    });
    for found in scanned.found {
        decode(&found, HeaderTrust::Checksummed, outputs, out);
    }
    for f in ftrace::read_hits(mem, &ftrace_hits) {
        let _ = writeln!(out, "ftrace: {:?}", f.map(|i| i.cpus.len()));
    }
    if let Ok(found) = discover::read_at(mem, PhysAddr(REGION as u64), None, HeaderTrust::Lenient) {
        decode(&found, HeaderTrust::Lenient, outputs, out);
    }
}

fn decode(found: &Found, trust: HeaderTrust, outputs: bool, out: &mut String) {
    let _ = (&found.holes, &found.copies, found.unaccounted());
    let Ok(region) = Region::parse(&found.bytes, trust) else {
        return;
    };
    let region = region.with_absent(found.absent());
    let trace = region.decode_paged();
    let _ = write_paged_summary(out, &region, &trace, true);
    for d in &trace.diagnostics {
        let _ = writeln!(out, "{d}");
    }
    for item in pstore_ring::merge::merge_pages(&trace.streams) {
        let _ = writeln!(out, "{}", Line::of(&item.as_item(), &region));
    }
    if !outputs {
        return;
    }
    let mut bytes = Vec::new();
    // Every writer sees whatever a hostile region decodes to.
    write_every_format(&region, &trace, None, &mut bytes);

    // Redaction rewrites hostile payloads; what it makes is written again.
    use extractor::bundle::redact::{plan, Class, Rules};
    let rules = Rules {
        classes: vec![
            Class::Hash {
                event: "printk".into(),
                field: "text".into(),
            },
            Class::DropPrefix {
                event: "marker".into(),
                prefix: "x".into(),
            },
        ],
        raw_pointers: false,
        input_layer: false,
        since_ns: None,
        grant: None,
    };
    let plan = plan(&region, &RegionKey::of(&region), &trace, &rules);
    write_every_format(
        &plan.region(&region),
        &trace,
        Some(&plan.overlay),
        &mut bytes,
    );
}

/// Writes the trace in every format: the stream formats into `bytes`,
/// trace.dat into memory (file formats that need a directory, CTF, write
/// per stream what trace.dat writes per CPU).
fn write_every_format(
    region: &Region,
    trace: &PagedTrace,
    overlay: Option<&Overlay>,
    bytes: &mut Vec<u8>,
) {
    let view = RegionView {
        index: 0,
        addr: 0,
        region,
        trace,
        overlay,
        pointers: pstore_ring::kprintf::Pointers::Hashed([1; 16]),
    };
    let items: Vec<_> = view.merged().collect();
    for format in Format::all() {
        if let Writer::Items(w) = format.writer() {
            let _ = w.begin(bytes, &view, true);
            w.items(bytes, &items, &view);
            let _ = w.end(bytes);
        }
    }
    let mut file = std::io::Cursor::new(Vec::new());
    let _ = tracedat::write(&mut file, &view, &Selection::default());
}
