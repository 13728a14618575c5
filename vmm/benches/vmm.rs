//! Stage benchmarks on /dev/kvm: VM create, memory setup (128 MiB and 16 GiB per backing),
//! kernel load, vCPU setup, a full in-process probe boot, and compiling the seccomp filter
//! (its installation is irreversible: the CLI's stage measures it).
//! Run briefly with `cargo bench -p truecold-vmm -- --warm-up-time 1 --measurement-time 3`.
//! hugetlb cases reserve the pool through /proc/sys/vm/nr_hugepages (root) and restore it.
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use truecold_proto::limits::GuestMem;
use truecold_vmm::config::KernelSource;
use truecold_vmm::loader;
use truecold_vmm::memory::{self, Backing};
use truecold_vmm::{cpu, kvm, vm, BootConfig};

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

fn set_pool(pages: u64) -> Option<u64> {
    std::fs::write(NR_HUGEPAGES, pages.to_string()).ok()?;
    std::fs::read_to_string(NR_HUGEPAGES)
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn vm_create(c: &mut Criterion) {
    let (k, _) = kvm::open().expect("/dev/kvm");
    c.bench_function("vm_create", |b| {
        b.iter_with_large_drop(|| vm::create(&k).expect("create"))
    });
}

fn memory_setup(c: &mut Criterion) {
    let (k, _) = kvm::open().expect("/dev/kvm");
    let old_pool = std::fs::read_to_string(NR_HUGEPAGES).unwrap_or_else(|_| "0".into());
    let mut g = c.benchmark_group("memory_setup");
    g.sample_size(10);
    for mib in [128u64, 16384] {
        for backing in [Backing::Anon, Backing::Thp, Backing::Hugetlb] {
            if backing == Backing::Hugetlb {
                let want = mib / 2 + 2;
                let got = set_pool(want).unwrap_or(0);
                if got < want {
                    eprintln!(
                        "memory_setup/{mib}M/hugetlb: NOT MEASURED, the host gave {got} of \
                         {want} huge pages"
                    );
                    continue;
                }
            }
            g.bench_function(format!("{mib}M/{backing:?}"), |b| {
                b.iter_batched(
                    || vm::create(&k).expect("create"),
                    |v| {
                        let ram = memory::allocate(
                            GuestMem::from_mib(mib).expect("size"),
                            backing,
                            memory::RamLayout::AroundHole,
                        )
                        .expect("allocate");
                        memory::register(&v, &ram, true).expect("register");
                        (v, ram)
                    },
                    BatchSize::PerIteration,
                )
            });
            if backing == Backing::Hugetlb {
                let _ = std::fs::write(NR_HUGEPAGES, old_pool.trim());
            }
        }
    }
    g.finish();
}

fn kernel_load(c: &mut Criterion) {
    let ram = memory::allocate(
        GuestMem::from_mib(128).expect("size"),
        Backing::Anon,
        memory::RamLayout::AroundHole,
    )
    .expect("allocate");
    let cmdline = truecold_vmm::boot_params::cmdline(
        truecold_vmm::boot_params::SerialUse::Off,
        GuestMem::from_mib(128).expect("size"),
        "",
    )
    .expect("cmdline");
    let mut g = c.benchmark_group("kernel_load");
    g.bench_function("probe", |b| {
        b.iter(|| loader::load(&ram, &KernelSource::Probe, None, &cmdline).expect("load"))
    });
    let dir = std::env::var("TRUECOLD_GUEST_DIR").unwrap_or_else(|_| "../out/guest".into());
    let vmlinux = std::path::Path::new(&dir).join("vmlinux");
    let initramfs = std::path::Path::new(&dir).join("initramfs.cpio");
    if vmlinux.is_file() && initramfs.is_file() {
        let src = KernelSource::File(vmlinux);
        g.bench_function("vmlinux+initramfs", |b| {
            b.iter(|| loader::load(&ram, &src, Some(&initramfs), &cmdline).expect("load"))
        });
    } else {
        eprintln!("kernel_load/vmlinux+initramfs: NOT MEASURED, no {dir}/vmlinux");
    }
    g.finish();
}

fn vcpu_setup(c: &mut Criterion) {
    let (k, _) = kvm::open().expect("/dev/kvm");
    let mut g = c.benchmark_group("vcpu_setup");
    for n in [1u8, 2] {
        g.bench_function(format!("{n}cpu"), |b| {
            b.iter_batched(
                || {
                    let v = vm::create(&k).expect("create");
                    let ram = memory::allocate(
                        GuestMem::from_mib(128).expect("size"),
                        Backing::Anon,
                        memory::RamLayout::AroundHole,
                    )
                    .expect("allocate");
                    memory::register(&v, &ram, true).expect("register");
                    let cl = truecold_vmm::boot_params::cmdline(
                        truecold_vmm::boot_params::SerialUse::Off,
                        GuestMem::from_mib(128).expect("size"),
                        "",
                    )
                    .expect("cmdline");
                    let l = loader::load(&ram, &KernelSource::Probe, None, &cl).expect("load");
                    (v, ram, l)
                },
                |(v, ram, l)| {
                    let cpus =
                        cpu::create(&k, &v, n, truecold_proto::platform::CpuPlatform::ABSENT, &l)
                            .expect("vcpus");
                    (cpus, v, ram)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn probe_boot(c: &mut Criterion) {
    let mut g = c.benchmark_group("probe_boot");
    g.sample_size(10);
    for (mib, n) in [(128u64, 1u8), (16384, 2)] {
        let cfg = BootConfig::probe(n, GuestMem::from_mib(mib).expect("size"), Backing::Anon);
        g.bench_function(format!("{mib}M_{n}cpu"), |b| {
            b.iter_with_large_drop(|| truecold_vmm::boot(&cfg).expect("probe boot"))
        });
    }
    g.finish();
}

fn seccomp_filters(c: &mut Criterion) {
    use truecold_vmm::sandbox;
    c.bench_function("seccomp_filters_build", |b| {
        b.iter(|| sandbox::filters(&sandbox::allowlist(std::process::id())).expect("filters"))
    });
}

criterion_group!(
    benches,
    seccomp_filters,
    vm_create,
    memory_setup,
    kernel_load,
    vcpu_setup,
    probe_boot
);
criterion_main!(benches);
