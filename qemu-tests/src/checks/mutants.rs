//! `cargo xtask mutants`: mutation testing. Not part of `cargo xtask test`:
//! on two cores it takes hours.
//!
//! Two parts. cargo-mutants mutates the format's reader and writer and the
//! extractor's dump containers (the scope is `.cargo/mutants.toml`); each
//! mutant is first tested by its own package's hermetic tests, and the
//! ones that survive are tried again against every hermetic test of the
//! workspace, so a mutant counts as caught if any of them fails while the
//! costly whole suite runs only for the few that need it. Then a short list
//! of hand-written mutations of the kernel's ring code, each compiled from
//! a mutated copy (build.rs takes `CRASHRING_RING_SOURCE`, so the working
//! tree is never edited), runs through its user-space tests.
//!
//! Prints, and writes to target/crashring/mutants/summary.txt, the kill
//! rate per file (caught / (caught + missed); unviable mutants and
//! timeouts are counted apart), every survivor, and the run time.

use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// The ring code the hand-written mutations apply to.
pub const C_SOURCE: &str = "kernel/crashring_ring.c";

/// One hand-written mutation: `original` must occur exactly once in
/// [`C_SOURCE`], so that the list fails loudly rather than rot when the
/// code changes.
pub struct CMutation {
    pub what: &'static str,
    pub original: &'static str,
    pub replacement: &'static str,
}

/// Mistakes the ring code's rules exist to prevent (FORMAT.md, sections
/// 10 and 12), one of each kind: the ordered steps of opening a page, the
/// close and its CRC, page sequence numbers, wrapping, room on a page,
/// refusing records, the tails, stopping.
pub const C_MUTATIONS: &[CMutation] = &[
    CMutation {
        what: "a drop after a close lands on the closed page (cr_add_dropped opens none)",
        original: "\tif (!s->open)\n\t\tcr_open_page(s, (s->cur + 1) % s->page_count, s->time);\n",
        replacement: "",
    },
    CMutation {
        what: "the close's CRC is taken over the header still flagged open",
        original: "\tcopy.flags = CRASHRING_PAGE_CLOSED;\n",
        replacement: "",
    },
    CMutation {
        what: "the close's CRC leaves out a page's last record word",
        original: "cr_data(s, s->cur), copy.commit);",
        replacement: "cr_data(s, s->cur), copy.commit & ~7U);",
    },
    CMutation {
        what: "a new page keeps the sequence number of the one before",
        original: "\ts->seq++;\n",
        replacement: "",
    },
    CMutation {
        what: "opening a page skips the first ordered step (flags <- resetting)",
        original: "\tWRITE_ONCE(h->flags, CRASHRING_PAGE_RESETTING);\n",
        replacement: "",
    },
    CMutation {
        what: "opening a page flags it open before it gets its seq",
        original: "\tWRITE_ONCE(h->seq, s->seq);\n\tcr_wmb();\n\tcr_persist(s, h, sizeof(*h));\n\
                   \tcr_stop_point();\n\tWRITE_ONCE(h->flags, CRASHRING_PAGE_OPEN);\n",
        replacement: "\tWRITE_ONCE(h->flags, CRASHRING_PAGE_OPEN);\n\tcr_wmb();\n\
                      \tcr_persist(s, h, sizeof(*h));\n\tcr_stop_point();\n\
                      \tWRITE_ONCE(h->seq, s->seq);\n",
    },
    CMutation {
        what: "the ring wraps one page early",
        original: "cr_open_page(s, (s->cur + 1) % s->page_count, ts);",
        replacement: "cr_open_page(s, (s->cur + 1) % (s->page_count - 1), ts);",
    },
    CMutation {
        what: "a record that exactly fills the page goes to the next one",
        original: "s->commit + prefix + body > cap",
        replacement: "s->commit + prefix + body >= cap",
    },
    CMutation {
        what: "the room check forgets the record's time prefix",
        original: "s->commit + prefix + body > cap",
        replacement: "s->commit + body > cap",
    },
    CMutation {
        what: "records of a reserved type id are written",
        original: "if (type < CRASHRING_FIRST_EVENT_TYPE || body > CRASHRING_MAX_RECORD_SIZE",
        replacement: "if (body > CRASHRING_MAX_RECORD_SIZE",
    },
    CMutation {
        what: "every tail update rewrites copy 0",
        original: "memcpy(&s->tails[seq & 1], &t, sizeof(t));",
        replacement: "memcpy(&s->tails[0], &t, sizeof(t));",
    },
    CMutation {
        what: "a nested write takes its CPU's first lane, busy or not",
        original: "return c->lane[depth < c->nlanes ? depth : c->nlanes - 1];",
        replacement: "return c->lane[depth < c->nlanes ? 0 : c->nlanes - 1];",
    },
    CMutation {
        what: "a page closed for good forgets the record its writer had in flight",
        original: " + (READ_ONCE(s->pending_end) > copy.commit);",
        replacement: ";",
    },
    CMutation {
        what: "the panic path finds every lane held by the writes it interrupted",
        original: "\tcrashring_close(s);\n\tcr_leave(&s->busy);\n",
        replacement: "\tcrashring_close(s);\n",
    },
    CMutation {
        what: "crashring_stop_all() leaves a page open for a writer that entered after the stop",
        original: "\t\tif (spins < CR_STOP_SPINS)\n",
        replacement: "\t\tif (spins < CR_STOP_SPINS && !cr_local_read(&streams[i].busy))\n",
    },
    CMutation {
        what: "a writer records after crashring_stop_all()",
        original:
            "\tif (READ_ONCE(s->stopped)) {\n\t\tcr_leave(&s->busy);\n\t\treturn NULL;\n\t}\n",
        replacement: "",
    },
];

/// Every mutation applies to `source` exactly once.
pub fn check_c_mutations(source: &str) -> Result<()> {
    for m in C_MUTATIONS {
        let n = source.matches(m.original).count();
        ensure!(
            n == 1,
            "C mutation `{}`: its snippet occurs {n} times in {C_SOURCE}, not once; \
             update it in qemu-tests/src/checks/mutants.rs",
            m.what
        );
        ensure!(
            m.original != m.replacement,
            "C mutation `{}` changes nothing",
            m.what
        );
    }
    Ok(())
}

/// `cargo xtask mutants`: `files` narrows the run (cargo-mutants globs;
/// [`C_SOURCE`] selects the C mutations), `extra` goes to cargo-mutants.
pub fn run(sh: &Shell, files: &[String], extra: &[String]) -> Result<()> {
    let started = Instant::now();
    let out = sh.current_dir().join("target/crashring/mutants");
    sh.create_dir(&out)?;
    let rust_globs: Vec<&String> = files.iter().filter(|f| f.as_str() != C_SOURCE).collect();
    let mut report = String::new();
    if files.is_empty() || !rust_globs.is_empty() {
        report += &rust_mutants(sh, &out, &rust_globs, extra)?;
    }
    if files.is_empty() || rust_globs.len() < files.len() {
        report += &c_mutants(sh, &out)?;
    }
    writeln!(
        report,
        "\nrun time: {}",
        minutes(started.elapsed().as_secs_f64())
    )?;
    print!("{report}");
    let summary = out.join("summary.txt");
    sh.write_file(&summary, &report)?;
    eprintln!("summary written to {}", summary.display());
    Ok(())
}

fn minutes(secs: f64) -> String {
    format!("{}m{:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
}

fn ensure_cargo_mutants(sh: &Shell) -> Result<()> {
    let have = cmd!(sh, "cargo mutants --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok();
    if !have {
        eprintln!("installing cargo-mutants: cargo install --locked cargo-mutants");
        cmd!(sh, "cargo install --locked cargo-mutants").run()?;
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Caught,
    Missed,
    Timeout,
    Unviable,
}

struct Mutant {
    file: String,
    name: String,
    outcome: Outcome,
}

/// The mutants of one cargo-mutants run, from its `outcomes.json`.
fn read_outcomes(dir: &Path) -> Result<Vec<Mutant>> {
    let path = dir.join("mutants.out/outcomes.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let all = json["outcomes"]
        .as_array()
        .with_context(|| format!("{}: no `outcomes` list", path.display()))?;
    let mut mutants = Vec::new();
    for o in all {
        // The baseline (the unmutated tree) is the one scenario without.
        let Some(m) = o["scenario"].get("Mutant") else {
            continue;
        };
        let (Some(name), Some(file)) = (m["name"].as_str(), m["file"].as_str()) else {
            bail!("{}: a mutant without a name or file", path.display());
        };
        let outcome = match o["summary"].as_str() {
            Some("CaughtMutant") => Outcome::Caught,
            Some("MissedMutant") => Outcome::Missed,
            Some("Timeout") => Outcome::Timeout,
            Some("Unviable") => Outcome::Unviable,
            other => bail!("{}: mutant {name}: outcome {other:?}", path.display()),
        };
        mutants.push(Mutant {
            file: file.to_string(),
            name: name.to_string(),
            outcome,
        });
    }
    Ok(mutants)
}

/// Runs cargo-mutants; its exit status says whether mutants survived (2)
/// or timed out (3), which the outcomes tell as well.
fn cargo_mutants(sh: &Shell, args: &[String]) -> Result<()> {
    eprintln!("== cargo mutants {}", args.join(" "));
    let status = Command::new("cargo")
        .arg("mutants")
        .args(args)
        .current_dir(sh.current_dir())
        .status()
        .context("running cargo mutants")?;
    match status.code() {
        Some(0 | 2 | 3) => Ok(()),
        _ => bail!("cargo mutants failed ({status}); its log is in the output directory"),
    }
}

/// `name` as a regular expression matching only itself.
fn regex_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn rust_mutants(sh: &Shell, out: &Path, globs: &[&String], extra: &[String]) -> Result<String> {
    ensure_cargo_mutants(sh)?;
    // cargo-mutants adds `--file` globs to the configuration's rather than
    // narrowing them, so a narrowed run leaves the file out and says what
    // else it sets.
    let mut files: Vec<String> = Vec::new();
    if !globs.is_empty() {
        files.extend([
            "--no-config".to_string(),
            "--test-workspace=false".to_string(),
        ]);
        files.extend(
            globs
                .iter()
                .flat_map(|g| ["--file".to_string(), g.to_string()]),
        );
    }
    let own = out.join("own-tests");
    let mut args = vec!["--output".to_string(), own.display().to_string()];
    args.extend(files.iter().cloned());
    args.extend(extra.iter().cloned());
    cargo_mutants(sh, &args)?;
    let mut mutants = read_outcomes(&own)?;

    let survivors: Vec<String> = mutants
        .iter()
        .filter(|m| m.outcome == Outcome::Missed)
        .map(|m| regex_escape(&m.name))
        .collect();
    let mut widened = Vec::new();
    if !survivors.is_empty() {
        // cargo-mutants' baseline tests only the mutated package, and sets
        // the time limit from it: the wider oracle is checked, and timed,
        // here.
        eprintln!("== the workspace's hermetic tests, unmutated");
        cmd!(sh, "cargo test --workspace --quiet --no-run").run()?;
        let started = Instant::now();
        cmd!(sh, "cargo test --workspace --quiet")
            .env("PROPTEST_DISABLE_FAILURE_PERSISTENCE", "1")
            .ignore_stdout()
            .run()
            .context("the workspace's tests fail unmutated")?;
        let limit = (started.elapsed().as_secs() * 5).max(120);
        let all = out.join("all-tests");
        let mut args: Vec<String> = files
            .into_iter()
            .filter(|a| a != "--test-workspace=false")
            .collect();
        args.extend([
            "--output".to_string(),
            all.display().to_string(),
            "--test-workspace=true".to_string(),
            format!("--timeout={limit}"),
            "--re".to_string(),
            format!("^({})$", survivors.join("|")),
        ]);
        cargo_mutants(sh, &args)?;
        for again in read_outcomes(&all)? {
            if matches!(again.outcome, Outcome::Caught | Outcome::Timeout) {
                if let Some(m) = mutants.iter_mut().find(|m| m.name == again.name) {
                    m.outcome = again.outcome;
                    widened.push(again.name);
                }
            }
        }
    }
    Ok(rust_report(&mutants, &widened))
}

fn rate(caught: usize, missed: usize) -> String {
    if caught + missed == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * caught as f64 / (caught + missed) as f64)
    }
}

fn rust_report(mutants: &[Mutant], widened: &[String]) -> String {
    // caught, missed, timeout, unviable
    let mut per_file: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    for m in mutants {
        let n = per_file.entry(&m.file).or_default();
        n[m.outcome as usize] += 1;
    }
    let mut r = String::from(
        "cargo-mutants (own package's tests, survivors retried against the workspace's)\n",
    );
    let _ = writeln!(
        r,
        "{:<44} {:>6} {:>6} {:>7} {:>8} {:>9}",
        "file", "caught", "missed", "timeout", "unviable", "kill rate"
    );
    let mut total = [0usize; 4];
    for (file, n) in &per_file {
        let _ = writeln!(
            r,
            "{file:<44} {:>6} {:>6} {:>7} {:>8} {:>9}",
            n[0],
            n[1],
            n[2],
            n[3],
            rate(n[0], n[1])
        );
        for (t, v) in total.iter_mut().zip(n) {
            *t += v;
        }
    }
    let _ = writeln!(
        r,
        "{:<44} {:>6} {:>6} {:>7} {:>8} {:>9}",
        "total",
        total[0],
        total[1],
        total[2],
        total[3],
        rate(total[0], total[1])
    );
    if !widened.is_empty() {
        let _ = writeln!(
            r,
            "\ncaught (or hung) only by another package's tests ({}):",
            widened.len()
        );
        for name in widened {
            let _ = writeln!(r, "  {name}");
        }
    }
    let _ = writeln!(r, "\nsurvivors ({}):", total[1]);
    for m in mutants.iter().filter(|m| m.outcome == Outcome::Missed) {
        let _ = writeln!(r, "  {}", m.name);
    }
    let timeouts: Vec<_> = mutants
        .iter()
        .filter(|m| m.outcome == Outcome::Timeout)
        .collect();
    if !timeouts.is_empty() {
        let _ = writeln!(r, "\ntimed out ({}):", timeouts.len());
        for m in timeouts {
            let _ = writeln!(r, "  {}", m.name);
        }
    }
    r
}

/// Builds the qemu-tests test binary with `ring` as the ring code; `None`
/// when it does not build (an unviable mutation).
fn build_c_tests(sh: &Shell, ring: &Path, log: &Path) -> Result<Option<PathBuf>> {
    let output = Command::new("cargo")
        .args([
            "test",
            "-p",
            "qemu-tests",
            "--bin",
            "qemu-tests",
            "--no-run",
            "--message-format=json",
        ])
        .env("CRASHRING_RING_SOURCE", ring)
        .current_dir(sh.current_dir())
        .stdin(Stdio::null())
        .output()
        .context("running cargo test --no-run")?;
    std::fs::write(log, &output.stderr)?;
    if !output.status.success() {
        return Ok(None);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" && msg["profile"]["test"] == true {
            if let Some(exe) = msg["executable"].as_str() {
                return Ok(Some(PathBuf::from(exe)));
            }
        }
    }
    bail!("cargo test --no-run named no qemu-tests test binary")
}

enum Run {
    Passed(Duration),
    Failed,
    TimedOut,
}

/// The ring code's user-space tests, killed after `limit`.
fn run_c_tests(exe: &Path, log: &Path, limit: Duration) -> Result<Run> {
    let started = Instant::now();
    let file = std::fs::File::create(log)?;
    let mut child = Command::new(exe)
        .args(["c_ring::", "c_model::"])
        // A mutant's failing case is no regression of the real code: keep
        // proptest from saving it into the source tree.
        .env("PROPTEST_DISABLE_FAILURE_PERSISTENCE", "1")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(if status.success() {
                Run::Passed(started.elapsed())
            } else {
                Run::Failed
            });
        }
        if started.elapsed() > limit {
            child.kill()?;
            child.wait()?;
            return Ok(Run::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn c_mutants(sh: &Shell, out: &Path) -> Result<String> {
    let source = sh.read_file(C_SOURCE)?;
    check_c_mutations(&source)?;
    let dir = out.join("c");
    sh.remove_path(&dir)?;
    sh.create_dir(&dir)?;
    // Built from here rather than from kernel/, so the tree is untouched
    // whatever stops this run.
    let ring = dir.join("crashring_ring.c");

    eprintln!("== C ring code, unmutated");
    sh.write_file(&ring, &source)?;
    let build_log = dir.join("baseline-build.log");
    let Some(exe) = build_c_tests(sh, &ring, &build_log)? else {
        bail!(
            "the unmutated ring code does not build: see {}",
            build_log.display()
        );
    };
    let test_log = dir.join("baseline-test.log");
    let baseline = match run_c_tests(&exe, &test_log, Duration::from_secs(600))? {
        Run::Passed(took) => took,
        _ => bail!(
            "the ring code's tests fail unmutated: see {}",
            test_log.display()
        ),
    };
    let limit = (baseline * 4).max(Duration::from_secs(60));

    let mut r = format!(
        "\nhand-written C mutations of {C_SOURCE} (c_ring and c_model tests, baseline {:.1} s)\n",
        baseline.as_secs_f64()
    );
    let (mut caught, mut missed) = (0, 0);
    for (i, m) in C_MUTATIONS.iter().enumerate() {
        eprintln!("== C mutation {}: {}", i + 1, m.what);
        sh.write_file(&ring, source.replacen(m.original, m.replacement, 1))?;
        let build_log = dir.join(format!("{}-build.log", i + 1));
        let (verdict, detail) = match build_c_tests(sh, &ring, &build_log)? {
            None => ("unviable", build_log),
            Some(exe) => {
                let log = dir.join(format!("{}-test.log", i + 1));
                match run_c_tests(&exe, &log, limit)? {
                    Run::Passed(_) => {
                        missed += 1;
                        ("MISSED", log)
                    }
                    Run::Failed => {
                        caught += 1;
                        ("caught", log)
                    }
                    Run::TimedOut => ("timed out", log),
                }
            }
        };
        eprintln!("   {verdict} (log: {})", detail.display());
        let _ = writeln!(r, "  {:>2}. {verdict:<9} {}", i + 1, m.what);
    }
    let _ = writeln!(
        r,
        "  caught {caught}, missed {missed} of {}: kill rate {}",
        C_MUTATIONS.len(),
        rate(caught, missed)
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written mutations still apply: each snippet is in the ring
    /// code exactly once.
    #[test]
    fn c_mutations_apply_to_the_current_source() {
        let source = std::fs::read_to_string(crate::env::project_root().join(C_SOURCE)).unwrap();
        check_c_mutations(&source).unwrap();
    }
}
