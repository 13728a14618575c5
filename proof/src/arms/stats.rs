//! The arms compared: each arm's summary, the pairwise ratios with their bootstrap
//! intervals and Mann-Whitney p-values (`comparison.json`).

use serde::Serialize;

use super::model::*;
use crate::compare::{compare_values, mann_whitney_p, CompareOptions, SplitMix64};
use crate::fmt::p_text;
use crate::schema::{Clock, Engine, HostKind, ResultJson, Sample, HEADLINE, PERCENTILE_DEFINITION};
use crate::stats::{ascending, percentile_of, percentile_sorted};
use crate::summary::success_latencies;

/// One arm as the comparison sees it.
#[derive(Clone, Debug)]
pub struct ArmData {
    pub arm: ArmRef,
    pub result: ResultJson,
    /// Attempts (rows).
    pub attempts: u64,
    /// The successful rows' headlines, ascending.
    pub ok: Vec<u64>,
    /// The same on the parallel clock: the successes that have the figure, ascending (empty
    /// for a bundle without it).
    pub ok_parallel: Vec<u64>,
}

impl ArmData {
    /// From a verified (or about to be verified) bundle.
    pub fn new(arm: ArmRef, result: ResultJson, samples: &[Sample]) -> Self {
        ArmData {
            arm,
            result,
            attempts: samples.len() as u64,
            ok: success_latencies(samples),
            ok_parallel: crate::summary::success_figures(samples, crate::schema::Figure::Parallel),
        }
    }
}

/// One arm's line of `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArmSummary {
    pub name: String,
    pub engine: Engine,
    /// The engine binary's `--version` line.
    pub version: String,
    pub attempts: u64,
    /// Successful rows.
    pub n: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// One pair of `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PairComparison {
    pub a: String,
    pub b: String,
    pub n_a: u64,
    pub n_b: u64,
    pub p50_a_ns: Option<u64>,
    pub p50_b_ns: Option<u64>,
    pub p99_a_ns: Option<u64>,
    pub p99_b_ns: Option<u64>,
    /// `floor(1e6 · p50(b) / p50(a))`.
    pub ratio_p50_ppm: Option<u64>,
    pub ratio_p50_ci95_ppm: Option<[u64; 2]>,
    /// `floor(1e6 · p99(b) / p99(a))`.
    pub ratio_p99_ppm: Option<u64>,
    pub ratio_p99_ci95_ppm: Option<[u64; 2]>,
    /// Two-sided Mann–Whitney U p, three significant digits.
    pub mann_whitney_p: Option<String>,
    /// [`crate::compare`]'s verdict of b against a (`improved`: b is faster).
    pub verdict: String,
    pub why: String,
}

/// `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArmsComparison {
    pub schema: u32,
    pub metric: String,
    pub rows: String,
    pub percentile_definition: String,
    pub ratio: String,
    pub bootstrap: String,
    pub seed: u64,
    pub resamples: u64,
    pub verdict_rule: String,
    pub host_kind: Option<HostKind>,
    pub clock: Option<Clock>,
    pub arms: Vec<ArmSummary>,
    pub pairs: Vec<PairComparison>,
}

/// `floor(1e6 · b / a)`; `None` when `a` is 0.
pub fn ratio_ppm(a: u64, b: u64) -> Option<u64> {
    (a > 0).then(|| (u128::from(b) * 1_000_000 / u128::from(a)).min(u128::from(u64::MAX)) as u64)
}

/// A resample of `src` into `buf`, and its p50 and p99; `None` when `src` is empty.
pub(super) fn resample_p50_p99(
    src: &[u64],
    buf: &mut Vec<u64>,
    rng: &mut SplitMix64,
) -> Option<(u64, u64)> {
    buf.clear();
    buf.extend((0..src.len()).map(|_| src[rng.below(src.len())]));
    Some((percentile_of(buf, 50, 100)?, percentile_of(buf, 99, 100)?))
}

/// The nearest-rank 2.5th and 97.5th of `v`.
pub(super) fn interval(v: &[u64]) -> Option<[u64; 2]> {
    let v = ascending(v);
    Some([
        percentile_sorted(&v, 25, 1000)?,
        percentile_sorted(&v, 975, 1000)?,
    ])
}

/// Percentile-bootstrap 95 % intervals of the p50 and p99 ratios `b / a` (ppm).
pub fn bootstrap_ratio_ci(
    a: &[u64],
    b: &[u64],
    resamples: usize,
    seed: u64,
) -> (Option<[u64; 2]>, Option<[u64; 2]>) {
    if a.is_empty() || b.is_empty() {
        return (None, None);
    }
    let mut rng = SplitMix64(seed);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let (mut r50, mut r99) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        let (Some((a50, a99)), Some((b50, b99))) = (
            resample_p50_p99(a, &mut ba, &mut rng),
            resample_p50_p99(b, &mut bb, &mut rng),
        ) else {
            return (None, None);
        };
        match (ratio_ppm(a50, b50), ratio_ppm(a99, b99)) {
            (Some(x), Some(y)) => {
                r50.push(x);
                r99.push(y);
            }
            // A zero headline never verifies (every host stage takes time).
            _ => return (None, None),
        }
    }
    (interval(&r50), interval(&r99))
}

/// The comparison of every pair of `arms` (in plan order).
pub fn compare_arms(seed: u64, arms: &[ArmData]) -> ArmsComparison {
    let host = arms.first().map(|a| a.result.environment.host_kind);
    let opts = CompareOptions {
        seed,
        ..CompareOptions::default()
    };
    let summaries = arms
        .iter()
        .map(|a| ArmSummary {
            name: a.arm.name.clone(),
            engine: a.arm.engine,
            version: a.result.configuration.engine.version.clone(),
            attempts: a.attempts,
            n: a.ok.len() as u64,
            p50_ns: percentile_sorted(&a.ok, 50, 100),
            p99_ns: percentile_sorted(&a.ok, 99, 100),
        })
        .collect();
    let mut pairs = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        for b in &arms[i + 1..] {
            let k = pairs.len() as u64;
            let (p50a, p50b) = (
                percentile_sorted(&a.ok, 50, 100),
                percentile_sorted(&b.ok, 50, 100),
            );
            let (p99a, p99b) = (
                percentile_sorted(&a.ok, 99, 100),
                percentile_sorted(&b.ok, 99, 100),
            );
            let (ci50, ci99) = bootstrap_ratio_ci(&a.ok, &b.ok, RESAMPLES, seed.wrapping_add(k));
            let m = compare_values(HEADLINE, true, &a.ok, &b.ok, &opts);
            pairs.push(PairComparison {
                a: a.arm.name.clone(),
                b: b.arm.name.clone(),
                n_a: a.ok.len() as u64,
                n_b: b.ok.len() as u64,
                p50_a_ns: p50a,
                p50_b_ns: p50b,
                p99_a_ns: p99a,
                p99_b_ns: p99b,
                ratio_p50_ppm: p50a.zip(p50b).and_then(|(x, y)| ratio_ppm(x, y)),
                ratio_p50_ci95_ppm: ci50,
                ratio_p99_ppm: p99a.zip(p99b).and_then(|(x, y)| ratio_ppm(x, y)),
                ratio_p99_ci95_ppm: ci99,
                // Reported whatever the verdict (compare's rule computes none below its
                // minimum sample count).
                mann_whitney_p: mann_whitney_p(&a.ok, &b.ok).map(p_text),
                verdict: m.verdict.as_str().to_string(),
                why: m.why,
            });
        }
    }
    ArmsComparison {
        schema: ARMS_SCHEMA,
        metric: HEADLINE.to_string(),
        rows: "each arm's successful rows (as its own bundle verifies them)".into(),
        percentile_definition: PERCENTILE_DEFINITION.to_string(),
        ratio: "b / a in parts per million: floor(1e6 * b / a)".into(),
        bootstrap: format!(
            "percentile bootstrap, 95 %: {RESAMPLES} resamples of both arms, the nearest-rank \
             2.5th and 97.5th of the resampled ratios; pair k (0-based, in this order) draws \
             from SplitMix64 seeded with seed + k"
        ),
        seed,
        resamples: RESAMPLES as u64,
        verdict_rule: format!(
            "truecold-proof compare's rule, b against a (lower is better): alpha {}, \
             threshold {} % of a's median, at least {} successes per arm, 95 % interval of \
             the median difference at most {} % of a's median (its bootstrap seeded with seed)",
            opts.alpha, opts.threshold_pct, opts.min_samples, opts.max_ci_width_pct
        ),
        host_kind: host,
        clock: host.map(HostKind::clock),
        arms: summaries,
        pairs,
    }
}
