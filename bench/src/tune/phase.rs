//! One phase of interleaved arms, what `truecold tune` and `truecold bisect config` share:
//! a plan ([`super::phase_plan::PhasePlan`]: the arms, each a knob set and a guest
//! directory, the rounds, the seed), run launch by launch in rounds shuffled from the seed
//! ([`truecold_engine::order`]) on this host's /dev/kvm ([`run_phase`]) or in one L1 boot of
//! the nested harness ([`super::nested_phase::nested_phase`]); every arm a complete bundle,
//! the phase a multi-arm directory.

use super::phase_error::PhaseError;
use super::phase_plan::{PhaseArm, PhasePlan, BASELINE};
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::attribution::launches;
use crate::campaign::bundle_out;
use crate::campaign::execute::{report_line, self_cpu_ns, Executed};
use crate::campaign::process_launcher;
use crate::campaign::process_launcher::{ProcessLauncher, VmmCommand};
use crate::campaign::record::{Recorder, Spool};
use crate::campaign::sample::{mark_repeated_across_arms, mark_repeated_boot_ids, to_sample};
use crate::campaign::schedule::{Launcher, LevelRun, Schedule, Slot};
use crate::campaign::spec::CampaignSpec;
use crate::campaign::vmm_output;
use crate::checks::environment::RunFacts;
use crate::checks::snapshot::Snapshot;
use crate::engines::arms_dir;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args::{explicit_args, guest_flag, ArgPaths};
use crate::plan::guest::{GuestSpec, Target};
use crate::run::plain_campaign;
use crate::run::run_error::RunError;
use crate::terminal::interrupt;
use crate::terminal::progress::{ms_3_digits, Progress, Running, Style};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use truecold_nested::parallel::ParallelClock;
use truecold_proof::arms::{ArmRef, ArmsPlan};
use truecold_proof::bundle::{rename_noreplace, BundleInputs, Written};
use truecold_proof::names::REPORTS_FILE;
use truecold_proof::schema::{
    Configuration, ContractKind, EngineInfo, Environment, Observer, Sample,
};
use truecold_proto::kinds::{Engine, HostKind, ObtainedBacking};
use truecold_proto::measure::now_ns;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{self as knobs, Applied};

/// What one arm launches.
struct PreparedArm {
    arm: PhaseArm,
    applied: Applied,
    spec: CampaignSpec,
    guest: Option<LinuxGuest>,
    guest_dir: Option<PathBuf>,
    launcher: ProcessLauncher,
}

/// One arm as it ran: its rows and evidence staged as they come ([`campaign::record`]),
/// read back once every round ran.
#[derive(Default)]
struct ArmRows {
    /// While the rounds run.
    recorder: Option<Recorder>,
    launched: u64,
    /// The successes' latencies so far (the progress note).
    latencies: Running,
    /// Once they ran: the rows, read back, and the evidence's staging file.
    samples: Vec<Sample>,
    reports: Option<Spool>,
    staging_notes: Vec<String>,
    cmdlines: BTreeSet<String>,
    backings: BTreeMap<ObtainedBacking, u64>,
    cpu_ns: u64,
    wall_ns: u64,
    t_start_ns: Option<u64>,
    t_end_ns: u64,
}

/// Where a phase runs and what it records.
pub struct PhaseEnv<'a> {
    pub vmm: PathBuf,
    /// The base guest directory (Linux).
    pub guest_dir: PathBuf,
    pub host: HostKind,
    pub facts: &'a Environment,
    pub warnings: Vec<String>,
    pub invocation: &'a str,
    /// `--force` for the VMM (Linux on a kvm_pvm host).
    pub force: bool,
}

fn prepare_arm(
    plan: &PhasePlan,
    arm: &PhaseArm,
    env: &PhaseEnv<'_>,
) -> Result<PreparedArm, PhaseError> {
    let applied = knobs::apply(&arm.knobs, plan.backing);
    let spec = CampaignSpec {
        schedule: Schedule::Sequential { n: plan.rounds },
        contract: plan.contract,
        vcpus: plan.vcpus,
        mem: plan.mem,
        backing: applied.backing,
        ram_layout: applied.ram_layout,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: plan.deadline_ms.saturating_mul(1_000_000),
        kill_grace_ns: plan.kill_grace_ms.saturating_mul(1_000_000),
        observer: Observer::VmExit,
        interleaved: true,
        stop_after: None,
    };
    let (guest, guest_dir) = match plan.contract {
        ContractKind::Probe => (None, None),
        ContractKind::Linux => {
            let dir = arm
                .guest_dir
                .clone()
                .unwrap_or_else(|| env.guest_dir.clone());
            let g = if applied.bzimage {
                guest_files::linux_guest_bzimage(&dir)?
            } else {
                guest_files::linux_guest(&dir)?
            };
            (Some(g), Some(dir))
        }
    };
    let command = arm_command(
        plan,
        &spec,
        guest.as_ref(),
        &applied,
        &applied.cmdline_extra,
        env,
    );
    let launcher = ProcessLauncher {
        command,
        deadline_ns: spec.deadline_ns,
        kill_grace_ns: spec.kill_grace_ns,
        from_intended: false,
    };
    Ok(PreparedArm {
        arm: arm.clone(),
        applied,
        spec,
        guest,
        guest_dir,
        launcher,
    })
}

/// The VMM command of an arm's launches (`cmdline_extra`: the knobs', or the attribution
/// launches' own).
fn arm_command(
    plan: &PhasePlan,
    spec: &CampaignSpec,
    guest: Option<&LinuxGuest>,
    applied: &Applied,
    cmdline_extra: &str,
    env: &PhaseEnv<'_>,
) -> VmmCommand {
    VmmCommand {
        program: env.vmm.clone(),
        args: plain_campaign::vmm_args(
            spec,
            guest.map(|g| (g.vmlinux.as_path(), g.initramfs.as_path())),
            cmdline_extra,
            plain_campaign::VmmFlags {
                console: applied.console,
                pin_vcpus: applied.pin_vcpus,
            },
            env.force && plan.contract == ContractKind::Linux,
            env.host,
        ),
    }
}

/// Whether `arm`'s bundle gets attribution launches: the plan asks for them for it and the
/// measured rounds were not interrupted.
fn attributes(plan: &PhasePlan, arm: &PhaseArm, interrupted: bool) -> bool {
    plan.attribution > 0 && !interrupted && plan.attribute.contains(&arm.name)
}

/// The `truecold run` that runs `arm` alone (its bundle's `cmdline.txt`); with `attributed`
/// ([`attributes`]) its attribution launches too, the instrument spelt out.
fn arm_run_args(
    plan: &PhasePlan,
    p: &PreparedArm,
    vmm: &Path,
    out: &Path,
    attributed: bool,
) -> Result<Vec<String>, PhaseError> {
    let guest = GuestSpec {
        vcpus: plan.vcpus,
        mem: plan.mem,
        backing: Some(p.applied.backing),
        cmdline_extra: p.applied.cmdline_extra.clone(),
        console: p.applied.console,
        bzimage: p.applied.bzimage,
        ram_layout: p.applied.ram_layout,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        pin_vcpus: p.applied.pin_vcpus,
    };
    let mut run = CampaignPlan::sequential(
        Target::of_contract(plan.contract),
        guest,
        plan.rounds,
        plan.deadline_ms,
        plan.kill_grace_ms,
    )?;
    if attributed {
        run = run.attributed(plan.attribution);
        run.instrument = plan.instrument;
    }
    Ok(explicit_args(
        &run,
        guest_flag(plan.contract),
        ArgPaths {
            vmm,
            guest_dir: p.guest_dir.as_deref(),
            out,
            engines: &[],
        },
    ))
}

/// Runs one phase and writes it to `dest` as a multi-arm directory (atomically): every arm a
/// complete bundle, then `truecold_proof::arms::write_arms`. Returns the verdict on it.
pub fn run_phase(
    plan: &PhasePlan,
    env: &PhaseEnv<'_>,
    dest: &Path,
) -> Result<(Written, bool), PhaseError> {
    let bad = plan.problems();
    if !bad.is_empty() {
        return Err(PhaseError::PlanInvalid(bad.join("; ")));
    }
    if dest.symlink_metadata().is_ok() {
        return Err(PhaseError::OutExists(dest.to_path_buf()));
    }
    let prepared: Vec<PreparedArm> = plan
        .arms
        .iter()
        .map(|a| prepare_arm(plan, a, env))
        .collect::<Result<_, _>>()?;
    let version = plain_campaign::engine_version(&env.vmm)?;
    let stop = interrupt::install().map_err(|e| PhaseError::from(RunError::from(e)))?;
    announce(plan, &prepared, dest);
    let parallel = crate::campaign::parallel::clock_for(env.host)
        .map_err(|e| PhaseError::from(RunError::from(e)))?;
    let mut ran = run_rounds(
        plan,
        &prepared,
        stop,
        &bundle_out::staging_for(dest),
        parallel.as_ref(),
    )?;
    let repeated = mark_repeats(&prepared, &mut ran.rows);
    let tmp = bundle_out::staging_dir(dest, "tmp")?;
    let abs_dest = std::path::absolute(dest).unwrap_or_else(|_| dest.to_path_buf());
    // Attribution launches, after every measured round (never rows).
    let k = prepared.len();
    let mut attributions: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); k];
    for (i, p) in prepared.iter().enumerate() {
        if attributes(plan, &p.arm, ran.interrupted) {
            attributions[i] = attribute(plan, p, env, &ran.rows[i].samples, stop)?;
        }
    }
    let rows = std::mem::take(&mut ran.rows);
    for (i, ((p, r), files)) in prepared.iter().zip(rows).zip(attributions).enumerate() {
        let ex = executed(plan, &ran, r, repeated[i]);
        let written = ArmOut {
            dir: tmp.join(&p.arm.name),
            explicit: arm_run_args(
                plan,
                p,
                &env.vmm,
                &abs_dest.join(&p.arm.name),
                attributes(plan, &p.arm, ran.interrupted),
            )?,
            files,
        };
        write_arm(plan, env, p, &ex, &version, written)?;
    }
    let record = ArmsPlan {
        seed: plan.seed,
        rounds: plan.rounds,
        arms: plan
            .arms
            .iter()
            .map(|a| ArmRef::tune(a.name.clone(), a.knobs.clone()))
            .collect(),
        order: ran.order,
    };
    let verdict = truecold_proof::arms::write_arms(&tmp, &record).map_err(PhaseError::Arms)?;
    rename_noreplace(&tmp, dest).map_err(|source| PhaseError::Place {
        path: dest.to_path_buf(),
        source,
    })?;
    Ok((
        Written {
            path: dest.to_path_buf(),
            verdict,
        },
        ran.interrupted,
    ))
}

/// The phase's lines on stderr: what it is, then each arm's VMM command.
fn announce(plan: &PhasePlan, prepared: &[PreparedArm], dest: &Path) {
    crate::note!(
        "truecold: tune {} phase — {} — {} round(s) of {} arm(s) in seeded shuffled order \
         (seed {}), {} vCPU, {} → {}",
        plan.phase,
        plan.contract.label(),
        plan.rounds,
        prepared.len(),
        truecold_proof::seed::hex(plan.seed),
        plan.vcpus,
        plan.mem,
        dest.display()
    );
    for p in prepared {
        crate::note!(
            "truecold:   {}: {}",
            p.arm.name,
            process_launcher::shell_quote(&p.launcher.command.display(p.spec.deadline_ns, false))
        );
    }
}

/// The measured rounds of a phase, as they ran.
struct Rounds {
    rows: Vec<ArmRows>,
    /// `(round, arm name)` in launch order.
    order: Vec<(u64, String)>,
    interrupted: bool,
    before: Snapshot,
    after: Snapshot,
}

/// Every round, each arm launched once in the round's shuffled order, until done or Ctrl-C;
/// the rows staged in `staging` as they come.
fn run_rounds(
    plan: &PhasePlan,
    prepared: &[PreparedArm],
    stop: &AtomicBool,
    staging: &Path,
    parallel: Option<&ParallelClock>,
) -> Result<Rounds, PhaseError> {
    let k = prepared.len();
    let total = plan.rounds.saturating_mul(k as u64);
    let mut progress = Progress::new(
        std::io::stderr(),
        Style::detect(),
        &format!("tune {}", plan.phase),
        total,
    );
    let mut rows: Vec<ArmRows> = Vec::new();
    for _ in 0..k {
        rows.push(ArmRows {
            recorder: Some(Recorder::new(staging)?),
            ..ArmRows::default()
        });
    }
    let mut order: Vec<(u64, String)> = Vec::new();
    let mut interrupted = false;
    let before = Snapshot::take();
    for (round, i) in truecold_engine::order(k, plan.rounds, plan.seed) {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let p = &prepared[i];
        let (s, line) = launch_one(p, &mut rows[i], parallel);
        progress.record(s.ok, s.latency_ns);
        let arm = &mut rows[i];
        if let (true, Some(l)) = (s.ok, s.latency_ns) {
            arm.latencies.add(l);
        }
        arm.launched += 1;
        if let Some(r) = arm.recorder.as_mut() {
            r.record(s, line);
        }
        order.push((round, p.arm.name.clone()));
        progress.set_note(running_note(&p.arm.name, &rows[0], &rows[i]));
    }
    let after = Snapshot::take_after(&before);
    progress.finish();
    for arm in rows.iter_mut() {
        if let Some(r) = arm.recorder.take() {
            let r = r.finish()?;
            arm.samples = r.samples;
            arm.reports = Some(r.reports);
            arm.staging_notes = r.notes;
        }
    }
    Ok(Rounds {
        rows,
        order,
        interrupted,
        before,
        after,
    })
}

/// One launch of arm `p`: its row and its report line, with the harness's CPU and wall
/// time and the observed command line and backing added to `arm`.
fn launch_one(
    p: &PreparedArm,
    arm: &mut ArmRows,
    parallel: Option<&ParallelClock>,
) -> (Sample, String) {
    let ctx = p.spec.row_context();
    let slot = Slot {
        index: arm.launched,
        level: 1,
        intended_ns: now_ns(),
    };
    let (c0, t0) = (self_cpu_ns(), now_ns());
    let attempt = p.launcher.launch(slot);
    let (c1, t1) = (self_cpu_ns(), now_ns());
    arm.cpu_ns = arm.cpu_ns.saturating_add(c1.saturating_sub(c0));
    arm.wall_ns = arm.wall_ns.saturating_add(t1.saturating_sub(t0));
    arm.t_start_ns.get_or_insert(attempt.request_ns);
    arm.t_end_ns = attempt.reaped_ns;
    let (observed, why) = match vmm_output::observe_attempt(&attempt) {
        Ok(o) => (Some(o), None),
        Err(e) => (None, Some(e)),
    };
    if let Some(o) = &observed {
        arm.cmdlines.extend(o.cmdline.clone());
        if let Some(b) = o.backing {
            *arm.backings.entry(b).or_insert(0) += 1;
        }
    }
    let mut s = to_sample(&attempt, observed.as_ref(), why.as_deref(), &ctx);
    let reading = crate::campaign::parallel::apply(parallel, &mut s);
    let line = report_line(slot.index, &s, &attempt, reading);
    (s, line)
}

/// Marks repeated boot ids, unique within each arm and across the whole phase (every arm
/// boots the same guest); each arm's count.
fn mark_repeats(prepared: &[PreparedArm], rows: &mut [ArmRows]) -> Vec<usize> {
    let mut repeated: Vec<usize> = rows
        .iter_mut()
        .map(|r| mark_repeated_boot_ids(&mut r.samples))
        .collect();
    let names: Vec<&str> = prepared.iter().map(|p| p.arm.name.as_str()).collect();
    let cross = {
        let mut all: Vec<&mut [Sample]> =
            rows.iter_mut().map(|r| r.samples.as_mut_slice()).collect();
        mark_repeated_across_arms(&names, &mut all)
    };
    for (r, n) in repeated.iter_mut().zip(cross) {
        *r += n;
    }
    repeated
}

/// One arm's rows as a campaign that ran (one level of `plan.rounds` sequential launches).
fn executed(plan: &PhasePlan, ran: &Rounds, r: ArmRows, repeated: usize) -> Executed {
    let start = r.t_start_ns.unwrap_or(ran.before.t_ns);
    Executed {
        planned: plan.rounds,
        interrupted: ran.interrupted,
        stopped: None,
        levels: vec![LevelRun {
            level: 1,
            planned: plan.rounds,
            launched: r.samples.len() as u64,
            t_start_ns: start,
            t_end_ns: r.t_end_ns.max(start),
        }],
        before: ran.before.clone(),
        after: ran.after.clone(),
        run_facts: RunFacts {
            max_start_lag_ns: None,
            interval_ns: None,
            lanes: 1,
            in_window: Some((r.cpu_ns, r.wall_ns)),
            page_cache_dropped: None,
        },
        repeated_boot_ids: repeated,
        cmdlines: r.cmdlines,
        backings: r.backings,
        expired: 0,
        prepare_errors: Vec::new(),
        samples: r.samples,
        reports: r.reports.unwrap_or_else(Spool::empty),
        staging_notes: r.staging_notes,
    }
}

/// Where an arm's bundle goes and what it holds beyond the rows.
struct ArmOut {
    dir: PathBuf,
    /// The arm's own `truecold run` arguments.
    explicit: Vec<String>,
    /// Attribution files.
    files: Vec<(String, Vec<u8>)>,
}

/// Writes arm `p`'s bundle.
fn write_arm(
    plan: &PhasePlan,
    env: &PhaseEnv<'_>,
    p: &PreparedArm,
    ex: &Executed,
    version: &str,
    out: ArmOut,
) -> Result<(), PhaseError> {
    let guest_cmdline = ex.cmdlines.iter().next().cloned();
    let vmm_line = plain_campaign::vmm_command_line(&p.launcher.command, &p.spec);
    let configuration = Configuration {
        vcpus: u32::from(p.spec.vcpus.get()),
        mem_bytes: p.spec.mem.bytes(),
        backing: bundle_out::backing_description(p.spec.backing, &ex.backings),
        ram_layout: p.spec.ram_layout,
        cpu_platform: p.spec.cpu_platform,
        cmdline: match (&guest_cmdline, plan.contract) {
            (Some(c), ContractKind::Linux) => c.clone(),
            _ => vmm_line.clone(),
        },
        vmm_path: env.vmm.display().to_string(),
        kernel_path: p.guest.as_ref().map(|g| abs(&g.vmlinux)),
        initramfs_path: p.guest.as_ref().map(|g| abs(&g.initramfs)),
        engine: EngineInfo {
            kind: Engine::Truecold,
            version: version.to_string(),
        },
        knobs: p.arm.knobs.clone(),
    };
    let digests = guest_files::digests(&env.vmm, p.guest.as_ref())?;
    let result = bundle_out::result_json(
        &p.spec,
        ex,
        configuration,
        digests,
        env.facts,
        arm_warnings(plan, env),
    );
    let kernel_config = match &p.guest {
        Some(g) => Some(std::fs::read(&g.config).map_err(PathIoError::at("read", &g.config))?),
        None => None,
    };
    let mut inputs = BundleInputs {
        kernel_config,
        cmdline: plain_campaign::cmdline_txt(
            plan.contract.label(),
            env.invocation,
            &out.explicit,
            &vmm_line,
            guest_cmdline.as_deref(),
        ),
        extra_files: out.files,
        staged_files: Vec::new(),
    };
    ex.reports.add_to(REPORTS_FILE, &mut inputs)?;
    bundle_out::write(&out.dir, &result, &ex.samples, &inputs).map_err(|source| {
        PhaseError::Bundle {
            arm: p.arm.name.clone(),
            source,
        }
    })?;
    Ok(())
}

/// An arm bundle's warnings: the environment's, and that it is one arm of an interleaved
/// phase.
fn arm_warnings(plan: &PhasePlan, env: &PhaseEnv<'_>) -> Vec<String> {
    let mut warnings = env.warnings.clone();
    warnings.push(arms_dir::interleaved_arm_warning(
        &format!("the tune's {} phase", plan.phase),
        plan.arms.iter().map(|a| a.name.as_str()),
        plan.seed,
    ));
    warnings
}

/// `p`'s attribution files: `plan.attribution` launches measured by `plan.instrument`, then
/// attribution.jsonl (always) and attribution.csv / .svg (when they can be made; kept as
/// data otherwise: the arm's verifier names why).
fn attribute(
    plan: &PhasePlan,
    p: &PreparedArm,
    env: &PhaseEnv<'_>,
    measured: &[Sample],
    stop: &AtomicBool,
) -> Result<Vec<(String, Vec<u8>)>, PhaseError> {
    let extra = plan.instrument.cmdline_extra(&p.applied.cmdline_extra);
    let command = plan.instrument.command(
        arm_command(plan, &p.spec, p.guest.as_ref(), &p.applied, &extra, env),
        p.guest.as_ref().map(|g| g.config.as_path()),
    );
    let jsonl = launches::run_for(
        &p.spec,
        &command,
        plan.attribution,
        p.guest.as_ref().map(|g| g.symbols.as_path()),
        stop,
    )
    .map_err(|e| PhaseError::from(RunError::from(e)))?;
    let mut files = Vec::new();
    match truecold_proof::attribution::generate(&jsonl, measured, env.host.clock().describe()) {
        Ok(f) => files.extend(f),
        Err(e) => eprintln!("truecold: tune: attribution of {}: {e}", p.arm.name),
    }
    files.push((truecold_proof::attribution::JSONL_FILE.to_string(), jsonl));
    Ok(files)
}

/// The progress note: the current arm and, once both have successes, its running p50 and
/// the baseline's (three significant digits, [`Running`]; display only: the bundle is
/// computed from the rows).
fn running_note(name: &str, baseline: &ArmRows, arm: &ArmRows) -> String {
    let p50 = |r: &ArmRows| r.latencies.percentile(50, 100);
    match (name == BASELINE, p50(baseline), p50(arm)) {
        (false, Some(b), Some(a)) => format!(
            "arm {name}: running p50 {} (baseline {})",
            ms_3_digits(a),
            ms_3_digits(b)
        ),
        _ => format!("arm {name}"),
    }
}

fn abs(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests;
