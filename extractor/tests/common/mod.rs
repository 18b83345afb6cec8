//! Shared by the integration tests: region images made by the format
//! crate's writer, dump containers built to their documented layouts, and
//! a way to run the real binary.

#![allow(dead_code)] // Each test binary uses its own part.

pub mod synth;

use pstore_ring::layout::{REASON_PANIC, STATE_CRASHED};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::path::PathBuf;
use std::process::{Command, Output};

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

/// A region of two CPUs with 4 pages of `page_size` each, `size` bytes in
/// all, behind `offset` bytes of other memory, with `n` printk events and a
/// crash event.
pub fn image_sized(offset: usize, page_size: u32, size: usize, n: u64) -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size,
        pages_per_stream: Some(4),
        streams: &specs,
        ..Default::default()
    };
    let mut mem = vec![0x5Au8; offset + size];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let crash = schema::builtin(schema::EVENT_CRASH).unwrap();
    let mut f = write::format(&mut mem[offset..], &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    for i in 0..n {
        let text = format!("message {i}");
        let v = [
            Value::Unsigned(6),
            Value::Unsigned(0),
            Value::Unsigned(1),
            Value::Unsigned(i),
            Value::Str(text.as_bytes()),
        ];
        ws[(i % 2) as usize]
            .write_event(1_000 + i * 10, printk, &v)
            .unwrap();
    }
    let msg = b"Kernel panic - not syncing: test";
    ws[1]
        .write_event(
            1_000 + n * 10,
            crash,
            &[Value::Unsigned(1), Value::Unsigned(1), Value::Str(msg)],
        )
        .unwrap();
    f.control.set_state(
        STATE_CRASHED,
        REASON_PANIC,
        1_000 + n * 10,
        1,
        "Kernel panic - not syncing: test",
    );
    ws.iter_mut().for_each(|w| w.close());
    mem
}

pub fn write_tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}
