//! The boot report: one JSON object per boot, deserializable by the bench.
use serde::{Deserialize, Serialize};

use crate::config::BootConfig;
use crate::devices::{ExitCounts, Liveness, StopReason};
use crate::host::HostKind;
use crate::loader::{E820Entry, Loaded};
use crate::memory::{BackingReport, RamRange};
use crate::probe::ProbeReport;
use crate::timeline::{StageDurations, Timeline};

/// Version of this schema.
pub const SCHEMA: u32 = 1;

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

/// Memory as configured, registered, described to the guest, and seen by the guest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub configured_bytes: u64,
    pub memslots: Vec<RamRange>,
    pub memslot_bytes: u64,
    pub e820: Vec<E820Entry>,
    pub e820_ram_bytes: u64,
    /// The guest's own figure: `mem_firmware_ram` (Linux record) or `ram_bytes` (probe).
    pub guest_bytes: Option<u64>,
    /// configured == memslots == E820 RAM == guest.
    pub agree: bool,
}

/// The guest's record (mirror of `truecold_proto::GuestRecord`, serializable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestRecordReport {
    pub boot_id: Option<String>,
    pub t_init_ns: u64,
    pub t_ready_ns: u64,
    pub t_reply_ns: u64,
    pub t_record_ns: u64,
    pub mem_configured: u64,
    pub mem_firmware_ram: u64,
    pub mem_total: u64,
    pub mem_probe: u64,
    pub cpus: u32,
    pub platform: truecold_proto::GuestPlatform,
    pub workload: String,
    pub code: String,
}

impl From<&truecold_proto::GuestRecord> for GuestRecordReport {
    fn from(r: &truecold_proto::GuestRecord) -> Self {
        GuestRecordReport {
            boot_id: r.boot_id.map(|b| b.to_string()),
            t_init_ns: r.t_init_ns,
            t_ready_ns: r.t_ready_ns,
            t_reply_ns: r.t_reply_ns,
            t_record_ns: r.t_record_ns,
            mem_configured: r.mem_configured,
            mem_firmware_ram: r.mem_firmware_ram,
            mem_total: r.mem_total,
            mem_probe: r.mem_probe,
            cpus: r.cpus,
            platform: r.platform.clone(),
            workload: match r.workload {
                truecold_proto::Workload::BenchOk => "BENCH_OK".to_string(),
                truecold_proto::Workload::NotRun => "not_run".to_string(),
                truecold_proto::Workload::Failed(c) => c.name().to_string(),
            },
            code: r.code.name().to_string(),
        }
    }
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
    RecordFailed { code: String, workload: String },
    #[error("memory disagrees: configured {configured}, memslots {memslots}, E820 {e820}, guest {guest:?}")]
    MemoryDisagrees {
        configured: u64,
        memslots: u64,
        e820: u64,
        guest: Option<u64>,
    },
    #[error("probe check failed: {detail}")]
    Probe { detail: String },
}

/// Ok, or the first failure found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub ok: bool,
    pub failure: Option<GuestFailure>,
    /// How the run ended (stop reason, deadline, vCPU failure).
    pub stop: Option<StopReason>,
    pub guest_exit_code: Option<u8>,
}

/// Everything about one boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootReport {
    pub schema: u32,
    pub config: BootConfig,
    pub timeline: Timeline,
    pub durations: StageDurations,
    pub host: HostReport,
    pub memory: MemoryReport,
    pub backing: BackingReport,
    /// VmRSS of the VMM process at strict-ready (read on the vCPU thread right after the
    /// strict-ready stamp); `None` when strict-ready was not reached.
    pub vmm_rss_bytes: Option<u64>,
    pub kernel: Loaded,
    pub vcpus: u8,
    pub exits: ExitCounts,
    pub liveness: Liveness,
    pub guest_record: Option<GuestRecordReport>,
    pub probe: Option<ProbeReport>,
    pub protocol_errors: Vec<String>,
    pub vcpu_errors: Vec<String>,
    /// Each vCPU's RIP when the run ended (diagnoses a guest stuck before the deadline).
    pub vcpu_last_rip: Vec<u64>,
    pub outcome: Outcome,
}

/// What the CLI prints on stdout when a boot fails before the guest runs (a guest that ran
/// and failed prints its [`BootReport`] instead): `{"schema":1,"error":{"kind":…,"message":…}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReport {
    pub schema: u32,
    pub error: ErrorBody,
}

/// The failure: a stable kebab-case kind (see [`crate::Error::kind`]) and the error chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: String,
    pub message: String,
}

impl ErrorReport {
    /// The report of `e` (any error; a guest failure's kind is `guest-failed`).
    pub fn of(e: &crate::Error) -> Self {
        ErrorReport {
            schema: SCHEMA,
            error: ErrorBody {
                kind: e.kind().to_string(),
                message: crate::chain(e),
            },
        }
    }
}
