//! The Slurm cluster, through its own commands (`scontrol`, `sbatch`): whether a controller
//! answers, whether a partition exists, a job array submitted, and what became of each task.
//! Every failure is a [`ClusterError`], typed by what Slurm said.

use std::path::Path;
use std::process::{Command, Stdio};

/// Why the cluster refused or could not be reached.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    #[error(
        "Slurm is not installed here: `{0}` is not on PATH (Debian: apt-get install slurm-client)"
    )]
    NotInstalled(&'static str),
    #[error(
        "no Slurm controller answers (`scontrol ping`: {0}); is slurmctld running, and does \
         SLURM_CONF name its slurm.conf? (scripts/slurm-local.sh starts one on this machine)"
    )]
    NoController(String),
    #[error("the cluster has no partition `{partition}` (`scontrol show partition`: {said})")]
    NoPartition { partition: String, said: String },
    #[error("sbatch refused the job array: {0}")]
    Refused(String),
    #[error("`{command}` could not run: {why}")]
    Spawn { command: &'static str, why: String },
}

/// What Slurm says of one array task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    /// `JobState` (`PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`,
    /// `OUT_OF_MEMORY`, …).
    pub state: String,
    /// `Reason` (why pending, or why it ended).
    pub reason: String,
    /// `ExitCode` (`exit:signal`).
    pub exit: String,
    /// The node it ran on (`BatchHost`), when it ran.
    pub node: Option<String>,
}

fn run(cmd: &'static str, args: &[&str]) -> Result<(bool, String, String), ClusterError> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ClusterError::NotInstalled(cmd),
            _ => ClusterError::Spawn {
                command: cmd,
                why: e.to_string(),
            },
        })?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

/// The first line of what a command said, for a message.
fn said(out: &str, err: &str) -> String {
    let t = if err.is_empty() { out } else { err };
    t.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("nothing")
        .chars()
        .take(300)
        .collect()
}

/// A controller answers (`scontrol ping`).
pub fn ping() -> Result<(), ClusterError> {
    let (ok, out, err) = run("scontrol", &["ping"])?;
    if ok && out.contains("is UP") {
        Ok(())
    } else {
        Err(ClusterError::NoController(said(&out, &err)))
    }
}

/// The partition exists (`scontrol show partition`), the controller answering.
pub fn check_partition(partition: &str) -> Result<(), ClusterError> {
    ping()?;
    let (ok, out, err) = run("scontrol", &["show", "partition", partition])?;
    if ok && out.contains(&format!("PartitionName={partition}")) {
        return Ok(());
    }
    let s = said(&out, &err);
    if s.contains("Unable to contact") {
        return Err(ClusterError::NoController(s));
    }
    Err(ClusterError::NoPartition {
        partition: partition.to_string(),
        said: s,
    })
}

/// A job array's request.
#[derive(Clone, Debug)]
pub struct ArrayJob<'a> {
    pub name: &'a str,
    pub partition: &'a str,
    /// The array's task indexes.
    pub tasks: &'a [u64],
    pub mem_mib: u64,
    pub cpus: u32,
    pub exclusive: bool,
    pub time_min: Option<u64>,
    /// Each task's output: Slurm's `%A` (the array's job id) and `%a` (the task) expand.
    pub output: &'a Path,
    pub script: &'a Path,
    /// Another array's task these wait for (`--dependency=afterok:<job>_<task>`): a task whose
    /// build or baseline failed is cancelled, never left pending (`--kill-on-invalid-dep`).
    pub after: Option<String>,
}

/// The `sbatch` arguments of `j`.
pub fn sbatch_args(j: &ArrayJob<'_>) -> Vec<String> {
    let array = j
        .tasks
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut v = vec![
        "--parsable".to_string(),
        format!("--job-name={}", j.name),
        format!("--partition={}", j.partition),
        format!("--array={array}"),
        format!("--mem={}M", j.mem_mib),
        format!("--cpus-per-task={}", j.cpus),
        format!("--output={}", j.output.display()),
        "--export=ALL".to_string(),
    ];
    if j.exclusive {
        v.push("--exclusive".into());
    }
    if let Some(t) = j.time_min {
        v.push(format!("--time={t}"));
    }
    if let Some(a) = &j.after {
        v.push(format!("--dependency=afterok:{a}"));
        v.push("--kill-on-invalid-dep=yes".into());
    }
    v.push(j.script.display().to_string());
    v
}

/// Submits `j` (`sbatch --parsable`); the array's job id.
pub fn submit(j: &ArrayJob<'_>) -> Result<String, ClusterError> {
    check_partition(j.partition)?;
    let args = sbatch_args(j);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = run("sbatch", &refs)?;
    let id = out.split(';').next().unwrap_or_default().trim().to_string();
    if ok && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(id);
    }
    let s = said(&out, &err);
    Err(if s.contains("Invalid partition") {
        ClusterError::NoPartition {
            partition: j.partition.to_string(),
            said: s,
        }
    } else if s.contains("Unable to contact") {
        ClusterError::NoController(s)
    } else {
        ClusterError::Refused(s)
    })
}

/// What Slurm says of task `task` of array `array` (`scontrol show job -o`); `None` when it
/// no longer knows it (ended longer ago than its `MinJobAge`) or cannot be asked.
pub fn task_info(array: &str, task: u64) -> Option<TaskInfo> {
    let id = format!("{array}_{task}");
    let (ok, out, _) = run("scontrol", &["show", "job", "-o", &id]).ok()?;
    if !ok {
        return None;
    }
    parse_job_line(out.lines().next()?)
}

/// One line of `scontrol show job -o`.
pub fn parse_job_line(line: &str) -> Option<TaskInfo> {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .map(str::to_string)
    };
    Some(TaskInfo {
        state: field("JobState")?,
        reason: field("Reason").unwrap_or_default(),
        exit: field("ExitCode").unwrap_or_default(),
        node: field("BatchHost").filter(|h| h != "(null)"),
    })
}

/// Cancels task `task` of array `array` (`scancel`).
pub fn cancel(array: &str, task: u64) -> Result<(), ClusterError> {
    let (ok, out, err) = run("scancel", &[&format!("{array}_{task}")])?;
    if ok {
        Ok(())
    } else {
        Err(ClusterError::Refused(said(&out, &err)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_line_reads_state_reason_exit_and_node() {
        let l = "JobId=7 ArrayJobId=5 ArrayTaskId=1 JobName=truecold-fleet JobState=FAILED \
                 Reason=JobLaunchFailure Dependency=(null) ExitCode=0:9 BatchHost=node3";
        let t = parse_job_line(l).unwrap();
        assert_eq!(t.state, "FAILED");
        assert_eq!(t.reason, "JobLaunchFailure");
        assert_eq!(t.exit, "0:9");
        assert_eq!(t.node.as_deref(), Some("node3"));
        assert!(parse_job_line("nothing here").is_none());
    }

    #[test]
    fn an_array_asks_for_its_tasks_memory_and_exclusivity() {
        let j = ArrayJob {
            name: "truecold-fleet",
            partition: "fleet",
            tasks: &[0, 2],
            mem_mib: 2304,
            cpus: 1,
            exclusive: true,
            time_min: Some(30),
            output: Path::new("/f/logs/task-%a.%A.out"),
            script: Path::new("/f/submit.sh"),
            after: None,
        };
        let a = sbatch_args(&j).join(" ");
        assert!(!a.contains("--dependency"), "{a}");
        let after = ArrayJob {
            after: Some("41_0".into()),
            ..j.clone()
        };
        let d = sbatch_args(&after).join(" ");
        assert!(
            d.contains("--dependency=afterok:41_0 --kill-on-invalid-dep=yes"),
            "{d}"
        );
        for w in [
            "--array=0,2",
            "--mem=2304M",
            "--partition=fleet",
            "--exclusive",
            "--time=30",
            "--output=/f/logs/task-%a.%A.out",
        ] {
            assert!(a.contains(w), "{a}");
        }
        assert!(a.ends_with("/f/submit.sh"), "{a}");
        let shared = ArrayJob {
            exclusive: false,
            time_min: None,
            ..j
        };
        let a = sbatch_args(&shared).join(" ");
        assert!(!a.contains("--exclusive") && !a.contains("--time"), "{a}");
    }
}
