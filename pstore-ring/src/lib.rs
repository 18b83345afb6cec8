//! `pstore-ring`: crashring's crash-persistent ring format, version 1.
//!
//! This crate is the single source of truth for the bytes the kernel module
//! writes and the extractor reads. `FORMAT.md` beside it is the
//! specification in prose; this crate is the same thing in code. It does no
//! I/O: everything works on byte slices.
//!
//! The layers, lowest first:
//!
//! - [`layout`]: the raw `repr(C)` structures and constants, integers held
//!   as byte arrays in an explicit [`Endian`].
//! - [`schema`]: built-in event types, the schema table's encoding, payload
//!   encoding and field decoding.
//! - [`record`]: the bounded, fused walk over one page's records.
//! - [`write`]: formatting a region in any `&mut [u8]` and recording into it.
//! - [`read`] (with `alloc`): parsing a region, rebuilding every stream from
//!   page sequence numbers, salvaging open pages, and the loss report,
//!   page by page ([`read::Region::decode_paged`]): each page's events are
//!   walked again when asked for, so memory follows the region's pages,
//!   not its events; [`read::Region::decode`] holds them all in vectors,
//!   for tests and small regions.
//! - [`merge`] and [`text`] (with `alloc`): one timeline over all streams
//!   ([`merge::merge`], or [`merge::merge_pages`] pulling from the page
//!   walks), and its `trace-cmd report`-like rendering.
//! - [`scan`]: finding regions inside a bigger image.
//!
//! Everything up to [`write`] builds with `no_std` and no allocator.
//!
//! ```
//! use pstore_ring::{read::{HeaderTrust, Region}, schema, write};
//!
//! let mut mem = vec![0u8; 64 * 1024];
//! let streams = [write::StreamSpec::cpu(0), write::StreamSpec::cpu(1)];
//! let cfg = write::RegionConfig { page_size: 1024, streams: &streams, ..Default::default() };
//! let mut region = write::format(&mut mem, &cfg).unwrap();
//! let mut cpu0 = region.streams.next().unwrap();
//! let lost = schema::builtin(schema::EVENT_LOST).unwrap();
//! cpu0.write_event(1_000, lost, &[schema::Value::Unsigned(3)]).unwrap();
//! drop(region);
//!
//! let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
//! let trace = region.decode();
//! assert_eq!(trace.streams[0].events.len(), 1);
//! assert_eq!(trace.streams[0].events[0].ts, 1_000);
//! assert_eq!(trace.lost_events(), 0);
//!
//! // The same, page by page: the events stay in `mem` until walked.
//! let paged = region.decode_paged();
//! let event = paged.streams[0].events().next().unwrap();
//! assert_eq!((event.ts, paged.event_count()), (1_000, 1));
//! let merged: Vec<_> = pstore_ring::merge::merge_pages(&paged.streams).collect();
//! assert_eq!(merged, [pstore_ring::merge::Pulled::Event(event)]);
//! ```
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod debug_args;
pub mod endian;
pub mod layout;
pub mod record;
pub mod scan;
pub mod schema;
pub mod write;

#[cfg(feature = "alloc")]
pub mod kprintf;
#[cfg(feature = "alloc")]
pub mod merge;
#[cfg(feature = "alloc")]
pub mod ras;
#[cfg(feature = "alloc")]
pub mod read;
#[cfg(feature = "alloc")]
pub mod text;

pub use endian::Endian;

/// The format specification, `FORMAT.md`; its Rust examples run as doctests.
#[doc = include_str!("../FORMAT.md")]
pub mod spec {}
