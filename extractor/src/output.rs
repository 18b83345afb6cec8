//! `crashring extract`'s output: the merged items of one region, selected
//! and written in the chosen format.

use crate::jsonl;
use crate::select::Selection;
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{Region, Trace};
use pstore_ring::text::Line;
use std::io::{self, Write};

/// The formats `extract` writes line by line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line ([`crate::jsonl`]).
    Jsonl,
}

/// Items formatted per thread and round: big enough that a round's
/// thread start-up is noise, small enough that memory stays a few MiB.
const CHUNK: usize = 16 * 1024;

/// Writes the items of `trace` that `selection` admits; `region_index` is
/// the region's place in `crashring info` order.
///
/// Merging is sequential, but formatting (most of the cost) is not: each
/// round takes the next items in order, formats a slice of them per
/// thread into its own buffer, and writes the buffers in order, so the
/// output is the same bytes whatever the thread count.
pub fn write_items(
    out: &mut impl Write,
    region: &Region,
    trace: &Trace,
    selection: &Selection,
    format: Format,
    region_index: usize,
) -> io::Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut merged = merge(&trace.streams).filter(|item| selection.admits(item, region));
    let mut round: Vec<Item> = Vec::with_capacity(threads * CHUNK);
    let mut buffers: Vec<String> = vec![String::new(); threads];
    loop {
        round.clear();
        round.extend(merged.by_ref().take(threads * CHUNK));
        if round.is_empty() {
            return Ok(());
        }
        let format_chunk = |items: &[Item], mut buf: String| {
            buf.clear();
            let result = items
                .iter()
                .try_for_each(|item| write_line(&mut buf, item, region, format, region_index));
            (result, buf)
        };
        // Each thread owns its buffer while it formats: buffers side by
        // side in one Vec would share a cache line and slow both threads.
        let done: Vec<(std::fmt::Result, String)> = if round.len() <= CHUNK {
            vec![format_chunk(&round, std::mem::take(&mut buffers[0]))]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = round
                    .chunks(CHUNK)
                    .zip(buffers.iter_mut().map(std::mem::take))
                    .map(|(items, buf)| scope.spawn(move || format_chunk(items, buf)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or((Err(std::fmt::Error), String::new())))
                    .collect()
            })
        };
        for (slot, (result, buf)) in done.into_iter().enumerate() {
            result.map_err(|_| io::Error::other("formatting an item failed"))?;
            out.write_all(buf.as_bytes())?;
            buffers[slot] = buf;
        }
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
