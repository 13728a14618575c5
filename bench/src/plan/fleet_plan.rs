//! [`FleetSubmitPlan`]: `truecold fleet submit`'s arguments checked once — the partition,
//! the shards, the task's resources, and the command fanned out (`run …` or `tune …`),
//! parsed and planned by `truecold run`'s and `truecold tune`'s own parsers and plans.

use super::arg_error::ArgError;
use super::campaign_plan::CampaignPlan;
use super::tune_plan::TunePlan;
use crate::campaign::schedule::Schedule;
use crate::cli::{Cli, Cmd, FleetSubmitArgs};
use std::path::PathBuf;

/// The command a fleet fans out, planned.
#[derive(Clone, Debug)]
pub enum Fanned {
    /// `run …`: a sequential campaign, cut into ranges of launches.
    Campaign(Box<CampaignPlan>),
    /// `tune …`: a tune's screen, one shard per knob.
    Tune(Box<TunePlan>),
}

/// A fleet submission, checked.
#[derive(Clone, Debug)]
pub struct FleetSubmitPlan {
    pub dir: PathBuf,
    pub partition: String,
    /// Shards of a campaign.
    pub shards: u64,
    pub task_mem_mib: Option<u64>,
    pub time_min: Option<u64>,
    pub resume: bool,
    pub dry_run: bool,
    /// The command after `--`, as given.
    pub command: Vec<String>,
    pub fanned: Fanned,
}

/// Default shards of a campaign.
pub const DEFAULT_SHARDS: u64 = 2;

/// The `truecold` command `words` (after the program) as a fleet fans it out.
pub fn fanned(words: &[String]) -> Result<Fanned, ArgError> {
    let argv = std::iter::once("truecold".to_string()).chain(words.iter().cloned());
    let cli = <Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| ArgError::FleetCommand(e.to_string()))?;
    match cli.cmd {
        Cmd::Run(a) => {
            if a.out.is_some() {
                return Err(ArgError::FleetOut);
            }
            let p = CampaignPlan::from_cli(&a)?;
            let why = if !matches!(p.schedule, Schedule::Sequential { .. }) {
                Some("a sequential campaign (--mode sequential)")
            } else if !p.engines.is_empty() || p.parity {
                Some("a campaign of truecold alone (no --engine, no --parity)")
            } else {
                None
            };
            match why {
                Some(w) => Err(ArgError::FleetCampaign(w)),
                None => Ok(Fanned::Campaign(Box::new(p))),
            }
        }
        Cmd::Tune(t) => {
            if t.out.is_some() {
                return Err(ArgError::FleetOut);
            }
            let p = TunePlan::from_cli(&t)?;
            let why = if p.rounds.is_none() {
                Some("-n: every shard's rounds given, not sized from --noise-from")
            } else if p.budget.is_some() || p.noise_from.is_some() || p.confirm_rounds.is_some() {
                Some("no --budget, --noise-from or --confirm-rounds (a fleet runs the screen only)")
            } else if p.own_kernel.is_some() {
                Some("truecold's base kernel (no --kernel-config / --kernel-fragment)")
            } else if !matches!(
                p.target,
                super::guest::Target::Nested | super::guest::Target::Linux
            ) {
                Some("--nested or --linux (each shard boots Linux)")
            } else {
                None
            };
            match why {
                Some(w) => Err(ArgError::FleetTune(w)),
                None => Ok(Fanned::Tune(Box::new(p))),
            }
        }
        _ => Err(ArgError::FleetCommand(
            "the command after -- is `run …` or `tune …`".into(),
        )),
    }
}

impl FleetSubmitPlan {
    pub fn from_cli(a: &FleetSubmitArgs) -> Result<FleetSubmitPlan, ArgError> {
        let fanned = fanned(&a.command)?;
        let shards = a.shards.unwrap_or(DEFAULT_SHARDS);
        if let Fanned::Campaign(p) = &fanned {
            let n = p.planned()?;
            if shards == 0 || shards > n {
                return Err(ArgError::FleetShards {
                    shards,
                    launches: n,
                });
            }
        } else if a.shards.is_some() {
            return Err(ArgError::FleetTune(
                "no --shards: a tune's screen is one shard per knob",
            ));
        }
        if a.partition.is_empty()
            || !a
                .partition
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(ArgError::FleetPartition(a.partition.clone()));
        }
        Ok(FleetSubmitPlan {
            dir: a.dir.clone(),
            partition: a.partition.clone(),
            shards,
            task_mem_mib: a.task_mem_mib,
            time_min: a.time_min,
            resume: a.resume,
            dry_run: a.dry_run,
            command: a.command.clone(),
            fanned,
        })
    }
}
