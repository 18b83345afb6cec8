//! Putting a bundle in the bundle directory, for a crash and for a report
//! alike: staged under a hidden name beside the others (retention and
//! `archived_as` skip dot files), written, checked as its recipient would
//! read it, then renamed into place, never over another (a bundle of its
//! name without a summary is its own placement cut short); its summary
//! file beside it, and the directory synced. A bundle in place is whole.

use super::archive::{io_at, Generation};
use super::RecoveryError;
use crate::bundle;
use kexec_hooks::retention;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The first characters of a bundle's name while it is staged. The
/// bundle's writer puts its own staging beside it, named after it (a dot
/// before: [`crate::output::files::NewFile`], [`bundle::archive`]).
pub(super) const STAGED: &str = ".recovering-";
/// Those of a summary's while it is written.
pub(super) const SUMMARY_STAGED: &str = ".summary-";

/// Where a bundle goes in the archive order, and whether it waits for
/// `OnBundle=`.
#[derive(Clone, Copy, Default)]
pub(super) struct Filing {
    /// Its number in the archive order: `None`, the next; one recovery
    /// run gives every generation it archives the number of its first.
    pub(super) archived: Option<u64>,
    /// Spooled for `OnBundle=` (crashring-upload.service) before its
    /// summary is written: a bundle with a summary is never bundled again,
    /// so one whose spooling a failed acknowledgement or a killed run cut
    /// off would never be uploaded. A spool that cannot be written is a
    /// warning: the crash is safe in place all the same, and failing
    /// would leave it unacknowledged, the module soon not recording.
    pub(super) spool: bool,
}

/// A bundle in place.
pub(super) struct Placed {
    /// Its name, without `.tar.gz`.
    pub(super) name: String,
    /// Its number in the archive order.
    pub(super) archived: u64,
    /// What went wrong once it was in place (its spooling).
    pub(super) warnings: Vec<String>,
    pub(super) path: PathBuf,
    pub(super) size: u64,
    pub(super) summary: bundle::Summary,
}

/// Writes a bundle with `write` (given the staging path) into `dir` under
/// the name `name` makes of its summary and its place in the archive
/// order, filed as `filing` says, with the summary file `g` and `request`
/// describe.
pub(super) fn place(
    dir: &Path,
    write: impl FnOnce(&Path) -> Result<bundle::Summary, RecoveryError>,
    name: impl FnOnce(&bundle::Summary, u64) -> String,
    g: &Generation,
    request: Option<&bundle::Request>,
    filing: Filing,
) -> Result<Placed, RecoveryError> {
    let staging = tempfile::Builder::new()
        .prefix(STAGED)
        .suffix(".tar.gz")
        .tempfile_in(dir)
        .map_err(io_at(dir))?
        .into_temp_path();
    let summary = write(&staging)?;
    let written = File::open(&staging).map_err(io_at(&staging))?;
    bundle::check(io::BufReader::new(written)).map_err(RecoveryError::Check)?;
    // Its place in the archive order retention goes by.
    let archived = match filing.archived {
        Some(n) => n,
        None => retention::next_archived(&retention::kept_in(dir, "").map_err(io_at(dir))?),
    };
    let name = name(&summary, archived);
    let path = dir.join(format!("{name}.tar.gz"));
    let size = std::fs::metadata(&staging).map_err(io_at(&staging))?.len();
    // A bundle of this name without its summary, of this generation, is
    // a placement cut short between the two renames (power lost, the run
    // killed), never taken as archived: replaced, rather than refused at
    // every boot after. Anything else there is refused.
    let summary_path = dir.join(format!("{name}.json"));
    let cut_short =
        !summary_path.try_exists().map_err(io_at(&summary_path))? && bundle_of(&path, g);
    let placed = match cut_short {
        true => staging.persist(&path),
        false => staging.persist_noclobber(&path),
    };
    placed.map_err(|e| {
        if e.error.kind() == io::ErrorKind::AlreadyExists {
            RecoveryError::Exists(path.clone())
        } else {
            RecoveryError::Io {
                path: path.clone(),
                source: e.error,
            }
        }
    })?;
    let mut warnings = Vec::new();
    if filing.spool {
        if let Err(e) = super::upload::spool(dir, &name) {
            warnings.push(format!("{name} could not be spooled for OnBundle=: {e}"));
        }
    }
    let counts = Counts {
        size,
        events: summary.events,
        lost: summary.lost,
        archived,
    };
    write_summary(dir, &name, g, &counts, request).map_err(io_at(dir))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))?;
    Ok(Placed {
        name,
        archived,
        warnings,
        path,
        size,
        summary,
    })
}

/// Whether `path` is a whole bundle of generation `g`, by its manifest.
fn bundle_of(path: &Path, g: &Generation) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let Ok(checked) = bundle::check(io::BufReader::new(file)) else {
        return false;
    };
    let regions = checked.manifest["regions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    regions
        .iter()
        .any(|r| r["boot_id"] == g.boot_id.as_str() && r["generation"] == g.generation)
}

/// What the summary says of the bundle besides the generation.
pub(super) struct Counts {
    pub(super) size: u64,
    pub(super) events: u64,
    pub(super) lost: u64,
    pub(super) archived: u64,
}

/// `NAME.json` beside the bundle, for collectors to index without opening
/// the archive; written under a temporary name and renamed.
/// A report asked for while the generation ran carries `request` (who
/// asked, why), which tells it from the generation's own bundle.
pub(super) fn write_summary(
    dir: &Path,
    name: &str,
    g: &Generation,
    c: &Counts,
    request: Option<&bundle::Request>,
) -> io::Result<()> {
    let Counts {
        size,
        events,
        lost,
        archived,
    } = c;
    let mut json = serde_json::json!({
        "summary_version": 1,
        "bundle": format!("{name}.tar.gz"),
        "archived": archived,
        "size": size,
        "host": g.host,
        "boot_id": g.boot_id,
        "generation": g.generation,
        "state": g.state,
        "reason": g.reason,
        "message": g.message,
        "events": events,
        "lost": lost,
    });
    for (key, value) in [
        ("hardware_error", &g.hardware_error),
        ("firmware_error", &g.firmware_error),
        ("reset_reason", &g.reset_reason),
    ] {
        if let (Some(v), Some(o)) = (value, json.as_object_mut()) {
            o.insert(key.into(), v.as_str().into());
        }
    }
    if let (Some(s), Some(o)) = (&g.signature, json.as_object_mut()) {
        o.insert("signature".into(), s.id.as_str().into());
        o.insert("signature_basis".into(), s.basis.clone().into());
    }
    if let (Some(r), Some(o)) = (request, json.as_object_mut()) {
        o.insert(
            "request".into(),
            serde_json::json!({ "uid": r.uid, "why": r.why }),
        );
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(SUMMARY_STAGED)
        .tempfile_in(dir)?;
    writeln!(tmp, "{json:#}")?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(format!("{name}.json")))
        .map_err(|e| e.error)?;
    Ok(())
}
