//! What a guest boots with: the installed kernels, crashring.ko built for
//! each, the host's `crashring` with its libraries, and busybox initramfs
//! images made here from the host's own packages (nothing is downloaded at
//! run time).

use super::setup::ARM64_RUST_TARGET;
use super::{is_plain_flavour, version_key, work_dir, Arch, ARM64_ROOT, NEWEST_ROOT};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use xshell::{cmd, Shell};

/// A kernel installed by `cargo xtask setup`.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// One of [`SERIES`].
    pub series: &'static str,
    pub arch: Arch,
    pub release: String,
    /// The root file system it is installed in: `/` for the host's own
    /// kernels, setup's build root for the newest, the folder setup
    /// unpacked the arm64 kernels in.
    pub root: PathBuf,
    pub vmlinuz: PathBuf,
    pub modules: PathBuf,
    pub headers: PathBuf,
}

/// The kernel series the harness boots: Debian 12's backports and stock
/// kernels, and the newest kernel Debian ships, for amd64; the same two
/// Debian 12 kernels for arm64.
pub const SERIES: [&str; 5] = ["6.12", "6.1", "newest", "arm64-6.12", "arm64-6.1"];

impl Kernel {
    /// reserve_mem= came in Linux 6.11.
    pub fn has_reserve_mem(&self) -> bool {
        version_key(&self.release) >= vec![6, 11]
    }

    /// Whether sysrq l makes every CPU print its backtrace: by NMI on x86;
    /// arm64 gained it (by IPI, or pseudo-NMI where enabled) in 6.7, and
    /// before only shows the CPU that runs sysrq's work.
    pub fn has_cpu_backtraces(&self) -> bool {
        self.arch == Arch::X86_64 || version_key(&self.release) >= vec![6, 7]
    }

    /// The serial console's device: the PC's 16550, or the PL011 of
    /// arm64's virt machine.
    pub fn console(&self) -> &'static str {
        match self.arch {
            Arch::X86_64 => "ttyS0",
            Arch::Arm64 => "ttyAMA0",
        }
    }

    /// The static busybox the guest's initramfs runs: the host's own, or
    /// the arm64 build setup unpacked.
    fn busybox(&self) -> PathBuf {
        match self.arch {
            Arch::X86_64 => PathBuf::from("/bin/busybox"),
            Arch::Arm64 => self.root.join("bin/busybox"),
        }
    }

    /// The modules, in load order, that give a busybox guest its disks
    /// and mount an ext2 one: ext4 (which mounts ext2) and, where it still
    /// takes crc32c through the crypto API, crc32c_generic, a dependency
    /// modules.dep omits (since 6.14 ext4 calls the crc32c library the
    /// kernel links in, and the newest kernel has no crc32c_generic).
    pub fn ext2_disk_modules(&self) -> Result<Vec<&'static str>> {
        let crypto_crc32c = with_dependencies(self, "crc32c_generic").is_ok();
        Ok(["virtio_pci", "virtio_blk", "crc32c_generic", "ext4"]
            .into_iter()
            .filter(|m| *m != "crc32c_generic" || crypto_crc32c)
            .collect())
    }
}

/// The newest installed generic `-amd64` kernel of `series` with headers.
pub fn kernel(series: &str) -> Result<Kernel> {
    let (series, prefix, root, arch) = match series {
        "6.12" => ("6.12", "6.12.", Path::new("/"), Arch::X86_64),
        "6.1" => ("6.1", "6.1.", Path::new("/"), Arch::X86_64),
        "newest" => ("newest", "", Path::new(NEWEST_ROOT), Arch::X86_64),
        "arm64-6.12" => ("arm64-6.12", "6.12.", Path::new(ARM64_ROOT), Arch::Arm64),
        "arm64-6.1" => ("arm64-6.1", "6.1.", Path::new(ARM64_ROOT), Arch::Arm64),
        other => bail!("unknown kernel series {other}: use {}", SERIES.join(", ")),
    };
    // Each release's module directory; its image is /boot/vmlinuz-R, or in
    // the module directory itself where nothing copied it to /boot (Debian
    // 13's kernels leave that to kernel-install hooks).
    let modules_dir = root.join("lib/modules");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&modules_dir)
        .with_context(|| format!("reading {}", modules_dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|r| r.starts_with(prefix) && is_plain_flavour(r, arch))
        .filter(|r| root.join(format!("usr/src/linux-headers-{r}")).exists())
        .filter_map(|r| {
            [
                root.join(format!("boot/vmlinuz-{r}")),
                modules_dir.join(&r).join("vmlinuz"),
            ]
            .into_iter()
            .find(|p| p.exists())
            .map(|image| (r, image))
        })
        .collect();
    found.sort_by_key(|(r, _)| version_key(r));
    let (release, vmlinuz) = found.pop().with_context(|| {
        format!("no {series} kernel with headers installed: run `cargo xtask setup`")
    })?;
    // The newest kernel's headers are built against inside its root, at
    // their path there; the arm64 ones from the host, where they lie.
    let headers = match arch {
        Arch::X86_64 => PathBuf::from(format!("/usr/src/linux-headers-{release}")),
        Arch::Arm64 => root.join(format!("usr/src/linux-headers-{release}")),
    };
    Ok(Kernel {
        series,
        arch,
        root: root.to_path_buf(),
        vmlinuz,
        modules: modules_dir.join(&release),
        headers,
        release,
    })
}

/// The files of `dir` (not its folders), by name.
fn files_of(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Copies the files of `from` (not its folders) into `to`.
fn copy_files(sh: &Shell, from: &Path, to: &Path) -> Result<()> {
    sh.create_dir(to)?;
    for path in files_of(from)? {
        sh.copy_file(&path, to)?;
    }
    Ok(())
}

/// What a build of `from`'s files for `k` depends on, as text: the kernel
/// (its release and the root it is built in), the build's variables and
/// each file's name and digest.
fn build_recipe(k: &Kernel, from: &Path, vars: &[String]) -> Result<String> {
    let mut recipe = format!("{} in {}\n{vars:?}\n", k.release, k.root.display());
    for path in files_of(from)? {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        recipe += &format!("{name} {:x}\n", Sha256::digest(bytes));
    }
    Ok(recipe)
}

/// Builds `from`'s files for `k` in `dir` (Kbuild writes its objects
/// beside the sources), failing on any compiler warning, unless `dir`
/// holds a build of the same recipe: every scenario boots the module, and
/// its build (some 20 s) would otherwise be repeated by each of them.
fn build_in(
    sh: &Shell,
    k: &Kernel,
    from: &Path,
    dir: &Path,
    what: &str,
    vars: &[String],
) -> Result<()> {
    let recipe = build_recipe(k, from, vars)?;
    let stamp = dir.join(".crashring-built-from");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe) {
        return Ok(());
    }
    if dir.exists() {
        sh.remove_path(dir)?;
    }
    copy_files(sh, from, dir)?;
    make_module(sh, k, dir, what, vars)?;
    std::fs::write(&stamp, recipe)?;
    Ok(())
}

/// Runs `make` in `dir` and fails on any compiler warning. An arm64
/// kernel's build is a cross build on the host; an amd64 kernel in a
/// root of its own is built in that root, with the harness's work
/// directory (which holds `dir` and the paths in `vars`) bind-mounted at
/// the same path there.
fn make_module(sh: &Shell, k: &Kernel, dir: &Path, what: &str, vars: &[String]) -> Result<()> {
    let headers = &k.headers;
    let make = cmd!(sh, "make -C {dir} KDIR={headers} {vars...}");
    let make = if k.arch == Arch::Arm64 {
        // Debian's cross compiler; the headers' .kernelvariables set
        // ARCH=arm64 and, on 6.12 only, the compiler prefix.
        make.arg("CROSS_COMPILE=aarch64-linux-gnu-")
    } else if k.root == Path::new("/") {
        make
    } else {
        let work = work_dir(sh);
        let inside = k
            .root
            .join(work.strip_prefix("/").context("work directory path")?);
        sh.create_dir(&inside)?;
        // The values travel as arguments, never inside the script's text.
        let script = r#"mount --bind "$1" "$2" && shift 2 && exec chroot "$@""#;
        let (root, proc) = (&k.root, format!("--mount-proc={}/proc", k.root.display()));
        cmd!(
            sh,
            "unshare --mount --pid --fork {proc} sh -c {script} sh {work} {inside} {root} make -C {dir} KDIR={headers} {vars...}"
        )
    };
    let out = make.ignore_status().output()?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("building {what} for {} failed:\n{log}", k.release);
    }
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning:")).collect();
    if !warnings.is_empty() {
        bail!(
            "{what} for {} builds with warnings:\n{}",
            k.release,
            warnings.join("\n")
        );
    }
    Ok(())
}

fn kbuild_dir(sh: &Shell, k: &Kernel) -> PathBuf {
    work_dir(sh).join(format!("kbuild-{}", k.release))
}

/// Builds crashring.ko for `k` in a copy of kernel/ and fails on any
/// compiler warning; a build of the same sources is reused.
pub fn build_module(sh: &Shell, k: &Kernel) -> Result<PathBuf> {
    let dir = kbuild_dir(sh, k);
    build_in(
        sh,
        k,
        &sh.current_dir().join("kernel"),
        &dir,
        "crashring.ko",
        &[],
    )?;
    Ok(dir.join("crashring.ko"))
}

/// The modules kernel/test/ builds: the crash tests, and the DRM debug
/// message's cost (which needs drm.ko).
pub const TEST_MODULES: [&str; 2] = ["crashring_test.ko", "crashring_test_drm.ko"];

/// Builds kernel/test/'s [`TEST_MODULES`] against the crashring.ko that
/// [`build_module`] built for `k` (whose symbols they use), and returns
/// the directory that holds them.
pub fn build_test_modules(sh: &Shell, k: &Kernel) -> Result<PathBuf> {
    // A new crashring.ko is built in a new folder, without these.
    build_module(sh, k)?;
    let parent = kbuild_dir(sh, k);
    let dir = parent.join("test");
    build_in(
        sh,
        k,
        &sh.current_dir().join("kernel/test"),
        &dir,
        "crashring_test.ko and crashring_test_drm.ko",
        &[format!("CRASHRING={}", parent.display())],
    )?;
    Ok(dir)
}

/// The host's `crashring`, built in release mode (a debug build scans a
/// gigabyte of dump slowly enough to matter). Guests run it too, with the
/// host's libraries copied in beside it ([`initramfs`]).
pub fn host_crashring(sh: &Shell) -> Result<PathBuf> {
    cmd!(
        sh,
        "cargo build --quiet --release -p extractor --bin crashring"
    )
    .run()?;
    Ok(sh.current_dir().join("target/release/crashring"))
}

/// qemu-tests/csrc/compositor.c (and userns.c) against the release crashring-user
/// library, which the guest gets at the same path.
pub fn build_compositor(sh: &Shell) -> Result<PathBuf> {
    let lib = sh.current_dir().join("target/release");
    compositor_finding_library(sh, "compositor", &lib)
}

/// The compositor for the Debian guest, which finds crashring-user where
/// the crashring package installs it.
pub fn build_debian_compositor(sh: &Shell) -> Result<PathBuf> {
    compositor_finding_library(sh, "compositor-debian", Path::new("/usr/lib/crashring"))
}

/// The compositor as `name`, linked against the release library and
/// finding it at run time in `rpath`.
fn compositor_finding_library(sh: &Shell, name: &str, rpath: &Path) -> Result<PathBuf> {
    cmd!(sh, "cargo build --quiet --release -p crashring-user").run()?;
    let top = sh.current_dir();
    let lib = top.join("target/release");
    sh.create_dir(work_dir(sh))?;
    let out = work_dir(sh).join(name);
    let (include, kernel) = (top.join("pstore-ring/user/include"), top.join("kernel"));
    let src = ["compositor.c", "userns.c"].map(|f| top.join("qemu-tests/csrc").join(f));
    let (libdir, rpath) = (
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", rpath.display()),
    );
    cmd!(
        sh,
        "cc -std=gnu11 -O2 -Wall -Wextra -Werror -I {include} -I {kernel} {src...} -o {out} {libdir} {rpath} -lcrashring_user"
    )
    .run()?;
    Ok(out)
}

/// Builds the drm-flight-recorder scenario's modeset program
/// (qemu-tests/csrc/modeset.c), which calls the KMS ioctls itself.
pub fn build_modeset(sh: &Shell) -> Result<PathBuf> {
    let src = sh.current_dir().join("qemu-tests/csrc/modeset.c");
    sh.create_dir(work_dir(sh))?;
    let out = work_dir(sh).join("modeset");
    cmd!(
        sh,
        "cc -std=gnu11 -O2 -Wall -Wextra -Werror -I /usr/include/libdrm {src} -o {out}"
    )
    .run()?;
    Ok(out)
}

/// The `crashring` a guest of `k` runs: the host's own on amd64, a static
/// build for arm64 (the guest has no libraries of its own).
pub fn guest_crashring(sh: &Shell, k: &Kernel) -> Result<PathBuf> {
    match k.arch {
        Arch::X86_64 => host_crashring(sh),
        Arch::Arm64 => {
            let target = ARM64_RUST_TARGET;
            // rust-lld: the target's own C runtime objects come with its
            // standard library, so no arm64 C library is needed.
            let linker = format!(
                "CARGO_TARGET_{}_LINKER",
                target.to_uppercase().replace('-', "_")
            );
            cmd!(
                sh,
                "cargo build --quiet --release --target {target} -p extractor --bin crashring"
            )
            .env(linker, "rust-lld")
            .run()?;
            Ok(sh
                .current_dir()
                .join(format!("target/{target}/release/crashring")))
        }
    }
}

/// `cargo xtask build`: crashring.ko for every kernel and the
/// `crashring` guests run.
pub fn build_all(sh: &Shell) -> Result<()> {
    for series in SERIES {
        let k = kernel(series)?;
        let ko = build_module(sh, &k)?;
        eprintln!("built {}", ko.display());
    }
    for series in ["6.12", "arm64-6.12"] {
        let bin = guest_crashring(sh, &kernel(series)?)?;
        eprintln!("built {}", bin.display());
    }
    Ok(())
}

/// A module and everything it depends on, in load order, as paths relative
/// to the modules directory. modules.dep already lists the whole closure;
/// like modprobe, load it from the end.
fn with_dependencies(k: &Kernel, name: &str) -> Result<Vec<String>> {
    let dep_file = k.modules.join("modules.dep");
    let dep = std::fs::read_to_string(&dep_file).context("reading modules.dep")?;
    let stem = |p: &str| {
        p.rsplit('/')
            .next()
            .and_then(|f| f.split('.').next())
            .map(str::to_string)
    };
    let line = dep
        .lines()
        .find(|l| l.split(':').next().and_then(stem).as_deref() == Some(name))
        .with_context(|| format!("module {name} not in {}", dep_file.display()))?;
    let (path, deps) = line.split_once(':').unwrap_or((line, ""));
    let mut order: Vec<String> = deps.split_whitespace().rev().map(String::from).collect();
    order.push(path.to_string());
    Ok(order)
}

/// Copies kernel modules into `lib/` of the staging tree, decompressed
/// (busybox insmod cannot read .xz or .zst), and returns their names in
/// load order. Built-in modules are skipped.
fn stage_kernel_modules(
    sh: &Shell,
    k: &Kernel,
    names: &[&str],
    stage: &Path,
) -> Result<Vec<String>> {
    let builtin = std::fs::read_to_string(k.modules.join("modules.builtin")).unwrap_or_default();
    let mut order: Vec<String> = Vec::new();
    for name in names {
        let is_builtin = builtin
            .lines()
            .any(|l| l.rsplit('/').next().and_then(|f| f.split('.').next()) == Some(name));
        if is_builtin {
            continue;
        }
        for rel in with_dependencies(k, name)? {
            let file = rel.rsplit('/').next().unwrap_or(&rel);
            let plain = file
                .trim_end_matches(".xz")
                .trim_end_matches(".zst")
                .to_string();
            if order.contains(&plain) {
                continue;
            }
            let src = k.modules.join(&rel);
            let bytes = if rel.ends_with(".xz") {
                cmd!(sh, "xz -dc {src}").quiet().output()?.stdout
            } else if rel.ends_with(".zst") {
                cmd!(sh, "zstd -dc {src}").quiet().output()?.stdout
            } else {
                std::fs::read(&src)?
            };
            std::fs::write(stage.join("lib").join(&plain), bytes)?;
            order.push(plain);
        }
    }
    Ok(order)
}

/// What goes into an initramfs besides busybox.
pub struct Initramfs<'a> {
    pub kernel: &'a Kernel,
    pub module: &'a Path,
    pub crashring: &'a Path,
    /// Kernel modules to load before crashring.ko (with dependencies).
    pub kernel_modules: &'a [&'a str],
    /// Kernel modules the script loads itself, when it calls `load_later`
    /// (with the dependencies not loaded already).
    pub later_modules: &'a [&'a str],
    /// Host programs copied in at the same path, with the shared
    /// libraries `ldd` names for them.
    pub programs: &'a [&'a str],
    /// Other host files: (source, path inside the initramfs).
    pub files: &'a [(&'a Path, &'a str)],
    /// The /init script's body, run after the modules are loaded.
    pub script: &'a str,
}

/// Copies `program` into the staging tree at `at` (a path inside it),
/// and the libraries it loads at their own paths.
fn stage_program(sh: &Shell, program: &Path, at: &str, stage: &Path) -> Result<()> {
    // Without cargo's LD_LIBRARY_PATH (xtask runs under `cargo run`), which
    // would name a library of target/debug where the guest looks by the
    // program's run path.
    // A static program (arm64's crashring) has none: ldd says so, and
    // fails.
    let ldd = cmd!(sh, "ldd {program}")
        .env_remove("LD_LIBRARY_PATH")
        .quiet()
        .ignore_stderr()
        .ignore_status()
        .read()?;
    let libs = ldd
        .split_whitespace()
        .filter(|t| t.starts_with('/'))
        .map(|lib| (PathBuf::from(lib), lib));
    for (path, at) in std::iter::once((program.to_path_buf(), at)).chain(libs) {
        let real =
            std::fs::canonicalize(&path).with_context(|| format!("finding {}", path.display()))?;
        let dest = stage.join(at.trim_start_matches('/'));
        if let Some(dir) = dest.parent() {
            sh.create_dir(dir)?;
        }
        sh.copy_file(&real, &dest)?;
    }
    Ok(())
}

/// Copies the arm64 program at `path` of `root` (where setup unpacked
/// Debian's arm64 packages) into the staging tree at the same path, with
/// its dynamic loader and every library it loads, found by their ELF
/// headers (the host's ldd cannot run an arm64 program) at the paths of
/// `root` where the guest's loader looks for them.
fn stage_arm64_program(sh: &Shell, root: &Path, path: &str, stage: &Path) -> Result<()> {
    const LIB_DIRS: [&str; 2] = ["lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"];
    let mut todo = vec![path.trim_start_matches('/').to_string()];
    let mut done: Vec<String> = Vec::new();
    while let Some(rel) = todo.pop() {
        if done.contains(&rel) {
            continue;
        }
        let file = within(root, &rel)?;
        let dest = stage.join(&rel);
        if let Some(dir) = dest.parent() {
            sh.create_dir(dir)?;
        }
        sh.copy_file(&file, &dest)?;
        let headers = cmd!(sh, "readelf -d -l -W {file}")
            .quiet()
            .ignore_stderr()
            .read()?;
        for line in headers.lines() {
            if let Some(interp) = line
                .split_once("[Requesting program interpreter: ")
                .and_then(|(_, rest)| rest.strip_suffix(']'))
            {
                todo.push(interp.trim_start_matches('/').to_string());
            }
            if let Some(name) = line
                .split_once("(NEEDED)")
                .and_then(|(_, rest)| rest.split_once('[')?.1.strip_suffix(']'))
            {
                let found = LIB_DIRS
                    .iter()
                    .map(|d| format!("{d}/{name}"))
                    .find(|rel| root.join(rel).exists())
                    .with_context(|| {
                        format!("{path} needs {name}, which is not in {}", root.display())
                    })?;
                todo.push(found);
            }
        }
        done.push(rel);
    }
    Ok(())
}

/// `rel` inside `root`, its links followed inside `root` too (an
/// absolute link target names a path of the arm64 system, not the host's).
fn within(root: &Path, rel: &str) -> Result<PathBuf> {
    let mut path = root.join(rel);
    for _ in 0..16 {
        match std::fs::read_link(&path) {
            Ok(target) if target.is_absolute() => {
                path = root.join(target.strip_prefix("/").context("link target")?);
            }
            Ok(target) => {
                path = path.parent().context("link's folder")?.join(target);
            }
            Err(_) => return Ok(path),
        }
    }
    bail!("{} links on and on", root.join(rel).display())
}

/// Writes an uncompressed newc initramfs and returns its path.
pub fn initramfs(sh: &Shell, name: &str, spec: &Initramfs<'_>) -> Result<PathBuf> {
    let stage = work_dir(sh).join(format!("stage-{name}"));
    if stage.exists() {
        sh.remove_path(&stage)?;
    }
    for d in ["bin", "lib", "dev", "proc", "sys", "tmp", "mnt"] {
        sh.create_dir(stage.join(d))?;
    }
    sh.copy_file(spec.kernel.busybox(), stage.join("bin/busybox"))?;
    sh.copy_file(spec.module, stage.join("lib/crashring.ko"))?;
    stage_program(sh, spec.crashring, "/bin/crashring", &stage)?;
    let order = stage_kernel_modules(sh, spec.kernel, spec.kernel_modules, &stage)?;
    let later = stage_kernel_modules(sh, spec.kernel, spec.later_modules, &stage)?;
    for p in spec.programs {
        match spec.kernel.arch {
            Arch::X86_64 => stage_program(sh, Path::new(p), p, &stage)?,
            Arch::Arm64 => stage_arm64_program(sh, &spec.kernel.root, p, &stage)?,
        }
    }
    for (src, dest) in spec.files {
        let dest = stage.join(dest);
        if let Some(dir) = dest.parent() {
            sh.create_dir(dir)?;
        }
        sh.copy_file(src, &dest)?;
    }
    let mut init = String::from(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev\n",
    );
    for m in &order {
        init.push_str(&format!("insmod /lib/{m}\n"));
    }
    init.push_str("load_later() {\n  :\n");
    for m in later.iter().filter(|m| !order.contains(m)) {
        init.push_str(&format!("  insmod /lib/{m}\n"));
    }
    init.push_str("}\n");
    init.push_str(spec.script);
    let init_path = stage.join("init");
    sh.write_file(&init_path, init)?;
    cmd!(sh, "chmod 0755 {init_path}").run()?;
    let out = work_dir(sh).join(format!("{name}.cpio"));
    let list = {
        let _dir = sh.push_dir(&stage);
        cmd!(sh, "find .").quiet().read()?
    };
    let _dir = sh.push_dir(&stage);
    let archive = cmd!(sh, "cpio --quiet -o -H newc -R 0:0")
        .stdin(list)
        .quiet()
        .output()?
        .stdout;
    std::fs::write(&out, archive)?;
    Ok(out)
}
