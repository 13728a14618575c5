//! One attempt → one bundle row. Pure: the launcher's [`Attempt`] plus what the VMM
//! reported ([`Observed`]) become a [`Sample`], failures included. Nothing is dropped,
//! retried or replaced; every failure gets a stable error kind.

use super::process_launcher::{Attempt, End};
use std::collections::HashMap;
use truecold_proof::schema::{ContractKind, Sample};
use truecold_proto::kinds::{Backing, Engine, ErrorKind, Observer};
use truecold_proto::measure::Stamps;
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};

/// What one VMM report says, projected onto what a row needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The VMM's marks (the bench adds its own: intended, request, reaped).
    pub stamps: Stamps,
    /// The VMM verified the liveness answer to its fresh nonce (Linux: the reply's binding;
    /// probe: the echo). Strict-ready needs it as well as the stamp.
    pub strict_ready_verified: bool,
    /// Sum of the registered memslots, bytes.
    pub memslots: Option<u64>,
    /// Sum of the usable-RAM E820 entries, bytes.
    pub e820_usable: Option<u64>,
    /// The guest's own RAM figure as the VMM reported it (the Linux record's firmware map,
    /// the probe's sum of its memory map). Probe rows take their `guest_mem_firmware` from
    /// here; Linux rows from the record.
    pub guest_ram: Option<u64>,
    /// The boot id of the verified reply (Linux only: the probe has no kernel and no boot id).
    pub boot_id: Option<BootId>,
    /// The guest's record (Linux guests).
    pub guest: Option<GuestRecord>,
    /// The guest exit code, when the guest wrote one.
    pub guest_exit_code: Option<u8>,
    /// Protocol errors the guest caused.
    pub protocol_errors: u64,
    /// The VMM's own error: (stable kind, chain as text).
    pub error: Option<(ErrorKind, String)>,
    /// The guest kernel command line the VMM used (Linux), for the bundle's configuration.
    pub cmdline: Option<String>,
    /// The memory backing the VMM actually got (e.g. `anon-4k`), if it says.
    pub backing: Option<truecold_proto::kinds::ObtainedBacking>,
    /// Serial observer: the engine process's guest-memory mapping from smaps.
    pub host_mapping: Option<truecold_proto::report::HostMapping>,
    /// Serial observer: why no mapping was taken (no mapping of the configured size …).
    pub mapping_error: Option<String>,
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
    /// Where strict-ready was stamped.
    pub observer: Observer,
    /// The engine that booted the guest.
    pub engine: Engine,
    /// The requested backing (the serial observer's page-size criterion).
    pub backing: Backing,
    /// truecold-vmm's RAM layout (the memory rule's hole).
    pub ram_layout: truecold_proto::kinds::RamLayout,
    /// truecold-vmm's CPU platform (what a Linux guest must report seeing).
    pub cpu_platform: truecold_proto::platform::CpuPlatform,
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

/// Builds the row. `observed` is `None` when the VMM printed no parseable report
/// (`report_error` then says why, when it printed something).
pub fn to_sample(
    a: &Attempt,
    observed: Option<&Observed>,
    report_error: Option<&str>,
    ctx: &RowContext,
) -> Sample {
    let empty = Observed::default();
    let o = observed.unwrap_or(&empty);
    // The VMM's marks plus the harness's own, through the one tiling function.
    let stamps = Stamps {
        intended: ctx.intended.then_some(a.slot.intended_ns),
        request: Some(a.request_ns),
        reaped: Some(a.reaped_ns),
        ..o.stamps
    };
    let g = o.guest.as_ref();
    let linux = ctx.contract == ContractKind::Linux;
    // Probe rows carry no boot id (the probe has no kernel); Linux rows the verified
    // reply's (the binding ties it to the nonce), never the record's alone.
    let boot_id = if linux { o.boot_id } else { None };
    let mut sample = Sample::new(
        a.slot.index,
        ctx.contract,
        ctx.concurrency_override.unwrap_or(a.slot.level),
        ctx.mem_bytes,
    );
    sample.set_times(&stamps);
    if linux {
        if let Some(g) = g {
            sample.stages.set_guest(g.t_init_ns, g.t_ready_ns);
        }
    }
    let sample = Sample {
        boot_id,
        host_memslots: o.memslots,
        host_e820_usable: o.e820_usable,
        guest_mem_firmware: if linux {
            g.map(|g| g.mem_firmware_ram)
        } else {
            o.guest_ram
        },
        guest_mem_total: if linux { g.map(|g| g.mem_total) } else { None },
        guest_mem_present: if linux {
            g.map(|g| g.mem_present)
        } else {
            None
        },
        guest_mem_managed: if linux {
            g.map(|g| g.mem_managed)
        } else {
            None
        },
        guest_cpus: if linux { g.map(|g| g.cpus) } else { None },
        guest_platform: if linux {
            g.map(|g| g.platform.clone())
        } else {
            None
        },
        host_mapping_bytes: o.host_mapping.as_ref().map(|m| m.total()),
        host_page_size: o.host_mapping.as_ref().map(|m| m.kernel_page_size),
        protocol_errors: o.protocol_errors,
        workload: g.map(|g| g.workload.encode()).unwrap_or_default(),
        ..sample
    };
    let mut sample = sample;
    match classify(a, observed, report_error, ctx, &sample) {
        None => sample.ok = true,
        Some((kind, detail)) => {
            sample.ok = false;
            sample.error_kind = kind.as_string();
            sample.error_detail = detail;
        }
    }
    sample
}

/// The first reason, in causal order, that this attempt is not a success; `None` for a
/// success. Past the harness and VMM outcomes it applies, to the row itself, every criterion
/// the verifier (`truecold-proof verify`) applies to a success, so a row that fails one is a
/// typed failure, never `ok`.
fn classify(
    a: &Attempt,
    observed: Option<&Observed>,
    report_error: Option<&str>,
    ctx: &RowContext,
    s: &Sample,
) -> Option<(ErrorKind, String)> {
    let fail = |k: ErrorKind, d: String| Some((k, detail(&d)));
    let stderr = || a.stderr_tail.trim().to_string();
    let deadline_ms = a.deadline_ns / 1_000_000;
    let linux = ctx.contract == ContractKind::Linux;
    // Strict-ready came, verified, within the deadline: any later overrun is post-ready.
    let ready_in_time = observed.is_some_and(|o| o.strict_ready_verified)
        && s.latency_ns.is_some_and(|l| l <= a.deadline_ns);
    match &a.end {
        End::SpawnFailed(m) => return fail(ErrorKind::SpawnFailed, m.clone()),
        End::HarnessIo(m) => return fail(ErrorKind::HarnessIo, m.clone()),
        End::KilledAtDeadline if ready_in_time => {
            return fail(
                ErrorKind::PostReadyOverrun,
                format!(
                    "strict-ready in time, but still running at the {deadline_ms} ms deadline; \
                     killed. {}",
                    stderr()
                ),
            )
        }
        End::KilledAtDeadline => {
            return fail(
                ErrorKind::Deadline,
                format!(
                    "still running at the {deadline_ms} ms deadline; killed. {}",
                    stderr()
                ),
            )
        }
        End::Signalled(sig) => {
            return fail(
                ErrorKind::VmmSignal,
                format!("VMM killed by signal {sig}. {}", stderr()),
            )
        }
        End::Exited(_) | End::KilledAfterRecord => {}
    }
    let Some(o) = observed else {
        let why = report_error.unwrap_or("no report on stdout");
        return fail(ErrorKind::BadReport, format!("{why}. {}", stderr()));
    };
    if let Some((kind, chain)) = &o.error {
        // The VMM's deadline and the harness's are the same failure: one kind, split by
        // whether strict-ready came in time.
        let kind = match kind {
            ErrorKind::Deadline if ready_in_time => ErrorKind::PostReadyOverrun,
            _ => match o.guest_exit_code.map(ErrorCode::from_byte) {
                // A guest that wrote a failing code to the exit port (a panic included)
                // is typed by its own code.
                Some(Ok(code)) if code != ErrorCode::Ok => ErrorKind::Guest(code),
                _ => kind.clone(),
            },
        };
        return fail(kind, chain.clone());
    }
    let Some(lat) = s.latency_ns else {
        return fail(
            ErrorKind::NoStrictReady,
            format!("the VMM exited without strict-ready. {}", stderr()),
        );
    };
    if !o.strict_ready_verified {
        return fail(
            ErrorKind::NoStrictReady,
            "a strict-ready stamp without a verified liveness answer".into(),
        );
    }
    if lat > a.deadline_ns {
        return fail(
            ErrorKind::Deadline,
            format!(
                "strict-ready at {} µs, after the {deadline_ms} ms deadline",
                lat / 1000
            ),
        );
    }
    if let Some(g) = &o.guest {
        if g.code != ErrorCode::Ok {
            return fail(
                ErrorKind::Guest(g.code),
                format!("guest reported {}", g.code),
            );
        }
    }
    if linux {
        match o.guest.as_ref().map(|g| g.workload) {
            None => return fail(ErrorKind::NoRecord, "no guest record".into()),
            Some(Workload::BenchOk) => {}
            Some(w) => return fail(ErrorKind::Workload, format!("workload result {w}")),
        }
    }
    if o.protocol_errors > 0 {
        return fail(
            ErrorKind::GuestProtocol,
            format!(
                "the guest caused {} protocol error(s); a success must be clean",
                o.protocol_errors
            ),
        );
    }
    if let End::Exited(c) = a.end {
        if !truecold_engine::exit_is_clean(ctx.engine, c) {
            return fail(
                ErrorKind::VmmExit,
                format!("VMM exited with status {c}. {}", stderr()),
            );
        }
    }
    if let Some(why) = s.timeline_problems(linux, ctx.observer, ctx.engine).first() {
        return fail(ErrorKind::IncompleteTimeline, why.to_string());
    }
    if let Some(why) = memory_mismatch(s, o, ctx) {
        return fail(ErrorKind::MemoryMismatch, why);
    }
    if linux && s.guest_cpus != Some(ctx.vcpus) {
        return fail(
            ErrorKind::CpuMismatch,
            format!(
                "the guest saw {} CPUs, {} configured",
                truecold_proof::fmt::or_none(s.guest_cpus),
                ctx.vcpus
            ),
        );
    }
    if linux {
        if let Some(why) = s.platform_problem(ctx.vcpus, &ctx.cpu_platform) {
            return fail(ErrorKind::PlatformMismatch, why);
        }
    }
    if linux && s.boot_id.is_none() {
        return fail(ErrorKind::NoBootId, "strict-ready without a boot id".into());
    }
    None
}

/// The verifier's memory criteria (`Sample::memory_problems`, one definition for every
/// observer and engine), plus an smaps mapping the bench could not pick, as a failure detail.
fn memory_mismatch(s: &Sample, o: &Observed, ctx: &RowContext) -> Option<String> {
    let linux = ctx.contract == ContractKind::Linux;
    // The bench writes the current schema: its rows carry the zone figures.
    let mut bad = s.memory_problems(
        linux,
        ctx.observer,
        ctx.engine,
        ctx.backing,
        ctx.ram_layout,
        truecold_proof::schema::SCHEMA_VERSION,
    );
    if let Some(why) = &o.mapping_error {
        bad.push(why.clone());
    }
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
            s.error_kind = ErrorKind::RepeatedBootId.as_string();
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

/// Marks every successful row whose boot id an earlier launch of another arm already had
/// (in request order) as `repeated_boot_id`: every arm of a multi-arm run (an engines
/// campaign, a tune phase) boots the same guest, so a boot id is unique across all of them.
/// `names[i]` is arm `i`'s name (for the detail). Returns how many were marked per arm.
pub fn mark_repeated_across_arms(names: &[&str], arms: &mut [&mut [Sample]]) -> Vec<usize> {
    let mut all: Vec<(u64, usize, usize)> = Vec::new();
    for (ai, a) in arms.iter().enumerate() {
        for (si, s) in a.iter().enumerate() {
            all.push((s.actual_request_ns, ai, si));
        }
    }
    all.sort();
    let mut seen: HashMap<BootId, (usize, u64)> = HashMap::new();
    let mut marked = vec![0; arms.len()];
    for (_, ai, si) in all {
        let s = &mut arms[ai][si];
        let Some(b) = s.boot_id else { continue };
        match seen.get(&b) {
            Some((first_arm, first)) if *first_arm != ai => {
                if s.error_kind != ErrorKind::RepeatedBootId.as_string() {
                    s.ok = false;
                    s.error_kind = ErrorKind::RepeatedBootId.as_string();
                    s.error_detail = format!(
                        "contract violation: boot id {b} already seen in the {} arm's sample \
                         {first} (not a fresh boot)",
                        names.get(*first_arm).copied().unwrap_or("?")
                    );
                    marked[ai] += 1;
                }
            }
            Some(_) => {}
            None => {
                seen.insert(b, (ai, s.index));
            }
        }
    }
    marked
}

#[cfg(test)]
mod tests;
