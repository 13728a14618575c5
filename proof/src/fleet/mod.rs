//! A fleet directory (`fleet.json`): one campaign, one tune's screen, or one wave of a k-way
//! commit bisect, fanned out over a Slurm cluster as job arrays (`truecold fleet`,
//! docs/fleet.md) and gathered.
//!
//! ```text
//! fleet.json            the plan (FleetPlan): the command, each shard's arguments, seed and
//!                       launches or knob; the partition, exclusivity and task memory
//! submit.sh             the batch script every task ran
//! shards/<name>/        each shard: a bundle (a campaign's range of launches), a tune
//!                       phase's multi-arm directory (one knob beside its own baseline), a
//!                       Kconfig knob's build (build.json, the kernel's config), or a
//!                       bisect directory (the wave's baseline, or one probe's step)
//! tasks/<name>.json     the task that wrote it (TaskRecord): job, array task, node, the
//!                       plan's digest
//! logs/                 Slurm's output of every task attempt
//! README.md, SHA256SUMS over every file of the tree
//! ```
//!
//! `verify` checks the plan, the tree's sums, every shard with its own kind's verifier, each
//! shard against the plan (launches, seed, clock, inputs alike across shards) and each task
//! record against the plan it ran under ([`check`]). A shard's campaign starts fresh (its own
//! L1 in the nested harness), so a fleet's shards are not the launches of one long
//! campaign: [`merge`] measures how far they are.

pub mod bisect;
pub mod check;
pub mod merge;
pub mod model;
pub mod write;

pub use bisect::*;
pub use check::*;
pub use merge::*;
pub use model::*;
pub use write::*;

use std::path::Path;

use crate::kind::{DirKind, Kind};
use crate::verdict::{Verdict, VerifyOptions};

/// A fleet directory: its implementation of [`DirKind`].
pub struct FleetDir;

impl DirKind for FleetDir {
    const KIND: Kind = Kind::Fleet;
    type Error = FleetError;

    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict {
        verify_fleet_dir(dir, opts)
    }

    fn is_generated(_dir: &Path, name: &str) -> bool {
        is_regenerated(name)
    }

    fn regenerate(dir: &Path) -> Result<Vec<String>, FleetError> {
        regenerate_fleet(dir)
    }
}

#[cfg(test)]
mod tests;
