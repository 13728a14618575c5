//! One campaign run: the schedule driven through the launcher, each attempt turned into its
//! row and `reports.jsonl` line as it finishes and staged ([`super::record`]), the harness's
//! own CPU inside the measured windows accounted, the fail-fast rule applied.

use super::process_launcher::{Attempt, End};
use super::record::{Recorder, Spool, StagingError};
use super::sample::{mark_repeated_boot_ids, to_sample, Observed};
use super::schedule::{self, Launcher, Schedule, ScheduleError, Slot};
use super::spec::CampaignSpec;
use crate::checks::environment::RunFacts;
use crate::checks::snapshot::{self, Snapshot};
use crate::terminal::progress::Progress;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use truecold_nested::parallel::ParallelClock;
use truecold_proof::reports::{HarnessMarks, ReportLine};
use truecold_proof::schema::{Sample, StopRule};
use truecold_proto::kinds::ObtainedBacking;
use truecold_proto::measure::now_ns;
use truecold_proto::parallel::Reading;

/// Turns one attempt's stdout into what the VMM observed, or why it could not.
pub type Observe<'a> = dyn Fn(&Attempt) -> Result<Observed, String> + 'a;

/// Work done right before each launch, outside the sample's measured window
/// (`--drop-caches`).
pub type BeforeEach<'a> = dyn Fn() -> std::io::Result<()> + Sync + 'a;

/// What the harness does around the launcher, and the clock it accounts its CPU with.
pub struct Harness<'a> {
    /// Run before each launch, outside its measured window (`--drop-caches`: `sync` and
    /// drop the host page cache). `None`: nothing.
    pub before_each: Option<&'a BeforeEach<'a>>,
    /// The harness process's CPU time so far (user + system, all threads), ns:
    /// [`self_cpu_ns`] in a campaign, a fake clock in tests.
    pub cpu_ns: &'a (dyn Fn() -> u64 + Sync),
    /// Where the rows and evidence are staged as they come ([`super::record`]): the bundle's
    /// parent directory. `None`: the system's temporary directory.
    pub staging: Option<&'a Path>,
    /// The nested harness's parallel clock, read after each success ([`super::parallel`]);
    /// `None` on any other host.
    pub parallel: Option<ParallelClock>,
}

impl Harness<'_> {
    /// Nothing before each launch, the process's real CPU clock.
    pub fn plain() -> Harness<'static> {
        Harness {
            before_each: None,
            cpu_ns: &self_cpu_ns,
            staging: None,
            parallel: None,
        }
    }
}

/// This process's user + system CPU time, ns (`getrusage(RUSAGE_SELF)`: every thread).
pub fn self_cpu_ns() -> u64 {
    let (user, sys) = snapshot::rusage(libc::RUSAGE_SELF);
    user.saturating_add(sys)
}

/// The union of the measured windows (each launcher call: its spawn preparation, request
/// stamp, spawn, watch and reap) and the harness's CPU time inside it. Overlapping windows (concurrent lanes) count
/// once: the CPU clock is read when the first window opens and when the last one closes.
struct Windows<'a> {
    cpu_ns: &'a (dyn Fn() -> u64 + Sync),
    state: Mutex<WindowState>,
}

#[derive(Default)]
struct WindowState {
    open: u32,
    opened_cpu_ns: u64,
    opened_at_ns: u64,
    cpu_ns: u64,
    wall_ns: u64,
}

impl Windows<'_> {
    fn open(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.open == 0 {
            st.opened_at_ns = now_ns();
            st.opened_cpu_ns = (self.cpu_ns)();
        }
        st.open += 1;
    }

    fn close(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.open = st.open.saturating_sub(1);
        if st.open == 0 {
            let cpu = (self.cpu_ns)().saturating_sub(st.opened_cpu_ns);
            let wall = now_ns().saturating_sub(st.opened_at_ns);
            st.cpu_ns = st.cpu_ns.saturating_add(cpu);
            st.wall_ns = st.wall_ns.saturating_add(wall);
        }
    }

    fn totals(&self) -> (u64, u64) {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (st.cpu_ns, st.wall_ns)
    }
}

/// The launcher as a campaign runs it: expired arrivals are not launched, `before_each` runs
/// outside the window, and the window's harness CPU is accounted.
struct Harnessed<'a, L> {
    inner: &'a L,
    /// Lateness behind the intended time from which an arrival is not launched (modes with
    /// intended times only).
    expire_after_ns: Option<u64>,
    deadline_ns: u64,
    kill_grace_ns: u64,
    before_each: Option<&'a BeforeEach<'a>>,
    windows: Windows<'a>,
    /// Indices of the arrivals that were not launched and whose rows are not yet built
    /// (each is removed as its row is: at most the arrivals in flight).
    expired: Mutex<BTreeSet<u64>>,
    /// `before_each` outcomes: successes, and the first few errors.
    prepared: Mutex<(u64, Vec<String>)>,
}

impl<L: Launcher<Output = Attempt>> Launcher for Harnessed<'_, L> {
    type Output = Attempt;

    fn launch(&self, slot: Slot) -> Attempt {
        if let Some(limit) = self.expire_after_ns {
            let now = now_ns();
            if now.saturating_sub(slot.intended_ns) >= limit {
                self.expired
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(slot.index);
                return expired_attempt(slot, now, self.deadline_ns);
            }
        }
        if let Some(prep) = self.before_each {
            let r = prep();
            let mut p = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok(()) => p.0 += 1,
                Err(e) if p.1.len() < 3 => p.1.push(format!("before sample {}: {e}", slot.index)),
                Err(_) => {}
            }
        }
        self.windows.open();
        let a = self.inner.launch(slot);
        self.windows.close();
        a
    }
}

/// The row's attempt for an arrival whose turn came at `now_ns`, at or after its intended
/// time + deadline + kill grace: a process spawned now would be killed at its first look, so
/// none is. The row is a `deadline` failure like any other (scored at the deadline); its
/// request stamp is the moment its turn came, so its `queue` stage shows how late that was.
pub fn expired_attempt(slot: Slot, now_ns: u64, deadline_ns: u64) -> Attempt {
    Attempt {
        slot,
        request_ns: now_ns,
        reaped_ns: now_ns,
        deadline_ns,
        end: End::KilledAtDeadline,
        stdout: Vec::new(),
        stdout_truncated: false,
        stderr_tail: String::new(),
    }
}

/// The detail of an arrival that was not launched.
pub fn expired_detail(a: &Attempt, kill_grace_ns: u64) -> String {
    format!(
        "not launched: its turn came {} µs after its intended time, past the {} ms deadline \
         + {} ms kill grace; no VMM process was spawned",
        a.request_ns.saturating_sub(a.slot.intended_ns) / 1000,
        a.deadline_ns / 1_000_000,
        kill_grace_ns / 1_000_000
    )
}

/// A campaign that ran.
#[derive(Debug)]
pub struct Executed {
    /// Every attempt, in index order: read back from the staged `samples.csv` rows
    /// ([`super::record`]), so what the bundle is computed from is what was written.
    pub samples: Vec<Sample>,
    /// `reports.jsonl`: each attempt's harness marks and VMM output, one line per row in
    /// index order (the row's evidence; `truecold_proof::reports`), in its staging file.
    pub reports: Spool,
    /// Where staged rows went when a staging file did not take them (bundle warnings).
    pub staging_notes: Vec<String>,
    pub planned: u64,
    /// Ctrl-C ended the campaign before every planned launch was made.
    pub interrupted: bool,
    /// The fail-fast rule ended it: the error kind of the last `spec.stop_after` launches.
    pub stopped: Option<String>,
    pub levels: Vec<schedule::LevelRun>,
    pub before: Snapshot,
    pub after: Snapshot,
    pub run_facts: RunFacts,
    /// Samples marked `repeated_boot_id` (contract violations).
    pub repeated_boot_ids: usize,
    /// Distinct guest command lines the VMM reported.
    pub cmdlines: BTreeSet<String>,
    /// Backing the VMM reported it obtained → number of samples.
    pub backings: BTreeMap<ObtainedBacking, u64>,
    /// Arrivals not launched because their turn came past deadline + kill grace.
    pub expired: u64,
    /// The first few errors of `before_each` (`--drop-caches`); how often it succeeded is
    /// `run_facts.page_cache_dropped`.
    pub prepare_errors: Vec<String>,
}

/// Why [`execute`] could not run the campaign or read its staged rows back.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error("scheduling")]
    Schedule(#[from] ScheduleError),
    #[error("the campaign's staged rows")]
    Staging(#[from] StagingError),
}

/// Runs the campaign. `stop` ends it early (Ctrl-C): the result is then marked interrupted
/// and holds every attempt made. Each sample's row is built and shown (`progress`) as soon as
/// it finishes; on one closed-loop lane that happens before the next request stamp.
pub fn execute<L, W>(
    spec: &CampaignSpec,
    launcher: &L,
    observe: &Observe<'_>,
    stop: &AtomicBool,
    progress: &mut Progress<W>,
    harness: &Harness<'_>,
) -> Result<Executed, ExecuteError>
where
    L: Launcher<Output = Attempt>,
    W: Write,
{
    let ctx = spec.row_context();
    let staging = harness
        .staging
        .map_or_else(std::env::temp_dir, Path::to_path_buf);
    let mut recorder = Recorder::new(&staging)?;
    let mut expired = 0u64;
    let mut max_start_lag_ns: Option<u64> = None;
    let mut cmdlines = BTreeSet::new();
    let mut backings = BTreeMap::new();
    let wrapped = Harnessed {
        inner: launcher,
        expire_after_ns: ctx
            .intended
            .then(|| spec.deadline_ns.saturating_add(spec.kill_grace_ns)),
        deadline_ns: spec.deadline_ns,
        kill_grace_ns: spec.kill_grace_ns,
        before_each: harness.before_each,
        windows: Windows {
            cpu_ns: harness.cpu_ns,
            state: Mutex::new(WindowState::default()),
        },
        expired: Mutex::new(BTreeSet::new()),
        prepared: Mutex::new((0, Vec::new())),
    };
    // The fail-fast rule ([`StopRule`]) halts the schedule through a flag of its own, so that
    // a stop it made is told from a Ctrl-C (whose flag it copies after every launch: the one
    // lane of a sequential campaign looks at the flag only between launches).
    let rule = match (spec.stop_after, spec.schedule) {
        (Some(after), Schedule::Sequential { n }) => Some((StopRule { after }, n)),
        _ => None,
    };
    let halt = AtomicBool::new(false);
    let flag = if rule.is_some() { &halt } else { stop };
    let mut streak = (String::new(), 0u64);
    let mut stopped: Option<String> = None;
    let before = Snapshot::take();
    let run = schedule::run(&spec.schedule, &wrapped, flag, &mut |slot, attempt| {
        let was_expired = wrapped
            .expired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&slot.index);
        expired += u64::from(was_expired);
        let (observed, why) = if was_expired {
            (None, None)
        } else {
            match observe(attempt) {
                Ok(o) => (Some(o), None),
                Err(e) => (None, Some(e)),
            }
        };
        if let Some(o) = &observed {
            cmdlines.extend(o.cmdline.clone());
            if let Some(b) = &o.backing {
                *backings.entry(*b).or_insert(0) += 1;
            }
        }
        let mut s = to_sample(attempt, observed.as_ref(), why.as_deref(), &ctx);
        let parallel = super::parallel::apply(harness.parallel.as_ref(), &mut s);
        let line = report_line(slot.index, &s, attempt, parallel);
        if let Some(i) = s.intended_request_ns.filter(|_| ctx.intended) {
            let lag = s.actual_request_ns.saturating_sub(i);
            max_start_lag_ns = Some(max_start_lag_ns.map_or(lag, |m| m.max(lag)));
        }
        if was_expired {
            s.error_detail = expired_detail(attempt, wrapped.kill_grace_ns);
        }
        progress.record(s.ok, s.latency_ns);
        if let Some((r, planned)) = &rule {
            if stop.load(Ordering::SeqCst) {
                halt.store(true, Ordering::SeqCst);
            }
            // Only a stop that leaves launches unmade is one (after the last planned launch
            // there is nothing to stop).
            if stopped.is_none() && r.fires(&mut streak, &s.error_kind) && slot.index + 1 < *planned
            {
                stopped = Some(s.error_kind.clone());
                halt.store(true, Ordering::SeqCst);
            }
        }
        recorder.record(s, line);
    })?;
    let after = Snapshot::take_after(&before);
    progress.finish();
    let recorded = recorder.finish()?;
    let mut samples = recorded.samples;
    let repeated_boot_ids = mark_repeated_boot_ids(&mut samples);
    let max_start_lag_ns = ctx.intended.then(|| max_start_lag_ns.unwrap_or(0));
    let run_facts = RunFacts {
        max_start_lag_ns,
        interval_ns: match spec.schedule {
            Schedule::OpenLoop { interval_ns, .. } => Some(interval_ns),
            _ => None,
        },
        lanes: run.levels.iter().map(|l| l.level).max().unwrap_or(1),
        in_window: Some(wrapped.windows.totals()),
        page_cache_dropped: harness
            .before_each
            .map(|_| wrapped.prepared.lock().map(|p| p.0).unwrap_or(0)),
    };
    let (_, prepare_errors) = wrapped
        .prepared
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    Ok(Executed {
        samples,
        reports: recorded.reports,
        staging_notes: recorded.notes,
        planned: run.planned,
        interrupted: run.interrupted && stopped.is_none(),
        stopped,
        levels: run.levels,
        before,
        after,
        run_facts,
        repeated_boot_ids,
        cmdlines,
        backings,
        expired,
        prepare_errors,
    })
}

/// Row `index`'s `reports.jsonl` line (`s` is its row): the harness's marks, the VMM's
/// whole output and the parallel clock's reading (or why there is none).
pub fn report_line(
    index: u64,
    s: &Sample,
    attempt: &Attempt,
    (parallel, parallel_missing): (Option<Reading>, Option<String>),
) -> String {
    let line = ReportLine {
        parallel,
        parallel_missing,
        ..ReportLine::new(
            index,
            HarnessMarks {
                intended: s.intended_request_ns,
                request: attempt.request_ns,
                reaped: Some(attempt.reaped_ns),
            },
            &attempt.stdout,
            attempt.stdout_truncated,
        )
    };
    line.to_line().unwrap_or_else(|e| {
        // Only numbers and strings remain, which always serialize: the line still says
        // why the VMM's output is missing from it.
        ReportLine {
            vmm: None,
            vmm_missing: Some(format!("the VMM's report did not re-serialize: {e}")),
            ..line.clone()
        }
        .to_line()
        .unwrap_or_default()
    })
}
