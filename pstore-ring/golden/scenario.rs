//! The golden scenario as a script over a [`Recorder`], so that every
//! writer (the Rust reference writer, the C module's ring code) replays the
//! same calls in the same order and must produce the same bytes. Included
//! with `#[path]` by pstore-ring's golden test and by the C ring test.

use pstore_ring::debug_args::{self, Callsite, DebugArg};
use pstore_ring::layout::{CALLSITE_DRM, REASON_PANIC, STATE_CRASHED, STREAM_USER};
use pstore_ring::schema::{self, EventDef, FieldDef, FieldKind, Value};
use pstore_ring::write::{RegionConfig, StreamSpec};
use pstore_ring::Endian;

pub const FRAME: EventDef<'static> = EventDef {
    id: 40,
    name: "frame",
    fields: &[
        FieldDef {
            name: "seq",
            kind: FieldKind::U32,
        },
        FieldDef {
            name: "crtc",
            kind: FieldKind::U8,
        },
    ],
};

/// Laid out as the kernel module lays out two CPUs with two nesting
/// lanes, then a user stream.
pub const STREAMS: [StreamSpec<'static>; 5] = [
    StreamSpec::cpu(0),
    StreamSpec::cpu(1),
    StreamSpec::nested(0, 1),
    StreamSpec::nested(1, 1),
    StreamSpec {
        kind: STREAM_USER,
        cpu: u16::MAX,
        lane: 0,
        name: "weston",
        pid: 812,
        uid: 1000,
    },
];

/// The streams the scenario writes to, by index in [`STREAMS`].
const CPU0: usize = 0;
const CPU1: usize = 1;
const CPU1_NESTED: usize = 3;
const WESTON: usize = 4;

pub const CUSTOM: [EventDef<'static>; 1] = [FRAME];

/// The memory the scenario's region is formatted in.
pub const BUFFER_SIZE: usize = 8192;

pub fn config(endian: Endian) -> RegionConfig<'static> {
    RegionConfig {
        endian,
        word_size: 8,
        page_size: 256,
        pages_per_stream: Some(3),
        lane_pages: 2,
        // The user stream sized apart from the CPUs, as in the module's pool.
        user_pages: Some(4),
        streams: &STREAMS,
        callsite_pages: 1,
        custom_events: &CUSTOM,
        boot_id: *b"0123456789abcdef",
        generation: 7,
        created_ns: 1_000_000_000,
        wall_offset_ns: 1_790_000_000_000_000_000,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "golden",
        producer: "pstore-ring",
    }
}

/// What a writer must offer to replay the scenario.
pub trait Recorder {
    /// Records `payload` (already encoded) as type `type_id` on `stream`.
    fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]);
    fn drop_event(&mut self, stream: usize);
    /// Reserves a record on `stream` and fills it, but never commits it:
    /// the writer stops there for good (a panic interrupted it).
    fn abandon(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]);
    fn close(&mut self, stream: usize);
    fn set_state(&mut self, state: u32, reason: u32, crash_ns: u64, crash_cpu: u32, message: &str);
    /// Adds a callsite to the region's callsite area; returns its id.
    fn add_callsite(&mut self, c: &Callsite<'_>) -> u32;
    fn endian(&self) -> Endian;
}

/// The DRM debug callsite the scenario's `debug` event names.
pub const KMS: Callsite<'static> = Callsite {
    source: CALLSITE_DRM,
    level: 7,
    category: 2,
    line: 0,
    module: b"bochs",
    function: b"bochs_pipe_enable [bochs]",
    file: b"",
    format: b"crtc %d: mode %dx%d \"%s\"\n",
};

fn event(r: &mut impl Recorder, stream: usize, ts: u64, def: &EventDef<'_>, values: &[Value<'_>]) {
    let mut buf = [0u8; 1024];
    let n = schema::encode_payload(def, values, r.endian(), &mut buf).expect("scenario values fit");
    r.write(stream, ts, def.id, &buf[..n]);
}

fn printk(i: u64, text: &str) -> [Value<'_>; 5] {
    [
        Value::Unsigned(6),
        Value::Unsigned(0),
        Value::Unsigned(1),
        Value::Unsigned(i),
        Value::Str(text.as_bytes()),
    ]
}

pub fn replay(r: &mut impl Recorder) {
    let b = |id| schema::builtin(id).expect("built-in");
    let t0 = config(r.endian()).created_ns;
    // cpu0: printk lines until the ring wraps once (the oldest page is
    // overwritten). Event 9 comes 100 us late (a time-extend record),
    // event 11 20 s late (an absolute-time record).
    for i in 0..14u64 {
        let text = format!("line {i}: hello from cpu0");
        let ts = t0
            + i * 1_000
            + if i >= 9 { 100_000 } else { 0 }
            + if i >= 11 { 20_000_000_000 } else { 0 };
        event(r, CPU0, ts, b(schema::EVENT_PRINTK), &printk(i, &text));
    }
    r.drop_event(CPU0);
    // cpu0: a DRM debug message, recorded unformatted: its callsite once
    // in the area, the event with the device and the arguments.
    let kms = r.add_callsite(&KMS);
    let mut args = [0u8; 64];
    let n = debug_args::encode(
        &mut args,
        &[
            DebugArg::Int(31),
            DebugArg::Int(1024),
            DebugArg::Int(768),
            DebugArg::Str(b"1024x768"),
        ],
        r.endian(),
    )
    .expect("scenario arguments fit");
    let debug = [
        Value::Unsigned(kms.into()),
        Value::Unsigned(7),
        Value::Unsigned(0),
        Value::Unsigned(2),
        Value::Str(b"bochs-drm 0000:00:02.0"),
        Value::Bytes(&args[..n]),
    ];
    event(r, CPU0, t0 + 20_000_120_000, b(schema::EVENT_DEBUG), &debug);
    // cpu1: scheduler and interrupt events; then, while its task is in the
    // middle of a printk record, an interrupt records on lane 1 (its first
    // event at the same time as the task's last, so the merge must put the
    // interrupted lane first) and panics; the panic closes every page,
    // counting the task's record in flight as dropped.
    let tw = t0 + 20_000_200_000;
    let sw = [
        Value::Signed(0),
        Value::Signed(120),
        Value::Unsigned(0),
        Value::Signed(42),
        Value::Signed(100),
        Value::Chars(b"swapper/1"),
        Value::Chars(b"kworker/1:0"),
    ];
    event(r, CPU1, tw, b(schema::EVENT_SCHED_SWITCH), &sw);
    event(
        r,
        CPU1,
        tw + 10,
        b(schema::EVENT_IRQ_ENTRY),
        &[Value::Unsigned(11), Value::Str(b"virtio0")],
    );
    event(
        r,
        CPU1,
        tw + 900,
        b(schema::EVENT_IRQ_EXIT),
        &[Value::Unsigned(11), Value::Unsigned(1)],
    );
    event(
        r,
        CPU1,
        tw + 950,
        b(schema::EVENT_LOST),
        &[Value::Unsigned(3)],
    );
    let mut buf = [0u8; 64];
    let text = printk(14, "interrupted mid-record");
    let n = schema::encode_payload(b(schema::EVENT_PRINTK), &text, r.endian(), &mut buf)
        .expect("scenario values fit");
    r.abandon(CPU1, tw + 960, schema::EVENT_PRINTK, &buf[..n]);
    event(
        r,
        CPU1_NESTED,
        tw + 950,
        b(schema::EVENT_IRQ_ENTRY),
        &[Value::Unsigned(9), Value::Str(b"acpi")],
    );
    let msg = "Kernel panic - not syncing: sysrq triggered crash";
    let crash = [
        Value::Unsigned(REASON_PANIC.into()),
        Value::Unsigned(1),
        Value::Str(msg.as_bytes()),
    ];
    event(r, CPU1_NESTED, tw + 1_000, b(schema::EVENT_CRASH), &crash);
    for stream in [CPU1, CPU1_NESTED] {
        r.close(stream);
    }
    // weston: a user marker and a custom event; left open.
    let marker = [
        Value::Unsigned(812),
        Value::Chars(b"weston"),
        Value::Str(b"frame \"42\"\n"),
    ];
    event(r, WESTON, tw - 500, b(schema::EVENT_MARKER), &marker);
    event(
        r,
        WESTON,
        tw - 400,
        &FRAME,
        &[Value::Unsigned(42), Value::Unsigned(1)],
    );
    r.set_state(STATE_CRASHED, REASON_PANIC, tw + 1_000, 1, msg);
}
