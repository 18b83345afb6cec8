//! Running QEMU: a guest with a time limit, its serial console in a file,
//! and, for scenarios that dump memory from outside, a QMP socket.

use super::Arch;
use anyhow::{bail, ensure, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One VM to boot.
pub struct Vm<'a> {
    /// The machine: a PC, or arm64's virt board.
    pub arch: Arch,
    pub start: Start<'a>,
    pub memory: &'a str,
    pub cpus: u32,
    /// Raw disk images, attached as virtio disks vda, vdb, ...
    pub disks: Vec<PathBuf>,
    pub extra: Vec<String>,
    pub serial: PathBuf,
    pub timeout: Duration,
}

/// How a VM starts its kernel.
pub enum Start<'a> {
    /// QEMU loads the kernel and initrd itself (`-kernel`), with this
    /// command line: no firmware boot path, no boot loader.
    Kernel {
        kernel: &'a Path,
        initrd: &'a Path,
        append: String,
    },
    /// UEFI firmware (OVMF, QEMU's EDK2 build) boots from the disks, as a
    /// UEFI machine does: through the EFI System Partition's boot loader.
    Uefi(&'a Firmware),
}

/// OVMF's code, shared read-only, and a private copy of its variable store.
pub struct Firmware {
    code: PathBuf,
    vars: PathBuf,
}

/// Debian's OVMF build (package `ovmf`), 4 MiB flash layout.
const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

impl Firmware {
    /// OVMF with a fresh variable store at `vars` (a machine's NVRAM: the
    /// guest's variables live there across the reboots of one VM).
    pub fn ovmf(vars: &Path) -> Result<Firmware> {
        std::fs::copy(OVMF_VARS, vars)
            .with_context(|| format!("copying {OVMF_VARS} (run `cargo xtask setup`)"))?;
        Ok(Firmware {
            code: PathBuf::from(OVMF_CODE),
            vars: vars.to_path_buf(),
        })
    }
}

/// A VM left running, driven over QMP.
pub struct Running {
    child: Child,
    qmp: BufReader<UnixStream>,
    serial: PathBuf,
    /// When QEMU was started.
    started: Instant,
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The last lines of a serial log, for error messages.
pub fn tail(serial: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(serial).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Vm<'_> {
    fn program(&self) -> &'static str {
        match self.arch {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(self.program());
        c.args([
            "-accel",
            // One host thread for all vCPUs: with multi-threaded TCG a
            // guest kernel was seen to die in early boot ("Oops: int3" in
            // run_timer_softirq: its int3-based text patching racing
            // across vCPU threads), about once in 30 boots, and on a
            // 2-core host the vCPU threads only thrash (a warm-reboot run
            // took 14-25 s multi-threaded, 11 s single).
            "tcg,thread=single",
        ]);
        match self.arch {
            Arch::X86_64 => c.args(["-cpu", "max"]),
            // GICv3, which takes more than 8 CPUs; every feature QEMU
            // emulates (DC CVAP among them, which cleans to the point of
            // persistence), with pointer authentication's cheaper
            // algorithm: the architected one costs TCG a third of its
            // speed.
            Arch::Arm64 => c.args([
                "-machine",
                "virt,gic-version=3",
                "-cpu",
                "max,pauth-impdef=on",
            ]),
        };
        c.args(["-display", "none", "-monitor", "none", "-nodefaults"]);
        c.args(["-smp", &self.cpus.to_string(), "-m", self.memory]);
        c.arg("-serial")
            .arg(format!("file:{}", self.serial.display()));
        match &self.start {
            Start::Kernel {
                kernel,
                initrd,
                append,
            } => {
                c.arg("-kernel").arg(kernel).arg("-initrd").arg(initrd);
                c.arg("-append").arg(append);
            }
            Start::Uefi(fw) => {
                let flash = |unit: u8, readonly: &str, file: &Path| {
                    format!(
                        "if=pflash,format=raw,unit={unit},readonly={readonly},file={}",
                        file.display()
                    )
                };
                c.arg("-drive").arg(flash(0, "on", &fw.code));
                c.arg("-drive").arg(flash(1, "off", &fw.vars));
            }
        }
        for d in &self.disks {
            c.arg("-drive")
                .arg(format!("file={},format=raw,if=virtio", d.display()));
        }
        c.args(&self.extra);
        // A guest ends with the harness thread that started it, even one
        // that ends by failing before it waits for the guest (a guest
        // booted ahead, beside the scenarios, would run on alone).
        // SAFETY: prctl is async-signal-safe and touches no memory.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Boots the VM with a QMP socket at `socket` and returns once QMP
    /// answers; the VM keeps running until [`Running::quit`].
    pub fn start(&self, socket: &Path) -> Result<Running> {
        let _ = std::fs::remove_file(socket);
        let mut c = self.command();
        c.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", socket.display()));
        let mut child = c
            .spawn()
            .with_context(|| format!("starting {} (run `cargo xtask setup`)", self.program()))?;
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(_) if start.elapsed() < Duration::from_secs(20) => {
                    if let Some(status) = child.try_wait()? {
                        bail!("QEMU exited with {status} before its QMP socket opened");
                    }
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => {
                    kill(&mut child);
                    bail!("connecting to QMP at {}: {e}", socket.display());
                }
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(300)))?;
        let mut vm = Running {
            child,
            qmp: BufReader::new(stream),
            serial: self.serial.clone(),
            started: start,
        };
        vm.read_reply()?; // The greeting.
        vm.execute(r#"{"execute":"qmp_capabilities"}"#)?;
        Ok(vm)
    }

    /// Boots the VM and waits for it to power off; fails on a time-out
    /// with the end of the serial log.
    pub fn run(&self) -> Result<Duration> {
        let start = Instant::now();
        let mut child = self
            .command()
            .spawn()
            .with_context(|| format!("starting {} (run `cargo xtask setup`)", self.program()))?;
        wait_for_power_off(&mut child, start, self.timeout, &self.serial)
    }
}

impl Vm<'_> {
    /// The device tree QEMU gives this arm64 VM, with a reserved-memory
    /// node marked no-map over `size` bytes at `phys` (arm64's way to set a
    /// range aside; it has no memmap=), written to `dtb` for `-dtb`. QEMU
    /// writes its own tree for the machine as configured, and dtc merges
    /// the node into it.
    pub fn device_tree_reserving(&self, phys: u64, size: u64, dtb: &Path) -> Result<()> {
        ensure!(
            self.arch == Arch::Arm64,
            "only arm64 guests boot with a device tree"
        );
        let own = dtb.with_extension("qemu.dtb");
        let out = self
            .command()
            .arg("-machine")
            .arg(format!("dumpdtb={}", own.display()))
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("starting {}", self.program()))?;
        ensure!(
            out.status.success(),
            "QEMU did not write its device tree: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let source = Command::new("dtc")
            .args(["-q", "-I", "dtb", "-O", "dts"])
            .arg(&own)
            .output()
            .context("running dtc (run `cargo xtask setup`)")?;
        ensure!(
            source.status.success(),
            "dtc could not read {}",
            own.display()
        );
        let mut source = String::from_utf8(source.stdout).context("dtc's output")?;
        source += &format!(
            "/ {{\n\treserved-memory {{\n\t\t#address-cells = <2>;\n\t\t#size-cells = <2>;\n\t\tranges;\n\t\tcrashring@{phys:x} {{\n\t\t\treg = <{:#x} {:#x} {:#x} {:#x}>;\n\t\t\tno-map;\n\t\t}};\n\t}};\n}};\n",
            phys >> 32,
            phys & 0xffff_ffff,
            size >> 32,
            size & 0xffff_ffff
        );
        let mut dtc = Command::new("dtc")
            .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
            .arg(dtb)
            .arg("-")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running dtc")?;
        dtc.stdin
            .take()
            .context("dtc's input")?
            .write_all(source.as_bytes())?;
        let done = dtc.wait_with_output()?;
        ensure!(
            done.status.success(),
            "dtc could not merge the reserved-memory node: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        Ok(())
    }
}

/// Waits for QEMU, started at `started`, to exit as its guest powers off,
/// and returns how long it ran; fails when it exits otherwise, and kills
/// it past `timeout`, with the end of the serial log.
fn wait_for_power_off(
    child: &mut Child,
    started: Instant,
    timeout: Duration,
    serial: &Path,
) -> Result<Duration> {
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                bail!("QEMU exited with {status}: {err}");
            }
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            kill(child);
            bail!(
                "guest did not power off within {timeout:?}; end of its serial log ({}):\n{}",
                serial.display(),
                tail(serial, 40)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Running {
    /// The next reply line (a return or an error), skipping events.
    fn read_reply(&mut self) -> Result<String> {
        loop {
            let mut line = String::new();
            if self.qmp.read_line(&mut line)? == 0 {
                bail!("QMP connection closed");
            }
            if !line.contains("\"event\"") {
                return Ok(line);
            }
        }
    }

    /// Sends one QMP command and returns its reply; a QMP error fails.
    pub fn execute(&mut self, command: &str) -> Result<String> {
        let stream = self.qmp.get_mut();
        stream.write_all(command.as_bytes())?;
        stream.write_all(b"\n")?;
        let reply = self.read_reply()?;
        if reply.contains("\"error\"") {
            bail!("QMP {command} failed: {}", reply.trim());
        }
        Ok(reply)
    }

    /// Waits until the serial log contains `text`.
    pub fn wait_for_serial(&mut self, text: &str, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        loop {
            let log = std::fs::read_to_string(&self.serial).unwrap_or_default();
            if log.contains(text) {
                return Ok(start.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "QEMU exited ({status}) before the guest printed {text:?}:\n{}",
                    tail(&self.serial, 40)
                );
            }
            if start.elapsed() > timeout {
                bail!(
                    "the guest did not print {text:?} within {timeout:?}:\n{}",
                    tail(&self.serial, 40)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for the guest to power off, as [`Vm::run`] does, and returns
    /// how long QEMU ran.
    pub fn wait_for_exit(mut self, timeout: Duration) -> Result<Duration> {
        wait_for_power_off(&mut self.child, self.started, timeout, &self.serial)
    }

    /// Kills QEMU at once, as a power cut would: no flush, no shutdown.
    pub fn power_cut(mut self) {
        kill(&mut self.child);
    }

    /// Stops QEMU.
    pub fn quit(mut self) {
        let _ = self.execute(r#"{"execute":"quit"}"#);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        kill(&mut self.child);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill(&mut self.child);
        }
    }
}

/// Host times at which lines first appeared in a serial log, for spans a
/// guest clock cannot give (a crash and the reboot after it): a thread
/// reads the log every 20 ms from [`SerialClock::watch`] on.
pub struct SerialClock {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Option<Duration>>>,
}

impl SerialClock {
    /// Starts watching `serial` (removed first, so that only the coming
    /// run counts) for each of `needles`.
    pub fn watch(serial: &Path, needles: &[&str]) -> SerialClock {
        use std::sync::atomic::{AtomicBool, Ordering};
        let _ = std::fs::remove_file(serial);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (path, needles) = (
            serial.to_path_buf(),
            needles.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        );
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut seen = vec![None; needles.len()];
            loop {
                // The flag before the read: the last read comes after the
                // stop, so a line written just before it still counts.
                let last = stopping.load(Ordering::Acquire);
                let log = std::fs::read_to_string(&path).unwrap_or_default();
                for (at, needle) in seen.iter_mut().zip(&needles) {
                    if at.is_none() && log.contains(needle.as_str()) {
                        *at = Some(start.elapsed());
                    }
                }
                if last {
                    return seen;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        SerialClock { stop, thread }
    }

    /// Stops watching: for each needle, when it first appeared, if it did.
    pub fn stop(self) -> Vec<Option<Duration>> {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().unwrap_or_default()
    }
}
