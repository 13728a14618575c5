//! Campaign scheduling: which sample starts when, on how many concurrent lanes, and what its
//! *intended* start time was. Pure logic over a [`Launcher`]; the real launcher spawns
//! `truecold-vmm`, tests plug in a fake one.
//!
//! Intended times by mode:
//! - sequential, churn, sweep (closed loops): the moment a free lane picks the sample up;
//! - burst: `t0` for every sample, so the wait for a free lane counts in the latency;
//! - open loop: `t0 + i·interval`, so the harness's own queueing and lateness count
//!   (coordinated-omission safe: a slow sample never delays the arrival of the next).
//!
//! One closed-loop lane (sequential; churn at concurrency 1; the sweep's level 1) runs on the
//! calling thread: a sample's bookkeeping (`on_done`: parsing its report, building its row,
//! progress output) finishes before the next sample is picked up, so on a small host it never
//! competes with the next boot for a CPU. With more lanes, `on_done` runs on the calling
//! thread while the lanes keep launching, so it overlaps their boots.

use super::clock::sleep_until_ns;
use truecold_proto::measure::now_ns;

/// Longest single sleep of the open-loop dispatcher, so a stop is seen promptly.
const STOP_POLL_NS: u64 = 50_000_000;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Barrier, Mutex};

/// Campaign shapes. Every one launches each sample exactly once, under the same contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `n` boots one after another.
    Sequential { n: u64 },
    /// `n` boots all due at `t0`, at most `concurrency` in flight.
    Burst { n: u64, concurrency: u32 },
    /// `n` arrivals every `interval_ns` from `t0`, at most `max_in_flight` in flight.
    OpenLoop {
        n: u64,
        interval_ns: u64,
        max_in_flight: u32,
    },
    /// `n` create→ready→teardown cycles on `concurrency` closed-loop lanes.
    Churn { n: u64, concurrency: u32 },
    /// Closed loops at C = 1..=`max_concurrency`, `n_per_level` samples each.
    Sweep {
        n_per_level: u64,
        max_concurrency: u32,
    },
}

/// Default in-flight cap of the open loop (`--concurrency` unset).
pub const DEFAULT_OPEN_LOOP_IN_FLIGHT: u32 = 64;

/// Errors in the schedule itself (bad arguments), before anything is launched.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    #[error("the campaign needs at least one sample (-n 0 given)")]
    NoSamples,
    #[error("concurrency must be at least 1")]
    ZeroConcurrency,
    #[error("arrival rate must be a positive, finite number of launches per second (got {0})")]
    BadRate(f64),
    #[error("arrival rate {0}/s is above 1e9/s: the interval would be under 1 ns")]
    RateTooHigh(f64),
    #[error("the open loop's last intended time overflows the clock ({n} samples every {interval_ns} ns)")]
    IntendedOverflow { n: u64, interval_ns: u64 },
    #[error("the sample count overflows ({n_per_level} per level × {levels} levels)")]
    CountOverflow { n_per_level: u64, levels: u32 },
}

/// Interval between arrivals for `rate` launches per second, rounded to the nearest ns.
/// The rate actually used is `1e9 / interval` and is recorded with the campaign.
pub fn interval_for_rate(rate_per_s: f64) -> Result<u64, ScheduleError> {
    if !rate_per_s.is_finite() || rate_per_s <= 0.0 {
        return Err(ScheduleError::BadRate(rate_per_s));
    }
    let interval = (1e9 / rate_per_s).round();
    if interval < 1.0 {
        return Err(ScheduleError::RateTooHigh(rate_per_s));
    }
    Ok(interval as u64)
}

/// Arrivals per 1,000 s for an interval (exact integer arithmetic, rounded to nearest): what
/// the schema records, the inverse of [`interval_for_rate`].
pub fn rate_per_ks(interval_ns: u64) -> u64 {
    if interval_ns == 0 {
        return 0;
    }
    ((1_000_000_000_000u128 + u128::from(interval_ns) / 2) / u128::from(interval_ns)) as u64
}

/// Intended start of open-loop arrival `i`: `t0 + i·interval`, or `None` on overflow.
pub fn intended_ns(t0_ns: u64, i: u64, interval_ns: u64) -> Option<u64> {
    i.checked_mul(interval_ns)?.checked_add(t0_ns)
}

impl Schedule {
    /// Checks the arguments and returns the number of planned samples.
    pub fn validate(&self) -> Result<u64, ScheduleError> {
        let conc = |c: u32| {
            if c == 0 {
                Err(ScheduleError::ZeroConcurrency)
            } else {
                Ok(())
            }
        };
        let nonzero = |n: u64| {
            if n == 0 {
                Err(ScheduleError::NoSamples)
            } else {
                Ok(n)
            }
        };
        match *self {
            Schedule::Sequential { n } => nonzero(n),
            Schedule::Burst { n, concurrency } | Schedule::Churn { n, concurrency } => {
                conc(concurrency)?;
                nonzero(n)
            }
            Schedule::OpenLoop {
                n,
                interval_ns,
                max_in_flight,
            } => {
                conc(max_in_flight)?;
                if interval_ns == 0 {
                    return Err(ScheduleError::RateTooHigh(f64::INFINITY));
                }
                // The last arrival must be representable from any plausible t0 (< 2^62 ns).
                intended_ns(1 << 62, n.saturating_sub(1), interval_ns)
                    .ok_or(ScheduleError::IntendedOverflow { n, interval_ns })?;
                nonzero(n)
            }
            Schedule::Sweep {
                n_per_level,
                max_concurrency,
            } => {
                conc(max_concurrency)?;
                nonzero(n_per_level)?;
                n_per_level.checked_mul(u64::from(max_concurrency)).ok_or(
                    ScheduleError::CountOverflow {
                        n_per_level,
                        levels: max_concurrency,
                    },
                )
            }
        }
    }

    /// Stable name, used in labels and files.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Schedule::Sequential { .. } => "sequential",
            Schedule::Burst { .. } => "burst",
            Schedule::OpenLoop { .. } => "open-loop",
            Schedule::Churn { .. } => "churn",
            Schedule::Sweep { .. } => "sweep",
        }
    }
}

/// One planned launch, handed to the launcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 0-based, unique in the campaign (across sweep levels too).
    pub index: u64,
    /// Concurrency level this sample ran under (the sweep's C; otherwise the campaign's).
    pub level: u32,
    /// When the schedule wanted this sample to start (CLOCK_MONOTONIC ns).
    pub intended_ns: u64,
}

/// Launches one sample. Must not retry: one call, one attempt, whatever happens.
/// `Sync` because concurrent lanes share one launcher.
pub trait Launcher: Sync {
    type Output: Send;
    fn launch(&self, slot: Slot) -> Self::Output;
}

/// Timing of one concurrency level (one for every mode but the sweep).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelRun {
    pub level: u32,
    /// Samples planned at this level.
    pub planned: u64,
    /// Samples actually launched (fewer only when stopped).
    pub launched: u64,
    /// First lane released (CLOCK_MONOTONIC ns).
    pub t_start_ns: u64,
    /// Last sample of the level finished.
    pub t_end_ns: u64,
}

/// How a campaign ran (each attempt went to `on_done` as it finished, and is not kept
/// here: a campaign of any length runs in bounded memory).
#[derive(Debug)]
pub struct CampaignRun {
    /// Attempts made (every level's `launched`).
    pub launched: u64,
    pub levels: Vec<LevelRun>,
    pub planned: u64,
    /// True when the stop flag ended the campaign before every planned sample was launched.
    pub interrupted: bool,
}

/// Runs `schedule` with `launcher`. `stop` is polled before each launch: once set, nothing
/// new starts, in-flight samples finish and are kept. `on_done` sees each finished sample on
/// the calling thread (rows, progress display), in completion order; on a single closed-loop
/// lane it returns before the next sample is launched.
pub fn run<L: Launcher>(
    schedule: &Schedule,
    launcher: &L,
    stop: &AtomicBool,
    on_done: &mut dyn FnMut(&Slot, &L::Output),
) -> Result<CampaignRun, ScheduleError> {
    let planned = schedule.validate()?;
    let mut levels = Vec::new();
    let mut next_index = 0u64;
    let mut lanes = |n: u64, c: u32, mode: Intended| {
        let lr = run_level(n, c, mode, next_index, launcher, stop, on_done);
        next_index += lr.launched;
        lr
    };
    match *schedule {
        Schedule::Sequential { n } => levels.push(lanes(n, 1, Intended::Pickup)),
        Schedule::Churn { n, concurrency } => levels.push(lanes(n, concurrency, Intended::Pickup)),
        Schedule::Burst { n, concurrency } => levels.push(lanes(n, concurrency, Intended::AllAtT0)),
        Schedule::OpenLoop {
            n,
            interval_ns,
            max_in_flight,
        } => levels.push(lanes(n, max_in_flight, Intended::Every(interval_ns))),
        Schedule::Sweep {
            n_per_level,
            max_concurrency,
        } => {
            for c in 1..=max_concurrency {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                levels.push(lanes(n_per_level, c, Intended::Pickup));
            }
        }
    }
    let launched = levels.iter().map(|l| l.launched).sum();
    Ok(CampaignRun {
        launched,
        levels,
        planned,
        interrupted: launched < planned,
    })
}

/// Sleeps until `at`; false when `stop` was set first.
fn sleep_until_or_stop(at: u64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = now_ns();
        if now >= at {
            return true;
        }
        sleep_until_ns(at.min(now.saturating_add(STOP_POLL_NS)));
    }
}

#[derive(Clone, Copy)]
enum Intended {
    /// Closed loop: intended = when a lane picks the sample up.
    Pickup,
    /// Burst: intended = t0.
    AllAtT0,
    /// Open loop: intended = t0 + i·interval.
    Every(u64),
}

/// Runs `n` samples on `c` lanes. Open loop: a dispatcher thread releases slot `i` at its
/// intended time into a queue the lanes drain; the others: lanes claim indices themselves.
#[allow(clippy::too_many_arguments)]
fn run_level<L: Launcher>(
    n: u64,
    c: u32,
    mode: Intended,
    first_index: u64,
    launcher: &L,
    stop: &AtomicBool,
    on_done: &mut dyn FnMut(&Slot, &L::Output),
) -> LevelRun {
    let lanes = c.max(1) as usize;
    if lanes == 1 && matches!(mode, Intended::Pickup) {
        return run_inline(n, first_index, launcher, stop, on_done);
    }
    let claimed = AtomicU64::new(0);
    let t0 = AtomicU64::new(0);
    // Lanes + dispatcher (open loop) + this thread start together, after t0 is set.
    let start = Barrier::new(lanes + 1 + usize::from(matches!(mode, Intended::Every(_))));
    let (done_tx, done_rx) = mpsc::channel::<(Slot, L::Output)>();
    let (job_tx, job_rx) = mpsc::channel::<Slot>();
    let job_rx = Mutex::new(job_rx);
    let mut launched = 0u64;
    let mut t_start_ns = 0;
    std::thread::scope(|scope| {
        for _ in 0..lanes {
            let done_tx = done_tx.clone();
            let (claimed, t0, start, job_rx) = (&claimed, &t0, &start, &job_rx);
            scope.spawn(move || {
                start.wait();
                loop {
                    let slot = match mode {
                        Intended::Every(_) => {
                            // Receive and check the stop flag under one lock, launch
                            // unlocked. Slots leave the queue in index order and the flag
                            // never clears, so once one lane sees the stop every later slot
                            // is dropped too, and every earlier one was already taken for
                            // launch: the launched indices stay a gap-free prefix.
                            let Ok(rx) = job_rx.lock() else { return };
                            match rx.recv() {
                                // A queued arrival released before a stop is not launched.
                                Ok(_) if stop.load(Ordering::SeqCst) => return,
                                Ok(slot) => slot,
                                Err(_) => return, // dispatcher finished
                            }
                        }
                        Intended::Pickup | Intended::AllAtT0 => {
                            if stop.load(Ordering::SeqCst) {
                                return;
                            }
                            let i = claimed.fetch_add(1, Ordering::SeqCst);
                            if i >= n {
                                return;
                            }
                            let intended_ns = match mode {
                                Intended::AllAtT0 => t0.load(Ordering::SeqCst),
                                _ => now_ns(),
                            };
                            Slot {
                                index: first_index + i,
                                level: c,
                                intended_ns,
                            }
                        }
                    };
                    // A claimed index is always launched: indices stay gap-free.
                    let out = launcher.launch(slot);
                    if done_tx.send((slot, out)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        if let Intended::Every(interval) = mode {
            let (t0, start, stop) = (&t0, &start, stop);
            scope.spawn(move || {
                start.wait();
                let t0 = t0.load(Ordering::SeqCst);
                for i in 0..n {
                    // validate() proved the arithmetic cannot overflow for sane t0.
                    let Some(at) = intended_ns(t0, i, interval) else {
                        return;
                    };
                    if !sleep_until_or_stop(at, stop) {
                        return;
                    }
                    let slot = Slot {
                        index: first_index + i,
                        level: c,
                        intended_ns: at,
                    };
                    if job_tx.send(slot).is_err() {
                        return;
                    }
                }
                // Dropping job_tx here lets idle lanes exit.
            });
        } else {
            drop(job_tx);
        }
        t_start_ns = now_ns();
        t0.store(t_start_ns, Ordering::SeqCst);
        start.wait();
        for (slot, out) in done_rx.iter() {
            on_done(&slot, &out);
            launched += 1;
        }
    });
    LevelRun {
        level: c,
        planned: n,
        launched,
        t_start_ns,
        t_end_ns: now_ns(),
    }
}

/// One closed-loop lane on the calling thread: launch, finish the sample's bookkeeping, then
/// pick up the next. Nothing of the harness runs beside a boot but the launcher itself.
fn run_inline<L: Launcher>(
    n: u64,
    first_index: u64,
    launcher: &L,
    stop: &AtomicBool,
    on_done: &mut dyn FnMut(&Slot, &L::Output),
) -> LevelRun {
    let t_start_ns = now_ns();
    let mut launched = 0u64;
    while launched < n && !stop.load(Ordering::SeqCst) {
        let slot = Slot {
            index: first_index + launched,
            level: 1,
            intended_ns: now_ns(),
        };
        let out = launcher.launch(slot);
        on_done(&slot, &out);
        launched += 1;
    }
    LevelRun {
        level: 1,
        planned: n,
        launched,
        t_start_ns,
        t_end_ns: now_ns(),
    }
}

#[cfg(test)]
mod tests;
