//! A reset the guest does not see coming: QEMU's `system_reset` from its
//! monitor while the workload writes, as a hardware watchdog or a held
//! reset line brings it. No panic, no notifier, no shutdown path runs and
//! no cache is cleaned; the next boot must find everything the guest said
//! it wrote, and nothing it did not.

use super::{
    check_cut_short, endless_workload, parse_saved, reported_progress, warm_reboot_run, Artifacts,
    WarmReboot,
};
use crate::env::guest::Kernel;
use crate::env::qemu;
use anyhow::Result;
use std::time::Duration;
use xshell::Shell;

/// The host resets the machine once the guest reported this many markers.
const RESET_AFTER: u32 = 300;

pub fn held_reset(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let reset = |vm: &mut qemu::Running| -> Result<()> {
        vm.wait_for_serial(
            &format!("crashring-test: wrote {RESET_AFTER}"),
            Duration::from_secs(180),
        )?;
        vm.execute(r#"{"execute":"system_reset"}"#)?;
        Ok(())
    };
    let plan = WarmReboot {
        name: "held-reset",
        monitor: Some(&reset),
        ..WarmReboot::memmap(endless_workload())
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    // The recovery boot writes no markers: every report is the first
    // boot's, up to the reset.
    let reported = reported_progress(&saved.log)?;
    let summary = saved.check(|image| {
        check_cut_short(
            &parse_saved(image)?,
            reported,
            "QEMU reset the machine without a panic",
        )
    })?;
    Ok(format!(
        "reset after the guest reported {reported} markers: {summary}"
    ))
}
