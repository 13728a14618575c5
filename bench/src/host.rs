//! Host conditions of a campaign: what the machine is, how loaded it was before and after,
//! and how much of it the harness itself used. Everything is read from /proc and /sys;
//! anything unreadable is recorded as such, never guessed.

use std::path::Path;
use truecold_proof::residue::{proc_field, Reading, Residue};
use truecold_proof::schema::{Environment, HarnessLoad, HostKind};
use truecold_proto::kinds::{Backing, Detection};
use truecold_proto::limits::{ExceedsHostRam, GuestMem};
use truecold_proto::measure::now_ns;

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
/// `backings`: the backings asked for ([`crate::plan::CampaignPlan::asked_backings`]; no
/// engine's default needs a pool, [`Backing::default_for`]).
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
        crate::terminal::output::note_once(&w, &format!("truecold: warning: {w}"));
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

/// A point-in-time reading taken before and after the campaign.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub t_ns: u64,
    /// `/proc/loadavg`, verbatim (trimmed).
    pub loadavg: String,
    /// This process's CPU time, ns.
    pub self_user_ns: u64,
    pub self_sys_ns: u64,
    /// Reaped children's CPU time (the VMM processes), ns.
    pub children_ns: u64,
    /// Busy and total CPU time of the whole host from `/proc/stat`, ns.
    pub host_busy_ns: u64,
    pub host_total_ns: u64,
    /// What the harness holds and the host has free (see [`residue_reading`]).
    pub residue: Reading,
    /// Lines of the harness's `/proc/self/maps` ([`maps_count`]; not in the bundle's
    /// residue: the per-launch cleanup judges it).
    pub harness_maps: Option<u64>,
}

impl Snapshot {
    /// Reads the snapshot now.
    pub fn take() -> Snapshot {
        let (self_user_ns, self_sys_ns) = rusage(libc::RUSAGE_SELF);
        let (cu, cs) = rusage(libc::RUSAGE_CHILDREN);
        let (host_busy_ns, host_total_ns) = read("/proc/stat")
            .and_then(|s| cpu_times(&s))
            .unwrap_or((0, 0));
        Snapshot {
            t_ns: now_ns(),
            loadavg: read("/proc/loadavg")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|| "unreadable".into()),
            self_user_ns,
            self_sys_ns,
            children_ns: cu + cs,
            host_busy_ns,
            host_total_ns,
            residue: residue_reading(),
            harness_maps: maps_count(),
        }
    }

    /// The snapshot after a campaign: as [`Snapshot::take`], but a residue with more harness
    /// threads than `before` is read again, every 2 ms for up to 100 ms, before it stands. A
    /// thread just joined can still be listed for a moment (the kernel wakes the joiner from
    /// its exit path, before the thread is released); a thread still running at the end of
    /// that wait is counted, and is a leak.
    pub fn take_after(before: &Snapshot) -> Snapshot {
        let mut s = Snapshot::take();
        for _ in 0..50 {
            match (s.residue.harness_threads, before.residue.harness_threads) {
                (Some(now), Some(then)) if now > then => {}
                _ => break,
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            s.residue = residue_reading();
        }
        s
    }
}

/// Reads what the harness holds (descriptors, threads, RSS, children and zombies) and what
/// the host has free (MemAvailable, the hugetlb pool) now; unreadable values are `None`.
pub fn residue_reading() -> Reading {
    let status = read("/proc/self/status").unwrap_or_default();
    let meminfo = read("/proc/meminfo").unwrap_or_default();
    let fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        // The directory handle being read is itself one entry; it is not the harness's.
        .map(|rd| rd.count().saturating_sub(1) as u64);
    let (children, zombies) = match children_of(std::process::id()) {
        Some((c, z)) => (Some(c), Some(z)),
        None => (None, None),
    };
    Reading {
        harness_fds: fds,
        harness_threads: proc_field(&status, "Threads", false),
        harness_rss_bytes: proc_field(&status, "VmRSS", true),
        children,
        zombies,
        mem_available_bytes: proc_field(&meminfo, "MemAvailable", true),
        hugepages_total: proc_field(&meminfo, "HugePages_Total", false),
        hugepages_free: proc_field(&meminfo, "HugePages_Free", false),
    }
}

/// The harness's memory mappings: lines of `/proc/self/maps`, counted through one buffer
/// allocated before the file is opened (so that reading adds no mapping of its own);
/// `None` when unreadable.
pub fn maps_count() -> Option<u64> {
    use std::io::Read;
    let mut buf = vec![0u8; 16 << 10];
    let mut f = std::fs::File::open("/proc/self/maps").ok()?;
    let mut lines = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// (children, zombies among them) of process `pid`, from every `/proc/N/stat`; `None` when
/// `/proc` cannot be listed.
fn children_of(pid: u32) -> Option<(u64, u64)> {
    let mut n = 0;
    let mut z = 0;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // A process that exits while the directory is read is simply not counted.
        let Some(stat) = read(&format!("/proc/{name}/stat")) else {
            continue;
        };
        if let Some((ppid, state)) = stat_parent_and_state(&stat) {
            if ppid == pid {
                n += 1;
                if state == 'Z' {
                    z += 1;
                }
            }
        }
    }
    Some((n, z))
}

/// (ppid, state) of a `/proc/N/stat` line: the fields after the command name's last `)`
/// (the name may itself hold spaces and parentheses). Pure, for tests.
pub fn stat_parent_and_state(stat: &str) -> Option<(u32, char)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((ppid, state))
}

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// (user, system) CPU time of `who` (`RUSAGE_SELF`, `RUSAGE_CHILDREN`), ns; (0, 0) if
/// unreadable.
pub fn rusage(who: libc::c_int) -> (u64, u64) {
    // SAFETY: all-zero bytes are a valid `rusage` (plain integers).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000_000 + (t.tv_usec as u64) * 1_000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// (busy, total) CPU time of the host from the aggregate `cpu` line of `/proc/stat`, ns.
/// Busy is everything but idle and iowait. Pure, for tests.
pub fn cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (fields 9, 10) are already included in user and nice.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    let ns = |t: u64| t.saturating_mul(1_000_000_000) / hz;
    Some((ns(total - idle), ns(total)))
}

/// A bundle's environment that states only the host kind: every other field empty, for
/// [`read_facts`] and [`environment`] to fill.
pub fn empty_environment(kind: HostKind) -> Environment {
    Environment {
        host_kind: kind,
        cpu_model: String::new(),
        cores: 0,
        host_kernel: String::new(),
        thp_enabled: String::new(),
        thp_defrag: String::new(),
        hugepages: String::new(),
        governor: None,
        loadavg_before: String::new(),
        loadavg_after: String::new(),
        harness: HarnessLoad::default(),
        warnings: Vec::new(),
        residue: None,
        nested: None,
        parity: None,
    }
}

/// `model name` of the first CPU in `/proc/cpuinfo` (pure, for tests).
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// Processors listed in `/proc/cpuinfo` (pure, for tests).
pub fn cpu_count(cpuinfo: &str) -> u32 {
    cpuinfo
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count() as u32
}

/// Hugepage pools as `2048kB:N 1048576kB:M` from `/sys/kernel/mm/hugepages`.
fn hugepage_pools(dir: &Path) -> String {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return "unreadable".into();
    };
    let mut pools: Vec<(u64, String)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let size = name.strip_prefix("hugepages-")?.to_string();
            let kb: u64 = size.strip_suffix("kB")?.parse().ok()?;
            let n = std::fs::read_to_string(e.path().join("nr_hugepages"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            Some((kb, format!("{size}:{n}")))
        })
        .collect();
    pools.sort();
    if pools.is_empty() {
        return "none".into();
    }
    pools
        .into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The host's part of a bundle's environment (`truecold_proof::schema::Environment`), read
/// once before a campaign: what the machine is. `kind` comes from the VMM library's
/// detection (one definition). The fields only a campaign knows (load, harness, warnings,
/// residue) stay empty until [`environment`] fills them.
pub fn read_facts(kind: HostKind) -> Environment {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let online = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(0);
    let verbatim = |p: &str| {
        read(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unreadable".into())
    };
    Environment {
        host_kind: kind,
        cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
        cores: match cpu_count(&cpuinfo) {
            0 => online,
            n => n,
        },
        host_kernel: verbatim("/proc/sys/kernel/osrelease"),
        thp_enabled: verbatim("/sys/kernel/mm/transparent_hugepage/enabled"),
        thp_defrag: verbatim("/sys/kernel/mm/transparent_hugepage/defrag"),
        hugepages: hugepage_pools(Path::new("/sys/kernel/mm/hugepages")),
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .map(|s| s.trim().to_string()),
        ..empty_environment(kind)
    }
}

/// Thresholds of the warnings (documented in the bundle through the warnings' text).
pub const BUSY_LOAD_PER_CORE: f64 = 0.5;
/// Other processes' share of all CPU time during the campaign that counts as busy.
pub const BUSY_OTHERS_SHARE: f64 = 0.25;
/// Harness CPU (one core = 1.0) above which it may have been the bottleneck.
pub const HARNESS_CPU_SHARE: f64 = 0.5;

/// What the scheduler adds to the conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// Largest actual-request minus intended-request (burst, open loop).
    pub max_start_lag_ns: Option<u64>,
    /// Open loop: the arrival interval.
    pub interval_ns: Option<u64>,
    /// Largest number of lanes (concurrency) used.
    pub lanes: u32,
    /// The harness's (CPU, wall) time inside the measured windows, ns (see
    /// `HarnessLoad::in_window_cpu_ns`).
    pub in_window: Option<(u64, u64)>,
    /// `--drop-caches`: samples the page cache was dropped before; `None`: not asked.
    pub page_cache_dropped: Option<u64>,
}

/// The warnings about the host and the harness (pure, for tests).
pub fn warnings(
    facts: &Environment,
    before: &Snapshot,
    after: &Snapshot,
    run: &RunFacts,
) -> Vec<String> {
    let mut w = Vec::new();
    match facts.host_kind {
        HostKind::Pvm => w.push(
            "host /dev/kvm is kvm_pvm, a software virtualization backend: these numbers do not \
             represent hardware KVM"
                .to_string(),
        ),
        HostKind::NestedEmulated => w.push(
            "KVM runs inside an emulated (TCG) L1: functional check, times are not \
             representative"
                .to_string(),
        ),
        HostKind::Unknown => w.push(
            "the host's KVM kind could not be established (no VMX/SVM flag, not kvm_pvm, not \
             nested): these numbers are not labelled as hardware KVM"
                .to_string(),
        ),
        HostKind::Hardware => {}
    }
    let cores = facts.cores.max(1);
    if let Some(l1) = before
        .loadavg
        .split_whitespace()
        .next()
        .and_then(|x| x.parse::<f64>().ok())
    {
        if l1 > BUSY_LOAD_PER_CORE * f64::from(cores) {
            w.push(format!(
                "host busy before the campaign: 1-minute load average {l1} on {cores} cores \
                 (threshold {BUSY_LOAD_PER_CORE} per core)"
            ));
        }
    }
    let wall = after.t_ns.saturating_sub(before.t_ns);
    let total = after.host_total_ns.saturating_sub(before.host_total_ns);
    let busy = after.host_busy_ns.saturating_sub(before.host_busy_ns);
    let ours = (after.self_user_ns + after.self_sys_ns + after.children_ns)
        .saturating_sub(before.self_user_ns + before.self_sys_ns + before.children_ns);
    if total > 0 {
        let others = busy.saturating_sub(ours) as f64 / total as f64;
        if others > BUSY_OTHERS_SHARE {
            w.push(format!(
                "host busy during the campaign: other processes used {:.0}% of all CPU time \
                 (threshold {:.0}%)",
                others * 100.0,
                BUSY_OTHERS_SHARE * 100.0
            ));
        }
    }
    if wall > 0 {
        let harness = (after.self_user_ns + after.self_sys_ns)
            .saturating_sub(before.self_user_ns + before.self_sys_ns) as f64
            / wall as f64;
        if harness > HARNESS_CPU_SHARE {
            w.push(format!(
                "the harness itself used {:.0}% of a core: it may have been the bottleneck \
                 (threshold {:.0}%)",
                harness * 100.0,
                HARNESS_CPU_SHARE * 100.0
            ));
        }
    }
    if run.lanes > cores {
        w.push(format!(
            "concurrency {} exceeds the host's {cores} cores: concurrent samples compete for CPU",
            run.lanes
        ));
    }
    if let (Some(lag), Some(iv)) = (run.max_start_lag_ns, run.interval_ns) {
        if lag > iv {
            w.push(format!(
                "the open loop fell behind its arrival schedule by up to {} µs (interval {} µs): \
                 the queueing is counted in the latency",
                lag / 1000,
                iv / 1000
            ));
        }
    }
    w
}

/// The nested harness's facts, as L1's initramfs holds them ([`truecold_nested::HARNESS_FILE`]);
/// None when the file is absent or malformed (the bundle then fails verify's
/// `NestedHarness` check, which names what is missing).
fn nested_harness() -> Option<truecold_proof::schema::NestedHarness> {
    let text = std::fs::read_to_string(truecold_nested::HARNESS_FILE).ok()?;
    let f = truecold_nested::HarnessFacts::decode(&text).ok()?;
    Some(truecold_proof::schema::NestedHarness {
        l1_seed: f.l1_seed,
        l0_qemu: f.l0_qemu,
        l1_kernel_sha256: Some(f.l1_kernel_sha256),
    })
}

/// Builds the bundle's environment record: the host's `facts` ([`read_facts`]) with what
/// the campaign adds — the load before and after, the harness's own load, the warnings, the
/// residue and (nested) the harness's inputs.
pub fn environment(
    facts: &Environment,
    before: &Snapshot,
    after: &Snapshot,
    run: &RunFacts,
    extra_warnings: Vec<String>,
) -> Environment {
    let mut warn = warnings(facts, before, after, run);
    warn.extend(extra_warnings);
    let residue = Residue::new(before.residue, after.residue);
    warn.extend(residue.leaks.iter().cloned());
    Environment {
        loadavg_before: before.loadavg.clone(),
        loadavg_after: after.loadavg.clone(),
        harness: HarnessLoad {
            wall_ns: after.t_ns.saturating_sub(before.t_ns),
            cpu_user_ns: after.self_user_ns.saturating_sub(before.self_user_ns),
            cpu_sys_ns: after.self_sys_ns.saturating_sub(before.self_sys_ns),
            max_start_lag_ns: run.max_start_lag_ns,
            in_window_cpu_ns: run.in_window.map(|w| w.0),
            in_window_wall_ns: run.in_window.map(|w| w.1),
            page_cache_dropped: run.page_cache_dropped,
        },
        warnings: warn,
        residue: Some(residue),
        nested: (facts.host_kind == HostKind::NestedEmulated)
            .then(nested_harness)
            .flatten(),
        parity: None,
        ..facts.clone()
    }
}

#[cfg(test)]
mod tests;
