//! `truecold bisect`: the verifiable bisect directory and the one rule every step is judged
//! by (the bench calls [`judge_look`] while it bisects, the verifier to recompute every step).
//!
//! ```text
//! <bisect>/bisect.json   what was bisected (commits of a kernel tree, or the symbols between
//!                        two kernel configs), on which host, clock and contract, the judge's
//!                        options, every step and the result
//! <bisect>/README.md     host kind, clock, contract, the rule, the steps table, the result
//! <bisect>/log.txt       `git bisect log` (commits) or the delta-debugging log (config)
//! <bisect>/baseline/     commits: the good side's bundle (its kernel is every step's arm
//!                        `good`; schema 1: the bundle every step is compared with)
//! <bisect>/steps/NN-…/   one interleaved A/B ([`crate::arms`]: arms `good` and `candidate`)
//!                        per look of a step (schema 1 commit steps: one bundle per step)
//! <bisect>/SHA256SUMS    every file under <bisect>
//! ```
//!
//! # A step's verdict ([`judge_look`]; schema 1: [`judge`])
//! 1. **skip: contract broken** — the step's side has a failed row (error kinds counted):
//!    a kernel that does not reach strict-ready is never called good or bad;
//! 2. otherwise [`crate::compare::compare_bundles`] with the recorded options, the good arm
//!    as A, at the look's level α/K ([`Looks`]; schema 1: the full α): regressed → **bad**
//!    (exit 1), no regression → **good** (exit 0), inconclusive → the next look, if one is
//!    left, else **skip** (exit 125).
//!
//! Steps that did not run a campaign (the kernel did not build; in config mode a candidate
//! whose resolved config is the good or the bad one) carry no directory and say why.
//!
//! # The verifier ([`verify_bisect_dir`]; [`crate::verify_dir`] recognises `bisect.json`)
//! `bisect.json` parses (schema 1 or 2) and is in the writer's canonical bytes; the baseline
//! (commits) and every step directory verify; schema 2 and config steps hold both arms of a
//! kernel A/B whose order interleaves them over the planned rounds, a schema-2 commit step's
//! good arm booting the baseline's kernel; schema 2's looks follow [`Looks`]
//! (`check_looks`); each step's outcome and figures equal the recomputation from the
//! verified rows; the result names a bad step (commits: the first bad commit's; config: the
//! culprit set's) and, when it names one, a good one; `README.md` is byte for byte what the
//! record gives; `SHA256SUMS` covers every file.

mod check;
mod judge;
mod looks;
mod model;
mod readme;
mod write;

use std::path::Path;

use crate::kind::{DirKind, Kind};
use crate::verdict::{Verdict, VerifyOptions};

pub use check::*;
pub use judge::*;
pub use looks::Looks;
pub use model::*;
pub use readme::*;
pub use write::*;

pub use crate::names::{CANDIDATE_ARM, GOOD_ARM};

/// A bisect directory: its implementation of [`DirKind`], which [`crate::verify`]
/// dispatches to.
pub struct BisectDir;

impl DirKind for BisectDir {
    const KIND: Kind = Kind::Bisect;
    type Error = BisectError;

    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict {
        verify_bisect_dir(dir, opts)
    }

    fn is_generated(_dir: &Path, name: &str) -> bool {
        is_regenerated(name)
    }

    fn regenerate(dir: &Path) -> Result<Vec<String>, BisectError> {
        regenerate_bisect(dir)
    }
}
