//! A ramoops area as the kernel leaves it (`fs/pstore/ram_core.c`): zones
//! behind their 12-byte headers, written as `persistent_ram_write()`
//! writes. Shared by the ramoops reader's unit tests and the fuzz harness.

use std::io::Write;

/// `PERSISTENT_RAM_SIG`.
pub const SIG: u32 = 0x4347_4244;
/// The parameters [`seed`] was laid out with, as `--ramoops` takes them.
pub const LAYOUT: &str = "0:64K,record=16K,console=8K,ftrace=4K,pmsg=4K,cpus=2";
/// The area's size.
pub const SIZE: usize = 0x10000;

/// Writes `text` into the zone at `at` as `persistent_ram_write()` does,
/// from an empty buffer of `buffer` bytes, header included.
pub fn put(area: &mut [u8], at: usize, sig: u32, buffer: usize, text: &[u8]) {
    let (mut start, mut size) = (0usize, 0usize);
    for &b in text {
        area[at + 12 + start] = b;
        start = (start + 1) % buffer;
        size = (size + 1).min(buffer);
    }
    header(area, at, sig, start as u32, size as u32);
}

/// Gives the zone at `at` (`zone` bytes in all) the parity ramoops keeps
/// with `ecc=nroots` (`persistent_ram_update_ecc()`, `_update_header_ecc()`):
/// for each 128-byte block its record covers, then for the header, each
/// by `encode` (the parity of a block). The data must have been put with
/// the buffer [`ecc_buffer`] gives.
pub fn protect(
    area: &mut [u8],
    at: usize,
    zone: usize,
    nroots: usize,
    encode: &dyn Fn(&[u8]) -> Vec<u8>,
) {
    let (buffer, blocks) = ecc_buffer(zone, nroots);
    let data = at + 12;
    let size = u32::from_le_bytes([area[at + 8], area[at + 9], area[at + 10], area[at + 11]]);
    for b in 0..(size as usize).div_ceil(128) {
        let block = data + b * 128..data + ((b + 1) * 128).min(buffer);
        let parity = encode(&area[block]);
        let p = data + buffer + b * nroots;
        area[p..p + nroots].copy_from_slice(&parity);
    }
    let parity = encode(&area[at..at + 12]);
    let p = data + buffer + blocks * nroots;
    area[p..p + nroots].copy_from_slice(&parity);
}

/// The data bytes of a zone of `zone` bytes with `ecc=nroots`, and its
/// count of data parity blocks (`persistent_ram_init_ecc()`).
pub fn ecc_buffer(zone: usize, nroots: usize) -> (usize, usize) {
    let buffer = zone - 12;
    let blocks = (buffer - nroots).div_ceil(128 + nroots);
    (buffer - (blocks + 1) * nroots, blocks)
}

/// A zone header as it stands.
pub fn header(area: &mut [u8], at: usize, sig: u32, start: u32, size: u32) {
    area[at..at + 4].copy_from_slice(&sig.to_le_bytes());
    area[at + 4..at + 8].copy_from_slice(&start.to_le_bytes());
    area[at + 8..at + 12].copy_from_slice(&size.to_le_bytes());
}

/// A panic's dmesg record, stored compressed as pstore stores it (raw
/// deflate behind a `-C` header).
pub fn compressed_record(text: &[u8]) -> Vec<u8> {
    let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(3));
    deflated.write_all(text).expect("writing to memory");
    let mut record = b"====1700000000.123456-C\n".to_vec();
    record.extend(deflated.finish().expect("writing to memory"));
    record
}

/// One ftrace record: ip, parent ip, time stamp with the CPU below it.
pub fn ftrace_record(ip: u64, parent: u64, ts: u64, cpu: u8) -> Vec<u8> {
    [ip, parent, (ts << 8) | u64::from(cpu)]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// Writes `count` records into the first ftrace zone of [`seed`]'s
/// layout (the current order), as 6.12.117 does; returns where the zone
/// is in the area.
pub fn put_ftrace_records(area: &mut [u8], count: u64) -> usize {
    let (_, at) = places(true);
    let records: Vec<u8> = (0..count)
        .flat_map(|i| ftrace_record(0x1000 + i, 0x2000 + i, i, 1))
        .collect();
    put(area, at, SIG ^ 0x060c75, 0x800 - 12, &records);
    at
}

/// A console log long enough to go round its zone three times.
pub fn console_text() -> Vec<u8> {
    (0..3 * 0x2000).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Where [`seed_in`] puts the pmsg zone and the two ftrace zones: in the
/// current order (pmsg first), or in older kernels' (ftrace first).
pub fn places(pmsg_first: bool) -> (usize, usize) {
    if pmsg_first {
        (0xe000, 0xf000)
    } else {
        (0xf000, 0xe000)
    }
}

/// An area laid out by [`LAYOUT`] with a zone of every kind: a plain
/// dmesg record, a compressed one, an empty dmesg zone, a console zone
/// gone round, a pmsg line, an ftrace zone of 6.12.117 with one record
/// and an ftrace zone never set up; in the current order or the older.
pub fn seed_in(pmsg_first: bool) -> Vec<u8> {
    let (pmsg, ftrace) = places(pmsg_first);
    let mut area = vec![0u8; SIZE];
    put(
        &mut area,
        0,
        SIG,
        0x4000 - 12,
        b"====1700000000.5-D\n<0>Kernel panic - not syncing: plain\n",
    );
    put(
        &mut area,
        0x4000,
        SIG,
        0x4000 - 12,
        &compressed_record(b"<0>Kernel panic - not syncing: compressed\n"),
    );
    put(&mut area, 0x8000, SIG, 0x4000 - 12, b"");
    put(&mut area, 0xc000, SIG, 0x2000 - 12, &console_text());
    put(
        &mut area,
        pmsg,
        SIG,
        0x1000 - 12,
        b"compositor: frame 7 late\n",
    );
    put(
        &mut area,
        ftrace,
        SIG ^ 0x060c75,
        0x800 - 12,
        &ftrace_record(0xffffffff81000010, 0xffffffff81000020, 77, 1),
    );
    area
}

/// [`seed_in`] the current order.
pub fn seed() -> Vec<u8> {
    seed_in(true)
}

/// The layout [`seed_ecc`] was laid out with: [`LAYOUT`]'s zones, three
/// ftrace zones, 16 bytes of parity per block.
pub const ECC_LAYOUT: &str = "0:64K,record=16K,console=8K,ftrace=4K,pmsg=4K,cpus=3,ecc=16";

/// The panic [`seed_ecc`] stores compressed: 300 numbered lines.
pub fn ecc_panic() -> Vec<u8> {
    (0..300)
        .flat_map(|i| format!("<0>[{i:5}.000000] Kernel panic line {i}\n").into_bytes())
        .collect()
}

/// An area laid out by [`ECC_LAYOUT`] as ramoops leaves it with ECC, each
/// zone's parity by `encode` (a block's parity): [`ecc_panic`] compressed
/// in the first dmesg zone, a console zone gone round, a pmsg line; every
/// other zone set up and empty.
pub fn seed_ecc(encode: &dyn Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut area = vec![0u8; SIZE];
    let zone = |area: &mut Vec<u8>, at: usize, size: usize, text: &[u8]| {
        put(area, at, SIG, ecc_buffer(size, 16).0, text);
        protect(area, at, size, 16, encode);
    };
    zone(&mut area, 0, 0x4000, &compressed_record(&ecc_panic()));
    zone(&mut area, 0x4000, 0x4000, b"");
    zone(&mut area, 0x8000, 0x4000, b"");
    zone(&mut area, 0xc000, 0x2000, &console_text());
    zone(&mut area, 0xe000, 0x1000, b"compositor: frame 7 late\n");
    area
}
