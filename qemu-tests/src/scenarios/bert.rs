//! The next boot's own evidence of the reset, as a real machine's firmware
//! and kernel leave it: QEMU hands the guest's firmware an ACPI Boot Error
//! Record Table (`-acpitable`) pointing at a Boot Error Region, which
//! QEMU's `loader` device writes into guest RAM on every reset, into a
//! page `memmap=` keeps from the kernel, as firmware keeps its own. The
//! kernel's drivers/acpi/apei/bert.c prints the region's fatal memory
//! error at boot and clears each block's status; the module keeps those
//! lines at load (`reset_evidence`); `crashring recover` bundles them and
//! the region read back through `/sys/firmware/acpi/tables/data/BERT`.
//!
//! QEMU emulates no AMD fusion controller hub, so no kernel here prints
//! AMD's previous reset reason: the scenario writes the line the kernel
//! would (arch/x86/kernel/cpu/amd.c) into the log before the module loads,
//! to show the module keeps it with the rest.

#[path = "../../../extractor/tests/common/bert_region.rs"]
mod bert_region;

use anyhow::{ensure, Result};
use std::path::Path;

/// The region's page, kept from the kernel like the others the warm-reboot
/// scenarios reserve (the crashring region at 0x40000000, ramoops at
/// 0x41000000).
const REGION_ADDR: u64 = 0x4200_0000;
const REGION_LEN: u32 = 4096;
pub const APPEND: &str = "memmap=4K$0x42000000";

/// What the region reports: a fatal multi-bit ECC error at this address.
const ERROR_ADDR: u64 = 0x7654_3000;

/// The line an AMD Zen machine's kernel prints after a `reboot`.
const AMD_RESET_REASON: &str = "x86/amd: Previous system reset reason [0x00080800]: software wrote 0x6 to reset control register 0xCF9";

/// The guest's shell line that logs [`AMD_RESET_REASON`] before the module
/// loads.
pub fn log_amd_reset_reason() -> String {
    format!("echo '<6>{AMD_RESET_REASON}' > /dev/kmsg\n")
}

/// Writes the table and the region into `dir`: QEMU's options that hand
/// them to the guest.
pub fn qemu_args(dir: &Path) -> Result<Vec<String>> {
    let (table, region) = (dir.join("bert.table"), dir.join("bert.region"));
    std::fs::write(&table, bert_region::table(REGION_ADDR, REGION_LEN))?;
    let mut bytes = bert_region::block(1, 0x11, &bert_region::memory_section(ERROR_ADDR, 3));
    bytes.resize(REGION_LEN as usize, 0);
    std::fs::write(&region, bytes)?;
    Ok(vec![
        "-acpitable".into(),
        format!("file={}", table.display()),
        "-device".into(),
        format!(
            "loader,file={},addr={REGION_ADDR:#x},force-raw=on",
            region.display()
        ),
    ])
}

/// The bundle unpacked at `top` holds the region decoded, cleared by the
/// kernel that printed it, and the kernel's lines about it beside the AMD
/// line, both listed in `manifest` and neither placed on the crashed
/// boot's timeline; its `summary` names the error and the reset reason.
pub fn check_bundled(
    manifest: &serde_json::Value,
    summary: &serde_json::Value,
    top: &Path,
) -> Result<String> {
    let files = manifest["files"].as_array().cloned().unwrap_or_default();
    for (path, format) in [
        ("logs/firmware-BERT.txt", "ACPI boot error records, decoded"),
        ("logs/next-boot-kernel.txt", "dmesg text of the next boot"),
    ] {
        ensure!(
            files
                .iter()
                .any(|f| f["path"] == path && f["format"] == format),
            "{path} is not listed as {format:?}: {files:?}"
        );
        let log = manifest["logs"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["file"] == path));
        ensure!(
            log.is_some_and(|l| l["placed"] == 0),
            "{path} is placed on the crashed boot's timeline: {log:?}"
        );
    }
    let error = format!(
        "fatal platform memory error, physical address {ERROR_ADDR:#x}, node 1, multi-bit ECC"
    );
    let reason = AMD_RESET_REASON
        .split_once("reason ")
        .map_or("", |(_, r)| r);
    ensure!(
        summary["firmware_error"] == error.as_str() && summary["reset_reason"] == reason,
        "the summary does not name the firmware's error and the reset reason: {summary}"
    );
    let decoded = std::fs::read_to_string(top.join("logs/firmware-BERT.txt"))?;
    for want in [
        error,
        "block status 0: the kernel printed it at boot and cleared it".into(),
        "FRU text \"DIMM A1\"".into(),
    ] {
        ensure!(
            decoded.contains(&want),
            "logs/firmware-BERT.txt does not say {want:?}:\n{decoded}"
        );
    }
    let kernel = std::fs::read_to_string(top.join("logs/next-boot-kernel.txt"))?;
    for want in [
        "BERT: Error records from previous boot:",
        "[Hardware Error]: event severity: fatal",
        "physical_address: 0x0000000076543000",
        AMD_RESET_REASON,
    ] {
        ensure!(
            kernel.contains(want),
            "logs/next-boot-kernel.txt does not hold {want:?}:\n{kernel}"
        );
    }
    Ok(format!(
        "the firmware's BERT record decoded from /sys/firmware/acpi/tables/data/BERT (cleared by the kernel that printed it) and the {} lines the next boot's kernel logged about the reset, the AMD reset reason among them, bundled unplaced, both named in the summary",
        kernel.lines().count()
    ))
}
