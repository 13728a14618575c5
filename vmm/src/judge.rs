//! The first failure of a boot that ran: what the devices learned from the guest
//! ([`GuestView`], detached from the bus after the run), judged in order of cause
//! ([`judge`], pure).

use truecold_proto::kinds::{RamLayout, Transport};
use truecold_proto::report::{Liveness, MemoryFigures};

use crate::boot_params;
use crate::config::BootConfig;
use crate::devices::{self, Bus, StopReason};
use crate::probe::{ProbeReport, ProbeSummary};
use crate::report::GuestFailure;
use crate::run::{RunEnd, RunError};

/// What the devices learned from the guest, detached from the bus.
pub struct GuestView {
    pub exits: devices::ExitCounts,
    pub liveness: Liveness,
    pub record: Option<truecold_proto::GuestRecord>,
    pub probe: Option<ProbeReport>,
    pub protocol_error_count: u64,
    pub protocol_errors: Vec<String>,
    pub guest_bytes: Option<u64>,
    pub last_phase: Option<u8>,
    pub rss_at_strict_ready: Option<u64>,
    pub exit_after_ready: Option<bool>,
    /// APs the guest never started (the run's `never_started`).
    pub vcpus_not_started: Vec<usize>,
}

impl GuestView {
    /// Takes what the bus holds after the run (the probe guest's summary judged against `e820`).
    pub fn collect(bus: Bus, cfg: &BootConfig, e820: &[boot_params::E820Entry]) -> Self {
        let probe = cfg.is_probe().then(|| {
            ProbeReport::judge(
                ProbeSummary::parse(bus.probe_summary_bytes()),
                e820,
                cfg.vcpus,
                cfg.kernel
                    .touch_stride()
                    .unwrap_or(crate::probe::TOUCH_STRIDE),
                bus.ap_checkins.clone(),
            )
        });
        let guest_bytes = match &probe {
            Some(p) => p.summary.as_ref().map(|s| s.ram_bytes),
            None => bus.record.as_ref().map(|r| r.mem_firmware_ram),
        };
        GuestView {
            exits: bus.exits,
            liveness: bus.liveness,
            record: bus.record,
            probe,
            protocol_error_count: bus.protocol_error_count,
            protocol_errors: bus.protocol_errors,
            guest_bytes,
            last_phase: bus.last_phase,
            rss_at_strict_ready: bus.rss_at_strict_ready,
            exit_after_ready: bus.exit_after_ready,
            vcpus_not_started: Vec::new(),
        }
    }
}

/// The first failure of a boot that ran, in order of cause (pure given its inputs).
pub fn judge(
    deadline_ms: u64,
    transport: Transport,
    end: &RunEnd,
    errors: &[RunError],
    g: &GuestView,
    mem: &MemoryFigures,
    how: RamLayout,
) -> Option<GuestFailure> {
    match end {
        RunEnd::Deadline => {
            return Some(GuestFailure::Deadline {
                deadline_ms,
                last_phase: g.last_phase,
            })
        }
        RunEnd::VcpuFailed(_) => {
            return Some(GuestFailure::Vcpu {
                message: errors
                    .iter()
                    .map(|e| truecold_proto::measure::error_chain(e))
                    .collect::<Vec<_>>()
                    .join("; "),
            })
        }
        RunEnd::Stopped(StopReason::ExitPort(0)) => {}
        RunEnd::Stopped(StopReason::ExitPort(code)) => {
            return Some(GuestFailure::ExitCode {
                code: *code,
                name: Bus::code_name(*code),
            })
        }
        RunEnd::Stopped(StopReason::Reset) => return Some(GuestFailure::Reset),
        RunEnd::Stopped(StopReason::Shutdown(vcpu)) => {
            return Some(GuestFailure::Shutdown { vcpu: *vcpu })
        }
        RunEnd::Stopped(StopReason::SystemEvent(event)) => {
            return Some(GuestFailure::SystemEvent { event: *event })
        }
    }
    // A guest that finished with vCPUs it never started did not boot the machine it was
    // given, whatever it says (its record's CPU count is its own word).
    if !g.vcpus_not_started.is_empty() {
        return Some(GuestFailure::VcpusNotStarted {
            vcpus: g.vcpus_not_started.clone(),
        });
    }
    if matches!(transport, Transport::Serial | Transport::Vsock) {
        // The bench judges liveness, the record and the memory on the serial; the VMM
        // judges what it sees: the exit after the Ready doorbell, and no protocol error.
        if g.exit_after_ready != Some(true) {
            return Some(GuestFailure::ExitBeforeReady);
        }
        if g.protocol_error_count > 0 {
            return Some(GuestFailure::Protocol {
                count: g.protocol_error_count,
                first: g.protocol_errors.first().cloned().unwrap_or_default(),
            });
        }
        return None;
    }
    if !g.liveness.verified {
        return Some(GuestFailure::NotStrictReady {
            detail: if g.protocol_errors.is_empty() {
                "no answer to the challenge".to_string()
            } else {
                g.protocol_errors.join("; ")
            },
        });
    }
    if let Some(p) = &g.probe {
        if !p.ok() {
            return Some(GuestFailure::Probe {
                detail: format!(
                    "checksum_ok={} touched_ok={} ram_ok={} aps_ok={} summary_error={:?}",
                    p.checksum_ok, p.touched_ok, p.ram_ok, p.aps_ok, p.summary_error
                ),
            });
        }
    } else {
        match &g.record {
            None => return Some(GuestFailure::RecordMissing),
            Some(r)
                if r.code != truecold_proto::ErrorCode::Ok
                    || r.workload != truecold_proto::Workload::BenchOk =>
            {
                return Some(GuestFailure::RecordFailed {
                    code: r.code,
                    workload: r.workload,
                });
            }
            Some(_) => {}
        }
    }
    if let Some(rule) = mem.problem(how) {
        return Some(GuestFailure::MemoryDisagrees {
            layout: how,
            configured: mem.configured,
            memslots: mem.memslots,
            e820: mem.e820_ram,
            hole_reserved: mem.e820_hole_reserved,
            guest: mem.guest,
            rule,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory;
    use truecold_proto::limits::GuestMem;

    fn mib(n: u64) -> GuestMem {
        GuestMem::from_mib(n).expect("a size within the limits")
    }

    fn view(record: Option<truecold_proto::GuestRecord>, verified: bool) -> GuestView {
        let mut liveness = Liveness::new(truecold_proto::report::LivenessKind::Binding);
        liveness.verified = verified;
        GuestView {
            exits: devices::ExitCounts::default(),
            liveness,
            guest_bytes: record.as_ref().map(|r| r.mem_firmware_ram),
            record,
            probe: None,
            protocol_error_count: 0,
            protocol_errors: vec![],
            last_phase: Some(2),
            rss_at_strict_ready: None,
            exit_after_ready: Some(true),
            vcpus_not_started: vec![],
        }
    }

    fn mem(guest: Option<u64>) -> MemoryFigures {
        let ranges = memory::layout(mib(128), RamLayout::AroundHole);
        let e820 = boot_params::e820(&ranges, RamLayout::AroundHole);
        MemoryFigures {
            configured: 128 << 20,
            memslots: 128 << 20,
            e820_ram: boot_params::e820_ram(&e820),
            e820_hole_reserved: boot_params::e820_hole_reserved(&e820, RamLayout::AroundHole),
            guest,
        }
    }

    fn record(code: truecold_proto::ErrorCode, ram: u64) -> truecold_proto::GuestRecord {
        truecold_proto::GuestRecord {
            boot_id: None,
            t_init_ns: 1,
            t_ready_ns: 2,
            t_reply_ns: 3,
            t_record_ns: 4,
            mem_configured: 128 << 20,
            mem_firmware_ram: ram,
            mem_total: 1,
            mem_present: 0,
            mem_managed: 0,
            mem_probe: 1,
            cpus: 2,
            platform: Default::default(),
            workload: if code == truecold_proto::ErrorCode::Ok {
                truecold_proto::Workload::BenchOk
            } else {
                truecold_proto::Workload::NotRun
            },
            code,
        }
    }

    #[test]
    fn judge_orders_failures() {
        use truecold_proto::ErrorCode;
        const DEADLINE_MS: u64 = 10_000;
        let ok_end = RunEnd::Stopped(StopReason::ExitPort(0));
        let good = record(ErrorCode::Ok, 128 << 20);
        assert_eq!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &ok_end,
                &[],
                &view(Some(good.clone()), true),
                &mem(Some(128 << 20)),
                RamLayout::AroundHole
            ),
            None
        );
        let f = judge(
            DEADLINE_MS,
            Transport::Ports,
            &RunEnd::Stopped(StopReason::ExitPort(41)),
            &[],
            &view(None, false),
            &mem(None),
            RamLayout::AroundHole,
        );
        assert_eq!(
            f,
            Some(GuestFailure::ExitCode {
                code: 41,
                name: "mem_firmware_mismatch".into()
            })
        );
        assert!(matches!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &ok_end,
                &[],
                &view(Some(good.clone()), false),
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::NotStrictReady { .. })
        ));
        assert_eq!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &ok_end,
                &[],
                &view(None, true),
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::RecordMissing)
        );
        assert!(matches!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &ok_end,
                &[],
                &view(Some(record(ErrorCode::Network, 128 << 20)), true),
                &mem(Some(128 << 20)),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::RecordFailed { .. })
        ));
        assert!(matches!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &ok_end,
                &[],
                &view(Some(record(ErrorCode::Ok, 1 << 20)), true),
                &mem(Some(1 << 20)),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::MemoryDisagrees { .. })
        ));
        // APs never started fail a boot that is otherwise clean, under either transport.
        let mut aps = view(Some(good.clone()), true);
        aps.vcpus_not_started = vec![1, 3];
        for transport in [Transport::Ports, Transport::Serial] {
            let f = judge(
                DEADLINE_MS,
                transport,
                &ok_end,
                &[],
                &aps,
                &mem(Some(128 << 20)),
                RamLayout::AroundHole,
            );
            assert_eq!(f, Some(GuestFailure::VcpusNotStarted { vcpus: vec![1, 3] }));
            assert_eq!(f.map(|f| f.kind()), Some("vcpus_not_started"));
        }
        assert_eq!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &RunEnd::Stopped(StopReason::Reset),
                &[],
                &view(None, true),
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::Reset)
        );
        assert!(matches!(
            judge(
                DEADLINE_MS,
                Transport::Ports,
                &RunEnd::Deadline,
                &[],
                &view(None, false),
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::Deadline {
                deadline_ms: 10_000,
                last_phase: Some(2)
            })
        ));
    }

    #[test]
    fn judge_under_the_serial_transport() {
        const DEADLINE_MS: u64 = 10_000;
        let ok_end = RunEnd::Stopped(StopReason::ExitPort(0));
        let judge_serial = |end: &RunEnd, g: &GuestView| {
            judge(
                DEADLINE_MS,
                Transport::Serial,
                end,
                &[],
                g,
                &mem(None),
                RamLayout::AroundHole,
            )
        };
        // No challenge, no record, no guest memory figure: the bench judges those.
        let mut g = view(None, false);
        assert_eq!(judge_serial(&ok_end, &g), None);
        g.exit_after_ready = Some(false);
        assert_eq!(
            judge_serial(&ok_end, &g),
            Some(GuestFailure::ExitBeforeReady)
        );
        g.exit_after_ready = None;
        assert_eq!(
            judge_serial(&ok_end, &g),
            Some(GuestFailure::ExitBeforeReady)
        );
        g.exit_after_ready = Some(true);
        g.protocol_error_count = 3;
        g.protocol_errors = vec!["challenge port read under the serial transport".into()];
        let f = judge_serial(&ok_end, &g).unwrap();
        assert_eq!(f.kind(), "protocol");
        assert_eq!(
            f,
            GuestFailure::Protocol {
                count: 3,
                first: "challenge port read under the serial transport".into()
            }
        );
        // The run's end comes first, as under the ports.
        assert!(matches!(
            judge_serial(&RunEnd::Deadline, &g),
            Some(GuestFailure::Deadline { .. })
        ));
        assert!(matches!(
            judge_serial(
                &RunEnd::Stopped(StopReason::ExitPort(41)),
                &view(None, false)
            ),
            Some(GuestFailure::ExitCode { code: 41, .. })
        ));
    }

    #[test]
    fn vsock_transport_is_judged_like_serial() {
        let ok_end = RunEnd::Stopped(StopReason::ExitPort(0));
        let mut g = view(None, false);
        // No challenge, no record: the bench reads them on the agent channel.
        assert_eq!(
            judge(
                10_000,
                Transport::Vsock,
                &ok_end,
                &[],
                &g,
                &mem(None),
                RamLayout::AroundHole
            ),
            None
        );
        g.exit_after_ready = Some(false);
        assert_eq!(
            judge(
                10_000,
                Transport::Vsock,
                &ok_end,
                &[],
                &g,
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::ExitBeforeReady)
        );
        // Under the ports the same view fails (no verified challenge).
        g.exit_after_ready = Some(true);
        assert!(matches!(
            judge(
                10_000,
                Transport::Ports,
                &ok_end,
                &[],
                &g,
                &mem(None),
                RamLayout::AroundHole
            ),
            Some(GuestFailure::NotStrictReady { .. })
        ));
    }
}
