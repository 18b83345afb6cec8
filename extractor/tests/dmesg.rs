//! The crashed kernel's own printk log, read from a vmcore through its
//! VMCOREINFO by the real binary: `dmesg`, `info`, the bundle, and
//! `extract --kernel-logs` with a persistent ftrace buffer too, with and
//! without a crashring region beside it.

mod common;

use common::{bundles, crashring, ftrace_area, printk_ring, synth, write_tmp};

/// An ELF vmcore of `mem` with the printk ring's VMCOREINFO.
fn vmcore(name: &str, mem: &[u8]) -> std::path::PathBuf {
    vmcore_with(name, mem, &printk_ring::note())
}

fn vmcore_with(name: &str, mem: &[u8], note: &str) -> std::path::PathBuf {
    let elf = synth::elf(
        mem,
        &[synth::load(0, mem.len() as u64)],
        Some(note),
        1,
        false,
    );
    write_tmp(name, &elf)
}

#[test]
fn an_arm64_vmcores_printk_log_reads_as_an_x86_ones() {
    let x86 = vmcore("printk-x86.elf", &printk_ring::six_records());
    let mut mem = printk_ring::six_records();
    printk_ring::arm64::repoint(&mut mem);
    let arm64 = vmcore_with("printk-arm64.elf", &mem, &printk_ring::arm64::note());
    let read = |path: &std::path::Path| crashring(&["dmesg", "--json", path.to_str().unwrap()]);
    let (x86, arm64) = (read(&x86), read(&arm64));
    assert_eq!(arm64.status.code(), Some(0), "{}", text(&arm64.stderr));
    assert_eq!(text(&arm64.stdout), text(&x86.stdout));
    assert_eq!(text(&arm64.stdout).lines().count(), 3);
    // Descriptors at an address outside the image and the linear map (a
    // vmalloc one) are not followed: every record is said unread, with
    // why, none read from a wrong place.
    printk_ring::put(
        &mut mem,
        printk_ring::RING + 8,
        &0xffff_8000_1234_0000u64.to_le_bytes(),
    );
    let vmalloc = vmcore_with(
        "printk-arm64-vmalloc.elf",
        &mem,
        &printk_ring::arm64::note(),
    );
    let out = crashring(&["dmesg", vmalloc.to_str().unwrap()]);
    assert_eq!(text(&out.stdout), "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("0 printk records (seq 0..0); 0 unreadable between tail and head; 6 records not read from the dump (the oldest: 0xffff800012340030 is in neither the kernel image nor the linear map"),
        "{}",
        text(&out.stderr)
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn an_unarmed_vmcores_printk_log_is_printed_and_described() {
    let path = vmcore("printk-only.elf", &printk_ring::six_records());
    let path = path.to_str().unwrap();
    let out = crashring(&["dmesg", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let wrapped = "w".repeat(30);
    assert_eq!(
        text(&out.stdout),
        format!("[    0.010000] hello\\x00\\x00\\x00\n[    0.011000] {wrapped}\n[    0.013000] \n")
    );
    assert!(
        text(&out.stderr).contains("3 printk records (seq 1010..1013); 3 unreadable between tail and head; 5 the kernel could not store"),
        "{}",
        text(&out.stderr)
    );
    // -o writes the same lines to a file.
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("printk-only.txt");
    let _ = std::fs::remove_file(&file);
    let written = crashring(&["dmesg", path, "-o", file.to_str().unwrap()]);
    assert_eq!(written.status.code(), Some(0), "{}", text(&written.stderr));
    assert_eq!(std::fs::read(&file).unwrap(), out.stdout);
    let out = crashring(&["dmesg", "--json", path]);
    let lines = text(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(lines.lines().nth(2).unwrap()).unwrap();
    assert_eq!(last["device"], "+pci:0000:00:02.0");
    assert_eq!(last["caller"], "T1");

    // No region, yet info describes the dump and its log.
    let out = crashring(&["info", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let info = text(&out.stdout);
    assert!(
        info.contains("crashed kernel (VMCOREINFO): 6.12.0-test"),
        "{info}"
    );
    assert!(
        info.contains("kernel printk log (VMCOREINFO): 3 records, seq 1010..1013, 10000000 .. 13000000 ns; 3 unreadable"),
        "{info}"
    );
    assert!(info.contains("no crashring region"), "{info}");
    let out = crashring(&["info", "--json", path]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["printk"]["records"], 3);
    assert_eq!(doc["printk"]["failed"], 5);
    assert_eq!(doc["regions"].as_array().unwrap().len(), 0);

    // What needs a region says there is none, and what the dump holds.
    let out = crashring(&["extract", path]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("no crashring region in"), "{err}");
    assert!(
        err.contains(&format!(
            "it holds the kernel's printk log (3 records): `crashring dmesg {path}` prints it"
        )),
        "{err}"
    );
}

#[test]
fn records_the_dump_lacks_are_said_with_where_and_set_the_exit_status() {
    // The dump holds the descriptors and infos, not the data ring.
    let mem = printk_ring::six_records();
    let data = printk_ring::DATA;
    let elf = synth::elf(
        &mem,
        &[synth::load(0, data)],
        Some(&printk_ring::note()),
        1,
        false,
    );
    let path = write_tmp("printk-no-data.elf", &elf);
    let out = crashring(&["dmesg", path.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1 printk records (seq 1013..1013); 2 unreadable between tail and head; 3 records not read from the dump (the oldest: ")
            && err.contains("is not in the dump"),
        "{err}"
    );
}

#[test]
fn a_dump_without_vmcoreinfo_or_with_a_broken_log_says_why() {
    let raw = write_tmp("printk-raw.bin", &printk_ring::six_records());
    let out = crashring(&["dmesg", raw.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("has no VMCOREINFO (raw memory image"),
        "{}",
        text(&out.stderr)
    );

    // `prb` points where nothing is mapped.
    let mut mem = printk_ring::six_records();
    printk_ring::put(
        &mut mem,
        printk_ring::PRB,
        &0xffff_9000_0000_0000u64.to_le_bytes(),
    );
    let path = vmcore("printk-unmapped.elf", &mem);
    let out = crashring(&["dmesg", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "reading the printk ring's descriptor count bits: 0xffff900000000000 is not mapped"
        ),
        "{}",
        text(&out.stderr)
    );
    // info still describes the dump, and why the log is not there.
    let out = crashring(&["info", "--json", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "no region and no log: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains(
            "its printk log could not be read: reading the printk ring's descriptor count bits"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bundle_of_an_armed_vmcore_holds_the_kernels_whole_log() {
    // The region after the ring's memory.
    let mut mem = synth::image_sized(printk_ring::MEM, 4096, 0x10000, 20);
    mem[..printk_ring::MEM].copy_from_slice(&printk_ring::six_records());
    let path = vmcore("printk-armed.elf", &mem);
    let out_path =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("printk-armed.tar.gz");
    let _ = std::fs::remove_file(&out_path);
    let out = crashring(&[
        "bundle",
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = crashring(&["check-bundle", out_path.to_str().unwrap()]);
    assert_eq!(said.status.code(), Some(0), "{}", text(&said.stderr));
    let (_, files) = bundles::bundled(&out_path);
    let log = files.get("logs/kernel-printk.txt").map(bundles::text);
    let manifest = files.get("MANIFEST.json").map(bundles::text);
    let log = log.expect("logs/kernel-printk.txt in the bundle");
    assert!(log.starts_with("[    0.010000] hello"), "{log}");
    let manifest: serde_json::Value = serde_json::from_str(manifest.unwrap()).unwrap();
    assert_eq!(manifest["logs"][0]["name"], "kernel-printk.txt");
    assert_eq!(manifest["logs"][0]["lines"], 3);
    let file = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "logs/kernel-printk.txt")
        .unwrap();
    assert_eq!(file["format"], "dmesg text");
}

/// The seconds of a text line (`[000]        0.000001000: …`, `[log] …`).
fn seconds(line: &str) -> f64 {
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .parse()
        .unwrap()
}

#[test]
fn extract_merges_the_kernels_own_logs_into_the_timeline() {
    // The ring, the region after it, a 6.12 ftrace buffer after that.
    let mut mem = synth::image_sized(printk_ring::MEM, 4096, 0x10000, 20);
    mem[..printk_ring::MEM].copy_from_slice(&printk_ring::six_records());
    let ftrace_at = mem.len();
    mem.extend(ftrace_area::seed(56));
    let path = vmcore("printk-ftrace-armed.elf", &mem);
    let path = path.to_str().unwrap();
    let markers = ftrace_area::MARKERS0 as usize;

    let out = crashring(&["extract", path, "--kernel-logs"]);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--kernel-logs: kernel-printk.txt: 3 lines placed, no printk line in common with the region: its times are taken as the region's clock; 0 not placed"),
        "{err}"
    );
    assert!(
        err.contains(&format!("--kernel-logs: kernel-ftrace-{ftrace_at:x}.txt: ")),
        "{err}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // One timeline: the region's events, then the log lines among them.
    let times: Vec<f64> = lines.iter().map(|l| seconds(l)).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{stdout}");
    assert!(lines.contains(&"[log]        0.010000000: kernel printk log: hello\\x00\\x00\\x00"));
    assert!(lines.contains(
        &"[log]        0.001112000: kernel ftrace buffer: cpu0 pid 7: print: cpu0 marker 112"
    ));
    let logged = lines.iter().filter(|l| l.starts_with("[log] ")).count();
    let plain = crashring(&["extract", path]);
    assert_eq!(lines.len() - logged, text(&plain.stdout).lines().count());
    // The region's first event comes first: its clock starts before them.
    assert_eq!(lines[0], text(&plain.stdout).lines().next().unwrap());

    // jsonl names each line's source; --type log keeps only them.
    let out = crashring(&[
        "extract",
        path,
        "--kernel-logs",
        "--format",
        "jsonl",
        "--type",
        "log",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let docs: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), logged);
    assert!(docs.iter().all(|d| d["kind"] == "log" && d["region"] == 0));
    let ftrace = docs
        .iter()
        .filter(|d| d["source"] == "kernel ftrace buffer")
        .count();
    let printk = docs
        .iter()
        .filter(|d| d["source"] == "kernel printk log")
        .count();
    assert_eq!((printk, ftrace), (3, logged - 3));
    assert!(ftrace > markers / 2, "{ftrace} ftrace lines");
    let ts: Vec<u64> = docs.iter().map(|d| d["ts"].as_u64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));

    // A selection of CPUs leaves them out; a format that cannot hold
    // them refuses.
    let out = crashring(&["extract", path, "--kernel-logs", "--cpu", "0"]);
    assert!(!text(&out.stdout).contains("[log]"));
    let out = crashring(&["extract", path, "--kernel-logs", "--format", "chrome"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "--kernel-logs: --format chrome cannot hold them (text, jsonl and perfetto can)"
        ),
        "{}",
        text(&out.stderr)
    );
}
