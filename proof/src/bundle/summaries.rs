//! Every summary `result.json` states, against its recomputation from the rows.

use crate::schema::{ResultJson, Sample, Summaries};
use crate::verdict::{Check, Verdict};

pub(super) fn check_statistics(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let again = Summaries::compute_for(&r.contract, samples, r.schema_version);
    let (a, b) = match (
        serde_json::to_value(&again),
        serde_json::to_value(&r.summary),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return,
    };
    let mut diffs = Vec::new();
    diff("summary", &a, &b, &mut diffs);
    for d in diffs {
        v.add(Check::Statistic, d);
    }
    let histogram: u128 = r.summary.errors.values().map(|&n| u128::from(n)).sum();
    if histogram != u128::from(r.summary.failures) {
        v.add(
            Check::ErrorHistogram,
            format!(
                "summary.errors adds up to {histogram}, summary.failures is {}: every \
                 failure must be in the histogram",
                r.summary.failures
            ),
        );
    }
    let attempts = samples.len() as u64;
    let n = r.summary.headline.with_failures.map(|s| s.n).unwrap_or(0);
    if n != attempts {
        v.add(
            Check::FailuresNotScored,
            format!("headline with failures has n = {n}, the bundle has {attempts} attempts"),
        );
    }
}

/// Lists every leaf where `recomputed` and `stored` differ.
fn diff(
    path: &str,
    recomputed: &serde_json::Value,
    stored: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (recomputed, stored) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{p}: missing in result.json, samples give {x}"))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{p}: result.json says {y}, samples give nothing"))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(format!(
            "{path}: result.json says {}, recomputed from samples.csv: {}",
            short(y),
            short(x)
        )),
        _ => {}
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(200).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}
