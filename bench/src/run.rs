//! `truecold run`: from arguments to a written, verified bundle.

use crate::artifacts::{self, ArtifactError, LinuxGuest};
use crate::campaign::{self, backing_counts, CampaignSpec};
use crate::cli::{ArgError, RunArgs};
use crate::host::HostFacts;
use crate::interrupt::{self, InstallError};
use crate::launch::{ProcessLauncher, VmmCommand};
use crate::nested::{self, NestedError};
use crate::progress::{Progress, Style};
use crate::schedule::ScheduleError;
use crate::vmm_report;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use truecold_proof::bundle::{BundleError, BundleInputs, Written};
use truecold_proof::schema::{Configuration, ContractKind, HostKind};

/// Why a campaign could not run or be written.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("bad arguments")]
    Args(#[from] ArgError),
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
    pub written: Written,
    pub interrupted: bool,
    pub warnings: Vec<String>,
}

/// The host kind in effect (the VMM library's detection, one definition) and, when
/// `TRUECOLD_HOST_KIND` forced it, the warning that says so.
fn host_kind() -> Result<(HostKind, Option<String>), RunError> {
    use truecold_vmm::host::HostKind as V;
    let d = V::detection(None);
    let kind = match d.kind {
        V::Hardware => HostKind::Hardware,
        V::Pvm => HostKind::Pvm,
        V::NestedEmulated => HostKind::NestedEmulated,
        V::Unknown => return Err(RunError::UnknownHost),
    };
    Ok((kind, forced_warning(&d)))
}

/// `host kind forced to X (detected Y)` when an override set the kind.
pub fn forced_warning(d: &truecold_vmm::host::Detection) -> Option<String> {
    d.forced.then(|| {
        format!(
            "host kind forced to {} (detected {}) by TRUECOLD_HOST_KIND",
            d.kind.name(),
            d.detected
                .map_or("nothing", truecold_vmm::host::HostKind::name)
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
    let mut v: Vec<OsString> = vec!["boot".into()];
    match guest {
        Some(g) => {
            v.push("--kernel".into());
            v.push(g.vmlinux.clone().into());
            v.push("--initramfs".into());
            v.push(g.initramfs.clone().into());
        }
        None => v.push("--probe".into()),
    }
    for (k, val) in [
        ("--vcpus", spec.vcpus.to_string()),
        ("--mem-mib", (spec.mem_bytes >> 20).to_string()),
        ("--backing", spec.backing.clone()),
        ("--host-kind", host.as_str().to_string()),
    ] {
        v.push(k.into());
        v.push(val.into());
    }
    if !args.cmdline_extra.is_empty() {
        v.push("--cmdline-extra".into());
        v.push(args.cmdline_extra.clone().into());
    }
    if args.console {
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
    if args.nested {
        // Needs no KVM here: QEMU emulates the CPU, L1 brings its own KVM.
        let planned = schedule.validate()?;
        let guest_dir = artifacts::guest_dir(args.guest_dir.as_deref());
        return Ok(RunOutcome {
            written: nested::run(args, planned, &guest_dir)?,
            interrupted: false,
            warnings: vec![nested::WARNING.to_string()],
        });
    }
    if !Path::new("/dev/kvm").exists() {
        return Err(RunError::NoKvm);
    }
    let (kind, forced) = host_kind()?;
    let mut warnings = Vec::new();
    if let Some(w) = forced {
        eprintln!("truecold: warning: {w}");
        warnings.push(w);
    }
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
        schedule,
        contract,
        vcpus: args.vcpus,
        mem_bytes: args.mem_mib << 20,
        backing: args.backing.name().to_string(),
        deadline_ns: args.deadline_ms().saturating_mul(1_000_000),
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
        kill_grace_ns: args.kill_grace_ms.saturating_mul(1_000_000),
        from_intended: spec.mode().has_intended_time(),
    };
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
    let mut progress = Progress::new(std::io::stderr(), Style::detect(), label, planned);
    let ex = campaign::execute(
        &spec,
        &launcher,
        &vmm_report::observe_attempt,
        stop,
        &mut progress,
    )?;
    let guest_cmdline = ex.cmdlines.iter().next().cloned();
    let configuration = Configuration {
        vcpus: spec.vcpus,
        mem_bytes: spec.mem_bytes,
        backing: if ex.backings.is_empty() {
            spec.backing.clone()
        } else {
            format!(
                "{} (obtained: {})",
                spec.backing,
                backing_counts(&ex.backings)
            )
        },
        cmdline: match (&guest_cmdline, contract) {
            (Some(c), ContractKind::Linux) => c.clone(),
            _ => command.display(),
        },
        vmm_path: vmm.display().to_string(),
        kernel_path: guest
            .as_ref()
            .map(|g| absolute(&g.vmlinux).display().to_string()),
        initramfs_path: guest
            .as_ref()
            .map(|g| absolute(&g.initramfs).display().to_string()),
    };
    let result = campaign::result_json(&spec, &ex, configuration, digests, &facts, warnings);
    let mut cmdline = format!(
        "# truecold invocation\n{invocation}\n# VMM command, one fresh process per sample\n{}\n",
        command.display()
    );
    if let Some(c) = &guest_cmdline {
        cmdline.push_str(&format!(
            "# guest kernel command line (as the VMM reported it)\n{c}\n"
        ));
    }
    let inputs = BundleInputs {
        kernel_config,
        cmdline,
        extra_files: Vec::new(),
    };
    let written = campaign::write(&dest, &result, &ex.samples, &inputs)?;
    Ok(RunOutcome {
        written,
        interrupted: ex.interrupted,
        warnings: result.environment.warnings.clone(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use truecold_vmm::host::{Detection, HostKind as V};

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
        use clap::Parser;
        let args = match crate::cli::Cli::try_parse_from(["truecold", "run", "--probe"]) {
            Ok(crate::cli::Cli {
                cmd: crate::cli::Cmd::Run(a),
            }) => a,
            Err(e) => panic!("{e}"),
        };
        let spec = CampaignSpec {
            schedule: crate::schedule::Schedule::Sequential { n: 1 },
            contract: ContractKind::Probe,
            vcpus: 2,
            mem_bytes: 16384 << 20,
            backing: "anon".into(),
            deadline_ns: 2_000_000_000,
        };
        for kind in [HostKind::Hardware, HostKind::Pvm, HostKind::NestedEmulated] {
            let v: Vec<String> = vmm_args(&spec, None, &args, false, kind)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let at = v.iter().position(|a| a == "--host-kind").unwrap();
            assert_eq!(v[at + 1], kind.as_str());
            // The VMM's parser takes the same spelling.
            assert_eq!(
                V::from_name(kind.as_str()).map(V::name),
                Some(kind.as_str())
            );
        }
    }
}
