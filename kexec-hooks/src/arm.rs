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
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
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
    /// the vanished ones. The commands are the caller's to run.
    pub fn apply(&self, sys: &System) -> Result<(), ArmError> {
        for c in &self.changes {
            match &c.new {
                Some(text) => sys.write(c.path, text),
                None => sys.remove(c.path),
            }
            .map_err(|source| ArmError::Write {
                path: c.path.into(),
                source,
            })?;
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
    format!(
        "{MARK}\noptions crashring {} user_streams={USER_STREAMS}\n",
        r.module_parameter()
    )
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
    // The initramfs first: kernel-install add copies it into the boot
    // entries.
    plan.commands = initramfs_rebuild(sys, &plan.changes)
        .into_iter()
        .chain(steps.commands)
        .collect();
    plan.reservation = Some(reservation);
    Ok(plan)
}

/// Plans `crashring disarm`: removes every file of ours and takes back
/// the words arm added elsewhere, leaving everything else.
pub fn plan_disarm(sys: &System) -> Result<Plan, ArmError> {
    let mut plan = Plan::default();
    let mut remove = vec![MODPROBE, MODULES_LOAD];
    if let Some(armed) = loader::armed(sys)? {
        let steps = loader::disarm_steps(sys, &armed)?;
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
    if let Some(rebuild) = initramfs_rebuild(sys, &plan.changes) {
        plan.commands.insert(0, rebuild);
    }
    if plan.is_empty() {
        plan.notes.push("not armed: nothing to undo".into());
    }
    Ok(plan)
}

/// The initramfs rebuilt when `changes` touch what it holds of crashring
/// and the machine's generator has crashring's hook.
pub(crate) fn initramfs_rebuild(sys: &System, changes: &[Change]) -> Option<Vec<String>> {
    initramfs::changed(changes)
        .then(|| initramfs::rebuild(sys))
        .flatten()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::loader::{GRUB_CFG, GRUB_DROP_IN, KERNEL_CMDLINE, RECORD};

    pub(crate) fn machine(iomem: &str) -> (tempfile::TempDir, System) {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write("/proc/iomem", iomem).unwrap();
        sys.write(
            "/etc/default/grub",
            include_str!("../tests/data/grub-default"),
        )
        .unwrap();
        sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-amd64\n")
            .unwrap();
        sys.write(MODULE, "").unwrap();
        sys.write("/usr/sbin/update-grub", "").unwrap();
        (dir, sys)
    }

    /// Where DKMS installs the module for the machine's kernel.
    const MODULE: &str = "/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko";

    pub(crate) const QEMU: &str = include_str!("../tests/data/iomem-qemu");

    /// Disarming leaves every file under `root` as it was `before` arm.
    pub(crate) fn disarm_restores(
        sys: &System,
        root: &std::path::Path,
        before: &[(std::path::PathBuf, Vec<u8>)],
    ) {
        plan_disarm(sys).unwrap().apply(sys).unwrap();
        assert_eq!(sys.snapshot().unwrap(), before, "in {}", root.display());
    }

    #[test]
    fn arm_then_disarm_leaves_the_machine_as_it_was() {
        let (dir, sys) = machine(QEMU);
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert_eq!(
            plan.reservation.unwrap().to_string(),
            "memmap 64M@0x22c000000"
        );
        assert_eq!(plan.commands, [["update-grub"]]);
        plan.apply(&sys).unwrap();
        assert_eq!(
            sys.read(MODPROBE).unwrap().unwrap(),
            format!("{MARK}\noptions crashring region=64M@0x22c000000 user_streams=8\n")
        );
        // Arming again changes nothing and keeps the range, with or
        // without the same --size.
        for size in [None, Some(64 << 20)] {
            let again = plan_arm(&sys, size, "x86_64").unwrap();
            assert!(again.is_empty(), "{:?}", again.changes);
            assert_eq!(again.reservation, plan.reservation);
        }
        disarm_restores(&sys, dir.path(), &before);
        assert!(plan_disarm(&sys).unwrap().is_empty());
    }

    /// With crashring's initramfs-tools hook installed, arm and disarm
    /// build the initramfs images again after writing what they hold
    /// (the hook reads the list and the options); arming again with
    /// nothing to change builds nothing.
    #[test]
    fn the_initramfs_is_built_again_where_the_hook_puts_the_module_in() {
        let (_dir, sys) = machine(QEMU);
        sys.write(crate::initramfs::INITRAMFS_TOOLS_HOOK, "")
            .unwrap();
        sys.write("/usr/sbin/update-initramfs", "").unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        let rebuild = ["update-initramfs", "-u", "-k", "all"];
        assert_eq!(plan.commands, [&rebuild[..], &["update-grub"][..]]);
        assert!(plan
            .diff()
            .ends_with("# then: update-initramfs -u -k all\n# then: update-grub\n"));
        plan.apply(&sys).unwrap();
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
        let disarm = plan_disarm(&sys).unwrap();
        assert_eq!(disarm.commands[0], rebuild);
        disarm.apply(&sys).unwrap();
        assert!(plan_disarm(&sys).unwrap().is_empty());
    }

    #[test]
    fn the_dry_run_diff_shows_every_file() {
        let (_dir, sys) = machine(QEMU);
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        let diff = plan.diff();
        for path in [RECORD, GRUB_DROP_IN, MODPROBE, MODULES_LOAD] {
            assert!(diff.contains(&format!("+++ b{path}\n")), "{diff}");
        }
        assert!(diff.ends_with("# then: update-grub\n"), "{diff}");
        assert!(diff.contains(
            "+GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap=64M\\\\\\$0x22c000000 crash_kexec_post_notifiers\"\n"
        ), "{diff}");
        // Nothing was written.
        assert_eq!(sys.read(GRUB_DROP_IN).unwrap(), None);
    }

    #[test]
    fn the_drop_in_gives_grub_the_escaped_dollar_through_a_real_shell() {
        // grub-mkconfig is a /bin/sh script that sources /etc/default/grub
        // and then the drop-ins, and 10_linux echoes the arguments into
        // grub.cfg's linux line; run the same steps.
        let (dir, sys) = machine(QEMU);
        plan_arm(&sys, Some(16 << 20), "x86_64")
            .unwrap()
            .apply(&sys)
            .unwrap();
        let root = dir.path();
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(
                ". \"$1/etc/default/grub\"; for x in \"$1\"/etc/default/grub.d/*.cfg; do . \"$x\"; done; \
                 echo \"linux /vmlinuz ro ${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}\"",
            )
            .arg("sh")
            .arg(root)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "linux /vmlinuz ro  memmap=16M\\$0x22f000000 crash_kexec_post_notifiers quiet\n"
        );
    }

    #[test]
    fn refuses_with_a_reason() {
        let (_dir, sys) = machine(QEMU);
        assert!(matches!(
            plan_arm(&sys, None, "riscv64"),
            Err(ArmError::Unsupported(a)) if a == "riscv64"
        ));
        // arm64 before 6.11: no reserve_mem=, and no memmap= at all.
        sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-arm64\n")
            .unwrap();
        let err = plan_arm(&sys, None, "aarch64").unwrap_err();
        assert!(matches!(&err, ArmError::NoReserveMem(r) if r == "6.1.0-41-arm64"));
        assert!(
            err.to_string()
                .contains("reserved-memory node marked no-map"),
            "{err}"
        );
        sys.remove("/proc/sys/kernel/osrelease").unwrap();
        assert!(matches!(
            plan_arm(&sys, None, "aarch64"),
            Err(ArmError::NoRelease)
        ));
        sys.write("/proc/sys/kernel/osrelease", "6.1.0-41-amd64\n")
            .unwrap();
        assert!(matches!(
            plan_arm(&sys, Some(3 << 20), "x86_64"),
            Err(ArmError::Size(_))
        ));
        let err = plan_arm(&sys, Some(64 << 30), "x86_64").unwrap_err();
        assert!(err.to_string().starts_with("no room for"), "{err}");
        sys.write(MODPROBE, "options crashring region=1M@0x1000000\n")
            .unwrap();
        assert!(matches!(
            plan_arm(&sys, None, "x86_64"),
            Err(ArmError::NotOurs(p)) if p == MODPROBE
        ));
        // Disarm leaves a file that is not ours.
        let plan = plan_disarm(&sys).unwrap();
        assert!(plan.is_empty() && plan.notes[0].contains("not written by crashring arm"));
        sys.remove(MODPROBE).unwrap();
        plan_arm(&sys, Some(16 << 20), "x86_64")
            .unwrap()
            .apply(&sys)
            .unwrap();
        assert!(matches!(
            plan_arm(&sys, Some(32 << 20), "x86_64"),
            Err(ArmError::Rearm { current }) if current.size() == 16 << 20
        ));
    }

    /// An arm64 machine with Debian 12's backports kernel, GRUB and the
    /// module, whose /proc/iomem (no memmap= there) arm does not read.
    fn arm64_machine() -> (tempfile::TempDir, System) {
        let (dir, sys) = machine("");
        sys.write("/proc/sys/kernel/osrelease", "6.12.48+deb12-arm64\n")
            .unwrap();
        sys.write(
            "/lib/modules/6.12.48+deb12-arm64/updates/dkms/crashring.ko",
            "",
        )
        .unwrap();
        (dir, sys)
    }

    #[test]
    fn arm64_reserves_by_reserve_mem_and_disarms_to_what_it_was() {
        let (dir, sys) = arm64_machine();
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, None, "aarch64").unwrap();
        assert_eq!(
            plan.reservation,
            Some(Reservation::ReserveMem { size: DEFAULT_SIZE })
        );
        plan.apply(&sys).unwrap();
        assert_eq!(
            sys.read(MODPROBE).unwrap().unwrap(),
            format!(
                "{MARK}\noptions crashring reserve_mem=crashring user_streams={USER_STREAMS}\n"
            )
        );
        let drop_in = sys.read(GRUB_DROP_IN).unwrap().unwrap();
        assert!(
            drop_in.contains(
                "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX reserve_mem=64M:2M:crashring crash_kexec_post_notifiers\""
            ),
            "{drop_in}"
        );
        let record = crate::loader::armed(&sys).unwrap().unwrap();
        assert_eq!(
            record.reservation,
            Reservation::ReserveMem { size: 64 << 20 }
        );
        assert_eq!(
            record.added,
            ["reserve_mem=64M:2M:crashring", "crash_kexec_post_notifiers"]
        );
        // Arming again keeps it; another size is refused.
        let again = plan_arm(&sys, None, "aarch64").unwrap();
        assert!(again.notes[0].starts_with("already armed with reserve_mem 64M"));
        assert!(matches!(
            plan_arm(&sys, Some(32 << 20), "aarch64"),
            Err(ArmError::Rearm {
                current: Reservation::ReserveMem { .. }
            })
        ));
        plan_disarm(&sys).unwrap().apply(&sys).unwrap();
        assert_eq!(sys.snapshot().unwrap(), before);
        drop(dir);
    }

    #[test]
    fn arm_writes_nothing_without_a_boot_loader_it_drives() {
        for (files, loader) in [
            (&[KERNEL_CMDLINE][..], "systemd-boot or /etc/kernel/cmdline"),
            (
                &["/usr/bin/bootctl"][..],
                "systemd-boot or /etc/kernel/cmdline",
            ),
            (&[][..], "GRUB's settings, but no update-grub"),
        ] {
            let (_dir, sys) = machine(QEMU);
            // GRUB's settings, but no update-grub to carry them out.
            sys.remove("/usr/sbin/update-grub").unwrap();
            for f in files {
                sys.write(f, "root=UUID=4c1f ro quiet\n").unwrap();
            }
            let before = sys.snapshot().unwrap();
            let err = plan_arm(&sys, None, "x86_64").unwrap_err();
            assert!(
                matches!(err, ArmError::BootLoader { loader: l, .. } if l.starts_with(loader)),
                "{files:?}: {err}"
            );
            // The parameters as the kernel reads them, not as GRUB's
            // shell-sourced drop-in escapes them.
            let err = err.to_string();
            assert!(err.contains("nothing was written"), "{err}");
            assert!(
                err.contains("add `memmap=64M$0x22c000000 crash_kexec_post_notifiers`")
                    && err.contains("`options crashring region=64M@0x22c000000 user_streams=8`"),
                "{err}"
            );
            assert_eq!(sys.snapshot().unwrap(), before);
        }
    }

    /// A systemd-boot machine: no GRUB, kernel-install writing each
    /// kernel's entry from /etc/kernel/cmdline.
    fn kernel_install_machine() -> (tempfile::TempDir, System) {
        let (dir, sys) = machine(QEMU);
        for f in ["/usr/sbin/update-grub", "/etc/default/grub"] {
            sys.remove(f).unwrap();
        }
        for f in [
            "/usr/bin/kernel-install",
            "/usr/bin/bootctl",
            "/boot/vmlinuz-6.1.0-41-amd64",
            "/boot/vmlinuz-6.12.57+deb12-amd64",
            "/lib/modules/6.12.57+deb12-amd64/modules.dep",
        ] {
            sys.write(f, "").unwrap();
        }
        sys.write("/proc/cmdline", BOOTED).unwrap();
        (dir, sys)
    }

    /// systemd-boot's command line for an entry, with the initrd it adds.
    const BOOTED: &str =
        "initrd=\\6b1f\\6.1.0-41-amd64\\initrd.img-6.1.0-41-amd64 root=UUID=4c1f ro quiet\n";

    fn kernel_install_commands() -> Vec<Vec<String>> {
        ["6.1.0-41-amd64", "6.12.57+deb12-amd64"]
            .map(|v| {
                ["kernel-install", "add", v, &format!("/boot/vmlinuz-{v}")]
                    .map(String::from)
                    .to_vec()
            })
            .to_vec()
    }

    #[test]
    fn kernel_install_gets_the_range_in_etc_kernel_cmdline_and_every_entry() {
        let (dir, sys) = kernel_install_machine();
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        assert_eq!(plan.commands, kernel_install_commands());
        plan.apply(&sys).unwrap();
        // kernel-install's own default (the running line without the boot
        // loader's initrd=), plus arm's words, `$` as the kernel reads it.
        assert_eq!(
            sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
            "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers\n"
        );
        let record = loader::armed(&sys).unwrap().unwrap();
        assert_eq!(record.loader, loader::Loader::KernelInstall);
        assert_eq!(
            record.created_from.as_deref(),
            Some("root=UUID=4c1f ro quiet")
        );
        assert!(sys.read(GRUB_DROP_IN).unwrap().is_none());
        // Booted armed: the running line has the range; arming again
        // changes nothing and runs nothing.
        sys.write(
            "/proc/cmdline",
            "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers\n",
        )
        .unwrap();
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
        let disarm = plan_disarm(&sys).unwrap();
        assert_eq!(disarm.commands, kernel_install_commands());
        sys.write("/proc/cmdline", BOOTED).unwrap();
        disarm_restores(&sys, dir.path(), &before);
    }

    #[test]
    fn an_admins_own_kernel_command_line_keeps_its_words() {
        let (dir, sys) = kernel_install_machine();
        sys.write(
            KERNEL_CMDLINE,
            "root=UUID=4c1f ro crash_kexec_post_notifiers\n",
        )
        .unwrap();
        let before = sys.snapshot().unwrap();
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        assert_eq!(
            sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
            "root=UUID=4c1f ro crash_kexec_post_notifiers memmap=64M$0x22c000000\n"
        );
        // Only the range is arm's: disarm leaves the admin's notifiers.
        assert_eq!(
            loader::armed(&sys).unwrap().unwrap().added,
            ["memmap=64M$0x22c000000"]
        );
        disarm_restores(&sys, dir.path(), &before);

        // A file arm created and the admin changed since stays, less
        // arm's words.
        let (_dir, sys) = kernel_install_machine();
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        sys.write(
            KERNEL_CMDLINE,
            "root=UUID=4c1f ro quiet memmap=64M$0x22c000000 crash_kexec_post_notifiers mitigations=auto\n",
        )
        .unwrap();
        plan_disarm(&sys).unwrap().apply(&sys).unwrap();
        assert_eq!(
            sys.read(KERNEL_CMDLINE).unwrap().unwrap(),
            "root=UUID=4c1f ro quiet mitigations=auto\n"
        );
    }

    #[test]
    fn grubby_is_told_with_the_dollar_escaped_for_grub() {
        let (_dir, sys) = machine(QEMU);
        sys.remove("/usr/sbin/update-grub").unwrap();
        sys.write("/usr/sbin/grubby", "").unwrap();
        sys.write(
            "/proc/cmdline",
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=UUID=4c1f ro\n",
        )
        .unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        assert_eq!(
            plan.commands,
            [[
                "grubby",
                "--update-kernel=ALL",
                "--args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers"
            ]]
        );
        plan.apply(&sys).unwrap();
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
        let disarm = plan_disarm(&sys).unwrap();
        assert_eq!(
            disarm.commands,
            [[
                "grubby",
                "--update-kernel=ALL",
                "--remove-args=memmap=64M\\$0x22c000000 crash_kexec_post_notifiers"
            ]]
        );
        // The notifiers already on: only the range is added and removed.
        let (_dir, sys) = machine(QEMU);
        sys.remove("/usr/sbin/update-grub").unwrap();
        sys.write("/sbin/grubby", "").unwrap();
        sys.write(
            "/proc/cmdline",
            "root=UUID=4c1f ro crash_kexec_post_notifiers\n",
        )
        .unwrap();
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        assert_eq!(
            plan_disarm(&sys).unwrap().commands,
            [[
                "grubby",
                "--update-kernel=ALL",
                "--remove-args=memmap=64M\\$0x22c000000"
            ]]
        );
    }

    #[test]
    fn a_machine_armed_through_grub_that_now_boots_otherwise_is_refused() {
        let (_dir, sys) = machine(QEMU);
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        // GRUB removed, systemd-boot installed.
        sys.remove("/usr/sbin/update-grub").unwrap();
        sys.write("/usr/bin/kernel-install", "").unwrap();
        sys.write("/usr/bin/bootctl", "").unwrap();
        let before = sys.snapshot().unwrap();
        let err = plan_arm(&sys, None, "x86_64").unwrap_err().to_string();
        assert!(
            err.starts_with("armed through grub (/etc/crashring/armed), and this machine now boots with kernel-install")
                && err.contains("memmap=64M$0x22c000000"),
            "{err}"
        );
        assert_eq!(sys.snapshot().unwrap(), before);
    }

    #[test]
    fn the_record_reads_back_and_a_damaged_one_is_refused() {
        let (_dir, sys) = kernel_install_machine();
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        let record = sys.read(RECORD).unwrap().unwrap();
        assert_eq!(
            loader::Armed::parse(&record).unwrap().text(),
            record,
            "{record}"
        );
        sys.write(RECORD, &record.replace("range=64M@", "range=64M#"))
            .unwrap();
        for err in [
            plan_arm(&sys, None, "x86_64").unwrap_err(),
            plan_disarm(&sys).unwrap_err(),
        ] {
            assert!(
                err.to_string()
                    .starts_with("/etc/crashring/armed is ours but cannot be read"),
                "{err}"
            );
        }
    }

    #[test]
    fn an_armed_machine_whose_grub_cfg_lacks_the_range_runs_update_grub_again() {
        let (_dir, sys) = machine(QEMU);
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        plan.apply(&sys).unwrap();
        // update-grub failed, or never ran: the menu boots without it.
        sys.write(
            GRUB_CFG,
            "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro quiet\n",
        )
        .unwrap();
        let again = plan_arm(&sys, None, "x86_64").unwrap();
        assert!(
            again.changes.is_empty() && again.commands == [["update-grub"]],
            "{again:?}"
        );
        assert!(again
            .notes
            .iter()
            .any(|n| n.contains("update-grub runs again")));
        // As update-grub writes it, the `$` escaped for GRUB's parser.
        sys.write(
            GRUB_CFG,
            "linux /vmlinuz-6.1.0-41-amd64 root=UUID=4c1f ro memmap=64M\\$0x22c000000 crash_kexec_post_notifiers quiet\n",
        )
        .unwrap();
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
    }

    #[test]
    fn arm_refuses_without_the_module_for_the_kernel() {
        let (dir, sys) = machine(QEMU);
        sys.remove(MODULE).unwrap();
        // Built for another kernel only.
        sys.write(
            "/lib/modules/6.12.95+deb13-amd64/updates/dkms/crashring.ko.xz",
            "",
        )
        .unwrap();
        let before = sys.snapshot().unwrap();
        let err = plan_arm(&sys, None, "x86_64").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "the crashring module is not installed for the running kernel, 6.1.0-41-amd64 (no crashring.ko under /lib/modules/6.1.0-41-amd64)"
            ),
            "{err}"
        );
        assert_eq!(sys.snapshot().unwrap(), before);
        // Compressed, under the merged /usr.
        sys.write(
            "/usr/lib/modules/6.1.0-41-amd64/updates/dkms/crashring.ko.zst",
            "",
        )
        .unwrap();
        plan_arm(&sys, None, "x86_64").unwrap();
        // A machine's copy (no /proc): a module for any of its kernels.
        sys.remove("/proc/sys/kernel/osrelease").unwrap();
        std::fs::remove_dir_all(dir.path().join("usr/lib/modules/6.1.0-41-amd64")).unwrap();
        plan_arm(&sys, None, "x86_64").unwrap();
        std::fs::remove_dir_all(dir.path().join("lib/modules")).unwrap();
        let err = plan_arm(&sys, None, "x86_64").unwrap_err();
        assert!(
            matches!(err, ArmError::NoModule(ref w) if w.starts_with("any kernel of")),
            "{err}"
        );
    }

    #[test]
    fn hidden_addresses_are_refused() {
        let hidden: String = QEMU
            .lines()
            .map(|l| {
                let (range, name) = l.split_once(" : ").unwrap();
                let indent = &range[..range.len() - range.trim_start().len()];
                format!("{indent}00000000-00000000 : {name}\n")
            })
            .collect();
        let (_dir, sys) = machine(&hidden);
        let err = plan_arm(&sys, None, "x86_64").unwrap_err();
        assert!(err.to_string().contains("only root sees them"), "{err}");
    }

    /// What the next boot will have that this one's /proc/iomem does not
    /// show: ramoops' memmap= in GRUB's configuration, and this boot's
    /// initrd, which the boot loader puts there again; and a firmware that
    /// wipes memory is said.
    #[test]
    fn placement_keeps_off_configured_memmap_ranges_and_the_initrd() {
        let (_dir, sys) = machine(QEMU);
        sys.write(
            "/etc/default/grub.d/ramoops.cfg",
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap=32M\\\\\\$0x22e000000 ramoops.mem_address=0x22e000000\"\n",
        )
        .unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert_eq!(
            plan.reservation.unwrap().to_string(),
            "memmap 64M@0x22a000000"
        );
        let mut params = vec![0u8; 4096];
        params[0x218..0x21c].copy_from_slice(&0x2800_0000u32.to_le_bytes());
        params[0x21c..0x220].copy_from_slice(&0x0400_0000u32.to_le_bytes());
        params[0x0c0..0x0c4].copy_from_slice(&2u32.to_le_bytes());
        sys.write("/sys/kernel/boot_params/data", "").unwrap();
        std::fs::write(sys.path("/sys/kernel/boot_params/data"), &params).unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert_eq!(
            plan.reservation.unwrap().to_string(),
            "memmap 64M@0x224000000"
        );
        assert!(!plan.notes.iter().any(|n| n.contains("wipes memory")));
        sys.write("/sys/firmware/efi/systab", "").unwrap();
        sys.write(boot::MOR_VARIABLE, "").unwrap();
        std::fs::write(sys.path(boot::MOR_VARIABLE), [7, 0, 0, 0, 1]).unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("firmware wipes memory")),
            "{:?}",
            plan.notes
        );
    }
}
