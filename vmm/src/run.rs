//! Stage 6: the run loop. One thread per vCPU; exits go to the [`Bus`]; the first stop
//! (exit port, reset, triple fault, a vCPU failure) or the deadline ends the run: the
//! other vCPUs are kicked out of KVM_RUN with a signal whose handler sets `immediate_exit`.
//!
//! With a [`Sampler`] (`--sample-rip-us`) the waiting thread also wakes every period and
//! kicks each started vCPU with its "sample requested" flag set; on that `EINTR` the vCPU
//! thread stamps the time, reads RIP and its MP state and appends them to its own buffer
//! (allocated before the seccomp filters; `truecold_proto::rip`). With call stacks
//! (`--sample-stacks`) it also reads the special registers (`KVM_GET_SREGS`) and walks the
//! guest's frame-pointer chain in guest memory ([`crate::unwind`]).
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use kvm_ioctls::{VcpuExit, VcpuFd};
use serde::{Deserialize, Serialize};

use truecold_proto::rip::{
    Recorder, RipSamples, Sample, SamplePeriod, StackEnd, VcpuState, MAX_STACK_DEPTH,
};
use vm_memory::GuestMemoryMmap;

use crate::devices::{lock, Action, Bus, DeviceError, StopReason};
use crate::timeline::now_ns;

/// Why a vCPU thread failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("vCPU {vcpu}: KVM_RUN failed")]
    Run {
        vcpu: usize,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("vCPU {vcpu}: KVM internal error (emulation failure?)")]
    Internal { vcpu: usize },
    #[error("vCPU {vcpu}: VM entry failed, hardware reason {reason:#x}")]
    FailEntry { vcpu: usize, reason: u64 },
    #[error("vCPU {vcpu}: unexpected VM exit {exit}")]
    Unexpected { vcpu: usize, exit: String },
    #[error("vCPU {vcpu}: device failure")]
    Device {
        vcpu: usize,
        #[source]
        source: DeviceError,
    },
    #[error("vCPU {vcpu}: the thread panicked")]
    Panicked { vcpu: usize },
    #[error("cannot install the vCPU kick signal handler")]
    Signal(#[source] vmm_sys_util::errno::Error),
    #[error("cannot spawn the vCPU thread")]
    Spawn(#[source] std::io::Error),
    #[error("vCPU {vcpu}: cannot pin its thread to CPU {cpu} (--pin-vcpus)")]
    Pin {
        vcpu: usize,
        cpu: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("vCPU {vcpu}: cannot install the vCPU thread's seccomp filter")]
    Filter {
        vcpu: usize,
        #[source]
        source: std::io::Error,
    },
}

/// How the run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    Stopped(StopReason),
    Deadline,
    VcpuFailed(usize),
}

/// The run's result: how it ended, when, and any vCPU errors.
#[derive(Debug)]
pub struct RunOutcome {
    pub end: RunEnd,
    pub first_run: Option<u64>,
    pub exit: u64,
    pub errors: Vec<RunError>,
    /// Each vCPU's RIP when its thread stopped (0 if unreadable): where a stuck guest was.
    pub last_rip: Vec<u64>,
    /// The vCPUs still waiting for their start (INIT/SIPI) when their threads stopped: an AP
    /// the guest never started. Their `KVM_GET_MP_STATE` says so; one that cannot be read is
    /// not listed.
    pub never_started: Vec<usize>,
    /// The RIP samples, when the run had a [`Sampler`].
    pub rip_samples: Option<RipSamples>,
}

/// Host-side RIP sampling of a run: the period and one recorder per vCPU, allocated by
/// [`Sampler::new`] before the seccomp filters (the vCPU threads then append without
/// allocating).
pub struct Sampler {
    pub period: SamplePeriod,
    recorders: Vec<Recorder>,
    /// Guest memory, when each sample walks the guest's call stack.
    mem: Option<GuestMemoryMmap>,
}

impl Sampler {
    /// The buffers, and the calling thread's timer slack set to 1 ns: that thread waits for
    /// the stop with a timeout per tick ([`run`]), and Linux would otherwise let each such
    /// wait end up to 50 µs late (the default slack), a large part of a 100 µs period. Call
    /// it on the thread that then calls [`run`], before the seccomp filters (`prctl`).
    pub fn new(period: SamplePeriod, vcpus: usize) -> Self {
        // SAFETY: prctl(PR_SET_TIMERSLACK, n) takes integers and changes only this thread's
        // slack; a failure (an old kernel) leaves the default slack, which only delays ticks,
        // and late ticks are counted (`missed_ticks`).
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        Sampler {
            period,
            recorders: (0..vcpus).map(|_| Recorder::new(vcpus)).collect(),
            mem: None,
        }
    }

    /// [`Sampler::new`] whose samples also walk the guest's call stack in `mem`
    /// (`--sample-stacks`, [`crate::unwind`]): the recorders with their stack tables, and
    /// `mem` (a handle on the same mapping), both before the seccomp filters.
    pub fn with_stacks(period: SamplePeriod, vcpus: usize, mem: &GuestMemoryMmap) -> Self {
        let mut s = Sampler::new(period, vcpus);
        s.recorders = (0..vcpus).map(|_| Recorder::with_stacks(vcpus)).collect();
        s.mem = Some(mem.clone());
        s
    }
}

thread_local! {
    static IMMEDIATE_EXIT: Cell<*mut u8> = const { Cell::new(std::ptr::null_mut()) };
}

extern "C" fn kick_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let p = IMMEDIATE_EXIT.with(|c| c.get());
    if !p.is_null() {
        // SAFETY: `p` points at this thread's kvm_run.immediate_exit, set by `vcpu_loop`
        // while the VcpuFd (and its kvm_run mapping) is alive and cleared before it is dropped.
        unsafe { std::ptr::write_volatile(p, 1) };
    }
}

fn kick_signal() -> libc::c_int {
    vmm_sys_util::signal::SIGRTMIN()
}

fn install_kick_handler() -> Result<(), RunError> {
    static RESULT: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = RESULT.get_or_init(|| {
        vmm_sys_util::signal::register_signal_handler(kick_signal(), kick_handler)
            .map_err(|e| e.errno())
    });
    r.map_err(|e| RunError::Signal(vmm_sys_util::errno::Error::new(e)))
}

/// Installs the vCPU kick's signal handler now (idempotent): the boot does it before its
/// seccomp filter, which does not allow `rt_sigaction`.
pub fn prepare() -> Result<(), RunError> {
    install_kick_handler()
}

enum Event {
    Stop(StopReason),
    Failed(usize),
}

struct Shared<'a> {
    bus: &'a Mutex<Bus>,
    stop: AtomicBool,
    first_run: AtomicU64,
    tids: Vec<AtomicU64>,
    last_rip: Vec<AtomicU64>,
    /// Each vCPU's `KVM_GET_MP_STATE` when its thread stopped ([`MP_STATE_UNREAD`] if not read).
    mp_state: Vec<AtomicU32>,
    /// Per vCPU: a sample is requested (set by the waiting thread before its kick, taken by
    /// the vCPU thread on the kick's `EINTR`).
    sample_req: Vec<AtomicBool>,
    /// Per vCPU: ticks at which the previous request was still pending.
    coalesced: Vec<AtomicU64>,
    /// Per vCPU: the grid's ticks while its thread ran (asked, or slept through): the
    /// samples requested of it.
    requested: Vec<AtomicU64>,
    /// Guest memory, when the samples walk call stacks.
    mem: Option<&'a GuestMemoryMmap>,
}

const MP_STATE_UNREAD: u32 = u32::MAX;

/// True for the states of a vCPU that has not run since it was created: an AP waiting for
/// INIT, or for its SIPI after one.
fn waiting_for_start(mp_state: u32) -> bool {
    mp_state == kvm_bindings::KVM_MP_STATE_UNINITIALIZED
        || mp_state == kvm_bindings::KVM_MP_STATE_INIT_RECEIVED
}

/// The sample's state from a `KVM_GET_MP_STATE` value.
fn sample_state(mp_state: u32) -> VcpuState {
    if mp_state == kvm_bindings::KVM_MP_STATE_RUNNABLE {
        VcpuState::Running
    } else if mp_state == kvm_bindings::KVM_MP_STATE_HALTED {
        VcpuState::Halted
    } else if waiting_for_start(mp_state) || mp_state == kvm_bindings::KVM_MP_STATE_SIPI_RECEIVED {
        VcpuState::WaitingForStart
    } else {
        VcpuState::Unknown
    }
}

/// On a sampling kick's `EINTR`: the time first, then the MP state, then RIP. The MP state
/// comes first because reading it makes KVM process the vCPU's pending INIT/SIPI, which
/// moves RIP: read the other way round, an AP started between the two reads showed its reset
/// RIP beside the state "running". With call stacks, the special registers and the walk
/// follow (a vCPU whose special registers cannot be read has its sample's stack not walked).
/// A sample whose stamp precedes a `stop` seen unset precedes the run's `exit` stamp (taken
/// after `stop` is set), so every kept sample lies between `first_run` and `exit`.
fn take_sample(vcpu: &VcpuFd, sh: &Shared<'_>, rec: &mut Recorder) {
    let t_ns = now_ns();
    if rec.full() {
        rec.over_cap();
        return;
    }
    let state = vcpu
        .get_mp_state()
        .map_or(VcpuState::Unknown, |m| sample_state(m.mp_state));
    let Ok(regs) = vcpu.get_regs() else {
        rec.unread();
        return;
    };
    // The walk's buffer is on this thread's stack: nothing is allocated.
    let mut frames = [0u64; MAX_STACK_DEPTH];
    let walked = match sh.mem {
        Some(mem) if rec.walks_stacks() => Some(match vcpu.get_sregs() {
            Ok(sregs) => {
                crate::unwind::walk(&crate::unwind::Cpu::of(&regs, &sregs), mem, &mut frames)
            }
            Err(_) => (0, StackEnd::NotWalked),
        }),
        _ => None,
    };
    if sh.stop.load(Ordering::SeqCst) {
        rec.at_stop();
        return;
    }
    let sample = Sample {
        t_ns,
        rip: regs.rip,
        state,
    };
    match walked {
        Some((n, end)) => rec.push_with_stack(sample, &frames[..n], end),
        None => rec.push(sample),
    };
}

fn handle(i: usize, exit: VcpuExit<'_>, bus: &Mutex<Bus>, t: u64) -> Result<Action, RunError> {
    let dev = |source| RunError::Device { vcpu: i, source };
    match exit {
        VcpuExit::IoOut(port, data) => lock(bus).io_out(i, port, data, t).map_err(dev),
        VcpuExit::IoIn(port, data) => Ok(lock(bus).io_in(i, port, data)),
        VcpuExit::MmioRead(addr, data) => {
            lock(bus).mmio_read(addr, data);
            Ok(Action::Continue)
        }
        VcpuExit::MmioWrite(addr, data) => {
            lock(bus).mmio_write(addr, data);
            Ok(Action::Continue)
        }
        VcpuExit::Hlt => {
            lock(bus).exits.hlt += 1;
            Ok(Action::Continue)
        }
        VcpuExit::Shutdown => {
            lock(bus).exits.shutdown += 1;
            Ok(Action::Stop(StopReason::Shutdown(i)))
        }
        VcpuExit::SystemEvent(kind, _) => {
            lock(bus).exits.system_event += 1;
            Ok(Action::Stop(StopReason::SystemEvent(kind)))
        }
        VcpuExit::InternalError => Err(RunError::Internal { vcpu: i }),
        VcpuExit::FailEntry(reason, _) => Err(RunError::FailEntry { vcpu: i, reason }),
        VcpuExit::Intr | VcpuExit::IrqWindowOpen | VcpuExit::IoapicEoi(_) => {
            lock(bus).exits.other += 1;
            Ok(Action::Continue)
        }
        other => Err(RunError::Unexpected {
            vcpu: i,
            exit: format!("{other:?}"),
        }),
    }
}

fn vcpu_loop(
    i: usize,
    vcpu: &mut VcpuFd,
    sh: &Shared<'_>,
    tx: &mpsc::Sender<Event>,
    mut rec: Option<&mut Recorder>,
    cpu: Option<u32>,
) -> Result<(), RunError> {
    // First thing: its CPU (`--pin-vcpus`), while the process filter still allows pinning
    // oneself; the vCPU filter below does not.
    if let Some(cpu) = cpu {
        if let Err(source) = crate::pin::pin_this_thread(cpu) {
            let _ = tx.send(Event::Failed(i));
            return Err(RunError::Pin {
                vcpu: i,
                cpu,
                source,
            });
        }
    }
    // Then this thread's own, stricter seccomp filter (when the boot armed one).
    if let Err(source) = crate::sandbox::enter_vcpu_thread(i) {
        let _ = tx.send(Event::Failed(i));
        return Err(RunError::Filter { vcpu: i, source });
    }
    let p: *mut u8 = &mut vcpu.get_kvm_run().immediate_exit;
    IMMEDIATE_EXIT.with(|c| c.set(p));
    // SAFETY: pthread_self has no preconditions.
    sh.tids[i].store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
    let result = loop {
        if sh.stop.load(Ordering::SeqCst) {
            break Ok(());
        }
        if i == 0 && sh.first_run.load(Ordering::Relaxed) == 0 {
            sh.first_run.store(now_ns(), Ordering::Relaxed);
            crate::fault::at(truecold_proto::measure::Mark::FirstRun);
            lock(sh.bus).sample(truecold_proto::measure::Mark::FirstRun);
        }
        match vcpu.run() {
            Ok(exit) => {
                let t = now_ns();
                match handle(i, exit, sh.bus, t) {
                    Ok(Action::Continue) => {}
                    Ok(Action::Stop(reason)) => {
                        let _ = tx.send(Event::Stop(reason));
                        break Ok(());
                    }
                    Err(e) => {
                        let _ = tx.send(Event::Failed(i));
                        break Err(e);
                    }
                }
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                vcpu.set_kvm_immediate_exit(0);
                match rec.as_deref_mut() {
                    Some(r) if sh.sample_req[i].swap(false, Ordering::SeqCst) => {
                        take_sample(vcpu, sh, r);
                    }
                    _ => lock(sh.bus).exits.interrupted += 1,
                }
            }
            Err(source) => {
                let _ = tx.send(Event::Failed(i));
                break Err(RunError::Run { vcpu: i, source });
            }
        }
    };
    IMMEDIATE_EXIT.with(|c| c.set(std::ptr::null_mut()));
    // A request the loop ended before serving is counted, not lost.
    if let Some(r) = rec {
        if sh.sample_req[i].swap(false, Ordering::SeqCst) {
            r.at_stop();
        }
    }
    if let Ok(regs) = vcpu.get_regs() {
        sh.last_rip[i].store(regs.rip, Ordering::Relaxed);
    }
    if let Ok(mp) = vcpu.get_mp_state() {
        sh.mp_state[i].store(mp.mp_state, Ordering::Relaxed);
    }
    result
}

/// Runs `vcpus` until a stop, a failure or the instant `deadline_at_ns` (CLOCK_MONOTONIC,
/// the clock of [`now_ns`]). A deadline already past ends the run as [`RunEnd::Deadline`]
/// without starting any vCPU. With `sampler`, the vCPUs are sampled every period from
/// their first run until the stop.
pub fn run(
    vcpus: Vec<VcpuFd>,
    bus: &Mutex<Bus>,
    deadline_at_ns: u64,
    mut sampler: Option<Sampler>,
    placement: Option<&crate::pin::Placement>,
) -> Result<RunOutcome, RunError> {
    install_kick_handler()?;
    let n = vcpus.len();
    let now = now_ns();
    if now >= deadline_at_ns {
        return Ok(RunOutcome {
            end: RunEnd::Deadline,
            first_run: None,
            exit: now,
            errors: Vec::new(),
            last_rip: vec![0; n],
            never_started: Vec::new(),
            rip_samples: None,
        });
    }
    let t0 = now;
    let period = sampler.as_ref().map(|s| s.period);
    let mem = sampler.as_mut().and_then(|s| s.mem.take());
    let mut recorders: Vec<Option<&mut Recorder>> = match sampler.as_mut() {
        Some(s) => s
            .recorders
            .iter_mut()
            .map(|r| {
                r.start(t0);
                Some(r)
            })
            .collect(),
        None => Vec::new(),
    };
    recorders.resize_with(n, || None);
    let sh = Shared {
        bus,
        stop: AtomicBool::new(false),
        first_run: AtomicU64::new(0),
        tids: (0..n).map(|_| AtomicU64::new(0)).collect(),
        last_rip: (0..n).map(|_| AtomicU64::new(0)).collect(),
        mp_state: (0..n).map(|_| AtomicU32::new(MP_STATE_UNREAD)).collect(),
        sample_req: (0..n).map(|_| AtomicBool::new(false)).collect(),
        coalesced: (0..n).map(|_| AtomicU64::new(0)).collect(),
        requested: (0..n).map(|_| AtomicU64::new(0)).collect(),
        mem: mem.as_ref(),
    };
    let mut ticks = Ticks::default();
    let (tx, rx) = mpsc::channel();
    let mut out = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for ((i, mut vcpu), rec) in vcpus.into_iter().enumerate().zip(recorders) {
            let tx = tx.clone();
            let sh = &sh;
            let cpu = placement.and_then(|p| p.cpu(i));
            let h = std::thread::Builder::new()
                .name(format!("vcpu{i}"))
                .spawn_scoped(s, move || vcpu_loop(i, &mut vcpu, sh, &tx, rec, cpu));
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    sh.stop.store(true, Ordering::SeqCst);
                    kick_all(sh);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(RunError::Spawn(e));
                }
            }
        }
        drop(tx);
        let end = match period {
            None => {
                let left = Duration::from_nanos(deadline_at_ns.saturating_sub(now_ns()));
                ended(rx.recv_timeout(left))
            }
            Some(p) => wait_sampling(&rx, &sh, deadline_at_ns, p.ns(), &mut ticks),
        };
        // `stop` before the `exit` stamp: a sample stamped while `stop` was unset is
        // before `exit` (see `take_sample`).
        sh.stop.store(true, Ordering::SeqCst);
        let exit = now_ns();
        lock(bus).sample(truecold_proto::measure::Mark::Exit);
        kick_all(&sh);
        let mut errors = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(RunError::Panicked { vcpu: i }),
            }
        }
        let f = sh.first_run.load(Ordering::Relaxed);
        Ok(RunOutcome {
            end,
            first_run: (f != 0).then_some(f),
            exit,
            errors,
            last_rip: sh
                .last_rip
                .iter()
                .map(|r| r.load(Ordering::Relaxed))
                .collect(),
            never_started: (0..n)
                .filter(|&i| waiting_for_start(sh.mp_state[i].load(Ordering::Relaxed)))
                .collect(),
            rip_samples: None,
        })
    })?;
    out.rip_samples = sampler.map(|s| RipSamples {
        period_us: s.period,
        t0_ns: t0,
        ticks: ticks.made,
        missed_ticks: ticks.missed,
        vcpus: s
            .recorders
            .into_iter()
            .zip(sh.coalesced.iter().zip(&sh.requested))
            .zip(&sh.sample_req)
            .map(|((r, (c, q)), pending)| {
                let mut v = r.finish();
                v.coalesced = c.load(Ordering::Relaxed);
                v.requested = Some(q.load(Ordering::Relaxed));
                // A tick the waiting thread made after this vCPU's thread had left its loop
                // (the stop and the timer at once) was never served: counted, not lost.
                if pending.swap(false, Ordering::SeqCst) {
                    v.at_stop += 1;
                }
                v
            })
            .collect(),
    });
    Ok(out)
}

/// How the waiting thread's wait ended.
fn ended(r: Result<Event, RecvTimeoutError>) -> RunEnd {
    match r {
        Ok(Event::Stop(r)) => RunEnd::Stopped(r),
        Ok(Event::Failed(i)) => RunEnd::VcpuFailed(i),
        Err(_) => RunEnd::Deadline,
    }
}

/// The sampler's ticks: made (after the first run), and skipped because the waiting
/// thread woke past more than one tick's instant.
#[derive(Default)]
struct Ticks {
    made: u64,
    missed: u64,
}

/// The wait for the stop with sampling: woken every `period_ns` (on a fixed grid from the
/// start), each tick after the first run requests one sample of every started vCPU.
fn wait_sampling(
    rx: &mpsc::Receiver<Event>,
    sh: &Shared<'_>,
    deadline_at_ns: u64,
    period_ns: u64,
    ticks: &mut Ticks,
) -> RunEnd {
    let period_ns = period_ns.max(1);
    let mut next = now_ns().saturating_add(period_ns);
    loop {
        let now = now_ns();
        if now >= deadline_at_ns {
            return RunEnd::Deadline;
        }
        let wake = next.min(deadline_at_ns);
        match rx.recv_timeout(Duration::from_nanos(wake.saturating_sub(now))) {
            Err(RecvTimeoutError::Timeout) => {}
            other => return ended(other),
        }
        let now = now_ns();
        if now < next {
            continue;
        }
        let late = (now - next) / period_ns;
        next = next.saturating_add(late.saturating_add(1).saturating_mul(period_ns));
        if sh.first_run.load(Ordering::SeqCst) == 0 {
            continue;
        }
        ticks.made += 1;
        ticks.missed += late;
        for (i, t) in sh.tids.iter().enumerate() {
            if t.load(Ordering::SeqCst) != 0 {
                sh.requested[i].fetch_add(late + 1, Ordering::Relaxed);
            }
        }
        request_samples(sh);
    }
}

/// One tick: every started vCPU's sample flag set, then its kick.
fn request_samples(sh: &Shared<'_>) {
    for (i, t) in sh.tids.iter().enumerate() {
        let tid = t.load(Ordering::SeqCst);
        if tid == 0 {
            continue;
        }
        if sh.sample_req[i].swap(true, Ordering::SeqCst) {
            sh.coalesced[i].fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as in `kick_all`: a thread of this scope, not joined before the wait ends.
        unsafe { libc::pthread_kill(tid as libc::pthread_t, kick_signal()) };
    }
}

fn kick_all(sh: &Shared<'_>) {
    for t in &sh.tids {
        let tid = t.load(Ordering::SeqCst);
        if tid != 0 {
            // SAFETY: `tid` is a thread of this scope that has not been joined yet (joins
            // happen after kicking), so the pthread_t is valid.
            unsafe { libc::pthread_kill(tid as libc::pthread_t, kick_signal()) };
        }
    }
}
