//! A tune directory measured: its phases read (each a multi-arm directory, verified), the
//! results recomputed from their verified rows, and the writer and `report` built on them.

use crate::schema::Figure;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use truecold_proto::tune::Knob;

use super::model::*;
use super::stats::*;
use crate::arms::{knob_list, verify_arms_rows, ArmData, ArmRef, BASELINE_ARM, RECOMMENDED_ARM};
use crate::names::is_valid_name;
use crate::schema::{HostKind, ResultJson};
use crate::sums::{parse_sums_with, SumsError};
use crate::verdict::{Verdict, VerifyOptions};

/// A phase as read: its verdict and its arms by name.
pub(super) struct Phase {
    pub(super) verdict: Verdict,
    pub(super) arms: Option<Vec<ArmRef>>,
    pub(super) rounds: u64,
    pub(super) data: BTreeMap<String, ArmData>,
    /// The arms whose bundle carries an attribution (`attribution.svg`; the arm's own
    /// verifier checks it).
    pub(super) attributed: BTreeSet<String>,
}

pub(super) fn read_phase(dir: &Path) -> Phase {
    let r = verify_arms_rows(dir, &VerifyOptions::default());
    let attributed = r
        .plan
        .as_ref()
        .map(|p| {
            p.arms
                .iter()
                .filter(|a| {
                    is_valid_name(&a.name)
                        && crate::fsio::is_real_file(
                            &dir.join(&a.name).join(crate::attribution::SVG_FILE),
                        )
                })
                .map(|a| a.name.clone())
                .collect()
        })
        .unwrap_or_default();
    Phase {
        attributed,
        verdict: r.verdict,
        arms: r.plan.as_ref().map(|p| p.arms.clone()),
        rounds: r.plan.as_ref().map_or(0, |p| p.rounds),
        data: r
            .arms
            .into_iter()
            .map(|a| (a.arm.name.clone(), a))
            .collect(),
    }
}

/// The screen of a tune while it runs: `dir` is the screen's multi-arm directory the bench
/// has just written; its verified arms go through [`screen`] by [`RuleVersion::CURRENT`], the
/// computation [`write_tune`] (of a plan with that rule) and the verifier make later. An arm
/// without a readable bundle is an error.
pub fn screen_of_dir(
    dir: &Path,
    seed: u64,
    knobs: &[Knob],
    figure: Figure,
) -> Result<Screen, TuneError> {
    let p = read_phase(dir);
    let arm = |name: &str| {
        p.data
            .get(name)
            .map(|a| TuneArm::from_data(a, figure))
            .ok_or_else(|| TuneError::Phase {
                phase: SCREEN_DIR,
                why: format!("arm `{name}` has no readable bundle"),
            })
    };
    let base = arm(BASELINE_ARM)?;
    let arms = knobs
        .iter()
        .map(|k| arm(k.as_str()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(screen(RuleVersion::CURRENT, seed, &base, &arms))
}

/// Everything the results are computed from.
pub(super) struct Measured {
    /// The pilot that sized the screen, when the tune ran one.
    pub(super) pilot: Option<Phase>,
    pub(super) screen: Phase,
    pub(super) confirm: Option<Phase>,
}

/// The noise a pilot phase's verified arms give: [`pooled_cv_ppm`] of their successful
/// headlines (on `figure`).
pub(super) fn pilot_cv(p: &Phase, figure: Figure) -> Option<u64> {
    let arms: Vec<Vec<u64>> = p
        .data
        .values()
        .map(|a| TuneArm::from_data(a, figure).ok)
        .collect();
    let refs: Vec<&[u64]> = arms.iter().map(Vec::as_slice).collect();
    pooled_cv_ppm(&refs)
}

/// Each pilot arm's successful headlines' p50 (on `figure`), in the phase's arm order: what
/// the bench prints once the pilot ran (a first look, not a verdict).
pub fn pilot_p50s(dir: &Path, figure: Figure) -> Vec<(String, Option<u64>)> {
    let p = read_phase(dir);
    p.arms
        .iter()
        .flatten()
        .map(|a| {
            let p50 = p.data.get(&a.name).and_then(|d| {
                let ok = TuneArm::from_data(d, figure).ok;
                crate::stats::percentile_sorted(&ok, 50, 100)
            });
            (a.name.clone(), p50)
        })
        .collect()
}

/// The noise of the pilot the bench has just written to `dir` (a multi-arm directory of the
/// screen's arms over `rounds` rounds), as [`Noise`] for `tune.json`; the verifier recomputes
/// the same figure from the directory. An invalid pilot, or one without two successes in an
/// arm, is an error.
pub fn noise_of_pilot(dir: &Path, rounds: u64, figure: Figure) -> Result<Noise, TuneError> {
    let p = read_phase(dir);
    if !p.verdict.is_valid() {
        return Err(TuneError::Phase {
            phase: PILOT_DIR,
            why: p.verdict.render(dir, 3),
        });
    }
    let cv = pilot_cv(&p, figure).ok_or_else(|| TuneError::Phase {
        phase: PILOT_DIR,
        why: "no arm has two successful rows: no noise to measure".into(),
    })?;
    Ok(Noise {
        cv_ppm: cv,
        source: format!(
            "{PILOT_DIR}/: {rounds} interleaved round(s) of {} arm(s): the baseline and the \
             screen's command-line and VMM knobs",
            p.data.len()
        ),
        pilot_rounds: Some(rounds),
    })
}

/// Why the results cannot be computed: a phase (or an arm of it) is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Missing {
    /// An arm of this phase has no parsed bundle.
    Arm(&'static str, String),
    /// The screen has winners and there is no confirm phase.
    Confirm(Vec<Knob>),
}

impl Missing {
    pub(super) fn phase(&self) -> &'static str {
        match self {
            Missing::Arm(p, _) => p,
            Missing::Confirm(_) => CONFIRM_DIR,
        }
    }
    pub(super) fn why(&self) -> String {
        match self {
            Missing::Arm(p, a) => format!("arm `{a}` of `{p}/` has no parsed bundle"),
            Missing::Confirm(w) => format!(
                "the confirm phase `{CONFIRM_DIR}/` is missing: the screen's winners are [{}]",
                knob_list(w)
            ),
        }
    }
}

/// The results of `plan` over the phases' arms.
pub(super) fn results(plan: &TunePlan, m: &Measured) -> Result<TuneFile, Missing> {
    let arm = |phase: &'static str, p: &Phase, name: &str| -> Result<TuneArm, Missing> {
        p.data
            .get(name)
            .map(|a| TuneArm::from_data(a, plan.figure))
            .ok_or_else(|| Missing::Arm(phase, name.to_string()))
    };
    let base = arm(SCREEN_DIR, &m.screen, BASELINE_ARM)?;
    let knob_arms = plan
        .knobs
        .iter()
        .map(|k| arm(SCREEN_DIR, &m.screen, k.as_str()))
        .collect::<Result<Vec<_>, _>>()?;
    let sc = screen(plan.rule, plan.seed, &base, &knob_arms);
    let confirm = match (&m.confirm, sc.recommended.is_empty()) {
        (_, true) => None,
        (None, false) => return Err(Missing::Confirm(sc.winners.clone())),
        (Some(c), false) => {
            let names = confirm_arms(&sc.recommended);
            let b = arm(CONFIRM_DIR, c, BASELINE_ARM)?;
            let r = arm(CONFIRM_DIR, c, RECOMMENDED_ARM)?;
            let minus = names[2..]
                .iter()
                .map(|a| arm(CONFIRM_DIR, c, &a.name))
                .collect::<Result<Vec<_>, _>>()?;
            Some(self::confirm(
                plan.rule,
                plan.seed,
                plan.knobs.len(),
                &b,
                &r,
                &minus,
            ))
        }
    };
    let first: Option<&ResultJson> = m.screen.data.get(BASELINE_ARM).map(|a| &a.result);
    let host = first.map(|r| r.environment.host_kind);
    let launches = m
        .pilot
        .iter()
        .flat_map(|p| p.data.values())
        .chain(m.screen.data.values())
        .chain(m.confirm.iter().flat_map(|c| c.data.values()))
        .map(|a| a.attempts)
        .sum();
    Ok(TuneFile {
        schema: schema_of(plan),
        seed: plan.seed,
        guest: guest_kind(plan.guest),
        knobs: plan.knobs.clone(),
        context: Context {
            vcpus: plan.vcpus,
            mem_bytes: plan.mem_bytes,
            backing: plan.backing,
            figure: plan.figure,
        },
        rounds: Rounds {
            screen: plan.rounds_screen,
            confirm: plan.rounds_confirm,
        },
        budget: plan.budget,
        noise: plan.noise.clone(),
        invocation: plan.invocation.clone(),
        rule: rule(plan.rule, plan.knobs.len() as u64, plan.figure),
        host_kind: host,
        clock: host.map(HostKind::clock),
        launches,
        screen: sc,
        confirm,
        kernel_builds: plan.kernel_builds.clone(),
        proposals: plan.proposals.clone(),
        unbuilt: plan.unbuilt.clone(),
    })
}

/// A `SHA256SUMS` name of a tune directory: `file`, `phase/file` or `phase/arm/file`.
pub fn is_valid_tune_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 3)
}

pub(super) fn parse_tune_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_tune_path)
}

/// Reads both phases of `dir` for `plan`, checking their arms are the plan's.
pub(super) fn measure(dir: &Path, plan: &TunePlan) -> Result<(Measured, TuneFile), TuneError> {
    let problems = tune_plan_problems(plan);
    if !problems.is_empty() {
        return Err(TuneError::Plan(problems.join("; ")));
    }
    let screen = read_phase(&dir.join(SCREEN_DIR));
    let want = screen_arms(&plan.knobs);
    if screen.arms.as_ref() != Some(&want) {
        return Err(TuneError::Phase {
            phase: SCREEN_DIR,
            why: format!(
                "its arms.json does not plan [{}]",
                want.iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let cdir = dir.join(CONFIRM_DIR);
    let confirm = crate::fsio::is_real_dir(&cdir).then(|| read_phase(&cdir));
    let pdir = dir.join(PILOT_DIR);
    let pilot = crate::fsio::is_real_dir(&pdir).then(|| read_phase(&pdir));
    let m = Measured {
        pilot,
        screen,
        confirm,
    };
    let f = results(plan, &m).map_err(|e| TuneError::Phase {
        phase: e.phase(),
        why: e.why(),
    })?;
    if let Some(c) = &m.confirm {
        let want = confirm_arms(&f.screen.recommended);
        if f.screen.recommended.is_empty() || c.arms.as_ref() != Some(&want) {
            return Err(TuneError::Phase {
                phase: CONFIRM_DIR,
                why: format!(
                    "its arms are not the confirmation of the winners [{}]",
                    knob_list(&f.screen.winners)
                ),
            });
        }
    }
    Ok((m, f))
}
