//! `reports.jsonl`: the per-attempt evidence behind each row. Line `i` holds row `i`'s
//! harness marks (intended, request, reaped) and what the VMM printed (its whole JSON report,
//! diagnostics included, or why there was none). The verifier re-derives every row figure it
//! can from the line — the stages through the one tiling function, the headline, the boot id,
//! memory, CPUs, platform, workload and protocol-error count — and reports each disagreement.
//!
//! Under the serial observer (an engines campaign) each line carries the bench's
//! [`EngineRun`] instead of the VMM's stdout (`vmm` empty): the bench's marks and what it read
//! on the engine's serial output and in its smaps; for the truecold engine the VMM's own
//! report is inside it, and its marks must be the ones merged into the run's stamps.

use serde::{Deserialize, Serialize};
use truecold_proto::measure::{Mark, Stamps, Taker};
use truecold_proto::parallel::Reading;
use truecold_proto::report::{EngineRun, ReportCore, VmmOutput};

use crate::fmt::{opt_ns, or_none};
use crate::schema::{ContractKind, Engine, Observer, ResultJson, Sample, Stage, StageKind};

/// The longest line the verifier reads (a VMM report is a few KiB).
pub const MAX_LINE: usize = 1 << 20;

/// One line of `reports.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportLine {
    /// The row's index.
    pub index: u64,
    /// The harness's marks (only `intended`, `request`, `reaped` are the harness's).
    pub harness: HarnessMarks,
    /// The VMM's stdout as JSON, when it was one JSON object.
    pub vmm: Option<serde_json::Value>,
    /// Why there is no usable VMM JSON (no process, empty or non-JSON stdout, truncated).
    pub vmm_missing: Option<String>,
    /// Serial observer (engines campaigns): what the bench saw of this launch; the truecold
    /// engine's VMM report is inside it, and `vmm` is then empty.
    pub engine: Option<truecold_proto::report::EngineRun>,
    /// The parallel clock read for a success (schema 11+, an L0 that keeps it): the row's
    /// `parallel_latency_ns` is [`Reading::latency`] of its `latency_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Reading>,
    /// Why a success of such a bundle has no parallel reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_missing: Option<String>,
}

/// The marks the harness takes itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessMarks {
    pub intended: Option<u64>,
    pub request: u64,
    pub reaped: Option<u64>,
}

impl ReportLine {
    /// The line for one attempt: `stdout` is kept as JSON when it parses as one object.
    pub fn new(index: u64, harness: HarnessMarks, stdout: &[u8], truncated: bool) -> Self {
        let (vmm, vmm_missing) = if truncated {
            (None, Some("stdout truncated by the harness".to_string()))
        } else if stdout.iter().all(u8::is_ascii_whitespace) {
            (None, Some("no stdout".to_string()))
        } else {
            match serde_json::from_slice::<serde_json::Value>(stdout) {
                Ok(v) if v.is_object() => (Some(v), None),
                Ok(_) => (None, Some("stdout is JSON but not an object".to_string())),
                Err(e) => (None, Some(format!("stdout is not JSON: {e}"))),
            }
        };
        ReportLine {
            index,
            harness,
            vmm,
            vmm_missing,
            engine: None,
            parallel: None,
            parallel_missing: None,
        }
    }

    /// One JSON line, `\n` included.
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string(self)?;
        s.push('\n');
        Ok(s)
    }

    /// The VMM's report core, when the VMM printed a boot report.
    pub fn core(&self) -> Option<ReportCore> {
        let v = self.vmm.as_ref()?;
        match VmmOutput::parse(v.to_string().as_bytes()) {
            Ok(VmmOutput::Boot(c)) => Some(*c),
            _ => None,
        }
    }
}

/// What a bundle's rows are checked against beside their own line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    /// The contract's deadline (ns after each row's latency origin).
    pub deadline_ns: u64,
    /// Who stamps strict-ready: the line carries a VMM report (vm-exit) or an [`EngineRun`]
    /// (serial).
    pub observer: Observer,
    /// The engine every row ran (serial observer).
    pub engine: Engine,
    /// The parity contract: where every network proof must have connected
    /// (`<net_pair guest>:<TCP_PORT>`), from `environment.parity`.
    pub net_target: Option<String>,
    /// truecold-vmm's RAM layout (`configuration.ram_layout`): the rule the VMM's memory
    /// figures obey and the layout its configuration echoes.
    pub ram_layout: truecold_proto::kinds::RamLayout,
    /// truecold-vmm's CPU platform (`configuration.cpu_platform`), which its configuration
    /// echoes.
    pub cpu_platform: truecold_proto::platform::CpuPlatform,
    /// The parallel clock: `Some(L1's CPUs)` when the bundle's L0 keeps it (every success
    /// then has a reading or says why not), `None` when no row may carry one.
    pub parallel_cpus: Option<u32>,
    /// The bundle's schema: from [`crate::schema::ZONES_SCHEMA`] the rows carry the record's
    /// zone figures too.
    pub schema: u32,
}

impl Expect {
    /// What `r` declares.
    pub fn of(r: &ResultJson) -> Self {
        Expect {
            deadline_ns: r.contract.deadline_ns,
            observer: r.contract.observer,
            engine: r.configuration.engine.kind,
            net_target: r.environment.parity.as_ref().map(|p| {
                let guest = truecold_proto::parity::NetPair::parse(&p.net_pair)
                    .map_or_else(|_| p.net_pair.clone(), |n| n.guest().to_string());
                format!("{guest}:{}", truecold_proto::parity::TCP_PORT)
            }),
            ram_layout: r.configuration.ram_layout,
            cpu_platform: r.configuration.cpu_platform,
            parallel_cpus: (r.schema_version >= 11
                && r.environment
                    .nested
                    .as_ref()
                    .is_some_and(|n| truecold_proto::parallel::l0_has_parallel_clock(&n.l0_qemu)))
            .then_some(r.environment.cores),
            schema: r.schema_version,
        }
    }
}

/// Checks the file (read line by line, each line capped at [`MAX_LINE`]) against `samples`
/// and what the bundle declares; every disagreement is one string, at most `max` of them.
pub fn check<R: std::io::BufRead>(
    mut file: R,
    samples: &[Sample],
    expect: &Expect,
    max: usize,
) -> std::io::Result<Vec<String>> {
    use std::io::{BufRead as _, Read as _};
    let mut bad = Vec::new();
    let mut push = |s: String| {
        if bad.len() < max {
            bad.push(s);
        }
    };
    let mut line = Vec::new();
    let mut i = 0usize;
    loop {
        line.clear();
        let n = (&mut file)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE {
                push(format!("line {i}: longer than {MAX_LINE} bytes"));
                // Skip the rest of the overlong line, in the reader's buffer (a line of
                // any length costs no memory).
                crate::fsio::skip_line(&mut file)?;
            } else {
                push(format!("line {i}: no final newline"));
            }
            i += 1;
            continue;
        }
        match samples.get(i) {
            None => push(format!("line {i}: no row {i} (one line per row)")),
            Some(s) => match serde_json::from_slice::<ReportLine>(&line[..line.len() - 1]) {
                Err(e) => push(format!("line {i}: does not parse: {e}")),
                Ok(parsed) => {
                    if parsed.to_line().ok().as_deref().map(str::as_bytes) != Some(line.as_slice())
                    {
                        push(format!("line {i}: not in canonical form"));
                    }
                    for why in check_row(&parsed, s, expect) {
                        push(format!("row {}: {why}", s.index));
                    }
                }
            },
        }
        i += 1;
    }
    if i < samples.len() {
        push(format!(
            "{i} lines for {} rows: one line per row",
            samples.len()
        ));
    }
    Ok(bad)
}

/// The row's parallel latency against its reading: re-derived exactly, possible on the
/// bundle's L1, present on every success where the L0 keeps the clock unless the line says
/// why not, absent everywhere else.
fn check_parallel(l: &ReportLine, s: &Sample, expect: &Expect, bad: &mut Vec<String>) {
    let Some(cpus) = expect.parallel_cpus else {
        if l.parallel.is_some() || l.parallel_missing.is_some() || s.parallel_latency_ns.is_some() {
            bad.push("a parallel-clock figure in a bundle whose L0 keeps no parallel clock".into());
        }
        return;
    };
    match (&l.parallel, s.latency_ns) {
        (Some(p), Some(lat)) => {
            if let Some(why) = p.problem(lat, cpus) {
                bad.push(why);
            }
            let want = p.latency(lat);
            if s.parallel_latency_ns != Some(want) {
                bad.push(format!(
                    "parallel latency {} in the row, its reading gives {want} ns",
                    opt_ns(s.parallel_latency_ns)
                ));
            }
            if l.parallel_missing.is_some() {
                bad.push("a parallel reading and a reason why it is missing".into());
            }
        }
        (Some(_), None) => bad.push("a parallel reading for a row that has no latency".into()),
        (None, _) => {
            if s.parallel_latency_ns.is_some() {
                bad.push("a parallel latency without its reading".into());
            }
            if s.ok && s.latency_ns.is_some() && l.parallel_missing.is_none() {
                bad.push(
                    "a success without a parallel reading, and no reason why (its L0 keeps the \
                     parallel clock)"
                        .into(),
                );
            }
        }
    }
}

/// What in `s` disagrees with its evidence `l`.
pub fn check_row(l: &ReportLine, s: &Sample, expect: &Expect) -> Vec<String> {
    let mut bad = Vec::new();
    if l.index != s.index {
        bad.push(format!("the report line is for index {}", l.index));
        return bad;
    }
    check_parallel(l, s, expect, &mut bad);
    let deadline_ns = expect.deadline_ns;
    match (expect.observer, &l.engine) {
        (o @ (Observer::Serial | Observer::Agent), Some(run)) => {
            if o == Observer::Agent {
                check_parity_row(run, s, expect, &mut bad);
            }
            if l.vmm.is_some() {
                bad.push(
                    "the serial observer's line carries a VMM stdout beside the engine run \
                     (the truecold VMM's report belongs inside the run)"
                        .into(),
                );
            }
            check_engine_row(l, run, s, expect, &mut bad);
            return bad;
        }
        (Observer::Serial | Observer::Agent, None) => {
            bad.push("the serial or agent observer's line has no engine run".into());
            return bad;
        }
        (Observer::VmExit, Some(_)) => {
            bad.push("a vm-exit bundle's line carries an engine run".into());
            return bad;
        }
        (Observer::VmExit, None) => {}
    }
    if s.ok {
        if let Some(why) = &l.vmm_missing {
            bad.push(format!(
                "a success whose line says why it has no VMM report ({})",
                why.chars().take(120).collect::<String>()
            ));
        }
    }
    if l.harness.intended != s.intended_request_ns || l.harness.request != s.actual_request_ns {
        bad.push("intended/request stamps differ from the row".into());
    }
    let Some(core) = l.core() else {
        if s.ok {
            bad.push(format!(
                "a success without a VMM boot report ({})",
                l.vmm_missing
                    .as_deref()
                    .unwrap_or("the VMM printed an error report")
            ));
        }
        if s.ready_ns.is_some() {
            bad.push("a ready stamp without a VMM boot report".into());
        }
        return bad;
    };
    // The deadline the VMM was given: one instant, origin + the contract's deadline.
    let origin = l.harness.intended.unwrap_or(l.harness.request);
    let at = l.vmm.as_ref().and_then(deadline_at);
    if at != Some(origin.saturating_add(deadline_ns)) {
        bad.push(format!(
            "the VMM was given the deadline {}, not origin + {deadline_ns} ns",
            opt_ns(at)
        ));
    }
    if core.stamps.request != Some(l.harness.request) {
        bad.push(format!(
            "the VMM echoes request {}, the harness stamped {} ns",
            opt_ns(core.stamps.request),
            l.harness.request
        ));
    }
    let stamps = Stamps {
        intended: l.harness.intended,
        request: Some(l.harness.request),
        reaped: l.harness.reaped,
        ..core.stamps
    };
    timeline_against(s, &stamps, "the report", &mut bad);
    if s.ok && (!core.outcome.ok || !core.liveness.verified) {
        bad.push("a success whose VMM report is not a verified, ok boot".into());
    }
    if s.protocol_errors != core.protocol_error_count {
        bad.push(format!(
            "{} protocol errors in the row, {} in the report",
            s.protocol_errors, core.protocol_error_count
        ));
    }
    let f = &core.memory_figures;
    if s.host_memslots != Some(f.memslots) || s.host_e820_usable != Some(f.e820_ram) {
        bad.push("memslot / E820 figures differ from the report".into());
    }
    vmm_layout(l.vmm.as_ref(), f, s.ok, expect.ram_layout, &mut bad);
    vmm_platform(l.vmm.as_ref(), expect.cpu_platform, &mut bad);
    let g = core.guest_record.as_ref();
    match s.contract {
        ContractKind::Linux => {
            if s.boot_id != core.liveness.reply_boot_id {
                bad.push(format!(
                    "boot id {} in the row, the verified reply's is {}",
                    or_none(s.boot_id),
                    or_none(core.liveness.reply_boot_id)
                ));
            }
            check_guest(s, g, expect.schema, &mut bad);
        }
        ContractKind::Probe => {
            if s.guest_mem_firmware != f.guest {
                bad.push("the probe's RAM figure differs from the report".into());
            }
        }
    }
    bad
}

/// The VMM's report against the bundle's RAM layout: its configuration echoes `layout`
/// (absent: [`truecold_proto::kinds::RamLayout::ABSENT`]), and a success's memory figures obey the one rule for it
/// ([`truecold_proto::report::MemoryFigures::problem`]: RAM + the declared hole =
/// configured, in the host's view and, where the report has it, the guest's).
fn vmm_layout(
    vmm: Option<&serde_json::Value>,
    f: &truecold_proto::report::MemoryFigures,
    ok: bool,
    layout: truecold_proto::kinds::RamLayout,
    bad: &mut Vec<String>,
) {
    let echoed = vmm.and_then(|v| v.pointer("/config/ram_layout"));
    let ran = match echoed {
        None => Ok(truecold_proto::kinds::RamLayout::ABSENT),
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| v.to_string()),
    };
    match ran {
        Ok(l) if l == layout => {}
        Ok(l) => bad.push(format!(
            "the VMM ran the `{l}` RAM layout, the bundle's is `{layout}`"
        )),
        Err(v) => bad.push(format!("the VMM's config.ram_layout {v} is not a layout")),
    }
    if ok {
        let p = match f.guest {
            Some(_) => f.problem(layout),
            None => f.host_problem(layout),
        };
        if let Some(p) = p {
            bad.push(format!(
                "the VMM's memory figures break the `{layout}` layout's rule: {p}"
            ));
        }
    }
}

/// The VMM's report against the bundle's CPU platform: its configuration echoes `platform`
/// (absent: [`truecold_proto::platform::CpuPlatform::ABSENT`]).
fn vmm_platform(
    vmm: Option<&serde_json::Value>,
    platform: truecold_proto::platform::CpuPlatform,
    bad: &mut Vec<String>,
) {
    use truecold_proto::platform::CpuPlatform;
    let ran = match vmm.and_then(|v| v.pointer("/config/cpu_platform")) {
        None => Ok(CpuPlatform::ABSENT),
        Some(v) => serde_json::from_value::<CpuPlatform>(v.clone()).map_err(|_| v.to_string()),
    };
    match ran {
        Ok(p) if p == platform => {}
        Ok(p) => bad.push(format!(
            "the VMM presented {p:?}, the bundle's configuration.cpu_platform is {platform:?}"
        )),
        Err(v) => bad.push(format!(
            "the VMM's config.cpu_platform {v} is not a CPU platform"
        )),
    }
}

/// The VMM's deadline instant in a report object, when it says one.
fn deadline_at(vmm: &serde_json::Value) -> Option<u64> {
    vmm.pointer("/config/deadline/at-ns")
        .and_then(serde_json::Value::as_u64)
}

/// The serial observer's half of [`check_row`]: `s` against the engine run `run`.
/// The parity contract's evidence of one row: a success has a verified network proof (with the
/// agent's boot id) and a clean cleanup; a row whose proof failed is `network_not_ready`,
/// one whose cleanup failed `cleanup_failed`.
fn check_parity_row(run: &EngineRun, s: &Sample, expect: &Expect, bad: &mut Vec<String>) {
    // The proof's own evidence: the binding of its nonce and the agent's boot id, recomputed.
    let bound = run.network.as_ref().is_some_and(|p| {
        let l = &p.liveness;
        match (
            l.nonce
                .as_deref()
                .and_then(truecold_proto::unhex::<{ truecold_proto::NONCE_LEN }>),
            l.reply_boot_id,
            l.answer.as_deref(),
        ) {
            (Some(n), Some(id), Some(a)) => {
                truecold_proto::hex(&truecold_proto::liveness_binding(&n, &id)) == a
            }
            _ => false,
        }
    });
    let net_ok = run.network.as_ref().is_some_and(|p| {
        p.liveness.verified
            && p.error.is_none()
            && p.liveness.reply_boot_id == s.boot_id
            && expect.net_target.as_deref() == Some(p.target.as_str())
    }) && bound;
    if s.ok && !net_ok {
        bad.push(
            "a parity success without a network proof to the bundle's guest address whose \
             binding recomputes, bound to its boot id"
                .into(),
        );
    }
    let cleaned = run
        .cleanup
        .as_ref()
        .is_some_and(|c| c.ok && c.failures.is_empty());
    if s.ok && !cleaned {
        bad.push("a parity success whose cleanup is missing or not verified".into());
    }
    if s.cleanup_ok != run.cleanup.as_ref().map(|c| c.ok)
        || s.cleanup_ns != run.cleanup.as_ref().map(|c| c.ns)
    {
        bad.push("the cleanup columns differ from the engine run's cleanup".into());
    }
    if run
        .cleanup
        .as_ref()
        .is_some_and(|c| c.ok != c.failures.is_empty())
    {
        bad.push("the cleanup says ok and names failures (or neither)".into());
    }
}

fn check_engine_row(
    l: &ReportLine,
    run: &EngineRun,
    s: &Sample,
    expect: &Expect,
    bad: &mut Vec<String>,
) {
    if run.engine != expect.engine {
        bad.push(format!(
            "the engine run is of `{}`, the bundle's engine is `{}`",
            run.engine, expect.engine
        ));
    }
    // The harness's marks are the run's own.
    let h = &l.harness;
    if h.intended != run.stamps.intended
        || Some(h.request) != run.stamps.request
        || h.reaped != run.stamps.reaped
    {
        bad.push("the harness marks differ from the engine run's stamps".into());
    }
    if h.intended != s.intended_request_ns || h.request != s.actual_request_ns {
        bad.push("intended/request stamps differ from the row".into());
    }
    let stamps = run.stamps;
    timeline_against(s, &stamps, "the engine run", bad);
    if s.ok && (!run.outcome.ok || !run.liveness.verified) {
        bad.push("a success whose engine run is not a verified, ok boot".into());
    }
    if s.protocol_errors != run.protocol_error_count {
        bad.push(format!(
            "{} protocol errors in the row, {} in the engine run",
            s.protocol_errors, run.protocol_error_count
        ));
    }
    let mapping = run.host_memory.as_ref();
    if s.host_mapping_bytes != mapping.map(|m| m.total())
        || s.host_page_size != mapping.map(|m| m.kernel_page_size)
    {
        bad.push("the mapping figures differ from the engine run's smaps reading".into());
    }
    // The truecold engine: its VMM's report, its marks merged, its deadline, its memory.
    let core = run
        .vmm
        .as_ref()
        .and_then(|v| match VmmOutput::parse(v.to_string().as_bytes()) {
            Ok(VmmOutput::Boot(c)) => Some(*c),
            _ => None,
        });
    let origin = h.intended.unwrap_or(h.request);
    match (expect.engine, &core) {
        (Engine::Truecold, None) => {
            if s.ok {
                bad.push("a truecold success without the VMM's boot report".into());
            }
            if s.host_memslots.is_some() || s.host_e820_usable.is_some() {
                bad.push("memslot / E820 figures without the VMM's report".into());
            }
        }
        (Engine::Truecold, Some(core)) => {
            let at = run.vmm.as_ref().and_then(deadline_at);
            if at.is_some_and(|a| a != origin.saturating_add(expect.deadline_ns)) {
                bad.push(format!(
                    "the VMM was given the deadline {}, not origin + {} ns",
                    opt_ns(at),
                    expect.deadline_ns
                ));
            }
            if core.stamps.request != Some(h.request) {
                bad.push(format!(
                    "the VMM echoes request {}, the harness stamped {} ns",
                    opt_ns(core.stamps.request),
                    h.request
                ));
            }
            for m in Mark::ALL
                .into_iter()
                .filter(|m| m.taker_under(expect.observer) != Taker::Bench)
            {
                if core.stamps.get(m) != stamps.get(m) {
                    bad.push(format!(
                        "mark {}: {} in the VMM's report, {} merged into the run",
                        m.name(),
                        opt_ns(core.stamps.get(m)),
                        opt_ns(stamps.get(m))
                    ));
                }
            }
            let f = &core.memory_figures;
            if s.host_memslots != Some(f.memslots) || s.host_e820_usable != Some(f.e820_ram) {
                bad.push("memslot / E820 figures differ from the VMM's report".into());
            }
            vmm_layout(run.vmm.as_ref(), f, s.ok, expect.ram_layout, bad);
            vmm_platform(run.vmm.as_ref(), expect.cpu_platform, bad);
        }
        (_, _) => {
            if run.vmm.is_some() {
                bad.push(format!(
                    "a `{}` run carries a truecold VMM report",
                    expect.engine
                ));
            }
            // No VMM of ours: nobody takes its marks, nobody counts memslots or E820.
            for m in Mark::ALL
                .into_iter()
                .filter(|m| m.taker_under(expect.observer) != Taker::Bench)
            {
                if stamps.get(m).is_some() {
                    bad.push(format!(
                        "mark {} in a `{}` run: only truecold-vmm takes it",
                        m.name(),
                        expect.engine
                    ));
                }
            }
            if s.host_memslots.is_some() || s.host_e820_usable.is_some() {
                bad.push(format!(
                    "memslot / E820 figures in a `{}` row: only truecold-vmm reports them",
                    expect.engine
                ));
            }
        }
    }
    let g = run.guest_record.as_ref();
    if s.contract != ContractKind::Linux {
        return;
    }
    let reply = run.liveness.reply_boot_id;
    if s.boot_id != reply {
        bad.push(format!(
            "boot id {} in the row, the verified reply's is {}",
            or_none(s.boot_id),
            or_none(reply)
        ));
    }
    if s.ok && (run.ready_boot_id != reply || g.and_then(|g| g.boot_id) != reply) {
        bad.push(format!(
            "a success whose ready line ({}), verified reply ({}) and record ({}) name \
             different boot ids",
            or_none(run.ready_boot_id),
            or_none(reply),
            or_none(g.and_then(|g| g.boot_id))
        ));
    }
    check_guest(s, g, expect.schema, bad);
}

/// The row's guest columns against the guest's record (both observers).
fn check_guest(
    s: &Sample,
    g: Option<&truecold_proto::GuestRecord>,
    schema: u32,
    bad: &mut Vec<String>,
) {
    let mut guest = crate::schema::StageTimes::default();
    if let Some(g) = g {
        guest.set_guest(g.t_init_ns, g.t_ready_ns);
    }
    for st in [Stage::GuestKernelToInit, Stage::GuestInitToReady] {
        if guest.get(st) != s.stages.get(st) {
            bad.push(format!("guest stage {} differs from the record", st.name()));
        }
    }
    let same = s.guest_mem_firmware == g.map(|g| g.mem_firmware_ram)
        && s.guest_mem_total == g.map(|g| g.mem_total)
        && s.guest_cpus == g.map(|g| g.cpus)
        && s.guest_platform.as_ref() == g.map(|g| &g.platform)
        && s.workload == g.map(|g| g.workload.encode()).unwrap_or_default();
    // Schema 11: the zone figures are the record's too (an earlier row has no columns).
    let zones_same = schema < crate::schema::ZONES_SCHEMA
        || (s.guest_mem_present == g.map(|g| g.mem_present)
            && s.guest_mem_managed == g.map(|g| g.mem_managed));
    if !same || !zones_same {
        bad.push("guest figures (memory, CPUs, platform, workload) differ from the record".into());
    }
}

/// The row's ready stamp, headline and host/post stages against what `stamps` give through
/// the one tiling function; each disagreement is pushed to `bad`, naming `source`.
fn timeline_against(s: &Sample, stamps: &Stamps, source: &str, bad: &mut Vec<String>) {
    if stamps.strict_ready != s.ready_ns || stamps.latency() != s.latency_ns {
        bad.push(format!(
            "ready/latency {}/{} in the row, {}/{} from {source}",
            opt_ns(s.ready_ns),
            opt_ns(s.latency_ns),
            opt_ns(stamps.strict_ready),
            opt_ns(stamps.latency())
        ));
    }
    let tiles = stamps.tile();
    for st in Stage::ALL
        .into_iter()
        .filter(|st| st.kind() != StageKind::Guest)
    {
        if tiles.get(st) != s.stages.get(st) {
            bad.push(format!(
                "stage {}: {} in the row, {} from {source}",
                st.name(),
                opt_ns(s.stages.get(st)),
                opt_ns(tiles.get(st))
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_keeps_the_stdout_or_says_why_not() {
        let h = HarnessMarks {
            intended: None,
            request: 5,
            reaped: Some(9),
        };
        let l = ReportLine::new(
            3,
            h,
            br#"{"schema":3,"error":{"kind":"x","message":"y"}}"#,
            false,
        );
        assert!(l.vmm.is_some() && l.vmm_missing.is_none());
        assert!(l.core().is_none(), "an error report has no core");
        let back: ReportLine =
            serde_json::from_str(l.to_line().expect("serializes").trim_end()).expect("round trip");
        assert_eq!(back, l);
        for (out, trunc, why) in [
            (&b""[..], false, "no stdout"),
            (&b"garbage"[..], false, "not JSON"),
            (&b"[1]"[..], false, "not an object"),
            (&b"{}"[..], true, "truncated"),
        ] {
            let l = ReportLine::new(0, h, out, trunc);
            assert!(l.vmm.is_none());
            assert!(
                l.vmm_missing.as_deref().is_some_and(|m| m.contains(why)),
                "{l:?}"
            );
        }
    }

    #[test]
    fn line_count_garbage_and_overlong_lines_are_reported() {
        let s = Sample::new(0, ContractKind::Probe, 1, 0);
        let one = std::slice::from_ref(&s);
        let e = Expect {
            deadline_ns: 1,
            observer: Observer::VmExit,
            engine: Engine::Truecold,
            net_target: None,
            ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
            cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
            parallel_cpus: None,
            schema: crate::schema::SCHEMA_VERSION,
        };
        let c = |b: &[u8]| check(b, one, &e, 10).expect("reads");
        assert!(c(b"")[0].contains("0 lines for 1 rows"));
        assert!(c(b"{\n")[0].contains("does not parse"));
        assert!(c(b"{}")[0].contains("no final newline"));
        let long = vec![b'x'; MAX_LINE + 10];
        assert!(c(&long)[0].contains("longer than"));
        assert!(c(b"{}\n{}\n").iter().any(|m| m.contains("no row 1")));
    }
}
