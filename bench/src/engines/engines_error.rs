//! [`EnginesError`]: why an engines campaign could not run or be written.

use crate::artifacts::guest_files::ArtifactError;
use crate::campaign::record::StagingError;
use std::path::{Path, PathBuf};
use truecold_proof::bundle::BundleError;
use truecold_proto::kinds::Engine;
use truecold_proto::path_io::PathIoError;

/// Why an engines campaign could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum EnginesError {
    #[error(transparent)]
    BinaryMissing(truecold_engine::locate::Missing),
    #[error("the {engine} arm's version")]
    Version {
        engine: Engine,
        #[source]
        source: truecold_engine::version::VersionError,
    },
    #[error("the {engine} arm")]
    Launch {
        engine: Engine,
        #[source]
        source: truecold_engine::EngineError,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("hashing the artifacts of {}", binary.display())]
    Digests {
        binary: PathBuf,
        #[source]
        source: ArtifactError,
    },
    #[error("writing the {engine} arm's bundle")]
    Bundle {
        engine: Engine,
        #[source]
        source: BundleError,
    },
    #[error("placing the campaign directory")]
    Place(#[source] BundleError),
    #[error("writing the campaign directory's comparison")]
    Arms(#[source] truecold_proof::arms::ArmsError),
    #[error("the campaign's staged rows")]
    Staging(#[from] StagingError),
}

pub(super) fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EnginesError {
    let at = PathIoError::at(op, path);
    move |source| EnginesError::Io(at(source))
}
