//! Asking for a bug report without a crash: the protocol between a
//! program and `crashring-request.socket`, and the call a program makes
//! ([`request_report`]).
//!
//! The program never reads the recorder. It sends one request (why it
//! asks; optionally which of its own streams, and whether it wants a
//! copy) as one datagram on a `SOCK_SEQPACKET` socket; the service,
//! started by systemd for the connection as systemd-coredump is for
//! its socket, learns who asks from the socket's peer credentials,
//! applies `crashring.conf`'s `[Request]` policy, writes the bundle
//! into the bundle directory and answers with one datagram: the
//! bundle's name, or why not. Where the asker wants a copy and the
//! policy allows one, the answer says its size and the bundle's bytes
//! follow, in datagrams of at most [`COPY_CHUNK`] bytes, at most
//! [`MAX_COPY`] in all and within [`COPY_TIME`] of the answer, which the
//! asker keeps in its own memory ([`Report::copy`]); an answer that says
//! so to a request without `copy=1` breaks the protocol. Never a
//! descriptor of the bundle itself: an asker holding one would keep its
//! disk space after retention deleted it, and could fill the disk until
//! retention deleted crashes to make room.
//!
//! Both messages are UTF-8 text, at most [`MAX_MESSAGE`] bytes: a first
//! line naming the message, then `key=value` lines (README.md, "A report
//! without a crash", has the whole grammar):
//!
//! ```text
//! crashring-request 2        ok                 refused
//! reason=black screen        bundle=NAME        why=TEXT
//! stream=kiosk-ui            events=N
//! copy=1                     copy-bytes=N       rate-limited
//!                                               retry-after=SECONDS
//!                            failed             why=TEXT
//!                            why=TEXT
//! ```
//!
//! Every text (a reason, a stream's or the bundle's name, a why) is
//! refused empty or holding a control character or a line or
//! bidirectional mark, by the service and the asker alike: the asker
//! shows the answer to a person.
//!
//! Where a message breaks the protocol, the error (a refusal's `why=`, for
//! a request) quotes at most 64 characters of what broke it, with `…`
//! where it was cut.
//!
//! A request of version 1 (whose copy was a descriptor of the bundle)
//! is served as one of version 2 without a copy.

use pstore_ring::text::unsafe_char;
use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvFlags, SendFlags, SocketAddrUnix, SocketType,
};

/// Where the service listens.
pub const SOCKET: &str = "/run/crashring/request.socket";
/// An environment variable naming another socket to ask (a test's, or a
/// container's bind mount of the host's); not heeded in a set-user-ID,
/// set-group-ID or file-capability program ([`socket`]).
pub const SOCKET_VAR: &str = "CRASHRING_REQUEST_SOCKET";

/// The socket a program asks: [`SOCKET_VAR`]'s, or [`SOCKET`].
pub fn socket() -> std::path::PathBuf {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave
    // the process; AT_SECURE is always there (0 where it is absent).
    let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
    socket_of(secure, std::env::var_os(SOCKET_VAR))
}

/// The socket named by `var` ([`SOCKET_VAR`]'s value), unless the program
/// runs `secure` (`AT_SECURE`: set-user-ID, set-group-ID, file
/// capabilities), whose invoker sets its environment and could point it
/// at a service of their own: that one would learn the program's reason
/// and stream names and could answer whatever it liked, a copy included.
fn socket_of(secure: bool, var: Option<std::ffi::OsString>) -> std::path::PathBuf {
    match var {
        Some(path) if !secure => path.into(),
        _ => SOCKET.into(),
    }
}
/// The longest message either side sends.
pub const MAX_MESSAGE: usize = 4096;
/// The longest reason, in bytes.
pub const MAX_REASON: usize = 512;
/// The most streams one request names.
pub const MAX_STREAMS: usize = 16;
/// The longest stream name: the format's 32 bytes less the NUL.
pub const MAX_STREAM_NAME: usize = 31;
/// The largest datagram of a copy.
pub const COPY_CHUNK: usize = 64 << 10;
/// The largest copy an asker takes into its memory: the largest live
/// region the service reads (the extractor's `follow.rs`, 4 GiB), of
/// which a report holds the asker's part, compressed. A service that
/// announces more is broken, or not crashring's.
pub const MAX_COPY: u64 = 4 << 30;
/// How long a copy may take from the answer on: the service stops
/// sending then, and the asker, whose clock starts once the answer has
/// come, waits no longer, however steadily the datagrams drip.
pub const COPY_TIME: Duration = Duration::from_secs(10);
/// The first line of a request, naming the protocol's version: 2, whose
/// copy is the bundle's bytes after the answer.
const REQUEST_LINE: &str = "crashring-request 2";
/// A request of version 1, whose copy was a descriptor of the bundle: it
/// is served without one.
const REQUEST_LINE_1: &str = "crashring-request 1";

/// What a program asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Why: one line, kept in the bundle and the journal.
    pub reason: String,
    /// Which of the asker's own streams the report holds; all of them
    /// when empty.
    pub streams: Vec<String>,
    /// Whether the asker wants a copy of the bundle.
    pub copy: bool,
}

/// What the service answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The bundle is in the bundle directory under this name, holding
    /// `events`: the asker's own and the kernel's it was granted. With
    /// `copy_bytes`, a copy of that many bytes follows.
    Written {
        bundle: String,
        events: u64,
        copy_bytes: Option<u64>,
    },
    /// The policy does not let this asker have what it asked for.
    Refused { why: String },
    /// Too many requests from this user lately, or another of its
    /// requests being served ("busy", for a second): try again in
    /// `retry_after` seconds.
    RateLimited { retry_after: u64, why: String },
    /// The request was allowed but no bundle could be written.
    Failed { why: String },
}

/// A message that breaks the protocol, with the line it broke it on (0:
/// the message as a whole).
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError {
    pub line: usize,
    pub what: String,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.what),
            n => write!(f, "line {n}: {}", self.what),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// The most characters of the other side's text an error quotes: enough
/// to tell what it was. The service journals why it refused a request,
/// and all of it (up to [`MAX_MESSAGE`] bytes) would let an asker write
/// kilobytes of its choosing there with each.
const MAX_QUOTED: usize = 64;

/// `text` quoted as `{:?}` quotes it, cut after at most [`MAX_QUOTED`]
/// characters between the quotes, with `…` after them where it was cut.
fn quoted(text: &str) -> String {
    let mut shown = 0;
    let cut = text.char_indices().find_map(|(at, c)| {
        shown += c.escape_debug().len();
        (shown > MAX_QUOTED).then_some(at)
    });
    match cut {
        Some(at) => format!("{:?}…", &text[..at]),
        None => format!("{text:?}"),
    }
}

fn bad(line: usize, what: impl Into<String>) -> ProtocolError {
    ProtocolError {
        line,
        what: what.into(),
    }
}

/// Why a value cannot travel in a message, a request's or an answer's:
/// the checks both sides make.
fn check_text(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if value.len() > max {
        return Err(format!("{what} is {} bytes, over {max}", value.len()));
    }
    // What a person reads it in (the journal, the manifest) must show
    // it as it is: no line of its own, nothing reordering the line.
    if value.chars().any(|c| c.is_control() || unsafe_char(c)) {
        return Err(format!(
            "{what} holds a control character or a line or bidirectional mark"
        ));
    }
    Ok(())
}

/// A message's `key=value` lines after its first, numbered from 2.
fn fields(text: &str) -> impl Iterator<Item = (usize, Result<(&str, &str), ProtocolError>)> {
    text.lines().enumerate().skip(1).map(|(n, line)| {
        let n = n + 1;
        (
            n,
            line.split_once('=')
                .ok_or_else(|| bad(n, format!("expected key=value, found {}", quoted(line)))),
        )
    })
}

/// The message as text, if it is no longer than [`MAX_MESSAGE`] and
/// UTF-8 ending in a newline.
fn message(bytes: &[u8]) -> Result<&str, ProtocolError> {
    if bytes.len() > MAX_MESSAGE {
        return Err(bad(0, format!("{} bytes, over {MAX_MESSAGE}", bytes.len())));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        bad(line, "not UTF-8")
    })?;
    if !text.ends_with('\n') {
        return Err(bad(
            text.lines().count(),
            "the message does not end in a newline",
        ));
    }
    Ok(text)
}

impl Request {
    /// Whether the request can be sent: the service makes the same checks
    /// ([`Request::parse`]).
    pub fn check(&self) -> Result<(), String> {
        check_text("the reason", &self.reason, MAX_REASON)?;
        if self.streams.len() > MAX_STREAMS {
            return Err(format!(
                "{} streams named, over {MAX_STREAMS}",
                self.streams.len()
            ));
        }
        for s in &self.streams {
            check_text("a stream name", s, MAX_STREAM_NAME)?;
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = format!("{REQUEST_LINE}\nreason={}\n", self.reason);
        for s in &self.streams {
            out += &format!("stream={s}\n");
        }
        if self.copy {
            out += "copy=1\n";
        }
        out.into_bytes()
    }

    /// Parses a request as the service receives it: any bytes at all.
    pub fn parse(bytes: &[u8]) -> Result<Request, ProtocolError> {
        let text = message(bytes)?;
        let first = text.lines().next().unwrap_or("");
        if first != REQUEST_LINE && first != REQUEST_LINE_1 {
            return Err(bad(
                1,
                format!("expected {REQUEST_LINE:?}, found {}", quoted(first)),
            ));
        }
        let mut r = Request::default();
        let mut seen_reason = false;
        let mut seen_copy = false;
        for (n, field) in fields(text) {
            let (key, value) = field?;
            match key {
                "reason" if !seen_reason => {
                    seen_reason = true;
                    r.reason = value.into();
                }
                "stream" if r.streams.len() < MAX_STREAMS => {
                    if r.streams.iter().any(|s| s == value) {
                        return Err(bad(n, format!("stream {} named twice", quoted(value))));
                    }
                    r.streams.push(value.into());
                }
                "stream" => return Err(bad(n, format!("over {MAX_STREAMS} streams named"))),
                "copy" if !seen_copy => {
                    seen_copy = true;
                    r.copy = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(bad(n, format!("copy= is 0 or 1, not {}", quoted(value)))),
                    };
                }
                "reason" | "copy" => return Err(bad(n, format!("{key}= given twice"))),
                _ => return Err(bad(n, format!("unknown key {}", quoted(key)))),
            }
        }
        if !seen_reason {
            return Err(bad(0, "no reason= line"));
        }
        // Version 1's asker waits for a descriptor, which no answer
        // carries any more, and would take copy-bytes= for a broken
        // answer: it gets its report without a copy.
        r.copy &= first == REQUEST_LINE;
        r.check().map_err(|what| bad(0, what))?;
        Ok(r)
    }
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        // A reason can only make a line of its own.
        let line = |s: &str| s.replace(|c: char| c.is_control() || unsafe_char(c), " ");
        match self {
            Reply::Written {
                bundle,
                events,
                copy_bytes,
            } => {
                let mut out = format!("ok\nbundle={}\nevents={events}\n", line(bundle));
                if let Some(n) = copy_bytes {
                    out += &format!("copy-bytes={n}\n");
                }
                out
            }
            Reply::Refused { why } => format!("refused\nwhy={}\n", line(why)),
            Reply::RateLimited { retry_after, why } => {
                format!(
                    "rate-limited\nretry-after={retry_after}\nwhy={}\n",
                    line(why)
                )
            }
            Reply::Failed { why } => format!("failed\nwhy={}\n", line(why)),
        }
        .into_bytes()
    }

    /// Parses the service's answer.
    pub fn parse(bytes: &[u8]) -> Result<Reply, ProtocolError> {
        let text = message(bytes)?;
        let mut get = std::collections::BTreeMap::new();
        for (n, field) in fields(text) {
            let (key, value) = field?;
            if get.insert(key, value).is_some() {
                return Err(bad(n, format!("{key}= given twice")));
            }
        }
        let first = text.lines().next().unwrap_or("");
        // Only an answer with a bundle may say a copy follows.
        let copy_bytes = if first == "ok" {
            get.remove("copy-bytes")
        } else {
            None
        };
        let mut take = |key: &str| {
            get.remove(key)
                .map(str::to_string)
                .ok_or_else(|| bad(0, format!("no {key}= line")))
        };
        let number = |key: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| bad(0, format!("{key}= is no number: {}", quoted(&v))))
        };
        let reply = match first {
            "ok" => Reply::Written {
                bundle: take("bundle")?,
                events: number("events", take("events")?)?,
                copy_bytes: copy_bytes
                    .map(|v| number("copy-bytes", v.to_string()))
                    .transpose()?,
            },
            "refused" => Reply::Refused { why: take("why")? },
            "rate-limited" => Reply::RateLimited {
                retry_after: number("retry-after", take("retry-after")?)?,
                why: take("why")?,
            },
            "failed" => Reply::Failed { why: take("why")? },
            other => return Err(bad(1, format!("unknown answer {}", quoted(other)))),
        };
        if let Some(key) = get.keys().next() {
            return Err(bad(0, format!("unknown key {}", quoted(key))));
        }
        // The asker shows these to a person (crashring report prints
        // both): the request's checks, where Reply::encode has made
        // every such character a space.
        match &reply {
            Reply::Written { bundle, .. } => check_text("bundle=", bundle, MAX_MESSAGE),
            Reply::Refused { why } | Reply::RateLimited { why, .. } | Reply::Failed { why } => {
                check_text("why=", why, MAX_MESSAGE)
            }
        }
        .map_err(|what| bad(0, what))?;
        Ok(reply)
    }
}

/// A report the service wrote.
#[derive(Debug)]
pub struct Report {
    /// Its name in the bundle directory.
    pub bundle: String,
    /// The events it holds.
    pub events: u64,
    /// A copy of it in this process's memory (a memfd, at its start), if
    /// asked for and the policy allows: the service's bundle stays under
    /// its retention, whatever the asker keeps.
    pub copy: Option<File>,
}

/// Why no report came.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("the request cannot be sent: {0}")]
    Invalid(String),
    #[error("crashring's request service at {socket}: {source}")]
    Unreachable { socket: String, source: io::Error },
    /// What the service sent is no answer. (Not the error's source: the
    /// message says it already.)
    #[error("the request service broke the protocol: {0}")]
    Protocol(ProtocolError),
    #[error(
        "crashring's request service at {socket} closed the connection without an answer (its journal says why)"
    )]
    NoAnswer { socket: String },
    #[error("refused: {0}")]
    Refused(String),
    #[error("rate-limited, try again in {retry_after} s: {why}")]
    RateLimited { retry_after: u64, why: String },
    #[error("the request service could not write the report: {0}")]
    Failed(String),
    #[error("report {bundle} written, but its copy did not come whole: {why}")]
    Copy {
        bundle: String,
        events: u64,
        why: String,
    },
}

/// Asks the service ([`socket`]) for a report of this program's own
/// session, all of its streams, without a copy.
pub fn request_report(reason: &str) -> Result<Report, RequestError> {
    request_report_with(
        &Request {
            reason: reason.into(),
            ..Request::default()
        },
        &socket(),
    )
}

/// How long an asker waits for the answer: the service's own limit (its
/// unit's `RuntimeMaxSec=2min`), and a little more.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(130);

/// Sends `request` to the service listening at `socket` and waits for its
/// answer (the service bundles the recorder first: seconds, at most).
pub fn request_report_with(request: &Request, socket: &Path) -> Result<Report, RequestError> {
    request.check().map_err(RequestError::Invalid)?;
    let unreachable = |source: io::Error| RequestError::Unreachable {
        socket: socket.display().to_string(),
        source,
    };
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| unreachable(e.into()))?;
    let addr = SocketAddrUnix::new(socket).map_err(|e| unreachable(e.into()))?;
    rustix::net::connect(&fd, &addr).map_err(|e| unreachable(e.into()))?;
    rustix::net::sockopt::set_socket_timeout(
        &fd,
        rustix::net::sockopt::Timeout::Recv,
        Some(ANSWER_TIMEOUT),
    )
    .map_err(|e| unreachable(e.into()))?;
    let bytes = exchange(&fd, request).map_err(unreachable)?;
    if bytes.is_empty() {
        return Err(RequestError::NoAnswer {
            socket: socket.display().to_string(),
        });
    }
    match Reply::parse(&bytes).map_err(RequestError::Protocol)? {
        Reply::Written {
            bundle,
            events,
            copy_bytes,
        } => {
            // A copy not asked for would be a descriptor the caller never
            // looks for (the C API's copy_fd) and so never closes.
            if copy_bytes.is_some() && !request.copy {
                return Err(RequestError::Protocol(bad(
                    0,
                    "copy-bytes= in the answer to a request without copy=1",
                )));
            }
            let copy = match copy_bytes {
                Some(len) => match receive_copy(&fd, len, Instant::now() + COPY_TIME) {
                    Ok(copy) => Some(copy),
                    Err(e) => {
                        return Err(RequestError::Copy {
                            bundle,
                            events,
                            why: e.to_string(),
                        })
                    }
                },
                None => None,
            };
            Ok(Report {
                bundle,
                events,
                copy,
            })
        }
        Reply::Refused { why } => Err(RequestError::Refused(why)),
        Reply::RateLimited { retry_after, why } => {
            Err(RequestError::RateLimited { retry_after, why })
        }
        Reply::Failed { why } => Err(RequestError::Failed(why)),
    }
}

/// Sends `request` on a connection to the service and receives its
/// answer. The service may refuse without reading (a uid outside its
/// policy): its answer is then queued here before it hangs up, whether
/// the request came too late (EPIPE) or went unread (ECONNRESET, which
/// the kernel reports once, to the send or the receive, ahead of what is
/// queued).
fn exchange(fd: impl AsFd, request: &Request) -> io::Result<Vec<u8>> {
    use rustix::io::Errno;
    match rustix::net::send(&fd, &request.encode(), SendFlags::NOSIGNAL) {
        Ok(_) | Err(Errno::PIPE | Errno::CONNRESET) => {}
        Err(e) => return Err(e.into()),
    }
    receive_answer(fd)
}

/// The service's answer, past an ECONNRESET reported ahead of it.
fn receive_answer(fd: impl AsFd) -> io::Result<Vec<u8>> {
    match receive_message(&fd) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => receive_message(&fd),
        received => received,
    }
}

/// One message, taking no descriptor sent with it: the kernel drops
/// those, where closing one here could wait for as long as whoever serves
/// its file likes (a FUSE mount of the sender's).
pub fn receive_message(fd: impl AsFd) -> io::Result<Vec<u8>> {
    receive_datagram(fd, MAX_MESSAGE, "a message")
}

/// One datagram of at most `max` bytes (`what` is over it otherwise), or
/// none at the end of the connection.
fn receive_datagram(fd: impl AsFd, max: usize, what: &str) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max + 1];
    let got = rustix::net::recvmsg(
        fd,
        &mut [io::IoSliceMut::new(&mut buf)],
        &mut RecvAncillaryBuffer::new(&mut []),
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if got.flags.contains(rustix::net::ReturnFlags::TRUNC) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what} over {max} bytes"),
        ));
    }
    buf.truncate(got.bytes);
    Ok(buf)
}

/// Sends one datagram.
pub fn send(fd: impl AsFd, bytes: &[u8]) -> io::Result<()> {
    rustix::net::send(fd, bytes, SendFlags::NOSIGNAL)?;
    Ok(())
}

/// Sends the first `len` bytes of `file` as the copy an answer announced,
/// all of it by `deadline`, so that an asker reading slowly holds the
/// service no longer: datagrams of at most [`COPY_CHUNK`] bytes, or half
/// the socket's send buffer where that is less (a datagram goes whole).
pub fn send_copy(fd: impl AsFd, file: &File, len: u64, deadline: Instant) -> io::Result<()> {
    let room = rustix::net::sockopt::socket_send_buffer_size(&fd)?;
    let mut buf = vec![0u8; COPY_CHUNK.min(room / 2).max(1)];
    let mut at = 0;
    while at < len {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(too_long(at, len));
        }
        // Never 0, which is no limit at all.
        rustix::net::sockopt::set_socket_timeout(
            &fd,
            rustix::net::sockopt::Timeout::Send,
            Some(left.max(Duration::from_millis(1))),
        )?;
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        match send(&fd, &buf[..n]) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(too_long(at, len));
            }
            sent => sent?,
        }
        at += n as u64;
    }
    Ok(())
}

/// A copy's deadline passed with `at` of its `len` bytes sent.
fn too_long(at: u64, len: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the asker took too long: {at} of {len} bytes sent"),
    )
}

/// Receives a copy of `len` bytes into this process's own memory (a
/// memfd, so that what it holds is charged to it), all of it by
/// `deadline` (each datagram within the socket's own receive timeout
/// too), and gives it back at its start. Nothing is read of a copy over
/// [`MAX_COPY`], nor past the `len` bytes announced.
pub fn receive_copy(fd: impl AsFd, len: u64, deadline: Instant) -> io::Result<File> {
    if len > MAX_COPY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a copy of {len} bytes announced, over the {MAX_COPY} an asker takes"),
        ));
    }
    let per_datagram =
        rustix::net::sockopt::socket_timeout(&fd, rustix::net::sockopt::Timeout::Recv)?;
    let mut copy = File::from(rustix::fs::memfd_create(
        "crashring-report",
        rustix::fs::MemfdFlags::CLOEXEC,
    )?);
    let mut got = 0;
    while got < len {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(too_slow(got, len));
        }
        // The datagram's own timeout, cut to what is left of the
        // copy's; never 0, which is no limit at all.
        let wait = per_datagram.map_or(left, |t| t.min(left));
        rustix::net::sockopt::set_socket_timeout(
            &fd,
            rustix::net::sockopt::Timeout::Recv,
            Some(wait.max(Duration::from_millis(1))),
        )?;
        let part = match receive_datagram(&fd, COPY_CHUNK, "a datagram of the copy") {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(too_slow(got, len)),
            part => part?,
        };
        if part.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the copy ends after {got} of {len} bytes"),
            ));
        }
        got += part.len() as u64;
        if got > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the copy runs past its {len} bytes"),
            ));
        }
        copy.write_all(&part)?;
    }
    copy.rewind()?;
    Ok(copy)
}

/// A copy's deadline (or a datagram's timeout) passed with `got` of its
/// `len` bytes received.
fn too_slow(got: u64, len: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the copy took too long: {got} of {len} bytes came"),
    )
}

#[cfg(test)]
mod tests;
