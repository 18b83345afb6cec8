//! The kernel's `vsnprintf()` (lib/vsprintf.c), for debug messages the
//! module recorded unformatted: the callsite's format from the region's
//! table and the arguments in binary, formatted when read.
//!
//! The same format and the same argument values give the same bytes as
//! the kernel: its flags (`-+ #0`), field widths and precisions (digits
//! or `*`, as the kernel stores them: a width in 24 bits, a precision in
//! 16), length qualifiers (`hh h l ll L z t`), conversions (`d i u o x X
//! c s p %`), and its departures from C99 (`%#x` of 0 is `0x0`, a
//! precision does not cancel the `0` flag, `%.0d` of 0 is `0`). A
//! conversion the kernel does not know (`%n`, `%f`, ...) ends the line
//! there, as the kernel's `vsnprintf()` does.
//!
//! Pointers (`%p`) arrive as the recorder kept them: an address, or the
//! text the kernel formatted at record time for an extension that reads
//! through the pointer (`%pd`, `%pM`, `%pS`, ...), copied as it stands.
//! An address prints as `%px` does when the reader asked for raw
//! pointers; otherwise as the kernel's `%p` and `%pK` print it: NULL and
//! error pointers as they are, any other address as its identifier,
//! SipHash-2-4 of the address cut to 32 bits (`ptr_to_hashval()`), 8
//! zeros then 8 hex digits. The kernel's key is not in the region, so a
//! reader hashes with its own: identifiers match the kernel's in form
//! and in which pointers are equal, not in value. Without a key, an
//! address prints as the kernel's placeholder `(____ptrval____)`.
//!
//! Output is bounded (`limit` bytes: a reader gives what printk keeps of
//! a line, [`PRINTK_LINE_MAX`](crate::read::PRINTK_LINE_MAX)): a hostile
//! width costs arithmetic, not memory or time.

use alloc::vec::Vec;
use core::hash::Hasher;

/// `struct printf_spec`'s flags.
const SIGN: u8 = 1;
const LEFT: u8 = 2;
const PLUS: u8 = 4;
const SPACE: u8 = 8;
const ZEROPAD: u8 = 16;
const SMALL: u8 = 32;
const SPECIAL: u8 = 64;

/// What the kernel's 24-bit field width and 16-bit precision hold.
const FIELD_WIDTH_MAX: i32 = (1 << 23) - 1;
const PRECISION_MAX: i32 = (1 << 15) - 1;

/// The width of an integer argument, as the format's qualifier names it
/// (x86-64: `long`, `size_t` and `ptrdiff_t` are 64 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntKind {
    /// `hh`: `char`.
    Byte,
    /// `h`: `short`.
    Short,
    /// No qualifier: `int`.
    Int,
    /// `l`, `ll`, `L`, `z`, `t`: 64 bits.
    Long,
}

/// One argument, as the recorder kept it (pstore-ring's encoding).
pub use crate::debug_args::DebugArg as Arg;

/// Where the arguments come from, in the order the format takes them.
pub trait Args<'a> {
    fn next(&mut self) -> Result<Arg<'a>, ArgError>;
}

/// A recorded message's arguments, as pstore-ring walks them.
impl<'a> Args<'a> for crate::debug_args::DebugArgs<'a> {
    fn next(&mut self) -> Result<Arg<'a>, ArgError> {
        match Iterator::next(self) {
            None => Err(ArgError::Missing(0)),
            Some(Ok(arg)) => Ok(arg),
            Some(Err(e)) => Err(ArgError::Malformed(e)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("the arguments end before conversion {0} of the format")]
    Missing(usize),
    #[error("conversion {index} of the format takes {wanted}, and the recorded argument is {got}")]
    Mismatch {
        index: usize,
        wanted: &'static str,
        got: &'static str,
    },
    #[error("the recorded arguments are damaged: {0}")]
    Malformed(crate::debug_args::ArgsError),
}

/// How pointers are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointers {
    /// As `%px` shows them.
    Raw,
    /// Hashed with this SipHash key (one per output: the same address
    /// gives the same identifier throughout it). The key must be secret:
    /// with it, an address is found from its identifier by trying them all.
    Hashed([u8; 16]),
    /// As the kernel's placeholder, `(____ptrval____)`.
    Hidden,
}

/// What formatting a message produced.
#[derive(Debug, PartialEq, Eq)]
pub struct Formatted {
    /// At most the limit's bytes.
    pub text: Vec<u8>,
    /// The bytes the kernel would have produced without a limit.
    pub len: usize,
}

/// A conversion's spec, as `format_decode()` leaves it.
#[derive(Clone, Copy, Debug)]
struct Spec {
    flags: u8,
    width: i32,
    precision: i32,
    base: u8,
}

/// Formats `fmt` with `args` as the kernel's `vsnprintf()` would, keeping
/// at most `limit` bytes.
pub fn format<'a>(
    fmt: &[u8],
    args: &mut impl Args<'a>,
    pointers: &Pointers,
    limit: usize,
) -> Result<Formatted, ArgError> {
    let mut out = Out::new(limit);
    let mut taken = Taken { args, n: 0 };
    let mut i = 0;
    // The format ends at its first NUL, as a C string does.
    let fmt = &fmt[..memchr::memchr(0, fmt).unwrap_or(fmt.len())];
    while i < fmt.len() {
        let Some(pct) = memchr::memchr(b'%', &fmt[i..]) else {
            out.put(&fmt[i..]);
            break;
        };
        out.put(&fmt[i..i + pct]);
        i += pct + 1;
        let mut spec = Spec {
            flags: 0,
            width: -1,
            precision: -1,
            base: 10,
        };
        while let Some(&c) = fmt.get(i) {
            spec.flags |= match c {
                b'-' => LEFT,
                b'+' => PLUS,
                b' ' => SPACE,
                b'#' => SPECIAL,
                b'0' => ZEROPAD,
                _ => break,
            };
            i += 1;
        }
        if fmt.get(i).is_some_and(u8::is_ascii_digit) {
            spec.width = bitfield(skip_atoi(fmt, &mut i), 24);
        } else if fmt.get(i) == Some(&b'*') {
            i += 1;
            // set_field_width(), then format_decode()'s next call.
            let width = taken.int("a field width")? as u32 as i32;
            spec.width = if bitfield(width, 24) == width {
                width
            } else {
                width.clamp(-FIELD_WIDTH_MAX, FIELD_WIDTH_MAX)
            };
            if spec.width < 0 {
                spec.width = bitfield(spec.width.wrapping_neg(), 24);
                spec.flags |= LEFT;
            }
        }
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i).is_some_and(u8::is_ascii_digit) {
                spec.precision = bitfield(skip_atoi(fmt, &mut i), 16).max(0);
            } else if fmt.get(i) == Some(&b'*') {
                i += 1;
                // set_precision(), then format_decode()'s next call.
                let precision = taken.int("a precision")? as u32 as i32;
                spec.precision = if bitfield(precision, 16) == precision {
                    precision
                } else {
                    precision.clamp(0, PRECISION_MAX)
                }
                .max(0);
            }
            // A '.' with neither: the kernel leaves the precision unset.
        }
        let mut kind = IntKind::Int;
        if let Some(&q @ (b'h' | b'l' | b'L' | b'z' | b't')) = fmt.get(i) {
            i += 1;
            kind = match q {
                b'h' if fmt.get(i) == Some(&b'h') => {
                    i += 1;
                    IntKind::Byte
                }
                b'h' => IntKind::Short,
                b'l' if fmt.get(i) == Some(&b'l') => {
                    i += 1;
                    IntKind::Long
                }
                _ => IntKind::Long,
            };
        }
        let Some(&conversion) = fmt.get(i) else {
            // "%" at the end: the kernel's format_decode() finds NUL, an
            // unknown conversion, and stops.
            break;
        };
        i += 1;
        match conversion {
            b'%' => out.put(b"%"),
            b'c' => {
                let c = taken.int("a character")? as u8;
                let mut width = spec.width;
                if spec.flags & LEFT == 0 {
                    out.fill(b' ', take_pad(&mut width, 1));
                }
                out.put(&[c]);
                out.fill(b' ', take_pad(&mut width, 1));
            }
            b's' => match taken.next()? {
                Arg::Str(s) => string(&mut out, s, spec),
                other => return Err(taken.mismatch("a string", other)),
            },
            b'p' => {
                let ext_len = fmt[i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .count();
                let ext = &fmt[i..i + ext_len];
                i += ext_len;
                match taken.next()? {
                    Arg::Text(t) => out.put(t),
                    Arg::Addr(a) => pointer(&mut out, a, ext, spec, pointers),
                    other => return Err(taken.mismatch("a pointer", other)),
                }
            }
            b'o' | b'x' | b'X' | b'd' | b'i' | b'u' => {
                match conversion {
                    b'o' => spec.base = 8,
                    b'x' => {
                        spec.base = 16;
                        spec.flags |= SMALL;
                    }
                    b'X' => spec.base = 16,
                    b'd' | b'i' => spec.flags |= SIGN,
                    _ => {}
                }
                let raw = taken.int("an integer")?;
                number(&mut out, cast(raw, kind, spec.flags & SIGN != 0), spec);
            }
            // %n and every conversion the kernel does not know: its
            // vsnprintf() stops here.
            _ => break,
        }
    }
    Ok(out.finish())
}

/// The arguments, counted as the format takes them.
struct Taken<'r, A> {
    args: &'r mut A,
    n: usize,
}

impl<'a, A: Args<'a>> Taken<'_, A> {
    fn next(&mut self) -> Result<Arg<'a>, ArgError> {
        self.n += 1;
        self.args.next().map_err(|e| match e {
            ArgError::Missing(_) => ArgError::Missing(self.n),
            other => other,
        })
    }

    fn int(&mut self, wanted: &'static str) -> Result<u64, ArgError> {
        match self.next()? {
            Arg::Int(v) => Ok(v),
            other => Err(self.mismatch(wanted, other)),
        }
    }

    fn mismatch(&self, wanted: &'static str, got: Arg) -> ArgError {
        ArgError::Mismatch {
            index: self.n,
            wanted,
            got: match got {
                Arg::Int(_) => "an integer",
                Arg::Str(_) => "a string",
                Arg::Addr(_) => "an address",
                Arg::Text(_) => "formatted text",
            },
        }
    }
}

/// The kernel's `skip_atoi()`: decimal digits into an `int`, wrapping as
/// its arithmetic does on overflow.
fn skip_atoi(fmt: &[u8], i: &mut usize) -> i32 {
    let mut n: i32 = 0;
    while let Some(d) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        n = n.wrapping_mul(10).wrapping_add(i32::from(d - b'0'));
        *i += 1;
    }
    n
}

/// `value` stored into a signed bitfield of `bits` bits and read back.
fn bitfield(value: i32, bits: u32) -> i32 {
    (value << (32 - bits)) >> (32 - bits)
}

/// An integer argument as `vsnprintf()` reads it into its 64-bit `num`:
/// cut to the qualifier's width, then sign-extended for `%d`/`%i`
/// (`char`, `short` and `int` arguments arrive as `int`s, so the cut of
/// a `%hhu` or `%hu` happens here too).
fn cast(raw: u64, kind: IntKind, signed: bool) -> u64 {
    match (kind, signed) {
        (IntKind::Byte, false) => raw as u8 as u64,
        (IntKind::Byte, true) => raw as i8 as i64 as u64,
        (IntKind::Short, false) => raw as u16 as u64,
        (IntKind::Short, true) => raw as i16 as i64 as u64,
        (IntKind::Int, false) => raw as u32 as u64,
        (IntKind::Int, true) => raw as i32 as i64 as u64,
        (IntKind::Long, _) => raw,
    }
}

/// How many times `while (--width >= 0)` runs, leaving `width` as the
/// loop does; `stop` is 0 for that loop, 1 for `while (--width > 0)`.
fn take_pad(width: &mut i32, stop: i32) -> usize {
    let n = (*width - stop).max(0);
    *width = (*width).min(stop) - 1;
    n as usize
}

/// The kernel's `number()`.
fn number(out: &mut Out, mut num: u64, spec: Spec) {
    let Spec {
        mut flags,
        mut width,
        mut precision,
        base,
    } = spec;
    let need_prefix = flags & SPECIAL != 0 && base != 10;
    let is_zero = num == 0;
    let locase = flags & SMALL;
    if flags & LEFT != 0 {
        flags &= !ZEROPAD;
    }
    let mut sign = None;
    if flags & SIGN != 0 {
        if (num as i64) < 0 {
            sign = Some(b'-');
            num = (num as i64).wrapping_neg() as u64;
            width -= 1;
        } else if flags & PLUS != 0 {
            sign = Some(b'+');
            width -= 1;
        } else if flags & SPACE != 0 {
            sign = Some(b' ');
            width -= 1;
        }
    }
    if need_prefix {
        if base == 16 {
            width -= 2;
        } else if !is_zero {
            width -= 1;
        }
    }
    let mut digits = [0u8; 24];
    let mut n = 0;
    loop {
        let d = (num % u64::from(base)) as u8;
        digits[n] = b"0123456789ABCDEF"[usize::from(d)] | if d > 9 { locase } else { 0 };
        n += 1;
        num /= u64::from(base);
        if num == 0 {
            break;
        }
    }
    let n_i32 = n as i32;
    if n_i32 > precision {
        precision = n_i32;
    }
    width -= precision;
    if flags & (ZEROPAD | LEFT) == 0 {
        out.fill(b' ', take_pad(&mut width, 0));
    }
    if let Some(s) = sign {
        out.put(&[s]);
    }
    if need_prefix {
        if base == 16 || !is_zero {
            out.put(b"0");
        }
        if base == 16 {
            out.put(&[b'X' | locase]);
        }
    }
    if flags & LEFT == 0 {
        let pad = if flags & ZEROPAD != 0 { b'0' } else { b' ' };
        out.fill(pad, take_pad(&mut width, 0));
    }
    out.fill(b'0', (precision - n_i32).max(0) as usize);
    for d in digits[..n].iter().rev() {
        out.put(&[*d]);
    }
    out.fill(b' ', take_pad(&mut width, 0));
}

/// The kernel's `string()` for bytes already read: at most `precision`
/// of them (all when it is -1), up to a NUL, padded to the width.
fn string(out: &mut Out, s: &[u8], spec: Spec) {
    let s = &s[..memchr::memchr(0, s).unwrap_or(s.len())];
    let s = match usize::try_from(spec.precision) {
        Ok(p) => &s[..s.len().min(p)],
        Err(_) => s,
    };
    let spaces = usize::try_from(spec.width)
        .unwrap_or(0)
        .saturating_sub(s.len());
    if spec.flags & LEFT == 0 {
        out.fill(b' ', spaces);
    }
    out.put(s);
    if spec.flags & LEFT != 0 {
        out.fill(b' ', spaces);
    }
}

/// An address for `%p` with extension `ext`: `%px`, raw pointers, NULL
/// and error pointers as `pointer_string()` prints them, the rest as
/// `ptr_to_id()` does.
fn pointer(out: &mut Out, addr: u64, ext: &[u8], mut spec: Spec, pointers: &Pointers) {
    /// `IS_ERR_OR_NULL()`: the last 4095 values are errors.
    const MAX_ERRNO: u64 = 4095;
    let as_is = ext.first() == Some(&b'x') || addr == 0 || addr > u64::MAX - MAX_ERRNO;
    let shown = match pointers {
        _ if as_is => addr,
        Pointers::Raw => addr,
        Pointers::Hashed(key) => {
            let mut h = siphasher::sip::SipHasher24::new_with_key(key);
            h.write_u64(addr);
            h.finish() & 0xffff_ffff
        }
        Pointers::Hidden => {
            // ptr_to_id() sets the pointer's width, error_string() a
            // precision of the same where the format gave none.
            spec.width = 16;
            if spec.precision == -1 {
                spec.precision = 16;
            }
            return string(out, b"(____ptrval____)", spec);
        }
    };
    spec.base = 16;
    spec.flags |= SMALL;
    if spec.width == -1 {
        spec.width = 16;
        spec.flags |= ZEROPAD;
    }
    number(out, shown, spec);
}

/// Bytes out, at most `limit` kept, every one counted.
struct Out {
    text: Vec<u8>,
    limit: usize,
    len: usize,
}

impl Out {
    fn new(limit: usize) -> Out {
        Out {
            text: Vec::new(),
            limit,
            len: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        let room = self.limit.saturating_sub(self.text.len());
        self.text.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.len = self.len.saturating_add(bytes.len());
    }

    fn fill(&mut self, byte: u8, n: usize) {
        let room = self.limit.saturating_sub(self.text.len());
        self.text.resize(self.text.len() + n.min(room), byte);
        self.len = self.len.saturating_add(n);
    }

    fn finish(self) -> Formatted {
        Formatted {
            text: self.text,
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Arguments from a list.
    struct List<'a>(std::vec::IntoIter<Arg<'a>>);

    impl<'a> Args<'a> for List<'a> {
        fn next(&mut self) -> Result<Arg<'a>, ArgError> {
            self.0.next().ok_or(ArgError::Missing(0))
        }
    }

    fn kernel(fmt: &str, args: Vec<Arg>) -> String {
        let out = format(
            fmt.as_bytes(),
            &mut List(args.into_iter()),
            &Pointers::Raw,
            992,
        )
        .unwrap();
        assert!(out.text.len() <= 992 && out.len >= out.text.len());
        String::from_utf8(out.text).unwrap()
    }

    /// What lib/vsprintf.c does where C99 (and glibc) differ, read off its
    /// number(), format_decode() and vsnprintf().
    #[test]
    fn the_kernels_departures_from_c99() {
        use Arg::Int;
        for (fmt, args, want) in [
            // number(): the prefix of %#x does not depend on the value.
            ("%#x", vec![Int(0)], "0x0"),
            ("%#o", vec![Int(0)], "0"),
            ("%#o", vec![Int(8)], "010"),
            // At least one digit, whatever the precision.
            ("%.0d", vec![Int(0)], "0"),
            // A precision does not cancel the 0 flag.
            ("%08.3d", vec![Int(5)], "00000005"),
            ("%#.3o", vec![Int(8)], "0010"),
            // '.' alone leaves the precision unset (C99: zero).
            ("%05.d", vec![Int(42)], "00042"),
            // A negative '*' precision is zero (C99: none).
            ("[%.*s]", vec![Int(-1i64 as u64), Arg::Str(b"abc")], "[]"),
            // A negative '*' width left-justifies.
            ("[%*d]", vec![Int(-4i64 as u64), Int(7)], "[7   ]"),
            // The width is kept in 24 signed bits: this one wraps negative
            // and pads nothing.
            ("[%99999999d]", vec![Int(1)], "[1]"),
            // The qualifier's cast.
            (
                "%hhd %hhu %hd %hu",
                vec![Int(0x1ff), Int(0x1ff), Int(0x18000), Int(0x18000)],
                "-1 255 -32768 32768",
            ),
            (
                "%d %u %ld",
                vec![Int(u64::MAX), Int(u64::MAX), Int(u64::MAX)],
                "-1 4294967295 -1",
            ),
            (
                "%llx %zu %td",
                vec![Int(u64::MAX), Int(u64::MAX), Int(u64::MAX)],
                "ffffffffffffffff 18446744073709551615 -1",
            ),
            (
                "%c|%-3c|%3c",
                vec![Int(0x141), Int(u64::from(b'b')), Int(u64::from(b'c'))],
                "A|b  |  c",
            ),
            ("%5%|%s", vec![Arg::Str(b"x\0y")], "%|x"),
            // Conversions the kernel does not know end the line.
            ("a%nb", vec![Int(1)], "a"),
            ("a %f b", vec![], "a "),
            ("a %zz", vec![Int(1)], "a "),
            ("trailing %", vec![], "trailing "),
            ("trailing %-0", vec![], "trailing "),
            // The format ends at its NUL.
            ("a\0%d", vec![], "a"),
        ] {
            assert_eq!(kernel(fmt, args), want, "{fmt:?}");
        }
    }

    #[test]
    fn pointers_raw_hashed_or_as_recorded() {
        let addr = 0xffff_8880_1234_5678;
        let fmt = b"%p %px %pK %pS";
        let args = || {
            List(
                vec![
                    Arg::Addr(addr),
                    Arg::Addr(addr),
                    Arg::Addr(addr),
                    Arg::Text(b"drm_atomic_commit+0x1c/0x80"),
                ]
                .into_iter(),
            )
        };
        let raw = format(fmt, &mut args(), &Pointers::Raw, 992).unwrap();
        assert_eq!(
            raw.text,
            b"ffff888012345678 ffff888012345678 ffff888012345678 drm_atomic_commit+0x1c/0x80"
        );
        let hashed = String::from_utf8(
            format(fmt, &mut args(), &Pointers::Hashed([7; 16]), 992)
                .unwrap()
                .text,
        )
        .unwrap();
        let words: Vec<&str> = hashed.split(' ').collect();
        // As ptr_to_id() prints: 32 bits of a keyed hash, in 16 digits.
        assert!(
            words[0].len() == 16 && words[0].starts_with("00000000"),
            "{hashed}"
        );
        assert_eq!(words[0], words[2], "one address, one identifier");
        assert_eq!(words[1], "ffff888012345678", "%px is raw");
        let other = format(fmt, &mut args(), &Pointers::Hashed([8; 16]), 992)
            .unwrap()
            .text;
        assert_ne!(
            &other[..16],
            words[0].as_bytes(),
            "another key, another identifier"
        );
        // A width replaces the zero padding.
        assert_eq!(kernel("[%-8px]", vec![Arg::Addr(0xab)]), "[ab      ]");
        // NULL and error pointers are not addresses: shown as they are.
        let as_is = format(
            b"%p %p",
            &mut List(vec![Arg::Addr(0), Arg::Addr(-22i64 as u64)].into_iter()),
            &Pointers::Hashed([7; 16]),
            992,
        )
        .unwrap();
        assert_eq!(as_is.text, b"0000000000000000 ffffffffffffffea");
        let hidden = format(b"%p|%20p", &mut args(), &Pointers::Hidden, 992).unwrap();
        // ptr_to_id() replaces the format's width with the pointer's.
        assert_eq!(hidden.text, b"(____ptrval____)|(____ptrval____)");
    }

    #[test]
    fn recorded_arguments_format_and_damage_is_named() {
        use crate::debug_args::{encode, encoded_len, DebugArgs};
        use crate::Endian;
        let args = [Arg::Int(41), Arg::Str(b"HDMI-A-1"), Arg::Int(3)];
        let mut bytes = vec![0u8; encoded_len(&args)];
        encode(&mut bytes, &args, Endian::Little).unwrap();
        let fmt = b"crtc-%d connector %s: %u planes";
        let out = format(
            fmt,
            &mut DebugArgs::new(&bytes, Endian::Little),
            &Pointers::Raw,
            992,
        )
        .unwrap();
        assert_eq!(out.text, b"crtc-41 connector HDMI-A-1: 3 planes");
        let err = format(
            fmt,
            &mut DebugArgs::new(&bytes[..12], Endian::Little),
            &Pointers::Raw,
            992,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the recorded arguments are damaged: the arguments end inside the argument at byte 9"
        );
    }

    #[test]
    fn a_hostile_format_costs_bounded_memory_and_says_what_is_wrong() {
        let out = format(
            b"%8388607d%8388607s",
            &mut List(vec![Arg::Int(1), Arg::Str(b"")].into_iter()),
            &Pointers::Raw,
            100,
        )
        .unwrap();
        assert_eq!(out.text.len(), 100);
        assert_eq!(out.len, 2 * 8_388_607);
        let err = format(
            b"%d %s",
            &mut List(vec![Arg::Int(1)].into_iter()),
            &Pointers::Raw,
            100,
        )
        .unwrap_err();
        assert_eq!(err, ArgError::Missing(2));
        let err = format(
            b"%d %s",
            &mut List(vec![Arg::Int(1), Arg::Int(2)].into_iter()),
            &Pointers::Raw,
            100,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "conversion 2 of the format takes a string, and the recorded argument is an integer"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]


        /// Any format and any arguments: no panic, the limit held.
        #[test]
        fn never_panics(fmt in proptest::collection::vec(any::<u8>(), 0..64), args in proptest::collection::vec((0u8..4, any::<u64>(), proptest::collection::vec(any::<u8>(), 0..8)), 0..8), limit in 0usize..200) {
            let args: Vec<Arg> = args.iter().map(|(k, v, b)| match k {
                0 => Arg::Int(*v),
                1 => Arg::Str(b),
                2 => Arg::Addr(*v),
                _ => Arg::Text(b),
            }).collect();
            if let Ok(out) = format(&fmt, &mut List(args.into_iter()), &Pointers::Hashed([1; 16]), limit) {
                prop_assert!(out.text.len() <= limit && out.len >= out.text.len());
            }
        }
    }
}
