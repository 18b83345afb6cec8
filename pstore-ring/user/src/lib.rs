//! A program's own flight recorder, in a crash-persistent region.
//!
//! A [`Recorder`] formats a region of user streams (FORMAT.md, section 15)
//! in a file it maps into memory, `/dev/shm` by default or a DAX/pmem
//! file, and hands each thread a [`Stream`] of its own: a thread records
//! with plain stores into its own ring of pages, with no lock, no system
//! call and no allocation per event. Timestamps are `CLOCK_MONOTONIC`, the
//! clock of the kernel's streams, so `crashring extract` merges a
//! program's events with the kernel's on one timeline.
//!
//! What a stream commits is in the file the moment it is committed: a
//! process killed at any instruction leaves every committed event
//! readable, and the one it was writing invisible (pstore-ring's writer
//! keeps its stores in the order the format's crash rules need).
//!
//! ```no_run
//! use crashring_user::{Config, Level, Recorder};
//! let rec = Recorder::create(&Config::new("weston"))?;
//! let mut s = rec.stream().expect("a stream per thread");
//! s.log(Level::Info, "drm", "page flip on CRTC 41")?;
//! s.log_fmt(Level::Debug, "input", format_args!("key {} down", 30))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! C programs use the same recorder through `include/crashring_user.h`
//! (the [`ffi`] module) and `pkg-config crashring-user`.

mod clock;
pub mod ffi;
mod recorder;

pub use clock::monotonic_ns;
pub use pstore_ring::schema::{EventDef, FieldDef, FieldKind, Value};
pub use pstore_ring::write::Dropped;
pub use recorder::{Config, Error, Level, Recorder, Stream};
