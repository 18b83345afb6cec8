//! `dmesg.txt`: the printk lines of the recovered trace, the way `dmesg`
//! and `makedumpfile --dump-dmesg` print them, so the people who read
//! those read this with no new tool. Only kernel streams' lines: a user
//! stream's `printk` records are its process's, never the kernel log
//! (they stay in the trace files, under the stream's `user:` label).
//! Debug messages the recorder took instead of printk are lines too, at
//! their time, as printk would have printed them.

use crate::output::debug::Debug;
use crate::output::kernel_log::stamp;
use crate::output::RegionView;
use pstore_ring::merge::Pulled;
use pstore_ring::schema::{Value, EVENT_PRINTK, PRINTK_CONTINUATION};
use pstore_ring::text::push_escaped;
use std::io::{self, Write};

/// Writes every printk line of `view`'s kernel streams in time order as
/// `[seconds.micros] text`. A continuation record (`KERN_CONT`) goes on
/// the line before it; a record's trailing newline ends its line, and
/// every other control character (newlines and carriage returns
/// included, so no record writes a line of its own) is written `\xNN`, as
/// the kernel does in `/dev/kmsg` ([`push_escaped`]). Returns the lines
/// written.
pub fn write(out: &mut impl Write, view: &RegionView) -> io::Result<u64> {
    let region = view.region;
    let Some(t) = region.schema.get(EVENT_PRINTK) else {
        return Ok(0);
    };
    let e = region.header.endian;
    let mut line = Vec::with_capacity(256);
    let mut lines = 0;
    let mut open = false;
    for item in view.merged_kernel() {
        let Pulled::Event(ev) = item else { continue };
        if let Some(debug) = Debug::of(view, &ev) {
            line.clear();
            if open {
                line.push(b'\n');
            }
            stamp(&mut line, ev.ts)?;
            push_escaped(&mut line, &debug.field_text());
            lines += 1;
            open = true;
            out.write_all(&line)?;
            continue;
        }
        if ev.type_id != EVENT_PRINTK {
            continue;
        }
        let Ok(values) = t.decode(ev.payload, e) else {
            continue;
        };
        let flags = values.iter().zip(&t.fields).find_map(|(v, f)| match v {
            Value::Unsigned(x) if f.name == "flags" => Some(*x),
            _ => None,
        });
        let text = values.iter().rev().find_map(|v| match v {
            Value::Str(s) | Value::Chars(s) => Some(*s),
            _ => None,
        });
        let Some(text) = text else { continue };
        line.clear();
        let continues = open && flags.is_some_and(|f| f & u64::from(PRINTK_CONTINUATION) != 0);
        if !continues {
            if open {
                line.push(b'\n');
            }
            stamp(&mut line, ev.ts)?;
            lines += 1;
        }
        push_escaped(&mut line, text.strip_suffix(b"\n").unwrap_or(text));
        open = true;
        out.write_all(&line)?;
    }
    if open {
        out.write_all(b"\n")?;
    }
    Ok(lines)
}
