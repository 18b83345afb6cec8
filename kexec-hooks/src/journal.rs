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
/// `MESSAGE_ID` of "a generation was bundled already (by the capture
/// kernel) and is now acknowledged".
pub const ALREADY_ARCHIVED: &str = "b5c21bbab0f54da5a094d9e66352aab0";
/// `MESSAGE_ID` of "a clean shutdown's generation was acknowledged without
/// a bundle" (`Clean=discard`).
pub const DISCARDED: &str = "00318a7dcf094f218c40bbd47f4f86ea";
/// `MESSAGE_ID` of "a clean shutdown's generation stays in the region"
/// (`Clean=keep`).
pub const KEPT: &str = "6b8e26cd0df34cffb7204b4c50defd52";
/// `MESSAGE_ID` of "a clean shutdown's generation that `Clean=keep` would
/// leave was released, because the module could record nowhere else".
pub const RELEASED_TO_RECORD: &str = "bdda47baf33c4d089c6553ffc312b9c5";
/// `MESSAGE_ID` of "the `OnBundle=` command took a bundle".
pub const UPLOADED: &str = "b8f800a5a31d45398fa25a653e502fa3";
/// `MESSAGE_ID` of "the `OnBundle=` command failed for a bundle, which
/// stays spooled" (or retention removed it first).
pub const UPLOAD_FAILED: &str = "df32f5620a18490fbfc1ed8caeb286b1";
/// `MESSAGE_ID` of "the module records nothing now" (its status says why).
pub const NOT_RECORDING: &str = "00c65f00a86b4856ac58c5d55b9c575e";

/// `MESSAGE_ID` of "a report was written for a program that asked
/// without a crash" (crashring-request.socket).
pub const REPORTED: &str = "4c8e0a7d5f2b4e61a3d9b6c1e27f0853";
/// `MESSAGE_ID` of "a request for a report was refused".
pub const REQUEST_REFUSED: &str = "9a1f3c6e82d04b7fa5e0c4d2b8163e79";

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
