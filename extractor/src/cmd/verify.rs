//! `crashring verify`: one line per region, intact or damaged.

use super::{report_damage, InputArgs};
use anyhow::Result;

pub fn run(input: &InputArgs) -> Result<u8> {
    let loaded = input.load()?;
    let mut bad = false;
    for r in loaded.regions() {
        let r = r?;
        report_damage(&r);
        let damaged = r.damaged();
        bad |= damaged;
        let state = if damaged { "damaged" } else { "intact" };
        let at_least = if r.trace.lost_exact() {
            ""
        } else {
            "at least "
        };
        println!(
            "region {} at {:#x}: {state}: {} events, {at_least}{} lost",
            r.index,
            r.addr(),
            r.trace.event_count(),
            r.trace.lost_events()
        );
    }
    Ok(u8::from(bad))
}
