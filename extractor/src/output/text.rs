//! Text like `trace-cmd report`: one line per item, as pstore-ring's
//! [`Line`] renders it.

use super::RegionView;
use super::{ItemFormat, LogLine};
use pstore_ring::merge::Pulled;
use pstore_ring::text::Line;
use std::io::{self, Write};

pub struct Text;

impl ItemFormat for Text {
    fn begin(&self, out: &mut dyn Write, region: &RegionView, several: bool) -> io::Result<()> {
        if several {
            writeln!(
                out,
                "# region {} at physical address {:#x}",
                region.index, region.addr
            )?;
        }
        Ok(())
    }

    fn items(&self, out: &mut Vec<u8>, items: &[Pulled], view: &RegionView) {
        for item in items {
            Line::of(&item.as_item(), view.region)
                .pointers(view.pointers)
                .write_to(out);
            out.push(b'\n');
        }
    }

    /// `[log]        5.070412236: kernel printk log: Kernel panic ...`:
    /// the time on the region's clock, as an event's.
    fn log_lines(&self, out: &mut Vec<u8>, lines: &[LogLine], _view: &RegionView) {
        for l in lines {
            out.extend_from_slice(b"[log] ");
            let (secs, ns) = (l.ts / 1_000_000_000, l.ts % 1_000_000_000);
            out.extend_from_slice(format!("{secs:>8}.{ns:09}: ").as_bytes());
            out.extend_from_slice(l.source.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(l.text.as_bytes());
            out.push(b'\n');
        }
    }
}
