//! Dump containers, recognised by their first bytes, never by file name.
//!
//! [`open`] looks at the start of a [`Source`] and returns a [`Dump`]: a
//! [`PhysMemory`] view plus what the container says about the machine
//! (VMCOREINFO, CPU count, whether it is complete). Flattened files are
//! reassembled on the fly ([`flat::FlatSource`]) and opened again.

pub mod elf;
pub mod flat;
pub mod kdump;
pub mod live;
pub(crate) mod mapped;
pub mod source;

pub use mapped::MappedMemory;

use crate::input::source::{FileOffset, Source, SourceError};
use crate::phys::{Backing, MemoryMap, PhysAddr, PhysMemory, Run};
use std::fmt;
use std::sync::Arc;

/// An opened dump.
pub struct Dump {
    /// One line saying what the input is, e.g. "ELF64 core (/proc/vmcore)",
    /// for people: decisions are taken on [`Dump::kind`].
    pub container: String,
    /// What the container is.
    pub kind: ContainerKind,
    pub memory: Box<dyn PhysMemory>,
    /// The crashed kernel's VMCOREINFO note, when the dump carries one.
    pub vmcoreinfo: Option<String>,
    /// CPUs the dump has register notes for, or its header names.
    pub cpus: Option<u32>,
    /// Things the user should know about the dump itself (incomplete,
    /// filtered, split), one sentence each.
    pub warnings: Vec<String>,
}

/// What kind of container a dump came in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// An ELF64 core.
    Elf(ElfOrigin),
    /// makedumpfile's kdump-compressed format.
    Kdump,
    /// makedumpfile's flattened format, holding this container once
    /// reassembled.
    Flattened(Box<ContainerKind>),
    /// A raw memory image or device: byte N is physical address N.
    Raw,
}

impl ContainerKind {
    /// Whether the input is a capture kernel's `/proc/vmcore` (or a plain
    /// copy of one), which holds System RAM only.
    pub fn is_vmcore(&self) -> bool {
        *self == ContainerKind::Elf(ElfOrigin::Vmcore)
    }
}

/// Who wrote an ELF core, as far as the core tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfOrigin {
    /// QEMU `dump-guest-memory` (it leaves notes named "QEMU").
    Qemu,
    /// `makedumpfile -E` (memory filtered out, or the dump incomplete).
    Makedumpfile,
    /// Nothing says otherwise: a capture kernel's `/proc/vmcore` or a
    /// copy of one.
    Vmcore,
}

impl fmt::Display for ElfOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElfOrigin::Qemu => "QEMU dump-guest-memory",
            ElfOrigin::Makedumpfile => "makedumpfile -E",
            ElfOrigin::Vmcore => "/proc/vmcore or compatible",
        })
    }
}

impl Dump {
    /// A VMCOREINFO value (`OSRELEASE`, `CRASHTIME`, `PAGESIZE`, ...).
    pub fn vmcoreinfo_value(&self, key: &str) -> Option<&str> {
        self.vmcoreinfo
            .as_deref()?
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
    }
}

/// Why an input could not be opened as a dump.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Source(#[from] SourceError),
    #[error("invalid {format} `{field}` at file offset {offset:#x}: {why}")]
    Invalid {
        format: &'static str,
        field: &'static str,
        offset: FileOffset,
        why: String,
    },
    #[error("{0}")]
    Unsupported(String),
}

impl OpenError {
    pub(crate) fn invalid(
        format: &'static str,
        field: &'static str,
        offset: FileOffset,
        why: impl Into<String>,
    ) -> OpenError {
        OpenError::Invalid {
            format,
            field,
            offset,
            why: why.into(),
        }
    }
}

const FLAT_MAGIC: &[u8; 16] = b"makedumpfile\0\0\0\0";

/// Opens `source` as whatever dump it is. Inputs that are no known
/// container are raw memory images: byte N is physical address N.
pub fn open(source: Arc<dyn Source>) -> Result<Dump, OpenError> {
    let mut head = [0u8; 16];
    let got = source
        .read_at(FileOffset(0), &mut head)
        .map_err(|e| SourceError::Io {
            offset: FileOffset(0),
            source: e,
        })?;
    let head = &head[..got];
    if head.starts_with(FLAT_MAGIC) {
        let flat = Arc::new(flat::FlatSource::open(source)?);
        let warnings = flat.warnings().to_vec();
        let mut dump = open_reassembled(flat).map_err(|e| match warnings.is_empty() {
            true => e,
            false => OpenError::Unsupported(format!("{e} ({})", warnings.join("; "))),
        })?;
        dump.container = format!("makedumpfile flattened format holding {}", dump.container);
        dump.kind = ContainerKind::Flattened(Box::new(dump.kind));
        dump.warnings.splice(0..0, warnings);
        return Ok(dump);
    }
    if let Some(dump) = open_structured(&source, head)? {
        return Ok(dump);
    }
    if let Some(what) = foreign(head) {
        return Err(OpenError::Unsupported(what));
    }
    raw(source)
}

/// The ELF and kdump formats, by their magic.
fn open_structured(source: &Arc<dyn Source>, head: &[u8]) -> Result<Option<Dump>, OpenError> {
    if head.starts_with(b"\x7fELF") {
        return elf::open(source.clone()).map(Some);
    }
    if head.starts_with(kdump::MAGIC) {
        return kdump::open(source.clone()).map(Some);
    }
    Ok(None)
}

fn open_reassembled(flat: Arc<flat::FlatSource>) -> Result<Dump, OpenError> {
    let mut head = [0u8; 16];
    let got = flat
        .read_at(FileOffset(0), &mut head)
        .map_err(|e| SourceError::Io {
            offset: FileOffset(0),
            source: e,
        })?;
    let source: Arc<dyn Source> = flat;
    open_structured(&source, &head[..got])?.ok_or_else(|| {
        OpenError::Unsupported(
            "the flattened file does not reassemble into a kdump-compressed or ELF dump".into(),
        )
    })
}

/// Formats we recognise and do not read, with what to do instead.
fn foreign(head: &[u8]) -> Option<String> {
    let known: &[(&[u8], &str)] = &[
        (
            b"PAGEDU64",
            "a Windows crash dump (QEMU win-dmp); crashring reads Linux dumps",
        ),
        (
            b"PAGEDUMP",
            "a 32-bit Windows crash dump; crashring reads Linux dumps",
        ),
        (
            b"DISKDUMP",
            "a legacy diskdump (before kdump); convert it with makedumpfile",
        ),
        (
            b"QEVM",
            "a QEMU savevm/migration stream, not a memory dump: use dump-guest-memory",
        ),
        (b"\x1f\x8b", "a gzip file: decompress it first"),
        (b"\xfd7zXZ\0", "an xz file: decompress it first"),
        (b"\x28\xb5\x2f\xfd", "a zstd file: decompress it first"),
        (b"BZh", "a bzip2 file: decompress it first"),
    ];
    known
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, what)| format!("the input is {what}"))
}

/// A raw image: a region copy, a pmem backing file or device, a memory
/// backend file, `/dev/mem`.
fn raw(source: Arc<dyn Source>) -> Result<Dump, OpenError> {
    let len = source.len();
    // A device without a size (`/dev/mem`) reaches the top of the
    // address space.
    let end = len.unwrap_or(u64::MAX);
    // Only what the source holds is present: bytes a reassembled file
    // lacks are lost, not zeros to search.
    // Byte N of the image is physical address N.
    let addr = |offset: FileOffset| PhysAddr(offset.0);
    let mut runs = Vec::new();
    let mut at = PhysAddr(0);
    for held in source.held_ranges(FileOffset(0)..FileOffset(end)) {
        if addr(held.start) > at {
            runs.push(Run::lost(at..addr(held.start)));
        }
        runs.push(Run {
            start: addr(held.start),
            end: addr(held.end),
            backing: Backing::Present,
            offset: Some(held.start),
        });
        at = addr(held.end);
    }
    if at < PhysAddr(end) {
        runs.push(Run::lost(at..PhysAddr(end)));
    }
    let map = MemoryMap::new(runs);
    let container = match len {
        None => "raw memory device of unknown size".to_string(),
        Some(len) => format!("raw memory image, {len} bytes"),
    };
    Ok(Dump {
        container,
        kind: ContainerKind::Raw,
        memory: Box::new(MappedMemory::new(source, map)),
        vmcoreinfo: None,
        cpus: None,
        warnings: Vec::new(),
    })
}
