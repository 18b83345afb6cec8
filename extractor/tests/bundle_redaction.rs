//! `crashring bundle` redacts every file it writes, added logs included:
//! kernel addresses hashed in every field kind and word size unless asked
//! for, and the classes it is told to drop or hash.

mod common;

use common::bundles::*;
use common::{jsonl_totals, reader, rich_image, run_ok, write_tmp};
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn kernel_addresses_are_hashed_unless_asked_for() {
    let image = write_tmp("bundle-ptr.bin", &rich_image());
    let (_, hashed) = bundle(&image, "ptr-hashed.tar.gz", &[]);
    let (_, raw) = bundle(&image, "ptr-raw.tar.gz", &["--raw-pointers"]);
    let (hashed, raw) = (all_bytes(&hashed), all_bytes(&raw));
    // In printk text, and as a pointer field (8 little-endian bytes in
    // the CTF streams, hex in trace.dat's and CTF's text-free formats).
    let text = b"ffffffff81230043";
    let field = (0xffff_8880_0000_0002u64).to_le_bytes();
    assert!(contains(&raw, text) && contains(&raw, &field));
    assert!(!contains(&hashed, text) && !contains(&hashed, &field));
    // Same length in text, the kernel's hashed-%p shape.
    let (_, files) = bundled(&tmp_path("ptr-hashed.tar.gz"));
    let dmesg = text_of(&files["dmesg.txt"]);
    let line = dmesg
        .lines()
        .find(|l| l.contains("input: keyboard 67 at "))
        .unwrap();
    let hash = line.rsplit(' ').next().unwrap();
    assert!(hash.len() == 16 && hash.starts_with("00000000"), "{line}");
    let manifest: serde_json::Value = serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
    assert!(
        manifest["regions"][0]["redacted"]["pointers_hashed"]
            .as_u64()
            .unwrap()
            > 20
    );
}

#[test]
fn redaction_drops_and_hashes_what_it_is_told_in_every_file() {
    let image = write_tmp("bundle-redact.bin", &rich_image());
    let args = [
        "--redact",
        "printk=input:",
        "--redact",
        "drm_flip.comm",
        "--redact",
        "irq_handler_entry",
    ];
    let (out, archive) = bundle(&image, "redacted.tar.gz", &args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = all_bytes(&archive);
    assert!(!contains(&all, b"input: keyboard"));
    assert!(!contains(&all, b"weston\0"), "a hashed comm is left");
    assert!(
        !contains(&all, b"timer"),
        "a dropped irq_handler_entry is left"
    );
    let (_, files) = bundled(&archive);
    let manifest: serde_json::Value = serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
    let lines = jsonl_lines(&image);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count() as u64;
    let counts: Vec<u64> = manifest["regions"][0]["redacted"]["per_class"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(
        counts,
        [
            count("input: keyboard"),
            count("\"type\":\"drm_flip\""),
            count("\"type\":\"irq_handler_entry\"")
        ]
    );
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    // Redaction is not loss: the manifest's losses are extract's.
    let (events, _, lost) = jsonl_totals(&image);
    let region = &manifest["regions"][0];
    let user = &region["user_streams"];
    let both = |key: &str| region[key].as_u64().unwrap() + user[key].as_u64().unwrap();
    assert_eq!(both("lost"), lost);
    assert_eq!(both("recovered"), events as u64 - counts[0] - counts[2]);
    assert_eq!(manifest["redaction"]["classes"][0], "printk=input:");

    // The redacted CTF still reads, with the same losses.
    let Some(bt) = reader("babeltrace2") else {
        return;
    };
    let top = unpack(&archive, "redacted-unpacked");
    let read = run_ok(Command::new(&bt).arg(top.join("kernel/ctf")));
    let printed = String::from_utf8(read.stdout).unwrap();
    assert_eq!(
        printed.lines().filter(|l| l.starts_with('[')).count() as u64,
        both("recovered")
    );
    assert!(
        printed.contains("comm = \"h:"),
        "the hashed comm is not shown"
    );
}

#[test]
fn the_manifests_crash_summaries_follow_the_classes() {
    let image = write_tmp("bundle-summaries.bin", &rich_image());
    let crash_of = |name: &str, args: &[&str]| {
        let (_, archive) = bundle(&image, name, args);
        let (_, files) = bundled(&archive);
        let manifest: serde_json::Value =
            serde_json::from_slice(&files["MANIFEST.json"].data).unwrap();
        (all_bytes(&archive), manifest["regions"][0].clone())
    };
    let message = "Kernel panic - not syncing: test";
    let (_, plain) = crash_of("summaries-plain.tar.gz", &[]);
    assert_eq!(plain["crash"]["message"], message);
    let basis = plain["signature"]["basis"].as_array().unwrap();
    assert!(
        basis.contains(&format!("message: {message}").into()),
        "{basis:?}"
    );

    // A class on events the summaries are not read from leaves them.
    let (_, other) = crash_of("summaries-other.tar.gz", &["--redact", "irq_handler_entry"]);
    assert_eq!(other["crash"], plain["crash"]);
    assert_eq!(other["signature"], plain["signature"]);

    // Dropping the crash's events drops its message everywhere; the
    // signature keeps its id (a fleet still groups the bundle) but not
    // what it was made of.
    let (all, dropped) = crash_of("summaries-dropped.tar.gz", &["--redact", "crash"]);
    assert!(!contains(&all, b"not syncing"), "the crash message is left");
    assert_eq!(dropped["crash"]["message"], "");
    assert_eq!(dropped["signature"]["id"], plain["signature"]["id"]);
    assert_eq!(dropped["signature"]["basis"], serde_json::json!([]));

    // Hashing its text hashes the message as the event's field.
    let (all, hashed) = crash_of("summaries-hashed.tar.gz", &["--redact", "crash.message"]);
    assert!(!contains(&all, b"not syncing"), "the crash message is left");
    let text = hashed["crash"]["message"].as_str().unwrap();
    assert!(text.starts_with("h:"), "{text}");
    assert_eq!(hashed["signature"]["basis"], serde_json::json!([]));

    // The printk lines the title and frames come from, likewise.
    let (_, printk) = crash_of("summaries-printk.tar.gz", &["--redact", "printk=message"]);
    assert_eq!(printk["crash"]["message"], message);
    assert_eq!(printk["signature"]["basis"], serde_json::json!([]));
}

/// Every file of a bundle unpacked with tar(1), archives inside it
/// unpacked too, by path; the bytes of each.
fn unpacked_files(archive: &Path, name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
                continue;
            }
            if path.to_string_lossy().ends_with(".tar.gz") {
                let inner = path.with_extension("unpacked");
                std::fs::create_dir(&inner).unwrap();
                run_ok(
                    Command::new("tar")
                        .arg("-xzf")
                        .arg(&path)
                        .arg("-C")
                        .arg(&inner),
                );
                walk(&inner, out);
            }
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    let top = unpack(archive, name);
    let mut out = Vec::new();
    walk(&top, &mut out);
    out
}

#[test]
fn added_logs_are_redacted_like_the_trace_in_every_file() {
    let image = write_tmp("bundle-log-redact.bin", &rich_image());
    // A console log with an input-device line and kernel addresses, an
    // oops's code bytes, and a journal entry from the kernel.
    let console = "\
[    0.000342] message 40
[    0.000343] input: secret-keyboard as /devices/platform/i8042/serio0/input/input3
[    0.000344] message 42
[    0.000345] BUG: unable to handle page fault for address: ffffffff8badf00d
[    0.000346] Code: 48 c7 c7 a0 12 34 82 e8 <0f> 0b
{\"MESSAGE\":\"input: journal-mouse\",\"_TRANSPORT\":\"kernel\",\"__REALTIME_TIMESTAMP\":\"1795000000123800\"}
weston: client buffer at 0xffff888012340000
";
    let log = write_tmp("bundle-log-redact.log", console.as_bytes());
    let add = format!("{}:console.txt", log.display());
    let secrets = [
        "ffffffff8badf00d",
        "ffff888012340000",
        "secret-keyboard",
        "journal-mouse",
        "a0 12 34 82",
    ];
    let (out, archive) = bundle(
        &image,
        "log-redact.tar.gz",
        &["--add-log", &add, "--redact", "printk=input:"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = unpacked_files(&archive, "log-redact-unpacked");
    let names: Vec<String> = files
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"kernel.pftrace".into()) && names.contains(&"console.txt".into()),
        "{names:?}"
    );
    for (path, bytes) in &files {
        for secret in secrets {
            assert!(
                !contains(bytes, secret.as_bytes()),
                "{secret} is in {}",
                path.display()
            );
        }
    }
    // What is not secret stays, and the console is still aligned by the
    // printk lines it shares with the trace.
    let (_, copy) = files
        .iter()
        .find(|(p, _)| p.ends_with("logs/console.txt"))
        .unwrap();
    let copy = String::from_utf8_lossy(copy);
    assert!(copy.contains("[    0.000344] message 42\n"), "{copy}");
    assert!(copy.contains("Code: "), "{copy}");
    let (_, manifest) = files
        .iter()
        .find(|(p, _)| p.ends_with("MANIFEST.json"))
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(manifest).unwrap();
    let log = &manifest["logs"][0];
    assert_eq!(log["bracketed_alignment"]["matched_printk_lines"], 2);
    assert_eq!(log["redacted"]["per_class"][0], 2, "{log}");
    assert_eq!(log["redacted"]["pointers_hashed"], 2, "{log}");
    assert_eq!(log["redacted"]["code_lines_masked"], 1, "{log}");

    // With --raw-pointers and no class, the log's addresses and code
    // bytes are left as they are, in the copy and in the Perfetto trace.
    let (_, archive) = bundle(
        &image,
        "log-raw.tar.gz",
        &["--add-log", &add, "--raw-pointers"],
    );
    let files = unpacked_files(&archive, "log-raw-unpacked");
    for name in ["console.txt", "kernel.pftrace"] {
        let (_, bytes) = files.iter().find(|(p, _)| p.ends_with(name)).unwrap();
        for secret in ["ffffffff8badf00d", "secret-keyboard"] {
            assert!(contains(bytes, secret.as_bytes()), "{secret} not in {name}");
        }
    }
}

/// A region of `word_size` whose events hold the kernel address `addr`
/// in every kind of place: a printk line, an oops `Code:` line whose
/// bytes hold it as an immediate, and a custom event's word-sized
/// integer, `u64` and binary fields.
fn addresses_image(word_size: u8, addr: u64) -> Vec<u8> {
    use pstore_ring::endian::Endian;
    use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let f = |name, kind| FieldDef { name, kind };
    let word = if word_size == 4 {
        FieldKind::U32
    } else {
        FieldKind::U64
    };
    let fields = [
        f("ip", word),
        f("wide", FieldKind::U64),
        f("raw", FieldKind::Bytes),
    ];
    let custom = [EventDef {
        id: 40,
        name: "probe",
        fields: &fields,
    }];
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        word_size,
        endian: Endian::Little,
        page_size: 512,
        pages_per_stream: Some(4),
        streams: &specs,
        custom_events: &custom,
        hostname: "addr",
        ..Default::default()
    };
    let mut mem = vec![0u8; 16 * 1024];
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let n = usize::from(word_size);
    let le = &addr.to_le_bytes()[..n];
    let code: Vec<String> = le.iter().map(|b| format!("{b:02x}")).collect();
    let lines = [
        format!("BUG: unable to handle page fault at {addr:0w$x}", w = n * 2),
        format!("Code: 48 c7 c7 {} e8 <0f> 0b", code.join(" ")),
    ];
    for (i, text) in lines.iter().enumerate() {
        let v = [
            Value::Unsigned(1),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(i as u64),
            Value::Str(text.as_bytes()),
        ];
        ws[0].write_event(1_000 + i as u64, printk, &v).unwrap();
    }
    let mut raw = vec![0x5a];
    raw.extend_from_slice(le);
    let v = [
        Value::Unsigned(addr),
        Value::Unsigned(addr),
        Value::Bytes(&raw),
    ];
    ws[0].write_event(2_000, &custom[0], &v).unwrap();
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    mem
}

#[test]
fn addresses_are_hashed_in_every_field_kind_and_word_size() {
    for (word_size, addr) in [(8u8, 0xffff_ffff_8123_4567u64), (4, 0xc123_4567)] {
        let name = format!("bundle-addr-{word_size}");
        let image = write_tmp(&format!("{name}.bin"), &addresses_image(word_size, addr));
        let n = usize::from(word_size);
        let text = format!("{addr:0w$x}", w = n * 2);
        let le = addr.to_le_bytes()[..n].to_vec();
        let code: Vec<String> = le.iter().map(|b| format!("{b:02x}")).collect();
        let code = code.join(" ");
        let (out, archive) = bundle(&image, &format!("{name}.tar.gz"), &[]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let all = all_bytes(&archive);
        for (what, secret) in [
            ("as text", text.as_bytes()),
            ("as code bytes", code.as_bytes()),
            ("as a binary word", &le[..]),
        ] {
            assert!(!contains(&all, secret), "{word_size}-byte words: {what}");
        }
        let (_, files) = bundled(&archive);
        let dmesg = text_of(&files["dmesg.txt"]);
        assert!(dmesg.contains("Code: xx xx xx "), "{dmesg}");
        let (out, archive) = bundle(&image, &format!("{name}-raw.tar.gz"), &["--raw-pointers"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let all = all_bytes(&archive);
        assert!(contains(&all, text.as_bytes()) && contains(&all, code.as_bytes()));
    }
}
