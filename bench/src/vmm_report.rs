//! Reading one `truecold-vmm` report (its stdout, one JSON [`BootReport`]) into what a bundle
//! row needs. The report type is the VMM library's own; nothing here re-declares it.
//!
//! Boot ids: a Linux row carries the boot id of the guest's verified `reply`. The probe
//! guest has no kernel and so no boot id: its row's boot id stays empty, and its strict-ready
//! criterion is the VMM's verified liveness echo of the fresh nonce.
//!
//! A VMM that failed before its guest ran prints an [`ErrorReport`] instead of a report; its
//! kebab-case kind becomes the row's `vmm_<kind>` error.

use crate::sample::{Observed, Stamps};
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};
use truecold_vmm::report::{BootReport, ErrorReport, GuestRecordReport};

/// What the VMM printed: a boot report, or the error report of a boot that never ran.
#[derive(Debug)]
pub enum VmmOutput {
    Report(Box<BootReport>),
    Error(ErrorReport),
}

/// Parses the VMM's stdout. `Err` says why there is no usable report.
pub fn parse(stdout: &[u8], truncated: bool) -> Result<BootReport, String> {
    if truncated {
        return Err("the VMM's stdout exceeded the harness's limit (report truncated)".into());
    }
    let text =
        std::str::from_utf8(stdout).map_err(|_| "the VMM's stdout is not UTF-8".to_string())?;
    let text = text.trim();
    if text.is_empty() {
        return Err("the VMM printed no report".into());
    }
    serde_json::from_str(text).map_err(|e| format!("the VMM's report does not parse: {e}"))
}

/// Parses the VMM's stdout as either of its outputs: an object with an `error` member is an
/// [`ErrorReport`], anything else must be a [`BootReport`].
pub fn parse_output(stdout: &[u8], truncated: bool) -> Result<VmmOutput, String> {
    let is_error = !truncated
        && serde_json::from_slice::<serde_json::Value>(stdout)
            .is_ok_and(|v| v.get("error").is_some());
    if is_error {
        return serde_json::from_slice(stdout)
            .map(VmmOutput::Error)
            .map_err(|e| format!("the VMM's error report does not parse: {e}"));
    }
    parse(stdout, truncated).map(|r| VmmOutput::Report(Box::new(r)))
}

/// The row's error kind for a VMM error kind: `vmm_` + the kind, `-` → `_`.
pub fn vmm_error_kind(kind: &str) -> String {
    format!("vmm_{}", kind.replace('-', "_"))
}

fn guest_record(g: &GuestRecordReport) -> Result<GuestRecord, String> {
    let code = ErrorCode::ALL
        .iter()
        .copied()
        .find(|c| c.name() == g.code)
        .ok_or_else(|| format!("unknown guest code `{}`", g.code))?;
    let workload = match g.workload.as_str() {
        "BENCH_OK" => Workload::BenchOk,
        "not_run" => Workload::NotRun,
        other => Workload::Failed(
            ErrorCode::ALL
                .iter()
                .copied()
                .find(|c| *c != ErrorCode::Ok && c.name() == other)
                .ok_or_else(|| format!("unknown workload result `{other}`"))?,
        ),
    };
    let boot_id = match &g.boot_id {
        None => None,
        Some(s) => Some(BootId::parse(s).ok_or_else(|| format!("malformed boot id `{s}`"))?),
    };
    Ok(GuestRecord {
        boot_id,
        t_init_ns: g.t_init_ns,
        t_ready_ns: g.t_ready_ns,
        t_reply_ns: g.t_reply_ns,
        t_record_ns: g.t_record_ns,
        mem_configured: g.mem_configured,
        mem_firmware_ram: g.mem_firmware_ram,
        mem_total: g.mem_total,
        mem_probe: g.mem_probe,
        cpus: g.cpus,
        platform: g.platform.clone(),
        workload,
        code,
    })
}

/// The failure's stable kind: the serde tag of the VMM's `GuestFailure`, snake_cased.
fn failure_kind(r: &BootReport) -> (String, String) {
    match &r.outcome.failure {
        Some(f) => {
            let kind = serde_json::to_value(f)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
                .unwrap_or_else(|| "failure".into())
                .replace('-', "_");
            (kind, f.to_string())
        }
        None => (
            "failed".into(),
            format!("the VMM reports failure (stop: {:?})", r.outcome.stop),
        ),
    }
}

/// Projects a report onto a row's needs.
pub fn observe(r: &BootReport) -> Observed {
    let t = &r.timeline;
    let mut error = (!r.outcome.ok).then(|| failure_kind(r));
    let guest = match r.guest_record.as_ref().map(guest_record) {
        None => None,
        Some(Ok(g)) => Some(g),
        Some(Err(e)) => {
            error.get_or_insert(("bad_guest_record".into(), e));
            None
        }
    };
    let lv = &r.liveness;
    // Only a Linux reply carries a boot id; the probe's echo is liveness, not an identity.
    let boot_id = lv.reply_boot_id.as_deref().and_then(BootId::parse);
    // The reply (bound to the nonce) and the record must come from the same boot.
    if let (Some(reply), Some(record)) = (boot_id, guest.as_ref().and_then(|g| g.boot_id)) {
        if reply != record {
            error.get_or_insert((
                "boot_id_mismatch".into(),
                format!("the reply says boot id {reply}, the record {record}"),
            ));
        }
    }
    Observed {
        stamps: Stamps {
            boot_start: t.boot_start,
            kvm_open: t.kvm_open,
            vm_created: t.vm_created,
            memory_ready: t.memory_ready,
            kernel_loaded: t.kernel_loaded,
            first_run: t.first_run,
            init_doorbell: t.init_doorbell,
            ready_doorbell: t.ready_doorbell,
            strict_ready: t.strict_ready,
            record: t.record,
        },
        strict_ready_verified: lv.verified,
        memslots: Some(r.memory.memslot_bytes),
        e820_usable: Some(r.memory.e820_ram_bytes),
        guest_ram: r.memory.guest_bytes,
        boot_id,
        guest,
        error,
        cmdline: (r.probe.is_none()).then(|| r.kernel.cmdline.clone()),
        backing: Some(r.backing.obtained.clone()),
    }
}

/// Projects a pre-guest error report: no stamps, only the typed error.
pub fn observe_error(e: &ErrorReport) -> Observed {
    Observed {
        error: Some((e.error.kind.replace('-', "_"), e.error.message.clone())),
        ..Observed::default()
    }
}

/// Stdout of one attempt → observation (the campaign's `observe` hook).
pub fn observe_attempt(a: &crate::launch::Attempt) -> Result<Observed, String> {
    parse_output(&a.stdout, a.stdout_truncated).map(|o| match o {
        VmmOutput::Report(r) => observe(&r),
        VmmOutput::Error(e) => observe_error(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_guest_error_report_becomes_a_typed_vmm_error() {
        let out = br#"{"schema":1,"error":{"kind":"kernel-missing","message":"cannot open kernel /x: No such file"}}"#;
        let o = match parse_output(out, false).unwrap() {
            VmmOutput::Error(e) => observe_error(&e),
            VmmOutput::Report(_) => panic!("an error report parsed as a boot report"),
        };
        let (kind, msg) = o.error.clone().unwrap();
        assert_eq!(vmm_error_kind(&kind), "vmm_kernel_missing");
        assert!(msg.contains("/x"));
        assert_eq!(o.stamps, crate::sample::Stamps::default());
        assert!(parse_output(br#"{"schema":1,"error":{"kind":3}}"#, false)
            .unwrap_err()
            .contains("error report does not parse"));
        assert!(parse_output(b"{}", true).unwrap_err().contains("truncated"));
    }

    #[test]
    fn unusable_stdout_says_why() {
        assert!(parse(b"", false).unwrap_err().contains("no report"));
        assert!(parse(b"{\"schema\":1}", false)
            .unwrap_err()
            .contains("does not parse"));
        assert!(parse(b"\xff", false).unwrap_err().contains("UTF-8"));
        assert!(parse(b"{}", true).unwrap_err().contains("truncated"));
    }
}
