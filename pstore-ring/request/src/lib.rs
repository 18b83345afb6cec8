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
mod tests {
    use super::*;

    fn asked() -> Request {
        Request {
            reason: "atomic commit failed on CRTC 41".into(),
            streams: vec!["kiosk-ui".into(), "kiosk-net".into()],
            copy: true,
        }
    }

    #[test]
    fn a_privileged_program_asks_the_service_whatever_its_environment_says() {
        let var = Some(std::ffi::OsString::from("/tmp/fake.socket"));
        assert_eq!(socket_of(false, var.clone()), Path::new("/tmp/fake.socket"));
        assert_eq!(socket_of(false, None), Path::new(SOCKET));
        // Set-user-ID, set-group-ID or file capabilities: its invoker
        // set the variable.
        assert_eq!(socket_of(true, var), Path::new(SOCKET));
        assert_eq!(socket_of(true, None), Path::new(SOCKET));
    }

    #[test]
    fn a_request_and_every_reply_read_back_as_written() {
        assert_eq!(Request::parse(&asked().encode()), Ok(asked()));
        for reply in [
            Reply::Written {
                bundle: "request-1000-20261127T031500Z.tar.gz".into(),
                events: 12,
                copy_bytes: None,
            },
            Reply::Written {
                bundle: "request-1000-20261127T031600Z.tar.gz".into(),
                events: 12,
                copy_bytes: Some(4096),
            },
            Reply::Refused {
                why: "not yours".into(),
            },
            Reply::RateLimited {
                retry_after: 40,
                why: "3 in 60 s".into(),
            },
            Reply::Failed {
                why: "no space".into(),
            },
        ] {
            assert_eq!(Reply::parse(&reply.encode()), Ok(reply));
        }
    }

    #[test]
    fn a_broken_request_is_refused_naming_its_line() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"crashring-request 3\nreason=x\n", 1, "expected"),
            (b"crashring-request 2\nreason=x\nreason=y\n", 3, "twice"),
            (
                b"crashring-request 2\nreason=x\nstream=a\nstream=a\n",
                4,
                "twice",
            ),
            (
                b"crashring-request 2\nreason=x\npath=/etc/shadow\n",
                3,
                "unknown key",
            ),
            (b"crashring-request 2\nreason=x\ncopy=yes\n", 3, "0 or 1"),
            (b"crashring-request 2\nreason x\n", 2, "key=value"),
            (b"crashring-request 2\nstream=a\n", 0, "no reason"),
            (b"crashring-request 2\nreason=\n", 0, "empty"),
            (b"crashring-request 2\nreason=x\xff\n", 2, "UTF-8"),
            (b"crashring-request 2\nreason=x\rfake=1\n", 0, "control"),
            (
                "crashring-request 2\nreason=x\u{2028}fake=1\n".as_bytes(),
                0,
                "line or bidirectional",
            ),
            (
                "crashring-request 2\nreason=\u{202e}gnp.exe\n".as_bytes(),
                0,
                "line or bidirectional",
            ),
            (b"crashring-request 2\nreason=x", 2, "newline"),
        ];
        for (bytes, line, says) in cases {
            let e = Request::parse(bytes).unwrap_err();
            assert_eq!(
                e.line,
                *line,
                "{e} for {:?}",
                String::from_utf8_lossy(bytes)
            );
            assert!(e.what.contains(says), "{e} does not say {says:?}");
        }
        let long = format!("crashring-request 2\nreason={}\n", "x".repeat(MAX_MESSAGE));
        assert!(Request::parse(long.as_bytes())
            .unwrap_err()
            .what
            .contains("over"));
        let many: String = (0..=MAX_STREAMS)
            .map(|i| format!("stream=s{i}\n"))
            .collect();
        let e = Request::parse(format!("crashring-request 2\nreason=x\n{many}").as_bytes());
        assert!(e.unwrap_err().what.contains("over 16 streams"));
        let name = format!("crashring-request 2\nreason=x\nstream={}\n", "n".repeat(32));
        assert!(Request::parse(name.as_bytes())
            .unwrap_err()
            .what
            .contains("over 31"));
    }

    #[test]
    fn what_a_broken_message_said_is_quoted_only_in_part() {
        let long = "k".repeat(MAX_MESSAGE / 4);
        let head = "k".repeat(MAX_QUOTED);
        let cases = [
            (format!("{long}\n"), format!("found \"{head}\"…")),
            (
                format!("crashring-request 2\nreason=x\n{long}\n"),
                format!("found \"{head}\"…"),
            ),
            (
                format!("crashring-request 2\nreason=x\n{long}=1\n"),
                format!("unknown key \"{head}\"…"),
            ),
            (
                format!("crashring-request 2\nreason=x\ncopy={long}\n"),
                format!("not \"{head}\"…"),
            ),
            (
                format!("crashring-request 2\nreason=x\nstream={long}\nstream={long}\n"),
                format!("stream \"{head}\"… named twice"),
            ),
        ];
        for (message, says) in cases {
            let e = Request::parse(message.as_bytes()).unwrap_err().to_string();
            assert!(e.ends_with(&says), "{e}");
        }
        let e = Reply::parse(format!("{long}\n").as_bytes()).unwrap_err();
        assert!(e.what.ends_with(&format!("\"{head}\"…")), "{e}");
        // Escapes count as what they show; text that fits is whole.
        let marks = "\u{202e}".repeat(MAX_QUOTED);
        let e = Request::parse(format!("crashring-request 2\nreason=x\n{marks}=1\n").as_bytes());
        let cut = "\\u{202e}".repeat(MAX_QUOTED / 8);
        assert_eq!(e.unwrap_err().what, format!("unknown key \"{cut}\"…"));
        let fits = format!("crashring-request 2\nreason=x\n{head}=1\n");
        let e = Request::parse(fits.as_bytes()).unwrap_err();
        assert_eq!(e.what, format!("unknown key \"{head}\""));
    }

    #[test]
    fn a_request_of_version_1_is_served_without_its_descriptor_copy() {
        let old = Request::parse(b"crashring-request 1\nreason=x\ncopy=1\n").unwrap();
        assert!(!old.copy);
        assert!(
            Request::parse(b"crashring-request 2\nreason=x\ncopy=1\n")
                .unwrap()
                .copy
        );
    }

    #[test]
    fn a_reply_cannot_be_made_to_say_more_than_it_does() {
        let sneaky = Reply::Refused {
            why: "no\nbundle=/etc/shadow".into(),
        };
        assert_eq!(
            Reply::parse(&sneaky.encode()),
            Ok(Reply::Refused {
                why: "no bundle=/etc/shadow".into()
            })
        );
        assert!(Reply::parse(b"ok\nbundle=x\n").is_err());
        assert!(Reply::parse(b"ok\nbundle=x\nevents=1\nextra=2\n").is_err());
        assert!(Reply::parse(b"ok\nbundle=x\nevents=1\ncopy-bytes=-1\n").is_err());
        // Only a bundle comes with a copy.
        assert!(Reply::parse(b"refused\nwhy=x\ncopy-bytes=1\n").is_err());
    }

    #[test]
    fn a_reply_holding_what_a_terminal_acts_on_is_refused() {
        let cases: &[(&[u8], &str)] = &[
            (b"refused\nwhy=\x1b[2Jall clear\n", "why= holds a control"),
            (b"failed\nwhy=no\rspace\n", "why= holds a control"),
            (
                b"rate-limited\nretry-after=5\nwhy=\x07\n",
                "why= holds a control",
            ),
            (
                "refused\nwhy=\u{202e}gnp.exe\n".as_bytes(),
                "line or bidirectional",
            ),
            (
                b"ok\nbundle=x\x1b]0;root\x07.tar.gz\nevents=1\n",
                "bundle= holds a control",
            ),
            (b"refused\nwhy=\n", "why= is empty"),
        ];
        for (bytes, says) in cases {
            let e = Reply::parse(bytes).unwrap_err();
            assert!(
                e.what.contains(says),
                "{e} does not say {says:?} for {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    /// Two ends of a connection, as the socket gives them.
    fn connected_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
        rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_copy_comes_after_the_answer_into_the_askers_own_memory() {
        let (service, asker) = connected_pair();
        let bundle = tempfile::tempfile().unwrap();
        // Over two datagrams' worth, and not a multiple of one.
        let bytes: Vec<u8> = (0..COPY_CHUNK * 2 + 1000).map(|i| i as u8).collect();
        bundle.write_all_at(&bytes, 0).unwrap();
        let len = bytes.len() as u64;
        let writing = std::thread::spawn(move || {
            send_copy(
                &service,
                &bundle,
                len,
                Instant::now() + Duration::from_secs(60),
            )
        });
        let mut copy = receive_copy(&asker, len, Instant::now() + COPY_TIME).unwrap();
        writing.join().unwrap().unwrap();
        let mut got = Vec::new();
        io::Read::read_to_end(&mut copy, &mut got).unwrap();
        assert!(got == bytes, "the copy differs from what was sent");
        // Not the service's file: a memfd of this process.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&copy);
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert!(
            target
                .to_string_lossy()
                .starts_with("/memfd:crashring-report"),
            "{target:?}"
        );
    }

    #[test]
    fn a_copy_fits_a_small_send_buffer_and_ends_at_its_deadline() {
        let (service, asker) = connected_pair();
        rustix::net::sockopt::set_socket_send_buffer_size(&service, 8192).unwrap();
        let bundle = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..100_000).map(|i| (i * 7) as u8).collect();
        bundle.write_all_at(&bytes, 0).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        std::thread::scope(|s| {
            // The service's end goes with the thread: if the copy fails,
            // the asker sees it end, not a wait.
            let bundle = &bundle;
            let writing = s.spawn(move || send_copy(&service, bundle, 100_000, deadline));
            let mut got = Vec::new();
            let copy = receive_copy(&asker, 100_000, Instant::now() + COPY_TIME);
            io::Read::read_to_end(&mut copy.unwrap(), &mut got).unwrap();
            assert!(got == bytes, "the copy differs from what was sent");
            writing.join().unwrap().unwrap();
        });
        // An asker that reads nothing: the service gives up at the
        // deadline, once the socket's buffer is full (a service that
        // waited on would fail the test after 30 s, not hang it).
        let (service, asker) = connected_pair();
        rustix::net::sockopt::set_socket_send_buffer_size(&service, 8192).unwrap();
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(200);
            let _ = done.send(send_copy(&service, &bundle, 100_000, deadline));
        });
        let e = result
            .recv_timeout(Duration::from_secs(30))
            .expect("the copy went on past its deadline")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("of 100000 bytes sent"), "{e}");
        drop(asker);
    }

    #[test]
    fn a_copy_cut_short_or_running_over_is_no_copy() {
        let (service, asker) = connected_pair();
        send(&service, b"half").unwrap();
        drop(service);
        let e = receive_copy(&asker, 8, Instant::now() + COPY_TIME).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("after 4 of 8 bytes"), "{e}");
        let (service, asker) = connected_pair();
        send(&service, b"more than four").unwrap();
        let e = receive_copy(&asker, 4, Instant::now() + COPY_TIME).unwrap_err();
        assert!(e.to_string().contains("runs past its 4 bytes"), "{e}");
    }

    #[test]
    fn a_copy_announced_over_the_limit_is_refused_before_reading() {
        let (service, asker) = connected_pair();
        send(&service, b"x").unwrap();
        drop(service);
        let e = receive_copy(&asker, MAX_COPY + 1, Instant::now() + COPY_TIME).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(e.to_string().contains("over the 4294967296"), "{e}");
        assert_eq!(
            receive_message(&asker).unwrap(),
            b"x",
            "a datagram was read"
        );
    }

    #[test]
    fn a_copy_dripped_past_its_deadline_ends_at_it() {
        let (service, asker) = connected_pair();
        // Each datagram well within the receive's own timeout, as the
        // asker's answer timeout is.
        rustix::net::sockopt::set_socket_timeout(
            &asker,
            rustix::net::sockopt::Timeout::Recv,
            Some(Duration::from_secs(60)),
        )
        .unwrap();
        std::thread::spawn(move || {
            // A byte every 10 ms, until the asker hangs up.
            while send(&service, b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(300);
            let _ = done.send(receive_copy(&asker, 1000, deadline).map(drop));
        });
        let e = result
            .recv_timeout(Duration::from_secs(30))
            .expect("the copy went on past its deadline")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("of 1000 bytes came"), "{e}");
    }

    #[test]
    fn a_request_is_read_without_a_descriptor_sent_with_it() {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage};
        let (a, b) = connected_pair();
        let file = tempfile::tempfile().unwrap();
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let passed = [file.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&passed));
        let request = asked().encode();
        rustix::net::sendmsg(
            &a,
            &[io::IoSlice::new(&request)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        assert_eq!(receive_message(&b).unwrap(), request);
        send(&a, &[b'x'; 2 * MAX_MESSAGE]).unwrap();
        let got = receive_message(&b).map(|m| m.len());
        assert!(
            got.as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::InvalidData),
            "{got:?}"
        );
    }

    #[test]
    fn an_answer_given_before_the_request_is_read_still_reaches_the_asker() {
        let refused = Reply::Refused {
            why: "uid 1002 may not ask for reports".into(),
        };
        // The service answered and hung up before the request came.
        let (asker, service) = connected_pair();
        send(&service, &refused.encode()).unwrap();
        drop(service);
        let bytes = exchange(&asker, &asked()).unwrap();
        assert_eq!(Reply::parse(&bytes), Ok(refused.clone()));

        // The service answered and hung up with something left unread:
        // the send is told so.
        let (asker, service) = connected_pair();
        send(&asker, b"sent before").unwrap();
        send(&service, &refused.encode()).unwrap();
        drop(service);
        let bytes = exchange(&asker, &asked()).unwrap();
        assert_eq!(Reply::parse(&bytes), Ok(refused.clone()));

        // The service answered and hung up with the request itself unread:
        // the receive is told so.
        let (asker, service) = connected_pair();
        send(&asker, &asked().encode()).unwrap();
        send(&service, &refused.encode()).unwrap();
        drop(service);
        let bytes = receive_answer(&asker).unwrap();
        assert_eq!(Reply::parse(&bytes), Ok(refused));
    }

    /// A service listening at a socket of its own (in the directory
    /// given back) that serves one connection as `serve` does.
    fn serving_once(
        serve: impl FnOnce(std::os::fd::OwnedFd) + Send + 'static,
    ) -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::thread::JoinHandle<()>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("request.socket");
        let listener = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        rustix::net::bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        rustix::net::listen(&listener, 1).unwrap();
        let service = std::thread::spawn(move || {
            serve(rustix::net::accept_with(&listener, rustix::net::SocketFlags::CLOEXEC).unwrap());
        });
        (dir, path, service)
    }

    #[test]
    fn a_service_that_closes_without_answering_is_said_to_have_done_so() {
        let (_dir, path, service) = serving_once(|conn| {
            receive_message(&conn).unwrap();
        });
        let err = request_report_with(&asked(), &path).unwrap_err();
        service.join().unwrap();
        assert!(matches!(err, RequestError::NoAnswer { .. }), "{err:?}");
        assert!(err
            .to_string()
            .contains("closed the connection without an answer"));
    }

    #[test]
    fn a_copy_not_asked_for_is_refused_unopened() {
        let (_dir, path, service) = serving_once(|conn| {
            let bytes = receive_message(&conn).unwrap();
            assert!(!Request::parse(&bytes).unwrap().copy);
            let answer = Reply::Written {
                bundle: "request-1000.tar.gz".into(),
                events: 3,
                copy_bytes: Some(4),
            };
            send(&conn, &answer.encode()).unwrap();
            // The asker may have hung up by now.
            let _ = send(&conn, b"COPY");
        });
        let unasked = Request {
            copy: false,
            ..asked()
        };
        let err = request_report_with(&unasked, &path).unwrap_err();
        service.join().unwrap();
        assert!(matches!(err, RequestError::Protocol(_)), "{err:?}");
        assert!(err.to_string().contains("copy-bytes="), "{err}");
    }
}
