//! The VMM's clock: [`now_ns`] (CLOCK_MONOTONIC, defined once in `truecold_proto::measure`
//! with the marks and stages) and the informational process start on CLOCK_BOOTTIME.
pub use truecold_proto::measure::now_ns;

/// Process start as the kernel recorded it (`/proc/self/stat` field 22: CLOCK_BOOTTIME in
/// clock ticks, usually 10 ms; equal to CLOCK_MONOTONIC on a host that never suspended);
/// `None` if unreadable.
pub fn process_start_ns() -> Option<u64> {
    let stat = crate::host::read_text(crate::host::PROC_SELF_STAT)?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let ticks: u64 = after_comm.split(' ').nth(19)?.parse().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    Some(ticks.saturating_mul(1_000_000_000) / hz as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_start_is_before_now_on_a_host_that_never_suspended_or_unreadable() {
        // CLOCK_BOOTTIME ≥ CLOCK_MONOTONIC, so the only sound check is that it parses.
        assert!(process_start_ns().is_some());
    }
}
