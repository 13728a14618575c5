//! Stage 6: the run loop. One thread per vCPU; exits go to the [`Bus`]; the first stop
//! (exit port, reset, triple fault, a vCPU failure) or the deadline ends the run: the
//! other vCPUs are kicked out of KVM_RUN with a signal whose handler sets `immediate_exit`.
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use kvm_ioctls::{VcpuExit, VcpuFd};
use serde::{Deserialize, Serialize};

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
}

const MP_STATE_UNREAD: u32 = u32::MAX;

/// True for the states of a vCPU that has not run since it was created: an AP waiting for
/// INIT, or for its SIPI after one.
fn waiting_for_start(mp_state: u32) -> bool {
    mp_state == kvm_bindings::KVM_MP_STATE_UNINITIALIZED
        || mp_state == kvm_bindings::KVM_MP_STATE_INIT_RECEIVED
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
) -> Result<(), RunError> {
    // First thing: this thread's own, stricter seccomp filter (when the boot armed one).
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
                lock(sh.bus).exits.interrupted += 1;
            }
            Err(source) => {
                let _ = tx.send(Event::Failed(i));
                break Err(RunError::Run { vcpu: i, source });
            }
        }
    };
    IMMEDIATE_EXIT.with(|c| c.set(std::ptr::null_mut()));
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
/// without starting any vCPU.
pub fn run(
    vcpus: Vec<VcpuFd>,
    bus: &Mutex<Bus>,
    deadline_at_ns: u64,
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
        });
    }
    let sh = Shared {
        bus,
        stop: AtomicBool::new(false),
        first_run: AtomicU64::new(0),
        tids: (0..n).map(|_| AtomicU64::new(0)).collect(),
        last_rip: (0..n).map(|_| AtomicU64::new(0)).collect(),
        mp_state: (0..n).map(|_| AtomicU32::new(MP_STATE_UNREAD)).collect(),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        for (i, mut vcpu) in vcpus.into_iter().enumerate() {
            let tx = tx.clone();
            let sh = &sh;
            let h = std::thread::Builder::new()
                .name(format!("vcpu{i}"))
                .spawn_scoped(s, move || vcpu_loop(i, &mut vcpu, sh, &tx));
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
        let left = Duration::from_nanos(deadline_at_ns.saturating_sub(now_ns()));
        let end = match rx.recv_timeout(left) {
            Ok(Event::Stop(r)) => RunEnd::Stopped(r),
            Ok(Event::Failed(i)) => RunEnd::VcpuFailed(i),
            Err(_) => RunEnd::Deadline,
        };
        let exit = now_ns();
        lock(bus).sample(truecold_proto::measure::Mark::Exit);
        sh.stop.store(true, Ordering::SeqCst);
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
        })
    })
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
