//! CLOCK_MONOTONIC stamps of every boot stage (nanoseconds; the same clock in every host
//! process, so a parent can hand in its request stamp with `--request-ns`). The one
//! exception is [`Timeline::process_start`] (CLOCK_BOOTTIME, 10 ms ticks), kept for
//! reference and never part of a duration.
use serde::{Deserialize, Serialize};

/// Now on CLOCK_MONOTONIC, in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Process start as the kernel recorded it (`/proc/self/stat` field 22: CLOCK_BOOTTIME in
/// clock ticks, usually 10 ms; equal to CLOCK_MONOTONIC on a host that never suspended);
/// `None` if unreadable.
pub fn process_start_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let ticks: u64 = after_comm.split(' ').nth(19)?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    Some(ticks.saturating_mul(1_000_000_000) / hz as u64)
}

/// One stamp per stage; `None` = the stage was not reached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// Handed in by the caller (`--request-ns`).
    pub request: Option<u64>,
    /// Process start from /proc/self/stat, on **CLOCK_BOOTTIME** (not CLOCK_MONOTONIC like
    /// every other stamp here) at clock-tick resolution (10 ms on most kernels; see
    /// [`process_start_ns`]). Informational only: no duration here or in the bench uses it.
    pub process_start: Option<u64>,
    /// `boot::run` entered.
    pub boot_start: Option<u64>,
    pub kvm_open: Option<u64>,
    pub vm_created: Option<u64>,
    pub memory_ready: Option<u64>,
    pub kernel_loaded: Option<u64>,
    pub vcpus_ready: Option<u64>,
    pub first_run: Option<u64>,
    /// VM exit of the `Phase::InitStart` doorbell.
    pub init_doorbell: Option<u64>,
    /// VM exit of the `Phase::Ready` doorbell.
    pub ready_doorbell: Option<u64>,
    /// VM exit at which the liveness answer completed and verified.
    pub strict_ready: Option<u64>,
    /// VM exit at which the guest's record (Linux) or summary (probe) completed.
    pub record: Option<u64>,
    /// The guest stopped (exit port, reset, shutdown) or the deadline fired.
    pub exit: Option<u64>,
    /// vCPU threads joined, fds closed, memory unmapped.
    pub teardown_done: Option<u64>,
}

/// Durations between consecutive stages (nanoseconds), `None` where either end is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageDurations {
    pub request_to_boot_start: Option<u64>,
    pub kvm_open: Option<u64>,
    pub vm_create: Option<u64>,
    pub memory: Option<u64>,
    pub kernel_load: Option<u64>,
    pub vcpus: Option<u64>,
    pub to_first_run: Option<u64>,
    pub first_run_to_init: Option<u64>,
    pub init_to_ready: Option<u64>,
    pub ready_to_strict_ready: Option<u64>,
    pub strict_ready_to_record: Option<u64>,
    pub record_to_exit: Option<u64>,
    pub teardown: Option<u64>,
    /// `boot_start` (or `request` when given) to strict-ready: the headline number.
    pub to_strict_ready: Option<u64>,
    pub boot_start_to_strict_ready: Option<u64>,
}

fn span(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    b?.checked_sub(a?)
}

impl Timeline {
    /// The derived durations.
    pub fn durations(&self) -> StageDurations {
        let t = self;
        StageDurations {
            request_to_boot_start: span(t.request, t.boot_start),
            kvm_open: span(t.boot_start, t.kvm_open),
            vm_create: span(t.kvm_open, t.vm_created),
            memory: span(t.vm_created, t.memory_ready),
            kernel_load: span(t.memory_ready, t.kernel_loaded),
            vcpus: span(t.kernel_loaded, t.vcpus_ready),
            to_first_run: span(t.vcpus_ready, t.first_run),
            first_run_to_init: span(t.first_run, t.init_doorbell),
            init_to_ready: span(t.init_doorbell, t.ready_doorbell),
            ready_to_strict_ready: span(t.ready_doorbell, t.strict_ready),
            strict_ready_to_record: span(t.strict_ready, t.record),
            record_to_exit: span(t.record, t.exit),
            teardown: span(t.exit, t.teardown_done),
            to_strict_ready: span(t.request.or(t.boot_start), t.strict_ready),
            boot_start_to_strict_ready: span(t.boot_start, t.strict_ready),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_both_ends() {
        let t = Timeline {
            boot_start: Some(100),
            kvm_open: Some(150),
            strict_ready: Some(1000),
            ..Timeline::default()
        };
        let d = t.durations();
        assert_eq!(d.kvm_open, Some(50));
        assert_eq!(d.vm_create, None);
        assert_eq!(d.to_strict_ready, Some(900));
    }

    #[test]
    fn process_start_is_in_no_duration() {
        let t = Timeline {
            request: Some(10),
            boot_start: Some(100),
            strict_ready: Some(1000),
            ..Timeline::default()
        };
        let with = Timeline {
            process_start: Some(5),
            ..t.clone()
        };
        assert_eq!(t.durations(), with.durations());
    }

    #[test]
    fn clock_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a && a > 0);
    }
}
