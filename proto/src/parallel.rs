//! The nested harness's parallel clock: the one definition of a parallel duration, of which
//! L0 builds keep the clock, and of the reading a row's evidence carries
//! (docs/virtual-clock.md, "The parallel clock").
//!
//! The harness's total clock (L1's CLOCK_MONOTONIC, every stamp of a nested bundle) charges
//! each emulated instruction 1 ns, whichever L1 CPU runs it. The L0 also keeps what the
//! parallel clock saves against it, D(t) (an instruction run while k L1 CPUs are running
//! costs 1/k ns there), and the bench in L1 reads D at a row's latency origin and at its
//! strict-ready ([`Reading`]). The row's parallel latency is [`duration`] of the two.

use serde::{Deserialize, Serialize};

/// What the first line of an L0 QEMU's `--version` names its build with: `(truecold-N: …)`.
pub const L0_BUILD_PREFIX: &str = "(truecold-";
/// The first L0 build that keeps the parallel clock.
pub const SINCE_L0_BUILD: u32 = 2;

/// The build number `N` of an L0 version line `QEMU emulator version … (truecold-N: …)`.
pub fn l0_build(version_line: &str) -> Option<u32> {
    let rest = &version_line[version_line.find(L0_BUILD_PREFIX)? + L0_BUILD_PREFIX.len()..];
    let digits = rest.split(':').next()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Whether the L0 QEMU of this version line keeps the parallel clock, so that every
/// successful row of a bundle it made carries a parallel latency (or says why not).
pub fn l0_has_parallel_clock(version_line: &str) -> bool {
    l0_build(version_line).is_some_and(|n| n >= SINCE_L0_BUILD)
}

/// `total − (d_end − d_start)`: a duration of `total_ns` on the total clock whose ends had
/// saved `d_start` and `d_end` ns, on the parallel clock. D never decreases and grows by at
/// most the total time between two readings, so the result lies in `0..=total_ns`; readings
/// that break that (a bad record, which the verifier reports) saturate.
pub fn duration(total_ns: u64, d_start: u64, d_end: u64) -> u64 {
    total_ns.saturating_sub(d_end.saturating_sub(d_start))
}

/// The parallel clock read for one row, in its `reports.jsonl` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// L1's TSC − CLOCK_MONOTONIC (ns) the stamps were mapped with.
    pub offset_ns: i64,
    /// D at the row's latency origin (ns).
    pub saved_origin_ns: u64,
    /// D at its strict-ready (ns).
    pub saved_ready_ns: u64,
}

impl Reading {
    /// The row's parallel latency from its total latency.
    pub fn latency(&self, total_ns: u64) -> u64 {
        duration(total_ns, self.saved_origin_ns, self.saved_ready_ns)
    }

    /// Why the reading cannot belong to a latency of `total_ns` on an L1 of `cpus` CPUs, if
    /// it cannot: D decreasing, or growing faster than `(1 − 1/cpus)` of the total time (no
    /// instruction can save more than that), each with 1 ns for the floors of the readings.
    pub fn problem(&self, total_ns: u64, cpus: u32) -> Option<String> {
        let (a, b) = (self.saved_origin_ns, self.saved_ready_ns);
        if b < a {
            return Some(format!("the parallel clock's savings went back: {a} ns at the origin, {b} ns at strict-ready"));
        }
        let cpus = u128::from(cpus.max(1));
        let saved = u128::from(b - a);
        let most = u128::from(total_ns) * (cpus - 1) / cpus + 1;
        (saved > most).then(|| {
            format!(
                "the parallel clock saved {saved} ns of a {total_ns} ns latency: more than the \
                 {most} ns {cpus} CPUs can save"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_is_read_from_the_version_line() {
        let v = |b: &str| format!("QEMU emulator version 10.0.2 ({b}: Debian 1:10.0.2 source, …)");
        assert_eq!(l0_build(&v("truecold-1")), Some(1));
        assert_eq!(l0_build(&v("truecold-2")), Some(2));
        assert_eq!(l0_build(&v("truecold-12")), Some(12));
        assert_eq!(
            l0_build("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)"),
            None
        );
        assert_eq!(l0_build(&v("truecold-")), None);
        assert_eq!(l0_build(&v("truecold-2x")), None);
        assert!(!l0_has_parallel_clock(&v("truecold-1")));
        assert!(l0_has_parallel_clock(&v("truecold-2")));
        assert!(l0_has_parallel_clock(&v("truecold-3")));
        assert!(!l0_has_parallel_clock(""));
    }

    #[test]
    fn a_parallel_duration_subtracts_what_was_saved() {
        assert_eq!(duration(1_000, 100, 100), 1_000);
        assert_eq!(duration(1_000, 100, 600), 500);
        assert_eq!(duration(1_000, 0, 1_000), 0);
        assert_eq!(duration(1_000, 0, 5_000), 0);
        assert_eq!(duration(1_000, 600, 100), 1_000);
    }

    #[test]
    fn readings_that_no_clock_can_give_are_named() {
        let r = |a, b| Reading {
            offset_ns: 0,
            saved_origin_ns: a,
            saved_ready_ns: b,
        };
        // Two CPUs: at most half of the total (+1 ns) is saved.
        assert_eq!(r(100, 600).problem(1_000, 2), None);
        assert_eq!(r(100, 601).problem(1_000, 2), None);
        assert!(r(100, 602).problem(1_000, 2).is_some());
        assert!(r(600, 100).problem(1_000, 2).is_some());
        // One CPU saves nothing but the floors' 1 ns.
        assert_eq!(r(5, 6).problem(1_000, 1), None);
        assert!(r(5, 7).problem(1_000, 1).is_some());
        assert_eq!(r(100, 600).latency(1_000), 500);
    }
}
