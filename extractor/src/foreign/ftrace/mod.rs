//! The kernel's own persistent ftrace buffer (6.12+, `trace_instance=` in
//! reserved memory), read from a dump or an image without the next boot's
//! help: the kernel re-attaches such a buffer only when the next kernel
//! lays it out the same way, and before 7.2 throws away a whole CPU for
//! one bad sub-buffer.
//!
//! [`meta`] finds each CPU's chunk and the order its sub-buffers were
//! written in, [`page`] checks and walks one sub-buffer, [`event`] says
//! what an event holds. A sub-buffer that fails its checks costs only
//! itself; a CPU whose order cannot be trusted is read in the order of its
//! sub-buffers' time stamps, and says so.

pub mod event;
pub mod meta;
pub mod page;

use crate::kmem::symbols::{KernelText, Symbolizer};
use crate::phys::{present_chunks, PhysAddr, PhysMemory};
use meta::{CpuMeta, Generation, Head, MetaError};
use page::{Page, RawEvent};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

/// The most CPU chunks read from one area (the kernel's `NR_CPUS` limit).
const MAX_CPUS: u32 = 8192;

/// Chunks start on a page.
const PAGE: u64 = 4096;

/// A persistent ftrace buffer found in memory.
#[derive(Debug)]
pub struct Instance {
    pub base: PhysAddr,
    pub generation: Generation,
    /// Past the last CPU chunk read.
    pub end: PhysAddr,
    pub cpus: Vec<Cpu>,
    /// Where the writing boot put the kernel, to name the code addresses
    /// of its events by a symbol map.
    pub kernel_text: Option<KernelText>,
}

impl Instance {
    /// Every event of every CPU, oldest first (by time stamp, then CPU),
    /// with its CPU and data: merged as it goes, each CPU's events being
    /// in time order already ([`Cpu::events`]).
    pub fn merged(&self) -> impl Iterator<Item = (u32, u64, &[u8])> + '_ {
        // The next event of each CPU, by (stamp, CPU, place in `cpus`,
        // index): equal stamps of two CPUs go by CPU.
        let mut next: BinaryHeap<Reverse<(u64, u32, usize, usize)>> = self
            .cpus
            .iter()
            .enumerate()
            .filter_map(|(place, c)| Some(Reverse((c.events.first()?.ts, c.cpu, place, 0))))
            .collect();
        std::iter::from_fn(move || {
            let Reverse((ts, cpu, place, i)) = next.pop()?;
            let c = &self.cpus[place];
            if let Some(after) = c.events.get(i + 1) {
                next.push(Reverse((after.ts, cpu, place, i + 1)));
            }
            Some((cpu, ts, c.events[i].data(&c.data)))
        })
    }

    /// Sub-buffers lost to damage, on every CPU.
    pub fn damaged(&self) -> bool {
        self.cpus.iter().any(|c| {
            matches!(c.state, CpuState::Unreadable(_)) || c.tally.invalid + c.tally.unreadable > 0
        })
    }
}

/// Writes every event of `i`, oldest first, a line each: the time in
/// seconds in brackets (the writing boot's trace clock, which is printk's
/// by default, so that a log placer aligns the lines as it aligns
/// printk's), the CPU, the pid, and what the event holds.
pub fn write_text(
    out: &mut dyn std::io::Write,
    i: &Instance,
    formats: Option<&event::Formats>,
    symbols: Option<&Symbolizer>,
) -> std::io::Result<()> {
    for (cpu, ts, data) in i.merged() {
        let pid = event::Common::of(data).map_or(-1, |c| c.pid);
        writeln!(
            out,
            "[{:>5}.{:09}] cpu{cpu} pid {pid}: {}",
            ts / 1_000_000_000,
            ts % 1_000_000_000,
            event::describe(data, formats, symbols)
        )?;
    }
    Ok(())
}

/// One CPU's part of an [`Instance`].
#[derive(Debug)]
pub struct Cpu {
    pub cpu: u32,
    pub meta_addr: PhysAddr,
    pub state: CpuState,
    /// Its events in time order (stable: equal stamps as written), their
    /// data in `data`.
    pub events: Vec<RawEvent>,
    /// The committed bytes of the sub-buffers kept, one after another.
    pub data: Vec<u8>,
    pub tally: Tally,
    /// The sub-buffers lost, where and why.
    pub losses: Vec<Loss>,
}

/// Sub-buffers lost for one reason: one, or a run of sub-buffers in a
/// row that the dump does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// Physical indices of the first and last.
    pub first: u32,
    pub last: u32,
    /// Where the first is.
    pub addr: PhysAddr,
    pub why: String,
    /// Whether the dump lacks them (they may run on).
    unreadable: bool,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(
                f,
                "sub-buffer {} at {:#x}: {}",
                self.first, self.addr, self.why
            )
        } else {
            write!(
                f,
                "sub-buffers {}-{} from {:#x}: {}",
                self.first, self.last, self.addr, self.why
            )
        }
    }
}

/// How a CPU's sub-buffers were put in order.
#[derive(Debug, PartialEq, Eq)]
pub enum CpuState {
    /// By the descriptor: the reader page, then head to commit.
    Ordered,
    /// The descriptor's order could not be used (why), so by the
    /// sub-buffers' time stamps.
    ByTimeStamps(String),
    /// Nothing written since the kernel laid it out, or all of it read
    /// before the crash.
    Empty,
    /// The descriptor is unreadable: nothing of this CPU can be placed.
    Unreadable(MetaError),
}

impl fmt::Display for CpuState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuState::Ordered => f.write_str("in the order its descriptor gives"),
            CpuState::ByTimeStamps(why) => {
                write!(f, "in the order of the sub-buffers' time stamps ({why})")
            }
            CpuState::Empty => f.write_str("empty"),
            CpuState::Unreadable(e) => write!(f, "unreadable: {e}"),
        }
    }
}

/// What became of one CPU's sub-buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Read and kept.
    pub kept: u32,
    /// Refused by their own checks or their time stamps, or zeroed
    /// where the writer had been.
    pub invalid: u32,
    /// Not in the dump.
    pub unreadable: u32,
    /// Marked by an earlier boot as dropped (7.2's `RB_MISSED_EVENTS`
    /// with nothing committed).
    pub dropped_earlier: u32,
    /// Kept, flagged with `RB_MISSED_EVENTS`: the writer lost events
    /// before them.
    pub after_loss: u32,
}

/// Reads the buffer whose area starts at `base`; `size`, when known,
/// bounds it.
pub fn read_at(
    mem: &dyn PhysMemory,
    base: PhysAddr,
    size: Option<u64>,
) -> Result<Instance, MetaError> {
    let at_base = meta::head(mem, base).and_then(|head| {
        Ok((
            meta::cpu_meta(mem, head.generation, head.first_chunk)?,
            head,
        ))
    });
    match at_base {
        Ok((first, head)) => read_chunks(mem, &head, &first, head.first_chunk, size),
        // 6.12-6.14 sign every CPU's chunk: with CPU 0's descriptor
        // damaged, the area is read from the next good one, its CPUs
        // numbered from the area's start.
        Err(e) => match size.and_then(|size| later_descriptor(mem, base, size)) {
            Some((head, first)) => read_chunks(mem, &head, &first, base, size),
            None => Err(e),
        },
    }
}

/// The first good per-CPU descriptor (6.12-6.14) after `base` within
/// `size` bytes, where whole chunks of its geometry from `base` lead.
fn later_descriptor(mem: &dyn PhysMemory, base: PhysAddr, size: u64) -> Option<(Head, CpuMeta)> {
    let end = base.checked_add(size)?;
    let mut at = base.checked_add(PAGE)?;
    while at < end {
        let good = meta::magic_at(mem, at)
            .ok()
            .filter(|g| !g.has_global_meta())
            .and_then(|g| Some((g, meta::cpu_meta(mem, g, at).ok()?)));
        if let Some((generation, first)) = good {
            if chunks_between(generation, &first, base, at).is_some() {
                let head = Head {
                    base,
                    generation,
                    total_size: None,
                    first_chunk: at,
                };
                return Some((head, first));
            }
        }
        at = at.checked_add(PAGE)?;
    }
    None
}

/// How many chunks of `first`'s geometry lie from `from` exactly to `to`.
fn chunks_between(
    generation: Generation,
    first: &CpuMeta,
    from: PhysAddr,
    to: PhysAddr,
) -> Option<u32> {
    let (mut at, mut n) = (from, 0);
    while at < to && n < MAX_CPUS {
        (_, at) = meta::chunk_geometry(generation, at, first.subbuf_size, first.nr_subbufs)?;
        n += 1;
    }
    (at == to).then_some(n)
}

/// Reads the chunks of the area `head` from `start`: those before the
/// descriptor `first` (at `head.first_chunk`, which sizes every chunk)
/// are CPUs whose descriptors could not be used, each said unreadable;
/// from it on, CPUs while their descriptors check out.
fn read_chunks(
    mem: &dyn PhysMemory,
    head: &Head,
    first: &CpuMeta,
    start: PhysAddr,
    size: Option<u64>,
) -> Result<Instance, MetaError> {
    let generation = head.generation;
    let limit = [head.total_size, size]
        .into_iter()
        .flatten()
        .min()
        .and_then(|s| head.base.checked_add(s));
    let top = mem.map().runs().last().map(|r| r.end);
    let mut cpus = Vec::new();
    let mut at = start;
    let mut end = at;
    for cpu in 0..MAX_CPUS {
        let Some((subbufs, chunk_end)) =
            meta::chunk_geometry(generation, at, first.subbuf_size, first.nr_subbufs)
        else {
            if cpu == 0 {
                let top = PhysAddr(u64::MAX);
                return Err(MetaError::PastEnd(at, top, "the top of the address space"));
            }
            break;
        };
        // CPU 0's chunk past the area, or past everything the dump
        // describes, is a count no kernel wrote: refused before its
        // sub-buffers are read one by one. Another CPU's ends the area.
        let past = if limit.is_some_and(|l| chunk_end > l) {
            Some("the area's end")
        } else if top.is_some_and(|t| chunk_end > t) {
            Some("all memory the dump describes")
        } else {
            None
        };
        if let Some(what) = past {
            if cpu == 0 {
                return Err(MetaError::PastEnd(at, chunk_end, what));
            }
            break;
        }
        // Nothing counts the CPUs: a chunk is one while its descriptor
        // checks out. One that does not ends the area, unless the next
        // one checks out (a damaged CPU between two good ones), or the
        // area's size is known and it is not blank: the kernel clears
        // what its chunks leave of the range, so garbage there is a
        // damaged CPU.
        if at > head.first_chunk && !same_geometry(mem, generation, first, at) {
            let next_fits = limit.is_none_or(|l| chunk_end < l);
            let next_good = next_fits && same_geometry(mem, generation, first, chunk_end);
            if !next_good && (limit.is_none() || blank(mem, generation, at)) {
                break;
            }
        }
        cpus.push(read_cpu(mem, generation, first, cpu, at, subbufs));
        end = chunk_end;
        at = chunk_end;
    }
    Ok(Instance {
        base: head.base,
        generation,
        end,
        cpus,
        kernel_text: meta::kernel_text(mem, head, first),
    })
}

/// Whether the chunk at `at` has a descriptor that checks out, for chunks
/// the size of CPU 0's (`first`).
fn same_geometry(
    mem: &dyn PhysMemory,
    generation: Generation,
    first: &CpuMeta,
    at: PhysAddr,
) -> bool {
    meta::cpu_meta(mem, generation, at)
        .is_ok_and(|m| m.subbuf_size == first.subbuf_size && m.nr_subbufs == first.nr_subbufs)
}

/// Whether the descriptor place at `at` holds zeros only.
fn blank(mem: &dyn PhysMemory, generation: Generation, at: PhysAddr) -> bool {
    let mut bytes = [0u8; 56];
    let bytes = &mut bytes[..generation.cpu_meta_size() as usize];
    mem.read(at, bytes).is_ok() && bytes.iter().all(|&b| b == 0)
}

/// Searches all present memory for buffers and reads each.
pub fn find(mem: &dyn PhysMemory) -> Vec<Result<Instance, MetaError>> {
    let mut hits = Vec::new();
    present_chunks(mem, 0, &mut |_| {}, &mut |addr, chunk| {
        hits.extend(descriptor_hits(addr, chunk));
    });
    read_hits(mem, &hits)
}

/// The page starts in `chunk` (memory at `addr`) that hold a descriptor's
/// magic and a known size after it: where a buffer may start. A search of
/// all memory for crashring's regions takes these on the way.
pub fn descriptor_hits(addr: PhysAddr, chunk: &[u8]) -> impl Iterator<Item = PhysAddr> + '_ {
    let skip = (4096 - addr.0 % 4096) % 4096;
    (skip as usize..chunk.len().saturating_sub(7))
        .step_by(4096)
        .filter(move |&off| {
            let word = |i| meta::u32_at(chunk, off + i);
            word(0) == meta::MAGIC && Generation::from_word(word(4)).is_some()
        })
        .map(move |off| addr + off as u64)
}

/// Reads the buffer at each of `hits` (in address order) that is not
/// inside one read before it: a per-CPU layout signs every CPU's chunk.
/// Such a hit whose chunk follows chunks with a descriptor's magic that
/// did not check out is read from the first of them: a damaged CPU 0 does
/// not make CPU 1 another buffer's CPU 0.
pub fn read_hits(mem: &dyn PhysMemory, hits: &[PhysAddr]) -> Vec<Result<Instance, MetaError>> {
    let mut found = Found::default();
    for &hit in hits {
        if found.inside(hit) {
            continue;
        }
        let signed = meta::magic_at(mem, hit)
            .ok()
            .filter(|g| !g.has_global_meta())
            .and_then(|g| Some((g, meta::cpu_meta(mem, g, hit).ok()?)));
        let Some((generation, first)) = signed else {
            found.push(hit, read_at(mem, hit, None));
            continue;
        };
        let mut start = hit;
        while let Some(before) = damaged_chunk_before(mem, generation, &first, start) {
            if found.inside(before) {
                break;
            }
            start = before;
        }
        // The failed reads of the damaged chunks' own hits are this one.
        found.drop_failed_from(start);
        let head = Head {
            base: start,
            generation,
            total_size: None,
            first_chunk: hit,
        };
        found.push(hit, read_chunks(mem, &head, &first, start, None));
    }
    found.reads.into_iter().map(|(_, f)| f).collect()
}

/// Where a read of a hit ends: the end of the buffer read, `None` for a
/// read that failed.
trait Reach {
    fn end(&self) -> Option<PhysAddr>;
}

impl Reach for Result<Instance, MetaError> {
    fn end(&self) -> Option<PhysAddr> {
        self.as_ref().ok().map(|i| i.end)
    }
}

/// The reads of [`read_hits`] so far, kept so that each hit costs the same
/// however many came before it: a search of hostile memory may find a
/// descriptor's magic on every page.
struct Found<R> {
    /// Each hit read, in address order, with what reading it gave.
    reads: Vec<(PhysAddr, R)>,
    /// The end of the furthest buffer read.
    reach: PhysAddr,
}

impl<R> Default for Found<R> {
    fn default() -> Self {
        Found {
            reads: Vec::new(),
            reach: PhysAddr(0),
        }
    }
}

impl<R: Reach> Found<R> {
    /// Whether `at` lies before the furthest end of a buffer read. For a
    /// hit that is inside one, since every buffer starts at or before its
    /// own hit and hits come in order; a damaged chunk there would
    /// overlap one.
    fn inside(&self, at: PhysAddr) -> bool {
        at < self.reach
    }

    fn push(&mut self, hit: PhysAddr, read: R) {
        if let Some(end) = read.end() {
            self.reach = self.reach.max(end);
        }
        self.reads.push((hit, read));
    }

    /// Drops the failed reads of hits from `start` on. `start` lies past
    /// every buffer read, so they are the last reads, taken from the back.
    fn drop_failed_from(&mut self, start: PhysAddr) {
        while self
            .reads
            .last()
            .is_some_and(|(at, read)| *at >= start && read.end().is_none())
        {
            self.reads.pop();
        }
    }
}

/// The chunk of `first`'s geometry that ends at `at`, where its
/// descriptor place holds the magic (a CPU's descriptor, damaged past it).
/// A chunk starts on a page; the first of an area, aligned to no
/// sub-buffer, may be up to a sub-buffer less a page longer or shorter
/// than the rest.
fn damaged_chunk_before(
    mem: &dyn PhysMemory,
    generation: Generation,
    first: &CpuMeta,
    at: PhysAddr,
) -> Option<PhysAddr> {
    let (_, end) = meta::chunk_geometry(generation, at, first.subbuf_size, first.nr_subbufs)?;
    let chunk = end.0 - at.0;
    let nearest = at.0.checked_sub(chunk)?;
    let slack = u64::from(first.subbuf_size) - PAGE;
    let farthest = nearest.saturating_sub(slack);
    let closest = nearest.saturating_add(slack).min(at.0.saturating_sub(PAGE));
    (farthest..=closest)
        .rev()
        .step_by(PAGE as usize)
        .map(PhysAddr)
        .find(|&p| {
            chunks_between(generation, first, p, at) == Some(1)
                && matches!(
                    meta::magic_at(mem, p),
                    Ok(_) | Err(MetaError::UnknownSize(..))
                )
        })
}

/// Reads one CPU's chunk, whose descriptor is at `at` and sub-buffers at
/// `subbufs`; `first` is CPU 0's descriptor, which sizes every chunk.
fn read_cpu(
    mem: &dyn PhysMemory,
    generation: Generation,
    first: &CpuMeta,
    cpu: u32,
    at: PhysAddr,
    subbufs: PhysAddr,
) -> Cpu {
    let mut out = Cpu {
        cpu,
        meta_addr: at,
        state: CpuState::Ordered,
        events: Vec::new(),
        data: Vec::new(),
        tally: Tally::default(),
        losses: Vec::new(),
    };
    let m = match meta::cpu_meta(mem, generation, at) {
        Ok(m) if m.subbuf_size == first.subbuf_size && m.nr_subbufs == first.nr_subbufs => m,
        Ok(m) => {
            out.state = CpuState::Unreadable(MetaError::SubbufCount(at, m.nr_subbufs));
            return out;
        }
        Err(e) => {
            out.state = CpuState::Unreadable(e);
            return out;
        }
    };
    if m.head_buffer == 0 {
        out.state = CpuState::Empty;
        return out;
    }
    let sequence = match write_order(mem, generation, &m) {
        Ok(seq) => seq,
        Err(why) => {
            out.state = CpuState::ByTimeStamps(why);
            (0..m.nr_subbufs).collect()
        }
    };
    let ss = u64::from(m.subbuf_size);
    let mut bytes = vec![0u8; m.subbuf_size as usize];
    let mut pages: Vec<(u32, Page)> = Vec::new();
    // The hole the last failed read met: the sub-buffers that start in
    // it are not read again one by one (a dump may lack gigabytes).
    let mut hole: Option<(PhysAddr, PhysAddr, String)> = None;
    // In the descriptor's order (the reader page, the head ... the
    // commit page), the writer has been through every sub-buffer
    // strictly between the head and the commit page: one there that
    // reads as never written was zeroed since, and is lost, not unused.
    let ordered = out.state == CpuState::Ordered;
    let last = sequence.len().saturating_sub(1);
    for (place, idx) in sequence.into_iter().enumerate() {
        let addr = subbufs + u64::from(idx) * ss;
        let in_hole = hole
            .as_ref()
            .is_some_and(|(start, end, _)| *start <= addr && addr < *end);
        let failed = in_hole
            || mem.read(addr, &mut bytes).is_err_and(|e| {
                let end = mem.map().hole_end(e.addr()).unwrap_or(e.addr());
                hole = Some((e.addr(), end, e.to_string()));
                true
            });
        if let (true, Some((_, _, why))) = (failed, &hole) {
            out.tally.unreadable += 1;
            // A dump without the range lacks every sub-buffer: one line.
            match out.losses.last_mut() {
                Some(l) if l.unreadable && l.last.checked_add(1) == Some(idx) => l.last = idx,
                _ => out.losses.push(Loss {
                    first: idx,
                    last: idx,
                    addr,
                    why: why.clone(),
                    unreadable: true,
                }),
            }
            continue;
        }
        let written = ordered && 1 < place && place < last;
        match page::read(&bytes) {
            Ok(p) if p.unused() && written => {
                out.tally.invalid += 1;
                out.losses.push(Loss {
                    first: idx,
                    last: idx,
                    addr,
                    why: "zeroed, between the head and the commit page".into(),
                    unreadable: false,
                });
            }
            Ok(p) if p.unused() => {}
            Ok(p) if p.dropped_by_kernel() => out.tally.dropped_earlier += 1,
            Ok(p) => pages.push((idx, p)),
            Err(e) => {
                out.tally.invalid += 1;
                out.losses.push(Loss {
                    first: idx,
                    last: idx,
                    addr,
                    why: e.to_string(),
                    unreadable: false,
                });
            }
        }
    }
    if matches!(out.state, CpuState::ByTimeStamps(_)) {
        pages.sort_by_key(|(_, p)| p.time_stamp);
    }
    let unordered = out_of_order(&pages);
    let mut kept = Vec::with_capacity(pages.len());
    for (i, (idx, p)) in pages.into_iter().enumerate() {
        if unordered.binary_search(&i).is_ok() {
            out.tally.invalid += 1;
            out.losses.push(Loss {
                first: idx,
                last: idx,
                addr: subbufs + u64::from(idx) * ss,
                why: format!(
                    "time stamp {} out of order with its neighbours",
                    p.time_stamp
                ),
                unreadable: false,
            });
        } else {
            kept.push((idx, p));
        }
    }
    if kept.is_empty() && out.losses.is_empty() && out.tally.dropped_earlier == 0 {
        out.state = CpuState::Empty;
    }
    // The pages kept are read again, in order, their events and bytes
    // put straight where they stay: a dense buffer's events held twice
    // (and the memory freed by the first copy kept by the allocator)
    // would cost several times the buffer. Grown as they come, not sized
    // beforehand: a hostile dump whose sub-buffers alias one another
    // claims far more than it holds.
    for (idx, p) in kept {
        let addr = subbufs + u64::from(idx) * ss;
        let loss = |why: String| Loss {
            first: idx,
            last: idx,
            addr,
            why,
            unreadable: false,
        };
        // Offsets into a CPU's bytes are 32-bit: past 4 GiB of them (16
        // GiB of sub-buffers is the most a descriptor may claim), the
        // rest is said lost rather than kept.
        if out.data.len() + p.commit > u32::MAX as usize {
            out.tally.invalid += 1;
            out.losses.push(loss(
                "past the 4 GiB of one CPU's events this reader keeps".into(),
            ));
            continue;
        }
        // Memory read live (/dev/mem) may have changed since: what the
        // second read finds is kept if it checks out on its own, as the
        // first did (the writer's page, filled further).
        let again = mem
            .read(addr, &mut bytes)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                page::append(&bytes, &mut out.events, &mut out.data).map_err(|e| e.to_string())
            });
        match again {
            Ok(q) => {
                out.tally.kept += 1;
                out.tally.after_loss += u32::from(q.missed);
            }
            Err(why) => {
                out.tally.invalid += 1;
                out.losses.push(loss(why));
            }
        }
    }
    // In time order, as the merge of the CPUs takes them (stable: equal
    // stamps as written). An intact buffer's are already: a page's stamps
    // never go back, and pages out of order with their neighbours are
    // dropped above.
    if !out.events.is_sorted_by_key(|e| e.ts) {
        out.events.sort_by_key(|e| e.ts);
    }
    out
}

/// The physical sub-buffers in the order they were written: the reader
/// page, then from the head to the commit page, following `buffers[]`
/// (logical place to physical index; `[0]` the reader page). `Err` says
/// why the descriptor's order cannot be used.
fn write_order(
    mem: &dyn PhysMemory,
    generation: Generation,
    m: &CpuMeta,
) -> Result<Vec<u32>, String> {
    let n = m.nr_subbufs;
    let order = meta::order(mem, generation, m).map_err(|e| e.to_string())?;
    // buffers[] must be a permutation, as 7.2 checks it.
    let mut logical = vec![u32::MAX; n as usize];
    for (place, &phys) in order.iter().enumerate() {
        let slot = usize::try_from(phys)
            .ok()
            .and_then(|p| logical.get_mut(p))
            .filter(|s| **s == u32::MAX)
            .ok_or_else(|| format!("buffers[{place}] = {phys} repeats or is out of range"))?;
        *slot = place as u32;
    }
    let index_of = |va: u64, what: &str| {
        va.checked_sub(m.first_buffer)
            .filter(|d| d % u64::from(m.subbuf_size) == 0)
            .map(|d| d / u64::from(m.subbuf_size))
            .filter(|&i| i < u64::from(n))
            .map(|i| logical[i as usize])
            .ok_or_else(|| format!("the {what} pointer {va:#x} is not one of its sub-buffers"))
    };
    let head = index_of(m.head_buffer, "head")?;
    let commit = index_of(m.commit_buffer, "commit")?;
    let mut seq = vec![order[0] as u32];
    if commit == 0 {
        return Ok(seq);
    }
    if head == 0 {
        return Err("the head pointer is the reader page".into());
    }
    let mut place = head;
    loop {
        seq.push(order[place as usize] as u32);
        if place == commit {
            return Ok(seq);
        }
        place = if place + 1 == n { 1 } else { place + 1 };
        if place == head {
            return Err("the commit page is not in the ring".into());
        }
    }
}

/// Sub-buffers whose time stamp does not fit between their neighbours'
/// (7.2's check): below the last one kept, or above the next one where
/// the next one itself follows the last one kept, so that one bad stamp
/// costs one sub-buffer. With none kept before it, a page above the next
/// one is judged by the page after that: when it follows this one, the
/// next one is the odd one out (and falls below this one in turn); only
/// two pages left give no third stamp to judge by, and the first is
/// flagged, as the kernel's `[prev_ts, next_ts]` check does. Positions in
/// `pages`, ascending.
fn out_of_order(pages: &[(u32, Page)]) -> Vec<usize> {
    let stamp = |i: usize| pages.get(i).map(|(_, p)| p.time_stamp);
    let mut bad = Vec::new();
    let mut prev: Option<u64> = None;
    for (i, (_, p)) in pages.iter().enumerate() {
        let ts = p.time_stamp;
        let next = stamp(i + 1);
        let below = prev.is_some_and(|prev| ts < prev);
        let above = next.is_some_and(|next| {
            ts > next
                && match prev {
                    Some(prev) => next >= prev,
                    None => stamp(i + 2).is_none_or(|after| ts > after),
                }
        });
        if below || above {
            bad.push(i);
        } else {
            prev = Some(ts);
        }
    }
    bad
}

#[cfg(test)]
#[path = "../../../tests/common/ftrace_area.rs"]
mod ftrace_area;

#[cfg(test)]
mod tests;
