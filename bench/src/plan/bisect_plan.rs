//! The three `truecold bisect` commands, checked once: [`BisectStepPlan`],
//! [`BisectRunPlan`] and [`ConfigBisectPlan`], each with its [`JudgePlan`] (how every step is
//! measured and judged) and, for `run` and `config`, its [`BisectContext`] (the campaign
//! every step runs).

use super::arg_error::ArgError;
use super::kernel_plan::{kernel_config_of, KernelPlan};
use crate::artifacts::own_kernel::OwnKernel;
use crate::cli::{ConfigBisectArgs, ContextArgs, JudgeArgs, RunBisectArgs, StepArgs};
use std::path::{Path, PathBuf};
use truecold_proof::bisect::JudgeOptions;
use truecold_proto::limits::{GuestMem, Vcpus};

/// The fewest launches a step may plan.
pub const MIN_N: u64 = 3;

/// How every step is measured and judged, sizes checked.
#[derive(Clone, Debug, PartialEq)]
pub struct JudgePlan {
    /// Launches per step.
    pub n: u64,
    /// The most launches an inconclusive step grows to (`--max-n`, else 4 × n).
    pub max_n: u64,
    /// `--max-n` as given (a step under `git bisect run` is passed it only then).
    pub max_n_given: Option<u64>,
    /// `compare`'s options with `--threshold-pct`, `--alpha` and the minimum sample count n.
    pub options: JudgeOptions,
    /// The kernels (built under out/bisect-kernels unless `--kernel-dir`).
    pub paths: KernelPlan,
}

impl JudgePlan {
    pub fn from_cli(j: &JudgeArgs) -> Result<JudgePlan, ArgError> {
        let max_n = j.max_n.unwrap_or(j.n.saturating_mul(4));
        if j.n < MIN_N || max_n < j.n {
            return Err(ArgError::BisectSizes { n: j.n, max_n });
        }
        let mut options = JudgeOptions::with_min_samples(j.n as usize);
        options.threshold_pct = j.threshold_pct;
        options.alpha = j.alpha;
        options.figure = j.clock;
        Ok(JudgePlan {
            n: j.n,
            max_n,
            max_n_given: j.max_n,
            options,
            paths: KernelPlan::from_cli(&j.paths, crate::cli::BISECT_KERNEL_DIR),
        })
    }

    /// The flags a `step` needs to judge like this (for `git bisect run … step`); every path
    /// absolute: `git bisect run` runs the step in the kernel tree, not here.
    pub fn step_flags(&self) -> Vec<String> {
        let mut v = vec![
            "-n".to_string(),
            self.n.to_string(),
            "--threshold-pct".into(),
            self.options.threshold_pct.to_string(),
            "--alpha".into(),
            self.options.alpha.to_string(),
        ];
        if let Some(m) = self.max_n_given {
            v.extend(["--max-n".into(), m.to_string()]);
        }
        if !self.options.figure.is_total() {
            v.extend(["--clock".into(), self.options.figure.name().into()]);
        }
        if let Some(p) = &self.paths.vmm {
            v.extend(["--vmm".into(), abs(p)]);
        }
        v.extend([
            "--guest-dir".into(),
            abs(&self.paths.guest_dir),
            "--kernel-dir".into(),
            abs(&self.paths.kernel_root),
            "--kernel-build".into(),
            abs(&self.paths.script),
        ]);
        v
    }
}

/// `path` made absolute against the current directory (as given when that fails).
pub fn abs(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The campaign every step of `run` and `config` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BisectContext {
    /// In the nested harness (virtual clock) instead of this host's /dev/kvm.
    pub nested: bool,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
}

impl BisectContext {
    pub fn from_cli(c: &ContextArgs) -> BisectContext {
        BisectContext {
            nested: c.nested,
            vcpus: c.guest.vcpus,
            mem: c.guest.mem,
        }
    }
}

/// `truecold bisect step`.
#[derive(Clone, Debug, PartialEq)]
pub struct BisectStepPlan {
    /// The good side: a bundle, or a bisect directory (its baseline).
    pub baseline: PathBuf,
    /// The kernel git work tree whose checkout is built.
    pub kernel_tree: PathBuf,
    /// The bisect directory the step is appended to.
    pub dir: PathBuf,
    /// The user's kernel every commit is built from (`--kernel-config` /
    /// `--kernel-fragment`; a directory's record names it once it has one).
    pub own_kernel: Option<OwnKernel>,
    pub judge: JudgePlan,
}

impl BisectStepPlan {
    pub fn from_cli(a: &StepArgs) -> Result<BisectStepPlan, ArgError> {
        Ok(BisectStepPlan {
            baseline: a.baseline.clone(),
            kernel_tree: a.kernel_tree.clone(),
            dir: a.dir.clone(),
            own_kernel: kernel_config_of(&a.own_kernel, None)?,
            judge: JudgePlan::from_cli(&a.judge)?,
        })
    }
}

/// `truecold bisect run`.
#[derive(Clone, Debug, PartialEq)]
pub struct BisectRunPlan {
    /// The kernel git work tree.
    pub kernel_tree: PathBuf,
    /// A commit that boots fast enough.
    pub good: String,
    /// A later commit that boots slower.
    pub bad: String,
    /// The bisect directory (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    /// The user's kernel every commit is built from (`--kernel-config` /
    /// `--kernel-fragment`; `None`: truecold's base fragments).
    pub own_kernel: Option<OwnKernel>,
    pub context: BisectContext,
    pub judge: JudgePlan,
    /// The attribution launches of each side of the culprit's differential profile
    /// (`--profile`; 0: none attached).
    pub profile: u64,
}

impl BisectRunPlan {
    pub fn from_cli(a: &RunBisectArgs) -> Result<BisectRunPlan, ArgError> {
        Ok(BisectRunPlan {
            kernel_tree: a.kernel_tree.clone(),
            good: a.good.clone(),
            bad: a.bad.clone(),
            out: a.out.clone(),
            own_kernel: kernel_config_of(&a.own_kernel, None)?,
            context: BisectContext::from_cli(&a.context),
            judge: judge_for(&a.judge, &a.context)?,
            profile: a.profile,
        })
    }
}

/// `truecold bisect config`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigBisectPlan {
    /// The good kernel config.
    pub good: PathBuf,
    /// The bad kernel config.
    pub bad: PathBuf,
    /// A kernel git work tree to build (`None`: the pinned linux-source-6.12).
    pub kernel_tree: Option<PathBuf>,
    /// The bisect directory (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    pub context: BisectContext,
    pub judge: JudgePlan,
}

impl ConfigBisectPlan {
    pub fn from_cli(a: &ConfigBisectArgs) -> Result<ConfigBisectPlan, ArgError> {
        Ok(ConfigBisectPlan {
            good: a.good.clone(),
            bad: a.bad.clone(),
            kernel_tree: a.kernel_tree.clone(),
            out: a.out.clone(),
            context: BisectContext::from_cli(&a.context),
            judge: judge_for(&a.judge, &a.context)?,
        })
    }
}

/// The judge of a bisect whose steps run in `context`: `--clock parallel` only in the
/// nested harness, the one host that keeps a parallel clock.
fn judge_for(j: &JudgeArgs, context: &ContextArgs) -> Result<JudgePlan, ArgError> {
    if !j.clock.is_total() && !context.nested {
        return Err(ArgError::ParallelNeedsNested);
    }
    JudgePlan::from_cli(j)
}

/// A bisect command from its words (tests: `truecold bisect <words>`).
#[cfg(test)]
pub(crate) fn bisect_words(words: &[&str]) -> Result<crate::cli::BisectCmd, clap::Error> {
    use clap::Parser;
    let mut v = vec!["truecold", "bisect"];
    v.extend_from_slice(words);
    match crate::cli::Cli::try_parse_from(v)?.cmd {
        crate::cli::Cmd::Bisect(b) => Ok(b.cmd),
        _ => Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidSubcommand,
            "not `truecold bisect`",
        )),
    }
}
