//! The engines campaign (`--engine …`): every arm resolved and prepared, the rounds run
//! through the engines driver with strict-ready on each engine's serial port, and the
//! multi-arm directory written ([`crate::engines`]). `Setup` is what it and the parity
//! campaign ([`super::parity_campaign`]) have once every arm is prepared.

use super::nested_campaign;
use super::outcome::RunOutcome;
use super::plain_campaign::{absolute, kernel_config};
use super::run_error::RunError;
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::campaign::bundle_out;
use crate::campaign::execute::{self_cpu_ns, BeforeEach};
use crate::checks::environment;
use crate::checks::preflight::{drop_page_cache, kvm_host};
use crate::engines::arm_setup::{self, PreparedArm};
use crate::engines::arms_dir::{self, ArmBundle, Shared};
use crate::engines::engines_spec::EnginesSpec;
use crate::engines::rounds::{self, DriverLauncher};
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args::{engines_dest, explicit_args, guest_flag, ArgPaths};
use crate::terminal::interrupt;
use crate::terminal::progress::{Progress, Style};
use std::path::{Path, PathBuf};
use truecold_engine::Guest;
use truecold_proof::schema::{ContractKind, Environment, HostKind, Observer};
use truecold_proto::kinds::Engine;

/// What both kinds of campaign (engines, parity) have once every arm is prepared.
pub(super) struct Setup {
    pub(super) kind: HostKind,
    pub(super) warnings: Vec<String>,
    pub(super) guest: Guest,
    pub(super) dest: PathBuf,
    pub(super) work: PathBuf,
    pub(super) prepared: Vec<PreparedArm>,
    pub(super) spec: EnginesSpec,
}

impl Setup {
    /// Every arm resolved against `lg` on this host, its launch prepared in `work`, the
    /// bundle's place `dest` checked free.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        plan: &CampaignPlan,
        resolved: &[arm_setup::Resolved],
        arms: &[Engine],
        rounds: u64,
        lg: LinuxGuest,
        (kind, warnings): (HostKind, Vec<String>),
        dest: PathBuf,
        work: PathBuf,
        observer: Observer,
    ) -> Result<Setup, RunError> {
        let guest = arm_setup::guest_of(plan, &lg);
        if dest.symlink_metadata().is_ok() {
            return Err(RunError::OutExists(dest));
        }
        let spec = EnginesSpec::of_plan(plan, arms.to_vec(), rounds, observer);
        let mut guests = Vec::new();
        for r in resolved {
            let own = plan.arm_guest_dir.iter().find(|(e, _)| *e == r.engine);
            let g = match own {
                Some((_, dir)) => guest_files::linux_guest(dir)?,
                None => lg.clone(),
            };
            guests.push(arm_setup::ArmGuest {
                kernel_config: kernel_config(&g)?,
                lg: g,
                own: own.is_some(),
            });
        }
        let prepared = arm_setup::prepare(resolved, &guest, guests, &spec, &work, kind)?;
        Ok(Setup {
            kind,
            warnings,
            guest,
            dest,
            work,
            prepared,
            spec,
        })
    }

    /// Each arm's engine and binary, in order.
    pub(super) fn bins(&self) -> Vec<(Engine, PathBuf)> {
        self.prepared
            .iter()
            .map(|p| (p.engine, p.binary.clone()))
            .collect()
    }

    /// The campaign's explicit `truecold run` arguments; `engines`: whether the arms are
    /// named (not for truecold-vmm alone under the parity contract).
    pub(super) fn explicit(
        &self,
        plan: &CampaignPlan,
        guest_dir: &Path,
        engines: bool,
    ) -> Vec<String> {
        let bins = self.bins();
        let vmm = bins
            .iter()
            .find(|(e, _)| *e == Engine::Truecold)
            .map(|(_, b)| b.clone())
            .unwrap_or_default();
        explicit_args(
            plan,
            guest_flag(ContractKind::Linux),
            ArgPaths {
                vmm: &vmm,
                guest_dir: Some(&absolute(guest_dir)),
                out: &std::path::absolute(&self.dest).unwrap_or_else(|_| self.dest.clone()),
                engines: if engines { &bins } else { &[] },
            },
        )
    }

    /// What every bundle of the campaign shares.
    pub(super) fn shared<'a>(
        &'a self,
        facts: &'a Environment,
        invocation: &'a str,
        explicit: Vec<String>,
    ) -> Shared<'a> {
        Shared {
            spec: &self.spec,
            facts,
            warnings: self.warnings.clone(),
            invocation,
            explicit,
        }
    }
}

/// An engines campaign (`--engine …`): see [`crate::engines`].
pub fn run_engines(plan: &CampaignPlan, invocation: &str) -> Result<RunOutcome, RunError> {
    let arms = &plan.engines;
    let rounds = plan.planned()?;
    let guest_dir = guest_files::guest_dir(plan.guest_dir.as_deref());
    if plan.nested() {
        return Ok(nested_campaign::run_engines(
            plan, arms, rounds, &guest_dir,
        )?);
    }
    // Argument-level problems first: every engine's binary and version, the guest.
    let resolved = arm_setup::resolve(arms, plan)?;
    let lg = guest_files::linux_guest(&guest_dir)?;
    let (kind, mut warnings) = kvm_host()?;
    if kind == HostKind::Pvm {
        let w = "an engines campaign on a kvm_pvm host: an unmodified Linux kernel is not \
                 expected to boot here; every failure is kept as data"
            .to_string();
        crate::note!("truecold: warning: {w}");
        warnings.push(w);
    }
    let work = std::env::temp_dir().join(format!("truecold-engines-{}", std::process::id()));
    let s = Setup::new(
        plan,
        &resolved,
        arms,
        rounds,
        lg,
        (kind, warnings),
        engines_dest(plan, arms),
        work,
        Observer::Serial,
    )?;
    let facts = environment::read_facts(s.kind);
    let stop = interrupt::install()?;
    crate::note!(
        "truecold: engines campaign — {} — {rounds} round(s) of {} arm(s) in seeded shuffled \
         order (seed {}), {} vCPU, {}, backing {}, deadline {} ms → {}",
        ContractKind::Linux.label(),
        arms.len(),
        truecold_proof::seed::hex(plan.seed),
        s.spec.vcpus,
        s.spec.mem,
        s.spec.backings_label(),
        plan.deadline_ms,
        s.dest.display()
    );
    for p in &s.prepared {
        crate::note!(
            "truecold:   {}: {} ({})",
            p.engine,
            p.binary.display(),
            p.version
        );
    }
    if plan.drop_caches {
        drop_page_cache().map_err(RunError::DropCaches)?;
    }
    let launches: Vec<_> = s.prepared.iter().map(|p| p.launch.clone()).collect();
    let cmdlines: Vec<String> = s.prepared.iter().map(|p| p.cmdline.clone()).collect();
    let launcher = DriverLauncher {
        launches: &launches,
        mem: s.spec.mem,
        deadline_ns: s.spec.deadline_ns,
        kill_grace_ns: s.spec.kill_grace_ns,
    };
    let total = rounds.saturating_mul(arms.len() as u64);
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "engines", total);
    let ran = rounds::execute(
        &s.spec,
        &cmdlines,
        &launcher,
        stop,
        &mut progress,
        plan.drop_caches.then_some(&drop_page_cache as &BeforeEach),
        &self_cpu_ns,
        &bundle_out::staging_for(&s.dest),
        crate::campaign::parallel::clock_for(s.kind)?.as_ref(),
    )?;
    let explicit = s.explicit(plan, &guest_dir, true);
    let bundles: Vec<ArmBundle<'_>> = s
        .prepared
        .iter()
        .map(|p| ArmBundle {
            engine: p.engine,
            binary: p.binary.clone(),
            version: p.version.clone(),
            launch: &p.launch,
            guest_cmdline: p.cmdline.clone(),
            guest: &p.lg,
            kernel_config: &p.kernel_config,
            own_guest: p.own_guest,
        })
        .collect();
    let shared = s.shared(&facts, invocation, explicit);
    let w = arms_dir::write_dir(&s.dest, &shared, &bundles, &ran, Vec::new())?;
    let _ = std::fs::remove_dir_all(&s.work);
    Ok(RunOutcome {
        written: w.written,
        interrupted: ran.interrupted,
        warnings: s.warnings.clone(),
        arms: w.arms,
    })
}
