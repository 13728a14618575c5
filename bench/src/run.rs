//! `truecold run`: from a checked plan ([`crate::plan`]) to a written, verified bundle. The
//! kind of campaign the plan is picks its module: the parity or the engines campaign
//! ([`crate::engines_campaign`]), the nested harness ([`crate::nested`]), or the plain one
//! ([`crate::plain`]).

use crate::artifacts::guest_files;
use crate::artifacts::kernel_build::DEFAULT_KERNEL_BUILD;
use crate::artifacts::own_kernel::{self, OwnKernel};
pub use crate::campaign::bundle_out::RunOutcome;
use crate::checks::preflight::HostLimits;
use crate::engines_campaign;
pub use crate::error::RunError;
use crate::nested;
use crate::plain::{self, check_drop_caches};
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
    if plan.target == Target::Auto && crate::checks::preflight::kvm_host()?.0 == HostKind::Pvm {
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
        crate::checks::preflight::preflight(
            HostLimits::read(),
            plan.guest.mem,
            &plan.asked_backings(),
        )?;
    }
    if plan.parity {
        return engines_campaign::run_parity(plan, invocation);
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
            written: nested::run(plan, planned, &guest_dir)?,
            interrupted: false,
            warnings: vec![nested::WARNING.to_string()],
            arms: Vec::new(),
        });
    }
    plain::run(plan, invocation)
}

/// One line per concurrency level (burst, churn, sweep): latency and sustained throughput,
/// and the knee as `truecold-proof` defines it.
pub fn level_lines(r: &truecold_proof::schema::ResultJson) -> Vec<String> {
    use truecold_proof::report::ms;
    let sm = &r.summary;
    let mut out: Vec<String> = sm
        .by_concurrency
        .iter()
        .filter(|g| g.concurrency > 1 || sm.by_concurrency.len() > 1)
        .map(|g| {
            let p = |f: fn(&truecold_proof::stats::Summary) -> u64| {
                g.headline
                    .successes
                    .as_ref()
                    .map(|s| format!("{} ms", ms(f(s))))
                    .unwrap_or_else(|| "–".into())
            };
            let tput = g
                .throughput_per_ks
                .map(|t| format!("{}.{:03}/s", t / 1000, t % 1000))
                .unwrap_or_else(|| "–".into());
            format!(
                "  concurrency {}: {} attempts, {} ok, p50 {}, p99 {}, throughput {tput}",
                g.concurrency,
                g.attempts,
                g.successes,
                p(|s| s.p50),
                p(|s| s.p99)
            )
        })
        .collect();
    if let Some(k) = sm.peak_throughput_concurrency {
        out.push(format!("  highest throughput: concurrency {k}"));
    }
    if let Some(k) = sm.knee_concurrency {
        out.push(format!(
            "  knee (p50 above 1.5x the concurrency-1 p50): concurrency {k}"
        ));
    }
    out
}

/// The failed launches of a finished campaign: every error kind with its count, summed over
/// the bundle and (engines campaign) its arms' bundles; empty when every launch succeeded.
pub fn failed_kinds(out: &RunOutcome) -> std::collections::BTreeMap<String, u64> {
    let mut kinds = std::collections::BTreeMap::new();
    let results = std::iter::once(&out.written)
        .chain(out.arms.iter().map(|(_, w)| w))
        .filter_map(|w| w.verdict.result.as_ref());
    for r in results {
        for (k, n) in &r.summary.errors {
            *kinds.entry(k.clone()).or_insert(0) += n;
        }
    }
    kinds
}

/// The error-kind table the summary ends with when any launch failed: `kind → count`.
pub fn failure_lines(kinds: &std::collections::BTreeMap<String, u64>) -> Vec<String> {
    if kinds.is_empty() {
        return Vec::new();
    }
    let total: u64 = kinds.values().sum();
    let width = kinds.keys().map(|k| k.len()).max().unwrap_or(0);
    let mut v = vec![format!("failed launches by error kind ({total} in all):")];
    v.extend(kinds.iter().map(|(k, n)| format!("  {k:<width$}  {n}")));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_kind_table_lists_every_kind_with_its_count() {
        let none = std::collections::BTreeMap::new();
        assert!(failure_lines(&none).is_empty());
        let kinds: std::collections::BTreeMap<String, u64> = [
            ("vmm_memory_too_large".to_string(), 2),
            ("deadline".to_string(), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            failure_lines(&kinds),
            [
                "failed launches by error kind (3 in all):",
                "  deadline              1",
                "  vmm_memory_too_large  2",
            ]
        );
    }
}
