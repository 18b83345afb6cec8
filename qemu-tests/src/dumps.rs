//! Scenarios whose trace comes back inside a memory dump: the host's
//! extractor must find the region in every container real tools make.

use crate::guest::{self, Initramfs, Kernel};
use crate::qemu::Vm;
use crate::scenarios::{check_warm_reboot, workload_script, Artifacts};
use anyhow::{ensure, Context, Result};
use extractor::container;
use extractor::discover;
use extractor::source::FileSource;
use pstore_ring::read::HeaderTrust;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// The region's physical address in the dump scenarios.
const REGION_ADDR: u64 = 0x3000_0000;

/// The host's `crashring`, built in release mode (a debug build scans a
/// gigabyte of dump slowly enough to matter).
pub fn host_crashring(sh: &Shell) -> Result<PathBuf> {
    cmd!(
        sh,
        "cargo build --quiet --release -p extractor --bin crashring"
    )
    .run()?;
    Ok(sh.current_dir().join("target/release/crashring"))
}

/// Checks one dump file with the real binary and the library: `verify`
/// exits 0, `info --json` names the region (and the crashed kernel, when
/// the dump has VMCOREINFO), and the region read from the dump holds
/// exactly what the workload wrote.
pub fn check_dump(
    sh: &Shell,
    crashring: &Path,
    dump: &Path,
    addr: Option<u64>,
    release: Option<&str>,
) -> Result<String> {
    let started = Instant::now();
    let out = cmd!(sh, "{crashring} verify {dump}")
        .quiet()
        .ignore_status()
        .output()?;
    ensure!(
        out.status.code() == Some(0),
        "crashring verify {} exited {:?}: {}{}",
        dump.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let verify_time = started.elapsed();
    let info = cmd!(sh, "{crashring} info --json {dump}").quiet().read()?;
    if let Some(a) = addr {
        ensure!(
            info.contains(&format!("\"addr\":\"{a:#x}\"")),
            "info does not list the region at {a:#x}: {info}"
        );
    }
    if let Some(r) = release {
        ensure!(
            info.contains(&format!("\"kernel\":\"{r}\"")),
            "info does not name the crashed kernel {r} from VMCOREINFO: {info}"
        );
    }
    let source = Arc::new(FileSource::open(dump)?);
    let opened = container::open(source)?;
    let found = match addr {
        Some(a) => discover::read_at(&*opened.memory, a, None, HeaderTrust::Checksummed)?,
        None => discover::scan(&*opened.memory, &mut |_| {})
            .into_iter()
            .next()
            .context("no region found by scanning")?,
    };
    ensure!(
        found.holes.is_empty(),
        "the region has holes in {}: {:?}",
        dump.display(),
        found.holes
    );
    let summary = check_warm_reboot(&found.bytes)?;
    Ok(format!(
        "{} ({}): {summary}; verify took {:.1} s",
        dump.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
        opened.container,
        verify_time.as_secs_f64()
    ))
}

/// The `"name"` strings of a QMP capability reply's formats.
fn formats(reply: &str) -> Vec<String> {
    reply
        .split('"')
        .filter(|s| *s == "elf" || s.starts_with("kdump-"))
        .map(String::from)
        .collect()
}

pub fn qemu_dump(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let guest_crashring = guest::build_guest_crashring(sh)?;
    let crashring = host_crashring(sh)?;
    let script = workload_script(&format!("region=16M@{REGION_ADDR:#x}"));
    let initrd = guest::initramfs(
        sh,
        &format!("qemu-dump-{}", k.series),
        &Initramfs {
            kernel: k,
            module: &module,
            crashring: &guest_crashring,
            kernel_modules: &["qemu_fw_cfg"],
            script: &script,
        },
    )?;
    let serial = art.dir.join("serial.log");
    let vm = Vm {
        kernel: &k.vmlinuz,
        initrd: &initrd,
        append: format!("console=ttyS0 panic=0 memmap=16M${REGION_ADDR:#x} loglevel=4"),
        memory: "1G",
        cpus: 4,
        disks: vec![],
        extra: ["-device", "vmcoreinfo", "-no-shutdown"]
            .map(String::from)
            .to_vec(),
        serial: serial.clone(),
        timeout: Duration::from_secs(240),
    };
    let mut running = vm.start(&art.dir.join("qmp.sock"))?;
    let booted = running.wait_for_serial("Kernel panic - not syncing", Duration::from_secs(240))?;
    // Let the panic path finish closing pages before the memory is taken.
    std::thread::sleep(Duration::from_secs(2));
    let caps = running.execute(r#"{"execute":"query-dump-guest-memory-capability"}"#)?;
    let formats = formats(&caps);
    ensure!(
        formats.iter().any(|f| f == "elf") && formats.iter().any(|f| f.starts_with("kdump")),
        "QEMU lists no elf and kdump dump formats: {caps}"
    );
    let mut dumps = Vec::new();
    for format in &formats {
        let pagings: &[bool] = if format == "elf" {
            &[false, true]
        } else {
            &[false]
        };
        for &paging in pagings {
            let name = format!("dump-{format}{}", if paging { "-paging" } else { "" });
            let path = art.dir.join(&name);
            let _ = std::fs::remove_file(&path);
            let started = Instant::now();
            running.execute(&format!(
                r#"{{"execute":"dump-guest-memory","arguments":{{"paging":{paging},"protocol":"file:{}","format":"{format}"}}}}"#,
                path.display()
            ))?;
            dumps.push((path, started.elapsed()));
        }
    }
    running.quit();
    let mut lines = vec![format!(
        "guest booted, ran the workload and panicked in {:.1} s",
        booted.as_secs_f64()
    )];
    for (path, took) in &dumps {
        let line = check_dump(sh, &crashring, path, Some(REGION_ADDR), Some(&k.release))
            .with_context(|| {
                format!(
                    "checking {} (serial log {})",
                    path.display(),
                    serial.display()
                )
            })?;
        lines.push(format!("{line}; dumped in {:.1} s", took.as_secs_f64()));
        if !art.kept {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(lines.join("\n  "))
}
