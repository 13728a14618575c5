//! vCPU placement (`--pin-vcpus`): vCPU `i` runs only on the `i`-th CPU of the set the VMM
//! process may run on (its affinity when it starts: `taskset`, a cpuset cgroup or the whole
//! machine), each vCPU on a CPU of its own.
//!
//! The set is read once, with the request's checks before the boot starts (so before the
//! seccomp filter); each vCPU thread pins itself first thing
//! (`sched_setaffinity(0, …)`, the only form the filter allows, and only with this option),
//! before its own filter. Without the option nothing is pinned and the host's scheduler places
//! the vCPU threads (docs/virtual-clock.md finding 12 measures what that costs in the nested
//! harness).
use serde::{Deserialize, Serialize};

/// Why the vCPUs cannot be placed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("cannot read the VMM process's CPU affinity (sched_getaffinity)")]
    Affinity(#[source] std::io::Error),
    #[error(
        "--pin-vcpus needs a CPU per vCPU: {vcpus} vCPUs, but the process may run on {allowed} \
         CPU(s) ({list}); give it more (taskset, cpuset) or boot without --pin-vcpus"
    )]
    TooFewCpus {
        vcpus: usize,
        allowed: usize,
        list: String,
    },
}

impl PinError {
    /// The error kind the report names.
    pub fn kind(&self) -> &'static str {
        match self {
            PinError::Affinity(_) => "pin-affinity-unreadable",
            PinError::TooFewCpus { .. } => "pin-too-few-cpus",
        }
    }
}

/// Where each vCPU runs: `cpus[i]` is vCPU `i`'s CPU (the report's `vcpu_cpus`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Placement {
    cpus: Vec<u32>,
}

impl Placement {
    /// vCPU `i` on the `i`-th CPU of `allowed` (ascending, each once): pure, the one rule.
    pub fn assign(allowed: &[u32], vcpus: usize) -> Result<Self, PinError> {
        let mut set = allowed.to_vec();
        set.sort_unstable();
        set.dedup();
        if set.len() < vcpus {
            return Err(PinError::TooFewCpus {
                vcpus,
                allowed: set.len(),
                list: cpu_list(&set),
            });
        }
        set.truncate(vcpus);
        Ok(Placement { cpus: set })
    }

    /// The placement of `vcpus` vCPUs on this process's current affinity.
    pub fn of_this_process(vcpus: usize) -> Result<Self, PinError> {
        Self::assign(&allowed_cpus().map_err(PinError::Affinity)?, vcpus)
    }

    /// vCPU `i`'s CPU.
    pub fn cpu(&self, vcpu: usize) -> Option<u32> {
        self.cpus.get(vcpu).copied()
    }

    /// Every vCPU's CPU, in vCPU order.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
}

/// `0-3,8` style, for messages.
fn cpu_list(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "none".into();
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs this thread may run on (its affinity mask).
pub fn allowed_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    // SAFETY: CPU_ISSET reads the set for CPU numbers below CPU_SETSIZE.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect())
}

/// Pins the calling thread to `cpu` (`sched_setaffinity(0, {cpu})`).
pub fn pin_this_thread(cpu: u32) -> std::io::Result<()> {
    let c = usize::try_from(cpu)
        .ok()
        .filter(|&c| c < libc::CPU_SETSIZE as usize)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(c, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_vcpu_gets_the_next_allowed_cpu_in_ascending_order() {
        let p = Placement::assign(&[5, 2, 9, 2, 3], 3).unwrap();
        assert_eq!(p.cpus(), &[2, 3, 5]);
        assert_eq!(p.cpu(0), Some(2));
        assert_eq!(p.cpu(3), None);
        assert_eq!(serde_json::to_string(&p).unwrap(), "[2,3,5]");
        assert_eq!(Placement::assign(&[0, 1], 2).unwrap().cpus(), &[0, 1]);
    }

    #[test]
    fn fewer_cpus_than_vcpus_is_refused_naming_both() {
        let e = Placement::assign(&[0, 1, 2, 7, 7], 5).unwrap_err();
        assert!(matches!(
            e,
            PinError::TooFewCpus {
                vcpus: 5,
                allowed: 4,
                ..
            }
        ));
        let msg = e.to_string();
        assert!(
            msg.contains("5 vCPUs") && msg.contains("4 CPU(s) (0-2,7)"),
            "{msg}"
        );
        assert_eq!(e.kind(), "pin-too-few-cpus");
        assert!(Placement::assign(&[], 1)
            .unwrap_err()
            .to_string()
            .contains("(none)"));
    }

    #[test]
    fn this_process_has_at_least_one_cpu_and_a_thread_can_pin_itself_to_it() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let p = Placement::of_this_process(1).unwrap();
        assert_eq!(p.cpu(0), Some(allowed[0]));
        // A thread of its own, so the test runner's threads keep their affinity.
        let cpu = allowed[allowed.len() - 1];
        let seen = std::thread::spawn(move || {
            pin_this_thread(cpu).unwrap();
            allowed_cpus().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        assert!(pin_this_thread(u32::MAX).is_err());
    }
}
