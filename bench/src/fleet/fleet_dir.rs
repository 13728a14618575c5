//! Where a fleet's files are: the plan, the batch script, each shard's directory and task
//! record, Slurm's logs and the record of each submission inside the fleet directory
//! (`truecold_proof::fleet`'s layout), and each task's work directory beside it.

use super::fleet_error::FleetError;
use std::path::{Path, PathBuf};
use truecold_proof::fleet::{FleetPlan, LOGS_DIR, SCRIPT_FILE, SHARDS_DIR, TASKS_DIR};
use truecold_proof::names::FLEET_FILE;

/// Each submission: one JSON line (the array's job id, its tasks, when).
pub const SUBMISSIONS_FILE: &str = "submissions.jsonl";

/// A fleet directory's paths.
#[derive(Clone, Debug)]
pub struct FleetDir {
    pub root: PathBuf,
}

/// One line of [`SUBMISSIONS_FILE`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Submission {
    pub array_job_id: String,
    pub tasks: Vec<u64>,
    pub unix_s: u64,
}

impl FleetDir {
    /// The fleet directory `root`, made absolute (every task of the array finds it by this
    /// path: on a cluster, a filesystem every node shares).
    pub fn at(root: &Path) -> Result<FleetDir, FleetError> {
        let abs = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(truecold_proto::path_io::PathIoError::at("resolve", root))?
                .join(root)
        };
        Ok(FleetDir { root: abs })
    }

    pub fn plan_file(&self) -> PathBuf {
        self.root.join(FLEET_FILE)
    }
    pub fn script(&self) -> PathBuf {
        self.root.join(SCRIPT_FILE)
    }
    pub fn shard(&self, name: &str) -> PathBuf {
        self.root.join(SHARDS_DIR).join(name)
    }
    pub fn task(&self, name: &str) -> PathBuf {
        self.root.join(TASKS_DIR).join(format!("{name}.json"))
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join(LOGS_DIR)
    }
    /// Slurm's output of array `array`'s task `task` (`--output` with `%a` and `%A`).
    pub fn log(&self, array: &str, task: u64) -> PathBuf {
        self.logs().join(format!("task-{task}.{array}.out"))
    }
    /// The `--output` pattern of a submission.
    pub fn log_pattern(&self) -> PathBuf {
        self.logs().join("task-%a.%A.out")
    }
    pub fn submissions(&self) -> PathBuf {
        self.root.join(SUBMISSIONS_FILE)
    }
    /// Where the tasks work before a shard is placed: beside the fleet directory
    /// (`<name>.work/`), on its filesystem, never inside it; a failed task's partial output
    /// stays there for inspection and is never part of the fleet.
    pub fn work_root(&self) -> PathBuf {
        let name = self
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "fleet".into());
        self.root.with_file_name(format!("{name}.work"))
    }

    /// The plan and its bytes' digest.
    pub fn read_plan(&self) -> Result<(FleetPlan, String), FleetError> {
        if !self.plan_file().is_file() {
            return Err(FleetError::NotAFleet(self.root.clone()));
        }
        let bytes = truecold_proof::skeleton::read_record(&self.plan_file())
            .map_err(|e| FleetError::Plan(self.root.clone(), e.into()))?;
        let plan: FleetPlan = serde_json::from_slice(&bytes).map_err(|e| {
            FleetError::Plan(
                self.root.clone(),
                truecold_proof::fleet::FleetError::Plan(e),
            )
        })?;
        let bad = truecold_proof::fleet::plan_problems(&plan);
        if !bad.is_empty() {
            return Err(FleetError::ForeignPlan {
                dir: self.root.clone(),
                why: format!("its fleet.json is not a plan: {}", bad.join("; ")),
            });
        }
        Ok((plan, truecold_proof::digest::sha256_hex(&bytes)))
    }

    /// Every submission made, in order.
    pub fn read_submissions(&self) -> Vec<Submission> {
        std::fs::read_to_string(self.submissions())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Appends `s` to the submissions.
    pub fn record_submission(&self, s: &Submission) -> Result<(), FleetError> {
        use std::io::Write as _;
        let p = self.submissions();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(truecold_proto::path_io::PathIoError::at("open", &p))?;
        let line = serde_json::to_string(s).unwrap_or_default() + "\n";
        f.write_all(line.as_bytes())
            .map_err(truecold_proto::path_io::PathIoError::at("append to", &p))?;
        Ok(())
    }
}
