//! The CLI's outputs, byte for byte, on the golden images and synthetic
//! dumps: every subcommand and format, its exit status and what it says on
//! stderr. `tests/outputs.sha256` holds the SHA-256 of each; a change to
//! any output fails here and names the run. Restructuring must not change
//! a byte; a deliberate change rewrites the list with `UPDATE_GOLDEN=1`
//! and is reviewed in the diff like any other.

mod common;

use common::synth::{self, load, Kdump, LZO, ZSTD};
use common::{crashring_with, image_sized, rich_image};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DIGESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/outputs.sha256");
const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../pstore-ring/golden");

/// The inputs: every golden image, a damaged region with every event kind,
/// a memory image holding two regions, and that memory in every container
/// with pages filtered out, lost and cut off.
fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    let golden = |name| std::fs::read(Path::new(GOLDEN).join(name)).unwrap();
    // Two regions, 4 KiB ring pages on dump pages, zero pages after them.
    let mut mem = image_sized(0x30000, 4096, 0x10000, 3000);
    mem.resize(0x50000, 0);
    mem.extend(image_sized(0, 512, 0x8000, 400));
    mem.resize(0x100000, 0);
    let kdump = |k: &Kdump| synth::kdump(&mem, k);
    let mut cut = mem.clone();
    cut.truncate(0x38000);
    vec![
        ("v2-le.bin", golden("v2-le.bin")),
        ("v2-be.bin", golden("v2-be.bin")),
        ("v1-le.bin", golden("v1-le.bin")),
        ("rich.bin", rich_image()),
        ("two.raw", mem.clone()),
        ("cut.raw", cut),
        (
            "two.elf",
            synth::elf(
                &mem,
                &[load(0, 0x31000), load(0x33000, 0x100000 - 0x33000)],
                Some("OSRELEASE=6.12.0-same\nCRASHTIME=1795000000\n"),
                2,
                false,
            ),
        ),
        (
            "two.kdump",
            kdump(&Kdump {
                codec: ZSTD,
                vmcoreinfo: Some("OSRELEASE=6.12.0-same\n"),
                excluded: &[0x34],
                lost: &[0x36, 0x52],
                ..Default::default()
            }),
        ),
        ("windows.raw", windows_image()),
        (
            "two-be.flat",
            synth::flatten(&kdump(&Kdump {
                codec: LZO,
                big_endian: true,
                ..Default::default()
            })),
        ),
    ]
}

/// A region the item formats cut into many windows of time, one per
/// worker in turn: 4 CPUs, 24000 events (three CPUs' rings wrapped), every
/// time shared by three events on different CPUs, so ties fall on the
/// windows' edges.
fn windows_image() -> Vec<u8> {
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let specs: Vec<StreamSpec> = (0..4).map(StreamSpec::cpu).collect();
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        ..Default::default()
    };
    let mut image = vec![0u8; 512 << 10];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let switch = schema::builtin(schema::EVENT_SCHED_SWITCH).unwrap();
    let mut f = write::format(&mut image, &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    for i in 0..24_000u64 {
        let cpu = (i % 3 + i / 3000 % 2) as usize;
        let ts = 1000 + i / 3 * 10;
        let written = if i % 2 == 0 {
            let text = format!("message {i}");
            let v = [
                Value::Unsigned(6),
                Value::Unsigned(0),
                Value::Unsigned(cpu as u64),
                Value::Unsigned(i),
                Value::Str(text.as_bytes()),
            ];
            ws[cpu].write_event(ts, printk, &v)
        } else {
            let v = [
                Value::Signed(i as i64),
                Value::Signed(120),
                Value::Unsigned(1),
                Value::Signed(0),
                Value::Signed(120),
                Value::Chars(b"worker"),
                Value::Chars(b"swapper"),
            ];
            ws[cpu].write_event(ts, switch, &v)
        };
        written.unwrap();
    }
    drop(ws);
    image
}

/// The runs: each subcommand and format, with the options that change
/// what is written.
const RUNS: &[(&str, &[&str])] = &[
    ("text", &["extract"]),
    (
        "text-selected",
        &[
            "extract", "--cpu", "1", "--since", "50us", "--type", "printk", "--type", "crash",
        ],
    ),
    ("jsonl", &["extract", "--format", "jsonl"]),
    ("chrome", &["extract", "--format", "chrome"]),
    (
        "perfetto",
        &["extract", "--format", "perfetto", "-o", "{out}"],
    ),
    (
        "tracedat",
        &["extract", "--format", "tracedat", "-o", "{out}"],
    ),
    ("ctf", &["extract", "--format", "ctf", "-o", "{out}"]),
    ("info", &["info"]),
    ("info-pages", &["info", "--pages"]),
    ("info-json", &["info", "--json"]),
    ("verify", &["verify"]),
    ("bundle", &["bundle", "-o", "{out}.tar.gz"]),
    (
        "bundle-redacted",
        &[
            "bundle",
            "-o",
            "{out}.tar.gz",
            "--redact",
            "printk=input:",
            "--redact",
            "drm_flip.comm",
            "--add-log",
            "{log}:serial.log",
        ],
    ),
    (
        "bundle-raw",
        &["bundle", "-o", "{out}.tar.gz", "--raw-pointers"],
    ),
];

/// SHA-256 of a file, or of every file under a directory with its path.
fn digest_path(path: &Path, hash: &mut Sha256) {
    if path.is_dir() {
        let mut names: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for name in names {
            hash.update(name.file_name().unwrap().as_encoded_bytes());
            hash.update(b"\0");
            digest_path(&name, hash);
        }
    } else {
        hash.update(std::fs::read(path).unwrap());
    }
}

/// `bytes` with every occurrence of the scratch directory's path replaced
/// by `<scratch>`.
fn unplaced(bytes: &[u8], scratch: &str) -> Vec<u8> {
    let (from, mut out, mut at) = (scratch.as_bytes(), Vec::new(), 0);
    while at < bytes.len() {
        if bytes[at..].starts_with(from) {
            out.extend_from_slice(b"<scratch>");
            at += from.len();
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs every run on every input with `workers` workers; the digest of
/// each covers its exit status, stdout, stderr (with the scratch
/// directory's path replaced) and every file it wrote.
fn digests(workers: &str) -> BTreeMap<String, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("same-outputs-{workers}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = dir.to_str().unwrap().to_owned();
    let log = dir.join("serial.txt");
    std::fs::write(
        &log,
        "[    0.000002] message 0\n[    0.000003] message 1\n[    0.000042] input: keyboard at ffffffff81230007\nno time here\n",
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for (name, bytes) in inputs() {
        let input = dir.join(name);
        std::fs::write(&input, &bytes).unwrap();
        for (run, args) in RUNS {
            let target = dir.join(format!("{name}.{run}"));
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    a.replace("{out}", target.to_str().unwrap())
                        .replace("{log}", log.to_str().unwrap())
                })
                .collect();
            let mut all = vec![args[0].as_str(), input.to_str().unwrap()];
            all.extend(args[1..].iter().map(String::as_str));
            let result = crashring_with(&all, &[("RAYON_NUM_THREADS", workers)]);
            let mut hash = Sha256::new();
            hash.update(format!("exit {:?}\n", result.status.code()));
            // `info` names its input: where the clone is must not matter.
            hash.update(unplaced(&result.stdout, &scratch));
            hash.update(b"\0stderr\0");
            hash.update(unplaced(&result.stderr, &scratch));
            // The output and whatever was named after it (`FILE.N` per
            // region, the bundle's `.tar.gz`).
            let prefix = format!("{name}.{run}");
            let mut written: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let file = p.file_name().unwrap().to_str().unwrap();
                    file == prefix || file.starts_with(&format!("{prefix}."))
                })
                .collect();
            written.sort();
            for path in written {
                hash.update(path.file_name().unwrap().as_encoded_bytes());
                digest_path(&path, &mut hash);
            }
            out.insert(format!("{name} {run}"), hex(&hash.finalize()));
        }
    }
    out
}

/// Every output, by 1, 2, 3 and 16 workers (the windows of the item
/// formats, the streams of CTF and trace.dat, the bundle's files and
/// compression are shared among them): the same bytes, the recorded ones.
#[test]
fn every_output_is_byte_identical_to_the_recorded_one() {
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        let text: String = digests("1")
            .iter()
            .map(|(k, v)| format!("{v}  {k}\n"))
            .collect();
        std::fs::write(DIGESTS, &text).unwrap();
        return;
    }
    let want =
        std::fs::read_to_string(DIGESTS).expect("tests/outputs.sha256 (UPDATE_GOLDEN=1 makes it)");
    let want: BTreeMap<&str, &str> = want
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(d, k)| (k, d))
        .collect();
    for workers in ["1", "2", "3", "16"] {
        let got = digests(workers);
        let changed: Vec<&String> = got
            .iter()
            .filter(|(k, v)| want.get(k.as_str()) != Some(&v.as_str()))
            .map(|(k, _)| k)
            .collect();
        assert!(
            changed.is_empty() && want.len() == got.len(),
            "{workers} workers: outputs changed: {changed:?} ({} recorded, {} run)",
            want.len(),
            got.len()
        );
    }
}
