//! `crashring report`: asks crashring-request.socket for a report of the
//! caller's own session, as a program does with
//! `crashring_request_report()` (crashring-request, which crashring-user re-exports).

use anyhow::{bail, Context, Result};
use clap::Args;
use crashring_request::{self as request, Request, RequestError};
use std::path::PathBuf;

#[derive(Args)]
pub struct ReportArgs {
    /// Why: one line, kept in the bundle and the journal.
    #[arg(long, value_name = "TEXT")]
    why: String,
    /// Only this one of your streams (repeatable); all of them by default.
    #[arg(long, value_name = "NAME")]
    stream: Vec<String>,
    /// Write a copy of the report here (a new file), if the policy
    /// allows one.
    #[arg(long, value_name = "FILE")]
    copy: Option<PathBuf>,
    /// The service's socket.
    #[arg(long, value_name = "PATH", default_value = request::SOCKET, hide = true)]
    socket: PathBuf,
}

pub fn run(args: ReportArgs) -> Result<u8> {
    let asked = Request {
        reason: args.why,
        streams: args.stream,
        copy: args.copy.is_some(),
    };
    let report = match request::request_report_with(&asked, &args.socket) {
        Ok(report) => report,
        Err(e @ RequestError::RateLimited { .. }) => {
            eprintln!("crashring: {e}");
            return Ok(75); // EX_TEMPFAIL: ask again later.
        }
        Err(e) => bail!(e),
    };
    println!("{}", report.bundle);
    eprintln!(
        "crashring: report {} written by the request service: {} events",
        report.bundle, report.events
    );
    if let Some(to) = &args.copy {
        let Some(mut from) = report.copy else {
            bail!("the policy gives no copy (crashring.conf [Request] Copy=no): the report is {} in the bundle directory", report.bundle);
        };
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(to)
            .with_context(|| format!("creating {}", to.display()))?;
        std::io::copy(&mut from, &mut out).with_context(|| format!("writing {}", to.display()))?;
    }
    Ok(0)
}
