//! A bisect wave: a k-way commit bisect fanned out over Slurm. `git bisect` judges one commit
//! at a time, each choice depending on the verdict before it; a wave instead measures
//! [`probes`] commits of the range at once (each a task, after the good commit's baseline),
//! and its verdicts narrow the range to the part between the last good probe and the first
//! bad one ([`wave_result`]). The next wave is a fleet of its own over that part; a range of
//! m commits takes about log base k of m waves, where `git bisect` takes log base 2 of m
//! steps.
//!
//! The probes are a pure function of the range's length and k, so `verify` holds a plan's
//! shards to them; the verdicts are each probe's own bisect directory, verified (and its
//! judgement recomputed) by the bisect verifier.

use std::path::Path;

use super::model::*;
use crate::bisect::{read_bisect, StepOutcome};

/// The places (1 = the good commit's child, m = the bad commit) a wave of `k` probes
/// measures in a range of `m` commits: the bad commit (checked bad, as `bisect run` does)
/// and k − 1 more spread evenly over the places before it, ascending and distinct.
pub fn probes(m: usize, k: u64) -> Vec<usize> {
    if m == 0 {
        return Vec::new();
    }
    let k = k.max(1) as usize;
    // The j-th of k − 1 evenly spaced places before m, at least place 1.
    let mut at: Vec<usize> = (1..k)
        .map(|j| (j * m / k).max(1))
        .filter(|&p| p < m)
        .collect();
    at.push(m);
    at.dedup();
    at
}

/// Every way a bisect plan's shards are not the wave its range and k give.
pub fn wave_problems(p: &FleetPlan) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(b) = &p.bisect else {
        return vec!["a bisect plan without its range".into()];
    };
    let is_id = |c: &str| {
        (c.len() == 40 || c.len() == 64)
            && c.bytes().all(|x| matches!(x, b'0'..=b'9' | b'a'..=b'f'))
    };
    for c in std::iter::once(&b.good).chain(&b.range) {
        if !is_id(c) {
            bad.push(format!("`{c}` is not a full commit id"));
        }
    }
    if b.range.last() != Some(&b.bad) {
        bad.push("the range does not end at the bad commit".into());
    }
    let distinct: std::collections::BTreeSet<&String> = b.range.iter().collect();
    if distinct.len() != b.range.len() || distinct.contains(&b.good) {
        bad.push("the range repeats a commit".into());
    }
    if b.probes == 0 {
        bad.push("a wave of 0 probes".into());
    }
    let mut want = vec![(BASELINE_SHARD.to_string(), b.good.clone(), None)];
    for place in probes(b.range.len(), b.probes) {
        let c = &b.range[place - 1];
        want.push((
            probe_name(place, c),
            c.clone(),
            Some(BASELINE_SHARD.to_string()),
        ));
    }
    let have: Vec<(String, String, Option<String>)> = p
        .shards
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.commit.clone().unwrap_or_default(),
                s.after.clone(),
            )
        })
        .collect();
    if have != want {
        bad.push(format!(
            "its shards are not the wave its range gives (the baseline, then the probes at \
             places {:?} of {})",
            probes(b.range.len(), b.probes),
            b.range.len()
        ));
    }
    bad
}

/// What a wave's probes say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaveResult {
    /// Probes not written yet.
    Incomplete(Vec<String>),
    /// The bad commit did not measure bad: nothing to look for.
    NotBad(StepOutcome),
    /// The first bad commit: its parent measured good (or is the good commit).
    Found {
        first_bad: String,
        last_good: String,
    },
    /// Only commits a probe skipped lie between the last good and the first bad: the first
    /// bad commit is one of them or the first bad probe.
    Ambiguous {
        last_good: String,
        first_bad: String,
        skipped: Vec<String>,
    },
    /// The next wave's range: after `good` up to `bad`, `commits` commits.
    Narrowed {
        good: String,
        bad: String,
        commits: usize,
    },
}

/// A probe's outcome: its bisect directory's last step (the look that decided).
pub fn probe_outcome(shard_dir: &Path) -> Option<StepOutcome> {
    read_bisect(shard_dir)
        .ok()
        .and_then(|f| f.steps.last().map(|s| s.outcome))
}

/// The wave's result from each probe's outcome (`outcome_of` a probe's name), and the probes
/// above the first bad one that measured good (a regression not monotone in the range).
pub fn wave_result(
    p: &FleetPlan,
    outcome_of: &dyn Fn(&str) -> Option<StepOutcome>,
) -> (WaveResult, Vec<String>) {
    let Some(b) = &p.bisect else {
        return (WaveResult::Incomplete(Vec::new()), Vec::new());
    };
    let m = b.range.len();
    let mut verdicts = Vec::new();
    let mut missing = Vec::new();
    for place in probes(m, b.probes) {
        let c = &b.range[place - 1];
        let name = probe_name(place, c);
        match outcome_of(&name) {
            Some(o) => verdicts.push((place, o)),
            None => missing.push(name),
        }
    }
    if !missing.is_empty() {
        return (WaveResult::Incomplete(missing), Vec::new());
    }
    let commit = |place: usize| {
        if place == 0 {
            b.good.clone()
        } else {
            b.range[place - 1].clone()
        }
    };
    if let Some(&(_, o)) = verdicts.iter().find(|(pl, _)| *pl == m) {
        if o.exit_code() != 1 {
            return (WaveResult::NotBad(o), Vec::new());
        }
    }
    let hi = verdicts
        .iter()
        .filter(|(_, o)| o.exit_code() == 1)
        .map(|&(pl, _)| pl)
        .min()
        .unwrap_or(m);
    let lo = verdicts
        .iter()
        .filter(|&&(pl, o)| pl < hi && o.exit_code() == 0)
        .map(|&(pl, _)| pl)
        .max()
        .unwrap_or(0);
    let odd: Vec<String> = verdicts
        .iter()
        .filter(|&&(pl, o)| pl > hi && o.exit_code() == 0)
        .map(|&(pl, _)| commit(pl))
        .collect();
    let skipped: Vec<usize> = verdicts
        .iter()
        .filter(|&&(pl, o)| pl > lo && pl < hi && o.exit_code() != 0 && o.exit_code() != 1)
        .map(|&(pl, _)| pl)
        .collect();
    let unmeasured = (lo + 1..hi).filter(|pl| !skipped.contains(pl)).count();
    let r = if unmeasured > 0 {
        WaveResult::Narrowed {
            good: commit(lo),
            bad: commit(hi),
            commits: hi - lo,
        }
    } else if skipped.is_empty() {
        WaveResult::Found {
            first_bad: commit(hi),
            last_good: commit(lo),
        }
    } else {
        WaveResult::Ambiguous {
            last_good: commit(lo),
            first_bad: commit(hi),
            skipped: skipped.into_iter().map(commit).collect(),
        }
    };
    (r, odd)
}

/// The fleet's command with its `--good` and `--bad` given these values (the next wave's).
pub fn with_sides(command: &[String], good: &str, bad: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = command.iter();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (w.as_str(), None),
        };
        let v = match flag {
            "--good" => good,
            "--bad" => bad,
            _ => {
                out.push(w.clone());
                continue;
            }
        };
        if inline.is_none() {
            it.next();
        }
        out.push(flag.to_string());
        out.push(v.to_string());
    }
    out
}

fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// The README's section on a wave: each probe's verdict and what the wave found, with the
/// next wave's command when it narrowed the range.
pub fn wave_section(p: &FleetPlan, dir: &Path) -> String {
    use std::fmt::Write as _;
    let Some(b) = &p.bisect else {
        return String::new();
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n## The wave\n\nA k-way bisect's wave (docs/fleet.md): the good commit `{}`'s \
         baseline, then {} probe(s) among the {} commit(s) after it up to the bad commit `{}` \
         (first-parent line), each one `truecold bisect step` against the baseline.\n",
        short(&b.good),
        p.shards.len().saturating_sub(1),
        b.range.len(),
        short(&b.bad)
    );
    let _ = writeln!(s, "| place | commit | verdict | why |\n|---|---|---|---|");
    let outcome_of = |name: &str| probe_outcome(&dir.join(SHARDS_DIR).join(name));
    for sh in p.shards.iter().skip(1) {
        let d = dir.join(SHARDS_DIR).join(&sh.name);
        let last = read_bisect(&d).ok().and_then(|f| f.steps.last().cloned());
        let place = sh.name.split('-').next().unwrap_or("");
        let _ = writeln!(
            s,
            "| {place} | `{}` | {} | {} |",
            short(sh.commit.as_deref().unwrap_or("")),
            last.as_ref()
                .map_or("not written", |st| st.outcome.as_str()),
            crate::fmt::md_text(last.as_ref().map_or("", |st| st.why.as_str()))
        );
    }
    let (r, odd) = wave_result(p, &outcome_of);
    let _ = writeln!(s);
    match r {
        WaveResult::Incomplete(m) => {
            let _ = writeln!(s, "Not complete: {} probe(s) not written.", m.len());
        }
        WaveResult::NotBad(o) => {
            let _ = writeln!(
                s,
                "**Not bisected:** the bad commit `{}` measured {} against the good one.",
                short(&b.bad),
                o.as_str()
            );
        }
        WaveResult::Found {
            first_bad,
            last_good,
        } => {
            let _ = writeln!(
                s,
                "**First bad commit: `{}`.** Its parent `{}` {}.",
                short(&first_bad),
                short(&last_good),
                if last_good == b.good {
                    "is the good commit, the baseline"
                } else {
                    "measured good in this wave"
                }
            );
        }
        WaveResult::Ambiguous {
            last_good,
            first_bad,
            skipped,
        } => {
            let _ = writeln!(
                s,
                "**The first bad commit is `{}` or one of the skipped {}:** `{}` is the last \
                 good one.",
                short(&first_bad),
                skipped
                    .iter()
                    .map(|c| format!("`{}`", short(c)))
                    .collect::<Vec<_>>()
                    .join(", "),
                short(&last_good)
            );
        }
        WaveResult::Narrowed { good, bad, commits } => {
            let next = with_sides(&p.command, &good, &bad);
            let _ = writeln!(
                s,
                "**Narrowed** to the {commits} commit(s) after `{}` up to `{}`. The next wave:\n\n\
                 ```sh\ntruecold fleet submit <next directory> --partition {} --shards {} -- {}\n```",
                short(&good),
                short(&bad),
                p.partition,
                b.probes,
                next.join(" ")
            );
        }
    }
    if !odd.is_empty() {
        let _ = writeln!(
            s,
            "\nNot monotone: {} above the first bad probe measured good.",
            odd.iter()
                .map(|c| format!("`{}`", short(c)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_probes_the_bad_commit_and_k_minus_1_spread_before_it() {
        assert_eq!(probes(4, 3), vec![1, 2, 4]);
        assert_eq!(probes(4, 1), vec![4]);
        assert_eq!(probes(1, 3), vec![1]);
        assert_eq!(probes(2, 5), vec![1, 2]);
        assert_eq!(probes(100, 4), vec![25, 50, 75, 100]);
        for m in 1..60 {
            for k in 1..9 {
                let p = probes(m, k);
                assert_eq!(*p.last().unwrap(), m);
                assert!(p.windows(2).all(|w| w[0] < w[1]), "{m} {k} {p:?}");
                assert!(p.len() as u64 <= k.max(1));
            }
        }
    }

    fn c(i: u8) -> String {
        format!("{:040x}", i)
    }

    fn plan(m: u8, k: u64) -> FleetPlan {
        let range: Vec<String> = (1..=m).map(c).collect();
        let mut shards = vec![ShardPlan {
            name: BASELINE_SHARD.into(),
            seed: shard_seed(1, 0),
            commit: Some(c(0)),
            ..Default::default()
        }];
        for (i, pl) in probes(range.len(), k).into_iter().enumerate() {
            shards.push(ShardPlan {
                name: probe_name(pl, &range[pl - 1]),
                seed: shard_seed(1, i as u64 + 1),
                commit: Some(range[pl - 1].clone()),
                after: Some(BASELINE_SHARD.into()),
                ..Default::default()
            });
        }
        FleetPlan {
            schema: FLEET_SCHEMA,
            kind: FleetKind::Bisect,
            command: "bisect run --good g --bad=b --nested"
                .split(' ')
                .map(String::from)
                .collect(),
            seed: 1,
            clock: crate::schema::Clock::Virtual,
            partition: "fleet".into(),
            exclusive: false,
            task_mem_mib: 1,
            shards,
            bisect: Some(BisectRange {
                tree: "/t".into(),
                good: c(0),
                bad: c(m),
                range,
                probes: k,
            }),
        }
    }

    #[test]
    fn a_plan_is_its_wave_and_nothing_else() {
        let p = plan(9, 3);
        assert!(wave_problems(&p).is_empty(), "{:?}", wave_problems(&p));
        let mut q = p.clone();
        q.shards.swap(1, 2);
        assert!(!wave_problems(&q).is_empty());
        let mut q = p.clone();
        q.shards[1].commit = Some(c(7));
        assert!(!wave_problems(&q).is_empty());
        let mut q = p.clone();
        q.bisect.as_mut().unwrap().range.pop();
        assert!(!wave_problems(&q).is_empty());
        let mut q = p;
        q.shards[2].after = None;
        assert!(!wave_problems(&q).is_empty());
    }

    fn result_of(m: u8, k: u64, bad_from: usize, skip: &[usize]) -> WaveResult {
        let p = plan(m, k);
        let places: Vec<(String, usize)> = probes(m as usize, k)
            .into_iter()
            .map(|pl| (probe_name(pl, &c(pl as u8)), pl))
            .collect();
        let f = |name: &str| {
            let &(_, pl) = places.iter().find(|(n, _)| n == name)?;
            Some(if skip.contains(&pl) {
                StepOutcome::BuildFailed
            } else if pl >= bad_from {
                StepOutcome::Regression
            } else {
                StepOutcome::NoRegression
            })
        };
        wave_result(&p, &f).0
    }

    #[test]
    fn the_verdicts_narrow_the_range_find_the_commit_or_say_why_not() {
        // 9 commits, 3 probes at 3, 6, 9; the regression at 5: between 3 (good) and 6 (bad).
        assert_eq!(
            result_of(9, 3, 5, &[]),
            WaveResult::Narrowed {
                good: c(3),
                bad: c(6),
                commits: 3
            }
        );
        // Every commit probed: the first bad one, its parent good.
        assert_eq!(
            result_of(3, 3, 2, &[]),
            WaveResult::Found {
                first_bad: c(2),
                last_good: c(1)
            }
        );
        // The first commit is bad: its parent is the good commit itself.
        assert_eq!(
            result_of(3, 3, 1, &[]),
            WaveResult::Found {
                first_bad: c(1),
                last_good: c(0)
            }
        );
        // A skipped commit between the last good and the first bad.
        assert_eq!(
            result_of(3, 3, 3, &[2]),
            WaveResult::Ambiguous {
                last_good: c(1),
                first_bad: c(3),
                skipped: vec![c(2)]
            }
        );
        // The bad end is not bad: nothing to look for.
        assert_eq!(
            result_of(3, 3, 99, &[]),
            WaveResult::NotBad(StepOutcome::NoRegression)
        );
    }

    #[test]
    fn the_next_wave_is_the_same_command_between_the_new_sides() {
        let w: Vec<String> = "bisect run --good g --bad=b -n 7"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(
            with_sides(&w, "G", "B").join(" "),
            "bisect run --good G --bad B -n 7"
        );
    }
}
