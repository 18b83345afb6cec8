//! `crashring extract`'s output: the merged items of one region, selected
//! and written in the chosen format.

use crate::jsonl;
use crate::select::Selection;
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{Region, Trace};
use pstore_ring::text::Line;
use std::io::{self, Write};
use std::sync::mpsc;

/// The formats `extract` writes line by line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line ([`crate::jsonl`]).
    Jsonl,
}

/// Items formatted per job: big enough that passing a job costs nothing
/// next to formatting it, small enough that memory stays a few MiB.
const CHUNK: usize = 16 * 1024;

/// Writes the items of `trace` that `selection` admits; `region_index` is
/// the region's place in `crashring info` order.
///
/// Merging is sequential, formatting (most of the cost) is not: this
/// thread merges the items into chunks and deals them round-robin to one
/// formatting thread per core, two chunks ahead, and writes the results
/// back in the order it dealt them, so the output is the same bytes
/// whatever the thread count.
pub fn write_items(
    out: &mut impl Write,
    region: &Region,
    trace: &Trace,
    selection: &Selection,
    format: Format,
    region_index: usize,
) -> io::Result<()> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let merged = merge(&trace.streams).filter(|item| selection.admits(item, region));
    let mut chunks = Chunks {
        merged,
        done: false,
    };
    let format_chunk = |items: &[Item]| {
        let mut buf = String::with_capacity(items.len() * 96);
        let result = items
            .iter()
            .try_for_each(|item| write_line(&mut buf, item, region, format, region_index));
        result.map(|()| buf)
    };
    let failed = || io::Error::other("formatting an item failed");
    if workers == 1 {
        while let Some(items) = chunks.next_chunk() {
            out.write_all(format_chunk(&items).map_err(|_| failed())?.as_bytes())?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let mut lanes = Vec::with_capacity(workers);
        for _ in 0..workers {
            // One job queued and one being formatted per lane.
            let (jobs, job_rx) = mpsc::sync_channel::<Vec<Item>>(1);
            let (done_tx, done) = mpsc::sync_channel(1);
            scope.spawn(move || {
                for items in job_rx {
                    if done_tx.send(format_chunk(&items)).is_err() {
                        return;
                    }
                }
            });
            lanes.push((jobs, done));
        }
        // Deal two chunks to every lane, then keep each lane two ahead.
        let mut dealt = 0usize;
        for _ in 0..2 {
            for (jobs, _) in &lanes {
                if let Some(items) = chunks.next_chunk() {
                    jobs.send(items).map_err(|_| failed())?;
                    dealt += 1;
                }
            }
        }
        let mut n = 0;
        while n < dealt {
            let (jobs, done) = &lanes[n % workers];
            let text = done.recv().map_err(|_| failed())?.map_err(|_| failed())?;
            out.write_all(text.as_bytes())?;
            if let Some(items) = chunks.next_chunk() {
                jobs.send(items).map_err(|_| failed())?;
                dealt += 1;
            }
            n += 1;
        }
        Ok(())
    })
}

/// The merged items, [`CHUNK`] at a time.
struct Chunks<I> {
    merged: I,
    done: bool,
}

impl<'t, 'a: 't, I: Iterator<Item = Item<'t, 'a>>> Chunks<I> {
    fn next_chunk(&mut self) -> Option<Vec<Item<'t, 'a>>> {
        if self.done {
            return None;
        }
        let items: Vec<_> = self.merged.by_ref().take(CHUNK).collect();
        self.done = items.len() < CHUNK;
        (!items.is_empty()).then_some(items)
    }
}

/// One item as one line, newline included.
fn write_line(
    buf: &mut String,
    item: &Item,
    region: &Region,
    format: Format,
    region_index: usize,
) -> std::fmt::Result {
    match format {
        Format::Text => Line::of(item, region).write_to(buf)?,
        Format::Jsonl => jsonl::write_item(buf, item, region, region_index)?,
    }
    buf.push('\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::HeaderTrust;
    use pstore_ring::schema::{self, Value};
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
        let mut want = String::new();
        for item in merge(&trace.streams) {
            Line::of(&item, &region).write_to(&mut want).unwrap();
            want.push('\n');
        }
        assert!(want.lines().count() > 10 * CHUNK);
        let mut got = Vec::new();
        write_items(
            &mut got,
            &region,
            &trace,
            &Selection::default(),
            Format::Text,
            0,
        )
        .unwrap();
        assert!(String::from_utf8(got).unwrap() == want);
    }
}
