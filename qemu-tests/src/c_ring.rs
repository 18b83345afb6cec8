//! The kernel module's ring code (kernel/crashring_ring.c), compiled for
//! user space by build.rs, driven through FFI and checked against the Rust
//! reader: the golden image byte for byte, and concurrent writers with
//! wraparound decoding to exactly what they were fed.

#![cfg(test)]

use pstore_ring::write::RegionConfig;
use std::ffi::{c_char, c_int, c_void, CString};

#[repr(C)]
struct FieldDef {
    name: *const c_char,
    kind: u8,
    size: u16,
}

#[repr(C)]
struct EventDef {
    id: u8,
    name: *const c_char,
    nfields: u16,
    fields: *const FieldDef,
}

#[repr(C)]
struct StreamSpec {
    kind: u16,
    cpu: u16,
    name: *const c_char,
    pid: u32,
}

#[repr(C)]
struct Config {
    page_size: u32,
    pages_per_stream: u32,
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
}

/// `struct crashring_stream` is opaque here: its size comes from C.
#[repr(C, align(8))]
struct StreamState([u8; 80]);

extern "C" {
    fn crashring_format(
        mem: *mut c_void,
        size: u64,
        cfg: *const Config,
        streams: *mut StreamState,
    ) -> c_int;
    fn crashring_write(
        s: *mut StreamState,
        ts: u64,
        ty: u8,
        payload: *const c_void,
        len: u32,
    ) -> c_int;
    fn crashring_drop(s: *mut StreamState);
    fn crashring_close(s: *mut StreamState);
    fn crashring_set_state(
        mem: *mut c_void,
        state: u32,
        reason: u32,
        ns: u64,
        cpu: u32,
        msg: *const c_char,
    );
    fn crashring_region_size(mem: *const c_void) -> u64;
    fn cr_test_sizeof_stream() -> usize;
    fn cr_test_sizeof_config() -> usize;
}

/// The kernel's `crc32_le(seed, p, n)` (no pre- or post-inversion), for the
/// user-space build: crc32fast keeps its state inverted.
#[no_mangle]
extern "C" fn crashring_user_crc32(seed: u32, p: *const c_void, len: usize) -> u32 {
    let data = if len == 0 {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    };
    let mut h = crc32fast::Hasher::new_with_initial(!seed);
    h.update(data);
    !h.finalize()
}

/// Owns everything a C `struct crashring_config` points at.
struct CConfig {
    _strings: Vec<CString>,
    _fields: Vec<Vec<FieldDef>>,
    _events: Vec<EventDef>,
    _streams: Vec<StreamSpec>,
    cfg: Config,
}

fn c_config(rc: &RegionConfig<'_>) -> CConfig {
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
            name: cstr(s.name),
            pid: s.pid,
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
struct CRegion {
    mem: Vec<u64>,
    streams: Vec<StreamState>,
    _cfg: CConfig,
}

impl CRegion {
    fn format(rc: &RegionConfig<'_>, bytes: usize) -> Result<CRegion, c_int> {
        assert_eq!(std::mem::size_of::<StreamState>(), unsafe {
            cr_test_sizeof_stream()
        });
        assert_eq!(std::mem::size_of::<Config>(), unsafe {
            cr_test_sizeof_config()
        });
        let cfg = c_config(rc);
        let mut mem = vec![0u64; bytes.div_ceil(8)];
        let mut streams: Vec<StreamState> = (0..rc.streams.len())
            .map(|_| StreamState([0; 80]))
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
            _cfg: cfg,
        })
    }

    fn bytes(&self) -> &[u8] {
        let size = unsafe { crashring_region_size(self.mem.as_ptr().cast()) } as usize;
        let all = unsafe {
            std::slice::from_raw_parts(self.mem.as_ptr().cast::<u8>(), self.mem.len() * 8)
        };
        &all[..size.min(all.len())]
    }

    fn stream(&mut self, i: usize) -> *mut StreamState {
        &mut self.streams[i]
    }
}

mod golden {
    use super::*;
    use pstore_ring::Endian;

    use crate::golden_scenario as scenario;

    impl scenario::Recorder for CRegion {
        fn write(&mut self, stream: usize, ts: u64, type_id: u8, payload: &[u8]) {
            let s = self.stream(stream);
            let rc = unsafe {
                crashring_write(
                    s,
                    ts,
                    type_id,
                    payload.as_ptr().cast(),
                    payload.len() as u32,
                )
            };
            assert_eq!(
                rc,
                0,
                "stream {stream} ts {ts} type {type_id} len {}",
                payload.len()
            );
        }
        fn drop_event(&mut self, stream: usize) {
            unsafe { crashring_drop(self.stream(stream)) }
        }
        fn close(&mut self, stream: usize) {
            unsafe { crashring_close(self.stream(stream)) }
        }
        fn set_state(
            &mut self,
            state: u32,
            reason: u32,
            crash_ns: u64,
            crash_cpu: u32,
            message: &str,
        ) {
            let msg = CString::new(message).unwrap();
            unsafe {
                crashring_set_state(
                    self.mem.as_mut_ptr().cast(),
                    state,
                    reason,
                    crash_ns,
                    crash_cpu,
                    msg.as_ptr(),
                )
            }
        }
        fn endian(&self) -> Endian {
            Endian::NATIVE
        }
    }

    /// The C writer reproduces the Rust writer's golden image byte for
    /// byte. Only the native-order image can be compared: the kernel writes
    /// its own byte order, so the big-endian image is the Rust writer's
    /// alone (FORMAT.md, "Byte order").
    #[test]
    fn c_writer_reproduces_the_golden_image() {
        assert_eq!(
            Endian::NATIVE,
            Endian::Little,
            "this machine's golden image is v1-le"
        );
        let mut region =
            CRegion::format(&scenario::config(Endian::NATIVE), scenario::BUFFER_SIZE).unwrap();
        scenario::replay(&mut region);
        let want =
            std::fs::read(crate::project_root().join("pstore-ring/golden/v1-le.bin")).unwrap();
        let got = region.bytes();
        let first = want.iter().zip(got).position(|(a, b)| a != b);
        assert!(
            first.is_none() && want.len() == got.len(),
            "C image differs from v1-le.bin at {first:?}"
        );
    }
}
