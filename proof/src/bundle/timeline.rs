//! The rows along time: the wall time they span, the order, overlap and gaps of a
//! sequential campaign, and the fail-fast rule.
//!
//! # Timing rules
//!
//! Every row's *last stamp* is its request plus every present host stage except `queue`,
//! plus its post stages (`workload`, `teardown`): the stages tile the stamps, each ending at
//! its own stamp. A success with both post stages ends at the VMM reaped; a failure's last
//! stamp is the last one it reached.
//! - All modes: the rows span (earliest intended or actual request → latest last stamp) at
//!   most `environment.harness.wall_ns` ([`Check::WallTime`]).
//! - Sequential mode, each consecutive pair `i`, `i+1`: the request of `i+1` is not before
//!   the request of `i` ([`Check::SequentialOrder`]) and not before the last stamp of `i`
//!   ([`Check::SequentialOverlap`]). And when `i` is a success with both post stages, an
//!   idle gap from its last stamp to the request of `i+1` as long as the *shortest launch* or
//!   10 ms, whichever is longer ([`gap_threshold`]: the shortest, over the bundle's successes
//!   with both post stages, of request → last stamp), is a **warning**
//!   ([`Check::SequentialGap`], [`Verdict::warnings`]), not a reason. A row dropped from a
//!   sequential campaign and the rest renumbered leaves a gap of its whole launch (request to
//!   reaped), which is at least the shortest launch; the bench's own bookkeeping between
//!   launches takes far less on a quiet host (in a 1,000-launch probe bundle: under 1 ms,
//!   against a shortest launch of ~170 ms) — but a busy host deschedules the harness for as
//!   long: 13.7 ms against a shortest launch of 21.9 ms, 48.7 ms, 114 ms, and 33.1 ms against
//!   32.2 ms in CI. Nothing in a bundle tells the two apart (a forger
//!   who renumbers rows can shift their stamps as easily), so the verdict says what it saw
//!   and leaves the weighing to the reader, beside the bundle's own `host busy` warnings.
//!   Not looked for when `--drop-caches` ran between
//!   launches (`environment.harness.page_cache_dropped`), nor in one arm of an interleaved
//!   multi-arm directory (`contract.interleaved`: an engines campaign or a tune phase; the
//!   other arms' launches sit in its gaps, and the directory's verifier judges the gaps along
//!   its order). A gap after a failure is not judged: a failure's end (the kill or exit) is
//!   not stamped.

use crate::names::RESULT_FILE;
use crate::schema::{Mode, ResultJson, Sample, Stage, StageKind, StopRule};
use crate::verdict::{Check, Verdict};

/// The smallest idle gap [`Check::SequentialGap`] reports.
pub(crate) const GAP_FLOOR_NS: u64 = 10_000_000;

/// The one gap rule of sequential rows ([`Check::SequentialGap`], and [`Check::ArmGap`] along
/// the arms' order in [`crate::arms`]): an idle gap after a fully stamped launch is reported
/// (a warning: a dropped row's trace, or a descheduled harness's) when it lasts at least the
/// *shortest launch* (request → last stamp, over `launches`) or [`GAP_FLOOR_NS`], whichever
/// is longer; `None` when no launch is fully stamped.
///
/// A dropped row leaves a gap of its whole launch plus the harness's bookkeeping on both
/// sides, so at least the shortest launch unless the dropped row was itself the shortest by
/// more than that bookkeeping. Half the shortest launch would be too tight: a 2-core host
/// running nine reliability tests at once descheduled the harness for 13.7 ms between two
/// probe launches whose shortest took 21.9 ms (an honest bundle), and a CI host stalled it
/// 33.1 ms against a shortest launch of 32.2 ms; so the gap is a warning, never a reason.
pub(crate) fn gap_threshold(launches: impl Iterator<Item = u64>) -> Option<u64> {
    launches.min().map(|m| m.max(GAP_FLOOR_NS))
}

/// The last host-clock stamp of a row (see the module doc), `None` when it overflows.
pub(crate) fn last_stamp(s: &Sample) -> Option<u64> {
    Stage::ALL
        .iter()
        .filter(|st| *st != &Stage::Queue && st.kind() != StageKind::Guest)
        .filter_map(|st| s.stages.get(*st))
        .try_fold(s.actual_request_ns, |t, d| t.checked_add(d))
}

/// Whether a row's end (the VMM reaped) is stamped: a success with both post stages.
pub(crate) fn fully_stamped(s: &Sample) -> bool {
    s.ok && s.stages.get(Stage::Workload).is_some() && s.stages.get(Stage::Teardown).is_some()
}

/// The timing rules of the module doc: wall time, and sequential order, overlap and gaps.
pub(super) fn check_timeline(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let wall = r.environment.harness.wall_ns;
    let first = samples
        .iter()
        .map(|s| {
            s.intended_request_ns
                .map_or(s.actual_request_ns, |t| t.min(s.actual_request_ns))
        })
        .min();
    let last = samples
        .iter()
        .map(|s| last_stamp(s).unwrap_or(u64::MAX))
        .max();
    if let (Some(a), Some(b)) = (first, last) {
        let span = b.saturating_sub(a);
        if span > wall {
            v.add(
                Check::WallTime,
                format!(
                    "the rows span {span} ns (first request → last stamp), more than the \
                     harness's wall time of {wall} ns"
                ),
            );
        }
    }
    if !matches!(r.contract.mode, Mode::Sequential { .. }) {
        return;
    }
    let threshold = gap_threshold(
        samples
            .iter()
            .filter(|s| fully_stamped(s))
            .filter_map(|s| last_stamp(s).map(|e| e - s.actual_request_ns)),
    );
    // `--drop-caches` syncs and drops the page cache between launches, on purpose. An
    // interleaved bundle is one arm of a multi-arm directory: the other arms' launches fill
    // the gaps between its rows, and the directory's verifier judges the gaps along its
    // order instead ([`crate::arms`]).
    let drops = r.environment.harness.page_cache_dropped.is_some() || r.contract.interleaved;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let end = last_stamp(a).unwrap_or(u64::MAX);
        if b.actual_request_ns < a.actual_request_ns {
            v.add(
                Check::SequentialOrder,
                format!(
                    "sample {} was requested at {} ns, before sample {} ({} ns): a sequential \
                     campaign runs in row order",
                    b.index, b.actual_request_ns, a.index, a.actual_request_ns
                ),
            );
        } else if b.actual_request_ns < end {
            v.add(
                Check::SequentialOverlap,
                format!(
                    "sample {} was requested at {} ns, before sample {} ended ({end} ns): a \
                     sequential campaign runs one launch at a time",
                    b.index, b.actual_request_ns, a.index
                ),
            );
        } else if let Some(m) = threshold.filter(|_| fully_stamped(a) && !drops) {
            let gap = b.actual_request_ns - end;
            if gap >= m {
                v.add(
                    Check::SequentialGap,
                    format!(
                        "{gap} ns pass between the end of sample {} and the request of sample \
                         {}, at least the shortest launch or 10 ms ({m} ns): a dropped row \
                         leaves such a gap, and so does a harness descheduled on a busy host",
                        a.index, b.index
                    ),
                );
            }
        }
    }
}

/// The fail-fast rule ([`StopRule`], [`Check::Stopped`]): `contract.stop_after` only from
/// schema 10, only in a sequential, non-interleaved campaign, and at least 1; with it, the
/// rule re-applied to the rows in order must stop exactly where the rows end when
/// `contract.stopped` says it did (naming that kind, the campaign `incomplete`, fewer rows
/// than planned), and nowhere when it says not (but at the last planned row: nothing was
/// left to stop). `contract.stopped` without `stop_after` is a reason too.
pub(super) fn check_stop_rule(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let c = &r.contract;
    let Some(after) = c.stop_after else {
        if c.stopped.is_some() {
            v.add_file(
                Check::Stopped,
                RESULT_FILE,
                "`contract.stopped` without `contract.stop_after`: no rule to have stopped it",
            );
        }
        return;
    };
    let planned = match c.mode {
        Mode::Sequential { count } if !c.interleaved && r.schema_version >= 10 => count,
        _ => {
            v.add_file(
                Check::Stopped,
                RESULT_FILE,
                "`contract.stop_after` in a bundle the fail-fast rule does not run in (it runs \
                 in sequential, non-interleaved campaigns of schema 10 on)",
            );
            return;
        }
    };
    if after == 0 {
        v.add_file(
            Check::Stopped,
            RESULT_FILE,
            "`contract.stop_after` is 0: the rule stops after at least one failure",
        );
        return;
    }
    let rule = StopRule { after };
    let first = rule.first_stop(samples.iter().map(|s| s.error_kind.as_str()));
    let rows = samples.len() as u64;
    let last = samples.len().checked_sub(1);
    match (&c.stopped, first) {
        (None, None) => {}
        (None, Some((i, _))) if Some(i) == last && rows == planned => {}
        (None, Some((i, kind))) => v.add(
            Check::Stopped,
            format!(
                "rows {}..={} are {after} consecutive `{kind}` failures, so the campaign \
                 should have stopped after row {} (`contract.stop_after` {after}), but it \
                 has {rows} rows and does not say it stopped",
                (i as u64 + 1).saturating_sub(after),
                i,
                i
            ),
        ),
        (Some(said), Some((i, kind))) if Some(i) == last && *said == kind => {
            if !c.incomplete || rows >= planned {
                v.add(
                    Check::Stopped,
                    format!(
                        "the campaign says it stopped, but it is {} with {rows} of {planned} \
                         rows: a stopped campaign is incomplete, with fewer rows than planned",
                        if c.incomplete {
                            "incomplete"
                        } else {
                            "complete"
                        }
                    ),
                );
            }
        }
        (Some(said), found) => v.add(
            Check::Stopped,
            format!(
                "the campaign says it stopped after {after} consecutive `{said}` failures, but \
                 by its rows the rule {}",
                match found {
                    None => "never fires".to_string(),
                    Some((i, kind)) => format!("fires after row {i} (`{kind}`), of {rows} rows"),
                }
            ),
        ),
    }
}
