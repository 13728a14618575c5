//! The checked plans, each built once from its command's clap arguments (every cross-flag
//! check, default and parse here; an error is an [`ArgError`]): a campaign's
//! ([`CampaignPlan::from_cli`], or, for a tune arm or a bisect step, from code:
//! [`CampaignPlan::sequential`]), a tune's and a tune phase's ([`tune`]), and the three bisect
//! commands' ([`bisect`]). Everything downstream (the plain campaign, the engines and parity
//! campaigns, the nested harness, `tune`, `bisect`, `bisect_config`) reads a plan, never the
//! command line; [`explicit_args`] spells a campaign plan back as the `truecold run`
//! arguments that run it again.

pub mod bisect;
pub mod tune;

use crate::artifacts::own_kernel::OwnKernel;
use crate::attribution::instrumentation::{Instrument, Instrumentation};
use crate::campaign::process_launcher::shell_quote;
use crate::campaign::schedule::{Schedule, ScheduleError, DEFAULT_OPEN_LOOP_IN_FLIGHT};
use crate::cli::{InstrumentArgs, KernelPaths, ModeArg, RunArgs, DEFAULT_SEED};
use std::path::{Path, PathBuf};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, Engine, RamLayout};
use truecold_proto::limits::{GuestMem, LimitError, Vcpus};
use truecold_proto::tune::KnobSetError;

/// The fewest rounds of a tune phase (a kernel A/B's too).
pub use truecold_proof::tune::MIN_ROUNDS;

/// Argument errors.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgError {
    #[error("--{flag} applies to --mode {applies_to} only (this campaign is --mode {mode})")]
    NotForMode {
        flag: &'static str,
        applies_to: &'static str,
        mode: &'static str,
    },
    #[error("--mode open-loop needs --rate (arrivals per second)")]
    RateMissing,
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error("--deadline-ms must be at least 1")]
    DeadlineZero,
    #[error("--rate {0}/s rounds to 0 arrivals per 1,000 s")]
    RateTooLow(f64),
    #[error("invalid campaign")]
    Schedule(#[from] ScheduleError),
    #[error("--engine {0} is given twice: each engine is one arm")]
    DuplicateEngine(Engine),
    #[error("--arm-backing {0}=…: `{0}` is not an arm of this campaign (--engine/--engines)")]
    ArmBackingNotAnArm(Engine),
    #[error("--arm-backing {0}=… given twice")]
    ArmBackingTwice(Engine),
    #[error("--{flag} {engine}=…: `{engine}` is not an arm of this campaign (--engine/--engines)")]
    ArmGuestNotAnArm { flag: &'static str, engine: Engine },
    #[error("arm `{0}` is given its own guest twice (--arm-kernel-config / --arm-guest-dir)")]
    ArmGuestTwice(Engine),
    #[error("--arm-kernel-config / --arm-guest-dir: {0}")]
    ArmGuest(&'static str),
    #[error("an engines campaign runs --mode sequential only (rounds of every arm, one launch at a time)")]
    EnginesMode,
    #[error("--{0} does not apply to an engines campaign (the guest is Linux; its serial port is the transport)")]
    NotForEngines(&'static str),
    #[error(
        "--pin-vcpus pins truecold-vmm's vCPU threads, and no peer engine pins its own the same \
         way: an engines campaign would set unlike placements side by side (pin in a campaign \
         of truecold alone)"
    )]
    PinEngines,
    #[error(
        "--attribution does not apply to an engines campaign: attribution launches are \
         truecold-vmm boots read from its own boot report (host stages with exits and page \
         faults; `rip` samples through `truecold-vmm boot --sample-rip-us`, which no peer \
         engine has), and an engines campaign observes every arm, truecold's included, on \
         the serial port; attribute truecold-vmm's boot in a campaign of its own (no \
         --engine/--engines)"
    )]
    AttributionEngines,
    #[error(
        "--attribution-sample-us {0} is the `rip` instrument's sampling period; \
         --attribution-instrument initcall samples nothing (leave the period out, or use \
         --attribution-instrument rip)"
    )]
    SamplePeriodNotRip(truecold_proto::rip::SamplePeriod),
    #[error("--{0} applies to an engines campaign only (--engine …)")]
    EnginesOnly(&'static str),
    #[error("--seed applies to an engines campaign (--engine …) or a --nested one only")]
    SeedNotUsed,
    #[error("--parity: {0}")]
    Parity(&'static str),
    #[error("your kernel (--kernel-config / --kernel-fragment): {0}")]
    OwnKernel(&'static str),
    #[error("--stop-after applies to a sequential campaign of truecold alone (--mode sequential, no --engine, no --parity): the concurrent modes, engines and parity campaigns run every launch")]
    StopAfterNotSequential,
    #[error("--knobs")]
    Knobs(#[source] KnobSetError),
    #[error("no knob to tune: --knobs names none (see --list-knobs)")]
    NoKnobs,
    #[error("--count / --confirm-rounds must be at least {MIN_ROUNDS} (got {0})")]
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
    #[error("--cmdline-extra extends a Linux kernel's command line; the probe guest reads none (boot Linux: --linux or --nested)")]
    CmdlineExtraProbe,
    #[error("--cmdline-extra extends a Linux kernel's command line, and this host's /dev/kvm is kvm_pvm: with no guest named (--linux, --nested) the campaign falls back to the probe guest, which has no kernel command line (boot Linux in the nested harness: --nested)")]
    CmdlineExtraProbeFallback,
    #[error("--bzimage boots a Linux guest's bzImage in truecold-vmm: {0}")]
    BzImage(&'static str),
    #[error(
        "--drop-caches applies to --mode sequential only: with samples in flight together, \
         dropping the page cache before one lands inside another's measured window"
    )]
    DropCachesMode,
    #[error("-n must be at least 3 and --max-n at least -n (got -n {n}, --max-n {max_n})")]
    BisectSizes { n: u64, max_n: u64 },
}

fn mode_name(m: ModeArg) -> &'static str {
    match m {
        ModeArg::Sequential => "sequential",
        ModeArg::Burst => "burst",
        ModeArg::OpenLoop => "open-loop",
        ModeArg::Sweep => "sweep",
        ModeArg::Churn => "churn",
    }
}

/// Default concurrency of burst and churn.
pub const DEFAULT_CONCURRENCY: u32 = 2;
/// Default top level of the sweep.
pub const DEFAULT_SWEEP_MAX: u32 = 4;

/// Default deadline of a campaign on a real host.
pub const DEFAULT_DEADLINE_MS: u64 = 2_000;
/// Default deadline inside the nested harness, where L1 and L2 both run under emulation.
pub const DEFAULT_NESTED_DEADLINE_MS: u64 = 300_000;

/// The per-launch deadline in effect: the one given, else the default where it runs.
pub fn deadline_ms(given: Option<u64>, nested: bool) -> u64 {
    given.unwrap_or(if nested {
        DEFAULT_NESTED_DEADLINE_MS
    } else {
        DEFAULT_DEADLINE_MS
    })
}

/// Where the campaign runs and what it boots, as asked (`--probe`, `--linux`, `--nested`,
/// or none of them: Linux where this host's /dev/kvm can boot it, else the probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Auto,
    Probe,
    Linux,
    /// Linux in the nested harness's L1.
    Nested,
}

impl Target {
    /// A Linux campaign on this host (`false`), or in the nested harness (`true`).
    pub fn linux(nested: bool) -> Target {
        if nested {
            Target::Nested
        } else {
            Target::Linux
        }
    }

    /// The guest of `contract`, on this host.
    pub fn of_contract(contract: ContractKind) -> Target {
        match contract {
            ContractKind::Probe => Target::Probe,
            ContractKind::Linux => Target::Linux,
        }
    }

    pub fn is_nested(self) -> bool {
        self == Target::Nested
    }
}

/// The guest every launch boots and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestSpec {
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// The backing asked for (`--backing`); `None`: each engine's own default for the guest
    /// ([`Backing::default_for`], resolved by [`CampaignPlan::backing_of`]).
    pub backing: Option<Backing>,
    /// Appended to the guest kernel command line.
    pub cmdline_extra: String,
    /// The guest's serial console to the VMM's stderr.
    pub console: bool,
    /// Boot the guest directory's `bzImage` (the 64-bit boot protocol) instead of `vmlinux`.
    pub bzimage: bool,
    /// truecold-vmm's RAM layout (`--ram-layout`).
    pub ram_layout: RamLayout,
    /// Each vCPU thread pinned to a CPU of its own (`--pin-vcpus`).
    pub pin_vcpus: bool,
}

impl GuestSpec {
    /// `vcpus` and `mem` on `backing`, with the kernel command line as built and no console.
    pub fn plain(vcpus: Vcpus, mem: GuestMem, backing: Backing) -> GuestSpec {
        GuestSpec {
            vcpus,
            mem,
            backing: Some(backing),
            cmdline_extra: String::new(),
            console: false,
            bzimage: false,
            ram_layout: RamLayout::default_for(mem),
            pin_vcpus: false,
        }
    }
}

/// The peer engines' binaries as given (each located by `crate::engines::find_binary`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineBins {
    pub firecracker: Option<PathBuf>,
    pub cloud_hypervisor: Option<PathBuf>,
    pub qemu: Option<PathBuf>,
}

/// One campaign, checked: what `truecold run` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignPlan {
    pub target: Target,
    pub guest: GuestSpec,
    pub schedule: Schedule,
    /// The per-launch deadline in effect, ms.
    pub deadline_ms: u64,
    /// Past the deadline, how long the VMM may take to print its report, ms.
    pub kill_grace_ms: u64,
    pub drop_caches: bool,
    /// Attribution launches after the measured campaign (0: none).
    pub attribution: u64,
    /// How they measure the boot.
    pub instrument: Instrumentation,
    /// The parity contract.
    pub parity: bool,
    /// Reliability tests only: every parity launch's tap name.
    pub inject_tap_name: Option<String>,
    /// Engine arms, in the order given; empty for a truecold-only campaign.
    pub engines: Vec<Engine>,
    /// Arms whose backing is set on its own (`--arm-backing`), over [`GuestSpec::backing`].
    pub arm_backing: Vec<(Engine, Backing)>,
    /// Arms that boot a kernel of their own (`--arm-kernel-config`): built before the
    /// campaign into a guest directory, which then becomes the arm's `arm_guest_dir`.
    pub arm_kernel: Vec<(Engine, OwnKernel)>,
    /// Arms that boot the guest of their own directory (`--arm-guest-dir`), not the
    /// campaign's.
    pub arm_guest_dir: Vec<(Engine, PathBuf)>,
    /// The engines campaign's order seed; with `Target::Nested`, L1's QEMU `-seed` too.
    pub seed: u64,
    pub engine_bins: EngineBins,
    /// The bundle directory (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    /// The truecold-vmm binary (`None`: next to this binary).
    pub vmm: Option<PathBuf>,
    /// The guest artifacts (`None`: $TRUECOLD_GUEST_DIR, else out/guest).
    pub guest_dir: Option<PathBuf>,
    /// The user's own kernel (`--kernel-config`): built into a guest directory of its own
    /// before the campaign, which then runs from it.
    pub own_kernel: Option<OwnKernel>,
    /// The fail-fast rule's K (`--stop-after`, default
    /// [`truecold_proof::StopRule::DEFAULT_AFTER`]): `None` under `--keep-going` and where no
    /// rule runs (engines campaigns, the concurrent modes, tune arms, bisect steps).
    pub stop_after: Option<u64>,
}

impl CampaignPlan {
    /// The plan `truecold run`'s arguments describe, every check made.
    pub fn from_cli(a: &RunArgs) -> Result<CampaignPlan, ArgError> {
        let engines = arms(a)?;
        let arm_backing = arm_backing(a, &engines)?;
        let (arm_kernel, arm_guest_dir) = arm_guests(a, &engines)?;
        check_parity(a, &engines)?;
        if a.probe && !a.cmdline_extra.is_empty() {
            return Err(ArgError::CmdlineExtraProbe);
        }
        if a.bzimage {
            for (bad, why) in [
                (a.probe, "the probe guest has no kernel (no --probe)"),
                (
                    !engines.is_empty(),
                    "not in an engines campaign (no --engine)",
                ),
                (a.parity, "not under the parity contract (no --parity)"),
            ] {
                if bad {
                    return Err(ArgError::BzImage(why));
                }
            }
        }
        let schedule = schedule(a)?;
        let stop_after = stop_after(a, &schedule, &engines)?;
        let target = match (a.probe, a.linux, a.nested) {
            (true, _, _) => Target::Probe,
            (_, true, _) => Target::Linux,
            (_, _, true) => Target::Nested,
            _ => Target::Auto,
        };
        Ok(CampaignPlan {
            target,
            guest: GuestSpec {
                vcpus: a.guest.vcpus,
                mem: a.guest.mem,
                backing: a.backing,
                cmdline_extra: a.cmdline_extra.clone(),
                console: a.console,
                bzimage: a.bzimage,
                ram_layout: a
                    .ram_layout
                    .unwrap_or_else(|| RamLayout::default_for(a.guest.mem)),
                pin_vcpus: a.pin_vcpus,
            },
            schedule,
            deadline_ms: deadline_ms(a.deadline_ms, a.nested),
            kill_grace_ms: a.kill_grace_ms,
            drop_caches: a.drop_caches,
            attribution: a.attribution,
            instrument: instrumentation(&a.instrument)?,
            parity: a.parity,
            inject_tap_name: a.inject_tap_name.clone(),
            engines,
            arm_backing,
            arm_kernel,
            arm_guest_dir,
            seed: a.seed,
            engine_bins: EngineBins {
                firecracker: a.firecracker.clone(),
                cloud_hypervisor: a.cloud_hypervisor.clone(),
                qemu: a.qemu.clone(),
            },
            out: a.out.clone(),
            vmm: a.vmm.clone(),
            guest_dir: a.guest_dir.clone(),
            own_kernel: own_kernel(a)?,
            stop_after,
        })
    }

    /// The plan of `truecold run <words>` (tests: the words as a user types them).
    #[cfg(test)]
    pub(crate) fn of_words(words: &[&str]) -> Result<CampaignPlan, ArgError> {
        let mut v = vec!["truecold", "run"];
        v.extend_from_slice(words);
        let a = crate::cli::Cli::try_parse_run(v)
            .unwrap_or_else(|e| panic!("`truecold run {}`: {e}", words.join(" ")));
        CampaignPlan::from_cli(&a)
    }

    /// `n` sequential launches of `guest` (a tune arm, a bisect step, a phase in L1): no
    /// engine arms, no parity, no attribution, the default seed and paths until set.
    pub fn sequential(
        target: Target,
        guest: GuestSpec,
        n: u64,
        deadline_ms: u64,
        kill_grace_ms: u64,
    ) -> Result<CampaignPlan, ArgError> {
        if deadline_ms == 0 {
            return Err(ArgError::DeadlineZero);
        }
        let schedule = Schedule::Sequential { n };
        schedule.validate()?;
        Ok(CampaignPlan {
            target,
            guest,
            schedule,
            deadline_ms,
            kill_grace_ms,
            drop_caches: false,
            attribution: 0,
            instrument: Instrumentation::default(),
            parity: false,
            inject_tap_name: None,
            engines: Vec::new(),
            arm_backing: Vec::new(),
            arm_kernel: Vec::new(),
            arm_guest_dir: Vec::new(),
            seed: DEFAULT_SEED,
            engine_bins: EngineBins::default(),
            out: None,
            vmm: None,
            guest_dir: None,
            own_kernel: None,
            stop_after: None,
        })
    }

    /// The same plan with these paths.
    pub fn at(
        mut self,
        vmm: Option<PathBuf>,
        guest_dir: Option<PathBuf>,
        out: Option<PathBuf>,
    ) -> CampaignPlan {
        self.vmm = vmm;
        self.guest_dir = guest_dir;
        self.out = out;
        self
    }

    /// The same plan with `seed` (L1's QEMU seed in the nested harness).
    pub fn seeded(mut self, seed: u64) -> CampaignPlan {
        self.seed = seed;
        self
    }

    /// The same plan with `k` attribution launches.
    pub fn attributed(mut self, k: u64) -> CampaignPlan {
        self.attribution = k;
        self
    }

    pub fn nested(&self) -> bool {
        self.target.is_nested()
    }

    /// The backing `engine`'s launches get (`linux`: the guest is Linux, not the probe): its
    /// `--arm-backing`, else `--backing`, else the engine's own default
    /// ([`Backing::default_for`], one definition).
    pub fn backing_of(&self, engine: Engine, linux: bool) -> Backing {
        self.arm_backing
            .iter()
            .find(|(e, _)| *e == engine)
            .map(|(_, b)| *b)
            .or(self.guest.backing)
            .unwrap_or(Backing::default_for(engine, linux))
    }

    /// Every backing an arm of this campaign may get, whichever guest it boots (for the host
    /// checks made before the guest is known: only an asked-for backing can be `hugetlb`).
    pub fn asked_backings(&self) -> Vec<Backing> {
        self.guest
            .backing
            .into_iter()
            .chain(self.arm_backing.iter().map(|(_, b)| *b))
            .collect()
    }

    /// The per-launch deadline, ns.
    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ms.saturating_mul(1_000_000)
    }

    /// The kill grace, ns.
    pub fn kill_grace_ns(&self) -> u64 {
        self.kill_grace_ms.saturating_mul(1_000_000)
    }

    /// The launches the schedule makes.
    pub fn planned(&self) -> Result<u64, ScheduleError> {
        self.schedule.validate()
    }
}

/// The attribution launches' instrumentation `--attribution-instrument` and
/// `--attribution-sample-us` ask for (`truecold run`, `truecold tune`); a period given to
/// `initcall` (which samples nothing) is refused, never dropped.
pub fn instrumentation(a: &InstrumentArgs) -> Result<Instrumentation, ArgError> {
    let i = Instrumentation {
        instrument: a.attribution_instrument,
        period: a.attribution_sample_us,
    };
    if i.instrument != Instrument::Rip
        && i.period != crate::attribution::instrumentation::default_period()
    {
        return Err(ArgError::SamplePeriodNotRip(i.period));
    }
    Ok(i)
}

/// `--kernel-config` / `--kernel-source`: a Linux campaign under the strict contract.
fn own_kernel(a: &RunArgs) -> Result<Option<OwnKernel>, ArgError> {
    let given = a.own_kernel != crate::cli::KernelConfigArgs::default();
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

/// `--kernel-config` / `--kernel-fragment` of `truecold tune` and `truecold bisect run/step`
/// (with `source`: tune's `--kernel-source`; a bisect builds its tree) as the user's kernel;
/// `None` when neither is given.
pub fn kernel_config_of(
    k: &crate::cli::KernelConfigArgs,
    source: Option<&Path>,
) -> Result<Option<OwnKernel>, ArgError> {
    use crate::artifacts::own_kernel::ConfigForm;
    let (config, form) = match (&k.kernel_config, &k.kernel_fragment) {
        (Some(c), None) => (c, ConfigForm::Full),
        (None, Some(f)) => (f, ConfigForm::Fragment),
        (Some(_), Some(_)) => {
            return Err(ArgError::OwnKernel(
                "give a complete .config (--kernel-config) or a fragment over truecold's base \
                 (--kernel-fragment), not both",
            ))
        }
        (None, None) if source.is_some() => {
            return Err(ArgError::OwnKernel(
                "--kernel-source builds the kernel --kernel-config or --kernel-fragment \
                 describes: give one",
            ))
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(OwnKernel {
        config: config.clone(),
        form,
        source: source.map(Path::to_path_buf),
    }))
}

/// The engine arms, in the order given (`--engine` then `--engines`). Checked: no engine
/// twice, and the flags of the other kind of campaign absent.
fn arms(a: &RunArgs) -> Result<Vec<Engine>, ArgError> {
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
    if a.attribution > 0 {
        return Err(ArgError::AttributionEngines);
    }
    Ok(arms)
}

/// `--arm-backing`: each an arm of the campaign, at most once.
fn arm_backing(a: &RunArgs, arms: &[Engine]) -> Result<Vec<(Engine, Backing)>, ArgError> {
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
fn arm_guests(
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
                form: crate::artifacts::own_kernel::ConfigForm::Full,
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
fn check_parity(a: &RunArgs, arms: &[Engine]) -> Result<(), ArgError> {
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

/// The schedule the arguments describe, checked (with the deadline).
/// Whether the fail-fast rule runs in a campaign: sequential, truecold alone, not under the
/// parity contract (whose launches go through the engines driver, which runs every one).
fn rule_runs(schedule: &Schedule, truecold_alone: bool, parity: bool) -> bool {
    matches!(schedule, Schedule::Sequential { .. }) && truecold_alone && !parity
}

/// The fail-fast rule's K: `--stop-after K` or the default in a sequential campaign of
/// truecold alone; none under `--keep-going` or anywhere else (`--stop-after` there is an
/// error).
fn stop_after(
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

fn schedule(a: &RunArgs) -> Result<Schedule, ArgError> {
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
            let interval_ns = crate::campaign::schedule::interval_for_rate(per_ks / 1000.0)?;
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

/// Where a tune's or a bisect's kernels come from and go, defaults resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// The truecold-vmm binary (`None`: next to this binary).
    pub vmm: Option<PathBuf>,
    /// The base guest directory in effect: its initramfs and init go with every kernel.
    pub guest_dir: PathBuf,
    /// Where the kernels are built.
    pub kernel_root: PathBuf,
    /// The kernel build script.
    pub script: PathBuf,
}

impl KernelPlan {
    /// `--vmm`, `--guest-dir` (else $TRUECOLD_GUEST_DIR, else out/guest), `--kernel-dir`
    /// (else `default_root`), `--kernel-build` (else kernel-config/build.sh).
    pub fn from_cli(p: &KernelPaths, default_root: &str) -> KernelPlan {
        KernelPlan {
            vmm: p.vmm.clone(),
            guest_dir: crate::artifacts::guest_files::guest_dir(p.guest_dir.as_deref()),
            kernel_root: p
                .kernel_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(default_root)),
            script: p.kernel_build.clone().unwrap_or_else(|| {
                PathBuf::from(crate::artifacts::kernel_build::DEFAULT_KERNEL_BUILD)
            }),
        }
    }
}

/// Where the explicit argument list points: the resolved paths of a campaign.
#[derive(Clone, Copy, Debug)]
pub struct ArgPaths<'a> {
    pub vmm: &'a Path,
    /// Linux campaigns only (the probe needs no guest artifacts).
    pub guest_dir: Option<&'a Path>,
    pub out: &'a Path,
    /// Engines campaign: the arms, in order, each with its binary (truecold's is `vmm`).
    pub engines: &'a [(Engine, PathBuf)],
}

/// The `truecold run` flag of a contract: the guest the campaign actually booted.
pub fn guest_flag(contract: ContractKind) -> &'static str {
    match contract {
        ContractKind::Linux => "--linux",
        ContractKind::Probe => "--probe",
    }
}

/// The rate of an open loop as `truecold run --rate` takes it: arrivals per second with
/// the three decimals the schema keeps, which gives the same interval.
fn rate_arg(interval_ns: u64) -> String {
    let per_ks = crate::campaign::schedule::rate_per_ks(interval_ns);
    format!("{}.{:03}", per_ks / 1000, per_ks % 1000)
}

/// `--mode`, `--count` and the schedule's own flags.
fn schedule_args(schedule: &Schedule) -> (&'static str, u64, Vec<(&'static str, String)>) {
    match *schedule {
        Schedule::Sequential { n } => ("sequential", n, vec![]),
        Schedule::Burst { n, concurrency } => {
            ("burst", n, vec![("--concurrency", concurrency.to_string())])
        }
        Schedule::Churn { n, concurrency } => {
            ("churn", n, vec![("--concurrency", concurrency.to_string())])
        }
        Schedule::OpenLoop {
            n,
            interval_ns,
            max_in_flight,
        } => (
            "open-loop",
            n,
            vec![
                ("--rate", rate_arg(interval_ns)),
                ("--concurrency", max_in_flight.to_string()),
            ],
        ),
        Schedule::Sweep {
            n_per_level,
            max_concurrency,
        } => (
            "sweep",
            n_per_level,
            vec![("--max-concurrency", max_concurrency.to_string())],
        ),
    }
}

/// Every argument of a `truecold run` campaign after `run`, defaults filled in and paths
/// resolved, so that running `truecold run` with them runs the same campaign (with another
/// `--out`: a bundle is never overwritten). `guest` is [`guest_flag`] of what ran.
pub fn explicit_args(plan: &CampaignPlan, guest: &str, paths: ArgPaths<'_>) -> Vec<String> {
    // Exhaustive on purpose: a new field must be placed here (or knowingly left out).
    let CampaignPlan {
        target: _, // `guest`
        guest:
            GuestSpec {
                vcpus,
                mem,
                backing,
                cmdline_extra,
                console,
                bzimage,
                ram_layout,
                pin_vcpus,
            },
        schedule,
        deadline_ms,
        kill_grace_ms,
        drop_caches,
        attribution,
        instrument,
        parity,
        inject_tap_name,
        engines: _,     // `paths.engines`
        arm_backing: _, // through `plan.backing_of`, below
        arm_kernel: _,  // built before the campaign: each becomes an `arm_guest_dir` (run.rs)
        arm_guest_dir,
        seed,           // engines campaigns (a plain nested one's is L1's, not here)
        engine_bins: _, // `paths.engines`
        out: _,         // `paths`
        vmm: _,         // `paths`
        guest_dir: _,   // `paths`
        own_kernel: _,  // built before the campaign: its guest directory is `paths`' (run.rs)
        stop_after,
    } = plan;
    let mut v: Vec<String> = vec![guest.to_string()];
    if *parity {
        v.push("--parity".into());
    }
    if let Some(t) = inject_tap_name {
        v.push("--inject-tap-name".into());
        v.push(t.clone());
    }
    let mut kv = |k: &str, val: String| {
        v.push(k.to_string());
        v.push(val);
    };
    let (mode, count, extra) = schedule_args(schedule);
    kv("--mode", mode.to_string());
    kv("--count", count.to_string());
    kv("--vcpus", vcpus.to_string());
    kv("--mem-mib", mem.mib().to_string());
    // Every backing spelled out, each engine's default resolved: a default changed later
    // does not change what this line runs.
    let linux = guest != guest_flag(ContractKind::Probe);
    if paths.engines.is_empty() {
        kv(
            "--backing",
            plan.backing_of(Engine::Truecold, linux)
                .as_str()
                .to_string(),
        );
    } else {
        if let Some(b) = backing {
            kv("--backing", b.as_str().to_string());
        }
        for (e, _) in paths.engines {
            let b = plan.backing_of(*e, linux);
            if Some(b) != *backing {
                kv("--arm-backing", format!("{}={}", e.as_str(), b.as_str()));
            }
        }
    }
    // Always spelt out: a line without it means `RamLayout::ABSENT`, not today's default,
    // so rerunning the line runs the same layout whatever a later default is.
    kv("--ram-layout", ram_layout.as_str().to_string());
    for (k, val) in extra {
        kv(k, val);
    }
    kv("--deadline-ms", deadline_ms.to_string());
    kv("--kill-grace-ms", kill_grace_ms.to_string());
    kv("--cmdline-extra", cmdline_extra.clone());
    if *console {
        v.push("--console".into());
    }
    if *bzimage {
        v.push("--bzimage".into());
    }
    if *pin_vcpus {
        v.push("--pin-vcpus".into());
    }
    if *drop_caches {
        v.push("--drop-caches".into());
    }
    if *attribution > 0 {
        v.push("--attribution".into());
        v.push(attribution.to_string());
        v.extend(instrument.flags());
    }
    match stop_after {
        Some(k) => {
            v.push("--stop-after".into());
            v.push(k.to_string());
        }
        None if rule_runs(schedule, paths.engines.is_empty(), *parity) => {
            v.push("--keep-going".into())
        }
        None => {}
    }
    for (e, d) in arm_guest_dir {
        v.push("--arm-guest-dir".into());
        let d = std::path::absolute(d).unwrap_or_else(|_| d.clone());
        v.push(format!("{}={}", e.as_str(), d.display()));
    }
    v.extend(engine_and_path_args(*seed, paths));
    v
}

/// The engine arms with their binaries, then `--vmm`, `--guest-dir` and `--out`.
fn engine_and_path_args(seed: u64, paths: ArgPaths<'_>) -> Vec<String> {
    let mut v = Vec::new();
    let truecold_arm =
        paths.engines.is_empty() || paths.engines.iter().any(|(e, _)| *e == Engine::Truecold);
    if !paths.engines.is_empty() {
        let names: Vec<&str> = paths.engines.iter().map(|(e, _)| e.as_str()).collect();
        v.push("--engines".into());
        v.push(names.join(","));
        v.push("--seed".into());
        v.push(truecold_proof::seed::hex(seed));
        for (e, bin) in paths.engines {
            let flag = match e {
                Engine::Truecold => continue,
                Engine::Firecracker => "--firecracker",
                Engine::CloudHypervisor => "--cloud-hypervisor",
                Engine::QemuMicrovm => "--qemu",
            };
            v.push(flag.into());
            v.push(bin.display().to_string());
        }
    }
    if truecold_arm {
        v.push("--vmm".into());
        v.push(paths.vmm.display().to_string());
    }
    if let Some(g) = paths.guest_dir {
        v.push("--guest-dir".into());
        v.push(g.display().to_string());
    }
    v.push("--out".into());
    v.push(paths.out.display().to_string());
    v
}

/// The explicit `truecold run …` line of `cmdline.txt` (every argument shell-quoted).
pub fn explicit_line(explicit: &[String]) -> String {
    let explicit: Vec<String> = explicit.iter().map(|a| shell_quote(a)).collect();
    format!("truecold run {}", explicit.join(" "))
}

/// `engines-<arm>-<arm>…`: the arms in a default output directory's name.
pub fn engines_label(arms: &[Engine]) -> String {
    let names: Vec<&str> = arms.iter().map(|e| e.as_str()).collect();
    format!("engines-{}", names.join("-"))
}

/// `results/<UTC timestamp>-<what>-<v>vcpu-<m>mib`, unless the plan names its `--out`.
pub fn dest_or(plan: &CampaignPlan, what: &str) -> PathBuf {
    plan.out.clone().unwrap_or_else(|| {
        let (stamp, _) = crate::campaign::clock::utc_now();
        PathBuf::from("results").join(format!(
            "{stamp}-{what}-{}vcpu-{}mib",
            plan.guest.vcpus,
            plan.guest.mem.mib()
        ))
    })
}

/// `results/<UTC timestamp>-engines-<arms>-linux-<v>vcpu-<m>mib`.
pub fn engines_dest(plan: &CampaignPlan, arms: &[Engine]) -> PathBuf {
    dest_or(plan, &format!("{}-linux", engines_label(arms)))
}

#[cfg(test)]
mod tests;
