//! Writing a fleet directory's top files (`truecold fleet gather`: the README from the
//! plan and the task records, `SHA256SUMS` over the tree), and `report` on one.

use std::path::Path;

use super::check::verify_fleet_dir;
use super::model::*;
use crate::names::{FLEET_FILE, README_FILE, SUMS_FILE};
use crate::verdict::{Verdict, VerifyOptions};

/// The README of a fleet: what ran, each shard and the task that wrote it, how to verify.
pub fn readme(plan: &FleetPlan, tasks: &[(String, Option<TaskRecord>)]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "# A fleet: {} over Slurm\n", plan.kind.as_str());
    let _ = writeln!(
        s,
        "{} fanned out as {} shard(s) of a Slurm job array on partition {} \
         ({} nodes{}; {} MiB a task), on the **{} clock**. Seed {} (each shard's: \
         `truecold_proof::fleet::shard_seed`).\n",
        crate::fmt::md_code(&format!("truecold {}", plan.command.join(" "))),
        plan.shards.len(),
        crate::fmt::md_code(&plan.partition),
        if plan.exclusive {
            "exclusive"
        } else {
            "shared"
        },
        if plan.exclusive {
            ": a benchmark never shares a host"
        } else {
            ": a virtual clock does not depend on its host's load"
        },
        plan.task_mem_mib,
        plan.clock.as_str(),
        crate::seed::hex(plan.seed),
    );
    let _ = writeln!(
        s,
        "| shard | launches / knob / commit | seed | node | job (array task) | wall s |\n|---|---|---|---|---|---|"
    );
    for sh in &plan.shards {
        let what = match (sh.launches, sh.knob, sh.builds, &sh.commit) {
            (Some([a, b]), ..) => format!("{a}..{b}"),
            (_, Some(k), ..) => k.as_str().to_string(),
            (_, _, Some(k), _) => format!("the kernel of {}", k.as_str()),
            (.., Some(c)) => format!("commit `{}`", &c[..c.len().min(12)]),
            _ => String::new(),
        };
        let t = tasks
            .iter()
            .find(|(n, _)| *n == sh.name)
            .and_then(|(_, t)| t.as_ref());
        let (node, job, wall) = match t {
            Some(t) => (
                crate::fmt::md_text(&t.node),
                format!(
                    "{} ({})",
                    crate::fmt::md_text(t.job_id.as_deref().unwrap_or("-")),
                    t.array_task_id
                        .map(|i| i.to_string())
                        .unwrap_or_else(|| "-".into())
                ),
                t.ended_unix_s.saturating_sub(t.started_unix_s).to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "| `{SHARDS_DIR}/{}` | {what} | {} | {node} | {job} | {wall} |",
            sh.name,
            crate::seed::hex(sh.seed)
        );
    }
    let _ = writeln!(
        s,
        "\nEach shard is a directory `truecold-proof verify` knows on its own (a bundle, a \
         tune phase's multi-arm directory, a bisect directory) or a Kconfig knob's build \
         (`{BUILD_FILE}` and the kernel's `config`); `{TASKS_DIR}/<shard>.json` records the \
         task that wrote it and the digest of the `{FLEET_FILE}` it ran under; `{LOGS_DIR}/` \
         holds Slurm's output of every task attempt. Verify the whole: \
         `truecold-proof verify <this directory>` (docs/fleet.md)."
    );
    s
}

/// The task records of `plan`'s shards in `dir` (each `None` when absent or unreadable).
fn tasks_of(dir: &Path, plan: &FleetPlan) -> Vec<(String, Option<TaskRecord>)> {
    plan.shards
        .iter()
        .map(|s| {
            let p = dir.join(TASKS_DIR).join(format!("{}.json", s.name));
            let t = crate::skeleton::read_record(&p)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            (s.name.clone(), t)
        })
        .collect()
}

/// The plan in `dir/fleet.json`.
pub fn read_plan(dir: &Path) -> Result<FleetPlan, FleetError> {
    let b = crate::skeleton::read_record(&dir.join(FLEET_FILE))?;
    serde_json::from_slice(&b).map_err(FleetError::Plan)
}

/// Writes `README.md` and `SHA256SUMS` over the whole tree of `dir` (whose plan, shards,
/// task records and logs are there) and returns the verifier's verdict on it.
pub fn write_fleet(dir: &Path) -> Result<Verdict, FleetError> {
    let plan = read_plan(dir)?;
    let mut text = readme(&plan, &tasks_of(dir, &plan));
    if plan.kind == FleetKind::Bisect {
        text.push_str(&super::bisect::wave_section(&plan, dir));
    }
    crate::skeleton::write(dir, README_FILE, text.as_bytes())?;
    crate::skeleton::write_tree_sums(dir, LEVELS)?;
    Ok(verify_fleet_dir(dir, &VerifyOptions::default()))
}

/// Whether `report` regenerates `name` of a fleet directory: its README and page, and
/// inside each shard what `report` regenerates in a bundle or multi-arm directory.
pub fn is_regenerated(name: &str) -> bool {
    match name.split_once('/') {
        None => name == README_FILE || name == crate::names::HTML_FILE,
        Some((top, rest)) if top == SHARDS_DIR => match rest.split_once('/') {
            Some((_, f)) => {
                f == SUMS_FILE
                    || crate::bundle::is_regenerated(f, true)
                    || crate::arms::is_regenerated(f)
            }
            None => false,
        },
        Some(_) => false,
    }
}

/// `report DIR` on a fleet: every file it does not regenerate must match its `SHA256SUMS`
/// entry; then each shard's generated files, the README and `SHA256SUMS` anew.
pub fn regenerate_fleet(dir: &Path) -> Result<Vec<String>, FleetError> {
    let listed = crate::skeleton::read_listing(dir, parse_fleet_sums)?;
    crate::skeleton::check_unchanged(dir, &listed, is_regenerated)?;
    let plan = read_plan(dir)?;
    let mut written = Vec::new();
    for s in &plan.shards {
        let rel = format!("{SHARDS_DIR}/{}", s.name);
        let d = dir.join(&rel);
        // A build's record and a bisect directory have nothing `report` regenerates here.
        if !crate::fsio::is_real_dir(&d) || s.builds.is_some() || plan.kind == FleetKind::Bisect {
            continue;
        }
        let names = if crate::kind::Kind::Arms.is_marked(&d) {
            crate::arms::regenerate_arms(&d).map_err(|e| {
                FleetError::Io(truecold_proto::path_io::PathIoError::at("regenerate", &d)(
                    std::io::Error::other(crate::verdict::chain(&e)),
                ))
            })?
        } else {
            crate::bundle::regenerate(&d).map_err(|e| {
                FleetError::Io(truecold_proto::path_io::PathIoError::at("regenerate", &d)(
                    std::io::Error::other(crate::verdict::chain(&e)),
                ))
            })?
        };
        written.extend(names.into_iter().map(|n| format!("{rel}/{n}")));
    }
    write_fleet(dir)?;
    written.extend([README_FILE.to_string(), SUMS_FILE.to_string()]);
    Ok(written)
}
