//! The kernel module's ring code (kernel/crashring_ring.c) built for user
//! space by build.rs, and the tests that drive it: `c_ffi` mirrors its C
//! API, `c_ring` checks it against the golden image and under concurrent
//! and stopped writers, `c_model` replays pstore-ring's property-test
//! sequences through it and the Rust writer, `c_snapshot` takes live
//! snapshots (kernel/crashring_snapshot.c) under running writers. Test-only; the `c_ring`
//! benchmark includes `c_ffi.rs` on its own.
//!
//! This module owns the C API the tests share: `c_ffi` is a file of its
//! own only so that the benchmark can include it, and the tests take it
//! from here (`use super::*`), never from their sibling. Import rule:
//! children import from here or from their own children (pstore-ring's
//! golden scenario and test model, included with `#[path]` by the test
//! that uses each), never from one another.

mod c_debug;
mod c_ffi;
mod c_model;
mod c_ring;
mod c_snapshot;

use c_ffi::*;
