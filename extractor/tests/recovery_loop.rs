//! `extractor::recovery` against a module of the test's own: what a run
//! does when the module keeps two generations, when another run holds the
//! lock, when an acknowledgement is refused, when a killed run left files
//! behind, when retention fails after the ack, and with a damaged header.

mod common;

use common::synth::{self, generation_image, Ending};
use common::{bert_region, bundles, ftrace_area, printk_ring};
use extractor::recovery::event_formats;
use extractor::recovery::{self, Mode, Module, Offer, Outcome, Places, RecoveryError};
use kexec_hooks::config::{Clean, Recover};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A generation the module keeps.
#[derive(Clone, Copy)]
struct Kept {
    generation: u64,
    ending: Ending,
    damaged: bool,
}

fn crashed(generation: u64) -> Kept {
    Kept {
        generation,
        ending: Ending::Crashed,
        damaged: false,
    }
}

/// The module's two slots, as far as recovery sees them: it offers the
/// newest generation it keeps, releases exactly the one an ack names, and
/// records only while a slot is free.
struct FakeModule {
    dir: PathBuf,
    kept: Mutex<Vec<Kept>>,
    acks: Mutex<Vec<u64>>,
    /// Refuse every ack, as the module does when another run released the
    /// generation first.
    refuse_acks: bool,
}

impl FakeModule {
    fn new(dir: &Path, kept: &[Kept]) -> FakeModule {
        FakeModule {
            dir: dir.to_path_buf(),
            kept: Mutex::new(kept.to_vec()),
            acks: Mutex::new(Vec::new()),
            refuse_acks: false,
        }
    }

    fn acks(&self) -> Vec<u64> {
        self.acks.lock().unwrap().clone()
    }
}

impl Module for FakeModule {
    fn offer(&self) -> io::Result<Offer> {
        let Some(k) = self.kept.lock().unwrap().last().copied() else {
            return Ok(Offer::Nothing);
        };
        let mut image = generation_image(k.generation, k.ending);
        if k.damaged {
            // A flipped bit in the host name: the header's CRC fails.
            image[168] ^= 1;
        }
        let path = self.dir.join(format!("previous-{}", k.generation));
        std::fs::write(&path, image)?;
        Ok(Offer::Waiting {
            path,
            generation: k.generation,
            damaged: k.damaged,
        })
    }

    fn ack(&self, generation: u64) -> io::Result<()> {
        let mut kept = self.kept.lock().unwrap();
        if self.refuse_acks || kept.last().map(|k| k.generation) != Some(generation) {
            return Err(io::Error::from_raw_os_error(116)); // ESTALE
        }
        kept.pop();
        self.acks.lock().unwrap().push(generation);
        Ok(())
    }

    fn status(&self) -> io::Result<Option<String>> {
        Ok(Some(if self.kept.lock().unwrap().len() >= 2 {
            "not recording: both slots hold unarchived generations".into()
        } else {
            "recording".into()
        }))
    }
}

struct Machine {
    tmp: tempfile::TempDir,
    module_dir: PathBuf,
    bundles: PathBuf,
}

fn machine() -> Machine {
    let tmp = tempfile::tempdir().unwrap();
    let module_dir = tmp.path().join("sys");
    std::fs::create_dir(&module_dir).unwrap();
    let bundles = tmp.path().join("bundles");
    Machine {
        module_dir,
        bundles,
        tmp,
    }
}

impl Machine {
    /// Where this machine's kernel shows pstore's records and tracefs
    /// (empty unless a test writes there).
    fn pstore(&self) -> PathBuf {
        self.tmp.path().join("pstore")
    }

    fn tracing(&self) -> PathBuf {
        self.tmp.path().join("tracing")
    }
}

/// Where a machine under `root` shows the boot before (see
/// [`Machine`]).
struct NextBootPaths([PathBuf; 4]);

impl NextBootPaths {
    fn under(root: &Path) -> NextBootPaths {
        NextBootPaths(["pstore", "tracing", "BERT", "reset_evidence"].map(|n| root.join(n)))
    }

    fn shown(&self) -> recovery::next_boot::Shown<'_> {
        let [pstore, tracing, bert, reset_evidence] = &self.0;
        recovery::next_boot::Shown {
            pstore,
            tracing,
            bert,
            reset_evidence,
        }
    }
}

/// A normal boot's run into `dir`, whose machine's pstore and tracefs are
/// its siblings (see [`Machine`]).
fn run(m: &dyn Module, dir: &Path, config: &Recover) -> recovery::Run {
    let next_boot = NextBootPaths::under(dir.parent().unwrap());
    let places = Places {
        vmcore: Path::new("/nonexistent/vmcore"),
        dir,
        armed: None,
        next_boot: next_boot.shown(),
        release: None,
        kallsyms: Path::new("/nonexistent/kallsyms"),
    };
    recovery::run(m, Mode::Boot, &places, config).unwrap()
}

/// The files a bundle lists, once checked.
fn bundled_files(outcome: &Outcome) -> Vec<String> {
    let Outcome::Bundled { path, .. } = outcome else {
        panic!("{outcome:?}")
    };
    let checked = extractor::bundle::check(std::fs::File::open(path).unwrap()).unwrap();
    checked.manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn generations(run: &recovery::Run) -> Vec<u64> {
    run.archived
        .iter()
        .map(|a| a.generation.generation)
        .collect()
}

#[test]
fn every_generation_the_module_keeps_is_archived_newest_first() {
    let m = machine();
    let module = FakeModule::new(&m.module_dir, &[crashed(1), crashed(2)]);
    let done = run(&module, &m.bundles, &Recover::default());
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert_eq!(generations(&done), [2, 1]);
    assert!(done
        .archived
        .iter()
        .all(|a| matches!(a.outcome, Outcome::Bundled { .. })));
    assert_eq!(module.acks(), [2, 1]);
    assert_eq!(files(&m.bundles).len(), 4, "{:?}", files(&m.bundles));
    // One run's bundles share their place in the archive order; the
    // generation orders them for retention.
    let mut order: Vec<(u64, u64)> = files(&m.bundles)
        .iter()
        .filter(|f| f.ends_with(".json"))
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(m.bundles.join(f)).unwrap()).unwrap();
            (
                v["archived"].as_u64().unwrap(),
                v["generation"].as_u64().unwrap(),
            )
        })
        .collect();
    order.sort();
    assert_eq!(order, [(1, 1), (1, 2)]);
    assert!(done.not_recording.is_none());
    // Nothing is left: the next run finds nothing.
    let again = run(&module, &m.bundles, &Recover::default());
    assert!(again.archived.is_empty() && again.nothing.is_some());
}

/// The generations of the bundles in `dir`, by their summaries.
fn bundled_generations(dir: &Path) -> Vec<u64> {
    let mut out: Vec<u64> = files(dir)
        .iter()
        .filter(|f| f.ends_with(".json"))
        .map(|f| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join(f)).unwrap()).unwrap();
            v["generation"].as_u64().unwrap()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn retention_never_deletes_the_newer_generation_a_run_archived_first() {
    // By count, after the older generation is placed; by space, before.
    let count = Recover {
        max_bundles: Some(1),
        ..Recover::default()
    };
    let space = Recover {
        max_use: Some(kexec_hooks::config::Bytes::Absolute(1024)),
        ..Recover::default()
    };
    for limits in [count, space] {
        let m = machine();
        let module = FakeModule::new(&m.module_dir, &[crashed(1), crashed(2)]);
        let done = run(&module, &m.bundles, &limits);
        assert!(done.failed.is_none(), "{:?}", done.failed);
        assert_eq!(bundled_generations(&m.bundles), [1, 2]);
        let warnings = &done.archived[1].warnings;
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("is kept over the limits")),
            "{warnings:?}"
        );
        // The next run's crash: of the two, the older generation goes.
        let two = Recover {
            max_bundles: Some(2),
            ..Recover::default()
        };
        let module = FakeModule::new(&m.module_dir, &[crashed(3)]);
        let next = run(&module, &m.bundles, &two);
        assert!(next.failed.is_none(), "{:?}", next.failed);
        assert_eq!(bundled_generations(&m.bundles), [2, 3]);
    }
}

#[test]
fn a_spool_that_cannot_be_written_is_a_warning_and_the_crash_archived() {
    let m = machine();
    recovery::create_private_dir(&m.bundles).unwrap();
    // Not a directory: nothing can be spooled in it.
    std::fs::write(m.bundles.join("upload"), "").unwrap();
    let uploading = Recover {
        on_bundle: Some("true".into()),
        ..Recover::default()
    };
    let module = FakeModule::new(&m.module_dir, &[crashed(4)]);
    let done = run(&module, &m.bundles, &uploading);
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert_eq!(module.acks(), [4]);
    assert_eq!(bundled_generations(&m.bundles), [4]);
    let warnings = &done.archived[0].warnings;
    assert!(
        warnings.iter().any(|w| w.contains("could not be spooled")),
        "{warnings:?}"
    );
}

#[test]
fn a_newer_generation_archived_by_an_earlier_run_is_this_runs_to_keep() {
    let m = machine();
    // The first run bundles generation 2; its ack fails, and generation 1
    // waits behind it.
    let refusing = FakeModule {
        refuse_acks: true,
        ..FakeModule::new(&m.module_dir, &[crashed(1), crashed(2)])
    };
    assert!(run(&refusing, &m.bundles, &Recover::default())
        .failed
        .is_some());
    let one = Recover {
        max_bundles: Some(1),
        ..Recover::default()
    };
    let module = FakeModule::new(&m.module_dir, &[crashed(1), crashed(2)]);
    let next = run(&module, &m.bundles, &one);
    assert!(next.failed.is_none(), "{:?}", next.failed);
    assert_eq!(module.acks(), [2, 1]);
    assert_eq!(bundled_generations(&m.bundles), [1, 2]);
}

#[test]
fn a_bundle_whose_acknowledgement_failed_is_spooled_for_upload_all_the_same() {
    let m = machine();
    let uploading = Recover {
        on_bundle: Some("true".into()),
        ..Recover::default()
    };
    let refusing = FakeModule {
        refuse_acks: true,
        ..FakeModule::new(&m.module_dir, &[crashed(3)])
    };
    let done = run(&refusing, &m.bundles, &uploading);
    assert!(done.failed.is_some());
    let module = FakeModule::new(&m.module_dir, &[crashed(3)]);
    let next = run(&module, &m.bundles, &uploading);
    assert!(
        matches!(next.archived[0].outcome, Outcome::AlreadyArchived(_)),
        "{:?}",
        next.archived[0].outcome
    );
    let bundle = files(&m.bundles)
        .into_iter()
        .find_map(|f| f.strip_suffix(".tar.gz").map(str::to_owned))
        .unwrap();
    assert_eq!(files(&m.bundles.join("upload")), [bundle]);
}

#[test]
fn what_the_kernel_shows_of_the_boot_before_goes_with_its_crash_only() {
    let m = machine();
    std::fs::create_dir_all(m.pstore()).unwrap();
    std::fs::write(
        m.pstore().join("dmesg-ramoops-0"),
        "Panic#1 Part1\n<0>[    5.1] Kernel panic - not syncing: sysrq triggered crash\n",
    )
    .unwrap();
    let instance = m.tracing().join("instances/boot");
    std::fs::create_dir_all(&instance).unwrap();
    std::fs::write(instance.join("last_boot_info"), "text delta:\t0\n").unwrap();
    std::fs::write(
        instance.join("trace"),
        "# tracer: nop\n  sh-95  [001] .....  5.070412: tracing_mark_write: m 1\n",
    )
    .unwrap();
    // The firmware's record of the reset, and this boot's lines about it
    // (bracketed, but on this boot's clock: never placed on the crash's).
    let mut region = bert_region::block(1, 0, &bert_region::memory_section(0x7654_3000, 3));
    region.resize(4096, 0);
    std::fs::write(m.tmp.path().join("BERT"), &region).unwrap();
    std::fs::write(
        m.tmp.path().join("reset_evidence"),
        "<6>[    1.204127] BERT: Error records from previous boot:\n\
         <6>[    1.204131] [Hardware Error]: event severity: fatal\n\
         <6>[    2.100000] x86/amd: Previous system reset reason [0x00080800]: software wrote 0x6 to reset control register 0xCF9\n",
    )
    .unwrap();
    let module = FakeModule::new(&m.module_dir, &[crashed(1), crashed(2)]);
    let done = run(&module, &m.bundles, &Recover::default());
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert_eq!(generations(&done), [2, 1]);
    let (newest, older) = (
        bundled_files(&done.archived[0].outcome),
        bundled_files(&done.archived[1].outcome),
    );
    for name in [
        "logs/pstore-dmesg-ramoops-0",
        "logs/ftrace-instance-boot.txt",
        "logs/firmware-BERT.txt",
        "logs/next-boot-kernel.txt",
    ] {
        assert!(newest.iter().any(|f| f == name), "{name}: {newest:?}");
    }
    let Outcome::Bundled { path, .. } = &done.archived[0].outcome else {
        unreachable!()
    };
    // Named in the summary, the newest generation's only.
    let summary = |p: &Path| -> serde_json::Value {
        let json = p.to_string_lossy().replace(".tar.gz", ".json");
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
    };
    let newest = summary(path);
    assert_eq!(
        newest["firmware_error"],
        "fatal platform memory error, physical address 0x76543000, node 1, multi-bit ECC"
    );
    assert_eq!(
        newest["reset_reason"],
        "[0x00080800]: software wrote 0x6 to reset control register 0xCF9"
    );
    let Outcome::Bundled {
        path: older_bundle, ..
    } = &done.archived[1].outcome
    else {
        unreachable!()
    };
    assert_eq!(summary(older_bundle).get("firmware_error"), None);
    let (_, files) = bundles::bundled(path);
    let bert = bundles::text(&files["logs/firmware-BERT.txt"]);
    assert!(
        bert.contains("fatal platform memory error, physical address 0x76543000"),
        "{bert}"
    );
    let checked = extractor::bundle::check(std::fs::File::open(path).unwrap()).unwrap();
    let logs = checked.manifest["logs"].as_array().unwrap();
    let next_boot = logs
        .iter()
        .find(|l| l["name"] == "next-boot-kernel.txt")
        .unwrap();
    assert_eq!(
        (
            &next_boot["lines"],
            &next_boot["placed"],
            &next_boot["unplaced"]
        ),
        (&3.into(), &0.into(), &3.into()),
        "{next_boot}"
    );
    assert!(
        !older.iter().any(|f| f.starts_with("logs/")),
        "an older generation took the last boot's logs: {older:?}"
    );
    // Read, not removed.
    assert!(m.pstore().join("dmesg-ramoops-0").exists());
}

#[test]
fn a_kept_clean_generation_never_stops_recording() {
    let m = machine();
    let clean = |generation| Kept {
        generation,
        ending: Ending::Clean,
        damaged: false,
    };
    let module = FakeModule::new(&m.module_dir, &[clean(1), clean(2)]);
    let keep = Recover {
        clean: Clean::Keep,
        ..Recover::default()
    };
    let done = run(&module, &m.bundles, &keep);
    assert!(done.failed.is_none(), "{:?}", done.failed);
    let outcomes: Vec<_> = done.archived.iter().map(|a| &a.outcome).collect();
    assert!(
        matches!(outcomes[..], [Outcome::ReleasedToRecord, Outcome::Kept]),
        "{outcomes:?}"
    );
    assert_eq!(module.acks(), [2]);
    assert!(done.not_recording.is_none(), "{:?}", done.not_recording);
}

#[test]
fn a_shutdown_asked_for_with_a_reason_is_bundled_as_a_crash_whatever_clean_says() {
    for clean in [Clean::Discard, Clean::Keep] {
        let m = machine();
        let ended = |generation, ending| Kept {
            generation,
            ending,
            damaged: false,
        };
        let module = FakeModule::new(
            &m.module_dir,
            &[
                ended(1, Ending::ShutDownFor("watchdog: player hung")),
                ended(2, Ending::Clean),
            ],
        );
        let config = Recover {
            clean,
            ..Recover::default()
        };
        let done = run(&module, &m.bundles, &config);
        assert!(done.failed.is_none(), "{:?}", done.failed);
        let outcomes: Vec<_> = done.archived.iter().map(|a| &a.outcome).collect();
        match clean {
            Clean::Discard => assert!(
                matches!(outcomes[..], [Outcome::Discarded, Outcome::Bundled { .. }]),
                "{outcomes:?}"
            ),
            _ => assert!(
                matches!(
                    outcomes[..],
                    [Outcome::ReleasedToRecord, Outcome::Bundled { .. }]
                ),
                "{outcomes:?}"
            ),
        }
        let asked = &done.archived[1].generation;
        assert!(asked.clean && asked.shutdown_asked, "{asked:?}");
        assert_eq!(
            (asked.reason.as_str(), asked.message.as_str()),
            ("shutdown", "watchdog: player hung")
        );
        let summaries: Vec<String> = files(&m.bundles)
            .into_iter()
            .filter(|f| f.ends_with(".json"))
            .collect();
        let [summary] = &summaries[..] else {
            panic!("one summary, not {summaries:?}");
        };
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(m.bundles.join(summary)).unwrap()).unwrap();
        assert_eq!(summary["state"], "clean-shutdown", "{summary}");
        assert_eq!(summary["reason"], "shutdown", "{summary}");
        assert_eq!(summary["message"], "watchdog: player hung", "{summary}");
    }
}

#[test]
fn the_summary_and_the_journal_give_the_crash_message_as_the_bundle_does() {
    let m = machine();
    let address = "ffff888012345678";
    let module = FakeModule::new(
        &m.module_dir,
        &[Kept {
            ending: Ending::CrashedSaying("Oops: at ffff888012345678"),
            ..crashed(1)
        }],
    );
    let done = run(&module, &m.bundles, &Recover::default());
    assert!(done.failed.is_none(), "{:?}", done.failed);
    let Outcome::Bundled { path, .. } = &done.archived[0].outcome else {
        panic!("{:?}", done.archived[0].outcome)
    };
    let checked = extractor::bundle::check(std::fs::File::open(path).unwrap()).unwrap();
    let bundled = checked.manifest["regions"][0]["crash"]["message"].clone();
    assert!(!bundled.to_string().contains(address), "{bundled}");
    // What the journal says (the run's generation) and the summary.
    assert_eq!(
        done.archived[0].generation.message,
        bundled.as_str().unwrap()
    );
    let summary = path.with_extension("").with_extension("json");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap();
    assert_eq!(summary["message"], bundled);
}

#[test]
fn a_second_run_waits_for_the_first_and_bundles_nothing_twice() {
    let m = machine();
    let module = Arc::new(FakeModule::new(&m.module_dir, &[crashed(5)]));
    recovery::create_private_dir(&m.bundles).unwrap();
    let held = std::fs::File::open(&m.bundles).unwrap();
    held.lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let (dir, m2) = (m.bundles.clone(), Arc::clone(&module));
    let other = std::thread::spawn(move || {
        let done = run(&*m2, &dir, &Recover::default());
        tx.send(generations(&done)).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(500)).is_err(),
        "a run went on while another held the bundle directory"
    );
    assert!(module.acks().is_empty());
    drop(held);
    assert_eq!(rx.recv().unwrap(), [5]);
    other.join().unwrap();
    assert_eq!(module.acks(), [5]);
}

#[test]
fn a_refused_ack_releases_nothing_and_the_next_run_only_acknowledges() {
    let m = machine();
    let refusing = FakeModule {
        refuse_acks: true,
        ..FakeModule::new(&m.module_dir, &[crashed(3)])
    };
    let done = run(&refusing, &m.bundles, &Recover::default());
    assert!(
        matches!(
            done.failed,
            Some((Some(3), RecoveryError::Ack { generation: 3, .. }))
        ),
        "{:?}",
        done.failed
    );
    assert!(refusing.acks().is_empty());
    let module = FakeModule::new(&m.module_dir, &[crashed(3)]);
    let next = run(&module, &m.bundles, &Recover::default());
    assert!(
        matches!(next.archived[0].outcome, Outcome::AlreadyArchived(_)),
        "{:?}",
        next.archived[0].outcome
    );
    assert_eq!(module.acks(), [3]);
    assert_eq!(files(&m.bundles).len(), 2, "{:?}", files(&m.bundles));
}

#[test]
fn a_bundle_placed_without_its_summary_is_bundled_again() {
    let m = machine();
    let refusing = FakeModule {
        refuse_acks: true,
        ..FakeModule::new(&m.module_dir, &[crashed(3)])
    };
    run(&refusing, &m.bundles, &Recover::default());
    // As a run cut short between renaming the bundle into place and
    // writing its summary leaves it.
    let names = files(&m.bundles);
    let summary = names.iter().find(|n| n.ends_with(".json")).unwrap();
    std::fs::remove_file(m.bundles.join(summary)).unwrap();
    // Under that name, anything but a bundle of the generation is kept.
    let bundle = m.bundles.join(summary.replace(".json", ".tar.gz"));
    let whole = std::fs::read(&bundle).unwrap();
    std::fs::write(&bundle, b"someone else's").unwrap();
    let refusing = FakeModule {
        refuse_acks: true,
        ..FakeModule::new(&m.module_dir, &[crashed(3)])
    };
    let kept = run(&refusing, &m.bundles, &Recover::default());
    assert!(
        matches!(kept.failed, Some((_, RecoveryError::Exists(_)))),
        "{:?}",
        kept.failed
    );
    assert_eq!(std::fs::read(&bundle).unwrap(), b"someone else's");
    std::fs::write(&bundle, whole).unwrap();
    let module = FakeModule::new(&m.module_dir, &[crashed(3)]);
    let next = run(&module, &m.bundles, &Recover::default());
    assert!(next.failed.is_none(), "{:?}", next.failed);
    assert!(
        matches!(next.archived[0].outcome, Outcome::Bundled { .. }),
        "{:?}",
        next.archived[0].outcome
    );
    assert_eq!(module.acks(), [3]);
    assert_eq!(files(&m.bundles), names);
}

#[test]
fn what_a_killed_run_left_is_removed() {
    let m = machine();
    recovery::create_private_dir(&m.bundles).unwrap();
    // As a run killed while it wrote leaves them: the bundle it staged,
    // the bundle writer's archive and staging directory named after it,
    // a summary.
    let staged = ".recovering-Ab3dE.tar.gz";
    for left in [staged, &format!(".{staged}.Xy12Z"), ".summary-x9Y"] {
        std::fs::write(m.bundles.join(left), "half written").unwrap();
    }
    let staging = m.bundles.join(format!(".{staged}.Qw34E.staging"));
    std::fs::create_dir_all(staging.join("kernel/ctf")).unwrap();
    std::fs::write(staging.join("kernel/ctf/kernel_0"), "half written").unwrap();
    let module = FakeModule::new(&m.module_dir, &[]);
    let done = run(&module, &m.bundles, &Recover::default());
    assert!(done.nothing.is_some());
    assert!(files(&m.bundles).is_empty(), "{:?}", files(&m.bundles));
}

#[test]
fn retention_failing_after_the_ack_is_a_warning_not_a_failure() {
    let m = machine();
    recovery::create_private_dir(&m.bundles).unwrap();
    // An old "bundle" retention must delete but cannot: a directory.
    std::fs::create_dir(m.bundles.join("crash-old.tar.gz")).unwrap();
    let module = FakeModule::new(&m.module_dir, &[crashed(9)]);
    let one = Recover {
        max_bundles: Some(1),
        ..Recover::default()
    };
    let done = run(&module, &m.bundles, &one);
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert_eq!(module.acks(), [9]);
    let warnings = &done.archived[0].warnings;
    assert!(
        warnings.iter().any(|w| w.contains("crash-old")),
        "{warnings:?}"
    );
}

#[test]
fn a_damaged_header_is_salvaged_and_said() {
    let m = machine();
    let damaged = Kept {
        generation: 4,
        ending: Ending::Crashed,
        damaged: true,
    };
    let module = FakeModule::new(&m.module_dir, &[damaged]);
    let done = run(&module, &m.bundles, &Recover::default());
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert!(
        matches!(
            done.archived[0].outcome,
            Outcome::Bundled { salvaged: true, .. }
        ),
        "{:?}",
        done.archived[0].outcome
    );
    assert_eq!(module.acks(), [4]);
}

/// A capture kernel's /proc/vmcore holding the crashed kernel's region and
/// a stale copy of an older generation below it (a previous recovery's
/// snapshot in freed RAM): the newest crashed generation is bundled, alone,
/// or the one at the armed address when the machine is armed.
#[test]
fn a_dump_gives_the_crashed_kernels_own_region() {
    let m = machine();
    let mut dump = vec![0u8; 1 << 20];
    let (stale, newest) = (0x1_0000usize, 0x8_0000usize);
    for (at, generation) in [(stale, 6u64), (newest, 7)] {
        let image = generation_image(generation, Ending::Crashed);
        dump[at..at + image.len()].copy_from_slice(&image);
    }
    let vmcore = m.module_dir.join("vmcore");
    std::fs::write(&vmcore, &dump).unwrap();
    let module = FakeModule::new(&m.module_dir, &[]);
    let capture = |armed, dir: &Path| {
        let next_boot = NextBootPaths::under(m.tmp.path());
        let places = Places {
            vmcore: &vmcore,
            dir,
            armed,
            next_boot: next_boot.shown(),
            release: None,
            kallsyms: Path::new("/nonexistent/kallsyms"),
        };
        recovery::run(&module, Mode::Capture, &places, &Recover::default()).unwrap()
    };
    let done = capture(None, &m.bundles);
    assert!(done.failed.is_none(), "{:?}", done.failed);
    assert_eq!(generations(&done), [7]);
    let Outcome::Bundled { path, .. } = &done.archived[0].outcome else {
        panic!("{:?}", done.archived[0].outcome)
    };
    let checked = extractor::bundle::check(std::fs::File::open(path).unwrap()).unwrap();
    let regions = checked.manifest["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 1, "the stale copy was bundled too");
    // Armed at the older one's address: that one is the crashed kernel's.
    let other = m.bundles.with_file_name("armed");
    let done = capture(Some(stale as u64), &other);
    assert_eq!(generations(&done), [6]);
}

#[test]
fn a_boot_keeps_its_event_formats_and_a_capture_names_the_events_by_them() {
    let m = machine();
    // This boot's kernel, with a persistent instance and one event.
    let events = m.tracing().join("events/sched/sched_test");
    std::fs::create_dir_all(&events).unwrap();
    std::fs::create_dir_all(m.tracing().join("instances/boot")).unwrap();
    std::fs::write(
        m.tracing().join("instances/boot/last_boot_info"),
        "# Current\n",
    )
    .unwrap();
    std::fs::write(
        events.join("format"),
        "name: sched_test\nID: 316\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int prev_pid;\toffset:8;\tsize:4;\tsigned:1;\n\nprint fmt: \"prev_pid=%d\", REC->prev_pid\n",
    )
    .unwrap();
    let module = FakeModule::new(&m.module_dir, &[]);
    // The capture kernel is the same release: its kallsyms name the code.
    let kallsyms = m.tmp.path().join("kallsyms");
    std::fs::write(&kallsyms, ftrace_area::KALLSYMS).unwrap();
    let next_boot = NextBootPaths::under(m.tmp.path());
    let places = Places {
        vmcore: Path::new("/nonexistent/vmcore"),
        dir: &m.bundles,
        armed: None,
        next_boot: next_boot.shown(),
        release: Some("6.12.0-test"),
        kallsyms: &kallsyms,
    };
    let done = recovery::run(&module, Mode::Boot, &places, &Recover::default()).unwrap();
    assert!(
        matches!(
            done.formats,
            Some(Ok(event_formats::Kept::Written { formats: 1, .. }))
        ),
        "{:?}",
        done.formats
    );

    // That kernel crashes; its vmcore holds the region and a persistent
    // ftrace buffer with one such event.
    let mut dump = generation_image(7, Ending::Crashed);
    let at = dump.len().next_multiple_of(ftrace_area::PAGE);
    let mut area = ftrace_area::Area::new(56, 1, 4);
    let mut event = vec![0u8; 12];
    event[..2].copy_from_slice(&316u16.to_le_bytes());
    event[4..8].copy_from_slice(&5i32.to_le_bytes());
    event[8..12].copy_from_slice(&42i32.to_le_bytes());
    area.write(0, 1_000_000, &event);
    // 6.12 saved where it put rb_meta_init_text_addr (the seed's TEXT):
    // _text is 0x500 before it.
    let text_at = ftrace_area::TEXT - 0x500;
    area.write(
        0,
        2_000_000,
        &ftrace_area::function_entry(5, text_at + 0x1238, text_at + 0x2010),
    );
    dump.resize(at, 0);
    dump.extend(&area.bytes);
    let note = printk_ring::note();
    let elf = synth::elf(
        &dump,
        &[synth::load(0, dump.len() as u64)],
        Some(&note),
        1,
        false,
    );
    let vmcore = m.module_dir.join("vmcore.elf");
    std::fs::write(&vmcore, elf).unwrap();
    let places = Places {
        vmcore: &vmcore,
        ..places
    };
    let done = recovery::run(&module, Mode::Capture, &places, &Recover::default()).unwrap();
    assert!(done.failed.is_none(), "{:?}", done.failed);
    let Outcome::Bundled { path, .. } = &done.archived[0].outcome else {
        panic!("{:?}", done.archived[0].outcome)
    };
    let (_, files) = bundles::bundled(path);
    let text = bundles::text(&files[&format!("logs/kernel-ftrace-{at:x}.txt")]);
    assert!(text.contains("pid 5: sched_test: prev_pid=42"), "{text}");
    assert!(text.contains("pid 5: function: f+0x4 <- g+0x10"), "{text}");
}
