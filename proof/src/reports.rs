//! `reports.jsonl`: the per-attempt evidence behind each row. Line `i` holds row `i`'s
//! harness marks (intended, request, reaped) and what the VMM printed (its whole JSON report,
//! diagnostics included, or why there was none). The verifier re-derives every row figure it
//! can from the line — the stages through the one tiling function, the headline, the boot id,
//! memory, CPUs, platform, workload and protocol-error count — and reports each disagreement.

use serde::{Deserialize, Serialize};
use truecold_proto::measure::Stamps;
use truecold_proto::report::{ReportCore, VmmOutput};

use crate::schema::{ContractKind, Sample, Stage, StageKind};

/// File name in a bundle.
pub const REPORTS_FILE: &str = "reports.jsonl";

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

/// Checks the file (read line by line, each line capped at [`MAX_LINE`]) against `samples`
/// and the contract's deadline; every disagreement is one string, at most `max` of them.
pub fn check<R: std::io::BufRead>(
    mut file: R,
    samples: &[Sample],
    deadline_ns: u64,
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
                // Skip the rest of the overlong line.
                let mut rest = Vec::new();
                file.read_until(b'\n', &mut rest)?;
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
                    for why in check_row(&parsed, s, deadline_ns) {
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

/// What in `s` disagrees with its evidence `l`.
pub fn check_row(l: &ReportLine, s: &Sample, deadline_ns: u64) -> Vec<String> {
    let mut bad = Vec::new();
    if l.index != s.index {
        bad.push(format!("the report line is for index {}", l.index));
        return bad;
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
    let at = l
        .vmm
        .as_ref()
        .and_then(|v| v.pointer("/config/deadline/at-ns"))
        .and_then(serde_json::Value::as_u64);
    if at != Some(origin.saturating_add(deadline_ns)) {
        bad.push(format!(
            "the VMM was given the deadline {at:?}, not origin + {deadline_ns} ns"
        ));
    }
    if core.stamps.request != Some(l.harness.request) {
        bad.push(format!(
            "the VMM echoes request {:?}, the harness stamped {}",
            core.stamps.request, l.harness.request
        ));
    }
    let stamps = Stamps {
        intended: l.harness.intended,
        request: Some(l.harness.request),
        reaped: l.harness.reaped,
        ..core.stamps
    };
    if stamps.strict_ready != s.ready_ns || stamps.latency() != s.latency_ns {
        bad.push(format!(
            "ready/latency {:?}/{:?} in the row, {:?}/{:?} from the report",
            s.ready_ns,
            s.latency_ns,
            stamps.strict_ready,
            stamps.latency()
        ));
    }
    let tiles = stamps.tile();
    for st in Stage::ALL
        .into_iter()
        .filter(|st| st.kind() != StageKind::Guest)
    {
        if tiles.get(st) != s.stages.get(st) {
            bad.push(format!(
                "stage {}: {:?} in the row, {:?} from the report",
                st.name(),
                s.stages.get(st),
                tiles.get(st)
            ));
        }
    }
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
    let g = core.guest_record.as_ref();
    match s.contract {
        ContractKind::Linux => {
            if s.boot_id != core.liveness.reply_boot_id {
                bad.push(format!(
                    "boot id {:?} in the row, the verified reply's is {:?}",
                    s.boot_id.map(|b| b.to_string()),
                    core.liveness.reply_boot_id.map(|b| b.to_string())
                ));
            }
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
            if !same {
                bad.push(
                    "guest figures (memory, CPUs, platform, workload) differ from the record"
                        .into(),
                );
            }
        }
        ContractKind::Probe => {
            if s.guest_mem_firmware != f.guest {
                bad.push("the probe's RAM figure differs from the report".into());
            }
        }
    }
    bad
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
        let c = |b: &[u8]| check(b, one, 1, 10).expect("reads");
        assert!(c(b"")[0].contains("0 lines for 1 rows"));
        assert!(c(b"{\n")[0].contains("does not parse"));
        assert!(c(b"{}")[0].contains("no final newline"));
        let long = vec![b'x'; MAX_LINE + 10];
        assert!(c(&long)[0].contains("longer than"));
        assert!(c(b"{}\n{}\n").iter().any(|m| m.contains("no row 1")));
    }
}
