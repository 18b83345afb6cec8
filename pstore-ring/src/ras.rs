//! Hardware-error events (`mce`, `memory_failure`, `aer`, `hw_error`)
//! described in words, the way mcelog, rasdaemon and the kernel's own trace output
//! name them: "machine check, bank 4, addr 0x1234000, uncorrected,
//! processor context corrupt".
//!
//! Fields are found by name in the event's type, as the region's schema
//! table describes it, so a writer that adds fields or orders them
//! differently is still read right; an event that lacks a field the
//! description needs gets none.

use crate::endian::Endian;
use crate::read::{EventType, PagedTrace, Region};
use crate::schema::{
    Value, EVENT_AER, EVENT_HW_ERROR, EVENT_MCE, EVENT_MEMORY_FAILURE, HW_ERROR_ARM, HW_ERROR_EDAC,
    HW_ERROR_EXTLOG, HW_ERROR_NON_STANDARD, MCE_FROM_PANIC,
};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// `MCi_STATUS` bits (Intel SDM vol. 3B, 16.3.2.2; AMD APM vol. 2, 9.3.2.2):
/// the architectural flags, by name, highest first.
pub const MCI_STATUS_FLAGS: [(u32, &str); 9] = [
    (63, "VAL"),
    (62, "OVER"),
    (61, "UC"),
    (60, "EN"),
    (59, "MISCV"),
    (58, "ADDRV"),
    (57, "PCC"),
    (56, "S"),
    (55, "AR"),
];

/// AMD's deferred-error bit: uncorrected, but not yet consumed.
const MCI_STATUS_DEFERRED: u32 = 44;

/// A bank's `MCi_STATUS` register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McStatus(pub u64);

impl McStatus {
    fn bit(self, n: u32) -> bool {
        self.0 >> n & 1 == 1
    }

    pub fn valid(self) -> bool {
        self.bit(63)
    }

    pub fn uncorrected(self) -> bool {
        self.bit(61)
    }

    pub fn addr_valid(self) -> bool {
        self.bit(58)
    }

    pub fn context_corrupt(self) -> bool {
        self.bit(57)
    }

    /// The architectural error code, bits 15:0.
    pub fn mcacod(self) -> u16 {
        self.0 as u16
    }

    /// The model-specific error code, bits 31:16.
    pub fn mscod(self) -> u16 {
        (self.0 >> 16) as u16
    }

    /// The names of the set flags, `VAL OVER UC ...`.
    pub fn flags(self) -> impl Iterator<Item = &'static str> {
        MCI_STATUS_FLAGS
            .into_iter()
            .filter(move |&(bit, _)| self.bit(bit))
            .map(|(_, name)| name)
    }

    /// What the error means for the machine, most important first:
    /// `uncorrected, processor context corrupt`, `corrected, overflow`.
    /// The classes are the SDM's (UC and PCC; S and AR for the
    /// recoverable SRAR, SRAO and UCNA errors).
    pub fn class(self) -> Vec<&'static str> {
        let mut words = Vec::new();
        if !self.uncorrected() {
            words.push(if self.bit(MCI_STATUS_DEFERRED) {
                "deferred"
            } else {
                "corrected"
            });
        } else {
            words.push("uncorrected");
            words.push(if self.context_corrupt() {
                "processor context corrupt"
            } else if self.bit(56) && self.bit(55) {
                "action required"
            } else if self.bit(56) {
                "action optional"
            } else {
                "no action required"
            });
        }
        if self.bit(62) {
            words.push("overflow");
        }
        if !self.bit(60) {
            words.push("reporting disabled");
        }
        words
    }
}

const LEVELS: [&str; 4] = ["L0", "L1", "L2", "generic level"];
const TRANSACTIONS: [&str; 4] = ["instruction", "data", "generic", "reserved"];
/// Memory hierarchy requests (RRRR), SDM table 16-11.
const REQUESTS: [&str; 9] = [
    "generic",
    "read",
    "write",
    "data read",
    "data write",
    "instruction fetch",
    "prefetch",
    "eviction",
    "snoop",
];
/// Memory controller transactions (MMM), SDM table 16-12.
const MEMORY_TRANSACTIONS: [&str; 5] = ["generic", "read", "write", "address/command", "scrubbing"];
const PARTICIPATIONS: [&str; 4] = [
    "local processor originated",
    "local processor responded",
    "local processor observed",
    "generic",
];
const BUS_MEMORY: [&str; 4] = ["memory", "reserved", "I/O", "other"];

/// The architectural error code in words, as the SDM's simple and
/// compound error codes (tables 16-9 to 16-12) and mcelog name it.
pub fn mcacod_name(code: u16) -> String {
    let simple = match code {
        0x0000 => Some("no error"),
        0x0001 => Some("unclassified"),
        0x0002 => Some("microcode ROM parity error"),
        0x0003 => Some("external error"),
        0x0004 => Some("FRC error"),
        0x0005 => Some("internal parity error"),
        0x0006 => Some("SMM handler code access violation"),
        0x0400 => Some("internal timer error"),
        0x0e0b => Some("I/O error"),
        _ => None,
    };
    if let Some(s) = simple {
        return s.into();
    }
    let field = |shift: u32, bits: u32| usize::from(code >> shift) & ((1 << bits) - 1);
    let ll = LEVELS[field(0, 2)];
    let filtered = if code & 0x1000 != 0 {
        ", corrections filtered"
    } else {
        ""
    };
    let text = if code & 0xfc00 == 0x0400 {
        "internal unclassified error".into()
    } else if code & 0xeffc == 0x000c {
        format!("generic cache hierarchy error, {ll}")
    } else if code & 0xeff0 == 0x0010 {
        format!("{} TLB error, {ll}", TRANSACTIONS[field(2, 2)])
    } else if code & 0xef80 == 0x0080 {
        let mmm = MEMORY_TRANSACTIONS.get(field(4, 3)).unwrap_or(&"reserved");
        format!(
            "memory controller {mmm} error, channel {}",
            match field(0, 4) {
                0xf => "unspecified".into(),
                c => format!("{c}"),
            }
        )
    } else if code & 0xef00 == 0x0100 {
        let rrrr = REQUESTS.get(field(4, 4)).unwrap_or(&"reserved");
        format!("{} cache {rrrr} error, {ll}", TRANSACTIONS[field(2, 2)])
    } else if code & 0xe800 == 0x0800 {
        let rrrr = REQUESTS.get(field(4, 4)).unwrap_or(&"reserved");
        let timeout = if code & 0x0100 != 0 {
            ", timed out"
        } else {
            ""
        };
        format!(
            "bus/interconnect {rrrr} error, {}, {}{timeout}, {ll}",
            PARTICIPATIONS[field(9, 2)],
            BUS_MEMORY[field(2, 2)]
        )
    } else {
        "model-specific error code".into()
    };
    format!("{text}{filtered}")
}

/// An event's fields by name, `None` when the payload does not decode.
fn named<'t, 'p>(t: &'t EventType, payload: &'p [u8], e: Endian) -> Option<Named<'t, 'p>> {
    let values = t.decode(payload, e).ok()?;
    Some(Named { t, values })
}

struct Named<'t, 'p> {
    t: &'t EventType,
    values: Vec<Value<'p>>,
}

impl<'p> Named<'_, 'p> {
    fn get(&self, name: &str) -> Option<Value<'p>> {
        let i = self.t.fields.iter().position(|f| f.name == name)?;
        self.values.get(i).copied()
    }

    fn uint(&self, name: &str) -> Option<u64> {
        match self.get(name)? {
            Value::Unsigned(x) | Value::Ptr(x) => Some(x),
            _ => None,
        }
    }

    fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Signed(x) => Some(x),
            _ => None,
        }
    }

    fn text(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::Str(s) | Value::Chars(s) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    fn bytes(&self, name: &str) -> Option<&'p [u8]> {
        match self.get(name)? {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// An EDAC error type (the kernel's `enum hw_event_mc_err_type`).
pub fn edac_severity(err_type: u64) -> &'static str {
    match err_type {
        0 => "corrected",
        1 => "uncorrected",
        2 => "deferred",
        3 => "fatal",
        4 => "info",
        _ => "unknown severity",
    }
}

/// A CPER severity (UEFI N.2.1), as the kernel's cper_severity_str().
pub fn cper_severity(sev: u64) -> &'static str {
    match sev {
        0 => "recoverable",
        1 => "fatal",
        2 => "corrected",
        3 => "informational",
        _ => "unknown severity",
    }
}

/// A GUID of 16 bytes as a CPER record stores it (the first three fields
/// little-endian), in UEFI's text form; `None` for another length.
pub fn guid_text(b: &[u8]) -> Option<String> {
    let b: &[u8; 16] = b.try_into().ok()?;
    Some(format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_le_bytes([b[4], b[5]]),
        u16::from_le_bytes([b[6], b[7]]),
        b[8],
        b[9],
        b[10],
        b[11],
        b[12],
        b[13],
        b[14],
        b[15]
    ))
}

/// The label, when there is one, as ", LABEL_WORD TEXT".
fn labelled(word: &str, text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(", {word} {text}")
    }
}

/// A `hw_error` event in words, by its source.
fn describe_hw_error(f: &Named) -> Option<String> {
    let severity = f.uint("severity")?;
    let label = f.text("label")?;
    Some(match u8::try_from(f.uint("source")?).ok()? {
        HW_ERROR_EDAC => {
            let layers = f.uint("layers")? as u32;
            let layer = |shift: u32| match (layers >> shift) as u8 {
                0xff => String::from("-"),
                n => format!("{n}"),
            };
            let message = f.text("message")?;
            format!(
                "EDAC memory error, {}, {} error{} on memory controller {}, location {}:{}:{}, address {:#x} (grain {} bytes), syndrome {:#x}{}{}",
                edac_severity(severity),
                f.uint("count")?,
                if f.uint("count")? == 1 { "" } else { "s" },
                layers >> 24,
                layer(16),
                layer(8),
                layer(0),
                f.uint("address")?,
                1u64.checked_shl(f.uint("grain")? as u32).unwrap_or(0),
                f.uint("syndrome")?,
                labelled("label", &label),
                if message.is_empty() { String::new() } else { format!(": {message}") }
            )
        }
        HW_ERROR_NON_STANDARD => format!(
            "firmware error record, {}, section type {}, {} bytes{}",
            cper_severity(severity),
            guid_text(f.bytes("section")?).unwrap_or_else(|| "unknown".into()),
            f.bytes("data")?.len(),
            labelled("FRU", &label)
        ),
        HW_ERROR_ARM => format!(
            "ARM processor error, {}, cpu {}, MPIDR {:#x}, MIDR {:#x}, {} bytes",
            if severity == 255 {
                "severity not given"
            } else {
                cper_severity(severity)
            },
            match f.int("cpu")? {
                -1 => String::from("not given"),
                cpu => format!("{cpu}"),
            },
            f.uint("address")?,
            f.uint("syndrome")?,
            f.bytes("data")?.len()
        ),
        HW_ERROR_EXTLOG => format!(
            "extended error log memory error, {}, physical address {:#x}, sequence {}{}",
            cper_severity(severity),
            f.uint("address")?,
            f.uint("sequence")?,
            labelled("FRU", &label)
        ),
        _ => return None,
    })
}

/// A machine check in words: `machine check, bank 4, addr 0x1234000,
/// uncorrected, processor context corrupt (VAL UC EN ADDRV PCC; MCACOD
/// 0x0400 internal timer error, MSCOD 0x0000)`.
pub fn describe_mce(bank: u64, status: McStatus, addr: u64) -> String {
    let mut s = format!("machine check, bank {bank}");
    if status.addr_valid() {
        s += &format!(", addr {addr:#x}");
    }
    for word in status.class() {
        s += ", ";
        s += word;
    }
    let flags: Vec<&str> = status.flags().collect();
    s += &format!(
        " (status {:#018x}: {}; MCACOD {:#06x} {}, MSCOD {:#06x})",
        status.0,
        flags.join(" "),
        status.mcacod(),
        mcacod_name(status.mcacod()),
        status.mscod()
    );
    s
}

/// The kernel's `memory_failure` results (its `enum mf_result`).
pub fn memory_failure_result(result: u64) -> &'static str {
    match result {
        0 => "ignored",
        1 => "failed",
        2 => "delayed",
        3 => "recovered",
        _ => "unknown result",
    }
}

/// The kernel's AER severities (`AER_NONFATAL`, `AER_FATAL`,
/// `AER_CORRECTABLE`), as its `aer_event` prints them.
pub fn aer_severity(severity: u64) -> &'static str {
    match severity {
        0 => "uncorrected (non-fatal)",
        1 => "uncorrected (fatal)",
        2 => "corrected",
        _ => "unknown severity",
    }
}

/// The AER status register's errors, as the kernel's `aer_event` names
/// them: the Correctable Error Status bits for a corrected error, the
/// Uncorrectable Error Status bits otherwise (PCIe base spec, 7.8.4).
pub fn aer_errors(status: u32, corrected: bool) -> Vec<&'static str> {
    const CORRECTABLE: &[(u32, &str)] = &[
        (0, "Receiver Error"),
        (6, "Bad TLP"),
        (7, "Bad DLLP"),
        (8, "RELAY_NUM Rollover"),
        (12, "Replay Timer Timeout"),
        (13, "Advisory Non-Fatal Error"),
        (14, "Corrected Internal Error"),
        (15, "Header Log Overflow"),
    ];
    const UNCORRECTABLE: &[(u32, &str)] = &[
        (0, "Undefined"),
        (4, "Data Link Protocol Error"),
        (5, "Surprise Down Error"),
        (12, "Poisoned TLP"),
        (13, "Flow Control Protocol Error"),
        (14, "Completion Timeout"),
        (15, "Completer Abort"),
        (16, "Unexpected Completion"),
        (17, "Receiver Overflow"),
        (18, "Malformed TLP"),
        (19, "ECRC Error"),
        (20, "Unsupported Request Error"),
        (21, "ACS Violation"),
        (22, "Uncorrectable Internal Error"),
        (23, "MC Blocked TLP"),
        (24, "AtomicOp Egress Blocked"),
        (25, "TLP Prefix Blocked Error"),
        (26, "Poisoned TLP Egress Blocked"),
    ];
    let table = if corrected {
        CORRECTABLE
    } else {
        UNCORRECTABLE
    };
    table
        .iter()
        .filter(|&&(bit, _)| status >> bit & 1 == 1)
        .map(|&(_, name)| name)
        .collect()
}

/// A hardware-error event in words, or `None` for any other event (or
/// one whose payload does not decode, or that lacks what its words need).
pub fn describe(t: &EventType, payload: &[u8], e: Endian) -> Option<String> {
    if !matches!(
        t.id,
        EVENT_MCE | EVENT_MEMORY_FAILURE | EVENT_AER | EVENT_HW_ERROR
    ) {
        return None;
    }
    let f = named(t, payload, e)?;
    Some(match t.id {
        EVENT_HW_ERROR => return describe_hw_error(&f),
        EVENT_MCE => {
            let mut s = describe_mce(
                f.uint("bank")?,
                McStatus(f.uint("status")?),
                f.uint("addr")?,
            );
            if f.uint("origin") == Some(MCE_FROM_PANIC.into()) {
                s += ", read by the panic path";
            }
            s
        }
        EVENT_MEMORY_FAILURE => format!(
            "memory failure, pfn {:#x}, {}, {}",
            f.uint("pfn")?,
            f.text("page")?,
            memory_failure_result(f.uint("result")?)
        ),
        _ => {
            let severity = f.uint("severity")?;
            let status = f.uint("status")? as u32;
            let errors = aer_errors(status, severity == 2);
            format!(
                "PCIe AER error, {}, {}, status {status:#010x} ({})",
                f.text("device")?,
                aer_severity(severity),
                if errors.is_empty() {
                    "no error bit set".into()
                } else {
                    errors.join(", ")
                }
            )
        }
    })
}

/// The hardware error that brought the kernel down, in words: a machine
/// check ([`fatal_machine_check`]) or a memory failure the kernel
/// panicked on ([`fatal_memory_failure`]); `None` for any other crash.
pub fn fatal_hardware_error(region: &Region<'_>, trace: &PagedTrace<'_>) -> Option<String> {
    fatal_machine_check(region, trace).or_else(|| fatal_memory_failure(region))
}

/// The panic message of `memory_failure()` (mm/memory-failure.c) when
/// `vm.memory_failure_recovery` is 0.
const MEMORY_FAILURE_PANIC: &str = "Memory failure on page ";

/// A memory failure the kernel panicked on, in words, from the crash's
/// message: `memory_failure()` panics as its first statement when
/// `vm.memory_failure_recovery` is 0, before it looks at the page and
/// before `action_result()` fires the `memory_failure_event` tracepoint
/// (the same on every kernel from 4.x to 7.x), so the page frame number
/// in `panic("Memory failure on page %lx", pfn)` is all there is of it.
/// 35 bytes of message hold the 10 hex digits of any pfn of a 52-bit
/// physical address space.
pub fn fatal_memory_failure(region: &Region<'_>) -> Option<String> {
    let state = region.state.as_ref().ok().filter(|s| s.is_crash())?;
    let pfn = state.message.strip_prefix(MEMORY_FAILURE_PANIC)?;
    let pfn = u64::from_str_radix(pfn.trim_end(), 16).ok()?;
    Some(format!(
        "memory failure, pfn {pfn:#x}, fatal: vm.memory_failure_recovery is 0, so the kernel \
         panicked before it examined the page"
    ))
}

/// The machine check that brought the kernel down, in words: the banks
/// the panic path read (`mce` events of origin [`MCE_FROM_PANIC`]) on
/// the crashing CPU, joined by `; `; `None` for any other crash. The
/// panic path writes them at the crash's time, just before the crash
/// record, so only the pages from that time on are walked.
pub fn fatal_machine_check(region: &Region<'_>, trace: &PagedTrace<'_>) -> Option<String> {
    let state = region.state.as_ref().ok().filter(|s| s.is_crash())?;
    let t = region.schema.get(EVENT_MCE)?;
    let e = region.header.endian;
    let words: Vec<String> = trace
        .streams
        .iter()
        .filter(|s| s.info.is_kernel() && u32::from(s.info.cpu) == state.crash_cpu)
        .flat_map(|s| {
            let first = s.decoded.partition_point(|p| p.last_ts < state.crash_ns);
            s.events_from(first.saturating_sub(1))
        })
        .filter(|ev| ev.type_id == EVENT_MCE)
        .filter(|ev| {
            named(t, ev.payload, e).and_then(|f| f.uint("origin")) == Some(MCE_FROM_PANIC.into())
        })
        .filter_map(|ev| describe(t, ev.payload, e))
        .collect();
    (!words.is_empty()).then(|| words.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fatal_machine_check_is_named_as_mcelog_names_it() {
        // QEMU's and the kernel's mce-inject example: an uncorrected
        // internal timer error with processor context corrupt.
        let s = describe_mce(4, McStatus(0xbe00_0000_0000_0400), 0x1234000);
        assert_eq!(
            s,
            "machine check, bank 4, addr 0x1234000, uncorrected, processor context corrupt \
             (status 0xbe00000000000400: VAL UC EN MISCV ADDRV PCC; MCACOD 0x0400 internal timer \
             error, MSCOD 0x0000)"
        );
    }

    #[test]
    fn recoverable_and_corrected_classes() {
        let srar = McStatus(1 << 63 | 1 << 61 | 1 << 60 | 1 << 56 | 1 << 55);
        assert_eq!(srar.class(), ["uncorrected", "action required"]);
        let srao = McStatus(1 << 63 | 1 << 61 | 1 << 60 | 1 << 56);
        assert_eq!(srao.class(), ["uncorrected", "action optional"]);
        let ucna = McStatus(1 << 63 | 1 << 61 | 1 << 60);
        assert_eq!(ucna.class(), ["uncorrected", "no action required"]);
        let ce = McStatus(1 << 63 | 1 << 62 | 1 << 60 | 0x9f);
        assert_eq!(ce.class(), ["corrected", "overflow"]);
        let deferred = McStatus(1 << 63 | 1 << 44);
        assert_eq!(deferred.class(), ["deferred", "reporting disabled"]);
        assert!(!McStatus(0x9f).valid());
    }

    #[test]
    fn compound_error_codes() {
        assert_eq!(
            mcacod_name(0x000f),
            "generic cache hierarchy error, generic level"
        );
        assert_eq!(mcacod_name(0x0015), "data TLB error, L1");
        assert_eq!(
            mcacod_name(0x009f),
            "memory controller read error, channel unspecified"
        );
        assert_eq!(
            mcacod_name(0x00a2),
            "memory controller write error, channel 2"
        );
        assert_eq!(mcacod_name(0x0115), "data cache read error, L1");
        assert_eq!(
            mcacod_name(0x1135),
            "data cache data read error, L1, corrections filtered"
        );
        assert_eq!(
            mcacod_name(0x0e0f),
            "bus/interconnect generic error, generic, other, generic level"
        );
        assert_eq!(
            mcacod_name(0x0f0f),
            "bus/interconnect generic error, generic, other, timed out, generic level"
        );
        assert_eq!(mcacod_name(0x0e0b), "I/O error");
        assert_eq!(mcacod_name(0x0405), "internal unclassified error");
        assert_eq!(mcacod_name(0x2000), "model-specific error code");
    }

    /// Encodes `values` as built-in event `id` and describes it, in both
    /// byte orders (which must agree).
    fn described(id: u8, values: &[Value<'_>]) -> Option<String> {
        let def = crate::schema::builtin(id).unwrap();
        let t = crate::read::Schema::builtin().get(id).unwrap().clone();
        let mut words = [Endian::Little, Endian::Big].map(|e| {
            let mut buf = [0u8; 512];
            let n = crate::schema::encode_payload(def, values, e, &mut buf).unwrap();
            describe(&t, &buf[..n], e)
        });
        assert_eq!(words[0], words[1]);
        words[0].take()
    }

    #[test]
    fn events_are_described_from_their_fields_by_name() {
        let u = Value::Unsigned;
        let mut mce = [u(0); 21];
        mce[0] = u(MCE_FROM_PANIC.into());
        mce[1] = u(4);
        mce[5] = u(0xbe00_0000_0000_0400);
        mce[6] = u(0x1234000);
        assert_eq!(
            described(EVENT_MCE, &mce).unwrap(),
            "machine check, bank 4, addr 0x1234000, uncorrected, processor context corrupt \
             (status 0xbe00000000000400: VAL UC EN MISCV ADDRV PCC; MCACOD 0x0400 internal timer \
             error, MSCOD 0x0000), read by the panic path"
        );
        let mf = [u(0x10000), u(16), u(3), Value::Str(b"free buddy page")];
        assert_eq!(
            described(EVENT_MEMORY_FAILURE, &mf).unwrap(),
            "memory failure, pfn 0x10000, free buddy page, recovered"
        );
        let aer = [
            u(0x41),
            u(2),
            u(0),
            Value::Str(b"0000:00:1c.0"),
            Value::Bytes(b""),
        ];
        assert_eq!(
            described(EVENT_AER, &aer).unwrap(),
            "PCIe AER error, 0000:00:1c.0, corrected, status 0x00000041 (Receiver Error, Bad TLP)"
        );
        let lost = [u(3)];
        assert_eq!(described(crate::schema::EVENT_LOST, &lost), None);
    }

    /// A `hw_error` event of `source` with the fields in schema order.
    #[allow(clippy::too_many_arguments)]
    fn hw_error(
        source: u8,
        severity: u64,
        count: u64,
        cpu: i64,
        layers: u64,
        address: u64,
        syndrome: u64,
        section: &'static [u8],
        label: &'static [u8],
        message: &'static [u8],
    ) -> Option<String> {
        let u = Value::Unsigned;
        let values = [
            u(source.into()),
            u(severity),
            u(12),
            u(count),
            Value::Signed(cpu),
            u(layers),
            u(7),
            u(address),
            u(syndrome),
            Value::Bytes(section),
            Value::Bytes(b""),
            Value::Str(label),
            Value::Str(message),
            Value::Bytes(b"\x01\x02\x03"),
        ];
        described(EVENT_HW_ERROR, &values)
    }

    #[test]
    fn each_source_of_hw_error_in_words() {
        const MEMORY: &[u8] = &[
            0x14, 0x11, 0xbc, 0xa5, 0x64, 0x6f, 0xde, 0x4e, 0xb8, 0x63, 0x3e, 0x83, 0xed, 0x7c,
            0x83, 0xb1,
        ];
        let layers = 0x0001_02ff;
        assert_eq!(
            hw_error(HW_ERROR_EDAC, 0, 1, -1, layers, 0x1234_5000, 0x55, b"", b"DIMM_A1", b"read error; ch1").unwrap(),
            "EDAC memory error, corrected, 1 error on memory controller 0, location 1:2:-, address 0x12345000 (grain 4096 bytes), syndrome 0x55, label DIMM_A1: read error; ch1"
        );
        assert_eq!(
            hw_error(HW_ERROR_NON_STANDARD, 1, 1, -1, 0, 0, 0, MEMORY, b"CPU 0", b"").unwrap(),
            "firmware error record, fatal, section type a5bc1114-6f64-4ede-b863-3e83ed7c83b1, 3 bytes, FRU CPU 0"
        );
        assert_eq!(
            hw_error(HW_ERROR_ARM, 255, 1, -1, 0, 0x8000_0001, 0x410f_d034, b"", b"", b"").unwrap(),
            "ARM processor error, severity not given, cpu not given, MPIDR 0x80000001, MIDR 0x410fd034, 3 bytes"
        );
        assert_eq!(
            hw_error(HW_ERROR_EXTLOG, 2, 1, -1, 0, 0x7654_3000, 0, b"", b"DIMM B2", b"").unwrap(),
            "extended error log memory error, corrected, physical address 0x76543000, sequence 7, FRU DIMM B2"
        );
        // A source no reader knows yet: no words, the fields still print.
        assert_eq!(hw_error(9, 0, 1, -1, 0, 0, 0, b"", b"", b""), None);
    }

    #[test]
    fn the_fatal_machine_check_is_the_crashing_cpus_banks_read_at_the_crash() {
        use crate::layout::{REASON_PANIC, STATE_CRASHED};
        use crate::read::HeaderTrust;
        use crate::schema::{builtin, EVENT_CRASH};
        use crate::write::{format, RegionConfig, StreamSpec};
        let specs = [StreamSpec::cpu(0), StreamSpec::cpu(1)];
        let cfg = RegionConfig {
            page_size: 1024,
            streams: &specs,
            ..Default::default()
        };
        let mut mem = alloc::vec![0u8; 64 * 1024];
        let (mce, crash) = (builtin(EVENT_MCE).unwrap(), builtin(EVENT_CRASH).unwrap());
        let bank = |origin: u8, bank: u64, status: u64| {
            let mut v = [Value::Unsigned(0); 21];
            v[0] = Value::Unsigned(origin.into());
            v[1] = Value::Unsigned(bank);
            v[5] = Value::Unsigned(status);
            v
        };
        let fatal = 0xb200_0000_0000_0400;
        let write = |mem: &mut [u8], crashed: bool| {
            let mut f = format(mem, &cfg).unwrap();
            let mut ws: Vec<_> = f.streams.by_ref().collect();
            // Another CPU's banks, and this CPU's corrected error before.
            ws[0]
                .write_event(900, mce, &bank(MCE_FROM_PANIC, 2, fatal))
                .unwrap();
            ws[1]
                .write_event(100, mce, &bank(0, 1, 0x9000_0000_0000_0005))
                .unwrap();
            for i in 0..40 {
                ws[1]
                    .write_event(
                        200 + i,
                        crate::schema::builtin(crate::schema::EVENT_LOST).unwrap(),
                        &[Value::Unsigned(i)],
                    )
                    .unwrap();
            }
            if crashed {
                ws[1]
                    .write_event(5000, mce, &bank(MCE_FROM_PANIC, 4, fatal))
                    .unwrap();
                ws[1]
                    .write_event(5000, mce, &bank(MCE_FROM_PANIC, 5, fatal))
                    .unwrap();
            }
            let why = [
                Value::Unsigned(REASON_PANIC.into()),
                Value::Unsigned(1),
                Value::Str(b"Fatal machine check"),
            ];
            ws[1].write_event(5000, crash, &why).unwrap();
            drop(ws);
            f.control
                .set_state(STATE_CRASHED, REASON_PANIC, 5000, 1, "Fatal machine check");
        };
        write(&mut mem, true);
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let words = fatal_machine_check(&region, &region.decode_paged()).unwrap();
        assert_eq!(
            words,
            "machine check, bank 4, uncorrected, processor context corrupt (status \
             0xb200000000000400: VAL UC EN PCC; MCACOD 0x0400 internal timer error, MSCOD \
             0x0000), read by the panic path; machine check, bank 5, uncorrected, processor \
             context corrupt (status 0xb200000000000400: VAL UC EN PCC; MCACOD 0x0400 internal \
             timer error, MSCOD 0x0000), read by the panic path"
        );
        let mut plain = alloc::vec![0u8; 64 * 1024];
        write(&mut plain, false);
        let region = Region::parse(&plain, HeaderTrust::Checksummed).unwrap();
        assert_eq!(fatal_machine_check(&region, &region.decode_paged()), None);
        assert_eq!(fatal_hardware_error(&region, &region.decode_paged()), None);
    }

    /// A crash record whose message is `memory_failure()`'s panic.
    fn crashed_with(message: &str) -> alloc::vec::Vec<u8> {
        use crate::layout::{REASON_PANIC, STATE_CRASHED};
        use crate::write::{format, RegionConfig, StreamSpec};
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: 1024,
            streams: &specs,
            ..Default::default()
        };
        let mut mem = alloc::vec![0u8; 16 * 1024];
        format(&mut mem, &cfg).unwrap().control.set_state(
            STATE_CRASHED,
            REASON_PANIC,
            5000,
            0,
            message,
        );
        mem
    }

    #[test]
    fn a_memory_failure_the_kernel_panicked_on_is_named_by_its_page() {
        use crate::read::HeaderTrust;
        let mem = crashed_with("Memory failure on page 30000");
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert_eq!(
            fatal_hardware_error(&region, &region.decode_paged()).unwrap(),
            "memory failure, pfn 0x30000, fatal: vm.memory_failure_recovery is 0, so the kernel \
             panicked before it examined the page"
        );
        // The largest pfn of a 52-bit space fits the state block's message.
        let mem = crashed_with("Memory failure on page ffffffffff");
        let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        assert!(fatal_memory_failure(&region)
            .unwrap()
            .starts_with("memory failure, pfn 0xffffffffff,"));
        for other in ["Memory failure on page xyz", "sysrq triggered crash"] {
            let mem = crashed_with(other);
            let region = Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            assert_eq!(fatal_memory_failure(&region), None, "{other}");
        }
    }

    proptest::proptest! {
        /// Whatever a hostile writer put in a hardware-error event, its
        /// words come back without a panic: decoded as far as its fields
        /// go, and every machine check names its bank and error code.
        #[test]
        fn any_payload_or_status_is_described_without_panic(
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            status in proptest::prelude::any::<u64>(),
            bank in proptest::prelude::any::<u64>(),
        ) {
            let schema = crate::read::Schema::builtin();
            for id in [EVENT_MCE, EVENT_MEMORY_FAILURE, EVENT_AER] {
                let t = schema.get(id).unwrap();
                for e in [Endian::Little, Endian::Big] {
                    let _ = describe(t, &payload, e);
                }
            }
            let words = describe_mce(bank, McStatus(status), 0);
            let bank_words = alloc::format!("machine check, bank {bank}");
            let code = alloc::format!("MCACOD {:#06x}", status as u16);
            proptest::prop_assert!(words.starts_with(&bank_words));
            proptest::prop_assert!(words.contains(&code));
        }
    }

    #[test]
    fn a_payload_that_does_not_decode_is_not_described() {
        let t = crate::read::Schema::builtin()
            .get(EVENT_MCE)
            .unwrap()
            .clone();
        assert_eq!(describe(&t, &[0u8; 20], Endian::Little), None);
    }

    #[test]
    fn aer_status_bits_by_severity() {
        assert_eq!(aer_errors(0x41, true), ["Receiver Error", "Bad TLP"]);
        assert_eq!(
            aer_errors(1 << 14 | 1 << 18, false),
            ["Completion Timeout", "Malformed TLP"]
        );
        assert_eq!(aer_severity(1), "uncorrected (fatal)");
        assert_eq!(memory_failure_result(3), "recovered");
    }
}
