use super::*;
use std::path::Path;
use truecold_proto::kinds::{Backing, HostKind};

fn guest(backing: Backing) -> Guest {
    Guest {
        kernel: "/guest/vmlinux".into(),
        initramfs: "/guest/initramfs.cpio".into(),
        vcpus: 2,
        mem: GuestMem::from_mib(1024).unwrap(),
        backing,
        cmdline_extra: String::new(),
        ram_layout: truecold_proto::kinds::RamLayout::ABSENT,
    }
}

fn line(engine: Engine, g: &Guest) -> Launch {
    launch(
        engine,
        Path::new("/bin/engine"),
        g,
        Path::new("/w"),
        HostKind::NestedEmulated,
    )
    .unwrap_or_else(|e| panic!("{engine}: {e}"))
}

#[test]
fn every_engine_gets_the_one_command_line() {
    let g = guest(Backing::Anon);
    for e in Engine::ALL {
        let c = g.cmdline(e).unwrap();
        assert_eq!(
            c,
            truecold_proto::boot_cmdline::cmdline(
                truecold_proto::boot_cmdline::SerialUse::Transport(e),
                truecold_proto::limits::GuestMem::from_mib(1024).unwrap(),
                ""
            )
            .unwrap()
        );
        assert!(c.contains(&format!("truecold.engine={e}")), "{c}");
        assert!(c.contains("truecold.transport=serial"), "{c}");
    }
    let fc: serde_json::Value = serde_json::from_str(&firecracker::config(&g).unwrap()).unwrap();
    assert_eq!(
        fc["boot-source"]["boot_args"],
        g.cmdline(Engine::Firecracker).unwrap().as_str()
    );
    let ch = line(Engine::CloudHypervisor, &g).args;
    let at = ch.iter().position(|a| a == "--cmdline").unwrap();
    assert_eq!(ch[at + 1], g.cmdline(Engine::CloudHypervisor).unwrap());
    let q = line(Engine::QemuMicrovm, &g).args;
    let at = q.iter().position(|a| a == "-append").unwrap();
    assert_eq!(q[at + 1], g.cmdline(Engine::QemuMicrovm).unwrap());
}

/// Inside L1 (`nested-emulated`) the VMM jails itself like anywhere else: `--no-jail` only
/// with the operator's opt-out (`TRUECOLD_VMM_JAIL=off`).
#[test]
fn truecold_argv() {
    let mut g = guest(Backing::Thp);
    g.cmdline_extra = "printk.time=1".into();
    let l = line(Engine::Truecold, &g);
    let jail: String = crate::truecold::jail_args()
        .iter()
        .map(|a| format!(" {a}"))
        .collect();
    assert_eq!(
        l.display(5_000_000_000),
        format!(
            "/bin/engine boot --kernel /guest/vmlinux --initramfs /guest/initramfs.cpio \
             --vcpus 2 --mem-mib 1024 --backing thp --host-kind nested-emulated \
             --transport serial --report-file /w/truecold-report.json \
             --ram-layout around-hole --cmdline-extra printk.time=1{jail} \
             --request-ns <actual_request_ns> \
             --deadline-at-ns <actual_request_ns+5000000000>"
        )
    );
    assert_eq!(
        l.report_file.as_deref(),
        Some(Path::new("/w/truecold-report.json"))
    );
    let a = l.args_for(7, 9);
    assert_eq!(
        &a[a.len() - 4..],
        ["--request-ns", "7", "--deadline-at-ns", "9"]
    );
    assert_eq!(ending(Engine::Truecold), Ending::ExitsItself);
}

#[test]
fn firecracker_argv_and_config() {
    let g = guest(Backing::Anon);
    let l = line(Engine::Firecracker, &g);
    assert_eq!(
        l.display(1),
        "/bin/engine --no-api --config-file /w/firecracker-config.json \
         --log-path /w/firecracker.log --level Error"
    );
    assert_eq!(l.files.len(), 2);
    assert_eq!(
        l.files[1],
        ("/w/firecracker.log".into(), Vec::new()),
        "created empty"
    );
    let cfg: serde_json::Value = serde_json::from_slice(&l.files[0].1).unwrap();
    assert_eq!(cfg["boot-source"]["kernel_image_path"], "/guest/vmlinux");
    assert_eq!(cfg["boot-source"]["initrd_path"], "/guest/initramfs.cpio");
    assert_eq!(cfg["drives"], serde_json::json!([]));
    assert_eq!(cfg["machine-config"]["vcpu_count"], 2);
    assert_eq!(cfg["machine-config"]["mem_size_mib"], 1024);
    assert_eq!(cfg["machine-config"]["smt"], false);
    assert_eq!(cfg["machine-config"]["huge_pages"], "None");
    let cfg: serde_json::Value =
        serde_json::from_str(&firecracker::config(&guest(Backing::Hugetlb)).unwrap()).unwrap();
    assert_eq!(cfg["machine-config"]["huge_pages"], "2M");
    assert!(matches!(
        firecracker::config(&guest(Backing::Thp)),
        Err(EngineError::Unsupported { .. })
    ));
    assert_eq!(ending(Engine::Firecracker), Ending::ExitsItself);
}

#[test]
fn cloud_hypervisor_argv() {
    let g = guest(Backing::Anon);
    let a = line(Engine::CloudHypervisor, &g).args;
    let c = g.cmdline(Engine::CloudHypervisor).unwrap();
    assert_eq!(
        a,
        [
            "--kernel",
            "/guest/vmlinux",
            "--initramfs",
            "/guest/initramfs.cpio",
            "--cmdline",
            &c,
            "--cpus",
            "boot=2",
            "--memory",
            "size=1024M,thp=off",
            "--serial",
            "tty",
            "--console",
            "off"
        ]
    );
    assert_eq!(
        cloud_hypervisor::memory(&guest(Backing::Thp)),
        "size=1024M,thp=on"
    );
    assert_eq!(
        cloud_hypervisor::memory(&guest(Backing::Hugetlb)),
        "size=1024M,hugepages=on,hugepage_size=2M"
    );
    assert_eq!(ending(Engine::CloudHypervisor), Ending::KillAfterRecord);
}

#[test]
fn qemu_microvm_argv_and_exit_status() {
    let g = guest(Backing::Anon);
    let l = line(Engine::QemuMicrovm, &g);
    let c = g.cmdline(Engine::QemuMicrovm).unwrap();
    assert_eq!(
        l.args,
        [
            "-M",
            "microvm,x-option-roms=off,isa-serial=on,acpi=off,auto-kernel-cmdline=off",
            "-enable-kvm",
            "-cpu",
            "host",
            "-smp",
            "2",
            "-m",
            "1024M",
            "-kernel",
            "/guest/vmlinux",
            "-initrd",
            "/guest/initramfs.cpio",
            "-append",
            &c,
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
            "-serial",
            "stdio",
            "-device",
            "isa-debug-exit,iobase=0xf13,iosize=1"
        ]
    );
    let h = line(Engine::QemuMicrovm, &guest(Backing::Hugetlb)).args;
    assert!(h[1].ends_with(",memory-backend=ram"), "{h:?}");
    assert!(
        h.contains(&"memory-backend-memfd,id=ram,size=1024M,hugetlb=on,hugetlbsize=2M".to_string())
    );
    assert!(qemu_microvm::args(&guest(Backing::Thp)).is_err());
    // isa-debug-exit: status = code << 1 | 1.
    assert_eq!(guest_exit_code(Engine::QemuMicrovm, 1), Some(0));
    assert_eq!(guest_exit_code(Engine::QemuMicrovm, 7), Some(3));
    assert_eq!(guest_exit_code(Engine::QemuMicrovm, 0), None);
    assert_eq!(guest_exit_code(Engine::Firecracker, 1), None);
    assert!(exit_is_clean(Engine::QemuMicrovm, 1) && exit_is_clean(Engine::QemuMicrovm, 0));
    assert!(!exit_is_clean(Engine::QemuMicrovm, 7));
    assert!(exit_is_clean(Engine::Firecracker, 0) && !exit_is_clean(Engine::Firecracker, 1));
    assert_eq!(ending(Engine::QemuMicrovm), Ending::ExitsItself);
}

/// The parsers on the real outputs of the binaries this project runs (captured from
/// `../shared/peers/bin/* --version` and Debian's QEMU 7.2).
#[test]
fn version_lines_of_the_real_binaries() {
    let fc = b"Firecracker v1.16.1\n\n2026-11-30T17:13:35.168959798 [anonymous-instance:main] \
Firecracker exiting successfully. exit_code=0\n";
    assert_eq!(
        version::parse(Engine::Firecracker, fc).unwrap(),
        "Firecracker v1.16.1"
    );
    let ch = b"cloud-hypervisor v53.0.0\nMigration Protocol Versions: 0\n";
    assert_eq!(
        version::parse(Engine::CloudHypervisor, ch).unwrap(),
        "cloud-hypervisor v53.0.0"
    );
    let q = b"QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\n\
Copyright (c) 2003-2022 Fabrice Bellard and the QEMU Project developers\n";
    assert_eq!(
        version::parse(Engine::QemuMicrovm, q).unwrap(),
        "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"
    );
    assert_eq!(
        version::parse(Engine::Truecold, b"truecold-vmm 0.1.0\n").unwrap(),
        "truecold-vmm 0.1.0"
    );
    // A binary given to the wrong flag is refused, with what it printed.
    assert_eq!(
        version::parse(Engine::Firecracker, ch).unwrap_err(),
        "cloud-hypervisor v53.0.0"
    );
    assert!(version::parse(Engine::QemuMicrovm, b"").is_err());
    assert!(version::parse(Engine::Truecold, b"truecold-vmm \n").is_err());
}

/// The same parsers on the binaries themselves where they are present: the peers beside the
/// clone (`../shared/peers/`, see its README) and QEMU (`apt-get install qemu-system-x86`).
#[test]
fn version_of_the_installed_binaries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/bin");
    let peers = [
        (Engine::Firecracker, root.join("firecracker")),
        (Engine::CloudHypervisor, root.join("cloud-hypervisor")),
    ];
    for (e, p) in peers.iter().filter(|(_, p)| p.exists()) {
        let v = version::query(*e, p).unwrap_or_else(|err| panic!("{}: {err}", p.display()));
        assert!(v.contains(" v"), "{v}");
    }
    match version::query(Engine::QemuMicrovm, Path::new("qemu-system-x86_64")) {
        Ok(v) => assert!(v.starts_with("QEMU emulator version "), "{v}"),
        Err(version::VersionError::Spawn { .. }) => {
            panic!("qemu-system-x86_64 is not on PATH: apt-get install qemu-system-x86")
        }
        Err(e) => panic!("{e}"),
    }
    assert!(matches!(
        version::query(Engine::Firecracker, Path::new("/nonexistent/fc")),
        Err(version::VersionError::Spawn { .. })
    ));
}

#[test]
fn order_is_interleaved_seeded_and_complete() {
    let o = order(3, 10, 7);
    assert_eq!(o.len(), 30);
    for r in 0..10 {
        let mut in_round: Vec<_> = o.iter().filter(|x| x.0 == r).map(|x| x.1).collect();
        in_round.sort();
        assert_eq!(in_round, vec![0, 1, 2], "round {r} has each arm once");
    }
    assert!(o.windows(2).all(|w| w[0].0 <= w[1].0), "rounds in order");
    assert_eq!(o, order(3, 10, 7), "same seed, same order");
    assert_ne!(o, order(3, 10, 8), "another seed, another order");
    let firsts: std::collections::BTreeSet<_> = (0..10).map(|r| o[r * 3].1).collect();
    assert!(firsts.len() > 1, "no arm always goes first");
    assert!(order(0, 5, 1).is_empty() && order(2, 0, 1).is_empty());
}

#[test]
fn page_sizes_and_quoting() {
    assert_eq!(Backing::Anon.page_size(), 4096);
    assert_eq!(Backing::Thp.page_size(), 4096);
    assert_eq!(Backing::Hugetlb.page_size(), 2 << 20);
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(shell_quote("/x/y-z"), "/x/y-z");
    assert_eq!(shell_quote(""), "''");
}

/// truecold-vmm's arm carries the layout (its flag, its word first on the command line, the
/// mapping the driver expects); a peer never gets it, whatever the guest says.
#[test]
fn the_ram_layout_is_truecold_vmms_alone() {
    use truecold_proto::kinds::RamLayout;
    let mut g = guest(Backing::Anon);
    g.cmdline_extra = "printk.time=1".into();
    g.ram_layout = RamLayout::HoleInside;
    let l = line(Engine::Truecold, &g);
    let i = l.args.iter().position(|a| a == "--ram-layout").unwrap();
    assert_eq!(l.args[i + 1], "hole-inside");
    assert_eq!(l.ram_layout, RamLayout::HoleInside);
    let c = g.cmdline(Engine::Truecold).unwrap();
    assert!(
        c.ends_with(" truecold.ram_layout=hole-inside printk.time=1"),
        "{c}"
    );
    for e in [
        Engine::Firecracker,
        Engine::CloudHypervisor,
        Engine::QemuMicrovm,
    ] {
        let p = line(e, &g);
        assert_eq!(p.ram_layout, RamLayout::ABSENT, "{e}");
        assert_eq!(g.layout_of(e), RamLayout::ABSENT, "{e}");
        assert!(!g.cmdline(e).unwrap().contains("ram_layout"), "{e}");
        assert!(
            !p.args
                .iter()
                .any(|a| a.contains("ram-layout") || a.contains("ram_layout")),
            "{e}: {:?}",
            p.args
        );
    }
    // ABSENT (around-hole): the flag spelt out all the same (the VMM's own default is
    // hole-inside), no word on the guest command line.
    g.ram_layout = RamLayout::ABSENT;
    let l = line(Engine::Truecold, &g);
    let i = l.args.iter().position(|a| a == "--ram-layout").unwrap();
    assert_eq!(l.args[i + 1], "around-hole");
    assert!(!g.cmdline(Engine::Truecold).unwrap().contains("ram_layout"));
}
