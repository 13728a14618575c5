//! [`TuneError`]: why a tune could not run or be written.

use super::phase_error::PhaseError;
use crate::artifacts::guest_files::ArtifactError;
use crate::artifacts::kernel_build::KernelError;
use crate::artifacts::own_kernel::OwnKernelError;
use crate::checks::preflight::HostError;
use crate::plan::arg_error::ArgError;
use crate::run::run_error::RunError;
use std::path::PathBuf;
use truecold_proof::bundle::BundleError;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::Knob;

/// Why a tune could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// A check of the plan that needs the guest or the noise (a `--knobs` that does not
    /// apply to the guest found on this host, a `--budget` too small for the rounds).
    #[error(transparent)]
    Plan(#[from] ArgError),
    #[error("--noise-from {}: {why}", path.display())]
    NoiseBundle { path: PathBuf, why: String },
    #[error("the screen's rounds are neither given (-n) nor sized from a noise")]
    Sizing,
    #[error(
        "--budget {budget}: the pilot alone makes {launches} launches (--pilot-rounds × the \
         screen's arms); give -n, or a larger budget"
    )]
    PilotOverBudget { budget: u64, launches: u64 },
    #[error("{0} already exists; a tune directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the kernel for {knobs}")]
    Kernel {
        knobs: String,
        #[source]
        source: KernelError,
    },
    #[error("the host")]
    Run(#[source] Box<RunError>),
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("placing {}", path.display())]
    Place {
        path: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error("the screen phase in {} does not verify: {reasons}", path.display())]
    PhaseInvalid { path: PathBuf, reasons: String },
    #[error("writing the tune directory")]
    Tune(#[source] truecold_proof::tune::TuneError),
    #[error(transparent)]
    Phase(#[from] PhaseError),
    #[error("your kernel")]
    OwnKernel(#[from] OwnKernelError),
    #[error(
        "--knobs {knobs}: your kernel's resolved config ({config}) already sets every symbol of \
         the fragment, so the arm would measure your kernel again: leave it out of --knobs"
    )]
    KnobAlreadySet { knobs: String, config: PathBuf },
    #[error(
        "knob `{knob}` did not take on your kernel: olddefconfig did not keep its fragment \
         ({lines}; resolved config {}): leave it out of --knobs",
        config.display()
    )]
    KnobDidNotTake {
        knob: Knob,
        lines: String,
        config: PathBuf,
    },
    #[error("no knob left to tune: your kernel already sets every Kconfig knob of --knobs")]
    NoKnobLeft,
    #[error("proposing knobs")]
    Propose(#[from] super::propose::ProposeError),
    #[error("the attribution campaign {} does not verify: {why}", path.display())]
    AttributionInvalid { path: PathBuf, why: String },
}

impl TuneError {
    /// The argument error this is, when it is one (`--knobs`, `--budget`, …): exit 125.
    pub fn usage(&self) -> Option<&ArgError> {
        match self {
            TuneError::Plan(e) => Some(e),
            _ => None,
        }
    }
}

impl From<HostError> for TuneError {
    fn from(e: HostError) -> Self {
        TuneError::Run(Box::new(RunError::from(e)))
    }
}
