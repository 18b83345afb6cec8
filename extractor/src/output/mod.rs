//! What `crashring extract` writes: the items a [`select::Selection`]
//! admits, in one [`Format`].
//!
//! Every format is one file here behind one of two seams: an
//! [`ItemFormat`] appends merged items to one stream (text, JSON lines,
//! Chrome JSON, Perfetto packets), formatted on every core by
//! [`write_items`]; a [`FileFormat`] writes each region's own file or
//! directory (CTF, trace.dat) and says what it wrote in a [`Written`].
//! Adding a format is a new file and one arm in [`Format::writer`].
//! Every writer takes a region's events through [`view`] only.
//! [`files`] makes every output file and directory.

pub(crate) mod chrome;
pub mod ctf;
pub(crate) mod debug;
pub mod files;
mod items;
pub(crate) mod jsonl;
pub mod kernel_log;
mod ordered;
pub mod perfetto;
pub mod select;
mod text;
pub mod tracedat;
pub mod view;
pub mod window;

pub use files::{create_dir, create_new, NewFile, NotAFile};
pub use items::{windows, write_items, write_items_and_logs};
pub use view::{Overlay, RegionView, StreamView};

use pstore_ring::merge::Pulled;
use select::Selection;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Every format `extract` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Like `trace-cmd report`: CPU, timestamp, event, fields.
    Text,
    /// One JSON object per line.
    Jsonl,
    /// A CTF 1.8 trace directory (-o DIR) for babeltrace2 and Trace Compass.
    Ctf,
    /// A Perfetto protobuf trace (.pftrace) for ui.perfetto.dev.
    Perfetto,
    /// Chrome trace event JSON, for ui.perfetto.dev and chrome://tracing.
    Chrome,
    /// trace-cmd's trace.dat (version 6, -o FILE) for trace-cmd and KernelShark.
    Tracedat,
}

/// How a format is written.
#[derive(Clone, Copy)]
pub enum Writer {
    Items(&'static dyn ItemFormat),
    Files(&'static dyn FileFormat),
}

impl Format {
    /// Every format, in `--help` order.
    pub fn all() -> impl Iterator<Item = Format> {
        <Format as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
    }

    pub fn writer(self) -> Writer {
        match self {
            Format::Text => Writer::Items(&text::Text),
            Format::Jsonl => Writer::Items(&jsonl::Jsonl),
            Format::Chrome => Writer::Items(&chrome::Chrome),
            Format::Perfetto => Writer::Items(&perfetto::Perfetto),
            Format::Ctf => Writer::Files(&ctf::Ctf),
            Format::Tracedat => Writer::Files(&tracedat::Tracedat),
        }
    }
}

/// A format written item by item to one stream, the regions one after
/// the other.
pub trait ItemFormat: Sync {
    /// Before a region's items: what introduces it (`several` when the
    /// input has more than one region).
    fn begin(&self, _out: &mut dyn Write, _region: &RegionView, _several: bool) -> io::Result<()> {
        Ok(())
    }

    /// Appends `items` of the region `view` shows. Called on several
    /// threads at once, each chunk of items alone.
    fn items(&self, out: &mut Vec<u8>, items: &[Pulled], view: &RegionView);

    /// Appends `lines` of the kernel's own logs, placed among the items
    /// ([`write_items_and_logs`]). A format that keeps them apart (on
    /// their own tracks) takes none here.
    fn log_lines(&self, _out: &mut Vec<u8>, _lines: &[LogLine], _view: &RegionView) {}

    /// After the last region.
    fn end(&self, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// A line of a log the kernel kept itself (its printk log, its persistent
/// ftrace buffer), placed on the region's clock.
#[derive(Clone, Copy, Debug)]
pub struct LogLine<'l> {
    pub ts: u64,
    /// What kept it: `kernel printk log`, `kernel ftrace buffer`.
    pub source: &'l str,
    /// The line without the kernel's own time stamp.
    pub text: &'l str,
}

/// A format written as a file or directory per region.
pub trait FileFormat: Sync {
    /// What `-o` must name, and why: "writes a directory: give it with -o DIR".
    fn needs_output(&self) -> &'static str;

    /// Region `n`'s output when the input holds several regions and `-o`
    /// named `base`.
    fn region_output(&self, base: &Path, n: usize) -> PathBuf;

    /// Writes the items of `region` that `selection` admits to `out`;
    /// `source` describes the input.
    fn write(
        &self,
        out: &Path,
        region: &RegionView,
        selection: &Selection,
        source: &str,
    ) -> Result<Written, WriteError>;
}

/// Why an output could not be written: what was being done, and the error.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct WriteError {
    pub what: String,
    #[source]
    pub why: io::Error,
}

/// Names what failed, for [`WriteError`].
pub(crate) fn doing<T>(
    result: io::Result<T>,
    what: impl FnOnce() -> String,
) -> Result<T, WriteError> {
    result.map_err(|why| WriteError { what: what(), why })
}

/// What a [`FileFormat`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub events: u64,
    /// Events the format's own loss counters account for.
    pub lost: u64,
    /// What the format calls those: "discarded", "dropped".
    pub lost_as: &'static str,
    /// Events moved forward in time to keep their stream monotonic.
    pub clamped: u64,
    /// Every file, relative to the output (empty for a single file).
    pub files: Vec<PathBuf>,
}
