//! The fleet layer's error: why `truecold fleet` submitted, ran or gathered nothing.

use super::slurm::ClusterError;
use crate::artifacts::guest_files::ArtifactError;
use crate::plan::arg_error::ArgError;
use crate::run::run_error::RunError;
use crate::tune::phase_error::PhaseError;
use crate::tune::tune_error::TuneError;
use std::path::PathBuf;
use truecold_proto::path_io::PathIoError;

/// Why a fleet command did nothing (or could not finish).
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("bad arguments")]
    Args(#[from] ArgError),
    #[error("the cluster")]
    Cluster(#[from] ClusterError),
    #[error(
        "{0} already exists: a fleet directory is made once (--resume submits its missing shards)"
    )]
    Exists(PathBuf),
    #[error("{0} holds no fleet (no fleet.json): `truecold fleet submit` makes one")]
    NotAFleet(PathBuf),
    #[error("{dir}: {why}")]
    ForeignPlan { dir: PathBuf, why: String },
    #[error("{0}: its fleet.json does not read as a plan")]
    Plan(PathBuf, #[source] truecold_proof::fleet::FleetError),
    #[error("no shard index: give --task, or run under a Slurm array (SLURM_ARRAY_TASK_ID)")]
    NoTask,
    #[error("task {index}: the plan has {shards} shard(s)")]
    NoSuchShard { index: u64, shards: usize },
    #[error(
        "shard(s) {} still pending or running: resubmitting would run them twice",
        .0.join(", ")
    )]
    StillRunning(Vec<String>),
    #[error(
        "{} shard(s) not written yet:\n{}\n(`truecold fleet submit --resume` runs them again; \
         every written shard is kept)",
        .0.len(),
        .0.iter().map(|(n, s)| format!("  {n}: {s}")).collect::<Vec<_>>().join("\n")
    )]
    ShardsMissing(Vec<(String, String)>),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the shard's campaign")]
    Run(#[from] RunError),
    #[error("the shard's phase")]
    Phase(#[from] PhaseError),
    #[error("the shard's knob kernel")]
    Tune(#[from] TuneError),
    #[error("the shard's guest")]
    Artifact(#[from] ArtifactError),
    #[error("writing the fleet directory")]
    Write(#[from] truecold_proof::fleet::FleetError),
    #[error("placing shard `{shard}`")]
    Place {
        shard: String,
        #[source]
        source: truecold_proof::bundle::BundleError,
    },
    #[error("--against {dir}: {why}")]
    Against { dir: PathBuf, why: String },
    #[error("the merge rule")]
    Merge(#[from] truecold_proof::fleet::MergeError),
    #[error("the bisect")]
    Bisect(#[source] Box<crate::bisect::bisect_error::BisectRunError>),
    #[error("the kernel build")]
    Kernel(#[from] crate::artifacts::kernel_build::KernelError),
}

impl FleetError {
    /// `truecold fleet`'s exit status for this error (its `--help` lists them).
    pub fn exit_code(&self) -> u8 {
        match self {
            FleetError::Args(_) => crate::cli::EXIT_USAGE,
            FleetError::Run(e) if e.usage().is_some() => crate::cli::EXIT_USAGE,
            FleetError::Bisect(e) if e.usage().is_some() => crate::cli::EXIT_USAGE,
            FleetError::Cluster(_) => 4,
            FleetError::ShardsMissing(_) | FleetError::StillRunning(_) => 3,
            _ => 1,
        }
    }
}
