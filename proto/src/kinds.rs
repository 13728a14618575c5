//! The kinds every crate names the same way: what was booted ([`ContractKind`]), what the
//! host's KVM is ([`HostKind`]) and how launches were scheduled ([`Mode`]). Serde spellings
//! here are the bundle's and the VMM report's.

use serde::{Deserialize, Serialize};

/// Label of a Linux-boot campaign.
pub const LINUX_LABEL: &str = "Linux boot: request to strict-ready";
/// Label of a probe-guest campaign. Appears in every file of such a bundle.
pub const PROBE_LABEL: &str = "VMM floor (probe guest), not a Linux boot";

/// What was booted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractKind {
    /// A real Linux kernel to a verified userspace.
    Linux,
    /// The VMM's embedded probe guest: the VMM floor, not a Linux boot.
    Probe,
}

impl ContractKind {
    /// The human label written into every file of the bundle.
    pub fn label(self) -> &'static str {
        match self {
            ContractKind::Linux => LINUX_LABEL,
            ContractKind::Probe => PROBE_LABEL,
        }
    }

    /// The CSV spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractKind::Linux => "linux",
            ContractKind::Probe => "probe",
        }
    }

    /// Parses the CSV spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "linux" => Some(ContractKind::Linux),
            "probe" => Some(ContractKind::Probe),
            _ => None,
        }
    }
}

/// A VMM that boots the guest: an arm of an engines campaign (`truecold run --engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// `truecold-vmm`.
    Truecold,
    /// Firecracker, run as released (`--no-api --config-file`, seccomp on).
    Firecracker,
    /// Cloud Hypervisor, run as released (seccomp on).
    CloudHypervisor,
    /// QEMU's `microvm` machine with a PVH `-kernel`.
    QemuMicrovm,
}

impl Engine {
    /// Every engine, in the order the CLI lists them.
    pub const ALL: [Engine; 4] = [
        Engine::Truecold,
        Engine::Firecracker,
        Engine::CloudHypervisor,
        Engine::QemuMicrovm,
    ];

    /// The CLI, JSON, cmdline (`truecold.engine=`) and directory spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Truecold => "truecold",
            Engine::Firecracker => "firecracker",
            Engine::CloudHypervisor => "cloud-hypervisor",
            Engine::QemuMicrovm => "qemu-microvm",
        }
    }

    /// Parses [`Engine::as_str`] (a clap value parser).
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!("`{s}` is not one of truecold, firecracker, cloud-hypervisor, qemu-microvm")
            })
    }

    /// Why the engine cannot run the parity contract here (`None`: it can). QEMU's microvm:
    /// its only vsock device is vhost-vsock, which needs the host's `/dev/vhost-vsock` and
    /// which truecold does not drive.
    pub fn no_parity_launch(self) -> Option<&'static str> {
        match self {
            Engine::QemuMicrovm => Some(
                "QEMU's microvm has no parity launch: its vsock device is vhost-vsock only \
                 (the host's /dev/vhost-vsock), which truecold does not drive",
            ),
            Engine::Truecold | Engine::Firecracker | Engine::CloudHypervisor => None,
        }
    }

    /// Whether the engine's virtio devices are PCI functions only (Cloud Hypervisor v53.0:
    /// its virtio-MMIO transport was removed in v0.11), so a guest with virtio devices needs
    /// its PCI bus probed (no `pci=off`). truecold-vmm and Firecracker declare virtio-MMIO
    /// devices on the command line; QEMU's microvm offers both.
    pub fn virtio_pci_only(self) -> bool {
        self == Engine::CloudHypervisor
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How truecold-vmm lays `M` configured bytes out around the legacy hole
/// (`truecold-vmm boot --ram-layout`, `truecold run --ram-layout`, the guest's
/// `truecold.ram_layout=`, a bundle's `configuration.ram_layout`). Peers have their own
/// layouts ([`Engine::low_ram_hole`]); this names only truecold's. Where each layout puts RAM:
/// `crate::layout` (its `impl RamLayout`).
///
/// [`RamLayout::default_for`] is truecold-vmm's default (it depends on the guest's memory);
/// what a record that names no layout means is a separate, fixed thing: [`RamLayout::ABSENT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RamLayout {
    /// `M` bytes of RAM around the hole: `[0, 640 KiB)` and from 1 MiB, so RAM ends 384 KiB
    /// past `M` (the address space spans `M` + the hole). No reserved entry. What a record
    /// without a layout means ([`RamLayout::ABSENT`]), and `truecold tune`'s baseline.
    AroundHole,
    /// RAM ends at `M`: `[0, 640 KiB)` and `[1 MiB, M)` (above 3 GiB: the rest from 4 GiB),
    /// so RAM = `M` − 384 KiB and the hole, declared as one E820 reserved entry, makes up the
    /// difference — what Firecracker and Cloud Hypervisor do (the tune knob
    /// `ram-layout-hole-inside`). truecold-vmm's default below
    /// [`crate::layout::ABOVE_4G_DEFAULT_FROM_MIB`]: a confirmed tune winner at 2 vCPU /
    /// 16 GiB on THP and 2 vCPU / 1 GiB on anon (kernel-config/README.md).
    HoleInside,
    /// As `hole-inside` (RAM ends at `M`, the legacy hole declared reserved), but below 4 GiB
    /// only up to [`crate::layout::ABOVE_4G_LOW_TOP`] (256 MiB): the rest of RAM starts at 4 GiB, so the
    /// 32-bit gap spans `[256 MiB, 4 GiB)` instead of `[3 GiB, 4 GiB)`. Linux initialises
    /// the struct pages of its low zones (DMA, DMA32: everything below 4 GiB) on the boot CPU
    /// before the other CPUs start, and only the highest zone's in parallel, one thread per
    /// CPU (`DEFERRED_STRUCT_PAGE_INIT`); this layout moves all but 256 MiB into that zone.
    /// Neither Firecracker nor Cloud Hypervisor lays RAM out this way (both end low RAM at 3
    /// GiB). truecold-vmm's default from [`crate::layout::ABOVE_4G_DEFAULT_FROM_MIB`]
    /// (kernel-config/README.md: faster than `hole-inside` there, slower at 1 GiB).
    #[serde(rename = "above-4g")]
    Above4g,
}

impl RamLayout {
    /// Every layout, in the order the CLI lists them.
    pub const ALL: [RamLayout; 3] = [
        RamLayout::AroundHole,
        RamLayout::HoleInside,
        RamLayout::Above4g,
    ];

    /// The CLI, JSON and command-line (`truecold.ram_layout=`) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RamLayout::AroundHole => "around-hole",
            RamLayout::HoleInside => "hole-inside",
            RamLayout::Above4g => "above-4g",
        }
    }

    /// Parses [`RamLayout::as_str`] (a clap value parser).
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not one of around-hole, hole-inside, above-4g"))
    }

    /// What a record that names no layout means: `around-hole`, the layout of every record
    /// that has no layout field. Every reader of an absent layout — a bundle's
    /// `configuration.ram_layout`, the VMM report's `config.ram_layout`, a `cmdline.txt`
    /// line's `--ram-layout`, the guest's `truecold.ram_layout=` — resolves it to this, and
    /// every writer leaves the field out exactly for this layout
    /// ([`RamLayout::is_absent`]), so a record without the field reads as `around-hole`
    /// whatever [`RamLayout::default_for`] (truecold-vmm's default) gives.
    pub const ABSENT: RamLayout = RamLayout::AroundHole;

    /// [`RamLayout::ABSENT`] (a serde `default` function).
    pub fn absent() -> Self {
        Self::ABSENT
    }

    /// Whether a writer leaves this layout out of its record: it is
    /// [`RamLayout::ABSENT`] (a serde `skip_serializing_if` function).
    pub fn is_absent(&self) -> bool {
        *self == Self::ABSENT
    }

    /// A recorded layout, [`RamLayout::ABSENT`] when none was recorded.
    pub fn or_absent(recorded: Option<RamLayout>) -> Self {
        recorded.unwrap_or(Self::ABSENT)
    }
}

impl std::fmt::Display for RamLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the guest's PID 1 talks to the host (`truecold.transport=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// truecold's own ports: doorbells, the nonce by `rep insb`, the reply and record by
    /// `rep outsb`, the exit port. Only truecold-vmm has them.
    #[default]
    Ports,
    /// `TC1` lines on ttyS0 (the 8250 every engine has): `ready`, then the host's `nonce`,
    /// the `reply`, the `record`; then the exit port (truecold) and a reboot (`reboot=k`:
    /// the i8042 reset ends every engine). The doorbells are still rung (ignored where no
    /// device listens), so truecold's VM-exit marks exist beside the serial ones.
    Serial,
    /// The parity contract's agent channel: the same `TC1` lines on an AF_VSOCK stream from
    /// the guest to the host ([`crate::parity`]); the doorbells and the exit port as under
    /// `ports`. Only truecold-vmm has it so far (its hybrid vsock).
    Vsock,
}

impl Transport {
    /// The cmdline spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Ports => "ports",
            Transport::Serial => "serial",
            Transport::Vsock => "vsock",
        }
    }

    /// Parses [`Transport::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        [Transport::Ports, Transport::Serial, Transport::Vsock]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// Where strict-ready (and the record) are stamped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observer {
    /// truecold-vmm stamps them at the VM exit that completes the line on its record port.
    #[default]
    VmExit,
    /// The bench stamps them when it reads the verified line on the engine's serial output.
    Serial,
    /// The parity contract: the bench stamps them on the guest agent's channel (virtio-vsock,
    /// [`crate::parity`]): strict-ready when the agent's reply verified and the network proof
    /// (a TCP round trip to the guest over its tap) verified too.
    Agent,
}

impl Observer {
    /// The JSON and CSV spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Observer::VmExit => "vm-exit",
            Observer::Serial => "serial",
            Observer::Agent => "agent",
        }
    }

    /// Whether the bench (not the VM exit) stamps strict-ready and the record: it reads the
    /// guest's `TC1` lines on a stream (the serial line or the agent channel).
    pub fn bench_reads_lines(self) -> bool {
        matches!(self, Observer::Serial | Observer::Agent)
    }
}

/// What the host's `/dev/kvm` is.
///
/// Detection (the VMM's and the bench's I/O feeds [`HostKind::decide`]) in this order:
/// 1. an override (`--host-kind`, `TRUECOLD_HOST_KIND`) wins;
/// 2. CPUID leaf 0x4000_0000 reads `TCGTCGTCGTCG` (QEMU's software CPU) → `NestedEmulated`;
/// 3. `/sys/module/kvm_pvm` exists → `Pvm`;
/// 4. `vmx` or `svm` in /proc/cpuinfo → `Hardware`;
/// 5. otherwise `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKind {
    /// Hardware virtualization (VMX/SVM).
    Hardware,
    /// The `kvm_pvm` software backend.
    Pvm,
    /// KVM inside an emulated (TCG) L1: functional; its clock is QEMU's virtual clock.
    NestedEmulated,
    /// None of the above could be established.
    Unknown,
}

impl HostKind {
    /// Every kind.
    pub const ALL: [HostKind; 4] = [
        HostKind::Hardware,
        HostKind::Pvm,
        HostKind::NestedEmulated,
        HostKind::Unknown,
    ];

    /// The name used by the env var, the CLI and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            HostKind::Hardware => "hardware",
            HostKind::Pvm => "pvm",
            HostKind::NestedEmulated => "nested-emulated",
            HostKind::Unknown => "unknown",
        }
    }

    /// `--host-kind` values ([`HostKind::as_str`]): a command-line value parser.
    pub fn parse(s: &str) -> Result<HostKind, String> {
        HostKind::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = HostKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("`{s}` is not one of {}", names.join(", "))
        })
    }

    /// Parses [`HostKind::as_str`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.as_str() == s)
    }

    /// The clock a campaign on this host is measured on: the nested harness's L1 runs on
    /// QEMU's instruction-counting clock; every other host on wall time.
    pub fn clock(self) -> Clock {
        match self {
            HostKind::NestedEmulated => Clock::Virtual,
            HostKind::Hardware | HostKind::Pvm | HostKind::Unknown => Clock::Wall,
        }
    }

    /// Pure decision from the observed facts (see the type's docs).
    pub fn decide(
        forced: Option<HostKind>,
        hypervisor_signature: &str,
        pvm_module: bool,
        cpuinfo: &str,
    ) -> Self {
        if let Some(k) = forced {
            return k;
        }
        if hypervisor_signature == "TCGTCGTCGTCG" {
            return HostKind::NestedEmulated;
        }
        if pvm_module {
            return HostKind::Pvm;
        }
        let hw = cpuinfo
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
        if hw {
            HostKind::Hardware
        } else {
            HostKind::Unknown
        }
    }
}

/// The clock a campaign's durations are on: one per host kind ([`HostKind::clock`]), never
/// mixed in one comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// The host's CLOCK_MONOTONIC: hardware (or kvm_pvm) wall time.
    Wall,
    /// The nested harness: L1 runs under QEMU `-icount shift=0,sleep=off`, so its
    /// CLOCK_MONOTONIC counts emulated instructions (a reproducible cost model of the boot
    /// path, not a hardware latency).
    Virtual,
}

impl Clock {
    /// Both clocks.
    pub const ALL: [Clock; 2] = [Clock::Wall, Clock::Virtual];

    /// The JSON / CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Virtual => "virtual",
        }
    }

    /// Parses [`Clock::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// What the clock is, in the words every bundle, tune and bisect directory uses.
    pub fn describe(self) -> &'static str {
        match self {
            Clock::Wall => "wall (CLOCK_MONOTONIC on the host)",
            Clock::Virtual => {
                "virtual (QEMU icount: 1 ns per emulated instruction; idle time skips to the next \
                 timer)"
            }
        }
    }
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host kind in effect for a boot or a campaign, and what detection alone found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detection {
    /// The kind in effect (the override when there is one).
    pub kind: HostKind,
    /// What detection found from the host's own facts (`None`: not detected, the kind was
    /// given).
    pub detected: Option<HostKind>,
    /// Whether an override or the caller set `kind` (even to the detected value).
    pub forced: bool,
}

impl Detection {
    /// Pure: `forced` (if any) over `detected`.
    pub fn new(forced: Option<HostKind>, detected: HostKind) -> Self {
        Detection {
            kind: forced.unwrap_or(detected),
            detected: Some(detected),
            forced: forced.is_some(),
        }
    }

    /// Pure: the caller's `kind`, nothing detected.
    pub fn given(kind: HostKind) -> Self {
        Detection {
            kind,
            detected: None,
            forced: true,
        }
    }
}

impl std::fmt::Display for HostKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How guest RAM is backed on the host (what is requested: `--backing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backing {
    /// Anonymous private memory, 4 KiB pages, `MAP_NORESERVE`.
    Anon,
    /// Anonymous, `MAP_NORESERVE`, `madvise(MADV_HUGEPAGE)`.
    Thp,
    /// `MAP_HUGETLB | MAP_HUGE_2MB` from the host's hugetlb pool (reserved at mmap time).
    Hugetlb,
}

impl Backing {
    /// Every backing.
    pub const ALL: [Backing; 3] = [Backing::Anon, Backing::Thp, Backing::Hugetlb];

    /// The CLI and JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Backing::Anon => "anon",
            Backing::Thp => "thp",
            Backing::Hugetlb => "hugetlb",
        }
    }

    /// Parses [`Backing::as_str`] (a clap value parser).
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not one of anon, thp, hugetlb"))
    }

    /// The backing the probe guest gets when none is asked for: `anon`. The probe touches one
    /// byte per 2 MiB of guest memory, so under THP each touch would fault in (and zero) a
    /// whole huge page: the VMM floor would measure the host zeroing all of guest memory.
    pub const PROBE_DEFAULT: Backing = Backing::Anon;

    /// The backing `engine` gives a Linux guest when none is asked for — one definition for
    /// the bench, the VMM and the verifier:
    /// - truecold-vmm: `thp`, its tuned default (`truecold tune`'s confirmed winner:
    ///   −53.1 % at 2 vCPU / 16 GiB, `results/20261202T051636Z-tune-nested-linux-2vcpu-16384mib`;
    ///   −31.5 % at 1 vCPU / 1 GiB, `results/20261130T231914Z-tune-nested-linux-1vcpu-1024mib`);
    /// - Firecracker: `anon` (its machine-config `huge_pages` defaults to `None`, and it has
    ///   no THP option);
    /// - Cloud Hypervisor: `thp` (its `--memory` option's `thp` defaults to on:
    ///   `default_memoryconfig_thp` in v53.0's `vmm/src/vm_config.rs`);
    /// - QEMU: `anon` (plain anonymous RAM unless a memory backend says otherwise).
    ///
    /// No default is `hugetlb`: a pool is only ever needed because a user asked for it.
    pub fn linux_default(engine: Engine) -> Backing {
        match engine {
            Engine::Truecold | Engine::CloudHypervisor => Backing::Thp,
            Engine::Firecracker | Engine::QemuMicrovm => Backing::Anon,
        }
    }

    /// The backing `engine` gives the guest when none is asked for: [`Backing::linux_default`]
    /// for a Linux guest, [`Backing::PROBE_DEFAULT`] for the probe.
    pub fn default_for(engine: Engine, linux: bool) -> Backing {
        if linux {
            Backing::linux_default(engine)
        } else {
            Backing::PROBE_DEFAULT
        }
    }

    /// The `KernelPageSize` (smaps) of guest memory with this backing: 4 KiB for `anon` and
    /// `thp` (a THP mapping still reports 4 kB; its huge pages show in `AnonHugePages`),
    /// 2 MiB for `hugetlb`.
    pub fn page_size(self) -> u64 {
        match self {
            Backing::Anon | Backing::Thp => 4096,
            Backing::Hugetlb => 2 << 20,
        }
    }

    /// What the VMM observes when it got exactly this backing.
    pub fn expected_obtained(self) -> ObtainedBacking {
        match self {
            Backing::Anon => ObtainedBacking::Anon4k,
            Backing::Thp => ObtainedBacking::Thp,
            Backing::Hugetlb => ObtainedBacking::Hugetlb2m,
        }
    }
}

impl std::fmt::Display for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The backing the VMM observed it got (from /proc/self/smaps, after the boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ObtainedBacking {
    /// 4 KiB pages.
    #[serde(rename = "anon-4k")]
    Anon4k,
    /// Some transparent huge pages faulted in.
    #[serde(rename = "thp")]
    Thp,
    /// THP advised, none faulted in.
    #[serde(rename = "thp-advised-none-faulted")]
    ThpAdvisedNoneFaulted,
    /// 2 MiB hugetlb pages.
    #[serde(rename = "hugetlb-2m")]
    Hugetlb2m,
    /// smaps could not be read.
    #[serde(rename = "unobserved")]
    Unobserved,
}

impl ObtainedBacking {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ObtainedBacking::Anon4k => "anon-4k",
            ObtainedBacking::Thp => "thp",
            ObtainedBacking::ThpAdvisedNoneFaulted => "thp-advised-none-faulted",
            ObtainedBacking::Hugetlb2m => "hugetlb-2m",
            ObtainedBacking::Unobserved => "unobserved",
        }
    }
}

impl std::fmt::Display for ObtainedBacking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How attempts were scheduled. All modes run under the same contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Mode {
    /// One at a time, each after the previous finished.
    Sequential { count: u64 },
    /// `count` boots all due at t0 (their intended request time), at most `concurrency`
    /// in flight.
    Burst { count: u64, concurrency: u32 },
    /// Fixed arrival rate; latency from each intended time (coordinated-omission safe).
    OpenLoop {
        count: u64,
        /// Arrivals per 1,000 seconds (integer, so 2.5/s is 2500).
        rate_per_ks: u64,
    },
    /// `per_level` boots at each concurrency 1..=`max_concurrency`.
    Sweep {
        max_concurrency: u32,
        per_level: u64,
    },
    /// create → ready → teardown cycles at `concurrency`.
    Churn { count: u64, concurrency: u32 },
}

impl Mode {
    /// The mode's name.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Sequential { .. } => "sequential",
            Mode::Burst { .. } => "burst",
            Mode::OpenLoop { .. } => "open_loop",
            Mode::Sweep { .. } => "sweep",
            Mode::Churn { .. } => "churn",
        }
    }

    /// Attempts a complete campaign of this mode makes.
    pub fn planned_attempts(&self) -> u64 {
        match self {
            Mode::Sequential { count }
            | Mode::Burst { count, .. }
            | Mode::OpenLoop { count, .. }
            | Mode::Churn { count, .. } => *count,
            Mode::Sweep {
                max_concurrency,
                per_level,
            } => u64::from(*max_concurrency).saturating_mul(*per_level),
        }
    }

    /// Whether samples of this mode carry an intended request time.
    pub fn has_intended_time(&self) -> bool {
        matches!(self, Mode::Burst { .. } | Mode::OpenLoop { .. })
    }

    /// Whether `c` is a valid value of a sample's `concurrency` column in this mode
    /// (open loop has no fixed concurrency and records 0).
    pub fn allows_concurrency(&self, c: u32) -> bool {
        match self {
            Mode::Sequential { .. } => c == 1,
            Mode::Burst { concurrency, .. } | Mode::Churn { concurrency, .. } => c == *concurrency,
            Mode::OpenLoop { .. } => c == 0,
            Mode::Sweep {
                max_concurrency, ..
            } => c >= 1 && c <= *max_concurrency,
        }
    }

    /// Plain words for the README.
    pub fn describe(&self) -> String {
        match self {
            Mode::Sequential { count } => {
                format!("sequential: {count} launches, one at a time")
            }
            Mode::Burst { count, concurrency } => format!(
                "burst: {count} launches all due at t0, at most {concurrency} in flight; \
                 latency from t0"
            ),
            Mode::OpenLoop { count, rate_per_ks } => format!(
                "open loop: {count} launches at {}.{:03} per second; latency from each \
                 intended start",
                rate_per_ks / 1000,
                rate_per_ks % 1000
            ),
            Mode::Sweep {
                max_concurrency,
                per_level,
            } => format!(
                "concurrency sweep: {per_level} launches at each concurrency 1..={max_concurrency}"
            ),
            Mode::Churn { count, concurrency } => {
                format!("churn: {count} create→ready→teardown cycles at concurrency {concurrency}")
            }
        }
    }
}

/// Why a launch is not a success: the `error_kind` column of a bundle row. Stable snake_case
/// spellings; the guest's own codes are `guest_<code name>` and the VMM's failures
/// `vmm_<kind>` (its kebab-case kinds with `-` → `_`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The VMM process could not be spawned.
    SpawnFailed,
    /// The harness failed to talk to the VMM process (pipes, wait).
    HarnessIo,
    /// Not strict-ready by the deadline (scored at the deadline).
    Deadline,
    /// Strict-ready came in time, but the post-ready workload or teardown ran past the deadline.
    PostReadyOverrun,
    /// The VMM process died of a signal.
    VmmSignal,
    /// The VMM printed no usable report.
    BadReport,
    /// The VMM exited without a verified strict-ready.
    NoStrictReady,
    /// No guest record (Linux).
    NoRecord,
    /// Parity contract: the agent answered, but the host's TCP round trip to the guest's
    /// listener did not verify (`truecold_proto::report::NetworkProof`).
    NetworkNotReady,
    /// Parity contract: the per-launch workspace image could not be cloned.
    WorkspaceClone,
    /// Parity contract: the per-launch lifecycle row could not be committed.
    StateFailed,
    /// Parity contract: the harness could not make the launch's tap (an engine that opens
    /// an existing tap, Firecracker: the bench creates it; truecold-vmm's own failure is
    /// `vmm_tap_create_failed`).
    TapCreate,
    /// Parity contract: something of the launch was left after it (the VMM, its tap, the
    /// image, a socket, a descriptor, a thread or a mapping of the harness).
    CleanupFailed,
    /// The post-ready workload did not report `BENCH_OK`.
    Workload,
    /// The VMM exited non-zero with nothing else wrong.
    VmmExit,
    /// A success's stamps do not tile its headline.
    IncompleteTimeline,
    /// Configured, registered, described and seen memory disagree.
    MemoryMismatch,
    /// The guest saw another number of CPUs.
    CpuMismatch,
    /// The guest's topology is not the one configured.
    PlatformMismatch,
    /// Strict-ready without a boot id (Linux).
    NoBootId,
    /// The verified reply and the record name different boot ids.
    BootIdMismatch,
    /// A boot id seen before in the campaign: not a fresh boot.
    RepeatedBootId,
    /// The guest broke the wire protocol (malformed line, unverified reply, second record…)
    /// during a launch that otherwise succeeded: an untrusted guest's noise fails the row.
    GuestProtocol,
    /// The guest reported this failing code (exit port or record).
    Guest(crate::wire::ErrorCode),
    /// The VMM reported this failure kind (`[a-z0-9_]+`).
    Vmm(String),
}

impl ErrorKind {
    const FIXED: [(ErrorKind, &'static str); 23] = [
        (ErrorKind::SpawnFailed, "spawn_failed"),
        (ErrorKind::HarnessIo, "harness_io"),
        (ErrorKind::Deadline, "deadline"),
        (ErrorKind::PostReadyOverrun, "post_ready_overrun"),
        (ErrorKind::VmmSignal, "vmm_signal"),
        (ErrorKind::BadReport, "bad_report"),
        (ErrorKind::NoStrictReady, "no_strict_ready"),
        (ErrorKind::NoRecord, "no_record"),
        (ErrorKind::NetworkNotReady, "network_not_ready"),
        (ErrorKind::WorkspaceClone, "workspace_clone"),
        (ErrorKind::StateFailed, "state_failed"),
        (ErrorKind::TapCreate, "tap_create"),
        (ErrorKind::CleanupFailed, "cleanup_failed"),
        (ErrorKind::Workload, "workload"),
        (ErrorKind::VmmExit, "vmm_exit"),
        (ErrorKind::IncompleteTimeline, "incomplete_timeline"),
        (ErrorKind::MemoryMismatch, "memory_mismatch"),
        (ErrorKind::CpuMismatch, "cpu_mismatch"),
        (ErrorKind::PlatformMismatch, "platform_mismatch"),
        (ErrorKind::NoBootId, "no_boot_id"),
        (ErrorKind::BootIdMismatch, "boot_id_mismatch"),
        (ErrorKind::RepeatedBootId, "repeated_boot_id"),
        (ErrorKind::GuestProtocol, "guest_protocol"),
    ];

    /// A VMM kind (kebab- or snake-case) as a row kind; `None` unless `[a-z0-9_-]+`.
    pub fn vmm(kind: &str) -> Option<Self> {
        let k = kind.replace('-', "_");
        let ok = !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        ok.then_some(ErrorKind::Vmm(k))
    }

    /// The column spelling.
    pub fn as_string(&self) -> String {
        match self {
            ErrorKind::Guest(c) => format!("guest_{}", c.name()),
            ErrorKind::Vmm(k) => format!("vmm_{k}"),
            fixed => Self::FIXED
                .iter()
                .find(|(k, _)| k == fixed)
                .map_or_else(String::new, |(_, s)| (*s).to_string()),
        }
    }

    /// Parses [`ErrorKind::as_string`] (only that spelling: a VMM kind's `-` is `_` there);
    /// fixed names win over the `vmm_` prefix.
    pub fn parse(s: &str) -> Option<Self> {
        if let Some((k, _)) = Self::FIXED.iter().find(|(_, n)| *n == s) {
            return Some(k.clone());
        }
        if let Some(code) = s.strip_prefix("guest_") {
            return crate::wire::ErrorCode::from_name(code)
                .filter(|c| *c != crate::wire::ErrorCode::Ok)
                .map(ErrorKind::Guest);
        }
        s.strip_prefix("vmm_")
            .filter(|k| !k.contains('-'))
            .and_then(Self::vmm)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_string())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ErrorKind::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error kind `{s}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_default_backing_needs_a_pool_and_the_probe_stays_on_4k_pages() {
        for e in [
            Engine::Truecold,
            Engine::Firecracker,
            Engine::CloudHypervisor,
            Engine::QemuMicrovm,
        ] {
            for linux in [false, true] {
                assert_ne!(Backing::default_for(e, linux), Backing::Hugetlb, "{e:?}");
            }
            assert_eq!(Backing::default_for(e, false), Backing::Anon);
        }
        assert_eq!(Backing::linux_default(Engine::Truecold), Backing::Thp);
        assert_eq!(Backing::linux_default(Engine::Firecracker), Backing::Anon);
        assert_eq!(
            Backing::linux_default(Engine::CloudHypervisor),
            Backing::Thp
        );
    }

    #[test]
    fn error_kinds_round_trip() {
        let mut all: Vec<ErrorKind> = ErrorKind::FIXED.iter().map(|(k, _)| k.clone()).collect();
        all.extend(
            crate::wire::ErrorCode::ALL
                .iter()
                .filter(|c| **c != crate::wire::ErrorCode::Ok)
                .map(|c| ErrorKind::Guest(*c)),
        );
        all.push(ErrorKind::vmm("kernel-missing").expect("valid"));
        for k in all {
            let s = k.as_string();
            assert!(!s.is_empty());
            assert_eq!(ErrorKind::parse(&s), Some(k.clone()), "{s}");
        }
        assert_eq!(ErrorKind::parse("guest_ok"), None);
        assert_eq!(ErrorKind::parse("vmm_"), None);
        assert_eq!(ErrorKind::parse("vmm_\u{1b}[32m"), None);
        assert_eq!(ErrorKind::parse(""), None);
        assert_eq!(ErrorKind::vmm("Kernel Missing"), None);
        // Found by fuzzing (fuzz/fuzz_targets/proto_fields.rs): a column spelling with a `-`
        // was accepted and read back as another spelling (`vmm_l3-` → `vmm_l3_`).
        assert_eq!(ErrorKind::parse("vmm_l3-"), None);
        assert_eq!(ErrorKind::parse("vmm_kernel-missing"), None);
        assert!(serde_json::from_str::<ErrorKind>("\"vmm_kernel-missing\"").is_err());
    }

    #[test]
    fn backings_round_trip() {
        for b in Backing::ALL {
            assert_eq!(Backing::parse(b.as_str()), Ok(b));
            let json = serde_json::to_value(b.expected_obtained()).expect("serializes");
            assert_eq!(json, b.expected_obtained().as_str());
        }
        assert!(Backing::parse("huge").is_err());
    }

    #[test]
    fn host_kind_decision_order() {
        let flags = "flags\t: fpu vmx sse";
        assert_eq!(
            HostKind::decide(None, "TCGTCGTCGTCG", true, flags),
            HostKind::NestedEmulated
        );
        assert_eq!(HostKind::decide(None, "", true, flags), HostKind::Pvm);
        assert_eq!(HostKind::decide(None, "", false, flags), HostKind::Hardware);
        assert_eq!(
            HostKind::decide(None, "", false, "flags: fpu"),
            HostKind::Unknown
        );
        assert_eq!(
            HostKind::decide(Some(HostKind::Pvm), "", false, flags),
            HostKind::Pvm
        );
        for k in HostKind::ALL {
            assert_eq!(HostKind::from_name(k.as_str()), Some(k));
        }
    }
}
