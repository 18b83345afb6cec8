//! The salvaging reader: arbitrary bytes in, everything intact out, plus a
//! precise account of what was not.
//!
//! Reading never fails past the header: [`Region::parse`] returns an error
//! only when the header itself cannot be trusted. After that, every problem
//! (a damaged descriptor, schema table or page, a torn record) is a
//! [`Diagnostic`] that names the stream, the page slot and the region
//! offset, and costs only the bytes it covers. [`Region::decode_paged`]
//! rebuilds each stream's pages in sequence-number order, decodes closed
//! pages whose CRC holds, salvages the open page record by record, and
//! reports every lost event as a [`Loss`]; its events stay in the
//! region's bytes, walked again page by page when asked for.
//! [`Region::decode`] is the same with every event walked into a vector.

mod absent;
mod callsites;
mod clock;
mod debug;
mod region;
mod schema;
mod stream;
mod tally;

pub use callsites::{AreaHeader, CallsiteArea, CallsiteError, Walk};
pub use clock::{ClockStep, WallClock, MAX_CLOCK_STEPS};
pub use debug::{
    drm_category_bit, drm_category_name, is_debug_type, DebugEvent, Message, MessageError,
    PRINTK_LINE_MAX,
};
pub use region::{
    parse_header, reason_name, HeaderError, HeaderInfo, HeaderTrust, StateInfo, StreamInfo,
    TailTable, USER_LABEL_PREFIX,
};
pub use schema::{EventType, Field, Schema, SchemaError, Values};
pub(crate) use stream::{lost_events, pages_with};
pub use stream::{
    DecodedPage, EndCause, Event, Loss, LossKind, PageEvents, PageReport, PageStatus, StreamEvents,
    StreamPages, StreamTrace,
};
pub use tally::Tally;

use crate::record::RecordError;
use absent::Absent;
use alloc::vec::Vec;
use core::fmt;

/// A non-fatal problem and exactly where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub stream: Option<u16>,
    pub page: Option<u32>,
    /// Byte offset from the start of the region.
    pub offset: u64,
    pub problem: Problem,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.stream {
            write!(f, "stream {s} ")?;
        }
        if let Some(p) = self.page {
            write!(f, "page {p} ")?;
        }
        write!(f, "at region offset {:#x}: {}", self.offset, self.problem)
    }
}

/// What was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("truncated: the input ends inside this structure")]
    Truncated,
    #[error(
        "pages {from}.. ({count} of them) are not in the input: the dump excluded or lost them"
    )]
    Absent { from: u32, count: u32 },
    #[error("pages {from}.. ({count} of them) lie past the end of the input")]
    PagesMissing { from: u32, count: u32 },
    #[error("region is {size} bytes by its header, the input holds {have}")]
    RegionTruncated { size: u64, have: u64 },
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("region header CRC mismatch: stored {stored:#010x}, computed {computed:#010x}; fields used anyway")]
    HeaderCrc { stored: u32, computed: u32 },
    #[error("invalid field `{field}`: {value}")]
    InvalidField { field: &'static str, value: u64 },
    #[error("page `magic` is {0:#010x}")]
    BadMagic(u32),
    #[error("page belongs to stream {0}")]
    WrongStream(u16),
    #[error("page `flags` {0:#06x} is not a page state")]
    BadFlags(u16),
    #[error("page `commit` {0} exceeds the page")]
    CommitOutOfRange(u32),
    #[error("page `seq` {0} is also used by an earlier slot")]
    DuplicateSeq(u64),
    #[error("{0}")]
    Record(RecordError),
    #[error("record at data offset {offset}: type {type_id} is not in the schema")]
    UnknownType { offset: usize, type_id: u8 },
    #[error("record at data offset {offset}: payload does not match event type {type_id}")]
    PayloadMismatch { offset: usize, type_id: u8 },
    #[error("page `count` is {header}, {decoded} records decoded")]
    CountMismatch { header: u32, decoded: u32 },
    #[error("page `first_index` is {found}, the previous page ends at {expected}")]
    IndexMismatch { expected: u64, found: u64 },
    #[error("schema table unusable, built-in event types used: {0}")]
    Schema(SchemaError),
    #[error("tail copy {copy}: CRC mismatch: stored {stored:#010x}, computed {computed:#010x}; not believed")]
    TailCrc {
        copy: u8,
        stored: u32,
        computed: u32,
    },
    #[error("tail copy {copy}: invalid field `{field}`: {value}; not believed")]
    TailField {
        copy: u8,
        field: &'static str,
        value: u64,
    },
    #[error("tail copy {copy} is not in the input: the dump excluded or lost it")]
    TailAbsent { copy: u8 },
    #[error("its descriptor is not in the input: the dump excluded or lost it")]
    DescAbsent,
    #[error("the state block is not in the input: the dump excluded or lost it")]
    StateAbsent,
    #[error(
        "tail says page seq {tail} is the newest, but page seq {newest} is readable; not believed"
    )]
    TailBehind { tail: u64, newest: u64 },
    #[error(
        "{ignored} `clock` events before the stream's newest {max} do not step the wall clock",
        max = MAX_CLOCK_STEPS
    )]
    ClockSteps { ignored: u64 },
}

/// One region: its metadata, parsed and checked, over the bytes it came
/// from. The bytes may be shorter than the region (a truncated dump); what
/// is missing is reported, not guessed.
#[derive(Clone, Debug)]
pub struct Region<'a> {
    bytes: &'a [u8],
    /// Byte ranges of `bytes` that the input could not supply.
    absent: Absent,
    pub header: HeaderInfo,
    /// The state block, or why it could not be read.
    pub state: Result<StateInfo, Problem>,
    pub streams: Vec<StreamInfo>,
    /// Where the callsite area is, if the region has one (FORMAT.md,
    /// section 18); not a stream.
    pub callsites: Option<CallsiteArea>,
    pub schema: Schema,
    pub tails: TailTable,
    pub diagnostics: Vec<Diagnostic>,
}

/// Everything recovered from a region.
#[derive(Clone, Debug)]
pub struct Trace<'a> {
    pub streams: Vec<StreamTrace<'a>>,
    /// The region's diagnostics followed by every page's.
    pub diagnostics: Vec<Diagnostic>,
}

impl Trace<'_> {
    /// Events lost for any reason, over all streams, user streams' claims
    /// included: a region's headline is [`PagedTrace::kernel_tally`].
    /// Saturates: a hostile region can claim more than 2^64 lost events.
    pub fn lost_events(&self) -> u64 {
        self.streams
            .iter()
            .fold(0, |n, s| n.saturating_add(s.lost_events()))
    }

    pub fn event_count(&self) -> usize {
        self.streams.iter().map(|s| s.events.len()).sum()
    }

    /// Whether [`Self::lost_events`] is exact; if not it is a lower bound,
    /// as some stream's end is unknown.
    pub fn lost_exact(&self) -> bool {
        self.streams.iter().all(|s| s.lost_exact())
    }

    /// Whether `st`, one of [`Self::streams`], is empty
    /// ([`is_empty_stream`]).
    pub fn is_empty_stream(&self, st: &StreamTrace) -> bool {
        is_empty_stream(&st.info, st.events.len(), &st.losses, &self.diagnostics)
    }
}

/// Whether a stream has nothing to tell: it holds no event, lost none,
/// and no diagnostic names it. A region has many such streams by design
/// (a CPU's nesting lanes above 0 fill only when its writes nest, the
/// kernel module's pool of user streams only as processes take them), so
/// what people read lists them in one line and the trace formats give
/// them no stream of their own. A stream that lost events or was damaged
/// is never empty, even with no event left: that is what a reader must
/// see.
fn is_empty_stream(
    info: &StreamInfo,
    events: usize,
    losses: &[Loss],
    diags: &[Diagnostic],
) -> bool {
    events == 0 && losses.is_empty() && !diags.iter().any(|d| d.stream == Some(info.index))
}

/// Everything recovered from a region, decoded page by page: as [`Trace`],
/// but each stream's events stay in the region's bytes, walked again when
/// asked for, so its memory follows the region's pages, not its events.
#[derive(Clone, Debug)]
pub struct PagedTrace<'a> {
    pub streams: Vec<StreamPages<'a>>,
    /// As [`Trace::diagnostics`].
    pub diagnostics: Vec<Diagnostic>,
}

impl<'a> PagedTrace<'a> {
    /// As [`Trace::lost_events`].
    pub fn lost_events(&self) -> u64 {
        self.streams
            .iter()
            .fold(0, |n, s| n.saturating_add(s.lost_events()))
    }

    /// As [`Trace::event_count`].
    pub fn event_count(&self) -> usize {
        self.streams
            .iter()
            .fold(0, |n, s| n.saturating_add(s.event_count()))
    }

    /// As [`Trace::lost_exact`].
    pub fn lost_exact(&self) -> bool {
        self.streams.iter().all(|s| s.lost_exact())
    }

    /// As [`Trace::is_empty_stream`], for `st`, one of [`Self::streams`].
    pub fn is_empty_stream(&self, st: &StreamPages) -> bool {
        is_empty_stream(&st.info, st.event_count(), &st.losses, &self.diagnostics)
    }

    /// The same trace with every stream's events held: what
    /// [`Region::decode`] returns.
    pub fn to_trace(&self) -> Trace<'a> {
        Trace {
            streams: self.streams.iter().map(StreamPages::to_trace).collect(),
            diagnostics: self.diagnostics.clone(),
        }
    }
}

impl<'a> Region<'a> {
    /// Parses the region that starts at `bytes[0]`.
    pub fn parse(bytes: &'a [u8], trust: HeaderTrust) -> Result<Region<'a>, HeaderError> {
        let header = parse_header(bytes, trust)?;
        Ok(Region::read(bytes, header, Absent::default()))
    }

    /// Reads the region whose `header` was parsed from `bytes[0]`: its
    /// state block, descriptors and schema table, each one touching
    /// `absent` reported as not in the input rather than checked.
    fn read(bytes: &'a [u8], header: HeaderInfo, absent: Absent) -> Region<'a> {
        let mut diagnostics = Vec::new();
        if !header.crc_ok {
            let stored = crate::endian::u32_at(bytes, 252, header.endian).unwrap_or(0);
            let computed = header.checksum.crc(&[&bytes[..252]]);
            let problem = Problem::HeaderCrc { stored, computed };
            diagnostics.push(Diagnostic {
                stream: None,
                page: None,
                offset: 0,
                problem,
            });
        }
        let have = bytes.len() as u64;
        if have < header.region_size {
            let problem = Problem::RegionTruncated {
                size: header.region_size,
                have,
            };
            diagnostics.push(Diagnostic {
                stream: None,
                page: None,
                offset: have,
                problem,
            });
        }
        let bytes = &bytes[..bytes
            .len()
            .min(usize::try_from(header.region_size).unwrap_or(usize::MAX))];
        let state = region::parse_state(bytes, &header, &absent);
        let (streams, callsites) = region::parse_streams(bytes, &header, &absent, &mut diagnostics);
        let schema = region::parse_schema(bytes, &header, &absent, &mut diagnostics);
        let tails = region::tail_table(&header, &mut diagnostics);
        Region {
            bytes,
            absent,
            header,
            state,
            streams,
            callsites,
            schema,
            tails,
            diagnostics,
        }
    }

    /// Marks byte ranges (from the region's start) that the input could not
    /// supply, such as pages a dump filtered out. The state block,
    /// descriptors and schema table are read again, and one touching them
    /// is reported as not in the input instead of failing its checks on
    /// the placeholder bytes; pages touching them are reported
    /// [`PageStatus::Absent`] and their events counted as unreadable,
    /// instead of the placeholder bytes being decoded. Ranges may come in
    /// any order and overlap.
    pub fn with_absent(self, absent: Vec<core::ops::Range<u64>>) -> Self {
        Region::read(self.bytes, self.header, Absent::new(absent))
    }

    /// Whether any byte of `range` is absent from the input.
    pub fn is_absent(&self, range: core::ops::Range<u64>) -> bool {
        self.absent.touches(range)
    }

    /// Where the absent stretch holding some byte of `range` ends, if any
    /// byte of it is absent. A range as long as `range` that starts later
    /// but before that end touches the same stretch, so a run of absent
    /// pages is found in one step, not page by page.
    pub fn absent_until(&self, range: core::ops::Range<u64>) -> Option<u64> {
        self.absent.until(range)
    }

    /// The region's bytes (at most `region_size` of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The region's wall clock: its header's offset, superseded by the
    /// `clock` events of `trace` (decoded from this region).
    pub fn wall_clock(&self, trace: &Trace<'_>) -> WallClock {
        WallClock::new(self.header.wall_offset_ns, self.header.endian, trace)
    }

    /// As [`Self::wall_clock`], for a trace decoded page by page.
    pub fn wall_clock_of_pages(&self, trace: &PagedTrace<'_>) -> WallClock {
        WallClock::of_pages(self.header.wall_offset_ns, trace)
    }

    /// Decodes and salvages every stream, page by page, keeping no events:
    /// [`StreamPages::events`] walks them again on demand.
    pub fn decode_paged(&self) -> PagedTrace<'a> {
        let mut diagnostics = self.diagnostics.clone();
        let streams = self
            .streams
            .iter()
            .map(|s| self.decode_stream_paged(s, &mut diagnostics))
            .collect();
        PagedTrace {
            streams,
            diagnostics,
        }
    }

    /// Decodes and salvages one stream, page by page, keeping no events,
    /// and appends its pages' diagnostics to `diagnostics`. Streams are
    /// independent: a caller with threads may decode them in parallel and
    /// assemble the [`PagedTrace`] in stream order, after the region's own
    /// diagnostics, as [`Self::decode_paged`] does.
    pub fn decode_stream_paged(
        &self,
        info: &StreamInfo,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> StreamPages<'a> {
        stream::decode_paged(self, info, diagnostics, &mut |_| {})
    }

    /// [`Self::decode_stream_paged`], telling `walked` each page's byte
    /// range (region offsets) once it has read it: each page is read twice,
    /// when its header and checksum are checked, slot by slot, and when its
    /// records are walked, in stream order. A caller holding the region in
    /// memory it can give back (a file mapping) may drop what was walked;
    /// the decoded pages read it again when their events are walked.
    pub fn decode_stream_paged_walked(
        &self,
        info: &StreamInfo,
        diagnostics: &mut Vec<Diagnostic>,
        walked: &mut dyn FnMut(core::ops::Range<u64>),
    ) -> StreamPages<'a> {
        stream::decode_paged(self, info, diagnostics, walked)
    }

    /// Decodes and salvages every stream, holding every event: the paged
    /// decoding ([`Self::decode_paged`]) with its events walked into
    /// vectors, for tests and small regions.
    pub fn decode(&self) -> Trace<'a> {
        self.decode_paged().to_trace()
    }

    /// Decodes and salvages one stream, appending its pages' diagnostics
    /// to `diagnostics`, holding its events: [`Self::decode_stream_paged`]
    /// with its events walked into a vector.
    pub fn decode_stream(
        &self,
        info: &StreamInfo,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> StreamTrace<'a> {
        self.decode_stream_paged(info, diagnostics).to_trace()
    }
}
