//! The one detection of the host's kind (the VMM's report and the bench's campaign both
//! state it): CPUID, /proc/cpuinfo and /sys/module/kvm_pvm, decided by
//! `truecold_proto::kinds::HostKind::decide` (pure, in proto).

use truecold_proto::kinds::{Detection, HostKind};

/// Observes this host (the order is [`HostKind`]'s) and says whether an override (`forced`,
/// else `TRUECOLD_HOST_KIND`) replaced what detection found.
pub fn detection(forced: Option<HostKind>) -> Detection {
    let env = std::env::var("TRUECOLD_HOST_KIND")
        .ok()
        .and_then(|v| HostKind::from_name(&v));
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Detection::new(
        forced.or(env),
        HostKind::decide(
            None,
            &hypervisor_signature(),
            std::path::Path::new("/sys/module/kvm_pvm").exists(),
            &cpuinfo,
        ),
    )
}

/// The 12-byte hypervisor vendor signature at CPUID 0x4000_0000 ("" when none).
pub fn hypervisor_signature() -> String {
    let leaf1 = core::arch::x86_64::__cpuid(1);
    if leaf1.ecx & (1 << 31) == 0 {
        return String::new();
    }
    // Hypervisor leaves are defined when the hypervisor bit is set.
    let r = core::arch::x86_64::__cpuid(0x4000_0000);
    let mut b = Vec::with_capacity(12);
    for w in [r.ebx, r.ecx, r.edx] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    String::from_utf8_lossy(&b)
        .trim_end_matches('\0')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forced_kind_wins_and_says_so() {
        let d = detection(Some(HostKind::Hardware));
        assert_eq!(d.kind, HostKind::Hardware);
        assert!(d.forced);
        assert!(d.detected.is_some());
        // The signature is at most 12 printable bytes (or empty without a hypervisor).
        assert!(hypervisor_signature().len() <= 12);
    }
}
