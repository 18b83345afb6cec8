//! A kernel debug message's parts as the format stores them (FORMAT.md,
//! section 18): its callsite, kept once in the callsite area, and its
//! arguments, recorded in binary so that the message is formatted when
//! read, not when written.
//!
//! Each argument is a tag byte and its value, in the order the format
//! takes them, integers in the region's byte order:
//!
//! | tag | name | value |
//! |---:|---|---|
//! | 1 | `int` | 8 bytes: an integer, a character or a `*` width or precision, as passed (an `int`-sized one zero-extended from its 32 bits; the reader casts as the conversion says) |
//! | 2 | `str` | a `u16` length *n*, then *n* bytes: a `%s` string as copied at record time (cut to what fits the record), or `(null)` / `(efault)` for a pointer the kernel would not read |
//! | 3 | `addr` | 8 bytes: a `%p` address (plain, `x`, `K`) |
//! | 4 | `text` | a `u16` length *n*, then *n* bytes: a `%p` extension the kernel formatted at record time (it reads through the pointer or resolves a symbol) |
//!
//! Tagged rather than implied by the format, so that a reader that
//! disagrees with the writer about a format (or meets a corrupted one)
//! reports the mismatch instead of reading strings out of integers.

use crate::endian::Endian;

/// A callsite: where a debug message comes from and its format, as its
/// entry in the callsite area holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Callsite<'a> {
    /// [`crate::layout::CALLSITE_DYNDBG`] or [`crate::layout::CALLSITE_DRM`].
    pub source: u8,
    pub level: u8,
    pub category: u16,
    pub line: u32,
    pub module: &'a [u8],
    pub function: &'a [u8],
    pub file: &'a [u8],
    pub format: &'a [u8],
}

impl Callsite<'_> {
    /// Whether it is the input layer's (input core, HID, keyboards,
    /// touch), whose messages can carry what a person typed.
    pub fn is_input_layer(&self) -> bool {
        let file = |dir: &[u8]| self.file.windows(dir.len()).any(|w| w == dir);
        file(b"drivers/input/") || file(b"drivers/hid/") || self.module.starts_with(b"hid")
    }
}

pub const ARG_INT: u8 = 1;
pub const ARG_STR: u8 = 2;
pub const ARG_ADDR: u8 = 3;
pub const ARG_TEXT: u8 = 4;

/// One recorded argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugArg<'a> {
    Int(u64),
    Str(&'a [u8]),
    Addr(u64),
    Text(&'a [u8]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("the arguments end inside the argument at byte {at}")]
    Truncated { at: usize },
    #[error("unknown argument tag {tag} at byte {at}")]
    UnknownTag { tag: u8, at: usize },
    #[error("{need} bytes of arguments do not fit the {room} left")]
    NoRoom { need: usize, room: usize },
}

/// The arguments in `bytes`, one by one; after an error, none.
#[derive(Clone, Debug)]
pub struct DebugArgs<'a> {
    bytes: &'a [u8],
    endian: Endian,
    at: usize,
    failed: bool,
}

impl<'a> DebugArgs<'a> {
    pub fn new(bytes: &'a [u8], endian: Endian) -> DebugArgs<'a> {
        DebugArgs {
            bytes,
            endian,
            at: 0,
            failed: false,
        }
    }

    fn take(&mut self, n: usize, start: usize) -> Result<&'a [u8], ArgsError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(ArgsError::Truncated { at: start })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u64(&mut self, start: usize) -> Result<u64, ArgsError> {
        let b = self.take(8, start)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(match self.endian {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        })
    }

    fn counted(&mut self, start: usize) -> Result<&'a [u8], ArgsError> {
        let b = self.take(2, start)?;
        let n = match self.endian {
            Endian::Little => u16::from_le_bytes([b[0], b[1]]),
            Endian::Big => u16::from_be_bytes([b[0], b[1]]),
        };
        self.take(usize::from(n), start)
    }

    fn read(&mut self) -> Result<DebugArg<'a>, ArgsError> {
        let start = self.at;
        let tag = self.take(1, start)?[0];
        Ok(match tag {
            ARG_INT => DebugArg::Int(self.u64(start)?),
            ARG_STR => DebugArg::Str(self.counted(start)?),
            ARG_ADDR => DebugArg::Addr(self.u64(start)?),
            ARG_TEXT => DebugArg::Text(self.counted(start)?),
            tag => return Err(ArgsError::UnknownTag { tag, at: start }),
        })
    }
}

impl<'a> Iterator for DebugArgs<'a> {
    type Item = Result<DebugArg<'a>, ArgsError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at == self.bytes.len() {
            return None;
        }
        let arg = self.read();
        self.failed = arg.is_err();
        Some(arg)
    }
}

/// The bytes `args` take (strings longer than a `u16` are cut by
/// [`encode`] and counted so here).
pub fn encoded_len(args: &[DebugArg<'_>]) -> usize {
    args.iter()
        .map(|a| match a {
            DebugArg::Int(_) | DebugArg::Addr(_) => 9,
            DebugArg::Str(s) | DebugArg::Text(s) => 3 + s.len().min(usize::from(u16::MAX)),
        })
        .sum()
}

/// Writes `args` at the start of `out`; returns the bytes written.
pub fn encode(out: &mut [u8], args: &[DebugArg<'_>], endian: Endian) -> Result<usize, ArgsError> {
    let need = encoded_len(args);
    if need > out.len() {
        return Err(ArgsError::NoRoom {
            need,
            room: out.len(),
        });
    }
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    let word = |v: u64| match endian {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    };
    for a in args {
        match *a {
            DebugArg::Int(v) => {
                put(&[ARG_INT]);
                put(&word(v));
            }
            DebugArg::Addr(v) => {
                put(&[ARG_ADDR]);
                put(&word(v));
            }
            DebugArg::Str(s) | DebugArg::Text(s) => {
                let tag = if matches!(a, DebugArg::Str(_)) {
                    ARG_STR
                } else {
                    ARG_TEXT
                };
                let s = &s[..s.len().min(usize::from(u16::MAX))];
                let n = s.len() as u16;
                put(&[tag]);
                put(&match endian {
                    Endian::Little => n.to_le_bytes(),
                    Endian::Big => n.to_be_bytes(),
                });
                put(s);
            }
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_layout_is_the_tables() {
        let mut out = [0u8; 64];
        let n = encode(
            &mut out,
            &[
                DebugArg::Int(0x41),
                DebugArg::Str(b"crtc"),
                DebugArg::Addr(1),
            ],
            Endian::Little,
        )
        .unwrap();
        assert_eq!(
            &out[..n],
            &[
                1, 0x41, 0, 0, 0, 0, 0, 0, 0, //
                2, 4, 0, b'c', b'r', b't', b'c', //
                3, 1, 0, 0, 0, 0, 0, 0, 0,
            ]
        );
    }

    #[test]
    fn damage_is_reported_where_it_is_and_ends_the_walk() {
        let bytes = [1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 9, 0, b'x'];
        let got: Vec<_> = DebugArgs::new(&bytes, Endian::Little).collect();
        assert_eq!(
            got,
            [Ok(DebugArg::Int(0)), Err(ArgsError::Truncated { at: 9 })]
        );
        let got: Vec<_> = DebugArgs::new(&[7, 1, 2], Endian::Little).collect();
        assert_eq!(got, [Err(ArgsError::UnknownTag { tag: 7, at: 0 })]);
    }

    fn arg() -> impl Strategy<Value = (u8, u64, Vec<u8>)> {
        (
            1u8..=4,
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
    }

    proptest! {
        #[test]
        fn what_is_encoded_reads_back(args in proptest::collection::vec(arg(), 0..12), big in any::<bool>()) {
            let args: Vec<DebugArg> = args.iter().map(|(t, v, s)| match t {
                1 => DebugArg::Int(*v),
                2 => DebugArg::Str(s),
                3 => DebugArg::Addr(*v),
                _ => DebugArg::Text(s),
            }).collect();
            let endian = if big { Endian::Big } else { Endian::Little };
            let mut out = vec![0u8; encoded_len(&args)];
            let n = encode(&mut out, &args, endian).unwrap();
            prop_assert_eq!(n, out.len());
            let back: Result<Vec<_>, _> = DebugArgs::new(&out, endian).collect();
            prop_assert_eq!(back.unwrap(), args);
        }

        #[test]
        fn any_bytes_walk_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let n = DebugArgs::new(&bytes, Endian::Little).count();
            prop_assert!(n <= bytes.len());
        }
    }
}
