//! [`ArgError`]: every way a command line is refused once it parsed (a flag combination, a
//! value against another flag, a limit), one typed error for every plan; `truecold` exits
//! 125 for it, as for any usage error.

use crate::campaign::schedule::ScheduleError;
use truecold_proof::tune::MIN_ROUNDS;
use truecold_proto::kinds::Engine;
use truecold_proto::limits::LimitError;
use truecold_proto::tune::KnobSetError;

/// Argument errors.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArgError {
    #[error("--l1-thp sets the nested harness's L1: it needs --nested")]
    L1ThpNeedsNested,
    #[error(
        "--arm {0}: a path inside the directory, 1 to 3 names of [A-Za-z0-9._-] joined by `/` \
         (e.g. screen/baseline)"
    )]
    ReplayArm(String),
    #[error("the command after --: {0}")]
    FleetCommand(String),
    #[error("the command after -- has --out: a fleet places each shard in its own directory")]
    FleetOut,
    #[error("a fleet fans out {0}")]
    FleetCampaign(&'static str),
    #[error("a fleet's tune needs {0}")]
    FleetTune(&'static str),
    #[error("--shards {shards}: 1 to the campaign's {launches} launches")]
    FleetShards { shards: u64, launches: u64 },
    #[error("a fleet's bisect {0}")]
    FleetBisect(&'static str),
    #[error("--partition `{0}`: a Slurm partition name ([A-Za-z0-9._-]+)")]
    FleetPartition(String),
    #[error(
        "--clock parallel reads the nested harness's parallel clock: it needs --nested (no \
         other host keeps one)"
    )]
    ParallelNeedsNested,
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
        "--packages/--invariant-tsc choose how truecold-vmm presents its vCPUs, and no peer \
         engine is told the same: present them in a campaign of truecold alone"
    )]
    PlatformEngines,
    #[error("--packages")]
    Platform(#[source] truecold_proto::platform::PlatformError),
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
    #[error("--propose / --propose-from: the probe guest has no kernel to attribute (tune Linux: --linux, --nested)")]
    ProposeProbe,
    #[error("--propose-class `{0}`: cmdline, kconfig or vmm, with --propose or --propose-from")]
    ProposeClass(String),
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
