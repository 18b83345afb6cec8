//! The file-backed region and the per-thread streams that record into it.

use crate::clock;
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
    /// Pages in each stream's ring: how far back its history reaches.
    pub pages_per_stream: u32,
    pub page_size: u32,
    /// The program's own event types, ids 32..=255, for
    /// [`Stream::event`].
    pub events: &'a [EventDef<'a>],
}

impl<'a> Config<'a> {
    /// Four streams of 64 pages of 4 KiB (1 MiB of history in all).
    pub fn new(name: &'a str) -> Self {
        Config {
            name,
            path: None,
            streams: 4,
            pages_per_stream: 64,
            page_size: 4096,
            events: &[],
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

/// A region of user streams in a memory-mapped file.
pub struct Recorder {
    path: PathBuf,
    /// Streams no thread holds, each where its last holder left it.
    free: Mutex<Vec<StreamWriter<'static>>>,
    control: Mutex<RegionControl<'static>>,
    /// Declared last, so the writers above, which point into it, are
    /// dropped before it is unmapped.
    _map: MmapMut,
}

impl Recorder {
    /// Formats a new region file and maps it. The file is laid out under
    /// a temporary name and renamed into place, so a reader never finds a
    /// half-formatted region under the final name; an existing file of
    /// that name (another run's recording) is never replaced.
    pub fn create(cfg: &Config<'_>) -> Result<Recorder, Error> {
        if cfg.streams == 0 {
            return Err(Error::NoStreams);
        }
        let pid = std::process::id();
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let names: Vec<String> = (0..cfg.streams)
            .map(|i| match cfg.streams {
                1 => cfg.name.to_string(),
                _ => format!("{}.{i}", cfg.name),
            })
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
            pages_per_stream: Some(cfg.pages_per_stream),
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
        // before `_map`, and a `Stream` borrows the `Recorder`. Nothing
        // else touches the mapping.
        let bytes: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(map.as_mut_ptr(), map.len()) };
        let formatted = write::format(bytes, &region)?;
        staged
            .persist_noclobber(&path)
            .map_err(|e| file_error(e.error))?;
        // Handed out from the end: stream 0 first.
        let mut free: Vec<_> = formatted.streams.collect();
        free.reverse();
        Ok(Recorder {
            path,
            free: Mutex::new(free),
            control: Mutex::new(formatted.control),
            _map: map,
        })
    }

    /// The region file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A stream for the calling thread, or `None` when every stream is
    /// held. It goes back to the recorder when dropped, and the next
    /// holder continues its ring.
    pub fn stream(&self) -> Option<Stream<'_>> {
        let w = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()?;
        Some(Stream {
            w: Some(w),
            rec: self,
        })
    }
}

impl Drop for Recorder {
    /// A clean end: every page closed with its checksum, and the state
    /// block says so. A process that dies instead leaves its pages open,
    /// which a reader salvages record by record.
    fn drop(&mut self) {
        let free = self.free.get_mut().unwrap_or_else(PoisonError::into_inner);
        for w in free.iter_mut() {
            w.close();
        }
        self.control
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .set_state(STATE_CLEAN, REASON_NONE, clock::monotonic_ns(), 0, "");
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
    w: Option<StreamWriter<'static>>,
    rec: &'r Recorder,
}

/// The longest log line kept whole: a record's payload less the level,
/// the category and the text's length.
pub const MAX_LOG_TEXT: usize = pstore_ring::layout::MAX_RECORD_SIZE - 4 - 1 - 16 - 2;

impl Stream<'_> {
    fn writer(&mut self) -> &mut StreamWriter<'static> {
        // `w` is only taken in `drop`.
        self.w.as_mut().expect("stream in use")
    }

    /// The stream's index in the region.
    pub fn index(&self) -> u16 {
        self.w.as_ref().map_or(0, StreamWriter::stream)
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
        if let Some(w) = self.w.take() {
            self.rec
                .free
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(w);
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

    #[test]
    fn streams_are_handed_out_once_and_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::create(&config(dir.path(), 2)).unwrap();
        let a = rec.stream().unwrap();
        let b = rec.stream().unwrap();
        assert_ne!(a.index(), b.index());
        assert!(rec.stream().is_none());
        let index = a.index();
        drop(a);
        assert_eq!(rec.stream().unwrap().index(), index);
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
        let path = rec.path().to_path_buf();
        drop(rec);
        let bytes = std::fs::read(path).unwrap();
        let region = Region::parse(&bytes, HeaderTrust::Checksummed).unwrap();
        assert_eq!(region.state.as_ref().map(|s| s.state), Ok(STATE_CLEAN));
        assert_eq!(region.header.cpu_count, 0);
        let trace = region.decode();
        for (s, st) in trace.streams.iter().enumerate() {
            assert_eq!(st.info.name, format!("tester.{s}"));
            assert_eq!(st.info.pid, std::process::id());
            assert_eq!(st.info.uid, unsafe { libc::getuid() });
            assert_eq!(st.events.len(), 100);
            assert!(st.events.iter().all(|e| !e.salvaged));
            assert_eq!(st.lost_events(), 0);
        }
    }
}
