//! The extractor: from a dump a field engineer was handed to ordered
//! per-CPU traces.
//!
//! The layers, bottom up:
//!
//! - [`source`]: bytes by file offset (a mapped file, a device, a
//!   reassembled flattened file).
//! - [`container`]: recognises the dump by its first bytes (ELF core,
//!   kdump-compressed, flattened, raw) and gives a [`phys::PhysMemory`].
//! - [`phys`]: one physical-memory view; holes are reported, never zeros.
//! - [`discover`]: finds regions by address or by scanning for the magic,
//!   and reads each out with its absent ranges.
//! - [`select`], [`output`], [`jsonl`], [`chrome`] and [`perfetto`]: what
//!   `crashring extract` prints; [`ctf`] writes a CTF trace directory,
//!   [`tracedat`] a trace-cmd file.
//! - [`bundle`]: `crashring bundle`, a bug-report archive of all of them,
//!   after [`redact`]ion, with user [`logs`] on the trace's timeline.
//!
//! Decoding, salvage and merging are `pstore-ring`'s; [`decode`] spreads
//! a region's streams over the cores.

pub mod bundle;
pub mod chrome;
pub mod compress;
pub mod container;
pub mod ctf;
pub mod decode;
pub mod discover;
pub mod jsonl;
pub mod logs;
pub mod lzo;
pub mod output;
pub mod parallel;
pub mod perfetto;
pub mod phys;
pub mod redact;
pub mod select;
pub mod source;
pub mod tracedat;
