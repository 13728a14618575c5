//! One attempt → one bundle row. Pure: the launcher's [`Attempt`] plus what the VMM
//! reported ([`Observed`]) become a [`Sample`], failures included. Nothing is dropped,
//! retried or replaced; every failure gets a stable error kind.

use crate::launch::{Attempt, End};
use std::collections::HashMap;
use truecold_proof::schema::{ContractKind, Sample, Stage, StageTimes};
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};

/// The VMM's CLOCK_MONOTONIC stamps this crate uses (`None` = not reached).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    pub boot_start: Option<u64>,
    pub kvm_open: Option<u64>,
    pub vm_created: Option<u64>,
    pub memory_ready: Option<u64>,
    pub kernel_loaded: Option<u64>,
    pub first_run: Option<u64>,
    pub init_doorbell: Option<u64>,
    pub ready_doorbell: Option<u64>,
    pub strict_ready: Option<u64>,
    pub record: Option<u64>,
}

/// What one VMM report says, projected onto what a row needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub stamps: Stamps,
    /// The VMM verified the liveness answer to its fresh nonce (Linux: the reply's MAC;
    /// probe: the echo). Strict-ready needs it as well as the stamp.
    pub strict_ready_verified: bool,
    /// Sum of the registered memslots, bytes.
    pub memslots: Option<u64>,
    /// Sum of the usable-RAM E820 entries, bytes.
    pub e820_usable: Option<u64>,
    /// The guest's own RAM figure as the VMM reported it (`memory.guest_bytes`: the Linux
    /// record's firmware map, the probe's sum of its memory map). Probe rows take their
    /// `guest_mem_firmware` from here; Linux rows from the record.
    pub guest_ram: Option<u64>,
    /// The guest's boot id (the reply's, which the MAC binds to the nonce). Linux only: the
    /// probe has no kernel and no boot id.
    pub boot_id: Option<BootId>,
    /// The guest's record (Linux guests).
    pub guest: Option<GuestRecord>,
    /// The VMM's own error: (stable kind, chain as text).
    pub error: Option<(String, String)>,
    /// The guest kernel command line the VMM used (Linux), for the bundle's configuration.
    pub cmdline: Option<String>,
    /// The memory backing the VMM actually got (e.g. `anon+thp`), if it says.
    pub backing: Option<String>,
}

/// The campaign-wide facts every row shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowContext {
    pub contract: ContractKind,
    /// Whether the mode has intended request times (burst, open loop).
    pub intended: bool,
    /// The `concurrency` column value (open loop: 0).
    pub concurrency_override: Option<u32>,
    pub mem_bytes: u64,
    pub vcpus: u32,
}

/// Longest error detail kept in a row.
pub const MAX_DETAIL: usize = 400;

fn detail(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = clean.trim();
    // Keep the end: an error chain's last line is usually the root cause.
    let n = t.chars().count();
    if n > MAX_DETAIL {
        let tail: String = t.chars().skip(n - MAX_DETAIL).collect();
        format!("…{tail}")
    } else {
        t.to_string()
    }
}

fn span(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    b?.checked_sub(a?)
}

/// Builds the row. `observed` is `None` when the VMM printed no parseable report
/// (`report_error` then says why, when it printed something).
pub fn to_sample(
    a: &Attempt,
    observed: Option<&Observed>,
    report_error: Option<&str>,
    ctx: &RowContext,
) -> Sample {
    let intended = ctx.intended.then_some(a.slot.intended_ns);
    let origin = intended.unwrap_or(a.request_ns);
    let empty = Observed::default();
    let o = observed.unwrap_or(&empty);
    let t = &o.stamps;
    let ready_ns = t.strict_ready;
    let latency_ns = ready_ns.and_then(|r| r.checked_sub(origin));

    let mut st = StageTimes::default();
    st.set(
        Stage::Queue,
        intended.map(|i| a.request_ns.saturating_sub(i)),
    );
    st.set(Stage::Spawn, span(Some(a.request_ns), t.boot_start));
    st.set(Stage::KvmOpen, span(t.boot_start, t.kvm_open));
    st.set(Stage::VmCreate, span(t.kvm_open, t.vm_created));
    st.set(Stage::Memory, span(t.vm_created, t.memory_ready));
    st.set(Stage::KernelLoad, span(t.memory_ready, t.kernel_loaded));
    // Up to the first KVM_RUN: vCPU creation, register setup and thread start.
    st.set(Stage::Vcpus, span(t.kernel_loaded, t.first_run));
    st.set(Stage::GuestBoot, span(t.first_run, t.init_doorbell));
    st.set(Stage::GuestInit, span(t.init_doorbell, t.ready_doorbell));
    st.set(Stage::Challenge, span(t.ready_doorbell, t.strict_ready));
    st.set(Stage::Workload, span(t.strict_ready, t.record));
    st.set(Stage::Teardown, span(t.record, Some(a.reaped_ns)));
    let g = o.guest.as_ref();
    if ctx.contract == ContractKind::Linux {
        let guest_time = |v: u64| (v > 0).then_some(v);
        st.set(
            Stage::GuestKernelToInit,
            g.and_then(|g| guest_time(g.t_init_ns)),
        );
        st.set(
            Stage::GuestInitToReady,
            g.and_then(|g| {
                guest_time(g.t_ready_ns)?;
                guest_time(g.t_init_ns)?;
                g.t_ready_ns.checked_sub(g.t_init_ns)
            }),
        );
    }
    let linux = ctx.contract == ContractKind::Linux;
    // Probe rows carry no boot id (the probe has no kernel); Linux rows the reply's.
    let boot_id = if linux {
        o.boot_id.or_else(|| g.and_then(|g| g.boot_id))
    } else {
        None
    };
    let workload = match g.map(|g| g.workload) {
        None => String::new(),
        Some(Workload::BenchOk) => "BENCH_OK".into(),
        Some(Workload::NotRun) => "not_run".into(),
        Some(Workload::Failed(c)) => c.name().into(),
    };
    let mut sample = Sample {
        index: a.slot.index,
        contract: ctx.contract,
        concurrency: ctx.concurrency_override.unwrap_or(a.slot.level),
        intended_request_ns: intended,
        actual_request_ns: a.request_ns,
        ready_ns,
        latency_ns,
        stages: st,
        boot_id,
        host_mem_configured: ctx.mem_bytes,
        host_memslots: o.memslots,
        host_e820_usable: o.e820_usable,
        guest_mem_firmware: if linux {
            g.map(|g| g.mem_firmware_ram)
        } else {
            o.guest_ram
        },
        guest_mem_total: if linux { g.map(|g| g.mem_total) } else { None },
        guest_cpus: if linux { g.map(|g| g.cpus) } else { None },
        guest_platform: if linux {
            g.map(|g| g.platform.clone())
        } else {
            None
        },
        workload,
        ok: false,
        error_kind: String::new(),
        error_detail: String::new(),
    };
    let (error_kind, error_detail) = classify(a, observed, report_error, ctx, &sample);
    sample.ok = error_kind.is_empty();
    sample.error_kind = error_kind;
    sample.error_detail = error_detail;
    sample
}

/// The first reason, in causal order, that this attempt is not a success;
/// `("", "")` for a success. Past the harness and VMM outcomes it applies, to the row
/// itself, every criterion the verifier (`truecold-proof verify`) applies to a success, so
/// a row that fails one is a typed failure, never `ok`.
fn classify(
    a: &Attempt,
    observed: Option<&Observed>,
    report_error: Option<&str>,
    ctx: &RowContext,
    s: &Sample,
) -> (String, String) {
    let fail = |k: &str, d: String| (k.to_string(), detail(&d));
    let stderr = || a.stderr_tail.trim().to_string();
    let deadline_ms = a.deadline_ns / 1_000_000;
    let linux = ctx.contract == ContractKind::Linux;
    match &a.end {
        End::SpawnFailed(m) => return fail("spawn_failed", m.clone()),
        End::HarnessIo(m) => return fail("harness_io", m.clone()),
        End::KilledAtDeadline => {
            return fail(
                "deadline",
                format!(
                    "still running at the {deadline_ms} ms deadline; killed. {}",
                    stderr()
                ),
            )
        }
        End::Signalled(sig) => {
            return fail(
                "vmm_signal",
                format!("VMM killed by signal {sig}. {}", stderr()),
            )
        }
        End::Exited(_) => {}
    }
    let Some(o) = observed else {
        let why = report_error.unwrap_or("no report on stdout");
        return fail("bad_report", format!("{why}. {}", stderr()));
    };
    if let Some((kind, chain)) = &o.error {
        // The VMM's own deadline and the harness's are the same failure: one kind.
        let kind = if kind == "deadline" {
            "deadline".to_string()
        } else {
            crate::vmm_report::vmm_error_kind(kind)
        };
        return fail(&kind, chain.clone());
    }
    let Some(lat) = s.latency_ns else {
        return fail(
            "no_strict_ready",
            format!("the VMM exited without strict-ready. {}", stderr()),
        );
    };
    if !o.strict_ready_verified {
        return fail(
            "no_strict_ready",
            "a strict-ready stamp without a verified liveness answer".into(),
        );
    }
    if lat > a.deadline_ns {
        return fail(
            "deadline",
            format!(
                "strict-ready at {} µs, after the {deadline_ms} ms deadline",
                lat / 1000
            ),
        );
    }
    if let Some(g) = &o.guest {
        if g.code != ErrorCode::Ok {
            return fail(
                &format!("guest_{}", g.code.name()),
                format!("guest reported {}", g.code),
            );
        }
    }
    if linux {
        match o.guest.as_ref().map(|g| g.workload) {
            None => return fail("no_record", "no guest record".into()),
            Some(Workload::BenchOk) => {}
            Some(w) => return fail("workload", format!("workload result {w:?}")),
        }
    }
    if let End::Exited(c) = a.end {
        if c != 0 {
            return fail(
                "vmm_exit",
                format!("VMM exited with status {c}. {}", stderr()),
            );
        }
    }
    if let Some(why) = timeline_gap(s, lat, linux) {
        return fail("incomplete_timeline", why);
    }
    if let Some(why) = memory_mismatch(s, linux) {
        return fail("memory_mismatch", why);
    }
    if linux && s.guest_cpus != Some(ctx.vcpus) {
        return fail(
            "cpu_mismatch",
            format!(
                "the guest saw {:?} CPUs, {} configured",
                s.guest_cpus, ctx.vcpus
            ),
        );
    }
    if linux {
        if let Some(why) = s.platform_problem(ctx.vcpus) {
            return fail("platform_mismatch", why);
        }
    }
    if linux && s.boot_id.is_none() {
        return fail("no_boot_id", "strict-ready without a boot id".into());
    }
    (String::new(), String::new())
}

/// The verifier's timeline criteria for a success: a spawn stage, host stages that sum to
/// the headline exactly, and (Linux) both guest-clock stages.
fn timeline_gap(s: &Sample, lat: u64, linux: bool) -> Option<String> {
    if s.stages.get(Stage::Spawn).is_none() {
        return Some("no spawn stage (the VMM reported no boot start)".into());
    }
    let host_sum = s.host_stage_sum();
    if host_sum != u128::from(lat) {
        return Some(format!(
            "host stages sum to {host_sum} ns, latency is {lat} ns (a stamp missing or out of order)"
        ));
    }
    if linux {
        for st in [Stage::GuestKernelToInit, Stage::GuestInitToReady] {
            if s.stages.get(st).is_none() {
                return Some(format!("no guest-clock `{}` stage", st.name()));
            }
        }
    }
    None
}

/// The verifier's memory criteria (`Sample::memory_problems`), as a failure detail.
fn memory_mismatch(s: &Sample, linux: bool) -> Option<String> {
    let bad = s.memory_problems(linux);
    (!bad.is_empty()).then(|| {
        format!(
            "configured {} bytes but {}",
            s.host_mem_configured,
            bad.join(", ")
        )
    })
}

/// Marks every sample whose boot id was already seen as a contract violation
/// (`repeated_boot_id`): not a fresh boot. The row keeps its boot id, so the verifier
/// reports the violation too. Returns how many were marked.
pub fn mark_repeated_boot_ids(samples: &mut [Sample]) -> usize {
    let mut seen: HashMap<BootId, u64> = HashMap::new();
    let mut marked = 0;
    for s in samples.iter_mut() {
        let Some(b) = s.boot_id else { continue };
        if let Some(first) = seen.get(&b) {
            s.ok = false;
            s.error_kind = "repeated_boot_id".into();
            s.error_detail = format!(
                "contract violation: boot id {b} already seen in sample {first} (not a fresh boot)"
            );
            marked += 1;
        } else {
            seen.insert(b, s.index);
        }
    }
    marked
}

#[cfg(test)]
mod tests;
