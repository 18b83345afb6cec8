//! Files generated from pstore-ring, the format's single source of truth,
//! and committed: the C headers the kernel module includes (`cheader`),
//! FORMAT.md's tables (`formatdoc`), and pstore-ring's golden images
//! (blessed by its own test). A test fails when a committed file differs
//! from what is generated; `cargo xtask gen-header` and `bless-golden`
//! rewrite them.
//!
//! This module owns what both generators describe: every structure of the
//! format with its fields ([`structs`]) and every constant
//! ([`constants`]). Import rule: the children take these from here
//! (`super::`), never from one another.

use anyhow::Result;
use pstore_ring::layout::*;
use xshell::{cmd, Shell};

mod cheader;
mod formatdoc;

/// `cargo xtask gen-header`: rewrites kernel/crashring_format.h,
/// crashring_schema.h and FORMAT.md's tables.
pub fn gen_header(sh: &Shell) -> Result<()> {
    sh.write_file("kernel/crashring_format.h", cheader::generate())?;
    sh.write_file("kernel/crashring_schema.h", cheader::generate_schema())?;
    let spec = formatdoc::update(&sh.read_file(formatdoc::PATH)?)?;
    sh.write_file(formatdoc::PATH, spec)?;
    Ok(())
}

/// `cargo xtask bless-golden`: regenerates pstore-ring's golden images
/// and their decoded text.
pub fn bless_golden(sh: &Shell) -> Result<()> {
    let _env = sh.push_env("UPDATE_GOLDEN", "1");
    cmd!(sh, "cargo test -p pstore-ring --test golden").run()?;
    Ok(())
}

pub struct Field {
    pub name: &'static str,
    ctype: &'static str,
    array: Option<usize>,
    pub offset: usize,
    /// Taken from the Rust field's type, not from `ctype`, so FORMAT.md's
    /// tables (`formatdoc`) describe the structs the reader really uses.
    pub size: usize,
}

/// The size of the field `get` borrows, known from its type alone.
fn field_size<T, F>(_get: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

macro_rules! fields {
    ($ty:ty; $($name:ident : $ctype:literal $([$n:literal])?),* $(,)?) => {
        vec![$(Field {
            name: stringify!($name),
            ctype: $ctype,
            array: None $(.or(Some($n)))?,
            offset: core::mem::offset_of!($ty, $name),
            size: field_size(|s: &$ty| &s.$name),
        }),*]
    };
}

/// Every structure of the format: its C name, its size and its fields in
/// order.
pub fn structs() -> Vec<(&'static str, usize, Vec<Field>)> {
    vec![
        (
            "crashring_region_header",
            HEADER_SIZE,
            fields!(RegionHeader;
                magic: "__u8" [8], endian_tag: "__u32", version: "__u16", header_size: "__u16",
                word_size: "__u8", reserved0: "__u8", stream_count: "__u16", cpu_count: "__u16",
                page_header_size: "__u16", page_size: "__u32", desc_size: "__u32", region_size: "__u64",
                desc_offset: "__u32", schema_offset: "__u32", schema_size: "__u32", clock_id: "__u32",
                boot_id: "__u8" [16], generation: "__u64", created_ns: "__u64", wall_offset_ns: "__s64",
                flags: "__u32", tail_offset: "__u32", kernel_release: "char" [64], hostname: "char" [64],
                producer: "char" [16], reserved2: "__u32", header_crc: "__u32"),
        ),
        (
            "crashring_state_block",
            STATE_SIZE,
            fields!(StateBlock;
                state: "__u32", reason: "__u32", crash_ns: "__u64", crash_cpu: "__u32", updates: "__u32",
                message: "char" [36], crc: "__u32"),
        ),
        (
            "crashring_stream_desc",
            DESC_SIZE,
            fields!(StreamDesc;
                kind: "__u16", cpu: "__u16", page_count: "__u32", pages_offset: "__u64", name: "char" [32],
                pid: "__u32", flags: "__u32", uid: "__u32", crc: "__u32"),
        ),
        (
            "crashring_page_header",
            PAGE_HEADER_SIZE,
            fields!(PageHeader;
                magic: "__u32", stream: "__u16", flags: "__u16", seq: "__u64", first_ts: "__u64",
                first_index: "__u64", commit: "__u32", count: "__u32", dropped: "__u32", crc: "__u32"),
        ),
        (
            "crashring_stream_tail",
            TAIL_SIZE,
            fields!(StreamTail;
                seq: "__u64", first_index: "__u64", end_index: "__u64", stream: "__u16", state: "__u16",
                crc: "__u32"),
        ),
        (
            "crashring_schema_header",
            SCHEMA_HEADER_SIZE,
            fields!(SchemaHeader; magic: "__u32", count: "__u32", size: "__u32", crc: "__u32"),
        ),
        (
            "crashring_event_desc",
            EVENT_DESC_SIZE,
            fields!(EventDesc; type_id: "__u16", field_count: "__u16", flags: "__u32", name: "char" [32]),
        ),
        (
            "crashring_field_desc",
            FIELD_DESC_SIZE,
            fields!(FieldDesc; name: "char" [20], kind: "__u8", reserved: "__u8", size: "__u16"),
        ),
        (
            "crashring_callsite_header",
            CALLSITE_HEADER_SIZE,
            fields!(CallsiteHeader; magic: "__u32", refused: "__u32", reserved: "__u64"),
        ),
        (
            "crashring_callsite_entry",
            CALLSITE_ENTRY_SIZE,
            fields!(CallsiteEntry;
                size: "__u32", crc: "__u32", source: "__u8", level: "__u8", category: "__u16",
                line: "__u32"),
        ),
    ]
}

/// Every constant of `layout.rs` but the magic (an array), by its name
/// there, then the `debug` event's flags and argument tags (`schema.rs`,
/// `debug_args.rs`), which the module's encoder writes.
pub fn constants() -> Vec<(&'static str, u64)> {
    use pstore_ring::debug_args::{ARG_ADDR, ARG_INT, ARG_STR, ARG_TEXT};
    use pstore_ring::schema::{
        DEBUG_CUT, DEBUG_FILE, DEBUG_FORMATTED, DEBUG_FUNCTION, DEBUG_IN_INTERRUPT, DEBUG_LINE,
        DEBUG_MODULE, DEBUG_PREFIX_128, DEBUG_TID, HW_ERROR_ARM, HW_ERROR_EDAC, HW_ERROR_EXTLOG,
        HW_ERROR_NON_STANDARD, MCE_FROM_PANIC, MCE_FROM_TRACEPOINT, PRINTK_BACKFILLED,
        SHUTDOWN_ASKED, SHUTDOWN_HALT, SHUTDOWN_POWER_OFF, SHUTDOWN_RESTART,
    };
    vec![
        ("FORMAT_VERSION", FORMAT_VERSION.into()),
        ("ENDIAN_TAG", ENDIAN_TAG.into()),
        ("HEADER_SIZE", HEADER_SIZE as u64),
        ("STATE_OFFSET", STATE_OFFSET as u64),
        ("STATE_SIZE", STATE_SIZE as u64),
        ("DESC_OFFSET", DESC_OFFSET as u64),
        ("DESC_SIZE", DESC_SIZE as u64),
        ("PAGE_HEADER_SIZE", PAGE_HEADER_SIZE as u64),
        ("TAIL_SIZE", TAIL_SIZE as u64),
        ("TAIL_COPIES", TAIL_COPIES as u64),
        ("SCHEMA_HEADER_SIZE", SCHEMA_HEADER_SIZE as u64),
        ("EVENT_DESC_SIZE", EVENT_DESC_SIZE as u64),
        ("FIELD_DESC_SIZE", FIELD_DESC_SIZE as u64),
        ("MIN_PAGE_SIZE", MIN_PAGE_SIZE.into()),
        ("MAX_PAGE_SIZE", MAX_PAGE_SIZE.into()),
        ("RECORD_ALIGN", RECORD_ALIGN as u64),
        ("RECORD_HEADER_SIZE", RECORD_HEADER_SIZE as u64),
        ("MAX_RECORD_SIZE", MAX_RECORD_SIZE as u64),
        ("MAX_STREAMS", MAX_STREAMS.into()),
        ("MAX_EVENT_TYPES", MAX_EVENT_TYPES.into()),
        ("MAX_FIELDS", MAX_FIELDS.into()),
        ("CLOCK_MONOTONIC", CLOCK_MONOTONIC.into()),
        ("HEADER_FLAG_TAILS", HEADER_FLAG_TAILS.into()),
        ("HEADER_FLAG_LIVE_COPY", HEADER_FLAG_LIVE_COPY.into()),
        ("STATE_RUNNING", STATE_RUNNING.into()),
        ("STATE_CRASHED", STATE_CRASHED.into()),
        ("STATE_CLEAN", STATE_CLEAN.into()),
        ("REASON_NONE", REASON_NONE.into()),
        ("REASON_PANIC", REASON_PANIC.into()),
        ("REASON_OOPS", REASON_OOPS.into()),
        ("REASON_DIE", REASON_DIE.into()),
        ("REASON_WATCHDOG", REASON_WATCHDOG.into()),
        ("REASON_EMERGENCY_RESTART", REASON_EMERGENCY_RESTART.into()),
        ("REASON_SHUTDOWN", REASON_SHUTDOWN.into()),
        ("STREAM_KERNEL_CPU", STREAM_KERNEL_CPU.into()),
        ("STREAM_USER", STREAM_USER.into()),
        ("DESC_LANE_MASK", DESC_LANE_MASK.into()),
        ("DESC_NO_TAILS", DESC_NO_TAILS.into()),
        ("MAX_LANES", MAX_LANES.into()),
        ("PAGE_MAGIC", PAGE_MAGIC.into()),
        ("PAGE_RESETTING", PAGE_RESETTING.into()),
        ("PAGE_OPEN", PAGE_OPEN.into()),
        ("PAGE_CLOSED", PAGE_CLOSED.into()),
        ("TAIL_OPEN", TAIL_OPEN.into()),
        ("TAIL_CLOSED", TAIL_CLOSED.into()),
        ("TYPE_INVALID", TYPE_INVALID.into()),
        ("TYPE_PADDING", TYPE_PADDING.into()),
        ("TYPE_TIME_EXTEND", TYPE_TIME_EXTEND.into()),
        ("TYPE_TIME_ABS", TYPE_TIME_ABS.into()),
        ("FIRST_EVENT_TYPE", FIRST_EVENT_TYPE.into()),
        ("FIRST_CUSTOM_TYPE", FIRST_CUSTOM_TYPE.into()),
        ("DELTA_BITS", DELTA_BITS.into()),
        ("DELTA_MAX", DELTA_MAX),
        ("SCHEMA_MAGIC", SCHEMA_MAGIC.into()),
        ("FIELD_U8", FIELD_U8.into()),
        ("FIELD_U16", FIELD_U16.into()),
        ("FIELD_U32", FIELD_U32.into()),
        ("FIELD_U64", FIELD_U64.into()),
        ("FIELD_I8", FIELD_I8.into()),
        ("FIELD_I16", FIELD_I16.into()),
        ("FIELD_I32", FIELD_I32.into()),
        ("FIELD_I64", FIELD_I64.into()),
        ("FIELD_CHARS", FIELD_CHARS.into()),
        ("FIELD_STR", FIELD_STR.into()),
        ("FIELD_BYTES", FIELD_BYTES.into()),
        ("FIELD_PTR", FIELD_PTR.into()),
        ("STREAM_CALLSITES", STREAM_CALLSITES.into()),
        ("CALLSITE_MAGIC", CALLSITE_MAGIC.into()),
        ("CALLSITE_HEADER_SIZE", CALLSITE_HEADER_SIZE as u64),
        ("CALLSITE_ENTRY_SIZE", CALLSITE_ENTRY_SIZE as u64),
        ("MAX_CALLSITE_SIZE", MAX_CALLSITE_SIZE as u64),
        ("CALLSITE_DYNDBG", CALLSITE_DYNDBG.into()),
        ("CALLSITE_DRM", CALLSITE_DRM.into()),
        ("CATEGORY_NONE", CATEGORY_NONE.into()),
        ("DEBUG_FORMATTED", DEBUG_FORMATTED.into()),
        ("DEBUG_CUT", DEBUG_CUT.into()),
        ("DEBUG_TID", DEBUG_TID.into()),
        ("DEBUG_MODULE", DEBUG_MODULE.into()),
        ("DEBUG_FUNCTION", DEBUG_FUNCTION.into()),
        ("DEBUG_FILE", DEBUG_FILE.into()),
        ("DEBUG_LINE", DEBUG_LINE.into()),
        ("DEBUG_PREFIX_128", DEBUG_PREFIX_128.into()),
        ("DEBUG_IN_INTERRUPT", DEBUG_IN_INTERRUPT.into()),
        ("SHUTDOWN_ASKED", SHUTDOWN_ASKED.into()),
        ("SHUTDOWN_RESTART", SHUTDOWN_RESTART.into()),
        ("SHUTDOWN_HALT", SHUTDOWN_HALT.into()),
        ("SHUTDOWN_POWER_OFF", SHUTDOWN_POWER_OFF.into()),
        ("MCE_FROM_TRACEPOINT", MCE_FROM_TRACEPOINT.into()),
        ("MCE_FROM_PANIC", MCE_FROM_PANIC.into()),
        ("PRINTK_BACKFILLED", PRINTK_BACKFILLED.into()),
        ("HW_ERROR_EDAC", HW_ERROR_EDAC.into()),
        ("HW_ERROR_NON_STANDARD", HW_ERROR_NON_STANDARD.into()),
        ("HW_ERROR_ARM", HW_ERROR_ARM.into()),
        ("HW_ERROR_EXTLOG", HW_ERROR_EXTLOG.into()),
        ("ARG_INT", ARG_INT.into()),
        ("ARG_STR", ARG_STR.into()),
        ("ARG_ADDR", ARG_ADDR.into()),
        ("ARG_TEXT", ARG_TEXT.into()),
    ]
}
