//! `crashring serve-request`: one connection to crashring-request.socket,
//! which systemd hands over as standard input (`Accept=yes`): who asks
//! (the socket's peer credentials), whether the policy lets them (decided
//! before anything is read), what (one request), and the report
//! (`extractor::recovery::report`).
//! Every answer goes back on the socket; every report to the journal,
//! and every refused request within its user's budget
//! (`report::take_refusal`).

use super::snapshot::LIVE;
use anyhow::{Context, Result};
use clap::Args;
use crashring_request::{self as request, Reply, Request};
use extractor::recovery::report::{self, Asker, Served};
use kexec_hooks::config;
use kexec_hooks::journal;
use kexec_hooks::system::System;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

#[derive(Args)]
pub struct ServeRequestArgs {
    /// The bundle directory.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/crashring")]
    dir: PathBuf,
    /// The recorder's live view.
    #[arg(long, value_name = "PATH", default_value = LIVE)]
    from: PathBuf,
    /// The system tree crashring.conf and the journal's socket are looked
    /// up under.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

/// How long a connection may take to send its request: the client sends
/// it as soon as it is connected (`crashring_request::request_report`),
/// and a connection that waits holds its uid's only slot
/// ([`report::take_busy`]) and one of the socket's.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

pub fn run(args: ServeRequestArgs) -> Result<u8> {
    let stdin = std::io::stdin();
    let conn = stdin.as_fd();
    let peer = rustix::net::sockopt::socket_peercred(conn)
        .context("standard input is no connection to crashring-request.socket")?;
    let asker = Asker {
        uid: peer.uid.as_raw(),
        pid: peer.pid.as_raw_nonzero().get() as u32,
    };
    rustix::net::sockopt::set_socket_timeout(
        conn,
        rustix::net::sockopt::Timeout::Recv,
        Some(REQUEST_TIMEOUT),
    )?;
    let sys = System::new(&args.root);
    let socket = sys.path(journal::SOCKET);
    let who = format!("uid {} (pid {})", asker.uid, asker.pid);
    let answer = |reply: &Reply| {
        if let Err(e) = request::send(conn, &reply.encode()) {
            eprintln!("crashring: answering {who}: {e}");
        }
    };
    // Whatever stops the service from serving is said to the asker too,
    // who would otherwise see only the connection close.
    let fail = |e: anyhow::Error| -> Result<u8> {
        answer(&Reply::Failed {
            why: format!("{e:#}"),
        });
        Err(e.context(format!("serving {who}'s request")))
    };
    // Whole or not at all: a file read in part may have narrowed the grant.
    let (cfg, warnings) = match config::load_whole(&sys) {
        Ok(loaded) => loaded,
        Err(e) => return fail(e.into()),
    };
    for w in warnings {
        eprintln!("crashring: {w}");
    }
    let dir = sys.path(&args.dir.to_string_lossy());
    // Every refusal is answered (a bounded datagram to the asker), but
    // goes to the journal only within the uid's refusal budget: anyone
    // may connect, and refusals cost no report. A request refused is a
    // journal message; a connection refused before it asked, a line of
    // the service's output (which the journal keeps as well).
    let refuse = |why: String, asked: bool| -> Result<u8> {
        match report::take_refusal(&dir, asker.uid, &cfg.request, SystemTime::now()) {
            Ok(true) if asked => {
                let message = format!("crashring: request from {who} refused: {why}");
                if !journal::send(
                    &socket,
                    &[
                        ("MESSAGE_ID", journal::REQUEST_REFUSED),
                        ("MESSAGE", &message),
                        ("PRIORITY", "4"),
                        ("CRASHRING_REQUESTER_UID", &asker.uid.to_string()),
                    ],
                ) {
                    eprintln!("{message}");
                }
            }
            Ok(true) => eprintln!("crashring: {who} refused before asking: {why}"),
            // Over budget: nothing.
            Ok(false) => {}
            Err(e) => eprintln!("crashring: {who} refused, not journaled: {e}"),
        }
        answer(&Reply::Refused { why });
        Ok(0)
    };
    // Before the request is read: a uid outside the policy holds no slot
    // of the socket for the time a request may take to come.
    if !report::allowed(asker.uid, &cfg.request.users) {
        let why = format!(
            "uid {} may not ask for reports (crashring.conf [Request] Users={})",
            asker.uid,
            cfg.request.users.join(" ")
        );
        return refuse(why, request_waiting(conn));
    }
    // One connection per uid at a time, held until its request is served
    // and its copy sent (released before an answer without a copy, so
    // that the uid's next request, which may come as soon as this one is
    // answered, does not find it held):
    // MaxConnectionsPerSource= counts none per uid on AF_UNIX before
    // systemd v256, so one member could otherwise hold every slot of the
    // socket with connections that never ask.
    let busy = match report::take_busy(&dir, asker.uid) {
        Ok(Some(busy)) => busy,
        // Nothing the asker did wrong (a program and its crash handler
        // may ask at once): a second later it will be served, so the
        // answer is the rate limit's, which tells it when to ask again
        // (the client library returns it, the caller retries); not journaled,
        // as a flood of such connections would drown the reports.
        Ok(None) => {
            answer(&Reply::RateLimited {
                retry_after: 1,
                why: "busy: another request of yours is being served".into(),
            });
            return Ok(0);
        }
        Err(e) => return fail(e.into()),
    };
    let bytes = match request::receive_message(conn) {
        Ok(bytes) => bytes,
        // The asker's doing (too slow, too long a message): said, but no
        // failed unit for it, as anyone may connect.
        Err(e) => {
            eprintln!("crashring: reading {who}'s request: {e}");
            return Ok(0);
        }
    };
    if bytes.is_empty() {
        // Hung up without asking: nothing to answer, nor to put in the
        // journal, where a flood of such connections would drown the
        // reports.
        eprintln!("crashring: {who} hung up without asking");
        return Ok(0);
    }
    let asked = match Request::parse(&bytes) {
        Ok(r) => r,
        Err(e) => {
            drop(busy);
            return refuse(format!("malformed request: {e}"), true);
        }
    };
    let served = report::serve(&dir, &args.from, &cfg, &asker, &asked);
    let copying = asked.copy && cfg.request.copy;
    // Let go before the answer, unless a copy follows it: its sending may
    // take COPY_TIME, and a uid holds one slot at a time.
    let busy = if copying && matches!(served, Ok(Served::Written { .. })) {
        Some(busy)
    } else {
        drop(busy);
        None
    };
    match served {
        Ok(Served::Written {
            name,
            events,
            file,
            warnings,
        }) => {
            for w in warnings {
                eprintln!("crashring: {w}");
            }
            let message = format!(
                "crashring: report {name} for {who}: {events} events; why: {}",
                asked.reason
            );
            if !journal::send(
                &socket,
                &[
                    ("MESSAGE_ID", journal::REPORTED),
                    ("MESSAGE", &message),
                    ("PRIORITY", "5"),
                    ("CRASHRING_BUNDLE", &name),
                    ("CRASHRING_REQUESTER_UID", &asker.uid.to_string()),
                    ("CRASHRING_REASON", &asked.reason),
                ],
            ) {
                eprintln!("{message}");
            }
            // A copy is the bundle's bytes, never a descriptor of it:
            // one the asker kept would hold the bundle's disk space past
            // its retention.
            let copy = copying
                .then(|| file.metadata().map(|m| m.len()))
                .transpose();
            let copy_bytes = match copy {
                Ok(len) => len,
                Err(e) => {
                    eprintln!("crashring: sizing {name} for {who}'s copy: {e}");
                    None
                }
            };
            answer(&Reply::Written {
                bundle: name,
                events,
                copy_bytes,
            });
            if let Some(len) = copy_bytes {
                // A few MiB over a local socket take milliseconds, and
                // an asker reading slowly would hold one of the socket's
                // slots.
                let deadline = std::time::Instant::now() + request::COPY_TIME;
                if let Err(e) = request::send_copy(conn, &file, len, deadline) {
                    eprintln!("crashring: sending {who} its copy: {e}");
                }
            }
            drop(busy);
            Ok(0)
        }
        Ok(Served::Refused(why)) => refuse(why, true),
        Ok(Served::RateLimited { retry_after, why }) => {
            eprintln!("crashring: request from {who} rate-limited: {why}");
            answer(&Reply::RateLimited { retry_after, why });
            Ok(0)
        }
        Err(e) => fail(e.into()),
    }
}

/// Whether a request is waiting on `conn`, read or not.
fn request_waiting(conn: impl AsFd) -> bool {
    use rustix::net::RecvFlags;
    let mut byte = [0u8; 1];
    rustix::net::recv(conn, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT)
        .is_ok_and(|(_, n)| n > 0)
}
