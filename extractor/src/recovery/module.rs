//! The kernel module as recovery sees it: what it offers as the previous
//! generation, and the acknowledgement that releases exactly that one.
//! [`Sysfs`] is the real module under `/sys/kernel/crashring`; tests give
//! the loop a module of their own.

use kexec_hooks::system::System;
use std::io;
use std::path::PathBuf;

pub const SYSFS: &str = "/sys/kernel/crashring";

/// What the module offers, from the first line of `previous_summary`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offer {
    /// The module is not loaded.
    NotLoaded,
    /// No previous generation waits.
    Nothing,
    /// Generation `generation` waits, readable at `path`; `damaged` when
    /// its header failed the module's checks (read it trusting the header).
    Waiting {
        path: PathBuf,
        generation: u64,
        damaged: bool,
    },
}

/// The module's side of recovery.
pub trait Module {
    /// What waits to be archived now.
    fn offer(&self) -> io::Result<Offer>;
    /// Releases generation `generation`; fails, releasing nothing, when
    /// the module's previous generation is another one by now.
    fn ack(&self, generation: u64) -> io::Result<()>;
    /// The module's one-line status, when it is loaded.
    fn status(&self) -> io::Result<Option<String>>;
}

/// The loaded module, through its sysfs files under a system root.
pub struct Sysfs<'a> {
    pub sys: &'a System,
}

impl Module for Sysfs<'_> {
    fn offer(&self) -> io::Result<Offer> {
        let Some(summary) = self.sys.read(&format!("{SYSFS}/previous_summary"))? else {
            return Ok(Offer::NotLoaded);
        };
        parse_summary(&summary, self.sys.path(&format!("{SYSFS}/previous")))
    }

    fn ack(&self, generation: u64) -> io::Result<()> {
        use std::io::Write;
        let path = self.sys.path(&format!("{SYSFS}/previous_ack"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .write_all(format!("generation={generation}\n").as_bytes())
    }

    fn status(&self) -> io::Result<Option<String>> {
        Ok(self
            .sys
            .read(&format!("{SYSFS}/status"))?
            .map(|s| s.trim_end().to_string()))
    }
}

/// `generation N slot S size Z`, `damaged header slot S generation N
/// size Z: ...` or `none`.
fn parse_summary(summary: &str, path: PathBuf) -> io::Result<Offer> {
    let line = summary.lines().next().unwrap_or_default();
    if line.starts_with("none") {
        return Ok(Offer::Nothing);
    }
    let damaged = line.starts_with("damaged header");
    let generation = line
        .split_whitespace()
        .skip_while(|w| *w != "generation")
        .nth(1)
        .and_then(|n| n.trim_end_matches(':').parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("previous_summary names no generation: {line:?}"),
            )
        })?;
    Ok(Offer::Waiting {
        path,
        generation,
        damaged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_the_generation_damaged_or_not() {
        let p = PathBuf::from("/p");
        assert_eq!(parse_summary("none\n", p.clone()).unwrap(), Offer::Nothing);
        assert_eq!(
            parse_summary("generation 7 slot 1 size 4096\nstate crashed\n", p.clone()).unwrap(),
            Offer::Waiting {
                path: p.clone(),
                generation: 7,
                damaged: false
            }
        );
        assert_eq!(
            parse_summary(
                "damaged header slot 0 generation 3 size 8388608: read it with ...\n",
                p.clone()
            )
            .unwrap(),
            Offer::Waiting {
                path: p.clone(),
                generation: 3,
                damaged: true
            }
        );
        assert!(parse_summary("generation x slot 0\n", p).is_err());
    }
}
