//! `truecold bisect`: which commit of a kernel tree, or which symbols of a kernel config,
//! made a true-cold boot slower.
//!
//! - `step` is what `git bisect run` calls: build the tree's checkout (base fragments on its
//!   tinyconfig, `kernel-config/build.sh` with `TRUECOLD_KERNEL_TREE`, incremental and cached
//!   by commit), run an n-launch campaign with the baseline's contract, judge it against the
//!   baseline ([`truecold_proof::bisect::judge`]: `compare`'s rule), and exit 0 (good), 1
//!   (bad) or 125 (skip: the build failed, strict-ready broke, or still inconclusive after n
//!   grew to its cap). A setup error (no baseline, another host kind) exits 200, which stops
//!   `git bisect run`. Every step is appended to the bisect directory, which verifies after
//!   each one.
//! - `run` wraps a whole `git bisect` session: the good commit's baseline, a check that the
//!   bad commit is bad, `git bisect start/run/log/reset` with `step` as the judge, and the
//!   result (first bad commit, last good commit) written into the directory. The tree is left
//!   on the commit it was on.
//! - `config` searches the assignments that differ between two resolved configs for the
//!   smallest set that explains the slowdown (delta debugging, ddmin): each candidate is the
//!   good config with a subset of the bad one's assignments, resolved by olddefconfig, built
//!   incrementally, and judged in an interleaved A/B against the good kernel (one L1 boot per
//!   A/B in the nested harness); a candidate that does not build or breaks strict-ready is
//!   unresolved ([`config_bisect`]).
//!
//! Every step uses the clock of the host it runs on (virtual in the nested harness, wall on
//! hardware KVM); the baseline's clock is every step's, never mixed.
//!
//! The parts: [`commit_bisect`] (`step` and `run`), [`config_bisect`] (`config`),
//! [`bisect_steps`] (what every step of both shares: the kernel A/B, the step directory,
//! the record's guest, the host), [`bisect_error`].

pub mod bisect_error;
pub mod bisect_steps;
pub mod commit_bisect;
pub mod config_bisect;
