//! A gzip stream compressed on every core: one member, the same bytes
//! whatever the number of cores.
//!
//! As pigz does it: the input is cut into blocks, each block is deflated
//! on its own, primed with the 32 KiB before it (deflate's window, so
//! the ratio stays a single stream's), and ended by a sync flush, an
//! empty stored block that leaves the output on a byte boundary, so the
//! blocks' outputs join into one deflate stream; the last block ends it.
//! The CRC-32s of the blocks are combined in order. The bytes depend on
//! the input, the block size, the level and which blocks are stored
//! only.
//!
//! Unlike pigz, the input is not read in order: each block is read by
//! the core that compresses it ([`Source`]), so a bundle's staged files
//! are read on every core too instead of by one reader the compressors
//! wait on. A block the source says is compressed already is stored, not
//! deflated: deflate spends ten times as long on a byte it cannot shrink
//! as on a byte of text, for a few percent.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use rayon::prelude::*;
use std::io::{self, Write};
use std::ops::Range;

/// Deflate's window: what a block may refer back to.
const WINDOW: u64 = 32 << 10;

/// Input that can be read at any offset, from any core.
pub trait Source: Sync {
    /// Its length in bytes.
    fn len(&self) -> u64;
    /// Appends the bytes at `range` (within [`Source::len`]) to `out`.
    fn read_range(&self, range: Range<u64>, out: &mut Vec<u8>) -> io::Result<()>;
    /// Whether every byte of `range` is compressed already.
    fn compressed(&self, range: Range<u64>) -> bool;
}

/// Writes `input` to `out` as one gzip member at `level` (its compressed
/// blocks stored), in blocks of 1 MiB, 16 at a time (memory is about
/// twice that).
pub fn gzip(
    out: &mut impl Write,
    level: Compression,
    input: &(impl Source + ?Sized),
) -> io::Result<()> {
    gzip_in_blocks(out, level, input, 1 << 20, 16)
}

fn gzip_in_blocks(
    out: &mut impl Write,
    level: Compression,
    input: &(impl Source + ?Sized),
    block: u64,
    batch: u64,
) -> io::Result<()> {
    // No name, no time, no extra flags; the operating system is
    // "unknown" (255), so the bytes do not depend on where it ran.
    out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255])?;
    let len = input.len();
    // An empty input still needs the stream's final (empty) block.
    let count = len.div_ceil(block).max(1);
    let mut crc = Crc::new();
    for first in (0..count).step_by(batch as usize) {
        let blocks: Vec<io::Result<(Vec<u8>, Crc)>> = (first..(first + batch).min(count))
            .into_par_iter()
            .map(|i| {
                let start = i * block;
                let end = (start + block).min(len);
                let stored = input.compressed(start..end);
                // A stored block refers back to nothing: no window.
                let from = if stored {
                    start
                } else {
                    start.saturating_sub(WINDOW)
                };
                let mut read = Vec::with_capacity((end - from) as usize);
                input.read_range(from..end, &mut read)?;
                let (dictionary, data) = read.split_at((start - from) as usize);
                let mut crc = Crc::new();
                crc.update(data);
                let level = if stored { Compression::none() } else { level };
                Ok((deflate(level, dictionary, data, i + 1 == count)?, crc))
            })
            .collect();
        for b in blocks {
            let (deflated, block_crc) = b?;
            out.write_all(&deflated)?;
            crc.combine(&block_crc);
        }
    }
    out.write_all(&crc.sum().to_le_bytes())?;
    out.write_all(&crc.amount().to_le_bytes())
}

/// `data` as raw deflate, primed with `dictionary`, ended by a sync
/// flush, or by the stream's final block when `finish`.
fn deflate(
    level: Compression,
    dictionary: &[u8],
    data: &[u8],
    finish: bool,
) -> io::Result<Vec<u8>> {
    let mut c = Compress::new(level, false);
    if !dictionary.is_empty() {
        c.set_dictionary(dictionary).map_err(io::Error::other)?;
    }
    let flush = if finish {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    // Deflate cuts stored blocks where the output runs out of room: room
    // for all of them (at most 64 KiB each, 5 bytes of header) keeps the
    // cuts, and so the bytes, a function of the input alone.
    let room = if level == Compression::none() {
        data.len() + data.len() / 4096 + 64
    } else {
        data.len() / 2 + 64
    };
    let mut out = Vec::with_capacity(room);
    loop {
        let consumed = usize::try_from(c.total_in()).unwrap_or(usize::MAX);
        let status = c
            .compress_vec(&data[consumed.min(data.len())..], &mut out, flush)
            .map_err(io::Error::other)?;
        let all_in = c.total_in() == data.len() as u64;
        // A flush is complete when it left room in the output; the
        // final block, when deflate says the stream ended.
        let done = if finish {
            status == Status::StreamEnd
        } else {
            all_in && out.len() < out.capacity()
        };
        if done {
            return Ok(out);
        }
        out.reserve(out.capacity().max(64));
    }
}

#[cfg(test)]
pub(in crate::bundle) mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    /// Text-like input: repetitive enough to compress, varied enough
    /// that a lost window shows in the size.
    fn sample(len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 64);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line = format!(
                "cpu{} [{:>12}] sched_switch prev_pid={} next_pid={}\n",
                x % 4,
                x >> 40,
                x % 977,
                (x >> 8) % 977
            );
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(len);
        out
    }

    impl Source for [u8] {
        fn len(&self) -> u64 {
            <[u8]>::len(self) as u64
        }

        fn read_range(&self, range: Range<u64>, out: &mut Vec<u8>) -> io::Result<()> {
            let at = |n: u64| usize::try_from(n).map_err(io::Error::other);
            let bytes = self.get(at(range.start)?..at(range.end)?);
            out.extend_from_slice(bytes.ok_or_else(|| io::Error::other("a range past the input"))?);
            Ok(())
        }

        fn compressed(&self, _: Range<u64>) -> bool {
            false
        }
    }

    /// Whether `bytes` appear in `gz` as they are: a block's first
    /// 4 KiB do when it was stored (deflate stores at most 64 KiB a
    /// block, so a longer run is cut by headers).
    pub(in crate::bundle) fn holds_verbatim(gz: &[u8], bytes: &[u8]) -> bool {
        gz.windows(bytes.len()).any(|w| w == bytes)
    }

    fn gzip(data: &[u8], block: u64, batch: u64) -> Vec<u8> {
        let mut out = Vec::new();
        gzip_in_blocks(&mut out, Compression::new(2), data, block, batch)
            .expect("writing to memory");
        out
    }

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut d = GzDecoder::new(gz);
        d.read_to_end(&mut out).expect("a valid gzip stream");
        // One member: nothing may follow it.
        assert!(d.into_inner().is_empty(), "bytes after the gzip member");
        out
    }

    #[test]
    fn any_input_comes_back_whole_from_one_member() {
        for len in [0, 1, 4095, 4096, 4097, 3 * 4096, 40_000, 100_003] {
            let data = sample(len);
            for batch in [1, 3, 1000] {
                assert_eq!(gunzip(&gzip(&data, 4096, batch)), data, "{len} bytes");
            }
        }
    }

    #[test]
    fn the_bytes_do_not_depend_on_the_cores() {
        let data = sample(300_000);
        let on = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool")
                .install(|| gzip(&data, 4096, 5))
        };
        let one = on(1);
        assert_eq!(on(4), one);
        assert_eq!(gunzip(&one), data);
    }

    #[test]
    fn blocks_compress_as_well_as_one_stream() {
        let data = sample(400_000);
        let mut one = flate2::write::GzEncoder::new(Vec::new(), Compression::new(2));
        one.write_all(&data).expect("writing to memory");
        let one = one.finish().expect("writing to memory").len();
        // Blocks of 4 KiB, each with its flush: 2.3% larger than one
        // stream with the window before each, 7.8% without it.
        let blocks = gzip(&data, 4096, 8).len();
        assert!(
            blocks * 100 <= one * 104,
            "{blocks} bytes in blocks against {one} in one stream"
        );
    }

    /// Fails every read past `good` bytes, as a staged file that shrank.
    struct Shrunk<'a> {
        data: &'a [u8],
        good: u64,
    }

    impl Source for Shrunk<'_> {
        fn len(&self) -> u64 {
            self.data.len() as u64
        }

        fn read_range(&self, range: Range<u64>, out: &mut Vec<u8>) -> io::Result<()> {
            if range.end > self.good {
                return Err(io::Error::other(format!("nothing at {}", self.good)));
            }
            self.data.read_range(range, out)
        }

        fn compressed(&self, _: Range<u64>) -> bool {
            false
        }
    }

    /// Says the bytes at `packed` are compressed already.
    struct Packed<'a> {
        data: &'a [u8],
        packed: Range<u64>,
    }

    impl Source for Packed<'_> {
        fn len(&self) -> u64 {
            self.data.len() as u64
        }

        fn read_range(&self, range: Range<u64>, out: &mut Vec<u8>) -> io::Result<()> {
            self.data.read_range(range, out)
        }

        fn compressed(&self, range: Range<u64>) -> bool {
            self.packed.start <= range.start && range.end <= self.packed.end
        }
    }

    #[test]
    fn blocks_of_compressed_bytes_are_stored() {
        let data = sample(400_000);
        let packed = Packed {
            data: &data,
            packed: 100_000..300_000,
        };
        let gz = |threads| {
            let mut out = Vec::new();
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a thread pool")
                .install(|| gzip_in_blocks(&mut out, Compression::new(2), &packed, 65_536, 2))
                .expect("writing to memory");
            out
        };
        let one = gz(1);
        assert_eq!(gunzip(&one), data);
        assert_eq!(gz(3), one, "the bytes depend on the cores");
        // The blocks wholly in the range (131 072..262 144) as they are;
        // those it only touches deflated.
        let starts = |at: usize| holds_verbatim(&one, &data[at..at + 4096]);
        assert!(starts(131_072) && starts(196_608));
        assert!(!starts(65_536) && !starts(262_144));
        let plain = gzip(&data, 65_536, 2);
        assert!(one.len() > plain.len() + 65_536, "{} bytes", one.len());
    }

    #[test]
    fn a_failed_read_fails_the_stream() {
        let data = sample(50_000);
        let shrunk = Shrunk {
            data: &data,
            good: 30_000,
        };
        let err = gzip_in_blocks(&mut Vec::new(), Compression::new(2), &shrunk, 4096, 3)
            .expect_err("a stream with a hole in its input");
        assert_eq!(err.to_string(), "nothing at 30000");
    }
}
