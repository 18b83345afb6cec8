//! The callsite area (FORMAT.md, section 18): a `debug` event names its
//! callsite by id, the entry's offset in the area, where the format
//! string, module, function, file and line were stored once.
//!
//! Entries are looked up by id, not found through a chain: an entry that
//! fails its checks costs the events that name it and nothing else.

use super::Region;
use crate::debug_args::Callsite;
use crate::endian::Endian;
use crate::layout::{
    CallsiteEntry, CallsiteHeader, Checksum, CALLSITE_ENTRY_SIZE, CALLSITE_HEADER_SIZE,
    CALLSITE_MAGIC, MAX_CALLSITE_SIZE, RECORD_ALIGN,
};
use alloc::vec::Vec;
use core::ops::Range;
use zerocopy::FromBytes;

/// Why the callsite area, or the entry a callsite id names, cannot be
/// used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallsiteError {
    #[error("the region has no callsite area")]
    NoArea,
    #[error("the callsite area's header is not in the input: the dump excluded or lost it")]
    HeaderAbsent,
    #[error("the input ends inside the callsite area's header")]
    HeaderTruncated,
    #[error("the callsite area's `magic` is {0:#010x}")]
    BadMagic(u32),
    #[error("callsite {id:#x} is not a 4-byte aligned offset inside the area's entries")]
    OutOfArea { id: u32 },
    #[error("callsite {id:#x} is not in the input: the dump excluded or lost it")]
    Absent { id: u32 },
    #[error("callsite {id:#x}: entry `size` {size} is invalid")]
    Size { id: u32, size: u32 },
    #[error("callsite {id:#x}: CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { id: u32, stored: u32, computed: u32 },
    #[error("callsite {id:#x}: its strings overrun the entry")]
    Strings { id: u32 },
}

/// The callsite area's place in the region, from its descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallsiteArea {
    /// Region offsets of the area's bytes.
    pub range: Range<u64>,
}

/// What the area's header says, when it passes its check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AreaHeader {
    pub refused: u32,
}

impl<'a> Region<'a> {
    /// The area's bytes, or why there are none to read.
    fn callsite_bytes(&self) -> Result<(&'a [u8], u64), CallsiteError> {
        let area = self.callsites.as_ref().ok_or(CallsiteError::NoArea)?;
        let start = usize::try_from(area.range.start).map_err(|_| CallsiteError::NoArea)?;
        let end = usize::try_from(area.range.end).map_err(|_| CallsiteError::NoArea)?;
        let bytes = self
            .bytes()
            .get(start..end.min(self.bytes().len()))
            .ok_or(CallsiteError::NoArea)?;
        Ok((bytes, area.range.start))
    }

    /// The area's header, if it is there and its magic right, or why not.
    pub fn callsite_header(&self) -> Result<AreaHeader, CallsiteError> {
        let (bytes, at) = self.callsite_bytes()?;
        if self.is_absent(at..at + CALLSITE_HEADER_SIZE as u64) {
            return Err(CallsiteError::HeaderAbsent);
        }
        let (h, _) =
            CallsiteHeader::read_from_prefix(bytes).map_err(|_| CallsiteError::HeaderTruncated)?;
        let e = self.header.endian;
        match h.magic.get(e) {
            CALLSITE_MAGIC => Ok(AreaHeader {
                refused: h.refused.get(e),
            }),
            magic => Err(CallsiteError::BadMagic(magic)),
        }
    }

    /// The callsite `id` names, checked.
    pub fn callsite(&self, id: u32) -> Result<Callsite<'a>, CallsiteError> {
        let (bytes, at) = self.callsite_bytes()?;
        let ctx = self.entry_ctx();
        let start = id as usize;
        if start < CALLSITE_HEADER_SIZE
            || !start.is_multiple_of(RECORD_ALIGN)
            || start + CALLSITE_ENTRY_SIZE > bytes.len()
        {
            return Err(CallsiteError::OutOfArea { id });
        }
        // The fixed part is read whatever `size` says: a `size` in a hole
        // reads as the placeholder's, 0 say.
        let size = crate::endian::u32_at(bytes, start, ctx.endian).unwrap_or(0);
        let len = u64::from(size).max(CALLSITE_ENTRY_SIZE as u64);
        let end = (start as u64).saturating_add(len);
        if self.is_absent(at + start as u64..at + end.min(bytes.len() as u64)) {
            return Err(CallsiteError::Absent { id });
        }
        ctx.entry(bytes, id)
    }

    /// Every callsite of the area in id order, walked by each entry's
    /// `size`, with the entries that failed their checks in their place.
    /// A torn entry whose `size` is plausible is skipped by it (the writer
    /// writes `size` first); the walk stops at a `size` of 0 (the area's
    /// unused end) or an implausible one, reported as [`Walk::stopped`]:
    /// entries past it are still found by their ids.
    pub fn callsites(&self) -> Result<Walk<'a>, CallsiteError> {
        let (bytes, at) = self.callsite_bytes()?;
        let ctx = self.entry_ctx();
        let mut walk = Walk::default();
        let mut pos = CALLSITE_HEADER_SIZE;
        while pos + CALLSITE_ENTRY_SIZE <= bytes.len() {
            let id = pos as u32;
            if self.is_absent(at + pos as u64..at + (pos + CALLSITE_ENTRY_SIZE) as u64) {
                walk.stopped = Some(CallsiteError::Absent { id });
                break;
            }
            let size = crate::endian::u32_at(bytes, pos, ctx.endian).unwrap_or(0);
            if size == 0 {
                break;
            }
            if !plausible_size(size) {
                walk.stopped = Some(CallsiteError::Size { id, size });
                break;
            }
            walk.entries.push(self.callsite(id).map(|c| (id, c)));
            pos += size as usize;
        }
        Ok(walk)
    }

    fn entry_ctx(&self) -> EntryCtx {
        EntryCtx {
            endian: self.header.endian,
            checksum: self.header.checksum,
            generation: self.header.generation,
        }
    }
}

/// What a walk of the callsite area found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk<'a> {
    /// In id order: each callsite with its id, or why the entry there
    /// failed.
    pub entries: Vec<Result<(u32, Callsite<'a>), CallsiteError>>,
    /// Why the walk ended before the area's unused end, if it did.
    pub stopped: Option<CallsiteError>,
}

/// Whether an entry's `size` can be one: aligned, room for its fixed part
/// and four empty strings, at most [`MAX_CALLSITE_SIZE`].
fn plausible_size(size: u32) -> bool {
    size as usize >= CALLSITE_ENTRY_SIZE + 8
        && (size as usize).is_multiple_of(RECORD_ALIGN)
        && size as usize <= MAX_CALLSITE_SIZE
}

struct EntryCtx {
    endian: Endian,
    checksum: Checksum,
    generation: u64,
}

impl EntryCtx {
    /// The entry at `id` in the area's `bytes`, checked.
    fn entry<'a>(&self, bytes: &'a [u8], id: u32) -> Result<Callsite<'a>, CallsiteError> {
        let e = self.endian;
        let start = id as usize;
        let (head, _) = bytes
            .get(start..)
            .and_then(|b| CallsiteEntry::read_from_prefix(b).ok())
            .ok_or(CallsiteError::OutOfArea { id })?;
        let size = head.size.get(e);
        let body = plausible_size(size)
            .then(|| bytes.get(start..start + size as usize))
            .flatten()
            .ok_or(CallsiteError::Size { id, size })?;
        let generation = match e {
            Endian::Little => self.generation.to_le_bytes(),
            Endian::Big => self.generation.to_be_bytes(),
        };
        let computed = self.checksum.crc(&[&generation, &body[8..]]);
        let stored = head.crc.get(e);
        if computed != stored {
            return Err(CallsiteError::Crc {
                id,
                stored,
                computed,
            });
        }
        let mut rest = &body[CALLSITE_ENTRY_SIZE..];
        let mut take = || -> Result<&'a [u8], CallsiteError> {
            let n = crate::endian::u16_at(rest, 0, e).ok_or(CallsiteError::Strings { id })?;
            let s = rest
                .get(2..2 + n as usize)
                .ok_or(CallsiteError::Strings { id })?;
            rest = &rest[2 + n as usize..];
            Ok(s)
        };
        let (module, function, file, format) = (take()?, take()?, take()?, take()?);
        Ok(Callsite {
            source: head.source,
            level: head.level,
            category: head.category.get(e),
            line: head.line.get(e),
            module,
            function,
            file,
            format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{CALLSITE_DRM, CALLSITE_DYNDBG, CATEGORY_NONE};
    use crate::read::{HeaderTrust, Problem};
    use crate::schema::{builtin, Value, EVENT_DEBUG};
    use crate::write::{format, Refused, RegionConfig, StreamSpec};
    use alloc::vec;
    use proptest::prelude::*;

    const KMS: Callsite<'static> = Callsite {
        source: CALLSITE_DRM,
        level: 7,
        category: 2,
        line: 0,
        module: b"bochs",
        function: b"bochs_pipe_enable",
        file: b"",
        format: b"crtc %d: mode %dx%d@%d \"%s\"\n",
    };
    const PROBE: Callsite<'static> = Callsite {
        source: CALLSITE_DYNDBG,
        level: 7,
        category: CATEGORY_NONE,
        line: 412,
        module: b"virtio_net",
        function: b"virtnet_probe",
        file: b"drivers/net/virtio_net.c",
        format: b"%s: features %#llx\n",
    };

    fn cfg<'a>(specs: &'a [StreamSpec<'static>], callsite_pages: u32) -> RegionConfig<'a> {
        RegionConfig {
            page_size: 1024,
            pages_per_stream: Some(4),
            streams: specs,
            callsite_pages,
            generation: 7,
            ..Default::default()
        }
    }

    /// A region with a two-page area holding `defs`, and their ids.
    fn region_with(defs: &[Callsite<'_>]) -> (Vec<u8>, Vec<u32>) {
        let specs = [StreamSpec::cpu(0)];
        let mut mem = vec![0u8; 10240];
        let mut f = format(&mut mem, &cfg(&specs, 2)).unwrap();
        let area = f.callsites.as_mut().unwrap();
        let ids = defs.iter().map(|d| area.add(d).unwrap()).collect();
        (mem, ids)
    }

    #[test]
    fn each_callsite_comes_back_by_its_id_and_in_a_walk() {
        let (mem, ids) = region_with(&[KMS, PROBE]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert!(region.diagnostics.is_empty(), "{:?}", region.diagnostics);
        assert_eq!(region.streams.len(), 1, "the area is not a stream");
        assert_eq!(ids[0], CALLSITE_HEADER_SIZE as u32);
        assert_eq!(region.callsite(ids[0]).unwrap(), KMS);
        assert_eq!(region.callsite(ids[1]).unwrap(), PROBE);
        let walk = region.callsites().unwrap();
        assert_eq!(walk.stopped, None);
        let listed: Vec<u32> = walk.entries.iter().map(|c| c.unwrap().0).collect();
        assert_eq!(listed, ids);
        assert_eq!(region.callsite_header(), Ok(AreaHeader { refused: 0 }));
    }

    #[test]
    fn a_debug_event_names_its_callsite_and_decodes_as_a_built_in() {
        let specs = [StreamSpec::cpu(0)];
        let mut mem = vec![0u8; 10240];
        let mut f = format(&mut mem, &cfg(&specs, 2)).unwrap();
        let id = f.callsites.as_mut().unwrap().add(&KMS).unwrap();
        let mut w = f.streams.next().unwrap();
        let def = builtin(EVENT_DEBUG).unwrap();
        let values = [
            Value::Unsigned(id.into()),
            Value::Unsigned(7),
            Value::Unsigned(0),
            Value::Unsigned(2),
            Value::Str(b"0000:00:02.0"),
            Value::Bytes(&[1, 31, 0, 0, 0, 0, 0, 0, 0]),
        ];
        w.write_event(100, def, &values).unwrap();
        w.close();
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let ev = &trace.streams[0].events[0];
        assert_eq!(ev.type_id, EVENT_DEBUG);
        let fields: Vec<Value> = region
            .schema
            .get(EVENT_DEBUG)
            .unwrap()
            .values(ev.payload, region.header.endian)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(fields, values);
        assert_eq!(region.callsite(id).unwrap(), KMS);
    }

    #[test]
    fn a_torn_entry_costs_itself_only_and_the_walk_goes_past_it() {
        let (mut mem, ids) = region_with(&[KMS, PROBE, KMS]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let area = region.callsites.clone().unwrap().range.start as usize;
        // The crash came after `size` and part of the body: no crc.
        let torn = area + ids[1] as usize;
        mem[torn + 4..torn + 8].fill(0);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert!(matches!(
            region.callsite(ids[1]),
            Err(CallsiteError::Crc { id, stored: 0, .. }) if id == ids[1]
        ));
        assert_eq!(region.callsite(ids[2]).unwrap(), KMS);
        let walk = region.callsites().unwrap();
        assert!(walk.entries[0].is_ok() && walk.entries[1].is_err() && walk.entries[2].is_ok());
        // A size no entry can have stops the walk there; lookups go on.
        mem[torn..torn + 4].copy_from_slice(&3u32.to_le_bytes());
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let walk = region.callsites().unwrap();
        assert_eq!(walk.entries.len(), 1);
        assert_eq!(
            walk.stopped,
            Some(CallsiteError::Size {
                id: ids[1],
                size: 3
            })
        );
        assert_eq!(region.callsite(ids[2]).unwrap(), KMS);
    }

    #[test]
    fn an_entry_of_an_earlier_generation_fails_its_check() {
        let (mut mem, ids) = region_with(&[KMS]);
        // Reformatted as generation 8 without zeroing the area: the old
        // entry's bytes are intact but not this generation's.
        let specs = [StreamSpec::cpu(0)];
        let mut again = mem.clone();
        let mut c = cfg(&specs, 2);
        c.generation = 8;
        format(&mut again, &c).unwrap();
        let header_len = crate::layout::HEADER_SIZE;
        mem[..header_len].copy_from_slice(&again[..header_len]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.header.generation, 8);
        assert!(matches!(
            region.callsite(ids[0]),
            Err(CallsiteError::Crc { .. })
        ));
    }

    #[test]
    fn ids_outside_the_area_or_its_holes_are_errors_not_reads() {
        let (mem, ids) = region_with(&[KMS]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        for id in [0, 4, ids[0] + 2, u32::MAX, 2048] {
            assert!(region.callsite(id).is_err(), "id {id:#x}");
        }
        let area = region.callsites.clone().unwrap().range;
        let hole = area.start + 16..area.start + 24;
        let holed = region.clone().with_absent(vec![hole]);
        assert_eq!(
            holed.callsite(ids[0]),
            Err(CallsiteError::Absent { id: ids[0] })
        );
        assert_eq!(
            holed.callsites().unwrap().stopped,
            Some(CallsiteError::Absent { id: ids[0] })
        );
        let specs = [StreamSpec::cpu(0)];
        let mut plain = vec![0u8; 9216];
        format(&mut plain, &cfg(&specs, 0)).unwrap();
        let region = Region::parse(&plain, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.callsite(16), Err(CallsiteError::NoArea));
    }

    #[test]
    fn entries_and_the_header_in_holes_are_absent_and_damaged_ones_fail_their_crc() {
        let (mut mem, ids) = region_with(&[KMS, PROBE, KMS]);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let area = region.callsites.clone().unwrap().range.start as usize;
        let entry = |n: usize| area + ids[n] as usize;
        mem[entry(2) + 40] ^= 1;
        // Holes read as zeros: entry 0's strings, entry 1 from its first
        // byte (its `size` reads 0), and the area's header.
        let holes = [
            entry(0) + CALLSITE_ENTRY_SIZE..entry(0) + CALLSITE_ENTRY_SIZE + 8,
            entry(1)..entry(1) + 8,
            area..area + CALLSITE_HEADER_SIZE,
        ];
        for hole in &holes {
            mem[hole.clone()].fill(0);
        }
        let absent = holes.iter().map(|h| h.start as u64..h.end as u64);
        let region = Region::parse(&mem, HeaderTrust::Checksummed)
            .unwrap()
            .with_absent(absent.collect());
        let lookups: Vec<_> = ids.iter().map(|&id| region.callsite(id).err()).collect();
        let walk = region.callsites().unwrap();
        assert!(
            matches!(
                (&lookups[..], &walk.entries[..], walk.stopped),
                (
                    [Some(CallsiteError::Absent { id: a }), Some(CallsiteError::Absent { id: b }), Some(CallsiteError::Crc { id: c, .. })],
                    [Err(CallsiteError::Absent { id: w })],
                    Some(CallsiteError::Absent { id: s }),
                ) if [*a, *b, *c] == ids[..] && (*w, s) == (ids[0], ids[1])
            ),
            "{lookups:?} {walk:?}"
        );
        assert_eq!(region.callsite_header(), Err(CallsiteError::HeaderAbsent));
    }

    #[test]
    fn a_full_area_refuses_and_counts_and_an_oversized_entry_is_refused() {
        let specs = [StreamSpec::cpu(0)];
        let mut mem = vec![0u8; 10240];
        let mut f = format(&mut mem, &cfg(&specs, 1)).unwrap();
        let area = f.callsites.as_mut().unwrap();
        let mut added = 0;
        while area.add(&PROBE).is_ok() {
            added += 1;
        }
        assert_eq!(area.add(&PROBE), Err(Refused::Full));
        let long = [b'x'; MAX_CALLSITE_SIZE];
        let huge = Callsite {
            format: &long,
            ..PROBE
        };
        assert!(matches!(area.add(&huge), Err(Refused::TooLarge(_))));
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.callsite_header(), Ok(AreaHeader { refused: 3 }));
        assert_eq!(region.callsites().unwrap().entries.len(), added);
    }

    #[test]
    fn a_second_area_is_reported_and_the_first_kept() {
        let (mut mem, _) = region_with(&[KMS]);
        let first = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let stream0 = first.streams[0].pages_offset;
        // Stream 0's descriptor turned into an area, its CRC redone: it
        // comes first, so the real area's descriptor is the second.
        let at = crate::layout::DESC_OFFSET;
        mem[at..at + 2].copy_from_slice(&crate::layout::STREAM_CALLSITES.to_le_bytes());
        let crc = crate::layout::crc32(&[&mem[at..at + 60]]);
        mem[at + 60..at + 64].copy_from_slice(&crc.to_le_bytes());
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert!(region.streams.is_empty());
        assert_eq!(region.callsites.unwrap().range.start, stream0);
        let reported: Vec<_> = region
            .diagnostics
            .iter()
            .map(|d| (d.stream, d.problem.clone()))
            .collect();
        assert_eq!(
            reported,
            [(
                Some(1),
                Problem::InvalidField {
                    field: "kind",
                    value: 3
                }
            )]
        );
    }

    proptest! {
        /// Whatever the area holds, lookups and walks return, never read
        /// outside it, and a walk's work stays within the area.
        #[test]
        fn hostile_areas_never_panic(fill in proptest::collection::vec(any::<u8>(), 0..2048),
                                     ids in proptest::collection::vec(any::<u32>(), 0..32)) {
            let (mut mem, _) = region_with(&[KMS, PROBE]);
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            let area = region.callsites.clone().unwrap().range;
            let start = area.start as usize + CALLSITE_HEADER_SIZE;
            let n = fill.len().min(area.end as usize - start);
            mem[start..start + n].copy_from_slice(&fill[..n]);
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            for id in ids {
                let _ = region.callsite(id);
            }
            let walk = region.callsites().unwrap();
            prop_assert!(walk.entries.len() <= (area.end - area.start) as usize / (CALLSITE_ENTRY_SIZE + 8));
        }
    }
}
