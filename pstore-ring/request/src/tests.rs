//! The request protocol's tests: each message both ways, hostile ones
//! refused, and the client against a service of the tests' own.

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
