//! Every row on its own: its index, contract, boot id, concurrency, times, memory,
//! configuration, and what a success or a failure must carry.
//!
//! # Physical floor of a success
//!
//! Every host stage of a success except `queue` is present and longer than 0 ns
//! ([`Check::StageFloor`]): a launch is a process spawn, a KVM VM and a guest run, each
//! taking time, so a success at 0 or 1 ns cannot tile. A failure typed `deadline` has no
//! strict-ready inside the deadline ([`Check::DeadlineKind`]).

use std::collections::HashMap;

use crate::schema::{
    Backing, ContractKind, Engine, HostKind, Observer, ResultJson, Sample, Stage, StageKind,
    TimelineProblem,
};
use crate::verdict::{Check, Verdict};

pub(super) fn check_rows(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let c = &r.contract;
    let cfg = &r.configuration;
    let planned = c.mode.planned_attempts();
    let rows = samples.len() as u64;
    if !c.incomplete && rows != planned {
        v.add(
            Check::AttemptCount,
            format!(
                "{rows} rows, the complete {} campaign planned {planned}",
                c.mode.name()
            ),
        );
    }
    if c.incomplete && rows > planned {
        v.add(
            Check::AttemptCount,
            format!("{rows} rows, more than the {planned} planned"),
        );
    }
    // The layout is truecold-vmm's: a peer's bundle lays RAM out its own way.
    if !cfg.ram_layout.is_absent() && cfg.engine.kind != Engine::Truecold {
        v.add(
            Check::Configuration,
            format!(
                "configuration.ram_layout `{}` for engine `{}`: the layout is truecold-vmm's",
                cfg.ram_layout, cfg.engine.kind
            ),
        );
    }
    // So is the CPU platform, and it must be one the configured vCPUs split into.
    if !cfg.cpu_platform.is_absent() {
        if cfg.engine.kind != Engine::Truecold {
            v.add(
                Check::Configuration,
                format!(
                    "configuration.cpu_platform for engine `{}`: the choice is truecold-vmm's",
                    cfg.engine.kind
                ),
            );
        }
        let split = u8::try_from(cfg.vcpus)
            .map_err(|_| format!("{} vCPUs", cfg.vcpus))
            .and_then(|n| cfg.cpu_platform.check(n).map_err(|e| e.to_string()));
        if let Err(why) = split {
            v.add(
                Check::Configuration,
                format!("configuration.cpu_platform: {why}"),
            );
        }
    }
    if cfg.backing_kind().is_none() {
        v.add(
            Check::Configuration,
            format!(
                "configuration.backing `{}` does not name a backing (anon, thp, hugetlb)",
                cfg.backing
            ),
        );
    }
    match (c.observer, cfg.engine.kind) {
        (Observer::VmExit, Engine::Truecold) => {}
        (Observer::VmExit, e) => v.add(
            Check::Configuration,
            format!(
                "engine `{e}` under the vm-exit observer: only truecold-vmm stamps \
                 strict-ready at a VM exit; other engines are observed on serial"
            ),
        ),
        (Observer::Serial, _) if c.kind != ContractKind::Linux => v.add(
            Check::RowContract,
            "the serial observer reads a Linux guest's TC1 lines: a probe bundle cannot use it",
        ),
        (Observer::Serial, _) => {}
        (Observer::Agent, e) if e.no_parity_launch().is_some() => v.add(
            Check::Configuration,
            format!(
                "engine `{e}` under the agent observer: {}",
                e.no_parity_launch().unwrap_or_default()
            ),
        ),
        (Observer::Agent, _) if c.kind == ContractKind::Linux => {}
        (Observer::Agent, _) => v.add(
            Check::RowContract,
            "the agent observer (the parity contract) is a vsock channel to a Linux guest",
        ),
    }
    if c.kind == ContractKind::Linux && r.environment.host_kind == HostKind::Pvm {
        let ok = samples.iter().filter(|s| s.ok).count();
        if ok > 0 {
            v.add(
                Check::HostKindContract,
                format!(
                    "a `linux` bundle on a `pvm` host has {ok} successful row(s): an \
                     unmodified Linux cannot boot on kvm_pvm, so the data are mislabelled"
                ),
            );
        }
    }
    let mut seen: HashMap<_, u64> = HashMap::new();
    for (pos, s) in samples.iter().enumerate() {
        let i = s.index;
        if i != pos as u64 {
            v.add(
                Check::IndexOrder,
                format!("row {pos} has index {i}: indexes must be 0,1,2,… in row order"),
            );
        }
        if let (ContractKind::Probe, Some(b)) = (s.contract, s.boot_id) {
            v.add(
                Check::ProbeBootId,
                format!(
                    "probe sample {i} carries boot id {b}: the probe guest has no kernel and \
                     no boot id"
                ),
            );
        } else if let Some(b) = s.boot_id {
            if let Some(first) = seen.insert(b, i) {
                v.add(
                    Check::DuplicateBootId,
                    format!("boot id {b} of sample {i} already seen in sample {first}: not a fresh boot"),
                );
            }
        }
        if s.contract != c.kind {
            v.add(
                Check::RowContract,
                format!(
                    "sample {i} is a `{}` row in a `{}` bundle",
                    s.contract.as_str(),
                    c.kind.as_str()
                ),
            );
        }
        if c.kind == ContractKind::Probe && s.guest_platform.is_some() {
            v.add(
                Check::RowContract,
                format!("probe sample {i} carries a Linux guest platform"),
            );
        }
        if c.kind == ContractKind::Probe {
            for st in Stage::ALL.iter().filter(|st| st.kind() == StageKind::Guest) {
                if s.stages.get(*st).is_some() {
                    v.add(
                        Check::RowContract,
                        format!("probe sample {i} carries Linux guest stage `{}`", st.name()),
                    );
                }
            }
        }
        if !c.mode.allows_concurrency(s.concurrency) {
            v.add(
                Check::Concurrency,
                format!(
                    "sample {i}: concurrency {} impossible in {}",
                    s.concurrency,
                    c.mode.describe()
                ),
            );
        }
        check_times(v, c.mode.has_intended_time(), s);
        if s.host_mem_configured != cfg.mem_bytes {
            v.add(
                Check::Configuration,
                format!(
                    "sample {i}: host configured {} bytes, the campaign {}",
                    s.host_mem_configured, cfg.mem_bytes
                ),
            );
        }
        if s.ok {
            check_success(v, r, s);
        } else if s.error_kind.is_empty() {
            v.add(
                Check::ErrorKind,
                format!("failed sample {i} has no error kind"),
            );
        } else if truecold_proto::kinds::ErrorKind::parse(&s.error_kind).is_none() {
            v.add(
                Check::ErrorKind,
                format!(
                    "failed sample {i} has the unknown error kind `{}`",
                    s.error_kind
                ),
            );
        } else if s.error_kind == truecold_proto::kinds::ErrorKind::Deadline.as_string() {
            if let Some(l) = s.latency_ns.filter(|&l| l <= r.contract.deadline_ns) {
                v.add(
                    Check::DeadlineKind,
                    format!(
                        "sample {i} is typed `deadline` but was strict-ready at {l} ns, \
                         inside the {} ns deadline",
                        r.contract.deadline_ns
                    ),
                );
            }
        }
    }
}

fn check_times(v: &mut Verdict, mode_has_intended: bool, s: &Sample) {
    let i = s.index;
    if s.intended_request_ns.is_some() != mode_has_intended {
        v.add(
            Check::IntendedTime,
            format!(
                "sample {i}: intended request time {} but the mode {} one",
                if s.intended_request_ns.is_some() {
                    "present"
                } else {
                    "absent"
                },
                if mode_has_intended { "needs" } else { "has no" }
            ),
        );
    }
    let want_queue = s
        .intended_request_ns
        .map(|t| s.actual_request_ns.checked_sub(t));
    let queue = s.stages.get(Stage::Queue);
    match want_queue {
        None if queue.is_some() => v.add(
            Check::IntendedTime,
            format!("sample {i}: queue stage without an intended time"),
        ),
        Some(None) => v.add(
            Check::IntendedTime,
            format!("sample {i}: actual request before the intended time"),
        ),
        Some(Some(q)) if queue != Some(q) => v.add(
            Check::IntendedTime,
            format!(
                "sample {i}: queue stage {} ≠ actual − intended = {q}",
                crate::fmt::opt_ns(queue)
            ),
        ),
        _ => {}
    }
    if s.latency_ns != s.derived_latency() {
        v.add(
            Check::Latency,
            format!(
                "sample {i}: latency_ns {} ≠ ready − request origin = {}",
                crate::fmt::opt_ns(s.latency_ns),
                crate::fmt::opt_ns(s.derived_latency())
            ),
        );
    }
}

fn check_success(v: &mut Verdict, r: &ResultJson, s: &Sample) {
    let i = s.index;
    let linux = r.contract.kind == ContractKind::Linux;
    if !s.error_kind.is_empty() {
        v.add(
            Check::ErrorKind,
            format!("sample {i} is ok but has error kind `{}`", s.error_kind),
        );
    }
    if !s.error_detail.is_empty() {
        v.add(
            Check::ErrorDetail,
            format!(
                "sample {i} is ok but carries the error detail {:?}",
                s.error_detail.chars().take(120).collect::<String>()
            ),
        );
    }
    if linux && s.boot_id.is_none() {
        v.add(
            Check::SuccessIncomplete,
            format!("successful Linux sample {i} has no boot id"),
        );
    }
    let Some(lat) = s.latency_ns else {
        v.add(
            Check::SuccessIncomplete,
            format!("successful sample {i} has no strict-ready time"),
        );
        return;
    };
    if lat > r.contract.deadline_ns {
        v.add(
            Check::OverDeadline,
            format!(
                "sample {i} is ok at {lat} ns, after the {} ns deadline",
                r.contract.deadline_ns
            ),
        );
    }
    let (observer, engine) = (r.contract.observer, r.configuration.engine.kind);
    for p in s.timeline_problems(linux, observer, engine) {
        let check = match p {
            TimelineProblem::Missing(st) if st.kind() == StageKind::Guest => {
                Check::SuccessIncomplete
            }
            TimelineProblem::Missing(_) | TimelineProblem::Zero(_) => Check::StageFloor,
            TimelineProblem::Sum { .. } => Check::StageTiling,
            TimelineProblem::Queue => Check::IntendedTime,
            TimelineProblem::NoLatency => Check::SuccessIncomplete,
        };
        v.add(check, format!("successful sample {i}: {p}"));
    }
    if s.protocol_errors > 0 {
        v.add(
            Check::ErrorKind,
            format!(
                "successful sample {i} has {} guest protocol error(s): a success is clean",
                s.protocol_errors
            ),
        );
    }
    let m = s.host_mem_configured;
    // An unknown backing name is a `Configuration` reason of its own (check_rows).
    let backing = r.configuration.backing_kind().unwrap_or(Backing::Anon);
    let mem_bad = s.memory_problems(
        linux,
        observer,
        engine,
        backing,
        r.configuration.ram_layout,
        r.schema_version,
    );
    if !mem_bad.is_empty() {
        v.add(
            Check::Memory,
            format!(
                "successful sample {i}: host configured {m} bytes but {}",
                mem_bad.join(", ")
            ),
        );
    }
    if linux {
        if s.workload != truecold_proto::Workload::BenchOk.encode() {
            v.add(
                Check::SuccessIncomplete,
                format!(
                    "successful sample {i}: workload `{}`, not BENCH_OK",
                    s.workload
                ),
            );
        }
        if let Some(why) = s.platform_problem(r.configuration.vcpus, &r.configuration.cpu_platform)
        {
            v.add(Check::Platform, format!("successful sample {i}: {why}"));
        }
        if s.guest_cpus != Some(r.configuration.vcpus) {
            v.add(
                Check::Configuration,
                match s.guest_cpus {
                    Some(n) => format!(
                        "successful sample {i}: guest saw {n} CPUs, configured {}",
                        r.configuration.vcpus
                    ),
                    None => format!(
                        "successful sample {i}: the guest reported no CPU count, configured {}",
                        r.configuration.vcpus
                    ),
                },
            );
        }
    }
}
