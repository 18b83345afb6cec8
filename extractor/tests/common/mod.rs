//! Shared by the integration tests: region images made by the format
//! crate's writer, dump containers built to their documented layouts, and
//! a way to run the real binary.

#![allow(dead_code)] // Each test binary uses its own part.

pub mod bert_region;
pub mod bundles;
pub mod containers;
pub mod ftrace_area;
pub mod printk_ring;
pub mod ramoops_area;
pub mod synth;

use std::path::PathBuf;
use std::process::{Command, Output};
pub use synth::image_sized;

pub fn crashring(args: &[&str]) -> Output {
    crashring_with(args, &[])
}

/// [`crashring`] with `env` set.
pub fn crashring_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A region of two CPUs behind `offset` bytes of other memory; `wrap`
/// writes enough to overwrite pages.
pub fn image(offset: usize, wrap: bool) -> Vec<u8> {
    image_sized(offset, 512, 16 * 1024, if wrap { 400 } else { 10 })
}

pub fn write_tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// What [`rich_image`] holds, for checking outputs against.
pub const RICH_CUSTOM_TYPE: u8 = 40;

/// A region that exercises every output format: two CPU streams (printk
/// lines and IRQ entries) and a user stream ("weston"), a custom event type with every field kind (one
/// field named like a keyword), enough events to overwrite pages, one
/// corrupt page in the middle of CPU 1 (unreadable loss, a gap in page
/// sequence numbers), and one page of CPU 0 whose events go back in time
/// (a re-checksummed `first_ts`, as a buggy clock would leave it).
pub fn rich_image() -> Vec<u8> {
    use pstore_ring::layout::{crc32, REASON_PANIC, STATE_CRASHED, STREAM_USER};
    use pstore_ring::read::{HeaderTrust, Region};
    use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let specs = [
        StreamSpec::cpu(0),
        StreamSpec::cpu(1),
        StreamSpec {
            kind: STREAM_USER,
            cpu: u16::MAX,
            lane: 0,
            name: "weston",
            pid: 412,
            uid: 1000,
        },
    ];
    let f = |name, kind| FieldDef { name, kind };
    let fields = [
        f("crtc", FieldKind::U32),
        f("seq", FieldKind::U64),
        f("delta", FieldKind::I32),
        f("fb", FieldKind::Ptr),
        f("comm", FieldKind::Chars(16)),
        f("msg", FieldKind::Str),
        f("blob", FieldKind::Bytes),
        f("string", FieldKind::U8),
    ];
    let custom = [EventDef {
        id: RICH_CUSTOM_TYPE,
        name: "drm_flip",
        fields: &fields,
    }];
    let cfg = RegionConfig {
        page_size: 512,
        pages_per_stream: Some(6),
        streams: &specs,
        custom_events: &custom,
        boot_id: *b"0123456789abcdef",
        generation: 3,
        created_ns: 1_000,
        wall_offset_ns: 1_795_000_000_123_456_789,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "signage-7",
        producer: "crashring.ko",
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let crash = schema::builtin(schema::EVENT_CRASH).unwrap();
    let irq = schema::builtin(schema::EVENT_IRQ_ENTRY).unwrap();
    let region = write::format(&mut mem, &cfg);
    let mut region = region.unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let flip = &custom[0];
    for i in 0..240u64 {
        let ts = 2_000 + i * 1_000;
        // Some lines name an input device and a kernel address, for the
        // bundle's redaction.
        let text = if i % 10 == 7 {
            format!("input: keyboard {i} at ffffffff8123{i:04x}")
        } else {
            format!("message {i}")
        };
        match i % 3 {
            0 | 1 => {
                let v = synth::printk_line(i % 2 + 1, i, text.as_bytes());
                ws[(i % 2) as usize].write_event(ts, printk, &v).unwrap();
            }
            _ if i % 6 == 5 => {
                let v = [Value::Unsigned(11), Value::Str(b"timer")];
                ws[(i % 4 / 2) as usize].write_event(ts, irq, &v).unwrap();
            }
            _ => {
                let v = [
                    Value::Unsigned(51),
                    Value::Unsigned(i),
                    Value::Signed(-(i as i64)),
                    Value::Ptr(0xffff_8880_0000_0000 + i),
                    Value::Chars(b"weston"),
                    Value::Str(b"flip \"done\"\n"),
                    Value::Bytes(&[0xde, 0xad, i as u8]),
                    Value::Unsigned(7),
                ];
                ws[2].write_event(ts, flip, &v).unwrap();
            }
        }
    }
    let msg = b"Kernel panic - not syncing: test";
    ws[1]
        .write_event(
            300_000,
            crash,
            &[Value::Unsigned(1), Value::Unsigned(1), Value::Str(msg)],
        )
        .unwrap();
    region.control.set_state(
        STATE_CRASHED,
        REASON_PANIC,
        300_000,
        1,
        "Kernel panic - not syncing: test",
    );
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);

    // Damage chosen by page sequence, so it lands in the middle.
    let parsed = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = parsed.decode();
    let middle = |s: usize| {
        let mut pages: Vec<_> = trace.streams[s].decoded_pages();
        pages.sort_by_key(|p| p.seq);
        pages[pages.len() / 2].offset as usize
    };
    let (corrupt, backwards) = (middle(1), middle(0));
    mem[corrupt + 60] ^= 0x10;
    mem[backwards + 16..backwards + 24].copy_from_slice(&500u64.to_le_bytes());
    let commit = u32::from_le_bytes(mem[backwards + 32..backwards + 36].try_into().unwrap());
    let crc = crc32(&[
        &mem[backwards..backwards + 44],
        &mem[backwards + 48..backwards + 48 + commit as usize],
    ]);
    mem[backwards + 44..backwards + 48].copy_from_slice(&crc.to_le_bytes());
    mem
}

/// CPUs and nesting lanes of [`lanes_image`], and its pool's size.
pub const LANES_CPUS: u16 = 2;
pub const LANES_PER_CPU: u8 = 5;
pub const LANES_POOL: usize = 2;

/// A region laid out as the kernel module lays one out by default:
/// [`LANES_CPUS`] CPUs of [`LANES_PER_CPU`] nesting lanes each, then a
/// pool of [`LANES_POOL`] free user streams (no name, pid 0). Only lane
/// 0 of each CPU holds events, as on a machine whose writes never
/// nested: the streams a newcomer should not have to read past.
pub fn lanes_image() -> Vec<u8> {
    use pstore_ring::layout::STREAM_USER;
    use pstore_ring::schema;
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let free = StreamSpec {
        kind: STREAM_USER,
        cpu: u16::MAX,
        lane: 0,
        name: "",
        pid: 0,
        uid: 0,
    };
    let mut specs: Vec<StreamSpec> = (0..LANES_CPUS)
        .flat_map(|c| (0..LANES_PER_CPU).map(move |l| StreamSpec::nested(c, l)))
        .collect();
    specs.extend([free; LANES_POOL]);
    let cfg = RegionConfig {
        page_size: 512,
        pages_per_stream: Some(4),
        user_pages: Some(2),
        streams: &specs,
        boot_id: *b"lanes-and-a-pool",
        created_ns: 1_000,
        kernel_release: "6.12.0-lanes",
        hostname: "newcomer",
        producer: "crashring.ko",
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    for i in 0..20u64 {
        let text = format!("line {i}");
        let v = synth::printk_line(1, i, text.as_bytes());
        // Lane 0 of CPU i % 2: streams 0 and LANES_PER_CPU.
        let s = (i % 2) as usize * usize::from(LANES_PER_CPU);
        ws[s].write_event(2_000 + i * 1_000, printk, &v).unwrap();
    }
    ws.iter_mut().for_each(|w| w.close());
    drop(ws);
    mem
}

/// Runs a reader; fails the test with its standard error unless it
/// succeeds.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Set to 1 by `cargo xtask test`, which installs the readers first: a
/// test whose reader is missing then fails instead of skipping.
pub const REQUIRE_READERS: &str = "CRASHRING_REQUIRE_READERS";

/// A reader the tests drive, or `None` when it is not on `PATH` (see
/// [`skip_without`]).
pub fn reader(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        skip_without(name);
    }
    found
}

/// For a test about to return early because `what` (a reader, or a file
/// `cargo xtask setup` makes for one) is missing: fails it when readers
/// are required ([`REQUIRE_READERS`], or `CI=true`), as a missing reader
/// there means the setup is broken, not that the test passed.
pub fn skip_without(what: &str) {
    let required = std::env::var(REQUIRE_READERS).as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true");
    assert!(
        !required,
        "{what} is missing, and {REQUIRE_READERS}=1 (or CI=true) requires it: `cargo xtask setup` installs it"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    // Written to the process's standard error, not through eprintln!,
    // which libtest swallows for a passing test: a silent skip would read
    // as a pass.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\nSKIPPED {test}: {what} is missing (`cargo xtask setup` installs it)"
    );
}

/// What `crashring extract --format jsonl` finds in `image`: event items,
/// loss items, and the events those losses count.
pub fn jsonl_totals(image: &std::path::Path) -> (usize, usize, u64) {
    let out = crashring(&["extract", image.to_str().unwrap(), "--format", "jsonl"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let events = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"event\""))
        .count();
    let losses: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"loss\""))
        .map(|l| {
            let at = l.find("\"events\":").unwrap() + 9;
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    (events, losses.len(), losses.iter().sum())
}

/// Runs `crashring extract IMAGE --format FORMAT -o TMP/NAME`, removing
/// what an earlier run left there.
pub fn extract_to(image: &std::path::Path, format: &str, name: &str) -> (Output, PathBuf) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&path);
    let _ = std::fs::remove_file(&path);
    let out = crashring(&[
        "extract",
        image.to_str().unwrap(),
        "--format",
        format,
        "-o",
        path.to_str().unwrap(),
    ]);
    (out, path)
}

/// Set in a fresh copy of a test binary started only to measure one run
/// of crashring (see [`crashring_peak_rss`]); holds its arguments.
const RSS_PROBE: &str = "CRASHRING_TEST_RSS_OF";
/// Where the probe puts crashring's standard output and error.
const RSS_PROBE_OUT: &str = "CRASHRING_TEST_RSS_OUT";

/// Runs crashring with `args` and returns what it printed and its peak
/// resident memory in KiB.
///
/// A child's peak RSS (`ru_maxrss`) includes its parent's peak at the
/// moment of the spawn (Linux records the old memory's high-water mark at
/// `exec`), and a test binary running other tests can be large. So a
/// fresh, small copy of this test binary runs crashring instead: the test
/// binary must have `#[test] fn rss_probe() { common::rss_probe() }`,
/// which does nothing unless started this way.
pub fn crashring_peak_rss(args: &[&str]) -> (Output, u64) {
    crashring_peak_rss_with(args, &[])
}

/// [`crashring_peak_rss`] with `env` set for crashring.
pub fn crashring_peak_rss_with(args: &[&str], env: &[(&str, &str)]) -> (Output, u64) {
    use std::os::unix::process::ExitStatusExt;
    let exe = std::env::current_exe().unwrap();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "rss-probe-{}-{}",
        std::process::id(),
        args.join("_").replace('/', "_")
    ));
    let probe = Command::new(exe)
        .args(["--exact", "rss_probe", "--nocapture", "--test-threads=1"])
        .env(RSS_PROBE, args.join("\u{1f}"))
        .env(RSS_PROBE_OUT, &out)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&probe.stdout);
    let Some((status, kib)) = said.lines().find_map(|l| {
        // libtest may print the test's name on the same line first.
        let mut w = l.split_once("rss-probe: ")?.1.split(' ');
        Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
    }) else {
        panic!("the RSS probe said {probe:?}");
    };
    let read = |ext: &str| std::fs::read(out.with_extension(ext)).unwrap();
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: read("out"),
        stderr: read("err"),
    };
    (output, kib)
}

/// The probe's body: runs crashring as [`crashring_peak_rss`] asked and
/// prints its wait status and peak RSS in KiB.
// The child is reaped by wait4, which also returns its resource usage.
#[allow(clippy::zombie_processes)]
pub fn rss_probe() {
    let (Some(args), Some(out)) = (std::env::var_os(RSS_PROBE), std::env::var_os(RSS_PROBE_OUT))
    else {
        return;
    };
    let out = PathBuf::from(out);
    let args = args.into_string().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args(args.split('\u{1f}'))
        .stdout(std::fs::File::create(out.with_extension("out")).unwrap())
        .stderr(std::fs::File::create(out.with_extension("err")).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: plain FFI calls with valid pointers; waits for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    println!("rss-probe: {status} {}", usage.ru_maxrss);
}

/// What [`hostile_image`]'s kernel streams hold, for checking outputs.
pub mod hostile {
    /// The header's wall-clock offset, and the one the kernel's own
    /// `clock` event steps to at [`KERNEL_STEP_NS`].
    pub const WALL_OFFSET_NS: i64 = 1_795_000_000_000_000_000;
    pub const KERNEL_STEP_NS: u64 = 5_000;
    pub const KERNEL_STEP_OFFSET_NS: i64 = WALL_OFFSET_NS + 1_000_000_000;
    /// The crash, by the state block and CPU 1's `crash` event.
    pub const CRASH_NS: u64 = 20_000;
    pub const CRASH_MESSAGE: &str = "Kernel panic - not syncing: real";
    /// The kernel's newest event.
    pub const KERNEL_LAST_NS: u64 = CRASH_NS;
    /// The offset a user stream's `clock` event claims: in 2100.
    pub const USER_OFFSET_NS: i64 = 4_102_444_800_000_000_000;
    /// The name of the user stream that claims that clock, huge losses
    /// and a time of 2^63 ns, and records kernel-only event types.
    pub const FORGER: &str = "cpu0";
    /// The forger's kernel-looking lines.
    pub const FORGED_PANIC: &str = "Kernel panic - not syncing: forged";
    pub const FORGED_LINES: &[u8] =
        b"ok\r\n[001]       0.000030000: printk: level=0 text=\"forged\"\n\x1b[2J\x07\xc2\x9b\x7f";
    /// A user stream named like CPU 0's text bracket, and one named with
    /// control bytes.
    pub const BRACKET: &str = "000";
    pub const CONTROL_NAME: &str = "e\x1b[31m\r\n[000] x";
}

/// A region the kernel wrote (two CPUs, printk lines, a `clock` step,
/// a crash) whose pool holds user streams written by a hostile member of
/// the `crashring` group ([`hostile`]): one named `cpu0` that records a
/// `clock` step to 2100, a printk panic line, a `crash` event, text with
/// line breaks and terminal controls, an event at 2^63 ns, and an open
/// page whose `first_index` claims 2^64 − 101 events before it; one named
/// `000`; one named with control bytes.
pub fn hostile_image() -> Vec<u8> {
    use hostile::*;
    use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED, STREAM_USER};
    use pstore_ring::read::{HeaderTrust, Region};
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    use pstore_ring::Endian;
    let user = |name, pid| StreamSpec {
        kind: STREAM_USER,
        cpu: u16::MAX,
        lane: 0,
        name,
        pid,
        uid: 1001,
    };
    let specs = [
        StreamSpec::cpu(0),
        StreamSpec::cpu(1),
        user(FORGER, 666),
        user(BRACKET, 667),
        user(CONTROL_NAME, 668),
    ];
    let cfg = RegionConfig {
        endian: Endian::Little,
        page_size: 1024,
        pages_per_stream: Some(4),
        streams: &specs,
        boot_id: *b"hostile-user-010",
        generation: 2,
        created_ns: 1_000,
        wall_offset_ns: WALL_OFFSET_NS,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "kiosk",
        producer: "crashring.ko",
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    let def = |id| schema::builtin(id).unwrap();
    let (printk, marker, crash, clock) = (
        def(schema::EVENT_PRINTK),
        def(schema::EVENT_MARKER),
        def(schema::EVENT_CRASH),
        def(schema::EVENT_CLOCK),
    );
    let line = |seq, text: &'static [u8]| synth::printk_line(1, seq, text);
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    ws[0]
        .write_event(2_000, printk, &line(1, b"hello from cpu0"))
        .unwrap();
    ws[0]
        .write_event(
            KERNEL_STEP_NS,
            clock,
            &[Value::Signed(KERNEL_STEP_OFFSET_NS)],
        )
        .unwrap();
    ws[0]
        .write_event(10_000, printk, &line(2, b"kernel line 2"))
        .unwrap();
    let msg = CRASH_MESSAGE.as_bytes();
    let reason = Value::Unsigned(REASON_PANIC.into());
    ws[1]
        .write_event(
            CRASH_NS,
            crash,
            &[reason, Value::Unsigned(1), Value::Str(msg)],
        )
        .unwrap();
    region
        .control
        .set_state(STATE_CRASHED, REASON_PANIC, CRASH_NS, 1, CRASH_MESSAGE);
    ws[2]
        .write_event(3_000, clock, &[Value::Signed(USER_OFFSET_NS)])
        .unwrap();
    ws[2]
        .write_event(4_000, printk, &line(3, FORGED_PANIC.as_bytes()))
        .unwrap();
    ws[2]
        .write_event(6_000, printk, &line(4, FORGED_LINES))
        .unwrap();
    let forged = [
        Value::Unsigned(REASON_PANIC.into()),
        Value::Unsigned(0),
        Value::Str(FORGED_PANIC.as_bytes()),
    ];
    ws[2].write_event(7_000, crash, &forged).unwrap();
    let mark = [
        Value::Unsigned(666),
        Value::Chars(b"forger"),
        Value::Str(FORGED_LINES),
    ];
    ws[2].write_event(8_000, marker, &mark).unwrap();
    ws[2].write_event(1 << 63, marker, &mark).unwrap();
    ws[3]
        .write_event(9_000, printk, &line(5, b"pretending to be cpu 0"))
        .unwrap();
    let hi = [Value::Unsigned(668), Value::Chars(b"e"), Value::Str(b"hi")];
    ws[4].write_event(9_500, marker, &hi).unwrap();
    // The kernel's streams end cleanly; the process's page stays open,
    // as the kernel never closes a stream it handed out.
    ws[0].close();
    ws[1].close();
    drop(ws);
    // An open page has no CRC: its writer may claim any first index.
    let parsed = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let page = parsed.decode().streams[2].decoded_pages()[0].offset as usize;
    mem[page + 24..page + 32].copy_from_slice(&(u64::MAX - 100).to_le_bytes());
    mem
}

/// A 64 KiB region of one CPU stream with 4 KiB pages, written by
/// `write` (which closes the stream or leaves it open).
pub fn one_cpu_region(write: impl FnOnce(&mut pstore_ring::write::StreamWriter)) -> Vec<u8> {
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let specs = [StreamSpec::cpu(0)];
    let cfg = RegionConfig {
        page_size: 4096,
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0u8; 64 * 1024];
    {
        let mut f = write::format(&mut mem, &cfg).unwrap();
        let mut w = f.streams.next().unwrap();
        write(&mut w);
    }
    mem
}

/// A region of one CPU stream holding a marker ("gap N") at each of
/// `times`, in that order.
pub fn markers_image(times: &[u64]) -> Vec<u8> {
    use pstore_ring::schema::{self, Value};
    let marker = schema::builtin(schema::EVENT_MARKER).unwrap();
    one_cpu_region(|w| {
        for (i, t) in times.iter().enumerate() {
            let text = format!("gap {i}");
            let v = [
                Value::Unsigned(1),
                Value::Chars(b"init"),
                Value::Str(text.as_bytes()),
            ];
            w.write_event(*t, marker, &v).unwrap();
        }
        w.close();
    })
}

/// 1200 markers a microsecond apart, cut after the stream's tenth page:
/// its last two pages (181 events) are lost after every event read; and
/// the same with its tails damaged too, so that how far the stream went
/// is unknown (every page past the cut may have held events).
pub fn end_loss_images() -> (Vec<u8>, Vec<u8>) {
    let times: Vec<u64> = (0..1200).map(|i| 1_000 + i * 1_000).collect();
    let mem = markers_image(&times);
    let tails = u32::from_le_bytes(mem[100..104].try_into().unwrap()) as usize;
    let mut blind = mem.clone();
    for b in &mut blind[tails..tails + 64] {
        *b ^= 0xff;
    }
    (mem[..40 * 1024].to_vec(), blind[..40 * 1024].to_vec())
}
