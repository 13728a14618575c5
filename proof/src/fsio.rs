//! The file I/O of every directory `verify` and `report` touch, written once and hardened:
//! such a directory is untrusted input, written by a publisher who may be hostile.
//!
//! - **Reading.** A file is opened once, with `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC` (a
//!   symbolic link is refused, a FIFO cannot hang the open), and its type is checked on
//!   the open descriptor (`fstat`): anything but a regular file is refused. Whatever is
//!   read into memory is capped ([`read_file`]); a longer file is a typed
//!   [`FileError::TooLarge`], never unbounded memory. Bytes that are hashed and parsed come
//!   from that one read; a file too large to hold is hashed and parsed from the one
//!   descriptor ([`open_regular`], rewound between the two).
//! - **Directories** are entered only as real directories ([`is_real_dir`]), never through
//!   a link.
//! - **Lines** are skipped with a bounded reader ([`skip_line`]): an overlong line costs
//!   no memory.
//! - **Writing** creates only new files: a temporary name beside the destination, created
//!   with `O_CREAT | O_EXCL | O_NOFOLLOW` (a planted file or link there makes the write
//!   fail, never redirects it), fsynced, then renamed into place ([`write_new`]). Nothing
//!   is ever opened for writing by a name that already exists.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use truecold_proto::path_io::PathIoError;

/// The most bytes read into memory from `result.json`, `cmdline.txt`, `SHA256SUMS`,
/// `SHA256SUMS.sig` or a directory's record (each is far smaller); every other file is
/// hashed as a stream ([`crate::digest::sha256_reader`]).
pub const MAX_PARSED_BYTES: u64 = 16 << 20;

/// The flags every read of a directory's file opens with (besides read-only).
const READ_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// Why a file of a directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("{} is not a regular file", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is larger than {cap} bytes, the most read into memory", path.display())]
    TooLarge { path: PathBuf, cap: u64 },
    #[error("{0}")]
    Changed(Box<Changed>),
}

/// A file whose bytes hashed to one digest earlier in a verification and to another now
/// (boxed: the rare error keeps [`FileError`] small).
#[derive(Debug, thiserror::Error)]
#[error(
    "{} changed while it was being verified (its bytes hash to {now}, earlier in this \
     verification to {before})",
    path.display()
)]
pub struct Changed {
    pub path: PathBuf,
    pub before: String,
    pub now: String,
}

impl FileError {
    /// The error as the `std::io::Error` the older readers returned (a link or a
    /// non-regular file is `InvalidInput`; a file too large is `FileTooLarge`).
    pub fn into_io(self) -> io::Error {
        match self {
            FileError::Io(e) => e.source,
            FileError::NotRegular { .. } => {
                io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
            }
            e @ FileError::TooLarge { .. } => io::Error::new(io::ErrorKind::FileTooLarge, e),
            e @ FileError::Changed(_) => io::Error::other(e),
        }
    }
}

thread_local! {
    /// The digest of every file read or hashed in the verification under way on this thread
    /// ([`Session`]), by path: `None` outside one.
    static SEEN: std::cell::RefCell<Option<std::collections::HashMap<PathBuf, String>>> =
        const { std::cell::RefCell::new(None) };
}

/// One verification's record of what it read: while a `Session` lives, every file this module
/// reads whole ([`read_file`]), hashes ([`hash_file`]) or parses as a stream
/// ([`crate::digest::HashingReader`]) has its digest noted by path ([`note`]), and a second read of the
/// same path whose bytes hash otherwise is [`FileError::Changed`]. So whatever a verifier
/// parses is the bytes that were hashed and checked against `SHA256SUMS`, at whatever level
/// (a tune's top listing, a phase's, an arm bundle's) and in whatever order each was read.
/// Sessions nest: only the outermost one clears the record when it ends.
pub struct Session {
    owner: bool,
}

/// Starts a [`Session`] on this thread, or joins the one under way.
pub fn session() -> Session {
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let owner = s.is_none();
        if owner {
            *s = Some(std::collections::HashMap::new());
        }
        Session { owner }
    })
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.owner {
            SEEN.with(|s| *s.borrow_mut() = None);
        }
    }
}

/// Notes that the bytes of `path` hash to `digest` in the [`Session`] under way (nothing
/// outside one): [`FileError::Changed`] when they hashed otherwise earlier in it.
pub fn note(path: &Path, digest: &str) -> Result<(), FileError> {
    let key: PathBuf = path.components().collect();
    SEEN.with(|s| match s.borrow_mut().as_mut() {
        None => Ok(()),
        Some(seen) => match seen.get(&key) {
            Some(before) if before != digest => Err(FileError::Changed(Box::new(Changed {
                path: path.to_path_buf(),
                before: before.clone(),
                now: digest.to_string(),
            }))),
            Some(_) => Ok(()),
            None => {
                seen.insert(key, digest.to_string());
                Ok(())
            }
        },
    })
}

/// Opens `path` for reading once, refusing links (`O_NOFOLLOW`), never blocking on a FIFO
/// (`O_NONBLOCK`), and refusing, after `fstat` of the open descriptor, anything that is not
/// a regular file.
pub fn open_regular(path: &Path) -> Result<File, FileError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(READ_FLAGS)
        .open(path)
        .map_err(PathIoError::at("open", path))?;
    let meta = f.metadata().map_err(PathIoError::at("stat", path))?;
    if !meta.file_type().is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    Ok(f)
}

/// Reads what is left of `f` whole if that is at most `cap` bytes; `Ok(None)` when it is
/// more (never more than `cap + 1` bytes are read).
fn read_open(f: &mut File, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let mut b = Vec::new();
    f.take(cap.saturating_add(1)).read_to_end(&mut b)?;
    Ok((b.len() as u64 <= cap).then_some(b))
}

/// Reads the regular file `path` whole (opened as [`open_regular`] does), at most `cap`
/// bytes: a longer file is [`FileError::TooLarge`].
pub fn read_file(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let mut f = open_regular(path)?;
    let b = read_open(&mut f, cap)
        .map_err(PathIoError::at("read", path))?
        .ok_or_else(|| FileError::TooLarge {
            path: path.to_path_buf(),
            cap,
        })?;
    note(path, &crate::digest::sha256_hex(&b))?;
    Ok(b)
}

/// [`read_file`] in the shape of the older reader: `Ok(None)` when the file is larger than
/// `cap`, any other failure as an `std::io::Error` ([`FileError::into_io`]).
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    match read_file(path, cap) {
        Ok(b) => Ok(Some(b)),
        Err(FileError::TooLarge { .. }) => Ok(None),
        Err(e) => Err(e.into_io()),
    }
}

/// The sha256 (lowercase hex) of the regular file `path` and its length, streamed through
/// a fixed buffer from the one descriptor [`open_regular`] opens (and noted: [`note`]).
pub fn hash_file(path: &Path) -> Result<(String, u64), FileError> {
    let f = open_regular(path)?;
    let (d, n) = crate::digest::sha256_reader(f).map_err(PathIoError::at("read", path))?;
    note(path, &d)?;
    Ok((d, n))
}

/// True when `path` is a directory itself, not a link to one.
pub fn is_real_dir(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_dir())
}

/// True when `base/rel` is a directory reached through directories only: no component of
/// `rel` (a relative path of plain names) is a link or anything but a directory.
pub fn is_real_dir_below(base: &Path, rel: &str) -> bool {
    let mut p = base.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            std::path::Component::Normal(n) => p.push(n),
            _ => return false,
        }
        if !is_real_dir(&p) {
            return false;
        }
    }
    true
}

/// True when `path` is a regular file itself, not a link to one.
pub fn is_real_file(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_file())
}

/// True when anything (a file, a directory, a link, even a dangling one) is at `path`.
pub fn exists_here(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// Skips the rest of a line of `r` (through its `\n`, or to the end): the bytes are
/// consumed from the reader's buffer as they come, never collected, so a line of any
/// length costs no memory. Returns how many bytes were skipped.
pub fn skip_line(r: &mut impl BufRead) -> io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(skipped);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(skipped + i as u64 + 1);
            }
            None => {
                let n = buf.len();
                r.consume(n);
                skipped += n as u64;
            }
        }
    }
}

/// The temporary name [`write_new`] creates beside `name`.
pub fn temp_name(name: &str) -> String {
    format!(".{name}.tmp-{}", std::process::id())
}

/// Creates `path` as a new file (`O_CREAT | O_EXCL | O_NOFOLLOW`): whatever is already
/// there, a file or a link, makes this fail.
pub fn create_new(path: &Path) -> Result<File, PathIoError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(PathIoError::at("create (as a new file)", path))
}

/// Writes `bytes` to the new file `path` ([`create_new`]) and fsyncs it.
pub fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), PathIoError> {
    let mut f = create_new(path)?;
    f.write_all(bytes).map_err(PathIoError::at("write", path))?;
    f.sync_all().map_err(PathIoError::at("fsync", path))
}

/// Writes `dir/name` atomically: `bytes` go into a new temporary file beside it
/// ([`temp_name`], [`create_new`]), fsynced, then renamed over `dir/name` (a link there
/// is replaced, its target never written). On failure the temporary file is removed.
pub fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), PathIoError> {
    let tmp = dir.join(temp_name(name));
    let dest = dir.join(name);
    let res = write_new_file(&tmp, bytes).and_then(|()| {
        std::fs::rename(&tmp, &dest).map_err(PathIoError::at("rename into place", &dest))
    });
    if let Err(e) = &res {
        // Only a file this call created is removed: a name that was already taken
        // (`AlreadyExists`) belongs to someone else.
        if e.kind() != io::ErrorKind::AlreadyExists {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    res
}

/// fsyncs the directory `dir` (after renames into it).
pub fn sync_dir(dir: &Path) -> Result<(), PathIoError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(PathIoError::at("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::HashingReader;

    #[test]
    fn a_link_a_fifo_and_a_directory_are_refused_and_a_file_is_capped() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_file(&f, 10).unwrap(), b"0123456789");
        assert!(matches!(
            read_file(&f, 9),
            Err(FileError::TooLarge { cap: 9, .. })
        ));
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&f, &l).unwrap();
        let e = read_file(&l, 100).unwrap_err();
        assert!(
            matches!(&e, FileError::Io(p) if p.source.raw_os_error() == Some(libc::ELOOP)),
            "{e:?}"
        );
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call; mkfifo only
        // reads it.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0);
        assert!(matches!(
            read_file(&fifo, 100),
            Err(FileError::NotRegular { .. })
        ));
        assert!(matches!(
            read_file(d.path(), 100),
            Err(FileError::NotRegular { .. })
        ));
    }

    #[test]
    fn within_a_session_a_file_hashed_then_parsed_with_other_bytes_is_changed() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"hashed").unwrap();
        {
            let _s = session();
            hash_file(&f).unwrap();
            // The same bytes again: fine, by any spelling of the path.
            read_file(&d.path().join(".").join("f"), 100).unwrap();
            std::fs::write(&f, b"parsed").unwrap();
            assert!(matches!(read_file(&f, 100), Err(FileError::Changed(_))));
            // Parsed as a stream: hashed from the same bytes.
            let mut r = HashingReader::new(open_regular(&f).unwrap());
            let mut first = [0u8; 2];
            r.read_exact(&mut first).unwrap();
            let (digest, len) = r.finish().unwrap();
            assert_eq!((digest, len), (crate::digest::sha256_hex(b"parsed"), 6));
        }
        // Outside a session nothing is noted.
        read_file(&f, 100).unwrap();
        std::fs::write(&f, b"again").unwrap();
        read_file(&f, 100).unwrap();
    }

    #[test]
    fn skip_line_consumes_through_the_newline_only() {
        let mut r = io::BufReader::with_capacity(4, &b"abcdefghij\nrest\n"[..]);
        assert_eq!(skip_line(&mut r).unwrap(), 11);
        let mut s = String::new();
        r.read_line(&mut s).unwrap();
        assert_eq!(s, "rest\n");
        assert_eq!(skip_line(&mut r).unwrap(), 0);
    }

    #[test]
    fn a_planted_temporary_name_makes_the_write_fail_and_its_target_is_untouched() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join(temp_name("README.md"))).unwrap();
        let e = write_new(d.path(), "README.md", b"new").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e:?}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!exists_here(&d.path().join("README.md")));
        // The link is someone else's: left where it is.
        assert!(exists_here(&d.path().join(temp_name("README.md"))));
        std::fs::remove_file(d.path().join(temp_name("README.md"))).unwrap();
        write_new(d.path(), "README.md", b"new").unwrap();
        assert_eq!(std::fs::read(d.path().join("README.md")).unwrap(), b"new");
        assert!(!exists_here(&d.path().join(temp_name("README.md"))));
    }
}
