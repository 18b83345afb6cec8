//! Checking a bundle as its recipient would: every entry is a regular
//! file or a directory inside the one top directory (no link, device or
//! absolute or `..` path that unpacking would follow out of it), every
//! file the manifest lists (once) is there with its size and SHA-256, nothing
//! else is, and the README names exactly the files there are. No name
//! is both a file's and a directory's. No entry
//! carries a pax record an unpacker could act on beyond its path, size,
//! times and owner ([`PAX_KEYS`]). After the
//! tar's end there is nothing but zeros up to the end of the one gzip
//! member, and nothing after that: what gzip(1) or tar(1) would go on to
//! read there (a second member, say) is never seen by the check. The
//! archive is outside data:
//! files are hashed as they stream past, and only the manifest and README
//! are held, up to [`MAX_TEXT`] each, and of the headers before an
//! entry (a long name, a pax header) at most [`MAX_HEADERS`] bytes.

use super::readme::FILES_HEADING;
use flate2::bufread::GzDecoder;
use pstore_ring::text::push_escaped;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

/// Largest MANIFEST.json or README.txt read.
pub const MAX_TEXT: u64 = 16 << 20;

/// Most entries (files and directories) a bundle may have. Ours hold a
/// few per region and log, and a CTF stream file per stream (at most
/// 4096 a region); the bound keeps what the check holds per file (its
/// path, size and digest) within tens of megabytes.
pub const MAX_ENTRIES: usize = 100_000;

/// Most bytes the tar crate may read while it looks for the next entry:
/// the last one's padding, the next header, and any GNU long name, long
/// link or pax header before it. The crate (0.4.46, `next_entry`) reads
/// each of those whole into memory, whatever size its header claims,
/// before the check sees the entry; a bundle's paths are short, and
/// this is far more than one needs.
pub const MAX_HEADERS: u64 = 1 << 20;

/// Why [`Metered`] stopped a read: known by its type when it comes back
/// from the tar crate, so that the check can name it as a layout error.
#[derive(Debug, thiserror::Error)]
#[error("over {MAX_HEADERS} bytes of tar headers")]
struct OverHeaders;

/// The archive under the tar crate, refusing to hand it more than
/// `left` bytes while `left` is set: the only way from outside to bound
/// what the crate holds of a header, without parsing the tar ourselves.
struct Metered<R> {
    inner: R,
    left: Rc<Cell<Option<u64>>>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(left) = self.left.get() else {
            return self.inner.read(buf);
        };
        if left == 0 && !buf.is_empty() {
            return Err(io::Error::other(OverHeaders));
        }
        let most = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let n = self.inner.read(&mut buf[..most])?;
        self.left.set(Some(left - n as u64));
        Ok(n)
    }
}

/// A bundle that checked out.
#[derive(Clone, Debug)]
pub struct Checked {
    /// Its top directory.
    pub top: String,
    /// Every file (path inside the top directory → size).
    pub files: BTreeMap<String, u64>,
    pub manifest: serde_json::Value,
    pub readme: String,
}

/// Every message quotes the archive (its paths, the manifest's and the
/// README's text, what the tar crate said of a header), so each is
/// shown [`escaped`]: the fields hold the text as it was, the message
/// holds no control or bidirectional character to drive a terminal.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("reading the archive: {}", escaped(&.0.to_string()))]
    Read(#[from] io::Error),
    #[error("{}", escaped(.0))]
    Layout(String),
    #[error("{}: {}", escaped(path), escaped(what))]
    Mismatch { path: String, what: String },
    /// An entry that is no regular file or directory, or whose path could
    /// leave the top directory: named by its path in the archive.
    #[error("{}: {}", escaped(path), escaped(what))]
    Unsafe { path: String, what: String },
}

/// `text` for a terminal or a log: each control and bidirectional
/// character as `\xNN` ([`push_escaped`]), the rest as it is.
pub fn escaped(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    push_escaped(&mut out, text.as_bytes());
    // Valid UTF-8 runs and ASCII escapes: nothing for lossy to replace.
    String::from_utf8_lossy(&out).into_owned()
}

/// What an entry that is not a regular file or directory is.
fn entry_kind(kind: tar::EntryType) -> Option<String> {
    use tar::EntryType as T;
    let what = match kind {
        T::Regular | T::Directory => return None,
        T::Symlink => "a symbolic link".into(),
        T::Link => "a hard link".into(),
        T::Char | T::Block => "a device".into(),
        T::Fifo => "a FIFO".into(),
        T::GNUSparse => "a sparse file".into(),
        T::XGlobalHeader => "a pax global header".into(),
        other => format!("an entry of type '{}'", other.as_byte().escape_ascii()),
    };
    Some(what)
}

/// The pax extended header keys a bundle may carry: the ones that only
/// restate a ustar header field at more length or precision, which both
/// the tar crate and tar(1) read the same way. Our writer emits none (a
/// long name goes in a GNU long-name entry); GNU tar `--format=pax`
/// writes the times, Python's tarfile the path, ids, names and size.
/// Any other key could make an unpacker act on something the check
/// never saw: `GNU.sparse.name` unpacks a file under another name,
/// `GNU.sparse.map` rearranges its bytes, `SCHILY.xattr.*` sets
/// attributes, `hdrcharset` changes how the path reads, `linkpath`
/// belongs to links, which are refused.
const PAX_KEYS: [&str; 9] = [
    "path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname",
];

/// The first pax extended header key of `entry` not in [`PAX_KEYS`]
/// (escaped for printing), or why its records cannot be read.
fn unknown_pax_key<R: Read>(entry: &mut tar::Entry<R>) -> io::Result<Option<String>> {
    let Some(records) = entry.pax_extensions()? else {
        return Ok(None);
    };
    for record in records {
        let key = record?.key_bytes();
        if !PAX_KEYS.iter().any(|k| k.as_bytes() == key) {
            return Ok(Some(key.escape_ascii().to_string()));
        }
    }
    Ok(None)
}

/// Why a path could lead out of the directory it is unpacked in, if it
/// could. A directory's trailing `/` is allowed; an empty or `.`
/// component is not (nothing we write has one, and tools disagree on it).
fn path_escapes(path: &[u8]) -> Option<&'static str> {
    if path.first() == Some(&b'/') {
        return Some("an absolute path");
    }
    let path = path.strip_suffix(b"/").unwrap_or(path);
    path.split(|&b| b == b'/').find_map(|c| match c {
        b".." => Some("a `..` component"),
        b"" | b"." => Some("an empty or `.` component"),
        _ => None,
    })
}

/// Reads what is left of the archive once the tar crate has seen its end
/// (a zero block): the rest of the gzip member must be zeros (the second
/// end block, a record's padding), and the member the last thing there
/// is. A bundle is one member (see `gzip.rs`); gzip(1) would decompress
/// a second one and `tar xzf` unpack what it holds, so any byte after
/// the first member is refused rather than decoded and checked too: the
/// check then covers every byte any reader could act on, whatever its
/// decoder does with trailing data. Reading the member to its end also
/// checks its CRC-32 and length.
fn nothing_after<R: BufRead>(mut gz: GzDecoder<R>) -> Result<(), CheckError> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = gz.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(CheckError::Layout(
                "data after the tar archive's end (tar(1) told to read on would unpack it)".into(),
            ));
        }
    }
    if !gz.into_inner().fill_buf()?.is_empty() {
        return Err(CheckError::Layout(
            "bytes after the gzip member (a second member is unpacked by `tar xzf`)".into(),
        ));
    }
    Ok(())
}

/// Checks the `.tar.gz` bundle read from `archive`.
pub fn check(archive: impl Read) -> Result<Checked, CheckError> {
    // The buffer is ours, not the decoder's, so what follows the gzip
    // member can be looked at once the member has ended.
    let left = Rc::new(Cell::new(None));
    let mut tar = tar::Archive::new(Metered {
        inner: GzDecoder::new(BufReader::new(archive)),
        left: left.clone(),
    });
    let mut top: Option<String> = None;
    let mut files = BTreeMap::new();
    let mut digests = BTreeMap::new();
    // The directories by their path inside the top directory, without
    // the trailing `/` (the top directory is ""), to be compared with
    // the files' paths.
    let mut dirs = BTreeSet::new();
    let (mut manifest, mut readme) = (None, None);
    let mut entries = tar.entries()?;
    // The path of the last entry, for where the headers after it were.
    let mut last = String::new();
    for n in 0.. {
        // Metered while the crate reads headers, not an entry's data.
        left.set(Some(MAX_HEADERS));
        let next = entries.next();
        left.set(None);
        let Some(entry) = next else {
            break;
        };
        if n == MAX_ENTRIES {
            return Err(CheckError::Layout(format!(
                "over {MAX_ENTRIES} entries, more than a bundle has"
            )));
        }
        let mut entry = entry.map_err(|e| match e.get_ref() {
            Some(over) if over.is::<OverHeaders>() => CheckError::Layout(format!(
                "{over} after {} (a long name or pax header that long is none of a bundle's)",
                if last.is_empty() { "the start" } else { &last }
            )),
            _ => CheckError::Read(e),
        })?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        last.clone_from(&path);
        let refuse = |what: String| {
            Err(CheckError::Unsafe {
                path: path.clone(),
                what: format!("{what}: a bundle holds only regular files and directories inside its top directory"),
            })
        };
        if let Some(what) = entry_kind(entry.header().entry_type()) {
            return refuse(what);
        }
        if let Some(what) = path_escapes(&entry.path_bytes()) {
            return refuse(what.into());
        }
        if let Some(key) = unknown_pax_key(&mut entry)? {
            return Err(CheckError::Unsafe {
                path,
                what: format!(
                    "a pax extended header record `{key}`: a bundle's pax records hold only {} \
                     (crashring writes none: send the bundle as it was written, or repack it \
                     with `tar --format=gnu` or `bsdtar --no-xattrs --no-acls --no-mac-metadata`)",
                    PAX_KEYS.join(", ")
                ),
            });
        }
        let first = path.split('/').next().unwrap_or_default().to_string();
        match &top {
            None => top = Some(first.clone()),
            Some(t) if *t != first => {
                return Err(CheckError::Layout(format!(
                    "{path} is outside the top directory {t}/"
                )));
            }
            Some(_) => {}
        }
        // A directory and a file of the same name: GNU tar unpacks the
        // later over the earlier (a checked file becomes an empty
        // directory), and other unpackers do otherwise. Neither is what
        // was checked.
        let same_name = || {
            Err(CheckError::Layout(format!(
                "{path} is both a file and a directory in the archive"
            )))
        };
        if entry.header().entry_type().is_dir() {
            // Its data would be skipped unseen (and then counted against
            // the headers' bound, under the wrong name).
            if entry.size() != 0 {
                return refuse(format!("a directory entry holding {} bytes", entry.size()));
            }
            let name = path.strip_suffix('/').unwrap_or(&path);
            let rel = name.strip_prefix(first.as_str()).unwrap_or(name);
            let rel = rel.strip_prefix('/').unwrap_or(rel);
            if files.contains_key(rel) {
                return same_name();
            }
            dirs.insert(rel.to_string());
            continue;
        }
        // GNU tar unpacks it as a directory whatever its type says, and
        // it would escape the comparison of names above.
        if path.ends_with('/') {
            return refuse("a file entry whose name ends in `/`".into());
        }
        let Some(rel) = path.strip_prefix(&format!("{first}/")).map(String::from) else {
            return Err(CheckError::Layout(format!(
                "{path} is not inside a directory"
            )));
        };
        if dirs.contains(&rel) {
            return same_name();
        }
        let keep = rel == "MANIFEST.json" || rel == "README.txt";
        // The entry yields no more than the size its header (or pax
        // record) gives, so refusing that size bounds what is kept; and
        // a text too long to be ours is the bundle's fault, not a read's.
        if keep && entry.size() > MAX_TEXT {
            return Err(CheckError::Layout(format!(
                "{path} is {} bytes, over the {MAX_TEXT} a bundle's {rel} may have",
                entry.size()
            )));
        }
        let mut kept = Vec::new();
        let super::Digested { size, sha256 } = super::digest(&mut entry, |piece| {
            if keep {
                kept.extend_from_slice(piece);
            }
            Ok(())
        })?;
        if files.insert(rel.clone(), size).is_some() {
            return Err(CheckError::Layout(format!("{rel} is in the archive twice")));
        }
        digests.insert(rel.clone(), sha256);
        match rel.as_str() {
            "MANIFEST.json" => manifest = Some(kept),
            "README.txt" => readme = Some(kept),
            _ => {}
        }
    }
    nothing_after(tar.into_inner().inner)?;
    let top = top.ok_or_else(|| CheckError::Layout("the archive is empty".into()))?;
    let manifest = manifest.ok_or_else(|| CheckError::Layout("no MANIFEST.json".into()))?;
    let manifest: serde_json::Value = serde_json::from_slice(&manifest)
        .map_err(|e| CheckError::Layout(format!("MANIFEST.json is not JSON: {e}")))?;
    let readme = readme.ok_or_else(|| CheckError::Layout("no README.txt".into()))?;
    let readme = String::from_utf8(readme)
        .map_err(|_| CheckError::Layout("README.txt is not UTF-8".into()))?;

    let listed = manifest["files"]
        .as_array()
        .ok_or_else(|| CheckError::Layout("MANIFEST.json has no files list".into()))?;
    let mut seen = BTreeSet::from(["MANIFEST.json"]);
    for f in listed {
        let (Some(path), Some(size), Some(sha)) =
            (f["path"].as_str(), f["size"].as_u64(), f["sha256"].as_str())
        else {
            return Err(CheckError::Layout(format!(
                "MANIFEST.json lists {f} without path, size and sha256"
            )));
        };
        let mismatch = |what: String| CheckError::Mismatch {
            path: path.into(),
            what,
        };
        let Some(&actual) = files.get(path) else {
            return Err(mismatch(
                "listed in MANIFEST.json, not in the archive".into(),
            ));
        };
        if actual != size {
            return Err(mismatch(format!(
                "{actual} bytes, MANIFEST.json says {size}"
            )));
        }
        if digests[path] != sha {
            return Err(mismatch(format!(
                "SHA-256 {}, MANIFEST.json says {sha}",
                digests[path]
            )));
        }
        // Each entry for the file matched it, but no bundle lists a file
        // twice, and a reader going by the list would take it twice.
        if !seen.insert(path) {
            return Err(mismatch("listed in MANIFEST.json twice".into()));
        }
    }
    if let Some(extra) = files.keys().find(|p| !seen.contains(p.as_str())) {
        return Err(CheckError::Mismatch {
            path: extra.clone(),
            what: "in the archive, not in MANIFEST.json".into(),
        });
    }

    let section = readme
        .split_once(&format!("{FILES_HEADING}\n"))
        .map(|(_, rest)| rest)
        .ok_or_else(|| {
            CheckError::Layout(format!("README.txt has no \"{FILES_HEADING}\" section"))
        })?;
    let named: BTreeSet<&str> = section
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty() && !l.starts_with(' '))
        .collect();
    for n in &named {
        if !files.contains_key(*n) {
            return Err(CheckError::Mismatch {
                path: (*n).into(),
                what: "named in README.txt, not in the archive".into(),
            });
        }
    }
    if let Some(missing) = files.keys().find(|p| !named.contains(&p.as_str())) {
        return Err(CheckError::Mismatch {
            path: missing.clone(),
            what: "in the archive, not named in README.txt".into(),
        });
    }
    Ok(Checked {
        top,
        files,
        manifest,
        readme,
    })
}

#[cfg(test)]
mod tests;
