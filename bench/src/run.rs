//! `truecold run`: from arguments to a written, verified bundle.

use crate::artifacts::{self, ArtifactError, LinuxGuest};
use crate::campaign::{self, rate_per_ks, CampaignSpec, Harness};
use crate::cli::{ArgError, RunArgs};
use crate::host::HostFacts;
use crate::interrupt::{self, InstallError};
use crate::launch::{shell_quote, ProcessLauncher, VmmCommand};
use crate::nested::{self, NestedError};
use crate::progress::{Progress, Style};
use crate::schedule::{Schedule, ScheduleError};
use crate::vmm_report;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use truecold_proof::bundle::{BundleError, BundleInputs, Written};
use truecold_proof::schema::{Configuration, ContractKind, HostKind};
use truecold_proto::kinds::Detection;

/// Why a campaign could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bad arguments")]
    Args(#[from] ArgError),
    #[error("the engine's version")]
    EngineVersion(#[source] truecold_engine::version::VersionError),
    #[error("/dev/kvm does not exist: this host offers no KVM (load kvm_intel/kvm_amd, or run on a host with KVM)")]
    NoKvm,
    #[error(
        "cannot tell what /dev/kvm is here (no vmx/svm CPU flag, no kvm_pvm module, not QEMU TCG); \
         set TRUECOLD_HOST_KIND=hardware|pvm|nested-emulated to say so"
    )]
    UnknownHost,
    #[error("missing artifact")]
    Artifact(#[from] ArtifactError),
    #[error("--nested")]
    Nested(#[from] NestedError),
    #[error("{0} already exists; a bundle is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("Ctrl-C handling")]
    Interrupt(#[from] InstallError),
    #[error("scheduling")]
    Schedule(#[from] ScheduleError),
    #[error("reading the guest kernel config {path}")]
    Config {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the bundle")]
    Bundle(#[from] BundleError),
    #[error(
        "cannot write the bundle to {dest}; bundle saved instead at {saved} (it verifies: \
         move it where it belongs)"
    )]
    SavedElsewhere {
        dest: PathBuf,
        saved: PathBuf,
        #[source]
        source: BundleError,
    },
    #[error(
        "--drop-caches needs root (writing /proc/sys/vm/drop_caches); this process runs as uid {0}"
    )]
    DropCachesNotRoot(u32),
    #[error(
        "--drop-caches applies to --mode sequential only: with samples in flight together, \
         dropping the page cache before one lands inside another's measured window"
    )]
    DropCachesMode,
    #[error("dropping the host page cache (sync; 3 > {DROP_CACHES})")]
    DropCaches(#[source] std::io::Error),
    #[error("the engines campaign")]
    Engines(#[from] crate::engines::EnginesError),
    #[error("the parity campaign: {0}")]
    Parity(String),
}

/// The kernel's page-cache knob.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// `sync`, then drop the host page cache, dentries and inodes, so the next sample reads the
/// VMM, kernel and initramfs from disk (`--drop-caches`).
pub fn drop_page_cache() -> std::io::Result<()> {
    // SAFETY: sync(2) takes no arguments, touches no memory of ours and cannot fail.
    unsafe { libc::sync() };
    std::fs::write(DROP_CACHES, b"3")
}

/// Checks `--drop-caches` against the mode and the effective uid `euid` (`None` for
/// `--nested`, where the caches dropped are L1's and L1's init is root), before anything
/// launches.
pub fn check_drop_caches(
    args: &RunArgs,
    schedule: &Schedule,
    euid: Option<u32>,
) -> Result<(), RunError> {
    if !args.drop_caches {
        return Ok(());
    }
    if !matches!(schedule, Schedule::Sequential { .. }) {
        return Err(RunError::DropCachesMode);
    }
    match euid {
        Some(uid) if uid != 0 => Err(RunError::DropCachesNotRoot(uid)),
        _ => Ok(()),
    }
}

/// Where the explicit argument list points: the resolved paths of a campaign.
#[derive(Clone, Copy, Debug)]
pub struct ArgPaths<'a> {
    pub vmm: &'a Path,
    /// Linux campaigns only (the probe needs no guest artifacts).
    pub guest_dir: Option<&'a Path>,
    pub out: &'a Path,
    /// Engines campaign: the arms, in order, each with its binary (truecold's is `vmm`).
    pub engines: &'a [(truecold_proto::kinds::Engine, PathBuf)],
}

/// The `truecold run` flag of a contract: the guest the campaign actually booted.
pub fn guest_flag(contract: ContractKind) -> &'static str {
    match contract {
        ContractKind::Linux => "--linux",
        ContractKind::Probe => "--probe",
    }
}

/// Every argument of a `truecold run` campaign after `run`, defaults filled in and paths
/// resolved, so that running `truecold run` with them runs the same campaign (with another
/// `--out`: a bundle is never overwritten). `guest` is [`guest_flag`] of what ran;
/// `schedule` is `args.schedule()` (the rate as arrivals per second with the three decimals
/// the schema keeps, which gives the same interval).
pub fn explicit_args(
    args: &RunArgs,
    schedule: &Schedule,
    guest: &str,
    paths: ArgPaths<'_>,
) -> Vec<String> {
    // Exhaustive on purpose: a new flag must be placed here (or knowingly left out).
    let RunArgs {
        mode: _,  // from `schedule`
        count: _, // from `schedule`
        vcpus,
        mem_mib,
        backing,
        concurrency: _,     // from `schedule`
        rate: _,            // from `schedule`
        max_concurrency: _, // from `schedule`
        deadline_ms: _,     // `args.deadline_ms()`: the one in effect
        kill_grace_ms,
        probe: _,     // `guest`
        linux: _,     // `guest`
        nested: _,    // `guest`
        out: _,       // `paths`
        vmm: _,       // `paths`
        guest_dir: _, // `paths`
        cmdline_extra,
        console,
        drop_caches,
        engine: _,           // `paths.engines`
        engines: _,          // `paths.engines`
        seed,                // engines campaigns (a plain nested one's is L1's, not here)
        firecracker: _,      // `paths.engines`
        cloud_hypervisor: _, // `paths.engines`
        qemu: _,             // `paths.engines`
        attribution,
        parity,
        inject_tap_name,
    } = args;
    let mut v: Vec<String> = vec![guest.to_string()];
    if *parity {
        v.push("--parity".into());
    }
    if let Some(t) = inject_tap_name {
        v.push("--inject-tap-name".into());
        v.push(t.clone());
    }
    let mut kv = |k: &str, val: String| {
        v.push(k.to_string());
        v.push(val);
    };
    let (mode, count, extra): (&str, u64, Vec<(&str, String)>) = match *schedule {
        Schedule::Sequential { n } => ("sequential", n, vec![]),
        Schedule::Burst { n, concurrency } => {
            ("burst", n, vec![("--concurrency", concurrency.to_string())])
        }
        Schedule::Churn { n, concurrency } => {
            ("churn", n, vec![("--concurrency", concurrency.to_string())])
        }
        Schedule::OpenLoop {
            n,
            interval_ns,
            max_in_flight,
        } => {
            let per_ks = rate_per_ks(interval_ns);
            (
                "open-loop",
                n,
                vec![
                    ("--rate", format!("{}.{:03}", per_ks / 1000, per_ks % 1000)),
                    ("--concurrency", max_in_flight.to_string()),
                ],
            )
        }
        Schedule::Sweep {
            n_per_level,
            max_concurrency,
        } => (
            "sweep",
            n_per_level,
            vec![("--max-concurrency", max_concurrency.to_string())],
        ),
    };
    kv("--mode", mode.to_string());
    kv("--count", count.to_string());
    kv("--vcpus", vcpus.to_string());
    kv("--mem-mib", mem_mib.to_string());
    kv("--backing", backing.as_str().to_string());
    for (k, val) in extra {
        kv(k, val);
    }
    kv("--deadline-ms", args.deadline_ms().to_string());
    kv("--kill-grace-ms", kill_grace_ms.to_string());
    kv("--cmdline-extra", cmdline_extra.clone());
    if *console {
        v.push("--console".into());
    }
    if *drop_caches {
        v.push("--drop-caches".into());
    }
    if *attribution > 0 {
        v.push("--attribution".into());
        v.push(attribution.to_string());
    }
    let truecold_arm = paths.engines.is_empty()
        || paths
            .engines
            .iter()
            .any(|(e, _)| *e == truecold_proto::kinds::Engine::Truecold);
    if !paths.engines.is_empty() {
        use truecold_proto::kinds::Engine;
        let names: Vec<&str> = paths.engines.iter().map(|(e, _)| e.as_str()).collect();
        v.push("--engines".into());
        v.push(names.join(","));
        v.push("--seed".into());
        v.push(seed.to_string());
        for (e, bin) in paths.engines {
            let flag = match e {
                Engine::Truecold => continue,
                Engine::Firecracker => "--firecracker",
                Engine::CloudHypervisor => "--cloud-hypervisor",
                Engine::QemuMicrovm => "--qemu",
            };
            v.push(flag.into());
            v.push(bin.display().to_string());
        }
    }
    if truecold_arm {
        v.push("--vmm".into());
        v.push(paths.vmm.display().to_string());
    }
    if let Some(g) = paths.guest_dir {
        v.push("--guest-dir".into());
        v.push(g.display().to_string());
    }
    v.push("--out".into());
    v.push(paths.out.display().to_string());
    v
}

/// The VMM command of one sample as one shell line: the fixed arguments, then the two the
/// launcher adds per sample — the request stamp (CLOCK_MONOTONIC ns, the row's
/// `actual_request_ns`) and the absolute deadline (the latency origin + the deadline), both
/// named symbolically (`VmmCommand::display`).
pub fn vmm_command_line(command: &VmmCommand, spec: &CampaignSpec) -> String {
    command.display(spec.deadline_ns, spec.mode().has_intended_time())
}

/// `cmdline.txt` (the format is `truecold_proof::cmdline`'s, the one writer): the
/// contract, the invocation as typed, the same campaign with every argument explicit, the
/// VMM command of each sample and (Linux) the guest kernel command line the VMM reported.
pub fn cmdline_txt(
    label: &str,
    invocation: &str,
    explicit: &[String],
    vmm_line: &str,
    guest_cmdline: Option<&str>,
) -> String {
    truecold_proof::cmdline::format_cmdline_txt(
        label,
        invocation,
        &explicit_line(explicit),
        vmm_line,
        guest_cmdline,
    )
}

/// The explicit `truecold run …` line of `cmdline.txt` (every argument shell-quoted).
pub fn explicit_line(explicit: &[String]) -> String {
    let explicit: Vec<String> = explicit.iter().map(|a| shell_quote(a)).collect();
    format!("truecold run {}", explicit.join(" "))
}

/// Why this host's Linux campaign became a probe campaign (printed and recorded).
pub const PVM_EXPLANATION: &str = "this host's /dev/kvm is kvm_pvm, a software virtualization \
backend on which an unmodified Linux kernel cannot boot (its instruction emulator fails on \
xrstor, int3, popcnt, clac during early boot); running the probe-guest campaign instead: \
VMM floor (probe guest), not a Linux boot. For a Linux boot use --nested (slow, emulated) or \
a host with hardware KVM.";

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The bundle, or (engines campaign) the multi-arm directory.
    pub written: Written,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Engines campaign: each arm's bundle and its own verdict.
    pub arms: Vec<(truecold_proto::kinds::Engine, Written)>,
}

/// The host kind in effect (the VMM library's detection, one definition) and, when
/// `TRUECOLD_HOST_KIND` forced it, the warning that says so.
fn host_kind() -> Result<(HostKind, Option<String>), RunError> {
    let d = truecold_vmm::host::detection(None);
    if d.kind == HostKind::Unknown {
        return Err(RunError::UnknownHost);
    }
    Ok((d.kind, forced_warning(&d)))
}

/// `host kind forced to X (detected Y)` when an override set the kind.
pub fn forced_warning(d: &Detection) -> Option<String> {
    d.forced.then(|| {
        format!(
            "host kind forced to {} (detected {}) by TRUECOLD_HOST_KIND",
            d.kind.as_str(),
            d.detected.map_or("nothing", HostKind::as_str)
        )
    })
}

/// The VMM's fixed arguments for this campaign. `host` is the kind detected once for the
/// campaign: passed as `--host-kind`, so no sample spends its measured window detecting it.
pub fn vmm_args(
    spec: &CampaignSpec,
    guest: Option<&LinuxGuest>,
    args: &RunArgs,
    force: bool,
    host: HostKind,
) -> Vec<OsString> {
    vmm_args_for(
        spec,
        guest.map(|g| (g.vmlinux.as_path(), g.initramfs.as_path())),
        &args.cmdline_extra,
        args.console,
        force,
        host,
    )
}

/// [`vmm_args`] from its parts: `guest` is the kernel image and initramfs (`None`: the probe
/// guest). One definition for campaigns and tune arms.
pub fn vmm_args_for(
    spec: &CampaignSpec,
    guest: Option<(&Path, &Path)>,
    cmdline_extra: &str,
    console: bool,
    force: bool,
    host: HostKind,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec!["boot".into()];
    match guest {
        Some((kernel, initramfs)) => {
            v.push("--kernel".into());
            v.push(kernel.into());
            v.push("--initramfs".into());
            v.push(initramfs.into());
        }
        None => v.push("--probe".into()),
    }
    for (k, val) in [
        ("--vcpus", spec.vcpus.to_string()),
        ("--mem-mib", (spec.mem_bytes >> 20).to_string()),
        ("--backing", spec.backing.as_str().to_string()),
        ("--host-kind", host.as_str().to_string()),
    ] {
        v.push(k.into());
        v.push(val.into());
    }
    if !cmdline_extra.is_empty() {
        v.push("--cmdline-extra".into());
        v.push(cmdline_extra.into());
    }
    if console {
        v.push("--console".into());
    }
    if force {
        v.push("--force".into());
    }
    v
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Runs the campaign `args` describe and writes its bundle. `invocation` is the command
/// line as typed (for `cmdline.txt`); progress and notes go to stderr.
pub fn run(args: &RunArgs, invocation: &str) -> Result<RunOutcome, RunError> {
    let schedule = args.schedule()?;
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    check_drop_caches(args, &schedule, (!args.nested).then_some(euid))?;
    let arms = args.arms()?;
    if args.parity {
        return run_parity(args, invocation, &schedule);
    }
    if !arms.is_empty() {
        return run_engines(args, invocation, &arms, &schedule);
    }
    if args.nested {
        // Needs no KVM here: QEMU emulates the CPU, L1 brings its own KVM.
        let planned = schedule.validate()?;
        let guest_dir = artifacts::guest_dir(args.guest_dir.as_deref());
        return Ok(RunOutcome {
            written: nested::run(args, &schedule, planned, &guest_dir)?,
            interrupted: false,
            warnings: vec![nested::WARNING.to_string()],
            arms: Vec::new(),
        });
    }
    let (kind, mut warnings) = kvm_host()?;
    let guest_dir = artifacts::guest_dir(args.guest_dir.as_deref());

    let (contract, force) = match (args.probe, args.linux, kind) {
        (true, _, _) => (ContractKind::Probe, false),
        (false, true, HostKind::Pvm) => {
            let w = "--linux on a kvm_pvm host: an unmodified Linux kernel is not expected to \
                     boot here; every failure is kept as data"
                .to_string();
            eprintln!("truecold: warning: {w}");
            warnings.push(w);
            (ContractKind::Linux, true)
        }
        (false, _, HostKind::Pvm) => {
            eprintln!("truecold: {PVM_EXPLANATION}");
            warnings.push(PVM_EXPLANATION.to_string());
            (ContractKind::Probe, false)
        }
        (false, _, _) => (ContractKind::Linux, false),
    };
    let spec = CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        schedule,
        contract,
        vcpus: args.vcpus,
        mem_bytes: args.mem_mib << 20,
        backing: args.backing,
        deadline_ns: args.deadline_ms().saturating_mul(1_000_000),
        kill_grace_ns: args.kill_grace_ms.saturating_mul(1_000_000),
    };
    let vmm = artifacts::find_vmm(args.vmm.as_deref())?;
    let guest = match contract {
        ContractKind::Linux => Some(artifacts::linux_guest(&guest_dir)?),
        ContractKind::Probe => None,
    };
    let dest = match &args.out {
        Some(p) => p.clone(),
        None => campaign::default_dest(Path::new("results"), &spec),
    };
    if dest.symlink_metadata().is_ok() {
        return Err(RunError::OutExists(dest));
    }
    let digests = artifacts::digests(&vmm, guest.as_ref())?;
    let kernel_config = match &guest {
        Some(g) => Some(std::fs::read(&g.config).map_err(|source| RunError::Config {
            path: g.config.clone(),
            source,
        })?),
        None => None,
    };
    let command = VmmCommand {
        program: vmm.clone(),
        args: vmm_args(&spec, guest.as_ref(), args, force, kind),
    };
    let launcher = ProcessLauncher {
        command: command.clone(),
        deadline_ns: spec.deadline_ns,
        kill_grace_ns: spec.kill_grace_ns,
        from_intended: spec.mode().has_intended_time(),
    };
    let vmm_line = vmm_command_line(&command, &spec);
    let facts = HostFacts::read(kind);
    let stop = interrupt::install()?;
    let planned = spec.schedule.validate()?;
    let label = match contract {
        ContractKind::Linux => "linux",
        ContractKind::Probe => "probe floor",
    };
    eprintln!(
        "truecold: {} — {} — {planned} launches, {} vCPU, {} MiB, backing {}, deadline {} ms → {}",
        contract.label(),
        spec.mode().describe(),
        spec.vcpus,
        spec.mem_bytes >> 20,
        spec.backing,
        args.deadline_ms(),
        dest.display()
    );
    if args.drop_caches {
        // Once before the campaign, so a host that refuses fails before any launch.
        drop_page_cache().map_err(RunError::DropCaches)?;
        eprintln!(
            "truecold: --drop-caches: sync and drop the host page cache before every sample \
             (outside its measured window)"
        );
    }
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), label, planned);
    let harness = Harness {
        before_each: args
            .drop_caches
            .then_some(&drop_page_cache as &campaign::BeforeEach),
        cpu_ns: &campaign::self_cpu_ns,
    };
    let ex = campaign::execute(
        &spec,
        &launcher,
        &vmm_report::observe_attempt,
        stop,
        &mut progress,
        &harness,
    )?;
    let guest_cmdline = ex.cmdlines.iter().next().cloned();
    let configuration = Configuration {
        vcpus: spec.vcpus,
        mem_bytes: spec.mem_bytes,
        backing: campaign::backing_description(spec.backing, &ex.backings),
        cmdline: match (&guest_cmdline, contract) {
            (Some(c), ContractKind::Linux) => c.clone(),
            _ => vmm_line.clone(),
        },
        vmm_path: vmm.display().to_string(),
        kernel_path: guest
            .as_ref()
            .map(|g| absolute(&g.vmlinux).display().to_string()),
        initramfs_path: guest
            .as_ref()
            .map(|g| absolute(&g.initramfs).display().to_string()),
        engine: truecold_proof::schema::EngineInfo {
            kind: truecold_proof::schema::Engine::Truecold,
            version: engine_version(&vmm)?,
        },
        knobs: vec![],
    };
    let result = campaign::result_json(&spec, &ex, configuration, digests, &facts, warnings);
    let explicit = explicit_args(
        args,
        &spec.schedule,
        guest_flag(contract),
        ArgPaths {
            vmm: &absolute(&vmm),
            guest_dir: guest.as_ref().map(|_| absolute(&guest_dir)).as_deref(),
            out: &std::path::absolute(&dest).unwrap_or_else(|_| dest.clone()),
            engines: &[],
        },
    );
    let cmdline = cmdline_txt(
        contract.label(),
        invocation,
        &explicit,
        &vmm_line,
        guest_cmdline.as_deref(),
    );
    let mut extra_files = vec![(
        truecold_proof::reports::REPORTS_FILE.to_string(),
        ex.reports.clone(),
    )];
    if args.attribution > 0 && !ex.interrupted {
        let mut aargs = args.clone();
        aargs.cmdline_extra = crate::attribution::cmdline_extra(&args.cmdline_extra);
        let acommand = VmmCommand {
            program: vmm.clone(),
            args: vmm_args(&spec, guest.as_ref(), &aargs, force, kind),
        };
        let jsonl = crate::attribution::run_for(
            &spec,
            &acommand,
            args.attribution,
            guest.as_ref().map(|g| g.vmlinux.as_path()),
            stop,
        )?;
        let clock = result.environment.host_kind.clock().describe();
        match truecold_proof::attribution::generate(&jsonl, &ex.samples, clock) {
            Ok(files) => extra_files.extend(files),
            // Kept as data: verify names why there is no attribution.
            Err(e) => eprintln!("truecold: attribution: {e}"),
        }
        extra_files.push((truecold_proof::attribution::JSONL_FILE.to_string(), jsonl));
    }
    let inputs = BundleInputs {
        kernel_config,
        cmdline,
        extra_files,
    };
    let written = match campaign::write(&dest, &result, &ex.samples, &inputs) {
        Ok(w) => w,
        Err(source) => {
            // The rows are the campaign's only copy: keep them where the disk has room.
            let name = dest.file_name().map_or_else(
                || "bundle".to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let saved = std::env::temp_dir()
                .join(format!("truecold-unsaved-{}-{name}", std::process::id()));
            return Err(
                match campaign::write(&saved, &result, &ex.samples, &inputs) {
                    Ok(_) => RunError::SavedElsewhere {
                        dest,
                        saved,
                        source,
                    },
                    Err(_) => RunError::Bundle(source),
                },
            );
        }
    };
    Ok(RunOutcome {
        written,
        interrupted: ex.interrupted,
        warnings: result.environment.warnings.clone(),
        arms: Vec::new(),
    })
}

/// `results/<UTC timestamp>-engines-<arms>-linux-<v>vcpu-<m>mib`.
pub fn engines_dest(args: &RunArgs, arms: &[truecold_proto::kinds::Engine]) -> PathBuf {
    let (stamp, _) = crate::clock::utc_now();
    PathBuf::from("results").join(format!(
        "{stamp}-{}-linux-{}vcpu-{}mib",
        engines_label(arms),
        args.vcpus,
        args.mem_mib
    ))
}

/// `engines-<arm>-<arm>…`: the arms in a default output directory's name.
pub fn engines_label(arms: &[truecold_proto::kinds::Engine]) -> String {
    let names: Vec<&str> = arms.iter().map(|e| e.as_str()).collect();
    format!("engines-{}", names.join("-"))
}

/// An engines campaign (`--engine …`): see [`crate::engines`].
fn run_engines(
    args: &RunArgs,
    invocation: &str,
    arms: &[truecold_proto::kinds::Engine],
    schedule: &Schedule,
) -> Result<RunOutcome, RunError> {
    use crate::engines::{self, ArmBundle, DriverLauncher, EnginesSpec, Shared};
    let rounds = schedule.validate()?;
    let guest_dir = artifacts::guest_dir(args.guest_dir.as_deref());
    if args.nested {
        return Ok(nested::run_engines(args, arms, rounds, &guest_dir)?);
    }
    // Argument-level problems first: every engine's binary and version, the guest.
    let resolved = engines::resolve(arms, args)?;
    let lg = artifacts::linux_guest(&guest_dir)?;
    let (kind, mut warnings) = kvm_host()?;
    if kind == HostKind::Pvm {
        let w = "an engines campaign on a kvm_pvm host: an unmodified Linux kernel is not \
                 expected to boot here; every failure is kept as data"
            .to_string();
        eprintln!("truecold: warning: {w}");
        warnings.push(w);
    }
    let guest = engines::guest_of(args, &lg);
    let dest = args.out.clone().unwrap_or_else(|| engines_dest(args, arms));
    if dest.symlink_metadata().is_ok() {
        return Err(RunError::OutExists(dest));
    }
    let work = std::env::temp_dir().join(format!("truecold-engines-{}", std::process::id()));
    let prepared = engines::prepare(&resolved, &guest, &work, kind)?;
    let kernel_config = std::fs::read(&lg.config).map_err(|source| RunError::Config {
        path: lg.config.clone(),
        source,
    })?;
    let spec = EnginesSpec::of_args(
        args,
        arms.to_vec(),
        rounds,
        truecold_proof::schema::Observer::Serial,
    );
    let facts = HostFacts::read(kind);
    let stop = interrupt::install()?;
    eprintln!(
        "truecold: engines campaign — {} — {rounds} round(s) of {} arm(s) in seeded shuffled \
         order (seed {}), {} vCPU, {} MiB, backing {}, deadline {} ms → {}",
        ContractKind::Linux.label(),
        arms.len(),
        args.seed,
        spec.vcpus,
        spec.mem_bytes >> 20,
        spec.backing,
        args.deadline_ms(),
        dest.display()
    );
    for p in &prepared {
        eprintln!(
            "truecold:   {}: {} ({})",
            p.engine,
            p.binary.display(),
            p.version
        );
    }
    if args.drop_caches {
        drop_page_cache().map_err(RunError::DropCaches)?;
    }
    let launches: Vec<_> = prepared.iter().map(|p| p.launch.clone()).collect();
    let cmdlines: Vec<String> = prepared.iter().map(|p| p.cmdline.clone()).collect();
    let launcher = DriverLauncher {
        launches: &launches,
        mem_bytes: spec.mem_bytes,
        deadline_ns: spec.deadline_ns,
        kill_grace_ns: spec.kill_grace_ns,
    };
    let total = rounds.saturating_mul(arms.len() as u64);
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "engines", total);
    let ran = engines::execute(
        &spec,
        &cmdlines,
        &launcher,
        stop,
        &mut progress,
        args.drop_caches
            .then_some(&drop_page_cache as &campaign::BeforeEach),
        &campaign::self_cpu_ns,
    );
    let bins: Vec<(truecold_proto::kinds::Engine, PathBuf)> = prepared
        .iter()
        .map(|p| (p.engine, p.binary.clone()))
        .collect();
    let vmm = bins
        .iter()
        .find(|(e, _)| *e == truecold_proto::kinds::Engine::Truecold)
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    let explicit = explicit_args(
        args,
        schedule,
        guest_flag(ContractKind::Linux),
        ArgPaths {
            vmm: &vmm,
            guest_dir: Some(&absolute(&guest_dir)),
            out: &std::path::absolute(&dest).unwrap_or_else(|_| dest.clone()),
            engines: &bins,
        },
    );
    let bundles: Vec<ArmBundle<'_>> = prepared
        .iter()
        .map(|p| ArmBundle {
            engine: p.engine,
            binary: p.binary.clone(),
            version: p.version.clone(),
            launch: &p.launch,
            guest_cmdline: p.cmdline.clone(),
        })
        .collect();
    let shared = Shared {
        spec: &spec,
        guest: &lg,
        kernel_config,
        facts: &facts,
        warnings: warnings.clone(),
        invocation,
        explicit,
    };
    let w = engines::write_dir(&dest, &shared, &bundles, &ran, Vec::new())?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(RunOutcome {
        written: w.written,
        interrupted: ran.interrupted,
        warnings,
        arms: w.arms,
    })
}

/// The name of the parity guest's workspace image in the guest directory (xtask's).
pub const WORKSPACE_IMAGE: &str = xtask::workspace::IMAGE;
/// Where the parity kernel (vmlinux, config) is in the guest directory (xtask's).
pub const PARITY_KERNEL_DIR: &str = xtask::PARITY_DIR;

/// A parity campaign (`--parity`): each arm's engine under the agent channel
/// ([`crate::parity::launch::ParityLauncher`]); truecold-vmm alone is one bundle, engine arms
/// (`--engine`/`--engines`) run interleaved like an engines campaign into one directory.
/// Every bundle's rows carry the network proof and the cleanup, with its arm's lifecycle
/// table as `state.csv`.
fn run_parity(
    args: &RunArgs,
    invocation: &str,
    schedule: &Schedule,
) -> Result<RunOutcome, RunError> {
    use crate::engines::{self, ArmBundle, ArmExtras, EnginesSpec, Shared};
    use crate::parity::{launch::ParityLauncher, state::StateDb};
    use truecold_proto::kinds::Engine;
    let rounds = schedule.validate()?;
    let guest_dir = artifacts::guest_dir(args.guest_dir.as_deref());
    let named = args.arms()?;
    // No engine named: truecold-vmm alone, one bundle (as before engine arms existed).
    let single = named.is_empty();
    let arms = if single {
        vec![Engine::Truecold]
    } else {
        named
    };
    for e in &arms {
        truecold_engine::parity::supported(*e).map_err(|e| RunError::Parity(e.to_string()))?;
    }
    if args.nested {
        return Ok(nested::run_parity(
            args,
            (!single).then_some(arms.as_slice()),
            rounds,
            &guest_dir,
        )?);
    }
    let resolved = engines::resolve(&arms, args)?;
    // The parity guest: the same init and initramfs, the parity kernel (base + parity
    // fragment: virtio-mmio, -pci, -blk, -net, vsock, ext4) from `<guest-dir>/parity/`.
    let mut lg = artifacts::linux_guest(&guest_dir)?;
    for (slot, name) in [(&mut lg.vmlinux, "vmlinux"), (&mut lg.config, "config")] {
        let p = guest_dir.join(PARITY_KERNEL_DIR).join(name);
        if !p.is_file() {
            return Err(RunError::Parity(format!(
                "{} is missing (build the parity guest: cargo run -p xtask -- guest)",
                p.display()
            )));
        }
        *slot = p;
    }
    let base_image = guest_dir.join(WORKSPACE_IMAGE);
    if base_image.symlink_metadata().is_err() {
        return Err(RunError::Parity(format!(
            "{} is missing (build the parity guest: cargo run -p xtask -- guest)",
            base_image.display()
        )));
    }
    let (kind, warnings) = kvm_host()?;
    let guest = engines::guest_of(args, &lg);
    let dest = args.out.clone().unwrap_or_else(|| {
        let (stamp, _) = crate::clock::utc_now();
        let label = if single {
            String::new()
        } else {
            format!("-{}", engines_label(&arms))
        };
        Path::new("results").join(format!(
            "{stamp}-parity{label}-{}vcpu-{}mib",
            args.vcpus, args.mem_mib
        ))
    });
    if dest.symlink_metadata().is_ok() {
        return Err(RunError::OutExists(dest));
    }
    let work = std::env::temp_dir().join(format!("truecold-parity-{}", std::process::id()));
    // A stale directory of an earlier process with this pid would hold its lifecycle rows.
    let _ = std::fs::remove_dir_all(&work);
    let prepared = engines::prepare(&resolved, &guest, &work, kind)?;
    let kernel_config = std::fs::read(&lg.config).map_err(|source| RunError::Config {
        path: lg.config.clone(),
        source,
    })?;
    let spec = EnginesSpec::of_args(
        args,
        arms.clone(),
        rounds,
        truecold_proof::schema::Observer::Agent,
    );
    let parity_err =
        |e: &dyn std::error::Error| RunError::Parity(truecold_proto::measure::error_chain(e));
    let pair = truecold_proto::parity::NetPair::for_slot(0)
        .map_err(|e| RunError::Parity(e.to_string()))?;
    // The base image's digest (a directory or unreadable file has none: every clone of it
    // fails, typed, per launch), its pages dropped after so the clones stay sparse.
    let workspace_sha256 = crate::parity::workspace::image_digest(&base_image)
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    let mut launchers = Vec::new();
    let mut journals = Vec::new();
    // What each arm's guest is given: truecold-vmm builds its own (the observed one is
    // recorded), a peer gets the agent command line.
    let mut cmdlines = Vec::new();
    for p in &prepared {
        let dir = work.join(p.engine.as_str());
        let state = StateDb::open(&dir.join("state.sqlite")).map_err(|e| parity_err(&e))?;
        journals.push(
            state
                .pragmas()
                .map(|j| truecold_proof::lifecycle::journal(&j.journal_mode, j.synchronous))
                .map_err(|e| parity_err(&e))?,
        );
        cmdlines.push(match p.engine {
            Engine::Truecold => p.cmdline.clone(),
            e => truecold_engine::parity::cmdline(e, &guest, pair).map_err(|e| parity_err(&e))?,
        });
        launchers.push(ParityLauncher {
            base: p.launch.clone(),
            guest: guest.clone(),
            base_image: base_image.clone(),
            run_root: dir.join("launches"),
            pair,
            state: std::cell::RefCell::new(state),
            tap_override: args.inject_tap_name.clone(),
            mem_bytes: spec.mem_bytes,
            deadline_ns: spec.deadline_ns,
            kill_grace_ns: spec.kill_grace_ns,
        });
    }
    let facts = HostFacts::read(kind);
    let stop = interrupt::install()?;
    eprintln!(
        "truecold: parity campaign — {rounds} round(s) of {} arm(s){}, {} vCPU, {} MiB, \
         backing {}, deadline {} ms, agent over vsock + TCP over tap {} → {}",
        arms.len(),
        if single {
            String::new()
        } else {
            format!(" in seeded shuffled order (seed {})", args.seed)
        },
        spec.vcpus,
        spec.mem_bytes >> 20,
        spec.backing,
        args.deadline_ms(),
        pair,
        dest.display()
    );
    let total = rounds.saturating_mul(arms.len() as u64);
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), "parity", total);
    let ran = engines::execute(
        &spec,
        &cmdlines,
        &ParityArms(&launchers),
        stop,
        &mut progress,
        None,
        &campaign::self_cpu_ns,
    );
    let bins: Vec<(Engine, PathBuf)> = prepared
        .iter()
        .map(|p| (p.engine, p.binary.clone()))
        .collect();
    let vmm = bins
        .iter()
        .find(|(e, _)| *e == Engine::Truecold)
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    let explicit = explicit_args(
        args,
        schedule,
        guest_flag(ContractKind::Linux),
        ArgPaths {
            vmm: &vmm,
            guest_dir: Some(&absolute(&guest_dir)),
            out: &std::path::absolute(&dest).unwrap_or_else(|_| dest.clone()),
            engines: if single { &[] } else { &bins },
        },
    );
    // Each arm's command as recorded: its parity form with the per-launch values named.
    let mut shown = Vec::new();
    for l in &launchers {
        shown.push(
            l.launch_for(Path::new("<run-dir>"), "<tap>")
                .map_err(|e| parity_err(&e))?,
        );
    }
    let bundles: Vec<ArmBundle<'_>> = prepared
        .iter()
        .zip(&shown)
        .zip(ran.arms.iter().zip(&cmdlines))
        .map(|((p, launch), (arm, given))| ArmBundle {
            engine: p.engine,
            binary: p.binary.clone(),
            version: p.version.clone(),
            launch,
            // truecold-vmm's as it reported it (its virtio-mmio entries included).
            guest_cmdline: match p.engine {
                Engine::Truecold => arm.cmdlines.iter().next().cloned(),
                _ => None,
            }
            .unwrap_or_else(|| given.clone()),
        })
        .collect();
    let mut extras = Vec::new();
    for (l, journal) in launchers.iter().zip(journals) {
        let export = l
            .state
            .borrow()
            .export(&l.run_root)
            .map_err(|e| parity_err(&e))?;
        let state_csv = std::fs::read(&export.path)
            .map_err(|e| RunError::Parity(format!("reading {}: {e}", export.path.display())))?;
        extras.push(ArmExtras {
            warnings: vec![
                "the parity contract: each launch's lifecycle (state.csv; its digest in \
                 environment.parity) committed to an embedded SQLite table (WAL, \
                 synchronous=FULL); RUNNING is committed after the spawn, inside the measured \
                 window"
                    .to_string(),
            ],
            files: vec![(crate::parity::lifecycle::STATE_CSV.to_string(), state_csv)],
            parity: Some(truecold_proof::schema::ParityFacts {
                state_sha256: export.sha256.clone(),
                net_pair: pair.to_string(),
                workspace_sha256: workspace_sha256.clone(),
                journal,
            }),
        });
    }
    let shared = Shared {
        spec: &spec,
        guest: &lg,
        kernel_config,
        facts: &facts,
        warnings: warnings.clone(),
        invocation,
        explicit,
    };
    let outcome = if single {
        // The bundle appears atomically (written beside `dest`, then renamed).
        let (Some(b), Some(arm)) = (bundles.first(), ran.arms.first()) else {
            return Err(RunError::Parity("no truecold arm".into()));
        };
        let mut e = extras.into_iter().next().unwrap_or_default();
        e.warnings.splice(0..0, warnings.iter().cloned());
        let verdict = engines::write_arm_bundle(&dest, &shared, b, arm, &ran, e)?;
        RunOutcome {
            written: Written {
                path: dest,
                verdict,
            },
            interrupted: ran.interrupted,
            warnings,
            arms: Vec::new(),
        }
    } else {
        let w = engines::write_dir(&dest, &shared, &bundles, &ran, extras)?;
        RunOutcome {
            written: w.written,
            interrupted: ran.interrupted,
            warnings,
            arms: w.arms,
        }
    };
    let _ = std::fs::remove_dir_all(&work);
    Ok(outcome)
}

/// Every arm's parity launcher, as the engines campaign's launcher.
struct ParityArms<'a>(&'a [crate::parity::launch::ParityLauncher]);

impl crate::engines::ArmLauncher for ParityArms<'_> {
    fn launch(
        &self,
        arm: usize,
        round: u64,
        row: &crate::engines::RowOf<'_>,
    ) -> (
        truecold_engine::driver::Launched,
        truecold_proof::schema::Sample,
        truecold_proto::report::EngineRun,
    ) {
        let pl = self.0[arm].launch(round, row);
        let (s, run) = pl.row;
        (pl.launched, s, run)
    }
}

/// One line per concurrency level (burst, churn, sweep): latency and sustained throughput,
/// and the knee as `truecold-proof` defines it.
pub fn level_lines(r: &truecold_proof::schema::ResultJson) -> Vec<String> {
    use truecold_proof::report::ms;
    let sm = &r.summary;
    let mut out: Vec<String> = sm
        .by_concurrency
        .iter()
        .filter(|g| g.concurrency > 1 || sm.by_concurrency.len() > 1)
        .map(|g| {
            let p = |f: fn(&truecold_proof::stats::Summary) -> u64| {
                g.headline
                    .successes
                    .as_ref()
                    .map(|s| format!("{} ms", ms(f(s))))
                    .unwrap_or_else(|| "–".into())
            };
            let tput = g
                .throughput_per_ks
                .map(|t| format!("{}.{:03}/s", t / 1000, t % 1000))
                .unwrap_or_else(|| "–".into());
            format!(
                "  concurrency {}: {} attempts, {} ok, p50 {}, p99 {}, throughput {tput}",
                g.concurrency,
                g.attempts,
                g.successes,
                p(|s| s.p50),
                p(|s| s.p99)
            )
        })
        .collect();
    if let Some(k) = sm.peak_throughput_concurrency {
        out.push(format!("  highest throughput: concurrency {k}"));
    }
    if let Some(k) = sm.knee_concurrency {
        out.push(format!(
            "  knee (p50 above 1.5x the concurrency-1 p50): concurrency {k}"
        ));
    }
    out
}

/// What the truecold-vmm binary says of itself: the first line of `<binary> --version`, run
/// once before the campaign (outside every measured window; `truecold_engine::version`).
pub fn engine_version(binary: &Path) -> Result<String, RunError> {
    truecold_engine::version::query(truecold_proto::kinds::Engine::Truecold, binary)
        .map_err(RunError::EngineVersion)
}

/// This host's KVM: `/dev/kvm` must exist; its kind (detected or forced) and, when forced,
/// the warning that says so (printed, and kept for the bundle).
pub fn kvm_host() -> Result<(HostKind, Vec<String>), RunError> {
    if !Path::new("/dev/kvm").exists() {
        return Err(RunError::NoKvm);
    }
    let (kind, forced) = host_kind()?;
    let mut warnings = Vec::new();
    if let Some(w) = forced {
        eprintln!("truecold: warning: {w}");
        warnings.push(w);
    }
    Ok((kind, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use truecold_proto::kinds::HostKind as V;

    fn parse(extra: &[&str]) -> RunArgs {
        let mut v = vec!["truecold", "run"];
        v.extend_from_slice(extra);
        Cli::try_parse_run(v).unwrap()
    }

    fn explicit(a: &RunArgs, contract: ContractKind) -> Vec<String> {
        let guest_dir = Path::new("/g");
        explicit_args(
            a,
            &a.schedule().unwrap(),
            guest_flag(contract),
            ArgPaths {
                vmm: Path::new("/bin/truecold-vmm"),
                guest_dir: (contract == ContractKind::Linux).then_some(guest_dir),
                out: Path::new("/r/b"),
                engines: &[],
            },
        )
    }

    #[test]
    fn explicit_arguments_fill_in_every_default() {
        let a = parse(&["--probe"]);
        assert_eq!(
            explicit(&a, ContractKind::Probe).join(" "),
            "--probe --mode sequential --count 1000 --vcpus 2 --mem-mib 16384 --backing anon \
             --deadline-ms 2000 --kill-grace-ms 500 --cmdline-extra  --vmm /bin/truecold-vmm \
             --out /r/b"
        );
        let a = parse(&["--mode", "burst", "--deadline-ms", "750", "--drop-caches"]);
        assert_eq!(
            explicit(&a, ContractKind::Linux).join(" "),
            "--linux --mode burst --count 1000 --vcpus 2 --mem-mib 16384 --backing anon \
             --concurrency 2 --deadline-ms 750 --kill-grace-ms 500 --cmdline-extra  \
             --drop-caches --vmm /bin/truecold-vmm --guest-dir /g --out /r/b"
        );
    }

    /// Parsing the explicit arguments gives the same campaign, whose explicit arguments are
    /// the same again.
    #[test]
    fn explicit_arguments_rerun_the_same_campaign() {
        for (argv, contract) in [
            (vec![], ContractKind::Linux),
            (
                vec!["--probe", "-n", "7", "--vcpus", "1"],
                ContractKind::Probe,
            ),
            (
                vec!["--mode", "open-loop", "--rate", "2.5", "--backing", "thp"],
                ContractKind::Probe,
            ),
            (
                vec![
                    "--mode",
                    "open-loop",
                    "--rate",
                    "0.333",
                    "--concurrency",
                    "3",
                ],
                ContractKind::Linux,
            ),
            (
                vec!["--mode", "sweep", "--max-concurrency", "3"],
                ContractKind::Linux,
            ),
            (
                vec!["--mode", "churn", "--console", "--kill-grace-ms", "9"],
                ContractKind::Linux,
            ),
            (
                vec!["--cmdline-extra", "quiet loglevel='0' -x", "--nested"],
                ContractKind::Linux,
            ),
        ] {
            let a = parse(&argv);
            let e = explicit(&a, contract);
            let words: Vec<&str> = e.iter().map(String::as_str).collect();
            let b = parse(&words);
            assert_eq!(b.schedule().unwrap(), a.schedule().unwrap(), "{argv:?}");
            assert_eq!(b.deadline_ms(), a.deadline_ms(), "{argv:?}");
            assert_eq!(b.cmdline_extra, a.cmdline_extra, "{argv:?}");
            assert_eq!(explicit(&b, contract), e, "{argv:?}");
        }
    }

    #[test]
    fn cmdline_txt_has_the_real_deadline_and_no_placeholder() {
        let a = parse(&["--probe", "--deadline-ms", "1234"]);
        let spec = CampaignSpec {
            observer: truecold_proof::schema::Observer::VmExit,
            interleaved: false,
            schedule: a.schedule().unwrap(),
            contract: ContractKind::Probe,
            vcpus: 2,
            mem_bytes: 256 << 20,
            backing: truecold_proto::kinds::Backing::Anon,
            deadline_ns: 1_234_000_000,
            kill_grace_ns: 500_000_000,
        };
        let cmd = VmmCommand {
            program: "/opt/truecold vmm".into(),
            args: vec!["boot".into(), "--probe".into()],
        };
        let line = vmm_command_line(&cmd, &spec);
        assert_eq!(
            line,
            "'/opt/truecold vmm' boot --probe --request-ns <actual_request_ns> \
             --deadline-at-ns <actual_request_ns+1234000000>"
        );
        let text = cmdline_txt(
            ContractKind::Probe.label(),
            "truecold run --probe --deadline-ms 1234",
            &explicit(&a, ContractKind::Probe),
            &line,
            None,
        );
        assert!(!text.contains("<DEADLINE_MS>"), "{text}");
        assert!(text.starts_with("# VMM floor (probe guest), not a Linux boot\n"));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[4].starts_with("truecold run --probe --mode sequential"));
        assert!(lines[4].contains(" --deadline-ms 1234 "), "{}", lines[4]);
        assert!(lines[4].contains(" --cmdline-extra '' "), "{}", lines[4]);
        assert_eq!(lines[6], line);
        let mut open = spec.clone();
        open.schedule = Schedule::OpenLoop {
            n: 3,
            interval_ns: 1_000_000,
            max_in_flight: 2,
        };
        assert!(vmm_command_line(&cmd, &open)
            .ends_with("--deadline-at-ns <intended_request_ns+1234000000>"));
        // The verifier reads back what this writes.
        let r = truecold_proof::cmdline::parse_cmdline_txt(text.as_bytes()).unwrap();
        assert_eq!(r.invocation.get("--deadline-ms"), Some("1234"));
        assert_eq!(r.vmm_line, line);
    }

    #[test]
    fn drop_caches_needs_root_and_the_sequential_mode() {
        let a = parse(&["--drop-caches"]);
        let s = a.schedule().unwrap();
        assert!(check_drop_caches(&a, &s, Some(0)).is_ok());
        assert!(matches!(
            check_drop_caches(&a, &s, Some(1000)),
            Err(RunError::DropCachesNotRoot(1000))
        ));
        // --nested: the caches are L1's, dropped by L1's root init.
        assert!(check_drop_caches(&a, &s, None).is_ok());
        let a = parse(&["--drop-caches", "--mode", "churn"]);
        assert!(matches!(
            check_drop_caches(&a, &a.schedule().unwrap(), Some(0)),
            Err(RunError::DropCachesMode)
        ));
        let a = parse(&[]);
        assert!(check_drop_caches(&a, &a.schedule().unwrap(), Some(1000)).is_ok());
    }

    #[test]
    fn a_forced_host_kind_is_a_warning_naming_both_kinds() {
        let w = forced_warning(&Detection::new(Some(V::Hardware), V::Pvm)).unwrap();
        assert!(
            w.starts_with("host kind forced to hardware (detected pvm)"),
            "{w}"
        );
        assert_eq!(forced_warning(&Detection::new(None, V::Pvm)), None);
    }

    #[test]
    fn every_sample_gets_the_campaign_host_kind() {
        let args = match crate::cli::Cli::try_parse_run(["truecold", "run", "--probe"]) {
            Ok(a) => a,
            Err(e) => panic!("{e}"),
        };
        let spec = CampaignSpec {
            observer: truecold_proof::schema::Observer::VmExit,
            interleaved: false,
            schedule: crate::schedule::Schedule::Sequential { n: 1 },
            contract: ContractKind::Probe,
            vcpus: 2,
            mem_bytes: 16384 << 20,
            backing: truecold_proto::kinds::Backing::Anon,
            deadline_ns: 2_000_000_000,
            kill_grace_ns: 500_000_000,
        };
        for kind in [HostKind::Hardware, HostKind::Pvm, HostKind::NestedEmulated] {
            let v: Vec<String> = vmm_args(&spec, None, &args, false, kind)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let at = v.iter().position(|a| a == "--host-kind").unwrap();
            assert_eq!(v[at + 1], kind.as_str());
            // The VMM's parser takes the same spelling.
            assert_eq!(truecold_vmm::host::parse_host_kind(kind.as_str()), Ok(kind));
        }
    }
}
