//! `crashring upload`: what `crashring-upload.service` runs once the
//! network is up. The work is `extractor::recovery::upload`'s; this says
//! what became of each spooled bundle, on stderr and in the journal.

use anyhow::Result;
use clap::Args;
use extractor::recovery::upload::{self, Upload};
use kexec_hooks::config;
use kexec_hooks::journal;
use kexec_hooks::status::BUNDLE_DIR;
use kexec_hooks::system::System;
use std::path::PathBuf;

#[derive(Args)]
pub struct UploadArgs {
    /// The bundle directory, whose `upload/` holds the spool.
    #[arg(long, value_name = "DIR", default_value = BUNDLE_DIR)]
    dir: PathBuf,
    /// The system tree: the configuration, the bundle directory and the
    /// journal's socket are looked up under it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

pub fn run(args: UploadArgs) -> Result<u8> {
    let sys = System::new(&args.root);
    let (config::Config { recover: cfg, .. }, warnings) = config::load(&sys);
    for w in warnings {
        eprintln!("crashring: {w}");
    }
    let Some(command) = cfg.on_bundle else {
        eprintln!("crashring: no OnBundle= command: spooled bundles stay spooled");
        return Ok(0);
    };
    let dir = sys.path(&args.dir.to_string_lossy());
    let socket = sys.path(journal::SOCKET);
    let mut failed = false;
    for u in upload::upload_all(&dir, &command, upload::TIMEOUT)? {
        let (message, id, priority) = match &u {
            Upload::Done(name) => (
                format!("crashring: OnBundle= took {name}.tar.gz"),
                journal::UPLOADED,
                "5",
            ),
            Upload::Failed { name, why } => {
                failed = true;
                (
                    format!("crashring: OnBundle= for {name}.tar.gz {why}; it stays spooled for the next try"),
                    journal::UPLOAD_FAILED,
                    "4",
                )
            }
            Upload::Gone(name) => (
                format!(
                    "crashring: {name}.tar.gz was removed by retention before OnBundle= took it"
                ),
                journal::UPLOAD_FAILED,
                "4",
            ),
        };
        eprintln!("{message}");
        journal::send(
            &socket,
            &[
                ("MESSAGE", &message),
                ("MESSAGE_ID", id),
                ("PRIORITY", priority),
                ("SYSLOG_IDENTIFIER", "crashring"),
            ],
        );
    }
    Ok(u8::from(failed))
}
