//! The size and SHA-256 of a bundle's files, as they are written or as
//! they are read back.

use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};

/// A file's size and SHA-256, in lowercase hex: what the manifest
/// records and `check-bundle` compares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digested {
    pub size: u64,
    pub sha256: String,
}

/// A writer that hashes and counts what `inner` took, so a file is
/// hashed as it is written instead of read back whole afterwards (a
/// dense snapshot's JSON lines are hundreds of megabytes).
pub struct Digesting<W> {
    inner: W,
    hasher: Sha256,
    size: u64,
}

impl<W: Write> Digesting<W> {
    pub fn new(inner: W) -> Digesting<W> {
        Digesting {
            inner,
            hasher: Sha256::new(),
            size: 0,
        }
    }

    /// The destination, with what was written to it.
    pub fn finish(self) -> (W, Digested) {
        let sha256 = self
            .hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let size = self.size;
        (self.inner, Digested { size, sha256 })
    }
}

impl<W: Write> Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Only what the destination took: a short write is hashed once,
        // when the rest comes again.
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The size and SHA-256 of all `input` yields; each piece is also
/// handed to `seen`, whose error stops the reading.
pub fn digest(
    mut input: impl Read,
    mut seen: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<Digested> {
    let mut hashed = Digesting::new(io::sink());
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hashed.write_all(&buf[..n])?;
        seen(&buf[..n])?;
    }
    Ok(hashed.finish().1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHA-256 of "abc", FIPS 180-2's first example.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    /// Takes at most 2 bytes a call, as a pipe or a full disk may.
    struct Short(Vec<u8>);

    impl Write for Short {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(2);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn written_and_read_back_agree_with_the_standard() {
        let mut w = Digesting::new(Short(Vec::new()));
        w.write_all(b"abc").expect("writing to memory");
        let (short, written) = w.finish();
        assert_eq!(short.0, b"abc");
        assert_eq!(
            written,
            Digested {
                size: 3,
                sha256: ABC.into()
            }
        );
        let mut seen = Vec::new();
        let read = digest(&b"abc"[..], |p| {
            seen.extend_from_slice(p);
            Ok(())
        })
        .expect("reading memory");
        assert_eq!((read, seen), (written, b"abc".to_vec()));
    }
}
