//! `debug` events in every format: the message printk would have
//! printed, formatted when read (pstore-ring's
//! [`Region::debug_message`](pstore_ring::read::Region::debug_message)),
//! and the callsite it came from.

use super::jsonl::{write_string, write_u64};
use super::RegionView;
use pstore_ring::layout::CALLSITE_DRM;
use pstore_ring::read::{DebugEvent, Event, Message};

/// A `debug` event and its message.
pub(crate) struct Debug<'a> {
    pub event: DebugEvent<'a>,
    pub message: Message<'a>,
}

impl<'a> Debug<'a> {
    /// `e`'s message, if `e` is a `debug` event.
    pub fn of(view: &RegionView<'_, 'a>, e: &Event<'a>) -> Option<Debug<'a>> {
        let region = view.region;
        let t = region.schema.get(e.type_id)?;
        let event = DebugEvent::parse(t, e.payload, region.header.endian)?;
        let message = region.debug_message(&event, &view.pointers);
        Some(Debug { event, message })
    }

    /// What a timeline calls it: its tag and text, printk's newline
    /// left out (`drm.KMS bochs-drm 0000:00:02.0: [drm:...] ...`), or its
    /// tag alone when it cannot be formatted.
    pub fn name(&self) -> Vec<u8> {
        let mut name = self.event.tag(self.message.callsite.as_ref());
        if let Ok(text) = &self.message.text {
            name.push(b' ');
            name.extend_from_slice(text.strip_suffix(b"\n").unwrap_or(text));
        }
        name
    }

    /// The message as a trace format's `message` field holds it: printk's
    /// newline left out, or why it cannot be had, in angle brackets.
    pub fn field_text(&self) -> Vec<u8> {
        match &self.message.text {
            Ok(text) => text.strip_suffix(b"\n").unwrap_or(text).to_vec(),
            Err(why) => format!("<{why}>").into_bytes(),
        }
    }

    /// The JSON keys that follow the event's fields: `"message"` (or
    /// `"message_error"`) and `"callsite"`, each after a comma.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match &self.message.text {
            Ok(text) => {
                out.extend_from_slice(b",\"message\":");
                write_string(out, text);
            }
            Err(why) => {
                out.extend_from_slice(b",\"message_error\":");
                write_string(out, why.to_string().as_bytes());
            }
        }
        let Some(c) = &self.message.callsite else {
            return;
        };
        out.extend_from_slice(b",\"callsite\":{\"source\":");
        write_string(out, source_name(c.source).as_bytes());
        for (key, value) in [
            ("module", c.module),
            ("function", c.function),
            ("file", c.file),
        ] {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            write_string(out, value);
        }
        out.extend_from_slice(b",\"line\":");
        write_u64(out, c.line.into());
        out.push(b'}');
    }
}

/// A callsite's source: `drm` or `dyndbg`.
pub(crate) fn source_name(source: u8) -> &'static str {
    if source == CALLSITE_DRM {
        "drm"
    } else {
        "dyndbg"
    }
}
