//! A `debug` event read back as the line printk would have printed
//! (FORMAT.md, section 18): its callsite's format, looked up in the
//! callsite area, formatted over the recorded arguments by [`kprintf`],
//! behind the prefixes the kernel puts in front of it.
//!
//! [`kprintf`]: crate::kprintf

use super::{CallsiteError, EventType, Region};
use crate::debug_args::{Callsite, DebugArgs};
use crate::endian::{u32_at, Endian};
use crate::kprintf::{self, ArgError, Pointers};
use crate::layout::CALLSITE_DRM;
use crate::schema::{
    builtin, Value, DEBUG_CUT, DEBUG_FILE, DEBUG_FORMATTED, DEBUG_FUNCTION, DEBUG_IN_INTERRUPT,
    DEBUG_LINE, DEBUG_MODULE, DEBUG_PREFIX_128, DEBUG_TID, EVENT_DEBUG,
};
use crate::text::decimal_str;
use alloc::vec::Vec;

/// The longest text printk keeps of a line: `LOG_LINE_MAX` (1024 less a
/// 48-byte prefix, 6.1 through 7.3) less the terminating NUL.
pub const PRINTK_LINE_MAX: usize = 975;

/// DRM's debug categories, by bit number (`enum drm_debug_category`).
const DRM_CATEGORIES: [&str; 10] = [
    "CORE", "DRIVER", "KMS", "PRIME", "ATOMIC", "VBL", "STATE", "LEASE", "DP", "DRMRES",
];

/// The name of DRM debug category `bit` (`KMS` for 2), if it has one.
pub fn drm_category_name(bit: u16) -> Option<&'static str> {
    DRM_CATEGORIES.get(usize::from(bit)).copied()
}

/// DRM's category bit named `name` (any case), if there is one.
pub fn drm_category_bit(name: &str) -> Option<u16> {
    let at = DRM_CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))?;
    u16::try_from(at).ok()
}

/// A `debug` event's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebugEvent<'p> {
    /// The callsite's id, 0 when the writer could not add it.
    pub callsite: u32,
    pub level: u8,
    pub flags: u8,
    /// DRM's category bit, `0xFFFF` for none.
    pub category: u16,
    /// The device as the kernel names it in front of the message.
    pub device: &'p [u8],
    /// The arguments, or the formatted text ([`DEBUG_FORMATTED`]).
    pub args: &'p [u8],
}

/// Whether `t` is the format's `debug` type: a region's schema table may
/// define id 25 otherwise.
pub fn is_debug_type(t: &EventType) -> bool {
    builtin(EVENT_DEBUG).is_some_and(|def| {
        t.id == def.id
            && t.fields.len() == def.fields.len()
            && t.fields
                .iter()
                .zip(def.fields)
                .all(|(f, d)| f.name == d.name && f.kind == d.kind)
    })
}

impl<'p> DebugEvent<'p> {
    /// The event's fields, if `t` is the format's `debug` type
    /// ([`is_debug_type`]) and `payload` decodes.
    pub fn parse(t: &EventType, payload: &'p [u8], e: Endian) -> Option<DebugEvent<'p>> {
        if !is_debug_type(t) {
            return None;
        }
        let mut v = t.values(payload, e);
        let mut next = || v.next()?.ok();
        match (next()?, next()?, next()?, next()?, next()?, next()?) {
            (
                Value::Unsigned(callsite),
                Value::Unsigned(level),
                Value::Unsigned(flags),
                Value::Unsigned(category),
                Value::Str(device),
                Value::Bytes(args),
            ) => Some(DebugEvent {
                callsite: u32::try_from(callsite).ok()?,
                level: u8::try_from(level).ok()?,
                flags: u8::try_from(flags).ok()?,
                category: u16::try_from(category).ok()?,
                device,
                args,
            }),
            _ => None,
        }
    }

    /// Whether the writer cut the arguments (or text) to fit the record.
    pub fn cut(&self) -> bool {
        self.flags & DEBUG_CUT != 0
    }

    /// What the message is tagged with when shown: `drm.KMS` for a DRM
    /// category, `dyndbg.MODULE` for a dynamic-debug callsite, `debug`
    /// when neither is known.
    pub fn tag(&self, callsite: Option<&Callsite<'_>>) -> Vec<u8> {
        let mut tag = Vec::with_capacity(16);
        match (callsite, drm_category_name(self.category)) {
            (_, Some(name)) => {
                tag.extend_from_slice(b"drm.");
                tag.extend_from_slice(name.as_bytes());
            }
            (Some(c), None) if c.source == CALLSITE_DRM => {
                tag.extend_from_slice(b"drm");
            }
            (Some(c), None) => {
                tag.extend_from_slice(b"dyndbg.");
                tag.extend_from_slice(c.module);
            }
            (None, None) => tag.extend_from_slice(b"debug"),
        }
        tag
    }
}

/// Why a `debug` event cannot be shown as its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error(transparent)]
    Callsite(#[from] CallsiteError),
    #[error("the event names no callsite and holds no text")]
    NoCallsite,
    #[error("the event's prefix asks for a thread id, and its arguments are shorter than one")]
    NoThreadId,
    #[error(transparent)]
    Args(#[from] ArgError),
}

/// A `debug` event as its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The callsite the event names, when its entry passed its checks.
    pub callsite: Option<Callsite<'a>>,
    /// The text printk would have printed (the device's and the source's
    /// prefixes included), at most [`PRINTK_LINE_MAX`] bytes; or why it
    /// cannot be had.
    pub text: Result<Vec<u8>, MessageError>,
}

impl<'a> Region<'a> {
    /// `ev` as printk would have printed it, pointers shown as `pointers`
    /// says.
    ///
    /// The text is dynamic debug's prefix when the event's flags ask for
    /// it, the device's name and `": "` when the event names a device (as
    /// `dev_printk()` and `netdev_printk()` put it), then for a DRM
    /// callsite `"[drm:FUNCTION] "` (as `__drm_dev_dbg()` puts it), then
    /// the format over the arguments; or the text the writer formatted
    /// itself when it could not add the callsite.
    pub fn debug_message(&self, ev: &DebugEvent<'_>, pointers: &Pointers) -> Message<'a> {
        let mut text = Vec::with_capacity(128);
        let device = |text: &mut Vec<u8>| {
            if !ev.device.is_empty() {
                text.extend_from_slice(ev.device);
                text.extend_from_slice(b": ");
            }
        };
        if ev.flags & DEBUG_FORMATTED != 0 {
            device(&mut text);
            text.extend_from_slice(ev.args);
            text.truncate(PRINTK_LINE_MAX);
            return Message {
                callsite: None,
                text: Ok(text),
            };
        }
        let failed = |e: MessageError| Message {
            callsite: None,
            text: Err(e),
        };
        if ev.callsite == 0 {
            return failed(MessageError::NoCallsite);
        }
        let callsite = match self.callsite(ev.callsite) {
            Ok(c) => c,
            Err(e) => return failed(e.into()),
        };
        let mut args = ev.args;
        if ev.flags & DEBUG_TID != 0 {
            let Some(tid) = u32_at(args, 0, self.header.endian) else {
                return failed(MessageError::NoThreadId);
            };
            args = &args[4..];
            dyndbg_prefix(&mut text, ev.flags, Some(tid), &callsite);
        } else {
            dyndbg_prefix(&mut text, ev.flags, None, &callsite);
        }
        device(&mut text);
        if callsite.source == CALLSITE_DRM {
            text.extend_from_slice(b"[drm:");
            text.extend_from_slice(callsite.function);
            text.extend_from_slice(b"] ");
        }
        let room = PRINTK_LINE_MAX.saturating_sub(text.len());
        text.truncate(PRINTK_LINE_MAX);
        let mut args = DebugArgs::new(args, self.header.endian);
        let text = kprintf::format(callsite.format, &mut args, pointers, room)
            .map(|body| {
                text.extend_from_slice(&body.text);
                text
            })
            .map_err(MessageError::from);
        Message {
            callsite: Some(callsite),
            text,
        }
    }
}

/// Dynamic debug's prefix, as the kernel's `__dynamic_emit_prefix()`
/// writes it for the parts `flags` names: `[TID] ` (or `<intr> `), then
/// `MODULE:`, `FUNCTION:`, `FILE:`, `LINE:` and a space after any of
/// those four; cut where the writer's kernel cuts it.
fn dyndbg_prefix(text: &mut Vec<u8>, flags: u8, tid: Option<u32>, c: &Callsite<'_>) {
    let start = text.len();
    match tid {
        Some(DEBUG_IN_INTERRUPT) => text.extend_from_slice(b"<intr> "),
        Some(tid) => {
            // task_pid_vnr() is an int.
            let tid = tid as i32;
            text.push(b'[');
            if tid < 0 {
                text.push(b'-');
            }
            let mut digits = [0; 20];
            text.extend_from_slice(decimal_str(tid.unsigned_abs().into(), &mut digits).as_bytes());
            text.extend_from_slice(b"] ");
        }
        None => {}
    }
    let after_tid = text.len();
    for (bit, part) in [
        (DEBUG_MODULE, c.module),
        (DEBUG_FUNCTION, c.function),
        (DEBUG_FILE, c.file),
    ] {
        if flags & bit != 0 {
            text.extend_from_slice(part);
            text.push(b':');
        }
    }
    if flags & DEBUG_LINE != 0 {
        let mut digits = [0; 20];
        text.extend_from_slice(decimal_str(c.line.into(), &mut digits).as_bytes());
        text.push(b':');
    }
    if text.len() != after_tid {
        text.push(b' ');
    }
    let size = if flags & DEBUG_PREFIX_128 != 0 {
        128
    } else {
        64
    };
    text.truncate(start + (text.len() - start).min(size - 1));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debug_args::{encode, encoded_len, DebugArg};
    use crate::layout::CALLSITE_DYNDBG;
    use crate::read::HeaderTrust;
    use crate::write::{self, RegionConfig, StreamSpec};

    /// A region with three callsites (DRM, dynamic debug, DRM with a
    /// `*` width), then `events`
    /// (callsite index or id, device, flags, args) on CPU 0; the
    /// messages of its `debug` events, pointers raw.
    fn messages(events: &[(u32, &[u8], u8, &[DebugArg])]) -> Vec<Result<Vec<u8>, MessageError>> {
        messages_of(events, Some(4242))
    }

    /// [`messages`], the arguments of an event whose flags have
    /// `DEBUG_TID` behind thread id `tid` (none: left out).
    fn messages_of(
        events: &[(u32, &[u8], u8, &[DebugArg])],
        tid: Option<u32>,
    ) -> Vec<Result<Vec<u8>, MessageError>> {
        let mut out = Vec::new();
        for e in [Endian::Little, Endian::Big] {
            let mut mem = alloc::vec![0u8; 64 * 1024];
            let specs = [StreamSpec::cpu(0)];
            let cfg = RegionConfig {
                page_size: 4096,
                streams: &specs,
                endian: e,
                callsite_pages: 1,
                ..Default::default()
            };
            let mut region = write::format(&mut mem, &cfg).unwrap();
            let mut area = region.callsites.take().unwrap();
            let drm = Callsite {
                source: CALLSITE_DRM,
                level: 7,
                category: 2,
                line: 2310,
                module: b"drm",
                function: b"drm_mode_setcrtc [drm]",
                file: b"drivers/gpu/drm/drm_crtc.c",
                format: b"[CRTC:%d:%s]\n",
            };
            let dyndbg = Callsite {
                source: CALLSITE_DYNDBG,
                level: 7,
                category: 0xffff,
                line: 77,
                module: b"e1000",
                function: b"e1000_watchdog",
                file: b"drivers/net/e1000/e1000_main.c",
                format: b"link %s at %p\n",
            };
            let wide = Callsite {
                format: b"%*d|\n",
                ..drm
            };
            let ids = [
                area.add(&drm).unwrap(),
                area.add(&dyndbg).unwrap(),
                area.add(&wide).unwrap(),
            ];
            let def = builtin(EVENT_DEBUG).unwrap();
            let mut cpu0 = region.streams.next().unwrap();
            for (i, &(site, device, flags, args)) in events.iter().enumerate() {
                let id = ids.get(site as usize).copied().unwrap_or(site);
                let mut bytes = alloc::vec![0u8; encoded_len(args)];
                encode(&mut bytes, args, e).unwrap();
                if let Some(tid) = tid.filter(|_| flags & DEBUG_TID != 0) {
                    let tid = match e {
                        Endian::Little => tid.to_le_bytes(),
                        Endian::Big => tid.to_be_bytes(),
                    };
                    bytes.splice(0..0, tid);
                }
                let cat = if site == 0 { 2 } else { 0xffff };
                cpu0.write_event(
                    i as u64 + 1,
                    def,
                    &[
                        Value::Unsigned(id.into()),
                        Value::Unsigned(7),
                        Value::Unsigned(flags.into()),
                        Value::Unsigned(cat),
                        Value::Str(device),
                        Value::Bytes(&bytes),
                    ],
                )
                .unwrap();
            }
            let region = crate::read::Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
            let t = region.schema.get(EVENT_DEBUG).unwrap();
            let got: Vec<_> = region
                .decode()
                .streams
                .iter()
                .flat_map(|s| s.events.iter())
                .map(|ev| {
                    let d = DebugEvent::parse(t, ev.payload, e).unwrap();
                    region.debug_message(&d, &Pointers::Raw).text
                })
                .collect();
            if out.is_empty() {
                out = got;
            } else {
                assert_eq!(out, got, "the same messages in either byte order");
            }
        }
        out
    }

    #[test]
    fn dynamic_debug_prefixes_read_as_the_kernel_writes_them() {
        use DebugArg::{Addr, Str};
        let args: &[DebugArg] = &[Str(b"up"), Addr(0xab)];
        let dev: &[u8] = b"e1000 0000:00:03.0 eth0";
        let all = DEBUG_TID | DEBUG_MODULE | DEBUG_FUNCTION | DEBUG_FILE | DEBUG_LINE;
        let got = messages(&[
            (1, b"", all | DEBUG_PREFIX_128, args),
            (1, dev, DEBUG_MODULE | DEBUG_LINE, args),
            (1, b"", DEBUG_TID, args),
            (1, b"", DEBUG_FUNCTION | DEBUG_PREFIX_128, args),
            // 6.1's PREFIX_SIZE of 64: the prefix cut at 63 bytes.
            (1, b"", all, args),
        ]);
        let ok = |s: &str| Ok(s.as_bytes().to_vec());
        let all_parts = "[4242] e1000:e1000_watchdog:drivers/net/e1000/e1000_main.c:77: ";
        assert_eq!(
            got,
            [
                ok(&format!("{all_parts}link up at 00000000000000ab\n")),
                ok("e1000:77: e1000 0000:00:03.0 eth0: link up at 00000000000000ab\n"),
                // The thread id alone: no space but its own.
                ok("[4242] link up at 00000000000000ab\n"),
                ok("e1000_watchdog: link up at 00000000000000ab\n"),
                ok(&format!(
                    "{}link up at 00000000000000ab\n",
                    &all_parts[..63]
                )),
            ]
        );
        let intr = messages_of(
            &[(1, b"", DEBUG_TID | DEBUG_LINE, args)],
            Some(DEBUG_IN_INTERRUPT),
        );
        assert_eq!(intr, [ok("<intr> 77: link up at 00000000000000ab\n")]);
        // A thread id that is not there is said to be missing.
        let short = messages_of(&[(1, b"", DEBUG_TID, &[])], None);
        assert_eq!(short, [Err(MessageError::NoThreadId)]);
    }

    #[test]
    fn messages_read_as_printk_prints_them() {
        use DebugArg::{Addr, Int, Str};
        let got = messages(&[
            (0, b"bochs-drm 0000:00:02.0", 0, &[Int(34), Str(b"crtc-0")]),
            (0, b"", 0, &[Int(35), Str(b"crtc-1")]),
            (1, b"e1000 0000:00:03.0 eth0", 0, &[Str(b"up"), Addr(0xab)]),
            (0, b"", DEBUG_FORMATTED, &[]),
        ]);
        let ok = |s: &str| Ok(s.as_bytes().to_vec());
        assert_eq!(
            got[..3],
            [
                ok("bochs-drm 0000:00:02.0: [drm:drm_mode_setcrtc [drm]] [CRTC:34:crtc-0]\n"),
                ok("[drm:drm_mode_setcrtc [drm]] [CRTC:35:crtc-1]\n"),
                ok("e1000 0000:00:03.0 eth0: link up at 00000000000000ab\n"),
            ]
        );
        // Formatted by the writer: the arguments are the text.
        assert_eq!(got[3], ok(""));
    }

    #[test]
    fn what_cannot_be_formatted_says_why() {
        use DebugArg::{Int, Str};
        let got = messages(&[
            (0, b"", 0, &[Str(b"x"), Int(1)]),
            (0, b"", 0, &[Int(1)]),
            (4, b"", 0, &[Int(1)]),
            (0x2000, b"", 0, &[]),
        ]);
        let shown: Vec<_> = got
            .iter()
            .map(|r| alloc::format!("{}", r.as_ref().unwrap_err()))
            .collect();
        assert_eq!(
            shown,
            [
                "conversion 1 of the format takes an integer, and the recorded argument is a string",
                "the arguments end before conversion 2 of the format",
                "callsite 0x4 is not a 4-byte aligned offset inside the area's entries",
                "callsite 0x2000 is not a 4-byte aligned offset inside the area's entries",
            ]
        );
    }

    #[test]
    fn a_long_message_stops_where_printk_stops() {
        let got = messages(&[(2, b"dev", 0, &[DebugArg::Int(2000), DebugArg::Int(1)])]);
        let text = got[0].as_ref().unwrap();
        assert_eq!(text.len(), PRINTK_LINE_MAX);
        assert!(text.starts_with(b"dev: [drm:drm_mode_setcrtc [drm]]      "));
    }

    /// The rings wrap; the callsite area is not theirs: the oldest debug
    /// events that survive a hundred laps still format.
    #[test]
    fn messages_survive_a_hundred_laps_of_the_ring() {
        use crate::read::LossKind;
        const PAGES: u32 = 4;
        const PAGE: u32 = 1024;
        let mut mem = alloc::vec![0u8; 64 * 1024];
        let specs = [StreamSpec::cpu(0)];
        let cfg = RegionConfig {
            page_size: PAGE,
            pages_per_stream: Some(PAGES),
            streams: &specs,
            callsite_pages: 1,
            ..Default::default()
        };
        let mut region = write::format(&mut mem, &cfg).unwrap();
        let mut area = region.callsites.take().unwrap();
        let formats: [&[u8]; 3] = [b"crtc %d: %s\n", b"plane %u of %d\n", b"%s=%x\n"];
        let ids: Vec<u32> = formats
            .iter()
            .map(|&format| {
                area.add(&Callsite {
                    source: CALLSITE_DRM,
                    level: 7,
                    category: 2,
                    line: 0,
                    module: b"bochs",
                    function: b"bochs_pipe_update [bochs]",
                    file: b"",
                    format,
                })
                .unwrap()
            })
            .collect();
        let def = builtin(EVENT_DEBUG).unwrap();
        let mut cpu0 = region.streams.next().unwrap();
        let (mut written, mut n) = (0u64, 0u64);
        while written < 100 * u64::from(PAGES * PAGE) {
            let args = [DebugArg::Int(n), DebugArg::Str(b"1024x768")];
            let args = match n % 3 {
                0 => alloc::vec![args[0], args[1]],
                1 => alloc::vec![args[0], DebugArg::Int(n % 7)],
                _ => alloc::vec![args[1], args[0]],
            };
            let mut bytes = alloc::vec![0u8; encoded_len(&args)];
            encode(&mut bytes, &args, Endian::Little).unwrap();
            let values = [
                Value::Unsigned(ids[(n % 3) as usize].into()),
                Value::Unsigned(7),
                Value::Unsigned(0),
                Value::Unsigned(2),
                Value::Str(b"bochs-drm 0000:00:02.0"),
                Value::Bytes(&bytes),
            ];
            cpu0.write_event(n + 1, def, &values).unwrap();
            written += 40 + bytes.len() as u64;
            n += 1;
        }
        let region = crate::read::Region::parse(&mem, HeaderTrust::Checksummed).unwrap();
        let trace = region.decode();
        let stream = &trace.streams[0];
        assert!(stream.lost(LossKind::Overwritten) > 90 * stream.events.len() as u64);
        let t = region.schema.get(EVENT_DEBUG).unwrap();
        let first = stream.events.first().unwrap();
        assert!(
            first.ts > n * 9 / 10,
            "the oldest survivor is from the last laps"
        );
        for ev in &stream.events {
            let d = DebugEvent::parse(t, ev.payload, Endian::Little).unwrap();
            let text = region.debug_message(&d, &Pointers::Raw).text.unwrap();
            let i = ev.ts - 1;
            let want = match i % 3 {
                0 => alloc::format!("crtc {i}: 1024x768"),
                1 => alloc::format!("plane {i} of {}", i % 7),
                _ => alloc::format!("1024x768={i:x}"),
            };
            let want =
                alloc::format!("bochs-drm 0000:00:02.0: [drm:bochs_pipe_update [bochs]] {want}\n");
            assert_eq!(text, want.as_bytes());
        }
    }

    #[test]
    fn categories_by_name_and_number() {
        assert_eq!(drm_category_name(2), Some("KMS"));
        assert_eq!(drm_category_name(9), Some("DRMRES"));
        assert_eq!(drm_category_name(10), None);
        assert_eq!(drm_category_bit("atomic"), Some(4));
        assert_eq!(drm_category_bit("nope"), None);
    }
}
