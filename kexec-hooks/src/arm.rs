//! `crashring arm` and `crashring disarm`: the files that make a machine
//! reserve the region and load the module at every boot, planned first
//! (so `--dry-run` shows exactly what would change) and then applied.
//!
//! Every file `arm` writes starts with [`MARK`]; `disarm` removes exactly
//! the files carrying it, and `arm` never overwrites a file without it.
//! The GRUB drop-in is the machine's record of the range: arming again
//! keeps it, since moving it would leave the generation recorded in the
//! old range where no later boot looks.

use crate::boot;
use crate::iomem::{self, Placement};
use crate::system::System;
use std::fmt::Write as _;
use std::ops::Range;

/// The first line of every file `arm` writes.
pub const MARK: &str = "# Written by `crashring arm`; `crashring disarm` removes it.";

/// GRUB's drop-in: Debian's grub-mkconfig sources /etc/default/grub.d/*.cfg
/// after /etc/default/grub.
pub const GRUB_DROP_IN: &str = "/etc/default/grub.d/crashring.cfg";
const GRUB_DROP_INS: &str = "/etc/default/grub.d";
pub const MODPROBE: &str = "/etc/modprobe.d/crashring.conf";
pub const MODULES_LOAD: &str = "/etc/modules-load.d/crashring.conf";
/// Debian's kdump-tools configuration: its presence means a capture
/// kernel may boot with this machine's command line. It is not ours, so
/// `arm` only adds a marked part to it (see [`kdump_part`]).
pub const KDUMP_TOOLS: &str = "/etc/default/kdump-tools";
const KDUMP_PART_BEGIN: &str =
    "# >>> Added by `crashring arm`; `crashring disarm` removes it, to the end mark.";
const KDUMP_PART_END: &str = "# <<< End of crashring arm's part.";

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
        "memmap= reserves memory on x86 only, and this machine is {0}: load the module with region= over a range the device tree reserves (reserved-memory), or reserve_mem= on 6.11+"
    )]
    Unsupported(String),
    #[error(
        "{0} exists and was not written by crashring arm: remove it or fold its settings in by hand, then run arm again"
    )]
    NotOurs(String),
    #[error(
        "already armed with {current} ({GRUB_DROP_IN}); a new size moves the range and leaves what it holds where no boot looks: archive the previous generation, run crashring disarm, reboot, then arm with the new size"
    )]
    Rearm { current: Placement },
    #[error("{GRUB_DROP_IN} is ours but holds no memmap= range crashring can read: {0:?}")]
    Unreadable(String),
    #[error(
        "no GRUB to arm through ({GRUB_DEFAULT} and update-grub): this machine boots with {loader}, which crashring arm does not drive yet, and nothing was written. By hand: add `memmap={} crash_kexec_post_notifiers` to the kernel's command line as that boot loader takes it (/etc/kernel/cmdline as it stands, then kernel-install for each kernel; a loader that parses `$` as GRUB does wants `\\$`), `options crashring region={placement} user_streams={USER_STREAMS}` to {MODPROBE}, and `crashring` to {MODULES_LOAD}",
        memmap_param(*placement)
    )]
    BootLoader {
        loader: &'static str,
        placement: Placement,
    },
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
#[derive(Debug)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// The range, when arming.
    pub placement: Option<Placement>,
    /// Whether the GRUB drop-in changes, so update-grub must run.
    pub grub_changed: bool,
    /// What the user should know (kdump-tools found, nothing to do, ...).
    pub notes: Vec<String>,
}

impl Plan {
    /// Every change as a unified diff, files that stay the same left out.
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
        out
    }

    /// Writes the new files (atomically, mode 0644) and removes the
    /// vanished ones.
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

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

fn read(sys: &System, path: &str) -> Result<Option<String>, ArmError> {
    sys.read(path).map_err(|source| ArmError::Read {
        path: path.into(),
        source,
    })
}

fn ours(text: &str) -> bool {
    text.lines().next() == Some(MARK)
}

/// The range a drop-in of ours names (`memmap=SIZE\\\$ADDR`).
pub fn armed_range(drop_in: &str) -> Option<Placement> {
    let (_, rest) = drop_in.split_once("memmap=")?;
    let word = rest.split(['"', ' ']).next()?;
    let (size, addr) = word.split_once('$')?;
    let size = iomem::parse_size(size.trim_end_matches('\\'))?;
    Some(Placement {
        start: iomem::parse_size(addr)?,
        size,
    })
}

fn grub_drop_in(p: Placement) -> String {
    // `\\\$` in the shell's double quotes leaves `\$` in the variable;
    // grub-mkconfig copies it into grub.cfg, where GRUB's parser reads it
    // as a plain `$` (kernel-parameters.txt, memmap=).
    format!(
        "{MARK}\n\
         # The crash-persistent region, taken out of RAM before anything is\n\
         # placed, and the panic notifiers run before a kdump kernel takes over.\n\
         GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap={}\\\\\\${:#x} crash_kexec_post_notifiers\"\n",
        iomem::size_text(p.size),
        p.start
    )
}

/// What `arm` adds to kdump-tools' configuration. kdump-config builds the
/// capture kernel's command line from /proc/cmdline and runs the kexec
/// command through `eval`, which expands the `$` of memmap=SIZE$ADDR (to
/// `$0`, the script's name): the capture kernel gets a bare memmap=SIZE,
/// which takes all its memory above SIZE away, and dies before its
/// console starts. The capture kernel needs no range reserved (the
/// module there only reads it), so every memmap= with a `$` is left out,
/// with what kdump-config leaves out itself and its escaping of `"`.
///
/// When the admin set a KDUMP_CMDLINE of their own above the part, it is
/// kept, less such memmap= words. The part cannot ask the shell whether
/// KDUMP_CMDLINE is set: kdump-tools.service also reads the file as an
/// EnvironmentFile=, which sets it (to the text of the file's last
/// assignment) before kdump-config sources the file. So `arm` looks at
/// the file instead, and writes the part that fits it.
fn kdump_part(admin_cmdline: bool) -> String {
    let assignment = if admin_cmdline {
        "KDUMP_CMDLINE=$(printf '%s\\n' \"$KDUMP_CMDLINE\" | sed -re 's/(^| )memmap=[^ ]*[$][^ ]*//g')"
    } else {
        "KDUMP_CMDLINE=$(sed -re 's/(^| )(crashkernel|hugepages|hugepagesz|abm)=[^ ]*//g;s/(^| )memmap=[^ ]*[$][^ ]*//g;s/\"/\\\\\\\\\"/' /proc/cmdline)"
    };
    format!(
        "{KDUMP_PART_BEGIN}\n\
         # kdump-config's eval would expand the `$` of memmap=SIZE$ADDR: the\n\
         # capture kernel's command line without it (it needs no range reserved).\n\
         {assignment}\n\
         {KDUMP_PART_END}\n"
    )
}

/// Whether the file (without our part) assigns KDUMP_CMDLINE itself.
fn has_admin_cmdline(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("KDUMP_CMDLINE="))
}

/// Whether kdump-tools' configuration, when there is one, lacks the part
/// an armed machine's capture kernel needs: installing kdump-tools after
/// `arm`, or ucf's "install the maintainer's version", leaves it without,
/// and the capture kernel then boots with a bare memmap=SIZE.
pub fn kdump_part_missing(sys: &System) -> bool {
    kdump_tools_change(sys, true).is_ok_and(|c| c.is_some())
}

/// `arm --kdump-tools` (crashring-kdump-tools.service, before kdump-tools
/// loads its capture kernel on every boot): the part put back where it is
/// missing, on an armed machine only; nothing else changes.
pub fn plan_kdump_repair(sys: &System) -> Result<Plan, ArmError> {
    let armed = read(sys, GRUB_DROP_IN)?.as_deref().and_then(armed_range);
    let changes = match armed {
        Some(_) => kdump_tools_change(sys, true)?.into_iter().collect(),
        None => Vec::new(),
    };
    Ok(Plan {
        changes,
        grub_changed: false,
        placement: armed,
        notes: Vec::new(),
    })
}

/// `text` without a part of ours.
fn without_kdump_part(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        match line.trim_end() {
            KDUMP_PART_BEGIN => inside = true,
            KDUMP_PART_END if inside => inside = false,
            _ if !inside => out.push_str(line),
            _ => {}
        }
    }
    out
}

/// kdump-tools' configuration with our part at its end, if it exists.
fn kdump_tools_change(sys: &System, arming: bool) -> Result<Option<Change>, ArmError> {
    let Some(old) = read(sys, KDUMP_TOOLS)? else {
        return Ok(None);
    };
    let mut new = without_kdump_part(&old);
    if arming {
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        let admin = has_admin_cmdline(&new);
        new.push_str(&kdump_part(admin));
    }
    Ok((new != old).then_some(Change {
        path: KDUMP_TOOLS,
        old: Some(old),
        new: Some(new),
    }))
}

/// The module's options: the range, and a pool of user streams for the
/// programs of the crashring group (crashring-user).
fn modprobe(p: Placement) -> String {
    format!("{MARK}\noptions crashring region={p} user_streams={USER_STREAMS}\n")
}

/// Pool streams `arm` gives the module: 64 KiB each, 512 KiB of a slot.
pub const USER_STREAMS: u32 = 8;

fn modules_load() -> String {
    format!("{MARK}\ncrashring\n")
}

/// GRUB as Debian configures it: this file, the drop-ins beside it, and
/// update-grub, which writes [`GRUB_CFG`].
pub const GRUB_DEFAULT: &str = "/etc/default/grub";
const UPDATE_GRUB: [&str; 2] = ["/usr/sbin/update-grub", "/sbin/update-grub"];
pub const GRUB_CFG: &str = "/boot/grub/grub.cfg";

/// Which boot loader the machine is configured for, before anything is
/// written: arm drives GRUB only, and refuses elsewhere rather than leave
/// files behind that no boot reads.
fn boot_loader(sys: &System, placement: Placement) -> Result<(), ArmError> {
    let exists = |p: &str| sys.path(p).exists();
    if exists(GRUB_DEFAULT) && UPDATE_GRUB.iter().any(|p| exists(p)) {
        return Ok(());
    }
    let other = if exists("/etc/kernel/cmdline")
        || exists("/usr/bin/bootctl")
        || exists("/boot/efi/loader/loader.conf")
        || exists("/efi/loader/loader.conf")
    {
        "systemd-boot or kernel-install (/etc/kernel/cmdline)"
    } else if exists("/usr/sbin/grubby") || exists("/sbin/grubby") {
        "grubby"
    } else {
        "a boot loader it does not know"
    };
    Err(ArmError::BootLoader {
        loader: other,
        placement,
    })
}

/// memmap='s value for the range, as the kernel reads it (unescaped).
fn memmap_param(p: Placement) -> String {
    format!("{}${:#x}", iomem::size_text(p.size), p.start)
}

/// Whether GRUB's generated menu boots with the range: an armed machine
/// whose grub.cfg lacks it (update-grub failed or never ran, or a kernel
/// package rewrote it from other settings) needs update-grub again. A
/// machine's copy without grub.cfg is left to that system.
fn grub_cfg_lacks(sys: &System, p: Placement) -> Result<bool, ArmError> {
    let Some(cfg) = read(sys, GRUB_CFG)? else {
        return Ok(false);
    };
    let (size, addr) = (iomem::size_text(p.size), format!("{:#x}", p.start));
    Ok(!cfg.contains(&format!("memmap={size}\\${addr}"))
        && !cfg.contains(&format!("memmap={size}${addr}")))
}

/// Where modules are installed; the same directory with a merged /usr,
/// but a machine's copy may have either.
const MODULE_DIRS: [&str; 2] = ["/lib/modules", "/usr/lib/modules"];

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
    let found = MODULE_DIRS.iter().any(|dir| match release {
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
/// and the `memmap=` ranges GRUB's configuration reserves for others
/// (ramoops, say) that this boot has not reserved yet.
fn not_ours(sys: &System) -> Result<Vec<Range<u64>>, ArmError> {
    let mut avoid: Vec<Range<u64>> = boot::initrd(sys).into_iter().collect();
    let drop_ins = sys.path(GRUB_DROP_INS);
    let mut files = vec![GRUB_DEFAULT.to_string()];
    if let Ok(dir) = std::fs::read_dir(&drop_ins) {
        files.extend(
            dir.flatten()
                .map(|e| format!("{GRUB_DROP_INS}/{}", e.file_name().to_string_lossy()))
                .filter(|p| p.ends_with(".cfg") && p != GRUB_DROP_IN),
        );
    }
    for file in files {
        if let Some(text) = read(sys, &file)? {
            avoid.extend(boot::memmap_ranges(&text));
        }
    }
    Ok(avoid)
}

/// Plans `crashring arm`: `size` is `--size`, if given; `arch` the
/// machine's (`std::env::consts::ARCH`). Refuses where the module is not
/// installed, since the boot would then reserve the range for nothing.
pub fn plan_arm(sys: &System, size: Option<u64>, arch: &str) -> Result<Plan, ArmError> {
    if arch != "x86_64" && arch != "x86" {
        return Err(ArmError::Unsupported(arch.into()));
    }
    if let Some(s) = size {
        if s < iomem::ALIGN || !s.is_multiple_of(iomem::ALIGN) {
            return Err(ArmError::Size(s));
        }
    }
    module_installed(sys)?;
    let current = read(sys, GRUB_DROP_IN)?;
    for path in [GRUB_DROP_IN, MODPROBE, MODULES_LOAD] {
        if read(sys, path)?.is_some_and(|t| !ours(&t)) {
            return Err(ArmError::NotOurs(path.into()));
        }
    }
    let mut notes = Vec::new();
    let placement = match current.as_deref() {
        Some(text) => {
            let p = armed_range(text).ok_or_else(|| ArmError::Unreadable(text.into()))?;
            if size.is_some_and(|s| s != p.size) {
                return Err(ArmError::Rearm { current: p });
            }
            notes.push(format!("already armed with {p}: the range is kept"));
            p
        }
        None => {
            let text = read(sys, "/proc/iomem")?.unwrap_or_default();
            let resources = iomem::parse(&text).map_err(iomem::PlaceError::from)?;
            iomem::place(&resources, size.unwrap_or(DEFAULT_SIZE), &not_ours(sys)?)?
        }
    };
    boot_loader(sys, placement)?;
    if boot::firmware(sys) == boot::Firmware::UefiWipesMemory {
        notes.push(format!(
            "this machine's firmware wipes memory at a reset after a crash ({} is set; Debian's kernels set it at every boot): the next boot finds nothing, and only a kdump capture (kdump-tools) keeps a crash",
            boot::MOR_VARIABLE
        ));
    }
    let kdump = kdump_tools_change(sys, true)?;
    if read(sys, KDUMP_TOOLS)?.is_some() {
        notes.push(format!(
            "kdump-tools is installed: its capture kernel boots with this command line but for memmap= (which kdump-config's eval would mangle; {KDUMP_TOOLS} gets a marked part for it), and the module loaded there leaves the range alone for the next boot to archive"
        ));
    }
    let want = [
        (GRUB_DROP_IN, grub_drop_in(placement)),
        (MODPROBE, modprobe(placement)),
        (MODULES_LOAD, modules_load()),
    ];
    let mut changes = Vec::new();
    for (path, text) in want {
        let old = read(sys, path)?;
        if old.as_deref() != Some(text.as_str()) {
            changes.push(Change {
                path,
                old,
                new: Some(text),
            });
        }
    }
    changes.extend(kdump);
    let mut grub_changed = changes.iter().any(|c| c.path == GRUB_DROP_IN);
    if !grub_changed && grub_cfg_lacks(sys, placement)? {
        notes.push(format!(
            "{GRUB_CFG} boots without memmap= for {placement}: update-grub runs again"
        ));
        grub_changed = true;
    }
    Ok(Plan {
        grub_changed,
        changes,
        placement: Some(placement),
        notes,
    })
}

/// Plans `crashring disarm`: removes every file of ours, leaves others.
pub fn plan_disarm(sys: &System) -> Result<Plan, ArmError> {
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    for path in [GRUB_DROP_IN, MODPROBE, MODULES_LOAD] {
        match read(sys, path)? {
            Some(text) if ours(&text) => changes.push(Change {
                path,
                old: Some(text),
                new: None,
            }),
            Some(_) => notes.push(format!(
                "{path} was not written by crashring arm: left as it is"
            )),
            None => {}
        }
    }
    changes.extend(kdump_tools_change(sys, false)?);
    if changes.is_empty() {
        notes.push("not armed: nothing to undo".into());
    }
    Ok(Plan {
        grub_changed: changes.iter().any(|c| c.path == GRUB_DROP_IN),
        changes,
        placement: None,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(iomem: &str) -> (tempfile::TempDir, System) {
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

    const QEMU: &str = include_str!("../tests/data/iomem-qemu");

    /// Disarming leaves every file under `root` as it was `before` arm.
    fn disarm_restores(
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
        assert_eq!(plan.placement.unwrap().to_string(), "64M@0x22c000000");
        assert!(plan.grub_changed);
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
            assert_eq!(again.placement, plan.placement);
        }
        disarm_restores(&sys, dir.path(), &before);
        assert!(plan_disarm(&sys).unwrap().is_empty());
    }

    #[test]
    fn the_dry_run_diff_shows_every_file() {
        let (_dir, sys) = machine(QEMU);
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        let diff = plan.diff();
        for path in [GRUB_DROP_IN, MODPROBE, MODULES_LOAD] {
            assert!(diff.contains(&format!("+++ b{path}\n")), "{diff}");
        }
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
            plan_arm(&sys, None, "aarch64"),
            Err(ArmError::Unsupported(a)) if a == "aarch64"
        ));
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
            Err(ArmError::Rearm { current }) if current.size == 16 << 20
        ));
    }

    #[test]
    fn arm_writes_nothing_without_grub() {
        for (files, loader) in [
            (
                &["/etc/kernel/cmdline"][..],
                "systemd-boot or kernel-install",
            ),
            (&["/usr/bin/bootctl"][..], "systemd-boot or kernel-install"),
            (&["/usr/sbin/grubby"][..], "grubby"),
            (&[][..], "a boot loader it does not know"),
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
        assert!(again.is_empty() && again.grub_changed, "{again:?}");
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
        assert!(!plan_arm(&sys, None, "x86_64").unwrap().grub_changed);
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

    /// Debian 12's /etc/default/kdump-tools, in part.
    const KDUMP_DEFAULTS: &str =
        "USE_KDUMP=1\nKDUMP_KERNEL=/var/lib/kdump/vmlinuz\n#KDUMP_CMDLINE=\"\"\n";

    #[test]
    fn kdump_tools_gets_a_part_that_disarm_takes_away() {
        let (dir, sys) = machine(QEMU);
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        assert!(plan
            .notes
            .iter()
            .any(|n| n.starts_with("kdump-tools is installed")));
        assert!(plan.diff().contains(&format!("+{KDUMP_PART_BEGIN}\n")));
        plan.apply(&sys).unwrap();
        let armed = sys.read(KDUMP_TOOLS).unwrap().unwrap();
        assert!(armed.starts_with(KDUMP_DEFAULTS) && armed.ends_with(&kdump_part(false)));
        assert!(plan_arm(&sys, None, "x86_64").unwrap().is_empty());
        disarm_restores(&sys, dir.path(), &before);
    }

    /// What kdump-config does with the command line (kdump_load in
    /// kdump-tools 1.8.1): its defaults sourced, then the kexec command
    /// built in a string and run through eval; echo stands in for kexec.
    fn capture_command_line(defaults: &str, cmdline: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let proc_cmdline = dir.path().join("cmdline");
        std::fs::write(&proc_cmdline, cmdline).unwrap();
        // kdump-tools.service reads the file as an EnvironmentFile= first:
        // KDUMP_CMDLINE is set, to its last assignment's text, before
        // kdump-config sources the file.
        let environment = defaults
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("KDUMP_CMDLINE="))
            .map(|v| v.trim_matches('"').to_string());
        let script = r#"defaults="$1"; . "$defaults"
if [ -z "$KDUMP_CMDLINE" ] ; then
	KDUMP_CMDLINE=$(sed -re 's/(^| )(crashkernel|hugepages|hugepagesz|abm)=[^ ]*//g;s/"/\\\\"/' "$2")
fi
KDUMP_CMDLINE="$KDUMP_CMDLINE reset_devices"
KEXEC_CMD="echo --command-line=\"$KDUMP_CMDLINE\""
eval $KEXEC_CMD"#;
        let file = dir.path().join("kdump-tools");
        std::fs::write(
            &file,
            defaults.replace("/proc/cmdline", &proc_cmdline.to_string_lossy()),
        )
        .unwrap();
        let mut sh = std::process::Command::new("/bin/sh");
        if let Some(v) = environment {
            sh.env("KDUMP_CMDLINE", v);
        }
        let out = sh
            .args(["-c", script, "kdump-config"])
            .arg(&file)
            .arg(&proc_cmdline)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn an_admins_own_capture_command_line_is_kept() {
        let cmdline = "root=UUID=4c1f ro memmap=64M$0x6be00000 console=ttyS0\n";
        let (_dir, sys) = machine(QEMU);
        let own = "KDUMP_CMDLINE=\"root=/dev/sda1 ro nr_cpus=1 irqpoll\"\n";
        sys.write(KDUMP_TOOLS, &format!("{KDUMP_DEFAULTS}{own}"))
            .unwrap();
        plan_arm(&sys, None, "x86_64").unwrap().apply(&sys).unwrap();
        let admin = sys.read(KDUMP_TOOLS).unwrap().unwrap();
        assert_eq!(
            capture_command_line(&admin, cmdline),
            "--command-line=root=/dev/sda1 ro nr_cpus=1 irqpoll reset_devices\n"
        );
    }

    #[test]
    fn a_lost_kdump_part_is_seen_and_put_back_on_an_armed_machine_only() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, sys) = machine(QEMU);
        // kdump-tools installed after arm: no part.
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        assert!(kdump_part_missing(&sys));
        assert!(plan_kdump_repair(&sys).unwrap().is_empty(), "not armed");
        plan_arm(&sys, Some(64 << 20), "x86_64")
            .unwrap()
            .apply(&sys)
            .unwrap();
        assert!(!kdump_part_missing(&sys));
        // ucf's "install the maintainer's version", 0600 as the admin made it.
        sys.write(KDUMP_TOOLS, KDUMP_DEFAULTS).unwrap();
        let path = sys.path(KDUMP_TOOLS);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(kdump_part_missing(&sys));
        let repair = plan_kdump_repair(&sys).unwrap();
        assert_eq!(repair.changes.len(), 1);
        assert!(!repair.grub_changed);
        repair.apply(&sys).unwrap();
        assert!(!kdump_part_missing(&sys));
        assert!(plan_kdump_repair(&sys).unwrap().is_empty());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the file holds FTP_PASSWORD: its mode stays");
    }

    #[test]
    fn kdump_configs_eval_gets_a_command_line_without_our_dollar() {
        let cmdline = "root=UUID=4c1f ro memmap=64M$0x6be00000 crash_kexec_post_notifiers console=ttyS0 crashkernel=384M-:128M\n";
        // What kdump-tools alone makes of it: a bare memmap=64M.
        let bare = capture_command_line(KDUMP_DEFAULTS, cmdline);
        assert!(bare.contains("memmap=64Mkdump-configx6be00000"), "{bare}");
        let with_part = format!("{KDUMP_DEFAULTS}{}", kdump_part(false));
        assert_eq!(
            capture_command_line(&with_part, cmdline),
            "--command-line=root=UUID=4c1f ro crash_kexec_post_notifiers console=ttyS0 reset_devices\n"
        );
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
        assert_eq!(plan.placement.unwrap().to_string(), "64M@0x22a000000");
        let mut params = vec![0u8; 4096];
        params[0x218..0x21c].copy_from_slice(&0x2800_0000u32.to_le_bytes());
        params[0x21c..0x220].copy_from_slice(&0x0400_0000u32.to_le_bytes());
        params[0x0c0..0x0c4].copy_from_slice(&2u32.to_le_bytes());
        sys.write("/sys/kernel/boot_params/data", "").unwrap();
        std::fs::write(sys.path("/sys/kernel/boot_params/data"), &params).unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert_eq!(plan.placement.unwrap().to_string(), "64M@0x224000000");
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
