//! A program's own flight recorder, in a crash-persistent region.
//!
//! A [`Recorder`] hands each thread a [`Stream`] of its own, a ring of
//! pages of a crash-persistent region (FORMAT.md, section 15): a thread
//! records with plain stores, with no lock, no system call and no
//! allocation per event. The streams are, as [`Backing`] says, the kernel
//! module's (its pool of user streams in the region the kernel records,
//! mapped through `/dev/crashring`, for members of the `crashring` group:
//! they survive a kernel panic and come back beside the kernel's CPUs), or
//! a region file's the recorder formats and maps (`/dev/shm` by default,
//! or a DAX/pmem file), on any machine. Timestamps are `CLOCK_MONOTONIC`,
//! the clock of the kernel's streams, so `crashring extract` merges a
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
mod kernel;
mod recorder;
mod switch;

pub use clock::monotonic_ns;
/// Asking crashring-request.socket for a report without a crash.
pub use crashring_request as request;
pub use crashring_request::{request_report, Report, RequestError};
pub use pstore_ring::schema::{EventDef, FieldDef, FieldKind, Value};
pub use pstore_ring::write::Dropped;
pub use recorder::{Backing, Config, Error, Level, Recorder, Stream, FILE_PAGES};
pub use switch::CategoryError;
