//! A gzip stream compressed on every core: one member, the same bytes
//! whatever the number of cores.
//!
//! As pigz does it: the input is cut into blocks, each block is deflated
//! on its own, primed with the 32 KiB before it (deflate's window, so
//! the ratio stays a single stream's), and ended by a sync flush, an
//! empty stored block that leaves the output on a byte boundary, so the
//! blocks' outputs join into one deflate stream; the last block ends it.
//! The CRC-32s of the blocks are combined in order. The bytes depend on
//! the input, the block size and the level only.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use rayon::prelude::*;
use std::io::{self, Write};

/// Deflate's window: what a block may refer back to.
const WINDOW: usize = 32 << 10;

/// A gzip writer whose blocks are compressed on every core. Call
/// [`GzWriter::finish`]: dropping it leaves the stream unfinished.
pub struct GzWriter<W: Write> {
    out: W,
    level: Compression,
    block: usize,
    /// Blocks compressed at once; memory is about twice this many blocks.
    batch: usize,
    /// The last `window` bytes already compressed, then the input not
    /// yet compressed.
    pending: Vec<u8>,
    window: usize,
    crc: Crc,
}

impl<W: Write> GzWriter<W> {
    /// A stream to `out` at `level`, in blocks of 1 MiB, 16 at a time.
    pub fn new(out: W, level: Compression) -> io::Result<GzWriter<W>> {
        Self::with_blocks(out, level, 1 << 20, 16)
    }

    fn with_blocks(
        mut out: W,
        level: Compression,
        block: usize,
        batch: usize,
    ) -> io::Result<GzWriter<W>> {
        // No name, no time, no extra flags; the operating system is
        // "unknown" (255), so the bytes do not depend on where it ran.
        out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255])?;
        Ok(GzWriter {
            out,
            level,
            block,
            batch,
            pending: Vec::with_capacity(block * batch + WINDOW),
            window: 0,
            crc: Crc::new(),
        })
    }

    /// Compresses what is pending, ends the stream with its CRC-32 and
    /// size, and returns the destination.
    pub fn finish(mut self) -> io::Result<W> {
        self.compress(true)?;
        self.out.write_all(&self.crc.sum().to_le_bytes())?;
        self.out.write_all(&self.crc.amount().to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Compresses the pending input's blocks, in parallel, and writes
    /// them in order; `last` ends the deflate stream with the last one.
    fn compress(&mut self, last: bool) -> io::Result<()> {
        let input = &self.pending[self.window..];
        let mut starts: Vec<usize> = (0..input.len())
            .step_by(self.block)
            .map(|s| self.window + s)
            .collect();
        if starts.is_empty() && last {
            // The end of the stream still needs its final (empty) block.
            starts.push(self.pending.len());
        }
        let count = starts.len();
        let (pending, block, level) = (&self.pending, self.block, self.level);
        let blocks: Vec<io::Result<(Vec<u8>, Crc)>> = starts
            .par_iter()
            .enumerate()
            .map(|(i, &start)| {
                let end = (start + block).min(pending.len());
                let dictionary = &pending[start.saturating_sub(WINDOW)..start];
                let data = &pending[start..end];
                let mut crc = Crc::new();
                crc.update(data);
                let finish = last && i + 1 == count;
                Ok((deflate(level, dictionary, data, finish)?, crc))
            })
            .collect();
        for b in blocks {
            let (deflated, crc) = b?;
            self.out.write_all(&deflated)?;
            self.crc.combine(&crc);
        }
        let keep = self.pending.len().min(WINDOW);
        self.pending.drain(..self.pending.len() - keep);
        self.window = keep;
        Ok(())
    }
}

impl<W: Write> Write for GzWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.block * self.batch + self.window - self.pending.len();
        let n = buf.len().min(room);
        self.pending.extend_from_slice(&buf[..n]);
        if self.pending.len() - self.window == self.block * self.batch {
            self.compress(false)?;
        }
        Ok(n)
    }

    /// Blocks are compressed whole: flushing one early would change the
    /// bytes, so this flushes only what was already compressed.
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
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
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
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
mod tests {
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

    fn gzip(data: &[u8], block: usize, batch: usize, pieces: usize) -> Vec<u8> {
        let mut w = GzWriter::with_blocks(Vec::new(), Compression::new(2), block, batch)
            .expect("writing to memory");
        for piece in data.chunks(pieces.max(1)) {
            w.write_all(piece).expect("writing to memory");
        }
        w.finish().expect("writing to memory")
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
            for pieces in [1, 1000, 1 << 20] {
                assert_eq!(gunzip(&gzip(&data, 4096, 3, pieces)), data, "{len} bytes");
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
                .install(|| gzip(&data, 4096, 5, 777))
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
        let blocks = gzip(&data, 4096, 8, 1 << 16).len();
        assert!(
            blocks * 100 <= one * 104,
            "{blocks} bytes in blocks against {one} in one stream"
        );
    }
}
