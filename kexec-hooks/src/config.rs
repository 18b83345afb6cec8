//! `/etc/crashring/crashring.conf` and its `crashring.conf.d/*.conf`
//! drop-ins, read as systemd reads its own: a `[Recover]` section of
//! `Key=value` lines, later files overriding earlier ones, an empty value
//! restoring the default.

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
    /// upload), after the bundle is in place and acknowledged.
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

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{file}:{line}: {what}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub what: String,
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

/// `30d`, `12h`, `45min`, `90s` or plain seconds, as systemd writes times.
fn duration(v: &str) -> Option<Duration> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(split);
    let n: u64 = n.parse().ok()?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => 1,
        "min" | "m" => 60,
        "h" | "hour" => 3600,
        "d" | "day" => 86400,
        "w" | "week" => 7 * 86400,
        _ => return None,
    };
    n.checked_mul(secs).map(Duration::from_secs)
}

/// Applies one file's text onto `r`; unknown keys are returned as
/// warnings, as systemd logs and skips them.
pub fn apply(r: &mut Recover, file: &str, text: &str) -> Result<Vec<String>, ConfigError> {
    let mut warnings = Vec::new();
    let mut section = String::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |what: String| ConfigError {
            file: file.into(),
            line: n + 1,
            what,
        };
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| err(format!("expected Key=value, found {line:?}")))?;
        let (key, value) = (key.trim(), value.trim());
        if section != "Recover" {
            warnings.push(format!(
                "{file}:{}: {key}= outside [Recover], ignored",
                n + 1
            ));
            continue;
        }
        let bad = |what: &str| err(format!("{key}={value}: {what}"));
        match key {
            "MaxUse" | "KeepFree" => {
                let v = if value.is_empty() {
                    None
                } else {
                    Some(
                        bytes(value)
                            .ok_or_else(|| bad("expected bytes (K, M, G) or a percentage"))?,
                    )
                };
                if key == "MaxUse" {
                    r.max_use = v;
                } else {
                    r.keep_free = v;
                }
            }
            "MaxBundles" => {
                r.max_bundles = match value {
                    "" | "infinity" => None,
                    v => Some(
                        v.parse()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| bad("expected a count of at least 1"))?,
                    ),
                }
            }
            "MaxAge" => {
                r.max_age = match value {
                    "" | "infinity" => None,
                    v => {
                        Some(duration(v).ok_or_else(|| bad("expected a time such as 30d or 12h"))?)
                    }
                }
            }
            "Clean" => {
                r.clean = match value {
                    "" | "discard" => Clean::Discard,
                    "bundle" => Clean::Bundle,
                    "keep" => Clean::Keep,
                    _ => return Err(bad("expected bundle, keep or discard")),
                }
            }
            "OnBundle" => r.on_bundle = (!value.is_empty()).then(|| value.to_string()),
            _ => warnings.push(format!("{file}:{}: unknown key {key}=, ignored", n + 1)),
        }
    }
    Ok(warnings)
}

/// Reads the main file and then the drop-ins in name order.
pub fn load(sys: &System) -> Result<(Recover, Vec<String>), ConfigError> {
    let mut r = Recover::default();
    let mut warnings = Vec::new();
    let unreadable = |file: &str, e: std::io::Error| ConfigError {
        file: file.into(),
        line: 0,
        what: e.to_string(),
    };
    let mut files = vec![MAIN.to_string()];
    if let Ok(dir) = std::fs::read_dir(sys.path(DROP_INS)) {
        let mut names: Vec<String> = dir
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".conf"))
            .collect();
        names.sort();
        files.extend(names.into_iter().map(|n| format!("{DROP_INS}/{n}")));
    }
    for file in files {
        if let Some(text) = sys.read(&file).map_err(|e| unreadable(&file, e))? {
            warnings.extend(apply(&mut r, &file, &text)?);
        }
    }
    Ok((r, warnings))
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
        let (r, warnings) = load(&sys).unwrap();
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

    #[test]
    fn the_shipped_file_reads_as_the_defaults() {
        let mut r = Recover::default();
        let warnings = apply(&mut r, "crashring.conf", include_str!("../crashring.conf")).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(r, Recover::default());
        let example = "[Recover]\nMaxUse=10%\nKeepFree=15%\nMaxBundles=infinity\nMaxAge=infinity\nClean=discard\nOnBundle=\n";
        apply(&mut r, "example", example).unwrap();
        assert_eq!(
            r,
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
    fn bad_values_name_file_line_and_key() {
        let mut r = Recover::default();
        let e = apply(&mut r, "x.conf", "[Recover]\n\nMaxUse=lots\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.conf:3: MaxUse=lots: expected bytes (K, M, G) or a percentage"
        );
        for bad in [
            "MaxBundles=0",
            "MaxAge=3 fortnights",
            "Clean=maybe",
            "KeepFree=101%",
            "junk",
        ] {
            assert!(
                apply(&mut r, "x.conf", &format!("[Recover]\n{bad}\n")).is_err(),
                "{bad}"
            );
        }
        assert_eq!(duration("45min"), Some(Duration::from_secs(2700)));
        assert_eq!(bytes("64M"), Some(Bytes::Absolute(64 << 20)));
    }
}
