//! Stage 5: vCPUs. CPUID from KVM_GET_SUPPORTED_CPUID through the platform of [`crate::cpuid`]
//! (one package of N cores, TSC deadline timer, …), MSRs, FPU, LAPIC (LINT0 ExtINT, LINT1
//! NMI), and the BSP's registers for its boot protocol.
//! APs get no registers: with the in-kernel LAPIC they wait for INIT/SIPI like real hardware.
use kvm_bindings::KVM_MAX_CPUID_ENTRIES;
use kvm_bindings::{kvm_fpu, kvm_msr_entry, kvm_regs, kvm_segment, CpuId, Msrs};
use kvm_ioctls::{Cap, Kvm, VcpuFd, VmFd};

use crate::cpuid::{guest_cpuid, host_brand, Platform};
use truecold_proto::platform::CpuPlatform;

use crate::boot_params::{BOOT_STACK, GDT_ADDR, PML4_ADDR, PVH_INFO_ADDR, ZERO_PAGE_ADDR};
use crate::loader::{Loaded, Protocol};

/// Why a vCPU could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error(transparent)]
    Count(truecold_proto::limits::LimitError),
    #[error(transparent)]
    Platform(truecold_proto::platform::PlatformError),
    #[error("KVM_GET_SUPPORTED_CPUID failed")]
    SupportedCpuid(#[source] kvm_ioctls::Error),
    #[error("KVM_GET_MSR_INDEX_LIST failed")]
    MsrList(#[source] kvm_ioctls::Error),
    #[error("vCPU {vcpu}: {what} failed")]
    Ioctl {
        vcpu: u8,
        what: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("vCPU {vcpu}: KVM set {set} of {want} MSRs")]
    MsrsPartial { vcpu: u8, set: usize, want: usize },
    #[error("cannot build the MSR list")]
    MsrAlloc,
    #[error("the guest CPUID table has more than {KVM_MAX_CPUID_ENTRIES} entries")]
    CpuidAlloc,
}

const CR0_PE: u64 = 1;
const CR0_ET: u64 = 1 << 4;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;

fn ioctl<T>(vcpu: u8, what: &'static str, r: Result<T, kvm_ioctls::Error>) -> Result<T, CpuError> {
    r.map_err(|source| CpuError::Ioctl { vcpu, what, source })
}

/// The MSRs set at reset, filtered by what KVM supports (pure given the list).
pub fn boot_msrs(supported: &[u32]) -> Vec<kvm_msr_entry> {
    const MSRS: [(u32, u64); 10] = [
        (0x174, 0),             // IA32_SYSENTER_CS
        (0x175, 0),             // IA32_SYSENTER_ESP
        (0x176, 0),             // IA32_SYSENTER_EIP
        (0xc000_0081, 0),       // STAR
        (0xc000_0082, 0),       // LSTAR
        (0xc000_0083, 0),       // CSTAR
        (0xc000_0102, 0),       // KERNEL_GS_BASE
        (0xc000_0084, 0),       // SYSCALL_MASK
        (0x1a0, 1),             // IA32_MISC_ENABLE: fast strings
        (0x2ff, (1 << 11) | 6), // MTRR default type: enabled, write-back
    ];
    MSRS.iter()
        .filter(|(i, _)| supported.contains(i))
        .map(|&(index, data)| kvm_msr_entry {
            index,
            data,
            ..Default::default()
        })
        .collect()
}

fn set_lvt(regs: &mut [std::os::raw::c_char; 1024], off: usize, mode: u32) {
    let mut b = [0u8; 4];
    for (i, x) in b.iter_mut().enumerate() {
        *x = regs[off + i] as u8;
    }
    let v = (u32::from_le_bytes(b) & !0x700) | (mode << 8);
    for (i, x) in v.to_le_bytes().iter().enumerate() {
        regs[off + i] = *x as std::os::raw::c_char;
    }
}

fn segment(selector: u16, type_: u8, long: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_,
        present: 1,
        dpl: 0,
        db: u8::from(!long),
        s: 1,
        l: u8::from(long),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

fn set_boot_registers(vcpu: &VcpuFd, loaded: &Loaded) -> Result<(), CpuError> {
    let mut s = ioctl(0, "KVM_GET_SREGS", vcpu.get_sregs())?;
    let long = loaded.protocol == Protocol::Linux64;
    let code = segment(0x08, 0xb, long);
    let data = segment(0x10, 0x3, false);
    s.cs = code;
    s.ds = data;
    s.es = data;
    s.fs = data;
    s.gs = data;
    s.ss = data;
    s.tr = kvm_segment {
        base: 0,
        limit: 0x67,
        selector: 0x18,
        type_: 0xb,
        present: 1,
        s: 0,
        ..Default::default()
    };
    s.gdt.base = GDT_ADDR;
    s.gdt.limit = 31;
    s.idt.base = 0;
    s.idt.limit = 0;
    let mut regs = kvm_regs {
        rflags: 2,
        rip: loaded.entry,
        ..Default::default()
    };
    if long {
        s.cr3 = PML4_ADDR;
        s.cr4 = CR4_PAE;
        s.cr0 = CR0_PE | CR0_ET | CR0_PG;
        s.efer = EFER_LME | EFER_LMA;
        regs.rsp = BOOT_STACK;
        regs.rbp = BOOT_STACK;
        regs.rsi = ZERO_PAGE_ADDR;
    } else {
        s.cr0 = CR0_PE | CR0_ET;
        s.cr3 = 0;
        s.cr4 = 0;
        s.efer = 0;
        regs.rbx = PVH_INFO_ADDR;
    }
    ioctl(0, "KVM_SET_SREGS", vcpu.set_sregs(&s))?;
    ioctl(0, "KVM_SET_REGS", vcpu.set_regs(&regs))
}

/// The platform this host's KVM lets the VMM present to `vcpus` vCPUs as `cpu` says, and
/// each vCPU's CPUID table (index = vCPU). Also what `truecold-vmm cpuid` prints.
pub fn tables(kvm: &Kvm, vcpus: u8, cpu: CpuPlatform) -> Result<(Platform, Vec<CpuId>), CpuError> {
    truecold_proto::limits::Vcpus::new(u64::from(vcpus)).map_err(CpuError::Count)?;
    cpu.check(vcpus).map_err(CpuError::Platform)?;
    let supported = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(CpuError::SupportedCpuid)?;
    let platform = Platform {
        vcpus,
        tsc_deadline_timer: kvm.check_extension(Cap::TscDeadlineTimer),
        cpu,
    };
    let brand = host_brand();
    let tables = (0..vcpus)
        .map(|id| {
            let e = guest_cpuid(supported.as_slice(), &platform, id, brand);
            CpuId::from_entries(&e).map_err(|_| CpuError::CpuidAlloc)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((platform, tables))
}

/// Creates and configures `vcpus` vCPUs presented as `cpu` says; vCPU 0 is the BSP and gets
/// the boot registers.
pub fn create(
    kvm: &Kvm,
    vm: &VmFd,
    vcpus: u8,
    cpu: CpuPlatform,
    loaded: &Loaded,
) -> Result<Vec<VcpuFd>, CpuError> {
    let (_, cpuids) = tables(kvm, vcpus, cpu)?;
    let msr_list = kvm.get_msr_index_list().map_err(CpuError::MsrList)?;
    let msrs = boot_msrs(msr_list.as_slice());
    let mut out = Vec::with_capacity(usize::from(vcpus));
    for (id, cpuid) in (0..vcpus).zip(&cpuids) {
        let vcpu = ioctl(id, "KVM_CREATE_VCPU", vm.create_vcpu(u64::from(id)))?;
        ioctl(id, "KVM_SET_CPUID2", vcpu.set_cpuid2(cpuid))?;
        let m = Msrs::from_entries(&msrs).map_err(|_| CpuError::MsrAlloc)?;
        let set = ioctl(id, "KVM_SET_MSRS", vcpu.set_msrs(&m))?;
        if set != msrs.len() {
            return Err(CpuError::MsrsPartial {
                vcpu: id,
                set,
                want: msrs.len(),
            });
        }
        let fpu = kvm_fpu {
            fcw: 0x37f,
            mxcsr: 0x1f80,
            ..Default::default()
        };
        ioctl(id, "KVM_SET_FPU", vcpu.set_fpu(&fpu))?;
        let mut lapic = ioctl(id, "KVM_GET_LAPIC", vcpu.get_lapic())?;
        set_lvt(&mut lapic.regs, 0x350, 7); // LINT0: ExtINT
        set_lvt(&mut lapic.regs, 0x360, 4); // LINT1: NMI
        ioctl(id, "KVM_SET_LAPIC", vcpu.set_lapic(&lapic))?;
        if id == 0 {
            set_boot_registers(&vcpu, loaded)?;
        }
        out.push(vcpu);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msrs_filtered() {
        let m = boot_msrs(&[0x1a0, 0x2ff, 0x9999]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].data, (1 << 11) | 6);
    }
}
