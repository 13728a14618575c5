//! `truecold fleet submit`: the plan cut into shards (a campaign's launches into ranges, a
//! tune's screen into one shard per knob), written once as `fleet.json` with the batch
//! script, and submitted as one Slurm job array; with `--resume`, the shards not written
//! yet submitted again under the plan already there.

use super::fleet_dir::{FleetDir, Submission};
use super::fleet_error::FleetError;
use super::slurm::{self, ArrayJob};
use crate::plan::bisect_plan::BisectRunPlan;
use crate::plan::fleet_plan::{Fanned, FleetSubmitPlan};
use crate::run::nested_campaign::{l1_hugetlb_pages, l1_mem_mib};
use truecold_proof::fleet::{
    build_shard_name, plan_bytes, probe_name, probes, shard_name, shard_seed, BisectRange,
    FleetKind, FleetPlan, ShardPlan, BASELINE_SHARD, FLEET_SCHEMA, LOGS_DIR, SHARDS_DIR, TASKS_DIR,
};
use truecold_proof::schema::Clock;
use truecold_proto::limits::HUGE_PAGE_2M;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::TuneGuest;

/// The job name every fleet's array has.
pub const JOB_NAME: &str = "truecold-fleet";

/// Memory a task asks for beside its L1 (or its guest, on a host's own KVM): the bench, QEMU
/// and the kernel's page tables, MiB.
pub const TASK_OVERHEAD_MIB: u64 = 1024;

/// The words of `words` without the flags `drop` (each with its value: `--f v`, `--f=v`,
/// and `-nV` for `-n`).
fn without(words: &[String], drop: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let bare = w.split_once('=').map_or(w.as_str(), |(f, _)| f);
        if drop.contains(&bare) {
            if !w.contains('=') {
                it.next();
            }
            continue;
        }
        if drop.contains(&"-n") && w.starts_with("-n") && w.len() > 2 && !w.starts_with("--") {
            continue;
        }
        out.push(w.clone());
    }
    out
}

/// The plan of `p`: its shards, each with the `truecold` words that run it alone (what the
/// task runs: `fleet shard` turns the fleet's command into exactly this).
pub fn fleet_plan(p: &FleetSubmitPlan) -> Result<FleetPlan, FleetError> {
    let mut shards = Vec::new();
    let mut bisect = None;
    let (kind, seed, clock, exclusive, mem_mib) = match &p.fanned {
        Fanned::Campaign(c) => {
            let n = c
                .planned()
                .map_err(crate::plan::arg_error::ArgError::from)?;
            let base = without(&p.command, &["-n", "--count", "--seed"]);
            for i in 0..p.shards {
                let (a, b) = (n * i / p.shards, n * (i + 1) / p.shards);
                let seed = shard_seed(c.seed, i);
                let mut args = base.clone();
                args.extend([
                    "--count".into(),
                    (b - a).to_string(),
                    "--seed".into(),
                    truecold_proof::seed::hex(seed),
                ]);
                shards.push(ShardPlan {
                    name: shard_name(i, None),
                    args,
                    seed,
                    launches: Some([a, b]),
                    ..Default::default()
                });
            }
            let mib = c.guest.mem.mib();
            let mem = if c.nested() {
                l1_mem_mib(mib, l1_hugetlb_pages(c))
            } else {
                mib
            };
            let clock = if c.nested() {
                Clock::Virtual
            } else {
                Clock::Wall
            };
            (FleetKind::Campaign, c.seed, clock, !c.nested(), mem)
        }
        Fanned::Tune(t) => {
            let knobs = t.knobs.for_guest(TuneGuest::Linux)?;
            let base = without(&p.command, &["--knobs", "--seed", "--attribution"]);
            for k in knobs.iter() {
                // A Kconfig knob's kernel is built by a shard of its own first: the knob's
                // shard waits for it and finds the kernel in the kernel directory.
                let build = k.class() == truecold_proto::tune::KnobClass::Kconfig;
                if build {
                    let i = shards.len() as u64;
                    shards.push(ShardPlan {
                        name: build_shard_name(*k),
                        args: Vec::new(),
                        seed: shard_seed(t.seed, i),
                        builds: Some(*k),
                        ..Default::default()
                    });
                }
                let i = shards.len() as u64;
                let seed = shard_seed(t.seed, i);
                let mut args = base.clone();
                args.extend([
                    "--knobs".into(),
                    k.as_str().into(),
                    "--seed".into(),
                    truecold_proof::seed::hex(seed),
                    "--attribution".into(),
                    "0".into(),
                ]);
                shards.push(ShardPlan {
                    name: shard_name(i, Some(*k)),
                    args,
                    seed,
                    knob: Some(*k),
                    after: build.then(|| build_shard_name(*k)),
                    ..Default::default()
                });
            }
            let mib = t.mem.mib();
            // A backing knob's arm on hugetlb makes L1 reserve the guest's pages.
            let hugetlb = knobs.iter().any(|k| {
                truecold_proto::tune::apply(&[*k], t.backing).backing
                    == truecold_proto::kinds::Backing::Hugetlb
            });
            let pages = if hugetlb {
                (t.mem.bytes() + 2 * HUGE_PAGE_2M).div_ceil(HUGE_PAGE_2M)
            } else {
                0
            };
            let mem = if t.nested() {
                l1_mem_mib(mib, pages)
            } else {
                mib
            };
            let clock = if t.nested() {
                Clock::Virtual
            } else {
                Clock::Wall
            };
            (FleetKind::TuneScreen, t.seed, clock, !t.nested(), mem)
        }
        Fanned::Bisect(b) => {
            let r = bisect_range(b, p.shards)?;
            let seed = crate::cli::DEFAULT_SEED;
            let base = without(&p.command, &["--profile"]);
            shards.push(ShardPlan {
                name: BASELINE_SHARD.into(),
                args: base.clone(),
                seed: shard_seed(seed, 0),
                commit: Some(r.good.clone()),
                ..Default::default()
            });
            for place in probes(r.range.len(), r.probes) {
                let c = &r.range[place - 1];
                let i = shards.len() as u64;
                shards.push(ShardPlan {
                    name: probe_name(place, c),
                    args: base.clone(),
                    seed: shard_seed(seed, i),
                    commit: Some(c.clone()),
                    after: Some(BASELINE_SHARD.into()),
                    ..Default::default()
                });
            }
            let nested = b.context.nested;
            let mem = if nested {
                l1_mem_mib(b.context.mem.mib(), 0)
            } else {
                b.context.mem.mib()
            };
            let clock = if nested { Clock::Virtual } else { Clock::Wall };
            bisect = Some(r);
            (FleetKind::Bisect, seed, clock, !nested, mem)
        }
    };
    Ok(FleetPlan {
        schema: FLEET_SCHEMA,
        kind,
        command: p.command.clone(),
        seed,
        clock,
        partition: p.partition.clone(),
        exclusive,
        task_mem_mib: p
            .task_mem_mib
            .unwrap_or(mem_mib.saturating_add(TASK_OVERHEAD_MIB)),
        shards,
        bisect,
    })
}

/// A bisect wave's range: the good and bad commits resolved in the tree, the commits after
/// the good one up to the bad one along the first-parent line, and `probes` a wave.
fn bisect_range(b: &BisectRunPlan, probes: u64) -> Result<BisectRange, FleetError> {
    use crate::bisect::commit_bisect::git;
    let bisect = |e| FleetError::Bisect(Box::new(e));
    let tree = std::path::absolute(&b.kernel_tree)
        .map_err(|e| FleetError::Io(PathIoError::at("resolve", &b.kernel_tree)(e)))?;
    let commit = |c: &str| {
        git(
            &tree,
            &["rev-parse", "--verify", &format!("{c}^{{commit}}")],
        )
    };
    let good = commit(&b.good).map_err(bisect)?;
    let bad = commit(&b.bad).map_err(bisect)?;
    git(&tree, &["merge-base", "--is-ancestor", &good, &bad]).map_err(|_| {
        FleetError::ForeignPlan {
            dir: tree.clone(),
            why: format!("the good commit {good} is not an ancestor of the bad commit {bad}"),
        }
    })?;
    let list = git(
        &tree,
        &[
            "rev-list",
            "--first-parent",
            "--reverse",
            &format!("{good}..{bad}"),
        ],
    )
    .map_err(bisect)?;
    let range: Vec<String> = list.lines().map(str::to_string).collect();
    if range.last() != Some(&bad) {
        return Err(FleetError::ForeignPlan {
            dir: tree.clone(),
            why: format!(
                "the bad commit {bad} is not on the first-parent line after the good one {good}"
            ),
        });
    }
    Ok(BisectRange {
        tree: tree.display().to_string(),
        good,
        bad,
        range,
        probes,
    })
}

/// The arrays one submission of `tasks` is made of: first the tasks that wait for nothing
/// (or for a shard already written), then one array per shard waited for, after its task.
/// Each entry: the tasks, and the index of the task of the first array they wait for.
pub fn arrays(
    plan: &FleetPlan,
    tasks: &[u64],
    written: &dyn Fn(&str) -> bool,
) -> Vec<(Vec<u64>, Option<u64>)> {
    let index_of = |name: &str| {
        plan.shards
            .iter()
            .position(|s| s.name == name)
            .map(|i| i as u64)
    };
    let mut first = Vec::new();
    let mut waiting: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for &t in tasks {
        let after = plan.shards[t as usize]
            .after
            .as_deref()
            .filter(|a| !written(a))
            .and_then(index_of)
            .filter(|a| tasks.contains(a));
        match after {
            Some(a) => waiting.entry(a).or_default().push(t),
            None => first.push(t),
        }
    }
    let mut out = vec![(first, None)];
    out.extend(waiting.into_iter().map(|(a, ts)| (ts, Some(a))));
    out.retain(|(ts, _)| !ts.is_empty());
    out
}

/// The batch script every task runs: this `truecold` runs the task's shard.
pub fn script_text(
    truecold: &std::path::Path,
    workdir: &std::path::Path,
    dir: &FleetDir,
) -> String {
    use crate::campaign::process_launcher::shell_quote;
    format!(
        "#!/bin/sh\n\
         # Written by `truecold fleet submit`: every task of the array runs one shard of\n\
         # fleet.json, the one at its index (SLURM_ARRAY_TASK_ID), and writes it to\n\
         # shards/<name> (docs/fleet.md).\n\
         cd {} || exit 1\n\
         exec {} fleet shard {} --task \"$SLURM_ARRAY_TASK_ID\"\n",
        shell_quote(&workdir.display().to_string()),
        shell_quote(&truecold.display().to_string()),
        shell_quote(&dir.root.display().to_string()),
    )
}

/// What a submission did.
#[derive(Debug)]
pub struct Submitted {
    pub dir: FleetDir,
    pub plan: FleetPlan,
    /// The tasks submitted (empty: every shard is written already).
    pub tasks: Vec<u64>,
    /// Each array's job id (none with `--dry-run` or nothing to submit): the first array's,
    /// then one per shard others wait for.
    pub array_job_ids: Vec<String>,
    /// Each array's sbatch arguments.
    pub sbatch: Vec<Vec<String>>,
}

/// `truecold fleet submit` (see the module doc).
pub fn submit(p: &FleetSubmitPlan) -> Result<Submitted, FleetError> {
    let dir = FleetDir::at(&p.dir)?;
    let plan = fleet_plan(p)?;
    let io = |op, path: &std::path::Path| {
        let at = PathIoError::at(op, path);
        move |e| FleetError::Io(at(e))
    };
    let tasks: Vec<u64> = if p.resume {
        let (have, _) = dir.read_plan()?;
        if have.command != plan.command || have.kind != plan.kind || have.shards != plan.shards {
            return Err(FleetError::ForeignPlan {
                dir: dir.root.clone(),
                why: format!(
                    "it holds the plan of `truecold {}`, not of this command (--resume \
                     resubmits a fleet's own plan)",
                    have.command.join(" ")
                ),
            });
        }
        let missing: Vec<u64> = (0..have.shards.len() as u64)
            .filter(|&i| !dir.shard(&have.shards[i as usize].name).exists())
            .collect();
        let running: Vec<String> = missing
            .iter()
            .filter(|&&i| {
                super::status::last_submission(&dir, i).is_some_and(|(array, _)| {
                    slurm::task_info(&array, i).is_some_and(|t| {
                        matches!(
                            t.state.as_str(),
                            "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"
                        )
                    })
                })
            })
            .map(|&i| have.shards[i as usize].name.clone())
            .collect();
        if !running.is_empty() {
            return Err(FleetError::StillRunning(running));
        }
        missing
    } else {
        if dir.root.symlink_metadata().is_ok() {
            return Err(FleetError::Exists(dir.root.clone()));
        }
        (0..plan.shards.len() as u64).collect()
    };
    let exe = std::env::current_exe().map_err(io("locate", std::path::Path::new("truecold")))?;
    let cwd = std::env::current_dir().map_err(io("resolve", std::path::Path::new(".")))?;
    let (log, script) = (dir.log_pattern(), dir.script());
    fn job<'a>(
        p: &'a FleetSubmitPlan,
        plan: &FleetPlan,
        paths: (&'a std::path::Path, &'a std::path::Path),
        tasks: &'a [u64],
        after: Option<String>,
    ) -> ArrayJob<'a> {
        ArrayJob {
            name: JOB_NAME,
            partition: &p.partition,
            tasks,
            mem_mib: plan.task_mem_mib,
            cpus: 1,
            exclusive: plan.exclusive,
            time_min: p.time_min,
            output: paths.0,
            script: paths.1,
            after,
        }
    }
    let paths = (log.as_path(), script.as_path());
    let groups = arrays(&plan, &tasks, &|name| dir.shard(name).exists());
    // The sbatch lines (a dependent array's `afterok` names the first array's job as `<id>`).
    let sbatch: Vec<Vec<String>> = groups
        .iter()
        .map(|(ts, a)| {
            slurm::sbatch_args(&job(p, &plan, paths, ts, a.map(|a| format!("<id>_{a}"))))
        })
        .collect();
    if !p.resume {
        // Checked before anything is written: no directory is left behind for a cluster that
        // is not there (a dry run writes the plan without asking the cluster).
        if !p.dry_run {
            slurm::check_partition(&p.partition)?;
        }
        for d in [SHARDS_DIR, TASKS_DIR, LOGS_DIR] {
            let d = dir.root.join(d);
            std::fs::create_dir_all(&d).map_err(io("create", &d))?;
        }
        truecold_proof::fsio::write_new_file(&dir.plan_file(), &plan_bytes(&plan))?;
        truecold_proof::fsio::write_new_file(
            &dir.script(),
            script_text(&exe, &cwd, &dir).as_bytes(),
        )?;
    }
    if p.dry_run || tasks.is_empty() {
        return Ok(Submitted {
            dir,
            plan,
            tasks,
            array_job_ids: Vec::new(),
            sbatch,
        });
    }
    let mut ids: Vec<String> = Vec::new();
    for (ts, after) in &groups {
        let after = match (after, ids.first()) {
            (Some(a), Some(first)) => Some(format!("{first}_{a}")),
            _ => None,
        };
        let id = slurm::submit(&job(p, &plan, paths, ts, after))?;
        dir.record_submission(&Submission {
            array_job_id: id.clone(),
            tasks: ts.clone(),
            unix_s: super::shard::unix_now(),
        })?;
        ids.push(id);
    }
    Ok(Submitted {
        dir,
        plan,
        tasks,
        array_job_ids: ids,
        sbatch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_count_and_seed_are_the_shards_own() {
        let w = without(
            &words("run --nested -n 4 --seed 0x1 --count=3 -n7 --vcpus 1"),
            &["-n", "--count", "--seed"],
        );
        assert_eq!(w, words("run --nested --vcpus 1"));
    }

    fn plan_of(cmd: &str, shards: Option<u64>) -> FleetSubmitPlan {
        let a = crate::cli::FleetSubmitArgs {
            dir: "/f".into(),
            partition: "fleet".into(),
            shards,
            task_mem_mib: None,
            time_min: None,
            resume: false,
            dry_run: true,
            command: words(cmd),
        };
        FleetSubmitPlan::from_cli(&a).unwrap()
    }

    /// A campaign's launches cut into contiguous ranges, each shard with its own seed (the
    /// first the campaign's), memory for its L1, no exclusive node on the virtual clock.
    #[test]
    fn a_campaign_is_cut_into_ranges_with_seeds_of_their_own() {
        let p = fleet_plan(&plan_of(
            "run --nested -n 5 --vcpus 1 --mem-mib 256 --seed 9",
            Some(2),
        ))
        .unwrap();
        assert!(truecold_proof::fleet::plan_problems(&p).is_empty());
        assert_eq!(p.shards.len(), 2);
        assert_eq!(p.shards[0].launches, Some([0, 2]));
        assert_eq!(p.shards[1].launches, Some([2, 5]));
        assert_eq!(p.shards[0].seed, 9);
        assert_ne!(p.shards[1].seed, 9);
        assert_eq!(p.clock, Clock::Virtual);
        assert!(!p.exclusive);
        assert_eq!(p.task_mem_mib, 256 + 1024 + TASK_OVERHEAD_MIB);
        let a = p.shards[1].args.join(" ");
        assert!(
            a.ends_with(&format!(
                "--count 3 --seed {}",
                truecold_proof::seed::hex(p.shards[1].seed)
            )),
            "{a}"
        );
        assert!(!a.contains("-n 5"), "{a}");
    }

    #[test]
    fn a_tunes_screen_is_one_shard_per_knob() {
        let p = fleet_plan(&plan_of(
            "tune --nested -n 5 --knobs pin-vcpus,backing-thp --vcpus 1 --mem-mib 256",
            None,
        ))
        .unwrap();
        let names: Vec<&str> = p.shards.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["backing-thp", "pin-vcpus"]);
        assert_eq!(p.kind, FleetKind::TuneScreen);
        assert!(truecold_proof::fleet::plan_problems(&p).is_empty());
    }

    /// A Kconfig knob's kernel is a build shard of its own, just before the knob's shard,
    /// which waits for it; one submission is the first array and one array after each build.
    #[test]
    fn a_kconfig_knob_is_built_by_a_shard_its_own_shard_waits_for() {
        let p = fleet_plan(&plan_of(
            "tune --nested -n 5 --knobs pin-vcpus,hz-100 --vcpus 1 --mem-mib 256",
            None,
        ))
        .unwrap();
        let names: Vec<&str> = p.shards.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["build-hz-100", "hz-100", "pin-vcpus"]);
        assert_eq!(p.shards[1].after.as_deref(), Some("build-hz-100"));
        assert_eq!(p.shards[2].after, None);
        assert!(
            truecold_proof::fleet::plan_problems(&p).is_empty(),
            "{:?}",
            truecold_proof::fleet::plan_problems(&p)
        );
        let all = [0, 1, 2];
        assert_eq!(
            arrays(&p, &all, &|_| false),
            vec![(vec![0, 2], None), (vec![1], Some(0))]
        );
        // The build written already (a resumed fleet): its knob waits for nothing.
        assert_eq!(
            arrays(&p, &[1], &|n| n == "build-hz-100"),
            vec![(vec![1], None)]
        );
        // A knob shard that does not wait for its build is not a plan.
        let mut q = p.clone();
        q.shards[1].after = None;
        assert!(!truecold_proof::fleet::plan_problems(&q).is_empty());
    }

    /// A bisect wave: the range read from the tree (first-parent, after good up to bad), the
    /// baseline first, then the probes the rule gives, each waiting for the baseline.
    #[test]
    fn a_bisect_wave_is_the_baseline_then_the_probes_of_its_range() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path();
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .arg("-C")
                .arg(tree)
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        git(&["init", "-q"]);
        let mut ids = Vec::new();
        for i in 0..10 {
            std::fs::write(tree.join("f"), i.to_string()).unwrap();
            git(&["add", "f"]);
            git(&["commit", "-q", "-m", &format!("c{i}")]);
            ids.push(git(&["rev-parse", "HEAD"]));
        }
        let cmd = format!(
            "bisect run --nested --kernel-tree {} --good {} --bad HEAD -n 3",
            tree.display(),
            &ids[0][..8]
        );
        let p = fleet_plan(&plan_of(&cmd, Some(3))).unwrap();
        assert_eq!(p.kind, FleetKind::Bisect);
        let r = p.bisect.as_ref().unwrap();
        assert_eq!(r.good, ids[0]);
        assert_eq!(r.bad, ids[9]);
        assert_eq!(r.range, ids[1..]);
        let names: Vec<&str> = p.shards.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "baseline".to_string(),
                format!("003-{}", &ids[3][..12]),
                format!("006-{}", &ids[6][..12]),
                format!("009-{}", &ids[9][..12]),
            ]
        );
        assert!(p.shards[1..]
            .iter()
            .all(|s| s.after.as_deref() == Some("baseline")));
        assert!(truecold_proof::fleet::plan_problems(&p).is_empty());
        assert_eq!(
            arrays(&p, &[0, 1, 2, 3], &|_| false),
            vec![(vec![0], None), (vec![1, 2, 3], Some(0))]
        );
        // The sides reversed: no range to bisect.
        let back = format!(
            "bisect run --nested --kernel-tree {} --good HEAD --bad {} -n 3",
            tree.display(),
            &ids[0][..8]
        );
        assert!(fleet_plan(&plan_of(&back, Some(3))).is_err());
    }

    #[test]
    fn what_a_fleet_does_not_fan_out_is_refused_before_anything_is_written() {
        use crate::cli::FleetSubmitArgs;
        let bad = |cmd: &str, shards: Option<u64>| {
            FleetSubmitPlan::from_cli(&FleetSubmitArgs {
                dir: "/f".into(),
                partition: "fleet".into(),
                shards,
                task_mem_mib: None,
                time_min: None,
                resume: false,
                dry_run: true,
                command: words(cmd),
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad("run --nested -n 2 --out /x", None).contains("--out"));
        assert!(bad("run --nested -n 2", Some(3)).contains("--shards 3"));
        assert!(bad("run --nested --mode burst -n 4", None).contains("sequential"));
        assert!(bad("tune --nested", None).contains("-n"));
        assert!(bad("bisect config --good a --bad b", None).contains("bisect run"));
        assert!(bad("bisect run --kernel-tree t --good a --bad b", Some(1)).contains("--shards 2"));
    }
}
