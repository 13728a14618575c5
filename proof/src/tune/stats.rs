//! A tune's statistics: how many rounds find an effect, each knob's effect on the
//! baseline (Mann-Whitney, bootstrap interval), the screen's ranking and winners, and the
//! confirm phase's leave-one-out check, under the verdict rule a tune was made with
//! ([`RuleVersion`]).

use crate::schema::Figure;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};
use truecold_proto::tune::{conflicts, Knob};

use crate::arms::{ArmData, RESAMPLES};
use crate::compare::{bootstrap_delta_ci, mann_whitney_p};
use crate::fmt::p_text;
use crate::schema::Sample;
use crate::stats::percentile_sorted;
use crate::summary::{success_latencies, OK_WITHOUT_LATENCY};

/// Significance level of the Mann–Whitney test (two-sided); under rule 2 the screen's
/// family-wise level (Holm).
pub const ALPHA: f64 = 0.05;
/// [`ALPHA`] as `tune.json` and the README write it.
pub const ALPHA_TEXT: &str = "0.05";
/// The minimum effect, 1 % of the base's p50, in ppm. Rule 1: the smallest observed Δp50
/// called faster or slower. Rule 2: the true effect n is sized to find with [`POWER_PCT`] %
/// power. Both: the half-width of "no effect".
pub const MIN_EFFECT_PPM: u64 = 10_000;
/// Fewer successes on a side: inconclusive. Also the least [`rounds_for`] gives.
pub const MIN_ROUNDS: u64 = 5;
/// The power claimed at the minimum effect, percent (rule 1: nominal only, see
/// [`RuleVersion::V1`]; rule 2: at least this, shown by `proof/tests/tune_power.rs`).
pub const POWER_PCT: u64 = 80;
/// Rule 2: the power [`screen_power`]'s approximation is asked for, percent. Above
/// [`POWER_PCT`]: the margin absorbs the approximation's error (U taken as normal, the
/// headlines as a normal shift), which at the n it gives is a point or two; asked for exactly
/// 80 %, the real power would be 80 % ± that, as likely under the claim as over it.
pub const SIZING_POWER_PCT: u64 = 85;
/// `1000 · 2 (z₀.₉₇₅ + z₀.₈₀)² · π/3`, rounded up (see the module doc).
pub const SIZING_K_MILLI: u64 = 16_439;

/// The verdict rule a tune was judged by; `tune.json`'s `rule.version` (absent: 1). The
/// verifier recomputes every directory with the rule it names, so a directory made under
/// rule 1 keeps its figures and its bytes.
///
/// **Rule 1** (tunes written before rule 2; kept exactly): faster / slower when the
/// two-sided Mann–Whitney p < [`ALPHA`] for that comparison alone, the bootstrap interval
/// excludes 0 on the side of Δp50 *and the observed* |Δp50| ≥ [`MIN_EFFECT_PPM`]; n from
/// [`rounds_for`]. The last condition makes the sizing's "80 % power" untrue: a true effect of
/// exactly the minimum puts the observed Δp50 past it about half the time, so the rule finds
/// it in under half the screens whatever n is (44–50 % simulated); and each of K knobs is
/// tested at [`ALPHA`] with nothing bounding the chance that any null knob wins (the |Δp50|
/// bar happens to keep it low at the noises simulated, 0–3 % of 20-knob screens).
///
/// **Rule 2** (every new tune): faster / slower when the Mann–Whitney p, **Holm-adjusted
/// over the screen's K knobs** ([`holm`]), is below [`ALPHA`] and Δp50 lies on that side; the
/// confirm phase's comparisons are each one planned test at [`ALPHA`]. n: [`rounds_for_rule`].
/// Why each part:
/// - *No threshold on the observed Δp50.* The minimum effect is what n is sized to find, not
///   a bar for the estimate: an estimate centred on a true change of exactly the minimum
///   passes such a bar about half the time, whatever n. A knob shown faster is shown faster,
///   by the Δp50 and interval beside it; with more rounds than the noise needs, that may be by
///   less than the minimum.
/// - *The interval does not gate faster / slower* (it still decides "no effect" and is
///   shown). A bootstrap interval of the median is a less efficient test than the ranks
///   (2/π against 3/π of the mean's under normal noise); asking both at once would cut the
///   power under what n is sized for, by an amount no closed form gives.
/// - *Holm, not Benjamini–Hochberg.* A winner goes into the recommended kernel and command
///   line, so what a tune claims is "every winner is faster"; it is the family-wise error (the
///   chance that any knob without an effect wins) that bounds that claim. Holm bounds it by
///   [`ALPHA`] under any dependence between the K tests (they share one baseline), never
///   rejects less than Bonferroni, and so costs in n only the Bonferroni z the sizing pays.
///   Benjamini–Hochberg bounds the expected share of false winners instead, which lets a
///   screen with real winners in it admit false ones alongside.
/// - *Sizing.* [`screen_power`] at α/K, asked for [`SIZING_POWER_PCT`] % so that the real
///   power at the minimum effect is at least [`POWER_PCT`] % (`proof/tests/tune_power.rs`
///   shows both claims by seeded simulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub enum RuleVersion {
    V1,
    V2,
}

impl RuleVersion {
    /// The rule new tunes are judged by.
    pub const CURRENT: RuleVersion = RuleVersion::V2;

    /// `tune.json`'s number for it.
    pub fn number(self) -> u32 {
        match self {
            RuleVersion::V1 => 1,
            RuleVersion::V2 => 2,
        }
    }

    /// Rule 1, the meaning of a `tune.json` without `rule.version`.
    pub fn is_v1(&self) -> bool {
        *self == RuleVersion::V1
    }
}

impl Default for RuleVersion {
    /// Absent from `tune.json`: rule 1 (the files written before the version existed).
    fn default() -> Self {
        RuleVersion::V1
    }
}

impl From<RuleVersion> for u32 {
    fn from(r: RuleVersion) -> u32 {
        r.number()
    }
}

/// A rule number this verifier does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("verdict rule {0}: this verifier knows rules 1 and 2")]
pub struct UnknownRule(pub u32);

impl TryFrom<u32> for RuleVersion {
    type Error = UnknownRule;
    fn try_from(n: u32) -> Result<Self, UnknownRule> {
        match n {
            1 => Ok(RuleVersion::V1),
            2 => Ok(RuleVersion::V2),
            n => Err(UnknownRule(n)),
        }
    }
}

/// Rule 1's rounds per arm (kept for the tunes made with it): nominally [`POWER_PCT`] %
/// power at a `min_effect_ppm` change of the p50 at [`ALPHA`] when the headline's
/// coefficient of variation is `cv_ppm`:
/// `max(MIN_ROUNDS, ceil(SIZING_K_MILLI · cv² / (1000 · e²)))` (module doc). A zero minimum
/// effect needs `u64::MAX`. Under rule 1's verdict the real power is under 50 %
/// ([`RuleVersion::V1`]).
pub fn rounds_for(cv_ppm: u64, min_effect_ppm: u64) -> u64 {
    if min_effect_ppm == 0 {
        return u64::MAX;
    }
    let num = u128::from(SIZING_K_MILLI) * u128::from(cv_ppm) * u128::from(cv_ppm);
    let den = 1000 * u128::from(min_effect_ppm) * u128::from(min_effect_ppm);
    let n = num.div_ceil(den);
    (n.min(u128::from(u64::MAX)) as u64).max(MIN_ROUNDS)
}

/// Rule 2's power, approximately, of one knob's test in a screen of `knobs` knobs at `n`
/// rows a side when the knob moves the headline by `delta` of its standard deviation
/// (`delta = e / cv`; infinite: no noise): the chance that the Mann–Whitney p, computed as
/// [`mann_whitney_p`] does, is below the Bonferroni level α/K (Holm rejects at least as
/// often). The rank statistic U (pairs the knob's row wins) is taken as normal with its exact
/// mean and variance under a normal shift (Lehmann): mean n² p₁, variance n² p₁(1 − p₁) +
/// 2 n²(n − 1)(p₂ − p₁²), p₁ = Φ(δ/√2), p₂ = Φ₂(δ/√2, δ/√2; ½); significant from the least
/// integer U whose p is below the level, so the test's discreteness at small n counts.
pub fn screen_power(n: u64, delta: f64, knobs: u64) -> f64 {
    let z = Normal::standard();
    let nf = n as f64;
    let pairs = nf * nf;
    let sd0 = (pairs * (2.0 * nf + 1.0) / 12.0).sqrt();
    let zc = z.inverse_cdf(1.0 - ALPHA / (2.0 * knobs.max(1) as f64));
    // The least U with (U − n²/2) − 0.5 > zc · sd0 (the crate's continuity correction).
    let u_star = (pairs / 2.0 + 0.5 + zc * sd0).floor() + 1.0;
    if u_star > pairs || n == 0 {
        return 0.0;
    }
    let (p1, p2) = if delta.is_finite() {
        let h = delta / std::f64::consts::SQRT_2;
        (z.cdf(h), orthant_half(h))
    } else {
        (1.0, 1.0)
    };
    let mean = pairs * p1;
    let var = pairs * p1 * (1.0 - p1) + 2.0 * pairs * (nf - 1.0) * (p2 - p1 * p1);
    if var <= 0.0 || !var.is_finite() {
        return if mean >= u_star { 1.0 } else { 0.0 };
    }
    z.cdf((mean - (u_star - 0.5)) / var.sqrt())
}

/// `P(Z₁ < h, Z₂ < h)` for standard normals of correlation ½: `∫₋∞ʰ φ(x) Φ((h − x/2)/√¾) dx`,
/// Simpson's rule over `[h − 12, h]`.
fn orthant_half(h: f64) -> f64 {
    let z = Normal::standard();
    const STEPS: u32 = 4096;
    let (a, w) = (h - 12.0, 12.0 / f64::from(STEPS));
    let f = |x: f64| {
        (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
            * z.cdf((h - x / 2.0) / 0.75f64.sqrt())
    };
    let mut sum = f(a) + f(h);
    for i in 1..STEPS {
        let x = a + w * f64::from(i);
        sum += f(x) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    sum * w / 3.0
}

/// Rule 2's rounds per arm: the least n ≥ [`MIN_ROUNDS`] whose [`screen_power`] at
/// `δ = min_effect_ppm / cv_ppm` and `knobs` is at least [`SIZING_POWER_PCT`] % (doubling, then
/// bisection: the power's small saw-teeth in n leave an n at which it holds and the one below
/// at which it does not). A zero minimum effect needs `u64::MAX`.
fn rounds_v2(cv_ppm: u64, min_effect_ppm: u64, knobs: u64) -> u64 {
    if min_effect_ppm == 0 {
        return u64::MAX;
    }
    let delta = if cv_ppm == 0 {
        f64::INFINITY
    } else {
        min_effect_ppm as f64 / cv_ppm as f64
    };
    let enough = |n: u64| screen_power(n, delta, knobs) * 100.0 >= SIZING_POWER_PCT as f64;
    if enough(MIN_ROUNDS) {
        return MIN_ROUNDS;
    }
    let (mut lo, mut hi) = (MIN_ROUNDS, MIN_ROUNDS.saturating_mul(2));
    while !enough(hi) {
        if hi == u64::MAX {
            return u64::MAX;
        }
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Rounds per arm for a tune of `knobs` knobs judged by `rule`, from the headline's
/// coefficient of variation `cv_ppm` and the minimum effect: rule 1, [`rounds_for`]; rule 2,
/// the least n at which [`screen_power`] reaches [`SIZING_POWER_PCT`] %, so that the real
/// power at the minimum effect is at least [`POWER_PCT`] %.
pub fn rounds_for_rule(rule: RuleVersion, cv_ppm: u64, min_effect_ppm: u64, knobs: u64) -> u64 {
    match rule {
        RuleVersion::V1 => rounds_for(cv_ppm, min_effect_ppm),
        RuleVersion::V2 => rounds_v2(cv_ppm, min_effect_ppm, knobs),
    }
}

/// The noise of arms run side by side, as a tune's pilot measures it: the root mean square of
/// each arm's own coefficient of variation ([`cv_ppm`] of its successful headlines; an arm
/// with fewer than two is left out), ppm, floored. Each arm's spread is about its own
/// median, so a difference between the arms' medians (a knob's effect) is not noise here.
/// `None` without an arm to measure.
pub fn pooled_cv_ppm(arms: &[&[u64]]) -> Option<u64> {
    let cvs: Vec<u128> = arms
        .iter()
        .filter_map(|a| cv_ppm(a))
        .map(u128::from)
        .collect();
    if cvs.is_empty() {
        return None;
    }
    let mean_sq = cvs.iter().map(|c| c * c).sum::<u128>() / cvs.len() as u128;
    Some(mean_sq.isqrt() as u64)
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
        let ok = success_latencies(samples);
        let mut errors = BTreeMap::new();
        for s in samples {
            match (s.ok, s.latency_ns) {
                (true, Some(_)) => {}
                (true, None) => *errors.entry(OK_WITHOUT_LATENCY.to_string()).or_insert(0) += 1,
                (false, _) => *errors.entry(s.error_kind.clone()).or_insert(0) += 1,
            }
        }
        TuneArm {
            name: name.into(),
            knobs,
            attempts: samples.len() as u64,
            ok,
            errors,
        }
    }

    /// From a multi-arm directory's arm (its verified error histogram), judged on `figure`.
    pub fn from_data(a: &ArmData, figure: Figure) -> Self {
        TuneArm {
            name: a.arm.name.clone(),
            knobs: a.arm.knobs.clone(),
            attempts: a.attempts,
            ok: match figure {
                Figure::Total => a.ok.clone(),
                Figure::Parallel => a.ok_parallel.clone(),
            },
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
    /// Rule 2's screen: that p Holm-adjusted over the screen's knobs ([`holm`]), three
    /// significant digits; the p the verdict compares with [`ALPHA`]. Absent under rule 1 and
    /// in the confirm phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holm_p: Option<String>,
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

/// `arm` against `base` (module doc), its bootstrap seeded with `seed`, judged by `rule` as
/// one comparison on its own (the confirm phase; the screen adjusts with [`screen`]).
pub fn effect(
    rule: RuleVersion,
    base: &TuneArm,
    arm: &TuneArm,
    knobs: Vec<Knob>,
    seed: u64,
) -> Effect {
    measure_effect(base, arm, knobs, seed).judged_alone(rule)
}

/// An effect's figures before its verdict, and its Mann–Whitney p unrounded.
struct Figures {
    effect: Effect,
    p: Option<f64>,
}

impl Figures {
    fn judged_alone(self, rule: RuleVersion) -> Effect {
        let mut e = self.effect;
        e.verdict = verdict(rule, &e, self.p);
        e
    }
}

fn measure_effect(base: &TuneArm, arm: &TuneArm, knobs: Vec<Knob>, seed: u64) -> Figures {
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
    let mut failures = arm.errors.clone();
    failures.retain(|_, n| *n > 0);
    Figures {
        effect: Effect {
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
            mann_whitney_p: p.map(p_text),
            holm_p: None,
            seed,
            verdict: KnobVerdict::Inconclusive,
            failures,
        },
        p,
    }
}

/// `e`'s verdict by `rule` (module doc), `p` the p its test compares with [`ALPHA`] (rule 2
/// in a screen: Holm-adjusted).
fn verdict(rule: RuleVersion, e: &Effect, p: Option<f64>) -> KnobVerdict {
    let failed = !e.failures.is_empty() || e.attempts > e.n;
    let enough = e.n >= MIN_ROUNDS && e.n_base >= MIN_ROUNDS;
    // |x| ≥ the minimum effect, in integers: |x| · 1e6 ≥ MIN_EFFECT_PPM · p50(base).
    let min = e
        .p50_base_ns
        .map(|b| i128::from(MIN_EFFECT_PPM) * i128::from(b));
    let at_least = |x: i64| min.is_some_and(|m| i128::from(x).abs() * 1_000_000 >= m);
    let inside = |x: i64| min.is_some_and(|m| i128::from(x).abs() * 1_000_000 < m);
    if failed {
        return KnobVerdict::Breaks;
    }
    if !enough {
        return KnobVerdict::Inconclusive;
    }
    // Rule 1 also asks the interval to exclude 0 on Δ's side and the observed Δ to reach the
    // minimum effect; rule 2 asks neither (see [`RuleVersion`]).
    let v1 = rule == RuleVersion::V1;
    match (e.delta_p50_ns, e.ci95_ns, p) {
        (Some(d), Some([_, hi]), Some(p))
            if p < ALPHA && d < 0 && (!v1 || (at_least(d) && hi < 0)) =>
        {
            KnobVerdict::Faster
        }
        (Some(d), Some([lo, _]), Some(p))
            if p < ALPHA && d > 0 && (!v1 || (at_least(d) && lo > 0)) =>
        {
            KnobVerdict::Slower
        }
        (_, Some([lo, hi]), _) if inside(lo) && inside(hi) => KnobVerdict::NoEffect,
        _ => KnobVerdict::Inconclusive,
    }
}

/// The smallest two-sided Mann–Whitney p ([`crate::compare::mann_whitney_p`]) an arm of `n`
/// rows can reach against a base of `n`: every row of one side below every row of the other.
pub fn smallest_p(n: u64) -> Option<f64> {
    let a: Vec<u64> = (0..n).collect();
    let b: Vec<u64> = (n..n.saturating_mul(2)).collect();
    crate::compare::mann_whitney_p(&a, &b)
}

/// Whether rule 2 can name any winner of a screen of `k` knobs at `n` rounds an arm: Holm
/// compares the smallest p with α / k, so below some n no data can make a knob faster.
pub fn can_name_a_winner(n: u64, k: u64) -> bool {
    smallest_p(n).is_some_and(|p| p * (k.max(1) as f64) < ALPHA)
}

/// The least n (≥ `from`, at most `MAX_REACH_ROUNDS`) at which [`can_name_a_winner`] holds.
pub fn least_rounds_for_a_winner(from: u64, k: u64) -> Option<u64> {
    (from..=MAX_REACH_ROUNDS).find(|&n| can_name_a_winner(n, k))
}

/// The search bound of [`least_rounds_for_a_winner`] (far above any screen's need: at n = 20
/// the smallest p is about 1e-7).
const MAX_REACH_ROUNDS: u64 = 1_000;

/// Holm's step-down adjusted p values of `p` (same order; a missing p counts as 1): the
/// i-th smallest becomes `max over j ≤ i of min(1, (K − j + 1) · p₍ⱼ₎)`. Rejecting where the
/// adjusted p < α keeps the chance of rejecting any true null at most α.
pub fn holm(p: &[Option<f64>]) -> Vec<f64> {
    let k = p.len();
    let raw: Vec<f64> = p.iter().map(|p| p.unwrap_or(1.0)).collect();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| raw[a].total_cmp(&raw[b]).then(a.cmp(&b)));
    let mut adjusted = vec![1.0; k];
    let mut running: f64 = 0.0;
    for (j, &i) in order.iter().enumerate() {
        running = running.max(((k - j) as f64 * raw[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
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
    /// [`rounds_for_rule`] that CV, [`MIN_EFFECT_PPM`] and the screen's knob count: the
    /// rounds a next tune of this configuration needs.
    pub rounds_for_cv: Option<u64>,
}

impl BaselineSummary {
    pub(super) fn of(rule: RuleVersion, b: &TuneArm, knobs: u64) -> Self {
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
            rounds_for_cv: cv.map(|c| rounds_for_rule(rule, c, MIN_EFFECT_PPM, knobs)),
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

/// The screen's statistics by `rule`: each arm of `knobs` (one knob each, in `arms`) against
/// `baseline` (module doc). `arms[k]` is the arm of the `k`-th knob; seeds `seed + k`. Rule 2
/// judges each against [`ALPHA`] with its p Holm-adjusted over all `arms` ([`holm`]).
pub fn screen(rule: RuleVersion, seed: u64, baseline: &TuneArm, arms: &[TuneArm]) -> Screen {
    let measured: Vec<Figures> = arms
        .iter()
        .enumerate()
        .map(|(k, a)| measure_effect(baseline, a, a.knobs.clone(), seed.wrapping_add(k as u64)))
        .collect();
    let effects: Vec<Effect> = match rule {
        RuleVersion::V1 => measured.into_iter().map(|m| m.judged_alone(rule)).collect(),
        RuleVersion::V2 => {
            let adjusted = holm(&measured.iter().map(|m| m.p).collect::<Vec<_>>());
            measured
                .into_iter()
                .zip(adjusted)
                .map(|(m, q)| {
                    let mut e = m.effect;
                    e.holm_p = m.p.map(|_| p_text(q));
                    e.verdict = verdict(rule, &e, m.p.map(|_| q));
                    e
                })
                .collect()
        }
    };
    let ranking = rank(&effects);
    let (winners, dropped) = winners(&effects, &ranking);
    let mut recommended = winners.clone();
    recommended.sort();
    Screen {
        baseline: BaselineSummary::of(rule, baseline, arms.len() as u64),
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

/// The confirm phase's statistics by `rule` (module doc), each comparison on its own: `minus[i]` is the arm without the `i`-th
/// knob of `recommended.knobs` (empty with one winner); `knobs` is the tune's knob count.
pub fn confirm(
    rule: RuleVersion,
    seed: u64,
    knobs: usize,
    baseline: &TuneArm,
    recommended: &TuneArm,
    minus: &[TuneArm],
) -> Confirm {
    let s0 = seed.wrapping_add(knobs as u64);
    let final_ab = effect(rule, baseline, recommended, recommended.knobs.clone(), s0);
    let leave_one_out: Vec<Effect> = recommended
        .knobs
        .iter()
        .zip(minus)
        .enumerate()
        .map(|(i, (k, m))| {
            effect(
                rule,
                m,
                recommended,
                vec![*k],
                s0.wrapping_add(1 + i as u64),
            )
        })
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
