//! The checks that boot nothing, run beside the QEMU scenarios rather
//! than before them. TCG runs a guest on one host thread: on a two-core
//! machine the other core would idle through the scenarios while these
//! waited their turn ahead of them. They run niced, so that the guest's
//! thread and the scenarios' own builds come first (release builds: cargo
//! locks each profile's directory on its own, and these build the debug
//! profile), with their output in a log of their own, shown when one
//! fails.

use anyhow::{bail, ensure, Context, Result};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One check: what it checks, and the command line (run in the
/// repository) whose exit status says so.
pub struct Check {
    pub what: String,
    pub argv: Vec<String>,
    pub env: Vec<(&'static str, &'static str)>,
}

/// How often the thread looks at its running command: often enough that
/// a failure stops the scenarios within a scenario, rarely enough to cost
/// nothing.
const POLL: Duration = Duration::from_millis(200);

/// The lines of the log shown with a failure.
const TAIL_LINES: usize = 80;

/// How long each check took, in the order they ran.
pub type Took = Vec<(String, Duration)>;

/// The checks running in order on a thread of their own.
pub struct Beside {
    thread: Option<JoinHandle<Result<Took>>>,
    failed: Arc<AtomicBool>,
    /// Set when the run is dropped: the thread stops its check.
    stop: Arc<AtomicBool>,
    running: Arc<Mutex<Option<Child>>>,
    log: PathBuf,
}

impl Beside {
    /// Starts `checks` in `repo`, one after another, each at a lower
    /// priority, writing everything they print to `log`.
    pub fn start(repo: &Path, log: PathBuf, checks: Vec<Check>) -> Result<Beside> {
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let (failed, stop) = (Arc::new(AtomicBool::new(false)), Arc::default());
        let running = Arc::new(Mutex::new(None));
        let repo = repo.to_path_buf();
        let (flag, halt, slot) = (failed.clone(), Arc::clone(&stop), running.clone());
        let thread = std::thread::spawn(move || {
            let outcome = run_all(&repo, &file, &checks, &slot, &halt);
            flag.store(outcome.is_err(), Ordering::SeqCst);
            outcome
        });
        Ok(Beside {
            thread: Some(thread),
            failed,
            stop,
            running,
            log,
        })
    }

    /// An error as soon as a check has failed, for the scenarios to stop
    /// at rather than run on to a result already lost.
    pub fn poll(&mut self) -> Result<()> {
        if self.failed.load(Ordering::SeqCst) && self.thread.is_some() {
            self.finish()?;
        }
        ensure!(
            !self.failed.load(Ordering::SeqCst),
            "a check beside the scenarios failed; its log is {}",
            self.log.display()
        );
        Ok(())
    }

    /// Waits for the checks; how long each took, or the error of the one
    /// that failed with the end of the log.
    pub fn finish(&mut self) -> Result<Took> {
        let thread = self
            .thread
            .take()
            .context("the checks were finished before")?;
        let outcome = thread
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the thread running them panicked")));
        outcome.with_context(|| {
            format!(
                "a check beside the scenarios failed; the end of its log {}:\n{}",
                self.log.display(),
                crate::env::qemu::tail(&self.log, TAIL_LINES)
            )
        })
    }
}

impl Drop for Beside {
    /// A scenario that fails ends the run: the check then running is
    /// stopped with it, not left behind.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let mut slot = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(child) = slot.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn run_all(
    repo: &Path,
    log: &File,
    checks: &[Check],
    running: &Mutex<Option<Child>>,
    stop: &AtomicBool,
) -> Result<Took> {
    let mut took = Vec::new();
    for check in checks {
        ensure!(
            !stop.load(Ordering::SeqCst),
            "stopped before {}",
            check.what
        );
        use std::io::Write;
        writeln!(&*log, "\n== {}: {}", check.what, check.argv.join(" "))?;
        let started = Instant::now();
        let child = Command::new("nice")
            .arg(format!("-n{}", crate::env::NICE_BESIDE))
            .args(&check.argv)
            .envs(check.env.iter().copied())
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .spawn()
            .with_context(|| format!("starting {}", check.argv.join(" ")))?;
        *running.lock().unwrap_or_else(PoisonError::into_inner) = Some(child);
        let status = loop {
            let mut slot = running.lock().unwrap_or_else(PoisonError::into_inner);
            let child = slot.as_mut().context("the running check went missing")?;
            if stop.load(Ordering::SeqCst) {
                let _ = child.kill();
            }
            if let Some(status) = child.try_wait()? {
                *slot = None;
                break status;
            }
            drop(slot);
            std::thread::sleep(POLL);
        };
        if !status.success() {
            bail!("{} failed ({status})", check.what);
        }
        took.push((check.what.clone(), started.elapsed()));
    }
    Ok(took)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(what: &str, script: &str) -> Check {
        Check {
            what: what.into(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![],
        }
    }

    #[test]
    fn checks_run_in_order_and_a_failure_names_its_check_and_shows_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut beside = Beside::start(
            dir.path(),
            log.clone(),
            vec![
                check("first", "echo one > order"),
                check("second", "echo two >> order; echo the reason; exit 3"),
                check("third", "echo three >> order"),
            ],
        )
        .unwrap();
        let err = format!("{:#}", beside.finish().unwrap_err());
        assert!(err.contains("second failed"), "{err}");
        assert!(err.contains("the reason"), "{err}");
        let order = std::fs::read_to_string(dir.path().join("order")).unwrap();
        assert_eq!(order, "one\ntwo\n");
        assert!(beside.poll().is_err(), "a failure stays a failure");
    }

    #[test]
    fn passing_checks_say_how_long_each_took() {
        let dir = tempfile::tempdir().unwrap();
        let mut beside = Beside::start(
            dir.path(),
            dir.path().join("log"),
            vec![check("a", "true"), check("b", "exit 0")],
        )
        .unwrap();
        let took = beside.finish().unwrap();
        assert_eq!(
            took.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(beside.poll().is_ok());
    }

    #[test]
    fn a_dropped_run_stops_the_check_it_was_running() {
        let dir = tempfile::tempdir().unwrap();
        let beside = Beside::start(
            dir.path(),
            dir.path().join("log"),
            vec![
                check("sleeper", "sleep 2 && echo late > late"),
                check("after", "echo ran > after"),
            ],
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        drop(beside);
        std::thread::sleep(Duration::from_secs(3));
        assert!(!dir.path().join("late").exists(), "the check ran on");
        assert!(!dir.path().join("after").exists(), "the next check ran");
    }
}
