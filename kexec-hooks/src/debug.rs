//! `crashring debug --persist`: the debug selection kept across boots, as
//! module options in a file of its own beside arm's (`disarm` removes
//! both). crashring.ko takes the selection (`debug=`); dynamic debug
//! enables the selected callsites of a loadable module when it loads
//! (its `dyndbg=` option, a query for just those callsites). A built-in
//! callsite can only be enabled from the kernel's command line, which
//! this file cannot reach: the plan says so, with the word to add.

use crate::arm::{ArmError, Change, Plan};
use crate::loader::read;
use crate::system::System;

pub const DEBUG_MODPROBE: &str = "/etc/modprobe.d/crashring-debug.conf";

/// The file's first line, by which `disarm` knows it.
pub const DEBUG_MARK: &str =
    "# Written by `crashring debug --persist`; `crashring disarm` removes it.";

/// Whether `text` is the file as this module writes it.
pub fn ours(text: &str) -> bool {
    text.lines().next() == Some(DEBUG_MARK)
}

/// A callsite query dynamic debug runs for one module at its load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enable {
    pub module: String,
    /// `file F line N`, `func F` or empty (the whole module).
    pub query: String,
    /// The module is built into the kernel: no option reaches it.
    pub builtin: bool,
}

/// The file's text: crashring.ko's selection, then one `dyndbg=` per
/// loadable module with every query of it; `None` when nothing is
/// selected.
fn text(selection: &str, enables: &[Enable]) -> Option<String> {
    if selection.trim().is_empty() {
        return None;
    }
    // Words are separated by ';' in the option: modprobe splits options
    // at spaces.
    let words: Vec<&str> = selection.split_whitespace().collect();
    let mut out = format!(
        "{DEBUG_MARK}\noptions crashring debug={}\n",
        words.join(";")
    );
    let mut modules: Vec<&str> = enables
        .iter()
        .filter(|e| !e.builtin)
        .map(|e| e.module.as_str())
        .collect();
    modules.dedup();
    for module in modules {
        let queries: Vec<String> = enables
            .iter()
            .filter(|e| e.module == module && !e.builtin)
            .map(|e| format!("{} +p", e.query).trim_start().to_string())
            .collect();
        out.push_str(&format!(
            "options {module} dyndbg=\"{}\"\n",
            queries.join("; ")
        ));
    }
    Some(out)
}

/// Plans keeping `selection` (crashring.ko's words, as sysfs `debug`
/// takes them) and enabling `enables` at every boot; an empty selection
/// removes the file.
pub fn plan_persist(sys: &System, selection: &str, enables: &[Enable]) -> Result<Plan, ArmError> {
    let old = read(sys, DEBUG_MODPROBE)?;
    if old.as_deref().is_some_and(|t| !ours(t)) {
        return Err(ArmError::NotOurs(DEBUG_MODPROBE.into()));
    }
    let new = text(selection, enables);
    let mut plan = Plan::default();
    for e in enables.iter().filter(|e| e.builtin) {
        let query = format!("{} +p", e.query);
        plan.notes.push(format!(
            "{} is built into the kernel: add dyndbg=\"{}\" to the kernel's command line to enable its callsites at boot",
            e.module,
            query.trim_start()
        ));
    }
    if old != new {
        plan.changes.push(Change {
            path: DEBUG_MODPROBE,
            old,
            new,
        });
    }
    // An armed machine's initramfs loads the module with these options.
    if read(sys, crate::arm::MODULES_LOAD)?.is_some_and(|t| crate::arm::ours(&t)) {
        plan.commands.extend(crate::arm::initramfs_rebuild(
            sys,
            &plan.changes,
            None,
            &mut plan.notes,
        ));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enable(module: &str, query: &str, builtin: bool) -> Enable {
        Enable {
            module: module.into(),
            query: query.into(),
            builtin,
        }
    }

    /// The options an armed machine's initramfs loads the module with
    /// change: it is built again. Unarmed, the module is not in it.
    #[test]
    fn an_armed_machines_initramfs_is_built_again() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write(crate::initramfs::INITRAMFS_TOOLS_HOOK, "")
            .unwrap();
        sys.write("/usr/sbin/update-initramfs", "").unwrap();
        let persist = |words| plan_persist(&sys, words, &[]).unwrap();
        assert!(persist("drm=KMS").commands.is_empty());
        sys.write(
            crate::arm::MODULES_LOAD,
            &format!("{}\ncrashring\n", crate::arm::MARK),
        )
        .unwrap();
        let plan = persist("drm=KMS");
        assert_eq!(plan.commands, [["update-initramfs", "-u", "-k", "all"]]);
        plan.apply(&sys).unwrap();
        // The same selection again: nothing to write, nothing to build.
        assert!(persist("drm=KMS").is_empty());
    }

    #[test]
    fn the_selection_and_each_modules_queries_become_options() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        let plan = plan_persist(
            &sys,
            "drm=KMS,ATOMIC file=e1000_main.c:77 module=snd_hda_intel",
            &[
                enable("e1000", "file e1000_main.c line 77", false),
                enable("e1000", "func e1000_watchdog", false),
                enable("snd_hda_intel", "", false),
                enable("main", "file init/main.c line 1424", true),
            ],
        )
        .unwrap();
        assert_eq!(
            plan.changes[0].new.as_deref().unwrap(),
            format!(
                "{DEBUG_MARK}\noptions crashring debug=drm=KMS,ATOMIC;file=e1000_main.c:77;module=snd_hda_intel\n\
                 options e1000 dyndbg=\"file e1000_main.c line 77 +p; func e1000_watchdog +p\"\n\
                 options snd_hda_intel dyndbg=\"+p\"\n"
            )
        );
        assert_eq!(
            plan.notes,
            ["main is built into the kernel: add dyndbg=\"file init/main.c line 1424 +p\" to the kernel's command line to enable its callsites at boot"]
        );
        plan.apply(&sys).unwrap();
        // Applied, the same selection changes nothing; none removes it.
        let again = plan_persist(
            &sys,
            "drm=KMS,ATOMIC file=e1000_main.c:77 module=snd_hda_intel",
            &[
                enable("e1000", "file e1000_main.c line 77", false),
                enable("e1000", "func e1000_watchdog", false),
                enable("snd_hda_intel", "", false),
            ],
        )
        .unwrap();
        assert!(again.is_empty());
        let cleared = plan_persist(&sys, "", &[]).unwrap();
        assert_eq!(cleared.changes[0].new, None);
    }

    #[test]
    fn disarm_removes_the_kept_selection() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        plan_persist(&sys, "drm=KMS", &[])
            .unwrap()
            .apply(&sys)
            .unwrap();
        let plan = crate::arm::plan_disarm(&sys, false).unwrap();
        plan.apply(&sys).unwrap();
        assert_eq!(sys.read(DEBUG_MODPROBE).unwrap(), None);
    }

    #[test]
    fn a_file_not_ours_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write(DEBUG_MODPROBE, "options crashring debug=x\n")
            .unwrap();
        assert!(matches!(
            plan_persist(&sys, "drm=KMS", &[]),
            Err(ArmError::NotOurs(p)) if p == DEBUG_MODPROBE
        ));
    }
}
