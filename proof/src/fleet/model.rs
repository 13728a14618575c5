//! A fleet directory's model: its plan (`fleet.json`, [`FleetPlan`]), each shard's plan
//! ([`ShardPlan`]), the record of the task that wrote a shard ([`TaskRecord`]), the seed
//! each shard runs under ([`shard_seed`]) and the layout's names.

use serde::{Deserialize, Serialize};
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::Knob;

use crate::schema::Clock;
use crate::skeleton::DirError;
use crate::sums::{parse_sums_with, SumsError};

/// The plan's schema.
pub const FLEET_SCHEMA: u32 = 1;
/// Where each shard's directory is: `shards/<name>/`.
pub const SHARDS_DIR: &str = "shards";
/// Where each shard's task record is: `tasks/<name>.json`.
pub const TASKS_DIR: &str = "tasks";
/// Where Slurm writes each task's output: `logs/<name>.<job id>.out`.
pub const LOGS_DIR: &str = "logs";
/// The batch script `submit` wrote (what Slurm ran for every task).
pub const SCRIPT_FILE: &str = "submit.sh";
/// The deepest path the fleet's `SHA256SUMS` lists: `shards/<shard>/<arm>/<file>`.
pub const LEVELS: usize = 4;

/// What a fleet fans out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetKind {
    /// One campaign (`truecold run`), its launches cut into ranges: each shard a campaign of
    /// its own (its own L1 in the nested harness), a bundle.
    Campaign,
    /// A tune's screen (`truecold tune`): each shard one knob's arm beside a baseline of its
    /// own, interleaved, a phase directory.
    TuneScreen,
}

impl FleetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FleetKind::Campaign => "campaign",
            FleetKind::TuneScreen => "tune-screen",
        }
    }
}

/// `fleet.json`: what `truecold fleet submit` planned; never changed after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetPlan {
    pub schema: u32,
    pub kind: FleetKind,
    /// The `truecold` command fanned out, as given after `--` (its `--out` left out).
    pub command: Vec<String>,
    /// The command's seed (each shard's is [`shard_seed`] of it).
    pub seed: u64,
    /// The clock every shard is measured on.
    pub clock: Clock,
    /// The Slurm partition.
    pub partition: String,
    /// Whether every task asked for a node of its own (`--exclusive`: a wall clock).
    pub exclusive: bool,
    /// Memory each task asked for, MiB.
    pub task_mem_mib: u64,
    pub shards: Vec<ShardPlan>,
}

/// One shard: one array task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardPlan {
    /// Its directory's name under [`SHARDS_DIR`] (and its task record's).
    pub name: String,
    /// The `truecold` arguments the task runs, after the program (`--out` last, at the
    /// shard's directory as the task stages it).
    pub args: Vec<String>,
    /// Its seed ([`shard_seed`]).
    pub seed: u64,
    /// A campaign's shard: the campaign's launches it holds, `[first, end)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<[u64; 2]>,
    /// A tune screen's shard: its knob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob: Option<Knob>,
}

impl ShardPlan {
    /// The launches a campaign's shard holds.
    pub fn count(&self) -> u64 {
        self.launches.map_or(0, |[a, b]| b.saturating_sub(a))
    }
}

/// `tasks/<name>.json`: the task that wrote a shard (written by it, beside the shard).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRecord {
    /// The shard it wrote.
    pub shard: String,
    /// SHA-256 of the `fleet.json` it ran under.
    pub plan_sha256: String,
    /// Slurm's job id of the task (`SLURM_JOB_ID`), its array's (`SLURM_ARRAY_JOB_ID`) and
    /// its index in it (`SLURM_ARRAY_TASK_ID`); `None` outside Slurm.
    pub job_id: Option<String>,
    pub array_job_id: Option<String>,
    pub array_task_id: Option<u64>,
    /// The node it ran on (`SLURMD_NODENAME`, else the host name).
    pub node: String,
    /// Its wall-clock start and end, Unix seconds (the task's cost, not a measurement).
    pub started_unix_s: u64,
    pub ended_unix_s: u64,
}

/// The seed shard `index` runs under: the command's own for shard 0 (so its launches are the
/// first ones of the unsharded campaign), and for every other a distinct one drawn from it
/// (SplitMix64 of the seed and the index), so no two shards repeat each other's randomness
/// (nonces, boot ids).
pub fn shard_seed(seed: u64, index: u64) -> u64 {
    if index == 0 {
        return seed;
    }
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A shard's name: its index, three digits (a campaign), or its knob (a tune screen).
pub fn shard_name(index: u64, knob: Option<Knob>) -> String {
    match knob {
        Some(k) => k.as_str().to_string(),
        None => format!("{index:03}"),
    }
}

/// The plan's bytes as written (pretty JSON, a final newline).
pub fn plan_bytes(p: &FleetPlan) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(p).unwrap_or_default();
    b.push(b'\n');
    b
}

/// A task record's bytes as written.
pub fn task_bytes(t: &TaskRecord) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(t).unwrap_or_default();
    b.push(b'\n');
    b
}

/// Every way the plan is not a fleet's (empty when it is one).
pub fn plan_problems(p: &FleetPlan) -> Vec<String> {
    let mut bad = Vec::new();
    if p.schema != FLEET_SCHEMA {
        bad.push(format!(
            "schema {}, this verifier reads {FLEET_SCHEMA}",
            p.schema
        ));
    }
    if p.shards.is_empty() {
        bad.push("no shards".into());
    }
    let mut next = 0u64;
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in p.shards.iter().enumerate() {
        if !crate::names::is_valid_name(&s.name) || !names.insert(s.name.as_str()) {
            bad.push(format!("shard {i}: name `{}` invalid or repeated", s.name));
        }
        if s.seed != shard_seed(p.seed, i as u64) {
            bad.push(format!(
                "shard `{}`: seed {} is not the plan's shard seed {}",
                s.name,
                s.seed,
                shard_seed(p.seed, i as u64)
            ));
        }
        match (p.kind, s.launches, s.knob) {
            (FleetKind::Campaign, Some([a, b]), None) if a == next && b > a => next = b,
            (FleetKind::Campaign, ..) => bad.push(format!(
                "shard `{}`: not the next range of launches from {next}",
                s.name
            )),
            (FleetKind::TuneScreen, None, Some(k)) if s.name == k.as_str() => {}
            (FleetKind::TuneScreen, ..) => {
                bad.push(format!("shard `{}`: not one knob's arm", s.name))
            }
        }
    }
    bad
}

/// Why a fleet directory could not be written or regenerated.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("{} does not parse", crate::names::FLEET_FILE)]
    Plan(#[source] serde_json::Error),
}

impl From<crate::fsio::FileError> for FleetError {
    fn from(e: crate::fsio::FileError) -> Self {
        FleetError::Dir(DirError::File(e))
    }
}

/// A fleet's `SHA256SUMS` parser: paths of up to [`LEVELS`] names.
pub fn parse_fleet_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, |n| crate::names::is_valid_path(n, LEVELS))
}
