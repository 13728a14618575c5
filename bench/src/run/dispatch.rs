//! `truecold run`'s entry ([`run`]): the user's kernels built first, the host checked once,
//! then the kind of campaign the plan is picks its module: the parity campaign
//! ([`super::parity_campaign`]), the engines campaign ([`super::engines_campaign`]), the
//! nested harness ([`super::nested_campaign`]) or the plain one ([`super::plain_campaign`]).

use super::engines_campaign;
use super::nested_campaign;
use super::outcome::RunOutcome;
use super::parity_campaign;
use super::plain_campaign::{self, check_drop_caches};
use super::run_error::RunError;
use crate::artifacts::guest_files;
use crate::artifacts::kernel_build::DEFAULT_KERNEL_BUILD;
use crate::artifacts::own_kernel::{self, OwnKernel};
use crate::checks::preflight;
use crate::checks::preflight::HostLimits;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::guest::Target;
use std::path::Path;
use truecold_proof::schema::HostKind;

/// Runs the campaign `plan` describes and writes its bundle. `invocation` is the command
/// line as typed (for `cmdline.txt`); progress and notes go to stderr.
pub fn run(plan: &CampaignPlan, invocation: &str) -> Result<RunOutcome, RunError> {
    let mut plan = plan.clone();
    if let Some(k) = plan.own_kernel.clone() {
        plan = with_own_kernel(&plan, &k)?;
    }
    for (engine, k) in std::mem::take(&mut plan.arm_kernel) {
        let dir = build_own_kernel(&plan, &k, &[engine], &format!("arm `{engine}`: "))?;
        plan.arm_guest_dir.push((engine, dir));
    }
    run_plan(&plan, invocation)
}

/// `plan` running from the user's kernel: built (or found cached) into its guest directory,
/// which replaces the plan's; the symbols that did not carry over printed.
fn with_own_kernel(plan: &CampaignPlan, k: &OwnKernel) -> Result<CampaignPlan, RunError> {
    let dir = build_own_kernel(plan, k, &plan.engines, "")?;
    let mut p = plan.clone();
    p.guest_dir = Some(dir);
    p.own_kernel = None;
    Ok(p)
}

/// The user's kernel `k` built (or found cached) into its guest directory, checked for a
/// campaign of `engines` (`who`: whose kernel, for the messages); the symbols that did not
/// carry over printed.
fn build_own_kernel(
    plan: &CampaignPlan,
    k: &OwnKernel,
    engines: &[truecold_proto::kinds::Engine],
    who: &str,
) -> Result<std::path::PathBuf, RunError> {
    if plan.target == Target::Auto && preflight::kvm_host()?.0 == HostKind::Pvm {
        return Err(RunError::OwnKernelOnPvm);
    }
    let base = guest_files::linux_guest(&guest_files::guest_dir(plan.guest_dir.as_deref()))?;
    let (dir, not_carried) = own_kernel::prepare(
        k,
        u32::from(plan.guest.vcpus.get()),
        engines,
        Path::new(DEFAULT_KERNEL_BUILD),
        &base,
        Path::new(own_kernel::RUN_KERNELS_DIR),
    )?;
    own_kernel::note_not_carried(who, &k.config, &dir, &not_carried);
    Ok(dir)
}

fn run_plan(plan: &CampaignPlan, invocation: &str) -> Result<RunOutcome, RunError> {
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    check_drop_caches(
        plan.drop_caches,
        &plan.schedule,
        (!plan.nested()).then_some(euid),
    )?;
    if !plan.nested() {
        // Every rule the VMM would refuse each launch by, checked once before the first
        // (the nested harness's L1 checks its own).
        preflight::preflight(HostLimits::read(), plan.guest.mem, &plan.asked_backings())?;
    }
    if plan.parity {
        return parity_campaign::run_parity(plan, invocation);
    }
    if !plan.engines.is_empty() {
        return engines_campaign::run_engines(plan, invocation);
    }
    if plan.nested() {
        // Needs no KVM here: QEMU emulates the CPU, L1 brings its own KVM.
        let planned = plan.planned()?;
        let guest_dir = guest_files::guest_dir(plan.guest_dir.as_deref());
        if plan.guest.bzimage {
            // The bzImage is packed into L1 beside the guest: there before L1 boots.
            guest_files::linux_guest_bzimage(&guest_dir)?;
        }
        return Ok(RunOutcome {
            written: nested_campaign::run(plan, planned, &guest_dir)?,
            interrupted: false,
            warnings: vec![nested_campaign::WARNING.to_string()],
            arms: Vec::new(),
        });
    }
    plain_campaign::run(plan, invocation)
}
