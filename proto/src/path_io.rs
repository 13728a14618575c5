//! The one error of a filesystem operation on a path, used by every crate: what was being
//! done, to which path, and the operating system's reason as its `#[source]` (so the chain,
//! printed once at the top, reads `cannot read results/x/SHA256SUMS: No such file or
//! directory`).
//!
//! A layer's error enum carries it as `#[error(transparent)] Io(#[from] PathIoError)`, and
//! a call site says `fs::read(&p).map_err(PathIoError::at("read", &p))?`.

use std::io;
use std::path::{Path, PathBuf};

/// `op` on `path` failed because of `source`.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}", path.display())]
pub struct PathIoError {
    /// A verb phrase: `read`, `create`, `rename into place`, `list the directory`…
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl PathIoError {
    /// The error of `op` on `path`, for `map_err`.
    pub fn at(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> PathIoError {
        let path = path.to_path_buf();
        move |source| PathIoError { op, path, source }
    }

    /// The operating system's error kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn names_the_operation_and_the_path_and_keeps_the_reason_as_its_source() {
        let p = Path::new("/nonexistent/truecold/x");
        let e = std::fs::read(p)
            .map_err(PathIoError::at("read", p))
            .unwrap_err();
        assert_eq!(e.to_string(), "cannot read /nonexistent/truecold/x");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let src = e.source().map(|s| s.to_string()).unwrap_or_default();
        assert!(src.contains("No such file"), "{src}");
    }
}
