//! The file-backed region and the per-thread streams that record into it.

use crate::switch::{self, CategoryError, Switch};
use crate::{clock, kernel};
use memmap2::MmapMut;
use pstore_ring::layout::{REASON_NONE, STATE_CLEAN, STREAM_USER};
use pstore_ring::schema::{self, EventDef, Value, EVENT_LOG};
use pstore_ring::write::{
    self, Dropped, FormatError, RegionConfig, RegionControl, StreamSpec, StreamWriter,
};
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Where a recorder's file goes when [`Config::path`] is not given:
/// `$CRASHRING_USER_DIR`, else `/dev/shm`.
pub const DIR_VARIABLE: &str = "CRASHRING_USER_DIR";
const DEFAULT_DIR: &str = "/dev/shm";
/// Pages of a file's stream unless [`Config::pages_per_stream`] says.
pub const FILE_PAGES: u32 = 64;

/// How a [`Recorder`] lays out its region.
#[derive(Clone, Debug)]
pub struct Config<'a> {
    /// The program's name, each stream's name in the region (FORMAT.md's
    /// 31-byte limit): `weston`, or `weston.N` for stream N of several.
    pub name: &'a str,
    /// The region file. `None`: `NAME.PID.crashring` in
    /// `$CRASHRING_USER_DIR` or `/dev/shm`.
    pub path: Option<PathBuf>,
    /// Streams: one per thread that records at the same time.
    pub streams: u16,
    /// Pages in each stream's ring: how far back its history reaches; 0
    /// for the default, [`FILE_PAGES`] in a file and the pool's size
    /// (`user_stream_pages`, which a kernel stream cannot exceed) in the
    /// kernel's region.
    pub pages_per_stream: u32,
    pub page_size: u32,
    /// The program's own event types, ids 32..=255, for
    /// [`Stream::event`]. Only a file's schema table can describe them.
    pub events: &'a [EventDef<'a>],
    pub backing: Backing,
    /// The program's own categories, bit N for `categories[N]` (at most
    /// 64, each 1 to 31 of `[A-Za-z0-9_.-]`): [`Recorder::enabled`] says
    /// whether to record one, as `crashring debug select
    /// user=NAME:CATEGORY,...` chooses for a recorder in the kernel's
    /// region while the program runs.
    pub categories: &'a [&'a str],
    /// The categories not recorded while no selection names the program
    /// (bit N: `categories[N]`); 0, every one recorded.
    pub categories_off: u64,
}

impl<'a> Config<'a> {
    /// Four streams of the default size, pages of 4 KiB.
    pub fn new(name: &'a str) -> Self {
        Config {
            name,
            path: None,
            streams: 4,
            pages_per_stream: 0,
            page_size: 4096,
            events: &[],
            backing: Backing::Auto,
            categories: &[],
            categories_off: 0,
        }
    }
}

/// Why a recorder could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot lay out the region: {0}")]
    Format(#[from] FormatError),
    #[error("a recorder needs at least one stream")]
    NoStreams,
    #[error("every stream is held")]
    Busy,
    #[error("{}: {source}", kernel::DEVICE)]
    Kernel { source: std::io::Error },
    #[error(
        "the kernel's region cannot describe a program's own event types: record them in a file"
    )]
    KernelEvents,
    #[error(transparent)]
    Categories(#[from] CategoryError),
}

/// Syslog levels, as the kernel's `printk` levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Emergency = 0,
    Alert = 1,
    Critical = 2,
    Error = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
}

/// Where a recorder's streams are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backing {
    /// The kernel's pool when `/dev/crashring` gives a stream (the module
    /// is loaded and recording, the user is in the `crashring` group, and
    /// the program has no event types of its own), else a file.
    #[default]
    Auto,
    /// Streams of the kernel module's pool, in the region the kernel
    /// records: they survive a kernel panic, next to the kernel's events.
    Kernel,
    /// A region file of the program's own ([`Config::path`]).
    File,
}

/// A stream no thread holds, and what keeps its pages mapped.
struct Held {
    w: StreamWriter<'static>,
    /// Declared after `w`, which points into its mapping.
    grant: Option<kernel::Grant>,
}

/// A file-backed region: its path, state block and mapping.
struct RegionFile {
    path: PathBuf,
    control: Mutex<RegionControl<'static>>,
    _map: MmapMut,
}

/// Where streams come from: the kernel's pool (granted as threads ask),
/// or a file formatted with all of them.
enum Source {
    Kernel {
        name: String,
        pages: u32,
        /// Streams granted so far, at most [`Config::streams`].
        granted: Mutex<u16>,
        most: u16,
    },
    File(RegionFile),
}

/// A program's flight recorder: streams in the kernel's region, or in a
/// memory-mapped file of its own.
pub struct Recorder {
    /// Streams no thread holds, each where its last holder left it.
    /// Declared first, so the writers are dropped before what they point
    /// into.
    free: Mutex<Vec<Held>>,
    source: Source,
    switch: Switch,
}

impl Recorder {
    /// Makes a recorder as [`Config::backing`] says. A file region is laid
    /// out under a temporary name and renamed into place, so a reader
    /// never finds a half-formatted region under the final name; an
    /// existing file of that name (another run's recording) is never
    /// replaced. A kernel one is given its first stream here, so that
    /// [`Backing::Auto`] knows whether the kernel will have it.
    pub fn create(cfg: &Config<'_>) -> Result<Recorder, Error> {
        if cfg.streams == 0 {
            return Err(Error::NoStreams);
        }
        switch::check(cfg.categories)?;
        let defaults = !cfg.categories_off;
        let kernel = match cfg.backing {
            Backing::Kernel if !cfg.events.is_empty() => return Err(Error::KernelEvents),
            Backing::Kernel => true,
            Backing::Auto => cfg.path.is_none() && cfg.events.is_empty(),
            Backing::File => false,
        };
        if kernel {
            let mut rec = Recorder {
                free: Mutex::new(Vec::new()),
                source: Source::Kernel {
                    name: cfg.name.to_string(),
                    pages: cfg.pages_per_stream,
                    granted: Mutex::new(0),
                    most: cfg.streams,
                },
                switch: Switch::own(&[], 0),
            };
            // The first stream's control page holds the program's switch.
            let first = rec.grant().and_then(|held| {
                if let Some(grant) = held.grant.as_ref().filter(|_| !cfg.categories.is_empty()) {
                    rec.switch = Switch::kernel(grant, cfg.categories, defaults)
                        .map_err(|source| Error::Kernel { source })?;
                }
                Ok(held)
            });
            match first {
                Ok(held) => {
                    rec.free_list().push(held);
                    return Ok(rec);
                }
                Err(e) if cfg.backing == Backing::Kernel => return Err(e),
                Err(_) => {}
            }
        }
        Self::create_file(cfg, Switch::own(cfg.categories, defaults))
    }

    fn create_file(cfg: &Config<'_>, switch: Switch) -> Result<Recorder, Error> {
        let pid = std::process::id();
        // The file's owner, as the kernel tags its streams: a set-user-ID
        // program's recording is its owner's, not its caller's.
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let names: Vec<String> = (0..cfg.streams)
            .map(|i| stream_name(cfg.name, cfg.streams, i))
            .collect();
        let specs: Vec<StreamSpec<'_>> = names
            .iter()
            .map(|name| StreamSpec {
                kind: STREAM_USER,
                cpu: u16::MAX,
                lane: 0,
                name,
                pid,
                uid,
            })
            .collect();
        let (created_ns, wall_offset_ns) = clock::now_and_wall_offset();
        let (release, host) = clock::release_and_host();
        let region = RegionConfig {
            page_size: cfg.page_size,
            pages_per_stream: Some(match cfg.pages_per_stream {
                0 => FILE_PAGES,
                n => n,
            }),
            streams: &specs,
            custom_events: cfg.events,
            boot_id: clock::boot_id(),
            created_ns,
            wall_offset_ns,
            kernel_release: &release,
            hostname: &host,
            producer: "crashring-user",
            ..RegionConfig::default()
        };
        let size = write::region_size(&region)?;
        let path = match &cfg.path {
            Some(p) => p.clone(),
            None => default_dir().join(format!("{}.{pid}.crashring", cfg.name)),
        };
        let file_error = |source| Error::File {
            path: path.clone(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let staged = tempfile::Builder::new()
            .prefix(".crashring-")
            .tempfile_in(dir)
            .map_err(file_error)?;
        staged.as_file().set_len(size as u64).map_err(file_error)?;
        // SAFETY: the file is new, private to this process (mode 0600) and
        // only ever changed through this mapping while the recorder lives.
        let mut map = unsafe { MmapMut::map_mut(staged.as_file()) }.map_err(file_error)?;
        // SAFETY: the slice covers the mapping, which never moves and
        // outlives every writer made from it: `Recorder` drops its writers
        // before its source, and a `Stream` borrows the `Recorder`.
        // Nothing else touches the mapping.
        let bytes: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(map.as_mut_ptr(), map.len()) };
        let formatted = write::format(bytes, &region)?;
        staged
            .persist_noclobber(&path)
            .map_err(|e| file_error(e.error))?;
        // Handed out from the end: stream 0 first.
        let mut free: Vec<Held> = formatted.streams.map(|w| Held { w, grant: None }).collect();
        free.reverse();
        Ok(Recorder {
            free: Mutex::new(free),
            source: Source::File(RegionFile {
                path,
                control: Mutex::new(formatted.control),
                _map: map,
            }),
            switch,
        })
    }

    fn free_list(&self) -> std::sync::MutexGuard<'_, Vec<Held>> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new stream from the kernel's pool, mapped, its page 0 opened.
    fn grant(&self) -> Result<Held, Error> {
        let Source::Kernel {
            name,
            pages,
            granted,
            most,
        } = &self.source
        else {
            return Err(Error::Busy);
        };
        let mut n = granted.lock().unwrap_or_else(PoisonError::into_inner);
        if *n == *most {
            return Err(Error::Busy);
        }
        let kernel_error = |source| Error::Kernel { source };
        let mut grant =
            kernel::grant(&stream_name(name, *most, *n), *pages).map_err(kernel_error)?;
        // SAFETY: as for a file's mapping: it never moves, and `Held`
        // drops the writer before the grant that maps it.
        let bytes: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(grant.map.as_mut_ptr(), grant.map.len()) };
        let w = StreamWriter::start(
            bytes,
            None,
            grant.index,
            pstore_ring::Endian::NATIVE,
            grant.page_size,
            clock::monotonic_ns(),
        )
        .ok_or_else(|| kernel_error(std::io::ErrorKind::InvalidData.into()))?;
        *n += 1;
        Ok(Held {
            w,
            grant: Some(grant),
        })
    }

    /// Whether category `index` (of [`Config::categories`]) is to be
    /// recorded now: a load and a bit test, to ask before formatting.
    #[inline]
    pub fn enabled(&self, index: u32) -> bool {
        self.switch.enabled(index)
    }

    /// The index of the category called `name`, for [`enabled`](Self::enabled).
    pub fn category(&self, name: &str) -> Option<u32> {
        self.switch.index(name)
    }

    /// The word whose bit N says whether category N is recorded (the C
    /// API's inline test reads it).
    pub fn enabled_word(&self) -> &std::sync::atomic::AtomicU64 {
        self.switch.word()
    }

    /// Whether the streams are the kernel's (else a file's).
    pub fn is_kernel(&self) -> bool {
        matches!(self.source, Source::Kernel { .. })
    }

    /// The region file, for a file-backed recorder.
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            Source::File(f) => Some(&f.path),
            Source::Kernel { .. } => None,
        }
    }

    /// A stream for the calling thread: a free one, or for a kernel
    /// recorder a new one from the pool, up to [`Config::streams`];
    /// [`Error::Busy`] when every one is held. It goes back to the
    /// recorder when dropped, and the next holder continues its ring.
    pub fn stream(&self) -> Result<Stream<'_>, Error> {
        let held = self.free_list().pop();
        let held = match held {
            Some(h) => h,
            None => self.grant()?,
        };
        Ok(Stream {
            held: Some(held),
            rec: self,
        })
    }
}

impl Drop for Recorder {
    /// A clean end: every page closed with its checksum, and a file's
    /// state block says so. A process that dies instead leaves its pages
    /// open, which a reader salvages record by record.
    fn drop(&mut self) {
        let free = self.free.get_mut().unwrap_or_else(PoisonError::into_inner);
        for h in free.iter_mut() {
            h.w.close();
        }
        if let Source::File(f) = &mut self.source {
            f.control
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .set_state(STATE_CLEAN, REASON_NONE, clock::monotonic_ns(), 0, "");
        }
    }
}

/// Stream `i`'s name: the program's, numbered when it has several.
fn stream_name(name: &str, streams: u16, i: u16) -> String {
    match streams {
        1 => name.to_string(),
        _ => format!("{name}.{i}"),
    }
}

fn default_dir() -> PathBuf {
    std::env::var_os(DIR_VARIABLE)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
}

/// One thread's stream: records with no lock and no system call but the
/// vDSO's clock read.
pub struct Stream<'r> {
    /// Always `Some` until dropped.
    held: Option<Held>,
    rec: &'r Recorder,
}

/// The longest log line kept whole: a record's payload less the level,
/// the category and the text's length.
pub const MAX_LOG_TEXT: usize = pstore_ring::layout::MAX_RECORD_SIZE - 4 - 1 - 16 - 2;

impl Stream<'_> {
    fn writer(&mut self) -> &mut StreamWriter<'static> {
        // `held` is only taken in `drop`.
        &mut self.held.as_mut().expect("stream in use").w
    }

    /// The stream's index in the region.
    pub fn index(&self) -> u16 {
        self.held.as_ref().map_or(0, |h| h.w.stream())
    }

    /// Records a payload already encoded as event type `type_id`.
    pub fn write(&mut self, type_id: u8, payload: &[u8]) -> Result<(), Dropped> {
        self.writer().write(clock::monotonic_ns(), type_id, payload)
    }

    /// Records an event of one of the program's types (or a built-in).
    pub fn event(&mut self, def: &EventDef<'_>, values: &[Value<'_>]) -> Result<(), Dropped> {
        self.writer()
            .write_event(clock::monotonic_ns(), def, values)
    }

    /// Records a log line: a built-in `log` event. The category is cut
    /// to 16 bytes and the text to [`MAX_LOG_TEXT`], each at a character
    /// boundary.
    pub fn log(&mut self, level: Level, category: &str, text: &str) -> Result<(), Dropped> {
        self.log_bytes(
            level as u8,
            category.as_bytes(),
            cut(text, MAX_LOG_TEXT).as_bytes(),
        )
    }

    /// [`log`](Self::log) for bytes from C, cut at byte boundaries.
    pub(crate) fn log_bytes(
        &mut self,
        level: u8,
        category: &[u8],
        text: &[u8],
    ) -> Result<(), Dropped> {
        let category = &category[..category.len().min(16)];
        let text = &text[..text.len().min(MAX_LOG_TEXT)];
        let def = schema::builtin(EVENT_LOG).expect("log is a built-in");
        let values = [
            Value::Unsigned(level.min(7).into()),
            Value::Chars(category),
            Value::Str(text),
        ];
        self.writer()
            .write_event(clock::monotonic_ns(), def, &values)
    }

    /// Formats a log line on the stack, with no allocation, and records
    /// it; what goes past [`MAX_LOG_TEXT`] is cut.
    pub fn log_fmt(
        &mut self,
        level: Level,
        category: &str,
        args: fmt::Arguments<'_>,
    ) -> Result<(), Dropped> {
        let mut line = Line {
            buf: [0; MAX_LOG_TEXT],
            len: 0,
        };
        // A line that does not fit ends the formatting with an error,
        // after the part that fits was kept.
        let _ = line.write_fmt(args);
        let text = &line.buf[..line.len];
        self.log_bytes(level as u8, category.as_bytes(), text)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            self.rec.free_list().push(h);
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends at a
/// character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A fixed buffer `fmt` writes into, keeping whole characters.
struct Line {
    buf: [u8; MAX_LOG_TEXT],
    len: usize,
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let part = cut(s, room);
        self.buf[self.len..self.len + part.len()].copy_from_slice(part.as_bytes());
        self.len += part.len();
        if part.len() < s.len() {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstore_ring::read::{HeaderTrust, Region};

    fn config(dir: &Path, streams: u16) -> Config<'static> {
        Config {
            path: Some(dir.join("t.crashring")),
            streams,
            pages_per_stream: 4,
            ..Config::new("tester")
        }
    }

    #[test]
    fn lines_are_cut_at_character_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 9), "abc");
        let mut l = Line {
            buf: [0; MAX_LOG_TEXT],
            len: MAX_LOG_TEXT - 2,
        };
        assert!(l.write_str("aé").is_err());
        assert_eq!(l.len, MAX_LOG_TEXT - 1);
    }

    #[test]
    fn a_recorder_never_replaces_an_earlier_recording() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), 1);
        let first = Recorder::create(&cfg).unwrap();
        let err = Recorder::create(&cfg).err().unwrap();
        assert!(matches!(err, Error::File { .. }), "{err}");
        drop(first);
        // Only the first recording is there: no staging file was left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Where /dev/crashring does not give a stream (here: no module), the
    /// same program records into a file; asked for the kernel's, it is
    /// told why not.
    #[test]
    fn without_the_kernels_pool_a_file_takes_its_place() {
        if std::path::Path::new(kernel::DEVICE).exists() {
            return; // a machine with the module: the fallback is not reached
        }
        let name = format!("fallback-{}", std::process::id());
        let rec = Recorder::create(&Config::new(&name)).unwrap();
        assert!(!rec.is_kernel());
        let path = rec.path().unwrap().to_path_buf();
        assert_eq!(path.parent(), Some(Path::new(DEFAULT_DIR)));
        drop(rec);
        std::fs::remove_file(path).unwrap();
        let kernel = Config {
            backing: Backing::Kernel,
            ..Config::new(&name)
        };
        let err = Recorder::create(&kernel).err().unwrap();
        assert!(matches!(err, Error::Kernel { .. }), "{err}");
        let typed = Config {
            events: &[EventDef {
                id: 32,
                name: "frame",
                fields: &[],
            }],
            ..kernel
        };
        assert!(matches!(
            Recorder::create(&typed).err(),
            Some(Error::KernelEvents)
        ));
    }

    #[test]
    fn streams_are_handed_out_once_and_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::create(&config(dir.path(), 2)).unwrap();
        let a = rec.stream().unwrap();
        let b = rec.stream().unwrap();
        assert_ne!(a.index(), b.index());
        assert!(matches!(rec.stream().err(), Some(Error::Busy)));
        let index = a.index();
        drop(a);
        assert_eq!(rec.stream().unwrap().index(), index);
    }

    #[test]
    fn a_set_user_id_programs_recording_is_its_owners() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "a real uid apart from the effective one needs root"
            );
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // As a program set-user-ID to root that uid 1000 runs. The raw
        // system call changes this thread's credentials only (libc's
        // setresuid changes every thread's).
        let path = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: a system call without pointers.
                let rc = unsafe { libc::syscall(libc::SYS_setresuid, 1000, 0, 0) };
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                let rec = Recorder::create(&config(dir.path(), 1)).unwrap();
                rec.path().unwrap().to_path_buf()
            })
            .join()
            .unwrap()
        });
        let bytes = std::fs::read(path).unwrap();
        let region = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.decode().streams[0].info.uid, 0);
    }

    #[test]
    fn a_clean_end_reads_back_closed_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::create(&config(dir.path(), 2)).unwrap();
        // Each thread holds its stream until both have one.
        let both = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for t in 0..2 {
                let (rec, both) = (&rec, &both);
                s.spawn(move || {
                    let mut st = rec.stream().unwrap();
                    both.wait();
                    for i in 0..100 {
                        st.log_fmt(Level::Info, "t", format_args!("thread {t} line {i}"))
                            .unwrap();
                    }
                });
            }
        });
        let path = rec.path().unwrap().to_path_buf();
        drop(rec);
        let bytes = std::fs::read(path).unwrap();
        let region = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.state.as_ref().map(|s| s.state), Ok(STATE_CLEAN));
        assert_eq!(region.header.cpu_count, 0);
        let trace = region.decode();
        for (s, st) in trace.streams.iter().enumerate() {
            assert_eq!(st.info.name, format!("tester.{s}"));
            assert_eq!(st.info.pid, std::process::id());
            assert_eq!(st.info.uid, unsafe { libc::geteuid() });
            assert_eq!(st.events.len(), 100);
            assert!(st.events.iter().all(|e| !e.salvaged));
            assert_eq!(st.lost_events(), 0);
        }
    }
}
