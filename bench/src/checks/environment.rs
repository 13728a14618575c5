//! A bundle's `environment`: what the machine is (read once before a campaign), how loaded it
//! was before and after, how much of it the harness itself used, and the warnings that
//! follow.

use super::snapshot::{read, Snapshot};
use std::path::Path;
use truecold_proof::residue::Residue;
use truecold_proof::schema::{Environment, HarnessLoad, HostKind};

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
            "KVM runs inside an emulated (TCG) L1: times are the nested harness's virtual clock \
             (1 ns per emulated instruction), a reproducible cost model of the boot's work, not \
             wall time; which of its verdicts hold on hardware: docs/fidelity.md"
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

/// The L0 QEMU's version line, as L1's initramfs holds it; None outside the harness or when
/// the file is absent or malformed.
pub fn l0_qemu() -> Option<String> {
    nested_harness().map(|h| h.l0_qemu)
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
        l1_init_sha256: f.l1_init_sha256,
        bench_sha256: f.bench_sha256,
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
