//! Every summary stored in `result.json`, computed from the samples alone (the bench
//! calls [`Summaries::compute`] to write them, the verifier calls it again to check them).

use std::collections::BTreeMap;

use crate::schema::{
    Configuration, Contract, Environment, Figure, GroupSummary, Pair, ParallelSummary, ResultJson,
    Sample, StageSummary, Summaries, SCHEMA_VERSION,
};
use crate::stats::{ascending, with_failures, Summary};

/// Error-histogram key of a row marked ok that has no latency (scored as a failure).
pub const OK_WITHOUT_LATENCY: &str = "ok_without_latency";
/// The knee's factor over the level-1 p50: numerator.
pub const KNEE_FACTOR_NUM: u64 = 3;
/// The knee's factor over the level-1 p50: denominator.
pub const KNEE_FACTOR_DEN: u64 = 2;

/// The knee as [`Summaries::knee_concurrency`] defines it.
pub fn knee(levels: &[GroupSummary]) -> Option<u32> {
    let base = levels
        .iter()
        .find(|g| g.concurrency == 1)?
        .headline
        .successes?
        .p50;
    levels
        .iter()
        .filter(|g| g.concurrency > 1)
        .find(|g| {
            g.headline.successes.is_some_and(|h| {
                u128::from(h.p50) * u128::from(KNEE_FACTOR_DEN)
                    > u128::from(base) * u128::from(KNEE_FACTOR_NUM)
            })
        })
        .map(|g| g.concurrency)
}

fn pair(success_values: &[u64], failures: u64, deadline_ns: u64) -> Pair {
    if success_values.is_empty() && failures == 0 {
        return Pair {
            successes: None,
            with_failures: None,
        };
    }
    Pair {
        successes: Summary::of(success_values),
        with_failures: Summary::of(&with_failures(success_values, failures, deadline_ns)),
    }
}

/// The headline (request → strict-ready) of every successful row, ascending: the values every
/// successes-only figure is computed from — the summaries, the plots, the page, `compare`,
/// a multi-arm directory's arms, a tune's arms, the attribution's reconciliation. A row
/// marked ok without a latency is not among them: it is scored as a failure
/// ([`OK_WITHOUT_LATENCY`]).
pub fn success_latencies<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<u64> {
    success_figures(samples, Figure::Total)
}

/// [`success_latencies`] on either figure of the headline: the successful rows that have it,
/// ascending. On [`Figure::Parallel`] a success whose parallel reading is missing is left out
/// (the parallel summary counts it: [`ParallelSummary::missing`]).
pub fn success_figures<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
    figure: Figure,
) -> Vec<u64> {
    let ok: Vec<u64> = samples
        .into_iter()
        .filter(|s| s.ok && s.latency_ns.is_some())
        .filter_map(|s| figure.of(s))
        .collect();
    ascending(&ok)
}

/// [`Summaries::parallel_latency`]: `None` when no row has the figure.
fn parallel_summary(samples: &[Sample]) -> Option<ParallelSummary> {
    if samples.iter().all(|s| s.parallel_latency_ns.is_none()) {
        return None;
    }
    let have = success_figures(samples, Figure::Parallel);
    let successes = samples
        .iter()
        .filter(|s| s.ok && s.latency_ns.is_some())
        .count();
    Some(ParallelSummary {
        successes: Summary::of(&have),
        missing: (successes - have.len()) as u64,
    })
}

/// The successes' headlines ([`success_latencies`]) and how many rows are scored as
/// failures: every other row (a "success" without a latency is invalid, the verifier says
/// so; it is scored like a failure here so it is never silently dropped).
fn headline_values(samples: &[&Sample]) -> (Vec<u64>, u64) {
    let ok = success_latencies(samples.iter().copied());
    let failed = samples.len() as u64 - ok.len() as u64;
    (ok, failed)
}

fn group(concurrency: u32, samples: &[&Sample], deadline_ns: u64) -> GroupSummary {
    let (ok, failed) = headline_values(samples);
    let start = samples
        .iter()
        .map(|s| s.intended_request_ns.unwrap_or(s.actual_request_ns))
        .min();
    let end = samples
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.ready_ns)
        .max();
    let throughput_per_ks = match (start, end) {
        (Some(a), Some(b)) if b > a && !ok.is_empty() => {
            Some((ok.len() as u128 * 1_000_000_000_000 / u128::from(b - a)) as u64)
        }
        _ => None,
    };
    GroupSummary {
        concurrency,
        attempts: samples.len() as u64,
        successes: ok.len() as u64,
        headline: pair(&ok, failed, deadline_ns),
        throughput_per_ks,
    }
}

impl Summaries {
    /// Computes every summary from `samples` under `contract`'s deadline.
    pub fn compute(contract: &Contract, samples: &[Sample]) -> Summaries {
        Self::compute_for(contract, samples, crate::schema::SCHEMA_VERSION)
    }

    /// [`Summaries::compute`] as a bundle of `schema` states them (its stages:
    /// [`crate::schema::schema_stages`]).
    pub fn compute_for(contract: &Contract, samples: &[Sample], schema: u32) -> Summaries {
        let deadline = contract.deadline_ns;
        let all: Vec<&Sample> = samples.iter().collect();
        let (ok, failed) = headline_values(&all);
        let attempts = samples.len() as u64;
        let successes = ok.len() as u64;
        let mut errors = BTreeMap::new();
        for s in samples {
            match (s.ok, s.latency_ns) {
                (true, Some(_)) => {}
                (true, None) => *errors.entry(OK_WITHOUT_LATENCY.to_string()).or_insert(0) += 1,
                (false, _) => *errors.entry(s.error_kind.clone()).or_insert(0) += 1,
            }
        }
        let stages = crate::schema::schema_stages(schema)
            .map(|st| {
                let vals: Vec<u64> = samples
                    .iter()
                    .filter(|s| s.ok && s.latency_ns.is_some())
                    .filter_map(|s| s.stages.get(st))
                    .collect();
                StageSummary {
                    name: st.name().to_string(),
                    successes: Summary::of(&vals),
                }
            })
            .collect();
        let mut levels: BTreeMap<u32, Vec<&Sample>> = BTreeMap::new();
        for s in samples {
            levels.entry(s.concurrency).or_default().push(s);
        }
        let by_concurrency: Vec<GroupSummary> =
            levels.iter().map(|(&c, v)| group(c, v, deadline)).collect();
        let knee_concurrency = knee(&by_concurrency);
        let peak_throughput_concurrency = if by_concurrency.len() >= 2 {
            let mut best: Option<(u64, u32)> = None;
            for g in &by_concurrency {
                if let Some(t) = g.throughput_per_ks {
                    if best.is_none_or(|(bt, _)| t > bt) {
                        best = Some((t, g.concurrency));
                    }
                }
            }
            best.map(|(_, c)| c)
        } else {
            None
        };
        Summaries {
            attempts,
            successes,
            failures: attempts - successes,
            success_rate_ppm: if attempts == 0 {
                0
            } else {
                (u128::from(successes) * 1_000_000 / u128::from(attempts)) as u64
            },
            errors,
            headline: pair(&ok, failed, deadline),
            stages,
            by_concurrency,
            peak_throughput_concurrency,
            knee_concurrency,
            parallel_latency: parallel_summary(samples),
        }
    }
}

impl ResultJson {
    /// Builds the result, computing every summary from `samples`.
    pub fn new(
        contract: Contract,
        configuration: Configuration,
        environment: Environment,
        artifacts: BTreeMap<String, String>,
        samples: &[Sample],
    ) -> Self {
        let summary = Summaries::compute(&contract, samples);
        ResultJson {
            schema_version: SCHEMA_VERSION,
            contract,
            configuration,
            environment,
            artifacts,
            summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Clock, ContractKind, Mode, Observer};

    /// `per` successes per level with latency `p50s[level-1]`, levels 1..=len.
    fn sweep(p50s: &[u64]) -> Summaries {
        let mut samples = Vec::new();
        for (l, &lat) in p50s.iter().enumerate() {
            for _ in 0..3 {
                let i = samples.len() as u64;
                let mut s = Sample::new(i, ContractKind::Probe, l as u32 + 1, 1);
                s.actual_request_ns = 1_000 + i * 10_000_000;
                s.ready_ns = Some(s.actual_request_ns + lat);
                s.latency_ns = Some(lat);
                s.ok = true;
                samples.push(s);
            }
        }
        let c = Contract::new(
            ContractKind::Probe,
            Observer::VmExit,
            Clock::Wall,
            false,
            Mode::Sweep {
                max_concurrency: p50s.len() as u32,
                per_level: 3,
            },
            u64::MAX,
            false,
        );
        Summaries::compute(&c, &samples)
    }

    #[test]
    fn knee_is_the_first_level_over_one_and_a_half_times_level_one() {
        // Exactly 1.5× is not over it; 1.5× + 1 ns is.
        assert_eq!(sweep(&[100, 150, 151, 400]).knee_concurrency, Some(3));
        assert_eq!(sweep(&[100, 120, 150]).knee_concurrency, None);
        assert_eq!(sweep(&[100, 90, 300, 151]).knee_concurrency, Some(3));
        assert_eq!(sweep(&[100]).knee_concurrency, None);
    }

    #[test]
    fn peak_throughput_is_kept_separate_from_the_knee() {
        // Each level spans the same time with the same successes: equal throughput,
        // the lowest level wins the tie; the knee is where latency jumps.
        let s = sweep(&[100, 1_000, 1_000]);
        assert_eq!(s.knee_concurrency, Some(2));
        assert!(s.peak_throughput_concurrency.is_some());
    }

    #[test]
    fn no_level_one_means_no_knee() {
        let s = sweep(&[100, 1_000]);
        let levels: Vec<GroupSummary> = s
            .by_concurrency
            .into_iter()
            .filter(|g| g.concurrency != 1)
            .collect();
        assert_eq!(knee(&levels), None);
    }
}
