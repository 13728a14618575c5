//! What a campaign boots and where: the [`Target`] asked for (`--probe`, `--linux`,
//! `--nested`, or the host's default) and the [`GuestSpec`] every launch boots.

use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, RamLayout};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::platform::CpuPlatform;

/// Where the campaign runs and what it boots, as asked (`--probe`, `--linux`, `--nested`,
/// or none of them: Linux where this host's /dev/kvm can boot it, else the probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Auto,
    Probe,
    Linux,
    /// Linux in the nested harness's L1.
    Nested,
}

impl Target {
    /// A Linux campaign on this host (`false`), or in the nested harness (`true`).
    pub fn linux(nested: bool) -> Target {
        if nested {
            Target::Nested
        } else {
            Target::Linux
        }
    }

    /// The guest of `contract`, on this host.
    pub fn of_contract(contract: ContractKind) -> Target {
        match contract {
            ContractKind::Probe => Target::Probe,
            ContractKind::Linux => Target::Linux,
        }
    }

    pub fn is_nested(self) -> bool {
        self == Target::Nested
    }
}

/// The guest every launch boots and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestSpec {
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// The backing asked for (`--backing`); `None`: each engine's own default for the guest
    /// ([`Backing::default_for`], resolved by [`super::campaign_plan::CampaignPlan::backing_of`]).
    pub backing: Option<Backing>,
    /// Appended to the guest kernel command line.
    pub cmdline_extra: String,
    /// The guest's serial console to the VMM's stderr.
    pub console: bool,
    /// Boot the guest directory's `bzImage` (the 64-bit boot protocol) instead of `vmlinux`.
    pub bzimage: bool,
    /// truecold-vmm's RAM layout (`--ram-layout`).
    pub ram_layout: RamLayout,
    /// Each vCPU thread pinned to a CPU of its own (`--pin-vcpus`).
    pub pin_vcpus: bool,
    /// truecold-vmm's CPU platform (`--packages`, `--invariant-tsc`), checked against
    /// `vcpus`.
    pub cpu_platform: CpuPlatform,
}

impl GuestSpec {
    /// `vcpus` and `mem` on `backing`, with the kernel command line as built and no console.
    pub fn plain(vcpus: Vcpus, mem: GuestMem, backing: Backing) -> GuestSpec {
        GuestSpec {
            vcpus,
            mem,
            backing: Some(backing),
            cmdline_extra: String::new(),
            console: false,
            bzimage: false,
            ram_layout: RamLayout::default_for(mem),
            pin_vcpus: false,
            cpu_platform: CpuPlatform::ABSENT,
        }
    }
}
