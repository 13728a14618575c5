//! The guest's one structured record ([`GuestRecord`]) and its typed fields.

use core::fmt;

use super::code::{ErrorCode, ProtoError};
use super::liveness::BootId;

/// Result of the post-ready workload. Spelled as on the wire (`BENCH_OK`, `not_run`, or a
/// guest error name) in records, JSON and CSV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Workload {
    /// Written, read back, digest verified, deleted, confirmed gone: `BENCH_OK`.
    BenchOk,
    /// Not run (an earlier step failed).
    NotRun,
    /// Failed with this code.
    Failed(ErrorCode),
}

impl TryFrom<String> for Workload {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Workload::decode(&s).ok_or_else(|| format!("unknown workload result `{s}`"))
    }
}

impl From<Workload> for String {
    fn from(w: Workload) -> String {
        w.encode()
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl Workload {
    /// The wire / CSV spelling.
    pub fn encode(self) -> String {
        match self {
            Workload::BenchOk => "BENCH_OK".into(),
            Workload::NotRun => "not_run".into(),
            Workload::Failed(c) => c.name().into(),
        }
    }
    /// Parses [`Workload::encode`].
    pub fn decode(s: &str) -> Option<Self> {
        match s {
            "BENCH_OK" => Some(Workload::BenchOk),
            "not_run" => Some(Workload::NotRun),
            other => ErrorCode::ALL
                .iter()
                .copied()
                .find(|c| *c != ErrorCode::Ok && c.name() == other)
                .map(Workload::Failed),
        }
    }
}

/// A clocksource name as the guest's kernel reports it (`current_clocksource`): 1 to
/// [`Clocksource::MAX_LEN`] characters of `[a-z0-9_-]`, so it travels in a `TC1` value and
/// a CSV field unchanged.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct Clocksource(String);

impl TryFrom<String> for Clocksource {
    type Error = ProtoError;
    fn try_from(s: String) -> Result<Self, ProtoError> {
        Clocksource::parse(&s).ok_or(ProtoError::BadValue {
            key: "clocksource",
            value: s,
        })
    }
}

impl From<Clocksource> for String {
    fn from(c: Clocksource) -> String {
        c.0
    }
}

impl Clocksource {
    pub const MAX_LEN: usize = 32;

    /// Validates a name (surrounding whitespace, e.g. the sysfs newline, is trimmed).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
        ok.then(|| Clocksource(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Clocksource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the guest's kernel made of the platform the VMM presented, as PID 1 reads it
/// (`/proc/cpuinfo`, sysfs, the kernel log). The host compares it with what it configured
/// ([`crate::platform::CpuPlatform`]: P packages of N/P single-threaded cores for N vCPUs).
/// All zero / `None` when not read.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestPlatform {
    /// Distinct `physical id`s over all CPUs.
    pub packages: u32,
    /// `cpu cores` of the boot CPU.
    pub cores_per_package: u32,
    /// `siblings` / `cpu cores` of the boot CPU.
    pub threads_per_core: u32,
    /// CPU flag `tsc_deadline_timer`: the LAPIC timer needs no calibration.
    pub tsc_deadline_timer: bool,
    /// CPU flag `constant_tsc`.
    pub constant_tsc: bool,
    /// CPU flag `nonstop_tsc`.
    pub nonstop_tsc: bool,
    /// The kernel logged `Marking TSC unstable`.
    pub tsc_unstable: bool,
    /// The clocksource in use.
    pub clocksource: Option<Clocksource>,
}

impl GuestPlatform {
    /// True when the guest saw `packages` packages of `cores_per_package` cores with one
    /// thread each.
    pub fn topology_is(&self, packages: u32, cores_per_package: u32) -> bool {
        self.packages == packages
            && self.cores_per_package == cores_per_package
            && self.threads_per_core == 1
    }
}

/// The guest's one structured record, sent after the workload (or after a failure).
/// Timestamps are the guest's CLOCK_MONOTONIC (ns since guest boot); 0 = not reached.
/// The same typed value travels on: guest → TC1 line → VMM report JSON → bench row.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestRecord {
    /// `None` when the boot id could not be read.
    pub boot_id: Option<BootId>,
    /// Guest uptime when PID 1 started: kernel boot time.
    pub t_init_ns: u64,
    /// Guest uptime at the ready doorbell.
    pub t_ready_ns: u64,
    /// Guest uptime when the reply was sent.
    pub t_reply_ns: u64,
    /// Guest uptime when this record was built.
    pub t_record_ns: u64,
    /// `truecold.mem` as the guest parsed it (bytes).
    pub mem_configured: u64,
    /// Sum of "System RAM" in /sys/firmware/memmap (bytes).
    pub mem_firmware_ram: u64,
    /// MemTotal from /proc/meminfo (bytes).
    pub mem_total: u64,
    /// Σpresent × 4096 over every zone of /proc/zoneinfo (bytes): the RAM the kernel put in
    /// its zones (`truecold_proto::layout::check_zones`). 0 when not read; a record without
    /// it (written before the field existed) reads as 0, and one with 0 is written without it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_present: u64,
    /// Σmanaged × 4096 over the same zones (bytes): what the kernel handed to its page
    /// allocator. 0 when not read, absent as [`GuestRecord::mem_present`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_managed: u64,
    /// Bytes allocated, pattern-written and read back by the probe.
    pub mem_probe: u64,
    /// Online CPUs the guest sees.
    pub cpus: u32,
    /// The platform as the guest's kernel saw it.
    pub platform: GuestPlatform,
    pub workload: Workload,
    pub code: ErrorCode,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
