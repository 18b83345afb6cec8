//! `crashring status`: whether the machine is armed, what the module is
//! recording, what waits to be archived, and what a crash now would leave.

use crate::boot::{self, Firmware};
use crate::iomem::Placement;
use crate::kdump_tools;
use crate::loader;
use crate::reserve::Reservation;
use crate::system::System;
use std::fmt;

/// Where bundles are written (the recovery service's directory).
pub const BUNDLE_DIR: &str = "/var/lib/crashring";
pub(crate) const SYSFS: &str = "/sys/kernel/crashring";

/// What `status` found, one line per item.
#[derive(Debug, Default)]
pub struct Status {
    pub items: Vec<(&'static str, String)>,
    /// Why a crash now would not be kept, or an older one waits unarchived
    /// or was lost: what a monitor polling `crashring status` alerts on.
    pub attention: Vec<String>,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, text) in &self.items {
            writeln!(f, "{what:<10} {text}")?;
        }
        Ok(())
    }
}

/// A file's first line, `Err` with the reason when it cannot be read.
fn first_line(sys: &System, path: &str) -> Result<Option<String>, String> {
    match sys.read(path) {
        Ok(text) => Ok(text.map(|t| t.lines().next().unwrap_or_default().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(format!("{path}: root only"))
        }
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// The `key=value` word `key` of a line.
fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

pub fn status(sys: &System) -> Status {
    let mut s = Status::default();
    let cmdline = sys.read("/proc/cmdline").ok().flatten().unwrap_or_default();
    let record = loader::armed(sys).ok().flatten();
    let kernel_word = record.as_ref().map(|a| a.reservation.kernel_word());
    let reserved_now = kernel_word
        .as_ref()
        .is_some_and(|m| cmdline.split_whitespace().any(|w| w == m));
    s.items.push((
        "armed",
        match (&record, reserved_now) {
            (Some(a), true) => format!(
                "yes, {} ({}), reserved in this boot",
                a.reservation,
                a.loader.route()
            ),
            (Some(a), false) => format!(
                "yes, {} ({}); not on this boot's command line: takes effect after {} and a reboot",
                a.reservation,
                a.loader.route(),
                a.loader.command()
            ),
            (None, _) => "no (crashring arm reserves a range at every boot)".into(),
        },
    ));
    if let Some((which, commands)) = record.as_ref().and_then(loader::Armed::unfinished) {
        // The mark names which left it; the files alone cannot say (a
        // disarm cut short may have left the module's list).
        let which = which.unwrap_or("arm or disarm");
        s.attention.push(format!(
            "an earlier crashring {which} left `{commands}` unfinished ({} says so): run crashring {which} again",
            loader::RECORD
        ));
    }
    // Where the range is this boot: the record's, or where the kernel put
    // a reserve_mem= range, as the module says.
    let range = match record.as_ref().map(|a| a.reservation) {
        Some(Reservation::Memmap(p)) => Some(p),
        Some(Reservation::ReserveMem { .. }) => reserve_mem_range(sys),
        None => None,
    };
    s.items
        .push(("boot", boot_path(sys, range, &mut s.attention)));
    let loaded = sys.path(SYSFS).is_dir();
    let region = first_line(sys, &format!("{SYSFS}/region"));
    let recording = loaded
        && first_line(sys, &format!("{SYSFS}/enabled"))
            .ok()
            .flatten()
            .as_deref()
            == Some("1");
    if !loaded {
        s.attention.push("the module is not loaded".into());
    } else if !recording {
        s.attention.push("the module is not recording".into());
    }
    s.items.push((
        "module",
        if !loaded {
            "not loaded".into()
        } else {
            let status = first_line(sys, &format!("{SYSFS}/status"))
                .ok()
                .flatten()
                .unwrap_or_default();
            format!(
                "loaded, {}; {status}",
                if recording {
                    "recording"
                } else {
                    "not recording"
                }
            )
        },
    ));
    if loaded {
        s.items.push((
            "region",
            match &region {
                Ok(Some(line)) => {
                    let field = |k| word(line, k).unwrap_or("?");
                    match word(line, "generation") {
                        Some(g) => format!(
                            "{} bytes at {} ({}), generation {g} in slot {}",
                            field("size"),
                            field("phys"),
                            field("source"),
                            field("recording_slot")
                        ),
                        None => format!(
                            "{} bytes at {} ({}), no generation being recorded",
                            field("size"),
                            field("phys"),
                            field("source")
                        ),
                    }
                }
                Ok(None) => "unknown".into(),
                Err(why) => why.clone(),
            },
        ));
        let previous = first_line(sys, &format!("{SYSFS}/previous_summary"));
        if !matches!(&previous, Ok(Some(l)) if l.starts_with("none")) {
            s.attention
                .push("a previous generation waits unarchived".into());
        }
        s.items.push((
            "previous",
            match previous {
                Ok(Some(l)) if l.starts_with("none") => "none waiting to be archived".into(),
                Ok(Some(l)) => format!("unarchived: {l}"),
                Ok(None) => "unknown".into(),
                Err(why) => why,
            },
        ));
        if let Some(verdict) = crate::continuity::describe(sys, BUNDLE_DIR) {
            if verdict.starts_with("LOST") {
                s.attention
                    .push("the range lost the last boot's generation".into());
            }
            s.items.push(("last boot", verdict));
        }
    }
    s.items.push(("bundle", last_bundle(sys)));
    let kdump = first_line(sys, "/sys/kernel/kexec_crash_loaded")
        .ok()
        .flatten()
        .as_deref()
        == Some("1");
    let notifiers = first_line(
        sys,
        "/sys/module/kernel/parameters/crash_kexec_post_notifiers",
    )
    .ok()
    .flatten()
    .as_deref()
        == Some("Y");
    let kdump_broken = record.is_some() && kdump_tools::kdump_part_missing(sys);
    if kdump_broken {
        s.attention.push(
            "kdump-tools' configuration lacks crashring's part: run crashring arm --kdump-tools"
                .into(),
        );
    }
    s.items.push((
        "on crash",
        if kdump && kdump_broken {
            format!("the kdump kernel would boot with a bare memmap= and no memory: {} lacks crashring's part (crashring arm --kdump-tools puts it back); the next boot archives the region", kdump_tools::KDUMP_TOOLS)
        } else {
            on_crash(recording, kdump, notifiers)
        },
    ));
    s
}

/// What a crash now would leave.
fn on_crash(recording: bool, kdump: bool, notifiers: bool) -> String {
    let late = if notifiers {
        ""
    } else {
        " (without crash_kexec_post_notifiers the crash record and the pages' closing are skipped: the open pages are salvaged record by record)"
    };
    match (recording, kdump) {
        (true, true) => {
            format!("both: the kdump kernel reads the region, and the next boot archives it{late}")
        }
        (true, false) => "the next boot archives the region (no kdump kernel loaded)".into(),
        (false, true) => {
            "kdump only: the module is not recording, so the region holds nothing new".into()
        }
        (false, false) => {
            "nothing would be kept: the module is not recording and no kdump kernel is loaded"
                .into()
        }
    }
}

/// The newest bundle in [`BUNDLE_DIR`].
fn last_bundle(sys: &System) -> String {
    let Ok(dir) = std::fs::read_dir(sys.path(BUNDLE_DIR)) else {
        return "none".into();
    };
    let newest = dir
        .flatten()
        // A dot file is a bundle being written, or one a killed run left.
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".tar.gz") && !name.starts_with('.')
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.file_name())))
        .max();
    let Some((_, name)) = newest else {
        return "none".into();
    };
    let name = name.to_string_lossy();
    let path = format!("{BUNDLE_DIR}/{name}");
    match what_ended(sys, &path) {
        Some(why) => format!("{path}: {why}"),
        None => path,
    }
}

/// How the generation in `bundle` ended, from the summary beside it
/// (extractor/SCHEMAS.md): its reason and message, the hardware error
/// that brought it down, if one did, and the firmware's boot error record
/// the next boot found; `None` without a readable summary.
fn what_ended(sys: &System, bundle: &str) -> Option<String> {
    let summary = bundle.strip_suffix(".tar.gz")?.to_string() + ".json";
    let text = std::fs::read_to_string(sys.path(&summary)).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let field = |k: &str| json.get(k)?.as_str().filter(|v| !v.is_empty());
    let mut why = field("reason")?.to_string();
    for part in ["message", "hardware_error", "firmware_error"]
        .into_iter()
        .filter_map(field)
    {
        why += ": ";
        why += part;
    }
    Some(why)
}

/// Where the kernel put a reserve_mem= range this boot, as the loaded
/// module's `region` line says.
fn reserve_mem_range(sys: &System) -> Option<Placement> {
    let line = first_line(sys, &format!("{SYSFS}/region")).ok().flatten()?;
    if word(&line, "source") != Some("reserve_mem") {
        return None;
    }
    Some(Placement {
        start: crate::iomem::parse_size(word(&line, "phys")?)?,
        size: word(&line, "size")?.parse().ok()?,
    })
}

/// The firmware, and where this boot's loader put the initrd and the
/// kernel: what can overwrite the range between a crash and the next boot.
fn boot_path(sys: &System, armed: Option<Placement>, attention: &mut Vec<String>) -> String {
    let mut text = match boot::firmware(sys) {
        Firmware::Bios => "BIOS".to_string(),
        Firmware::Uefi => "UEFI, no memory wipe requested".to_string(),
        Firmware::UefiWipesMemory => {
            attention.push(
                "the firmware wipes memory at the next reset: only kdump keeps a crash".into(),
            );
            format!("UEFI, and the firmware wipes memory at the next reset ({}, which the kernel's reset attack mitigation sets at every boot): a crash is kept only by a kdump capture, never by the next boot", boot::MOR_VARIABLE)
        }
    };
    let Some(p) = armed else {
        return text;
    };
    let range = p.range();
    for (what, loaded) in [
        ("initrd", boot::initrd(sys)),
        ("kernel", boot::kernel_image(sys)),
    ] {
        let Some(r) = loaded else { continue };
        let clear = !boot::overlaps(&r, &range);
        text.push_str(&format!(
            "; {what} at {:#x}-{:#x}{}",
            r.start,
            r.end - 1,
            if clear { "" } else { ", INSIDE the range" }
        ));
        if !clear {
            attention.push("the boot loader put this boot's initrd or kernel inside the range: run crashring disarm, then arm to place it elsewhere".into());
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::plan_arm;

    fn machine() -> (tempfile::TempDir, System) {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write("/proc/iomem", include_str!("../tests/data/iomem-qemu"))
            .unwrap();
        sys.write("/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko", "")
            .unwrap();
        sys.write("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n")
            .unwrap();
        sys.write("/usr/sbin/update-grub", "").unwrap();
        (dir, sys)
    }

    fn item(s: &Status, what: &str) -> String {
        s.items.iter().find(|(w, _)| *w == what).unwrap().1.clone()
    }

    #[test]
    fn an_unarmed_machine_keeps_nothing() {
        let (_dir, sys) = machine();
        let s = status(&sys);
        assert!(item(&s, "armed").starts_with("no"));
        assert_eq!(item(&s, "module"), "not loaded");
        assert!(item(&s, "on crash").starts_with("nothing would be kept"));
        assert_eq!(s.attention, ["the module is not loaded"]);
    }

    #[test]
    fn armed_recording_with_kdump_says_both() {
        let (_dir, sys) = machine();
        plan_arm(&sys, Some(16 << 20), "x86_64")
            .unwrap()
            .apply_succeeded(&sys);
        assert!(item(&status(&sys), "armed").contains("takes effect after update-grub"));
        sys.write(
            "/proc/cmdline",
            "ro quiet memmap=16M$0x22f000000 crash_kexec_post_notifiers\n",
        )
        .unwrap();
        sys.write(&format!("{SYSFS}/enabled"), "1\n").unwrap();
        sys.write(&format!("{SYSFS}/status"), "ok\n").unwrap();
        sys.write(
            &format!("{SYSFS}/region"),
            "source=region phys=0x000000022f000000 size=16777216 slots=2 slot_size=8388608 cpus=2 lanes=5 user_streams=0 boot_id=00 recording_slot=1 recording_phys=0x000000022f800000 generation=7\n",
        )
        .unwrap();
        sys.write(
            &format!("{SYSFS}/previous_summary"),
            "generation 6 slot 0 size 8388608\nstate crashed\n",
        )
        .unwrap();
        sys.write("/sys/kernel/kexec_crash_loaded", "1\n").unwrap();
        sys.write(
            "/sys/module/kernel/parameters/crash_kexec_post_notifiers",
            "Y\n",
        )
        .unwrap();
        sys.write(&format!("{BUNDLE_DIR}/host-20261122T2300Z.tar.gz"), "")
            .unwrap();
        // What a killed run left, written later: no bundle.
        std::thread::sleep(std::time::Duration::from_millis(20));
        sys.write(&format!("{BUNDLE_DIR}/.recovering-x1.tar.gz"), "")
            .unwrap();
        let s = status(&sys);
        assert_eq!(s.attention, ["a previous generation waits unarchived"]);
        assert!(item(&s, "armed").ends_with("reserved in this boot"), "{s}");
        assert_eq!(item(&s, "module"), "loaded, recording; ok");
        assert_eq!(
            item(&s, "region"),
            "16777216 bytes at 0x000000022f000000 (region), generation 7 in slot 1"
        );
        assert_eq!(
            item(&s, "previous"),
            "unarchived: generation 6 slot 0 size 8388608"
        );
        assert_eq!(
            item(&s, "bundle"),
            "/var/lib/crashring/host-20261122T2300Z.tar.gz"
        );
        // With its summary: how it ended, a machine check named in words.
        sys.write(
            &format!("{BUNDLE_DIR}/host-20261122T2300Z.json"),
            r#"{"reason": "panic", "message": "Fatal local machine check",
                "hardware_error": "machine check, bank 4, addr 0xabcd000, uncorrected"}"#,
        )
        .unwrap();
        assert_eq!(
            item(&status(&sys), "bundle"),
            "/var/lib/crashring/host-20261122T2300Z.tar.gz: panic: Fatal local machine check: \
             machine check, bank 4, addr 0xabcd000, uncorrected"
        );
        // A firmware's record of the reset, the next boot's: named too.
        sys.write(
            &format!("{BUNDLE_DIR}/host-20261122T2300Z.json"),
            r#"{"reason": "unknown", "message": "",
                "firmware_error": "fatal platform memory error, physical address 0x76543000"}"#,
        )
        .unwrap();
        assert_eq!(
            item(&status(&sys), "bundle"),
            "/var/lib/crashring/host-20261122T2300Z.tar.gz: unknown: \
             fatal platform memory error, physical address 0x76543000"
        );
        assert_eq!(
            item(&s, "on crash"),
            "both: the kdump kernel reads the region, and the next boot archives it"
        );
    }

    /// An arm or disarm whose commands did not all succeed leaves files
    /// that look done: only the record's mark says what is left to run.
    #[test]
    fn an_unfinished_arm_or_disarm_needs_attention() {
        let (_dir, sys) = machine();
        let arm = plan_arm(&sys, Some(16 << 20), "x86_64").unwrap();
        arm.apply(&sys).unwrap();
        let unfinished = |which: &str| {
            format!("an earlier crashring {which} left `update-grub` unfinished (/etc/crashring/armed says so): run crashring {which} again")
        };
        assert_eq!(
            status(&sys).attention,
            [unfinished("arm"), "the module is not loaded".into()]
        );
        arm.commands_done(&sys).unwrap();
        assert_eq!(status(&sys).attention, ["the module is not loaded"]);
        crate::arm::plan_disarm(&sys, false)
            .unwrap()
            .apply(&sys)
            .unwrap();
        assert_eq!(
            status(&sys).attention,
            [unfinished("disarm"), "the module is not loaded".into()]
        );
        // A disarm cut short before it removed the module's list is still
        // the disarm's to finish: running arm would arm the machine again.
        sys.write(crate::arm::MODULES_LOAD, "crashring\n").unwrap();
        assert_eq!(status(&sys).attention[0], unfinished("disarm"));
    }

    #[test]
    fn a_wiping_firmware_and_an_initrd_inside_the_range_need_attention() {
        let (_dir, sys) = machine();
        plan_arm(&sys, Some(16 << 20), "x86_64")
            .unwrap()
            .apply_succeeded(&sys);
        let kernel = "; kernel at 0x12b400000-0x12dffffff";
        assert_eq!(item(&status(&sys), "boot"), format!("BIOS{kernel}"));
        sys.write("/sys/firmware/efi/systab", "").unwrap();
        let write = |path: &str, bytes: &[u8]| {
            let path = sys.path(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap()
        };
        write(boot::MOR_VARIABLE, &[7, 0, 0, 0, 0]);
        let mut params = vec![0u8; 4096];
        params[0x218..0x21c].copy_from_slice(&0x3000_0000u32.to_le_bytes());
        params[0x21c..0x220].copy_from_slice(&0x0200_0000u32.to_le_bytes());
        write("/sys/kernel/boot_params/data", &params);
        let s = status(&sys);
        assert_eq!(
            item(&s, "boot"),
            format!("UEFI, no memory wipe requested; initrd at 0x30000000-0x31ffffff{kernel}")
        );
        assert_eq!(s.attention, ["the module is not loaded"]);
        // The firmware's request set, and the loader's initrd in the range.
        write(boot::MOR_VARIABLE, &[7, 0, 0, 0, 1]);
        params[0x218..0x21c].copy_from_slice(&0x2f10_0000u32.to_le_bytes());
        params[0x0c0..0x0c4].copy_from_slice(&2u32.to_le_bytes());
        write("/sys/kernel/boot_params/data", &params);
        let s = status(&sys);
        assert!(
            item(&s, "boot").starts_with("UEFI, and the firmware wipes memory at the next reset")
                && item(&s, "boot").ends_with(&format!(
                    "; initrd at 0x22f100000-0x2310fffff, INSIDE the range{kernel}"
                )),
            "{s}"
        );
        assert_eq!(
            s.attention,
            [
                "the firmware wipes memory at the next reset: only kdump keeps a crash",
                "the boot loader put this boot's initrd or kernel inside the range: run crashring disarm, then arm to place it elsewhere",
                "the module is not loaded"
            ]
        );
    }
}
