//! The logs a bundle takes beside the trace ([`AddLog`]): where each
//! one's lines come from ([`LogSource`]: a file given with `--add-log`,
//! what the crashed kernel kept itself in a dump, what the next boot shows
//! of it) and its name under `logs/`.

use crate::foreign::ftrace::event::Formats;
use crate::foreign::{ftrace, ramoops};
use crate::kmem::symbols::{SymbolMap, Symbolizer};
use crate::kmem::vmcoreinfo::VmcoreInfo;
use crate::output::kernel_log;
use crate::recover::Loaded;
use rustix::fs::{FileType, Mode, OFlags, Uid};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

/// A log to add: where its lines come from and its name in the bundle.
#[derive(Clone, Debug)]
pub struct AddLog {
    pub source: LogSource,
    pub name: String,
}

/// Where an added log's lines come from.
#[derive(Clone, Debug)]
pub enum LogSource {
    /// A file given with `--add-log`.
    File(PathBuf),
    /// The crashed kernel's own printk log read from the dump
    /// ([`crate::foreign::printk`]), as `crashring dmesg` prints it.
    KernelPrintk(Vec<u8>),
    /// A pstore/ramoops record read from the dump
    /// ([`crate::foreign::ramoops`]), as `/sys/fs/pstore` shows it.
    Ramoops(Vec<u8>),
    /// The kernel's persistent ftrace buffer read from the dump
    /// ([`crate::foreign::ftrace`]), as `crashring ftrace` prints it.
    KernelFtrace(Vec<u8>),
    /// A pstore record of the crashed boot, as the next boot's
    /// `/sys/fs/pstore` shows it ([`crate::recovery::next_boot`]).
    NextBootPstore(Vec<u8>),
    /// A persistent ftrace instance's `trace` file, as the next boot's
    /// kernel reads the crashed boot's events.
    NextBootFtrace(Vec<u8>),
    /// The next boot's kernel log lines about how the crashed boot ended
    /// (`/sys/kernel/crashring/reset_evidence`): on that boot's clock.
    NextBootKernel(Vec<u8>),
    /// The firmware's boot error records as the next boot found them,
    /// decoded ([`crate::foreign::bert`]): no clock of the trace's.
    Firmware(Vec<u8>),
}

impl LogSource {
    /// Whether its times are the crashed boot's, to place its lines on
    /// the trace's timeline by: not those of the boot after it.
    pub(super) fn on_the_crashed_boots_clock(&self) -> bool {
        !matches!(self, LogSource::NextBootKernel(_) | LogSource::Firmware(_))
    }
}

impl AddLog {
    /// The kernel's printk log of `loaded`'s dump, if it holds one, as
    /// `logs/kernel-printk.txt`: all of it, where `dmesg.txt` has the lines
    /// the trace recorded. `Err` says why a log there could not be read:
    /// the bundle is made without it, never held back for it.
    pub fn kernel_printk(loaded: &Loaded) -> Result<Option<AddLog>, String> {
        match loaded.printk() {
            Some(Ok(log)) => {
                let mut text = Vec::new();
                // Into memory: writing a Vec cannot fail.
                let _ = kernel_log::write_text(&mut text, log);
                Ok(Some(AddLog {
                    source: LogSource::KernelPrintk(text),
                    name: KERNEL_PRINTK.into(),
                }))
            }
            Some(Err(e)) => Err(format!("the kernel's printk log is not bundled: {e}")),
            None => Ok(None),
        }
    }
}

impl AddLog {
    /// What the kernel kept itself in `loaded`'s dump and its scan found:
    /// its printk log and its persistent ftrace buffers, and what of them
    /// could not be read or was lost, one sentence each.
    /// `formats` name the buffers' events (the crashed kernel's copy of
    /// `/sys/kernel/tracing/events`), when there is one.
    /// `symbols`, the crashed kernel's symbol map, names their code
    /// addresses where the dump tells where that boot put the kernel.
    pub fn kernels_own(
        loaded: &Loaded,
        formats: Option<&Formats>,
        symbols: Option<&SymbolMap>,
    ) -> (Vec<AddLog>, Vec<String>) {
        let (mut logs, mut warnings) = (Vec::new(), Vec::new());
        match AddLog::kernel_printk(loaded) {
            Ok(printk) => logs.extend(printk),
            Err(why) => warnings.push(why),
        }
        let (ftrace, lost) = AddLog::kernel_ftrace(loaded, formats, symbols);
        logs.extend(ftrace);
        warnings.extend(lost);
        (logs, warnings)
    }

    /// Every persistent ftrace buffer the scan of `loaded`'s dump found,
    /// each as `logs/kernel-ftrace-ADDR.txt`, and what could not be read
    /// or was lost, one sentence each: the bundle is made without those,
    /// never held back for them.
    pub fn kernel_ftrace(
        loaded: &Loaded,
        formats: Option<&Formats>,
        symbols: Option<&SymbolMap>,
    ) -> (Vec<AddLog>, Vec<String>) {
        let (mut logs, mut warnings) = (Vec::new(), Vec::new());
        let info = loaded.dump.vmcoreinfo.as_deref().map(VmcoreInfo::parse);
        for found in loaded.ftrace() {
            let i = match found {
                Ok(i) => i,
                Err(e) => {
                    warnings.push(format!("a persistent ftrace buffer is not bundled: {e}"));
                    continue;
                }
            };
            if i.damaged() {
                warnings.push(format!(
                    "the persistent ftrace buffer at {:#x} lost sub-buffers: `crashring ftrace` says which",
                    i.base
                ));
            }
            let symbolizer = symbols.and_then(|map| {
                Symbolizer::new(map, info.as_ref(), i.kernel_text)
                    .map_err(|e| {
                        warnings.push(format!(
                            "the persistent ftrace buffer at {:#x}: code addresses stay numbers: {e}",
                            i.base
                        ))
                    })
                    .ok()
            });
            let mut text = Vec::new();
            // Into memory: writing a Vec cannot fail.
            let _ = ftrace::write_text(&mut text, i, formats, symbolizer.as_ref());
            logs.push(AddLog {
                source: LogSource::KernelFtrace(text),
                name: format!("kernel-ftrace-{:x}.txt", i.base.0),
            });
        }
        (logs, warnings)
    }
}

/// The name of the kernel's printk log among the bundle's logs.
pub const KERNEL_PRINTK: &str = "kernel-printk.txt";

impl AddLog {
    /// The ramoops records of `loaded`'s dump where `layout` puts them,
    /// each as `logs/pstore-NAME` (NAME as `/sys/fs/pstore` gives it), and
    /// what could not be read, one sentence each: the bundle is made
    /// without those, never held back for them.
    pub fn ramoops(loaded: &Loaded, layout: &ramoops::Layout) -> (Vec<AddLog>, Vec<String>) {
        let zones = match ramoops::read(loaded.dump.memory.as_ref(), layout) {
            Ok((_, zones)) => zones,
            Err(e) => {
                return (
                    Vec::new(),
                    vec![format!("no ramoops record is bundled: {e}")],
                )
            }
        };
        // Nothing of ramoops there: one sentence, not one per zone.
        let absent = |z: &ramoops::Zone| {
            matches!(
                z.state,
                ramoops::ZoneState::NotRamoops { .. } | ramoops::ZoneState::Unreadable(_)
            )
        };
        if zones.iter().all(absent) {
            let why = zones.iter().find_map(|z| match &z.state {
                ramoops::ZoneState::Unreadable(e) => Some(e),
                _ => None,
            });
            let warning = match why {
                Some(e) => {
                    format!("no ramoops record is bundled: the dump does not hold the area ({e})")
                }
                None => "no ramoops zone where the --ramoops parameters put them".into(),
            };
            return (Vec::new(), vec![warning]);
        }
        let mut warnings = Vec::new();
        let mut logs = Vec::new();
        for z in &zones {
            match (&z.state, z.record()) {
                // Compressed bytes are no log to redact or place.
                (ramoops::ZoneState::Text(t), _) if t.inflate_refused.is_some() => {
                    warnings.push(format!("{} is not bundled: {}", z.file_name(), z.state))
                }
                (state, Some((bytes, partial))) => {
                    if let ramoops::ZoneState::Text(t) = state {
                        for note in [t.missing_note(), t.unchecked_note()].into_iter().flatten() {
                            warnings.push(format!("{}: {note}", z.file_name()));
                        }
                    }
                    if partial > 0 {
                        warnings.push(format!(
                            "{}: {partial} bytes of a partial record at its start (the oldest, cut by the wrap) left out",
                            z.file_name()
                        ));
                    }
                    logs.push(AddLog {
                        source: LogSource::Ramoops(bytes),
                        name: format!("pstore-{}", z.file_name()),
                    });
                }
                (
                    ramoops::ZoneState::Unreadable(_) | ramoops::ZoneState::BadCompression(_),
                    None,
                ) => warnings.push(format!("{} is not bundled: {}", z.file_name(), z.state)),
                _ => {}
            }
        }
        (logs, warnings)
    }
}

impl AddLog {
    /// Parses `PATH[:NAME]`; the name defaults to the file's name.
    pub fn parse(text: &str) -> Result<AddLog, String> {
        let (path, name) = match text.rsplit_once(':') {
            Some((p, n)) if !p.is_empty() && !n.contains('/') => (p, Some(n)),
            _ => (text, None),
        };
        let path = PathBuf::from(path);
        let name = match name {
            Some(n) => n.to_string(),
            None => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        let ok = !name.is_empty()
            && name.len() <= 90
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\');
        if !ok {
            return Err(format!(
                "`{name}` cannot name a log in the bundle: use up to 90 printable characters, no slash (PATH:NAME sets it)"
            ));
        }
        Ok(AddLog {
            source: LogSource::File(path),
            name,
        })
    }
}

/// Opens a log given by path to add: a regular file, never through a
/// symbolic link in its last component, nor through one in a directory
/// above it that anyone but root or the caller owns, and without waiting.
/// Root may be adding a log from a directory its user can write (a
/// kiosk's own log), where a link put in its place, or in place of a
/// directory on the way, would bundle a file of root's into a report
/// meant to be shared; a FIFO or a device would hang the bundle or never
/// end.
pub(super) fn open_log(path: &Path) -> io::Result<File> {
    let caller = rustix::process::geteuid();
    open_log_trusting(path, &|owner| owner.is_root() || owner == caller)
}

/// The links one path may pass through, as the kernel allows
/// (`MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// [`open_log`], following a link among the directories only where
/// `trusted` says its owner may have put it. The path is walked a
/// component at a time from a descriptor of the directory reached so far,
/// and each link is read from a descriptor of the link itself, so nothing
/// swapped in between a check and its use is followed.
fn open_log_trusting(path: &Path, trusted: &dyn Fn(Uid) -> bool) -> io::Result<File> {
    let at = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root = || rustix::fs::open("/", at | OFlags::DIRECTORY, Mode::empty());
    let mut dir = match path.has_root() {
        true => root()?,
        false => rustix::fs::open(".", at | OFlags::DIRECTORY, Mode::empty())?,
    };
    let mut above = parts(path);
    let Some(name) = above.pop_back() else {
        return Err(io::Error::other("not a regular file"));
    };
    let mut links = 0;
    while let Some(part) = above.pop_front() {
        let fd = rustix::fs::openat(&dir, &part, at, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => dir = fd,
            FileType::Symlink => {
                let owner = Uid::from_raw(stat.st_uid);
                if !trusted(owner) {
                    return Err(io::Error::other(format!(
                        "{} on its way is a symbolic link of uid {}: give the path it leads to",
                        Path::new(&part).display(),
                        owner.as_raw()
                    )));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::LOOP.into());
                }
                let target = rustix::fs::readlinkat(&fd, c"", Vec::new())?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.has_root() {
                    dir = root()?;
                }
                for p in parts(&target).into_iter().rev() {
                    above.push_front(p);
                }
            }
            _ => return Err(Errno::NOTDIR.into()),
        }
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(
        rustix::fs::openat(&dir, &name, flags, Mode::empty()).map_err(|e| {
            if e == Errno::LOOP {
                io::Error::other("a symbolic link: give the file it names")
            } else {
                io::Error::from(e)
            }
        })?,
    );
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// A path's names in order, `..` kept (it is resolved from the directory
/// reached, as the kernel resolves it), `.` and the root left out.
fn parts(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    fn read(path: &Path, trusted: &dyn Fn(Uid) -> bool) -> io::Result<String> {
        let mut text = String::new();
        open_log_trusting(path, trusted)?.read_to_string(&mut text)?;
        Ok(text)
    }

    #[test]
    fn a_link_on_the_way_is_followed_only_when_its_owner_is_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("app.log"), "frame late\n").unwrap();
        symlink(&real, tmp.path().join("abs")).unwrap();
        symlink("real/../real", tmp.path().join("rel")).unwrap();
        symlink("loop", tmp.path().join("loop")).unwrap();
        let anyone = |_| true;
        let nobody = |_| false;
        // No link: read whoever owns what.
        assert_eq!(
            read(&real.join("app.log"), &nobody).unwrap(),
            "frame late\n"
        );
        assert_eq!(
            read(&real.join("../real/./app.log"), &nobody).unwrap(),
            "frame late\n"
        );
        for via in ["abs", "rel"] {
            let path = tmp.path().join(via).join("app.log");
            assert_eq!(read(&path, &anyone).unwrap(), "frame late\n", "{via}");
            let refused = read(&path, &nobody).unwrap_err().to_string();
            assert!(
                refused.starts_with(&format!("{via} on its way is a symbolic link of uid ")),
                "{refused}"
            );
        }
        // The caller's own links are followed.
        assert_eq!(
            open_log(&tmp.path().join("rel/app.log"))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Ok(())
        );
        // A loop ends; a link in the last place is refused, trusted or not.
        let looped = read(&tmp.path().join("loop/app.log"), &anyone).unwrap_err();
        assert_eq!(looped.raw_os_error(), Some(Errno::LOOP.raw_os_error()));
        symlink(real.join("app.log"), real.join("link.log")).unwrap();
        let last = read(&real.join("link.log"), &anyone)
            .unwrap_err()
            .to_string();
        assert_eq!(last, "a symbolic link: give the file it names");
        // A file where a directory belongs.
        let file_dir = read(&real.join("app.log/x"), &anyone).unwrap_err();
        assert_eq!(file_dir.raw_os_error(), Some(Errno::NOTDIR.raw_os_error()));
        assert!(read(&real, &anyone).is_err());
    }
}
