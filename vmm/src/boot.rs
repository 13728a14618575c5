//! The boot recipe, top-down: each stage is one function in its own module, each stamped.
use std::sync::Mutex;

use truecold_proto::limits::{GuestMem, LimitError, Vcpus};
use vm_memory::{Bytes, GuestAddress};

use crate::boot_params;
use crate::config::{BootConfig, Deadline};
use crate::cpu::{self, CpuError};
use crate::devices::{self, Bus, DeviceError, StopReason};
use crate::host::{self, HostKind};
use crate::kvm::{self, KvmError};
use crate::loader::{self, KernelSource, LoaderError};
use crate::memory::{self, MemoryError};
use crate::mptable;
use crate::probe::{ProbeReport, ProbeSummary};
use crate::report::{
    BootReport, GuestFailure, GuestRecordReport, HostReport, MemoryReport, Outcome, SCHEMA,
};
use crate::run::{self, RunEnd, RunError};
use crate::timeline::{now_ns, process_start_ns, Timeline};
use crate::vm::{self, VmError};

/// Invalid configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Limit(LimitError),
    #[error("--deadline-ms must be positive")]
    Deadline,
}

/// Why a boot failed. Every variant but `Guest` happens before the guest runs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration")]
    Config(#[source] ConfigError),
    #[error(
        "this host's /dev/kvm is kvm-pvm, a software backend on which an unmodified Linux \
         kernel cannot boot (it dies in the instruction emulator); boot the probe guest \
         here (`truecold-vmm boot --probe`), run the real kernel under the nested harness \
         (QEMU TCG with an emulated SVM CPU, see vmm/README.md), or pass --force to try anyway"
    )]
    HostCannotBootLinux,
    #[error("/dev/kvm is absent or unusable")]
    Kvm(#[source] KvmError),
    #[error("cannot create the VM")]
    Vm(#[source] VmError),
    #[error("cannot set up guest memory")]
    Memory(#[source] MemoryError),
    #[error("cannot load the kernel")]
    Loader(#[source] LoaderError),
    #[error("cannot write the MP table")]
    MpTable(#[source] vm_memory::GuestMemoryError),
    #[error("cannot set up the vCPUs")]
    Cpu(#[source] CpuError),
    #[error("cannot set up the devices")]
    Devices(#[source] DeviceError),
    #[error("cannot run the vCPUs")]
    Run(#[source] RunError),
    #[error("the guest failed")]
    Guest {
        #[source]
        failure: GuestFailure,
        /// The full report of the failed boot (printed by the CLI all the same).
        report: Box<BootReport>,
    },
}

impl Error {
    /// Stable kebab-case kind of the failure, printed in the CLI's JSON error report
    /// (`{"schema":1,"error":{"kind":…,"message":…}}`, see vmm/README.md).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(ConfigError::Limit(e)) => e.kind(),
            Error::Config(ConfigError::Deadline) => "invalid-deadline",
            Error::HostCannotBootLinux => "host-cannot-boot-linux",
            Error::Kvm(e) => e.kind(),
            Error::Vm(_) => "vm-create-failed",
            Error::Memory(e) => e.kind(),
            Error::Loader(e) => e.kind(),
            Error::MpTable(_) => "boot-data-write-failed",
            Error::Cpu(CpuError::Count(e)) => e.kind(),
            Error::Cpu(_) => "vcpu-setup-failed",
            Error::Devices(_) => "device-setup-failed",
            Error::Run(_) => "vcpu-run-failed",
            Error::Guest { .. } => "guest-failed",
        }
    }
}

/// `e` and its sources, `: `-separated.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Checks `cfg` against the limits of `truecold_proto::limits` (pure).
pub fn validate(cfg: &BootConfig) -> Result<(), ConfigError> {
    Vcpus::new(u64::from(cfg.vcpus)).map_err(ConfigError::Limit)?;
    GuestMem::from_mib(cfg.mem_mib).map_err(ConfigError::Limit)?;
    if cfg.deadline == Deadline::AfterBootStartMs(0) {
        return Err(ConfigError::Deadline);
    }
    Ok(())
}

fn refuse_linux_on_pvm(cfg: &BootConfig, kind: HostKind) -> Result<(), Error> {
    if kind == HostKind::Pvm && matches!(cfg.kernel, KernelSource::File(_)) && !cfg.force {
        return Err(Error::HostCannotBootLinux);
    }
    Ok(())
}

/// Boots one VM per `cfg` and returns its report; a guest that ran but failed gives
/// [`Error::Guest`], which carries the report.
pub fn run(cfg: &BootConfig) -> Result<BootReport, Error> {
    validate(cfg).map_err(Error::Config)?;
    if let KernelSource::File(path) = &cfg.kernel {
        loader::check_kernel(path).map_err(Error::Loader)?;
    }
    let host_kind = HostKind::for_boot(cfg.host_kind);
    refuse_linux_on_pvm(cfg, host_kind.kind)?;

    // Checking the request is not boot work: the boot starts here (request → boot_start
    // holds the process start, argument parsing, validation and any host-kind detection).
    let boot_start = now_ns();
    let mut tl = Timeline {
        request: cfg.request_ns,
        boot_start: Some(boot_start),
        ..Timeline::default()
    };
    let deadline_at = cfg.deadline.at_ns(boot_start);

    let (kvm, kvm_caps) = kvm::open().map_err(Error::Kvm)?;
    tl.kvm_open = Some(now_ns());

    let vm = vm::create(&kvm).map_err(Error::Vm)?;
    tl.vm_created = Some(now_ns());

    let ram = memory::allocate(cfg.mem_mib, cfg.backing).map_err(Error::Memory)?;
    let rom_area = kvm.check_extension(kvm_ioctls::Cap::ReadonlyMem);
    memory::register(&vm, &ram, rom_area).map_err(Error::Memory)?;
    tl.memory_ready = Some(now_ns());

    let cmdline = boot_params::cmdline(cfg.console, ram.total(), &cfg.cmdline_extra)
        .map_err(|e| Error::Loader(LoaderError::Params(e)))?;
    let loaded = loader::load(&ram, &cfg.kernel, cfg.initramfs.as_deref(), &cmdline)
        .map_err(Error::Loader)?;
    ram.mem
        .write_slice(
            &mptable::build(cfg.vcpus, mptable::MPTABLE_ADDR),
            GuestAddress(mptable::MPTABLE_ADDR),
        )
        .map_err(Error::MpTable)?;
    tl.kernel_loaded = Some(now_ns());

    let vcpus = cpu::create(&kvm, &vm, cfg.vcpus, &loaded).map_err(Error::Cpu)?;
    let bus = Mutex::new(Bus::new(&vm, cfg.is_probe(), cfg.console).map_err(Error::Devices)?);
    tl.vcpus_ready = Some(now_ns());

    let out = run::run(vcpus, &bus, deadline_at).map_err(Error::Run)?;
    tl.first_run = out.first_run;
    tl.exit = Some(out.exit);

    let backing = memory::observe(&ram);
    let bus = bus.into_inner().unwrap_or_else(|p| p.into_inner());
    let vmm_rss_bytes = bus.rss_at_strict_ready;
    tl.init_doorbell = bus.stamps.init_doorbell;
    tl.ready_doorbell = bus.stamps.ready_doorbell;
    tl.strict_ready = bus.stamps.strict_ready;
    tl.record = bus.stamps.record;

    let memslots = ram.ranges.clone();
    let configured_bytes = cfg.mem_mib * memory::MIB;
    // Teardown: vCPU fds closed in their threads; now devices, VM, memory, /dev/kvm.
    let guest = GuestView::collect(&bus, cfg, &loaded.e820);
    drop(bus);
    drop(vm);
    drop(ram);
    drop(kvm);
    tl.teardown_done = Some(now_ns());
    // Informational (never in a duration): read after the boot, outside its window.
    tl.process_start = process_start_ns();

    let memslot_bytes: u64 = memslots.iter().map(|r| r.size).sum();
    let e820_ram_bytes = boot_params::e820_ram(&loaded.e820);
    let agree = guest.guest_bytes == Some(configured_bytes)
        && memslot_bytes == configured_bytes
        && e820_ram_bytes == configured_bytes;
    let memory = MemoryReport {
        configured_bytes,
        memslots,
        memslot_bytes,
        e820: loaded.e820.clone(),
        e820_ram_bytes,
        guest_bytes: guest.guest_bytes,
        agree,
    };
    let deadline_ms = cfg.deadline.budget_ms(cfg.request_ns.unwrap_or(boot_start));
    let failure = judge(deadline_ms, &out.end, &out.errors, &guest, &memory);
    let report = BootReport {
        schema: SCHEMA,
        config: cfg.clone(),
        durations: tl.durations(),
        timeline: tl,
        host: HostReport {
            kind: host_kind.kind,
            detected: host_kind.detected,
            forced: host_kind.forced,
            kernel: host::kernel_release(),
            hypervisor_signature: host::hypervisor_signature(),
            mem_total_bytes: host::host_mem_total(),
            kvm_caps,
        },
        memory,
        backing,
        vmm_rss_bytes,
        kernel: loaded,
        vcpus: cfg.vcpus,
        exits: guest.exits,
        liveness: guest.liveness,
        guest_record: guest.record,
        probe: guest.probe,
        protocol_errors: guest.protocol_errors,
        vcpu_errors: out.errors.iter().map(|e| chain(e)).collect(),
        vcpu_last_rip: out.last_rip.clone(),
        outcome: Outcome {
            ok: failure.is_none(),
            failure: failure.clone(),
            stop: match &out.end {
                RunEnd::Stopped(r) => Some(r.clone()),
                _ => None,
            },
            guest_exit_code: match &out.end {
                RunEnd::Stopped(StopReason::ExitPort(c)) => Some(*c),
                _ => None,
            },
        },
    };
    match failure {
        None => Ok(report),
        Some(failure) => Err(Error::Guest {
            failure,
            report: Box::new(report),
        }),
    }
}

/// What the devices learned from the guest, detached from the bus.
struct GuestView {
    exits: devices::ExitCounts,
    liveness: devices::Liveness,
    record: Option<GuestRecordReport>,
    probe: Option<ProbeReport>,
    protocol_errors: Vec<String>,
    guest_bytes: Option<u64>,
    last_phase: Option<u8>,
    record_raw: Option<truecold_proto::GuestRecord>,
}

impl GuestView {
    fn collect(bus: &Bus, cfg: &BootConfig, e820: &[boot_params::E820Entry]) -> Self {
        let probe = cfg.is_probe().then(|| {
            ProbeReport::judge(
                ProbeSummary::parse(bus.probe_summary_bytes()),
                e820,
                cfg.vcpus,
                bus.ap_checkins.clone(),
            )
        });
        let guest_bytes = match &probe {
            Some(p) => p.summary.as_ref().map(|s| s.ram_bytes),
            None => bus.record.as_ref().map(|r| r.mem_firmware_ram),
        };
        GuestView {
            exits: bus.exits.clone(),
            liveness: bus.liveness.clone(),
            record: bus.record.as_ref().map(GuestRecordReport::from),
            probe,
            protocol_errors: bus.protocol_errors.clone(),
            guest_bytes,
            last_phase: bus.last_phase,
            record_raw: bus.record.clone(),
        }
    }
}

/// The first failure of a boot that ran, in order of cause (pure given its inputs).
fn judge(
    deadline_ms: u64,
    end: &RunEnd,
    errors: &[RunError],
    g: &GuestView,
    mem: &MemoryReport,
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
                    .map(|e| chain(e))
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
        match &g.record_raw {
            None => return Some(GuestFailure::RecordMissing),
            Some(r)
                if r.code != truecold_proto::ErrorCode::Ok
                    || r.workload != truecold_proto::Workload::BenchOk =>
            {
                let rep = GuestRecordReport::from(r);
                return Some(GuestFailure::RecordFailed {
                    code: rep.code,
                    workload: rep.workload,
                });
            }
            Some(_) => {}
        }
    }
    if !mem.agree {
        return Some(GuestFailure::MemoryDisagrees {
            configured: mem.configured_bytes,
            memslots: mem.memslot_bytes,
            e820: mem.e820_ram_bytes,
            guest: mem.guest_bytes,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(record: Option<truecold_proto::GuestRecord>, verified: bool) -> GuestView {
        GuestView {
            exits: devices::ExitCounts::default(),
            liveness: devices::Liveness {
                verified,
                ..Default::default()
            },
            record: record.as_ref().map(GuestRecordReport::from),
            probe: None,
            protocol_errors: vec![],
            guest_bytes: record.as_ref().map(|r| r.mem_firmware_ram),
            last_phase: Some(2),
            record_raw: record,
        }
    }

    fn mem(guest: Option<u64>) -> MemoryReport {
        let ranges = memory::layout(128).unwrap();
        let e820 = boot_params::e820(&ranges);
        MemoryReport {
            configured_bytes: 128 << 20,
            memslot_bytes: 128 << 20,
            memslots: ranges,
            e820_ram_bytes: boot_params::e820_ram(&e820),
            e820,
            guest_bytes: guest,
            agree: guest == Some(128 << 20),
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
                &ok_end,
                &[],
                &view(Some(good.clone()), true),
                &mem(Some(128 << 20))
            ),
            None
        );
        let f = judge(
            DEADLINE_MS,
            &RunEnd::Stopped(StopReason::ExitPort(41)),
            &[],
            &view(None, false),
            &mem(None),
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
                &ok_end,
                &[],
                &view(Some(good.clone()), false),
                &mem(None)
            ),
            Some(GuestFailure::NotStrictReady { .. })
        ));
        assert_eq!(
            judge(DEADLINE_MS, &ok_end, &[], &view(None, true), &mem(None)),
            Some(GuestFailure::RecordMissing)
        );
        assert!(matches!(
            judge(
                DEADLINE_MS,
                &ok_end,
                &[],
                &view(Some(record(ErrorCode::Network, 128 << 20)), true),
                &mem(Some(128 << 20))
            ),
            Some(GuestFailure::RecordFailed { .. })
        ));
        assert!(matches!(
            judge(
                DEADLINE_MS,
                &ok_end,
                &[],
                &view(Some(record(ErrorCode::Ok, 1 << 20)), true),
                &mem(Some(1 << 20))
            ),
            Some(GuestFailure::MemoryDisagrees { .. })
        ));
        assert_eq!(
            judge(
                DEADLINE_MS,
                &RunEnd::Stopped(StopReason::Reset),
                &[],
                &view(None, true),
                &mem(None)
            ),
            Some(GuestFailure::Reset)
        );
        assert!(matches!(
            judge(
                DEADLINE_MS,
                &RunEnd::Deadline,
                &[],
                &view(None, false),
                &mem(None)
            ),
            Some(GuestFailure::Deadline {
                deadline_ms: 10_000,
                last_phase: Some(2)
            })
        ));
    }

    #[test]
    fn linux_refused_on_pvm_unless_forced() {
        let mut cfg = BootConfig::probe(1, 128, memory::Backing::Anon);
        assert!(refuse_linux_on_pvm(&cfg, HostKind::Pvm).is_ok());
        cfg.kernel = KernelSource::File("/vmlinux".into());
        let e = refuse_linux_on_pvm(&cfg, HostKind::Pvm).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("probe") && msg.contains("nested"), "{msg}");
        assert!(refuse_linux_on_pvm(&cfg, HostKind::Hardware).is_ok());
        cfg.force = true;
        assert!(refuse_linux_on_pvm(&cfg, HostKind::Pvm).is_ok());
    }

    #[test]
    fn pre_guest_errors_print_a_typed_json_error() {
        let kernel = Error::Loader(
            loader::check_kernel(std::path::Path::new("/nonexistent/vmlinux")).unwrap_err(),
        );
        assert_eq!(kernel.kind(), "kernel-missing");
        let corrupt = Error::Loader(LoaderError::UnknownFormat("/tmp/x".into()));
        assert_eq!(corrupt.kind(), "kernel-corrupt");
        let zero =
            Error::Config(validate(&BootConfig::probe(1, 0, memory::Backing::Anon)).unwrap_err());
        assert_eq!(zero.kind(), "memory-too-small");
        let zero_mem = Error::Memory(memory::allocate(0, memory::Backing::Anon).unwrap_err());
        assert_eq!(zero_mem.kind(), "memory-too-small");
        let huge = memory::allocate(u64::MAX >> 21, memory::Backing::Anon).unwrap_err();
        assert_eq!(Error::Memory(huge).kind(), "memory-too-large");
        assert_eq!(Error::HostCannotBootLinux.kind(), "host-cannot-boot-linux");
        let json = serde_json::to_value(crate::report::ErrorReport::of(&zero)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"schema": 1, "error": {
                "kind": "memory-too-small",
                "message": "invalid configuration: --mem-mib 0: guest memory below the minimum of 4 MiB"
            }})
        );
    }

    #[test]
    fn config_validation_at_every_limit_edge() {
        use truecold_proto::limits::{MAX_MEM_MIB, MAX_VCPUS, MIN_MEM_MIB};
        let cfg =
            |vcpus: u8, mem_mib: u64| BootConfig::probe(vcpus, mem_mib, memory::Backing::Anon);
        let limit = |c: &BootConfig| match validate(c) {
            Err(ConfigError::Limit(e)) => Some(e),
            Ok(()) => None,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(limit(&cfg(0, 128)), Some(LimitError::Vcpus { got: 0 }));
        assert_eq!(limit(&cfg(1, 128)), None);
        assert_eq!(limit(&cfg(MAX_VCPUS as u8, 128)), None);
        assert_eq!(
            limit(&cfg(MAX_VCPUS as u8 + 1, 128)),
            Some(LimitError::Vcpus { got: 33 })
        );
        assert_eq!(limit(&cfg(255, 128)), Some(LimitError::Vcpus { got: 255 }));
        assert_eq!(
            limit(&cfg(1, MIN_MEM_MIB - 1)),
            Some(LimitError::MemTooSmall { got: 3 })
        );
        assert_eq!(limit(&cfg(1, 0)), Some(LimitError::MemTooSmall { got: 0 }));
        assert_eq!(limit(&cfg(1, MIN_MEM_MIB)), None);
        assert_eq!(limit(&cfg(1, MAX_MEM_MIB)), None);
        assert_eq!(
            limit(&cfg(1, MAX_MEM_MIB + 1)),
            Some(LimitError::MemTooLarge {
                got: MAX_MEM_MIB + 1
            })
        );
        let e = Error::Config(validate(&cfg(33, 128)).unwrap_err());
        assert_eq!(e.kind(), "invalid-vcpus");
        assert_eq!(
            chain(&e),
            "invalid configuration: --vcpus 33: 1 to 32 vCPUs are supported"
        );
        let mut c = cfg(1, 128);
        c.deadline = Deadline::AfterBootStartMs(0);
        assert!(matches!(validate(&c), Err(ConfigError::Deadline)));
        assert_eq!(
            Error::Config(ConfigError::Deadline).kind(),
            "invalid-deadline"
        );
        // An absolute deadline is never invalid: one already past ends the run at once.
        c.deadline = Deadline::AtNs(0);
        assert!(validate(&c).is_ok());
    }
}
