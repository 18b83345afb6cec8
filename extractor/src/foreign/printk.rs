//! The kernel's own printk log, read from a dump without debuginfo: the
//! lockless ring buffer of 5.10 and later (`kernel/printk/printk_ringbuffer.h`),
//! found and laid out by what VMCOREINFO says of it
//! (`log_buf_vmcoreinfo_setup()` in `kernel/printk/printk.c`).
//!
//! The ring is two arrays: descriptors, each with a state word whose top
//! two bits are the state and the rest the record's id, and the position
//! of its text in the data ring; and infos (sequence number, time, text
//! length, level, flags, caller). Records are those from the tail id to
//! the head id; one whose descriptor holds another id (overwritten while
//! the kernel ran) or is not committed is counted, not read, and so is
//! one whose data block shares bytes with a newer record's: the ids are
//! walked from the head back, so damage to an old descriptor costs its
//! own record only.

use crate::input::Dump;
use crate::kmem::vmcoreinfo::{InfoError, VmcoreInfo};
use crate::kmem::{KernelMemory, TranslateError, VirtAddr};
use std::collections::BTreeMap;

/// Why the printk log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PrintkError {
    #[error("{0}")]
    Info(#[from] InfoError),
    #[error("reading the printk ring's {what}: {source}")]
    Read {
        what: &'static str,
        source: TranslateError,
    },
    #[error("the printk ring's {what} is {value}, which no kernel writes")]
    Implausible { what: &'static str, value: u64 },
}

/// One record of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    /// Nanoseconds on the kernel's local clock (`local_clock()`).
    pub ts_nsec: u64,
    /// 0 (KERN_EMERG) to 7 (KERN_DEBUG).
    pub level: u8,
    pub facility: u8,
    /// `LOG_NEWLINE` (2), `LOG_CONT` (8).
    pub flags: u8,
    /// The thread id, or the CPU number with [`CALLER_CPU`] set.
    pub caller_id: u32,
    pub text: Vec<u8>,
    /// `dev_printk_info`: the device's subsystem and name, if any.
    pub subsystem: Vec<u8>,
    pub device: Vec<u8>,
}

/// In `caller_id`: the record was printed outside task context, on the
/// CPU the low bits give.
pub const CALLER_CPU: u32 = 0x8000_0000;
/// `LOG_CONT`: a fragment of a line continued by the next record.
pub const LOG_CONT: u8 = 8;

/// What was read: the records in order, and what could not be.
#[derive(Debug, Default)]
pub struct Log {
    pub records: Vec<Record>,
    /// Descriptors between tail and head not committed, overwritten,
    /// whose text the kernel had no room for, whose text did not read
    /// back, or whose data block is none the kernel wrote (unaligned, or
    /// sharing bytes with a newer record's): counted, never guessed.
    pub skipped: u64,
    /// Descriptors between tail and head whose descriptor, info or text
    /// could not be read from the dump (pages a filter left out, a dump
    /// cut short, an address this reader does not translate): counted
    /// apart from `skipped`, since the kernel did keep them.
    pub absent: u64,
    /// Where the oldest of those could not be read, and why.
    pub absent_at: Option<TranslateError>,
    /// The ring's `fail` counter: records the kernel could not store.
    pub failed: u64,
    /// The tail id, when it was no id the ring could hold behind the
    /// head (more than its descriptor count before it): damaged, so the
    /// ids walked were the descriptor count's back from the head, and
    /// those of them no record holds are counted in `skipped`.
    pub bad_tail: Option<u64>,
}

impl Log {
    /// What a damaged tail id made the reader do, for a line about the
    /// log; empty when the tail was sound.
    pub fn tail_note(&self) -> String {
        self.bad_tail.map_or_else(String::new, |tail| {
            format!("; its tail id {tail:#x} was damaged, so the ring's count of ids back from the head were read")
        })
    }

    /// What of the log could not be read from the dump, for a line about
    /// it; empty when all of it was.
    pub fn absent_note(&self) -> String {
        match &self.absent_at {
            Some(at) => format!(
                "; {} records not read from the dump (the oldest: {at})",
                self.absent
            ),
            None => String::new(),
        }
    }
}

/// `DESC_SV` states, in the state word's top two bits.
const DESC_COMMITTED: u64 = 1;
const DESC_FINALIZED: u64 = 2;
/// A position with bit 0 set stores no text: `NO_LPOS` for an empty
/// record, `FAILED_LPOS` when the kernel found no room for the text.
const LPOS_DATALESS: u64 = 1;
const NO_LPOS: u64 = 3;
/// At most this many descriptors: 2^count_bits, capped well above any
/// kernel's (`CONFIG_LOG_BUF_SHIFT` 25 with the average 32-byte record
/// gives 2^20).
const MAX_COUNT_BITS: u64 = 24;
/// The data ring's size, 2^size_bits, capped likewise (2^25 is the most
/// a kernel sets, log_buf_len= up to 2^31 bytes on the command line).
const MAX_SIZE_BITS: u64 = 31;

/// The layout VMCOREINFO gives.
struct Layout {
    /// Where an `atomic_long_t`'s value is in it.
    counter: u64,
    desc_ring: u64,
    text_ring: u64,
    fail: u64,
    count_bits: u64,
    descs: u64,
    infos: u64,
    head_id: u64,
    tail_id: u64,
    desc_size: u64,
    state_var: u64,
    text_blk: u64,
    begin: u64,
    next: u64,
    info_size: u64,
    seq: u64,
    ts_nsec: u64,
    text_len: u64,
    caller_id: u64,
    subsystem: u64,
    subsystem_len: u64,
    device: u64,
    device_len: u64,
    size_bits: u64,
    data: u64,
}

impl Layout {
    fn of(info: &VmcoreInfo) -> Result<Layout, InfoError> {
        let dev_info = info.offset("printk_info", "dev_info")?;
        Ok(Layout {
            // Every kernel with this ring exports it, as 0: a note without
            // it still means the struct's only member.
            counter: match info.offset("atomic_long_t", "counter") {
                Err(InfoError::Missing(_)) => 0,
                other => other?,
            },
            desc_ring: info.offset("printk_ringbuffer", "desc_ring")?,
            text_ring: info.offset("printk_ringbuffer", "text_data_ring")?,
            fail: info.offset("printk_ringbuffer", "fail")?,
            count_bits: info.offset("prb_desc_ring", "count_bits")?,
            descs: info.offset("prb_desc_ring", "descs")?,
            infos: info.offset("prb_desc_ring", "infos")?,
            head_id: info.offset("prb_desc_ring", "head_id")?,
            tail_id: info.offset("prb_desc_ring", "tail_id")?,
            desc_size: info.size("prb_desc")?,
            state_var: info.offset("prb_desc", "state_var")?,
            text_blk: info.offset("prb_desc", "text_blk_lpos")?,
            begin: info.offset("prb_data_blk_lpos", "begin")?,
            next: info.offset("prb_data_blk_lpos", "next")?,
            info_size: info.size("printk_info")?,
            seq: info.offset("printk_info", "seq")?,
            ts_nsec: info.offset("printk_info", "ts_nsec")?,
            text_len: info.offset("printk_info", "text_len")?,
            caller_id: info.offset("printk_info", "caller_id")?,
            subsystem: dev_info.wrapping_add(info.offset("dev_printk_info", "subsystem")?),
            subsystem_len: length(info, "printk_info_subsystem")?,
            device: dev_info.wrapping_add(info.offset("dev_printk_info", "device")?),
            device_len: length(info, "printk_info_device")?,
            size_bits: info.offset("prb_data_ring", "size_bits")?,
            data: info.offset("prb_data_ring", "data")?,
        })
    }
}

fn length(info: &VmcoreInfo, name: &str) -> Result<u64, InfoError> {
    let key = format!("LENGTH({name})");
    let value = info.value(&key)?;
    value.parse().map_err(|_| InfoError::Invalid {
        key,
        value: value.to_string(),
        what: "a decimal number",
    })
}

/// The printk log of the kernel whose dump `dump` is, or `None` when the
/// dump has no VMCOREINFO to find it by (a raw image, a region's copy).
pub fn of_dump(dump: &Dump) -> Option<Result<Log, PrintkError>> {
    let info = VmcoreInfo::parse(dump.vmcoreinfo.as_deref()?);
    Some(
        KernelMemory::new(&*dump.memory, &info)
            .map_err(PrintkError::from)
            .and_then(|mem| read(&mem, &info)),
    )
}

/// Reads the printk log of the kernel `info` describes from `mem`.
pub fn read(mem: &KernelMemory, info: &VmcoreInfo) -> Result<Log, PrintkError> {
    let l = Layout::of(info)?;
    let word = |what, virt| {
        mem.u64(virt)
            .map_err(|source| PrintkError::Read { what, source })
    };
    let pointer = |what, virt| word(what, virt).map(VirtAddr);
    // A size as a power of two: its 32-bit exponent, refused above `max`
    // before anything is walked by it.
    let bits = |what, virt, max| {
        let mut b = [0u8; 4];
        mem.read(virt, &mut b)
            .map_err(|source| PrintkError::Read { what, source })?;
        let value = u64::from(u32::from_le_bytes(b));
        if value > max {
            return Err(PrintkError::Implausible { what, value });
        }
        Ok(value)
    };
    // `prb` is a pointer to the ring in use (the static one, or the one
    // setup_log_buf() allocated for log_buf_len=).
    let ring = pointer("pointer `prb`", VirtAddr(info.symbol("prb")?))?;
    let desc_ring = ring + l.desc_ring;
    let count_bits = bits(
        "descriptor count bits",
        desc_ring + l.count_bits,
        MAX_COUNT_BITS,
    )?;
    let descs = pointer("descriptor array", desc_ring + l.descs)?;
    let infos = pointer("info array", desc_ring + l.infos)?;
    let head = word("head id", desc_ring + l.head_id + l.counter)?;
    let tail = word("tail id", desc_ring + l.tail_id + l.counter)?;
    let text_ring = ring + l.text_ring;
    let size_bits = bits(
        "data ring size bits",
        text_ring + l.size_bits,
        MAX_SIZE_BITS,
    )?;
    let data = pointer("data ring", text_ring + l.data)?;
    let failed = word("fail counter", ring + l.fail + l.counter)?;
    let count = 1u64 << count_bits;
    let size = 1u64 << size_bits;
    // The state word: the state in the top two bits, the id below.
    let id_mask = u64::MAX >> 2;
    let mut log = Log {
        failed,
        ..Log::default()
    };
    // From tail to head, both included; ids wrap within the mask.
    let mut ids = head.wrapping_sub(tail) & id_mask;
    let mut tail = tail;
    if ids >= count {
        // A damaged tail id: the ring holds at most `count` descriptors,
        // so the records there are among the last `count` ids up to the
        // head, each still checked against its descriptor as below.
        log.bad_tail = Some(tail);
        ids = count - 1;
        tail = head.wrapping_sub(ids) & id_mask;
    }
    // Newest first: where descriptors claim the same bytes (a damaged
    // ring), the older one is refused, so damage to an old descriptor
    // costs its own record, never the newer ones (the panic among them).
    // The records go back into the ring's order after.
    let mut taken = Taken::default();
    for n in (0..=ids).rev() {
        let id = tail.wrapping_add(n) & id_mask;
        let index = id & (count - 1);
        match record(mem, &l, (descs, infos, data, size), &mut taken, id, index) {
            Ok(Some(r)) => log.records.push(r),
            Ok(None) => log.skipped += 1,
            // Newest first: the last one kept is the oldest.
            Err(e) => {
                log.absent += 1;
                log.absent_at = Some(e);
            }
        }
    }
    log.records.reverse();
    Ok(log)
}

/// The bytes of the data ring the blocks read so far take, as ranges of
/// ring offsets by their start. The kernel gives each record a block of
/// its own, so intact blocks never share a byte: one that shares some
/// with a block taken is damage (or a block being overwritten), and
/// read, it would repeat its neighbours' bytes. Offsets, not logical
/// positions: writers on two CPUs may take ids and blocks in opposite
/// orders (`desc_reserve()` then `data_alloc()`, apart), and a damaged
/// position may be laps away. Blocks that share no byte fit in the ring,
/// which bounds the text kept to its size.
#[derive(Default)]
struct Taken(BTreeMap<u64, u64>);

impl Taken {
    /// Takes ring offsets `start..end` if no block taken shares a byte
    /// with them; whether it did.
    fn take(&mut self, start: u64, end: u64) -> bool {
        let before = self.0.range(..end).next_back();
        if before.is_some_and(|(_, &e)| e > start) {
            return false;
        }
        self.0.insert(start, end);
        true
    }
}

/// The record of descriptor `id` at `index`, if it holds that id, is
/// committed or finalized, its block shares no byte with those `taken`,
/// and its text reads back.
fn record(
    mem: &KernelMemory,
    l: &Layout,
    (descs, infos, data, size): (VirtAddr, VirtAddr, VirtAddr, u64),
    taken: &mut Taken,
    id: u64,
    index: u64,
) -> Result<Option<Record>, TranslateError> {
    let desc = descs + index.wrapping_mul(l.desc_size);
    let state_var = mem.u64(desc + l.state_var + l.counter)?;
    let state = state_var >> 62;
    if state_var & (u64::MAX >> 2) != id || !(state == DESC_COMMITTED || state == DESC_FINALIZED) {
        return Ok(None);
    }
    let begin = mem.u64(desc + l.text_blk + l.begin)?;
    let next = mem.u64(desc + l.text_blk + l.next)?;
    let info = infos + index.wrapping_mul(l.info_size);
    let mut head = [0u8; 32];
    // seq, ts_nsec, text_len, facility, flags:5 and level:3, as
    // struct printk_info lays them out: the bytes after text_len are
    // not in VMCOREINFO (makedumpfile reads them at the same place).
    let seq = mem.u64(info + l.seq)?;
    let ts_nsec = mem.u64(info + l.ts_nsec)?;
    mem.read(info + l.text_len, &mut head[..4])?;
    let text_len = u16::from_le_bytes([head[0], head[1]]);
    let facility = head[2];
    let (flags, level) = (head[3] & 0x1f, head[3] >> 5);
    let mut caller = [0u8; 4];
    mem.read(info + l.caller_id, &mut caller)?;
    // As get_data() reads a block: an empty record both positions
    // NO_LPOS; any other data-less one lost its text, and the kernel's
    // readers skip it as this one does.
    let dataless = (begin & LPOS_DATALESS, next & LPOS_DATALESS);
    let text = if (begin, next) == (NO_LPOS, NO_LPOS) {
        Vec::new()
    } else if dataless != (0, 0) {
        return Ok(None);
    } else {
        let Some(text) = block_text(mem, (data, size), taken, id, (begin, next), text_len)? else {
            return Ok(None);
        };
        text
    };
    let field = |off: u64, len: u64| -> Result<Vec<u8>, TranslateError> {
        let mut b = vec![0u8; len as usize];
        mem.read(info + off, &mut b)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        b.truncate(end);
        Ok(b)
    };
    Ok(Some(Record {
        seq,
        ts_nsec,
        level,
        facility,
        flags,
        caller_id: u32::from_le_bytes(caller),
        text,
        subsystem: field(l.subsystem, l.subsystem_len.min(64))?,
        device: field(l.device, l.device_len.min(64))?,
    }))
}

/// The text of descriptor `id`'s data block from `begin` to `next`
/// (logical positions) in the data ring at `data` of `size` bytes: after
/// the block's id word, at `begin`'s index, or at the ring's start when
/// the block wrapped (`get_data()` and `get_next_lpos()` in
/// printk_ringbuffer.c), at most `text_len` bytes. `None` when the
/// positions are not a block's, the block names another descriptor, or
/// it shares bytes with a block `taken`.
fn block_text(
    mem: &KernelMemory,
    (data, size): (VirtAddr, u64),
    taken: &mut Taken,
    id: u64,
    (begin, next): (u64, u64),
    text_len: u16,
) -> Result<Option<Vec<u8>>, TranslateError> {
    let wraps = |lpos: u64| lpos >> size.trailing_zeros();
    let index = |lpos: u64| lpos & (size - 1);
    let (start, end) = if wraps(begin) == wraps(next) && index(begin) < index(next) {
        (index(begin), index(next))
    } else if wraps(begin.wrapping_add(size)) == wraps(next) {
        // Wrapped: the block is stored whole at the ring's start. Its
        // begin is one lap behind, in wrapping arithmetic as the kernel
        // adds it: the first lap starts at BLK0_LPOS, -size, so a block
        // that wraps then has begin at the top wrap count and next at 0.
        (0, index(next))
    } else {
        return Ok(None);
    };
    // As get_data() checks a block: both positions aligned to its id
    // word, and room for that word.
    let id_word = 8;
    if begin % id_word != 0 || next % id_word != 0 {
        return Ok(None);
    }
    let Some(room) = end.checked_sub(start + id_word) else {
        return Ok(None);
    };
    // The block names its descriptor: one that names another was
    // reused for a newer record.
    if mem.u64(data + start)? != id || !taken.take(start, end) {
        return Ok(None);
    }
    // A text longer than its block is cut to the block, as the kernel's
    // own reader cuts it (copy_data()).
    let mut text = vec![0u8; room.min(u64::from(text_len)) as usize];
    mem.read(data + start + id_word, &mut text)?;
    Ok(Some(text))
}

/// The ring the tests read, shared with the integration tests and the
/// fuzz harness.
#[cfg(test)]
#[path = "../../tests/common/printk_ring.rs"]
mod printk_ring;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmem::testing::Ram;

    use super::printk_ring::{
        self, note as note_text, put, six_records, COUNT_BITS, DATA, DESCS, INFOS, RING,
    };

    fn note() -> VmcoreInfo {
        VmcoreInfo::parse(&note_text())
    }

    #[test]
    fn records_are_read_from_tail_to_head_and_the_unreadable_counted() {
        let ram = Ram::of(six_records());
        let wrapped = [b'w'; 30];
        let mem = KernelMemory::new(&ram, &note()).unwrap();
        let log = read(&mem, &note()).unwrap();
        let got: Vec<_> = log
            .records
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.ts_nsec,
                    r.level,
                    r.flags,
                    r.caller_id,
                    r.text.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1010, 10_000_000, 6, 2, 0x8000_0001, b"hello\0\0\0".to_vec()),
                (1011, 11_000_000, 6, 2, 77, wrapped.to_vec()),
                (1013, 13_000_000, 6, 2, 1, vec![]),
            ]
        );
        assert_eq!(log.records[2].subsystem, b"pci");
        assert_eq!(log.records[2].device, b"+pci:0000:00:02.0");
        assert_eq!((log.skipped, log.failed), (3, 5));
    }

    #[test]
    fn records_whose_text_the_dump_lacks_are_counted_apart_and_located() {
        let mut bytes = six_records();
        bytes.truncate(DATA as usize);
        let ram = Ram::of(bytes);
        let log = read(&KernelMemory::new(&ram, &note()).unwrap(), &note()).unwrap();
        // The one without text is read all the same.
        assert_eq!(log.records.len(), 1);
        assert_eq!((log.absent, log.skipped), (3, 2));
        let note = log.absent_note();
        assert!(
            note.starts_with("; 3 records not read from the dump (the oldest: ")
                && note.contains("is not in the dump"),
            "{note}"
        );
    }

    #[test]
    fn a_damaged_tail_id_costs_no_record_the_ring_holds() {
        let good = read(
            &KernelMemory::new(&Ram::of(six_records()), &note()).unwrap(),
            &note(),
        )
        .unwrap();
        assert_eq!(good.bad_tail, None);
        let mut bytes = six_records();
        let tail = 0x0003_dead_beef_u64;
        put(&mut bytes, RING + 32, &tail.to_le_bytes());
        let ram = Ram::of(bytes);
        let mem = KernelMemory::new(&ram, &note()).unwrap();
        let log = read(&mem, &note()).unwrap();
        assert_eq!(log.bad_tail, Some(tail));
        let seqs = |l: &Log| {
            l.records
                .iter()
                .map(|r| (r.seq, r.text.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(seqs(&log), seqs(&good));
        // The 8 ids back from the head: 8 and 9 no descriptor holds, and
        // the 3 unreadable between the tail and the head.
        assert_eq!((log.skipped, log.failed), (5, 5));
    }

    #[test]
    fn a_block_that_wraps_on_the_ring_s_first_lap_is_read() {
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 1, 1, 0);
        // BLK0_LPOS: the first lap's positions are -SIZE onwards.
        let blk0 = 0u64.wrapping_sub(printk_ring::SIZE);
        printk_ring::record(
            &mut bytes,
            1,
            printk_ring::FINALIZED,
            (blk0 + 480, 40),
            30,
            1,
        );
        printk_ring::block(&mut bytes, 0, 1, &[b'w'; 30]);
        let ram = Ram::of(bytes);
        let mem = KernelMemory::new(&ram, &note()).unwrap();
        let log = read(&mem, &note()).unwrap();
        assert_eq!(log.skipped, 0);
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.records[0].text, [b'w'; 30]);
    }

    #[test]
    fn text_past_the_data_ring_s_size_is_counted_not_kept() {
        // Eight descriptors whose blocks overlap, each starting 8 bytes
        // after the last and ending at the same place: 400 bytes of text
        // each, in a ring of 512.
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 0, 7, 0);
        let wrap = 2 * printk_ring::SIZE;
        for id in 0..8 {
            let lpos = (wrap + 8 * id, wrap + 504);
            printk_ring::record(&mut bytes, id, printk_ring::FINALIZED, lpos, 400, 1);
        }
        for id in 0..8 {
            printk_ring::block(&mut bytes, 8 * id, id, &[]);
        }
        let ram = Ram::of(bytes);
        let mem = KernelMemory::new(&ram, &note()).unwrap();
        let log = read(&mem, &note()).unwrap();
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.records[0].text.len(), 400);
        assert_eq!(log.skipped, 7);
    }

    /// The records of a ring from `mem`'s bytes, with their texts.
    fn texts(bytes: Vec<u8>) -> (Vec<(u64, Vec<u8>)>, u64) {
        let ram = Ram::of(bytes);
        let log = read(&KernelMemory::new(&ram, &note()).unwrap(), &note()).unwrap();
        let texts = log.records.iter().map(|r| (r.seq, r.text.clone()));
        (texts.collect(), log.skipped)
    }

    #[test]
    fn a_damaged_old_block_costs_its_own_record_only() {
        // Ids 0 to 7 with 40-byte texts in consecutive 48-byte blocks;
        // the oldest's descriptor then claims a block to the ring's end
        // and its info 400 bytes of text: its neighbours' bytes.
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 0, 7, 0);
        let lap = 2 * printk_ring::SIZE;
        for id in 0..8u64 {
            let lpos = (lap + 48 * id, lap + 48 * (id + 1));
            printk_ring::record(&mut bytes, id, printk_ring::FINALIZED, lpos, 40, 1);
            printk_ring::block(&mut bytes, 48 * id, id, &[b'a' + id as u8; 40]);
        }
        let claimed = (lap, lap + 504);
        printk_ring::record(&mut bytes, 0, printk_ring::FINALIZED, claimed, 400, 1);
        let intact: Vec<_> = (1..8u64)
            .map(|id| (1000 + id, vec![b'a' + id as u8; 40]))
            .collect();
        assert_eq!(texts(bytes), (intact, 1));
    }

    #[test]
    fn blocks_taken_in_the_other_order_than_their_ids_are_both_read() {
        // Two CPUs: id 0 reserved its descriptor first, id 1 its block.
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 0, 1, 0);
        let lap = 2 * printk_ring::SIZE;
        printk_ring::record(
            &mut bytes,
            0,
            printk_ring::FINALIZED,
            (lap + 48, lap + 96),
            4,
            1,
        );
        printk_ring::block(&mut bytes, 48, 0, b"zero");
        printk_ring::record(&mut bytes, 1, printk_ring::FINALIZED, (lap, lap + 48), 3, 1);
        printk_ring::block(&mut bytes, 0, 1, b"one");
        let both = vec![(1000, b"zero".to_vec()), (1001, b"one".to_vec())];
        assert_eq!(texts(bytes), (both, 0));
    }

    #[test]
    fn a_block_whose_positions_are_not_aligned_to_its_id_word_is_refused() {
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 0, 0, 0);
        let lap = 2 * printk_ring::SIZE;
        printk_ring::record(&mut bytes, 0, printk_ring::FINALIZED, (lap, lap + 20), 4, 1);
        printk_ring::block(&mut bytes, 0, 0, b"text");
        assert_eq!(texts(bytes), (Vec::new(), 1));
    }

    #[test]
    fn an_arm64_kernel_s_ring_is_read_through_its_image_and_linear_map() {
        let mut bytes = six_records();
        printk_ring::arm64::repoint(&mut bytes);
        let ram = Ram::of(bytes);
        let arm64 = VmcoreInfo::parse(&printk_ring::arm64::note());
        let mem = KernelMemory::new(&ram, &arm64).unwrap();
        let log = read(&mem, &arm64).unwrap();
        let x86 = read(
            &KernelMemory::new(&Ram::of(six_records()), &note()).unwrap(),
            &note(),
        )
        .unwrap();
        assert_eq!(log.records, x86.records);
        assert_eq!((log.skipped, log.failed), (3, 5));
        // The image starts at the note's _stext, rounded down to 2 MiB.
        assert_eq!(
            mem.u64(VirtAddr(printk_ring::arm64::IMAGE + printk_ring::PRB))
                .unwrap(),
            printk_ring::arm64::IMAGE + RING
        );
        assert!(mem
            .u64(VirtAddr(printk_ring::arm64::LINEAR + DESCS))
            .is_ok());
    }

    #[test]
    fn an_implausible_ring_is_refused_not_walked() {
        let mut bytes = printk_ring::mapped();
        printk_ring::ring(&mut bytes, 10, 15, 0);
        put(&mut bytes, RING, &40u32.to_le_bytes());
        let ram = Ram::of(bytes);
        let mem = KernelMemory::new(&ram, &note()).unwrap();
        let err = read(&mem, &note()).unwrap_err().to_string();
        assert_eq!(
            err,
            "the printk ring's descriptor count bits is 40, which no kernel writes"
        );
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// Any damage to the ring's ids, arrays and data (pointers,
        /// states, positions, lengths) gives records or an error, never a
        /// panic, and never more records than descriptors.
        #[test]
        fn damage_never_panics(
            writes in proptest::collection::vec(
                (
                    // The ring's words but its count and size bits
                    // (capped, and refused before any walk: their own
                    // test), the descriptors, the infos, the data.
                    proptest::prop_oneof![
                        (1u64..11)
                            .prop_filter("size bits", |&i| i != 6)
                            .prop_map(|i| RING + 8 * i),
                        (0u64..24).prop_map(|i| DESCS + 8 * i),
                        (0u64..88).prop_map(|i| INFOS + 8 * i),
                        (0u64..64).prop_map(|i| DATA + 8 * i),
                    ],
                    proptest::prop_oneof![
                        proptest::num::u64::ANY,
                        // Pointers and positions at the top of the space
                        // (where sums wrap), small ones, ids with a state.
                        (0u64..64).prop_map(|d| u64::MAX - d),
                        0u64..4096,
                        (0u64..64).prop_map(|id| 2 << 62 | id),
                    ],
                ),
                1..12,
            )
        ) {
            let mut bytes = six_records();
            for (at, value) in writes {
                put(&mut bytes, at, &value.to_le_bytes());
            }
            let ram = Ram::of(bytes);
            let mem = KernelMemory::new(&ram, &note()).unwrap();
            if let Ok(log) = read(&mem, &note()) {
                proptest::prop_assert!(log.records.len() as u64 + log.skipped <= 1 << COUNT_BITS);
            }
        }
    }
}
