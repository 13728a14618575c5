//! The bisect directory's README, generated from `bisect.json` alone.

use std::fmt::Write as _;

use truecold_proto::kinds::Clock;

use super::model::*;
use crate::fmt::{ms, opt_ms, p_text};
use crate::names::SUMS_FILE;

/// README.md of a bisect directory, from its record alone.
pub fn readme(f: &BisectFile) -> String {
    let mut s = String::new();
    let what = match f.kind {
        BisectKind::Commit => "commits of a kernel tree",
        BisectKind::Config => "the symbols between two kernel configs",
    };
    let _ = writeln!(s, "# truecold bisect: {what}\n");
    let _ = writeln!(s, "- host kind: `{}`", f.host_kind.as_str());
    let _ = writeln!(s, "- clock: {}", f.clock.describe());
    if f.clock == Clock::Virtual {
        let _ = writeln!(
            s,
            "  (a reproducible cost model of the boot path, not a hardware latency)"
        );
    }
    let _ = writeln!(
        s,
        "- contract: {} ({} vCPU, {}); every step on this clock, never mixed",
        f.contract.label(),
        f.vcpus,
        crate::fmt::mem_text(f.mem_bytes)
    );
    let _ = writeln!(s, "- source: `{}`", f.source);
    if let Some(k) = &f.kernel {
        let _ = writeln!(
            s,
            "- kernel config: yours, `{}` (`{}` {}, sha256 `{}`; every commit built from it \
             by olddefconfig), {}",
            crate::kconfig::USER_KERNEL_FILE,
            k.form.flag(),
            k.given_as,
            k.sha256,
            if k.not_carried.is_empty() {
                "every symbol carried over into the good commit's config".to_string()
            } else {
                format!(
                    "{} symbol(s) did not carry over into the good commit's config: {}",
                    k.not_carried.len(),
                    k.not_carried.join("; ")
                )
            }
        );
    }
    let _ = writeln!(s, "- good: `{}`", f.good);
    let _ = writeln!(s, "- bad: `{}`", f.bad);
    if f.ab_steps() {
        let _ = writeln!(
            s,
            "- launches per look and arm: {} (an inconclusive step grows to at most {})",
            f.n, f.max_n
        );
        let _ = writeln!(s, "- rule at each look: {}", f.judge.describe());
        let _ = writeln!(s, "- extension rule: {}", f.looks().describe(f.judge.alpha));
    } else {
        let _ = writeln!(
            s,
            "- launches per step: {} (an inconclusive step grows to at most {})",
            f.n, f.max_n
        );
        let _ = writeln!(s, "- rule: {}", f.judge.describe());
    }
    if let Some(w) = f.wall_seconds {
        let _ = writeln!(s, "- wall time of the whole search: {w} s");
    }
    let _ = writeln!(s, "\n## Result\n");
    match &f.result {
        Some(r) => {
            let _ = writeln!(s, "{}\n", r.summary);
            if let Some(c) = &r.first_bad {
                let _ = writeln!(s, "- first bad commit: `{c}`");
            }
            if let Some(c) = &r.last_good {
                let _ = writeln!(s, "- last good commit: `{c}`");
            }
            if !r.culprits.is_empty() {
                let _ = writeln!(s, "- culprit symbols: `{}`", r.culprits.join("`, `"));
            }
            if let Some(p) = &r.profile {
                let _ = writeln!(
                    s,
                    "- the culprit's differential profile against its parent ({} RIP-sampled \
                     attribution launches each, `{PROFILE_DIR}/{PARENT_PROFILE}` and \
                     `{PROFILE_DIR}/{CULPRIT_PROFILE}`): which functions took the time, \
                     [{PROFILE_DIR}/{PROFILE_TABLE}]({PROFILE_DIR}/{PROFILE_TABLE}), and its \
                     differential flame graph, \
                     [{PROFILE_DIR}/{PROFILE_FLAME}]({PROFILE_DIR}/{PROFILE_FLAME})",
                    p.attribution
                );
            }
            for (sym, i) in &r.effects {
                if let Some(j) = f.steps.get(*i).and_then(|st| st.judgement.as_ref()) {
                    let _ = writeln!(
                        s,
                        "- effect of `{sym}` alone (step {}): {} → {} ms, {}, 95 % CI {}, p {}",
                        i + 1,
                        opt_ms(j.good_p50_ns),
                        opt_ms(j.p50_ns),
                        j.delta_pct
                            .map(|d| format!("{d:+.2} %"))
                            .unwrap_or_else(|| "–".into()),
                        ci_text(j.ci95_ns),
                        j.p_value.map(p_text).unwrap_or_else(|| "–".into())
                    );
                }
            }
        }
        None => {
            let _ = writeln!(
                s,
                "Under way: steps recorded so far (`git bisect log` in the tree says the rest)."
            );
        }
    }
    let _ = writeln!(s, "\n## Steps\n");
    let _ = writeln!(
        s,
        "| # | {} | launches | good p50 ms | p50 ms | Δ | 95 % CI ms | p | verdict | why | wall s | bundle |",
        match f.kind {
            BisectKind::Commit => "commit",
            BisectKind::Config => "candidate (bad config's assignments applied)",
        }
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, st) in f.steps.iter().enumerate() {
        let what = match f.kind {
            BisectKind::Commit => format!(
                "`{}` {}",
                st.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
                st.subject.as_deref().unwrap_or("").replace('|', "\\|")
            ),
            BisectKind::Config => {
                if st.symbols.is_empty() {
                    "(none)".into()
                } else {
                    format!("`{}`", st.symbols.join("`, `"))
                }
            }
        };
        let j = st.judgement.as_ref();
        let launches = match (st.look, j.and_then(|j| j.alpha)) {
            (Some(k), Some(a)) if f.ab_steps() => format!(
                "{} a side (look {k}/{}, p < {})",
                st.planned,
                f.looks().count(),
                p_text(a)
            ),
            _ => st.planned.to_string(),
        };
        let _ = writeln!(
            s,
            "| {} | {what} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            launches,
            opt_ms(j.and_then(|j| j.good_p50_ns)),
            opt_ms(j.and_then(|j| j.p50_ns)),
            j.and_then(|j| j.delta_pct)
                .map(|d| format!("{d:+.2} %"))
                .unwrap_or_else(|| "–".into()),
            ci_text(j.and_then(|j| j.ci95_ns)),
            j.and_then(|j| j.p_value)
                .map(p_text)
                .unwrap_or_else(|| "–".into()),
            st.outcome.as_str(),
            st.why.replace('|', "\\|").replace('\n', " "),
            st.wall_seconds,
            st.dir
                .as_deref()
                .map(|d| format!("[{d}]({d}/)"))
                .unwrap_or_else(|| "–".into())
        );
    }
    let _ = writeln!(s, "\n## Reproduce\n\n```sh");
    for c in &f.commands {
        let _ = writeln!(s, "{c}");
    }
    let _ = writeln!(s, "```\n\n`truecold-proof verify <this directory>` re-checks every bundle, recomputes every step's verdict and checks `{SUMS_FILE}`.");
    s
}

fn ci_text(ci: Option<(i64, i64)>) -> String {
    let f = |v: i64| {
        let sign = if v < 0 { "-" } else { "+" };
        format!("{sign}{}", ms(v.unsigned_abs()))
    };
    ci.map(|(l, h)| format!("[{}, {}]", f(l), f(h)))
        .unwrap_or_else(|| "–".into())
}
