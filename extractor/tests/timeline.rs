//! `crashring extract --format perfetto` decoded strictly against
//! Perfetto's published trace.proto by protoc, and `--format chrome` parsed
//! as strict JSON: every event and every loss where it belongs.

mod common;

use common::{extract_to, jsonl_totals, reader, rich_image, skip_without, write_tmp};
use std::path::Path;
use std::process::{Command, Stdio};

/// Written by `cargo xtask setup` (qemu-tests/src/env/setup.rs,
/// `PERFETTO_DESCRIPTOR`) from the Perfetto Python package.
const PERFETTO_DESCRIPTOR: &str = "/usr/local/share/crashring/perfetto/perfetto_trace.desc";

fn extract(image: &Path, format: &str, name: &str) -> std::path::PathBuf {
    let (out, path) = extract_to(image, format, name);
    // The rich image has a corrupt page: recovered with damage.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn protoc_decodes_the_perfetto_trace_with_no_unknown_fields() {
    let Some(protoc) = reader("protoc") else {
        return;
    };
    if !Path::new(PERFETTO_DESCRIPTOR).exists() {
        skip_without(PERFETTO_DESCRIPTOR);
        return;
    }
    let image = write_tmp("rich-perfetto.bin", &rich_image());
    let trace = extract(&image, "perfetto", "rich.pftrace");
    let decoded = Command::new(protoc)
        .arg("--decode=perfetto.protos.Trace")
        .arg(format!("--descriptor_set_in={PERFETTO_DESCRIPTOR}"))
        .stdin(std::fs::File::open(&trace).unwrap())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8(decoded.stdout).unwrap();
    assert!(
        decoded.status.success(),
        "protoc: {}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    // protoc prints a field the schema lacks by its number.
    let unknown: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(unknown.is_empty(), "fields trace.proto lacks: {unknown:?}");

    let (events, losses, _) = jsonl_totals(&image);
    let count = |what: &str| text.lines().filter(|l| l.trim() == what).count();
    let generic = count("generic {");
    let instants = count("type: TYPE_INSTANT");
    assert!(generic > 0, "no ftrace bundle events");
    assert_eq!(generic + instants, events + losses);
    assert_eq!(
        text.matches("events lost (").count(),
        losses,
        "one instant per loss"
    );
    // The corrupt page of CPU 1 is followed by a bundle that says so.
    assert!(text.contains("lost_events: true"), "no bundle flags a loss");
    assert!(text.contains("name: \"Kernel panic - not syncing: test\""));
    assert!(text.contains("event_name: \"irq_handler_entry\""));
    assert!(text.contains("name: \"user:weston\""));
    // The user stream's track hangs under its process's track.
    let process = text.find("process {").expect("a process track");
    assert!(text[process..]
        .starts_with("process {\n      pid: 412\n      process_name: \"user:weston\""));
    assert_eq!(text.matches("parent_uuid:").count(), 1);
}

#[test]
fn chrome_json_is_strict_json_with_every_event_and_loss() {
    let image = write_tmp("rich-chrome.bin", &rich_image());
    let path = extract(&image, "chrome", "rich.json");
    let all: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let all = all.as_array().unwrap();
    let instants: Vec<_> = all.iter().filter(|e| e["ph"] == "i").collect();
    let (events, losses, _) = jsonl_totals(&image);
    assert_eq!(instants.len(), events + losses);
    let lost = instants.iter().filter(|e| e["cat"] == "loss").count();
    assert_eq!(lost, losses);
    // Microseconds, as numbers.
    assert!(instants.iter().all(|e| e["ts"].is_number()));
    let crash = instants
        .iter()
        .find(|e| e["name"] == "Kernel panic - not syncing: test")
        .unwrap();
    assert_eq!(crash["ts"].as_f64(), Some(300.0));
    assert_eq!(
        (crash["pid"].as_u64(), crash["tid"].as_u64()),
        (Some(1), Some(1))
    );
    let threads = all
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(threads, ["cpu0", "cpu1", "user:weston"]);
    let flip = instants.iter().find(|e| e["name"] == "drm_flip").unwrap();
    assert_eq!(flip["pid"], 412);
    assert_eq!(flip["args"]["msg"], "flip \"done\"\n");
    assert_eq!(
        flip["args"]["fb"]
            .as_str()
            .map(|s| s.starts_with("0xffff8880")),
        Some(true)
    );
}
