//! Stage 2: create the VM with its in-kernel interrupt controllers, PIT and TSS.
use kvm_bindings::{kvm_pit_config, KVM_PIT_SPEAKER_DUMMY};
use kvm_ioctls::{Cap, Kvm, VmFd};

/// Guest-physical address of the TSS pages KVM needs on Intel (just below the BIOS area).
pub const TSS_ADDR: u64 = 0xfffb_d000;
/// The identity-map page for real mode on Intel, right below the TSS.
pub const IDENTITY_MAP_ADDR: u64 = 0xfffb_c000;

/// Why the VM could not be created.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("KVM_CREATE_VM failed")]
    Create(#[source] kvm_ioctls::Error),
    #[error("KVM_SET_TSS_ADDR failed")]
    Tss(#[source] kvm_ioctls::Error),
    #[error("KVM_SET_IDENTITY_MAP_ADDR failed")]
    IdentityMap(#[source] kvm_ioctls::Error),
    #[error("KVM_CREATE_IRQCHIP failed")]
    Irqchip(#[source] kvm_ioctls::Error),
    #[error("KVM_CREATE_PIT2 failed")]
    Pit(#[source] kvm_ioctls::Error),
}

/// Creates the VM: TSS (+ identity map where supported), IRQ chip (PIC, IOAPIC, LAPICs), PIT.
pub fn create(kvm: &Kvm) -> Result<VmFd, VmError> {
    let vm = kvm.create_vm().map_err(VmError::Create)?;
    vm.set_tss_address(TSS_ADDR as usize)
        .map_err(VmError::Tss)?;
    if kvm.check_extension(Cap::SetIdentityMapAddr) {
        vm.set_identity_map_address(IDENTITY_MAP_ADDR)
            .map_err(VmError::IdentityMap)?;
    }
    vm.create_irq_chip().map_err(VmError::Irqchip)?;
    let pit = kvm_pit_config {
        flags: KVM_PIT_SPEAKER_DUMMY,
        ..Default::default()
    };
    vm.create_pit2(pit).map_err(VmError::Pit)?;
    Ok(vm)
}
