//! The rounds of an engines campaign: every `(round, arm)` of the seeded order, one launch at
//! a time through an [`ArmLauncher`], each row built, shown and staged as it finishes;
//! what each arm adds up to ([`ArmRun`], [`ArmTally`]).

use super::arm_rows::{observed, report_line, row};
use super::engines_error::EnginesError;
use super::engines_spec::EnginesSpec;
use crate::campaign::execute::BeforeEach;
use crate::campaign::record::{Recorder, Spool};
use crate::campaign::sample::{mark_repeated_across_arms, mark_repeated_boot_ids};
use crate::checks::snapshot::Snapshot;
use crate::terminal::progress::Progress;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use truecold_engine::driver::Launched;
use truecold_engine::Launch;
use truecold_nested::parallel::ParallelClock;
use truecold_proof::reports::ReportLine;
use truecold_proof::schema::Sample;
use truecold_proto::kinds::{Engine, ErrorKind, ObtainedBacking};
use truecold_proto::limits::GuestMem;
use truecold_proto::measure::now_ns;
use truecold_proto::report::EngineRun;

/// A row maker: one reaped launch → its row and evidence ([`row`] with the arm's context).
pub type RowOf<'a> = dyn Fn(&Launched) -> (Sample, EngineRun) + 'a;

/// One launch of arm `arm` (index into the spec's arms) in `round`, and its row: `row`
/// classifies the reaped launch; a launcher may add what it did itself (the parity
/// contract's lifecycle, tap and cleanup).
pub trait ArmLauncher {
    fn launch(&self, arm: usize, round: u64, row: &RowOf<'_>) -> (Launched, Sample, EngineRun);
}

/// The real launcher: one [`truecold_engine::driver::launch_once`] per call.
pub struct DriverLauncher<'a> {
    pub launches: &'a [Launch],
    pub mem: GuestMem,
    pub deadline_ns: u64,
    pub kill_grace_ns: u64,
}

impl ArmLauncher for DriverLauncher<'_> {
    fn launch(&self, arm: usize, _round: u64, row: &RowOf<'_>) -> (Launched, Sample, EngineRun) {
        let l = truecold_engine::driver::launch_once(
            &self.launches[arm],
            self.mem,
            self.deadline_ns,
            self.kill_grace_ns,
        );
        let (s, run) = row(&l);
        (l, s, run)
    }
}

/// One arm as it ran.
#[derive(Debug)]
pub struct ArmRun {
    /// Its rows in index order, read back from their staging file ([`crate::campaign::record`]).
    pub samples: Vec<Sample>,
    /// Its `reports.jsonl`, staged as the launches finished: one line per row, each engine
    /// run's outcome what its row says.
    pub reports: Spool,
    /// Where staged rows went when a staging file did not take them (bundle warnings).
    pub staging_notes: Vec<String>,
    pub tally: ArmTally,
    pub repeated_boot_ids: usize,
}

/// What an arm's launches add up to as they run (bounded: no per-launch state).
#[derive(Debug, Default)]
pub struct ArmTally {
    pub cmdlines: BTreeSet<String>,
    pub backings: BTreeMap<ObtainedBacking, u64>,
    /// The harness's CPU and wall time inside this arm's launches, ns.
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub t_start_ns: Option<u64>,
    pub t_end_ns: u64,
    /// `--drop-caches`: how often the cache was dropped before this arm's launches (`None`:
    /// not asked), and the first errors.
    pub dropped: Option<u64>,
    pub prepare_errors: Vec<String>,
    /// Launches made.
    pub launched: u64,
}

impl ArmRun {
    /// Every engine run of `reports` (tests; lines that do not parse are left out).
    pub fn runs(&self) -> Vec<EngineRun> {
        let bytes = self.reports.to_vec().unwrap_or_default();
        bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<ReportLine>(l).ok())
            .filter_map(|r| r.engine)
            .collect()
    }
}

/// The campaign as it ran.
#[derive(Debug)]
pub struct EnginesRun {
    pub arms: Vec<ArmRun>,
    /// What was launched, in order.
    pub order: Vec<(u64, Engine)>,
    pub interrupted: bool,
    pub before: Snapshot,
    pub after: Snapshot,
}

/// Runs the campaign: every `(round, arm)` of the order, one launch at a time, each row
/// built and shown as it finishes and staged in `staging` (the bundle's parent directory)
/// with its evidence. `stop` ends it before the next launch (marked interrupted).
/// `before_each` runs before each request stamp, outside the window.
#[allow(clippy::too_many_arguments)]
pub fn execute<W: Write>(
    spec: &EnginesSpec,
    guest_cmdlines: &[String],
    launcher: &dyn ArmLauncher,
    stop: &AtomicBool,
    progress: &mut Progress<W>,
    before_each: Option<&BeforeEach<'_>>,
    cpu_ns: &dyn Fn() -> u64,
    staging: &Path,
    parallel: Option<&ParallelClock>,
) -> Result<EnginesRun, EnginesError> {
    let mut tallies: Vec<ArmTally> = spec.arms.iter().map(|_| ArmTally::default()).collect();
    let mut recorders: Vec<Recorder> = spec
        .arms
        .iter()
        .map(|_| Recorder::new(staging))
        .collect::<Result<_, _>>()?;
    let mut order = Vec::new();
    let mut interrupted = false;
    let before = Snapshot::take();
    for (round, i) in truecold_engine::order(spec.arms.len(), spec.rounds, spec.seed) {
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        let engine = spec.arms[i];
        let arm = &mut tallies[i];
        if let Some(prep) = before_each {
            let n = arm.dropped.get_or_insert(0);
            match prep() {
                Ok(()) => *n += 1,
                Err(e) if arm.prepare_errors.len() < 3 => arm
                    .prepare_errors
                    .push(format!("before round {round}: {e}")),
                Err(_) => {}
            }
        }
        let cmdline = guest_cmdlines.get(i).map(String::as_str).unwrap_or("");
        let ctx = spec.row_context(engine);
        let (c0, t0) = (cpu_ns(), now_ns());
        let (l, mut s, mut run) = launcher.launch(i, round, &|l| {
            row(l, round, &ctx, spec.deadline_ns, cmdline)
        });
        let (c1, t1) = (cpu_ns(), now_ns());
        arm.cpu_ns = arm.cpu_ns.saturating_add(c1.saturating_sub(c0));
        arm.wall_ns = arm.wall_ns.saturating_add(t1.saturating_sub(t0));
        arm.t_start_ns.get_or_insert(l.request_ns);
        arm.t_end_ns = l.reaped_ns;
        arm.launched += 1;
        let o = observed(&l, cmdline);
        arm.cmdlines.extend(o.cmdline);
        if let Some(b) = o.backing {
            *arm.backings.entry(b).or_insert(0) += 1;
        }
        progress.record(s.ok, s.latency_ns);
        // A row's evidence says what the row says.
        agree(&s, &mut run);
        let reading = crate::campaign::parallel::apply(parallel, &mut s);
        let line = report_line(&s, &run, reading);
        recorders[i].record(s, line);
        order.push((round, engine));
    }
    let after = Snapshot::take_after(&before);
    progress.finish();
    let mut arms = Vec::new();
    for (rec, tally) in recorders.into_iter().zip(tallies) {
        let r = rec.finish()?;
        arms.push(ArmRun {
            samples: r.samples,
            reports: r.reports,
            staging_notes: r.notes,
            tally,
            repeated_boot_ids: 0,
        });
    }
    for a in arms.iter_mut() {
        a.repeated_boot_ids = mark_repeated_boot_ids(&mut a.samples);
    }
    let names: Vec<&str> = spec.arms.iter().map(|e| e.as_str()).collect();
    let cross = {
        let mut rows: Vec<&mut [Sample]> =
            arms.iter_mut().map(|a| a.samples.as_mut_slice()).collect();
        mark_repeated_across_arms(&names, &mut rows)
    };
    for (a, n) in arms.iter_mut().zip(cross) {
        a.repeated_boot_ids += n;
    }
    // The rows marked here (repeated boot ids): their evidence is made to agree.
    for a in arms.iter_mut() {
        if a.repeated_boot_ids == 0 {
            continue;
        }
        let marked: BTreeMap<u64, &Sample> = a
            .samples
            .iter()
            .filter(|s| s.error_kind == ErrorKind::RepeatedBootId.as_string())
            .map(|s| (s.index, s))
            .collect();
        a.reports = a.reports.rewrite_lines(staging, |l| {
            let mut line: ReportLine = serde_json::from_slice(l).ok()?;
            let s = marked.get(&line.index)?;
            let run = line.engine.as_mut()?;
            agree(s, run);
            line.to_line().ok().map(String::into_bytes)
        })?;
    }
    Ok(EnginesRun {
        arms,
        order,
        interrupted,
        before,
        after,
    })
}

/// A failed row's engine run says why it failed (the row's classification).
fn agree(s: &Sample, r: &mut EngineRun) {
    if !s.ok {
        r.outcome.ok = false;
        r.outcome.failure_kind = Some(s.error_kind.clone());
        r.outcome.failure = Some(s.error_detail.clone());
    }
}
