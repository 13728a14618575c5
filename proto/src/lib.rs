//! The guest↔host wire protocol of truecold, defined once and used by both sides:
//! `guest-init` (the guest's PID 1) encodes, the VMM (and the QEMU stand-in in tests)
//! decodes. Everything the guest sends is untrusted input for the host, so every decoder
//! here is bounded, total (never panics) and returns a typed [`ProtoError`].
//!
//! # Transport: four byte-wide I/O ports
//! | port | direction | meaning |
//! |---|---|---|
//! | [`PORT_DOORBELL`] | `outb` | a [`Phase`] code; the VMM timestamps the VM exit |
//! | [`PORT_CHALLENGE`] | `insb` ×[`NONCE_LEN`] | the host's fresh nonce, chosen after the ready doorbell |
//! | [`PORT_RECORD`] | `outsb` | newline-terminated [`Message`] lines |
//! | [`PORT_EXIT`] | `outb` | final exit code; the VM stops (QEMU `isa-debug-exit` compatible) |
//!
//! The sequence a guest follows: `Phase::InitStart` doorbell → checks → `Phase::Ready`
//! doorbell → read nonce → `reply` line (its arrival is *strict-ready*) → workload →
//! `record` line → exit port.
//!
//! # Lines
//! A line is ASCII, at most [`MAX_LINE`] bytes including the final `\n`:
//! `TC1 <kind> key=value key=value …`. Keys are `[a-z0-9_]+`, values have no spaces.
//! Unknown keys are rejected, duplicate keys are rejected, missing keys are rejected.
#![deny(unsafe_code)]

pub mod boot_cmdline;
pub mod cpio;
pub mod limits;
pub mod path_io;
pub mod seed;

use core::fmt;
use sha2::{Digest, Sha256};

/// `outb`: one [`Phase`] byte.
pub const PORT_DOORBELL: u16 = 0x0f10;
/// `insb`: [`NONCE_LEN`] bytes of the host's nonce for this boot.
pub const PORT_CHALLENGE: u16 = 0x0f11;
/// `outsb`: bytes of [`Message`] lines.
pub const PORT_RECORD: u16 = 0x0f12;
/// `outb`: final exit code ([`ErrorCode`]); the host stops the VM.
pub const PORT_EXIT: u16 = 0x0f13;
/// First and last port of the truecold device, for exit dispatch.
pub const PORT_FIRST: u16 = PORT_DOORBELL;
/// See [`PORT_FIRST`].
pub const PORT_LAST: u16 = PORT_EXIT;

/// Bytes in the liveness nonce.
pub const NONCE_LEN: usize = 16;
/// Longest line, `\n` included.
pub const MAX_LINE: usize = 4096;
/// The version tag every line starts with.
pub const LINE_TAG: &str = "TC1";
/// Domain separator of the liveness binding.
const BINDING_DOMAIN: &[u8] = b"truecold-liveness-v1\0";

/// Doorbell codes, in the order a healthy guest rings them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// PID 1 has started (first instruction of `main`): the kernel→init split.
    InitStart = 1,
    /// Mounts, boot id, memory verification and networking are done.
    Ready = 2,
}

impl Phase {
    /// Decodes a doorbell byte.
    pub fn from_byte(b: u8) -> Result<Self, ProtoError> {
        match b {
            1 => Ok(Phase::InitStart),
            2 => Ok(Phase::Ready),
            other => Err(ProtoError::UnknownPhase(other)),
        }
    }
}

/// Why the guest stopped: the byte written to [`PORT_EXIT`] and the `code` of a record.
/// Each failing step of guest-init has its own code; 0 is success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
#[repr(u8)]
pub enum ErrorCode {
    Ok = 0,
    MountProc = 10,
    MountSys = 11,
    MountDev = 12,
    BootId = 20,
    Cmdline = 30,
    /// `/sys/firmware/memmap` could not be read or parsed.
    MemFirmwareUnreadable = 40,
    /// The firmware map breaks the exact-RAM rule: its System RAM does not equal
    /// `Engine::expected_firmware_ram(truecold.mem)`, or some System RAM lies in the engine's
    /// low-RAM hole (guest-init/README.md).
    MemFirmwareMismatch = 41,
    /// `/proc/meminfo` could not be read or parsed.
    MemInfoUnreadable = 42,
    /// `MemTotal` is outside the documented bound of `truecold.mem`.
    MemTotalOutOfBounds = 43,
    /// The allocate/touch/read-back probe failed.
    MemProbe = 44,
    Loopback = 50,
    Network = 51,
    /// Parity: the workspace disk could not be mounted, or its seed file is not the image's.
    WorkspaceMount = 52,
    /// Port access (ioperm) or the challenge exchange failed.
    Challenge = 60,
    /// Serial transport: ttyS0 could not be opened, set raw, read or written (or hung up).
    Serial = 61,
    /// Serial transport: the line read on ttyS0 after `ready` is not a valid `TC1 nonce` line
    /// (undecodable, another kind, or no `\n` within [`MAX_LINE`] bytes).
    BadNonce = 62,
    /// Vsock transport: the agent connection to the host could not be made, read or written.
    Vsock = 63,
    /// Parity: the TCP listener could not be set up, or the host's round trip over it failed.
    Tcp = 64,
    WorkloadWrite = 70,
    WorkloadRead = 71,
    WorkloadDigest = 72,
    WorkloadDelete = 73,
    WorkloadStillPresent = 74,
    /// Parity: writing, reading back, hashing or deleting the file in the workspace failed.
    Workspace = 75,
    Record = 80,
    /// PID 1 panicked; its panic hook wrote this code to [`PORT_EXIT`] before powering off.
    /// No record follows.
    Panic = 90,
}

impl ErrorCode {
    /// All codes, for tables and exhaustive tests.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::Ok,
        ErrorCode::MountProc,
        ErrorCode::MountSys,
        ErrorCode::MountDev,
        ErrorCode::BootId,
        ErrorCode::Cmdline,
        ErrorCode::MemFirmwareUnreadable,
        ErrorCode::MemFirmwareMismatch,
        ErrorCode::MemInfoUnreadable,
        ErrorCode::MemTotalOutOfBounds,
        ErrorCode::MemProbe,
        ErrorCode::Loopback,
        ErrorCode::Network,
        ErrorCode::WorkspaceMount,
        ErrorCode::Challenge,
        ErrorCode::Serial,
        ErrorCode::BadNonce,
        ErrorCode::Vsock,
        ErrorCode::Tcp,
        ErrorCode::WorkloadWrite,
        ErrorCode::WorkloadRead,
        ErrorCode::WorkloadDigest,
        ErrorCode::WorkloadDelete,
        ErrorCode::WorkloadStillPresent,
        ErrorCode::Workspace,
        ErrorCode::Record,
        ErrorCode::Panic,
    ];

    /// Decodes a code byte.
    pub fn from_byte(b: u8) -> Result<Self, ProtoError> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| *c as u8 == b)
            .ok_or(ProtoError::UnknownCode(b))
    }

    /// Looks a code up by [`ErrorCode::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.name() == s)
    }

    /// A stable snake_case name, used in records, CSV files and histograms.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Ok => "ok",
            ErrorCode::MountProc => "mount_proc",
            ErrorCode::MountSys => "mount_sys",
            ErrorCode::MountDev => "mount_dev",
            ErrorCode::BootId => "boot_id",
            ErrorCode::Cmdline => "cmdline",
            ErrorCode::MemFirmwareUnreadable => "mem_firmware_unreadable",
            ErrorCode::MemFirmwareMismatch => "mem_firmware_mismatch",
            ErrorCode::MemInfoUnreadable => "mem_info_unreadable",
            ErrorCode::MemTotalOutOfBounds => "mem_total_out_of_bounds",
            ErrorCode::MemProbe => "mem_probe",
            ErrorCode::Loopback => "loopback",
            ErrorCode::Network => "network",
            ErrorCode::WorkspaceMount => "workspace_mount",
            ErrorCode::Challenge => "challenge",
            ErrorCode::Serial => "serial",
            ErrorCode::BadNonce => "bad_nonce",
            ErrorCode::Vsock => "vsock",
            ErrorCode::Tcp => "tcp",
            ErrorCode::WorkloadWrite => "workload_write",
            ErrorCode::WorkloadRead => "workload_read",
            ErrorCode::WorkloadDigest => "workload_digest",
            ErrorCode::WorkloadDelete => "workload_delete",
            ErrorCode::WorkloadStillPresent => "workload_still_present",
            ErrorCode::Workspace => "workspace",
            ErrorCode::Record => "record",
            ErrorCode::Panic => "panic",
        }
    }
}

impl TryFrom<String> for ErrorCode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        ErrorCode::from_name(&s).ok_or_else(|| format!("unknown guest code `{s}`"))
    }
}

impl From<ErrorCode> for String {
    fn from(c: ErrorCode) -> String {
        c.name().to_string()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), *self as u8)
    }
}

/// Decoding failures. The guest is untrusted: every one of these is a typed outcome.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("unknown doorbell phase {0}")]
    UnknownPhase(u8),
    #[error("unknown guest error code {0}")]
    UnknownCode(u8),
    #[error("line longer than {MAX_LINE} bytes")]
    LineTooLong,
    #[error("line is not printable ASCII")]
    NotAscii,
    #[error("line does not start with `{LINE_TAG}`")]
    BadTag,
    #[error("unknown message kind `{0}`")]
    UnknownKind(String),
    #[error("malformed field `{0}` (want key=value)")]
    MalformedField(String),
    #[error("unknown key `{0}`")]
    UnknownKey(String),
    #[error("key `{0}` given twice")]
    DuplicateKey(String),
    #[error("missing key `{0}`")]
    MissingKey(&'static str),
    #[error("bad value for `{key}`: `{value}`")]
    BadValue { key: &'static str, value: String },
    #[error("malformed kernel command line parameter `{0}`")]
    BadCmdline(String),
    #[error("more than {max} `{what}` lines")]
    TooMany { what: &'static str, max: usize },
    #[error("a second `{0}` line")]
    Repeated(&'static str),
}

/// A guest boot id: the 36-character UUID from `/proc/sys/kernel/random/boot_id`.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct BootId([u8; 36]);

impl TryFrom<String> for BootId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        BootId::parse(&s)
            .ok_or_else(|| format!("`{s}` is not a boot id (8-4-4-4-12 lowercase hex)"))
    }
}

impl From<BootId> for String {
    fn from(b: BootId) -> String {
        b.as_str().to_string()
    }
}

impl BootId {
    /// Parses and validates `8-4-4-4-12` lowercase hex (trailing whitespace allowed).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim_end();
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        for (i, c) in b.iter().enumerate() {
            let dash = matches!(i, 8 | 13 | 18 | 23);
            let ok = if dash {
                *c == b'-'
            } else {
                c.is_ascii_digit() || (b'a'..=b'f').contains(c)
            };
            if !ok {
                return None;
            }
        }
        let mut out = [0u8; 36];
        out.copy_from_slice(b);
        Some(BootId(out))
    }

    /// The UUID text.
    pub fn as_str(&self) -> &str {
        // Constructed only from validated ASCII.
        core::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Debug for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootId({})", self.as_str())
    }
}

impl fmt::Display for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The liveness binding: an unkeyed SHA-256 over a domain tag, the host's nonce and the
/// guest's boot id. It is not a MAC (there is no key): it binds the answer to this fresh nonce
/// (so it cannot have been computed before the nonce existed) and to this boot id, and proves
/// nothing about *who* computed it.
/// Binds the reply to this nonce (fresh per boot) and this guest boot.
pub fn liveness_binding(nonce: &[u8; NONCE_LEN], boot_id: &BootId) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(BINDING_DOMAIN);
    h.update(nonce);
    h.update(boot_id.0);
    h.finalize().into()
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Decodes lowercase/uppercase hex of exactly `N` bytes.
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        let hi = (b[2 * i] as char).to_digit(16)?;
        let lo = (b[2 * i + 1] as char).to_digit(16)?;
        *o = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// The reply to the liveness challenge: its arrival at the host is strict-ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub boot_id: BootId,
    pub binding: [u8; 32],
}

impl Reply {
    /// Builds the reply for `nonce`.
    pub fn new(nonce: &[u8; NONCE_LEN], boot_id: BootId) -> Self {
        Reply {
            binding: liveness_binding(nonce, &boot_id),
            boot_id,
        }
    }

    /// True when the binding matches `nonce` and this reply's boot id.
    pub fn verifies(&self, nonce: &[u8; NONCE_LEN]) -> bool {
        liveness_binding(nonce, &self.boot_id) == self.binding
    }
}

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
/// (`/proc/cpuinfo`, sysfs, the kernel log). The host compares it with what it configured:
/// one package of N single-threaded cores for N vCPUs. All zero / `None` when not read.
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
    /// True when the guest saw one package of `vcpus` cores with one thread each.
    pub fn topology_is(&self, vcpus: u32) -> bool {
        self.packages == 1 && self.cores_per_package == vcpus && self.threads_per_core == 1
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
    /// Bytes allocated, pattern-written and read back by the probe.
    pub mem_probe: u64,
    /// Online CPUs the guest sees.
    pub cpus: u32,
    /// The platform as the guest's kernel saw it.
    pub platform: GuestPlatform,
    pub workload: Workload,
    pub code: ErrorCode,
}

/// A decoded line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Serial transport, guest → host: PID 1's checks passed (the ready doorbell's line).
    Ready {
        boot_id: BootId,
    },
    /// Serial transport, host → guest: the fresh nonce, written only after `ready` was read.
    Nonce([u8; NONCE_LEN]),
    Reply(Reply),
    Record(GuestRecord),
    /// An attribution boot's kernel-log trace, after the record ([`trace`]).
    Trace(trace::TraceLine),
}

const READY_KEYS: &[&str] = &["boot_id"];
const NONCE_KEYS: &[&str] = &["value"];
const REPLY_KEYS: &[&str] = &["boot_id", "binding"];
const KSYNC_KEYS: &[&str] = &["kmsg_us", "mono_ns", "records", "truncated"];
const INITCALL_KEYS: &[&str] = &["fn", "start_us", "dur_us", "ret"];
const KMARK_KEYS: &[&str] = &["name", "t_us"];
const RECORD_KEYS: &[&str] = &[
    "boot_id",
    "t_init_ns",
    "t_ready_ns",
    "t_reply_ns",
    "t_record_ns",
    "mem_configured",
    "mem_firmware_ram",
    "mem_total",
    "mem_probe",
    "cpus",
    "packages",
    "cores_per_package",
    "threads_per_core",
    "tsc_deadline_timer",
    "constant_tsc",
    "nonstop_tsc",
    "tsc_unstable",
    "clocksource",
    "workload",
    "code",
];

impl Message {
    /// Encodes as one line, `\n` included.
    pub fn encode(&self) -> String {
        match self {
            Message::Ready { boot_id } => format!("{LINE_TAG} ready boot_id={boot_id}\n"),
            Message::Nonce(n) => format!("{LINE_TAG} nonce value={}\n", hex(n)),
            Message::Reply(r) => format!(
                "{LINE_TAG} reply boot_id={} binding={}\n",
                r.boot_id,
                hex(&r.binding)
            ),
            Message::Record(r) => format!(
                "{LINE_TAG} record boot_id={} t_init_ns={} t_ready_ns={} t_reply_ns={} \
                 t_record_ns={} mem_configured={} mem_firmware_ram={} mem_total={} \
                 mem_probe={} cpus={} packages={} cores_per_package={} threads_per_core={} \
                 tsc_deadline_timer={} constant_tsc={} nonstop_tsc={} tsc_unstable={} \
                 clocksource={} workload={} code={}\n",
                r.boot_id
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "none".into()),
                r.t_init_ns,
                r.t_ready_ns,
                r.t_reply_ns,
                r.t_record_ns,
                r.mem_configured,
                r.mem_firmware_ram,
                r.mem_total,
                r.mem_probe,
                r.cpus,
                r.platform.packages,
                r.platform.cores_per_package,
                r.platform.threads_per_core,
                u8::from(r.platform.tsc_deadline_timer),
                u8::from(r.platform.constant_tsc),
                u8::from(r.platform.nonstop_tsc),
                u8::from(r.platform.tsc_unstable),
                r.platform
                    .clocksource
                    .as_ref()
                    .map_or("none", Clocksource::as_str),
                r.workload.encode(),
                r.code.name(),
            ),
            Message::Trace(trace::TraceLine::Sync(k)) => format!(
                "{LINE_TAG} ksync kmsg_us={} mono_ns={} records={} truncated={}\n",
                k.kmsg_us,
                k.mono_ns,
                k.records,
                u8::from(k.truncated)
            ),
            Message::Trace(trace::TraceLine::Initcall(c)) => format!(
                "{LINE_TAG} initcall fn={} start_us={} dur_us={} ret={}\n",
                c.func, c.start_us, c.dur_us, c.ret
            ),
            Message::Trace(trace::TraceLine::Mark(m)) => {
                format!("{LINE_TAG} kmark name={} t_us={}\n", m.name, m.t_us)
            }
        }
    }

    /// Decodes one line (with or without its trailing `\n`). Never panics.
    pub fn decode(line: &[u8]) -> Result<Message, ProtoError> {
        if line.len() > MAX_LINE {
            return Err(ProtoError::LineTooLong);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        if !line.iter().all(|c| (0x20..0x7f).contains(c)) {
            return Err(ProtoError::NotAscii);
        }
        let text = core::str::from_utf8(line).map_err(|_| ProtoError::NotAscii)?;
        let mut words = text.split(' ');
        if words.next() != Some(LINE_TAG) {
            return Err(ProtoError::BadTag);
        }
        let kind = words.next().unwrap_or("");
        let keys = match kind {
            "ready" => READY_KEYS,
            "nonce" => NONCE_KEYS,
            "reply" => REPLY_KEYS,
            "record" => RECORD_KEYS,
            "ksync" => KSYNC_KEYS,
            "initcall" => INITCALL_KEYS,
            "kmark" => KMARK_KEYS,
            other => return Err(ProtoError::UnknownKind(other.into())),
        };
        let mut vals: Vec<Option<&str>> = vec![None; keys.len()];
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| ProtoError::MalformedField(w.into()))?;
            let i = keys
                .iter()
                .position(|key| *key == k)
                .ok_or_else(|| ProtoError::UnknownKey(k.into()))?;
            if vals[i].replace(v).is_some() {
                return Err(ProtoError::DuplicateKey(k.into()));
            }
        }
        let get = |key: &'static str| -> Result<&str, ProtoError> {
            let i = keys.iter().position(|k| *k == key).unwrap_or(usize::MAX);
            vals.get(i)
                .copied()
                .flatten()
                .ok_or(ProtoError::MissingKey(key))
        };
        let bad = |key: &'static str, value: &str| ProtoError::BadValue {
            key,
            value: value.into(),
        };
        let num = |key: &'static str| -> Result<u64, ProtoError> {
            let v = get(key)?;
            if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad(key, v));
            }
            v.parse::<u64>().map_err(|_| bad(key, v))
        };
        match kind {
            "ready" => {
                let b = get("boot_id")?;
                let boot_id = BootId::parse(b).ok_or_else(|| bad("boot_id", b))?;
                Ok(Message::Ready { boot_id })
            }
            "nonce" => {
                let v = get("value")?;
                let n = unhex::<NONCE_LEN>(v).ok_or_else(|| bad("value", v))?;
                Ok(Message::Nonce(n))
            }
            "reply" => {
                let b = get("boot_id")?;
                let boot_id = BootId::parse(b).ok_or_else(|| bad("boot_id", b))?;
                let m = get("binding")?;
                let binding = unhex::<32>(m).ok_or_else(|| bad("binding", m))?;
                Ok(Message::Reply(Reply { boot_id, binding }))
            }
            "ksync" => Ok(Message::Trace(trace::TraceLine::Sync(trace::KmsgSync {
                kmsg_us: num("kmsg_us")?,
                mono_ns: num("mono_ns")?,
                records: num("records")?,
                truncated: match get("truncated")? {
                    "0" => false,
                    "1" => true,
                    v => return Err(bad("truncated", v)),
                },
            }))),
            "initcall" => {
                let f = get("fn")?;
                if !trace::valid_name(f) {
                    return Err(bad("fn", f));
                }
                let r = get("ret")?;
                let digits = r.strip_prefix('-').unwrap_or(r);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(bad("ret", r));
                }
                let ret = r.parse::<i64>().map_err(|_| bad("ret", r))?;
                Ok(Message::Trace(trace::TraceLine::Initcall(
                    trace::Initcall {
                        func: f.to_string(),
                        start_us: num("start_us")?,
                        dur_us: num("dur_us")?,
                        ret,
                    },
                )))
            }
            "kmark" => {
                let n = get("name")?;
                if !trace::KERNEL_MARKS.iter().any(|(k, _)| *k == n) {
                    return Err(bad("name", n));
                }
                Ok(Message::Trace(trace::TraceLine::Mark(trace::KernelMark {
                    name: n.to_string(),
                    t_us: num("t_us")?,
                })))
            }
            _ => {
                let b = get("boot_id")?;
                let boot_id = if b == "none" {
                    None
                } else {
                    Some(BootId::parse(b).ok_or_else(|| bad("boot_id", b))?)
                };
                let w = get("workload")?;
                let workload = Workload::decode(w).ok_or_else(|| bad("workload", w))?;
                let c = get("code")?;
                let code = ErrorCode::ALL
                    .iter()
                    .copied()
                    .find(|x| x.name() == c)
                    .ok_or_else(|| bad("code", c))?;
                let cpus = num("cpus")?;
                let count = |key: &'static str| -> Result<u32, ProtoError> {
                    u32::try_from(num(key)?).map_err(|_| bad(key, get(key).unwrap_or("")))
                };
                let flag = |key: &'static str| -> Result<bool, ProtoError> {
                    match get(key)? {
                        "0" => Ok(false),
                        "1" => Ok(true),
                        v => Err(bad(key, v)),
                    }
                };
                let cs = get("clocksource")?;
                let clocksource = match cs {
                    "none" => None,
                    v => Some(Clocksource::parse(v).ok_or_else(|| bad("clocksource", v))?),
                };
                let platform = GuestPlatform {
                    packages: count("packages")?,
                    cores_per_package: count("cores_per_package")?,
                    threads_per_core: count("threads_per_core")?,
                    tsc_deadline_timer: flag("tsc_deadline_timer")?,
                    constant_tsc: flag("constant_tsc")?,
                    nonstop_tsc: flag("nonstop_tsc")?,
                    tsc_unstable: flag("tsc_unstable")?,
                    clocksource,
                };
                Ok(Message::Record(GuestRecord {
                    boot_id,
                    t_init_ns: num("t_init_ns")?,
                    t_ready_ns: num("t_ready_ns")?,
                    t_reply_ns: num("t_reply_ns")?,
                    t_record_ns: num("t_record_ns")?,
                    mem_configured: num("mem_configured")?,
                    mem_firmware_ram: num("mem_firmware_ram")?,
                    mem_total: num("mem_total")?,
                    mem_probe: num("mem_probe")?,
                    cpus: u32::try_from(cpus)
                        .map_err(|_| bad("cpus", get("cpus").unwrap_or("")))?,
                    platform,
                    workload,
                    code,
                }))
            }
        }
    }
}

/// Splits a byte stream from [`PORT_RECORD`] into lines, bounded: a line longer than
/// [`MAX_LINE`] is reported once as [`ProtoError::LineTooLong`] and its bytes dropped
/// up to the next `\n`.
#[derive(Default, Debug)]
pub struct LineAssembler {
    buf: Vec<u8>,
    overflowed: bool,
}

impl LineAssembler {
    /// Feeds bytes; returns each complete line (without `\n`) or overflow error, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<Vec<u8>, ProtoError>> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                if self.overflowed {
                    out.push(Err(ProtoError::LineTooLong));
                } else {
                    out.push(Ok(core::mem::take(&mut self.buf)));
                }
                self.buf.clear();
                self.overflowed = false;
            } else if self.overflowed {
                continue;
            } else if self.buf.len() + 1 >= MAX_LINE {
                self.overflowed = true;
                self.buf.clear();
            } else {
                self.buf.push(b);
            }
        }
        out
    }

    /// Bytes of an unfinished line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The accepted range of `MemTotal` for `ram` bytes of firmware RAM whose highest byte is
/// below `top`. `MemTotal` counts the pages the kernel hands to its page allocator, so it
/// is at most `ram` and lower by what the kernel keeps for itself at boot:
/// - the `struct page` array: 64 bytes per 4 KiB page = `ram / 64`;
/// - the kernel image, early page tables, per-CPU areas, the log buffer and other
///   memblock allocations: a few MiB for this config, allowed 32 MiB;
/// - the swiotlb bounce buffer, 64 MiB, which x86-64 sets up when RAM reaches above 4 GiB.
///
/// Anything below that means RAM the firmware map announces but the kernel did not get.
pub fn memtotal_bounds(ram: u64, top: u64) -> (u64, u64) {
    let swiotlb = if top > 4 * GIB { 64 * MIB } else { 0 };
    let deficit = ram / 64 + 32 * MIB + swiotlb;
    (ram.saturating_sub(deficit), ram)
}

/// The guest's own `MemTotal` bound ([`memtotal_bounds`]) as a host can apply it knowing only
/// the configured size: RAM may reach above 4 GiB (and so the swiotlb allowance applies)
/// when more than 3 GiB − 1 MiB is configured (truecold: 640 KiB low RAM, then RAM from
/// 1 MiB up to the 32-bit hole at 3 GiB). A layout whose hole starts lower would need its own
/// threshold.
pub fn memtotal_bounds_for(configured: u64) -> (u64, u64) {
    let top = if configured > 3 * GIB - MIB {
        4 * GIB + 1
    } else {
        configured
    };
    memtotal_bounds(configured, top)
}

pub mod kinds;
pub mod layout;
pub mod measure;
pub mod parity;
pub mod report;
pub mod rip;
pub mod trace;
pub mod tune;

/// Kernel command line keys the guest reads (`truecold.<key>=<value>`).
pub mod cmdline {
    /// RAM the host configured, bytes (required).
    pub const MEM: &str = "truecold.mem";
    /// Bytes the memory usability probe allocates and touches (default [`DEFAULT_PROBE`]).
    pub const PROBE: &str = "truecold.probe";
    /// Optional network config for a device other than lo: `<dev>,<ipv4>/<prefix>`.
    pub const NET: &str = "truecold.net";
    /// The transport ([`crate::kinds::Transport`]; default `ports`).
    pub const TRANSPORT: &str = "truecold.transport";
    /// The engine whose E820 layout the exact-RAM rule uses ([`crate::kinds::Engine`];
    /// default `truecold`).
    pub const ENGINE: &str = "truecold.engine";
    /// truecold-vmm's RAM layout ([`crate::kinds::RamLayout`]; absent:
    /// [`crate::kinds::RamLayout::ABSENT`]), whose hole the exact-RAM rule uses under the
    /// truecold engine. truecold-vmm writes it for every other layout.
    pub const RAM_LAYOUT: &str = "truecold.ram_layout";
    /// `1`: an attribution boot (never a measured row): after the workload and its record,
    /// the guest reads `/dev/kmsg` and sends its trace ([`crate::trace`]); `0` or absent: not.
    pub const ATTRIBUTION: &str = "truecold.attribution";
    /// What the bench adds to an attribution boot's command line: `initcall_debug` (one
    /// `calling` / `returned` record per initcall), a log buffer large enough to keep every
    /// record from boot until guest-init reads it (tinyconfig's is 128 KiB), and
    /// [`ATTRIBUTION`]. The console stays as the base leaves it (off, `quiet loglevel=0`):
    /// the records go to the log buffer only. `/dev/kmsg` gives every record its printk
    /// time whatever `printk.time` says.
    pub const ATTRIBUTION_CMDLINE: &str = "initcall_debug log_buf_len=4M truecold.attribution=1";
    /// Reliability tests only ([`crate::GuestFault`]): PID 1 fails on purpose right after
    /// reading its configuration. Never on a measured boot's command line.
    pub const FAULT: &str = "truecold.fault";
    /// `1`: the parity contract's workspace: mount [`crate::parity::WORKSPACE_DEVICE`]
    /// (ext4) at [`crate::parity::WORKSPACE_MOUNT`], check its seed file, and after the
    /// workload write, read back, hash and delete a file there. `0` or absent: no workspace.
    pub const WORKSPACE: &str = "truecold.workspace";
    /// Default probe size: 4 MiB.
    pub const DEFAULT_PROBE: u64 = 4 << 20;
}

/// A fault PID 1 injects into its own boot (`truecold.fault=<name>`), so the host's handling
/// of a dying guest is tested end to end with the real kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestFault {
    /// `panic`: PID 1 panics (its hook reports the `panic` code, then stops the VM).
    Panic,
    /// `exit`: PID 1 exits without a word, so the kernel panics ("Attempted to kill init")
    /// and, with the base's `panic=-1 reboot=k`, resets the VM.
    Exit,
}

impl GuestFault {
    /// Parses a `truecold.fault` value.
    pub fn parse(v: &str) -> Option<GuestFault> {
        match v {
            "panic" => Some(GuestFault::Panic),
            "exit" => Some(GuestFault::Exit),
            _ => None,
        }
    }
}

/// What the guest takes from its kernel command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestConfig {
    pub mem: u64,
    pub probe: u64,
    pub net: Option<String>,
    pub transport: kinds::Transport,
    pub engine: kinds::Engine,
    /// [`cmdline::RAM_LAYOUT`].
    pub ram_layout: kinds::RamLayout,
    /// [`cmdline::ATTRIBUTION`].
    pub attribution: bool,
    /// [`cmdline::FAULT`].
    pub fault: Option<GuestFault>,
    /// [`cmdline::WORKSPACE`].
    pub workspace: bool,
}

impl GuestConfig {
    /// Parses `/proc/cmdline`. Other parameters are ignored; truecold ones are strict.
    pub fn from_cmdline(line: &str) -> Result<Self, ProtoError> {
        let mut mem = None;
        let mut probe = None;
        let mut net = None;
        let mut transport = None;
        let mut engine = None;
        let mut ram_layout = None;
        let mut attribution = None;
        let mut fault = None;
        let mut workspace = None;
        for word in line.split_ascii_whitespace() {
            let Some(rest) = word.strip_prefix("truecold.") else {
                continue;
            };
            let (k, v) = rest
                .split_once('=')
                .ok_or_else(|| ProtoError::BadCmdline(word.into()))?;
            let parse = |v: &str| -> Result<u64, ProtoError> {
                if v.is_empty() || !v.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(ProtoError::BadCmdline(word.into()));
                }
                v.parse().map_err(|_| ProtoError::BadCmdline(word.into()))
            };
            let dup = match k {
                "mem" => mem.replace(parse(v)?).is_some(),
                "probe" => probe.replace(parse(v)?).is_some(),
                "net" => net.replace(v.to_string()).is_some(),
                "transport" => transport
                    .replace(
                        kinds::Transport::parse(v)
                            .ok_or_else(|| ProtoError::BadCmdline(word.into()))?,
                    )
                    .is_some(),
                "engine" => engine
                    .replace(
                        kinds::Engine::parse(v).map_err(|_| ProtoError::BadCmdline(word.into()))?,
                    )
                    .is_some(),
                "ram_layout" => ram_layout
                    .replace(
                        kinds::RamLayout::parse(v)
                            .map_err(|_| ProtoError::BadCmdline(word.into()))?,
                    )
                    .is_some(),
                "attribution" => attribution
                    .replace(match v {
                        "0" => false,
                        "1" => true,
                        _ => return Err(ProtoError::BadCmdline(word.into())),
                    })
                    .is_some(),
                "workspace" => workspace
                    .replace(match v {
                        "0" => false,
                        "1" => true,
                        _ => return Err(ProtoError::BadCmdline(word.into())),
                    })
                    .is_some(),
                "fault" => fault
                    .replace(
                        GuestFault::parse(v).ok_or_else(|| ProtoError::BadCmdline(word.into()))?,
                    )
                    .is_some(),
                _ => return Err(ProtoError::BadCmdline(word.into())),
            };
            if dup {
                return Err(ProtoError::BadCmdline(word.into()));
            }
        }
        let engine = engine.unwrap_or(kinds::Engine::Truecold);
        // Absent: the layout of every command line written before the layouts existed.
        let ram_layout = kinds::RamLayout::or_absent(ram_layout);
        // The layout is truecold-vmm's: a peer lays RAM out its own way.
        if !ram_layout.is_absent() && engine != kinds::Engine::Truecold {
            return Err(ProtoError::BadCmdline(format!(
                "{}={ram_layout} under {}={engine}",
                cmdline::RAM_LAYOUT,
                cmdline::ENGINE
            )));
        }
        Ok(GuestConfig {
            mem: mem.ok_or(ProtoError::MissingKey("truecold.mem"))?,
            probe: probe.unwrap_or(cmdline::DEFAULT_PROBE),
            net,
            transport: transport.unwrap_or_default(),
            engine,
            ram_layout,
            attribution: attribution.unwrap_or(false),
            fault,
            workspace: workspace.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests;
