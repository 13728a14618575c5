//! Boots the embedded probe guest on /dev/kvm: sizes × vCPUs × backings, the deadline, the
//! hugetlb pool. These tests fail (never skip) without a usable /dev/kvm.
mod common;

use truecold_proto::limits::{GuestMem, LimitError};
use truecold_vmm::boot::ConfigError;
use truecold_vmm::config::Deadline;
use truecold_vmm::config::KernelSource;
use truecold_vmm::memory::{Backing, MemoryError};
use truecold_vmm::report::GuestFailure;
use truecold_vmm::timeline::now_ns;
use truecold_vmm::{BootConfig, Error};

fn boot_ok(mem_mib: u64, vcpus: u8, backing: Backing) {
    boot_source(KernelSource::Probe, mem_mib, vcpus, backing);
}

fn boot_source(kernel: KernelSource, mem_mib: u64, vcpus: u8, backing: Backing) {
    common::require_kvm();
    let mut cfg = BootConfig::probe(vcpus, mib(mem_mib), backing);
    cfg.kernel = kernel;
    // Generous: a functional check, not a timing one (16 GiB THP on a loaded PVM host is slow).
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    cfg.request_ns = Some(truecold_vmm::timeline::now_ns());
    match truecold_vmm::boot(&cfg) {
        Ok(r) => common::check_probe_report(&r, &cfg),
        Err(e) => panic!(
            "{mem_mib} MiB / {vcpus} vCPU / {backing:?}: {}",
            truecold_proto::measure::error_chain(&e)
        ),
    }
}

/// The probe under `--ram-layout hole-inside` (`source` entered through PVH or the 64-bit
/// protocol's zero page): RAM + the declared hole = configured, checked by
/// `common::check_probe_report` with the one rule.
fn boot_hole_inside(source: KernelSource, mem_mib: u64, vcpus: u8) {
    common::require_kvm();
    let mut cfg = BootConfig::probe(vcpus, mib(mem_mib), Backing::Anon);
    cfg.kernel = source;
    cfg.ram_layout = truecold_proto::kinds::RamLayout::HoleInside;
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    cfg.request_ns = Some(now_ns());
    let r = truecold_vmm::boot(&cfg).unwrap_or_else(|e| {
        panic!(
            "{mem_mib} MiB: {}",
            truecold_proto::measure::error_chain(&e)
        )
    });
    common::check_probe_report(&r, &cfg);
    assert_eq!(
        r.probe
            .as_ref()
            .and_then(|p| p.summary.as_ref())
            .map(|s| s.ram_bytes),
        Some(cfg.mem.bytes() - 0x6_0000)
    );
}

#[test]
fn hole_inside_128m_1cpu() {
    boot_hole_inside(KernelSource::Probe, 128, 1);
}
#[test]
fn hole_inside_linux64_protocol_128m_2cpu() {
    boot_hole_inside(KernelSource::ProbeLinux64, 128, 2);
}
/// Across the 32-bit hole: 1 MiB from 4 GiB.
#[test]
fn hole_inside_3073m_1cpu() {
    boot_hole_inside(KernelSource::ProbeSparse, 3073, 1);
}
#[test]
fn hole_inside_16g_2cpu() {
    let _big = one_big_at_a_time();
    boot_hole_inside(KernelSource::ProbeSparse, 16384, 2);
}

#[test]
fn anon_128m_1cpu() {
    boot_ok(128, 1, Backing::Anon);
}
#[test]
fn anon_128m_2cpu() {
    boot_ok(128, 2, Backing::Anon);
}
#[test]
fn anon_2g_1cpu() {
    boot_ok(2048, 1, Backing::Anon);
}
#[test]
fn anon_2g_2cpu() {
    boot_ok(2048, 2, Backing::Anon);
}
#[test]
fn anon_16g_1cpu() {
    boot_ok(16384, 1, Backing::Anon);
}
#[test]
fn anon_16g_2cpu() {
    boot_ok(16384, 2, Backing::Anon);
}
#[test]
fn anon_8cpu() {
    boot_ok(256, 8, Backing::Anon);
}
/// The most vCPUs the limits allow: the MP table lists 32 processors and the probe wakes
/// 31 APs with INIT/SIPI, each checking in from its own vCPU with its own APIC id.
#[test]
fn anon_32cpu() {
    boot_ok(256, truecold_proto::limits::MAX_VCPUS as u8, Backing::Anon);
}
#[test]
fn linux64_protocol_32cpu() {
    boot_source(
        KernelSource::ProbeLinux64,
        256,
        truecold_proto::limits::MAX_VCPUS as u8,
        Backing::Anon,
    );
}
/// The kind given by the caller (the bench) is used as it is: nothing is detected.
#[test]
fn given_host_kind_skips_detection() {
    common::require_kvm();
    let detected = truecold_vmm::host::detection(None);
    let mut cfg = BootConfig::probe(1, mib(128), Backing::Anon);
    cfg.host_kind = Some(detected.kind);
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    let r = truecold_vmm::boot(&cfg)
        .unwrap_or_else(|e| panic!("{}", truecold_proto::measure::error_chain(&e)));
    common::check_probe_report(&r, &cfg);
    assert_eq!(
        (r.host.kind, r.host.detected, r.host.forced),
        (detected.kind, None, true)
    );
}
#[test]
fn linux64_protocol_128m_1cpu() {
    boot_source(KernelSource::ProbeLinux64, 128, 1, Backing::Anon);
}
#[test]
fn linux64_protocol_128m_2cpu() {
    boot_source(KernelSource::ProbeLinux64, 128, 2, Backing::Anon);
}
#[test]
fn linux64_protocol_16g_2cpu() {
    boot_source(KernelSource::ProbeLinux64, 16384, 2, Backing::Anon);
}
#[test]
fn thp_128m_1cpu() {
    boot_ok(128, 1, Backing::Thp);
}
#[test]
fn thp_128m_2cpu() {
    boot_ok(128, 2, Backing::Thp);
}
#[test]
fn thp_2g_2cpu() {
    boot_ok(2048, 2, Backing::Thp);
}

/// Boots that commit 16 GiB of host memory (THP faults in a whole 2 MiB page per probe touch;
/// hugetlb reserves the pool up front) run one at a time: the machine has 24 GiB.
static BIG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_big_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    BIG.lock().unwrap_or_else(|p| p.into_inner())
}

/// 16 GiB under THP with the sparse probe (one touch per GiB): exact memory and the backing
/// are proven on the touched regions, each a whole 2 MiB huge page, without faulting in the
/// whole guest (the dense probe's touch per 2 MiB made this one test's process 16 GiB
/// resident).
#[test]
fn thp_16g_2cpu() {
    let _big = one_big_at_a_time();
    common::require_kvm();
    let mut cfg = BootConfig::probe(2, mib(16384), Backing::Thp);
    cfg.kernel = KernelSource::ProbeSparse;
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    cfg.request_ns = Some(now_ns());
    let r = truecold_vmm::boot(&cfg)
        .unwrap_or_else(|e| panic!("{}", truecold_proto::measure::error_chain(&e)));
    common::check_probe_report(&r, &cfg);
    let p = r.probe.as_ref().expect("the probe's report");
    let touched = p.summary.as_ref().expect("the probe's summary").touched;
    assert_eq!(touched, p.expected_touched);
    assert!((16..=19).contains(&touched), "{touched} touches");
    let b = &r.backing;
    // Each touched GiB faulted in (at least) its 2 MiB huge page (the touches at 0 and at
    // 1 MiB share the first one), and not much more was.
    assert!(
        b.anon_huge_bytes >= 16 * (2 << 20),
        "{} bytes of huge pages for {touched} touches: {b:?}",
        b.anon_huge_bytes
    );
    assert!(
        b.rss_bytes < 1 << 30,
        "guest RSS {} bytes: {b:?}",
        b.rss_bytes
    );
}

#[path = "support/hugepool.rs"]
mod hugepool;
use hugepool::HugePool;

/// All hugetlb cases in one test: they share the host's pool.
#[test]
fn hugetlb_pool_empty_then_boots() {
    common::require_kvm();
    {
        let _pool = HugePool::set(0);
        let cfg = BootConfig::probe(1, mib(128), Backing::Hugetlb);
        match truecold_vmm::boot(&cfg) {
            Err(Error::Memory(MemoryError::HugetlbPool { needed, free, .. })) => {
                // The default layout's mapping in 2 MiB pages (hole-inside: 64; around the
                // hole it was 65).
                let mapped = truecold_proto::kinds::Engine::Truecold
                    .expected_mapping(128 << 20, truecold_proto::kinds::RamLayout::HoleInside);
                assert_eq!(needed, mapped / (2 << 20));
                assert_eq!(needed, 64);
                assert_eq!(free, 0);
            }
            other => panic!("want a hugetlb pool error, got {other:?}"),
        }
    }
    {
        let _pool = HugePool::set(70);
        boot_ok(128, 1, Backing::Hugetlb);
        boot_ok(128, 2, Backing::Hugetlb);
    }
    {
        let _pool = HugePool::set(1030);
        boot_ok(2048, 2, Backing::Hugetlb);
    }
    {
        let _big = one_big_at_a_time();
        let _pool = HugePool::set(8200);
        // The pool holds the whole guest (mapped without MAP_NORESERVE); the sparse probe
        // faults in (and the kernel zeroes) a huge page per GiB, not all 8,192.
        boot_source(KernelSource::ProbeSparse, 16384, 2, Backing::Hugetlb);
    }
}

#[test]
fn silent_guest_hits_the_deadline() {
    common::require_kvm();
    for vcpus in [1, 2] {
        let mut cfg = BootConfig::probe(vcpus, mib(128), Backing::Anon);
        cfg.kernel = KernelSource::ProbeSilent;
        // Long enough that a vCPU has run before it (`first_run` below) on a loaded host too:
        // at 300 ms a fresh-clone run with a nested campaign beside it saw none run.
        cfg.deadline = Deadline::AfterBootStartMs(2000);
        match truecold_vmm::boot(&cfg) {
            Err(Error::Guest { failure, report }) => {
                assert_eq!(
                    failure,
                    GuestFailure::Deadline {
                        deadline_ms: 2000,
                        last_phase: None
                    }
                );
                assert!(!report.core.outcome.ok);
                assert_eq!(
                    report.core.outcome.failure_kind.as_deref(),
                    Some("deadline")
                );
                assert_eq!(report.failure, Some(failure));
                assert!(report.core.stamps.first_run.is_some());
                assert!(report.core.stamps.init_doorbell.is_none());
                assert!(report.core.stamps.teardown_done.is_some());
                assert!(!report.core.liveness.verified);
            }
            other => panic!("want the deadline error, got {other:?}"),
        }
    }
}

/// An absolute deadline already past when the boot starts: the `deadline` failure, at once,
/// without running the guest.
#[test]
fn past_absolute_deadline_is_a_prompt_deadline_error() {
    common::require_kvm();
    for (vcpus, mem_mib) in [(1, 128), (2, 16384)] {
        let mut cfg = BootConfig::probe(vcpus, mib(mem_mib), Backing::Anon);
        let request = now_ns();
        cfg.request_ns = Some(request);
        cfg.deadline = Deadline::AtNs(request - 1);
        let t0 = std::time::Instant::now();
        let r = truecold_vmm::boot(&cfg);
        let took = t0.elapsed();
        match r {
            Err(Error::Guest { failure, report }) => {
                assert_eq!(
                    failure,
                    GuestFailure::Deadline {
                        deadline_ms: 0,
                        last_phase: None
                    }
                );
                assert!(report.core.stamps.first_run.is_none(), "no vCPU ran");
                assert!(report.core.stamps.teardown_done.is_some());
                assert!(report.vcpu_errors.is_empty());
                assert!(!report.core.liveness.verified);
            }
            other => panic!("want the deadline error, got {other:?}"),
        }
        assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
    }
}

/// An absolute deadline in the future is an instant, not a budget from the run stage: a
/// guest that never rings ends close to it.
#[test]
fn silent_guest_ends_at_the_absolute_deadline() {
    common::require_kvm();
    let mut cfg = BootConfig::probe(1, mib(128), Backing::Anon);
    cfg.kernel = KernelSource::ProbeSilent;
    let request = now_ns();
    let at = request + 400_000_000;
    cfg.request_ns = Some(request);
    cfg.deadline = Deadline::AtNs(at);
    match truecold_vmm::boot(&cfg) {
        Err(Error::Guest { failure, report }) => {
            assert_eq!(
                failure,
                GuestFailure::Deadline {
                    deadline_ms: 400,
                    last_phase: None
                }
            );
            let exit = report.core.stamps.exit.unwrap();
            assert!(exit >= at, "the run ended before the deadline");
            assert!(exit - at < 200_000_000, "ended {} ns late", exit - at);
            assert!(report.core.stamps.first_run.is_some());
        }
        other => panic!("want the deadline error, got {other:?}"),
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    common::require_kvm();
    let cfg = BootConfig::probe(33, mib(128), Backing::Anon);
    assert!(matches!(
        truecold_vmm::boot(&cfg),
        Err(Error::Config(ConfigError::Limit(LimitError::Vcpus {
            got: 33
        })))
    ));
    let host_mib = truecold_vmm::host::host_mem_total().unwrap() >> 20;
    let cfg = BootConfig::probe(1, mib(host_mib + 1024), Backing::Anon);
    assert!(matches!(
        truecold_vmm::boot(&cfg),
        Err(Error::Memory(MemoryError::ExceedsHost { .. }))
    ));
    let mut cfg = BootConfig::probe(1, mib(128), Backing::Anon);
    cfg.kernel = KernelSource::File("/nonexistent/vmlinux".into());
    assert!(matches!(
        truecold_vmm::boot(&cfg),
        Err(Error::Loader(
            truecold_vmm::loader::LoaderError::OpenKernel { .. }
        ))
    ));
    let dir = std::env::temp_dir().join(format!("truecold-vmm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk");
    std::fs::write(&junk, b"not a kernel at all").unwrap();
    cfg.kernel = KernelSource::File(junk.clone());
    cfg.force = true;
    assert!(matches!(
        truecold_vmm::boot(&cfg),
        Err(Error::Loader(
            truecold_vmm::loader::LoaderError::UnknownFormat(_)
        ))
    ));
    let truncated = dir.join("truncated.elf");
    let mut elf = truecold_vmm::probe::PROBE_ELF[..100].to_vec();
    elf.resize(100, 0);
    std::fs::write(&truncated, elf).unwrap();
    cfg.kernel = KernelSource::File(truncated);
    assert!(matches!(
        truecold_vmm::boot(&cfg),
        Err(Error::Loader(truecold_vmm::loader::LoaderError::Elf(..)))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every sample's report splits the VMM's exits and page faults into the stages by the one
/// tiling rule: the stages tile request → reaped, so their exits sum to every exit the run
/// counted and their faults to the process's last sample; the memory stage is where a
/// populated guest faults its pages in (THP off: 4 KiB each).
#[test]
fn per_stage_exits_faults_and_rss() {
    use truecold_proto::measure::{Mark, Stage};
    common::require_kvm();
    let mut cfg = BootConfig::probe(2, mib(128), Backing::Anon);
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    let req = now_ns();
    cfg.request_ns = Some(req);
    let mut r = truecold_vmm::boot(&cfg).expect("probe boot");
    // The bench's reaped mark (after the VMM printed its report).
    r.core.stamps.reaped = Some(now_ns());
    let a = r
        .core
        .accounting
        .as_ref()
        .expect("accounting in every report");
    for m in [
        Mark::BootStart,
        Mark::KvmOpen,
        Mark::VmCreated,
        Mark::MemoryReady,
        Mark::KernelLoaded,
        Mark::FirstRun,
        Mark::StrictReady,
        Mark::Record,
        Mark::Exit,
        Mark::TeardownDone,
    ] {
        assert!(a.at.contains_key(m.name()), "{}", m.name());
    }
    let stages = a.stages(&r.core.stamps);
    let names: Vec<_> = stages.iter().map(|s| s.stage).collect();
    assert!(names.contains(&Stage::Spawn) && names.contains(&Stage::Challenge));
    let exits: u64 = stages.iter().map(|s| s.counters.exits.total()).sum();
    let t = r.exits.tally();
    assert_eq!(exits, t.total(), "{stages:?}");
    assert!(t.io_out > 0 && t.io_in > 0);
    // Host stages before the guest runs see no exits.
    for s in &stages {
        if matches!(
            s.stage,
            Stage::Spawn | Stage::KvmOpen | Stage::VmCreate | Stage::Memory | Stage::KernelLoad
        ) {
            assert_eq!(s.counters.exits.total(), 0, "{:?}", s.stage);
        }
    }
    let faults: u64 = stages.iter().map(|s| s.counters.minflt).sum();
    let last = a.at[Mark::TeardownDone.name()];
    assert_eq!(faults, last.minflt);
    assert!(last.minflt > 0);
    let (peak, fin) = (a.rss_peak_bytes.unwrap(), a.rss_final_bytes.unwrap());
    // Both are the kernel's approximate, per-thread batched counters (a few dozen pages of
    // slack each), read at different instants: only their presence is checked.
    assert!(peak > 0 && fin > 0, "peak {peak} final {fin}");
    // The whole report round-trips through the core type the bench reads.
    let json = serde_json::to_vec(&r).unwrap();
    match truecold_proto::report::VmmOutput::parse(&json).unwrap() {
        truecold_proto::report::VmmOutput::Boot(c) => assert_eq!(c.accounting.as_ref(), Some(a)),
        other => panic!("{other:?}"),
    }
}

fn mib(n: u64) -> GuestMem {
    GuestMem::from_mib(n).expect("a size within the limits")
}

/// A probe boot sampled at the shortest period passes every check of an unsampled one, and
/// its samples every check of `common::check_rip_samples`.
#[test]
fn rip_sampled_probe_boot_2cpu() {
    common::require_kvm();
    let mut cfg = BootConfig::probe(2, mib(128), Backing::Anon);
    cfg.deadline = Deadline::AfterBootStartMs(300_000);
    cfg.request_ns = Some(now_ns());
    cfg.sample_rip_us = Some(truecold_proto::rip::SamplePeriod::from_us(10).unwrap());
    let r = truecold_vmm::boot(&cfg)
        .unwrap_or_else(|e| panic!("{}", truecold_proto::measure::error_chain(&e)));
    common::check_probe_report(&r, &cfg);
    common::check_rip_samples(&r, 10);
}
