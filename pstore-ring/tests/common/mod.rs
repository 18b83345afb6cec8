//! Builds regions from a list of operations and remembers, per stream, what
//! was written: the reference model the reader's output is checked against.

#![allow(dead_code)]

use proptest::prelude::*;
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
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

/// One event as the model remembers it: timestamp after the writer's clamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub ts: u64,
    pub type_id: u8,
    pub payload: Vec<u8>,
}

#[derive(Clone, Debug)]
pub enum Op {
    /// Write an event of shape `shape` with `size` bytes of variable data,
    /// `dt` ns after the previous one on any stream.
    Write {
        stream: usize,
        shape: u8,
        size: usize,
        dt: u64,
    },
    Drop {
        stream: usize,
    },
    Close {
        stream: usize,
    },
}

#[derive(Clone, Debug)]
pub struct Setup {
    pub endian: Endian,
    pub page_size: u32,
    pub streams: usize,
    pub pages: u32,
    pub ops: Vec<Op>,
    /// Close every page at the end, as the panic path does; otherwise the
    /// current pages stay open, as after a power loss.
    pub close_at_end: bool,
}

pub struct Model {
    pub streams: Vec<Vec<Written>>,
    /// Per stream: the page sequence number each drop was counted in.
    pub drops: Vec<Vec<u64>>,
    pub image: Vec<u8>,
}

fn dt_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..2_000,
        3 => 0u64..70_000,
        2 => 60_000u64..5_000_000_000,
        1 => 4_000_000_000u64..(1 << 40),
    ]
}

pub fn op_strategy(streams: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0..streams, 0u8..4, 0usize..120, dt_strategy())
            .prop_map(|(stream, shape, size, dt)| Op::Write { stream, shape, size, dt }),
        1 => (0..streams).prop_map(|stream| Op::Drop { stream }),
        1 => (0..streams).prop_map(|stream| Op::Close { stream }),
    ]
}

pub fn setup_strategy(max_ops: usize) -> impl Strategy<Value = Setup> {
    (
        prop_oneof![Just(Endian::Little), Just(Endian::Big)],
        prop_oneof![Just(256u32), Just(512), Just(1024), Just(4096)],
        1usize..5,
        2u32..7,
        any::<bool>(),
    )
        .prop_flat_map(move |(endian, page_size, streams, pages, close_at_end)| {
            proptest::collection::vec(op_strategy(streams), 0..max_ops).prop_map(move |ops| Setup {
                endian,
                page_size,
                streams,
                pages,
                ops,
                close_at_end,
            })
        })
}

/// The bytes of a deterministic text of `n` bytes.
pub fn text(n: usize, salt: u64) -> Vec<u8> {
    (0..n)
        .map(|i| b'a' + ((i as u64 + salt) % 26) as u8)
        .collect()
}

pub fn build(s: &Setup) -> Model {
    let specs: Vec<StreamSpec> = (0..s.streams).map(|i| StreamSpec::cpu(i as u16)).collect();
    let cfg = RegionConfig {
        endian: s.endian,
        page_size: s.page_size,
        pages_per_stream: Some(s.pages),
        streams: &specs,
        custom_events: CUSTOM,
        created_ns: 1_000_000,
        kernel_release: "6.12.0-test",
        hostname: "model",
        ..Default::default()
    };
    let mut image = vec![0u8; 64 * 1024 + s.streams * s.pages as usize * s.page_size as usize];
    let mut streams = vec![Vec::new(); s.streams];
    let mut drops = vec![Vec::new(); s.streams];
    {
        let f = write::format(&mut image, &cfg).expect("format");
        let mut ws: Vec<_> = f.streams.collect();
        let mut last = vec![cfg.created_ns; s.streams];
        let mut now = cfg.created_ns;
        for (n, op) in s.ops.iter().enumerate() {
            match *op {
                Op::Write {
                    stream,
                    shape,
                    size,
                    dt,
                } => {
                    now += dt;
                    let mut payload = vec![0u8; 1024];
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
                        _ => (
                            &CUSTOM[0],
                            vec![Value::Unsigned(n as u64 & 0xffff), Value::Bytes(&body)],
                        ),
                    };
                    let plen =
                        schema::encode_payload(def, &values, s.endian, &mut payload).unwrap();
                    payload.truncate(plen);
                    let w = &mut ws[stream];
                    match w.write_event(now, def, &values) {
                        Ok(()) => {
                            let ts = now.max(last[stream]);
                            last[stream] = ts;
                            streams[stream].push(Written {
                                ts,
                                type_id: def.id,
                                payload,
                            });
                        }
                        Err(_) => drops[stream].push(w.page_seq()),
                    }
                }
                Op::Drop { stream } => {
                    ws[stream].drop_event();
                    drops[stream].push(ws[stream].page_seq());
                }
                Op::Close { stream } => ws[stream].close(),
            }
        }
        if s.close_at_end {
            ws.iter_mut().for_each(|w| w.close());
        }
    }
    let region = Region::parse(&image, HeaderTrust::Checksummed).expect("fresh image parses");
    let size = region.header.region_size as usize;
    image.truncate(size);
    Model {
        streams,
        drops,
        image,
    }
}

/// Strips record padding: the model's payload is a prefix of the event's.
pub fn same_payload(got: &[u8], want: &[u8]) -> bool {
    got.len() >= want.len()
        && got.len() - want.len() < 4
        && got.starts_with(want)
        && got[want.len()..].iter().all(|&b| b == 0)
}
