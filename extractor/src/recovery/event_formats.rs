//! A copy of each kernel release's ftrace event formats, kept beside the
//! bundles, so that a persistent ftrace buffer read from that kernel's
//! dump later (in a capture kernel, or by hand) has its events named: ids
//! other than ftrace's own are given out at boot and only the writing
//! kernel's `/sys/kernel/tracing/events` says what they are.
//!
//! Kept only on a box that has a persistent ftrace instance (one with
//! `last_boot_info`), once per release, the [`KEEP`] newest releases.

use crate::foreign::ftrace::event::{gather, Formats};
use crate::output::NewFile;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The directory under the bundle directory.
pub const DIR: &str = "ftrace-formats";
/// Releases kept: the running one and the few before it, whose dumps may
/// still come.
pub const KEEP: usize = 4;

/// What keeping did.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// A new copy of this many formats.
    Written { path: PathBuf, formats: usize },
    /// The release's copy was there already.
    There,
    /// No persistent ftrace instance on this box: nothing to keep.
    NoInstance,
}

/// The file of `release`'s formats under `bundles`, if `release` can be a
/// file name (it comes from a dump when reading).
pub fn path(bundles: &Path, release: &str) -> Option<PathBuf> {
    let safe = !release.is_empty()
        && !release.starts_with('.')
        && release.len() <= 64
        && release
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-~".contains(&b));
    safe.then(|| bundles.join(DIR).join(release))
}

/// Keeps a copy of the running kernel's formats (`tracing`: where tracefs
/// is) for `release` under `bundles`, unless there is one, and removes
/// the copies of all but the [`KEEP`] releases last kept.
pub fn keep(tracing: &Path, release: &str, bundles: &Path) -> io::Result<Kept> {
    let has_instance = std::fs::read_dir(tracing.join("instances"))
        .map(|list| {
            list.flatten()
                .any(|e| e.path().join("last_boot_info").exists())
        })
        .unwrap_or(false);
    if !has_instance {
        return Ok(Kept::NoInstance);
    }
    let Some(dest) = path(bundles, release) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{release:?} cannot name a file"),
        ));
    };
    if dest.exists() {
        return Ok(Kept::There);
    }
    let (text, formats) = gather(&tracing.join("events"))?;
    if formats == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no event format under {}", tracing.join("events").display()),
        ));
    }
    crate::output::create_dir(&bundles.join(DIR))?;
    let mut file = NewFile::create(&dest)?;
    file.write_all(text.as_bytes())?;
    file.persist()?;
    prune(&bundles.join(DIR))?;
    Ok(Kept::Written {
        path: dest,
        formats,
    })
}

/// Removes all but the [`KEEP`] newest copies in `dir`.
fn prune(dir: &Path) -> io::Result<()> {
    let mut copies: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    copies.sort();
    let old = copies.len().saturating_sub(KEEP);
    for (_, path) in &copies[..old] {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// `release`'s kept formats under `bundles`, if any were kept.
pub fn kept(bundles: &Path, release: &str) -> Option<Formats> {
    Formats::load(&path(bundles, release)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tracefs with a persistent instance and two formats.
    fn tracefs(root: &Path) -> PathBuf {
        let t = root.join("tracing");
        std::fs::create_dir_all(t.join("instances/boot")).unwrap();
        std::fs::write(t.join("instances/boot/last_boot_info"), "# Current\n").unwrap();
        for (system, name, id) in [("sched", "sched_switch", 316), ("ftrace", "print", 5)] {
            let dir = t.join("events").join(system).join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("format"),
                format!("name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\nprint fmt: \"\"\n"),
            )
            .unwrap();
        }
        // Not a format: skipped.
        std::fs::write(t.join("events/enable"), "0\n").unwrap();
        t
    }

    #[test]
    fn a_release_is_kept_once_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let (tracing, bundles) = (tracefs(tmp.path()), tmp.path().join("bundles"));
        let kept_at = bundles.join(DIR).join("6.12.0-test");
        assert_eq!(
            keep(&tracing, "6.12.0-test", &bundles).unwrap(),
            Kept::Written {
                path: kept_at.clone(),
                formats: 2
            }
        );
        assert_eq!(
            keep(&tracing, "6.12.0-test", &bundles).unwrap(),
            Kept::There
        );
        let formats = kept(&bundles, "6.12.0-test").unwrap();
        assert_eq!(formats.len(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept_at).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(kept(&bundles, "6.1.0-other").is_none());
    }

    #[test]
    fn nothing_is_kept_without_a_persistent_instance_and_old_releases_go() {
        let tmp = tempfile::tempdir().unwrap();
        let (tracing, bundles) = (tracefs(tmp.path()), tmp.path().join("bundles"));
        std::fs::remove_file(tracing.join("instances/boot/last_boot_info")).unwrap();
        assert_eq!(
            keep(&tracing, "6.12.0", &bundles).unwrap(),
            Kept::NoInstance
        );
        std::fs::write(tracing.join("instances/boot/last_boot_info"), "").unwrap();
        for i in 0..KEEP + 2 {
            keep(&tracing, &format!("6.12.{i}"), &bundles).unwrap();
            // Distinct modification times, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(i as u64);
            let f = std::fs::File::options()
                .write(true)
                .open(bundles.join(DIR).join(format!("6.12.{i}")))
                .unwrap();
            f.set_modified(t).unwrap();
        }
        keep(&tracing, "7.0.0", &bundles).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(bundles.join(DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["6.12.3", "6.12.4", "6.12.5", "7.0.0"]);
    }

    #[test]
    fn a_release_from_a_dump_never_names_a_path_outside() {
        let b = Path::new("/b");
        assert_eq!(
            path(b, "6.12.117+deb12-amd64"),
            Some(b.join(DIR).join("6.12.117+deb12-amd64"))
        );
        for hostile in ["../../etc/passwd", "..", "", ".hidden", "a/b", "x\n"] {
            assert_eq!(path(b, hostile), None, "{hostile:?}");
        }
    }
}
