//! Placing and redacting added logs: each kind of line on the trace's
//! clock, hostile lines counted, and the redaction of kernel messages.

use super::*;

fn clock() -> Clock<'static> {
    let mut printk = HashMap::new();
    printk.insert(&b"sysrq: Trigger a crash"[..], Some(5_000_000_500));
    printk.insert(&b"twice"[..], None);
    Clock {
        boot_id: "00112233445566778899aabbccddeeff".into(),
        wall: WallClock::fixed(1_000_000_000_000),
        printk,
    }
}

#[test]
fn a_log_past_its_placed_lines_holds_nothing_more_in_memory() {
    let line = "[    5.000000] sysrq: Trigger a crash\n";
    let log = line.repeat(MAX_PLACED + 10);
    let placed = clock().place("x", log.as_bytes()).unwrap();
    assert_eq!(placed.placed.len(), MAX_PLACED);
    assert_eq!(placed.placement.unplaced, 10);
    assert_eq!(placed.placement.matched, MAX_PLACED as u64);
}

#[test]
fn each_kind_of_line_is_placed_on_the_trace_clock() {
    let log = "\
{\"T\":[3,250],\"N\":\"core_repaint_begin\",\"wo\":1}
{\"MESSAGE\":\"hello\",\"SYSLOG_IDENTIFIER\":\"weston\",\"_BOOT_ID\":\"00112233445566778899aabbccddeeff\",\"__MONOTONIC_TIMESTAMP\":\"4000001\",\"__REALTIME_TIMESTAMP\":\"9\"}
{\"MESSAGE\":[104,105],\"_BOOT_ID\":\"ffff\",\"__MONOTONIC_TIMESTAMP\":\"1\",\"__REALTIME_TIMESTAMP\":\"1002000000\"}
[    5.000000] sysrq: Trigger a crash
<6>[    6.5] later
no time here
";
    let placed = clock().place("x", log.as_bytes()).unwrap();
    assert_eq!(placed.lines, 6);
    let p = placed.placement;
    assert_eq!(
        (
            p.timeline,
            p.journal_monotonic,
            p.journal_realtime,
            p.bracketed
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(
        (p.matched, p.offset_ns, p.spread_ns, p.unplaced),
        (1, 500, 0, 1)
    );
    let want: Vec<(u64, &str)> = vec![
        (3_000_000_250, "core_repaint_begin"),
        (4_000_001_000, "weston: hello"),
        (2_000_000_000, "hi"),
        (5_000_000_500, "sysrq: Trigger a crash"),
        (6_500_000_500, "later"),
    ];
    let got: Vec<(u64, &str)> = placed
        .placed
        .iter()
        .map(|(t, s)| (*t, s.as_str()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn journal_lines_of_another_boot_follow_the_wall_clock_steps() {
    use pstore_ring::read::ClockStep;
    // Stepped forward by 1000 s at trace time 10 s.
    let mut clock = clock();
    clock.wall = WallClock::from_steps(
        1_000_000_000_000,
        vec![ClockStep {
            ts: 10_000_000_000,
            stream: 0,
            index: 3,
            wall_offset_ns: 2_000_000_000_000,
        }],
    );
    let log = "\
{\"MESSAGE\":\"before\",\"_BOOT_ID\":\"ff\",\"__REALTIME_TIMESTAMP\":\"1009000000\"}
{\"MESSAGE\":\"after\",\"_BOOT_ID\":\"ff\",\"__REALTIME_TIMESTAMP\":\"2012000000\"}
";
    let placed = clock.place("x", log.as_bytes()).unwrap();
    let got: Vec<(u64, &str)> = placed
        .placed
        .iter()
        .map(|(t, s)| (*t, s.as_str()))
        .collect();
    assert_eq!(got, [(9_000_000_000, "before"), (12_000_000_000, "after")]);
}

#[test]
fn without_a_shared_message_console_times_are_taken_as_they_are() {
    let placed = clock()
        .place("x", "[1.5] twice\n[2.0] other\n".as_bytes())
        .unwrap();
    assert_eq!(placed.placement.matched, 0);
    assert_eq!(placed.placed[0].0, 1_500_000_000);
}

#[test]
fn hostile_lines_are_counted_not_trusted() {
    let mut log = Vec::new();
    log.extend_from_slice(b"[99999999999999999999.1] overflow\n[1.1234567890] too precise\n{\"T\":[18446744073709551615,0]}\n{not json\n");
    log.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
    log.extend_from_slice(b"\n[1.0] after the long line\n");
    let placed = clock().place("x", &log[..]).unwrap();
    assert_eq!(placed.lines, 6);
    assert_eq!(placed.placement.unplaced, 5);
    assert_eq!(
        placed.placed,
        vec![(1_000_000_000, "after the long line".to_string())]
    );
}

#[test]
fn kernel_messages_in_a_log_meet_the_printk_classes_and_every_line_is_scrubbed() {
    use crate::bundle::redact::{Class, Rules};
    use pstore_ring::read::HeaderTrust;
    let mut mem = vec![0u8; 16 * 1024];
    let specs = [pstore_ring::write::StreamSpec::cpu(0)];
    let cfg = pstore_ring::write::RegionConfig {
        word_size: 8,
        page_size: 512,
        streams: &specs,
        ..Default::default()
    };
    pstore_ring::write::format(&mut mem, &cfg).unwrap();
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let class = |c: &str| Class::parse(c).unwrap();
    let log = "\
[    1.000000] input: AT keyboard\r
[    1.100000] host kernel: input: mouse at ffffffff81000010
[    1.200000] usb 1-1: new device; input: not at the start
[    1.300000] Code: 0f 0b <cc>
<6>[    1.400000] input: from a pstore record
{\"MESSAGE\":\"input: pad\",\"_TRANSPORT\":\"kernel\"}
{\"MESSAGE\":\"input: by a user\",\"_TRANSPORT\":\"stdout\"}
{\"MESSAGE\":[97,116,32,102,102,102,102,56,56,56,48,48,48,48,48,48,48,48,48],\"_TRANSPORT\":\"syslog\"}
no time ffff888000000000
{\"MESSAGE\":\"two lines\\nffffffff81000020 after a break\",\"_TRANSPORT\":\"stdout\"}
{\"CODE_FUNC\":\"\\u0066fffffff81000030\",\"MESSAGE\":\"escaped\",\"_TRANSPORT\":\"stdout\"}
{\"MESSAGE\":\"as bytes\",\"UNIT\":[102,102,102,102,102,102,102,102,56,49,48,48,48,48,52,48],\"_TRANSPORT\":\"stdout\"}
Nov  3 12:00:00 kiosk kernel: input: syslog keyboard
2026-11-30T12:00:00.123456+00:00 kiosk kernel: [    2.000000] input: kern.log keyboard
Nov 30 12:00:01 kiosk weston[812]: input: not the kernel's
2026-11-30T12:00:05+00:00 kiosk kdump-tools[612]: Loading crash kernel: input: not it either
Nov 30 12:00:02 kiosk kernel: usb 1-1: hashed by printk.text
";
    let rules = Rules {
        classes: vec![class("printk=input:"), class("printk.text")],
        raw_pointers: false,
        input_layer: false,
        since_ns: None,
        grant: None,
    };
    let r = TextRedactor::new(&region, &crate::recover::RegionKey::of(&region), &rules);
    let mut out = Vec::new();
    let done = redact(log.as_bytes(), &mut out, &r).unwrap();
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    // Four kernel messages dropped (one behind pstore's syslog
    // priority); the other bracketed lines hashed whole by
    // printk.text, keeping their times.
    assert_eq!(done.counts.per_class, [6, 3], "{out}");
    assert_eq!(lines.len(), 11, "{out}");
    // The kernel's lines of syslog's shape meet them too: the time,
    // host and tag kept; a program's line of the same shape does not.
    assert_eq!(
        lines[8],
        "Nov 30 12:00:01 kiosk weston[812]: input: not the kernel's"
    );
    assert!(lines[9].ends_with("Loading crash kernel: input: not it either"));
    assert!(
        lines[10].starts_with("Nov 30 12:00:02 kiosk kernel: h:"),
        "{out}"
    );
    assert!(lines[0].starts_with("[    1.200000] h:"), "{out}");
    assert!(lines[1].starts_with("[    1.300000] h:"), "{out}");
    assert!(lines[2].contains("input: by a user"), "{out}");
    // An address in a journal MESSAGE given as bytes, and in a line
    // of no known shape, hashed; the first with the trace's hash.
    // Those a journal line hides behind an escape (after `\n`, as
    // `\u0066`) or in another field's bytes are found as the values
    // decode.
    assert_eq!(done.counts.pointers, 5, "{out}");
    assert!(!out.contains("ffff8880"), "{out}");
    for (line, field) in lines[5..].iter().zip(["MESSAGE", "CODE_FUNC", "UNIT"]) {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = match &entry[field] {
            serde_json::Value::String(s) => s.clone().into_bytes(),
            v => journal_bytes(v).unwrap(),
        };
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("ffffffff810000"), "{field}: {line}");
    }
    let again = Rules {
        classes: Vec::new(),
        raw_pointers: false,
        input_layer: false,
        since_ns: None,
        grant: None,
    };
    let r = TextRedactor::new(&region, &crate::recover::RegionKey::of(&region), &again);
    let mut out = Vec::new();
    let done = redact(log.as_bytes(), &mut out, &r).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(
        (done.counts.pointers, done.counts.code_lines),
        (6, 1),
        "{out}"
    );
    assert!(out.contains("[    1.300000] Code: xx xx <xx>\n"), "{out}");
    assert!(
        out.starts_with("[    1.000000] input: AT keyboard\r\n"),
        "{out}"
    );
}

/// A backfilled printk line's time was worked out, not seen: only the
/// lines recorded as printk stored them align a log.
#[test]
fn backfilled_printk_lines_do_not_align_a_log() {
    use pstore_ring::read::{Event, HeaderTrust};
    use pstore_ring::schema::{builtin, PRINTK_BACKFILLED};
    let mut mem = vec![0u8; 16 * 1024];
    let specs = [pstore_ring::write::StreamSpec::cpu(0)];
    let cfg = pstore_ring::write::RegionConfig {
        page_size: 1024,
        streams: &specs,
        ..Default::default()
    };
    let mut w = pstore_ring::write::format(&mut mem, &cfg)
        .unwrap()
        .streams
        .next()
        .unwrap();
    let printk = builtin(EVENT_PRINTK).unwrap();
    for (ts, flags, text) in [
        (1, PRINTK_BACKFILLED, &b"early line"[..]),
        (3_000_000_000, 0, &b"live line"[..]),
    ] {
        let v = [
            Value::Unsigned(6),
            Value::Unsigned(flags.into()),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Str(text),
        ];
        w.write_event(ts, printk, &v).unwrap();
    }
    let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
    let trace = region.decode();
    let events: Vec<Event> = trace.streams[0].events.clone();
    let c = Clock::new(&region, events, WallClock::fixed(0));
    assert_eq!(c.printk.get(&b"live line"[..]), Some(&Some(3_000_000_000)));
    assert_eq!(c.printk.get(&b"early line"[..]), None);
}

#[test]
fn an_offset_that_lands_before_zero_unplaces_the_line() {
    let mut c = clock();
    c.printk.insert(&b"m"[..], Some(1));
    let placed = c.place("x", "[1.0] m\n[0.5] early\n".as_bytes()).unwrap();
    assert_eq!(placed.placement.offset_ns, 1 - 1_000_000_000);
    assert_eq!(placed.placed, vec![(1, "m".to_string())]);
    assert_eq!(placed.placement.unplaced, 1);
    assert_eq!(placed.placement.bracketed, 1);
}

#[test]
fn a_log_of_the_same_clock_borrows_the_printk_logs_alignment() {
    let c = clock();
    let printk = c
        .place("printk", "[5.0] sysrq: Trigger a crash\n".as_bytes())
        .unwrap();
    assert_eq!(printk.placement.offset_ns, 500);
    // An ftrace buffer's lines match no printk line of the trace.
    let ftrace = "[4.0] cpu0 pid 1: print: a\n[4.5] cpu0 pid 1: print: b\n";
    let mut log = c.place("ftrace", ftrace.as_bytes()).unwrap();
    assert_eq!(log.placement.matched, 0);
    assert!(log.borrow_alignment(&printk));
    assert!(log.placement.from_printk_log);
    let times: Vec<u64> = log.placed.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [4_000_000_500, 4_500_000_500]);
    assert_eq!(log.placement.offset_ns, 500);
    // One that found its own, or a reference that found none, stays.
    let mut own = c
        .place("own", "[5.0] sysrq: Trigger a crash\n".as_bytes())
        .unwrap();
    assert!(!own.borrow_alignment(&printk));
    let none = c.place("none", "[1.0] other\n".as_bytes()).unwrap();
    let mut log = c.place("ftrace", ftrace.as_bytes()).unwrap();
    assert!(!log.borrow_alignment(&none));
    // Lines placed by another clock (a journal's) are not moved.
    let mixed = "{\"T\":[3,250],\"N\":\"x\"}\n[4.0] y\n";
    let mut mixed = c.place("mixed", mixed.as_bytes()).unwrap();
    assert!(!mixed.borrow_alignment(&printk));
}
