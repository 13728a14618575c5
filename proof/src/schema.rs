//! The bundle schema: one [`Sample`] per attempt (a row of `samples.csv`) and the
//! campaign's [`ResultJson`] (`result.json`). Shared by the bench (writer) and the
//! verifier, so both agree on every field and every stage name.
//!
//! All times are integer nanoseconds of CLOCK_MONOTONIC (absolute stamps) or durations;
//! all sizes are bytes. Nothing stored is a float.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::RamLayout;
use truecold_proto::platform::CpuPlatform;
use truecold_proto::{BootId, GuestPlatform};

use crate::fmt::or_none;
use crate::stats::Summary;

pub use truecold_proto::kinds::{
    Backing, Clock, ContractKind, Engine, HostKind, Mode, Observer, LINUX_LABEL, PROBE_LABEL,
};
pub use truecold_proto::measure::{Stage, StageKind, StageTimes, Stamps, STAGE_COUNT};
pub use truecold_proto::tune::{Knob, TuneGuest};

/// The one percentile definition used everywhere (stored in `result.json`, too).
pub const PERCENTILE_DEFINITION: &str = "nearest-rank: the p-th percentile of n sorted values \
     is the value at 1-based rank ceil(p*n/100); mean is floor(sum/n); integer nanoseconds";

/// The schema this crate writes. 3: the `protocol_errors` column,
/// `reports.jsonl` (the VMM's report per attempt), no per-stage with-failures summaries.
/// 4: engines — the `serial_ready` stage, the contract's observer, the configuration's
/// engine, engine observations in `reports.jsonl`.
/// 5: the clock and tune arms — the contract's `clock` (the host kind's:
/// [`HostKind::clock`]) and `interleaved` (one arm of an interleaved multi-arm directory),
/// the configuration's `knobs` (a tune arm's knobs, in catalogue order; empty otherwise).
/// 6: the VMM's sandbox — the `seccomp` stage (the `seccomp_ns` column, the `sandboxed`
/// mark), and the campaign's residue in `environment.residue`.
/// 7: the nested harness's own inputs — `environment.nested` (L1's QEMU `-seed` and the L0
/// QEMU's version) in every `nested-emulated` bundle.
/// 8: the parity contract — the `agent` observer, the `cleanup_ok` and `cleanup_ns` columns
/// (after `error_detail`; empty unless the observer is `agent`) and `environment.parity`
/// (the lifecycle table's digest, the network pair, the workspace image).
/// 9: the virtual clock's identity — `environment.nested.l1_kernel_sha256` (the L1 kernel
/// the harness booted): with the L0 QEMU's version and L1's CPU count (`environment.cores`)
/// it names the clock ([`NestedHarness::clock_differs`]).
/// 10: the fail-fast rule — `contract.stop_after` (the K of `truecold run --stop-after`, absent
/// under `--keep-going` and where no rule ran) and `contract.stopped` (the error kind of the K
/// consecutive failures that ended the campaign), checked against the rows ([`StopRule`]).
/// 11: the parallel clock — the `parallel_latency_ns` column (after `cleanup_ns`), re-derived
/// from the [`truecold_proto::parallel::Reading`] in the row's `reports.jsonl` line, required
/// on every success of a bundle whose L0 keeps that clock unless the line says why it is
/// missing, and its summary `summaries.parallel_latency`; and the kernel's zone figures — the
/// `guest_mem_present` and `guest_mem_managed` columns (last), held to the zone rule instead
/// of the calibrated MemTotal bound ([`ZONES_SCHEMA`], [`Sample::memory_problems`]).
pub const SCHEMA_VERSION: u32 = 11;

/// The schemas this crate reads: the one it writes, and 5 to 10, whose bundles (those
/// committed under results/ among them) stay verifiable: a schema-5 `samples.csv` has no
/// `seccomp_ns` column and its summary no `seccomp` stage ([`stage_in_schema`]); schemas 5
/// and 6 have no `environment.nested`, schemas 7 and 8 no L1 kernel digest in it; schemas
/// before 11 have no zone figures, and their MemTotal is held to the calibrated bound.
pub const READABLE_SCHEMAS: [u32; 7] = [5, 6, 7, 8, 9, 10, SCHEMA_VERSION];

/// The first schema whose rows carry the kernel's zone figures (`guest_mem_present`,
/// `guest_mem_managed`) and whose Linux rows are held to the zone rule
/// ([`truecold_proto::layout::check_zones`]); a bundle of an earlier schema has neither
/// column, and its MemTotal is held to the calibrated bound
/// ([`truecold_proto::memtotal_bounds_for`], [`memtotal_bounds_engine`]) its guests checked.
pub const ZONES_SCHEMA: u32 = 11;

/// Whether a stage has a column in a bundle of `schema` (every stage but `seccomp`, which
/// schema 6 added, exists in schema 5).
pub fn stage_in_schema(stage: Stage, schema: u32) -> bool {
    schema >= 6 || stage != Stage::Seccomp
}

/// The stages with a column in a bundle of `schema`, in column order.
pub fn schema_stages(schema: u32) -> impl Iterator<Item = Stage> {
    Stage::ALL
        .into_iter()
        .filter(move |st| stage_in_schema(*st, schema))
}

/// Name of the headline metric: request (intended request time where there is one) →
/// strict-ready.
pub const HEADLINE: &str = "request_to_strict_ready";

/// Which figure of a row's headline a statistic reads (`--clock` of `compare`, `tune` and
/// `bisect`): the bundle's own clock (`latency_ns`: the wall clock, or the nested harness's
/// total virtual clock) or the nested harness's parallel clock (`parallel_latency_ns`, schema
/// 11+; docs/virtual-clock.md). The total figure is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    #[default]
    Total,
    Parallel,
}

impl Figure {
    /// Both, in their documented order.
    pub const ALL: [Figure; 2] = [Figure::Total, Figure::Parallel];

    /// The name `--clock` takes and every text prints.
    pub fn name(self) -> &'static str {
        match self {
            Figure::Total => "total",
            Figure::Parallel => "parallel",
        }
    }

    /// Whether it is the total figure (a record leaves that one out).
    pub fn is_total(&self) -> bool {
        *self == Figure::Total
    }

    /// Parses [`Figure::name`].
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("`{s}` is not a clock figure (want total or parallel)"))
    }

    /// The row's headline on this figure (`None` when the row has none).
    pub fn of(self, s: &Sample) -> Option<u64> {
        match self {
            Figure::Total => s.latency_ns,
            Figure::Parallel => s.parallel_latency_ns,
        }
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One attempt: a row of `samples.csv`. Failures are rows too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// 0-based attempt number, contiguous, in row order.
    pub index: u64,
    /// What this attempt booted; must equal the campaign's contract kind.
    pub contract: ContractKind,
    /// The concurrency level this attempt ran at (1 sequential, 0 open loop).
    pub concurrency: u32,
    /// When the attempt was due (burst, open loop); the latency origin when present.
    pub intended_request_ns: Option<u64>,
    /// The request stamp, taken before spawning the VMM.
    pub actual_request_ns: u64,
    /// Strict-ready stamp; `None` when not reached.
    pub ready_ns: Option<u64>,
    /// Headline: `ready_ns - (intended_request_ns or actual_request_ns)`; `None` when not
    /// ready. Redundant on purpose (readable CSV); the verifier checks it.
    pub latency_ns: Option<u64>,
    /// Per-stage durations.
    pub stages: StageTimes,
    /// The Linux guest's boot id (`/proc/sys/kernel/random/boot_id`): required and unique
    /// for every successful `linux` row. Always empty on `probe` rows: the probe guest
    /// has no kernel and no boot id (a value there makes the bundle invalid).
    pub boot_id: Option<BootId>,
    /// RAM the host was asked for (bytes).
    pub host_mem_configured: u64,
    /// Sum of the registered memslots (bytes).
    pub host_memslots: Option<u64>,
    /// Sum of the E820 usable-RAM entries given to the guest (bytes).
    pub host_e820_usable: Option<u64>,
    /// Serial observer: the engine process's guest-memory mapping as the bench read it from
    /// `/proc/<pid>/smaps` after strict-ready (bytes; [`truecold_proto::report::HostMapping`]).
    pub host_mapping_bytes: Option<u64>,
    /// Serial observer: that mapping's `KernelPageSize` (bytes).
    pub host_page_size: Option<u64>,
    /// Guest: System RAM in `/sys/firmware/memmap` (bytes).
    pub guest_mem_firmware: Option<u64>,
    /// Guest: `MemTotal` (bytes).
    pub guest_mem_total: Option<u64>,
    /// Guest (schema 11+): Σpresent × 4096 over the kernel's zones (`/proc/zoneinfo`,
    /// bytes). Empty in earlier schemas.
    pub guest_mem_present: Option<u64>,
    /// Guest (schema 11+): Σmanaged × 4096 over the same zones (bytes).
    pub guest_mem_managed: Option<u64>,
    /// Guest: online CPUs.
    pub guest_cpus: Option<u32>,
    /// Guest: the platform its kernel saw (topology, TSC, clocksource); Linux rows only.
    pub guest_platform: Option<GuestPlatform>,
    /// Protocol errors the guest caused (malformed lines, an unverified or second reply, a
    /// second record …), as the VMM counted them. A success has none: the bench types a row
    /// with any as `guest_protocol`.
    pub protocol_errors: u64,
    /// Workload result: `BENCH_OK`, `not_run`, a guest error name, or empty if no record.
    pub workload: String,
    /// The attempt reached strict-ready, verified, within the deadline.
    pub ok: bool,
    /// Typed error name; empty exactly when `ok`.
    pub error_kind: String,
    /// Free-text error detail (may contain any printable text; CSV-quoted as needed).
    pub error_detail: String,
    /// Parity contract (schema 8+): every check after the launch passed (the VMM reaped, its
    /// tap, the workspace clone, sockets and run directory gone, nothing of the harness
    /// leaked). Empty under the other observers.
    pub cleanup_ok: Option<bool>,
    /// Parity contract: from the reap to the end of that check (removal included), ns.
    pub cleanup_ns: Option<u64>,
    /// The headline on the nested harness's parallel clock (schema 11+): `latency_ns` with the
    /// work done on several L1 CPUs at once counted as overlapping
    /// ([`truecold_proto::parallel`]); empty where the L0 keeps no such clock, for a failure,
    /// or where the row's evidence says why it could not be read.
    pub parallel_latency_ns: Option<u64>,
}

impl Sample {
    /// Sum of the host stages (those that tile the headline), in u128 so it cannot
    /// overflow; equals `latency_ns` for every well-formed success.
    pub fn host_stage_sum(&self) -> u128 {
        self.stages.host_sum()
    }

    /// Fills the row's times from `stamps` through the one tiling function
    /// ([`Stamps::tile`]): `intended_request_ns`, `actual_request_ns`, `ready_ns`,
    /// `latency_ns` and the host and post stages (the guest stages are kept: see
    /// [`StageTimes::set_guest`]).
    pub fn set_times(&mut self, stamps: &Stamps) {
        let guest = [Stage::GuestKernelToInit, Stage::GuestInitToReady].map(|s| self.stages.get(s));
        self.intended_request_ns = stamps.intended;
        self.actual_request_ns = stamps.request.unwrap_or(0);
        self.ready_ns = stamps.strict_ready;
        self.latency_ns = stamps.latency();
        self.stages = stamps.tile();
        self.stages.set(Stage::GuestKernelToInit, guest[0]);
        self.stages.set(Stage::GuestInitToReady, guest[1]);
    }

    /// Why this success's timeline is not whole (every problem, empty when it is). The one
    /// definition the bench (when it classifies a launch) and the verifier (when it checks a
    /// success) share: a latency; every host stage but `queue` present and non-zero (a launch
    /// passes every host stage and each takes time); the queue stage exactly when the row has
    /// an intended time; the host stages summing to the headline; and (Linux) both
    /// guest-clock stages present.
    pub fn timeline_problems(
        &self,
        linux: bool,
        observer: truecold_proto::kinds::Observer,
        engine: truecold_proto::kinds::Engine,
    ) -> Vec<TimelineProblem> {
        let mut out = Vec::new();
        let Some(lat) = self.latency_ns else {
            out.push(TimelineProblem::NoLatency);
            return out;
        };
        for st in Stage::ALL {
            let required = match st.kind() {
                StageKind::Host => st.host_required(observer, engine),
                StageKind::Guest => linux,
                StageKind::Post => false,
            };
            match self.stages.get(st) {
                None if required => out.push(TimelineProblem::Missing(st)),
                Some(0) if required && st.kind() == StageKind::Host => {
                    out.push(TimelineProblem::Zero(st))
                }
                _ => {}
            }
        }
        if self.stages.get(Stage::Queue).is_some() != self.intended_request_ns.is_some() {
            out.push(TimelineProblem::Queue);
        }
        let host_sum = self.host_stage_sum();
        if host_sum != u128::from(lat) {
            out.push(TimelineProblem::Sum {
                host_sum,
                latency: lat,
            });
        }
        out
    }

    /// What disagrees in this row's memory figures, empty when they agree. The one
    /// definition of "memory verified" that the bench (when it classifies a launch) and the
    /// verifier (when it checks a success) share.
    ///
    /// truecold's RAM is `configured − the hole of its layout` (`layout`, the bundle's
    /// `configuration.ram_layout`; the one rule, [`truecold_proto::layout`]: none laid
    /// `around-hole`, 384 KiB laid `hole-inside`).
    ///
    /// Under the VM-exit observer (truecold alone): memslots = E820 usable = the guest's own
    /// RAM figure = that RAM (required for Linux, checked whenever present).
    ///
    /// Under the serial and agent observers (an engines or parity campaign, `engine` booted
    /// the guest, the bench read its lines): the guest's firmware RAM is
    /// `engine.expected_firmware_ram(configured, layout)` (the configured size
    /// less the engine's documented hole below 1 MiB), the engine process's guest-memory
    /// mapping is exactly the configured size with the page size `backing` gives
    /// ([`Backing::page_size`]), and for the truecold engine memslots = E820 usable = its RAM
    /// as well.
    ///
    /// Under both, the kernel's account of that RAM (Linux, and whenever present): in a
    /// bundle of `schema` [`ZONES_SCHEMA`] or later, the zone rule
    /// ([`truecold_proto::layout::check_zones`]): Σpresent = that RAM less the engine's T
    /// ([`Engine::kernel_trim`]), MemTotal = Σmanaged, managed ≤ present; in an earlier one,
    /// whose rows have no zone figures, MemTotal within the calibrated bound
    /// ([`memtotal_bounds_engine`]; [`truecold_proto::memtotal_bounds_for`] for truecold
    /// without a layout).
    pub fn memory_problems(
        &self,
        linux: bool,
        observer: Observer,
        engine: Engine,
        backing: Backing,
        layout: RamLayout,
        schema: u32,
    ) -> Vec<String> {
        let m = self.host_mem_configured;
        let mut bad = Vec::new();
        // The bench read the guest's lines from `engine` (serial or agent): its layout rules.
        let serial = observer.bench_reads_lines();
        // truecold's RAM: configured − its layout's (declared) hole, the one rule's figure.
        let ram = Engine::Truecold.expected_firmware_ram(m, layout);
        if !serial || engine == Engine::Truecold {
            if self.host_memslots != Some(ram) {
                bad.push(format!("memslots {}", or_none(self.host_memslots)));
            }
            if self.host_e820_usable != Some(ram) {
                bad.push(format!("E820 usable {}", or_none(self.host_e820_usable)));
            }
        }
        let firmware = if serial {
            engine.expected_firmware_ram(m, layout)
        } else {
            ram
        };
        if (linux || self.guest_mem_firmware.is_some()) && self.guest_mem_firmware != Some(firmware)
        {
            bad.push(format!(
                "guest firmware map {}, the engine gives {firmware}",
                or_none(self.guest_mem_firmware)
            ));
        }
        if serial {
            let mapping = engine.expected_mapping(m, layout);
            if self.host_mapping_bytes != Some(mapping) {
                bad.push(format!(
                    "the engine's guest-memory mapping {}, the engine maps {mapping}",
                    or_none(self.host_mapping_bytes)
                ));
            }
            let page = backing.page_size();
            if self.host_page_size != Some(page) {
                bad.push(format!(
                    "the mapping's page size {}, `{}` backing maps {page}-byte pages",
                    or_none(self.host_page_size),
                    backing.as_str()
                ));
            }
        }
        if schema >= ZONES_SCHEMA {
            let guest = if serial { engine } else { Engine::Truecold };
            self.zone_problems(linux, firmware, guest.kernel_trim(layout), &mut bad);
        } else if linux || self.guest_mem_total.is_some() {
            // The guest's own bound (guest-init fails its boot outside it), applied from the
            // configured size.
            let (lo, hi) = if serial || !layout.is_absent() {
                memtotal_bounds_engine(engine, m, layout)
            } else {
                truecold_proto::memtotal_bounds_for(m)
            };
            match self.guest_mem_total {
                Some(t) if t > 0 && t >= lo && t <= hi => {}
                other => bad.push(format!(
                    "guest MemTotal {} not in [{lo}, {hi}]",
                    or_none(other)
                )),
            }
        }
        bad
    }

    /// The zone rule on this row's figures ([`Sample::memory_problems`], schema 11+):
    /// required for Linux, checked whenever any of them is present. `firmware` is the RAM the
    /// engine gives, `trim` the kernel's T for its map. A figure of 0 is one the guest did not
    /// read (the record's convention), as incomplete as an empty one.
    fn zone_problems(&self, linux: bool, firmware: u64, trim: u64, bad: &mut Vec<String>) {
        let figures = [
            self.guest_mem_present,
            self.guest_mem_managed,
            self.guest_mem_total,
        ];
        if !linux && figures.iter().all(Option::is_none) {
            return;
        }
        let read = figures.map(|v| v.filter(|x| *x > 0));
        let [Some(present), Some(managed), Some(mem_total)] = read else {
            bad.push(format!(
                "the guest's zone figures are incomplete: present {}, managed {}, MemTotal {}",
                or_none(self.guest_mem_present),
                or_none(self.guest_mem_managed),
                or_none(self.guest_mem_total)
            ));
            return;
        };
        let z = truecold_proto::layout::ZoneFigures {
            present,
            managed,
            mem_total,
        };
        if let Err(e) = truecold_proto::layout::check_zones(firmware, trim, z) {
            bad.push(format!("zone rule: {e}"));
        }
    }

    /// Why this row's guest platform is not the one configured (`vcpus` vCPUs as
    /// `platform.packages` packages of single-threaded cores, and `constant_tsc` and
    /// `nonstop_tsc` where the platform states an invariant TSC: Linux sets `nonstop_tsc` from
    /// the stated bit alone, `constant_tsc` on some Intel models without it), or `None` when
    /// it is. The one definition the bench
    /// (when it classifies a Linux launch) and the verifier (when it checks a Linux success)
    /// share.
    pub fn platform_problem(&self, vcpus: u32, platform: &CpuPlatform) -> Option<String> {
        let packages = u32::from(platform.packages.max(1));
        let cores = vcpus / packages;
        match &self.guest_platform {
            None => Some("the guest reported no platform".into()),
            Some(p) if !p.topology_is(packages, cores) => Some(format!(
                "the guest saw {} package(s) × {} core(s) × {} thread(s), configured {packages} × {cores} × 1",
                p.packages, p.cores_per_package, p.threads_per_core
            )),
            Some(p) if platform.invariant_tsc && !(p.constant_tsc && p.nonstop_tsc) => Some(
                "the platform states an invariant TSC, the guest's CPU flags lack constant_tsc or \
                 nonstop_tsc"
                    .into(),
            ),
            Some(_) => None,
        }
    }

    /// An attempt with nothing observed yet: not ok, every optional field empty. The
    /// bench fills it in ([`Sample::set_times`], [`StageTimes::set_guest`], memory figures,
    /// the boot id of a Linux guest), then sets `ok`, or `error_kind` and `error_detail`.
    pub fn new(
        index: u64,
        contract: ContractKind,
        concurrency: u32,
        host_mem_configured: u64,
    ) -> Self {
        Sample {
            index,
            contract,
            concurrency,
            intended_request_ns: None,
            actual_request_ns: 0,
            ready_ns: None,
            latency_ns: None,
            stages: StageTimes::default(),
            boot_id: None,
            host_mem_configured,
            host_memslots: None,
            host_e820_usable: None,
            host_mapping_bytes: None,
            host_page_size: None,
            guest_mem_firmware: None,
            guest_mem_total: None,
            guest_mem_present: None,
            guest_mem_managed: None,
            guest_cpus: None,
            guest_platform: None,
            protocol_errors: 0,
            workload: String::new(),
            ok: false,
            error_kind: String::new(),
            error_detail: String::new(),
            cleanup_ok: None,
            cleanup_ns: None,
            parallel_latency_ns: None,
        }
    }

    /// The headline computed from the stamps: `ready - (intended or actual)`.
    pub fn derived_latency(&self) -> Option<u64> {
        let origin = self.intended_request_ns.unwrap_or(self.actual_request_ns);
        self.ready_ns?.checked_sub(origin)
    }
}

/// The rule for bundles before [`ZONES_SCHEMA`], whose rows carry no zone figures: the
/// guest's calibrated `MemTotal` bound ([`truecold_proto::memtotal_bounds`]) as a host can
/// apply it to an engine knowing only the configured size: the firmware RAM is
/// `engine.expected_firmware_ram(configured, layout)` (configured − the engine's hole below 1 MiB),
/// and RAM may reach above 4 GiB (the swiotlb allowance) from the same configured size as
/// in [`truecold_proto::memtotal_bounds_for`] (every engine keeps RAM below 3 GiB up to that
/// size; above it the allowance only widens the bound). For the truecold engine this is
/// exactly [`truecold_proto::memtotal_bounds_for`].
pub fn memtotal_bounds_engine(engine: Engine, configured: u64, layout: RamLayout) -> (u64, u64) {
    // `memtotal_bounds_for` decides whether RAM may reach above 4 GiB: where it differs
    // from the bound with RAM topping out at the configured size, it used a top above 4 GiB.
    let top = if truecold_proto::memtotal_bounds_for(configured)
        == truecold_proto::memtotal_bounds(configured, configured)
    {
        configured
    } else {
        (4u64 << 30) + 1
    };
    truecold_proto::memtotal_bounds(engine.expected_firmware_ram(configured, layout), top)
}

/// One way a success's timeline is not whole ([`Sample::timeline_problems`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineProblem {
    /// No latency (no strict-ready stamp).
    NoLatency,
    /// A required stage is missing.
    Missing(Stage),
    /// A host stage took 0 ns.
    Zero(Stage),
    /// A queue stage without an intended time, or the reverse.
    Queue,
    /// The host stages do not sum to the headline.
    Sum { host_sum: u128, latency: u64 },
}

impl std::fmt::Display for TimelineProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimelineProblem::NoLatency => write!(f, "no strict-ready time"),
            TimelineProblem::Missing(st) => write!(
                f,
                "no `{}` stage: a success passes every host stage (and, Linux, both guest \
                 stages)",
                st.name()
            ),
            TimelineProblem::Zero(st) => write!(
                f,
                "`{}` took 0 ns: every host stage of a launch takes time",
                st.name()
            ),
            TimelineProblem::Queue => {
                write!(
                    f,
                    "a queue stage must be present exactly when there is an intended time"
                )
            }
            TimelineProblem::Sum { host_sum, latency } => write!(
                f,
                "host stages sum to {host_sum} ns, latency is {latency} ns (a stamp missing or \
                 out of order)"
            ),
        }
    }
}

/// The declared contract of a campaign.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub kind: ContractKind,
    /// Must equal `kind.label()`.
    pub label: String,
    /// The contract in plain words.
    pub description: String,
    pub mode: Mode,
    /// A sample not strict-ready by this latency is a failure, scored at this value.
    pub deadline_ns: u64,
    /// The campaign was interrupted; fewer rows than planned.
    pub incomplete: bool,
    /// Always [`HEADLINE`].
    pub headline: String,
    /// Always [`PERCENTILE_DEFINITION`].
    pub percentile_definition: String,
    /// Where strict-ready is stamped: at the VM exit (truecold alone) or by the bench on the
    /// engine's serial output (engines campaigns, every arm alike).
    pub observer: Observer,
    /// The clock every duration is on: always `environment.host_kind`'s
    /// ([`HostKind::clock`]); bundles on different clocks are never compared.
    pub clock: Clock,
    /// This bundle is one arm of an interleaved multi-arm directory (an engines campaign, a
    /// tune phase): the other arms' launches sit between its rows, so the sequential idle-gap
    /// rule is the directory verifier's, along the directory's order.
    pub interleaved: bool,
    /// Schema 10+: the fail-fast rule the campaign ran under — it stops once this many
    /// consecutive launches (in row order) failed with one error kind ([`StopRule`]). Absent
    /// under `--keep-going`, in an interleaved arm, outside sequential mode, and before schema
    /// 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after: Option<u64>,
    /// Schema 10+: the rule stopped the campaign: the error kind its last `stop_after` rows
    /// share (the bundle is then `incomplete`, with fewer rows than planned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// The one fail-fast rule (`truecold run --stop-after K`, default [`StopRule::DEFAULT_AFTER`]):
/// a sequential campaign stops once `after` consecutive launches failed with one error kind —
/// the host, the VMM or the guest is broken the same way each time, and the rest would fail
/// alike. The bench applies it launch by launch ([`StopRule::fires`]), the verifier re-applies
/// it to the rows ([`StopRule::first_stop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopRule {
    pub after: u64,
}

impl StopRule {
    /// `truecold run`'s K without `--stop-after`: 10 identical failures in a row.
    pub const DEFAULT_AFTER: u64 = 10;

    /// Whether the campaign stops after `row` (its error kind, empty for a success) given
    /// the run of identical failures before it (`run`: that kind and its length), which it
    /// updates.
    pub fn fires(&self, run: &mut (String, u64), kind: &str) -> bool {
        if kind.is_empty() {
            *run = (String::new(), 0);
            return false;
        }
        if run.0 == kind {
            run.1 += 1;
        } else {
            *run = (kind.to_string(), 1);
        }
        run.1 >= self.after
    }

    /// The row (index into `kinds`, each row's error kind, empty for a success) after which
    /// the rule stops a campaign, and that row's kind; `None` when it never does.
    pub fn first_stop<'a>(
        &self,
        kinds: impl IntoIterator<Item = &'a str>,
    ) -> Option<(usize, String)> {
        let mut run = (String::new(), 0);
        kinds
            .into_iter()
            .enumerate()
            .find(|(_, k)| self.fires(&mut run, k))
            .map(|(i, k)| (i, k.to_string()))
    }
}

#[cfg(test)]
mod stop_rule_tests {
    use super::StopRule;

    #[test]
    fn k_consecutive_failures_of_one_kind_and_nothing_else() {
        let r = StopRule { after: 3 };
        // Successes and another kind break the run.
        let rows = ["", "a", "a", "", "a", "a", "b", "a", "a", "a", "a"];
        assert_eq!(r.first_stop(rows), Some((9, "a".to_string())));
        assert_eq!(r.first_stop(["a", "a", "b", "b", "", "a"]), None);
        assert_eq!(
            StopRule { after: 1 }.first_stop(["", "x"]),
            Some((1, "x".into()))
        );
        assert_eq!(r.first_stop(std::iter::empty()), None);
    }
}

/// The one description of what a sample of `kind` is (a function of the contract kind:
/// [`Contract::new`] writes it, `verify` requires it, the README renders it).
pub fn description_of(kind: ContractKind) -> &'static str {
    match kind {
        ContractKind::Linux => {
            "Each sample is a true-cold launch: a new VMM process spawned fresh, a new KVM VM, \
             a new Linux kernel boot, no snapshot, pool or reuse. The request stamp is taken \
             before the spawn. Strict-ready is the liveness reply, made after the guest \
             verified its memory and rang the ready doorbell, verified by the host against a \
             fresh nonce."
        }
        ContractKind::Probe => {
            "Each sample is a new VMM process, a new KVM VM and the VMM's embedded probe guest \
             (no Linux kernel): the floor of the VMM's own cost. This is not a Linux boot."
        }
    }
}

impl Contract {
    /// A contract with its derived fields (label, headline, percentile definition) filled.
    pub fn new(
        kind: ContractKind,
        observer: Observer,
        clock: Clock,
        interleaved: bool,
        mode: Mode,
        deadline_ns: u64,
        incomplete: bool,
    ) -> Self {
        Contract {
            kind,
            label: kind.label().to_string(),
            description: description_of(kind).to_string(),
            mode,
            deadline_ns,
            incomplete,
            headline: HEADLINE.to_string(),
            percentile_definition: PERCENTILE_DEFINITION.to_string(),
            observer,
            clock,
            interleaved,
            stop_after: None,
            stopped: None,
        }
    }

    /// The tune guest this contract boots (what [`truecold_proto::tune::check_set`] judges
    /// the configuration's knobs against).
    pub fn tune_guest(&self) -> TuneGuest {
        TuneGuest::from(self.kind)
    }
}

/// What was launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    pub vcpus: u32,
    pub mem_bytes: u64,
    /// Guest memory backing, e.g. `anon`, `anon+thp`, `hugetlb-2m`.
    pub backing: String,
    /// truecold-vmm's RAM layout (`truecold run --ram-layout`): the hole the memory rule
    /// holds every row to ([`truecold_proto::layout`]). Absent:
    /// [`RamLayout::ABSENT`] (every bundle written before the layouts existed, and every one
    /// since that ran it), whatever truecold-vmm's default.
    #[serde(
        default = "RamLayout::absent",
        skip_serializing_if = "RamLayout::is_absent"
    )]
    pub ram_layout: RamLayout,
    /// How truecold-vmm presented the vCPUs (`truecold run --packages/--invariant-tsc`):
    /// what every Linux success's guest must report seeing, and what every row's VMM report
    /// echoes. Absent: [`CpuPlatform::ABSENT`] (one package, the host's invariant-TSC bit),
    /// the platform of every bundle written before the choice and of every peer engine's.
    #[serde(
        default = "CpuPlatform::absent",
        skip_serializing_if = "CpuPlatform::is_absent"
    )]
    pub cpu_platform: CpuPlatform,
    /// The guest kernel command line (Linux) or VMM arguments (probe).
    pub cmdline: String,
    pub vmm_path: String,
    pub kernel_path: Option<String>,
    pub initramfs_path: Option<String>,
    /// The engine that booted the guest (`vmm_path` is its binary).
    pub engine: EngineInfo,
    /// A tune arm's knobs ([`truecold_proto::tune`]), in catalogue order, each once, no two
    /// conflicting, each applying to the contract's guest; empty for every other bundle.
    pub knobs: Vec<Knob>,
}

impl Configuration {
    /// The backing asked for: the first word of [`Configuration::backing`] (`name` or
    /// `name (obtained: …)`), `None` when it is not one of [`Backing`]'s names.
    pub fn backing_kind(&self) -> Option<Backing> {
        Backing::parse(self.backing.split(" (").next().unwrap_or_default()).ok()
    }
}

/// Which engine, and which build of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineInfo {
    pub kind: Engine,
    /// What the binary says of itself (`--version`), verbatim, one line.
    pub version: String,
}

/// How busy the harness itself was.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessLoad {
    /// Campaign wall time.
    pub wall_ns: u64,
    /// The bench process's own user and system CPU time.
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
    /// Largest lateness of an actual request behind its intended time (modes with one).
    pub max_start_lag_ns: Option<u64>,
    /// The bench process's own CPU time (user + system, all threads) inside the measured
    /// windows: each launch from its spawn preparation and request stamp to its reap, with
    /// overlapping windows (concurrent lanes) counted once. Absent in bundles written before
    /// it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window_cpu_ns: Option<u64>,
    /// Wall time those windows cover (their union), for the share of a core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window_wall_ns: Option<u64>,
    /// `--drop-caches`: the number of samples before whose request stamp the bench ran `sync`
    /// and dropped the host page cache (`3` to `/proc/sys/vm/drop_caches`), outside the
    /// measured window. Absent: not asked, and then the host page cache holds the kernel,
    /// initramfs and VMM after the first sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_dropped: Option<u64>,
}

/// Host conditions of the campaign.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub host_kind: HostKind,
    pub cpu_model: String,
    pub cores: u32,
    pub host_kernel: String,
    /// `/sys/kernel/mm/transparent_hugepage/enabled`, verbatim.
    pub thp_enabled: String,
    /// `/sys/kernel/mm/transparent_hugepage/defrag`, verbatim.
    pub thp_defrag: String,
    /// Hugepage pools, e.g. `2048kB:0 1048576kB:0`.
    pub hugepages: String,
    /// cpufreq governor where readable.
    pub governor: Option<String>,
    /// `/proc/loadavg` before and after, verbatim (strings: no floats stored).
    pub loadavg_before: String,
    pub loadavg_after: String,
    pub harness: HarnessLoad,
    /// Busy host, harness bottleneck, recorded downgrades, leaks …
    pub warnings: Vec<String>,
    /// What the campaign left behind (schema 6+; absent in schema 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residue: Option<crate::residue::Residue>,
    /// The nested harness's inputs (schema 7+: present exactly when the host kind is
    /// `nested-emulated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedHarness>,
    /// The parity contract's campaign facts (schema 8+: present exactly when the observer is
    /// `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parity: Option<ParityFacts>,
}

/// What a parity campaign's bundle states about its per-launch resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParityFacts {
    /// SHA-256 of `state.csv` (the final lifecycle table, canonical CSV).
    pub state_sha256: String,
    /// The network pair every launch's tap and eth0 had (`<host>,<guest>`, a /30).
    pub net_pair: String,
    /// SHA-256 of the base workspace image each launch got a clone of.
    pub workspace_sha256: String,
    /// The journal settings the lifecycle table was committed under, as SQLite read them
    /// back (`wal`, `2` = FULL).
    pub journal: String,
}

/// What made a `nested-emulated` bundle's L1, beyond what L1 itself can see: with the
/// committed L1 kernel and initramfs these make the run reproducible (docs/virtual-clock.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedHarness {
    /// L1's QEMU `-seed`: every guest-visible random number of the run.
    pub l1_seed: u64,
    /// The first line of the L0 QEMU's `--version`.
    pub l0_qemu: String,
    /// SHA-256 of the L1 kernel (the `nested-host` bzImage QEMU booted); schema 9+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_kernel_sha256: Option<String>,
    /// SHA-256 of L1's init (`truecold-l1-init`) and of the static bench that ran the
    /// campaign in L1 (`/bin/truecold`): inputs of every launch's figures on the virtual
    /// clock (a rebuilt bench moves them by microseconds: docs/fleet.md), held to a replay's
    /// by `truecold replay`. Absent: not recorded (bundles written before they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_init_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench_sha256: Option<String>,
}

impl NestedHarness {
    /// Where two virtual-clock bundles' clocks differ, in words naming both sides; None when
    /// they are the same clock. A virtual clock is defined by the L0 QEMU that emulates L1,
    /// the L1 kernel, and the CPUs L1 brought up (`cores`, which the bench in L1 counts): a
    /// change of any of them moves every duration (docs/virtual-clock.md), so durations on
    /// two of them are never set side by side. L1's seed is not part of the clock (a
    /// campaign's own randomness). A bundle older than schema 9 has no L1 kernel digest:
    /// two such bundles are taken as one clock (what they record agrees), one beside a
    /// schema-9 bundle is a difference (the clock cannot be shown to be the same).
    pub fn clock_differs(a: (&Self, u32), b: (&Self, u32)) -> Option<String> {
        let ((ha, ca), (hb, cb)) = (a, b);
        let mut d = Vec::new();
        if ha.l0_qemu != hb.l0_qemu {
            d.push(format!("L0 QEMU `{}` vs `{}`", ha.l0_qemu, hb.l0_qemu));
        }
        let k = |h: &Self| {
            h.l1_kernel_sha256
                .clone()
                .unwrap_or_else(|| "not recorded (before schema 9)".into())
        };
        if ha.l1_kernel_sha256 != hb.l1_kernel_sha256 {
            d.push(format!("L1 kernel {} vs {}", k(ha), k(hb)));
        }
        if ca != cb {
            d.push(format!("L1 CPUs {ca} vs {cb}"));
        }
        (!d.is_empty()).then(|| d.join("; "))
    }
}

/// [`NestedHarness::clock_differs`] of two environments: None when either is not nested
/// (the clock kinds themselves are compared by `contract.clock`).
pub fn virtual_clock_differs(a: &Environment, b: &Environment) -> Option<String> {
    match (&a.nested, &b.nested) {
        (Some(x), Some(y)) => NestedHarness::clock_differs((x, a.cores), (y, b.cores)),
        _ => None,
    }
}

// The summaries `result.json` states, every one computed from the rows alone
// ([`crate::summary`]: the bench writes them, the verifier recomputes them).

/// A metric summarised twice: successes only, and with failures scored at the deadline.
/// The second is **right-censored at the deadline**: a failure's latency is only known to
/// exceed the deadline, so a percentile that reaches the deadline is a lower bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub successes: Option<Summary>,
    pub with_failures: Option<Summary>,
}

/// One stage's summary: the values of successful samples that have the stage (`None` for a
/// stage no success has, e.g. the guest stages of a probe guest). There is no with-failures
/// figure per stage (schema 3 dropped it): a failure would be scored at the whole deadline in
/// every stage, which says nothing about any one stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSummary {
    pub name: String,
    pub successes: Option<Summary>,
}

/// One concurrency level (sweep, burst, churn; sequential is level 1, open loop 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSummary {
    pub concurrency: u32,
    pub attempts: u64,
    pub successes: u64,
    pub headline: Pair,
    /// Successes per 1,000 s over the group's span: first request (intended where
    /// present) to last strict-ready; `floor(successes·10^12 / span_ns)`. `None` without
    /// a success or with a zero span.
    pub throughput_per_ks: Option<u64>,
}

/// Everything `result.json` states about the samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summaries {
    pub attempts: u64,
    pub successes: u64,
    pub failures: u64,
    /// `floor(successes·10^6 / attempts)`; 0 with no attempts.
    pub success_rate_ppm: u64,
    /// error kind → count, one count per failure: its values add up to `failures`. A row
    /// marked ok without a latency is scored as a failure and counted under
    /// [`OK_WITHOUT_LATENCY`](crate::summary::OK_WITHOUT_LATENCY).
    pub errors: BTreeMap<String, u64>,
    /// The headline metric ([`HEADLINE`]).
    pub headline: Pair,
    /// Every stage of the bundle's schema ([`schema_stages`]), in order.
    pub stages: Vec<StageSummary>,
    /// Per concurrency level, ascending.
    pub by_concurrency: Vec<GroupSummary>,
    /// With ≥ 2 levels: the level of the highest throughput (lowest level on a tie).
    #[serde(default)]
    pub peak_throughput_concurrency: Option<u32>,
    /// The knee: the lowest concurrency level whose headline p50 (successes) exceeds
    /// [`KNEE_FACTOR_NUM`](crate::summary::KNEE_FACTOR_NUM)/[`KNEE_FACTOR_DEN`](crate::summary::KNEE_FACTOR_DEN) (1.5) × the level-1 p50, compared exactly
    /// in integers (`2·p50 > 3·p50₁`). `None` without a level 1 with successes, or when
    /// no level gets that slow.
    pub knee_concurrency: Option<u32>,
    /// The headline on the parallel clock (schema 11+): present when any row has a
    /// `parallel_latency_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_latency: Option<ParallelSummary>,
}

/// [`Summaries::parallel_latency`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelSummary {
    /// The successes that have the figure.
    pub successes: Option<Summary>,
    /// Successes without it (their `reports.jsonl` line says why).
    pub missing: u64,
}

/// `result.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultJson {
    pub schema_version: u32,
    pub contract: Contract,
    pub configuration: Configuration,
    pub environment: Environment,
    /// Artifact name → sha256 (64 lowercase hex). See [`required_artifacts`].
    pub artifacts: BTreeMap<String, String>,
    pub summary: Summaries,
}

/// Artifact digest names a bundle of this kind must carry in `result.json`.
pub fn required_artifacts(kind: ContractKind) -> &'static [&'static str] {
    match kind {
        ContractKind::Linux => &["config", "guest_init", "initramfs", "vmlinux", "vmm"],
        ContractKind::Probe => &["vmm"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_memory_bounds_start_from_the_engines_firmware_ram() {
        const MIB: u64 = 1 << 20;
        for m in [
            128 * MIB,
            256 * MIB,
            3072 * MIB - MIB,
            3072 * MIB,
            16384 * MIB,
        ] {
            assert_eq!(
                memtotal_bounds_engine(Engine::Truecold, m, RamLayout::AroundHole),
                truecold_proto::memtotal_bounds_for(m),
                "{m}"
            );
        }
        // Firecracker, 256 MiB: 268,041,216 bytes of System RAM (measured), no swiotlb.
        let ram = Engine::Firecracker.expected_firmware_ram(256 * MIB, RamLayout::AroundHole);
        assert_eq!(ram, 268_041_216);
        assert_eq!(
            memtotal_bounds_engine(Engine::Firecracker, 256 * MIB, RamLayout::AroundHole),
            (ram - ram / 64 - 32 * MIB, ram)
        );
        // 16 GiB reaches above 4 GiB: the swiotlb allowance applies.
        let big = Engine::CloudHypervisor.expected_firmware_ram(16384 * MIB, RamLayout::AroundHole);
        assert_eq!(
            memtotal_bounds_engine(Engine::CloudHypervisor, 16384 * MIB, RamLayout::AroundHole),
            (big - big / 64 - 96 * MIB, big)
        );
        assert_eq!(Backing::Thp.page_size(), 4096);
        assert_eq!(Backing::Hugetlb.page_size(), 2 * MIB);
    }

    #[test]
    fn set_times_keeps_guest_stages_and_derives_the_headline() {
        let mut s = Sample::new(0, ContractKind::Linux, 1, 0);
        s.stages.set_guest(15_000, 18_000);
        s.set_times(&Stamps {
            request: Some(100),
            boot_start: Some(150),
            strict_ready: Some(1_100),
            reaped: Some(2_000),
            ..Stamps::default()
        });
        assert_eq!(s.actual_request_ns, 100);
        assert_eq!(s.ready_ns, Some(1_100));
        assert_eq!(s.latency_ns, Some(1_000));
        assert_eq!(s.latency_ns, s.derived_latency());
        assert_eq!(s.stages.get(Stage::GuestKernelToInit), Some(15_000));
        assert_eq!(s.stages.get(Stage::Teardown), Some(900));
        assert_eq!(s.host_stage_sum(), 1_000);
    }
}
