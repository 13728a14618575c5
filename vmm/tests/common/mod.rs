//! Shared checks for the KVM-backed tests.
#![allow(dead_code)]

use truecold_proto::measure::{Mark, Stage, Taker};
use truecold_proto::report::{LivenessKind, VmmOutput};
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
    let c = &r.core;
    assert!(c.outcome.ok, "outcome: {:?}", c.outcome);
    assert_eq!(c.outcome.failure, None);
    assert_eq!(r.failure, None);
    assert_eq!(c.outcome.guest_exit_code, Some(0));
    assert_eq!(&r.config, cfg);
    assert_eq!(r.vcpus, cfg.vcpus);
    assert_eq!(c.schema, truecold_vmm::report::SCHEMA);
    assert_eq!(c.transport, truecold_proto::kinds::Transport::Ports);
    assert_eq!(r.serial_input, None);

    // stamps: every VMM and VM-exit mark taken, in timeline order; the bench's own marks
    // (intended, reaped) are not the VMM's to take
    let t = &c.stamps;
    let mut prev = 0;
    for m in Mark::ALL {
        match m.taker() {
            Taker::Bench => {
                if m != Mark::Request {
                    assert_eq!(t.get(m), None, "{}", m.name());
                }
            }
            // Taken only when the CLI installed its seccomp filter (a library boot has none).
            Taker::Vmm
                if m == Mark::Sandboxed
                    && !r.sandbox.as_ref().is_some_and(|s| s.seccomp.installed) =>
            {
                assert_eq!(t.get(m), None, "sandboxed without a filter");
            }
            Taker::Vmm | Taker::VmExit => {
                let v = t
                    .get(m)
                    .unwrap_or_else(|| panic!("missing stamp {} in {t:?}", m.name()));
                assert!(v >= prev, "{} out of order in {t:?}", m.name());
                prev = v;
            }
        }
    }
    assert_eq!(t.request, cfg.request_ns);
    assert!(r.process_start_boottime_ns.is_some());
    let tiles = t.tile();
    for st in [
        Stage::KvmOpen,
        Stage::VmCreate,
        Stage::Memory,
        Stage::KernelLoad,
        Stage::Vcpus,
        Stage::GuestInit,
        Stage::Challenge,
        Stage::Workload,
    ] {
        assert!(tiles.get(st).is_some(), "stage {} missing", st.name());
    }
    let filtered = r.sandbox.as_ref().is_some_and(|s| s.seccomp.installed);
    assert_eq!(
        tiles.get(Stage::Seccomp).is_some(),
        filtered,
        "the seccomp stage is there exactly when the filter was installed"
    );

    // host
    assert_eq!(r.host.kind, truecold_vmm::host::detect(cfg.host_kind));
    // A kind the caller gave is not detected again.
    assert_eq!(r.host.detected.is_none(), cfg.host_kind.is_some());
    assert!(!r.host.kernel.is_empty());
    assert!(r.host.kvm_caps.iter().any(|c| c == "KVM_CAP_IRQCHIP"));
    assert!(r.host.mem_total_bytes.unwrap() > 0);

    // memory: memslots == E820 RAM == guest == configured − the layout's hole, the hole
    // declared reserved as the layout says (truecold_proto::layout, the one rule)
    let m = &r.memory;
    let f = &c.memory_figures;
    let configured = cfg.mem.bytes();
    let want =
        truecold_proto::kinds::Engine::Truecold.expected_firmware_ram(configured, cfg.ram_layout);
    let hole = cfg.ram_layout.hole().map_or(0, |h| h.len());
    assert_eq!(f.configured, configured);
    assert_eq!(f.memslots, want);
    assert_eq!(f.e820_ram, want);
    assert_eq!(f.e820_hole_reserved, hole);
    assert_eq!(want + hole, configured);
    assert_eq!(f.guest, Some(want));
    assert!(f.agree(cfg.ram_layout), "{f:?}");
    let ram: Vec<_> = m.e820.iter().filter(|e| e.kind == 1).collect();
    assert_eq!(m.memslots.len(), ram.len());
    for (s, e) in m.memslots.iter().zip(&ram) {
        assert_eq!((s.start, s.size, 1), (e.addr, e.size, e.kind));
    }
    assert_eq!(m.e820.len() - ram.len(), usize::from(hole > 0));
    let above_4g = cfg.ram_layout.span(configured) > 3 << 30;
    assert_eq!(m.memslots.len(), if above_4g { 3 } else { 2 });

    // backing: obtained is what was requested
    let b = &r.backing;
    assert_eq!(b.requested, cfg.backing);
    assert_eq!(b.obtained, cfg.backing.expected_obtained(), "{b:?}");
    assert_eq!(c.backing_obtained, b.obtained);
    assert!(b.mapped_bytes >= want);
    match cfg.backing {
        Backing::Anon => assert_eq!(b.anon_huge_bytes, 0),
        Backing::Thp => assert!(b.anon_huge_bytes > 0),
        Backing::Hugetlb => assert!(b.hugetlb_bytes > 0 && b.kernel_page_size == 2 << 20),
    }
    assert!(c.vmm_rss_bytes.unwrap() > 0);

    // kernel: the probe, entered through PVH like Linux (or the 64-bit protocol variant)
    let protocol = match cfg.kernel {
        truecold_vmm::config::KernelSource::ProbeLinux64 => truecold_vmm::loader::Protocol::Linux64,
        _ => truecold_vmm::loader::Protocol::Pvh,
    };
    assert_eq!(r.kernel.protocol, protocol);
    assert_eq!(r.kernel.format, truecold_vmm::loader::KernelFormat::Elf);
    assert!(r
        .kernel
        .cmdline
        .contains(&format!("truecold.mem={configured}")));
    // The layout reaches the guest's command line exactly when it is not the default.
    assert_eq!(
        r.kernel.cmdline.contains("truecold.ram_layout=hole-inside"),
        cfg.ram_layout == truecold_proto::kinds::RamLayout::HoleInside,
        "{}",
        r.kernel.cmdline
    );
    assert_eq!(r.kernel.e820, m.e820);

    // exits
    assert!(r.exits.truecold >= 4, "{:?}", r.exits);
    assert!(r.exits.probe as usize >= 1 + cfg.vcpus as usize - 1);
    assert!(
        r.exits.unknown_ports.is_empty(),
        "{:?}",
        r.exits.unknown_ports
    );
    assert!(c.protocol_errors.is_empty(), "{:?}", c.protocol_errors);
    assert_eq!(c.protocol_error_count, 0);
    assert!(r.vcpu_errors.is_empty(), "{:?}", r.vcpu_errors);

    // liveness: fresh nonce echoed back
    let l = &c.liveness;
    assert_eq!(l.kind, LivenessKind::ProbeEcho);
    let nonce = l.nonce.as_deref().unwrap();
    assert_eq!(nonce.len(), 32);
    assert_eq!(l.answer.as_deref(), Some(nonce));
    assert!(l.verified);
    assert!(c.guest_record.is_none());
    assert!(l.reply_boot_id.is_none());

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
    // … and the bench and verifier read its core through the shared type
    match VmmOutput::parse(json.as_bytes()).unwrap() {
        VmmOutput::Boot(core) => assert_eq!(&*core, c),
        VmmOutput::Error(e) => panic!("a boot report parsed as an error: {e:?}"),
    }
}

/// In a child before exec: a new mount namespace with `/` made private recursively, so the
/// mounts that follow are the child's alone (the host's mounts are untouched).
pub fn private_mount_namespace() -> std::io::Result<()> {
    // SAFETY: unshare takes no pointer; mount gets a NUL-terminated literal and null pointers
    // where it accepts them; both only change this process's namespace.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The RIP samples of a probe boot sampled every `period_us`: present, decoded, each kept
/// sample between `first_run` and `exit` in time order, vCPU 0's RIPs inside the probe's
/// image (loaded at 1 MiB, up to `kernel_end`), an AP's either waiting for its start or in
/// its real-mode trampoline (IP below 0x1000); and for vCPU 0 (started before the first
/// tick) every tick accounted for: kept + over the cap + unread + at the stop + coalesced
/// = ticks. Returns the samples.
pub fn check_rip_samples(r: &BootReport, period_us: u64) -> Vec<Vec<truecold_proto::rip::Sample>> {
    use truecold_proto::rip::VcpuState;
    let rs = r
        .core
        .rip_samples
        .as_ref()
        .expect("rip_samples in the report of a sampled boot");
    assert_eq!(rs.period_us.us(), period_us);
    assert_eq!(rs.vcpus.len(), usize::from(r.vcpus));
    let first_run = r.core.stamps.first_run.expect("first_run");
    let exit = r.core.stamps.exit.expect("exit");
    let decoded = rs.decode().expect("the samples decode");
    for (i, samples) in decoded.iter().enumerate() {
        let mut prev = first_run;
        for s in samples {
            assert!(
                s.t_ns >= prev && s.t_ns <= exit,
                "vCPU {i}: sample at {} outside first_run {first_run} .. exit {exit} or out of order",
                s.t_ns
            );
            prev = s.t_ns;
            if i == 0 {
                assert!(
                    (0x10_0000..r.kernel.kernel_end).contains(&s.rip),
                    "vCPU 0: RIP {:#x} outside the probe's image 0x100000..{:#x} ({s:?})",
                    s.rip,
                    r.kernel.kernel_end
                );
                assert_ne!(s.state, VcpuState::WaitingForStart, "{s:?}");
            } else {
                assert!(
                    s.state == VcpuState::WaitingForStart || s.rip < 0x1000,
                    "vCPU {i}: {s:?}"
                );
            }
        }
    }
    let v0 = &rs.vcpus[0];
    assert_eq!(
        decoded[0].len() as u64 + v0.over_cap + v0.unread + v0.at_stop + v0.coalesced,
        rs.ticks,
        "vCPU 0: every tick is a sample or counted: {v0:?}"
    );
    // Requested: every tick of the grid while vCPU 0's thread ran, slept-through ones too.
    assert_eq!(
        v0.requested,
        Some(rs.ticks + rs.missed_ticks),
        "vCPU 0: {v0:?}"
    );
    assert!(v0.obtained() <= v0.requested.unwrap_or(0), "{v0:?}");
    decoded
}
