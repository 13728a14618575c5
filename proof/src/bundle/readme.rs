//! The bundle's README.md, generated from `result.json` (deterministic: same input, same
//! bytes) and, for a bundle whose attribution launches counted the samples they asked for,
//! the attribution section from `attribution.jsonl`
//! ([`crate::attribution::readme_section`]); and the set of generated files.

use std::fmt::Write as _;

use crate::fmt::{md_code, md_text, mem_text, ms, VIRTUAL_CLOCK_MEANS};
use crate::names::{CDF_FILE, README_FILE, STAGES_FILE, SUMS_FILE};
use crate::plot::{cdf_svg, stages_svg};
use crate::schema::{
    description_of, Clock, Configuration, Contract, ContractKind, Pair, ResultJson, Sample,
    Summaries, HEADLINE, PERCENTILE_DEFINITION,
};
use crate::stats::Summary;

fn row(name: &str, s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.n,
            ms(s.min),
            ms(s.p50),
            ms(s.p90),
            ms(s.p95),
            ms(s.p99),
            ms(s.max),
            ms(s.mean)
        ),
        None => format!("| {name} | 0 | – | – | – | – | – | – | – |\n"),
    }
}

const TABLE_HEAD: &str = "| metric | n | min | p50 | p90 | p95 | p99 | max | mean |\n\
                          |---|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// The headline's two rows: successes only, and with failures scored at the deadline
/// (right-censored: a failure's latency is only known to exceed the deadline, so those
/// percentiles are lower bounds once they reach it).
/// Under the headline table when a row holds fewer than 100 values: their nearest-rank p99
/// is their maximum (rank ceil(0.99·n) = n), so it says nothing of a 1-in-100 tail. Empty
/// otherwise.
pub fn p99_is_max_note(p: &Pair) -> String {
    let n = [&p.successes, &p.with_failures]
        .into_iter()
        .flatten()
        .map(|s| s.n)
        .filter(|&n| n > 0 && n < 100)
        .min();
    n.map_or_else(String::new, |n| {
        format!(
            "\nWith n = {n} (under 100) the p99 is the maximum (nearest rank): a 1-in-100 tail \
             needs n ≥ 100.\n"
        )
    })
}

fn pair_rows(name: &str, p: &Pair, deadline: u64) -> String {
    let mut s = row(&format!("{name} (successes only)"), &p.successes);
    s += &row(
        &format!(
            "{name} (with failures, right-censored at the {} ms deadline)",
            ms(deadline)
        ),
        &p.with_failures,
    );
    s
}

/// The files of a bundle that carry the contract label (the probe label on a probe
/// bundle): the ones this module and [`crate::plot`] generate, and `result.json`.
pub const LABELLED_FILES: [&str; 5] = [
    README_FILE,
    "result.json",
    "cmdline.txt",
    CDF_FILE,
    STAGES_FILE,
];

/// The README text: every string the publisher chose either recomputed from the contract
/// (the label, the description, the headline, the percentile definition: `verify` requires
/// them to be these) or escaped ([`md_text`], [`md_code`]).
pub fn readme(r: &ResultJson) -> String {
    readme_with(r, None)
}

/// [`readme`] with the attribution section (`attribution`: the bundle's
/// [`crate::attribution::readme_section`], `None` for a bundle without one), before the
/// files.
pub fn readme_with(r: &ResultJson, attribution: Option<&str>) -> String {
    let mut s = String::new();
    readme_head(&mut s, r);
    readme_contract(&mut s, &r.contract);
    readme_configuration(&mut s, &r.configuration);
    let _ = writeln!(s, "\n## Artifacts (sha256)\n");
    for (k, v) in &r.artifacts {
        let _ = writeln!(s, "- {}: {}", md_text(k), md_code(v));
    }
    readme_environment(&mut s, r);
    readme_headline(&mut s, r);
    readme_stages(&mut s, &r.summary);
    readme_plots(&mut s);
    readme_concurrency(&mut s, &r.summary);
    if let Some(a) = attribution {
        s.push_str(a);
    }
    readme_files(&mut s, r.contract.kind);
    s
}

/// The title and the notes above the contract: the probe label, the virtual clock, an
/// interrupted campaign.
fn readme_head(s: &mut String, r: &ResultJson) {
    let c = &r.contract;
    let label = c.kind.label();
    let _ = writeln!(s, "# truecold proof bundle: {label}\n");
    if c.kind == ContractKind::Probe {
        let _ = writeln!(
            s,
            "**{label}.** These numbers measure the VMM with its embedded probe guest; no Linux \
             kernel was booted. The label is in {}; every `samples.csv` row says `probe` in \
             its `contract` column; `reports.jsonl` and `{SUMS_FILE}` carry no label.\n",
            LABELLED_FILES
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if c.clock == Clock::Virtual {
        let _ = writeln!(
            s,
            "**Virtual clock.** Every duration here is on the {} clock: {VIRTUAL_CLOCK_MEANS}. \
             It is never compared with wall-time bundles.\n",
            c.clock.as_str()
        );
    }
    match (&c.stopped, c.incomplete) {
        (Some(kind), _) => {
            let _ = writeln!(
                s,
                "**STOPPED:** {} consecutive launches failed with `{}`, and the fail-fast rule \
                 (`--stop-after {}`) ended the campaign after {} of {} planned attempts \
                 (`--keep-going` runs them all). Every attempt made is in samples.csv.\n",
                c.stop_after.unwrap_or_default(),
                crate::fmt::escape_untrusted(kind),
                c.stop_after.unwrap_or_default(),
                r.summary.attempts,
                c.mode.planned_attempts()
            );
        }
        (None, true) => {
            let _ = writeln!(
                s,
                "**INCOMPLETE:** the campaign was interrupted after {} of {} planned attempts. \
                 Every attempt made is in samples.csv.\n",
                r.summary.attempts,
                c.mode.planned_attempts()
            );
        }
        (None, false) => {}
    }
}

/// `## Contract`.
fn readme_contract(s: &mut String, c: &Contract) {
    let _ = writeln!(s, "## Contract\n\n{}\n", description_of(c.kind));
    let _ = writeln!(s, "- mode: {}", c.mode.describe());
    let _ = writeln!(
        s,
        "- headline: `{HEADLINE}`; a sample not strict-ready within {} ms is a failure and is \
         scored at {} ms in the with-failures rows, which are therefore right-censored at the \
         deadline (a failure's latency is only known to exceed it)",
        ms(c.deadline_ns),
        ms(c.deadline_ns)
    );
    let (cached, it) = if c.kind == ContractKind::Linux {
        ("the VMM binary, the kernel and the initramfs", "them")
    } else {
        ("the VMM binary (the probe guest is inside it)", "it")
    };
    let _ = writeln!(
        s,
        "- the VM is cold, the host is not: every sample is a fresh VMM process and a fresh \
         VM, but after the first sample the host's page cache holds {cached}, so later \
         samples do not read {it} from disk (unless the kernel evicted {it})"
    );
    if c.interleaved {
        let _ = writeln!(
            s,
            "- interleaved: this bundle is one arm of a multi-arm directory; the other arms' \
             launches sit between its rows, and the directory's verifier judges the gaps \
             along its order"
        );
    }
    let _ = writeln!(s, "- statistics: {PERCENTILE_DEFINITION}\n");
}

/// `## Configuration`.
fn readme_configuration(s: &mut String, cfg: &Configuration) {
    let _ = writeln!(s, "## Configuration\n");
    let _ = writeln!(s, "- vCPUs: {}", cfg.vcpus);
    let _ = writeln!(
        s,
        "- memory: {} bytes ({})",
        cfg.mem_bytes,
        mem_text(cfg.mem_bytes)
    );
    let _ = writeln!(s, "- backing: {}", md_text(&cfg.backing));
    if !cfg.knobs.is_empty() {
        let _ = writeln!(
            s,
            "- tune knobs: {}",
            cfg.knobs
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        s,
        "- command line: {} (also in cmdline.txt)",
        md_code(&cfg.cmdline)
    );
    let _ = writeln!(s, "- VMM: {}", md_code(&cfg.vmm_path));
    if let Some(k) = &cfg.kernel_path {
        let _ = writeln!(s, "- kernel: {}", md_code(k));
    }
    if let Some(i) = &cfg.initramfs_path {
        let _ = writeln!(s, "- initramfs: {}", md_code(i));
    }
}

/// `## Environment`: the host as the harness read it (every reading escaped).
fn readme_environment(s: &mut String, r: &ResultJson) {
    let env = &r.environment;
    let c = &r.contract;
    let _ = writeln!(s, "\n## Environment\n");
    let _ = writeln!(s, "- host KVM: {}", env.host_kind.as_str());
    let _ = writeln!(s, "- clock: {}", c.clock.describe());
    if c.clock == Clock::Virtual {
        let _ = writeln!(s, "- what the clock measures: {VIRTUAL_CLOCK_MEANS}");
    }
    let _ = writeln!(
        s,
        "- CPU: {} ({} cores)",
        md_text(&env.cpu_model),
        env.cores
    );
    let _ = writeln!(s, "- host kernel: {}", md_text(&env.host_kernel));
    let _ = writeln!(
        s,
        "- THP: enabled {}, defrag {}; hugepages: {}",
        md_code(&env.thp_enabled),
        md_code(&env.thp_defrag),
        md_text(&env.hugepages)
    );
    let _ = writeln!(
        s,
        "- governor: {}",
        env.governor
            .as_deref()
            .map_or("not readable".to_string(), md_text)
    );
    let _ = writeln!(
        s,
        "- load average before: {}, after: {}",
        md_code(&env.loadavg_before),
        md_code(&env.loadavg_after)
    );
    let h = &env.harness;
    let _ = writeln!(
        s,
        "- harness: wall {} ms, CPU user {} ms, system {} ms{}",
        ms(h.wall_ns),
        ms(h.cpu_user_ns),
        ms(h.cpu_sys_ns),
        h.max_start_lag_ns
            .map(|l| format!(", max start lag {} ms", ms(l)))
            .unwrap_or_default()
    );
    if let Some(h) = &env.nested {
        // Schema 9 names the whole virtual clock (L0, L1 kernel, L1 CPUs); a bundle of an
        // older schema keeps the line it was written with.
        let clock = h.l1_kernel_sha256.as_ref().map_or_else(String::new, |k| {
            format!("; L1 kernel sha256 {}; L1 CPUs {}", md_code(k), env.cores)
        });
        let _ = writeln!(
            s,
            "- nested harness: L1 QEMU `-seed` {}; L0 QEMU {}{clock}",
            crate::seed::hex(h.l1_seed),
            md_code(&h.l0_qemu)
        );
    }
    if let Some(res) = &env.residue {
        readme_residue(s, res);
    }
    if env.warnings.is_empty() {
        let _ = writeln!(s, "- warnings: none");
    } else {
        let _ = writeln!(s, "\n**Warnings:**\n");
        for w in &env.warnings {
            let _ = writeln!(s, "- {}", md_text(w));
        }
    }
}

/// The residue line of `## Environment`.
fn readme_residue(s: &mut String, res: &crate::residue::Residue) {
    let n = |v: Option<u64>| v.map_or("unreadable".to_string(), |x| x.to_string());
    let mib = |v: Option<u64>| {
        v.map_or("unreadable".to_string(), |x| {
            format!("{}.{:01} MiB", x >> 20, ((x & 0xfffff) * 10) >> 20)
        })
    };
    let (b, a) = (&res.before, &res.after);
    let _ = writeln!(
        s,
        "- residue (before → after the campaign): harness descriptors {} → {}, threads {} \
         → {}, RSS {} → {}; children {} → {}, zombies {} → {}; host MemAvailable {} → {}, \
         hugetlb pool free {} → {}, total {} → {}; leaks: {}",
        n(b.harness_fds),
        n(a.harness_fds),
        n(b.harness_threads),
        n(a.harness_threads),
        mib(b.harness_rss_bytes),
        mib(a.harness_rss_bytes),
        n(b.children),
        n(a.children),
        n(b.zombies),
        n(a.zombies),
        mib(b.mem_available_bytes),
        mib(a.mem_available_bytes),
        n(b.hugepages_free),
        n(a.hugepages_free),
        n(b.hugepages_total),
        n(a.hugepages_total),
        if res.leaks.is_empty() {
            "none".to_string()
        } else {
            format!("{} (see the warnings)", res.leaks.len())
        }
    );
}

/// `## Headline` and `## Errors`.
fn readme_headline(s: &mut String, r: &ResultJson) {
    let sm = &r.summary;
    let _ = writeln!(s, "\n## Headline (milliseconds)\n");
    let _ = writeln!(
        s,
        "{} attempts, {} succeeded, {} failed; success rate {}.{:04} %\n",
        sm.attempts,
        sm.successes,
        sm.failures,
        sm.success_rate_ppm / 10_000,
        sm.success_rate_ppm % 10_000
    );
    s.push_str(TABLE_HEAD);
    *s += &pair_rows(HEADLINE, &sm.headline, r.contract.deadline_ns);
    if let Some(p) = &sm.parallel_latency {
        *s += &row(
            &format!("{HEADLINE} on the parallel clock (successes only)"),
            &p.successes,
        );
    }
    s.push_str(&p99_is_max_note(&sm.headline));
    if let Some(p) = &sm.parallel_latency {
        let _ = writeln!(
            s,
            "\nThe parallel clock counts work done on several L1 CPUs at once as overlapping, \
             where the total (virtual) clock adds it (docs/virtual-clock.md, \"The parallel \
             clock\"); {}.",
            match p.missing {
                0 => "every success has it".to_string(),
                m => format!("{m} success(es) without it, each with its reason in reports.jsonl"),
            }
        );
    }
    let _ = writeln!(s, "\n## Errors\n");
    if sm.errors.is_empty() {
        let _ = writeln!(s, "none");
    } else {
        let _ = writeln!(s, "| error | count |\n|---|---:|");
        for (k, v) in &sm.errors {
            let _ = writeln!(s, "| {} | {v} |", md_text(k));
        }
    }
}

/// `## Stages`.
fn readme_stages(s: &mut String, sm: &Summaries) {
    let _ = writeln!(s, "\n## Stages (milliseconds, successful samples only)\n");
    let _ = writeln!(
        s,
        "A failed sample's stages are left out: a timed-out attempt's stages add up to the \
         deadline, not to a boot.\n"
    );
    s.push_str(TABLE_HEAD);
    for st in sm.stages.iter().filter(|st| st.successes.is_some()) {
        *s += &row(&md_text(&st.name), &st.successes);
    }
}

/// `## Plots`: the bundle's plot files, embedded (Markdown image links, relative).
fn readme_plots(s: &mut String) {
    let _ = writeln!(
        s,
        "\n## Plots\n\n![latency CDF, and its tail on a log scale]({CDF_FILE})\n\n\
         ![per-stage p50 and p99]({STAGES_FILE})"
    );
}

/// `## By concurrency` (only with more than one level).
fn readme_concurrency(s: &mut String, sm: &Summaries) {
    if sm.by_concurrency.len() <= 1 {
        return;
    }
    let _ = writeln!(s, "\n## By concurrency\n");
    let _ = writeln!(
        s,
        "| concurrency | attempts | ok | p50 | p99 | p99 with failures (right-censored) | throughput /s |\n\
         |---:|---:|---:|---:|---:|---:|---:|"
    );
    for g in &sm.by_concurrency {
        let f = |x: Option<u64>| x.map(ms).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            g.concurrency,
            g.attempts,
            g.successes,
            f(g.headline.successes.map(|x| x.p50)),
            f(g.headline.successes.map(|x| x.p99)),
            f(g.headline.with_failures.map(|x| x.p99)),
            g.throughput_per_ks
                .map(|t| format!("{}.{:03}", t / 1000, t % 1000))
                .unwrap_or_else(|| "–".into())
        );
    }
    if let Some(k) = sm.peak_throughput_concurrency {
        let _ = writeln!(s, "\nHighest throughput at concurrency {k}.");
    }
    let _ = writeln!(
        s,
        "\nKnee (the lowest level whose p50 exceeds 1.5 × the level-1 p50): {}.",
        match sm.knee_concurrency {
            Some(k) => format!("concurrency {k}"),
            None => "none".to_string(),
        }
    );
}

/// `## Files` and `## Verify`.
fn readme_files(s: &mut String, kind: ContractKind) {
    let _ = writeln!(s, "\n## Files\n");
    let _ = writeln!(
        s,
        "- `result.json`: everything above, machine readable\n\
         - `samples.csv`: one row per attempt, failures included\n\
         - `reports.jsonl`: each row's evidence: the harness's marks and the VMM's whole \
         report for that attempt (verify re-derives the row from it)\n\
         - `cmdline.txt`: the invocation as typed, every argument explicit, and the VMM \
         command of every sample\n{}\
         - `{CDF_FILE}`, `{STAGES_FILE}`: plots\n\
         - `{}` (when `truecold-proof report --html` wrote one): this bundle as one \
         self-contained page\n\
         - `{SUMS_FILE}`: sha256 of every other file",
        if kind == ContractKind::Linux {
            "- `config`: the guest kernel's .config\n"
        } else {
            ""
        },
        crate::names::HTML_FILE
    );
    let _ = writeln!(
        s,
        "\n## Verify\n\n```\nsha256sum -c --strict {SUMS_FILE}\ntruecold-proof verify .\n```"
    );
}

/// The generated files of a bundle: `(name, bytes)`, README first.
pub fn generated_files(r: &ResultJson, samples: &[Sample]) -> Vec<(String, Vec<u8>)> {
    generated_files_with(r, samples, None)
}

/// [`generated_files`] of a bundle whose README has the attribution section `attribution`
/// ([`readme_with`]).
pub fn generated_files_with(
    r: &ResultJson,
    samples: &[Sample],
    attribution: Option<&str>,
) -> Vec<(String, Vec<u8>)> {
    vec![
        (
            README_FILE.to_string(),
            readme_with(r, attribution).into_bytes(),
        ),
        (CDF_FILE.to_string(), cdf_svg(r, samples).into_bytes()),
        (STAGES_FILE.to_string(), stages_svg(r).into_bytes()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under 100 values the p99 is the maximum, and the README says so; from 100 on it is
    /// not, and nothing is said.
    #[test]
    fn a_p99_that_is_the_maximum_is_named_so() {
        let pair = |n: u64| {
            let v: Vec<u64> = (1..=n).collect();
            Pair {
                successes: Summary::of(&v),
                with_failures: Summary::of(&v),
            }
        };
        for n in [1, 10, 99] {
            let p = pair(n);
            let s = p.successes.as_ref().unwrap();
            assert_eq!(s.p99, s.max, "n {n}");
            let note = p99_is_max_note(&p);
            assert!(
                note.contains(&format!("With n = {n} (under 100) the p99 is the maximum")),
                "{note}"
            );
        }
        let p = pair(100);
        assert!(p.successes.as_ref().unwrap().p99 < 100);
        assert_eq!(p99_is_max_note(&p), "");
        assert_eq!(
            p99_is_max_note(&Pair {
                successes: None,
                with_failures: None
            }),
            ""
        );
    }
}
