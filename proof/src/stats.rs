//! The one percentile definition, used by the bench, the verifier and `compare`: the rank
//! ([`nearest_rank_index`]) and the value at it ([`percentile_sorted`]). Nothing else
//! computes a rank or sorts values for a percentile (`proof/tests/one_percentile.rs` holds
//! every other file of this crate and of the bench to that).
//!
//! **Nearest rank.** For n ≥ 1 values sorted ascending, the p-th percentile is the value at
//! 1-based rank `ceil(p·n/100)` (so p50 of `[1,2,3,4]` is 2 and p100 is the maximum).
//! The mean is `floor(sum/n)`. Everything is integer nanoseconds, so a recomputation is
//! bit-for-bit equal to what was stored.

use serde::{Deserialize, Serialize};

/// Summary statistics of one metric, integer nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub n: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: u64,
}

/// The one rank rule: the 0-based index, among `n` ascending values, of the nearest-rank
/// `num/den` quantile (e.g. 99/100): rank `ceil(num·n/den)`, 1-based, clamped to `[1, n]`,
/// exact in integers. `None` for no values or a zero `den`. Every percentile
/// ([`percentile_sorted`], [`percentile_of`]) and every quantile of a resampling takes this
/// index; so does the bench's histogram percentile (`truecold run`'s progress line).
pub fn nearest_rank_index(n: usize, num: u64, den: u64) -> Option<usize> {
    if n == 0 || den == 0 {
        return None;
    }
    let n = n as u128;
    let rank = (u128::from(num) * n).div_ceil(u128::from(den)).clamp(1, n);
    usize::try_from(rank - 1).ok()
}

/// Nearest-rank percentile of an ascending slice: the value at [`nearest_rank_index`].
/// `None` for an empty slice. `num/den` is the quantile (e.g. 99/100).
pub fn percentile_sorted<T: Copy>(sorted: &[T], num: u64, den: u64) -> Option<T> {
    sorted
        .get(nearest_rank_index(sorted.len(), num, den)?)
        .copied()
}

/// [`percentile_sorted`] of `values` in any order, found by selection (`values` is
/// reordered, not sorted): what a resampling takes of each resample.
pub fn percentile_of<T: Ord + Copy>(values: &mut [T], num: u64, den: u64) -> Option<T> {
    let i = nearest_rank_index(values.len(), num, den)?;
    Some(*values.select_nth_unstable(i).1)
}

/// `values` ascending: the order [`percentile_sorted`] reads.
pub fn ascending<T: Ord + Copy>(values: &[T]) -> Vec<T> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v
}

/// `floor(sum/n)`, exact (u128 accumulator).
pub fn mean_floor(values: &[u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let sum: u128 = values.iter().map(|&v| u128::from(v)).sum();
    Some((sum / values.len() as u128) as u64)
}

impl Summary {
    /// Summarises `values` (any order). `None` when empty.
    pub fn of(values: &[u64]) -> Option<Summary> {
        Summary::of_sorted(&ascending(values))
    }

    /// Summarises ascending `sorted`. `None` when empty.
    pub fn of_sorted(sorted: &[u64]) -> Option<Summary> {
        let p = |q| percentile_sorted(sorted, q, 100);
        Some(Summary {
            n: sorted.len() as u64,
            min: *sorted.first()?,
            p50: p(50)?,
            p90: p(90)?,
            p95: p(95)?,
            p99: p(99)?,
            max: *sorted.last()?,
            mean: mean_floor(sorted)?,
        })
    }
}

/// With failures scored at the deadline: each success's value, and `deadline_ns` for
/// each failure.
pub fn with_failures(successes: &[u64], failures: u64, deadline_ns: u64) -> Vec<u64> {
    let mut v = successes.to_vec();
    v.extend(std::iter::repeat_n(deadline_ns, failures as usize));
    v
}

/// SplitMix64: a tiny, well-known, seedable generator (deterministic across platforms).
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_by_hand() {
        let v = [10, 20, 30, 40];
        // ceil(0.5*4)=2 → 20; ceil(0.9*4)=4 → 40; ceil(0.01*4)=1 → 10.
        assert_eq!(percentile_sorted(&v, 50, 100), Some(20));
        assert_eq!(percentile_sorted(&v, 90, 100), Some(40));
        assert_eq!(percentile_sorted(&v, 1, 100), Some(10));
        assert_eq!(percentile_sorted(&v, 0, 100), Some(10));
        assert_eq!(percentile_sorted(&v, 100, 100), Some(40));
        assert_eq!(percentile_sorted::<u64>(&[], 50, 100), None);
    }

    #[test]
    fn one_rank_rule_for_every_percentile() {
        assert_eq!(nearest_rank_index(0, 50, 100), None);
        assert_eq!(nearest_rank_index(4, 50, 0), None);
        // ceil(0.5·4) = 2 → index 1; ceil(0.025·100) = 3 → 2; ceil(0.975·100) = 98 → 97.
        assert_eq!(nearest_rank_index(4, 50, 100), Some(1));
        assert_eq!(nearest_rank_index(100, 25, 1000), Some(2));
        assert_eq!(nearest_rank_index(100, 975, 1000), Some(97));
        // Clamped to [1, n]: p0 is the minimum, anything past p100 the maximum.
        assert_eq!(nearest_rank_index(7, 0, 100), Some(0));
        assert_eq!(nearest_rank_index(7, 250, 100), Some(6));
        // Selection and sorting read the same value.
        let v = [55u64, 3, 34, 8, 21, 5, 13];
        for q in 0..=100 {
            let mut w = v;
            assert_eq!(
                percentile_of(&mut w, q, 100),
                percentile_sorted(&ascending(&v), q, 100),
                "p{q}"
            );
        }
        assert_eq!(percentile_sorted(&ascending(&[3i64, -2, 7]), 1, 2), Some(3));
    }

    #[test]
    fn summary_of_one_to_hundred() {
        let v: Vec<u64> = (1..=100).rev().collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!(
            s,
            Summary {
                n: 100,
                min: 1,
                p50: 50,
                p90: 90,
                p95: 95,
                p99: 99,
                max: 100,
                // 5050 / 100 = 50.5 → 50
                mean: 50,
            }
        );
    }

    #[test]
    fn summary_of_seven() {
        // sorted: 3 5 8 13 21 34 55; p50 rank ceil(3.5)=4 → 13; p90 ceil(6.3)=7 → 55;
        // p95 ceil(6.65)=7; p99 ceil(6.93)=7; mean 139/7 = 19.857 → 19.
        let s = Summary::of(&[55, 3, 34, 8, 21, 5, 13]).unwrap();
        assert_eq!(
            (s.n, s.min, s.p50, s.p90, s.p95, s.p99, s.max),
            (7, 3, 13, 55, 55, 55, 55)
        );
        assert_eq!(s.mean, 19);
    }

    #[test]
    fn summary_single_and_empty() {
        let s = Summary::of(&[42]).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max, s.mean), (42, 42, 42, 42, 42));
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn mean_does_not_overflow() {
        assert_eq!(
            mean_floor(&[u64::MAX, u64::MAX, 1]),
            Some(((2 * u64::MAX as u128 + 1) / 3) as u64)
        );
    }

    #[test]
    fn failures_scored_at_deadline() {
        // successes 10, 20; two failures at deadline 100 → 10 20 100 100.
        let v = with_failures(&[20, 10], 2, 100);
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.n, s.p50, s.p90, s.max, s.mean), (4, 20, 100, 100, 57));
        // 9 successes of 1 and one failure: p90 rank 9 → 1; p95 rank ceil(9.5)=10 → deadline.
        let v = with_failures(&[1; 9], 1, 1000);
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.p90, s.p95), (1, 1000));
    }
}
