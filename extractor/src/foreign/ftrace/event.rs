//! What a persistent ftrace event holds, said in text.
//!
//! Every event starts with `struct trace_entry`: its type id (u16), flags,
//! preempt count and pid. The ids of ftrace's own entries come from
//! `enum trace_type` (`kernel/trace/trace.h`), and only its first ones
//! have stayed put in every kernel read here: a function entry (1), a
//! `trace_marker` or `trace_printk` string (5), a binary `trace_printk`
//! (6, its format a pointer into the old kernel). Later ones moved: 6.13
//! put `TRACE_GRAPH_RETADDR_ENT` after `TRACE_GRAPH_ENT`, so 14, the
//! constant string (`TRACE_BPUTS`) before, is `TRACE_BLK` from then on.
//! Every other id, and every id a copy of the writing boot's
//! `/sys/kernel/tracing/events` ([`Formats`]) names otherwise, is read
//! by that copy only; without one an event is shown as its id and bytes,
//! never guessed.

use super::meta::{u32_at, u64_at};
use crate::kmem::symbols::Symbolizer;
use pstore_ring::text::Escaped;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// `sizeof(struct trace_entry)`.
pub const COMMON_SIZE: usize = 8;
const TRACE_FN: u16 = 1;
const TRACE_PRINT: u16 = 5;
const TRACE_BPRINT: u16 = 6;
/// The most bytes of an unknown event shown.
const RAW_SHOWN: usize = 64;

/// The fields every event starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Common {
    pub id: u16,
    pub pid: i32,
}

impl Common {
    pub fn of(data: &[u8]) -> Option<Common> {
        let head = data.get(..COMMON_SIZE)?;
        Some(Common {
            id: u16::from_le_bytes([head[0], head[1]]),
            pid: i32::from_le_bytes([head[4], head[5], head[6], head[7]]),
        })
    }
}

/// Event formats read from a copy of `events/` (`SYSTEM/NAME/format`).
#[derive(Debug, Default)]
pub struct Formats {
    by_id: HashMap<u16, Format>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Format {
    name: String,
    fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    decl: String,
    name: String,
    offset: usize,
    size: usize,
    signed: bool,
}

/// Why a formats directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatsError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}: no event format in it (expected SYSTEM/EVENT/format files)")]
    Empty(String),
}

/// Bytes of one `format` file read at most: the longest the kernel
/// writes is a few KiB.
const MAX_FORMAT: u64 = 64 << 10;
/// Bytes of a kept copy read at most.
const MAX_COPY: u64 = 64 << 20;

impl Formats {
    /// Reads every `SYSTEM/EVENT/format` under `path` (a copy of
    /// `/sys/kernel/tracing/events`), or, when `path` is a file, the
    /// format files in it one after the other ([`gather`]'s copy). A
    /// format that does not parse is skipped: its events then show as id
    /// and bytes.
    pub fn load(path: &Path) -> Result<Formats, FormatsError> {
        let io = |p: &Path, e| FormatsError::Io(p.display().to_string(), e);
        let formats = if path.is_file() {
            let text = read_bounded(path, MAX_COPY).map_err(|e| io(path, e))?;
            Formats::parse(&text)
        } else {
            let mut formats = Formats::default();
            for file in format_files(path).map_err(|e| io(path, e))? {
                if let Ok(text) = read_bounded(&file, MAX_FORMAT) {
                    formats.insert(&text);
                }
            }
            formats
        };
        if formats.by_id.is_empty() {
            return Err(FormatsError::Empty(path.display().to_string()));
        }
        Ok(formats)
    }

    /// The formats in `text`, format files one after the other, each
    /// starting at its `name:` line.
    pub fn parse(text: &str) -> Formats {
        let mut formats = Formats::default();
        let mut start = None;
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            if line.starts_with("name: ") {
                if let Some(s) = start.replace(at) {
                    formats.insert(&text[s..at]);
                }
            }
            at += line.len();
        }
        if let Some(s) = start {
            formats.insert(&text[s..]);
        }
        formats
    }

    fn insert(&mut self, text: &str) {
        if let Some((id, f)) = parse_format(text) {
            self.by_id.insert(id, f);
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The ids that have a format, in order.
    pub fn ids(&self) -> Vec<u16> {
        let mut ids: Vec<u16> = self.by_id.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// Every `SYSTEM/EVENT/format` under `events`, in path order.
fn format_files(events: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for system in std::fs::read_dir(events)? {
        let Ok(list) = std::fs::read_dir(system?.path()) else {
            continue;
        };
        files.extend(list.flatten().map(|e| e.path().join("format")));
    }
    files.sort();
    Ok(files)
}

/// `path`'s text, at most `max` bytes of it.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Every format under `events` (a running kernel's
/// `/sys/kernel/tracing/events`) one after the other, as [`Formats::load`]
/// reads a file of them, and how many there were.
pub fn gather(events: &Path) -> std::io::Result<(String, usize)> {
    let mut text = String::new();
    let mut count = 0;
    for file in format_files(events)? {
        let Ok(format) = read_bounded(&file, MAX_FORMAT) else {
            continue;
        };
        if !format.starts_with("name: ") || text.len() as u64 + format.len() as u64 > MAX_COPY {
            continue;
        }
        text.push_str(&format);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        count += 1;
    }
    Ok((text, count))
}

/// One `format` file: its id and fields.
fn parse_format(text: &str) -> Option<(u16, Format)> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("name: ") {
            name = Some(n.to_string());
        } else if let Some(i) = line.strip_prefix("ID: ") {
            id = i.trim().parse().ok();
        } else if let Some(f) = line.strip_prefix("field:") {
            fields.push(parse_field(f)?);
        }
    }
    Some((
        id?,
        Format {
            name: name?,
            fields,
        },
    ))
}

/// `TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`
fn parse_field(text: &str) -> Option<Field> {
    let mut parts = text.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut number = |key: &str| -> Option<usize> { parts.next()?.strip_prefix(key)?.parse().ok() };
    let offset = number("offset:")?;
    let size = number("size:")?;
    let signed = number("signed:")? != 0;
    let name_at = decl.rfind([' ', '*'])? + 1;
    let name = decl[name_at..].split('[').next()?.to_string();
    Some(Field {
        decl: decl.to_string(),
        name,
        offset,
        size,
        signed,
    })
}

/// The event `data` in one line: its kind, then what it holds; a code
/// address by its symbol where `symbols` names it.
pub fn describe(data: &[u8], formats: Option<&Formats>, symbols: Option<&Symbolizer>) -> String {
    let Some(common) = Common::of(data) else {
        return format!("(event of {} bytes, too short for its header)", data.len());
    };
    let mut out = String::new();
    let format = formats.and_then(|f| f.by_id.get(&common.id));
    // The writing boot's formats say what an id is; ftrace's own entries
    // are shown as built in where they agree, or name none for the id.
    let own = |name: &str| format.is_none_or(|f| f.name == name);
    match (common.id, format) {
        (TRACE_PRINT, _) if own("print") => {
            out.push_str("print: ");
            let text = data.get(16..).unwrap_or_default();
            let text = text.split(|&b| b == 0).next().unwrap_or_default();
            let _ = write!(out, "{}", Escaped(text.strip_suffix(b"\n").unwrap_or(text)));
        }
        (TRACE_FN, _) if own("function") && data.len() >= 24 => {
            let (ip, parent) = (u64_at(data, 8), u64_at(data, 16));
            let _ = match symbols {
                Some(s) => write!(out, "function: {} <- {}", s.name(ip), s.name(parent)),
                None => write!(out, "function: {ip:#x} <- {parent:#x}"),
            };
        }
        (TRACE_BPRINT, _) if own("bprint") && data.len() >= 24 => {
            let args: Vec<String> = data[24..]
                .chunks_exact(4)
                .map(|w| format!("{:#x}", u32_at(w, 0)))
                .collect();
            let _ = write!(
                out,
                "bprint: format at {:#x} (the old kernel's memory), arguments [{}]",
                u64_at(data, 16),
                args.join(", ")
            );
        }
        (_, Some(format)) => {
            out.push_str(&format.name);
            out.push(':');
            for field in format
                .fields
                .iter()
                .filter(|f| !f.name.starts_with("common_"))
            {
                let _ = write!(out, " {}=", field.name);
                push_field(&mut out, data, field);
            }
        }
        (id, None) => {
            let _ = write!(out, "event {id}: {} bytes", data.len() - COMMON_SIZE);
            for b in data[COMMON_SIZE..].iter().take(RAW_SHOWN) {
                let _ = write!(out, " {b:02x}");
            }
            if data.len() - COMMON_SIZE > RAW_SHOWN {
                out.push_str(" ...");
            }
        }
    }
    out
}

/// One field's value: a number, a string, or its bytes in hex.
fn push_field(out: &mut String, data: &[u8], f: &Field) {
    let is_char = f.decl.contains("char");
    let (start, len) = if f.decl.starts_with("__data_loc") || f.decl.starts_with("__rel_loc") {
        // The offset is the format file's: past 2^64 is past the event.
        let word = f.offset.checked_add(4).and_then(|end| {
            let loc = u32_at(data.get(f.offset..end)?, 0);
            Some((end, loc))
        });
        let Some((end, loc)) = word else {
            out.push_str("(past the event)");
            return;
        };
        // A __rel_loc counts from the end of its own word.
        let base = if f.decl.starts_with("__rel_loc") {
            end
        } else {
            0
        };
        (base + (loc & 0xffff) as usize, (loc >> 16) as usize)
    } else if f.size == 0 {
        (f.offset, data.len().saturating_sub(f.offset))
    } else {
        (f.offset, f.size)
    };
    let Some(bytes) = data.get(start..start.saturating_add(len)) else {
        out.push_str("(past the event)");
        return;
    };
    let array = f.decl.contains('[');
    match (array, is_char, bytes.len()) {
        (true, true, _) => {
            let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
            let _ = write!(out, "{}", Escaped(text));
        }
        (false, _, 1 | 2 | 4 | 8) => {
            let mut w = [0u8; 8];
            w[..bytes.len()].copy_from_slice(bytes);
            let value = u64::from_le_bytes(w);
            if f.decl.contains('*') {
                let _ = write!(out, "{value:#x}");
            } else if f.signed {
                let shift = 64 - 8 * bytes.len() as u32;
                let _ = write!(out, "{}", ((value << shift) as i64) >> shift);
            } else {
                let _ = write!(out, "{value}");
            }
        }
        _ => {
            out.push_str("0x");
            for b in bytes {
                let _ = write!(out, "{b:02x}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events/ftrace/print/format` as Debian's 6.12 prints it.
    const PRINT_FORMAT: &str = "name: print\nID: 5\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n\nprint fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";

    /// A made-up event with every kind of field.
    const SAMPLE_FORMAT: &str = "name: sample\nID: 600\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char comm[8];\toffset:8;\tsize:8;\tsigned:0;\n\tfield:int delta;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:void * ptr;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:__data_loc char[] name;\toffset:32;\tsize:4;\tsigned:0;\n\tfield:u8 raw[3];\toffset:36;\tsize:3;\tsigned:0;\n\nprint fmt: \"...\"\n";

    fn sample() -> Vec<u8> {
        let mut e = vec![0u8; 48];
        e[..2].copy_from_slice(&600u16.to_le_bytes());
        e[4..8].copy_from_slice(&42i32.to_le_bytes());
        e[8..12].copy_from_slice(b"kworker\0"[..4].as_ref());
        e[16..20].copy_from_slice(&(-5i32).to_le_bytes());
        e[24..32].copy_from_slice(&0xffff_8880_1234_5678u64.to_le_bytes());
        e[32..36].copy_from_slice(&(40u32 | 6 << 16).to_le_bytes());
        e[36..39].copy_from_slice(&[1, 2, 0xff]);
        e[40..46].copy_from_slice(b"eth0\x01\0");
        e
    }

    fn formats(files: &[(&str, &str)]) -> Formats {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("format"), text).unwrap();
        }
        Formats::load(dir.path()).unwrap()
    }

    #[test]
    fn fields_are_read_as_the_format_declares_them() {
        let f = formats(&[
            ("ftrace/print", PRINT_FORMAT),
            ("test/sample", SAMPLE_FORMAT),
        ]);
        assert_eq!(f.len(), 2);
        assert_eq!(
            describe(&sample(), Some(&f), None),
            "sample: comm=kwor delta=-5 ptr=0xffff888012345678 name=eth0\\x01 raw=0x0102ff"
        );
        // Without formats, an event given out at boot is its id and bytes.
        let raw = describe(&sample(), None, None);
        assert!(
            raw.starts_with("event 600: 40 bytes 6b 77 6f 72 00 00 00 00 fb ff"),
            "{raw}"
        );
    }

    #[test]
    fn a_gathered_copy_reads_as_the_directory_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("ftrace/print", PRINT_FORMAT),
            ("test/sample", SAMPLE_FORMAT),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("format"), text).unwrap();
        }
        // tracefs' other files are not formats.
        std::fs::write(dir.path().join("enable"), "0\n").unwrap();
        let (text, count) = gather(dir.path()).unwrap();
        assert_eq!(count, 2);
        let copy = dir.path().join("copy");
        std::fs::write(&copy, &text).unwrap();
        let (from_copy, from_dir) = (
            Formats::load(&copy).unwrap(),
            Formats::load(dir.path()).unwrap(),
        );
        assert_eq!(from_copy.by_id, from_dir.by_id);
        assert_eq!(
            describe(&sample(), Some(&from_copy), None),
            describe(&sample(), Some(&from_dir), None)
        );
        // A file with no format in it is refused as an empty directory is.
        std::fs::write(&copy, "not formats\n").unwrap();
        assert!(matches!(Formats::load(&copy), Err(FormatsError::Empty(_))));
    }

    #[test]
    fn ftrace_own_entries_need_no_format() {
        let mut print = vec![5, 0, 0, 0, 1, 0, 0, 0];
        print.extend(0xffff_ffff_8100_0000u64.to_le_bytes());
        print.extend(b"hello\x1b\n\0\0");
        assert_eq!(describe(&print, None, None), "print: hello\\x1b");
        let mut function = vec![1, 0, 0, 0, 1, 0, 0, 0];
        function.extend(0xffff_ffff_8100_0010u64.to_le_bytes());
        function.extend(0xffff_ffff_8100_0020u64.to_le_bytes());
        assert_eq!(
            describe(&function, None, None),
            "function: 0xffffffff81000010 <- 0xffffffff81000020"
        );
        assert_eq!(
            describe(&[5, 0], None, None),
            "(event of 2 bytes, too short for its header)"
        );
    }

    /// `events/ftrace/bputs/format` as 6.12 prints it (id 14 there).
    const BPUTS_FORMAT: &str = "name: bputs\nID: 14\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:const char * str;\toffset:16;\tsize:8;\tsigned:0;\n\nprint fmt: \"%ps: %s\", (void *)REC->ip, REC->str\n";

    #[test]
    fn an_id_past_the_stable_ones_is_read_by_the_formats_only() {
        // Id 14: a constant string before 6.13, TRACE_BLK since.
        let mut e = vec![14, 0, 0, 0, 1, 0, 0, 0];
        e.extend(0xffff_ffff_8100_0010u64.to_le_bytes());
        e.extend(0xffff_ffff_8200_0020u64.to_le_bytes());
        assert_eq!(
            describe(&e, None, None),
            "event 14: 16 bytes 10 00 00 81 ff ff ff ff 20 00 00 82 ff ff ff ff"
        );
        let f = Formats::parse(BPUTS_FORMAT);
        assert_eq!(
            describe(&e, Some(&f), None),
            "bputs: ip=18446744071578845200 str=0xffffffff82000020"
        );
        // A stable id the formats name otherwise is read by them.
        let f = Formats::parse(&SAMPLE_FORMAT.replace("ID: 600", "ID: 5"));
        let mut print = sample();
        print[..2].copy_from_slice(&5u16.to_le_bytes());
        assert!(describe(&print, Some(&f), None).starts_with("sample: comm=kwor "));
        // And as built in where they agree.
        let f = Formats::parse(PRINT_FORMAT);
        let mut print = vec![5, 0, 0, 0, 1, 0, 0, 0];
        print.extend(0xffff_ffff_8100_0000u64.to_le_bytes());
        print.extend(b"hi\n\0");
        assert_eq!(describe(&print, Some(&f), None), "print: hi");
    }

    #[test]
    fn a_field_past_the_event_is_said_not_read() {
        let f = formats(&[("test/sample", SAMPLE_FORMAT)]);
        let mut short = sample();
        short[32..36].copy_from_slice(&(200u32 | 6 << 16).to_le_bytes());
        short.truncate(40);
        assert!(describe(&short, Some(&f), None).contains("name=(past the event)"));
        // An offset at the top of the address space, from a damaged copy.
        let far = SAMPLE_FORMAT.replace("offset:32;", &format!("offset:{};", usize::MAX - 1));
        let f = Formats::parse(&far);
        assert!(describe(&sample(), Some(&f), None).contains("name=(past the event)"));
    }

    #[test]
    fn a_directory_without_formats_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Formats::load(dir.path()).unwrap_err().to_string();
        assert!(
            e.ends_with("no event format in it (expected SYSTEM/EVENT/format files)"),
            "{e}"
        );
    }
}
