//! The codes a guest writes to the ports ([`Phase`] on the doorbell, [`ErrorCode`] on the
//! exit port and in its record) and every way a line or a code fails to decode
//! ([`ProtoError`]).

use core::fmt;

use super::ports::{LINE_TAG, MAX_LINE};

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

/// Why the guest stopped: the byte written to [`PORT_EXIT`](super::PORT_EXIT) and the `code` of a record.
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
    /// `MemTotal` is outside the calibrated bound of `truecold.mem`
    /// (`truecold_proto::layout::memtotal_bounds`): what guests whose records carry no zone
    /// figures checked. A guest that reads the zones fails with 45 to 48 instead.
    MemTotalOutOfBounds = 43,
    /// The allocate/touch/read-back probe failed.
    MemProbe = 44,
    /// `/proc/zoneinfo` could not be read or parsed (`truecold_proto::zoneinfo`).
    MemZoneinfoUnreadable = 45,
    /// The kernel's zones do not hold the firmware map's RAM less the kernel's named trims:
    /// Σpresent × 4096 ≠ System RAM − T (`truecold_proto::layout::check_zones`).
    MemPresentMismatch = 46,
    /// `MemTotal` ≠ Σmanaged × 4096.
    MemTotalNotManaged = 47,
    /// Σmanaged > Σpresent.
    MemManagedAbovePresent = 48,
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
    /// PID 1 panicked; its panic hook wrote this code to [`PORT_EXIT`](super::PORT_EXIT) before powering off.
    /// No record follows.
    Panic = 90,
}

impl ErrorCode {
    /// All codes, for tables and exhaustive tests.
    pub const ALL: [ErrorCode; 31] = [
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
        ErrorCode::MemZoneinfoUnreadable,
        ErrorCode::MemPresentMismatch,
        ErrorCode::MemTotalNotManaged,
        ErrorCode::MemManagedAbovePresent,
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
            ErrorCode::MemZoneinfoUnreadable => "mem_zoneinfo_unreadable",
            ErrorCode::MemPresentMismatch => "mem_present_mismatch",
            ErrorCode::MemTotalNotManaged => "mem_total_not_managed",
            ErrorCode::MemManagedAbovePresent => "mem_managed_above_present",
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
