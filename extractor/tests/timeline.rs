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

/// `trace` decoded by protoc against Perfetto's trace.proto, which must
/// know every field; None where protoc or the descriptor is missing (a
/// failure under CI).
fn protoc_decode(trace: &Path) -> Option<String> {
    let protoc = reader("protoc")?;
    if !Path::new(PERFETTO_DESCRIPTOR).exists() {
        skip_without(PERFETTO_DESCRIPTOR);
        return None;
    }
    let decoded = Command::new(protoc)
        .arg("--decode=perfetto.protos.Trace")
        .arg(format!("--descriptor_set_in={PERFETTO_DESCRIPTOR}"))
        .stdin(std::fs::File::open(trace).unwrap())
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
    Some(text)
}

/// The region `bytes`, which recovers cleanly, as a Perfetto trace
/// decoded by protoc ([`protoc_decode`]).
fn clean_perfetto(name: &str, bytes: &[u8]) -> Option<String> {
    let image = write_tmp(&format!("{name}-perfetto.bin"), bytes);
    let (out, trace) = extract_to(&image, "perfetto", &format!("{name}.pftrace"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    protoc_decode(&trace)
}

#[test]
fn protoc_decodes_the_perfetto_trace_with_no_unknown_fields() {
    let image = write_tmp("rich-perfetto.bin", &rich_image());
    let trace = extract(&image, "perfetto", "rich.pftrace");
    let Some(text) = protoc_decode(&trace) else {
        return;
    };
    let (events, losses, _) = jsonl_totals(&image);
    let count = |what: &str| text.lines().filter(|l| l.trim() == what).count();
    let typed = count("irq_handler_entry {");
    let instants = count("type: TYPE_INSTANT");
    assert!(typed > 0, "no IRQ entries as Perfetto's own message");
    assert_eq!(typed + instants, events + losses);
    assert_eq!(
        text.matches("events lost (").count(),
        losses,
        "one instant per loss"
    );
    // The corrupt page of CPU 1 is followed by a bundle that says so.
    assert!(text.contains("lost_events: true"), "no bundle flags a loss");
    assert!(text.contains("name: \"Kernel panic - not syncing: test\""));
    assert!(text.contains("name: \"user:weston\""));
    // The user stream's track hangs under its process's track.
    let process = text.find("process {").expect("a process track");
    assert!(text[process..]
        .starts_with("process {\n      pid: 412\n      process_name: \"user:weston\""));
    assert_eq!(text.matches("parent_uuid:").count(), 1);
}

/// The scheduler's and interrupts' events become Perfetto's own messages
/// (its scheduling and IRQ tracks are built from them) with every field;
/// a value the message's field cannot hold, and a type Perfetto has no
/// message for, stay generic events with their fields by name.
#[test]
fn sched_and_irq_events_are_perfettos_own_messages_and_others_generic() {
    use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let f = |name, kind| FieldDef { name, kind };
    let fields = [f("crtc", FieldKind::U32), f("seq", FieldKind::U64)];
    let custom = [EventDef {
        id: 40,
        name: "drm_vblank",
        fields: &fields,
    }];
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: 512,
        streams: &specs,
        custom_events: &custom,
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut w = region.streams.next().unwrap();
    let def = |id| schema::builtin(id).unwrap();
    let switch = [
        Value::Signed(4242),
        Value::Signed(120),
        Value::Unsigned(1),
        Value::Signed(0),
        Value::Signed(-51),
        Value::Chars(b"kworker/2:1"),
        Value::Chars(b"swapper/2"),
    ];
    w.write_event(1_000, def(schema::EVENT_SCHED_SWITCH), &switch)
        .unwrap();
    let entry = [Value::Unsigned(11), Value::Str(b"timer")];
    w.write_event(2_000, def(schema::EVENT_IRQ_ENTRY), &entry)
        .unwrap();
    let exit = [Value::Unsigned(11), Value::Unsigned(1)];
    w.write_event(3_000, def(schema::EVENT_IRQ_EXIT), &exit)
        .unwrap();
    // Past int32, irq_handler_entry's `irq`: kept exactly, generic.
    let huge = [Value::Unsigned(0x8000_0000), Value::Str(b"ghost")];
    w.write_event(4_000, def(schema::EVENT_IRQ_ENTRY), &huge)
        .unwrap();
    let vblank = [Value::Unsigned(51), Value::Unsigned(7)];
    w.write_event(5_000, &custom[0], &vblank).unwrap();
    w.close();
    let Some(text) = clean_perfetto("typed", &mem) else {
        return;
    };
    let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "timestamp: 1000 sched_switch { prev_comm: \"kworker/2:1\" prev_pid: 4242 prev_prio: 120 prev_state: 1 next_comm: \"swapper/2\" next_pid: 0 next_prio: -51 }",
        "timestamp: 2000 irq_handler_entry { irq: 11 name: \"timer\" }",
        "timestamp: 3000 irq_handler_exit { irq: 11 ret: 1 }",
        "timestamp: 4000 generic { event_name: \"irq_handler_entry\" field { name: \"irq\" uint_value: 2147483648 } field { name: \"name\" str_value: \"ghost\" } }",
        "timestamp: 5000 generic { event_name: \"drm_vblank\" field { name: \"crtc\" uint_value: 51 } field { name: \"seq\" uint_value: 7 } }",
    ] {
        assert!(squeezed.contains(want), "{want} not in:\n{text}");
    }
}

#[test]
fn a_cpu_past_1023_is_no_ftrace_bundle() {
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    // trace_processor refuses the whole trace at a bundle of CPU 1024.
    let specs = [StreamSpec::cpu(3), StreamSpec::cpu(1500)];
    let cfg = RegionConfig {
        page_size: 512,
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let entry = [Value::Unsigned(11), Value::Str(b"timer")];
    let irq = schema::builtin(schema::EVENT_IRQ_ENTRY).unwrap();
    for (i, mut w) in region.streams.by_ref().enumerate() {
        w.write_event(1_000 + i as u64, irq, &entry).unwrap();
        w.close();
    }
    let Some(text) = clean_perfetto("high-cpu", &mem) else {
        return;
    };
    let cpus: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cpu: "))
        .collect();
    assert_eq!(cpus, ["3"], "{text}");
    // CPU 1500's event is an instant on its track.
    assert_eq!(text.matches("irq_handler_entry").count(), 2, "{text}");
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
    // The kernel's process lies above every Linux pid; CPU 1 its thread.
    assert_eq!(
        (crash["pid"].as_u64(), crash["tid"].as_u64()),
        (Some((1 << 22) + 1), Some(1))
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
