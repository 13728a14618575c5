//! The flat profile per vCPU from the VMM's RIP samples (`--attribution-instrument rip`).

use std::collections::BTreeMap;

use super::model::*;

/// The line's functions, sorted by start, checked: bounded, `start < end`, no overlap.
pub(super) fn function_index(f: &[RipFunction]) -> Result<Vec<&RipFunction>, AttributionError> {
    let bad = |why: String| AttributionError::BadLine { line: 0, why };
    if f.len() > MAX_FUNCTIONS {
        return Err(bad(format!("more than {MAX_FUNCTIONS} functions")));
    }
    let mut v: Vec<&RipFunction> = f.iter().collect();
    v.sort_by_key(|x| x.start);
    for w in v.windows(2) {
        if w[0].end > w[1].start {
            return Err(bad(format!(
                "functions {} and {} overlap",
                w[0].name, w[1].name
            )));
        }
    }
    if let Some(x) = v.iter().find(|x| x.start >= x.end) {
        return Err(bad(format!("function {} is empty", x.name)));
    }
    Ok(v)
}

/// The function holding `rip` (an index into `funcs`, sorted and disjoint).
fn function_of(funcs: &[&RipFunction], rip: u64) -> Option<usize> {
    let i = funcs.partition_point(|f| f.start <= rip).checked_sub(1)?;
    (rip < funcs[i].end).then_some(i)
}

/// What one vCPU's samples give: per key, the count and the first sample's time.
#[derive(Default)]
struct Profile {
    /// Per function index: (samples, first time).
    funcs: BTreeMap<usize, (u64, i64)>,
    halted: (u64, i64),
    waiting: (u64, i64),
    no_symbol: (u64, i64),
}

fn count(slot: &mut (u64, i64), t: i64) {
    if slot.0 == 0 {
        slot.1 = t;
    }
    slot.0 += 1;
}

/// The mean time between a vCPU's consecutive samples (`-` under two samples): the period
/// the sampling achieved.
fn mean_interval<T>(samples: &[(i64, T)]) -> String {
    match (samples.first(), samples.last()) {
        (Some(a), Some(b)) if samples.len() > 1 => {
            let span = i128::from(b.0) - i128::from(a.0);
            format!("{} ns", span / (samples.len() as i128 - 1))
        }
        _ => "-".into(),
    }
}

/// The flat profile rows of every vCPU, and the strips.
pub(super) fn rip_rows(
    rs: &truecold_proto::rip::RipSamples,
    funcs: &[&RipFunction],
    origin: u64,
    rows: &mut Vec<Row>,
) -> Result<RipView, AttributionError> {
    use truecold_proto::rip::VcpuState;
    let decoded = rs.decode().map_err(AttributionError::Rip)?;
    let period = rs.period_us.ns();
    // Per vCPU: each sample's time and what it is (function index or a state).
    let mut classified: Vec<Vec<(i64, Result<usize, Key>)>> = Vec::new();
    let mut totals: BTreeMap<usize, u64> = BTreeMap::new();
    for samples in &decoded {
        let mut v = Vec::with_capacity(samples.len());
        for s in samples {
            let t = signed(s.t_ns, origin);
            let what = match s.state {
                VcpuState::Halted => Err(Key::Halted),
                VcpuState::WaitingForStart => Err(Key::WaitingForStart),
                VcpuState::Running | VcpuState::Unknown => {
                    function_of(funcs, s.rip).ok_or(Key::NoSymbol)
                }
            };
            if let Ok(f) = what {
                *totals.entry(f).or_default() += 1;
            }
            v.push((t, what));
        }
        classified.push(v);
    }
    // The legend: the most sampled functions over all vCPUs (ties: the lower start).
    let mut ranked: Vec<(usize, u64)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let legend_of: BTreeMap<usize, usize> = ranked
        .iter()
        .take(STRIP_COLOURS)
        .enumerate()
        .map(|(k, (f, _))| (*f, k))
        .collect();
    let legend = ranked
        .iter()
        .take(STRIP_COLOURS)
        .map(|(f, _)| funcs[*f].name.clone())
        .collect();
    // A record whose VMM counted the samples asked of each vCPU (`requested`) also says
    // whether its samples carry call stacks; an older one keeps its rows as they were.
    let counted = rs.vcpus.iter().any(|v| v.requested.is_some());
    if counted {
        rows.push(stacks_row(rs));
    }
    let mut strips = Vec::new();
    for (vcpu, samples) in classified.iter().enumerate() {
        let enc = &rs.vcpus[vcpu];
        let mut p = Profile::default();
        let mut strip: Vec<(i64, i64, Key)> = Vec::new();
        for &(t, what) in samples {
            let key = match what {
                Ok(f) => {
                    count(p.funcs.entry(f).or_insert((0, t)), t);
                    legend_of.get(&f).map_or(Key::Other, |k| Key::Func(*k))
                }
                Err(k) => {
                    let slot = match k {
                        Key::Halted => &mut p.halted,
                        Key::WaitingForStart => &mut p.waiting,
                        _ => &mut p.no_symbol,
                    };
                    count(slot, t);
                    k
                }
            };
            let end = t.saturating_add(i64::try_from(period).unwrap_or(i64::MAX));
            match strip.last_mut() {
                Some(last) if last.2 == key && last.1 >= t => last.1 = end,
                _ => strip.push((t, end, key)),
            }
        }
        strips.push(strip);
        let n = samples.len() as u64;
        let ppm = |c: u64| (c * 1_000_000).checked_div(n).unwrap_or(0);
        rows.push(Row {
            lane: Lane::Rip,
            name: format!("vcpu{vcpu} samples"),
            start_ns: None,
            dur_ns: Some(n.saturating_mul(period)),
            counters: None,
            note: format!(
                "{n} samples every {} us of {} ticks (mean interval {}); not taken: {} over \
                 the cap, {} coalesced, {} unread, {} at the stop; {} ticks missed (all vCPUs)",
                rs.period_us.us(),
                rs.ticks,
                mean_interval(samples),
                enc.over_cap,
                enc.coalesced,
                enc.unread,
                enc.at_stop,
                rs.missed_ticks
            ),
        });
        if let Some(r) = rate_row(vcpu, enc) {
            rows.push(r);
        }
        let mut fl: Vec<(&usize, &(u64, i64))> = p.funcs.iter().collect();
        fl.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
        let mut row = |name: String, (c, first): (u64, i64), what: &str| {
            if c > 0 {
                rows.push(Row {
                    lane: Lane::Rip,
                    name: format!("vcpu{vcpu} {name}"),
                    start_ns: Some(first),
                    dur_ns: Some(c.saturating_mul(period)),
                    counters: None,
                    note: format!("{c} samples ({} ppm of the vCPU's){what}", ppm(c)),
                });
            }
        };
        for (f, v) in fl.iter().take(TOP_FUNCTIONS) {
            let func = funcs[**f];
            row(
                func.name.clone(),
                **v,
                &format!("; {:#x}..{:#x}", func.start, func.end),
            );
        }
        let rest = fl
            .iter()
            .skip(TOP_FUNCTIONS)
            .fold((0u64, i64::MAX), |a, (_, v)| (a.0 + v.0, a.1.min(v.1)));
        row("[other]".into(), rest, "; the functions past the top");
        row(
            "[no symbol]".into(),
            p.no_symbol,
            "; no function holds the RIP",
        );
        row("[halted]".into(), p.halted, "; the guest's idle (HLT)");
        row(
            "[waiting for start]".into(),
            p.waiting,
            "; an AP before its INIT/SIPI",
        );
    }
    Ok(RipView { legend, strips })
}

/// Whether a vCPU obtained the rate asked of it: its obtained samples per million requested
/// against [`truecold_proto::rip::OBTAINED_FLOOR_PPM`] (`None` without the count).
pub fn rate_obtained(v: &truecold_proto::rip::VcpuSamples) -> Option<(u64, bool)> {
    let ppm = v.obtained_ppm()?;
    Some((ppm, ppm >= truecold_proto::rip::OBTAINED_FLOOR_PPM))
}

/// A ppm as a percentage with one decimal.
pub(super) fn pct(ppm: u64) -> String {
    format!("{}.{} %", ppm / 10_000, (ppm / 1_000) % 10)
}

/// The row of a vCPU's obtained rate (`None` when its record has no `requested`).
fn rate_row(vcpu: usize, v: &truecold_proto::rip::VcpuSamples) -> Option<Row> {
    let requested = v.requested?;
    let floor = truecold_proto::rip::OBTAINED_FLOOR_PPM;
    let note = match rate_obtained(v) {
        Some((ppm, true)) => format!(
            "{} of {requested} requested samples ({}): the rate asked for was obtained (floor {})",
            v.obtained(),
            pct(ppm),
            pct(floor)
        ),
        Some((ppm, false)) => format!(
            "{} of {requested} requested samples ({}): below the {} floor: the rate asked for \
             was NOT obtained (the samples are sparser than the period says)",
            v.obtained(),
            pct(ppm),
            pct(floor)
        ),
        None => "no sample requested (the vCPU's thread never ran on the sampler's grid)".into(),
    };
    Some(Row {
        lane: Lane::Rip,
        name: format!("vcpu{vcpu} rate"),
        start_ns: None,
        dur_ns: None,
        counters: None,
        note,
    })
}

/// The row that says whether the samples carry call stacks, and how their walks ended.
fn stacks_row(rs: &truecold_proto::rip::RipSamples) -> Row {
    let note = match stack_ends(rs) {
        None => "flat: no call stacks walked (the bench walks them only for a guest kernel built \
                 with CONFIG_FRAME_POINTER): each sample is its leaf function"
            .to_string(),
        Some(ends) => {
            let n: u64 = ends.values().sum();
            let list: Vec<String> = ends
                .iter()
                .map(|(e, c)| format!("{c} {}", e.describe()))
                .collect();
            format!(
                "call stacks from the guest kernel's frame pointers: {n} samples, {} distinct \
                 stacks; walks: {}",
                rs.vcpus.iter().map(|v| v.stacks.len()).sum::<usize>(),
                list.join(", ")
            )
        }
    };
    Row {
        lane: Lane::Rip,
        name: "call stacks".into(),
        start_ns: None,
        dur_ns: None,
        counters: None,
        note,
    }
}

/// How the stacks' walks ended, over every sample of a launch's samples (for the CSV's
/// stacks row): per end, the samples.
pub(super) fn stack_ends(
    rs: &truecold_proto::rip::RipSamples,
) -> Option<BTreeMap<truecold_proto::rip::StackEnd, u64>> {
    let stacks = rs.stacks().ok()?;
    if stacks.iter().all(Option::is_none) {
        return None;
    }
    let mut out = BTreeMap::new();
    for vs in stacks.iter().flatten() {
        for &i in &vs.of_sample {
            if let Some(s) = vs.table.get(i as usize) {
                *out.entry(s.end).or_insert(0) += 1;
            }
        }
    }
    Some(out)
}
