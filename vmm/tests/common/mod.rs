//! Shared checks for the KVM-backed tests.
#![allow(dead_code)]

use truecold_vmm::host::HostKind;
use truecold_vmm::memory::Backing;
use truecold_vmm::{BootConfig, BootReport};

/// Fails (never skips) when /dev/kvm is unusable.
pub fn require_kvm() {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        panic!(
            "these tests boot VMs and need a usable /dev/kvm ({e}); run them on a KVM host \
             as a user in the kvm group (or root)"
        );
    }
}

/// Checks every field of a successful probe boot's report against its config.
pub fn check_probe_report(r: &BootReport, cfg: &BootConfig) {
    assert!(r.outcome.ok, "outcome: {:?}", r.outcome);
    assert_eq!(r.outcome.failure, None);
    assert_eq!(r.outcome.guest_exit_code, Some(0));
    assert_eq!(&r.config, cfg);
    assert_eq!(r.vcpus, cfg.vcpus);
    assert_eq!(r.schema, truecold_vmm::report::SCHEMA);

    // timeline: every stage stamped, in order
    let t = &r.timeline;
    let stamps = [
        t.boot_start,
        t.kvm_open,
        t.vm_created,
        t.memory_ready,
        t.kernel_loaded,
        t.vcpus_ready,
        t.first_run,
        t.init_doorbell,
        t.ready_doorbell,
        t.strict_ready,
        t.record,
        t.exit,
        t.teardown_done,
    ];
    let stamps: Vec<u64> = stamps
        .iter()
        .map(|s| s.unwrap_or_else(|| panic!("missing stamp in {t:?}")))
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    assert!(t.process_start.is_some());
    assert_eq!(t.request, cfg.request_ns);
    let d = &r.durations;
    for (name, v) in [
        ("kvm_open", d.kvm_open),
        ("vm_create", d.vm_create),
        ("memory", d.memory),
        ("kernel_load", d.kernel_load),
        ("vcpus", d.vcpus),
        ("to_first_run", d.to_first_run),
        ("first_run_to_init", d.first_run_to_init),
        ("init_to_ready", d.init_to_ready),
        ("ready_to_strict_ready", d.ready_to_strict_ready),
        ("strict_ready_to_record", d.strict_ready_to_record),
        ("record_to_exit", d.record_to_exit),
        ("teardown", d.teardown),
        ("boot_start_to_strict_ready", d.boot_start_to_strict_ready),
    ] {
        assert!(v.is_some(), "duration {name} missing");
    }

    // host
    assert_eq!(r.host.kind, HostKind::detect(cfg.host_kind));
    // A kind the caller gave is not detected again.
    assert_eq!(r.host.detected.is_none(), cfg.host_kind.is_some());
    assert!(!r.host.kernel.is_empty());
    assert!(r.host.kvm_caps.iter().any(|c| c == "KVM_CAP_IRQCHIP"));
    assert!(r.host.mem_total_bytes.unwrap() > 0);

    // memory: configured == memslots == E820 == guest
    let m = &r.memory;
    let want = cfg.mem_mib << 20;
    assert_eq!(m.configured_bytes, want);
    assert_eq!(m.memslot_bytes, want);
    assert_eq!(m.e820_ram_bytes, want);
    assert_eq!(m.guest_bytes, Some(want));
    assert!(m.agree);
    assert_eq!(m.memslots.len(), m.e820.len());
    for (s, e) in m.memslots.iter().zip(&m.e820) {
        assert_eq!((s.start, s.size, 1), (e.addr, e.size, e.kind));
    }
    assert_eq!(m.memslots.len(), if cfg.mem_mib > 3071 { 3 } else { 2 });

    // backing: obtained is what was requested
    let b = &r.backing;
    assert_eq!(b.requested, cfg.backing);
    let obtained = match cfg.backing {
        Backing::Anon => "anon-4k",
        Backing::Thp => "thp",
        Backing::Hugetlb => "hugetlb-2m",
    };
    assert_eq!(b.obtained, obtained, "{b:?}");
    assert!(b.mapped_bytes >= want);
    match cfg.backing {
        Backing::Anon => assert_eq!(b.anon_huge_bytes, 0),
        Backing::Thp => assert!(b.anon_huge_bytes > 0),
        Backing::Hugetlb => assert!(b.hugetlb_bytes > 0 && b.kernel_page_size == 2 << 20),
    }
    assert!(r.vmm_rss_bytes.unwrap() > 0);

    // kernel: the probe, entered through PVH like Linux (or the 64-bit protocol variant)
    let protocol = match cfg.kernel {
        truecold_vmm::loader::KernelSource::ProbeLinux64 => truecold_vmm::loader::Protocol::Linux64,
        _ => truecold_vmm::loader::Protocol::Pvh,
    };
    assert_eq!(r.kernel.protocol, protocol);
    assert_eq!(r.kernel.format, truecold_vmm::loader::KernelFormat::Elf);
    assert!(r.kernel.cmdline.contains(&format!("truecold.mem={want}")));
    assert_eq!(r.kernel.e820, m.e820);

    // exits
    assert!(r.exits.truecold >= 4, "{:?}", r.exits);
    assert!(r.exits.probe as usize >= 1 + cfg.vcpus as usize - 1);
    assert!(
        r.exits.unknown_ports.is_empty(),
        "{:?}",
        r.exits.unknown_ports
    );
    assert!(r.protocol_errors.is_empty(), "{:?}", r.protocol_errors);
    assert!(r.vcpu_errors.is_empty(), "{:?}", r.vcpu_errors);

    // liveness: fresh nonce echoed back
    let l = &r.liveness;
    assert_eq!(l.kind, "probe-echo");
    let nonce = l.nonce.as_deref().unwrap();
    assert_eq!(nonce.len(), 32);
    assert_eq!(l.answer.as_deref(), Some(nonce));
    assert!(l.verified);
    assert!(r.guest_record.is_none());

    // probe: what it saw is what the host handed it
    let p = r.probe.as_ref().unwrap();
    assert!(p.ok(), "{p:?}");
    let s = p.summary.as_ref().unwrap();
    assert_eq!(s.ram_bytes, want);
    assert_eq!(s.touched, p.expected_touched);
    assert_eq!(s.checksum, p.expected_checksum);
    assert_eq!(s.bad, 0);
    assert_eq!(s.aps, u64::from(cfg.vcpus) - 1);
    assert_eq!(p.ap_checkins.len(), usize::from(cfg.vcpus) - 1);
    for c in &p.ap_checkins {
        assert_eq!(c.vcpu, usize::from(c.apic_id));
    }

    // the report survives JSON
    let json = serde_json::to_string(r).unwrap();
    let back: BootReport = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, r);
}
