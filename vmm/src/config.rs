//! What to boot.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::{RamLayout, Transport};
use truecold_proto::limits::GuestMem;
use truecold_proto::parity::NetPair;

use crate::host::HostKind;
use crate::memory::Backing;
use crate::virtio::rate::DeviceLimits;

/// Where the kernel comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelSource {
    File(PathBuf),
    /// The embedded probe guest.
    Probe,
    /// The embedded probe guest built never to ring (deadline tests).
    ProbeSilent,
    /// The embedded probe guest without a PVH note (64-bit boot protocol).
    ProbeLinux64,
    /// The embedded probe guest touching one byte per GiB instead of per 2 MiB.
    ProbeSparse,
}

/// One boot's configuration (also echoed in the report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootConfig {
    pub kernel: KernelSource,
    pub initramfs: Option<PathBuf>,
    pub vcpus: u8,
    /// Guest memory (`mem_mib` in the report's JSON, whole MiB).
    #[serde(rename = "mem_mib", with = "truecold_proto::limits::serde_mib")]
    pub mem: GuestMem,
    pub backing: Backing,
    /// How guest RAM is laid out around the legacy hole (`--ram-layout`; left out of the
    /// JSON exactly for [`RamLayout::ABSENT`], which a report without it means, so reports
    /// written before the layouts keep their bytes and their meaning).
    #[serde(
        default = "RamLayout::absent",
        skip_serializing_if = "RamLayout::is_absent"
    )]
    pub ram_layout: RamLayout,
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
    /// The parity contract's virtio devices (none by default; left out of the JSON when
    /// none, so reports without them keep their bytes).
    #[serde(default, skip_serializing_if = "VirtioConfig::is_empty")]
    pub virtio: VirtioConfig,
    /// Host-side RIP sampling of the guest every this many µs (`--sample-rip-us`; off by
    /// default and then left out of the JSON, so reports without it keep their bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rip_us: Option<truecold_proto::rip::SamplePeriod>,
    /// With RIP sampling: each sample also walks the guest kernel's frame-pointer chain
    /// (`--sample-stacks`, `crate::unwind`); off by default and then left out of the JSON.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sample_stacks: bool,
    /// Each vCPU thread pinned to a CPU of its own (`--pin-vcpus`, [`crate::pin`]); off by
    /// default and then left out of the JSON, so reports without it keep their bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pin_vcpus: bool,
    /// How the vCPUs are presented: packages and the invariant-TSC statement
    /// (`--packages`, `--invariant-tsc`, [`crate::cpuid`]); left out of the JSON at the
    /// default (one package, the host's bit), so reports without it keep their bytes.
    #[serde(
        default = "truecold_proto::platform::CpuPlatform::absent",
        skip_serializing_if = "truecold_proto::platform::CpuPlatform::is_absent"
    )]
    pub cpu_platform: truecold_proto::platform::CpuPlatform,
}

/// The virtio devices asked for (`--workspace`, `--tap`/`--net-pair`, `--vsock-uds`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtioConfig {
    /// virtio-blk over this image, opened read-write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// virtio-net over a new tap of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<String>,
    /// The tap's host address and the guest's (`<host>,<guest>`, one /30).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "net_pair_text"
    )]
    pub net_pair: Option<NetPair>,
    /// virtio-vsock, hybrid: a guest connection to port P goes to `<vsock_uds>_<P>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vsock_uds: Option<PathBuf>,
    /// Each device's rate limit (left out of the JSON at the defaults, so reports keep their
    /// bytes).
    #[serde(default, skip_serializing_if = "DeviceLimits::is_default")]
    pub limits: DeviceLimits,
}

impl VirtioConfig {
    pub fn is_empty(&self) -> bool {
        self == &VirtioConfig::default()
    }

    /// The devices, in MMIO-window order: blk (the workspace: the guest's first disk),
    /// net, vsock — each only when asked for.
    pub fn device_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.workspace.is_some() {
            v.push("blk");
        }
        if self.tap.is_some() {
            v.push("net");
        }
        if self.vsock_uds.is_some() {
            v.push("vsock");
        }
        v
    }
}

/// `Option<NetPair>` as its text `<host>,<guest>`.
mod net_pair_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use truecold_proto::parity::NetPair;

    pub fn serialize<S: Serializer>(v: &Option<NetPair>, s: S) -> Result<S::Ok, S::Error> {
        v.map(|p| p.to_string()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NetPair>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| NetPair::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
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
    /// The probe guest with `mem` of memory and `vcpus` vCPUs, defaults elsewhere.
    pub fn probe(vcpus: u8, mem: GuestMem, backing: Backing) -> Self {
        BootConfig {
            kernel: KernelSource::Probe,
            initramfs: None,
            vcpus,
            mem,
            backing,
            ram_layout: RamLayout::default_for(mem),
            cmdline_extra: String::new(),
            deadline: Deadline::AfterBootStartMs(10_000),
            console: false,
            transport: Transport::Ports,
            request_ns: None,
            force: false,
            host_kind: None,
            virtio: VirtioConfig::default(),
            sample_rip_us: None,
            sample_stacks: false,
            pin_vcpus: false,
            cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
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

    #[test]
    fn virtio_config_round_trips_and_is_absent_when_empty() {
        let mut cfg = BootConfig::probe(
            1,
            truecold_proto::limits::GuestMem::from_mib(128).unwrap(),
            Backing::Anon,
        );
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(!json.contains("virtio"), "{json}");
        assert!(!json.contains("sample_rip"), "{json}");
        let mut sampled = cfg.clone();
        sampled.sample_rip_us = Some(truecold_proto::rip::SamplePeriod::from_us(250).unwrap());
        let j = serde_json::to_string(&sampled).unwrap();
        assert!(j.contains(r#""sample_rip_us":250"#), "{j}");
        assert_eq!(serde_json::from_str::<BootConfig>(&j).unwrap(), sampled);
        assert!(serde_json::from_str::<BootConfig>(&j.replace(":250", ":3")).is_err());
        cfg.virtio = VirtioConfig {
            workspace: Some("/w.img".into()),
            tap: Some("tc0".into()),
            net_pair: Some(NetPair::for_slot(1).unwrap()),
            vsock_uds: Some("/run/v.sock".into()),
            ..VirtioConfig::default()
        };
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(
            json.contains(r#""net_pair":"10.200.0.5,10.200.0.6""#),
            "{json}"
        );
        // The default limits are left out; a limit set is echoed in the flag syntax.
        assert!(!json.contains("limits"), "{json}");
        assert_eq!(serde_json::from_str::<BootConfig>(&json).unwrap(), cfg);
        cfg.virtio.limits.blk = crate::virtio::rate::RateLimit::UNLIMITED;
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(json.contains(r#""blk":"off""#), "{json}");
        assert_eq!(serde_json::from_str::<BootConfig>(&json).unwrap(), cfg);
        let bad = json.replace("10.200.0.6", "10.200.0.9");
        assert!(serde_json::from_str::<BootConfig>(&bad).is_err());
    }
}
