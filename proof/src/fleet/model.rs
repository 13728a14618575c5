//! A fleet directory's model: its plan (`fleet.json`, [`FleetPlan`]), each shard's plan
//! ([`ShardPlan`]), the record of the task that wrote a shard ([`TaskRecord`]), the seed
//! each shard runs under ([`shard_seed`]) and the layout's names.

use serde::{Deserialize, Serialize};
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::Knob;

use crate::schema::Clock;
use crate::skeleton::DirError;
use crate::sums::{parse_sums_with, SumsError};

/// The plan's schema: 2 (a tune screen's Kconfig knob built by a shard of its own, a bisect's
/// wave); 1 is read as it was written (a Kconfig knob's kernel built inside its knob's task).
pub const FLEET_SCHEMA: u32 = 2;
/// The first schema, still read.
pub const FLEET_SCHEMA_V1: u32 = 1;
/// Where each shard's directory is: `shards/<name>/`.
pub const SHARDS_DIR: &str = "shards";
/// Where each shard's task record is: `tasks/<name>.json`.
pub const TASKS_DIR: &str = "tasks";
/// Where Slurm writes each task's output: `logs/<name>.<job id>.out`.
pub const LOGS_DIR: &str = "logs";
/// The batch script `submit` wrote (what Slurm ran for every task).
pub const SCRIPT_FILE: &str = "submit.sh";
/// The deepest path the fleet's `SHA256SUMS` lists: a bisect probe's
/// `shards/<probe>/steps/<step>/<arm>/<file>`.
pub const LEVELS: usize = 6;
/// A bisect wave's first shard: the good commit's baseline.
pub const BASELINE_SHARD: &str = "baseline";
/// A build shard's record of the kernel it built (beside the kernel's `config`).
pub const BUILD_FILE: &str = "build.json";

/// What a fleet fans out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FleetKind {
    /// One campaign (`truecold run`), its launches cut into ranges: each shard a campaign of
    /// its own (its own L1 in the nested harness), a bundle.
    Campaign,
    /// A tune's screen (`truecold tune`): each shard one knob's arm beside a baseline of its
    /// own, interleaved, a phase directory; a Kconfig knob's kernel is built first by a build
    /// shard of its own (schema 2).
    TuneScreen,
    /// One wave of a k-way commit bisect (`truecold bisect run`): the good commit's baseline
    /// (a bisect directory with no step), then one step per probed commit of the range, each
    /// a bisect directory of that one step against the baseline ([`crate::fleet::bisect`]).
    Bisect,
}

impl FleetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FleetKind::Campaign => "campaign",
            FleetKind::TuneScreen => "tune-screen",
            FleetKind::Bisect => "bisect",
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
    /// A bisect wave's commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisect: Option<BisectRange>,
}

/// The commits a bisect wave probes among, resolved once by `submit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BisectRange {
    /// The kernel git work tree (absolute).
    pub tree: String,
    /// The good commit (full id).
    pub good: String,
    /// The bad commit (full id): the range's last.
    pub bad: String,
    /// The commits after `good` up to `bad`, oldest first, along the first-parent line
    /// (`git rev-list --first-parent --reverse good..bad`).
    pub range: Vec<String>,
    /// Probes a wave measures ([`crate::fleet::bisect::probes`]).
    pub probes: u64,
}

/// One shard: one array task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// A build shard: the Kconfig knob whose kernel it builds (into the kernel directory the
    /// knob's shard then finds it in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builds: Option<Knob>,
    /// A bisect shard: its commit (the baseline's is the good commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The shard this one waits for (Slurm `--dependency=afterok`): a Kconfig knob's build
    /// shard, a probe's baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
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

/// `shards/build-<knob>/build.json`: the kernel a build shard built (or found cached) for a
/// Kconfig knob, beside its resolved `config`; the knob's shard then boots exactly this
/// kernel (`verify` holds the arm's vmlinux digest to it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildRecord {
    pub knob: Knob,
    /// SHA-256 of the kernel (`vmlinux`) and of its resolved `config` (the file beside).
    pub vmlinux_sha256: String,
    pub config_sha256: String,
    /// The guest directory it is in (under the fleet command's kernel directory).
    pub kernel_dir: String,
    /// Wall-clock seconds the build took, a cache hit's about 1 (the task's cost, not a
    /// measurement).
    pub build_seconds: u64,
}

/// A build record's bytes as written.
pub fn build_bytes(b: &BuildRecord) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(b).unwrap_or_default();
    v.push(b'\n');
    v
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

/// A build shard's name: `build-<knob>`.
pub fn build_shard_name(k: Knob) -> String {
    format!("build-{}", k.as_str())
}

/// A bisect probe's name: its place in the range (1 = the good commit's child), three
/// digits, and the commit's first 12 hex digits.
pub fn probe_name(place: usize, commit: &str) -> String {
    format!("{place:03}-{}", &commit[..commit.len().min(12)])
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
