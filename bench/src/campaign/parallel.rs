//! The nested harness's parallel clock for a campaign's rows (docs/virtual-clock.md, "The
//! parallel clock"): found once per campaign ([`clock_for`]), read after each success
//! ([`read`]). Everything else stays on the total clock; the reading goes into the row's
//! `reports.jsonl` line and its figure into `parallel_latency_ns`.

use truecold_nested::parallel::ParallelClock;
use truecold_proof::schema::{HostKind, Sample};
use truecold_proto::parallel::Reading;

/// The L0 names the parallel clock in its version line, but L1 reads no answer from it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the L0 QEMU `{l0_qemu}` keeps the parallel clock, but CPUID leaf {leaf:#x} does not answer \
     in L1: the harness's L0 and its record disagree (rebuild it with scripts/deps.sh)",
    leaf = truecold_nested::parallel::LEAF
)]
pub struct ClockMissing {
    pub l0_qemu: String,
}

/// The parallel clock of this campaign's host: `Some` inside the nested harness's L1 when its
/// L0 keeps one (its version line says so: [`truecold_proto::parallel::l0_has_parallel_clock`]),
/// `None` everywhere else. An L0 that says so but does not answer is an error, never a bundle
/// silently without the figure.
pub fn clock_for(kind: HostKind) -> Result<Option<ParallelClock>, ClockMissing> {
    if kind != HostKind::NestedEmulated {
        return Ok(None);
    }
    let Some(l0_qemu) = crate::checks::environment::l0_qemu() else {
        return Ok(None);
    };
    if !truecold_proto::parallel::l0_has_parallel_clock(&l0_qemu) {
        return Ok(None);
    }
    ParallelClock::detect()
        .map(Some)
        .ok_or(ClockMissing { l0_qemu })
}

/// A success's reading (from its latency origin to its strict-ready), or why it could not be
/// read; `(None, None)` for a row without a latency.
pub fn read(clock: &ParallelClock, s: &Sample) -> (Option<Reading>, Option<String>) {
    let (Some(ready), Some(_)) = (s.ready_ns, s.latency_ns) else {
        return (None, None);
    };
    if !s.ok {
        return (None, None);
    }
    let origin = s.intended_request_ns.unwrap_or(s.actual_request_ns);
    match (clock.saved_ns(origin), clock.saved_ns(ready)) {
        (Ok(saved_origin_ns), Ok(saved_ready_ns)) => (
            Some(Reading {
                offset_ns: clock.offset_ns,
                saved_origin_ns,
                saved_ready_ns,
            }),
            None,
        ),
        (Err(e), _) | (_, Err(e)) => (None, Some(e.to_string())),
    }
}

/// Reads `s`'s parallel clock (when there is one) and sets its `parallel_latency_ns`; the
/// reading or the reason goes into the row's evidence.
pub fn apply(clock: Option<&ParallelClock>, s: &mut Sample) -> (Option<Reading>, Option<String>) {
    let Some(c) = clock else {
        return (None, None);
    };
    let (reading, missing) = read(c, s);
    s.parallel_latency_ns = reading.and_then(|r| s.latency_ns.map(|l| r.latency(l)));
    (reading, missing)
}
