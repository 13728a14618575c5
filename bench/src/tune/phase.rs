//! One phase of interleaved arms, what `truecold tune` and `truecold bisect config` share:
//! a plan ([`PhasePlan`]: the arms, each a knob set and a guest directory, the rounds, the
//! seed), run launch by launch in rounds shuffled from the seed ([`truecold_engine::order`])
//! on this host's /dev/kvm ([`run_phase`]) or in one L1 boot of the nested harness
//! ([`nested_phase`]); every arm a complete bundle, the phase a multi-arm directory.

use crate::artifacts::guest_files::{self, ArtifactError, LinuxGuest};
use crate::campaign::bundle_out;
use crate::campaign::execute::{report_line, self_cpu_ns, Executed};
use crate::campaign::process_launcher::{ProcessLauncher, VmmCommand};
use crate::campaign::record::{Recorder, Spool, StagingError};
use crate::campaign::sample::{mark_repeated_across_arms, mark_repeated_boot_ids, to_sample};
use crate::campaign::schedule::{Launcher, LevelRun, Schedule, Slot};
use crate::campaign::spec::CampaignSpec;
use crate::campaign::vmm_output;
use crate::checks::environment::RunFacts;
use crate::checks::preflight::{kvm_host, HostError};
use crate::checks::snapshot::Snapshot;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args::{explicit_args, guest_flag, ArgPaths};
use crate::plan::guest::{GuestSpec, Target};
use crate::run::plain_campaign;
use crate::run::run_error::RunError;
use crate::terminal::progress::{ms_3_digits, Progress, Running, Style};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use truecold_proof::arms::{ArmRef, ArmsPlan};
use truecold_proof::bundle::{rename_noreplace, BundleError, BundleInputs, Written};
use truecold_proof::reports::REPORTS_FILE;
use truecold_proof::schema::{
    Configuration, ContractKind, EngineInfo, Environment, Observer, Sample,
};
use truecold_proto::kinds::{Backing, Engine, HostKind, ObtainedBacking};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::now_ns;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{self as knobs, Applied, Change, Knob, TuneGuest};

/// A tune's phase directories.
pub const SCREEN: &str = "screen";
pub const CONFIRM: &str = "confirm";
/// The baseline arm's name.
pub const BASELINE: &str = "baseline";
pub use truecold_proof::tune::MIN_ROUNDS;
/// The phase plan's name inside L1.
pub const L1_PHASE_PLAN: &str = "/l1/phase.json";

/// Why a phase could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("{0} already exists; a tune directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the host")]
    Run(#[source] Box<RunError>),
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the phase plan {} does not parse", path.display())]
    Plan {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the phase plan is not consistent: {0}")]
    PlanInvalid(String),
    #[error("the phase plan is not consistent")]
    Args(#[from] crate::plan::arg_error::ArgError),
    #[error("writing arm `{arm}`'s bundle")]
    Bundle {
        arm: String,
        #[source]
        source: BundleError,
    },
    #[error("placing {}", path.display())]
    Place {
        path: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error("writing the phase's comparison")]
    Arms(#[source] truecold_proof::arms::ArmsError),
    #[error("the nested harness")]
    Nested(#[source] Box<crate::run::nested_campaign::NestedError>),
    #[error("interrupted (Ctrl-C) during the {0} phase; the phase directory is kept incomplete")]
    Interrupted(&'static str),
    #[error("the phase's staged rows")]
    Staging(#[from] StagingError),
}

impl From<RunError> for PhaseError {
    fn from(e: RunError) -> Self {
        PhaseError::Run(Box::new(e))
    }
}

impl From<HostError> for PhaseError {
    fn from(e: HostError) -> Self {
        RunError::from(e).into()
    }
}

/// The phase plan's vCPU count, checked when the plan is read (L1 reads the host's).
mod vcpus_count {
    use super::Vcpus;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Vcpus, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(v.get())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vcpus, D::Error> {
        Vcpus::new(u64::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// The phase plan's guest memory, bytes, checked when the plan is read.
mod mem_bytes {
    use super::GuestMem;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &GuestMem, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(m.bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<GuestMem, D::Error> {
        GuestMem::from_bytes(u64::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// One arm of a phase: its name, its knobs and (Linux) the guest directory it boots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseArm {
    pub name: String,
    pub knobs: Vec<Knob>,
    /// A complete guest directory (vmlinux, bzImage when the arm boots it, config,
    /// initramfs.cpio, init); `None`: the base guest directory (or the probe guest).
    pub guest_dir: Option<PathBuf>,
}

/// One phase: everything `truecold tune-phase` needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhasePlan {
    pub phase: String,
    pub contract: ContractKind,
    pub seed: u64,
    pub rounds: u64,
    #[serde(with = "vcpus_count")]
    pub vcpus: Vcpus,
    #[serde(rename = "mem_bytes", with = "mem_bytes")]
    pub mem: GuestMem,
    /// The baseline's backing.
    pub backing: Backing,
    pub deadline_ms: u64,
    pub kill_grace_ms: u64,
    pub arms: Vec<PhaseArm>,
    /// Attribution launches (after the measured rounds, never rows) for each arm named in
    /// `attribute`.
    pub attribution: u64,
    /// How the attribution launches measure the boot: always written; a plan without it
    /// means [`crate::attribution::instrumentation::Instrumentation::absent`] (`initcall`), what plans written
    /// before left out at that default.
    #[serde(default = "crate::attribution::instrumentation::Instrumentation::absent")]
    pub instrument: crate::attribution::instrumentation::Instrumentation,
    pub attribute: Vec<String>,
}

impl PhasePlan {
    fn guest(&self) -> TuneGuest {
        match self.contract {
            ContractKind::Probe => TuneGuest::Probe,
            ContractKind::Linux => TuneGuest::Linux,
        }
    }

    /// Every way the plan is not runnable (empty when it is).
    pub fn problems(&self) -> Vec<String> {
        let mut bad = Vec::new();
        let kernel_ab = self.arms.len() == 2
            && self.arms[0].name == truecold_proof::bisect::GOOD_ARM
            && self.arms[1].name == truecold_proof::bisect::CANDIDATE_ARM
            && self
                .arms
                .iter()
                .all(|a| a.knobs.is_empty() && a.guest_dir.is_some());
        // A tune phase's rounds are sized by its rule; a bisect's kernel A/B by the bisect's
        // (`-n`, at least its fewest: a look at 3 launches a side can still call a step good
        // or break strict-ready).
        let least = if kernel_ab {
            crate::plan::bisect_plan::MIN_N
        } else {
            MIN_ROUNDS
        };
        if self.rounds < least {
            bad.push(format!("{} rounds, at least {least}", self.rounds));
        }
        if !kernel_ab
            && self
                .arms
                .first()
                .is_none_or(|a| a.name != BASELINE || !a.knobs.is_empty())
        {
            bad.push(format!(
                "the first arm is not `{BASELINE}` without knobs (nor is the plan a kernel A/B)"
            ));
        }
        let mut names = BTreeSet::new();
        for a in &self.arms {
            if !names.insert(a.name.as_str()) {
                bad.push(format!("arm `{}` twice", a.name));
            }
            if let Err(e) = knobs::check_set(&a.knobs, self.guest()) {
                bad.push(format!("arm `{}`: {e}", a.name));
            }
            let mut sorted = a.knobs.clone();
            sorted.sort();
            if sorted != a.knobs {
                bad.push(format!("arm `{}`: knobs not in catalogue order", a.name));
            }
        }
        bad
    }
}

/// The Kconfig knobs of a set (the ones that need their own kernel).
pub fn kconfig_knobs(set: &[Knob]) -> Vec<Knob> {
    set.iter()
        .copied()
        .filter(|k| matches!(k.change(), Change::Kconfig(_)))
        .collect()
}

/// A kernel variant's directory name: its Kconfig knobs joined by `+`.
pub fn variant_name(kconfig: &[Knob]) -> String {
    kconfig
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

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
    let stop =
        crate::terminal::interrupt::install().map_err(|e| PhaseError::from(RunError::from(e)))?;
    announce(plan, &prepared, dest);
    let mut ran = run_rounds(plan, &prepared, stop, &bundle_out::staging_for(dest))?;
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
            crate::campaign::process_launcher::shell_quote(
                &p.launcher.command.display(p.spec.deadline_ns, false)
            )
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
        let (s, line) = launch_one(p, &mut rows[i]);
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
fn launch_one(p: &PreparedArm, arm: &mut ArmRows) -> (Sample, String) {
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
    let s = to_sample(&attempt, observed.as_ref(), why.as_deref(), &ctx);
    let line = report_line(slot.index, &s, &attempt);
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
    warnings.push(crate::engines::arms_dir::interleaved_arm_warning(
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
    let command = plan.instrument.command(arm_command(
        plan,
        &p.spec,
        p.guest.as_ref(),
        &p.applied,
        &extra,
        env,
    ));
    let jsonl = crate::attribution::launches::run_for(
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
        &format!(
            "{}/{}",
            truecold_nested::OUT_DIR,
            crate::run::nested_campaign::L1_BUNDLE
        ),
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
    let w = crate::run::nested_campaign::in_l1(
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
fn l1_plan(
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
    .seeded(plan.seed.wrapping_add(u64::from(plan.phase != SCREEN)))
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
    let facts = crate::checks::environment::read_facts(host);
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

impl PhasePlan {
    /// The plan file `path` (written by `truecold tune`), its guest checked as it is read.
    pub fn read(path: &Path) -> Result<PhasePlan, PhaseError> {
        let bytes = std::fs::read(path).map_err(PathIoError::at("read", path))?;
        serde_json::from_slice(&bytes).map_err(|source| PhaseError::Plan {
            path: path.to_path_buf(),
            source,
        })
    }
}

#[cfg(test)]
mod tests;
