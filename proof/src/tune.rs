//! `truecold tune`: the statistics of a tune (one definition: the bench calls them while it
//! runs, the verifier to recompute every figure) and the verifiable tune directory.
//!
//! ```text
//! <tune>/tune.json    the plan (seed, guest, knobs, context, rounds, budget, noise) and the
//!                     results: every knob against the baseline, the ranking, the winners,
//!                     the final A/B and the leave-one-out, all recomputed by verify
//! <tune>/README.md    host kind, clock, contract, context, the ranked table, breaks, the
//!                     recommended fragment / command line / VMM flags, final A/B,
//!                     leave-one-out, how n was sized, each knob's what and source
//! <tune>/screen/      a multi-arm directory ([`crate::arms`]): `baseline` + one arm per knob
//! <tune>/confirm/     a multi-arm directory: `baseline`, `recommended`,
//!                     `recommended-minus-<k>` per winner when there are two or more
//!                     (absent when no knob won)
//! <tune>/SHA256SUMS   every file under <tune> (`screen/baseline/samples.csv`, …)
//! ```
//!
//! # One effect ([`effect`]): an arm against a base arm
//! Over each arm's successful rows (the headline, request → strict-ready): `n`, the p50s
//! (nearest rank), Δp50 = p50(arm) − p50(base) in ns and in ppm of the base's p50
//! (truncated toward zero), a percentile-bootstrap 95 % interval of Δp50
//! ([`crate::compare::bootstrap_delta_ci`]: SplitMix64, [`RESAMPLES`] resamples of both
//! arms), and the two-sided Mann–Whitney p ([`crate::compare::mann_whitney_p`]). The verdict,
//! first rule that applies:
//! 1. **breaks strict-ready** — the arm has a failed row (its error kinds counted): never
//!    faster, whatever its successes say;
//! 2. **inconclusive** — fewer than [`MIN_ROUNDS`] successes on a side;
//! 3. **faster** / **slower** — the 95 % interval excludes 0 on the side of Δp50, p <
//!    [`ALPHA`], and |Δp50| ≥ [`MIN_EFFECT_PPM`] of the base's p50;
//! 4. **no effect** — the 95 % interval lies strictly inside ± that minimum effect;
//! 5. **inconclusive** — otherwise.
//!
//! # Screen, ranking, winners ([`screen`])
//! Each knob's arm against `baseline`; comparison `k` (0-based, the plan's knob order) draws
//! its bootstrap from `seed + k`. Ranking: by Δp50 ascending (most negative first; an arm
//! without a Δ after those with one), arms that break strict-ready last, ties in catalogue
//! order. Winners: the faster knobs in rank order, a knob dropped when it conflicts
//! ([`truecold_proto::tune::conflicts`]) with a better-ranked winner. `recommended`: every
//! winner, in catalogue order.
//!
//! # Confirm ([`confirm`])
//! The final A/B: `recommended` against `baseline` (seed `seed + K`, `K` the number of
//! knobs). Leave-one-out, with two or more winners: for the `i`-th winner in catalogue order,
//! `recommended` against `recommended-minus-<k>` as its base (seed `seed + K + 1 + i`): the
//! effect of adding `k` to the rest of the combination. A winner whose leave-one-out verdict
//! is not faster (with one winner: whose final A/B is not faster) is *not confirmed in the
//! combination*.
//!
//! # Sizing n ([`rounds_for`])
//! Rounds per arm to detect the minimum effect `e` (a fraction of the p50) at two-sided
//! [`ALPHA`] with [`POWER_PCT`] % power, from the headline's coefficient of variation `cv`,
//! normal approximation: `n = 2 (z₀.₉₇₅ + z₀.₈₀)² (cv / e)²` for a difference of means,
//! times π/3 for the Mann–Whitney test's efficiency against it under normal data (3/π), so
//! `n = ceil(16.439 · (cv / e)²)` ([`SIZING_K_MILLI`]), at least [`MIN_ROUNDS`].
//!
//! # The verifier ([`verify_tune_dir`]; [`crate::verify_dir`] recognises `tune.json`)
//! `tune.json` parses, is in the writer's canonical bytes and is a plan (knobs known, in
//! catalogue order, each once, each applying to the guest; rounds > 0); each phase
//! directory verifies as a multi-arm directory (its reasons with `screen: ` / `confirm: ` in
//! front); the screen's arms are exactly `baseline` and one per knob, over `rounds.screen`
//! rounds, the confirm's exactly `baseline`, `recommended` (every recomputed winner) and
//! `recommended-minus-<k>` (two or more winners), over `rounds.confirm` rounds, and absent
//! when no knob won; the baselines run the plan's context (contract, vCPUs, memory,
//! backing) and both phases the same host kind and guest; the launches fit the budget;
//! `tune.json` and `README.md` byte for byte what the verified rows give; SHA256SUMS over
//! every file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Clock;
use truecold_proto::tune::{apply, check_set, conflicts, Change, Knob, TuneGuest, VmmChange};

use crate::arms::{
    knob_list, regenerate_arms, verify_arms_rows, ArmData, ArmRef, ArmsError, BASELINE_ARM,
    MINUS_PREFIX, RECOMMENDED_ARM, RESAMPLES,
};
use crate::bundle::{read_capped, MAX_PARSED_BYTES};
use crate::bundle_verify::check_signature;
use crate::compare::{bootstrap_delta_ci, fmt_p, mann_whitney_p};
use crate::report::{ms, README_FILE};
use crate::schema::{Backing, ContractKind, HostKind, ResultJson, Sample, HEADLINE};
use crate::stats::percentile_sorted;
use crate::summary::OK_WITHOUT_LATENCY;
use crate::sums::{is_valid_name, parse_sums_with, SumsError, SUMS_FILE};
use crate::verdict::{Check, Verdict, VerifyOptions};

/// The tune's file; its presence makes a directory a tune directory.
pub const TUNE_FILE: &str = "tune.json";
/// Version of `tune.json`.
pub const TUNE_SCHEMA: u32 = 1;
/// The screen phase's directory.
pub const SCREEN_DIR: &str = "screen";
/// The confirm phase's directory.
pub const CONFIRM_DIR: &str = "confirm";
/// Significance level of the Mann–Whitney test (two-sided).
pub const ALPHA: f64 = 0.05;
/// [`ALPHA`] as `tune.json` and the README write it.
pub const ALPHA_TEXT: &str = "0.05";
/// The smallest effect called faster or slower, and the half-width of "no effect": 1 % of
/// the base's p50, in ppm.
pub const MIN_EFFECT_PPM: u64 = 10_000;
/// Fewer successes on a side: inconclusive. Also the least [`rounds_for`] gives.
pub const MIN_ROUNDS: u64 = 5;
/// The power [`rounds_for`] sizes n for, percent.
pub const POWER_PCT: u64 = 80;
/// `1000 · 2 (z₀.₉₇₅ + z₀.₈₀)² · π/3`, rounded up (see the module doc).
pub const SIZING_K_MILLI: u64 = 16_439;

/// Rounds per arm that detect a `min_effect_ppm` change of the p50 at [`ALPHA`] with
/// [`POWER_PCT`] % power when the headline's coefficient of variation is `cv_ppm`:
/// `max(MIN_ROUNDS, ceil(SIZING_K_MILLI · cv² / (1000 · e²)))` (module doc). A zero minimum
/// effect needs `u64::MAX`.
pub fn rounds_for(cv_ppm: u64, min_effect_ppm: u64) -> u64 {
    if min_effect_ppm == 0 {
        return u64::MAX;
    }
    let num = u128::from(SIZING_K_MILLI) * u128::from(cv_ppm) * u128::from(cv_ppm);
    let den = 1000 * u128::from(min_effect_ppm) * u128::from(min_effect_ppm);
    let n = num.div_ceil(den);
    (n.min(u128::from(u64::MAX)) as u64).max(MIN_ROUNDS)
}

/// The coefficient of variation of `values` (sample standard deviation over the mean), ppm,
/// floored; `None` with fewer than two values or a zero mean.
pub fn cv_ppm(values: &[u64]) -> Option<u64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|&x| x as f64).sum::<f64>() / n;
    if mean <= 0.0 {
        return None;
    }
    let ss = values
        .iter()
        .map(|&x| (x as f64 - mean).powi(2))
        .sum::<f64>();
    let sd = (ss / (n - 1.0)).sqrt();
    Some((sd / mean * 1e6).floor() as u64)
}

/// One arm's rows as the tune statistics see them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuneArm {
    pub name: String,
    pub knobs: Vec<Knob>,
    /// Rows.
    pub attempts: u64,
    /// The successful rows' headlines, ascending.
    pub ok: Vec<u64>,
    /// Failed rows by error kind (as the bundle's error histogram counts them).
    pub errors: BTreeMap<String, u64>,
}

impl TuneArm {
    /// From an arm's rows (the bench, while it runs).
    pub fn new(name: impl Into<String>, knobs: Vec<Knob>, samples: &[Sample]) -> Self {
        let mut ok = Vec::new();
        let mut errors = BTreeMap::new();
        for s in samples {
            match (s.ok, s.latency_ns) {
                (true, Some(l)) => ok.push(l),
                (true, None) => *errors.entry(OK_WITHOUT_LATENCY.to_string()).or_insert(0) += 1,
                (false, _) => *errors.entry(s.error_kind.clone()).or_insert(0) += 1,
            }
        }
        ok.sort_unstable();
        TuneArm {
            name: name.into(),
            knobs,
            attempts: samples.len() as u64,
            ok,
            errors,
        }
    }

    /// From a multi-arm directory's arm (its verified error histogram).
    pub fn from_data(a: &ArmData) -> Self {
        TuneArm {
            name: a.arm.name.clone(),
            knobs: a.arm.knobs.clone(),
            attempts: a.attempts,
            ok: a.ok.clone(),
            errors: a.result.summary.errors.clone(),
        }
    }
}

/// An effect's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnobVerdict {
    Faster,
    Slower,
    NoEffect,
    Inconclusive,
    /// A failed row: "breaks strict-ready: <kind ×n, …>" (the kinds in [`Effect::failures`]).
    Breaks,
}

impl KnobVerdict {
    /// In words (without the error kinds of `breaks`).
    pub fn as_str(self) -> &'static str {
        match self {
            KnobVerdict::Faster => "faster",
            KnobVerdict::Slower => "slower",
            KnobVerdict::NoEffect => "no effect",
            KnobVerdict::Inconclusive => "inconclusive",
            KnobVerdict::Breaks => "breaks strict-ready",
        }
    }
}

/// One arm against its base arm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    /// The arm measured.
    pub arm: String,
    /// The arm it is measured against.
    pub base: String,
    /// The knobs whose effect this is (screen: the arm's knob; final A/B: every winner;
    /// leave-one-out: the winner left out of the base).
    pub knobs: Vec<Knob>,
    pub attempts: u64,
    /// Successful rows of the arm and of the base.
    pub n: u64,
    pub n_base: u64,
    pub p50_ns: Option<u64>,
    pub p50_base_ns: Option<u64>,
    /// p50(arm) − p50(base).
    pub delta_p50_ns: Option<i64>,
    /// Δp50 in ppm of the base's p50, truncated toward zero.
    pub delta_ppm: Option<i64>,
    /// Percentile-bootstrap 95 % interval of Δp50.
    pub ci95_ns: Option<[i64; 2]>,
    /// Two-sided Mann–Whitney p, three significant digits.
    pub mann_whitney_p: Option<String>,
    /// The bootstrap's seed.
    pub seed: u64,
    pub verdict: KnobVerdict,
    /// The arm's failed rows by error kind.
    pub failures: BTreeMap<String, u64>,
}

impl Effect {
    /// The verdict in words: `breaks strict-ready: deadline ×2, vmm_exit ×1`.
    pub fn verdict_text(&self) -> String {
        match self.verdict {
            KnobVerdict::Breaks => format!(
                "breaks strict-ready: {}",
                self.failures
                    .iter()
                    .map(|(k, n)| format!("{k} ×{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            v => v.as_str().to_string(),
        }
    }
}

/// `arm` against `base` (module doc), its bootstrap seeded with `seed`.
pub fn effect(base: &TuneArm, arm: &TuneArm, knobs: Vec<Knob>, seed: u64) -> Effect {
    let p50 = percentile_sorted(&arm.ok, 50, 100);
    let p50_base = percentile_sorted(&base.ok, 50, 100);
    let delta = p50.zip(p50_base).map(|(a, b)| {
        (i128::from(a) - i128::from(b)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
    });
    let ppm = |d: i64| -> Option<i64> {
        p50_base.filter(|b| *b > 0).map(|b| {
            (i128::from(d) * 1_000_000 / i128::from(b)).clamp(i64::MIN.into(), i64::MAX.into())
                as i64
        })
    };
    let ci = bootstrap_delta_ci(&base.ok, &arm.ok, RESAMPLES, seed).map(|(l, h)| [l, h]);
    let p = mann_whitney_p(&base.ok, &arm.ok);
    let failed = arm.errors.values().sum::<u64>() > 0 || arm.attempts > arm.ok.len() as u64;
    let enough = arm.ok.len() as u64 >= MIN_ROUNDS && base.ok.len() as u64 >= MIN_ROUNDS;
    // |x| ≥ the minimum effect, in integers: |x| · 1e6 ≥ MIN_EFFECT_PPM · p50(base).
    let min = p50_base.map(|b| i128::from(MIN_EFFECT_PPM) * i128::from(b));
    let at_least = |x: i64| min.is_some_and(|m| i128::from(x).abs() * 1_000_000 >= m);
    let inside = |x: i64| min.is_some_and(|m| i128::from(x).abs() * 1_000_000 < m);
    let verdict = if failed {
        KnobVerdict::Breaks
    } else if !enough {
        KnobVerdict::Inconclusive
    } else {
        match (delta, ci, p) {
            (Some(d), Some([_, hi]), Some(p)) if p < ALPHA && at_least(d) && hi < 0 && d < 0 => {
                KnobVerdict::Faster
            }
            (Some(d), Some([lo, _]), Some(p)) if p < ALPHA && at_least(d) && lo > 0 && d > 0 => {
                KnobVerdict::Slower
            }
            (_, Some([lo, hi]), _) if inside(lo) && inside(hi) => KnobVerdict::NoEffect,
            _ => KnobVerdict::Inconclusive,
        }
    };
    let mut failures = arm.errors.clone();
    failures.retain(|_, n| *n > 0);
    Effect {
        arm: arm.name.clone(),
        base: base.name.clone(),
        knobs,
        attempts: arm.attempts,
        n: arm.ok.len() as u64,
        n_base: base.ok.len() as u64,
        p50_ns: p50,
        p50_base_ns: p50_base,
        delta_p50_ns: delta,
        delta_ppm: delta.and_then(ppm),
        ci95_ns: ci,
        mann_whitney_p: p.map(fmt_p),
        seed,
        verdict,
        failures,
    }
}

/// A winner dropped for a conflict with a better-ranked one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    pub knob: Knob,
    pub conflicts_with: Knob,
}

/// The baseline arm as the tables show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSummary {
    pub attempts: u64,
    pub n: u64,
    pub p50_ns: Option<u64>,
    pub failures: BTreeMap<String, u64>,
    /// The coefficient of variation of its successful headlines, ppm ([`cv_ppm`]).
    pub cv_ppm: Option<u64>,
    /// [`rounds_for`] that CV and [`MIN_EFFECT_PPM`]: the rounds a next tune of this
    /// configuration needs.
    pub rounds_for_cv: Option<u64>,
}

impl BaselineSummary {
    fn of(b: &TuneArm) -> Self {
        let cv = cv_ppm(&b.ok);
        BaselineSummary {
            attempts: b.attempts,
            n: b.ok.len() as u64,
            p50_ns: percentile_sorted(&b.ok, 50, 100),
            failures: b
                .errors
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (k.clone(), *n))
                .collect(),
            cv_ppm: cv,
            rounds_for_cv: cv.map(|c| rounds_for(c, MIN_EFFECT_PPM)),
        }
    }
}

/// The screen phase's results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Screen {
    pub baseline: BaselineSummary,
    /// Each knob's arm against the baseline, in the plan's knob order.
    pub effects: Vec<Effect>,
    /// The knobs, best first.
    pub ranking: Vec<Knob>,
    /// The faster knobs in rank order, conflicts dropped.
    pub winners: Vec<Knob>,
    pub dropped: Vec<Dropped>,
    /// Every winner, in catalogue order: the `recommended` arm's knobs.
    pub recommended: Vec<Knob>,
}

/// The screen's statistics: each arm of `knobs` (one knob each, in `arms`) against
/// `baseline` (module doc). `arms[k]` is the arm of the `k`-th knob; seeds `seed + k`.
pub fn screen(seed: u64, baseline: &TuneArm, arms: &[TuneArm]) -> Screen {
    let effects: Vec<Effect> = arms
        .iter()
        .enumerate()
        .map(|(k, a)| effect(baseline, a, a.knobs.clone(), seed.wrapping_add(k as u64)))
        .collect();
    let ranking = rank(&effects);
    let (winners, dropped) = winners(&effects, &ranking);
    let mut recommended = winners.clone();
    recommended.sort();
    Screen {
        baseline: BaselineSummary::of(baseline),
        effects,
        ranking,
        winners,
        dropped,
        recommended,
    }
}

/// The screened knobs, best first: Δp50 ascending, no Δ after a Δ, breaks last, ties in
/// catalogue order. A screen effect has one knob; an effect without one is not ranked.
pub fn rank(effects: &[Effect]) -> Vec<Knob> {
    let mut keyed: Vec<((bool, bool, i64), Knob)> = effects
        .iter()
        .filter_map(|e| {
            let k = *e.knobs.first()?;
            let breaks = e.verdict == KnobVerdict::Breaks;
            Some((
                (
                    breaks,
                    e.delta_p50_ns.is_none(),
                    e.delta_p50_ns.unwrap_or(0),
                ),
                k,
            ))
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, k)| k).collect()
}

/// The winners: faster knobs in `ranking` order, each conflicting with a better-ranked
/// winner dropped.
pub fn winners(effects: &[Effect], ranking: &[Knob]) -> (Vec<Knob>, Vec<Dropped>) {
    let faster: BTreeSet<Knob> = effects
        .iter()
        .filter(|e| e.verdict == KnobVerdict::Faster)
        .filter_map(|e| e.knobs.first().copied())
        .collect();
    let (mut won, mut dropped) = (Vec::new(), Vec::new());
    for k in ranking.iter().filter(|k| faster.contains(k)) {
        match won.iter().find(|w| conflicts(**w, *k)) {
            Some(w) => dropped.push(Dropped {
                knob: *k,
                conflicts_with: *w,
            }),
            None => won.push(*k),
        }
    }
    (won, dropped)
}

/// The confirm phase's results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirm {
    /// `recommended` against `baseline`.
    pub final_ab: Effect,
    /// Per winner (catalogue order; two or more winners): `recommended` against
    /// `recommended-minus-<k>`.
    pub leave_one_out: Vec<Effect>,
    /// Winners whose contribution inside the combination is not faster.
    pub not_confirmed: Vec<Knob>,
}

/// The confirm phase's statistics (module doc): `minus[i]` is the arm without the `i`-th
/// knob of `recommended.knobs` (empty with one winner); `knobs` is the tune's knob count.
pub fn confirm(
    seed: u64,
    knobs: usize,
    baseline: &TuneArm,
    recommended: &TuneArm,
    minus: &[TuneArm],
) -> Confirm {
    let s0 = seed.wrapping_add(knobs as u64);
    let final_ab = effect(baseline, recommended, recommended.knobs.clone(), s0);
    let leave_one_out: Vec<Effect> = recommended
        .knobs
        .iter()
        .zip(minus)
        .enumerate()
        .map(|(i, (k, m))| effect(m, recommended, vec![*k], s0.wrapping_add(1 + i as u64)))
        .collect();
    let not_confirmed = if leave_one_out.is_empty() {
        if final_ab.verdict == KnobVerdict::Faster {
            Vec::new()
        } else {
            recommended.knobs.clone()
        }
    } else {
        leave_one_out
            .iter()
            .filter(|e| e.verdict != KnobVerdict::Faster)
            .flat_map(|e| e.knobs.clone())
            .collect()
    };
    Confirm {
        final_ab,
        leave_one_out,
        not_confirmed,
    }
}

/// The screen phase's arms: `baseline`, then one per knob (named by it).
pub fn screen_arms(knobs: &[Knob]) -> Vec<ArmRef> {
    std::iter::once(ArmRef::tune(BASELINE_ARM, Vec::new()))
        .chain(knobs.iter().map(|k| ArmRef::tune(k.as_str(), vec![*k])))
        .collect()
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
    bad
}

/// `tune.json`'s context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Context {
    vcpus: u32,
    mem_bytes: u64,
    backing: Backing,
}

/// `tune.json`'s rounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rounds {
    screen: u64,
    confirm: u64,
}

/// `tune.json`'s statement of the rules (fixed text and constants).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    metric: String,
    alpha: String,
    min_effect_ppm: u64,
    min_rounds: u64,
    resamples: u64,
    bootstrap: String,
    verdict: String,
    ranking: String,
    sizing: String,
}

fn rule() -> Rule {
    Rule {
        metric: format!("{HEADLINE}, each arm's successful rows"),
        alpha: ALPHA_TEXT.into(),
        min_effect_ppm: MIN_EFFECT_PPM,
        min_rounds: MIN_ROUNDS,
        resamples: RESAMPLES as u64,
        bootstrap: "percentile bootstrap of p50(arm) - p50(base), 95 %, SplitMix64; screen \
                    effect k (plan's knob order) seed + k, the final A/B seed + K (K knobs), \
                    leave-one-out i seed + K + 1 + i"
            .into(),
        verdict: format!(
            "breaks strict-ready if the arm has a failed row; inconclusive with fewer than \
             {MIN_ROUNDS} successes a side; faster/slower if the 95 % interval excludes 0, \
             Mann-Whitney p < {ALPHA_TEXT} and |delta p50| >= {MIN_EFFECT_PPM} ppm of the \
             base's p50; no effect if the interval lies strictly inside +-that; else \
             inconclusive"
        ),
        ranking: "delta p50 ascending, breaks last, ties in catalogue order; winners: faster \
                  knobs in rank order, one conflicting with a better-ranked winner dropped"
            .into(),
        sizing: format!(
            "rounds per arm = max({MIN_ROUNDS}, ceil({SIZING_K_MILLI}/1000 * (cv / e)^2)): \
             2 (z_0.975 + z_0.80)^2 (cv/e)^2 times pi/3 (Mann-Whitney vs t efficiency), \
             alpha {ALPHA_TEXT} two-sided, power {POWER_PCT} %"
        ),
    }
}

/// `tune.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TuneFile {
    schema: u32,
    seed: u64,
    guest: ContractKind,
    knobs: Vec<Knob>,
    context: Context,
    rounds: Rounds,
    budget: Option<u64>,
    noise: Option<Noise>,
    rule: Rule,
    host_kind: Option<HostKind>,
    clock: Option<Clock>,
    /// Rows of every arm of both phases.
    launches: u64,
    screen: Screen,
    confirm: Option<Confirm>,
}

fn guest_kind(g: TuneGuest) -> ContractKind {
    match g {
        TuneGuest::Probe => ContractKind::Probe,
        TuneGuest::Linux => ContractKind::Linux,
    }
}

impl TuneFile {
    fn plan(&self) -> TunePlan {
        TunePlan {
            seed: self.seed,
            guest: self.guest.tune_guest(),
            knobs: self.knobs.clone(),
            vcpus: self.context.vcpus,
            mem_bytes: self.context.mem_bytes,
            backing: self.context.backing,
            rounds_screen: self.rounds.screen,
            rounds_confirm: self.rounds.confirm,
            budget: self.budget,
            noise: self.noise.clone(),
        }
    }
}

fn tune_bytes(f: &TuneFile) -> Vec<u8> {
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

/// A phase as read: its verdict and its arms by name.
struct Phase {
    verdict: Verdict,
    arms: Option<Vec<ArmRef>>,
    rounds: u64,
    data: BTreeMap<String, ArmData>,
    /// The arms whose bundle carries an attribution (`attribution.svg`; the arm's own
    /// verifier checks it).
    attributed: BTreeSet<String>,
}

fn read_phase(dir: &Path) -> Phase {
    let r = verify_arms_rows(dir, &VerifyOptions::default());
    let attributed = r
        .plan
        .as_ref()
        .map(|p| {
            p.arms
                .iter()
                .filter(|a| {
                    is_valid_name(&a.name)
                        && crate::fsio::is_real_file(
                            &dir.join(&a.name).join(crate::attribution::SVG_FILE),
                        )
                })
                .map(|a| a.name.clone())
                .collect()
        })
        .unwrap_or_default();
    Phase {
        attributed,
        verdict: r.verdict,
        arms: r.plan.as_ref().map(|p| p.arms.clone()),
        rounds: r.plan.as_ref().map_or(0, |p| p.rounds),
        data: r
            .arms
            .into_iter()
            .map(|a| (a.arm.name.clone(), a))
            .collect(),
    }
}

/// The screen of a tune while it runs: `dir` is the screen's multi-arm directory the bench
/// has just written; its verified arms go through [`screen`], the computation
/// [`write_tune`] and the verifier make later. An arm without a readable bundle is an error.
pub fn screen_of_dir(dir: &Path, seed: u64, knobs: &[Knob]) -> Result<Screen, TuneError> {
    let p = read_phase(dir);
    let arm = |name: &str| {
        p.data
            .get(name)
            .map(TuneArm::from_data)
            .ok_or_else(|| TuneError::Phase {
                phase: SCREEN_DIR,
                why: format!("arm `{name}` has no readable bundle"),
            })
    };
    let base = arm(BASELINE_ARM)?;
    let arms = knobs
        .iter()
        .map(|k| arm(k.as_str()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(screen(seed, &base, &arms))
}

/// Everything the results are computed from.
struct Measured {
    screen: Phase,
    confirm: Option<Phase>,
}

/// Why the results cannot be computed: a phase (or an arm of it) is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Missing {
    /// An arm of this phase has no parsed bundle.
    Arm(&'static str, String),
    /// The screen has winners and there is no confirm phase.
    Confirm(Vec<Knob>),
}

impl Missing {
    fn phase(&self) -> &'static str {
        match self {
            Missing::Arm(p, _) => p,
            Missing::Confirm(_) => CONFIRM_DIR,
        }
    }
    fn why(&self) -> String {
        match self {
            Missing::Arm(p, a) => format!("arm `{a}` of `{p}/` has no parsed bundle"),
            Missing::Confirm(w) => format!(
                "the confirm phase `{CONFIRM_DIR}/` is missing: the screen's winners are [{}]",
                knob_list(w)
            ),
        }
    }
}

/// The results of `plan` over the phases' arms.
fn results(plan: &TunePlan, m: &Measured) -> Result<TuneFile, Missing> {
    let arm = |phase: &'static str, p: &Phase, name: &str| -> Result<TuneArm, Missing> {
        p.data
            .get(name)
            .map(TuneArm::from_data)
            .ok_or_else(|| Missing::Arm(phase, name.to_string()))
    };
    let base = arm(SCREEN_DIR, &m.screen, BASELINE_ARM)?;
    let knob_arms = plan
        .knobs
        .iter()
        .map(|k| arm(SCREEN_DIR, &m.screen, k.as_str()))
        .collect::<Result<Vec<_>, _>>()?;
    let sc = screen(plan.seed, &base, &knob_arms);
    let confirm = match (&m.confirm, sc.recommended.is_empty()) {
        (_, true) => None,
        (None, false) => return Err(Missing::Confirm(sc.winners.clone())),
        (Some(c), false) => {
            let names = confirm_arms(&sc.recommended);
            let b = arm(CONFIRM_DIR, c, BASELINE_ARM)?;
            let r = arm(CONFIRM_DIR, c, RECOMMENDED_ARM)?;
            let minus = names[2..]
                .iter()
                .map(|a| arm(CONFIRM_DIR, c, &a.name))
                .collect::<Result<Vec<_>, _>>()?;
            Some(self::confirm(plan.seed, plan.knobs.len(), &b, &r, &minus))
        }
    };
    let first: Option<&ResultJson> = m.screen.data.get(BASELINE_ARM).map(|a| &a.result);
    let host = first.map(|r| r.environment.host_kind);
    let launches = m
        .screen
        .data
        .values()
        .chain(m.confirm.iter().flat_map(|c| c.data.values()))
        .map(|a| a.attempts)
        .sum();
    Ok(TuneFile {
        schema: TUNE_SCHEMA,
        seed: plan.seed,
        guest: guest_kind(plan.guest),
        knobs: plan.knobs.clone(),
        context: Context {
            vcpus: plan.vcpus,
            mem_bytes: plan.mem_bytes,
            backing: plan.backing,
        },
        rounds: Rounds {
            screen: plan.rounds_screen,
            confirm: plan.rounds_confirm,
        },
        budget: plan.budget,
        noise: plan.noise.clone(),
        rule: rule(),
        host_kind: host,
        clock: host.map(HostKind::clock),
        launches,
        screen: sc,
        confirm,
    })
}

fn signed_ms(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "+" };
    format!("{sign}{}", ms(v.unsigned_abs()))
}

/// ppm as a percentage with two decimals, truncated: `-5.23 %`.
fn pct(ppm: i64) -> String {
    let sign = if ppm < 0 { "-" } else { "+" };
    let a = ppm.unsigned_abs();
    format!("{sign}{}.{:02} %", a / 10_000, (a / 100) % 100)
}

fn opt_ms(v: Option<u64>) -> String {
    v.map_or("–".into(), ms)
}

fn effect_cells(e: &Effect) -> String {
    format!(
        "{} | {} | {} | {} | {} | {} | {}",
        e.n,
        opt_ms(e.p50_ns),
        e.delta_p50_ns.map_or("–".into(), signed_ms),
        e.delta_ppm.map_or("–".into(), pct),
        e.ci95_ns.map_or("–".into(), |[l, h]| format!(
            "[{}, {}]",
            signed_ms(l),
            signed_ms(h)
        )),
        e.mann_whitney_p.as_deref().unwrap_or("–"),
        e.verdict_text()
    )
}

/// The VMM flag a VMM knob sets, in words.
fn vmm_flag(k: Knob) -> Option<String> {
    match k.change() {
        Change::Vmm(VmmChange::Backing(b)) => Some(format!("`--backing {}`", b.as_str())),
        Change::Vmm(VmmChange::Console) => Some("`--console`".into()),
        Change::Vmm(VmmChange::BzImage) => {
            Some("boot the bzImage (64-bit boot protocol) instead of vmlinux's PVH entry".into())
        }
        _ => None,
    }
}

/// The tune directory's `README.md`.
fn readme(f: &TuneFile, baseline: Option<&ResultJson>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# truecold tune: {} knob(s), {} guest\n",
        f.knobs.len(),
        f.guest.as_str()
    );
    if let Some(h) = f.host_kind {
        let _ = writeln!(s, "- host kind: {}", h.as_str());
        let _ = writeln!(s, "- clock: {}", Clock::describe(h.clock()));
    }
    if let Some(r) = baseline {
        let _ = writeln!(
            s,
            "- contract: {} ({}), observed at the VM exit; deadline {} ms; every arm a \
             complete bundle, failures kept as rows",
            r.contract.label,
            r.contract.mode.describe(),
            ms(r.contract.deadline_ns)
        );
    }
    let _ = writeln!(
        s,
        "- context (not knobs): {} vCPU, {}, backing {}",
        f.context.vcpus,
        crate::report::mem_text(f.context.mem_bytes),
        f.context.backing.as_str()
    );
    let _ = writeln!(
        s,
        "- phases: screen ({} rounds: baseline + one arm per knob), confirm ({} rounds: \
         baseline, recommended, recommended-minus-<knob>); each round launches every arm of \
         its phase once, in a shuffled order (`<phase>/arms.json`)",
        f.rounds.screen, f.rounds.confirm
    );
    let _ = writeln!(
        s,
        "- launches: {}{}; bootstrap seed {}\n",
        f.launches,
        f.budget
            .map_or(", no budget".into(), |b| format!(" of a budget of {b}")),
        f.seed
    );
    let _ = writeln!(
        s,
        "## Verdict rule\n\nEach arm against its base over the successful rows ({HEADLINE}): \
         Δp50 = p50(arm) − p50(base), a percentile-bootstrap 95 % interval of Δp50 ({} \
         resamples), the two-sided Mann–Whitney p. **breaks strict-ready**: the arm has a \
         failed row (never faster); **inconclusive**: fewer than {MIN_ROUNDS} successes a \
         side; **faster** / **slower**: the interval excludes 0, p < {ALPHA_TEXT} and \
         |Δp50| ≥ {}.{:02} % of the base's p50; **no effect**: the interval lies strictly \
         inside ± that; **inconclusive** otherwise. Exact figures in {TUNE_FILE}.\n",
        RESAMPLES,
        MIN_EFFECT_PPM / 10_000,
        (MIN_EFFECT_PPM / 100) % 100
    );
    let b = &f.screen.baseline;
    let _ = writeln!(
        s,
        "## Screen: each knob against the baseline\n\nbaseline: {} of {} launches \
         successful, p50 {} ms.\n",
        b.n,
        b.attempts,
        opt_ms(b.p50_ns)
    );
    let _ = writeln!(
        s,
        "| rank | knob | class | n | p50 ms | Δp50 ms | Δp50 | 95 % CI ms | p | verdict |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    );
    for (i, k) in f.screen.ranking.iter().enumerate() {
        if let Some(e) = f.screen.effects.iter().find(|e| e.knobs == [*k]) {
            let _ = writeln!(
                s,
                "| {} | [{k}]({SCREEN_DIR}/{k}/README.md) | {} | {} |",
                i + 1,
                k.class().as_str(),
                effect_cells(e)
            );
        }
    }
    let _ = writeln!(s, "\n## Breaks strict-ready\n");
    let breaks: Vec<&Effect> = f
        .screen
        .effects
        .iter()
        .filter(|e| e.verdict == KnobVerdict::Breaks)
        .collect();
    if breaks.is_empty() {
        let _ = writeln!(s, "No knob's arm had a failed launch.");
    }
    for e in breaks {
        let _ = writeln!(s, "- {}: {}", knob_list(&e.knobs), e.verdict_text());
    }
    if !b.failures.is_empty() {
        let _ = writeln!(
            s,
            "- the baseline itself: {}",
            b.failures
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(s, "\n## Recommended configuration\n");
    if f.screen.winners.is_empty() {
        let _ = writeln!(
            s,
            "No knob is faster by the rule: nothing to recommend, no confirm phase."
        );
    } else {
        let _ = writeln!(s, "Winners (rank order): {}.", knob_list(&f.screen.winners));
        for d in &f.screen.dropped {
            let _ = writeln!(
                s,
                "\n`{}` is faster too but conflicts with the better-ranked `{}`: dropped.",
                d.knob, d.conflicts_with
            );
        }
        let applied = apply(&f.screen.recommended, f.context.backing);
        let _ = writeln!(
            s,
            "\nKernel fragment (merged after `kernel-config/base.config`):\n"
        );
        if applied.fragments.is_empty() {
            let _ = writeln!(s, "none");
        } else {
            let _ = writeln!(s, "```");
            for (name, text) in &applied.fragments {
                let _ = write!(s, "# {name}\n{text}");
            }
            let _ = writeln!(s, "```");
        }
        let _ = writeln!(
            s,
            "\nCommand line (appended to the base): {}",
            if applied.cmdline_extra.is_empty() {
                "none".into()
            } else {
                format!("`{}`", applied.cmdline_extra)
            }
        );
        let flags: Vec<String> = f
            .screen
            .recommended
            .iter()
            .filter_map(|k| vmm_flag(*k))
            .collect();
        let _ = writeln!(
            s,
            "\nVMM flags: {}",
            if flags.is_empty() {
                "none".into()
            } else {
                flags.join(", ")
            }
        );
    }
    if let Some(c) = &f.confirm {
        let _ = writeln!(
            s,
            "\n## Final A/B: recommended against baseline\n\n| arm | base | n | p50 ms | Δp50 ms \
             | Δp50 | 95 % CI ms | p | verdict |\n|---|---|---|---|---|---|---|---|---|"
        );
        let e = &c.final_ab;
        let _ = writeln!(s, "| {} | {} | {} |", e.arm, e.base, effect_cells(e));
        let _ = writeln!(s, "\n## Leave-one-out\n");
        if c.leave_one_out.is_empty() {
            let _ = writeln!(
                s,
                "One winner: the final A/B is its leave-one-out (the combination without it \
                 is the baseline)."
            );
        } else {
            let _ = writeln!(
                s,
                "Each winner's effect inside the combination: `recommended` against \
                 `recommended-minus-<knob>`.\n\n| knob | n | p50 ms | Δp50 ms | Δp50 | 95 % CI \
                 ms | p | verdict |\n|---|---|---|---|---|---|---|---|"
            );
            for e in &c.leave_one_out {
                let _ = writeln!(s, "| {} | {} |", knob_list(&e.knobs), effect_cells(e));
            }
        }
        if c.not_confirmed.is_empty() {
            let _ = writeln!(s, "\nEvery winner is confirmed in the combination.");
        } else {
            let _ = writeln!(
                s,
                "\nNot confirmed in the combination: {}.",
                knob_list(&c.not_confirmed)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n## How n was sized\n\nRounds per arm to detect a change of {}.{:02} % of the \
         p50 at two-sided α = {ALPHA_TEXT} with {POWER_PCT} % power, from the headline's \
         coefficient of variation cv (normal approximation; π/3 for the Mann–Whitney test's \
         efficiency): n = max({MIN_ROUNDS}, ⌈{}.{:03} · (cv / e)²⌉).\n",
        MIN_EFFECT_PPM / 10_000,
        (MIN_EFFECT_PPM / 100) % 100,
        SIZING_K_MILLI / 1000,
        SIZING_K_MILLI % 1000
    );
    match &f.noise {
        Some(n) => {
            let _ = writeln!(
                s,
                "- sized from cv {} ppm ({}): n = {}",
                n.cv_ppm,
                n.source,
                rounds_for(n.cv_ppm, MIN_EFFECT_PPM)
            );
        }
        None => {
            let _ = writeln!(s, "- n was given, not sized from a measured noise");
        }
    }
    let _ = writeln!(
        s,
        "- run: {} rounds (screen), {} rounds (confirm)",
        f.rounds.screen, f.rounds.confirm
    );
    if let (Some(cv), Some(n)) = (b.cv_ppm, b.rounds_for_cv) {
        let _ = writeln!(
            s,
            "- this tune's baseline: cv {cv} ppm, so a next tune of this configuration needs n = {n}"
        );
    }
    let _ = writeln!(
        s,
        "\n## Knobs\n\n| knob | class | what | source |\n|---|---|---|---|"
    );
    for k in &f.knobs {
        let _ = writeln!(
            s,
            "| {k} | {} | {} | {} |",
            k.class().as_str(),
            k.what(),
            k.source()
        );
    }
    let _ = writeln!(
        s,
        "\nEach phase is a multi-arm directory and each arm a complete bundle; \
         `truecold-proof verify <tune>` checks them all and recomputes every figure here; \
         `sha256sum -c --strict {SUMS_FILE}` checks every file."
    );
    s
}

/// `tune.json` and `README.md` for the results.
fn generated(f: &TuneFile, m: &Measured) -> Vec<(String, Vec<u8>)> {
    let baseline = m.screen.data.get(BASELINE_ARM).map(|a| &a.result);
    let mut text = readme(f, baseline);
    text.push_str(&attribution_section(m));
    vec![
        (TUNE_FILE.to_string(), tune_bytes(f)),
        (README_FILE.to_string(), text.into_bytes()),
    ]
}

/// The README's attribution section: the attributed arms of the last phase (the confirm
/// phase's `baseline` and `recommended` when it ran, else the screen's `baseline`), side by
/// side; empty when no arm carries one.
fn attribution_section(m: &Measured) -> String {
    let (dir, phase) = match &m.confirm {
        Some(c) => (CONFIRM_DIR, c),
        None => (SCREEN_DIR, &m.screen),
    };
    let arms: Vec<&str> = [BASELINE_ARM, RECOMMENDED_ARM]
        .into_iter()
        .filter(|a| phase.attributed.contains(*a))
        .collect();
    if arms.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Attribution: where the time goes\n\nEach from launches run after the phase's \
         measured rounds with `initcall_debug` (never rows of samples.csv): host stages with \
         the VMM's exits and page faults, guest phases and the longest initcalls on one \
         clock; each `attribution.csv` says whether its total represents the arm's measured \
         p50 (bound 10 %).\n\n",
    );
    let _ = writeln!(s, "| {} |", arms.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(arms.len()));
    let cells: Vec<String> = arms
        .iter()
        .map(|a| {
            format!(
                "![{a}]({dir}/{a}/{svg}) [csv]({dir}/{a}/{csv})",
                svg = crate::attribution::SVG_FILE,
                csv = crate::attribution::CSV_FILE
            )
        })
        .collect();
    let _ = writeln!(s, "| {} |", cells.join(" | "));
    s
}

/// A `SHA256SUMS` name of a tune directory: `file`, `phase/file` or `phase/arm/file`.
pub fn is_valid_tune_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 3)
}

fn parse_tune_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_tune_path)
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), TuneError> {
    Ok(crate::skeleton::write(dir, name, bytes)?)
}

fn write_sums(dir: &Path) -> Result<(), TuneError> {
    Ok(crate::skeleton::write_tree_sums(dir, 3)?)
}

/// Reads both phases of `dir` for `plan`, checking their arms are the plan's.
fn measure(dir: &Path, plan: &TunePlan) -> Result<(Measured, TuneFile), TuneError> {
    let problems = tune_plan_problems(plan);
    if !problems.is_empty() {
        return Err(TuneError::Plan(problems.join("; ")));
    }
    let screen = read_phase(&dir.join(SCREEN_DIR));
    let want = screen_arms(&plan.knobs);
    if screen.arms.as_ref() != Some(&want) {
        return Err(TuneError::Phase {
            phase: SCREEN_DIR,
            why: format!(
                "its arms.json does not plan [{}]",
                want.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let cdir = dir.join(CONFIRM_DIR);
    let confirm = crate::fsio::is_real_dir(&cdir).then(|| read_phase(&cdir));
    let m = Measured { screen, confirm };
    let f = results(plan, &m).map_err(|e| TuneError::Phase {
        phase: e.phase(),
        why: e.why(),
    })?;
    if let Some(c) = &m.confirm {
        let want = confirm_arms(&f.screen.recommended);
        if f.screen.recommended.is_empty() || c.arms.as_ref() != Some(&want) {
            return Err(TuneError::Phase {
                phase: CONFIRM_DIR,
                why: format!(
                    "its arms are not the confirmation of the winners [{}]",
                    knob_list(&f.screen.winners)
                ),
            });
        }
    }
    Ok((m, f))
}

/// Writes `tune.json`, `README.md` and `SHA256SUMS` into `dir` (each atomically), after the
/// bench wrote `dir/screen` and (when a knob won) `dir/confirm` as multi-arm directories
/// ([`crate::arms::write_arms`]), and returns the verifier's verdict on the whole directory.
/// The results are computed from the arms' rows on disk (an arm that does not verify is
/// still counted; the verdict says why it is invalid).
pub fn write_tune(dir: &Path, plan: &TunePlan) -> Result<Verdict, TuneError> {
    let (m, f) = measure(dir, plan)?;
    for (name, bytes) in generated(&f, &m) {
        write_atomic(dir, &name, &bytes)?;
    }
    write_sums(dir)?;
    Ok(verify_tune_dir(dir, &VerifyOptions::default()))
}

/// `report DIR` on a tune directory: regenerates each phase ([`regenerate_arms`]), then
/// `tune.json`'s results, `README.md` and `SHA256SUMS`. Refuses when a file that is not
/// regenerated (`tune.json` included: its plan is not) differs from its `SHA256SUMS` entry.
/// Returns the paths rewritten.
pub fn regenerate_tune(dir: &Path) -> Result<Vec<String>, TuneError> {
    let listed = crate::skeleton::read_listing(dir, parse_tune_sums)?;
    let regenerated = |n: &str| {
        let parts: Vec<&str> = n.split('/').collect();
        match parts.as_slice() {
            [f] => *f == README_FILE,
            [_, f] => [
                crate::arms::COMPARISON_FILE,
                README_FILE,
                crate::arms::ARMS_CDF_FILE,
                SUMS_FILE,
            ]
            .contains(f),
            [_, _, f] => [
                README_FILE,
                crate::plot::CDF_FILE,
                crate::plot::STAGES_FILE,
                SUMS_FILE,
            ]
            .contains(f),
            _ => false,
        }
    };
    crate::skeleton::check_unchanged(dir, &listed, regenerated)?;
    let tb = crate::skeleton::read_record(&dir.join(TUNE_FILE))?;
    let file: TuneFile = serde_json::from_slice(&tb).map_err(TuneError::Json)?;
    let mut written = Vec::new();
    for phase in [SCREEN_DIR, CONFIRM_DIR] {
        let pd = dir.join(phase);
        if crate::fsio::is_real_dir(&pd) {
            let names = regenerate_arms(&pd).map_err(|source| TuneError::Arms { phase, source })?;
            written.extend(names.into_iter().map(|n| format!("{phase}/{n}")));
        }
    }
    let (m, f) = measure(dir, &file.plan())?;
    for (name, bytes) in generated(&f, &m) {
        write_atomic(dir, &name, &bytes)?;
        written.push(name);
    }
    write_sums(dir)?;
    written.push(SUMS_FILE.to_string());
    Ok(written)
}

/// Verifies a tune directory (see the module doc); [`crate::verify_dir`] calls this when
/// `dir` holds `tune.json`.
pub fn verify_tune_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let mut v = Verdict::default();
    let tp = dir.join(TUNE_FILE);
    let bytes = match read_capped(&tp, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{TUNE_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return v;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {TUNE_FILE}: {e}"));
            return v;
        }
    };
    let file: Option<TuneFile> = match serde_json::from_slice::<TuneFile>(&bytes) {
        Ok(f) if f.schema != TUNE_SCHEMA => {
            v.add(
                Check::TunePlan,
                format!(
                    "{TUNE_FILE}: schema {}, this verifier reads {TUNE_SCHEMA}",
                    f.schema
                ),
            );
            None
        }
        Ok(f) => {
            if tune_bytes(&f) != bytes {
                v.add(
                    Check::TunePlan,
                    format!("{TUNE_FILE} is not in the writer's canonical form"),
                );
            }
            Some(f)
        }
        Err(e) => {
            v.add(Check::TunePlan, format!("{TUNE_FILE} does not parse: {e}"));
            None
        }
    };
    let plan = file.as_ref().map(TuneFile::plan);
    if let Some(p) = &plan {
        for why in tune_plan_problems(p) {
            v.add(Check::TunePlan, format!("{TUNE_FILE}: {why}"));
        }
    }
    // Top entries: the tune's files and the two phases.
    let mut phases_present = BTreeSet::new();
    match fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    if name == SCREEN_DIR || name == CONFIRM_DIR {
                        phases_present.insert(name);
                    } else {
                        v.add(
                            Check::NotAFile,
                            format!("`{name}` is a directory but not a phase"),
                        );
                    }
                }
            }
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return v;
        }
    }
    for r in [TUNE_FILE, README_FILE, SUMS_FILE] {
        if !crate::fsio::is_real_file(&dir.join(r)) {
            v.add(
                Check::RequiredFileMissing,
                format!("required file `{r}` is missing"),
            );
        }
    }
    // SHA256SUMS over every file of the tree.
    let Some((sums, sig)) = crate::bundle_verify::check_tree_sums(
        &mut v,
        dir,
        3,
        parse_tune_sums,
        "a phase's or arm's directory",
    ) else {
        return v;
    };
    // The phases.
    let phase = |name: &'static str, v: &mut Verdict| -> Option<Phase> {
        if !phases_present.contains(name) {
            return None;
        }
        let p = read_phase(&dir.join(name));
        if let Some(u) = &p.verdict.unreadable {
            v.add(Check::TunePhase, format!("{name}: unreadable: {u}"));
        }
        for r in &p.verdict.reasons {
            v.add(r.check, format!("{name}: {}", r.detail));
        }
        Some(p)
    };
    let screen = phase(SCREEN_DIR, &mut v);
    let confirm = phase(CONFIRM_DIR, &mut v);
    v.rows = Some(
        screen
            .iter()
            .chain(confirm.iter())
            .map(|p| p.verdict.rows.unwrap_or(0))
            .sum(),
    );
    v.arms = Some(
        screen
            .iter()
            .map(|p| (SCREEN_DIR, p))
            .chain(confirm.iter().map(|p| (CONFIRM_DIR, p)))
            .flat_map(|(n, p)| {
                p.arms
                    .iter()
                    .flatten()
                    .map(move |a| format!("{n}/{}", a.name))
            })
            .collect(),
    );
    let (Some(file), Some(plan)) = (file, plan) else {
        check_signature(&mut v, dir, opts, sig, sums.as_deref());
        return v;
    };
    let Some(screen) = screen else {
        v.add(
            Check::TunePhase,
            format!("the screen phase `{SCREEN_DIR}/` is missing"),
        );
        check_signature(&mut v, dir, opts, sig, sums.as_deref());
        return v;
    };
    let want = screen_arms(&plan.knobs);
    if let Some(a) = &screen.arms {
        if *a != want {
            v.add(
                Check::TunePhase,
                format!(
                    "{SCREEN_DIR}: arms [{}], the plan's knobs make [{}]",
                    names(a),
                    names(&want)
                ),
            );
        }
    }
    if screen.arms.is_some() && screen.rounds != plan.rounds_screen {
        v.add(
            Check::TunePhase,
            format!(
                "{SCREEN_DIR}: {} rounds, {TUNE_FILE} plans {}",
                screen.rounds, plan.rounds_screen
            ),
        );
    }
    check_context(&mut v, &plan, &screen, confirm.as_ref());
    let m = Measured { screen, confirm };
    // The results, recomputed from the verified rows.
    let recomputed = results(&plan, &m);
    let fresh = match recomputed {
        Ok(f) => f,
        Err(e) => {
            v.add(Check::TunePhase, e.why());
            check_signature(&mut v, dir, opts, sig, sums.as_deref());
            return v;
        }
    };
    match (&m.confirm, fresh.screen.recommended.is_empty()) {
        (Some(_), true) => v.add(
            Check::TunePhase,
            format!("a confirm phase `{CONFIRM_DIR}/` without a winner in the screen"),
        ),
        (Some(c), false) => {
            let want = confirm_arms(&fresh.screen.recommended);
            if let Some(a) = &c.arms {
                if *a != want {
                    v.add(
                        Check::TunePhase,
                        format!(
                            "{CONFIRM_DIR}: arms [{}], the screen's winners make [{}]",
                            names(a),
                            names(&want)
                        ),
                    );
                }
                if c.rounds != plan.rounds_confirm {
                    v.add(
                        Check::TunePhase,
                        format!(
                            "{CONFIRM_DIR}: {} rounds, {TUNE_FILE} plans {}",
                            c.rounds, plan.rounds_confirm
                        ),
                    );
                }
            }
        }
        _ => {}
    }
    if let Some(b) = plan.budget.filter(|b| fresh.launches > *b) {
        v.add(
            Check::TunePlan,
            format!("{} launches, over the budget of {b}", fresh.launches),
        );
    }
    compare_results(&mut v, &file, &fresh);
    if let Some(rb) = generated(&fresh, &m)
        .into_iter()
        .find(|(n, _)| n == README_FILE)
        .map(|(_, b)| b)
    {
        // Read capped, never followed through a link: a README larger than the cap is
        // not what the rows give either.
        if read_capped(&dir.join(README_FILE), MAX_PARSED_BYTES)
            .is_ok_and(|b| b.as_deref() != Some(rb.as_slice()))
        {
            v.add(
                Check::GeneratedStale,
                format!(
                    "`{README_FILE}` differs from what `truecold-proof report` makes of the \
                     verified rows"
                ),
            );
        }
    }
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    v
}

fn names(arms: &[ArmRef]) -> String {
    arms.iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The baselines run the plan's context and guest; both phases the same host and guest.
fn check_context(v: &mut Verdict, plan: &TunePlan, screen: &Phase, confirm: Option<&Phase>) {
    let guest = guest_kind(plan.guest);
    for (name, p) in std::iter::once((SCREEN_DIR, screen)).chain(confirm.map(|c| (CONFIRM_DIR, c)))
    {
        let Some(b) = p.data.get(BASELINE_ARM).map(|a| &a.result) else {
            continue;
        };
        let c = &b.configuration;
        let mut differ = Vec::new();
        if b.contract.kind != guest {
            differ.push(format!(
                "contract {} (plan: {})",
                b.contract.kind.as_str(),
                guest.as_str()
            ));
        }
        if c.vcpus != plan.vcpus {
            differ.push(format!("{} vCPUs (plan: {})", c.vcpus, plan.vcpus));
        }
        if c.mem_bytes != plan.mem_bytes {
            differ.push(format!(
                "{} bytes of memory (plan: {})",
                c.mem_bytes, plan.mem_bytes
            ));
        }
        if c.backing_kind() != Some(plan.backing) {
            differ.push(format!(
                "backing `{}` (plan: {})",
                c.backing,
                plan.backing.as_str()
            ));
        }
        for d in differ {
            v.add(
                Check::TunePlan,
                format!("{name}: the baseline runs {d}: every arm runs the tune's context"),
            );
        }
        for a in p.data.values() {
            if let Err(e) = check_set(&a.arm.knobs, a.result.contract.kind.tune_guest()) {
                v.add(Check::TunePlan, format!("{name}/{}: {e}", a.arm.name));
            }
        }
    }
    if let (Some(s), Some(c)) = (
        screen.data.get(BASELINE_ARM),
        confirm.and_then(|c| c.data.get(BASELINE_ARM)),
    ) {
        let (s, c) = (&s.result, &c.result);
        if s.environment.host_kind != c.environment.host_kind {
            v.add(
                Check::TunePhase,
                format!(
                    "the phases ran on different host kinds ({} and {})",
                    s.environment.host_kind.as_str(),
                    c.environment.host_kind.as_str()
                ),
            );
        }
        if s.artifacts != c.artifacts || s.contract.deadline_ns != c.contract.deadline_ns {
            v.add(
                Check::TunePhase,
                "the two phases' baselines differ in their artifacts or deadline: one \
                 baseline, one guest",
            );
        }
    }
}

/// `tune.json` against its recomputation: a specific reason per field that differs, then
/// the bytes.
fn compare_results(v: &mut Verdict, file: &TuneFile, fresh: &TuneFile) {
    let before = v.reasons.len();
    for w in &file.screen.winners {
        let e = fresh.screen.effects.iter().find(|e| e.knobs == [*w]);
        match e {
            Some(e) if e.verdict != KnobVerdict::Faster => v.add(
                Check::TuneResults,
                format!(
                    "{TUNE_FILE} names `{w}` a winner; its screen verdict is {}",
                    e.verdict_text()
                ),
            ),
            None => v.add(
                Check::TuneResults,
                format!("{TUNE_FILE} names `{w}` a winner; it was not screened"),
            ),
            _ => {}
        }
    }
    if file.screen.winners != fresh.screen.winners && v.reasons.len() == before {
        v.add(
            Check::TuneResults,
            format!(
                "{TUNE_FILE}'s winners [{}], the verified rows give [{}]",
                knob_list(&file.screen.winners),
                knob_list(&fresh.screen.winners)
            ),
        );
    }
    for e in &fresh.screen.effects {
        if !file.screen.effects.contains(e) {
            v.add(
                Check::TuneResults,
                format!(
                    "{TUNE_FILE}'s effect of `{}` differs from its recomputation (Δp50 {} ns, \
                     {})",
                    knob_list(&e.knobs),
                    e.delta_p50_ns.map_or("–".into(), |d| d.to_string()),
                    e.verdict_text()
                ),
            );
        }
    }
    if file.confirm != fresh.confirm {
        v.add(
            Check::TuneResults,
            format!("{TUNE_FILE}'s final A/B or leave-one-out differs from its recomputation"),
        );
    }
    if v.reasons.len() == before && tune_bytes(file) != tune_bytes(fresh) {
        v.add(
            Check::TuneResults,
            format!("{TUNE_FILE} differs from what the verified rows give"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(name: &str, knobs: Vec<Knob>, ok: Vec<u64>, errors: &[(&str, u64)]) -> TuneArm {
        let mut ok = ok;
        ok.sort_unstable();
        let e: BTreeMap<String, u64> = errors.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        TuneArm {
            name: name.into(),
            knobs,
            attempts: ok.len() as u64 + e.values().sum::<u64>(),
            ok,
            errors: e,
        }
    }

    /// SplitMix64 normal draws (Box–Muller) for synthetic headlines.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn unit(&mut self) -> f64 {
            ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.unit(), self.unit());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
        /// `n` headlines around `median` ns with coefficient of variation `cv`.
        fn rows(&mut self, n: usize, median: f64, cv: f64) -> Vec<u64> {
            (0..n)
                .map(|_| (median * (1.0 + cv * self.normal())).max(1.0) as u64)
                .collect()
        }
    }

    const MEDIAN: f64 = 300e6;

    #[test]
    fn the_sizing_constant_is_the_formula() {
        use statrs::distribution::{ContinuousCDF, Normal};
        let z = Normal::standard();
        let k = 2.0
            * (z.inverse_cdf(1.0 - ALPHA / 2.0) + z.inverse_cdf(POWER_PCT as f64 / 100.0)).powi(2)
            * std::f64::consts::PI
            / 3.0;
        assert_eq!(SIZING_K_MILLI, (k * 1000.0).ceil() as u64, "{k}");
        // cv = e: 17 rounds; cv = e/2: the floor; twice the noise, four times the rounds.
        assert_eq!(rounds_for(10_000, 10_000), 17);
        assert_eq!(rounds_for(5_000, 10_000), MIN_ROUNDS);
        assert_eq!(rounds_for(20_000, 10_000), 66);
        assert_eq!(rounds_for(1, 0), u64::MAX);
        assert_eq!(cv_ppm(&[100, 100, 100]), Some(0));
        assert_eq!(cv_ppm(&[90, 110]), Some(141_421));
        assert_eq!(cv_ppm(&[5]), None);
    }

    #[test]
    fn injected_effects_are_recovered() {
        let mut g = Gen(42);
        let n = 30;
        let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let fast = arm(
            "rcu-expedited",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN * 0.95, 0.01),
            &[],
        );
        let slow = arm(
            "console",
            vec![Knob::Console],
            g.rows(n, MEDIAN * 1.05, 0.01),
            &[],
        );
        let null = arm("nokaslr", vec![Knob::Nokaslr], g.rows(n, MEDIAN, 0.01), &[]);
        let broken = arm(
            "no-smp",
            vec![Knob::NoSmp],
            g.rows(n - 3, MEDIAN * 0.5, 0.01),
            &[("deadline", 2), ("vmm_exit", 1)],
        );
        let arms = [fast, slow, null, broken];
        let s = screen(9, &base, &arms);
        let v: Vec<KnobVerdict> = s.effects.iter().map(|e| e.verdict).collect();
        assert_eq!(
            v,
            [
                KnobVerdict::Faster,
                KnobVerdict::Slower,
                KnobVerdict::NoEffect,
                KnobVerdict::Breaks
            ],
            "{s:#?}"
        );
        // Δ near −5 %, inside its interval.
        let e = &s.effects[0];
        let ppm = e.delta_ppm.unwrap();
        assert!((-60_000..=-40_000).contains(&ppm), "{ppm}");
        let [lo, hi] = e.ci95_ns.unwrap();
        assert!(lo <= e.delta_p50_ns.unwrap() && e.delta_p50_ns.unwrap() <= hi);
        assert_eq!(
            s.effects[3].verdict_text(),
            "breaks strict-ready: deadline ×2, vmm_exit ×1"
        );
        // The broken knob is "faster" on its successes but ranks last and never wins.
        assert_eq!(
            s.ranking,
            [
                Knob::RcuExpedited,
                Knob::Nokaslr,
                Knob::Console,
                Knob::NoSmp
            ]
        );
        assert_eq!(s.winners, [Knob::RcuExpedited]);
        // The same inputs, the same figures.
        assert_eq!(s, screen(9, &base, &arms));
        // Too few rows: inconclusive, whatever the interval.
        let few = arm("lpj", vec![Knob::Lpj], vec![1, 1, 1], &[]);
        assert_eq!(
            effect(&base, &few, vec![Knob::Lpj], 1).verdict,
            KnobVerdict::Inconclusive
        );
    }

    #[test]
    fn a_null_knob_is_rarely_significant_and_a_real_one_is_found() {
        // n sized by the rule for cv 2 % and a 1 % minimum effect.
        let n = rounds_for(20_000, MIN_EFFECT_PPM) as usize;
        assert_eq!(n, 66);
        let (mut significant, mut found) = (0, 0);
        for trial in 0..100u64 {
            let mut g = Gen(1000 + trial);
            let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.02), &[]);
            let null = arm("nokaslr", vec![Knob::Nokaslr], g.rows(n, MEDIAN, 0.02), &[]);
            let e = effect(&base, &null, vec![Knob::Nokaslr], trial);
            if matches!(e.verdict, KnobVerdict::Faster | KnobVerdict::Slower) {
                significant += 1;
            }
            let real = arm("lpj", vec![Knob::Lpj], g.rows(n, MEDIAN * 0.95, 0.02), &[]);
            if effect(&base, &real, vec![Knob::Lpj], trial).verdict == KnobVerdict::Faster {
                found += 1;
            }
        }
        assert!(
            significant <= 5,
            "{significant} of 100 null trials significant"
        );
        assert!(
            found >= 95,
            "a −5 % knob found faster in only {found} of 100"
        );
    }

    #[test]
    fn winners_drop_conflicts_and_leave_one_out_checks_each() {
        let mut g = Gen(7);
        let n = 30;
        let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let thp = arm(
            "backing-thp",
            vec![Knob::BackingThp],
            g.rows(n, MEDIAN * 0.93, 0.01),
            &[],
        );
        let huge = arm(
            "backing-hugetlb",
            vec![Knob::BackingHugetlb],
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let rcu = arm(
            "rcu-expedited",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN * 0.96, 0.01),
            &[],
        );
        let s = screen(1, &base, &[rcu, thp, huge]);
        assert_eq!(
            s.ranking,
            [Knob::BackingHugetlb, Knob::BackingThp, Knob::RcuExpedited]
        );
        assert_eq!(s.winners, [Knob::BackingHugetlb, Knob::RcuExpedited]);
        assert_eq!(
            s.dropped,
            [Dropped {
                knob: Knob::BackingThp,
                conflicts_with: Knob::BackingHugetlb
            }]
        );
        assert_eq!(s.recommended, [Knob::RcuExpedited, Knob::BackingHugetlb]);
        assert_eq!(
            confirm_arms(&s.recommended)
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>(),
            [
                "baseline",
                "recommended",
                "recommended-minus-rcu-expedited",
                "recommended-minus-backing-hugetlb"
            ]
        );
        // In the combination hugetlb still helps, rcu-expedited no longer does.
        let b2 = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let rec = arm(
            "recommended",
            s.recommended.clone(),
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let minus_rcu = arm(
            "recommended-minus-rcu-expedited",
            vec![Knob::BackingHugetlb],
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let minus_huge = arm(
            "recommended-minus-backing-hugetlb",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN, 0.01),
            &[],
        );
        let c = confirm(1, 3, &b2, &rec, &[minus_rcu, minus_huge]);
        assert_eq!(c.final_ab.verdict, KnobVerdict::Faster);
        assert_eq!(c.final_ab.seed, 4);
        assert_eq!(c.leave_one_out[0].knobs, [Knob::RcuExpedited]);
        assert_eq!(c.leave_one_out[1].verdict, KnobVerdict::Faster);
        assert_eq!(c.not_confirmed, [Knob::RcuExpedited]);
        // One winner: its leave-one-out is the final A/B.
        let one = confirm(
            1,
            3,
            &b2,
            &arm("recommended", vec![Knob::Console], b2.ok.clone(), &[]),
            &[],
        );
        assert!(one.leave_one_out.is_empty());
        assert_eq!(one.not_confirmed, [Knob::Console]);
    }

    #[test]
    fn plans_and_paths() {
        let p = TunePlan {
            seed: 1,
            guest: TuneGuest::Probe,
            knobs: vec![Knob::Console, Knob::BackingThp],
            vcpus: 1,
            mem_bytes: 1 << 30,
            backing: Backing::Anon,
            rounds_screen: 0,
            rounds_confirm: 3,
            budget: None,
            noise: None,
        };
        let bad = tune_plan_problems(&p);
        assert!(bad.iter().any(|m| m.contains("catalogue order")), "{bad:?}");
        assert!(
            bad.iter().any(|m| m.contains("`console` does not apply")),
            "{bad:?}"
        );
        assert!(bad.iter().any(|m| m.contains("0 rounds")), "{bad:?}");
        assert!(is_valid_tune_path("screen/baseline/samples.csv"));
        assert!(is_valid_tune_path("tune.json"));
        assert!(!is_valid_tune_path("a/b/c/d"));
        assert!(!is_valid_tune_path("../x"));
        assert_eq!(pct(-52_345), "-5.23 %");
        assert_eq!(pct(10_000), "+1.00 %");
    }
}
