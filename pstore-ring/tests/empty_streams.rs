//! Empty streams (no event, no loss, no diagnostic naming them) are what
//! a summary for people counts in one line instead of listing: the
//! nesting lanes above 0 and a pool's free user streams of a region laid
//! out as the kernel module lays one out. A stream that lost or was
//! damaged is never empty, even with no event left.

use pstore_ring::layout::STREAM_USER;
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, Value};
use pstore_ring::text::{write_paged_summary, write_summary, EmptyStreams};
use pstore_ring::write::{self, RegionConfig, StreamSpec};

/// CPU 0 with a nesting lane, CPU 1 (one event, on a page then
/// corrupted), a free user stream and one a process took but left empty.
fn region() -> Vec<u8> {
    let user = |name, pid| StreamSpec {
        kind: STREAM_USER,
        cpu: u16::MAX,
        lane: 0,
        name,
        pid,
        uid: 0,
    };
    let specs = [
        StreamSpec::cpu(0),
        StreamSpec::nested(0, 1),
        StreamSpec::cpu(1),
        user("", 0),
        user("weston", 412),
    ];
    let cfg = RegionConfig {
        page_size: 512,
        pages_per_stream: Some(2),
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let mut f = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    for s in [0, 2] {
        let v = [
            Value::Unsigned(6),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(0),
            Value::Str(b"hello"),
        ];
        ws[s].write_event(1_000, printk, &v).unwrap();
    }
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    // CPU 1's only event becomes unreadable: its page's data no longer
    // matches its CRC.
    let page = Region::parse(&mem, HeaderTrust::Checksummed)
        .unwrap()
        .streams[2]
        .pages_offset;
    mem[page as usize + 60] ^= 0x10;
    mem
}

#[test]
fn only_streams_with_nothing_to_tell_are_empty() {
    let mem = region();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    let empty: Vec<bool> = trace
        .streams
        .iter()
        .map(|s| trace.is_empty_stream(s))
        .collect();
    // CPU 1 holds no event, but its damage must show.
    assert_eq!(trace.streams[2].events.len(), 0);
    assert_eq!(empty, [false, true, false, true, true]);
    let paged = region.decode_paged();
    let empty_paged: Vec<bool> = paged
        .streams
        .iter()
        .map(|s| paged.is_empty_stream(s))
        .collect();
    assert_eq!(empty_paged, empty);
}

#[test]
fn a_summary_counts_empty_streams_in_one_line_unless_every_page_is_listed() {
    let mem = region();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let (trace, paged) = (region.decode(), region.decode_paged());
    let mut short = String::new();
    let left_out = write_summary(&mut short, &region, &trace, false).unwrap();
    let want = EmptyStreams {
        cpus: 0,
        lanes: 1,
        free: 1,
        user: 1,
    };
    assert_eq!(left_out, want);
    assert_eq!(
        left_out.to_string(),
        "3 empty streams (1 nesting lane, 1 free user stream, 1 idle user stream)"
    );
    let labels = |text: &str| {
        text.lines()
            .filter_map(|l| l.split_once(": ").map(|(label, _)| label.to_string()))
            .filter(|l| l.starts_with("cpu") || l.starts_with("user:"))
            .collect::<Vec<_>>()
    };
    assert_eq!(labels(&short), ["cpu0", "cpu1"]);
    let mut paged_short = String::new();
    let paged_left_out = write_paged_summary(&mut paged_short, &region, &paged, false).unwrap();
    assert_eq!(
        (paged_short.as_str(), paged_left_out),
        (short.as_str(), want)
    );
    // With every page, every stream.
    let mut long = String::new();
    let none = write_summary(&mut long, &region, &trace, true).unwrap();
    assert_eq!(none.total(), 0);
    assert_eq!(
        labels(&long),
        ["cpu0", "cpu0.lane1", "cpu1", "user:#3", "user:weston"]
    );
}

#[test]
fn empty_streams_read_as_one_phrase() {
    let one = EmptyStreams {
        lanes: 1,
        ..Default::default()
    };
    assert_eq!(one.to_string(), "1 empty stream (1 nesting lane)");
    let many = EmptyStreams {
        cpus: 1,
        lanes: 12,
        free: 2,
        user: 0,
    };
    assert_eq!(
        many.to_string(),
        "15 empty streams (1 CPU stream, 12 nesting lanes, 2 free user streams)"
    );
    assert_eq!(EmptyStreams::default().to_string(), "0 empty streams");
}
