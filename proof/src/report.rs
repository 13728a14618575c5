//! The bundle's README.md, generated from `result.json` alone (deterministic: same input,
//! same bytes), and the set of generated files.

use std::fmt::Write as _;

use crate::plot::{cdf_svg, stages_svg, CDF_FILE, STAGES_FILE};
use crate::schema::{
    description_of, Clock, Configuration, Contract, ContractKind, ResultJson, Sample, HEADLINE,
    PERCENTILE_DEFINITION,
};
use crate::stats::Summary;
use crate::summary::Pair;
use crate::summary::Summaries;
use crate::sums::SUMS_FILE;
use truecold_proto::limits::GuestMem;

/// A guest memory size given in bytes, as human text: [`GuestMem`]'s `N MiB` when it is one
/// a guest can have, else the bytes and why not (a bundle is untrusted: its size may be
/// anything).
pub fn mem_text(bytes: u64) -> String {
    match GuestMem::from_bytes(bytes) {
        Ok(m) => m.to_string(),
        Err(e) => format!("{bytes} bytes ({e})"),
    }
}

/// README file name.
pub const README_FILE: &str = "README.md";

/// What a duration on the virtual clock is (every README of a virtual-clock bundle says it).
pub const VIRTUAL_CLOCK_MEANS: &str =
    "a reproducible cost model of the boot path, not a hardware latency";

/// The clock as one plot caption line (short enough for a plot's width; READMEs use
/// [`Clock::describe`] and [`VIRTUAL_CLOCK_MEANS`] in full).
pub fn clock_caption(c: Clock) -> &'static str {
    match c {
        Clock::Wall => "clock: wall (CLOCK_MONOTONIC on the host)",
        Clock::Virtual => "clock: virtual (QEMU icount): a cost model, not a hardware latency",
    }
}

/// Nanoseconds as milliseconds with three decimals, truncated (display only).
pub fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, (ns / 1_000) % 1_000)
}

/// [`ms`], or `–` for a figure there is none of.
pub fn opt_ms(v: Option<u64>) -> String {
    v.map_or("–".into(), ms)
}

/// A stamp or duration in a verifier's message: `N ns`, or `none` when the row has none
/// (never Rust's `Some(N)`).
pub fn opt_ns(v: Option<u64>) -> String {
    v.map_or("none".into(), |n| format!("{n} ns"))
}

/// A signed difference of nanoseconds as [`ms`] with its sign (`+0.000` for none).
pub fn signed_ms(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "+" };
    format!("{sign}{}", ms(v.unsigned_abs()))
}

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

/// A string the publisher chose, as inline Markdown text that renders as itself: every
/// character that could open Markdown or HTML structure (`\`, `*`, `[`, `]`, `<`, `>`, `&`,
/// `|`, `~`, `$`, `_` where it is not inside a word, and a backtick that closes no code
/// span) is backslash-escaped; a code span (a run of backticks up to the next run of as
/// many) is kept as it is, its content rendered literally; control and bidirectional
/// characters are written as escapes ([`escape_untrusted`]'s spelling), so the text stays
/// on its one line. Text without any of them is unchanged.
///
/// [`escape_untrusted`]: crate::verdict::escape_untrusted
pub fn md_text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            let n = run_at(i);
            // The closing run: the next run of exactly `n` backticks.
            let mut j = i + n;
            let close = loop {
                if j >= chars.len() {
                    break None;
                }
                if chars[j] == '`' {
                    let m = run_at(j);
                    if m == n {
                        break Some(j);
                    }
                    j += m;
                } else {
                    j += 1;
                }
            };
            match close {
                Some(j) => {
                    let span: String = chars[i..j + n].iter().collect();
                    out.push_str(&crate::verdict::escape_untrusted(&span));
                    i = j + n;
                }
                None => {
                    for _ in 0..n {
                        out.push_str("\\`");
                    }
                    i += n;
                }
            }
            continue;
        }
        let word = |j: Option<usize>| {
            j.and_then(|j| chars.get(j))
                .is_some_and(|c| c.is_alphanumeric())
        };
        let special = match c {
            '\\' | '*' | '[' | ']' | '<' | '>' | '&' | '|' | '~' | '$' => true,
            '_' => !(word(i.checked_sub(1)) && word(Some(i + 1))),
            _ => false,
        };
        if special {
            out.push('\\');
            out.push(c);
        } else {
            out.push_str(&crate::verdict::escape_untrusted(
                c.encode_utf8(&mut [0u8; 4]),
            ));
        }
        i += 1;
    }
    out
}

/// A string the publisher chose, as one Markdown code span (rendered literally, HTML
/// included): fenced by one backtick more than its longest run of backticks (one when it has
/// none), padded with a space where it begins or ends with a backtick; control and
/// bidirectional characters written as escapes. A string without backticks or control
/// characters is `` `s` ``.
pub fn md_code(s: &str) -> String {
    let s = crate::verdict::escape_untrusted(s);
    let mut longest = 0usize;
    let mut run = 0usize;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// The README text: every string the publisher chose either recomputed from the contract
/// (the label, the description, the headline, the percentile definition: `verify` requires
/// them to be these) or escaped ([`md_text`], [`md_code`]).
pub fn readme(r: &ResultJson) -> String {
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
                crate::verdict::escape_untrusted(kind),
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
    s.push_str(&p99_is_max_note(&sm.headline));
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
        crate::html::HTML_FILE
    );
    let _ = writeln!(
        s,
        "\n## Verify\n\n```\nsha256sum -c --strict {SUMS_FILE}\ntruecold-proof verify .\n```"
    );
}

/// The generated files of a bundle: `(name, bytes)`, README first.
pub fn generated_files(r: &ResultJson, samples: &[Sample]) -> Vec<(String, Vec<u8>)> {
    vec![
        (README_FILE.to_string(), readme(r).into_bytes()),
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

    #[test]
    fn figures_read_as_numbers_or_a_word_never_as_options() {
        assert_eq!(opt_ns(Some(93_042_722)), "93042722 ns");
        assert_eq!(opt_ns(None), "none");
        assert_eq!(opt_ms(Some(93_042_722)), "93.042");
        assert_eq!(opt_ms(None), "–");
        assert_eq!(
            (signed_ms(-1_500_000), signed_ms(0)),
            ("-1.500".into(), "+0.000".into())
        );
    }

    #[test]
    fn publisher_text_is_inert_and_plain_text_is_unchanged() {
        assert_eq!(
            md_text("Intel(R) Xeon(R) Processor"),
            "Intel(R) Xeon(R) Processor"
        );
        assert_eq!(
            md_text("forced by TRUECOLD_HOST_KIND"),
            "forced by TRUECOLD_HOST_KIND"
        );
        assert_eq!(
            md_text("<b> **x** [l](u) _a_ & `c<b>` ``d` e"),
            r"\<b\> \*\*x\*\* \[l\](u) \_a\_ \& `c<b>` \`\`d\` e"
        );
        assert_eq!(md_text("a\n\n# b"), r"a\n\n# b");
        assert_eq!(md_text("`x\n\n# y`"), r"`x\n\n# y`");
        assert_eq!(
            md_text("boots bzImage: `truecold run` has no flag"),
            "boots bzImage: `truecold run` has no flag"
        );
        assert_eq!(md_code("a b"), "`a b`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a\n\n# b"), r"`a\n\n# b`");
    }
}
