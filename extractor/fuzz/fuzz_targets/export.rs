//! Fuzz target: see `harness.rs`, `Target::Export`.
#![no_main]

// Each target uses only its part of each.
#[allow(dead_code)]
#[path = "../../tests/common/ftrace_area.rs"]
mod ftrace_area;
#[allow(dead_code)]
#[path = "../harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../../tests/common/printk_ring.rs"]
mod printk_ring;
#[allow(dead_code)]
#[path = "../../tests/common/ramoops_area.rs"]
mod ramoops_area;
#[allow(dead_code)]
#[path = "../../tests/common/synth.rs"]
mod synth;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::run(harness::Target::Export, data);
});
