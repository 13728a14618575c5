//! `compare A B`: A/B comparison of two verified bundles, for reviews and `git bisect run`.
//!
//! The data compared are exactly the rows `verify` parsed and accepted (the CLI passes
//! [`crate::Verdict::samples`]; nothing is read twice).
//!
//! Metrics: the headline twice — successes only, and with every failure scored at the
//! deadline (those values are right-censored: a failure's true latency is only known to
//! exceed the deadline) — and every stage with data, over successful rows only (a failed
//! row's stages are not comparable: every stage of a timed-out attempt gets the full
//! deadline or nothing).
//!
//! Per metric: each side's n, median (p50) and p99 by the shared nearest-rank definition;
//! Δmedian = median(B) − median(A) with a percentile-bootstrap 95 % interval (seeded
//! SplitMix64, deterministic); and the **test**: Mann–Whitney U, two-sided, normal
//! approximation with tie correction and continuity correction, the normal tail from
//! `statrs`.
//!
//! **The verdict rule**, applied in this order (`threshold` = `--threshold-pct`, default 2 %
//! of A's median; `alpha` = `--alpha`, default 0.01):
//! 1. *inconclusive* — either side has fewer than `--min-samples` values (default 20);
//! 2. *no difference* — both sides hold exactly the same values (same multiset);
//! 3. *improved* / *regressed* — p < alpha **and** |Δmedian| ≥ threshold (lower is better);
//! 4. *inconclusive* — otherwise, if the 95 % interval of Δmedian is wider than
//!    `--max-ci-width-pct` (default 10 %) of A's median: too imprecise to rule a change out;
//! 5. *no change* — otherwise (not significant, or significant but smaller than the
//!    threshold).
//!
//! Outcome (exit code) from the two headline metrics only: 1 if either regressed, else 125
//! if either is inconclusive, else 0. Stage verdicts are reported, never gating.
//! A comparison that cannot be made at all (invalid bundle, mismatched bundles, bundles on
//! different clocks, bad options) is [`CompareError`], exit 125 as well.
//!
//! **Clocks.** Both bundles must be on the same clock (`contract.clock`: wall, or the nested
//! harness's virtual clock); durations on different clocks are never compared, not even with
//! `--allow-mismatch` ([`CompareError::Clock`]). Two virtual clocks are one clock only when
//! the same L0 QEMU emulated the same L1 kernel on as many L1 CPUs
//! ([`crate::schema::NestedHarness::clock_differs`]; [`CompareError::VirtualClock`]). Every
//! output names the clock.

use serde::Serialize;
use std::fmt::Write as _;

use statrs::distribution::{ContinuousCDF, Normal};

use crate::report::{ms, VIRTUAL_CLOCK_MEANS};
use crate::schema::{Clock, ResultJson, Sample, Stage, HEADLINE};
use crate::stats::{percentile_sorted, with_failures};
use crate::verdict::Verdict;

/// Knobs; [`Default`] gives the documented defaults.
#[derive(Clone, Debug, Serialize)]
pub struct CompareOptions {
    /// Smallest |Δmedian| (percent of A's median) called a change. Default 2.
    pub threshold_pct: f64,
    /// Significance level of the Mann–Whitney test. Default 0.01.
    pub alpha: f64,
    /// Fewer values on a side → inconclusive. Default 20.
    pub min_samples: usize,
    /// A 95 % interval wider than this (percent of A's median) → inconclusive. Default 10.
    pub max_ci_width_pct: f64,
    /// Bootstrap resamples. Default 2000.
    pub resamples: usize,
    /// Bootstrap seed. Default fixed, so output is reproducible.
    pub seed: u64,
    /// Compare even when contracts or host kinds differ (the differences are printed).
    pub allow_mismatch: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold_pct: 2.0,
            alpha: 0.01,
            min_samples: 20,
            max_ci_width_pct: 10.0,
            resamples: 2000,
            seed: 0x7472_7565_636f_6c64,
            allow_mismatch: false,
        }
    }
}

/// Why two bundles cannot be compared (the CLI exits 125 for every one).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("the bundles are not comparable (pass --allow-mismatch to compare anyway):\n  - {}", .0.join("\n  - "))]
    Mismatch(Vec<String>),
    #[error(
        "cannot compare: A is on the {a} clock, B on the {b} clock (durations on different \
         clocks are never compared)"
    )]
    Clock { a: Clock, b: Clock },
    #[error(
        "cannot compare: A and B are on different virtual clocks ({0}); a virtual clock is its \
         L0 QEMU, L1 kernel and L1 CPUs, and durations on two of them are never compared"
    )]
    VirtualClock(String),
    #[error("bundle {side} is not valid (`truecold-proof verify` lists why); only verified bundles are compared")]
    Invalid { side: &'static str },
    #[error("bad option: {0}")]
    BadOption(String),
    #[error("cannot serialise the comparison as JSON")]
    Serialize(#[source] serde_json::Error),
}

/// A metric's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricVerdict {
    /// Both sides hold exactly the same values.
    NoDifference,
    Improved,
    Regressed,
    NoChange,
    Inconclusive,
}

impl MetricVerdict {
    /// The verdict in words.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricVerdict::NoDifference => "no difference",
            MetricVerdict::Improved => "improved",
            MetricVerdict::Regressed => "regressed",
            MetricVerdict::NoChange => "no change",
            MetricVerdict::Inconclusive => "inconclusive",
        }
    }
}

/// One side of a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    pub n: usize,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
}

/// One metric compared.
#[derive(Clone, Debug, Serialize)]
pub struct MetricComparison {
    pub name: String,
    /// Whether this metric decides the exit code.
    pub gating: bool,
    pub a: Side,
    pub b: Side,
    /// median(B) − median(A), ns.
    pub delta_p50_ns: Option<i64>,
    /// Δmedian as percent of A's median.
    pub delta_pct: Option<f64>,
    /// Bootstrap 95 % interval of Δmedian, ns.
    pub ci95_ns: Option<(i64, i64)>,
    /// Two-sided Mann–Whitney U p-value.
    pub p_value: Option<f64>,
    pub verdict: MetricVerdict,
    /// Why that verdict, in words.
    pub why: String,
}

/// Overall outcome, as `git bisect run` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    NoRegression,
    Regression,
    Inconclusive,
}

impl Outcome {
    /// 0 / 1 / 125.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::NoRegression => 0,
            Outcome::Regression => 1,
            Outcome::Inconclusive => 125,
        }
    }
}

/// The full comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a_label: String,
    pub b_label: String,
    /// The clock both bundles are on.
    pub clock: Clock,
    /// Contract/host differences (only non-empty with `allow_mismatch`).
    pub mismatches: Vec<String>,
    /// Facts a reader should know (an incomplete bundle, …).
    pub notes: Vec<String>,
    pub options: CompareOptions,
    pub metrics: Vec<MetricComparison>,
    pub outcome: Outcome,
}

/// SplitMix64: a tiny, well-known, seedable generator (deterministic across platforms).
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// Nearest-rank median of a resample of `src` drawn into `buf`.
fn resample_median(src: &[u64], buf: &mut Vec<u64>, rng: &mut SplitMix64) -> u64 {
    buf.clear();
    buf.extend((0..src.len()).map(|_| src[rng.below(src.len())]));
    let k = (src.len().div_ceil(2)).max(1) - 1; // rank ceil(n/2), 0-based
    *buf.select_nth_unstable(k).1
}

/// Percentile-bootstrap 95 % interval of median(B) − median(A).
pub fn bootstrap_delta_ci(a: &[u64], b: &[u64], resamples: usize, seed: u64) -> Option<(i64, i64)> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let mut d: Vec<i64> = (0..resamples)
        .map(|_| {
            let ma = resample_median(a, &mut ba, &mut rng) as i128;
            let mb = resample_median(b, &mut bb, &mut rng) as i128;
            (mb - ma).clamp(i64::MIN as i128, i64::MAX as i128) as i64
        })
        .collect();
    d.sort_unstable();
    let n = d.len();
    let lo = ((25 * n).div_ceil(1000)).clamp(1, n) - 1;
    let hi = ((975 * n).div_ceil(1000)).clamp(1, n) - 1;
    Some((d[lo], d[hi]))
}

/// Two-sided Mann–Whitney U p-value (normal approximation with tie and continuity
/// correction). `None` if a side is empty; 1.0 when every value is tied.
pub fn mann_whitney_p(a: &[u64], b: &[u64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(u64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_unstable();
    let n = all.len();
    // Twice the rank sum of A (average ranks of ties are half-integers).
    let mut r1_twice: u128 = 0;
    let mut tie_term: f64 = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // ranks i+1..=j+1; twice their average = i+1 + j+1
        let twice_avg = (i + 1 + j + 1) as u128;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        r1_twice += twice_avg * all[i..=j].iter().filter(|x| x.1).count() as u128;
        i = j + 1;
    }
    let (f1, f2, fnn) = (n1 as f64, n2 as f64, n as f64);
    let u1 = r1_twice as f64 / 2.0 - f1 * (f1 + 1.0) / 2.0;
    let mean = f1 * f2 / 2.0;
    let var = f1 * f2 / 12.0 * ((fnn + 1.0) - tie_term / (fnn * (fnn - 1.0)));
    if var <= 0.0 || !var.is_finite() {
        return Some(1.0);
    }
    let dev = ((u1 - mean).abs() - 0.5).max(0.0);
    let z = dev / var.sqrt();
    // Two-sided: twice the standard normal's upper tail at |z|.
    Some((2.0 * Normal::standard().sf(z)).clamp(0.0, 1.0))
}

fn side(sorted: &[u64]) -> Side {
    Side {
        n: sorted.len(),
        p50: percentile_sorted(sorted, 50, 100),
        p99: percentile_sorted(sorted, 99, 100),
    }
}

/// Compares one metric from its raw values (any order).
pub fn compare_values(
    name: &str,
    gating: bool,
    a: &[u64],
    b: &[u64],
    o: &CompareOptions,
) -> MetricComparison {
    let (mut sa, mut sb) = (a.to_vec(), b.to_vec());
    sa.sort_unstable();
    sb.sort_unstable();
    let (ka, kb) = (side(&sa), side(&sb));
    let delta = match (ka.p50, kb.p50) {
        (Some(x), Some(y)) => {
            Some((i128::from(y) - i128::from(x)).clamp(i64::MIN as i128, i64::MAX as i128) as i64)
        }
        _ => None,
    };
    let base = ka.p50.unwrap_or(0) as f64;
    let pct = |d: i64| {
        if base > 0.0 {
            d as f64 * 100.0 / base
        } else if d == 0 {
            0.0
        } else {
            f64::INFINITY.copysign(d as f64)
        }
    };
    let delta_pct = delta.map(pct);
    let mut m = MetricComparison {
        name: name.to_string(),
        gating,
        a: ka,
        b: kb,
        delta_p50_ns: delta,
        delta_pct,
        ci95_ns: None,
        p_value: None,
        verdict: MetricVerdict::Inconclusive,
        why: String::new(),
    };
    // 1. Too few values.
    if sa.len() < o.min_samples || sb.len() < o.min_samples {
        m.why = format!(
            "too few samples ({} vs {}; need {} per side)",
            sa.len(),
            sb.len(),
            o.min_samples
        );
        return m;
    }
    m.ci95_ns = bootstrap_delta_ci(&sa, &sb, o.resamples, o.seed);
    m.p_value = mann_whitney_p(&sa, &sb);
    // 2. The same values on both sides.
    if sa == sb {
        m.verdict = MetricVerdict::NoDifference;
        m.why = "both sides hold exactly the same values".into();
        return m;
    }
    let (Some(d), Some(p), Some(dp)) = (delta, m.p_value, delta_pct) else {
        m.why = "no data".into();
        return m;
    };
    // 3. Significant and at least the threshold.
    if p < o.alpha && dp.abs() >= o.threshold_pct {
        m.verdict = if d < 0 {
            MetricVerdict::Improved
        } else {
            MetricVerdict::Regressed
        };
        m.why = format!(
            "p {} < {} and |Δmedian| {:.2}% ≥ {}%",
            fmt_p(p),
            o.alpha,
            dp.abs(),
            o.threshold_pct
        );
        return m;
    }
    // 4. Too imprecise to call it no change.
    if let Some((lo, hi)) = m.ci95_ns {
        let width_pct = pct(hi.saturating_sub(lo));
        if width_pct > o.max_ci_width_pct {
            m.why = format!(
                "not a significant change, but the 95% interval of Δmedian is {width_pct:.1}% \
                 of A's median wide (> {}%): a change is not ruled out",
                o.max_ci_width_pct
            );
            return m;
        }
    }
    // 5. A change too few values cannot confirm: the interval excludes 0 on the side of a
    // median shift of at least the threshold, yet p ≥ alpha (e.g. 5 vs 5 values, where the
    // test cannot reach p < 0.01). Calling that "no change" would hide it.
    if let Some((lo, hi)) = m.ci95_ns {
        if p >= o.alpha && dp.abs() >= o.threshold_pct && (lo > 0 || hi < 0) {
            m.why = format!(
                "|Δmedian| {:.2}% ≥ {}% and the 95% interval excludes 0, but p {} ≥ {}: \
                 too few values to confirm the change",
                dp.abs(),
                o.threshold_pct,
                fmt_p(p),
                o.alpha
            );
            return m;
        }
    }
    // 6. No change.
    m.verdict = MetricVerdict::NoChange;
    m.why = if p >= o.alpha {
        format!("p {} ≥ {}", fmt_p(p), o.alpha)
    } else {
        format!(
            "significant (p {}) but |Δmedian| {:.2}% < {}%",
            fmt_p(p),
            dp.abs(),
            o.threshold_pct
        )
    };
    m
}

/// A p-value for people: three significant digits; below f64's range, "< 1e-300".
pub fn fmt_p(p: f64) -> String {
    if p < 1e-300 {
        "< 1e-300".into()
    } else {
        format!("{p:.2e}")
    }
}

/// Reasons two bundles' contracts or hosts differ (empty: comparable).
pub fn mismatches(a: &ResultJson, b: &ResultJson) -> Vec<String> {
    let mut out = Vec::new();
    let (ca, cb) = (&a.contract, &b.contract);
    if ca.kind != cb.kind {
        out.push(format!(
            "contract: A is \"{}\", B is \"{}\"",
            ca.label, cb.label
        ));
    }
    if ca.mode.name() != cb.mode.name() {
        out.push(format!(
            "mode: A is {}, B is {}",
            ca.mode.name(),
            cb.mode.name()
        ));
    }
    if ca.deadline_ns != cb.deadline_ns {
        out.push(format!(
            "deadline: A {} ms, B {} ms (failures are scored at it)",
            ms(ca.deadline_ns),
            ms(cb.deadline_ns)
        ));
    }
    let (ha, hb) = (a.environment.host_kind, b.environment.host_kind);
    if ha != hb {
        out.push(format!(
            "host kind: A is {}, B is {}",
            ha.as_str(),
            hb.as_str()
        ));
    }
    if a.configuration.vcpus != b.configuration.vcpus {
        out.push(format!(
            "vCPUs: A {}, B {}",
            a.configuration.vcpus, b.configuration.vcpus
        ));
    }
    if a.configuration.mem_bytes != b.configuration.mem_bytes {
        out.push(format!(
            "memory: A {} bytes, B {} bytes",
            a.configuration.mem_bytes, b.configuration.mem_bytes
        ));
    }
    out
}

fn headline_ok(s: &[Sample]) -> Vec<u64> {
    s.iter()
        .filter(|x| x.ok)
        .filter_map(|x| x.latency_ns)
        .collect()
}

fn headline_all(s: &[Sample], deadline: u64) -> Vec<u64> {
    let ok = headline_ok(s);
    let failed = (s.len() - ok.len()) as u64;
    with_failures(&ok, failed, deadline)
}

/// Compares the data two verdicts verified: each must be valid, and the rows compared
/// are exactly the ones `verify` parsed and judged (nothing is read again).
pub fn compare_verified(
    a: &Verdict,
    b: &Verdict,
    o: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let (ra, sa) = verified_data("A", a)?;
    let (rb, sb) = verified_data("B", b)?;
    compare_bundles((ra, sa), (rb, sb), o)
}

fn verified_data<'v>(
    side: &'static str,
    v: &'v Verdict,
) -> Result<(&'v ResultJson, &'v [Sample]), CompareError> {
    match (v.is_valid(), &v.result, &v.samples) {
        (true, Some(r), Some(s)) => Ok((r, s.as_slice())),
        _ => Err(CompareError::Invalid { side }),
    }
}

/// Compares two bundles (already verified by the caller) metric by metric.
pub fn compare_bundles(
    a: (&ResultJson, &[Sample]),
    b: (&ResultJson, &[Sample]),
    o: &CompareOptions,
) -> Result<Comparison, CompareError> {
    if !(o.threshold_pct >= 0.0 && o.alpha > 0.0 && o.alpha < 1.0 && o.max_ci_width_pct > 0.0) {
        return Err(CompareError::BadOption(
            "need threshold ≥ 0, 0 < alpha < 1, max CI width > 0".into(),
        ));
    }
    let (clock, cb) = (a.0.contract.clock, b.0.contract.clock);
    if clock != cb {
        return Err(CompareError::Clock { a: clock, b: cb });
    }
    if let Some(d) = crate::schema::virtual_clock_differs(&a.0.environment, &b.0.environment) {
        return Err(CompareError::VirtualClock(d));
    }
    let mm = mismatches(a.0, b.0);
    if !mm.is_empty() && !o.allow_mismatch {
        return Err(CompareError::Mismatch(mm));
    }
    let mut metrics = vec![
        compare_values(
            &format!("{HEADLINE} (successes)"),
            true,
            &headline_ok(a.1),
            &headline_ok(b.1),
            o,
        ),
        compare_values(
            &format!("{HEADLINE} (with failures)"),
            true,
            &headline_all(a.1, a.0.contract.deadline_ns),
            &headline_all(b.1, b.0.contract.deadline_ns),
            o,
        ),
    ];
    for st in Stage::ALL {
        let vals = |s: &[Sample]| -> Vec<u64> {
            s.iter()
                .filter(|x| x.ok && x.latency_ns.is_some())
                .filter_map(|x| x.stages.get(st))
                .collect()
        };
        let (va, vb) = (vals(a.1), vals(b.1));
        if va.is_empty() && vb.is_empty() {
            continue;
        }
        metrics.push(compare_values(st.name(), false, &va, &vb, o));
    }
    let gating: Vec<&MetricComparison> = metrics.iter().filter(|m| m.gating).collect();
    let outcome = if gating.iter().any(|m| m.verdict == MetricVerdict::Regressed) {
        Outcome::Regression
    } else if gating
        .iter()
        .any(|m| m.verdict == MetricVerdict::Inconclusive)
    {
        Outcome::Inconclusive
    } else {
        Outcome::NoRegression
    };
    let mut notes = Vec::new();
    for (side, r) in [("A", a.0), ("B", b.0)] {
        if r.contract.incomplete {
            notes.push(format!(
                "{side} is incomplete: {} of {} planned attempts",
                r.summary.attempts,
                r.contract.mode.planned_attempts()
            ));
        }
        for w in &r.environment.warnings {
            notes.push(format!("{side} host warning: {w}"));
        }
    }
    Ok(Comparison {
        a_label: a.0.contract.label.clone(),
        b_label: b.0.contract.label.clone(),
        clock,
        mismatches: mm,
        notes,
        options: o.clone(),
        metrics,
        outcome,
    })
}

fn opt_ms(v: Option<u64>) -> String {
    v.map(ms).unwrap_or_else(|| "–".into())
}

fn signed_ms(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "+" };
    format!("{sign}{}", ms(v.unsigned_abs()))
}

fn cells(m: &MetricComparison) -> [String; 11] {
    [
        m.name.clone(),
        m.a.n.to_string(),
        opt_ms(m.a.p50),
        opt_ms(m.a.p99),
        m.b.n.to_string(),
        opt_ms(m.b.p50),
        opt_ms(m.b.p99),
        match (m.delta_p50_ns, m.delta_pct) {
            (Some(d), Some(p)) => format!("{} ({p:+.2}%)", signed_ms(d)),
            _ => "–".into(),
        },
        m.ci95_ns
            .map(|(l, h)| format!("[{}, {}]", signed_ms(l), signed_ms(h)))
            .unwrap_or_else(|| "–".into()),
        m.p_value.map(fmt_p).unwrap_or_else(|| "–".into()),
        m.verdict.as_str().to_string(),
    ]
}

const HEAD: [&str; 11] = [
    "metric",
    "A n",
    "A p50 ms",
    "A p99 ms",
    "B n",
    "B p50 ms",
    "B p99 ms",
    "Δp50 ms",
    "95% CI ms",
    "p (MWU)",
    "verdict",
];

fn outcome_line(c: &Comparison) -> String {
    match c.outcome {
        Outcome::NoRegression => "outcome: no regression (exit 0)".into(),
        Outcome::Regression => "outcome: REGRESSION (exit 1)".into(),
        Outcome::Inconclusive => "outcome: inconclusive (exit 125)".into(),
    }
}

impl Comparison {
    /// The clock both sides are on, in [`Clock::describe`]'s words (and, virtual, what that
    /// clock measures).
    pub fn clock_line(&self) -> String {
        match self.clock {
            Clock::Wall => format!("clock: {}", self.clock.describe()),
            Clock::Virtual => format!("clock: {}: {VIRTUAL_CLOCK_MEANS}", self.clock.describe()),
        }
    }

    /// Terminal table.
    pub fn render_text(&self) -> String {
        let rows: Vec<[String; 11]> = self.metrics.iter().map(cells).collect();
        let mut w = HEAD.map(|h| h.chars().count());
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = w[i] - c.chars().count();
                if i == 0 || i == 10 {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
                s.push_str("  ");
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = format!(
            "A: {}\nB: {}\n{}\n",
            self.a_label,
            self.b_label,
            self.clock_line()
        );
        for m in &self.mismatches {
            let _ = writeln!(s, "WARNING (allowed mismatch): {m}");
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s += &line(&HEAD.map(String::from));
        for r in &rows {
            s += &line(r);
        }
        for m in self.metrics.iter().filter(|m| m.gating) {
            let _ = writeln!(s, "{}: {} — {}", m.name, m.verdict.as_str(), m.why);
        }
        s += &outcome_line(self);
        s.push('\n');
        s
    }

    /// Markdown table.
    pub fn render_markdown(&self) -> String {
        let mut s = format!(
            "A: {}  \nB: {}  \n{}\n\n",
            self.a_label,
            self.b_label,
            self.clock_line()
        );
        for m in &self.mismatches {
            let _ = writeln!(s, "> **Allowed mismatch:** {m}\n");
        }
        for n in &self.notes {
            let _ = writeln!(s, "> Note: {n}\n");
        }
        let _ = writeln!(s, "| {} |", HEAD.join(" | "));
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for m in &self.metrics {
            let _ = writeln!(s, "| {} |", cells(m).join(" | "));
        }
        let _ = writeln!(s);
        for m in self.metrics.iter().filter(|m| m.gating) {
            let _ = writeln!(s, "- {}: **{}** — {}", m.name, m.verdict.as_str(), m.why);
        }
        let _ = writeln!(s, "\n**{}**", outcome_line(self));
        s
    }

    /// JSON document. An error is returned, never an empty document.
    pub fn render_json(&self) -> Result<String, CompareError> {
        Ok(serde_json::to_string_pretty(self).map_err(CompareError::Serialize)? + "\n")
    }
}
