//! [`ReplayPlan`]: `truecold replay`'s arguments, checked once.

use super::arg_error::ArgError;
use crate::cli::ReplayArgs;
use std::path::PathBuf;

/// A replay, checked: which record, where its bundle goes, the inputs it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    /// The bundle, or the tune, bisect or engines directory holding it.
    pub dir: PathBuf,
    /// The bundle's path inside `dir` (`--arm`); `None`: `dir` is the bundle.
    pub arm: Option<String>,
    /// The replay's bundle (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    pub vmm: Option<PathBuf>,
    pub guest_dir: Option<PathBuf>,
    /// Check the inputs only.
    pub check: bool,
    pub json: bool,
}

/// The deepest `--arm` path: a tune's `<phase>/<arm>`, a bisect's `steps/<step>`, an engines
/// directory's `<engine>`, a bisect's kernel A/B `steps/<step>/<arm>`.
pub const ARM_LEVELS: usize = 3;

impl ReplayPlan {
    pub fn from_cli(a: &ReplayArgs) -> Result<ReplayPlan, ArgError> {
        if let Some(arm) = &a.arm {
            if !truecold_proof::names::is_valid_path(arm, ARM_LEVELS) {
                return Err(ArgError::ReplayArm(arm.clone()));
            }
        }
        Ok(ReplayPlan {
            dir: a.dir.clone(),
            arm: a.arm.clone(),
            out: a.out.clone(),
            vmm: a.vmm.clone(),
            guest_dir: a.guest_dir.clone(),
            check: a.check,
            json: a.json,
        })
    }
}
