//! The secret a recovered region's outputs are keyed with.

use pstore_ring::read::Region;
use sha2::{Digest, Sha256};

/// A digest of the whole region, which no output contains. The keys that
/// hash kernel pointers and redacted text derive from it, so the same
/// input gives the same output and nobody holding only the output can
/// test guesses against an identifier. It is made once per recovered
/// region: hashing 64 MiB is most of a quiet region's bundle on a slow
/// CPU, and each use hashing the region itself read it three times.
#[derive(Clone, Copy)]
pub struct RegionKey([u8; 32]);

impl RegionKey {
    /// Reads all of `region`.
    pub fn of(region: &Region) -> RegionKey {
        let mut h = Sha256::new();
        h.update(b"crashring region key v1\0");
        h.update(region.bytes());
        RegionKey(h.finalize().into())
    }

    /// The key for one use, named by `purpose`; one use's key tells
    /// nothing of another's.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(purpose);
        h.update(self.0);
        h.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::HeaderTrust;
    use pstore_ring::write::{format, RegionConfig, StreamSpec};

    fn region_bytes(tweak: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 64 << 10];
        format(&mut buf, &cfg).expect("region fits");
        tweak(&mut buf);
        buf
    }

    #[test]
    fn every_byte_of_the_region_and_the_purpose_change_the_key() {
        let a = region_bytes(|_| {});
        let b = region_bytes(|b| {
            let last = b.len() - 1;
            b[last] ^= 1;
        });
        let key = |bytes: &[u8]| {
            RegionKey::of(&Region::parse(bytes, HeaderTrust::Checksummed).expect("region"))
        };
        let (ka, kb) = (key(&a), key(&b));
        assert_eq!(ka.derive(b"x"), key(&a).derive(b"x"), "not deterministic");
        assert_ne!(
            ka.derive(b"x"),
            kb.derive(b"x"),
            "the last byte was not hashed"
        );
        assert_ne!(
            ka.derive(b"x"),
            ka.derive(b"y"),
            "the purpose was not hashed"
        );
    }
}
