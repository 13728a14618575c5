//! `truecold fleet status`: each shard written, or what became of the task that was to
//! write it — pending, running, or failed as Slurm and the task's log say: killed for
//! memory, cancelled, out of time, or failed with its exit status.

use super::fleet_dir::FleetDir;
use super::fleet_error::FleetError;
use super::slurm;
use std::fmt;

/// A shard's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardState {
    /// Written: by the task on this node, in this job.
    Written {
        node: String,
        job: String,
    },
    NotSubmitted,
    Pending {
        job: String,
        reason: String,
    },
    Running {
        job: String,
        node: String,
    },
    /// Killed by Slurm for going above its `--mem` (the log says "exceeded memory limit",
    /// or the job state is OUT_OF_MEMORY).
    KilledForMemory {
        job: String,
    },
    Cancelled {
        job: String,
    },
    TimedOut {
        job: String,
    },
    /// Ended without writing its shard.
    Failed {
        job: String,
        exit: String,
    },
    /// Submitted, and neither Slurm nor the log says what became of it.
    Unknown {
        job: String,
    },
}

impl ShardState {
    /// The task that was to write it failed (it can be submitted again: `--resume`).
    pub fn failed(&self) -> bool {
        matches!(
            self,
            ShardState::KilledForMemory { .. }
                | ShardState::Cancelled { .. }
                | ShardState::TimedOut { .. }
                | ShardState::Failed { .. }
                | ShardState::Unknown { .. }
        )
    }
}

impl fmt::Display for ShardState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardState::Written { node, job } => write!(f, "written (job {job} on {node})"),
            ShardState::NotSubmitted => write!(f, "not submitted"),
            ShardState::Pending { job, reason } => write!(f, "pending (job {job}: {reason})"),
            ShardState::Running { job, node } => write!(f, "running (job {job} on {node})"),
            ShardState::KilledForMemory { job } => write!(
                f,
                "killed for memory (job {job} went above its --mem: submit again with a \
                 larger --task-mem-mib)"
            ),
            ShardState::Cancelled { job } => write!(f, "cancelled (job {job})"),
            ShardState::TimedOut { job } => write!(f, "out of time (job {job}: --time-min)"),
            ShardState::Failed { job, exit } => {
                write!(f, "failed (job {job}, exit {exit}; its log says why)")
            }
            ShardState::Unknown { job } => write!(
                f,
                "lost (job {job}: Slurm no longer knows it and its log says nothing)"
            ),
        }
    }
}

/// The last submission that included task `index`: the array's job id and when.
pub fn last_submission(dir: &FleetDir, index: u64) -> Option<(String, u64)> {
    dir.read_submissions()
        .into_iter()
        .rev()
        .find(|s| s.tasks.contains(&index))
        .map(|s| (s.array_job_id, s.unix_s))
}

/// What a task's log says of how it ended, if it says.
pub fn from_log(text: &str, job: &str) -> Option<ShardState> {
    let job = job.to_string();
    if text.contains("exceeded memory limit") || text.contains("Exceeded job memory limit") {
        Some(ShardState::KilledForMemory { job })
    } else if text.contains("DUE TO TIME LIMIT") {
        Some(ShardState::TimedOut { job })
    } else if text.contains("CANCELLED AT") {
        Some(ShardState::Cancelled { job })
    } else {
        None
    }
}

/// Shard `index`'s state.
pub fn shard_state(dir: &FleetDir, index: u64, name: &str) -> ShardState {
    if dir.shard(name).exists() {
        let t: Option<truecold_proof::fleet::TaskRecord> = std::fs::read(dir.task(name))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        return ShardState::Written {
            node: t.as_ref().map_or("?".into(), |t| t.node.clone()),
            job: t.map_or("-".into(), |t| match (t.array_job_id, t.array_task_id) {
                (Some(a), Some(i)) => format!("{a}_{i}"),
                _ => t.job_id.unwrap_or_else(|| "-".into()),
            }),
        };
    }
    let Some((array, _)) = last_submission(dir, index) else {
        return ShardState::NotSubmitted;
    };
    let job = format!("{array}_{index}");
    let log = std::fs::read(dir.log(&array, index))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let info = slurm::task_info(&array, index);
    match info.as_ref().map(|i| i.state.as_str()) {
        Some("PENDING") | Some("CONFIGURING") => ShardState::Pending {
            job,
            reason: info.map(|i| i.reason).unwrap_or_default(),
        },
        Some("RUNNING") | Some("COMPLETING") => ShardState::Running {
            job,
            node: info.and_then(|i| i.node).unwrap_or_default(),
        },
        Some("OUT_OF_MEMORY") => ShardState::KilledForMemory { job },
        Some("TIMEOUT") => ShardState::TimedOut { job },
        Some(s) => from_log(&log, &job).unwrap_or(if s.starts_with("CANCELLED") {
            ShardState::Cancelled { job }
        } else {
            ShardState::Failed {
                job,
                exit: info.map(|i| i.exit).unwrap_or_default(),
            }
        }),
        None => from_log(&log, &job).unwrap_or(ShardState::Unknown { job }),
    }
}

/// Every shard's state, in the plan's order.
pub fn status(dir: &std::path::Path) -> Result<Vec<(String, ShardState)>, FleetError> {
    let dir = FleetDir::at(dir)?;
    let (plan, _) = dir.read_plan()?;
    Ok(plan
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), shard_state(&dir, i as u64, &s.name)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_types_memory_time_and_cancel() {
        let mem = "slurmstepd-localhost: error: StepId=5.batch exceeded memory limit \
                   (331399168 > 52428800), being killed";
        assert_eq!(
            from_log(mem, "5_0"),
            Some(ShardState::KilledForMemory { job: "5_0".into() })
        );
        assert_eq!(
            from_log(
                "*** JOB 9 ON n1 CANCELLED AT 2026-12-06T18:39:02 ***",
                "9_1"
            ),
            Some(ShardState::Cancelled { job: "9_1".into() })
        );
        assert_eq!(
            from_log(
                "*** JOB 9 ON n1 CANCELLED AT 2026 DUE TO TIME LIMIT ***",
                "9_1"
            ),
            Some(ShardState::TimedOut { job: "9_1".into() })
        );
        assert_eq!(from_log("all fine", "9_1"), None);
        assert!(ShardState::KilledForMemory { job: "x".into() }
            .to_string()
            .contains("--task-mem-mib"));
    }
}
