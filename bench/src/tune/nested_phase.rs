//! A phase in one L1 boot of the nested harness ([`nested_phase`]), a phase inside L1
//! (`truecold tune-phase`, [`run_here`]), and the one entry a bisect's kernel A/B uses on
//! either host ([`run_one_phase`]).

use super::phase::{run_phase, PhaseEnv};
use super::phase_error::PhaseError;
use super::phase_plan::{kconfig_knobs, phase_seed_offset, variant_name, PhasePlan, L1_PHASE_PLAN};
use crate::artifacts::guest_files;
use crate::checks::environment;
use crate::checks::preflight::kvm_host;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::guest::{GuestSpec, Target};
use crate::run::nested_campaign;
use crate::run::nested_campaign::L1_BUNDLE;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use truecold_proof::bundle::Written;
use truecold_proto::kinds::{Backing, Engine, HostKind};
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{self as knobs};

/// One phase in one L1 boot: the arms' guest directories are packed into L1 under
/// `/tune/<variant>/`, the plan (with L1's paths) at [`L1_PHASE_PLAN`], and `truecold
/// tune-phase` writes the phase directory, which is received, placed at `dest` and verified.
pub fn nested_phase(
    plan: &PhasePlan,
    vmm: Option<&Path>,
    base_guest_dir: &Path,
    dest: &Path,
) -> Result<Written, PhaseError> {
    use truecold_nested::L1File;
    let mut inner = plan.clone();
    let mut extra: Vec<L1File> = Vec::new();
    let mut packed: BTreeSet<PathBuf> = BTreeSet::new();
    // A guest directory's place in L1: by its Kconfig knobs (tune), else by the first arm
    // that boots it (a kernel A/B).
    let mut placed: BTreeMap<PathBuf, String> = BTreeMap::new();
    let file = |dest: String, src: PathBuf| L1File {
        dest,
        src,
        executable: false,
    };
    for (a, ia) in plan.arms.iter().zip(inner.arms.iter_mut()) {
        let bz = knobs::apply(&a.knobs, plan.backing).bzimage;
        match &a.guest_dir {
            Some(d) => {
                let name = match variant_name(&kconfig_knobs(&a.knobs)) {
                    n if n.is_empty() => a.name.clone(),
                    n => n,
                };
                let l1 = placed
                    .entry(d.clone())
                    .or_insert_with(|| format!("tune/{name}"))
                    .clone();
                if packed.insert(d.clone()) {
                    for f in ["vmlinux", "config", "initramfs.cpio", "init"] {
                        extra.push(file(format!("{l1}/{f}"), d.join(f)));
                    }
                }
                if bz && packed.insert(d.join("bzImage")) {
                    extra.push(file(format!("{l1}/bzImage"), d.join("bzImage")));
                }
                ia.guest_dir = Some(PathBuf::from(format!("/{l1}")));
            }
            None if bz && packed.insert(base_guest_dir.join("bzImage")) => {
                extra.push(file("guest/bzImage".into(), base_guest_dir.join("bzImage")));
            }
            None => {}
        }
    }
    let work = std::env::temp_dir().join(format!("truecold-tune-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(PathIoError::at("create directory", &work))?;
    let plan_file = work.join(format!("{}.json", plan.phase));
    let bytes = serde_json::to_vec_pretty(&inner).map_err(|source| PhaseError::Plan {
        path: plan_file.clone(),
        source,
    })?;
    std::fs::write(&plan_file, bytes).map_err(PathIoError::at("write", &plan_file))?;
    extra.push(file(
        L1_PHASE_PLAN.trim_start_matches('/').to_string(),
        plan_file,
    ));
    let argv: Vec<String> = [
        "/bin/truecold",
        "tune-phase",
        "--plan",
        L1_PHASE_PLAN,
        "--out",
        &format!("{}/{}", truecold_nested::OUT_DIR, L1_BUNDLE),
        "--vmm",
        truecold_nested::engine_l1_path(Engine::Truecold),
        "--guest-dir",
        "/guest",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ra = l1_plan(plan, vmm, base_guest_dir, dest)?;
    let planned = plan.rounds.saturating_mul(plan.arms.len() as u64);
    let w = nested_campaign::in_l1(
        &ra,
        argv,
        extra,
        planned,
        base_guest_dir,
        dest.to_path_buf(),
    )
    .map_err(|e| PhaseError::Nested(Box::new(e)))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(w)
}

/// The campaign of a phase's L1 boot, as the nested harness sizes and seeds it: every
/// arm's launches (the rounds here; `planned` counts the arms), the attribution launches of
/// every attributed arm, L1's QEMU seed.
pub(super) fn l1_plan(
    plan: &PhasePlan,
    vmm: Option<&Path>,
    base_guest_dir: &Path,
    dest: &Path,
) -> Result<CampaignPlan, PhaseError> {
    // Sized for the arms' backings: an arm on hugetlb (the baseline's, or a backing knob's)
    // makes L1 reserve a pool for it (`nested_campaign::l1_hugetlb_pages`).
    let hugetlb = plan
        .arms
        .iter()
        .any(|a| truecold_proto::tune::apply(&a.knobs, plan.backing).backing == Backing::Hugetlb);
    let sized = if hugetlb {
        Backing::Hugetlb
    } else {
        plan.backing
    };
    let guest = GuestSpec::plain(plan.vcpus, plan.mem, sized);
    Ok(CampaignPlan::sequential(
        Target::Nested,
        guest,
        plan.rounds,
        plan.deadline_ms,
        plan.kill_grace_ms,
    )?
    .at(
        vmm.map(Path::to_path_buf),
        Some(base_guest_dir.to_path_buf()),
        Some(dest.to_path_buf()),
    )
    // L1's QEMU seed: the tune's, offset by the phase, so the phases' L1 runs draw
    // different random numbers (nonces, boot ids) and each is reproducible.
    .seeded(plan.seed.wrapping_add(phase_seed_offset(&plan.phase)))
    .attributed(plan.attribution.saturating_mul(plan.attribute.len() as u64)))
}

/// Runs one phase outside a tune (a bisect's kernel A/B): in one L1 boot when `nested`,
/// else on this host's /dev/kvm. `guest_dir` is the base guest directory.
pub fn run_one_phase(
    plan: &PhasePlan,
    nested: bool,
    vmm: Option<&Path>,
    guest_dir: &Path,
    dest: &Path,
    invocation: &str,
) -> Result<Written, PhaseError> {
    if nested {
        return nested_phase(plan, vmm, guest_dir, dest);
    }
    let (w, interrupted) = run_here(plan, vmm, guest_dir, dest, invocation)?;
    if interrupted {
        return Err(PhaseError::Interrupted("A/B"));
    }
    Ok(w)
}

/// Runs `plan` on this host's /dev/kvm (what `truecold tune-phase` does in L1): the written
/// phase directory and whether Ctrl-C cut it short.
pub fn run_here(
    plan: &PhasePlan,
    vmm: Option<&Path>,
    guest_dir: &Path,
    dest: &Path,
    invocation: &str,
) -> Result<(Written, bool), PhaseError> {
    let (host, warnings) = kvm_host()?;
    let facts = environment::read_facts(host);
    let env = PhaseEnv {
        vmm: guest_files::find_vmm(vmm)?,
        guest_dir: guest_dir.to_path_buf(),
        host,
        facts: &facts,
        warnings,
        invocation,
        force: host == HostKind::Pvm,
    };
    run_phase(plan, &env, dest)
}
