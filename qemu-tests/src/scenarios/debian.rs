//! The scenarios on a real Debian 12 guest ([`crate::env::debian`]):
//! crashring installed as a user installs it (`apt install` of the two
//! packages `cargo xtask package` builds, the module built by DKMS in the
//! guest), armed with `crashring arm`, then left to itself.

use super::{host_crashring, Artifacts};
use crate::env::debian::{self, Image};
use crate::env::guest::Kernel;
use crate::env::qemu::{self, Firmware, Start, Vm};
use crate::env::Arch;
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::schema;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;
use xshell::{cmd, Shell};

mod boots;
mod install;
mod report;
use boots::{boot_report, reports};
mod systemd_boot;
use install::{install, Site};
pub use systemd_boot::systemd_boot;

/// Makes what the Debian scenarios begin from on a thread of its own,
/// while the busybox scenarios boot their guests: the root file system
/// (mmdebstrap, mostly downloading), the common machine installed in its
/// first boot (DKMS building the module in a guest, niced: ten minutes
/// of a core the busybox guests leave), then the kdump-tools machine's
/// image in a chroot. The scenarios find them made: one of each is made
/// at a time, and what the thread began is waited for. One that fails
/// is made again by the first scenario that needs it, which then fails
/// with its own error.
pub fn prepare(sh: &Shell) -> Result<JoinHandle<()>> {
    // The Debian scenarios run on the 6.12 kernel alone.
    let k = crate::env::guest::kernel("6.12")?;
    let sh = sh.clone();
    Ok(std::thread::spawn(move || {
        if let Err(e) = install::install_ahead(&sh, &k) {
            eprintln!("debian: installing the common machine ahead failed: {e:#}");
        }
        if let Err(e) = install::root_file_system(&sh, &k, Some(KDUMP_TOOLS_SET)) {
            eprintln!(
                "debian: building the kdump-tools machine's root file system ahead failed: {e:#}"
            );
        }
    }))
}

/// The package set the kdump-tools machine is imaged with.
const KDUMP_TOOLS_SET: &str = "kdump-tools";

/// Crashes in a row in `signage-reboot-loop`; the boot after them is
/// rebooted by systemd when a unit's watchdog fires, with
/// [`REBOOT_REASON`]; the one after that ends the loop.
const CRASHES: u32 = 3;
const BOOTS: u32 = CRASHES + 2;
/// The signage player's unit's `RebootArgument=`.
const REBOOT_REASON: &str = "signage-player: watchdog timeout";
/// The bundles the signage box keeps (`MaxBundles=`).
const MAX_BUNDLES: usize = 2;

/// The guest's CPUs and memory.
const CPUS: u32 = 2;
const MEMORY: &str = "2G";

/// Where the guest's jobs write what they say, for the host to read off
/// the image: on the console, the kernel's own lines can cut into them.
const REPORT: &str = "/var/lib/crashring-test/report";

/// What a job script starts with: `say` writes a line for the host, to
/// [`REPORT`] and, for a person watching, the console.
fn prelude() -> String {
    format!(
        r#"mkdir -p {dir}
say() {{ echo "crashring-test: $*"; echo "crashring-test: $*" >> {REPORT}; }}
export DEBIAN_FRONTEND=noninteractive
"#,
        dir = REPORT.rsplit_once('/').map_or("/", |(d, _)| d)
    )
}

/// The end of a job: a clean power-off (retried: while apt's triggers
/// reload systemd, systemctl can fail to reach it).
const POWER_OFF: &str = r#"sync
for try in 1 2 3; do systemctl poweroff && break; sleep 5; done
"#;

/// A job that runs `steps` and powers off.
fn job(steps: &str) -> String {
    format!("{}{steps}{POWER_OFF}", prelude())
}

/// The words after `crashring-test: {what} ` on the console, every time
/// they were said.
fn said<'a>(log: &'a str, what: &str) -> Vec<&'a str> {
    let key = format!("crashring-test: {what} ");
    log.lines()
        .filter_map(|l| l.split_once(key.as_str()).map(|(_, rest)| rest.trim()))
        .collect()
}

/// A Debian guest with both packages installed by apt, the module built
/// by DKMS and `crashring arm` run.
struct Installed {
    image: Image,
    /// What the guest's grub.cfg now boots; `None` on a machine that
    /// boots with systemd-boot.
    boot: Option<debian::Boot>,
    /// How it boots once armed.
    how: BootPath,
    /// What the install and arm boots reported.
    log: String,
}

/// What the guest's jobs said so far, read off its image.
fn report(sh: &Shell, image: &Image) -> Result<String> {
    Ok(String::from_utf8_lossy(&image.read(sh, REPORT)?).into_owned())
}

/// The per-boot part of `signage-reboot-loop`: [`boot_report`], then (for
/// the first `crashes` boots) a writer on every CPU and a crash in the
/// middle of it; the boot after them runs `then` and, with `watchdog`,
/// writes on every CPU again and starts a signage player whose watchdog
/// fires: systemd reboots the box with the unit's `RebootArgument=`, as
/// it would a box whose player hung. The last boot powers off.
fn signage_script(crashes: u32, then: &str, watchdog: bool) -> String {
    let reboot = if watchdog {
        watchdog_reboot()
    } else {
        String::new()
    };
    let recovered = kexec_hooks::journal::RECOVERED;
    format!(
        r#"{report}writers() {{
  # Now: journald cannot catch up with the writers' printk lines.
  journalctl --sync
  for c in $(seq 0 $(( $(nproc) - 1 ))); do
    taskset -c $c sh -c "i=1; while :; do echo \"signage boot $n cpu $c marker \$i\" > /dev/crashring; echo \"<6>signage: boot $n cpu $c printk \$i\" > /dev/kmsg; i=\$((i+1)); done" &
  done
  sleep 5
}}
if [ $n -le {crashes} ]; then
  writers
  say "boot $n crashing"
  sync {REPORT}
  echo c > /proc/sysrq-trigger
fi
if [ $n -eq {rebooted} ]; then
{then}{reboot}fi
journalctl -q -o cat MESSAGE_ID={recovered} | while read -r line; do say "all boots message $line"; done
journalctl -q -o cat --output-fields=CRASHRING_SIGNATURE MESSAGE_ID={recovered} | while read -r line; do say "all boots signature $line"; done
say "loop done"
{POWER_OFF}"#,
        report = boot_report(),
        rebooted = crashes + 1,
    )
}

/// The part of [`signage_script`] that has a unit's watchdog reboot the box.
fn watchdog_reboot() -> String {
    format!(
        r#"  writers
  kill $(jobs -p)
  say "boot $n rebooting"
  sync {REPORT}
  printf '[Unit]\nFailureAction=reboot\nRebootArgument={REBOOT_REASON}\n[Service]\nExecStart=/bin/sleep infinity\nWatchdogSec=3\n' > /run/systemd/system/signage-player.service
  systemctl daemon-reload
  systemctl start signage-player.service
  sleep 600
  say "boot $n was not rebooted"
"#
    )
}

/// The signage box's own configuration, before `crashring arm` (which
/// runs update-grub): reboot 5 s after a panic, keep two bundles.
const SIGNAGE_CONFIG: &str = r#"echo 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX panic=5"' > /etc/default/grub.d/signage.cfg
mkdir -p /etc/crashring/crashring.conf.d
printf '[Recover]\nMaxBundles=2\n' > /etc/crashring/crashring.conf.d/signage.conf
"#;

/// The signage box's loop on a UEFI machine (OVMF boots GRUB's EFI build
/// from the ESP, which reads the guest's grub.cfg; the firmware, GRUB and
/// the EFI stub all allocate memory before the kernel reserves the range):
/// installed and armed, [`CRASHES`] crashes under load, then a reboot by
/// systemd when a unit's watchdog fires (with a reason), each boot
/// recovering the last, checked; the boot that is rebooted also asks for
/// a report without a crash. (Booted by BIOS, the same box is
/// the kdump-tools scenario's.)
pub fn signage_reboot_loop(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let site = Site {
        imaged_with: None,
        packages: None,
        before_arm: SIGNAGE_CONFIG,
        after_arm: "",
        boot: BootPath::Uefi,
    };
    let installed = install(sh, k, art, &site)?;
    let run = installed.boot_armed(
        sh,
        art,
        &["memmap=", "crash_kexec_post_notifiers", "panic=5"],
        &signage_script(CRASHES, &report::steps(), true),
        &format!("UEFI: OVMF, GRUB from the ESP; {CRASHES} crashes and a watchdog reboot, each boot recovering the last"),
    )?;
    let firmware = check_uefi(&run.log)?;
    let checked = check_loop(sh, art, &installed, &run.log, &run.serial)?;
    let crashring = host_crashring(sh)?;
    let reported = report::check(sh, art, &installed, &crashring, &run.log)?;
    Ok(format!(
        "{firmware}; {checked}; {reported}; {:.0} s",
        run.took.as_secs_f64()
    ))
}

/// Every boot of the UEFI loop was a UEFI boot, and `status` gave its
/// initrd and kernel clear of the range and no memory wipe requested.
/// (OVMF, without a TPM, write-protects the memory-overwrite request
/// variable, so the guest cannot create one: `status` reading it is
/// tested on a copy of a machine, kexec-hooks/src/status.rs.)
fn check_uefi(log: &str) -> Result<String> {
    let mut loaded = Vec::new();
    for n in 1..=BOOTS {
        let line = said(log, &format!("boot {n} status boot"));
        let [line] = line[..] else {
            bail!("boot {n}: crashring status gave no single boot line: {line:?}");
        };
        ensure!(
            line.starts_with("UEFI")
                && line.contains("; initrd at 0x")
                && line.contains("; kernel at 0x")
                && !line.contains("INSIDE"),
            "boot {n}: not a UEFI boot with its initrd and kernel clear of the range: {line}"
        );
        ensure!(
            line.starts_with("UEFI, no memory wipe requested"),
            "boot {n}: status says the firmware wipes memory: {line}"
        );
        loaded.push(line.split_once("; ").map_or("", |(_, l)| l).to_string());
    }
    Ok(format!(
        "{} UEFI boots ({})",
        loaded.len(),
        loaded.join(" | ")
    ))
}

/// What the armed guest's boots printed, until it powered off.
struct Run {
    log: String,
    serial: PathBuf,
    took: Duration,
}

impl Installed {
    /// Boots the armed guest as its grub.cfg says (whose command line must
    /// have each of `wants`) with `script` as the job of every boot, and
    /// lets it reboot (panic=, kdump) until it powers off.
    fn boot_armed(
        &self,
        sh: &Shell,
        art: &Artifacts,
        wants: &[&str],
        script: &str,
        story: &str,
    ) -> Result<Run> {
        let how = self.how;
        let append = match (how, &self.boot) {
            (BootPath::SystemdBoot, _) => {
                let esp = art.dir.join("esp.img");
                let entries = debian::esp_entry_options(sh, &esp)?;
                let [options] = &entries[..] else {
                    bail!(
                        "the ESP holds {} boot entries, not one: {entries:?}",
                        entries.len()
                    );
                };
                options.clone()
            }
            (_, Some(boot)) => boot.append.clone(),
            (_, None) => bail!("the guest has no grub.cfg to boot by"),
        };
        for want in wants {
            ensure!(
                append.split(' ').any(|w| w.starts_with(want)),
                "the armed guest boots without {want}: {append}"
            );
        }
        let job = art.dir.join("job.img");
        debian::job_disk(&job, script)?;
        let serial = art.dir.join("serial.log");
        eprintln!("debian: booting the armed guest ({append}); {story}");
        let mut disks = vec![self.image.path.clone(), job];
        let firmware;
        let start = match (how, &self.boot) {
            (BootPath::Kernel, Some(boot)) => Start::Kernel {
                kernel: &boot.kernel,
                initrd: &boot.initrd,
                append,
            },
            (BootPath::Kernel, None) => bail!("the guest has no grub.cfg to boot by"),
            (BootPath::Uefi | BootPath::SystemdBoot, _) => {
                let esp = art.dir.join("esp.img");
                if how == BootPath::Uefi {
                    debian::grub_esp_disk(sh, &esp)?;
                }
                disks.push(esp);
                firmware = Firmware::ovmf(&art.dir.join("ovmf-vars.fd"))?;
                Start::Uefi(&firmware)
            }
        };
        let took = Vm {
            arch: Arch::X86_64,
            start,
            memory: MEMORY,
            cpus: CPUS,
            disks,
            // No -no-reboot: the guest reboots after a panic, as a box does.
            extra: vec![],
            serial: serial.clone(),
            timeout: Duration::from_secs(20 * 60),
        }
        .run()?;
        // What the jobs said, kept beside the serial log for a person.
        let log = report(sh, &self.image)?;
        std::fs::write(art.dir.join("report.txt"), &log)?;
        Ok(Run { log, serial, took })
    }
}

/// How the armed guest boots: QEMU hands it the kernel grub.cfg names, as
/// a BIOS machine's GRUB would, or UEFI firmware boots GRUB from an ESP,
/// or systemd-boot from the ESP the guest installed it on.
#[derive(Clone, Copy, PartialEq)]
enum BootPath {
    Kernel,
    Uefi,
    SystemdBoot,
}

fn check_loop(
    sh: &Shell,
    art: &Artifacts,
    installed: &Installed,
    log: &str,
    serial: &Path,
) -> Result<String> {
    let boots = reports(log);
    let fail = |what: String| -> anyhow::Error {
        anyhow::anyhow!(
            "{what}\nend of the serial log ({}):\n{}",
            serial.display(),
            qemu::tail(serial, 40)
        )
    };
    if boots.len() != BOOTS as usize || !log.contains("crashring-test: loop done") {
        return Err(fail(format!(
            "the guest booted {} times, not {BOOTS} (a crash or a watchdog that did not reboot, or a boot that never came up)",
            boots.len(),
        )));
    }
    let mut recovery_ms = Vec::new();
    for (&n, r) in &boots {
        let crashed_before = n > 1;
        ensure!(
            r.recording == "1",
            "boot {n}: the module is not recording ({:?})",
            r.recording
        );
        ensure!(
            r.loaded_early(),
            "boot {n}: the module was not loaded from the initramfs (its line and the root file system's mount at {:?} of the kernel's log)",
            r.early
        );
        ensure!(
            r.crashed == (n <= CRASHES) && r.rebooted == (n == CRASHES + 1),
            "boot {n}: crashed {}, rebooted by the watchdog {}, expected {} and {}",
            r.crashed,
            r.rebooted,
            n <= CRASHES,
            n == CRASHES + 1
        );
        let want_journal = if crashed_before {
            "1 failed 0"
        } else {
            "0 failed 0"
        };
        ensure!(
            r.journal == want_journal,
            "boot {n}: the journal has {:?} recovery messages (recovered, failed), not {want_journal:?}",
            r.journal
        );
        ensure!(
            r.device == "660 root crashring" && r.kiosk_wrote && r.nobody_refused,
            "boot {n}: /dev/crashring is {:?} (not 660 root crashring), the group member wrote: {}, a user outside it was refused: {}",
            r.device,
            r.kiosk_wrote,
            r.nobody_refused
        );
        // The range kept every generation: each boot counts on.
        let continuity = said(log, &format!("boot {n} status last boot"));
        let want = if crashed_before {
            "kept: this boot counts on"
        } else {
            "first boot recording here"
        };
        // Noted by crashring-recover.service, which ran before the job.
        ensure!(
            continuity.len() == 1
                && continuity[0].starts_with(want)
                && !continuity[0].contains("not yet noted"),
            "boot {n}: crashring status says of the last boot {continuity:?}, not {want:?} as crashring recover noted it"
        );
        // UEFI kept each panic's record in its variables: systemd-pstore,
        // which runs after crashring-recover.service, still archives it
        // (and empties pstore).
        let archived: Option<u32> = r
            .systemd_pstore
            .strip_suffix(" left 0")
            .and_then(|n| n.parse().ok());
        ensure!(
            archived.is_some_and(|a| (a > 0) == crashed_before),
            "boot {n}: systemd-pstore archived {:?} (panic records archived, files left in /sys/fs/pstore), not records of the crashes before it",
            r.systemd_pstore
        );
        let recover: Vec<&str> = r.recover.split(' ').collect();
        let [result, start, exit] = recover[..] else {
            bail!("boot {n}: crashring-recover.service said {:?}", r.recover);
        };
        ensure!(
            result == "success",
            "boot {n}: crashring-recover.service ended with {result}"
        );
        if crashed_before {
            let (start, exit): (u64, u64) = (start.parse()?, exit.parse()?);
            recovery_ms.push((exit.saturating_sub(start) / 1000, exit / 1000));
        }
    }
    // At the end: the newest MaxBundles generations' bundles (the last
    // crash's and the watchdog reboot's), besides the report asked for.
    let last = &boots[&BOOTS];
    let names: Vec<&str> = last.bundles.split_whitespace().collect();
    let archives: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".tar.gz"))
        .collect();
    let bundles: Vec<&str> = archives
        .iter()
        .copied()
        .filter(|n| !n.starts_with("snapshot-"))
        .collect();
    let rebooted = CRASHES + 1;
    ensure!(
        bundles.len() == MAX_BUNDLES
            && names.len() == 2 * archives.len()
            && bundles[0].starts_with("crash-")
            && bundles[1].starts_with("shutdown-"),
        "after {CRASHES} crashes and a watchdog reboot with MaxBundles={MAX_BUNDLES}, /var/lib/crashring holds {names:?}, not the last crash's bundle and the reboot's, each with its summary"
    );
    let kept = installed
        .image
        .copy_out(sh, "/var/lib/crashring", &art.dir.join("bundles"))?;
    let crashring = host_crashring(sh)?;
    let mut sizes = Vec::new();
    let mut efi_records = 0;
    for (name, boot) in bundles.iter().zip([CRASHES, rebooted]) {
        let id = boots[&boot].id;
        let (archive, summary) = checked_bundle(sh, &crashring, &kept, name)?;
        let (state, message) = if boot == rebooted {
            ("clean-shutdown", REBOOT_REASON)
        } else {
            ("crashed", "sysrq triggered crash")
        };
        ensure!(
            summary["boot_id"] == id
                && summary["host"] == debian::HOSTNAME
                && summary["state"] == state
                && summary["message"] == message,
            "{name}.json is not boot {boot}'s (boot id {id}, {state}, {message:?}): {summary}"
        );
        let ctf = check_markers(sh, art, &archive, boot)?;
        if boot == rebooted {
            check_rebooted(&ctf, name)?;
        } else {
            efi_records = check_efi_pstore(sh, &archive)?;
        }
        sizes.push(std::fs::metadata(&archive)?.len());
    }
    let messages = said(log, "all boots message");
    let reboot_said = format!("(clean-shutdown, shutdown: {REBOOT_REASON})");
    ensure!(
        messages.len() == BOOTS as usize - 1
            && messages.iter().filter(|m| m.contains(&reboot_said)).count() == 1,
        "the journal holds {} recovery messages over all boots, not one per crash and one for the reboot saying {reboot_said:?}: {messages:?}",
        messages.len()
    );
    let signature = check_signatures(log)?;
    Ok(format!(
        "{CRASHES} crashes under a writer per CPU, each recovered by crashring-recover.service on the next boot (run time, ended at, in ms of uptime: {recovery_ms:?}); then a unit's watchdog fired and systemd rebooted the box with RebootArgument={REBOOT_REASON:?}: bundled as a crash is, its summary, journal message and CTF's shutdown event saying why; {MAX_BUNDLES} bundles kept ({sizes:?} bytes), each boot's own markers from every CPU and the crashring group member's, check-bundle passes; the crash's bundle holds the panic's {efi_records} EFI pstore records as the next boot showed them, read by the sandboxed service before systemd-pstore archived them (as it did after every crash); one journal message per bundle; {signature}; recording on every boot, each counting on from the last one's generation; /dev/crashring 660 root:crashring, a user outside the group refused"
    ))
}

/// The crashes of one cause (sysrq under load) share one signature in
/// their journal messages; the watchdog's reboot has its own.
fn check_signatures(log: &str) -> Result<String> {
    let signatures = said(log, "all boots signature");
    let well_formed = |s: &&str| s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit());
    ensure!(
        signatures.len() == BOOTS as usize - 1 && signatures.iter().all(well_formed),
        "the journal's recovery messages carry the signatures {signatures:?}, not one each"
    );
    let (crashes, reboot) = signatures.split_at(CRASHES as usize);
    ensure!(
        crashes.iter().all(|s| *s == crashes[0]) && reboot[0] != crashes[0],
        "the {CRASHES} crashes of one cause have the signatures {crashes:?} and the watchdog's reboot {:?}: not one for the crashes and another for the reboot",
        reboot[0]
    );
    Ok(format!(
        "the {CRASHES} crashes' journal messages share signature {}, the reboot's is {}",
        crashes[0], reboot[0]
    ))
}

/// The EFI pstore records in a crash's `archive`, as the next boot's
/// `/sys/fs/pstore` showed them to crashring-recover.service: listed in
/// the manifest, and one of them the panic's last lines. Their number.
fn check_efi_pstore(sh: &Shell, archive: &Path) -> Result<usize> {
    let listed = cmd!(sh, "tar -tzf {archive}").quiet().read()?;
    let records: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("/logs/pstore-dmesg-efi"))
        .collect();
    ensure!(
        !records.is_empty(),
        "{} holds no EFI pstore record of the panic: {listed}",
        archive.display()
    );
    let text = cmd!(
        sh,
        "tar -xzf {archive} -O --wildcards */logs/pstore-dmesg-efi*"
    )
    .quiet()
    .read()?;
    ensure!(
        text.contains("Kernel panic - not syncing: sysrq triggered crash"),
        "{}'s EFI pstore records lack the panic:\n{}",
        archive.display(),
        text.lines().rev().take(10).collect::<Vec<_>>().join("\n")
    );
    Ok(records.len())
}

/// The watchdog reboot's trace ends with the kernel's restart, for the
/// unit's reason: a `shutdown` event, as babeltrace2 reads it.
fn check_rebooted(ctf: &str, name: &str) -> Result<()> {
    let restart = schema::SHUTDOWN_RESTART;
    let lines: Vec<&str> = ctf.lines().filter(|l| l.contains(" shutdown: ")).collect();
    ensure!(
        lines.len() == 1
            && lines[0].contains(&format!("how = {restart}"))
            && lines[0].contains(&format!("message = \"{REBOOT_REASON}\"")),
        "{name}: not one shutdown event, a restart for {REBOOT_REASON:?}: {lines:?}"
    );
    Ok(())
}

/// Bundle `name` in the copy of the bundle directory `kept`: its path,
/// once `crashring check-bundle` passes it, and its summary.
fn checked_bundle(
    sh: &Shell,
    crashring: &Path,
    kept: &Path,
    name: &str,
) -> Result<(PathBuf, serde_json::Value)> {
    let archive = kept.join(format!("{name}.tar.gz"));
    let summary = serde_json::from_slice(&std::fs::read(kept.join(format!("{name}.json")))?)?;
    let check = cmd!(sh, "{crashring} check-bundle {archive}")
        .quiet()
        .ignore_status()
        .output()?;
    ensure!(
        check.status.success(),
        "crashring check-bundle {name}.tar.gz: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    Ok((archive, summary))
}

/// The bundle's CTF, as babeltrace2 reads it.
fn unpack_ctf(sh: &Shell, art: &Artifacts, archive: &Path) -> Result<String> {
    let unpacked = tempfile::tempdir_in(&art.dir)?;
    let dir = unpacked.path();
    cmd!(sh, "tar -xzf {archive} -C {dir}").quiet().run()?;
    let top: PathBuf = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .next()
        .context("an empty bundle")?;
    let ctf = top.join("kernel/ctf");
    Ok(cmd!(sh, "babeltrace2 {ctf}").quiet().read()?)
}

/// The bundle holds markers of the boot that crashed from every CPU and
/// the group member's, none of another boot, none of the user outside the
/// group. Returns its CTF, as babeltrace2 read it.
fn check_markers(sh: &Shell, art: &Artifacts, archive: &Path, boot: u32) -> Result<String> {
    let mut per_cpu = BTreeMap::new();
    let ctf = unpack_ctf(sh, art, archive)?;
    let kiosk = format!("kiosk boot {boot}\"");
    ensure!(
        ctf.lines().any(|l| l.contains(&kiosk)),
        "{} lacks the marker the group member wrote ({kiosk})",
        archive.display()
    );
    ensure!(
        !ctf.contains("nobody boot"),
        "{} holds a marker of a user outside the group",
        archive.display()
    );
    for l in ctf.lines() {
        if let Some((_, rest)) = l.split_once("signage boot ") {
            let mut w = rest.split(' ');
            let (b, c) = (w.next(), w.nth(1));
            ensure!(
                b == Some(&boot.to_string()),
                "{} holds a marker of another boot: {l}",
                archive.display()
            );
            *per_cpu
                .entry(c.unwrap_or_default().to_string())
                .or_insert(0u32) += 1;
        }
    }
    ensure!(
        per_cpu.len() == CPUS as usize,
        "{}: markers of boot {boot} from CPUs {per_cpu:?}, not all {CPUS}",
        archive.display()
    );
    Ok(ctf)
}

/// The per-boot part of `kdump-tools`: [`boot_report`] and what kdump-tools
/// says; the first boot writes the numbered workload and panics (the
/// capture kernel boots the root file system, crashring-capture.service
/// bundles, kdump-tools saves its dump and reboots); the second says what
/// the capture boot left and powers off.
fn kdump_script() -> String {
    format!(
        r#"{report}say "boot $n kdump $(kdump-config status | tail -n 1)"
say "boot $n kdump part $(grep -c "^# <<< End of crashring arm's part.$" /etc/default/kdump-tools) $(stat -c '%a %U' /etc/default/kdump-tools)"
if [ $n -eq 1 ]; then
  journalctl --sync
{workload}  say "boot $n crashing"
  sync {REPORT}
  echo c > /proc/sysrq-trigger
fi
# The capture boot is the previous one in the journal.
journalctl -b -1 -q -o cat -u crashring-capture.service -u kdump-tools-dump.service | while read -r line; do say "boot $n capture boot: $line"; done
say "boot $n dumps $(ls /var/crash/*/dump.* 2>/dev/null | wc -l)"
# Which came first: the bundle's summary, or kdump-tools' dump folder.
say "boot $n written $(stat -c %Y /var/lib/crashring/*.json) $(stat -c %W /var/crash/2*)"
say "loop done"
{purge}{POWER_OFF}"#,
        report = boot_report(),
        purge = purge(),
        workload = super::workload_writes()
    )
}

/// Purging both packages undoes `crashring arm` (postrm): no GRUB
/// drop-in, modprobe or modules-load file, no part in kdump-tools'
/// configuration, a grub.cfg that reserves nothing, no module left, and
/// an initramfs built again without the module and its options (the
/// packages' trigger on an armed machine).
fn purge() -> String {
    format!(
        r#"apt-get purge -q -y crashring crashring-dkms > /root/purge.log 2>&1
say "purge $? left $(ls /etc/crashring/armed /etc/default/grub.d/crashring.cfg /etc/modprobe.d/crashring.conf /etc/modules-load.d/crashring.conf 2>/dev/null | wc -l) grub $(grep -c 'memmap=' /boot/grub/grub.cfg) kdump $(grep -c crashring /etc/default/kdump-tools) dkms $(dkms status crashring | wc -l) modules $(find /lib/modules -name 'crashring.ko*' | wc -l) initramfs {IN_INITRAMFS}"
"#
    )
}

/// How many of crashring.ko and its options (/etc/modprobe.d) the running
/// kernel's initramfs holds, as a shell expansion.
const IN_INITRAMFS: &str = r#"$(lsinitramfs /boot/initrd.img-$(uname -r) | grep -cE '/crashring\.ko(\.[a-z]+)?$|^etc/modprobe\.d/crashring\.conf$')"#;

/// Kernel messages on the console (Debian's default is `quiet`): the
/// capture kernel inherits the command line, and what it prints is what
/// tells a failed capture boot from a slow one.
const VERBOSE_CONSOLE: &str = "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"\"/' /etc/default/grub\n";

/// kdump-tools' configuration holds secrets (`FTP_PASSWORD`): made
/// private before arm, which must keep it so; a pristine copy is kept.
const KDUMP_TOOLS_PRIVATE: &str = "chmod 0600 /etc/default/kdump-tools
cp -p /etc/default/kdump-tools /root/kdump-tools.maintainer
";

/// After arm, the maintainer's version comes back without crashring's
/// part, as kdump-tools installed after arm, or ucf's \"install the package
/// maintainer's version\", leaves it: status must say so, and the next
/// boot's crashring-kdump-tools.service must put the part back before
/// kdump-tools loads its capture kernel, or the capture boots with a bare
/// memmap= and no memory.
const KDUMP_TOOLS_REPLACED: &str = r#"say "kdump-tools mode $(stat -c '%a %U' /etc/default/kdump-tools)"
cp -p /root/kdump-tools.maintainer /etc/default/kdump-tools
crashring status > /dev/null 2>&1
say "status after the part was lost $?"
"#;

fn check_kdump_part_lost(log: &str) -> Result<()> {
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
    ensure!(
        one("kdump-tools mode") == "600 root",
        "arm changed /etc/default/kdump-tools' mode or owner to {:?}",
        one("kdump-tools mode")
    );
    ensure!(
        one("status after the part was lost") == "1"
            && said(log, "status")
                .iter()
                .any(|l| l.contains("attention: kdump-tools' configuration lacks crashring's part")),
        "crashring status did not flag kdump-tools' configuration without crashring's part (exit {:?})",
        one("status after the part was lost")
    );
    Ok(())
}

pub fn kdump_tools(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let site = Site {
        imaged_with: Some(KDUMP_TOOLS_SET),
        packages: None,
        before_arm: &(VERBOSE_CONSOLE.to_owned() + KDUMP_TOOLS_PRIVATE),
        after_arm: KDUMP_TOOLS_REPLACED,
        boot: BootPath::Kernel,
    };
    let installed = install(sh, k, art, &site)?;
    check_kdump_part_lost(&installed.log)?;
    let run = installed.boot_armed(
        sh,
        art,
        &["memmap=", "crash_kexec_post_notifiers", "crashkernel="],
        &kdump_script(),
        "kdump-tools loaded; a panic, the capture boot, the next boot",
    )?;
    check_kdump(sh, art, &installed, &run.log)
        .with_context(|| {
            format!(
                "serial log {}:\n{}",
                run.serial.display(),
                qemu::tail(&run.serial, 40)
            )
        })
        .map(|s| format!("{s}; {:.0} s", run.took.as_secs_f64()))
}

fn check_kdump(sh: &Shell, art: &Artifacts, installed: &Installed, log: &str) -> Result<String> {
    let boots = reports(log);
    ensure!(
        boots.len() == 2 && log.contains("crashring-test: loop done"),
        "{} boots reported, not 2 (the crashed one and the one after the capture)",
        boots.len()
    );
    for (n, r) in &boots {
        ensure!(
            r.loaded_early(),
            "boot {n}: the module was not loaded from the initramfs (its line and the root file system's mount at {:?} of the kernel's log)",
            r.early
        );
    }
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
    ensure!(
        one("boot 1 kdump").contains("ready to kdump"),
        "kdump-tools was not loaded: {:?}",
        one("boot 1 kdump")
    );
    ensure!(
        one("purge") == "0 left 0 grub 0 kdump 0 dkms 0 modules 0 initramfs 0",
        "apt-get purge left crashring's traces (exit, arm's files, memmap= in grub.cfg, kdump-tools' part, DKMS entries, modules, the module or its options in the initramfs): {:?}",
        one("purge")
    );
    ensure!(
        one("boot 1 kdump part") == "1 600 root",
        "crashring-kdump-tools.service did not put the lost part back, privately, before kdump-tools loaded: {:?}",
        one("boot 1 kdump part")
    );
    ensure!(
        one("boot 2 dumps") == "1",
        "kdump-tools saved {:?} dumps, not 1",
        one("boot 2 dumps")
    );
    let [bundle] = boots[&2]
        .bundles
        .split_whitespace()
        .filter_map(|n| n.strip_suffix(".tar.gz"))
        .collect::<Vec<_>>()[..]
    else {
        bail!(
            "after the capture boot, /var/lib/crashring holds {:?}, not one bundle",
            boots[&2].bundles
        );
    };
    let written: Vec<u64> = one("boot 2 written")
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    ensure!(
        matches!(written[..], [summary, dump] if summary <= dump),
        "the bundle's summary was written at {written:?}[0], after kdump-tools made its dump folder ({written:?}[1])"
    );
    // The capture kernel's module wrote nothing: the next boot counted on
    // from the crashed generation, found in the same range.
    let continuity = said(log, "boot 2 status last boot");
    ensure!(
        continuity.len() == 1
            && continuity[0].starts_with("kept: this boot counts on from generation"),
        "after the capture boot, crashring status says of the last boot {continuity:?}"
    );
    let message = said(log, "boot 2 message");
    ensure!(
        message.len() == 1
            && message[0].contains("archived already as")
            && message[0].contains(bundle),
        "the next boot did not find the crash already archived by the capture boot: {message:?}"
    );
    let kept = installed
        .image
        .copy_out(sh, "/var/lib/crashring", &art.dir.join("bundles"))?;
    let crashring = host_crashring(sh)?;
    let (archive, summary) = checked_bundle(sh, &crashring, &kept, bundle)?;
    ensure!(
        summary["boot_id"] == boots[&1].id && summary["state"] == "crashed",
        "{bundle}.json is not boot 1's crash: {summary}"
    );
    let ctf = unpack_ctf(sh, art, &archive)?;
    let markers: Vec<u32> = ctf
        .lines()
        .filter_map(|l| {
            l.split_once("workload marker ")?
                .1
                .split('"')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    let want: Vec<u32> = (1..=super::WORKLOAD_EVENTS).collect();
    ensure!(
        markers == want,
        "the bundle holds workload markers {:?}..., not 1 to {} in order",
        &markers[..markers.len().min(10)],
        super::WORKLOAD_EVENTS
    );
    Ok(format!(
        "kdump-tools loaded; panic; in the capture boot crashring-capture.service bundled {bundle} before kdump-tools saved its dump; the next boot found it archived and only acknowledged; the bundle holds all {} workload markers in order and check-bundle passes",
        super::WORKLOAD_EVENTS
    ))
}
