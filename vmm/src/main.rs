//! `truecold-vmm boot …`: boots one VM and prints its report as one JSON object on stdout
//! (or into `--report-file`). Every failure prints exactly one JSON object there too: the
//! boot report when the guest ran, otherwise `{"schema":…,"error":{"kind":…,"message":…}}`
//! (see vmm/README.md). Under `--transport serial` stdout carries the guest's serial output,
//! so the report goes to `--report-file` (required then).
//!
//! The process confines itself (vmm/src/sandbox.rs, docs/security.md): no-new-privileges and
//! every inherited descriptor above 2 closed first; the report file opened; `--uid/--gid`
//! dropped to; the seccomp filter installed by the boot between the kernel load and the vCPUs.
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use truecold_proto::kinds::{RamLayout, Transport};
use truecold_proto::measure::error_chain as chain;
use truecold_proto::report::{ErrorBody, ErrorReport};
use truecold_vmm::boot::{validate, ConfigError};
use truecold_vmm::config::Deadline;
use truecold_vmm::config::KernelSource;
use truecold_vmm::host::HostKind;
use truecold_vmm::jail::{self, JailPlan, UserSource};
use truecold_vmm::memory::Backing;
use truecold_vmm::report::SCHEMA;
use truecold_vmm::sandbox::{self, SelfTest};
use truecold_vmm::virtio::rate::{DeviceLimits, RateLimit};
use truecold_vmm::{BootConfig, Error};

#[derive(Parser)]
#[command(
    name = "truecold-vmm",
    version,
    about = "truecold's in-process KVM VMM"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Boot one VM to strict-ready and print the report as one JSON object.
    Boot(Box<BootArgs>),
    /// Print the CPUID the guest's vCPUs get (or, with --supported, what this host's KVM
    /// supports), one entry per line in the format of vmm/tests/data/cpuid/.
    Cpuid(CpuidArgs),
}

#[derive(Args)]
struct CpuidArgs {
    #[arg(long, default_value = "1", value_parser = truecold_proto::limits::Vcpus::parse)]
    vcpus: truecold_proto::limits::Vcpus,
    /// As `boot --packages`.
    #[arg(long, value_name = "N", default_value_t = 1)]
    packages: u8,
    /// As `boot --invariant-tsc`.
    #[arg(long)]
    invariant_tsc: bool,
    /// KVM_GET_SUPPORTED_CPUID as it is (record a host's dump for the unit tests).
    #[arg(long)]
    supported: bool,
}

/// `truecold-vmm cpuid`: the tables, or a typed error.
fn cpuid(args: &CpuidArgs) -> Result<String, Error> {
    use truecold_vmm::cpuid::{brand_string, format_table, vendor};
    let (kvm, _) = truecold_vmm::kvm::open().map_err(Error::Kvm)?;
    if args.supported {
        let s = kvm
            .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
            .map_err(|e| Error::Cpu(truecold_vmm::cpu::CpuError::SupportedCpuid(e)))?;
        let e = s.as_slice();
        return Ok(format!(
            "# cpu: {}\n# source: KVM_GET_SUPPORTED_CPUID on this host ({:?})\n{}",
            brand_string(e),
            vendor(e),
            format_table(e)
        ));
    }
    let (p, tables) = truecold_vmm::cpu::tables(
        &kvm,
        args.vcpus.get(),
        truecold_proto::platform::CpuPlatform {
            packages: args.packages,
            invariant_tsc: args.invariant_tsc,
        },
    )
    .map_err(Error::Cpu)?;
    let mut out = format!("# platform: {p:?}\n");
    for (i, t) in tables.iter().enumerate() {
        out.push_str(&format!("# vCPU {i}: {}\n", brand_string(t.as_slice())));
        out.push_str(&format_table(t.as_slice()));
    }
    Ok(out)
}

#[derive(Args)]
struct BootArgs {
    /// ELF vmlinux (PVH note → PVH, else 64-bit boot protocol) or bzImage.
    #[arg(long, required_unless_present_any = ["probe", "probe_silent", "probe_linux64"], conflicts_with_all = ["probe", "probe_silent", "probe_linux64"])]
    kernel: Option<PathBuf>,
    /// Boot the embedded probe guest (PVH) instead of a kernel.
    #[arg(long, conflicts_with_all = ["probe_silent", "probe_linux64"])]
    probe: bool,
    /// Boot the probe variant that never rings (exercises the deadline).
    #[arg(long, conflicts_with = "probe_linux64")]
    probe_silent: bool,
    /// Boot the probe variant without a PVH note (64-bit boot protocol).
    #[arg(long)]
    probe_linux64: bool,
    /// initramfs (cpio) handed to the kernel.
    #[arg(long)]
    initramfs: Option<PathBuf>,
    /// vCPUs (limits: truecold_proto::limits, checked before anything else).
    #[arg(long, default_value_t = 1)]
    vcpus: u64,
    /// Guest memory, MiB (limits: truecold_proto::limits; also at most the host's RAM).
    #[arg(long, default_value_t = 128)]
    mem_mib: u64,
    /// Guest memory backing: anon, thp or hugetlb [default: thp with --kernel, anon for the
    /// probe guests (truecold_proto::kinds::Backing::default_for)].
    #[arg(long, value_parser = Backing::parse)]
    backing: Option<Backing>,
    /// Guest RAM layout: around-hole (RAM = the configured size, laid around the 640 KiB –
    /// 1 MiB hole, so it ends 384 KiB past it), hole-inside (RAM ends at the configured size;
    /// the hole, declared E820 reserved, is part of it) or above-4g (as hole-inside, RAM below
    /// 4 GiB ending at 256 MiB, the rest from 4 GiB) [default: above-4g from 4096 MiB,
    /// hole-inside below: truecold_proto::layout::RamLayout::default_for].
    #[arg(long, value_parser = RamLayout::parse)]
    ram_layout: Option<RamLayout>,
    /// Appended to the tuned base command line.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    cmdline_extra: String,
    /// Give up on a guest that has not finished this long after the VMM's boot start
    /// (default 10000).
    #[arg(long, conflicts_with = "deadline_at_ns")]
    deadline_ms: Option<u64>,
    /// Give up on a guest that has not finished at this CLOCK_MONOTONIC instant, ns (the
    /// bench: its request stamp + the campaign's deadline). Already past: no vCPU runs.
    #[arg(long)]
    deadline_at_ns: Option<u64>,
    /// Guest serial output to stderr (not with --transport serial).
    #[arg(long)]
    console: bool,
    /// How the guest talks to the VMM: `ports` (truecold's I/O ports, the VMM makes the
    /// challenge), `serial` (TC1 lines on the 8250, which is then this process's stdin and
    /// stdout; a Linux guest only) or `vsock` (TC1 lines on a virtio-vsock stream to
    /// `<--vsock-uds>_1024`, where the bench listens; a Linux guest only).
    #[arg(long, default_value = "ports", value_parser = parse_transport)]
    transport: Transport,
    /// virtio-vsock, hybrid (Firecracker's convention): a guest connection to host port P
    /// becomes a Unix-socket connection to `<PATH>_<P>` (RST to the guest when nothing
    /// listens). Required with --transport vsock, refused otherwise.
    #[arg(long, value_name = "PATH")]
    vsock_uds: Option<PathBuf>,
    /// virtio-net over a new tap NAME (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR), given the host
    /// address of --net-pair /30 and brought up; gone when the VMM exits. Needs
    /// CAP_NET_ADMIN. With --net-pair.
    #[arg(long, value_name = "NAME")]
    tap: Option<String>,
    /// The tap's network pair `<host ipv4>,<guest ipv4>` (one /30); the guest gets
    /// `truecold.net=eth0,<guest>/30`. With --tap.
    #[arg(long, value_name = "HOST,GUEST")]
    net_pair: Option<String>,
    /// virtio-blk over IMAGE, opened read-write (the guest's /dev/vda; the guest gets
    /// `truecold.workspace=1`).
    #[arg(long, value_name = "IMAGE")]
    workspace: Option<PathBuf>,
    /// virtio-blk's token buckets: `bytes=CAP/PER_SEC,ops=CAP/PER_SEC` or `off`
    /// [default: bytes=67108864/67108864,ops=4096/4096].
    #[arg(long, value_name = "SPEC", value_parser = RateLimit::parse)]
    blk_rate_limit: Option<RateLimit>,
    /// virtio-net transmit's token buckets (the guest's frames), as --blk-rate-limit
    /// [default: bytes=16777216/16777216,ops=4096/4096].
    #[arg(long, value_name = "SPEC", value_parser = RateLimit::parse)]
    net_tx_rate_limit: Option<RateLimit>,
    /// virtio-vsock transmit's token buckets (the guest's packets), as --blk-rate-limit
    /// [default: bytes=16777216/16777216,ops=4096/4096].
    #[arg(long, value_name = "SPEC", value_parser = RateLimit::parse)]
    vsock_tx_rate_limit: Option<RateLimit>,
    /// Write the JSON report (or error report) to this file instead of stdout. Required with
    /// --transport serial, whose stdout is the guest's serial output.
    #[arg(long, required_if_eq("transport", "serial"))]
    report_file: Option<PathBuf>,
    /// The caller's request stamp (CLOCK_MONOTONIC ns), for request→ready durations.
    #[arg(long)]
    request_ns: Option<u64>,
    /// Boot a Linux kernel even on a PVM host.
    #[arg(long)]
    force: bool,
    /// The host kind: skips detection (/proc/cpuinfo, CPUID, /sys/module) in the boot
    /// (the bench passes the kind it detected once per campaign). Without it the VMM
    /// detects, and TRUECOLD_HOST_KIND overrides what it finds.
    #[arg(long, value_parser = truecold_vmm::host::parse_host_kind)]
    host_kind: Option<HostKind>,
    /// The unprivileged uid to drop to (with --gid) instead of the `truecold-vmm` user.
    /// Jailed (the default as root), the drop comes after every descriptor is open, so the
    /// uid needs no access to /dev/kvm. With --no-jail it comes before /dev/kvm and the
    /// kernel files are opened (no supplementary groups are kept: /dev/kvm must be usable
    /// by this uid or the gid).
    #[arg(long, requires = "gid")]
    uid: Option<u32>,
    /// Drop to this gid (with --uid).
    #[arg(long, requires = "uid")]
    gid: Option<u32>,
    /// Do not install the seccomp filters (debugging; the report says so).
    #[arg(long)]
    no_seccomp: bool,
    /// Do not jail the process (as root it otherwise enters new mount, network and IPC
    /// namespaces, pivots into a root holding only the vsock socket directory and drops to
    /// the `truecold-vmm` user before its filters; docs/security.md). The report's
    /// `containment` says so.
    #[arg(long)]
    no_jail: bool,
    /// Test hook: make this call once confined (socket, openat, execve, fork,
    /// open:PATH, connect:PATH, connect-bound:PATH, connect-abstract:NAME, device-socket,
    /// vcpu-socket).
    #[arg(long, hide = true, value_parser = SelfTest::parse)]
    sandbox_selftest: Option<SelfTest>,
    /// Host-side sampling of the guest: every N µs (10 to 1000000) each vCPU is kicked out of
    /// KVM_RUN and its RIP and MP state recorded with the time on the VMM's clock; the
    /// report's `rip_samples` holds them (bounded: truecold_proto::rip). Off by default.
    #[arg(long, value_name = "N", value_parser = parse_sample_period)]
    sample_rip_us: Option<truecold_proto::rip::SamplePeriod>,
    /// With --sample-rip-us: each sample also walks the guest kernel's frame-pointer chain
    /// (meaningful for a kernel built with CONFIG_FRAME_POINTER) through the guest's page
    /// tables, bounded (truecold_proto::rip::MAX_STACK_DEPTH return addresses); the report's
    /// `rip_samples` then carries each sample's call stack.
    #[arg(long, requires = "sample_rip_us")]
    sample_stacks: bool,
    /// Pin vCPU i to the i-th CPU this process may run on (its affinity at start: taskset, a
    /// cpuset), one CPU per vCPU; refused when there are fewer CPUs than vCPUs. The report's
    /// `vcpu_cpus` says where each ran. Off by default: the host's scheduler places them.
    #[arg(long)]
    pin_vcpus: bool,
    /// Split the vCPUs into this many packages (sockets) of equal, power-of-two core counts,
    /// stated alike in every CPUID topology leaf (default 1: one package of every vCPU).
    #[arg(long, value_name = "N", default_value_t = 1)]
    packages: u8,
    /// Tell the guest its TSC is invariant (CPUID 0x8000_0007 EDX[8]) even where this host's
    /// KVM does not report it (default: the host's bit, passed through). Linux on AMD runs
    /// its TSC synchronisation test across packages only with it.
    #[arg(long)]
    invariant_tsc: bool,
    /// Reliability tests only: send this process SIGNAL right after MARK
    /// (`sigkill@memory_ready`, see vmm/src/fault.rs). Never a measurement.
    #[arg(long, hide = true, value_parser = truecold_vmm::fault::Fault::parse)]
    inject_fault: Option<truecold_vmm::fault::Fault>,
}

impl BootArgs {
    /// The configuration, checked against the limits.
    fn config(self) -> Result<BootConfig, ConfigError> {
        if let Some(f) = self.inject_fault {
            truecold_vmm::fault::arm(f);
        }
        let backing = self.backing.unwrap_or(Backing::default_for(
            truecold_proto::kinds::Engine::Truecold,
            self.kernel.is_some(),
        ));
        let kernel = match (self.kernel, self.probe_silent, self.probe_linux64) {
            (Some(p), _, _) => KernelSource::File(p),
            (None, true, _) => KernelSource::ProbeSilent,
            (None, false, true) => KernelSource::ProbeLinux64,
            (None, false, false) => KernelSource::Probe,
        };
        let vcpus = truecold_proto::limits::Vcpus::new(self.vcpus).map_err(ConfigError::Limit)?;
        // The one check of the memory size in this process: from here on it is a GuestMem.
        let mem =
            truecold_proto::limits::GuestMem::from_mib(self.mem_mib).map_err(ConfigError::Limit)?;
        let deadline = match (self.deadline_at_ns, self.deadline_ms) {
            (Some(at), _) => Deadline::AtNs(at),
            (None, ms) => Deadline::AfterBootStartMs(ms.unwrap_or(10_000)),
        };
        let net_pair = self
            .net_pair
            .as_deref()
            .map(truecold_proto::parity::NetPair::parse)
            .transpose()
            .map_err(ConfigError::Net)?;
        let cfg = BootConfig {
            kernel,
            initramfs: self.initramfs,
            vcpus: vcpus.get(),
            mem,
            backing,
            ram_layout: self
                .ram_layout
                .unwrap_or_else(|| RamLayout::default_for(mem)),
            cmdline_extra: self.cmdline_extra,
            deadline,
            console: self.console,
            transport: self.transport,
            request_ns: self.request_ns,
            force: self.force,
            host_kind: self.host_kind,
            virtio: truecold_vmm::config::VirtioConfig {
                workspace: self.workspace,
                tap: self.tap,
                net_pair,
                vsock_uds: self.vsock_uds,
                limits: DeviceLimits {
                    blk: self.blk_rate_limit.unwrap_or(RateLimit::BLK),
                    net_tx: self.net_tx_rate_limit.unwrap_or(RateLimit::NET_TX),
                    vsock_tx: self.vsock_tx_rate_limit.unwrap_or(RateLimit::VSOCK_TX),
                },
            },
            sample_rip_us: self.sample_rip_us,
            sample_stacks: self.sample_stacks,
            pin_vcpus: self.pin_vcpus,
            cpu_platform: truecold_proto::platform::CpuPlatform {
                packages: self.packages,
                invariant_tsc: self.invariant_tsc,
            },
        };
        validate(&cfg)?;
        Ok(cfg)
    }
}

/// The jail of `cfg`: the user (`--uid/--gid`, else [`jail::JAIL_USER`]) and the vsock
/// socket directory to bind; `--vsock-uds` made absolute in `cfg` (after `pivot_root` the
/// working directory is the jail's root).
fn jail_plan(
    uid: Option<u32>,
    gid: Option<u32>,
    cfg: &mut BootConfig,
) -> Result<JailPlan, jail::JailError> {
    let (uid, gid, source) = match (uid, gid) {
        (Some(u), Some(g)) => {
            for (id, what) in [(u, "uid"), (g, "gid")] {
                if id == 0 {
                    return Err(jail::JailError::Drop(sandbox::SandboxError::RootTarget {
                        what,
                    }));
                }
            }
            (u, g, UserSource::Explicit)
        }
        _ => {
            let (u, g) = jail::lookup_user()?;
            (u, g, UserSource::Named(jail::JAIL_USER))
        }
    };
    let binds = match cfg.virtio.vsock_uds.as_mut() {
        Some(uds) => {
            let dir = jail::socket_dir(uds)?;
            let name = uds.file_name().ok_or_else(|| jail::JailError::Path {
                path: uds.display().to_string(),
                why: "names no socket file",
            })?;
            *uds = dir.join(name);
            vec![dir]
        }
        None => Vec::new(),
    };
    Ok(JailPlan {
        uid,
        gid,
        source,
        binds,
    })
}

fn parse_sample_period(s: &str) -> Result<truecold_proto::rip::SamplePeriod, String> {
    truecold_proto::rip::SamplePeriod::parse(s).map_err(|e| e.to_string())
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    Transport::parse(s).ok_or_else(|| format!("`{s}` is not a transport (ports, serial, vsock)"))
}

/// Prints `r` as one JSON line on stdout.
fn print_json<T: serde::Serialize>(r: &T) {
    match serde_json::to_string(r) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: cannot serialize the report: {e}"),
    }
}

/// Where the report goes: stdout, or `--report-file`, opened (created, truncated) before the
/// process drops its privileges and installs its filter, which allows no open.
enum Sink {
    Stdout,
    File(PathBuf, std::fs::File),
}

impl Sink {
    fn open(path: Option<&PathBuf>) -> Result<Sink, String> {
        match path {
            None => Ok(Sink::Stdout),
            Some(p) => std::fs::File::create(p)
                .map(|f| Sink::File(p.clone(), f))
                .map_err(|e| format!("cannot write the report to {}: {e}", p.display())),
        }
    }
}

/// Writes `r` as one JSON line into the report file when given, else on stdout; false when the
/// file cannot be written (said on stderr).
fn emit_json<T: serde::Serialize>(r: &T, sink: &mut Sink) -> bool {
    let (path, file) = match sink {
        Sink::Stdout => {
            print_json(r);
            return true;
        }
        Sink::File(p, f) => (p, f),
    };
    let written = serde_json::to_string(r)
        .map_err(|e| e.to_string())
        .and_then(|s| {
            file.write_all((s + "\n").as_bytes())
                .map_err(|e| e.to_string())
        });
    match written {
        Ok(()) => true,
        Err(e) => {
            eprintln!("error: cannot write the report to {}: {e}", path.display());
            false
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help, --version: not a failure.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            print_json(&ErrorReport {
                schema: SCHEMA,
                error: ErrorBody {
                    kind: "invalid-arguments".into(),
                    // The error's first paragraph (a missing argument is on its second
                    // line), without the usage that follows.
                    message: e
                        .render()
                        .to_string()
                        .lines()
                        .take_while(|l| !l.trim().is_empty())
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join(" ")
                        .trim_start_matches("error: ")
                        .to_string(),
                },
            });
            return ExitCode::from(2);
        }
    };
    let args = match cli.cmd {
        Cmd::Boot(args) => *args,
        Cmd::Cpuid(args) => {
            return match cpuid(&args) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {}", chain(&e));
                    ExitCode::FAILURE
                }
            }
        }
    };
    // First, before anything is opened: no-new-privileges, inherited descriptors closed.
    let prelude = sandbox::at_start();
    let mut sink = match Sink::open(args.report_file.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let fail = |e: Error, sink: &mut Sink| {
        eprintln!("error: {}", chain(&e));
        emit_json(&e.report(), sink);
        ExitCode::FAILURE
    };
    let prelude = match prelude {
        Ok(p) => p,
        Err(e) => return fail(Error::Sandbox(e), &mut sink),
    };
    let (uid, gid, seccomp, selftest, no_jail) = (
        args.uid,
        args.gid,
        !args.no_seccomp,
        args.sandbox_selftest.clone(),
        args.no_jail,
    );
    let mut cfg = match args.config() {
        Ok(cfg) => cfg,
        Err(e) => return fail(Error::Config(e), &mut sink),
    };
    // The jail: on by default as root; its user resolved now, before any boot work (a
    // missing user is an error, never an uncontained boot).
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let (jail, not_jailed_because) = if no_jail {
        (None, Some("--no-jail".to_string()))
    } else if euid != 0 {
        (
            None,
            Some(format!(
                "not started as root (euid {euid}): the jail needs root"
            )),
        )
    } else {
        match jail_plan(uid, gid, &mut cfg) {
            Ok(p) => (Some(p), None),
            Err(e) => return fail(Error::Jail(e), &mut sink),
        }
    };
    // Jailed, the drop is the jail's (after the descriptors are open).
    let (uid, gid) = if jail.is_some() {
        (None, None)
    } else {
        (uid, gid)
    };
    // Before a privilege drop, the virtio backends that need one (a tap: CAP_NET_ADMIN)
    // or a path the dropped user may not reach (the workspace image) are opened now;
    // without a drop the boot opens them itself, inside its kernel_loaded stage.
    let backends = if uid.is_some() {
        match truecold_vmm::virtio::setup::Backends::open(&cfg.virtio) {
            Ok(b) => Some(b),
            Err(e) => return fail(Error::Virtio(e), &mut sink),
        }
    } else {
        None
    };
    let user = match (uid, gid) {
        (Some(uid), Some(gid)) => {
            match sandbox::drop_privileges(uid, gid, std::path::Path::new("/dev/kvm")) {
                Ok(u) => Some(u),
                Err(e) => return fail(Error::Sandbox(e), &mut sink),
            }
        }
        _ => None,
    };
    let confinement = truecold_vmm::boot::Confinement {
        prelude,
        user,
        jail,
        not_jailed_because,
        seccomp,
        selftest,
    };
    let result = match backends {
        Some(b) => truecold_vmm::boot::run_confined_with(&cfg, &confinement, b),
        None => truecold_vmm::boot::run_confined(&cfg, &confinement),
    };
    match result {
        Ok(report) if emit_json(&report, &mut sink) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e @ Error::Guest { .. }) => {
            eprintln!("error: {}", chain(&e));
            if let Error::Guest { report, .. } = &e {
                emit_json(report, &mut sink);
            }
            ExitCode::FAILURE
        }
        Err(e) => fail(e, &mut sink),
    }
}
