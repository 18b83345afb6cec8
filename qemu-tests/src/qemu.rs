//! Running QEMU: a guest with a time limit, its serial console in a file.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One VM to boot.
pub struct Vm<'a> {
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub append: String,
    pub memory: &'a str,
    pub cpus: u32,
    /// Raw disk images, attached as virtio disks vda, vdb, ...
    pub disks: Vec<PathBuf>,
    pub extra: Vec<String>,
    pub serial: PathBuf,
    pub timeout: Duration,
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
    fn command(&self) -> Command {
        let mut c = Command::new("qemu-system-x86_64");
        c.args([
            "-accel",
            "tcg",
            "-cpu",
            "max",
            "-display",
            "none",
            "-monitor",
            "none",
            "-nodefaults",
        ]);
        c.args(["-smp", &self.cpus.to_string(), "-m", self.memory]);
        c.arg("-serial")
            .arg(format!("file:{}", self.serial.display()));
        c.arg("-kernel")
            .arg(self.kernel)
            .arg("-initrd")
            .arg(self.initrd);
        c.arg("-append").arg(&self.append);
        for d in &self.disks {
            c.arg("-drive")
                .arg(format!("file={},format=raw,if=virtio", d.display()));
        }
        c.args(&self.extra);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Boots the VM and waits for it to power off; fails on a time-out
    /// with the end of the serial log.
    pub fn run(&self) -> Result<Duration> {
        let start = Instant::now();
        let mut child = self
            .command()
            .spawn()
            .context("starting qemu-system-x86_64 (run `cargo xtask setup`)")?;
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
                return Ok(start.elapsed());
            }
            if start.elapsed() > self.timeout {
                kill(&mut child);
                bail!(
                    "guest did not power off within {:?}; end of its serial log ({}):\n{}",
                    self.timeout,
                    self.serial.display(),
                    tail(&self.serial, 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
