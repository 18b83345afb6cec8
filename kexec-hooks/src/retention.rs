//! Which bundles go once a new one is in place: reports asked for without
//! a crash before crashes, the oldest first, until the count, the space
//! used, the space left free and the age are within the limits. The new
//! bundle is never deleted to make room for itself; if it alone breaks a
//! limit, it stays and that is said.

use crate::config::Recover;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How a report's name starts (the bundle's top directory, `snapshot-…`;
/// a crash's is `crash-…` or `shutdown-…`): retention tells a report from
/// a crash by it, since the summary that also says so may be missing
/// (its write failed, or someone removed it).
pub const REPORT_PREFIX: &str = "snapshot-";

/// A bundle already on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub name: String,
    /// Its bytes, with its `.json` summary.
    pub size: u64,
    pub age: Duration,
    /// Its place in the order bundles were archived (the summary's
    /// `archived`), which no clock can reorder; `None` for a bundle from
    /// before summaries had it. The generations one recovery run archives
    /// share it: the module offers the newest first.
    pub archived: Option<u64>,
    /// The generation it holds (the summary's `generation`): of one run's
    /// bundles, the older generation goes first.
    pub generation: Option<u64>,
    /// A report asked for without a crash (named [`REPORT_PREFIX`]…): a
    /// newer report may replace it, and it never makes a crash go.
    pub report: bool,
}

/// The `archived` number the next bundle gets.
pub fn next_archived(old: &[Kept]) -> u64 {
    old.iter()
        .filter_map(|k| k.archived)
        .max()
        .map_or(1, |n| n + 1)
}

/// The file system holding the bundles, with the new bundle written.
#[derive(Clone, Copy, Debug)]
pub struct Fs {
    pub size: u64,
    pub free: u64,
}

/// What retention decided.
#[derive(Debug, PartialEq, Eq)]
pub struct Pruning {
    /// Names to delete, oldest first.
    pub delete: Vec<String>,
    /// Limits the new bundle breaks on its own, for the log.
    pub over: Vec<String>,
}

/// `old` is every earlier bundle, in any order; `new_size` the new one's
/// bytes.
pub fn prune(old: &[Kept], new_size: u64, fs: Fs, limits: &Recover) -> Pruning {
    prune_where(old, new_size, fs, limits, |_| true)
}

/// [`prune`] for a new report (asked for without a crash): it counts
/// every bundle, but makes room by deleting older reports only. A crash
/// is what the bundle directory is for; a report never pushes one out.
pub fn prune_for_report(old: &[Kept], new_size: u64, fs: Fs, limits: &Recover) -> Pruning {
    let mut p = prune_where(old, new_size, fs, limits, |k| k.report);
    let count = old.len() + 1 - p.delete.len();
    if let Some(m) = limits.max_bundles.filter(|&m| count > m) {
        p.over.push(format!(
            "MaxBundles ({m}): {count} bundles with the newest report, the others crashes, which a report never deletes"
        ));
    }
    p
}

fn prune_where(
    old: &[Kept],
    new_size: u64,
    fs: Fs,
    limits: &Recover,
    deletable: impl Fn(&Kept) -> bool,
) -> Pruning {
    let mut by_age: Vec<&Kept> = old.iter().collect();
    // Reports first: a crash is what the directory is for, and a box that
    // crashes again after a report keeps its crashes. Then oldest first:
    // in the order they were archived, which a wrong clock (an RTC that
    // reset, say) cannot change, one run's older generation before its
    // newer; bundles from before that order was kept go first, by age,
    // the name (which starts with the crash time) breaking ties.
    by_age.sort_by(|a, b| {
        b.report
            .cmp(&a.report)
            .then(a.archived.cmp(&b.archived))
            .then(a.generation.cmp(&b.generation))
            .then(b.age.cmp(&a.age))
            .then(a.name.cmp(&b.name))
    });
    let max_use = limits.max_use(fs.size);
    let keep_free = limits.keep_free(fs.size);
    let mut used: u64 = new_size + old.iter().map(|k| k.size).sum::<u64>();
    let mut free = fs.free;
    // When other files fill the disk, deleting every crash would not meet
    // KeepFree= either: then it deletes none of them.
    let keep_free_reachable = free + (used - new_size) >= keep_free;
    let mut count = old.len() + 1;
    let mut delete = Vec::new();
    for k in by_age {
        let too_old = limits.max_age.is_some_and(|a| k.age > a);
        let too_many = limits.max_bundles.is_some_and(|m| count > m);
        let too_full = free < keep_free && keep_free_reachable;
        // Not `break`: a young report ahead of an old crash must not keep
        // the crash from MaxAge=.
        if !(too_old || too_many || used > max_use || too_full) {
            continue;
        }
        if !deletable(k) {
            continue;
        }
        delete.push(k.name.clone());
        used -= k.size;
        free += k.size;
        count -= 1;
    }
    let mut over = Vec::new();
    if used > max_use {
        over.push(format!(
            "MaxUse ({max_use} bytes): the newest bundle alone takes {new_size}"
        ));
    }
    if free < keep_free && !keep_free_reachable {
        over.push(format!(
            "KeepFree ({keep_free} bytes): {free} bytes are free with the newest bundle, and deleting every older one would not free enough (other files fill the file system), so none was deleted for it"
        ));
    } else if free < keep_free {
        over.push(format!(
            "KeepFree ({keep_free} bytes): {free} bytes are free with the newest bundle"
        ));
    }
    Pruning { delete, over }
}

/// The bundles in `dir` (each `NAME.tar.gz`, with its `NAME.json`), but
/// `except`.
pub fn kept_in(dir: &Path, except: &str) -> io::Result<Vec<Kept>> {
    let now = SystemTime::now();
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".tar.gz") else {
            continue;
        };
        // A bundle being written (a dot file) is not kept yet.
        if name == except || name.starts_with('.') {
            continue;
        }
        let meta = entry.metadata()?;
        let summary = std::fs::read(dir.join(format!("{name}.json"))).unwrap_or_default();
        let summary_len = summary.len() as u64;
        let summary = serde_json::from_slice::<serde_json::Value>(&summary).ok();
        let field = |key: &str| summary.as_ref().and_then(|v| v[key].as_u64());
        out.push(Kept {
            name: name.to_string(),
            size: meta.len() + summary_len,
            age: meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default(),
            archived: field("archived"),
            generation: field("generation"),
            report: name.starts_with(REPORT_PREFIX),
        });
    }
    Ok(out)
}

/// Deletes bundle `name` and its summary.
pub fn delete(dir: &Path, name: &str) -> io::Result<()> {
    std::fs::remove_file(dir.join(format!("{name}.tar.gz")))?;
    match std::fs::remove_file(dir.join(format!("{name}.json"))) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The size and free space of the file system holding `dir` (free as an
/// unprivileged writer sees it: root's reserve does not count).
pub fn fs_of(dir: &Path) -> io::Result<Fs> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(Fs {
        size: st.f_blocks.saturating_mul(st.f_frsize),
        free: st.f_bavail.saturating_mul(st.f_frsize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Bytes;

    fn kept(name: &str, size: u64, days: u64) -> Kept {
        Kept {
            name: name.into(),
            size,
            age: Duration::from_secs(days * 86400),
            archived: None,
            generation: None,
            report: false,
        }
    }

    #[test]
    fn reports_go_before_crashes_and_a_report_never_deletes_a_crash() {
        let report = |name, days| Kept {
            report: true,
            ..kept(name, 10, days)
        };
        // Oldest first: a crash, a report, a crash, a report.
        let old = [
            kept("crash-a", 10, 4),
            report("report-b", 3),
            kept("crash-c", 10, 2),
            report("report-d", 1),
        ];
        let limits = Recover {
            max_bundles: Some(3),
            ..Recover::default()
        };
        let p = prune_for_report(&old, 10, BIG, &limits);
        assert_eq!(p.delete, ["report-b", "report-d"]);
        assert!(p.over.is_empty(), "{:?}", p.over);
        // A crash needs room: the reports go before any crash, even an
        // older one.
        assert_eq!(
            prune(&old, 10, BIG, &limits).delete,
            ["report-b", "report-d"]
        );
        let fewer = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        assert_eq!(
            prune(&old, 10, BIG, &fewer).delete,
            ["report-b", "report-d", "crash-a"]
        );
        // A young report ahead in that order keeps no old crash from its
        // age limit.
        let month = Recover {
            max_age: Some(Duration::from_secs(30 * 86400)),
            ..Recover::default()
        };
        let aged = [report("report-e", 1), kept("crash-f", 10, 40)];
        assert_eq!(prune(&aged, 10, BIG, &month).delete, ["crash-f"]);
        // Crashes alone fill the directory: the report stays, said.
        let crashes = [kept("crash-a", 10, 2), kept("crash-c", 10, 1)];
        let full = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        let p = prune_for_report(&crashes, 10, BIG, &full);
        assert!(p.delete.is_empty(), "{:?}", p.delete);
        assert!(
            p.over[0].starts_with("MaxBundles (2): 3 bundles"),
            "{:?}",
            p.over
        );
    }

    #[test]
    fn the_archive_order_beats_a_wrong_clock() {
        // "b" was archived after "a", but a clock set back made it look older.
        let old = [
            Kept {
                archived: Some(2),
                ..kept("b", 10, 30)
            },
            Kept {
                archived: Some(1),
                ..kept("a", 10, 1)
            },
        ];
        let limits = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        assert_eq!(prune(&old, 10, BIG, &limits).delete, ["a"]);
        assert_eq!(next_archived(&old), 3);
        assert_eq!(next_archived(&[]), 1);
    }

    #[test]
    fn of_one_runs_bundles_the_older_generation_goes_first() {
        // One run archived generation 8, then the older 7 the module also
        // kept: both numbered 4, and 8 named first in the directory.
        let run = |name: &str, generation| Kept {
            archived: Some(4),
            generation: Some(generation),
            ..kept(name, 10, 1)
        };
        let old = [run("crash-newer", 8), run("crash-older", 7)];
        let limits = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        assert_eq!(prune(&old, 10, BIG, &limits).delete, ["crash-older"]);
    }

    #[test]
    fn keep_free_deletes_no_crash_when_other_files_fill_the_disk() {
        // 1000 bytes, 150 to keep free, 20 free: the three old bundles'
        // 300 bytes would not get there.
        let old = [kept("a", 100, 3), kept("b", 100, 2), kept("c", 100, 1)];
        let fs = Fs {
            size: 1000,
            free: 20,
        };
        let limits = Recover {
            keep_free: Some(Bytes::Absolute(400)),
            ..Recover::default()
        };
        let p = prune(&old, 50, fs, &limits);
        assert!(p.delete.is_empty(), "{:?}", p.delete);
        assert!(p.over[0].contains("none was deleted"), "{:?}", p.over);
        // Reachable: as many as needed go.
        let enough = Recover {
            keep_free: Some(Bytes::Absolute(150)),
            ..Recover::default()
        };
        assert_eq!(prune(&old, 50, fs, &enough).delete, ["a", "b"]);
    }

    /// A report whose summary is missing (its write failed, or it was
    /// removed) is still a report: a new crash makes room by deleting it,
    /// not an older crash, and a new report may replace it.
    #[test]
    fn a_report_without_its_summary_is_no_crash() {
        let dir = tempfile::tempdir().unwrap();
        let days_ago = |days: u64| SystemTime::now() - Duration::from_secs(days * 86400);
        let bundle = |name: &str, summary: Option<&str>, modified| {
            let path = dir.path().join(format!("{name}.tar.gz"));
            std::fs::write(&path, b"x").unwrap();
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(modified)
                .unwrap();
            if let Some(text) = summary {
                std::fs::write(dir.path().join(format!("{name}.json")), text).unwrap();
            }
        };
        // A crash from before summaries had `archived`, which goes by its
        // age, older than the report; a crash archived after both.
        bundle("crash-kiosk-a", Some("{}"), days_ago(3));
        bundle("snapshot-kiosk-b-uid1000-2", None, days_ago(2));
        bundle("crash-kiosk-c", Some(r#"{"archived": 3}"#), days_ago(1));
        let old = kept_in(dir.path(), "").unwrap();
        let limits = Recover {
            max_bundles: Some(3),
            ..Recover::default()
        };
        assert_eq!(
            prune(&old, 10, BIG, &limits).delete,
            ["snapshot-kiosk-b-uid1000-2"]
        );
        let p = prune_for_report(&old, 10, BIG, &limits);
        assert_eq!(p.delete, ["snapshot-kiosk-b-uid1000-2"]);
        assert!(p.over.is_empty(), "{:?}", p.over);
    }

    const BIG: Fs = Fs {
        size: 1 << 40,
        free: 1 << 39,
    };

    #[test]
    fn the_count_removes_the_oldest_and_keeps_the_new() {
        let old = [kept("b", 10, 2), kept("a", 10, 3), kept("c", 10, 1)];
        let limits = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        let p = prune(&old, 10, BIG, &limits);
        assert_eq!(p.delete, ["a", "b"]);
        assert!(p.over.is_empty());
    }

    #[test]
    fn space_and_age_remove_only_as_many_as_needed() {
        let old = [kept("a", 100, 40), kept("b", 100, 20), kept("c", 100, 10)];
        let limits = Recover {
            max_use: Some(Bytes::Absolute(250)),
            max_age: Some(Duration::from_secs(30 * 86400)),
            ..Recover::default()
        };
        // 400 used: "a" is too old anyway, then 300 > 250 takes "b".
        assert_eq!(prune(&old, 100, BIG, &limits).delete, ["a", "b"]);
        let keep_free = Recover {
            keep_free: Some(Bytes::Absolute(150)),
            ..Recover::default()
        };
        let fs = Fs {
            size: 1000,
            free: 20,
        };
        assert_eq!(prune(&old, 100, fs, &keep_free).delete, ["a", "b"]);
    }

    #[test]
    fn the_new_bundle_is_never_deleted_for_itself() {
        let old = [kept("a", 100, 1)];
        let limits = Recover {
            max_use: Some(Bytes::Absolute(50)),
            ..Recover::default()
        };
        let p = prune(&old, 80, BIG, &limits);
        assert_eq!(p.delete, ["a"]);
        assert_eq!(p.over.len(), 1, "{:?}", p.over);
        assert!(p.over[0].starts_with("MaxUse (50 bytes)"));
    }
}
