//! The bisect directory's record (`bisect.json`): what was bisected, the judge's options,
//! every step and its judgement, the result; read, written in canonical bytes, and the
//! path rule of its `SHA256SUMS`.

use crate::schema::Figure;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Clock;

use crate::compare::CompareOptions;
use crate::names::BISECT_FILE;
use crate::schema::{ContractKind, HostKind, HEADLINE};
use crate::sums::{parse_sums_with, SumsError};

/// The record's schema the bench writes: 2, every step an interleaved A/B against the good
/// side and the looks spending α ([`Looks`](crate::bisect::Looks)).
pub const BISECT_SCHEMA: u32 = 2;

/// Schema 1 (still read and verified by its own rule): a commit step one campaign judged
/// against the baseline bundle, every look at the full α.
pub const BISECT_SCHEMA_V1: u32 = 1;

/// The log of the search.
pub const LOG_FILE: &str = "log.txt";

/// Commits: the good side's bundle.
pub const BASELINE_DIR: &str = "baseline";

/// The steps' directories.
pub const STEPS_DIR: &str = "steps";

/// Commits: the culprit's differential profile against its parent ([`CulpritProfile`]):
/// the bundles `profile/parent` and `profile/culprit` (each a campaign with RIP-sampled
/// attribution launches) and, generated from their `attribution.jsonl`,
/// [`PROFILE_TABLE`] and [`PROFILE_FLAME`].
pub const PROFILE_DIR: &str = "profile";

/// The bundle of the last good commit's (the culprit's parent's) launches, under
/// [`PROFILE_DIR`].
pub const PARENT_PROFILE: &str = "parent";

/// The bundle of the first bad commit's launches, under [`PROFILE_DIR`].
pub const CULPRIT_PROFILE: &str = "culprit";

/// The differential profile's table, under [`PROFILE_DIR`].
pub const PROFILE_TABLE: &str = "differential.md";

/// The differential flame graph, under [`PROFILE_DIR`].
pub const PROFILE_FLAME: &str = "differential-flame.svg";

/// What is bisected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BisectKind {
    /// Commits of a kernel git tree (`truecold bisect run` / `step`).
    Commit,
    /// The symbols that differ between two kernel configs (`truecold bisect config`).
    Config,
}

/// The options of [`crate::compare`] a bisect judges with (recorded, so verify recomputes
/// with the same ones).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeOptions {
    pub threshold_pct: f64,
    pub alpha: f64,
    pub min_samples: usize,
    pub max_ci_width_pct: f64,
    pub resamples: usize,
    pub seed: u64,
    /// The headline's figure judged (`--clock`); absent in a record means the total one,
    /// the only one before the parallel clock existed.
    #[serde(default, skip_serializing_if = "Figure::is_total")]
    pub figure: Figure,
}

impl JudgeOptions {
    /// `compare`'s defaults but the minimum sample count, which a bisect sizes with `-n`.
    pub fn with_min_samples(min_samples: usize) -> Self {
        let d = CompareOptions::default();
        JudgeOptions {
            threshold_pct: d.threshold_pct,
            alpha: d.alpha,
            min_samples,
            max_ci_width_pct: d.max_ci_width_pct,
            resamples: d.resamples,
            seed: d.seed,
            figure: d.figure,
        }
    }

    pub fn compare_options(&self) -> CompareOptions {
        self.compare_options_at(self.alpha)
    }

    /// `compare`'s options at the nominal level `alpha` (a look's: [`Looks::alpha`](crate::bisect::Looks::alpha)).
    pub fn compare_options_at(&self, alpha: f64) -> CompareOptions {
        CompareOptions {
            threshold_pct: self.threshold_pct,
            alpha,
            min_samples: self.min_samples,
            max_ci_width_pct: self.max_ci_width_pct,
            resamples: self.resamples,
            seed: self.seed,
            allow_mismatch: false,
            figure: self.figure,
        }
    }

    /// The rule in words (README).
    pub fn describe(&self) -> String {
        let on = match self.figure {
            Figure::Total => "",
            Figure::Parallel => " on the parallel clock",
        };
        format!(
            "`truecold-proof compare`'s rule on {HEADLINE}{on}: bad when the step's median is at \
             least {}% above the good side's with Mann–Whitney p < {} and a 95 % bootstrap \
             interval ({} resamples, seed {}) no wider than {}% of the good median, with at \
             least {} successes a side; good when it is not; otherwise inconclusive",
            self.threshold_pct,
            self.alpha,
            self.resamples,
            crate::seed::hex(self.seed),
            self.max_ci_width_pct,
            self.min_samples
        )
    }
}

/// A step's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Regression,
    NoRegression,
    Inconclusive,
    ContractBroken,
    BuildFailed,
    /// Config: the candidate resolved to the good config (known good, nothing to run).
    SameAsGood,
    /// Config: the candidate resolved to the bad config (known bad, nothing to run).
    SameAsBad,
}

impl StepOutcome {
    /// `git bisect run`'s exit code: 0 good, 1 bad, 125 skip.
    pub fn exit_code(self) -> i32 {
        match self {
            StepOutcome::NoRegression | StepOutcome::SameAsGood => 0,
            StepOutcome::Regression | StepOutcome::SameAsBad => 1,
            StepOutcome::Inconclusive | StepOutcome::ContractBroken | StepOutcome::BuildFailed => {
                125
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepOutcome::Regression => "bad (regressed)",
            StepOutcome::NoRegression => "good (no regression)",
            StepOutcome::Inconclusive => "skip (inconclusive)",
            StepOutcome::ContractBroken => "skip (contract broken)",
            StepOutcome::BuildFailed => "skip (build failed)",
            StepOutcome::SameAsGood => "good (resolves to the good config)",
            StepOutcome::SameAsBad => "bad (resolves to the bad config)",
        }
    }

    /// Whether a campaign ran (the step has a directory).
    pub fn measured(self) -> bool {
        matches!(
            self,
            StepOutcome::Regression
                | StepOutcome::NoRegression
                | StepOutcome::Inconclusive
                | StepOutcome::ContractBroken
        )
    }
}

/// What [`judge`](crate::bisect::judge) found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judgement {
    pub outcome: StepOutcome,
    /// Successful rows of the step's side.
    pub n: usize,
    pub good_p50_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub delta_pct: Option<f64>,
    pub ci95_ns: Option<(i64, i64)>,
    pub p_value: Option<f64>,
    /// One line: why this outcome.
    pub why: String,
    /// Schema 2: the nominal level this look was judged at ([`Looks::alpha`](crate::bisect::Looks::alpha)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// `steps/NN-…` (relative), when a campaign ran.
    pub dir: Option<String>,
    /// Commits: the commit built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Commits: its subject line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Config: the bad config's assignments applied to the good config (`CONFIG_X=y`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
    /// Config: sha256 of the resolved config built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// Launches planned for the step's side (schema 2: for each arm of its A/B).
    pub planned: u64,
    /// Schema 2, a measured step: which look of its commit or candidate it is (1-based;
    /// [`Looks`](crate::bisect::Looks)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look: Option<u32>,
    pub outcome: StepOutcome,
    /// The judgement of a measured step (recomputed by verify).
    pub judgement: Option<Judgement>,
    /// Why, in one line (for a step without a campaign: what happened).
    pub why: String,
    /// Wall time of the step (build, campaign, judgement), seconds.
    pub wall_seconds: u64,
}

/// How the search ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BisectResult {
    /// Commits: the first bad commit; config: none.
    pub first_bad: Option<String>,
    /// Commits: the parent of the first bad commit (the last good one).
    pub last_good: Option<String>,
    /// Config: the smallest set of assignments found to explain the slowdown.
    pub culprits: Vec<String>,
    /// Index (in `steps`) of the step that shows the first bad commit / the culprit set bad.
    pub bad_step: Option<usize>,
    /// Index of the step that shows the last good commit good (the good config's: none).
    pub good_step: Option<usize>,
    /// Config: for each culprit, the index of the step that measured it alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<(String, usize)>,
    /// In words.
    pub summary: String,
    /// Commits: the culprit's differential profile against its parent, attached under
    /// [`PROFILE_DIR`]. Absent: none attached (a search that named no culprit, one run with
    /// `--profile 0`, and every record made before bisect attached one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<CulpritProfile>,
}

/// The culprit's differential profile against its parent: two campaigns, one per kernel,
/// each with `attribution` RIP-sampled attribution launches after its measured launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CulpritProfile {
    pub attribution: u64,
}

impl BisectResult {
    /// A search that ended before it began: the bad side did not measure bad.
    pub fn not_bisected(summary: String) -> Self {
        BisectResult {
            first_bad: None,
            last_good: None,
            culprits: Vec::new(),
            bad_step: None,
            good_step: None,
            effects: Vec::new(),
            summary,
            profile: None,
        }
    }
}

/// `bisect.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BisectFile {
    pub schema: u32,
    pub kind: BisectKind,
    pub host_kind: HostKind,
    pub clock: Clock,
    pub contract: ContractKind,
    pub vcpus: u32,
    pub mem_bytes: u64,
    pub judge: JudgeOptions,
    /// Launches per step, and the most a step grows to when inconclusive.
    pub n: u64,
    pub max_n: u64,
    /// Commits: the tree's path as given; config: the source (tree path or the pinned
    /// package).
    pub source: String,
    /// The good and the bad side (commits or config digests).
    pub good: String,
    pub bad: String,
    pub steps: Vec<Step>,
    /// `None` while a `git bisect run` of single steps is under way.
    pub result: Option<BisectResult>,
    /// The whole search's wall time, seconds (`None` while under way).
    pub wall_seconds: Option<u64>,
    /// The commands that reproduce it.
    pub commands: Vec<String>,
    /// A commit bisect's user's kernel (`--kernel-config` / `--kernel-fragment`): every
    /// commit built from it (olddefconfig per commit) instead of truecold's base fragments;
    /// the file as given is [`crate::kconfig::USER_KERNEL_FILE`] beside `bisect.json`, its
    /// symbols that did not carry over those of the good commit's (the baseline's) config.
    /// Absent: truecold's base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<crate::kconfig::UserKernel>,
}

impl BisectFile {
    /// Whether the record is schema 2 or later: A/B steps and the looks' rule.
    pub fn ab_steps(&self) -> bool {
        self.schema >= BISECT_SCHEMA
    }
}

/// `bisect.json`'s canonical bytes.
pub fn bisect_bytes(f: &BisectFile) -> Vec<u8> {
    // Numbers, strings and enums only: serialisation cannot fail.
    let mut b = serde_json::to_vec_pretty(f).unwrap_or_default();
    b.push(b'\n');
    b
}

/// Why a bisect directory could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    #[error("{} does not parse", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} is not UTF-8", path.display())]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
    #[error(transparent)]
    Io(#[from] truecold_proto::path_io::PathIoError),
    #[error(transparent)]
    Dir(#[from] crate::skeleton::DirError),
    #[error("{step}: {why}")]
    Step { step: String, why: String },
}

/// Reads `dir/bisect.json` (capped).
pub fn read_bisect(dir: &Path) -> Result<BisectFile, BisectError> {
    let p = dir.join(BISECT_FILE);
    let b = crate::skeleton::read_record(&p)?;
    serde_json::from_slice(&b).map_err(|source| BisectError::Json { path: p, source })
}

/// A `SHA256SUMS` name of a bisect directory: up to four components.
pub fn is_valid_bisect_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 4)
}

pub(super) fn parse_bisect_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_bisect_path)
}
