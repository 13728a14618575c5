//! The n an inconclusive comparison would need: `compare`'s inconclusive metrics sized by the
//! tune's rule ([`crate::tune::rounds_for_rule`]). Above both `compare` and `tune` (the tune's
//! statistics use `compare`'s test), below `verify`, which hands [`n_to_decide`] to the
//! comparison it makes from two directories.

use crate::compare::CompareOptions;

/// About how many values a side would decide an inconclusive metric: the tune's sizing rule
/// ([`crate::tune::rounds_for_rule`], the current rule: the least n at which the
/// Mann–Whitney test finds the effect with the tune's power) at the larger of the observed
/// |Δmedian| and `--threshold-pct` (below the threshold, the n that would tell a change of the
/// threshold from none), the larger coefficient of variation of the two sides, and a level
/// at most `--alpha` (the tune's α over as many tests as make it so); at least
/// `--min-samples`. `None` when a side has fewer than two values or no spread to size by.
pub fn n_to_decide(
    a: &[u64],
    b: &[u64],
    delta_pct: Option<f64>,
    o: &CompareOptions,
) -> Option<u64> {
    use crate::tune::{cv_ppm, rounds_for_rule, RuleVersion, ALPHA};
    let cv = cv_ppm(a)?.max(cv_ppm(b)?);
    let effect_pct = delta_pct.unwrap_or(0.0).abs().max(o.threshold_pct);
    if !effect_pct.is_finite() || effect_pct <= 0.0 {
        return None;
    }
    let effect_ppm = (effect_pct * 10_000.0).round() as u64;
    // The tune's test is at ALPHA / tests: as many tests as bring it to --alpha or below.
    let tests = (ALPHA / o.alpha).ceil().max(1.0) as u64;
    let n = rounds_for_rule(RuleVersion::CURRENT, cv, effect_ppm, tests);
    (n != u64::MAX).then(|| n.max(o.min_samples as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noisier_or_smaller_effect_needs_more_values() {
        let o = CompareOptions::default();
        // A CV about 5 % around 100 ms.
        let noisy: Vec<u64> = (0..40).map(|i| 95_000_000 + (i % 10) * 1_100_000).collect();
        let calm: Vec<u64> = (0..40).map(|i| 99_500_000 + (i % 10) * 110_000).collect();
        let n_noisy = n_to_decide(&noisy, &noisy, Some(3.0), &o).unwrap();
        let n_calm = n_to_decide(&calm, &calm, Some(3.0), &o).unwrap();
        assert!(n_noisy > n_calm, "{n_noisy} vs {n_calm}");
        let n_small = n_to_decide(&noisy, &noisy, Some(0.5), &o).unwrap();
        let n_big = n_to_decide(&noisy, &noisy, Some(10.0), &o).unwrap();
        // Below the threshold it sizes at the threshold (2 %): more than at 10 %.
        assert!(n_small > n_big, "{n_small} vs {n_big}");
        assert_eq!(n_small, n_to_decide(&noisy, &noisy, Some(2.0), &o).unwrap());
        assert!(n_big >= o.min_samples as u64);
        assert_eq!(n_to_decide(&[1], &noisy, Some(3.0), &o), None);
    }
}
