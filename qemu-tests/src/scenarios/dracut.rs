//! `dracut-early`: crashring's dracut module (`90crashring-early`, which
//! the crashring package installs for Fedora's and RHEL's machines) booted.
//! Debian's dracut builds a generic initramfs for the guest's kernel as
//! it would on an armed machine: arm's own files (the modules-load.d list
//! that arms the module's `check()`, the modprobe.d options) in /etc, the
//! module where DKMS installs it. The guest runs dracut's own init; a hook
//! after crashring's, still before udev starts and long before any root
//! file system, writes a marker and says what it sees, then QEMU dumps
//! the guest's memory and the host reads the region in it.

use super::warm_reboot::said_after;
use super::{check_backfill, ensure_running, fields, text, uint, Artifacts};
use crate::env::guest::{self, Kernel};
use crate::env::qemu::{self, Start, Vm};
use crate::env::Arch;
use anyhow::{ensure, Context, Result};
use extractor::discover;
use extractor::input::{self, source::FileSource};
use extractor::phys::PhysAddr;
use kexec_hooks::arm::{self, MODPROBE, MODULES_LOAD};
use kexec_hooks::iomem::Placement;
use kexec_hooks::reserve::Reservation;
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{EVENT_MARKER, EVENT_PRINTK, PRINTK_BACKFILLED};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use xshell::{cmd, Shell};

/// Where arm placed the region (the guest's `memmap=`).
const REGION: Placement = Placement {
    start: 0x3000_0000,
    size: 16 << 20,
};

/// What the hook writes to /dev/crashring.
const MARKER: &str = "dracut-early: before udev";

/// The test's own dracut module: its hook runs in the same stage as
/// crashring's (pre-udev), after it.
const TEST_MODULE_SETUP: &str = r#"#!/bin/bash
check() { return 0; }
depends() { echo crashring-early; }
install() { inst_hook pre-udev 99 "$moddir/report.sh"; }
"#;

/// What the hook says, then it waits for the host's dump.
fn report_hook() -> String {
    format!(
        r#"#!/bin/sh
echo "crashring-test: loaded $(cat /sys/module/crashring/initstate 2>&1)"
echo "crashring-test: region $(cat /sys/module/crashring/parameters/region 2>&1)"
echo "crashring-test: udev $(if [ -e /run/udev/control ]; then echo started; else echo not-started; fi)"
if [ -c /dev/crashring ]; then
  echo "{MARKER}" > /dev/crashring
  echo "crashring-test: marker $?"
else
  echo "crashring-test: marker no /dev/crashring"
fi
echo "crashring-test: done"
sleep 600
"#
    )
}

pub fn dracut_early(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let module = guest::build_module(sh, k)?;
    let initrd = initramfs(sh, k, &module, &art.dir)?;
    let serial = art.dir.join("serial.log");
    let vm = Vm {
        arch: Arch::X86_64,
        start: Start::Kernel {
            kernel: &k.vmlinuz,
            initrd: &initrd,
            append: format!(
                "console=ttyS0 panic=-1 loglevel=4 rd.shell=0 root=/dev/vda memmap={}${:#x}",
                REGION.size, REGION.start
            ),
        },
        memory: "1G",
        cpus: 2,
        disks: vec![],
        extra: vec![],
        serial: serial.clone(),
        timeout: Duration::from_secs(240),
    };
    let mut running = vm.start(&art.dir.join("qmp.sock"))?;
    let booted = running.wait_for_serial("crashring-test: done", Duration::from_secs(240))?;
    let dump = art.dir.join("dump.elf");
    let _ = std::fs::remove_file(&dump);
    running.execute(&format!(
        r#"{{"execute":"dump-guest-memory","arguments":{{"paging":false,"protocol":"file:{}","format":"elf"}}}}"#,
        dump.display()
    ))?;
    running.quit();
    let log = std::fs::read_to_string(&serial)?;
    let checked = check_guest(&log)
        .and_then(|guest| Ok(format!("{guest}; {}", check_dump(&dump)?)))
        .with_context(|| {
            format!(
                "serial log {}:\n{}",
                serial.display(),
                qemu::tail(&serial, 40)
            )
        })?;
    if !art.kept {
        let _ = std::fs::remove_file(&dump);
    }
    Ok(format!(
        "{checked}; dracut's init reached the hook {:.1} s after QEMU started",
        booted.as_secs_f64()
    ))
}

/// The initramfs dracut builds on an armed machine with the module
/// installed: dracut's own modules and crashring's, with arm's files in
/// /etc (bound over the host's in a mount namespace of dracut's own, so
/// that nothing of the host changes) and the module in a module tree of
/// its own (`--kmoddir`), depmod's files made for it.
fn initramfs(sh: &Shell, k: &Kernel, module: &Path, dir: &Path) -> Result<PathBuf> {
    let work = tempfile::tempdir_in(dir)?;
    let w = work.path();
    let modprobe = w.join("modprobe.d");
    let modules_load = w.join("modules-load.d");
    for (d, path, text) in [
        (
            &modprobe,
            MODPROBE,
            arm::modprobe(Reservation::Memmap(REGION)),
        ),
        (&modules_load, MODULES_LOAD, arm::modules_load()),
    ] {
        let name = Path::new(path).file_name().context("arm's file")?;
        sh.create_dir(d)?;
        std::fs::write(d.join(name), text)?;
    }
    let release = &k.release;
    let kmoddir = w.join("lib/modules").join(release);
    sh.create_dir(kmoddir.join("updates/dkms"))?;
    sh.copy_file(module, kmoddir.join("updates/dkms/crashring.ko"))?;
    for f in [
        "modules.builtin",
        "modules.builtin.modinfo",
        "modules.order",
    ] {
        sh.copy_file(k.modules.join(f), &kmoddir)?;
    }
    cmd!(sh, "depmod -b {w} {release}").quiet().run()?;
    let base = w.join("dracut");
    cmd!(sh, "cp -a /usr/lib/dracut {base}").quiet().run()?;
    let ours = sh
        .current_dir()
        .join("kexec-hooks/dracut/90crashring-early");
    let modules = base.join("modules.d");
    cmd!(sh, "cp -a {ours} {modules}/").quiet().run()?;
    let test = modules.join("99crashring-test");
    sh.create_dir(&test)?;
    for (name, body) in [
        ("module-setup.sh", TEST_MODULE_SETUP.to_string()),
        ("report.sh", report_hook()),
    ] {
        std::fs::write(test.join(name), body)?;
        cmd!(sh, "chmod 0755 {test}/{name}").quiet().run()?;
    }
    let confdir = w.join("conf.d");
    sh.create_dir(&confdir)?;
    let initrd = dir.join("initrd.img");
    let etc_modprobe = Path::new(MODPROBE).parent().context("MODPROBE")?;
    let etc_modules_load = Path::new(MODULES_LOAD).parent().context("MODULES_LOAD")?;
    let script = format!(
        "mount --bind {} {} && mount --bind {} {} && exec dracut --quiet --no-hostonly --no-early-microcode --no-compress --conf /dev/null --confdir {} --kver {release} --kmoddir {} --modules 'base rootfs-block crashring-early crashring-test' --force {}",
        modprobe.display(),
        etc_modprobe.display(),
        modules_load.display(),
        etc_modules_load.display(),
        confdir.display(),
        kmoddir.display(),
        initrd.display()
    );
    let base = base.display().to_string();
    let out = cmd!(sh, "unshare --mount --propagation private sh -c {script}")
        .env("dracutbasedir", &base)
        .quiet()
        .ignore_status()
        .output()?;
    ensure!(
        out.status.success(),
        "dracut failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(initrd)
}

/// What the hook said: the module loaded, with arm's range, before udev
/// started, and the marker written.
fn check_guest(log: &str) -> Result<String> {
    let said = |what: &str| said_after(log, what).unwrap_or_default();
    ensure!(
        said("loaded") == "live",
        "crashring is not loaded when the hook after crashring-early's runs ({:?})",
        said("loaded")
    );
    ensure!(
        said("region") == REGION.to_string(),
        "the module runs with region={:?}, not arm's {REGION}: its options did not come in with the initramfs",
        said("region")
    );
    ensure!(
        said("udev") == "not-started",
        "udev was {:?} when the hook ran",
        said("udev")
    );
    ensure!(
        said("marker") == "0",
        "writing to /dev/crashring failed ({:?})",
        said("marker")
    );
    Ok(format!(
        "dracut's initramfs loaded the module before udev started, with arm's options (region={REGION})"
    ))
}

/// The region in the dump, recording: the hook's marker, and the boot's
/// printk lines from before the module loaded, backfilled.
fn check_dump(dump: &Path) -> Result<String> {
    let opened = input::open(Arc::new(FileSource::open(dump)?))?;
    let found = discover::read_at(
        &*opened.memory,
        PhysAddr(REGION.start),
        None,
        HeaderTrust::Checksummed,
    )?;
    let region = Region::parse(&found.bytes, HeaderTrust::Checksummed)?;
    ensure_running(&region, "the guest was still booting when QEMU dumped it")?;
    let (mut printk, mut backfilled, mut markers) = (Vec::new(), Vec::new(), 0);
    for st in &region.decode().streams {
        for ev in &st.events {
            match ev.type_id {
                EVENT_PRINTK => {
                    let f = fields(&region, ev)?;
                    let line = text(&f, "text")?;
                    if uint(&f, "flags")? & u64::from(PRINTK_BACKFILLED) != 0 {
                        backfilled.push((ev.ts, line.clone()));
                    }
                    printk.push((ev.ts, line));
                }
                EVENT_MARKER => {
                    let f = fields(&region, ev)?;
                    if text(&f, "text")?.trim_end() == MARKER {
                        markers += 1;
                    }
                }
                _ => {}
            }
        }
    }
    ensure!(
        markers == 1,
        "the region holds the hook's marker {markers} times, not once"
    );
    let backfill = check_backfill(&region, &printk, &backfilled)?;
    Ok(format!(
        "the region in QEMU's dump holds the hook's marker and {backfill}"
    ))
}
