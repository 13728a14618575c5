//! `truecold fleet submit`: the plan cut into shards (a campaign's launches into ranges, a
//! tune's screen into one shard per knob), written once as `fleet.json` with the batch
//! script, and submitted as one Slurm job array; with `--resume`, the shards not written
//! yet submitted again under the plan already there.

use super::fleet_dir::{FleetDir, Submission};
use super::fleet_error::FleetError;
use super::slurm::{self, ArrayJob};
use crate::plan::fleet_plan::{Fanned, FleetSubmitPlan};
use crate::run::nested_campaign::{l1_hugetlb_pages, l1_mem_mib};
use truecold_proof::fleet::{
    plan_bytes, shard_name, shard_seed, FleetKind, FleetPlan, ShardPlan, FLEET_SCHEMA, LOGS_DIR,
    SHARDS_DIR, TASKS_DIR,
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
                    knob: None,
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
            for (i, k) in knobs.iter().enumerate() {
                let seed = shard_seed(t.seed, i as u64);
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
                    name: shard_name(i as u64, Some(*k)),
                    args,
                    seed,
                    launches: None,
                    knob: Some(*k),
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
    })
}

/// The batch script every task runs: this `truecold` runs the task's shard.
pub fn script(truecold: &std::path::Path, workdir: &std::path::Path, dir: &FleetDir) -> String {
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
    /// The array's job id (`None` with `--dry-run` or nothing to submit).
    pub array_job_id: Option<String>,
    /// The sbatch arguments.
    pub sbatch: Vec<String>,
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
    let job = ArrayJob {
        name: JOB_NAME,
        partition: &p.partition,
        tasks: &tasks,
        mem_mib: plan.task_mem_mib,
        cpus: 1,
        exclusive: plan.exclusive,
        time_min: p.time_min,
        output: &dir.log_pattern(),
        script: &dir.script(),
    };
    let sbatch = slurm::sbatch_args(&job);
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
        truecold_proof::fsio::write_new_file(&dir.script(), script(&exe, &cwd, &dir).as_bytes())?;
    }
    if p.dry_run || tasks.is_empty() {
        return Ok(Submitted {
            dir,
            plan,
            tasks,
            array_job_id: None,
            sbatch,
        });
    }
    let id = slurm::submit(&job)?;
    dir.record_submission(&Submission {
        array_job_id: id.clone(),
        tasks: tasks.clone(),
        unix_s: super::shard::unix_now(),
    })?;
    Ok(Submitted {
        dir,
        plan,
        tasks,
        array_job_id: Some(id),
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
        assert!(bad("bisect config --good a --bad b", None).contains("`run …` or `tune …`"));
    }
}
