//! The guest platform (`truecold_vmm::cpuid::guest_cpuid`) over recorded CPUID dumps of real
//! Intel and AMD hosts (`tests/data/cpuid/*.txt`, raw host CPUID from libvirt's public
//! cputestdata; each file names its source). The nested harness only emulates AMD; these
//! dumps are how the Intel path and other AMD generations are checked. No KVM needed.

use kvm_bindings::{kvm_cpuid_entry2, KVM_CPUID_FLAG_SIGNIFCANT_INDEX};
use std::collections::BTreeSet;
use truecold_proto::platform::CpuPlatform;
use truecold_vmm::cpuid::{
    brand_string, find, guest_cpuid, shift_for, vendor, Platform, Vendor, HTT_BIT, HYPERVISOR_BIT,
    INVARIANT_TSC_BIT, TSC_DEADLINE_BIT,
};

const DUMPS: [(&str, Vendor); 4] = [
    ("intel-xeon-gold-6530", Vendor::Intel),
    ("intel-xeon-platinum-8268", Vendor::Intel),
    ("amd-epyc-7713", Vendor::Amd),
    ("amd-epyc-9334", Vendor::Amd),
];

/// KVM_GET_SUPPORTED_CPUID as recorded by `truecold-vmm cpuid --supported`: this workplace's
/// kvm-pvm host (Intel) and the nested harness's L1 (emulated AMD EPYC). Neither reports a
/// brand string (the L1 one is why the guest printed `AMD 17/01` before).
const KVM_DUMPS: [(&str, Vendor); 2] = [
    ("kvm-pvm-xeon-supported", Vendor::Intel),
    ("kvm-nested-epyc-supported", Vendor::Amd),
];

/// Leaves whose ECX input selects a subleaf.
fn indexed(f: u32) -> bool {
    matches!(
        f,
        4 | 7
            | 0xb
            | 0xd
            | 0xf
            | 0x10
            | 0x12
            | 0x14
            | 0x17
            | 0x18
            | 0x1d
            | 0x1f
            | 0x8000_001d
            | 0x8000_0020
            | 0x8000_0026
    )
}

fn load(name: &str) -> Vec<kvm_cpuid_entry2> {
    let path = format!("{}/tests/data/cpuid/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<u32> = l.split(' ').map(hex).collect();
            assert_eq!(f.len(), 6, "{path}: {l}");
            kvm_cpuid_entry2 {
                function: f[0],
                index: f[1],
                flags: if indexed(f[0]) {
                    KVM_CPUID_FLAG_SIGNIFCANT_INDEX
                } else {
                    0
                },
                eax: f[2],
                ebx: f[3],
                ecx: f[4],
                edx: f[5],
                ..Default::default()
            }
        })
        .collect()
}

/// What KVM_GET_SUPPORTED_CPUID does to leaves 0xb/0x1f: subleaf 0 only, all zero
/// (arch/x86/kvm/cpuid.c, "No topology; a valid topology is indicated by the presence of
/// subleaf 1"). The VMM must not rely on any of the host's topology there.
fn as_kvm_reports(mut e: Vec<kvm_cpuid_entry2>) -> Vec<kvm_cpuid_entry2> {
    e.retain(|x| !(matches!(x.function, 0xb | 0x1f) && x.index > 0));
    for x in e.iter_mut().filter(|x| matches!(x.function, 0xb | 0x1f)) {
        x.eax = 0;
        x.ebx = 0;
        x.ecx = 0;
    }
    e
}

/// The topology a Linux guest derives from one vCPU's table, the way 6.12 does
/// (arch/x86/kernel/cpu/topology_*.c): the extended topology leaf (0x1f, else 0xb) gives
/// the SMT and core shifts; without it, AMD falls back to 0x8000_0008.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    apic_id: u32,
    smt_shift: u32,
    core_shift: u32,
    threads_per_core: u32,
    cores: u32,
}

fn seen(t: &[kvm_cpuid_entry2]) -> Seen {
    let leaf1 = find(t, 1, 0).expect("leaf 1");
    let max = find(t, 0, 0).expect("leaf 0").eax;
    let ext = if max >= 0x1f && find(t, 0x1f, 0).is_some_and(|e| e.ebx != 0) {
        Some(0x1f)
    } else if max >= 0xb && find(t, 0xb, 0).is_some_and(|e| e.ebx != 0) {
        Some(0xb)
    } else {
        None
    };
    match ext {
        Some(f) => {
            let (mut smt, mut core) = (None, None);
            for i in 0.. {
                let Some(e) = find(t, f, i) else { break };
                if e.ebx & 0xffff == 0 || (e.ecx >> 8) & 0xff == 0 {
                    break;
                }
                assert_eq!(e.ecx & 0xff, i, "level number");
                assert_eq!(e.edx, leaf1.ebx >> 24, "x2APIC id == initial APIC id");
                match (e.ecx >> 8) & 0xff {
                    1 => smt = Some((e.eax & 0x1f, e.ebx & 0xffff)),
                    2 => core = Some((e.eax & 0x1f, e.ebx & 0xffff)),
                    other => panic!("unexpected level type {other}"),
                }
            }
            let (smt_shift, threads) = smt.expect("SMT level");
            let (core_shift, logical) = core.expect("core level");
            Seen {
                apic_id: leaf1.ebx >> 24,
                smt_shift,
                core_shift,
                threads_per_core: threads,
                cores: logical / threads,
            }
        }
        None => {
            let e = find(t, 0x8000_0008, 0).expect("0x8000_0008");
            let n = (e.ecx & 0xff) + 1;
            let sft = match (e.ecx >> 12) & 0xf {
                0 => shift_for(n),
                s => s,
            };
            Seen {
                apic_id: leaf1.ebx >> 24,
                smt_shift: 0,
                core_shift: sft,
                threads_per_core: 1,
                cores: n,
            }
        }
    }
}

fn platform(vcpus: u8) -> Platform {
    Platform {
        vcpus,
        tsc_deadline_timer: true,
        cpu: CpuPlatform::ABSENT,
    }
}

fn in_packages(vcpus: u8, packages: u8, invariant_tsc: bool) -> Platform {
    let cpu = CpuPlatform {
        packages,
        invariant_tsc,
    };
    cpu.check(vcpus).unwrap();
    Platform {
        cpu,
        ..platform(vcpus)
    }
}

#[test]
fn dumps_parse_and_name_their_vendor() {
    for (name, v) in DUMPS {
        let d = load(name);
        assert!(d.len() > 40, "{name}");
        assert_eq!(vendor(&d), v, "{name}");
        assert!(!brand_string(&d).is_empty(), "{name} has a brand string");
    }
}

/// The host dumps themselves describe many cores with SMT; the guest must see one package
/// of N single-threaded cores with APIC id = vCPU index in every leaf, on both vendors.
#[test]
fn kvm_tables_get_a_platform_and_the_hosts_brand() {
    for (name, v) in KVM_DUMPS {
        let kvm = load(name);
        assert_eq!(vendor(&kvm), v, "{name}");
        assert_eq!(brand_string(&kvm), "", "{name}: recorded without a brand");
        let only_smt = kvm
            .iter()
            .filter(|e| e.function == 0xb)
            .all(|e| e.index == 0 && e.ebx == 0);
        assert!(only_smt, "{name}: KVM reports leaf 0xb empty");
        let mut brand = [0u32; 12];
        brand[0] = u32::from_le_bytes(*b"Host");
        let t = guest_cpuid(&kvm, &platform(2), 1, Some(brand));
        assert_eq!(brand_string(&t), "Host", "{name}");
        assert_eq!(seen(&t).cores, 2, "{name}");
    }
}

#[test]
fn one_package_of_n_cores_on_every_dump() {
    for (name, v) in DUMPS.into_iter().chain(KVM_DUMPS) {
        let host = as_kvm_reports(load(name));
        for n in [1u8, 2, 3, 4, 5, 8] {
            let mut packages = BTreeSet::new();
            for id in 0..n {
                let t = guest_cpuid(&host, &platform(n), id, None);
                let s = seen(&t);
                let ctx = format!("{name}, {n} vCPUs, vCPU {id}");
                assert_eq!(s.apic_id, u32::from(id), "{ctx}");
                assert_eq!((s.threads_per_core, s.cores), (1, u32::from(n)), "{ctx}");
                assert_eq!(s.smt_shift, 0, "{ctx}");
                assert_eq!(s.core_shift, shift_for(u32::from(n)), "{ctx}");
                packages.insert(s.apic_id >> s.core_shift);

                let l1 = find(&t, 1, 0).unwrap();
                assert_eq!((l1.ebx >> 16) & 0xff, u32::from(n), "{ctx}: logical count");
                assert_eq!(l1.edx & HTT_BIT != 0, n > 1, "{ctx}: HTT");
                assert_ne!(l1.ecx & HYPERVISOR_BIT, 0, "{ctx}");
                assert_ne!(l1.ecx & TSC_DEADLINE_BIT, 0, "{ctx}");
                for e in t.iter().filter(|e| e.function == 4 && e.eax & 0x1f != 0) {
                    assert_eq!(e.eax >> 26, u32::from(n) - 1, "{ctx}: leaf 4 cores");
                    let sharing = (e.eax >> 14) & 0xfff;
                    let want = if (e.eax >> 5) & 7 >= 3 { n - 1 } else { 0 };
                    assert_eq!(sharing, u32::from(want), "{ctx}: leaf 4 sharing");
                }
                for e in t
                    .iter()
                    .filter(|e| e.function == 0x8000_001d && e.eax & 0x1f != 0)
                {
                    let sharing = (e.eax >> 14) & 0xfff;
                    let want = if (e.eax >> 5) & 7 >= 3 { n - 1 } else { 0 };
                    assert_eq!(sharing, u32::from(want), "{ctx}: 0x8000_001d sharing");
                }
                if let Some(e) = find(&t, 0x8000_0008, 0) {
                    assert_eq!(e.ecx & 0xff, u32::from(n) - 1, "{ctx}: 0x8000_0008 NC");
                    assert_eq!((e.ecx >> 12) & 0xf, shift_for(u32::from(n)), "{ctx}");
                }
                if let Some(e) = find(&t, 0x8000_001e, 0) {
                    assert_eq!(e.eax, u32::from(id), "{ctx}: extended APIC id");
                    assert_eq!(e.ebx, u32::from(id), "{ctx}: core id, 1 thread");
                    assert_eq!(e.ecx, 0, "{ctx}: one node");
                }
                assert!(
                    t.iter().all(|e| e.function != 0x8000_0026),
                    "{ctx}: AMD extended topology removed"
                );
                let ext: Vec<_> = t.iter().filter(|e| e.function == 0xb).collect();
                assert_eq!(ext.len(), 3, "{ctx}: SMT, core, terminator");
                assert!(ext
                    .iter()
                    .all(|e| e.flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX != 0));
                if v == Vendor::Intel && find(&host, 0, 0).unwrap().eax >= 0x1f {
                    assert_eq!(t.iter().filter(|e| e.function == 0x1f).count(), 3, "{ctx}");
                }
                let mut keys: Vec<_> = t.iter().map(|e| (e.function, e.index)).collect();
                let len = keys.len();
                keys.dedup();
                assert_eq!(keys.len(), len, "{ctx}: no duplicate entries");
            }
            assert_eq!(packages.len(), 1, "{name}, {n} vCPUs: one package");
        }
    }
}

/// Before the platform fix the VMM kept KVM's empty leaf 0xb and wrote only subleaf 0:
/// a guest decoding that sees no core level (the shape that made Linux count one package
/// per vCPU). The decoder above must reject it, or the test above proves nothing.
#[test]
fn the_decoder_rejects_the_old_single_level_table() {
    let mut t = as_kvm_reports(load("amd-epyc-7713"));
    for e in t.iter_mut().filter(|e| e.function == 0xb) {
        e.ebx = 1;
        e.ecx = 1 << 8;
    }
    let r = std::panic::catch_unwind(|| seen(&t));
    assert!(r.is_err(), "a table without a core level must not decode");
}

#[test]
fn tsc_deadline_follows_kvm_and_invariant_tsc_is_passed_through_only() {
    for (name, _) in DUMPS {
        let host = load(name);
        let off = Platform {
            tsc_deadline_timer: false,
            ..platform(2)
        };
        let t = guest_cpuid(&host, &off, 0, None);
        assert_eq!(find(&t, 1, 0).unwrap().ecx & TSC_DEADLINE_BIT, 0, "{name}");
        let t = guest_cpuid(&host, &platform(2), 0, None);
        assert_eq!(
            find(&t, 0x8000_0007, 0).map(|e| e.edx),
            find(&host, 0x8000_0007, 0).map(|e| e.edx),
            "{name}: 0x8000_0007 unchanged"
        );
    }
    let mut no_inv = load("amd-epyc-7713");
    for e in no_inv.iter_mut().filter(|e| e.function == 0x8000_0007) {
        e.edx = 0;
    }
    let t = guest_cpuid(&no_inv, &platform(2), 0, None);
    assert_eq!(find(&t, 0x8000_0007, 0).unwrap().edx, 0, "never invented");
}

/// `--invariant-tsc`: the bit is stated on every dump, the leaf's other bits kept; a table
/// without the leaf gets it, and its extended range is raised to hold it.
#[test]
fn a_stated_invariant_tsc_is_set_on_every_dump() {
    for (name, _) in DUMPS.into_iter().chain(KVM_DUMPS) {
        let host = as_kvm_reports(load(name));
        let t = guest_cpuid(&host, &in_packages(2, 1, true), 1, None);
        let e = find(&t, 0x8000_0007, 0).unwrap();
        assert_ne!(e.edx & INVARIANT_TSC_BIT, 0, "{name}");
        let was = find(&host, 0x8000_0007, 0).map_or(0, |e| e.edx);
        assert_eq!(
            e.edx & !INVARIANT_TSC_BIT,
            was & !INVARIANT_TSC_BIT,
            "{name}"
        );
    }
    let mut short = load("amd-epyc-7713");
    short.retain(|e| e.function < 0x8000_0007 || e.function > 0x8000_ffff);
    short
        .iter_mut()
        .filter(|e| e.function == 0x8000_0000)
        .for_each(|e| e.eax = 0x8000_0004);
    let t = guest_cpuid(&short, &in_packages(1, 1, true), 0, None);
    assert_eq!(find(&t, 0x8000_0007, 0).unwrap().edx, INVARIANT_TSC_BIT);
    assert_eq!(find(&t, 0x8000_0000, 0).unwrap().eax, 0x8000_0007);
    let t = guest_cpuid(&short, &in_packages(1, 1, false), 0, None);
    assert!(find(&t, 0x8000_0007, 0).is_none(), "not stated: not added");
}

/// `--packages P`: P packages of N/P single-threaded cores, APIC id = vCPU index, in every
/// leaf, on both vendors (the Cloud Hypervisor topology the fidelity study measures is 16
/// packages of 1 core).
#[test]
fn packages_of_cores_on_every_dump() {
    for (name, _) in DUMPS.into_iter().chain(KVM_DUMPS) {
        let host = as_kvm_reports(load(name));
        for (n, p) in [(16u8, 16u8), (16, 4), (16, 1), (4, 2), (2, 2), (8, 8)] {
            let c = u32::from(n / p);
            let mut packages = BTreeSet::new();
            for id in 0..n {
                let t = guest_cpuid(&host, &in_packages(n, p, false), id, None);
                let s = seen(&t);
                let ctx = format!("{name}, {n} vCPUs in {p} packages, vCPU {id}");
                let id = u32::from(id);
                assert_eq!(s.apic_id, id, "{ctx}");
                assert_eq!((s.threads_per_core, s.cores), (1, c), "{ctx}");
                assert_eq!(s.core_shift, shift_for(c), "{ctx}");
                packages.insert(s.apic_id >> s.core_shift);
                let l1 = find(&t, 1, 0).unwrap();
                assert_eq!((l1.ebx >> 16) & 0xff, c, "{ctx}: logical count");
                assert_eq!(l1.edx & HTT_BIT != 0, c > 1, "{ctx}: HTT");
                for e in t.iter().filter(|e| e.function == 4 && e.eax & 0x1f != 0) {
                    assert_eq!(e.eax >> 26, c - 1, "{ctx}: leaf 4 cores");
                }
                if let Some(e) = find(&t, 0x8000_0008, 0) {
                    assert_eq!(e.ecx & 0xff, c - 1, "{ctx}: 0x8000_0008 NC");
                    assert_eq!((e.ecx >> 12) & 0xf, shift_for(c), "{ctx}");
                }
                if let Some(e) = find(&t, 0x8000_001e, 0) {
                    assert_eq!(e.ebx, id % c, "{ctx}: core id in the package");
                    assert_eq!(e.ecx, id / c, "{ctx}: node = package");
                }
            }
            assert_eq!(
                packages.len(),
                usize::from(p),
                "{name}, {n} vCPUs: {p} packages"
            );
        }
    }
}

#[test]
fn brand_string_passes_through_or_comes_from_the_host() {
    for (name, _) in DUMPS {
        let host = load(name);
        let want = brand_string(&host);
        let t = guest_cpuid(&host, &platform(2), 1, Some([0x4141_4141; 12]));
        assert_eq!(brand_string(&t), want, "{name}: KVM's brand kept");
        let mut blank = host.clone();
        for e in blank
            .iter_mut()
            .filter(|e| (0x8000_0002..=0x8000_0004).contains(&e.function))
        {
            (e.eax, e.ebx, e.ecx, e.edx) = (0, 0, 0, 0);
        }
        let mut brand = [0u32; 12];
        let text = b"Example CPU @ 1.00GHz";
        for (i, c) in text.chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            brand[i] = u32::from_le_bytes(w);
        }
        let t = guest_cpuid(&blank, &platform(2), 1, Some(brand));
        assert_eq!(
            brand_string(&t),
            "Example CPU @ 1.00GHz",
            "{name}: host's brand"
        );
        let t = guest_cpuid(&blank, &platform(2), 1, None);
        assert_eq!(brand_string(&t), "", "{name}: nothing invented");
    }
}

#[test]
fn everything_else_is_the_hosts() {
    // Leaves the platform does not own are copied unchanged.
    let owned = |f: u32| {
        matches!(
            f,
            1 | 4 | 0xb | 0x1f | 0x8000_0008 | 0x8000_001d | 0x8000_001e
        )
    };
    for (name, _) in DUMPS {
        let host = load(name);
        let t = guest_cpuid(&host, &platform(4), 3, None);
        for h in host
            .iter()
            .filter(|e| !owned(e.function) && e.function != 0x8000_0026)
        {
            let g = find(&t, h.function, h.index)
                .unwrap_or_else(|| panic!("{name}: {:#x}/{} dropped", h.function, h.index));
            assert_eq!(
                (g.eax, g.ebx, g.ecx, g.edx),
                (h.eax, h.ebx, h.ecx, h.edx),
                "{name}: {:#x}/{}",
                h.function,
                h.index
            );
        }
    }
}
