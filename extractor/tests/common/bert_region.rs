//! A Boot Error Region as firmware writes it and the ACPI table that
//! points at it (ACPI 6.5 §18.3.1, §18.3.2.7; UEFI 2.10 appendix N).
//! Shared by the BERT reader's unit tests, the fuzz seed's maker and the
//! QEMU scenario, whose guest firmware is handed both.

/// A platform memory section's 80 bytes (UEFI N.2.5), physical address,
/// node (1) and error type valid.
pub fn memory_section(addr: u64, error_type: u8) -> Vec<u8> {
    let mut d = vec![0; 80];
    d[0..8].copy_from_slice(&0x400au64.to_le_bytes());
    d[16..24].copy_from_slice(&addr.to_le_bytes());
    d[32..34].copy_from_slice(&1u16.to_le_bytes());
    d[72] = error_type;
    d
}

/// The platform memory section type, as the table stores a GUID.
const MEMORY_GUID: [u8; 16] = [
    0x14, 0x11, 0xbc, 0xa5, 0x64, 0x6f, 0xde, 0x4e, 0xb8, 0x63, 0x3e, 0x83, 0xed, 0x7c, 0x83, 0xb1,
];

/// A Generic Error Status Block of one platform memory entry holding
/// `data`, at revision 3.0: FRU text "DIMM A1" and a precise timestamp
/// (2026-11-29 05:59:30) valid, the primary-section flag set.
pub fn block(severity: u32, status: u32, data: &[u8]) -> Vec<u8> {
    let mut entry = Vec::new();
    entry.extend_from_slice(&MEMORY_GUID);
    entry.extend_from_slice(&severity.to_le_bytes());
    entry.extend_from_slice(&0x0300u16.to_le_bytes());
    entry.push(0x6);
    entry.push(0x1);
    entry.extend_from_slice(&(data.len() as u32).to_le_bytes());
    entry.extend_from_slice(&[0; 16]);
    let mut fru = [0u8; 20];
    fru[..7].copy_from_slice(b"DIMM A1");
    entry.extend_from_slice(&fru);
    entry.extend_from_slice(&[0x30, 0x59, 0x05, 0x01, 0x29, 0x11, 0x26, 0x20]);
    entry.extend_from_slice(data);
    let mut b = Vec::new();
    for w in [status, 0, 0, entry.len() as u32, severity] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(&entry);
    b
}

/// The BERT table (48 bytes: the ACPI header, the region's length and
/// address), its checksum making its bytes sum to zero.
pub fn table(region_addr: u64, region_len: u32) -> Vec<u8> {
    let mut t = Vec::with_capacity(48);
    t.extend_from_slice(b"BERT");
    t.extend_from_slice(&48u32.to_le_bytes());
    t.push(1); // revision
    t.push(0); // checksum, below
    t.extend_from_slice(b"CRRING"); // OEM id
    t.extend_from_slice(b"CRTEST  "); // OEM table id
    t.extend_from_slice(&1u32.to_le_bytes()); // OEM revision
    t.extend_from_slice(b"CRRG"); // creator id
    t.extend_from_slice(&1u32.to_le_bytes()); // creator revision
    t.extend_from_slice(&region_len.to_le_bytes());
    t.extend_from_slice(&region_addr.to_le_bytes());
    let sum = t.iter().fold(0u8, |s, &b| s.wrapping_add(b));
    t[9] = 0u8.wrapping_sub(sum);
    t
}
