//! The representative launch on the one timeline: its host stages, the guest's phases on
//! the host clock, the initcalls, and the reconciliation with the measured rows (see
//! [`crate::attribution`]'s module doc).

use std::collections::BTreeMap;

use truecold_proto::measure::{Stage, StageKind};
use truecold_proto::report::{Counters, ReportCore};

use super::model::*;
use super::rip::*;

use crate::schema::Sample;
use crate::stats::{ascending, percentile_sorted};
use crate::summary::success_latencies;

fn ppm_delta(a: u64, p50: u64) -> u64 {
    if p50 == 0 {
        return u64::MAX;
    }
    let d = u128::from(a.abs_diff(p50)) * 1_000_000 / u128::from(p50);
    u64::try_from(d).unwrap_or(u64::MAX)
}

/// From the attribution launches and the measured rows, the rows of the attribution.
pub fn attribute(
    lines: &[AttributionLine],
    measured: &[Sample],
) -> Result<Attribution, AttributionError> {
    let runs: Vec<(usize, ReportCore, u64)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| usable(l).map(|(c, t)| (i, c, t)))
        .collect();
    let totals = ascending(&runs.iter().map(|r| r.2).collect::<Vec<u64>>());
    let median = percentile_sorted(&totals, 50, 100).ok_or(AttributionError::NoUsableRun)?;
    let (idx, core, total) = runs
        .into_iter()
        .find(|r| r.2 == median)
        .ok_or(AttributionError::NoUsableRun)?;
    let symbols = &lines[idx].symbols;
    let measured_ok = success_latencies(measured);
    let p50 = percentile_sorted(&measured_ok, 50, 100);
    let delta = p50.map(|p| ppm_delta(total, p));
    let represents = delta.is_some_and(|d| d <= RECONCILE_BOUND_PPM);
    let rip = core.rip_samples.clone();

    let mut rows = vec![
        Row {
            lane: Lane::Summary,
            name: "attribution_total".into(),
            start_ns: Some(0),
            dur_ns: Some(total),
            counters: None,
            note: format!(
                "request to strict-ready of attribution launch {idx} (the median of {} that \
                 reached strict-ready, of {})",
                totals.len(),
                lines.len()
            ),
        },
        Row {
            lane: Lane::Summary,
            name: "measured_p50".into(),
            start_ns: None,
            dur_ns: p50,
            counters: None,
            note: format!(
                "request to strict-ready p50 of the {} successful measured rows",
                measured_ok.len()
            ),
        },
        Row {
            lane: Lane::Reconciliation,
            name: if represents {
                "represents the measured boot".into()
            } else {
                "does not represent the measured boot".into()
            },
            start_ns: None,
            dur_ns: None,
            counters: None,
            note: match delta {
                Some(d) => {
                    format!("|total - p50| = {d} ppm of p50; bound {RECONCILE_BOUND_PPM} ppm")
                }
                None => format!("no measured success to compare; bound {RECONCILE_BOUND_PPM} ppm"),
            },
        },
    ];

    // Host stages and their counters, over the same spans.
    let st = &core.stamps;
    let origin = st.origin().unwrap_or(0);
    let times = st.tile();
    let counters: BTreeMap<Stage, Counters> = core
        .accounting
        .as_ref()
        .map(|a| {
            a.stages(st)
                .into_iter()
                .map(|s| (s.stage, s.counters))
                .collect()
        })
        .unwrap_or_default();
    for (stage, span) in Stage::ALL.iter().zip(st.spans()) {
        if stage.kind() == StageKind::Guest {
            continue;
        }
        let (Some((a, _)), Some(d)) = (span, times.get(*stage)) else {
            continue;
        };
        let start = st.get(a).map(|t| signed(t, origin));
        rows.push(Row {
            lane: Lane::Host,
            name: stage.name().into(),
            start_ns: start,
            dur_ns: Some(d),
            counters: counters.get(stage).copied(),
            note: if stage.kind() == StageKind::Post {
                "after strict-ready".into()
            } else {
                String::new()
            },
        });
    }

    // Guest phases on the host clock.
    if let (Some(rec), Some(ready)) = (&core.guest_record, st.ready_doorbell) {
        // host = mono + offset; offset = ready_doorbell − t_ready_ns.
        let offset = i128::from(ready) - i128::from(rec.t_ready_ns);
        let host = |mono: i128| clamp_i64(mono + offset - i128::from(origin));
        // (name, host time, note): the guest lane's points, in time order.
        let mut points: Vec<(String, i64, &str)> = Vec::new();
        if let Some(f) = st.first_run {
            points.push(("first_run".into(), signed(f, origin), ""));
        }
        let mut calls = Vec::new();
        if let Some(tr) = &core.guest_trace {
            if let Some(sync) = tr.sync {
                let k = i128::from(sync.kmsg_us) * 1000 - i128::from(sync.mono_ns);
                let printk = |us: u64| host(i128::from(us) * 1000 - k);
                for m in &tr.marks {
                    let note = if m.t_us == 0 { PRINTK_ZERO_NOTE } else { "" };
                    points.push((format!("kernel:{}", m.name), printk(m.t_us), note));
                }
                for c in &tr.initcalls {
                    calls.push((c, printk(c.start_us)));
                }
                if sync.truncated {
                    rows.push(Row {
                        lane: Lane::Summary,
                        name: "trace_truncated".into(),
                        start_ns: None,
                        dur_ns: None,
                        counters: None,
                        note: "the guest stopped reading /dev/kmsg at a bound".into(),
                    });
                }
            }
        }
        points.push(("init_start".into(), host(i128::from(rec.t_init_ns)), ""));
        points.push(("ready".into(), host(i128::from(rec.t_ready_ns)), ""));
        points.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        for w in points.windows(2) {
            rows.push(Row {
                lane: Lane::Guest,
                name: format!("{}..{}", w[0].0, w[1].0),
                start_ns: Some(w[0].1),
                dur_ns: Some(w[1].1.abs_diff(w[0].1)),
                counters: None,
                note: [w[0].2, w[1].2]
                    .iter()
                    .copied()
                    .find(|n| !n.is_empty())
                    .unwrap_or("")
                    .to_string(),
            });
        }
        calls.sort_by(|a, b| {
            b.0.dur_us
                .cmp(&a.0.dur_us)
                .then(a.1.cmp(&b.1))
                .then_with(|| a.0.func.cmp(&b.0.func))
        });
        for (c, start) in calls.into_iter().take(TOP_INITCALLS) {
            let name = symbols
                .get(&c.func)
                .cloned()
                .unwrap_or_else(|| c.func.clone());
            rows.push(Row {
                lane: Lane::Initcall,
                name,
                start_ns: Some(start),
                dur_ns: Some(c.dur_us.saturating_mul(1000)),
                counters: None,
                note: format!("ret {}", c.ret),
            });
        }
    }
    let flame = match &rip {
        Some(rs) if rs.vcpus.iter().any(|v| v.requested.is_some()) => {
            super::profile::profile(&lines[idx])?.map(|p| (idx, p))
        }
        _ => None,
    };
    let rip = match rip {
        None => None,
        Some(rs) => {
            rows.push(overhead_row(median, p50, totals.len(), measured_ok.len()));
            let funcs = function_index(&lines[idx].functions)?;
            Some(rip_rows(&rs, &funcs, origin, &mut rows)?)
        }
    };
    Ok(Attribution {
        rows,
        represents,
        rip,
        flame,
    })
}

/// The overhead row: the attribution launches' p50 (`attr_p50`, of `k`) against the
/// measured rows' p50 (of `m`).
fn overhead_row(attr_p50: u64, p50: Option<u64>, k: usize, m: usize) -> Row {
    let note = match p50 {
        Some(p) => {
            let d = i128::from(attr_p50) - i128::from(p);
            let ppm = if p == 0 {
                0
            } else {
                d * 1_000_000 / i128::from(p)
            };
            format!(
                "attribution p50 - measured p50 = {d:+} ns ({ppm:+} ppm of p50), {k} sampled \
                 launches against {m} measured rows: what the sampling cost the boot"
            )
        }
        None => format!("no measured success to compare ({k} sampled launches)"),
    };
    Row {
        lane: Lane::Overhead,
        name: "sampling_overhead".into(),
        start_ns: None,
        dur_ns: Some(attr_p50),
        counters: None,
        note,
    }
}
