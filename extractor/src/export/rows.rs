//! The two tables' schemas and their rows: a crash row from a region of
//! a bundle's `MANIFEST.json`, an event row from a line of its
//! `events.jsonl`. Both are outside data: a field missing or of the
//! wrong type is an error naming it, never a panic or a made-up value.
//! extractor/SCHEMAS.md documents the columns.

use super::table::{Cell, Schema};
use crate::recover::report::{parse_utc, utc, wall};
use pstore_ring::read::{ClockStep, WallClock};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;

/// One row per region of a bundle (one region, one row, for a bundle of
/// one machine's crash).
pub const CRASHES: Schema = Schema {
    message: "message crashes {
        REQUIRED BYTE_ARRAY bundle (STRING);
        REQUIRED INT32 region;
        REQUIRED BYTE_ARRAY host (STRING);
        REQUIRED BYTE_ARRAY boot_id (STRING);
        REQUIRED BYTE_ARRAY kernel_release (STRING);
        REQUIRED INT64 generation;
        REQUIRED BYTE_ARRAY state (STRING);
        REQUIRED BYTE_ARRAY reason (STRING);
        OPTIONAL BYTE_ARRAY message (STRING);
        OPTIONAL INT32 cpu;
        OPTIONAL INT64 ts_ns;
        OPTIONAL INT64 time (TIMESTAMP(NANOS,true));
        OPTIONAL BYTE_ARRAY hardware_error (STRING);
        OPTIONAL BYTE_ARRAY signature (STRING);
        OPTIONAL BYTE_ARRAY signature_basis (JSON);
        REQUIRED INT64 events;
        REQUIRED INT64 lost;
        REQUIRED BOOLEAN lost_exact;
        OPTIONAL INT64 user_events;
        REQUIRED BOOLEAN damaged;
        REQUIRED BYTE_ARRAY tool_version (STRING);
    }",
    version: "crashes 1",
    distinct: &["signature_basis", "message"],
};

/// One row per event or loss of a bundle's `events.jsonl` files.
pub const EVENTS: Schema = Schema {
    message: "message events {
        REQUIRED BYTE_ARRAY bundle (STRING);
        REQUIRED INT32 region;
        REQUIRED BYTE_ARRAY kind (STRING);
        REQUIRED INT32 stream;
        OPTIONAL INT32 cpu;
        OPTIONAL INT32 lane;
        OPTIONAL BYTE_ARRAY stream_name (STRING);
        OPTIONAL INT64 pid;
        OPTIONAL INT64 uid;
        REQUIRED INT64 ts_ns;
        OPTIONAL INT64 time (TIMESTAMP(NANOS,true));
        REQUIRED BYTE_ARRAY type (STRING);
        REQUIRED BOOLEAN salvaged;
        OPTIONAL INT32 level;
        OPTIONAL BYTE_ARRAY text (STRING);
        OPTIONAL BYTE_ARRAY callsite (STRING);
        REQUIRED BYTE_ARRAY fields (JSON);
    }",
    version: "events 1",
    distinct: &["fields", "ts_ns", "time"],
};

/// A region of a bundle, as its crashes row has it, with what its events
/// rows need.
#[derive(Clone, Debug)]
pub struct Crash {
    pub region: i32,
    pub host: String,
    pub boot_id: String,
    pub kernel_release: String,
    pub generation: i64,
    pub state: String,
    /// The crash's reason, `shutdown`, `snapshot`, or the state.
    pub reason: String,
    pub message: Option<String>,
    pub cpu: Option<i32>,
    pub ts_ns: Option<i64>,
    /// Nanoseconds since the Unix epoch.
    pub time: Option<i64>,
    pub hardware_error: Option<String>,
    pub signature: Option<String>,
    pub signature_basis: Option<String>,
    pub events: i64,
    pub lost: i64,
    pub lost_exact: bool,
    pub user_events: Option<i64>,
    pub damaged: bool,
    /// The region's wall clock, for its events' `time`.
    pub wall: WallClock,
    /// Its `events.jsonl` in the bundle; `None` in a bundle made before
    /// bundles had one.
    pub events_file: Option<String>,
}

impl Crash {
    /// The row, with the bundle's name and the tool that made it.
    pub fn cells<'a>(&'a self, bundle: &'a str, tool: &'a str) -> [Cell<'a>; 21] {
        [
            Cell::Str(bundle),
            Cell::I32(self.region),
            Cell::Str(&self.host),
            Cell::Str(&self.boot_id),
            Cell::Str(&self.kernel_release),
            Cell::I64(self.generation),
            Cell::Str(&self.state),
            Cell::Str(&self.reason),
            opt_str(&self.message),
            self.cpu.map_or(Cell::Null, Cell::I32),
            self.ts_ns.map_or(Cell::Null, Cell::I64),
            self.time.map_or(Cell::Null, Cell::I64),
            opt_str(&self.hardware_error),
            opt_str(&self.signature),
            opt_str(&self.signature_basis),
            Cell::I64(self.events),
            Cell::I64(self.lost),
            Cell::Bool(self.lost_exact),
            self.user_events.map_or(Cell::Null, Cell::I64),
            Cell::Bool(self.damaged),
            Cell::Str(tool),
        ]
    }

    /// The UTC day its row is filed under: of its time, else of the
    /// region's creation, else `unknown`.
    pub fn day(&self, created: Option<i64>) -> String {
        self.time
            .or(created)
            .map_or_else(|| "unknown".into(), |ns| utc(ns.into())[..10].to_string())
    }
}

fn opt_str(s: &Option<String>) -> Cell<'_> {
    s.as_deref().map_or(Cell::Null, Cell::Str)
}

/// What a manifest lacks, named by its place: `regions[0].boot_id`.
pub type Missing = String;

/// A manifest's value at `path` (keys separated by dots), or what is
/// missing.
fn at<'v>(v: &'v Value, path: &str) -> Result<&'v Value, Missing> {
    path.split('.')
        .try_fold(v, |v, key| v.get(key))
        .filter(|v| !v.is_null())
        .ok_or_else(|| path.to_string())
}

fn text(v: &Value, path: &str) -> Result<String, Missing> {
    at(v, path)?
        .as_str()
        .map(String::from)
        .ok_or_else(|| format!("{path} (not a string)"))
}

fn int(v: &Value, path: &str) -> Result<i64, Missing> {
    at(v, path)?
        .as_i64()
        .ok_or_else(|| format!("{path} (not a 64-bit integer)"))
}

fn flag(v: &Value, path: &str) -> Result<bool, Missing> {
    at(v, path)?
        .as_bool()
        .ok_or_else(|| format!("{path} (not true or false)"))
}

fn small(v: &Value, path: &str) -> Result<i32, Missing> {
    i32::try_from(int(v, path)?).map_err(|_| format!("{path} (out of range)"))
}

/// The time `path` gives in [`utc`]'s form, if it is there.
fn time(v: &Value, path: &str) -> Result<Option<i64>, Missing> {
    match at(v, path) {
        Err(_) => Ok(None),
        Ok(t) => t
            .as_str()
            .and_then(parse_utc)
            .and_then(|ns| i64::try_from(ns).ok())
            .map(Some)
            .ok_or_else(|| format!("{path} (not a UTC time)")),
    }
}

/// The rows of `manifest`'s regions, with the time of its creation of
/// the first region, for a bundle filed by day.
pub fn crashes(manifest: &Value) -> Result<(Vec<Crash>, Option<i64>), Missing> {
    let regions = at(manifest, "regions")?
        .as_array()
        .ok_or("regions (not a list)")?;
    if regions.is_empty() {
        return Err("regions (empty)".into());
    }
    let request = manifest.get("request").filter(|r| !r.is_null());
    let mut rows = Vec::with_capacity(regions.len());
    for (i, r) in regions.iter().enumerate() {
        let within = |e: Missing| format!("regions[{i}].{e}");
        rows.push(crash(r, request).map_err(within)?);
    }
    let created = time(&regions[0], "clock.created_utc").map_err(|e| format!("regions[0].{e}"))?;
    Ok((rows, created))
}

fn crash(r: &Value, request: Option<&Value>) -> Result<Crash, Missing> {
    // Before the first step listed: the header's offset, or with older
    // steps ignored, the one the newest of them set.
    let base = match at(r, "clock.offset_before_steps_ns") {
        Ok(_) => int(r, "clock.offset_before_steps_ns")?,
        Err(_) => int(r, "clock.wall_offset_ns")?,
    };
    let mut steps = Vec::new();
    if let Some(list) = r.get("clock").and_then(|c| c.get("steps")) {
        let list = list.as_array().ok_or("clock.steps (not a list)")?;
        for (index, s) in list.iter().enumerate() {
            let ts = int(s, "ns").map_err(|e| format!("clock.steps[{index}].{e}"))?;
            let offset =
                int(s, "wall_offset_ns").map_err(|e| format!("clock.steps[{index}].{e}"))?;
            steps.push(ClockStep {
                ts: ts as u64,
                stream: 0,
                index: index as u64,
                wall_offset_ns: offset,
            });
        }
    }
    // What happened: a crash, a shutdown with a reason, a snapshot, or
    // nothing but the state.
    let state = text(r, "state")?;
    let (reason, message, cpu, ts_ns, time_at) = if r.get("crash").is_some_and(|c| !c.is_null()) {
        (
            text(r, "crash.reason")?,
            Some(text(r, "crash.message")?),
            Some(small(r, "crash.cpu")?),
            Some(int(r, "crash.time_ns")?),
            time(r, "crash.time_utc")?,
        )
    } else if r.get("shutdown").is_some_and(|s| !s.is_null()) {
        (
            "shutdown".into(),
            Some(text(r, "shutdown.reason")?),
            None,
            Some(int(r, "shutdown.time_ns")?),
            time(r, "shutdown.time_utc")?,
        )
    } else if let Some(q) = request {
        (
            "snapshot".into(),
            Some(text(q, "why").map_err(|e| format!("(request) {e}"))?),
            None,
            None,
            time(q, "time").map_err(|e| format!("(request) {e}"))?,
        )
    } else {
        (state.clone(), None, None, None, None)
    };
    let signature = match r.get("signature").filter(|s| !s.is_null()) {
        None => (None, None),
        Some(_) => (
            Some(text(r, "signature.id")?),
            Some(at(r, "signature.basis")?.to_string()),
        ),
    };
    let user_events = match r.get("user_streams").filter(|u| !u.is_null()) {
        None => None,
        Some(_) => Some(int(r, "user_streams.recovered")?),
    };
    Ok(Crash {
        region: small(r, "index")?,
        host: text(r, "hostname")?,
        boot_id: text(r, "boot_id")?,
        kernel_release: text(r, "kernel_release")?,
        generation: int(r, "generation")?,
        state,
        reason,
        message,
        cpu,
        ts_ns,
        time: time_at,
        hardware_error: match r.get("crash").and_then(|c| c.get("hardware_error")) {
            Some(h) if !h.is_null() => Some(text(r, "crash.hardware_error")?),
            _ => None,
        },
        signature: signature.0,
        signature_basis: signature.1,
        events: int(r, "recovered")?,
        lost: int(r, "lost")?,
        lost_exact: flag(r, "lost_exact")?,
        user_events,
        damaged: flag(r, "damaged")?,
        wall: WallClock::from_steps(base, steps),
        events_file: match r.get("files").and_then(|f| f.get("events")) {
            None => None,
            Some(_) => Some(text(r, "files.events")?),
        },
    })
}

/// A debug message's callsite.
#[derive(Deserialize)]
struct Callsite<'a> {
    #[serde(borrow)]
    module: Cow<'a, str>,
    #[serde(borrow)]
    function: Cow<'a, str>,
    #[serde(borrow)]
    file: Cow<'a, str>,
    line: u32,
}

/// A line of `events.jsonl` (extractor/SCHEMAS.md): an event or a loss.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    stream: u16,
    cpu: Option<u16>,
    lane: Option<u8>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    pid: Option<u32>,
    uid: Option<u32>,
    ts: u64,
    // An event's.
    #[serde(rename = "type", borrow)]
    event_type: Option<Cow<'a, str>>,
    salvaged: Option<bool>,
    #[serde(borrow)]
    fields: Option<&'a RawValue>,
    #[serde(borrow)]
    raw: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow)]
    described: Option<Cow<'a, str>>,
    #[serde(borrow)]
    callsite: Option<Callsite<'a>>,
    // A loss's.
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    events: Option<u64>,
    pages: Option<u64>,
    after_ts: Option<u64>,
    before_ts: Option<u64>,
    #[serde(borrow)]
    cause: Option<Cow<'a, str>>,
    exact: Option<bool>,
}

/// What the events table takes from an event's fields.
#[derive(Default)]
struct Common<'a> {
    level: Option<i64>,
    text: Option<Cow<'a, str>>,
    message: Option<Cow<'a, str>>,
}

impl<'a> Common<'a> {
    /// Takes each of `fields`' keys only where its value has the kind the
    /// table wants: a custom type may call a field `level` and make it a
    /// word, or repeat a key (the last is taken, as JSON readers do), and
    /// its event still has a row.
    fn of(fields: &'a RawValue) -> Result<Common<'a>, String> {
        let map: HashMap<&'a str, &'a RawValue> =
            serde_json::from_str(fields.get()).map_err(|e| format!("fields: {e}"))?;
        let text = |key: &str| -> Option<Cow<'a, str>> {
            let v = map.get(key)?.get();
            match serde_json::from_str::<&'a str>(v) {
                Ok(s) => Some(Cow::Borrowed(s)),
                Err(_) => serde_json::from_str::<String>(v).ok().map(Cow::Owned),
            }
        };
        Ok(Common {
            level: map
                .get("level")
                .and_then(|v| serde_json::from_str(v.get()).ok()),
            text: text("text"),
            message: text("message"),
        })
    }
}

/// An events row, parsed from one line; it borrows the line.
pub struct Event<'a> {
    line: Line<'a>,
    fields: Cow<'a, str>,
    level: Option<i32>,
    text: Option<Cow<'a, str>>,
    callsite: Option<String>,
}

impl<'a> Event<'a> {
    /// Parses `line`; the error says what is wrong with it.
    pub fn parse(line: &'a str) -> Result<Event<'a>, String> {
        let line: Line = serde_json::from_str(line).map_err(|e| e.to_string())?;
        match line.kind.as_ref() {
            "event" => {
                if line.event_type.is_none() {
                    return Err("an event without a type".into());
                }
                let (fields, common) = match (line.fields, &line.raw) {
                    (Some(f), _) => {
                        let common = Common::of(f)?;
                        (Cow::Borrowed(f.get()), common)
                    }
                    (None, Some(raw)) => (
                        Cow::Owned(json!({ "raw": raw }).to_string()),
                        Common::default(),
                    ),
                    (None, None) => return Err("an event without fields or raw".into()),
                };
                // What a person reads first: a debug message formatted,
                // a hardware error in words, a line's text.
                let text = line
                    .message
                    .clone()
                    .or_else(|| line.described.clone())
                    .or(common.text)
                    .or(common.message);
                let level = common.level.and_then(|l| i32::try_from(l).ok());
                let callsite = line
                    .callsite
                    .as_ref()
                    .map(|c| format!("{}:{} {}:{}", c.module, c.function, c.file, c.line));
                Ok(Event {
                    line,
                    fields,
                    level,
                    text,
                    callsite,
                })
            }
            "loss" => {
                let (Some(reason), Some(count)) = (line.reason.clone(), line.events) else {
                    return Err("a loss without a reason and a count".into());
                };
                let fields = json!({
                    "events": line.events,
                    "pages": line.pages,
                    "after_ts": line.after_ts,
                    "before_ts": line.before_ts,
                    "cause": line.cause,
                    "exact": line.exact,
                })
                .to_string();
                Ok(Event {
                    text: Some(Cow::Owned(format!("{count} events lost ({reason})"))),
                    line,
                    fields: Cow::Owned(fields),
                    level: None,
                    callsite: None,
                })
            }
            other => Err(format!("kind {other:?} is neither event nor loss")),
        }
    }

    /// On the region's clock.
    pub fn ts(&self) -> u64 {
        self.line.ts
    }

    /// The event type's name, or a loss's kind.
    pub fn event_type(&self) -> &str {
        let l = &self.line;
        match l.kind.as_ref() {
            "loss" => l.reason.as_deref().unwrap_or_default(),
            _ => l.event_type.as_deref().unwrap_or_default(),
        }
    }

    pub fn level(&self) -> Option<i32> {
        self.level
    }

    /// What a person reads first (the `text` column).
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// The fields as JSON (the `fields` column).
    pub fn fields(&self) -> &str {
        &self.fields
    }

    /// Its stream as a person names it: `cpu3` (`cpu3.1` in a nested
    /// lane), a user stream's name, or `streamN`.
    pub fn stream_label(&self) -> String {
        let l = &self.line;
        match (l.cpu, l.lane, &l.name) {
            (Some(cpu), Some(lane), _) if lane > 0 => format!("cpu{cpu}.{lane}"),
            (Some(cpu), _, _) => format!("cpu{cpu}"),
            (None, _, Some(name)) => name.to_string(),
            (None, _, None) => format!("stream{}", l.stream),
        }
    }

    /// The row, of region `crash` of the bundle named `bundle`.
    pub fn cells<'c>(&'c self, bundle: &'c str, crash: &Crash) -> [Cell<'c>; 17] {
        let l = &self.line;
        let ts = l.ts;
        let event_type = self.event_type();
        [
            Cell::Str(bundle),
            Cell::I32(crash.region),
            Cell::Str(&l.kind),
            Cell::I32(l.stream.into()),
            l.cpu.map_or(Cell::Null, |c| Cell::I32(c.into())),
            l.lane.map_or(Cell::Null, |c| Cell::I32(c.into())),
            l.name.as_deref().map_or(Cell::Null, Cell::Str),
            l.pid.map_or(Cell::Null, |p| Cell::I64(p.into())),
            l.uid.map_or(Cell::Null, |u| Cell::I64(u.into())),
            // Trace times are below 2^63 ns (292 years of uptime); a
            // hostile one is clamped rather than wrapped.
            Cell::I64(i64::try_from(ts).unwrap_or(i64::MAX)),
            wall(ts, &crash.wall)
                .and_then(|w| i64::try_from(w).ok())
                .map_or(Cell::Null, Cell::I64),
            Cell::Str(event_type),
            Cell::Bool(l.salvaged.unwrap_or(false)),
            self.level.map_or(Cell::Null, Cell::I32),
            self.text.as_deref().map_or(Cell::Null, Cell::Str),
            self.callsite.as_deref().map_or(Cell::Null, Cell::Str),
            Cell::Str(&self.fields),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::{crashes, Event, CRASHES, EVENTS};
    use crate::export::table::Cell;
    use serde_json::json;

    #[test]
    fn schemas_parse_and_rows_fit_them() {
        let crashes_schema = CRASHES.parse().unwrap();
        let events_schema = EVENTS.parse().unwrap();
        let manifest = manifest();
        let (rows, _) = crashes(&manifest).unwrap();
        assert_eq!(
            rows[0].cells("b", "t").len(),
            crashes_schema.get_fields().len()
        );
        let line = r#"{"kind":"event","region":0,"stream":0,"cpu":0,"ts":5,"type":"printk","salvaged":false,"fields":{"level":3,"text":"hello"}}"#;
        let event = Event::parse(line).unwrap();
        assert_eq!(
            event.cells("b", &rows[0]).len(),
            events_schema.get_fields().len()
        );
    }

    fn manifest() -> serde_json::Value {
        json!({
            "regions": [{
                "index": 0,
                "hostname": "signage-7",
                "boot_id": "30313233343536373839616263646566",
                "kernel_release": "6.12.48+deb12-amd64",
                "generation": 3,
                "state": "crashed",
                "clock": {
                    "wall_offset_ns": 1_000_000_000_000_000_000i64,
                    "created_ns": 1000,
                    "created_utc": "2001-09-09T01:46:40.000001000Z",
                    "steps": [{"ns": 100, "wall_offset_ns": 2_000_000_000_000_000_000i64}],
                },
                "crash": {
                    "reason": "panic",
                    "cpu": 1,
                    "time_ns": 300,
                    "time_utc": "2033-05-18T03:33:20.000000300Z",
                    "message": "Kernel panic - not syncing: test",
                },
                "signature": {"id": "0123456789abcdef", "basis": ["panic", "calls: a < b"]},
                "damaged": false,
                "recovered": 10,
                "lost": 2,
                "lost_exact": true,
                "files": {"events": "kernel/events.jsonl"},
            }],
        })
    }

    #[test]
    fn a_crash_row_holds_the_manifest_and_events_take_its_clock() {
        let (rows, created) = crashes(&manifest()).unwrap();
        let c = &rows[0];
        assert_eq!(created, Some(1_000_000_000_000_001_000));
        assert_eq!(c.day(created), "2033-05-18");
        let cells = c.cells("b", "t");
        assert_eq!(cells[7], Cell::Str("panic"));
        assert_eq!(cells[9], Cell::I32(1));
        assert_eq!(cells[11], Cell::I64(2_000_000_000_000_000_300));
        assert_eq!(cells[13], Cell::Str("0123456789abcdef"));
        assert_eq!(cells[14], Cell::Str(r#"["panic","calls: a < b"]"#));
        assert_eq!(cells[18], Cell::Null);
        // Before the step, the header's offset; from it on, the step's.
        for (ts, wall) in [
            (99, 1_000_000_000_000_000_099i64),
            (100, 2_000_000_000_000_000_100),
        ] {
            let line = format!(
                r#"{{"kind":"event","region":0,"stream":1,"cpu":1,"ts":{ts},"type":"printk","salvaged":true,"fields":{{"level":3,"text":"x"}}}}"#
            );
            let event = Event::parse(&line).unwrap();
            let cells = event.cells("b", c);
            assert_eq!(cells[10], Cell::I64(wall));
            assert_eq!(cells[12], Cell::Bool(true));
            assert_eq!(cells[13], Cell::I32(3));
            assert_eq!(cells[14], Cell::Str("x"));
        }
        // With older steps ignored, the newest of them's offset holds
        // before the first listed.
        let mut m = manifest();
        m["regions"][0]["clock"]["steps_ignored"] = json!(65_536);
        m["regions"][0]["clock"]["offset_before_steps_ns"] = json!(3_000_000_000_000_000_000i64);
        let (rows, _) = crashes(&m).unwrap();
        let line = r#"{"kind":"event","region":0,"stream":1,"cpu":1,"ts":99,"type":"printk","salvaged":false,"fields":{"level":3,"text":"x"}}"#;
        let event = Event::parse(line).unwrap();
        let cells = event.cells("b", &rows[0]);
        assert_eq!(cells[10], Cell::I64(3_000_000_000_000_000_099));
    }

    #[test]
    fn what_a_manifest_lacks_is_named() {
        let mut m = manifest();
        m["regions"][0]["boot_id"] = json!(7);
        assert_eq!(
            crashes(&m).unwrap_err(),
            "regions[0].boot_id (not a string)"
        );
        m["regions"][0].as_object_mut().unwrap().remove("crash");
        m["regions"][0]["boot_id"] = json!("b");
        m["regions"][0]["clock"]["steps"][0]["ns"] = json!("x");
        assert_eq!(
            crashes(&m).unwrap_err(),
            "regions[0].clock.steps[0].ns (not a 64-bit integer)"
        );
        assert_eq!(crashes(&json!({})).unwrap_err(), "regions");
    }

    #[test]
    fn losses_debug_messages_and_raw_events_become_rows() {
        let (rows, _) = crashes(&manifest()).unwrap();
        let loss = Event::parse(r#"{"kind":"loss","region":0,"stream":0,"cpu":0,"ts":7,"reason":"overwritten","events":12,"pages":1,"after_ts":null,"before_ts":7,"cause":null,"exact":true}"#).unwrap();
        let cells = loss.cells("b", &rows[0]);
        assert_eq!(cells[2], Cell::Str("loss"));
        assert_eq!(cells[11], Cell::Str("overwritten"));
        assert_eq!(cells[14], Cell::Str("12 events lost (overwritten)"));
        assert_eq!(
            cells[16],
            Cell::Str(
                r#"{"after_ts":null,"before_ts":7,"cause":null,"events":12,"exact":true,"pages":1}"#
            )
        );
        let debug = Event::parse(r#"{"kind":"event","region":0,"stream":0,"cpu":0,"ts":7,"type":"debug","salvaged":false,"fields":{"callsite":4,"level":7},"message":"[drm] flip","callsite":{"source":"drm","module":"drm","function":"drm_flip","file":"drm.c","line":12}}"#).unwrap();
        let cells = debug.cells("b", &rows[0]);
        assert_eq!(cells[14], Cell::Str("[drm] flip"));
        assert_eq!(cells[15], Cell::Str("drm:drm_flip drm.c:12"));
        // A field of another kind under a common name, or a key twice
        // (the last taken), still makes a row.
        let odd = Event::parse(r#"{"kind":"event","region":0,"stream":0,"cpu":0,"ts":7,"type":"alarm","salvaged":false,"fields":{"level":"warn","text":3,"message":"first","message":"x\ny"}}"#).unwrap();
        let cells = odd.cells("b", &rows[0]);
        assert_eq!(cells[14], Cell::Str("x\ny"));
        assert_eq!(odd.level, None);
        let raw = Event::parse(r#"{"kind":"event","region":0,"stream":0,"ts":7,"type":"type9","salvaged":false,"raw":"dead"}"#).unwrap();
        assert_eq!(raw.cells("b", &rows[0])[16], Cell::Str(r#"{"raw":"dead"}"#));
        for (bad, why) in [
            ("{", "EOF"),
            (
                r#"{"kind":"log","stream":0,"ts":1}"#,
                "neither event nor loss",
            ),
            (
                r#"{"kind":"event","stream":0,"ts":1,"type":"x"}"#,
                "without fields",
            ),
            (
                r#"{"kind":"event","stream":0,"ts":1,"type":"x","fields":[1]}"#,
                "fields:",
            ),
            (
                r#"{"kind":"event","stream":70000,"ts":1,"type":"x","fields":{}}"#,
                "u16",
            ),
        ] {
            let err = Event::parse(bad).err().unwrap();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    proptest::proptest! {
        /// Any line: a row or an error, never a panic.
        #[test]
        fn any_line_is_a_row_or_an_error(line in "\\PC{0,200}") {
            let (rows, _) = crashes(&manifest()).unwrap();
            if let Ok(e) = Event::parse(&line) {
                let _ = e.cells("b", &rows[0]);
            }
        }

        /// An event line as JSON writes it comes back as its row.
        #[test]
        fn an_event_line_comes_back_as_written(
            stream in 0u16..,
            cpu in proptest::option::of(0u16..),
            ts in 0u64..=i64::MAX as u64,
            event_type in "[a-z_]{1,20}",
            level in proptest::option::of(0u8..8),
            text in "\\PC{0,40}",
            salvaged: bool,
        ) {
            let (rows, _) = crashes(&manifest()).unwrap();
            let fields = json!({ "level": level, "text": text });
            let line = json!({
                "kind": "event", "region": 0, "stream": stream, "cpu": cpu, "ts": ts,
                "type": event_type, "salvaged": salvaged, "fields": fields,
            })
            .to_string();
            let e = Event::parse(&line).unwrap();
            let cells = e.cells("b", &rows[0]);
            proptest::prop_assert_eq!(cells[3], Cell::I32(stream.into()));
            proptest::prop_assert_eq!(cells[4], cpu.map_or(Cell::Null, |c| Cell::I32(c.into())));
            proptest::prop_assert_eq!(cells[9], Cell::I64(ts as i64));
            proptest::prop_assert_eq!(cells[11], Cell::Str(&event_type));
            proptest::prop_assert_eq!(cells[12], Cell::Bool(salvaged));
            proptest::prop_assert_eq!(cells[13], level.map_or(Cell::Null, |l| Cell::I32(l.into())));
            proptest::prop_assert_eq!(cells[14], Cell::Str(&text));
            let back: serde_json::Value = match cells[16] {
                Cell::Str(f) => serde_json::from_str(f).unwrap(),
                other => panic!("{other:?}"),
            };
            proptest::prop_assert_eq!(back, fields);
        }
    }
}
