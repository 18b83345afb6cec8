//! `cargo xtask package`: the two Debian packages, built with cargo-deb
//! from the metadata in extractor/Cargo.toml (crashring: the CLI, its
//! units, configuration, manual page and completions) and
//! kexec-hooks/Cargo.toml (crashring-dkms: the module's source for DKMS),
//! then checked by lintian (no error allowed) and for what they must hold.

use anyhow::{ensure, Context, Result};
use std::path::PathBuf;
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
            "./usr/share/man/man1/crashring.1.gz",
            "./usr/share/bash-completion/completions/crashring",
            "./usr/share/zsh/vendor-completions/_crashring",
            "./usr/share/fish/vendor_completions.d/crashring.fish",
            "./usr/lib/udev/rules.d/60-crashring.rules",
            "./usr/lib/sysusers.d/crashring.conf",
            "./usr/lib/dracut/modules.d/99crashring/module-setup.sh",
            "./usr/lib/dracut/modules.d/99crashring/kdump-pre.sh",
        ],
    ),
    (
        "crashring-dkms",
        &[
            "./usr/src/crashring-0.0.0/dkms.conf",
            "./usr/src/crashring-0.0.0/Makefile",
            "./usr/src/crashring-0.0.0/Kbuild",
            "./usr/src/crashring-0.0.0/crashring_main.c",
            "./usr/src/crashring-0.0.0/crashring_format.h",
        ],
    ),
];

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
    let crashring = "target/release/crashring";
    for (what, file) in [
        ("bash", "crashring.bash"),
        ("zsh", "_crashring"),
        ("fish", "crashring.fish"),
    ] {
        let text = cmd!(sh, "{crashring} generate {what}").quiet().read()?;
        sh.write_file(format!("{OUT}/{file}"), text + "\n")?;
    }
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
    Ok(debs)
}

/// Builds both packages and checks them with lintian; returns their paths.
pub fn run(sh: &Shell) -> Result<Vec<PathBuf>> {
    let debs = build(sh)?;
    eprintln!("lintian (errors fail):");
    let all = &debs;
    cmd!(sh, "lintian --fail-on error {all...}").run()?;
    for d in &debs {
        println!("{}", d.display());
    }
    Ok(debs)
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
