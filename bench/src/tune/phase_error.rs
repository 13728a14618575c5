//! [`PhaseError`]: why a phase could not run or be written.

use crate::artifacts::guest_files::ArtifactError;
use crate::campaign::record::StagingError;
use crate::checks::preflight::HostError;
use crate::plan::arg_error::ArgError;
use crate::run::nested_campaign::NestedError;
use crate::run::run_error::RunError;
use std::path::PathBuf;
use truecold_proof::bundle::BundleError;
use truecold_proto::path_io::PathIoError;

/// Why a phase could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("{0} already exists; a tune directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the host")]
    Run(#[source] Box<RunError>),
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the phase plan {} does not parse", path.display())]
    Plan {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the phase plan is not consistent: {0}")]
    PlanInvalid(String),
    #[error("the phase plan is not consistent")]
    Args(#[from] ArgError),
    #[error("writing arm `{arm}`'s bundle")]
    Bundle {
        arm: String,
        #[source]
        source: BundleError,
    },
    #[error("placing {}", path.display())]
    Place {
        path: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error("writing the phase's comparison")]
    Arms(#[source] truecold_proof::arms::ArmsError),
    #[error("the nested harness")]
    Nested(#[source] Box<NestedError>),
    #[error("interrupted (Ctrl-C) during the {0} phase; the phase directory is kept incomplete")]
    Interrupted(&'static str),
    #[error("the phase's staged rows")]
    Staging(#[from] StagingError),
}

impl From<RunError> for PhaseError {
    fn from(e: RunError) -> Self {
        PhaseError::Run(Box::new(e))
    }
}

impl From<HostError> for PhaseError {
    fn from(e: HostError) -> Self {
        RunError::from(e).into()
    }
}
