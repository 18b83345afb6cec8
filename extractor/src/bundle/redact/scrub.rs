//! What counts as a kernel address, and how redaction finds and hashes it:
//! the keyed hasher, and the scrubbing of text and binary data.
//!
//! What counts as a kernel address depends on the region's word size:
//!
//! - 64-bit regions: `0xffff000000000000` and up, written as exactly 16
//!   hex digits in text (every 64-bit kernel address has its top bits
//!   set, so no shorter spelling exists).
//! - 32-bit regions: `0xbf000000` and up (the kernel's half of the
//!   default 3G/1G split, x86-32's and ARM's, with ARM's modules 16 MiB
//!   below it), written as exactly 8 hex digits. Not every 8-digit number
//!   is an address, so smaller ones are left alone; the cost is that an
//!   8-digit value that high which is no address (a checksum, a status
//!   word) is hashed too, and that kernels built with a 2G/2G or 1G/3G
//!   split have addresses below the range, which are not.
//!
//! In both, the last 4095 values (error pointers, which only say which
//! error occurred) are kept. Addresses are looked for in pointer fields,
//! in integer fields of the word's size or more (`u64`/`s64`, and
//! `u32`/`s32` in 32-bit regions), in text, and in binary fields and
//! undecodable payloads as words of the region's byte order at every
//! offset. An oops's `Code:` line is masked: its bytes are machine code,
//! whose immediates and displacements carry kernel addresses that cannot
//! be told apart from opcodes without the dead kernel's image, so each
//! hex digit becomes `x` (the line keeps its shape and the `<..>` marking
//! the faulting byte).

use crate::recover::RegionKey;
use pstore_ring::endian::Endian;
use pstore_ring::read::Region;
use pstore_ring::schema::{FieldKind, Value};
use sha2::{Digest, Sha256};

/// The keyed hasher: SHA-256 over a key derived from the region's.
pub(super) struct Hasher {
    pub(super) key: [u8; 32],
}

impl Hasher {
    pub(super) fn new(key: &RegionKey) -> Hasher {
        Hasher {
            key: key.derive(b"crashring redaction key v2\0"),
        }
    }

    fn digest(&self, what: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(what);
        h.finalize().into()
    }

    pub(super) fn u64(&self, what: &[u8]) -> u64 {
        let d = self.digest(what);
        u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    }

    /// A kernel address becomes 32 bits of hash, zero-extended: the shape
    /// of the kernel's own hashed `%p`, which kernel developers know. In a
    /// 32-bit region, 31 bits: below every kernel address, so a hash is
    /// never taken for one.
    pub(super) fn pointer(&self, addr: u64, word: Word) -> u64 {
        let h = self.u64(&addr.to_be_bytes());
        match word {
            Word::W64 => h >> 32,
            Word::W32 => h >> 33,
        }
    }

    /// A hashed field value, as text: `h:` and 16 hex digits.
    pub(super) fn text(&self, value: &[u8]) -> Vec<u8> {
        format!("h:{:016x}", self.u64(value)).into_bytes()
    }
}

/// A region's word size: what its kernel addresses look like (see the
/// module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Word {
    W32,
    W64,
}

impl Word {
    pub(super) fn of(region: &Region) -> Word {
        if region.header.word_size == 4 {
            Word::W32
        } else {
            Word::W64
        }
    }

    pub(super) fn bytes(self) -> usize {
        match self {
            Word::W32 => 4,
            Word::W64 => 8,
        }
    }

    /// Whether `addr` is a kernel address worth hiding: in the kernel's
    /// part of the address space, and not an error pointer (the last 4095
    /// values), which says only which error occurred. NULL and small
    /// numbers are no secret either.
    pub(super) fn is_kernel(self, addr: u64) -> bool {
        match self {
            Word::W64 => (0xffff_0000_0000_0000..0u64.wrapping_sub(4095)).contains(&addr),
            Word::W32 => (0xbf00_0000..0x1_0000_0000 - 4095).contains(&addr),
        }
    }

    /// The address an integer field holds, if it is one: fields narrower
    /// than the word cannot hold one; a signed field holds it
    /// sign-extended.
    pub(super) fn address_in(self, kind: FieldKind, v: &Value) -> Option<u64> {
        let wide = matches!(kind, FieldKind::U64 | FieldKind::I64);
        let word = matches!(kind, FieldKind::U32 | FieldKind::I32);
        let addr = match (*v, self) {
            (Value::Unsigned(x), Word::W64) if wide => x,
            (Value::Signed(x), Word::W64) if wide => x as u64,
            (Value::Unsigned(x), Word::W32) if wide || word => x,
            (Value::Signed(x), Word::W32) if wide || word => {
                u64::from(i32::try_from(x).ok()? as u32)
            }
            _ => return None,
        };
        self.is_kernel(addr).then_some(addr)
    }
}

/// Replaces every kernel address written as the word's number of hex
/// digits (with or without `0x`) in `text` by its hash, keeping the
/// text's length so a fixed-size field still fits; returns how many were
/// replaced.
pub(super) fn scrub_pointers(text: &mut [u8], hasher: &Hasher, word: Word) -> u64 {
    let digits = word.bytes() * 2;
    let mut replaced = 0;
    let mut at = 0;
    while at + digits <= text.len() {
        let starts_token = token_starts(text, at);
        let ends_token = text
            .get(at + digits)
            .is_none_or(|b| !b.is_ascii_alphanumeric());
        let token = &text[at..at + digits];
        if starts_token && ends_token && token.iter().all(u8::is_ascii_hexdigit) {
            let addr = std::str::from_utf8(token)
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok());
            if let Some(addr) = addr.filter(|&a| word.is_kernel(a)) {
                let hashed = format!("{:0digits$x}", hasher.pointer(addr, word));
                text[at..at + digits].copy_from_slice(hashed.as_bytes());
                replaced += 1;
            }
            at += digits;
        } else {
            at += 1;
        }
    }
    replaced
}

/// Whether a token can start at `at`: nothing alphanumeric just before
/// it, or a `0x` that nothing alphanumeric precedes.
fn token_starts(text: &[u8], at: usize) -> bool {
    let before = |n: usize| at.checked_sub(n).map(|i| text[i]);
    let free = |b: Option<u8>| b.is_none_or(|b| !b.is_ascii_alphanumeric());
    free(before(1))
        || (matches!(before(1), Some(b'x' | b'X')) && before(2) == Some(b'0') && free(before(3)))
}

/// Masks the code of every oops `Code:` line in `text`: the tokens after
/// `Code:` that are bytes, halfwords or words in hex (x86 `48 89 e5`,
/// Thumb `4b06`, arm64 `d503233f`), each optionally in `<..>` or `(..)`
/// (the faulting one), have their digits replaced by `x`. The first
/// other token ends the code, so a `Code: Unable to access opcode bytes`
/// line keeps its words. Returns how many lines were masked.
pub(super) fn mask_code(text: &mut [u8]) -> u64 {
    let mut masked = 0;
    let mut from = 0;
    while let Some(found) = memchr::memmem::find(&text[from..], b"Code:") {
        let start = from + found;
        from = start + 5;
        if start > 0 && text[start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut any = false;
        let mut at = from;
        while text.get(at) == Some(&b' ') {
            let begin = at + 1;
            let len = text[begin..]
                .iter()
                .take_while(|b| b.is_ascii_hexdigit() || b"<>()".contains(b))
                .count();
            let token = &mut text[begin..begin + len];
            let digits = token.iter().filter(|b| b.is_ascii_hexdigit()).count();
            let wrapped = matches!(token, [b'<', .., b'>'] | [b'(', .., b')']);
            if !matches!(digits, 2 | 4 | 8) || digits + 2 * usize::from(wrapped) != len {
                break;
            }
            token
                .iter_mut()
                .filter(|b| b.is_ascii_hexdigit())
                .for_each(|b| *b = b'x');
            any = true;
            at = begin + len;
        }
        masked += u64::from(any);
        from = at.max(from);
    }
    masked
}

/// Replaces every word of binary data (in the region's byte order, at
/// any offset: nothing says where a field's words are aligned) that
/// holds a kernel address by its hash; returns how many were replaced.
pub(super) fn scrub_binary(data: &mut [u8], e: Endian, word: Word, hasher: &Hasher) -> u64 {
    let n = word.bytes();
    let value = |data: &[u8], at: usize| {
        let mut b = [0u8; 8];
        match e {
            Endian::Little => {
                b[..n].copy_from_slice(&data[at..at + n]);
                u64::from_le_bytes(b)
            }
            Endian::Big => {
                b[8 - n..].copy_from_slice(&data[at..at + n]);
                u64::from_be_bytes(b)
            }
        }
    };
    let hit = |data: &[u8], at: usize| at + n <= data.len() && word.is_kernel(value(data, at));
    let mut replaced = 0;
    let mut at = 0;
    while at + n <= data.len() {
        if !hit(data, at) {
            at += 1;
            continue;
        }
        // An address's top bytes are all ones, so windows a byte or two
        // off it look like addresses too: in little-endian order the
        // address is the last of such a run of windows, in big-endian the
        // first. (Should a neighbouring 0xff byte lengthen the run, a
        // window a byte off is hashed instead: the address is destroyed
        // all the same, only its hash then matches no other.)
        if e == Endian::Little {
            while hit(data, at + 1) {
                at += 1;
            }
        }
        let h = hasher.pointer(value(data, at), word);
        match e {
            Endian::Little => data[at..at + n].copy_from_slice(&h.to_le_bytes()[..n]),
            Endian::Big => data[at..at + n].copy_from_slice(&h.to_be_bytes()[8 - n..]),
        }
        replaced += 1;
        at += n;
    }
    replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_addresses_in_text_are_hashed_in_place() {
        let hasher = Hasher { key: [7; 32] };
        let mut text = b"RIP: 0010:foo+0x1/0x2 at ffffffff81234567, 0xffff888012345678 err fffffffffffffff4 user 00007ffd12345678 xffffffff81234567 short c1234567".to_vec();
        let before = text.clone();
        assert_eq!(scrub_pointers(&mut text, &hasher, Word::W64), 2);
        assert_eq!(text.len(), before.len());
        let s = String::from_utf8(text).unwrap();
        assert!(!s.contains("ffffffff81234567,"), "{s}");
        assert!(!s.contains("ffff888012345678"), "{s}");
        assert!(s.contains(&format!(
            "at {:016x},",
            hasher.pointer(0xffff_ffff_8123_4567, Word::W64)
        )));
        // Error pointers, user addresses, hex inside a longer word and
        // 8 digits (no 64-bit kernel address) stay.
        assert!(s.contains("fffffffffffffff4"));
        assert!(s.contains("00007ffd12345678"));
        assert!(s.contains("xffffffff81234567"));
        assert!(s.contains("short c1234567"));
    }

    #[test]
    fn a_32_bit_region_has_8_digit_addresses_in_the_kernel_range() {
        let hasher = Hasher { key: [7; 32] };
        let mut text = b"at c1234567+0x10, module bf801000, 0xf8a01234 err fffffff4 user 7fff1234 count 12345678 id 0000000012345678 c1234567a".to_vec();
        assert_eq!(scrub_pointers(&mut text, &hasher, Word::W32), 3);
        let s = String::from_utf8(text).unwrap();
        for gone in ["c1234567+", "bf801000", "f8a01234"] {
            assert!(!s.contains(gone), "{s}");
        }
        let h = hasher.pointer(0xc123_4567, Word::W32);
        assert!(s.contains(&format!("at {h:08x}+0x10")), "{s}");
        // Below the kernel's range, error pointers, longer numbers stay;
        // a hash is never in the range itself.
        for kept in [
            "fffffff4",
            "7fff1234",
            "12345678",
            "0000000012345678",
            "c1234567a",
        ] {
            assert!(s.contains(kept), "{kept}: {s}");
        }
        assert!(!Word::W32.is_kernel(h));
    }

    #[test]
    fn oops_code_bytes_are_masked_and_nothing_else() {
        let mut x86 = b"Code: 48 c7 c7 a0 12 34 82 e8 <0f> 0b 48 89".to_vec();
        assert_eq!(mask_code(&mut x86), 1);
        assert_eq!(x86, b"Code: xx xx xx xx xx xx xx xx <xx> xx xx xx");
        let mut arm64 = b"[   12.5] Code: d503233f a9bf7bfd (d4210000) 910003fd\r\n".to_vec();
        assert_eq!(mask_code(&mut arm64), 1);
        assert_eq!(
            arm64,
            b"[   12.5] Code: xxxxxxxx xxxxxxxx (xxxxxxxx) xxxxxxxx\r\n"
        );
        let mut json = br#"{"MESSAGE":"Code: 0f 0b","X":"Code: ab"}"#.to_vec();
        assert_eq!(mask_code(&mut json), 2);
        assert_eq!(json, br#"{"MESSAGE":"Code: xx xx","X":"Code: xx"}"#);
        for kept in [
            &b"Code: Unable to access opcode bytes at 0xffffffff81000000."[..],
            b"ErrCode: 12 34",
            b"Code: 123 45",
        ] {
            let mut text = kept.to_vec();
            assert_eq!(mask_code(&mut text), 0);
            assert_eq!(text, kept);
        }
    }

    #[test]
    fn binary_words_holding_addresses_are_hashed_at_any_offset() {
        let hasher = Hasher { key: [7; 32] };
        let p = 0xffff_8880_0000_1234u64;
        let mut data = vec![1u8];
        data.extend_from_slice(&p.to_le_bytes());
        data.extend_from_slice(&0x1234u64.to_le_bytes());
        assert_eq!(
            scrub_binary(&mut data, Endian::Little, Word::W64, &hasher),
            1
        );
        assert_eq!(data[1..9], hasher.pointer(p, Word::W64).to_le_bytes());
        let mut data = vec![0, 0, 0xc1, 0x23, 0x45, 0x67, 0x7f, 0, 0, 0];
        assert_eq!(scrub_binary(&mut data, Endian::Big, Word::W32, &hasher), 1);
        let h = hasher.pointer(0xc123_4567, Word::W32) as u32;
        assert_eq!(data[2..6], h.to_be_bytes());
    }

    #[test]
    fn integer_fields_of_the_word_size_hold_addresses() {
        let w64 = Word::W64;
        let k = 0xffff_ffff_8100_0000u64;
        assert_eq!(w64.address_in(FieldKind::U64, &Value::Unsigned(k)), Some(k));
        assert_eq!(
            w64.address_in(FieldKind::I64, &Value::Signed(k as i64)),
            Some(k)
        );
        assert_eq!(w64.address_in(FieldKind::U64, &Value::Unsigned(42)), None);
        assert_eq!(
            w64.address_in(FieldKind::U32, &Value::Unsigned(0xc100_0000)),
            None
        );
        let w32 = Word::W32;
        let k = 0xc100_0000u64;
        assert_eq!(w32.address_in(FieldKind::U32, &Value::Unsigned(k)), Some(k));
        let signed = Value::Signed(i64::from(k as u32 as i32));
        assert_eq!(w32.address_in(FieldKind::I32, &signed), Some(k));
        assert_eq!(w32.address_in(FieldKind::I64, &signed), Some(k));
        assert_eq!(
            w32.address_in(FieldKind::U16, &Value::Unsigned(0xc100)),
            None
        );
        assert_eq!(
            w32.address_in(FieldKind::U32, &Value::Unsigned(0xffff_fff4)),
            None
        );
    }

    /// A region of `word_size` with one event of a type holding a u64, a
    /// binary and a text field, each with an address; the same address
    #[test]
    fn the_same_pointer_hashes_the_same_way_and_keys_differ() {
        let a = Hasher { key: [1; 32] };
        let b = Hasher { key: [2; 32] };
        let p = 0xffff_ffff_8100_0000;
        assert_eq!(a.pointer(p, Word::W64), a.pointer(p, Word::W64));
        assert_ne!(a.pointer(p, Word::W64), b.pointer(p, Word::W64));
        assert!(a.pointer(p, Word::W64) <= u64::from(u32::MAX));
    }
}
