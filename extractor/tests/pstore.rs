//! pstore/ramoops records read by the real binary (`crashring pstore`)
//! from an image and from an ELF vmcore that holds the area, written as
//! `/sys/fs/pstore` names them; wrong parameters and a cut dump said so.

mod common;

use common::bundles::bundle;
use common::{crashring, ramoops_area, synth, write_tmp};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn an_images_records_are_written_as_sys_fs_pstore_names_them() {
    let path = write_tmp("ramoops.img", &ramoops_area::seed());
    let dir = out_dir("ramoops-files");
    let out = crashring(&[
        "pstore",
        path.to_str().unwrap(),
        "--ramoops",
        ramoops_area::LAYOUT,
        "-o",
        dir.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "console-ramoops-0",
            "dmesg-ramoops-0",
            "dmesg-ramoops-1",
            "ftrace-ramoops-0",
            "pmsg-ramoops-0"
        ]
    );
    let read = |n: &str| std::fs::read(dir.join(n)).unwrap();
    assert_eq!(
        read("dmesg-ramoops-1"),
        b"<0>Kernel panic - not syncing: compressed\n"
    );
    assert_eq!(
        read("ftrace-ramoops-0"),
        b"CPU:1 ts:77 0xffffffff81000010 <- 0xffffffff81000020\n"
    );
    // Private, like every output: what the kernel logged is in them.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("dmesg-ramoops-0")), 0o600);
    for said in [
        "dmesg-ramoops-1 at 0x4000 (16384 bytes): 42 bytes, written at 1700000000.123456, stored compressed",
        "dmesg-ramoops-2 at 0x8000 (16384 bytes): empty",
        "ftrace-ramoops-1 at 0xf800 (2048 bytes): no ramoops signature (found 0x00000000)",
        "5 ramoops records in 7 zones",
    ] {
        assert!(err.contains(said), "{said:?} not in:\n{err}");
    }
    // Without -o, each record under its name on standard output, with
    // whatever user space put in pmsg escaped.
    let mut mem = ramoops_area::seed();
    ramoops_area::put(
        &mut mem,
        0xe000,
        ramoops_area::SIG,
        0x1000 - 12,
        b"frame 7 late\n\x1b]0;owned\x07\n",
    );
    let path = write_tmp("ramoops-escapes.img", &mem);
    let out = crashring(&[
        "pstore",
        path.to_str().unwrap(),
        "--ramoops",
        ramoops_area::LAYOUT,
    ]);
    let printed = text(&out.stdout);
    assert!(
        printed.contains("==== pmsg-ramoops-0 ====\nframe 7 late\n\\x1b]0;owned\\x07\n==== "),
        "{printed}"
    );
}

#[test]
fn a_vmcores_area_is_read_by_physical_address_and_holes_are_said() {
    // The area at 1 MiB of a dump whose second load stops part way into
    // the console zone: what the dump lacks is unreadable, not zeros, and
    // the console text it holds is kept.
    let base = 0x10_0000usize;
    let mut mem = vec![0u8; base];
    mem.extend(ramoops_area::seed());
    let elf = synth::elf(
        &mem,
        &[
            synth::load(0, (base + 0xc000) as u64),
            synth::Load {
                paddr: (base + 0xc000) as u64,
                memsz: 0x4000,
                filesz: 0x100,
            },
        ],
        None,
        1,
        false,
    );
    let path = write_tmp("ramoops-cut.elf", &elf);
    let layout = ramoops_area::LAYOUT.replacen("0:", &format!("{base:#x}:"), 1);
    let out = crashring(&["pstore", path.to_str().unwrap(), "--ramoops", &layout]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dmesg-ramoops-1 at 0x104000 (16384 bytes): 42 bytes"),
        "{err}"
    );
    assert!(
        err.contains(
            "console-ramoops-0 at 0x10c000 (8192 bytes): 244 bytes, wrapped; 7936 bytes not in the dump left out (7936 at 0x10c100)"
        ),
        "{err}"
    );
    let printed = text(&out.stdout);
    assert!(printed.contains("==== dmesg-ramoops-0 ===="));
    // The zone went round to 0x24: the text it holds from there to the
    // cut, then the buffer's first 0x24 bytes, none of it zeros.
    let console = printed.split("==== console-ramoops-0 ====\n").nth(1);
    let written = ramoops_area::console_text();
    let kept = &written[written.len() - (0x2000 - 12)..];
    let mut want = kept[..0xf4 - 0x24].to_vec();
    want.extend(&kept[0x1ff4 - 0x24..]);
    want.push(b'\n');
    assert_eq!(console.map(str::as_bytes), Some(&want[..]), "{printed}");
}

#[test]
fn parameters_that_match_nothing_are_an_error_that_says_so() {
    let path = write_tmp("ramoops-elsewhere.img", &ramoops_area::seed());
    let out = crashring(&[
        "pstore",
        path.to_str().unwrap(),
        "--ramoops",
        "0x100:32K,console=0,ftrace=0,pmsg=0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no ramoops zone where these parameters put them"),
        "{err}"
    );
    let out = crashring(&[
        "pstore",
        path.to_str().unwrap(),
        "--ramoops",
        "0:1M,colour=3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown ramoops parameter `colour`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bundle_holds_the_dumps_ramoops_records_as_logs() {
    // A crashring region, then the ramoops area at 64 KiB.
    let mut mem = synth::image_sized(0, 4096, 0x10000, 20);
    mem.resize(0x10000, 0);
    mem.extend(ramoops_area::seed());
    let path = write_tmp("ramoops-armed.img", &mem);
    let layout = ramoops_area::LAYOUT.replacen("0:", "0x10000:", 1);
    let (out, archive) = bundle(&path, "ramoops-armed.tar.gz", &["--ramoops", &layout]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = crashring(&["check-bundle", archive.to_str().unwrap()]);
    assert_eq!(said.status.code(), Some(0), "{}", text(&said.stderr));
    let bytes = std::fs::read(&archive).unwrap();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    let mut logs = std::collections::BTreeMap::new();
    let mut manifest = None;
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        if let Some((_, log)) = name.split_once("/logs/") {
            logs.insert(log.to_string(), data);
        } else if name.ends_with("/MANIFEST.json") {
            manifest = Some(data);
        }
    }
    let names: Vec<&str> = logs.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "pstore-console-ramoops-0",
            "pstore-dmesg-ramoops-0",
            "pstore-dmesg-ramoops-1",
            "pstore-ftrace-ramoops-0",
            "pstore-pmsg-ramoops-0"
        ]
    );
    assert_eq!(
        logs["pstore-dmesg-ramoops-1"],
        b"<0>Kernel panic - not syncing: compressed\n"
    );
    let manifest: serde_json::Value = serde_json::from_slice(&manifest.unwrap()).unwrap();
    let file = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "logs/pstore-pmsg-ramoops-0")
        .unwrap();
    assert_eq!(file["format"], "pstore record");
    // Parameters that find nothing, or an area the dump does not hold: a
    // warning, and the bundle all the same.
    for (area, says) in [
        (
            "0x8000:32K",
            "warning: no ramoops zone where the --ramoops parameters put them\n",
        ),
        (
            "0x20000:64K",
            "warning: no ramoops record is bundled: the dump does not hold the area (physical address 0x20000 is not in the dump)\n",
        ),
    ] {
        let (out, _) = bundle(&path, "ramoops-armed.tar.gz", &["--ramoops", area]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains(says), "{err}");
        assert_eq!(err.matches("warning").count(), 1, "{err}");
    }
}

#[test]
fn a_wrapped_ftrace_zone_s_cut_record_is_said_left_out_at_its_start() {
    // 100 records into the 2036-byte buffer of the first ftrace zone: the
    // writer went round, and the oldest record kept is cut at the front.
    let mut area = ramoops_area::seed();
    ramoops_area::put_ftrace_records(&mut area, 100);
    let cut = "20 bytes of a partial record at its start (the oldest, cut by the wrap) left out";
    let path = write_tmp("ramoops-ftrace-wrapped.img", &area);
    let out = crashring(&[
        "pstore",
        path.to_str().unwrap(),
        "--ramoops",
        ramoops_area::LAYOUT,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("ftrace-ramoops-0: {cut}")), "{err}");
    // The bundle warns of it in the same words.
    let mut mem = synth::image_sized(0, 4096, 0x10000, 20);
    mem.resize(0x10000, 0);
    mem.extend(area);
    let path = write_tmp("ramoops-ftrace-wrapped-armed.img", &mem);
    let layout = ramoops_area::LAYOUT.replacen("0:", "0x10000:", 1);
    let (out, _) = bundle(
        &path,
        "ramoops-ftrace-wrapped.tar.gz",
        &["--ramoops", &layout],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("ftrace-ramoops-0: {cut}")), "{err}");
}

#[test]
fn info_lists_the_zones_where_the_parameters_put_them() {
    let path = write_tmp("ramoops-info.img", &ramoops_area::seed());
    let path = path.to_str().unwrap();
    // The area alone: no region, no log of the kernel's, yet described.
    let out = crashring(&["info", path, "--ramoops", ramoops_area::LAYOUT]);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        stdout.contains("ramoops (--ramoops): 7 zones in the current order; 1 empty, 1 not set up with these parameters"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  dmesg-ramoops-1 at 0x4000 (16384 bytes): 42 bytes, written at 1700000000.123456, stored compressed\n"),
        "{stdout}"
    );
    assert!(stdout.contains("no crashring region"), "{stdout}");
    let out = crashring(&["info", "--json", path, "--ramoops", ramoops_area::LAYOUT]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let zones = doc["ramoops"]["zones"].as_array().unwrap();
    assert_eq!(doc["ramoops"]["order"], "current");
    assert_eq!(zones.len(), 7);
    assert_eq!(zones[1]["state"], "record");
    assert_eq!(zones[1]["compressed"], true);
    assert_eq!(zones[2]["state"], "empty");
    // Without --ramoops nothing says where the zones are: none listed,
    // and the input holds nothing else.
    let out = crashring(&["info", path]);
    assert_eq!(out.status.code(), Some(2));
    // A record that no longer inflates sets the status, as pstore's does.
    let mut mem = ramoops_area::seed();
    // The deflate stream's first byte (its block header), after the
    // 24-byte `====…-C` line.
    mem[0x4000 + 12 + 24] ^= 0xff;
    let broken = write_tmp("ramoops-info-broken.img", &mem);
    let out = crashring(&[
        "info",
        broken.to_str().unwrap(),
        "--ramoops",
        ramoops_area::LAYOUT,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains(
            "dmesg-ramoops-1 at 0x4000 (16384 bytes): compressed record does not inflate"
        ),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn what_a_hole_costs_each_record_is_said_by_pstore_and_by_a_bundle() {
    // An armed image, then the area at 64 KiB: a long panic compressed in
    // the second dmesg zone, 50 records in the first ftrace zone. Its ELF
    // vmcore lacks 50 compressed bytes from the panic's offset 1000, and
    // 53 bytes from the 6th of ftrace record 10 on.
    let mut area = ramoops_area::seed();
    let panic = ramoops_area::ecc_panic();
    let record = ramoops_area::compressed_record(&panic);
    ramoops_area::put(&mut area, 0x4000, ramoops_area::SIG, 0x4000 - 12, &record);
    let ftrace = ramoops_area::put_ftrace_records(&mut area, 50);
    let mut mem = synth::image_sized(0, 4096, 0x10000, 20);
    mem.resize(0x10000, 0);
    mem.extend(area);
    let dmesg_gap = 0x10000 + 0x4000 + 12 + 24 + 1000;
    let ftrace_gap = 0x10000 + ftrace as u64 + 12 + 10 * 24 + 5;
    let end = mem.len() as u64;
    let loads = [
        synth::load(0, dmesg_gap),
        synth::load(dmesg_gap + 50, ftrace_gap - dmesg_gap - 50),
        synth::load(ftrace_gap + 53, end - ftrace_gap - 53),
    ];
    let path = write_tmp(
        "ramoops-holes.elf",
        &synth::elf(&mem, &loads, None, 1, false),
    );
    let layout = ramoops_area::LAYOUT.replacen("0:", "0x10000:", 1);
    let said = [
        format!(
            "its last {} compressed bytes, from offset 1000 ({dmesg_gap:#x}) on, are lost",
            record.len() - 24 - 1000
        ),
        format!("(53 at {ftrace_gap:#x}), and the 3 ftrace records that touch them"),
    ];
    let out = crashring(&["pstore", path.to_str().unwrap(), "--ramoops", &layout]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for s in &said {
        assert!(err.contains(s), "{s:?} not in:\n{err}");
    }
    let printed = text(&out.stdout);
    let dmesg = printed.split("==== dmesg-ramoops-1 ====\n").nth(1).unwrap();
    assert!(
        dmesg.starts_with("<0>[    0.000000] Kernel panic line 0\n"),
        "{printed}"
    );
    let (out, _) = bundle(&path, "ramoops-holes.tar.gz", &["--ramoops", &layout]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for s in &said {
        assert!(err.contains(s), "{s:?} not in:\n{err}");
    }
    // info --json gives each loss a field of its own.
    let out = crashring(&[
        "info",
        "--json",
        path.to_str().unwrap(),
        "--ramoops",
        &layout,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let zone = |name: &str| {
        info["ramoops"]["zones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|z| z["name"] == name)
            .unwrap_or_else(|| panic!("no zone {name} in {info}"))
            .clone()
    };
    let (dmesg, ftrace) = (zone("dmesg-ramoops-1"), zone("ftrace-ramoops-0"));
    assert_eq!(dmesg["missing_bytes"], 50, "{dmesg}");
    assert_eq!(dmesg["torn_records"], 0, "{dmesg}");
    assert_eq!(
        dmesg["uninflated"],
        serde_json::json!({
            "offset": 1000,
            "addr": format!("{dmesg_gap:#x}"),
            "bytes": record.len() - 24 - 1000,
        })
    );
    assert_eq!(ftrace["missing_bytes"], 53, "{ftrace}");
    assert_eq!(ftrace["torn_records"], 3, "{ftrace}");
    assert!(ftrace["uninflated"].is_null(), "{ftrace}");
}
