//! The C API of the kernel module's ring code (kernel/crashring_ring.h),
//! mirrored for the user-space build that build.rs links in: the tests in
//! `c_ring.rs` and the `c_ring` benchmark (which includes this file) both
//! drive the C writer through it. Each uses part of it.

#![allow(dead_code)]

use pstore_ring::write::RegionConfig;
use std::ffi::{c_char, c_int, c_void, CString};

#[repr(C)]
pub struct FieldDef {
    name: *const c_char,
    kind: u8,
    size: u16,
}

#[repr(C)]
pub struct EventDef {
    id: u8,
    name: *const c_char,
    nfields: u16,
    fields: *const FieldDef,
}

#[repr(C)]
pub struct StreamSpec {
    kind: u16,
    cpu: u16,
    lane: u8,
    name: *const c_char,
    pid: u32,
    uid: u32,
}

#[repr(C)]
pub struct Config {
    page_size: u32,
    pages_per_stream: u32,
    lane_pages: u32,
    user_pages: u32,
    word_size: u8,
    nstreams: u16,
    streams: *const StreamSpec,
    ncustom: u16,
    custom: *const EventDef,
    boot_id: [u8; 16],
    generation: u64,
    created_ns: u64,
    wall_offset_ns: i64,
    kernel_release: *const c_char,
    hostname: *const c_char,
    producer: *const c_char,
    callsite_pages: u32,
    callsites: *mut CCallsites,
}

/// `struct crashring_stream` is opaque here: its size comes from C.
#[repr(C, align(8))]
pub struct StreamState(pub [u8; 112]);

/// `struct crashring_cpu`: a CPU's streams, one per nesting lane.
#[repr(C)]
pub struct CpuLanes {
    pub depth: std::ffi::c_long,
    pub nlanes: u32,
    pub lane: [*mut StreamState; pstore_ring::layout::MAX_LANES as usize],
}

/// `struct crashring_wb_mark`: how far the periodic write-back got.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbMark {
    pub seq: u64,
    pub bytes: u64,
}

/// One range the ring code wrote back (`struct cr_wb_range`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WbRange {
    pub p: *const c_void,
    pub len: usize,
}

/// How many ranges `cr_test_log_write_backs` keeps (`CR_WB_LOG`).
pub const WB_LOG: usize = 4096;

/// `struct crashring_callsite`: a callsite to add, its strings C strings.
#[repr(C)]
pub struct CCallsite {
    pub source: u8,
    pub level: u8,
    pub category: u16,
    pub line: u32,
    pub module: *const c_char,
    pub function: *const c_char,
    pub file: *const c_char,
    pub format: *const c_char,
}

/// `struct crashring_callsites`: the callsite area's writer state.
#[repr(C)]
pub struct CCallsites {
    pub area: *mut u8,
    pub size: u32,
    pub generation: u64,
    pub next: c_int,
}

extern "C" {
    pub fn crashring_callsites_init(a: *mut CCallsites, area: *mut c_void, size: u32, gen: u64);
    pub fn crashring_callsite_add(a: *mut CCallsites, c: *const CCallsite, id: *mut u32) -> c_int;
    pub fn crashring_format(
        mem: *mut c_void,
        size: u64,
        cfg: *const Config,
        streams: *mut StreamState,
    ) -> c_int;
    pub fn crashring_write(
        s: *mut StreamState,
        ts: u64,
        ty: u8,
        payload: *const c_void,
        len: u32,
    ) -> c_int;
    pub fn crashring_drop(s: *mut StreamState);
    pub fn crashring_snapshot_bytes(live: *const c_void, avail: u64) -> u64;
    pub fn crashring_snapshot_init(
        mem: *mut c_void,
        live: *const c_void,
        avail: u64,
    ) -> *mut c_void;
    pub fn crashring_snapshot_read(s: *mut c_void, off: u64, dst: *mut c_void, len: usize)
        -> c_int;
    pub fn crashring_reserve(s: *mut StreamState, ts: u64, ty: u8, len: u32) -> *mut c_void;
    pub fn crashring_commit(s: *mut StreamState);
    pub fn crashring_enter(c: *mut CpuLanes) -> *mut StreamState;
    pub fn crashring_leave(c: *mut CpuLanes);
    pub fn crashring_take_innermost(c: *mut CpuLanes);
    pub fn crashring_close(s: *mut StreamState);
    pub fn crashring_stop_all(streams: *mut StreamState, n: u32);
    pub fn crashring_set_durable(s: *mut StreamState, on: bool);
    pub fn crashring_write_back_new(s: *const StreamState, mark: *mut WbMark) -> u32;
    pub fn crashring_set_state(
        mem: *mut c_void,
        state: u32,
        reason: u32,
        ns: u64,
        cpu: u32,
        msg: *const c_char,
    );
    pub fn crashring_state_valid(st: *const c_void) -> bool;
    pub fn crashring_set_hostname(mem: *mut c_void, name: *const c_char) -> bool;
    pub fn crashring_region_size(mem: *const c_void) -> u64;
    pub fn cr_test_sizeof_stream() -> usize;
    /// `crashring_write`, but the writer stops dead at its `stop_at`-th
    /// stop point (the ordered steps of opening a page); returns 1 then.
    pub fn cr_test_write_stopping_at(
        s: *mut StreamState,
        ts: u64,
        ty: u8,
        payload: *const c_void,
        len: u32,
        stop_at: c_int,
    ) -> c_int;
    /// `crashring_stop_all`, with a writer entering each stream after the
    /// stop and still inside when the stopper closes its page.
    pub fn cr_test_stop_all_with_late_writers(streams: *mut StreamState, n: u32);
    pub fn cr_test_sizeof_config() -> usize;
    pub fn cr_test_crc(p: *const c_void, len: usize) -> u32;
    pub fn cr_test_sizeof_cpu() -> usize;
    /// Logs this thread's write-backs into `log` ([`WB_LOG`] entries), or
    /// stops with null.
    pub fn cr_test_log_write_backs(log: *mut WbRange);
    /// Write-backs since logging started (past [`WB_LOG`], counted only).
    pub fn cr_test_write_backs() -> usize;
}

/// The kernel's `__crc32c_le(seed, p, n)` (no pre- or post-inversion), for
/// the user-space build on a CPU without SSE4.2: crc32c takes and gives the
/// inverted state.
#[no_mangle]
extern "C" fn crashring_user_crc32(seed: u32, p: *const c_void, len: usize) -> u32 {
    let data = if len == 0 {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    };
    !crc32c::crc32c_append(!seed, data)
}

/// Owns everything a C `struct crashring_config` points at.
pub struct CConfig {
    _strings: Vec<CString>,
    _fields: Vec<Vec<FieldDef>>,
    _events: Vec<EventDef>,
    _streams: Vec<StreamSpec>,
    cfg: Config,
}

pub fn c_config(rc: &RegionConfig<'_>) -> CConfig {
    let mut strings = Vec::new();
    let mut cstr = |s: &str| {
        let c = CString::new(s).unwrap();
        let p = c.as_ptr();
        strings.push(c);
        p
    };
    let streams: Vec<StreamSpec> = rc
        .streams
        .iter()
        .map(|s| StreamSpec {
            kind: s.kind,
            cpu: s.cpu,
            lane: s.lane,
            name: cstr(s.name),
            pid: s.pid,
            uid: s.uid,
        })
        .collect();
    let fields: Vec<Vec<FieldDef>> = rc
        .custom_events
        .iter()
        .map(|e| {
            e.fields
                .iter()
                .map(|f| FieldDef {
                    name: cstr(f.name),
                    kind: f.kind.code(),
                    size: f.kind.size(),
                })
                .collect()
        })
        .collect();
    let events: Vec<EventDef> = rc
        .custom_events
        .iter()
        .zip(&fields)
        .map(|(e, f)| EventDef {
            id: e.id,
            name: cstr(e.name),
            nfields: f.len() as u16,
            fields: f.as_ptr(),
        })
        .collect();
    let cfg = Config {
        page_size: rc.page_size,
        pages_per_stream: rc.pages_per_stream.unwrap_or(0),
        lane_pages: rc.lane_pages,
        user_pages: rc.user_pages.unwrap_or(0),
        word_size: rc.word_size,
        nstreams: streams.len() as u16,
        streams: streams.as_ptr(),
        ncustom: events.len() as u16,
        custom: events.as_ptr(),
        boot_id: rc.boot_id,
        generation: rc.generation,
        created_ns: rc.created_ns,
        wall_offset_ns: rc.wall_offset_ns,
        kernel_release: cstr(rc.kernel_release),
        hostname: cstr(rc.hostname),
        producer: cstr(rc.producer),
        callsite_pages: rc.callsite_pages,
        callsites: std::ptr::null_mut(),
    };
    CConfig {
        _strings: strings,
        _fields: fields,
        _events: events,
        _streams: streams,
        cfg,
    }
}

/// A region formatted by the C code in 8-byte-aligned memory.
pub struct CRegion {
    pub mem: Vec<u64>,
    streams: Vec<StreamState>,
    /// The callsite area's writer state, when the region has one.
    pub callsites: Box<CCallsites>,
    _cfg: CConfig,
}

impl CRegion {
    pub fn format(rc: &RegionConfig<'_>, bytes: usize) -> Result<CRegion, c_int> {
        assert_eq!(std::mem::size_of::<StreamState>(), unsafe {
            cr_test_sizeof_stream()
        });
        assert_eq!(std::mem::size_of::<Config>(), unsafe {
            cr_test_sizeof_config()
        });
        assert_eq!(std::mem::size_of::<CpuLanes>(), unsafe {
            cr_test_sizeof_cpu()
        });
        let mut cfg = c_config(rc);
        let mut callsites = Box::new(CCallsites {
            area: std::ptr::null_mut(),
            size: 0,
            generation: 0,
            next: 0,
        });
        cfg.cfg.callsites = &mut *callsites;
        let mut mem = vec![0u64; bytes.div_ceil(8)];
        let mut streams: Vec<StreamState> = (0..rc.streams.len())
            .map(|_| StreamState([0; 112]))
            .collect();
        let err = unsafe {
            crashring_format(
                mem.as_mut_ptr().cast(),
                bytes as u64,
                &cfg.cfg,
                streams.as_mut_ptr(),
            )
        };
        if err != 0 {
            return Err(err);
        }
        Ok(CRegion {
            mem,
            streams,
            callsites,
            _cfg: cfg,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        let size = unsafe { crashring_region_size(self.mem.as_ptr().cast()) } as usize;
        let all = unsafe {
            std::slice::from_raw_parts(self.mem.as_ptr().cast::<u8>(), self.mem.len() * 8)
        };
        &all[..size.min(all.len())]
    }

    pub fn stream(&mut self, i: usize) -> *mut StreamState {
        &mut self.streams[i]
    }
}
