//! Building and running C programs against the header and the cdylib,
//! for the tests and benches/user.rs.

#![allow(dead_code)] // Each test binary uses its own part.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo test` (or `bench`) put `libcrashring_user.so`: in
/// `deps/`, beside the test itself. Only `cargo build` copies it up a level, so the copy there
/// may be stale.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

/// Compiles `sources` (relative to the crate) with warnings as errors into
/// `dir/name`, against include/crashring_user.h and the cdylib, with
/// `flags` (e.g. another library's `pkg-config` output) last.
pub fn build(dir: &Path, name: &str, sources: &[&str], flags: &[String]) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join(name);
    let lib = lib_dir();
    let status = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2"])
        .arg("-I")
        .arg(here.join("include"))
        .arg("-I")
        .arg(here.join("../../kernel"))
        .args(sources.iter().map(|s| here.join(s)))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lcrashring_user", "-lpthread"])
        .args(flags)
        .status()
        .unwrap();
    assert!(status.success(), "cc {sources:?} failed");
    out
}

/// A built program, finding its library by its run path alone: cargo's
/// `LD_LIBRARY_PATH` names the level above `deps/` too.
pub fn run(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// `pkg-config --cflags --libs package`, or `None` when the package is
/// not installed, which fails the test where setup should have installed
/// it (`CRASHRING_REQUIRE_READERS=1` or `CI=true`).
pub fn pkg_config(package: &str) -> Option<Vec<String>> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", package])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(out) = out else {
        let required = std::env::var("CRASHRING_REQUIRE_READERS").as_deref() == Ok("1")
            || std::env::var("CI").as_deref() == Ok("true");
        assert!(
            !required,
            "{package} (pkg-config) is missing: `cargo xtask setup` installs it"
        );
        // Not through eprintln!, which libtest swallows for a passing test.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED: {package} is not installed");
        return None;
    };
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect(),
    )
}
