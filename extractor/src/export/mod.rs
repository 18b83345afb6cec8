//! `crashring export`: a fleet's bundles for the tools it already runs:
//! a Parquet dataset for analytics engines ([`parquet`]), and Sentry
//! envelopes for sites that run Sentry ([`sentry`]).
//!
//! Both read bundles alike, here: each is first checked as its recipient
//! would ([`crate::bundle::check`]: every file as MANIFEST.json says);
//! one that fails, or whose manifest lacks what a row needs, is named
//! and left out, and the others are exported. A second bundle of one
//! crash (the same top directory: an upload retried, a spool's copy) is
//! exported once. The manifest's regions become [`rows::Crash`]es, and
//! each region's `events.jsonl` is read as the archive streams past, a
//! line at a time ([`read_bundle`]): a line that is no event or loss is
//! counted and named, never guessed at.

pub mod parquet;
pub mod rows;
pub mod sentry;
pub mod table;

pub use parquet::to_parquet;
pub use sentry::to_sentry;

use crate::bundle::{self, Checked};
use flate2::read::GzDecoder;
use rayon::prelude::*;
use rows::{Crash, Event};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use table::PartError;

/// The longest `events.jsonl` line read; the writer's longest (an event
/// of a 64 KiB page as hex) is far below.
pub const MAX_LINE: usize = 1 << 20;

/// The first bad lines described; the rest are counted.
const BAD_LINES_NAMED: usize = 10;

/// Why nothing more could be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Part(#[from] PartError),
}

/// A bundle left out, and why.
#[derive(Clone, Debug)]
pub struct Refused {
    pub path: PathBuf,
    pub why: String,
}

/// A line of an `events.jsonl` that is not a row.
#[derive(Clone, Debug)]
pub struct BadLine {
    pub bundle: PathBuf,
    /// The file in the bundle, and the line's number in it (from 1).
    pub file: String,
    pub line: u64,
    pub why: String,
}

/// What an export did.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    pub bundles: usize,
    pub crashes: u64,
    pub events: u64,
    /// Every part written, in day order.
    pub parts: Vec<PathBuf>,
    pub refused: Vec<Refused>,
    /// Bundles of a crash another bundle in the batch already gave (an
    /// upload retried, a spool's copy, a raw and a redacted bundle):
    /// each with the one exported.
    pub duplicates: Vec<(PathBuf, PathBuf)>,
    /// Bundles made before bundles held `events.jsonl`: their crashes
    /// rows are exported, and they have no events rows.
    pub without_events: Vec<PathBuf>,
    pub bad_lines: u64,
    /// The first [`BAD_LINES_NAMED`] of them.
    pub first_bad_lines: Vec<BadLine>,
}

/// A bundle that checked out, with its rows.
struct Ready {
    path: PathBuf,
    /// The file that was checked: reading it again must find the same.
    identity: Identity,
    top: String,
    tool: String,
    crashes: Vec<Crash>,
}

/// Checks `path` and makes its crashes rows; the error says why it is
/// left out.
fn ready(path: &Path) -> Result<(Ready, String), String> {
    let (file, identity) = open_bundle(path).map_err(|e| format!("opening it: {e}"))?;
    let Checked {
        top,
        manifest,
        files,
        ..
    } = bundle::check(BufReader::new(file)).map_err(|e| format!("not intact: {e}"))?;
    if !is_top_name(&top) {
        return Err(format!(
            "its top directory `{}` is no name crashring gives a bundle (a file name of at most {MAX_TOP} bytes of letters, digits, `.`, `-` and `_`)",
            bundle::escaped(&top)
        ));
    }
    let (crashes, created) =
        rows::crashes(&manifest).map_err(|m| format!("MANIFEST.json lacks {m}"))?;
    events_files_checked(&crashes, &files)?;
    let tool = manifest["tool"]["version"]
        .as_str()
        .unwrap_or("unknown")
        .to_string();
    let day = crashes[0].day(created);
    Ok((
        Ready {
            path: path.to_path_buf(),
            identity,
            top,
            tool,
            crashes,
        },
        day,
    ))
}

/// The longest top directory a bundle of ours has: its kind, a host name
/// cut at 64 characters, the time and the boot id come to about 100.
const MAX_TOP: usize = 128;

/// Whether `top` is a top directory crashring could have written: it
/// names the bundle's rows and its Sentry envelope file, so it must make
/// a file name in any directory (a longer one failed the whole export).
fn is_top_name(top: &str) -> bool {
    !top.is_empty()
        && top.len() <= MAX_TOP
        && !top.starts_with('.')
        && top
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// Whether each region's events file is one of the bundle's checked
/// `files`, and no two regions name the same one: rows are read from
/// the files the manifest names, so one named but absent would read as
/// a region without events, silently, and one named twice would give
/// each region the other's events.
fn events_files_checked(crashes: &[Crash], files: &BTreeMap<String, u64>) -> Result<(), String> {
    let mut named = BTreeSet::new();
    for c in crashes {
        let Some(events) = &c.events_file else {
            continue;
        };
        let why = if !files.contains_key(events) {
            "is not in the bundle"
        } else if !named.insert(events) {
            "is another region's too"
        } else {
            continue;
        };
        return Err(format!(
            "MANIFEST.json: region {}'s events file {} {why}",
            c.region,
            bundle::escaped(events)
        ));
    }
    Ok(())
}

/// Which file a bundle was when it was checked, and its size and
/// modification time: a bundle is checked first and read for its rows
/// later (all of a batch is checked before any is exported), so the file
/// read the second time must be the one checked. Keeping each checked
/// file open would hold a descriptor per bundle of the batch; its inode
/// says as much of a file renamed over it or put in its place, its size
/// and modification time of one written to. Not the change time, which a
/// hard link, a chmod or an extended attribute moves too (a spool's own
/// housekeeping), nor the device, which a remount renumbers. This tells
/// a bundle replaced by accident (an upload finishing meanwhile), not one
/// rewritten on purpose between its second open and its last read: who
/// can write the spool can as well write a bundle that passes the check,
/// which proves a bundle intact, not who made it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    ino: u64,
    size: u64,
    /// Seconds and nanoseconds.
    mtime: (i64, i64),
}

/// Opens the bundle at `path` for reading, with what identifies it.
/// Anything but a regular file is refused before it is opened (opening
/// a device can act on it: a watchdog arms, a tape rewinds), and a FIFO
/// put in its place meanwhile is not waited on.
fn open_bundle(path: &Path) -> io::Result<(File, Identity)> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let not_a_file = || io::Error::other("not a regular file");
    let seen = std::fs::metadata(path)?;
    if !seen.is_file() {
        return Err(not_a_file());
    }
    let file = File::options()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(path)?;
    let m = file.metadata()?;
    if !m.is_file() || (m.dev(), m.ino()) != (seen.dev(), seen.ino()) {
        return Err(not_a_file());
    }
    // Reads wait as a regular file's do (FUSE hands the flag to its daemon).
    rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
    let identity = Identity {
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
    };
    Ok((file, identity))
}

impl Ready {
    /// The bundle's file again, if it is still the one checked.
    fn reopen(&self) -> io::Result<File> {
        let (file, identity) = open_bundle(&self.path)?;
        if identity != self.identity {
            return Err(io::Error::other("replaced or written to since its check"));
        }
        Ok(file)
    }
}

/// Checks `bundles` on every core: the ones to export, each with the
/// day of its crash, and what is left out; `done` is called for each
/// bundle left out.
fn gather(bundles: &[PathBuf], done: &(dyn Fn() + Sync)) -> (Vec<(Ready, String)>, Exported) {
    let checked: Vec<_> = bundles.par_iter().map(|p| (p, ready(p))).collect();
    let mut exported = Exported::default();
    let mut kept = Vec::new();
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for (path, result) in checked {
        match result {
            Err(why) => {
                exported.refused.push(Refused {
                    path: path.clone(),
                    why,
                });
                done();
            }
            Ok((r, _)) if seen.contains_key(&r.top) => {
                exported
                    .duplicates
                    .push((path.clone(), seen[&r.top].clone()));
                done();
            }
            Ok((r, day)) => {
                seen.insert(r.top.clone(), r.path.clone());
                if r.crashes.iter().any(|c| c.events_file.is_none()) {
                    exported.without_events.push(r.path.clone());
                }
                kept.push((r, day));
            }
        }
    }
    (kept, exported)
}

impl Exported {
    /// Adds what `other` did.
    fn add(&mut self, other: Exported) {
        self.bundles += other.bundles;
        self.crashes += other.crashes;
        self.events += other.events;
        self.parts.extend(other.parts);
        self.refused.extend(other.refused);
        self.duplicates.extend(other.duplicates);
        self.without_events.extend(other.without_events);
        self.bad_lines += other.bad_lines;
        self.first_bad_lines.extend(other.first_bad_lines);
        self.first_bad_lines.truncate(BAD_LINES_NAMED);
    }

    /// Notes that `b`'s archive stopped being readable after its check.
    fn changed(&mut self, b: &Ready, e: &io::Error) {
        self.refused.push(Refused {
            path: b.path.clone(),
            why: format!(
                "unreadable after its check (changed meanwhile?), what was read of it kept: {e}"
            ),
        });
    }
}

/// Why a bundle stopped being read.
enum Stop {
    /// Its archive: it changed since its check.
    Archive(io::Error),
    /// What its events were written to.
    Output(ExportError),
}

impl From<PartError> for Stop {
    fn from(e: PartError) -> Stop {
        Stop::Output(e.into())
    }
}

/// Reads bundle `b`'s archive once: each region's events go to `event`
/// (a bad line is counted in `exported` and skipped), and every other
/// file, by its path in the top directory, to `file`.
fn read_bundle(
    b: &Ready,
    exported: &mut Exported,
    mut event: impl FnMut(&Crash, &Event) -> Result<(), Stop>,
    mut file: impl FnMut(&str, &mut dyn Read) -> io::Result<()>,
) -> Result<(), Stop> {
    let archive = b.reopen().map_err(Stop::Archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(BufReader::new(archive)));
    for entry in tar.entries().map_err(Stop::Archive)? {
        let mut entry = entry.map_err(Stop::Archive)?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(rel) = path.strip_prefix(&format!("{}/", b.top)) else {
            continue;
        };
        let Some(crash) = b
            .crashes
            .iter()
            .find(|c| c.events_file.as_deref() == Some(rel))
        else {
            file(rel, &mut entry).map_err(Stop::Archive)?;
            continue;
        };
        let rel = rel.to_string();
        let mut lines = BufReader::with_capacity(1 << 16, entry);
        let mut buf = Vec::with_capacity(4096);
        for number in 1u64.. {
            buf.clear();
            let read = (&mut lines)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(Stop::Archive)?;
            if read == 0 {
                break;
            }
            let mut bad = |why: String| {
                exported.bad_lines += 1;
                if exported.first_bad_lines.len() < BAD_LINES_NAMED {
                    exported.first_bad_lines.push(BadLine {
                        bundle: b.path.clone(),
                        file: rel.clone(),
                        line: number,
                        why,
                    });
                }
            };
            if buf.last() != Some(&b'\n') && buf.len() > MAX_LINE {
                bad(format!("over {MAX_LINE} bytes"));
                skip_line(&mut lines).map_err(Stop::Archive)?;
                continue;
            }
            let text = match std::str::from_utf8(&buf) {
                Ok(t) => t.trim_end_matches('\n'),
                Err(e) => {
                    bad(format!("not UTF-8: {e}"));
                    continue;
                }
            };
            match Event::parse(text) {
                Ok(e) => event(crash, &e)?,
                Err(why) => bad(why),
            }
        }
    }
    Ok(())
}

/// Reads past the rest of an over-long line.
fn skip_line(r: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', chunk) {
            Some(at) => {
                r.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                r.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests;
