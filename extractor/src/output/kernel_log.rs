//! The crashed kernel's own printk log ([`crate::foreign::printk`]) as
//! `crashring dmesg` writes it: lines as `dmesg` prints them, or one JSON
//! object per record (extractor/SCHEMAS.md).

use super::jsonl::{write_string, write_u64};
use crate::foreign::printk::{Log, Record, CALLER_CPU, LOG_CONT};
use pstore_ring::text::push_escaped;
use std::io::{self, Write};

/// A line's time, as `dmesg` prints it: `[seconds.micros] `.
pub fn stamp(line: &mut Vec<u8>, ts: u64) -> io::Result<()> {
    let secs = ts / 1_000_000_000;
    let micros = ts % 1_000_000_000 / 1000;
    write!(line, "[{secs:5}.{micros:06}] ")
}

/// Writes every record of `log` as `[seconds.micros] text`, one line per
/// record as the ring holds them (the kernel joins a continued line in
/// its ring; a fragment left apart stays a line of its own), every
/// control character, line breaks inside a record included, written
/// `\xNN` as `/dev/kmsg` writes it ([`push_escaped`]).
pub fn write_text(out: &mut impl Write, log: &Log) -> io::Result<()> {
    let mut line = Vec::with_capacity(256);
    for r in &log.records {
        line.clear();
        stamp(&mut line, r.ts_nsec)?;
        push_escaped(&mut line, &r.text);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// Writes every record of `log` as one JSON object per line.
pub fn write_jsonl(out: &mut impl Write, log: &Log) -> io::Result<()> {
    let mut line = Vec::with_capacity(256);
    for r in &log.records {
        line.clear();
        record_json(&mut line, r);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// `r` as a JSON object: `seq`, `ts_ns`, `level`, `facility`,
/// `continued`, `caller` (`T<pid>` or `C<cpu>`, as the kernel's
/// `CONFIG_PRINTK_CALLER` prefix), `text`, and `subsystem` and `device`
/// when the record names a device.
fn record_json(out: &mut Vec<u8>, r: &Record) {
    out.extend_from_slice(b"{\"seq\":");
    write_u64(out, r.seq);
    out.extend_from_slice(b",\"ts_ns\":");
    write_u64(out, r.ts_nsec);
    out.extend_from_slice(b",\"level\":");
    write_u64(out, r.level.into());
    out.extend_from_slice(b",\"facility\":");
    write_u64(out, r.facility.into());
    out.extend_from_slice(b",\"continued\":");
    out.extend_from_slice(if r.flags & LOG_CONT != 0 {
        b"true"
    } else {
        b"false"
    });
    out.extend_from_slice(b",\"caller\":");
    write_string(out, caller(r.caller_id).as_bytes());
    out.extend_from_slice(b",\"text\":");
    write_string(out, &r.text);
    if !r.device.is_empty() || !r.subsystem.is_empty() {
        out.extend_from_slice(b",\"subsystem\":");
        write_string(out, &r.subsystem);
        out.extend_from_slice(b",\"device\":");
        write_string(out, &r.device);
    }
    out.push(b'}');
}

/// The caller as the kernel prints it: `T` and the thread id, or `C` and
/// the CPU for a record printed outside task context.
fn caller(id: u32) -> String {
    if id & CALLER_CPU != 0 {
        format!("C{}", id & !CALLER_CPU)
    } else {
        format!("T{id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ts_nsec: u64, text: &[u8], caller_id: u32, flags: u8) -> Record {
        Record {
            seq: 7,
            ts_nsec,
            level: 4,
            facility: 0,
            flags,
            caller_id,
            text: text.to_vec(),
            subsystem: Vec::new(),
            device: Vec::new(),
        }
    }

    #[test]
    fn text_is_dmesgs_with_every_control_byte_escaped() {
        let log = Log {
            records: vec![
                record(1_234_567_891, b"one\ntwo\x1b[31m", 1, 2),
                record(123_000_000_000, b"", 1, 2),
            ],
            ..Log::default()
        };
        let mut out = Vec::new();
        write_text(&mut out, &log).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[    1.234567] one\\x0atwo\\x1b[31m\n[  123.000000] \n"
        );
    }

    #[test]
    fn json_names_the_caller_and_the_device_when_there_is_one() {
        let mut with_device = record(5, b"link up", 0x8000_0003, LOG_CONT);
        with_device.subsystem = b"net".to_vec();
        with_device.device = b"n2".to_vec();
        let log = Log {
            records: vec![record(9, b"x\xff", 42, 2), with_device],
            ..Log::default()
        };
        let mut out = Vec::new();
        write_jsonl(&mut out, &log).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"seq\":7,\"ts_ns\":9,\"level\":4,\"facility\":0,\"continued\":false,\"caller\":\"T42\",\"text\":\"x\u{fffd}\"}\n\
             {\"seq\":7,\"ts_ns\":5,\"level\":4,\"facility\":0,\"continued\":true,\"caller\":\"C3\",\"text\":\"link up\",\"subsystem\":\"net\",\"device\":\"n2\"}\n"
        );
    }
}
