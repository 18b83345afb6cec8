//! Event schemas: the built-in event types, the encoding of the schema table
//! a region carries, and decoding a record's payload into named fields.
//!
//! A region describes every event type it may contain, so a reader decodes
//! records with no kernel image and no debuginfo. The reader also knows the
//! built-in types itself, which lets it decode them when a region's table is
//! damaged.

use crate::endian::{Endian, U16, U32};
use crate::layout::*;
use zerocopy::IntoBytes;

/// How a field is stored in a record payload. Fields are packed one after
/// another with no alignment; integers use the region's byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    /// A kernel address; printed in hex.
    Ptr,
    /// A NUL-padded character array of this many bytes.
    Chars(u16),
    /// A `u16` length, then that many bytes of text.
    Str,
    /// A `u16` length, then that many bytes of binary data.
    Bytes,
}

impl FieldKind {
    pub fn code(self) -> u8 {
        match self {
            FieldKind::U8 => FIELD_U8,
            FieldKind::U16 => FIELD_U16,
            FieldKind::U32 => FIELD_U32,
            FieldKind::U64 => FIELD_U64,
            FieldKind::I8 => FIELD_I8,
            FieldKind::I16 => FIELD_I16,
            FieldKind::I32 => FIELD_I32,
            FieldKind::I64 => FIELD_I64,
            FieldKind::Ptr => FIELD_PTR,
            FieldKind::Chars(_) => FIELD_CHARS,
            FieldKind::Str => FIELD_STR,
            FieldKind::Bytes => FIELD_BYTES,
        }
    }

    /// The `size` a field descriptor records: the byte width of a fixed
    /// field, 0 for a length-prefixed one.
    pub fn size(self) -> u16 {
        match self {
            FieldKind::U8 | FieldKind::I8 => 1,
            FieldKind::U16 | FieldKind::I16 => 2,
            FieldKind::U32 | FieldKind::I32 => 4,
            FieldKind::U64 | FieldKind::I64 | FieldKind::Ptr => 8,
            FieldKind::Chars(n) => n,
            FieldKind::Str | FieldKind::Bytes => 0,
        }
    }

    /// Rebuilds a kind from a descriptor; `None` for an unknown code or a
    /// size that does not fit the code.
    pub fn from_descriptor(code: u8, size: u16) -> Option<FieldKind> {
        let kind = Self::from_code(code, size)?;
        (kind.size() == size).then_some(kind)
    }

    /// The kind of field code `code`; `chars` is the length of a `chars`
    /// field, unused for the others. `None` for an unknown code or a
    /// `chars` length no record holds.
    pub fn from_code(code: u8, chars: u16) -> Option<FieldKind> {
        Some(match code {
            FIELD_U8 => FieldKind::U8,
            FIELD_U16 => FieldKind::U16,
            FIELD_U32 => FieldKind::U32,
            FIELD_U64 => FieldKind::U64,
            FIELD_I8 => FieldKind::I8,
            FIELD_I16 => FieldKind::I16,
            FIELD_I32 => FieldKind::I32,
            FIELD_I64 => FieldKind::I64,
            FIELD_PTR => FieldKind::Ptr,
            FIELD_CHARS if chars > 0 && (chars as usize) < MAX_RECORD_SIZE => {
                FieldKind::Chars(chars)
            }
            FIELD_STR => FieldKind::Str,
            FIELD_BYTES => FieldKind::Bytes,
            _ => return None,
        })
    }
}

/// One named field of an event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDef<'a> {
    pub name: &'a str,
    pub kind: FieldKind,
}

/// An event type: its id in record headers, its name, and its fields in
/// payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventDef<'a> {
    pub id: u8,
    pub name: &'a str,
    pub fields: &'a [FieldDef<'a>],
}

const fn field(name: &'static str, kind: FieldKind) -> FieldDef<'static> {
    FieldDef { name, kind }
}

pub const EVENT_PRINTK: u8 = 16;
pub const EVENT_MARKER: u8 = 17;
pub const EVENT_SCHED_SWITCH: u8 = 18;
pub const EVENT_IRQ_ENTRY: u8 = 19;
pub const EVENT_IRQ_EXIT: u8 = 20;
pub const EVENT_CRASH: u8 = 21;
pub const EVENT_LOST: u8 = 22;
/// `clock`: from this event's timestamp on, wall time = ts + `wall_offset_ns`.
pub const EVENT_CLOCK: u8 = 23;
/// `log`: a user-space program's log line, with a syslog level (0
/// emergency to 7 debug, as `printk`'s) and the program's own category.
pub const EVENT_LOG: u8 = 24;

/// `debug`: a kernel debug message recorded unformatted, its format in
/// the callsite area (FORMAT.md, section 18).
pub const EVENT_DEBUG: u8 = 25;

/// `shutdown`: the machine is going down on purpose (a restart, halt or
/// power-off), or a reason for it was given before it began.
pub const EVENT_SHUTDOWN: u8 = 26;

/// `mce`: a machine check, as the kernel's `mce:mce_record` tracepoint
/// gives it, or as the panic path read it from the banks (`origin`).
pub const EVENT_MCE: u8 = 27;
/// `memory_failure`: the kernel's `memory_failure_event`, a page taken
/// out of service; `page` is the kernel's own name for what it was.
pub const EVENT_MEMORY_FAILURE: u8 = 28;
/// `aer`: a PCIe Advanced Error Reporting error (the kernel's `aer_event`).
pub const EVENT_AER: u8 = 29;
/// `suppressed`: events of a source that its rate budget kept out of the
/// ring on this CPU since the last one it let in (a storm of corrected
/// errors, say).
pub const EVENT_SUPPRESSED: u8 = 30;
/// `hw_error`: one of the kernel's other RAS tracepoints (`source`): an
/// EDAC memory controller's `mc_event`, a firmware record's
/// `non_standard_event`, `arm_event` or `extlog_mem_event`.
pub const EVENT_HW_ERROR: u8 = 31;

/// `hw_error` `source` values, the tracepoint that gave it.
pub const HW_ERROR_EDAC: u8 = 1;
pub const HW_ERROR_NON_STANDARD: u8 = 2;
pub const HW_ERROR_ARM: u8 = 3;
pub const HW_ERROR_EXTLOG: u8 = 4;

/// `mce` `origin` values: the kernel's tracepoint, which runs after the
/// handler, from a work item; or the banks read by the panic path of a
/// machine check that brought the kernel down before that.
pub const MCE_FROM_TRACEPOINT: u8 = 0;
pub const MCE_FROM_PANIC: u8 = 1;

/// `shutdown` `how` values: a reason given (`shutdown_reason`), then the
/// kernel's own restart, halt and power-off (its `SYS_*` codes).
pub const SHUTDOWN_ASKED: u32 = 0;
pub const SHUTDOWN_RESTART: u32 = 1;
pub const SHUTDOWN_HALT: u32 = 2;
pub const SHUTDOWN_POWER_OFF: u32 = 3;

/// A `shutdown` event's `how`, by name.
pub fn shutdown_how_name(how: u32) -> &'static str {
    match how {
        SHUTDOWN_ASKED => "asked",
        SHUTDOWN_RESTART => "restart",
        SHUTDOWN_HALT => "halt",
        SHUTDOWN_POWER_OFF => "power-off",
        _ => "unknown",
    }
}

/// `debug` `flags` bits: `args` holds the formatted text (the callsite
/// could not be added), and `args` was cut to fit the record.
pub const DEBUG_FORMATTED: u8 = 1;
pub const DEBUG_CUT: u8 = 2;

/// `debug` `flags` bits: the parts of dynamic debug's prefix the
/// callsite asked for when it was called (its `+t`, `+m`, `+f`, `+s`,
/// `+l`), in front of a message whose printk call carries the prefix.
/// With `DEBUG_TID`, `args` begins with the caller's thread id (a `u32`;
/// `DEBUG_IN_INTERRUPT` for a call in interrupt context). Never set with
/// [`DEBUG_FORMATTED`]: the writer put the prefix in the text.
pub const DEBUG_TID: u8 = 4;
pub const DEBUG_MODULE: u8 = 8;
pub const DEBUG_FUNCTION: u8 = 16;
pub const DEBUG_FILE: u8 = 32;
pub const DEBUG_LINE: u8 = 64;
/// `debug` `flags` bit: the writer's kernel cuts the prefix at 127 bytes
/// (its `PREFIX_SIZE` is 128, since 6.3), not at 63.
pub const DEBUG_PREFIX_128: u8 = 128;

/// The thread id of a `DEBUG_TID` message called in interrupt context
/// (shown as `<intr> `).
pub const DEBUG_IN_INTERRUPT: u32 = u32::MAX;

/// `printk` `flags` bits: the text was cut; a continuation line; logged
/// before recording started and recorded when it did, at its own time
/// (the kernel module's lines of the boot before it loaded).
pub const PRINTK_TRUNCATED: u8 = 1;
pub const PRINTK_CONTINUATION: u8 = 2;
pub const PRINTK_BACKFILLED: u8 = 4;
/// `printk` `caller` values with this bit set name a CPU, otherwise a pid
/// (the kernel's `printk_caller_id` convention).
pub const CALLER_CPU_FLAG: u32 = 0x8000_0000;

/// The event types every region can carry, whatever its schema table says.
pub const BUILTIN_EVENTS: &[EventDef<'static>] = &[
    EventDef {
        id: EVENT_PRINTK,
        name: "printk",
        fields: &[
            field("level", FieldKind::U8),
            field("flags", FieldKind::U8),
            field("caller", FieldKind::U32),
            field("seq", FieldKind::U64),
            field("text", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_MARKER,
        name: "marker",
        fields: &[
            field("pid", FieldKind::U32),
            field("comm", FieldKind::Chars(16)),
            field("text", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_SCHED_SWITCH,
        name: "sched_switch",
        fields: &[
            field("prev_pid", FieldKind::I32),
            field("prev_prio", FieldKind::I32),
            field("prev_state", FieldKind::U32),
            field("next_pid", FieldKind::I32),
            field("next_prio", FieldKind::I32),
            field("prev_comm", FieldKind::Chars(16)),
            field("next_comm", FieldKind::Chars(16)),
        ],
    },
    EventDef {
        id: EVENT_IRQ_ENTRY,
        name: "irq_handler_entry",
        fields: &[field("irq", FieldKind::U32), field("name", FieldKind::Str)],
    },
    EventDef {
        id: EVENT_IRQ_EXIT,
        name: "irq_handler_exit",
        fields: &[field("irq", FieldKind::U32), field("ret", FieldKind::U32)],
    },
    EventDef {
        id: EVENT_CRASH,
        name: "crash",
        fields: &[
            field("reason", FieldKind::U32),
            field("cpu", FieldKind::U32),
            field("message", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_LOST,
        name: "lost",
        fields: &[field("count", FieldKind::U64)],
    },
    EventDef {
        id: EVENT_CLOCK,
        name: "clock",
        fields: &[field("wall_offset_ns", FieldKind::I64)],
    },
    EventDef {
        id: EVENT_LOG,
        name: "log",
        fields: &[
            field("level", FieldKind::U8),
            field("category", FieldKind::Chars(16)),
            field("text", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_DEBUG,
        name: "debug",
        fields: &[
            field("callsite", FieldKind::U32),
            field("level", FieldKind::U8),
            field("flags", FieldKind::U8),
            field("category", FieldKind::U16),
            field("device", FieldKind::Str),
            field("args", FieldKind::Bytes),
        ],
    },
    EventDef {
        id: EVENT_SHUTDOWN,
        name: "shutdown",
        fields: &[
            field("how", FieldKind::U32),
            field("message", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_MCE,
        name: "mce",
        fields: &[
            field("origin", FieldKind::U8),
            field("bank", FieldKind::U8),
            field("severity", FieldKind::U8),
            field("cpuvendor", FieldKind::U8),
            field("cpu", FieldKind::U32),
            field("status", FieldKind::U64),
            field("addr", FieldKind::U64),
            field("misc", FieldKind::U64),
            field("synd", FieldKind::U64),
            field("ipid", FieldKind::U64),
            field("mcgstatus", FieldKind::U64),
            field("mcgcap", FieldKind::U64),
            field("ip", FieldKind::U64),
            field("cs", FieldKind::U8),
            field("tsc", FieldKind::U64),
            field("walltime", FieldKind::U64),
            field("cpuid", FieldKind::U32),
            field("apicid", FieldKind::U32),
            field("socketid", FieldKind::U32),
            field("microcode", FieldKind::U32),
            field("ppin", FieldKind::U64),
        ],
    },
    EventDef {
        id: EVENT_MEMORY_FAILURE,
        name: "memory_failure",
        fields: &[
            field("pfn", FieldKind::U64),
            field("type", FieldKind::U32),
            field("result", FieldKind::U32),
            field("page", FieldKind::Str),
        ],
    },
    EventDef {
        id: EVENT_AER,
        name: "aer",
        fields: &[
            field("status", FieldKind::U32),
            field("severity", FieldKind::U8),
            field("tlp_valid", FieldKind::U8),
            field("device", FieldKind::Str),
            field("tlp", FieldKind::Bytes),
        ],
    },
    EventDef {
        id: EVENT_SUPPRESSED,
        name: "suppressed",
        fields: &[
            field("source", FieldKind::Chars(16)),
            field("count", FieldKind::U64),
        ],
    },
    EventDef {
        id: EVENT_HW_ERROR,
        name: "hw_error",
        fields: &[
            field("source", FieldKind::U8),
            field("severity", FieldKind::U8),
            field("grain", FieldKind::U8),
            field("count", FieldKind::U32),
            field("cpu", FieldKind::I32),
            field("layers", FieldKind::U32),
            field("sequence", FieldKind::U32),
            field("address", FieldKind::U64),
            field("syndrome", FieldKind::U64),
            field("section", FieldKind::Bytes),
            field("fru_id", FieldKind::Bytes),
            field("label", FieldKind::Str),
            field("message", FieldKind::Str),
            field("data", FieldKind::Bytes),
        ],
    },
];

/// Why a set of event definitions cannot become a schema table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaDefError {
    #[error("event type id {0} is reserved for the format (ids below 16)")]
    ReservedId(u8),
    #[error("event type id {0} is defined twice")]
    DuplicateId(u8),
    #[error("event type {0}: name is empty or longer than 31 bytes")]
    BadEventName(u8),
    #[error("event type {0}: a field name is empty or longer than 19 bytes")]
    BadFieldName(u8),
    #[error("event type {0}: more than 32 fields")]
    TooManyFields(u8),
    #[error("event type {0}: a char array field has size 0 or does not fit a record")]
    BadCharsSize(u8),
    #[error("schema table needs {need} bytes, {have} available")]
    NoRoom { need: usize, have: usize },
}

fn check_def(def: &EventDef<'_>) -> Result<(), SchemaDefError> {
    if def.id < FIRST_EVENT_TYPE {
        return Err(SchemaDefError::ReservedId(def.id));
    }
    if def.name.is_empty() || def.name.len() > 31 {
        return Err(SchemaDefError::BadEventName(def.id));
    }
    if def.fields.len() > MAX_FIELDS as usize {
        return Err(SchemaDefError::TooManyFields(def.id));
    }
    for f in def.fields {
        if f.name.is_empty() || f.name.len() > 19 {
            return Err(SchemaDefError::BadFieldName(def.id));
        }
        if let FieldKind::Chars(n) = f.kind {
            if n == 0 || n as usize >= MAX_RECORD_SIZE {
                return Err(SchemaDefError::BadCharsSize(def.id));
            }
        }
    }
    Ok(())
}

/// All definitions a writer puts in its table: the built-ins, then `custom`.
pub fn all_defs<'a>(custom: &'a [EventDef<'a>]) -> impl Iterator<Item = &'a EventDef<'a>> + Clone {
    BUILTIN_EVENTS.iter().chain(custom.iter())
}

/// Bytes the schema table for the built-ins plus `custom` occupies.
pub fn table_size(custom: &[EventDef<'_>]) -> usize {
    SCHEMA_HEADER_SIZE
        + all_defs(custom)
            .map(|d| EVENT_DESC_SIZE + d.fields.len() * FIELD_DESC_SIZE)
            .sum::<usize>()
}

fn copy_name(dst: &mut [u8], name: &str) {
    dst.fill(0);
    dst[..name.len()].copy_from_slice(name.as_bytes());
}

/// Writes the schema table for the built-ins plus `custom` at the start of
/// `out` and returns its size.
pub fn write_table(
    custom: &[EventDef<'_>],
    e: Endian,
    out: &mut [u8],
) -> Result<usize, SchemaDefError> {
    let need = table_size(custom);
    let Some(out) = out.get_mut(..need) else {
        return Err(SchemaDefError::NoRoom {
            need,
            have: out.len(),
        });
    };
    let mut seen = [false; 256];
    for def in all_defs(custom) {
        check_def(def)?;
        if core::mem::replace(&mut seen[def.id as usize], true) {
            return Err(SchemaDefError::DuplicateId(def.id));
        }
    }
    let mut at = SCHEMA_HEADER_SIZE;
    let mut count = 0u32;
    for def in all_defs(custom) {
        let mut desc = EventDesc {
            type_id: U16::new(e, def.id.into()),
            field_count: U16::new(e, def.fields.len() as u16),
            flags: U32::new(e, 0),
            name: [0; 32],
        };
        copy_name(&mut desc.name, def.name);
        out[at..at + EVENT_DESC_SIZE].copy_from_slice(desc.as_bytes());
        at += EVENT_DESC_SIZE;
        for f in def.fields {
            let mut fd = FieldDesc {
                name: [0; 20],
                kind: f.kind.code(),
                reserved: 0,
                size: U16::new(e, f.kind.size()),
            };
            copy_name(&mut fd.name, f.name);
            out[at..at + FIELD_DESC_SIZE].copy_from_slice(fd.as_bytes());
            at += FIELD_DESC_SIZE;
        }
        count += 1;
    }
    let mut hdr = SchemaHeader {
        magic: U32::new(e, SCHEMA_MAGIC),
        count: U32::new(e, count),
        size: U32::new(e, need as u32),
        crc: U32::new(e, 0),
    };
    out[..SCHEMA_HEADER_SIZE].copy_from_slice(hdr.as_bytes());
    let crc = crc32(&[&out[..12], &out[SCHEMA_HEADER_SIZE..]]);
    hdr.crc = U32::new(e, crc);
    out[..SCHEMA_HEADER_SIZE].copy_from_slice(hdr.as_bytes());
    Ok(need)
}

/// A decoded field value, borrowing from the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Unsigned(u64),
    Signed(i64),
    Ptr(u64),
    /// A character array with its NUL padding removed.
    Chars(&'a [u8]),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
}

/// Decodes the field at `offset` of `payload`; returns the value and the
/// offset of the next field.
///
/// Inlined: returned through memory, a `Value` is stored in 8-byte halves
/// and reloaded whole, a store-forwarding stall that showed as the single
/// biggest cost of text output in a profile.
#[inline]
pub fn decode_field<'p>(
    kind: FieldKind,
    payload: &'p [u8],
    offset: usize,
    e: Endian,
) -> Option<(Value<'p>, usize)> {
    use crate::endian::{u16_at, u32_at, u64_at};
    let rest = payload.get(offset..)?;
    let (value, used) = match kind {
        FieldKind::U8 => (Value::Unsigned(*rest.first()? as u64), 1),
        FieldKind::U16 => (Value::Unsigned(u16_at(rest, 0, e)? as u64), 2),
        FieldKind::U32 => (Value::Unsigned(u32_at(rest, 0, e)? as u64), 4),
        FieldKind::U64 => (Value::Unsigned(u64_at(rest, 0, e)?), 8),
        FieldKind::I8 => (Value::Signed(*rest.first()? as i8 as i64), 1),
        FieldKind::I16 => (Value::Signed(u16_at(rest, 0, e)? as i16 as i64), 2),
        FieldKind::I32 => (Value::Signed(u32_at(rest, 0, e)? as i32 as i64), 4),
        FieldKind::I64 => (Value::Signed(u64_at(rest, 0, e)? as i64), 8),
        FieldKind::Ptr => (Value::Ptr(u64_at(rest, 0, e)?), 8),
        FieldKind::Chars(n) => {
            let raw = rest.get(..n as usize)?;
            let end = memchr::memchr(0, raw).unwrap_or(raw.len());
            (Value::Chars(&raw[..end]), n as usize)
        }
        FieldKind::Str | FieldKind::Bytes => {
            let len = u16_at(rest, 0, e)? as usize;
            let data = rest.get(2..)?.get(..len)?;
            let v = if kind == FieldKind::Str {
                Value::Str(data)
            } else {
                Value::Bytes(data)
            };
            (v, 2 + len)
        }
    };
    Some((value, offset + used))
}

/// Bytes a fixed field takes, or what a length-prefixed one takes for
/// `var_len` bytes of content.
pub fn encoded_len(kind: FieldKind, var_len: usize) -> usize {
    match kind {
        FieldKind::Str | FieldKind::Bytes => 2 + var_len,
        k => k.size() as usize,
    }
}

/// Why values could not be encoded as an event's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("event `{0}` takes a different number of fields")]
    FieldCount(&'static str),
    #[error("field {0} does not match its kind, or is too long for it")]
    Mismatch(usize),
    #[error("output buffer is too small")]
    NoRoom,
}

fn value_len(kind: FieldKind, v: &Value<'_>) -> Option<usize> {
    match (kind, v) {
        (FieldKind::Str, Value::Str(s)) | (FieldKind::Bytes, Value::Bytes(s)) => {
            (s.len() <= u16::MAX as usize).then_some(2 + s.len())
        }
        (FieldKind::Chars(n), Value::Chars(s)) => (s.len() <= n as usize).then_some(n as usize),
        (FieldKind::Ptr, Value::Ptr(_)) => Some(8),
        (FieldKind::U8 | FieldKind::U16 | FieldKind::U32 | FieldKind::U64, Value::Unsigned(_))
        | (FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64, Value::Signed(_)) => {
            Some(kind.size() as usize)
        }
        _ => None,
    }
}

/// The payload size of `values` encoded as an event of type `def`.
pub fn payload_len(def: &EventDef<'_>, values: &[Value<'_>]) -> Result<usize, EncodeError> {
    if def.fields.len() != values.len() {
        return Err(EncodeError::FieldCount("event"));
    }
    let mut total = 0usize;
    for (i, (f, v)) in def.fields.iter().zip(values).enumerate() {
        total += value_len(f.kind, v).ok_or(EncodeError::Mismatch(i))?;
    }
    Ok(total)
}

/// Encodes `values` as the payload of an event of type `def` at the start
/// of `out`; integers are truncated to their field's width.
pub fn encode_payload(
    def: &EventDef<'_>,
    values: &[Value<'_>],
    e: Endian,
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let len = payload_len(def, values)?;
    let out = out.get_mut(..len).ok_or(EncodeError::NoRoom)?;
    let mut at = 0;
    for (f, v) in def.fields.iter().zip(values) {
        let n = value_len(f.kind, v).unwrap_or(0);
        let dst = &mut out[at..at + n];
        match *v {
            Value::Unsigned(x) | Value::Ptr(x) => put_int(dst, x, e),
            Value::Signed(x) => put_int(dst, x as u64, e),
            Value::Chars(s) => {
                dst.fill(0);
                dst[..s.len()].copy_from_slice(s);
            }
            Value::Str(s) | Value::Bytes(s) => {
                dst[..2].copy_from_slice(&U16::new(e, s.len() as u16).0);
                dst[2..].copy_from_slice(s);
            }
        }
        at += n;
    }
    Ok(len)
}

/// Stores the low `dst.len()` bytes of `x` in byte order `e`.
fn put_int(dst: &mut [u8], x: u64, e: Endian) {
    let n = dst.len();
    match e {
        Endian::Little => dst.copy_from_slice(&x.to_le_bytes()[..n]),
        Endian::Big => dst.copy_from_slice(&x.to_be_bytes()[8 - n..]),
    }
}

/// Finds a built-in event type by id.
pub fn builtin(id: u8) -> Option<&'static EventDef<'static>> {
    BUILTIN_EVENTS.iter().find(|d| d.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_make_a_table() {
        let mut buf = [0u8; 4096];
        let n = write_table(&[], Endian::Little, &mut buf).unwrap();
        assert_eq!(n, table_size(&[]));
        assert_eq!(&buf[..4], b"CRSC");
    }

    #[test]
    fn rejects_bad_definitions() {
        let mut buf = [0u8; 4096];
        let reserved = [EventDef {
            id: 3,
            name: "x",
            fields: &[],
        }];
        assert_eq!(
            write_table(&reserved, Endian::Little, &mut buf),
            Err(SchemaDefError::ReservedId(3))
        );
        let dup = [EventDef {
            id: EVENT_LOST,
            name: "x",
            fields: &[],
        }];
        assert_eq!(
            write_table(&dup, Endian::Little, &mut buf),
            Err(SchemaDefError::DuplicateId(EVENT_LOST))
        );
        let long = [EventDef {
            id: 40,
            name: "a-name-that-is-longer-than-31-bytes",
            fields: &[],
        }];
        assert_eq!(
            write_table(&long, Endian::Little, &mut buf),
            Err(SchemaDefError::BadEventName(40))
        );
        let mut small = [0u8; 10];
        assert!(matches!(
            write_table(&[], Endian::Little, &mut small),
            Err(SchemaDefError::NoRoom { .. })
        ));
    }

    #[test]
    fn field_kinds_round_trip_through_descriptors() {
        for k in [
            FieldKind::U8,
            FieldKind::I64,
            FieldKind::Ptr,
            FieldKind::Chars(16),
            FieldKind::Str,
            FieldKind::Bytes,
        ] {
            assert_eq!(FieldKind::from_descriptor(k.code(), k.size()), Some(k));
        }
        assert_eq!(FieldKind::from_descriptor(FIELD_U32, 8), None);
        assert_eq!(FieldKind::from_descriptor(FIELD_CHARS, 0), None);
        assert_eq!(FieldKind::from_descriptor(99, 0), None);
    }

    #[test]
    fn encodes_what_it_decodes() {
        let def = builtin(EVENT_MARKER).unwrap();
        let vals = [
            Value::Unsigned(42),
            Value::Chars(b"sh"),
            Value::Str(b"hello"),
        ];
        for e in [Endian::Little, Endian::Big] {
            let mut out = [0u8; 64];
            let n = encode_payload(def, &vals, e, &mut out).unwrap();
            assert_eq!(n, 4 + 16 + 2 + 5);
            let (v, at) = decode_field(FieldKind::U32, &out, 0, e).unwrap();
            assert_eq!(v, Value::Unsigned(42));
            let (v, at) = decode_field(FieldKind::Chars(16), &out, at, e).unwrap();
            assert_eq!(v, Value::Chars(b"sh"));
            assert_eq!(
                decode_field(FieldKind::Str, &out, at, e).unwrap(),
                (Value::Str(b"hello"), n)
            );
        }
        assert_eq!(
            payload_len(def, &vals[..2]),
            Err(EncodeError::FieldCount("event"))
        );
        let wrong = [Value::Signed(1), Value::Chars(b""), Value::Str(b"")];
        assert_eq!(payload_len(def, &wrong), Err(EncodeError::Mismatch(0)));
        let mut small = [0u8; 4];
        assert_eq!(
            encode_payload(def, &vals, Endian::Little, &mut small),
            Err(EncodeError::NoRoom)
        );
    }

    #[test]
    fn decodes_fields_and_refuses_short_payloads() {
        let e = Endian::Big;
        let payload = [0, 0, 0, 7, 0, 3, b'a', b'b', b'c'];
        let (v, next) = decode_field(FieldKind::U32, &payload, 0, e).unwrap();
        assert_eq!((v, next), (Value::Unsigned(7), 4));
        let (v, next) = decode_field(FieldKind::Str, &payload, 4, e).unwrap();
        assert_eq!((v, next), (Value::Str(b"abc"), 9));
        assert_eq!(decode_field(FieldKind::U8, &payload, 9, e), None);
        assert_eq!(decode_field(FieldKind::Str, &payload[..8], 4, e), None);
        let chars = *b"ab\0\0";
        let (v, _) = decode_field(FieldKind::Chars(4), &chars, 0, e).unwrap();
        assert_eq!(v, Value::Chars(b"ab"));
    }
}
