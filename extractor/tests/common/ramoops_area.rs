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
