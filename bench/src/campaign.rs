//! One campaign end to end: run the schedule, turn attempts into rows, gather the host
//! conditions, build `result.json` and write the bundle through `truecold-proof`.

use crate::host::{self, HostFacts, RunFacts, Snapshot};
use crate::launch::Attempt;
use crate::progress::Progress;
use crate::sample::{mark_repeated_boot_ids, to_sample, Observed, RowContext};
use crate::schedule::{self, Launcher, Schedule, ScheduleError};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use truecold_proof::bundle::{write_bundle, BundleError, BundleInputs, Written};
use truecold_proof::schema::{Configuration, Contract, ContractKind, Mode, ResultJson, Sample};

/// What a campaign is.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignSpec {
    pub schedule: Schedule,
    pub contract: ContractKind,
    pub vcpus: u32,
    pub mem_bytes: u64,
    /// Requested backing: `anon`, `thp` or `hugetlb`.
    pub backing: String,
    /// Per-sample deadline from the latency origin.
    pub deadline_ns: u64,
}

impl CampaignSpec {
    /// The schema's mode.
    pub fn mode(&self) -> Mode {
        match self.schedule {
            Schedule::Sequential { n } => Mode::Sequential { count: n },
            Schedule::Burst { n, concurrency } => Mode::Burst {
                count: n,
                concurrency,
            },
            Schedule::OpenLoop { n, interval_ns, .. } => Mode::OpenLoop {
                count: n,
                rate_per_ks: rate_per_ks(interval_ns),
            },
            Schedule::Churn { n, concurrency } => Mode::Churn {
                count: n,
                concurrency,
            },
            Schedule::Sweep {
                n_per_level,
                max_concurrency,
            } => Mode::Sweep {
                max_concurrency,
                per_level: n_per_level,
            },
        }
    }

    /// What every row of this campaign shares.
    pub fn row_context(&self) -> RowContext {
        RowContext {
            contract: self.contract,
            intended: self.mode().has_intended_time(),
            concurrency_override: matches!(self.schedule, Schedule::OpenLoop { .. }).then_some(0),
            mem_bytes: self.mem_bytes,
            vcpus: self.vcpus,
        }
    }

    /// Short name for directories: `linux-sequential-2vcpu-16384mib`.
    pub fn slug(&self) -> String {
        format!(
            "{}-{}-{}vcpu-{}mib",
            match self.contract {
                ContractKind::Linux => "linux",
                ContractKind::Probe => "probe-floor",
            },
            self.schedule.mode_name(),
            self.vcpus,
            self.mem_bytes >> 20
        )
    }
}

/// Arrivals per 1,000 s for an interval (exact integer arithmetic, rounded to nearest).
pub fn rate_per_ks(interval_ns: u64) -> u64 {
    if interval_ns == 0 {
        return 0;
    }
    ((1_000_000_000_000u128 + u128::from(interval_ns) / 2) / u128::from(interval_ns)) as u64
}

/// Turns one attempt's stdout into what the VMM observed, or why it could not.
pub type Observe<'a> = dyn Fn(&Attempt) -> Result<Observed, String> + 'a;

/// A campaign that ran.
#[derive(Debug)]
pub struct Executed {
    /// Every attempt, in index order.
    pub samples: Vec<Sample>,
    pub planned: u64,
    pub interrupted: bool,
    pub levels: Vec<schedule::LevelRun>,
    pub before: Snapshot,
    pub after: Snapshot,
    pub run_facts: RunFacts,
    /// Samples marked `repeated_boot_id` (contract violations).
    pub repeated_boot_ids: usize,
    /// Distinct guest command lines the VMM reported.
    pub cmdlines: BTreeSet<String>,
    /// Backing the VMM reported it obtained → number of samples.
    pub backings: BTreeMap<String, u64>,
}

/// Runs the campaign. `stop` ends it early (Ctrl-C): the result is then marked interrupted
/// and holds every attempt made.
pub fn execute<L, W>(
    spec: &CampaignSpec,
    launcher: &L,
    observe: &Observe<'_>,
    stop: &AtomicBool,
    progress: &mut Progress<W>,
) -> Result<Executed, ScheduleError>
where
    L: Launcher<Output = Attempt>,
    W: Write,
{
    let ctx = spec.row_context();
    let mut samples = Vec::new();
    let mut cmdlines = BTreeSet::new();
    let mut backings = BTreeMap::new();
    let before = Snapshot::take();
    let run = schedule::run(&spec.schedule, launcher, stop, &mut |_, attempt| {
        let (observed, why) = match observe(attempt) {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e)),
        };
        if let Some(o) = &observed {
            cmdlines.extend(o.cmdline.clone());
            if let Some(b) = &o.backing {
                *backings.entry(b.clone()).or_insert(0) += 1;
            }
        }
        let s = to_sample(attempt, observed.as_ref(), why.as_deref(), &ctx);
        progress.record(s.ok, s.latency_ns);
        samples.push(s);
    })?;
    let after = Snapshot::take();
    progress.finish();
    samples.sort_by_key(|s| s.index);
    let repeated_boot_ids = mark_repeated_boot_ids(&mut samples);
    let max_start_lag_ns = ctx.intended.then(|| {
        samples
            .iter()
            .filter_map(|s| {
                s.intended_request_ns
                    .map(|i| s.actual_request_ns.saturating_sub(i))
            })
            .max()
            .unwrap_or(0)
    });
    let run_facts = RunFacts {
        max_start_lag_ns,
        interval_ns: match spec.schedule {
            Schedule::OpenLoop { interval_ns, .. } => Some(interval_ns),
            _ => None,
        },
        lanes: run.levels.iter().map(|l| l.level).max().unwrap_or(1),
    };
    Ok(Executed {
        samples,
        planned: run.planned,
        interrupted: run.interrupted,
        levels: run.levels,
        before,
        after,
        run_facts,
        repeated_boot_ids,
        cmdlines,
        backings,
    })
}

/// Builds `result.json` (summaries are computed by `truecold-proof`).
pub fn result_json(
    spec: &CampaignSpec,
    ex: &Executed,
    configuration: Configuration,
    artifacts: BTreeMap<String, String>,
    facts: &HostFacts,
    mut warnings: Vec<String>,
) -> ResultJson {
    if ex.repeated_boot_ids > 0 {
        warnings.push(format!(
            "CONTRACT VIOLATION: {} sample(s) repeated an earlier guest boot id (not fresh boots)",
            ex.repeated_boot_ids
        ));
    }
    if ex.interrupted {
        warnings.push(format!(
            "interrupted: {} of {} planned attempts were made",
            ex.samples.len(),
            ex.planned
        ));
    }
    if let Schedule::OpenLoop { max_in_flight, .. } = spec.schedule {
        warnings.push(format!(
            "open loop ran with at most {max_in_flight} samples in flight; arrivals waiting for \
             a free slot count their wait in the latency"
        ));
    }
    if ex.cmdlines.len() > 1 {
        warnings.push(format!(
            "the VMM reported {} different guest command lines",
            ex.cmdlines.len()
        ));
    }
    let expected = expected_backing(&spec.backing);
    if ex.backings.keys().any(|b| b != expected) {
        warnings.push(format!(
            "memory backing `{}` was requested; the VMM obtained {}",
            spec.backing,
            backing_counts(&ex.backings)
        ));
    }
    let env = host::environment(facts, &ex.before, &ex.after, &ex.run_facts, warnings);
    let contract = Contract::new(spec.contract, spec.mode(), spec.deadline_ns, ex.interrupted);
    ResultJson::new(contract, configuration, env, artifacts, &ex.samples)
}

/// What the VMM reports as obtained when it got the backing that was asked for.
pub fn expected_backing(requested: &str) -> &str {
    match requested {
        "anon" => "anon-4k",
        "hugetlb" => "hugetlb-2m",
        other => other,
    }
}

/// `thp ×998, thp-advised-none-faulted ×2`.
pub fn backing_counts(b: &BTreeMap<String, u64>) -> String {
    b.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `results/<UTC timestamp>-<slug>` under `root`.
pub fn default_dest(root: &Path, spec: &CampaignSpec) -> PathBuf {
    let (stamp, _) = crate::clock::utc_now();
    root.join(format!("{stamp}-{}", spec.slug()))
}

/// Writes the bundle atomically (creating the parent directory) and returns the verdict.
pub fn write(
    dest: &Path,
    result: &ResultJson,
    samples: &[Sample],
    inputs: &BundleInputs,
) -> Result<Written, BundleError> {
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| BundleError::Io {
            op: "create directory",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    write_bundle(dest, result, samples, inputs)
}

#[cfg(test)]
mod tests;
