//! report-without-crash, in the last boot of `signage-reboot-loop` (the
//! installed, armed guest's boot that does not crash, so the check costs
//! seconds, not another install): crashring-request.socket as the
//! package enables it, with the shipped `[Request]` policy. A member's
//! compositor-like program (uid 1000) records into its own stream, hits
//! "atomic commit failed" and calls `crashring_request_report_of()`;
//! another member (uid 1001), whose own stream is in the recorder too,
//! asks for the first one's stream; the first floods requests; a user in
//! no group floods connections that hang up, after which the second is
//! still served. The host
//! then checks the bundle the first got, as its recipient would.

use super::{said, Installed};
use crate::scenarios::Artifacts;
use anyhow::{ensure, Context, Result};
use std::io::Read;
use std::path::Path;
use xshell::{cmd, Shell};

/// The compositor's stream, and the other member's.
const KIOSK_STREAM: &str = "kiosk-ui";
const VISITOR_STREAM: &str = "visitor-secret";
/// Where the compositor keeps the copy the service handed it.
const KIOSK_COPY: &str = "/home/kiosk/report.tar.gz";
/// Frames the compositor records before its failure.
const FRAMES: u32 = 200;
/// How long asking may take here, from the call to the answer with the
/// bundle in place, before the service is taken to hang. The speed is
/// measured, not asserted: the guest's CPU is emulated (TCG), where a
/// root snapshot of the same region alone takes about 4 s, against
/// 0.24 s natively for a 64 MiB region a quiet boot filled (`cargo bench
/// -p extractor --bench extract -- snapshot`); the scenario reports its
/// time, with the binary's start, the live view's copy and a snapshot
/// timed in the same boot.
const HANG_MS: f64 = 30_000.0;
/// Connections opened and closed at once by a user in no group, over
/// the 200 in 2 s at which systemd's default trigger limit would fail
/// the socket.
const HANG_UPS: u32 = 1000;
/// Kernel lines written just before: the policy grants warnings, not
/// information.
const GRANTED_LINE: &str = "crashring-test: kernel warning the report holds";
const WITHHELD_LINE: &str = "crashring-test: kernel information the report leaves out";

/// The job's part, run as root in the guest's last boot (`say` and the
/// compositor at /root/compositor-debian are the job's).
pub(super) fn steps() -> String {
    format!(
        r#"gid=$(getent group crashring | cut -d: -f3)
echo "<4>{GRANTED_LINE}" > /dev/kmsg
echo "<6>{WITHHELD_LINE}" > /dev/kmsg
out=$(/root/compositor-debian report 1001 $gid {VISITOR_STREAM} 5 /home/visitor/report.tar.gz 2>&1); say "visitor ${{out#crashring-test: }}"
out=$(/root/compositor-debian report 1000 $gid {KIOSK_STREAM} {FRAMES} {KIOSK_COPY} 2>&1); say "kiosk ${{out#crashring-test: }}"
setpriv --reuid=visitor --regid=visitor --init-groups crashring report --why curious --stream {KIOSK_STREAM} > /tmp/asked 2>&1
say "visitor-asks-kiosk $? $(tr '\n' ' ' < /tmp/asked)"
for i in 1 2 3 4; do
  setpriv --reuid=kiosk --regid=kiosk --init-groups crashring report --why "flood $i" > /tmp/asked 2>&1
  say "flood $i $? $(tr '\n' ' ' < /tmp/asked)"
done
# Anyone may connect: a flood of connections that hang up at once must
# leave the socket serving (uid 65534, nobody, in no group).
out=$(/root/compositor-debian hang-ups 65534 {HANG_UPS} 2>&1); say "${{out#crashring-test: }}"
for try in $(seq 60); do
  [ "$(systemctl list-units --no-legend 'crashring-request@*' | wc -l)" = 0 ] && break
  sleep 1
done
setpriv --reuid=visitor --regid=visitor --init-groups crashring report --why "after the hang-ups" > /tmp/asked 2>&1
say "after-hang-ups $? $(tr '\n' ' ' < /tmp/asked)"
say "reports journal $(journalctl -b 0 -q -o cat MESSAGE_ID={reported} | wc -l) refused $(journalctl -b 0 -q -o cat MESSAGE_ID={refused} | wc -l)"
journalctl -b 0 -q -o cat MESSAGE_ID={reported} | while read -r line; do say "reports message $line"; done
# Where the time goes, under this emulated CPU: the binary's start, the
# live view's copy, and a root snapshot of it (which is not rate-limited).
ms() {{ t0=$(date +%s%N); "$@" > /dev/null 2>&1; echo $(( ($(date +%s%N) - t0) / 1000000 )); }}
say "reports cost start $(ms crashring --version) copy $(ms cat /dev/crashring-current) snapshot $(ms crashring snapshot --why cost -o /tmp/cost.tar.gz)"
say "reports kept $(ls /var/lib/crashring | grep -c '^crash-.*tar.gz$') crashes $(ls /var/lib/crashring | grep -c '^snapshot-.*tar.gz$') reports"
say "reports socket $(systemctl is-active crashring-request.socket) failed-units $(systemctl list-units --failed --no-legend 'crashring-request@*' | wc -l)"
"#,
        reported = kexec_hooks::journal::REPORTED,
        refused = kexec_hooks::journal::REQUEST_REFUSED,
    )
}

/// One `report` line of the compositor: rc, bundle, events, copy size,
/// milliseconds.
struct Asked<'a> {
    rc: i32,
    bundle: &'a str,
    events: u64,
    copy: i64,
    ms: f64,
}

fn asked<'a>(log: &'a str, who: &str) -> Result<Asked<'a>> {
    let lines = said(log, &format!("{who} report"));
    let [line] = lines[..] else {
        anyhow::bail!("the {who} compositor said {lines:?}, not one report line");
    };
    let w: Vec<&str> = line.split(' ').collect();
    let value = |key: &str| {
        w.iter()
            .position(|x| *x == key)
            .and_then(|i| w.get(i + 1))
            .copied()
            .with_context(|| format!("no {key} in the {who} compositor's line: {line}"))
    };
    Ok(Asked {
        rc: value("rc")?.parse()?,
        bundle: value("bundle")?,
        events: value("events")?.parse()?,
        copy: value("copy")?.parse()?,
        ms: value("ms")?.parse()?,
    })
}

/// Every file of a bundle, the Perfetto archive inside it opened too.
fn contents(archive: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    for e in tar.entries()? {
        let mut e = e?;
        let path = e.path()?.display().to_string();
        let mut data = Vec::new();
        e.read_to_end(&mut data)?;
        if path.ends_with(".tar.gz") {
            out.extend(contents(&data)?);
        }
        out.push((path, data));
    }
    Ok(out)
}

fn holds(data: &[u8], what: &str) -> bool {
    data.windows(what.len()).any(|w| w == what.as_bytes())
}

/// Checks what the job said and the compositor's bundle, copied off the
/// image; returns the summary line.
pub(super) fn check(
    sh: &Shell,
    art: &Artifacts,
    installed: &Installed,
    crashring: &Path,
    log: &str,
) -> Result<String> {
    let visitor = asked(log, "visitor")?;
    let kiosk = asked(log, "kiosk")?;
    ensure!(
        visitor.rc == 0 && kiosk.rc == 0,
        "a member's crashring_request_report_of() failed: visitor rc {}, kiosk rc {}",
        visitor.rc,
        kiosk.rc
    );
    ensure!(
        kiosk.copy > 0,
        "the compositor got no copy of its report ({})",
        kiosk.copy
    );
    ensure!(
        kiosk.ms < HANG_MS,
        "asking took {:.0} ms, over {HANG_MS} ms ({:?})",
        kiosk.ms,
        said(log, "reports cost")
    );
    ensure!(
        kiosk.events > u64::from(FRAMES),
        "the compositor's report holds {} events, fewer than its {FRAMES} frames and failure",
        kiosk.events
    );
    let refused = said(log, "visitor-asks-kiosk");
    ensure!(
        refused.len() == 1
            && !refused[0].starts_with("0 ")
            && refused[0].contains(&format!("no stream named \"{KIOSK_STREAM}\"")),
        "uid 1001 asking for uid 1000's stream was not refused as it should be: {refused:?}"
    );
    // The compositor's own request, then two more, then the limit (3 a
    // minute, the shipped RateLimitBurst=).
    for (i, want) in [(1, "0 "), (2, "0 "), (3, "75 "), (4, "75 ")] {
        let flood = said(log, &format!("flood {i}"));
        ensure!(
            flood.len() == 1 && flood[0].starts_with(want),
            "request {i} of the flood: {flood:?}, expected exit {want}"
        );
        if want == "75 " {
            // The rate limit's own answer, not a busy one's.
            ensure!(
                flood[0].contains("rate-limited, try again in")
                    && flood[0].contains("RateLimitBurst="),
                "request {i} of the flood was refused without saying it was rate-limited: {flood:?}"
            );
        }
    }
    let hang_ups = said(log, "hang-ups");
    ensure!(
        hang_ups == [format!("{HANG_UPS} connected {HANG_UPS}")],
        "a flood of connections hanging up: {hang_ups:?}, not all {HANG_UPS} made"
    );
    let after = said(log, "after-hang-ups");
    ensure!(
        after.len() == 1 && after[0].starts_with("0 "),
        "a request after the flood of hang-ups was not served: {after:?}"
    );
    // One journal message per report (two members, two of the flood, the
    // one after the hang-ups, which leave none).
    let journal = said(log, "reports journal");
    ensure!(
        journal == ["5 refused 1"],
        "the journal holds {journal:?} report and refusal messages, not 5 and 1"
    );
    let messages = said(log, "reports message");
    ensure!(
        messages.iter().any(|m| m.contains(kiosk.bundle)),
        "no journal message names the compositor's bundle {}: {messages:?}",
        kiosk.bundle
    );
    let socket = said(log, "reports socket");
    ensure!(
        socket == ["active failed-units 0"],
        "crashring-request.socket and its services: {socket:?}"
    );

    // MaxBundles=2, both crashes': each report replaced the one before,
    // and none made a crash go.
    let kept = said(log, "reports kept");
    ensure!(
        kept == ["2 crashes 1 reports"],
        "/var/lib/crashring holds {kept:?}, not the 2 crashes and the newest report"
    );
    // The compositor's copy (its bundle, since replaced), checked as its
    // recipient would.
    let bundle = art.dir.join("kiosk-report.tar.gz");
    std::fs::write(&bundle, installed.image.read(sh, KIOSK_COPY)?)?;
    ensure!(
        std::fs::metadata(&bundle)?.len() == kiosk.copy as u64,
        "the copy on the guest's disk is not the {} bytes the compositor saved",
        kiosk.copy
    );
    let check = cmd!(sh, "{crashring} check-bundle {bundle}")
        .quiet()
        .ignore_status()
        .output()?;
    ensure!(
        check.status.success(),
        "check-bundle {}: {}",
        kiosk.bundle,
        String::from_utf8_lossy(&check.stdout)
    );
    let files = contents(&std::fs::read(&bundle)?)?;
    let file = |suffix: &str| -> Result<String> {
        let (_, data) = files
            .iter()
            .find(|(p, _)| p.ends_with(suffix))
            .with_context(|| format!("{} holds no {suffix}", kiosk.bundle))?;
        Ok(String::from_utf8_lossy(data).into_owned())
    };
    let manifest: serde_json::Value = serde_json::from_str(&file("MANIFEST.json")?)?;
    ensure!(
        manifest["request"]["uid"] == 1000
            && manifest["request"]["why"] == "atomic commit failed on crtc-41",
        "the manifest's request is not the compositor's: {}",
        manifest["request"]
    );
    let dmesg = file("dmesg.txt")?;
    ensure!(
        dmesg.contains(GRANTED_LINE) && !dmesg.contains(WITHHELD_LINE),
        "dmesg.txt should hold the warning and not the information line:\n{dmesg}"
    );
    let last_frame = format!("{KIOSK_STREAM} frame {}", FRAMES - 1);
    ensure!(
        files.iter().any(|(p, d)| p.contains("ctf/")
            && holds(d, &last_frame)
            && holds(d, "atomic commit failed on crtc-41")),
        "the CTF trace lacks the compositor's last frame or its failure"
    );
    for (path, data) in &files {
        ensure!(
            !holds(data, VISITOR_STREAM),
            "{path} in uid 1000's report names uid 1001's stream"
        );
    }
    let cost = said(log, "reports cost").join("");
    Ok(format!(
        "report-without-crash: the compositor's report ({} events, {} bytes) checked: its {FRAMES} frames and failure, the granted kernel line, nothing of uid 1001's; in {:.0} ms on the emulated CPU (binary start, live copy, root snapshot in ms: {cost}); uid 1001 refused its stream; 2 of a flood of 4 rate-limited; {HANG_UPS} connections hanging up left the socket serving; 5 journal messages; a report never pushed out a crash",
        kiosk.events, kiosk.copy, kiosk.ms
    ))
}
