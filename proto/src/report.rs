//! What `truecold-vmm boot` prints on stdout, as far as a bundle row is built from it and
//! verified against it. The VMM's full report ([`BootReport`] there) embeds [`ReportCore`]
//! flattened and adds diagnostics (memslot ranges, E820 entries, exit counts, host facts);
//! the bench and the verifier read the same JSON through [`ReportCore`] alone, so each field
//! has one definition and the bench does not link the VMM.
//!
//! A VMM that fails before its guest runs prints an [`ErrorReport`] instead.

use serde::{Deserialize, Serialize};

use crate::kinds::{Engine, RamLayout, Transport};
use crate::layout::{AccountingError, Expected};
use crate::measure::{Mark, Stage, Stamps};
use crate::wire::{BootId, GuestRecord};

/// Version of the VMM's report JSON. 2: one [`Stamps`] object (was `timeline` +
/// `durations`), a typed guest record, the verified reply's boot id only. 3: the
/// [`ReportCore::transport`] the guest used (always written).
pub const REPORT_SCHEMA: u32 = 3;

/// How the guest answered the challenge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LivenessKind {
    /// A Linux guest's `reply` line: an unkeyed SHA-256 binding of the nonce and its boot id
    /// ([`crate::liveness_binding`]).
    Binding,
    /// The probe guest echoes the nonce back.
    ProbeEcho,
}

/// How the liveness challenge went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Liveness {
    pub kind: LivenessKind,
    /// The nonce made after the Ready doorbell (hex).
    pub nonce: Option<String>,
    /// The boot id of the reply that verified (Linux guests). An unverified reply never sets
    /// it.
    pub reply_boot_id: Option<BootId>,
    /// The verified binding or echo (hex); else the first answer received.
    pub answer: Option<String>,
    pub verified: bool,
}

impl Liveness {
    /// Nothing answered yet.
    pub fn new(kind: LivenessKind) -> Self {
        Liveness {
            kind,
            nonce: None,
            reply_boot_id: None,
            answer: None,
            verified: false,
        }
    }
}

/// Memory as configured, registered, described to the guest and seen by it (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryFigures {
    pub configured: u64,
    /// Sum of the RAM memslots.
    pub memslots: u64,
    /// Sum of the E820 usable-RAM entries.
    pub e820_ram: u64,
    /// Bytes of E820 reserved entries inside the layout's declared hole
    /// ([`crate::layout::check_map`]); absent (0) laid `around-hole`, which declares none,
    /// and from reports written before the layouts existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub e820_hole_reserved: u64,
    /// The guest's own figure: the Linux record's firmware map, the probe's memory map sum.
    pub guest: Option<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl MemoryFigures {
    /// The exact-accounting rule on the host's and the guest's figures under truecold's
    /// `layout` ([`crate::layout::Expected`]): memslots = E820 RAM = the guest's RAM =
    /// configured − the hole, and the hole declared reserved exactly as the layout says. A
    /// missing guest figure is a breach.
    pub fn problem(&self, layout: RamLayout) -> Option<AccountingError> {
        self.host_problem(layout).or_else(|| {
            Expected::of(Engine::Truecold, layout, self.configured)
                .sums(
                    self.configured,
                    self.guest.unwrap_or(u64::MAX),
                    self.e820_hole_reserved,
                )
                .err()
        })
    }

    /// [`MemoryFigures::problem`] on the host's figures alone (memslots, E820): what a
    /// report whose guest figure the bench reads elsewhere (the serial transport) is held to.
    pub fn host_problem(&self, layout: RamLayout) -> Option<AccountingError> {
        let want = Expected::of(Engine::Truecold, layout, self.configured);
        [self.e820_ram, self.memslots].into_iter().find_map(|ram| {
            want.sums(self.configured, ram, self.e820_hole_reserved)
                .err()
        })
    }

    /// [`MemoryFigures::problem`] finds none.
    pub fn agree(&self, layout: RamLayout) -> bool {
        self.problem(layout).is_none()
    }
}

/// How the boot ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub ok: bool,
    /// The first failure's stable snake_case kind (`deadline`, `exit_code`, …); `None` when ok.
    pub failure_kind: Option<String>,
    /// The failure in words.
    pub failure: Option<String>,
    /// The byte the guest wrote to the exit port, if it did.
    pub guest_exit_code: Option<u8>,
}

/// The measured core of one boot report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCore {
    pub schema: u32,
    /// How the guest talked to the VMM. Under [`Transport::Serial`] the VMM's 8250 was its
    /// stdin/stdout and the bench read the `TC1` lines there: the VMM made no challenge, so
    /// `liveness` is empty (kind `binding`), `guest_record` is `None` and `strict_ready` /
    /// `record` are not in `stamps` (the bench stamps them); `outcome.ok` means the guest
    /// wrote 0 to the exit port after its Ready doorbell, with no protocol error and no
    /// deadline.
    pub transport: Transport,
    /// Every mark the VMM took (and `request`, echoed from `--request-ns`).
    pub stamps: Stamps,
    pub memory_figures: MemoryFigures,
    /// The backing the VMM observed it got (`anon-4k`, `thp`, `hugetlb-2m`, …).
    pub backing_obtained: crate::kinds::ObtainedBacking,
    /// VmRSS of the VMM process right after strict-ready.
    pub vmm_rss_bytes: Option<u64>,
    pub liveness: Liveness,
    /// The Linux guest's record.
    pub guest_record: Option<GuestRecord>,
    /// Every protocol error the guest caused (malformed lines, an unverified reply, a second
    /// record …). Only the first [`ReportCore::PROTOCOL_ERRORS_KEPT`] are kept as text.
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    /// The guest kernel command line (Linux guests).
    pub guest_cmdline: Option<String>,
    pub outcome: Outcome,
    /// The VMM's own cost, sampled at each of its marks (split into stages by
    /// [`Accounting::stages`]). Absent from reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<Accounting>,
    /// An attribution boot's kernel-log trace (`truecold.attribution=1` only; see
    /// [`crate::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_trace: Option<crate::trace::GuestTrace>,
    /// Host-side RIP samples of the guest (`--sample-rip-us` only; see [`crate::rip`]).
    /// Absent when sampling is off, so reports without it keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rip_samples: Option<crate::rip::RipSamples>,
    /// How the VMM process contained itself (its jail and seccomp filters, and what each
    /// step cost). Absent from reports written before it existed, and from in-process boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<Containment>,
}

/// The system user `truecold-vmm boot`'s jail drops to unless `--uid/--gid` name another
/// ([`Containment::user`]), looked up by name in [`JAIL_PASSWD`]: `scripts/deps.sh` creates it
/// on a host, the nested harness writes it into L1's (docs/security.md).
pub const JAIL_USER: &str = "truecold-vmm";

/// Where the VMM looks [`JAIL_USER`] up.
pub const JAIL_PASSWD: &str = "/etc/passwd";

/// How `truecold-vmm boot` contained itself (docs/security.md): the jail (namespaces,
/// pivot_root into a root holding only the launch's socket directory, the drop to an
/// unprivileged user) and the seccomp filters, each step timed inside the VMM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Containment {
    /// Whether the VMM ran jailed.
    pub contained: bool,
    /// Why not, when not (`--no-jail`; not started as root).
    pub not_contained_because: Option<String>,
    /// The user the jail dropped to (`truecold-vmm`, or `--uid/--gid`) and its ids.
    pub user: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The namespaces entered (`mnt`, `net`, `ipc`).
    pub namespaces: Vec<String>,
    /// The host directories bind-mounted (read-only) into the jail's root.
    pub binds: Vec<String>,
    /// Syscalls the process-wide filter allows (main, device and serial-input threads);
    /// None without a filter.
    pub allowed_syscalls: Option<u32>,
    /// Syscalls a vCPU thread's own filter allows; None without one.
    pub vcpu_allowed_syscalls: Option<u32>,
    pub steps: ContainmentSteps,
}

/// Each containment step's duration inside the VMM, ns (None: the step was not made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainmentSteps {
    /// `unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)`.
    pub unshare_ns: Option<u64>,
    /// `/` private, the tmpfs, the bind mounts, `pivot_root`, the old root detached.
    pub mounts_ns: Option<u64>,
    /// setgroups/setresgid/setresuid and their checks.
    pub drop_ns: Option<u64>,
    /// Both filters compiled, the process-wide ones installed.
    pub filters_ns: Option<u64>,
    /// The longest installation of a vCPU thread's own filter (on that thread, before its
    /// first KVM_RUN).
    pub vcpu_filter_ns: Option<u64>,
}

/// KVM exits by reason, cumulative over the VMM process (all vCPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitTally {
    /// `KVM_EXIT_IO`, direction in.
    pub io_in: u64,
    /// `KVM_EXIT_IO`, direction out.
    pub io_out: u64,
    /// `KVM_EXIT_MMIO`, reads and writes.
    pub mmio: u64,
    /// `KVM_EXIT_HLT`.
    pub hlt: u64,
    /// `KVM_EXIT_SHUTDOWN` (a triple fault; ends the run).
    pub shutdown: u64,
    /// Every other exit reason the run loop handles (interrupt window, IOAPIC EOI, `INTR`,
    /// system event). A `KVM_RUN` interrupted by the VMM's own kick is not an exit and is
    /// not counted.
    pub other: u64,
}

impl ExitTally {
    /// All exits.
    pub fn total(&self) -> u64 {
        self.io_in
            .saturating_add(self.io_out)
            .saturating_add(self.mmio)
            .saturating_add(self.hlt)
            .saturating_add(self.shutdown)
            .saturating_add(self.other)
    }

    /// `self − earlier`, field by field; `None` when some counter went backwards.
    pub fn since(&self, earlier: &ExitTally) -> Option<ExitTally> {
        Some(ExitTally {
            io_in: self.io_in.checked_sub(earlier.io_in)?,
            io_out: self.io_out.checked_sub(earlier.io_out)?,
            mmio: self.mmio.checked_sub(earlier.mmio)?,
            hlt: self.hlt.checked_sub(earlier.hlt)?,
            shutdown: self.shutdown.checked_sub(earlier.shutdown)?,
            other: self.other.checked_sub(earlier.other)?,
        })
    }
}

/// The VMM process's counters at one instant: its exits so far and its page faults
/// (`getrusage(RUSAGE_SELF)`: every thread of the process, vCPU threads included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    pub exits: ExitTally,
    /// `ru_minflt`: page faults served without I/O.
    pub minflt: u64,
    /// `ru_majflt`: page faults that needed I/O.
    pub majflt: u64,
}

impl Counters {
    /// `self − earlier`; `None` when some counter went backwards.
    pub fn since(&self, earlier: &Counters) -> Option<Counters> {
        Some(Counters {
            exits: self.exits.since(&earlier.exits)?,
            minflt: self.minflt.checked_sub(earlier.minflt)?,
            majflt: self.majflt.checked_sub(earlier.majflt)?,
        })
    }
}

/// The VMM's counters at each mark it took, and its memory high-water mark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accounting {
    /// Mark name ([`Mark::name`]) → the counters read right after that stamp (so the read
    /// never delays the stamp). Only the VMM's own marks appear: `request` is before the VMM
    /// process existed, so its counters are zero by definition, and the VMM's last sample
    /// (`teardown_done`) stands for `reaped` (after it the process only prints its report).
    pub at: std::collections::BTreeMap<String, Counters>,
    /// `VmHWM` (peak resident set) of the VMM process at `teardown_done`, bytes. Like
    /// `VmRSS` it comes from the kernel's batched per-thread counters, so it can read a few
    /// dozen pages below an earlier `VmRSS`.
    pub rss_peak_bytes: Option<u64>,
    /// `VmRSS` at `exit` (the run over, guest memory still mapped), bytes.
    pub rss_final_bytes: Option<u64>,
}

/// One stage's share of the VMM's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageCounters {
    pub stage: Stage,
    pub counters: Counters,
}

impl Accounting {
    /// Records the counters of mark `m`.
    pub fn take(&mut self, m: Mark, c: Counters) {
        self.at.insert(m.name().to_string(), c);
    }

    /// The counters at `m` as the stage split uses them (see [`Accounting::at`]).
    pub fn at_mark(&self, m: Mark) -> Option<Counters> {
        match m {
            Mark::Request => Some(Counters::default()),
            Mark::Reaped => self.at.get(Mark::TeardownDone.name()).copied(),
            _ => self.at.get(m.name()).copied(),
        }
    }

    /// The counters of every stage whose span ([`Stamps::spans`], the one tiling rule) has
    /// counters at both ends, in [`Stage::ALL`] order. A counter that went backwards
    /// (impossible for a real process) leaves its stage out.
    pub fn stages(&self, stamps: &Stamps) -> Vec<StageCounters> {
        Stage::ALL
            .iter()
            .zip(stamps.spans())
            .filter_map(|(stage, span)| {
                let (a, b) = span?;
                let counters = self.at_mark(b)?.since(&self.at_mark(a)?)?;
                Some(StageCounters {
                    stage: *stage,
                    counters,
                })
            })
            .collect()
    }
}

impl ReportCore {
    /// Protocol errors kept as text.
    pub const PROTOCOL_ERRORS_KEPT: usize = 64;
}

/// The guest-memory mapping of an engine process, read by the bench from
/// `/proc/<pid>/smaps` after strict-ready (independent of the guest and of the engine).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostMapping {
    /// Sizes of the mappings taken as guest memory, bytes, largest first.
    pub sizes: Vec<u64>,
    /// Their `KernelPageSize`, bytes (one value for all of them).
    pub kernel_page_size: u64,
    /// `AnonHugePages` over them, bytes (THP actually faulted in).
    pub anon_huge_bytes: u64,
}

impl HostMapping {
    /// Sum of the sizes.
    pub fn total(&self) -> u64 {
        self.sizes.iter().sum()
    }
}

/// How an engine process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessExit {
    /// Exit status, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The bench killed it (deadline + grace, or after the record: see `teardown`).
    pub killed: bool,
}

/// One launch of an engine arm as the bench observed it (line of `reports.jsonl` under the
/// serial observer). The bench's marks (request, serial_ready, strict_ready, record, reaped)
/// are in `stamps`; for the truecold engine the VMM's own marks (VM exits included) are merged
/// in and its whole report kept in `vmm`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineRun {
    pub engine: crate::kinds::Engine,
    pub stamps: Stamps,
    /// The boot id of the guest's `ready` line.
    pub ready_boot_id: Option<BootId>,
    /// The challenge as on the serial line (kind `binding`).
    pub liveness: Liveness,
    pub guest_record: Option<GuestRecord>,
    pub host_memory: Option<HostMapping>,
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub exit: Option<ProcessExit>,
    /// truecold only: the VMM's whole report (its own stdout is the serial line, so it writes
    /// the report to a file).
    pub vmm: Option<serde_json::Value>,
    pub outcome: Outcome,
    /// The parity contract's network proof (the agent channel's launches only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkProof>,
    /// The parity contract's per-launch lifecycle and cleanup (the agent channel's launches
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupReport>,
}

/// After a parity launch: the lifecycle row destroyed, the per-launch workspace clone and run
/// directory removed, and the check that nothing is left: the VMM reaped, its tap gone, the
/// image and sockets gone, no descriptor, thread or mapping of the harness leaked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanupReport {
    /// Every check passed.
    pub ok: bool,
    /// From the reap to the end of the check (removal included), ns.
    pub ns: u64,
    /// What was left or could not be done, each named.
    pub failures: Vec<String>,
    /// The per-launch tap's name.
    pub tap: String,
    /// How the workspace was cloned (`reflink`, `sparse-copy`) and in how many ns.
    pub clone_mode: String,
    pub clone_ns: u64,
    /// The lifecycle commits' durations (CREATED, RUNNING, DESTROYED), ns.
    pub state_commit_ns: Vec<u64>,
}

/// The parity contract's network proof: once the agent's reply verified, the host connects to
/// guest-init's listener on the guest's address over the tap, writes a fresh `TC1 nonce` line
/// and reads one `TC1 reply` line, which must verify against that nonce with the agent's boot
/// id. One attempt, bounded by the launch's kill instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkProof {
    /// `<guest ipv4>:<port>`.
    pub target: String,
    /// The second challenge (kind `binding`): its nonce, the answer, verified.
    pub liveness: Liveness,
    /// Why it did not verify (connect, write, read, decode, another boot id), if it did not.
    pub error: Option<String>,
}

/// What a VMM that failed before its guest ran prints: `{"schema":…,"error":{…}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    pub schema: u32,
    pub error: ErrorBody,
}

/// A stable kebab-case kind and the error chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub kind: String,
    pub message: String,
}

/// Either output of the VMM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmmOutput {
    Boot(Box<ReportCore>),
    Error(ErrorReport),
}

/// Why a VMM's stdout is not a usable report.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("the VMM's stdout exceeded the harness's limit (report truncated)")]
    Truncated,
    #[error("the VMM printed no report")]
    Empty,
    #[error("the VMM's report is not one JSON object: {0}")]
    NotJson(String),
    #[error("the VMM's report has schema {found}, this build reads {REPORT_SCHEMA}")]
    Schema { found: u64 },
    #[error("the VMM's error report does not parse: {0}")]
    BadError(String),
    #[error("the VMM's report does not parse: {0}")]
    BadReport(String),
}

impl VmmOutput {
    /// Parses one stdout (one JSON object; an object with an `error` member is an
    /// [`ErrorReport`]).
    pub fn parse(stdout: &[u8]) -> Result<Self, ReportError> {
        if stdout.iter().all(u8::is_ascii_whitespace) {
            return Err(ReportError::Empty);
        }
        let v: serde_json::Value =
            serde_json::from_slice(stdout).map_err(|e| ReportError::NotJson(e.to_string()))?;
        let schema = v.get("schema").and_then(serde_json::Value::as_u64);
        if schema != Some(u64::from(REPORT_SCHEMA)) {
            return Err(ReportError::Schema {
                found: schema.unwrap_or(0),
            });
        }
        if v.get("error").is_some() {
            return serde_json::from_value(v)
                .map(VmmOutput::Error)
                .map_err(|e| ReportError::BadError(e.to_string()));
        }
        serde_json::from_value(v)
            .map(|r| VmmOutput::Boot(Box::new(r)))
            .map_err(|e| ReportError::BadReport(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_report_and_garbage() {
        let e = VmmOutput::parse(
            br#"{"schema":3,"error":{"kind":"kernel-missing","message":"cannot open /x"}}"#,
        )
        .expect("parses");
        assert!(matches!(e, VmmOutput::Error(ref r) if r.error.kind == "kernel-missing"));
        assert_eq!(VmmOutput::parse(b" \n"), Err(ReportError::Empty));
        assert!(matches!(
            VmmOutput::parse(b"{\"schema\":1}"),
            Err(ReportError::Schema { found: 1 })
        ));
        assert!(matches!(
            VmmOutput::parse(b"{\"schema\":2}"),
            Err(ReportError::Schema { found: 2 })
        ));
        assert!(matches!(
            VmmOutput::parse(b"{\"schema\":3}"),
            Err(ReportError::BadReport(_))
        ));
        assert!(matches!(
            VmmOutput::parse(b"\xff"),
            Err(ReportError::NotJson(_))
        ));
    }

    /// The figures' rule per layout: RAM + declared hole = configured in the host's view
    /// (memslots, E820) and the guest's; an old report (no `e820_hole_reserved`) parses as
    /// `around-hole`'s 0.
    #[test]
    fn memory_figures_hold_the_layouts_rule() {
        let m = 256u64 << 20;
        let hole = 0x6_0000;
        let around = MemoryFigures {
            configured: m,
            memslots: m,
            e820_ram: m,
            e820_hole_reserved: 0,
            guest: Some(m),
        };
        assert!(around.agree(RamLayout::AroundHole));
        assert!(!around.agree(RamLayout::HoleInside));
        let inside = MemoryFigures {
            memslots: m - hole,
            e820_ram: m - hole,
            e820_hole_reserved: hole,
            guest: Some(m - hole),
            ..around
        };
        assert!(inside.agree(RamLayout::HoleInside));
        assert!(!inside.agree(RamLayout::AroundHole));
        // The hole not declared.
        let undeclared = MemoryFigures {
            e820_hole_reserved: 0,
            ..inside
        };
        assert!(matches!(
            undeclared.problem(RamLayout::HoleInside),
            Some(AccountingError::HoleNotDeclared { declared: 0, .. })
        ));
        // RAM + hole ≠ configured, in any one of the three views.
        for f in [
            MemoryFigures {
                memslots: m - hole - 4096,
                ..inside
            },
            MemoryFigures {
                e820_ram: m,
                ..inside
            },
            MemoryFigures {
                guest: Some(m - hole + 4096),
                ..inside
            },
            MemoryFigures {
                guest: None,
                ..inside
            },
        ] {
            assert!(
                matches!(
                    f.problem(RamLayout::HoleInside),
                    Some(AccountingError::Sum { .. })
                ),
                "{f:?}"
            );
        }
        let old: MemoryFigures =
            serde_json::from_str(r#"{"configured":1,"memslots":1,"e820_ram":1,"guest":1}"#)
                .unwrap();
        assert_eq!(old.e820_hole_reserved, 0);
        assert!(!serde_json::to_string(&around).unwrap().contains("hole"));
    }

    #[test]
    fn transport_is_always_written_and_required() {
        let core = ReportCore {
            schema: REPORT_SCHEMA,
            transport: Transport::Serial,
            stamps: Stamps::default(),
            memory_figures: MemoryFigures {
                configured: 1,
                memslots: 1,
                e820_ram: 1,
                e820_hole_reserved: 0,
                guest: None,
            },
            backing_obtained: crate::kinds::ObtainedBacking::Anon4k,
            vmm_rss_bytes: None,
            liveness: Liveness::new(LivenessKind::Binding),
            guest_record: None,
            protocol_error_count: 0,
            protocol_errors: Vec::new(),
            guest_cmdline: None,
            accounting: None,
            guest_trace: None,
            rip_samples: None,
            containment: None,
            outcome: Outcome {
                ok: true,
                failure_kind: None,
                failure: None,
                guest_exit_code: Some(0),
            },
        };
        let mut v = serde_json::to_value(&core).unwrap();
        assert_eq!(v["transport"], "serial");
        // Sampling off: no `rip_samples` key at all (old reports keep their bytes).
        assert!(v.get("rip_samples").is_none(), "{v}");
        assert_eq!(
            VmmOutput::parse(v.to_string().as_bytes()),
            Ok(VmmOutput::Boot(Box::new(core)))
        );
        v.as_object_mut().unwrap().remove("transport");
        assert!(matches!(
            VmmOutput::parse(v.to_string().as_bytes()),
            Err(ReportError::BadReport(e)) if e.contains("transport")
        ));
    }
}
