//! The replay layer's error: why `truecold replay` ran nothing, or could not judge what it
//! ran.

use crate::artifacts::guest_files::ArtifactError;
use crate::plan::arg_error::ArgError;
use crate::run::run_error::RunError;
use std::path::PathBuf;

/// Why a replay ran nothing or could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("bad arguments")]
    Args(#[from] ArgError),
    #[error(
        "{dir} is {what}: name the bundle to replay with --arm PATH (one of: {})",
        if bundles.is_empty() { "none found".to_string() } else { bundles.join(", ") }
    )]
    ArmNeeded {
        dir: PathBuf,
        what: &'static str,
        bundles: Vec<String>,
    },
    #[error("--arm {arm}: {dir} holds no bundle there")]
    NoSuchArm { dir: PathBuf, arm: String },
    #[error("--arm applies to a tune, bisect or engines directory; {0} is a bundle")]
    ArmOfBundle(PathBuf),
    #[error(
        "{dir} does not verify, so its record cannot be trusted to replay (truecold-proof \
         verify {dir} lists every reason); first: {first}"
    )]
    Unverified { dir: PathBuf, first: String },
    #[error("{dir}: cmdline.txt cannot be read as a record: {why}")]
    Record { dir: PathBuf, why: String },
    #[error("{dir}: the recorded run line is not one this truecold replays: {why}")]
    NotReplayable { dir: PathBuf, why: String },
    #[error("an input of the replay")]
    Artifact(#[from] ArtifactError),
    #[error("the nested harness's inputs")]
    Nested(#[from] truecold_nested::NestedError),
    #[error("the nested harness's facts (L0 QEMU, L1 kernel)")]
    Facts(#[from] truecold_nested::HarnessFactsError),
    #[error("the replay's campaign")]
    Run(#[from] RunError),
    #[error("the replay ran, but its bundle holds no arm `{0}`")]
    NoReplayedArm(String),
    #[error("judging the replay")]
    Judge(#[from] truecold_proof::replay::ReplayJudgeError),
}

impl ReplayError {
    /// The argument error this is, when it is one (`truecold` exits 125 for it).
    pub fn usage(&self) -> Option<&ArgError> {
        match self {
            ReplayError::Args(e) => Some(e),
            ReplayError::Run(e) => e.usage(),
            _ => None,
        }
    }
}
