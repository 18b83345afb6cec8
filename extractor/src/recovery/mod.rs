//! The unattended product's recovery: what `crashring recover` does on
//! every boot (`crashring-recover.service`) and in a kdump capture boot
//! (`crashring-capture.service`).
//!
//! Every generation the module keeps is archived in turn, newest first, as
//! the module offers them: one that a failed recovery left behind comes
//! out on the next run beside the newer crash, and recording, which the
//! module resumes only into an empty slot, never stays stopped because of
//! one. The loop is bounded by the module's slots. One run at a time holds
//! the bundle directory's lock, and each acknowledgement names the
//! generation it releases, so two runs can never bundle one generation
//! twice or release one nobody bundled.

mod archive;
pub mod event_formats;
mod module;
pub mod next_boot;
mod place;
pub mod report;
pub mod upload;

pub use archive::Generation;
pub use module::{Module, Offer, Sysfs, SYSFS};

use crate::bundle::{BundleError, CheckError};
use crate::recover::{LoadError, RecoverError};
use archive::{Archive, Archived, Input};
use kexec_hooks::config::Recover;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Generations a module keeps at most (`CRASHRING_SLOTS`): the loop's bound.
pub const SLOTS: usize = 2;

/// A capture kernel's dump of the crashed kernel's memory.
pub const VMCORE: &str = "/proc/vmcore";

/// What became of one generation.
#[derive(Debug)]
pub enum Outcome {
    Bundled {
        path: PathBuf,
        events: u64,
        lost: u64,
        /// Older bundles retention removed.
        deleted: Vec<String>,
        /// Read past a header that failed its checks.
        salvaged: bool,
    },
    /// The capture kernel bundled it already, under this name.
    AlreadyArchived(String),
    /// A clean shutdown's, acknowledged without a bundle (`Clean=discard`).
    Discarded,
    /// A clean shutdown's, left in the region (`Clean=keep`).
    Kept,
    /// A clean shutdown's that `Clean=keep` would leave, released because
    /// the module could record nowhere else.
    ReleasedToRecord,
}

#[derive(Debug, Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Recover(#[from] RecoverError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("the bundle written fails its check ({0}); nothing was put in place")]
    Check(CheckError),
    #[error("the previous generation holds no region")]
    NoRegion,
    #[error("the module offers generation {offered}, but the region read holds generation {read}")]
    NotOffered { offered: u64, read: u64 },
    #[error("{} exists already: not overwritten", .0.display())]
    Exists(PathBuf),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("the module's previous_summary: {0}")]
    Module(io::Error),
    #[error("acknowledging generation {generation}: {source}")]
    Ack { generation: u64, source: io::Error },
}

/// Where a run reads generations from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A normal boot: the module's `previous`, acknowledged once archived.
    Boot,
    /// A kdump capture kernel: `previous` if the module offers it, else
    /// `/proc/vmcore`; nothing is acknowledged (the next boot does that).
    Capture,
}

/// One run over everything that waits.
pub struct Run {
    /// What became of each generation, newest first.
    pub archived: Vec<Archived>,
    /// The generation left in the region, and why, when one failed.
    pub failed: Option<(Option<u64>, RecoveryError)>,
    /// Why the module records nothing now, when it says so.
    pub not_recording: Option<String>,
    /// Whether there was anything at all: the module's absence, say.
    pub nothing: Option<&'static str>,
    /// The module is not loaded in this boot: on an armed machine,
    /// nothing is recorded (the caller knows whether it is armed).
    pub not_loaded: bool,
    /// What keeping the running kernel's event formats did, on a normal
    /// boot that knows its release.
    pub formats: Option<io::Result<event_formats::Kept>>,
}

/// Where a run reads from and writes to.
pub struct Places<'a> {
    /// `/proc/vmcore` (under the system root).
    pub vmcore: &'a Path,
    /// The bundle directory.
    pub dir: &'a Path,
    /// Where `crashring arm` placed the range, if this machine is armed.
    pub armed: Option<u64>,
    /// Where the running kernel shows what it kept of the crashed boot
    /// (under the system root): a normal boot bundles it with its crash
    /// ([`next_boot`]). Its tracefs is where the running kernel's event
    /// formats are.
    pub next_boot: next_boot::Shown<'a>,
    /// The running kernel's release: a normal boot keeps its event
    /// formats for the dumps to come ([`event_formats`]).
    pub release: Option<&'a str>,
    /// The running kernel's `/proc/kallsyms` (under the system root),
    /// which names the code of a vmcore of the same release.
    pub kallsyms: &'a Path,
}

/// Archives what waits, under the bundle directory's lock.
pub fn run(
    module: &dyn Module,
    mode: Mode,
    places: &Places,
    config: &Recover,
) -> Result<Run, RecoveryError> {
    let (vmcore, dir) = (places.vmcore, places.dir);
    create_private_dir(dir)?;
    let _lock = lock(dir)?;
    remove_staging(dir);
    let mut out = Run {
        archived: Vec::new(),
        failed: None,
        not_recording: None,
        nothing: None,
        not_loaded: false,
        formats: None,
    };
    let mut archive = Archive {
        dir,
        config,
        module: (mode == Mode::Boot).then_some(module),
        armed: places.armed,
        next_boot: (mode == Mode::Boot).then_some(places.next_boot),
        running: places.release.map(|r| (r, places.kallsyms)),
        placed: Vec::new(),
        archived: None,
    };
    let mut last = None;
    for _ in 0..SLOTS {
        let input = match module.offer().map_err(RecoveryError::Module)? {
            Offer::Waiting {
                path,
                generation,
                damaged,
            } => {
                if last == Some(generation) {
                    // A Kept one stays offered; one acknowledged should not.
                    if let Some(a) = out.archived.last_mut() {
                        if !matches!(a.outcome, Outcome::Kept) {
                            a.warnings.push(format!("the module still offers generation {generation} after its acknowledgement; the next run looks again"));
                        }
                    }
                    break;
                }
                last = Some(generation);
                Input {
                    path,
                    offered: Some(generation),
                    damaged,
                }
            }
            _ if mode == Mode::Capture && vmcore.exists() && out.archived.is_empty() => Input {
                path: vmcore.to_path_buf(),
                offered: None,
                damaged: false,
            },
            Offer::NotLoaded if out.archived.is_empty() => {
                out.nothing = Some("the module is not loaded: nothing to recover");
                out.not_loaded = true;
                break;
            }
            _ => {
                if out.archived.is_empty() {
                    out.nothing = Some("no previous generation waits to be archived");
                }
                break;
            }
        };
        let from_vmcore = input.offered.is_none();
        let outcome = archive.run(&input);
        // What the kernel shows of the boot before is that boot's: the
        // newest generation's, never an older one's.
        archive.next_boot = None;
        match outcome {
            Ok(mut a) => {
                let keeping = matches!(a.outcome, Outcome::Kept);
                if keeping && mode == Mode::Boot && module_not_recording(module).is_some() {
                    module
                        .ack(a.generation.generation)
                        .map_err(|source| RecoveryError::Ack {
                            generation: a.generation.generation,
                            source,
                        })?;
                    a.outcome = Outcome::ReleasedToRecord;
                }
                out.archived.push(a);
            }
            Err(e) => {
                out.failed = Some((input.offered, e));
                break;
            }
        }
        // A capture kernel acknowledges nothing: what it read stays offered.
        if mode == Mode::Capture || from_vmcore {
            break;
        }
    }
    if mode == Mode::Boot {
        out.not_recording = module_not_recording(module);
        // After the bundles: they come first.
        out.formats = places
            .release
            .map(|release| event_formats::keep(places.next_boot.tracing, release, dir));
    }
    Ok(out)
}

/// The module's status when it says it records nothing.
fn module_not_recording(module: &dyn Module) -> Option<String> {
    module
        .status()
        .ok()
        .flatten()
        .filter(|s| s.starts_with("not recording"))
}

pub fn create_private_dir(dir: &Path) -> Result<(), RecoveryError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| RecoveryError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

/// `dir` itself, locked (flock, blocking) until the returned handle is
/// dropped: a second run waits, then finds what the first left. No lock
/// file is left among the bundles for anything listing them to trip on.
pub(crate) fn lock(dir: &Path) -> Result<File, RecoveryError> {
    let io_err = |source| RecoveryError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let handle = File::open(dir).map_err(io_err)?;
    handle.lock().map_err(io_err)?;
    Ok(handle)
}

/// What a run killed midway left (a unit's time limit, a shutdown, the
/// OOM killer): the staged bundle, its writer's archive and staging
/// directory beside it, a summary. No run holds them any more (this one
/// holds the lock), and retention, which skips dot files, would never
/// count the space they keep.
pub(crate) fn remove_staging(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let writers = format!(".{}", place::STAGED);
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let left = [place::STAGED, &writers, place::SUMMARY_STAGED];
        if !left.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        // A symbolic link is removed, never followed.
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(entry.path()),
            _ => std::fs::remove_file(entry.path()),
        };
    }
}
