//! examples/wlr_log.c, built against Debian's wlroots headers and library:
//! what the compositor logs through the real wlr_log() arrives as `log`
//! events, filtered by the verbosity it asked for.

mod common;

use common::{build, pkg_config, run};
use pstore_ring::read::{HeaderTrust, Region};
use pstore_ring::schema::{Value, EVENT_LOG};

#[test]
fn wlroots_log_lines_land_in_the_recorder() {
    let Some(wlroots) = pkg_config("wlroots") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bin = build(
        dir.path(),
        "compositor",
        &["examples/wlr_log.c", "tests/c/compositor.c"],
        &wlroots,
    );
    let region = dir.path().join("compositor.crashring");
    let out = run(&bin).arg(&region).output().unwrap();
    assert!(out.status.success());
    // Still on standard error, as wlroots' own callback prints them.
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("page flip failed: -16\n"), "{stderr}");

    let bytes = std::fs::read(&region).unwrap();
    let r = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
    let trace = r.decode();
    let log = r.schema.get(EVENT_LOG).unwrap();
    let lines: Vec<(u64, String)> = trace.streams[0]
        .events
        .iter()
        .map(|e| {
            assert_eq!(e.type_id, EVENT_LOG);
            let v = log.decode(e.payload, r.header.endian).unwrap();
            let (Value::Unsigned(level), Value::Chars(cat), Value::Str(text)) = (v[0], v[1], v[2])
            else {
                panic!("{v:?}")
            };
            assert_eq!(cat, b"wlroots");
            (level, String::from_utf8(text.to_vec()).unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0].0, 6);
    assert!(lines[0]
        .1
        .ends_with("] output HDMI-A-1 enabled at 1920x1080"));
    assert_eq!(lines[1].0, 3);
    assert!(lines[1].1.ends_with("] page flip failed: -16"));
}
