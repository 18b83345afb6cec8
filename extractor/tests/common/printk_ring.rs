//! A crashed kernel's memory holding a printk ring, built to the layout
//! 6.12's VMCOREINFO gives (`kernel/printk/printk_ringbuffer.h`): page
//! tables mapping the kernel image and the direct map, `prb`, the ring,
//! its descriptors, infos and data. Shared by the printk reader's unit
//! tests, the integration tests and the fuzz harness. [`arm64`] lays the
//! same ring out as an arm64 kernel's, by its image and linear map.

/// Where the kernel image and the direct map start.
pub const IMAGE: u64 = 0xffff_ffff_8000_0000;
pub const DIRECT: u64 = 0xffff_8880_0000_0000;
/// init_top_pgt, `prb` and the ring, in the image (physical = offset,
/// phys_base 0); the arrays and the data ring in the direct map.
pub const TOP: u64 = 0x1_0000;
pub const PRB: u64 = 0x1_8000;
pub const RING: u64 = 0x1_8100;
pub const DESCS: u64 = 0x2_0000;
pub const INFOS: u64 = 0x2_1000;
pub const DATA: u64 = 0x2_2000;
/// The memory's size.
pub const MEM: usize = 0x3_0000;
/// 8 descriptors, a 512-byte data ring.
pub const COUNT_BITS: u32 = 3;
pub const SIZE: u64 = 512;
/// Descriptor states, in the state word's top two bits.
pub const COMMITTED: u64 = 1;
pub const FINALIZED: u64 = 2;

/// 6.12's layout, as its VMCOREINFO gives it.
pub fn note() -> String {
    format!(
        "OSRELEASE=6.12.0-test\nSYMBOL(init_top_pgt)={:x}\nNUMBER(phys_base)=0\n\
         NUMBER(pgtable_l5_enabled)=0\n\
         SYMBOL(prb)={:x}\nSIZE(printk_ringbuffer)=88\n\
         OFFSET(printk_ringbuffer.desc_ring)=0\nOFFSET(printk_ringbuffer.text_data_ring)=48\n\
         OFFSET(printk_ringbuffer.fail)=80\nSIZE(prb_desc_ring)=48\n\
         OFFSET(prb_desc_ring.count_bits)=0\nOFFSET(prb_desc_ring.descs)=8\n\
         OFFSET(prb_desc_ring.infos)=16\nOFFSET(prb_desc_ring.head_id)=24\n\
         OFFSET(prb_desc_ring.tail_id)=32\nSIZE(prb_desc)=24\n\
         OFFSET(prb_desc.state_var)=0\nOFFSET(prb_desc.text_blk_lpos)=8\n\
         SIZE(prb_data_blk_lpos)=16\nOFFSET(prb_data_blk_lpos.begin)=0\n\
         OFFSET(prb_data_blk_lpos.next)=8\nSIZE(printk_info)=88\n\
         OFFSET(printk_info.seq)=0\nOFFSET(printk_info.ts_nsec)=8\n\
         OFFSET(printk_info.text_len)=16\nOFFSET(printk_info.caller_id)=20\n\
         OFFSET(printk_info.dev_info)=24\nSIZE(dev_printk_info)=64\n\
         OFFSET(dev_printk_info.subsystem)=0\nLENGTH(printk_info_subsystem)=16\n\
         OFFSET(dev_printk_info.device)=16\nLENGTH(printk_info_device)=48\n\
         SIZE(prb_data_ring)=32\nOFFSET(prb_data_ring.size_bits)=0\n\
         OFFSET(prb_data_ring.data)=8\nOFFSET(prb_data_ring.head_lpos)=16\n\
         OFFSET(prb_data_ring.tail_lpos)=24\n",
        IMAGE + TOP,
        IMAGE + PRB
    )
}

/// The same ring in an arm64 kernel's memory, without page tables: the
/// image at physical 0 (`kimage_voffset` = its virtual start) and the
/// linear map of physical 0 on at `PAGE_OFFSET` (a 48-bit 6.1 layout,
/// `PHYS_OFFSET` 0), as VMCOREINFO gives them.
pub mod arm64 {
    use super::{put, DATA, DESCS, INFOS, PRB, RING};

    pub const IMAGE: u64 = 0xffff_a0d0_a940_0000;
    pub const LINEAR: u64 = 0xffff_0000_0000_0000;

    /// [`super::note`]'s layout with arm64's mapping instead of x86's.
    pub fn note() -> String {
        let x86 = super::note();
        let layout: String = x86
            .lines()
            .filter(|l| !l.starts_with("SYMBOL(") && !l.starts_with("NUMBER("))
            .map(|l| format!("{l}\n"))
            .collect();
        format!(
            "{layout}SYMBOL(prb)={:x}\nSYMBOL(_stext)={:x}\nNUMBER(VA_BITS)=48\n\
             NUMBER(kimage_voffset)={IMAGE:#x}\nNUMBER(PHYS_OFFSET)=0x0\n\
             NUMBER(TCR_EL1_T1SZ)=0x10\n",
            IMAGE + PRB,
            IMAGE + 0x1_0000
        )
    }

    /// `mem` (a ring laid out by [`super::ring`]) with its pointers as an
    /// arm64 kernel's.
    pub fn repoint(mem: &mut [u8]) {
        put(mem, PRB, &(IMAGE + RING).to_le_bytes());
        put(mem, RING + 8, &(LINEAR + DESCS).to_le_bytes());
        put(mem, RING + 16, &(LINEAR + INFOS).to_le_bytes());
        put(mem, RING + 56, &(LINEAR + DATA).to_le_bytes());
    }
}

pub fn put(mem: &mut [u8], at: u64, bytes: &[u8]) {
    let at = at as usize;
    mem[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Page tables mapping the image and the direct map's first GiB to
/// physical 0 with 1 GiB pages.
pub fn mapped() -> Vec<u8> {
    let mut mem = vec![0u8; MEM];
    let (present_huge, present) = (0x81u64, 0x1u64);
    let mut entry = |table: u64, index: u64, value: u64| {
        put(&mut mem, table + index * 8, &value.to_le_bytes());
    };
    entry(TOP, (DIRECT >> 39) & 0x1ff, 0x1_1000 | present);
    entry(0x1_1000, 0, present_huge);
    entry(TOP, (IMAGE >> 39) & 0x1ff, 0x1_2000 | present);
    entry(0x1_2000, (IMAGE >> 30) & 0x1ff, present_huge);
    mem
}

/// The ring's own words: ids `tail..=head`, `fail` records not stored.
pub fn ring(mem: &mut [u8], tail: u64, head: u64, fail: u64) {
    put(mem, PRB, &(IMAGE + RING).to_le_bytes());
    put(mem, RING, &COUNT_BITS.to_le_bytes());
    put(mem, RING + 8, &(DIRECT + DESCS).to_le_bytes());
    put(mem, RING + 16, &(DIRECT + INFOS).to_le_bytes());
    put(mem, RING + 24, &head.to_le_bytes());
    put(mem, RING + 32, &tail.to_le_bytes());
    put(mem, RING + 48, &SIZE.trailing_zeros().to_le_bytes());
    put(mem, RING + 56, &(DIRECT + DATA).to_le_bytes());
    put(mem, RING + 80, &fail.to_le_bytes());
}

/// Descriptor `id` in `state` with its text at `lpos`, and its info: seq
/// `id + 1000`, time `id` ms, level 6, LOG_NEWLINE.
pub fn record(mem: &mut [u8], id: u64, state: u64, lpos: (u64, u64), text_len: u16, caller: u32) {
    let index = id & ((1 << COUNT_BITS) - 1);
    let desc = DESCS + index * 24;
    put(mem, desc, &(state << 62 | id).to_le_bytes());
    put(mem, desc + 8, &lpos.0.to_le_bytes());
    put(mem, desc + 16, &lpos.1.to_le_bytes());
    let info = INFOS + index * 88;
    put(mem, info, &(id + 1000).to_le_bytes());
    put(mem, info + 8, &(id * 1_000_000).to_le_bytes());
    put(mem, info + 16, &text_len.to_le_bytes());
    // facility 0; flags LOG_NEWLINE (2), level 6.
    put(mem, info + 18, &[0, 2 | 6 << 5]);
    put(mem, info + 20, &caller.to_le_bytes());
}

/// A data block for `id` at ring index `at`: its id word, then `text`.
pub fn block(mem: &mut [u8], at: u64, id: u64, text: &[u8]) {
    put(mem, DATA + at, &id.to_le_bytes());
    put(mem, DATA + at + 8, text);
}

/// Ids 10 to 15 between tail and head: a record whose text is longer
/// than its block, one whose block wrapped to the ring's start, one
/// whose block names another descriptor, an empty one (no text stored)
/// with its device, one still reserved, one whose text the kernel had
/// no room for. Reads as 3 records, 3 unreadable, 5 failed.
pub fn six_records() -> Vec<u8> {
    let mut mem = mapped();
    ring(&mut mem, 10, 15, 5);
    let wrap = 2 * SIZE;
    // Its info says 20 bytes; the block holds 8: cut to the block.
    record(
        &mut mem,
        10,
        FINALIZED,
        (wrap + 400, wrap + 416),
        20,
        0x8000_0001,
    );
    block(&mut mem, 400, 10, b"hello");
    // 8 + 30 bytes from index 480 pass the end: stored from 0.
    record(
        &mut mem,
        11,
        COMMITTED,
        (wrap + 480, wrap + SIZE + 40),
        30,
        77,
    );
    block(&mut mem, 0, 11, &[b'w'; 30]);
    record(
        &mut mem,
        12,
        FINALIZED,
        (wrap + SIZE + 40, wrap + SIZE + 56),
        3,
        1,
    );
    block(&mut mem, 40, 99, b"abc");
    record(&mut mem, 13, FINALIZED, (3, 3), 0, 1);
    put(&mut mem, INFOS + 5 * 88 + 24, b"pci");
    put(&mut mem, INFOS + 5 * 88 + 40, b"+pci:0000:00:02.0");
    record(&mut mem, 14, 0, (wrap + SIZE + 56, wrap + SIZE + 72), 3, 1);
    record(&mut mem, 15, FINALIZED, (1, 1), 9, 1);
    mem
}
