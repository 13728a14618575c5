//! `truecold tune`: the statistics of a tune (one definition: the bench calls them while it
//! runs, the verifier to recompute every figure) and the verifiable tune directory.
//!
//! ```text
//! <tune>/tune.json    the plan (seed, guest, knobs, context, rounds, budget, noise) and the
//!                     results: every knob against the baseline, the ranking, the winners,
//!                     the final A/B and the leave-one-out, all recomputed by verify
//! <tune>/README.md    host kind, clock, contract, context, the ranked table, breaks, the
//!                     recommended fragment / command line / VMM flags, final A/B,
//!                     leave-one-out, how n was sized, each knob's what and source
//! <tune>/screen/      a multi-arm directory ([`crate::arms`]): `baseline` + one arm per knob
//! <tune>/confirm/     a multi-arm directory: `baseline`, `recommended`,
//!                     `recommended-minus-<k>` per winner when there are two or more
//!                     (absent when no knob won)
//! <tune>/SHA256SUMS   every file under <tune> (`screen/baseline/samples.csv`, …)
//! ```
//!
//! # One effect ([`effect`]): an arm against a base arm
//! Over each arm's successful rows (the headline, request → strict-ready): `n`, the p50s
//! (nearest rank), Δp50 = p50(arm) − p50(base) in ns and in ppm of the base's p50
//! (truncated toward zero), a percentile-bootstrap 95 % interval of Δp50
//! ([`crate::compare::bootstrap_delta_ci`]: SplitMix64, [`RESAMPLES`] resamples of both
//! arms), and the two-sided Mann–Whitney p ([`crate::compare::mann_whitney_p`]). The verdict
//! follows the rule the tune names ([`RuleVersion`]: `tune.json`'s `rule.version`, absent =
//! 1; new tunes 2), first rule that applies:
//! 1. **breaks strict-ready** — the arm has a failed row (its error kinds counted): never
//!    faster, whatever its successes say;
//! 2. **inconclusive** — fewer than [`MIN_ROUNDS`] successes on a side;
//! 3. **faster** / **slower** — rule 2: the test's p < [`ALPHA`] (in the screen the
//!    Mann–Whitney p Holm-adjusted over the screen's knobs, [`holm`]; in the confirm phase the
//!    p) and Δp50 on that side; rule 1: the 95 % interval excludes 0 on the side of Δp50, p <
//!    [`ALPHA`], and |Δp50| ≥ [`MIN_EFFECT_PPM`] of the base's p50;
//! 4. **no effect** — the 95 % interval lies strictly inside ± that minimum effect;
//! 5. **inconclusive** — otherwise.
//!
//! # Screen, ranking, winners ([`screen`])
//! Each knob's arm against `baseline`; comparison `k` (0-based, the plan's knob order) draws
//! its bootstrap from `seed + k`. Ranking: by Δp50 ascending (most negative first; an arm
//! without a Δ after those with one), arms that break strict-ready last, ties in catalogue
//! order. Winners: the faster knobs in rank order, a knob dropped when it conflicts
//! ([`truecold_proto::tune::conflicts`]) with a better-ranked winner. `recommended`: every
//! winner, in catalogue order.
//!
//! # Confirm ([`confirm`])
//! The final A/B: `recommended` against `baseline` (seed `seed + K`, `K` the number of
//! knobs). Leave-one-out, with two or more winners: for the `i`-th winner in catalogue order,
//! `recommended` against `recommended-minus-<k>` as its base (seed `seed + K + 1 + i`): the
//! effect of adding `k` to the rest of the combination. A winner whose leave-one-out verdict
//! is not faster (with one winner: whose final A/B is not faster) is *not confirmed in the
//! combination*.
//!
//! # Sizing n ([`rounds_for_rule`])
//! Rule 2 ([`screen_power`]): the least n ≥ [`MIN_ROUNDS`] at which one knob's Mann–Whitney
//! test at the Bonferroni level α/K (Holm rejects at least as often) reaches
//! [`SIZING_POWER_PCT`] % power at a true change of the minimum effect `e`, from the
//! headline's coefficient of variation `cv`: the rank statistic taken as normal with its exact
//! mean and variance under a normal shift of e/cv standard deviations (Lehmann), significant
//! from the least count of won pairs whose p is below α/K. The real power at `e` is then at
//! least [`POWER_PCT`] % (`proof/tests/tune_power.rs`). Rule 1 ([`rounds_for`]): normal
//! approximation `n = 2 (z₀.₉₇₅ + z₀.₈₀)² (cv / e)²` for a difference of means, times π/3 for
//! the Mann–Whitney test's efficiency against it under normal data (3/π), so
//! `n = ceil(16.439 · (cv / e)²)` ([`SIZING_K_MILLI`]), at least [`MIN_ROUNDS`]; under rule 1's
//! verdict its real power is under 50 %.
//!
//! # The verifier ([`verify_tune_dir`]; [`crate::verify_dir`] recognises `tune.json`)
//! `tune.json` parses, is in the writer's canonical bytes and is a plan (knobs known, in
//! catalogue order, each once, each applying to the guest; rounds > 0); each phase
//! directory verifies as a multi-arm directory (its reasons with `screen: ` / `confirm: ` in
//! front); the screen's arms are exactly `baseline` and one per knob, over `rounds.screen`
//! rounds, the confirm's exactly `baseline`, `recommended` (every recomputed winner) and
//! `recommended-minus-<k>` (two or more winners), over `rounds.confirm` rounds, and absent
//! when no knob won; the baselines run the plan's context (contract, vCPUs, memory,
//! backing) and both phases the same host kind and guest; the launches fit the budget;
//! `tune.json` and `README.md` byte for byte what the verified rows give; SHA256SUMS over
//! every file.

mod check;
mod measure;
mod model;
mod proposal;
mod readme;
mod recommended;
mod stats;
mod write;

use std::path::Path;

use crate::kind::{DirKind, Kind};
use crate::verdict::{Verdict, VerifyOptions};

pub use check::*;
pub use measure::*;
pub use model::*;
pub use proposal::*;
pub use recommended::*;
pub use stats::*;
pub use write::*;

/// A tune directory: its implementation of [`DirKind`], which [`crate::verify`] dispatches to.
pub struct TuneDir;

impl DirKind for TuneDir {
    const KIND: Kind = Kind::Tune;
    type Error = TuneError;

    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict {
        verify_tune_dir(dir, opts)
    }

    fn is_generated(_dir: &Path, name: &str) -> bool {
        is_regenerated(name)
    }

    fn regenerate(dir: &Path) -> Result<Vec<String>, TuneError> {
        regenerate_tune(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::measure::*;
    use super::model::*;
    use super::readme::*;
    use super::stats::*;
    use crate::schema::{Backing, Figure};
    use std::collections::BTreeMap;
    use truecold_proto::tune::{Knob, TuneGuest};

    fn arm(name: &str, knobs: Vec<Knob>, ok: Vec<u64>, errors: &[(&str, u64)]) -> TuneArm {
        let mut ok = ok;
        ok.sort_unstable();
        let e: BTreeMap<String, u64> = errors.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        TuneArm {
            name: name.into(),
            knobs,
            attempts: ok.len() as u64 + e.values().sum::<u64>(),
            ok,
            errors: e,
        }
    }

    /// SplitMix64 normal draws (Box–Muller) for synthetic headlines.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn unit(&mut self) -> f64 {
            ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.unit(), self.unit());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
        /// `n` headlines around `median` ns with coefficient of variation `cv`.
        fn rows(&mut self, n: usize, median: f64, cv: f64) -> Vec<u64> {
            (0..n)
                .map(|_| (median * (1.0 + cv * self.normal())).max(1.0) as u64)
                .collect()
        }
    }

    const MEDIAN: f64 = 300e6;

    #[test]
    fn the_sizing_constant_is_the_formula() {
        use statrs::distribution::{ContinuousCDF, Normal};
        let z = Normal::standard();
        let k = 2.0
            * (z.inverse_cdf(1.0 - ALPHA / 2.0) + z.inverse_cdf(POWER_PCT as f64 / 100.0)).powi(2)
            * std::f64::consts::PI
            / 3.0;
        assert_eq!(SIZING_K_MILLI, (k * 1000.0).ceil() as u64, "{k}");
        // cv = e: 17 rounds; cv = e/2: the floor; twice the noise, four times the rounds.
        assert_eq!(rounds_for(10_000, 10_000), 17);
        assert_eq!(rounds_for(5_000, 10_000), MIN_ROUNDS);
        assert_eq!(rounds_for(20_000, 10_000), 66);
        assert_eq!(rounds_for(1, 0), u64::MAX);
        assert_eq!(cv_ppm(&[100, 100, 100]), Some(0));
        assert_eq!(cv_ppm(&[90, 110]), Some(141_421));
        assert_eq!(cv_ppm(&[5]), None);
    }

    #[test]
    fn rule_2_sizes_for_the_screen_and_holm_adjusts_it() {
        // Rule 1's sizing is kept; rule 2's grows with the screen's knobs (Bonferroni z) and
        // asks the approximation for SIZING_POWER_PCT.
        assert_eq!(
            rounds_for_rule(RuleVersion::V1, 10_000, MIN_EFFECT_PPM, 20),
            17
        );
        let v2 = |cv, k| rounds_for_rule(RuleVersion::V2, cv, MIN_EFFECT_PPM, k);
        assert_eq!(
            [v2(3_500, 1), v2(10_000, 1), v2(20_000, 1)],
            [MIN_ROUNDS, 20, 77]
        );
        assert_eq!(
            [v2(3_500, 20), v2(10_000, 20), v2(20_000, 20)],
            [9, 38, 141]
        );
        // No noise: the least n at which a complete separation is significant at α/K.
        assert_eq!([v2(0, 1), v2(0, 20)], [MIN_ROUNDS, 7]);
        assert_eq!(rounds_for_rule(RuleVersion::V2, 1, 0, 3), u64::MAX);
        // Without an effect the approximation's power is the test's one-sided level: its
        // variance is then the null's (checks the orthant integral).
        let null = screen_power(2_000, 0.0, 1);
        assert!((null - ALPHA / 2.0).abs() < 0.001, "{null}");
        assert!(screen_power(v2(10_000, 20), 1.0, 20) * 100.0 >= SIZING_POWER_PCT as f64);
        assert!(screen_power(v2(10_000, 20) - 1, 1.0, 20) * 100.0 < SIZING_POWER_PCT as f64);
        // Holm over five (a missing p counts as 1): sorted 0.005·5, 0.01·4, 0.03·3, then
        // 0.04·2 = 0.08 lifted to the running 0.09, the missing one 1.
        let h = holm(&[Some(0.01), Some(0.04), Some(0.03), Some(0.005), None]);
        let want = [0.04, 0.09, 0.09, 0.025, 1.0];
        for (got, want) in h.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{h:?}");
        }
        // A knob faster alone (rule 1) is not after Holm over three knobs: p ≈ 0.031.
        let base = arm(
            "baseline",
            vec![],
            (0..8).map(|i| 1_000_000 + i * 1_000).collect(),
            &[],
        );
        let near = arm(
            "lpj",
            vec![Knob::Lpj],
            vec![
                955_000, 960_000, 965_000, 970_000, 975_000, 980_000, 1_004_500, 1_005_500,
            ],
            &[],
        );
        let null = |k: Knob| arm(k.as_str(), vec![k], base.ok.clone(), &[]);
        let arms = [near, null(Knob::RcuExpedited), null(Knob::Nokaslr)];
        let (s1, s2) = (
            screen(RuleVersion::V1, 3, &base, &arms),
            screen(RuleVersion::V2, 3, &base, &arms),
        );
        let p: f64 = s1.effects[0]
            .mann_whitney_p
            .as_deref()
            .unwrap()
            .parse()
            .unwrap();
        assert!(p < ALPHA && 3.0 * p >= ALPHA, "{p}");
        assert_eq!(s1.effects[0].verdict, KnobVerdict::Faster, "{s1:#?}");
        assert_eq!(s1.effects[0].holm_p, None);
        assert_eq!(s2.effects[0].verdict, KnobVerdict::Inconclusive, "{s2:#?}");
        assert!(s2.effects[0].holm_p.is_some());
        assert!(s2.winners.is_empty());
        // The same figures otherwise.
        assert_eq!(s1.effects[0].ci95_ns, s2.effects[0].ci95_ns);
    }

    #[test]
    fn the_rule_version_reads_absent_as_1_and_writes_1_as_absent() {
        let r1 = rule(RuleVersion::V1, 3, Figure::Total);
        let j = serde_json::to_value(&r1).unwrap();
        assert!(
            j.get("version").is_none() && j.get("multiplicity").is_none(),
            "{j}"
        );
        let back: Rule = serde_json::from_value(j).unwrap();
        assert_eq!(back.version, RuleVersion::V1);
        let j2 = serde_json::to_value(rule(RuleVersion::V2, 3, Figure::Total)).unwrap();
        assert_eq!(j2["version"], 2);
        let back: Rule = serde_json::from_value(j2.clone()).unwrap();
        assert_eq!(back, rule(RuleVersion::V2, 3, Figure::Total));
        let mut j3 = j2;
        j3["version"] = 3.into();
        let e = serde_json::from_value::<Rule>(j3).unwrap_err().to_string();
        assert!(e.contains("verdict rule 3"), "{e}");
    }

    #[test]
    fn injected_effects_are_recovered() {
        let mut g = Gen(42);
        let n = 30;
        let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let fast = arm(
            "rcu-expedited",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN * 0.95, 0.01),
            &[],
        );
        let slow = arm(
            "console",
            vec![Knob::Console],
            g.rows(n, MEDIAN * 1.05, 0.01),
            &[],
        );
        let null = arm("nokaslr", vec![Knob::Nokaslr], g.rows(n, MEDIAN, 0.01), &[]);
        let broken = arm(
            "no-smp",
            vec![Knob::NoSmp],
            g.rows(n - 3, MEDIAN * 0.5, 0.01),
            &[("deadline", 2), ("vmm_exit", 1)],
        );
        let arms = [fast, slow, null, broken];
        let s = screen(RuleVersion::V1, 9, &base, &arms);
        let v: Vec<KnobVerdict> = s.effects.iter().map(|e| e.verdict).collect();
        assert_eq!(
            v,
            [
                KnobVerdict::Faster,
                KnobVerdict::Slower,
                KnobVerdict::NoEffect,
                KnobVerdict::Breaks
            ],
            "{s:#?}"
        );
        // Δ near −5 %, inside its interval.
        let e = &s.effects[0];
        let ppm = e.delta_ppm.unwrap();
        assert!((-60_000..=-40_000).contains(&ppm), "{ppm}");
        let [lo, hi] = e.ci95_ns.unwrap();
        assert!(lo <= e.delta_p50_ns.unwrap() && e.delta_p50_ns.unwrap() <= hi);
        assert_eq!(
            s.effects[3].verdict_text(),
            "breaks strict-ready: deadline ×2, vmm_exit ×1"
        );
        // The broken knob is "faster" on its successes but ranks last and never wins.
        assert_eq!(
            s.ranking,
            [
                Knob::RcuExpedited,
                Knob::Nokaslr,
                Knob::Console,
                Knob::NoSmp
            ]
        );
        assert_eq!(s.winners, [Knob::RcuExpedited]);
        // The same inputs, the same figures.
        assert_eq!(s, screen(RuleVersion::V1, 9, &base, &arms));
        // Too few rows: inconclusive, whatever the interval.
        let few = arm("lpj", vec![Knob::Lpj], vec![1, 1, 1], &[]);
        assert_eq!(
            effect(RuleVersion::V1, &base, &few, vec![Knob::Lpj], 1).verdict,
            KnobVerdict::Inconclusive
        );
    }

    #[test]
    fn a_null_knob_is_rarely_significant_and_a_real_one_is_found() {
        // n sized by the rule for cv 2 % and a 1 % minimum effect.
        let n = rounds_for(20_000, MIN_EFFECT_PPM) as usize;
        assert_eq!(n, 66);
        let (mut significant, mut found) = (0, 0);
        for trial in 0..100u64 {
            let mut g = Gen(1000 + trial);
            let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.02), &[]);
            let null = arm("nokaslr", vec![Knob::Nokaslr], g.rows(n, MEDIAN, 0.02), &[]);
            let e = effect(RuleVersion::V1, &base, &null, vec![Knob::Nokaslr], trial);
            if matches!(e.verdict, KnobVerdict::Faster | KnobVerdict::Slower) {
                significant += 1;
            }
            let real = arm("lpj", vec![Knob::Lpj], g.rows(n, MEDIAN * 0.95, 0.02), &[]);
            if effect(RuleVersion::V1, &base, &real, vec![Knob::Lpj], trial).verdict
                == KnobVerdict::Faster
            {
                found += 1;
            }
        }
        assert!(
            significant <= 5,
            "{significant} of 100 null trials significant"
        );
        assert!(
            found >= 95,
            "a −5 % knob found faster in only {found} of 100"
        );
    }

    #[test]
    fn winners_drop_conflicts_and_leave_one_out_checks_each() {
        let mut g = Gen(7);
        let n = 30;
        let base = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let thp = arm(
            "backing-thp",
            vec![Knob::BackingThp],
            g.rows(n, MEDIAN * 0.93, 0.01),
            &[],
        );
        let huge = arm(
            "backing-hugetlb",
            vec![Knob::BackingHugetlb],
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let rcu = arm(
            "rcu-expedited",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN * 0.96, 0.01),
            &[],
        );
        let s = screen(RuleVersion::V1, 1, &base, &[rcu, thp, huge]);
        assert_eq!(
            s.ranking,
            [Knob::BackingHugetlb, Knob::BackingThp, Knob::RcuExpedited]
        );
        assert_eq!(s.winners, [Knob::BackingHugetlb, Knob::RcuExpedited]);
        assert_eq!(
            s.dropped,
            [Dropped {
                knob: Knob::BackingThp,
                conflicts_with: Knob::BackingHugetlb
            }]
        );
        assert_eq!(s.recommended, [Knob::RcuExpedited, Knob::BackingHugetlb]);
        assert_eq!(
            confirm_arms(&s.recommended)
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>(),
            [
                "baseline",
                "recommended",
                "recommended-minus-rcu-expedited",
                "recommended-minus-backing-hugetlb"
            ]
        );
        // In the combination hugetlb still helps, rcu-expedited no longer does.
        let b2 = arm("baseline", vec![], g.rows(n, MEDIAN, 0.01), &[]);
        let rec = arm(
            "recommended",
            s.recommended.clone(),
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let minus_rcu = arm(
            "recommended-minus-rcu-expedited",
            vec![Knob::BackingHugetlb],
            g.rows(n, MEDIAN * 0.90, 0.01),
            &[],
        );
        let minus_huge = arm(
            "recommended-minus-backing-hugetlb",
            vec![Knob::RcuExpedited],
            g.rows(n, MEDIAN, 0.01),
            &[],
        );
        let c = confirm(RuleVersion::V1, 1, 3, &b2, &rec, &[minus_rcu, minus_huge]);
        assert_eq!(c.final_ab.verdict, KnobVerdict::Faster);
        assert_eq!(c.final_ab.seed, 4);
        assert_eq!(c.leave_one_out[0].knobs, [Knob::RcuExpedited]);
        assert_eq!(c.leave_one_out[1].verdict, KnobVerdict::Faster);
        assert_eq!(c.not_confirmed, [Knob::RcuExpedited]);
        // One winner: its leave-one-out is the final A/B.
        let one = confirm(
            RuleVersion::V1,
            1,
            3,
            &b2,
            &arm("recommended", vec![Knob::Console], b2.ok.clone(), &[]),
            &[],
        );
        assert!(one.leave_one_out.is_empty());
        assert_eq!(one.not_confirmed, [Knob::Console]);
    }

    #[test]
    fn plans_and_paths() {
        let p = TunePlan {
            seed: 1,
            guest: TuneGuest::Probe,
            knobs: vec![Knob::Console, Knob::BackingThp],
            vcpus: 1,
            mem_bytes: 1 << 30,
            backing: Backing::Anon,
            rounds_screen: 0,
            rounds_confirm: 3,
            budget: None,
            noise: None,
            rule: RuleVersion::CURRENT,
            invocation: None,
            figure: Figure::Total,
            kernel_builds: Vec::new(),
            proposals: Vec::new(),
            unbuilt: Vec::new(),
        };
        let bad = tune_plan_problems(&p);
        assert!(bad.iter().any(|m| m.contains("catalogue order")), "{bad:?}");
        assert!(
            bad.iter().any(|m| m.contains("`console` does not apply")),
            "{bad:?}"
        );
        assert!(bad.iter().any(|m| m.contains("0 rounds")), "{bad:?}");
        assert!(is_valid_tune_path("screen/baseline/samples.csv"));
        assert!(is_valid_tune_path("tune.json"));
        assert!(!is_valid_tune_path("a/b/c/d"));
        assert!(!is_valid_tune_path("../x"));
        assert_eq!(pct(-52_345), "-5.23 %");
        assert_eq!(pct(10_000), "+1.00 %");
    }

    #[test]
    fn a_screen_too_small_to_name_a_winner_is_recognised() {
        use super::stats::{can_name_a_winner, least_rounds_for_a_winner, smallest_p};
        // n = 5 a side: the smallest p is about 0.012, so 19 knobs (α/19 ≈ 0.0026) cannot
        // win, 2 knobs (α/2 = 0.025) can.
        let p5 = smallest_p(5).unwrap();
        assert!(p5 > 0.05 / 19.0 && p5 < 0.025, "{p5}");
        assert!(!can_name_a_winner(5, 19));
        assert!(can_name_a_winner(5, 2));
        let n = least_rounds_for_a_winner(5, 19).unwrap();
        assert!(
            n > 5 && can_name_a_winner(n, 19) && !can_name_a_winner(n - 1, 19),
            "{n}"
        );
        assert_eq!(least_rounds_for_a_winner(5, 1), Some(5));
    }
}
