//! A bounded LZO1X decompressor (what makedumpfile `-l` writes per page).
//!
//! Written from the stream description in the kernel's
//! `Documentation/staging/lzo.rst`. Every length and distance is checked
//! against the input left and the output room before use, so hostile
//! input ends in an error, never in a panic or a write past `out`.

/// Why a stream was refused, with the input offset where it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LzoError {
    #[error("LZO input ends early (at byte {0})")]
    InputEnded(usize),
    #[error("LZO output would exceed {0} bytes")]
    OutputFull(usize),
    #[error("LZO back-reference before the start of the output (at byte {0})")]
    BadDistance(usize),
    #[error("LZO input has {0} bytes after the end marker")]
    TrailingBytes(usize),
}

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8, LzoError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or(LzoError::InputEnded(self.at))?;
        self.at += 1;
        Ok(b)
    }

    fn le16(&mut self) -> Result<usize, LzoError> {
        let lo = self.byte()?;
        let hi = self.byte()?;
        Ok(usize::from(u16::from_le_bytes([lo, hi])))
    }

    /// A length whose `bits`-wide field was zero: `mask`, plus 255 per zero
    /// byte, plus the first non-zero byte.
    fn long_length(&mut self, field: usize, mask: usize) -> Result<usize, LzoError> {
        if field != 0 {
            return Ok(field);
        }
        let mut n = mask;
        loop {
            match self.byte()? {
                0 => n += 255,
                b => return Ok(n + usize::from(b)),
            }
        }
    }
}

struct Output<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Output<'_> {
    fn literals(&mut self, input: &mut Input<'_>, n: usize) -> Result<(), LzoError> {
        let src = input
            .bytes
            .get(input.at..input.at.saturating_add(n))
            .ok_or(LzoError::InputEnded(input.bytes.len()))?;
        let room = self.buf.len();
        let dst = self
            .buf
            .get_mut(self.at..self.at.saturating_add(n))
            .ok_or(LzoError::OutputFull(room))?;
        dst.copy_from_slice(src);
        input.at += n;
        self.at += n;
        Ok(())
    }

    /// Copies `len` bytes from `distance` back; overlapping copies repeat.
    fn back_copy(&mut self, distance: usize, len: usize, at: usize) -> Result<(), LzoError> {
        if distance == 0 || distance > self.at {
            return Err(LzoError::BadDistance(at));
        }
        if self.at.saturating_add(len) > self.buf.len() {
            return Err(LzoError::OutputFull(self.buf.len()));
        }
        for _ in 0..len {
            self.buf[self.at] = self.buf[self.at - distance];
            self.at += 1;
        }
        Ok(())
    }
}

/// Decompresses one LZO1X stream into `out`; returns the bytes written.
pub fn decompress(input: &[u8], out: &mut [u8]) -> Result<usize, LzoError> {
    let mut i = Input {
        bytes: input,
        at: 0,
    };
    let mut o = Output { buf: out, at: 0 };
    // Literals copied by the previous instruction: 0, 1-3, or 4 for "a
    // literal run of four or more".
    let mut state = 0usize;
    let first = *input.first().ok_or(LzoError::InputEnded(0))?;
    if first > 17 {
        i.at = 1;
        let n = usize::from(first - 17);
        o.literals(&mut i, n)?;
        state = n.min(4);
    }
    loop {
        let at = i.at;
        let inst = usize::from(i.byte()?);
        let (distance, len, next) = match inst {
            0..=15 if state == 0 => {
                let n = i.long_length(inst, 15)? + 3;
                o.literals(&mut i, n)?;
                state = 4;
                continue;
            }
            0..=15 => {
                let h = usize::from(i.byte()?);
                let base = if state == 4 { 2049 } else { 1 };
                (
                    (h << 2) + (inst >> 2 & 3) + base,
                    2 + usize::from(state == 4),
                    inst & 3,
                )
            }
            16..=31 => {
                let len = i.long_length(inst & 7, 7)? + 2;
                let d = i.le16()?;
                let distance = 16384 + ((inst & 8) << 11) + (d >> 2);
                if distance == 16384 {
                    return match input.len() - i.at {
                        0 => Ok(o.at),
                        extra => Err(LzoError::TrailingBytes(extra)),
                    };
                }
                (distance, len, d & 3)
            }
            32..=63 => {
                let len = i.long_length(inst & 31, 31)? + 2;
                let d = i.le16()?;
                ((d >> 2) + 1, len, d & 3)
            }
            64..=127 => {
                let h = usize::from(i.byte()?);
                (
                    (h << 3) + (inst >> 2 & 7) + 1,
                    3 + (inst >> 5 & 1),
                    inst & 3,
                )
            }
            _ => {
                let h = usize::from(i.byte()?);
                (
                    (h << 3) + (inst >> 2 & 7) + 1,
                    5 + (inst >> 5 & 3),
                    inst & 3,
                )
            }
        };
        o.back_copy(distance, len, at)?;
        o.literals(&mut i, next)?;
        state = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(data: &[u8]) {
        let packed = lzokay_native::compress(data).unwrap();
        let mut out = vec![0; data.len()];
        assert_eq!(decompress(&packed, &mut out), Ok(data.len()));
        assert_eq!(out, data);
    }

    #[test]
    fn reads_what_a_real_lzo1x_compressor_writes() {
        roundtrip(b"a");
        roundtrip(&[0; 4096]);
        let text: Vec<u8> = (0..4096u32)
            .map(|i| b"crashring page text "[(i as usize * 7) % 20] ^ (i / 300) as u8)
            .collect();
        roundtrip(&text);
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        roundtrip(&noise);
    }

    #[test]
    fn hostile_streams_end_in_errors() {
        let mut out = [0u8; 64];
        assert_eq!(decompress(&[], &mut out), Err(LzoError::InputEnded(0)));
        // A back-reference further back than the output goes.
        assert_eq!(
            decompress(&[0x12, b'x', 0x21, 0x14, 0x00], &mut out),
            Err(LzoError::BadDistance(2))
        );
        // A literal run longer than the output (zero bytes stretch it).
        let bomb = [0x00, 0x00, 0x00, 0x01];
        assert!(matches!(
            decompress(&bomb, &mut out),
            Err(LzoError::OutputFull(64) | LzoError::InputEnded(_))
        ));
        // A length that never ends.
        assert_eq!(
            decompress(&[0x00, 0x00, 0x00], &mut out),
            Err(LzoError::InputEnded(3))
        );
        // Bytes after the end marker.
        assert_eq!(
            decompress(&[0x12, b'x', 0x11, 0, 0, 9], &mut out),
            Err(LzoError::TrailingBytes(1))
        );
        assert_eq!(decompress(&[0x12, b'x', 0x11, 0, 0], &mut out), Ok(1));
    }
}
