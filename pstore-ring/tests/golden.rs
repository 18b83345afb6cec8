//! Golden images: a fixed scenario, written in both byte orders, must give
//! the committed bytes and decode to the committed text. The C writer is
//! held to the same bytes.
//!
//! Regenerate with `cargo xtask bless-golden` (it sets `UPDATE_GOLDEN=1`)
//! after a deliberate format change, and say why in the commit.
//!
//! The scenario (every step is one call on the writer; see golden/README.md):
//! a region of 2 CPU streams and a user stream "weston" (pid 812), pages of
//! 256 bytes, 3 pages per stream, created at 1 s, generation 7, plus one
//! custom event type 40 `frame {seq u32, crtc u8}`.

use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED, STREAM_USER};
use pstore_ring::merge::merge;
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
use pstore_ring::text::{write_summary, Line};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use pstore_ring::Endian;
use std::fmt::Write;
use std::path::PathBuf;

const FRAME: EventDef<'static> = EventDef {
    id: 40,
    name: "frame",
    fields: &[
        FieldDef {
            name: "seq",
            kind: FieldKind::U32,
        },
        FieldDef {
            name: "crtc",
            kind: FieldKind::U8,
        },
    ],
};

/// Builds the golden scenario's image.
pub fn golden_image(endian: Endian) -> Vec<u8> {
    let streams = [
        StreamSpec::cpu(0),
        StreamSpec::cpu(1),
        StreamSpec {
            kind: STREAM_USER,
            cpu: u16::MAX,
            name: "weston",
            pid: 812,
        },
    ];
    let cfg = RegionConfig {
        endian,
        word_size: 8,
        page_size: 256,
        pages_per_stream: Some(3),
        streams: &streams,
        custom_events: &[FRAME],
        boot_id: *b"0123456789abcdef",
        generation: 7,
        created_ns: 1_000_000_000,
        wall_offset_ns: 1_790_000_000_000_000_000,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "golden",
        producer: "pstore-ring",
    };
    let b = |id| schema::builtin(id).unwrap();
    let mut image = vec![0u8; 4096];
    let mut f = write::format(&mut image, &cfg).unwrap();
    let mut s: Vec<_> = f.streams.by_ref().collect();
    let t0 = cfg.created_ns;
    // cpu0: printk lines until the ring wraps once (the oldest page is
    // overwritten), with a time-extend and an absolute-time gap on the way.
    for i in 0..14u64 {
        let text = format!("line {i}: hello from cpu0");
        // Event 9 comes 100 us late (a time-extend record), event 11 20 s
        // late (an absolute-time record).
        let ts = t0
            + i * 1_000
            + if i >= 9 { 100_000 } else { 0 }
            + if i >= 11 { 20_000_000_000 } else { 0 };
        let v = [
            Value::Unsigned(6),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(i),
            Value::Str(text.as_bytes()),
        ];
        s[0].write_event(ts, b(schema::EVENT_PRINTK), &v).unwrap();
    }
    s[0].drop_event();
    // cpu1: scheduler and interrupt events, then the panic marker; closed.
    let tw = t0 + 20_000_200_000;
    let sw = [
        Value::Signed(0),
        Value::Signed(120),
        Value::Unsigned(0),
        Value::Signed(42),
        Value::Signed(100),
        Value::Chars(b"swapper/1"),
        Value::Chars(b"kworker/1:0"),
    ];
    s[1].write_event(tw, b(schema::EVENT_SCHED_SWITCH), &sw)
        .unwrap();
    s[1].write_event(
        tw + 10,
        b(schema::EVENT_IRQ_ENTRY),
        &[Value::Unsigned(11), Value::Str(b"virtio0")],
    )
    .unwrap();
    s[1].write_event(
        tw + 900,
        b(schema::EVENT_IRQ_EXIT),
        &[Value::Unsigned(11), Value::Unsigned(1)],
    )
    .unwrap();
    s[1].write_event(tw + 950, b(schema::EVENT_LOST), &[Value::Unsigned(3)])
        .unwrap();
    let msg = "Kernel panic - not syncing: sysrq triggered crash";
    let crash = [
        Value::Unsigned(REASON_PANIC.into()),
        Value::Unsigned(1),
        Value::Str(msg.as_bytes()),
    ];
    s[1].write_event(tw + 1_000, b(schema::EVENT_CRASH), &crash)
        .unwrap();
    s[1].close();
    // weston: a user marker and a custom event; left open.
    s[2].write_event(
        tw - 500,
        b(schema::EVENT_MARKER),
        &[
            Value::Unsigned(812),
            Value::Chars(b"weston"),
            Value::Str(b"frame \"42\"\n"),
        ],
    )
    .unwrap();
    s[2].write_event(tw - 400, &FRAME, &[Value::Unsigned(42), Value::Unsigned(1)])
        .unwrap();
    f.control
        .set_state(STATE_CRASHED, REASON_PANIC, tw + 1_000, 1, msg);
    let size = Region::parse(&image, HeaderTrust::Checksummed)
        .unwrap()
        .header
        .region_size as usize;
    image.truncate(size);
    image
}

/// What the image decodes to: summary with pages, then the merged events.
pub fn decoded_text(image: &[u8]) -> String {
    let region = Region::parse(image, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    let mut out = String::new();
    write_summary(&mut out, &region, &trace, true).unwrap();
    for d in &trace.diagnostics {
        writeln!(out, "diagnostic: {d}").unwrap();
    }
    writeln!(out, "events:").unwrap();
    for item in merge(&trace.streams) {
        let line = Line::of(&item, &region);
        writeln!(out, "{line}").unwrap();
    }
    out
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn check(name: &str, endian: Endian) {
    let image = golden_image(endian);
    let text = decoded_text(&image);
    let (bin, txt) = (
        golden_dir().join(format!("{name}.bin")),
        golden_dir().join(format!("{name}.txt")),
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&bin, &image).unwrap();
        std::fs::write(&txt, &text).unwrap();
        return;
    }
    let want = std::fs::read(&bin)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask bless-golden`", bin.display()));
    if want != image {
        let at = want
            .iter()
            .zip(&image)
            .position(|(a, b)| a != b)
            .unwrap_or(want.len().min(image.len()));
        panic!(
            "{name}: writer output differs from {} at byte {at:#x} (lengths {} vs {})",
            bin.display(),
            image.len(),
            want.len()
        );
    }
    let want_text = std::fs::read_to_string(&txt).unwrap();
    assert_eq!(
        text,
        want_text,
        "{name}: decoded text differs from {}",
        txt.display()
    );
    // The committed image decodes to the committed text by itself, too.
    assert_eq!(decoded_text(&want), want_text);
}

#[test]
fn little_endian_image_is_byte_exact() {
    check("v1-le", Endian::Little);
}

#[test]
fn big_endian_image_is_byte_exact() {
    check("v1-be", Endian::Big);
}

#[test]
fn both_orders_decode_to_the_same_events() {
    let le = decoded_text(&golden_image(Endian::Little));
    let be = decoded_text(&golden_image(Endian::Big));
    let events = |t: &str| t.split("events:").nth(1).unwrap().to_string();
    assert_eq!(events(&le), events(&be));
}
