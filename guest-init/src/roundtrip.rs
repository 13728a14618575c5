//! The file round trip both workloads run: write a payload, fsync, read it back, compare
//! SHA-256, unlink, confirm gone. The tmpfs workload (`/tmp`, every boot) and the parity
//! contract's workspace workload (the ext4 disk, `truecold.workspace=1`) are this one
//! function; only their error codes differ (the callers map [`RoundTripError`]).

use crate::sha256;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The step of [`round_trip`] that failed with an I/O error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileStep {
    Create,
    Write,
    Fsync,
    /// The caller's `evict` after the fsync.
    Evict,
    Read,
    Unlink,
}

impl FileStep {
    pub fn as_str(self) -> &'static str {
        match self {
            FileStep::Create => "create",
            FileStep::Write => "write",
            FileStep::Fsync => "fsync",
            FileStep::Evict => "evict",
            FileStep::Read => "read",
            FileStep::Unlink => "unlink",
        }
    }
}

/// Why the round trip failed.
#[derive(Debug, thiserror::Error)]
pub enum RoundTripError {
    #[error("{} `{}`", .step.as_str(), .path.display())]
    Io {
        step: FileStep,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("read back {got} bytes whose SHA-256 differs from the payload's")]
    Digest { got: usize },
    #[error("`{}` still present after unlink", .0.display())]
    StillPresent(PathBuf),
}

/// Creates `path` (it must not exist), writes `data`, fsyncs, runs `evict` (e.g. drop the
/// now clean pages from the page cache, so that the read back comes from the device, not
/// from memory), reads it back, compares SHA-256 with `data`'s, unlinks it and confirms it
/// is gone.
pub fn round_trip(
    path: &Path,
    data: &[u8],
    evict: impl FnOnce() -> io::Result<()>,
) -> Result<(), RoundTripError> {
    let io = |step: FileStep| {
        let path = path.to_path_buf();
        move |source| RoundTripError::Io { step, path, source }
    };
    let want = sha256(data);
    let mut f = fs::File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io(FileStep::Create))?;
    f.write_all(data).map_err(io(FileStep::Write))?;
    f.sync_all().map_err(io(FileStep::Fsync))?;
    drop(f);
    evict().map_err(io(FileStep::Evict))?;
    let back = fs::read(path).map_err(io(FileStep::Read))?;
    if sha256(&back) != want {
        return Err(RoundTripError::Digest { got: back.len() });
    }
    fs::remove_file(path).map_err(io(FileStep::Unlink))?;
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        _ => Err(RoundTripError::StillPresent(path.to_path_buf())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "truecold-init-roundtrip-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_reads_back_and_removes() {
        let d = scratch("ok");
        let p = d.join("probe");
        let mut evicted = false;
        round_trip(&p, &crate::payload()[..65536], || {
            // Between the fsync and the read back: the file is complete.
            assert_eq!(fs::metadata(&p)?.len(), 65536);
            evicted = true;
            Ok(())
        })
        .unwrap();
        assert!(evicted);
        assert!(!p.exists());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_existing_file_is_not_overwritten() {
        let d = scratch("exists");
        let p = d.join("probe");
        fs::write(&p, b"someone else's").unwrap();
        let e = round_trip(&p, b"data", || Ok(())).unwrap_err();
        assert!(
            matches!(
                e,
                RoundTripError::Io {
                    step: FileStep::Create,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(fs::read(&p).unwrap(), b"someone else's");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_directory_fails_at_create() {
        let d = scratch("missing");
        let e = round_trip(&d.join("no/such/dir/probe"), b"data", || Ok(())).unwrap_err();
        assert!(e.to_string().starts_with("create `"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_evict_stops_before_the_read_back() {
        let d = scratch("evict");
        let p = d.join("probe");
        let e = round_trip(&p, b"data", || Err(io::ErrorKind::Unsupported.into())).unwrap_err();
        assert!(
            matches!(
                e,
                RoundTripError::Io {
                    step: FileStep::Evict,
                    ..
                }
            ),
            "{e:?}"
        );
        fs::remove_dir_all(&d).unwrap();
    }
}
