//! Decoding a region's streams on every core, page by page. Streams are
//! independent, so each thread takes a share of them; the trace is
//! assembled in stream order and is the same as
//! [`Region::decode_paged`]'s. No event is kept: writers walk them again
//! from the region's bytes as they need them.

use pstore_ring::read::{PagedTrace, Region};
use rayon::prelude::*;
use std::ops::Range;

/// [`Region::decode_paged`], with the streams spread over the machine's
/// cores; `release` is given the byte ranges decoding has walked, in
/// runs of at least [`RUN`] where they follow each other, to give back.
pub fn decode<'a>(region: &Region<'a>, release: &(dyn Fn(Range<usize>) + Sync)) -> PagedTrace<'a> {
    let parts: Vec<_> = region
        .streams
        .par_iter()
        .map(|info| {
            let mut diagnostics = Vec::new();
            let mut run = Run::new(release);
            let stream =
                region.decode_stream_paged_walked(info, &mut diagnostics, &mut |r| run.add(r));
            (stream, diagnostics)
        })
        .collect();
    let mut trace = PagedTrace {
        streams: Vec::with_capacity(region.streams.len()),
        diagnostics: region.diagnostics.clone(),
    };
    for (stream, diagnostics) in parts {
        trace.streams.push(stream);
        trace.diagnostics.extend(diagnostics);
    }
    trace
}

/// Bytes walked before they are given back in one call.
const RUN: usize = 1 << 20;

/// Walked byte ranges gathered into runs: a page at a time would be a
/// system call per page.
struct Run<'r> {
    release: &'r (dyn Fn(Range<usize>) + Sync),
    pending: Range<usize>,
}

impl<'r> Run<'r> {
    fn new(release: &'r (dyn Fn(Range<usize>) + Sync)) -> Self {
        Run {
            release,
            pending: 0..0,
        }
    }

    fn add(&mut self, walked: Range<u64>) {
        let (Ok(start), Ok(end)) = (usize::try_from(walked.start), usize::try_from(walked.end))
        else {
            return;
        };
        if self.pending.is_empty() {
            self.pending = start..end;
        } else if start == self.pending.end {
            self.pending.end = end;
        } else {
            self.flush();
            self.pending = start..end;
        }
        if self.pending.len() >= RUN {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            (self.release)(self.pending.clone());
        }
        self.pending = 0..0;
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::HeaderTrust;
    use pstore_ring::schema::{self, Value};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    #[test]
    fn parallel_decoding_gives_the_sequential_trace() {
        let specs: Vec<StreamSpec> = (0..5).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 512,
            pages_per_stream: Some(3),
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 64 * 1024];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        {
            let mut f = write::format(&mut buf, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            for i in 0..700u64 {
                let _ = ws[(i % 5) as usize].write_event(i * 10, lost, &[Value::Unsigned(i)]);
            }
            ws[1].close();
        }
        // Damage one page so diagnostics come from a stream too.
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let at = region.streams[3].pages_offset as usize + 60;
        buf[at] ^= 0xff;
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let (seq, par) = (region.decode(), decode(&region, &|_| {}).to_trace());
        assert!(!seq.diagnostics.is_empty());
        assert_eq!(
            format!("{:?}", seq.diagnostics),
            format!("{:?}", par.diagnostics)
        );
        assert_eq!(seq.streams.len(), par.streams.len());
        for (a, b) in seq.streams.iter().zip(&par.streams) {
            assert_eq!(a.events, b.events);
            assert_eq!(a.losses, b.losses);
        }
    }
}
