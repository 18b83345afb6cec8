//! Handing bundles to the site's `OnBundle=` command, apart from
//! recovery: recovery runs before the network is up (and in a kdump
//! capture boot, with none at all), so it only spools each new bundle;
//! `crashring upload` (`crashring-upload.service`, after
//! `network-online.target`, retried on failure) runs the command for each,
//! with a timeout, and forgets a bundle only once the command succeeded.
//! Nothing is skipped: a failed upload stays spooled for the next try.

use super::RecoveryError;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The spool, inside the bundle directory: one empty file per bundle
/// waiting to be uploaded, named after it.
pub const SPOOL: &str = "upload";

/// How long one run of the command may take before it is killed and the
/// bundle left for the next try.
pub const TIMEOUT: Duration = Duration::from_secs(300);

fn spool_dir(dir: &Path) -> PathBuf {
    dir.join(SPOOL)
}

/// Spools bundle `name` (`NAME.tar.gz` in `dir`) for upload.
pub fn spool(dir: &Path, name: &str) -> Result<(), RecoveryError> {
    let spool = spool_dir(dir);
    let io_err = |source| RecoveryError::Io {
        path: spool.clone(),
        source,
    };
    super::create_private_dir(&spool)?;
    std::fs::write(spool.join(name), b"").map_err(io_err)?;
    std::fs::File::open(&spool)
        .and_then(|d| d.sync_all())
        .map_err(io_err)
}

/// What became of one spooled bundle.
#[derive(Debug, PartialEq, Eq)]
pub enum Upload {
    Done(String),
    /// Left spooled: the command failed or ran out of time.
    Failed {
        name: String,
        why: String,
    },
    /// Retention deleted the bundle before it was uploaded.
    Gone(String),
}

/// Runs `command` (`sh -c 'COMMAND "$1"'`, the bundle's path as `$1`) for
/// every spooled bundle, oldest first, each within `timeout`. Two runs at
/// once (the service and one by hand) take turns on the spool's lock, so
/// that the command never runs twice for a bundle: the second waits,
/// then finds what the first left. The spool, not the bundle directory,
/// is locked, since recovery must not wait on a slow upload.
pub fn upload_all(dir: &Path, command: &str, timeout: Duration) -> io::Result<Vec<Upload>> {
    let spool = spool_dir(dir);
    let lock = match std::fs::File::open(&spool) {
        Ok(lock) => lock,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    lock.lock()?;
    let mut names: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(&spool)?
        .flatten()
        .filter_map(|e| {
            let when = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((when, e.file_name().to_string_lossy().into_owned()))
        })
        .collect();
    names.sort();
    let mut out = Vec::new();
    for (_, name) in names {
        let bundle = dir.join(format!("{name}.tar.gz"));
        if !bundle.exists() {
            forget(&spool, &name)?;
            out.push(Upload::Gone(name));
            continue;
        }
        match run_with_timeout(command, &bundle, timeout) {
            Ok(()) => {
                forget(&spool, &name)?;
                out.push(Upload::Done(name));
            }
            Err(why) => out.push(Upload::Failed { name, why }),
        }
    }
    Ok(out)
}

/// Takes bundle `name` off the spool. Already gone is done: a run that
/// does not take the lock (an older binary's during an upgrade) forgot
/// it first, and failing here would lose what this run has to journal.
fn forget(spool: &Path, name: &str) -> io::Result<()> {
    match std::fs::remove_file(spool.join(name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Runs the command for `bundle`; kills it (its process group) after
/// `timeout`.
fn run_with_timeout(command: &str, bundle: &Path, timeout: Duration) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{command} \"$1\""))
        .arg("crashring-on-bundle")
        .arg(bundle)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not run: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(format!("exited {s}")),
            Ok(None) if start.elapsed() >= timeout => {
                // The whole group: a shell's children (curl, say) too.
                let group = rustix::process::Pid::from_child(&child);
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                let _ = child.wait();
                return Err(format!("ran past {} s and was killed", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for it: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(dir: &Path, name: &str) {
        std::fs::write(dir.join(format!("{name}.tar.gz")), name).unwrap();
        spool(dir, name).unwrap();
    }

    fn spooled(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join(SPOOL))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_upload_is_forgotten_only_once_it_succeeded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let sent = dir.join("sent");
        std::fs::create_dir(&sent).unwrap();
        bundle(dir, "a");
        bundle(dir, "b");
        // The site's command fails for "a" and copies anything else.
        let cmd = format!(
            "f() {{ case \"$1\" in *a.tar.gz) exit 3;; esac; cp \"$1\" {}; }}; f",
            sent.display()
        );
        let done = upload_all(dir, &cmd, TIMEOUT).unwrap();
        assert!(done.contains(&Upload::Done("b".into())), "{done:?}");
        assert!(
            done.iter()
                .any(|u| matches!(u, Upload::Failed { name, .. } if name == "a")),
            "{done:?}"
        );
        assert_eq!(spooled(dir), ["a"]);
        assert!(sent.join("b.tar.gz").exists());
        // Retention took "a" meanwhile: forgotten, said.
        std::fs::remove_file(dir.join("a.tar.gz")).unwrap();
        assert_eq!(
            upload_all(dir, "true", TIMEOUT).unwrap(),
            [Upload::Gone("a".into())]
        );
        assert!(spooled(dir).is_empty());
    }

    /// The spool entry gone by the time the command succeeded (another
    /// run forgot it): done, and the rest still uploaded and said.
    #[test]
    fn a_bundle_another_run_forgot_is_done() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        bundle(dir, "a");
        bundle(dir, "b");
        let cmd = format!("f() {{ rm -f {}/a; }}; f", dir.join(SPOOL).display());
        let done = upload_all(dir, &cmd, TIMEOUT).unwrap();
        assert_eq!(done, [Upload::Done("a".into()), Upload::Done("b".into())]);
        assert!(spooled(dir).is_empty());
    }

    /// Two runs at once run the command once per bundle.
    #[test]
    fn overlapping_uploads_take_turns() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        bundle(&dir, "a");
        bundle(&dir, "b");
        let log = dir.join("log");
        let cmd = format!("f() {{ echo \"$1\" >> {}; sleep 0.3; }}; f", log.display());
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let (dir, cmd) = (dir.clone(), cmd.clone());
                std::thread::spawn(move || upload_all(&dir, &cmd, TIMEOUT).unwrap())
            })
            .collect();
        let mut done: Vec<Upload> = runs.into_iter().flat_map(|r| r.join().unwrap()).collect();
        done.sort_by_key(|u| format!("{u:?}"));
        assert_eq!(done, [Upload::Done("a".into()), Upload::Done("b".into())]);
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
    }

    #[test]
    fn a_hanging_upload_is_killed_and_stays_spooled() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        bundle(dir, "c");
        let start = Instant::now();
        let done = upload_all(dir, "sleep 30; true", Duration::from_millis(300)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(
            matches!(&done[..], [Upload::Failed { name, why }] if name == "c" && why.contains("killed")),
            "{done:?}"
        );
        assert_eq!(spooled(dir), ["c"]);
    }
}
