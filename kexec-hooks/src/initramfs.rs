//! The initramfs images an armed machine boots with. crashring's hooks
//! (the initramfs-tools hook and the dracut module `crashring-early`) put
//! the module and its options into every image built while the machine
//! is armed, so that it records from before the root file system is
//! mounted; an image built before `arm`, before `disarm`, or before
//! `crashring debug --persist` changed the options holds what was true
//! then, so each of them plans [`rebuild`] after writing its files.

use crate::arm::{Change, MODPROBE, MODULES_LOAD};
use crate::debug::DEBUG_MODPROBE;
use crate::system::System;

/// Where the crashring package installs its initramfs-tools hook.
pub const INITRAMFS_TOOLS_HOOK: &str = "/usr/share/initramfs-tools/hooks/crashring";
/// Where it installs the dracut module.
pub const DRACUT_MODULE: &str = "/usr/lib/dracut/modules.d/90crashring-early/module-setup.sh";

/// The command that builds every installed kernel's initramfs again, with
/// the generator the machine uses (initramfs-tools first: Debian's own)
/// where crashring's hook for it is installed; `None` where neither is
/// (the module then loads from the root file system,
/// systemd-modules-load).
pub fn rebuild(sys: &System) -> Option<Vec<String>> {
    let has = |path: &str| sys.path(path).exists();
    let command: &[&str] = if has(INITRAMFS_TOOLS_HOOK) && has("/usr/sbin/update-initramfs") {
        &UPDATE_INITRAMFS
    } else if has(DRACUT_MODULE) && (has("/usr/bin/dracut") || has("/usr/sbin/dracut")) {
        &DRACUT
    } else {
        return None;
    };
    Some(command.iter().map(|w| w.to_string()).collect())
}

const UPDATE_INITRAMFS: [&str; 4] = ["update-initramfs", "-u", "-k", "all"];
const DRACUT: [&str; 3] = ["dracut", "--force", "--regenerate-all"];

/// The generators' names, as a command [`rebuild`] planned starts (in the
/// record's pending mark, say).
pub const GENERATORS: [&str; 2] = [UPDATE_INITRAMFS[0], DRACUT[0]];

/// Whether `changes` touch what an initramfs holds of crashring: the
/// list that arms the hooks, or the module's options.
pub fn changed(changes: &[Change]) -> bool {
    changes
        .iter()
        .any(|c| [MODULES_LOAD, MODPROBE, DEBUG_MODPROBE].contains(&c.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_with_a_crashring_hook_is_run() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        assert_eq!(rebuild(&sys), None);
        // update-initramfs without the hook (the package not installed
        // this way): nothing would put the module in.
        sys.write("/usr/sbin/update-initramfs", "").unwrap();
        assert_eq!(rebuild(&sys), None);
        sys.write(DRACUT_MODULE, "").unwrap();
        sys.write("/usr/bin/dracut", "").unwrap();
        assert_eq!(
            rebuild(&sys).unwrap(),
            ["dracut", "--force", "--regenerate-all"]
        );
        sys.write(INITRAMFS_TOOLS_HOOK, "").unwrap();
        assert_eq!(
            rebuild(&sys).unwrap(),
            ["update-initramfs", "-u", "-k", "all"]
        );
    }
}
