//! The CPU platform truecold-vmm presents beyond the host's features, where a caller may
//! choose it: how the vCPUs are grouped into packages and whether the guest is told its TSC
//! is invariant. One value from `truecold run --packages/--invariant-tsc` through
//! `truecold-vmm boot` (its report's `config.cpu_platform`) to a bundle's
//! `configuration.cpu_platform`, and what the guest must then report seeing
//! ([`crate::GuestPlatform::matches`]).
//!
//! The default, [`CpuPlatform::ABSENT`], is what every record without the field means: one
//! package of N single-threaded cores and the host's own invariant-TSC bit, passed through.
//! Every writer leaves the field out exactly for it, so records written before the choice
//! existed keep their bytes.
use serde::{Deserialize, Serialize};

/// Why a [`CpuPlatform`] cannot be presented to a guest of some number of vCPUs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlatformError {
    #[error("--packages 0: a guest has at least one package")]
    NoPackages,
    #[error(
        "--packages {packages}: {vcpus} vCPUs do not split into {packages} packages of equal size"
    )]
    Uneven { packages: u8, vcpus: u8 },
    #[error(
        "--packages {packages}: {cores} cores a package is not a power of two (each vCPU's APIC \
         id is its index, so a package's cores fill a whole number of APIC-id bits)"
    )]
    CoresNotPowerOfTwo { packages: u8, cores: u8 },
}

/// How truecold-vmm presents the vCPUs (docs/architecture.md, "The platform").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuPlatform {
    /// Packages (sockets) the vCPUs are split into, each of `vcpus / packages`
    /// single-threaded cores, stated alike in every CPUID topology leaf.
    pub packages: u8,
    /// The guest is told its TSC is invariant (CPUID 0x8000_0007 EDX[8]; Linux:
    /// `constant_tsc`, `nonstop_tsc`) even where the host's KVM does not report it. Linux on
    /// AMD trusts the TSCs of several packages to be in step only with it: without it, a
    /// guest of several packages marks its TSC unstable and never runs the TSC
    /// synchronisation test. A statement about the host, true of the nested harness (L1's
    /// TSC is the virtual clock) and of hosts whose CPUs have the bit; false elsewhere.
    pub invariant_tsc: bool,
}

impl CpuPlatform {
    /// What a record without the field means, and truecold-vmm's default: one package, the
    /// host's invariant-TSC bit passed through.
    pub const ABSENT: CpuPlatform = CpuPlatform {
        packages: 1,
        invariant_tsc: false,
    };

    /// [`CpuPlatform::ABSENT`] (a serde `default` function).
    pub fn absent() -> Self {
        Self::ABSENT
    }

    /// Whether a writer leaves this platform out of its record (a serde
    /// `skip_serializing_if` function).
    pub fn is_absent(&self) -> bool {
        *self == Self::ABSENT
    }

    /// Cores in each package for `vcpus` vCPUs, once [`CpuPlatform::check`] holds.
    pub fn cores_per_package(&self, vcpus: u8) -> u8 {
        vcpus / self.packages.max(1)
    }

    /// The flags that say this platform on a `truecold run` or `truecold-vmm boot` line
    /// (both spell it alike): none at the default, as a record leaves the field out.
    pub fn flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.packages != 1 {
            v.push("--packages".to_string());
            v.push(self.packages.to_string());
        }
        if self.invariant_tsc {
            v.push("--invariant-tsc".to_string());
        }
        v
    }

    /// Whether `vcpus` vCPUs split into these packages: equal packages, and of a
    /// power-of-two count of cores where there are several, so that vCPU i's APIC id, i, is
    /// `package << bits | core` (the MP table lists the vCPUs' indices as their APIC ids).
    /// One package may hold any count.
    pub fn check(&self, vcpus: u8) -> Result<(), PlatformError> {
        let packages = self.packages;
        if packages == 0 {
            return Err(PlatformError::NoPackages);
        }
        if vcpus % packages != 0 {
            return Err(PlatformError::Uneven { packages, vcpus });
        }
        let cores = vcpus / packages;
        if packages > 1 && !cores.is_power_of_two() {
            return Err(PlatformError::CoresNotPowerOfTwo { packages, cores });
        }
        Ok(())
    }
}

impl Default for CpuPlatform {
    fn default() -> Self {
        Self::ABSENT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(packages: u8) -> CpuPlatform {
        CpuPlatform {
            packages,
            invariant_tsc: false,
        }
    }

    #[test]
    fn packages_split_the_vcpus_evenly_into_powers_of_two() {
        assert_eq!(p(1).check(16), Ok(()));
        assert_eq!(p(16).check(16), Ok(()));
        assert_eq!(p(4).check(16), Ok(()));
        assert_eq!(p(1).check(1), Ok(()));
        assert_eq!(p(1).check(3), Ok(()), "one package of any count");
        assert_eq!(p(0).check(4), Err(PlatformError::NoPackages));
        assert_eq!(
            p(3).check(16),
            Err(PlatformError::Uneven {
                packages: 3,
                vcpus: 16
            })
        );
        assert_eq!(
            p(2).check(6),
            Err(PlatformError::CoresNotPowerOfTwo {
                packages: 2,
                cores: 3
            })
        );
        assert_eq!(
            p(2).check(1),
            Err(PlatformError::Uneven {
                packages: 2,
                vcpus: 1
            })
        );
        assert_eq!(p(4).cores_per_package(16), 4);
    }

    #[test]
    fn the_default_is_absent_and_left_out() {
        assert!(CpuPlatform::default().is_absent());
        assert!(!p(2).is_absent());
        let stated = CpuPlatform {
            packages: 1,
            invariant_tsc: true,
        };
        assert!(!stated.is_absent());
        assert_eq!(
            serde_json::to_string(&stated).unwrap(),
            r#"{"packages":1,"invariant_tsc":true}"#
        );
        assert!(serde_json::from_str::<CpuPlatform>(r#"{"packages":1}"#).is_err());
        assert!(CpuPlatform::ABSENT.flags().is_empty());
        assert_eq!(p(16).flags(), ["--packages", "16"]);
        assert_eq!(stated.flags(), ["--invariant-tsc"]);
    }
}
