//! `truecold fleet shard`: what one array task runs — its shard of `fleet.json`, written in a
//! work directory beside the fleet, then its task record, then the shard placed at
//! `shards/<name>` by one rename. A task killed before the rename leaves no shard (and
//! nothing in the fleet directory); one whose shard another task placed first does nothing.

use super::fleet_dir::FleetDir;
use super::fleet_error::FleetError;
use crate::artifacts::guest_files;
use crate::campaign::schedule::Schedule;
use crate::plan::fleet_plan::{fanned, Fanned};
use crate::run::dispatch;
use crate::tune::knob_kernels::ensure_kernel;
use crate::tune::nested_phase::run_one_phase;
use crate::tune::phase_plan::{kconfig_knobs, PhaseArm, PhasePlan, BASELINE, SCREEN};
use std::path::PathBuf;
use truecold_proof::bundle::{rename_noreplace, Written};
use truecold_proof::fleet::{
    build_bytes, task_bytes, BuildRecord, ShardPlan, TaskRecord, BASELINE_SHARD, BUILD_FILE,
};
use truecold_proof::schema::ContractKind;
use truecold_proto::path_io::PathIoError;

/// Seconds since the epoch (a task's wall-clock cost; never a measurement).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What a task did.
#[derive(Debug)]
pub enum ShardDone {
    /// It wrote the shard (its verdict on its own).
    Written { name: String, written: Box<Written> },
    /// The shard was there already: nothing run.
    AlreadyThere(String),
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// Runs shard `task` (else `$SLURM_ARRAY_TASK_ID`) of the fleet at `dir`.
pub fn run_shard(
    dir: &std::path::Path,
    task: Option<u64>,
    invocation: &str,
) -> Result<ShardDone, FleetError> {
    let dir = FleetDir::at(dir)?;
    let index = match task {
        Some(t) => t,
        None => env("SLURM_ARRAY_TASK_ID")
            .and_then(|v| v.parse().ok())
            .ok_or(FleetError::NoTask)?,
    };
    let (plan, plan_sha) = dir.read_plan()?;
    let shard = plan
        .shards
        .get(index as usize)
        .ok_or(FleetError::NoSuchShard {
            index,
            shards: plan.shards.len(),
        })?
        .clone();
    let dest = dir.shard(&shard.name);
    if dest.symlink_metadata().is_ok() {
        return Ok(ShardDone::AlreadyThere(shard.name));
    }
    let tag = env("SLURM_JOB_ID").unwrap_or_else(|| format!("pid{}", std::process::id()));
    let work = dir.work_root().join(format!("{}.{tag}", shard.name));
    let io = |op, p: &std::path::Path| {
        let at = PathIoError::at(op, p);
        move |e| FleetError::Io(at(e))
    };
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(io("remove", &work))?;
    }
    std::fs::create_dir_all(&work).map_err(io("create", &work))?;
    let out = work.join("out");
    let started = unix_now();
    crate::note!(
        "truecold: fleet: shard `{}` (task {index} of {}) on {}",
        shard.name,
        plan.shards.len(),
        node()
    );
    let written = match fanned(&plan.command)? {
        Fanned::Campaign(c) => campaign_shard(*c, &shard, out.clone(), invocation)?,
        Fanned::Tune(t) if shard.builds.is_some() => build_shard(&t, &shard, &out)?,
        Fanned::Tune(t) => tune_shard(&t, &shard, &out, invocation)?,
        Fanned::Bisect(b) => bisect_shard(&b, &plan, &dir, &shard, &out, invocation)?,
    };
    let record = TaskRecord {
        shard: shard.name.clone(),
        plan_sha256: plan_sha,
        job_id: env("SLURM_JOB_ID"),
        array_job_id: env("SLURM_ARRAY_JOB_ID"),
        array_task_id: env("SLURM_ARRAY_TASK_ID").and_then(|v| v.parse().ok()),
        node: node(),
        started_unix_s: started,
        ended_unix_s: unix_now(),
    };
    let tasks = dir.task(&shard.name);
    if let Some(d) = tasks.parent() {
        std::fs::create_dir_all(d).map_err(io("create", d))?;
    }
    truecold_proof::fsio::write_new_file(&tasks, &task_bytes(&record))?;
    if let Some(d) = dest.parent() {
        std::fs::create_dir_all(d).map_err(io("create", d))?;
    }
    rename_noreplace(&written.path, &dest).map_err(|source| FleetError::Place {
        shard: shard.name.clone(),
        source,
    })?;
    let _ = std::fs::remove_dir_all(&work);
    let verdict = truecold_proof::fleet::verify_shard(&dest, plan.kind, &shard);
    Ok(ShardDone::Written {
        name: shard.name,
        written: Box::new(Written {
            path: dest,
            verdict,
        }),
    })
}

/// This node's name: Slurm's, else the host's.
fn node() -> String {
    env("SLURMD_NODENAME").unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    })
}

/// A campaign's shard: the fleet's campaign with the shard's launches and seed.
fn campaign_shard(
    mut c: crate::plan::campaign_plan::CampaignPlan,
    shard: &ShardPlan,
    out: PathBuf,
    invocation: &str,
) -> Result<Written, FleetError> {
    c.schedule = Schedule::Sequential { n: shard.count() };
    c.seed = shard.seed;
    c.out = Some(out);
    let done = dispatch::run(&c, invocation)?;
    Ok(done.written)
}

/// A build shard: the Kconfig knob's kernel built (or found cached) into the fleet command's
/// kernel directory, where the knob's shard finds it; the shard holds its record and config.
fn build_shard(
    t: &crate::plan::tune_plan::TunePlan,
    shard: &ShardPlan,
    out: &std::path::Path,
) -> Result<Written, FleetError> {
    let knob = shard.builds.ok_or_else(|| FleetError::ForeignPlan {
        dir: out.to_path_buf(),
        why: format!("shard `{}` builds no knob", shard.name),
    })?;
    let t0 = std::time::Instant::now();
    let base = guest_files::linux_guest(&t.paths.guest_dir)?;
    let kdir = ensure_kernel(&[knob], &base, &t.paths.kernel_root, &t.paths.script)?;
    let build_seconds = t0.elapsed().as_secs();
    let io = |op, p: &std::path::Path| {
        let at = PathIoError::at(op, p);
        move |e| FleetError::Io(at(e))
    };
    std::fs::create_dir_all(out).map_err(io("create", out))?;
    let config = kdir.join(truecold_proof::names::CONFIG_FILE);
    let bytes = std::fs::read(&config).map_err(io("read", &config))?;
    let to = out.join(truecold_proof::names::CONFIG_FILE);
    truecold_proof::fsio::write_new_file(&to, &bytes)?;
    let rec = BuildRecord {
        knob,
        vmlinux_sha256: guest_files::sha256_file(&kdir.join("vmlinux"))?,
        config_sha256: truecold_proof::digest::sha256_hex(&bytes),
        kernel_dir: kdir.display().to_string(),
        build_seconds,
    };
    truecold_proof::fsio::write_new_file(&out.join(BUILD_FILE), &build_bytes(&rec))?;
    Ok(Written {
        path: out.to_path_buf(),
        verdict: Default::default(),
    })
}

/// A bisect wave's shard: the baseline (the good commit measured into a bisect directory), or
/// a probe (its commit built and judged against the baseline shard, which it waited for).
fn bisect_shard(
    b: &crate::plan::bisect_plan::BisectRunPlan,
    plan: &truecold_proof::fleet::FleetPlan,
    dir: &FleetDir,
    shard: &ShardPlan,
    out: &std::path::Path,
    invocation: &str,
) -> Result<Written, FleetError> {
    use crate::bisect::commit_bisect::{fleet_baseline, fleet_probe};
    let wave = plan
        .bisect
        .as_ref()
        .ok_or_else(|| FleetError::ForeignPlan {
            dir: dir.root.clone(),
            why: "a bisect plan without its range".into(),
        })?;
    let commit = shard.commit.as_deref().unwrap_or_default();
    let bisect = |e| FleetError::Bisect(Box::new(e));
    if shard.name == BASELINE_SHARD {
        fleet_baseline(b, &wave.good, &wave.bad, out, invocation).map_err(bisect)?;
    } else {
        let baseline = dir.shard(BASELINE_SHARD);
        if !baseline.is_dir() {
            return Err(FleetError::ShardsMissing(vec![(
                BASELINE_SHARD.into(),
                "not written: a probe runs after it (submit --resume submits both)".into(),
            )]));
        }
        let st = fleet_probe(b, &baseline, commit, out, invocation).map_err(bisect)?;
        crate::note!("truecold: fleet: probe {commit}: {}", st.as_str());
    }
    Ok(Written {
        path: out.to_path_buf(),
        verdict: Default::default(),
    })
}

/// A tune screen's shard: its knob's arm beside a baseline of its own, interleaved in one
/// phase (one L1 boot nested), under the shard's seed; no attribution launches.
fn tune_shard(
    t: &crate::plan::tune_plan::TunePlan,
    shard: &ShardPlan,
    out: &std::path::Path,
    invocation: &str,
) -> Result<Written, FleetError> {
    let knob = shard.knob.ok_or_else(|| FleetError::ForeignPlan {
        dir: out.to_path_buf(),
        why: format!("shard `{}` of a tune names no knob", shard.name),
    })?;
    let kc = kconfig_knobs(&[knob]);
    let guest_dir = if kc.is_empty() {
        None
    } else {
        let base = guest_files::linux_guest(&t.paths.guest_dir)?;
        Some(ensure_kernel(
            &kc,
            &base,
            &t.paths.kernel_root,
            &t.paths.script,
        )?)
    };
    let plan = PhasePlan {
        phase: SCREEN.to_string(),
        contract: ContractKind::Linux,
        seed: shard.seed,
        rounds: t.rounds.unwrap_or(truecold_proof::tune::MIN_ROUNDS),
        vcpus: t.vcpus,
        mem: t.mem,
        backing: t.backing,
        deadline_ms: t.deadline_ms,
        kill_grace_ms: t.kill_grace_ms,
        arms: vec![
            PhaseArm {
                name: BASELINE.to_string(),
                knobs: Vec::new(),
                guest_dir: None,
            },
            PhaseArm {
                name: knob.as_str().to_string(),
                knobs: vec![knob],
                guest_dir,
            },
        ],
        attribution: 0,
        instrument: t.instrument,
        attribute: Vec::new(),
    };
    Ok(run_one_phase(
        &plan,
        t.nested(),
        t.paths.vmm.as_deref(),
        &t.paths.guest_dir,
        out,
        invocation,
    )?)
}
