//! pstore's RAM backend, ramoops (`fs/pstore/ram.c`, `ram_core.c`), read
//! from a dump or an image instead of the next boot's `/sys/fs/pstore`.
//!
//! The kernel cuts its area into zones in a fixed order (`ramoops_probe()`):
//! the dmesg zones (one crash report each), the console zone, the pmsg
//! zone and the ftrace zones (one per CPU when the area came from module
//! parameters). Kernels before 6.2 ("pstore/ram: Move pmsg init earlier";
//! Debian's 6.1 among them) put the ftrace zones before pmsg. Nothing in
//! memory says where one ends, so the reader takes the kernel's own
//! parameters ([`Layout`]) and plans the zones as `ramoops_init_przs()`
//! does, in both orders; the zones' headers (the ftrace zones sign with the
//! kernel's version code, the others without) say which order the memory
//! was laid out in, and confirm or refute the plan zone by zone.
//!
//! A zone is a circular buffer behind a 12-byte header (`struct
//! persistent_ram_buffer`: signature, start, size); its text is
//! `data[start..size]` followed by `data[..start]`, as
//! `persistent_ram_save_old()` copies it. A zone the kernel would discard
//! (start past size, size past the buffer, a dmesg zone without its `====`
//! header) is reported, never read. A console or pmsg zone whose pages
//! the dump holds only in part keeps the text it has; each range it lacks
//! is left out, never read as zeros, and said with its address. An
//! ftrace zone so read keeps each record it holds whole, where the kernel
//! put it, and counts those a gap touches; a dmesg zone needs its header
//! whole, then keeps its text as a console zone does or, compressed,
//! inflates up to the first gap (raw deflate cannot resume after one) and
//! says what comes after is lost.
//!
//! With `ecc=`, each zone keeps Reed-Solomon parity after its data, one
//! block per 128 data bytes and one for the header
//! (`persistent_ram_init_ecc()`); the header, then every block the record
//! covers, is corrected as the kernel corrects them before it reads the
//! zone (`persistent_ram_ecc_old()`), and each record ends with the
//! kernel's notice of what was found (`persistent_ram_ecc_string()`). A
//! block, the header's too, whose parity or data the dump lacks in part
//! is kept as it lies and counted unchecked.

mod layout;

pub use layout::{Layout, LayoutError, Order, ZoneKind, ZonePlan};

use super::reed_solomon::Codec;
use crate::phys::{PhysAddr, PhysError, PhysMemory};
use std::fmt;
use std::io::{self, Read};
use std::ops::Range;

/// `PERSISTENT_RAM_SIG`, "DBGC" read as a little-endian word. The ftrace
/// zones store it XORed with the kernel's `LINUX_VERSION_CODE`.
pub const SIG: u32 = 0x4347_4244;
/// `sizeof(struct persistent_ram_buffer)`.
pub const HEADER_SIZE: u64 = 12;
/// ramoops' default size of each zone kind (`MIN_MEM_SIZE`).
pub const DEFAULT_ZONE_SIZE: u64 = 4096;
/// `struct pstore_ftrace_record`: ip, parent_ip, ts (with the CPU in its
/// low 8 bits), 64-bit.
const FTRACE_RECORD_SIZE: usize = 24;
/// Data bytes per parity block (`ecc_info.block_size`, which module
/// parameters leave at its default).
const ECC_BLOCK: u64 = 128;
/// How many times its zone's buffer a compressed dmesg record may inflate
/// to: pstore inflates into `3 * psinfo->bufsize` bytes and keeps a record
/// that does not fit compressed (`decompress_record()` in
/// `fs/pstore/platform.c`), where ramoops' `bufsize` is its dmesg zones'
/// buffer (`ramoops_probe()`). Following it also bounds what hostile
/// input can make the reader hold to a few times the dump.
const INFLATE_RATIO: u64 = 3;
/// The granule a zone is read in where the dump lacks some of it: a dump
/// holds or lacks memory a page at a time.
const PAGE: u64 = 4096;
/// The missing ranges a zone's description names at most.
const MISSING_NAMED: usize = 8;

/// What a zone's parity found, counted as the kernel counts it: bytes
/// corrected, and blocks (the header one of them) it could not correct
/// and left as they were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EccTally {
    pub corrected_bytes: u64,
    pub bad_blocks: u64,
}

impl EccTally {
    fn count(&mut self, decoded: Result<usize, super::reed_solomon::Uncorrectable>) {
        match decoded {
            Ok(n) => self.corrected_bytes += n as u64,
            Err(_) => self.bad_blocks += 1,
        }
    }

    /// The notice the kernel puts after a record it read with ECC
    /// (`persistent_ram_ecc_string()`).
    pub fn notice(&self) -> String {
        if *self == EccTally::default() {
            "\nECC: No errors detected\n".into()
        } else {
            format!(
                "\nECC: {} Corrected bytes, {} unrecoverable blocks\n",
                self.corrected_bytes, self.bad_blocks
            )
        }
    }
}

/// A zone as the reader found it.
#[derive(Debug)]
pub struct Zone {
    pub plan: ZonePlan,
    pub state: ZoneState,
}

/// What a zone's header and data say.
#[derive(Debug)]
pub enum ZoneState {
    /// The signature is not there: ramoops never set this zone up with
    /// these parameters (or the memory is another's).
    NotRamoops {
        found: u32,
    },
    /// Set up and empty.
    Empty,
    /// A header the kernel would discard.
    Invalid {
        start: u32,
        size: u32,
    },
    /// The dump does not hold the zone's bytes.
    Unreadable(PhysError),
    /// A dmesg zone without the `====` header the kernel requires.
    NoDmesgHeader,
    /// A compressed dmesg record that does not inflate.
    BadCompression(String),
    Text(ZoneText),
}

/// A zone's contents, in the order they were written.
#[derive(Debug)]
pub struct ZoneText {
    pub bytes: Vec<u8>,
    /// The dmesg header's time (seconds, microseconds).
    pub time: Option<(i64, u32)>,
    /// Whether the dmesg record was stored compressed (and is inflated in
    /// `bytes`, unless `inflate_refused`).
    pub compressed: bool,
    /// The kernel's limit on the record's inflated size, where the
    /// compressed record inflates past it: pstore then refuses to inflate
    /// it and shows it compressed (`.enc.z`), and so do `bytes`.
    pub inflate_refused: Option<u64>,
    /// The version code an ftrace zone's signature carries.
    pub version: Option<u32>,
    /// Whether the writer went round the buffer (older text overwritten).
    pub wrapped: bool,
    /// What the parity found, with ECC.
    pub ecc: Option<EccTally>,
    /// ECC blocks (the header's among them) the dump holds but not all of
    /// their parity or of their data: what it holds of them is kept as it
    /// lies, neither checked nor corrected.
    pub unchecked_blocks: u64,
    /// The zone's bytes the dump does not hold, in text order: left out
    /// of `bytes`, never read as zeros. A dmesg zone with one in its
    /// header is unreadable.
    pub missing: Vec<Missing>,
    /// The ftrace records that lie in part where the dump lacks memory:
    /// left out whole, never pieced together across a gap.
    pub torn_records: u64,
    /// The part of a compressed record from its first gap on, which
    /// cannot be inflated: `bytes` stop where it starts.
    pub uninflated: Option<Uninflated>,
}

/// Bytes of a zone the dump does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missing {
    /// Where they lie.
    pub addr: PhysAddr,
    pub len: u64,
    /// Where in the zone's text they would be: the text kept before them.
    pub at: usize,
}

/// The part of a compressed record from the first byte the dump lacks
/// to the record's end: raw deflate cannot resume after a gap, so none of
/// it is inflated, and the text it holds is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uninflated {
    /// Where it starts in the compressed stream (the header not counted).
    pub offset: u64,
    /// Where that byte lies.
    pub addr: PhysAddr,
    /// Its compressed bytes, those the dump holds after the gap included.
    pub len: u64,
}

impl ZoneText {
    /// The zone's bytes the dump does not hold, counted.
    pub fn missing_bytes(&self) -> u64 {
        self.missing.iter().map(|m| m.len).sum()
    }

    /// The ECC blocks left unchecked, in words; `None` when none.
    pub fn unchecked_note(&self) -> Option<String> {
        match self.unchecked_blocks {
            0 => None,
            1 => Some("1 ECC block unchecked: the dump lacks part of its parity or data".into()),
            n => Some(format!(
                "{n} ECC blocks unchecked: the dump lacks part of their parity or data"
            )),
        }
    }

    /// What the dump lacks of the zone, in words; `None` when nothing.
    pub fn missing_note(&self) -> Option<String> {
        if self.missing.is_empty() {
            return None;
        }
        let mut note = format!("{} bytes not in the dump left out (", self.missing_bytes());
        for (i, m) in self.missing.iter().take(MISSING_NAMED).enumerate() {
            if i > 0 {
                note.push_str(", ");
            }
            note.push_str(&format!("{} at {:#x}", m.len, m.addr));
        }
        if self.missing.len() > MISSING_NAMED {
            note.push_str(&format!(
                " and {} ranges more",
                self.missing.len() - MISSING_NAMED
            ));
        }
        note.push(')');
        match self.torn_records {
            0 => {}
            1 => note.push_str(", and the ftrace record that touches them"),
            n => note.push_str(&format!(", and the {n} ftrace records that touch them")),
        }
        if let Some(rest) = self.uninflated {
            note.push_str(&format!(
                "; the compressed record is inflated up to its first gap only: its last {} compressed bytes, from offset {} ({:#x}) on, are lost",
                rest.len, rest.offset, rest.addr
            ));
        }
        Some(note)
    }
}

impl Zone {
    /// The zone's record as its `/sys/fs/pstore` file shows it (an ftrace
    /// zone's records one per line, without those the dump lacks part
    /// of), and the bytes of a partial ftrace record at its start, left
    /// out; `None` for a zone without one.
    pub fn record(&self) -> Option<(Vec<u8>, usize)> {
        let ZoneState::Text(t) = &self.state else {
            return None;
        };
        Some(match self.plan.kind {
            // pstore prints ftrace records one by one: the notice is not
            // a record.
            ZoneKind::Ftrace => {
                let (lines, partial) = ftrace_lines(t);
                (lines.into_bytes(), partial)
            }
            _ => {
                let mut bytes = t.bytes.clone();
                if let Some(ecc) = t.ecc {
                    bytes.extend(ecc.notice().as_bytes());
                }
                (bytes, 0)
            }
        })
    }

    /// The name the next boot's `/sys/fs/pstore` gives the record
    /// (`pstore_mkfile()`), for a zone that holds one. pstore shows the
    /// per-CPU ftrace zones merged as one record, id 0; each is named here
    /// by its CPU.
    pub fn file_name(&self) -> String {
        // pstore names a record it keeps compressed so (`pstore_mkfile()`).
        let refused = matches!(&self.state, ZoneState::Text(t) if t.inflate_refused.is_some());
        format!(
            "{}-ramoops-{}{}",
            self.plan.kind.name(),
            self.plan.index,
            if refused { ".enc.z" } else { "" }
        )
    }
}

impl ZoneState {
    /// Whether something the kernel wrote could not be read: the dump
    /// lacks it (or part of it), or a compressed record does not inflate
    /// (within the kernel's limit).
    pub fn lost(&self) -> bool {
        match self {
            ZoneState::Unreadable(_) | ZoneState::BadCompression(_) => true,
            ZoneState::Text(t) => !t.missing.is_empty() || t.inflate_refused.is_some(),
            _ => false,
        }
    }
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneState::NotRamoops { found } => write!(
                f,
                "no ramoops signature (found {found:#010x}): not set up with these parameters"
            ),
            ZoneState::Empty => f.write_str("empty"),
            ZoneState::Invalid { start, size } => write!(
                f,
                "invalid header (start {start}, size {size}): the kernel discards it"
            ),
            ZoneState::Unreadable(e) => write!(f, "unreadable: {e}"),
            ZoneState::NoDmesgHeader => {
                f.write_str("no `====` record header: the kernel discards it")
            }
            ZoneState::BadCompression(e) => write!(f, "compressed record does not inflate: {e}"),
            ZoneState::Text(t) => {
                write!(f, "{} bytes", t.bytes.len())?;
                if let Some((s, us)) = t.time {
                    write!(f, ", written at {s}.{us:06}")?;
                }
                if t.compressed {
                    f.write_str(", stored compressed")?;
                }
                if let Some(limit) = t.inflate_refused {
                    write!(
                        f,
                        " and kept so: it inflates past {limit} bytes, {INFLATE_RATIO} times the zone's buffer, which the kernel refuses"
                    )?;
                }
                if let Some(v) = t.version {
                    write!(f, ", kernel {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)?;
                }
                if t.wrapped {
                    f.write_str(", wrapped")?;
                }
                match t.ecc {
                    Some(e) if e == EccTally::default() => f.write_str(", ECC: no errors")?,
                    Some(e) => write!(
                        f,
                        ", ECC: {} bytes corrected, {} blocks uncorrectable",
                        e.corrected_bytes, e.bad_blocks
                    )?,
                    None => {}
                }
                if let Some(note) = t.unchecked_note() {
                    write!(f, ", {note}")?;
                }
                if let Some(note) = t.missing_note() {
                    write!(f, "; {note}")?;
                }
                Ok(())
            }
        }
    }
}

/// Reads every zone of `layout` from `mem`, in the order whose zones'
/// headers the memory holds (the current one when neither's or both's
/// do). A zone that cannot be read says why; the others are read all the
/// same.
pub fn read(mem: &dyn PhysMemory, layout: &Layout) -> Result<(Order, Vec<Zone>), LayoutError> {
    // The order is picked by the signatures alone; then each zone is read
    // once. A header the dump lacks counts for both orders.
    let signed = |order| -> Result<usize, LayoutError> {
        Ok(layout
            .zones(order)?
            .iter()
            .filter(|plan| {
                let mut sig = [0u8; 4];
                mem.read(plan.addr, &mut sig).is_err()
                    || signature(plan.kind, u32::from_le_bytes(sig)).is_ok()
            })
            .count())
    };
    let order = if signed(Order::FtraceFirst)? > signed(Order::PmsgFirst)? {
        Order::FtraceFirst
    } else {
        Order::PmsgFirst
    };
    let codec = layout.codec();
    let zones = layout
        .zones(order)?
        .into_iter()
        .map(|plan| Zone {
            state: read_zone(mem, layout, codec.as_ref(), &plan),
            plan,
        })
        .collect();
    Ok((order, zones))
}

/// Whether `sig` is the signature of a zone of `kind`; for an ftrace
/// zone, the version code it carries.
fn signature(kind: ZoneKind, sig: u32) -> Result<Option<u32>, ()> {
    match kind {
        ZoneKind::Ftrace => {
            let version = sig ^ SIG;
            // A version code is major << 16 | minor << 8 | patch: anything
            // wider is another signature.
            if version == 0 || version >> 24 != 0 {
                return Err(());
            }
            Ok(Some(version))
        }
        _ if sig != SIG => Err(()),
        _ => Ok(None),
    }
}

fn read_zone(
    mem: &dyn PhysMemory,
    layout: &Layout,
    codec: Option<&Codec>,
    plan: &ZonePlan,
) -> ZoneState {
    // The plan was checked: every zone has a buffer.
    let (buffer, blocks) = layout.geometry(plan.size).unwrap_or((0, 0));
    let data_at = plan.addr + HEADER_SIZE;
    let parity_at = data_at + buffer;
    let ecc = u64::from(layout.ecc_size);
    let mut header = [0u8; HEADER_SIZE as usize];
    if let Err(e) = mem.read(plan.addr, &mut header) {
        return ZoneState::Unreadable(e);
    }
    // The header is corrected before anything reads it; one whose parity
    // the dump lacks is read as it lies and counted unchecked, as a data
    // block is, rather than costing the zone.
    let mut tally = codec.map(|_| EccTally::default());
    let mut unchecked_blocks = 0;
    if let (Some(rs), Some(tally)) = (codec, &mut tally) {
        let mut parity = vec![0u8; ecc as usize];
        match mem.read(parity_at + blocks * ecc, &mut parity) {
            Ok(()) => tally.count(rs.decode(&mut header, &mut parity)),
            Err(_) => unchecked_blocks += 1,
        }
    }
    let word =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (sig, start, size) = (word(0), word(4), word(8));
    let Ok(version) = signature(plan.kind, sig) else {
        return ZoneState::NotRamoops { found: sig };
    };
    if start == 0 && size == 0 {
        return ZoneState::Empty;
    }
    if u64::from(size) > buffer || start > size {
        return ZoneState::Invalid { start, size };
    }
    // The buffer as it lies, up to its size, then (with ECC) to the end of
    // the last block that covers it, since that block's parity covers it
    // all.
    let (start, size) = (start as usize, size as usize);
    let covered = match codec {
        Some(_) => (size as u64).div_ceil(ECC_BLOCK),
        None => 0,
    };
    let span = (covered * ECC_BLOCK).clamp(size as u64, buffer) as usize;
    let mut data = vec![0u8; span];
    let mut lacking = read_present(mem, data_at, &mut data);
    if let (Some(rs), Some(tally)) = (codec, &mut tally) {
        let mut parity = vec![0u8; (covered * ecc) as usize];
        let parity_lacking = read_present(mem, parity_at, &mut parity);
        let lacking_in = |lacking: &[Lack], r: Range<usize>| -> usize {
            lacking
                .iter()
                .map(|(l, _)| l.end.min(r.end).saturating_sub(l.start.max(r.start)))
                .sum()
        };
        let (block, ecc) = (ECC_BLOCK as usize, ecc as usize);
        for (i, (bytes, par)) in data
            .chunks_mut(block)
            .zip(parity.chunks_mut(ecc))
            .enumerate()
        {
            // A block the dump lacks part of, or part of its parity, is
            // not decoded: its bytes there are kept as they lie,
            // unchecked, the rest left out. One it lacks all of keeps
            // nothing to check.
            let at = i * block;
            let gone = lacking_in(&lacking, at..at + bytes.len());
            if gone == bytes.len() {
                continue;
            }
            if gone == 0 && lacking_in(&parity_lacking, i * ecc..i * ecc + ecc) == 0 {
                tally.count(rs.decode(bytes, par));
            } else {
                unchecked_blocks += 1;
            }
        }
    }
    // The text from the writer's position to the size, then from the
    // buffer's start to the position, without what the dump lacks; the
    // lack the text's first gap lies in is kept for what it says.
    let mut bytes = Vec::with_capacity(size);
    let mut missing = Vec::new();
    let mut first_gap = None;
    for part in [start..size, 0..start] {
        let mut at = part.start;
        for (i, (l, _)) in lacking.iter().enumerate() {
            let (from, to) = (l.start.max(part.start), l.end.min(part.end));
            if from >= to {
                continue;
            }
            bytes.extend_from_slice(&data[at..from]);
            missing.push(Missing {
                addr: data_at + from as u64,
                len: (to - from) as u64,
                at: bytes.len(),
            });
            first_gap.get_or_insert(i);
            at = to;
        }
        bytes.extend_from_slice(&data[at..part.end]);
    }
    let first_gap = first_gap.map(|i| lacking.swap_remove(i).1);
    // Nothing of the text there: the zone is unreadable, not empty.
    if bytes.is_empty() {
        if let Some(e) = first_gap {
            return ZoneState::Unreadable(e);
        }
    }
    let mut text = ZoneText {
        // The writer has gone round when text lies after its position.
        wrapped: start < size,
        bytes,
        time: None,
        compressed: false,
        inflate_refused: None,
        version,
        ecc: tally,
        unchecked_blocks,
        missing,
        torn_records: 0,
        uninflated: None,
    };
    match plan.kind {
        ZoneKind::Dmesg => dmesg_record(text, first_gap, INFLATE_RATIO.saturating_mul(buffer)),
        ZoneKind::Ftrace => {
            text.torn_records = ftrace_records(&text).torn;
            ZoneState::Text(text)
        }
        ZoneKind::Console | ZoneKind::Pmsg => ZoneState::Text(text),
    }
}

/// A dmesg zone's `text` as its record: the header read off it, the rest
/// inflated, up to `limit` bytes, if it was stored compressed.
/// `first_gap` says why the dump lacks the text's first gap.
fn dmesg_record(mut text: ZoneText, first_gap: Option<PhysError>, limit: u64) -> ZoneState {
    // The header is the record's first line, and must lie before any gap:
    // one in it leaves the record's time and form unknown.
    let before_gap = text.missing.first().map_or(text.bytes.len(), |m| m.at);
    let head = &text.bytes[..before_gap];
    let Some((time, compressed, len)) = dmesg_header(head) else {
        // Unreadable only where a header may have begun and been cut by
        // the gap (`====`, then what a time and its kind are made of);
        // other bytes there are no record the kernel keeps.
        let cut_header = match head.strip_prefix(b"====") {
            Some(rest) => rest
                .iter()
                .all(|b| b.is_ascii_digit() || b"-.CD".contains(b)),
            None => b"====".starts_with(head),
        };
        return match first_gap {
            Some(e) if cut_header && !head.contains(&b'\n') => ZoneState::Unreadable(e),
            _ => ZoneState::NoDmesgHeader,
        };
    };
    text.bytes.drain(..len);
    for m in &mut text.missing {
        m.at -= len;
    }
    text.time = Some(time);
    text.compressed = compressed;
    if compressed {
        if let Err(e) = inflate_record(&mut text, limit) {
            return ZoneState::BadCompression(e);
        }
    }
    ZoneState::Text(text)
}

/// A range of a buffer the dump lacks, and why it lacks its first byte.
type Lack = (Range<usize>, PhysError);

/// Fills `buf` from `at` as far as the dump holds it: the ranges of `buf`
/// it lacks, in order, whose bytes are not memory and must not be read,
/// each with why the dump lacks its start. A failed read says where the
/// lack starts; the map says where a hole ends, and a page is the granule
/// where it does not (a page the dump holds but cannot give back).
fn read_present(mem: &dyn PhysMemory, at: PhysAddr, buf: &mut [u8]) -> Vec<Lack> {
    let mut lacking: Vec<Lack> = Vec::new();
    let mut done = 0;
    while done < buf.len() {
        let addr = at + done as u64;
        let Err(e) = mem.read(addr, &mut buf[done..]) else {
            break;
        };
        // The bytes before the one the error names are held, and read
        // again: a failed read need not have written them.
        let mut bad = done
            + e.addr()
                .0
                .saturating_sub(addr.0)
                .min((buf.len() - done) as u64) as usize;
        if bad == buf.len() || (bad > done && mem.read(addr, &mut buf[done..bad]).is_err()) {
            bad = done;
        }
        let from = at + bad as u64;
        let page_end = (from.0 | (PAGE - 1)).saturating_add(1);
        let end = mem
            .map()
            .hole_end(from)
            .filter(|&end| end > from)
            .map_or(page_end, |end| end.0);
        let stop = bad.max(((end - at.0) as usize).min(buf.len()));
        match lacking.last_mut() {
            Some((l, _)) if l.end == bad => l.end = stop,
            _ => lacking.push((bad..stop, e)),
        }
        done = stop;
    }
    lacking
}

/// `====SEC.USEC-C\n` (or `-D`, or neither, as older kernels wrote it), as
/// `ramoops_read_kmsg_hdr()` reads it: the time, whether compressed, and
/// the header's length.
fn dmesg_header(data: &[u8]) -> Option<((i64, u32), bool, usize)> {
    let rest = data.strip_prefix(b"====")?;
    let line = &rest[..rest.iter().position(|&b| b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let (time, kind) = match line.rsplit_once('-') {
        Some((t, k)) if !t.is_empty() => (t, Some(k)),
        _ => (line, None),
    };
    let (sec, usec) = time.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(usec) || !(digits(sec) || sec.strip_prefix('-').is_some_and(digits)) {
        return None;
    }
    let compressed = match kind {
        None => false,
        Some("C") => true,
        Some("D") => false,
        Some(_) => return None,
    };
    Some((
        (sec.parse().ok()?, usec.parse().ok()?),
        compressed,
        4 + line.len() + 1,
    ))
}

/// Inflates a compressed dmesg record's `text`, its header gone: up to
/// its first gap, since raw deflate cannot resume after one, saying that
/// the rest is lost. The gaps then all lie after the text kept. One that
/// inflates past `limit` bytes is kept compressed, as pstore keeps it.
fn inflate_record(text: &mut ZoneText, limit: u64) -> Result<(), String> {
    let before_gap = text.missing.first().map_or(text.bytes.len(), |m| m.at);
    let Some((inflated, end)) = inflate(&text.bytes[..before_gap], limit) else {
        text.inflate_refused = Some(limit);
        return Ok(());
    };
    match (end, text.missing.first()) {
        // The stream ended before any gap: the record is whole.
        (Ok(()), _) => {}
        // Cut at the gap: what came out before it is the record's text.
        (Err(e), Some(gap)) if e.kind() == io::ErrorKind::UnexpectedEof => {
            text.uninflated = Some(Uninflated {
                offset: before_gap as u64,
                addr: gap.addr,
                len: (text.bytes.len() - before_gap) as u64 + text.missing_bytes(),
            });
        }
        (Err(e), _) => return Err(e.to_string()),
    }
    for m in &mut text.missing {
        m.at = inflated.len();
    }
    text.bytes = inflated;
    Ok(())
}

/// pstore compresses with raw deflate (zlib without its header, both the
/// crypto API's "deflate" before 6.6 and `zlib_deflateInit2(-MAX_WBITS)`
/// since): what `bytes` inflate to, and why inflation stopped short of
/// the stream's end if it did (`UnexpectedEof` where the bytes end first);
/// `None` when they inflate past `limit` bytes.
fn inflate(bytes: &[u8], limit: u64) -> Option<(Vec<u8>, io::Result<()>)> {
    let mut out = Vec::new();
    // On an error, what was inflated before it is kept in `out`; one byte
    // past the limit is all it takes to tell a record too large.
    let end = flate2::read::DeflateDecoder::new(bytes)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map(drop);
    (out.len() as u64 <= limit).then_some((out, end))
}

/// An ftrace zone's records, each where the kernel laid it.
struct FtraceRecords<'a> {
    /// The bytes of a partial record at the front.
    partial: usize,
    /// The records the dump holds whole, in the order written.
    whole: Vec<&'a [u8]>,
    /// The records it lacks part of.
    torn: u64,
}

/// Cuts an ftrace zone's text into records on the offsets they have in
/// the zone as the kernel laid it out, gaps included: a gap that is not a
/// multiple of a record long must not shift the records after it, and no
/// record is made of bytes from both sides of one.
fn ftrace_records(text: &ZoneText) -> FtraceRecords<'_> {
    let record = FTRACE_RECORD_SIZE as u64;
    let laid_out = text.bytes.len() as u64 + text.missing_bytes();
    // Records are written whole, so the newest ends where the writer
    // stopped, the buffer's end once the old log is rotated; a buffer
    // whose size is not a multiple of a record leaves the oldest one cut
    // at the front, and pstore skips `size % REC_SIZE` bytes there
    // (`pstore_ftrace_seq_start()`, `ftrace_log_combine()`).
    let partial = laid_out % record;
    // Each gap's place in the zone as laid out: the text kept before it
    // and the gaps before it.
    let mut gaps = text
        .missing
        .iter()
        .scan(0, |before, m| {
            let from = m.at as u64 + *before;
            *before += m.len;
            Some(from..from + m.len)
        })
        .peekable();
    let mut records = FtraceRecords {
        partial: partial as usize,
        whole: Vec::new(),
        torn: 0,
    };
    // Gap bytes before the record at hand.
    let mut passed = 0;
    for from in (partial..laid_out).step_by(FTRACE_RECORD_SIZE) {
        while let Some(gap) = gaps.next_if(|g| g.end <= from) {
            passed += gap.end - gap.start;
        }
        let touches_gap = gaps.peek().is_some_and(|g| g.start < from + record);
        let kept = (from - passed) as usize;
        match text.bytes.get(kept..kept + FTRACE_RECORD_SIZE) {
            Some(r) if !touches_gap => records.whole.push(r),
            _ => records.torn += 1,
        }
    }
    records
}

/// An ftrace zone's records as pstore prints them
/// (`pstore_ftrace_seq_show()`), addresses in hex since no symbols are
/// at hand, and the bytes of a partial record at the start, left out;
/// those the dump lacks part of are left out too, counted in
/// [`ZoneText::torn_records`].
fn ftrace_lines(text: &ZoneText) -> (String, usize) {
    let records = ftrace_records(text);
    let mut out = String::new();
    for r in records.whole {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&r[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let (ip, parent, ts) = (word(0), word(8), word(16));
        out.push_str(&format!(
            "CPU:{} ts:{} {ip:#018x} <- {parent:#018x}\n",
            ts & 0xff,
            ts >> 8
        ));
    }
    (out, records.partial)
}

#[cfg(test)]
#[path = "../../../tests/common/ramoops_area.rs"]
mod ramoops_area;

#[cfg(test)]
mod tests;
