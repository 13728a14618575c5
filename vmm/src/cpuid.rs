//! The platform the guest sees through CPUID: one pure function from the host's supported
//! CPUID (KVM_GET_SUPPORTED_CPUID) to one vCPU's table. No KVM here; unit-tested against
//! recorded Intel and AMD dumps (`vmm/tests/data/cpuid/`) because the nested harness only
//! emulates AMD.
//!
//! What every guest gets, on either vendor (docs/architecture.md, "The platform"):
//! - **Topology: P packages of C = N/P single-threaded cores** (P = 1 unless `--packages`
//!   says otherwise; [`truecold_proto::platform::CpuPlatform`]), APIC id = vCPU index =
//!   `package << bits(C) | core` (C a power of two), stated the same way in every leaf a
//!   kernel may read: 1 (initial APIC id, logical count C, HTT), 4 (cores per package, cache
//!   sharing), 0xb and 0x1f (SMT level of 1, core level of C; KVM reports these leaves
//!   empty, so they are written whole), 0x8000_0008 (cores, APIC id size), 0x8000_001d
//!   (cache sharing), 0x8000_001e (extended APIC id, core id within the package, node id =
//!   package). 0x8000_0026 (AMD extended topology) is removed: Linux prefers it to 0xb when
//!   present, and the host's values describe the host. The MP table lists the same APIC ids.
//!   Linux on AMD assumes the TSCs of several packages are not synchronized unless the TSC
//!   is invariant: a guest of several packages without the bit marks its TSC unstable.
//! - **TSC deadline timer** (leaf 1 ECX[24]) when KVM emulates it
//!   (KVM_CAP_TSC_DEADLINE_TIMER): without it, Linux calibrates the LAPIC timer against the
//!   PIT for 100 ms and then verifies the result for another 100 ms (`calibrate_APIC_clock`,
//!   `LAPIC_CAL_LOOPS = HZ/10`) — measured at ~220 ms of every truecold boot before this.
//! - **Invariant TSC** (0x8000_0007 EDX[8]) as KVM reports it, passed through, unless the
//!   caller states it (`--invariant-tsc`, for a host whose TSC is invariant though its KVM
//!   does not say so: the nested harness, whose L1 TSC is the virtual clock).
//! - **The hypervisor bit** (leaf 1 ECX[31]).
//! - **The host's brand string** (0x8000_0002..4): KVM's values when it reports them, else
//!   the host's own (`host_brand`), so the guest prints a model name.
use kvm_bindings::{kvm_cpuid_entry2, KVM_CPUID_FLAG_SIGNIFCANT_INDEX};

/// What the VMM presents beyond the host's supported features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Platform {
    /// vCPUs, split into `cpu.packages` packages.
    pub vcpus: u8,
    /// KVM emulates the TSC deadline timer (KVM_CAP_TSC_DEADLINE_TIMER).
    pub tsc_deadline_timer: bool,
    /// The caller's choices: packages and the invariant-TSC statement (checked against
    /// `vcpus` before: [`truecold_proto::platform::CpuPlatform::check`]).
    pub cpu: truecold_proto::platform::CpuPlatform,
}

/// The CPU vendor, from leaf 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    /// AMD and Hygon (the same topology leaves).
    Amd,
    Other,
}

/// Leaf 1 ECX: TSC deadline timer.
pub const TSC_DEADLINE_BIT: u32 = 1 << 24;
/// Leaf 1 ECX: running under a hypervisor.
pub const HYPERVISOR_BIT: u32 = 1 << 31;
/// Leaf 1 EDX: HTT (the logical-processor count in EBX[23:16] is valid).
pub const HTT_BIT: u32 = 1 << 28;
/// 0x8000_0007 EDX: invariant TSC (Linux: `constant_tsc` and `nonstop_tsc`).
pub const INVARIANT_TSC_BIT: u32 = 1 << 8;

/// Topology level types of leaves 0xb / 0x1f (ECX[15:8]).
const LEVEL_SMT: u32 = 1;
const LEVEL_CORE: u32 = 2;

/// Bits needed to number `n` items (ceil(log2 n)): the APIC-id shift of a level of `n`.
pub fn shift_for(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// The vendor named by leaf 0 of `entries`.
pub fn vendor(entries: &[kvm_cpuid_entry2]) -> Vendor {
    let Some(e) = find(entries, 0, 0) else {
        return Vendor::Other;
    };
    let mut id = [0u8; 12];
    id[..4].copy_from_slice(&e.ebx.to_le_bytes());
    id[4..8].copy_from_slice(&e.edx.to_le_bytes());
    id[8..].copy_from_slice(&e.ecx.to_le_bytes());
    match &id {
        b"GenuineIntel" => Vendor::Intel,
        b"AuthenticAMD" | b"HygonGenuine" => Vendor::Amd,
        _ => Vendor::Other,
    }
}

/// The entry for `function`/`index`, if present.
pub fn find(entries: &[kvm_cpuid_entry2], function: u32, index: u32) -> Option<&kvm_cpuid_entry2> {
    entries
        .iter()
        .find(|e| e.function == function && e.index == index)
}

fn max_leaf(entries: &[kvm_cpuid_entry2], base: u32) -> u32 {
    find(entries, base, 0).map_or(0, |e| e.eax)
}

fn entry(function: u32, index: u32, regs: [u32; 4]) -> kvm_cpuid_entry2 {
    kvm_cpuid_entry2 {
        function,
        index,
        flags: KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
        eax: regs[0],
        ebx: regs[1],
        ecx: regs[2],
        edx: regs[3],
        ..Default::default()
    }
}

/// Leaf 0xb / 0x1f for vCPU `apic_id` in packages of `c` cores: SMT level (1 thread), core
/// level (`c` cores; its shift is the package's), then the terminating invalid level.
fn extended_topology(function: u32, apic_id: u32, c: u32) -> [kvm_cpuid_entry2; 3] {
    [
        entry(function, 0, [0, 1, LEVEL_SMT << 8, apic_id]),
        entry(
            function,
            1,
            [shift_for(c), c, (LEVEL_CORE << 8) | 1, apic_id],
        ),
        entry(function, 2, [0, 0, 2, apic_id]),
    ]
}

/// One vCPU's CPUID: `supported` with the platform above applied. `vcpu` is the vCPU index
/// (its APIC id); `host_brand` is the host's own brand string (leaves 0x8000_0002..4, EAX..EDX
/// each), used when `supported` lacks it.
pub fn guest_cpuid(
    supported: &[kvm_cpuid_entry2],
    platform: &Platform,
    vcpu: u8,
    host_brand: Option<[u32; 12]>,
) -> Vec<kvm_cpuid_entry2> {
    // Cores a package (N when one package); `check` made it divide N, and a power of two
    // where there are several packages (so id / c is id's bits above shift_for(c)).
    let c = u32::from(platform.cpu.cores_per_package(platform.vcpus.max(1)).max(1));
    let id = u32::from(vcpu);
    let (package, core) = (id / c, id % c);
    let max_basic = max_leaf(supported, 0);
    let mut max_ext = max_leaf(supported, 0x8000_0000);
    let mut out: Vec<kvm_cpuid_entry2> = supported
        .iter()
        .filter(|e| !matches!(e.function, 0xb | 0x1f | 0x8000_0026))
        .copied()
        .collect();
    for e in out.iter_mut() {
        match e.function {
            1 => {
                e.ebx = (e.ebx & 0x0000_ffff) | (c << 16) | (id << 24);
                e.ecx |= HYPERVISOR_BIT;
                if platform.tsc_deadline_timer {
                    e.ecx |= TSC_DEADLINE_BIT;
                } else {
                    e.ecx &= !TSC_DEADLINE_BIT;
                }
                if c > 1 {
                    e.edx |= HTT_BIT;
                } else {
                    e.edx &= !HTT_BIT;
                }
            }
            // Deterministic cache parameters: EAX[31:26] cores per package - 1, EAX[25:14]
            // logical processors sharing this cache - 1 (L1/L2 per core, L3 per package).
            4 if e.eax & 0x1f != 0 => {
                let level = (e.eax >> 5) & 7;
                let sharing = if level >= 3 { c - 1 } else { 0 };
                e.eax = (e.eax & 0x3fff) | (sharing << 14) | ((c - 1) << 26);
            }
            // ECX[7:0] threads in the package - 1, ECX[15:12] APIC-id bits for them.
            0x8000_0008 => {
                e.ecx = (e.ecx & !0xf0ff) | (shift_for(c) << 12) | (c - 1);
            }
            // AMD cache topology: EAX[25:14] logical processors sharing - 1.
            0x8000_001d if e.eax & 0x1f != 0 => {
                let level = (e.eax >> 5) & 7;
                let sharing = if level >= 3 { c - 1 } else { 0 };
                e.eax = (e.eax & !(0xfff << 14)) | (sharing << 14);
            }
            // Extended APIC id; core id within the package, 1 thread per core; one node a
            // package, numbered as the package.
            0x8000_001e => {
                e.eax = id;
                e.ebx = core & 0xff;
                e.ecx = package & 0xff;
                e.edx = 0;
            }
            0x8000_0007 if platform.cpu.invariant_tsc => e.edx |= INVARIANT_TSC_BIT,
            0x8000_0002..=0x8000_0004 => {}
            _ => {}
        }
    }
    for function in [0xb, 0x1f] {
        if max_basic >= function {
            out.extend(extended_topology(function, id, c));
        }
    }
    // A stated invariant TSC where the host's table has no 0x8000_0007: the leaf is added,
    // and the extended range raised to hold it.
    if platform.cpu.invariant_tsc && find(&out, 0x8000_0007, 0).is_none() {
        let mut e = entry(0x8000_0007, 0, [0, 0, 0, INVARIANT_TSC_BIT]);
        e.flags = 0;
        out.push(e);
        if max_ext < 0x8000_0007 {
            max_ext = 0x8000_0007;
            if let Some(top) = out.iter_mut().find(|e| e.function == 0x8000_0000) {
                top.eax = max_ext;
            } else {
                let mut top = entry(0x8000_0000, 0, [max_ext, 0, 0, 0]);
                top.flags = 0;
                out.push(top);
            }
        }
    }
    if max_ext >= 0x8000_0004 {
        if let Some(brand) = host_brand {
            // A short brand leaves 0x8000_0004 zero; only a wholly empty one is "missing".
            let missing = (0..3u32).all(|i| {
                find(&out, 0x8000_0002 + i, 0).is_none_or(|e| e.eax | e.ebx | e.ecx | e.edx == 0)
            });
            if missing {
                out.retain(|e| !(0x8000_0002..=0x8000_0004).contains(&e.function));
                for i in 0..3usize {
                    let r = &brand[i * 4..i * 4 + 4];
                    let mut e = entry(0x8000_0002 + i as u32, 0, [r[0], r[1], r[2], r[3]]);
                    e.flags = 0;
                    out.push(e);
                }
            }
        }
    }
    out.sort_by_key(|e| (e.function, e.index));
    out
}

/// The brand string of `entries` (0x8000_0002..4), trimmed; empty when absent.
pub fn brand_string(entries: &[kvm_cpuid_entry2]) -> String {
    let mut bytes = Vec::with_capacity(48);
    for f in 0x8000_0002..=0x8000_0004u32 {
        if let Some(e) = find(entries, f, 0) {
            for r in [e.eax, e.ebx, e.ecx, e.edx] {
                bytes.extend_from_slice(&r.to_le_bytes());
            }
        }
    }
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// The host's brand string from the `cpuid` instruction (x86-64 only).
pub fn host_brand() -> Option<[u32; 12]> {
    // `__cpuid` became a safe function in later Rust releases; the block keeps 1.85 building.
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: `cpuid` is available on every x86-64 CPU and has no side effects.
        let max = unsafe { __cpuid(0x8000_0000) }.eax;
        if max < 0x8000_0004 {
            return None;
        }
        let mut b = [0u32; 12];
        for i in 0..3u32 {
            // SAFETY: as above; the leaf is within the maximum just read.
            let r = unsafe { __cpuid(0x8000_0002 + i) };
            b[i as usize * 4..i as usize * 4 + 4].copy_from_slice(&[r.eax, r.ebx, r.ecx, r.edx]);
        }
        Some(b)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// `entries` as text, one per line: `function index eax ebx ecx edx` in 0x-hex, sorted —
/// the format of the recorded dumps in `vmm/tests/data/cpuid/`.
pub fn format_table(entries: &[kvm_cpuid_entry2]) -> String {
    let mut v: Vec<_> = entries.to_vec();
    v.sort_by_key(|e| (e.function, e.index));
    let mut s = String::from("# columns: function index eax ebx ecx edx\n");
    for e in v {
        s.push_str(&format!(
            "{:#010x} {:#x} {:#010x} {:#010x} {:#010x} {:#010x}\n",
            e.function, e.index, e.eax, e.ebx, e.ecx, e.edx
        ));
    }
    s
}
