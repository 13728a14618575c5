//! Stage 1: open /dev/kvm and check the capabilities this VMM relies on.
use kvm_ioctls::{Cap, Kvm};

/// Why /dev/kvm cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KvmError {
    #[error("cannot open /dev/kvm (is KVM available and are you allowed to use it?)")]
    Open(#[source] kvm_ioctls::Error),
    #[error("KVM API version {0}, want 12")]
    ApiVersion(i32),
    #[error("KVM lacks the capability {0}")]
    MissingCap(&'static str),
}

impl KvmError {
    /// Stable kebab-case kind (the CLI's JSON error report).
    pub fn kind(&self) -> &'static str {
        match self {
            KvmError::Open(_) => "kvm-unavailable",
            KvmError::ApiVersion(_) => "kvm-api-version",
            KvmError::MissingCap(_) => "kvm-missing-capability",
        }
    }
}

/// Capabilities required by this VMM, by name (reported as `kvm_caps`).
pub const REQUIRED_CAPS: [(Cap, &str); 7] = [
    (Cap::Irqchip, "KVM_CAP_IRQCHIP"),
    (Cap::UserMemory, "KVM_CAP_USER_MEMORY"),
    (Cap::SetTssAddr, "KVM_CAP_SET_TSS_ADDR"),
    (Cap::Pit2, "KVM_CAP_PIT2"),
    (Cap::ExtCpuid, "KVM_CAP_EXT_CPUID"),
    (Cap::Irqfd, "KVM_CAP_IRQFD"),
    (Cap::ImmediateExit, "KVM_CAP_IMMEDIATE_EXIT"),
];

/// Opens /dev/kvm and checks [`REQUIRED_CAPS`]; returns the handle and the caps used.
pub fn open() -> Result<(Kvm, Vec<String>), KvmError> {
    let kvm = Kvm::new().map_err(KvmError::Open)?;
    let v = kvm.get_api_version();
    if v != 12 {
        return Err(KvmError::ApiVersion(v));
    }
    let mut used = Vec::with_capacity(REQUIRED_CAPS.len() + 1);
    for (cap, name) in REQUIRED_CAPS {
        if !kvm.check_extension(cap) {
            return Err(KvmError::MissingCap(name));
        }
        used.push(name.to_string());
    }
    if kvm.check_extension(Cap::SetIdentityMapAddr) {
        used.push("KVM_CAP_SET_IDENTITY_MAP_ADDR".to_string());
    }
    Ok((kvm, used))
}
