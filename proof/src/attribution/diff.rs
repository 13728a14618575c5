//! The differential profile of two sides' attribution launches (`compare A B`, and a bisect's
//! culprit against its parent): per function, the change in ms of the boot.
//!
//! Each side's launches that reached strict-ready with RIP samples each give a profile on
//! the one clock ([`super::profile`]); a function's time in a launch is its self time there
//! (the ns of the stacks it ends: where the time was spent; a host stage without samples, a
//! state such as `[halted]` and `[not sampled]` are leaves too). Per function:
//! - each side's mean over its launches, and Δ = mean(B) − mean(A);
//! - a percentile-bootstrap 95 % interval of Δ: each side's launches resampled with
//!   replacement ([`RESAMPLES`] times, seeded: the same data give the same interval);
//! - the sampling noise: a function sampled for t ns is seen in about t / period samples,
//!   counted with an error of about √(t / period) samples, so Δ's is
//!   √((mean(A) + mean(B)) × period) ns; `above_noise` when the interval excludes 0 and
//!   |Δ| exceeds twice that. On the nested harness's deterministic clock the same boot gives
//!   the same samples and the interval is a point: the noise is what tells a moved sampling
//!   instant from a change.
//!
//! Sorted by |Δ| (largest first; then by name).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::flame::{differential_svg, mean_stacks};
use super::model::*;
use super::profile::{profile, self_times, Profile};

/// Bootstrap resamples of the launches.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed.
pub const SEED: u64 = 0x7275_6563_6f6c_6421;
/// Rows shown by the text renderings (the JSON has every function).
pub const SHOWN: usize = 15;

/// One function's change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionDelta {
    pub name: String,
    /// Mean self time over A's launches, ns.
    pub a_ns: u64,
    pub b_ns: u64,
    /// `b_ns − a_ns`.
    pub delta_ns: i64,
    /// Percentile-bootstrap 95 % interval of Δ, ns.
    pub ci95_ns: (i64, i64),
    /// Twice the sampling error of Δ, ns.
    pub noise_ns: u64,
    pub above_noise: bool,
}

/// The differential profile of B against A.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiffProfile {
    /// The launches profiled on each side.
    pub a_launches: usize,
    pub b_launches: usize,
    /// The sampling period, ns (the longer of the two sides').
    pub period_ns: u64,
    /// Whether both sides' samples carry call stacks.
    pub with_stacks: bool,
    /// Every function, by |Δ|.
    pub functions: Vec<FunctionDelta>,
    /// Each side's mean stacks (the differential flame graph's input).
    #[serde(skip)]
    pub a_stacks: BTreeMap<String, u64>,
    #[serde(skip)]
    pub b_stacks: BTreeMap<String, u64>,
}

/// The profiles of the launches of `lines` that have one.
pub fn profiles(lines: &[AttributionLine]) -> Result<Vec<Profile>, AttributionError> {
    let mut out = Vec::new();
    for l in lines {
        if let Some(p) = profile(l)? {
            out.push(p);
        }
    }
    Ok(out)
}

/// Mean of `v` (floor), 0 for none.
fn mean(v: &[u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let s: u128 = v.iter().map(|x| u128::from(*x)).sum();
    u64::try_from(s / v.len() as u128).unwrap_or(u64::MAX)
}

fn isqrt(v: u128) -> u128 {
    if v < 2 {
        return v;
    }
    let mut x = (v as f64).sqrt() as u128;
    while x * x > v {
        x -= 1;
    }
    while (x + 1) * (x + 1) <= v {
        x += 1;
    }
    x
}

/// The differential profile of `b`'s launches against `a`'s (`None` when a side has no
/// launch with a profile).
pub fn differential(
    a: &[AttributionLine],
    b: &[AttributionLine],
) -> Result<Option<DiffProfile>, AttributionError> {
    let (pa, pb) = (profiles(a)?, profiles(b)?);
    Ok(differential_of(&pa, &pb))
}

/// [`differential`] of the profiles themselves.
pub fn differential_of(pa: &[Profile], pb: &[Profile]) -> Option<DiffProfile> {
    if pa.is_empty() || pb.is_empty() {
        return None;
    }
    let (sa, sb): (Vec<_>, Vec<_>) = (
        pa.iter().map(self_times).collect(),
        pb.iter().map(self_times).collect(),
    );
    let names: BTreeSet<&String> = sa.iter().chain(&sb).flat_map(|m| m.keys()).collect();
    let period = pa.iter().chain(pb).map(|p| p.period_ns).max().unwrap_or(0);
    // Per function, each launch's ns (0 where it has none).
    let per = |side: &[BTreeMap<String, u64>], n: &str| -> Vec<u64> {
        side.iter().map(|m| m.get(n).copied().unwrap_or(0)).collect()
    };
    let names: Vec<&String> = names.into_iter().collect();
    let va: Vec<Vec<u64>> = names.iter().map(|n| per(&sa, n)).collect();
    let vb: Vec<Vec<u64>> = names.iter().map(|n| per(&sb, n)).collect();
    // The bootstrap: one draw of launch indices per side per resample, shared by every
    // function (the launches are the unit resampled).
    let mut rng = crate::compare::SplitMix64(SEED);
    let mut deltas: Vec<Vec<i64>> = vec![Vec::with_capacity(RESAMPLES); names.len()];
    let (ka, kb) = (pa.len(), pb.len());
    let mut ia = vec![0usize; ka];
    let mut ib = vec![0usize; kb];
    for _ in 0..RESAMPLES {
        ia.iter_mut().for_each(|x| *x = rng.below(ka));
        ib.iter_mut().for_each(|x| *x = rng.below(kb));
        for (f, d) in deltas.iter_mut().enumerate() {
            let ma: u128 = ia.iter().map(|&i| u128::from(va[f][i])).sum::<u128>() / ka as u128;
            let mb: u128 = ib.iter().map(|&i| u128::from(vb[f][i])).sum::<u128>() / kb as u128;
            d.push(clamp_i64(mb as i128 - ma as i128));
        }
    }
    let mut functions: Vec<FunctionDelta> = names
        .iter()
        .enumerate()
        .map(|(f, n)| {
            let (a_ns, b_ns) = (mean(&va[f]), mean(&vb[f]));
            let delta_ns = clamp_i64(i128::from(b_ns) - i128::from(a_ns));
            let d = crate::stats::ascending(&deltas[f]);
            let lo = crate::stats::percentile_sorted(&d, 25, 1000).unwrap_or(delta_ns);
            let hi = crate::stats::percentile_sorted(&d, 975, 1000).unwrap_or(delta_ns);
            let noise = 2 * isqrt((u128::from(a_ns) + u128::from(b_ns)) * u128::from(period));
            let noise_ns = u64::try_from(noise).unwrap_or(u64::MAX);
            FunctionDelta {
                name: (*n).clone(),
                a_ns,
                b_ns,
                delta_ns,
                ci95_ns: (lo, hi),
                noise_ns,
                above_noise: (lo > 0 || hi < 0) && delta_ns.unsigned_abs() > noise_ns,
            }
        })
        .collect();
    functions.sort_by(|x, y| {
        y.delta_ns
            .unsigned_abs()
            .cmp(&x.delta_ns.unsigned_abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    Some(DiffProfile {
        a_launches: ka,
        b_launches: kb,
        period_ns: period,
        with_stacks: pa.iter().chain(pb).all(|p| p.with_stacks),
        functions,
        a_stacks: mean_stacks(pa),
        b_stacks: mean_stacks(pb),
    })
}

impl DiffProfile {
    /// The functions above the noise, by |Δ|.
    pub fn above_noise(&self) -> impl Iterator<Item = &FunctionDelta> {
        self.functions.iter().filter(|f| f.above_noise)
    }

    /// The differential flame graph (B's mean stacks, coloured by the change from A's).
    pub fn flame_svg(&self) -> String {
        differential_svg(
            &self.a_stacks,
            &self.b_stacks,
            &format!(
                "means of {} launches (A) and {} (B)",
                self.a_launches, self.b_launches
            ),
        )
    }

    /// The text table: the [`SHOWN`] largest changes, each with its interval and whether it
    /// is above the noise, and how many more are.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let ms = |v: i64| crate::fmt::signed_ms(v);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "differential profile (attribution launches: A {}, B {}; {}): per function, the \
             change in ms of the boot (self time; Δ = B − A, 95 % bootstrap CI; * above the \
             noise)",
            self.a_launches,
            self.b_launches,
            if self.with_stacks {
                "call stacks"
            } else {
                "flat: leaf functions"
            }
        );
        for f in self.functions.iter().take(SHOWN) {
            let _ = writeln!(
                s,
                "  {}{:>10} ms  [{}, {}]  A {} ms, B {} ms  {}",
                if f.above_noise { "*" } else { " " },
                ms(f.delta_ns),
                ms(f.ci95_ns.0),
                ms(f.ci95_ns.1),
                crate::fmt::ms(f.a_ns),
                crate::fmt::ms(f.b_ns),
                crate::fmt::escape_untrusted(&f.name)
            );
        }
        let more = self.above_noise().skip(SHOWN).count();
        let shown_above = self.functions.iter().take(SHOWN).filter(|f| f.above_noise).count();
        let _ = writeln!(
            s,
            "  {} function(s) above the noise{}",
            shown_above + more,
            if self.functions.len() > SHOWN {
                format!(" ({} more rows in --json)", self.functions.len() - SHOWN)
            } else {
                String::new()
            }
        );
        s
    }
}
