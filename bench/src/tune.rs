//! `truecold tune`: which knob changes a true-cold boot, by how much, with evidence.
//!
//! 1. The knobs (`truecold_proto::tune`, each one typed change) are checked against the guest.
//! 2. Kconfig knobs get their kernel from `kernel-config/build.sh tune` (base.config plus the
//!    knob's fragment, cached by content), each in a complete guest directory.
//! 3. The screen phase: `baseline` and one arm per knob, interleaved launch by launch in
//!    rounds shuffled from the seed ([`truecold_engine::order`]), strict-ready stamped at the
//!    VM exit as in every truecold campaign; each arm is a complete bundle, the phase a
//!    multi-arm directory ([`run_phase`]).
//! 4. The winners, from the screen's verified rows by the same function the verifier runs
//!    (`truecold_proof::tune`).
//! 5. The confirm phase (when there is a winner): `baseline`, `recommended` (every winner)
//!    and, with two winners or more, `recommended-minus-<knob>` (leave one out).
//! 6. `truecold_proof::tune::write_tune` writes tune.json, README.md and SHA256SUMS over
//!    both phases; the directory is renamed into place.
//!
//! In the nested harness each phase is one L1 boot: the host builds kernels, packs them with
//! the phase's plan (`phase.json`) into L1, and `truecold tune-phase` runs the phase there.

use crate::artifacts::{self, ArtifactError, LinuxGuest};
use crate::campaign::{self, CampaignSpec, Executed};
use crate::cli::{mem_mib_arg, vcpus_arg, ModeArg, RunArgs, DEFAULT_SEED};
use crate::host::{HostFacts, RunFacts, Snapshot};
use crate::launch::{ProcessLauncher, VmmCommand};
use crate::progress::{Progress, Style};
use crate::run::{self, ArgPaths, RunError};
use crate::sample::{mark_repeated_across_arms, mark_repeated_boot_ids, to_sample};
use crate::schedule::{Launcher, LevelRun, Schedule, Slot};
use crate::vmm_report;
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use truecold_proof::arms::{ArmRef, ArmsPlan};
use truecold_proof::bundle::{rename_noreplace, BundleError, BundleInputs, Written};
use truecold_proof::reports::REPORTS_FILE;
use truecold_proof::schema::{Configuration, ContractKind, EngineInfo, Observer, Sample};
use truecold_proto::kinds::{Backing, Engine, HostKind, ObtainedBacking};
use truecold_proto::measure::now_ns;
use truecold_proto::tune::{self as knobs, Applied, Change, Knob, KnobSetError, TuneGuest};

/// The phase directories inside a tune directory.
pub const SCREEN: &str = "screen";
pub const CONFIRM: &str = "confirm";
/// The baseline arm's name.
pub const BASELINE: &str = "baseline";
/// The arm with every winner.
pub const RECOMMENDED: &str = "recommended";
pub use truecold_proof::tune::MIN_ROUNDS;
/// Rounds per arm when neither -n nor --noise-from says.
pub const DEFAULT_ROUNDS: u64 = 10;
/// Default guest memory of a tune, MiB.
pub const DEFAULT_TUNE_MEM_MIB: u64 = 1024;
/// The phase plan's name inside L1.
pub const L1_PHASE_PLAN: &str = "/l1/phase.json";

/// `truecold tune`.
#[derive(Args, Debug, Clone)]
pub struct TuneArgs {
    /// Knobs to try, comma-separated (default: every catalogue knob that applies to the
    /// guest). `--list-knobs` prints the catalogue.
    #[arg(long)]
    pub knobs: Option<String>,
    /// Print the knob catalogue (name, class, what it changes, the source of its expected
    /// effect) and exit.
    #[arg(long)]
    pub list_knobs: bool,
    /// Tune the VMM floor on the embedded probe guest (only memory-backing knobs apply).
    #[arg(long, group = "guest")]
    pub probe: bool,
    /// Tune a Linux boot on this host's /dev/kvm.
    #[arg(long, group = "guest")]
    pub linux: bool,
    /// Tune a Linux boot in the nested harness (virtual clock; each phase one L1 boot).
    #[arg(long, group = "guest")]
    pub nested: bool,
    /// Rounds of the screen phase; each round launches every arm once, in a shuffled order
    /// (default: sized from --noise-from, else 10).
    #[arg(short = 'n', long = "rounds")]
    pub rounds: Option<u64>,
    /// Size the rounds from the measured noise: the coefficient of variation of this
    /// bundle's successful headlines (the same guest, host and clock), through
    /// `truecold_proof::tune::rounds_for` (enough rounds to see a 1 % change of the p50 at
    /// p < 0.05 with 80 % power). Recorded in tune.json and the README.
    #[arg(long)]
    pub noise_from: Option<PathBuf>,
    /// Rounds of the confirm phase (default: --rounds).
    #[arg(long)]
    pub confirm_rounds: Option<u64>,
    /// At most this many launches in all: both phases' rounds shrink alike to fit the worst
    /// case (every knob a winner); fewer than the minimum rounds is an error.
    #[arg(long)]
    pub budget: Option<u64>,
    /// The seed of every phase's shuffled order (recorded).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// vCPUs per VM: context, not a knob.
    #[arg(long, default_value_t = 2, value_parser = vcpus_arg)]
    pub vcpus: u32,
    /// Guest memory per VM, MiB: context, not a knob.
    #[arg(long, default_value_t = DEFAULT_TUNE_MEM_MIB, value_parser = mem_mib_arg)]
    pub mem_mib: u64,
    /// The baseline's memory backing (backing knobs change it).
    #[arg(long, default_value_t = Backing::Anon, value_parser = Backing::parse)]
    pub backing: Backing,
    /// Per-launch deadline (default 2000 ms; 300000 ms with --nested).
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// Past the deadline, how long the VMM may take to print its report before it is killed.
    #[arg(long, default_value_t = 500)]
    pub kill_grace_ms: u64,
    /// The tune directory (default `results/<UTC>-tune-<guest>-<v>vcpu-<m>mib`); must not
    /// exist.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Attribution launches for the last phase's `baseline` and `recommended` arms (the
    /// screen's `baseline` when no knob won): `initcall_debug` on their command line, run
    /// after the measured rounds, never rows; their attribution.csv / .svg go into those arms'
    /// bundles and side by side into the README. 0: none.
    #[arg(long, default_value_t = 2)]
    pub attribution: u64,
    /// The VMM, the base guest, and where Kconfig knobs' kernels are built (default
    /// out/tune-kernels).
    #[command(flatten)]
    pub paths: crate::kernel::KernelPaths,
}

/// `truecold tune-phase`: one phase from its plan (what `truecold tune --nested` runs in L1).
#[derive(Args, Debug, Clone)]
pub struct TunePhaseArgs {
    /// The phase plan (JSON, written by `truecold tune`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The phase directory to write; must not exist.
    #[arg(long)]
    pub out: PathBuf,
    /// The truecold-vmm binary (default: next to this binary).
    #[arg(long)]
    pub vmm: Option<PathBuf>,
    /// The base guest directory (default $TRUECOLD_GUEST_DIR, else out/guest).
    #[arg(long)]
    pub guest_dir: Option<PathBuf>,
}

/// Why a tune could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("--knobs")]
    Knobs(#[source] KnobSetError),
    #[error("no knob to tune: {0}")]
    NoKnobs(String),
    #[error("--rounds / --confirm-rounds must be at least {MIN_ROUNDS} (got {0})")]
    TooFewRounds(u64),
    #[error(
        "--budget {budget} launches leaves {rounds} round(s) per phase for {arms} arm(s) at \
         worst; at least {MIN_ROUNDS} are needed ({need} launches)"
    )]
    Budget {
        budget: u64,
        rounds: u64,
        arms: u64,
        need: u64,
    },
    #[error("--noise-from {}: {why}", path.display())]
    NoiseBundle { path: PathBuf, why: String },
    #[error("{0} already exists; a tune directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the kernel for {knobs}")]
    Kernel {
        knobs: String,
        #[source]
        source: crate::kernel::KernelError,
    },
    #[error("the host")]
    Run(#[source] Box<RunError>),
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error("{op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the phase plan {} does not parse", path.display())]
    Plan {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the phase plan is not consistent: {0}")]
    PlanInvalid(String),
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
    #[error("the screen phase in {} does not verify: {reasons}", path.display())]
    PhaseInvalid { path: PathBuf, reasons: String },
    #[error("writing the tune directory")]
    Tune(#[source] truecold_proof::tune::TuneError),
    #[error("the nested harness")]
    Nested(#[source] Box<crate::nested::NestedError>),
    #[error("interrupted (Ctrl-C) during the {0} phase; the phase directory is kept incomplete")]
    Interrupted(&'static str),
}

impl From<RunError> for TuneError {
    fn from(e: RunError) -> Self {
        TuneError::Run(Box::new(e))
    }
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TuneError {
    let path = path.to_path_buf();
    move |source| TuneError::Io { op, path, source }
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
    pub vcpus: u32,
    pub mem_mib: u64,
    /// The baseline's backing.
    pub backing: Backing,
    pub deadline_ms: u64,
    pub kill_grace_ms: u64,
    pub arms: Vec<PhaseArm>,
    /// Attribution launches (`initcall_debug`, after the measured rounds, never rows) for
    /// each arm named in `attribute`.
    pub attribution: u64,
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
        if self.rounds < MIN_ROUNDS {
            bad.push(format!("{} rounds, at least {MIN_ROUNDS}", self.rounds));
        }
        let kernel_ab = self.arms.len() == 2
            && self.arms[0].name == truecold_proof::bisect::GOOD_ARM
            && self.arms[1].name == truecold_proof::bisect::CANDIDATE_ARM
            && self
                .arms
                .iter()
                .all(|a| a.knobs.is_empty() && a.guest_dir.is_some());
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

/// The knobs to tune: `--knobs` checked, or every catalogue knob that applies to `guest`.
pub fn chosen_knobs(list: Option<&str>, guest: TuneGuest) -> Result<Vec<Knob>, TuneError> {
    let v = match list {
        Some(l) => knobs::parse_knobs(l, guest).map_err(TuneError::Knobs)?,
        None => Knob::ALL
            .iter()
            .copied()
            .filter(|k| k.applies_to(guest))
            .collect(),
    };
    if v.is_empty() {
        return Err(TuneError::NoKnobs(
            "--knobs names none (see --list-knobs)".into(),
        ));
    }
    Ok(v)
}

/// The rounds of each phase under `--budget`: the screen runs `1 + k` arms, the confirm
/// phase at most `2 + k` (baseline, recommended, one leave-one-out arm per winner); both
/// shrink alike to fit the worst case.
pub fn phase_rounds(
    k: u64,
    screen: u64,
    confirm: u64,
    budget: Option<u64>,
) -> Result<(u64, u64), TuneError> {
    for r in [screen, confirm] {
        if r < MIN_ROUNDS {
            return Err(TuneError::TooFewRounds(r));
        }
    }
    let Some(b) = budget else {
        return Ok((screen, confirm));
    };
    let arms = (1 + k) + (2 + k);
    let per = b / arms;
    if per < MIN_ROUNDS {
        return Err(TuneError::Budget {
            budget: b,
            rounds: per,
            arms,
            need: arms * MIN_ROUNDS,
        });
    }
    Ok((screen.min(per), confirm.min(per)))
}

/// The noise of a verified bundle: its successful headlines' coefficient of variation.
pub fn noise_of(bundle: &Path) -> Result<truecold_proof::tune::Noise, TuneError> {
    let v = truecold_proof::verify::verify_dir(bundle);
    let why = |w: String| TuneError::NoiseBundle {
        path: bundle.to_path_buf(),
        why: w,
    };
    if !v.is_valid() {
        return Err(why(v.render(bundle, 3)));
    }
    let (_, rows) = truecold_proof::read_bundle(bundle).map_err(|e| why(e.to_string()))?;
    let ok: Vec<u64> = rows
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.latency_ns)
        .collect();
    let cv = truecold_proof::tune::cv_ppm(&ok).ok_or_else(|| {
        why(format!(
            "{} successful row(s): no variation to measure",
            ok.len()
        ))
    })?;
    Ok(truecold_proof::tune::Noise {
        cv_ppm: cv,
        source: format!(
            "{} ({} successful rows)",
            bundle
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| bundle.display().to_string()),
            ok.len()
        ),
    })
}

/// The catalogue as `--list-knobs` prints it.
pub fn catalogue_text() -> String {
    let mut s = String::from("knob\tclass\twhat it changes\tsource of the expected effect\n");
    for k in Knob::ALL {
        s.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            k.as_str(),
            k.class().as_str(),
            k.what(),
            k.source()
        ));
    }
    s
}

/// Builds (or finds, cached by content) the guest directory of the Kconfig knob set
/// `kconfig`: the kernel from `script tune <dir> <fragments…>`, the base guest's initramfs
/// and init beside it.
pub fn ensure_kernel(
    kconfig: &[Knob],
    base: &LinuxGuest,
    root: &Path,
    script: &Path,
) -> Result<PathBuf, TuneError> {
    let name = variant_name(kconfig);
    let dir = root.join(&name);
    let frags = root.join(format!("{name}.fragments"));
    std::fs::create_dir_all(&frags).map_err(io("create directory", &frags))?;
    let mut paths = Vec::new();
    for k in kconfig {
        if let (Change::Kconfig(text), Some(file)) = (k.change(), k.fragment_name()) {
            let p = frags.join(file);
            std::fs::write(&p, text).map_err(io("write", &p))?;
            paths.push(p.into_os_string());
        }
    }
    let build = crate::kernel::KernelBuild {
        script,
        variant: "tune",
        args: paths,
        tree: None,
    };
    build
        .guest_dir(&dir, base)
        .map_err(|source| TuneError::Kernel {
            knobs: name,
            source,
        })
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

/// One arm as it ran.
#[derive(Default)]
struct ArmRows {
    samples: Vec<Sample>,
    reports: Vec<u8>,
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
    pub facts: &'a HostFacts,
    pub warnings: Vec<String>,
    pub invocation: &'a str,
    /// `--force` for the VMM (Linux on a kvm_pvm host).
    pub force: bool,
}

fn prepare_arm(
    plan: &PhasePlan,
    arm: &PhaseArm,
    env: &PhaseEnv<'_>,
) -> Result<PreparedArm, TuneError> {
    let applied = knobs::apply(&arm.knobs, plan.backing);
    let spec = CampaignSpec {
        schedule: Schedule::Sequential { n: plan.rounds },
        contract: plan.contract,
        vcpus: plan.vcpus,
        mem_bytes: plan.mem_mib << 20,
        backing: applied.backing,
        deadline_ns: plan.deadline_ms.saturating_mul(1_000_000),
        kill_grace_ns: plan.kill_grace_ms.saturating_mul(1_000_000),
        observer: Observer::VmExit,
        interleaved: true,
    };
    let (guest, guest_dir) = match plan.contract {
        ContractKind::Probe => (None, None),
        ContractKind::Linux => {
            let dir = arm
                .guest_dir
                .clone()
                .unwrap_or_else(|| env.guest_dir.clone());
            let mut g = artifacts::linux_guest(&dir)?;
            if applied.bzimage {
                let bz = dir.join("bzImage");
                if !bz.is_file() {
                    return Err(ArtifactError::GuestMissing {
                        name: "bzImage",
                        path: bz,
                        dir,
                    }
                    .into());
                }
                g.vmlinux = bz;
            }
            (Some(g), Some(dir))
        }
    };
    let command = VmmCommand {
        program: env.vmm.clone(),
        args: run::vmm_args_for(
            &spec,
            guest
                .as_ref()
                .map(|g| (g.vmlinux.as_path(), g.initramfs.as_path())),
            &applied.cmdline_extra,
            applied.console,
            env.force && plan.contract == ContractKind::Linux,
            env.host,
        ),
    };
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

/// The `truecold run` that runs `arm` alone (its bundle's `cmdline.txt`).
fn arm_run_args(plan: &PhasePlan, p: &PreparedArm, vmm: &Path, out: &Path) -> Vec<String> {
    let ra = RunArgs {
        mode: ModeArg::Sequential,
        count: plan.rounds,
        vcpus: plan.vcpus,
        mem_mib: plan.mem_mib,
        backing: p.applied.backing,
        concurrency: None,
        rate: None,
        max_concurrency: None,
        deadline_ms: Some(plan.deadline_ms),
        kill_grace_ms: plan.kill_grace_ms,
        probe: plan.contract == ContractKind::Probe,
        linux: plan.contract == ContractKind::Linux,
        nested: false,
        out: Some(out.to_path_buf()),
        vmm: Some(vmm.to_path_buf()),
        guest_dir: p.guest_dir.clone(),
        cmdline_extra: p.applied.cmdline_extra.clone(),
        console: p.applied.console,
        drop_caches: false,
        engine: Vec::new(),
        engines: Vec::new(),
        seed: DEFAULT_SEED,
        firecracker: None,
        cloud_hypervisor: None,
        qemu: None,
        attribution: 0,
        parity: false,
        inject_tap_name: None,
    };
    run::explicit_args(
        &ra,
        &Schedule::Sequential { n: plan.rounds },
        run::guest_flag(plan.contract),
        ArgPaths {
            vmm,
            guest_dir: p.guest_dir.as_deref(),
            out,
            engines: &[],
        },
    )
}

/// Runs one phase and writes it to `dest` as a multi-arm directory (atomically): every arm a
/// complete bundle, then `truecold_proof::arms::write_arms`. Returns the verdict on it.
pub fn run_phase(
    plan: &PhasePlan,
    env: &PhaseEnv<'_>,
    dest: &Path,
) -> Result<(Written, bool), TuneError> {
    let bad = plan.problems();
    if !bad.is_empty() {
        return Err(TuneError::PlanInvalid(bad.join("; ")));
    }
    if dest.symlink_metadata().is_ok() {
        return Err(TuneError::OutExists(dest.to_path_buf()));
    }
    let prepared: Vec<PreparedArm> = plan
        .arms
        .iter()
        .map(|a| prepare_arm(plan, a, env))
        .collect::<Result<_, _>>()?;
    let version = run::engine_version(&env.vmm)?;
    let stop = crate::interrupt::install().map_err(|e| TuneError::from(RunError::from(e)))?;
    let k = prepared.len();
    let total = plan.rounds.saturating_mul(k as u64);
    eprintln!(
        "truecold: tune {} phase — {} — {} round(s) of {k} arm(s) in seeded shuffled order \
         (seed {}), {} vCPU, {} MiB → {}",
        plan.phase,
        plan.contract.label(),
        plan.rounds,
        plan.seed,
        plan.vcpus,
        plan.mem_mib,
        dest.display()
    );
    for p in &prepared {
        eprintln!(
            "truecold:   {}: {}",
            p.arm.name,
            crate::launch::shell_quote(&p.launcher.command.display(p.spec.deadline_ns, false))
        );
    }
    let mut progress = Progress::new(
        std::io::stderr(),
        Style::detect(),
        &format!("tune {}", plan.phase),
        total,
    );
    let mut rows: Vec<ArmRows> = (0..k).map(|_| ArmRows::default()).collect();
    let mut order: Vec<(u64, String)> = Vec::new();
    let mut interrupted = false;
    let before = Snapshot::take();
    for (round, i) in truecold_engine::order(k, plan.rounds, plan.seed) {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let p = &prepared[i];
        let arm = &mut rows[i];
        let ctx = p.spec.row_context();
        let slot = Slot {
            index: arm.samples.len() as u64,
            level: 1,
            intended_ns: now_ns(),
        };
        let (c0, t0) = (campaign::self_cpu_ns(), now_ns());
        let attempt = p.launcher.launch(slot);
        let (c1, t1) = (campaign::self_cpu_ns(), now_ns());
        arm.cpu_ns = arm.cpu_ns.saturating_add(c1.saturating_sub(c0));
        arm.wall_ns = arm.wall_ns.saturating_add(t1.saturating_sub(t0));
        arm.t_start_ns.get_or_insert(attempt.request_ns);
        arm.t_end_ns = attempt.reaped_ns;
        let (observed, why) = match vmm_report::observe_attempt(&attempt) {
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
        arm.reports
            .extend(campaign::report_line(slot.index, &s, &attempt).into_bytes());
        progress.record(s.ok, s.latency_ns);
        arm.samples.push(s);
        order.push((round, p.arm.name.clone()));
        progress.set_note(running_note(&p.arm.name, &rows[0], &rows[i]));
    }
    let after = Snapshot::take_after(&before);
    progress.finish();
    // Boot ids are unique within each arm and across the whole phase (every arm boots the
    // same guest).
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
    let tmp = campaign::staging_dir(dest, "tmp").map_err(|(op, path, source)| TuneError::Io {
        op,
        path,
        source,
    })?;
    let abs_dest = std::path::absolute(dest).unwrap_or_else(|_| dest.to_path_buf());
    // Attribution launches, after every measured round (never rows).
    let mut attributions: Vec<Vec<(String, Vec<u8>)>> = vec![Vec::new(); k];
    if plan.attribution > 0 && !interrupted {
        for (i, p) in prepared.iter().enumerate() {
            if !plan.attribute.contains(&p.arm.name) {
                continue;
            }
            attributions[i] = attribute(plan, p, env, &rows[i].samples, stop)?;
        }
    }
    for (i, ((p, r), files)) in prepared.iter().zip(rows).zip(attributions).enumerate() {
        let ex = Executed {
            planned: plan.rounds,
            interrupted,
            levels: vec![LevelRun {
                level: 1,
                planned: plan.rounds,
                launched: r.samples.len() as u64,
                t_start_ns: r.t_start_ns.unwrap_or(before.t_ns),
                t_end_ns: r.t_end_ns.max(r.t_start_ns.unwrap_or(before.t_ns)),
            }],
            before: before.clone(),
            after: after.clone(),
            run_facts: RunFacts {
                max_start_lag_ns: None,
                interval_ns: None,
                lanes: 1,
                in_window: Some((r.cpu_ns, r.wall_ns)),
                page_cache_dropped: None,
            },
            repeated_boot_ids: repeated[i],
            cmdlines: r.cmdlines.clone(),
            backings: r.backings.clone(),
            expired: 0,
            prepare_errors: Vec::new(),
            samples: r.samples,
            reports: r.reports,
        };
        let guest_cmdline = ex.cmdlines.iter().next().cloned();
        let vmm_line = run::vmm_command_line(&p.launcher.command, &p.spec);
        let configuration = Configuration {
            vcpus: p.spec.vcpus,
            mem_bytes: p.spec.mem_bytes,
            backing: campaign::backing_description(p.spec.backing, &ex.backings),
            cmdline: match (&guest_cmdline, plan.contract) {
                (Some(c), ContractKind::Linux) => c.clone(),
                _ => vmm_line.clone(),
            },
            vmm_path: env.vmm.display().to_string(),
            kernel_path: p.guest.as_ref().map(|g| abs(&g.vmlinux)),
            initramfs_path: p.guest.as_ref().map(|g| abs(&g.initramfs)),
            engine: EngineInfo {
                kind: Engine::Truecold,
                version: version.clone(),
            },
            knobs: p.arm.knobs.clone(),
        };
        let digests = artifacts::digests(&env.vmm, p.guest.as_ref())?;
        let mut warnings = env.warnings.clone();
        warnings.push(format!(
            "one arm of the tune's {} phase ({}): interleaved launch by launch with the other \
             arm(s) in seeded shuffled rounds (seed {}), so this arm's rows have the others' \
             launches between them",
            plan.phase,
            plan.arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            plan.seed
        ));
        if p.applied.bzimage {
            warnings.push(
                "this arm boots bzImage (64-bit boot protocol): `truecold run` has no flag for \
                 that; the VMM command below is the one that ran"
                    .into(),
            );
        }
        let result =
            campaign::result_json(&p.spec, &ex, configuration, digests, env.facts, warnings);
        let kernel_config = match &p.guest {
            Some(g) => Some(std::fs::read(&g.config).map_err(io("read", &g.config))?),
            None => None,
        };
        let explicit = arm_run_args(plan, p, &env.vmm, &abs_dest.join(&p.arm.name));
        let inputs = BundleInputs {
            kernel_config,
            cmdline: run::cmdline_txt(
                plan.contract.label(),
                env.invocation,
                &explicit,
                &vmm_line,
                guest_cmdline.as_deref(),
            ),
            extra_files: std::iter::once((REPORTS_FILE.to_string(), ex.reports.clone()))
                .chain(files)
                .collect(),
        };
        campaign::write(&tmp.join(&p.arm.name), &result, &ex.samples, &inputs).map_err(
            |source| TuneError::Bundle {
                arm: p.arm.name.clone(),
                source,
            },
        )?;
    }
    let record = ArmsPlan {
        seed: plan.seed,
        rounds: plan.rounds,
        arms: plan
            .arms
            .iter()
            .map(|a| ArmRef::tune(a.name.clone(), a.knobs.clone()))
            .collect(),
        order,
    };
    let verdict = truecold_proof::arms::write_arms(&tmp, &record).map_err(TuneError::Arms)?;
    rename_noreplace(&tmp, dest).map_err(|source| TuneError::Place {
        path: dest.to_path_buf(),
        source,
    })?;
    Ok((
        Written {
            path: dest.to_path_buf(),
            verdict,
        },
        interrupted,
    ))
}

/// `p`'s attribution files: `plan.attribution` launches with the attribution command line,
/// then attribution.jsonl (always) and attribution.csv / .svg (when they can be made; kept
/// as data otherwise: the arm's verifier names why).
fn attribute(
    plan: &PhasePlan,
    p: &PreparedArm,
    env: &PhaseEnv<'_>,
    measured: &[Sample],
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Vec<(String, Vec<u8>)>, TuneError> {
    let command = VmmCommand {
        program: env.vmm.clone(),
        args: run::vmm_args_for(
            &p.spec,
            p.guest
                .as_ref()
                .map(|g| (g.vmlinux.as_path(), g.initramfs.as_path())),
            &crate::attribution::cmdline_extra(&p.applied.cmdline_extra),
            p.applied.console,
            env.force && plan.contract == ContractKind::Linux,
            env.host,
        ),
    };
    let jsonl = crate::attribution::run_for(
        &p.spec,
        &command,
        plan.attribution,
        p.guest.as_ref().map(|g| g.vmlinux.as_path()),
        stop,
    )
    .map_err(|e| TuneError::from(RunError::from(e)))?;
    let mut files = Vec::new();
    match truecold_proof::attribution::generate(&jsonl, measured, env.host.clock().describe()) {
        Ok(f) => files.extend(f),
        Err(e) => eprintln!("truecold: tune: attribution of {}: {e}", p.arm.name),
    }
    files.push((truecold_proof::attribution::JSONL_FILE.to_string(), jsonl));
    Ok(files)
}

/// The progress note: the current arm and, once both have successes, its running Δp50
/// against the baseline (display only; the bundle is computed from the rows).
fn running_note(name: &str, baseline: &ArmRows, arm: &ArmRows) -> String {
    let p50 = |r: &ArmRows| {
        let mut v: Vec<u64> = r
            .samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(|s| s.latency_ns)
            .collect();
        v.sort_unstable();
        truecold_proof::stats::percentile_sorted(&v, 50, 100)
    };
    match (name == BASELINE, p50(baseline), p50(arm)) {
        (false, Some(b), Some(a)) if b > 0 => format!(
            "arm {name}: running Δp50 {:+.1} % vs baseline",
            (a as f64 - b as f64) / b as f64 * 100.0
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

/// A finished tune.
#[derive(Debug)]
pub struct TuneOutcome {
    pub written: Written,
    pub warnings: Vec<String>,
}

/// Where a phase runs: here on /dev/kvm, or in one L1 boot of the nested harness.
enum Runner<'a> {
    Native(PhaseEnv<'a>),
    Nested {
        args: &'a TuneArgs,
        base_guest_dir: PathBuf,
    },
}

impl Runner<'_> {
    fn run(&self, plan: &PhasePlan, dest: &Path) -> Result<Written, TuneError> {
        match self {
            Runner::Native(env) => {
                let (w, interrupted) = run_phase(plan, env, dest)?;
                if interrupted {
                    return Err(TuneError::Interrupted(phase_name(&plan.phase)));
                }
                Ok(w)
            }
            Runner::Nested {
                args,
                base_guest_dir,
            } => nested_phase(plan, args.paths.vmm.as_deref(), base_guest_dir, dest),
        }
    }
}

fn phase_name(p: &str) -> &'static str {
    if p == SCREEN {
        SCREEN
    } else {
        CONFIRM
    }
}

/// `results/<UTC>-tune-<probe|linux|nested>-<v>vcpu-<m>mib`.
pub fn default_dest(args: &TuneArgs, contract: ContractKind) -> PathBuf {
    let (stamp, _) = crate::clock::utc_now();
    let what = match (contract, args.nested) {
        (ContractKind::Probe, _) => "probe",
        (ContractKind::Linux, true) => "nested-linux",
        (ContractKind::Linux, false) => "linux",
    };
    PathBuf::from("results").join(format!(
        "{stamp}-tune-{what}-{}vcpu-{}mib",
        args.vcpus, args.mem_mib
    ))
}

/// Runs the whole tune `args` describe (see the module doc) and writes its directory.
pub fn tune(args: &TuneArgs, invocation: &str) -> Result<TuneOutcome, TuneError> {
    let mut warnings: Vec<String> = Vec::new();
    // The host first (a nested tune needs no KVM here: L1 brings its own).
    let (host, force, contract) = if args.nested {
        (HostKind::NestedEmulated, false, ContractKind::Linux)
    } else {
        let (kind, w) = run::kvm_host()?;
        warnings.extend(w);
        match (args.probe, args.linux, kind) {
            (true, _, _) => (kind, false, ContractKind::Probe),
            (false, true, HostKind::Pvm) => {
                let w = "--linux on a kvm_pvm host: an unmodified Linux kernel is not expected \
                         to boot here; every failure is kept as data"
                    .to_string();
                eprintln!("truecold: warning: {w}");
                warnings.push(w);
                (kind, true, ContractKind::Linux)
            }
            (false, false, HostKind::Pvm) => {
                eprintln!("truecold: {}", run::PVM_EXPLANATION);
                warnings.push(run::PVM_EXPLANATION.to_string());
                (kind, false, ContractKind::Probe)
            }
            (false, _, _) => (kind, false, ContractKind::Linux),
        }
    };
    let guest = match contract {
        ContractKind::Probe => TuneGuest::Probe,
        ContractKind::Linux => TuneGuest::Linux,
    };
    let knobs = chosen_knobs(args.knobs.as_deref(), guest)?;
    let noise = match &args.noise_from {
        Some(b) => Some(noise_of(b)?),
        None => None,
    };
    let rounds = match (args.rounds, &noise) {
        (Some(n), _) => n,
        (None, Some(n)) => {
            truecold_proof::tune::rounds_for(n.cv_ppm, truecold_proof::tune::MIN_EFFECT_PPM)
        }
        (None, None) => DEFAULT_ROUNDS,
    };
    if let Some(n) = &noise {
        eprintln!(
            "truecold: tune: noise {} ppm CV from {} → {rounds} round(s) per arm",
            n.cv_ppm, n.source
        );
    }
    let (rounds_screen, rounds_confirm) = phase_rounds(
        knobs.len() as u64,
        rounds,
        args.confirm_rounds.unwrap_or(rounds),
        args.budget,
    )?;
    let deadline_ms = args.deadline_ms.unwrap_or(if args.nested {
        crate::cli::DEFAULT_NESTED_DEADLINE_MS
    } else {
        crate::cli::DEFAULT_DEADLINE_MS
    });
    let dest = args
        .out
        .clone()
        .unwrap_or_else(|| default_dest(args, contract));
    if dest.symlink_metadata().is_ok() {
        return Err(TuneError::OutExists(dest));
    }
    let base_guest_dir = args.paths.guest_dir();
    let base = match contract {
        ContractKind::Linux => Some(artifacts::linux_guest(&base_guest_dir)?),
        ContractKind::Probe => None,
    };
    let vmm = match args.nested {
        true => args.paths.vmm.clone().unwrap_or_default(),
        false => artifacts::find_vmm(args.paths.vmm.as_deref())?,
    };
    let kernel_root = args.paths.kernel_root("out/tune-kernels");
    let script = args.paths.script();
    let facts = HostFacts::read(host);
    let runner = if args.nested {
        Runner::Nested {
            args,
            base_guest_dir: base_guest_dir.clone(),
        }
    } else {
        Runner::Native(PhaseEnv {
            vmm,
            guest_dir: base_guest_dir.clone(),
            host,
            facts: &facts,
            warnings: warnings.clone(),
            invocation,
            force,
        })
    };
    // Every arm's guest directory: the base one, or the kernel its Kconfig knobs build.
    let mut kernels: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut arm = |name: String, set: Vec<Knob>| -> Result<PhaseArm, TuneError> {
        let kc = kconfig_knobs(&set);
        let guest_dir = match (&base, kc.is_empty()) {
            (Some(b), false) => {
                let key = variant_name(&kc);
                match kernels.get(&key) {
                    Some(d) => Some(d.clone()),
                    None => {
                        let d = ensure_kernel(&kc, b, &kernel_root, &script)?;
                        kernels.insert(key, d.clone());
                        Some(d)
                    }
                }
            }
            _ => None,
        };
        Ok(PhaseArm {
            name,
            knobs: set,
            guest_dir,
        })
    };
    let plan_of = |phase: &str, rounds: u64, arms: Vec<PhaseArm>, attribute: &[&str]| PhasePlan {
        attribution: args.attribution,
        attribute: attribute.iter().map(|a| a.to_string()).collect(),
        phase: phase.to_string(),
        contract,
        seed: args.seed,
        rounds,
        vcpus: args.vcpus,
        mem_mib: args.mem_mib,
        backing: args.backing,
        deadline_ms,
        kill_grace_ms: args.kill_grace_ms,
        arms,
    };
    let mut screen_arms = vec![arm(BASELINE.to_string(), Vec::new())?];
    for k in &knobs {
        screen_arms.push(arm(k.as_str().to_string(), vec![*k])?);
    }
    // The screen cannot know whether a knob will win, so it always attributes its baseline
    // (the README shows it when no confirm phase runs); the confirm phase attributes its own
    // baseline and the recommended arm.
    let screen = plan_of(SCREEN, rounds_screen, screen_arms, &[BASELINE]);
    let tmp = campaign::staging_dir(&dest, "tune").map_err(|(op, path, source)| TuneError::Io {
        op,
        path,
        source,
    })?;
    let screen_written = runner.run(&screen, &tmp.join(SCREEN))?;
    if !screen_written.verdict.is_valid() {
        return Err(TuneError::PhaseInvalid {
            path: screen_written.path.clone(),
            reasons: screen_written
                .verdict
                .reasons
                .iter()
                .map(|r| r.detail.clone())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let winners = truecold_proof::tune::screen_of_dir(&tmp.join(SCREEN), args.seed, &knobs)
        .map_err(TuneError::Tune)?
        .recommended;
    eprintln!(
        "truecold: tune: winners of the screen phase: {}",
        if winners.is_empty() {
            "none".to_string()
        } else {
            variant_name(&winners)
        }
    );
    if !winners.is_empty() {
        let mut confirm_arms = vec![
            arm(BASELINE.to_string(), Vec::new())?,
            arm(RECOMMENDED.to_string(), winners.clone())?,
        ];
        if winners.len() >= 2 {
            for w in &winners {
                let rest: Vec<Knob> = winners.iter().copied().filter(|k| k != w).collect();
                confirm_arms.push(arm(format!("{RECOMMENDED}-minus-{w}"), rest)?);
            }
        }
        let confirm = plan_of(
            CONFIRM,
            rounds_confirm,
            confirm_arms,
            &[BASELINE, RECOMMENDED],
        );
        runner.run(&confirm, &tmp.join(CONFIRM))?;
    }
    let plan = truecold_proof::tune::TunePlan {
        seed: args.seed,
        guest,
        knobs: knobs.clone(),
        vcpus: args.vcpus,
        mem_bytes: args.mem_mib << 20,
        backing: args.backing,
        rounds_screen,
        rounds_confirm,
        budget: args.budget,
        noise,
    };
    let verdict = truecold_proof::tune::write_tune(&tmp, &plan).map_err(TuneError::Tune)?;
    rename_noreplace(&tmp, &dest).map_err(|source| TuneError::Place {
        path: dest.clone(),
        source,
    })?;
    Ok(TuneOutcome {
        written: Written {
            path: dest,
            verdict,
        },
        warnings,
    })
}

/// One phase in one L1 boot: the arms' guest directories are packed into L1 under
/// `/tune/<variant>/`, the plan (with L1's paths) at [`L1_PHASE_PLAN`], and `truecold
/// tune-phase` writes the phase directory, which is received, placed at `dest` and verified.
fn nested_phase(
    plan: &PhasePlan,
    vmm: Option<&Path>,
    base_guest_dir: &Path,
    dest: &Path,
) -> Result<Written, TuneError> {
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
    std::fs::create_dir_all(&work).map_err(io("create directory", &work))?;
    let plan_file = work.join(format!("{}.json", plan.phase));
    let bytes = serde_json::to_vec_pretty(&inner).map_err(|source| TuneError::Plan {
        path: plan_file.clone(),
        source,
    })?;
    std::fs::write(&plan_file, bytes).map_err(io("write", &plan_file))?;
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
        &format!("{}/{}", truecold_nested::OUT_DIR, crate::nested::L1_BUNDLE),
        "--vmm",
        truecold_nested::engine_l1_path(Engine::Truecold),
        "--guest-dir",
        "/guest",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ra = RunArgs {
        mode: ModeArg::Sequential,
        count: plan.rounds,
        vcpus: plan.vcpus,
        mem_mib: plan.mem_mib,
        backing: plan.backing,
        concurrency: None,
        rate: None,
        max_concurrency: None,
        deadline_ms: Some(plan.deadline_ms),
        kill_grace_ms: plan.kill_grace_ms,
        probe: false,
        linux: false,
        nested: true,
        out: Some(dest.to_path_buf()),
        vmm: vmm.map(Path::to_path_buf),
        guest_dir: Some(base_guest_dir.to_path_buf()),
        cmdline_extra: String::new(),
        console: false,
        drop_caches: false,
        engine: Vec::new(),
        engines: Vec::new(),
        // L1's QEMU seed: the tune's, offset by the phase, so the phases' L1 runs draw
        // different random numbers (nonces, boot ids) and each is reproducible.
        seed: plan.seed.wrapping_add(u64::from(plan.phase != SCREEN)),
        firecracker: None,
        cloud_hypervisor: None,
        qemu: None,
        attribution: plan.attribution.saturating_mul(plan.attribute.len() as u64),
        parity: false,
        inject_tap_name: None,
    };
    let planned = plan.rounds.saturating_mul(plan.arms.len() as u64);
    let w = crate::nested::in_l1(
        &ra,
        argv,
        extra,
        planned,
        base_guest_dir,
        dest.to_path_buf(),
    )
    .map_err(|e| TuneError::Nested(Box::new(e)))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(w)
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
) -> Result<Written, TuneError> {
    if nested {
        return nested_phase(plan, vmm, guest_dir, dest);
    }
    let (host, warnings) = run::kvm_host()?;
    let facts = HostFacts::read(host);
    let env = PhaseEnv {
        vmm: artifacts::find_vmm(vmm)?,
        guest_dir: guest_dir.to_path_buf(),
        host,
        facts: &facts,
        warnings,
        invocation,
        force: host == HostKind::Pvm,
    };
    let (w, interrupted) = run_phase(plan, &env, dest)?;
    if interrupted {
        return Err(TuneError::Interrupted("A/B"));
    }
    Ok(w)
}

/// `truecold tune-phase`: reads the plan, runs the phase on this host's KVM, writes it.
pub fn tune_phase(args: &TunePhaseArgs, invocation: &str) -> Result<(Written, bool), TuneError> {
    let bytes = std::fs::read(&args.plan).map_err(io("read", &args.plan))?;
    let plan: PhasePlan = serde_json::from_slice(&bytes).map_err(|source| TuneError::Plan {
        path: args.plan.clone(),
        source,
    })?;
    let (host, warnings) = run::kvm_host()?;
    let facts = HostFacts::read(host);
    let env = PhaseEnv {
        vmm: artifacts::find_vmm(args.vmm.as_deref())?,
        guest_dir: artifacts::guest_dir(args.guest_dir.as_deref()),
        host,
        facts: &facts,
        warnings,
        invocation,
        force: host == HostKind::Pvm,
    };
    run_phase(&plan, &env, &args.out)
}

#[cfg(test)]
mod tests;
