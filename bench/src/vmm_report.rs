//! Reading one `truecold-vmm` report (its stdout, one JSON [`BootReport`]) into what a bundle
//! row needs. The report type is the VMM library's own; nothing here re-declares it.
//!
//! Boot ids: a Linux row carries the boot id of the guest's verified `reply`. The probe
//! guest has no kernel and so no boot id; its row carries the 16 bytes it echoed back for
//! the fresh nonce (verified by the VMM), written as a UUID. That value is unique per boot
//! exactly when the VMM's liveness exchange is fresh, so the repeated-id check still
//! catches a replayed or reused boot.

use crate::sample::{Observed, Stamps};
use truecold_proto::{BootId, ErrorCode, GuestRecord, Workload};
use truecold_vmm::report::{BootReport, GuestRecordReport};

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

/// The probe's verified echo as a UUID-formatted id (see the module docs).
pub fn probe_echo_id(answer_hex: &str) -> Option<BootId> {
    let b = truecold_proto::unhex::<16>(answer_hex)?;
    let h = truecold_proto::hex(&b);
    BootId::parse(&format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
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
    let boot_id = match (lv.reply_boot_id.as_deref(), lv.answer.as_deref()) {
        (Some(b), _) => BootId::parse(b),
        (None, Some(a)) if lv.verified && r.probe.is_some() => probe_echo_id(a),
        _ => None,
    };
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
        memslots: Some(r.memory.memslot_bytes),
        e820_usable: Some(r.memory.e820_ram_bytes),
        boot_id,
        guest,
        error,
        cmdline: (r.probe.is_none()).then(|| r.kernel.cmdline.clone()),
        backing: Some(r.backing.obtained.clone()),
    }
}

/// Stdout of one attempt → observation (the campaign's `observe` hook).
pub fn observe_attempt(a: &crate::launch::Attempt) -> Result<Observed, String> {
    parse(&a.stdout, a.stdout_truncated).map(|r| observe(&r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_becomes_a_uuid_shaped_id() {
        let id = probe_echo_id("00112233445566778899aabbccddeeff").unwrap();
        assert_eq!(id.as_str(), "00112233-4455-6677-8899-aabbccddeeff");
        assert!(probe_echo_id("0011").is_none());
        assert!(probe_echo_id("zz112233445566778899aabbccddeeff").is_none());
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
