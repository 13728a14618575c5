//! [`FleetSubmitPlan`]: `truecold fleet submit`'s arguments checked once — the partition,
//! the shards, the task's resources, and the command fanned out (`run …` or `tune …`),
//! parsed and planned by `truecold run`'s and `truecold tune`'s own parsers and plans.

use super::arg_error::ArgError;
use super::bisect_plan::BisectRunPlan;
use super::campaign_plan::CampaignPlan;
use super::tune_plan::TunePlan;
use crate::campaign::schedule::Schedule;
use crate::cli::{BisectCmd, Cli, Cmd, FleetSubmitArgs};
use std::path::PathBuf;

/// The command a fleet fans out, planned.
#[derive(Clone, Debug)]
pub enum Fanned {
    /// `run …`: a sequential campaign, cut into ranges of launches.
    Campaign(Box<CampaignPlan>),
    /// `tune …`: a tune's screen, one shard per knob (and a build shard per Kconfig knob).
    Tune(Box<TunePlan>),
    /// `bisect run …`: one wave of a k-way bisect, the good commit's baseline and a probe per
    /// commit measured.
    Bisect(Box<BisectRunPlan>),
}

/// A fleet submission, checked.
#[derive(Clone, Debug)]
pub struct FleetSubmitPlan {
    pub dir: PathBuf,
    pub partition: String,
    /// Shards of a campaign; probes of a bisect wave.
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
/// Default probes of a bisect wave.
pub const DEFAULT_PROBES: u64 = 3;

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
        Cmd::Bisect(b) => match b.cmd {
            BisectCmd::Run(r) => {
                if r.out.is_some() {
                    return Err(ArgError::FleetOut);
                }
                Ok(Fanned::Bisect(Box::new(BisectRunPlan::from_cli(&r)?)))
            }
            _ => Err(ArgError::FleetCommand(
                "of the bisects a fleet fans out `bisect run …` (a config bisect's steps each \
                 depend on the last)"
                    .into(),
            )),
        },
        _ => Err(ArgError::FleetCommand(
            "the command after -- is `run …`, `tune …` or `bisect run …`".into(),
        )),
    }
}

impl FleetSubmitPlan {
    pub fn from_cli(a: &FleetSubmitArgs) -> Result<FleetSubmitPlan, ArgError> {
        let fanned = fanned(&a.command)?;
        let shards = match &fanned {
            Fanned::Bisect(_) => a.shards.unwrap_or(DEFAULT_PROBES),
            _ => a.shards.unwrap_or(DEFAULT_SHARDS),
        };
        if let Fanned::Campaign(p) = &fanned {
            let n = p.planned()?;
            if shards == 0 || shards > n {
                return Err(ArgError::FleetShards {
                    shards,
                    launches: n,
                });
            }
        } else if let Fanned::Bisect(_) = &fanned {
            if shards < 2 {
                return Err(ArgError::FleetBisect(
                    "wave needs --shards 2 or more (the bad commit and a probe before it)",
                ));
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
