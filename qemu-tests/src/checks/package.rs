//! `cargo xtask package`: the two Debian packages, built with cargo-deb
//! from the metadata in extractor/Cargo.toml (crashring: the CLI, its
//! units, configuration, manual page and completions, and crashring-user
//! for C programs) and
//! kexec-hooks/Cargo.toml (crashring-dkms: the module's source for DKMS),
//! then checked by lintian (no error allowed) and for what they must hold.

use anyhow::{ensure, Context, Result};
use std::path::{Path, PathBuf};
use xshell::{cmd, Shell};

/// Where the packages and the files generated for them go.
const OUT: &str = "target/crashring/package";

/// What each package must hold (`dpkg-deb -c` paths).
const CONTENTS: [(&str, &[&str]); 2] = [
    (
        "crashring",
        &[
            "./usr/bin/crashring",
            "./etc/crashring/crashring.conf",
            "./usr/lib/systemd/system/crashring-recover.service",
            "./usr/lib/systemd/system/crashring-capture.service",
            "./usr/lib/systemd/system/crashring-upload.service",
            "./usr/lib/systemd/system/crashring-kdump-tools.service",
            "./usr/lib/systemd/system/crashring-device.service",
            "./usr/lib/systemd/system/crashring-request.socket",
            "./usr/lib/systemd/system/crashring-request@.service",
            "./usr/share/man/man1/crashring.1.gz",
            "./usr/share/bash-completion/completions/crashring",
            "./usr/share/zsh/vendor-completions/_crashring",
            "./usr/share/fish/vendor_completions.d/crashring.fish",
            "./usr/lib/udev/rules.d/60-crashring.rules",
            "./usr/lib/sysusers.d/crashring.conf",
            "./usr/share/initramfs-tools/hooks/crashring",
            "./usr/lib/dracut/modules.d/90crashring-early/module-setup.sh",
            "./usr/lib/dracut/modules.d/90crashring-early/crashring-early.sh",
            "./usr/lib/dracut/modules.d/99crashring/module-setup.sh",
            "./usr/lib/dracut/modules.d/99crashring/kdump-pre.sh",
            "./usr/lib/crashring/libcrashring_user.so",
            "./usr/include/crashring/crashring_user.h",
            "./usr/include/crashring/crashring_format.h",
            "./usr/include/crashring/crashring_uapi.h",
            "./usr/share/pkgconfig/crashring-user.pc",
        ],
    ),
    (
        "crashring-dkms",
        &[
            "./usr/src/crashring-0.0.0/dkms.conf",
            "./usr/src/crashring-0.0.0/Makefile",
            "./usr/src/crashring-0.0.0/Kbuild",
            "./usr/src/crashring-0.0.0/crashring_main.c",
            "./usr/src/crashring-0.0.0/crashring_budget.c",
            "./usr/src/crashring-0.0.0/crashring_format.h",
        ],
    ),
];

/// What each package's maintainer scripts must say (`dpkg-deb --info
/// DEB SCRIPT`): crashring's postrm undoes `crashring arm` on purge (by
/// its mark, since the binary is gone by then) and regenerates GRUB's
/// menu; cargo-deb put its unit handling where `#DEBHELPER#` stood.
const SCRIPTS: [(&str, &str, &[&str]); 7] = [
    (
        "crashring",
        "postrm",
        &[
            "# Written by `crashring arm`; `crashring disarm` removes it.",
            "# >>> Added by `crashring arm`",
            "update-grub",
            "deb-systemd-helper purge",
        ],
    ),
    (
        "crashring",
        "postinst",
        &["systemd-sysusers crashring.conf"],
    ),
    (
        "crashring-dkms",
        "postinst",
        &["common.postinst crashring", "mokutil --test-key"],
    ),
    // The initramfs an armed machine boots with holds the hook's module:
    // built again when either package changes it, on an armed machine
    // only.
    (
        "crashring",
        "postinst",
        &[
            "modules-load.d/crashring.conf",
            "dpkg-trigger --no-await update-initramfs",
        ],
    ),
    (
        "crashring",
        "postrm",
        &[
            "modules-load.d/crashring.conf",
            "dpkg-trigger --no-await update-initramfs",
        ],
    ),
    (
        "crashring-dkms",
        "postinst",
        &[
            "modules-load.d/crashring.conf",
            "dpkg-trigger --no-await update-initramfs",
        ],
    ),
    (
        "crashring-dkms",
        "postrm",
        &[
            "modules-load.d/crashring.conf",
            "dpkg-trigger --no-await update-initramfs",
        ],
    ),
];

/// Control fields that must name something (`dpkg-deb --field`): DKMS
/// builds nothing without the headers, and Debian 13's dkms no longer
/// pulls them in.
const FIELDS: [(&str, &str, &str); 1] = [("crashring-dkms", "Recommends", "linux-headers-generic")];

/// cargo-deb, installed on first use as cargo-mutants is.
fn ensure_cargo_deb(sh: &Shell) -> Result<()> {
    if cmd!(sh, "cargo deb --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_err()
    {
        eprintln!("installing cargo-deb: cargo install --locked cargo-deb");
        cmd!(sh, "cargo install --locked cargo-deb").run()?;
    }
    Ok(())
}

/// Builds both packages into [`OUT`] and checks what they hold; returns
/// their paths.
pub fn build(sh: &Shell) -> Result<Vec<PathBuf>> {
    ensure_cargo_deb(sh)?;
    sh.create_dir(OUT)?;
    cmd!(
        sh,
        "cargo build --quiet --release -p extractor --bin crashring"
    )
    .run()?;
    // Apart: with --bin, cargo builds no library of any package named.
    cmd!(sh, "cargo build --quiet --release -p crashring-user --lib").run()?;
    let crashring = "target/release/crashring";
    for (what, file) in [
        ("bash", "crashring.bash"),
        ("zsh", "_crashring"),
        ("fish", "crashring.fish"),
    ] {
        let text = cmd!(sh, "{crashring} generate {what}").quiet().read()?;
        sh.write_file(format!("{OUT}/{file}"), text + "\n")?;
    }
    // cargo-deb strips the binaries it knows, not a library among the
    // assets.
    cmd!(
        sh,
        "strip --strip-unneeded -o {OUT}/libcrashring_user.so target/release/libcrashring_user.so"
    )
    .run()?;
    let man = cmd!(sh, "{crashring} generate man").quiet().read()?;
    sh.write_file(format!("{OUT}/crashring.1"), man + "\n")?;
    // -n: no name or time stamp, so the same tree gives the same package.
    cmd!(sh, "gzip -9nf {OUT}/crashring.1").quiet().run()?;
    let mut debs = Vec::new();
    for (package, strip) in [("extractor", &[][..]), ("kexec-hooks", &["--no-strip"][..])] {
        let out = cmd!(
            sh,
            "cargo deb --quiet -p {package} --no-build {strip...} --output {OUT}"
        )
        .read()?;
        let deb = out
            .lines()
            .last()
            .context("cargo deb named no package")?
            .trim();
        debs.push(sh.current_dir().join(deb));
    }
    for ((name, paths), deb) in CONTENTS.iter().zip(&debs) {
        let listed = cmd!(sh, "dpkg-deb -c {deb}").quiet().read()?;
        let held: Vec<&str> = listed
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .collect();
        for p in *paths {
            ensure!(held.contains(p), "{name}: {} lacks {p}", deb.display());
        }
    }
    let deb_of = |name: &str| &debs[CONTENTS.iter().position(|(n, _)| *n == name).unwrap()];
    for (name, field, wanted) in FIELDS {
        let deb = deb_of(name);
        let value = cmd!(sh, "dpkg-deb --field {deb} {field}").quiet().read()?;
        ensure!(
            value.contains(wanted),
            "{name}: the {field} of {} lacks {wanted}: {value:?}",
            deb.display()
        );
    }
    for (name, script, lines) in SCRIPTS {
        let deb = deb_of(name);
        let text = cmd!(sh, "dpkg-deb --info {deb} {script}").quiet().read()?;
        for line in lines {
            ensure!(
                text.contains(line),
                "{name}: the {script} of {} lacks {line:?}",
                deb.display()
            );
        }
    }
    Ok(debs)
}

/// Builds both packages and checks them with lintian; returns their paths.
pub fn run(sh: &Shell) -> Result<Vec<PathBuf>> {
    let debs = build(sh)?;
    eprintln!("lintian (errors fail):");
    let all = &debs;
    cmd!(sh, "lintian --fail-on error {all...}").run()?;
    build_against_package(sh, &debs[0])?;
    for d in &debs {
        println!("{}", d.display());
    }
    Ok(debs)
}

/// A C program built from what the crashring package installs, found
/// through its pkg-config file alone, records a line into a file region.
fn build_against_package(sh: &Shell, deb: &Path) -> Result<()> {
    eprintln!("a C program built with `pkg-config crashring-user` from the package:");
    let root = tempfile::tempdir()?;
    let tree = root.path().join("root");
    cmd!(sh, "dpkg-deb -x {deb} {tree}").run()?;
    let src = root.path().join("hello.c");
    sh.write_file(
        &src,
        "#include <crashring_user.h>\n\
         int main(int argc, char **argv)\n\
         {\n\
         \tstruct crashring_user_config cfg = { .name = \"hello\", .path = argv[1],\n\
         \t\t\t\t\t     .backing = CRASHRING_USER_FILE };\n\
         \tstruct crashring_recorder *rec = argc == 2 ? crashring_recorder_create(&cfg) : NULL;\n\
         \tstruct crashring_stream *s = rec ? crashring_stream_get(rec) : NULL;\n\
         \n\
         \tif (!s || crashring_log(s, 6, \"main\", \"hello from %s\", \"C\"))\n\
         \t\treturn 1;\n\
         \tcrashring_stream_put(s);\n\
         \tcrashring_recorder_destroy(rec);\n\
         \treturn 0;\n\
         }\n",
    )?;
    let bin = root.path().join("hello");
    let flags = {
        let _path = sh.push_env("PKG_CONFIG_PATH", tree.join("usr/share/pkgconfig"));
        let _sysroot = sh.push_env("PKG_CONFIG_SYSROOT_DIR", &tree);
        cmd!(sh, "pkg-config --cflags --libs crashring-user").read()?
    };
    let flags: Vec<&str> = flags.split_whitespace().collect();
    cmd!(sh, "cc -Wall -Werror {src} -o {bin} {flags...}").run()?;
    // pkg-config put the sysroot before every path, the run path's too.
    let region = root.path().join("hello.crashring");
    cmd!(sh, "{bin} {region}").run()?;
    let text = cmd!(sh, "target/release/crashring extract {region}").read()?;
    ensure!(
        text.contains("text=\"hello from C\""),
        "the packaged library recorded nothing: {text}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The paths the check looks for are where cargo-deb puts the assets
    /// extractor/Cargo.toml names.
    #[test]
    fn every_required_path_is_an_asset_or_a_unit() {
        let manifest = include_str!("../../../extractor/Cargo.toml");
        for p in super::CONTENTS[0].1 {
            let p = p.trim_start_matches("./");
            let file = p.rsplit('/').next().unwrap();
            let unit = file.strip_suffix(".service");
            assert!(
                manifest.contains(&format!("\"{}", p.rsplit_once('/').unwrap().0))
                    || unit.is_some_and(|u| manifest.contains(&format!("unit-name = \"{u}\""))),
                "{p} is neither an asset nor a unit of extractor/Cargo.toml"
            );
        }
    }
}
