//! Hardware-error events (`mce`, `memory_failure`, `aer`) through the real
//! binary: described in words in text, JSON lines, the Chrome and the
//! Perfetto trace, the machine check
//! that brought the kernel down named in `info --json` and a bundle's
//! manifest, and each read back by babeltrace2 and trace-cmd with the
//! values written.

mod common;

use common::{crashring, extract_to, reader, run_ok, write_tmp};
use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED};
use pstore_ring::schema::{self, Value, MCE_FROM_PANIC, MCE_FROM_TRACEPOINT};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::process::Command;

const FATAL_STATUS: u64 = 0xbe00_0000_0000_0400;
const CORRECTED_STATUS: u64 = 0x9c00_0000_0000_0005;
const FATAL: &str = "machine check, bank 4, addr 0xabcd000, uncorrected, processor context \
                     corrupt (status 0xbe00000000000400: VAL UC EN MISCV ADDRV PCC; MCACOD 0x0400 \
                     internal timer error, MSCOD 0x0000), read by the panic path";

/// An mce event's values: origin, bank, status and addr; the rest 0.
fn bank(origin: u8, bank: u64, status: u64, addr: u64) -> [Value<'static>; 21] {
    let mut v = [Value::Unsigned(0); 21];
    v[0] = Value::Unsigned(origin.into());
    v[1] = Value::Unsigned(bank);
    v[4] = Value::Unsigned(1);
    v[5] = Value::Unsigned(status);
    v[6] = Value::Unsigned(addr);
    v[7] = Value::Unsigned(0x8c);
    v
}

/// Two CPUs: a corrected machine check, a poisoned page and a PCIe error
/// on CPU 0; on CPU 1, the bank the panic path read, then the crash.
fn image() -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size: 1024,
        streams: &specs,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "signage-7",
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    let mut f = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    let def = |id| schema::builtin(id).unwrap();
    let corrected = bank(MCE_FROM_TRACEPOINT, 1, CORRECTED_STATUS, 0x1234_5000);
    ws[0]
        .write_event(1_000, def(schema::EVENT_MCE), &corrected)
        .unwrap();
    let page = [
        Value::Unsigned(0x30000),
        Value::Unsigned(16),
        Value::Unsigned(3),
        Value::Str(b"free buddy page"),
    ];
    ws[0]
        .write_event(2_000, def(schema::EVENT_MEMORY_FAILURE), &page)
        .unwrap();
    let pcie = [
        Value::Unsigned(0x41),
        Value::Unsigned(2),
        Value::Unsigned(1),
        Value::Str(b"0000:00:1c.0"),
        Value::Bytes(&[1, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    ];
    ws[0]
        .write_event(3_000, def(schema::EVENT_AER), &pcie)
        .unwrap();
    let fatal = bank(MCE_FROM_PANIC, 4, FATAL_STATUS, 0xabcd000);
    ws[1]
        .write_event(5_000, def(schema::EVENT_MCE), &fatal)
        .unwrap();
    let why = [
        Value::Unsigned(REASON_PANIC.into()),
        Value::Unsigned(1),
        Value::Str(b"Fatal local machine check"),
    ];
    ws[1]
        .write_event(5_000, def(schema::EVENT_CRASH), &why)
        .unwrap();
    drop(ws);
    f.control.set_state(
        STATE_CRASHED,
        REASON_PANIC,
        5_000,
        1,
        "Fatal local machine check",
    );
    mem
}

#[test]
fn text_json_lines_chrome_and_perfetto_describe_each_error_in_words() {
    let path = write_tmp("hardware-errors.bin", &image());
    let out = crashring(&["extract", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for words in [
        "<machine check, bank 1, addr 0x12345000, corrected (status 0x9c00000000000005: VAL EN MISCV ADDRV; MCACOD 0x0005 internal parity error, MSCOD 0x0000)>",
        "<memory failure, pfn 0x30000, free buddy page, recovered>",
        "<PCIe AER error, 0000:00:1c.0, corrected, status 0x00000041 (Receiver Error, Bad TLP)>",
        &format!("<{FATAL}>"),
    ] {
        assert!(text.contains(words), "{words} not in:\n{text}");
    }
    let out = crashring(&["extract", path.to_str().unwrap(), "--format", "jsonl"]);
    let described: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some(v.get("described")?.as_str()?.to_string())
        })
        .collect();
    assert_eq!(described.len(), 4, "{described:?}");
    assert_eq!(described[3], FATAL);
    let (out, chrome) = extract_to(&path, "chrome", "hardware-errors.json");
    assert_eq!(out.status.code(), Some(0));
    let chrome: serde_json::Value =
        serde_json::from_slice(&std::fs::read(chrome).unwrap()).unwrap();
    let in_args = chrome
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["args"]["described"].as_str())
        .collect::<Vec<_>>();
    assert_eq!(in_args, described, "the Chrome trace's args");
    let (out, perfetto) = extract_to(&path, "perfetto", "hardware-errors.pftrace");
    assert_eq!(out.status.code(), Some(0));
    let bytes = std::fs::read(perfetto).unwrap();
    for words in &described {
        let found = bytes.windows(words.len()).any(|w| w == words.as_bytes());
        assert!(found, "the Perfetto trace lacks {words}");
    }
}

#[test]
fn info_and_the_manifest_name_the_machine_check_that_brought_the_kernel_down() {
    let path = write_tmp("hardware-errors-info.bin", &image());
    let out = crashring(&["info", "--json", path.to_str().unwrap()]);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["regions"][0]["crash"]["hardware_error"], FATAL);
    let bundle = path.with_extension("tar.gz");
    let out = crashring(&[
        "bundle",
        path.to_str().unwrap(),
        "-o",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checked = extractor::bundle::check(std::io::BufReader::new(
        std::fs::File::open(&bundle).unwrap(),
    ))
    .unwrap();
    assert_eq!(
        checked.manifest["regions"][0]["crash"]["hardware_error"],
        FATAL
    );
}

#[test]
fn babeltrace2_and_trace_cmd_read_the_errors_as_written() {
    let path = write_tmp("hardware-errors-readers.bin", &image());
    if let Some(babeltrace2) = reader("babeltrace2") {
        let (out, dir) = extract_to(&path, "ctf", "hardware-errors-ctf");
        assert_eq!(out.status.code(), Some(0));
        let out = run_ok(Command::new(babeltrace2).arg(&dir));
        let text = String::from_utf8_lossy(&out.stdout);
        for want in [
            format!("status = {FATAL_STATUS}"),
            format!("status = {CORRECTED_STATUS}"),
            "pfn = 196608".into(),
            "page = \"free buddy page\"".into(),
            "device = \"0000:00:1c.0\"".into(),
        ] {
            assert!(text.contains(&want), "babeltrace2 lacks {want}:\n{text}");
        }
    }
    if let Some(trace_cmd) = reader("trace-cmd") {
        let (out, dat) = extract_to(&path, "tracedat", "hardware-errors.dat");
        assert_eq!(out.status.code(), Some(0));
        let out = run_ok(Command::new(trace_cmd).arg("report").arg("-i").arg(&dat));
        let text = String::from_utf8_lossy(&out.stdout);
        for want in [
            format!("status={FATAL_STATUS}"),
            "pfn=196608".into(),
            "device=\"0000:00:1c.0\"".into(),
        ] {
            assert!(text.contains(&want), "trace-cmd lacks {want}:\n{text}");
        }
    }
}
