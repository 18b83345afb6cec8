//! `crashring extract`'s output: the merged items of one region, selected
//! and written in the chosen format.

use crate::jsonl;
use crate::select::Selection;
use pstore_ring::merge::merge;
use pstore_ring::read::{Region, Trace};
use pstore_ring::text::Line;
use std::fmt::Write as _;
use std::io::{self, Write};

/// The formats `extract` writes line by line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line ([`crate::jsonl`]).
    Jsonl,
}

/// Writes the items of `trace` that `selection` admits; `region_index` is
/// the region's place in `crashring info` order.
pub fn write_items(
    out: &mut impl Write,
    region: &Region,
    trace: &Trace,
    selection: &Selection,
    format: Format,
    region_index: usize,
) -> io::Result<()> {
    // One line is formatted into a reused buffer and written whole, so the
    // sink sees a few large writes and no per-field calls.
    let mut line = String::with_capacity(256);
    for item in merge(&trace.streams) {
        if !selection.admits(&item, region) {
            continue;
        }
        line.clear();
        let formatted = match format {
            Format::Text => write!(line, "{}", Line::of(&item, region)),
            Format::Jsonl => jsonl::write_item(&mut line, &item, region, region_index),
        };
        formatted.map_err(|_| io::Error::other("formatting an item failed"))?;
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}
