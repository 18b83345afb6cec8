//! A real Debian 12 guest: a systemd root file system that mmdebstrap
//! builds from the archive the host's apt uses (bookworm, its updates and
//! security suites, and backports), with the kernel `setup` picked, its
//! headers, DKMS and GRUB's configuration tools, as a user's machine has
//! them, and the package sets some machines add (kdump-tools,
//! systemd-boot) downloaded into it, as the guest has no network. The
//! guest boots the way GRUB would boot it: the kernel, initrd and
//! command line of the first entry of the guest's own `/boot/grub/grub.cfg`
//! (as `update-grub` wrote it) are read off the image and handed to QEMU.
//! GRUB itself is not installed: a partitioned disk with a boot sector
//! would need loop devices, which the harness does not assume.
//!
//! The harness talks to the guest through a job disk (`/dev/vdb`: a shell
//! script, NUL-padded) that `crashring-harness.service` runs once the
//! system is up, with its output on the serial console; files come back
//! off the image with debugfs once the guest is off.

use super::work_dir;
use anyhow::{bail, ensure, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use xshell::{cmd, Shell};

/// The suites the root file system is built from: those of a Debian 12
/// machine with backports, where the 6.12 kernel comes from.
const SOURCES: &[&str] = &[
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
    "deb http://deb.debian.org/debian bookworm-backports main",
];

/// What every guest has besides the kernel: systemd, what DKMS needs to
/// build a module, and what `update-grub` needs (grub2-common; no boot
/// loader is installed, see the module's comment).
const PACKAGES: &[&str] = &[
    "systemd",
    "systemd-sysv",
    "udev",
    "kmod",
    "e2fsprogs",
    "procps",
    "initramfs-tools",
    "zstd",
    "dkms",
    "gcc",
    "make",
    "grub2-common",
];

/// The hostname bundles are named after.
pub const HOSTNAME: &str = "signage-01";

/// The job disk's size; the script must fit.
const JOB_BYTES: usize = 1 << 20;

/// The unit that runs the job on every boot, once the system is up.
const HARNESS_UNIT: &str = "[Unit]
Description=crashring test harness: runs the job script on /dev/vdb
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/crashring-harness
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
";

const HARNESS_SCRIPT: &str = "#!/bin/sh
# The job: a shell script at the start of /dev/vdb, padded with NULs.
head -c 1048576 /dev/vdb | tr -d '\\000' > /run/crashring-job
echo \"crashring-harness: up at $(cut -d ' ' -f 1 /proc/uptime) s\"
exec /bin/sh /run/crashring-job
";

/// The files the harness adds to the root file system, by path.
fn staged_files() -> Vec<(&'static str, String)> {
    vec![
        ("etc/hostname", format!("{HOSTNAME}\n")),
        (
            "etc/fstab",
            "/dev/vda / ext4 errors=remount-ro 0 1\n".into(),
        ),
        // A headless box's serial console, for the kernel and the harness.
        (
            "etc/default/grub.d/serial-console.cfg",
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX console=ttyS0\"\n".into(),
        ),
        (
            "etc/systemd/system/crashring-harness.service",
            HARNESS_UNIT.into(),
        ),
        ("usr/local/sbin/crashring-harness", HARNESS_SCRIPT.into()),
    ]
}

/// Package sets a scenario's machine has besides the common system, by
/// name: installed with apt into the running guest, as an admin would,
/// or into a copy of the root file system before its first boot
/// ([`rootfs_imaged`]). The guest has no network: each set is downloaded
/// while the root file system is built, with what it needs beyond the
/// common system, into a folder of its own under [`OFFLINE_DIR`], for
/// [`offline_install`].
const OFFLINE: &[(&str, &[&str])] = &[
    ("kdump-tools", &["kdump-tools", "makedumpfile"]),
    ("systemd-boot", &["systemd-boot"]),
];
const OFFLINE_DIR: &str = "/var/cache/crashring-test";

/// The guest's shell command that installs the [`OFFLINE`] set `name`
/// with apt-get, its output in /root/apt-`name`.log.
pub fn offline_install(name: &str) -> Result<String> {
    ensure!(
        OFFLINE.iter().any(|(n, _)| *n == name),
        "no package set {name:?} is downloaded into the guest"
    );
    Ok(format!(
        "apt-get install -q -y --no-install-recommends {OFFLINE_DIR}/{name}/*.deb > /root/apt-{name}.log 2>&1"
    ))
}

/// What the root file system is made of, as text: a different text means
/// a rebuild.
fn recipe(release: &str) -> String {
    let mut text = format!(
        "kernel {release}\nsources {SOURCES:?}\npackages {PACKAGES:?}\noffline {OFFLINE:?}\n"
    );
    for (path, body) in staged_files() {
        text += &format!("file {path}\n{body}");
    }
    text
}

/// The guest's root file system: a folder, and the recipe it was built
/// from.
pub struct Rootfs {
    pub dir: PathBuf,
    pub recipe: String,
}

/// Held while a root file system is built or imaged.
static ROOTFS: Mutex<()> = Mutex::new(());

/// The root file system with the kernel `release` (the 6.12 one `setup`
/// picked), built unless the one of the same recipe is there.
pub fn rootfs(sh: &Shell, release: &str) -> Result<Rootfs> {
    // One build at a time: a scenario waits for the one begun ahead of
    // it (`cargo xtask test` starts it beside the busybox scenarios),
    // then finds it made.
    let _one = ROOTFS.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = work_dir(sh).join("debian");
    let root = dir.join("rootfs");
    let stamp = dir.join("rootfs.recipe");
    let recipe = recipe(release);
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe) && root.is_dir() {
        return Ok(Rootfs { dir: root, recipe });
    }
    let _ = std::fs::remove_file(&stamp);
    if root.exists() {
        sh.remove_path(&root)?;
    }
    sh.create_dir(&dir)?;
    let stage = tempfile::tempdir_in(&dir)?;
    let log = dir.join("mmdebstrap.log");
    for (path, body) in staged_files() {
        let file = stage.path().join(path);
        sh.create_dir(file.parent().context("staged path")?)?;
        std::fs::write(&file, body)?;
        if path.contains("/sbin/") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    let mut include: Vec<String> = PACKAGES.iter().map(|p| p.to_string()).collect();
    include.push(format!("linux-image-{release}-unsigned"));
    include.push(format!("linux-headers-{release}"));
    let include = format!("--include={}", include.join(","));
    let no_recommends = "--aptopt=APT::Install-Recommends \"false\"";
    let sync_in = format!("--customize-hook=sync-in {} /", stage.path().display());
    let hooks = [
        sync_in,
        // What grub-pc's postinst would install, and where update-grub
        // writes.
        "--customize-hook=cp \"$1/usr/share/grub/default/grub\" \"$1/etc/default/grub\" && mkdir -p \"$1/boot/grub\"".to_string(),
        "--customize-hook=chroot \"$1\" systemctl enable --quiet crashring-harness.service".into(),
        // The console belongs to the harness, not a login prompt.
        "--customize-hook=chroot \"$1\" systemctl mask --quiet serial-getty@ttyS0.service".into(),
        // A persistent journal, so that each boot's messages stay.
        "--customize-hook=mkdir -p \"$1/var/log/journal\"".into(),
    ]
    .into_iter()
    .chain(OFFLINE.iter().map(|(name, packages)| {
        let to = format!("{OFFLINE_DIR}/{name}");
        format!(
            "--customize-hook=mkdir -p \"$1{to}/partial\" && chroot \"$1\" apt-get install -q -y --no-install-recommends --download-only -o Dir::Cache::archives={to}/ {}",
            packages.join(" ")
        )
    }))
    .collect::<Vec<_>>();
    eprintln!(
        "debian: building a Debian 12 root file system with mmdebstrap (about 350 MiB of packages from deb.debian.org; log in {})",
        log.display()
    );
    let out = cmd!(
        sh,
        "mmdebstrap --variant=minbase --mode=root --format=directory {include} {no_recommends} {hooks...} bookworm {root} {SOURCES...}"
    )
    .quiet()
    .ignore_status()
    .output()?;
    std::fs::write(&log, [out.stdout, out.stderr].concat())?;
    if !out.status.success() {
        bail!(
            "mmdebstrap failed ({}); its log is {}",
            out.status,
            log.display()
        );
    }
    std::fs::write(&stamp, &recipe)?;
    Ok(Rootfs { dir: root, recipe })
}

/// The root file system `base` imaged as a fleet's machines are, in a
/// chroot before their first boot: the [`OFFLINE`] set `name` installed
/// with apt, then `files` copied into /root and `then` run there (the
/// site's own packages installed from them). Built from a copy of `base`
/// unless the one of the same recipe is there.
pub fn rootfs_imaged(
    sh: &Shell,
    base: &Rootfs,
    name: &str,
    files: &[PathBuf],
    then: &str,
) -> Result<Rootfs> {
    let install = offline_install(name)?;
    let _one = ROOTFS.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = work_dir(sh).join("debian");
    let root = dir.join(format!("rootfs-{name}"));
    let stamp = dir.join(format!("rootfs-{name}.recipe"));
    let mut recipe = format!("{}with {name}\n", base.recipe);
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        recipe += &format!("{} {:x}\n", f.display(), Sha256::digest(bytes));
    }
    recipe += then;
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe) && root.is_dir() {
        return Ok(Rootfs { dir: root, recipe });
    }
    let _ = std::fs::remove_file(&stamp);
    if root.exists() {
        sh.remove_path(&root)?;
    }
    eprintln!("debian: the root file system imaged with {name} and crashring's packages (apt-get in a chroot)");
    let from = &base.dir;
    cmd!(sh, "cp -a {from} {root}").quiet().run()?;
    for f in files {
        sh.copy_file(f, root.join("root"))?;
    }
    // In mount and PID namespaces of its own, with a /proc and /dev of
    // their own, which DKMS needs and which go away with them: maintainer
    // scripts see no running system (no systemd) and start nothing, as
    // under mmdebstrap; DKMS builds the module for the image's kernel,
    // the newest it finds.
    let script = format!("set -e\n{install}\n{then}");
    let chroot = r#"mount --rbind /dev "$1/dev" && exec chroot "$1" env DEBIAN_FRONTEND=noninteractive sh -c "$2""#;
    let proc = format!("--mount-proc={}/proc", root.display());
    let out = cmd!(
        sh,
        "unshare --mount --pid --fork {proc} sh -c {chroot} sh {root} {script}"
    )
    .quiet()
    .ignore_status()
    .output()?;
    if !out.status.success() {
        bail!(
            "imaging {} failed: {}{}; apt's logs are {} and {}",
            root.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            root.join(format!("root/apt-{name}.log")).display(),
            root.join("root/apt.log").display()
        );
    }
    std::fs::write(&stamp, &recipe)?;
    Ok(Rootfs { dir: root, recipe })
}

/// The image at `to`: a copy of the one kept under `name` in the work
/// dir if that was made from the same `key` (the text of everything that
/// went into it), else what `make` writes at `to`, then kept. Boots that
/// several scenarios begin with (installing the packages, DKMS building
/// the module) run once.
pub fn kept_image(
    sh: &Shell,
    name: &str,
    key: &str,
    to: &Path,
    make: impl FnOnce(&Path) -> Result<()>,
) -> Result<Image> {
    let dir = work_dir(sh).join("debian");
    let (kept, stamp) = (
        dir.join(format!("{name}.img")),
        dir.join(format!("{name}.key")),
    );
    let copy = |from: &Path, to: &Path| -> Result<()> {
        let _ = std::fs::remove_file(to);
        cmd!(sh, "cp --sparse=always {from} {to}").quiet().run()?;
        Ok(())
    };
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == key) && kept.is_file() {
        eprintln!("debian: {name}: a copy of the image made from the same recipe");
        copy(&kept, to)?;
    } else {
        let _ = std::fs::remove_file(&stamp);
        make(to)?;
        sh.create_dir(&dir)?;
        copy(to, &kept)?;
        std::fs::write(&stamp, key)?;
    }
    Ok(Image::at(to))
}

/// A guest disk made from a root file system.
pub struct Image {
    pub path: PathBuf,
}

impl Image {
    /// The image at `path`, made before.
    pub fn at(path: &Path) -> Image {
        Image {
            path: path.to_path_buf(),
        }
    }

    /// A 3 GiB ext4 image (sparse) of `root`, with `files` added to /root.
    pub fn create(sh: &Shell, root: &Path, path: &Path, files: &[PathBuf]) -> Result<Image> {
        let _ = std::fs::remove_file(path);
        cmd!(sh, "mke2fs -q -t ext4 -L root -d {root} {path} 3G").run()?;
        let image = Image::at(path);
        let mut requests = String::from("cd /root\n");
        for f in files {
            let name = f
                .file_name()
                .and_then(|n| n.to_str())
                .context("file name")?;
            requests += &format!("write {} {name}\n", f.display());
        }
        image.debugfs(sh, &requests, true)?;
        Ok(image)
    }

    /// Runs debugfs requests on the image (which must not be in use).
    fn debugfs(&self, sh: &Shell, requests: &str, write: bool) -> Result<String> {
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), requests)?;
        let w = write.then_some("-w");
        let (img, requests) = (&self.path, file.path());
        let out = cmd!(sh, "debugfs {w...} -f {requests} {img}")
            .quiet()
            .ignore_stderr()
            .output()?;
        ensure!(out.status.success(), "debugfs on {} failed", img.display());
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A file's contents, or an error naming it if the image lacks it.
    pub fn read(&self, sh: &Shell, guest: &str) -> Result<Vec<u8>> {
        let tmp = tempfile::NamedTempFile::new()?;
        self.debugfs(
            sh,
            &format!("dump {guest} {}\n", tmp.path().display()),
            false,
        )?;
        let bytes = std::fs::read(tmp.path())?;
        ensure!(
            !bytes.is_empty(),
            "{guest} is not on {} (or is empty)",
            self.path.display()
        );
        Ok(bytes)
    }

    /// Copies the guest's folder `guest` into `host` (created), replacing
    /// what an earlier run copied there.
    pub fn copy_out(&self, sh: &Shell, guest: &str, host: &Path) -> Result<PathBuf> {
        let name = guest.rsplit('/').next().unwrap_or(guest);
        let copy = host.join(name);
        if copy.exists() {
            sh.remove_path(&copy)?;
        }
        sh.create_dir(host)?;
        self.debugfs(sh, &format!("rdump {guest} {}\n", host.display()), false)?;
        ensure!(copy.is_dir(), "{guest} is not on {}", self.path.display());
        Ok(copy)
    }

    /// What GRUB would boot: the first menu entry of the guest's
    /// grub.cfg, its kernel and initrd copied into `dir`.
    pub fn grub_boot(&self, sh: &Shell, dir: &Path) -> Result<Boot> {
        let cfg = String::from_utf8(self.read(sh, "/boot/grub/grub.cfg")?)
            .context("grub.cfg is not UTF-8")?;
        let entry = first_entry(&cfg)?;
        let kernel = dir.join("vmlinuz");
        let initrd = dir.join("initrd.img");
        for (guest, host) in [(&entry.kernel, &kernel), (&entry.initrd, &initrd)] {
            std::fs::write(host, self.read(sh, guest)?)?;
        }
        Ok(Boot {
            kernel,
            initrd,
            append: entry.args.join(" "),
        })
    }
}

/// A kernel, initrd and command line to boot.
pub struct Boot {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub append: String,
}

/// The boot before the guest has a grub.cfg (update-grub cannot run while
/// mmdebstrap builds: it asks the running system for its root device).
pub fn first_boot(root: &Path, release: &str) -> Boot {
    Boot {
        kernel: root.join(format!("boot/vmlinuz-{release}")),
        initrd: root.join(format!("boot/initrd.img-{release}")),
        // no_timer_check: under TCG on a loaded host the IO-APIC timer
        // check can miss its ticks and panic the install boot ("IO-APIC +
        // timer doesn't work!"), seen once with compiles beside a run.
        append: "root=/dev/vda ro console=ttyS0 no_timer_check".into(),
    }
}

/// The job disk: `script`, NUL-padded to [`JOB_BYTES`].
pub fn job_disk(path: &Path, script: &str) -> Result<()> {
    ensure!(
        script.len() < JOB_BYTES && !script.contains('\0'),
        "the job script does not fit the job disk"
    );
    let mut bytes = script.as_bytes().to_vec();
    bytes.resize(JOB_BYTES, 0);
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// GRUB's UEFI build as a machine's EFI System Partition holds it: one
/// standalone image (every module inside) whose built-in configuration
/// finds the root file system by its label and reads the guest's own
/// `/boot/grub/grub.cfg`, as `grub-install` on a UEFI machine would.
const UEFI_GRUB_CFG: &str = "search --no-floppy --label root --set=root\n\
                             configfile ($root)/boot/grub/grub.cfg\n";
/// Where the ESP's partition starts on the disk (sectors).
const ESP_START: u64 = 2048;
/// The size of an ESP that the guest fills itself: bootctl's loader,
/// and a kernel and initrd per installed kernel, as kernel-install
/// copies them there.
pub const ESP_MIB_FOR_KERNELS: u64 = 256;
/// The partition's device in a guest with the root file system and the
/// job disk before it.
pub const ESP_DEVICE: &str = "/dev/vdc1";

/// A GPT disk at `path` whose only partition is an EFI System Partition
/// holding GRUB as `\EFI\BOOT\BOOTX64.EFI`, the path firmware boots from
/// a disk it has no boot entry for.
pub fn grub_esp_disk(sh: &Shell, path: &Path) -> Result<()> {
    let tmp = sh.create_temp_dir()?;
    let (cfg, efi) = (tmp.path().join("grub.cfg"), tmp.path().join("BOOTX64.EFI"));
    std::fs::write(&cfg, UEFI_GRUB_CFG)?;
    let embed = format!("boot/grub/grub.cfg={}", cfg.display());
    cmd!(sh, "grub-mkstandalone -O x86_64-efi -o {efi} {embed}")
        .quiet()
        .run()
        .context("grub-mkstandalone (run `cargo xtask setup`)")?;
    esp_disk(sh, path, 32, Some(&efi))
}

/// A GPT disk at `path` whose only partition is an EFI System Partition
/// of `mib` MiB (FAT16), with `loader` as `\EFI\BOOT\BOOTX64.EFI` if
/// given. Built as files (mkfs.vfat, mtools, sfdisk), without loop
/// devices.
pub fn esp_disk(sh: &Shell, path: &Path, mib: u64, loader: Option<&Path>) -> Result<()> {
    let tmp = sh.create_temp_dir()?;
    let fat = tmp.path().join("esp.fat");
    let esp_bytes = mib << 20;
    std::fs::File::create(&fat)?.set_len(esp_bytes)?;
    cmd!(sh, "mkfs.vfat -F 16 -n ESP {fat}")
        .quiet()
        .ignore_stdout()
        .run()?;
    if let Some(efi) = loader {
        let image = format!("{}", fat.display());
        cmd!(sh, "mmd -i {image} ::/EFI ::/EFI/BOOT")
            .quiet()
            .run()?;
        cmd!(sh, "mcopy -i {image} {efi} ::/EFI/BOOT/BOOTX64.EFI")
            .quiet()
            .run()?;
    }
    // The partition, then room for GPT's backup header after it.
    let disk_bytes = (ESP_START << 9) + esp_bytes + (1 << 20);
    std::fs::File::create(path)?.set_len(disk_bytes)?;
    let table = format!(
        "label: gpt\nstart={ESP_START}, size={}, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI System\"\n",
        esp_bytes >> 9
    );
    cmd!(sh, "sfdisk -q {path}").stdin(table).quiet().run()?;
    let fat_bytes = std::fs::read(&fat)?;
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all_at(&fat_bytes, ESP_START << 9)
        .with_context(|| format!("writing the ESP into {}", path.display()))
}

/// The `options` of every boot entry (Boot Loader Specification type #1)
/// on the ESP of the disk at `path`, read off the image with mtools.
pub fn esp_entry_options(sh: &Shell, path: &Path) -> Result<Vec<String>> {
    let image = format!("{}@@{}", path.display(), ESP_START << 9);
    let listing = cmd!(sh, "mdir -b -i {image} ::/loader/entries")
        .quiet()
        .read()
        .with_context(|| format!("listing the boot entries on {}", path.display()))?;
    let mut out = Vec::new();
    for entry in listing.lines().filter(|l| l.ends_with(".conf")) {
        let text = cmd!(sh, "mtype -i {image} {entry}").quiet().read()?;
        out.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("options"))
                .map(|o| o.trim().to_string()),
        );
    }
    Ok(out)
}

/// A menu entry's `linux` and `initrd` lines, as GRUB reads them.
#[derive(Debug, PartialEq)]
struct Entry {
    kernel: String,
    args: Vec<String>,
    initrd: String,
}

fn first_entry(cfg: &str) -> Result<Entry> {
    let body = cfg
        .split_once("\nmenuentry ")
        .map(|(_, rest)| rest)
        .context("grub.cfg has no menuentry")?;
    let mut kernel = None;
    let mut initrd = None;
    // Only the lines that matter are split: others may use variables.
    for line in body.lines().map(str::trim) {
        match line.split_whitespace().next() {
            Some("linux") if kernel.is_none() => kernel = Some(grub_words(line)?.split_off(1)),
            Some("initrd") if initrd.is_none() => initrd = grub_words(line)?.get(1).cloned(),
            Some("}") => break,
            _ => {}
        }
    }
    let mut kernel = kernel.context("the first menuentry has no linux line")?;
    ensure!(!kernel.is_empty(), "a linux line without a kernel");
    let path = kernel.remove(0);
    Ok(Entry {
        kernel: path,
        args: kernel,
        initrd: initrd.context("the first menuentry has no initrd line")?,
    })
}

/// Splits a line of GRUB script into words: a backslash escapes the next
/// character, single quotes are literal, double quotes keep spaces and
/// let a backslash escape `$`, `"` and `\`. A variable (an unescaped `$`)
/// is refused: grub-mkconfig's linux lines have none, and this is no GRUB.
fn grub_words(line: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                words.extend(word.take());
                continue;
            }
            '\\' => {
                let next = chars.next().context("a line ending in a backslash")?;
                word.get_or_insert_with(String::new).push(next);
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => bail!("an unterminated ' in {line:?}"),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('$' | '"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => bail!("an unterminated \" in {line:?}"),
                        },
                        Some('$') => bail!("a GRUB variable in {line:?}"),
                        Some(c) => w.push(c),
                        None => bail!("an unterminated \" in {line:?}"),
                    }
                }
            }
            '$' => bail!("a GRUB variable in {line:?}"),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::{first_entry, grub_words, Entry};

    /// The shape update-grub gives an armed Debian guest (from one).
    const GRUB_CFG: &str = r#"### BEGIN /etc/grub.d/10_linux ###
function gfxmode {
	set gfxpayload="${1}"
}
menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-4c1f' {
	load_video
	insmod gzio
	if [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi
	insmod ext2
	search --no-floppy --fs-uuid --set=root 4c1f
	echo	'Loading Linux 6.12.117+deb12-amd64 ...'
	linux	/boot/vmlinuz-6.12.117+deb12-amd64 root=UUID=4c1f ro  console=ttyS0 memmap=64M\$0x7be00000 crash_kexec_post_notifiers panic=5 quiet
	echo	'Loading initial ramdisk ...'
	initrd	/boot/initrd.img-6.12.117+deb12-amd64
}
submenu 'Advanced options for Debian GNU/Linux' {
	menuentry 'Debian GNU/Linux, with Linux 6.12.117+deb12-amd64 (recovery mode)' {
		linux	/boot/vmlinuz-6.12.117+deb12-amd64 root=UUID=4c1f ro single
	}
}
"#;

    #[test]
    fn the_first_entry_is_read_as_grub_reads_it() {
        assert_eq!(
            first_entry(GRUB_CFG).unwrap(),
            Entry {
                kernel: "/boot/vmlinuz-6.12.117+deb12-amd64".into(),
                args: [
                    "root=UUID=4c1f",
                    "ro",
                    "console=ttyS0",
                    "memmap=64M$0x7be00000",
                    "crash_kexec_post_notifiers",
                    "panic=5",
                    "quiet"
                ]
                .map(String::from)
                .to_vec(),
                initrd: "/boot/initrd.img-6.12.117+deb12-amd64".into(),
            }
        );
    }

    #[test]
    fn quoting_is_grubs() {
        assert_eq!(
            grub_words(r#"a 'b c' "d \$e \q" f\ g"#).unwrap(),
            ["a", "b c", "d $e \\q", "f g"]
        );
        assert!(grub_words("linux /v memmap=64M$0x1000").is_err());
        assert!(grub_words("linux \"/v").is_err());
        assert!(grub_words("linux /v\\").is_err());
        assert!(first_entry("set default=0\n").is_err());
    }
}
