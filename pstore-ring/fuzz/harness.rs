//! The body of the `read_region` fuzz target, shared with the regression
//! test that replays committed findings under `cargo test`.
//!
//! The first input byte picks the mode: odd means "the rest is a whole
//! image"; even means "take a valid generated image and overwrite bytes of
//! it with the rest, as (offset, value) pairs", which lets the fuzzer reach
//! the page and record checks that random bytes never get past.
//! Property: no panic, no hang, no allocation beyond what the input's size
//! bounds; every accessor of the result is exercised; decoding page by
//! page gives exactly what decoding whole does. What it read is
//! returned as text, for the regression test to check that each committed
//! finding still reaches the code it was about.

use pstore_ring::merge::{merge, merge_pages, Item, Pulled};
use pstore_ring::read::{HeaderTrust, Region, Trace};
use pstore_ring::scan::find_regions;
use pstore_ring::schema::{self, Value};
use pstore_ring::text::{write_summary, Line};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::fmt::Write;

fn base_image() -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size: 256,
        pages_per_stream: Some(3),
        streams: &specs,
        ..Default::default()
    };
    let mut buf = vec![0u8; 8192];
    if let Ok(mut f) = write::format(&mut buf, &cfg) {
        let marker = schema::builtin(schema::EVENT_MARKER);
        let lost = schema::builtin(schema::EVENT_LOST);
        let mut ws: Vec<_> = f.streams.by_ref().collect();
        for i in 0..40u64 {
            let w = &mut ws[(i % 2) as usize];
            let ts = i * 40_000 + if i == 30 { 1 << 34 } else { 0 };
            let _ = match (i % 3, marker, lost) {
                (0, Some(m), _) => w.write_event(
                    ts,
                    m,
                    &[Value::Unsigned(i), Value::Chars(b"x"), Value::Str(b"fuzz")],
                ),
                (_, _, Some(l)) => w.write_event(ts, l, &[Value::Unsigned(i)]),
                _ => Ok(()),
            };
        }
        ws[0].close();
    }
    buf
}

pub fn run(data: &[u8]) -> String {
    let mut out = String::new();
    let Some((&mode, rest)) = data.split_first() else {
        return out;
    };
    let image = if mode & 1 == 1 {
        rest.to_vec()
    } else {
        let mut img = base_image();
        for pair in rest.chunks_exact(3) {
            let at = u16::from_le_bytes([pair[0], pair[1]]) as usize % img.len();
            img[at] = pair[2];
        }
        img
    };
    let trust = if mode & 2 == 0 {
        HeaderTrust::Checksummed
    } else {
        HeaderTrust::Lenient
    };
    let starts: Vec<usize> = std::iter::once(0).chain(find_regions(&image)).collect();
    for at in starts {
        let Ok(region) = Region::parse(&image[at..], trust) else {
            continue;
        };
        let trace = region.decode();
        let _ = (trace.lost_events(), trace.event_count());
        same_paged(&region, &trace);
        let _ = write_summary(&mut out, &region, &trace, true);
        for d in &trace.diagnostics {
            let _ = writeln!(out, "{d}");
        }
        for item in merge(&trace.streams) {
            if let Item::Event(e) = item {
                if let Some(t) = region.schema.get(e.type_id) {
                    let _ = t.decode(e.payload, region.header.endian);
                }
            }
            let line = Line::of(&item, &region);
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// Decoding page by page reports, walks and merges exactly what `trace`
/// (the whole decoding) holds; panics, a finding, if not.
fn same_paged(region: &Region<'_>, trace: &Trace<'_>) {
    let paged = region.decode_paged();
    assert_eq!(paged.diagnostics, trace.diagnostics);
    assert_eq!(paged.streams.len(), trace.streams.len());
    for (p, w) in paged.streams.iter().zip(&trace.streams) {
        assert_eq!(p.pages, w.pages);
        assert_eq!(p.losses, w.losses);
        assert!(p.events().eq(w.events.iter().copied()), "events differ");
    }
    let whole = merge(&trace.streams).map(|item| match item {
        Item::Event(e) => Pulled::Event(*e),
        Item::Loss(l) => Pulled::Loss(l),
    });
    assert!(whole.eq(merge_pages(&paged.streams)), "merges differ");
    assert_eq!(region.wall_clock_of_pages(&paged), region.wall_clock(trace));
}
