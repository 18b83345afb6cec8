//! From an input to recovered regions: the dump opened, its regions found
//! and read out, and each one decoded, salvaged and judged.
//!
//! [`open`] opens the input, [`find`] reads its regions out, and
//! [`Loaded::regions`] is the one per-region loop: each [`Recovered`]
//! region is what every subcommand, output writer and the bundle take.

mod decode;
mod key;
pub mod report;
pub mod signature;

pub use decode::decode;
pub use key::RegionKey;

use crate::discover::{self, DiscoverError, Found, Sweeper};
use crate::foreign::ftrace::{self, meta::MetaError};
use crate::foreign::printk::{self, PrintkError};
use crate::input::source::FileSource;
use crate::input::{self, ContainerKind, Dump, OpenError};
use crate::output::RegionView;
use crate::phys::PhysAddr;
use pstore_ring::kprintf::Pointers;
use pstore_ring::read::{HeaderError, HeaderTrust, LossKind, PagedTrace, Problem, Region};
use std::fmt::{self, Display};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What to read: the input and, unless the regions are scanned for, where
/// one region is.
#[derive(Clone, Debug)]
pub struct InputSpec {
    pub path: PathBuf,
    /// The region's physical address and, to override its header's, size.
    pub phys: Option<(PhysAddr, Option<u64>)>,
    /// Whether a region header whose CRC fails is used (with `phys`).
    pub trust: HeaderTrust,
}

/// Why an input gave no region to recover.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("opening {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        why: std::io::Error,
    },
    #[error("{} has no size to scan: give the region's address with --phys ADDR[:SIZE]", path.display())]
    NoSize { path: PathBuf },
    #[error("reading {}", path.display())]
    Container {
        path: PathBuf,
        #[source]
        why: OpenError,
    },
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    #[error("{}", no_region(path, container, *searched, *lost, *vmcore, holds))]
    NoRegion {
        path: PathBuf,
        container: String,
        searched: u64,
        lost: u64,
        /// Whether the input is a capture kernel's `/proc/vmcore`.
        vmcore: bool,
        /// What else the input holds, a sentence each: the kernel's
        /// printk log (if it has VMCOREINFO to find it by), its
        /// persistent ftrace buffers.
        holds: Vec<String>,
    },
}

/// Where a range set aside from the kernel is, when /proc/vmcore lacks
/// it: a range that is not System RAM is not in the vmcore. /dev/mem
/// reads it on the PC; arm64's reads only what the running kernel maps
/// (`valid_phys_addr_range()`, arch/arm64/mm/mmap.c), so there the module,
/// loaded with the crashed kernel's parameters, offers it as `previous`.
const WHERE_A_RESERVED_RANGE_IS: &str = if cfg!(target_arch = "aarch64") {
    "; a range in a no-map reserved-memory node is not System RAM and is not in /proc/vmcore: load crashring.ko with the crashed kernel's region= and read /sys/kernel/crashring/previous"
} else {
    "; a memmap= region is not System RAM and is not in /proc/vmcore: read it with --phys from /dev/mem"
};

fn no_region(
    path: &Path,
    container: &str,
    searched: u64,
    lost: u64,
    vmcore: bool,
    holds: &[String],
) -> String {
    let mut msg = format!(
        "no crashring region in {} ({container}; {searched} bytes of memory searched)",
        path.display()
    );
    if lost > 0 {
        msg += &format!(
            "; {lost} bytes of memory the dump should hold are not in it, see the warnings above"
        );
    }
    if vmcore {
        msg += WHERE_A_RESERVED_RANGE_IS;
    }
    for what in holds {
        msg += "; ";
        msg += what;
    }
    msg
}

/// Opens the input as whatever dump it is, for a scan of its regions
/// unless `spec.phys` places the one to read: a device without a size
/// (`/dev/mem`) is refused without it.
pub fn open(spec: &InputSpec) -> Result<Dump, LoadError> {
    open_for(spec, spec.phys.is_none())
}

/// Opens the input as whatever dump it is, for a reader that goes by
/// addresses it was given or finds (VMCOREINFO's, `--ramoops`) and never
/// scans: a device without a size is read like any other.
pub fn open_unscanned(spec: &InputSpec) -> Result<Dump, LoadError> {
    open_for(spec, false)
}

fn open_for(spec: &InputSpec, scans: bool) -> Result<Dump, LoadError> {
    let path = &spec.path;
    let source = FileSource::open(path).map_err(|why| LoadError::Open {
        path: path.clone(),
        why,
    })?;
    let source: Arc<dyn input::source::Source> = Arc::new(source);
    if source.len().is_none() && scans {
        return Err(LoadError::NoSize { path: path.clone() });
    }
    input::open(source).map_err(|why| LoadError::Container {
        path: path.clone(),
        why,
    })
}

/// An opened input and the regions read out of it.
pub struct Loaded {
    pub dump: Dump,
    pub found: Vec<Found>,
    /// Regions whose header checked out but whose bytes could not be read
    /// beside those found: each caller says so.
    pub unread: Vec<DiscoverError>,
    trust: HeaderTrust,
    /// The crashed kernel's printk log: read when first asked for.
    printk: OnceLock<Option<Result<printk::Log, PrintkError>>>,
    /// Where the scan saw persistent ftrace descriptors, and the buffers
    /// there, read when first asked for.
    ftrace_hits: Vec<PhysAddr>,
    ftrace: OnceLock<Vec<Result<ftrace::Instance, MetaError>>>,
}

/// Reads the regions out of `dump`: the one at `spec.phys`, or every one
/// a scan of its memory finds (`progress` is told the bytes scanned and
/// the total), noting on the way where the kernel's persistent ftrace
/// buffers are. Finding none is an error unless the dump holds the
/// kernel's printk log ([`Loaded::printk`]) or such a buffer
/// ([`Loaded::ftrace`]): a vmcore of a machine that never ran crashring
/// still has those to show.
pub fn find(
    dump: Dump,
    spec: &InputSpec,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Loaded, LoadError> {
    let loaded = find_any(dump, spec, progress)?;
    if loaded.found.is_empty() && !loaded.holds_kernel_logs() {
        return Err(loaded.no_region(spec));
    }
    Ok(loaded)
}

/// [`find`], an input with nothing of it found included: for a caller
/// that looks for more (ramoops zones where it was told they are).
pub fn find_any(
    dump: Dump,
    spec: &InputSpec,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Loaded, LoadError> {
    let mut ftrace_hits = Vec::new();
    let (found, mut unread) = match spec.phys {
        Some((addr, size)) => (
            vec![discover::read_at(&*dump.memory, addr, size, spec.trust)?],
            Vec::new(),
        ),
        None => {
            let total = dump.memory.map().present_bytes();
            let scanned = discover::scan(
                &*dump.memory,
                &mut |done| progress(done, total),
                &mut |addr, chunk| ftrace_hits.extend(ftrace::descriptor_hits(addr, chunk)),
            );
            (scanned.found, scanned.unread)
        }
    };
    // A region that is there but could not be read is that, not "no region".
    if found.is_empty() && !unread.is_empty() {
        return Err(unread.swap_remove(0).into());
    }
    Ok(Loaded {
        dump,
        found,
        unread,
        trust: spec.trust,
        printk: OnceLock::new(),
        ftrace_hits,
        ftrace: OnceLock::new(),
    })
}

/// A region whose header is unusable.
#[derive(Debug, thiserror::Error)]
#[error("region at physical address {addr:#x}")]
pub struct RecoverError {
    pub addr: PhysAddr,
    #[source]
    pub why: HeaderError,
}

/// Where a region was read from, as what people read says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At this physical address of the machine's memory.
    Physical(PhysAddr),
    /// At the start of a raw file: a copy of the region
    /// (`/sys/kernel/crashring/previous` or a file saved from it) or a
    /// pmem device it fills. Its physical address is nowhere in the file,
    /// and the 0 a raw image's "byte N is address N" gives is no address.
    FileStart,
}

impl Place {
    /// Where the region found at `addr` of a dump of kind `kind` is.
    pub fn of(kind: &ContainerKind, addr: PhysAddr) -> Place {
        match kind {
            // No memory image holds a region at address 0: the firmware's
            // first page is there. A raw file starting with one is a copy.
            ContainerKind::Raw if addr == PhysAddr(0) => Place::FileStart,
            _ => Place::Physical(addr),
        }
    }

    /// The words after "region N" that say where it is, for an input
    /// named `file`: ` at physical address 0x…`, or that it was read from
    /// `file`, whose physical address is not known.
    pub fn phrase(self, file: impl Display) -> impl Display {
        struct Phrase<F>(Place, F);
        impl<F: Display> Display for Phrase<F> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Place::Physical(a) => write!(f, " at physical address {a:#x}"),
                    Place::FileStart => write!(
                        f,
                        ", read from {} (a copy of the region; its physical address is not known from the file)",
                        self.1
                    ),
                }
            }
        }
        Phrase(self, file)
    }
}

/// One region, recovered: where it was found, parsed over its bytes with
/// the dump's holes marked, and decoded.
pub struct Recovered<'a> {
    /// Its place among the input's regions, in `crashring info` order.
    pub index: usize,
    pub found: &'a Found,
    /// Where it was read from: [`Self::addr`] is a physical address only
    /// for [`Place::Physical`].
    pub place: Place,
    pub region: Region<'a>,
    pub trace: PagedTrace<'a>,
    /// What its outputs' hashes are keyed with: made when first asked
    /// for, as it reads the whole region (`info` and most outputs never
    /// need it).
    key: OnceLock<RegionKey>,
    /// How `debug` messages show kernel pointers: [`hashed_pointers`]
    /// unless the reader asked for them raw.
    pub pointers: Pointers,
    /// Gives the region's pages back while it is decoded and written.
    _sweeper: Sweeper,
}

/// Kernel pointers as the kernel's `%p` shows them, hashed with a key
/// derived from the region's (the kernel's own key died with it): one
/// address the same identifier throughout an output. Only a region with a
/// callsite area holds messages to format, so no other is read for it.
fn hashed_pointers(region: &Region, key: &OnceLock<RegionKey>) -> Pointers {
    if region.callsites.is_none() {
        return Pointers::Hidden;
    }
    let key = key.get_or_init(|| RegionKey::of(region));
    let mut pointer_key = [0u8; 16];
    pointer_key.copy_from_slice(&key.derive(b"crashring pointer key v2\0")[..16]);
    Pointers::Hashed(pointer_key)
}

/// How often a recovered region's pages are given back: readers walk at
/// most a few hundred MiB/s per core, so a few MiB are resident between
/// two sweeps, and a sweep costs a few microseconds.
const SWEEP: Duration = Duration::from_millis(10);

impl<'a> Recovered<'a> {
    /// Parses and decodes the region `found` holds.
    pub fn of(
        index: usize,
        found: &'a Found,
        place: Place,
        trust: HeaderTrust,
    ) -> Result<Self, RecoverError> {
        let sweeper = found.bytes.sweep_every(SWEEP);
        let region = Region::parse(&found.bytes, trust).map_err(|why| RecoverError {
            addr: found.addr,
            why,
        })?;
        let region = region.with_absent(found.absent());
        let key = OnceLock::new();
        let pointers = hashed_pointers(&region, &key);
        let trace = decode(&region, &|walked| found.bytes.release(walked));
        Ok(Recovered {
            index,
            found,
            place,
            region,
            trace,
            key,
            pointers,
            _sweeper: sweeper,
        })
    }

    /// What its outputs' hashes are keyed with (made once, reading the
    /// whole region, the first time it is asked for).
    pub fn key(&self) -> &RegionKey {
        self.key.get_or_init(|| RegionKey::of(&self.region))
    }

    /// Physical address of the region's first byte.
    pub fn addr(&self) -> PhysAddr {
        self.found.addr
    }

    /// The region as the output writers take it.
    pub fn view(&self) -> RegionView<'_, 'a> {
        RegionView {
            index: self.index,
            addr: self.addr().0,
            region: &self.region,
            trace: &self.trace,
            overlay: None,
            pointers: self.pointers,
        }
    }

    /// Whether the trace is damaged, as opposed to merely old: overwritten
    /// and writer-dropped events are what a flight recorder does,
    /// everything else is damage. Pages the dump's filter left out count
    /// only if events were lost with them (makedumpfile's zero-page filter
    /// leaves out every unused page); pages lost or cut off count always,
    /// as nobody knows what they held. A stream whose end is lost or
    /// unknown is damaged even when no count could be put on it.
    pub fn damaged(&self) -> bool {
        self.found.unaccounted()
            || self
                .trace
                .diagnostics
                .iter()
                .any(|d| !matches!(d.problem, Problem::Absent { .. }))
            || self.trace.streams.iter().any(|s| {
                s.lost(LossKind::Unreadable) > 0
                    || s.lost(LossKind::Torn) > 0
                    || s.losses.iter().any(|l| l.kind == LossKind::End)
            })
    }
}

impl Loaded {
    /// Every region, recovered one at a time in `crashring info` order:
    /// the one loop over regions.
    pub fn regions(&self) -> impl Iterator<Item = Result<Recovered<'_>, RecoverError>> {
        self.found
            .iter()
            .enumerate()
            .map(|(n, f)| Recovered::of(n, f, Place::of(&self.dump.kind, f.addr), self.trust))
    }

    /// Whether the dump holds the kernel's printk log or a persistent
    /// ftrace buffer that reads: what a dump without a region can show.
    pub fn holds_kernel_logs(&self) -> bool {
        matches!(self.printk(), Some(Ok(_))) || self.ftrace().iter().any(Result::is_ok)
    }

    /// Whether regions are several, so that outputs name each one.
    pub fn several(&self) -> bool {
        self.found.len() > 1
    }

    /// The crashed kernel's own printk log, when the dump's VMCOREINFO
    /// locates it (`None` without VMCOREINFO).
    pub fn printk(&self) -> Option<&Result<printk::Log, PrintkError>> {
        self.printk
            .get_or_init(|| printk::of_dump(&self.dump))
            .as_ref()
    }

    /// The kernel's persistent ftrace buffers the scan saw (none when
    /// `--phys` placed the region instead).
    pub fn ftrace(&self) -> &[Result<ftrace::Instance, MetaError>] {
        self.ftrace
            .get_or_init(|| ftrace::read_hits(&*self.dump.memory, &self.ftrace_hits))
    }

    /// The error for an input with no region, for the commands that need
    /// one: what was searched, and what else the input holds.
    pub fn no_region(&self, spec: &InputSpec) -> LoadError {
        let map = self.dump.memory.map();
        LoadError::NoRegion {
            path: spec.path.clone(),
            container: self.dump.container.clone(),
            searched: map.present_bytes(),
            lost: map.lost_bytes(),
            vmcore: self.dump.kind.is_vmcore(),
            holds: self
                .printk()
                .map(|log| match log {
                    Ok(log) => format!(
                        "it holds the kernel's printk log ({} records): `crashring dmesg {}` prints it",
                        log.records.len(),
                        spec.path.display()
                    ),
                    Err(e) => format!("its printk log could not be read: {e}"),
                })
                .into_iter()
                .chain(self.ftrace().iter().flatten().map(|i| {
                    format!(
                        "it holds a persistent ftrace buffer at {:#x}: `crashring ftrace {}` prints it",
                        i.base,
                        spec.path.display()
                    )
                }))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::source::Source;

    #[test]
    fn a_raw_file_starting_with_a_region_has_no_physical_address() {
        use crate::input::ElfOrigin;
        let copy = Place::of(&ContainerKind::Raw, PhysAddr(0));
        assert_eq!(copy, Place::FileStart);
        assert_eq!(
            copy.phrase("previous").to_string(),
            ", read from previous (a copy of the region; its physical address is not known from the file)"
        );
        // In a memory image byte N is address N; in a dump the container
        // says where each byte was.
        for kind in [ContainerKind::Raw, ContainerKind::Elf(ElfOrigin::Qemu)] {
            let at = Place::of(&kind, PhysAddr(0x7e00_0000));
            assert_eq!(
                at.phrase("vmcore").to_string(),
                " at physical address 0x7e000000"
            );
        }
        let elf = Place::of(&ContainerKind::Elf(ElfOrigin::Vmcore), PhysAddr(0));
        assert_eq!(elf, Place::Physical(PhysAddr(0)));
    }

    #[test]
    fn a_device_without_a_size_is_read_only_at_an_address() {
        // A character device that is no DAX device has no size, as
        // `/dev/mem` has none.
        let spec = InputSpec {
            path: PathBuf::from("/dev/zero"),
            phys: None,
            trust: HeaderTrust::Checksummed,
        };
        assert_eq!(FileSource::open(&spec.path).unwrap().len(), None);
        match open(&spec) {
            Err(e @ LoadError::NoSize { .. }) => assert_eq!(
                e.to_string(),
                "/dev/zero has no size to scan: give the region's address with --phys ADDR[:SIZE]"
            ),
            Err(e) => panic!("{e}"),
            Ok(dump) => panic!("opened: {}", dump.container),
        }
        let spec = InputSpec {
            phys: Some((PhysAddr(0x1000), None)),
            ..spec
        };
        let dump = open(&spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dump.container, "raw memory device of unknown size");
        let map = dump.memory.map();
        assert_eq!(map.runs().len(), 1);
        assert_eq!(map.runs()[0].end, PhysAddr(u64::MAX));
    }
}
