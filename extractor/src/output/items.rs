//! Writing a region's merged items in a format written item by item:
//! merged on this thread, formatted on every core, written in merge order.

use super::select::{time_of, Selection};
use super::{ItemFormat, LogLine, RegionView};
use pstore_ring::merge::Pulled;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::mpsc;

/// Items formatted per job: big enough that passing a job costs nothing
/// next to formatting it, small enough that memory stays a few MiB.
const CHUNK: usize = 16 * 1024;

/// Writes the items of `view` that `selection` admits.
pub fn write_items(
    out: &mut impl Write,
    view: &RegionView,
    selection: &Selection,
    format: &dyn ItemFormat,
) -> io::Result<()> {
    write_items_and_logs(out, view, selection, format, &[])
}

/// Writes the items of `view` that `selection` admits, with the `lines`
/// of the kernel's own logs it admits among them, each before the first
/// item later than it (`lines` in time order).
///
/// Merging is sequential, formatting (most of the cost) is not: this
/// thread merges the items into chunks and deals them round-robin to one
/// formatting thread per core, two chunks ahead, and writes the results
/// back in the order it dealt them, so the output is the same bytes
/// whatever the thread count. Item and text buffers go round and round
/// rather than being allocated per chunk. The merge pulls each stream's
/// events page by page, so memory is the chunks in flight and a page walk
/// per stream, whatever the region's size.
pub fn write_items_and_logs(
    out: &mut impl Write,
    view: &RegionView,
    selection: &Selection,
    format: &dyn ItemFormat,
    lines: &[LogLine],
) -> io::Result<()> {
    let region = view.region;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let all = selection.admits_all();
    let mut merged = view
        .merged()
        .filter(|p| all || selection.admits(&p.as_item(), region));
    let lines: Vec<LogLine> = lines
        .iter()
        .filter(|l| selection.admits_log_line(l.ts))
        .copied()
        .collect();
    let mut next_line = 0;
    let format_chunk = |job: &mut Job| {
        job.text.clear();
        let mut from = 0;
        for (at, range) in &job.marks {
            format.items(&mut job.text, &job.items[from..*at], view);
            format.log_lines(&mut job.text, &lines[range.clone()], view);
            from = *at;
        }
        format.items(&mut job.text, &job.items[from..], view);
    };
    // A lane's thread ends only if this one has gone, or panicked.
    let failed = || io::Error::other("a formatting thread stopped");
    let new_job = || Job {
        items: Vec::with_capacity(CHUNK),
        marks: Vec::new(),
        text: Vec::with_capacity(CHUNK * 128),
    };
    if workers == 1 {
        let mut job = new_job();
        while job.refill(&mut merged, &lines, &mut next_line) {
            format_chunk(&mut job);
            out.write_all(&job.text)?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let mut lanes = Vec::with_capacity(workers);
        for _ in 0..workers {
            // One job queued and one being formatted per lane.
            let (jobs, job_rx) = mpsc::sync_channel::<Job>(1);
            let (done_tx, done) = mpsc::sync_channel(1);
            scope.spawn(move || {
                for mut job in job_rx {
                    format_chunk(&mut job);
                    if done_tx.send(job).is_err() {
                        return;
                    }
                }
            });
            lanes.push((jobs, done));
        }
        // Deal two chunks to every lane, then keep each lane two ahead.
        let mut dealt = 0usize;
        'deal: for _ in 0..2 {
            for (jobs, _) in &lanes {
                let mut job = new_job();
                if !job.refill(&mut merged, &lines, &mut next_line) {
                    break 'deal;
                }
                jobs.send(job).map_err(|_| failed())?;
                dealt += 1;
            }
        }
        let mut n = 0;
        while n < dealt {
            let (jobs, done) = &lanes[n % workers];
            let mut job: Job = done.recv().map_err(|_| failed())?;
            out.write_all(&job.text)?;
            if job.refill(&mut merged, &lines, &mut next_line) {
                jobs.send(job).map_err(|_| failed())?;
                dealt += 1;
            }
            n += 1;
        }
        Ok(())
    })
}

/// A chunk of merged items, the log lines among them, and the text they
/// format to.
struct Job<'t, 'a> {
    items: Vec<Pulled<'t, 'a>>,
    /// (item position, lines of the log that go before it).
    marks: Vec<(usize, Range<usize>)>,
    text: Vec<u8>,
}

impl<'t, 'a> Job<'t, 'a> {
    /// Refills the job with the next [`CHUNK`] merged items and the lines
    /// (from `next_line` on) earlier than each, and after the last item
    /// every line left; false when nothing is left.
    fn refill(
        &mut self,
        merged: &mut impl Iterator<Item = Pulled<'t, 'a>>,
        lines: &[LogLine],
        next_line: &mut usize,
    ) -> bool {
        self.items.clear();
        self.marks.clear();
        while self.items.len() < CHUNK {
            let next = merged.next();
            let before = next.as_ref().map_or(u64::MAX, |p| time_of(&p.as_item()));
            let from = *next_line;
            while lines
                .get(*next_line)
                .is_some_and(|l| l.ts < before || next.is_none())
            {
                *next_line += 1;
            }
            if from < *next_line {
                self.marks.push((self.items.len(), from..*next_line));
            }
            match next {
                Some(p) => self.items.push(p),
                None => break,
            }
        }
        !self.items.is_empty() || !self.marks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::merge::merge;
    use pstore_ring::read::{HeaderTrust, Region};
    use pstore_ring::schema::{self, Value};
    use pstore_ring::text::Line;
    use pstore_ring::write::{self, RegionConfig, StreamSpec};

    #[test]
    fn many_chunks_come_out_in_merge_order() {
        let specs: Vec<StreamSpec> = (0..3).map(StreamSpec::cpu).collect();
        let cfg = RegionConfig {
            page_size: 4096,
            streams: &specs,
            ..Default::default()
        };
        let mut buf = vec![0u8; 8 << 20];
        let lost = schema::builtin(schema::EVENT_LOST).unwrap();
        {
            let mut f = write::format(&mut buf, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            // Uneven streams and times, so the merge interleaves them.
            for i in 0..200_000u64 {
                let s = (i * 7 % 11 % 3) as usize;
                let _ = ws[s].write_event(i * 13 + s as u64, lost, &[Value::Unsigned(i)]);
            }
            ws.iter_mut().for_each(|w| w.close());
        }
        let region = Region::parse(&buf, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let paged = region.decode_paged();
        let view = RegionView {
            index: 0,
            addr: 0,
            region: &region,
            trace: &paged,
            overlay: None,
            pointers: pstore_ring::kprintf::Pointers::Hidden,
        };
        let mut want = Vec::new();
        for item in merge(&trace.streams) {
            Line::of(&item, &region).write_to(&mut want);
            want.push(b'\n');
        }
        assert!(want.iter().filter(|&&b| b == b'\n').count() > 10 * CHUNK);
        let mut got = Vec::new();
        write_items(
            &mut got,
            &view,
            &Selection::default(),
            &super::super::text::Text,
        )
        .unwrap();
        assert!(got == want);
    }
}
