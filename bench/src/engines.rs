//! Engines campaigns (`truecold run --engine …`): the same Linux guest under several engines
//! (`truecold_engine`: truecold-vmm, Firecracker, Cloud Hypervisor, QEMU microvm), observed
//! alike on each engine's serial port. `-n` rounds; each round runs every arm once, in an
//! order shuffled per round from `--seed` ([`truecold_engine::order`]), one launch at a time,
//! so drift and thermal effects hit every arm alike. Each launch is one
//! [`truecold_engine::driver::launch_once`] (request stamp right before the spawn, no
//! retries); its [`EngineRun`] becomes the row ([`row`], through the same classifier as every
//! campaign) and the `reports.jsonl` line. Each arm is a complete bundle in `<dir>/<engine>/`;
//! the multi-arm files (arms.json, comparison, README, cdf.svg, SHA256SUMS) are written over
//! them ([`ArmsPlan`]); the directory appears atomically.

use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::campaign::bundle_out;
use crate::campaign::execute::{BeforeEach, Executed};
use crate::campaign::process_launcher::Attempt;
use crate::campaign::record::{Recorder, Spool, StagingError};
use crate::campaign::sample::{
    mark_repeated_across_arms, mark_repeated_boot_ids, to_sample, Observed, RowContext,
};
use crate::campaign::schedule::{LevelRun, Schedule, Slot};
use crate::campaign::spec::CampaignSpec;
use crate::campaign::vmm_output;
use crate::checks::environment::RunFacts;
use crate::checks::snapshot::Snapshot;
use crate::plan::campaign_plan::CampaignPlan;
use crate::terminal::progress::Progress;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use truecold_engine::driver::Launched;
use truecold_engine::{Guest, Launch};
use truecold_proof::arms::{ArmRef, ArmsPlan};
use truecold_proof::bundle::{rename_noreplace, BundleError, BundleInputs, Written};
use truecold_proof::reports::{HarnessMarks, ReportLine, REPORTS_FILE};
use truecold_proof::schema::{
    Configuration, ContractKind, EngineInfo, Environment, Observer, Sample,
};
use truecold_proto::kinds::{Backing, Engine, ErrorKind, HostKind, ObtainedBacking, RamLayout};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::now_ns;
use truecold_proto::path_io::PathIoError;
use truecold_proto::report::{EngineRun, Outcome, VmmOutput};

/// Where the peer engines' static builds live, relative to the directory beside the clone
/// (`../shared/peers/`; its README gives versions, sources, build commands and sha256).
/// The Firecracker config's name inside the Firecracker arm's bundle.
pub const ENGINE_CONFIG_FILE: &str = "engine-config.json";

/// Why an engines campaign could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum EnginesError {
    #[error(transparent)]
    BinaryMissing(truecold_engine::locate::Missing),
    #[error("the {engine} arm's version")]
    Version {
        engine: Engine,
        #[source]
        source: truecold_engine::version::VersionError,
    },
    #[error("the {engine} arm")]
    Launch {
        engine: Engine,
        #[source]
        source: truecold_engine::EngineError,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("hashing the artifacts of {}", binary.display())]
    Digests {
        binary: PathBuf,
        #[source]
        source: guest_files::ArtifactError,
    },
    #[error("writing the {engine} arm's bundle")]
    Bundle {
        engine: Engine,
        #[source]
        source: BundleError,
    },
    #[error("placing the campaign directory")]
    Place(#[source] BundleError),
    #[error("writing the campaign directory's comparison")]
    Arms(#[source] truecold_proof::arms::ArmsError),
    #[error("the campaign's staged rows")]
    Staging(#[from] StagingError),
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EnginesError {
    let at = PathIoError::at(op, path);
    move |source| EnginesError::Io(at(source))
}

/// The binary of `engine`: the flag, else the variable, else the defaults (see the flags'
/// help); a missing one names how to get it.
pub fn find_binary(engine: Engine, plan: &CampaignPlan) -> Result<PathBuf, EnginesError> {
    let flag = match engine {
        Engine::Truecold => {
            return guest_files::find_vmm(plan.vmm.as_deref()).map_err(|e| {
                EnginesError::BinaryMissing(truecold_engine::locate::Missing {
                    engine,
                    looked: e.to_string(),
                    how: truecold_engine::locate::how_to_get(engine),
                })
            })
        }
        Engine::Firecracker => plan.engine_bins.firecracker.as_deref(),
        Engine::CloudHypervisor => plan.engine_bins.cloud_hypervisor.as_deref(),
        Engine::QemuMicrovm => plan.engine_bins.qemu.as_deref(),
    };
    truecold_engine::locate::peer_binary(engine, flag).map_err(EnginesError::BinaryMissing)
}

/// What the campaign is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnginesSpec {
    pub arms: Vec<Engine>,
    pub rounds: u64,
    pub seed: u64,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// Each arm's backing, in the order of `arms` ([`CampaignPlan::backing_of`]).
    pub backings: Vec<Backing>,
    /// truecold-vmm's RAM layout (`--ram-layout`): its arm's; a peer's arm records
    /// [`RamLayout::ABSENT`] ([`EnginesSpec::layout`]).
    pub ram_layout: RamLayout,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
    /// Who stamps strict-ready: `serial` (an engines campaign) or `agent` (the parity
    /// contract: truecold-vmm alone, or engine arms interleaved like an engines campaign).
    pub observer: Observer,
    /// Engine arms were named (`--engine`/`--engines`): the campaign is a multi-arm
    /// directory whose arms take turns launch by launch (even one arm). Not for truecold-vmm
    /// alone under the parity contract: one plain sequential bundle.
    pub interleaved: bool,
}

impl EnginesSpec {
    /// The campaign `plan` describes, of `rounds` rounds of `arms`, observed by `observer`.
    pub fn of_plan(
        plan: &CampaignPlan,
        arms: Vec<Engine>,
        rounds: u64,
        observer: Observer,
    ) -> Self {
        EnginesSpec {
            rounds,
            seed: plan.seed,
            vcpus: plan.guest.vcpus,
            mem: plan.guest.mem,
            backings: arms.iter().map(|&e| plan.backing_of(e, true)).collect(),
            ram_layout: plan.guest.ram_layout,
            arms,
            deadline_ns: plan.deadline_ns(),
            kill_grace_ns: plan.kill_grace_ns(),
            observer,
            interleaved: !plan.engines.is_empty(),
        }
    }

    /// `engine`'s backing ([`EnginesSpec::backings`]; an engine that is not an arm: its own
    /// default).
    pub fn backing(&self, engine: Engine) -> Backing {
        self.arms
            .iter()
            .position(|&e| e == engine)
            .and_then(|i| self.backings.get(i).copied())
            .unwrap_or(Backing::linux_default(engine))
    }

    /// `engine`'s RAM layout, as its bundle records it: truecold-vmm's
    /// [`EnginesSpec::ram_layout`]; a peer's own ([`RamLayout::ABSENT`]: the layout is
    /// truecold-vmm's).
    pub fn layout(&self, engine: Engine) -> RamLayout {
        match engine {
            Engine::Truecold => self.ram_layout,
            _ => RamLayout::ABSENT,
        }
    }

    /// Whether every arm has the same backing.
    pub fn one_backing(&self) -> bool {
        self.backings.windows(2).all(|w| w[0] == w[1])
    }

    /// The arms as `arms.json` records them: each arm's backing declared where they differ.
    pub fn arm_refs(&self) -> Vec<ArmRef> {
        let one = self.one_backing();
        self.arms
            .iter()
            .zip(&self.backings)
            .map(|(&e, &b)| {
                let a = ArmRef::engine(e);
                if one {
                    a
                } else {
                    a.with_backing(b)
                }
            })
            .collect()
    }

    /// The backings, described for a person: one word when every arm has the same, else
    /// `engine backing` per arm.
    pub fn backings_label(&self) -> String {
        match self.backings.first() {
            Some(b) if self.backings.iter().all(|x| x == b) => b.as_str().to_string(),
            _ => self
                .arms
                .iter()
                .zip(&self.backings)
                .map(|(e, b)| format!("{e} {b}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// `engine`'s arm's campaign (a sequential Linux campaign of `rounds` launches), for
    /// `result.json`.
    pub fn campaign(&self, engine: Engine) -> CampaignSpec {
        CampaignSpec {
            schedule: Schedule::Sequential { n: self.rounds },
            contract: ContractKind::Linux,
            vcpus: self.vcpus,
            mem: self.mem,
            backing: self.backing(engine),
            ram_layout: self.layout(engine),
            deadline_ns: self.deadline_ns,
            kill_grace_ns: self.kill_grace_ns,
            observer: self.observer,
            interleaved: self.interleaved,
            stop_after: None,
        }
    }

    /// What every row of `engine`'s arm shares.
    pub fn row_context(&self, engine: Engine) -> RowContext {
        RowContext {
            engine,
            ..self.campaign(engine).row_context()
        }
    }

    /// The run order, by arm name: `(round, engine)` in launch order.
    pub fn order(&self) -> Vec<(u64, Engine)> {
        truecold_engine::order(self.arms.len(), self.rounds, self.seed)
            .into_iter()
            .map(|(r, i)| (r, self.arms[i]))
            .collect()
    }
}

/// A row maker: one reaped launch → its row and evidence ([`row`] with the arm's context).
pub type RowOf<'a> = dyn Fn(&Launched) -> (Sample, EngineRun) + 'a;

/// One launch of arm `arm` (index into the spec's arms) in `round`, and its row: `row`
/// classifies the reaped launch; a launcher may add what it did itself (the parity
/// contract's lifecycle, tap and cleanup).
pub trait ArmLauncher {
    fn launch(&self, arm: usize, round: u64, row: &RowOf<'_>) -> (Launched, Sample, EngineRun);
}

/// The real launcher: one [`truecold_engine::driver::launch_once`] per call.
pub struct DriverLauncher<'a> {
    pub launches: &'a [Launch],
    pub mem: GuestMem,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
}

impl ArmLauncher for DriverLauncher<'_> {
    fn launch(&self, arm: usize, _round: u64, row: &RowOf<'_>) -> (Launched, Sample, EngineRun) {
        let l = truecold_engine::driver::launch_once(
            &self.launches[arm],
            self.mem,
            self.deadline_ns,
            self.kill_grace_ns,
        );
        let (s, run) = row(&l);
        (l, s, run)
    }
}

/// What the row needs from one launch: the truecold VMM's report where there is one (its
/// memslots, E820, own failure, guest exit code, backing), then everything the bench saw on
/// the serial line and in smaps.
pub fn observed(l: &Launched, guest_cmdline: &str) -> Observed {
    let run = &l.run;
    let mut o = match (run.engine, &run.vmm) {
        (Engine::Truecold, Some(v)) => match VmmOutput::parse(v.to_string().as_bytes()) {
            Ok(VmmOutput::Boot(c)) => vmm_output::observe(&c),
            Ok(VmmOutput::Error(e)) => vmm_output::observe_error(&e),
            Err(e) => Observed {
                error: Some((ErrorKind::BadReport, e.to_string())),
                ..Observed::default()
            },
        },
        (Engine::Truecold, None) => Observed {
            error: Some((
                ErrorKind::BadReport,
                l.report_error
                    .clone()
                    .unwrap_or_else(|| "truecold-vmm wrote no report".into()),
            )),
            ..Observed::default()
        },
        _ => Observed {
            cmdline: Some(guest_cmdline.to_string()),
            ..Observed::default()
        },
    };
    o.stamps = run.stamps;
    o.strict_ready_verified = run.liveness.verified;
    o.boot_id = run.liveness.reply_boot_id;
    o.guest = run.guest_record.clone();
    o.guest_exit_code = run.outcome.guest_exit_code.or(o.guest_exit_code);
    o.protocol_errors = run.protocol_error_count;
    o.host_mapping = run.host_memory.clone();
    o.mapping_error = l.mapping_error.clone();
    // The parity contract: an agent that answered but a network proof that did not verify.
    if let Some(p) = run.network.as_ref().filter(|p| !p.liveness.verified) {
        o.strict_ready_verified = false;
        o.error.get_or_insert((
            ErrorKind::NetworkNotReady,
            p.error.clone().unwrap_or_default(),
        ));
    }
    if let (Some(reply), Some(record)) = (o.boot_id, o.guest.as_ref().and_then(|g| g.boot_id)) {
        if reply != record {
            o.error.get_or_insert((
                ErrorKind::BootIdMismatch,
                format!("the reply says boot id {reply}, the record {record}"),
            ));
        }
    }
    o
}

/// One launch → its row and its `reports.jsonl` evidence (the engine run, its outcome the
/// row's classification).
pub fn row(
    l: &Launched,
    round: u64,
    ctx: &RowContext,
    deadline_ns: u64,
    guest_cmdline: &str,
) -> (Sample, EngineRun) {
    let mut tail = l.stderr_tail.trim().to_string();
    if l.noise_lines > 0 {
        tail.push_str(&format!(
            " [serial: {} line(s) of engine noise, last: {}]",
            l.noise_lines,
            l.noise_tail.join(" | ")
        ));
    }
    let attempt = Attempt {
        slot: Slot {
            index: round,
            level: 1,
            intended_ns: l.request_ns,
        },
        request_ns: l.request_ns,
        reaped_ns: l.reaped_ns,
        deadline_ns,
        end: l.end.clone(),
        stdout: Vec::new(),
        stdout_truncated: false,
        stderr_tail: tail,
    };
    let o = observed(l, guest_cmdline);
    let s = to_sample(&attempt, Some(&o), None, ctx);
    let mut run = l.run.clone();
    run.outcome = Outcome {
        ok: s.ok,
        failure_kind: (!s.ok).then(|| s.error_kind.clone()),
        failure: (!s.ok).then(|| s.error_detail.clone()),
        guest_exit_code: o.guest_exit_code,
    };
    (s, run)
}

/// One arm as it ran.
#[derive(Debug)]
pub struct ArmRun {
    /// Its rows in index order, read back from their staging file ([`campaign::record`]).
    pub samples: Vec<Sample>,
    /// Its `reports.jsonl`, staged as the launches finished: one line per row, each engine
    /// run's outcome what its row says.
    pub reports: Spool,
    /// Where staged rows went when a staging file did not take them (bundle warnings).
    pub staging_notes: Vec<String>,
    pub tally: ArmTally,
    pub repeated_boot_ids: usize,
}

/// What an arm's launches add up to as they run (bounded: no per-launch state).
#[derive(Debug, Default)]
pub struct ArmTally {
    pub cmdlines: BTreeSet<String>,
    pub backings: BTreeMap<ObtainedBacking, u64>,
    /// The harness's CPU and wall time inside this arm's launches, ns.
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub t_start_ns: Option<u64>,
    pub t_end_ns: u64,
    /// `--drop-caches`: how often the cache was dropped before this arm's launches (`None`:
    /// not asked), and the first errors.
    pub dropped: Option<u64>,
    pub prepare_errors: Vec<String>,
    /// Launches made.
    pub launched: u64,
}

impl ArmRun {
    /// Every engine run of `reports` (tests; lines that do not parse are left out).
    pub fn runs(&self) -> Vec<EngineRun> {
        let bytes = self.reports.to_vec().unwrap_or_default();
        bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<ReportLine>(l).ok())
            .filter_map(|r| r.engine)
            .collect()
    }
}

/// The campaign as it ran.
#[derive(Debug)]
pub struct EnginesRun {
    pub arms: Vec<ArmRun>,
    /// What was launched, in order.
    pub order: Vec<(u64, Engine)>,
    pub interrupted: bool,
    pub before: Snapshot,
    pub after: Snapshot,
}

/// Runs the campaign: every `(round, arm)` of the order, one launch at a time, each row
/// built and shown as it finishes and staged in `staging` (the bundle's parent directory)
/// with its evidence. `stop` ends it before the next launch (marked interrupted).
/// `before_each` runs before each request stamp, outside the window.
#[allow(clippy::too_many_arguments)]
pub fn execute<W: Write>(
    spec: &EnginesSpec,
    guest_cmdlines: &[String],
    launcher: &dyn ArmLauncher,
    stop: &AtomicBool,
    progress: &mut Progress<W>,
    before_each: Option<&BeforeEach<'_>>,
    cpu_ns: &dyn Fn() -> u64,
    staging: &Path,
) -> Result<EnginesRun, EnginesError> {
    let mut tallies: Vec<ArmTally> = spec.arms.iter().map(|_| ArmTally::default()).collect();
    let mut recorders: Vec<Recorder> = spec
        .arms
        .iter()
        .map(|_| Recorder::new(staging))
        .collect::<Result<_, _>>()?;
    let mut order = Vec::new();
    let mut interrupted = false;
    let before = Snapshot::take();
    for (round, i) in truecold_engine::order(spec.arms.len(), spec.rounds, spec.seed) {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let engine = spec.arms[i];
        let arm = &mut tallies[i];
        if let Some(prep) = before_each {
            let n = arm.dropped.get_or_insert(0);
            match prep() {
                Ok(()) => *n += 1,
                Err(e) if arm.prepare_errors.len() < 3 => arm
                    .prepare_errors
                    .push(format!("before round {round}: {e}")),
                Err(_) => {}
            }
        }
        let cmdline = guest_cmdlines.get(i).map(String::as_str).unwrap_or("");
        let ctx = spec.row_context(engine);
        let (c0, t0) = (cpu_ns(), now_ns());
        let (l, s, mut run) = launcher.launch(i, round, &|l| {
            row(l, round, &ctx, spec.deadline_ns, cmdline)
        });
        let (c1, t1) = (cpu_ns(), now_ns());
        arm.cpu_ns = arm.cpu_ns.saturating_add(c1.saturating_sub(c0));
        arm.wall_ns = arm.wall_ns.saturating_add(t1.saturating_sub(t0));
        arm.t_start_ns.get_or_insert(l.request_ns);
        arm.t_end_ns = l.reaped_ns;
        arm.launched += 1;
        let o = observed(&l, cmdline);
        arm.cmdlines.extend(o.cmdline);
        if let Some(b) = o.backing {
            *arm.backings.entry(b).or_insert(0) += 1;
        }
        progress.record(s.ok, s.latency_ns);
        // A row's evidence says what the row says.
        agree(&s, &mut run);
        let line = report_line(&s, &run);
        recorders[i].record(s, line);
        order.push((round, engine));
    }
    let after = Snapshot::take_after(&before);
    progress.finish();
    let mut arms = Vec::new();
    for (rec, tally) in recorders.into_iter().zip(tallies) {
        let r = rec.finish()?;
        arms.push(ArmRun {
            samples: r.samples,
            reports: r.reports,
            staging_notes: r.notes,
            tally,
            repeated_boot_ids: 0,
        });
    }
    for a in arms.iter_mut() {
        a.repeated_boot_ids = mark_repeated_boot_ids(&mut a.samples);
    }
    let names: Vec<&str> = spec.arms.iter().map(|e| e.as_str()).collect();
    let cross = {
        let mut rows: Vec<&mut [Sample]> =
            arms.iter_mut().map(|a| a.samples.as_mut_slice()).collect();
        mark_repeated_across_arms(&names, &mut rows)
    };
    for (a, n) in arms.iter_mut().zip(cross) {
        a.repeated_boot_ids += n;
    }
    // The rows marked here (repeated boot ids): their evidence is made to agree.
    for a in arms.iter_mut() {
        if a.repeated_boot_ids == 0 {
            continue;
        }
        let marked: BTreeMap<u64, &Sample> = a
            .samples
            .iter()
            .filter(|s| s.error_kind == ErrorKind::RepeatedBootId.as_string())
            .map(|s| (s.index, s))
            .collect();
        a.reports = a.reports.rewrite_lines(staging, |l| {
            let mut line: ReportLine = serde_json::from_slice(l).ok()?;
            let s = marked.get(&line.index)?;
            let run = line.engine.as_mut()?;
            agree(s, run);
            line.to_line().ok().map(String::into_bytes)
        })?;
    }
    Ok(EnginesRun {
        arms,
        order,
        interrupted,
        before,
        after,
    })
}

/// A failed row's engine run says why it failed (the row's classification).
fn agree(s: &Sample, r: &mut EngineRun) {
    if !s.ok {
        r.outcome.ok = false;
        r.outcome.failure_kind = Some(s.error_kind.clone());
        r.outcome.failure = Some(s.error_detail.clone());
    }
}

/// One arm, ready to be written as a bundle.
pub struct ArmBundle<'a> {
    pub engine: Engine,
    pub binary: PathBuf,
    pub version: String,
    pub launch: &'a Launch,
    pub guest_cmdline: String,
    /// The guest this arm booted (the campaign's, or its own: `--arm-guest-dir`) and its
    /// kernel's config.
    pub guest: &'a LinuxGuest,
    pub kernel_config: &'a [u8],
    /// The arm boots a guest of its own (`arms.json` declares its kernel).
    pub own_guest: bool,
}

/// Everything the bundles share.
pub struct Shared<'a> {
    pub spec: &'a EnginesSpec,
    pub facts: &'a Environment,
    pub warnings: Vec<String>,
    pub invocation: &'a str,
    /// The campaign with every argument explicit (after `truecold run`).
    pub explicit: Vec<String>,
}

/// A written campaign directory.
#[derive(Debug)]
pub struct WrittenArms {
    /// The directory and the verdict on it.
    pub written: Written,
    /// Each arm's bundle (under the final directory) and its own verdict.
    pub arms: Vec<(Engine, Written)>,
    pub record: ArmsPlan,
}

/// Row `s`'s `reports.jsonl` line: its engine run `r`.
pub fn report_line(s: &Sample, r: &EngineRun) -> String {
    let line = ReportLine {
        index: s.index,
        harness: HarnessMarks {
            intended: r.stamps.intended,
            request: r.stamps.request.unwrap_or(s.actual_request_ns),
            reaped: r.stamps.reaped,
        },
        vmm: None,
        vmm_missing: None,
        engine: Some(r.clone()),
    };
    match line.to_line() {
        Ok(t) => t,
        // An engine run is numbers and strings, which always serialize; should it not, the
        // line still exists and says why.
        Err(e) => ReportLine {
            engine: None,
            vmm_missing: Some(format!("the engine run did not serialize: {e}")),
            ..line
        }
        .to_line()
        .unwrap_or_default(),
    }
}

/// The warning every arm bundle of an interleaved campaign (`what`: an engines campaign, a
/// tune phase) carries: the arms, and the seed of their shuffled rounds as seeds are shown
/// ([`truecold_proof::seed::hex`]).
pub fn interleaved_arm_warning<'a>(
    what: &str,
    arms: impl Iterator<Item = &'a str>,
    seed: u64,
) -> String {
    format!(
        "one arm of {what} ({}): interleaved launch by launch with the other arm(s) in seeded \
         shuffled rounds (seed {}), so this arm's rows have the others' launches between them",
        arms.collect::<Vec<_>>().join(", "),
        truecold_proof::seed::hex(seed)
    )
}

/// Writes every arm's bundle and the multi-arm files into a temporary directory beside
/// `dest`, then renames it to `dest` (never replacing anything).
pub fn write_dir(
    dest: &Path,
    shared: &Shared<'_>,
    bundles: &[ArmBundle<'_>],
    ran: &EnginesRun,
    mut extras: Vec<ArmExtras>,
) -> Result<WrittenArms, EnginesError> {
    let tmp = bundle_out::staging_dir(dest, "tmp")?;
    let spec = shared.spec;
    let mut arms = Vec::new();
    extras.resize_with(bundles.len(), ArmExtras::default);
    for ((i, b), extra) in bundles.iter().enumerate().zip(extras) {
        let mut warnings = shared.warnings.clone();
        warnings.extend(extra.warnings);
        warnings.push(interleaved_arm_warning(
            "an engines campaign",
            spec.arms.iter().map(|e| e.as_str()),
            spec.seed,
        ));
        let verdict = write_arm_bundle(
            &tmp.join(b.engine.as_str()),
            shared,
            b,
            &ran.arms[i],
            ran,
            ArmExtras { warnings, ..extra },
        )?;
        arms.push((
            b.engine,
            Written {
                path: dest.join(b.engine.as_str()),
                verdict,
            },
        ));
    }
    let record = ArmsPlan {
        seed: spec.seed,
        rounds: spec.rounds,
        arms: spec
            .arm_refs()
            .into_iter()
            .zip(bundles)
            .map(|(a, b)| {
                if b.own_guest {
                    a.with_kernel(truecold_proof::sums::sha256_hex(b.kernel_config))
                } else {
                    a
                }
            })
            .collect(),
        order: ran
            .order
            .iter()
            .map(|(r, e)| (*r, e.as_str().to_string()))
            .collect(),
    };
    // The top-level files (arms.json, comparison.json, README.md, cdf.svg, SHA256SUMS) and
    // the verdict on the whole directory.
    let verdict = truecold_proof::arms::write_arms(&tmp, &record).map_err(EnginesError::Arms)?;
    rename_noreplace(&tmp, dest).map_err(EnginesError::Place)?;
    Ok(WrittenArms {
        written: Written {
            path: dest.to_path_buf(),
            verdict,
        },
        arms,
        record,
    })
}

/// What one arm's bundle adds to what its rows and the shared facts give.
#[derive(Default)]
pub struct ArmExtras {
    /// The bundle's warnings (the campaign's and the arm's own).
    pub warnings: Vec<String>,
    /// Files beside `reports.jsonl` (name, bytes), under SHA256SUMS.
    pub files: Vec<(String, Vec<u8>)>,
    /// The parity contract's facts (`environment.parity`).
    pub parity: Option<truecold_proof::schema::ParityFacts>,
}

/// Writes one arm's complete bundle at `dir` (its rows, `reports.jsonl`, any `extra` files,
/// and what the arm's engine adds) and returns the verdict on it.
pub fn write_arm_bundle(
    dir: &Path,
    shared: &Shared<'_>,
    b: &ArmBundle<'_>,
    arm: &ArmRun,
    ran: &EnginesRun,
    more: ArmExtras,
) -> Result<truecold_proof::verify::Verdict, EnginesError> {
    let ArmExtras {
        warnings,
        files: extra,
        parity,
    } = more;
    let spec = shared.spec;
    let cspec = spec.campaign(b.engine);
    let t = &arm.tally;
    let ex = Executed {
        samples: arm.samples.clone(),
        // The arm's own staged evidence is added below.
        reports: Spool::empty(),
        staging_notes: arm.staging_notes.clone(),
        planned: spec.rounds,
        interrupted: ran.interrupted,
        stopped: None,
        levels: vec![LevelRun {
            level: 1,
            planned: spec.rounds,
            launched: arm.samples.len() as u64,
            t_start_ns: t.t_start_ns.unwrap_or(ran.before.t_ns),
            t_end_ns: t.t_end_ns.max(t.t_start_ns.unwrap_or(ran.before.t_ns)),
        }],
        before: ran.before.clone(),
        after: ran.after.clone(),
        run_facts: RunFacts {
            max_start_lag_ns: None,
            interval_ns: None,
            lanes: 1,
            in_window: Some((t.cpu_ns, t.wall_ns)),
            page_cache_dropped: t.dropped,
        },
        repeated_boot_ids: arm.repeated_boot_ids,
        cmdlines: t.cmdlines.clone(),
        backings: t.backings.clone(),
        expired: 0,
        prepare_errors: t.prepare_errors.clone(),
    };
    let configuration = Configuration {
        vcpus: u32::from(spec.vcpus.get()),
        mem_bytes: spec.mem.bytes(),
        backing: bundle_out::backing_description(spec.backing(b.engine), &ex.backings),
        ram_layout: spec.layout(b.engine),
        cmdline: b.guest_cmdline.clone(),
        vmm_path: b.binary.display().to_string(),
        kernel_path: Some(absolute(&b.guest.vmlinux)),
        initramfs_path: Some(absolute(&b.guest.initramfs)),
        engine: EngineInfo {
            kind: b.engine,
            version: b.version.clone(),
        },
        knobs: vec![],
    };
    let digests =
        guest_files::digests(&b.binary, Some(b.guest)).map_err(|source| EnginesError::Digests {
            binary: b.binary.clone(),
            source,
        })?;
    let mut result =
        bundle_out::result_json(&cspec, &ex, configuration, digests, shared.facts, warnings);
    result.environment.parity = parity;
    let mut extra_files = extra;
    if b.engine == Engine::Firecracker {
        if let Some((_, cfg)) = b.launch.files.iter().find(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n == truecold_engine::firecracker::CONFIG_FILE)
        }) {
            extra_files.push((ENGINE_CONFIG_FILE.to_string(), cfg.clone()));
        }
    }
    let mut inputs = BundleInputs {
        kernel_config: Some(b.kernel_config.to_vec()),
        cmdline: truecold_proof::cmdline::format_engine_cmdline_txt(
            ContractKind::Linux.label(),
            shared.invocation,
            &crate::plan::explicit_args::explicit_line(&shared.explicit),
            b.engine,
            &b.launch.display(spec.deadline_ns),
            Some(&b.guest_cmdline),
        ),
        extra_files,
        staged_files: Vec::new(),
    };
    arm.reports.add_to(REPORTS_FILE, &mut inputs)?;
    let w = bundle_out::write(dir, &result, &ex.samples, &inputs).map_err(|source| {
        EnginesError::Bundle {
            engine: b.engine,
            source,
        }
    })?;
    Ok(w.verdict)
}

fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The guest every arm boots, from the campaign's plan (with truecold-vmm's backing: each
/// arm's own is set by [`prepare`]).
pub fn guest_of(plan: &CampaignPlan, g: &LinuxGuest) -> Guest {
    Guest {
        kernel: PathBuf::from(absolute(&g.vmlinux)),
        initramfs: PathBuf::from(absolute(&g.initramfs)),
        vcpus: u32::from(plan.guest.vcpus.get()),
        mem: plan.guest.mem,
        backing: plan.backing_of(Engine::Truecold, true),
        cmdline_extra: plan.guest.cmdline_extra.clone(),
        ram_layout: plan.guest.ram_layout,
    }
}

/// One arm, checked and ready to launch.
#[derive(Clone, Debug)]
pub struct PreparedArm {
    pub engine: Engine,
    pub binary: PathBuf,
    /// The first line of `<binary> --version`.
    pub version: String,
    pub launch: Launch,
    /// The guest's kernel command line under this engine.
    pub cmdline: String,
    /// The guest this arm boots and its kernel's config (the campaign's, or the arm's own).
    pub lg: LinuxGuest,
    pub kernel_config: Vec<u8>,
    /// Whether the arm boots a guest of its own (`--arm-guest-dir`).
    pub own_guest: bool,
}

/// An engine's binary and what it says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub engine: Engine,
    pub binary: PathBuf,
    /// The first line of `<binary> --version`, run once here.
    pub version: String,
}

/// Every arm's binary and version, checked before anything else: a missing binary, or one
/// that is not that engine, is an error naming how to get the right one.
pub fn resolve(arms: &[Engine], plan: &CampaignPlan) -> Result<Vec<Resolved>, EnginesError> {
    arms.iter()
        .map(|&e| {
            let binary = find_binary(e, plan)?;
            let version = truecold_engine::version::query(e, &binary)
                .map_err(|source| EnginesError::Version { engine: e, source })?;
            Ok(Resolved {
                engine: e,
                binary,
                version,
            })
        })
        .collect()
}

/// The guest of one arm: the Linux guest it boots (`own`: its own directory, not the
/// campaign's) and its kernel's config.
pub struct ArmGuest {
    pub lg: LinuxGuest,
    pub kernel_config: Vec<u8>,
    pub own: bool,
}

/// Every arm's launch, each on its backing in `spec` and its guest in `guests` (in the order
/// of `resolved`): a backing an engine cannot give is an error before anything runs.
pub fn prepare(
    resolved: &[Resolved],
    guest: &Guest,
    guests: Vec<ArmGuest>,
    spec: &EnginesSpec,
    work: &Path,
    host: HostKind,
) -> Result<Vec<PreparedArm>, EnginesError> {
    let mut out = Vec::new();
    for (r, ag) in resolved.iter().zip(guests) {
        let e = r.engine;
        let guest = &Guest {
            backing: spec.backing(e),
            kernel: PathBuf::from(absolute(&ag.lg.vmlinux)),
            initramfs: PathBuf::from(absolute(&ag.lg.initramfs)),
            ..guest.clone()
        };
        let dir = work.join(e.as_str());
        std::fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
        let launch = truecold_engine::launch(e, &r.binary, guest, &dir, host)
            .map_err(|source| EnginesError::Launch { engine: e, source })?;
        let cmdline = guest
            .cmdline(e)
            .map_err(|source| EnginesError::Launch { engine: e, source })?;
        out.push(PreparedArm {
            engine: e,
            binary: r.binary.clone(),
            version: r.version.clone(),
            launch,
            cmdline,
            lg: ag.lg,
            kernel_config: ag.kernel_config,
            own_guest: ag.own,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
