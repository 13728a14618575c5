//! A campaign plan spelt back as the `truecold run` arguments that run it again
//! ([`explicit_args`], the line of `cmdline.txt`), and the default directories a campaign is
//! written to.

use super::campaign_plan::CampaignPlan;
use super::guest::GuestSpec;
use super::run_flags::rule_runs;
use crate::campaign::clock;
use crate::campaign::process_launcher::shell_quote;
use crate::campaign::schedule::{rate_per_ks, Schedule};
use std::path::{Path, PathBuf};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::Engine;

/// Where the explicit argument list points: the resolved paths of a campaign.
#[derive(Clone, Copy, Debug)]
pub struct ArgPaths<'a> {
    pub vmm: &'a Path,
    /// Linux campaigns only (the probe needs no guest artifacts).
    pub guest_dir: Option<&'a Path>,
    pub out: &'a Path,
    /// Engines campaign: the arms, in order, each with its binary (truecold's is `vmm`).
    pub engines: &'a [(Engine, PathBuf)],
}

/// The `truecold run` flag of a contract: the guest the campaign actually booted.
pub fn guest_flag(contract: ContractKind) -> &'static str {
    match contract {
        ContractKind::Linux => "--linux",
        ContractKind::Probe => "--probe",
    }
}

/// The rate of an open loop as `truecold run --rate` takes it: arrivals per second with
/// the three decimals the schema keeps, which gives the same interval.
fn rate_arg(interval_ns: u64) -> String {
    let per_ks = rate_per_ks(interval_ns);
    format!("{}.{:03}", per_ks / 1000, per_ks % 1000)
}

/// `--mode`, `--count` and the schedule's own flags.
fn schedule_args(schedule: &Schedule) -> (&'static str, u64, Vec<(&'static str, String)>) {
    match *schedule {
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
        } => (
            "open-loop",
            n,
            vec![
                ("--rate", rate_arg(interval_ns)),
                ("--concurrency", max_in_flight.to_string()),
            ],
        ),
        Schedule::Sweep {
            n_per_level,
            max_concurrency,
        } => (
            "sweep",
            n_per_level,
            vec![("--max-concurrency", max_concurrency.to_string())],
        ),
    }
}

/// Every argument of a `truecold run` campaign after `run`, defaults filled in and paths
/// resolved, so that running `truecold run` with them runs the same campaign (with another
/// `--out`: a bundle is never overwritten). `guest` is [`guest_flag`] of what ran.
pub fn explicit_args(plan: &CampaignPlan, guest: &str, paths: ArgPaths<'_>) -> Vec<String> {
    // Exhaustive on purpose: a new field must be placed here (or knowingly left out).
    let CampaignPlan {
        target: _, // `guest`
        guest:
            GuestSpec {
                vcpus,
                mem,
                backing,
                cmdline_extra,
                console,
                bzimage,
                ram_layout,
                pin_vcpus,
                cpu_platform,
            },
        schedule,
        deadline_ms,
        kill_grace_ms,
        drop_caches,
        attribution,
        instrument,
        parity,
        inject_tap_name,
        engines: _,     // `paths.engines`
        arm_backing: _, // through `plan.backing_of`, below
        arm_kernel: _,  // built before the campaign: each becomes an `arm_guest_dir` (run.rs)
        arm_guest_dir,
        seed,           // engines campaigns (a plain nested one's is L1's, not here)
        engine_bins: _, // `paths.engines`
        out: _,         // `paths`
        vmm: _,         // `paths`
        guest_dir: _,   // `paths`
        own_kernel: _,  // built before the campaign: its guest directory is `paths`' (run.rs)
        stop_after,
        l1_thp,
    } = plan;
    let mut v: Vec<String> = vec![guest.to_string()];
    // The harness's own setting: only on the line that boots L1 (the run inside L1 is a
    // `--linux` campaign, whose bundle records the mode it ran under).
    if let (Some(t), "--nested") = (l1_thp, guest) {
        v.push("--l1-thp".into());
        v.push(t.as_str().into());
    }
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
    let (mode, count, extra) = schedule_args(schedule);
    kv("--mode", mode.to_string());
    kv("--count", count.to_string());
    kv("--vcpus", vcpus.to_string());
    kv("--mem-mib", mem.mib().to_string());
    // Every backing spelled out, each engine's default resolved: a default changed later
    // does not change what this line runs.
    let linux = guest != guest_flag(ContractKind::Probe);
    if paths.engines.is_empty() {
        kv(
            "--backing",
            plan.backing_of(Engine::Truecold, linux)
                .as_str()
                .to_string(),
        );
    } else {
        if let Some(b) = backing {
            kv("--backing", b.as_str().to_string());
        }
        for (e, _) in paths.engines {
            let b = plan.backing_of(*e, linux);
            if Some(b) != *backing {
                kv("--arm-backing", format!("{}={}", e.as_str(), b.as_str()));
            }
        }
    }
    // Always spelt out: a line without it means `RamLayout::ABSENT`, not today's default,
    // so rerunning the line runs the same layout whatever a later default is.
    kv("--ram-layout", ram_layout.as_str().to_string());
    for (k, val) in extra {
        kv(k, val);
    }
    kv("--deadline-ms", deadline_ms.to_string());
    kv("--kill-grace-ms", kill_grace_ms.to_string());
    kv("--cmdline-extra", cmdline_extra.clone());
    if *console {
        v.push("--console".into());
    }
    if *bzimage {
        v.push("--bzimage".into());
    }
    if *pin_vcpus {
        v.push("--pin-vcpus".into());
    }
    v.extend(cpu_platform.flags());
    if *drop_caches {
        v.push("--drop-caches".into());
    }
    if *attribution > 0 {
        v.push("--attribution".into());
        v.push(attribution.to_string());
        v.extend(instrument.flags());
    }
    match stop_after {
        Some(k) => {
            v.push("--stop-after".into());
            v.push(k.to_string());
        }
        None if rule_runs(schedule, paths.engines.is_empty(), *parity) => {
            v.push("--keep-going".into())
        }
        None => {}
    }
    for (e, d) in arm_guest_dir {
        v.push("--arm-guest-dir".into());
        let d = std::path::absolute(d).unwrap_or_else(|_| d.clone());
        v.push(format!("{}={}", e.as_str(), d.display()));
    }
    v.extend(engine_and_path_args(*seed, paths));
    v
}

/// The engine arms with their binaries, then `--vmm`, `--guest-dir` and `--out`.
fn engine_and_path_args(seed: u64, paths: ArgPaths<'_>) -> Vec<String> {
    let mut v = Vec::new();
    let truecold_arm =
        paths.engines.is_empty() || paths.engines.iter().any(|(e, _)| *e == Engine::Truecold);
    if !paths.engines.is_empty() {
        let names: Vec<&str> = paths.engines.iter().map(|(e, _)| e.as_str()).collect();
        v.push("--engines".into());
        v.push(names.join(","));
        v.push("--seed".into());
        v.push(truecold_proof::seed::hex(seed));
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

/// The explicit `truecold run …` line of `cmdline.txt` (every argument shell-quoted).
pub fn explicit_line(explicit: &[String]) -> String {
    let explicit: Vec<String> = explicit.iter().map(|a| shell_quote(a)).collect();
    format!("truecold run {}", explicit.join(" "))
}

/// `engines-<arm>-<arm>…`: the arms in a default output directory's name.
pub fn engines_label(arms: &[Engine]) -> String {
    let names: Vec<&str> = arms.iter().map(|e| e.as_str()).collect();
    format!("engines-{}", names.join("-"))
}

/// `results/<UTC timestamp>-<what>-<v>vcpu-<m>mib`, unless the plan names its `--out`.
pub fn dest_or(plan: &CampaignPlan, what: &str) -> PathBuf {
    plan.out.clone().unwrap_or_else(|| {
        let (stamp, _) = clock::utc_now();
        PathBuf::from("results").join(format!(
            "{stamp}-{what}-{}vcpu-{}mib",
            plan.guest.vcpus,
            plan.guest.mem.mib()
        ))
    })
}

/// `results/<UTC timestamp>-engines-<arms>-linux-<v>vcpu-<m>mib`.
pub fn engines_dest(plan: &CampaignPlan, arms: &[Engine]) -> PathBuf {
    dest_or(plan, &format!("{}-linux", engines_label(arms)))
}
