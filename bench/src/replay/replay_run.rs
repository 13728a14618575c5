//! `truecold replay`: a record found and verified ([`super::recorded`]), its run line turned
//! into the replay's campaign plan, the inputs held to the record ([`super::inputs`]), the
//! campaign run through `truecold run`'s own entry ([`crate::run::dispatch::run`]), and the
//! new bundle judged against the record ([`truecold_proof::replay::judge`]).

use super::inputs::{self, Inputs};
use super::recorded::{self, replay_words, Record, ReplayPaths};
use super::replay_error::ReplayError;
use crate::campaign::clock;
use crate::cli::Cli;
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::replay_plan::ReplayPlan;
use crate::run::dispatch;
use std::path::{Path, PathBuf};
use truecold_proof::compare::CompareOptions;
use truecold_proof::replay::{judge, ReplayVerdict};
use truecold_proof::schema::HostKind;
use truecold_proof::verify::{escape_untrusted, Verdict};
use truecold_proto::kinds::Engine;

/// What a replay did.
#[derive(Debug)]
pub struct ReplayOutcome {
    /// The bundle replayed.
    pub record: PathBuf,
    /// The `truecold run` words of the replay (after `run`).
    pub line: Vec<String>,
    /// The inputs as checked.
    pub inputs: Inputs,
    /// What the reader should know about this replay (an interleaved arm run alone, …).
    pub notes: Vec<String>,
    /// The run, unless the inputs differ or only a check was asked for.
    pub ran: Option<Ran>,
}

/// The replay's campaign, written.
#[derive(Debug)]
pub struct Ran {
    /// The replay's bundle.
    pub bundle: PathBuf,
    /// Its verdict.
    pub verdict: Verdict,
    /// The replay judged against the record (`None` when the new bundle is not valid).
    pub judged: Option<ReplayVerdict>,
}

/// The replay's bundle unless `--out`: `results/<UTC>-replay-<the record's name>`.
fn default_out(record: &Path) -> PathBuf {
    let (stamp, _) = clock::utc_now();
    let name = record
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| truecold_proof::names::is_valid_name(n))
        .unwrap_or_else(|| "bundle".into());
    Path::new("results").join(format!("{stamp}-replay-{name}"))
}

/// The replay's campaign plan: the record's line through `truecold run`'s own parser and
/// plan, its planned launches held to the record's.
pub fn replay_plan(
    record: &Record,
    plan: &ReplayPlan,
    out: &Path,
) -> Result<(Vec<String>, CampaignPlan), ReplayError> {
    let r = record.result();
    let not = |why: String| ReplayError::NotReplayable {
        dir: record.bundle.clone(),
        why: escape_untrusted(&why),
    };
    if let Some(e) = record.engine_arm.filter(|e| *e != Engine::Truecold) {
        return Err(not(format!(
            "it is the arm of a peer engine ({e}), whose binary the record names by version, \
             not by a digest this replay can hold it to"
        )));
    }
    let host = r.environment.host_kind;
    let l1_seed = r.environment.nested.as_ref().map(|n| n.l1_seed);
    if host == HostKind::NestedEmulated
        && r.environment
            .nested
            .as_ref()
            .is_none_or(|n| n.l1_kernel_sha256.is_none())
    {
        return Err(not(
            "it records no L1 kernel digest (a nested bundle before schema 9): its clock \
             cannot be held to a replay's"
                .into(),
        ));
    }
    let words = replay_words(
        &record.recorded,
        host,
        l1_seed,
        record.engine_arm,
        ReplayPaths {
            out,
            vmm: plan.vmm.as_deref(),
            guest_dir: plan.guest_dir.as_deref(),
        },
    )
    .map_err(not)?;
    let argv = ["truecold", "run"]
        .into_iter()
        .map(String::from)
        .chain(words.iter().cloned());
    let args = Cli::try_parse_run(argv).map_err(|e| not(e.to_string()))?;
    let cplan = CampaignPlan::from_cli(&args).map_err(|e| not(e.to_string()))?;
    let planned = cplan.planned().map_err(|e| not(e.to_string()))?;
    let recorded = r.contract.mode.planned_attempts();
    if planned != recorded {
        return Err(not(format!(
            "its line plans {planned} launches and its contract {recorded}"
        )));
    }
    Ok((words, cplan))
}

/// Replays `plan`'s record (see the module doc). `invocation`: the command line as typed.
pub fn replay(plan: &ReplayPlan, invocation: &str) -> Result<ReplayOutcome, ReplayError> {
    let record = recorded::load(&plan.dir, plan.arm.as_deref())?;
    let out = plan
        .out
        .clone()
        .unwrap_or_else(|| default_out(&record.bundle));
    let (line, cplan) = replay_plan(&record, plan, &out)?;
    let inputs = inputs::check(&record, &cplan);
    let mut notes = Vec::new();
    let r = record.result();
    if r.contract.interleaved {
        notes.push(
            "the record is one arm of an interleaved directory (a tune phase or an engines \
             campaign): its launches ran between the other arms' in one campaign; the replay \
             runs the arm alone, so it is judged by compare's rule, not launch by launch"
                .into(),
        );
    }
    if r.schema_version != truecold_proof::SCHEMA_VERSION {
        notes.push(format!(
            "the record is of schema {}, this truecold writes {}: the rows are compared on \
             the columns both have",
            r.schema_version,
            truecold_proof::SCHEMA_VERSION
        ));
    }
    let mut outcome = ReplayOutcome {
        record: record.bundle.clone(),
        line,
        inputs,
        notes,
        ran: None,
    };
    if plan.check || !outcome.inputs.mismatches.is_empty() {
        return Ok(outcome);
    }
    let done = dispatch::run(&cplan, invocation)?;
    let (bundle, verdict) = match record.engine_arm {
        Some(e) => done
            .arms
            .into_iter()
            .find(|(arm, _)| *arm == e)
            .map(|(_, w)| (w.path, w.verdict))
            .ok_or_else(|| ReplayError::NoReplayedArm(e.to_string()))?,
        None => (done.written.path, done.written.verdict),
    };
    let judged = if verdict.is_valid() {
        let o = CompareOptions::default();
        Some(if r.contract.interleaved {
            truecold_proof::replay::judge_by_compare(&record.verdict, &verdict, &o)?
        } else {
            judge(&record.verdict, &verdict, &o)?
        })
    } else {
        None
    };
    outcome.ran = Some(Ran {
        bundle,
        verdict,
        judged,
    });
    Ok(outcome)
}
