//! Parsing a region's metadata: header, state block, stream descriptors and
//! schema table. Only a header that cannot be trusted is fatal; every other
//! problem becomes a [`Diagnostic`] and costs only what it covers.

use super::absent::Absent;
use super::callsites::CallsiteArea;
use super::schema::Schema;
use super::{Diagnostic, Problem};
use crate::endian::Endian;
use crate::layout::*;
use alloc::string::String;
use alloc::vec::Vec;
use zerocopy::FromBytes;

/// Why bytes are not a usable region. `offset` is from the start of the
/// region.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("region header truncated: {need} bytes needed, {have} present")]
    Truncated { need: usize, have: usize },
    #[error("no region magic at offset 0")]
    BadMagic,
    #[error(
        "invalid region header field `endian_tag`: {0:02x?} is neither byte order of 0x0a0b0c0d"
    )]
    BadEndianTag([u8; 4]),
    #[error("unsupported region format version {0} (this reader knows 1 and 2)")]
    UnsupportedVersion(u16),
    #[error("region header CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("invalid region header field `{field}` at offset {offset}: {value} {why}")]
    InvalidField {
        field: &'static str,
        offset: usize,
        value: u64,
        why: &'static str,
    },
}

/// How much a reader insists on the header CRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderTrust {
    /// A CRC mismatch is fatal: what a scan of a dump wants.
    Checksummed,
    /// A CRC mismatch is reported and the fields are still used, each one
    /// checked: what a reader given an exact address wants.
    Lenient,
}

/// The header fields, in the reader's native types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderInfo {
    pub endian: Endian,
    pub version: u16,
    /// The CRC of every checksum in the region, from `version`.
    pub checksum: Checksum,
    pub word_size: u8,
    pub stream_count: u16,
    pub cpu_count: u16,
    pub page_size: u32,
    pub region_size: u64,
    pub desc_offset: u32,
    pub schema_offset: u32,
    pub schema_size: u32,
    pub clock_id: u32,
    pub boot_id: [u8; 16],
    pub generation: u64,
    pub created_ns: u64,
    pub wall_offset_ns: i64,
    pub flags: u32,
    /// Where the tail table starts, when `flags` says there is one.
    /// Unchecked here: a table outside the region costs only the tails.
    pub tail_offset: Option<u32>,
    pub kernel_release: String,
    pub hostname: String,
    pub producer: String,
    /// Whether the stored header CRC matched.
    pub crc_ok: bool,
}

/// The generation's state block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateInfo {
    pub state: u32,
    pub reason: u32,
    pub crash_ns: u64,
    pub crash_cpu: u32,
    pub updates: u32,
    pub message: String,
}

impl StateInfo {
    pub fn state_name(&self) -> &'static str {
        match self.state {
            STATE_RUNNING => "running",
            STATE_CRASHED => "crashed",
            STATE_CLEAN => "clean-shutdown",
            _ => "unknown",
        }
    }

    /// Whether it records a crash (a panic, an oops …), not a shutdown
    /// asked for.
    pub fn is_crash(&self) -> bool {
        self.reason != REASON_NONE && self.reason != REASON_SHUTDOWN
    }

    /// The reason a restart, halt or power-off was asked for, when it
    /// records one: the machine went down so (clean) or was reset on its
    /// way down (running).
    pub fn shutdown_reason(&self) -> Option<&str> {
        (self.reason == REASON_SHUTDOWN).then_some(self.message.as_str())
    }
}

/// A crash reason's name, as the state block and `crash` events use it.
pub fn reason_name(reason: u32) -> &'static str {
    match reason {
        REASON_NONE => "none",
        REASON_PANIC => "panic",
        REASON_OOPS => "oops",
        REASON_DIE => "die",
        REASON_WATCHDOG => "watchdog",
        REASON_EMERGENCY_RESTART => "emergency-restart",
        REASON_SHUTDOWN => "shutdown",
        _ => "unknown",
    }
}

/// A stream descriptor that passed its checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    pub index: u16,
    pub kind: u16,
    pub cpu: u16,
    /// A kernel stream's nesting lane (FORMAT.md, "Nesting lanes"): 0 for
    /// what its CPU writes outside any other write, and for user streams.
    pub lane: u8,
    pub page_count: u32,
    pub pages_offset: u64,
    pub name: String,
    pub pid: u32,
    /// A user stream's writing user; 0 for kernel streams.
    pub uid: u32,
    /// Whether its writer keeps its tail copies (not so for a user stream
    /// of the kernel module's pool, [`DESC_NO_TAILS`]).
    pub keeps_tails: bool,
}

impl StreamInfo {
    /// Whether the kernel wrote this stream. Only kernel streams speak for
    /// the region: its wall clock, its totals and its kernel log come from
    /// them. A user stream is written by a process (FORMAT.md, section
    /// 15), which may put any bytes there, so what it records stays its
    /// own claim, shown under its own label.
    pub fn is_kernel(&self) -> bool {
        self.kind == STREAM_KERNEL_CPU
    }

    /// Whether this is a free stream of the kernel module's pool of user
    /// streams, which no process has taken: a user stream with no name
    /// and no writer (FORMAT.md, "The kernel module's pool").
    pub fn is_free(&self) -> bool {
        !self.is_kernel() && self.name.is_empty() && self.pid == 0
    }

    /// A short label, unique to the stream's kind: `cpu3` for kernel
    /// streams (`cpu3.lane1` for a nesting lane), and for user ones
    /// [`USER_LABEL_PREFIX`] and the name, escaped
    /// ([`crate::text::push_label_name`];
    /// `#` and the stream's index for an empty name), so that no name can
    /// read as a kernel stream's label or carry a control byte.
    pub fn label(&self) -> String {
        if self.is_kernel() && self.lane > 0 {
            alloc::format!("cpu{}.lane{}", self.cpu, self.lane)
        } else if self.is_kernel() {
            alloc::format!("cpu{}", self.cpu)
        } else {
            in_user_namespace(|out| self.push_user_name(out))
        }
    }

    /// A user stream's program as labels show it: [`USER_LABEL_PREFIX`]
    /// and [`Self::program`], escaped as [`Self::label`] escapes names.
    pub fn program_label(&self) -> String {
        in_user_namespace(|out| crate::text::push_label_name(out, self.program().as_bytes()))
    }

    /// Appends a user stream's name as its label shows it: escaped, or
    /// `#` and its index when it has none.
    pub(crate) fn push_user_name(&self, out: &mut alloc::vec::Vec<u8>) {
        if self.name.is_empty() {
            out.push(b'#');
            out.extend_from_slice(alloc::format!("{}", self.index).as_bytes());
        } else {
            crate::text::push_label_name(out, self.name.as_bytes());
        }
    }

    /// A user stream's program: its name without the `.N` that numbers
    /// the streams of a program with several (FORMAT.md, section 15).
    pub fn program(&self) -> &str {
        match self.name.rsplit_once('.') {
            Some((p, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => p,
            _ => &self.name,
        }
    }
}

/// What every user stream's label starts with: the user streams'
/// namespace, apart from the kernel's `cpuN` labels.
pub const USER_LABEL_PREFIX: &str = "user:";

/// [`USER_LABEL_PREFIX`] and what `name` appends, which must be ASCII.
fn in_user_namespace(name: impl FnOnce(&mut alloc::vec::Vec<u8>)) -> String {
    let mut out = alloc::vec::Vec::from(USER_LABEL_PREFIX.as_bytes());
    name(&mut out);
    String::from_utf8(out).unwrap_or_default()
}

pub(crate) fn text_of(raw: &[u8]) -> String {
    let end = memchr::memchr(0, raw).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Reads and checks the header at the start of `bytes`.
pub fn parse_header(bytes: &[u8], trust: HeaderTrust) -> Result<HeaderInfo, HeaderError> {
    let have = bytes.len();
    let (h, _) = RegionHeader::read_from_prefix(bytes).map_err(|_| HeaderError::Truncated {
        need: HEADER_SIZE,
        have,
    })?;
    if h.magic != MAGIC_STORED {
        return Err(HeaderError::BadMagic);
    }
    let e = endian_from_tag(h.endian_tag.0).ok_or(HeaderError::BadEndianTag(h.endian_tag.0))?;
    let version = h.version.get(e);
    let checksum = Checksum::of_version(version).ok_or(HeaderError::UnsupportedVersion(version))?;
    let stored = h.header_crc.get(e);
    let computed = checksum.crc(&[&bytes[..HEADER_SIZE - 4]]);
    if stored != computed && trust == HeaderTrust::Checksummed {
        return Err(HeaderError::Crc { stored, computed });
    }
    let invalid = |field, offset, value: u64, why| HeaderError::InvalidField {
        field,
        offset,
        value,
        why,
    };
    let header_size = h.header_size.get(e);
    if header_size as usize != HEADER_SIZE {
        return Err(invalid("header_size", 14, header_size.into(), "is not 256"));
    }
    if h.word_size != 4 && h.word_size != 8 {
        return Err(invalid(
            "word_size",
            16,
            h.word_size.into(),
            "is neither 4 nor 8",
        ));
    }
    let streams = h.stream_count.get(e);
    if streams == 0 || streams > MAX_STREAMS {
        return Err(invalid(
            "stream_count",
            18,
            streams.into(),
            "is not between 1 and 4096",
        ));
    }
    let cpus = h.cpu_count.get(e);
    if cpus > streams {
        return Err(invalid(
            "cpu_count",
            20,
            cpus.into(),
            "exceeds stream_count",
        ));
    }
    let phs = h.page_header_size.get(e);
    if phs as usize != PAGE_HEADER_SIZE {
        return Err(invalid("page_header_size", 22, phs.into(), "is not 48"));
    }
    let page_size = h.page_size.get(e);
    if !page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(invalid(
            "page_size",
            24,
            page_size.into(),
            "is not a power of two between 256 and 1 MiB",
        ));
    }
    let desc_size = h.desc_size.get(e);
    if desc_size as usize != DESC_SIZE {
        return Err(invalid("desc_size", 28, desc_size.into(), "is not 64"));
    }
    let region_size = h.region_size.get(e);
    let desc_offset = h.desc_offset.get(e);
    let desc_end = u64::from(desc_offset) + u64::from(streams) * DESC_SIZE as u64;
    if (desc_offset as usize) < STATE_OFFSET + STATE_SIZE || desc_end > region_size {
        return Err(invalid(
            "desc_offset",
            40,
            desc_offset.into(),
            "puts the descriptors outside the region",
        ));
    }
    let schema_offset = h.schema_offset.get(e);
    let schema_size = h.schema_size.get(e);
    if u64::from(schema_offset) + u64::from(schema_size) > region_size {
        return Err(invalid(
            "schema_offset",
            44,
            schema_offset.into(),
            "puts the schema table outside the region",
        ));
    }
    Ok(HeaderInfo {
        endian: e,
        version,
        checksum,
        word_size: h.word_size,
        stream_count: streams,
        cpu_count: cpus,
        page_size,
        region_size,
        desc_offset,
        schema_offset,
        schema_size,
        clock_id: h.clock_id.get(e),
        boot_id: h.boot_id,
        generation: h.generation.get(e),
        created_ns: h.created_ns.get(e),
        wall_offset_ns: h.wall_offset_ns.get(e) as i64,
        flags: h.flags.get(e),
        tail_offset: (h.flags.get(e) & HEADER_FLAG_TAILS != 0).then(|| h.tail_offset.get(e)),
        kernel_release: text_of(&h.kernel_release),
        hostname: text_of(&h.hostname),
        producer: text_of(&h.producer),
        crc_ok: stored == computed,
    })
}

pub(crate) fn parse_state(
    bytes: &[u8],
    h: &HeaderInfo,
    absent: &Absent,
) -> Result<StateInfo, Problem> {
    let e = h.endian;
    let raw = bytes
        .get(STATE_OFFSET..)
        .and_then(|r| r.get(..STATE_SIZE))
        .ok_or(Problem::Truncated)?;
    if absent.touches(STATE_OFFSET as u64..(STATE_OFFSET + STATE_SIZE) as u64) {
        return Err(Problem::StateAbsent);
    }
    let Ok(s) = StateBlock::read_from_bytes(raw) else {
        return Err(Problem::Truncated);
    };
    let computed = h.checksum.crc(&[&raw[..STATE_SIZE - 4]]);
    if computed != s.crc.get(e) {
        return Err(Problem::Crc {
            stored: s.crc.get(e),
            computed,
        });
    }
    Ok(StateInfo {
        state: s.state.get(e),
        reason: s.reason.get(e),
        crash_ns: s.crash_ns.get(e),
        crash_cpu: s.crash_cpu.get(e),
        updates: s.updates.get(e),
        message: text_of(&s.message),
    })
}

/// Reads every stream descriptor; a bad or absent one becomes a diagnostic.
pub(crate) fn parse_streams(
    bytes: &[u8],
    h: &HeaderInfo,
    absent: &Absent,
    diags: &mut Vec<Diagnostic>,
) -> (Vec<StreamInfo>, Option<CallsiteArea>) {
    let e = h.endian;
    let mut out = Vec::new();
    let mut callsites = None;
    for i in 0..h.stream_count {
        let offset = h.desc_offset as u64 + u64::from(i) * DESC_SIZE as u64;
        let mut report = |problem| {
            diags.push(Diagnostic {
                stream: Some(i),
                page: None,
                offset,
                problem,
            })
        };
        let raw = usize::try_from(offset)
            .ok()
            .and_then(|o| bytes.get(o..))
            .and_then(|r| r.get(..DESC_SIZE));
        let Some(raw) = raw else {
            report(Problem::Truncated);
            continue;
        };
        let Ok(d) = StreamDesc::read_from_bytes(raw) else {
            report(Problem::Truncated);
            continue;
        };
        if absent.touches(offset..offset + DESC_SIZE as u64) {
            report(Problem::DescAbsent);
            continue;
        }
        let computed = h.checksum.crc(&[&raw[..DESC_SIZE - 4]]);
        if computed != d.crc.get(e) {
            report(Problem::Crc {
                stored: d.crc.get(e),
                computed,
            });
            continue;
        }
        let kind = d.kind.get(e);
        let known = kind == STREAM_KERNEL_CPU
            || kind == STREAM_USER
            || (kind == STREAM_CALLSITES && callsites.is_none());
        if !known {
            report(Problem::InvalidField {
                field: "kind",
                value: kind.into(),
            });
            continue;
        }
        let page_count = d.page_count.get(e);
        let pages_offset = d.pages_offset.get(e);
        let end = u64::from(page_count)
            .checked_mul(u64::from(h.page_size))
            .and_then(|len| len.checked_add(pages_offset));
        let Some(end) = end.filter(|&end| page_count > 0 && end <= h.region_size) else {
            report(Problem::InvalidField {
                field: "page_count",
                value: page_count.into(),
            });
            continue;
        };
        if kind == STREAM_CALLSITES {
            callsites = Some(CallsiteArea {
                range: pages_offset..end,
            });
            continue;
        }
        out.push(StreamInfo {
            index: i,
            kind,
            cpu: d.cpu.get(e),
            lane: if kind == STREAM_KERNEL_CPU {
                (d.flags.get(e) & DESC_LANE_MASK) as u8
            } else {
                0
            },
            page_count,
            pages_offset,
            name: text_of(&d.name),
            pid: d.pid.get(e),
            uid: d.uid.get(e),
            keeps_tails: d.flags.get(e) & DESC_NO_TAILS == 0,
        });
    }
    (out, callsites)
}

/// Where a region keeps its stream tails (FORMAT.md, "Stream tails").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailTable {
    /// The region was written before tails existed: a stream's end is
    /// found by walking its page slots.
    None,
    /// At this region offset.
    At(u64),
    /// The header puts it outside the region (reported): no stream's tail
    /// is believed.
    Invalid,
}

/// Where the tail table is, checked against the region's size.
pub(crate) fn tail_table(h: &HeaderInfo, diags: &mut Vec<Diagnostic>) -> TailTable {
    let Some(offset) = h.tail_offset else {
        return TailTable::None;
    };
    let len = u64::from(h.stream_count) * (TAIL_COPIES * TAIL_SIZE) as u64;
    let start = u64::from(offset);
    if start < (STATE_OFFSET + STATE_SIZE) as u64 || start + len > h.region_size {
        diags.push(Diagnostic {
            stream: None,
            page: None,
            offset: 100,
            problem: Problem::InvalidField {
                field: "tail_offset",
                value: start,
            },
        });
        return TailTable::Invalid;
    }
    TailTable::At(start)
}

/// The region's schema, or the built-ins plus a diagnostic when its table
/// is damaged.
pub(crate) fn parse_schema(
    bytes: &[u8],
    h: &HeaderInfo,
    absent: &Absent,
    diags: &mut Vec<Diagnostic>,
) -> Schema {
    let start = h.schema_offset as usize;
    let table = bytes
        .get(start..)
        .map(|t| &t[..t.len().min(h.schema_size as usize)]);
    let at = |r: core::ops::Range<usize>| (start + r.start) as u64..(start + r.end) as u64;
    let absent = |r| absent.touches(at(r));
    match table.map(|t| Schema::parse_with_absent(t, h.endian, h.checksum, &absent)) {
        Some(Ok(s)) => s,
        Some(Err(err)) => {
            let problem = Problem::Schema(err);
            diags.push(Diagnostic {
                stream: None,
                page: None,
                offset: start as u64,
                problem,
            });
            Schema::builtin()
        }
        None => {
            diags.push(Diagnostic {
                stream: None,
                page: None,
                offset: start as u64,
                problem: Problem::Truncated,
            });
            Schema::builtin()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{HeaderTrust, Region};
    use crate::write::{format, region_size, RegionConfig, StreamSpec};
    use core::ops::Range;

    /// Zeroes `hole` of `mem`, as a dump's reader leaves the bytes a dump
    /// lacks, and returns it as [`Region::with_absent`] takes it.
    fn with_hole(mem: &mut [u8], hole: Range<usize>) -> Vec<Range<u64>> {
        mem[hole.clone()].fill(0);
        alloc::vec![hole.start as u64..hole.end as u64]
    }

    /// A region of three CPU streams of two 256-byte pages each.
    fn three_cpus() -> Vec<u8> {
        let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1), StreamSpec::cpu(2)];
        let cfg = RegionConfig {
            page_size: 256,
            pages_per_stream: Some(2),
            streams: &specs,
            ..Default::default()
        };
        let mut mem = vec![0u8; region_size(&cfg).unwrap()];
        format(&mut mem, &cfg).unwrap();
        mem
    }

    fn problems(region: &Region<'_>) -> Vec<(Option<u16>, u64, Problem)> {
        let diags = region.diagnostics.iter();
        diags
            .map(|d| (d.stream, d.offset, d.problem.clone()))
            .collect()
    }

    #[test]
    fn a_descriptor_in_a_hole_is_absent_and_a_damaged_one_fails_its_crc() {
        let mut mem = three_cpus();
        let desc = |i: usize| DESC_OFFSET + i * DESC_SIZE;
        mem[desc(0) + 20] ^= 1;
        let absent = with_hole(&mut mem, desc(2) + 40..desc(2) + DESC_SIZE);
        let region = Region::parse(&mem, HeaderTrust::Checksummed)
            .unwrap()
            .with_absent(absent);
        let [(Some(0), at0, Problem::Crc { .. }), (Some(2), at2, Problem::DescAbsent)] =
            &problems(&region)[..]
        else {
            panic!("{:?}", region.diagnostics);
        };
        assert_eq!((*at0, *at2), (desc(0) as u64, desc(2) as u64));
        assert_eq!(
            region.diagnostics[1].to_string(),
            "stream 2 at region offset 0x1c0: its descriptor is not in the input: the dump excluded or lost it"
        );
        let streams: Vec<u16> = region.streams.iter().map(|s| s.index).collect();
        assert_eq!(streams, [1]);
    }

    #[test]
    fn the_state_block_in_a_hole_is_absent_and_a_damaged_one_fails_its_crc() {
        let mut mem = three_cpus();
        let mut damaged = mem.clone();
        damaged[STATE_OFFSET + 30] ^= 1;
        let damaged = Region::parse(&damaged, HeaderTrust::Checksummed).unwrap();
        assert!(matches!(damaged.state, Err(Problem::Crc { .. })));
        let state = STATE_OFFSET..STATE_OFFSET + STATE_SIZE;
        let absent = with_hole(&mut mem, state.start + 8..state.end);
        let region = Region::parse(&mem, HeaderTrust::Checksummed)
            .unwrap()
            .with_absent(absent);
        assert_eq!(region.state, Err(Problem::StateAbsent));
        assert!(region.diagnostics.is_empty(), "{:?}", region.diagnostics);
    }

    #[test]
    fn a_schema_entry_in_a_hole_is_named_absent_and_a_damaged_one_fails_the_crc() {
        use super::super::SchemaError;
        let mut mem = three_cpus();
        let header = Region::parse(&mem, HeaderTrust::Checksummed)
            .unwrap()
            .header;
        let table = header.schema_offset as usize;
        // Entry 2's fields, after two built-ins' entries.
        let entry = |n: usize| {
            let sizes = crate::schema::BUILTIN_EVENTS[..n].iter();
            let size =
                |d: &crate::schema::EventDef| EVENT_DESC_SIZE + d.fields.len() * FIELD_DESC_SIZE;
            SCHEMA_HEADER_SIZE + sizes.map(size).sum::<usize>()
        };
        let field = table + entry(2) + EVENT_DESC_SIZE + 4;
        let mut damaged = mem.clone();
        damaged[field] ^= 1;
        let damaged = Region::parse(&damaged, HeaderTrust::Checksummed).unwrap();
        assert!(matches!(
            &problems(&damaged)[..],
            [(None, _, Problem::Schema(SchemaError::Crc { .. }))]
        ));
        let absent = with_hole(&mut mem, field..field + 8);
        let region = Region::parse(&mem, HeaderTrust::Checksummed)
            .unwrap()
            .with_absent(absent);
        let want = SchemaError::EntryAbsent {
            index: 2,
            offset: entry(2),
        };
        assert_eq!(
            problems(&region),
            [(None, table as u64, Problem::Schema(want))]
        );
    }

    /// The values and names FORMAT.md gives a state block field (section
    /// 4, "1 running, 2 crashed, ..."), spelt as the reader prints them:
    /// one word, hyphens for spaces.
    fn spec_names(field: &str) -> Vec<(u32, String)> {
        let spec = include_str!("../../FORMAT.md");
        let section = spec
            .split("## 4. State block")
            .nth(1)
            .and_then(|s| s.split("## 5.").next())
            .expect("FORMAT.md has section 4");
        let row = section
            .lines()
            .find(|l| l.contains(&format!("| `{field}` |")))
            .unwrap_or_else(|| panic!("no `{field}` row in section 4"));
        let meaning = row.trim_end_matches('|').rsplit('|').next().unwrap();
        meaning
            .trim()
            .split(", ")
            .map(|v| {
                let (n, name) = v.split_once(' ').expect("`value name`");
                (n.parse().expect("a number"), name.replace(' ', "-"))
            })
            .collect()
    }

    #[test]
    fn every_state_has_the_name_format_md_gives_it() {
        let spec = spec_names("state");
        let values: Vec<u32> = spec.iter().map(|&(v, _)| v).collect();
        assert_eq!(values, [STATE_RUNNING, STATE_CRASHED, STATE_CLEAN]);
        let state = |state| StateInfo {
            state,
            reason: REASON_NONE,
            crash_ns: 0,
            crash_cpu: 0,
            updates: 0,
            message: String::new(),
        };
        for (value, name) in &spec {
            assert_eq!(state(*value).state_name(), name, "state {value}");
        }
        for value in [0, 4, u32::MAX] {
            assert_eq!(state(value).state_name(), "unknown", "state {value}");
        }
    }

    #[test]
    fn every_crash_reason_has_the_name_format_md_gives_it() {
        let spec = spec_names("reason");
        let values: Vec<u32> = spec.iter().map(|&(v, _)| v).collect();
        assert_eq!(
            values,
            [
                REASON_NONE,
                REASON_PANIC,
                REASON_OOPS,
                REASON_DIE,
                REASON_WATCHDOG,
                REASON_EMERGENCY_RESTART,
                REASON_SHUTDOWN
            ]
        );
        for (value, name) in &spec {
            assert_eq!(reason_name(*value), name, "reason {value}");
        }
        for value in [7, u32::MAX] {
            assert_eq!(reason_name(value), "unknown", "reason {value}");
        }
    }
}
