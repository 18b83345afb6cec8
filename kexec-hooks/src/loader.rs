//! The boot loaders `crashring arm` drives, and its record of what it
//! told them.
//!
//! The range must be on the kernel's command line at every boot, and each
//! boot loader keeps that line in its own place: Debian's GRUB in
//! /etc/default/grub and its drop-ins (update-grub writes grub.cfg from
//! them); kernel-install (systemd-boot's entries, UKIs) in
//! /etc/kernel/cmdline (`kernel-install add` writes each kernel's entry
//! from it); grubby (Fedora, RHEL) in each kernel's entry, changed through
//! its own command. `arm` writes the [`RECORD`] besides: the range, the
//! loader, and the words it added, so that `status`, `recover`, `disarm`
//! and the package's purge know what is armed and take back exactly that
//! (an admin's own `crash_kexec_post_notifiers` stays).

use crate::arm::{ArmError, Change, MARK};
use crate::reserve::Reservation;
use crate::system::System;

/// arm's record of what it armed (see [`Armed`]).
pub const RECORD: &str = "/etc/crashring/armed";

/// GRUB as Debian configures it: this file, the drop-ins beside it, and
/// update-grub, which writes [`GRUB_CFG`].
pub const GRUB_DEFAULT: &str = "/etc/default/grub";
/// GRUB's drop-in: Debian's grub-mkconfig sources /etc/default/grub.d/*.cfg
/// after /etc/default/grub.
pub const GRUB_DROP_IN: &str = "/etc/default/grub.d/crashring.cfg";
pub const GRUB_DROP_INS: &str = "/etc/default/grub.d";
const UPDATE_GRUB: [&str; 2] = ["/usr/sbin/update-grub", "/sbin/update-grub"];
pub const GRUB_CFG: &str = "/boot/grub/grub.cfg";
const GRUBBY: [&str; 2] = ["/usr/sbin/grubby", "/sbin/grubby"];
/// kernel-install's command line for every entry it writes; without it,
/// /usr/lib/kernel/cmdline, then the running kernel's.
pub const KERNEL_CMDLINE: &str = "/etc/kernel/cmdline";
const VENDOR_CMDLINE: &str = "/usr/lib/kernel/cmdline";
const KERNEL_INSTALL: [&str; 2] = ["/usr/bin/kernel-install", "/bin/kernel-install"];
/// What says kernel-install writes the boot entries: systemd-boot's tool
/// and configuration on the usual ESP mount points, kernel-install's own.
const KERNEL_INSTALL_IN_USE: [&str; 7] = [
    KERNEL_CMDLINE,
    "/usr/bin/bootctl",
    "/efi/loader/loader.conf",
    "/boot/efi/loader/loader.conf",
    "/boot/loader/loader.conf",
    "/etc/kernel/install.conf",
    "/usr/lib/kernel/install.conf",
];
/// Where kernels' modules are installed; the same directory with a
/// merged /usr, but a machine's copy may have either.
pub const MODULE_DIRS: [&str; 2] = ["/lib/modules", "/usr/lib/modules"];

/// The panic notifiers run before a kdump kernel takes over, so that the
/// module writes the crash record back either way.
pub const POST_NOTIFIERS: &str = "crash_kexec_post_notifiers";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    /// Debian's GRUB: a drop-in, then update-grub.
    Grub,
    /// grubby: `grubby --update-kernel=ALL --args=...`.
    Grubby,
    /// kernel-install: /etc/kernel/cmdline, then `kernel-install add`.
    KernelInstall,
}

impl Loader {
    const ALL: [Loader; 3] = [Loader::Grub, Loader::Grubby, Loader::KernelInstall];

    /// The name in the record.
    pub fn name(self) -> &'static str {
        match self {
            Loader::Grub => "grub",
            Loader::Grubby => "grubby",
            Loader::KernelInstall => "kernel-install",
        }
    }

    /// Where the command line is kept and what carries it to the boot
    /// entries, for people.
    pub fn route(self) -> &'static str {
        match self {
            Loader::Grub => "GRUB: /etc/default/grub.d/crashring.cfg, update-grub",
            Loader::Grubby => "grubby: every kernel's boot entry",
            Loader::KernelInstall => "kernel-install: /etc/kernel/cmdline, every kernel's entry",
        }
    }

    /// What must run before a changed command line reaches a boot.
    pub fn command(self) -> &'static str {
        match self {
            Loader::Grub => "update-grub",
            Loader::Grubby => "grubby",
            Loader::KernelInstall => "kernel-install",
        }
    }

    /// Where [`Loader::command`] is installed.
    fn tool(self) -> &'static [&'static str] {
        match self {
            Loader::Grub => &UPDATE_GRUB,
            Loader::Grubby => &GRUBBY,
            Loader::KernelInstall => &KERNEL_INSTALL,
        }
    }
}

/// Whether any of `paths` exists on the machine: how a tool is found
/// installed.
fn any_exists(sys: &System, paths: &[&str]) -> bool {
    paths.iter().any(|p| sys.path(p).exists())
}

/// The Boot Loader Interface's variable naming the boot loader that
/// booted the running kernel: 4 bytes of attributes, then its name and
/// version in UTF-16 ("systemd-boot 257.7"; GRUB's `bli` module writes
/// "GRUB 2.12").
pub const LOADER_INFO: &str =
    "/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";

/// What the running boot says of the loader that booted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Booted {
    /// Nothing either way (BIOS without GRUB's word, a machine's copy).
    Unknown,
    /// `BOOT_IMAGE=` on /proc/cmdline (GRUB's `linux` command adds it),
    /// or LoaderInfo naming GRUB.
    Grub,
    /// LoaderInfo naming systemd-boot, and no `BOOT_IMAGE=`.
    SystemdBoot,
    /// Both: systemd-boot chainloading GRUB, or a stale variable.
    Conflict,
}

fn booted(sys: &System) -> Booted {
    let boot_image = read(sys, "/proc/cmdline")
        .ok()
        .flatten()
        .is_some_and(|c| c.split_whitespace().any(|w| w.starts_with("BOOT_IMAGE=")));
    let info: String = sys
        .read_bytes(LOADER_INFO)
        .ok()
        .flatten()
        .map(|b| {
            let units: Vec<u16> = b
                .get(4..)
                .unwrap_or_default()
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .take_while(|&u| u != 0)
                .collect();
            String::from_utf16_lossy(&units)
        })
        .unwrap_or_default();
    match (
        boot_image || info.starts_with("GRUB"),
        info.starts_with("systemd-boot"),
    ) {
        (true, true) => Booted::Conflict,
        (true, false) => Booted::Grub,
        (false, true) => Booted::SystemdBoot,
        (false, false) => Booted::Unknown,
    }
}

/// The boot loader the machine is configured for, found before anything
/// is written; `Err` describes what was found instead, for a refusal
/// that writes nothing no boot would read. On Fedora and RHEL, grubby
/// comes before kernel-install, which calls it there. GRUB's settings
/// are no evidence that GRUB boots the machine (Debian keeps them when
/// systemd-boot takes over): the loader that booted this boot decides,
/// and conflicting evidence is refused rather than guessed at, since arm
/// told the wrong loader leaves every boot unrecorded.
pub fn detect(sys: &System) -> Result<Loader, &'static str> {
    let any = |paths: &[&str]| any_exists(sys, paths);
    let booted = booted(sys);
    if booted == Booted::Conflict {
        return Err("conflicting evidence of the boot loader that booted it: GRUB's BOOT_IMAGE= on /proc/cmdline, and systemd-boot named by the LoaderInfo EFI variable (systemd-boot chainloading GRUB?)");
    }
    let grub = any(&[GRUB_DEFAULT]) && any(&UPDATE_GRUB);
    if grub && booted != Booted::SystemdBoot {
        return Ok(Loader::Grub);
    }
    if any(&GRUBBY) {
        return Ok(Loader::Grubby);
    }
    let in_use = any(&KERNEL_INSTALL_IN_USE) || booted == Booted::SystemdBoot;
    match (any(&KERNEL_INSTALL), in_use) {
        (true, true) => Ok(Loader::KernelInstall),
        (false, true) if grub => Err("systemd-boot, which booted it (the LoaderInfo EFI variable), but no kernel-install; GRUB's settings, which no boot reads, would change nothing"),
        (false, true) => Err("systemd-boot or /etc/kernel/cmdline, but no kernel-install"),
        _ if any(&[GRUB_DEFAULT]) => Err("GRUB's settings, but no update-grub"),
        _ => Err("a boot loader it does not know"),
    }
}

/// What `arm` armed, as its [`RECORD`] holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Armed {
    pub reservation: Reservation,
    pub loader: Loader,
    /// The words arm added to the command line, as the kernel reads them.
    pub added: Vec<String>,
    /// For kernel-install, when arm created /etc/kernel/cmdline: the line
    /// it started from (the running kernel's). Disarm removes the file
    /// while it holds just that.
    pub created_from: Option<String>,
    /// The commands of an arm or disarm that have not all succeeded yet
    /// (see [`crate::arm::Plan::commands_done`]): the next arm or disarm
    /// runs its own again.
    pub pending: Option<String>,
}

impl Armed {
    /// What the `pending=` mark says: which of arm and disarm left it
    /// (`None` for a mark that does not say), and its commands.
    pub fn unfinished(&self) -> Option<(Option<&str>, &str)> {
        let pending = self.pending.as_deref()?;
        Some(match pending.split_once(": ") {
            Some((verb @ ("arm" | "disarm"), commands)) => (Some(verb), commands),
            _ => (None, pending),
        })
    }

    pub fn text(&self) -> String {
        let mut text = format!(
            "{MARK}\n\
             # What arm reserved and how the boot loader was told: read by\n\
             # status, recover, disarm and the package's purge. Not a setting.\n\
             {}\nloader={}\nadded={}\n",
            self.reservation.record_line(),
            self.loader.name(),
            self.added.join(" ")
        );
        if let Some(line) = &self.created_from {
            text += &format!("created-from={line}\n");
        }
        if let Some(commands) = &self.pending {
            text += &format!("pending={commands}\n");
        }
        text
    }

    pub fn parse(text: &str) -> Option<Armed> {
        if text.lines().next() != Some(MARK) {
            return None;
        }
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        };
        let reservation = Reservation::from_record(value)?;
        let loader = Loader::ALL
            .into_iter()
            .find(|l| Some(l.name()) == value("loader"))?;
        Some(Armed {
            reservation,
            loader,
            added: value("added")?
                .split_whitespace()
                .map(String::from)
                .collect(),
            created_from: value("created-from").map(String::from),
            pending: value("pending").map(String::from),
        })
    }
}

/// What the machine is armed with: `Ok(None)` when not armed, `Err` when
/// the record is there but unreadable.
pub fn armed(sys: &System) -> Result<Option<Armed>, ArmError> {
    let Some(text) = read(sys, RECORD)? else {
        return Ok(None);
    };
    Armed::parse(&text)
        .map(Some)
        .ok_or(ArmError::Unreadable { text })
}

pub(crate) fn read(sys: &System, path: &str) -> Result<Option<String>, ArmError> {
    sys.read(path).map_err(|source| ArmError::Read {
        path: path.into(),
        source,
    })
}

/// The word as GRUB's parser must see it, in grub.cfg or in an entry
/// that GRUB's blscfg reads (grubby's): `\$`, or `$` would start a
/// variable.
fn grub_escaped(word: &str) -> String {
    word.replace('$', "\\$")
}

/// What arming or disarming through a loader does besides the record.
#[derive(Debug, Default)]
pub struct Steps {
    pub changes: Vec<Change>,
    /// Run after the files are written, in order.
    pub commands: Vec<Vec<String>>,
    pub notes: Vec<String>,
    /// The words added (arming).
    pub added: Vec<String>,
    pub created_from: Option<String>,
}

/// Arming `reservation` through `loader`; `previous` is the record of an
/// earlier arm, whose additions stay arm's.
pub fn arm_steps(
    sys: &System,
    loader: Loader,
    reservation: Reservation,
    previous: Option<&Armed>,
) -> Result<Steps, ArmError> {
    let memmap = reservation.kernel_word();
    let earlier = |word: &str| previous.is_some_and(|a| a.added.iter().any(|w| w == word));
    // A command an earlier arm or disarm left unfinished runs again,
    // whatever the files say now.
    let pending = previous.and_then(|a| a.pending.as_deref());
    match loader {
        Loader::Grub => {
            let mut steps = Steps {
                added: vec![memmap.clone(), POST_NOTIFIERS.into()],
                ..Steps::default()
            };
            let old = read(sys, GRUB_DROP_IN)?;
            if old.as_deref().is_some_and(|t| !crate::arm::ours(t)) {
                return Err(ArmError::NotOurs(GRUB_DROP_IN.into()));
            }
            let new = grub_drop_in(reservation);
            let changed = old.as_deref() != Some(new.as_str());
            if changed {
                steps.changes.push(Change {
                    path: GRUB_DROP_IN,
                    old,
                    new: Some(new),
                });
            } else if grub_cfg_lacks(sys, reservation)? {
                steps.notes.push(format!(
                    "{GRUB_CFG} boots without {memmap}: update-grub runs again"
                ));
            } else if pending.is_none() {
                return Ok(steps);
            }
            steps.commands.push(vec!["update-grub".into()]);
            Ok(steps)
        }
        Loader::KernelInstall => {
            let current = read(sys, KERNEL_CMDLINE)?;
            let (line, created_from) = match &current {
                Some(line) => (
                    normalized(line),
                    previous.and_then(|a| a.created_from.clone()),
                ),
                None => {
                    // Booted armed, the running line has arm's words.
                    let line = kernel_install_default(sys)?
                        .split_whitespace()
                        .filter(|w| *w != memmap && !earlier(w))
                        .collect::<Vec<_>>()
                        .join(" ");
                    (line.clone(), Some(line))
                }
            };
            let have: Vec<&str> = line.split_whitespace().collect();
            let mut added = Vec::new();
            let mut new = line.clone();
            for word in [memmap.as_str(), POST_NOTIFIERS] {
                if !have.contains(&word) {
                    new = format!("{new} {word}").trim_start().to_string();
                    added.push(word.to_string());
                } else if earlier(word) {
                    added.push(word.to_string());
                }
            }
            let mut steps = Steps {
                added,
                created_from,
                ..Steps::default()
            };
            if current.as_deref() != Some(format!("{new}\n").as_str()) {
                steps.changes.push(Change {
                    path: KERNEL_CMDLINE,
                    old: current,
                    new: Some(format!("{new}\n")),
                });
            } else if let Some(entry) = bls_entries_lacking(sys, &memmap) {
                steps.notes.push(format!(
                    "{entry} boots without {memmap}: kernel-install add runs again"
                ));
            } else if pending.is_none() {
                return Ok(steps);
            }
            steps.commands = kernel_install_commands(sys, &mut steps.notes);
            Ok(steps)
        }
        Loader::Grubby => {
            if let Some(a) = previous.filter(|a| a.loader == Loader::Grubby && pending.is_none()) {
                // Told already: grubby keeps the words in every entry and
                // gives new kernels the default entry's. Pending, it may
                // not have been (or a disarm's grubby took them away).
                return Ok(Steps {
                    added: a.added.clone(),
                    ..Steps::default()
                });
            }
            let running = read(sys, "/proc/cmdline")?.unwrap_or_default();
            let mut added = vec![memmap];
            // Booted armed, the running line has the notifiers arm added:
            // still arm's, for disarm to take back.
            if !running.split_whitespace().any(|w| w == POST_NOTIFIERS) || earlier(POST_NOTIFIERS) {
                added.push(POST_NOTIFIERS.into());
            }
            Ok(Steps {
                commands: vec![grubby("--args", &added)],
                added,
                ..Steps::default()
            })
        }
    }
}

/// Disarming what `armed` records: its words taken back, nothing else.
/// A command an earlier arm or disarm left unfinished (the record still
/// marked pending) runs again, whatever the files say now.
pub fn disarm_steps(sys: &System, armed: &Armed) -> Result<Steps, ArmError> {
    let mut steps = Steps::default();
    let pending = armed.pending.is_some();
    match armed.loader {
        Loader::Grub => match read(sys, GRUB_DROP_IN)? {
            Some(text) if crate::arm::ours(&text) => {
                steps.changes.push(Change {
                    path: GRUB_DROP_IN,
                    old: Some(text),
                    new: None,
                });
                steps.commands.push(vec!["update-grub".into()]);
            }
            Some(_) => steps.notes.push(format!(
                "{GRUB_DROP_IN} was not written by crashring arm: left as it is"
            )),
            None if pending => steps.commands.push(vec!["update-grub".into()]),
            None => {}
        },
        Loader::KernelInstall => {
            if let Some(current) = read(sys, KERNEL_CMDLINE)? {
                let left: Vec<&str> = current
                    .split_whitespace()
                    .filter(|w| !armed.added.iter().any(|a| a == w))
                    .collect();
                let left = left.join(" ");
                let new = (armed.created_from.as_deref() != Some(left.as_str()))
                    .then(|| format!("{left}\n"));
                if new.as_deref() != Some(current.as_str()) {
                    steps.changes.push(Change {
                        path: KERNEL_CMDLINE,
                        old: Some(current),
                        new,
                    });
                }
            }
            if pending || !steps.changes.is_empty() {
                steps.commands = kernel_install_commands(sys, &mut steps.notes);
            }
        }
        Loader::Grubby => steps.commands.push(grubby("--remove-args", &armed.added)),
    }
    if pending && !steps.commands.is_empty() && !any_exists(sys, armed.loader.tool()) {
        // The machine moved to another boot loader and this one's package
        // is gone: run again, the command would fail at every disarm,
        // and the record it keeps pending makes every arm refuse.
        steps.notes.push(format!(
            "{} is not installed ({}): what an earlier arm or disarm left unfinished of it is not run again; the boot entries it wrote last keep the range if anything still boots them",
            armed.loader.command(),
            armed.loader.tool().join(", ")
        ));
        steps.commands.clear();
    }
    Ok(steps)
}

/// grubby changing every kernel's entry.
fn grubby(option: &str, words: &[String]) -> Vec<String> {
    let words: Vec<String> = words.iter().map(|w| grub_escaped(w)).collect();
    vec![
        "grubby".into(),
        "--update-kernel=ALL".into(),
        format!("{option}={}", words.join(" ")),
    ]
}

fn normalized(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The line kernel-install uses without /etc/kernel/cmdline: the
/// vendor's, or the running kernel's without what the boot loader added
/// for this boot only (as its 90-loaderentry.install reads it).
fn kernel_install_default(sys: &System) -> Result<String, ArmError> {
    if let Some(line) = read(sys, VENDOR_CMDLINE)? {
        return Ok(normalized(&line));
    }
    let running = read(sys, "/proc/cmdline")?.ok_or(ArmError::NoCmdline)?;
    Ok(running
        .split_whitespace()
        .filter(|w| !w.starts_with("BOOT_IMAGE=") && !w.starts_with("initrd="))
        .collect::<Vec<_>>()
        .join(" "))
}

/// `kernel-install add VERSION IMAGE` for every installed kernel, so that
/// each entry gets the new line (its plugins find the initrd).
fn kernel_install_commands(sys: &System, notes: &mut Vec<String>) -> Vec<Vec<String>> {
    let kernels = installed_kernels(sys);
    if kernels.is_empty() {
        notes.push(
            "no installed kernel found (/boot/vmlinuz-VERSION or /usr/lib/modules/VERSION/vmlinuz): the next kernel installed gets the line".into(),
        );
    }
    kernels
        .into_iter()
        .map(|(version, image)| vec!["kernel-install".into(), "add".into(), version, image])
        .collect()
}

/// Every kernel with its modules installed, and its image: in the modules'
/// directory (Fedora's layout, kernel-install's own) or /boot (Debian's).
pub fn installed_kernels(sys: &System) -> Vec<(String, String)> {
    let mut versions: Vec<String> = MODULE_DIRS
        .iter()
        .filter_map(|d| std::fs::read_dir(sys.path(d)).ok())
        .flat_map(|dir| dir.flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    versions.sort();
    versions.dedup();
    versions
        .into_iter()
        .filter_map(|v| {
            [
                format!("/usr/lib/modules/{v}/vmlinuz"),
                format!("/boot/vmlinuz-{v}"),
            ]
            .into_iter()
            .find(|image| sys.path(image).is_file())
            .map(|image| (v, image))
        })
        .collect()
}

fn grub_drop_in(r: Reservation) -> String {
    // `\\\$` in the shell's double quotes leaves `\$` in the variable;
    // grub-mkconfig copies it into grub.cfg, where GRUB's parser reads it
    // as a plain `$` (kernel-parameters.txt, memmap=). reserve_mem= has
    // none.
    format!(
        "{MARK}\n\
         # The crash-persistent region, taken out of RAM before anything is\n\
         # placed, and the panic notifiers run before a kdump kernel takes over.\n\
         GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {} {POST_NOTIFIERS}\"\n",
        r.kernel_word().replace('$', "\\\\\\$"),
    )
}

/// Whether GRUB's generated menu boots with the range: an armed machine
/// whose grub.cfg lacks it (update-grub failed or never ran, or a kernel
/// package rewrote it from other settings) needs update-grub again. A
/// machine's copy without grub.cfg is left to that system.
pub(crate) fn grub_cfg_lacks(sys: &System, r: Reservation) -> Result<bool, ArmError> {
    let Some(cfg) = read(sys, GRUB_CFG)? else {
        return Ok(false);
    };
    let word = r.kernel_word();
    Ok(!cfg.contains(&grub_escaped(&word)) && !cfg.contains(&word))
}

/// Where kernel-install writes Boot Loader Specification entries: the
/// ESP's usual mount points, or /boot (its XBOOTLDR partition).
const BLS_ENTRIES: [&str; 3] = [
    "/efi/loader/entries",
    "/boot/efi/loader/entries",
    "/boot/loader/entries",
];

/// An entry kernel-install wrote for an installed kernel (its `version`)
/// whose `options` lack `word`, as kernel-install add leaves it when it
/// failed or never ran: `kernel-install add` runs again. Entries of
/// kernels no longer installed are no one's to rewrite; a UKI carries
/// its line inside, and a machine's copy may have no entries at all.
fn bls_entries_lacking(sys: &System, word: &str) -> Option<String> {
    let installed: Vec<String> = installed_kernels(sys).into_iter().map(|(v, _)| v).collect();
    let values = |text: &str, key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix([' ', '\t']))
            .map(|v| v.trim().to_string())
            .collect()
    };
    BLS_ENTRIES
        .iter()
        .filter_map(|dir| std::fs::read_dir(sys.path(dir)).ok().map(|d| (dir, d)))
        .flat_map(|(dir, entries)| entries.flatten().map(move |e| (dir, e)))
        .find_map(|(dir, e)| {
            let name = e.file_name().to_string_lossy().into_owned();
            // One that cannot be read (the ESP is root's) is not
            // claimed to lack anything.
            let text = std::fs::read_to_string(e.path()).ok()?;
            let ours = values(&text, "version")
                .iter()
                .any(|v| installed.contains(v));
            let has = values(&text, "options")
                .iter()
                .any(|o| o.split_whitespace().any(|w| w == word));
            (name.ends_with(".conf") && ours && !has).then(|| format!("{dir}/{name}"))
        })
}

/// The files that hold the command line the next boot gets, besides
/// arm's own: where a `memmap=` range configured for another user
/// (ramoops, say) but not yet booted can be read.
pub fn configured_cmdlines(sys: &System) -> Vec<String> {
    let mut files = vec![GRUB_DEFAULT.to_string(), KERNEL_CMDLINE.to_string()];
    if let Ok(dir) = std::fs::read_dir(sys.path(GRUB_DROP_INS)) {
        files.extend(
            dir.flatten()
                .map(|e| format!("{GRUB_DROP_INS}/{}", e.file_name().to_string_lossy()))
                .filter(|p| p.ends_with(".cfg") && p != GRUB_DROP_IN),
        );
    }
    files
}
