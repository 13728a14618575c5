//! One percentile (docs/architecture.md, "To change X, start at Y": `proof/src/stats.rs` is
//! the one definition, nothing else computes one). This test reads every source file of
//! `proof/src` and `bench/src` and fails where one:
//! - re-derives the nearest rank: a rank clamped to `[1, n]` (`.clamp(1, …)`), a selection
//!   (`select_nth_unstable`) or a ceiling over a percent or permille (`div_ceil(100)`,
//!   `div_ceil(1000)`, `div_ceil(2)`) — `truecold_proof::stats::nearest_rank_index` is the
//!   rank, `percentile_sorted` / `percentile_of` the value at it;
//! - sorts values for a percentile: a function that sorts (or selects in) a vector and takes
//!   a percentile of it — `stats::ascending` is the sort every percentile reads;
//! - extracts the successful rows' headlines itself (`.filter(|s| s.ok)` then
//!   `.filter_map(|s| s.latency_ns)`, or `(true, Some(l)) => ….push(l)`):
//!   `truecold_proof::summary::success_latencies` is that extraction.
//!
//! The exceptions are listed in [`PENDING`], each with what its owner changes; an exception
//! whose file no longer breaks the rule fails the test too (remove it from the list).

#[path = "support/source.rs"]
mod source;

use source::{code_only, fn_bodies, rel, rust_files, workspace};

/// Where each rule's one definition lives (the rule does not apply there).
const RANK_HOME: &str = "proof/src/stats.rs";
const SUCCESSES_HOME: &str = "proof/src/summary.rs";

/// Files of another crate that still break a rule, with the change that ends it.
const PENDING: &[(&str, Rule, &str)] = &[];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// The nearest rank re-derived.
    Rank,
    /// Values sorted (or selected) for a percentile outside stats.rs.
    SortForPercentile,
    /// The successful rows' headlines extracted outside summary.rs.
    Successes,
}

/// Every breach of `rule` in the file `path` (relative to the workspace), as messages.
fn breaches(path: &str, code: &str, rule: Rule) -> Vec<String> {
    let line = |p: usize| code[..p].matches('\n').count() + 1;
    let mut out = Vec::new();
    match rule {
        Rule::Rank => {
            if path == RANK_HOME {
                return out;
            }
            let squeezed = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
            let flat = squeezed(code);
            for pat in [
                ".clamp(1,",
                "select_nth_unstable",
                "div_ceil(100)",
                "div_ceil(1000)",
                "div_ceil(2)",
            ] {
                if flat.contains(pat) {
                    // The line of the first occurrence, in the unsqueezed code.
                    let first = code
                        .lines()
                        .position(|l| squeezed(l).contains(pat))
                        .map_or(0, |k| k + 1);
                    out.push(format!(
                        "{path}:{first}: `{pat}`: the nearest rank re-derived"
                    ));
                }
            }
        }
        Rule::SortForPercentile => {
            if path == RANK_HOME {
                return out;
            }
            // A variable sorted (or selected in) and handed to a percentile in one function.
            let receivers = |body: &str, pats: &[&str]| -> Vec<String> {
                let mut v = Vec::new();
                for pat in pats {
                    let mut from = 0;
                    while let Some(k) = body[from..].find(pat) {
                        let at = from + k;
                        from = at + 1;
                        let name: String = body[..at]
                            .chars()
                            .rev()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect();
                        if !name.is_empty() {
                            v.push(name);
                        }
                    }
                }
                v
            };
            let arguments = |body: &str, pats: &[&str]| -> Vec<String> {
                let mut v = Vec::new();
                for pat in pats {
                    let mut from = 0;
                    while let Some(k) = body[from..].find(pat) {
                        let at = from + k + pat.len();
                        from = at;
                        let name: String = body[at..]
                            .trim_start_matches(['&', ' '])
                            .trim_start_matches("mut ")
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() {
                            v.push(name);
                        }
                    }
                }
                v
            };
            for f in fn_bodies(code) {
                let sorted = receivers(
                    &f.body,
                    &[
                        ".sort(",
                        ".sort_unstable(",
                        ".sort_by",
                        ".sort_unstable_by",
                        ".select_nth_unstable",
                    ],
                );
                let taken = arguments(
                    &f.body,
                    &["percentile_sorted(", "percentile_of(", "of_sorted("],
                );
                for v in sorted.iter().filter(|v| taken.contains(v)) {
                    out.push(format!(
                        "{path}:{}-{}: fn {} sorts `{v}` and takes a percentile of it",
                        f.first, f.last, f.name
                    ));
                }
            }
        }
        Rule::Successes => {
            if path == SUCCESSES_HOME {
                return out;
            }
            let mut from = 0;
            while let Some(k) = code[from..].find(".filter(|") {
                let at = from + k;
                from = at + 1;
                let close = code[at..].find(')').map_or(code.len(), |c| at + c);
                let filter = &code[at..close];
                let rest = code[close..].trim_start_matches([')', ' ', '\n']);
                let next: String = rest.chars().take(60).collect();
                if filter.ends_with(".ok") && next.starts_with(".filter_map(|") {
                    let fm_end = next.find(')').unwrap_or(next.len());
                    if next[..fm_end].ends_with(".latency_ns") {
                        out.push(format!(
                            "{path}:{}: the successes' headlines extracted by hand",
                            line(at)
                        ));
                    }
                }
            }
            let flat: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            let mut from = 0;
            while let Some(k) = flat[from..].find("(true,Some(") {
                let at = from + k;
                from = at + 1;
                let v: String = flat[at + 11..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let tail = &flat[at + 11 + v.len()..];
                if !v.is_empty() && tail.starts_with("))=>") {
                    let arm: String = tail[4..].chars().take(80).collect();
                    if arm.contains(&format!(".push({v})")) {
                        out.push(format!(
                            "{path}: `(true, Some({v})) => ….push({v})`: the successes' \
                             headlines extracted by hand"
                        ));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn one_rank_one_sort_one_extraction_of_the_successes() {
    let root = workspace();
    let mut found: Vec<(String, Rule, String)> = Vec::new();
    let mut files = 0;
    for dir in ["proof/src", "bench/src"] {
        for p in rust_files(&root.join(dir)) {
            files += 1;
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let code = code_only(&text);
            let path = rel(&p);
            for rule in [Rule::Rank, Rule::SortForPercentile, Rule::Successes] {
                for b in breaches(&path, &code, rule) {
                    found.push((path.clone(), rule, b));
                }
            }
        }
    }
    assert!(files > 50, "only {files} files read");
    let pending = |path: &str, rule: Rule| PENDING.iter().any(|(p, r, _)| *p == path && *r == rule);
    let unexpected: Vec<&String> = found
        .iter()
        .filter(|(p, r, _)| !pending(p, *r))
        .map(|(_, _, m)| m)
        .collect();
    let stale: Vec<String> = PENDING
        .iter()
        .filter(|(p, r, _)| !found.iter().any(|(fp, fr, _)| fp == p && fr == r))
        .map(|(p, r, _)| format!("{p} ({r:?})"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "outside proof/src/stats.rs (ranks, sorts for a percentile) and proof/src/summary.rs \
         (the successes' headlines):\n{}",
        unexpected
            .iter()
            .map(|m| format!("  {m}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        stale.is_empty(),
        "these files keep the rule now: remove them from PENDING: {}",
        stale.join(", ")
    );
}

/// The rules find what they are for (so a pass means something).
#[test]
fn each_rule_catches_its_breach() {
    let cases: &[(Rule, &str)] = &[
        (
            Rule::Rank,
            "fn p(n: usize) -> usize { ((99 * n).div_ceil(100)).clamp(1, n) - 1 }",
        ),
        (
            Rule::Rank,
            "fn m(v: &mut [u64]) -> u64 { *v.select_nth_unstable(3).1 }",
        ),
        (
            Rule::SortForPercentile,
            "fn p(mut v: Vec<u64>) -> Option<u64> { v.sort_unstable(); percentile_sorted(&v, 50, 100) }",
        ),
        (
            Rule::Successes,
            "fn s(x: &[Sample]) -> Vec<u64> { x.iter().filter(|s| s.ok)\n    .filter_map(|s| s.latency_ns).collect() }",
        ),
        (
            Rule::Successes,
            "fn s(x: &[Sample]) { for s in x { match (s.ok, s.latency_ns) { (true, Some(l)) => ok.push(l), _ => {} } } }",
        ),
    ];
    for (rule, src) in cases {
        let code = code_only(src);
        assert!(
            !breaches("x/src/a.rs", &code, *rule).is_empty(),
            "{rule:?} misses {src}"
        );
        assert!(
            breaches(
                if *rule == Rule::Successes {
                    SUCCESSES_HOME
                } else {
                    RANK_HOME
                },
                &code,
                *rule
            )
            .is_empty(),
            "{rule:?} applies in its home"
        );
    }
    // Not a percentile: a sort for an order, a ceiling over a byte size, a stage filter.
    let fine = code_only(
        "fn a(mut v: Vec<u64>, w: &[u64]) -> Option<u64> { v.sort(); percentile_sorted(w, 1, 2) }\n\
         fn b(n: u64) -> u64 { n.div_ceil(HUGE_PAGE_2M) }\n\
         fn c(x: &[Sample]) -> Vec<u64> { x.iter().filter(|s| s.ok && s.latency_ns.is_some())\
         .filter_map(|s| s.stages.get(st)).collect() }\n\
         fn d() -> &'static str { \"(true, Some(l)) => ok.push(l) .clamp(1, n)\" }",
    );
    for rule in [Rule::Rank, Rule::SortForPercentile, Rule::Successes] {
        assert!(
            breaches("x/src/a.rs", &fine, rule).is_empty(),
            "{rule:?}: {:?}",
            breaches("x/src/a.rs", &fine, rule)
        );
    }
}
