//! `/etc/crashring/crashring.conf` and its `crashring.conf.d/*.conf`
//! drop-ins, read as systemd reads its own: `[Recover]` (what
//! crashring-recover.service keeps) and `[Request]` (who may ask for a
//! report without a crash, and what it holds) sections of `Key=value`
//! lines, later files overriding earlier ones, an empty value restoring
//! the default.

use crate::iomem::parse_size;
use crate::system::System;
use std::time::Duration;

pub const MAIN: &str = "/etc/crashring/crashring.conf";
pub const DROP_INS: &str = "/etc/crashring/crashring.conf.d";

/// A byte limit: absolute, or a share of the file system holding the
/// bundles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes {
    Absolute(u64),
    Percent(u8),
}

impl Bytes {
    /// The limit on a file system of `fs_size` bytes.
    pub fn of(self, fs_size: u64) -> u64 {
        match self {
            Bytes::Absolute(n) => n,
            Bytes::Percent(p) => (u128::from(fs_size) * u128::from(p) / 100) as u64,
        }
    }
}

/// What a clean shutdown's generation gets on the next boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clean {
    /// Bundled like a crash.
    Bundle,
    /// Left unacknowledged in the region (the recorder then keeps only
    /// one slot to record into until something acknowledges it).
    Keep,
    /// Acknowledged without a bundle.
    Discard,
}

/// The recovery service's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recover {
    /// Unset: 10% of the file system, clamped to 1 MiB..4 GiB
    /// (systemd-coredump's default).
    pub max_use: Option<Bytes>,
    /// Unset: 15% of the file system, at most 4 GiB (likewise).
    pub keep_free: Option<Bytes>,
    pub max_bundles: Option<usize>,
    pub max_age: Option<Duration>,
    pub clean: Clean,
    /// A command run with the new bundle's path as its argument (a site's
    /// upload), by `crashring upload` once the network is up; recovery
    /// spools the bundle for it as it puts it in place.
    pub on_bundle: Option<String>,
}

impl Default for Recover {
    fn default() -> Recover {
        Recover {
            max_use: None,
            keep_free: None,
            max_bundles: None,
            max_age: None,
            clean: Clean::Discard,
            on_bundle: None,
        }
    }
}

impl Recover {
    /// MaxUse= in bytes on a file system of `fs_size` bytes.
    pub fn max_use(&self, fs_size: u64) -> u64 {
        match self.max_use {
            Some(b) => b.of(fs_size),
            None => (fs_size / 10).clamp(1 << 20, 4 << 30),
        }
    }

    /// KeepFree= in bytes on a file system of `fs_size` bytes.
    pub fn keep_free(&self, fs_size: u64) -> u64 {
        match self.keep_free {
            Some(b) => b.of(fs_size),
            None => (fs_size / 100 * 15).min(4 << 30),
        }
    }
}

/// The request service's policy (`[Request]`): who may ask for a report
/// of their own session, and which kernel events it grants them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Who may ask: user names or uids, and `@group` for a group's
    /// members (as NSS lists a user's groups). Root always may.
    pub users: Vec<String>,
    /// The highest printk level (0 emergency to 7 debug) a report holds;
    /// `None`: no printk line at all.
    pub printk_level: Option<u8>,
    /// The DRM debug categories a report holds (`KMS`, `ATOMIC`, ...).
    pub drm_categories: Vec<String>,
    /// Other kernel event types a report holds, by name (`marker`,
    /// `sched_switch`, ...).
    pub kernel_events: Vec<String>,
    /// At most `burst` reports per user within `interval`.
    pub interval: Duration,
    pub burst: u32,
    /// Whether the asker may have a copy of its report's bytes.
    pub copy: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            users: vec!["@crashring".into()],
            printk_level: Some(4),
            drm_categories: ["KMS", "ATOMIC", "STATE", "DRIVER"]
                .map(String::from)
                .into(),
            kernel_events: Vec::new(),
            interval: Duration::from_secs(60),
            burst: 3,
            copy: true,
        }
    }
}

/// Everything crashring.conf says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub recover: Recover,
    pub request: Request,
}

/// printk's level names, by level (`KERN_EMERG` to `KERN_DEBUG`).
const LEVELS: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

/// A printk level by number or name; `none` for no printk at all.
fn printk_level(v: &str) -> Option<Option<u8>> {
    if v == "none" {
        return Some(None);
    }
    let n = v
        .parse::<u8>()
        .ok()
        .or_else(|| LEVELS.iter().position(|l| *l == v).map(|n| n as u8))?;
    (n < 8).then_some(Some(n))
}

/// A space-separated list; an empty value is the empty list.
fn list(v: &str) -> Vec<String> {
    v.split_whitespace().map(String::from).collect()
}

/// A systemd boolean (`systemd.syntax(7)`); empty is `default`.
fn boolean(v: &str, default: bool) -> Option<bool> {
    match v {
        "" => Some(default),
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Applies one `[Request]` assignment.
fn apply_request(r: &mut Request, key: &str, value: &str) -> Option<Result<(), &'static str>> {
    let default = Request::default();
    Some(match key {
        "Users" => {
            r.users = match value {
                "" => default.users,
                "none" => Vec::new(),
                v => list(v),
            };
            Ok(())
        }
        "PrintkLevel" => match value {
            "" => Some(default.printk_level),
            v => printk_level(v),
        }
        .map(|v| r.printk_level = v)
        .ok_or("expected a level, 0 to 7 or emerg ... debug, or none"),
        "DRMCategories" => {
            let names = match value {
                "" => default.drm_categories,
                "none" => Vec::new(),
                v => list(v),
            };
            if names
                .iter()
                .all(|c| pstore_ring::read::drm_category_bit(c).is_some())
            {
                r.drm_categories = names.iter().map(|c| c.to_ascii_uppercase()).collect();
                Ok(())
            } else {
                Err("expected DRM categories (CORE DRIVER KMS PRIME ATOMIC VBL STATE LEASE DP DRMRES) or none")
            }
        }
        "KernelEvents" => {
            r.kernel_events = list(value);
            Ok(())
        }
        "RateLimitIntervalSec" => match value {
            "" => Some(default.interval),
            v => duration(v).filter(|d| !d.is_zero()),
        }
        .map(|v| r.interval = v)
        .ok_or("expected a time such as 60s or 5min"),
        "RateLimitBurst" => match value {
            "" => Some(default.burst),
            v => v.parse().ok().filter(|n| *n > 0),
        }
        .map(|v| r.burst = v)
        .ok_or("expected a count of at least 1"),
        "Copy" => boolean(value, default.copy)
            .map(|v| r.copy = v)
            .ok_or("expected yes or no"),
        _ => return None,
    })
}

/// Sets what an unusable `[Request]` value of `key` leaves: the narrowest
/// grant, so that a typo never gives more than was meant (the earlier
/// value is often the default, the widest). Returns what it set.
fn narrowest(r: &mut Request, key: &str) -> &'static str {
    match key {
        "PrintkLevel" => {
            r.printk_level = None;
            "no printk line"
        }
        "DRMCategories" => {
            r.drm_categories.clear();
            "no DRM category"
        }
        "RateLimitIntervalSec" => {
            r.interval = r.interval.max(Request::default().interval);
            "the earlier interval, at least 60 s"
        }
        "RateLimitBurst" => {
            r.burst = 1;
            "one report per interval"
        }
        "Copy" => {
            r.copy = false;
            "no copy"
        }
        // Users= and KernelEvents= take any list.
        _ => "the earlier value",
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{file}{}: {what}", at_line(*.line))]
pub struct ConfigError {
    pub file: String,
    /// The line, from 1; 0 when the file as a whole could not be read.
    pub line: usize,
    pub what: String,
}

fn at_line(line: usize) -> String {
    match line {
        0 => String::new(),
        n => format!(":{n}"),
    }
}

fn bytes(v: &str) -> Option<Bytes> {
    match v.strip_suffix('%') {
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= 100)
            .map(Bytes::Percent),
        None => parse_size(v).map(Bytes::Absolute),
    }
}

/// A time as systemd writes one (`systemd.time(7)`): numbers with units,
/// summed (`1h 30min`, `2weeks`, `1month`), or plain seconds.
fn duration(v: &str) -> Option<Duration> {
    let mut rest = v.trim();
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (n, tail) = rest.split_at(split);
        let n: u64 = n.parse().ok()?;
        let tail = tail.trim_start();
        let end = tail
            .find(|c: char| c.is_ascii_digit() || c == ' ')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(end);
        let secs = match unit {
            "" | "s" | "sec" | "second" | "seconds" => 1,
            "m" | "min" | "minute" | "minutes" => 60,
            "h" | "hr" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86400,
            "w" | "week" | "weeks" => 7 * 86400,
            // systemd's month and year: 30.44 and 365.25 days.
            "M" | "month" | "months" => 2_629_800,
            "y" | "year" | "years" => 31_557_600,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(secs)?)?;
        rest = next.trim_start();
    }
    Some(Duration::from_secs(total))
}

/// Applies one file's text onto `r`. As systemd does with its own
/// configuration, what it cannot use (an unknown key, a value it cannot
/// parse, a line that is no assignment) is returned as a warning and
/// skipped: a `[Recover]` setting keeps its earlier value, and recovery
/// goes on; a `[Request]` setting, which grants, takes its narrowest.
pub fn apply(c: &mut Config, file: &str, text: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut section = String::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = format!("{file}:{}", n + 1);
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            warnings.push(format!("{at}: expected Key=value, found {line:?}; ignored"));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let applied = match section.as_str() {
            "Recover" => apply_recover(&mut c.recover, key, value),
            "Request" => apply_request(&mut c.request, key, value),
            _ => {
                warnings.push(format!(
                    "{at}: {key}= outside [Recover] and [Request], ignored"
                ));
                continue;
            }
        };
        match applied {
            None => warnings.push(format!("{at}: unknown key {key}=, ignored")),
            Some(Err(what)) if section == "Request" => {
                let left = narrowest(&mut c.request, key);
                warnings.push(format!("{at}: {key}={value}: {what}; {left} instead"));
            }
            Some(Err(what)) => warnings.push(format!(
                "{at}: {key}={value}: {what}; ignored, the earlier value stays"
            )),
            Some(Ok(())) => {}
        }
    }
    warnings
}

/// Applies one `[Recover]` assignment: `None` for an unknown key.
fn apply_recover(r: &mut Recover, key: &str, value: &str) -> Option<Result<(), &'static str>> {
    Some(match key {
        "MaxUse" | "KeepFree" => {
            let v = if value.is_empty() {
                Some(None)
            } else {
                bytes(value).map(Some)
            };
            v.map(|v| {
                if key == "MaxUse" {
                    r.max_use = v;
                } else {
                    r.keep_free = v;
                }
            })
            .ok_or("expected bytes (K, M, G, T, P) or a percentage")
        }
        "MaxBundles" => match value {
            "" | "infinity" => Some(None),
            v => v.parse().ok().filter(|n| *n > 0).map(Some),
        }
        .map(|v| r.max_bundles = v)
        .ok_or("expected a count of at least 1"),
        "MaxAge" => match value {
            "" | "infinity" => Some(None),
            v => duration(v).map(Some),
        }
        .map(|v| r.max_age = v)
        .ok_or("expected a time such as 30d, 1month or 1h 30min"),
        "Clean" => match value {
            "" | "discard" => Some(Clean::Discard),
            "bundle" => Some(Clean::Bundle),
            "keep" => Some(Clean::Keep),
            _ => None,
        }
        .map(|v| r.clean = v)
        .ok_or("expected bundle, keep or discard"),
        "OnBundle" => {
            r.on_bundle = (!value.is_empty()).then(|| value.to_string());
            Ok(())
        }
        _ => return None,
    })
}

/// Reads the main file and then the drop-ins in name order, for what
/// must go on whatever a file holds (recovery, the capture boot, the
/// upload): a file that cannot be read (a directory named `*.conf`, one
/// root cannot open) is a warning and skipped, one that is not UTF-8 is
/// read with its bad bytes replaced and a warning, as a bad value is. A
/// crash is never left unarchived, nor its FAILED message unsent, for a
/// stray byte in a comment.
pub fn load(sys: &System) -> (Config, Vec<String>) {
    let (c, mut warnings, unread) = read_all(sys);
    for e in unread {
        warnings.push(e.to_string());
    }
    (c, warnings)
}

/// As [`load`], for what grants (`[Request]`): a file not read whole may
/// hold the narrowing that was meant (a `Users=` in a section whose name
/// a bad byte broke), so the first such file is an error and nothing is
/// granted.
pub fn load_whole(sys: &System) -> Result<(Config, Vec<String>), ConfigError> {
    let (c, warnings, unread) = read_all(sys);
    match unread.into_iter().next() {
        Some(e) => Err(e),
        None => Ok((c, warnings)),
    }
}

/// Every file applied as far as it could be read, the warnings, and what
/// could not be read whole (skipped or decoded lossily, said how).
fn read_all(sys: &System) -> (Config, Vec<String>, Vec<ConfigError>) {
    let mut r = Config::default();
    let mut warnings = Vec::new();
    let mut unread = Vec::new();
    let whole = |file: &str, what: String| ConfigError {
        file: file.into(),
        line: 0,
        what,
    };
    let mut files = vec![MAIN.to_string()];
    match std::fs::read_dir(sys.path(DROP_INS)) {
        Ok(dir) => {
            let mut names: Vec<String> = dir
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".conf"))
                .collect();
            names.sort();
            files.extend(names.into_iter().map(|n| format!("{DROP_INS}/{n}")));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => unread.push(whole(DROP_INS, format!("{e}; its drop-ins are skipped"))),
    }
    for file in files {
        let bytes = match sys.read_bytes(&file) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(e) => {
                unread.push(whole(&file, format!("{e}; skipped")));
                continue;
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                unread.push(whole(
                    &file,
                    format!("{}; read with each bad byte as U+FFFD", e.utf8_error()),
                ));
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        warnings.extend(apply(&mut r, &file, &text));
    }
    (r, warnings, unread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_ins_override_in_name_order_and_empty_restores_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write(MAIN, "[Recover]\nMaxUse=10%\nMaxBundles=5\nClean=bundle\n")
            .unwrap();
        sys.write(
            &format!("{DROP_INS}/50-site.conf"),
            "[Recover]\nMaxBundles=2\nMaxAge=30d\n",
        )
        .unwrap();
        sys.write(
            &format!("{DROP_INS}/60-reset.conf"),
            "[Recover]\nMaxUse=\nBogus=1\n",
        )
        .unwrap();
        sys.write(
            &format!("{DROP_INS}/ignored.txt"),
            "[Recover]\nMaxBundles=9\n",
        )
        .unwrap();
        let (Config { recover: r, .. }, warnings) = load(&sys);
        assert_eq!(
            r,
            Recover {
                max_use: None,
                max_bundles: Some(2),
                max_age: Some(Duration::from_secs(30 * 86400)),
                clean: Clean::Bundle,
                ..Recover::default()
            }
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("60-reset.conf:3: unknown key Bogus="),
            "{warnings:?}"
        );
    }

    /// A drop-in that is not UTF-8, or not a file at all, costs its own
    /// settings at most: recovery still gets the rest, and a warning.
    #[test]
    fn a_file_that_cannot_be_read_as_text_is_a_warning_not_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let sys = System::new(dir.path());
        sys.write(MAIN, "[Recover]\nMaxBundles=5\n").unwrap();
        std::fs::create_dir_all(sys.path(DROP_INS)).unwrap();
        std::fs::write(
            sys.path(&format!("{DROP_INS}/x.conf")),
            b"[Recover]\n#\xe9\nClean=keep\n",
        )
        .unwrap();
        std::fs::create_dir(sys.path(&format!("{DROP_INS}/d.conf"))).unwrap();
        let (c, warnings) = load(&sys);
        assert_eq!(c.recover.max_bundles, Some(5));
        assert_eq!(c.recover.clean, Clean::Keep, "the rest of x.conf applies");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with(&format!("{DROP_INS}/d.conf: "))
                && warnings[0].ends_with("; skipped"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].starts_with(&format!("{DROP_INS}/x.conf: invalid utf-8")),
            "{warnings:?}"
        );
        // What grants refuses instead: the file may have narrowed it.
        let e = load_whole(&sys).unwrap_err();
        assert_eq!(e.file, format!("{DROP_INS}/d.conf"));
        std::fs::remove_dir(sys.path(&format!("{DROP_INS}/d.conf"))).unwrap();
        let e = load_whole(&sys).unwrap_err();
        assert_eq!(e.file, format!("{DROP_INS}/x.conf"));
    }

    #[test]
    fn the_shipped_file_reads_as_the_defaults() {
        let mut c = Config::default();
        let warnings = apply(&mut c, "crashring.conf", include_str!("../crashring.conf"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(c, Config::default());
        let example = "[Recover]\nMaxUse=10%\nKeepFree=15%\nMaxBundles=infinity\nMaxAge=infinity\nClean=discard\nOnBundle=\n[Request]\nUsers=@crashring\nPrintkLevel=warning\nDRMCategories=KMS ATOMIC STATE DRIVER\nKernelEvents=\nRateLimitIntervalSec=60s\nRateLimitBurst=3\nCopy=yes\n";
        assert!(apply(&mut c, "example", example).is_empty());
        assert_eq!(
            c.recover,
            Recover {
                max_use: Some(Bytes::Percent(10)),
                keep_free: Some(Bytes::Percent(15)),
                ..Recover::default()
            }
        );
    }

    #[test]
    fn defaults_follow_systemd_coredump() {
        let r = Recover::default();
        assert_eq!(r.max_use(100 << 30), 4 << 30);
        assert_eq!(r.max_use(5 << 20), 1 << 20);
        assert_eq!(r.max_use(20 << 30), 2 << 30);
        assert_eq!(r.keep_free(10 << 30), (10 << 30) / 100 * 15);
        assert_eq!(r.keep_free(100 << 30), 4 << 30);
    }

    #[test]
    fn bad_values_are_named_and_skipped_keeping_the_earlier_value() {
        let mut c = Config::default();
        let w = apply(&mut c, "x.conf", "[Recover]\nMaxBundles=3\n\nMaxUse=lots\n");
        assert_eq!(
            w,
            ["x.conf:4: MaxUse=lots: expected bytes (K, M, G, T, P) or a percentage; ignored, the earlier value stays"]
        );
        assert_eq!(c.recover.max_bundles, Some(3));
        for bad in [
            "MaxBundles=0",
            "MaxAge=3 fortnights",
            "Clean=maybe",
            "KeepFree=101%",
            "junk",
        ] {
            let mut c = Config::default();
            let w = apply(&mut c, "x.conf", &format!("[Recover]\n{bad}\n"));
            assert_eq!(w.len(), 1, "{bad}: {w:?}");
            assert_eq!(c, Config::default(), "{bad}");
        }
    }

    #[test]
    fn the_request_policy_reads_and_refuses_what_it_cannot_use() {
        let mut c = Config::default();
        let w = apply(
            &mut c,
            "x.conf",
            "[Request]\nUsers=kiosk @video\nPrintkLevel=err\nDRMCategories=kms atomic\nKernelEvents=marker\nRateLimitIntervalSec=5min\nRateLimitBurst=10\nCopy=no\n",
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.request,
            Request {
                users: vec!["kiosk".into(), "@video".into()],
                printk_level: Some(3),
                drm_categories: vec!["KMS".into(), "ATOMIC".into()],
                kernel_events: vec!["marker".into()],
                interval: Duration::from_secs(300),
                burst: 10,
                copy: false,
            }
        );
        let w = apply(
            &mut c,
            "y.conf",
            "[Request]\nUsers=\nPrintkLevel=none\nDRMCategories=\nCopy=\n",
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.request.users, Request::default().users);
        assert_eq!(c.request.printk_level, None);
        assert_eq!(c.request.drm_categories, Request::default().drm_categories);
        assert!(c.request.copy);
        let w = apply(
            &mut c,
            "z.conf",
            "[Request]\nUsers=none\nDRMCategories=none\nCopy=false\n",
        );
        assert!(w.is_empty(), "{w:?}");
        assert!(c.request.users.is_empty() && c.request.drm_categories.is_empty());
        assert!(!c.request.copy);
    }

    /// A value it cannot use never grants more than was meant: the
    /// setting takes its narrowest, not the earlier (often the widest,
    /// the default) value.
    #[test]
    fn an_unusable_request_value_grants_the_least() {
        let narrow = |f: fn(&mut Request)| {
            let mut r = Request::default();
            f(&mut r);
            r
        };
        for (bad, want) in [
            ("PrintkLevel=8", narrow(|r| r.printk_level = None)),
            ("PrintkLevel=loud", narrow(|r| r.printk_level = None)),
            (
                "DRMCategories=KMS ATOMICC",
                narrow(|r| r.drm_categories.clear()),
            ),
            ("RateLimitBurst=0", narrow(|r| r.burst = 1)),
            ("RateLimitIntervalSec=0", Request::default()),
            ("Copy=maybe", narrow(|r| r.copy = false)),
            ("Copy=no # a comment", narrow(|r| r.copy = false)),
            ("Path=/etc", Request::default()),
        ] {
            let mut c = Config::default();
            let w = apply(&mut c, "x.conf", &format!("[Request]\n{bad}\n"));
            assert_eq!(w.len(), 1, "{bad}: {w:?}");
            assert_eq!(c.request, want, "{bad}");
            assert_eq!(c.recover, Recover::default(), "{bad}");
        }
        let mut c = Config::default();
        let w = apply(&mut c, "x.conf", "[Request]\nPrintkLevel=loud\n");
        assert_eq!(
            w,
            ["x.conf:2: PrintkLevel=loud: expected a level, 0 to 7 or emerg ... debug, or none; no printk line instead"]
        );
    }

    #[test]
    fn systemd_times_and_sizes_are_understood() {
        assert_eq!(duration("45min"), Some(Duration::from_secs(2700)));
        assert_eq!(duration("1h 30min"), Some(Duration::from_secs(5400)));
        assert_eq!(duration("1month"), Some(Duration::from_secs(2_629_800)));
        assert_eq!(duration("2weeks"), Some(Duration::from_secs(14 * 86400)));
        assert_eq!(duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(duration("3 fortnights"), None);
        assert_eq!(duration(""), None);
        assert_eq!(bytes("64M"), Some(Bytes::Absolute(64 << 20)));
        assert_eq!(bytes("1T"), Some(Bytes::Absolute(1 << 40)));
        let mut c = Config::default();
        let w = apply(
            &mut c,
            "x.conf",
            "[Recover]\nMaxAge=1month\nMaxUse=1T\nKeepFree=1h 30min\n",
        );
        assert_eq!(c.recover.max_age, Some(Duration::from_secs(2_629_800)));
        assert_eq!(c.recover.max_use, Some(Bytes::Absolute(1 << 40)));
        assert_eq!(w.len(), 1, "{w:?}");
    }
}
