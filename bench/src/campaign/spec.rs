//! What a campaign is ([`CampaignSpec`]): its schedule, contract, guest, deadline and
//! observer, and what every row of it shares.

use super::sample::RowContext;
use super::schedule::{rate_per_ks, Schedule};
use truecold_proof::schema::{ContractKind, Mode};
use truecold_proto::kinds::Backing;
use truecold_proto::limits::{GuestMem, Vcpus};

/// What a campaign is.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignSpec {
    pub schedule: Schedule,
    pub contract: ContractKind,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// Requested backing.
    pub backing: Backing,
    /// truecold-vmm's RAM layout (`--ram-layout`).
    pub ram_layout: truecold_proto::kinds::RamLayout,
    /// truecold-vmm's CPU platform (`--packages`, `--invariant-tsc`).
    pub cpu_platform: truecold_proto::platform::CpuPlatform,
    /// Per-sample deadline from the latency origin.
    pub deadline_ns: u64,
    /// How long past its deadline the launcher lets a VMM run before killing it. In modes
    /// with intended times, an arrival whose turn comes at or after its intended time plus
    /// the deadline plus this grace (the moment the launcher would kill it at once) is not
    /// launched: see [`super::execute::expired_attempt`].
    pub kill_grace_ns: u64,
    /// Where strict-ready is stamped (the contract's observer).
    pub observer: truecold_proof::schema::Observer,
    /// The campaign is one arm of an interleaved multi-arm run (an engines campaign, a tune
    /// phase): other arms' launches sit between its rows (`contract.interleaved`).
    pub interleaved: bool,
    /// The fail-fast rule's K (`contract.stop_after`): a sequential campaign stops once K
    /// consecutive launches failed with one error kind; `None`: every launch runs.
    pub stop_after: Option<u64>,
}

impl CampaignSpec {
    /// The schema's mode.
    pub fn mode(&self) -> Mode {
        match self.schedule {
            Schedule::Sequential { n } => Mode::Sequential { count: n },
            Schedule::Burst { n, concurrency } => Mode::Burst {
                count: n,
                concurrency,
            },
            Schedule::OpenLoop { n, interval_ns, .. } => Mode::OpenLoop {
                count: n,
                rate_per_ks: rate_per_ks(interval_ns),
            },
            Schedule::Churn { n, concurrency } => Mode::Churn {
                count: n,
                concurrency,
            },
            Schedule::Sweep {
                n_per_level,
                max_concurrency,
            } => Mode::Sweep {
                max_concurrency,
                per_level: n_per_level,
            },
        }
    }

    /// What every row of this campaign shares.
    pub fn row_context(&self) -> RowContext {
        RowContext {
            contract: self.contract,
            intended: self.mode().has_intended_time(),
            concurrency_override: matches!(self.schedule, Schedule::OpenLoop { .. }).then_some(0),
            mem_bytes: self.mem.bytes(),
            vcpus: u32::from(self.vcpus.get()),
            observer: self.observer,
            engine: truecold_proto::kinds::Engine::Truecold,
            backing: self.backing,
            ram_layout: self.ram_layout,
            cpu_platform: self.cpu_platform,
        }
    }

    /// Short name for directories: `linux-sequential-2vcpu-16384mib`.
    pub fn slug(&self) -> String {
        format!(
            "{}-{}-{}vcpu-{}mib",
            match self.contract {
                ContractKind::Linux => "linux",
                ContractKind::Probe => "probe-floor",
            },
            self.schedule.mode_name(),
            self.vcpus,
            self.mem.mib()
        )
    }
}
