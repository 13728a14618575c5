//! The one error type of the guest's steps; each variant maps to its wire [`ErrorCode`].

use std::io;
use truecold_init::exchange::{ExchangeError, TcpProofError};
use truecold_init::roundtrip::RoundTripError;
use truecold_init::{NonceLineError, ParseError, RamMismatch};
use truecold_proto::layout::ZoneError;
use truecold_proto::zoneinfo::ZoneinfoError;
use truecold_proto::{ErrorCode, ProtoError};

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("ioperm for the truecold ports")]
    Ioperm(#[source] io::Error),
    #[error("mounting {fstype} on {target}")]
    Mount {
        code: ErrorCode,
        fstype: &'static str,
        target: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("reading {path}")]
    Read {
        code: ErrorCode,
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("boot id `{0}` is not a UUID")]
    BadBootId(String),
    #[error("kernel command line")]
    Cmdline(#[source] ProtoError),
    #[error("parsing {what}")]
    Parse {
        code: ErrorCode,
        what: &'static str,
        #[source]
        source: ParseError,
    },
    #[error("firmware memmap breaks the exact-RAM rule")]
    MemFirmwareMismatch(#[source] RamMismatch),
    #[error("parsing /proc/zoneinfo")]
    Zoneinfo(#[source] ZoneinfoError),
    #[error("the kernel's zones break the zone rule")]
    Zones(#[source] ZoneError),
    #[error("probe of {bytes} bytes: mmap")]
    ProbeMap {
        bytes: u64,
        #[source]
        source: io::Error,
    },
    #[error("probe read back a wrong word at byte offset {offset}")]
    ProbeMismatch { offset: u64 },
    #[error("serial transport: {step} on ttyS0")]
    Serial {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("agent channel: the host's line is not a `TC1 nonce` line")]
    BadNonce(#[source] NonceLineError),
    #[error("vsock transport: {step}")]
    Vsock {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("bringing loopback up")]
    Loopback(#[source] io::Error),
    #[error("configuring network `{spec}`")]
    Network {
        spec: String,
        #[source]
        source: io::Error,
    },
    #[error("workload step `{step}`")]
    Workload {
        code: ErrorCode,
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("workload read back {got} bytes whose SHA-256 differs from the payload's")]
    WorkloadDigest { got: usize },
    #[error("workload file still present after delete")]
    WorkloadStillPresent,
    #[error("workspace: {step}")]
    WorkspaceMount {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("workspace: the seed file's {got} bytes are not the image's seed")]
    WorkspaceSeed { got: usize },
    #[error("the TCP proof")]
    Tcp(#[source] TcpProofError),
    #[error("workspace workload")]
    Workspace(#[source] RoundTripError),
}

impl InitError {
    /// A failed exchange on an agent channel (serial or vsock): the host's line not being the
    /// nonce is `bad_nonce`; an I/O failure, or the stream ending before the line, is the
    /// channel's own error (`io`: `serial` / `vsock`).
    pub fn agent(e: ExchangeError, io: impl FnOnce(&'static str, io::Error) -> InitError) -> Self {
        match e {
            ExchangeError::Io { step, source } => io(step, source),
            ExchangeError::Eof => io("read", io::ErrorKind::UnexpectedEof.into()),
            ExchangeError::BadNonce(n) => InitError::BadNonce(n),
        }
    }

    /// The code the host sees for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            InitError::Ioperm(_) => ErrorCode::Challenge,
            InitError::Mount { code, .. }
            | InitError::Read { code, .. }
            | InitError::Parse { code, .. }
            | InitError::Workload { code, .. } => *code,
            InitError::BadBootId(_) => ErrorCode::BootId,
            InitError::Cmdline(_) => ErrorCode::Cmdline,
            InitError::MemFirmwareMismatch(_) => ErrorCode::MemFirmwareMismatch,
            InitError::Zoneinfo(_) => ErrorCode::MemZoneinfoUnreadable,
            InitError::Zones(ZoneError::Present { .. }) => ErrorCode::MemPresentMismatch,
            InitError::Zones(ZoneError::Managed { .. }) => ErrorCode::MemTotalNotManaged,
            InitError::Zones(ZoneError::ManagedAbovePresent { .. }) => {
                ErrorCode::MemManagedAbovePresent
            }
            InitError::ProbeMap { .. } | InitError::ProbeMismatch { .. } => ErrorCode::MemProbe,
            InitError::Serial { .. } => ErrorCode::Serial,
            InitError::BadNonce(_) => ErrorCode::BadNonce,
            InitError::Vsock { .. } => ErrorCode::Vsock,
            InitError::Loopback(_) => ErrorCode::Loopback,
            InitError::Network { .. } => ErrorCode::Network,
            InitError::WorkloadDigest { .. } => ErrorCode::WorkloadDigest,
            InitError::WorkloadStillPresent => ErrorCode::WorkloadStillPresent,
            InitError::WorkspaceMount { .. } | InitError::WorkspaceSeed { .. } => {
                ErrorCode::WorkspaceMount
            }
            InitError::Tcp(_) => ErrorCode::Tcp,
            InitError::Workspace(_) => ErrorCode::Workspace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn io() -> io::Error {
        io::ErrorKind::Other.into()
    }

    /// Each parity failure reaches the host as its own code.
    #[test]
    fn parity_failures_have_their_own_codes() {
        for (e, want) in [
            (
                InitError::WorkspaceMount {
                    step: "mount",
                    source: io(),
                },
                ErrorCode::WorkspaceMount,
            ),
            (
                InitError::WorkspaceSeed { got: 3 },
                ErrorCode::WorkspaceMount,
            ),
            (
                InitError::Vsock {
                    step: "connect",
                    source: io(),
                },
                ErrorCode::Vsock,
            ),
            (
                InitError::Tcp(TcpProofError::NoConnection(Duration::from_secs(10))),
                ErrorCode::Tcp,
            ),
            (
                InitError::Tcp(TcpProofError::Exchange(ExchangeError::Eof)),
                ErrorCode::Tcp,
            ),
            (
                InitError::Workspace(RoundTripError::Digest { got: 1 }),
                ErrorCode::Workspace,
            ),
            (
                InitError::BadNonce(NonceLineError::TooLong),
                ErrorCode::BadNonce,
            ),
        ] {
            assert_eq!(e.code(), want, "{e:?}");
        }
    }

    /// Each way the zone rule fails reaches the host as its own code; code 43 (the
    /// calibrated MemTotal bound) is no longer sent.
    #[test]
    fn zone_rule_failures_have_their_own_codes() {
        let (p, m) = (1 << 30, 1 << 29);
        let codes: Vec<ErrorCode> = [
            InitError::Zoneinfo(ZoneinfoError::NoZones),
            InitError::Zones(ZoneError::Present {
                present: p,
                firmware_ram: p,
                trim: 4096,
            }),
            InitError::Zones(ZoneError::Managed {
                mem_total: m,
                managed: m + 4096,
            }),
            InitError::Zones(ZoneError::ManagedAbovePresent {
                present: m,
                managed: p,
            }),
        ]
        .iter()
        .map(InitError::code)
        .collect();
        assert_eq!(
            codes,
            [
                ErrorCode::MemZoneinfoUnreadable,
                ErrorCode::MemPresentMismatch,
                ErrorCode::MemTotalNotManaged,
                ErrorCode::MemManagedAbovePresent
            ]
        );
        assert!(!codes.contains(&ErrorCode::MemTotalOutOfBounds));
    }

    #[test]
    fn agent_channel_failures_map_to_the_channel_or_bad_nonce() {
        let vsock = |step, source| InitError::Vsock { step, source };
        let serial = |step, source| InitError::Serial { step, source };
        let eof = InitError::agent(ExchangeError::Eof, vsock);
        assert_eq!(eof.code(), ErrorCode::Vsock);
        let eof = InitError::agent(ExchangeError::Eof, serial);
        assert_eq!(eof.code(), ErrorCode::Serial);
        let bad = InitError::agent(ExchangeError::BadNonce(NonceLineError::TooLong), vsock);
        assert_eq!(bad.code(), ErrorCode::BadNonce);
        let w = ExchangeError::Io {
            step: "write",
            source: io(),
        };
        assert!(matches!(
            InitError::agent(w, vsock),
            InitError::Vsock { step: "write", .. }
        ));
    }
}
