//! `crashring recover`: what `crashring-recover.service` runs on every
//! boot, and `crashring-capture.service` in a kdump capture boot. The work
//! is `extractor::recovery`'s (every generation the module keeps, each
//! bundled, checked, put in place and only then acknowledged); this says
//! what became of each, on stderr and in the journal; each new bundle is
//! spooled for the site's `OnBundle=` command (`crashring upload`).

use anyhow::Result;
use clap::Args;
use extractor::recovery::event_formats::Kept;
use extractor::recovery::{
    self, next_boot, Generation, Mode, Outcome, Places, RecoveryError, Sysfs, VMCORE,
};
use kexec_hooks::config;
use kexec_hooks::continuity::{self, Continuity};
use kexec_hooks::journal;
use kexec_hooks::loader;
use kexec_hooks::status::BUNDLE_DIR;
use kexec_hooks::system::System;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct RecoverArgs {
    /// Where bundles and their summaries go (created 0700).
    #[arg(long, value_name = "DIR", default_value = BUNDLE_DIR)]
    dir: PathBuf,
    /// The system tree: the module's sysfs, the configuration, the bundle
    /// directory and the journal's socket are looked up under it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The installed system whose configuration applies, when it is not
    /// `--root`: crashring.conf and where `crashring arm` placed the
    /// range are read under it (a capture initramfs's hook passes the
    /// root file system it mounted, /sysroot, so a capture never uses a
    /// copy of the configuration baked in when the initramfs was built).
    #[arg(long, value_name = "DIR")]
    config_root: Option<PathBuf>,
    /// In a kdump capture kernel (crashring-capture.service): bundle the
    /// crashed kernel's generation from `previous` (the module loaded
    /// there offers a memmap= range) or else from /proc/vmcore, and leave
    /// it unacknowledged: the next boot finds the summary and only
    /// acknowledges it.
    #[arg(long)]
    capture: bool,
}

pub fn run(args: RecoverArgs) -> Result<u8> {
    let sys = System::new(&args.root);
    let dir = sys.path(&args.dir.to_string_lossy());
    if !args.capture {
        note_continuity(&sys, &args.dir.to_string_lossy());
    }
    let installed = args.config_root.as_ref().map(System::new);
    let etc = installed.as_ref().unwrap_or(&sys);
    // A file it cannot read is a warning: nothing in the configuration is
    // worth leaving a crash unarchived, or its failure unsaid.
    let (config::Config { recover: cfg, .. }, warnings) = config::load(etc);
    for w in warnings {
        eprintln!("crashring: {w}");
    }
    let socket = sys.path(journal::SOCKET);
    let mode = if args.capture {
        Mode::Capture
    } else {
        Mode::Boot
    };
    // A reserve_mem= range has no fixed place: the capture kernel finds
    // it in /proc/vmcore by its magic.
    let armed = loader::armed(etc)
        .ok()
        .flatten()
        .and_then(|a| a.reservation.placement())
        .map(|p| p.start);
    let release = std::fs::read_to_string(sys.path("/proc/sys/kernel/osrelease")).ok();
    let places = Places {
        vmcore: &sys.path(VMCORE),
        dir: &dir,
        armed,
        next_boot: next_boot::Shown {
            pstore: &sys.path(next_boot::PSTORE),
            tracing: &sys.path(next_boot::TRACING),
            bert: &sys.path(next_boot::BERT),
            reset_evidence: &sys.path(next_boot::RESET_EVIDENCE),
        },
        release: release.as_deref().map(str::trim),
        kallsyms: &sys.path("/proc/kallsyms"),
    };
    let done = match recovery::run(&Sysfs { sys: &sys }, mode, &places, &cfg) {
        Ok(done) => done,
        Err(e) => return failed(&socket, None, e),
    };
    if let Some(nothing) = done.nothing {
        eprintln!("crashring: {nothing}");
    }
    for a in &done.archived {
        for w in &a.warnings {
            eprintln!("crashring: {w}");
        }
        say_done(&socket, &a.generation, &a.outcome);
        if let (Outcome::Bundled { .. }, Some(_)) = (&a.outcome, &cfg.on_bundle) {
            eprintln!("crashring: spooled for OnBundle=, which crashring-upload.service runs once the network is up");
        }
    }
    if args.capture && !done.archived.is_empty() {
        eprintln!("crashring: capture kernel: the generation stays in the region; the next boot finds its summary and acknowledges it");
    }
    if let Some(kept) = &done.formats {
        say_formats(kept);
    }
    if let Some(status) = &done.not_recording {
        let message = format!("crashring: the module records nothing: {status}");
        eprintln!("{message}");
        send(&socket, &message, journal::NOT_RECORDING, "4");
    }
    // An armed machine booted without the module (DKMS built none for
    // this kernel, Secure Boot refused it, it refused its range): the
    // unit runs for the record alone, so that this is said. Not a failed
    // run: the range, still reserved, keeps what it holds for a boot with
    // the module, and the unit's failure means a generation left
    // unarchived (FAILED); the message, an error, is what monitoring
    // watches, and `crashring status` says it too.
    if done.not_loaded && !args.capture && !matches!(loader::armed(etc), Ok(None)) {
        let message = not_loaded(release.as_deref().map(str::trim));
        eprintln!("{message}");
        send(&socket, &message, journal::NOT_RECORDING, "3");
    }
    match done.failed {
        None => Ok(0),
        Some((generation, e)) => failed(&socket, generation, e),
    }
}

/// What an armed machine booted without the module is told: the kernel,
/// and where to look.
fn not_loaded(release: Option<&str>) -> String {
    let kernel = release.map_or("this kernel".into(), |r| format!("kernel {r}"));
    format!(
        "crashring: NOT RECORDING: this machine is armed ({}), but the crashring module is not loaded in this boot of {kernel}: a crash now is lost. Check `dkms status crashring` (built and installed for {kernel}? its headers installed?) and `journalctl -k -b -g crashring` (refused by Secure Boot, or refusing its range)",
        loader::RECORD
    )
}

/// What the next boot said of the reset, for the archived message: the
/// firmware's boot error record and AMD's reset reason, where given.
fn next_boot_words(g: &Generation) -> String {
    let mut words = String::new();
    if let Some(e) = &g.firmware_error {
        words += &format!("; the firmware's boot error record: {e}");
    }
    if let Some(r) = &g.reset_reason {
        words += &format!("; the previous reset's reason: {r}");
    }
    words
}

/// Says what keeping the running kernel's event formats did, when it
/// did something or failed (`crashring arm` does it too).
pub(super) fn say_formats(kept: &std::io::Result<Kept>) {
    match kept {
        Ok(Kept::Written { path, formats }) => eprintln!(
            "crashring: kept this kernel's {formats} event formats in {}, for its persistent ftrace buffer's dumps",
            path.display()
        ),
        Ok(_) => {}
        Err(e) => eprintln!("crashring: this kernel's event formats were not kept: {e}"),
    }
}

/// Says that `generation` (or whatever waits) was not archived.
fn failed(socket: &Path, generation: Option<u64>, e: RecoveryError) -> Result<u8> {
    let which = generation.map_or("the previous generation".into(), |g| {
        format!("generation {g}")
    });
    let message = format!(
        "crashring: {which} was NOT archived and stays in the region for the next run: {e}"
    );
    send(socket, &message, journal::FAILED, "3");
    Err(anyhow::Error::new(e).context(format!("{which} stays in the region, unacknowledged")))
}

fn send(socket: &Path, message: &str, id: &str, priority: &str) {
    journal::send(
        socket,
        &[
            ("MESSAGE", message),
            ("MESSAGE_ID", id),
            ("PRIORITY", priority),
            ("SYSLOG_IDENTIFIER", "crashring"),
        ],
    );
}

/// Judges whether the range kept the last boot's generation (once a boot),
/// and says so in the journal when it did not; a note that cannot be
/// written is a warning, not a failed recovery.
fn note_continuity(sys: &System, dir: &str) {
    if let Err(e) = recovery::create_private_dir(&sys.path(dir)) {
        eprintln!("crashring: {e}");
        return;
    }
    match continuity::note(sys, dir) {
        Ok(Some(lost @ Continuity::Lost { .. })) => {
            let message = format!("crashring: {lost}");
            eprintln!("{message}");
            send(&sys.path(journal::SOCKET), &message, journal::LOST, "4");
        }
        Ok(_) => {}
        Err(e) => eprintln!("crashring: could not note this boot's generation in {dir}: {e}"),
    }
}

/// Says what became of a generation, on stderr and in the journal, each
/// outcome under its own `MESSAGE_ID`.
fn say_done(socket: &Path, g: &Generation, outcome: &Outcome) {
    let n = g.generation;
    let (what, id) = match outcome {
        Outcome::Bundled {
            path,
            events,
            lost,
            deleted,
            salvaged,
        } => (
            format!(
                "archived generation {n} ({}, {}{}) as {}: {events} events, {lost} lost; {} older bundles removed by retention{}{}",
                g.state,
                g.reason,
                // The reason a box was brought down for, or the hardware
                // error that brought it down.
                match (&g.hardware_error, g.shutdown_asked) {
                    (Some(e), _) => format!(": {}: {e}", g.message),
                    (None, true) => format!(": {}", g.message),
                    (None, false) => String::new(),
                },
                path.display(),
                deleted.len(),
                next_boot_words(g),
                if *salvaged {
                    "; its header failed its checks and was read as it stands (--trust-header)"
                } else {
                    ""
                }
            ),
            journal::RECOVERED,
        ),
        Outcome::AlreadyArchived(name) => (
            format!("generation {n} was archived already as {name}.tar.gz (by the capture kernel): acknowledged"),
            journal::ALREADY_ARCHIVED,
        ),
        Outcome::Discarded => (
            format!("generation {n} ended in a clean shutdown: acknowledged without a bundle (Clean=discard)"),
            journal::DISCARDED,
        ),
        Outcome::Kept => (
            format!("generation {n} ended in a clean shutdown: left in the region (Clean=keep)"),
            journal::KEPT,
        ),
        Outcome::ReleasedToRecord => (
            format!("generation {n} ended in a clean shutdown: released although Clean=keep, since the module had no other slot to record into"),
            journal::RELEASED_TO_RECORD,
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
    let generation = n.to_string();
    journal::send(
        socket,
        &[
            ("MESSAGE", &format!("crashring: {what}")),
            ("MESSAGE_ID", id),
            ("PRIORITY", "5"),
            ("SYSLOG_IDENTIFIER", "crashring"),
            ("CRASHRING_BUNDLE", &bundle),
            ("CRASHRING_GENERATION", &generation),
            ("CRASHRING_BOOT_ID", &g.boot_id),
            ("CRASHRING_STATE", &g.state),
            ("CRASHRING_REASON", &g.reason),
            ("CRASHRING_CRASH_MESSAGE", &g.message),
            (
                "CRASHRING_HARDWARE_ERROR",
                g.hardware_error.as_deref().unwrap_or_default(),
            ),
            (
                "CRASHRING_SIGNATURE",
                g.signature.as_ref().map_or("", |s| s.id.as_str()),
            ),
            (
                "CRASHRING_FIRMWARE_ERROR",
                g.firmware_error.as_deref().unwrap_or_default(),
            ),
            (
                "CRASHRING_RESET_REASON",
                g.reset_reason.as_deref().unwrap_or_default(),
            ),
            ("CRASHRING_EVENTS", &events),
            ("CRASHRING_LOST", &lost),
        ],
    );
}
