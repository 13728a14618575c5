//! The nested harness's parallel clock, read from inside L1 (docs/virtual-clock.md, "The
//! parallel clock").
//!
//! L1's CLOCK_MONOTONIC is the *total* clock: under `-icount` every emulated instruction of
//! any L1 CPU advances it by 1 ns, so work on two CPUs at once adds. The harness's L0 QEMU
//! (`scripts/deps.sh`, `L0_BUILD`) also keeps the *parallel* clock: an instruction executed
//! while k L1 CPUs are running costs 1/k ns. It records what that saves up to each moment,
//! D(t), as a function of its own virtual clock t (which is L1's TSC), and answers a CPUID
//! leaf ([`LEAF`]) with D(t) for any recorded t. The parallel time between two stamps is
//! then their total difference minus the difference of D:
//! `parallel = (t₂ − t₁) − (D(t₂) − D(t₁))`.
//!
//! L1's CLOCK_MONOTONIC and its TSC differ by a constant once L1's clocksource is the refined
//! TSC (the harness waits for it: [`crate::clock_settled`]; at 1000.000 MHz the conversion's
//! slope is exactly 1), so [`ParallelClock::calibrate`] measures that constant and
//! [`ParallelClock::saved_ns`] maps a CLOCK_MONOTONIC stamp onto the L0's clock.
//!
//! Outside the harness (hardware KVM, an L0 QEMU without the clock) [`ParallelClock::detect`]
//! finds no signature and nothing is read: CPUID of an unknown leaf is harmless, and the
//! bench asks only when it runs inside L1.

use std::time::Duration;

/// The CPUID leaf of the L0 QEMU's parallel clock (outside the basic, hypervisor and
/// extended ranges, so no guest asks for it). In SVM guest mode (L2) the leaf is not
/// answered: L1's KVM intercepts every CPUID of its guests.
pub const LEAF: u32 = 0x5443_0000;
/// Subleaf: D(t) for t in RBX.
const SUB_QUERY: u32 = 0;
/// Subleaf: the signature ([`SIGNATURE`]) and the version.
const SUB_IDENTIFY: u32 = 1;
/// Subleaf: the last recorded time.
const SUB_RECORDED: u32 = 2;
/// EBX, ECX, EDX of [`SUB_IDENTIFY`]: "TrueColdPar1".
pub const SIGNATURE: [u32; 3] = [0x6575_7254, 0x646c_6f43, 0x3172_6150];
/// The version this crate reads.
pub const VERSION: u32 = 1;
/// How long a query waits for a time the L0 has not recorded yet (its CPU's turn has not
/// ended): the L0 records a turn when it ends, which is at most one timer period later.
pub const RECORD_WAIT: Duration = Duration::from_millis(200);

/// Why the parallel clock could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParallelError {
    #[error("the L0 no longer keeps total time {t_ns} ns (it keeps its last 2^20 pieces)")]
    TooOld { t_ns: u64 },
    #[error("the L0 had not recorded total time {t_ns} ns after {wait_ms} ms (recorded to {recorded_ns} ns)")]
    NotRecorded {
        t_ns: u64,
        recorded_ns: u64,
        wait_ms: u128,
    },
    #[error("the L0 answered status {0} to a parallel-clock query")]
    Status(u32),
    #[error(
        "CLOCK_MONOTONIC stamp {mono_ns} ns is before L1's TSC origin (offset {offset_ns} ns)"
    )]
    BeforeOrigin { mono_ns: u64, offset_ns: i64 },
}

/// Four CPUID outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Regs {
    eax: u32,
    ebx: u32,
    ecx: u32,
    edx: u32,
}

/// One CPUID with RBX as an input too (the L0's query reads it).
fn cpuid(leaf: u32, sub: u32, rbx_in: u64) -> Regs {
    let (eax, ecx, edx): (u32, u32, u32);
    let rbx_out: u64;
    // SAFETY: CPUID reads and writes only the registers named here. RBX, which LLVM reserves,
    // is exchanged with a scratch register around it: the first exchange loads the input,
    // the second restores RBX and leaves CPUID's RBX in the scratch register. No memory is
    // touched, the stack is not used and the flags are unchanged.
    unsafe {
        std::arch::asm!(
            "xchg {b}, rbx",
            "cpuid",
            "xchg {b}, rbx",
            b = inout(reg) rbx_in => rbx_out,
            inout("eax") leaf => eax,
            inout("ecx") sub => ecx,
            out("edx") edx,
            options(nostack, preserves_flags),
        );
    }
    Regs {
        eax,
        ebx: rbx_out as u32,
        ecx,
        edx,
    }
}

/// L1's time-stamp counter, which under the harness is the L0's virtual clock in ns.
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no side effects; L1 does not restrict it (CR4.TSD is clear).
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// The parallel clock of the L0 this process runs under, with L1's CLOCK_MONOTONIC → TSC
/// offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParallelClock {
    /// TSC − CLOCK_MONOTONIC, ns.
    pub offset_ns: i64,
}

impl ParallelClock {
    /// The clock, when the L0 answers [`LEAF`] with [`SIGNATURE`] and [`VERSION`], calibrated
    /// now; `None` anywhere else.
    pub fn detect() -> Option<Self> {
        let r = cpuid(LEAF, SUB_IDENTIFY, 0);
        ([r.ebx, r.ecx, r.edx] == SIGNATURE && r.eax == VERSION).then(Self::calibrate)
    }

    /// Measures TSC − CLOCK_MONOTONIC: a TSC read between two clock reads, the offset taken
    /// at their midpoint (the reads are a few dozen instructions, i.e. ns, apart; an error
    /// of e ns moves a parallel duration by less than e).
    pub fn calibrate() -> Self {
        let a = truecold_proto::measure::now_ns();
        let t = rdtsc();
        let b = truecold_proto::measure::now_ns();
        let mid = a / 2 + b / 2 + (a % 2 + b % 2) / 2;
        ParallelClock {
            offset_ns: t as i64 - mid as i64,
        }
    }

    /// D at a CLOCK_MONOTONIC stamp: the ns the parallel clock had saved up to it. Waits up
    /// to [`RECORD_WAIT`] for a time the L0 has not recorded yet.
    pub fn saved_ns(&self, mono_ns: u64) -> Result<u64, ParallelError> {
        let t = i128::from(mono_ns) + i128::from(self.offset_ns);
        let t = u64::try_from(t).map_err(|_| ParallelError::BeforeOrigin {
            mono_ns,
            offset_ns: self.offset_ns,
        })?;
        let start = std::time::Instant::now();
        loop {
            let r = cpuid(LEAF, SUB_QUERY, t);
            match r.ebx {
                0 => return Ok(u64::from(r.edx) << 32 | u64::from(r.eax)),
                1 => return Err(ParallelError::TooOld { t_ns: t }),
                2 if start.elapsed() < RECORD_WAIT => {
                    std::thread::sleep(Duration::from_micros(100))
                }
                2 => {
                    let rec = cpuid(LEAF, SUB_RECORDED, 0);
                    return Err(ParallelError::NotRecorded {
                        t_ns: t,
                        recorded_ns: u64::from(rec.edx) << 32 | u64::from(rec.eax),
                        wait_ms: start.elapsed().as_millis(),
                    });
                }
                s => return Err(ParallelError::Status(s)),
            }
        }
    }

    /// The parallel duration between two CLOCK_MONOTONIC stamps `a ≤ b`:
    /// `(b − a) − (D(b) − D(a))`.
    pub fn duration_ns(&self, a: u64, b: u64) -> Result<u64, ParallelError> {
        let (da, db) = (self.saved_ns(a)?, self.saved_ns(b)?);
        Ok(truecold_proto::parallel::duration(
            b.saturating_sub(a),
            da,
            db,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_the_harness_there_is_no_parallel_clock() {
        // This test process runs on the build host, never under the harness's L0.
        assert_eq!(ParallelClock::detect(), None);
    }
}
