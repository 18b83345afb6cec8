//! What every boot of a Debian scenario's loop reports about itself
//! ([`boot_report`], the guest's part) and how the host reads it back
//! ([`reports`]).

use super::{prelude, said};
use std::collections::BTreeMap;

/// What every boot of an armed guest reports first: its number (counted
/// on the root file system), boot id, how crashring-recover.service ended
/// and when it started and ended (µs of uptime), its journal messages of
/// this boot, the bundle directory and whether the module records.
pub(super) fn boot_report() -> String {
    // Bundled now, or by the capture kernel before: one message either way.
    let recovered = format!(
        "MESSAGE_ID={} MESSAGE_ID={}",
        kexec_hooks::journal::RECOVERED,
        kexec_hooks::journal::ALREADY_ARCHIVED
    );
    let failed = kexec_hooks::journal::FAILED;
    format!(
        r#"{prelude}n=$(( $(cat /var/lib/crashring-test/boot 2>/dev/null || echo 0) + 1 ))
echo $n > /var/lib/crashring-test/boot
sync
say "boot $n id $(tr -d - < /proc/sys/kernel/random/boot_id)"
say "boot $n recover $(systemctl show -P Result crashring-recover.service) $(systemctl show -P ExecMainStartTimestampMonotonic crashring-recover.service) $(systemctl show -P ExecMainExitTimestampMonotonic crashring-recover.service)"
say "boot $n journal $(journalctl -b 0 -q -o cat {recovered} | wc -l) failed $(journalctl -b 0 -q -o cat MESSAGE_ID={failed} | wc -l)"
journalctl -b 0 -q -o cat {recovered} | while read -r line; do say "boot $n message $line"; done
say "boot $n bundles $(ls /var/lib/crashring | tr '\n' ' ')"
say "boot $n recording $(cat /sys/kernel/crashring/enabled)"
# Loaded from the initramfs: the module's line comes before the root file
# system's mount in the kernel's log (line numbers, as the journal has it).
kernel() {{ journalctl -k -b 0 -q -o cat | grep -n -m 1 "$1" | cut -d : -f 1; }}
say "boot $n early $(kernel '^crashring: .* range ') $(kernel 'EXT4-fs (.*): mounted filesystem')"
# The panic records UEFI kept in its variables: systemd-pstore, which runs
# after crashring-recover.service, moved them here.
say "boot $n systemd-pstore $(find /var/lib/systemd/pstore -name 'dmesg-efi*' | wc -l) left $(ls /sys/fs/pstore | wc -l)"
crashring status | while read -r line; do say "boot $n status $line"; done
# Who may write markers: the node's mode and owners (udev's rule), a
# member of the group, and a user outside it.
say "boot $n device $(stat -c '%a %U %G' /dev/crashring)"
setpriv --reuid=kiosk --regid=kiosk --init-groups sh -c "echo 'kiosk boot $n' > /dev/crashring" && say "boot $n kiosk wrote"
setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c "echo 'nobody boot $n' > /dev/crashring" 2>/dev/null || say "boot $n nobody refused"
"#,
        prelude = prelude()
    )
}

/// What one boot of the loop reported.
#[derive(Default, Debug)]
pub(super) struct BootReport<'a> {
    pub(super) id: &'a str,
    pub(super) recover: &'a str,
    pub(super) journal: &'a str,
    pub(super) bundles: &'a str,
    pub(super) recording: &'a str,
    pub(super) device: &'a str,
    /// The panic records systemd-pstore archived so far, and what it
    /// left in /sys/fs/pstore.
    pub(super) systemd_pstore: &'a str,
    pub(super) kiosk_wrote: bool,
    pub(super) nobody_refused: bool,
    pub(super) crashed: bool,
    pub(super) rebooted: bool,
    /// The kernel log's line numbers of the module's load and of the root
    /// file system's mount.
    pub(super) early: &'a str,
}

impl BootReport<'_> {
    /// Whether the module was loaded from the initramfs: before the root
    /// file system was mounted.
    pub(super) fn loaded_early(&self) -> bool {
        let mut lines = self.early.split_whitespace().map(str::parse::<u32>);
        matches!((lines.next(), lines.next()), (Some(Ok(module)), Some(Ok(root))) if module < root)
    }
}

pub(super) fn reports(log: &str) -> BTreeMap<u32, BootReport<'_>> {
    let mut boots: BTreeMap<u32, BootReport> = BTreeMap::new();
    for rest in said(log, "boot") {
        let Some((n, rest)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse() else { continue };
        let r = boots.entry(n).or_default();
        let (what, value) = rest.split_once(' ').unwrap_or((rest, ""));
        match what {
            "id" => r.id = value,
            "recover" => r.recover = value,
            "journal" => r.journal = value,
            "bundles" => r.bundles = value,
            "recording" => r.recording = value,
            "device" => r.device = value,
            "systemd-pstore" => r.systemd_pstore = value,
            "kiosk" => r.kiosk_wrote = value == "wrote",
            "nobody" => r.nobody_refused = value == "refused",
            "early" => r.early = value,
            // The kernel's panic may follow on the same line.
            w if w.starts_with("crashing") => r.crashed = true,
            "rebooting" => r.rebooted = true,
            _ => {}
        }
    }
    boots
}
