//! `crashring arm` and `crashring disarm`: the files that make a machine
//! reserve the region and load the module at every boot, planned first
//! (so `--dry-run` shows exactly what would change) and then applied.
//!
//! Every file `arm` writes starts with [`MARK`]; `disarm` removes exactly
//! the files carrying it, and `arm` never overwrites a file without it.
//! The GRUB drop-in is the machine's record of the range: arming again
//! keeps it, since moving it would leave the generation recorded in the
//! old range where no later boot looks.

use crate::iomem::{self, Placement};
use crate::system::System;
use std::fmt::Write as _;

/// The first line of every file `arm` writes.
pub const MARK: &str = "# Written by `crashring arm`; `crashring disarm` removes it.";

/// GRUB's drop-in: Debian's grub-mkconfig sources /etc/default/grub.d/*.cfg
/// after /etc/default/grub.
pub const GRUB_DROP_IN: &str = "/etc/default/grub.d/crashring.cfg";
pub const MODPROBE: &str = "/etc/modprobe.d/crashring.conf";
pub const MODULES_LOAD: &str = "/etc/modules-load.d/crashring.conf";
/// Debian's kdump-tools configuration: its presence means a capture
/// kernel may boot with this machine's command line.
pub const KDUMP_TOOLS: &str = "/etc/default/kdump-tools";

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

fn read(sys: &System, path: &'static str) -> Result<Option<String>, ArmError> {
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

fn modprobe(p: Placement) -> String {
    format!("{MARK}\noptions crashring region={p}\n")
}

fn modules_load() -> String {
    format!("{MARK}\ncrashring\n")
}

/// Plans `crashring arm`: `size` is `--size`, if given; `arch` the
/// machine's (`std::env::consts::ARCH`).
pub fn plan_arm(sys: &System, size: Option<u64>, arch: &str) -> Result<Plan, ArmError> {
    if arch != "x86_64" && arch != "x86" {
        return Err(ArmError::Unsupported(arch.into()));
    }
    if let Some(s) = size {
        if s < iomem::ALIGN || !s.is_multiple_of(iomem::ALIGN) {
            return Err(ArmError::Size(s));
        }
    }
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
            iomem::place(&resources, size.unwrap_or(DEFAULT_SIZE))?
        }
    };
    if read(sys, KDUMP_TOOLS)?.is_some() {
        notes.push(
            "kdump-tools is installed: its capture kernel boots with this command line, memmap= included, and the module loaded there leaves the range alone for the next boot to archive".into(),
        );
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
    Ok(Plan {
        grub_changed: changes.iter().any(|c| c.path == GRUB_DROP_IN),
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
        (dir, sys)
    }

    const QEMU: &str = include_str!("../tests/data/iomem-qemu");

    #[test]
    fn arm_then_disarm_leaves_the_machine_as_it_was() {
        let (dir, sys) = machine(QEMU);
        let before = sys.snapshot().unwrap();
        let plan = plan_arm(&sys, Some(64 << 20), "x86_64").unwrap();
        assert_eq!(plan.placement.unwrap().to_string(), "64M@0x23c000000");
        assert!(plan.grub_changed);
        plan.apply(&sys).unwrap();
        assert_eq!(
            sys.read(MODPROBE).unwrap().unwrap(),
            format!("{MARK}\noptions crashring region=64M@0x23c000000\n")
        );
        // Arming again changes nothing and keeps the range, with or
        // without the same --size.
        for size in [None, Some(64 << 20)] {
            let again = plan_arm(&sys, size, "x86_64").unwrap();
            assert!(again.is_empty(), "{:?}", again.changes);
            assert_eq!(again.placement, plan.placement);
        }
        plan_disarm(&sys).unwrap().apply(&sys).unwrap();
        assert_eq!(
            sys.snapshot().unwrap(),
            before,
            "in {}",
            dir.path().display()
        );
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
            "+GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX memmap=64M\\\\\\$0x23c000000 crash_kexec_post_notifiers\"\n"
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
            "linux /vmlinuz ro  memmap=16M\\$0x23f000000 crash_kexec_post_notifiers quiet\n"
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

    #[test]
    fn kdump_tools_is_noted() {
        let (_dir, sys) = machine(QEMU);
        sys.write(KDUMP_TOOLS, "USE_KDUMP=1\n").unwrap();
        let plan = plan_arm(&sys, None, "x86_64").unwrap();
        assert!(plan
            .notes
            .iter()
            .any(|n| n.starts_with("kdump-tools is installed")));
    }
}
