//! The checks of a campaign before its first launch: this host's KVM and its kind, the rules
//! the VMM applies at every launch (memory, the hugetlb pool) checked once, and the page
//! cache dropped (`--drop-caches`).

use crate::terminal::output;
use std::path::Path;
use truecold_proof::residue::proc_field;
use truecold_proof::schema::HostKind;
use truecold_proto::kinds::{Backing, Detection};
use truecold_proto::limits::{ExceedsHostRam, GuestMem};

/// Why this host's KVM cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("/dev/kvm does not exist: this host offers no KVM (load kvm_intel/kvm_amd, or run on a host with KVM)")]
    NoKvm,
    #[error(
        "cannot tell what /dev/kvm is here (no vmx/svm CPU flag, no kvm_pvm module, not QEMU TCG); \
         set TRUECOLD_HOST_KIND=hardware|pvm|nested-emulated to say so"
    )]
    UnknownHost,
    #[error(
        "/dev/kvm cannot be opened read-write, which every launch needs (run as root, or add \
         this user to the group that owns /dev/kvm, usually `kvm`, and log in again)"
    )]
    KvmNotOpenable(#[source] std::io::Error),
    #[error(
        "--mem-mib {mib}: the VMM refuses a guest larger than this host's RAM at every launch; \
         pass --mem-mib {host_mib} or less"
    )]
    MemExceedsHost {
        mib: u64,
        host_mib: u64,
        #[source]
        source: ExceedsHostRam,
    },
    #[error(
        "cannot read MemTotal from /proc/meminfo, without which the VMM refuses every launch \
         (is /proc mounted?)"
    )]
    HostMemUnknown,
    #[error(
        "--backing hugetlb: one {mib} MiB guest needs at least {needed} free 2 MiB hugetlb pages \
         (the VMM maps a page or two more) and the pool has {free}; reserve more (as root: echo \
         {reserve} > /proc/sys/vm/nr_hugepages) or use --backing anon"
    )]
    HugetlbPoolShort {
        mib: u64,
        needed: u64,
        free: u64,
        /// An `nr_hugepages` that leaves one launch's pages free: the pages in use, `needed`
        /// and the VMM's own two.
        reserve: u64,
    },
}

/// The free pages of the host's 2 MiB hugetlb pool (the pool the VMM's hugetlb backing maps
/// from, `MAP_HUGE_2MB`).
pub const HUGETLB_2M_FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
/// Its size in pages.
pub const HUGETLB_2M_TOTAL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

/// What the checks before a campaign's first launch read from the host ([`preflight`]);
/// tests make their own.
#[derive(Debug)]
pub struct HostLimits {
    /// MemTotal, bytes (`None`: unreadable).
    pub mem_total_bytes: Option<u64>,
    /// Free and total pages of the 2 MiB hugetlb pool (0 and 0 where the kernel has none).
    pub huge_pages_free: u64,
    pub huge_pages_total: u64,
    /// Opening /dev/kvm read-write.
    pub kvm_open: std::io::Result<()>,
}

impl HostLimits {
    /// This host's.
    pub fn read() -> HostLimits {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let pages = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0)
        };
        HostLimits {
            mem_total_bytes: proc_field(&meminfo, "MemTotal", true),
            huge_pages_free: pages(HUGETLB_2M_FREE),
            huge_pages_total: pages(HUGETLB_2M_TOTAL),
            kvm_open: open_kvm(),
        }
    }
}

/// Opens /dev/kvm read-write, as the VMM does at every launch, and closes it.
fn open_kvm() -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map(drop)
}

/// The checks of a campaign on this host's /dev/kvm before its first launch, each the rule
/// the VMM applies at every launch: /dev/kvm opens read-write; `mem` fits the host's RAM
/// ([`GuestMem::fits_host`], the VMM's own rule); with `backing` hugetlb, the 2 MiB pool
/// holds at least one guest ([`GuestMem::huge_pages_at_least`]; a pool that runs out later,
/// with guests in flight, is a typed row, data).
/// `backings`: the backings asked for
/// ([`crate::plan::campaign_plan::CampaignPlan::asked_backings`]; no engine's default needs a
/// pool, [`Backing::default_for`]).
pub fn preflight(limits: HostLimits, mem: GuestMem, backings: &[Backing]) -> Result<(), HostError> {
    limits.kvm_open.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => HostError::NoKvm,
        _ => HostError::KvmNotOpenable(e),
    })?;
    let total = limits.mem_total_bytes.ok_or(HostError::HostMemUnknown)?;
    mem.fits_host(total)
        .map_err(|source| HostError::MemExceedsHost {
            mib: mem.mib(),
            host_mib: source.host_mib,
            source,
        })?;
    if backings.contains(&Backing::Hugetlb) {
        let needed = mem.huge_pages_at_least();
        let free = limits.huge_pages_free;
        if free < needed {
            let in_use = limits.huge_pages_total.saturating_sub(free);
            return Err(HostError::HugetlbPoolShort {
                mib: mem.mib(),
                needed,
                free,
                reserve: in_use.saturating_add(needed).saturating_add(2),
            });
        }
    }
    Ok(())
}

/// The host kind in effect (the VMM library's detection, one definition) and, when
/// `TRUECOLD_HOST_KIND` forced it, the warning that says so.
fn host_kind() -> Result<(HostKind, Option<String>), HostError> {
    let d = truecold_host::kind::detection(None);
    if d.kind == HostKind::Unknown {
        return Err(HostError::UnknownHost);
    }
    Ok((d.kind, forced_warning(&d)))
}

/// `host kind forced to X (detected Y)` when an override set the kind.
pub fn forced_warning(d: &Detection) -> Option<String> {
    d.forced.then(|| {
        format!(
            "host kind forced to {} (detected {}) by TRUECOLD_HOST_KIND",
            d.kind.as_str(),
            d.detected.map_or("nothing", HostKind::as_str)
        )
    })
}

/// This host's KVM: `/dev/kvm` must exist; its kind (detected or forced) and, when forced,
/// the warning that says so (printed, and kept for the bundle).
pub fn kvm_host() -> Result<(HostKind, Vec<String>), HostError> {
    if !Path::new("/dev/kvm").exists() {
        return Err(HostError::NoKvm);
    }
    let (kind, forced) = host_kind()?;
    let mut warnings = Vec::new();
    if let Some(w) = forced {
        output::note_once(&w, &format!("truecold: warning: {w}"));
        warnings.push(w);
    }
    Ok((kind, warnings))
}

/// Why this host's Linux campaign became a probe campaign (printed and recorded).
pub const PVM_EXPLANATION: &str = "this host's /dev/kvm is kvm_pvm, a software virtualization \
backend on which an unmodified Linux kernel cannot boot (its instruction emulator fails on \
xrstor, int3, popcnt, clac during early boot); running the probe-guest campaign instead: \
VMM floor (probe guest), not a Linux boot. For a Linux boot use --nested (slow, emulated) or \
a host with hardware KVM.";

/// The kernel's page-cache knob.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// `sync`, then drop the host page cache, dentries and inodes, so the next sample reads the
/// VMM, kernel and initramfs from disk (`--drop-caches`).
pub fn drop_page_cache() -> std::io::Result<()> {
    // SAFETY: sync(2) takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::sync() };
    std::fs::write(DROP_CACHES, b"3")
}
