//! The extractor: from a dump a field engineer was handed to ordered
//! per-CPU traces.
//!
//! The layers, bottom up (ARCHITECTURE.md draws the map):
//!
//! - [`input`]: bytes by file offset ([`input::source`]) and the dump
//!   container, recognised by its first bytes (ELF core, kdump-compressed
//!   with its codecs, flattened, raw), giving a [`phys::PhysMemory`].
//! - [`phys`]: one physical-memory view; holes are reported, never zeros.
//! - [`discover`]: finds regions by address or by scanning for the magic,
//!   and reads each out with its absent ranges.
//! - [`recover`]: the input opened and its regions found ([`recover::Loaded`]),
//!   each decoded on every core, salvaged and judged
//!   ([`recover::Recovered`]).
//! - [`output`]: what `crashring extract` writes, one [`output::Format`]
//!   per file behind one seam.
//! - [`bundle`]: `crashring bundle`, a bug-report archive of several
//!   outputs, after redaction, with user logs on the trace's timeline.
//! - [`export`]: `crashring export`, many bundles as one Parquet dataset.
//! - [`recovery`]: the unattended product's `crashring recover`: every
//!   generation the module keeps, bundled, checked, put in place and only
//!   then acknowledged, one run at a time.
//!
//! Decoding, salvage and merging are `pstore-ring`'s.

pub mod bundle;
pub mod discover;
pub mod export;
pub mod follow;
pub mod foreign;
pub mod input;
pub mod kmem;
pub mod output;
pub mod phys;
pub mod recover;
pub mod recovery;
