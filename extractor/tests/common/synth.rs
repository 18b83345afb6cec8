//! Dump containers built byte by byte from their documented layouts
//! (research notes: ELF64 core, makedumpfile kdump-compressed v6 and
//! flattened). Real tools make the same files in the QEMU scenarios; these
//! cover what Debian's tools cannot make (snappy and zstd pages, big-endian
//! headers, PN_XNUM, lost pages) and every kind of damage. The fuzz
//! targets start from these too.

use pstore_ring::layout::{REASON_PANIC, REASON_SHUTDOWN, STATE_CLEAN, STATE_CRASHED};
use pstore_ring::schema::{self, Value};
use pstore_ring::write::{self, RegionConfig, StreamSpec};
use std::io::Write;

/// A `printk` event's values: level 6 (info), facility 0, its flags,
/// sequence number `seq` and `text`.
pub fn printk_line(flags: u64, seq: u64, text: &[u8]) -> [Value<'_>; 5] {
    [
        Value::Unsigned(6),
        Value::Unsigned(0),
        Value::Unsigned(flags),
        Value::Unsigned(seq),
        Value::Str(text),
    ]
}

/// A region of two CPUs with 4 pages of `page_size` each, `size` bytes in
/// all, behind `offset` bytes of other memory, with `n` printk events and a
/// crash event.
pub fn image_sized(offset: usize, page_size: u32, size: usize, n: u64) -> Vec<u8> {
    image_of_generation(
        offset,
        page_size,
        size,
        n,
        RegionConfig::default().generation,
    )
}

/// [`image_sized`] as generation `generation` recorded it.
pub fn image_of_generation(
    offset: usize,
    page_size: u32,
    size: usize,
    n: u64,
    generation: u64,
) -> Vec<u8> {
    let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
    let cfg = RegionConfig {
        page_size,
        pages_per_stream: Some(4),
        streams: &specs,
        generation,
        ..Default::default()
    };
    let mut mem = vec![0x5Au8; offset + size];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let crash = schema::builtin(schema::EVENT_CRASH).unwrap();
    let mut f = write::format(&mut mem[offset..], &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    for i in 0..n {
        let text = format!("message {i}");
        let v = printk_line(1, i, text.as_bytes());
        ws[(i % 2) as usize]
            .write_event(1_000 + i * 10, printk, &v)
            .unwrap();
    }
    let msg = b"Kernel panic - not syncing: test";
    ws[1]
        .write_event(
            1_000 + n * 10,
            crash,
            &[Value::Unsigned(1), Value::Unsigned(1), Value::Str(msg)],
        )
        .unwrap();
    f.control.set_state(
        STATE_CRASHED,
        REASON_PANIC,
        1_000 + n * 10,
        1,
        "Kernel panic - not syncing: test",
    );
    ws.iter_mut().for_each(|w| w.close());
    mem
}

/// A small region of generation `generation` (its boot id starts with the
/// number, so that each has a bundle name of its own), crashed by a panic
/// or shut down cleanly.
/// How a test generation ended.
#[derive(Clone, Copy, Debug)]
pub enum Ending {
    Crashed,
    /// A panic whose message is this.
    CrashedSaying(&'static str),
    Clean,
    /// A clean shutdown asked for with this reason.
    ShutDownFor(&'static str),
}

pub fn generation_image(generation: u64, ending: Ending) -> Vec<u8> {
    let specs = [StreamSpec::cpu(0)];
    let mut boot_id = [0u8; 16];
    boot_id[..8].copy_from_slice(&generation.to_be_bytes());
    boot_id.rotate_left(4);
    let cfg = RegionConfig {
        page_size: 512,
        pages_per_stream: Some(4),
        streams: &specs,
        generation,
        boot_id,
        hostname: "box",
        ..Default::default()
    };
    let mut mem = vec![0u8; 8 * 1024];
    let printk = schema::builtin(schema::EVENT_PRINTK).unwrap();
    let mut f = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = f.streams.by_ref().collect();
    let text = format!("generation {generation}");
    let v = printk_line(1, 0, text.as_bytes());
    ws[0].write_event(1_000, printk, &v).unwrap();
    match ending {
        Ending::Clean => f.control.set_state(STATE_CLEAN, 0, 2_000, 0, ""),
        Ending::ShutDownFor(why) => {
            f.control
                .set_state(STATE_CLEAN, REASON_SHUTDOWN, 1_500, 0, why)
        }
        Ending::Crashed => f.control.set_state(
            STATE_CRASHED,
            REASON_PANIC,
            2_000,
            0,
            "Kernel panic - not syncing: test",
        ),
        Ending::CrashedSaying(message) => {
            f.control
                .set_state(STATE_CRASHED, REASON_PANIC, 2_000, 0, message)
        }
    }
    ws.iter_mut().for_each(|w| w.close());
    mem
}

/// No compression: makedumpfile's default without -c/-l/-p/-z.
pub const PLAIN: u32 = 0;
pub const ZLIB: u32 = 0x01;
pub const LZO: u32 = 0x02;
pub const SNAPPY: u32 = 0x04;
pub const ZSTD: u32 = 0x20;

/// One page compressed the way makedumpfile would.
pub fn compress(codec: u32, data: &[u8]) -> Vec<u8> {
    match codec {
        PLAIN => data.to_vec(),
        ZLIB => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        LZO => lzokay_native::compress(data).unwrap(),
        SNAPPY => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        ZSTD => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        _ => panic!("codec {codec:#x}"),
    }
}

/// A PT_LOAD: `memsz` bytes of memory at `paddr`, of which the first
/// `filesz` are stored (makedumpfile -E leaves the rest out).
#[derive(Clone, Copy)]
pub struct Load {
    pub paddr: u64,
    pub memsz: u64,
    pub filesz: u64,
}

pub fn load(paddr: u64, len: u64) -> Load {
    Load {
        paddr,
        memsz: len,
        filesz: len,
    }
}

/// Appends one ELF note, padded as the format wants.
pub fn note(out: &mut Vec<u8>, name: &[u8], ty: u32, desc: &[u8]) {
    out.extend((name.len() as u32 + 1).to_le_bytes());
    out.extend((desc.len() as u32).to_le_bytes());
    out.extend(ty.to_le_bytes());
    out.extend(name);
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend(desc);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// An ELF64 little-endian core of `mem` (byte N = physical N). `xnum`
/// stores the segment count the PN_XNUM way, in section header 0.
pub fn elf(mem: &[u8], loads: &[Load], vmcoreinfo: Option<&str>, cpus: u32, xnum: bool) -> Vec<u8> {
    let mut notes = Vec::new();
    for _ in 0..cpus {
        note(&mut notes, b"CORE", 1, &[0; 336]);
    }
    if let Some(v) = vmcoreinfo {
        note(&mut notes, b"VMCOREINFO", 0, v.as_bytes());
    }
    elf_with_notes(mem, loads, &notes, 1, xnum)
}

/// An ELF64 core of `mem` whose note bytes are `notes`, described by
/// `note_headers` PT_NOTE headers; header `i` starts `4 * i` bytes into
/// them (overlapping, as only a hostile file has them).
pub fn elf_with_notes(
    mem: &[u8],
    loads: &[Load],
    notes: &[u8],
    note_headers: usize,
    xnum: bool,
) -> Vec<u8> {
    let phnum = loads.len() + note_headers;
    let phoff = 64u64;
    let notes_off = phoff + 56 * phnum as u64;
    let mut data_off = notes_off + notes.len() as u64;
    let mut phdrs = Vec::new();
    let mut ph = |ty: u32, offset: u64, paddr: u64, filesz: u64, memsz: u64| {
        phdrs.extend(ty.to_le_bytes());
        phdrs.extend(4u32.to_le_bytes());
        for v in [offset, paddr, paddr, filesz, memsz, 0] {
            phdrs.extend(v.to_le_bytes());
        }
    };
    for i in 0..note_headers as u64 {
        let len = (notes.len() as u64).saturating_sub(4 * i);
        ph(4, notes_off + 4 * i, 0, len, len);
    }
    let mut data: Vec<u8> = Vec::new();
    for l in loads {
        ph(1, data_off, l.paddr, l.filesz, l.memsz);
        data.extend(&mem[l.paddr as usize..(l.paddr + l.filesz) as usize]);
        data_off += l.filesz;
    }
    let shoff = if xnum { data_off } else { 0 };
    let mut f = Vec::new();
    f.extend(b"\x7fELF\x02\x01\x01");
    f.resize(16, 0);
    f.extend(4u16.to_le_bytes()); // ET_CORE
    f.extend(62u16.to_le_bytes()); // x86-64
    f.extend(1u32.to_le_bytes());
    f.extend(0u64.to_le_bytes()); // entry
    f.extend(phoff.to_le_bytes());
    f.extend(shoff.to_le_bytes());
    f.extend(0u32.to_le_bytes()); // flags
    f.extend(64u16.to_le_bytes());
    f.extend(56u16.to_le_bytes());
    f.extend((if xnum { 0xffff } else { phnum as u16 }).to_le_bytes());
    f.extend(64u16.to_le_bytes());
    f.extend((if xnum { 1u16 } else { 0 }).to_le_bytes());
    f.extend(0u16.to_le_bytes());
    f.extend(phdrs);
    f.extend(notes);
    f.extend(data);
    if xnum {
        let mut sh = [0u8; 64];
        sh[44..48].copy_from_slice(&(phnum as u32).to_le_bytes()); // sh_info
        f.extend(sh);
    }
    f
}

/// How a kdump-compressed file is made.
pub struct Kdump<'a> {
    pub codec: u32,
    pub block: usize,
    /// Pages the filter left out (2nd bitmap clear).
    pub excluded: &'a [u64],
    /// Pages an incomplete dump lost (descriptor offset 0).
    pub lost: &'a [u64],
    /// Pages that are no RAM: clear in both bitmaps, no descriptor.
    pub not_ram: &'a [u64],
    pub vmcoreinfo: Option<&'a str>,
    pub big_endian: bool,
}

impl Default for Kdump<'_> {
    fn default() -> Self {
        Kdump {
            codec: ZLIB,
            block: 4096,
            excluded: &[],
            lost: &[],
            not_ram: &[],
            vmcoreinfo: None,
            big_endian: false,
        }
    }
}

/// A kdump-compressed v6 file of `mem`.
pub fn kdump(mem: &[u8], k: &Kdump) -> Vec<u8> {
    let bs = k.block;
    let put32 = |f: &mut Vec<u8>, at: usize, v: u32| {
        let b = if k.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        f[at..at + 4].copy_from_slice(&b);
    };
    let put64 = |f: &mut Vec<u8>, at: usize, v: u64| {
        let b = if k.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        f[at..at + 8].copy_from_slice(&b);
    };
    let pages = mem.len() / bs;
    let half = (pages.div_ceil(8)).div_ceil(bs) * bs;
    let bitmap_blocks = 2 * half / bs;
    let mut f = vec![0u8; bs * (2 + bitmap_blocks)];
    f[..8].copy_from_slice(b"KDUMP   ");
    put32(&mut f, 8, 6);
    f[12 + 65 * 2..12 + 65 * 2 + 6].copy_from_slice(b"6.12.0");
    f[12 + 65 * 4..12 + 65 * 4 + 6].copy_from_slice(b"x86_64");
    put32(
        &mut f,
        424,
        if k.lost.is_empty() {
            k.codec
        } else {
            k.codec | 0x08
        },
    );
    put32(&mut f, 428, bs as u32);
    put32(&mut f, 432, 1);
    put32(&mut f, 436, bitmap_blocks as u32);
    put32(&mut f, 440, pages as u32);
    put32(&mut f, 460, 4);
    // Sub-header, VMCOREINFO right after it.
    put32(&mut f, bs + 8, 1); // dump_level
    put64(&mut f, bs + 96, pages as u64);
    if let Some(v) = k.vmcoreinfo {
        let at = bs + 104;
        f[at..at + v.len()].copy_from_slice(v.as_bytes());
        put64(&mut f, bs + 32, at as u64);
        put64(&mut f, bs + 40, v.len() as u64);
    }
    let bitmaps = 2 * bs;
    let ram = |pfn: usize| !k.not_ram.contains(&(pfn as u64));
    let dumped = |pfn: usize| ram(pfn) && !k.excluded.contains(&(pfn as u64));
    for pfn in 0..pages {
        if ram(pfn) {
            f[bitmaps + pfn / 8] |= 1 << (pfn % 8);
        }
        if dumped(pfn) {
            f[bitmaps + half + pfn / 8] |= 1 << (pfn % 8);
        }
    }
    let dumped: Vec<usize> = (0..pages).filter(|&p| dumped(p)).collect();
    let descs = f.len();
    f.resize(descs + 24 * dumped.len(), 0);
    // The shared zero page comes first, as makedumpfile writes it.
    let zero_at = f.len() as u64;
    let zero = vec![0u8; bs];
    let zero_packed = compress(k.codec, &zero);
    f.extend(&zero_packed);
    for (i, &pfn) in dumped.iter().enumerate() {
        let page = &mem[pfn * bs..(pfn + 1) * bs];
        let (offset, size, flags) = if k.lost.contains(&(pfn as u64)) {
            (0, 0, 0)
        } else if page.iter().all(|&b| b == 0) {
            (zero_at, zero_packed.len(), k.codec)
        } else {
            let packed = compress(k.codec, page);
            let at = f.len() as u64;
            if packed.len() < bs {
                f.extend(&packed);
                (at, packed.len(), k.codec)
            } else {
                f.extend(page);
                (at, bs, 0)
            }
        };
        let d = descs + 24 * i;
        put64(&mut f, d, offset);
        put32(&mut f, d + 8, size as u32);
        put32(&mut f, d + 12, flags);
    }
    f
}

/// `file` as makedumpfile -F writes it, records of varied sizes in a
/// scrambled order.
pub fn flatten(file: &[u8]) -> Vec<u8> {
    flatten_without(file, 0..0)
}

/// [`flatten`], with no record holding the bytes of `gap`: what a
/// flattened file missing a record (or a sparse reassembly) looks like.
pub fn flatten_without(file: &[u8], gap: std::ops::Range<usize>) -> Vec<u8> {
    let mut f = b"makedumpfile\0\0\0\0".to_vec();
    f.extend(1i64.to_be_bytes());
    f.extend(1i64.to_be_bytes());
    f.resize(4096, 0);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut n = 0usize;
    while at < file.len() {
        let len = (700 + (n * 977) % 5000).min(file.len() - at);
        pieces.push((at, len));
        at += len;
        n += 1;
    }
    // Reverse pairs: a simple, deterministic disorder.
    for pair in pieces.chunks_mut(2) {
        pair.reverse();
    }
    for (at, len) in pieces {
        let parts = [
            (at, gap.start.clamp(at, at + len)),
            (gap.end.clamp(at, at + len), at + len),
        ];
        for (from, to) in parts.into_iter().filter(|(from, to)| from < to) {
            f.extend((from as i64).to_be_bytes());
            f.extend(((to - from) as i64).to_be_bytes());
            f.extend(&file[from..to]);
        }
    }
    f.extend((-1i64).to_be_bytes());
    f.extend((-1i64).to_be_bytes());
    f
}

/// Adds a record putting `data` at reassembled `offset` to a flattened
/// `file` (one [`flatten`] made), just before its end marker. An empty
/// record holds nothing yet still stretches the reassembled length.
pub fn append_record(file: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let marker = file.split_off(file.len() - 16);
    file.extend((offset as i64).to_be_bytes());
    file.extend((data.len() as i64).to_be_bytes());
    file.extend(data);
    file.extend(marker);
}

/// A source of `len` bytes: `head`, then zeros it does not store, so a
/// test can hand a container a table of millions of empty entries.
pub struct ZeroTail {
    pub head: Vec<u8>,
    pub len: u64,
}

impl extractor::input::source::Source for ZeroTail {
    fn len(&self) -> Option<u64> {
        Some(self.len)
    }

    fn read_at(
        &self,
        offset: extractor::input::source::FileOffset,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        let offset = offset.0;
        let n = buf
            .len()
            .min(usize::try_from(self.len.saturating_sub(offset)).unwrap_or(usize::MAX));
        let buf = &mut buf[..n];
        buf.fill(0);
        if let Some(head) = usize::try_from(offset)
            .ok()
            .and_then(|o| self.head.get(o..))
        {
            let k = head.len().min(n);
            buf[..k].copy_from_slice(&head[..k]);
        }
        Ok(n)
    }
}

/// `inner`, except that reads touching `bad` fail, as a disk's bad
/// sectors would.
pub struct BadSectors {
    pub inner: Vec<u8>,
    pub bad: std::ops::Range<u64>,
}

impl extractor::input::source::Source for BadSectors {
    fn len(&self) -> Option<u64> {
        Some(self.inner.len() as u64)
    }

    fn read_at(
        &self,
        offset: extractor::input::source::FileOffset,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        if offset.0 < self.bad.end && offset.0 + buf.len() as u64 > self.bad.start {
            return Err(std::io::Error::other("bad sector"));
        }
        self.inner.read_at(offset, buf)
    }
}
