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
//! ([`check_looks`]); each step's outcome and figures equal the recomputation from the
//! verified rows; the result names a bad step (commits: the first bad commit's; config: the
//! culprit set's) and, when it names one, a good one; `README.md` is byte for byte what the
//! record gives; `SHA256SUMS` covers every file.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Clock;

use crate::arms::verify_arms_or_bundle;
use crate::compare::{compare_verified, CompareOptions, Outcome};
use crate::fmt::p_text;
use crate::fmt::{ms, opt_ms};
use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::kind::{DirKind, Kind};
use crate::names::README_FILE;
use crate::names::SUMS_FILE;
use crate::schema::{ContractKind, HostKind, HEADLINE};
use crate::skeleton::check_signature;
use crate::sums::{parse_sums_with, SumsError};
use crate::verdict::{Check, Verdict, VerifyOptions};

/// A bundle or an A/B directory of the record (the baseline, a step, a judged side),
/// verified as [`verify_arms_or_bundle`] does.
fn verify_dir(dir: &Path) -> Verdict {
    verify_arms_or_bundle(dir, &VerifyOptions::default())
}

mod looks;
pub use looks::Looks;

/// The record's schema the bench writes: 2, every step an interleaved A/B against the good
/// side and the looks spending α ([`Looks`]).
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
/// The bench's path to [`crate::names::BISECT_FILE`].
pub use crate::names::BISECT_FILE;
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
        }
    }

    pub fn compare_options(&self) -> CompareOptions {
        self.compare_options_at(self.alpha)
    }

    /// `compare`'s options at the nominal level `alpha` (a look's: [`Looks::alpha`]).
    pub fn compare_options_at(&self, alpha: f64) -> CompareOptions {
        CompareOptions {
            threshold_pct: self.threshold_pct,
            alpha,
            min_samples: self.min_samples,
            max_ci_width_pct: self.max_ci_width_pct,
            resamples: self.resamples,
            seed: self.seed,
            allow_mismatch: false,
        }
    }

    /// The rule in words (README).
    pub fn describe(&self) -> String {
        format!(
            "`truecold-proof compare`'s rule on {HEADLINE}: bad when the step's median is at \
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

/// What [`judge`] found.
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
    /// Schema 2: the nominal level this look was judged at ([`Looks::alpha`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

/// Why two sides could not be judged at all.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("the {side} side is not a valid bundle: {reasons}")]
    Invalid { side: &'static str, reasons: String },
    #[error("the sides cannot be compared")]
    Compare(#[source] crate::compare::CompareError),
}

fn verified(side: &'static str, v: &Verdict, dir: &Path) -> Result<(), JudgeError> {
    if v.is_valid() && v.result.is_some() && v.samples.is_some() {
        return Ok(());
    }
    Err(JudgeError::Invalid {
        side,
        reasons: v.render(dir, 2).trim().replace('\n', "; "),
    })
}

/// Judges the bundle `step` against the good side `good` at the recorded α (schema 1; see
/// the module doc).
pub fn judge(good: &Path, step: &Path, o: &JudgeOptions) -> Result<Judgement, JudgeError> {
    judge_with(good, step, &o.compare_options())
}

/// Judges one look of a step (schema 2): the arms `good` and `step` of its A/B by
/// `compare`'s rule at the look's nominal level α/K ([`Looks::alpha`]), recorded in the
/// judgement.
pub fn judge_look(
    good: &Path,
    step: &Path,
    o: &JudgeOptions,
    looks: &Looks,
) -> Result<Judgement, JudgeError> {
    let alpha = looks.alpha(o.alpha);
    let mut j = judge_with(good, step, &o.compare_options_at(alpha))?;
    j.alpha = Some(alpha);
    Ok(j)
}

fn judge_with(good: &Path, step: &Path, o: &CompareOptions) -> Result<Judgement, JudgeError> {
    let (vg, vs) = (verify_dir(good), verify_dir(step));
    verified("good", &vg, good)?;
    verified("step", &vs, step)?;
    let samples = vs.samples.as_deref().unwrap_or_default();
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for s in samples.iter().filter(|s| !s.ok) {
        let k = match s.error_kind.as_str() {
            "" => "unknown".to_string(),
            k => k.to_string(),
        };
        *kinds.entry(k).or_default() += 1;
    }
    let c = compare_verified(&vg, &vs, o).map_err(JudgeError::Compare)?;
    let Some(m) = c.metrics.first() else {
        return Err(JudgeError::Invalid {
            side: "step",
            reasons: "no headline to compare".into(),
        });
    };
    let mut j = Judgement {
        outcome: match c.outcome {
            Outcome::Regression => StepOutcome::Regression,
            Outcome::NoRegression => StepOutcome::NoRegression,
            Outcome::Inconclusive => StepOutcome::Inconclusive,
        },
        n: m.b.n,
        good_p50_ns: m.a.p50,
        p50_ns: m.b.p50,
        delta_pct: m.delta_pct,
        ci95_ns: m.ci95_ns,
        p_value: m.p_value,
        why: m.why.clone(),
        alpha: None,
    };
    if !kinds.is_empty() {
        j.outcome = StepOutcome::ContractBroken;
        j.why = format!(
            "breaks strict-ready: {}",
            kinds
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(j)
}

/// Config mode: the good and candidate arms' bundles of an A/B directory.
pub fn ab_sides(step: &Path) -> (PathBuf, PathBuf) {
    (step.join(GOOD_ARM), step.join(CANDIDATE_ARM))
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
    /// [`Looks`]).
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
    /// The looks every step of the record plans (schema 2).
    pub fn looks(&self) -> Looks {
        Looks::new(self.n, self.max_n)
    }

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

/// README.md of a bisect directory, from its record alone.
pub fn readme(f: &BisectFile) -> String {
    let mut s = String::new();
    let what = match f.kind {
        BisectKind::Commit => "commits of a kernel tree",
        BisectKind::Config => "the symbols between two kernel configs",
    };
    let _ = writeln!(s, "# truecold bisect: {what}\n");
    let _ = writeln!(s, "- host kind: `{}`", f.host_kind.as_str());
    let _ = writeln!(s, "- clock: {}", f.clock.describe());
    if f.clock == Clock::Virtual {
        let _ = writeln!(
            s,
            "  (a reproducible cost model of the boot path, not a hardware latency)"
        );
    }
    let _ = writeln!(
        s,
        "- contract: {} ({} vCPU, {}); every step on this clock, never mixed",
        f.contract.label(),
        f.vcpus,
        crate::fmt::mem_text(f.mem_bytes)
    );
    let _ = writeln!(s, "- source: `{}`", f.source);
    if let Some(k) = &f.kernel {
        let _ = writeln!(
            s,
            "- kernel config: yours, `{}` (`{}` {}, sha256 `{}`; every commit built from it \
             by olddefconfig), {}",
            crate::kconfig::USER_KERNEL_FILE,
            k.form.flag(),
            k.given_as,
            k.sha256,
            if k.not_carried.is_empty() {
                "every symbol carried over into the good commit's config".to_string()
            } else {
                format!(
                    "{} symbol(s) did not carry over into the good commit's config: {}",
                    k.not_carried.len(),
                    k.not_carried.join("; ")
                )
            }
        );
    }
    let _ = writeln!(s, "- good: `{}`", f.good);
    let _ = writeln!(s, "- bad: `{}`", f.bad);
    if f.ab_steps() {
        let _ = writeln!(
            s,
            "- launches per look and arm: {} (an inconclusive step grows to at most {})",
            f.n, f.max_n
        );
        let _ = writeln!(s, "- rule at each look: {}", f.judge.describe());
        let _ = writeln!(s, "- extension rule: {}", f.looks().describe(f.judge.alpha));
    } else {
        let _ = writeln!(
            s,
            "- launches per step: {} (an inconclusive step grows to at most {})",
            f.n, f.max_n
        );
        let _ = writeln!(s, "- rule: {}", f.judge.describe());
    }
    if let Some(w) = f.wall_seconds {
        let _ = writeln!(s, "- wall time of the whole search: {w} s");
    }
    let _ = writeln!(s, "\n## Result\n");
    match &f.result {
        Some(r) => {
            let _ = writeln!(s, "{}\n", r.summary);
            if let Some(c) = &r.first_bad {
                let _ = writeln!(s, "- first bad commit: `{c}`");
            }
            if let Some(c) = &r.last_good {
                let _ = writeln!(s, "- last good commit: `{c}`");
            }
            if !r.culprits.is_empty() {
                let _ = writeln!(s, "- culprit symbols: `{}`", r.culprits.join("`, `"));
            }
            for (sym, i) in &r.effects {
                if let Some(j) = f.steps.get(*i).and_then(|st| st.judgement.as_ref()) {
                    let _ = writeln!(
                        s,
                        "- effect of `{sym}` alone (step {}): {} → {} ms, {}, 95 % CI {}, p {}",
                        i + 1,
                        opt_ms(j.good_p50_ns),
                        opt_ms(j.p50_ns),
                        j.delta_pct
                            .map(|d| format!("{d:+.2} %"))
                            .unwrap_or_else(|| "–".into()),
                        ci_text(j.ci95_ns),
                        j.p_value.map(p_text).unwrap_or_else(|| "–".into())
                    );
                }
            }
        }
        None => {
            let _ = writeln!(
                s,
                "Under way: steps recorded so far (`git bisect log` in the tree says the rest)."
            );
        }
    }
    let _ = writeln!(s, "\n## Steps\n");
    let _ = writeln!(
        s,
        "| # | {} | launches | good p50 ms | p50 ms | Δ | 95 % CI ms | p | verdict | why | wall s | bundle |",
        match f.kind {
            BisectKind::Commit => "commit",
            BisectKind::Config => "candidate (bad config's assignments applied)",
        }
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, st) in f.steps.iter().enumerate() {
        let what = match f.kind {
            BisectKind::Commit => format!(
                "`{}` {}",
                st.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
                st.subject.as_deref().unwrap_or("").replace('|', "\\|")
            ),
            BisectKind::Config => {
                if st.symbols.is_empty() {
                    "(none)".into()
                } else {
                    format!("`{}`", st.symbols.join("`, `"))
                }
            }
        };
        let j = st.judgement.as_ref();
        let launches = match (st.look, j.and_then(|j| j.alpha)) {
            (Some(k), Some(a)) if f.ab_steps() => format!(
                "{} a side (look {k}/{}, p < {})",
                st.planned,
                f.looks().count(),
                p_text(a)
            ),
            _ => st.planned.to_string(),
        };
        let _ = writeln!(
            s,
            "| {} | {what} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            launches,
            opt_ms(j.and_then(|j| j.good_p50_ns)),
            opt_ms(j.and_then(|j| j.p50_ns)),
            j.and_then(|j| j.delta_pct)
                .map(|d| format!("{d:+.2} %"))
                .unwrap_or_else(|| "–".into()),
            ci_text(j.and_then(|j| j.ci95_ns)),
            j.and_then(|j| j.p_value)
                .map(p_text)
                .unwrap_or_else(|| "–".into()),
            st.outcome.as_str(),
            st.why.replace('|', "\\|").replace('\n', " "),
            st.wall_seconds,
            st.dir
                .as_deref()
                .map(|d| format!("[{d}]({d}/)"))
                .unwrap_or_else(|| "–".into())
        );
    }
    let _ = writeln!(s, "\n## Reproduce\n\n```sh");
    for c in &f.commands {
        let _ = writeln!(s, "{c}");
    }
    let _ = writeln!(s, "```\n\n`truecold-proof verify <this directory>` re-checks every bundle, recomputes every step's verdict and checks `{SUMS_FILE}`.");
    s
}

fn ci_text(ci: Option<(i64, i64)>) -> String {
    let f = |v: i64| {
        let sign = if v < 0 { "-" } else { "+" };
        format!("{sign}{}", ms(v.unsigned_abs()))
    };
    ci.map(|(l, h)| format!("[{}, {}]", f(l), f(h)))
        .unwrap_or_else(|| "–".into())
}

/// A `SHA256SUMS` name of a bisect directory: up to four components.
pub fn is_valid_bisect_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 4)
}

fn parse_bisect_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_bisect_path)
}

/// Digests of every regular file under `dir` (at most four levels), the top `SHA256SUMS`
/// and `SHA256SUMS.sig` excluded; and what is not a regular file or too deep.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), BisectError> {
    Ok(crate::skeleton::write(dir, name, bytes)?)
}

/// Writes `bisect.json`, `README.md`, `log.txt` and `SHA256SUMS` into `dir` (each
/// atomically; the baseline and step directories are already there) and returns the
/// verifier's verdict on the whole directory.
pub fn write_bisect(dir: &Path, f: &BisectFile, log: &str) -> Result<Verdict, BisectError> {
    write_atomic(dir, BISECT_FILE, &bisect_bytes(f))?;
    write_atomic(dir, README_FILE, readme(f).as_bytes())?;
    write_atomic(dir, LOG_FILE, log.as_bytes())?;
    crate::skeleton::write_tree_sums(dir, 4)?;
    Ok(verify_bisect_dir(dir, &VerifyOptions::default()))
}

/// Whether `report` regenerates the file `name` (a `SHA256SUMS` path) of a bisect
/// directory: the top `README.md` and page, and in the baseline and step directories the
/// files `report` regenerates in a bundle or a multi-arm directory (their READMEs, plots,
/// comparison and `SHA256SUMS`); the record, the log and every row are evidence, never
/// regenerated.
pub fn is_regenerated(name: &str) -> bool {
    match name.split_once('/') {
        None => name == README_FILE || name == crate::names::HTML_FILE,
        Some((top, rest)) if top == BASELINE_DIR => bundle_generated(rest),
        Some((top, rest)) if top == STEPS_DIR => match rest.split_once('/') {
            Some((_, f)) => bundle_generated(f) || crate::arms::is_regenerated(f),
            None => false,
        },
        Some(_) => false,
    }
}

/// A bundle's own file that `report` on it rewrites (its `SHA256SUMS` included).
fn bundle_generated(name: &str) -> bool {
    name == SUMS_FILE || crate::bundle::is_regenerated(name, true)
}

/// `report DIR` on a bisect directory: every file `report` does not regenerate
/// ([`is_regenerated`]) must match its `SHA256SUMS` entry (the record and the bundles' rows
/// are evidence, never regenerated); then the baseline's and every step's generated files
/// are regenerated (`report` on each: [`crate::bundle::regenerate`],
/// [`crate::arms::regenerate_arms`]), `README.md` is rewritten from `bisect.json` and
/// `SHA256SUMS` anew. Returns the paths rewritten.
pub fn regenerate_bisect(dir: &Path) -> Result<Vec<String>, BisectError> {
    let listed = crate::skeleton::read_listing(dir, parse_bisect_sums)?;
    crate::skeleton::check_unchanged(dir, &listed, is_regenerated)?;
    let f = read_bisect(dir)?;
    let lp = dir.join(LOG_FILE);
    let log = String::from_utf8(crate::skeleton::read_record(&lp)?)
        .map_err(|source| BisectError::NotUtf8 { path: lp, source })?;
    let mut written = Vec::new();
    let inner = std::iter::once(BASELINE_DIR.to_string())
        .filter(|_| f.kind == BisectKind::Commit)
        .chain(f.steps.iter().filter_map(|s| s.dir.clone()));
    for rel in inner {
        let d = dir.join(&rel);
        if !crate::fsio::is_real_dir(&d) {
            continue;
        }
        let names = if crate::fsio::exists_here(&d.join(crate::names::ARMS_FILE)) {
            crate::arms::regenerate_arms(&d).map_err(|e| BisectError::Step {
                step: rel.clone(),
                why: crate::verdict::chain(&e),
            })?
        } else {
            crate::bundle::regenerate(&d).map_err(|e| BisectError::Step {
                step: rel.clone(),
                why: crate::verdict::chain(&e),
            })?
        };
        written.extend(names.into_iter().map(|n| format!("{rel}/{n}")));
    }
    write_bisect(dir, &f, &log)?;
    written.extend([README_FILE.to_string(), SUMS_FILE.to_string()]);
    Ok(written)
}

/// The directories a step's judgement compares: (good side, step side). Schema 2 and config
/// steps: the two arms of the step's A/B; a schema-1 commit step: the baseline and the step's
/// bundle.
pub fn step_sides(dir: &Path, f: &BisectFile, step_dir: &str) -> (PathBuf, PathBuf) {
    match f.kind {
        BisectKind::Commit if !f.ab_steps() => (dir.join(BASELINE_DIR), dir.join(step_dir)),
        _ => ab_sides(&dir.join(step_dir)),
    }
}

/// Verifies a bisect directory (see the module doc).
pub fn verify_bisect_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let p = dir.join(BISECT_FILE);
    let bytes = match read_capped(&p, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{BISECT_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return v;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {BISECT_FILE}: {e}"));
            return v;
        }
    };
    let file = match serde_json::from_slice::<BisectFile>(&bytes) {
        Ok(f) if f.schema != BISECT_SCHEMA && f.schema != BISECT_SCHEMA_V1 => {
            v.add(
                Check::BisectRecord,
                format!(
                    "{BISECT_FILE}: schema {}, this verifier reads {BISECT_SCHEMA_V1} and \
                     {BISECT_SCHEMA}",
                    f.schema
                ),
            );
            None
        }
        Ok(f) => {
            if bisect_bytes(&f) != bytes {
                v.add(
                    Check::BisectRecord,
                    format!("{BISECT_FILE} is not in the writer's canonical form"),
                );
            }
            Some(f)
        }
        Err(e) => {
            v.add(
                Check::BisectRecord,
                format!("{BISECT_FILE} does not parse: {e}"),
            );
            None
        }
    };
    for r in [BISECT_FILE, README_FILE, LOG_FILE, SUMS_FILE] {
        if !crate::fsio::is_real_file(&dir.join(r)) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing"),
            );
        }
    }
    let Some((sums, sig)) =
        crate::skeleton::check_tree_sums(&mut v, dir, 4, parse_bisect_sums, "a step's directory")
    else {
        return v;
    };
    if let Some(f) = &file {
        v.label = Some(format!(
            "bisect of {} ({} step(s), {} clock){}",
            match f.kind {
                BisectKind::Commit => "commits",
                BisectKind::Config => "config symbols",
            },
            f.steps.len(),
            f.clock.as_str(),
            match &f.result {
                Some(r) => match (&r.first_bad, r.culprits.is_empty()) {
                    (Some(c), _) => format!(": first bad commit {c}"),
                    (None, false) => format!(": culprits {}", r.culprits.join(", ")),
                    (None, true) => ": no culprit".to_string(),
                },
                None => ": under way".to_string(),
            }
        ));
        check_record(&mut v, dir, f);
        if f.kind == BisectKind::Config && f.kernel.is_some() {
            v.add(
                Check::UserKernel,
                format!(
                    "{BISECT_FILE}: a config bisect records a user's kernel (its good and bad \
                     configs are the user's)"
                ),
            );
        }
        crate::kconfig::check_user_kernel(
            &mut v,
            dir,
            f.kernel.as_ref(),
            &dir.join(BASELINE_DIR).join(crate::names::CONFIG_FILE),
        );
        let readme_bytes = read_capped(&dir.join(README_FILE), MAX_PARSED_BYTES)
            .ok()
            .flatten();
        if readme_bytes.as_deref() != Some(readme(f).as_bytes()) {
            v.add_file(
                Check::GeneratedStale,
                README_FILE,
                format!("{README_FILE} is not what {BISECT_FILE} gives"),
            );
        }
    }
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    v
}

/// Every step that reuses an earlier step's campaign directory without being a config step
/// with the same resolved config: none is allowed.
fn bad_reuses(f: &BisectFile) -> Vec<String> {
    let mut first_use: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    let mut bad = Vec::new();
    for (i, st) in f.steps.iter().enumerate() {
        let Some(d) = st.dir.as_deref().filter(|_| st.outcome.measured()) else {
            continue;
        };
        match first_use.get(d) {
            Some(&(k, sha)) => {
                if f.kind != BisectKind::Config || sha != st.config_sha256.as_deref() {
                    bad.push(format!(
                        "step {}: reuses step {}'s campaign `{d}` without its resolved config",
                        i + 1,
                        k + 1
                    ));
                }
            }
            None => {
                first_use.insert(d, (i, st.config_sha256.as_deref()));
            }
        }
    }
    bad
}

/// Every directory of the record verifies and every step's judgement is recomputed: the
/// baseline ([`Steps::baseline`]), each step ([`check_steps`]), then the result
/// ([`check_result`]).
fn check_record(v: &mut Verdict, dir: &Path, f: &BisectFile) {
    let mut st = Steps {
        dir,
        f,
        rows: 0,
        clock0: None,
        baseline_kernel: None,
    };
    if f.kind == BisectKind::Commit {
        st.baseline(v);
    }
    // A step may point at an earlier step's campaign (a config candidate that resolves like
    // an earlier one): only with the same resolved config, and it is verified once. A record
    // reusing a campaign otherwise is refused before any step is verified.
    let bad_reuse = bad_reuses(f);
    if !bad_reuse.is_empty() {
        for why in bad_reuse {
            v.add(Check::BisectSteps, why);
        }
        v.rows = Some(st.rows);
        return;
    }
    check_steps(v, &mut st);
    v.rows = Some(st.rows);
    if f.ab_steps() {
        check_looks(v, f);
    }
    check_result(v, f);
}

/// The campaigns of a bisect record as they are verified: the rows counted, and the first
/// one's environment (every campaign of the record is on one virtual clock: the same L0
/// QEMU, L1 kernel and L1 CPUs).
struct Steps<'a> {
    dir: &'a Path,
    f: &'a BisectFile,
    rows: usize,
    clock0: Option<(String, crate::schema::Environment)>,
    /// The baseline's kernel and config digests (schema 2: every step's good arm boots them).
    baseline_kernel: Option<KernelDigests>,
}

/// A bundle's `vmlinux` and `config` digests.
type KernelDigests = (Option<String>, Option<String>);

fn kernel_digests(r: &crate::schema::ResultJson) -> KernelDigests {
    (
        r.artifacts.get("vmlinux").cloned(),
        r.artifacts.get("config").cloned(),
    )
}

impl Steps<'_> {
    /// The campaign at `rel` is on the first one's virtual clock.
    fn one_clock(&mut self, v: &mut Verdict, rel: &str, env: &crate::schema::Environment) {
        match &self.clock0 {
            None => self.clock0 = Some((rel.to_string(), env.clone())),
            Some((r0, e0)) => {
                if let Some(d) = crate::schema::virtual_clock_differs(e0, env) {
                    v.add(
                        Check::BisectSteps,
                        format!("{rel}: on another virtual clock than {r0} ({d})"),
                    );
                }
            }
        }
    }

    /// The step directory `rel` (under `steps/`, reached through real directories only)
    /// verifies, on the record's clock; whether it is valid.
    fn step(&mut self, v: &mut Verdict, rel: &str) -> bool {
        let (dir, f) = (self.dir, self.f);
        if !is_valid_bisect_path(rel) || rel.split('/').next() != Some(STEPS_DIR) {
            v.add(
                Check::BisectSteps,
                format!("step directory `{rel}` is not under `{STEPS_DIR}/`"),
            );
            return false;
        }
        let d = dir.join(rel);
        if crate::fsio::exists_here(&d) && !crate::fsio::is_real_dir_below(dir, rel) {
            v.add(
                Check::BisectSteps,
                format!("step directory `{rel}` is not a directory (a link is never followed)"),
            );
            return false;
        }
        let sv = verify_dir(&d);
        self.rows += sv.rows.unwrap_or(0);
        if let Some(u) = &sv.unreadable {
            v.add(Check::BisectSteps, format!("{rel}: unreadable: {u}"));
        }
        v.add_inner(rel, &sv);
        if let Some(r) = &sv.result {
            if r.contract.clock != f.clock || r.environment.host_kind != f.host_kind {
                v.add(
                    Check::BisectSteps,
                    format!("{rel}: on another clock or host kind than {BISECT_FILE} says"),
                );
            }
            self.one_clock(v, rel, &r.environment);
        }
        sv.is_valid()
    }

    /// A commit bisect's baseline verifies (never through a link), on the record's clock,
    /// host kind, vCPUs and memory.
    fn baseline(&mut self, v: &mut Verdict) {
        let f = self.f;
        let b = self.dir.join(BASELINE_DIR);
        let bv = if !crate::fsio::exists_here(&b) || crate::fsio::is_real_dir(&b) {
            verify_dir(&b)
        } else {
            Verdict {
                unreadable: Some(format!(
                    "`{BASELINE_DIR}` is not a directory (a link is never followed)"
                )),
                ..Verdict::default()
            }
        };
        // Its reasons one by one, as a step's (each naming its file, so `report` can tell
        // a stale README, which it regenerates, from a changed row, which it refuses).
        if let Some(u) = &bv.unreadable {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: unreadable: {u}"),
            );
        }
        v.add_inner(BASELINE_DIR, &bv);
        let Some(r) = &bv.result else { return };
        self.baseline_kernel = Some(kernel_digests(r));
        self.one_clock(v, BASELINE_DIR, &r.environment);
        if r.contract.clock != f.clock || r.environment.host_kind != f.host_kind {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: on another clock or host kind than {BISECT_FILE} says"),
            );
        }
        if r.configuration.vcpus != f.vcpus || r.configuration.mem_bytes != f.mem_bytes {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: not the recorded vCPUs / memory"),
            );
        }
    }
}

/// Each step: a measured one's campaign verifies (once, however many steps name it) and its
/// judgement recomputes; an unmeasured one has neither campaign nor judgement.
fn check_steps(v: &mut Verdict, sc: &mut Steps<'_>) {
    let (dir, f) = (sc.dir, sc.f);
    let o = f.judge.clone();
    let mut first_use: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    for (i, st) in f.steps.iter().enumerate() {
        match (&st.dir, st.outcome.measured()) {
            (Some(d), true) => {
                if let Some(&(k, sha)) = first_use.get(d.as_str()) {
                    if f.kind != BisectKind::Config || sha != st.config_sha256.as_deref() {
                        v.add(
                            Check::BisectSteps,
                            format!(
                                "step {}: reuses step {}'s campaign `{d}` without its resolved config",
                                i + 1,
                                k + 1
                            ),
                        );
                        continue;
                    }
                    if f.steps[k].judgement != st.judgement || f.steps[k].outcome != st.outcome {
                        v.add(
                            Check::BisectSteps,
                            format!(
                                "step {}: reuses step {}'s campaign with another judgement",
                                i + 1,
                                k + 1
                            ),
                        );
                    }
                    continue;
                }
                first_use.insert(d.as_str(), (i, st.config_sha256.as_deref()));
                // Only inside the directory, through real directories (`step` says why not).
                let inside = is_valid_bisect_path(d)
                    && d.split('/').next() == Some(STEPS_DIR)
                    && crate::fsio::is_real_dir_below(dir, d);
                let ab_ok = !(f.ab_steps() || f.kind == BisectKind::Config)
                    || (inside && check_ab(v, sc, i, d, st));
                if !sc.step(v, d) || !ab_ok {
                    continue;
                }
                let (g, s) = step_sides(dir, f, d);
                let j = if f.ab_steps() {
                    judge_look(&g, &s, &o, &f.looks())
                } else {
                    judge(&g, &s, &o)
                };
                match j {
                    Ok(j) => {
                        if Some(&j) != st.judgement.as_ref() || j.outcome != st.outcome {
                            v.add(
                                Check::BisectSteps,
                                format!(
                                    "step {}: recorded {}, the rows give {} ({})",
                                    i + 1,
                                    st.outcome.as_str(),
                                    j.outcome.as_str(),
                                    j.why
                                ),
                            );
                        }
                    }
                    Err(e) => v.add(
                        Check::BisectSteps,
                        format!("step {}: {}", i + 1, crate::verdict::chain(&e)),
                    ),
                }
            }
            (None, false) => {
                if st.judgement.is_some() {
                    v.add(
                        Check::BisectSteps,
                        format!("step {}: a judgement without a campaign", i + 1),
                    );
                }
            }
            (Some(_), false) => v.add(
                Check::BisectSteps,
                format!(
                    "step {}: {} with a campaign directory",
                    i + 1,
                    st.outcome.as_str()
                ),
            ),
            (None, true) => v.add(
                Check::BisectSteps,
                format!(
                    "step {}: {} without its campaign directory",
                    i + 1,
                    st.outcome.as_str()
                ),
            ),
        }
    }
}

/// A step's A/B (schema 2, and every config step): both arms present, the directory a kernel
/// A/B of `good` and `candidate` whose order interleaves them (each round both arms once, as
/// the arms verifier also checks against the rows), the planned launches a side; schema 2
/// commit steps: the good arm boots the baseline's kernel. Whether the step can be judged.
fn check_ab(v: &mut Verdict, sc: &Steps<'_>, i: usize, rel: &str, st: &Step) -> bool {
    let d = sc.dir.join(rel);
    let mut ok = true;
    for arm in [GOOD_ARM, CANDIDATE_ARM] {
        if !crate::fsio::is_real_dir(&d.join(arm)) {
            v.add(
                Check::BisectSteps,
                format!(
                    "step {}: `{rel}` has no arm `{arm}`: a step is an A/B",
                    i + 1
                ),
            );
            ok = false;
        }
    }
    if !ok {
        return false;
    }
    let plan = read_capped(&d.join(crate::names::ARMS_FILE), MAX_PARSED_BYTES)
        .ok()
        .flatten()
        .ok_or_else(|| format!("no readable {}", crate::names::ARMS_FILE))
        .and_then(|b| crate::arms::parse_arms(&b));
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            v.add(
                Check::BisectSteps,
                format!("step {}: `{rel}` is not an A/B: {e}", i + 1),
            );
            return false;
        }
    };
    if !crate::arms::is_kernel_ab(&plan) {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}` is not a kernel A/B of arms `{GOOD_ARM}` and \
                 `{CANDIDATE_ARM}`",
                i + 1
            ),
        );
        return false;
    }
    let bad = crate::arms::plan_problems(&plan);
    if !bad.is_empty() {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}`'s order does not interleave its arms: {}",
                i + 1,
                bad.join("; ")
            ),
        );
        ok = false;
    }
    if plan.rounds != st.planned {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}` ran {} rounds, the step plans {}",
                i + 1,
                plan.rounds,
                st.planned
            ),
        );
        ok = false;
    }
    if sc.f.ab_steps() && sc.f.kind == BisectKind::Commit {
        let good = crate::read_bundle(&d.join(GOOD_ARM))
            .ok()
            .map(|(r, _)| kernel_digests(&r));
        if good.is_none() || good != sc.baseline_kernel {
            v.add(
                Check::BisectSteps,
                format!(
                    "step {}: `{rel}`'s arm `{GOOD_ARM}` does not boot the baseline's kernel \
                     (vmlinux and config digests)",
                    i + 1
                ),
            );
            ok = false;
        }
    }
    ok
}

/// What a look belongs to: its commit (commits) or its candidate set (config).
type LookKey<'a> = (Option<&'a str>, &'a [String]);

fn look_key(st: &Step) -> LookKey<'_> {
    (st.commit.as_deref(), st.symbols.as_slice())
}

/// Schema 2: the looks of every step follow the rule ([`Looks`]). A measured step names its
/// look, within the K the record plans, with the launches that look plans; a commit's or a
/// candidate's first measured step is look 1; a look after the first directly follows the
/// same commit's or candidate's previous look, which was inconclusive; a look that was
/// inconclusive with looks left is followed by the next one (unless nothing follows it: a
/// search cut short). A step repeating an earlier candidate's campaign repeats its look.
fn check_looks(v: &mut Verdict, f: &BisectFile) {
    let looks = f.looks();
    let mut seen_dirs: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    // The look the next step must be: (its commit or candidate, the look).
    let mut owed: Option<(LookKey<'_>, u32)> = None;
    for (i, st) in f.steps.iter().enumerate() {
        let n = i + 1;
        if !st.outcome.measured() {
            if st.look.is_some() {
                v.add(
                    Check::BisectSteps,
                    format!("step {n}: a look without a campaign"),
                );
            }
            if let Some((_, k)) = owed.take() {
                v.add(
                    Check::BisectSteps,
                    format!(
                        "step {n}: step {i} was inconclusive at look {} of {}, yet its look {k} \
                         does not follow",
                        k - 1,
                        looks.count()
                    ),
                );
            }
            continue;
        }
        let Some(k) = st.look else {
            v.add(
                Check::BisectSteps,
                format!("step {n}: a measured step without its look"),
            );
            owed = None;
            continue;
        };
        if let Some(d) = st.dir.as_deref() {
            if let Some(&earlier) = seen_dirs.get(d) {
                if earlier != Some(k) {
                    v.add(
                        Check::BisectSteps,
                        format!("step {n}: repeats a campaign under another look"),
                    );
                }
                continue;
            }
            seen_dirs.insert(d, Some(k));
        }
        match looks.size(k) {
            None => v.add(
                Check::BisectSteps,
                format!(
                    "step {n}: look {k}, the rule plans {} look(s)",
                    looks.count()
                ),
            ),
            Some(size) if size != st.planned => v.add(
                Check::BisectSteps,
                format!(
                    "step {n}: look {k} plans {size} launches a side, the step says {}",
                    st.planned
                ),
            ),
            Some(_) => {}
        }
        let want = match owed.take() {
            Some((key, want)) if key == look_key(st) => want,
            Some((_, want)) => {
                v.add(
                    Check::BisectSteps,
                    format!(
                        "step {n}: step {i} was inconclusive at look {} of {}, yet its look \
                         {want} does not follow",
                        want - 1,
                        looks.count()
                    ),
                );
                1
            }
            None => 1,
        };
        if k != want {
            v.add(
                Check::BisectSteps,
                format!("step {n}: look {k} where the rule takes look {want}"),
            );
        }
        owed = looks.next(k, st.outcome).map(|next| (look_key(st), next));
    }
}

/// The result names the steps that show it: the bad step bad (the first bad commit's, the
/// culprit set's), the good step good, each effect a step measuring its symbol alone.
fn check_result(v: &mut Verdict, f: &BisectFile) {
    let Some(r) = &f.result else { return };
    let at = |i: Option<usize>| i.and_then(|i| f.steps.get(i));
    match at(r.bad_step) {
        Some(s) if s.outcome.exit_code() == 1 => {
            if f.kind == BisectKind::Commit && s.commit != r.first_bad {
                v.add(
                    Check::BisectSteps,
                    "the result's bad step is not the first bad commit's".to_string(),
                );
            }
            if f.kind == BisectKind::Config && s.symbols != r.culprits {
                v.add(
                    Check::BisectSteps,
                    "the result's bad step is not the culprit set's".to_string(),
                );
            }
        }
        Some(_) => v.add(
            Check::BisectSteps,
            "the result's bad step is not bad".to_string(),
        ),
        None if r.first_bad.is_some() || !r.culprits.is_empty() => v.add(
            Check::BisectSteps,
            "the result names a culprit without the step that shows it bad".to_string(),
        ),
        None => {}
    }
    if let Some(s) = at(r.good_step) {
        if s.outcome.exit_code() != 0 || (f.kind == BisectKind::Commit && s.commit != r.last_good) {
            v.add(
                Check::BisectSteps,
                "the result's good step is not a good step of the last good commit".to_string(),
            );
        }
    }
    for (sym, i) in &r.effects {
        match f.steps.get(*i) {
            Some(s) if s.symbols == [sym.clone()] && s.outcome.measured() => {}
            _ => v.add(
                Check::BisectSteps,
                format!("the effect of `{sym}` does not point at a step measuring it alone"),
            ),
        }
    }
}
