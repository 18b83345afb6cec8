//! The C writer held to pstore-ring's model on the property tests' own
//! operation sequences: the golden image is one scenario, and a C step
//! that only a rare sequence reaches (a drop after a close, a record that
//! fits only an empty page, a refused one) must not be able to go wrong
//! unnoticed.
//!
//! The sequences, the calls they become and the model's prediction are
//! pstore-ring's (`tests/common/mod.rs`, included with `#[path]`). Each
//! case is replayed through the C writer, which must return what the Rust
//! writer returned for every call, pass the check the property tests put
//! the Rust writer's image to, and leave the same bytes.
//!
//! Only the native byte order: the C writer stores its own (the kernel's),
//! so a big-endian image is the Rust writer's alone (FORMAT.md, "Byte
//! order"); the property tests hold the reader to both.

#![cfg(test)]

/// pstore-ring's property-test model: the operation sequences, the calls
/// they become and the prediction.
#[path = "../../../pstore-ring/tests/common/mod.rs"]
mod ring_model;

use super::*;
use proptest::prelude::*;
use pstore_ring::layout::{RECORD_HEADER_SIZE, STREAM_USER};
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, EventDef, FieldDef};
use pstore_ring::write::{RegionConfig, StreamSpec};
use pstore_ring::Endian;
use ring_model::{
    build, calls, check_decoded, largest_record, play, setup_strategy, Call, Op, Setup, Writers,
};

/// How the C side ends a case that closes every page: the panic path
/// (`crashring_close` per stream) or a clean shutdown
/// (`crashring_stop_all`), which must leave the same bytes.
#[derive(Clone, Copy, Debug)]
enum Finish {
    CloseEach,
    StopAll,
}

/// Bytes the C writer's memory has past the region it formats, so that a
/// write beyond its end is reported rather than corrupting the test's heap.
const GUARD: usize = 4096;

/// The C writer's image, what each call returned (`None` for drops and
/// closes), and the offset of the first byte it wrote past the region's
/// end, if any.
struct CRun {
    image: Vec<u8>,
    results: Vec<Option<bool>>,
    past: Option<usize>,
}

/// The C writer's answer to a write: whether it recorded the event.
impl Writers for CRegion {
    type Outcome = bool;
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) -> bool {
        let s = self.stream(stream);
        let len = payload.len() as u32;
        unsafe { crashring_write(s, ts, type_id, payload.as_ptr().cast(), len) == 0 }
    }
    fn drop_event(&mut self, stream: usize) {
        unsafe { crashring_drop(self.stream(stream)) }
    }
    fn close(&mut self, stream: usize) {
        unsafe { crashring_close(self.stream(stream)) }
    }
}

fn replay_c(
    cfg: &RegionConfig<'_>,
    size: usize,
    calls: &[Call],
    finish: Option<Finish>,
    durable: bool,
) -> CRun {
    let mut region = CRegion::format(cfg, size + GUARD).expect("the C writer formats the config");
    let n = cfg.streams.len();
    for i in 0..n {
        unsafe { crashring_set_durable(region.stream(i), durable) };
    }
    let results = play(calls, &mut region);
    match finish {
        None => {}
        Some(Finish::CloseEach) => {
            for i in 0..n {
                unsafe { crashring_close(region.stream(i)) };
            }
        }
        Some(Finish::StopAll) => unsafe { crashring_stop_all(region.stream(0), n as u32) },
    }
    let image = region.bytes().to_vec();
    let all = unsafe {
        std::slice::from_raw_parts(region.mem.as_ptr().cast::<u8>(), region.mem.len() * 8)
    };
    let past = all
        .get(image.len()..)
        .and_then(|rest| rest.iter().position(|&b| b != 0));
    CRun {
        image,
        results,
        past,
    }
}

/// Where in the region byte `at` lies, for a failure message.
fn locate(region: &Region<'_>, at: usize) -> String {
    let page = u64::from(region.header.page_size);
    for s in &region.streams {
        let end = s.pages_offset + u64::from(s.page_count) * page;
        if (s.pages_offset..end).contains(&(at as u64)) {
            let off = at as u64 - s.pages_offset;
            return format!("stream {} slot {} byte {}", s.index, off / page, off % page);
        }
    }
    match region.header.tail_offset {
        Some(t) if at as u64 >= u64::from(t) => format!("the tails (byte {at})"),
        _ => format!("the header, descriptors or schema (byte {at})"),
    }
}

fn check(setup: &Setup, finish: Finish, durable: bool) -> Result<(), TestCaseError> {
    // The Rust writer's image, what it returned, and the prediction.
    let model = build(setup);
    let rust = Region::parse(&model.image, HeaderTrust::Checksummed).expect("parses");
    let h = &rust.header;
    // The configuration `build` used, read back from its header, so that a
    // setting it gains reaches the C writer too.
    let specs: Vec<StreamSpec<'_>> = rust
        .streams
        .iter()
        .map(|s| StreamSpec {
            kind: s.kind,
            cpu: s.cpu,
            lane: s.lane,
            name: &s.name,
            pid: s.pid,
            uid: s.uid,
        })
        .collect();
    let custom: Vec<_> = rust
        .schema
        .types()
        .filter(|t| schema::builtin(t.id).is_none())
        .collect();
    let fields: Vec<Vec<FieldDef<'_>>> = custom
        .iter()
        .map(|t| {
            t.fields
                .iter()
                .map(|f| FieldDef {
                    name: &f.name,
                    kind: f.kind,
                })
                .collect()
        })
        .collect();
    let events: Vec<EventDef<'_>> = custom
        .iter()
        .zip(&fields)
        .map(|(t, f)| EventDef {
            id: t.id,
            name: &t.name,
            fields: f,
        })
        .collect();
    let cfg = RegionConfig {
        endian: h.endian,
        word_size: h.word_size,
        page_size: h.page_size,
        pages_per_stream: rust.streams.first().map(|s| s.page_count),
        user_pages: rust
            .streams
            .iter()
            .find(|s| s.kind == STREAM_USER)
            .map(|s| s.page_count),
        lane_pages: rust
            .streams
            .iter()
            .find(|s| s.lane > 0)
            .map_or(2, |s| s.page_count),
        streams: &specs,
        callsite_pages: rust.callsites.as_ref().map_or(0, |a| {
            u32::try_from((a.range.end - a.range.start) / u64::from(h.page_size)).unwrap_or(0)
        }),
        custom_events: &events,
        boot_id: h.boot_id,
        generation: h.generation,
        created_ns: h.created_ns,
        wall_offset_ns: h.wall_offset_ns,
        kernel_release: &h.kernel_release,
        hostname: &h.hostname,
        producer: &h.producer,
    };
    let c = replay_c(
        &cfg,
        model.image.len(),
        &calls(setup),
        setup.close_at_end.then_some(finish),
        durable,
    );
    prop_assert_eq!(c.past, None, "the C writer wrote past the region's end");
    for (n, (got, want)) in c.results.iter().zip(&model.results).enumerate() {
        prop_assert_eq!(
            *got,
            want.as_ref().map(Result::is_ok),
            "op {}, {:?}: C and Rust writers disagree on recording it",
            n,
            &setup.ops[n]
        );
    }

    // What the reader makes of the C image, held to the prediction as the
    // Rust writer's is: a broken page says more than a byte offset.
    let region = Region::parse(&c.image, HeaderTrust::Checksummed).expect("the C image parses");
    match check_decoded(setup, &model.want, &region.decode()) {
        Err(TestCaseError::Fail(why)) => {
            return Err(TestCaseError::fail(format!("C image: {}", why.message())))
        }
        other => other?,
    }
    prop_assert_eq!(c.image.len(), model.image.len(), "region sizes");
    if let Some(at) = c.image.iter().zip(&model.image).position(|(a, b)| a != b) {
        return Err(TestCaseError::fail(format!(
            "the C image differs from the Rust writer's in {}: C {:#04x}, Rust {:#04x}",
            locate(&region, at),
            c.image[at],
            model.image[at]
        )));
    }
    Ok(())
}

fn case_strategy() -> impl Strategy<Value = (Setup, Finish, bool)> {
    (
        setup_strategy(300),
        prop_oneof![Just(Finish::CloseEach), Just(Finish::StopAll)],
        any::<bool>(),
    )
        .prop_map(|(mut setup, finish, durable)| {
            setup.endian = Endian::NATIVE;
            (setup, finish, durable)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any op sequence of the property tests leaves the same bytes from the
    /// C writer as from the Rust writer, whether pages are closed by the
    /// panic path or by `crashring_stop_all`, on RAM or persistent memory.
    #[test]
    fn c_writer_matches_the_rust_writer_on_property_test_sequences(
        (setup, finish, durable) in case_strategy()
    ) {
        check(&setup, finish, durable)?;
    }
}

/// A setup from the property tests' strategy (whatever fields it gains),
/// with the ops replaced and `streams` at least 2.
fn setup_with(ops: Vec<Op>, page_size: u32, close_at_end: bool) -> Setup {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut setup = setup_strategy(1)
        .new_tree(&mut runner)
        .expect("the strategy makes a setup")
        .current();
    setup.endian = Endian::NATIVE;
    setup.page_size = page_size;
    setup.streams = setup.streams.max(2);
    setup.ops = ops;
    setup.close_at_end = close_at_end;
    setup
}

/// Shape 2 is a `marker` with `size` bytes of text, 3 a `blob` with `size`
/// bytes of data, 4 a record of reserved type `size % 16`.
fn write(stream: usize, shape: u8, size: usize) -> Op {
    Op::Write {
        stream,
        shape,
        size,
        dt: 10,
    }
}

/// The sequences a random run may take long to meet, every time: a drop
/// (counted, or a refused record) on a stream whose page was closed must
/// open the next page rather than touch the closed one's CRC; records one
/// word either side of filling a page; refusals on a fresh ring.
#[test]
fn rare_sequences_match_every_time() {
    for page_size in [256, 4096] {
        // A blob's payload is its tag, its data's length and the data.
        let fill = largest_record(page_size) - RECORD_HEADER_SIZE - 4;
        let cases: Vec<Vec<Op>> = vec![
            vec![
                write(0, 2, 5),
                Op::Close { stream: 0 },
                Op::Drop { stream: 0 },
            ],
            vec![
                Op::Close { stream: 1 },
                Op::Drop { stream: 1 },
                write(1, 2, 3),
            ],
            vec![write(0, 2, 5), Op::Close { stream: 0 }, write(0, 3, 2_000)],
            vec![write(1, 4, 15), write(0, 2, 0)],
            (0..6)
                .flat_map(|k| [write(0, 2, 100), write(0, 3, fill + k * 4 - 8)])
                .collect(),
        ];
        for ops in cases {
            for close_at_end in [false, true] {
                let setup = setup_with(ops.clone(), page_size, close_at_end);
                for finish in [Finish::CloseEach, Finish::StopAll] {
                    if let Err(e) = check(&setup, finish, false) {
                        panic!(
                            "{e}\nops {ops:?}, page size {page_size}, \
                             close at end {close_at_end}, {finish:?}"
                        );
                    }
                }
            }
        }
    }
}
