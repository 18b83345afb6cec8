//! `cargo xtask setup`: installs what the harness needs, idempotently,
//! saying what it does at each step.
//!
//! Kernel versions are picked from what the archive offers at run time
//! (the newest 6.12 in bookworm-backports, the newest 6.1 in bookworm, and
//! the newest kernel Debian ships, from trixie-backports), so no patch
//! level is hard-coded to vanish from the mirrors.

use super::{is_plain_flavour, version_key, Arch, ARM64_ROOT, NEWEST_ROOT};
use anyhow::{bail, ensure, Context, Result};
use std::path::Path;
use xshell::{cmd, Shell};

const BACKPORTS_SOURCE: &str = "/etc/apt/sources.list.d/crashring-backports.sources";
const BACKPORTS: &str = "Types: deb\n\
URIs: http://deb.debian.org/debian\n\
Suites: bookworm-backports\n\
Components: main\n\
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n";

/// Host tools the scenarios and the output-format tests need, from
/// bookworm.
const TOOLS: &[&str] = &[
    "busybox-static",
    "e2fsprogs",
    "cpio",
    "xz-utils",
    "zstd",
    "kexec-tools",
    "makedumpfile",
    "babeltrace2",
    "trace-cmd",
    "protobuf-compiler",
    "python3-venv",
    "make",
    "gcc",
    // libfuzzer-sys compiles libFuzzer when `test` checks the fuzz targets.
    "g++",
    // `package` checks the Debian packages.
    "lintian",
    // kexec-hooks/tests/units.rs: systemd-analyze verify and security.
    "systemd",
    // The Debian guest's root file system.
    "mmdebstrap",
    // Builds a capture initramfs with the dracut module kdump-utils uses
    // (dracut-core does not replace initramfs-tools).
    "dracut-core",
    // The UEFI guest: OVMF, GRUB's EFI build and its ESP, made as files.
    "ovmf",
    "grub-efi-amd64-bin",
    "dosfstools",
    "mtools",
    "fdisk",
    // drm-flight-recorder's modeset program: the kernel's DRM ioctls.
    "libdrm-dev",
    // `bench` measures the user-space writer against LTTng-UST.
    "liblttng-ust-dev",
    "lttng-tools",
    // The arm64 guests: the module cross-built against Debian's arm64
    // headers, the device trees that reserve their regions, and the
    // UEFI firmware (AAVMF) that boots them as an arm64 server does.
    "gcc-aarch64-linux-gnu",
    "device-tree-compiler",
    "qemu-efi-aarch64",
];

/// The kernels the project supports, found in the archive.
#[derive(Clone, Debug)]
pub struct Kernels {
    /// e.g. `6.12.48+deb12-amd64` (backports).
    pub v612: String,
    /// e.g. `6.1.0-39-amd64` (stock bookworm).
    pub v61: String,
}

fn say(what: &str) {
    eprintln!("setup: {what}");
}

fn is_installed(sh: &Shell, package: &str) -> bool {
    let format = "${Status}";
    cmd!(sh, "dpkg-query -W -f={format} {package}")
        .quiet()
        .ignore_stderr()
        .read()
        .is_ok_and(|s| s.contains("install ok installed"))
}

/// Newest release string `R` for which a package `linux-image-R-unsigned`
/// (R matching `prefix*-amd64`) exists, optionally only in `suite`.
fn newest_kernel(sh: &Shell, prefix: &str) -> Result<String> {
    let pattern = format!("^linux-image-{}.*-amd64-unsigned$", regex_escape(prefix));
    let out = cmd!(sh, "apt-cache search --names-only {pattern}")
        .quiet()
        .read()?;
    let mut releases: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| {
            p.strip_prefix("linux-image-")?
                .strip_suffix("-unsigned")
                .map(String::from)
        })
        .filter(|r| is_plain_flavour(r, Arch::X86_64))
        .collect();
    releases.sort_by_key(|r| version_key(r));
    releases
        .pop()
        .with_context(|| format!("no linux-image-{prefix}*-amd64-unsigned in the apt archive"))
}

fn regex_escape(s: &str) -> String {
    s.replace('.', "\\.")
}

/// Finds the kernels without installing anything (after `apt-get update`).
pub fn kernels(sh: &Shell) -> Result<Kernels> {
    Ok(Kernels {
        v612: newest_kernel(sh, "6.12.")?,
        v61: newest_kernel(sh, "6.1.0-")?,
    })
}

pub fn run(sh: &Shell) -> Result<Kernels> {
    let uid = cmd!(sh, "id -u").quiet().read()?;
    if uid.trim() != "0" {
        bail!("setup installs Debian packages and needs root (run it as root, or with sudo)");
    }
    let _env = sh.push_env("DEBIAN_FRONTEND", "noninteractive");
    if !Path::new(BACKPORTS_SOURCE).exists() {
        say(&format!(
            "adding bookworm-backports as an apt source ({BACKPORTS_SOURCE})"
        ));
        sh.write_file(BACKPORTS_SOURCE, BACKPORTS)?;
    }
    let foreign = cmd!(sh, "dpkg --print-foreign-architectures")
        .quiet()
        .read()?;
    if !foreign.lines().any(|a| a == "arm64") {
        say("adding arm64 to dpkg's architectures, to download Debian's arm64 kernels");
        cmd!(sh, "dpkg --add-architecture arm64").run()?;
    }
    say("apt-get update");
    cmd!(sh, "apt-get update -q")
        .quiet()
        .ignore_stdout()
        .run()?;
    let k = kernels(sh)?;
    say(&format!(
        "kernels: {} (bookworm-backports) and {} (bookworm)",
        k.v612, k.v61
    ));

    let backports: Vec<String> = [
        "qemu-system-x86".to_string(),
        // Of the same QEMU release as qemu-system-x86, which it shares
        // files with.
        "qemu-system-arm".to_string(),
        format!("linux-image-{}-unsigned", k.v612),
        format!("linux-headers-{}", k.v612),
        // The wlroots example's headers and library. Its -dev dependencies
        // (libudev-dev) must match the backports systemd qemu brings.
        "libwlroots-dev".to_string(),
    ]
    .into_iter()
    .filter(|p| !is_installed(sh, p))
    .collect();
    if !backports.is_empty() {
        say(&format!(
            "installing from bookworm-backports: {}",
            backports.join(" ")
        ));
        let cmd = cmd!(
            sh,
            "apt-get install -y -q --no-install-recommends -t bookworm-backports {backports...}"
        );
        quietly(sh, cmd, "apt-get install from bookworm-backports")?;
    }
    let mut stock: Vec<String> = vec![
        format!("linux-image-{}-unsigned", k.v61),
        format!("linux-headers-{}", k.v61),
    ];
    stock.extend(TOOLS.iter().map(|s| s.to_string()));
    stock.retain(|p| !is_installed(sh, p));
    if !stock.is_empty() {
        say(&format!("installing from bookworm: {}", stock.join(" ")));
        let cmd = cmd!(
            sh,
            "apt-get install -y -q --no-install-recommends {stock...}"
        );
        quietly(sh, cmd, "apt-get install from bookworm")?;
    }
    install_checkpatch(sh, &k)?;
    install_perfetto_descriptor(sh)?;
    install_export_readers(sh)?;
    install_newest_kernel(sh)?;
    install_arm64(sh, &k)?;
    say("everything is installed");
    Ok(k)
}

/// Runs a chatty command (apt-get's hundreds of lines) with its output in
/// target/crashring/setup.log instead of the terminal: a newcomer sees what
/// is being installed, and on failure the end of the log and where it is.
fn quietly(sh: &Shell, cmd: xshell::Cmd<'_>, what: &str) -> Result<()> {
    let out = cmd.quiet().ignore_status().output()?;
    let log = sh.current_dir().join("target/crashring/setup.log");
    sh.create_dir(log.parent().context("setup log path")?)?;
    let text = [out.stdout, out.stderr].concat();
    let mut all = std::fs::read(&log).unwrap_or_default();
    all.extend_from_slice(&text);
    std::fs::write(&log, all)?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().collect();
        bail!(
            "{what} failed ({}); its last lines (all of it in {}):\n{}",
            out.status,
            log.display(),
            lines[lines.len().saturating_sub(30)..].join("\n")
        );
    }
    Ok(())
}

const NEWEST_SUITE: &str = "trixie-backports";
const NEWEST_BUILD_TOOLS: &str = "make,gcc-14,libc6-dev,kmod";

/// Runs `args` inside [`NEWEST_ROOT`], with /proc mounted there (apt and
/// objtool read it) for as long as the command runs, in a mount namespace
/// of its own so nothing stays mounted on the host.
fn in_newest_root<'a>(sh: &'a Shell, args: &[&str]) -> xshell::Cmd<'a> {
    let root = NEWEST_ROOT;
    let proc = format!("--mount-proc={root}/proc");
    cmd!(
        sh,
        "unshare --mount --pid --fork {proc} chroot {root} {args...}"
    )
}

fn install_newest_kernel(sh: &Shell) -> Result<()> {
    let root = Path::new(NEWEST_ROOT);
    if !root.join("usr/bin/gcc-14").exists() {
        if root.exists() {
            sh.remove_path(root)?;
        }
        say(&format!(
            "making a Debian 13 build root for the newest kernel Debian ships ({NEWEST_ROOT}: {NEWEST_BUILD_TOOLS})"
        ));
        let sources = [
            "deb http://deb.debian.org/debian trixie main".to_string(),
            format!("deb http://deb.debian.org/debian {NEWEST_SUITE} main"),
        ];
        let cmd = cmd!(
            sh,
            "mmdebstrap --variant=apt --mode=root --include={NEWEST_BUILD_TOOLS} trixie {root} {sources...}"
        );
        quietly(sh, cmd, "mmdebstrap")?;
    }
    quietly(
        sh,
        in_newest_root(sh, &["apt-get", "update", "-q"]),
        "apt-get update in the build root",
    )?;
    let list = in_newest_root(
        sh,
        &[
            "apt-cache",
            "search",
            "--names-only",
            "^linux-headers-[0-9].*-amd64$",
        ],
    )
    .quiet()
    .read()?;
    let mut releases: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.strip_prefix("linux-headers-"))
        .filter(|r| is_plain_flavour(r, Arch::X86_64))
        .map(String::from)
        .collect();
    releases.sort_by_key(|r| version_key(r));
    let newest = releases
        .pop()
        .with_context(|| format!("no linux-headers-*-amd64 in {NEWEST_SUITE}"))?;
    if root
        .join(format!("usr/src/linux-headers-{newest}"))
        .exists()
        && root.join(format!("lib/modules/{newest}/vmlinuz")).exists()
    {
        return Ok(());
    }
    say(&format!(
        "installing into the build root from {NEWEST_SUITE}: linux {newest} (kernel, modules, headers)"
    ));
    let (binary, modules, headers) = (
        format!("linux-binary-{newest}"),
        format!("linux-modules-{newest}"),
        format!("linux-headers-{newest}"),
    );
    let install = in_newest_root(
        sh,
        &[
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            &binary,
            &modules,
            &headers,
        ],
    )
    .env("DEBIAN_FRONTEND", "noninteractive");
    quietly(sh, install, "apt-get install in the build root")
}

/// The release of `amd64_release`'s build for arm64: the same upload
/// builds both, and the arm64 headers share its `-common` package, which
/// the amd64 headers installed.
pub fn arm64_release(amd64_release: &str) -> Result<String> {
    amd64_release
        .strip_suffix("-amd64")
        .map(|r| format!("{r}-arm64"))
        .with_context(|| format!("{amd64_release} is not an amd64 release"))
}

/// The arm64 programs the kdump guests run, from Debian's arm64
/// packages, with the libraries they load ([`arm64_userland`]).
pub const ARM64_PROGRAMS: [&str; 2] = ["/sbin/kexec", "/usr/bin/makedumpfile"];

/// The packages of [`ARM64_PROGRAMS`] and every library package they
/// depend on, as apt resolves them for arm64 (the tools' maintainer
/// scripts' own needs, perl and debconf, left out: nothing is installed).
fn arm64_userland(sh: &Shell) -> Result<Vec<String>> {
    let tools = ["kexec-tools:arm64", "makedumpfile:arm64"];
    let tree = cmd!(
        sh,
        "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances --no-pre-depends {tools...}"
    )
    .quiet()
    .read()?;
    let mut packages: Vec<String> = tree
        .lines()
        .filter(|l| (l.starts_with("lib") || l.starts_with("zlib")) && l.ends_with(":arm64"))
        .map(String::from)
        .chain(tools.map(String::from))
        .collect();
    packages.sort();
    packages.dedup();
    Ok(packages)
}

/// The Rust target of the guests' static arm64 `crashring`.
pub const ARM64_RUST_TARGET: &str = "aarch64-unknown-linux-musl";

/// Debian's arm64 6.12 and 6.1 kernels (image, modules, headers) and
/// static busybox, unpacked into [`ARM64_ROOT`] (they cannot be installed
/// on an amd64 host), with what cross-building against the headers needs:
/// their `scripts` and `tools` links point at `../../lib/linux-kbuild-*`,
/// the amd64 build tools the amd64 headers installed, and modules.dep is
/// made by depmod as the package's own trigger would. Then the Rust
/// standard library for [`ARM64_RUST_TARGET`], through rustup.
fn install_arm64(sh: &Shell, k: &Kernels) -> Result<()> {
    let root = Path::new(ARM64_ROOT);
    let releases = [arm64_release(&k.v612)?, arm64_release(&k.v61)?];
    let have = |r: &String| {
        root.join(format!("boot/vmlinuz-{r}")).exists()
            && root
                .join(format!("usr/src/linux-headers-{r}/Makefile"))
                .exists()
            && root.join(format!("lib/modules/{r}/modules.dep")).exists()
    };
    let userland = ARM64_PROGRAMS
        .iter()
        .all(|p| root.join(p.trim_start_matches('/')).exists());
    if !(releases.iter().all(have) && root.join("bin/busybox").exists() && userland) {
        let mut packages: Vec<String> = releases
            .iter()
            .flat_map(|r| {
                [
                    format!("linux-image-{r}-unsigned:arm64"),
                    format!("linux-headers-{r}:arm64"),
                ]
            })
            .collect();
        packages.push("busybox-static:arm64".into());
        packages.extend(arm64_userland(sh)?);
        say(&format!(
            "downloading {} and unpacking them into {ARM64_ROOT}",
            packages.join(" ")
        ));
        let tmp = sh.create_temp_dir()?;
        // apt-get download writes into the current directory; the log
        // stays the project's.
        let (script, into) = (
            r#"cd "$1" && shift && exec apt-get download -q "$@""#,
            tmp.path(),
        );
        quietly(
            sh,
            cmd!(sh, "sh -c {script} sh {into} {packages...}"),
            "apt-get download of the arm64 kernels",
        )?;
        if root.exists() {
            sh.remove_path(root)?;
        }
        for deb in std::fs::read_dir(tmp.path())?.flatten().map(|e| e.path()) {
            cmd!(sh, "dpkg-deb -x {deb} {root}").quiet().run()?;
        }
        for r in &releases {
            let kbuild =
                std::fs::read_link(root.join(format!("usr/src/linux-headers-{r}/scripts")))
                    .with_context(|| format!("the arm64 headers of {r} have no scripts link"))?;
            // ../../lib/linux-kbuild-V/scripts: link usr/lib/linux-kbuild-V
            // to the host's.
            let dir = kbuild
                .parent()
                .and_then(|p| p.file_name())
                .context("the scripts link's target")?;
            let host = Path::new("/usr/lib").join(dir);
            ensure!(
                host.exists(),
                "{} is missing: the amd64 headers of the same release install it",
                host.display()
            );
            sh.create_dir(root.join("usr/lib"))?;
            std::os::unix::fs::symlink(&host, root.join("usr/lib").join(dir))?;
            cmd!(sh, "depmod -b {root} {r}").quiet().run()?;
        }
    }
    let installed = cmd!(sh, "rustup target list --installed").quiet().read()?;
    if !installed.lines().any(|t| t == ARM64_RUST_TARGET) {
        say(&format!(
            "rustup target add {ARM64_RUST_TARGET} (the guests' static crashring)"
        ));
        cmd!(sh, "rustup target add {ARM64_RUST_TARGET}")
            .quiet()
            .ignore_stderr()
            .run()?;
    }
    Ok(())
}

/// Perfetto's `trace.proto`, compiled (a FileDescriptorSet), for strict
/// `protoc --decode` checks of the `.pftrace` files crashring writes. The
/// extractor's tests read it from here.
pub const PERFETTO_DESCRIPTOR: &str = "/usr/local/share/crashring/perfetto/perfetto_trace.desc";
/// Perfetto publishes its protos compiled into its Python package; Debian
/// has no Perfetto package.
const PERFETTO_PIP: &[&str] = &["perfetto==0.59.1", "protobuf==7.36.2"];

fn install_perfetto_descriptor(sh: &Shell) -> Result<()> {
    if Path::new(PERFETTO_DESCRIPTOR).exists() {
        return Ok(());
    }
    let dir = Path::new(PERFETTO_DESCRIPTOR)
        .parent()
        .context("descriptor path")?;
    let venv = dir.join("venv");
    say(&format!(
        "installing {} from PyPI into {} for Perfetto's trace.proto",
        PERFETTO_PIP.join(" "),
        venv.display()
    ));
    cmd!(sh, "/usr/bin/python3 -m venv {venv}").run()?;
    let pip = venv.join("bin/pip");
    cmd!(sh, "{pip} install -q {PERFETTO_PIP...}").run()?;
    let python = venv.join("bin/python");
    let script = "import sys\n\
        from google.protobuf import descriptor_pb2\n\
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as p\n\
        s = descriptor_pb2.FileDescriptorSet()\n\
        s.file.add().MergeFromString(p.DESCRIPTOR.serialized_pb)\n\
        open(sys.argv[1], 'wb').write(s.SerializeToString())\n";
    let partial = dir.join("perfetto_trace.desc.partial");
    cmd!(sh, "{python} -c {script} {partial}").run()?;
    std::fs::rename(&partial, PERFETTO_DESCRIPTOR)?;
    say(&format!("wrote {PERFETTO_DESCRIPTOR}"));
    Ok(())
}

/// A Python with the readers of what `crashring export` writes
/// (extractor/tests/export.rs runs them from here): DuckDB asks the
/// Parquet dataset what a fleet's engineer would; Sentry's SDK parses the
/// envelopes and Relay's normalizer (the code Sentry's ingestion runs)
/// checks their events. Debian packages none of them.
pub const EXPORT_READERS_PYTHON: &str = "/usr/local/share/crashring/export-readers/venv/bin/python";
const EXPORT_READERS_PIP: &[&str] = &[
    "duckdb==2.0.0",
    "sentry-sdk==2.75.0",
    "sentry-relay==0.10.1",
];

fn install_export_readers(sh: &Shell) -> Result<()> {
    // A venv an interrupted setup left without them is made again.
    let has_them = || {
        Path::new(EXPORT_READERS_PYTHON).exists()
            && cmd!(
                sh,
                "{EXPORT_READERS_PYTHON} -c 'import duckdb, sentry_sdk, sentry_relay'"
            )
            .quiet()
            .ignore_stderr()
            .run()
            .is_ok()
    };
    if has_them() {
        return Ok(());
    }
    // EXPORT_READERS_PYTHON is VENV/bin/python.
    let venv = Path::new(EXPORT_READERS_PYTHON)
        .ancestors()
        .nth(2)
        .context("the export readers' venv")?;
    say(&format!(
        "installing {} from PyPI into {} for the export tests",
        EXPORT_READERS_PIP.join(" "),
        venv.display()
    ));
    let _ = std::fs::remove_dir_all(venv);
    cmd!(sh, "/usr/bin/python3 -m venv {venv}").run()?;
    let pip = venv.join("bin/pip");
    cmd!(sh, "{pip} install -q {EXPORT_READERS_PIP...}").run()?;
    ensure!(
        has_them(),
        "{EXPORT_READERS_PYTHON} cannot import what pip installed"
    );
    Ok(())
}

/// Where setup puts checkpatch.pl (with the spelling list it reads).
pub const CHECKPATCH: &str = "/usr/local/share/crashring/checkpatch/checkpatch.pl";

/// checkpatch.pl is not in the headers packages: take it, with the files
/// it reads, from the matching linux-source package without installing it.
fn install_checkpatch(sh: &Shell, k: &Kernels) -> Result<()> {
    if Path::new(CHECKPATCH).exists() {
        return Ok(());
    }
    let series = k.v612.split('.').take(2).collect::<Vec<_>>().join(".");
    let package = format!("linux-source-{series}");
    say(&format!(
        "fetching checkpatch.pl from {package} (downloaded, not installed)"
    ));
    let tmp = sh.create_temp_dir()?;
    let tmp = tmp.path();
    {
        let _dir = sh.push_dir(tmp);
        cmd!(sh, "apt-get download -q {package}")
            .quiet()
            .ignore_stderr()
            .run()?;
    }
    let deb = std::fs::read_dir(tmp)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .with_context(|| format!("apt-get download {package} left no .deb"))?;
    let unpacked = tmp.join("unpacked");
    cmd!(sh, "dpkg-deb -x {deb} {unpacked}").run()?;
    let tarball = unpacked.join(format!("usr/src/{package}.tar.xz"));
    let dest = Path::new(CHECKPATCH).parent().context("checkpatch path")?;
    sh.create_dir(dest)?;
    let members: Vec<String> = ["checkpatch.pl", "spelling.txt", "const_structs.checkpatch"]
        .iter()
        .map(|f| format!("{package}/scripts/{f}"))
        .collect();
    cmd!(
        sh,
        "tar -xJf {tarball} -C {dest} --strip-components=2 {members...}"
    )
    .run()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::env::{is_plain_flavour, version_key, Arch};

    #[test]
    fn only_the_generic_flavour_is_picked() {
        assert!(is_plain_flavour("6.12.48+deb12-amd64", Arch::X86_64));
        assert!(is_plain_flavour("6.1.0-39-amd64", Arch::X86_64));
        assert!(!is_plain_flavour("6.12.117+deb12-rt-amd64", Arch::X86_64));
        assert!(!is_plain_flavour("6.1.0-39-cloud-amd64", Arch::X86_64));
        assert!(is_plain_flavour("6.1.0-39-arm64", Arch::Arm64));
        assert!(!is_plain_flavour("6.1.0-39-amd64", Arch::Arm64));
        assert!(!is_plain_flavour("6.12.117+deb12-rt-arm64", Arch::Arm64));
        assert!(!is_plain_flavour("6.1.0-39-cloud-arm64", Arch::Arm64));
    }

    #[test]
    fn newer_patch_levels_sort_later() {
        let mut v = [
            "6.12.9+deb12-amd64",
            "6.12.48+deb12-amd64",
            "6.12.10+bpo-amd64",
        ];
        v.sort_by_key(|r| version_key(r));
        assert_eq!(
            v,
            [
                "6.12.9+deb12-amd64",
                "6.12.10+bpo-amd64",
                "6.12.48+deb12-amd64"
            ]
        );
    }
}
