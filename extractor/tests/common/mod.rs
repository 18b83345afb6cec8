//! Shared by the integration tests: region images made by the format
//! crate's writer, dump containers built to their documented layouts, and
//! a way to run the real binary.

#![allow(dead_code)] // Each test binary uses its own part.

pub mod synth;

use std::path::PathBuf;
use std::process::{Command, Output};
pub use synth::image_sized;

pub fn crashring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crashring"))
        .args(args)
        .output()
        .unwrap()
}

/// A region of two CPUs behind `offset` bytes of other memory; `wrap`
/// writes enough to overwrite pages.
pub fn image(offset: usize, wrap: bool) -> Vec<u8> {
    image_sized(offset, 512, 16 * 1024, if wrap { 400 } else { 10 })
}

pub fn write_tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}
