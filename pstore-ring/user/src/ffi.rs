//! The C API: `include/crashring_user.h` declares these functions, and
//! defines `crashring_log()` and `crashring_vlog()` inline over
//! [`crashring_log_text`], since formatting a C `va_list` belongs to C.
//!
//! Every function takes the pointers the others returned; null pointers
//! are refused with `-EINVAL` or null, never dereferenced.

use crate::recorder::{Backing, Config, Recorder, Stream};
use pstore_ring::schema::{EventDef, FieldDef, FieldKind};
use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;

/// `struct crashring_field_def`.
#[repr(C)]
pub struct CFieldDef {
    name: *const c_char,
    /// FORMAT.md's field kind code (`CRASHRING_FIELD_*`).
    kind: u8,
    /// The length of a `chars` field; ignored for the others.
    size: u16,
}

/// `struct crashring_event_def`.
#[repr(C)]
pub struct CEventDef {
    id: u8,
    name: *const c_char,
    nfields: u16,
    fields: *const CFieldDef,
}

/// `struct crashring_user_config`. Zeros take [`Config::new`]'s values.
#[repr(C)]
pub struct CConfig {
    name: *const c_char,
    path: *const c_char,
    streams: u16,
    pages_per_stream: u32,
    page_size: u32,
    nevents: u16,
    events: *const CEventDef,
    /// `CRASHRING_USER_AUTO` (0), `_KERNEL` (1) or `_FILE` (2).
    backing: u32,
    categories: *const *const c_char,
    ncategories: u16,
    categories_off: u64,
}

/// Reads a C string, `None` for null or not UTF-8.
///
/// # Safety
/// `p` is null or a NUL-terminated string that outlives `'a`.
unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    CStr::from_ptr(p).to_str().ok()
}

/// # Safety
/// `p` is null or points to `n` valid `T`.
unsafe fn items<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if p.is_null() || n == 0 {
        return &[];
    }
    std::slice::from_raw_parts(p, n)
}

/// The C event definitions as pstore-ring's, or `None` if one is malformed.
///
/// # Safety
/// As [`crashring_recorder_create`]'s `events`.
unsafe fn events<'a>(
    defs: &'a [CEventDef],
    fields: &'a mut Vec<Vec<FieldDef<'a>>>,
) -> Option<Vec<EventDef<'a>>> {
    for d in defs {
        let mut fs = Vec::new();
        for f in items(d.fields, d.nfields.into()) {
            let kind = FieldKind::from_code(f.kind, f.size)?;
            fs.push(FieldDef {
                name: text(f.name)?,
                kind,
            });
        }
        fields.push(fs);
    }
    defs.iter()
        .zip(fields.iter())
        .map(|(d, fs)| {
            Some(EventDef {
                id: d.id,
                name: text(d.name)?,
                fields: fs,
            })
        })
        .collect()
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = e };
}

/// Formats a region file and maps it; null with `errno` set on failure
/// (`EINVAL` for a bad configuration, the file's error otherwise).
///
/// # Safety
/// `cfg` is null or a valid configuration whose strings and arrays live
/// through the call.
#[no_mangle]
pub unsafe extern "C" fn crashring_recorder_create(cfg: *const CConfig) -> *mut Recorder {
    let Some(c) = cfg.as_ref() else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let Some(name) = text(c.name) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let mut fields = Vec::new();
    let Some(defs) = events(items(c.events, c.nevents.into()), &mut fields) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let backing = match c.backing {
        0 => Backing::Auto,
        1 => Backing::Kernel,
        2 => Backing::File,
        _ => {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
    };
    let Some(categories) = items(c.categories, c.ncategories.into())
        .iter()
        .map(|&p| text(p))
        .collect::<Option<Vec<&str>>>()
    else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let defaults = Config::new(name);
    let nonzero = |v: u32, d: u32| if v == 0 { d } else { v };
    let config = Config {
        path: text(c.path).map(PathBuf::from),
        streams: if c.streams == 0 {
            defaults.streams
        } else {
            c.streams
        },
        pages_per_stream: c.pages_per_stream,
        page_size: nonzero(c.page_size, defaults.page_size),
        events: &defs,
        backing,
        categories: &categories,
        categories_off: c.categories_off,
        ..defaults
    };
    match Recorder::create(&config) {
        Ok(r) => Box::into_raw(Box::new(r)),
        Err(e) => {
            set_errno(errno_of(&e));
            std::ptr::null_mut()
        }
    }
}

/// The errno a C caller gets for `e`: the system's for a file or the
/// kernel, EBUSY when every stream is held, EINVAL for a configuration.
fn errno_of(e: &crate::Error) -> c_int {
    match e {
        crate::Error::File { source, .. } | crate::Error::Kernel { source } => {
            source.raw_os_error().unwrap_or(libc::EIO)
        }
        crate::Error::Busy => libc::EBUSY,
        _ => libc::EINVAL,
    }
}

/// Closes every page and marks the region cleanly ended. Every stream
/// must have been put back first.
///
/// # Safety
/// `rec` is null or from [`crashring_recorder_create`], destroyed once.
#[no_mangle]
pub unsafe extern "C" fn crashring_recorder_destroy(rec: *mut Recorder) {
    if !rec.is_null() {
        drop(Box::from_raw(rec));
    }
}

/// The word whose bit N says whether category N is recorded now, for
/// the header's inline `crashring_enabled()`; null for a null recorder.
///
/// # Safety
/// `rec` is null or a live recorder; the word lives as long as it.
#[no_mangle]
pub unsafe extern "C" fn crashring_recorder_enabled(rec: *const Recorder) -> *const u64 {
    match rec.as_ref() {
        Some(rec) => rec.enabled_word().as_ptr().cast_const(),
        None => std::ptr::null(),
    }
}

/// The calling thread's stream, or null (`EBUSY`) when all are held.
///
/// # Safety
/// `rec` is null or a live recorder, which outlives the stream.
#[no_mangle]
pub unsafe extern "C" fn crashring_stream_get(rec: *const Recorder) -> *mut Stream<'static> {
    let Some(rec) = rec.as_ref() else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    match rec.stream() {
        Ok(s) => Box::into_raw(Box::new(s)),
        Err(e) => {
            set_errno(errno_of(&e));
            std::ptr::null_mut()
        }
    }
}

/// Gives a stream back to its recorder, for another thread to continue.
///
/// # Safety
/// `s` is null or from [`crashring_stream_get`], put back once.
#[no_mangle]
pub unsafe extern "C" fn crashring_stream_put(s: *mut Stream<'static>) {
    if !s.is_null() {
        drop(Box::from_raw(s));
    }
}

fn status(r: Result<(), crate::Dropped>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(_) => -libc::EMSGSIZE,
    }
}

/// Records `len` bytes of `text` as a `log` event; 0, or `-EMSGSIZE` when
/// the event could not be recorded (it is counted as dropped).
///
/// # Safety
/// `s` is a stream this thread holds; `category` is null or a C string;
/// `text` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn crashring_log_text(
    s: *mut Stream<'static>,
    level: c_int,
    category: *const c_char,
    text: *const c_char,
    len: usize,
) -> c_int {
    let Some(s) = s.as_mut() else {
        return -libc::EINVAL;
    };
    let category = if category.is_null() {
        &[][..]
    } else {
        CStr::from_ptr(category).to_bytes()
    };
    let text = items(text.cast::<u8>(), len);
    status(s.log_bytes(level.clamp(0, 7) as u8, category, text))
}

/// Records `len` bytes already encoded as event type `type_id`.
///
/// # Safety
/// `s` is a stream this thread holds; `payload` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn crashring_write(
    s: *mut Stream<'static>,
    type_id: u8,
    payload: *const u8,
    len: usize,
) -> c_int {
    let Some(s) = s.as_mut() else {
        return -libc::EINVAL;
    };
    status(s.write(type_id, items(payload, len)))
}

/// `struct crashring_report`: what `crashring_request_report()` fills in.
#[repr(C)]
pub struct CReport {
    /// The bundle's name in the bundle directory, NUL-terminated.
    bundle: [c_char; 256],
    events: u64,
    /// A copy of the bundle in this process's memory (a memfd, at its
    /// start), or -1.
    copy_fd: c_int,
    /// Why there is none, NUL-terminated (cut to fit).
    why: [c_char; 512],
}

/// Copies `s` into `out` as a C string, cut to fit.
fn put(out: &mut [c_char], s: &str) {
    let n = s.len().min(out.len() - 1);
    for (o, &b) in out.iter_mut().zip(&s.as_bytes()[..n]) {
        *o = b as c_char;
    }
    out[n] = 0;
}

/// Asks crashring's request service (its socket, or the one
/// `CRASHRING_REQUEST_SOCKET` names outside a set-user-ID, set-group-ID
/// or file-capability program: `request::socket`) for a report of the
/// caller's own session (`crashring_request`). 0 with `out` filled in;
/// otherwise a negative errno with `out->why` saying why: `-EPERM`
/// refused by the policy, `-EAGAIN` rate-limited or busy with another
/// request of the caller's (`out->why` says which), `-EIO` the service
/// failed or broke the protocol, or the report was written but its copy
/// did not come whole (`out->bundle` then names it), `-EINVAL` a request
/// that cannot be sent, or the socket's error (`-ENOENT`,
/// `-ECONNREFUSED`: no service).
///
/// # Safety
/// `reason` is a C string; `streams` is null or points to `nstreams` C
/// strings; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn crashring_request_report_of(
    reason: *const c_char,
    streams: *const *const c_char,
    nstreams: usize,
    want_copy: c_int,
    out: *mut CReport,
) -> c_int {
    use crate::request::{self, RequestError};
    let Some(out) = out.as_mut() else {
        return -libc::EINVAL;
    };
    out.bundle[0] = 0;
    out.events = 0;
    out.copy_fd = -1;
    out.why[0] = 0;
    let names: Option<Vec<String>> = items(streams, nstreams)
        .iter()
        .map(|&p| text(p).map(str::to_string))
        .collect();
    let (Some(reason), Some(names)) = (text(reason), names) else {
        put(
            &mut out.why,
            "the reason and stream names must be UTF-8 C strings",
        );
        return -libc::EINVAL;
    };
    let asked = request::Request {
        reason: reason.into(),
        streams: names,
        copy: want_copy != 0,
    };
    match request::request_report_with(&asked, &request::socket()) {
        Ok(report) => {
            put(&mut out.bundle, &report.bundle);
            out.events = report.events;
            out.copy_fd = report.copy.map_or(-1, std::os::fd::IntoRawFd::into_raw_fd);
            0
        }
        Err(e) => {
            put(&mut out.why, &e.to_string());
            if let RequestError::Copy { bundle, events, .. } = &e {
                // Written all the same, and counted against the rate limit.
                put(&mut out.bundle, bundle);
                out.events = *events;
            }
            match e {
                RequestError::Invalid(_) => -libc::EINVAL,
                RequestError::Unreachable { source, .. } => {
                    -source.raw_os_error().unwrap_or(libc::EIO)
                }
                RequestError::Refused(_) => -libc::EPERM,
                RequestError::RateLimited { .. } => -libc::EAGAIN,
                RequestError::Protocol(_)
                | RequestError::NoAnswer { .. }
                | RequestError::Failed(_)
                | RequestError::Copy { .. } => -libc::EIO,
            }
        }
    }
}

/// [`crashring_request_report_of`] for all of the caller's streams,
/// without a copy.
///
/// # Safety
/// As [`crashring_request_report_of`].
#[no_mangle]
pub unsafe extern "C" fn crashring_request_report(
    reason: *const c_char,
    out: *mut CReport,
) -> c_int {
    crashring_request_report_of(reason, std::ptr::null(), 0, 0, out)
}
