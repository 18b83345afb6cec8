//! The environment: installing what the harness needs (`setup`), what a
//! guest boots with (`guest`), and running QEMU (`qemu`).
pub mod guest;
pub mod qemu;
pub mod setup;
