//! One generation into the bundle directory: bundled, checked as
//! `check-bundle` does, put in place with a `.json` summary beside it, and
//! only then acknowledged; retention before (to make room on a full disk)
//! and after.

use super::module::Module;
use super::place::{place, Filing, Placed};
use super::{Outcome, RecoveryError};
use crate::bundle::redact::{Rules, TextRedactor};
use crate::bundle::{self, AddLog, Source};
use crate::kmem::symbols::SymbolMap;
use crate::phys::PhysAddr;
use crate::recover::signature::{self, Signature};
use crate::recover::{self, InputSpec};
use kexec_hooks::config::{Clean, Recover};
use kexec_hooks::retention;
use pstore_ring::layout::{STATE_CLEAN, STATE_CRASHED};
use pstore_ring::read::{reason_name, HeaderTrust};
use std::io;
use std::path::{Path, PathBuf};

/// The generation, as the journal and the summary name it.
#[derive(Clone, Debug)]
pub struct Generation {
    pub host: String,
    pub boot_id: String,
    pub generation: u64,
    pub state: String,
    /// Ended in a clean shutdown (whatever its reason).
    pub clean: bool,
    /// A restart, halt or power-off was asked for with a reason (in
    /// `message`): bundled as a crash is, whatever `Clean=` says.
    pub shutdown_asked: bool,
    pub reason: String,
    pub message: String,
    /// The hardware error that brought the kernel down, in words
    /// ([`pstore_ring::ras::fatal_hardware_error`]).
    pub hardware_error: Option<String>,
    /// What crashes of one cause share ([`crate::recover::signature`]).
    pub signature: Option<Signature>,
    /// What the next boot's firmware and kernel said of the reset
    /// ([`super::next_boot::Previous`]): only for the generation that
    /// boot followed.
    pub firmware_error: Option<String>,
    pub reset_reason: Option<String>,
}

/// Where a generation is read from, and how.
pub struct Input {
    pub path: PathBuf,
    /// The generation the module offers; `None` for /proc/vmcore.
    pub offered: Option<u64>,
    /// The header failed the module's checks: read it trusting the header.
    pub damaged: bool,
}

/// What archiving one generation needs.
pub struct Archive<'a> {
    pub dir: &'a Path,
    pub config: &'a Recover,
    /// `None` in a capture kernel, which leaves the region as it is.
    pub module: Option<&'a dyn Module>,
    /// Where `crashring arm` placed the range, if this machine is armed:
    /// in a dump, the region there is the crashed kernel's.
    pub armed: Option<u64>,
    /// Where the running kernel shows what it kept of the boot before this
    /// one ([`super::next_boot`]): it goes with that boot's crash.
    pub next_boot: Option<super::next_boot::Shown<'a>>,
    /// The running kernel's release and its `/proc/kallsyms`: a vmcore of
    /// the same release (a capture kernel is the crashed one, booted
    /// again) has its ftrace buffers' code addresses named by them.
    pub running: Option<(&'a str, &'a Path)>,
    /// The bundles this run placed, and the archive number they share.
    pub placed: Vec<String>,
    pub archived: Option<u64>,
}

/// What became of a generation, and what went wrong after it was safe.
pub struct Archived {
    pub generation: Generation,
    pub outcome: Outcome,
    /// Said, but the generation is archived and acknowledged all the same.
    pub warnings: Vec<String>,
}

impl Archive<'_> {
    pub fn run(&mut self, input: &Input) -> Result<Archived, RecoveryError> {
        let spec = InputSpec {
            path: input.path.clone(),
            // A damaged header is salvaged as `--trust-header --phys 0`.
            phys: input.damaged.then_some((PhysAddr(0), None)),
            trust: if input.damaged {
                HeaderTrust::Lenient
            } else {
                HeaderTrust::Checksummed
            },
        };
        let dump = recover::open(&spec)?;
        let loaded = recover::find(dump, &spec, &mut |_, _| {})?;
        if loaded.found.is_empty() {
            return Err(loaded.no_region(&spec).into());
        }
        let unread: Vec<String> = loaded
            .unread
            .iter()
            .map(|e| {
                format!("a region the input holds besides the one bundled could not be read: {e}")
            })
            .collect();
        let mut recovered = loaded.regions().collect::<Result<Vec<_>, _>>()?;
        // A dump may hold stale copies of older generations too (a
        // previous recovery's snapshot in freed RAM): only the crashed
        // kernel's own region is bundled.
        let chosen = choose(&recovered, self.armed).ok_or(RecoveryError::NoRegion)?;
        let recovered = vec![recovered.swap_remove(chosen)];
        let mut g = generation_of(&recovered[0]);
        // What the running kernel shows of the boot before goes with that
        // boot's generation, the newest the module offers.
        let previous = match (self.next_boot, input.offered) {
            (Some(next_boot), Some(_)) => super::next_boot::previous_boot(&next_boot),
            _ => Default::default(),
        };
        g.firmware_error.clone_from(&previous.firmware_error);
        g.reset_reason.clone_from(&previous.reset_reason);
        if let Some(offered) = input.offered {
            if g.generation != offered {
                return Err(RecoveryError::NotOffered {
                    offered,
                    read: g.generation,
                });
            }
        }
        let ack = |outcome: Outcome, warnings: Vec<String>| -> Result<Archived, RecoveryError> {
            if let Some(m) = self.module {
                m.ack(g.generation).map_err(|source| RecoveryError::Ack {
                    generation: g.generation,
                    source,
                })?;
            }
            Ok(Archived {
                generation: g.clone(),
                outcome,
                warnings,
            })
        };
        // A box rebooted on purpose, for a reason (its watchdog, say), is
        // bundled as a crash is.
        if g.clean && !g.shutdown_asked {
            match self.config.clean {
                Clean::Keep => {
                    return Ok(Archived {
                        generation: g,
                        outcome: Outcome::Kept,
                        warnings: Vec::new(),
                    })
                }
                Clean::Discard => return ack(Outcome::Discarded, Vec::new()),
                Clean::Bundle => {}
            }
        }
        if let Some((name, archived)) = archived_as(self.dir, &g).map_err(io_at(self.dir))? {
            // The capture kernel's hook bundled it already, or a run whose
            // ack failed. Retention keeps it as this run's own, and an
            // older generation bundled next shares its place in the order.
            self.archived = self.archived.or(archived);
            self.placed.push(name.clone());
            return ack(Outcome::AlreadyArchived(name), Vec::new());
        }
        // Before: a disk too full for the new bundle gets room first.
        let (mut deleted, mut warnings) = self.retain(None);
        warnings.extend(unread);
        // Root's service: the input layer's debug messages, which only
        // root can have selected, stay.
        let rules = Rules {
            input_layer: true,
            ..Rules::default()
        };
        // A vmcore's own printk log and persistent ftrace buffers go with
        // its crash; a failure to read them is a warning, never a reason
        // to keep the crash back.
        // Its ftrace buffers' events named by the formats this directory
        // kept of that kernel release, if any, and their code by the
        // running kernel's symbols if it is that release: the anchors
        // refuse another build of the same name.
        let release = loaded.dump.vmcoreinfo_value("OSRELEASE");
        let formats = release.and_then(|release| super::event_formats::kept(self.dir, release));
        let symbols = match self.running {
            Some((running, kallsyms))
                if release == Some(running) && !loaded.ftrace().is_empty() =>
            {
                SymbolMap::load(kallsyms)
                    .map_err(|e| {
                        warnings.push(format!("the running kernel's symbols are not used: {e}"))
                    })
                    .ok()
            }
            _ => None,
        };
        let (mut kernel_logs, unread) =
            AddLog::kernels_own(&loaded, formats.as_ref(), symbols.as_ref());
        warnings.extend(unread);
        kernel_logs.extend(previous.logs);
        warnings.extend(previous.warnings);
        let file = input.path.file_name().map_or_else(
            || input.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let Placed {
            name,
            archived,
            path,
            size,
            summary,
            warnings: unspooled,
        } = place(
            self.dir,
            |staging| {
                Ok(bundle::write(
                    staging,
                    &Source::of(&loaded.dump, file),
                    &recovered,
                    &rules,
                    &kernel_logs,
                    None,
                )?)
            },
            |summary, _| summary.top.clone(),
            &g,
            None,
            Filing {
                archived: self.archived,
                spool: self.config.on_bundle.is_some(),
            },
        )?;
        self.archived = Some(archived);
        self.placed.push(name.clone());
        warnings.extend(unspooled);
        // After the ack nothing can undo the archive: retention's failures
        // are warnings.
        let mut done = ack(
            Outcome::Bundled {
                path,
                events: summary.events,
                lost: summary.lost,
                deleted: Vec::new(),
                salvaged: input.damaged,
            },
            warnings,
        )?;
        let (after, more) = self.retain(Some((&name, size)));
        deleted.extend(after);
        done.warnings.extend(more);
        if let Outcome::Bundled { deleted: d, .. } = &mut done.outcome {
            *d = deleted;
        }
        Ok(done)
    }

    fn retain(&self, new: Option<(&str, u64)>) -> (Vec<String>, Vec<String>) {
        retain(self.dir, self.config, new, &self.placed, retention::prune)
    }
}

/// Retention in `dir` by `prune` (a crash's, or a report's) once `new` (a
/// bundle just placed, and its bytes) is in place, or, with `None`, before
/// a new bundle is written: what it deleted, and what it could not do.
/// `keep` are the bundles this run placed before: never deleted, since
/// the module offers the newest generation first and the newest crash
/// is never the one to go.
pub(super) fn retain(
    dir: &Path,
    config: &Recover,
    new: Option<(&str, u64)>,
    keep: &[String],
    prune: fn(&[retention::Kept], u64, retention::Fs, &Recover) -> retention::Pruning,
) -> (Vec<String>, Vec<String>) {
    let (mut deleted, mut warnings) = (Vec::new(), Vec::new());
    let (except, size) = new.unwrap_or(("", 0));
    // Before, only space and age: an old crash is not deleted for a
    // count the new bundle, not yet written, may never add to.
    let limits = match new {
        None => Recover {
            max_bundles: None,
            ..config.clone()
        },
        Some(_) => config.clone(),
    };
    let pruning = match (retention::kept_in(dir, except), retention::fs_of(dir)) {
        (Ok(old), Ok(fs)) => prune(&old, size, fs, &limits),
        (Err(e), _) | (_, Err(e)) => {
            warnings.push(format!("retention: {}: {e}", dir.display()));
            return (deleted, warnings);
        }
    };
    let (kept, delete): (Vec<String>, Vec<String>) =
        pruning.delete.into_iter().partition(|n| keep.contains(n));
    for old in delete {
        match retention::delete(dir, &old) {
            Ok(()) => deleted.push(old),
            Err(e) => warnings.push(format!("retention: deleting old bundle {old}: {e}")),
        }
    }
    warnings.extend(kept.iter().map(|k| {
        format!("retention: {k}, a newer generation this run archived, is kept over the limits")
    }));
    if new.is_some() {
        warnings.extend(
            pruning
                .over
                .iter()
                .map(|o| format!("over {o}; the newest bundle is kept")),
        );
    }
    (deleted, warnings)
}

/// Which of a dump's regions is the crashed kernel's: the one at the armed
/// address when there is one, else the newest generation, a crashed one
/// before one that is not.
fn choose(regions: &[recover::Recovered], armed: Option<u64>) -> Option<usize> {
    if let Some(at) = armed.and_then(|a| regions.iter().position(|r| r.addr().0 == a)) {
        return Some(at);
    }
    let rank = |r: &recover::Recovered| {
        let crashed = r
            .region
            .state
            .as_ref()
            .is_ok_and(|s| s.state == STATE_CRASHED);
        (crashed, r.region.header.generation)
    };
    (0..regions.len()).max_by_key(|&i| rank(&regions[i]))
}

pub(super) fn generation_of(r: &recover::Recovered) -> Generation {
    let h = &r.region.header;
    let state = r.region.state.as_ref().ok();
    Generation {
        host: h.hostname.clone(),
        boot_id: h.boot_id.iter().map(|b| format!("{b:02x}")).collect(),
        generation: h.generation,
        state: state.map_or("unreadable", |s| s.state_name()).into(),
        clean: state.is_some_and(|s| s.state == STATE_CLEAN),
        shutdown_asked: state.is_some_and(|s| s.shutdown_reason().is_some()),
        reason: state.map_or("unknown", |s| reason_name(s.reason)).into(),
        // As the bundle's manifest says it: the summary and the journal
        // give no kernel address the bundle hides.
        // Only a message there is worth the region's key (a hash of all
        // of it): a clean shutdown's is empty.
        message: state
            .filter(|s| !s.message.is_empty())
            .map_or_else(String::new, |s| {
                let rules = Rules::default();
                let redactor = TextRedactor::new(&r.region, r.key(), &rules);
                redactor.crash_message(&s.message, &mut redactor.counts())
            }),
        hardware_error: pstore_ring::ras::fatal_hardware_error(&r.region, &r.trace),
        signature: signature::of(&r.region, &r.trace),
        firmware_error: None,
        reset_reason: None,
    }
}

pub(super) fn io_at(path: &Path) -> impl Fn(io::Error) -> RecoveryError + '_ {
    move |source| RecoveryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The bundle whose summary names this generation, if one does, and its
/// place in the archive order.
fn archived_as(dir: &Path, g: &Generation) -> io::Result<Option<(String, Option<u64>)>> {
    for entry in std::fs::read_dir(dir)? {
        let file = entry?.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".json") else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(dir.join(&file)) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        // A report of the generation while it ran is no bundle of how
        // it ended.
        if v.get("request").is_none()
            && v["boot_id"] == g.boot_id.as_str()
            && v["generation"] == g.generation
            && dir.join(format!("{name}.tar.gz")).exists()
        {
            return Ok(Some((name.to_string(), v["archived"].as_u64())));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::place::{write_summary, Counts};
    use super::*;

    fn generation() -> Generation {
        Generation {
            host: "kiosk".into(),
            boot_id: "00112233445566778899aabbccddeeff".into(),
            generation: 5,
            state: "crashed".into(),
            clean: false,
            shutdown_asked: false,
            reason: "panic".into(),
            message: String::new(),
            hardware_error: None,
            signature: None,
            firmware_error: None,
            reset_reason: None,
        }
    }

    /// A report the generation's user asked for while it ran names the
    /// same generation: were it taken for the generation's own bundle,
    /// the crash that ends it would never be bundled.
    #[test]
    fn a_report_asked_for_while_it_ran_is_not_the_generations_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let g = generation();
        let counts = Counts {
            size: 1,
            events: 1,
            lost: 0,
            archived: 1,
        };
        let asked = bundle::Request {
            why: "black screen".into(),
            uid: 1000,
            at_ns: 0,
        };
        std::fs::write(dir.path().join("report.tar.gz"), b"x").unwrap();
        write_summary(dir.path(), "report", &g, &counts, Some(&asked)).unwrap();
        assert_eq!(archived_as(dir.path(), &g).unwrap(), None);
        std::fs::write(dir.path().join("crash.tar.gz"), b"x").unwrap();
        write_summary(dir.path(), "crash", &g, &counts, None).unwrap();
        assert_eq!(
            archived_as(dir.path(), &g).unwrap(),
            Some(("crash".into(), Some(1)))
        );
    }

    /// The summary names a machine check that brought the kernel down,
    /// and the firmware's record and reset reason of the next boot, and
    /// says nothing of them otherwise.
    #[test]
    fn the_summary_names_a_fatal_hardware_error_and_the_firmwares() {
        let dir = tempfile::tempdir().unwrap();
        let counts = Counts {
            size: 1,
            events: 1,
            lost: 0,
            archived: 1,
        };
        let read = |name: &str| -> serde_json::Value {
            let text = std::fs::read_to_string(dir.path().join(format!("{name}.json"))).unwrap();
            serde_json::from_str(&text).unwrap()
        };
        write_summary(dir.path(), "plain", &generation(), &counts, None).unwrap();
        assert_eq!(read("plain").get("hardware_error"), None);
        let g = Generation {
            hardware_error: Some("machine check, bank 4".into()),
            ..generation()
        };
        write_summary(dir.path(), "mce", &g, &counts, None).unwrap();
        assert_eq!(read("mce")["hardware_error"], "machine check, bank 4");
        let g = Generation {
            firmware_error: Some("fatal platform memory error".into()),
            reset_reason: Some("[0x00080800]: software wrote 0x6".into()),
            ..generation()
        };
        write_summary(dir.path(), "bert", &g, &counts, None).unwrap();
        assert_eq!(
            read("bert")["firmware_error"],
            "fatal platform memory error"
        );
        assert_eq!(
            read("bert")["reset_reason"],
            "[0x00080800]: software wrote 0x6"
        );
        assert_eq!(read("plain").get("firmware_error"), None);
    }

    /// The summary carries the signature and what it was made of.
    #[test]
    fn the_summary_carries_the_signature_and_its_basis() {
        let dir = tempfile::tempdir().unwrap();
        let counts = Counts {
            size: 1,
            events: 1,
            lost: 0,
            archived: 1,
        };
        let g = Generation {
            signature: Some(Signature {
                id: "0123456789abcdef".into(),
                basis: vec!["reason: panic".into(), "message: x".into()],
            }),
            ..generation()
        };
        write_summary(dir.path(), "signed", &g, &counts, None).unwrap();
        let text = std::fs::read_to_string(dir.path().join("signed.json")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["signature"], "0123456789abcdef");
        assert_eq!(
            json["signature_basis"],
            serde_json::json!(["reason: panic", "message: x"])
        );
        write_summary(dir.path(), "plain", &generation(), &counts, None).unwrap();
        let text = std::fs::read_to_string(dir.path().join("plain.json")).unwrap();
        assert!(!text.contains("signature"), "{text}");
    }
}
