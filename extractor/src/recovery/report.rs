//! A report asked for without a crash (`crashring serve-request`, run by
//! `crashring-request@.service` for each connection to
//! `crashring-request.socket`): the recorder as it runs, read from the
//! module's live view, narrowed to what `crashring.conf`'s `[Request]`
//! policy grants the asker, redacted as every bundle is, and put into
//! the bundle directory beside the crashes, under the same lock and
//! retention. The asker only ever gets the bundle's name and, where the
//! policy allows, a copy of its bytes (never a descriptor of the bundle,
//! which would keep its disk space past retention).

use super::archive::{generation_of, io_at, retain};
use super::place::{place, Filing};
use super::{lock, remove_staging, RecoveryError};
use crate::bundle::grant::{self, Grant};
use crate::bundle::redact::Rules;
use crate::bundle::{self, Source};
use crate::recover::{self, InputSpec};
use crashring_request::Request;
use kexec_hooks::config::{self, Config};
use kexec_hooks::retention;
use pstore_ring::read::{drm_category_bit, HeaderTrust};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Who asks, from the socket's peer credentials.
#[derive(Clone, Debug)]
pub struct Asker {
    pub uid: u32,
    pub pid: u32,
}

/// What became of a request.
#[derive(Debug)]
pub enum Served {
    Written {
        /// The bundle's name in the bundle directory.
        name: String,
        events: u64,
        /// The bundle, opened read-only, to hand over if the policy
        /// allows.
        file: File,
        /// Said, but the bundle is in place all the same.
        warnings: Vec<String>,
    },
    Refused(String),
    RateLimited {
        retry_after: u64,
        why: String,
    },
}

/// Where the rate limit's record of each user's requests is kept: in the
/// bundle directory, which only root reads, beside nothing retention
/// counts.
const REQUESTS: &str = ".requests";

/// Whether `uid` may ask under `users` (names, uids and `@group`s): root
/// always; others by uid or name, or by a group NSS says they are in.
pub fn allowed(uid: u32, users: &[String]) -> bool {
    if uid == 0 || users.iter().any(|u| u.parse() == Ok(uid)) {
        return true;
    }
    let Some(user) = uzers::get_user_by_uid(uid) else {
        return false;
    };
    let name = user.name().to_string_lossy();
    let groups = uzers::get_user_groups(user.name(), user.primary_group_id()).unwrap_or_default();
    users.iter().any(|u| match u.strip_prefix('@') {
        Some(group) => groups.iter().any(|g| g.name().to_string_lossy() == group),
        None => *u == name,
    })
}

/// Takes one of `uid`'s requests in the last `interval` if fewer than
/// `burst` were taken, recording it; otherwise the seconds until the
/// oldest leaves the window. The record is a file per user of request
/// times (Unix seconds), locked while read and rewritten, so requests
/// served at once count each other.
pub fn take_request(
    dir: &Path,
    uid: u32,
    interval: Duration,
    burst: u32,
    now: SystemTime,
) -> io::Result<Result<(), u64>> {
    take(dir, &uid.to_string(), interval, burst, now)
}

/// Whether the journal may say that one of `uid`'s requests (or
/// connections) was refused: at most `RateLimitBurst=` refusals of a uid
/// in `RateLimitIntervalSec=`, as its reports, in a record of their own
/// (`UID.refused`). Anyone may connect and a refusal costs no report, so
/// without it one user could fill the journal; with it, a uid's refusals
/// take no more of it than the reports the policy already grants it.
pub fn take_refusal(
    dir: &Path,
    uid: u32,
    policy: &config::Request,
    now: SystemTime,
) -> Result<bool, RecoveryError> {
    let taken = take(
        dir,
        &format!("{uid}.refused"),
        policy.interval,
        policy.burst,
        now,
    );
    taken.map(|t| t.is_ok()).map_err(io_at(dir))
}

/// [`take_request`] on the record `name`.
fn take(
    dir: &Path,
    name: &str,
    interval: Duration,
    burst: u32,
    now: SystemTime,
) -> io::Result<Result<(), u64>> {
    let mut file = open_record(dir, name)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let window = interval.as_secs();
    // A time ahead of now (a clock set back) is forgotten, never waited
    // out.
    let mut times: Vec<u64> = text
        .lines()
        .filter_map(|l| l.parse().ok())
        .filter(|&t| t <= now && now - t < window)
        .collect();
    times.sort_unstable();
    if times.len() >= burst as usize {
        let oldest = times[times.len() - burst as usize];
        // What is left of the window, never oldest + window, which
        // overflows with an interval near u64::MAX seconds (one the
        // configuration accepts).
        return Ok(Err(window.saturating_sub(now - oldest).max(1)));
    }
    times.push(now);
    let kept: String = times.iter().map(|t| format!("{t}\n")).collect();
    file.rewind()?;
    file.set_len(0)?;
    file.write_all(kept.as_bytes())?;
    Ok(Ok(()))
}

/// A record of [`REQUESTS`] named `name`, opened to read and write, made
/// root's alone if missing, as the directories it is made in.
fn open_record(dir: &Path, name: &str) -> io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let records = dir.join(REQUESTS);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&records)?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(records.join(name))
}

/// One connection of a uid being served: the other connections of that
/// uid are told to retry a second later while it is held, and it is
/// released when dropped (at the latest when the service exits).
#[derive(Debug)]
pub struct Busy {
    _lock: File,
}

/// Takes `uid`'s busy lock (a flock on its record `UID.busy`, which no
/// later connection waits for): `None` while another connection of
/// `uid` holds it. Taken as soon as the uid is known and allowed, it
/// keeps one user from holding every slot of the socket, which systemd
/// cannot count per uid before v256.
pub fn take_busy(dir: &Path, uid: u32) -> Result<Option<Busy>, RecoveryError> {
    let file = open_record(dir, &format!("{uid}.busy")).map_err(io_at(dir))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Busy { _lock: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io_at(dir)(e)),
    }
}

/// The grant `policy` gives `uid` for `request`.
pub fn grant(policy: &config::Request, uid: u32, request: &Request) -> Grant {
    Grant {
        uid,
        streams: request.streams.clone(),
        printk_level: policy.printk_level,
        drm_categories: policy
            .drm_categories
            .iter()
            .filter_map(|c| drm_category_bit(c))
            .collect(),
        kernel_events: policy.kernel_events.clone(),
    }
}

/// Serves one request from `asker`, allowed by the policy: rate limit,
/// the live region from `live`, the bundle into `dir`.
pub fn serve(
    dir: &Path,
    live: &Path,
    config: &Config,
    asker: &Asker,
    request: &Request,
) -> Result<Served, RecoveryError> {
    let policy = &config.request;
    super::create_private_dir(dir)?;
    let now = SystemTime::now();
    if let Err(retry_after) =
        take_request(dir, asker.uid, policy.interval, policy.burst, now).map_err(io_at(dir))?
    {
        return Ok(Served::RateLimited {
            retry_after,
            why: format!(
                "uid {} asked for {} reports within {} s (crashring.conf [Request] RateLimitBurst=, RateLimitIntervalSec=)",
                asker.uid,
                policy.burst,
                policy.interval.as_secs()
            ),
        });
    }
    let spec = InputSpec {
        path: live.to_path_buf(),
        phys: None,
        trust: HeaderTrust::Checksummed,
    };
    let dump = recover::open(&spec)?;
    let loaded = recover::find(dump, &spec, &mut |_, _| {})?;
    let mut recovered = loaded.regions().collect::<Result<Vec<_>, _>>()?;
    if recovered.is_empty() {
        return Err(loaded.no_region(&spec).into());
    }
    // A stream named must be the asker's own; whether another user has
    // one of that name is not said.
    for name in &request.streams {
        let own = recovered.iter().any(|r| {
            r.region
                .streams
                .iter()
                .any(|s| !s.is_kernel() && s.uid == asker.uid && s.name == *name)
        });
        if !own {
            return Ok(Served::Refused(format!(
                "uid {} has no stream named {name:?} in the recorder: a report holds only the asker's own streams",
                asker.uid
            )));
        }
    }
    let grant = grant(policy, asker.uid, request);
    for r in &mut recovered {
        grant::narrow(r, &grant);
    }
    // Never the input layer's messages, nor raw addresses: a report goes
    // to whoever asked.
    let rules = Rules {
        grant: Some(grant),
        ..Rules::default()
    };
    let asked = bundle::Request {
        why: request.reason.clone(),
        uid: asker.uid,
        at_ns: now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128),
    };
    let _lock = lock(dir)?;
    remove_staging(dir);
    // A report makes room among older reports only (prune_for_report).
    let (_, mut warnings) = retain(dir, &config.recover, None, &[], retention::prune_for_report);
    let mut g = generation_of(&recovered[0]);
    g.reason = "request".into();
    g.message = request.reason.clone();
    let placed = place(
        dir,
        |staging| {
            Ok(bundle::write(
                staging,
                &Source::of(&loaded.dump, "crashring-current".into()),
                &recovered,
                &rules,
                &[],
                Some(&asked),
            )?)
        },
        // The archive order makes the name unique: one user's requests
        // within a second share the rest.
        |summary, archived| format!("{}-uid{}-{archived}", summary.top, asker.uid),
        &g,
        Some(&asked),
        Filing::default(),
    )?;
    let (_, more) = retain(
        dir,
        &config.recover,
        Some((&placed.name, placed.size)),
        &[],
        retention::prune_for_report,
    );
    warnings.extend(more);
    let file = File::open(&placed.path).map_err(io_at(&placed.path))?;
    Ok(Served::Written {
        name: format!("{}.tar.gz", placed.name),
        // The asker's own events with the kernel's it was granted.
        events: placed.summary.events + placed.summary.user_events,
        file,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_limited_per_user_within_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let minute = Duration::from_secs(60);
        let take = |uid, at: u64| {
            take_request(dir.path(), uid, minute, 3, t0 + Duration::from_secs(at)).unwrap()
        };
        assert_eq!(take(1000, 0), Ok(()));
        assert_eq!(take(1000, 10), Ok(()));
        assert_eq!(take(1000, 20), Ok(()));
        // The fourth waits until the first leaves the window.
        assert_eq!(take(1000, 30), Err(30));
        // Another user has a window of its own.
        assert_eq!(take(1001, 30), Ok(()));
        assert_eq!(take(1000, 60), Ok(()));
        assert_eq!(take(1000, 61), Err(9));
        // A record from the future (a clock set back) is forgotten.
        assert_eq!(take(1002, 500), Ok(()));
        assert_eq!(take(1002, 0), Ok(()));
        assert_eq!(take(1002, 1), Ok(()));
        assert_eq!(take(1002, 2), Ok(()));
        assert_eq!(take(1002, 3), Err(57));
    }

    #[test]
    fn a_window_of_any_length_says_how_long_to_wait() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let forever = Duration::from_secs(u64::MAX);
        let take = |at: u64| {
            take_request(dir.path(), 1000, forever, 1, t0 + Duration::from_secs(at)).unwrap()
        };
        assert_eq!(take(0), Ok(()));
        assert_eq!(take(10), Err(u64::MAX - 10));
    }

    #[test]
    fn refusals_are_journaled_within_a_budget_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let policy = config::Request {
            burst: 2,
            ..config::Request::default()
        };
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let refused = |uid, at: u64| {
            take_refusal(dir.path(), uid, &policy, t0 + Duration::from_secs(at)).unwrap()
        };
        assert!(refused(1000, 0));
        assert!(refused(1000, 1));
        assert!(!refused(1000, 2));
        // Another user has a budget of its own, and the user's reports a
        // record of their own, which its refusals took nothing from.
        assert!(refused(1001, 2));
        let minute = policy.interval;
        assert_eq!(
            take_request(dir.path(), 1000, minute, 2, t0 + Duration::from_secs(2)).unwrap(),
            Ok(())
        );
        // The first refusal leaves the window, and makes room for one.
        assert!(refused(1000, 60));
        assert!(!refused(1000, 60));
    }

    #[test]
    fn a_second_connection_of_a_user_is_busy_until_the_first_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let first = take_busy(dir.path(), 1000).unwrap();
        assert!(first.is_some());
        assert!(take_busy(dir.path(), 1000).unwrap().is_none());
        // Another user is not held up.
        assert!(take_busy(dir.path(), 1001).unwrap().is_some());
        drop(first);
        assert!(take_busy(dir.path(), 1000).unwrap().is_some());
        // Root's alone, as the rate limit's records.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join(REQUESTS)), 0o700);
        assert_eq!(mode(&dir.path().join(REQUESTS).join("1000.busy")), 0o600);
    }

    #[test]
    fn root_may_always_ask_and_a_missing_user_never() {
        assert!(allowed(0, &[]));
        assert!(!allowed(u32::MAX - 7, &["@root".into()]));
        assert!(!allowed(u32::MAX - 7, &[]));
        assert!(allowed(u32::MAX - 7, &[format!("{}", u32::MAX - 7)]));
    }
}
