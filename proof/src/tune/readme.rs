//! A tune directory's `README.md`, rendered from its record and the verified rows.

use std::fmt::Write as _;

use truecold_proto::kinds::Clock;
use truecold_proto::tune::{apply, Change, Knob, VmmChange};

use super::measure::*;
use super::model::*;
use super::recommended::Invocation;
use super::stats::*;
use crate::arms::{knob_list, BASELINE_ARM, RECOMMENDED_ARM, RESAMPLES};
use crate::attribution::Instrument;
use crate::fmt::ms;
use crate::names::{README_FILE, SUMS_FILE, TUNE_FILE};
use crate::schema::{ResultJson, HEADLINE};

pub(super) use crate::fmt::{opt_ms, signed_ms};

/// ppm as a percentage with two decimals, truncated: `-5.23 %`.
pub(super) fn pct(ppm: i64) -> String {
    let sign = if ppm < 0 { "-" } else { "+" };
    let a = ppm.unsigned_abs();
    format!("{sign}{}.{:02} %", a / 10_000, (a / 100) % 100)
}

pub(super) fn effect_cells(e: &Effect) -> String {
    format!("{} | {}", effect_figures(e), e.verdict_text())
}

/// [`effect_cells`] with the Holm-adjusted p before the verdict (rule 2's screen).
pub(super) fn effect_cells_holm(e: &Effect) -> String {
    format!(
        "{} | {} | {}",
        effect_figures(e),
        e.holm_p.as_deref().unwrap_or("–"),
        e.verdict_text()
    )
}

/// An effect's cells from n to the Mann–Whitney p.
fn effect_figures(e: &Effect) -> String {
    format!(
        "{} | {} | {} | {} | {} | {}",
        e.n,
        opt_ms(e.p50_ns),
        e.delta_p50_ns.map_or("–".into(), signed_ms),
        e.delta_ppm.map_or("–".into(), pct),
        e.ci95_ns.map_or("–".into(), |[l, h]| format!(
            "[{}, {}]",
            signed_ms(l),
            signed_ms(h)
        )),
        e.mann_whitney_p.as_deref().unwrap_or("–"),
    )
}

/// The VMM flag a VMM knob sets, in words.
pub(super) fn vmm_flag(k: Knob) -> Option<String> {
    match k.change() {
        Change::Vmm(VmmChange::Backing(b)) => Some(format!("`--backing {}`", b.as_str())),
        Change::Vmm(VmmChange::Console) => Some("`--console`".into()),
        Change::Vmm(VmmChange::BzImage) => {
            Some("boot the bzImage (64-bit boot protocol) instead of vmlinux's PVH entry".into())
        }
        Change::Vmm(VmmChange::PinVcpus) => Some("`--pin-vcpus`".into()),
        _ => None,
    }
}

/// The tune directory's `README.md`.
pub(super) fn readme(f: &TuneFile, baseline: Option<&ResultJson>) -> String {
    let mut s = String::new();
    readme_head(&mut s, f, baseline);
    readme_screen(&mut s, f);
    readme_breaks(&mut s, f);
    readme_proposals(&mut s, f);
    readme_recommended(&mut s, f);
    readme_confirm(&mut s, f);
    readme_method(&mut s, f);
    s
}

/// The title, the plan and the context.
fn readme_head(s: &mut String, f: &TuneFile, baseline: Option<&ResultJson>) {
    let _ = writeln!(
        s,
        "# truecold tune: {} knob(s), {} guest\n",
        f.knobs.len(),
        f.guest.as_str()
    );
    if let Some(h) = f.host_kind {
        let _ = writeln!(s, "- host kind: {}", h.as_str());
        let _ = writeln!(s, "- clock: {}", Clock::describe(h.clock()));
    }
    if let Some(r) = baseline {
        let _ = writeln!(
            s,
            "- contract: {} ({}), observed at the VM exit; deadline {} ms; every arm a \
             complete bundle, failures kept as rows",
            r.contract.kind.label(),
            r.contract.mode.describe(),
            ms(r.contract.deadline_ns)
        );
    }
    if let Some(o) = f.invocation.as_ref().map(|i| &i.options) {
        if let Some(k) = &o.kernel {
            let _ = writeln!(
                s,
                "- kernel: yours, `{}` (`{}` {}{}, sha256 `{}`): the baseline boots it, every \
                 Kconfig knob is its fragment appended to it; {}",
                crate::kconfig::USER_KERNEL_FILE,
                k.form.flag(),
                k.given_as,
                k.source
                    .as_deref()
                    .map(|src| format!(", `--kernel-source` {src}"))
                    .unwrap_or_default(),
                k.sha256,
                if k.not_carried.is_empty() {
                    "every symbol carried over into the resolved config".to_string()
                } else {
                    format!(
                        "{} symbol(s) did not carry over into the resolved config: {}",
                        k.not_carried.len(),
                        k.not_carried.join("; ")
                    )
                }
            );
        }
        if !o.already_set.is_empty() {
            let _ = writeln!(
                s,
                "- left out (your kernel already sets every symbol of their fragment): {}",
                knob_list(&o.already_set)
            );
        }
    }
    let _ = writeln!(
        s,
        "- context (not knobs): {} vCPU, {}, backing {}",
        f.context.vcpus,
        crate::fmt::mem_text(f.context.mem_bytes),
        f.context.backing.as_str()
    );
    let _ = writeln!(
        s,
        "- phases: screen ({} rounds: baseline + one arm per knob), confirm ({} rounds: \
         baseline, recommended, recommended-minus-<knob>); each round launches every arm of \
         its phase once, in a shuffled order (`<phase>/arms.json`)",
        f.rounds.screen, f.rounds.confirm
    );
    let _ = writeln!(
        s,
        "- launches: {}{}; bootstrap seed {}\n",
        f.launches,
        f.budget
            .map_or(", no budget".into(), |b| format!(" of a budget of {b}")),
        crate::seed::hex(f.seed)
    );
    readme_rule(s, f);
}

/// The verdict rule the tune was judged by.
fn readme_rule(s: &mut String, f: &TuneFile) {
    let e = format!(
        "{}.{:02} %",
        MIN_EFFECT_PPM / 10_000,
        (MIN_EFFECT_PPM / 100) % 100
    );
    match f.rule.version {
        RuleVersion::V1 => {
            let _ = writeln!(
                s,
                "## Verdict rule\n\nEach arm against its base over the successful rows \
                 ({HEADLINE}): Δp50 = p50(arm) − p50(base), a percentile-bootstrap 95 % \
                 interval of Δp50 ({RESAMPLES} resamples), the two-sided Mann–Whitney p. \
                 **breaks strict-ready**: the arm has a failed row (never faster); \
                 **inconclusive**: fewer than {MIN_ROUNDS} successes a side; **faster** / \
                 **slower**: the interval excludes 0, p < {ALPHA_TEXT} and |Δp50| ≥ {e} of the \
                 base's p50; **no effect**: the interval lies strictly inside ± that; \
                 **inconclusive** otherwise. Exact figures in {TUNE_FILE}.\n"
            );
        }
        RuleVersion::V2 => {
            let _ = writeln!(
                s,
                "## Verdict rule (rule 2)\n\nEach arm against its base over the successful \
                 rows ({HEADLINE}): Δp50 = p50(arm) − p50(base), a percentile-bootstrap 95 % \
                 interval of Δp50 ({RESAMPLES} resamples), the two-sided Mann–Whitney p; in the \
                 screen that p Holm-adjusted over its {} knobs (Holm p). **breaks \
                 strict-ready**: the arm has a failed row (never faster); **inconclusive**: \
                 fewer than {MIN_ROUNDS} successes a side; **faster** / **slower**: the Holm p \
                 (confirm phase: the p) < {ALPHA_TEXT} and the interval excludes 0 on the side \
                 of Δp50; **no effect**: the interval lies strictly inside ± {e} of the base's \
                 p50; **inconclusive** otherwise. Exact figures in {TUNE_FILE}.\n\n\
                 Holm, not Benjamini–Hochberg: every winner goes into the recommended \
                 configuration, so the screen bounds the chance that *any* knob without an \
                 effect wins (family-wise error ≤ {ALPHA_TEXT}, whatever the dependence \
                 between knobs that share one baseline), not only the expected share of false \
                 winners. No threshold on the observed Δp50: a true change of exactly {e} \
                 would pass one only about half the time, whatever n; {e} is instead the \
                 change n is sized to find (below).\n",
                f.knobs.len()
            );
        }
    }
}

/// The screen: the baseline and every knob's effect, ranked.
fn readme_screen(s: &mut String, f: &TuneFile) {
    let b = &f.screen.baseline;
    let _ = writeln!(
        s,
        "## Screen: each knob against the baseline\n\nbaseline: {} of {} launches \
         successful, p50 {} ms.\n",
        b.n,
        b.attempts,
        opt_ms(b.p50_ns)
    );
    let holm = f.rule.version != RuleVersion::V1;
    let _ = writeln!(
        s,
        "| rank | knob | class | n | p50 ms | Δp50 ms | Δp50 | 95 % CI ms | p | {}verdict |\n\
         |---|---|---|---|---|---|---|---|---|---|{}",
        if holm { "Holm p | " } else { "" },
        if holm { "---|" } else { "" }
    );
    for (i, k) in f.screen.ranking.iter().enumerate() {
        if let Some(e) = f.screen.effects.iter().find(|e| e.knobs == [*k]) {
            let cells = if holm {
                effect_cells_holm(e)
            } else {
                effect_cells(e)
            };
            let _ = writeln!(
                s,
                "| {} | [{k}]({SCREEN_DIR}/{k}/README.md) | {} | {cells} |",
                i + 1,
                k.class().as_str(),
            );
        }
    }
}

/// The knobs that break strict-ready, and the baseline's failures.
fn readme_breaks(s: &mut String, f: &TuneFile) {
    let b = &f.screen.baseline;
    let _ = writeln!(s, "\n## Breaks strict-ready\n");
    let breaks: Vec<&Effect> = f
        .screen
        .effects
        .iter()
        .filter(|e| e.verdict == KnobVerdict::Breaks)
        .collect();
    if breaks.is_empty() {
        let _ = writeln!(s, "No knob's arm had a failed launch.");
    }
    for e in breaks {
        let _ = writeln!(s, "- {}: {}", knob_list(&e.knobs), e.verdict_text());
    }
    if !b.failures.is_empty() {
        let _ = writeln!(
            s,
            "- the baseline itself: {}",
            b.failures
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// The proposals (`truecold tune --propose`): each knob, where it came from, and what the
/// screen made of it; a proposal that broke strict-ready is said to have done so.
fn readme_proposals(s: &mut String, f: &TuneFile) {
    if f.proposals.is_empty() && f.unbuilt.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Proposals\n\nThese knobs were proposed from an attribution of the boot, each \
         from one row of it, and screened with the others; a proposal is never assumed safe: \
         the contract (strict-ready on every launch) judged each.\n\n| knob | from | cost | \
         why | screen |\n|---|---|---:|---|---|"
    );
    for p in &f.proposals {
        let src = &p.source;
        let verdict = f
            .screen
            .effects
            .iter()
            .find(|e| e.knobs == [p.knob])
            .map(|e| match e.verdict {
                KnobVerdict::Breaks => {
                    format!("the proposal broke strict-ready ({})", e.verdict_text())
                }
                _ => e.verdict_text(),
            })
            .unwrap_or_else(|| "not screened".into());
        let _ = writeln!(
            s,
            "| {} | {} `{}` ({}, {}) | {} ms | {} | {} |",
            p.knob,
            src.evidence.as_str(),
            src.name,
            src.instrument,
            src.attribution,
            crate::fmt::ms(src.ns),
            src.why,
            verdict
        );
    }
    for u in &f.unbuilt {
        let src = &u.proposal.source;
        let _ = writeln!(
            s,
            "\n- `{}` (from {} `{}`, {} ms) was proposed but not screened: its kernel could \
             not be got: {}",
            u.proposal.knob,
            src.evidence.as_str(),
            src.name,
            crate::fmt::ms(src.ns),
            u.why
        );
    }
}

/// The recommended configuration.
fn readme_recommended(s: &mut String, f: &TuneFile) {
    let _ = writeln!(s, "\n## Recommended configuration\n");
    if f.screen.winners.is_empty() {
        let _ = writeln!(
            s,
            "No knob is faster by the rule: nothing to recommend, no confirm phase."
        );
    } else {
        let _ = writeln!(s, "Winners (rank order): {}.", knob_list(&f.screen.winners));
        // How each winner's effect reads on hardware: its cost class, and the fidelity row
        // that held the lever against a published hardware measurement.
        let _ = writeln!(s);
        for k in &f.screen.winners {
            let c = k.cost_class();
            let _ = writeln!(
                s,
                "- `{k}`: {}, which reads on hardware as {}{}",
                c.as_str(),
                c.reads(),
                match k.fidelity() {
                    Some(row) => format!("; docs/fidelity.md: {row}."),
                    None => "; no published hardware measurement covers it.".to_string(),
                }
            );
        }
        let traded = f
            .screen
            .recommended
            .iter()
            .filter_map(|k| Some((k, k.trade_off()?)));
        for (k, cost) in traded {
            let _ = writeln!(
                s,
                "\n**Trade-off:** `{k}` is in the recommendation for its time alone; it costs \
                 {cost} — weigh that before applying it (truecold never makes such a knob a \
                 default, kernel-config/README.md)."
            );
        }
        for d in &f.screen.dropped {
            let _ = writeln!(
                s,
                "\n`{}` is faster too but conflicts with the better-ranked `{}`: dropped.",
                d.knob, d.conflicts_with
            );
        }
        let applied = apply(&f.screen.recommended, f.context.backing);
        let _ = writeln!(
            s,
            "\nKernel fragment (merged after `kernel-config/base.config`):\n"
        );
        if applied.fragments.is_empty() {
            let _ = writeln!(s, "none");
        } else {
            let _ = writeln!(s, "```");
            for (name, text) in &applied.fragments {
                let _ = write!(s, "# {name}\n{text}");
            }
            let _ = writeln!(s, "```");
        }
        let _ = writeln!(
            s,
            "\nCommand line (appended to the base): {}",
            if applied.cmdline_extra.is_empty() {
                "none".into()
            } else {
                format!("`{}`", applied.cmdline_extra)
            }
        );
        let flags: Vec<String> = f
            .screen
            .recommended
            .iter()
            .filter_map(|k| vmm_flag(*k))
            .collect();
        let _ = writeln!(
            s,
            "\nVMM flags: {}",
            if flags.is_empty() {
                "none".into()
            } else {
                flags.join(", ")
            }
        );
    }
    if f.invocation.is_some() {
        let _ = writeln!(
            s,
            "\nTo apply it: [recommended/](recommended/) holds the kernel fragment \
             (`kernel.fragment`), the command-line words (`cmdline.txt`, `+` added, `-` \
             removed) and the VMM flags (`vmm-flags.txt`); `sh recommended/reproduce.sh` \
             measures it alone with `truecold run` (this tune's guest, vCPUs, memory and \
             confirm rounds)."
        );
    }
}

/// The confirm phase: the final A/B and the leave-one-out checks.
fn readme_confirm(s: &mut String, f: &TuneFile) {
    if let Some(c) = &f.confirm {
        let _ = writeln!(
            s,
            "\n## Final A/B: recommended against baseline\n\n| arm | base | n | p50 ms | Δp50 ms \
             | Δp50 | 95 % CI ms | p | verdict |\n|---|---|---|---|---|---|---|---|---|"
        );
        let e = &c.final_ab;
        let _ = writeln!(s, "| {} | {} | {} |", e.arm, e.base, effect_cells(e));
        let _ = writeln!(s, "\n## Leave-one-out\n");
        if c.leave_one_out.is_empty() {
            let _ = writeln!(
                s,
                "One winner: the final A/B is its leave-one-out (the combination without it \
                 is the baseline)."
            );
        } else {
            let _ = writeln!(
                s,
                "Each winner's effect inside the combination: `recommended` against \
                 `recommended-minus-<knob>`.\n\n| knob | n | p50 ms | Δp50 ms | Δp50 | 95 % CI \
                 ms | p | verdict |\n|---|---|---|---|---|---|---|---|"
            );
            for e in &c.leave_one_out {
                let _ = writeln!(s, "| {} | {} |", knob_list(&e.knobs), effect_cells(e));
            }
        }
        if c.not_confirmed.is_empty() {
            let _ = writeln!(s, "\nEvery winner is confirmed in the combination.");
        } else {
            let _ = writeln!(
                s,
                "\nNot confirmed in the combination: {}.",
                knob_list(&c.not_confirmed)
            );
        }
    }
}

/// How n was sized, the noise bundle, and how to check it all.
fn readme_method(s: &mut String, f: &TuneFile) {
    let b = &f.screen.baseline;
    let k = f.knobs.len() as u64;
    let e = format!(
        "{}.{:02} %",
        MIN_EFFECT_PPM / 10_000,
        (MIN_EFFECT_PPM / 100) % 100
    );
    match f.rule.version {
        RuleVersion::V1 => {
            let _ = writeln!(
                s,
                "\n## How n was sized\n\nRounds per arm to detect a change of {e} of the \
                 p50 at two-sided α = {ALPHA_TEXT} with {POWER_PCT} % power, from the \
                 headline's coefficient of variation cv (normal approximation; π/3 for the \
                 Mann–Whitney test's efficiency): n = max({MIN_ROUNDS}, ⌈{}.{:03} · (cv / \
                 e)²⌉).\n",
                SIZING_K_MILLI / 1000,
                SIZING_K_MILLI % 1000
            );
        }
        RuleVersion::V2 => {
            let _ = writeln!(
                s,
                "\n## How n was sized\n\nRounds per arm so that a true change of e = {e} of \
                 the p50 is found with at least {POWER_PCT} % power by the verdict rule above, at \
                 family-wise α = {ALPHA_TEXT} over K = {k} knobs: the least n ≥ {MIN_ROUNDS} at \
                 which one knob's Mann–Whitney test at the Bonferroni level α/K (Holm never \
                 rejects less) reaches {SIZING_POWER_PCT} % by an approximation (the margin \
                 over {POWER_PCT} % absorbs its error), from the headline's coefficient of variation \
                 cv: the rank statistic taken as normal with its mean and variance under a \
                 normal shift of e/cv standard deviations (Lehmann), significant from the \
                 least count of won pairs whose p is below α/K (the test's discreteness at \
                 small n counts). `proof/tests/tune_power.rs` checks the power and the \
                 family-wise error by seeded simulation.\n"
            );
        }
    }
    match &f.noise {
        Some(n) => {
            let _ = writeln!(
                s,
                "- sized from cv {} ppm ({}): n = {}",
                n.cv_ppm,
                n.source,
                rounds_for_rule(f.rule.version, n.cv_ppm, MIN_EFFECT_PPM, k)
            );
            if n.pilot_rounds.is_some() {
                let _ = writeln!(
                    s,
                    "- the noise is the pilot's: the root mean square of each arm's own CV \
                     in [`{PILOT_DIR}/`]({PILOT_DIR}/README.md) (the baseline and the \
                     command-line and VMM knobs, interleaved as the screen runs its arms, \
                     before any Kconfig arm's kernel is built), which verify recomputes"
                );
            }
        }
        None => {
            let _ = writeln!(s, "- n was given, not sized from a measured noise");
        }
    }
    let _ = writeln!(
        s,
        "- run: {} rounds (screen), {} rounds (confirm)",
        f.rounds.screen, f.rounds.confirm
    );
    if !f.kernel_builds.is_empty() {
        let _ = writeln!(
            s,
            "\n## Kernel builds\n\nEach Kconfig arm's kernel, built over the baseline's objects \
             (only what its symbols change is compiled) or found in the kernel cache; the wall \
             time the tune waited for it:\n\n| knobs | wall time |\n|---|---:|"
        );
        for b in &f.kernel_builds {
            let _ = writeln!(
                s,
                "| `{}` | {}.{} s{} |",
                b.knobs,
                b.wall_ms / 1000,
                (b.wall_ms % 1000) / 100,
                if b.cached { " (cached)" } else { "" }
            );
        }
    }
    if let (Some(cv), Some(n)) = (b.cv_ppm, b.rounds_for_cv) {
        let _ = writeln!(
            s,
            "- this tune's baseline: cv {cv} ppm, so a next tune of this configuration needs n = {n}"
        );
    }
    let _ = writeln!(
        s,
        "\n## Knobs\n\n| knob | class | cost class | what | source |\n|---|---|---|---|---|"
    );
    for k in &f.knobs {
        let _ = writeln!(
            s,
            "| {k} | {} | {} | {} | {} |",
            k.class().as_str(),
            k.cost_class().as_str(),
            k.what(),
            k.source()
        );
    }
    let _ = writeln!(
        s,
        "\nA knob's cost class says how its effect on the nested harness's virtual clock reads on \
         hardware (truecold's docs/fidelity.md)."
    );
    let _ = writeln!(
        s,
        "\nEach phase is a multi-arm directory and each arm a complete bundle; \
         `truecold-proof verify <tune>` checks them all and recomputes every figure here; \
         `sha256sum -c --strict {SUMS_FILE}` checks every file."
    );
}

/// `tune.json` and `README.md` for the results.
pub(super) fn generated(f: &TuneFile, m: &Measured) -> Vec<(String, Vec<u8>)> {
    let baseline = m.screen.data.get(BASELINE_ARM).map(|a| &a.result);
    let mut text = readme(f, baseline);
    text.push_str(&attribution_section(m, f.invocation.as_ref()));
    let mut v = vec![
        (TUNE_FILE.to_string(), tune_bytes(f)),
        (README_FILE.to_string(), text.into_bytes()),
    ];
    if let Some(inv) = &f.invocation {
        v.extend(super::recommended::recommended_files(
            &f.screen.recommended,
            inv,
            f.rounds.confirm,
        ));
    }
    v
}

/// The README's attribution section: the attributed arms of the last phase (the confirm
/// phase's `baseline` and `recommended` when it ran, else the screen's `baseline`), side by
/// side, under what their instrument measured (`options`' recorded one; a tune that recorded
/// none, or no invocation, [`Instrument::ABSENT`], the text as it was written); empty when no
/// arm carries one.
pub(super) fn attribution_section(m: &Measured, invocation: Option<&Invocation>) -> String {
    let (dir, phase) = match &m.confirm {
        Some(c) => (CONFIRM_DIR, c),
        None => (SCREEN_DIR, &m.screen),
    };
    let arms: Vec<&str> = [BASELINE_ARM, RECOMMENDED_ARM]
        .into_iter()
        .filter(|a| phase.attributed.contains(*a))
        .collect();
    if arms.is_empty() {
        return String::new();
    }
    let instrument = Instrument::or_absent(invocation.and_then(Invocation::instrument));
    let mut s = match instrument {
        Instrument::Initcall => String::from(
            "\n## Attribution: where the time goes\n\nEach from launches run after the phase's \
             measured rounds with `initcall_debug` (never rows of samples.csv): host stages \
             with the VMM's exits and page faults, guest phases and the longest initcalls on \
             one clock; each `attribution.csv` says whether its total represents the arm's \
             measured p50 (bound 10 %).\n\n",
        ),
        Instrument::Rip => format!(
            "\n## Attribution: where the time goes\n\nEach from launches run after the phase's \
             measured rounds, the VMM sampling each vCPU's RIP {} (`--attribution-instrument \
             rip`; the guest as measured, never rows of samples.csv): host stages with the \
             VMM's exits and page faults and a flat profile per vCPU on one clock; each \
             `attribution.csv` says whether its total represents the arm's measured p50 (bound \
             10 %) and what the sampling cost.\n\n",
            match invocation.and_then(|i| i.options.attribution_sample_us) {
                Some(p) => format!("every {p} µs"),
                None => "(period not recorded)".into(),
            }
        ),
    };
    let _ = writeln!(s, "| {} |", arms.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(arms.len()));
    let cells: Vec<String> = arms
        .iter()
        .map(|a| {
            format!(
                "![{a}]({dir}/{a}/{svg}) [csv]({dir}/{a}/{csv})",
                svg = crate::attribution::SVG_FILE,
                csv = crate::attribution::CSV_FILE
            )
        })
        .collect();
    let _ = writeln!(s, "| {} |", cells.join(" | "));
    s
}
