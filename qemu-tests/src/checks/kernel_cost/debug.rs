//! What a DRM debug message costs each way, in the kernel cost boot
//! (issue 33's table): a `drm_dbg_kms()` with three integers and a string,
//! called by crashring_test_drm.ko in a loop on one CPU, with
//!
//! - nothing selected: crashring hooks nothing and drm.debug is 0, the
//!   kernel as without the module (the baseline of the baselines);
//! - (a) its category off: crashring's hook on `__drm_dev_dbg()` is set
//!   (ATOMIC is selected) and passes the KMS message back to DRM, which
//!   drops it (drm.debug=0);
//! - (b) selected into crashring (KMS), never reaching printk;
//! - (c) through printk to dmesg (drm.debug=0x4, nothing selected), the
//!   console's log level (4) keeping it off the serial console;
//! - (d) the same with the log level at 8, so every message is also
//!   written to the serial console;
//! - (e) `trace_printk()` of the same format and arguments, ftrace's
//!   binary printk record.
//!
//! The script checks what each way did: (b) diverted and printed
//! nothing, (c) printed.

use super::fields;
use anyhow::{ensure, Result};
use std::collections::BTreeMap;

/// Calls per round (three rounds, the best kept): enough that a round of
/// the cheapest way lasts milliseconds on TCG's clock.
const EVENTS: u32 = 20_000;

/// Through the serial console a message costs about a hundred times more
/// (each character an emulated port write): fewer, so the round ends.
const SERIAL_EVENTS: u32 = 1_000;

/// The ways, in the order measured: label, what it is.
const WAYS: [(&str, &str); 7] = [
    ("empty-loop", "the loop alone"),
    ("unhooked", "nothing selected, drm.debug=0 (no hook)"),
    ("off", "(a) category off, crashring's hook set"),
    ("crashring", "(b) selected into crashring"),
    ("printk", "(c) printk to dmesg, no console"),
    ("printk-serial", "(d) printk to a serial console"),
    ("trace_printk", "(e) trace_printk()"),
];

/// What the message prints as, to count it in dmesg.
const PRINTED: &str = "crtc-41 plane-31";

/// The guest script's part: drm.ko is loaded by `load_later`. Each
/// figure is taken from dmesg as soon as it is there: printk's messages
/// soon push it out.
pub fn script() -> String {
    format!(
        r#"load_later
cost_drm() {{
  insmod /lib/crashring_test_drm.ko cost_events={EVENTS} "$@" || return
  dmesg | grep 'crashring-cost: debug' | tail -n 1 | sed 's/^.*crashring-cost:/crashring-cost:/'
  rmmod crashring_test_drm
}}
printed() {{ dmesg | grep -c '{PRINTED}'; }}
cost_drm call=empty label=empty-loop
cost_drm call=drm label=unhooked
echo drm=ATOMIC > /sys/kernel/crashring/debug
cost_drm call=drm label=off
echo drm=KMS > /sys/kernel/crashring/debug
echo "crashring-cost: debug-check $(grep diverting: /sys/kernel/crashring/debug)"
cost_drm call=drm label=crashring
echo "crashring-cost: debug-check printed-before-printk=$(printed)"
echo > /sys/kernel/crashring/debug
echo 0x4 > /sys/module/drm/parameters/debug
cost_drm call=drm label=printk
echo "crashring-cost: debug-check printed-by-printk=$(printed)"
echo 8 > /proc/sys/kernel/printk
cost_drm call=drm label=printk-serial cost_events={SERIAL_EVENTS}
echo 4 > /proc/sys/kernel/printk
echo 0 > /sys/module/drm/parameters/debug
cost_drm call=trace_printk label=trace_printk
"#
    )
}

/// Prints the table from the `crashring-cost: debug…` lines.
pub fn report(lines: &[&str], unit: &str) -> Result<()> {
    let checks: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("debug-check "))
        .collect();
    ensure!(
        checks
            .iter()
            .any(|c| c.starts_with("diverting:") && c.contains("__drm_dev_dbg")),
        "crashring did not divert __drm_dev_dbg() for the KMS selection: {checks:?}"
    );
    ensure!(
        checks.contains(&"printed-before-printk=0"),
        "messages reached dmesg before drm.debug asked for them: {checks:?}"
    );
    ensure!(
        checks.iter().any(|c| c
            .strip_prefix("printed-by-printk=")
            .is_some_and(|n| n != "0")),
        "drm.debug=0x4 printed nothing: {checks:?}"
    );
    let mut per = BTreeMap::<&str, f64>::new();
    for l in lines.iter().filter_map(|l| l.strip_prefix("debug what=")) {
        let f = fields(l);
        let what = l.split_whitespace().next().unwrap_or_default();
        if let (Some(ns), Some(n)) = (f.get("ns"), f.get("events")) {
            per.insert(what, ns.parse::<f64>()? / n.parse::<f64>()?);
        }
    }
    ensure!(
        WAYS.iter().all(|(w, _)| per.contains_key(w)),
        "debug cost lines missing: {lines:?}"
    );
    let empty = per["empty-loop"];
    println!(
        "a drm_dbg_kms() of three integers and a string, one CPU ({EVENTS} calls, {SERIAL_EVENTS} to the serial console; best of 3 rounds):"
    );
    for (w, what) in &WAYS[1..] {
        println!(
            "  {what:<42} {:>9.1} {unit}/message ({:>9.1} above the empty loop)",
            per[w],
            per[w] - empty
        );
    }
    let above = |w: &str| per[w] - empty;
    println!(
        "  (b) / (c) printk: {:.3}x (target 0.2x); (b) / (e) trace_printk: {:.2}x (target 1x); (a) - unhooked: {:.1} {unit}",
        above("crashring") / above("printk"),
        above("crashring") / above("trace_printk"),
        per["off"] - per["unhooked"]
    );
    Ok(())
}
