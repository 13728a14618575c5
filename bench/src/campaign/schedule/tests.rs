use super::*;
use std::sync::atomic::AtomicU32;
use std::sync::{Condvar, Mutex};

/// What the fake launcher saw for one launch.
#[derive(Debug, Clone, Copy)]
struct Seen {
    slot: Slot,
    in_flight_at_start: u32,
}

/// A launcher that launches nothing: it records the slot and how many launches overlapped.
#[derive(Default)]
struct Fake<'a> {
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
    launches: AtomicU64,
    /// Set the stop flag at this many launches (0 = never).
    stop_after: u64,
    stop: Option<&'a AtomicBool>,
    /// Rendezvous: each launch waits (without a time limit: only logic can fail the test)
    /// until this many are in flight together.
    gather: Option<(Mutex<u32>, Condvar, u32)>,
}

impl Launcher for Fake<'_> {
    type Output = Seen;
    fn launch(&self, slot: Slot) -> Seen {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let k = self.launches.fetch_add(1, Ordering::SeqCst) + 1;
        if let (Some(stop), true) = (self.stop, self.stop_after != 0 && k >= self.stop_after) {
            stop.store(true, Ordering::SeqCst);
        }
        if let Some((m, cv, want)) = &self.gather {
            let mut g = m.lock().unwrap();
            *g += 1;
            cv.notify_all();
            let target = (*g).div_ceil(*want) * *want;
            drop(cv.wait_while(g, |g| *g < target).unwrap());
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Seen {
            slot,
            in_flight_at_start: now,
        }
    }
}

/// A run and every attempt `on_done` saw, in index order (the schedule keeps none).
struct Ran {
    attempts: Vec<(Slot, Seen)>,
    levels: Vec<LevelRun>,
    planned: u64,
    interrupted: bool,
}

fn run_fake(s: Schedule, f: &Fake, stop: &AtomicBool) -> Ran {
    let mut attempts = Vec::new();
    let r = run(&s, f, stop, &mut |slot, seen| attempts.push((*slot, *seen))).unwrap();
    assert_eq!(
        r.launched,
        attempts.len() as u64,
        "on_done sees every attempt once"
    );
    attempts.sort_by_key(|(s, _)| s.index);
    Ran {
        attempts,
        levels: r.levels,
        planned: r.planned,
        interrupted: r.interrupted,
    }
}

fn assert_indices_exactly(r: &Ran, n: u64) {
    let idx: Vec<u64> = r.attempts.iter().map(|(s, _)| s.index).collect();
    assert_eq!(
        idx,
        (0..n).collect::<Vec<_>>(),
        "each index exactly once, in order"
    );
    for (s, o) in &r.attempts {
        assert_eq!(*s, o.slot, "the attempt is paired with its own slot");
    }
}

#[test]
fn sequential_runs_each_index_once_never_overlapping() {
    let f = Fake::default();
    let r = run_fake(Schedule::Sequential { n: 25 }, &f, &AtomicBool::new(false));
    assert_indices_exactly(&r, 25);
    assert_eq!(f.max_in_flight.load(Ordering::SeqCst), 1);
    assert!(!r.interrupted);
    assert_eq!(r.levels.len(), 1);
    assert_eq!(r.levels[0].launched, 25);
    // Closed loop: intended times are pickup times, so they never decrease.
    let t: Vec<u64> = r.attempts.iter().map(|(s, _)| s.intended_ns).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    assert!(t[0] >= r.levels[0].t_start_ns);
}

#[test]
fn burst_is_due_at_t0_and_reaches_but_never_exceeds_concurrency() {
    let f = Fake {
        gather: Some((Mutex::new(0), Condvar::new(), 4)),
        ..Fake::default()
    };
    let r = run_fake(
        Schedule::Burst {
            n: 12,
            concurrency: 4,
        },
        &f,
        &AtomicBool::new(false),
    );
    assert_indices_exactly(&r, 12);
    assert_eq!(f.max_in_flight.load(Ordering::SeqCst), 4);
    let t0 = r.levels[0].t_start_ns;
    assert!(r.attempts.iter().all(|(s, _)| s.intended_ns == t0));
    assert!(r.attempts.iter().all(|(s, _)| s.level == 4));
}

#[test]
fn open_loop_intended_times_sit_on_the_grid() {
    let f = Fake::default();
    let interval_ns = 200_000; // 5000/s
    let r = run_fake(
        Schedule::OpenLoop {
            n: 30,
            interval_ns,
            max_in_flight: 3,
        },
        &f,
        &AtomicBool::new(false),
    );
    assert_indices_exactly(&r, 30);
    let t0 = r.levels[0].t_start_ns;
    for (s, _) in &r.attempts {
        assert_eq!(s.intended_ns, t0 + s.index * interval_ns);
    }
    assert!(f.max_in_flight.load(Ordering::SeqCst) <= 3);
}

#[test]
fn intended_time_arithmetic() {
    assert_eq!(interval_for_rate(1.0), Ok(1_000_000_000));
    assert_eq!(interval_for_rate(3.0), Ok(333_333_333));
    assert_eq!(interval_for_rate(0.5), Ok(2_000_000_000));
    assert_eq!(interval_for_rate(1e9), Ok(1));
    assert_eq!(interval_for_rate(0.0), Err(ScheduleError::BadRate(0.0)));
    assert!(matches!(
        interval_for_rate(f64::NAN),
        Err(ScheduleError::BadRate(_))
    ));
    assert_eq!(interval_for_rate(-2.0), Err(ScheduleError::BadRate(-2.0)));
    assert_eq!(interval_for_rate(3e9), Err(ScheduleError::RateTooHigh(3e9)));
    assert_eq!(intended_ns(1000, 0, 7), Some(1000));
    assert_eq!(intended_ns(1000, 3, 7), Some(1021));
    assert_eq!(intended_ns(u64::MAX - 5, 1, 7), None);
    assert_eq!(intended_ns(0, u64::MAX, 2), None);
    // The grid does not accumulate rounding: arrival i is exactly i intervals after t0.
    let iv = interval_for_rate(3.0).unwrap();
    assert_eq!(intended_ns(5, 999, iv), Some(5 + 999 * 333_333_333));
    assert_eq!(
        Schedule::OpenLoop {
            n: u64::MAX,
            interval_ns: 10,
            max_in_flight: 1
        }
        .validate(),
        Err(ScheduleError::IntendedOverflow {
            n: u64::MAX,
            interval_ns: 10
        })
    );
}

#[test]
fn bad_schedules_are_typed_errors() {
    assert_eq!(
        Schedule::Sequential { n: 0 }.validate(),
        Err(ScheduleError::NoSamples)
    );
    assert_eq!(
        Schedule::Burst {
            n: 3,
            concurrency: 0
        }
        .validate(),
        Err(ScheduleError::ZeroConcurrency)
    );
    assert_eq!(
        Schedule::Sweep {
            n_per_level: u64::MAX,
            max_concurrency: 2
        }
        .validate(),
        Err(ScheduleError::CountOverflow {
            n_per_level: u64::MAX,
            levels: 2
        })
    );
    assert_eq!(
        Schedule::Sweep {
            n_per_level: 5,
            max_concurrency: 3
        }
        .validate(),
        Ok(15)
    );
}

#[test]
fn sweep_runs_every_level_with_its_own_concurrency() {
    let f = Fake::default();
    let r = run_fake(
        Schedule::Sweep {
            n_per_level: 6,
            max_concurrency: 3,
        },
        &f,
        &AtomicBool::new(false),
    );
    assert_indices_exactly(&r, 18);
    assert_eq!(
        r.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for l in &r.levels {
        assert_eq!(l.launched, 6);
        assert!(l.t_end_ns >= l.t_start_ns);
    }
    for (s, o) in &r.attempts {
        assert_eq!(s.level, (s.index / 6 + 1) as u32);
        assert!(o.in_flight_at_start <= s.level);
    }
}

#[test]
fn churn_keeps_lanes_busy_up_to_concurrency() {
    let f = Fake::default();
    let r = run_fake(
        Schedule::Churn {
            n: 40,
            concurrency: 2,
        },
        &f,
        &AtomicBool::new(false),
    );
    assert_indices_exactly(&r, 40);
    assert!(f.max_in_flight.load(Ordering::SeqCst) <= 2);
}

#[test]
fn stop_flag_ends_launching_but_keeps_in_flight_samples() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let f = Fake {
        stop: Some(&STOP),
        stop_after: 5,
        ..Fake::default()
    };
    let r = run_fake(
        Schedule::Churn {
            n: 1000,
            concurrency: 2,
        },
        &f,
        &STOP,
    );
    assert!(r.interrupted);
    let n = r.attempts.len() as u64;
    // The 5th launch set the flag; at most one more lane was already past its check.
    assert!((5..=6).contains(&n), "launched {n}");
    // Every launch that happened is in the dataset, no gaps, no duplicates.
    assert_eq!(f.launches.load(Ordering::SeqCst), n);
    let idx: Vec<u64> = r.attempts.iter().map(|(s, _)| s.index).collect();
    let mut dedup = idx.clone();
    dedup.dedup();
    assert_eq!(idx, dedup);
    assert_eq!(r.planned, 1000);
}

#[test]
fn stop_flag_ends_an_open_loop_and_a_sweep() {
    static STOP_OL: AtomicBool = AtomicBool::new(false);
    let f = Fake {
        stop: Some(&STOP_OL),
        stop_after: 3,
        ..Fake::default()
    };
    let r = run_fake(
        Schedule::OpenLoop {
            n: 1000,
            interval_ns: 1_000_000,
            max_in_flight: 1,
        },
        &f,
        &STOP_OL,
    );
    assert!(r.interrupted);
    assert_eq!(f.launches.load(Ordering::SeqCst), r.attempts.len() as u64);
    assert!(r.attempts.len() >= 3 && r.attempts.len() < 1000);

    static STOP_SW: AtomicBool = AtomicBool::new(false);
    let f = Fake {
        stop: Some(&STOP_SW),
        stop_after: 4,
        ..Fake::default()
    };
    let r = run_fake(
        Schedule::Sweep {
            n_per_level: 3,
            max_concurrency: 5,
        },
        &f,
        &STOP_SW,
    );
    assert!(r.interrupted);
    assert!(r.levels.len() <= 2, "no level starts after the stop");
    assert_eq!(f.launches.load(Ordering::SeqCst), r.attempts.len() as u64);
}

/// A stop can land while a lane holds a slot it has not launched yet: every slot handed out
/// before the stop is launched, none after it, so the indices stay 0..k without a gap.
#[test]
fn open_loop_stopped_mid_run_keeps_indices_contiguous() {
    for round in 0..300u64 {
        let stop = AtomicBool::new(false);
        let f = Fake {
            stop: Some(&stop),
            stop_after: 2 + round % 13,
            ..Fake::default()
        };
        let r = run_fake(
            Schedule::OpenLoop {
                n: 200,
                interval_ns: 1,
                max_in_flight: 6,
            },
            &f,
            &stop,
        );
        let idx: Vec<u64> = r.attempts.iter().map(|(s, _)| s.index).collect();
        let k = idx.len() as u64;
        assert_eq!(
            idx,
            (0..k).collect::<Vec<_>>(),
            "round {round}: a gap in the launched indices"
        );
        assert_eq!(f.launches.load(Ordering::SeqCst), k);
        assert!(k >= f.stop_after && k < 200, "round {round}: {k} launched");
    }
}

/// Logs each launch with the time it was picked up, for ordering checks.
struct Logging<'a> {
    log: &'a Mutex<Vec<(String, u64)>>,
}

impl Launcher for Logging<'_> {
    type Output = ();
    fn launch(&self, slot: Slot) {
        self.log
            .lock()
            .unwrap()
            .push((format!("launch {}", slot.index), slot.intended_ns));
    }
}

/// On one closed-loop lane the bookkeeping of sample i (`on_done`) ends before sample i+1 is
/// picked up: launches and rows alternate, and each pickup stamp is after the previous
/// sample's bookkeeping finished. Sequential, churn at 1 and the sweep's first level.
#[test]
fn one_closed_loop_lane_finishes_bookkeeping_before_the_next_launch() {
    for (schedule, alternating) in [
        (Schedule::Sequential { n: 6 }, 6),
        (
            Schedule::Churn {
                n: 5,
                concurrency: 1,
            },
            5,
        ),
        (
            Schedule::Sweep {
                n_per_level: 4,
                max_concurrency: 2,
            },
            4,
        ),
    ] {
        let log = Mutex::new(Vec::new());
        let l = Logging { log: &log };
        let main = std::thread::current().id();
        let r = run(&schedule, &l, &AtomicBool::new(false), &mut |s, _| {
            assert_eq!(std::thread::current().id(), main, "on the calling thread");
            // Bookkeeping that takes a while: the next pickup must wait for it.
            std::thread::sleep(std::time::Duration::from_millis(2));
            log.lock()
                .unwrap()
                .push((format!("done {}", s.index), now_ns()));
        })
        .unwrap();
        assert!(!r.interrupted);
        let log = log.into_inner().unwrap();
        for i in 0..alternating {
            let (launch, picked) = &log[2 * i];
            let (done, _) = &log[2 * i + 1];
            assert_eq!(launch, &format!("launch {i}"), "{schedule:?}: {log:?}");
            assert_eq!(done, &format!("done {i}"), "{schedule:?}: {log:?}");
            if i > 0 {
                let (_, prev_done_at) = &log[2 * i - 1];
                assert!(
                    picked >= prev_done_at,
                    "{schedule:?}: sample {i} picked up early"
                );
            }
        }
    }
}
