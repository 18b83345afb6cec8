//! `crashring export --parquet`: a fleet's bundles as a Parquet dataset
//! that DuckDB, Spark, Trino, ClickHouse or BigQuery read as they are.
//!
//! ```text
//! DIR/crashes-v1/crash_date=YYYY-MM-DD/part-H.parquet   a row per region
//! DIR/events-v1/crash_date=YYYY-MM-DD/part-H.parquet    a row per event or loss
//! ```
//!
//! Each bundle is first checked as its recipient would ([`crate::bundle::check`]:
//! every file as MANIFEST.json says); one that fails, or whose manifest
//! lacks what a row needs, is named and left out, and the others are
//! exported. Its crashes rows come from the manifest's regions
//! ([`rows::crashes`]), its events rows from each region's
//! `events.jsonl`, read as the archive streams past a line at a time: a
//! line that is no event or loss is counted and named, never guessed at.
//!
//! Rows are filed by the UTC day of the crash (Hive partitioning, the
//! directory name is the column), and a day's part is named by the
//! bundles in it (`H`: 16 hex digits of a SHA-256 of their names), so a
//! collector appends by exporting each new batch of bundles into the
//! same `DIR`, and exporting one batch again replaces its parts instead
//! of doubling its rows. A part is renamed into place when complete
//! ([`table::Part`]): a reader never sees half of one. The `-v1` is the
//! schema's version (extractor/SCHEMAS.md); a change a reader of this one
//! would misread goes to `-v2` beside it.

pub mod rows;
pub mod table;

use crate::bundle::{self, Checked};
use flate2::read::GzDecoder;
use rayon::prelude::*;
use rows::{Crash, Event, CRASHES, EVENTS};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use table::{Part, PartError};

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
    top: String,
    tool: String,
    crashes: Vec<Crash>,
}

/// Checks `path` and makes its crashes rows; the error says why it is
/// left out.
fn ready(path: &Path) -> Result<(Ready, String), String> {
    let file = File::open(path).map_err(|e| format!("opening it: {e}"))?;
    let Checked { top, manifest, .. } =
        bundle::check(BufReader::new(file)).map_err(|e| format!("not intact: {e}"))?;
    let (crashes, created) =
        rows::crashes(&manifest).map_err(|m| format!("MANIFEST.json lacks {m}"))?;
    let tool = manifest["tool"]["version"]
        .as_str()
        .unwrap_or("unknown")
        .to_string();
    let day = crashes[0].day(created);
    Ok((
        Ready {
            path: path.to_path_buf(),
            top,
            tool,
            crashes,
        },
        day,
    ))
}

/// Exports `bundles` into the dataset `out` (made if missing), on every
/// core; `done` is called as each bundle's rows are written.
pub fn to_parquet(
    out: &Path,
    bundles: &[PathBuf],
    done: &(dyn Fn() + Sync),
) -> Result<Exported, ExportError> {
    let checked: Vec<_> = bundles.par_iter().map(|p| (p, ready(p))).collect();
    let mut exported = Exported::default();
    let mut days: BTreeMap<String, Vec<Ready>> = BTreeMap::new();
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
            // One crash's bundle uploaded twice (or bundled raw and
            // redacted) is one crash.
            Ok((r, _)) if seen.contains_key(&r.top) => {
                exported
                    .duplicates
                    .push((path.clone(), seen[&r.top].clone()));
                done();
            }
            Ok((r, day)) => {
                seen.insert(r.top.clone(), r.path.clone());
                days.entry(day).or_default().push(r);
            }
        }
    }
    let results: Vec<_> = days
        .par_iter()
        .map(|(day, bundles)| export_day(out, day, bundles, done))
        .collect();
    for r in results {
        let day = r?;
        exported.bundles += day.bundles;
        exported.crashes += day.crashes;
        exported.events += day.events;
        exported.parts.extend(day.parts);
        exported.refused.extend(day.refused);
        exported.without_events.extend(day.without_events);
        exported.bad_lines += day.bad_lines;
        exported.first_bad_lines.extend(day.first_bad_lines);
    }
    exported.first_bad_lines.truncate(BAD_LINES_NAMED);
    Ok(exported)
}

/// `table-v1/crash_date=DAY/part-H.parquet` under `out`, its directory
/// made.
fn part_path(out: &Path, table: &str, day: &str, name: &str) -> Result<PathBuf, ExportError> {
    let dir = out.join(table).join(format!("crash_date={day}"));
    std::fs::create_dir_all(&dir).map_err(|source| ExportError::Io {
        what: format!("creating {}", dir.display()),
        source,
    })?;
    Ok(dir.join(format!("part-{name}.parquet")))
}

/// Writes one day's parts.
fn export_day(
    out: &Path,
    day: &str,
    bundles: &[Ready],
    done: &(dyn Fn() + Sync),
) -> Result<Exported, ExportError> {
    let mut names: Vec<&str> = bundles.iter().map(|b| b.top.as_str()).collect();
    names.sort_unstable();
    let digest = Sha256::digest(names.join("\n").as_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let mut crashes = Part::create(&part_path(out, "crashes-v1", day, &name)?, &CRASHES)?;
    let mut events = Part::create(&part_path(out, "events-v1", day, &name)?, &EVENTS)?;
    let mut exported = Exported::default();
    for b in bundles {
        for c in &b.crashes {
            crashes.push(&c.cells(&b.top, &b.tool))?;
        }
        if b.crashes.iter().any(|c| c.events_file.is_none()) {
            exported.without_events.push(b.path.clone());
        }
        if let Err(e) = read_events(b, &mut events, &mut exported) {
            match e {
                Stop::Part(e) => return Err(e.into()),
                Stop::Archive(e) => exported.refused.push(Refused {
                    path: b.path.clone(),
                    why: format!(
                        "unreadable after its check (changed meanwhile?), its rows up to there kept: {e}"
                    ),
                }),
            }
        }
        exported.bundles += 1;
        done();
    }
    exported.crashes = crashes.rows();
    exported.events = events.rows();
    exported.parts = vec![crashes.finish()?, events.finish()?];
    Ok(exported)
}

/// Why a bundle's events stopped being read.
enum Stop {
    Archive(io::Error),
    Part(PartError),
}

/// Appends the events rows of every region of `b` to `events`; a bad
/// line is counted in `exported` and skipped.
fn read_events(b: &Ready, events: &mut Part, exported: &mut Exported) -> Result<(), Stop> {
    let file = File::open(&b.path).map_err(Stop::Archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    for entry in tar.entries().map_err(Stop::Archive)? {
        let entry = entry.map_err(Stop::Archive)?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(rel) = path.strip_prefix(&format!("{}/", b.top)) else {
            continue;
        };
        let Some(crash) = b
            .crashes
            .iter()
            .find(|c| c.events_file.as_deref() == Some(rel))
        else {
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
                Ok(event) => events
                    .push(&event.cells(&b.top, crash))
                    .map_err(Stop::Part)?,
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
