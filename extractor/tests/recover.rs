//! `crashring recover` through the real binary, on a system tree whose
//! `/sys/kernel/crashring` is plain files: the previous generation a
//! region image, `previous_ack` a file the test reads back.

mod common;

use common::{crashring, image};
use kexec_hooks::system::System;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

const SYSFS: &str = "/sys/kernel/crashring";
const BUNDLES: &str = "/var/lib/crashring";

fn machine(previous: &[u8]) -> (tempfile::TempDir, System) {
    let dir = tempfile::tempdir().unwrap();
    let sys = System::new(dir.path());
    std::fs::create_dir_all(sys.path(SYSFS)).unwrap();
    std::fs::write(sys.path(&format!("{SYSFS}/previous")), previous).unwrap();
    sys.write(
        &format!("{SYSFS}/previous_summary"),
        "generation 1 slot 0 size 16384\n",
    )
    .unwrap();
    sys.write(&format!("{SYSFS}/previous_ack"), "").unwrap();
    (dir, sys)
}

fn recover(root: &Path) -> std::process::Output {
    crashring(&["recover", "--root", root.to_str().unwrap()])
}

/// As crashring-capture.service runs it in a kdump capture boot.
fn capture(root: &Path) -> std::process::Output {
    crashring(&["recover", "--capture", "--root", root.to_str().unwrap()])
}

/// Whether the ack named the generation the module offered.
fn acked(sys: &System) -> bool {
    sys.read(&format!("{SYSFS}/previous_ack"))
        .unwrap()
        .as_deref()
        == Some("generation=1\n")
}

fn bundles(sys: &System) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sys.path(BUNDLES))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_crash_is_bundled_checked_summarised_journalled_then_acked_once() {
    let (dir, sys) = machine(&image(0, true));
    std::fs::create_dir_all(sys.path("/run/systemd/journal")).unwrap();
    let journal = UnixDatagram::bind(sys.path("/run/systemd/journal/socket")).unwrap();
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(acked(&sys));
    let names = bundles(&sys);
    assert_eq!(names.len(), 2, "{names:?}");
    let (json, tgz) = (&names[0], &names[1]);
    assert_eq!(json.strip_suffix(".json"), tgz.strip_suffix(".tar.gz"));
    let bundle = sys.path(&format!("{BUNDLES}/{tgz}"));
    assert_eq!(
        std::fs::metadata(&bundle).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(sys.path(BUNDLES))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    let check = crashring(&["check-bundle", bundle.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check.stdout));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sys.path(&format!("{BUNDLES}/{json}"))).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["summary_version"], 1);
    assert_eq!(summary["state"], "crashed");
    assert_eq!(summary["reason"], "panic");
    assert_eq!(summary["bundle"], tgz.as_str());
    let mut buf = vec![0u8; 65536];
    let n = journal.recv(&mut buf).unwrap();
    let message = text(&buf[..n]);
    assert!(
        message.contains(&format!("MESSAGE_ID={}\n", kexec_hooks::journal::RECOVERED)),
        "{message}"
    );
    assert!(message.contains("CRASHRING_REASON=panic\n"), "{message}");

    // The same generation again (as after a capture kernel's bundle): no
    // second bundle, acknowledged.
    sys.write(&format!("{SYSFS}/previous_ack"), "").unwrap();
    let again = recover(dir.path());
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stderr).contains("archived already"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(bundles(&sys), names);
    assert!(acked(&sys));
}

#[test]
fn a_failed_recovery_leaves_the_generation_unacked_and_a_later_run_archives_it() {
    let (dir, sys) = machine(&image(0, false));
    // The bundle directory cannot be created: a file is in its way.
    sys.write(BUNDLES, "not a directory").unwrap();
    let out = recover(dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("stays in the region"),
        "{}",
        text(&out.stderr)
    );
    assert!(!acked(&sys));
    sys.remove(BUNDLES).unwrap();
    // An unreadable region is no bundle either.
    let good = std::fs::read(sys.path(&format!("{SYSFS}/previous"))).unwrap();
    std::fs::write(
        sys.path(&format!("{SYSFS}/previous")),
        vec![0u8; good.len()],
    )
    .unwrap();
    assert_eq!(recover(dir.path()).status.code(), Some(2));
    assert!(!acked(&sys));
    std::fs::write(sys.path(&format!("{SYSFS}/previous")), good).unwrap();
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(acked(&sys));
    assert_eq!(bundles(&sys).len(), 2);
}

#[test]
fn retention_keeps_max_bundles_and_nothing_waits_without_a_generation() {
    let (dir, sys) = machine(&image(0, false));
    sys.write("/etc/crashring/crashring.conf", "[Recover]\nMaxBundles=2\n")
        .unwrap();
    // Three older bundles of other generations, oldest first by mtime.
    for (i, age) in [("a", 3), ("b", 2), ("c", 1)] {
        let path = format!("{BUNDLES}/{i}.tar.gz");
        sys.write(&path, "old").unwrap();
        sys.write(&format!("{BUNDLES}/{i}.json"), "{}").unwrap();
        let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age * 86400);
        std::fs::File::options()
            .write(true)
            .open(sys.path(&path))
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let names = bundles(&sys);
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"c.tar.gz".to_string()) && names.contains(&"c.json".to_string()));
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with('a') || n.starts_with('b')),
        "{names:?}"
    );

    sys.write(&format!("{SYSFS}/previous_summary"), "none\n")
        .unwrap();
    let idle = recover(dir.path());
    assert!(idle.status.success());
    assert!(text(&idle.stderr).contains("no previous generation"));
}

/// A configuration file it cannot read as text is a warning: the crash
/// is archived all the same, in a normal boot and in the capture boot.
#[test]
fn a_bad_configuration_file_never_stops_recovery() {
    let (dir, sys) = machine(&image(0, true));
    let drop_ins = sys.path("/etc/crashring/crashring.conf.d");
    std::fs::create_dir_all(drop_ins.join("d.conf")).unwrap();
    std::fs::write(drop_ins.join("x.conf"), b"[Recover]\n#\xe9\n").unwrap();
    let captured = capture(dir.path());
    assert!(captured.status.success(), "{}", text(&captured.stderr));
    assert_eq!(bundles(&sys).len(), 2);
    let out = recover(dir.path());
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(acked(&sys));
    assert!(said.contains("crashring.conf.d/d.conf: "), "{said}");
    assert!(
        said.contains("crashring.conf.d/x.conf: invalid utf-8"),
        "{said}"
    );
}

#[test]
fn a_capture_kernel_bundles_without_acking_and_the_next_boot_only_acks() {
    // The module loaded in the capture kernel offers the crash as previous.
    let (dir, sys) = machine(&image(0, true));
    let captured = capture(dir.path());
    assert!(captured.status.success(), "{}", text(&captured.stderr));
    assert!(!acked(&sys), "a capture kernel acknowledged");
    let names = bundles(&sys);
    assert_eq!(names.len(), 2, "{names:?}");
    // The next boot: the same generation, acknowledged, no second bundle.
    let next = recover(dir.path());
    assert!(
        text(&next.stderr).contains("archived already"),
        "{}",
        text(&next.stderr)
    );
    assert!(acked(&sys));
    assert_eq!(bundles(&sys), names);

    // Without the module (a reserve_mem= range): from /proc/vmcore.
    let (dir, sys) = machine(&image(0, false));
    std::fs::remove_dir_all(sys.path(SYSFS)).unwrap();
    std::fs::create_dir_all(sys.path("/proc")).unwrap();
    std::fs::write(sys.path("/proc/vmcore"), image(1 << 20, false)).unwrap();
    let captured = capture(dir.path());
    assert!(captured.status.success(), "{}", text(&captured.stderr));
    assert_eq!(bundles(&sys).len(), 2);
    // Not in a capture kernel, /proc/vmcore is no source.
    let plain = recover(dir.path());
    assert!(text(&plain.stderr).contains("module is not loaded"));
}

/// An armed machine booted without the module (DKMS built none for this
/// kernel, Secure Boot refused it): the journal hears NOT_RECORDING,
/// naming the kernel and what to check; the run itself does not fail.
#[test]
fn an_armed_machine_without_the_module_is_said_not_recording() {
    use kexec_hooks::loader::{Armed, Loader, RECORD};
    let (dir, sys) = machine(b"");
    std::fs::remove_dir_all(sys.path(SYSFS)).unwrap();
    sys.write("/proc/sys/kernel/osrelease", "6.12.95+deb13-amd64\n")
        .unwrap();
    std::fs::create_dir_all(sys.path("/run/systemd/journal")).unwrap();
    let journal = UnixDatagram::bind(sys.path("/run/systemd/journal/socket")).unwrap();
    journal.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    // Not armed: no module is nothing to say.
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(journal.recv(&mut buf).is_err(), "a journal message");
    let armed = Armed {
        reservation: kexec_hooks::reserve::Reservation::Memmap(kexec_hooks::iomem::Placement {
            start: 0x6be0_0000,
            size: 64 << 20,
        }),
        loader: Loader::Grub,
        added: vec!["memmap=64M$0x6be00000".into()],
        created_from: None,
        pending: None,
    };
    sys.write(RECORD, &armed.text()).unwrap();
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let n = journal.recv(&mut buf).unwrap();
    let message = text(&buf[..n]);
    assert!(
        message.contains(&format!(
            "MESSAGE_ID={}\n",
            kexec_hooks::journal::NOT_RECORDING
        )),
        "{message}"
    );
    assert!(message.contains("PRIORITY=3\n"), "{message}");
    assert!(
        message.contains("not loaded in this boot of kernel 6.12.95+deb13-amd64"),
        "{message}"
    );
    assert!(message.contains("`dkms status crashring`"), "{message}");
    assert!(text(&out.stderr).contains("NOT RECORDING"));
}

/// The module's `region` line in a boot `boot` recording `generation`.
fn recording(sys: &System, boot: &str, generation: u64) {
    sys.write(
        &format!("{SYSFS}/region"),
        &format!("source=region phys=0x0000000040000000 size=16777216 slots=2 slot_size=8388608 cpus=2 lanes=5 user_streams=0 boot_id={boot} recording_slot={} recording_phys=0x0000000040800000 generation={generation}\n", generation % 2),
    )
    .unwrap();
}

fn status(root: &Path) -> String {
    let out = crashring(&["status", "--root", root.to_str().unwrap()]);
    text(&out.stdout)
}

#[test]
fn a_range_that_lost_the_last_boots_generation_is_reported() {
    let (dir, sys) = machine(b"");
    sys.write(&format!("{SYSFS}/previous_summary"), "none\n")
        .unwrap();
    std::fs::create_dir_all(sys.path("/run/systemd/journal")).unwrap();
    let journal = UnixDatagram::bind(sys.path("/run/systemd/journal/socket")).unwrap();
    journal.set_nonblocking(true).unwrap();
    recording(&sys, "aa", 6);
    assert!(recover(dir.path()).status.success());
    assert!(status(dir.path()).contains("last boot  first boot recording here"));
    // The next boot counts on.
    recording(&sys, "bb", 7);
    assert!(
        status(dir.path()).contains("kept: this boot counts on from generation 6 (not yet noted")
    );
    let out = recover(dir.path());
    assert!(out.status.success() && !text(&out.stderr).contains("LOST"));
    assert!(status(dir.path()).contains("last boot  kept: this boot counts on from generation 6\n"));
    // The one after finds nothing and starts again at 1.
    recording(&sys, "cc", 1);
    let out = recover(dir.path());
    assert!(out.status.success(), "a lost range fails no recovery");
    assert!(
        text(&out.stderr)
            .contains("LOST: the last boot recorded generation 7 at 0x0000000040000000"),
        "{}",
        text(&out.stderr)
    );
    let mut buf = [0u8; 4096];
    let n = journal.recv(&mut buf).unwrap();
    let message = text(&buf[..n]);
    assert!(message.contains(&format!("MESSAGE_ID={}", kexec_hooks::journal::LOST)));
    assert!(status(dir.path()).contains("last boot  LOST: the last boot recorded generation 7"));
    // Once a boot: a second run says nothing more.
    let again = recover(dir.path());
    assert!(!text(&again.stderr).contains("LOST"));
    assert!(journal.recv(&mut buf).is_err(), "a second journal message");
}

/// With `OnBundle=`, recovery only spools the new bundle: it runs before
/// the network is up. `crashring upload` (crashring-upload.service, once
/// it is) hands it over, keeps it spooled while the command fails, and
/// exits 1 so that the unit retries.
#[test]
fn on_bundle_runs_from_the_spool_once_the_network_is_up() {
    let (dir, sys) = machine(&image(0, true));
    let sent = dir.path().join("sent");
    std::fs::create_dir(&sent).unwrap();
    let flag = dir.path().join("network-up");
    let upload = dir.path().join("upload-crash");
    std::fs::write(
        &upload,
        format!(
            "#!/bin/sh\n[ -e {} ] || exit 7\ncp \"$1\" {}\n",
            flag.display(),
            sent.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&upload, std::fs::Permissions::from_mode(0o755)).unwrap();
    sys.write(
        "/etc/crashring/crashring.conf",
        &format!("[Recover]\nOnBundle={}\n", upload.display()),
    )
    .unwrap();
    let out = recover(dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_dir(&sent).unwrap().next().is_none(),
        "recover ran OnBundle="
    );
    let spooled = |sys: &System| {
        std::fs::read_dir(sys.path(&format!("{BUNDLES}/upload")))
            .unwrap()
            .count()
    };
    assert_eq!(spooled(&sys), 1);
    let root = dir.path().to_str().unwrap();
    // No network yet: the command fails, the bundle stays spooled.
    let down = crashring(&["upload", "--root", root]);
    assert_eq!(down.status.code(), Some(1), "{}", text(&down.stderr));
    assert!(
        text(&down.stderr).contains("stays spooled"),
        "{}",
        text(&down.stderr)
    );
    assert_eq!(spooled(&sys), 1);
    std::fs::write(&flag, "").unwrap();
    let up = crashring(&["upload", "--root", root]);
    assert!(up.status.success(), "{}", text(&up.stderr));
    assert_eq!(spooled(&sys), 0);
    let bundle = bundles(&sys)
        .into_iter()
        .find(|n| n.ends_with(".tar.gz"))
        .unwrap();
    assert!(sent.join(bundle).exists());
}
