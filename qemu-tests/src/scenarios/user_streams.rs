//! A compositor's flight recorder in the kernel's region: an unprivileged
//! program (uid 1000, in the crashring group) records its own stream from
//! the module's pool while a test module prints DRM debug lines; the
//! kernel panics; the next boot recovers both on one timeline. Before
//! that, what such a program, and one outside the group, may not do.

use super::{host_crashring, parse_saved, warm_reboot_run, Artifacts, WarmReboot, ACK};
use crate::env::guest::{self, Kernel};
use anyhow::{bail, ensure, Context, Result};
use pstore_ring::layout::STREAM_USER;
use pstore_ring::merge::{merge, Item};
use pstore_ring::read::{LossKind, Region};
use pstore_ring::schema::{Value, EVENT_LOG, EVENT_MARKER, EVENT_PRINTK};
use std::collections::BTreeMap;
use xshell::{cmd, Shell};

/// The compositor's user and the crashring group, as the package's
/// sysusers.d and udev rule make them; a user in no group.
const MEMBER: u32 = 1000;
const GROUP: u32 = 990;
const OUTSIDER: u32 = 1001;

/// What each check of `compositor security` must answer.
const SECURITY: &[(&str, &str)] = &[
    ("previous-mode", "400"),
    ("outsider-marker", "EACCES"),
    ("outsider-stream", "EACCES"),
    ("member-previous", "EACCES"),
    ("member-current", "EACCES"),
    ("current-mode", "400"),
    ("member-stream", "ok"),
    ("map-beyond", "EINVAL"),
    ("map-offset", "EINVAL"),
    ("map-exec", "EPERM"),
    ("map-private", "EPERM"),
    ("map-exact", "ok"),
    ("categories-bad", "EINVAL"),
    ("categories-twice", "EINVAL"),
    ("categories", "ok"),
    ("control-write", "EPERM"),
    ("control-read", "ok"),
    ("control-mprotect", "EACCES"),
    ("show-forged", "ok"),
    ("show-others", "ok"),
    ("show-root", "ok"),
    ("show-opener", "ok"),
    ("debug-page", "E2BIG"),
    ("second-on-file", "EBUSY"),
    ("quota-second", "ok"),
    ("quota-third", "EDQUOT"),
    ("quota-userns", "EDQUOT"),
    ("quota-root-ns", "ok"),
    ("map-unheld", "EINVAL"),
    ("stream-write-only", "EBADF"),
    ("fresh-header", "ok"),
    ("fresh-stale", "ok"),
    ("opener-budget", "ok"),
    ("summary-root", "ok"),
    ("summary-opener", "ok"),
];

/// Before the crash, root reads the generation being recorded while the
/// compositor and the marker flood write: `extract` of
/// /dev/crashring-current, then `snapshot` and `check-bundle`. The crash
/// waits a second after it: the console may still be sending its last
/// line, which the panic's messages would otherwise cut into.
const LIVE: &str = "crashring extract /dev/crashring-current --stream user:compositor --format jsonl > /tmp/live.jsonl\n\
    echo \"crashring-test: live extract $? $(grep -c '\"type\":\"log\"' /tmp/live.jsonl)\"\n\
    crashring snapshot --why 'compositor-crash: live' -o /tmp/snapshot.tar.gz\n\
    echo \"crashring-test: live snapshot $?\"\n\
    crashring check-bundle /tmp/snapshot.tar.gz > /dev/null\n\
    echo \"crashring-test: live check-bundle $?\"\n";

pub fn compositor_crash(sh: &Shell, k: &Kernel, art: &Artifacts) -> Result<String> {
    let program = guest::build_compositor(sh)?;
    let prog = program.to_str().context("a path that is not UTF-8")?;
    let record = format!(
        "chgrp {GROUP} /dev/crashring\n\
         insmod /lib/crashring_test.ko action=drm dyndbg=+p\n\
         {prog} security {MEMBER} {GROUP} {OUTSIDER}\n\
         {prog} set-user-id {MEMBER} {GROUP} {OUTSIDER} &\n\
         {prog} run {MEMBER} {GROUP} &\n\
         sleep 3\n\
         {LIVE}\
         sleep 1\n\
         echo c > /proc/sysrq-trigger\n\
         sleep 30\n"
    );
    // The next boot reads previous_summary through root's descriptor and
    // the member's before the ack.
    let release = format!("{prog} summary {MEMBER}\n{ACK}");
    let plan = WarmReboot {
        name: "compositor-crash",
        // 8 MiB: a CPU's lane 0 holds about 800 KiB, which ten seconds of
        // the marker flood at the old shared budget (100 a second) evict.
        region_append: "memmap=8M$0x40000000",
        // Every numbered line through /dev/kmsg, which would otherwise
        // keep ten of them in five seconds.
        extra_append: "printk.devkmsg=on",
        module_args: "region=8M@0x40000000 user_streams=4",
        test_module: true,
        programs: &[prog],
        release: &release,
        ..WarmReboot::memmap(record)
    };
    let saved = warm_reboot_run(sh, k, art, &plan)?;
    let security = check_security(&saved.log)?;
    let budget = check_budget(&saved.log)?;
    let live = check_live(&saved.log)?;
    ensure!(
        saved.said("crashring-test: compositor recording"),
        "the compositor never started recording"
    );
    ensure!(
        saved.said("crashring-test: set-user-id holding"),
        "the set-user-ID program never took its stream"
    );
    let image = art.dir.join("previous.img");
    let host = host_crashring(sh)?;
    let extracted = cmd!(
        sh,
        "{host} extract --stream user:compositor --format jsonl {image}"
    )
    .quiet()
    .ignore_status()
    .read()?;
    saved.check(|bytes| {
        let region = parse_saved(bytes)?;
        let timeline = check_timeline(&region)?;
        let lines = extracted
            .lines()
            .filter(|l| l.contains("\"type\":\"log\""))
            .count();
        ensure!(
            lines > 0
                && extracted
                    .lines()
                    .all(|l| l.contains("\"name\":\"user:compositor\"")),
            "crashring extract --stream user:compositor gave {lines} lines, or another stream's"
        );
        Ok(format!(
            "{security}; {budget}; {live}; {timeline}; extract --stream: {lines} lines"
        ))
    })
}

/// What [`LIVE`] printed: the live extract found the compositor's lines,
/// and the snapshot was made and checked, each with exit status 0.
fn check_live(log: &str) -> Result<String> {
    // The words after "crashring-test: live WHAT ", or none.
    let said = |what: &str| -> Vec<&str> {
        let key = format!("crashring-test: live {what} ");
        log.lines()
            .find_map(|l| l.split_once(key.as_str()))
            .map_or_else(Vec::new, |(_, rest)| rest.split_whitespace().collect())
    };
    let extract = said("extract");
    let count = extract
        .get(1)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    ensure!(
        extract.first() == Some(&"0") && count > 0,
        "crashring extract /dev/crashring-current: {extract:?} (exit status, compositor lines)"
    );
    for what in ["snapshot", "check-bundle"] {
        let rc = said(what);
        ensure!(
            rc == ["0"],
            "crashring {what} of the live recorder: exit status {rc:?}"
        );
    }
    Ok(format!(
        "live: {count} compositor lines from /dev/crashring-current, snapshot bundled and checked"
    ))
}

/// The answers `compositor security` printed, each as [`SECURITY`] says,
/// and the flood refused.
fn check_security(log: &str) -> Result<String> {
    let answers: BTreeMap<&str, &str> = log
        .lines()
        .filter_map(|l| l.split_once("crashring-test: security ")?.1.split_once(' '))
        .collect();
    // Every wrong answer at once: one boot shows all that is broken.
    let wrong: Vec<String> = SECURITY
        .iter()
        .filter_map(|(check, want)| {
            let got = answers.get(check).copied().unwrap_or("(no answer)");
            (got.trim() != *want).then(|| format!("{check}: {got}, not {want}"))
        })
        .collect();
    ensure!(wrong.is_empty(), "security checks: {}", wrong.join("; "));
    let flood = answers.get("flood").copied().unwrap_or_default();
    let count = |key: &str| -> Option<u64> {
        flood
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    let (Some(markers), Some(refused), Some(events)) =
        (count("markers"), count("refused"), count("stream-events"))
    else {
        bail!("the flood did not report: {flood:?}");
    };
    ensure!(
        refused > 0 && markers <= 400,
        "the flood's markers were not limited: {markers} written, {refused} refused"
    );
    Ok(format!(
        "{} refusals as expected; a 2 s flood: {markers} markers written, {refused} refused, {events} events in its own stream",
        SECURITY.len()
    ))
}

/// What `compositor security` prints before the members' flood of CPU 1
/// (`LINES_BEFORE` in compositor.c).
const LINES_BEFORE_FLOOD: u64 = 200;
/// The module's default `user_marker_bytes_per_sec`.
const USER_MARKER_BYTES_PER_SEC: u64 = 4096;

/// The marker budget is each user's, in bytes: each flooder wrote at most
/// its own budget's worth of 994-byte markers over the ten seconds (a full
/// bucket to start with), and the member writing once a second beside them
/// was never refused.
fn check_budget(log: &str) -> Result<String> {
    let writer = |who: &str| -> Result<(u64, u64)> {
        let line = log
            .lines()
            .find_map(|l| l.split_once(&format!("crashring-test: budget {who} ")))
            .with_context(|| format!("the budget's {who} writer did not report"))?
            .1;
        let count = |key: &str| -> Result<u64> {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .with_context(|| format!("{who}: no {key} in {line:?}"))?
                .trim()
                .parse()
                .with_context(|| format!("{who}: {line:?}"))
        };
        Ok((count("written")?, count("refused")?))
    };
    // A marker charges its text and its pid and comm.
    let most = USER_MARKER_BYTES_PER_SEC * 11 / (994 + 20);
    let mut floods = Vec::new();
    for who in ["flood-a", "flood-b"] {
        let (written, refused) = writer(who)?;
        // A flooder is still credited as it goes: none is starved.
        ensure!(
            written <= most && written >= most / 2 && refused > 0,
            "member {who} wrote {written} markers of 994 bytes in 10 s ({refused} refused): its own {USER_MARKER_BYTES_PER_SEC} bytes a second allow {most}, and at least half of that"
        );
        floods.push(written);
    }
    let (steady, refused) = writer("steady")?;
    ensure!(
        refused == 0 && steady >= 8,
        "the member writing once a second beside the flood had {refused} of {} markers refused",
        steady + refused
    );
    Ok(format!(
        "two members flooding CPU 1 wrote {floods:?} markers of 994 bytes in 10 s, the one writing once a second {steady}, none refused"
    ))
}

fn text<'a>(values: &'a [Value<'a>], i: usize) -> &'a [u8] {
    match values.get(i) {
        Some(Value::Str(s) | Value::Chars(s)) => s,
        _ => b"",
    }
}

/// The DRM lines all there; the compositor's stream named, its frames
/// consecutive after what its ring overwrote; each "after ordering point
/// K" it wrote after its marker K came back merged after that marker.
fn check_timeline(region: &Region<'_>) -> Result<String> {
    let trace = region.decode();
    let e = region.header.endian;
    let user_stream = |name: &str| {
        trace
            .streams
            .iter()
            .find(|s| s.info.kind == STREAM_USER && s.info.name == name)
            .with_context(|| format!("no user stream named {name}"))
    };
    let comp = user_stream("compositor")?;
    ensure!(
        comp.info.uid == MEMBER,
        "the stream's uid is {}",
        comp.info.uid
    );
    // A program set-user-ID to the member, run by the outsider: its
    // stream is the member's, whom the request service would serve it.
    let setuid = user_stream("set-user-id")?;
    ensure!(
        setuid.info.uid == MEMBER,
        "the set-user-ID program's stream is uid {}'s, not its effective uid {MEMBER}'s",
        setuid.info.uid
    );
    let bad: Vec<_> = comp
        .losses
        .iter()
        .filter(|l| l.kind != LossKind::Overwritten)
        .collect();
    ensure!(
        bad.is_empty(),
        "the compositor's stream lost more than its ring: {bad:?}"
    );
    let log = region.schema.get(EVENT_LOG).context("no log type")?;
    let printk = region.schema.get(EVENT_PRINTK).context("no printk type")?;
    let marker = region.schema.get(EVENT_MARKER).context("no marker type")?;

    let mut frames = Vec::new();
    let mut drm = Vec::new();
    // CPU 1's lines from before the members' marker flood.
    let mut before = Vec::new();
    // Ordering point K: where its marker and the line after it merged.
    let mut points: BTreeMap<u64, (Option<usize>, Option<usize>)> = BTreeMap::new();
    for (at, item) in merge(&trace.streams).enumerate() {
        let Item::Event(ev) = item else { continue };
        let decode = |t: &pstore_ring::read::EventType| t.decode(ev.payload, e).ok();
        match ev.type_id {
            EVENT_LOG if ev.stream == comp.info.index => {
                let v = decode(log).context("a log event that does not decode")?;
                let t = String::from_utf8_lossy(text(&v, 2)).into_owned();
                if let Some(n) = t.strip_prefix("frame ") {
                    frames.push(n.parse::<u64>()?);
                } else if let Some(k) = t.strip_prefix("after ordering point ") {
                    points.entry(k.parse()?).or_default().1 = Some(at);
                }
            }
            EVENT_PRINTK => {
                let v = decode(printk).context("a printk event that does not decode")?;
                let t = String::from_utf8_lossy(text(&v, 4)).into_owned();
                if let Some(s) = t
                    .trim_end()
                    .strip_prefix("[drm:drm_atomic_commit] crtc-41 flip seq=")
                {
                    drm.push(s.parse::<u64>()?);
                } else if let Some(k) = t.trim_end().strip_prefix("crashring-flood: before ") {
                    before.push(k.parse::<u64>()?);
                }
            }
            EVENT_MARKER => {
                let v = decode(marker).context("a marker that does not decode")?;
                let t = String::from_utf8_lossy(text(&v, 2)).into_owned();
                if let Some(k) = t.strip_prefix("ordering point ") {
                    points.entry(k.parse()?).or_default().0 = Some(at);
                }
            }
            _ => {}
        }
    }
    ensure!(frames.len() > 100, "only {} frames recovered", frames.len());
    ensure!(
        frames.windows(2).all(|w| w[1] == w[0] + 1),
        "the compositor's frames are not consecutive"
    );
    drm.sort_unstable();
    ensure!(
        !drm.is_empty() && drm.iter().copied().eq(0..drm.len() as u64),
        "DRM lines missing during the flood: {} of 0..={:?}",
        drm.len(),
        drm.last()
    );
    before.sort_unstable();
    ensure!(
        before.iter().copied().eq(1..=LINES_BEFORE_FLOOD),
        "the members' marker flood overwrote CPU 1's history: {} of its {LINES_BEFORE_FLOOD} lines from before it left",
        before.len()
    );
    let both: Vec<_> = points
        .iter()
        .filter_map(|(k, (m, u))| Some((*k, (*m)?, (*u)?)))
        .collect();
    ensure!(
        !both.is_empty(),
        "no ordering point came back with its line after it"
    );
    for (k, m, u) in &both {
        ensure!(
            m < u,
            "ordering point {k}: the user's line merged before the kernel's marker"
        );
    }
    Ok(format!(
        "frames {}..={} consecutive ({} lost to the ring), DRM lines 0..={} all there, CPU 1's {LINES_BEFORE_FLOOD} lines from before the flood all there, {} ordering points in order, a set-user-ID program's stream its owner's",
        frames[0],
        frames[frames.len() - 1],
        comp.lost(LossKind::Overwritten),
        drm.len() - 1,
        both.len()
    ))
}
