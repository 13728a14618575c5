//! The extension rule of a bisect step (schema 2): how an inconclusive step grows and how
//! its α is spent across the looks. One definition, used by the bench to decide and by the
//! verifier to recompute.
//!
//! A step plans the looks `n, 2n, 4n, …` up to `max_n`: K looks ([`Looks::count`]). Every
//! look is its own interleaved A/B (fresh launches of both arms, never pooled with an
//! earlier look's), judged by `compare`'s rule at the nominal level α/K ([`Looks::alpha`]);
//! the next look is taken only when a look is inconclusive ([`Looks::next`]).
//!
//! **Why α/K at every look (Bonferroni over the looks, the constant — Pocock-shaped —
//! spending).** A false "bad" over the whole step needs some look to reject, so its
//! probability is at most Σ α/K = α whatever the dependence between the looks (the union
//! bound); the looks hold disjoint launches, so the bound is near exact
//! (1 − (1 − α/K)^K). Pocock's and O'Brien–Fleming's constants assume the looks are
//! cumulative sums of one sample; these looks are not, and the union bound needs no such
//! assumption. Constant rather than O'Brien–Fleming-shaped: most steps end at their first
//! look, and an O'Brien–Fleming first look (a small fraction of α) at a few launches a side
//! could never reject; spending α/K there keeps the first look able to call a step bad from
//! [`Looks::smallest_n`] launches a side.

use super::model::{BisectFile, StepOutcome};
use crate::compare::mann_whitney_p;

/// The looks of a step: `n` launches a side first, doubled while inconclusive, at most
/// `max_n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Looks {
    pub n: u64,
    pub max_n: u64,
}

impl Looks {
    pub fn new(n: u64, max_n: u64) -> Self {
        Looks { n, max_n }
    }

    /// K: how many of the sizes `n, 2n, 4n, …` are at most `max_n` (at least 1).
    pub fn count(&self) -> u32 {
        let mut k = 1;
        let mut size = self.n.max(1);
        while let Some(next) = size.checked_mul(2).filter(|&s| s <= self.max_n) {
            size = next;
            k += 1;
        }
        k
    }

    /// Launches a side at look `look` (1-based): `n·2^(look−1)`; `None` beyond the last.
    pub fn size(&self, look: u32) -> Option<u64> {
        if look == 0 || look > self.count() {
            return None;
        }
        self.n.checked_mul(1u64 << (look - 1))
    }

    /// The nominal level of every look: α/K.
    pub fn alpha(&self, alpha: f64) -> f64 {
        alpha / f64::from(self.count())
    }

    /// The look after `look` when it ended `outcome`: the next one only when it was
    /// inconclusive and one is left.
    pub fn next(&self, look: u32, outcome: StepOutcome) -> Option<u32> {
        (outcome == StepOutcome::Inconclusive && look < self.count()).then_some(look + 1)
    }

    /// The fewest launches a side whose first look can reach p < α/K at all (every step
    /// value above every good one: Mann–Whitney's smallest p); `None` if none up to 10 000.
    pub fn smallest_n(&self, alpha: f64) -> Option<u64> {
        let a = self.alpha(alpha);
        (2..=10_000u64).find(|&m| {
            let good: Vec<u64> = (0..m).collect();
            let step: Vec<u64> = (m..2 * m).collect();
            mann_whitney_p(&good, &step).is_some_and(|p| p < a)
        })
    }

    /// The rule in words (README, docs).
    pub fn describe(&self, alpha: f64) -> String {
        let sizes: Vec<String> = (1..=self.count())
            .filter_map(|k| self.size(k))
            .map(|s| s.to_string())
            .collect();
        format!(
            "every look an interleaved A/B of the good commit's kernel (arm `good`) and the \
             step's (arm `candidate`), fresh launches each look; up to {} look(s) of {} \
             launches a side, the next only when a look is inconclusive; α {alpha} spent \
             evenly across the looks (Bonferroni, the constant spending): each look at \
             p < {}, so a false bad over all looks has probability at most {alpha} (the \
             union bound: it needs no assumption on how the looks depend on each other, which \
             Pocock's and O'Brien–Fleming's constants make for cumulative looks; constant, not \
             O'Brien–Fleming-shaped, so the first look, where most steps end, can call a step \
             bad)",
            self.count(),
            sizes.join(", "),
            crate::fmt::p_text(self.alpha(alpha))
        )
    }
}

impl BisectFile {
    /// The looks every step of the record plans (schema 2).
    pub fn looks(&self) -> Looks {
        Looks::new(self.n, self.max_n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_by_hand() {
        let l = Looks::new(6, 24);
        assert_eq!(l.count(), 3);
        assert_eq!(
            (1..=4).map(|k| l.size(k)).collect::<Vec<_>>(),
            [Some(6), Some(12), Some(24), None]
        );
        assert_eq!(l.size(0), None);
        assert!((l.alpha(0.01) - 0.01 / 3.0).abs() < 1e-15);
        assert_eq!(Looks::new(6, 23).count(), 2);
        assert_eq!(Looks::new(6, 6).count(), 1);
        assert_eq!(Looks::new(6, 6).next(1, StepOutcome::Inconclusive), None);
        assert_eq!(l.next(1, StepOutcome::Inconclusive), Some(2));
        assert_eq!(l.next(2, StepOutcome::Inconclusive), Some(3));
        assert_eq!(l.next(3, StepOutcome::Inconclusive), None);
        assert_eq!(l.next(1, StepOutcome::Regression), None);
        assert_eq!(l.next(1, StepOutcome::NoRegression), None);
        assert_eq!(l.next(1, StepOutcome::ContractBroken), None);
        assert_eq!(Looks::new(3, u64::MAX).count(), 63);
    }

    #[test]
    fn the_smallest_first_look_that_can_reject() {
        // 6 against 6, all apart: p 5.07e-3 (the committed schema-1 bisect's figure), under
        // 0.01 but not under 0.01/3; 7 against 7: p 2.16e-3.
        assert_eq!(Looks::new(6, 6).smallest_n(0.01), Some(6));
        assert_eq!(Looks::new(6, 24).smallest_n(0.01), Some(7));
        assert_eq!(Looks::new(7, 28).smallest_n(0.01), Some(7));
    }
}
