//! What every step of a commit or config bisect shares: the base guest, the record's guest,
//! the next step directory's name, the interleaved A/B of the good side's kernel against a
//! step's (`KernelAb`), the directory saved, the host a bisect measures on and where its
//! directory goes by default.

use super::bisect_error::BisectRunError;
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::attribution::instrumentation::Instrumentation;
use crate::campaign::clock;
use crate::checks::preflight;
use crate::plan::arg_error::ArgError;
use crate::plan::bisect_plan::{BisectContext, JudgePlan};
use crate::plan::common_flags::DEFAULT_DEADLINE_MS;
use crate::plan::common_flags::DEFAULT_NESTED_DEADLINE_MS;
use crate::tune::nested_phase;
use crate::tune::phase_plan::{PhaseArm, PhasePlan};
use std::path::{Path, PathBuf};
use truecold_proof::bisect::{
    judge_look, write_bisect, BisectFile, Judgement, CANDIDATE_ARM, GOOD_ARM, STEPS_DIR,
};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, HostKind};
use truecold_proto::limits::{GuestMem, Vcpus};

/// The base guest directory and its guest (the initramfs and init every kernel goes with).
pub(super) fn base(j: &JudgePlan) -> Result<(PathBuf, LinuxGuest), BisectRunError> {
    let dir = j.paths.guest_dir.clone();
    let g = guest_files::linux_guest(&dir).map_err(|e| BisectRunError::Baseline {
        path: dir.clone(),
        why: format!(
            "{} (scripts/build-artifacts.sh builds the guest)",
            truecold_proto::measure::error_chain(&e)
        ),
    })?;
    Ok((dir, g))
}

/// The record's guest, checked (a record read back from a directory is a boundary).
pub(super) fn record_guest(f: &BisectFile) -> Result<(Vcpus, GuestMem), BisectRunError> {
    let bad = |e: truecold_proto::limits::LimitError| {
        BisectRunError::Run(Box::new(ArgError::from(e).into()))
    };
    Ok((
        Vcpus::new(u64::from(f.vcpus)).map_err(bad)?,
        GuestMem::from_bytes(f.mem_bytes).map_err(bad)?,
    ))
}

pub(super) fn save(dir: &Path, f: &BisectFile, log: &str) -> Result<(), BisectRunError> {
    write_bisect(dir, f, log).map_err(BisectRunError::Record)?;
    Ok(())
}

/// The next step directory's name: `steps/NN-<what>-n<n>`.
pub(super) fn step_dir(f: &BisectFile, what: &str, n: u64) -> String {
    format!("{STEPS_DIR}/{:02}-{what}-n{n}", f.steps.len() + 1)
}

/// A note when the first look cannot call a step bad at all (n below
/// [`truecold_proof::bisect::Looks::smallest_n`]): it can still call it good, and a later look
/// can call it bad.
pub(super) fn note_small_n(j: &JudgePlan) {
    let looks = truecold_proof::bisect::Looks::new(j.n, j.max_n);
    match looks.smallest_n(j.options.alpha) {
        Some(m) if j.n < m => crate::note!(
            "truecold bisect: note: {} launches a side cannot reach the first look's p < {} \
             ({} looks share α {}); a regression needs a later look (-n {m} or more reaches it \
             at the first)",
            j.n,
            truecold_proof::fmt::p_text(looks.alpha(j.options.alpha)),
            looks.count(),
            j.options.alpha
        ),
        _ => {}
    }
}

/// The interleaved A/B every schema-2 step runs: the good side's kernel (arm `good`)
/// against a step's (arm `candidate`), in one L1 boot when nested, else on this host's
/// /dev/kvm ([`crate::tune::nested_phase::run_one_phase`]: the machinery of `tune`'s phases).
pub(super) struct KernelAb<'a> {
    pub nested: bool,
    pub vmm: Option<&'a Path>,
    /// The base guest directory (initramfs, init).
    pub base_dir: &'a Path,
    /// The good side's guest directory.
    pub good_dir: &'a Path,
    pub backing: Backing,
    pub deadline_ms: u64,
    pub invocation: &'a str,
}

impl KernelAb<'_> {
    /// Look `look` of the step for the kernel in `cand_dir`: its A/B written at the next
    /// step directory (`steps/NN-<what>-n<size>`), verified, and judged by the looks' rule
    /// ([`judge_look`]). Returns the directory (relative), the launches a side and the
    /// judgement.
    pub fn look(
        &self,
        f: &BisectFile,
        dir: &Path,
        cand_dir: &Path,
        what: &str,
        look: u32,
    ) -> Result<(String, u64, Judgement), BisectRunError> {
        let looks = f.looks();
        let planned = looks.size(look).ok_or_else(|| {
            BisectRunError::Run(Box::new(
                ArgError::BisectSizes {
                    n: f.n,
                    max_n: f.max_n,
                }
                .into(),
            ))
        })?;
        let (vcpus, mem) = record_guest(f)?;
        let rel = step_dir(f, what, planned);
        let plan = PhasePlan {
            phase: "ab".into(),
            contract: ContractKind::Linux,
            seed: crate::cli::DEFAULT_SEED.wrapping_add(f.steps.len() as u64),
            rounds: planned,
            vcpus,
            mem,
            backing: self.backing,
            deadline_ms: self.deadline_ms,
            kill_grace_ms: 500,
            arms: vec![
                PhaseArm {
                    name: GOOD_ARM.into(),
                    knobs: Vec::new(),
                    guest_dir: Some(self.good_dir.to_path_buf()),
                },
                PhaseArm {
                    name: CANDIDATE_ARM.into(),
                    knobs: Vec::new(),
                    guest_dir: Some(cand_dir.to_path_buf()),
                },
            ],
            attribution: 0,
            instrument: Instrumentation::default(),
            attribute: Vec::new(),
        };
        let dest = dir.join(&rel);
        let w = nested_phase::run_one_phase(
            &plan,
            self.nested,
            self.vmm,
            self.base_dir,
            &dest,
            self.invocation,
        )
        .map_err(|e| BisectRunError::Phase(Box::new(e)))?;
        if !w.verdict.is_valid() {
            return Err(BisectRunError::Invalid {
                why: w.verdict.render(&w.path, 3).trim().replace('\n', "; "),
                path: w.path,
            });
        }
        let (g, c) = truecold_proof::bisect::ab_sides(&dest);
        let jd = judge_look(&g, &c, &f.judge, &looks).map_err(|source| BisectRunError::Judge {
            path: dest.clone(),
            source,
        })?;
        Ok((rel, planned, jd))
    }
}

/// `results/<UTC>-bisect-<kind>-<host>-<v>vcpu-<m>mib`.
pub(super) fn default_out(kind: &str, c: &BisectContext) -> PathBuf {
    let (stamp, _) = clock::utc_now();
    PathBuf::from("results").join(format!(
        "{stamp}-bisect-{kind}-{}-{}vcpu-{}mib",
        if c.nested { "nested-linux" } else { "linux" },
        c.vcpus,
        c.mem.mib()
    ))
}

/// The host a bisect measures on and its deadline default.
pub(super) fn context_host(c: &BisectContext) -> Result<(HostKind, u64), BisectRunError> {
    if c.nested {
        return Ok((HostKind::NestedEmulated, DEFAULT_NESTED_DEADLINE_MS));
    }
    let (k, _) = preflight::kvm_host().map_err(|e| BisectRunError::Run(Box::new(e.into())))?;
    Ok((k, DEFAULT_DEADLINE_MS))
}
