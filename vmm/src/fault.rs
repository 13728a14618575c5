//! Fault injection for the reliability tests: `truecold-vmm boot --inject-fault
//! SIGNAL@MARK` makes the VMM send itself SIGNAL (`sigkill` or `sigstop`) right after it
//! takes MARK, so a test can kill or stop it at a chosen stage and check that the bench
//! records a typed failure row and loses nothing. The option is hidden from `--help`; a run
//! with it is never a measurement (its row fails, by design).
use std::sync::OnceLock;

use truecold_proto::measure::Mark;

/// The signal a fault sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSignal {
    /// The process dies at once (no report).
    Kill,
    /// The process stops (a hung VMM): the bench's deadline must deal with it.
    Stop,
}

/// One injected fault: `signal` right after `mark`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub signal: FaultSignal,
    pub mark: Mark,
}

/// The marks a fault can follow: those the VMM takes in its own code.
pub const FAULT_MARKS: [Mark; 7] = [
    Mark::BootStart,
    Mark::KvmOpen,
    Mark::VmCreated,
    Mark::MemoryReady,
    Mark::KernelLoaded,
    Mark::FirstRun,
    Mark::Exit,
];

impl Fault {
    /// Parses `sigkill@memory_ready` (pure).
    pub fn parse(s: &str) -> Result<Fault, String> {
        let (sig, mark) = s
            .split_once('@')
            .ok_or_else(|| format!("`{s}`: want SIGNAL@MARK, e.g. sigkill@memory_ready"))?;
        let signal = match sig {
            "sigkill" => FaultSignal::Kill,
            "sigstop" => FaultSignal::Stop,
            _ => return Err(format!("`{sig}`: the signal is sigkill or sigstop")),
        };
        let mark = FAULT_MARKS
            .into_iter()
            .find(|m| m.name() == mark)
            .ok_or_else(|| {
                let names: Vec<&str> = FAULT_MARKS.iter().map(|m| m.name()).collect();
                format!("`{mark}`: the mark is one of {}", names.join(", "))
            })?;
        Ok(Fault { signal, mark })
    }
}

static FAULT: OnceLock<Fault> = OnceLock::new();

/// Arms `fault` for this process (once; a second call is ignored).
pub fn arm(fault: Fault) {
    let _ = FAULT.set(fault);
}

/// Called right after `mark` is taken: sends the armed signal if it follows `mark`.
pub fn at(mark: Mark) {
    let Some(f) = FAULT.get() else { return };
    if f.mark != mark {
        return;
    }
    let sig = match f.signal {
        FaultSignal::Kill => libc::SIGKILL,
        FaultSignal::Stop => libc::SIGSTOP,
    };
    // SAFETY: raise(3) has no memory-safety preconditions; the signal is the test's intent.
    unsafe { libc::raise(sig) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_bad_ones_are_named() {
        assert_eq!(
            Fault::parse("sigkill@memory_ready"),
            Ok(Fault {
                signal: FaultSignal::Kill,
                mark: Mark::MemoryReady
            })
        );
        assert_eq!(
            Fault::parse("sigstop@first_run").unwrap().mark,
            Mark::FirstRun
        );
        assert!(Fault::parse("sigkill").unwrap_err().contains("SIGNAL@MARK"));
        assert!(Fault::parse("sigterm@exit")
            .unwrap_err()
            .contains("sigkill or sigstop"));
        // A mark the VMM does not take itself.
        assert!(Fault::parse("sigkill@reaped")
            .unwrap_err()
            .contains("one of"));
    }
}
