//! One launch of an arm, reaped, as its row and its `reports.jsonl` evidence: what the row
//! needs from the launch ([`observed`]: the truecold VMM's report where there is one, then
//! what the bench saw on the serial line and in smaps), the row through the one classifier
//! ([`row`]), and the line ([`report_line`]).

use crate::campaign::process_launcher::Attempt;
use crate::campaign::sample::{to_sample, Observed, RowContext};
use crate::campaign::schedule::Slot;
use crate::campaign::vmm_output;
use truecold_engine::driver::Launched;
use truecold_proof::reports::{HarnessMarks, ReportLine};
use truecold_proof::schema::Sample;
use truecold_proto::kinds::{Engine, ErrorKind};
use truecold_proto::parallel::Reading;
use truecold_proto::report::{EngineRun, Outcome, VmmOutput};

/// What the row needs from one launch: the truecold VMM's report where there is one (its
/// memslots, E820, own failure, guest exit code, backing), then everything the bench saw on
/// the serial line and in smaps.
pub fn observed(l: &Launched, guest_cmdline: &str) -> Observed {
    let run = &l.run;
    let mut o = match (run.engine, &run.vmm) {
        (Engine::Truecold, Some(v)) => match VmmOutput::parse(v.to_string().as_bytes()) {
            Ok(VmmOutput::Boot(c)) => vmm_output::observe(&c),
            Ok(VmmOutput::Error(e)) => vmm_output::observe_error(&e),
            Err(e) => Observed {
                error: Some((ErrorKind::BadReport, e.to_string())),
                ..Observed::default()
            },
        },
        (Engine::Truecold, None) => Observed {
            error: Some((
                ErrorKind::BadReport,
                l.report_error
                    .clone()
                    .unwrap_or_else(|| "truecold-vmm wrote no report".into()),
            )),
            ..Observed::default()
        },
        _ => Observed {
            cmdline: Some(guest_cmdline.to_string()),
            ..Observed::default()
        },
    };
    o.stamps = run.stamps;
    o.strict_ready_verified = run.liveness.verified;
    o.boot_id = run.liveness.reply_boot_id;
    o.guest = run.guest_record.clone();
    o.guest_exit_code = run.outcome.guest_exit_code.or(o.guest_exit_code);
    o.protocol_errors = run.protocol_error_count;
    o.host_mapping = run.host_memory.clone();
    o.mapping_error = l.mapping_error.clone();
    // The parity contract: an agent that answered but a network proof that did not verify.
    if let Some(p) = run.network.as_ref().filter(|p| !p.liveness.verified) {
        o.strict_ready_verified = false;
        o.error.get_or_insert((
            ErrorKind::NetworkNotReady,
            p.error.clone().unwrap_or_default(),
        ));
    }
    if let (Some(reply), Some(record)) = (o.boot_id, o.guest.as_ref().and_then(|g| g.boot_id)) {
        if reply != record {
            o.error.get_or_insert((
                ErrorKind::BootIdMismatch,
                format!("the reply says boot id {reply}, the record {record}"),
            ));
        }
    }
    o
}

/// One launch → its row and its `reports.jsonl` evidence (the engine run, its outcome the
/// row's classification).
pub fn row(
    l: &Launched,
    round: u64,
    ctx: &RowContext,
    deadline_ns: u64,
    guest_cmdline: &str,
) -> (Sample, EngineRun) {
    let mut tail = l.stderr_tail.trim().to_string();
    if l.noise_lines > 0 {
        tail.push_str(&format!(
            " [serial: {} line(s) of engine noise, last: {}]",
            l.noise_lines,
            l.noise_tail.join(" | ")
        ));
    }
    let attempt = Attempt {
        slot: Slot {
            index: round,
            level: 1,
            intended_ns: l.request_ns,
        },
        request_ns: l.request_ns,
        reaped_ns: l.reaped_ns,
        deadline_ns,
        end: l.end.clone(),
        stdout: Vec::new(),
        stdout_truncated: false,
        stderr_tail: tail,
    };
    let o = observed(l, guest_cmdline);
    let s = to_sample(&attempt, Some(&o), None, ctx);
    let mut run = l.run.clone();
    run.outcome = Outcome {
        ok: s.ok,
        failure_kind: (!s.ok).then(|| s.error_kind.clone()),
        failure: (!s.ok).then(|| s.error_detail.clone()),
        guest_exit_code: o.guest_exit_code,
    };
    (s, run)
}

/// Row `s`'s `reports.jsonl` line: its engine run `r`, and the parallel clock's reading (or
/// why there is none).
pub fn report_line(
    s: &Sample,
    r: &EngineRun,
    (parallel, parallel_missing): (Option<Reading>, Option<String>),
) -> String {
    let line = ReportLine {
        index: s.index,
        harness: HarnessMarks {
            intended: r.stamps.intended,
            request: r.stamps.request.unwrap_or(s.actual_request_ns),
            reaped: r.stamps.reaped,
        },
        vmm: None,
        vmm_missing: None,
        engine: Some(r.clone()),
        parallel,
        parallel_missing,
    };
    match line.to_line() {
        Ok(t) => t,
        // An engine run is numbers and strings, which always serialize; should it not, the
        // line still exists and says why.
        Err(e) => ReportLine {
            engine: None,
            vmm_missing: Some(format!("the engine run did not serialize: {e}")),
            ..line
        }
        .to_line()
        .unwrap_or_default(),
    }
}
