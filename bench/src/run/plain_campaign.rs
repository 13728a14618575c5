//! The plain campaign: truecold-vmm alone on this host's /dev/kvm, one bundle; and the VMM
//! command every truecold launch (campaign, tune arm, bisect step) is made of.

use super::outcome::RunOutcome;
use super::run_error::RunError;
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::attribution::launches;
use crate::campaign::bundle_out;
use crate::campaign::execute::{execute, self_cpu_ns, BeforeEach, Executed, Harness};
use crate::campaign::process_launcher::{ProcessLauncher, VmmCommand};
use crate::campaign::schedule::Schedule;
use crate::campaign::spec::CampaignSpec;
use crate::campaign::vmm_output;
use crate::checks::environment;
use crate::checks::preflight::{drop_page_cache, kvm_host, PVM_EXPLANATION};
use crate::plan::arg_error::ArgError;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::explicit_args::{explicit_args, explicit_line, guest_flag, ArgPaths};
use crate::plan::guest::Target;
use crate::terminal::interrupt;
use crate::terminal::output;
use crate::terminal::progress::{Progress, Style};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use truecold_proof::bundle::{BundleInputs, Written};
use truecold_proof::schema::{Configuration, ContractKind, HostKind, ResultJson};
use truecold_proto::kinds::Engine;
use truecold_proto::path_io::PathIoError;

/// Checks `--drop-caches` against the mode and the effective uid `euid` (`None` for
/// `--nested`, where the caches dropped are L1's and L1's init is root), before anything
/// launches.
pub fn check_drop_caches(
    drop_caches: bool,
    schedule: &Schedule,
    euid: Option<u32>,
) -> Result<(), RunError> {
    if !drop_caches {
        return Ok(());
    }
    if !matches!(schedule, Schedule::Sequential { .. }) {
        return Err(ArgError::DropCachesMode.into());
    }
    match euid {
        Some(uid) if uid != 0 => Err(RunError::DropCachesNotRoot(uid)),
        _ => Ok(()),
    }
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

/// The VMM's fixed arguments for a launch of `spec`: `guest` is the kernel image and
/// initramfs (`None`: the probe guest); `vmm` the flags a campaign or a tune arm adds
/// (`--console`, `--pin-vcpus`); `host` is the kind detected once for the campaign,
/// passed as `--host-kind` so no sample spends its measured window detecting it. One
/// definition for campaigns, tune arms and bisect steps.
pub fn vmm_args(
    spec: &CampaignSpec,
    guest: Option<(&Path, &Path)>,
    cmdline_extra: &str,
    vmm: VmmFlags,
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
        ("--mem-mib", spec.mem.mib().to_string()),
        ("--backing", spec.backing.as_str().to_string()),
        ("--host-kind", host.as_str().to_string()),
    ] {
        v.push(k.into());
        v.push(val.into());
    }
    // Always spelt out: the VMM's default is not what a line without it means
    // (`RamLayout::ABSENT`), so every launch names its layout.
    v.push("--ram-layout".into());
    v.push(spec.ram_layout.as_str().into());
    if !cmdline_extra.is_empty() {
        v.push("--cmdline-extra".into());
        v.push(cmdline_extra.into());
    }
    if vmm.console {
        v.push("--console".into());
    }
    if vmm.pin_vcpus {
        v.push("--pin-vcpus".into());
    }
    v.extend(spec.cpu_platform.flags().into_iter().map(OsString::from));
    if force {
        v.push("--force".into());
    }
    // The VMM jails itself as root unless told not to (TRUECOLD_VMM_JAIL=off), in L1 too.
    v.extend(
        truecold_engine::truecold::jail_args()
            .into_iter()
            .map(OsString::from),
    );
    v
}

/// The switches of truecold-vmm's command that a campaign or a tune arm chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmmFlags {
    /// `--console`: the guest's console on the 8250.
    pub console: bool,
    /// `--pin-vcpus`: each vCPU thread on a CPU of its own.
    pub pin_vcpus: bool,
}

/// `p` resolved through links, or as given when it cannot be.
pub fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// What the truecold-vmm binary says of itself: the first line of `<binary> --version`, run
/// once before the campaign (outside every measured window; `truecold_engine::version`).
pub fn engine_version(binary: &Path) -> Result<String, RunError> {
    truecold_engine::version::query(truecold_proto::kinds::Engine::Truecold, binary)
        .map_err(RunError::EngineVersion)
}

/// The guest kernel config of a bundle.
pub fn kernel_config(g: &LinuxGuest) -> Result<Vec<u8>, RunError> {
    std::fs::read(&g.config).map_err(|e| RunError::Config(PathIoError::at("read", &g.config)(e)))
}

/// The contract a plain campaign on a host of `kind` runs, whether the VMM is forced, and
/// the warning that says why when the host changes what was asked.
fn contract_for(target: Target, kind: HostKind) -> (ContractKind, bool, Option<String>) {
    match (target, kind) {
        (Target::Probe, _) => (ContractKind::Probe, false, None),
        (Target::Linux, HostKind::Pvm) => {
            let w = "--linux on a kvm_pvm host: an unmodified Linux kernel is not expected to \
                     boot here; every failure is kept as data"
                .to_string();
            output::note_once(&w, &format!("truecold: warning: {w}"));
            (ContractKind::Linux, true, Some(w))
        }
        (_, HostKind::Pvm) => {
            output::note_once(PVM_EXPLANATION, &format!("truecold: {PVM_EXPLANATION}"));
            (
                ContractKind::Probe,
                false,
                Some(PVM_EXPLANATION.to_string()),
            )
        }
        _ => (ContractKind::Linux, false, None),
    }
}

/// `--cmdline-extra` against the contract the host chose: refused (never silently dropped)
/// where the campaign falls back to the probe guest, which has no kernel command line (an
/// explicit `--probe` is refused by the plan already).
fn check_cmdline_extra(plan: &CampaignPlan, contract: ContractKind) -> Result<(), ArgError> {
    if contract == ContractKind::Probe && !plan.guest.cmdline_extra.is_empty() {
        return Err(if plan.target == Target::Probe {
            ArgError::CmdlineExtraProbe
        } else {
            ArgError::CmdlineExtraProbeFallback
        });
    }
    Ok(())
}

/// A plain campaign, ready to launch.
struct Prepared {
    spec: CampaignSpec,
    kind: HostKind,
    force: bool,
    vmm: PathBuf,
    guest_dir: PathBuf,
    guest: Option<LinuxGuest>,
    dest: PathBuf,
    command: VmmCommand,
    warnings: Vec<String>,
}

/// Everything before the first launch: the host, the contract, the artifacts, the VMM
/// command and the bundle's place.
fn prepare(plan: &CampaignPlan) -> Result<Prepared, RunError> {
    let (kind, mut warnings) = kvm_host()?;
    let guest_dir = guest_files::guest_dir(plan.guest_dir.as_deref());
    let (contract, force, warning) = contract_for(plan.target, kind);
    check_cmdline_extra(plan, contract)?;
    warnings.extend(warning);
    let spec = CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        stop_after: plan.stop_after,
        schedule: plan.schedule,
        contract,
        vcpus: plan.guest.vcpus,
        mem: plan.guest.mem,
        backing: plan.backing_of(Engine::Truecold, contract == ContractKind::Linux),
        ram_layout: plan.guest.ram_layout,
        cpu_platform: plan.guest.cpu_platform,
        deadline_ns: plan.deadline_ns(),
        kill_grace_ns: plan.kill_grace_ns(),
    };
    let vmm = guest_files::find_vmm(plan.vmm.as_deref())?;
    let guest = match contract {
        ContractKind::Linux if plan.guest.bzimage => {
            Some(guest_files::linux_guest_bzimage(&guest_dir)?)
        }
        ContractKind::Linux => Some(guest_files::linux_guest(&guest_dir)?),
        ContractKind::Probe => None,
    };
    let dest = match &plan.out {
        Some(p) => p.clone(),
        None => bundle_out::default_dest(Path::new("results"), &spec),
    };
    if dest.symlink_metadata().is_ok() {
        return Err(RunError::OutExists(dest));
    }
    let command = launch_command(
        &spec,
        &vmm,
        guest.as_ref(),
        &plan.guest.cmdline_extra,
        plan,
        force,
        kind,
    );
    Ok(Prepared {
        spec,
        kind,
        force,
        vmm,
        guest_dir,
        guest,
        dest,
        command,
        warnings,
    })
}

/// The VMM command of a plain campaign's launches (`cmdline_extra`: the plan's, or the
/// attribution launches' own).
fn launch_command(
    spec: &CampaignSpec,
    vmm: &Path,
    guest: Option<&LinuxGuest>,
    cmdline_extra: &str,
    plan: &CampaignPlan,
    force: bool,
    kind: HostKind,
) -> VmmCommand {
    VmmCommand {
        program: vmm.to_path_buf(),
        args: vmm_args(
            spec,
            guest.map(|g| (g.vmlinux.as_path(), g.initramfs.as_path())),
            cmdline_extra,
            VmmFlags {
                console: plan.guest.console,
                pin_vcpus: plan.guest.pin_vcpus,
            },
            force,
            kind,
        ),
    }
}

/// Runs the plain campaign `plan` describes and writes its bundle.
pub fn run(plan: &CampaignPlan, invocation: &str) -> Result<RunOutcome, RunError> {
    let p = prepare(plan)?;
    let digests = guest_files::digests(&p.vmm, p.guest.as_ref())?;
    let kernel_config = p.guest.as_ref().map(kernel_config).transpose()?;
    let launcher = ProcessLauncher {
        command: p.command.clone(),
        deadline_ns: p.spec.deadline_ns,
        kill_grace_ns: p.spec.kill_grace_ns,
        from_intended: p.spec.mode().has_intended_time(),
    };
    let vmm_line = vmm_command_line(&p.command, &p.spec);
    let facts = environment::read_facts(p.kind);
    let stop = interrupt::install()?;
    let planned = p.spec.schedule.validate()?;
    announce(plan, &p, planned)?;
    let label = match p.spec.contract {
        ContractKind::Linux => "linux",
        ContractKind::Probe => "probe floor",
    };
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), label, planned);
    // The rows and evidence are staged beside the bundle as they come.
    let staging = bundle_out::staging_for(&p.dest);
    let harness = Harness {
        before_each: plan.drop_caches.then_some(&drop_page_cache as &BeforeEach),
        cpu_ns: &self_cpu_ns,
        staging: Some(&staging),
        parallel: crate::campaign::parallel::clock_for(p.kind)?,
    };
    let ex = execute(
        &p.spec,
        &launcher,
        &vmm_output::observe_attempt,
        stop,
        &mut progress,
        &harness,
    )?;
    let guest_cmdline = ex.cmdlines.iter().next().cloned();
    let configuration = configuration(&p, &ex, guest_cmdline.as_deref(), &vmm_line)?;
    let result = bundle_out::result_json(
        &p.spec,
        &ex,
        configuration,
        digests,
        &facts,
        p.warnings.clone(),
    );
    let explicit = explicit_args(
        plan,
        guest_flag(p.spec.contract),
        ArgPaths {
            vmm: &absolute(&p.vmm),
            guest_dir: p.guest.as_ref().map(|_| absolute(&p.guest_dir)).as_deref(),
            out: &std::path::absolute(&p.dest).unwrap_or_else(|_| p.dest.clone()),
            engines: &[],
        },
    );
    let cmdline = cmdline_txt(
        p.spec.contract.label(),
        invocation,
        &explicit,
        &vmm_line,
        guest_cmdline.as_deref(),
    );
    let mut extra_files = Vec::new();
    if plan.attribution > 0 && !ex.interrupted && ex.stopped.is_none() {
        extra_files.extend(attribution_files(plan, &p, &ex, &result, stop)?);
    }
    let mut inputs = BundleInputs {
        kernel_config,
        cmdline,
        extra_files,
        staged_files: Vec::new(),
    };
    ex.reports
        .add_to(truecold_proof::names::REPORTS_FILE, &mut inputs)?;
    let written = write_or_save(p.dest, &result, &ex, &inputs)?;
    Ok(RunOutcome {
        written,
        interrupted: ex.interrupted,
        warnings: result.environment.warnings.clone(),
        arms: Vec::new(),
    })
}

/// The campaign's line on stderr and, with `--drop-caches`, the first drop (so a host that
/// refuses fails before any launch).
fn announce(plan: &CampaignPlan, p: &Prepared, planned: u64) -> Result<(), RunError> {
    crate::note!(
        "truecold: {} — {} — {planned} launches, {} vCPU, {}, backing {}, deadline {} ms → {}",
        p.spec.contract.label(),
        p.spec.mode().describe(),
        p.spec.vcpus,
        p.spec.mem,
        p.spec.backing,
        plan.deadline_ms,
        p.dest.display()
    );
    if plan.drop_caches {
        drop_page_cache().map_err(RunError::DropCaches)?;
        crate::note!(
            "truecold: --drop-caches: sync and drop the host page cache before every sample \
             (outside its measured window)"
        );
    }
    Ok(())
}

/// The bundle's configuration record.
fn configuration(
    p: &Prepared,
    ex: &Executed,
    guest_cmdline: Option<&str>,
    vmm_line: &str,
) -> Result<Configuration, RunError> {
    Ok(Configuration {
        vcpus: u32::from(p.spec.vcpus.get()),
        mem_bytes: p.spec.mem.bytes(),
        backing: bundle_out::backing_description(p.spec.backing, &ex.backings),
        ram_layout: p.spec.ram_layout,
        cpu_platform: p.spec.cpu_platform,
        cmdline: match (guest_cmdline, p.spec.contract) {
            (Some(c), ContractKind::Linux) => c.to_string(),
            _ => vmm_line.to_string(),
        },
        vmm_path: p.vmm.display().to_string(),
        kernel_path: p
            .guest
            .as_ref()
            .map(|g| absolute(&g.vmlinux).display().to_string()),
        initramfs_path: p
            .guest
            .as_ref()
            .map(|g| absolute(&g.initramfs).display().to_string()),
        engine: truecold_proof::schema::EngineInfo {
            kind: truecold_proof::schema::Engine::Truecold,
            version: engine_version(&p.vmm)?,
        },
        knobs: vec![],
    })
}

/// `--attribution`'s launches (after the measured campaign, never rows) and the files they
/// give.
fn attribution_files(
    plan: &CampaignPlan,
    p: &Prepared,
    ex: &Executed,
    result: &ResultJson,
    stop: &AtomicBool,
) -> Result<Vec<(String, Vec<u8>)>, RunError> {
    let extra = plan.instrument.cmdline_extra(&plan.guest.cmdline_extra);
    let command = plan.instrument.command(
        launch_command(
            &p.spec,
            &p.vmm,
            p.guest.as_ref(),
            &extra,
            plan,
            p.force,
            p.kind,
        ),
        p.guest.as_ref().map(|g| g.config.as_path()),
    );
    let jsonl = launches::run_for(
        &p.spec,
        &command,
        plan.attribution,
        p.guest.as_ref().map(|g| g.symbols.as_path()),
        stop,
    )?;
    let clock = result.environment.host_kind.clock().describe();
    let mut files = Vec::new();
    match truecold_proof::attribution::generate(&jsonl, &ex.samples, clock) {
        Ok(f) => files.extend(f),
        // Kept as data: verify names why there is no attribution.
        Err(e) => eprintln!("truecold: attribution: {e}"),
    }
    files.push((truecold_proof::attribution::JSONL_FILE.to_string(), jsonl));
    Ok(files)
}

/// Writes the bundle at `dest`; when that fails, the rows (the campaign's only copy) are
/// saved under the temporary directory instead and the error says where.
fn write_or_save(
    dest: PathBuf,
    result: &ResultJson,
    ex: &Executed,
    inputs: &BundleInputs,
) -> Result<Written, RunError> {
    match bundle_out::write(&dest, result, &ex.samples, inputs) {
        Ok(w) => Ok(w),
        Err(source) => {
            let name = dest.file_name().map_or_else(
                || "bundle".to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let saved = std::env::temp_dir()
                .join(format!("truecold-unsaved-{}-{name}", std::process::id()));
            Err(
                match bundle_out::write(&saved, result, &ex.samples, inputs) {
                    Ok(_) => RunError::SavedElsewhere {
                        dest,
                        saved,
                        source,
                    },
                    Err(_) => RunError::Bundle(source),
                },
            )
        }
    }
}

#[cfg(test)]
mod tests;
