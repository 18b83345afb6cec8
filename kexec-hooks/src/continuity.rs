//! Whether the range kept what the last boot recorded. `crashring recover`
//! notes on every boot which generation the module records, and where; the
//! next boot's module must find that generation in the same range and
//! count on from it. If it starts again below it, or records elsewhere,
//! the range was overwritten (by firmware or a boot loader) or moved, and
//! whatever the last boot left there is gone without a trace in the
//! region itself: `recover` says so in the journal, and `status` too.

use crate::system::System;
use std::fmt;

/// The note, in the bundle directory (which only root can read).
pub const NOTE: &str = ".recording";
const SYSFS_REGION: &str = "/sys/kernel/crashring/region";

/// What the module records in one boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    pub boot_id: String,
    pub generation: u64,
    pub phys: String,
}

fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

impl Recording {
    /// From `key=value` words: the module's `region` line, or a note's.
    fn parse(line: &str) -> Option<Recording> {
        Some(Recording {
            boot_id: word(line, "boot_id")?.to_string(),
            generation: word(line, "generation")?.parse().ok()?,
            phys: word(line, "phys")?.to_string(),
        })
    }

    fn line(&self) -> String {
        format!(
            "boot_id={} generation={} phys={}",
            self.boot_id, self.generation, self.phys
        )
    }

    /// What the module records now, if it is loaded and recording.
    pub fn now(sys: &System) -> Option<Recording> {
        let text = sys.read(SYSFS_REGION).ok().flatten()?;
        Recording::parse(text.lines().next()?)
    }
}

/// This boot's recording against the last boot's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Continuity {
    /// No earlier boot was noted: the first with the module.
    First,
    /// The module counted on from the last boot's generation, in the
    /// same range.
    Kept { last: u64 },
    /// The module did not find the last boot's generation; it records at
    /// `now_phys`.
    Lost { last: Recording, now_phys: String },
}

impl fmt::Display for Continuity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Continuity::First => write!(f, "first boot recording here"),
            Continuity::Kept { last } => {
                write!(f, "kept: this boot counts on from generation {last}")
            }
            Continuity::Lost { last, now_phys } if *now_phys != last.phys => write!(
                f,
                "LOST: the range moved: the last boot recorded generation {} at {}, and this boot's range is at {now_phys} (reserve_mem= places it anew at every boot, and a boot made otherwise, through other firmware or another kernel, may place it elsewhere; or the configuration changed): whatever that boot recorded is not where this boot looks",
                last.generation, last.phys
            ),
            Continuity::Lost { last, .. } => write!(
                f,
                "LOST: the last boot recorded generation {} at {}, and this boot did not find it there (the range was overwritten, by firmware or the boot loader): whatever that boot recorded is gone",
                last.generation, last.phys
            ),
        }
    }
}

fn judge(last: Option<&Recording>, now: &Recording) -> Continuity {
    match last {
        None => Continuity::First,
        Some(l) if now.generation > l.generation && now.phys == l.phys => {
            Continuity::Kept { last: l.generation }
        }
        Some(l) => Continuity::Lost {
            last: l.clone(),
            now_phys: now.phys.clone(),
        },
    }
}

/// The note: this boot's recording, then the verdict on it.
struct Note {
    recording: Recording,
    verdict: String,
}

/// The note, `None` if there is none (or it is not one).
fn read_note(sys: &System, dir: &str) -> std::io::Result<Option<Note>> {
    let Some(text) = sys.read(&format!("{dir}/{NOTE}"))? else {
        return Ok(None);
    };
    let mut lines = text.lines();
    Ok(lines
        .next()
        .and_then(Recording::parse)
        .map(|recording| Note {
            recording,
            verdict: lines.next().unwrap_or_default().to_string(),
        }))
}

/// Judges this boot against the note the last boot left in `dir` and
/// replaces the note; once per boot (a second run finds its own note and
/// judges nothing). `None` when the module records nothing.
pub fn note(sys: &System, dir: &str) -> std::io::Result<Option<Continuity>> {
    let Some(now) = Recording::now(sys) else {
        return Ok(None);
    };
    let last = read_note(sys, dir)?;
    if last
        .as_ref()
        .is_some_and(|n| n.recording.boot_id == now.boot_id)
    {
        return Ok(None);
    }
    let verdict = judge(last.as_ref().map(|n| &n.recording), &now);
    sys.write(
        &format!("{dir}/{NOTE}"),
        &format!("{}\n{verdict}\n", now.line()),
    )?;
    Ok(Some(verdict))
}

/// For `status`: this boot's verdict if `recover` noted it, else judged
/// now against the last boot's note.
pub fn describe(sys: &System, dir: &str) -> Option<String> {
    let now = Recording::now(sys)?;
    Some(match read_note(sys, dir) {
        Ok(Some(n)) if n.recording.boot_id == now.boot_id => n.verdict,
        Ok(last) => format!(
            "{} (not yet noted by crashring recover)",
            judge(last.as_ref().map(|n| &n.recording), &now)
        ),
        Err(e) => format!("unknown: {dir}/{NOTE}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/var/lib/crashring";

    fn machine(region: &str) -> (tempfile::TempDir, System) {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write(SYSFS_REGION, region).unwrap();
        (dir, sys)
    }

    fn region(boot: &str, generation: u64, phys: &str) -> String {
        format!("source=region phys={phys} size=67108864 boot_id={boot} recording_slot=0 recording_phys=0x7de00000 generation={generation}\n")
    }

    #[test]
    fn each_boot_is_judged_against_the_last_once() {
        let (_d, sys) = machine(&region("aa", 1, "0x7be00000"));
        assert_eq!(note(&sys, DIR).unwrap(), Some(Continuity::First));
        // The same boot again: nothing new to judge.
        assert_eq!(note(&sys, DIR).unwrap(), None);
        assert_eq!(describe(&sys, DIR).unwrap(), "first boot recording here");
        sys.write(SYSFS_REGION, &region("bb", 2, "0x7be00000"))
            .unwrap();
        assert_eq!(note(&sys, DIR).unwrap(), Some(Continuity::Kept { last: 1 }));
        assert!(describe(&sys, DIR).unwrap().starts_with("kept"));
    }

    #[test]
    fn a_generation_that_starts_again_or_moves_is_reported_lost() {
        let (_d, sys) = machine(&region("aa", 5, "0x7be00000"));
        note(&sys, DIR).unwrap();
        // Found nothing: the module started again at 1.
        sys.write(SYSFS_REGION, &region("bb", 1, "0x7be00000"))
            .unwrap();
        assert!(describe(&sys, DIR)
            .unwrap()
            .starts_with("LOST: the last boot recorded generation 5 at 0x7be00000"));
        let judged = note(&sys, DIR).unwrap();
        assert!(matches!(judged, Some(Continuity::Lost { ref last, .. }) if last.generation == 5));
        assert!(describe(&sys, DIR).unwrap().starts_with("LOST"));
        // Counted on, but somewhere else: a range that moved.
        sys.write(SYSFS_REGION, &region("cc", 2, "0x5be00000"))
            .unwrap();
        let moved = note(&sys, DIR).unwrap().unwrap();
        assert!(matches!(moved, Continuity::Lost { .. }));
        assert!(
            moved
                .to_string()
                .starts_with("LOST: the range moved: the last boot recorded generation 1 at 0x7be00000, and this boot's range is at 0x5be00000"),
            "{moved}"
        );
        assert!(describe(&sys, DIR)
            .unwrap()
            .starts_with("LOST: the range moved"));
    }

    #[test]
    fn nothing_is_judged_without_a_recording_module() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        assert_eq!(note(&sys, DIR).unwrap(), None);
        assert_eq!(describe(&sys, DIR), None);
        assert!(sys.read(&format!("{DIR}/{NOTE}")).unwrap().is_none());
    }
}
