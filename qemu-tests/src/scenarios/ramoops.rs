//! pstore/ramoops beside crashring, read by `crashring pstore` from the
//! memory a crash left and held against the kernel's own reader: the next
//! boot's `/sys/fs/pstore`, byte for byte.
//!
//! The first boot loads ramoops on a `memmap=` area of its own; the panic
//! leaves its dmesg record, compressed (both Debian kernels have
//! `CONFIG_PSTORE_COMPRESS`). Debian builds no other pstore front end (no
//! `CONFIG_PSTORE_CONSOLE`, `_PMSG` or `_FTRACE`), so ramoops sets up the
//! console, pmsg and ftrace zones and nothing writes them: they are
//! checked to be where the plan puts them, signed, and empty (the unit and
//! fuzz tests decode their contents). The next boot reads the area through
//! `/dev/mem` with `crashring pstore` before ramoops attaches to it again,
//! then loads ramoops, mounts pstore and copies both sets of files to the
//! ext2 disk for the host.

use super::warm_reboot::{copied_off, said_after};
use super::Artifacts;
use crate::env::guest::Kernel;
use anyhow::{ensure, Context, Result};
use std::path::Path;
use xshell::Shell;

/// The area: the MiB after the crashring region, reserved the same way.
pub const APPEND: &str = "memmap=1M$0x41000000";

/// What the kernel is given and `crashring pstore` is told. ftrace stays at
/// ramoops' default, cut per CPU (the guest has 2), so its zones' places
/// and signatures (the version code) are checked too. With `ecc`, every
/// zone keeps 16 bytes of Reed-Solomon parity per 128-byte block.
fn module_args(ecc: bool) -> String {
    let ecc = if ecc { " ecc=16" } else { "" };
    format!("mem_address=0x41000000 mem_size=0x100000 record_size=0x10000 console_size=0x10000 pmsg_size=0x10000{ecc}")
}

fn layout(ecc: bool) -> String {
    let ecc = if ecc { ",ecc=16" } else { "" };
    format!("0x41000000:1M,record=64K,console=64K,pmsg=64K,cpus=2{ecc}")
}

/// Three bytes of the panic's zone changed through `/dev/mem` before
/// anything reads it, as decayed memory would change them: two in its
/// first block of text, one in its header's size. ECC corrects them all.
const DAMAGE: &str = r#"  for a in 0x41000009 0x4100000f 0x41000070; do
    v=$(devmem $a 8)
    devmem $a 8 $((v ^ 0x41))
  done
  echo "crashring-test: ramoops damaged 3 bytes"
"#;

/// `qemu-dump`'s area, after its region at 0x30000000, and its ramoops.
pub const DUMP_APPEND: &str = "memmap=1M$0x31000000";
pub const DUMP_LAYOUT: &str = "0x31000000:1M,record=64K,console=64K,pmsg=64K,cpus=4";
const DUMP_MODULE_ARGS: &str = "mem_address=0x31000000 mem_size=0x100000 record_size=0x10000 console_size=0x10000 pmsg_size=0x10000";

/// `qemu-dump`'s guest, before its crash: ramoops on.
pub fn dump_script() -> String {
    format!(
        r#"insmod /lib/reed_solomon.ko
insmod /lib/ramoops.ko {DUMP_MODULE_ARGS} || echo "crashring-test: ramoops insmod failed"
"#
    )
}

/// The panic's record among the logs of a bundle made with
/// `--ramoops {DUMP_LAYOUT}` (`manifest` and its unpacked `top`): there,
/// as a pstore record, holding the panic, as many lines as `crashring
/// pstore` reads from the same dump (the bundle hashes the addresses in
/// them, so the bytes differ).
pub fn check_bundled(
    sh: &Shell,
    crashring: &Path,
    dump: &Path,
    manifest: &serde_json::Value,
    top: &Path,
) -> Result<String> {
    let bundled = bundled_panic(manifest, top, super::SYSRQ.messages[0])?;
    let read = xshell::cmd!(sh, "{crashring} pstore {dump} --ramoops {DUMP_LAYOUT}")
        .quiet()
        .ignore_stderr()
        .read()?;
    let record = read
        .split("==== dmesg-ramoops-0 ====\n")
        .nth(1)
        .and_then(|r| r.split("\n==== ").next())
        .unwrap_or_default();
    ensure!(
        record.lines().count() == bundled.lines().count(),
        "crashring pstore reads {} lines of dmesg-ramoops-0, the bundle holds {}",
        record.lines().count(),
        bundled.lines().count()
    );
    // `info` lists it where the parameters put it.
    let info = xshell::cmd!(sh, "{crashring} info --json {dump} --ramoops {DUMP_LAYOUT}")
        .quiet()
        .read()?;
    let info: serde_json::Value = serde_json::from_str(&info)?;
    let zone = &info["ramoops"]["zones"][0];
    ensure!(
        zone["name"] == "dmesg-ramoops-0"
            && zone["state"] == "record"
            && zone["compressed"] == true,
        "crashring info --ramoops lists the first zone as {zone}"
    );
    Ok(format!(
        "the panic's ramoops record bundled as {PANIC_RECORD} ({} lines) and listed by info",
        bundled.lines().count()
    ))
}

/// The panic's record among a bundle's logs.
const PANIC_RECORD: &str = "logs/pstore-dmesg-ramoops-0";

/// [`PANIC_RECORD`] of a bundle (`manifest` and its unpacked `top`):
/// listed as a pstore record, holding the panic (`panic`, its message),
/// and placed on the
/// timeline by the printk lines it shares with the trace (behind the
/// syslog priority `kmsg_dump()` gives each line).
fn bundled_panic(manifest: &serde_json::Value, top: &Path, panic: &str) -> Result<String> {
    let listed = manifest["files"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["path"] == PANIC_RECORD));
    ensure!(
        listed.is_some_and(|f| f["format"] == "pstore record"),
        "{PANIC_RECORD} is not listed as a pstore record: {}",
        manifest["files"]
    );
    let name = PANIC_RECORD.trim_start_matches("logs/");
    let log = manifest["logs"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["name"] == name))
        .context("the manifest's logs do not describe the panic's record")?;
    ensure!(
        log["placed"].as_u64() > Some(0)
            && log["bracketed_alignment"]["matched_printk_lines"].as_u64() > Some(0),
        "the panic's record is not placed on the timeline by the printk lines it shares: {log}"
    );
    let bundled = std::fs::read_to_string(top.join(PANIC_RECORD))?;
    ensure!(
        bundled.contains(&format!("Kernel panic - not syncing: {panic}")),
        "{PANIC_RECORD} does not hold the panic:\n{bundled}"
    );
    Ok(bundled)
}

/// The panic's record in the bundle the next boot's `crashring recover`
/// made (`manifest` and its unpacked `top`), copied from the mounted
/// pstore, holding the panic (`panic`, its message): as many lines as the kernel's file the guest copied to `disk`
/// (the bundle hashes the addresses in them, so the bytes differ).
pub fn check_next_boot_bundled(
    sh: &Shell,
    art: &Artifacts,
    disk: &Path,
    manifest: &serde_json::Value,
    top: &Path,
    panic: &str,
) -> Result<String> {
    let bundled = bundled_panic(manifest, top, panic)?;
    let kernels = copied_off(sh, art, disk, "pstore-kernel/dmesg-ramoops-0")?;
    let kernels = String::from_utf8_lossy(&kernels);
    ensure!(
        kernels.lines().count() == bundled.lines().count(),
        "/sys/fs/pstore/dmesg-ramoops-0 holds {} lines, the bundle's copy {}",
        kernels.lines().count(),
        bundled.lines().count()
    );
    Ok(format!(
        "the next boot's /sys/fs/pstore/dmesg-ramoops-0 bundled with the crash ({} lines)",
        bundled.lines().count()
    ))
}

/// Kernel modules the scenario stages (loaded by the script, with the
/// parameters above).
pub const MODULES: &[&str] = &["ramoops"];

/// First boot, before the workload: ramoops on.
pub fn record_script(ecc: bool) -> String {
    format!(
        r#"insmod /lib/reed_solomon.ko
insmod /lib/ramoops.ko {} || echo "crashring-test: ramoops insmod failed"
"#,
        module_args(ecc)
    )
}

/// Next boot, with the ext2 disk at /mnt: (with `ecc`, the panic's zone
/// damaged first) crashring's reading, then the kernel's, left mounted
/// for `crashring recover` to bundle.
pub fn recover_script(ecc: bool) -> String {
    format!(
        r#"{damage}  crashring pstore /dev/mem --ramoops {layout} -o /mnt/pstore-crashring 2> /mnt/pstore-crashring.log
  echo "crashring-test: pstore $?"
  insmod /lib/reed_solomon.ko
  insmod /lib/ramoops.ko {args} || echo "crashring-test: ramoops insmod failed"
  mount -t pstore pstore /sys/fs/pstore || echo "crashring-test: pstore mount failed"
  mkdir /mnt/pstore-kernel
  cp /sys/fs/pstore/* /mnt/pstore-kernel/
  echo "crashring-test: pstore ours $(ls /mnt/pstore-crashring | tr '\n' ' ')"
  echo "crashring-test: pstore kernel's $(ls /mnt/pstore-kernel | tr '\n' ' ')"
"#,
        damage = if ecc { DAMAGE } else { "" },
        layout = layout(ecc),
        args = module_args(ecc),
    )
}

/// Whether `k`'s guest keeps ECC parity: 6.1 keeps plain zones, the
/// others parity, so both are held byte for byte to the kernel's reader.
pub fn ecc_on(k: &Kernel) -> bool {
    !k.release.starts_with("6.1.")
}

/// Every record `crashring pstore` wrote equals the kernel's file of the
/// same name, and they name the same records: the panic's, inflated (with
/// ECC: its damage corrected and the kernel's notice saying so after it);
/// every other zone is where `k`'s ramoops put it, signed, and empty.
pub fn check(sh: &Shell, art: &Artifacts, disk: &Path, log: &str, k: &Kernel) -> Result<String> {
    let ecc = ecc_on(k);
    ensure!(
        !ecc || said_after(log, "ramoops damaged").is_some(),
        "the guest did not damage the panic's ramoops zone"
    );
    let stderr =
        String::from_utf8_lossy(&copied_off(sh, art, disk, "pstore-crashring.log")?).into_owned();
    ensure!(
        said_after(log, "pstore") == Some("0"),
        "crashring pstore /dev/mem said {:?}:\n{stderr}",
        said_after(log, "pstore")
    );
    let names = |what| {
        let mut v: Vec<String> = said_after(log, what)
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let (ours, kernels) = (names("pstore ours"), names("pstore kernel's"));
    ensure!(
        ours == kernels && ours == ["dmesg-ramoops-0"],
        "crashring pstore wrote {ours:?}, the next boot's /sys/fs/pstore holds {kernels:?}, not the panic's record alone:\n{stderr}"
    );
    let zone = |name: &str| {
        stderr
            .lines()
            .find(|l| l.contains(&format!(": {name} at ")))
            .unwrap_or_default()
            .to_string()
    };
    // 1 MiB less console, pmsg and ftrace, cut in 13 records, as
    // ramoops_init_przs() cuts it; then the console, and pmsg before the
    // ftrace zones (one per CPU) since 6.2 ("pstore/ram: Move pmsg init
    // earlier"), after them before: 6.1's zones say so.
    let older = k.release.starts_with("6.1.");
    ensure!(
        stderr.contains("in older kernels' order") == older,
        "crashring pstore {} the older order on {}:\n{stderr}",
        if older { "did not find" } else { "found" },
        k.release
    );
    let (pmsg, ftrace) = if older {
        ("0x410efffe", ["0x410eeffe", "0x410ef7fe"])
    } else {
        ("0x410eeffe", ["0x410feffe", "0x410ff7fe"])
    };
    let dmesg = zone("dmesg-ramoops-0");
    ensure!(
        dmesg.contains(" at 0x41000000 (70262 bytes): ") && dmesg.contains("stored compressed"),
        "the panic's record was not stored compressed, or not where planned: {dmesg:?}\n{stderr}"
    );
    for (name, at) in [
        ("dmesg-ramoops-12", "0x410cdd88 (70262 bytes)".to_string()),
        ("console-ramoops-0", "0x410deffe (65536 bytes)".to_string()),
        ("pmsg-ramoops-0", format!("{pmsg} (65536 bytes)")),
        ("ftrace-ramoops-0", format!("{} (2048 bytes)", ftrace[0])),
        ("ftrace-ramoops-1", format!("{} (2048 bytes)", ftrace[1])),
    ] {
        let line = zone(name);
        ensure!(
            line.ends_with(&format!("{name} at {at}: empty")),
            "{name} is not an empty ramoops zone at {at}: {line:?}\n{stderr}"
        );
    }
    let mine = copied_off(sh, art, disk, "pstore-crashring/dmesg-ramoops-0")?;
    let theirs = copied_off(sh, art, disk, "pstore-kernel/dmesg-ramoops-0")?;
    ensure!(
        mine == theirs,
        "dmesg-ramoops-0: crashring read {} bytes, the kernel {} (first difference at byte {})",
        mine.len(),
        theirs.len(),
        mine.iter()
            .zip(&theirs)
            .position(|(a, b)| a != b)
            .unwrap_or(mine.len().min(theirs.len()))
    );
    let text = String::from_utf8_lossy(&mine);
    ensure!(
        text.contains("Kernel panic - not syncing: sysrq triggered crash"),
        "the dmesg record does not hold the panic:\n{text}"
    );
    let notice = "\nECC: 3 Corrected bytes, 0 unrecoverable blocks\n";
    if ecc {
        ensure!(
            text.ends_with(notice) && dmesg.contains(", ECC: 3 bytes corrected, 0 blocks uncorrectable"),
            "the 3 damaged bytes were not found corrected by both readers: {dmesg:?}, the record ends {:?}",
            &text[text.len().saturating_sub(80)..]
        );
    }
    Ok(format!(
        "crashring pstore read the ramoops area through /dev/mem before the next boot's ramoops did: the panic's compressed record ({} bytes inflated{}) equal to /sys/fs/pstore's, the other 16 zones where ramoops_probe() puts them ({} order) and empty",
        mine.len(),
        if ecc {
            ", 3 damaged bytes corrected by ECC as the kernel corrected them"
        } else {
            ""
        },
        if older { "the older" } else { "the current" }
    ))
}
