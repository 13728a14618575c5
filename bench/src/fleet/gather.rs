//! `truecold fleet gather`: every shard present (else which are missing and why), the fleet
//! directory's README and `SHA256SUMS` written over the whole tree, the whole verified
//! (`truecold_proof::fleet`), and with `--against` the merge rule applied to an unsharded
//! run of the same plan. Nothing is removed: a failed task's partial output stays in the
//! work directory beside the fleet.

use super::fleet_dir::FleetDir;
use super::fleet_error::FleetError;
use super::status::shard_state;
use std::path::{Path, PathBuf};
use truecold_proof::fleet::{
    campaign_merge, screen_merge, verify_fleet, write_fleet, FleetKind, MergeRule,
};
use truecold_proof::kind::Kind;
use truecold_proof::names::BASELINE_ARM;
use truecold_proof::schema::Sample;
use truecold_proof::verify::{verify_dir, Verdict};

/// A gathered fleet.
#[derive(Debug)]
pub struct Gathered {
    pub dir: PathBuf,
    pub verdict: Verdict,
    /// The merge rule, with `--against`.
    pub merge: Option<MergeRule>,
    /// A failed task's partial output left beside the fleet (the work directory), if any.
    pub leftovers: Option<PathBuf>,
    /// A bisect wave's verdicts and what they found (the README's section).
    pub wave: Option<String>,
}

/// `truecold fleet gather` (see the module doc).
pub fn gather(dir: &Path, against: Option<&Path>) -> Result<Gathered, FleetError> {
    let fd = FleetDir::at(dir)?;
    let (plan, _) = fd.read_plan()?;
    let missing: Vec<(String, String)> = plan
        .shards
        .iter()
        .enumerate()
        .filter(|(_, s)| !fd.shard(&s.name).exists())
        .map(|(i, s)| {
            (
                s.name.clone(),
                shard_state(&fd, i as u64, &s.name).to_string(),
            )
        })
        .collect();
    if !missing.is_empty() {
        return Err(FleetError::ShardsMissing(missing));
    }
    write_fleet(&fd.root)?;
    let (verdict, verified) = verify_fleet(&fd.root, &Default::default());
    let merge = match against {
        None => None,
        Some(a) => Some(match plan.kind {
            FleetKind::Campaign => {
                let v = verify_dir(a);
                if !v.is_valid() || Kind::of(a) != Kind::Bundle {
                    return Err(FleetError::Against {
                        dir: a.to_path_buf(),
                        why: "not a valid bundle (verify it)".into(),
                    });
                }
                campaign_merge(&verified, &v)?
            }
            FleetKind::TuneScreen => screen_against(&fd, &plan, a)?,
            FleetKind::Bisect => {
                return Err(FleetError::Against {
                    dir: a.to_path_buf(),
                    why: "a bisect wave has no merge rule: each probe is a bisect directory \
                          of its own step, verified as one (compare its verdict with the same \
                          commit's step of a `bisect run`)"
                        .into(),
                })
            }
        }),
    };
    let wave = (plan.kind == FleetKind::Bisect)
        .then(|| truecold_proof::fleet::wave_section(&plan, &fd.root));
    let work = fd.work_root();
    let leftovers = std::fs::read_dir(&work)
        .ok()
        .and_then(|mut r| r.next())
        .map(|_| work);
    Ok(Gathered {
        dir: fd.root,
        verdict,
        merge,
        leftovers,
        wave,
    })
}

/// The verified rows of the bundle at `d`.
fn rows(d: &Path) -> Result<Vec<Sample>, FleetError> {
    let v = verify_dir(d);
    match (v.is_valid(), v.samples) {
        (true, Some(s)) => Ok(s),
        _ => Err(FleetError::Against {
            dir: d.to_path_buf(),
            why: "not a valid bundle".into(),
        }),
    }
}

/// The merge rule of a tune screen's fleet against `a`: a tune directory (its screen) or a
/// screen phase's directory.
fn screen_against(
    fd: &FleetDir,
    plan: &truecold_proof::fleet::FleetPlan,
    a: &Path,
) -> Result<MergeRule, FleetError> {
    let screen = match Kind::of(a) {
        Kind::Tune => a.join("screen"),
        Kind::Arms => a.to_path_buf(),
        k => {
            return Err(FleetError::Against {
                dir: a.to_path_buf(),
                why: format!("{}, not a tune directory or a screen phase", k.describe()),
            })
        }
    };
    let v = verify_dir(a);
    if !v.is_valid() {
        return Err(FleetError::Against {
            dir: a.to_path_buf(),
            why: "does not verify".into(),
        });
    }
    let mut shards = Vec::new();
    let mut unsharded = Vec::new();
    for s in &plan.shards {
        let Some(k) = s.knob else { continue };
        let d = fd.shard(&s.name);
        shards.push((k, rows(&d.join(BASELINE_ARM))?, rows(&d.join(k.as_str()))?));
        unsharded.push((k.as_str().to_string(), rows(&screen.join(k.as_str()))?));
    }
    let base = rows(&screen.join(BASELINE_ARM))?;
    Ok(screen_merge(
        plan.clock, plan.seed, &shards, &base, &unsharded,
    )?)
}
