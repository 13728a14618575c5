//! The boot recipe, top-down: each stage is one function in its own module, each stamped.
use std::sync::Mutex;

use truecold_proto::limits::{LimitError, Vcpus};
use vm_memory::{Bytes, GuestAddress};

use crate::boot_params;
use crate::config::{BootConfig, Deadline, KernelSource};
use crate::cpu::{self, CpuError};
use crate::devices::{self, Bus, DeviceError};
use crate::host::{self, HostKind};
use crate::jail::{self, JailError, JailPlan};
use crate::judge::{judge, GuestView};
use crate::kvm::{self, KvmError};
use crate::loader::{self, LoaderError};
use crate::memory::{self, MemoryError};
use crate::mptable;
use crate::report::{self, BootReport, GuestFailure, HostReport, MemoryDetail};
use crate::run::{self, RunError};
use crate::sandbox::{
    self, Prelude, SandboxError, SandboxReport, SeccompReport, SelfTest, UserDrop,
};
use crate::timeline::process_start_ns;
use crate::virtio::setup::{self as virtio_setup, Backends, VirtioError};
use crate::virtio::thread::VirtioDevices;
use crate::vm::{self, VmError};
use truecold_proto::kinds::{Engine, Observer, Transport};
use truecold_proto::measure::{now_ns, Mark, Stamps, Taker};
use truecold_proto::parity::{check_ifname, ParityError};
use truecold_proto::report::{
    Accounting, Containment, ContainmentSteps, ErrorBody, ErrorReport, ExitTally, MemoryFigures,
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
    #[error("--packages")]
    Platform(#[source] truecold_proto::platform::PlatformError),
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
            ConfigError::Platform(_) => "invalid-cpu-platform",
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
    cfg.cpu_platform
        .check(cfg.vcpus)
        .map_err(ConfigError::Platform)?;
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

/// The boot, top-down: the request checked, then each stage of the stage table up to its
/// mark, the confinement, the run, and [`finish`]. Every VMM mark is taken here (through
/// [`Stamper`]) or in the run; the order of these steps is the order of the stages.
fn run_inner(
    cfg: &BootConfig,
    confine: Option<&Confinement>,
    backends: Option<Backends>,
) -> Result<BootReport, Error> {
    let request = check_request(cfg)?;

    // Checking the request is not boot work: the boot starts here (request → boot_start
    // holds the process start, argument parsing, validation and any host-kind detection).
    let boot_start = now_ns();
    let mut stamper = Stamper::start(cfg.request_ns, boot_start);
    let deadline_at = cfg.deadline.at_ns(boot_start);

    let (kvm, kvm_caps) = kvm::open().map_err(Error::Kvm)?;
    stamper.mark(Mark::KvmOpen);

    let vm = vm::create(&kvm).map_err(Error::Vm)?;
    stamper.mark(Mark::VmCreated);

    let ram = memory::allocate(cfg.mem, cfg.backing, cfg.ram_layout).map_err(Error::Memory)?;
    let rom_area = kvm.check_extension(kvm_ioctls::Cap::ReadonlyMem);
    memory::register(&vm, &ram, rom_area).map_err(Error::Memory)?;
    stamper.mark(Mark::MemoryReady);

    let loaded = load_guest(cfg, &ram)?;
    let virtio = attach_virtio(cfg, &vm, &ram, backends)?;
    let needs = sandbox::DeviceNeeds {
        pin: cfg.pin_vcpus,
        ..sandbox::DeviceNeeds::of(&cfg.virtio)
    };
    stamper.mark(Mark::KernelLoaded);

    // The RIP sampler's buffers, before the filters (`--sample-rip-us`; none by default),
    // with call stacks' tables and a handle on guest memory (`--sample-stacks`).
    let sampler = cfg.sample_rip_us.map(|p| {
        if cfg.sample_stacks {
            run::Sampler::with_stacks(p, usize::from(cfg.vcpus), &ram.mem)
        } else {
            run::Sampler::new(p, usize::from(cfg.vcpus))
        }
    });
    let confined = match confine {
        Some(c) => Some(confine_now(c, needs)?),
        None => None,
    };
    if confined.as_ref().is_some_and(|c| c.seccomp.installed) {
        // The seccomp stage: kernel_loaded → here (the jail, when there is one, and the
        // filters; absent without a filter).
        stamper.stamp(Mark::Sandboxed, ExitTally::default());
    }
    if let Some(t) = confine.and_then(|c| c.selftest.as_ref()) {
        run_selftest(t);
    }

    let vcpus = cpu::create(&kvm, &vm, cfg.vcpus, cfg.cpu_platform, &loaded).map_err(Error::Cpu)?;
    let ran = run_guest(
        cfg,
        &vm,
        vcpus,
        virtio,
        deadline_at,
        sampler,
        request.placement.as_ref(),
    )?;
    finish(
        cfg,
        stamper,
        Machine { kvm, vm, ram },
        Booted {
            request,
            kvm_caps,
            loaded,
        },
        ran,
        confine,
        confined,
    )
}

/// The VMM's own marks as the boot reaches them: each stamp (`now_ns`), then the process's
/// counters read right after it ([`Accounting`]; before the vCPUs run there are no exits
/// yet), then, for a mark a fault can follow ([`crate::fault::FAULT_MARKS`]), the fault
/// injection point of the reliability tests.
struct Stamper {
    stamps: Stamps,
    accounting: Accounting,
    /// The `boot_start` stamp.
    boot_start: u64,
}

impl Stamper {
    /// The boot started at `boot_start` (stamped by the caller, first thing).
    fn start(request_ns: Option<u64>, boot_start: u64) -> Self {
        let mut s = Stamper {
            stamps: Stamps {
                request: request_ns,
                boot_start: Some(boot_start),
                ..Stamps::default()
            },
            accounting: Accounting::default(),
            boot_start,
        };
        s.accounting
            .take(Mark::BootStart, host::counters(ExitTally::default()));
        crate::fault::at(Mark::BootStart);
        s
    }

    /// A stage of the boot is done: `m` stamped now, its counters, its fault point.
    fn mark(&mut self, m: Mark) {
        self.stamp(m, ExitTally::default());
        crate::fault::at(m);
    }

    /// `m` stamped now, the counters read with `exits` (no fault point).
    fn stamp(&mut self, m: Mark, exits: ExitTally) {
        self.stamps.set(m, Some(now_ns()));
        self.accounting.take(m, host::counters(exits));
    }

    /// The run's marks: `first_run` (its first `KVM_RUN`) and `exit` (when it stopped).
    fn ran(&mut self, out: &run::RunOutcome) {
        self.stamps.first_run = out.first_run;
        self.stamps.exit = Some(out.exit);
        crate::fault::at(Mark::Exit);
    }

    /// The marks the bus took at VM exits, with their counters. Under the serial and vsock
    /// transports strict_ready and record are the bench's (it reads them on the serial or
    /// the agent channel); the bus never takes them then.
    fn take_vm_exit_marks(&mut self, bus: &mut Bus, transport: Transport) {
        let observer = match transport {
            Transport::Ports => Observer::VmExit,
            Transport::Serial | Transport::Vsock => Observer::Serial,
        };
        for m in Mark::ALL
            .into_iter()
            .filter(|m| m.taker_under(observer) == Taker::VmExit)
        {
            self.stamps.set(m, bus.stamps.get(m));
        }
        for (k, v) in std::mem::take(&mut bus.accounting.at) {
            self.accounting.at.insert(k, v);
        }
    }
}

/// What checking the request found, before the boot starts.
struct Request {
    host_kind: host::Detection,
    /// Where each vCPU will run (`--pin-vcpus`; `None`: nothing pinned).
    placement: Option<crate::pin::Placement>,
}

/// The request's checks: the configuration, the kernel file, the host kind, the vCPUs'
/// placement (too few CPUs is refused before the boot starts).
fn check_request(cfg: &BootConfig) -> Result<Request, Error> {
    validate(cfg).map_err(Error::Config)?;
    if let KernelSource::File(path) = &cfg.kernel {
        loader::check_kernel(path).map_err(Error::Loader)?;
    }
    let host_kind = host::for_boot(cfg.host_kind);
    refuse_linux_on_pvm(cfg, host_kind.kind)?;
    let placement = if cfg.pin_vcpus {
        Some(crate::pin::Placement::of_this_process(usize::from(cfg.vcpus)).map_err(Error::Pin)?)
    } else {
        None
    };
    Ok(Request {
        host_kind,
        placement,
    })
}

/// The kernel stage's guest half: the command line built, the kernel, initramfs and boot
/// parameters loaded, the MP table written.
fn load_guest(cfg: &BootConfig, ram: &memory::GuestRam) -> Result<loader::Loaded, Error> {
    // The one definition of truecold-vmm's line (the bench records the same for its arm).
    let cmdline = truecold_proto::boot_cmdline::vmm_cmdline(
        match (cfg.transport, cfg.console) {
            (Transport::Serial, _) => boot_params::SerialUse::Transport(Engine::Truecold),
            (Transport::Ports | Transport::Vsock, true) => boot_params::SerialUse::Console,
            (Transport::Ports | Transport::Vsock, false) => boot_params::SerialUse::Off,
        },
        cfg.mem,
        boot_params::virtio_devices(&cfg.virtio),
        cfg.transport,
        cfg.ram_layout,
        &cfg.cmdline_extra,
    )
    .map_err(|e| Error::Loader(LoaderError::Params(e.into())))?;
    let loaded = loader::load(ram, &cfg.kernel, cfg.initramfs.as_deref(), &cmdline)
        .map_err(Error::Loader)?;
    ram.mem
        .write_slice(
            &mptable::build(cfg.vcpus, mptable::MPTABLE_ADDR),
            GuestAddress(mptable::MPTABLE_ADDR),
        )
        .map_err(Error::MpTable)?;
    Ok(loaded)
}

/// The kernel stage's device half: the parity contract's virtio devices (none by default):
/// backends opened (unless the CLI opened them before its privilege drop), irqfds and
/// ioeventfds registered — all before the seccomp filter.
fn attach_virtio(
    cfg: &BootConfig,
    vm: &kvm_ioctls::VmFd,
    ram: &memory::GuestRam,
    backends: Option<Backends>,
) -> Result<Option<VirtioDevices>, Error> {
    let backends = match backends {
        Some(b) => b,
        None => Backends::open(&cfg.virtio).map_err(Error::Virtio)?,
    };
    virtio_setup::attach(vm, &ram.mem, backends).map_err(Error::Virtio)
}

/// `--sandbox-selftest`: the call, once the process is confined. Returns unless the filter
/// refuses the call (then the process ends with a diagnosis).
fn run_selftest(t: &SelfTest) {
    if let Some((r, errno)) = t.call() {
        eprintln!("truecold-vmm: --sandbox-selftest {t:?}: the call returned {r} (errno {errno})");
    }
}

/// What the run left: its outcome, the bus (the devices' view of the guest), and what the
/// serial input thread and the virtio devices did.
struct Ran {
    out: run::RunOutcome,
    bus: Mutex<Bus>,
    serial_input: Option<devices::SerialInput>,
    devices: Vec<crate::virtio::DeviceReport>,
}

/// The vcpus stage and the guest's run: the bus and the device thread (started before the
/// vCPUs, stopped after the run), the vCPU threads (their first `KVM_RUN` is `first_run`),
/// until the guest stops, fails or meets the deadline.
fn run_guest(
    cfg: &BootConfig,
    vm: &kvm_ioctls::VmFd,
    vcpus: Vec<kvm_ioctls::VcpuFd>,
    virtio: Option<VirtioDevices>,
    deadline_at: u64,
    sampler: Option<run::Sampler>,
    placement: Option<&crate::pin::Placement>,
) -> Result<Ran, Error> {
    let serial_out: Box<dyn std::io::Write + Send> = match (cfg.transport, cfg.console) {
        (Transport::Serial, _) => Box::new(devices::LineOut::new(std::io::stdout())),
        (Transport::Ports | Transport::Vsock, true) => Box::new(std::io::stderr()),
        (Transport::Ports | Transport::Vsock, false) => Box::new(std::io::sink()),
    };
    let mut bus =
        Bus::new(vm, cfg.is_probe(), cfg.transport, serial_out).map_err(Error::Devices)?;
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
        Transport::Ports | Transport::Vsock => {
            (run::run(vcpus, &bus, deadline_at, sampler, placement), None)
        }
        Transport::Serial => {
            let (out, input) = devices::with_stdin_input(&bus, || {
                run::run(vcpus, &bus, deadline_at, sampler, placement)
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
    Ok(Ran {
        out,
        bus,
        serial_input,
        devices,
    })
}

/// The VM's host resources, held until the teardown.
struct Machine {
    kvm: kvm_ioctls::Kvm,
    vm: kvm_ioctls::VmFd,
    ram: memory::GuestRam,
}

impl Machine {
    /// The teardown (the vCPU fds were closed in their threads): the VM, guest memory,
    /// /dev/kvm, in that order.
    fn teardown(self) {
        let Machine { kvm, vm, ram } = self;
        drop(vm);
        drop(ram);
        drop(kvm);
    }
}

/// What the boot set up that its report names.
struct Booted {
    request: Request,
    kvm_caps: Vec<String>,
    loaded: loader::Loaded,
}

/// The post-run half: the run's marks, what the guest and the devices reported, the
/// teardown (`teardown_done`), then, outside the boot's window, what confined the process
/// and the report, judged.
fn finish(
    cfg: &BootConfig,
    mut stamper: Stamper,
    machine: Machine,
    booted: Booted,
    ran: Ran,
    confine: Option<&Confinement>,
    confined: Option<Confined>,
) -> Result<BootReport, Error> {
    let Ran {
        out,
        bus,
        serial_input,
        devices,
    } = ran;
    stamper.ran(&out);
    // After the run: the vCPU threads are joined, guest memory is still mapped.
    stamper.accounting.rss_final_bytes = host::self_rss();

    let backing = memory::observe(&machine.ram);
    let mut bus = bus.into_inner().unwrap_or_else(|p| p.into_inner());
    stamper.take_vm_exit_marks(&mut bus, cfg.transport);
    let trace = bus.trace.take();
    let exit_tally = bus.exits.tally();
    let mut guest = GuestView::collect(bus, cfg, &booted.loaded.e820);
    guest.vcpus_not_started = out.never_started.clone();
    let memslots = machine.ram.ranges.clone();
    machine.teardown();
    stamper.stamp(Mark::TeardownDone, exit_tally);
    stamper.accounting.rss_peak_bytes = host::self_rss_peak();
    let (sandbox, containment) = confinement_reports(confine, confined);
    // Informational (never in a duration): read after the boot, outside its window.
    let process_start_boottime_ns = process_start_ns();

    let memory_figures = MemoryFigures {
        configured: cfg.mem.bytes(),
        memslots: memslots.iter().map(|r| r.size).sum(),
        e820_ram: boot_params::e820_ram(&booted.loaded.e820),
        e820_hole_reserved: boot_params::e820_hole_reserved(&booted.loaded.e820, cfg.ram_layout),
        guest: guest.guest_bytes,
    };
    let deadline_ms = cfg
        .deadline
        .budget_ms(cfg.request_ns.unwrap_or(stamper.boot_start));
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
            stamps: stamper.stamps,
            process_start_boottime_ns,
            host: host_report(&booted.request.host_kind, booted.kvm_caps),
            memory: MemoryDetail {
                memslots,
                e820: booted.loaded.e820.clone(),
            },
            memory_figures,
            backing,
            kernel: booted.loaded,
            vmm_rss_bytes: guest.rss_at_strict_ready,
            accounting: stamper.accounting,
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
            vcpu_cpus: booted.request.placement,
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

/// What confined the process, read after the boot: the seccomp mode the kernel reports (a
/// filter is never removed) and the vCPU threads' filter install time.
fn confinement_reports(
    confine: Option<&Confinement>,
    confined: Option<Confined>,
) -> (Option<SandboxReport>, Option<Containment>) {
    let (mut seccomp, mut containment, jail_user) = match confined {
        Some(c) => (Some(c.seccomp), Some(c.containment), c.user),
        None => (None, None, None),
    };
    if let Some(s) = seccomp.as_mut() {
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
    (sandbox, containment)
}

/// The host the boot ran on, as the report says it.
fn host_report(d: &host::Detection, kvm_caps: Vec<String>) -> HostReport {
    HostReport {
        kind: d.kind,
        detected: d.detected,
        forced: d.forced,
        kernel: host::kernel_release(),
        hypervisor_signature: host::hypervisor_signature(),
        mem_total_bytes: host::host_mem_total(),
        kvm_caps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use truecold_proto::limits::GuestMem;

    fn mib(n: u64) -> GuestMem {
        GuestMem::from_mib(n).expect("a size within the limits")
    }

    #[test]
    fn vsock_transport_needs_its_socket() {
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
