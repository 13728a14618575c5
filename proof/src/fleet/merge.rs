//! The merge rule: a fleet's shards held to one unsharded run of the same plan.
//!
//! A shard's L1 (in the nested harness) or its campaign is started fresh: its launches are
//! the first launches of a campaign of their own, not launches `a..b` of one long
//! campaign. So the rule *measures* how far the shards are the long campaign's launches,
//! and says which:
//! - a campaign's shard, on the **virtual clock**: its rows against the unsharded run's rows
//!   of the same launches, cell by cell (renumbered from 0, the one column a shard numbers
//!   its own way), by [`crate::replay::sample_equality`]: identical, or each difference;
//!   on a **wall clock**: `compare`'s verdict, the unsharded launches as A;
//! - a tune screen's shard (one knob beside a baseline of its own): the knob's effect in
//!   its shard against its effect in the unsharded screen (Δp50 of the arm against its
//!   baseline, each side's own `truecold_proof::tune::effect`).
//!
//! Nothing here reads a directory: it takes what `verify` verified.

use serde::Serialize;
use truecold_proto::tune::Knob;

use super::check::VerifiedFleet;
use super::model::FleetKind;
use crate::compare::{compare_bundles, CompareOptions};
use crate::replay::{sample_equality, SampleEquality};
use crate::schema::{Clock, ResultJson, Sample};
use crate::stats::{ascending, percentile_sorted};
use crate::summary::success_latencies;
use crate::tune::{effect, Effect, RuleVersion, TuneArm};
use crate::verdict::Verdict;

/// Why the merge rule cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("the unsharded run is not valid (verify it)")]
    Invalid,
    #[error("the fleet has no plan")]
    NoPlan,
    #[error("shard `{0}` is not verified")]
    Shard(String),
    #[error("the unsharded run holds {have} launches, the fleet {want}")]
    Launches { have: usize, want: u64 },
    #[error("the unsharded run and the shards differ: {0}")]
    NotOnePlan(String),
    #[error("the unsharded screen has no arm `{0}`")]
    NoArm(String),
    #[error("writing rows back")]
    Csv(#[from] crate::csv::CsvError),
    #[error("comparing")]
    Compare(#[from] crate::compare::CompareError),
}

/// One campaign shard held to the unsharded run's same launches.
#[derive(Debug, Serialize)]
pub struct CampaignShard {
    pub shard: String,
    pub launches: [u64; 2],
    /// Virtual clock: cell by cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equality: Option<SampleEquality>,
    /// The shard's headline minus the unsharded run's, launch by launch (ns; virtual clock).
    pub latency_delta_ns: Vec<Option<i128>>,
    /// Wall clock: `compare`'s outcome, the unsharded launches as A.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<String>,
}

impl CampaignShard {
    /// Whether the shard's rows are the unsharded run's, cell by cell.
    pub fn identical(&self) -> bool {
        self.equality
            .as_ref()
            .is_some_and(SampleEquality::identical)
    }
}

/// One tune-screen shard: its knob's effect there and in the unsharded screen.
#[derive(Debug, Serialize)]
pub struct ScreenShard {
    pub knob: Knob,
    pub sharded: Effect,
    pub unsharded: Effect,
}

/// The merge rule applied.
#[derive(Debug, Serialize)]
pub struct MergeRule {
    pub clock: Clock,
    pub kind: FleetKind,
    pub campaign: Vec<CampaignShard>,
    pub screen: Vec<ScreenShard>,
    /// Campaign: the p50 of every shard's successes pooled, and the unsharded run's (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsharded_p50_ns: Option<u64>,
}

fn rows(v: &Verdict) -> Option<(&ResultJson, &[Sample])> {
    match (v.is_valid(), &v.result, &v.samples) {
        (true, Some(r), Some(s)) => Some((r, s.as_slice())),
        _ => None,
    }
}

/// The rule for a campaign's fleet against `unsharded`, a verified bundle of the whole
/// campaign (the plan's command run once).
pub fn campaign_merge(fleet: &VerifiedFleet, unsharded: &Verdict) -> Result<MergeRule, MergeError> {
    let plan = fleet.plan.as_ref().ok_or(MergeError::NoPlan)?;
    let (ur, us) = rows(unsharded).ok_or(MergeError::Invalid)?;
    let want: u64 = plan.shards.iter().map(|s| s.count()).sum();
    if us.len() as u64 != want {
        return Err(MergeError::Launches {
            have: us.len(),
            want,
        });
    }
    let mut out = Vec::new();
    let mut pooled: Vec<u64> = Vec::new();
    for s in &fleet.shards {
        let name = s.plan.name.clone();
        let (sr, ss) = rows(&s.verdict).ok_or_else(|| MergeError::Shard(name.clone()))?;
        let why = super::check::differ(ur, sr);
        // The seed is the shard's own by design, and only a nested record shows it.
        if !why.is_empty() {
            return Err(MergeError::NotOnePlan(format!(
                "shard `{name}`: {}",
                why.join("; ")
            )));
        }
        pooled.extend(success_latencies(ss));
        let [a, b] = s.plan.launches.unwrap_or([0, 0]);
        let same: Vec<Sample> = us
            .get(a as usize..b as usize)
            .unwrap_or_default()
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, mut x)| {
                x.index = i as u64;
                x
            })
            .collect();
        let latency_delta_ns = same
            .iter()
            .zip(ss)
            .map(|(u, x)| {
                u.latency_ns
                    .zip(x.latency_ns)
                    .map(|(u, x)| i128::from(x) - i128::from(u))
            })
            .collect();
        let (equality, compare) = match plan.clock {
            Clock::Virtual => (
                Some(sample_equality(
                    (&same, ur.schema_version),
                    (ss, sr.schema_version),
                )?),
                None,
            ),
            Clock::Wall => {
                let c = compare_bundles((ur, &same), (sr, ss), &CompareOptions::default())?;
                (None, Some(format!("{:?}", c.outcome)))
            }
        };
        out.push(CampaignShard {
            shard: name,
            launches: [a, b],
            equality,
            latency_delta_ns,
            compare,
        });
    }
    let pooled = ascending(&pooled);
    let u = success_latencies(us);
    Ok(MergeRule {
        clock: plan.clock,
        kind: plan.kind,
        campaign: out,
        screen: Vec::new(),
        merged_p50_ns: percentile_sorted(&pooled, 50, 100),
        unsharded_p50_ns: percentile_sorted(&u, 50, 100),
    })
}

/// The rule for a tune screen's fleet: each shard's arms (`baseline`, its knob; their
/// verified rows) against the same arms of the unsharded screen (`arms`: each arm's name and
/// verified rows).
pub fn screen_merge(
    clock: Clock,
    seed: u64,
    shards: &[(Knob, Vec<Sample>, Vec<Sample>)],
    unsharded_baseline: &[Sample],
    unsharded_arms: &[(String, Vec<Sample>)],
) -> Result<MergeRule, MergeError> {
    let rule = RuleVersion::CURRENT;
    let ub = TuneArm::new(crate::names::BASELINE_ARM, Vec::new(), unsharded_baseline);
    let mut out = Vec::new();
    for (k, base, arm) in shards {
        let sb = TuneArm::new(crate::names::BASELINE_ARM, Vec::new(), base);
        let sa = TuneArm::new(k.as_str(), vec![*k], arm);
        let ua_rows = unsharded_arms
            .iter()
            .find(|(n, _)| n == k.as_str())
            .map(|(_, r)| r)
            .ok_or_else(|| MergeError::NoArm(k.as_str().to_string()))?;
        let ua = TuneArm::new(k.as_str(), vec![*k], ua_rows);
        out.push(ScreenShard {
            knob: *k,
            sharded: effect(rule, &sb, &sa, vec![*k], seed),
            unsharded: effect(rule, &ub, &ua, vec![*k], seed),
        });
    }
    Ok(MergeRule {
        clock,
        kind: FleetKind::TuneScreen,
        campaign: Vec::new(),
        screen: out,
        merged_p50_ns: None,
        unsharded_p50_ns: None,
    })
}

impl MergeRule {
    /// The rule's outcome in words, one line per shard.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let what = match self.kind {
            FleetKind::Campaign => "each shard against the same launches of one unsharded run",
            FleetKind::TuneScreen => {
                "each knob's effect in its shard against its effect in one unsharded screen"
            }
            FleetKind::Bisect => "each probe's verdict against the same step of `bisect run`",
        };
        let _ = writeln!(
            s,
            "merge rule ({} clock, {}): {what}",
            self.clock.as_str(),
            self.kind.as_str()
        );
        for c in &self.campaign {
            let [a, b] = c.launches;
            let line = match (&c.equality, &c.compare) {
                (Some(e), _) if e.identical() => format!(
                    "IDENTICAL: every one of {} columns of {} launches equal (boot ids included)",
                    e.columns.len(),
                    b - a
                ),
                (Some(e), _) => {
                    let d: Vec<i128> = c.latency_delta_ns.iter().flatten().copied().collect();
                    let range = match (d.iter().min(), d.iter().max()) {
                        (Some(lo), Some(hi)) => format!("latency Δ {lo:+} … {hi:+} ns"),
                        _ => "no latency on both sides".into(),
                    };
                    let mut fields: Vec<&str> =
                        e.differences.iter().map(|d| d.field.as_str()).collect();
                    fields.sort_unstable();
                    fields.dedup();
                    format!(
                        "DIFFERS in {} of {} launches ({range}; columns: {})",
                        e.launches_differing(),
                        b - a,
                        fields.join(", ")
                    )
                }
                (None, Some(o)) => format!("compare: {o}"),
                (None, None) => "not judged".into(),
            };
            let _ = writeln!(s, "  shard {} (launches {a}..{b}): {line}", c.shard);
        }
        for x in &self.screen {
            let pct = |e: &Effect| {
                e.delta_ppm
                    .map(|p| format!("{:+.2} %", p as f64 / 10_000.0))
                    .unwrap_or_else(|| "n/a".into())
            };
            let _ = writeln!(
                s,
                "  knob {}: Δp50 {} in its shard ({}), {} in the unsharded screen ({})",
                x.knob.as_str(),
                pct(&x.sharded),
                x.sharded.verdict_text(),
                pct(&x.unsharded),
                x.unsharded.verdict_text()
            );
        }
        if let (Some(m), Some(u)) = (self.merged_p50_ns, self.unsharded_p50_ns) {
            let _ = writeln!(
                s,
                "  pooled p50 of the shards {m} ns, unsharded {u} ns ({:+} ns)",
                i128::from(m) - i128::from(u)
            );
        }
        s
    }
}
