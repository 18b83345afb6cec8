//! `systemd-boot`: the Debian guest as a machine that boots with
//! systemd-boot, its entries written by kernel-install, armed through
//! `/etc/kernel/cmdline` and disarmed again.

use super::{
    check_efi_pstore, check_markers, checked_bundle, install, reports, said, signage_script,
    BootPath, Installed, Site,
};
use crate::env::debian;
use crate::env::guest::Kernel;
use crate::env::qemu;
use crate::scenarios::{host_crashring, Artifacts};
use anyhow::{bail, ensure, Context, Result};
use xshell::Shell;

/// A machine that boots with systemd-boot, set up as one installed that
/// way is: no GRUB, the ESP at /boot/efi with systemd-boot on it, the
/// box's own kernel command line in /etc/kernel/cmdline (a serial console,
/// a reboot 5 s after a panic), and kernel-install writing the entries.
const SYSTEMD_BOOT_SETUP: &str = r#"apt-get purge -q -y grub2-common > /root/purge.log 2>&1 || say "purging GRUB failed"
mkdir -p /boot/efi
echo "$ESP /boot/efi vfat umask=0077 0 2" >> /etc/fstab
mount /boot/efi || say "mounting the ESP failed"
echo 'layout=bls' > /etc/kernel/install.conf
echo 'root=/dev/vda ro console=ttyS0 panic=5' > /etc/kernel/cmdline
bootctl install --no-variables > /root/bootctl.log 2>&1 || { say "bootctl install failed"; cat /root/bootctl.log; }
kernel-install add "$(uname -r)" "/boot/vmlinuz-$(uname -r)" > /root/kernel-install.log 2>&1 || { say "kernel-install failed"; cat /root/kernel-install.log; }
"#;

/// The admin's line, which disarm must give back.
const SYSTEMD_BOOT_CMDLINE: &str = "root=/dev/vda ro console=ttyS0 panic=5";

/// `crashring arm` on a systemd-boot machine: the range goes into
/// /etc/kernel/cmdline and kernel-install writes it into the entry on the
/// ESP; OVMF boots systemd-boot, which boots the entry; a crash under a
/// writer per CPU, recovered by the next boot; then `crashring disarm`
/// takes exactly arm's words back out of the line and the entry.
pub fn systemd_boot(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let setup = SYSTEMD_BOOT_SETUP.replace("$ESP", debian::ESP_DEVICE);
    let site = Site {
        imaged_with: None,
        packages: Some("systemd-boot"),
        before_arm: &setup,
        after_arm: "say \"cmdline $(cat /etc/kernel/cmdline)\"\n",
        boot: BootPath::SystemdBoot,
    };
    let installed = install(sh, k, art, &site)?;
    let esp = art.dir.join("esp.img");
    let armed_line = said(&installed.log, "cmdline").join(" | ");
    ensure!(
        armed_line.starts_with(&format!("{SYSTEMD_BOOT_CMDLINE} memmap="))
            && armed_line.ends_with(" crash_kexec_post_notifiers"),
        "crashring arm left /etc/kernel/cmdline as {armed_line:?}, not the admin's line and its own words"
    );
    let disarm = r#"crashring disarm 2>&1 | while read -r line; do say "disarm $line"; done
say "disarmed cmdline $(cat /etc/kernel/cmdline)"
"#;
    let run = installed.boot_armed(
        sh,
        art,
        &["memmap=", "crash_kexec_post_notifiers", "panic=5"],
        &signage_script(1, disarm, false),
        "UEFI: OVMF, systemd-boot from the ESP; a crash, the next boot recovers it and disarms",
    )?;
    let checked = check_systemd_boot(sh, art, &installed, &run.log).with_context(|| {
        format!(
            "serial log {}:\n{}",
            run.serial.display(),
            qemu::tail(&run.serial, 40)
        )
    })?;
    // What systemd-boot boots next: the admin's line and what
    // kernel-install adds to every entry itself, nothing of arm's.
    let entries = debian::esp_entry_options(sh, &esp)?;
    let lines: Vec<String> = entries
        .iter()
        .map(|e| {
            e.split(' ')
                .filter(|w| !w.starts_with("systemd.machine_id="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    ensure!(
        lines == [SYSTEMD_BOOT_CMDLINE],
        "after crashring disarm the ESP's entries boot with {entries:?}, not {SYSTEMD_BOOT_CMDLINE:?}"
    );
    Ok(format!(
        "{checked}; the entry on the ESP back to {SYSTEMD_BOOT_CMDLINE:?}; {:.0} s",
        run.took.as_secs_f64()
    ))
}

fn check_systemd_boot(
    sh: &Shell,
    art: &Artifacts,
    installed: &Installed,
    log: &str,
) -> Result<String> {
    let boots = reports(log);
    ensure!(
        boots.len() == 2 && log.contains("crashring-test: loop done"),
        "{} boots reported, not 2 (the crashed one and the one after it)",
        boots.len()
    );
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
    let armed = one("boot 1 status armed");
    ensure!(
        armed.contains(
            "(kernel-install: /etc/kernel/cmdline, every kernel's entry), reserved in this boot"
        ),
        "boot 1: crashring status says armed {armed:?}, not reserved through kernel-install"
    );
    ensure!(
        one("boot 1 status boot").starts_with("UEFI"),
        "boot 1 was not a UEFI boot: {:?}",
        one("boot 1 status boot")
    );
    let (first, second) = (&boots[&1], &boots[&2]);
    ensure!(
        first.crashed && !second.crashed && first.recording == "1",
        "boot 1 crashed {} recording {:?}, boot 2 crashed {}",
        first.crashed,
        first.recording,
        second.crashed
    );
    ensure!(
        second.journal == "1 failed 0",
        "boot 2: the journal has {:?} recovery messages (recovered, failed), not one",
        second.journal
    );
    let names: Vec<&str> = second
        .bundles
        .split_whitespace()
        .filter_map(|n| n.strip_suffix(".tar.gz"))
        .collect();
    let [name] = names[..] else {
        bail!(
            "boot 2: /var/lib/crashring holds {:?}, not one bundle",
            second.bundles
        );
    };
    let kept = installed
        .image
        .copy_out(sh, "/var/lib/crashring", &art.dir.join("bundles"))?;
    let (archive, summary) = checked_bundle(sh, &host_crashring(sh)?, &kept, name)?;
    ensure!(
        summary["boot_id"] == first.id && summary["state"] == "crashed",
        "{name}.json is not boot 1's crash (boot id {}): {summary}",
        first.id
    );
    check_markers(sh, art, &archive, 1)?;
    let efi_records = check_efi_pstore(sh, &archive)?;
    let disarmed = one("disarmed cmdline");
    ensure!(
        disarmed == SYSTEMD_BOOT_CMDLINE,
        "crashring disarm left /etc/kernel/cmdline as {disarmed:?}, not the admin's {SYSTEMD_BOOT_CMDLINE:?} (it said {:?})",
        said(log, "disarm")
    );
    Ok(format!(
        "armed through kernel-install; UEFI boot by systemd-boot with the range reserved; the crash recovered by the next boot, check-bundle passes with the markers of every CPU and the panic's {efi_records} EFI pstore records; disarm gave back {SYSTEMD_BOOT_CMDLINE:?}"
    ))
}
