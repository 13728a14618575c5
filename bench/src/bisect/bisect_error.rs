//! [`BisectRunError`]: why a bisect could not run (a step's own verdicts are not errors).

use crate::artifacts::kernel_build::KernelError;
use crate::artifacts::own_kernel::OwnKernelError;
use crate::plan::arg_error::ArgError;
use crate::run::run_error::RunError;
use crate::tune::phase_error::PhaseError;
use std::path::{Path, PathBuf};
use truecold_proof::bisect::{BisectError, BISECT_SCHEMA};
use truecold_proto::path_io::PathIoError;

/// Why a bisect could not run (a step's own verdicts are not errors).
#[derive(Debug, thiserror::Error)]
pub enum BisectRunError {
    /// The command line (`-n`, `--max-n`).
    #[error(transparent)]
    Plan(#[from] ArgError),
    #[error("{0} already exists; a bisect directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the baseline {}: {why}", path.display())]
    Baseline { path: PathBuf, why: String },
    #[error(
        "{} is a bisect directory of schema {schema} (each step one campaign against the \
         baseline); a step now appends an A/B of schema {}: continue in a new --dir",
        dir.display(),
        BISECT_SCHEMA
    )]
    OldSchema { dir: PathBuf, schema: u32 },
    #[error("{} holds another baseline than {}", dir.display(), baseline.display())]
    OtherBaseline { dir: PathBuf, baseline: PathBuf },
    #[error("`git {args}` in {}: {why}", tree.display())]
    Git {
        tree: PathBuf,
        args: String,
        why: String,
    },
    #[error("the kernel tree {} has uncommitted changes to tracked files; commit or stash them", .0.display())]
    Dirty(PathBuf),
    #[error("the {0} side's kernel")]
    Kernel(&'static str, #[source] KernelError),
    #[error("the campaign")]
    Run(#[source] Box<RunError>),
    #[error("the A/B")]
    Phase(#[source] Box<PhaseError>),
    #[error("the bisect directory")]
    Record(#[source] BisectError),
    #[error("judging {}", path.display())]
    Judge {
        path: PathBuf,
        #[source]
        source: truecold_proof::bisect::JudgeError,
    },
    #[error("the bad side is not slower than the good one ({0}): nothing to bisect")]
    NotBad(String),
    #[error("the two configs resolve to the same kernel config: nothing to bisect")]
    SameConfig,
    #[error(transparent)]
    Io(#[from] PathIoError),
    /// A commit's kernel that could not be had from its source (a step skips it).
    #[error("{0}")]
    CommitBuild(String),
    #[error("your kernel")]
    OwnKernel(#[from] OwnKernelError),
    #[error(
        "{} builds every commit from {recorded}, not {given}: continue without \
         --kernel-config/--kernel-fragment, or in a new --dir",
        dir.display()
    )]
    OtherKernel {
        dir: PathBuf,
        recorded: String,
        given: String,
    },
    #[error("the campaign wrote {} but it does not verify: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

impl BisectRunError {
    /// The argument error this is, when it is one (`-n`, `--max-n`, …): exit 125 for `bisect
    /// run` and `bisect config`. An argument error of a record read back from a directory is
    /// wrapped in a campaign's error, not this.
    pub fn usage(&self) -> Option<&ArgError> {
        match self {
            BisectRunError::Plan(e) => Some(e),
            _ => None,
        }
    }
}

pub(super) fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BisectRunError {
    let at = PathIoError::at(op, path);
    move |source| BisectRunError::Io(at(source))
}
