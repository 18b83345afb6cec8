//! Compiles the kernel module's ring code for user space, so tests can
//! drive it and decode its output with the Rust reader.

fn main() {
    for f in [
        "crashring_ring.c",
        "crashring_ring.h",
        "crashring_env.h",
        "crashring_format.h",
    ] {
        println!("cargo:rerun-if-changed=../kernel/{f}");
    }
    println!("cargo:rerun-if-changed=csrc/ring_shim.c");
    cc::Build::new()
        .file("../kernel/crashring_ring.c")
        .file("csrc/ring_shim.c")
        .include("../kernel")
        .flag("-std=gnu11")
        .flag("-fno-strict-aliasing")
        .flag("-Wall")
        .extra_warnings(true)
        .warnings_into_errors(true)
        .opt_level(2)
        .compile("crashring_ring");
}
