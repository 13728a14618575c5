//! The one rule every step is judged by (see [`crate::bisect`]'s module doc): the bench
//! calls it while it bisects, the verifier to recompute every step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::looks::*;
use super::model::*;
use crate::arms::verify_arms_or_bundle;
use crate::compare::{compare_verified, CompareOptions, Outcome};
use crate::names::{CANDIDATE_ARM, GOOD_ARM};
use crate::verdict::{Verdict, VerifyOptions};

/// A bundle or an A/B directory of the record (the baseline, a step, a judged side),
/// verified as [`verify_arms_or_bundle`] does.
pub(super) fn verify_dir(dir: &Path) -> Verdict {
    verify_arms_or_bundle(dir, &VerifyOptions::default())
}

/// Why two sides could not be judged at all.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("the {side} side is not a valid bundle: {reasons}")]
    Invalid { side: &'static str, reasons: String },
    #[error("the sides cannot be compared")]
    Compare(#[source] crate::compare::CompareError),
}

pub(super) fn verified(side: &'static str, v: &Verdict, dir: &Path) -> Result<(), JudgeError> {
    if v.is_valid() && v.result.is_some() && v.samples.is_some() {
        return Ok(());
    }
    Err(JudgeError::Invalid {
        side,
        reasons: v.render(dir, 2).trim().replace('\n', "; "),
    })
}

/// Judges the bundle `step` against the good side `good` at the recorded α (schema 1; see
/// the module doc).
pub fn judge(good: &Path, step: &Path, o: &JudgeOptions) -> Result<Judgement, JudgeError> {
    judge_with(good, step, &o.compare_options())
}

/// Judges one look of a step (schema 2): the arms `good` and `step` of its A/B by
/// `compare`'s rule at the look's nominal level α/K ([`Looks::alpha`]), recorded in the
/// judgement.
pub fn judge_look(
    good: &Path,
    step: &Path,
    o: &JudgeOptions,
    looks: &Looks,
) -> Result<Judgement, JudgeError> {
    let alpha = looks.alpha(o.alpha);
    let mut j = judge_with(good, step, &o.compare_options_at(alpha))?;
    j.alpha = Some(alpha);
    Ok(j)
}

fn judge_with(good: &Path, step: &Path, o: &CompareOptions) -> Result<Judgement, JudgeError> {
    let (vg, vs) = (verify_dir(good), verify_dir(step));
    verified("good", &vg, good)?;
    verified("step", &vs, step)?;
    let samples = vs.samples.as_deref().unwrap_or_default();
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for s in samples.iter().filter(|s| !s.ok) {
        let k = match s.error_kind.as_str() {
            "" => "unknown".to_string(),
            k => k.to_string(),
        };
        *kinds.entry(k).or_default() += 1;
    }
    let c = compare_verified(&vg, &vs, o).map_err(JudgeError::Compare)?;
    let Some(m) = c.metrics.first() else {
        return Err(JudgeError::Invalid {
            side: "step",
            reasons: "no headline to compare".into(),
        });
    };
    let mut j = Judgement {
        outcome: match c.outcome {
            Outcome::Regression => StepOutcome::Regression,
            Outcome::NoRegression => StepOutcome::NoRegression,
            Outcome::Inconclusive => StepOutcome::Inconclusive,
        },
        n: m.b.n,
        good_p50_ns: m.a.p50,
        p50_ns: m.b.p50,
        delta_pct: m.delta_pct,
        ci95_ns: m.ci95_ns,
        p_value: m.p_value,
        why: m.why.clone(),
        alpha: None,
    };
    if !kinds.is_empty() {
        j.outcome = StepOutcome::ContractBroken;
        j.why = format!(
            "breaks strict-ready: {}",
            kinds
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(j)
}

/// Config mode: the good and candidate arms' bundles of an A/B directory.
pub fn ab_sides(step: &Path) -> (PathBuf, PathBuf) {
    (step.join(GOOD_ARM), step.join(CANDIDATE_ARM))
}

/// The directories a step's judgement compares: (good side, step side). Schema 2 and config
/// steps: the two arms of the step's A/B; a schema-1 commit step: the baseline and the step's
/// bundle.
pub fn step_sides(dir: &Path, f: &BisectFile, step_dir: &str) -> (PathBuf, PathBuf) {
    match f.kind {
        BisectKind::Commit if !f.ab_steps() => (dir.join(BASELINE_DIR), dir.join(step_dir)),
        _ => ab_sides(&dir.join(step_dir)),
    }
}
