//! A tune's statistics: how many rounds find an effect, each knob's effect on the
//! baseline (Mann-Whitney, bootstrap interval), the screen's ranking and winners, and the
//! confirm phase's leave-one-out check.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use truecold_proto::tune::{conflicts, Knob};

use crate::arms::{ArmData, RESAMPLES};
use crate::compare::{bootstrap_delta_ci, fmt_p, mann_whitney_p};
use crate::schema::Sample;
use crate::stats::percentile_sorted;
use crate::summary::OK_WITHOUT_LATENCY;

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
    pub(super) fn of(b: &TuneArm) -> Self {
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
