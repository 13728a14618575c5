//! `truecold run`'s flags checked against each other, once: the engine arms and each arm's
//! backing and guest, the parity contract, the user's kernel, the schedule (mode, count,
//! concurrency, rate, deadline) and the fail-fast rule. [`super::campaign_plan`] calls these
//! to build the plan.

use super::arg_error::ArgError;
use super::common_flags::deadline_ms;
use super::kernel_plan::kernel_config_of;
use crate::artifacts::own_kernel::{ConfigForm, OwnKernel};
use crate::campaign::schedule::{
    interval_for_rate, Schedule, ScheduleError, DEFAULT_OPEN_LOOP_IN_FLIGHT,
};
use crate::cli::{KernelConfigArgs, ModeArg, RunArgs, DEFAULT_SEED};
use std::path::PathBuf;
use truecold_proto::kinds::{Backing, Engine};

/// Default concurrency of burst and churn.
pub const DEFAULT_CONCURRENCY: u32 = 2;
/// Default top level of the sweep.
pub const DEFAULT_SWEEP_MAX: u32 = 4;

fn mode_name(m: ModeArg) -> &'static str {
    match m {
        ModeArg::Sequential => "sequential",
        ModeArg::Burst => "burst",
        ModeArg::OpenLoop => "open-loop",
        ModeArg::Sweep => "sweep",
        ModeArg::Churn => "churn",
    }
}

/// `--kernel-config` / `--kernel-source`: a Linux campaign under the strict contract.
pub(super) fn own_kernel(a: &RunArgs) -> Result<Option<OwnKernel>, ArgError> {
    let given = a.own_kernel != KernelConfigArgs::default();
    if !given && a.kernel_source.is_some() && !a.arm_kernel_config.is_empty() {
        // --kernel-source builds the arms' kernels alone (arm_guests).
        return Ok(None);
    }
    let Some(k) = kernel_config_of(&a.own_kernel, a.kernel_source.as_deref())? else {
        return Ok(None);
    };
    if a.probe {
        return Err(ArgError::OwnKernel(
            "the probe guest has no kernel: boot Linux (--linux, --nested)",
        ));
    }
    if a.parity {
        return Err(ArgError::OwnKernel(
            "the parity contract boots its own parity kernel and workspace image; \
             --kernel-config runs the strict contract only (for now)",
        ));
    }
    Ok(Some(k))
}

/// The engine arms, in the order given (`--engine` then `--engines`). Checked: no engine
/// twice, and the flags of the other kind of campaign absent.
pub(super) fn arms(a: &RunArgs) -> Result<Vec<Engine>, ArgError> {
    let mut arms: Vec<Engine> = Vec::new();
    for e in a.engine.iter().chain(&a.engines) {
        if arms.contains(e) {
            return Err(ArgError::DuplicateEngine(*e));
        }
        arms.push(*e);
    }
    if arms.is_empty() {
        for (set, flag) in [
            (a.firecracker.is_some(), "firecracker"),
            (a.cloud_hypervisor.is_some(), "cloud-hypervisor"),
            (a.qemu.is_some(), "qemu"),
        ] {
            if set {
                return Err(ArgError::EnginesOnly(flag));
            }
        }
        // With --nested the seed is L1's QEMU `-seed` (any campaign there).
        if a.seed != DEFAULT_SEED && !a.nested {
            return Err(ArgError::SeedNotUsed);
        }
        return Ok(arms);
    }
    if a.mode != ModeArg::Sequential {
        return Err(ArgError::EnginesMode);
    }
    if a.probe {
        return Err(ArgError::NotForEngines("probe"));
    }
    if a.console {
        return Err(ArgError::NotForEngines("console"));
    }
    if a.pin_vcpus {
        return Err(ArgError::PinEngines);
    }
    if a.packages != 1 || a.invariant_tsc {
        return Err(ArgError::PlatformEngines);
    }
    if a.attribution > 0 {
        return Err(ArgError::AttributionEngines);
    }
    Ok(arms)
}

/// `--arm-backing`: each an arm of the campaign, at most once.
pub(super) fn arm_backing(
    a: &RunArgs,
    arms: &[Engine],
) -> Result<Vec<(Engine, Backing)>, ArgError> {
    let mut out: Vec<(Engine, Backing)> = Vec::new();
    for &(e, b) in &a.arm_backing {
        if !arms.contains(&e) {
            return Err(ArgError::ArmBackingNotAnArm(e));
        }
        if out.iter().any(|(x, _)| *x == e) {
            return Err(ArgError::ArmBackingTwice(e));
        }
        out.push((e, b));
    }
    Ok(out)
}

/// `--arm-kernel-config` and `--arm-guest-dir`: each an arm of a strict engines campaign, one
/// guest per arm.
#[allow(clippy::type_complexity)]
pub(super) fn arm_guests(
    a: &RunArgs,
    arms: &[Engine],
) -> Result<(Vec<(Engine, OwnKernel)>, Vec<(Engine, PathBuf)>), ArgError> {
    if a.arm_kernel_config.is_empty() && a.arm_guest_dir.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    if a.parity {
        return Err(ArgError::ArmGuest(
            "the parity contract boots its own parity kernel in every arm",
        ));
    }
    let mut seen: Vec<Engine> = Vec::new();
    let mut check = |flag: &'static str, e: Engine| {
        if !arms.contains(&e) {
            return Err(ArgError::ArmGuestNotAnArm { flag, engine: e });
        }
        if seen.contains(&e) {
            return Err(ArgError::ArmGuestTwice(e));
        }
        seen.push(e);
        Ok(())
    };
    let mut kernels = Vec::new();
    for (e, f) in &a.arm_kernel_config {
        check("arm-kernel-config", *e)?;
        kernels.push((
            *e,
            OwnKernel {
                config: f.clone(),
                form: ConfigForm::Full,
                source: a.kernel_source.clone(),
            },
        ));
    }
    let mut dirs = Vec::new();
    for (e, d) in &a.arm_guest_dir {
        check("arm-guest-dir", *e)?;
        dirs.push((*e, d.clone()));
    }
    Ok((kernels, dirs))
}

/// `--parity` and `--inject-tap-name` against the rest.
pub(super) fn check_parity(a: &RunArgs, arms: &[Engine]) -> Result<(), ArgError> {
    if a.inject_tap_name.is_some() && !a.parity {
        return Err(ArgError::Parity(
            "--inject-tap-name applies to --parity only",
        ));
    }
    if !a.parity {
        return Ok(());
    }
    if let Some(why) = arms.iter().find_map(|e| e.no_parity_launch()) {
        return Err(ArgError::Parity(why));
    }
    for (bad, why) in [
        (
            a.drop_caches,
            "the page cache is not dropped between parity launches (no --drop-caches)",
        ),
        (a.probe, "the parity contract boots Linux (no --probe)"),
        (
            a.mode != ModeArg::Sequential,
            "sequential only (one tap at a time)",
        ),
        (
            a.console,
            "the serial console is not part of the contract (no --console)",
        ),
        (
            a.pin_vcpus,
            "no peer engine pins its vCPUs the same way (no --pin-vcpus)",
        ),
        (
            a.packages != 1 || a.invariant_tsc,
            "every arm presents one package and the host's TSC (no --packages, --invariant-tsc)",
        ),
        (
            a.attribution > 0,
            "attribution launches are not parity launches",
        ),
    ] {
        if bad {
            return Err(ArgError::Parity(why));
        }
    }
    Ok(())
}

/// Whether the fail-fast rule runs in a campaign: sequential, truecold alone, not under the
/// parity contract (whose launches go through the engines driver, which runs every one).
pub(super) fn rule_runs(schedule: &Schedule, truecold_alone: bool, parity: bool) -> bool {
    matches!(schedule, Schedule::Sequential { .. }) && truecold_alone && !parity
}

/// The fail-fast rule's K: `--stop-after K` or the default in a sequential campaign of
/// truecold alone; none under `--keep-going` or anywhere else (`--stop-after` there is an
/// error).
pub(super) fn stop_after(
    a: &RunArgs,
    schedule: &Schedule,
    engines: &[Engine],
) -> Result<Option<u64>, ArgError> {
    let applies = rule_runs(schedule, engines.is_empty(), a.parity);
    match (applies, a.keep_going, a.stop_after) {
        (false, _, Some(_)) => Err(ArgError::StopAfterNotSequential),
        (false, _, None) | (true, true, _) => Ok(None),
        (true, false, k) => Ok(Some(k.unwrap_or(truecold_proof::StopRule::DEFAULT_AFTER))),
    }
}

/// The schedule the arguments describe, checked (with the deadline).
pub(super) fn schedule(a: &RunArgs) -> Result<Schedule, ArgError> {
    let mode = mode_name(a.mode);
    let not_for = |flag, applies_to| ArgError::NotForMode {
        flag,
        applies_to,
        mode,
    };
    if a.rate.is_some() && a.mode != ModeArg::OpenLoop {
        return Err(not_for("rate", "open-loop"));
    }
    if a.max_concurrency.is_some() && a.mode != ModeArg::Sweep {
        return Err(not_for("max-concurrency", "sweep"));
    }
    if a.concurrency.is_some() && matches!(a.mode, ModeArg::Sequential | ModeArg::Sweep) {
        return Err(not_for("concurrency", "burst, churn or open-loop"));
    }
    if deadline_ms(a.deadline_ms, a.nested) == 0 {
        return Err(ArgError::DeadlineZero);
    }
    let n = a.count;
    let s = match a.mode {
        ModeArg::Sequential => Schedule::Sequential { n },
        ModeArg::Burst => Schedule::Burst {
            n,
            concurrency: a.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        },
        ModeArg::Churn => Schedule::Churn {
            n,
            concurrency: a.concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        },
        ModeArg::Sweep => Schedule::Sweep {
            n_per_level: n,
            max_concurrency: a.max_concurrency.unwrap_or(DEFAULT_SWEEP_MAX),
        },
        ModeArg::OpenLoop => {
            let rate = a.rate.ok_or(ArgError::RateMissing)?;
            if !rate.is_finite() || rate <= 0.0 {
                return Err(ScheduleError::BadRate(rate).into());
            }
            // The schema records integer arrivals per 1,000 s; the interval follows it.
            let per_ks = (rate * 1000.0).round();
            if per_ks < 1.0 {
                return Err(ArgError::RateTooLow(rate));
            }
            let interval_ns = interval_for_rate(per_ks / 1000.0)?;
            Schedule::OpenLoop {
                n,
                interval_ns,
                max_in_flight: a.concurrency.unwrap_or(DEFAULT_OPEN_LOOP_IN_FLIGHT),
            }
        }
    };
    s.validate()?;
    Ok(s)
}
