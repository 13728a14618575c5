//! A campaign that ran, written: its `result.json` (the contract, the configuration, the
//! host and its warnings; the statistics are `truecold-proof`'s), the bundle written
//! atomically beside where its rows were staged.

use super::clock;
use super::execute::Executed;
use super::schedule::{Schedule, DEFAULT_OPEN_LOOP_IN_FLIGHT};
use super::spec::CampaignSpec;
use crate::checks::environment;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use truecold_proof::bundle::{write_bundle, BundleError, BundleInputs, Written};
use truecold_proof::schema::{Configuration, Contract, Environment, ResultJson, Sample};
use truecold_proto::kinds::{Backing, ObtainedBacking};
use truecold_proto::path_io::PathIoError;

/// Builds `result.json` (summaries are computed by `truecold-proof`).
pub fn result_json(
    spec: &CampaignSpec,
    ex: &Executed,
    configuration: Configuration,
    artifacts: BTreeMap<String, String>,
    facts: &Environment,
    mut warnings: Vec<String>,
) -> ResultJson {
    warnings.extend(ex.staging_notes.iter().cloned());
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
    if let Some(kind) = &ex.stopped {
        warnings.push(format!(
            "stopped: {} consecutive launches failed with `{kind}`; {} of {} planned attempts \
             were made (--stop-after K changes the count, --keep-going runs them all)",
            spec.stop_after.unwrap_or_default(),
            ex.samples.len(),
            ex.planned
        ));
    }
    // Only for a cap the user chose (`--concurrency`): the default's is far above what a
    // host sustains, and a loop that fell behind gets its own warning (`environment::warnings`).
    if let Schedule::OpenLoop { max_in_flight, .. } = spec.schedule {
        if max_in_flight != DEFAULT_OPEN_LOOP_IN_FLIGHT {
            warnings.push(format!(
            "open loop ran with at most {max_in_flight} samples in flight; arrivals waiting for \
             a free slot count their wait in the latency"
            ));
        }
    }
    if ex.cmdlines.len() > 1 {
        warnings.push(format!(
            "the VMM reported {} different guest command lines",
            ex.cmdlines.len()
        ));
    }
    if ex.expired > 0 {
        warnings.push(format!(
            "{} arrival(s) came up {} ms (deadline + kill grace) or more behind their intended \
             time and were not launched: each is a `deadline` failure, scored at the deadline",
            ex.expired,
            spec.deadline_ns.saturating_add(spec.kill_grace_ns) / 1_000_000
        ));
    }
    if let Some((cpu, wall)) = ex.run_facts.in_window {
        if wall > 0 && cpu as f64 / wall as f64 > environment::HARNESS_CPU_SHARE {
            warnings.push(format!(
                "inside the measured windows the harness itself used {:.0}% of a core \
                 (threshold {:.0}%): it competed with the boots it measured",
                cpu as f64 / wall as f64 * 100.0,
                environment::HARNESS_CPU_SHARE * 100.0
            ));
        }
    }
    if let Some(dropped) = ex.run_facts.page_cache_dropped {
        let launched = (ex.samples.len() as u64).saturating_sub(ex.expired);
        if !ex.prepare_errors.is_empty() || dropped < launched {
            warnings.push(format!(
                "--drop-caches: the host page cache was dropped before only {dropped} of \
                 {launched} launched samples ({})",
                ex.prepare_errors.join("; ")
            ));
        }
    }
    let expected = spec.backing.expected_obtained();
    if ex.backings.keys().any(|b| *b != expected) {
        warnings.push(format!(
            "memory backing `{}` was requested; the VMM obtained {}",
            spec.backing,
            backing_counts(&ex.backings)
        ));
    }
    let env = environment::environment(facts, &ex.before, &ex.after, &ex.run_facts, warnings);
    // The clock is the host kind's (the verifier holds the bundle to it).
    let clock = env.host_kind.clock();
    let mut contract = Contract::new(
        spec.contract,
        spec.observer,
        clock,
        spec.interleaved,
        spec.mode(),
        spec.deadline_ns,
        ex.interrupted || ex.stopped.is_some(),
    );
    contract.stop_after = spec.stop_after;
    contract.stopped = ex.stopped.clone();
    ResultJson::new(contract, configuration, env, artifacts, &ex.samples)
}

/// The configuration's backing: what was asked, and what was obtained when anything was
/// observed (`thp (obtained: thp ×998, thp-advised-none-faulted ×2)`).
pub fn backing_description(asked: Backing, obtained: &BTreeMap<ObtainedBacking, u64>) -> String {
    if obtained.is_empty() {
        asked.to_string()
    } else {
        format!("{asked} (obtained: {})", backing_counts(obtained))
    }
}

/// `thp ×998, thp-advised-none-faulted ×2`.
pub fn backing_counts(b: &BTreeMap<ObtainedBacking, u64>) -> String {
    b.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `results/<UTC timestamp>-<slug>` under `root`.
pub fn default_dest(root: &Path, spec: &CampaignSpec) -> PathBuf {
    let (stamp, _) = clock::utc_now();
    root.join(format!("{stamp}-{}", spec.slug()))
}

/// Where a campaign writing `dest` stages its rows and evidence as they come ([`super::record`]):
/// `dest`'s parent directory (the bundle's filesystem), `.` for a bare name.
pub fn staging_for(dest: &Path) -> PathBuf {
    dest.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// A fresh, empty staging directory beside `dest` (`.<name>.<tag>-<pid>`, a stale one of this
/// process removed), for a directory that appears by one rename; its parent is created. On
/// error: what was being done, to which path, and why.
pub fn staging_dir(dest: &Path, tag: &str) -> Result<PathBuf, PathIoError> {
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(PathIoError::at("create directory", parent))?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| tag.to_string());
    let tmp = parent.join(format!(".{name}.{tag}-{}", std::process::id()));
    if tmp.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&tmp).map_err(PathIoError::at("remove stale", &tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(PathIoError::at("create directory", &tmp))?;
    Ok(tmp)
}

/// Writes the bundle atomically (creating the parent directory) and returns the verdict.
pub fn write(
    dest: &Path,
    result: &ResultJson,
    samples: &[Sample],
    inputs: &BundleInputs,
) -> Result<Written, BundleError> {
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            BundleError::Path(truecold_proto::path_io::PathIoError::at(
                "create the directory",
                parent,
            )(e))
        })?;
    }
    write_bundle(dest, result, samples, inputs)
}
