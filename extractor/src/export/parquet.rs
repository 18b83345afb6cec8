//! `crashring export --parquet DIR`: the bundles as a Parquet dataset
//! that DuckDB, Spark, Trino, ClickHouse or BigQuery read as it is.
//!
//! ```text
//! DIR/crashes-v1/crash_date=YYYY-MM-DD/part-H.parquet   a row per region
//! DIR/events-v1/crash_date=YYYY-MM-DD/part-H.parquet    a row per event or loss
//! ```
//!
//! Rows are filed by the UTC day of the crash (Hive partitioning, the
//! directory name is the column), and a day's part is named by the
//! bundles in it (`H`: 16 hex digits of a SHA-256 of their names), so a
//! collector appends by exporting each new batch of bundles into the
//! same `DIR`, and exporting one batch again replaces its parts instead
//! of doubling its rows. A part is renamed into place when complete
//! ([`super::table::Part`]): a reader never sees half of one. The `-v1`
//! is the schema's version (extractor/SCHEMAS.md); a change a reader of
//! this one would misread goes to `-v2` beside it.

use super::rows::{CRASHES, EVENTS};
use super::table::Part;
use super::{gather, read_bundle, ExportError, Exported, Ready, Stop};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Exports `bundles` into the dataset `out` (made if missing), on every
/// core; `done` is called as each bundle is exported or left out.
pub fn to_parquet(
    out: &Path,
    bundles: &[PathBuf],
    done: &(dyn Fn() + Sync),
) -> Result<Exported, ExportError> {
    let (kept, mut exported) = gather(bundles, done);
    let mut days: BTreeMap<String, Vec<Ready>> = BTreeMap::new();
    for (r, day) in kept {
        days.entry(day).or_default().push(r);
    }
    let results: Vec<_> = days
        .par_iter()
        .map(|(day, bundles)| export_day(out, day, bundles, done))
        .collect();
    for r in results {
        exported.add(r?);
    }
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
        let read = read_bundle(
            b,
            &mut exported,
            |crash, e| Ok(events.push(&e.cells(&b.top, crash))?),
            |_, _| Ok(()),
        );
        match read {
            Ok(()) => {}
            Err(Stop::Output(e)) => return Err(e),
            Err(Stop::Archive(e)) => exported.changed(b, &e),
        }
        exported.bundles += 1;
        done();
    }
    exported.crashes = crashes.rows();
    exported.events = events.rows();
    exported.parts = vec![crashes.finish()?, events.finish()?];
    Ok(exported)
}
