//! What to boot.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Transport;

use crate::host::HostKind;
use crate::loader::KernelSource;
use crate::memory::Backing;

/// One boot's configuration (also echoed in the report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootConfig {
    pub kernel: KernelSource,
    pub initramfs: Option<PathBuf>,
    pub vcpus: u8,
    pub mem_mib: u64,
    pub backing: Backing,
    pub cmdline_extra: String,
    /// When the VMM gives up on a guest that has not finished.
    pub deadline: Deadline,
    /// Guest serial output to stderr (off by default: each byte is a VM exit).
    pub console: bool,
    /// How the guest talks to the VMM: truecold's ports, or `TC1` lines on the 8250, which
    /// is then this process's stdin/stdout (a Linux guest only; not with `console`).
    pub transport: Transport,
    /// The caller's request stamp (CLOCK_MONOTONIC ns).
    pub request_ns: Option<u64>,
    /// Boot a Linux kernel even on a PVM host.
    pub force: bool,
    /// The host kind, given by the caller (the bench passes the kind it detected once per
    /// campaign): the VMM then does not detect it.
    pub host_kind: Option<HostKind>,
}

/// When the VMM gives up on a guest that has not finished: its run ends as `deadline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Deadline {
    /// This many milliseconds after the VMM's `boot_start` stamp (`--deadline-ms`, for
    /// manual use).
    AfterBootStartMs(u64),
    /// At this CLOCK_MONOTONIC instant, ns (`--deadline-at-ns`). The bench passes its request
    /// stamp + the campaign's deadline: the instant its kill and its classifier also use.
    AtNs(u64),
}

impl Deadline {
    /// The absolute instant (CLOCK_MONOTONIC ns) for a boot that started at `boot_start_ns`.
    pub fn at_ns(self, boot_start_ns: u64) -> u64 {
        match self {
            Deadline::AfterBootStartMs(ms) => {
                boot_start_ns.saturating_add(ms.saturating_mul(1_000_000))
            }
            Deadline::AtNs(at) => at,
        }
    }

    /// The budget in milliseconds, as a failure reports it: the configured value for
    /// [`Deadline::AfterBootStartMs`]; for [`Deadline::AtNs`], from `origin_ns` (the request
    /// stamp when the caller gave one, else `boot_start`) to the instant, rounded up.
    pub fn budget_ms(self, origin_ns: u64) -> u64 {
        match self {
            Deadline::AfterBootStartMs(ms) => ms,
            Deadline::AtNs(at) => at.saturating_sub(origin_ns).div_ceil(1_000_000),
        }
    }
}

impl BootConfig {
    /// The probe guest at `mem_mib` MiB with `vcpus` vCPUs, defaults elsewhere.
    pub fn probe(vcpus: u8, mem_mib: u64, backing: Backing) -> Self {
        BootConfig {
            kernel: KernelSource::Probe,
            initramfs: None,
            vcpus,
            mem_mib,
            backing,
            cmdline_extra: String::new(),
            deadline: Deadline::AfterBootStartMs(10_000),
            console: false,
            transport: Transport::Ports,
            request_ns: None,
            force: false,
            host_kind: None,
        }
    }

    /// True when the guest is the embedded probe.
    pub fn is_probe(&self) -> bool {
        !matches!(self.kernel, KernelSource::File(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_instants() {
        let d = Deadline::AfterBootStartMs(300);
        assert_eq!(d.at_ns(1_000), 1_000 + 300_000_000);
        assert_eq!(d.budget_ms(5), 300);
        assert_eq!(
            Deadline::AfterBootStartMs(u64::MAX).at_ns(7),
            u64::MAX,
            "saturates"
        );
        let a = Deadline::AtNs(2_500_000_001);
        assert_eq!(
            a.at_ns(123),
            2_500_000_001,
            "absolute: the start does not move it"
        );
        assert_eq!(a.budget_ms(500_000_001), 2_000);
        assert_eq!(a.budget_ms(500_000_000), 2_001, "rounded up");
        assert_eq!(a.budget_ms(u64::MAX), 0, "already past");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#"{"at-ns":2500000001}"#);
        assert_eq!(serde_json::from_str::<Deadline>(&json).unwrap(), a);
    }
}
