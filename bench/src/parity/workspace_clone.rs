//! The per-launch workspace disk: a private clone of the base image for each launch (the
//! VMM opens it read-write; the guest writes into it), and its verified removal.
//!
//! [`clone_image`] tries `ioctl(FICLONE)` first (a reflink: the clone shares the base's
//! extents copy-on-write, O(1) in the image's size; btrfs, XFS with reflink=1, bcachefs…).
//! Where the filesystem refuses it (ext4, tmpfs: `EOPNOTSUPP`; another filesystem:
//! `EXDEV`), it makes a sparse copy: the clone is sized like the base (a hole), then each
//! data extent of the base (`SEEK_DATA`/`SEEK_HOLE`) is copied with `copy_file_range` (in the
//! kernel, no round trip through the harness; `pread`/`pwrite` where that is refused), so
//! the base's holes stay holes. Which mode was used, the refused reflink's errno, and the
//! duration are in [`Cloned`]. The clone is not fsynced: a crash loses the run, not data.
//!
//! # Figures
//! Host: `/` is ext4 on virtio-blk, Linux 6.18, 2 cores shared with other builds (debug
//! build). Base: an 8 MiB ext4 image made by `mkfs.ext4 -d` over a tree of 26 files (~104
//! KiB), fsynced: 1288 KiB allocated, of which 204 KiB (208 896 bytes) in 4 data extents
//! (the rest is the 1 MiB journal, allocated unwritten: a hole to SEEK_DATA). 20 clones
//! each way, three runs (`cargo test -p truecold-bench --lib
//! parity::workspace_clone::tests::clone_figures -- --nocapture`):
//!
//! | policy       | mode        | copied              | clone median | clone min | remove median |
//! |--------------|-------------|---------------------|--------------|-----------|---------------|
//! | `Auto`       | sparse_copy | 208 896 B, 4 extents | 83–96 µs     | 81–83 µs  | 20–21 µs      |
//! | `SparseOnly` | sparse_copy | 208 896 B, 4 extents | 82–85 µs     | 81–82 µs  | 20 µs         |
//!
//! The reflink is refused at once on ext4 (`FICLONE` → `EOPNOTSUPP`, errno 95, in 2–4 µs),
//! so `Auto` costs one refused ioctl more than the copy: within the noise. A reflink could
//! not be measured here (no btrfs/XFS); it is O(1) in the image's size where it works.
//!
//! Caveat (measured): once the base's unwritten extents have pages in the page cache
//! (anything that *reads the whole base*, e.g. hashing it), ext4's SEEK_DATA reports them
//! as data, and the copy copies their zeros: here 1 314 816 B in 3 extents, clone median
//! ~450–520 µs and remove ~700–800 µs (the clone is no longer sparse there). The clone is
//! still correct. So the campaign hashes the base with [`image_digest`], which drops the
//! pages it read (`posix_fadvise(DONTNEED)`) before it returns; FIEMAP (which flags
//! unwritten extents) would avoid it too and is not used.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use truecold_proto::measure::now_ns;

/// How a clone was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloneMode {
    /// `ioctl(FICLONE)`: the clone shares the base's extents copy-on-write.
    Reflink,
    /// A sized hole plus each data extent copied (`copy_file_range`, else `pread`/`pwrite`).
    SparseCopy,
}

impl CloneMode {
    /// The column spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CloneMode::Reflink => "reflink",
            CloneMode::SparseCopy => "sparse_copy",
        }
    }
}

/// Which modes [`clone_image_with`] may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClonePolicy {
    /// A reflink, else a sparse copy (what a launch uses).
    Auto,
    /// A sparse copy without trying the reflink (for measuring it where reflinks work).
    SparseOnly,
}

/// A clone made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cloned {
    pub path: PathBuf,
    pub mode: CloneMode,
    /// The errno of the refused reflink when the clone fell back to a copy (`None`: not
    /// tried, or it worked).
    pub reflink_errno: Option<i32>,
    /// From opening the base to the clone complete, ns.
    pub ns: u64,
    /// The image's apparent size, bytes.
    pub size: u64,
    /// Bytes copied (0 for a reflink) and the data extents they came from.
    pub copied_bytes: u64,
    pub extents: u64,
}

/// Why an image could not be cloned. The half-made clone is removed before this returns.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    #[error("the base image {} does not exist", base.display())]
    BaseMissing {
        base: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the base image {} cannot be read", base.display())]
    BaseUnreadable {
        base: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the base image {} is not a regular file", base.display())]
    BaseNotFile { base: PathBuf },
    #[error("the clone {} already exists", dest.display())]
    DestExists { dest: PathBuf },
    #[error("the clone {} cannot be created or written", dest.display())]
    DestUnwritable {
        dest: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no space left for the clone {}", dest.display())]
    NoSpace {
        dest: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cloning {} to {} ({op})", base.display(), dest.display())]
    Copy {
        base: PathBuf,
        dest: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl CloneError {
    /// A short stable name (for a row's failure detail).
    pub fn name(&self) -> &'static str {
        match self {
            CloneError::BaseMissing { .. } => "base_missing",
            CloneError::BaseUnreadable { .. } => "base_unreadable",
            CloneError::BaseNotFile { .. } => "base_not_file",
            CloneError::DestExists { .. } => "dest_exists",
            CloneError::DestUnwritable { .. } => "dest_unwritable",
            CloneError::NoSpace { .. } => "no_space",
            CloneError::Copy { .. } => "copy",
        }
    }
}

/// Whether an I/O error is the filesystem being full (or the quota spent).
fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Classifies an error while writing the clone: full → [`CloneError::NoSpace`], else the
/// `otherwise` error.
fn dest_error(
    dest: &Path,
    e: io::Error,
    otherwise: impl FnOnce(io::Error) -> CloneError,
) -> CloneError {
    if is_no_space(&e) {
        CloneError::NoSpace {
            dest: dest.into(),
            source: e,
        }
    } else {
        otherwise(e)
    }
}

/// The SHA-256 (hex) of the image at `path`, read in 1 MiB pieces; its pages are then
/// dropped from the page cache (`posix_fadvise(DONTNEED)`), so the sparse clones that follow
/// still see its unwritten extents as holes (the module's caveat).
pub fn image_digest(path: &Path) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // SAFETY: posix_fadvise on a descriptor `f` owns; offset 0 and length 0 mean the whole
    // file. Advice only: a failure leaves the cache as it was (the clones stay correct).
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(h.finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>())
}

/// Clones `base` to `dest` (which must not exist): a reflink, else a sparse copy.
pub fn clone_image(base: &Path, dest: &Path) -> Result<Cloned, CloneError> {
    clone_image_with(base, dest, ClonePolicy::Auto)
}

/// Clones `base` to `dest` (which must not exist) by `policy`. The clone is created
/// `0600`, exclusively (never over an existing file).
pub fn clone_image_with(
    base: &Path,
    dest: &Path,
    policy: ClonePolicy,
) -> Result<Cloned, CloneError> {
    let t0 = now_ns();
    let src = File::open(base).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            CloneError::BaseMissing {
                base: base.into(),
                source,
            }
        } else {
            CloneError::BaseUnreadable {
                base: base.into(),
                source,
            }
        }
    })?;
    let meta = src
        .metadata()
        .map_err(|source| CloneError::BaseUnreadable {
            base: base.into(),
            source,
        })?;
    if !meta.is_file() {
        return Err(CloneError::BaseNotFile { base: base.into() });
    }
    let dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dest)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                CloneError::DestExists { dest: dest.into() }
            } else {
                dest_error(dest, e, |source| CloneError::DestUnwritable {
                    dest: dest.into(),
                    source,
                })
            }
        })?;
    let made = fill(&src, &dst, meta.len(), base, dest, policy);
    drop(dst);
    match made {
        Ok((mode, reflink_errno, copied_bytes, extents)) => Ok(Cloned {
            path: dest.into(),
            mode,
            reflink_errno,
            ns: now_ns().saturating_sub(t0),
            size: meta.len(),
            copied_bytes,
            extents,
        }),
        Err(e) => {
            // The half-made clone is ours (created exclusively above): never leave it.
            let _ = std::fs::remove_file(dest);
            Err(e)
        }
    }
}

/// Makes `dst` (empty, just created) a clone of `src` (`size` bytes): (mode, refused
/// reflink's errno, bytes copied, extents).
fn fill(
    src: &File,
    dst: &File,
    size: u64,
    base: &Path,
    dest: &Path,
    policy: ClonePolicy,
) -> Result<(CloneMode, Option<i32>, u64, u64), CloneError> {
    let mut reflink_errno = None;
    if policy == ClonePolicy::Auto {
        // SAFETY: FICLONE takes the source descriptor as its argument; both descriptors are
        // open for the duration of the call (borrowed `File`s) and nothing is written
        // through pointers.
        let rc = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
        if rc == 0 {
            return Ok((CloneMode::Reflink, None, 0, 0));
        }
        let e = io::Error::last_os_error();
        if is_no_space(&e) {
            return Err(CloneError::NoSpace {
                dest: dest.into(),
                source: e,
            });
        }
        // Any other refusal (EOPNOTSUPP, EXDEV, EINVAL, ENOTTY…) leaves `dst` untouched:
        // fall back to the copy.
        reflink_errno = e.raw_os_error();
    }
    let copy_err = |op: &'static str| {
        move |e: io::Error| {
            dest_error(dest, e, |source| CloneError::Copy {
                base: base.into(),
                dest: dest.into(),
                op,
                source,
            })
        }
    };
    // The whole size first: everything not copied below stays a hole.
    dst.set_len(size).map_err(copy_err("sizing the clone"))?;
    let mut copied = 0u64;
    let mut extents = 0u64;
    let mut off = 0u64;
    while off < size {
        let Some((start, end)) =
            next_extent(src, off, size).map_err(copy_err("SEEK_DATA/SEEK_HOLE"))?
        else {
            break;
        };
        copy_range(src, dst, start, end).map_err(copy_err("copying an extent"))?;
        copied += end - start;
        extents += 1;
        off = end;
    }
    Ok((CloneMode::SparseCopy, reflink_errno, copied, extents))
}

/// The next data extent `[start, end)` of `f` at or after `off` (`None`: only a hole is
/// left). A filesystem without SEEK_DATA (`EINVAL`) is all data.
fn next_extent(f: &File, off: u64, size: u64) -> io::Result<Option<(u64, u64)>> {
    let fd = f.as_raw_fd();
    let Ok(off_i) = libc::off_t::try_from(off) else {
        return Ok(None);
    };
    // SAFETY: lseek on an open descriptor; no memory is passed.
    let data = unsafe { libc::lseek(fd, off_i, libc::SEEK_DATA) };
    if data < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            Some(libc::EINVAL) => Ok(Some((off, size))),
            _ => Err(e),
        };
    }
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
    if hole < 0 {
        return Err(io::Error::last_os_error());
    }
    let (data, hole) = (data as u64, (hole as u64).min(size));
    Ok((data < hole).then_some((data, hole)))
}

/// Copies `[start, end)` of `src` to the same offsets of `dst`: `copy_file_range`, or
/// `pread`/`pwrite` where the kernel or filesystem refuses it.
fn copy_range(src: &File, dst: &File, start: u64, end: u64) -> io::Result<()> {
    let mut pos = start;
    while pos < end {
        let mut off_in = libc::loff_t::try_from(pos).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut off_out = off_in;
        let len = usize::try_from(end - pos)
            .unwrap_or(usize::MAX)
            .min(1 << 30);
        // SAFETY: both descriptors are open; `off_in`/`off_out` are valid, writable loff_t
        // the kernel updates; no other memory is passed.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                &mut off_in,
                dst.as_raw_fd(),
                &mut off_out,
                len,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EXDEV)
                | Some(libc::ENOSYS)
                | Some(libc::EOPNOTSUPP)
                | Some(libc::EINVAL) => copy_plain(src, dst, pos, end),
                _ => Err(e),
            };
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the base image shrank while it was copied",
            ));
        }
        pos += n as u64;
    }
    Ok(())
}

fn copy_plain(src: &File, dst: &File, mut pos: u64, end: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    while pos < end {
        let want = usize::try_from(end - pos)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = src.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the base image shrank while it was copied",
            ));
        }
        dst.write_all_at(&buf[..n], pos)?;
        pos += n as u64;
    }
    Ok(())
}

/// A removal and its verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Whether the path existed (false: it was already gone, which is not an error).
    pub was_present: bool,
    /// Removal and verification, ns.
    pub ns: u64,
}

/// Why a per-launch file or directory was not removed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    #[error("removing {}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is still present after its removal", path.display())]
    StillPresent { path: PathBuf },
    #[error("checking that {} is gone", path.display())]
    Check {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Removes the per-launch image `path` (a file; never a directory) and verifies it is
/// gone (`lstat` says `ENOENT`).
pub fn remove_image(path: &Path) -> Result<Removed, RemoveError> {
    let t0 = now_ns();
    let was_present = match std::fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(source) => {
            return Err(RemoveError::Remove {
                path: path.into(),
                source,
            })
        }
    };
    verify_gone(path)?;
    Ok(Removed {
        was_present,
        ns: now_ns().saturating_sub(t0),
    })
}

/// `Ok` when `lstat(path)` says it does not exist.
pub(crate) fn verify_gone(path: &Path) -> Result<(), RemoveError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(RemoveError::StillPresent { path: path.into() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RemoveError::Check {
            path: path.into(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests;
