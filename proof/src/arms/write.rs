//! Writing a multi-arm directory's top files (the bench, after every arm's bundle) and
//! `report` on one.

use std::path::Path;

use super::check::*;
use super::model::*;
use super::readme::*;
use super::stats::*;
use crate::bundle::{read_bundle, regenerate};
use crate::names::{ARMS_FILE, SUMS_FILE};
use crate::skeleton;
use crate::verdict::{Verdict, VerifyOptions};

pub(super) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArmsError> {
    Ok(skeleton::write(dir, name, bytes)?)
}

pub(super) fn read_arms(dir: &Path, plan: &ArmsPlan) -> Result<Vec<ArmData>, ArmsError> {
    plan.arms
        .iter()
        .map(|a| {
            let (r, s) = read_bundle(&dir.join(&a.name)).map_err(|source| ArmsError::Arm {
                arm: a.name.clone(),
                source,
            })?;
            Ok(ArmData::new(a.clone(), r, &s))
        })
        .collect()
}

/// Writes `arms.json`, `comparison.json`, `README.md`, `cdf.svg` and `SHA256SUMS` into `dir`
/// (each file atomically: written, fsynced, renamed), after every arm bundle was written
/// inside it, and returns the verifier's verdict on the whole directory. An arm whose bundle
/// does not verify is still compared (failures are data); the verdict says why it is invalid.
pub fn write_arms(dir: &Path, plan: &ArmsPlan) -> Result<Verdict, ArmsError> {
    let problems = plan_problems(plan);
    if !problems.is_empty() {
        return Err(ArmsError::Plan(problems.join("; ")));
    }
    let arms = read_arms(dir, plan)?;
    write_atomic(dir, ARMS_FILE, &arms_bytes(plan))?;
    for (name, bytes) in generated_files(plan, &arms) {
        write_atomic(dir, &name, &bytes)?;
    }
    write_sums(dir, plan)?;
    Ok(verify_arms_dir(dir, &VerifyOptions::default()))
}

pub(super) fn write_sums(dir: &Path, plan: &ArmsPlan) -> Result<(), ArmsError> {
    let digests = digests_of(dir, &plan.arms)?;
    let entries: Vec<(String, String)> = digests.into_iter().collect();
    Ok(skeleton::write_sums(dir, &entries)?)
}

/// Whether `report` regenerates the file `name` (`<file>` or `<arm>/<file>`) of a
/// multi-arm directory.
pub fn is_regenerated(name: &str) -> bool {
    match name.split_once('/') {
        None => GENERATED.contains(&name) || name == crate::names::HTML_FILE,
        // An arm's attribution files are regenerated from its attribution.jsonl (whose
        // digest its own SHA256SUMS holds; without it they are a reason `report` keeps).
        Some((_, f)) => ARM_GENERATED.contains(&f) || crate::attribution::is_generated(f),
    }
}

/// `report DIR` on a multi-arm directory: regenerates each arm's README and plots
/// ([`crate::bundle::regenerate`]), then the top `comparison.json`, `README.md`, `cdf.svg`
/// and `SHA256SUMS`. Refuses when a file that is not regenerated differs from its top
/// `SHA256SUMS` entry. Returns the paths rewritten.
pub fn regenerate_arms(dir: &Path) -> Result<Vec<String>, ArmsError> {
    let listed = skeleton::read_listing(dir, parse_arms_sums)?;
    skeleton::check_unchanged(dir, &listed, is_regenerated)?;
    let ab = skeleton::read_record(&dir.join(ARMS_FILE))?;
    let plan = parse_arms(&ab).map_err(|e| ArmsError::Plan(e.to_string()))?;
    let problems = plan_problems(&plan);
    if !problems.is_empty() {
        return Err(ArmsError::Plan(problems.join("; ")));
    }
    let mut written = Vec::new();
    for a in &plan.arms {
        let names = regenerate(&dir.join(&a.name)).map_err(|source| ArmsError::Arm {
            arm: a.name.clone(),
            source,
        })?;
        written.extend(names.into_iter().map(|n| format!("{}/{n}", a.name)));
    }
    let arms = read_arms(dir, &plan)?;
    for (name, bytes) in generated_files(&plan, &arms) {
        write_atomic(dir, &name, &bytes)?;
        written.push(name);
    }
    write_sums(dir, &plan)?;
    written.push(SUMS_FILE.to_string());
    Ok(written)
}
