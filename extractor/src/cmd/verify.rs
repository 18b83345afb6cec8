//! `crashring verify`: one line per region, intact or damaged.

use super::{report_damage, InputArgs};
use anyhow::Result;
use pstore_ring::read::Tally;

pub fn run(input: &InputArgs) -> Result<u8> {
    let loaded = input.load_regions()?;
    let mut bad = false;
    for r in loaded.regions() {
        let r = r?;
        report_damage(&r);
        let damaged = r.damaged();
        bad |= damaged;
        let state = if damaged { "damaged" } else { "intact" };
        let (kernel, user) = (r.trace.kernel_tally(), r.trace.user_tally());
        let at_least = |t: &Tally| if t.lost_at_least { "at least " } else { "" };
        print!(
            "region {} at {:#x}: {state}: {} events, {}{} lost",
            r.index,
            r.addr(),
            kernel.events,
            at_least(&kernel),
            kernel.lost
        );
        // A user stream's counts are what its process wrote, kept apart.
        if user.streams > 0 {
            print!(
                "; user streams claim {} events, {}{} lost",
                user.events,
                at_least(&user),
                user.lost
            );
        }
        println!();
    }
    Ok(u8::from(bad))
}
