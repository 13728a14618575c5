//! The kernel command line as the guest reads it: the keys (`truecold.<key>=<value>`), the
//! faults a test may inject, and the strict parser of `/proc/cmdline` ([`GuestConfig`]).
//! The host writes the same keys through [`crate::boot_cmdline`].

use crate::kinds;
use crate::wire::ProtoError;

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
/// Reliability tests only ([`GuestFault`]): PID 1 fails on purpose right after
/// reading its configuration. Never on a measured boot's command line.
pub const FAULT: &str = "truecold.fault";
/// `1`: the parity contract's workspace: mount [`crate::parity::WORKSPACE_DEVICE`]
/// (ext4) at [`crate::parity::WORKSPACE_MOUNT`], check its seed file, and after the
/// workload write, read back, hash and delete a file there. `0` or absent: no workspace.
pub const WORKSPACE: &str = "truecold.workspace";
/// Default probe size: 4 MiB.
pub const DEFAULT_PROBE: u64 = 4 << 20;

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
    /// [`RAM_LAYOUT`].
    pub ram_layout: kinds::RamLayout,
    /// [`ATTRIBUTION`].
    pub attribution: bool,
    /// [`FAULT`].
    pub fault: Option<GuestFault>,
    /// [`WORKSPACE`].
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
        // A command line without the word: `RamLayout::ABSENT`.
        let ram_layout = kinds::RamLayout::or_absent(ram_layout);
        // The layout is truecold-vmm's: a peer lays RAM out its own way.
        if !ram_layout.is_absent() && engine != kinds::Engine::Truecold {
            return Err(ProtoError::BadCmdline(format!(
                "{}={ram_layout} under {}={engine}",
                RAM_LAYOUT, ENGINE
            )));
        }
        Ok(GuestConfig {
            mem: mem.ok_or(ProtoError::MissingKey("truecold.mem"))?,
            probe: probe.unwrap_or(DEFAULT_PROBE),
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
