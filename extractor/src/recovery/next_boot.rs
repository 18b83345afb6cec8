//! What the boot after a crash shows of the boot before it, besides
//! crashring's region, bundled with that boot's crash: pstore's records
//! (`/sys/fs/pstore`: ramoops, EFI variables, ERST, whichever backend the
//! box has) and each persistent ftrace instance that still holds the last
//! boot's events (`/sys/kernel/tracing/instances/NAME/trace`, where the
//! instance's `last_boot_info` says so), both as the kernel reads them.
//!
//! Both are read, never removed: an instance keeps its events until
//! someone resets it, and systemd-pstore, which moves pstore's records
//! out of pstore (erasing them from the backend), runs after
//! crashring-recover.service, once the bundle is durable. Nothing here
//! holds a crash back: what cannot be read is a warning.

use crate::bundle::{AddLog, LogSource};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Where the running kernel shows them.
pub const PSTORE: &str = "/sys/fs/pstore";
pub const TRACING: &str = "/sys/kernel/tracing";

/// Bytes read of one file at most: a bundle is not the place for more,
/// and memory stays bounded whatever the kernel shows.
pub const MAX_FILE: u64 = 64 << 20;

/// pstore's records under `pstore`, then the instances under `tracing`
/// that hold the last boot's events, each as a log to bundle, and what
/// could not be read, one sentence each. A directory that is not there
/// (pstore not mounted, no tracefs) holds nothing.
pub fn previous_boot(pstore: &Path, tracing: &Path) -> (Vec<AddLog>, Vec<String>) {
    let (mut logs, mut warnings) = (Vec::new(), Vec::new());
    for path in entries(pstore, &mut warnings) {
        if !path.is_file() {
            continue;
        }
        if let Some((bytes, name)) = read_whole(&path, &mut warnings) {
            logs.push(AddLog {
                source: LogSource::NextBootPstore(bytes),
                name: format!("pstore-{name}"),
            });
        }
    }
    for dir in entries(&tracing.join("instances"), &mut warnings) {
        let Ok(info) = std::fs::read_to_string(dir.join("last_boot_info")) else {
            // Not an instance in reserved memory.
            continue;
        };
        // 6.15+ says "# Current" once the instance records this boot; 6.12
        // always shows its offsets, and its trace is empty when the kernel
        // found nothing valid to keep.
        if info.starts_with("# Current") {
            continue;
        }
        let Some((bytes, _)) = read_whole(&dir.join("trace"), &mut warnings) else {
            continue;
        };
        let holds_events = bytes
            .split(|&b| b == b'\n')
            .any(|l| !l.is_empty() && l[0] != b'#');
        if holds_events {
            let instance = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            logs.push(AddLog {
                source: LogSource::NextBootFtrace(bytes),
                name: format!("ftrace-instance-{instance}.txt"),
            });
        }
    }
    (logs, warnings)
}

/// The entries of `dir`, sorted, or none when it is not there.
fn entries(dir: &Path, warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let list = match std::fs::read_dir(dir) {
        Ok(list) => list,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(format!("{} could not be listed: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = list.flatten().map(|e| e.path()).collect();
    paths.sort();
    paths
}

/// `path`'s bytes (at most [`MAX_FILE`], said when cut) and its name.
fn read_whole(path: &Path, warnings: &mut Vec<String>) -> Option<(Vec<u8>, String)> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let mut bytes = Vec::new();
    let read = File::open(path).and_then(|f| f.take(MAX_FILE + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        warnings.push(format!("{} is not bundled: {e}", path.display()));
        return None;
    }
    if bytes.len() as u64 > MAX_FILE {
        bytes.truncate(MAX_FILE as usize);
        warnings.push(format!(
            "{} is bundled cut at {} MiB",
            path.display(),
            MAX_FILE >> 20
        ));
    }
    Some((bytes, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn names(logs: &[AddLog]) -> Vec<&str> {
        logs.iter().map(|l| l.name.as_str()).collect()
    }

    #[test]
    fn pstore_records_and_instances_holding_the_last_boot_are_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let (pstore, tracing) = (tmp.path().join("pstore"), tmp.path().join("tracing"));
        write(&pstore.join("dmesg-ramoops-0"), "Panic#1 Part1\n<0>oops\n");
        write(&pstore.join("console-ramoops-0"), "console\n");
        let events = "# tracer: nop\n#\n  sh-95  [001] .....  5.070412: tracing_mark_write: m 1\n";
        let headers = "# tracer: nop\n#\n";
        let instances = tracing.join("instances");
        // 6.12: offsets, events.
        write(
            &instances.join("boot612/last_boot_info"),
            "text delta:\t0\n",
        );
        write(&instances.join("boot612/trace"), events);
        // 7.x, recording this boot already: not the last boot's.
        write(&instances.join("current/last_boot_info"), "# Current\n");
        write(&instances.join("current/trace"), events);
        // Kept, but the kernel found nothing valid in it.
        write(&instances.join("wiped/last_boot_info"), "text delta:\t0\n");
        write(&instances.join("wiped/trace"), headers);
        // An ordinary instance.
        write(&instances.join("plain/trace"), events);
        let (logs, warnings) = previous_boot(&pstore, &tracing);
        assert_eq!(
            names(&logs),
            [
                "pstore-console-ramoops-0",
                "pstore-dmesg-ramoops-0",
                "ftrace-instance-boot612.txt"
            ]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(matches!(&logs[2].source, LogSource::NextBootFtrace(b) if b == events.as_bytes()));
        assert!(matches!(&logs[1].source, LogSource::NextBootPstore(b) if b.starts_with(b"Panic")));
    }

    #[test]
    fn nothing_mounted_is_nothing_to_say() {
        let tmp = tempfile::tempdir().unwrap();
        let (logs, warnings) =
            previous_boot(&tmp.path().join("pstore"), &tmp.path().join("tracing"));
        assert!(logs.is_empty() && warnings.is_empty());
    }

    #[test]
    fn an_unreadable_trace_is_said_and_the_rest_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let (pstore, tracing) = (tmp.path().join("pstore"), tmp.path().join("tracing"));
        write(&pstore.join("dmesg-ramoops-0"), "panic\n");
        // Not a record: skipped.
        std::fs::create_dir(pstore.join("odd")).unwrap();
        write(
            &tracing.join("instances/boot/last_boot_info"),
            "text delta:\t0\n",
        );
        std::fs::create_dir(tracing.join("instances/boot/trace")).unwrap();
        let (logs, warnings) = previous_boot(&pstore, &tracing);
        assert_eq!(names(&logs), ["pstore-dmesg-ramoops-0"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .ends_with("instances/boot/trace is not bundled: Is a directory (os error 21)"),
            "{warnings:?}"
        );
    }
}
