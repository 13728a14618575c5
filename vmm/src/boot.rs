//! The boot recipe, top-down: each stage is one function in its own module, each stamped.
use std::sync::Mutex;

use truecold_proto::limits::{LimitError, Vcpus};
use vm_memory::{Bytes, GuestAddress};

use crate::boot_params;
use crate::config::{BootConfig, Deadline, KernelSource};
use crate::cpu::{self, CpuError};
use crate::devices::{self, Bus, DeviceError, StopReason};
use crate::host::{self, HostKind};
use crate::jail::{self, JailError, JailPlan};
use crate::kvm::{self, KvmError};
use crate::loader::{self, LoaderError};
use crate::memory::{self, MemoryError};
use crate::mptable;
use crate::probe::{ProbeReport, ProbeSummary};
use crate::report::{self, BootReport, GuestFailure, HostReport, MemoryDetail};
use crate::run::{self, RunEnd, RunError};
use crate::sandbox::{
    self, Prelude, SandboxError, SandboxReport, SeccompReport, SelfTest, UserDrop,
};
use crate::timeline::process_start_ns;
use crate::virtio::setup::{self as virtio_setup, Backends, VirtioError};
use crate::vm::{self, VmError};
use truecold_proto::kinds::{Engine, Observer, Transport};
use truecold_proto::measure::{now_ns, Mark, Stamps, Taker};
use truecold_proto::parity::{check_ifname, ParityError};
use truecold_proto::report::{
    Accounting, Containment, ContainmentSteps, ErrorBody, ErrorReport, ExitTally, Liveness,
    MemoryFigures,
};

/// Invalid configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Limit(LimitError),
    #[error("--deadline-ms must be positive")]
    Deadline,
    #[error("--transport serial: {0}")]
    Transport(&'static str),
    #[error("--transport vsock: {0}")]
    Vsock(&'static str),
    #[error("--vsock-uds {path}: {why}")]
    VsockUds { path: String, why: &'static str },
    #[error("--tap/--net-pair")]
    Net(#[source] ParityError),
    #[error("--tap and --net-pair go together")]
    NetIncomplete,
}

impl ConfigError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            ConfigError::Limit(e) => e.kind(),
            ConfigError::Deadline => "invalid-deadline",
            ConfigError::Transport(_) | ConfigError::Vsock(_) => "invalid-transport",
            ConfigError::VsockUds { .. } => "vsock-uds-invalid",
            ConfigError::Net(ParityError::IfName(_)) | ConfigError::NetIncomplete => "invalid-tap",
            ConfigError::Net(_) => "invalid-net-pair",
        }
    }
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
    #[error("cannot set up the virtio devices")]
    Virtio(#[source] VirtioError),
    #[error("cannot run the vCPUs")]
    Run(#[source] RunError),
    #[error("cannot place the vCPUs")]
    Pin(#[source] crate::pin::PinError),
    #[error("cannot confine the VMM process")]
    Sandbox(#[source] SandboxError),
    #[error("cannot jail the VMM process")]
    Jail(#[source] JailError),
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
            Error::Config(e) => e.kind(),
            Error::HostCannotBootLinux => "host-cannot-boot-linux",
            Error::Kvm(e) => e.kind(),
            Error::Vm(_) => "vm-create-failed",
            Error::Memory(e) => e.kind(),
            Error::Loader(e) => e.kind(),
            Error::MpTable(_) => "boot-data-write-failed",
            Error::Cpu(CpuError::Count(e)) => e.kind(),
            Error::Cpu(_) => "vcpu-setup-failed",
            Error::Devices(_) => "device-setup-failed",
            Error::Virtio(e) => e.kind(),
            Error::Run(_) => "vcpu-run-failed",
            Error::Pin(e) => e.kind(),
            Error::Sandbox(e) => e.kind(),
            Error::Jail(e) => e.kind(),
            Error::Guest { .. } => "guest-failed",
        }
    }

    /// What the CLI prints on stdout when a boot fails before the guest runs (a guest that
    /// ran and failed prints its [`BootReport`] instead).
    pub fn report(&self) -> ErrorReport {
        ErrorReport {
            schema: report::SCHEMA,
            error: ErrorBody {
                kind: self.kind().to_string(),
                message: truecold_proto::measure::error_chain(self),
            },
        }
    }
}

/// Checks `cfg` against the limits of `truecold_proto::limits` (pure).
pub fn validate(cfg: &BootConfig) -> Result<(), ConfigError> {
    Vcpus::new(u64::from(cfg.vcpus)).map_err(ConfigError::Limit)?;
    if cfg.deadline == Deadline::AfterBootStartMs(0) {
        return Err(ConfigError::Deadline);
    }
    validate_virtio(cfg)?;
    if cfg.transport == Transport::Serial {
        if cfg.is_probe() {
            return Err(ConfigError::Transport(
                "the probe guests have no serial transport (boot a Linux kernel)",
            ));
        }
        if cfg.console {
            return Err(ConfigError::Transport(
                "the serial carries the transport, not a console (drop --console)",
            ));
        }
    }
    Ok(())
}

/// The longest `--vsock-uds`: `<uds>_<port>` must fit a `sun_path` (107 bytes) for any
/// port (10 digits).
pub const VSOCK_UDS_MAX: usize = crate::virtio::vsock::SUN_PATH_MAX - 11;

fn validate_virtio(cfg: &BootConfig) -> Result<(), ConfigError> {
    let v = &cfg.virtio;
    match (cfg.transport, &v.vsock_uds) {
        (Transport::Vsock, None) => {
            return Err(ConfigError::Vsock("--vsock-uds PATH is required"));
        }
        (Transport::Vsock, Some(_)) if cfg.is_probe() => {
            return Err(ConfigError::Vsock(
                "the probe guests have no vsock transport (boot a Linux kernel)",
            ));
        }
        (Transport::Ports | Transport::Serial, Some(_)) => {
            return Err(ConfigError::VsockUds {
                path: v
                    .vsock_uds
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                why: "only with --transport vsock",
            });
        }
        _ => {}
    }
    if let Some(uds) = &v.vsock_uds {
        use std::os::unix::ffi::OsStrExt;
        let b = uds.as_os_str().as_bytes();
        let why = if b.is_empty() {
            Some("empty")
        } else if b.len() > VSOCK_UDS_MAX {
            Some("too long: <path>_<port> must fit a Unix socket address (96 bytes at most)")
        } else if b.contains(&0) {
            Some("contains a NUL byte")
        } else if b.ends_with(b"/") {
            Some("names a directory")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(ConfigError::VsockUds {
                path: uds.display().to_string(),
                why,
            });
        }
    }
    match (&v.tap, v.net_pair) {
        (Some(name), Some(_)) => check_ifname(name).map_err(ConfigError::Net)?,
        (None, None) => {}
        _ => return Err(ConfigError::NetIncomplete),
    }
    Ok(())
}

fn refuse_linux_on_pvm(cfg: &BootConfig, kind: HostKind) -> Result<(), Error> {
    if kind == HostKind::Pvm && matches!(cfg.kernel, KernelSource::File(_)) && !cfg.force {
        return Err(Error::HostCannotBootLinux);
    }
    Ok(())
}

/// How [`run_confined`] confines the process, and what was done before the boot.
#[derive(Clone, Debug, Default)]
pub struct Confinement {
    /// What [`sandbox::at_start`] did.
    pub prelude: Prelude,
    /// The user the process dropped to before the boot (`--uid/--gid` with `--no-jail`).
    pub user: Option<UserDrop>,
    /// The jail entered at the sandbox point, before the filters (None: none).
    pub jail: Option<JailPlan>,
    /// Why there is no jail, when there is none (`--no-jail`; not root).
    pub not_jailed_because: Option<String>,
    /// Install the seccomp filters (false: `--no-seccomp`).
    pub seccomp: bool,
    /// Test hook: make this call once the process is confined.
    pub selftest: Option<SelfTest>,
}

/// Boots one VM per `cfg` and returns its report; a guest that ran but failed gives
/// [`Error::Guest`], which carries the report. Each step is stamped under its
/// [`Mark`] (the one stage table: `truecold_proto::measure`). Confines nothing: the report's
/// `sandbox` is None (the CLI boots through [`run_confined`]).
pub fn run(cfg: &BootConfig) -> Result<BootReport, Error> {
    run_inner(cfg, None, None)
}

/// [`run`], and once the kernel is loaded, before the vCPUs are created: the seccomp filter
/// of [`sandbox::allowlist`] on every thread (per `c.seccomp`), which the vCPU threads then
/// inherit. Installing a filter is irreversible: this is for a process that exits after the
/// boot (the CLI), never for a process that goes on (a test harness).
pub fn run_confined(cfg: &BootConfig, c: &Confinement) -> Result<BootReport, Error> {
    run_inner(cfg, Some(c), None)
}

/// [`run_confined`] with the virtio backends already open (the CLI opens them before it
/// drops its privileges with `--uid/--gid`: a tap needs CAP_NET_ADMIN).
pub fn run_confined_with(
    cfg: &BootConfig,
    c: &Confinement,
    backends: Backends,
) -> Result<BootReport, Error> {
    run_inner(cfg, Some(c), Some(backends))
}

/// What [`confine_now`] did.
struct Confined {
    seccomp: SeccompReport,
    containment: Containment,
    /// The user the jail dropped to.
    user: Option<UserDrop>,
}

/// The sandbox point (one thread; every descriptor the rest needs is open): what the filters
/// forbid afterwards is done now (the kick handler, the files read after the run held open),
/// then the jail (namespaces, pivot_root, the user drop), then the filters: the process-wide
/// one on this thread (inherited by every thread it starts) and each vCPU thread's own,
/// armed for those threads to install first thing.
fn confine_now(c: &Confinement, needs: sandbox::DeviceNeeds) -> Result<Confined, Error> {
    run::prepare().map_err(Error::Run)?;
    crate::host::hold_files();
    sandbox::settle_allocator();
    // The socket self-tests run under the filter of every device's needs.
    let needs = if c.selftest.as_ref().is_some_and(SelfTest::needs_sockets) {
        sandbox::DeviceNeeds::all()
    } else {
        needs
    };
    let mut steps = ContainmentSteps::default();
    let mut user = None;
    let mut binds = Vec::new();
    if let Some(plan) = &c.jail {
        let mut plan = plan.clone();
        if let Some(p) = c.selftest.as_ref().and_then(SelfTest::bind) {
            plan.binds
                .push(jail::socket_dir(&p.join("x")).map_err(Error::Jail)?);
        }
        let entered = jail::enter(&plan).map_err(Error::Jail)?;
        steps.unshare_ns = Some(entered.steps.unshare_ns);
        steps.mounts_ns = Some(entered.steps.mounts_ns);
        steps.drop_ns = Some(entered.steps.drop_ns);
        user = Some(entered.user);
        binds = plan.binds.iter().map(|b| b.display().to_string()).collect();
    }
    let pid = std::process::id();
    let list = sandbox::allowlist_for(pid, needs);
    let vcpu_list = sandbox::vcpu_allowlist(pid, needs);
    let vcpu_selftest = c.selftest == Some(SelfTest::VcpuSocket);
    let installed = if c.seccomp {
        let t0 = now_ns();
        let f = sandbox::filters(&list).map_err(Error::Sandbox)?;
        let v = sandbox::vcpu_filter(&vcpu_list).map_err(Error::Sandbox)?;
        sandbox::install_violation_handler(&list).map_err(Error::Sandbox)?;
        sandbox::install(&f).map_err(Error::Sandbox)?;
        sandbox::arm_vcpu_threads(Some(v), vcpu_selftest);
        steps.filters_ns = Some(now_ns() - t0);
        true
    } else {
        sandbox::arm_vcpu_threads(None, vcpu_selftest);
        false
    };
    let count = |n: usize| u32::try_from(n).ok();
    let containment = Containment {
        contained: c.jail.is_some(),
        not_contained_because: c.not_jailed_because.clone(),
        user: c.jail.as_ref().map(|p| p.source.describe()),
        uid: user.as_ref().map(|u: &UserDrop| u.uid),
        gid: user.as_ref().map(|u: &UserDrop| u.gid),
        namespaces: if c.jail.is_some() {
            jail::NAMESPACES
                .iter()
                .map(|(_, n)| n.to_string())
                .collect()
        } else {
            Vec::new()
        },
        binds,
        allowed_syscalls: installed.then(|| count(list.len())).flatten(),
        vcpu_allowed_syscalls: installed.then(|| count(vcpu_list.len())).flatten(),
        steps,
    };
    Ok(Confined {
        seccomp: SeccompReport {
            installed,
            allowed_syscalls: list.len(),
            on_violation: "trap".into(),
            mode_observed: None,
        },
        containment,
        user,
    })
}

fn run_inner(
    cfg: &BootConfig,
    confine: Option<&Confinement>,
    backends: Option<Backends>,
) -> Result<BootReport, Error> {
    validate(cfg).map_err(Error::Config)?;
    if let KernelSource::File(path) = &cfg.kernel {
        loader::check_kernel(path).map_err(Error::Loader)?;
    }
    let host_kind = host::for_boot(cfg.host_kind);
    refuse_linux_on_pvm(cfg, host_kind.kind)?;
    // Where each vCPU will run (`--pin-vcpus`; nothing pinned by default): part of checking
    // the request, so too few CPUs is refused before the boot starts.
    let placement = if cfg.pin_vcpus {
        Some(crate::pin::Placement::of_this_process(usize::from(cfg.vcpus)).map_err(Error::Pin)?)
    } else {
        None
    };

    // Checking the request is not boot work: the boot starts here (request → boot_start
    // holds the process start, argument parsing, validation and any host-kind detection).
    let boot_start = now_ns();
    let mut st = Stamps {
        request: cfg.request_ns,
        boot_start: Some(boot_start),
        ..Stamps::default()
    };
    // Each VMM mark's counters are read right after its stamp (before the vCPUs run there
    // are no exits yet).
    let mut acct = Accounting::default();
    let no_exits = ExitTally::default();
    acct.take(Mark::BootStart, host::counters(no_exits));
    crate::fault::at(Mark::BootStart);
    let deadline_at = cfg.deadline.at_ns(boot_start);

    let (kvm, kvm_caps) = kvm::open().map_err(Error::Kvm)?;
    st.kvm_open = Some(now_ns());
    acct.take(Mark::KvmOpen, host::counters(no_exits));
    crate::fault::at(Mark::KvmOpen);

    let vm = vm::create(&kvm).map_err(Error::Vm)?;
    st.vm_created = Some(now_ns());
    acct.take(Mark::VmCreated, host::counters(no_exits));
    crate::fault::at(Mark::VmCreated);

    let ram = memory::allocate(cfg.mem, cfg.backing, cfg.ram_layout).map_err(Error::Memory)?;
    let rom_area = kvm.check_extension(kvm_ioctls::Cap::ReadonlyMem);
    memory::register(&vm, &ram, rom_area).map_err(Error::Memory)?;
    st.memory_ready = Some(now_ns());
    acct.take(Mark::MemoryReady, host::counters(no_exits));
    crate::fault::at(Mark::MemoryReady);

    // The layout's word (none at the default) after the virtio arguments, so that a default
    // boot's command line is what it was before the layouts existed.
    let layout_word = truecold_proto::boot_cmdline::ram_layout_key(cfg.ram_layout);
    let extra = format!(
        "{}{} {}",
        boot_params::virtio_args(&cfg.virtio, cfg.transport),
        layout_word.map(|w| format!(" {w}")).unwrap_or_default(),
        cfg.cmdline_extra
    );
    let cmdline = boot_params::cmdline(
        match (cfg.transport, cfg.console) {
            (Transport::Serial, _) => boot_params::SerialUse::Transport(Engine::Truecold),
            (Transport::Ports | Transport::Vsock, true) => boot_params::SerialUse::Console,
            (Transport::Ports | Transport::Vsock, false) => boot_params::SerialUse::Off,
        },
        cfg.mem,
        &extra,
    )
    .map_err(|e| Error::Loader(LoaderError::Params(e.into())))?;
    let loaded = loader::load(&ram, &cfg.kernel, cfg.initramfs.as_deref(), &cmdline)
        .map_err(Error::Loader)?;
    ram.mem
        .write_slice(
            &mptable::build(cfg.vcpus, mptable::MPTABLE_ADDR),
            GuestAddress(mptable::MPTABLE_ADDR),
        )
        .map_err(Error::MpTable)?;
    // The parity contract's virtio devices (none by default): backends opened (unless the
    // CLI opened them before its privilege drop), irqfds and ioeventfds registered — all
    // before the seccomp filter. Part of the kernel_loaded stage.
    let backends = match backends {
        Some(b) => b,
        None => Backends::open(&cfg.virtio).map_err(Error::Virtio)?,
    };
    let virtio = virtio_setup::attach(&vm, &ram.mem, backends).map_err(Error::Virtio)?;
    let needs = sandbox::DeviceNeeds {
        pin: cfg.pin_vcpus,
        ..sandbox::DeviceNeeds::of(&cfg.virtio)
    };
    st.kernel_loaded = Some(now_ns());
    acct.take(Mark::KernelLoaded, host::counters(no_exits));
    crate::fault::at(Mark::KernelLoaded);

    // The RIP sampler's buffers, before the filters (`--sample-rip-us`; none by default).
    let sampler = cfg
        .sample_rip_us
        .map(|p| run::Sampler::new(p, usize::from(cfg.vcpus)));
    let confined = match confine {
        Some(c) => Some(confine_now(c, needs)?),
        None => None,
    };
    if confined.as_ref().is_some_and(|c| c.seccomp.installed) {
        // The seccomp stage: kernel_loaded → here (the jail, when there is one, and the
        // filters; absent without a filter, as before the jail existed).
        st.sandboxed = Some(now_ns());
        acct.take(Mark::Sandboxed, host::counters(no_exits));
    }
    if let Some(t) = confine.and_then(|c| c.selftest.as_ref()) {
        // Returns unless the filter refuses the call (then the process ends with a
        // diagnosis).
        if let Some((r, errno)) = t.call() {
            eprintln!(
                "truecold-vmm: --sandbox-selftest {t:?}: the call returned {r} (errno {errno})"
            );
        }
    }
    let (mut seccomp, mut containment, jail_user) = match confined {
        Some(c) => (Some(c.seccomp), Some(c.containment), c.user),
        None => (None, None, None),
    };

    let vcpus = cpu::create(&kvm, &vm, cfg.vcpus, &loaded).map_err(Error::Cpu)?;
    let serial_out: Box<dyn std::io::Write + Send> = match (cfg.transport, cfg.console) {
        (Transport::Serial, _) => Box::new(devices::LineOut::new(std::io::stdout())),
        (Transport::Ports | Transport::Vsock, true) => Box::new(std::io::stderr()),
        (Transport::Ports | Transport::Vsock, false) => Box::new(std::io::sink()),
    };
    let mut bus =
        Bus::new(&vm, cfg.is_probe(), cfg.transport, serial_out).map_err(Error::Devices)?;
    // The device thread starts before the vCPUs and is stopped after the run.
    let (device_thread, device_reporter) = match virtio {
        Some(v) => {
            bus.set_virtio(v.windows());
            let reporter = v.reporter();
            (
                Some(
                    v.start()
                        .map_err(|e| Error::Virtio(VirtioError::Thread(e)))?,
                ),
                Some(reporter),
            )
        }
        None => (None, None),
    };
    let bus = Mutex::new(bus);
    let (out, serial_input) = match cfg.transport {
        Transport::Ports | Transport::Vsock => (
            run::run(vcpus, &bus, deadline_at, sampler, placement.as_ref()),
            None,
        ),
        Transport::Serial => {
            let (out, input) = devices::with_stdin_input(&bus, || {
                run::run(vcpus, &bus, deadline_at, sampler, placement.as_ref())
            })
            .map_err(Error::Devices)?;
            (out, Some(input))
        }
    };
    if let Some(t) = device_thread {
        if !t.stop() {
            eprintln!("truecold-vmm: the virtio device thread panicked");
        }
    }
    // What each virtio device did (after its thread stopped: the counters are final).
    let devices = device_reporter.map(|r| r.reports()).unwrap_or_default();
    let out = out.map_err(Error::Run)?;
    st.first_run = out.first_run;
    st.exit = Some(out.exit);
    crate::fault::at(Mark::Exit);
    // After the run: the vCPU threads are joined, guest memory is still mapped.
    acct.rss_final_bytes = host::self_rss();

    let backing = memory::observe(&ram);
    let mut bus = bus.into_inner().unwrap_or_else(|p| p.into_inner());
    // Under the serial transport strict_ready and record are the bench's (it reads them on
    // the serial); the bus never takes them then.
    let observer = match cfg.transport {
        Transport::Ports => Observer::VmExit,
        // Under vsock the bench reads the agent channel: strict_ready and record are its.
        Transport::Serial | Transport::Vsock => Observer::Serial,
    };
    for m in Mark::ALL
        .into_iter()
        .filter(|m| m.taker_under(observer) == Taker::VmExit)
    {
        st.set(m, bus.stamps.get(m));
    }
    for (k, v) in std::mem::take(&mut bus.accounting.at) {
        acct.at.insert(k, v);
    }
    let trace = bus.trace.take();
    let exit_tally = bus.exits.tally();
    let mut guest = GuestView::collect(bus, cfg, &loaded.e820);
    guest.vcpus_not_started = out.never_started.clone();
    let memslots = ram.ranges.clone();
    // Teardown: vCPU fds closed in their threads; now VM, memory, /dev/kvm.
    drop(vm);
    drop(ram);
    drop(kvm);
    st.teardown_done = Some(now_ns());
    acct.take(Mark::TeardownDone, host::counters(exit_tally));
    acct.rss_peak_bytes = host::self_rss_peak();
    if let Some(s) = seccomp.as_mut() {
        // The kernel's view, outside the boot's window (a filter is never removed).
        s.mode_observed = host::read_text(host::PROC_SELF_STATUS)
            .as_deref()
            .and_then(sandbox::seccomp_mode);
    }
    let sandbox = confine.zip(seccomp).map(|(c, seccomp)| SandboxReport {
        prelude: c.prelude.clone(),
        user: jail_user.or_else(|| c.user.clone()),
        seccomp,
    });
    if let Some(c) = containment.as_mut() {
        c.steps.vcpu_filter_ns = sandbox::vcpu_install_ns();
    }
    // Informational (never in a duration): read after the boot, outside its window.
    let process_start_boottime_ns = process_start_ns();

    let memory_figures = MemoryFigures {
        configured: cfg.mem.bytes(),
        memslots: memslots.iter().map(|r| r.size).sum(),
        e820_ram: boot_params::e820_ram(&loaded.e820),
        e820_hole_reserved: boot_params::e820_hole_reserved(&loaded.e820, cfg.ram_layout),
        guest: guest.guest_bytes,
    };
    let deadline_ms = cfg.deadline.budget_ms(cfg.request_ns.unwrap_or(boot_start));
    let failure = judge(
        deadline_ms,
        cfg.transport,
        &out.end,
        &out.errors,
        &guest,
        &memory_figures,
        cfg.ram_layout,
    );
    let report = report::assemble(
        cfg,
        report::Observed {
            stamps: st,
            process_start_boottime_ns,
            host: HostReport {
                kind: host_kind.kind,
                detected: host_kind.detected,
                forced: host_kind.forced,
                kernel: host::kernel_release(),
                hypervisor_signature: host::hypervisor_signature(),
                mem_total_bytes: host::host_mem_total(),
                kvm_caps,
            },
            memory: MemoryDetail {
                memslots,
                e820: loaded.e820.clone(),
            },
            memory_figures,
            backing,
            kernel: loaded,
            vmm_rss_bytes: guest.rss_at_strict_ready,
            accounting: acct,
            guest_trace: trace,
            exits: guest.exits,
            liveness: guest.liveness,
            guest_record: guest.record,
            probe: guest.probe,
            protocol_error_count: guest.protocol_error_count,
            protocol_errors: guest.protocol_errors,
            end: out.end,
            vcpu_errors: out.errors,
            vcpu_last_rip: out.last_rip,
            vcpu_cpus: placement,
            rip_samples: out.rip_samples,
            serial_input,
            sandbox,
            containment,
            devices,
        },
        failure.clone(),
    );
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
    liveness: Liveness,
    record: Option<truecold_proto::GuestRecord>,
    probe: Option<ProbeReport>,
    protocol_error_count: u64,
    protocol_errors: Vec<String>,
    guest_bytes: Option<u64>,
    last_phase: Option<u8>,
    rss_at_strict_ready: Option<u64>,
    exit_after_ready: Option<bool>,
    /// APs the guest never started (the run's `never_started`).
    vcpus_not_started: Vec<usize>,
}

impl GuestView {
    fn collect(bus: Bus, cfg: &BootConfig, e820: &[boot_params::E820Entry]) -> Self {
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
fn judge(
    deadline_ms: u64,
    transport: Transport,
    end: &RunEnd,
    errors: &[RunError],
    g: &GuestView,
    mem: &MemoryFigures,
    how: truecold_proto::kinds::RamLayout,
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
    use crate::memory::RamLayout;
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
        let mut cfg = BootConfig::probe(1, mib(128), memory::Backing::Anon);
        cfg.kernel = KernelSource::File("/vmlinux".into());
        cfg.transport = Transport::Vsock;
        let e = Error::Config(validate(&cfg).unwrap_err());
        assert_eq!(e.kind(), "invalid-transport");
        cfg.virtio.vsock_uds = Some("/run/x/v.sock".into());
        assert!(validate(&cfg).is_ok());
        cfg.virtio.vsock_uds = Some("/run/x/".into());
        assert_eq!(
            Error::Config(validate(&cfg).unwrap_err()).kind(),
            "vsock-uds-invalid"
        );
    }

    #[test]
    fn serial_transport_conflicts_are_config_errors() {
        let mut cfg = BootConfig::probe(1, mib(128), memory::Backing::Anon);
        cfg.transport = Transport::Serial;
        let e = Error::Config(validate(&cfg).unwrap_err());
        assert_eq!(e.kind(), "invalid-transport");
        assert!(truecold_proto::measure::error_chain(&e).contains("probe"));
        cfg.kernel = KernelSource::File("/vmlinux".into());
        assert!(validate(&cfg).is_ok());
        cfg.console = true;
        let e = Error::Config(validate(&cfg).unwrap_err());
        assert_eq!(e.kind(), "invalid-transport");
        assert!(truecold_proto::measure::error_chain(&e).contains("--console"));
    }

    #[test]
    fn linux_refused_on_pvm_unless_forced() {
        let mut cfg = BootConfig::probe(1, mib(128), memory::Backing::Anon);
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
        // The CLI's one memory check (`--mem-mib`, main.rs) reports its limit like this.
        let zero = Error::Config(ConfigError::Limit(GuestMem::from_mib(0).unwrap_err()));
        assert_eq!(zero.kind(), "memory-too-small");
        let huge = Error::Config(ConfigError::Limit(
            GuestMem::from_mib(u64::MAX >> 21).unwrap_err(),
        ));
        assert_eq!(huge.kind(), "memory-too-large");
        assert_eq!(Error::HostCannotBootLinux.kind(), "host-cannot-boot-linux");
        let json = serde_json::to_value(zero.report()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"schema": 3, "error": {
                "kind": "memory-too-small",
                "message": "invalid configuration: --mem-mib 0: guest memory below the minimum of 4 MiB"
            }})
        );
    }

    #[test]
    fn config_validation_at_every_limit_edge() {
        use truecold_proto::limits::{MAX_MEM_MIB, MAX_VCPUS, MIN_MEM_MIB};
        // Memory is a GuestMem here, checked once where it is made (GuestMem's tests, and
        // the CLI's `--mem-mib` below); the vCPU count is checked by `validate`.
        let cfg =
            |vcpus: u8, mem_mib: u64| BootConfig::probe(vcpus, mib(mem_mib), memory::Backing::Anon);
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
        assert_eq!(limit(&cfg(1, MIN_MEM_MIB)), None);
        assert_eq!(limit(&cfg(1, MAX_MEM_MIB)), None);
        let e = Error::Config(validate(&cfg(33, 128)).unwrap_err());
        assert_eq!(e.kind(), "invalid-vcpus");
        assert_eq!(
            truecold_proto::measure::error_chain(&e),
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
