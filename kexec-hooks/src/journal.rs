//! Structured journal messages through journald's native protocol: one
//! datagram to `/run/systemd/journal/socket` of `FIELD=value` lines, a
//! value holding a newline sent as `FIELD\n`, its length as a 64-bit
//! little-endian number, the bytes and `\n` (systemd's
//! `sd_journal_sendv`, without linking libsystemd).

use std::os::unix::net::UnixDatagram;
use std::path::Path;

pub const SOCKET: &str = "/run/systemd/journal/socket";

/// `MESSAGE_ID` of "a previous generation was archived", for
/// `journalctl MESSAGE_ID=...`.
pub const RECOVERED: &str = "762b8a2712294bdba5c5c45170848151";
/// `MESSAGE_ID` of "a previous generation could not be archived, and was
/// left in the region".
pub const FAILED: &str = "2f0001be64f245e58407c93a0c311188";
/// `MESSAGE_ID` of "the range did not keep the last boot's generation"
/// (see `continuity`).
pub const LOST: &str = "20f04a55cc7f4099aff6dd76f4697a72";

/// Encodes fields as one native-protocol datagram.
pub fn encode(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in fields {
        out.extend_from_slice(k.as_bytes());
        if v.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
            out.extend_from_slice(v.as_bytes());
        } else {
            out.push(b'=');
            out.extend_from_slice(v.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// Sends the fields to the journal at `socket`; `false` when there is
/// none (no systemd, or a test), for the caller to say it elsewhere.
pub fn send(socket: &Path, fields: &[(&str, &str)]) -> bool {
    let Ok(s) = UnixDatagram::unbound() else {
        return false;
    };
    s.send_to(&encode(fields), socket).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_plain_and_multi_line_values() {
        let got = encode(&[("MESSAGE", "two\nlines"), ("PRIORITY", "5")]);
        let mut want = b"MESSAGE\n".to_vec();
        want.extend_from_slice(&9u64.to_le_bytes());
        want.extend_from_slice(b"two\nlines\nPRIORITY=5\n");
        assert_eq!(got, want);
    }

    #[test]
    fn a_listening_socket_receives_the_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("socket");
        let journal = UnixDatagram::bind(&path).unwrap();
        assert!(send(&path, &[("MESSAGE_ID", RECOVERED), ("MESSAGE", "hi")]));
        let mut buf = [0u8; 256];
        let n = journal.recv(&mut buf).unwrap();
        assert_eq!(
            &buf[..n],
            format!("MESSAGE_ID={RECOVERED}\nMESSAGE=hi\n").as_bytes()
        );
        assert!(!send(&dir.path().join("none"), &[("MESSAGE", "x")]));
    }
}
