//! Golden images: a fixed scenario, written in both byte orders, must give
//! the committed bytes and decode to the committed text. The C writer is
//! held to the same bytes.
//!
//! Regenerate with `cargo xtask bless-golden` (it sets `UPDATE_GOLDEN=1`)
//! after a deliberate format change, and say why in the commit.
//!
//! The scenario is `golden/scenario.rs` (described in golden/README.md).

#[path = "../golden/scenario.rs"]
mod scenario;

use pstore_ring::debug_args::Callsite;
use pstore_ring::layout::Checksum;
use pstore_ring::merge::merge;
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::text::{write_summary, Line};
use pstore_ring::write::{self, CallsiteWriter, RegionControl, StreamWriter};
use pstore_ring::Endian;
use std::fmt::Write;
use std::path::PathBuf;

/// Whether this run rewrites the images. Only `UPDATE_GOLDEN=1` does; any
/// other value fails, since `UPDATE_GOLDEN=0` or an empty value was meant
/// as "don't", and must neither bless nor pass as a check of nothing.
fn blessing() -> bool {
    match std::env::var_os("UPDATE_GOLDEN") {
        None => false,
        Some(v) if v == "1" => true,
        Some(v) => {
            panic!("UPDATE_GOLDEN={v:?}: set it to 1 to bless the golden images, or unset it")
        }
    }
}

/// The Rust reference writer as a scenario recorder.
struct RustWriter<'a> {
    control: RegionControl<'a>,
    streams: Vec<StreamWriter<'a>>,
    callsites: Option<CallsiteWriter<'a>>,
    endian: Endian,
}

impl scenario::Recorder for RustWriter<'_> {
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) {
        self.streams[stream].write(ts, type_id, payload).unwrap();
    }
    fn drop_event(&mut self, stream: usize) {
        self.streams[stream].drop_event();
    }
    fn abandon(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) {
        let mut r = self.streams[stream]
            .reserve(ts, type_id, payload.len())
            .unwrap();
        r.payload().copy_from_slice(payload);
    }
    fn close(&mut self, stream: usize) {
        self.streams[stream].close();
    }
    fn set_state(&mut self, state: u32, reason: u32, crash_ns: u64, crash_cpu: u32, message: &str) {
        self.control
            .set_state(state, reason, crash_ns, crash_cpu, message);
    }
    fn add_callsite(&mut self, c: &Callsite<'_>) -> u32 {
        self.callsites
            .as_mut()
            .expect("the scenario's region has a callsite area")
            .add(c)
            .unwrap()
    }
    fn endian(&self) -> Endian {
        self.endian
    }
}

/// Builds the golden scenario's image with the Rust writer.
pub fn golden_image(endian: Endian) -> Vec<u8> {
    let mut image = vec![0u8; scenario::BUFFER_SIZE];
    let f = write::format(&mut image, &scenario::config(endian)).unwrap();
    let mut w = RustWriter {
        control: f.control,
        streams: f.streams.collect(),
        callsites: f.callsites,
        endian,
    };
    scenario::replay(&mut w);
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
    if blessing() {
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
    check("v2-le", Endian::Little);
}

#[test]
fn big_endian_image_is_byte_exact() {
    check("v2-be", Endian::Big);
}

/// Version 1 differs from 2 only in its checksums (CRC-32/IEEE): the last
/// images the version 1 writer made still decode to their text, every
/// checksum passing. A generation recorded before an upgrade stays readable.
#[test]
fn version_1_images_still_decode() {
    for name in ["v1-le", "v1-be"] {
        let image = std::fs::read(golden_dir().join(format!("{name}.bin"))).unwrap();
        let text = std::fs::read_to_string(golden_dir().join(format!("{name}.txt"))).unwrap();
        let region = Region::parse(&image, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.header.version, 1);
        assert_eq!(region.header.checksum, Checksum::Ieee);
        assert!(
            region.diagnostics.is_empty(),
            "{name}: {:?}",
            region.diagnostics
        );
        assert_eq!(decoded_text(&image), text, "{name}");
    }
}

#[test]
fn both_orders_decode_to_the_same_events() {
    let le = decoded_text(&golden_image(Endian::Little));
    let be = decoded_text(&golden_image(Endian::Big));
    let events = |t: &str| t.split("events:").nth(1).unwrap().to_string();
    assert_eq!(events(&le), events(&be));
}
