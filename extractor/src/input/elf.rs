//! ELF64 cores: `/proc/vmcore`, `makedumpfile -E`, QEMU's `elf` dumps.
//!
//! Memory is addressed by `p_paddr`. The parts of a segment past
//! `p_filesz` (makedumpfile's filtered pages) and segments stored at file
//! offset -1 (QEMU's filter) are holes, never zeros. Overlapping segments
//! (the kernel image, mapped once by its text address and once in the
//! direct map) are read from the first one. More than 65534 segments
//! (`PN_XNUM`) are counted from section header 0, as QEMU writes them.

use super::{ContainerKind, Dump, ElfOrigin, MappedMemory, OpenError};
use crate::input::source::{FileOffset, Source};
use crate::phys::{Backing, MemoryMap, PhysAddr, Run};
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader};
use object::read::{ReadCache, ReadCacheOps};
use object::Endianness;
use std::sync::Arc;

/// More program headers than any real dump has; a header claiming more
/// would only make us allocate.
const MAX_SEGMENTS: u32 = 1 << 20;
/// Bytes of notes read at most, over all note segments together: the
/// notes of thousands of CPUs fit with room to spare, and a file repeating
/// note headers gets no further.
const MAX_NOTES: u64 = 16 << 20;

/// Turns present runs whose file bytes an earlier run already maps at a
/// different physical address into lost memory, with one warning. No
/// dumper writes that (aliases of the same memory share their physical
/// address, and [`MemoryMap::new`] merges those); honouring it would let a
/// small file claim terabytes of memory to search.
fn drop_reused_bytes(runs: &mut [Run], warnings: &mut Vec<String>) {
    let mut order: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].backing == Backing::Present)
        .collect();
    order.sort_by_key(|&i| (runs[i].offset, i));
    // The run reaching furthest into the file so far: (file end, physical
    // address minus file offset).
    let mut reach: Option<(FileOffset, u64)> = None;
    let mut dropped = Vec::new();
    for i in order {
        let Some(offset) = runs[i].offset else {
            continue;
        };
        let end = offset + (runs[i].end - runs[i].start);
        // Two runs map the same bytes to the same memory when their
        // addresses and offsets differ by the same amount.
        let delta = runs[i].start.0.wrapping_sub(offset.0);
        match reach {
            Some((far, d)) if offset < far && d != delta => dropped.push(i),
            Some((far, _)) if far >= end => {}
            _ => reach = Some((end, delta)),
        }
    }
    if let Some(&first) = dropped.first() {
        warnings.push(format!(
            "{} segments (the first for {:#x}..{:#x}) reuse file bytes another segment maps at a different address; their memory is treated as lost",
            dropped.len(),
            runs[first].start,
            runs[first].end
        ));
    }
    for i in dropped {
        runs[i] = Run::lost(runs[i].start..runs[i].end);
    }
}

/// `e_flags` bit makedumpfile sets when it ran out of space.
const INCOMPLETE: u32 = 1;

/// Lets `object` read headers through any [`Source`].
struct Cursor {
    source: Arc<dyn Source>,
    pos: u64,
}

impl ReadCacheOps for Cursor {
    fn len(&mut self) -> Result<u64, ()> {
        // A source without a size reaches as far as its reads go.
        Ok(self.source.len().unwrap_or(u64::MAX))
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.pos = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        let n = self
            .source
            .read_at(FileOffset(self.pos), buf)
            .map_err(|_| ())?;
        self.pos += n as u64;
        Ok(n)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), ()> {
        self.source
            .read_exact_at(FileOffset(self.pos), buf)
            .map_err(|_| ())?;
        self.pos += buf.len() as u64;
        Ok(())
    }
}

fn invalid(field: &'static str, offset: u64, why: impl Into<String>) -> OpenError {
    OpenError::invalid("ELF core", field, FileOffset(offset), why)
}

pub fn open(source: Arc<dyn Source>) -> Result<Dump, OpenError> {
    let cache = ReadCache::new(Cursor {
        source: source.clone(),
        pos: 0,
    });
    let data = &cache;
    let header = FileHeader64::<Endianness>::parse(data).map_err(|e| {
        let mut ident = [0u8; 5];
        let class = match source.read_exact_at(FileOffset(0), &mut ident) {
            Ok(()) if ident[4] == 1 => "a 32-bit ELF file; crashring reads ELF64 cores".to_string(),
            _ => e.to_string(),
        };
        invalid("e_ident", 0, class)
    })?;
    let endian = header
        .endian()
        .map_err(|e| invalid("e_ident", 5, e.to_string()))?;
    if header.e_type(endian) != elf::ET_CORE {
        return Err(OpenError::Unsupported(format!(
            "the input is an ELF file of type {}, not a core dump",
            header.e_type(endian).0
        )));
    }
    let phnum = header
        .phnum(endian, data)
        .map_err(|e| invalid("e_phnum", 56, e.to_string()))?;
    if phnum > MAX_SEGMENTS {
        return Err(invalid(
            "e_phnum",
            56,
            format!("{phnum} program headers, more than the {MAX_SEGMENTS} accepted"),
        ));
    }
    let phoff = header.e_phoff(endian);
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| invalid("e_phoff", phoff, e.to_string()))?;

    let mut runs = Vec::new();
    let mut loads = 0u32;
    let mut filtered = false;
    let mut vmcoreinfo = None;
    let mut prstatus = 0u32;
    let mut qemu_notes = false;
    let mut warnings = Vec::new();
    // Notes are read here, into one buffer, rather than through the
    // header cache, which keeps every distinct read: overlapping note
    // headers would each cost their own copy.
    let mut note_bytes = Vec::new();
    let mut notes_read = 0u64;
    // Note segments past the total: how many, and the first one's offset.
    let mut notes_skipped: Option<(u32, u64)> = None;
    for (i, ph) in segments.iter().enumerate() {
        let at = phoff + i as u64 * 56;
        match ph.p_type(endian) {
            elf::PT_LOAD => {
                loads += 1;
                let paddr = ph.p_paddr(endian);
                let (filesz, memsz) = (ph.p_filesz(endian), ph.p_memsz(endian));
                let offset = ph.p_offset(endian);
                if paddr == u64::MAX {
                    continue; // No physical address (kcore's vmalloc).
                }
                let paddr = PhysAddr(paddr);
                let end = paddr.checked_add(memsz.max(filesz)).ok_or_else(|| {
                    invalid("p_memsz", at + 40, format!("segment at {paddr:#x} wraps"))
                })?;
                let stored = if offset == u64::MAX { 0 } else { filesz };
                if offset != u64::MAX && offset.checked_add(filesz).is_none() {
                    return Err(invalid("p_offset", at + 8, "segment wraps the file"));
                }
                filtered |= stored < memsz;
                runs.push(Run {
                    start: paddr,
                    end: paddr + stored,
                    backing: Backing::Present,
                    offset: Some(FileOffset(offset)),
                });
                runs.push(Run {
                    start: paddr + stored,
                    end,
                    backing: Backing::Excluded,
                    offset: None,
                });
            }
            elf::PT_NOTE => {
                let (offset, size) = (ph.p_offset(endian), ph.p_filesz(endian));
                if size > MAX_NOTES - notes_read {
                    let (n, _) = notes_skipped.get_or_insert((0, offset));
                    *n += 1;
                    continue;
                }
                notes_read += size;
                note_bytes.clear();
                note_bytes.resize(size as usize, 0);
                if let Err(e) = source.read_exact_at(FileOffset(offset), &mut note_bytes) {
                    warnings.push(format!("notes at program header {i}: {e}"));
                    continue;
                }
                let notes = match NoteIterator::<FileHeader64<Endianness>>::new(
                    endian,
                    ph.p_align(endian),
                    &note_bytes[..],
                ) {
                    Ok(n) => n,
                    Err(e) => {
                        warnings.push(format!("notes at program header {i}: {e}"));
                        continue;
                    }
                };
                for note in notes {
                    let Ok(note) = note else {
                        warnings.push(format!("notes at program header {i} end early"));
                        break;
                    };
                    match note.name() {
                        b"VMCOREINFO" => {
                            vmcoreinfo = Some(String::from_utf8_lossy(note.desc()).into_owned())
                        }
                        b"CORE" if note.n_type(endian) == elf::NT_PRSTATUS => prstatus += 1,
                        b"QEMU" => qemu_notes = true,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let Some((n, offset)) = notes_skipped {
        warnings.push(format!(
            "{n} note segments (the first at file offset {offset:#x}) skipped: notes are read up to {MAX_NOTES} bytes in all"
        ));
    }
    // Check the segments' bytes are in the file, now, so a truncated dump
    // (or a flattened one with gaps) is reported once here rather than at
    // every read, and bytes the file lacks are lost, never zeros.
    let mut mapped = Vec::with_capacity(runs.len());
    for r in runs {
        let Some(offset) = r.offset else {
            mapped.push(r);
            continue;
        };
        let len = r.end - r.start;
        let mut at = r.start;
        let mut missing = 0;
        let held = source.held_ranges(offset..offset.saturating_add(len));
        for h in held
            .iter()
            .map(|h| r.start + (h.start - offset)..r.start + (h.end - offset))
        {
            if h.start > at {
                mapped.push(Run::lost(at..h.start));
                missing += h.start - at;
            }
            mapped.push(Run {
                start: h.start,
                end: h.end,
                backing: Backing::Present,
                offset: Some(offset + (h.start - r.start)),
            });
            at = h.end;
        }
        if at < r.end {
            mapped.push(Run::lost(at..r.end));
            missing += r.end - at;
        }
        if missing > 0 {
            warnings.push(format!(
                "{missing} bytes of the segment for {:#x}..{:#x} are not in the file",
                r.start, r.end
            ));
        }
    }
    let mut runs = mapped;
    drop_reused_bytes(&mut runs, &mut warnings);
    let flags = header.e_flags(endian).0;
    if flags & INCOMPLETE != 0 {
        warnings.push("the dump is incomplete (makedumpfile ran out of space)".into());
    }
    if filtered {
        warnings.push(
            "some memory was filtered out (p_filesz < p_memsz); those pages are holes".into(),
        );
    }
    let origin = if qemu_notes {
        ElfOrigin::Qemu
    } else if filtered || flags & INCOMPLETE != 0 {
        ElfOrigin::Makedumpfile
    } else {
        ElfOrigin::Vmcore
    };
    Ok(Dump {
        container: format!("ELF64 core ({origin}), {loads} PT_LOAD segments"),
        kind: ContainerKind::Elf(origin),
        memory: Box::new(MappedMemory::new(source, MemoryMap::new(runs))),
        vmcoreinfo,
        cpus: (prstatus > 0).then_some(prstatus),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_cursor_reads_on_from_where_its_last_read_ended() {
        // `object` reads a string a chunk at a time through `read`, with no
        // seek between chunks: each must follow the one before.
        let bytes: Vec<u8> = (0..=255).collect();
        let mut cursor = Cursor {
            source: Arc::new(bytes),
            pos: 0,
        };
        assert_eq!(cursor.seek(10), Ok(10));
        let mut buf = [0u8; 4];
        assert_eq!(cursor.read(&mut buf), Ok(4));
        assert_eq!(buf, [10, 11, 12, 13]);
        assert_eq!(cursor.read(&mut buf), Ok(4));
        assert_eq!(buf, [14, 15, 16, 17]);
        assert_eq!(cursor.read_exact(&mut buf), Ok(()));
        assert_eq!(buf, [18, 19, 20, 21]);
        // At the end, a short read, then none.
        cursor.seek(254).unwrap();
        assert_eq!(cursor.read(&mut buf), Ok(2));
        assert_eq!(&buf[..2], [254, 255]);
        assert_eq!(cursor.read(&mut buf), Ok(0));
    }
}
