//! A region whose descriptors and schema table reach past its first page,
//! as the kernel module's do on a machine of many CPUs, read by the real
//! binary from a dump that lacks that second page: what lies in the hole
//! is named as not in the dump, with where it is, never checked as the
//! zeros read in its place; what the dump holds is checked as ever.

mod common;

use common::synth::{self, Kdump};
use common::{crashring, write_tmp};
use pstore_ring::layout::{DESC_OFFSET, DESC_SIZE};
use pstore_ring::write::{format, region_size, RegionConfig, StreamSpec};

/// Physical address of the region, page-aligned as the module's are.
const REGION: usize = 0x30000;
/// Streams enough that descriptor 59 starts the region's second page.
const STREAMS: u16 = 80;

#[test]
fn descriptors_and_the_schema_table_in_a_hole_are_not_in_the_dump_not_crc_failures() {
    let specs: Vec<StreamSpec> = (0..STREAMS).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: 256,
        pages_per_stream: Some(2),
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0u8; 0x100000];
    let size = region_size(&cfg).unwrap();
    // Each stream opens its first page, as its writer's start does.
    let formatted = format(&mut mem[REGION..REGION + size], &cfg).unwrap();
    formatted.streams.for_each(drop);
    // Descriptor 1 damaged where the dump holds it.
    mem[REGION + DESC_OFFSET + DESC_SIZE + 20] ^= 1;
    let k = Kdump {
        excluded: &[(REGION as u64 >> 12) + 1],
        ..Default::default()
    };
    let path = write_tmp("metadata-holes.kdump", &synth::kdump(&mem, &k));
    let out = crashring(&["info", path.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("hole: region bytes 0x1000..0x2000: excluded by the dump's filter"),
        "{text}"
    );
    let problems: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("problem: "))
        .collect();
    let absent = |n: usize| {
        let at = DESC_OFFSET + n * DESC_SIZE;
        format!(
            "stream {n} at region offset {at:#x}: its descriptor is not in the input: the dump excluded or lost it"
        )
    };
    let schema = DESC_OFFSET + usize::from(STREAMS) * DESC_SIZE;
    let mut want: Vec<String> = (59..STREAMS.into()).map(absent).collect();
    want.push(format!("at region offset {schema:#x}: schema table unusable, built-in event types used: schema table header is not in the input: the dump excluded or lost it"));
    for line in &want {
        assert!(problems.contains(&line.as_str()), "{line}\n{text}");
    }
    // Only the damaged descriptor the dump holds fails a check.
    let failed: Vec<_> = problems
        .iter()
        .filter(|p| !p.contains("not in the input"))
        .collect();
    assert_eq!(failed.len(), 1, "{text}");
    assert!(
        failed[0].starts_with("stream 1 at region offset 0x180: CRC mismatch"),
        "{text}"
    );
}
