//! One launch's profile on the one clock: its request → strict-ready as folded stacks
//! (`frame;frame;…;leaf` → ns), the host stages and the guest's RIP samples in one tree.
//!
//! # What a stack's ns are
//! The root is the launch's request → strict-ready; its children are the host stages that
//! tile it (spawn … challenge), each with its duration. A stage during which the vCPUs were
//! sampled is divided among its samples on the sampler's grid: the stage's time is cut into
//! periods ([`truecold_proto::rip::RipSamples::t0_ns`] + k × period, clipped to the stage),
//! and each period's time is shared equally by the samples taken in it — by the samples of
//! vCPUs executing guest code when there is one, else by the idle ones (halted, or an AP
//! waiting for its start) — and goes to `[not sampled]` when the period holds no sample (a
//! tick missed or coalesced, or before the first). So every ns of the boot is counted once:
//! a stage's stacks add up to its duration, the root's to request → strict-ready, and the
//! time of a function is the wall-clock time during which it ran (shared with what other
//! vCPUs ran at once) — one vCPU spinning in `mdelay` while the other idles moves the boot
//! by the delay, and so does its function. Samples after strict-ready are not in the tree.
//!
//! # A sample's stack
//! Root → leaf: the root, the stage, a marker when the walk of the call stack did not reach
//! its end (`[stack: …]`, [`StackEnd::describe`]: the outer frames are unknown), the callers
//! from the outermost in (each return address named at its call site,
//! [`truecold_proto::rip::call_site`]), the function holding the RIP (`[no symbol]` when
//! none), then `[halted]` for a halted vCPU; an AP waiting for its start is
//! `[waiting for start]` alone. Without call stacks (a kernel without frame pointers) the
//! stacks are the leaf functions: a flat profile.

use std::collections::BTreeMap;

use truecold_proto::measure::{Stage, StageKind};
use truecold_proto::rip::{call_site, VcpuState};

use super::model::*;
use super::rip::function_index;

/// The root frame: the launch's request → strict-ready.
pub const ROOT: &str = "request->strict-ready";
/// A period of a sampled stage that holds no sample.
pub const NOT_SAMPLED: &str = "[not sampled]";
pub const NO_SYMBOL: &str = "[no symbol]";
pub const HALTED: &str = "[halted]";
pub const WAITING: &str = "[waiting for start]";

/// A name as a folded frame: its characters outside `[A-Za-z0-9_.]` (the names the bench
/// writes hold none) as `_`, so a line's `;` and the count's space stay the format's.
fn frame(name: &str) -> String {
    if name.is_empty() {
        return "[unnamed]".into();
    }
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A stage's samples: (time after the request, vCPU, busy, stack).
type Placed = (i64, usize, bool, String);

/// The profile of launch `line` (`None`: it did not reach strict-ready, or carries no RIP
/// samples).
pub fn profile(line: &AttributionLine) -> Result<Option<Profile>, AttributionError> {
    let Some((core, total)) = usable(line) else {
        return Ok(None);
    };
    let Some(rs) = core.rip_samples.as_ref() else {
        return Ok(None);
    };
    let decoded = rs.decode().map_err(AttributionError::Rip)?;
    let stacks = rs.stacks().map_err(AttributionError::Rip)?;
    let funcs = function_index(&line.functions)?;
    let name_of = |addr: u64| -> String {
        let i = funcs.partition_point(|f| f.start <= addr);
        match i.checked_sub(1).map(|i| funcs[i]) {
            Some(f) if addr < f.end => frame(&f.name),
            _ => NO_SYMBOL.to_string(),
        }
    };
    let st = &core.stamps;
    let origin = st.origin().unwrap_or(0);
    let total_i = i64::try_from(total).unwrap_or(i64::MAX);
    // Every sample before strict-ready, with its stack.
    let mut placed: Vec<Placed> = Vec::new();
    for (v, samples) in decoded.iter().enumerate() {
        let vs = stacks.get(v).and_then(Option::as_ref);
        for (k, s) in samples.iter().enumerate() {
            let t = signed(s.t_ns, origin);
            if t < 0 || t >= total_i {
                continue;
            }
            let mut frames: Vec<String> = Vec::new();
            let busy = matches!(s.state, VcpuState::Running | VcpuState::Unknown);
            if s.state == VcpuState::WaitingForStart {
                frames.push(WAITING.into());
            } else {
                if let Some(stack) = vs
                    .and_then(|vs| vs.of_sample.get(k))
                    .and_then(|&i| vs.and_then(|vs| vs.table.get(i as usize)))
                {
                    if !stack.end.complete() {
                        frames.push(format!("[stack: {}]", stack.end.describe()));
                    }
                    frames.extend(stack.frames.iter().rev().map(|r| name_of(call_site(*r))));
                }
                frames.push(name_of(s.rip));
                if s.state == VcpuState::Halted {
                    frames.push(HALTED.into());
                }
            }
            placed.push((t, v, busy, frames.join(";")));
        }
    }
    placed.sort_by_key(|p| (p.0, p.1));
    let period = i64::try_from(rs.period_us.ns()).unwrap_or(i64::MAX).max(1);
    let grid0 = signed(rs.t0_ns, origin);
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |stack: String, ns: u64| {
        if ns > 0 {
            *out.entry(stack).or_insert(0) += ns;
        }
    };
    let times = st.tile();
    for (stage, span) in Stage::ALL.iter().zip(st.spans()) {
        if stage.kind() != StageKind::Host {
            continue;
        }
        let (Some((a, _)), Some(d)) = (span, times.get(*stage)) else {
            continue;
        };
        let start = st.get(a).map_or(0, |t| signed(t, origin));
        let end = start.saturating_add(i64::try_from(d).unwrap_or(i64::MAX));
        let base = format!("{ROOT};{}", stage.name());
        let lo = placed.partition_point(|p| p.0 < start);
        let hi = placed.partition_point(|p| p.0 < end);
        let here = &placed[lo..hi];
        if here.is_empty() {
            add(base, d);
            continue;
        }
        // The grid's periods that hold samples (one pass over them: a stage's length never
        // sets the work), each shared by its samples; the rest of the stage not sampled.
        let mut covered = 0u64;
        let mut i = 0;
        while i < here.len() {
            let k = (here[i].0 - grid0).div_euclid(period);
            let p0 = grid0.saturating_add(k.saturating_mul(period)).max(start);
            let p1 = grid0
                .saturating_add(k.saturating_add(1).saturating_mul(period))
                .min(end);
            let j = i + here[i..].partition_point(|p| p.0 < p1);
            let w = u64::try_from(p1 - p0).unwrap_or(0);
            covered += w;
            let in_period = &here[i..j];
            let busy: Vec<&Placed> = in_period.iter().filter(|p| p.2).collect();
            let sharing: Vec<&Placed> = if busy.is_empty() {
                in_period.iter().collect()
            } else {
                busy
            };
            let m = sharing.len() as u64;
            for (n, p) in sharing.iter().enumerate() {
                let share = w / m + u64::from((n as u64) < w % m);
                add(format!("{base};{}", p.3), share);
            }
            i = j;
        }
        add(format!("{base};{NOT_SAMPLED}"), d.saturating_sub(covered));
    }
    Ok(Some(Profile {
        stacks: out,
        total,
        period_ns: rs.period_us.ns(),
        with_stacks: rs.has_stacks(),
    }))
}

/// The folded-stacks file of a profile (flamegraph.pl's format: one `stack count` line per
/// stack, sorted, `\n` ends).
pub fn folded_bytes(p: &Profile) -> Vec<u8> {
    let mut s = String::new();
    for (stack, ns) in &p.stacks {
        s.push_str(stack);
        s.push(' ');
        s.push_str(&ns.to_string());
        s.push('\n');
    }
    s.into_bytes()
}

/// Per leaf (a stack's last frame: the function where the time was spent, a state, or a
/// stage without samples), the ns of a profile: its self time.
pub fn self_times(p: &Profile) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, ns) in &p.stacks {
        let leaf = stack.rsplit(';').next().unwrap_or(stack);
        *out.entry(leaf.to_string()).or_insert(0) += ns;
    }
    out
}
