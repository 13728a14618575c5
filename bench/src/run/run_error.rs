//! The campaign layer's error: why `truecold run` (and the campaigns tune and bisect run
//! through it) could not run or write a bundle.

use super::nested_campaign::NestedError;
use crate::artifacts::guest_files::ArtifactError;
use crate::artifacts::own_kernel::OwnKernelError;
use crate::campaign::execute::ExecuteError;
use crate::campaign::record::StagingError;
use crate::campaign::schedule::ScheduleError;
use crate::checks::preflight::{HostError, DROP_CACHES};
use crate::engines::engines_error::EnginesError;
use crate::plan::arg_error::ArgError;
use crate::terminal::interrupt::InstallError;
use std::path::PathBuf;
use truecold_proof::bundle::BundleError;
use truecold_proto::path_io::PathIoError;

/// Why a campaign could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bad arguments")]
    Args(#[from] ArgError),
    #[error("the engine's version")]
    EngineVersion(#[source] truecold_engine::version::VersionError),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error("--nested")]
    Nested(#[from] NestedError),
    #[error(transparent)]
    ParallelClock(#[from] crate::campaign::parallel::ClockMissing),
    #[error("{0} already exists; a bundle is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("Ctrl-C handling")]
    Interrupt(#[from] InstallError),
    #[error("scheduling")]
    Schedule(#[from] ScheduleError),
    #[error("the guest kernel config")]
    Config(#[source] PathIoError),
    #[error("your kernel (--kernel-config / --kernel-fragment / --arm-kernel-config)")]
    OwnKernel(#[from] OwnKernelError),
    #[error(
        "your kernel (--kernel-config / --kernel-fragment) needs a Linux boot, and this host's /dev/kvm is kvm_pvm (no unmodified \
         Linux boots on it): add --nested to boot your kernel in the nested harness"
    )]
    OwnKernelOnPvm,
    #[error("writing the bundle")]
    Bundle(#[from] BundleError),
    #[error(
        "cannot write the bundle to {dest}; bundle saved instead at {saved} (it verifies: \
         move it where it belongs)"
    )]
    SavedElsewhere {
        dest: PathBuf,
        saved: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error(
        "--drop-caches needs root (writing /proc/sys/vm/drop_caches); this process runs as uid {0}"
    )]
    DropCachesNotRoot(u32),
    #[error("dropping the host page cache (sync; 3 > {DROP_CACHES})")]
    DropCaches(#[source] std::io::Error),
    #[error("the engines campaign")]
    Engines(#[from] EnginesError),
    #[error("the parity campaign: {0}")]
    Parity(String),
    #[error("the campaign's staged rows")]
    Staging(#[from] StagingError),
}

impl From<ExecuteError> for RunError {
    fn from(e: ExecuteError) -> Self {
        match e {
            ExecuteError::Schedule(e) => RunError::Schedule(e),
            ExecuteError::Staging(e) => RunError::Staging(e),
        }
    }
}

impl RunError {
    /// The argument error this is, when it is one (a flag combination the plan refuses):
    /// `truecold` exits 125 for it, as for any usage error.
    pub fn usage(&self) -> Option<&ArgError> {
        match self {
            RunError::Args(e) => Some(e),
            _ => None,
        }
    }
}
