//! A report without a crash, end to end on this machine: a listening
//! `SOCK_SEQPACKET` socket that hands each connection to `crashring
//! serve-request` as its standard input (as `crashring-request.socket`'s
//! `Accept=yes` does), and programs asking through `crashring report` as
//! other users (setpriv), so that the service learns who asks from the
//! socket itself. The recorder is a region file (`--from`); the module's
//! live view is read in the Debian guest (`signage-reboot-loop`).

mod common;

use common::{crashring, skip_without, write_tmp};
use crashring_request::{self as request, Reply};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const ASKER: u32 = 1000;
const OTHER: u32 = 1001;
const OUTSIDER: u32 = 1002;

/// A running recorder: a CPU with printk lines at levels 3 and 6, DRM
/// debug messages of KMS and PRIME, a dynamic-debug message and a
/// marker; the asker's stream "kiosk-ui" and another user's "intruder".
fn recorder() -> Vec<u8> {
    use pstore_ring::layout::STREAM_USER;
    use pstore_ring::schema::{self, Value, DEBUG_FORMATTED};
    use pstore_ring::write::{self, RegionConfig, StreamSpec};
    let user = |name, uid| StreamSpec {
        kind: STREAM_USER,
        cpu: u16::MAX,
        lane: 0,
        name,
        pid: 400 + uid,
        uid,
    };
    let specs = [
        StreamSpec::cpu(0),
        user("kiosk-ui", ASKER),
        user("intruder", OTHER),
    ];
    let cfg = RegionConfig {
        page_size: 1024,
        pages_per_stream: Some(4),
        streams: &specs,
        boot_id: *b"report-no-crash!",
        generation: 5,
        created_ns: 1_000,
        kernel_release: "6.12.48+deb12-amd64",
        hostname: "kiosk",
        producer: "crashring.ko",
        ..Default::default()
    };
    let mut mem = vec![0u8; 32 * 1024];
    let def = |id| schema::builtin(id).unwrap();
    let mut region = write::format(&mut mem, &cfg).unwrap();
    let mut ws: Vec<_> = region.streams.by_ref().collect();
    let printk = |level, text: &'static str| {
        [
            Value::Unsigned(level),
            Value::Unsigned(0),
            Value::Unsigned(0),
            Value::Unsigned(level),
            Value::Str(text.as_bytes()),
        ]
    };
    let debug = |category, text: &'static str| {
        [
            Value::Unsigned(0),
            Value::Unsigned(7),
            Value::Unsigned(u64::from(DEBUG_FORMATTED)),
            Value::Unsigned(category),
            Value::Str(b"0000:00:02.0"),
            Value::Bytes(text.as_bytes()),
        ]
    };
    let log = |text: &'static str| {
        [
            Value::Unsigned(6),
            Value::Chars(b"ui"),
            Value::Str(text.as_bytes()),
        ]
    };
    let (p, d, m, l) = (
        def(schema::EVENT_PRINTK),
        def(schema::EVENT_DEBUG),
        def(schema::EVENT_MARKER),
        def(schema::EVENT_LOG),
    );
    let cpu = &mut ws[0];
    cpu.write_event(2_000, p, &printk(3, "kernel error line"))
        .unwrap();
    cpu.write_event(3_000, p, &printk(6, "kernel info line"))
        .unwrap();
    cpu.write_event(4_000, d, &debug(2, "kms commit on crtc-41"))
        .unwrap();
    cpu.write_event(5_000, d, &debug(3, "prime import"))
        .unwrap();
    cpu.write_event(6_000, d, &debug(0xFFFF, "pr_debug of a module"))
        .unwrap();
    let marker = [
        Value::Unsigned(77),
        Value::Chars(b"sh"),
        Value::Str(b"somebody's marker"),
    ];
    cpu.write_event(7_000, m, &marker).unwrap();
    for (i, text) in ["frame 1", "frame 2", "commit failed"]
        .into_iter()
        .enumerate()
    {
        ws[1].write_event(8_000 + i as u64, l, &log(text)).unwrap();
    }
    ws[2]
        .write_event(9_000, l, &log("the other user's secret"))
        .unwrap();
    ws.iter_mut().for_each(|w| w.close());
    mem
}

/// A directory anyone may enter and write (the socket, copies).
fn open_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// A `SOCK_SEQPACKET` socket, close-on-exec as std's own: the services
/// and other tests start programs, which must not hold it open after it
/// is gone.
fn seqpacket() -> std::os::fd::OwnedFd {
    rustix::net::socket_with(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap()
}

/// The service for this test: its socket, served in a thread as systemd
/// would serve it, one `crashring serve-request` per connection, each
/// started as its connection comes, whether the others are done or not.
struct Service {
    socket: PathBuf,
    bundles: PathBuf,
    /// The system tree the service looks crashring.conf up under.
    root: PathBuf,
    /// Where it sends its journal messages.
    journal: std::os::unix::net::UnixDatagram,
    /// Its services still running.
    running: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Service {
    fn start(name: &str, policy: &str) -> Service {
        let base = open_dir(name);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("etc/crashring")).unwrap();
        std::fs::write(root.join("etc/crashring/crashring.conf"), policy).unwrap();
        let region = write_tmp(&format!("{name}.bin"), &recorder());
        // Under the system root, as crashring.conf and the journal are.
        let bundles = root.join("var/lib/crashring");
        let journal = root.join(&kexec_hooks::journal::SOCKET[1..]);
        std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
        let journal = std::os::unix::net::UnixDatagram::bind(journal).unwrap();
        journal.set_nonblocking(true).unwrap();
        let socket = base.join("request.socket");
        // std has no SOCK_SEQPACKET listener: rustix makes it, std accepts.
        let fd = seqpacket();
        rustix::net::bind(&fd, &rustix::net::SocketAddrUnix::new(&socket).unwrap()).unwrap();
        rustix::net::listen(&fd, 16).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let listener = UnixListener::from(fd);
        let from = region;
        let system = root.clone();
        let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = running.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let conn = std::os::fd::OwnedFd::from(conn.unwrap());
                let mut serve = Command::new(env!("CARGO_BIN_EXE_crashring"));
                serve
                    .args(["serve-request", "--from"])
                    .arg(&from)
                    .args(["--dir", "/var/lib/crashring", "--root"])
                    .arg(&root)
                    .stdin(Stdio::from(conn))
                    .stderr(Stdio::piped());
                let child = serve.spawn().unwrap();
                // As systemd, keep no copy of the connection: it closes
                // when the service exits, unread requests and all.
                drop(serve);
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let counted = counted.clone();
                std::thread::spawn(move || {
                    let out = child.wait_with_output().unwrap();
                    eprintln!("serve-request: {}", String::from_utf8_lossy(&out.stderr));
                    counted.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                });
            }
        });
        Service {
            socket,
            bundles,
            root: system,
            journal,
            running,
        }
    }

    /// Waits until every service started so far has exited. A service
    /// that answered has let its uid's busy lock go, but one that left
    /// its asker unanswered holds it until it returns.
    fn settle(&self) {
        while self.running.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The messages the service sent the journal since last asked.
    fn journaled(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n) = self.journal.recv(&mut buf) {
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        out
    }

    /// A connection to the service, made by this thread as it is.
    fn connect(&self) -> std::os::fd::OwnedFd {
        let fd = seqpacket();
        rustix::net::connect(
            &fd,
            &rustix::net::SocketAddrUnix::new(&self.socket).unwrap(),
        )
        .unwrap();
        fd
    }

    /// A connection to the service made as `uid`, which sends `first` at
    /// once if given. The uid is a thread's alone (the raw system
    /// call; libc's setresuid changes every thread's), and the socket
    /// records it at connect.
    fn connect_as(&self, uid: u32, first: Option<&[u8]>) -> std::os::fd::OwnedFd {
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: a system call without pointers, changing this
                // thread's credentials only.
                let rc = unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) };
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                let fd = self.connect();
                // A service that refused before reading has hung up.
                if let Some(Err(e)) = first.map(|bytes| request::send(&fd, bytes)) {
                    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
                    assert!(matches!(e.kind(), BrokenPipe | ConnectionReset), "{e}");
                }
                fd
            })
            .join()
            .unwrap()
        })
    }

    /// `crashring report` as `uid` with `args`.
    fn ask(&self, uid: u32, args: &[&str]) -> Output {
        Command::new("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
            ])
            .arg(env!("CARGO_BIN_EXE_crashring"))
            .args(["report", "--socket"])
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }
}

/// Every file of a bundle, with the archives inside it (Perfetto's)
/// opened too: (path, bytes).
fn contents(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        if path.ends_with(".tar.gz") {
            out.extend(contents(&data));
        }
        out.push((path, data));
    }
    out
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn as_root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    skip_without("root (to ask as other users)");
    false
}

#[test]
fn a_user_gets_a_report_of_its_own_session_and_of_nothing_else() {
    if !as_root() {
        return;
    }
    let policy = format!(
        "[Request]\nUsers={ASKER} {OTHER}\nPrintkLevel=warning\nDRMCategories=KMS\nRateLimitBurst=2\n"
    );
    let service = Service::start("request-own", &policy);
    // What a report killed while it wrote left (its unit's time limit):
    // the next report, holding the directory's lock, removes it.
    let staged = ".recovering-Ab3dE.tar.gz";
    let left = service
        .bundles
        .join(format!(".{staged}.Qw34E.staging/kernel"));
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("events.jsonl"), "half written").unwrap();
    std::fs::write(service.bundles.join(staged), "half written").unwrap();
    let copies = open_dir("request-own-copies");
    let copy = copies.join("report.tar.gz");
    let asked = service.ask(
        ASKER,
        &[
            "--why",
            "black screen after resume",
            "--copy",
            copy.to_str().unwrap(),
        ],
    );
    assert!(asked.status.success(), "{}", text(&asked));
    let name = String::from_utf8_lossy(&asked.stdout).trim().to_string();
    // Its own three events with the two kernel ones it was granted.
    assert!(text(&asked).contains(": 5 events"), "{}", text(&asked));
    assert!(
        name.starts_with("snapshot-kiosk-") && name.ends_with(&format!("-uid{ASKER}-1.tar.gz")),
        "{name}"
    );

    let hidden: Vec<_> = std::fs::read_dir(&service.bundles)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains("recovering"))
        .collect();
    assert!(hidden.is_empty(), "left: {hidden:?}");

    // The service's bundle: root's, private, beside its summary.
    let bundle = service.bundles.join(&name);
    let meta = std::fs::metadata(&bundle).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(service.bundles.join(name.replace(".tar.gz", ".json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["request"]["uid"], ASKER);
    assert_eq!(summary["reason"], "request");

    // The asker's copy is the same bundle, and checks.
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&bundle).unwrap()
    );
    let checked = crashring(&["check-bundle", copy.to_str().unwrap()]);
    assert!(checked.status.success(), "{}", text(&checked));

    let files = contents(&std::fs::read(&bundle).unwrap());
    let file = |suffix: &str| {
        let (_, data) = files.iter().find(|(p, _)| p.ends_with(suffix)).unwrap();
        String::from_utf8_lossy(data).into_owned()
    };
    let manifest: serde_json::Value = serde_json::from_str(&file("MANIFEST.json")).unwrap();
    assert_eq!(manifest["request"]["uid"], ASKER);
    assert_eq!(manifest["request"]["why"], "black screen after resume");
    let grant = &manifest["redaction"]["grant"];
    assert_eq!(grant["uid"], ASKER);
    assert_eq!(grant["printk_level"], 4);
    assert_eq!(grant["drm_categories"], serde_json::json!(["KMS"]));
    // Left out: the info line, PRIME, the pr_debug and the marker.
    assert_eq!(
        manifest["regions"][0]["redacted"]["outside_grant_left_out"],
        4
    );
    let dmesg = file("dmesg.txt");
    assert!(dmesg.contains("kernel error line"), "{dmesg}");
    assert!(dmesg.contains("kms commit on crtc-41"), "{dmesg}");
    for withheld in ["kernel info line", "prime import", "pr_debug of a module"] {
        assert!(!dmesg.contains(withheld), "{withheld} in {dmesg}");
    }
    // No file names the other user's stream or holds its events, nor the
    // marker; the asker's own events are in the trace.
    for (path, data) in &files {
        for withheld in [
            &b"intruder"[..],
            b"the other user's secret",
            b"somebody's marker",
        ] {
            assert!(
                !data.windows(withheld.len()).any(|w| w == withheld),
                "{path} holds {}",
                String::from_utf8_lossy(withheld)
            );
        }
    }
    assert!(files
        .iter()
        .any(|(p, d)| p.contains("ctf/") && d.windows(13).any(|w| w == b"commit failed")));

    // Another user naming the asker's stream is refused, saying so, and
    // the answer does not tell whether such a stream exists.
    let other = service.ask(OTHER, &["--why", "curious", "--stream", "kiosk-ui"]);
    assert!(!other.status.success());
    assert!(
        text(&other).contains("refused: uid 1001 has no stream named \"kiosk-ui\""),
        "{}",
        text(&other)
    );
    // A user the policy does not name may not ask at all.
    let outsider = service.ask(OUTSIDER, &["--why", "let me in"]);
    assert!(!outsider.status.success());
    assert!(
        text(&outsider).contains("may not ask for reports"),
        "{}",
        text(&outsider)
    );
    // The second within the minute is served; the third is rate-limited.
    let second = service.ask(ASKER, &["--why", "again", "--stream", "kiosk-ui"]);
    assert!(second.status.success(), "{}", text(&second));
    let third = service.ask(ASKER, &["--why", "and again"]);
    assert_eq!(third.status.code(), Some(75), "{}", text(&third));
    // The rate limit's own answer, not a busy one's.
    assert!(
        text(&third).contains("rate-limited, try again in")
            && text(&third).contains("RateLimitBurst="),
        "{}",
        text(&third)
    );
    let kept: Vec<_> = std::fs::read_dir(&service.bundles)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tar.gz"))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    // Each report and each refused request is a journal message (the
    // service sends it before its answer).
    let journaled = service.journaled();
    let with = |id: &str| {
        journaled
            .iter()
            .filter(|m| m.contains(&format!("MESSAGE_ID={id}\n")))
            .collect::<Vec<_>>()
    };
    assert_eq!(with(kexec_hooks::journal::REPORTED).len(), 2);
    assert!(
        with(kexec_hooks::journal::REQUEST_REFUSED)
            .iter()
            .any(|m| m.contains(&format!("CRASHRING_REQUESTER_UID={OTHER}\n"))),
        "{journaled:#?}"
    );
}

/// One datagram, and whether a descriptor came with it.
fn receive_noting_descriptors(fd: impl std::os::fd::AsFd) -> (Vec<u8>, bool) {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut buf = vec![0u8; request::MAX_MESSAGE];
    let got = rustix::net::recvmsg(
        fd,
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .unwrap();
    buf.truncate(got.bytes);
    let passed = control
        .drain()
        .any(|m| matches!(m, RecvAncillaryMessage::ScmRights(_)));
    (buf, passed)
}

#[test]
fn a_copy_is_the_bundles_bytes_never_a_descriptor_of_it() {
    if !as_root() {
        return;
    }
    let service = Service::start("request-copy", "");
    let fd = service.connect();
    let asked = request::Request {
        reason: "a copy".into(),
        streams: Vec::new(),
        copy: true,
    };
    request::send(&fd, &asked.encode()).unwrap();
    let (bytes, passed) = receive_noting_descriptors(&fd);
    assert!(!passed, "a descriptor came with the answer");
    let Ok(Reply::Written {
        bundle, copy_bytes, ..
    }) = Reply::parse(&bytes)
    else {
        panic!("{}", String::from_utf8_lossy(&bytes));
    };
    let kept = std::fs::read(service.bundles.join(&bundle)).unwrap();
    assert_eq!(copy_bytes, Some(kept.len() as u64));
    let deadline = std::time::Instant::now() + request::COPY_TIME;
    let mut copy = request::receive_copy(&fd, kept.len() as u64, deadline).unwrap();
    // The asker's own memory, no file of the bundle directory: retention
    // deleting the bundle frees its space whatever the asker keeps.
    let held = std::os::fd::AsRawFd::as_raw_fd(&copy);
    let target = std::fs::read_link(format!("/proc/self/fd/{held}")).unwrap();
    assert!(
        target.to_string_lossy().starts_with("/memfd:"),
        "{target:?}"
    );
    std::fs::remove_file(service.bundles.join(&bundle)).unwrap();
    let mut got = Vec::new();
    copy.read_to_end(&mut got).unwrap();
    assert!(got == kept, "the copy differs from the bundle");
    assert_eq!(
        request::receive_message(&fd).unwrap(),
        b"",
        "more after the copy"
    );
}

#[test]
fn a_malformed_request_is_refused_naming_what_is_wrong() {
    if !as_root() {
        return;
    }
    let service = Service::start("request-malformed", "");
    let fd = service.connect();
    request::send(&fd, b"crashring-request 2\nreason=x\npath=/etc/shadow\n").unwrap();
    let (bytes, passed) = receive_noting_descriptors(&fd);
    assert!(!passed);
    assert_eq!(
        Reply::parse(&bytes).unwrap(),
        Reply::Refused {
            why: "malformed request: line 3: unknown key \"path\"".into()
        }
    );
    // It cost no report of the rate limit (its record is the uid's).
    assert!(!service.bundles.join(".requests/0").exists());
}

#[test]
fn a_user_outside_the_policy_is_refused_before_it_asks() {
    if !as_root() {
        return;
    }
    let service = Service::start("request-outsider", &format!("[Request]\nUsers={ASKER}\n"));
    // Connected as the outsider, sending nothing: a service that waited
    // for the request would hang up after a second without an answer.
    let conn = service.connect_as(OUTSIDER, None);
    let (bytes, passed) = receive_noting_descriptors(&conn);
    assert!(!passed);
    assert_eq!(
        Reply::parse(&bytes),
        Ok(Reply::Refused {
            why: format!(
                "uid {OUTSIDER} may not ask for reports (crashring.conf [Request] Users={ASKER})"
            )
        })
    );
    // No report of its rate limit taken.
    assert!(!service
        .bundles
        .join(format!(".requests/{OUTSIDER}"))
        .exists());
    // No request came: nothing for the journal, which a flood of such
    // connections would otherwise fill.
    let journaled = service.journaled();
    assert!(journaled.is_empty(), "{journaled:#?}");
}

/// The answer on `fd` to a request the service may have left unread: a
/// receive is then told of the hang-up (ECONNRESET) once, ahead of the
/// answer queued before it, as `crashring_request`'s own receive knows.
fn answer_to_unread(fd: impl std::os::fd::AsFd) -> Reply {
    let bytes = match request::receive_message(&fd) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => request::receive_message(&fd),
        received => received,
    };
    Reply::parse(&bytes.unwrap()).unwrap()
}

#[test]
fn refusals_reach_the_journal_within_a_budget_and_briefly() {
    if !as_root() {
        return;
    }
    let service = Service::start(
        "request-refusal-flood",
        &format!("[Request]\nUsers={ASKER}\nRateLimitBurst=2\n"),
    );
    // A member (root) sending malformed requests, each quoting kilobytes
    // of its choosing: every one is answered, saying what was wrong.
    let junk = "k".repeat(3000);
    let malformed = format!("crashring-request 2\nreason=x\n{junk}=1\n");
    let quoted = format!("unknown key \"{}\"…", &junk[..64]);
    for _ in 0..5 {
        let fd = service.connect();
        request::send(&fd, malformed.as_bytes()).unwrap();
        let reply = Reply::parse(&request::receive_message(&fd).unwrap());
        assert_eq!(
            reply,
            Ok(Reply::Refused {
                why: format!("malformed request: line 3: {quoted}")
            })
        );
    }
    // An outsider asking, refused before its request is read.
    let asked = request::Request {
        reason: "let me in".into(),
        ..request::Request::default()
    };
    for _ in 0..5 {
        let fd = service.connect_as(OUTSIDER, Some(&asked.encode()));
        let reply = answer_to_unread(&fd);
        assert!(
            matches!(&reply, Reply::Refused { why } if why.contains("may not ask")),
            "{reply:?}"
        );
    }
    // The journal has each uid's first two refusals (RateLimitBurst=),
    // which quote 64 characters of what was sent; the rest, nothing.
    let journaled = service.journaled();
    let of = |uid: u32| {
        journaled
            .iter()
            .filter(|m| {
                m.contains(&format!(
                    "MESSAGE_ID={}\n",
                    kexec_hooks::journal::REQUEST_REFUSED
                ))
            })
            .filter(|m| m.contains(&format!("CRASHRING_REQUESTER_UID={uid}\n")))
            .count()
    };
    assert_eq!(of(0), 2, "{journaled:#?}");
    // (Its service journals a request only if it came before it looked.)
    assert!(of(OUTSIDER) <= 2, "{journaled:#?}");
    assert!(journaled.iter().all(|m| m.len() < 512), "{journaled:#?}");
    // The budget is the refusals' own: the member's reports are whole.
    let report = request::request_report_with(&asked, &service.socket);
    assert!(report.is_ok(), "{report:?}");
}

/// Whether a flock is held on `path`, as /proc/locks lists them (by
/// inode): trying the lock would take it for a moment, in which the
/// service would find it held by someone else.
fn locked(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(ino) = std::fs::metadata(path).map(|m| m.ino()) else {
        return false;
    };
    let suffix = format!(":{ino}");
    std::fs::read_to_string("/proc/locks").is_ok_and(|locks| {
        locks.lines().any(|l| {
            l.split_whitespace().nth(1) == Some("FLOCK")
                && l.split_whitespace().any(|f| f.ends_with(&suffix))
        })
    })
}

#[test]
fn a_users_second_connection_is_told_to_retry_while_its_first_is_served() {
    if !as_root() {
        return;
    }
    let service = Service::start("request-busy", "");
    let asked = request::Request {
        reason: "busy".into(),
        ..request::Request::default()
    };
    // A connection that never asks, as one of a user holding every slot
    // of the socket would: its service holds the uid's busy lock while it
    // waits for the request.
    let connected = std::time::Instant::now();
    let first = service.connect();
    let busy = service.bundles.join(".requests/0.busy");
    while !locked(&busy) && connected.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Asked as a program asks, which takes an answer to a request the
    // service did not read.
    let second = request::request_report_with(&asked, &service.socket);
    assert!(
        matches!(&second, Err(request::RequestError::RateLimited { retry_after: 1, why })
            if why == "busy: another request of yours is being served"),
        "{second:?}"
    );
    // The first is closed, unanswered, once the service has waited about
    // a second for its request.
    assert_eq!(request::receive_message(&first).unwrap(), b"");
    let waited = connected.elapsed();
    assert!(waited < std::time::Duration::from_secs(4), "{waited:?}");
    // The user is served again once no connection of its holds the lock.
    service.settle();
    let third = request::request_report_with(&asked, &service.socket);
    assert!(third.is_ok(), "{third:?}");
}

#[test]
fn a_service_that_cannot_read_its_configuration_says_so_to_the_asker() {
    if !as_root() {
        return;
    }
    let service = Service::start("request-unreadable-config", "");
    // Not UTF-8: crashring.conf cannot be read as text.
    std::fs::write(
        service.root.join("etc/crashring/crashring.conf"),
        b"[Request]\nUsers=\xff\n",
    )
    .unwrap();
    let asked = service.ask(1000, &["--why", "black screen"]);
    assert!(!asked.status.success());
    let said = text(&asked);
    assert!(
        said.contains("/etc/crashring/crashring.conf: invalid utf-8"),
        "{said}"
    );
    assert!(!service.bundles.join(".requests").exists());
}
