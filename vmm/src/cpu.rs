//! Stage 5: vCPUs. CPUID from KVM_GET_SUPPORTED_CPUID with the topology fixed up per vCPU,
//! MSRs, FPU, LAPIC (LINT0 ExtINT, LINT1 NMI), and the BSP's registers for its boot protocol.
//! APs get no registers: with the in-kernel LAPIC they wait for INIT/SIPI like real hardware.
use kvm_bindings::{
    kvm_cpuid_entry2, kvm_fpu, kvm_msr_entry, kvm_regs, kvm_segment, Msrs, KVM_MAX_CPUID_ENTRIES,
};
use kvm_ioctls::{Kvm, VcpuFd, VmFd};

use crate::loader::{
    Loaded, Protocol, BOOT_STACK, GDT_ADDR, PML4_ADDR, PVH_INFO_ADDR, ZERO_PAGE_ADDR,
};

/// Why a vCPU could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("{0} vCPUs requested; 1 to {max} are supported", max = crate::mptable::MAX_VCPUS)]
    Count(u8),
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
}

const CR0_PE: u64 = 1;
const CR0_ET: u64 = 1 << 4;
const CR0_PG: u64 = 1 << 31;
const CR4_PAE: u64 = 1 << 5;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;

/// Bits needed to number `n` items (ceil(log2 n)).
fn shift_for(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// Fixes the supported CPUID up for vCPU `id` of `vcpus` (pure): APIC ids, logical processor
/// count, hypervisor bit, cache sharing (leaf 4), extended topology (leaves 0xb, 0x1f; one
/// thread per core, all vCPUs cores of one package), AMD core count and extended APIC id.
pub fn fixup_cpuid(entries: &mut [kvm_cpuid_entry2], id: u8, vcpus: u8) {
    let n = u32::from(vcpus.max(1));
    let id32 = u32::from(id);
    for e in entries.iter_mut() {
        match e.function {
            1 => {
                e.ebx = (e.ebx & 0x0000_ffff) | (n << 16) | (id32 << 24);
                e.ecx |= 1 << 31;
                if n > 1 {
                    e.edx |= 1 << 28;
                }
            }
            4 => {
                let level = (e.eax >> 5) & 7;
                let sharing = if level >= 3 { n - 1 } else { 0 };
                e.eax = (e.eax & 0x3ff) | (sharing << 14) | ((n - 1) << 26);
            }
            0xb | 0x1f => {
                e.edx = id32;
                match e.index {
                    0 => {
                        e.eax = 0;
                        e.ebx = 1;
                        e.ecx = 1 << 8;
                    }
                    1 => {
                        e.eax = shift_for(n);
                        e.ebx = n;
                        e.ecx = (2 << 8) | 1;
                    }
                    i => {
                        e.eax = 0;
                        e.ebx = 0;
                        e.ecx = i & 0xff;
                    }
                }
            }
            0x8000_0008 => {
                e.ecx = (e.ecx & !0xf0ff) | (shift_for(n) << 12) | (n - 1);
            }
            0x8000_001e => {
                e.eax = id32;
                e.ebx = id32 & 0xff;
                e.ecx = 0;
            }
            _ => {}
        }
    }
}

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

/// Creates and configures `vcpus` vCPUs; vCPU 0 is the BSP and gets the boot registers.
pub fn create(kvm: &Kvm, vm: &VmFd, vcpus: u8, loaded: &Loaded) -> Result<Vec<VcpuFd>, CpuError> {
    if vcpus == 0 || vcpus > crate::mptable::MAX_VCPUS {
        return Err(CpuError::Count(vcpus));
    }
    let supported = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(CpuError::SupportedCpuid)?;
    let msr_list = kvm.get_msr_index_list().map_err(CpuError::MsrList)?;
    let msrs = boot_msrs(msr_list.as_slice());
    let mut out = Vec::with_capacity(usize::from(vcpus));
    for id in 0..vcpus {
        let vcpu = ioctl(id, "KVM_CREATE_VCPU", vm.create_vcpu(u64::from(id)))?;
        let mut cpuid = supported.clone();
        fixup_cpuid(cpuid.as_mut_slice(), id, vcpus);
        ioctl(id, "KVM_SET_CPUID2", vcpu.set_cpuid2(&cpuid))?;
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

    fn entry(function: u32, index: u32, eax: u32) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 {
            function,
            index,
            eax,
            ebx: 0x0000_0800,
            ..Default::default()
        }
    }

    #[test]
    fn topology_fixups() {
        let mut e = vec![
            entry(1, 0, 0),
            entry(4, 0, (1 << 5) | 1),
            entry(4, 3, (3 << 5) | 3),
            entry(0xb, 0, 0),
            entry(0xb, 1, 0),
            entry(0xb, 2, 0),
            entry(0x8000_0008, 0, 0),
        ];
        fixup_cpuid(&mut e, 2, 4);
        assert_eq!(e[0].ebx >> 24, 2, "initial APIC id");
        assert_eq!((e[0].ebx >> 16) & 0xff, 4, "logical count");
        assert_eq!(e[0].ebx & 0xffff, 0x0800, "CLFLUSH size kept");
        assert_ne!(e[0].ecx & (1 << 31), 0, "hypervisor bit");
        assert_ne!(e[0].edx & (1 << 28), 0, "HTT");
        assert_eq!(e[1].eax >> 26, 3);
        assert_eq!((e[1].eax >> 14) & 0xfff, 0, "L1 per core");
        assert_eq!((e[2].eax >> 14) & 0xfff, 3, "L3 shared");
        assert_eq!(e[1].eax & 0x3ff, (1 << 5) | 1);
        assert_eq!((e[3].ebx, e[3].ecx, e[3].edx), (1, 0x100, 2));
        assert_eq!((e[4].eax, e[4].ebx, e[4].ecx, e[4].edx), (2, 4, 0x201, 2));
        assert_eq!((e[5].ebx, e[5].ecx & 0xff00), (0, 0));
        assert_eq!(e[6].ecx & 0xff, 3);
    }

    #[test]
    fn single_vcpu_has_no_htt() {
        let mut e = vec![entry(1, 0, 0)];
        fixup_cpuid(&mut e, 0, 1);
        assert_eq!(e[0].edx & (1 << 28), 0);
        assert_eq!(e[0].ebx >> 16, 1);
    }

    #[test]
    fn shifts() {
        assert_eq!([1, 2, 3, 4, 5, 8].map(shift_for), [0, 1, 2, 2, 3, 3]);
    }

    #[test]
    fn msrs_filtered() {
        let m = boot_msrs(&[0x1a0, 0x2ff, 0x9999]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].data, (1 << 11) | 6);
    }
}
