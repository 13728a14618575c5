//! Every summary stored in `result.json`, computed from the samples alone (the bench
//! calls [`Summaries::compute`] to write them, the verifier calls it again to check them).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::schema::{Contract, Sample, Stage};
use crate::stats::{with_failures, Summary};

/// A metric summarised twice: successes only, and with failures scored at the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub successes: Option<Summary>,
    pub with_failures: Option<Summary>,
}

/// One stage's pair. For a stage, "successes" are the values of successful samples that
/// have the stage; "with failures" adds the deadline once per failed sample. A stage no
/// success has (e.g. guest stages of a probe guest) has neither.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSummary {
    pub name: String,
    pub successes: Option<Summary>,
    pub with_failures: Option<Summary>,
}

/// One concurrency level (sweep, burst, churn; sequential is level 1, open loop 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSummary {
    pub concurrency: u32,
    pub attempts: u64,
    pub successes: u64,
    pub headline: Pair,
    /// Successes per 1,000 s over the group's span: first request (intended where
    /// present) to last strict-ready; `floor(successes·10^12 / span_ns)`. `None` without
    /// a success or with a zero span.
    pub throughput_per_ks: Option<u64>,
}

/// Everything `result.json` states about the samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summaries {
    pub attempts: u64,
    pub successes: u64,
    pub failures: u64,
    /// `floor(successes·10^6 / attempts)`; 0 with no attempts.
    pub success_rate_ppm: u64,
    /// error kind → count, failures only.
    pub errors: BTreeMap<String, u64>,
    /// The headline metric ([`crate::schema::HEADLINE`]).
    pub headline: Pair,
    /// Every stage of [`Stage::ALL`], in order.
    pub stages: Vec<StageSummary>,
    /// Per concurrency level, ascending.
    pub by_concurrency: Vec<GroupSummary>,
    /// With ≥ 2 levels: the level of the highest throughput (lowest level on a tie).
    pub knee_concurrency: Option<u32>,
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

fn headline_values(samples: &[&Sample]) -> (Vec<u64>, u64) {
    let mut ok = Vec::new();
    let mut failed = 0;
    for s in samples {
        match (s.ok, s.latency_ns) {
            (true, Some(l)) => ok.push(l),
            // A "success" without a latency is invalid (the verifier says so); it is
            // scored like a failure here so it is never silently dropped.
            _ => failed += 1,
        }
    }
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
        let deadline = contract.deadline_ns;
        let all: Vec<&Sample> = samples.iter().collect();
        let (ok, failed) = headline_values(&all);
        let attempts = samples.len() as u64;
        let successes = ok.len() as u64;
        let mut errors = BTreeMap::new();
        for s in samples.iter().filter(|s| !s.ok) {
            *errors.entry(s.error_kind.clone()).or_insert(0) += 1;
        }
        let stages = Stage::ALL
            .iter()
            .map(|&st| {
                let vals: Vec<u64> = samples
                    .iter()
                    .filter(|s| s.ok && s.latency_ns.is_some())
                    .filter_map(|s| s.stages.get(st))
                    .collect();
                let p = if vals.is_empty() {
                    Pair {
                        successes: None,
                        with_failures: None,
                    }
                } else {
                    pair(&vals, failed, deadline)
                };
                StageSummary {
                    name: st.name().to_string(),
                    successes: p.successes,
                    with_failures: p.with_failures,
                }
            })
            .collect();
        let mut levels: BTreeMap<u32, Vec<&Sample>> = BTreeMap::new();
        for s in samples {
            levels.entry(s.concurrency).or_default().push(s);
        }
        let by_concurrency: Vec<GroupSummary> =
            levels.iter().map(|(&c, v)| group(c, v, deadline)).collect();
        let knee_concurrency = if by_concurrency.len() >= 2 {
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
            knee_concurrency,
        }
    }
}
