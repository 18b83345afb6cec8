//! `crashring arm` and `crashring disarm`: the files that make a machine
//! reserve the region and load the module at every boot, planned first
//! (so `--dry-run` shows exactly what would change and what would run)
//! and then applied.
//!
//! Every file `arm` writes starts with [`MARK`]; `disarm` removes exactly
//! the files carrying it, takes back exactly the words it added to files
//! that are not its own, and `arm` never overwrites a file without it.
//! The record ([`loader::RECORD`]) is the machine's memory of the range:
//! arming again keeps it, since moving it would leave the generation
//! recorded in the old range where no later boot looks.

use crate::boot;
use crate::initramfs;
use crate::iomem;
use crate::kdump_tools::{self, KDUMP_TOOLS};
use crate::loader::{self, read, Armed, Loader};
use crate::reserve::{self, Reservation};
use crate::system::System;
use std::fmt::Write as _;
use std::ops::Range;

/// The first line of every file `arm` writes.
pub const MARK: &str = "# Written by `crashring arm`; `crashring disarm` removes it.";

pub const MODPROBE: &str = "/etc/modprobe.d/crashring.conf";
pub const MODULES_LOAD: &str = "/etc/modules-load.d/crashring.conf";

/// The region's size when `--size` is not given.
pub const DEFAULT_SIZE: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    // The io::Error is the source, which the CLI's chain prints after
    // the message: in the message too, it would be said twice.
    #[error("reading {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("writing {path}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Place(#[from] iomem::PlaceError),
    #[error(
        "crashring arm reserves memory on x86 (memmap=) and arm64 (reserve_mem=), and this machine is {0}: load the module with region= over a range the device tree reserves (reserved-memory, no-map), or with reserve_mem= on 6.11+"
    )]
    Unsupported(String),
    #[error(
        "this arm64 machine runs Linux {0}, which has no reserve_mem= (6.11 and later), and arm64 has no memmap=: reserve a range in its device tree (a reserved-memory node marked no-map) and load the module with region=SIZE@ADDR over it, or boot a 6.11 or later kernel (Debian 12's backports have 6.12) and arm again; crashring arm does not write device trees"
    )]
    NoReserveMem(String),
    #[error(
        "cannot tell which kernel this machine runs (no /proc/sys/kernel/osrelease): on arm64 that decides whether reserve_mem= exists"
    )]
    NoRelease,
    #[error(
        "{0} exists and was not written by crashring arm: remove it or fold its settings in by hand, then run arm again"
    )]
    NotOurs(String),
    #[error(
        "already armed with {current} ({}); a new size moves the range and leaves what it holds where no boot looks: archive the previous generation, run crashring disarm, reboot, then arm with the new size",
        loader::RECORD
    )]
    Rearm { current: Reservation },
    #[error("{record} is ours but cannot be read as a record of the range: {text:?}", record = loader::RECORD)]
    Unreadable { text: String },
    #[error(
        "no boot loader crashring arm can drive (GRUB with update-grub, grubby, kernel-install): this machine has {loader}, and nothing was written. By hand: add `{} {}` to the kernel's command line as that boot loader takes it (a loader that parses `$` as GRUB does wants `\\$`), `options crashring {} user_streams={USER_STREAMS}` to {MODPROBE}, and `crashring` to {MODULES_LOAD}",
        reservation.kernel_word(),
        loader::POST_NOTIFIERS,
        reservation.module_parameter()
    )]
    BootLoader {
        loader: &'static str,
        reservation: Reservation,
    },
    #[error(
        "armed through {was} ({}), and this machine now boots with {now}: take the range back from {was} by hand (for GRUB, remove {} and run update-grub; for kernel-install, remove `{word}` and `{}` from /etc/kernel/cmdline if arm added them, and run kernel-install add for every kernel), remove {}, then arm again",
        loader::RECORD,
        loader::GRUB_DROP_IN,
        loader::POST_NOTIFIERS,
        loader::RECORD,
        was = was.name(),
        now = now.name()
    )]
    LoaderChanged {
        was: Loader,
        now: Loader,
        word: String,
    },
    #[error(
        "kernel-install would write the entries from the running kernel's command line, and {} has none (a machine's copy?): write its /etc/kernel/cmdline first",
        loader::KERNEL_CMDLINE
    )]
    NoCmdline,
    #[error(
        "the crashring module is not installed for {0}: install crashring-dkms and that kernel's headers (linux-headers-amd64), see `dkms status crashring`, then arm again; armed without it, every boot would reserve the range and record nothing"
    )]
    NoModule(String),
    #[error(
        "--size {0}: the region must be a multiple of 2 MiB, at least 2 MiB (two slots of whole pages)"
    )]
    Size(u64),
    #[error(
        "a generation waits in the range, not yet archived and acknowledged ({waiting}); disarmed, the next boot reuses that memory and it is lost. Archive it first: `crashring recover` bundles it into /var/lib/crashring and acknowledges it, then disarm; one Clean=keep left (which recover does not acknowledge): `crashring bundle /sys/kernel/crashring/previous -o FILE.tar.gz`, then `crashring disarm --force`; or `crashring disarm --force` to give it up"
    )]
    Waiting { waiting: String },
    #[error(
        "the crashring module is not loaded ({}), so nothing can tell whether a generation waits in the range, not yet archived; disarmed, the next boot reuses that memory and one would be lost. This boot reserves the range: load the module (`{load}`) and run `crashring recover`, which archives what waits, then disarm; or `crashring disarm --force` to give up whatever it holds",
        crate::status::SYSFS
    )]
    NotLoaded { load: String },
    #[error("--size {size}: more than this machine's System RAM, {ram} bytes")]
    TooLarge { size: u64, ram: u64 },
    #[error(
        "--size {0}: cannot be checked against this machine's System RAM: /proc/iomem shows every address as 0, as it does without CAP_SYS_ADMIN; run crashring arm as root, outside a container"
    )]
    SizeUnchecked(u64),
    #[error(
        "update-grub ran, but {} still boots without {word} (does its grub-mkconfig read {}/*.cfg?): until it does, no boot reserves the range and nothing is recorded. Put what {} adds to GRUB_CMDLINE_LINUX into {} itself, escaped as it is there, run update-grub, and check {}",
        loader::GRUB_CFG,
        loader::GRUB_DROP_INS,
        loader::GRUB_DROP_IN,
        loader::GRUB_DEFAULT,
        loader::GRUB_CFG
    )]
    GrubCfgLacks { word: String },
}

/// One file: what it holds now and what it will hold (`None`: absent).
#[derive(Debug, PartialEq, Eq)]
pub struct Change {
    pub path: &'static str,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// What arming or disarming does to a machine.
#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// What runs after the files are written, in order: the boot
    /// loader's tool carrying the command line into its boot entries.
    pub commands: Vec<Vec<String>>,
    /// How the range is reserved, when arming.
    pub reservation: Option<Reservation>,
    /// What the user should know (kdump-tools found, nothing to do, ...).
    pub notes: Vec<String>,
    /// The record while the commands have not all succeeded.
    pub(crate) pending: Option<Pending>,
}

/// The record marked with the commands (`pending=`), which
/// [`Plan::apply`] writes in place of its planned change until
/// [`Plan::commands_done`]: a command that fails (or a run killed midway)
/// leaves files that already say what arm wants, and only the mark makes
/// the next arm or disarm plan the commands again instead of finding
/// nothing to do.
#[derive(Debug)]
pub(crate) struct Pending {
    marked: String,
    /// What the record holds once they succeeded (`None`: removed).
    settled: Option<String>,
}

/// Writes `text` to `path` (`None`: removes it).
fn write(sys: &System, path: &'static str, text: Option<&str>) -> Result<(), ArmError> {
    match text {
        Some(text) => sys.write(path, text),
        None => sys.remove(path),
    }
    .map_err(|source| ArmError::Write {
        path: path.into(),
        source,
    })
}

impl Plan {
    /// Every change as a unified diff, files that stay the same left out,
    /// then the commands, each as `# then: ...`.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            let (old, new) = (
                c.old.as_deref().unwrap_or(""),
                c.new.as_deref().unwrap_or(""),
            );
            let (a, b) = (
                c.old
                    .as_ref()
                    .map_or("/dev/null".into(), |_| format!("a{}", c.path)),
                c.new
                    .as_ref()
                    .map_or("/dev/null".into(), |_| format!("b{}", c.path)),
            );
            let _ = write!(
                out,
                "{}",
                similar::TextDiff::from_lines(old, new)
                    .unified_diff()
                    .header(&a, &b)
            );
        }
        for command in &self.commands {
            let _ = writeln!(out, "# then: {}", command.join(" "));
        }
        out
    }

    /// Writes the new files (atomically; new ones mode 0644) and removes
    /// the vanished ones; with commands to run, the record is written
    /// first, marked pending. The commands are the caller's to run, and
    /// [`Plan::commands_done`] its to call once they all succeeded.
    pub fn apply(&self, sys: &System) -> Result<(), ArmError> {
        if let Some(p) = &self.pending {
            write(sys, loader::RECORD, Some(&p.marked))?;
        }
        for c in &self.changes {
            if self.pending.is_none() || c.path != loader::RECORD {
                write(sys, c.path, c.new.as_deref())?;
            }
        }
        Ok(())
    }

    /// Takes the pending mark away once every command succeeded: the
    /// record as planned, or none (disarmed).
    pub fn commands_done(&self, sys: &System) -> Result<(), ArmError> {
        match &self.pending {
            Some(p) => write(sys, loader::RECORD, p.settled.as_deref()),
            None => Ok(()),
        }
    }

    /// Whether the record stays marked pending when a command fails, so
    /// that the same arm or disarm run again runs them again.
    pub fn resumable(&self) -> bool {
        self.pending.is_some()
    }

    /// Marks `record` (`settled`: its planned text, `None` when disarm
    /// removes it) pending until the commands succeed; nothing to run,
    /// nothing to mark.
    fn mark_pending(&mut self, mut record: Armed, settled: Option<String>) {
        if self.commands.is_empty() {
            return;
        }
        let commands: Vec<String> = self.commands.iter().map(|c| c.join(" ")).collect();
        // Which of the two left it, for `status` to say which to run again.
        let verb = if settled.is_some() { "arm" } else { "disarm" };
        record.pending = Some(format!("{verb}: {}", commands.join("; ")));
        self.pending = Some(Pending {
            marked: record.text(),
            settled,
        });
    }

    /// Checks, after its commands ran, that they did what the boot needs:
    /// an update-grub that succeeds without putting the range into
    /// grub.cfg (a grub-mkconfig that does not read the drop-ins) leaves
    /// every boot unreserved and unrecorded, silently.
    pub fn verify(&self, sys: &System) -> Result<(), ArmError> {
        let Some(r) = self.reservation else {
            return Ok(());
        };
        let updated = self.commands.iter().any(|c| c == &["update-grub"]);
        if updated && loader::grub_cfg_lacks(sys, r)? {
            return Err(ArmError::GrubCfgLacks {
                word: r.kernel_word(),
            });
        }
        Ok(())
    }

    /// Nothing to write and nothing to run.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.commands.is_empty()
    }

    /// The change of `path` into `new` (`None`: removed), if it differs.
    fn set(
        &mut self,
        sys: &System,
        path: &'static str,
        new: Option<String>,
    ) -> Result<(), ArmError> {
        let old = read(sys, path)?;
        if old != new {
            self.changes.push(Change { path, old, new });
        }
        Ok(())
    }
}

pub(crate) fn ours(text: &str) -> bool {
    text.lines().next() == Some(MARK)
}

/// The module's options ([`MODPROBE`]): the range, and the crashring group's user streams.
pub fn modprobe(r: Reservation) -> String {
    format!("{MARK}\noptions crashring {}\n", module_options(r))
}

/// The module's options for the range `r`.
fn module_options(r: Reservation) -> String {
    format!("{} user_streams={USER_STREAMS}", r.module_parameter())
}

/// The command that loads the module over the range `armed` reserves:
/// with the options spelt out once [`MODPROBE`] is gone (a disarm whose
/// commands did not all succeed removed it), where a bare modprobe
/// refuses for want of memory to record in.
fn load_command(sys: &System, armed: &Armed) -> Result<String, ArmError> {
    Ok(match read(sys, MODPROBE)? {
        Some(_) => "modprobe crashring".into(),
        None => format!("modprobe crashring {}", module_options(armed.reservation)),
    })
}

/// Pool streams `arm` gives the module: 64 KiB each, 512 KiB of a slot.
pub const USER_STREAMS: u32 = 8;

/// The list that loads the module at every boot and arms the initramfs hooks ([`MODULES_LOAD`]).
pub fn modules_load() -> String {
    format!("{MARK}\ncrashring\n")
}

/// Whether a crashring module (`crashring.ko`, compressed or not, where
/// DKMS or any other build put it) is installed for the running kernel
/// or, in a machine's copy without /proc, for any kernel in it; `Err`
/// names what was looked for.
fn module_installed(sys: &System) -> Result<(), ArmError> {
    fn has_module(dir: &std::path::Path, depth: u32) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name == "crashring.ko" || name.starts_with("crashring.ko.") {
                return true;
            }
            depth > 0 && e.file_type().is_ok_and(|t| t.is_dir()) && has_module(&e.path(), depth - 1)
        })
    }
    let release = read(sys, "/proc/sys/kernel/osrelease")?;
    let release = release.as_deref().map(str::trim);
    let found = loader::MODULE_DIRS.iter().any(|dir| match release {
        Some(r) => has_module(&sys.path(dir).join(r), 8),
        None => has_module(&sys.path(dir), 9),
    });
    if found {
        return Ok(());
    }
    Err(ArmError::NoModule(match release {
        Some(r) => format!("the running kernel, {r} (no crashring.ko under /lib/modules/{r})"),
        None => format!(
            "any kernel of {} (no crashring.ko under its /lib/modules)",
            sys.path("/").display()
        ),
    }))
}

/// What placement must leave alone besides what `/proc/iomem` shows: this
/// boot's initrd (the boot loader puts it in the same place next time)
/// and the `memmap=` ranges the boot loader's configuration reserves for
/// others (ramoops, say) that this boot has not reserved yet.
fn not_ours(sys: &System) -> Result<Vec<Range<u64>>, ArmError> {
    let mut avoid: Vec<Range<u64>> = boot::initrd(sys).into_iter().collect();
    for file in loader::configured_cmdlines(sys) {
        if let Some(text) = read(sys, &file)? {
            avoid.extend(boot::memmap_ranges(&text));
        }
    }
    Ok(avoid)
}

/// How a machine of `arch` reserves the range: `memmap=` on x86, placed
/// from `/proc/iomem`; `reserve_mem=` on arm64, which has no `memmap=`,
/// where the running kernel has it (6.11+).
enum Way {
    Memmap,
    ReserveMem,
}

fn way(sys: &System, arch: &str) -> Result<Way, ArmError> {
    match arch {
        "x86_64" | "x86" => Ok(Way::Memmap),
        "aarch64" => {
            let release = read(sys, "/proc/sys/kernel/osrelease")?.ok_or(ArmError::NoRelease)?;
            let release = release.trim();
            match reserve::has_reserve_mem(release) {
                true => Ok(Way::ReserveMem),
                false => Err(ArmError::NoReserveMem(release.into())),
            }
        }
        _ => Err(ArmError::Unsupported(arch.into())),
    }
}

/// Plans `crashring arm`: `size` is `--size`, if given; `arch` the
/// machine's (`std::env::consts::ARCH`). Refuses where the module is not
/// installed, since the boot would then reserve the range for nothing,
/// and where no boot loader it drives is found, before writing anything.
pub fn plan_arm(sys: &System, size: Option<u64>, arch: &str) -> Result<Plan, ArmError> {
    let way = way(sys, arch)?;
    if let Some(s) = size {
        if s < iomem::ALIGN || !s.is_multiple_of(iomem::ALIGN) {
            return Err(ArmError::Size(s));
        }
        // Said as it is, before placement's "no room" (and on arm64, where
        // nothing is placed, before a reserve_mem= no boot can honour).
        // Addresses hidden from a user who is not root would let any size
        // through unchecked on arm64 (x86's placement refuses anyway).
        // Where /proc/iomem lists no RAM (a machine's copy may have none)
        // or a line it cannot parse, placement says so, or the kernel
        // decides.
        let text = read(sys, "/proc/iomem")?.unwrap_or_default();
        let ram = match iomem::parse(&text) {
            Ok(resources) => iomem::total_ram(&resources),
            Err(iomem::IomemError::Hidden) => return Err(ArmError::SizeUnchecked(s)),
            Err(_) => 0,
        };
        if ram > 0 && s > ram {
            return Err(ArmError::TooLarge { size: s, ram });
        }
    }
    module_installed(sys)?;
    for path in [loader::RECORD, MODPROBE, MODULES_LOAD] {
        if read(sys, path)?.is_some_and(|t| !ours(&t)) {
            return Err(ArmError::NotOurs(path.into()));
        }
    }
    let previous = loader::armed(sys)?;
    let mut plan = Plan::default();
    let reservation = match (&previous, way) {
        (Some(a), _) => {
            if size.is_some_and(|s| s != a.reservation.size()) {
                return Err(ArmError::Rearm {
                    current: a.reservation,
                });
            }
            plan.notes.push(format!(
                "already armed with {}: the range is kept",
                a.reservation
            ));
            a.reservation
        }
        (None, Way::Memmap) => {
            let text = read(sys, "/proc/iomem")?.unwrap_or_default();
            let resources = iomem::parse(&text).map_err(iomem::PlaceError::from)?;
            Reservation::Memmap(iomem::place(
                &resources,
                size.unwrap_or(DEFAULT_SIZE),
                &not_ours(sys)?,
            )?)
        }
        (None, Way::ReserveMem) => Reservation::ReserveMem {
            size: size.unwrap_or(DEFAULT_SIZE),
        },
    };
    let loader = loader::detect(sys).map_err(|found| ArmError::BootLoader {
        loader: found,
        reservation,
    })?;
    if boot::firmware(sys) == boot::Firmware::UefiWipesMemory {
        plan.notes.push(format!(
            "this machine's firmware wipes memory at a reset after a crash ({} is set; Debian's kernels set it at every boot): the next boot finds nothing, and only a kdump capture (kdump-tools) keeps a crash",
            boot::MOR_VARIABLE
        ));
    }
    if let Some(was) = previous.as_ref().filter(|a| a.loader != loader) {
        // Its tool may be gone with it: what it was told is left to the
        // admin, said exactly, rather than half undone.
        return Err(ArmError::LoaderChanged {
            was: was.loader,
            now: loader,
            word: reservation.kernel_word(),
        });
    }
    let steps = loader::arm_steps(sys, loader, reservation, previous.as_ref())?;
    let record = Armed {
        reservation,
        loader,
        added: steps.added,
        created_from: steps.created_from,
        pending: None,
    };
    plan.set(sys, loader::RECORD, Some(record.text()))?;
    plan.changes.extend(steps.changes);
    plan.set(sys, MODPROBE, Some(modprobe(reservation)))?;
    plan.set(sys, MODULES_LOAD, Some(modules_load()))?;
    plan.changes
        .extend(kdump_tools::change(sys, Some(reservation))?);
    if read(sys, KDUMP_TOOLS)?.is_some() {
        plan.notes.push(format!(
            "kdump-tools is installed: its capture kernel boots with this command line but for memmap= (which kdump-config's eval would mangle; {KDUMP_TOOLS} gets a marked part for it), and the module loaded there leaves the range alone for the next boot to archive"
        ));
    }
    plan.notes.extend(steps.notes);
    let again = unfinished(previous.as_ref(), &mut plan.notes);
    // The initramfs first: kernel-install add copies it into the boot
    // entries.
    plan.commands = initramfs_rebuild(sys, &plan.changes, again, &mut plan.notes)
        .into_iter()
        .chain(steps.commands)
        .collect();
    plan.reservation = Some(reservation);
    let settled = record.text();
    plan.mark_pending(record, Some(settled));
    Ok(plan)
}

/// What the module says waits in the range unarchived, `None` when
/// nothing does or the module is not loaded (see [`unknowable`]); a
/// summary that cannot be read (the kernel's EIO) may hide one.
fn waiting(sys: &System) -> Option<String> {
    let path = format!("{}/previous_summary", crate::status::SYSFS);
    let text = match sys.read_bytes(&path) {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => return None,
        Err(e) => return Some(format!("{path} cannot be read: {e}")),
    };
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    match lines.next() {
        Some("none") => None,
        None => Some(format!("{path} is empty")),
        Some(first) => Some(
            // The generation and its state, as `previous_summary` says them.
            std::iter::once(first)
                .chain(lines.filter(|l| l.starts_with("state")))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// Whether nothing can tell what waits in the range `armed` reserves:
/// the running machine booted with it, without the module loaded. A
/// boot without the range (arm run, no reboot yet) holds nothing in it;
/// a machine's copy has no /sys, and its range is not this boot's.
fn unknowable(sys: &System, armed: &Armed) -> bool {
    let word = armed.reservation.kernel_word();
    let booted = read(sys, "/proc/cmdline")
        .ok()
        .flatten()
        .is_some_and(|c| c.split_whitespace().any(|w| w == word));
    sys.is_live() && booted && !sys.path(crate::status::SYSFS).exists()
}

/// Plans `crashring disarm`: removes every file of ours and takes back
/// the words arm added elsewhere, leaving everything else. Refuses while
/// a generation waits unarchived in the range (after a failed recovery,
/// or `Clean=keep`), or while an armed machine runs without the module,
/// which alone could tell, unless `force`: the next boot, without the
/// range reserved, hands that memory to the kernel. `force` also removes
/// the record at once instead of marking it pending.
pub fn plan_disarm(sys: &System, force: bool) -> Result<Plan, ArmError> {
    let mut plan = Plan::default();
    let mut remove = vec![MODPROBE, MODULES_LOAD];
    let armed = loader::armed(sys)?;
    if let Some(armed) = &armed {
        let steps = loader::disarm_steps(sys, armed)?;
        plan.changes.extend(steps.changes);
        plan.commands = steps.commands;
        plan.notes.extend(steps.notes);
        remove.push(loader::RECORD);
    }
    for path in remove {
        match read(sys, path)? {
            Some(text) if ours(&text) => plan.changes.push(Change {
                path,
                old: Some(text),
                new: None,
            }),
            Some(_) => plan.notes.push(format!(
                "{path} was not written by crashring arm: left as it is"
            )),
            None => {}
        }
    }
    // The debug selection `crashring debug --persist` kept goes too.
    if let Some(text) = read(sys, crate::debug::DEBUG_MODPROBE)?.filter(|t| crate::debug::ours(t)) {
        plan.changes.push(Change {
            path: crate::debug::DEBUG_MODPROBE,
            old: Some(text),
            new: None,
        });
    }
    plan.changes.extend(kdump_tools::change(sys, None)?);
    let again = unfinished(armed.as_ref(), &mut plan.notes);
    if let Some(rebuild) = initramfs_rebuild(sys, &plan.changes, again, &mut plan.notes) {
        plan.commands.insert(0, rebuild);
    }
    let unknown = match armed.as_ref().filter(|a| unknowable(sys, a)) {
        Some(a) => Some(load_command(sys, a)?),
        None => None,
    };
    match armed {
        // Forced, the record goes with the files: a command that fails
        // every time (its tool broken, the machine moved on) would keep
        // it pending, and every later arm refusing, with no way out.
        Some(_) if force && !plan.commands.is_empty() => plan.notes.push(format!(
            "--force: {} goes now, not once `{}` succeeded: a disarm run again does not run what fails",
            loader::RECORD,
            plan.commands
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        // The record goes last, once the boot entries no longer reserve
        // the range: until then it is the only memory of what to undo.
        Some(armed) => plan.mark_pending(armed, None),
        None => {}
    }
    if plan.is_empty() {
        plan.notes.push("not armed: nothing to undo".into());
    } else if let Some(waiting) = waiting(sys) {
        if !force {
            return Err(ArmError::Waiting { waiting });
        }
        plan.notes.push(format!(
            "--force: given up, unarchived, to the next boot's kernel: {waiting}"
        ));
    } else if let Some(load) = unknown {
        if !force {
            return Err(ArmError::NotLoaded { load });
        }
        plan.notes.push(
            "--force: the module is not loaded; whatever the range holds is given up to the next boot's kernel".into(),
        );
    }
    Ok(plan)
}

/// The commands of an earlier arm or disarm that the record says have
/// not all succeeded (said in `notes`): the loader's and the initramfs'
/// run again, since the files alone look done.
fn unfinished<'a>(record: Option<&'a Armed>, notes: &mut Vec<String>) -> Option<&'a str> {
    let (_, commands) = record.and_then(Armed::unfinished)?;
    notes.push(format!(
        "{} says an earlier arm or disarm did not finish (`{commands}` did not all succeed): they run again",
        loader::RECORD
    ));
    Some(commands)
}

/// The initramfs rebuilt when `changes` touch what it holds of crashring,
/// or `again` (the commands an earlier run left unfinished) held a rebuild,
/// and the machine's generator has crashring's hook. A rebuild left
/// unfinished that can no longer run (the generator or the hook gone) is
/// said in `notes`: the images built before still hold crashring's module
/// and the options of then.
pub(crate) fn initramfs_rebuild(
    sys: &System,
    changes: &[Change],
    again: Option<&str>,
    notes: &mut Vec<String>,
) -> Option<Vec<String>> {
    let unfinished = again.filter(|commands| {
        commands
            .split("; ")
            .any(|c| initramfs::GENERATORS.iter().any(|g| c.starts_with(g)))
    });
    if unfinished.is_none() && !initramfs::changed(changes) {
        return None;
    }
    let rebuild = initramfs::rebuild(sys);
    if let (Some(commands), None) = (unfinished, &rebuild) {
        notes.push(format!(
            "the initramfs rebuild an earlier arm or disarm left unfinished (`{commands}`) cannot run again: neither initramfs-tools nor dracut is here with crashring's hook ({}, {}); the images built before still hold crashring's module and the options of then until they are built again",
            initramfs::INITRAMFS_TOOLS_HOOK,
            initramfs::DRACUT_MODULE
        ));
    }
    rebuild
}

#[cfg(test)]
mod rerun_tests;
#[cfg(test)]
pub(crate) mod tests;
