//! The bundle schema: one [`Sample`] per attempt (a row of `samples.csv`) and the
//! campaign's [`ResultJson`] (`result.json`). Shared by the bench (writer) and the
//! verifier, so both agree on every field and every stage name.
//!
//! All times are integer nanoseconds of CLOCK_MONOTONIC (absolute stamps) or durations;
//! all sizes are bytes. Nothing stored is a float.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use truecold_proto::{BootId, GuestPlatform};

use crate::summary::Summaries;

/// The schema this crate writes and the only one it reads.
pub const SCHEMA_VERSION: u32 = 2;

/// Name of the headline metric: request (intended request time where there is one) →
/// strict-ready.
pub const HEADLINE: &str = "request_to_strict_ready";

/// Label of a Linux-boot campaign.
pub const LINUX_LABEL: &str = "Linux boot: request to strict-ready";
/// Label of a probe-guest campaign. Appears in every file of such a bundle.
pub const PROBE_LABEL: &str = "VMM floor (probe guest), not a Linux boot";

/// The one percentile definition used everywhere (stored in `result.json`, too).
pub const PERCENTILE_DEFINITION: &str = "nearest-rank: the p-th percentile of n sorted values \
     is the value at 1-based rank ceil(p*n/100); mean is floor(sum/n); integer nanoseconds";

/// What was booted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractKind {
    /// A real Linux kernel to a verified userspace.
    Linux,
    /// The VMM's embedded probe guest: the VMM floor, not a Linux boot.
    Probe,
}

impl ContractKind {
    /// The human label written into every file of the bundle.
    pub fn label(self) -> &'static str {
        match self {
            ContractKind::Linux => LINUX_LABEL,
            ContractKind::Probe => PROBE_LABEL,
        }
    }

    /// The CSV spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractKind::Linux => "linux",
            ContractKind::Probe => "probe",
        }
    }

    /// Parses the CSV spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "linux" => Some(ContractKind::Linux),
            "probe" => Some(ContractKind::Probe),
            _ => None,
        }
    }
}

/// What the host's `/dev/kvm` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    /// Hardware virtualization (VMX/SVM).
    Hardware,
    /// The `kvm_pvm` software backend.
    Pvm,
    /// KVM inside an emulated (TCG) L1: functional, slow.
    NestedEmulated,
}

impl HostKind {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HostKind::Hardware => "hardware",
            HostKind::Pvm => "pvm",
            HostKind::NestedEmulated => "nested-emulated",
        }
    }
}

/// How attempts were scheduled. All modes run under the same contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Mode {
    /// One at a time, each after the previous finished.
    Sequential { count: u64 },
    /// `count` boots all due at t0 (their intended request time), at most `concurrency`
    /// in flight.
    Burst { count: u64, concurrency: u32 },
    /// Fixed arrival rate; latency from each intended time (coordinated-omission safe).
    OpenLoop {
        count: u64,
        /// Arrivals per 1,000 seconds (integer, so 2.5/s is 2500).
        rate_per_ks: u64,
    },
    /// `per_level` boots at each concurrency 1..=`max_concurrency`.
    Sweep {
        max_concurrency: u32,
        per_level: u64,
    },
    /// create → ready → teardown cycles at `concurrency`.
    Churn { count: u64, concurrency: u32 },
}

impl Mode {
    /// The mode's name.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Sequential { .. } => "sequential",
            Mode::Burst { .. } => "burst",
            Mode::OpenLoop { .. } => "open_loop",
            Mode::Sweep { .. } => "sweep",
            Mode::Churn { .. } => "churn",
        }
    }

    /// Attempts a complete campaign of this mode makes.
    pub fn planned_attempts(&self) -> u64 {
        match self {
            Mode::Sequential { count }
            | Mode::Burst { count, .. }
            | Mode::OpenLoop { count, .. }
            | Mode::Churn { count, .. } => *count,
            Mode::Sweep {
                max_concurrency,
                per_level,
            } => u64::from(*max_concurrency).saturating_mul(*per_level),
        }
    }

    /// Whether samples of this mode carry an intended request time.
    pub fn has_intended_time(&self) -> bool {
        matches!(self, Mode::Burst { .. } | Mode::OpenLoop { .. })
    }

    /// Whether `c` is a valid value of a sample's `concurrency` column in this mode
    /// (open loop has no fixed concurrency and records 0).
    pub fn allows_concurrency(&self, c: u32) -> bool {
        match self {
            Mode::Sequential { .. } => c == 1,
            Mode::Burst { concurrency, .. } | Mode::Churn { concurrency, .. } => c == *concurrency,
            Mode::OpenLoop { .. } => c == 0,
            Mode::Sweep {
                max_concurrency, ..
            } => c >= 1 && c <= *max_concurrency,
        }
    }

    /// Plain words for the README.
    pub fn describe(&self) -> String {
        match self {
            Mode::Sequential { count } => {
                format!("sequential: {count} launches, one at a time")
            }
            Mode::Burst { count, concurrency } => format!(
                "burst: {count} launches all due at t0, at most {concurrency} in flight; \
                 latency from t0"
            ),
            Mode::OpenLoop { count, rate_per_ks } => format!(
                "open loop: {count} launches at {}.{:03} per second; latency from each \
                 intended start",
                rate_per_ks / 1000,
                rate_per_ks % 1000
            ),
            Mode::Sweep {
                max_concurrency,
                per_level,
            } => format!(
                "concurrency sweep: {per_level} launches at each concurrency 1..={max_concurrency}"
            ),
            Mode::Churn { count, concurrency } => {
                format!("churn: {count} create→ready→teardown cycles at concurrency {concurrency}")
            }
        }
    }
}

/// Where a stage's duration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// Host clock; the host stages tile the headline (their sum equals it for a success).
    Host,
    /// The guest's own clock (Linux guests only).
    Guest,
    /// Host clock, after strict-ready: not part of the headline.
    Post,
}

/// The stages, in timeline order. The CSV has one column `<name>_ns` per stage, in this
/// order; the bench fills them, the verifier and `compare` read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Intended request time → actual request (spawn) time: the harness's own queueing.
    /// Present exactly when the sample has an intended time.
    Queue,
    /// Request (taken before spawning) → the VMM process's `main` running.
    Spawn,
    /// → `/dev/kvm` opened and its API/capabilities checked.
    KvmOpen,
    /// → VM created (irqchip, PIT, TSS/identity map).
    VmCreate,
    /// → guest memory mapped and every memslot registered.
    Memory,
    /// → kernel, initramfs, boot parameters and command line in guest memory.
    KernelLoad,
    /// → every vCPU created and its registers set, just before the first `KVM_RUN`.
    Vcpus,
    /// First `KVM_RUN` → the guest's init-start doorbell (host clock).
    GuestBoot,
    /// Init-start doorbell → ready doorbell (host clock).
    GuestInit,
    /// Ready doorbell → the liveness reply verified: strict-ready.
    Challenge,
    /// Guest clock: kernel start → PID 1 running (`t_init_ns`).
    GuestKernelToInit,
    /// Guest clock: PID 1 running → ready (`t_ready_ns - t_init_ns`).
    GuestInitToReady,
    /// Strict-ready → the guest's workload record received.
    Workload,
    /// Record received → VMM process reaped.
    Teardown,
}

/// Number of stages.
pub const STAGE_COUNT: usize = 14;

impl Stage {
    /// Every stage, in column order.
    pub const ALL: [Stage; STAGE_COUNT] = [
        Stage::Queue,
        Stage::Spawn,
        Stage::KvmOpen,
        Stage::VmCreate,
        Stage::Memory,
        Stage::KernelLoad,
        Stage::Vcpus,
        Stage::GuestBoot,
        Stage::GuestInit,
        Stage::Challenge,
        Stage::GuestKernelToInit,
        Stage::GuestInitToReady,
        Stage::Workload,
        Stage::Teardown,
    ];

    /// Position in [`Stage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name (CSV column is `<name>_ns`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::Spawn => "spawn",
            Stage::KvmOpen => "kvm_open",
            Stage::VmCreate => "vm_create",
            Stage::Memory => "memory",
            Stage::KernelLoad => "kernel_load",
            Stage::Vcpus => "vcpus",
            Stage::GuestBoot => "guest_boot",
            Stage::GuestInit => "guest_init",
            Stage::Challenge => "challenge",
            Stage::GuestKernelToInit => "guest_kernel_to_init",
            Stage::GuestInitToReady => "guest_init_to_ready",
            Stage::Workload => "workload",
            Stage::Teardown => "teardown",
        }
    }

    /// Where the duration comes from.
    pub fn kind(self) -> StageKind {
        match self {
            Stage::GuestKernelToInit | Stage::GuestInitToReady => StageKind::Guest,
            Stage::Workload | Stage::Teardown => StageKind::Post,
            _ => StageKind::Host,
        }
    }

    /// Looks a stage up by name.
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| s.name() == name)
    }
}

/// One duration per stage; `None` = not reached / not applicable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes(pub [Option<u64>; STAGE_COUNT]);

impl StageTimes {
    /// The duration of `stage`.
    pub fn get(&self, stage: Stage) -> Option<u64> {
        self.0[stage.index()]
    }

    /// Sets the duration of `stage`.
    pub fn set(&mut self, stage: Stage, ns: Option<u64>) {
        self.0[stage.index()] = ns;
    }
}

/// CLOCK_MONOTONIC stamps of one attempt as the bench and the VMM observe them. Each
/// host stage is the time from the previous present stamp to its own end stamp, so the
/// host stages always tile `origin → strict_ready` exactly; a missing stamp leaves its
/// stage empty and the next present stage absorbs the gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStamps {
    /// When the attempt was due (burst, open loop).
    pub intended: Option<u64>,
    /// Taken before spawning the VMM.
    pub request: u64,
    /// End of [`Stage::Spawn`]: the VMM's `main` running.
    pub vmm_main: Option<u64>,
    /// End of [`Stage::KvmOpen`].
    pub kvm_open: Option<u64>,
    /// End of [`Stage::VmCreate`].
    pub vm_create: Option<u64>,
    /// End of [`Stage::Memory`].
    pub memory: Option<u64>,
    /// End of [`Stage::KernelLoad`].
    pub kernel_load: Option<u64>,
    /// End of [`Stage::Vcpus`]: just before the first `KVM_RUN`.
    pub vcpus: Option<u64>,
    /// End of [`Stage::GuestBoot`]: the init-start doorbell's VM exit.
    pub init_doorbell: Option<u64>,
    /// End of [`Stage::GuestInit`]: the ready doorbell's VM exit.
    pub ready_doorbell: Option<u64>,
    /// End of [`Stage::Challenge`]: strict-ready.
    pub strict_ready: Option<u64>,
    /// End of [`Stage::Workload`]: the guest's record received.
    pub record: Option<u64>,
    /// End of [`Stage::Teardown`]: the VMM process reaped.
    pub reaped: Option<u64>,
}

impl HostStamps {
    /// Fills the host and post stages (guest stages are left as they are), the queue
    /// stage, `intended_request_ns`, `actual_request_ns`, `ready_ns` and `latency_ns` of
    /// `sample`. A stamp earlier than its predecessor gives an empty stage (the verifier
    /// then reports the broken tiling rather than a made-up number).
    pub fn apply(&self, sample: &mut Sample) {
        sample.intended_request_ns = self.intended;
        sample.actual_request_ns = self.request;
        sample.ready_ns = self.strict_ready;
        sample.stages.set(
            Stage::Queue,
            self.intended.and_then(|t| self.request.checked_sub(t)),
        );
        let mut prev = Some(self.request);
        for (stage, end) in [
            (Stage::Spawn, self.vmm_main),
            (Stage::KvmOpen, self.kvm_open),
            (Stage::VmCreate, self.vm_create),
            (Stage::Memory, self.memory),
            (Stage::KernelLoad, self.kernel_load),
            (Stage::Vcpus, self.vcpus),
            (Stage::GuestBoot, self.init_doorbell),
            (Stage::GuestInit, self.ready_doorbell),
            (Stage::Challenge, self.strict_ready),
            (Stage::Workload, self.record),
            (Stage::Teardown, self.reaped),
        ] {
            let d = match (prev, end) {
                (Some(p), Some(e)) => e.checked_sub(p),
                _ => None,
            };
            sample.stages.set(stage, d);
            if end.is_some() {
                prev = end;
            }
            if stage == Stage::Challenge && end.is_none() {
                // Post stages are measured from strict-ready only.
                prev = None;
            }
        }
        sample.latency_ns = sample.derived_latency();
    }
}

/// Sets the guest-clock stages from the guest's record (`0` = not reached).
pub fn apply_guest_record(sample: &mut Sample, t_init_ns: u64, t_ready_ns: u64) {
    let init = (t_init_ns > 0).then_some(t_init_ns);
    sample.stages.set(Stage::GuestKernelToInit, init);
    sample.stages.set(
        Stage::GuestInitToReady,
        match (init, t_ready_ns) {
            (Some(i), r) if r > 0 => r.checked_sub(i),
            _ => None,
        },
    );
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
    /// Guest: System RAM in `/sys/firmware/memmap` (bytes).
    pub guest_mem_firmware: Option<u64>,
    /// Guest: `MemTotal` (bytes).
    pub guest_mem_total: Option<u64>,
    /// Guest: online CPUs.
    pub guest_cpus: Option<u32>,
    /// Guest: the platform its kernel saw (topology, TSC, clocksource); Linux rows only.
    pub guest_platform: Option<GuestPlatform>,
    /// Workload result: `BENCH_OK`, `not_run`, a guest error name, or empty if no record.
    pub workload: String,
    /// The attempt reached strict-ready, verified, within the deadline.
    pub ok: bool,
    /// Typed error name; empty exactly when `ok`.
    pub error_kind: String,
    /// Free-text error detail (may contain any printable text; CSV-quoted as needed).
    pub error_detail: String,
}

impl Sample {
    /// Sum of the host stages (those that tile the headline), in u128 so it cannot
    /// overflow; equals `latency_ns` for every well-formed success.
    pub fn host_stage_sum(&self) -> u128 {
        Stage::ALL
            .iter()
            .filter(|st| st.kind() == StageKind::Host)
            .filter_map(|st| self.stages.get(*st))
            .map(u128::from)
            .sum()
    }

    /// What disagrees in this row's memory figures, empty when they agree. The one
    /// definition of "memory verified" that the bench (when it classifies a launch) and the
    /// verifier (when it checks a success) share: host configured = memslots = E820 usable =
    /// the guest's own RAM figure (required for Linux, checked whenever present), and (Linux)
    /// the guest's MemTotal in (0, configured].
    pub fn memory_problems(&self, linux: bool) -> Vec<String> {
        let m = self.host_mem_configured;
        let mut bad = Vec::new();
        if self.host_memslots != Some(m) {
            bad.push(format!("memslots {:?}", self.host_memslots));
        }
        if self.host_e820_usable != Some(m) {
            bad.push(format!("E820 usable {:?}", self.host_e820_usable));
        }
        if (linux || self.guest_mem_firmware.is_some()) && self.guest_mem_firmware != Some(m) {
            bad.push(format!("guest firmware map {:?}", self.guest_mem_firmware));
        }
        if linux || self.guest_mem_total.is_some() {
            match self.guest_mem_total {
                Some(t) if t > 0 && t <= m => {}
                other => bad.push(format!("guest MemTotal {other:?} not in (0, {m}]")),
            }
        }
        bad
    }

    /// Why this row's guest platform is not the one configured (`vcpus` vCPUs as one package
    /// of single-threaded cores), or `None` when it is. The one definition the bench (when it
    /// classifies a Linux launch) and the verifier (when it checks a Linux success) share.
    pub fn platform_problem(&self, vcpus: u32) -> Option<String> {
        match &self.guest_platform {
            None => Some("the guest reported no platform".into()),
            Some(p) if !p.topology_is(vcpus) => Some(format!(
                "the guest saw {} package(s) × {} core(s) × {} thread(s), configured 1 × {vcpus} × 1",
                p.packages, p.cores_per_package, p.threads_per_core
            )),
            Some(_) => None,
        }
    }

    /// An attempt with nothing observed yet: not ok, every optional field empty. The
    /// bench fills it in ([`HostStamps::apply`], [`apply_guest_record`], memory figures,
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
            guest_mem_firmware: None,
            guest_mem_total: None,
            guest_cpus: None,
            guest_platform: None,
            workload: String::new(),
            ok: false,
            error_kind: String::new(),
            error_detail: String::new(),
        }
    }

    /// The headline computed from the stamps: `ready - (intended or actual)`.
    pub fn derived_latency(&self) -> Option<u64> {
        let origin = self.intended_request_ns.unwrap_or(self.actual_request_ns);
        self.ready_ns?.checked_sub(origin)
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
}

impl Contract {
    /// A contract with its derived fields (label, headline, percentile definition) filled.
    pub fn new(kind: ContractKind, mode: Mode, deadline_ns: u64, incomplete: bool) -> Self {
        let description = match kind {
            ContractKind::Linux => "Each sample is a true-cold launch: a new VMM process spawned \
                fresh, a new KVM VM, a new Linux kernel boot, no snapshot, pool or reuse. The \
                request stamp is taken before the spawn. Strict-ready is the liveness reply, \
                made after the guest verified its memory and rang the ready doorbell, \
                verified by the host against a fresh nonce."
                .to_string(),
            ContractKind::Probe => "Each sample is a new VMM process, a new KVM VM and the \
                VMM's embedded probe guest (no Linux kernel): the floor of the VMM's own cost. \
                This is not a Linux boot."
                .to_string(),
        };
        Contract {
            kind,
            label: kind.label().to_string(),
            description,
            mode,
            deadline_ns,
            incomplete,
            headline: HEADLINE.to_string(),
            percentile_definition: PERCENTILE_DEFINITION.to_string(),
        }
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
    /// The guest kernel command line (Linux) or VMM arguments (probe).
    pub cmdline: String,
    pub vmm_path: String,
    pub kernel_path: Option<String>,
    pub initramfs_path: Option<String>,
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
    /// Busy host, harness bottleneck, recorded downgrades …
    pub warnings: Vec<String>,
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

impl ResultJson {
    /// Builds the result, computing every summary from `samples`.
    pub fn new(
        contract: Contract,
        configuration: Configuration,
        environment: Environment,
        artifacts: BTreeMap<String, String>,
        samples: &[Sample],
    ) -> Self {
        let summary = Summaries::compute(&contract, samples);
        ResultJson {
            schema_version: SCHEMA_VERSION,
            contract,
            configuration,
            environment,
            artifacts,
            summary,
        }
    }
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

    fn blank() -> Sample {
        Sample::new(0, ContractKind::Linux, 0, 0)
    }

    #[test]
    fn stamps_tile_the_headline_with_intended_time_and_missing_stamps() {
        let st = HostStamps {
            intended: Some(1_000),
            request: 1_500,
            vmm_main: Some(2_000),
            kvm_open: Some(2_100),
            vm_create: None, // absorbed by memory
            memory: Some(2_600),
            kernel_load: Some(3_000),
            vcpus: Some(3_100),
            init_doorbell: None, // probe guest: no init doorbell
            ready_doorbell: Some(9_000),
            strict_ready: Some(9_300),
            record: Some(9_800),
            reaped: Some(10_000),
        };
        let mut s = blank();
        st.apply(&mut s);
        assert_eq!(s.latency_ns, Some(8_300)); // 9_300 - intended 1_000
        assert_eq!(s.stages.get(Stage::Queue), Some(500));
        assert_eq!(s.stages.get(Stage::Spawn), Some(500));
        assert_eq!(s.stages.get(Stage::VmCreate), None);
        assert_eq!(s.stages.get(Stage::Memory), Some(500));
        assert_eq!(s.stages.get(Stage::GuestBoot), None);
        assert_eq!(s.stages.get(Stage::GuestInit), Some(5_900));
        assert_eq!(s.stages.get(Stage::Workload), Some(500));
        assert_eq!(s.stages.get(Stage::Teardown), Some(200));
        assert_eq!(s.host_stage_sum(), 8_300);
    }

    #[test]
    fn failed_attempt_has_no_post_stages_and_no_latency() {
        let st = HostStamps {
            request: 100,
            vmm_main: Some(150),
            reaped: Some(900),
            ..HostStamps::default()
        };
        let mut s = blank();
        st.apply(&mut s);
        assert_eq!(s.latency_ns, None);
        assert_eq!(s.stages.get(Stage::Spawn), Some(50));
        assert_eq!(s.stages.get(Stage::Teardown), None);
        assert_eq!(s.stages.get(Stage::Queue), None);
    }

    #[test]
    fn backwards_stamp_gives_an_empty_stage_not_a_made_up_one() {
        let st = HostStamps {
            request: 100,
            vmm_main: Some(90),
            strict_ready: Some(200),
            ..HostStamps::default()
        };
        let mut s = blank();
        st.apply(&mut s);
        assert_eq!(s.stages.get(Stage::Spawn), None);
        assert_eq!(s.stages.get(Stage::Challenge), Some(110));
        assert_eq!(s.latency_ns, Some(100));
        assert_ne!(s.host_stage_sum(), 100); // the verifier will report the broken tiling
    }

    #[test]
    fn guest_record_stages() {
        let mut s = blank();
        apply_guest_record(&mut s, 15_000, 18_000);
        assert_eq!(s.stages.get(Stage::GuestKernelToInit), Some(15_000));
        assert_eq!(s.stages.get(Stage::GuestInitToReady), Some(3_000));
        apply_guest_record(&mut s, 15_000, 0);
        assert_eq!(s.stages.get(Stage::GuestInitToReady), None);
    }

    #[test]
    fn stage_names_are_unique_and_indexed_in_order() {
        for (i, st) in Stage::ALL.iter().enumerate() {
            assert_eq!(st.index(), i);
            assert_eq!(Stage::from_name(st.name()), Some(*st));
        }
    }
}
