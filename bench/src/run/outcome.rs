//! A finished `truecold run` ([`RunOutcome`]) and what its summary says of it: the levels
//! of a concurrent campaign, the failed launches by error kind.

use truecold_proof::bundle::Written;

/// A finished `truecold run`.
#[derive(Debug)]
pub struct RunOutcome {
    /// The bundle, or (engines campaign) the multi-arm directory.
    pub written: Written,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Engines campaign: each arm's bundle and its own verdict.
    pub arms: Vec<(truecold_proto::kinds::Engine, Written)>,
}

/// One line per concurrency level (burst, churn, sweep): latency and sustained throughput,
/// and the knee as `truecold-proof` defines it.
pub fn level_lines(r: &truecold_proof::schema::ResultJson) -> Vec<String> {
    use truecold_proof::fmt::ms;
    let sm = &r.summary;
    let mut out: Vec<String> = sm
        .by_concurrency
        .iter()
        .filter(|g| g.concurrency > 1 || sm.by_concurrency.len() > 1)
        .map(|g| {
            let p = |f: fn(&truecold_proof::stats::Summary) -> u64| {
                g.headline
                    .successes
                    .as_ref()
                    .map(|s| format!("{} ms", ms(f(s))))
                    .unwrap_or_else(|| "–".into())
            };
            let tput = g
                .throughput_per_ks
                .map(|t| format!("{}.{:03}/s", t / 1000, t % 1000))
                .unwrap_or_else(|| "–".into());
            format!(
                "  concurrency {}: {} attempts, {} ok, p50 {}, p99 {}, throughput {tput}",
                g.concurrency,
                g.attempts,
                g.successes,
                p(|s| s.p50),
                p(|s| s.p99)
            )
        })
        .collect();
    if let Some(k) = sm.peak_throughput_concurrency {
        out.push(format!("  highest throughput: concurrency {k}"));
    }
    if let Some(k) = sm.knee_concurrency {
        out.push(format!(
            "  knee (p50 above 1.5x the concurrency-1 p50): concurrency {k}"
        ));
    }
    out
}

/// The failed launches of a finished campaign: every error kind with its count, summed over
/// the bundle and (engines campaign) its arms' bundles; empty when every launch succeeded.
pub fn failed_kinds(out: &RunOutcome) -> std::collections::BTreeMap<String, u64> {
    let mut kinds = std::collections::BTreeMap::new();
    let results = std::iter::once(&out.written)
        .chain(out.arms.iter().map(|(_, w)| w))
        .filter_map(|w| w.verdict.result.as_ref());
    for r in results {
        for (k, n) in &r.summary.errors {
            *kinds.entry(k.clone()).or_insert(0) += n;
        }
    }
    kinds
}

/// The error-kind table the summary ends with when any launch failed: `kind → count`.
pub fn failure_lines(kinds: &std::collections::BTreeMap<String, u64>) -> Vec<String> {
    if kinds.is_empty() {
        return Vec::new();
    }
    let total: u64 = kinds.values().sum();
    let width = kinds.keys().map(|k| k.len()).max().unwrap_or(0);
    let mut v = vec![format!("failed launches by error kind ({total} in all):")];
    v.extend(kinds.iter().map(|(k, n)| format!("  {k:<width$}  {n}")));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_kind_table_lists_every_kind_with_its_count() {
        let none = std::collections::BTreeMap::new();
        assert!(failure_lines(&none).is_empty());
        let kinds: std::collections::BTreeMap<String, u64> = [
            ("vmm_memory_too_large".to_string(), 2),
            ("deadline".to_string(), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            failure_lines(&kinds),
            [
                "failed launches by error kind (3 in all):",
                "  deadline              1",
                "  vmm_memory_too_large  2",
            ]
        );
    }
}
