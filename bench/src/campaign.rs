//! One campaign end to end: run the schedule, turn attempts into rows, gather the host
//! conditions, build `result.json` and write the bundle through `truecold-proof`.

use crate::host::{self, RunFacts, Snapshot};
use crate::launch::{Attempt, End};
use crate::progress::Progress;
use crate::sample::{mark_repeated_boot_ids, to_sample, Observed, RowContext};
use crate::schedule::{self, Launcher, Schedule, ScheduleError, Slot};
use record::{Recorder, Spool, StagingError};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use truecold_proof::bundle::{write_bundle, BundleError, BundleInputs, Written};
use truecold_proof::reports::{HarnessMarks, ReportLine};
use truecold_proof::schema::{
    Configuration, Contract, ContractKind, Environment, Mode, ResultJson, Sample, StopRule,
};
use truecold_proto::kinds::{Backing, ObtainedBacking};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::measure::now_ns;
use truecold_proto::path_io::PathIoError;

/// What a campaign is.
#[derive(Clone, Debug, PartialEq)]
pub struct CampaignSpec {
    pub schedule: Schedule,
    pub contract: ContractKind,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// Requested backing.
    pub backing: Backing,
    /// truecold-vmm's RAM layout (`--ram-layout`).
    pub ram_layout: truecold_proto::kinds::RamLayout,
    /// Per-sample deadline from the latency origin.
    pub deadline_ns: u64,
    /// How long past its deadline the launcher lets a VMM run before killing it. In modes
    /// with intended times, an arrival whose turn comes at or after its intended time plus
    /// the deadline plus this grace (the moment the launcher would kill it at once) is not
    /// launched: see [`expired_attempt`].
    pub kill_grace_ns: u64,
    /// Where strict-ready is stamped (the contract's observer).
    pub observer: truecold_proof::schema::Observer,
    /// The campaign is one arm of an interleaved multi-arm run (an engines campaign, a tune
    /// phase): other arms' launches sit between its rows (`contract.interleaved`).
    pub interleaved: bool,
    /// The fail-fast rule's K (`contract.stop_after`): a sequential campaign stops once K
    /// consecutive launches failed with one error kind; `None`: every launch runs.
    pub stop_after: Option<u64>,
}

impl CampaignSpec {
    /// The schema's mode.
    pub fn mode(&self) -> Mode {
        match self.schedule {
            Schedule::Sequential { n } => Mode::Sequential { count: n },
            Schedule::Burst { n, concurrency } => Mode::Burst {
                count: n,
                concurrency,
            },
            Schedule::OpenLoop { n, interval_ns, .. } => Mode::OpenLoop {
                count: n,
                rate_per_ks: rate_per_ks(interval_ns),
            },
            Schedule::Churn { n, concurrency } => Mode::Churn {
                count: n,
                concurrency,
            },
            Schedule::Sweep {
                n_per_level,
                max_concurrency,
            } => Mode::Sweep {
                max_concurrency,
                per_level: n_per_level,
            },
        }
    }

    /// What every row of this campaign shares.
    pub fn row_context(&self) -> RowContext {
        RowContext {
            contract: self.contract,
            intended: self.mode().has_intended_time(),
            concurrency_override: matches!(self.schedule, Schedule::OpenLoop { .. }).then_some(0),
            mem_bytes: self.mem.bytes(),
            vcpus: u32::from(self.vcpus.get()),
            observer: self.observer,
            engine: truecold_proto::kinds::Engine::Truecold,
            backing: self.backing,
            ram_layout: self.ram_layout,
        }
    }

    /// Short name for directories: `linux-sequential-2vcpu-16384mib`.
    pub fn slug(&self) -> String {
        format!(
            "{}-{}-{}vcpu-{}mib",
            match self.contract {
                ContractKind::Linux => "linux",
                ContractKind::Probe => "probe-floor",
            },
            self.schedule.mode_name(),
            self.vcpus,
            self.mem.mib()
        )
    }
}

/// A finished `truecold run`.
#[derive(Debug)]
pub struct RunOutcome {
    /// The bundle, or (engines campaign) the multi-arm directory.
    pub written: Written,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Engines campaign: each arm's bundle and its own verdict.
    pub arms: Vec<(truecold_proto::kinds::Engine, Written)>,
}

/// Arrivals per 1,000 s for an interval (exact integer arithmetic, rounded to nearest).
pub fn rate_per_ks(interval_ns: u64) -> u64 {
    if interval_ns == 0 {
        return 0;
    }
    ((1_000_000_000_000u128 + u128::from(interval_ns) / 2) / u128::from(interval_ns)) as u64
}

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
    /// Where the rows and evidence are staged as they come ([`record`]): the bundle's
    /// parent directory. `None`: the system's temporary directory.
    pub staging: Option<&'a Path>,
}

impl Harness<'_> {
    /// Nothing before each launch, the process's real CPU clock.
    pub fn plain() -> Harness<'static> {
        Harness {
            before_each: None,
            cpu_ns: &self_cpu_ns,
            staging: None,
        }
    }
}

/// This process's user + system CPU time, ns (`getrusage(RUSAGE_SELF)`: every thread).
pub fn self_cpu_ns() -> u64 {
    let (user, sys) = host::rusage(libc::RUSAGE_SELF);
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
    /// ([`record`]), so what the bundle is computed from is what was written.
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
        let line = report_line(slot.index, &s, attempt);
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

/// Row `index`'s `reports.jsonl` line (`s` is its row): the harness's marks and the VMM's
/// whole output.
pub fn report_line(index: u64, s: &Sample, attempt: &Attempt) -> String {
    let line = ReportLine::new(
        index,
        HarnessMarks {
            intended: s.intended_request_ns,
            request: attempt.request_ns,
            reaped: Some(attempt.reaped_ns),
        },
        &attempt.stdout,
        attempt.stdout_truncated,
    );
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

/// Builds `result.json` (summaries are computed by `truecold-proof`).
pub fn result_json(
    spec: &CampaignSpec,
    ex: &Executed,
    configuration: Configuration,
    artifacts: BTreeMap<String, String>,
    facts: &Environment,
    mut warnings: Vec<String>,
) -> ResultJson {
    warnings.extend(ex.staging_notes.iter().cloned());
    if ex.repeated_boot_ids > 0 {
        warnings.push(format!(
            "CONTRACT VIOLATION: {} sample(s) repeated an earlier guest boot id (not fresh boots)",
            ex.repeated_boot_ids
        ));
    }
    if ex.interrupted {
        warnings.push(format!(
            "interrupted: {} of {} planned attempts were made",
            ex.samples.len(),
            ex.planned
        ));
    }
    if let Some(kind) = &ex.stopped {
        warnings.push(format!(
            "stopped: {} consecutive launches failed with `{kind}`; {} of {} planned attempts \
             were made (--stop-after K changes the count, --keep-going runs them all)",
            spec.stop_after.unwrap_or_default(),
            ex.samples.len(),
            ex.planned
        ));
    }
    // Only for a cap the user chose (`--concurrency`): the default's is far above what a
    // host sustains, and a loop that fell behind gets its own warning (`host::warnings`).
    if let Schedule::OpenLoop { max_in_flight, .. } = spec.schedule {
        if max_in_flight != schedule::DEFAULT_OPEN_LOOP_IN_FLIGHT {
            warnings.push(format!(
            "open loop ran with at most {max_in_flight} samples in flight; arrivals waiting for \
             a free slot count their wait in the latency"
            ));
        }
    }
    if ex.cmdlines.len() > 1 {
        warnings.push(format!(
            "the VMM reported {} different guest command lines",
            ex.cmdlines.len()
        ));
    }
    if ex.expired > 0 {
        warnings.push(format!(
            "{} arrival(s) came up {} ms (deadline + kill grace) or more behind their intended \
             time and were not launched: each is a `deadline` failure, scored at the deadline",
            ex.expired,
            spec.deadline_ns.saturating_add(spec.kill_grace_ns) / 1_000_000
        ));
    }
    if let Some((cpu, wall)) = ex.run_facts.in_window {
        if wall > 0 && cpu as f64 / wall as f64 > host::HARNESS_CPU_SHARE {
            warnings.push(format!(
                "inside the measured windows the harness itself used {:.0}% of a core \
                 (threshold {:.0}%): it competed with the boots it measured",
                cpu as f64 / wall as f64 * 100.0,
                host::HARNESS_CPU_SHARE * 100.0
            ));
        }
    }
    if let Some(dropped) = ex.run_facts.page_cache_dropped {
        let launched = (ex.samples.len() as u64).saturating_sub(ex.expired);
        if !ex.prepare_errors.is_empty() || dropped < launched {
            warnings.push(format!(
                "--drop-caches: the host page cache was dropped before only {dropped} of \
                 {launched} launched samples ({})",
                ex.prepare_errors.join("; ")
            ));
        }
    }
    let expected = spec.backing.expected_obtained();
    if ex.backings.keys().any(|b| *b != expected) {
        warnings.push(format!(
            "memory backing `{}` was requested; the VMM obtained {}",
            spec.backing,
            backing_counts(&ex.backings)
        ));
    }
    let env = host::environment(facts, &ex.before, &ex.after, &ex.run_facts, warnings);
    // The clock is the host kind's (the verifier holds the bundle to it).
    let clock = env.host_kind.clock();
    let mut contract = Contract::new(
        spec.contract,
        spec.observer,
        clock,
        spec.interleaved,
        spec.mode(),
        spec.deadline_ns,
        ex.interrupted || ex.stopped.is_some(),
    );
    contract.stop_after = spec.stop_after;
    contract.stopped = ex.stopped.clone();
    ResultJson::new(contract, configuration, env, artifacts, &ex.samples)
}

/// The configuration's backing: what was asked, and what was obtained when anything was
/// observed (`thp (obtained: thp ×998, thp-advised-none-faulted ×2)`).
pub fn backing_description(asked: Backing, obtained: &BTreeMap<ObtainedBacking, u64>) -> String {
    if obtained.is_empty() {
        asked.to_string()
    } else {
        format!("{asked} (obtained: {})", backing_counts(obtained))
    }
}

/// `thp ×998, thp-advised-none-faulted ×2`.
pub fn backing_counts(b: &BTreeMap<ObtainedBacking, u64>) -> String {
    b.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `results/<UTC timestamp>-<slug>` under `root`.
pub fn default_dest(root: &Path, spec: &CampaignSpec) -> PathBuf {
    let (stamp, _) = crate::clock::utc_now();
    root.join(format!("{stamp}-{}", spec.slug()))
}

/// Where a campaign writing `dest` stages its rows and evidence as they come ([`record`]):
/// `dest`'s parent directory (the bundle's filesystem), `.` for a bare name.
pub fn staging_for(dest: &Path) -> PathBuf {
    dest.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// A fresh, empty staging directory beside `dest` (`.<name>.<tag>-<pid>`, a stale one of this
/// process removed), for a directory that appears by one rename; its parent is created. On
/// error: what was being done, to which path, and why.
pub fn staging_dir(dest: &Path, tag: &str) -> Result<PathBuf, PathIoError> {
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(PathIoError::at("create directory", parent))?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| tag.to_string());
    let tmp = parent.join(format!(".{name}.{tag}-{}", std::process::id()));
    if tmp.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&tmp).map_err(PathIoError::at("remove stale", &tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(PathIoError::at("create directory", &tmp))?;
    Ok(tmp)
}

/// Writes the bundle atomically (creating the parent directory) and returns the verdict.
pub fn write(
    dest: &Path,
    result: &ResultJson,
    samples: &[Sample],
    inputs: &BundleInputs,
) -> Result<Written, BundleError> {
    if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            BundleError::Path(truecold_proto::path_io::PathIoError::at(
                "create the directory",
                parent,
            )(e))
        })?;
    }
    write_bundle(dest, result, samples, inputs)
}

pub mod record;

#[cfg(test)]
mod tests;
