//! A persistent ftrace area as the kernel leaves it
//! (`kernel/trace/ring_buffer.c`), in any of its three layouts, written
//! event by event as the ring buffer writes in overwrite mode. Shared by
//! the ftrace reader's unit tests and the fuzz harness; it computes the
//! layout on its own, from the kernel's source, not from the reader.

/// The sub-buffer size: `PAGE_SIZE`.
pub const PAGE: usize = 4096;
/// `BUF_PAGE_HDR_SIZE`.
const PAGE_HEADER: usize = 16;
/// Where the writing kernel had the area mapped.
pub const VA: u64 = 0xffff_c900_0020_0000;
/// The text address the writing kernel left in per-CPU descriptors.
pub const TEXT: u64 = 0xffff_ffff_8100_0000;
/// Tracing's scratch area in the 6.15+ layouts, as this writer sizes it.
const SCRATCH: usize = 40;

/// The word after the magic of each layout: 6.12, 6.13-6.14, 6.15+, 6.15+
/// with the invalid-page test's counts.
pub const LAYOUTS: [u32; 4] = [56, 48, 0x0018_0020, 0x0018_0028];

/// An area being written.
pub struct Area {
    pub bytes: Vec<u8>,
    word: u32,
    nr: usize,
    chunks: Vec<Chunk>,
}

/// One CPU's writer: where its descriptor and sub-buffers are, its
/// order (`buffers[]`), the head and tail places (logical, 1..nr), the
/// bytes in the tail page and the last stamp.
struct Chunk {
    meta: usize,
    subbufs: usize,
    order: Vec<usize>,
    head: usize,
    tail: usize,
    write: usize,
    last_ts: u64,
}

fn global(word: u32) -> bool {
    word > 56
}

fn meta_size(word: u32) -> usize {
    match word {
        56 => 56,
        48 => 48,
        0x0018_0020 => 32,
        _ => 40,
    }
}

impl Area {
    /// An area of `cpus` chunks of `nr` sub-buffers each (the reader page
    /// included), laid out as a fresh boot lays it out.
    pub fn new(word: u32, cpus: usize, nr: usize) -> Area {
        let first = if global(word) { 24 + SCRATCH } else { 0 };
        let geometry = |at: usize| {
            let subbufs = (at + meta_size(word) + 4 * nr).next_multiple_of(PAGE);
            (subbufs, subbufs + PAGE * nr)
        };
        let mut chunks = Vec::new();
        let mut at = first;
        for _ in 0..cpus {
            let (subbufs, end) = geometry(at);
            chunks.push(Chunk {
                meta: at,
                subbufs,
                order: (0..nr).collect(),
                head: 1,
                tail: 1,
                write: 0,
                last_ts: 0,
            });
            at = end;
        }
        let mut area = Area {
            bytes: vec![0u8; at],
            word,
            nr,
            chunks,
        };
        if global(word) {
            let total = area.bytes.len() as u64;
            area.put32(0, 0x0BAD_FEED);
            area.put32(4, word);
            area.put64(8, total);
            area.put64(16, first as u64);
            // Tracing's scratch area: clock_id, then _text.
            area.put64(24 + 8, TEXT);
        }
        for cpu in 0..cpus {
            area.sync_meta(cpu);
        }
        area
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put64(&mut self, at: usize, v: u64) {
        self.bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// The writing kernel's address of physical sub-buffer `phys` of `cpu`.
    fn va(&self, cpu: usize, phys: usize) -> u64 {
        VA + (self.chunks[cpu].subbufs + phys * PAGE) as u64
    }

    /// Where physical sub-buffer `phys` of `cpu` is in the area.
    pub fn page_at(&self, cpu: usize, phys: usize) -> usize {
        self.chunks[cpu].subbufs + phys * PAGE
    }

    /// The physical sub-buffer at logical place `place` of `cpu`.
    pub fn phys(&self, cpu: usize, place: usize) -> usize {
        self.chunks[cpu].order[place]
    }

    /// Where `cpu`'s descriptor is in the area.
    pub fn meta_at(&self, cpu: usize) -> usize {
        self.chunks[cpu].meta
    }

    /// Writes `cpu`'s descriptor as the ring stands.
    fn sync_meta(&mut self, cpu: usize) {
        let c = &self.chunks[cpu];
        let (at, order) = (c.meta, c.order.clone());
        let first = self.va(cpu, 0);
        let head = self.va(cpu, order[c.head]);
        let commit = self.va(cpu, order[c.tail]);
        let p = if global(self.word) {
            at
        } else {
            self.put32(at, 0x0BAD_FEED);
            self.put32(at + 4, self.word);
            self.put64(at + 8, TEXT);
            if self.word == 56 {
                self.put64(at + 16, TEXT + 0x100_0000);
            }
            at + self.word as usize - 32
        };
        self.put64(p, first);
        self.put64(p + 8, head);
        self.put64(p + 16, commit);
        self.put32(p + 24, PAGE as u32);
        self.put32(p + 28, self.nr as u32);
        let buffers = at + meta_size(self.word);
        for (i, &phys) in order.iter().enumerate() {
            self.put32(buffers + 4 * i, phys as u32);
        }
    }

    /// Appends one event of `payload` to `cpu` at time `ts`, moving to the
    /// next page (over the oldest when the ring is full) as the kernel does.
    pub fn write(&mut self, cpu: usize, ts: u64, payload: &[u8]) {
        let padded = payload.len().next_multiple_of(4).max(4);
        let (small, length) = if padded <= 112 {
            (true, 4 + padded)
        } else {
            (false, 8 + padded)
        };
        let c = &self.chunks[cpu];
        let mut delta = ts - c.last_ts;
        let extend = if c.write > 0 && delta >= 1 << 27 {
            8
        } else {
            0
        };
        if c.write == 0 || c.write + extend + length > PAGE - PAGE_HEADER {
            self.next_page(cpu, ts);
            delta = 0;
        }
        let c = &self.chunks[cpu];
        let page = self.page_at(cpu, c.order[c.tail]);
        let mut at = page + PAGE_HEADER + c.write;
        if delta >= 1 << 27 {
            self.put32(at, 30 | ((delta & ((1 << 27) - 1)) as u32) << 5);
            self.put32(at + 4, (delta >> 27) as u32);
            at += 8;
            delta = 0;
        }
        if small {
            self.put32(at, (padded / 4) as u32 | (delta as u32) << 5);
            at += 4;
        } else {
            self.put32(at, (delta as u32) << 5);
            self.put32(at + 4, (padded + 4) as u32);
            at += 8;
        }
        self.bytes[at..at + payload.len()].copy_from_slice(payload);
        let c = &mut self.chunks[cpu];
        c.write = at + padded - page - PAGE_HEADER;
        c.last_ts = ts;
        let commit = c.write as u64;
        self.put64(page + 8, commit);
        self.sync_meta(cpu);
    }

    /// Closes the tail page with padding and starts the next one at `ts`.
    fn next_page(&mut self, cpu: usize, ts: u64) {
        let nr = self.nr;
        let c = &self.chunks[cpu];
        if c.write > 0 {
            let page = self.page_at(cpu, c.order[c.tail]);
            let room = PAGE - PAGE_HEADER - c.write;
            let at = page + PAGE_HEADER + c.write;
            if room >= 8 {
                self.put32(at, 29 | 1 << 5);
                self.put32(at + 4, (room - 4) as u32);
            } else if room >= 4 {
                self.put32(at, 29);
            }
            let c = &mut self.chunks[cpu];
            let next = if c.tail + 1 == nr { 1 } else { c.tail + 1 };
            if next == c.head {
                c.head = if c.head + 1 == nr { 1 } else { c.head + 1 };
            }
            c.tail = next;
        }
        let c = &mut self.chunks[cpu];
        c.write = 0;
        let page = c.subbufs + c.order[c.tail] * PAGE;
        self.put64(page, ts);
        self.put64(page + 8, 0);
    }

    /// A reader takes the head page (`rb_get_reader_page()`): the old
    /// reader page, emptied, takes its place in the ring.
    pub fn swap_reader(&mut self, cpu: usize) {
        let nr = self.nr;
        let c = &self.chunks[cpu];
        let old = c.order[0];
        let page = self.page_at(cpu, old);
        self.put64(page + 8, 0);
        let c = &mut self.chunks[cpu];
        let head = c.head;
        c.order[0] = c.order[head];
        c.order[head] = old;
        assert_ne!(c.tail, head, "the writer's page cannot be taken here");
        c.head = if head + 1 == nr { 1 } else { head + 1 };
        self.sync_meta(cpu);
    }
}

/// A `trace_marker` write as `struct print_entry`: the common header
/// (type 5, the pid), the caller's address, the text and its NUL.
pub fn print_entry(pid: i32, text: &str) -> Vec<u8> {
    let mut e = vec![5, 0, 0, 0];
    e.extend(pid.to_le_bytes());
    e.extend(0xffff_ffff_8123_4567u64.to_le_bytes());
    e.extend(text.as_bytes());
    e.extend(b"\n\0");
    e
}

/// A function entry (`struct ftrace_entry`): the common header (type 1,
/// the pid), the traced function's address and its caller's.
pub fn function_entry(pid: i32, ip: u64, parent: u64) -> Vec<u8> {
    let mut e = vec![1, 0, 0, 0];
    e.extend(pid.to_le_bytes());
    e.extend(ip.to_le_bytes());
    e.extend(parent.to_le_bytes());
    e
}

/// A kallsyms copy of a boot that put `_text` at 0xffffffff9d000000:
/// `f` and `g` 0x1234 and 0x2000 past it.
pub const KALLSYMS: &str = "ffffffff9d000000 T _text\n\
    ffffffff9d000500 t rb_meta_init_text_addr\n\
    ffffffff9d001234 T f\n\
    ffffffff9d002000 t g\n\
    ffffffff9d100000 T _etext\n";

/// Markers [`seed_area`] writes on CPU 0: enough to go round its ring.
pub const MARKERS0: u64 = 600;

/// A small area of each layout: 2 CPUs of 6 sub-buffers, the first gone
/// round its ring and read from once, the second holding a few markers
/// far apart in time (time extends).
pub fn seed_area(word: u32) -> Area {
    let mut area = Area::new(word, 2, 6);
    for i in 0..MARKERS0 {
        area.write(
            0,
            1_000_000 + i * 1000,
            &print_entry(7, &format!("cpu0 marker {i}")),
        );
    }
    area.swap_reader(0);
    for i in 0..5u64 {
        area.write(
            1,
            2_000_000 + (i << 28),
            &print_entry(8, &format!("cpu1 marker {i}")),
        );
    }
    area
}

/// [`seed_area`]'s bytes.
pub fn seed(word: u32) -> Vec<u8> {
    seed_area(word).bytes
}
