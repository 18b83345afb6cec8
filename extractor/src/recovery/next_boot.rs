//! What the boot after a crash shows of the boot before it, besides
//! crashring's region, bundled with that boot's crash: pstore's records
//! (`/sys/fs/pstore`: ramoops, EFI variables, ERST, whichever backend the
//! box has), each persistent ftrace instance that still holds the last
//! boot's events (`/sys/kernel/tracing/instances/NAME/trace`, where the
//! instance's `last_boot_info` says so), the firmware's Boot Error Record
//! Table (`/sys/firmware/acpi/tables/data/BERT`, decoded by
//! [`crate::foreign::bert`]), and the lines of this boot's kernel log
//! about how the last one ended, as the module kept them at load
//! (`/sys/kernel/crashring/reset_evidence`: BERT as the kernel printed it,
//! machine checks found in the banks at boot, AMD's previous reset
//! reason).
//!
//! All are read, never removed: an instance keeps its events until
//! someone resets it, and systemd-pstore, which moves pstore's records
//! out of pstore (erasing them from the backend), runs after
//! crashring-recover.service, once the bundle is durable. Nothing here
//! holds a crash back: what cannot be read is a warning.

use crate::bundle::{AddLog, LogSource};
use crate::foreign::bert;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Where the running kernel shows them.
pub const PSTORE: &str = "/sys/fs/pstore";
pub const TRACING: &str = "/sys/kernel/tracing";
pub const BERT: &str = "/sys/firmware/acpi/tables/data/BERT";
pub const RESET_EVIDENCE: &str = "/sys/kernel/crashring/reset_evidence";

/// Bytes read of one file at most: a bundle is not the place for more,
/// and memory stays bounded whatever the kernel shows.
pub const MAX_FILE: u64 = 64 << 20;

/// Their names in a bundle's `logs/`.
pub const BERT_LOG: &str = "firmware-BERT.txt";
pub const RESET_EVIDENCE_LOG: &str = "next-boot-kernel.txt";

/// Where one system shows them (under its root).
#[derive(Clone, Copy, Debug)]
pub struct Shown<'a> {
    pub pstore: &'a Path,
    pub tracing: &'a Path,
    pub bert: &'a Path,
    pub reset_evidence: &'a Path,
}

/// What the next boot shows of the last one.
#[derive(Debug, Default)]
pub struct Previous {
    /// Each as a log to bundle.
    pub logs: Vec<AddLog>,
    /// What could not be read, one sentence each.
    pub warnings: Vec<String>,
    /// The firmware's first boot error record, in words
    /// ([`bert::Region::headline`]).
    pub firmware_error: Option<String>,
    /// AMD's previous reset reason, as the kernel logged it (each reason
    /// its own line on newer kernels: joined by "; ").
    pub reset_reason: Option<String>,
}

/// The kernel's words before AMD's reset reason (arch/x86/kernel/cpu/amd.c).
const RESET_REASON: &str = "Previous system reset reason ";

/// pstore's records, then the instances that hold the last boot's events,
/// then the firmware's boot error records and this boot's lines about the
/// last reset. What is not there (pstore not mounted, no tracefs, no
/// BERT, a module that keeps no lines) holds nothing.
pub fn previous_boot(shown: &Shown) -> Previous {
    let (mut logs, mut warnings) = (Vec::new(), Vec::new());
    let (mut firmware_error, mut reset_reason) = (None, None);
    for path in entries(shown.pstore, &mut warnings) {
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
    for dir in entries(&shown.tracing.join("instances"), &mut warnings) {
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
    if let Some((bytes, _)) = read_if_there(shown.bert, &mut warnings) {
        let region = bert::parse(&bytes);
        firmware_error = region.headline(&bytes);
        // A region of zeros holds no record: nothing to say.
        if !region.blocks.is_empty() {
            logs.push(AddLog {
                source: LogSource::Firmware(bert::text(&bytes).into_bytes()),
                name: BERT_LOG.into(),
            });
        }
    }
    if let Some((bytes, _)) = read_if_there(shown.reset_evidence, &mut warnings) {
        let text = String::from_utf8_lossy(&bytes);
        let reasons: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.find(RESET_REASON)
                    .map(|at| l[at + RESET_REASON.len()..].trim())
            })
            .collect();
        if !reasons.is_empty() {
            reset_reason = Some(reasons.join("; "));
        }
        if !bytes.is_empty() {
            logs.push(AddLog {
                source: LogSource::NextBootKernel(bytes),
                name: RESET_EVIDENCE_LOG.into(),
            });
        }
    }
    Previous {
        logs,
        warnings,
        firmware_error,
        reset_reason,
    }
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

/// [`read_whole`], or nothing without a word when `path` is not there.
fn read_if_there(path: &Path, warnings: &mut Vec<String>) -> Option<(Vec<u8>, String)> {
    if !path.exists() {
        return None;
    }
    read_whole(path, warnings)
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

    /// [`previous_boot`] on a machine whose places are under `root`.
    fn previous_boot_under(root: &Path) -> (Vec<AddLog>, Vec<String>) {
        let p = previous_under(root);
        (p.logs, p.warnings)
    }

    fn previous_under(root: &Path) -> Previous {
        let (pstore, tracing) = (root.join("pstore"), root.join("tracing"));
        let (bert, reset_evidence) = (root.join("BERT"), root.join("reset_evidence"));
        previous_boot(&Shown {
            pstore: &pstore,
            tracing: &tracing,
            bert: &bert,
            reset_evidence: &reset_evidence,
        })
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
        let (logs, warnings) = previous_boot_under(tmp.path());
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
        let (logs, warnings) = previous_boot_under(tmp.path());
        assert!(logs.is_empty() && warnings.is_empty());
    }

    #[test]
    fn the_firmwares_records_and_the_kernels_lines_about_the_reset_are_taken() {
        use crate::foreign::bert::bert_region::{block, memory_section};
        let tmp = tempfile::tempdir().unwrap();
        let mut region = block(1, 0, &memory_section(0x7654_3000, 3));
        region.resize(4096, 0);
        std::fs::write(tmp.path().join("BERT"), &region).unwrap();
        let lines = "<6>[    1.204127] BERT: Error records from previous boot:\n\
                     <6>[    2.1] x86/amd: Previous system reset reason [0x08000800]: an uncorrected error caused a data fabric sync flood event\n";
        write(&tmp.path().join("reset_evidence"), lines);
        let previous = previous_under(tmp.path());
        assert_eq!(
            previous.firmware_error.as_deref(),
            Some("fatal platform memory error, physical address 0x76543000, node 1, multi-bit ECC")
        );
        assert_eq!(
            previous.reset_reason.as_deref(),
            Some("[0x08000800]: an uncorrected error caused a data fabric sync flood event")
        );
        let (logs, warnings) = (previous.logs, previous.warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(names(&logs), [BERT_LOG, RESET_EVIDENCE_LOG]);
        let LogSource::Firmware(text) = &logs[0].source else {
            panic!("{:?}", logs[0].source);
        };
        let text = String::from_utf8_lossy(text);
        assert!(
            text.contains("fatal platform memory error, physical address 0x76543000"),
            "{text}"
        );
        assert!(matches!(&logs[1].source, LogSource::NextBootKernel(b) if b == lines.as_bytes()));
        // A region of zeros and a module that kept no line: nothing.
        std::fs::write(tmp.path().join("BERT"), [0; 4096]).unwrap();
        write(&tmp.path().join("reset_evidence"), "");
        let previous = previous_under(tmp.path());
        assert!(previous.firmware_error.is_none() && previous.reset_reason.is_none());
        let (logs, warnings) = (previous.logs, previous.warnings);
        assert!(
            logs.is_empty() && warnings.is_empty(),
            "{logs:?} {warnings:?}"
        );
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
        let (logs, warnings) = previous_boot_under(tmp.path());
        assert_eq!(names(&logs), ["pstore-dmesg-ramoops-0"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .ends_with("instances/boot/trace is not bundled: Is a directory (os error 21)"),
            "{warnings:?}"
        );
    }
}
