//! The parity campaign (`--parity`): the agent channel over vsock plus a TCP round trip,
//! per-launch taps and workspaces, a lifecycle table; truecold-vmm alone (one bundle) or
//! engine arms interleaved like an engines campaign (one directory), on the same
//! `super::engines_campaign::Setup` and [`crate::engines`] as the engines campaign, with
//! the parity launcher ([`crate::parity`]) and its files in each bundle.

use super::engines_campaign::Setup;
use super::nested_campaign;
use super::outcome::RunOutcome;
use super::run_error::RunError;
use crate::artifacts::guest_files::{self, LinuxGuest, PARITY_KERNEL_DIR, WORKSPACE_IMAGE};
use crate::campaign::bundle_out;
use crate::campaign::execute::self_cpu_ns;
use crate::checks::environment;
use crate::checks::preflight::kvm_host;
use crate::engines::arm_setup;
use crate::engines::arms_dir::{self, ArmBundle, ArmExtras, Shared};
use crate::engines::rounds::{self, EnginesRun};
use crate::parity::lifecycle::STATE_CSV;
use crate::parity::parity_launcher::ParityLauncher;
use crate::parity::state::StateDb;
use crate::parity::workspace_clone;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args;
use crate::plan::explicit_args::dest_or;
use crate::terminal::interrupt;
use crate::terminal::progress::{Progress, Style};
use std::path::{Path, PathBuf};
use truecold_engine::Guest;
use truecold_proof::bundle::Written;
use truecold_proof::schema::Observer;
use truecold_proto::kinds::Engine;
/// A parity error from any layer, its chain as the message.
fn parity_err(e: &dyn std::error::Error) -> RunError {
    RunError::Parity(truecold_proto::measure::error_chain(e))
}

/// The parity guest: the same init and initramfs, the parity kernel (base + parity
/// fragment: virtio-mmio, -pci, -blk, -net, vsock, ext4) from `<guest-dir>/parity/`, and the
/// base workspace image.
fn parity_guest(guest_dir: &Path) -> Result<(LinuxGuest, PathBuf), RunError> {
    let mut lg = guest_files::linux_guest(guest_dir)?;
    for (slot, name) in [(&mut lg.vmlinux, "vmlinux"), (&mut lg.config, "config")] {
        let p = guest_dir.join(PARITY_KERNEL_DIR).join(name);
        if !p.is_file() {
            return Err(RunError::Parity(format!(
                "{} is missing (build the parity guest: cargo run -p xtask -- guest)",
                p.display()
            )));
        }
        *slot = p;
    }
    lg.symbols = lg.vmlinux.clone();
    let base_image = guest_dir.join(WORKSPACE_IMAGE);
    if base_image.symlink_metadata().is_err() {
        return Err(RunError::Parity(format!(
            "{} is missing (build the parity guest: cargo run -p xtask -- guest)",
            base_image.display()
        )));
    }
    Ok((lg, base_image))
}

/// Every arm's parity launcher, its lifecycle journal settings and what its guest is given
/// (truecold-vmm builds its own command line, the observed one is recorded; a peer gets the
/// agent command line).
struct ParityLaunchers {
    launchers: Vec<ParityLauncher>,
    journals: Vec<String>,
    cmdlines: Vec<String>,
}

fn parity_launchers(
    plan: &CampaignPlan,
    s: &Setup,
    base_image: &Path,
    pair: truecold_proto::parity::NetPair,
) -> Result<ParityLaunchers, RunError> {
    let mut out = ParityLaunchers {
        launchers: Vec::new(),
        journals: Vec::new(),
        cmdlines: Vec::new(),
    };
    for p in &s.prepared {
        let dir = s.work.join(p.engine.as_str());
        // The arm's own backing ([`EnginesSpec::backing`]: each engine's default unless set).
        let guest = Guest {
            backing: s.spec.backing(p.engine),
            ..s.guest.clone()
        };
        let state = StateDb::open(&dir.join("state.sqlite")).map_err(|e| parity_err(&e))?;
        out.journals.push(
            state
                .pragmas()
                .map(|j| truecold_proof::lifecycle::journal(&j.journal_mode, j.synchronous))
                .map_err(|e| parity_err(&e))?,
        );
        out.cmdlines.push(
            truecold_engine::parity::cmdline(p.engine, &guest, pair).map_err(|e| parity_err(&e))?,
        );
        out.launchers.push(ParityLauncher {
            base: p.launch.clone(),
            guest,
            base_image: base_image.to_path_buf(),
            run_root: dir.join("launches"),
            pair,
            state: std::cell::RefCell::new(state),
            tap_override: plan.inject_tap_name.clone(),
            mem: s.spec.mem,
            deadline_ns: s.spec.deadline_ns,
            kill_grace_ns: s.spec.kill_grace_ns,
        });
    }
    Ok(out)
}

/// A parity campaign (`--parity`): each arm's engine under the agent channel
/// ([`crate::parity::parity_launcher::ParityLauncher`]); truecold-vmm alone is one bundle,
/// engine arms (`--engine`/`--engines`) run interleaved like an engines campaign into one
/// directory.
/// Every bundle's rows carry the network proof and the cleanup, with its arm's lifecycle
/// table as `state.csv`.
pub fn run_parity(plan: &CampaignPlan, invocation: &str) -> Result<RunOutcome, RunError> {
    let rounds = plan.planned()?;
    let guest_dir = guest_files::guest_dir(plan.guest_dir.as_deref());
    // No engine named: truecold-vmm alone, one bundle (as before engine arms existed).
    let single = plan.engines.is_empty();
    let arms = if single {
        vec![Engine::Truecold]
    } else {
        plan.engines.clone()
    };
    for e in &arms {
        truecold_engine::parity::supported(*e).map_err(|e| RunError::Parity(e.to_string()))?;
    }
    if plan.nested() {
        return Ok(nested_campaign::run_parity(
            plan,
            (!single).then_some(arms.as_slice()),
            rounds,
            &guest_dir,
        )?);
    }
    let resolved = arm_setup::resolve(&arms, plan)?;
    let (lg, base_image) = parity_guest(&guest_dir)?;
    let host = kvm_host()?;
    let label = if single {
        String::new()
    } else {
        format!("-{}", explicit_args::engines_label(&arms))
    };
    let work = std::env::temp_dir().join(format!("truecold-parity-{}", std::process::id()));
    // A stale directory of an earlier process with this pid would hold its lifecycle rows.
    let _ = std::fs::remove_dir_all(&work);
    let s = Setup::new(
        plan,
        &resolved,
        &arms,
        rounds,
        lg,
        host,
        dest_or(plan, &format!("parity{label}")),
        work,
        Observer::Agent,
    )?;
    let pair = truecold_proto::parity::NetPair::for_slot(0)
        .map_err(|e| RunError::Parity(e.to_string()))?;
    // The base image's digest (a directory or unreadable file has none: every clone of it
    // fails, typed, per launch), its pages dropped after so the clones stay sparse.
    let workspace_sha256 =
        workspace_clone::image_digest(&base_image).unwrap_or_else(|e| format!("unreadable: {e}"));
    let pl = parity_launchers(plan, &s, &base_image, pair)?;
    let facts = environment::read_facts(s.kind);
    let stop = interrupt::install()?;
    crate::note!(
        "truecold: parity campaign — {rounds} round(s) of {} arm(s){}, {} vCPU, {}, \
         backing {}, deadline {} ms, agent over vsock + TCP over tap {} → {}",
        arms.len(),
        if single {
            String::new()
        } else {
            format!(
                " in seeded shuffled order (seed {})",
                truecold_proof::seed::hex(plan.seed)
            )
        },
        s.spec.vcpus,
        s.spec.mem,
        s.spec.backings_label(),
        plan.deadline_ms,
        pair,
        s.dest.display()
    );
    let total = rounds.saturating_mul(arms.len() as u64);
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "parity", total);
    let ran = rounds::execute(
        &s.spec,
        &pl.cmdlines,
        &ParityArms(&pl.launchers),
        stop,
        &mut progress,
        None,
        &self_cpu_ns,
        &bundle_out::staging_for(&s.dest),
        crate::campaign::parallel::clock_for(s.kind)?.as_ref(),
    )?;
    let explicit = s.explicit(plan, &guest_dir, !single);
    // Each arm's command as recorded: its parity form with the per-launch values named.
    let mut shown = Vec::new();
    for l in &pl.launchers {
        shown.push(
            l.launch_for(Path::new("<run-dir>"), "<tap>")
                .map_err(|e| parity_err(&e))?,
        );
    }
    let bundles = parity_bundles(&s, &shown, &ran, &pl.cmdlines);
    let extras = parity_extras(&pl, pair, &workspace_sha256)?;
    let shared = s.shared(&facts, invocation, explicit);
    let outcome = if single {
        write_single(&s, &shared, &bundles, &ran, extras)?
    } else {
        let w = arms_dir::write_dir(&s.dest, &shared, &bundles, &ran, extras)?;
        RunOutcome {
            written: w.written,
            interrupted: ran.interrupted,
            warnings: s.warnings.clone(),
            arms: w.arms,
        }
    };
    let _ = std::fs::remove_dir_all(&s.work);
    Ok(outcome)
}

/// Each arm's bundle under the parity contract: its parity launch as `shown`, and the
/// guest command line truecold-vmm reported (its virtio-mmio entries included) or the one a
/// peer was `given`.
fn parity_bundles<'a>(
    s: &'a Setup,
    shown: &'a [truecold_engine::Launch],
    ran: &EnginesRun,
    given: &[String],
) -> Vec<ArmBundle<'a>> {
    s.prepared
        .iter()
        .zip(shown)
        .zip(ran.arms.iter().zip(given))
        .map(|((p, launch), (arm, given))| ArmBundle {
            engine: p.engine,
            binary: p.binary.clone(),
            version: p.version.clone(),
            launch,
            guest_cmdline: match p.engine {
                Engine::Truecold => arm.tally.cmdlines.iter().next().cloned(),
                _ => None,
            }
            .unwrap_or_else(|| given.clone()),
            guest: &p.lg,
            kernel_config: &p.kernel_config,
            own_guest: p.own_guest,
        })
        .collect()
}

/// Each arm's parity files and facts: its lifecycle table (`state.csv`) and its digest,
/// the network pair, the workspace image's digest and the journal settings.
fn parity_extras(
    pl: &ParityLaunchers,
    pair: truecold_proto::parity::NetPair,
    workspace_sha256: &str,
) -> Result<Vec<ArmExtras>, RunError> {
    let mut extras = Vec::new();
    for (l, journal) in pl.launchers.iter().zip(&pl.journals) {
        let export = l
            .state
            .borrow()
            .export(&l.run_root)
            .map_err(|e| parity_err(&e))?;
        let state_csv = std::fs::read(&export.path)
            .map_err(|e| RunError::Parity(format!("reading {}: {e}", export.path.display())))?;
        extras.push(ArmExtras {
            warnings: vec![
                "the parity contract: each launch's lifecycle (state.csv; its digest in \
                 environment.parity) committed to an embedded SQLite table (WAL, \
                 synchronous=FULL); RUNNING is committed after the spawn, inside the measured \
                 window"
                    .to_string(),
            ],
            files: vec![(STATE_CSV.to_string(), state_csv)],
            parity: Some(truecold_proof::schema::ParityFacts {
                state_sha256: export.sha256.clone(),
                net_pair: pair.to_string(),
                workspace_sha256: workspace_sha256.to_string(),
                journal: journal.clone(),
            }),
        });
    }
    Ok(extras)
}

/// truecold-vmm alone under the parity contract: one bundle, which appears atomically
/// (written beside its place, then renamed).
fn write_single(
    s: &Setup,
    shared: &Shared<'_>,
    bundles: &[ArmBundle<'_>],
    ran: &EnginesRun,
    extras: Vec<ArmExtras>,
) -> Result<RunOutcome, RunError> {
    let (Some(b), Some(arm)) = (bundles.first(), ran.arms.first()) else {
        return Err(RunError::Parity("no truecold arm".into()));
    };
    let mut e = extras.into_iter().next().unwrap_or_default();
    e.warnings.splice(0..0, s.warnings.iter().cloned());
    let verdict = arms_dir::write_arm_bundle(&s.dest, shared, b, arm, ran, e)?;
    Ok(RunOutcome {
        written: Written {
            path: s.dest.clone(),
            verdict,
        },
        interrupted: ran.interrupted,
        warnings: s.warnings.clone(),
        arms: Vec::new(),
    })
}

/// Every arm's parity launcher, as the engines campaign's launcher.
struct ParityArms<'a>(&'a [ParityLauncher]);

impl rounds::ArmLauncher for ParityArms<'_> {
    fn launch(
        &self,
        arm: usize,
        round: u64,
        row: &rounds::RowOf<'_>,
    ) -> (
        truecold_engine::driver::Launched,
        truecold_proof::schema::Sample,
        truecold_proto::report::EngineRun,
    ) {
        let pl = self.0[arm].launch(round, row);
        let (s, run) = pl.row;
        (pl.launched, s, run)
    }
}
