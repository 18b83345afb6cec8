//! Putting crashring on a scenario's Debian guest, as a user would: the
//! packages installed with apt (DKMS builds the module in the guest),
//! then the site's own setup and `crashring arm`, each in a boot of its
//! own whose image is kept for the scenarios that begin the same way.

use super::{job, report, said, Artifacts, BootPath, Installed, CPUS, MEMORY};
use crate::checks::package;
use crate::env::debian::{self, Image};
use crate::env::guest::{self, Kernel};
use crate::env::qemu::{self, Start, Vm};
use anyhow::{ensure, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;
use xshell::Shell;

/// Installs the packages from /root as a user would and adds the box's
/// unprivileged users (uid 1000 and 1001), allowed to add markers; arms
/// nothing.
const INSTALL_STEPS: &str = r#"cd /root
if apt-get install -q -y ./crashring_*.deb ./crashring-dkms_*.deb > /root/apt.log 2>&1; then
  say "installed"
else
  say "apt-get install failed"; tail -n 40 /root/apt.log
fi
say "dkms $(dkms status crashring | tr '\n' ' ')"
say "group $(getent group crashring | cut -d: -f1)"
useradd --create-home --groups crashring kiosk
useradd --create-home --groups crashring visitor
"#;

/// The site's own setup on the installed machine: its package set
/// installed with apt, its configuration (`before_arm`), `crashring arm`,
/// what runs after it, `status`.
fn arm_steps(site: &Site) -> Result<String> {
    let packages = match site.packages {
        Some(name) => format!(
            "{} || {{ say \"installing {name} failed\"; tail -n 20 /root/apt-{name}.log; }}\n",
            debian::offline_install(name)?
        ),
        None => String::new(),
    };
    Ok(format!(
        r#"{packages}{before_arm}crashring arm --dry-run
say "dry-run $?"
crashring arm
say "arm $?"
crashring arm --dry-run | while read -r line; do say "rearm $line"; done
{after_arm}crashring status 2>&1 | while read -r line; do say "status $line"; done
"#,
        before_arm = site.before_arm,
        after_arm = site.after_arm,
    ))
}

/// The machine a scenario arms: a package set (one of the guest's
/// offline sets) it came with, before crashring, and one its admin
/// installs with apt before arming; the site's own configuration before
/// `crashring arm` and what runs after it; and how it boots once armed.
///
/// A set that rebuilds the initramfs (kdump-tools) is one the machine
/// comes with: installed in a chroot it takes seconds, in the guest
/// minutes of emulated CPU. Others (systemd-boot) go on the machine every
/// site shares, as its admin would install them.
pub(super) struct Site<'a> {
    pub(super) came_with: Option<&'a str>,
    pub(super) packages: Option<&'a str>,
    pub(super) before_arm: &'a str,
    pub(super) after_arm: &'a str,
    pub(super) boot: BootPath,
}

/// The scenario's guest, installed and armed. On the common machine the
/// packages are installed (DKMS building the module) in one boot, which
/// every site begins from (made once, then copied), and the site is set
/// up and armed in a second; a site armed the same way before is copied
/// too. A machine that came with packages of its own installs and arms in
/// one boot.
pub(super) fn install(sh: &Shell, k: &Kernel, art: &Artifacts, site: &Site) -> Result<Installed> {
    let base = debian::rootfs(sh, &k.release)?;
    let root = match site.came_with {
        Some(set) => debian::rootfs_with(sh, &base, set)?,
        None => base,
    };
    // The packages, and the compositor-like program report-without-crash
    // runs (built against the packaged crashring-user).
    let mut debs = package::build(sh)?;
    debs.push(guest::build_debian_compositor(sh)?);
    let first = debian::first_boot(&root.dir, &k.release);
    let mut key = format!("{}\n{INSTALL_STEPS}\n", root.recipe);
    for deb in &debs {
        let bytes = std::fs::read(deb).with_context(|| format!("reading {}", deb.display()))?;
        key += &format!("{} {:x}\n", deb.display(), Sha256::digest(bytes));
    }
    let arm = arm_steps(site)?;
    // The disks the site's setup writes besides its root disk: an empty
    // ESP for systemd-boot to be installed on.
    let site_disks = || -> Result<Vec<PathBuf>> {
        if site.boot != BootPath::SystemdBoot {
            return Ok(vec![]);
        }
        let esp = art.dir.join("esp.img");
        debian::esp_disk(sh, &esp, debian::ESP_MIB_FOR_KERNELS, None)?;
        Ok(vec![esp])
    };
    // A boot on a fresh image of the root file system: the packages
    // installed, then `then` (the site's arming, or nothing).
    let install_boot = |to: &Path, disks: Vec<PathBuf>, then: &str| -> Result<()> {
        let image = Image::create(sh, &root.dir, to, &debs)?;
        eprintln!("debian: first boot: apt install ./crashring*.deb (DKMS builds the module)");
        let serial = art.dir.join("install.log");
        let steps = format!("{INSTALL_STEPS}{then}");
        job_boot(&first, &image, disks, &job(&steps), &serial, art)?;
        check_installed(k, &report(sh, &image)?, &serial)
    };
    let armed = |to: &Path| -> Result<()> {
        // A machine that came with packages of its own is one site's
        // alone: nothing to share, so one boot installs and arms.
        if site.came_with.is_some() {
            install_boot(to, site_disks()?, &arm)?;
            let serial = art.dir.join("install.log");
            return check_armed(site, &report(sh, &Image::at(to))?, &serial);
        }
        debian::kept_image(sh, "installed", &key, to, |to| install_boot(to, vec![], ""))?;
        let disks = site_disks()?;
        eprintln!("debian: the site's setup, then crashring arm");
        let serial = art.dir.join("arm.log");
        let image = Image::at(to);
        job_boot(&first, &image, disks, &job(&arm), &serial, art)?;
        check_armed(site, &report(sh, &image)?, &serial)
    };
    let path = art.dir.join("root.img");
    // An armed site is kept for another scenario when all of it is on
    // its root disk and the machine is the common one: a systemd-boot
    // site also wrote its ESP, and a machine of its own has one site.
    let image = if site.came_with.is_none() && site.boot != BootPath::SystemdBoot {
        debian::kept_image(sh, "armed", &format!("{key}{arm}"), &path, armed)?
    } else {
        armed(&path)?;
        Image::at(&path)
    };
    let boot = match site.boot {
        BootPath::Kernel | BootPath::Uefi => Some(image.grub_boot(sh, &art.dir)?),
        BootPath::SystemdBoot => None,
    };
    let log = report(sh, &image)?;
    Ok(Installed {
        image,
        boot,
        how: site.boot,
        log,
    })
}

/// Boots the guest on `image` (and `disks` after the job disk) as it was
/// built, before any grub.cfg, with `script` as its job, until it powers
/// off.
fn job_boot(
    first: &debian::Boot,
    image: &Image,
    disks: Vec<PathBuf>,
    script: &str,
    serial: &Path,
    art: &Artifacts,
) -> Result<()> {
    let job = art.dir.join("job.img");
    debian::job_disk(&job, script)?;
    Vm {
        start: Start::Kernel {
            kernel: &first.kernel,
            initrd: &first.initrd,
            append: first.append.clone(),
        },
        memory: MEMORY,
        cpus: CPUS,
        disks: [vec![image.path.clone(), job], disks].concat(),
        extra: vec!["-no-reboot".into()],
        serial: serial.to_path_buf(),
        timeout: Duration::from_secs(15 * 60),
    }
    .run()
    .map(drop)
}

/// The install boot installed both packages, DKMS built the module for
/// the guest's kernel and the package made the crashring group.
fn check_installed(k: &Kernel, log: &str, serial: &Path) -> Result<()> {
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
    ensure!(
        log.lines()
            .any(|l| l.trim_end().ends_with("crashring-test: installed")),
        "apt-get install of the packages failed:\n{}",
        qemu::tail(serial, 40)
    );
    ensure!(
        one("dkms").contains(&format!("{}, x86_64: installed", k.release)),
        "DKMS did not build and install the module for {}: {:?}",
        k.release,
        one("dkms")
    );
    ensure!(
        one("group") == "crashring",
        "installing crashring made no crashring group: {:?}",
        one("group")
    );
    Ok(())
}

/// The arm boot installed the site's packages, and `crashring arm`
/// succeeded and left nothing to do for a second run.
fn check_armed(site: &Site, log: &str, serial: &Path) -> Result<()> {
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
    if let Some(name) = site.packages {
        ensure!(
            said(log, &format!("installing {name}")).is_empty(),
            "apt-get install of {name} in the guest failed:\n{}",
            qemu::tail(serial, 40)
        );
    }
    ensure!(
        one("dry-run") == "0" && one("arm") == "0",
        "crashring arm failed (dry run {:?}, arm {:?}):\n{}",
        one("dry-run"),
        one("arm"),
        qemu::tail(serial, 40)
    );
    // Arming an armed machine changes nothing.
    let rearm = said(log, "rearm");
    ensure!(
        rearm.is_empty(),
        "crashring arm --dry-run after arm still shows changes: {rearm:?}"
    );
    Ok(())
}
