//! The bisect's extension rule holds its α over all looks, by seeded simulation through the
//! crate's own functions (`bisect::Looks`, `JudgeOptions::compare_options_at`,
//! `compare::compare_values`, `compare::outcome_of`): under the null (both arms of every
//! look drawn from one distribution), a step is called bad at some look in at most α of the
//! trials; with every look at the full α instead (no spending) it is not, in the worst case
//! the rule must cover (rows so spread that every look not rejecting is inconclusive, so
//! every look is taken). `--nocapture` prints every figure.
//!
//! The sample model is tune_power.rs's: log-normal headlines around a p50 of 100 ms, the
//! log-sd set for the coefficient of variation cv (σ² = ln(1 + cv²)).

mod common;

use common::Rng;
use truecold_proof::bisect::{JudgeOptions, Looks, StepOutcome};
use truecold_proof::compare::{compare_values, outcome_of, Outcome};

const P50_NS: f64 = 100e6;

fn rows(g: &mut Rng, n: u64, cv: f64) -> Vec<u64> {
    let sigma = (1.0 + cv * cv).ln().sqrt();
    (0..n)
        .map(|_| (P50_NS * (sigma * g.normal()).exp()).round() as u64)
        .collect()
}

/// One step under the null, looks taken as the rule takes them, each look fresh rows of both
/// arms judged at `alpha_at_look`; whether some look called it bad, and the looks taken.
fn null_step(
    g: &mut Rng,
    o: &JudgeOptions,
    looks: &Looks,
    alpha_at_look: f64,
    cv: f64,
) -> (bool, u32) {
    let mut look = 1;
    loop {
        let n = looks.size(look).unwrap();
        let (good, cand) = (rows(g, n, cv), rows(g, n, cv));
        let m = compare_values(
            "h",
            true,
            &good,
            &cand,
            &o.compare_options_at(alpha_at_look),
        );
        let outcome = match outcome_of([m.verdict]) {
            Outcome::Regression => StepOutcome::Regression,
            Outcome::NoRegression => StepOutcome::NoRegression,
            Outcome::Inconclusive => StepOutcome::Inconclusive,
        };
        if outcome == StepOutcome::Regression {
            return (true, look);
        }
        match looks.next(look, outcome) {
            Some(k) => look = k,
            None => return (false, look),
        }
    }
}

/// False "bad" steps in `trials`, and the mean looks taken.
/// `resamples`: the bootstrap's (it only tells inconclusive from no regression, never makes
/// a step bad; the worst case is inconclusive whatever it is, so it runs with fewer).
fn rate(
    seed: u64,
    trials: u64,
    n: u64,
    alpha: f64,
    cv: f64,
    spend: bool,
    resamples: usize,
) -> (u64, f64) {
    let looks = Looks::new(n, 4 * n);
    let mut o = JudgeOptions::with_min_samples(n as usize);
    o.alpha = alpha;
    o.resamples = resamples;
    let at = if spend { looks.alpha(alpha) } else { alpha };
    let mut g = Rng(seed);
    let (mut bad, mut taken) = (0, 0u64);
    for _ in 0..trials {
        let (b, k) = null_step(&mut g, &o, &looks, at, cv);
        bad += u64::from(b);
        taken += u64::from(k);
    }
    (bad, taken as f64 / trials as f64)
}

const TRIALS: u64 = 2000;

#[test]
fn over_all_looks_a_step_is_called_bad_in_at_most_alpha_of_null_trials() {
    // The worst case: cv 30 %, every look's interval wider than 10 % of the median, so a
    // look that does not reject is inconclusive and all three looks are taken. At α 0.05
    // the spent rule stays under α (its bound: Σ α/K = α; one-sided, about α/2), while the
    // full α at every look gives about 1 − (1 − α/2)³ ≈ 0.073 (over 0.05 by ~6 binomial
    // standard deviations at 2000 trials): the assertion separates the two.
    let (alpha, n) = (0.05, 7);
    let (spent, looks_spent) = rate(0x00b1_5ec7_0001, TRIALS, n, alpha, 0.30, true, 200);
    let (full, looks_full) = rate(0x00b1_5ec7_0001, TRIALS, n, alpha, 0.30, false, 200);
    let limit = (alpha * TRIALS as f64) as u64;
    println!(
        "worst case, α {alpha}, n {n}: spent α/3 → {spent}/{TRIALS} false bad (mean looks \
         {looks_spent:.2}); full α each look → {full}/{TRIALS} (mean looks {looks_full:.2}); \
         limit {limit}"
    );
    assert!(
        looks_spent > 2.9,
        "the worst case takes every look: {looks_spent}"
    );
    assert!(spent <= limit, "spent: {spent} > {limit}");
    assert!(
        full > limit,
        "without spending: {full} ≤ {limit}: the test cannot tell"
    );
    // A realistic spread (cv 2 %) at the default α and n, the bootstrap as recorded: most
    // steps end at their first look; still under α.
    let (alpha, trials) = (0.01, 1000);
    let (spent, looks) = rate(0x00b1_5ec7_0002, trials, 7, alpha, 0.02, true, 2000);
    println!("cv 2 %, α {alpha}, n 7: {spent}/{trials} false bad, mean looks {looks:.2}");
    assert!(spent <= (alpha * trials as f64) as u64, "{spent}");
}
