//! Text like `trace-cmd report`: one line per item, as pstore-ring's
//! [`Line`] renders it.

use super::ItemFormat;
use super::RegionView;
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
}
