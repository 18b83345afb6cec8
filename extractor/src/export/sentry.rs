//! `crashring export --sentry-envelope DIR`: each bundle as a Sentry
//! envelope (develop.sentry.dev/sdk/envelopes), `DIR/TOP.envelope`, for a
//! site that runs Sentry: `sentry-cli send-envelope FILE`, or a POST to
//! the project's `/api/ID/envelope/` endpoint, sends it.
//!
//! An envelope holds one event, the crash as Sentry shows an error:
//!
//! - `fingerprint`: `["crashring", SIGNATURE]`, so Sentry groups crashes
//!   by crashring's signature rather than by its own guess;
//! - `exception`: the crash's reason, its report's title and message, and
//!   a stack trace of the functions the signature names (`calls:`, then
//!   `at:`, innermost last as Sentry wants);
//! - `breadcrumbs`: the crashed region's last [`BREADCRUMBS`] events up to
//!   the crash, every stream's, with their wall time, level and text;
//! - `tags` and `contexts`: host, kernel, boot, generation, counts and
//!   losses, the signature's basis.
//!
//! and as attachments the bundle's `dmesg.txt` and, with
//! `--attach-bundle`, the bundle itself. The `event_id` is derived from
//! the bundle's top directory, so a crash sent twice is one event to
//! Sentry. Everything comes from the bundle, which is redacted already.

use super::rows::Crash;
use super::{gather, read_bundle, ExportError, Exported, Ready, Stop};
use crate::recover::report::utc;
use rayon::prelude::*;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Breadcrumbs an event carries: Sentry keeps 100 by default.
pub const BREADCRUMBS: usize = 100;

/// The largest `dmesg.txt` attached; a larger one is left out, and the
/// event says so.
pub const MAX_DMESG: u64 = 16 << 20;

/// Writes an envelope of each of `bundles` into `out` (made if missing),
/// with the bundle itself attached when `attach_bundle`, on every core;
/// `done` is called as each bundle is written or left out. In the
/// result, `crashes` counts events and `events` breadcrumbs.
pub fn to_sentry(
    out: &Path,
    bundles: &[PathBuf],
    attach_bundle: bool,
    done: &(dyn Fn() + Sync),
) -> Result<Exported, ExportError> {
    std::fs::create_dir_all(out).map_err(|source| ExportError::Io {
        what: format!("creating {}", out.display()),
        source,
    })?;
    let (kept, mut exported) = gather(bundles, done);
    let results: Vec<_> = kept
        .par_iter()
        .map(|(b, _)| {
            let one = envelope(out, b, attach_bundle);
            done();
            one
        })
        .collect();
    for r in results {
        exported.add(r?);
    }
    Ok(exported)
}

/// What an envelope is made of, read from its bundle.
struct Gathered {
    breadcrumbs: VecDeque<Value>,
    dmesg: Option<Vec<u8>>,
    /// Why `dmesg` is missing, if it is.
    dmesg_missing: Option<String>,
}

/// The region an envelope is about: the first that crashed, else the
/// first.
fn crashed(b: &Ready) -> &Crash {
    b.crashes
        .iter()
        .find(|c| c.cpu.is_some())
        .unwrap_or(&b.crashes[0])
}

fn envelope(out: &Path, b: &Ready, attach_bundle: bool) -> Result<Exported, ExportError> {
    let mut exported = Exported::default();
    let crash = crashed(b);
    let mut read = Gathered {
        breadcrumbs: VecDeque::with_capacity(BREADCRUMBS),
        dmesg: None,
        dmesg_missing: Some("the bundle has none".into()),
    };
    let result = read_bundle(
        b,
        &mut exported,
        |region, e| {
            if region.region == crash.region && crash.ts_ns.is_none_or(|at| e.ts() <= at as u64) {
                if read.breadcrumbs.len() == BREADCRUMBS {
                    read.breadcrumbs.pop_front();
                }
                read.breadcrumbs.push_back(breadcrumb(region, e));
            }
            Ok(())
        },
        |rel, r| {
            if rel != "dmesg.txt" {
                return Ok(());
            }
            let mut text = Vec::new();
            r.take(MAX_DMESG + 1).read_to_end(&mut text)?;
            if text.len() as u64 > MAX_DMESG {
                read.dmesg_missing = Some(format!("left out: over {MAX_DMESG} bytes"));
            } else {
                read.dmesg = Some(text);
                read.dmesg_missing = None;
            }
            Ok(())
        },
    );
    match result {
        Ok(()) => {}
        Err(Stop::Output(e)) => return Err(e),
        Err(Stop::Archive(e)) => exported.changed(b, &e),
    }
    // Events without a wall time cannot be breadcrumbs (Sentry requires
    // a timestamp): they stay in the bundle.
    read.breadcrumbs.retain(|c| c.get("timestamp").is_some());
    let path = out.join(format!("{}.envelope", b.top));
    let io_error = |source| ExportError::Io {
        what: format!("writing {}", path.display()),
        source,
    };
    let staged = tempfile::Builder::new()
        .prefix(".envelope-")
        .suffix(".staged")
        .tempfile_in(out)
        .map_err(io_error)?;
    let mut w = BufWriter::with_capacity(1 << 16, staged.as_file());
    let id = event_id(&b.top);
    let header = json!({
        "event_id": id,
        "sdk": { "name": "crashring", "version": env!("CARGO_PKG_VERSION") },
    });
    writeln!(w, "{header}").map_err(io_error)?;
    let event = event(b, crash, &id, &read);
    item(
        &mut w,
        json!({ "type": "event", "content_type": "application/json" }),
        &mut event.to_string().as_bytes(),
        None,
    )
    .map_err(io_error)?;
    if let Some(dmesg) = &read.dmesg {
        let header = attachment("dmesg.txt", "text/plain");
        item(&mut w, header, &mut dmesg.as_slice(), None).map_err(io_error)?;
    }
    if attach_bundle {
        let file = b.reopen().map_err(io_error)?;
        let size = file.metadata().map_err(io_error)?.len();
        let name = b.path.file_name().map_or_else(
            || format!("{}.tar.gz", b.top),
            |n| n.to_string_lossy().into_owned(),
        );
        let header = attachment(&name, "application/gzip");
        item(&mut w, header, &mut io::BufReader::new(file), Some(size)).map_err(io_error)?;
    }
    w.flush().map_err(io_error)?;
    drop(w);
    staged.as_file().sync_all().map_err(io_error)?;
    staged.persist(&path).map_err(|e| io_error(e.error))?;
    exported.bundles = 1;
    exported.crashes = 1;
    exported.events = read.breadcrumbs.len() as u64;
    exported.parts = vec![path];
    Ok(exported)
}

fn attachment(filename: &str, content_type: &str) -> Value {
    json!({
        "type": "attachment",
        "filename": filename,
        "content_type": content_type,
        "attachment_type": "event.attachment",
    })
}

/// Writes an item: its header with the payload's `length`, a newline,
/// the payload, a newline. A payload of unknown `size` is read whole
/// first; one of known size is copied as it is read, and must be that
/// size.
fn item(
    w: &mut impl Write,
    mut header: Value,
    payload: &mut dyn Read,
    size: Option<u64>,
) -> io::Result<()> {
    let mut held = Vec::new();
    let length = match size {
        Some(n) => n,
        None => {
            payload.read_to_end(&mut held)?;
            held.len() as u64
        }
    };
    header["length"] = json!(length);
    writeln!(w, "{header}")?;
    let copied = match size {
        Some(n) => io::copy(&mut payload.take(n), w)?,
        None => {
            w.write_all(&held)?;
            length
        }
    };
    if copied != length {
        return Err(io::Error::other(format!(
            "the attachment ended at {copied} of {length} bytes (changed meanwhile?)"
        )));
    }
    w.write_all(b"\n")
}

/// 32 hex digits: the start of a SHA-256 of the bundle's top directory.
fn event_id(top: &str) -> String {
    Sha256::digest(top.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Sentry's level for a printk level (`KERN_EMERG` 0 … `KERN_DEBUG` 7).
fn level_name(level: Option<i32>) -> &'static str {
    match level {
        Some(0..=2) => "fatal",
        Some(3) => "error",
        Some(4) => "warning",
        Some(7) => "debug",
        _ => "info",
    }
}

fn breadcrumb(crash: &Crash, e: &super::rows::Event) -> Value {
    let mut b = Map::new();
    if let Some(wall) = crate::recover::report::wall(e.ts(), &crash.wall) {
        b.insert("timestamp".into(), json!(utc(wall)));
    }
    b.insert("type".into(), json!("default"));
    b.insert(
        "category".into(),
        json!(format!("{}.{}", e.stream_label(), e.event_type())),
    );
    b.insert("level".into(), json!(level_name(e.level())));
    b.insert("message".into(), json!(e.text().unwrap_or(e.fields())));
    b.insert("data".into(), json!({ "ts_ns": e.ts() }));
    Value::Object(b)
}

/// Sentry's rules for a release: 1 to 200 characters, no newline, tab,
/// slash or backslash, not `.`, `..` or a space alone, not `latest`.
fn valid_release(r: &str) -> bool {
    (1..=200).contains(&r.chars().count())
        && !r.contains(['\n', '\r', '\t', '/', '\\'])
        && !matches!(r, "." | ".." | " " | "latest")
}

/// The lines of the signature's basis that begin with `key`.
fn basis<'a>(basis: &'a [String], key: &str) -> Option<&'a str> {
    basis.iter().find_map(|l| l.strip_prefix(key))
}

/// Stack frames from the basis, outermost first: `calls: a < b < c`
/// (a called by b called by c), then `at: f` where the registers were;
/// a function in a module is `name [module]` there.
fn frames(lines: &[String]) -> Vec<Value> {
    let frame = |f: &str| {
        let (function, package) = f.split_once(' ').unwrap_or((f, ""));
        let package = package.trim_start_matches('[').trim_end_matches(']');
        let mut v = json!({ "function": function, "in_app": true });
        if !package.is_empty() {
            v["package"] = json!(package);
        }
        v
    };
    let mut out: Vec<Value> = basis(lines, "calls: ")
        .map(|c| c.rsplit(" < ").map(frame).collect())
        .unwrap_or_default();
    if let Some(at) = basis(lines, "at: ") {
        out.push(frame(at));
    }
    out
}

fn event(b: &Ready, c: &Crash, id: &str, read: &Gathered) -> Value {
    let lines: Vec<String> = c
        .signature_basis
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default();
    let is_crash = c.cpu.is_some();
    let level = match c.reason.as_str() {
        _ if is_crash => "fatal",
        "snapshot" => "info",
        _ => "error",
    };
    let message = c.message.clone().unwrap_or_else(|| c.reason.clone());
    let mut event = json!({
        "event_id": id,
        "platform": "native",
        "level": level,
        "logger": "crashring",
        "server_name": c.host,
        "message": { "formatted": message },
        "tags": {
            "kernel_release": c.kernel_release,
            "crash_reason": c.reason,
            "boot_id": c.boot_id,
            "generation": c.generation.to_string(),
        },
        "contexts": {
            "os": { "type": "os", "name": "Linux", "kernel_version": c.kernel_release },
            "crashring": {
                "type": "crashring",
                "bundle": b.top,
                "region": c.region,
                "state": c.state,
                "events": c.events,
                "lost": c.lost,
                "lost_exact": c.lost_exact,
                "damaged": c.damaged,
                "signature_basis": lines,
                "hardware_error": c.hardware_error,
                "dmesg_attachment": read.dmesg_missing.clone().unwrap_or_else(|| "dmesg.txt".into()),
                "tool_version": b.tool,
            },
        },
        "breadcrumbs": { "values": read.breadcrumbs },
    });
    if let Some(t) = c.time {
        event["timestamp"] = json!(utc(t.into()));
    }
    if valid_release(&c.kernel_release) {
        event["release"] = json!(c.kernel_release);
    }
    if let Some(s) = &c.signature {
        event["fingerprint"] = json!(["crashring", s]);
        event["tags"]["crashring.signature"] = json!(s);
    }
    if is_crash {
        let title = basis(&lines, "title: ").map(String::from);
        let mut exception = json!({
            "type": format!("kernel {}", c.reason),
            "value": title.unwrap_or(message),
            "mechanism": { "type": "crashring", "handled": false },
        });
        let frames = frames(&lines);
        if !frames.is_empty() {
            exception["stacktrace"] = json!({ "frames": frames });
        }
        event["exception"] = json!({ "values": [exception] });
    }
    event
}

#[cfg(test)]
mod tests {
    use super::{frames, item, valid_release};
    use serde_json::json;

    #[test]
    fn frames_come_outermost_first_with_their_modules() {
        let basis = [
            "reason: oops".to_string(),
            "at: kiosk5_work [kiosk5]".into(),
            "calls: kiosk5_submit [kiosk5] < process_one_work < worker_thread".into(),
        ];
        assert_eq!(
            json!(frames(&basis)),
            json!([
                { "function": "worker_thread", "in_app": true },
                { "function": "process_one_work", "in_app": true },
                { "function": "kiosk5_submit", "package": "kiosk5", "in_app": true },
                { "function": "kiosk5_work", "package": "kiosk5", "in_app": true },
            ])
        );
        assert!(frames(&basis[..1]).is_empty());
    }

    #[test]
    fn releases_sentry_refuses_are_left_out() {
        assert!(valid_release("6.12.57+deb12-amd64"));
        for bad in ["", "latest", "..", "a/b", "a\nb", &"x".repeat(201)] {
            assert!(!valid_release(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_item_says_its_length_and_a_short_payload_is_refused() {
        let mut out = Vec::new();
        item(
            &mut out,
            json!({ "type": "attachment" }),
            &mut &b"ab\ncd"[..],
            None,
        )
        .unwrap();
        assert_eq!(out, b"{\"length\":5,\"type\":\"attachment\"}\nab\ncd\n");
        let err = item(&mut Vec::new(), json!({}), &mut &b"ab"[..], Some(3)).unwrap_err();
        assert!(err.to_string().contains("ended at 2 of 3 bytes"), "{err}");
    }
}
