//! Scenarios whose trace comes back inside a memory dump: the host's
//! extractor must find the region in every container real tools make.
//! `qemu-dump` is here with the checks every dump gets; the kdump
//! scenarios are in `kdump.rs`.

use super::{check_region, host_crashring, workload_script, Artifacts, Placement, WORKLOAD_EVENTS};
use super::{ftrace, printk_log, ramoops};
use crate::env::guest::{self, Initramfs, Kernel};
use crate::env::qemu::{Start, Vm};
use crate::env::Arch;
use anyhow::{bail, ensure, Context, Result};
use extractor::discover;
use extractor::input;
use extractor::input::source::FileSource;
use extractor::phys::PhysAddr;
use pstore_ring::read::{HeaderTrust, Region};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xshell::{cmd, Shell};

/// The region's physical address in the dump scenarios.
const REGION_ADDR: u64 = 0x3000_0000;

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
            info.contains(&format!("\"physical_address\":\"{a:#x}\"")),
            "info does not list the region at {a:#x}: {info}"
        );
    }
    if let Some(r) = release {
        ensure!(
            info.contains(&format!("\"vmcoreinfo_kernel\":\"{r}\"")),
            "info does not name the crashed kernel {r} from VMCOREINFO: {info}"
        );
    }
    let source = Arc::new(FileSource::open(dump)?);
    let opened = input::open(source)?;
    let found = match addr {
        Some(a) => discover::read_at(&*opened.memory, PhysAddr(a), None, HeaderTrust::Checksummed)?,
        None => {
            let scanned = discover::scan(&*opened.memory, &mut |_| {}, &mut |_, _| {});
            match (
                scanned.found.into_iter().next(),
                scanned.unread.into_iter().next(),
            ) {
                (Some(found), _) => found,
                (None, Some(unread)) => return Err(unread.into()),
                (None, None) => bail!("no region found by scanning"),
            }
        }
    };
    let region = Region::parse(&found.bytes, HeaderTrust::Checksummed)?.with_absent(found.absent());
    let summary = check_region(&region)?;
    let holes = if found.holes.is_empty() {
        String::new()
    } else {
        format!(
            "; {} holes (unused pages the filter left out)",
            found.holes.len()
        )
    };
    Ok(format!(
        "{} ({}): {summary}{holes}; verify took {:.1} s",
        dump.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
        opened.container,
        verify_time.as_secs_f64()
    ))
}

/// `crashring bundle` on a dump with the guest's serial log added, checked
/// as its recipient would (every file against MANIFEST.json, README.txt
/// naming them all); the manifest names the crashed kernel and its panic
/// and holds the workload's events; the console log is aligned by the
/// kernel messages it shares with the trace; babeltrace2 reads the
/// bundled CTF with the manifest's event count.
fn check_bundle(
    sh: &Shell,
    crashring: &Path,
    dump: &Path,
    serial: &Path,
    release: &str,
    extras: Extras,
) -> Result<String> {
    let name = dump.file_name().and_then(|n| n.to_str()).unwrap_or("dump");
    let out = dump.with_file_name(format!("{name}.bundle.tar.gz"));
    let log = format!("{}:console.txt", serial.display());
    let ramoops_args = match extras.ramoops {
        true => vec!["--ramoops", ramoops::DUMP_LAYOUT],
        false => vec![],
    };
    let run = cmd!(
        sh,
        "{crashring} bundle {dump} -o {out} --add-log {log} {ramoops_args...}"
    )
    .quiet()
    .ignore_status()
    .output()?;
    ensure!(
        run.status.code() == Some(0),
        "crashring bundle exited {:?}: {}",
        run.status.code(),
        String::from_utf8_lossy(&run.stderr)
    );
    let size = std::fs::metadata(&out)?.len();
    let checked = extractor::bundle::check(std::io::BufReader::new(std::fs::File::open(&out)?))?;
    let region = &checked.manifest["regions"][0];
    ensure!(
        region["kernel_release"] == release && region["crash"]["reason"] == "panic",
        "the manifest does not name the {release} kernel's panic: {region}"
    );
    let recovered = region["recovered"].as_u64().unwrap_or(0);
    ensure!(
        recovered >= 2 * u64::from(WORKLOAD_EVENTS),
        "the manifest counts {recovered} events, fewer than the workload wrote"
    );
    let console = &checked.manifest["logs"][0];
    let (placed, lines) = (
        console["placed"].as_u64().unwrap_or(0),
        console["lines"].as_u64().unwrap_or(0),
    );
    let align = &console["bracketed_alignment"];
    let matched = align["matched_printk_lines"].as_u64().unwrap_or(0);
    ensure!(
        placed > 0 && matched > 0,
        "the console log was not aligned with the trace: {console}"
    );
    let unpacked = dump.with_file_name(format!("{name}.bundle"));
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked)?;
    cmd!(sh, "tar -xzf {out} -C {unpacked}").quiet().run()?;
    // The digests again, by coreutils rather than the code that wrote them.
    let top = unpacked.join(&checked.top);
    let listed = checked.manifest["files"].as_array().map_or(&[][..], |f| f);
    ensure!(!listed.is_empty(), "MANIFEST.json lists no files");
    for f in listed {
        let path = top.join(f["path"].as_str().context("a file without a path")?);
        let sum = cmd!(sh, "sha256sum {path}").quiet().read()?;
        ensure!(
            sum.split_whitespace().next() == f["sha256"].as_str(),
            "sha256sum says {sum}; MANIFEST.json says {}",
            f["sha256"]
        );
    }
    let mut pstore = match extras.ramoops {
        true => ramoops::check_bundled(sh, crashring, dump, &checked.manifest, &top)?,
        false => "no ramoops".to_string(),
    };
    if let Some(cpus) = extras.ftrace_cpus {
        pstore += "; ";
        pstore += &ftrace::check_bundled(&checked.manifest, &top, cpus)?;
        pstore += "; ";
        pstore += &ftrace::check_merged(sh, crashring, dump, cpus)?;
    }
    let ctf = top.join("kernel/ctf");
    let text = cmd!(sh, "babeltrace2 {ctf}").quiet().read()?;
    let read = text.lines().filter(|l| l.starts_with('[')).count() as u64;
    ensure!(
        read == recovered,
        "babeltrace2 read {read} events from the bundled CTF, the manifest says {recovered}"
    );
    std::fs::remove_dir_all(&unpacked)?;
    Ok(format!(
        "bundle of {name}: {} files, {size} bytes, checked against MANIFEST.json (digests by sha256sum) and README.txt; {recovered} events (babeltrace2 agrees); console log: {placed} of {lines} lines placed, aligned by {matched} printk lines (offset {} ns, spread {} ns); {pstore}",
        checked.files.len(),
        align["offset_ns"],
        align["spread_ns"]
    ))
}

/// What a `qemu-dump` guest keeps beside the region, for the bundle to
/// hold: ramoops' area, and a persistent ftrace instance of this many
/// CPUs.
#[derive(Clone, Copy)]
struct Extras {
    ramoops: bool,
    ftrace_cpus: Option<u32>,
}

/// Checks the kernel's printk log read from each of `dumps` (one crash's):
/// the same records from every dump, the panic among them, equal to
/// `makedumpfile --dump-dmesg`'s reading where that tool reads the dump
/// (`makedumpfile`: not QEMU's dumps, which 1.7.2 refuses, nor a
/// flattened file, which it reads only reassembled), and holding the
/// guest's own dmesg if it printed one on the console (`serial`).
pub(super) fn check_printk_logs(
    sh: &Shell,
    crashring: &Path,
    dumps: &[&Path],
    serial: &Path,
    makedumpfile: bool,
) -> Result<String> {
    let mut first: Option<Vec<(String, Vec<u8>)>> = None;
    let mut against = Vec::new();
    for path in dumps {
        let ours = printk_log::crashring_records(sh, crashring, path)?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if makedumpfile && !name.contains("flat") {
            let out = path.with_extension("makedumpfile-dmesg.txt");
            let theirs = printk_log::makedumpfile_records(sh, path, &out)?;
            printk_log::ensure_same(
                &format!("{name}: makedumpfile --dump-dmesg"),
                &ours,
                &theirs,
            )?;
            against.push(name.to_string());
        }
        match &first {
            None => first = Some(ours),
            Some(f) => printk_log::ensure_same(
                &format!("{name} against {}", dumps[0].display()),
                &ours,
                f,
            )?,
        }
    }
    let ours = first.context("no dump")?;
    ensure!(
        ours.iter()
            .any(|(_, t)| t.starts_with(b"Kernel panic - not syncing: sysrq triggered crash")),
        "the printk log read from {} has no panic line",
        dumps[0].display()
    );
    let mut line = format!("printk log (crashring dmesg): {} records", ours.len());
    if dumps.len() > 1 {
        line += &format!(", the same from all {} dumps", dumps.len());
    }
    if !against.is_empty() {
        line += &format!(
            "; equal to makedumpfile --dump-dmesg's on {}",
            against.join(", ")
        );
    }
    if let Some(guest) = printk_log::guest_lines(&std::fs::read(serial)?)? {
        let n = printk_log::ensure_guest_lines(&ours, &guest)
            .with_context(|| format!("the guest's dmesg in {}", serial.display()))?;
        line += &format!("; holds the guest's own dmesg printed before the crash ({n} lines)");
    }
    Ok(line)
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
    let crashring = host_crashring(sh)?;
    // The guest prints its own dmesg just before the crash, for the
    // printk log read from each dump to be held against.
    // ramoops beside the region: the bundle takes its panic record. A
    // persistent ftrace instance too, where the kernel has them.
    // ramoops' and ftrace's areas are the PC's memmap= ranges; their
    // readers do not depend on the machine. On arm64 the dump's
    // containers and the printk log read through its page tables are
    // what is new.
    let pc = k.arch == Arch::X86_64;
    let persistent_ftrace = pc && k.has_reserve_mem();
    let cpus = 4;
    let extras = Extras {
        ramoops: pc,
        ftrace_cpus: persistent_ftrace.then_some(cpus),
    };
    let ftrace_script = if persistent_ftrace {
        ftrace::script(cpus)
    } else {
        String::new()
    };
    let ramoops_script = if pc {
        ramoops::dump_script()
    } else {
        String::new()
    };
    let placed = Placement::of(
        k,
        &format!("memmap=16M${REGION_ADDR:#x}"),
        &format!("region=16M@{REGION_ADDR:#x}"),
    )?;
    let region_addr = placed
        .region_address()
        .context("the placed region's address")?;
    let script = workload_script(
        &placed.module_args,
        &(ramoops_script + &ftrace_script + printk_log::GUEST_DMESG),
    );
    let initrd = guest::initramfs(
        sh,
        &format!("qemu-dump-{}", k.series),
        &Initramfs {
            kernel: k,
            module: &module,
            crashring: &guest::guest_crashring(sh, k)?,
            kernel_modules: &["qemu_fw_cfg"],
            later_modules: if pc { ramoops::MODULES } else { &[] },
            programs: &[],
            files: &[],
            script: &script,
        },
    )?;
    let serial = art.dir.join("serial.log");
    let mut vm = Vm {
        arch: k.arch,
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd: &initrd,
            append: format!(
                "console={} panic=0 {} {} {} loglevel=4",
                k.console(),
                placed.append,
                if pc { ramoops::DUMP_APPEND } else { "" },
                if persistent_ftrace {
                    ftrace::APPEND
                } else {
                    ""
                }
            ),
        },
        memory: "1G",
        cpus,
        disks: vec![],
        extra: ["-device", "vmcoreinfo", "-no-shutdown"]
            .map(String::from)
            .to_vec(),
        serial: serial.clone(),
        timeout: Duration::from_secs(240),
    };
    placed.reserve(&mut vm, art)?;
    let mut running = vm.start(&art.dir.join("qmp.sock"))?;
    // panic() prints its end marker after the notifiers ran (crashring's
    // closes every page there): only then is the region final.
    let booted = running.wait_for_serial(
        "---[ end Kernel panic - not syncing",
        Duration::from_secs(240),
    )?;
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
    let paths: Vec<&Path> = dumps.iter().map(|(p, _)| p.as_path()).collect();
    lines.push(check_printk_logs(sh, &crashring, &paths, &serial, false)?);
    for (i, (path, took)) in dumps.iter().enumerate() {
        if i == 0 {
            let line = check_bundle(sh, &crashring, path, &serial, &k.release, extras)
                .with_context(|| {
                    format!(
                        "bundling {} (serial log {})",
                        path.display(),
                        serial.display()
                    )
                })?;
            lines.push(line);
        }
        let line = check_dump(sh, &crashring, path, Some(region_addr), Some(&k.release))
            .with_context(|| {
                format!(
                    "checking {} (serial log {})",
                    path.display(),
                    serial.display()
                )
            })?;
        lines.push(format!("{line}; dumped in {:.1} s", took.as_secs_f64()));
        if persistent_ftrace {
            lines.push(ftrace::check_dump(sh, &crashring, path, cpus, &serial)?);
        }
        if !art.kept {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(lines.join("\n  "))
}
