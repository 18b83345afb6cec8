//! The kernel's own printk log of a dump, as `crashring dmesg` reads it,
//! held against the same log as `makedumpfile --dump-dmesg` reads it and
//! across the dumps of one crash.
//!
//! The two print a record differently, so each is parsed back to
//! (time, text bytes) before they are compared: makedumpfile (1.7.2,
//! printk.c) writes `[%5lld.%06ld] `, a line break inside a record as a
//! break and the prefix's width of spaces, a byte that is neither
//! printable nor a space as `\x%02x` of a *signed* char (`\xffffffc3`),
//! and skips records without text; `crashring dmesg` writes every
//! control byte, breaks included, as `\xNN`.

use anyhow::{ensure, Context, Result};
use std::path::Path;
use xshell::{cmd, Shell};

/// A record as both print it: its time as printed, and its text.
type Line = (String, Vec<u8>);

/// The records `crashring dmesg` reads from `dump`, those without text
/// left out as makedumpfile leaves them out.
pub fn crashring_records(sh: &Shell, crashring: &Path, dump: &Path) -> Result<Vec<Line>> {
    let out = cmd!(sh, "{crashring} dmesg {dump}").quiet().output()?;
    let text = String::from_utf8(out.stdout)
        .with_context(|| format!("crashring dmesg {}: not UTF-8", dump.display()))?;
    let mut lines = Vec::new();
    for line in text.lines() {
        let (stamp, rest) = split_stamp(line)
            .with_context(|| format!("crashring dmesg {}: line {line:?}", dump.display()))?;
        if !rest.is_empty() {
            lines.push((stamp.to_string(), unescape(rest.as_bytes())));
        }
    }
    Ok(lines)
}

/// The records `makedumpfile --dump-dmesg` reads from `dump`.
pub fn makedumpfile_records(sh: &Shell, dump: &Path, out: &Path) -> Result<Vec<Line>> {
    let _ = std::fs::remove_file(out);
    cmd!(sh, "makedumpfile --dump-dmesg {dump} {out}")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .with_context(|| format!("makedumpfile --dump-dmesg {}", dump.display()))?;
    let bytes = std::fs::read(out)?;
    let mut lines: Vec<Line> = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(line);
        if let Some((stamp, rest)) = split_stamp(&text) {
            lines.push((stamp.to_string(), unescape(rest.as_bytes())));
            continue;
        }
        // A line break inside a record: the prefix's width of spaces.
        let last = lines
            .last_mut()
            .with_context(|| format!("{}: a continuation before any record", out.display()))?;
        let indent = last.0.len() + 3;
        ensure!(
            line.len() >= indent && line[..indent].iter().all(|&b| b == b' '),
            "{}: line {text:?} is neither a record nor its continuation",
            out.display()
        );
        last.1.push(b'\n');
        last.1.extend(unescape(&line[indent..]));
    }
    Ok(lines)
}

/// `[  sec.usec] text` split after the stamp (`sec.usec`, `text`).
fn split_stamp(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    let (stamp, text) = rest.split_once("] ")?;
    let trimmed = stamp.trim_start();
    let (s, us) = trimmed.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(s) && digits(us) && us.len() == 6).then_some((stamp, text))
}

/// Bytes with `\xNN` (and makedumpfile's `\xffffffNN`) read back.
fn unescape(text: &[u8]) -> Vec<u8> {
    let hex = |d: &[u8]| {
        std::str::from_utf8(d)
            .ok()
            .and_then(|d| u8::from_str_radix(d, 16).ok())
    };
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(b"\\xffffff") {
            if let Some(b) = text.get(i + 8..i + 10).and_then(hex) {
                out.push(b);
                i += 10;
                continue;
            }
        }
        if text[i..].starts_with(b"\\x") {
            if let Some(b) = text.get(i + 2..i + 4).and_then(hex) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    out
}

/// The script lines that print the guest's own `dmesg` on the console
/// between two markers, with the console's level lowered first so that no
/// message the kernel prints meanwhile lands between them (a panic raises
/// it again: console_verbose()). Then they wait for the serial port to
/// send all of it: what the tty still holds when the crash that follows
/// stops the machine is lost (a CI run lost the end marker so), and
/// busybox has no tcdrain. The port's `tx` count standing still for
/// 0.2 s says it is sent; 10 s at most.
pub const GUEST_DMESG: &str = "dmesg -n 1\n\
echo crashring-test: dmesg-begin\n\
dmesg\n\
echo crashring-test: dmesg-end\n\
sent=; i=0\n\
while [ $i -lt 50 ]; do\n\
  now=$(grep -o 'tx:[0-9]*' /proc/tty/driver/serial | head -n 1)\n\
  [ -n \"$now\" ] && [ \"$now\" = \"$sent\" ] && break\n\
  sent=$now; i=$((i + 1)); sleep 0.2\n\
done\n";

/// The lines the guest's `dmesg` printed in `serial` (busybox's `dmesg`,
/// the kernel's syslog format: every line of a record with its stamp), or
/// `None` if the guest printed none.
pub fn guest_lines(serial: &[u8]) -> Result<Option<Vec<Line>>> {
    let mut text = serial
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    if !text.any(|l| l == b"crashring-test: dmesg-begin") {
        return Ok(None);
    }
    let mut lines = Vec::new();
    for line in text {
        if line == b"crashring-test: dmesg-end" {
            return Ok(Some(lines));
        }
        let printed = String::from_utf8_lossy(line);
        let (stamp, _) = split_stamp(&printed)
            .with_context(|| format!("the guest's dmesg printed {printed:?}"))?;
        let text = &line[stamp.len() + 3..];
        if !text.is_empty() {
            lines.push((stamp.to_string(), text.to_vec()));
        }
    }
    anyhow::bail!("the serial log has no complete dmesg between the markers")
}

/// Checks that the guest's own `dmesg` lines are, in order and with no
/// gap, lines of the log read from the dump (each record cut at its line
/// breaks, as the kernel's syslog prints it): the dump's log holds more
/// after them (the crash), and the guest's may have started later if its
/// buffer was short. Returns how many lines matched.
pub fn ensure_guest_lines(ours: &[Line], guest: &[Line]) -> Result<usize> {
    let ours: Vec<Line> = ours
        .iter()
        .flat_map(|(stamp, text)| {
            text.split(|&b| b == b'\n')
                .map(|l| (stamp.clone(), l.to_vec()))
                .filter(|(_, l)| !l.is_empty())
        })
        .collect();
    let first = guest.first().context("the guest's dmesg printed nothing")?;
    let start = ours.iter().position(|l| l == first).with_context(|| {
        format!("the guest's first dmesg line {first:?} is not in the dump's log")
    })?;
    let end = (start + guest.len()).min(ours.len());
    ensure_same("the guest's dmesg", &ours[start..end], guest)?;
    Ok(guest.len())
}

/// Says where two readings of one log first differ.
pub fn ensure_same(what: &str, ours: &[Line], theirs: &[Line]) -> Result<()> {
    let first = ours.iter().zip(theirs).position(|(a, b)| a != b);
    if let Some(n) = first {
        let show = |l: &Line| format!("[{}] {:?}", l.0, String::from_utf8_lossy(&l.1));
        anyhow::bail!(
            "{what}: record {n} differs: crashring has {}, the other {}",
            show(&ours[n]),
            show(&theirs[n])
        );
    }
    ensure!(
        ours.len() == theirs.len(),
        "{what}: crashring has {} records, the other {}",
        ours.len(),
        theirs.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_printings_of_a_record_read_back_the_same() {
        assert_eq!(
            split_stamp("[    1.234567] a\\x0ab"),
            Some(("    1.234567", "a\\x0ab"))
        );
        assert_eq!(split_stamp("[ 1.2] x"), None);
        assert_eq!(unescape(b"a\\x0ab\\xffffffc3\\xa9"), b"a\nb\xc3\xa9");
        assert_eq!(unescape(b"\\xzz\\x4"), b"\\xzz\\x4");
        let ours = vec![("1".to_string(), b"x".to_vec())];
        let longer = vec![ours[0].clone(), ("2".to_string(), b"y".to_vec())];
        assert!(ensure_same("t", &ours, &ours).is_ok());
        assert!(ensure_same("t", &ours, &longer).is_err());
        let other = vec![("1".to_string(), b"z".to_vec())];
        assert!(ensure_same("t", &ours, &other)
            .unwrap_err()
            .to_string()
            .contains("record 0 differs"));
    }

    #[test]
    fn the_guests_dmesg_must_be_a_run_of_the_dumps_lines() {
        let serial = b"boot\r\ncrashring-test: dmesg-begin\r\n[    0.100000] b\r\n\
            [    0.200000] c1\r\n[    0.200000] c2\r\ncrashring-test: dmesg-end\r\n";
        let guest = guest_lines(serial).unwrap().unwrap();
        assert_eq!(guest.len(), 3);
        let record = |t: &str, x: &[u8]| (t.to_string(), x.to_vec());
        let dump = vec![
            record("    0.000000", b"a"),
            record("    0.100000", b"b"),
            record("    0.200000", b"c1\nc2"),
            record("    1.000000", b"panic"),
        ];
        assert_eq!(ensure_guest_lines(&dump, &guest).unwrap(), 3);
        let mut missing = dump.clone();
        missing.remove(1);
        missing.insert(1, record("    0.100000", b"x"));
        assert!(ensure_guest_lines(&missing, &guest).is_err());
        assert!(ensure_guest_lines(&dump[..2], &guest).is_err());
        assert!(guest_lines(b"no markers").unwrap().is_none());
        assert!(guest_lines(b"crashring-test: dmesg-begin\n[    0.1] x\n").is_err());
    }
}
