//! `crashring recover`: what `crashring-recover.service` runs on every
//! boot. A previous generation the module kept is bundled into the bundle
//! directory, checked as `check-bundle` does, put in place with a `.json`
//! summary beside it, and only then acknowledged; any failure before that
//! leaves it in the region for the next run. Retention then removes the
//! oldest bundles, a structured journal message says what happened, and
//! the site's `OnBundle=` command gets the new bundle.

use super::{bundle, report_damage, InputArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use extractor::bundle::redact::Rules;
use kexec_hooks::config::{self, Clean};
use kexec_hooks::continuity::{self, Continuity};
use kexec_hooks::journal;
use kexec_hooks::retention;
use kexec_hooks::status::BUNDLE_DIR;
use kexec_hooks::system::System;
use pstore_ring::layout::STATE_CLEAN;
use pstore_ring::read::reason_name;
use std::io::Write;
use std::path::{Path, PathBuf};

const SYSFS: &str = "/sys/kernel/crashring";

#[derive(Args)]
pub struct RecoverArgs {
    /// Where bundles and their summaries go (created 0700).
    #[arg(long, value_name = "DIR", default_value = BUNDLE_DIR)]
    dir: PathBuf,
    /// The system tree: the module's sysfs, the configuration, the bundle
    /// directory and the journal's socket are looked up under it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// In a kdump capture kernel (crashring-capture.service): bundle the
    /// crashed kernel's generation from `previous` (the module loaded
    /// there offers a memmap= range) or else from /proc/vmcore, and leave
    /// it unacknowledged: the next boot finds the summary and only
    /// acknowledges it.
    #[arg(long)]
    capture: bool,
}

/// The previous generation, as the journal and the summary name it.
struct Generation {
    host: String,
    boot_id: String,
    generation: u64,
    state: String,
    clean: bool,
    reason: String,
    message: String,
}

enum Outcome {
    Bundled {
        path: PathBuf,
        events: u64,
        lost: u64,
        deleted: Vec<String>,
    },
    AlreadyArchived(String),
    Discarded,
    Kept,
}

pub fn run(args: RecoverArgs) -> Result<u8> {
    let sys = System::new(&args.root);
    if !args.capture {
        note_continuity(&sys, &args.dir.to_string_lossy());
    }
    let summary = sys
        .read(&format!("{SYSFS}/previous_summary"))
        .context("reading the module's previous_summary")?;
    let waiting = summary.as_deref().is_some_and(|s| !s.starts_with("none"));
    let source = if waiting {
        Source::Previous
    } else if args.capture && sys.path(VMCORE).exists() {
        Source::Vmcore
    } else {
        eprintln!(
            "crashring: {}",
            match summary {
                None => "the module is not loaded: nothing to recover",
                Some(_) => "no previous generation waits to be archived",
            }
        );
        return Ok(0);
    };
    let socket = sys.path(journal::SOCKET);
    let dir = sys.path(&args.dir.to_string_lossy());
    match archive(&sys, &dir, source, !args.capture) {
        Ok((g, outcome)) => {
            say_done(&socket, &g, &outcome);
            if args.capture {
                eprintln!("crashring: capture kernel: the generation stays in the region; the next boot finds its summary and acknowledges it");
            }
            if let (Outcome::Bundled { path, .. }, Ok((cfg, _))) = (&outcome, config::load(&sys)) {
                if let Some(cmd) = &cfg.on_bundle {
                    run_hook(cmd, path);
                }
            }
            Ok(0)
        }
        Err(e) => {
            let message = format!(
                "crashring: the previous generation was NOT archived and stays in the region for the next run: {e:#}"
            );
            journal::send(
                &socket,
                &[
                    ("MESSAGE", &message),
                    ("MESSAGE_ID", journal::FAILED),
                    ("PRIORITY", "3"),
                    ("SYSLOG_IDENTIFIER", "crashring"),
                ],
            );
            Err(e.context("the previous generation stays in the region, unacknowledged"))
        }
    }
}

/// Judges whether the range kept the last boot's generation (once a boot),
/// and says so in the journal when it did not; a note that cannot be
/// written is a warning, not a failed recovery.
fn note_continuity(sys: &System, dir: &str) {
    if let Err(e) = create_private_dir(&sys.path(dir)) {
        eprintln!("crashring: {e:#}");
        return;
    }
    match continuity::note(sys, dir) {
        Ok(Some(lost @ Continuity::Lost { .. })) => {
            let message = format!("crashring: {lost}");
            eprintln!("{message}");
            journal::send(
                &sys.path(journal::SOCKET),
                &[
                    ("MESSAGE", &message),
                    ("MESSAGE_ID", journal::LOST),
                    ("PRIORITY", "4"),
                    ("SYSLOG_IDENTIFIER", "crashring"),
                ],
            );
        }
        Ok(_) => {}
        Err(e) => eprintln!("crashring: could not note this boot's generation in {dir}: {e}"),
    }
}

/// Where the generation is read from.
#[derive(Clone, Copy)]
enum Source {
    /// The module's `previous`.
    Previous,
    /// A capture kernel's `/proc/vmcore`, scanned for the region.
    Vmcore,
}

const VMCORE: &str = "/proc/vmcore";

/// Archives the generation; `acknowledge` is false in a capture kernel,
/// which must leave the region as it is.
fn archive(
    sys: &System,
    dir: &Path,
    source: Source,
    acknowledge: bool,
) -> Result<(Generation, Outcome)> {
    let (cfg, warnings) = config::load(sys)?;
    for w in warnings {
        eprintln!("crashring: {w}");
    }
    let ack = || if acknowledge { ack(sys) } else { Ok(()) };
    let input = InputArgs {
        input: sys.path(&match source {
            Source::Previous => format!("{SYSFS}/previous"),
            Source::Vmcore => VMCORE.to_string(),
        }),
        phys: None,
        trust_header: false,
    };
    let loaded = input.load()?;
    let recovered = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    let first = recovered
        .first()
        .context("the previous generation holds no region")?;
    let h = &first.region.header;
    let state = first.region.state.as_ref().ok();
    let g = Generation {
        host: h.hostname.clone(),
        boot_id: h.boot_id.iter().map(|b| format!("{b:02x}")).collect(),
        generation: h.generation,
        state: state.map_or("unreadable", |s| s.state_name()).into(),
        clean: state.is_some_and(|s| s.state == STATE_CLEAN),
        reason: state.map_or("unknown", |s| reason_name(s.reason)).into(),
        message: state.map(|s| s.message.clone()).unwrap_or_default(),
    };
    if g.clean {
        match cfg.clean {
            Clean::Keep => return Ok((g, Outcome::Kept)),
            Clean::Discard => {
                ack()?;
                return Ok((g, Outcome::Discarded));
            }
            Clean::Bundle => {}
        }
    }
    create_private_dir(dir)?;
    if let Some(name) = archived_as(dir, &g)? {
        // The capture kernel's hook bundled it already.
        ack()?;
        return Ok((g, Outcome::AlreadyArchived(name)));
    }
    recovered.iter().for_each(report_damage);
    let staging = tempfile::Builder::new()
        .prefix(".recovering-")
        .suffix(".tar.gz")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?
        .into_temp_path();
    let rules = Rules {
        classes: Vec::new(),
        raw_pointers: false,
    };
    let summary = bundle::write(&loaded, &recovered, &input.input, &staging, &rules, &[])?;
    let file = std::fs::File::open(&staging)?;
    if let Err(e) = extractor::bundle::check(std::io::BufReader::new(file)) {
        bail!("the bundle written fails its check ({e}); nothing was put in place");
    }
    let name = summary.top.clone();
    let path = dir.join(format!("{name}.tar.gz"));
    let size = std::fs::metadata(&staging)?.len();
    staging
        .persist(&path)
        .with_context(|| format!("moving the bundle to {}", path.display()))?;
    write_summary(dir, &name, &g, size, summary.events, summary.lost)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    ack()?;
    let fs = retention::fs_of(dir)?;
    let pruning = retention::prune(&retention::kept_in(dir, &name)?, size, fs, &cfg);
    for old in &pruning.delete {
        retention::delete(dir, old).with_context(|| format!("deleting old bundle {old}"))?;
    }
    for over in &pruning.over {
        eprintln!("crashring: over {over}; the newest crash is kept");
    }
    Ok((
        g,
        Outcome::Bundled {
            path,
            events: summary.events,
            lost: summary.lost,
            deleted: pruning.delete,
        },
    ))
}

fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// The bundle whose summary names this generation, if one does.
fn archived_as(dir: &Path, g: &Generation) -> Result<Option<String>> {
    for entry in std::fs::read_dir(dir)? {
        let file = entry?.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".json") else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(dir.join(&file)) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if v["boot_id"] == g.boot_id.as_str()
            && v["generation"] == g.generation
            && dir.join(format!("{name}.tar.gz")).exists()
        {
            return Ok(Some(name.to_string()));
        }
    }
    Ok(None)
}

/// `NAME.json` beside the bundle, for collectors to index without opening
/// the archive; written under a temporary name and renamed.
fn write_summary(
    dir: &Path,
    name: &str,
    g: &Generation,
    size: u64,
    events: u64,
    lost: u64,
) -> Result<()> {
    let json = serde_json::json!({
        "summary_version": 1,
        "bundle": format!("{name}.tar.gz"),
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
    let mut tmp = tempfile::Builder::new()
        .prefix(".summary-")
        .tempfile_in(dir)?;
    writeln!(tmp, "{json:#}")?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(format!("{name}.json")))
        .map_err(|e| e.error)
        .with_context(|| format!("writing {name}.json"))?;
    Ok(())
}

fn ack(sys: &System) -> Result<()> {
    let path = sys.path(&format!("{SYSFS}/previous_ack"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"1\n"))
        .with_context(|| format!("acknowledging through {}", path.display()))
}

fn say_done(socket: &Path, g: &Generation, outcome: &Outcome) {
    let what = match outcome {
        Outcome::Bundled {
            path,
            events,
            lost,
            deleted,
        } => format!(
            "archived generation {} ({}, {}) as {}: {events} events, {lost} lost; {} older bundles removed by retention",
            g.generation,
            g.state,
            g.reason,
            path.display(),
            deleted.len()
        ),
        Outcome::AlreadyArchived(name) => format!(
            "generation {} was archived already as {name}.tar.gz (by the capture kernel): acknowledged",
            g.generation
        ),
        Outcome::Discarded => format!(
            "generation {} ended in a clean shutdown: acknowledged without a bundle (Clean=discard)",
            g.generation
        ),
        Outcome::Kept => format!(
            "generation {} ended in a clean shutdown: left in the region (Clean=keep)",
            g.generation
        ),
    };
    eprintln!("crashring: {what}");
    let bundle = match outcome {
        Outcome::Bundled { path, .. } => path.display().to_string(),
        Outcome::AlreadyArchived(name) => format!("{name}.tar.gz"),
        _ => String::new(),
    };
    let (events, lost) = match outcome {
        Outcome::Bundled { events, lost, .. } => (events.to_string(), lost.to_string()),
        _ => (String::new(), String::new()),
    };
    let generation = g.generation.to_string();
    journal::send(
        socket,
        &[
            ("MESSAGE", &format!("crashring: {what}")),
            ("MESSAGE_ID", journal::RECOVERED),
            ("PRIORITY", "5"),
            ("SYSLOG_IDENTIFIER", "crashring"),
            ("CRASHRING_BUNDLE", &bundle),
            ("CRASHRING_GENERATION", &generation),
            ("CRASHRING_BOOT_ID", &g.boot_id),
            ("CRASHRING_STATE", &g.state),
            ("CRASHRING_REASON", &g.reason),
            ("CRASHRING_CRASH_MESSAGE", &g.message),
            ("CRASHRING_EVENTS", &events),
            ("CRASHRING_LOST", &lost),
        ],
    );
}

/// Runs the site's `OnBundle=` command with the bundle as `$1`; its
/// failure is reported, the bundle stays.
fn run_hook(cmd: &str, bundle: &Path) {
    let status = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{cmd} \"$1\""))
        .arg("crashring-on-bundle")
        .arg(bundle)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("crashring: OnBundle={cmd} exited {s}; the bundle stays"),
        Err(e) => eprintln!("crashring: OnBundle={cmd} could not run: {e}; the bundle stays"),
    }
}
