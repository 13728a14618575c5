//! What to boot.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
    /// From the first KVM_RUN's thread start to giving up, milliseconds.
    pub deadline_ms: u64,
    /// Guest serial output to stderr (off by default: each byte is a VM exit).
    pub console: bool,
    /// The caller's request stamp (CLOCK_MONOTONIC ns).
    pub request_ns: Option<u64>,
    /// Boot a Linux kernel even on a PVM host.
    pub force: bool,
    /// Overrides host-kind detection.
    pub host_kind: Option<HostKind>,
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
            deadline_ms: 10_000,
            console: false,
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
