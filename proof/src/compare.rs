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
//! A comparison that cannot be made at all (invalid bundle, a multi-arm, tune or bisect
//! directory given for a bundle, mismatched bundles, bundles on different clocks) is
//! [`CompareError`], exit [`EXIT_CANNOT_COMPARE`] (200, which stops `git bisect run`, as
//! `truecold bisect step`'s 200 does); a bad option value is a usage error, exit
//! [`EXIT_USAGE`] (125, as every usage error of the CLI).
//!
//! **Output.** The text and Markdown renderings show each side's path and label, each
//! distinct host warning once with the side(s) that recorded it, the two headline rows (every
//! stage's row too with `stages`; the verdict naming the arm: `B faster`, `B slower`), a
//! warning when A and B are the same campaign, and, when a side's host was busy (and A and B
//! are two campaigns), says so on the outcome line. The outcome line gives the answer:
//! `improved: B faster than A`, `REGRESSION: B slower than A`, `no change`, `no difference`,
//! or `inconclusive` with the n a side that would decide at the observed effect (when the
//! comparison was sized: [`compare_bundles_sized`]). Every line of the default text output
//! is at most [`TEXT_WIDTH`] columns. Text from a bundle and paths are escaped
//! ([`crate::fmt::escape_untrusted`]).
//!
//! **Clocks.** Both bundles must be on the same clock (`contract.clock`: wall, or the nested
//! harness's virtual clock); durations on different clocks are never compared, not even with
//! `--allow-mismatch` ([`CompareError::Clock`]). Two virtual clocks are one clock only when
//! the same L0 QEMU emulated the same L1 kernel on as many L1 CPUs
//! ([`crate::schema::NestedHarness::clock_differs`]; [`CompareError::VirtualClock`]). Every
//! output names the clock.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use crate::fmt::{escape_untrusted, ms, opt_ms, p_text, signed_ms, VIRTUAL_CLOCK_MEANS};
use crate::schema::Figure;
use crate::schema::{Clock, ResultJson, Sample, Stage, HEADLINE};
use crate::stats::{ascending, percentile_of, percentile_sorted, with_failures};
use crate::summary::success_figures;
use crate::verdict::{chain, Verdict};

/// Exit status of a comparison that cannot be made at all (a bundle invalid or unreadable, a
/// multi-arm, tune or bisect directory instead of a bundle, bundles not comparable or on
/// different clocks). The number `truecold bisect step` exits with when it cannot judge
/// (`EXIT_ABORT` in bench/src/bisect/commit_bisect.rs): `git bisect run` stops on it, where 125 would skip
/// the commit and 1 would call it bad.
pub const EXIT_CANNOT_COMPARE: i32 = 200;

/// Exit status of an inconclusive comparison and of a usage error (a bad or missing argument,
/// a bad option value): `git bisect run` skips the commit.
pub const EXIT_USAGE: i32 = 125;

/// The widest line of the default text output, in columns.
pub const TEXT_WIDTH: usize = 100;

/// How the bench's host-busy warnings begin (`environment.warnings`, written by
/// bench/src/checks/environment.rs: "host busy before the campaign: …", "host busy during the campaign:
/// …").
pub const HOST_BUSY_PREFIX: &str = "host busy";

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
    /// Which figure of the headline is compared (`--clock`): the total one (every bundle's
    /// `latency_ns`) or the nested harness's parallel clock (`parallel_latency_ns`, which
    /// both bundles must carry). The stages are always on the bundles' own clock.
    #[serde(skip_serializing_if = "Figure::is_total")]
    pub figure: Figure,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            threshold_pct: 2.0,
            alpha: 0.01,
            min_samples: 20,
            max_ci_width_pct: 10.0,
            resamples: 2000,
            seed: crate::seed::DEFAULT,
            allow_mismatch: false,
            figure: Figure::Total,
        }
    }
}

/// Why two bundles cannot be compared (the CLI exits [`CompareError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(
        "{side} ({path}) is {what} (it holds {marker}), not one bundle; compare bundles inside \
         it: {}",
        .bundles.join(", ")
    )]
    NotABundle {
        side: &'static str,
        path: String,
        what: &'static str,
        marker: &'static str,
        /// The bundle directories inside it (at most [`MAX_LISTED`]), then "… N more".
        bundles: Vec<String>,
    },
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
    #[error(
        "--clock parallel: {side} has no parallel-clock figure (only bundles made in the nested \
         harness on an L0 that keeps the parallel clock, schema 11+, have one)"
    )]
    NoParallel { side: &'static str },
    #[error("cannot serialise the comparison as JSON")]
    Serialize(#[source] serde_json::Error),
}

/// How the warning that A and B are one campaign begins.
pub const SAME_CAMPAIGN: &str = "A and B are the same campaign";

/// The most bundle paths a [`CompareError::NotABundle`] lists.
pub const MAX_LISTED: usize = 8;

impl CompareError {
    /// A word for the kind of error (the JSON `error.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            CompareError::NotABundle { .. } => "not_a_bundle",
            CompareError::Mismatch(_) => "mismatch",
            CompareError::Clock { .. } => "clock",
            CompareError::VirtualClock(_) => "virtual_clock",
            CompareError::Invalid { .. } => "invalid",
            CompareError::BadOption(_) => "bad_option",
            CompareError::NoParallel { .. } => "no_parallel",
            CompareError::Serialize(_) => "serialize",
        }
    }

    /// [`EXIT_USAGE`] for a bad option value, [`EXIT_CANNOT_COMPARE`] for every other.
    pub fn exit_code(&self) -> i32 {
        match self {
            CompareError::BadOption(_) => EXIT_USAGE,
            _ => EXIT_CANNOT_COMPARE,
        }
    }

    /// The message as terminal lines, every piece of untrusted text (paths, labels) escaped
    /// on its own, so a list is one item a line (never a literal `\n`).
    pub fn lines(&self) -> Vec<String> {
        match self {
            CompareError::Mismatch(mm) => {
                let mut v = vec![
                    "the bundles are not comparable (pass --allow-mismatch to compare anyway):"
                        .to_string(),
                ];
                v.extend(mm.iter().map(|m| format!("  - {}", escape_untrusted(m))));
                v
            }
            CompareError::NotABundle {
                side,
                path,
                what,
                marker,
                bundles,
            } => {
                let mut v = vec![format!(
                    "{side} ({}) is {what} (it holds {marker}), not one bundle; compare bundles \
                     inside it{}",
                    escape_untrusted(path),
                    if bundles.is_empty() {
                        " (none found)"
                    } else {
                        ", e.g.:"
                    }
                )];
                v.extend(bundles.iter().map(|b| format!("  {}", escape_untrusted(b))));
                v
            }
            e => vec![escape_untrusted(&chain(e))],
        }
    }

    /// The JSON `--json` prints when the comparison cannot be made:
    /// `{"error": {"kind", "message"}, "path_a", "path_b"}`.
    pub fn render_json(&self, path_a: &Path, path_b: &Path) -> String {
        let v = serde_json::json!({
            "error": { "kind": self.kind(), "message": chain(self) },
            "path_a": path_a.display().to_string(),
            "path_b": path_b.display().to_string(),
            "exit": self.exit_code(),
        });
        serde_json::to_string_pretty(&v)
            .unwrap_or_else(|_| format!("{{\"error\": {{\"kind\": \"{}\"}}}}", self.kind()))
            + "\n"
    }
}

/// A host warning of one or both bundles, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SidedWarning {
    /// "A", "B", or both; empty: about the comparison itself.
    pub sides: Vec<&'static str>,
    pub text: String,
}

impl SidedWarning {
    fn head(&self) -> String {
        if self.sides.is_empty() {
            "warning:".into()
        } else {
            format!("warning ({}):", self.sides.join(", "))
        }
    }
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
    /// The verdict as B against A reads it, naming the arm: `B faster`, `B slower`, or
    /// [`MetricVerdict::as_str`] for the others.
    pub fn arm_words(self) -> &'static str {
        match self {
            MetricVerdict::Improved => "B faster",
            MetricVerdict::Regressed => "B slower",
            v => v.as_str(),
        }
    }

    /// The verdict in words (the records' word: `comparison.json`, `bisect.json`).
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
    /// An inconclusive metric: about how many values a side would decide it at the observed
    /// effect (the [`Sizer`] the comparison was made with: `truecold-proof compare`'s is
    /// `crate::sizing::n_to_decide`); `None` for any other verdict, without a sizer, or when
    /// the values give no spread to size by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_to_decide: Option<u64>,
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
    /// The directories compared, as given (`None` when compared from memory).
    pub path_a: Option<String>,
    pub path_b: Option<String>,
    pub a_label: String,
    pub b_label: String,
    /// The clock both bundles are on.
    pub clock: Clock,
    /// Contract/host differences (only non-empty with `allow_mismatch`).
    pub mismatches: Vec<String>,
    /// Facts a reader should know (an incomplete bundle, …).
    pub notes: Vec<String>,
    /// Each distinct host warning once, with the sides that recorded it; and a warning about
    /// the comparison itself (A and B the same campaign).
    pub warnings: Vec<SidedWarning>,
    /// The sides whose host was busy (a warning beginning [`HOST_BUSY_PREFIX`]).
    pub busy_hosts: Vec<&'static str>,
    /// Both sides are arms of an interleaved campaign.
    pub interleaved: bool,
    pub options: CompareOptions,
    pub metrics: Vec<MetricComparison>,
    pub outcome: Outcome,
    /// The differential profile of B's attribution launches against A's, when both bundles
    /// carry RIP-sampled ones ([`crate::attribution::differential`]; never gating).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::attribution::DiffProfile>,
}

/// The seedable generator of the bootstraps ([`crate::stats::SplitMix64`]).
pub(crate) use crate::stats::SplitMix64;

/// Nearest-rank median of a resample of `src` drawn into `buf`; `None` when `src` is empty.
fn resample_median(src: &[u64], buf: &mut Vec<u64>, rng: &mut SplitMix64) -> Option<u64> {
    buf.clear();
    buf.extend((0..src.len()).map(|_| src[rng.below(src.len())]));
    percentile_of(buf, 50, 100)
}

/// Percentile-bootstrap 95 % interval of median(B) − median(A).
pub fn bootstrap_delta_ci(a: &[u64], b: &[u64], resamples: usize, seed: u64) -> Option<(i64, i64)> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let mut d: Vec<i64> = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let ma = i128::from(resample_median(a, &mut ba, &mut rng)?);
        let mb = i128::from(resample_median(b, &mut bb, &mut rng)?);
        d.push((mb - ma).clamp(i64::MIN as i128, i64::MAX as i128) as i64);
    }
    let d = ascending(&d);
    Some((
        percentile_sorted(&d, 25, 1000)?,
        percentile_sorted(&d, 975, 1000)?,
    ))
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
    let (sa, sb) = (ascending(a), ascending(b));
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
        n_to_decide: None,
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
            p_text(p),
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
                p_text(p),
                o.alpha
            );
            return m;
        }
    }
    // 6. No change.
    m.verdict = MetricVerdict::NoChange;
    m.why = if p >= o.alpha {
        format!("p {} ≥ {}", p_text(p), o.alpha)
    } else {
        format!(
            "significant (p {}) but |Δmedian| {:.2}% < {}%",
            p_text(p),
            dp.abs(),
            o.threshold_pct
        )
    };
    m
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

/// The headline on `figure` with the failures scored at the deadline. A success without the
/// figure (a parallel reading that could not be read) is neither a value nor a failure.
fn headline_all(s: &[Sample], deadline: u64, figure: Figure) -> Vec<u64> {
    let ok = success_figures(s, figure);
    let failed = s
        .iter()
        .filter(|x| !(x.ok && x.latency_ns.is_some()))
        .count() as u64;
    with_failures(&ok, failed, deadline)
}

/// How many values a side would decide an inconclusive metric, from its two sides' values,
/// its Δmedian in percent of A's and the options (`None`: cannot tell).
pub type Sizer<'s> = &'s dyn Fn(&[u64], &[u64], Option<f64>, &CompareOptions) -> Option<u64>;

/// Compares the data two verdicts verified: each must be valid, and the rows compared
/// are exactly the ones `verify` parsed and judged (nothing is read again).
pub fn compare_verified(
    a: &Verdict,
    b: &Verdict,
    o: &CompareOptions,
) -> Result<Comparison, CompareError> {
    compare_verified_sized(a, b, o, &|_, _, _, _| None)
}

/// [`compare_verified`], each inconclusive metric sized by `sizer`.
pub fn compare_verified_sized(
    a: &Verdict,
    b: &Verdict,
    o: &CompareOptions,
    sizer: Sizer,
) -> Result<Comparison, CompareError> {
    let (ra, sa) = verified_data("A", a)?;
    let (rb, sb) = verified_data("B", b)?;
    compare_bundles_sized((ra, sa), (rb, sb), o, sizer)
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

/// The comparison's outcome from its gating metrics' verdicts: a regression if one
/// regressed, else inconclusive if one is, else no regression.
pub fn outcome_of(gating: impl IntoIterator<Item = MetricVerdict>) -> Outcome {
    let v: Vec<MetricVerdict> = gating.into_iter().collect();
    if v.contains(&MetricVerdict::Regressed) {
        Outcome::Regression
    } else if v.contains(&MetricVerdict::Inconclusive) {
        Outcome::Inconclusive
    } else {
        Outcome::NoRegression
    }
}

/// Compares two bundles (already verified by the caller) metric by metric.
pub fn compare_bundles(
    a: (&ResultJson, &[Sample]),
    b: (&ResultJson, &[Sample]),
    o: &CompareOptions,
) -> Result<Comparison, CompareError> {
    compare_bundles_sized(a, b, o, &|_, _, _, _| None)
}

/// [`compare_bundles`], each inconclusive metric sized by `sizer`
/// ([`MetricComparison::n_to_decide`]).
pub fn compare_bundles_sized(
    a: (&ResultJson, &[Sample]),
    b: (&ResultJson, &[Sample]),
    o: &CompareOptions,
    sizer: Sizer,
) -> Result<Comparison, CompareError> {
    let sized = |name: &str, gating: bool, va: &[u64], vb: &[u64]| {
        let mut m = compare_values(name, gating, va, vb, o);
        if m.verdict == MetricVerdict::Inconclusive {
            m.n_to_decide = sizer(va, vb, m.delta_pct, o);
        }
        m
    };
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
    let f = o.figure;
    if f == Figure::Parallel {
        for (side, s) in [("A", a.1), ("B", b.1)] {
            if s.iter().all(|x| x.parallel_latency_ns.is_none()) {
                return Err(CompareError::NoParallel { side });
            }
        }
    }
    let on = match f {
        Figure::Total => String::new(),
        Figure::Parallel => " on the parallel clock".to_string(),
    };
    let mut metrics = vec![
        sized(
            &format!("{HEADLINE}{on} (successes)"),
            true,
            &success_figures(a.1, f),
            &success_figures(b.1, f),
        ),
        sized(
            &format!("{HEADLINE}{on} (with failures)"),
            true,
            &headline_all(a.1, a.0.contract.deadline_ns, f),
            &headline_all(b.1, b.0.contract.deadline_ns, f),
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
        metrics.push(sized(st.name(), false, &va, &vb));
    }
    let outcome = outcome_of(metrics.iter().filter(|m| m.gating).map(|m| m.verdict));
    let mut notes = Vec::new();
    let mut warnings: Vec<SidedWarning> = Vec::new();
    if a == b {
        warnings.push(SidedWarning {
            sides: vec![],
            text: format!(
                "{SAME_CAMPAIGN} (the same result.json and samples.csv): \"no difference\" \
                 compares a bundle with itself; compare two campaigns"
            ),
        });
    }
    let mut busy_hosts = Vec::new();
    for (side, r) in [("A", a.0), ("B", b.0)] {
        if r.contract.incomplete {
            notes.push(format!(
                "{side} is incomplete: {} of {} planned attempts",
                r.summary.attempts,
                r.contract.mode.planned_attempts()
            ));
        }
        for w in &r.environment.warnings {
            if w.starts_with(HOST_BUSY_PREFIX) && !busy_hosts.contains(&side) {
                busy_hosts.push(side);
            }
            match warnings
                .iter_mut()
                .find(|x| !x.sides.is_empty() && x.text == *w)
            {
                Some(x) if !x.sides.contains(&side) => x.sides.push(side),
                Some(_) => {}
                None => warnings.push(SidedWarning {
                    sides: vec![side],
                    text: w.clone(),
                }),
            }
        }
    }
    Ok(Comparison {
        path_a: None,
        path_b: None,
        a_label: a.0.contract.label.clone(),
        b_label: b.0.contract.label.clone(),
        clock,
        mismatches: mm,
        notes,
        warnings,
        busy_hosts,
        interleaved: a.0.contract.interleaved && b.0.contract.interleaved,
        options: o.clone(),
        metrics,
        outcome,
        profile: None,
    })
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
        m.p_value.map(p_text).unwrap_or_else(|| "–".into()),
        m.verdict.arm_words().to_string(),
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
    let head = c.outcome_head();
    match c.busy_line() {
        Some(b) => format!("{head}; {b}"),
        None => head,
    }
}

/// `text` wrapped at `width` columns (the one wrapper: [`crate::cli_text::wrap`]).
pub use crate::cli_text::wrap;

/// The compact headline table's cells: metric (the headline's variant), n A/B, A p50, B p50,
/// Δp50 (Δ%), verdict.
fn headline_cells(m: &MetricComparison) -> [String; 6] {
    [
        short_name(&m.name).to_string(),
        format!("{}/{}", m.a.n, m.b.n),
        opt_ms(m.a.p50),
        opt_ms(m.b.p50),
        match (m.delta_p50_ns, m.delta_pct) {
            (Some(d), Some(p)) => format!("{} ({p:+.2}%)", signed_ms(d)),
            _ => "–".into(),
        },
        m.verdict.arm_words().to_string(),
    ]
}

const HEADLINE_HEAD: [&str; 6] = [
    "headline", "n A/B", "A p50 ms", "B p50 ms", "Δp50 ms", "verdict",
];

/// A headline metric's name without the headline's own ("successes", "with failures").
fn short_name(name: &str) -> &str {
    name.strip_prefix(HEADLINE)
        .map(|r| r.trim().trim_start_matches('(').trim_end_matches(')'))
        .unwrap_or(name)
}

/// A right- or left-aligned table (`left`: the columns aligned left), two spaces apart.
fn table<const N: usize>(head: [&str; N], rows: &[[String; N]], left: &[usize]) -> String {
    let mut w = head.map(|h| h.chars().count());
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = " ".repeat(w[i] - c.chars().count());
            if left.contains(&i) {
                s.push_str(c);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(c);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&head.map(String::from));
    for r in rows {
        s += &line(r);
    }
    s
}

impl Comparison {
    /// The outcome line's first part, the answer in words: `outcome: improved: B faster than
    /// A (exit 0)`, `outcome: REGRESSION: B slower than A (exit 1)`, `outcome: inconclusive
    /// (exit 125): about 140 launches a side would decide`.
    pub fn outcome_head(&self) -> String {
        let gating: Vec<&MetricComparison> = self.metrics.iter().filter(|m| m.gating).collect();
        let any = |v: MetricVerdict| gating.iter().any(|m| m.verdict == v);
        match self.outcome {
            Outcome::Regression => "outcome: REGRESSION: B slower than A (exit 1)".into(),
            Outcome::Inconclusive => {
                let n = gating
                    .iter()
                    .filter(|m| m.verdict == MetricVerdict::Inconclusive)
                    .filter_map(|m| m.n_to_decide)
                    .max();
                match n {
                    Some(n) => format!(
                        "outcome: inconclusive (exit 125): about {n} launches a side would \
                         decide at the observed effect"
                    ),
                    None => "outcome: inconclusive (exit 125)".into(),
                }
            }
            Outcome::NoRegression if any(MetricVerdict::Improved) => {
                "outcome: improved: B faster than A (exit 0)".into()
            }
            Outcome::NoRegression
                if gating
                    .iter()
                    .all(|m| m.verdict == MetricVerdict::NoDifference) =>
            {
                "outcome: no difference, the same values (exit 0)".into()
            }
            Outcome::NoRegression => "outcome: no change (exit 0)".into(),
        }
    }

    /// Whether A and B are the same campaign (the warning [`compare_bundles`] adds).
    pub fn same_campaign(&self) -> bool {
        self.warnings
            .iter()
            .any(|w| w.sides.is_empty() && w.text.starts_with(SAME_CAMPAIGN))
    }

    /// The clock both sides are on, in [`Clock::describe`]'s words (and, virtual, what that
    /// clock measures).
    pub fn clock_line(&self) -> String {
        match self.clock {
            Clock::Wall => format!("clock: {}", self.clock.describe()),
            Clock::Virtual => format!("clock: {}: {VIRTUAL_CLOCK_MEANS}", self.clock.describe()),
        }
    }

    /// When a side's host was busy: which, and what to do about it (`None`: neither was, or
    /// A and B are one campaign, which saw one load).
    pub fn busy_line(&self) -> Option<String> {
        if self.same_campaign() {
            return None;
        }
        let who = match self.busy_hosts.as_slice() {
            [] => return None,
            [one] => format!("{one}'s host was busy"),
            _ => "both hosts were busy".to_string(),
        };
        let remedy = if self.interleaved {
            "A and B are arms of interleaved campaigns, which saw the same load"
        } else {
            "two campaigns at different times see different load, arms interleaved in one \
             campaign see the same: `truecold run --engines …` (engines) or `truecold tune` \
             (knobs)"
        };
        Some(format!(
            "{who} (warnings above): other load shifts latencies; {remedy}"
        ))
    }

    /// Side `side`'s path (escaped), or "–" when compared from memory.
    fn path_of(&self, side: &str) -> String {
        let p = if side == "A" {
            &self.path_a
        } else {
            &self.path_b
        };
        p.as_deref()
            .map(escape_untrusted)
            .unwrap_or_else(|| "–".into())
    }

    /// Terminal output: the headline rows (`stages`: the full table of every metric), every
    /// line of the default within [`TEXT_WIDTH`] columns.
    /// `--quiet`'s text: the outcome alone (`outcome: REGRESSION: B slower than A (exit 1)`), without the
    /// busy-host note that points at warnings `--quiet` does not print.
    pub fn render_outcome(&self) -> String {
        format!("{}\n", self.outcome_head())
    }

    pub fn render_text(&self, stages: bool) -> String {
        self.render_text_at(stages, TEXT_WIDTH)
    }

    /// [`Comparison::render_text`] with its prose wrapped at `width` columns (the tables
    /// keep their rows whole).
    pub fn render_text_at(&self, stages: bool, width: usize) -> String {
        let wrapped = |first: &str, text: &str| wrap(first, text, "  ", width);
        let mut s = String::new();
        for (side, label) in [("A", &self.a_label), ("B", &self.b_label)] {
            s += &wrap(&format!("{side}:"), &self.path_of(side), "   ", width);
            s += &wrap("  ", &escape_untrusted(label), "   ", width);
        }
        s += &wrapped("", &self.clock_line());
        for m in &self.mismatches {
            s += &wrapped("WARNING (allowed mismatch):", &escape_untrusted(m));
        }
        for w in &self.warnings {
            s += &wrapped(&w.head(), &escape_untrusted(&w.text));
        }
        for n in &self.notes {
            s += &wrapped("note:", n);
        }
        if stages {
            let rows: Vec<[String; 11]> = self.metrics.iter().map(cells).collect();
            s += &table(HEAD, &rows, &[0, 10]);
        } else {
            let rows: Vec<[String; 6]> = self
                .metrics
                .iter()
                .filter(|m| m.gating)
                .map(headline_cells)
                .collect();
            s += &wrapped("", &format!("{HEADLINE}, ms (Δ = B − A):"));
            s += &table(HEADLINE_HEAD, &rows, &[0, 5]);
        }
        for m in self.metrics.iter().filter(|m| m.gating) {
            s += &wrapped(
                &format!("{}:", short_name(&m.name)),
                &format!("{} — {}; {}", verdict_words(m), m.why, details(m)),
            );
        }
        if !stages {
            let n = self.metrics.iter().filter(|m| !m.gating).count();
            if n > 0 {
                s += &wrapped("", &format!("({n} stage rows: --stages)"));
            }
        }
        if let Some(p) = &self.profile {
            s += &wrapped("", &p.heading());
            s += &table(crate::attribution::DIFF_HEAD, &p.rows(), &[0, 5]);
        }
        s += &wrapped("", &outcome_line(self));
        s
    }

    /// Markdown: the headline rows (`stages`: every metric's).
    pub fn render_markdown(&self, stages: bool) -> String {
        let mut s = String::new();
        for (side, label) in [("A", &self.a_label), ("B", &self.b_label)] {
            let _ = writeln!(
                s,
                "{side}: `{}` — {}  ",
                self.path_of(side),
                escape_untrusted(label)
            );
        }
        let _ = writeln!(s, "{}\n", self.clock_line());
        for m in &self.mismatches {
            let _ = writeln!(s, "> **Allowed mismatch:** {}\n", escape_untrusted(m));
        }
        for w in &self.warnings {
            let _ = writeln!(s, "> **{}** {}\n", w.head(), escape_untrusted(&w.text));
        }
        for n in &self.notes {
            let _ = writeln!(s, "> Note: {n}\n");
        }
        let _ = writeln!(s, "| {} |", HEAD.join(" | "));
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for m in self.metrics.iter().filter(|m| stages || m.gating) {
            let _ = writeln!(s, "| {} |", cells(m).join(" | "));
        }
        let _ = writeln!(s);
        for m in self.metrics.iter().filter(|m| m.gating) {
            let _ = writeln!(s, "- {}: **{}** — {}", m.name, verdict_words(m), m.why);
        }
        if let Some(p) = &self.profile {
            let _ = writeln!(s, "\n{}\n", p.heading());
            let _ = writeln!(s, "| {} |", crate::attribution::DIFF_HEAD.join(" | "));
            let _ = writeln!(s, "|---|---:|---|---:|---:|---|");
            for r in p.rows() {
                let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
                let _ = writeln!(s, "| {} |", cells.join(" | "));
            }
        }
        let _ = writeln!(s, "\n**{}**", outcome_line(self));
        s
    }

    /// JSON document (every metric, and `exit`, the exit status). An error is returned,
    /// never an empty document.
    pub fn render_json(&self) -> Result<String, CompareError> {
        let mut v = serde_json::to_value(self).map_err(CompareError::Serialize)?;
        v["exit"] = self.outcome.exit_code().into();
        Ok(serde_json::to_string_pretty(&v).map_err(CompareError::Serialize)? + "\n")
    }
}

/// A gating metric's verdict in words, naming the arm (`regressed: B slower`), and for an
/// inconclusive one the n that would decide it.
fn verdict_words(m: &MetricComparison) -> String {
    match (m.verdict, m.n_to_decide) {
        (MetricVerdict::Improved | MetricVerdict::Regressed, _) => {
            format!("{}: {}", m.verdict.as_str(), m.verdict.arm_words())
        }
        (MetricVerdict::Inconclusive, Some(n)) => {
            format!("inconclusive (about {n} a side would decide)")
        }
        (v, _) => v.as_str().to_string(),
    }
}

/// A headline metric's figures the compact table leaves out: the interval, the p99s.
fn details(m: &MetricComparison) -> String {
    let ci = m
        .ci95_ns
        .map(|(l, h)| format!("[{}, {}] ms", signed_ms(l), signed_ms(h)))
        .unwrap_or_else(|| "–".into());
    format!(
        "95% CI of Δp50 {ci}; p99 A {} ms, B {} ms",
        opt_ms(m.a.p99),
        opt_ms(m.b.p99)
    )
}
