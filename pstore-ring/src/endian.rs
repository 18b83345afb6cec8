//! Byte order as a runtime value, and unaligned integer fields that carry it.
//!
//! Every multi-byte integer in a region is stored in the byte order of the
//! machine that wrote it; the region header says which (see `FORMAT.md`,
//! "Byte order"). Layout structs therefore hold integers as byte arrays, and a
//! reader passes the region's [`Endian`] to every access.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The byte order a region was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    /// The byte order of the machine this code runs on.
    pub const NATIVE: Endian = if cfg!(target_endian = "little") {
        Endian::Little
    } else {
        Endian::Big
    };
}

macro_rules! endian_int {
    ($name:ident, $int:ty, $n:literal) => {
        #[doc = concat!("A `", stringify!($int), "` stored as ", stringify!($n), " bytes in a region's byte order.")]
        #[derive(Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
        #[repr(transparent)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            pub fn new(e: Endian, v: $int) -> Self {
                Self(match e {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                })
            }

            pub fn get(self, e: Endian) -> $int {
                match e {
                    Endian::Little => <$int>::from_le_bytes(self.0),
                    Endian::Big => <$int>::from_be_bytes(self.0),
                }
            }

            pub fn set(&mut self, e: Endian, v: $int) {
                *self = Self::new(e, v);
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{:02x?}", self.0)
            }
        }
    };
}

endian_int!(U16, u16, 2);
endian_int!(U32, u32, 4);
endian_int!(U64, u64, 8);
// Not in the region format; for other formats read with these types
// (makedumpfile's flattened records carry signed offsets).
endian_int!(I64, i64, 8);

/// Reads an integer at `offset` without any chance of panicking: `None` when
/// the bytes are not all there.
pub(crate) fn u16_at(data: &[u8], offset: usize, e: Endian) -> Option<u16> {
    let b: [u8; 2] = data.get(offset..)?.get(..2)?.try_into().ok()?;
    Some(U16(b).get(e))
}

pub(crate) fn u32_at(data: &[u8], offset: usize, e: Endian) -> Option<u32> {
    let b: [u8; 4] = data.get(offset..)?.get(..4)?.try_into().ok()?;
    Some(U32(b).get(e))
}

pub(crate) fn u64_at(data: &[u8], offset: usize, e: Endian) -> Option<u64> {
    let b: [u8; 8] = data.get(offset..)?.get(..8)?.try_into().ok()?;
    Some(U64(b).get(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_both_orders() {
        for e in [Endian::Little, Endian::Big] {
            assert_eq!(U32::new(e, 0x0102_0304).get(e), 0x0102_0304);
            assert_eq!(U64::new(e, u64::MAX - 5).get(e), u64::MAX - 5);
            assert_eq!(I64::new(e, -2).get(e), -2);
        }
        assert_eq!(U32::new(Endian::Big, 0x0102_0304).0, [1, 2, 3, 4]);
        assert_eq!(U32::new(Endian::Little, 0x0102_0304).0, [4, 3, 2, 1]);
        assert_eq!(I64::new(Endian::Big, -1).0, [0xff; 8]);
        assert_eq!(
            I64([0x80, 0, 0, 0, 0, 0, 0, 1]).get(Endian::Big),
            i64::MIN + 1
        );
    }

    #[test]
    fn reads_past_the_end_are_none() {
        let data = [1u8, 2, 3];
        assert_eq!(u16_at(&data, 1, Endian::Little), Some(0x0302));
        assert_eq!(u16_at(&data, 2, Endian::Little), None);
        assert_eq!(u32_at(&data, usize::MAX, Endian::Little), None);
        assert_eq!(u64_at(&data, 0, Endian::Big), None);
    }
}
