//! Reading one `truecold-vmm` stdout into what a bundle row needs, through the shared report
//! type (`truecold_proto::report`), the same type the verifier reads `reports.jsonl` with.
//!
//! Boot ids: a Linux row carries the boot id of the guest's verified `reply`. The probe
//! guest has no kernel and so no boot id: its row's boot id stays empty, and its strict-ready
//! criterion is the VMM's verified liveness echo of the fresh nonce.
//!
//! A VMM that failed before its guest ran prints an [`ErrorReport`] instead of a report; its
//! kebab-case kind becomes the row's `vmm_<kind>` error.

use super::process_launcher::Attempt;
use super::sample::Observed;
use truecold_proto::kinds::ErrorKind;
use truecold_proto::report::{ErrorReport, ReportCore, ReportError, VmmOutput};

/// The VMM's failure kind when its deadline fired (`GuestFailure::Deadline`).
pub const VMM_DEADLINE: &str = "deadline";

/// Parses the VMM's stdout as either of its outputs.
pub fn parse_output(stdout: &[u8], truncated: bool) -> Result<VmmOutput, ReportError> {
    if truncated {
        return Err(ReportError::Truncated);
    }
    VmmOutput::parse(stdout)
}

/// Projects a report onto a row's needs.
pub fn observe(r: &ReportCore) -> Observed {
    let mut error = (!r.outcome.ok).then(|| {
        let kind = match r.outcome.failure_kind.as_deref() {
            // The VMM's own deadline timer fires at the same instant the harness would kill
            // it: the one `deadline` kind (the classifier splits off post-ready overruns).
            Some(VMM_DEADLINE) => ErrorKind::Deadline,
            Some(k) => ErrorKind::vmm(k).unwrap_or(ErrorKind::Vmm("failed".into())),
            None => ErrorKind::Vmm("failed".into()),
        };
        (
            kind,
            r.outcome
                .failure
                .clone()
                .unwrap_or_else(|| "the VMM reports failure".into()),
        )
    });
    let lv = &r.liveness;
    // Only the verified reply's boot id: the binding ties it to this boot's nonce.
    let boot_id = lv.reply_boot_id;
    // The reply (bound to the nonce) and the record must come from the same boot.
    if let (Some(reply), Some(record)) = (boot_id, r.guest_record.as_ref().and_then(|g| g.boot_id))
    {
        if reply != record {
            error.get_or_insert((
                ErrorKind::BootIdMismatch,
                format!("the reply says boot id {reply}, the record {record}"),
            ));
        }
    }
    let m = &r.memory_figures;
    Observed {
        stamps: r.stamps,
        strict_ready_verified: lv.verified,
        memslots: Some(m.memslots),
        e820_usable: Some(m.e820_ram),
        guest_ram: m.guest,
        boot_id,
        guest: r.guest_record.clone(),
        guest_exit_code: r.outcome.guest_exit_code,
        protocol_errors: r.protocol_error_count,
        error,
        cmdline: r.guest_cmdline.clone(),
        backing: Some(r.backing_obtained),
        host_mapping: None,
        mapping_error: None,
    }
}

/// Projects a pre-guest error report: no stamps, only the typed error.
pub fn observe_error(e: &ErrorReport) -> Observed {
    Observed {
        error: Some((
            ErrorKind::vmm(&e.error.kind).unwrap_or(ErrorKind::Vmm("unknown".into())),
            e.error.message.clone(),
        )),
        ..Observed::default()
    }
}

/// Stdout of one attempt → observation (the campaign's `observe` hook).
pub fn observe_attempt(a: &Attempt) -> Result<Observed, String> {
    match parse_output(&a.stdout, a.stdout_truncated) {
        Ok(VmmOutput::Boot(r)) => Ok(observe(&r)),
        Ok(VmmOutput::Error(e)) => Ok(observe_error(&e)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_guest_error_report_becomes_a_typed_vmm_error() {
        let out = br#"{"schema":3,"error":{"kind":"kernel-missing","message":"cannot open kernel /x: No such file"}}"#;
        let o = match parse_output(out, false).expect("parses") {
            VmmOutput::Error(e) => observe_error(&e),
            VmmOutput::Boot(_) => panic!("an error report parsed as a boot report"),
        };
        let (kind, msg) = o.error.clone().expect("an error");
        assert_eq!(kind.as_string(), "vmm_kernel_missing");
        assert!(msg.contains("/x"));
        assert_eq!(o.stamps, truecold_proto::measure::Stamps::default());
        assert!(matches!(
            parse_output(br#"{"schema":3,"error":{"kind":3}}"#, false),
            Err(ReportError::BadError(_))
        ));
        assert_eq!(parse_output(b"{}", true), Err(ReportError::Truncated));
    }

    /// A real-shaped VMM deadline report, through the adapter and the classifier: `deadline`
    /// before strict-ready, `post_ready_overrun` after a verified strict-ready in time.
    #[test]
    fn a_vmm_deadline_report_is_the_deadline_kind() {
        use crate::campaign::process_launcher::{Attempt, End};
        use crate::campaign::sample::{to_sample, RowContext};
        use truecold_proof::schema::ContractKind;
        use truecold_proto::measure::Stamps;
        use truecold_proto::report::{Liveness, LivenessKind, MemoryFigures, Outcome};
        let report = |ready: bool| ReportCore {
            schema: truecold_proto::report::REPORT_SCHEMA,
            transport: truecold_proto::kinds::Transport::Ports,
            stamps: Stamps {
                request: Some(1_000),
                boot_start: Some(2_000),
                kvm_open: Some(3_000),
                vm_created: Some(4_000),
                memory_ready: Some(5_000),
                kernel_loaded: Some(6_000),
                first_run: Some(7_000),
                init_doorbell: Some(8_000),
                ready_doorbell: Some(9_000),
                strict_ready: ready.then_some(10_000),
                exit: Some(50_000),
                teardown_done: Some(51_000),
                ..Stamps::default()
            },
            memory_figures: MemoryFigures {
                configured: 64 << 20,
                memslots: 64 << 20,
                e820_ram: 64 << 20,
                e820_hole_reserved: 0,
                guest: Some(64 << 20),
            },
            backing_obtained: truecold_proto::kinds::ObtainedBacking::Anon4k,
            vmm_rss_bytes: None,
            liveness: Liveness {
                verified: ready,
                ..Liveness::new(LivenessKind::ProbeEcho)
            },
            guest_record: None,
            protocol_error_count: 0,
            protocol_errors: vec![],
            guest_cmdline: None,
            accounting: None,
            guest_trace: None,
            rip_samples: None,
            containment: None,
            outcome: Outcome {
                ok: false,
                failure_kind: Some(VMM_DEADLINE.into()),
                failure: Some("the guest did not finish within the 40 µs deadline".into()),
                guest_exit_code: None,
            },
        };
        for (ready, want) in [(false, "deadline"), (true, "post_ready_overrun")] {
            let a = Attempt {
                slot: crate::campaign::schedule::Slot {
                    index: 0,
                    level: 1,
                    intended_ns: 0,
                },
                request_ns: 1_000,
                reaped_ns: 52_000,
                deadline_ns: 40_000,
                end: End::Exited(1),
                stdout: serde_json::to_vec(&report(ready)).expect("serializes"),
                stdout_truncated: false,
                stderr_tail: String::new(),
            };
            let o = observe_attempt(&a).expect("a report");
            let ctx = RowContext {
                contract: ContractKind::Probe,
                intended: false,
                concurrency_override: None,
                mem_bytes: 64 << 20,
                vcpus: 1,
                observer: truecold_proto::kinds::Observer::VmExit,
                engine: truecold_proto::kinds::Engine::Truecold,
                backing: truecold_proto::kinds::Backing::Anon,
                ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
                cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
            };
            assert_eq!(to_sample(&a, Some(&o), None, &ctx).error_kind, want);
        }
    }

    #[test]
    fn unusable_stdout_says_why() {
        assert_eq!(parse_output(b"", false), Err(ReportError::Empty));
        assert!(matches!(
            parse_output(b"{\"schema\":3}", false),
            Err(ReportError::BadReport(_))
        ));
        assert!(matches!(
            parse_output(b"\xff", false),
            Err(ReportError::NotJson(_))
        ));
    }
}
