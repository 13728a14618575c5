//! The engines campaign's directory: every arm's complete bundle ([`write_arm_bundle`]) and
//! the multi-arm files over them (arms.json, comparison, README, cdf.svg, SHA256SUMS),
//! written beside the destination and renamed into place ([`write_dir`]).

use super::arm_setup::absolute;
use super::engines_error::EnginesError;
use super::engines_spec::EnginesSpec;
use super::rounds::{ArmRun, EnginesRun};
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::campaign::bundle_out;
use crate::campaign::execute::Executed;
use crate::campaign::record::Spool;
use crate::campaign::schedule::LevelRun;
use crate::checks::environment::RunFacts;
use crate::plan::explicit_args;
use std::path::{Path, PathBuf};
use truecold_engine::Launch;
use truecold_proof::arms::ArmsPlan;
use truecold_proof::bundle::{rename_noreplace, BundleInputs, Written};
use truecold_proof::names::REPORTS_FILE;
use truecold_proof::schema::{Configuration, ContractKind, EngineInfo, Environment};
use truecold_proto::kinds::Engine;

/// The Firecracker config's name inside the Firecracker arm's bundle.
pub const ENGINE_CONFIG_FILE: &str = "engine-config.json";

/// One arm, ready to be written as a bundle.
pub struct ArmBundle<'a> {
    pub engine: Engine,
    pub binary: PathBuf,
    pub version: String,
    pub launch: &'a Launch,
    pub guest_cmdline: String,
    /// The guest this arm booted (the campaign's, or its own: `--arm-guest-dir`) and its
    /// kernel's config.
    pub guest: &'a LinuxGuest,
    pub kernel_config: &'a [u8],
    /// The arm boots a guest of its own (`arms.json` declares its kernel).
    pub own_guest: bool,
}

/// Everything the bundles share.
pub struct Shared<'a> {
    pub spec: &'a EnginesSpec,
    pub facts: &'a Environment,
    pub warnings: Vec<String>,
    pub invocation: &'a str,
    /// The campaign with every argument explicit (after `truecold run`).
    pub explicit: Vec<String>,
}

/// A written campaign directory.
#[derive(Debug)]
pub struct WrittenArms {
    /// The directory and the verdict on it.
    pub written: Written,
    /// Each arm's bundle (under the final directory) and its own verdict.
    pub arms: Vec<(Engine, Written)>,
    pub record: ArmsPlan,
}

/// The warning every arm bundle of an interleaved campaign (`what`: an engines campaign, a
/// tune phase) carries: the arms, and the seed of their shuffled rounds as seeds are shown
/// ([`truecold_proof::seed::hex`]).
pub fn interleaved_arm_warning<'a>(
    what: &str,
    arms: impl Iterator<Item = &'a str>,
    seed: u64,
) -> String {
    format!(
        "one arm of {what} ({}): interleaved launch by launch with the other arm(s) in seeded \
         shuffled rounds (seed {}), so this arm's rows have the others' launches between them",
        arms.collect::<Vec<_>>().join(", "),
        truecold_proof::seed::hex(seed)
    )
}

/// Writes every arm's bundle and the multi-arm files into a temporary directory beside
/// `dest`, then renames it to `dest` (never replacing anything).
pub fn write_dir(
    dest: &Path,
    shared: &Shared<'_>,
    bundles: &[ArmBundle<'_>],
    ran: &EnginesRun,
    mut extras: Vec<ArmExtras>,
) -> Result<WrittenArms, EnginesError> {
    let tmp = bundle_out::staging_dir(dest, "tmp")?;
    let spec = shared.spec;
    let mut arms = Vec::new();
    extras.resize_with(bundles.len(), ArmExtras::default);
    for ((i, b), extra) in bundles.iter().enumerate().zip(extras) {
        let mut warnings = shared.warnings.clone();
        warnings.extend(extra.warnings);
        warnings.push(interleaved_arm_warning(
            "an engines campaign",
            spec.arms.iter().map(|e| e.as_str()),
            spec.seed,
        ));
        let verdict = write_arm_bundle(
            &tmp.join(b.engine.as_str()),
            shared,
            b,
            &ran.arms[i],
            ran,
            ArmExtras { warnings, ..extra },
        )?;
        arms.push((
            b.engine,
            Written {
                path: dest.join(b.engine.as_str()),
                verdict,
            },
        ));
    }
    let record = ArmsPlan {
        seed: spec.seed,
        rounds: spec.rounds,
        arms: spec
            .arm_refs()
            .into_iter()
            .zip(bundles)
            .map(|(a, b)| {
                if b.own_guest {
                    a.with_kernel(truecold_proof::digest::sha256_hex(b.kernel_config))
                } else {
                    a
                }
            })
            .collect(),
        order: ran
            .order
            .iter()
            .map(|(r, e)| (*r, e.as_str().to_string()))
            .collect(),
    };
    // The top-level files (arms.json, comparison.json, README.md, cdf.svg, SHA256SUMS) and
    // the verdict on the whole directory.
    let verdict = truecold_proof::arms::write_arms(&tmp, &record).map_err(EnginesError::Arms)?;
    rename_noreplace(&tmp, dest).map_err(EnginesError::Place)?;
    Ok(WrittenArms {
        written: Written {
            path: dest.to_path_buf(),
            verdict,
        },
        arms,
        record,
    })
}

/// What one arm's bundle adds to what its rows and the shared facts give.
#[derive(Default)]
pub struct ArmExtras {
    /// The bundle's warnings (the campaign's and the arm's own).
    pub warnings: Vec<String>,
    /// Files beside `reports.jsonl` (name, bytes), under SHA256SUMS.
    pub files: Vec<(String, Vec<u8>)>,
    /// The parity contract's facts (`environment.parity`).
    pub parity: Option<truecold_proof::schema::ParityFacts>,
}

/// Writes one arm's complete bundle at `dir` (its rows, `reports.jsonl`, any `extra` files,
/// and what the arm's engine adds) and returns the verdict on it.
pub fn write_arm_bundle(
    dir: &Path,
    shared: &Shared<'_>,
    b: &ArmBundle<'_>,
    arm: &ArmRun,
    ran: &EnginesRun,
    more: ArmExtras,
) -> Result<truecold_proof::verify::Verdict, EnginesError> {
    let ArmExtras {
        warnings,
        files: extra,
        parity,
    } = more;
    let spec = shared.spec;
    let cspec = spec.campaign(b.engine);
    let t = &arm.tally;
    let ex = Executed {
        samples: arm.samples.clone(),
        // The arm's own staged evidence is added below.
        reports: Spool::empty(),
        staging_notes: arm.staging_notes.clone(),
        planned: spec.rounds,
        interrupted: ran.interrupted,
        stopped: None,
        levels: vec![LevelRun {
            level: 1,
            planned: spec.rounds,
            launched: arm.samples.len() as u64,
            t_start_ns: t.t_start_ns.unwrap_or(ran.before.t_ns),
            t_end_ns: t.t_end_ns.max(t.t_start_ns.unwrap_or(ran.before.t_ns)),
        }],
        before: ran.before.clone(),
        after: ran.after.clone(),
        run_facts: RunFacts {
            max_start_lag_ns: None,
            interval_ns: None,
            lanes: 1,
            in_window: Some((t.cpu_ns, t.wall_ns)),
            page_cache_dropped: t.dropped,
        },
        repeated_boot_ids: arm.repeated_boot_ids,
        cmdlines: t.cmdlines.clone(),
        backings: t.backings.clone(),
        expired: 0,
        prepare_errors: t.prepare_errors.clone(),
    };
    let configuration = Configuration {
        vcpus: u32::from(spec.vcpus.get()),
        mem_bytes: spec.mem.bytes(),
        backing: bundle_out::backing_description(spec.backing(b.engine), &ex.backings),
        ram_layout: spec.layout(b.engine),
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        cmdline: b.guest_cmdline.clone(),
        vmm_path: b.binary.display().to_string(),
        kernel_path: Some(absolute(&b.guest.vmlinux)),
        initramfs_path: Some(absolute(&b.guest.initramfs)),
        engine: EngineInfo {
            kind: b.engine,
            version: b.version.clone(),
        },
        knobs: vec![],
    };
    let digests =
        guest_files::digests(&b.binary, Some(b.guest)).map_err(|source| EnginesError::Digests {
            binary: b.binary.clone(),
            source,
        })?;
    let mut result =
        bundle_out::result_json(&cspec, &ex, configuration, digests, shared.facts, warnings);
    result.environment.parity = parity;
    let mut extra_files = extra;
    if b.engine == Engine::Firecracker {
        if let Some((_, cfg)) = b.launch.files.iter().find(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n == truecold_engine::firecracker::CONFIG_FILE)
        }) {
            extra_files.push((ENGINE_CONFIG_FILE.to_string(), cfg.clone()));
        }
    }
    let mut inputs = BundleInputs {
        kernel_config: Some(b.kernel_config.to_vec()),
        cmdline: truecold_proof::cmdline::format_engine_cmdline_txt(
            ContractKind::Linux.label(),
            shared.invocation,
            &explicit_args::explicit_line(&shared.explicit),
            b.engine,
            &b.launch.display(spec.deadline_ns),
            Some(&b.guest_cmdline),
        ),
        extra_files,
        staged_files: Vec::new(),
    };
    arm.reports.add_to(REPORTS_FILE, &mut inputs)?;
    let w = bundle_out::write(dir, &result, &ex.samples, &inputs).map_err(|source| {
        EnginesError::Bundle {
            engine: b.engine,
            source,
        }
    })?;
    Ok(w.verdict)
}
