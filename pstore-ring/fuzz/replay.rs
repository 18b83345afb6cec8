//! How the `fuzz_regressions` tests (this crate's and the extractor's)
//! replay committed fuzz inputs: each under a time limit, and each named
//! finding checked for what it was about, so that an input which no
//! longer reaches its code (a seed image changed under a patch-mode
//! input, a checksum now rejects it) fails instead of passing unseen.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one input may take. Every committed input takes well under a
/// second in a debug build (the first of a target also builds its seed
/// dumps); the hangs the fuzzer finds run for minutes.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A committed finding (a file in `regressions/`) and what the target's
/// output must say about it: the diagnostic, loss or warning that shows
/// the input reached the code it was named for.
pub struct Finding {
    pub name: &'static str,
    pub says: &'static [&'static str],
}

/// Replays every file in `dir` through `run`, each under [`LIMIT`]. Files
/// named `seed-*` are the fuzzer's starting points and only must not
/// panic, unless `findings` lists them; every other file is a finding,
/// which must be in `findings`. Every file listed there must exist, and
/// its output must contain all it `says`.
pub fn replay<F>(dir: &Path, findings: &[Finding], run: F)
where
    F: Fn(&[u8]) -> String + Clone + Send + 'static,
{
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no inputs in {}", dir.display());
    for f in findings {
        assert!(
            names.iter().any(|n| *n == f.name),
            "{}: finding {} has no input",
            dir.display(),
            f.name
        );
    }
    for name in names {
        let path = dir.join(&name);
        let data = std::fs::read(&path).unwrap();
        eprintln!("replaying {}", path.display());
        let out = within_limit(&path, data, run.clone());
        let Some(finding) = findings.iter().find(|f| f.name == name) else {
            // A seed need not say anything; one that is listed must.
            if name.starts_with("seed-") {
                continue;
            }
            panic!(
                "{}: a finding without what it must say; add it to the list in tests/fuzz_regressions.rs",
                path.display()
            );
        };
        for want in finding.says {
            assert!(
                out.contains(want),
                "{} no longer reaches what it was about: {want:?} is not in what it gave:\n{out}",
                path.display()
            );
        }
    }
}

/// `run(data)` on a thread of its own, so a hang fails the test within
/// [`LIMIT`] rather than holding it for minutes. The thread of an input
/// that overran is left running: the failing test ends the process.
fn within_limit<F>(path: &Path, data: Vec<u8>, run: F) -> String
where
    F: Fn(&[u8]) -> String + Send + 'static,
{
    let (done, wait) = mpsc::channel();
    let started = Instant::now();
    let worker = std::thread::spawn(move || {
        let out = run(&data);
        let _ = done.send(());
        out
    });
    if wait.recv_timeout(LIMIT) == Err(mpsc::RecvTimeoutError::Timeout) {
        panic!(
            "{} still running after {:?} (limit {LIMIT:?}): it hangs",
            path.display(),
            started.elapsed()
        );
    }
    // The channel also ends, without a message, when `run` panics; join
    // passes that panic on.
    worker
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
