//! The boot report: one JSON object per boot. Its measured core ([`ReportCore`]: stamps,
//! memory figures, liveness, the typed guest record, outcome) is defined once in
//! `truecold_proto::report` and read by the bench and the verifier through that type; this
//! module adds the VMM's diagnostics and assembles the report from what a boot observed.
use serde::{Deserialize, Serialize};
use truecold_proto::measure::Stamps;
use truecold_proto::report::{Liveness, MemoryFigures, Outcome, ReportCore, REPORT_SCHEMA};
use truecold_proto::{ErrorCode, GuestRecord, Workload};

use crate::boot_params::E820Entry;
use crate::config::BootConfig;
use crate::devices::{ExitCounts, SerialInput, StopReason};
use crate::host::HostKind;
use crate::loader::Loaded;
use crate::memory::{BackingReport, RamRange};
use crate::probe::ProbeReport;
use crate::run::{RunEnd, RunError};

/// Version of the report JSON (the one constant, from proto).
pub const SCHEMA: u32 = REPORT_SCHEMA;

/// The host the boot ran on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostReport {
    /// The kind in effect (an override's when `forced`).
    pub kind: HostKind,
    /// What detection found from the host's own facts; None when `--host-kind` gave the
    /// kind and the VMM did not detect it.
    pub detected: Option<HostKind>,
    /// Whether `--host-kind` or `TRUECOLD_HOST_KIND` set `kind` instead of detection.
    pub forced: bool,
    /// `uname -r`.
    pub kernel: String,
    /// CPUID 0x4000_0000 signature seen by the VMM process ("" on bare metal).
    pub hypervisor_signature: String,
    pub mem_total_bytes: Option<u64>,
    /// KVM capabilities this VMM checked and relies on.
    pub kvm_caps: Vec<String>,
}

/// Where the memory figures come from: the registered ranges and the E820 table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDetail {
    pub memslots: Vec<RamRange>,
    pub e820: Vec<E820Entry>,
}

/// Why a boot that ran did not reach a verified, clean end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GuestFailure {
    #[error("the guest did not finish within the {deadline_ms} ms deadline (last doorbell phase: {last_phase:?})")]
    Deadline {
        deadline_ms: u64,
        last_phase: Option<u8>,
    },
    #[error("the guest reported failure: exit code {code} ({name})")]
    ExitCode { code: u8, name: String },
    #[error("the guest reset the VM before writing an exit code")]
    Reset,
    #[error("vCPU {vcpu} triple-faulted (KVM_EXIT_SHUTDOWN)")]
    Shutdown { vcpu: usize },
    #[error("the guest raised system event {event}")]
    SystemEvent { event: u32 },
    #[error("vCPU failure: {message}")]
    Vcpu { message: String },
    #[error("no verified liveness answer (strict-ready not reached): {detail}")]
    NotStrictReady { detail: String },
    #[error("the guest sent no record")]
    RecordMissing,
    #[error("the guest record says {code} / workload {workload}")]
    RecordFailed { code: ErrorCode, workload: Workload },
    #[error("memory disagrees under the {layout} layout: configured {configured}, memslots {memslots}, E820 RAM {e820}, E820 reserved in the hole {hole_reserved}, guest {guest:?}")]
    MemoryDisagrees {
        layout: truecold_proto::kinds::RamLayout,
        configured: u64,
        memslots: u64,
        e820: u64,
        hole_reserved: u64,
        guest: Option<u64>,
        #[source]
        rule: truecold_proto::layout::AccountingError,
    },
    #[error("probe check failed: {detail}")]
    Probe { detail: String },
    #[error("the guest wrote 0 to the exit port before its Ready doorbell (serial transport)")]
    ExitBeforeReady,
    #[error("the guest made {count} protocol error(s) (serial transport), the first: {first}")]
    Protocol { count: u64, first: String },
    #[error("vCPU(s) {vcpus:?} never started: the guest never sent them INIT/SIPI")]
    VcpusNotStarted { vcpus: Vec<usize> },
}

impl GuestFailure {
    /// The stable snake_case kind (also its serde tag, `-` → `_`).
    pub fn kind(&self) -> &'static str {
        match self {
            GuestFailure::Deadline { .. } => "deadline",
            GuestFailure::ExitCode { .. } => "exit_code",
            GuestFailure::Reset => "reset",
            GuestFailure::Shutdown { .. } => "shutdown",
            GuestFailure::SystemEvent { .. } => "system_event",
            GuestFailure::Vcpu { .. } => "vcpu",
            GuestFailure::NotStrictReady { .. } => "not_strict_ready",
            GuestFailure::RecordMissing => "record_missing",
            GuestFailure::RecordFailed { .. } => "record_failed",
            GuestFailure::MemoryDisagrees { .. } => "memory_disagrees",
            GuestFailure::Probe { .. } => "probe",
            GuestFailure::ExitBeforeReady => "exit_before_ready",
            GuestFailure::Protocol { .. } => "protocol",
            GuestFailure::VcpusNotStarted { .. } => "vcpus_not_started",
        }
    }
}

/// Everything about one boot: the measured core (flattened: its fields are top-level keys)
/// and the VMM's diagnostics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootReport {
    #[serde(flatten)]
    pub core: ReportCore,
    pub config: BootConfig,
    /// Process start from /proc/self/stat: CLOCK_BOOTTIME at clock-tick resolution (10 ms),
    /// not the stamps' clock; informational, in no duration.
    pub process_start_boottime_ns: Option<u64>,
    pub host: HostReport,
    pub memory: MemoryDetail,
    pub backing: BackingReport,
    pub kernel: Loaded,
    pub vcpus: u8,
    pub exits: ExitCounts,
    pub probe: Option<ProbeReport>,
    pub vcpu_errors: Vec<String>,
    /// Each vCPU's RIP when the run ended (diagnoses a guest stuck before the deadline).
    pub vcpu_last_rip: Vec<u64>,
    /// Under `--pin-vcpus`: the CPU each vCPU's thread was pinned to, in vCPU order (left
    /// out of the JSON when nothing was pinned, so reports without it keep their bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_cpus: Option<crate::pin::Placement>,
    /// How the run ended (stop reason; `None` at the deadline or on a vCPU failure).
    pub stop: Option<StopReason>,
    /// Under the serial transport: what the stdin → 8250 input thread did.
    pub serial_input: Option<SerialInput>,
    /// The first failure, typed.
    pub failure: Option<GuestFailure>,
    /// What confined the VMM process: no-new-privileges, inherited descriptors closed, the
    /// user dropped to, the seccomp filter (installed or not, syscalls allowed). None for a
    /// boot through the library's `boot::run`, which confines nothing (and in reports
    /// written before the field existed).
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::SandboxReport>,
    /// The parity contract's virtio devices, each as it ended the boot (chains served and
    /// refused, the device's own counters); empty without devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::virtio::DeviceReport>,
}

/// What a boot that ran observed, handed to [`assemble`].
pub struct Observed {
    pub stamps: Stamps,
    pub process_start_boottime_ns: Option<u64>,
    pub host: HostReport,
    pub memory: MemoryDetail,
    pub memory_figures: MemoryFigures,
    pub backing: BackingReport,
    pub kernel: Loaded,
    pub vmm_rss_bytes: Option<u64>,
    pub accounting: truecold_proto::report::Accounting,
    pub guest_trace: Option<truecold_proto::trace::GuestTrace>,
    pub exits: ExitCounts,
    pub liveness: Liveness,
    pub guest_record: Option<GuestRecord>,
    pub probe: Option<ProbeReport>,
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub end: RunEnd,
    pub vcpu_errors: Vec<RunError>,
    pub vcpu_last_rip: Vec<u64>,
    pub vcpu_cpus: Option<crate::pin::Placement>,
    pub rip_samples: Option<truecold_proto::rip::RipSamples>,
    pub serial_input: Option<SerialInput>,
    pub sandbox: Option<crate::sandbox::SandboxReport>,
    pub containment: Option<truecold_proto::report::Containment>,
    pub devices: Vec<crate::virtio::DeviceReport>,
}

/// The report of a boot that ran, judged by `failure`.
pub fn assemble(cfg: &BootConfig, o: Observed, failure: Option<GuestFailure>) -> BootReport {
    let guest_cmdline = (!cfg.is_probe()).then(|| o.kernel.cmdline.clone());
    BootReport {
        core: ReportCore {
            schema: SCHEMA,
            transport: cfg.transport,
            stamps: o.stamps,
            memory_figures: o.memory_figures,
            backing_obtained: o.backing.obtained,
            vmm_rss_bytes: o.vmm_rss_bytes,
            liveness: o.liveness,
            guest_record: o.guest_record,
            protocol_error_count: o.protocol_error_count,
            protocol_errors: o.protocol_errors,
            guest_cmdline,
            accounting: Some(o.accounting),
            guest_trace: o.guest_trace,
            rip_samples: o.rip_samples,
            containment: o.containment,
            outcome: Outcome {
                ok: failure.is_none(),
                failure_kind: failure.as_ref().map(|f| f.kind().to_string()),
                failure: failure.as_ref().map(ToString::to_string),
                guest_exit_code: match &o.end {
                    RunEnd::Stopped(StopReason::ExitPort(c)) => Some(*c),
                    _ => None,
                },
            },
        },
        config: cfg.clone(),
        process_start_boottime_ns: o.process_start_boottime_ns,
        host: o.host,
        memory: o.memory,
        backing: o.backing,
        kernel: o.kernel,
        vcpus: cfg.vcpus,
        exits: o.exits,
        probe: o.probe,
        vcpu_errors: o
            .vcpu_errors
            .iter()
            .map(|e| truecold_proto::measure::error_chain(e))
            .collect(),
        vcpu_last_rip: o.vcpu_last_rip,
        vcpu_cpus: o.vcpu_cpus,
        stop: match o.end {
            RunEnd::Stopped(r) => Some(r),
            _ => None,
        },
        serial_input: o.serial_input,
        failure,
        sandbox: o.sandbox,
        devices: o.devices,
    }
}
