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
use super::profile::{profile, self_times};

/// Bootstrap resamples of the launches.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed.
pub const SEED: u64 = 0x7275_6563_6f6c_6421;
/// Rows shown by the text renderings (the JSON has every function).
pub const SHOWN: usize = 15;

/// The functions given a bootstrap interval: the largest changes (the bootstrap's work is
/// resamples × functions × launches, and a hostile pair of bundles may hold tens of
/// thousands of functions); a function past them has none and is never above the noise.
pub const CI_FUNCTIONS: usize = 100;

/// One function's change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionDelta {
    pub name: String,
    /// Mean self time over A's launches, ns.
    pub a_ns: u64,
    pub b_ns: u64,
    /// `b_ns − a_ns`.
    pub delta_ns: i64,
    /// Percentile-bootstrap 95 % interval of Δ, ns (`None` past the [`CI_FUNCTIONS`]
    /// largest changes).
    pub ci95_ns: Option<(i64, i64)>,
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

/// [`differential`] of two verified bundles' [`JSONL_FILE`]s (each read capped at
/// [`JSONL_MAX_BYTES`]): `None` when either has none, or no launch with a profile, or lines
/// that do not give one (verify has said why).
pub fn differential_of_dirs(a: &std::path::Path, b: &std::path::Path) -> Option<DiffProfile> {
    let lines = |d: &std::path::Path| -> Option<Vec<AttributionLine>> {
        let p = d.join(JSONL_FILE);
        if !crate::fsio::exists_here(&p) {
            return None;
        }
        parse_lines(&crate::fsio::read_file(&p, JSONL_MAX_BYTES).ok()?).ok()
    };
    differential(&lines(a)?, &lines(b)?).ok().flatten()
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
        side.iter()
            .map(|m| m.get(n).copied().unwrap_or(0))
            .collect()
    };
    let names: Vec<&String> = names.into_iter().collect();
    let va: Vec<Vec<u64>> = names.iter().map(|n| per(&sa, n)).collect();
    let vb: Vec<Vec<u64>> = names.iter().map(|n| per(&sb, n)).collect();
    let deltas: Vec<i64> = (0..names.len())
        .map(|f| clamp_i64(i128::from(mean(&vb[f])) - i128::from(mean(&va[f]))))
        .collect();
    // The functions bootstrapped: the largest changes, then by name (`names` is sorted).
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&x, &y| {
        deltas[y]
            .unsigned_abs()
            .cmp(&deltas[x].unsigned_abs())
            .then(x.cmp(&y))
    });
    let boot: Vec<usize> = order.iter().copied().take(CI_FUNCTIONS).collect();
    // The bootstrap: one draw of launch indices per side per resample, shared by every
    // function (the launches are the unit resampled).
    let mut rng = crate::stats::SplitMix64(SEED);
    let mut draws: Vec<Vec<i64>> = vec![Vec::with_capacity(RESAMPLES); boot.len()];
    let (ka, kb) = (pa.len(), pb.len());
    let mut ia = vec![0usize; ka];
    let mut ib = vec![0usize; kb];
    for _ in 0..RESAMPLES {
        ia.iter_mut().for_each(|x| *x = rng.below(ka));
        ib.iter_mut().for_each(|x| *x = rng.below(kb));
        for (d, &f) in draws.iter_mut().zip(&boot) {
            let ma: u128 = ia.iter().map(|&i| u128::from(va[f][i])).sum::<u128>() / ka as u128;
            let mb: u128 = ib.iter().map(|&i| u128::from(vb[f][i])).sum::<u128>() / kb as u128;
            d.push(clamp_i64(mb as i128 - ma as i128));
        }
    }
    let mut ci: Vec<Option<(i64, i64)>> = vec![None; names.len()];
    for (d, &f) in draws.iter().zip(&boot) {
        let d = crate::stats::ascending(d);
        ci[f] = Some((
            crate::stats::percentile_sorted(&d, 25, 1000).unwrap_or(deltas[f]),
            crate::stats::percentile_sorted(&d, 975, 1000).unwrap_or(deltas[f]),
        ));
    }
    let mut functions: Vec<FunctionDelta> = names
        .iter()
        .enumerate()
        .map(|(f, n)| {
            let (a_ns, b_ns) = (mean(&va[f]), mean(&vb[f]));
            let noise = 2 * isqrt((u128::from(a_ns) + u128::from(b_ns)) * u128::from(period));
            let noise_ns = u64::try_from(noise).unwrap_or(u64::MAX);
            FunctionDelta {
                name: (*n).clone(),
                a_ns,
                b_ns,
                delta_ns: deltas[f],
                ci95_ns: ci[f],
                noise_ns,
                above_noise: ci[f].is_some_and(|(lo, hi)| lo > 0 || hi < 0)
                    && deltas[f].unsigned_abs() > noise_ns,
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

    /// The words above the table.
    pub fn heading(&self) -> String {
        format!(
            "differential profile of the attribution launches (A {}, B {}; {}): per function, \
             the change in ms of the boot (self time, Δ = B − A, 95 % bootstrap CI over the \
             launches; * above the noise: {} of {} functions)",
            self.a_launches,
            self.b_launches,
            if self.with_stacks {
                "call stacks"
            } else {
                "flat: leaf functions"
            },
            self.above_noise().count(),
            self.functions.len()
        )
    }

    /// The [`SHOWN`] largest changes as table cells: the noise mark, Δ, its interval, A's
    /// and B's means (ms) and the function (escaped, cut at [`NAME_CHARS`]).
    pub fn rows(&self) -> Vec<[String; 6]> {
        let ms = |v: i64| crate::fmt::signed_ms(v);
        self.functions
            .iter()
            .take(SHOWN)
            .map(|f| {
                let name = crate::fmt::escape_untrusted(&f.name);
                let name = if name.chars().count() > NAME_CHARS {
                    name.chars().take(NAME_CHARS - 1).chain(['…']).collect()
                } else {
                    name
                };
                [
                    if f.above_noise { "*" } else { "" }.to_string(),
                    ms(f.delta_ns),
                    f.ci95_ns.map_or_else(
                        || "–".to_string(),
                        |(lo, hi)| format!("[{}, {}]", ms(lo), ms(hi)),
                    ),
                    crate::fmt::ms(f.a_ns),
                    crate::fmt::ms(f.b_ns),
                    name,
                ]
            })
            .collect()
    }
}

impl DiffProfile {
    /// The profile as a Markdown document (`what`: the sides, in words): the heading, the
    /// table of the [`SHOWN`] largest changes, and every function above the noise.
    pub fn markdown(&self, what: &str) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "# Differential profile: {what}\n\n{}\n", self.heading());
        let _ = writeln!(s, "| {} |", DIFF_HEAD.join(" | "));
        let _ = writeln!(s, "|---|---:|---|---:|---:|---|");
        for r in self.rows() {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        let above: Vec<String> = self
            .above_noise()
            .map(|f| {
                format!(
                    "`{}` {} ms",
                    crate::fmt::escape_untrusted(&f.name).replace('`', "'"),
                    crate::fmt::signed_ms(f.delta_ns)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "\nAbove the noise: {}.",
            if above.is_empty() {
                "nothing".to_string()
            } else {
                above.join(", ")
            }
        );
        s
    }
}

/// The table's column heads ([`DiffProfile::rows`]).
pub const DIFF_HEAD: [&str; 6] = ["", "Δ ms", "95% CI", "A ms", "B ms", "function"];

/// The longest function name a row shows.
pub const NAME_CHARS: usize = 40;

#[cfg(test)]
mod tests {
    use super::*;

    fn prof(stacks: &[(&str, u64)]) -> Profile {
        Profile {
            stacks: stacks.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            total: stacks.iter().map(|s| s.1).sum(),
            period_ns: 100_000,
            with_stacks: true,
        }
    }

    /// Three identical launches a side (a deterministic clock): the interval is a point, and
    /// the noise tells a 30 ms change from one sample's worth moved between functions.
    #[test]
    fn a_change_is_named_with_its_size_and_a_moved_sample_is_noise() {
        let a = prof(&[
            ("r;guest_boot;k;ksysfs_init", 200_000),
            ("r;guest_boot;k;other", 40_000_000),
            ("r;guest_boot;k;small", 300_000),
            ("r;spawn", 1_000_000),
        ]);
        let b = prof(&[
            ("r;guest_boot;k;ksysfs_init;delay_tsc", 30_000_000),
            ("r;guest_boot;k;ksysfs_init", 200_000),
            ("r;guest_boot;k;other", 40_000_000),
            ("r;guest_boot;k;small", 400_000),
            ("r;spawn", 1_000_000),
        ]);
        let d = differential_of(&[a.clone(), a.clone(), a], &[b.clone(), b.clone(), b]).unwrap();
        assert_eq!((d.a_launches, d.b_launches), (3, 3));
        let top = &d.functions[0];
        assert_eq!(top.name, "delay_tsc");
        assert_eq!(
            (top.a_ns, top.b_ns, top.delta_ns),
            (0, 30_000_000, 30_000_000)
        );
        assert_eq!(top.ci95_ns, Some((30_000_000, 30_000_000)));
        // 2 × √(30 ms × 100 µs) = 2 × √(3e12) ns ≈ 3.46 ms.
        assert_eq!(top.noise_ns, 3_464_100);
        assert!(top.above_noise);
        // One sample (100 µs) more in `small`: a point interval, but under the noise.
        let small = d.functions.iter().find(|f| f.name == "small").unwrap();
        assert_eq!(small.delta_ns, 100_000);
        assert!(!small.above_noise, "{small:?}");
        assert_eq!(d.above_noise().count(), 1);
        // Unchanged functions: 0, and sorted after the changes (then by name).
        let names: Vec<&str> = d.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["delay_tsc", "small", "ksysfs_init", "other", "spawn"]
        );
        assert!(d.functions[2..]
            .iter()
            .all(|f| f.delta_ns == 0 && !f.above_noise));
        // The differential flame graph: B's stacks, each with A's and B's ns.
        assert_eq!(
            d.b_stacks["r;guest_boot;k;ksysfs_init;delay_tsc"],
            30_000_000
        );
        assert!(!d
            .a_stacks
            .contains_key("r;guest_boot;k;ksysfs_init;delay_tsc"));
        let svg = d.flame_svg();
        assert!(svg.contains("delay_tsc") && svg.contains("<svg"));
        assert_eq!(svg, d.flame_svg());
        let rows = d.rows();
        assert_eq!(
            rows[0],
            [
                "*",
                "+30.000",
                "[+30.000, +30.000]",
                "0.000",
                "30.000",
                "delay_tsc"
            ]
            .map(String::from)
        );
        assert_eq!(rows[1][0], "");
        assert!(d.heading().contains("1 of 5 functions"), "{}", d.heading());
    }

    /// Launches that differ: the interval comes from resampling them, and a change inside
    /// the spread of the launches is not above the noise however large the noise term.
    #[test]
    fn the_interval_resamples_the_launches() {
        let side = |v: &[u64]| -> Vec<Profile> {
            v.iter()
                .map(|n| prof(&[("r;f", *n), ("r;g", 10_000_000)]))
                .collect()
        };
        let a = side(&[10_000_000, 12_000_000, 8_000_000, 11_000_000]);
        let b = side(&[9_000_000, 13_000_000, 10_000_000, 12_000_000]);
        let d = differential_of(&a, &b).unwrap();
        let f = d.functions.iter().find(|x| x.name == "f").unwrap();
        assert_eq!(f.delta_ns, 11_000_000 - 10_250_000);
        assert!(f.ci95_ns.is_some_and(|(lo, hi)| lo < 0 && hi > 0), "{f:?}");
        assert!(!f.above_noise);
        // Seeded: the same data give the same interval.
        assert_eq!(differential_of(&a, &b).unwrap(), d);
        // No launch on a side: no profile.
        assert!(differential_of(&a, &[]).is_none());
    }

    /// Past the [`CI_FUNCTIONS`] largest changes a function has no interval and is never
    /// above the noise: the bootstrap's work stays bounded whatever the bundles hold.
    #[test]
    fn only_the_largest_changes_are_bootstrapped() {
        let many = |k: u64| -> Profile {
            let v: Vec<(String, u64)> = (0..CI_FUNCTIONS as u64 + 20)
                .map(|i| (format!("r;f{i:04}"), 1_000_000 + k * i * 1_000))
                .collect();
            prof(&v.iter().map(|(s, n)| (s.as_str(), *n)).collect::<Vec<_>>())
        };
        let d = differential_of(&[many(0)], &[many(1)]).unwrap();
        assert_eq!(d.functions.len(), CI_FUNCTIONS + 20);
        assert!(d.functions[..CI_FUNCTIONS]
            .iter()
            .all(|f| f.ci95_ns.is_some()));
        assert!(d.functions[CI_FUNCTIONS..]
            .iter()
            .all(|f| f.ci95_ns.is_none() && !f.above_noise));
        assert_eq!(d.functions[0].name, "f0119");
        assert_eq!(d.rows()[SHOWN - 1][2].chars().next(), Some('['));
    }

    #[test]
    fn isqrt_is_the_floor() {
        for v in [
            0u128,
            1,
            2,
            3,
            4,
            15,
            16,
            17,
            3_000_000_000_000,
            u64::MAX as u128,
        ] {
            let r = isqrt(v);
            assert!(r * r <= v && (r + 1) * (r + 1) > v, "{v}");
        }
    }
}
