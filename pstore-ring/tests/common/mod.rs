//! Builds regions from a list of operations, and predicts from the format's
//! rules alone (FORMAT.md sections 7, 8 and 10) what every operation does:
//! which writes are refused, on which page each event lands, what each
//! page holds. The prediction never asks the writer anything, so a writer
//! that refuses, clamps or fills pages wrongly disagrees with it instead of
//! defining it, and a reader is held to exactly the events of the pages
//! the ring still holds.

#![allow(dead_code)]

use proptest::prelude::*;
use pstore_ring::layout::{
    DELTA_MAX, FIRST_EVENT_TYPE, MAX_RECORD_SIZE, PAGE_HEADER_SIZE, RECORD_ALIGN,
    RECORD_HEADER_SIZE,
};
use pstore_ring::read::{HeaderTrust, LossKind, PageStatus, Region, Trace};
use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
use pstore_ring::write::{self, Dropped, RegionConfig, StreamSpec, StreamWriter};
use pstore_ring::Endian;

pub const CUSTOM: &[EventDef<'static>] = &[EventDef {
    id: 40,
    name: "blob",
    fields: &[
        FieldDef {
            name: "tag",
            kind: FieldKind::U16,
        },
        FieldDef {
            name: "data",
            kind: FieldKind::Bytes,
        },
    ],
}];

/// When the region is formatted: every stream's first page starts here.
pub const CREATED_NS: u64 = 1_000_000;

#[derive(Clone, Debug)]
pub enum Op {
    /// Write an event of shape `shape` (see `event`) with `size` bytes of
    /// variable data, `dt` ns after the previous write on any stream; a
    /// negative `dt` goes back in time, which the writer must clamp.
    Write {
        stream: usize,
        shape: u8,
        size: usize,
        dt: i64,
    },
    /// Count one event the producer could not record.
    Drop { stream: usize },
    /// Close the stream's current page, as the panic path does; its next
    /// write or drop opens the next page.
    Close { stream: usize },
}

#[derive(Clone, Debug)]
pub struct Setup {
    pub endian: Endian,
    /// The writer's pointer size, 4 or 8: no field depends on it, but the
    /// header must carry it.
    pub word_size: u8,
    pub page_size: u32,
    /// CPUs times `lanes`: stream lane·CPUs + CPU, as the format numbers
    /// them.
    pub streams: usize,
    /// Pages of each CPU's first lane.
    pub pages: u32,
    /// Nesting lanes per CPU (1: none).
    pub lanes: usize,
    /// Pages of each stream of lane 1 and up.
    pub lane_pages: u32,
    pub ops: Vec<Op>,
    /// Close every page at the end, as the panic path does; otherwise the
    /// current pages stay open, as after a power loss.
    pub close_at_end: bool,
}

impl Setup {
    pub fn cpus(&self) -> usize {
        self.streams / self.lanes
    }

    /// The page count of stream `stream`.
    pub fn pages_of(&self, stream: usize) -> u32 {
        if stream < self.cpus() {
            self.pages
        } else {
            self.lane_pages
        }
    }
}

fn dt_strategy() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => 0i64..2_000,
        // Either side of the 16-bit delta: a time-extend from 65536 on.
        3 => 0i64..70_000,
        // Time-extends up to 2^32 - 1, absolute times after.
        2 => 60_000i64..5_000_000_000,
        1 => 4_000_000_000i64..(1 << 40),
        // Back in time: clamped to the stream's running time.
        2 => -5_000_000_000i64..0,
    ]
}

/// A record's bytes for a payload of `len` bytes: its header word, then
/// the payload padded to whole words.
pub fn record_size(len: usize) -> usize {
    RECORD_HEADER_SIZE + len.next_multiple_of(RECORD_ALIGN)
}

/// The largest record (header included) a page of `page_size` takes: a
/// record is at most 255 words, and it must fit the page's data.
pub fn largest_record(page_size: u32) -> usize {
    (page_size as usize - PAGE_HEADER_SIZE).min(MAX_RECORD_SIZE)
}

/// Mostly small events, and enough around the largest record a page takes
/// (shapes 2 and 3 add 22 and 4 bytes of fixed fields to `size`) that
/// records one word either side of refusal are common.
fn size_strategy(page_size: u32) -> impl Strategy<Value = usize> {
    let largest = largest_record(page_size) - RECORD_HEADER_SIZE;
    prop_oneof![
        12 => 0usize..120,
        3 => largest - 30..largest + 8,
        1 => 0usize..largest + 8,
    ]
}

pub fn op_strategy(streams: usize, page_size: u32) -> impl Strategy<Value = Op> {
    let shape = prop_oneof![12 => 0u8..4, 1 => Just(4u8)];
    prop_oneof![
        20 => (0..streams, shape, size_strategy(page_size), dt_strategy())
            .prop_map(|(stream, shape, size, dt)| Op::Write { stream, shape, size, dt }),
        1 => (0..streams).prop_map(|stream| Op::Drop { stream }),
        1 => (0..streams).prop_map(|stream| Op::Close { stream }),
    ]
}

pub fn setup_strategy(max_ops: usize) -> impl Strategy<Value = Setup> {
    (
        prop_oneof![Just(Endian::Little), Just(Endian::Big)],
        prop_oneof![Just(4u8), Just(8)],
        prop_oneof![Just(256u32), Just(512), Just(1024), Just(2048), Just(4096)],
        1usize..5,
        2u32..7,
        (prop_oneof![3 => Just(1usize), 1 => 2usize..4], 2u32..4),
        any::<bool>(),
    )
        .prop_flat_map(
            move |(
                endian,
                word_size,
                page_size,
                cpus,
                pages,
                (lanes, lane_pages),
                close_at_end,
            )| {
                let streams = cpus * lanes;
                proptest::collection::vec(op_strategy(streams, page_size), 0..max_ops).prop_map(
                    move |ops| Setup {
                        endian,
                        word_size,
                        page_size,
                        streams,
                        pages,
                        lanes,
                        lane_pages,
                        ops,
                        close_at_end,
                    },
                )
            },
        )
}

/// The bytes of a deterministic text of `n` bytes.
pub fn text(n: usize, salt: u64) -> Vec<u8> {
    (0..n)
        .map(|i| b'a' + ((i as u64 + salt) % 26) as u8)
        .collect()
}

/// One call into a writer: what an [`Op`] becomes.
#[derive(Clone, Debug)]
pub enum Call {
    Write {
        stream: usize,
        /// As requested, before the writer's clamp.
        ts: u64,
        type_id: u8,
        payload: Vec<u8>,
    },
    Drop {
        stream: usize,
    },
    Close {
        stream: usize,
    },
}

/// The calls `s.ops` make, in order: what a writer is given and what
/// [`predict`] predicts from.
pub fn calls(s: &Setup) -> Vec<Call> {
    let mut now = CREATED_NS;
    let mut out = Vec::with_capacity(s.ops.len());
    for (n, op) in s.ops.iter().enumerate() {
        out.push(match *op {
            Op::Write {
                stream,
                shape,
                size,
                dt,
            } => {
                now = now.saturating_add_signed(dt);
                let (type_id, payload) = event(n, shape, size, s.endian);
                Call::Write {
                    stream,
                    ts: now,
                    type_id,
                    payload,
                }
            }
            Op::Drop { stream } => Call::Drop { stream },
            Op::Close { stream } => Call::Close { stream },
        });
    }
    out
}

/// Something [`Call`]s are played into, stream by stream: the model, the
/// Rust writer, the C writer (qemu-tests' `c_model`).
pub trait Writers {
    /// What a write returns.
    type Outcome;
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) -> Self::Outcome;
    fn drop_event(&mut self, stream: usize);
    fn close(&mut self, stream: usize);
}

/// Plays `calls` into `w`: what each write returned, `None` for drops and
/// closes.
pub fn play<W: Writers>(calls: &[Call], w: &mut W) -> Vec<Option<W::Outcome>> {
    calls
        .iter()
        .map(|call| match call {
            Call::Write {
                stream,
                ts,
                type_id,
                payload,
            } => Some(w.write(*stream, *ts, *type_id, payload)),
            Call::Drop { stream } => {
                w.drop_event(*stream);
                None
            }
            Call::Close { stream } => {
                w.close(*stream);
                None
            }
        })
        .collect()
}

/// The type and payload op `n` writes. Shape 0 is a `lost`, 1 an
/// `irq_handler_exit`, 2 a `marker` with `size` bytes of text, 3 a custom
/// `blob` with `size` bytes, and 4 or more a record of the reserved type
/// `size % 16`, which a writer must refuse.
fn event(n: usize, shape: u8, size: usize, e: Endian) -> (u8, Vec<u8>) {
    let body = text(size, n as u64);
    let (def, values): (&EventDef, Vec<Value>) = match shape {
        0 => (
            schema::builtin(schema::EVENT_LOST).unwrap(),
            vec![Value::Unsigned(n as u64)],
        ),
        1 => (
            schema::builtin(schema::EVENT_IRQ_EXIT).unwrap(),
            vec![Value::Unsigned(n as u64 % 64), Value::Unsigned(1)],
        ),
        2 => (
            schema::builtin(schema::EVENT_MARKER).unwrap(),
            vec![
                Value::Unsigned(n as u64),
                Value::Chars(b"model"),
                Value::Str(&body),
            ],
        ),
        3 => (
            &CUSTOM[0],
            vec![Value::Unsigned(n as u64 & 0xffff), Value::Bytes(&body)],
        ),
        _ => return ((size % 16) as u8, body),
    };
    let len = schema::payload_len(def, &values).expect("values fit the type");
    let mut payload = vec![0u8; len];
    schema::encode_payload(def, &values, e, &mut payload).expect("encodes");
    (def.id, payload)
}

/// A page the model says a stream opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub seq: u64,
    pub first_index: u64,
    pub first_ts: u64,
    /// Bytes of records, time prefixes included.
    pub commit: usize,
    pub count: u32,
    pub dropped: u32,
    pub closed: bool,
}

/// One committed event as the model predicts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// After the writer's clamp.
    pub ts: u64,
    pub type_id: u8,
    pub payload: Vec<u8>,
    /// The `seq` of the page it lands on.
    pub seq: u64,
    /// Bytes of time-extend (4) or absolute-time (12) record before it: 0
    /// when the gap fits its own delta or it starts a page.
    pub prefix: usize,
}

/// One stream as the model predicts it.
#[derive(Clone, Debug, Default)]
pub struct StreamModel {
    /// Every page the stream opened: `pages[k]` has `seq` k + 1.
    pub pages: Vec<Page>,
    /// Every event committed: `events[i]` has index i.
    pub events: Vec<Written>,
}

impl StreamModel {
    /// The pages a ring of `ring` slots still holds: the newest `ring`.
    pub fn surviving(&self, ring: u32) -> &[Page] {
        &self.pages[self.pages.len().saturating_sub(ring as usize)..]
    }
}

/// What the format's rules say a writer does with a [`Setup`].
#[derive(Clone, Debug)]
pub struct Prediction {
    pub streams: Vec<StreamModel>,
    /// What each op's write returns; `None` for drops and closes.
    pub results: Vec<Option<Result<(), Dropped>>>,
}

/// A stream's writer state, as FORMAT.md section 10 keeps it.
struct Sim {
    model: StreamModel,
    /// The running time: the last event's timestamp, or the current page's
    /// `first_ts` before its first event.
    time: u64,
    /// Whether the newest page is open.
    open: bool,
}

impl Sim {
    fn new() -> Sim {
        // Formatting opens page 1 at the creation time (rule 3).
        let mut sim = Sim {
            model: StreamModel::default(),
            time: CREATED_NS,
            open: false,
        };
        sim.open_next(CREATED_NS);
        sim
    }

    /// Closes the current page if it is open and opens the next at `ts`.
    fn open_next(&mut self, ts: u64) {
        if let Some(p) = self.model.pages.last_mut() {
            p.closed = true;
        }
        self.model.pages.push(Page {
            seq: self.model.pages.len() as u64 + 1,
            first_index: self.model.events.len() as u64,
            first_ts: ts,
            commit: 0,
            count: 0,
            dropped: 0,
            closed: false,
        });
        self.time = ts;
        self.open = true;
    }

    fn page(&mut self) -> &mut Page {
        self.model
            .pages
            .last_mut()
            .expect("page 1 opened at format")
    }

    /// An event that cannot be recorded counts in the current page's
    /// `dropped`; after a close there is none, so the writer opens the next
    /// page at the running time to count it in.
    fn drop_event(&mut self) {
        if !self.open {
            self.open_next(self.time);
        }
        let p = self.page();
        p.dropped = p.dropped.saturating_add(1);
    }

    fn close(&mut self) {
        if self.open {
            self.page().closed = true;
            self.open = false;
        }
    }

    fn write(
        &mut self,
        page_size: u32,
        ts: u64,
        type_id: u8,
        payload: &[u8],
    ) -> Result<(), Dropped> {
        if type_id < FIRST_EVENT_TYPE {
            self.drop_event();
            return Err(Dropped::ReservedType(type_id));
        }
        let body = record_size(payload.len());
        if body > largest_record(page_size) {
            self.drop_event();
            return Err(Dropped::TooLarge(payload.len()));
        }
        let ts = ts.max(self.time);
        // The gap to the running time decides the prefix (section 8).
        let gap = ts - self.time;
        let prefix = if gap <= DELTA_MAX {
            0
        } else if gap <= u64::from(u32::MAX) {
            4
        } else {
            12
        };
        let data = page_size as usize - PAGE_HEADER_SIZE;
        let prefix = if !self.open || self.page().commit + prefix + body > data {
            // A new page starts at the event's time: no prefix.
            self.open_next(ts);
            0
        } else {
            prefix
        };
        let p = self.page();
        p.commit += prefix + body;
        p.count += 1;
        let seq = p.seq;
        self.time = ts;
        self.model.events.push(Written {
            ts,
            type_id,
            payload: payload.to_vec(),
            seq,
            prefix,
        });
        Ok(())
    }
}

/// The model's streams of one setup.
struct Sims {
    page_size: u32,
    streams: Vec<Sim>,
}

impl Writers for Sims {
    type Outcome = Result<(), Dropped>;
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) -> Self::Outcome {
        self.streams[stream].write(self.page_size, ts, type_id, payload)
    }
    fn drop_event(&mut self, stream: usize) {
        self.streams[stream].drop_event();
    }
    fn close(&mut self, stream: usize) {
        self.streams[stream].close();
    }
}

/// Predicts, from the format's rules alone, what a writer does with `s`.
pub fn predict(s: &Setup) -> Prediction {
    let mut sims = Sims {
        page_size: s.page_size,
        streams: (0..s.streams).map(|_| Sim::new()).collect(),
    };
    let results = play(&calls(s), &mut sims);
    if s.close_at_end {
        sims.streams.iter_mut().for_each(Sim::close);
    }
    Prediction {
        streams: sims.streams.into_iter().map(|sim| sim.model).collect(),
        results,
    }
}

/// A region the Rust writer built, what it returned, and what it should
/// have done.
pub struct Model {
    pub image: Vec<u8>,
    /// What the writer returned for each op; `None` for drops and closes.
    pub results: Vec<Option<Result<(), Dropped>>>,
    pub want: Prediction,
}

/// The Rust writer's streams of one region.
struct RustWriters<'a>(Vec<StreamWriter<'a>>);

impl Writers for RustWriters<'_> {
    type Outcome = Result<(), Dropped>;
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) -> Self::Outcome {
        self.0[stream].write(ts, type_id, payload)
    }
    fn drop_event(&mut self, stream: usize) {
        self.0[stream].drop_event();
    }
    fn close(&mut self, stream: usize) {
        self.0[stream].close();
    }
}

pub fn build(s: &Setup) -> Model {
    let cpus = s.cpus();
    let specs: Vec<StreamSpec> = (0..s.streams)
        .map(|i| StreamSpec::nested((i % cpus) as u16, (i / cpus) as u8))
        .collect();
    let cfg = RegionConfig {
        endian: s.endian,
        word_size: s.word_size,
        page_size: s.page_size,
        pages_per_stream: Some(s.pages),
        lane_pages: s.lane_pages,
        streams: &specs,
        custom_events: CUSTOM,
        created_ns: CREATED_NS,
        kernel_release: "6.12.0-test",
        hostname: "model",
        ..Default::default()
    };
    let pages: usize = (0..s.streams).map(|i| s.pages_of(i) as usize).sum();
    let mut image = vec![0u8; 64 * 1024 + pages * s.page_size as usize];
    let results;
    {
        let f = write::format(&mut image, &cfg).expect("format");
        let mut ws = RustWriters(f.streams.collect());
        results = play(&calls(s), &mut ws);
        if s.close_at_end {
            ws.0.iter_mut().for_each(|w| w.close());
        }
    }
    let region = Region::parse(&image, HeaderTrust::Checksummed).expect("fresh image parses");
    let size = region.header.region_size as usize;
    image.truncate(size);
    Model {
        image,
        results,
        want: predict(s),
    }
}

/// Strips record padding: the model's payload is a prefix of the event's.
pub fn same_payload(got: &[u8], want: &[u8]) -> bool {
    got.len() >= want.len()
        && got.len() - want.len() < 4
        && got.starts_with(want)
        && got[want.len()..].iter().all(|&b| b == 0)
}

/// Checks the trace of an undamaged region against the prediction: every
/// slot holds the page the model puts there, the reader returns exactly
/// the events of the surviving pages, and its losses are exactly the
/// events on overwritten pages and the drops counted on surviving ones.
pub fn check_decoded(s: &Setup, want: &Prediction, trace: &Trace<'_>) -> Result<(), TestCaseError> {
    prop_assert!(
        trace.diagnostics.is_empty(),
        "diagnostics on a clean image: {:?}",
        trace.diagnostics
    );
    prop_assert_eq!(trace.streams.len(), s.streams);
    for (i, (st, model)) in trace.streams.iter().zip(&want.streams).enumerate() {
        let pages = s.pages_of(i);
        let kept = model.surviving(pages);
        // Exactly the events from the oldest surviving page's first on:
        // pages hold consecutive indexes.
        let first = kept[0].first_index;
        let expect = &model.events[first as usize..];
        prop_assert_eq!(st.events.len(), expect.len(), "stream {} events", i);
        for (k, (g, w)) in st.events.iter().zip(expect).enumerate() {
            let index = first + k as u64;
            prop_assert_eq!(g.index, index, "stream {} event {}", i, k);
            prop_assert_eq!(g.ts, w.ts, "stream {} event {}", i, index);
            prop_assert_eq!(g.type_id, w.type_id, "stream {} event {}", i, index);
            prop_assert!(
                same_payload(g.payload, &w.payload),
                "stream {} event {} payload",
                i,
                index
            );
            let open = !model.pages[w.seq as usize - 1].closed;
            prop_assert_eq!(g.salvaged, open, "stream {} event {}", i, index);
        }

        // Page seq k lives in slot (k - 1) mod pages: slots are taken in
        // ring order from slot 0. A page's first event, where its report
        // says, is the one the model wrote first on it.
        let mut slots: Vec<(u32, u32, PageStatus, u64, u32, Option<u64>)> = (0..pages)
            .map(|slot| (slot, 1, PageStatus::Unused, 0, 0, None))
            .collect();
        for p in kept {
            let status = if p.closed {
                PageStatus::Intact
            } else {
                PageStatus::Salvaged
            };
            let first_ts = (p.count > 0).then(|| model.events[p.first_index as usize].ts);
            let slot = ((p.seq - 1) % u64::from(pages)) as usize;
            slots[slot] = (slot as u32, 1, status, p.seq, p.count, first_ts);
        }
        let got: Vec<_> = st
            .pages
            .iter()
            .map(|p| {
                let first = (p.records > 0).then(|| st.events.get(p.first_event).map(|e| e.ts));
                (p.slot, p.slots, p.status, p.seq, p.records, first.flatten())
            })
            .collect();
        prop_assert_eq!(got, slots, "stream {} pages", i);

        // (kind, events, pages, at_index), in the reader's stream order.
        let mut losses = Vec::new();
        if first > 0 {
            losses.push((LossKind::Overwritten, first, kept[0].seq - 1, first));
        }
        for p in kept.iter().filter(|p| p.dropped > 0) {
            let end = p.first_index + u64::from(p.count);
            losses.push((LossKind::Dropped, u64::from(p.dropped), 0, end));
        }
        let got: Vec<_> = st
            .losses
            .iter()
            .map(|l| (l.kind, l.events, l.pages, l.at_index))
            .collect();
        prop_assert_eq!(got, losses, "stream {} losses", i);
        prop_assert!(st.lost_exact(), "stream {} end unknown", i);
    }
    Ok(())
}

/// A busy image in which every page is closed: several wraparounds on
/// every stream.
pub fn closed_image(
    endian: Endian,
    page_size: u32,
    streams: usize,
    pages: u32,
    seed: u64,
) -> Model {
    let ops = (0..(streams * pages as usize * page_size as usize / 24))
        .map(|n| {
            let n = n as u64 ^ seed;
            Op::Write {
                stream: (n % streams as u64) as usize,
                shape: (n % 4) as u8,
                size: (n % 60) as usize,
                dt: (n % 90_000) as i64,
            }
        })
        .collect();
    build(&Setup {
        endian,
        word_size: 8,
        page_size,
        streams,
        pages,
        lanes: 1,
        lane_pages: 2,
        ops,
        close_at_end: true,
    })
}

/// Rewrites a little-endian field and the CRC that covers it.
pub fn patch(image: &mut [u8], at: usize, bytes: &[u8], crc_range: std::ops::Range<usize>) {
    image[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = pstore_ring::layout::crc32(&[&image[crc_range.clone()]]);
    image[crc_range.end..crc_range.end + 4].copy_from_slice(&crc.to_le_bytes());
}
