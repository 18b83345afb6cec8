//! `crashring export` against a fleet: 1 000 bundles of 20 crash causes
//! over 200 hosts, written by the project's own writer and bundled by the
//! real binary, exported as Parquet and asked with DuckDB what a fleet's
//! engineer asks; bundles that are damaged, hostile or older, exported
//! beside intact ones; and Sentry envelopes, parsed by Sentry's SDK and
//! their events normalized by Relay (the Python packages `cargo xtask
//! setup` installs).

mod common;

use common::bundles::{bundle, tmp};
use common::{crashring, skip_without};
use pstore_ring::layout::{REASON_OOPS, STATE_CRASHED};
use pstore_ring::schema::{builtin, Value, EVENT_CRASH, EVENT_PRINTK};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo xtask setup` installs DuckDB, Sentry's SDK and Relay
/// (qemu-tests/src/env/setup.rs, `EXPORT_READERS_PYTHON`).
const READERS_PYTHON: &str = "/usr/local/share/crashring/export-readers/venv/bin/python";

const BUNDLES: u64 = 1000;
const HOSTS: u64 = 200;
const CAUSES: u64 = 20;
/// Each host runs one of the first two kernels until its fourth crash,
/// then the third.
const KERNELS: [&str; 3] = [
    "6.1.0-41-amd64",
    "6.12.57+deb12-amd64",
    "6.17.8+deb13-amd64",
];

/// Bundle `i` of the fleet.
struct Crash {
    i: u64,
    host: String,
    kernel: &'static str,
    cause: u64,
    cpu: u16,
    boot_id: [u8; 16],
    /// Every event (time, CPU, text), in time order; the last is the
    /// crash event, whose text is the panic message.
    events: Vec<(u64, u16, String)>,
}

const PANIC: &str = "Kernel panic - not syncing: Fatal exception";

impl Crash {
    fn new(i: u64) -> Crash {
        let (host, boot) = (i % HOSTS, i / HOSTS);
        // Skewed as a fleet's are: a few causes take most crashes.
        let cause = (i * 31 % 97) % CAUSES;
        let kernel = if boot < 3 {
            KERNELS[(host % 2) as usize]
        } else {
            KERNELS[2]
        };
        let cpu = (i % 2) as u16;
        let mut boot_id = [0u8; 16];
        boot_id[..8].copy_from_slice(&i.to_be_bytes());
        boot_id[8..].copy_from_slice(b"fleetcrs");
        let mut events = Vec::new();
        let start = 1_000_000_000 + i * 1_000;
        for k in 0..40u64 {
            // The crashing CPU's ordinary lines, the other's between them.
            events.push((
                start + k * 2_000_000,
                cpu,
                format!("kiosk-{host:03}: frame {k} shown"),
            ));
            events.push((
                start + k * 2_000_000 + 1_000_000,
                1 - cpu,
                format!("kiosk-{host:03}: vblank {k}"),
            ));
        }
        let mut ts = start + 80_000_000;
        for line in oops(cause, i) {
            ts += 1_000;
            events.push((ts, cpu, line));
        }
        events.push((ts + 1_000, cpu, PANIC.into()));
        Crash {
            i,
            host: format!("kiosk-{host:03}"),
            kernel,
            cause,
            cpu,
            boot_id,
            events,
        }
    }

    fn boot_id_hex(&self) -> String {
        self.boot_id.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The region image, by the project's writer.
    fn image(&self) -> Vec<u8> {
        let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            boot_id: self.boot_id,
            generation: self.i / HOSTS + 1,
            created_ns: 1_000,
            // A crash every 43 minutes over 30 days.
            wall_offset_ns: 1_790_000_000_000_000_000 + self.i as i64 * 2_600_000_000_000,
            kernel_release: self.kernel,
            hostname: &self.host,
            producer: "crashring.ko",
            ..Default::default()
        };
        let mut mem = vec![0u8; 128 * 1024];
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let mut ws: Vec<_> = region.streams.by_ref().collect();
        let printk = builtin(EVENT_PRINTK).unwrap();
        let crash = builtin(EVENT_CRASH).unwrap();
        let (last, lines) = self.events.split_last().unwrap();
        for (seq, (ts, cpu, text)) in lines.iter().enumerate() {
            let values = [
                Value::Unsigned(4),
                Value::Unsigned(0),
                Value::Unsigned(0),
                Value::Unsigned(seq as u64),
                Value::Str(text.as_bytes()),
            ];
            ws[usize::from(*cpu)]
                .write_event(*ts, printk, &values)
                .unwrap();
        }
        let values = [
            Value::Unsigned(REASON_OOPS.into()),
            Value::Unsigned(self.cpu.into()),
            Value::Str(PANIC.as_bytes()),
        ];
        ws[usize::from(self.cpu)]
            .write_event(last.0, crash, &values)
            .unwrap();
        ws.iter_mut().for_each(|w| w.close());
        drop(ws);
        region
            .control
            .set_state(STATE_CRASHED, REASON_OOPS, last.0, self.cpu.into(), PANIC);
        mem
    }
}

/// The report of crash cause `cause` as the kernel prints it, on the
/// boot of bundle `i`: addresses (KASLR), pids, CPUs, offsets and the
/// faulting address change from boot to boot; the functions do not.
fn oops(cause: u64, i: u64) -> Vec<String> {
    let module = format!("kiosk{cause}");
    let title = match cause % 4 {
        0 => format!("BUG: kernel NULL pointer dereference, address: 00000000000000{:02x}", 8 + i % 64),
        1 => format!("BUG: unable to handle page fault for address: ffff9a{:010x}", i * 0x1_1000),
        2 => format!("general protection fault, probably for non-canonical address 0xdead{:012x}: 0000 [#1] PREEMPT SMP NOPTI", i * 0x100),
        _ => format!("kernel BUG at drivers/gpu/drm/{module}/{module}_drv.c:{}!", 100 + cause),
    };
    vec![
        title,
        format!("Oops: 0000 [#1] PREEMPT SMP NOPTI"),
        format!(
            "CPU: {} UID: 0 PID: {} Comm: player Not tainted",
            i % 4,
            1000 + i
        ),
        format!(
            "RIP: 0010:{module}_work+0x{:x}/0x1c0 [{module}]",
            0x20 + i % 16
        ),
        format!("RSP: 0018:ffffb1c2{:08x} EFLAGS: 00010246", i * 0x100),
        "Call Trace:".into(),
        " <TASK>".into(),
        " ? __die+0x23/0x70".into(),
        format!(" {module}_submit+0x{:x}/0x300 [{module}]", 0x91 + i % 8),
        format!(" {module}_queue_frame+0x5e/0x120 [{module}]"),
        " process_one_work+0x174/0x340".into(),
        " worker_thread+0x27b/0x3a0".into(),
        " kthread+0xf4/0x130".into(),
        " </TASK>".into(),
        format!("---[ end trace {:016x} ]---", i * 0x9e37),
    ]
}

/// Bundles every crash of `fleet` into a directory `name` of the
/// target's scratch space, on two threads.
fn bundle_all(fleet: &[Crash], name: &str) -> PathBuf {
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::thread::scope(|s| {
        for part in fleet.chunks(fleet.len().div_ceil(2)) {
            let dir = &dir;
            s.spawn(move || {
                for c in part {
                    let image = dir.join(format!("{}.img", c.i));
                    std::fs::write(&image, c.image()).unwrap();
                    let (run, _) = bundle(&image, &format!("{name}/{:04}.tar.gz", c.i), &[]);
                    assert!(
                        run.status.success(),
                        "bundle {}: {}",
                        c.i,
                        String::from_utf8_lossy(&run.stderr)
                    );
                    std::fs::remove_file(&image).unwrap();
                }
            });
        }
    });
    dir
}

/// What the readers' Python prints (JSON lines) running `script` with
/// `args`, or `None` without it (which fails the test where readers are
/// required).
fn python(script: &str, args: &[&str]) -> Option<Vec<serde_json::Value>> {
    if !Path::new(READERS_PYTHON).exists() {
        skip_without(READERS_PYTHON);
        return None;
    }
    let out = Command::new(READERS_PYTHON)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

/// DuckDB's answer to `sql`, each row as a JSON array.
fn duckdb(sql: &str) -> Option<Vec<serde_json::Value>> {
    let script = "import sys, json, duckdb\n\
        for row in duckdb.sql(sys.argv[1]).fetchall():\n    \
        print(json.dumps([str(v) if v is not None and not isinstance(v, (int, str, bool)) else v for v in row]))\n";
    python(script, &[sql])
}

fn table(dir: &Path, name: &str) -> String {
    format!(
        "read_parquet('{}/{name}-v1/*/*.parquet', hive_partitioning = true)",
        dir.display()
    )
}

#[test]
fn a_fleet_of_bundles_answers_duckdb_as_generated() {
    let fleet: Vec<Crash> = (0..BUNDLES).map(Crash::new).collect();
    let bundles = bundle_all(&fleet, "fleet-bundles");
    let dataset = tmp("fleet-parquet");
    let out = crashring(&[
        "export",
        "--parquet",
        dataset.to_str().unwrap(),
        bundles.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: usize = fleet.iter().map(|c| c.events.len()).sum();
    assert!(
        stdout.contains(&format!("exported {BUNDLES} bundles"))
            && stdout.contains(&format!("{BUNDLES} crashes rows, {events} events rows")),
        "{stdout}"
    );

    let crashes = table(&dataset, "crashes");
    let Some(rows) = duckdb(&format!(
        "SELECT boot_id, signature, host, kernel_release, reason FROM {crashes}"
    )) else {
        return;
    };
    let by_boot: BTreeMap<String, &Crash> = fleet.iter().map(|c| (c.boot_id_hex(), c)).collect();
    assert_eq!(rows.len(), BUNDLES as usize);
    // One cause, one signature, whatever the boot; no two causes share one.
    let mut signature_of: BTreeMap<u64, String> = BTreeMap::new();
    for r in &rows {
        let c = by_boot[r[0].as_str().unwrap()];
        let signature = r[1].as_str().unwrap().to_string();
        assert_eq!(r[2], c.host.as_str());
        assert_eq!(r[3], c.kernel);
        assert_eq!(r[4], "oops");
        let known = signature_of
            .entry(c.cause)
            .or_insert_with(|| signature.clone());
        assert_eq!(*known, signature, "cause {} of bundle {}", c.cause, c.i);
    }
    let distinct: BTreeSet<&String> = signature_of.values().collect();
    assert_eq!(distinct.len(), CAUSES as usize, "{signature_of:?}");
    let cause_of: BTreeMap<&str, u64> =
        signature_of.iter().map(|(c, s)| (s.as_str(), *c)).collect();

    // Crashes per signature and per kernel release.
    let mut expected: BTreeMap<(u64, &str), u64> = BTreeMap::new();
    for c in &fleet {
        *expected.entry((c.cause, c.kernel)).or_default() += 1;
    }
    let counted = duckdb(&format!(
        "SELECT signature, kernel_release, count(*) FROM {crashes} GROUP BY ALL ORDER BY ALL"
    ))
    .unwrap();
    let counted: BTreeMap<(u64, &str), u64> = counted
        .iter()
        .map(|r| {
            (
                (cause_of[r[0].as_str().unwrap()], r[1].as_str().unwrap()),
                r[2].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counted, expected);

    // The last 20 events before each crash of one signature, every CPU's.
    let cause = 5;
    let s = &signature_of[&cause];
    let events_table = table(&dataset, "events");
    let last = duckdb(&format!(
        "SELECT c.boot_id, e.cpu, e.ts_ns, e.type, e.text, e.time = c.time
         FROM {crashes} c JOIN {events_table} e USING (bundle, region)
         WHERE c.signature = '{s}' AND e.kind = 'event' AND e.ts_ns <= c.ts_ns
         QUALIFY row_number() OVER (PARTITION BY c.bundle ORDER BY e.ts_ns DESC) <= 20
         ORDER BY c.boot_id, e.ts_ns"
    ))
    .unwrap();
    let mut got: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
    for r in &last {
        let boot = r[0].as_str().unwrap().to_string();
        let is_crash = r[3] == "crash";
        // The crash event and the crash row share their wall time.
        assert_eq!(r[5].as_bool(), Some(is_crash), "{r:?}");
        got.entry(boot).or_default().push((
            r[1].as_u64().unwrap(),
            r[2].as_u64().unwrap(),
            words_of_16_hex_digits_masked(r[4].as_str().unwrap()),
        ));
    }
    let want: BTreeMap<String, Vec<(u64, u64, String)>> = fleet
        .iter()
        .filter(|c| c.cause == cause)
        .map(|c| {
            let tail = &c.events[c.events.len() - 20..];
            (
                c.boot_id_hex(),
                tail.iter()
                    .map(|(ts, cpu, text)| {
                        (u64::from(*cpu), *ts, words_of_16_hex_digits_masked(text))
                    })
                    .collect(),
            )
        })
        .collect();
    assert!(want.len() > 10, "cause {cause} has {} crashes", want.len());
    assert_eq!(got, want);

    // Every row is filed under its crash's day.
    let days = duckdb(&format!(
        "SELECT count(*), count(DISTINCT crash_date) FROM {crashes} WHERE strftime(time, '%Y-%m-%d') = crash_date"
    ))
    .unwrap();
    assert_eq!(days[0][0], BUNDLES);
    assert!(days[0][1].as_u64().unwrap() >= 30, "{days:?}");
}

/// `text` with each run of 16 hex digits as `#`: bundles hash kernel
/// addresses (`ffff9a…` in the generated lines) into 16 other digits.
fn words_of_16_hex_digits_masked(text: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in text.chars().chain(['\n']) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        out += if run.len() == 16 { "#" } else { &run };
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// Rows in a part, read with the parquet crate.
fn rows_in(dir: &Path, table: &str) -> u64 {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut n = 0;
    for day in std::fs::read_dir(dir.join(format!("{table}-v1"))).unwrap() {
        for part in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let path = part.unwrap().path();
            assert!(
                path.extension().is_some_and(|e| e == "parquet"),
                "{}",
                path.display()
            );
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            n += reader.metadata().file_metadata().num_rows() as u64;
        }
    }
    n
}

/// Rewrites the bundle at `from` into `to` with `edit` applied to each
/// file (path in the top directory, bytes), and the manifest's sizes and
/// digests made to match: a bundle whose checks pass, with whatever
/// content a hostile or buggy writer gives it.
fn rewrite(from: &Path, to: &Path, edit: impl Fn(&str, &mut Vec<u8>)) {
    use sha2::{Digest, Sha256};
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(from).unwrap(),
    ));
    let mut files: Vec<(String, tar::Header, Vec<u8>)> = Vec::new();
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        let rel = path.split_once('/').map_or("", |(_, r)| r).to_string();
        edit(&rel, &mut data);
        files.push((path, e.header().clone(), data));
    }
    let digests: BTreeMap<String, (u64, String)> = files
        .iter()
        .map(|(p, _, d)| {
            let rel = p.split_once('/').map_or("", |(_, r)| r).to_string();
            let hex = Sha256::digest(d)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            (rel, (d.len() as u64, hex))
        })
        .collect();
    for (path, _, data) in &mut files {
        if path.ends_with("/MANIFEST.json") {
            let mut m: serde_json::Value = serde_json::from_slice(data).unwrap();
            for f in m["files"].as_array_mut().unwrap() {
                let (size, sha) = &digests[f["path"].as_str().unwrap()];
                f["size"] = (*size).into();
                f["sha256"] = sha.as_str().into();
            }
            *data = serde_json::to_vec_pretty(&m).unwrap();
        }
    }
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(to).unwrap(),
        flate2::Compression::fast(),
    );
    let mut out = tar::Builder::new(gz);
    for (path, header, data) in files {
        let mut h = header;
        h.set_size(data.len() as u64);
        h.set_cksum();
        out.append_data(&mut h, path, data.as_slice()).unwrap();
    }
    out.into_inner().unwrap().finish().unwrap();
}

#[test]
fn damaged_hostile_and_older_bundles_are_named_and_the_rest_exported() {
    let fleet: Vec<Crash> = (0..4).map(|i| Crash::new(i * 7)).collect();
    let dir = bundle_all(&fleet, "export-hostile");
    let good: Vec<PathBuf> = (0..4)
        .map(|i| dir.join(format!("{:04}.tar.gz", i * 7)))
        .collect();
    let per_bundle = fleet[0].events.len() as u64;

    // Cut short: its check fails.
    let cut = dir.join("cut.tar.gz");
    let bytes = std::fs::read(&good[0]).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    // Checks pass, but three lines are no events: not JSON, over 1 MiB,
    // of an unknown kind.
    let hostile = dir.join("hostile.tar.gz");
    rewrite(&good[1], &hostile, |rel, data| {
        if rel.ends_with("events.jsonl") {
            data.extend_from_slice(b"{not json\n");
            data.extend_from_slice(&vec![b'x'; (1 << 20) + 5]);
            data.extend_from_slice(b"\n{\"kind\":\"log\",\"stream\":0,\"ts\":1}\n");
        }
    });
    // As bundles were before they held events.jsonl.
    let older = dir.join("older.tar.gz");
    rewrite(&good[2], &older, |rel, data| {
        if rel == "MANIFEST.json" {
            let mut m: serde_json::Value = serde_json::from_slice(data).unwrap();
            m["regions"][0]["files"]
                .as_object_mut()
                .unwrap()
                .remove("events");
            *data = serde_json::to_vec(&m).unwrap();
        }
    });
    // A second copy of a crash's bundle, as a retried upload leaves.
    let copy = dir.join("zz-copy.tar.gz");
    std::fs::copy(&good[3], &copy).unwrap();
    // Another, named to drive the terminal that shows what export says.
    let loud = dir.join("zz-loud\u{1b}[2J.tar.gz");
    std::fs::copy(&good[3], &loud).unwrap();
    std::fs::remove_file(&good[1]).unwrap();
    std::fs::remove_file(&good[2]).unwrap();

    let dataset = tmp("export-hostile-parquet");
    let args = [
        "export",
        "--parquet",
        dataset.to_str().unwrap(),
        dir.to_str().unwrap(),
    ];
    let out = crashring(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let name = |p: &Path| p.display().to_string();
    for (what, why) in [
        (name(&cut), "left out: not intact"),
        (
            format!(
                "{}: kernel/events.jsonl line {}",
                name(&hostile),
                per_bundle + 1
            ),
            "key must be a string",
        ),
        (
            format!(
                "{}: kernel/events.jsonl line {}",
                name(&hostile),
                per_bundle + 2
            ),
            "over 1048576 bytes",
        ),
        (
            format!(
                "{}: kernel/events.jsonl line {}",
                name(&hostile),
                per_bundle + 3
            ),
            "neither event nor loss",
        ),
        (name(&older), "made before bundles held events.jsonl"),
        (
            name(&copy),
            &format!("the same crash as {}, exported once", name(&good[3])),
        ),
        (
            name(&dir.join("zz-loud\\x1b[2J.tar.gz")),
            "the same crash as",
        ),
    ] {
        assert!(
            stderr.lines().any(|l| l.contains(&what) && l.contains(why)),
            "{what}: {why} not in {stderr}"
        );
    }
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    // The cut bundle's crash is the first's, which is exported; so are
    // the hostile one's good lines and the older one's crash.
    assert_eq!(rows_in(&dataset, "crashes"), 4, "{stderr}");
    assert_eq!(rows_in(&dataset, "events"), 3 * per_bundle, "{stderr}");

    // Exporting the same bundles again replaces their parts: no row
    // twice, no staging file left.
    let before: BTreeSet<PathBuf> = walk(&dataset);
    let again = crashring(&args);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(walk(&dataset), before);
    assert_eq!(rows_in(&dataset, "events"), 3 * per_bundle);
}

fn walk(dir: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            found.extend(walk(&p));
        } else {
            found.insert(p);
        }
    }
    found
}

/// Parses each envelope with Sentry's SDK and normalizes its event with
/// Relay's, printing what the test checks as one JSON line per envelope.
const SENTRY_CHECK: &str = r#"
import sys, json, hashlib
from sentry_sdk.envelope import Envelope
from sentry_relay import StoreNormalizer
for path in sys.argv[1:]:
    envelope = Envelope.deserialize(open(path, "rb").read())
    events = [i for i in envelope.items if i.type == "event"]
    event = StoreNormalizer().normalize_event(events[0].payload.json)
    exception = event["exception"]["values"][0]
    crumbs = event["breadcrumbs"]["values"]
    print(json.dumps({
        "header_id": envelope.headers.get("event_id"),
        "items": [i.type for i in envelope.items],
        "errors": event.get("errors"),
        "meta": event.get("_meta"),
        "event_id": event["event_id"],
        "level": event["level"],
        "release": event.get("release"),
        "fingerprint": event["fingerprint"],
        "tags": dict(event["tags"]),
        "exception": [exception["type"], exception["value"]],
        "frames": [f["function"] for f in exception["stacktrace"]["frames"]],
        "breadcrumbs": [[c["category"], c["message"], c["level"]] for c in crumbs],
        "attachments": {i.headers["filename"]: hashlib.sha256(i.payload.get_bytes()).hexdigest()
                        for i in envelope.items if i.type == "attachment"},
    }))
"#;

fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn sentry_envelopes_parse_normalize_and_group_by_signature() {
    // Two crashes of one cause on different hosts and boots, one of
    // another.
    let cause_of = |i: u64| Crash::new(i).cause;
    let a = 5;
    let b = (a + 1..)
        .find(|&i| cause_of(i) == cause_of(a) && i % HOSTS != a % HOSTS)
        .unwrap();
    let c = (a + 1..).find(|&i| cause_of(i) != cause_of(a)).unwrap();
    let fleet: Vec<Crash> = [a, b, c].into_iter().map(Crash::new).collect();
    let dir = bundle_all(&fleet, "sentry-bundles");
    let out = tmp("sentry-envelopes");
    let args = [
        "export",
        "--sentry-envelope",
        out.to_str().unwrap(),
        "--attach-bundle",
        dir.to_str().unwrap(),
    ];
    let run = crashring(&args);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("exported 3 bundles") && stdout.contains("3 envelopes"),
        "{stdout}"
    );
    let envelopes: Vec<PathBuf> = walk(&out).into_iter().collect();
    assert_eq!(envelopes.len(), 3, "{envelopes:?}");
    let first: Vec<Vec<u8>> = envelopes
        .iter()
        .map(|e| std::fs::read(e).unwrap())
        .collect();

    let paths: Vec<&str> = envelopes.iter().map(|p| p.to_str().unwrap()).collect();
    let Some(checked) = python(SENTRY_CHECK, &paths) else {
        return;
    };
    let mut fingerprints = BTreeMap::new();
    for (path, e) in envelopes.iter().zip(&checked) {
        // An envelope is named by its bundle's top directory, which
        // names the host and the boot (its id's first 8 hex digits).
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let crash = fleet
            .iter()
            .find(|c| {
                name.contains(&format!("{}-", c.host)) && name.contains(&c.boot_id_hex()[..8])
            })
            .unwrap();
        assert_eq!(e["errors"], serde_json::Value::Null, "{e}");
        assert_eq!(e["meta"], serde_json::Value::Null, "{e}");
        assert_eq!(
            e["items"],
            serde_json::json!(["event", "attachment", "attachment"])
        );
        assert_eq!(e["header_id"], e["event_id"]);
        assert_eq!(e["level"], "fatal");
        assert_eq!(e["release"], crash.kernel);
        assert_eq!(e["tags"]["server_name"], crash.host.as_str());
        assert_eq!(e["tags"]["kernel_release"], crash.kernel);
        assert_eq!(e["tags"]["crashring.signature"], e["fingerprint"][1]);
        assert_eq!(e["exception"][0], "kernel oops");
        let module = format!("kiosk{}", crash.cause);
        assert_eq!(
            e["frames"],
            serde_json::json!([
                "process_one_work",
                format!("{module}_queue_frame"),
                format!("{module}_submit"),
                format!("{module}_work"),
            ])
        );
        // Every event up to the crash (fewer than 100), in order, the
        // crash event last.
        let crumbs = e["breadcrumbs"].as_array().unwrap();
        assert_eq!(crumbs.len(), crash.events.len());
        assert_eq!(
            crumbs.last().unwrap(),
            &serde_json::json!([format!("cpu{}.crash", crash.cpu), PANIC, "info"])
        );
        let (_, cpu, text) = &crash.events[0];
        assert_eq!(
            crumbs[0],
            serde_json::json!([format!("cpu{cpu}.printk"), text, "warning"])
        );
        // The attachments are the bundle's dmesg.txt and the bundle.
        let bundle = dir.join(format!("{:04}.tar.gz", crash.i));
        let (_, files) = common::bundles::bundled(&bundle);
        assert_eq!(
            e["attachments"]["dmesg.txt"],
            sha256_hex(&files["dmesg.txt"].data)
        );
        assert_eq!(
            e["attachments"][format!("{:04}.tar.gz", crash.i)],
            sha256_hex(&std::fs::read(&bundle).unwrap())
        );
        fingerprints.insert(crash.i, e["fingerprint"].clone());
    }
    assert_eq!(fingerprints[&a], fingerprints[&b], "{fingerprints:?}");
    assert_ne!(fingerprints[&a], fingerprints[&c], "{fingerprints:?}");

    // Exported again, byte for byte the same: one event to Sentry.
    assert_eq!(crashring(&args).status.code(), Some(0));
    let again: Vec<Vec<u8>> = envelopes
        .iter()
        .map(|e| std::fs::read(e).unwrap())
        .collect();
    assert!(again == first);
}
