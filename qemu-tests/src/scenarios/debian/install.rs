//! Putting crashring on a scenario's Debian guest, as a user would: the
//! packages installed with apt (DKMS builds the module in the guest),
//! then the site's own setup and `crashring arm`, each in a boot of its
//! own whose image is kept for the scenarios that begin the same way; or
//! a machine imaged with its packages and crashring's, armed in its first
//! boot.

use super::{job, report, said, Artifacts, BootPath, Installed, CPUS, IN_INITRAMFS, MEMORY};
use crate::checks::package;
use crate::env::debian::{self, Image};
use crate::env::guest::{self, Kernel};
use crate::env::qemu::{self, Start, Vm};
use crate::env::{self, work_dir, Arch};
use anyhow::{ensure, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, TryLockError};
use std::time::Duration;
use xshell::Shell;

/// Installs the packages from /root as a user would, with apt.
const APT_INSTALL: &str =
    "cd /root && apt-get install -q -y ./crashring_*.deb ./crashring-dkms_*.deb > /root/apt.log 2>&1";

/// Adds the box's unprivileged users (uid 1000 and 1001), allowed to add
/// markers.
const USERS: &str = "useradd --create-home --groups crashring kiosk
useradd --create-home --groups crashring visitor
";

/// What the installed machine says of the install: the module DKMS
/// built, the group the package made.
const INSTALLED: &str = r#"say "dkms $(dkms status crashring | tr '\n' ' ')"
say "group $(getent group crashring | cut -d: -f1)"
"#;

/// The first boot of the common machine: the packages installed (its
/// outcome said), its users added; arms nothing.
fn install_steps() -> String {
    format!(
        r#"if {APT_INSTALL}; then
  say "installed"
else
  say "apt-get install failed"; tail -n 40 /root/apt.log
fi
{INSTALLED}{USERS}"#
    )
}

/// Every site's initramfs holds the modules its own boot needs
/// (`MODULES=dep`), as an appliance's image is built: Debian's
/// `MODULES=most` makes each update-initramfs (arm's, disarm's,
/// kernel-install's, a purge's) take minutes of the emulated CPU, with
/// `dep` seconds. The hook under test force-loads crashring either way.
const SMALL_INITRAMFS: &str = "echo MODULES=dep > /etc/initramfs-tools/conf.d/modules\n";

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
        r#"{SMALL_INITRAMFS}{packages}{before_arm}crashring arm --dry-run
say "dry-run $?"
crashring arm
say "arm $?"
crashring arm --dry-run | while read -r line; do say "rearm $line"; done
# What arm's update-initramfs put in the running kernel's initramfs (the
# hook's module and arm's options): 2.
say "initramfs {IN_INITRAMFS}"
{after_arm}crashring status 2>&1 | while read -r line; do say "status $line"; done
"#,
        before_arm = site.before_arm,
        after_arm = site.after_arm,
    ))
}

/// The machine a scenario arms: a package set (one of the guest's
/// offline sets) it was imaged with, crashring's packages installed in
/// the same image, or one its admin installs with apt before arming; the
/// site's own configuration before `crashring arm` and what runs after
/// it; and how it boots once armed.
///
/// A set that rebuilds the initramfs (kdump-tools) is one the machine is
/// imaged with: installed in a chroot it takes seconds, in the guest ten
/// minutes of emulated CPU, as long again as DKMS building the module
/// there, which the common machine's first boot already proves. Others
/// (systemd-boot) go on the machine every site shares, as its admin
/// would install them.
pub(super) struct Site<'a> {
    pub(super) imaged_with: Option<&'a str>,
    pub(super) packages: Option<&'a str>,
    pub(super) before_arm: &'a str,
    pub(super) after_arm: &'a str,
    pub(super) boot: BootPath,
}

/// The scenario's guest, installed and armed. On the common machine the
/// packages are installed (DKMS building the module) in one boot, which
/// every site begins from (made once, then copied), and the site is set
/// up and armed in a second; a site armed the same way before is copied
/// too. A machine imaged with its packages is armed in its first boot.
pub(super) fn install(sh: &Shell, k: &Kernel, art: &Artifacts, site: &Site) -> Result<Installed> {
    let (root, debs) = root_file_system(sh, k, site.imaged_with)?;
    let first = debian::first_boot(&root.dir, &k.release);
    let key = installed_key(&root, &debs)?;
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
    let armed = |to: &Path| -> Result<()> {
        let serial = art.dir.join("arm.log");
        let image = if site.imaged_with.is_some() {
            eprintln!(
                "debian: first boot of the imaged machine: the site's setup, then crashring arm"
            );
            let image = Image::create(sh, &root.dir, to, &[])?;
            job_boot(
                &first,
                &image,
                site_disks()?,
                &job(&format!("{INSTALLED}{arm}")),
                &serial,
                JOB_BOOT,
            )?;
            image
        } else {
            let install_log = art.dir.join("install.log");
            let image = installed(sh, k, (&root, &debs), to, &install_log, JOB_BOOT)?;
            eprintln!("debian: the site's setup, then crashring arm");
            job_boot(&first, &image, site_disks()?, &job(&arm), &serial, JOB_BOOT)?;
            image
        };
        let log = report(sh, &image)?;
        if site.imaged_with.is_some() {
            check_installed(k, &log)?;
        }
        check_armed(site, &log, &serial)
    };
    let path = art.dir.join("root.img");
    // An armed site is kept for another scenario when all of it is on
    // its root disk and the machine is the common one: a systemd-boot
    // site also wrote its ESP, and an imaged machine has one site.
    let image = if site.imaged_with.is_none() && site.boot != BootPath::SystemdBoot {
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

/// How long a job boot may take: the install boot, DKMS building the
/// module, takes about ten minutes of a host core.
const JOB_BOOT: Duration = Duration::from_secs(15 * 60);

/// How long the install boot begun ahead may take: niced, it shares a
/// core with the checks beside the scenarios until they end.
const AHEAD_JOB_BOOT: Duration = Duration::from_secs(45 * 60);

/// The text of everything the common machine's install boot begins
/// from (its root file system's recipe, its job, each package's
/// digest): the key its image is kept under.
fn installed_key(root: &debian::Rootfs, debs: &[PathBuf]) -> Result<String> {
    let mut key = format!("{}\n{}\n", root.recipe, install_steps());
    for deb in debs {
        let bytes = std::fs::read(deb).with_context(|| format!("reading {}", deb.display()))?;
        key += &format!("{} {:x}\n", deb.display(), Sha256::digest(bytes));
    }
    Ok(key)
}

/// Held while the common machine is installed: a scenario that needs it
/// while the install begun ahead still runs waits, then finds it kept.
static INSTALLING: Mutex<()> = Mutex::new(());

/// The common machine with crashring's packages installed by apt in its
/// first boot (DKMS building the module in the guest), at `to`: a copy
/// of the one kept from the same root file system and packages, or made
/// by that boot (its console logged to `serial`) and then kept.
fn installed(
    sh: &Shell,
    k: &Kernel,
    (root, debs): (&debian::Rootfs, &[PathBuf]),
    to: &Path,
    serial: &Path,
    timeout: Duration,
) -> Result<Image> {
    let key = installed_key(root, debs)?;
    let _one = match INSTALLING.try_lock() {
        Ok(held) => held,
        Err(TryLockError::Poisoned(held)) => held.into_inner(),
        Err(TryLockError::WouldBlock) => {
            eprintln!("debian: waiting for the install boot begun ahead");
            INSTALLING.lock().unwrap_or_else(PoisonError::into_inner)
        }
    };
    debian::kept_image(sh, "installed", &key, to, |to| {
        let image = Image::create(sh, &root.dir, to, debs)?;
        eprintln!(
            "debian: first boot: apt install ./crashring*.deb (DKMS builds the module; console in {})",
            serial.display()
        );
        let first = debian::first_boot(&root.dir, &k.release);
        job_boot(
            &first,
            &image,
            vec![],
            &job(&install_steps()),
            serial,
            timeout,
        )?;
        let log = report(sh, &image)?;
        check_apt(&log, serial)?;
        check_installed(k, &log)
    })
}

/// The common machine installed ahead of the scenarios that begin from
/// it (`cargo xtask test` runs this beside the busybox scenarios): its
/// guest runs niced as the checks beside them do, so that the busybox
/// guests keep their core, and takes the other from the checks as they
/// end. What fails here is done again, and reported, by the scenario.
pub(super) fn install_ahead(sh: &Shell, k: &Kernel) -> Result<()> {
    let (root, debs) = root_file_system(sh, k, None)?;
    let dir = work_dir(sh).join("debian/ahead");
    sh.create_dir(&dir)?;
    env::nice_this_thread(env::NICE_BESIDE)?;
    let to = dir.join("root.img");
    installed(
        sh,
        k,
        (&root, &debs),
        &to,
        &dir.join("install.log"),
        AHEAD_JOB_BOOT,
    )?;
    // Kept under debian/installed.img: this copy is done with.
    std::fs::remove_file(&to).with_context(|| format!("removing {}", to.display()))
}

/// The root file system a machine begins from (the common one, or one
/// imaged with the set `imaged_with` and crashring's packages), and the
/// packages and programs that go on it: crashring's two, and the
/// compositor-like program report-without-crash runs (built against the
/// packaged crashring-user).
pub(super) fn root_file_system(
    sh: &Shell,
    k: &Kernel,
    imaged_with: Option<&str>,
) -> Result<(debian::Rootfs, Vec<PathBuf>)> {
    let base = debian::rootfs(sh, &k.release)?;
    let mut debs = package::build(sh)?;
    debs.push(guest::build_debian_compositor(sh)?);
    let root = match imaged_with {
        Some(set) => {
            let then = format!("{APT_INSTALL}\n{USERS}");
            debian::rootfs_imaged(sh, &base, set, &debs, &then)?
        }
        None => base,
    };
    Ok((root, debs))
}

/// Boots the guest on `image` (and `disks` after the job disk) as it was
/// built, before any grub.cfg, with `script` as its job, until it powers
/// off or `timeout` passes, its console logged to `serial` and its job
/// disk beside it.
fn job_boot(
    first: &debian::Boot,
    image: &Image,
    disks: Vec<PathBuf>,
    script: &str,
    serial: &Path,
    timeout: Duration,
) -> Result<()> {
    let job = serial.with_file_name("job.img");
    debian::job_disk(&job, script)?;
    Vm {
        arch: Arch::X86_64,
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
        timeout,
    }
    .run()
    .map(drop)
}

/// The install boot's apt-get install of both packages succeeded.
fn check_apt(log: &str, serial: &Path) -> Result<()> {
    ensure!(
        log.lines()
            .any(|l| l.trim_end().ends_with("crashring-test: installed")),
        "apt-get install of the packages failed:\n{}",
        qemu::tail(serial, 40)
    );
    Ok(())
}

/// DKMS built and installed the module for the guest's kernel and the
/// package made the crashring group.
fn check_installed(k: &Kernel, log: &str) -> Result<()> {
    let one = |what: &str| said(log, what).first().copied().unwrap_or_default();
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
    ensure!(
        one("initramfs") == "2",
        "the initramfs arm built holds {:?} of crashring.ko and /etc/modprobe.d/crashring.conf, not both",
        one("initramfs")
    );
    // Arming an armed machine changes nothing.
    let rearm = said(log, "rearm");
    ensure!(
        rearm.is_empty(),
        "crashring arm --dry-run after arm still shows changes: {rearm:?}"
    );
    Ok(())
}
