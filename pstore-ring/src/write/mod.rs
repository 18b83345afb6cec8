//! Formatting a region inside any `&mut [u8]` and recording into it.
//!
//! [`format`] lays out a region (header, state block, stream descriptors,
//! schema table, pages) and hands back one [`StreamWriter`] per stream plus a
//! [`RegionControl`] for the generation state. User space records into a
//! memory-mapped file this way, and tests build images with it. The kernel
//! module implements the same rules in C (see `FORMAT.md`, "Writer rules").
//!
//! Writes to a page happen in the order the format's crash analysis assumes:
//! record bytes, then `commit`, then `count`; a page is closed by writing its
//! CRC before its `flags`. Every page open and close then rewrites one copy
//! of the stream's tail, so a reader knows how far the stream went even when
//! its newest pages are unreadable.
//!
//! A release fence keeps those stores in program order wherever the order
//! matters, for the compiler and for the other CPUs: a process killed, or
//! a CPU stopped by a panic, at any instruction leaves exactly the stores
//! before it, and a reader of the file or the dump must find the rules
//! kept; a reader on another CPU at the same time (the module's live copy
//! of a pool stream, which `crashring follow` and reports read) sees them
//! in that order too. On x86-64 that costs nothing (a compiler barrier);
//! on arm64 it is a store barrier.

use crate::endian::{Endian, U16, U32, U64};
use crate::layout::*;
use crate::schema::{self, EventDef, SchemaDefError};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

mod callsites;
mod stream;

pub use callsites::{CallsiteWriter, Refused};
pub use stream::{Dropped, Reservation, StreamWriter, StreamWriters};

/// One stream to lay out.
#[derive(Clone, Copy, Debug)]
pub struct StreamSpec<'a> {
    /// [`STREAM_KERNEL_CPU`] or [`STREAM_USER`].
    pub kind: u16,
    /// The CPU a kernel stream records; `u16::MAX` for user streams.
    pub cpu: u16,
    /// The nesting lane of a kernel stream: 0, or the number of writes of
    /// the same CPU it records under (FORMAT.md, "Nesting lanes"). Lanes
    /// above 0 get [`RegionConfig::lane_pages`] pages.
    pub lane: u8,
    pub name: &'a str,
    /// The writing process of a user stream; 0 for kernel streams.
    pub pid: u32,
    /// The writing process's user of a user stream; 0 for kernel streams.
    pub uid: u32,
}

impl StreamSpec<'static> {
    /// A kernel stream for CPU `cpu`.
    pub const fn cpu(cpu: u16) -> Self {
        Self::nested(cpu, 0)
    }

    /// Nesting lane `lane` of CPU `cpu`.
    pub const fn nested(cpu: u16, lane: u8) -> Self {
        StreamSpec {
            kind: STREAM_KERNEL_CPU,
            cpu,
            lane,
            name: "",
            pid: 0,
            uid: 0,
        }
    }
}

/// Everything [`format`] needs to know.
#[derive(Clone, Copy, Debug)]
pub struct RegionConfig<'a> {
    pub endian: Endian,
    pub word_size: u8,
    pub page_size: u32,
    /// Pages per stream of lane 0 (and per user stream without
    /// `user_pages`); `None` divides what the others leave evenly.
    pub pages_per_stream: Option<u32>,
    /// Pages of each stream whose lane is above 0.
    pub lane_pages: u32,
    /// Pages of each user stream; `None`: as lane 0. The kernel module's
    /// pool of user streams has a size of its own.
    pub user_pages: Option<u32>,
    pub streams: &'a [StreamSpec<'a>],
    /// Pages of the callsite area (FORMAT.md, section 18), after every
    /// stream's; 0 for none.
    pub callsite_pages: u32,
    /// Event types beyond the built-ins, ids 32..=255.
    pub custom_events: &'a [EventDef<'a>],
    pub boot_id: [u8; 16],
    pub generation: u64,
    /// `CLOCK_MONOTONIC` nanoseconds when the region was formatted; the
    /// first page of every stream starts here.
    pub created_ns: u64,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` at `created_ns`.
    pub wall_offset_ns: i64,
    pub kernel_release: &'a str,
    pub hostname: &'a str,
    pub producer: &'a str,
}

impl Default for RegionConfig<'_> {
    fn default() -> Self {
        RegionConfig {
            endian: Endian::NATIVE,
            word_size: core::mem::size_of::<usize>() as u8,
            page_size: 4096,
            pages_per_stream: None,
            lane_pages: 2,
            user_pages: None,
            streams: &[],
            callsite_pages: 0,
            custom_events: &[],
            boot_id: [0; 16],
            generation: 1,
            created_ns: 0,
            wall_offset_ns: 0,
            kernel_release: "",
            hostname: "",
            producer: "pstore-ring",
        }
    }
}

/// Why [`format`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("page size {0} is not a power of two between 256 and 1 MiB")]
    PageSize(u32),
    #[error("a region needs 1 to {MAX_STREAMS} streams, {0} given")]
    StreamCount(usize),
    #[error("a text field is too long for the header: {0}")]
    TextTooLong(&'static str),
    #[error("word size {0} is neither 4 nor 8")]
    WordSize(u8),
    #[error("buffer of {have} bytes is too small: {need} needed for two pages per stream")]
    TooSmall { need: u64, have: usize },
    #[error("stream {stream}: lane {lane} is not below {MAX_LANES}, or not 0 for a user stream")]
    Lane { stream: usize, lane: u8 },
    #[error("nesting lanes need at least 2 pages each, {0} given")]
    LanePages(u32),
    #[error("user streams need at least 2 pages each, {0} given")]
    UserPages(u32),
    #[error("region size {0} does not fit the format's 64-bit offsets")]
    TooLarge(usize),
    #[error("the region's size needs pages_per_stream, which is not given")]
    Unsized,
    #[error(transparent)]
    Schema(#[from] SchemaDefError),
}

/// Where everything goes, computed before a byte is written.
#[derive(Clone, Copy, Debug)]
struct Plan {
    schema_offset: usize,
    schema_size: usize,
    tail_offset: usize,
    pages_offset: usize,
    pages_per_stream: u32,
}

fn plan(cfg: &RegionConfig<'_>, len: usize) -> Result<Plan, FormatError> {
    if !cfg.page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&cfg.page_size)
    {
        return Err(FormatError::PageSize(cfg.page_size));
    }
    if cfg.streams.is_empty() || descriptors(cfg) > MAX_STREAMS as usize {
        return Err(FormatError::StreamCount(descriptors(cfg)));
    }
    if cfg.word_size != 4 && cfg.word_size != 8 {
        return Err(FormatError::WordSize(cfg.word_size));
    }
    for (text, max, what) in [
        (cfg.kernel_release, 63, "kernel_release"),
        (cfg.hostname, 63, "hostname"),
        (cfg.producer, 15, "producer"),
    ] {
        if text.len() > max {
            return Err(FormatError::TextTooLong(what));
        }
    }
    if cfg.streams.iter().any(|s| s.name.len() > 31) {
        return Err(FormatError::TextTooLong("stream name"));
    }
    if let Some((stream, s)) = cfg.streams.iter().enumerate().find(|(_, s)| {
        u32::from(s.lane) >= MAX_LANES || (s.lane > 0 && s.kind != STREAM_KERNEL_CPU)
    }) {
        return Err(FormatError::Lane {
            stream,
            lane: s.lane,
        });
    }
    let nested = cfg.streams.iter().filter(|s| s.lane > 0).count();
    if nested > 0 && cfg.lane_pages < 2 {
        return Err(FormatError::LanePages(cfg.lane_pages));
    }
    if cfg.user_pages == Some(1) || cfg.user_pages == Some(0) {
        return Err(FormatError::UserPages(cfg.user_pages.unwrap_or(0)));
    }
    let page = cfg.page_size as usize;
    let schema_offset = DESC_OFFSET + descriptors(cfg) * DESC_SIZE;
    let schema_size = schema::table_size(cfg.custom_events);
    let tail_offset = (schema_offset + schema_size).next_multiple_of(8);
    let tail_end = tail_offset + descriptors(cfg) * TAIL_COPIES * TAIL_SIZE;
    let align = page.min(4096);
    let pages_offset = tail_end.div_ceil(align) * align;
    let fixed_bytes = cfg
        .streams
        .iter()
        .filter_map(|s| fixed_pages(cfg, s))
        .chain([cfg.callsite_pages])
        .fold(0u64, |sum, n| {
            sum.saturating_add(u64::from(n) * page as u64)
        });
    let flat = cfg
        .streams
        .iter()
        .filter(|s| fixed_pages(cfg, s).is_none())
        .count();
    let stream_bytes = (len as u64)
        .saturating_sub(pages_offset as u64)
        .saturating_sub(fixed_bytes)
        / flat.max(1) as u64;
    let fit = u32::try_from(stream_bytes / page as u64).unwrap_or(u32::MAX);
    let pages_per_stream = cfg.pages_per_stream.unwrap_or(fit);
    if pages_offset as u64 + fixed_bytes > len as u64
        || (flat > 0 && (pages_per_stream < 2 || pages_per_stream > fit))
    {
        let need = pages_offset as u64
            + fixed_bytes
            + flat as u64 * u64::from(pages_per_stream.max(2)) * page as u64;
        return Err(FormatError::TooSmall { need, have: len });
    }
    Ok(Plan {
        schema_offset,
        schema_size,
        tail_offset,
        pages_offset,
        pages_per_stream,
    })
}

/// Descriptors the region has: one per stream, and the callsite area's.
fn descriptors(cfg: &RegionConfig<'_>) -> usize {
    cfg.streams.len() + usize::from(cfg.callsite_pages > 0)
}

fn put_text(dst: &mut [u8], text: &str) {
    dst.fill(0);
    let n = text.len().min(dst.len());
    dst[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// A stream's pages when they do not depend on what the others leave:
/// a nesting lane's, or a user stream's when `user_pages` is given.
fn fixed_pages(cfg: &RegionConfig<'_>, s: &StreamSpec<'_>) -> Option<u32> {
    if s.lane > 0 {
        Some(cfg.lane_pages)
    } else if s.kind == STREAM_USER {
        cfg.user_pages
    } else {
        None
    }
}

impl Plan {
    fn pages_of(&self, cfg: &RegionConfig<'_>, s: &StreamSpec<'_>) -> u32 {
        fixed_pages(cfg, s).unwrap_or(self.pages_per_stream)
    }

    /// The region's bytes, computed wide enough that no configuration
    /// overflows it.
    fn region_len(&self, cfg: &RegionConfig<'_>) -> Result<usize, FormatError> {
        let page = u128::from(cfg.page_size);
        let len = cfg
            .streams
            .iter()
            .map(|s| u128::from(self.pages_of(cfg, s)) * page)
            .sum::<u128>()
            + u128::from(cfg.callsite_pages) * page
            + self.pages_offset as u128;
        usize::try_from(len).map_err(|_| FormatError::TooLarge(usize::MAX))
    }
}

/// The bytes [`format`] lays out for `cfg`, whose `pages_per_stream` must
/// be given: what a file or mapping needs to hold before it is formatted.
pub fn region_size(cfg: &RegionConfig<'_>) -> Result<usize, FormatError> {
    if cfg.pages_per_stream.is_none() {
        return Err(FormatError::Unsized);
    }
    plan(cfg, usize::MAX)?.region_len(cfg)
}

/// Lays out a region over `buf` and returns the handles that record into it.
///
/// The region is `buf`'s length rounded down to whole pages. Every page
/// header and the tail table are zeroed, so nothing of an earlier generation
/// in the same memory can be mistaken for this one; page data is left as it
/// was, since no reader looks past a page's `commit`.
pub fn format<'a>(buf: &'a mut [u8], cfg: &RegionConfig<'_>) -> Result<Formatted<'a>, FormatError> {
    let p = plan(cfg, buf.len())?;
    let e = cfg.endian;
    let page = cfg.page_size as usize;
    let streams = cfg.streams.len();
    let pages_of = |s: &StreamSpec<'_>| p.pages_of(cfg, s);
    let region_len = p.region_len(cfg)?;
    let region_size = u64::try_from(region_len).map_err(|_| FormatError::TooLarge(region_len))?;
    let buf = &mut buf[..region_len];

    buf[..p.pages_offset].fill(0);
    schema::write_table(
        cfg.custom_events,
        e,
        &mut buf[p.schema_offset..p.schema_offset + p.schema_size],
    )?;

    let mut hdr = RegionHeader::new_zeroed();
    hdr.magic = MAGIC_STORED;
    hdr.endian_tag = U32::new(e, ENDIAN_TAG);
    hdr.version = U16::new(e, FORMAT_VERSION);
    hdr.header_size = U16::new(e, HEADER_SIZE as u16);
    hdr.word_size = cfg.word_size;
    hdr.stream_count = U16::new(e, descriptors(cfg) as u16);
    let cpus = cfg
        .streams
        .iter()
        .filter(|s| s.kind == STREAM_KERNEL_CPU && s.lane == 0)
        .count();
    hdr.cpu_count = U16::new(e, cpus as u16);
    hdr.page_header_size = U16::new(e, PAGE_HEADER_SIZE as u16);
    hdr.page_size = U32::new(e, cfg.page_size);
    hdr.desc_size = U32::new(e, DESC_SIZE as u32);
    hdr.region_size = U64::new(e, region_size);
    hdr.desc_offset = U32::new(e, DESC_OFFSET as u32);
    hdr.schema_offset = U32::new(e, p.schema_offset as u32);
    hdr.schema_size = U32::new(e, p.schema_size as u32);
    hdr.clock_id = U32::new(e, CLOCK_MONOTONIC);
    hdr.boot_id = cfg.boot_id;
    hdr.generation = U64::new(e, cfg.generation);
    hdr.created_ns = U64::new(e, cfg.created_ns);
    hdr.wall_offset_ns = U64::new(e, cfg.wall_offset_ns as u64);
    hdr.flags = U32::new(e, HEADER_FLAG_TAILS);
    hdr.tail_offset = U32::new(e, p.tail_offset as u32);
    put_text(&mut hdr.kernel_release, cfg.kernel_release);
    put_text(&mut hdr.hostname, cfg.hostname);
    put_text(&mut hdr.producer, cfg.producer);
    let crc = crc32(&[&hdr.as_bytes()[..HEADER_SIZE - 4]]);
    hdr.header_crc = U32::new(e, crc);
    buf[..HEADER_SIZE].copy_from_slice(hdr.as_bytes());

    let mut stream_at = p.pages_offset;
    for (i, s) in cfg.streams.iter().enumerate() {
        let mut d = StreamDesc::new_zeroed();
        d.kind = U16::new(e, s.kind);
        d.cpu = U16::new(e, s.cpu);
        d.page_count = U32::new(e, pages_of(s));
        d.pages_offset = U64::new(e, stream_at as u64);
        stream_at += pages_of(s) as usize * page;
        put_text(&mut d.name, s.name);
        d.pid = U32::new(e, s.pid);
        d.flags = U32::new(e, u32::from(s.lane));
        d.uid = U32::new(e, s.uid);
        let crc = crc32(&[&d.as_bytes()[..DESC_SIZE - 4]]);
        d.crc = U32::new(e, crc);
        let at = DESC_OFFSET + i * DESC_SIZE;
        buf[at..at + DESC_SIZE].copy_from_slice(d.as_bytes());
    }
    let area_at = stream_at;
    if cfg.callsite_pages > 0 {
        let mut d = StreamDesc::new_zeroed();
        d.kind = U16::new(e, STREAM_CALLSITES);
        d.cpu = U16::new(e, u16::MAX);
        d.page_count = U32::new(e, cfg.callsite_pages);
        d.pages_offset = U64::new(e, area_at as u64);
        put_text(&mut d.name, "callsites");
        d.crc = U32::new(e, crc32(&[&d.as_bytes()[..DESC_SIZE - 4]]));
        let at = DESC_OFFSET + streams * DESC_SIZE;
        buf[at..at + DESC_SIZE].copy_from_slice(d.as_bytes());
    }

    let (buf, area) = buf.split_at_mut(area_at);
    let callsites =
        (cfg.callsite_pages > 0).then(|| CallsiteWriter::start(area, e, cfg.generation));
    let (meta, pages) = buf.split_at_mut(p.pages_offset);
    let (meta, tails) = meta.split_at_mut(p.tail_offset);
    let (meta, descs) = meta.split_at_mut(DESC_OFFSET);
    let mut control = RegionControl { meta, e };
    control.set_state(STATE_RUNNING, REASON_NONE, 0, 0, "");
    for slot in pages.chunks_exact_mut(page) {
        slot[..PAGE_HEADER_SIZE].fill(0);
    }
    Ok(Formatted {
        control,
        callsites,
        streams: StreamWriters {
            rest: pages,
            tails,
            descs,
            next: 0,
            count: streams as u16,
            e,
            page_size: page,
            start_ts: cfg.created_ns,
        },
    })
}

/// What [`format`] returns: the state handle, one writer per stream, and
/// the callsite area's writer if the region has one.
pub struct Formatted<'a> {
    pub control: RegionControl<'a>,
    pub streams: StreamWriters<'a>,
    pub callsites: Option<CallsiteWriter<'a>>,
}

/// Updates the generation's state block (running, crashed, clean).
pub struct RegionControl<'a> {
    meta: &'a mut [u8],
    e: Endian,
}

impl RegionControl<'_> {
    /// Rewrites the state block with a fresh CRC. `message` is cut to 35
    /// bytes; the full text belongs in a `crash` event.
    pub fn set_state(
        &mut self,
        state: u32,
        reason: u32,
        crash_ns: u64,
        crash_cpu: u32,
        message: &str,
    ) {
        let e = self.e;
        let block = &mut self.meta[STATE_OFFSET..STATE_OFFSET + STATE_SIZE];
        let updates = StateBlock::read_from_bytes(block)
            .map(|s| s.updates.get(e).wrapping_add(1))
            .unwrap_or(1);
        let mut s = StateBlock::new_zeroed();
        s.state = U32::new(e, state);
        s.reason = U32::new(e, reason);
        s.crash_ns = U64::new(e, crash_ns);
        s.crash_cpu = U32::new(e, crash_cpu);
        s.updates = U32::new(e, updates);
        put_text(&mut s.message[..35], message);
        s.crc = U32::new(e, crc32(&[&s.as_bytes()[..STATE_SIZE - 4]]));
        block.copy_from_slice(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{builtin, Value, EVENT_LOST, EVENT_MARKER};

    fn one_stream(buf: &mut [u8]) -> StreamWriter<'_> {
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 1024,
            pages_per_stream: Some(2),
            streams: &specs,
            ..Default::default()
        };
        format(buf, &cfg).unwrap().streams.next().unwrap()
    }

    /// Bytes committed to the current page by `f`.
    fn committed(f: impl FnOnce(&mut StreamWriter<'_>)) -> usize {
        let mut buf = [0u8; 8192];
        let mut w = one_stream(&mut buf);
        let before = w.commit;
        f(&mut w);
        w.commit - before
    }

    fn dropped(w: &mut StreamWriter<'_>) -> u32 {
        let e = w.e;
        w.header_mut().dropped.get(e)
    }

    #[test]
    fn a_reservation_let_go_is_counted_once_as_dropped_and_a_committed_one_never() {
        let mut buf = [0u8; 8192];
        let mut w = one_stream(&mut buf);
        let mut r = w.reserve(10, EVENT_LOST, 8).unwrap();
        r.payload().fill(1);
        r.commit();
        w.reserve(20, EVENT_LOST, 8).unwrap();
        assert_eq!(
            (w.next_index(), dropped(&mut w)),
            (1, 0),
            "counted when owed"
        );
        // The next reserve counts it: the writer went on without it.
        w.write(30, EVENT_LOST, &[0; 8]).unwrap();
        assert_eq!((w.next_index(), dropped(&mut w)), (2, 1));
        // So does a close, before the CRC covers the header.
        w.reserve(40, EVENT_LOST, 8).unwrap();
        let seq = w.page_seq();
        w.close();
        w.write(50, EVENT_LOST, &[0; 8]).unwrap();
        assert_eq!(w.page_seq(), seq + 1);
        assert_eq!(dropped(&mut w), 0, "the new page owes nothing");
        let region =
            crate::read::Region::parse(&buf, crate::read::HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        assert_eq!(trace.streams[0].lost(crate::read::LossKind::Dropped), 2);
        assert_eq!(trace.streams[0].events.len(), 3);
    }

    #[test]
    fn nesting_lanes_get_their_page_count_and_their_lane_in_the_descriptor() {
        let specs = [
            StreamSpec::cpu(0),
            StreamSpec::cpu(1),
            StreamSpec::nested(0, 1),
            StreamSpec::nested(1, 1),
        ];
        let cfg = RegionConfig {
            page_size: 256,
            lane_pages: 3,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 16 << 10];
        let counts: Vec<u32> = format(&mut buf, &cfg)
            .unwrap()
            .streams
            .map(|w| w.page_count())
            .collect();
        let region =
            crate::read::Region::parse(&buf, crate::read::HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.header.cpu_count, 2, "CPUs, not lanes");
        let lanes: Vec<(u16, u8, u32)> = region
            .streams
            .iter()
            .map(|s| (s.cpu, s.lane, s.page_count))
            .collect();
        let flat = counts[0];
        assert!(flat > 3, "lane 0 gets what the lanes leave: {flat}");
        assert_eq!(lanes, [(0, 0, flat), (1, 0, flat), (0, 1, 3), (1, 1, 3)]);
        assert_eq!(counts, [flat, flat, 3, 3]);
        for bad in [
            RegionConfig {
                lane_pages: 1,
                ..cfg
            },
            RegionConfig {
                streams: &[StreamSpec::nested(0, 16)],
                ..cfg
            },
        ] {
            assert!(format(&mut buf, &bad).is_err());
        }
    }

    /// The module's pool: user streams sized apart, each started again by
    /// a process that may not write the tail table.
    #[test]
    fn user_streams_get_their_own_size_and_restart_without_tails() {
        let user = StreamSpec {
            kind: STREAM_USER,
            cpu: u16::MAX,
            lane: 0,
            name: "",
            pid: 0,
            uid: 0,
        };
        let specs = [StreamSpec::cpu(0), user, user];
        let cfg = RegionConfig {
            page_size: 256,
            user_pages: Some(2),
            streams: &specs,
            ..Default::default()
        };
        assert_eq!(
            format(
                &mut [0u8; 8192],
                &RegionConfig {
                    user_pages: Some(1),
                    ..cfg
                }
            )
            .err(),
            Some(FormatError::UserPages(1))
        );
        let mut buf = vec![0u8; 16 << 10];
        let size = region_size(&RegionConfig {
            pages_per_stream: Some(5),
            ..cfg
        })
        .unwrap();
        let at = {
            let f = format(&mut buf, &cfg).unwrap();
            let counts: Vec<u32> = f.streams.map(|w| w.page_count()).collect();
            assert!(
                counts[0] > 5,
                "the CPU gets what the pool leaves: {counts:?}"
            );
            assert_eq!(counts[1..], [2, 2]);
            let region =
                crate::read::Region::parse(&buf, crate::read::HeaderTrust::Checksummed).unwrap();
            assert!(size < region.header.region_size as usize);
            region.streams[2].pages_offset as usize
        };
        // What the module does when it hands the stream out: its
        // descriptor says the tails are not kept.
        let d = DESC_OFFSET + 2 * DESC_SIZE;
        let mut desc = StreamDesc::read_from_bytes(&buf[d..d + DESC_SIZE]).unwrap();
        desc.flags = U32::new(Endian::NATIVE, DESC_NO_TAILS);
        desc.crc = U32::new(Endian::NATIVE, crc32(&[&desc.as_bytes()[..DESC_SIZE - 4]]));
        buf[d..d + DESC_SIZE].copy_from_slice(desc.as_bytes());
        let tails_before = buf[..at].to_vec();
        let mut w =
            StreamWriter::start(&mut buf[at..at + 512], None, 2, Endian::NATIVE, 256, 50).unwrap();
        // A type the region's schema knows, or salvage of the open page
        // would stop at the first record.
        for i in 0..40u64 {
            w.write(100 + i, EVENT_LOST, &i.to_le_bytes()).unwrap();
        }
        assert_eq!(
            buf[..at],
            tails_before[..],
            "nothing before the pages written"
        );
        let region =
            crate::read::Region::parse(&buf, crate::read::HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let st = &trace.streams[2];
        let kept = st.events.len() as u64;
        assert!(kept > 0 && kept < 40);
        assert_eq!(st.lost(crate::read::LossKind::Overwritten), 40 - kept);
        assert_eq!(st.lost_events(), 40 - kept, "{:?}", st.losses);
        assert!(trace.diagnostics.is_empty(), "{:?}", trace.diagnostics);
        assert!(StreamWriter::start(&mut [0u8; 255], None, 0, Endian::NATIVE, 256, 0).is_none());
    }

    #[test]
    fn an_event_with_one_u64_takes_twelve_bytes() {
        let lost = builtin(EVENT_LOST).unwrap();
        // ftrace's ring buffer needs 24 bytes for the same event (a 4-byte
        // event header, the 8-byte trace_entry, the 8-byte payload, aligned).
        let n = committed(|w| w.write_event(500, lost, &[Value::Unsigned(7)]).unwrap());
        assert_eq!(n, 12);
        // A gap over 65.5 us costs a 4-byte time-extend; over 4.3 s a
        // 12-byte absolute time.
        let n = committed(|w| w.write_event(100_000, lost, &[Value::Unsigned(7)]).unwrap());
        assert_eq!(n, 16);
        let n = committed(|w| {
            w.write_event(10_000_000_000, lost, &[Value::Unsigned(7)])
                .unwrap()
        });
        assert_eq!(n, 24);
    }

    #[test]
    fn strings_are_padded_to_whole_words() {
        let marker = builtin(EVENT_MARKER).unwrap();
        // 4 header + 4 pid + 16 comm + 2 length + 5 text = 31, padded to 32.
        let v = [
            Value::Unsigned(1),
            Value::Chars(b"sh"),
            Value::Str(b"hello"),
        ];
        assert_eq!(committed(|w| w.write_event(1, marker, &v).unwrap()), 32);
    }

    #[test]
    fn what_cannot_be_recorded_is_counted() {
        let mut buf = [0u8; 8192];
        let mut w = one_stream(&mut buf);
        assert_eq!(w.write(0, 5, &[]), Err(Dropped::ReservedType(5)));
        assert_eq!(w.write(0, 40, &[0; 1017]), Err(Dropped::TooLarge(1017)));
        let lost = builtin(EVENT_LOST).unwrap();
        assert_eq!(
            w.write_event(0, lost, &[Value::Signed(1)]),
            Err(Dropped::Unencodable(EVENT_LOST))
        );
        let e = w.e;
        assert_eq!(w.header_mut().dropped.get(e), 3);
        assert_eq!(w.next_index(), 0);
    }

    #[test]
    fn timestamps_never_go_backwards() {
        let mut buf = [0u8; 8192];
        let mut w = one_stream(&mut buf);
        w.write(1_000, 40, &[]).unwrap();
        w.write(500, 40, &[]).unwrap();
        assert_eq!(w.time, 1_000);
    }

    #[test]
    fn refuses_impossible_configurations() {
        let specs = [StreamSpec::cpu(0)];
        let mut buf = [0u8; 8192];
        let cfg = |page_size| RegionConfig {
            page_size,
            streams: &specs,
            ..Default::default()
        };
        assert_eq!(
            format(&mut buf, &cfg(300)).err(),
            Some(FormatError::PageSize(300))
        );
        assert_eq!(
            format(&mut buf, &cfg(128)).err(),
            Some(FormatError::PageSize(128))
        );
        let none = RegionConfig {
            streams: &[],
            ..cfg(256)
        };
        assert_eq!(
            format(&mut buf, &none).err(),
            Some(FormatError::StreamCount(0))
        );
        let long = RegionConfig {
            hostname: &"h".repeat(64),
            ..cfg(256)
        };
        assert_eq!(
            format(&mut buf, &long).err(),
            Some(FormatError::TextTooLong("hostname"))
        );
        let word = RegionConfig {
            word_size: 2,
            ..cfg(256)
        };
        assert_eq!(
            format(&mut buf, &word).err(),
            Some(FormatError::WordSize(2))
        );
        // Each text limit: at it is accepted, one past it is refused.
        for (n, ok) in [(31, true), (32, false), (40, false)] {
            let name = "s".repeat(n);
            let streams = [StreamSpec {
                name: &name,
                ..StreamSpec::cpu(0)
            }];
            let c = RegionConfig {
                streams: &streams,
                ..cfg(256)
            };
            let got = format(&mut buf, &c).err();
            let want = (!ok).then_some(FormatError::TextTooLong("stream name"));
            assert_eq!(got, want, "a stream name of {n} bytes");
        }
        for (n, ok) in [(63, true), (64, false), (70, false)] {
            let text = "k".repeat(n);
            let c = RegionConfig {
                kernel_release: &text,
                ..cfg(256)
            };
            let want = (!ok).then_some(FormatError::TextTooLong("kernel_release"));
            assert_eq!(format(&mut buf, &c).err(), want, "a release of {n} bytes");
        }
        // What a region too small for two pages per stream needs is exact:
        // the pages start at 0x1000 here, and 2 pages of 4096 bytes follow.
        assert_eq!(
            format(&mut buf, &cfg(4096)).err(),
            Some(FormatError::TooSmall {
                need: 0x1000 + 2 * 4096,
                have: 8192
            })
        );
    }

    /// (seq, first_index, end_index, state) of tail copy `c`.
    fn tail(w: &StreamWriter<'_>, c: usize) -> (u64, u64, u64, u16) {
        let e = w.e;
        let t =
            StreamTail::read_from_bytes(&w.tail.as_deref().unwrap()[c * TAIL_SIZE..][..TAIL_SIZE])
                .unwrap();
        let crc = crc32(&[&t.as_bytes()[..TAIL_SIZE - 4]]);
        assert_eq!(t.crc.get(e), crc, "copy {c} CRC");
        assert_eq!(t.stream.get(e), w.stream);
        let (seq, first, end) = (t.seq.get(e), t.first_index.get(e), t.end_index.get(e));
        (seq, first, end, t.state.get(e))
    }

    #[test]
    fn every_page_open_and_close_rewrites_the_tail_copy_of_its_parity() {
        let mut buf = [0u8; 8192];
        let mut w = one_stream(&mut buf);
        assert_eq!(tail(&w, 1), (1, 0, 0, TAIL_OPEN));
        assert!(
            w.tail.as_deref().unwrap()[..TAIL_SIZE]
                .iter()
                .all(|&b| b == 0),
            "copy 0 empty"
        );
        // 100-byte records: 9 fit a 976-byte page, the 10th opens page 2.
        for i in 0..10 {
            w.write(i, 40, &[7; 96]).unwrap();
        }
        assert_eq!(w.page_seq(), 2);
        assert_eq!(tail(&w, 1), (1, 0, 9, TAIL_CLOSED));
        assert_eq!(tail(&w, 0), (2, 9, 9, TAIL_OPEN));
        w.close();
        assert_eq!(tail(&w, 0), (2, 9, 10, TAIL_CLOSED));
        // A second close changes nothing; a drop opens page 3 with copy 1.
        w.close();
        assert_eq!(tail(&w, 0), (2, 9, 10, TAIL_CLOSED));
        w.drop_event();
        assert_eq!(tail(&w, 1), (3, 10, 10, TAIL_OPEN));
    }

    #[test]
    fn formatting_clears_page_headers_of_an_earlier_generation() {
        let mut buf = [0u8; 8192];
        {
            let mut w = one_stream(&mut buf);
            for i in 0..100 {
                w.write(i, 40, &[1, 2, 3, 4]).unwrap();
            }
            w.close();
        }
        assert_eq!(one_stream(&mut buf).page_seq(), 1);
        let region =
            crate::read::Region::parse(&buf, crate::read::HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        assert_eq!(trace.event_count(), 0);
        assert_eq!(trace.lost_events(), 0);
    }
}
