//! A tune's model: its names, its plan ([`TunePlan`]) and the arms of each phase, the
//! record `tune.json` holds ([`TuneFile`]) and the errors of writing one.

use crate::schema::Figure;
use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Clock;
use truecold_proto::tune::{Knob, TuneGuest};

use super::proposal::{proposal_problems, unbuilt_problems, Proposal, Unbuilt};
use super::recommended::{Invocation, RunGuest};
use super::stats::*;
use crate::arms::{ArmRef, ArmsError, BASELINE_ARM, MINUS_PREFIX, RECOMMENDED_ARM, RESAMPLES};
use crate::names::TUNE_FILE;
use crate::schema::{Backing, ContractKind, HostKind, HEADLINE};

/// The newest version of `tune.json`: 3 records proposals ([`Proposal`]: the knobs chosen
/// from an attribution, each with its source) beside what 2 has. A tune is written with the
/// least schema that holds it ([`schema_of`]): 3 with proposals, else 2.
pub const TUNE_SCHEMA: u32 = 3;
/// The schema that records the invocation ([`Invocation`]) and comes with `recommended/`
/// ([`crate::tune::recommended_files`]); schema 1 (neither) is still read.
pub const TUNE_SCHEMA_INVOCATION: u32 = 2;
/// The oldest `tune.json` schema this verifier reads.
pub const TUNE_SCHEMA_MIN: u32 = 1;
/// The screen phase's directory.
pub const SCREEN_DIR: &str = "screen";
/// The confirm phase's directory.
pub const CONFIRM_DIR: &str = "confirm";
/// The pilot phase's directory: the baseline and the screen's command-line and VMM knobs
/// ([`pilot_arms`]), interleaved over a few rounds, whose noise sizes the screen
/// ([`Noise::pilot_rounds`]).
pub const PILOT_DIR: &str = "pilot";
/// The screen phase's arms: `baseline`, then one per knob (named by it).
pub fn screen_arms(knobs: &[Knob]) -> Vec<ArmRef> {
    std::iter::once(ArmRef::tune(BASELINE_ARM, Vec::new()))
        .chain(knobs.iter().map(|k| ArmRef::tune(k.as_str(), vec![*k])))
        .collect()
}

/// The pilot phase's arms: `baseline` and the screen's knobs that need no kernel of their own
/// (command-line and VMM knobs), so the pilot runs before any Kconfig arm's kernel is built.
pub fn pilot_arms(knobs: &[Knob]) -> Vec<ArmRef> {
    let quick: Vec<Knob> = knobs
        .iter()
        .copied()
        .filter(|k| !matches!(k.change(), truecold_proto::tune::Change::Kconfig(_)))
        .collect();
    screen_arms(&quick)
}

/// The confirm phase's arms for `recommended` (every winner, catalogue order): `baseline`,
/// `recommended`, and with two or more winners `recommended-minus-<k>` per winner.
pub fn confirm_arms(recommended: &[Knob]) -> Vec<ArmRef> {
    let mut v = vec![
        ArmRef::tune(BASELINE_ARM, Vec::new()),
        ArmRef::tune(RECOMMENDED_ARM, recommended.to_vec()),
    ];
    if recommended.len() >= 2 {
        for k in recommended {
            v.push(ArmRef::tune(
                format!("{MINUS_PREFIX}{k}"),
                recommended.iter().copied().filter(|x| x != k).collect(),
            ));
        }
    }
    v
}

/// What the measured noise said of n.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Noise {
    /// The headline's coefficient of variation the bench sized n from, ppm.
    pub cv_ppm: u64,
    /// Where that figure was measured (a bundle, a pilot run).
    pub source: String,
    /// The tune's own pilot phase ([`PILOT_DIR`]) measured it, over this many interleaved
    /// rounds of the screen's arms: `cv_ppm` is [`crate::tune::pooled_cv_ppm`] of those arms,
    /// which the verifier recomputes. Absent: a bundle given with `--noise-from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pilot_rounds: Option<u64>,
}

/// One Kconfig arm's kernel as the tune got it (a record: `verify` cannot recompute a build's
/// time, it checks the knob sets against the plan's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelBuild {
    /// The arm's Kconfig knobs (their variant name: `hz-1000+no-printk`).
    pub knobs: String,
    /// The wall time the bench waited for it, ms: its build, or for a kernel found in the
    /// build script's cache the time to find it.
    pub wall_ms: u64,
    /// Whether the build script found it in its cache (`cache hit`) instead of building it;
    /// absent (false) in a record written before the tune said so, which then does not tell.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// A tune's plan: what the bench ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunePlan {
    /// The bootstrap seeds' base (module doc).
    pub seed: u64,
    pub guest: TuneGuest,
    /// The knobs screened, catalogue order.
    pub knobs: Vec<Knob>,
    /// Context, not knobs.
    pub vcpus: u32,
    pub mem_bytes: u64,
    pub backing: Backing,
    pub rounds_screen: u64,
    pub rounds_confirm: u64,
    /// The most launches the tune may make (`--budget`).
    pub budget: Option<u64>,
    /// The noise n was sized from; `None`: n was given.
    pub noise: Option<Noise>,
    /// The verdict rule (a new tune: [`RuleVersion::CURRENT`]; a directory read back: the
    /// one its `tune.json` names).
    pub rule: RuleVersion,
    /// How the tune was started (a new tune: always; a schema-1 directory read back: none).
    pub invocation: Option<Invocation>,
    /// The headline's figure every arm is judged on (`--clock`; total unless asked).
    pub figure: Figure,
    /// Each Kconfig arm's kernel, in the order the tune built them (absent before the tune
    /// recorded them).
    pub kernel_builds: Vec<KernelBuild>,
    /// The knobs proposed from an attribution, each with its source (schema 3; empty: none
    /// proposed).
    pub proposals: Vec<Proposal>,
    /// The proposals whose kernel could not be got, not screened (schema 3).
    pub unbuilt: Vec<Unbuilt>,
}

/// Every way `plan` is not a tune plan (empty when it is one).
pub fn tune_plan_problems(plan: &TunePlan) -> Vec<String> {
    let mut bad = Vec::new();
    if plan.knobs.is_empty() {
        bad.push("no knobs".into());
    }
    if plan.knobs.windows(2).any(|w| w[0] >= w[1]) {
        bad.push("knobs not in catalogue order, each once".into());
    }
    for k in &plan.knobs {
        if !k.applies_to(plan.guest) {
            bad.push(format!("knob `{k}` does not apply to this guest"));
        }
    }
    if plan.rounds_screen == 0 || plan.rounds_confirm == 0 {
        bad.push("a phase of 0 rounds".into());
    }
    if let Some(i) = &plan.invocation {
        let o = &i.options;
        let guest = match o.guest {
            RunGuest::Probe => TuneGuest::Probe,
            RunGuest::Linux | RunGuest::Nested => TuneGuest::Linux,
        };
        if guest != plan.guest {
            bad.push(format!(
                "the invocation's guest `{}` does not boot the tune's guest",
                o.guest.flag()
            ));
        }
        if o.vcpus != plan.vcpus
            || o.mem_mib.checked_mul(1 << 20) != Some(plan.mem_bytes)
            || o.backing != plan.backing
        {
            bad.push(format!(
                "the invocation's {} vCPUs, {} MiB, backing {} are not the context",
                o.vcpus,
                o.mem_mib,
                o.backing.as_str()
            ));
        }
        if i.argv.is_empty() {
            bad.push("the invocation's argv is empty".into());
        }
        bad.extend(o.instrument_problems());
    }
    bad.extend(proposal_problems(&plan.proposals, &plan.knobs));
    bad.extend(unbuilt_problems(&plan.unbuilt, &plan.knobs));
    bad
}

/// `tune.json`'s context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Context {
    pub(super) vcpus: u32,
    pub(super) mem_bytes: u64,
    pub(super) backing: Backing,
    /// The figure judged; absent means the total one (the only one before the parallel
    /// clock existed).
    #[serde(default, skip_serializing_if = "Figure::is_total")]
    pub(super) figure: Figure,
}

/// `tune.json`'s rounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Rounds {
    pub(super) screen: u64,
    pub(super) confirm: u64,
}

/// `tune.json`'s statement of the rules (fixed text and constants).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Rule {
    /// Absent: rule 1 (written so, a rule-1 `tune.json` keeps its bytes).
    #[serde(default, skip_serializing_if = "RuleVersion::is_v1")]
    pub(super) version: RuleVersion,
    pub(super) metric: String,
    pub(super) alpha: String,
    pub(super) min_effect_ppm: u64,
    pub(super) min_rounds: u64,
    pub(super) resamples: u64,
    pub(super) bootstrap: String,
    pub(super) verdict: String,
    pub(super) ranking: String,
    pub(super) sizing: String,
    /// Rule 2: the multiple-comparison control over the screen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) multiplicity: Option<String>,
}

/// `tune.json`'s statement of `version` for a tune of `knobs` knobs (rule 1: the text
/// written before the version existed, byte for byte).
pub(super) fn rule(version: RuleVersion, knobs: u64, figure: Figure) -> Rule {
    let on = match figure {
        Figure::Total => "",
        Figure::Parallel => " on the parallel clock",
    };
    let common = |verdict: String, sizing: String, multiplicity: Option<String>| Rule {
        version,
        metric: format!("{HEADLINE}{on}, each arm's successful rows"),
        alpha: ALPHA_TEXT.into(),
        min_effect_ppm: MIN_EFFECT_PPM,
        min_rounds: MIN_ROUNDS,
        resamples: RESAMPLES as u64,
        bootstrap: "percentile bootstrap of p50(arm) - p50(base), 95 %, SplitMix64; screen \
                    effect k (plan's knob order) seed + k, the final A/B seed + K (K knobs), \
                    leave-one-out i seed + K + 1 + i"
            .into(),
        verdict,
        ranking: "delta p50 ascending, breaks last, ties in catalogue order; winners: faster \
                  knobs in rank order, one conflicting with a better-ranked winner dropped"
            .into(),
        sizing,
        multiplicity,
    };
    match version {
        RuleVersion::V1 => common(
            format!(
                "breaks strict-ready if the arm has a failed row; inconclusive with fewer than \
                 {MIN_ROUNDS} successes a side; faster/slower if the 95 % interval excludes 0, \
                 Mann-Whitney p < {ALPHA_TEXT} and |delta p50| >= {MIN_EFFECT_PPM} ppm of the \
                 base's p50; no effect if the interval lies strictly inside +-that; else \
                 inconclusive"
            ),
            format!(
                "rounds per arm = max({MIN_ROUNDS}, ceil({SIZING_K_MILLI}/1000 * (cv / e)^2)): \
                 2 (z_0.975 + z_0.80)^2 (cv/e)^2 times pi/3 (Mann-Whitney vs t efficiency), \
                 alpha {ALPHA_TEXT} two-sided, power {POWER_PCT} %"
            ),
            None,
        ),
        RuleVersion::V2 => common(
            format!(
                "breaks strict-ready if the arm has a failed row; inconclusive with fewer than \
                 {MIN_ROUNDS} successes a side; faster/slower if the test's p < {ALPHA_TEXT} \
                 (screen: Mann-Whitney p Holm-adjusted over the {knobs} knobs; confirm: the \
                 Mann-Whitney p) and the 95 % interval excludes 0 on the side of delta p50; no \
                 effect if the interval lies strictly inside +-{MIN_EFFECT_PPM} ppm of the \
                 base's p50; else inconclusive"
            ),
            format!(
                "rounds per arm = the least n >= {MIN_ROUNDS} at which one knob's test, \
                 Mann-Whitney p < alpha/K (Bonferroni; Holm rejects at least as often), K = \
                 {knobs}, has power >= {SIZING_POWER_PCT} % at a true change of e = \
                 {MIN_EFFECT_PPM} ppm of the p50 (claimed: >= {POWER_PCT} %): U normal with its mean n^2 p1 and variance n^2 p1(1-p1) + 2 \
                 n^2 (n-1)(p2 - p1^2) under a normal shift d = e/cv (Lehmann), p1 = \
                 Phi(d/sqrt 2), p2 = Phi2(d/sqrt 2, d/sqrt 2; 1/2), significant from the least \
                 integer U whose continuity-corrected p is below alpha/K"
            ),
            Some(format!(
                "Holm step-down over the screen's {knobs} Mann-Whitney p values: family-wise \
                 error <= {ALPHA_TEXT} under any dependence; the confirm phase's comparisons \
                 each one planned test"
            )),
        ),
    }
}

/// `tune.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TuneFile {
    pub(super) schema: u32,
    pub(super) seed: u64,
    pub(super) guest: ContractKind,
    pub(super) knobs: Vec<Knob>,
    pub(super) context: Context,
    pub(super) rounds: Rounds,
    pub(super) budget: Option<u64>,
    pub(super) noise: Option<Noise>,
    /// Schema 2: how the tune was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) invocation: Option<Invocation>,
    pub(super) rule: Rule,
    pub(super) host_kind: Option<HostKind>,
    pub(super) clock: Option<Clock>,
    /// Rows of every arm of both phases.
    pub(super) launches: u64,
    pub(super) screen: Screen,
    pub(super) confirm: Option<Confirm>,
    /// [`TunePlan::kernel_builds`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) kernel_builds: Vec<KernelBuild>,
    /// Schema 3: [`TunePlan::proposals`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) proposals: Vec<Proposal>,
    /// Schema 3: [`TunePlan::unbuilt`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) unbuilt: Vec<Unbuilt>,
}

/// The schema a tune of `plan` is written with: 3 with proposals, 2 with an invocation, else
/// 1 (a directory of schema 1 or 2 read back and regenerated keeps its schema).
pub(super) fn schema_of(plan: &TunePlan) -> u32 {
    if !plan.proposals.is_empty() || !plan.unbuilt.is_empty() {
        TUNE_SCHEMA
    } else if plan.invocation.is_some() {
        TUNE_SCHEMA_INVOCATION
    } else {
        TUNE_SCHEMA_MIN
    }
}

pub(super) fn guest_kind(g: TuneGuest) -> ContractKind {
    match g {
        TuneGuest::Probe => ContractKind::Probe,
        TuneGuest::Linux => ContractKind::Linux,
    }
}

impl TuneFile {
    pub(super) fn plan(&self) -> TunePlan {
        TunePlan {
            seed: self.seed,
            guest: TuneGuest::from(self.guest),
            knobs: self.knobs.clone(),
            vcpus: self.context.vcpus,
            mem_bytes: self.context.mem_bytes,
            backing: self.context.backing,
            rounds_screen: self.rounds.screen,
            rounds_confirm: self.rounds.confirm,
            budget: self.budget,
            noise: self.noise.clone(),
            rule: self.rule.version,
            invocation: self.invocation.clone(),
            figure: self.context.figure,
            kernel_builds: self.kernel_builds.clone(),
            proposals: self.proposals.clone(),
            unbuilt: self.unbuilt.clone(),
        }
    }
}

pub(super) fn tune_bytes(f: &TuneFile) -> Vec<u8> {
    // Integers, strings, enums and options only: serialisation cannot fail.
    let mut b = serde_json::to_vec_pretty(f).unwrap_or_default();
    b.push(b'\n');
    b
}

/// Why a tune directory's files could not be written or regenerated.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("the tune plan is not consistent: {0}")]
    Plan(String),
    #[error("phase `{phase}`: {why}")]
    Phase { phase: &'static str, why: String },
    #[error("phase `{phase}`")]
    Arms {
        phase: &'static str,
        #[source]
        source: ArmsError,
    },
    #[error("{TUNE_FILE} does not parse")]
    Json(#[source] serde_json::Error),
    #[error(transparent)]
    Io(#[from] truecold_proto::path_io::PathIoError),
    #[error(transparent)]
    Dir(#[from] crate::skeleton::DirError),
}
