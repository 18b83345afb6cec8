//! Each file writer on the dense region, its output read back and
//! counted, against babeltrace2 converting the same CTF.

use crate::{median, per_sec, view, Counts, RUNS};
use extractor::output::select::Selection;
use extractor::output::{write_items, Format, RegionView, Writer};
use pstore_ring::read::{HeaderTrust, Region};
use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Median time of parsing and decoding `region` and writing it with
/// `write` to a file at `path` (which the CTF writer, making its own
/// files, leaves empty).
pub(crate) fn time_writer(
    region: &[u8],
    path: &Path,
    mut write: impl FnMut(&RegionView, &mut BufWriter<File>),
) -> Duration {
    median(RUNS, || {
        let start = Instant::now();
        let region = Region::parse(black_box(region), HeaderTrust::Checksummed)
            .expect("bench region parses");
        let trace = extractor::recover::decode(&region, &|_| {});
        let file = File::create(path).expect("creating the output");
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&view(&region, &trace), &mut out);
        out.flush().expect("writing the output");
        start.elapsed()
    })
}

/// Runs `cmd` with its standard output piped to `count`, which reads it
/// line by line; fails unless the command succeeds.
pub(crate) fn run_counting(cmd: &mut Command, count: impl Fn(&str) -> bool) -> u64 {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (`cargo xtask setup` installs it)"));
    let out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped"));
    // Lines are counted as bytes: readers print field text as it is.
    let n = out
        .split(b'\n')
        .map(|l| l.expect("reading the reader's output"))
        .filter(|l| count(&String::from_utf8_lossy(l)))
        .count();
    let status = child.wait().expect("waiting for the reader");
    assert!(status.success(), "{cmd:?} failed: {status}");
    n as u64
}

/// Events babeltrace2 reads from the CTF trace(s) under `dir`: its text
/// output has one line per event (losses go to standard error).
pub(crate) fn babeltrace2_events(dir: &Path) -> u64 {
    run_counting(Command::new("babeltrace2").arg(dir), |_| true)
}

/// The fields of a protobuf message: (number, payload) for length-delimited
/// ones, (number, empty) for the rest; walked to the last byte, so a cut or
/// malformed message fails.
pub(crate) fn proto_fields(b: &[u8]) -> Vec<(u64, &[u8])> {
    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return v;
            }
        }
        panic!("a varint over 10 bytes before {at}");
    }
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let tag = varint(b, &mut at);
        let len = match tag & 7 {
            0 => {
                varint(b, &mut at);
                0
            }
            1 => 8,
            2 => varint(b, &mut at) as usize,
            5 => 4,
            t => panic!("wire type {t} at {at}"),
        };
        let body = &b[at..at + len];
        at += len;
        out.push((tag >> 3, if tag & 7 == 2 { body } else { &[][..] }));
    }
    out
}

/// Items in our Perfetto trace: a `TrackEvent` packet each (printk lines,
/// markers, crashes, losses, user events) plus every event of the
/// `ftrace_events` bundles; track descriptors are not items.
pub(crate) fn perfetto_items(bytes: &[u8]) -> u64 {
    const PACKET: u64 = 1;
    const FTRACE_EVENTS: u64 = 1;
    const BUNDLE_EVENT: u64 = 2;
    const TRACK_EVENT: u64 = 11;
    let mut items = 0;
    for (n, packet) in proto_fields(bytes) {
        assert_eq!(n, PACKET, "a Trace field other than packet");
        for (n, body) in proto_fields(packet) {
            match n {
                TRACK_EVENT => items += 1,
                FTRACE_EVENTS => {
                    let events = proto_fields(body)
                        .iter()
                        .filter(|f| f.0 == BUNDLE_EVENT)
                        .count();
                    items += events as u64;
                }
                _ => {}
            }
        }
    }
    items
}

/// Items in a Chrome trace JSON file as our writer lays it out (`[`, one
/// object per line, each ending in a comma, `{}`, `]`): every line must be
/// JSON; metadata (`"ph":"M"`) and the closing `{}` are not items.
pub(crate) fn chrome_items(path: &Path) -> u64 {
    let f = BufReader::with_capacity(1 << 20, File::open(path).expect("opening the output"));
    let mut lines = f.lines().map(|l| l.expect("reading the output"));
    assert_eq!(lines.next().as_deref(), Some("["));
    let mut items = 0;
    let mut last = String::new();
    for line in lines {
        if line == "]" {
            assert_eq!(last, "{}", "the array's closing object");
            return items;
        }
        let obj: serde_json::Value = serde_json::from_str(line.trim_end_matches(','))
            .unwrap_or_else(|e| panic!("{e}: {line}"));
        if obj.get("ph").is_some_and(|ph| ph != "M") {
            items += 1;
        }
        last = line;
    }
    panic!("the JSON array is not closed");
}

/// Event lines of `trace-cmd report`: `comm-pid [cpu] secs.usecs: name: ...`.
pub(crate) fn tracedat_events(path: &Path) -> u64 {
    run_counting(Command::new("trace-cmd").arg("report").arg(path), |l| {
        l.split_once("] ").is_some_and(|(_, rest)| {
            rest.trim_start().split_once(": ").is_some_and(|(ts, _)| {
                ts.contains('.') && ts.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            })
        })
    })
}

/// Median time of `cmd` (babeltrace2), which must succeed.
pub(crate) fn time_command(mut cmd: impl FnMut() -> Command) -> Duration {
    median(3, || {
        let mut cmd = cmd();
        let start = Instant::now();
        let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
        let took = start.elapsed();
        assert!(
            status.as_ref().is_ok_and(|s| s.success()),
            "{cmd:?}: {status:?} (`cargo xtask setup` installs babeltrace2)"
        );
        took
    })
}

/// Each file writer on the dense region (parse, decode and write to the
/// scratch directory), each output then read back and counted; against
/// babeltrace2 on our CTF trace, converting it to CTF (the same output
/// format: reading CTF instead of decoding a region) and to text.
pub(crate) fn writers_bench(dir: &Path, region: &[u8], counts: Counts) {
    let Counts { events, items } = counts;
    println!("\nwriters: the dense region, {events} events, written to files");
    let out = dir.join("bench-ctf");
    let file = dir.join("bench-trace");
    let all = Selection::default();
    let d = time_writer(region, &file, |view, _| {
        let _ = std::fs::remove_dir_all(&out);
        let wall = view.region.wall_clock_of_pages(view.trace);
        extractor::output::ctf::write(&out, view, &all, "bench", &wall).expect("writing CTF");
    });
    assert_eq!(
        babeltrace2_events(&out),
        events,
        "events babeltrace2 reads from our CTF"
    );
    let ctf = per_sec(events, d);
    println!("  parse + decode + CTF: {:.1} M events/s", ctf / 1e6);
    for format in [Format::Perfetto, Format::Chrome] {
        let d = time_writer(region, &file, |view, out| {
            let Writer::Items(writer) = format.writer() else {
                unreachable!("Perfetto and Chrome are written item by item")
            };
            writer.begin(out, view, false).expect("writing");
            write_items(out, view, &all, writer).expect("writing the trace");
            writer.end(out).expect("writing");
        });
        if format == Format::Perfetto {
            let mut bytes = Vec::new();
            File::open(&file)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .expect("reading the output");
            assert_eq!(perfetto_items(&bytes), items, "Perfetto items");
        } else {
            assert_eq!(chrome_items(&file), items, "Chrome trace items");
        }
        println!(
            "  parse + decode + {format:?}: {:.1} M events/s",
            per_sec(events, d) / 1e6
        );
    }
    let d = time_writer(region, &file, |view, out| {
        extractor::output::tracedat::write(out, view, &all).expect("writing the trace.dat");
    });
    assert_eq!(tracedat_events(&file), events, "events trace-cmd reports");
    println!(
        "  parse + decode + trace.dat: {:.1} M events/s",
        per_sec(events, d) / 1e6
    );
    let _ = std::fs::remove_file(&file);

    let copy = dir.join("bench-ctf-copy");
    let bt_ctf = time_command(|| {
        let _ = std::fs::remove_dir_all(&copy);
        let mut cmd = Command::new("babeltrace2");
        cmd.arg("convert")
            .arg(&out)
            .arg("--component=sink.ctf.fs")
            .arg(format!("--params=path=\"{}\"", copy.display()));
        cmd
    });
    assert_eq!(
        babeltrace2_events(&copy),
        events,
        "events in babeltrace2's CTF copy"
    );
    let _ = std::fs::remove_dir_all(&copy);
    let bt_ctf = per_sec(events, bt_ctf);
    let bt_text = time_command(|| {
        let mut cmd = Command::new("babeltrace2");
        cmd.arg(&out);
        cmd
    });
    let bt_text = per_sec(events, bt_text);
    println!(
        "  baseline, babeltrace2 CTF to CTF: {:.2} M events/s; our region to CTF is {:.1}x as fast",
        bt_ctf / 1e6,
        ctf / bt_ctf
    );
    println!(
        "  baseline, babeltrace2 CTF to text: {:.2} M events/s (its reading speed on our output); \
         our region to CTF is {:.1}x as fast",
        bt_text / 1e6,
        ctf / bt_text
    );
    let _ = std::fs::remove_dir_all(&out);
}
