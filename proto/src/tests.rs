use super::*;
use proptest::prelude::*;

const ID: &str = "6f1c7c2e-8a7b-4c1d-9e0f-0123456789ab";

fn record() -> GuestRecord {
    GuestRecord {
        boot_id: BootId::parse(ID),
        t_init_ns: 1,
        t_ready_ns: 2,
        t_reply_ns: 3,
        t_record_ns: 4,
        mem_configured: 1 << 30,
        mem_firmware_ram: 1 << 30,
        mem_total: 1000,
        mem_present: 4096,
        mem_managed: 1000,
        mem_probe: 4 << 20,
        cpus: 2,
        platform: GuestPlatform {
            packages: 1,
            cores_per_package: 2,
            threads_per_core: 1,
            tsc_deadline_timer: true,
            constant_tsc: true,
            nonstop_tsc: false,
            tsc_unstable: false,
            clocksource: Clocksource::parse("kvm-clock"),
        },
        workload: Workload::BenchOk,
        code: ErrorCode::Ok,
    }
}

#[test]
fn boot_id_validation() {
    assert!(BootId::parse(ID).is_some());
    assert!(BootId::parse(&format!("{ID}\n")).is_some());
    assert!(BootId::parse(&ID.to_uppercase()).is_none());
    assert!(BootId::parse(&ID[1..]).is_none());
    assert!(BootId::parse(&ID.replace('-', "x")).is_none());
}

#[test]
fn reply_round_trip_and_binding() {
    let nonce = [7u8; NONCE_LEN];
    let id = BootId::parse(ID).unwrap();
    let r = Reply::new(&nonce, id);
    assert!(r.verifies(&nonce));
    assert!(!r.verifies(&[8u8; NONCE_LEN]));
    let other = BootId::parse("00000000-0000-0000-0000-000000000000").unwrap();
    assert!(!Reply {
        boot_id: other,
        ..r.clone()
    }
    .verifies(&nonce));
    let line = Message::Reply(r.clone()).encode();
    assert_eq!(Message::decode(line.as_bytes()), Ok(Message::Reply(r)));
}

#[test]
fn record_round_trip() {
    for workload in [
        Workload::BenchOk,
        Workload::NotRun,
        Workload::Failed(ErrorCode::WorkloadDigest),
    ] {
        let mut r = record();
        r.workload = workload;
        r.code = ErrorCode::MemFirmwareMismatch;
        let line = Message::Record(r.clone()).encode();
        assert!(line.len() < MAX_LINE);
        assert_eq!(Message::decode(line.as_bytes()), Ok(Message::Record(r)));
    }
    let mut r = record();
    r.boot_id = None;
    let line = Message::Record(r.clone()).encode();
    assert_eq!(Message::decode(line.as_bytes()), Ok(Message::Record(r)));
}

#[test]
fn record_rejections() {
    let good = Message::Record(record()).encode();
    let cases: Vec<(String, ProtoError)> = vec![
        (good.replace("TC1", "TC2"), ProtoError::BadTag),
        (
            good.replace("record", "rekord"),
            ProtoError::UnknownKind("rekord".into()),
        ),
        (good.replace(" cpus=2", ""), ProtoError::MissingKey("cpus")),
        (
            good.replace("tsc_unstable=0", "tsc_unstable=2"),
            ProtoError::BadValue {
                key: "tsc_unstable",
                value: "2".into(),
            },
        ),
        (
            good.replace("clocksource=kvm-clock", "clocksource=KVM"),
            ProtoError::BadValue {
                key: "clocksource",
                value: "KVM".into(),
            },
        ),
        (
            good.replace("packages=1", "packages=4294967296"),
            ProtoError::BadValue {
                key: "packages",
                value: "4294967296".into(),
            },
        ),
        (
            good.replace(" clocksource=kvm-clock", ""),
            ProtoError::MissingKey("clocksource"),
        ),
        (
            good.replace(" cpus=2", " cpus=2 cpus=2"),
            ProtoError::DuplicateKey("cpus".into()),
        ),
        (
            good.replace(" cpus=2", " cpu=2"),
            ProtoError::UnknownKey("cpu".into()),
        ),
        (
            good.replace(" cpus=2", " cpus"),
            ProtoError::MalformedField("cpus".into()),
        ),
        (
            good.replace("cpus=2", "cpus=-2"),
            ProtoError::BadValue {
                key: "cpus",
                value: "-2".into(),
            },
        ),
        (
            good.replace("cpus=2", "cpus=99999999999"),
            ProtoError::BadValue {
                key: "cpus",
                value: "99999999999".into(),
            },
        ),
        (
            good.replace("mem_total=1000", "mem_total=18446744073709551616"),
            ProtoError::BadValue {
                key: "mem_total",
                value: "18446744073709551616".into(),
            },
        ),
        (
            good.replace("code=ok", "code=nope"),
            ProtoError::BadValue {
                key: "code",
                value: "nope".into(),
            },
        ),
        (
            good.replace("BENCH_OK", "ok"),
            ProtoError::BadValue {
                key: "workload",
                value: "ok".into(),
            },
        ),
        (good.replace("TC1", "TC1\u{7}"), ProtoError::NotAscii),
    ];
    for (line, want) in cases {
        assert_eq!(Message::decode(line.as_bytes()), Err(want), "{line}");
    }
    assert_eq!(
        Message::decode(&[b'x'; MAX_LINE + 1]),
        Err(ProtoError::LineTooLong)
    );
}

#[test]
fn codes_are_distinct_and_decode() {
    for c in ErrorCode::ALL {
        assert_eq!(ErrorCode::from_byte(c as u8), Ok(c));
        assert_eq!(
            ErrorCode::ALL
                .iter()
                .filter(|x| x.name() == c.name())
                .count(),
            1
        );
    }
    assert_eq!(ErrorCode::from_byte(255), Err(ProtoError::UnknownCode(255)));
    assert_eq!(Phase::from_byte(2), Ok(Phase::Ready));
    assert_eq!(Phase::from_byte(0), Err(ProtoError::UnknownPhase(0)));
}

#[test]
fn line_assembler_splits_and_bounds() {
    let mut a = LineAssembler::default();
    assert!(a.push(b"ab").is_empty());
    assert_eq!(a.pending(), 2);
    let out = a.push(b"c\nde\n");
    assert_eq!(out, vec![Ok(b"abc".to_vec()), Ok(b"de".to_vec())]);
    let mut long = vec![b'x'; MAX_LINE * 2];
    long.push(b'\n');
    long.extend_from_slice(b"ok\n");
    assert_eq!(
        a.push(&long),
        vec![Err(ProtoError::LineTooLong), Ok(b"ok".to_vec())]
    );
}

#[test]
fn cmdline_parsing() {
    let c = GuestConfig::from_cmdline("console=ttyS0 truecold.mem=268435456 quiet").unwrap();
    assert_eq!(
        c,
        GuestConfig {
            mem: 268435456,
            probe: cmdline::DEFAULT_PROBE,
            net: None,
            transport: kinds::Transport::Ports,
            engine: kinds::Engine::Truecold,
            ram_layout: kinds::RamLayout::AroundHole,
            attribution: false,
            fault: None,
            workspace: false,
        }
    );
    let c = GuestConfig::from_cmdline("truecold.mem=1 truecold.ram_layout=hole-inside").unwrap();
    assert_eq!(c.ram_layout, kinds::RamLayout::HoleInside);
    let base = "truecold.mem=1 ";
    let c = GuestConfig::from_cmdline(&format!(
        "{base}truecold.workspace=1 truecold.transport=vsock"
    ))
    .unwrap();
    assert!(c.workspace);
    assert_eq!(c.transport, kinds::Transport::Vsock);
    for bad in [
        "truecold.workspace=2",
        "truecold.workspace=1 truecold.workspace=0",
    ] {
        assert!(
            GuestConfig::from_cmdline(&format!("{base}{bad}")).is_err(),
            "{bad}"
        );
    }
    for (v, want) in [("panic", GuestFault::Panic), ("exit", GuestFault::Exit)] {
        let c = GuestConfig::from_cmdline(&format!("{base}truecold.fault={v}")).unwrap();
        assert_eq!(c.fault, Some(want));
    }
    assert!(
        GuestConfig::from_cmdline(&format!("{base}{}", cmdline::ATTRIBUTION_CMDLINE))
            .unwrap()
            .attribution
    );
    for bad in [
        "truecold.attribution=2",
        "truecold.attribution=",
        "truecold.attribution=1 truecold.attribution=0",
        "truecold.fault=reboot",
        "truecold.fault=panic truecold.fault=exit",
    ] {
        assert!(
            matches!(
                GuestConfig::from_cmdline(&format!("{base}{bad}")),
                Err(ProtoError::BadCmdline(_))
            ),
            "{bad}"
        );
    }
    let c = GuestConfig::from_cmdline(
        "truecold.mem=1 truecold.transport=serial truecold.engine=cloud-hypervisor",
    )
    .unwrap();
    assert_eq!(
        (c.transport, c.engine),
        (kinds::Transport::Serial, kinds::Engine::CloudHypervisor)
    );
    let c =
        GuestConfig::from_cmdline("truecold.mem=1 truecold.probe=0 truecold.net=eth0,10.0.0.2/24")
            .unwrap();
    assert_eq!((c.probe, c.net.as_deref()), (0, Some("eth0,10.0.0.2/24")));
    assert_eq!(
        GuestConfig::from_cmdline("quiet"),
        Err(ProtoError::MissingKey("truecold.mem"))
    );
    for bad in [
        "truecold.mem=x",
        "truecold.mem=",
        "truecold.mem",
        "truecold.mem=1 truecold.mem=2",
        "truecold.mem=1 truecold.foo=1",
        "truecold.mem=1 truecold.transport=usb",
        "truecold.mem=1 truecold.engine=xen",
        "truecold.mem=1 truecold.engine=firecracker truecold.engine=firecracker",
        "truecold.mem=1 truecold.ram_layout=inside",
        "truecold.mem=1 truecold.ram_layout=hole-inside truecold.ram_layout=around-hole",
        // A peer lays RAM out its own way.
        "truecold.mem=1 truecold.engine=firecracker truecold.ram_layout=hole-inside",
    ] {
        assert!(
            matches!(
                GuestConfig::from_cmdline(bad),
                Err(ProtoError::BadCmdline(_))
            ),
            "{bad}"
        );
    }
}

#[test]
fn hex_round_trip() {
    let b = [0u8, 1, 0xab, 0xff];
    assert_eq!(hex(&b), "0001abff");
    assert_eq!(unhex::<4>("0001ABff"), Some(b));
    assert_eq!(unhex::<4>("0001abf"), None);
    assert_eq!(unhex::<4>("0001abfg"), None);
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = Message::decode(&bytes);
        let mut a = LineAssembler::default();
        let _ = a.push(&bytes);
        let _ = GuestConfig::from_cmdline(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn decode_never_panics_near_valid(cut in 0usize..400, junk in proptest::collection::vec(any::<u8>(), 0..8)) {
        let line = Message::Record(record()).encode().into_bytes();
        let mut l = line[..cut.min(line.len())].to_vec();
        l.extend(junk);
        let _ = Message::decode(&l);
    }
}

#[test]
fn platform_topology_and_clocksource_names() {
    let p = record().platform;
    assert!(p.topology_is(1, 2));
    assert!(!p.topology_is(1, 1));
    let two_sockets = GuestPlatform {
        packages: 2,
        cores_per_package: 1,
        ..p.clone()
    };
    assert!(!two_sockets.topology_is(1, 2));
    assert!(two_sockets.topology_is(2, 1));
    let smt = GuestPlatform {
        threads_per_core: 2,
        ..p
    };
    assert!(!smt.topology_is(1, 2));
    assert_eq!(
        Clocksource::parse("tsc\n").map(|c| c.to_string()),
        Some("tsc".into())
    );
    assert!(Clocksource::parse("").is_none());
    assert!(Clocksource::parse("a b").is_none());
    assert!(Clocksource::parse(&"x".repeat(Clocksource::MAX_LEN + 1)).is_none());
    let mut r = record();
    r.platform = GuestPlatform::default();
    let line = Message::Record(r.clone()).encode();
    assert!(line.contains(" clocksource=none "), "{line}");
    assert_eq!(Message::decode(line.as_bytes()), Ok(Message::Record(r)));
}

#[test]
fn serial_lines_round_trip_and_reject_garbage() {
    let id = BootId::parse("0123abcd-0123-4567-89ab-0123456789ab").unwrap();
    let ready = Message::Ready { boot_id: id };
    assert_eq!(
        ready.encode(),
        "TC1 ready boot_id=0123abcd-0123-4567-89ab-0123456789ab\n"
    );
    assert_eq!(Message::decode(ready.encode().as_bytes()), Ok(ready));
    let nonce = Message::Nonce([0xab; NONCE_LEN]);
    assert_eq!(
        nonce.encode(),
        format!("TC1 nonce value={}\n", "ab".repeat(NONCE_LEN))
    );
    assert_eq!(Message::decode(nonce.encode().as_bytes()), Ok(nonce));
    for bad in [
        "TC1 nonce value=abc",
        "TC1 nonce",
        "TC1 nonce value=00 value=00",
        "TC1 ready boot_id=nope",
        "TC1 ready",
    ] {
        assert!(Message::decode(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn engine_layouts_give_the_measured_ram() {
    use kinds::{Engine, RamLayout};
    let mib256 = 256u64 << 20;
    let a = RamLayout::AroundHole;
    // Measured in L1 (notes/environment.md): Firecracker 268,041,216; Cloud Hypervisor
    // 268,042,240; truecold exactly the configured size.
    assert_eq!(
        Engine::Firecracker.expected_firmware_ram(mib256, a),
        268_041_216
    );
    assert_eq!(
        Engine::CloudHypervisor.expected_firmware_ram(mib256, a),
        268_042_240
    );
    assert_eq!(Engine::Truecold.expected_firmware_ram(mib256, a), mib256);
    // Laid hole-inside, truecold gives what Cloud Hypervisor gives (the same hole).
    assert_eq!(
        Engine::Truecold.expected_firmware_ram(mib256, RamLayout::HoleInside),
        268_042_240
    );
    for e in Engine::ALL {
        assert_eq!(Engine::parse(e.as_str()), Ok(e));
        for l in RamLayout::ALL {
            if let Some(h) = e.low_ram_hole(l) {
                assert!(h.start < h.end && h.end <= 1 << 20, "{e}");
            }
        }
    }
    assert!(Engine::parse("xen").is_err());
    // Measured in L1: truecold-vmm's mapping for 1 GiB is 1,075,838,976 bytes (1 GiB + 2 MiB).
    assert_eq!(Engine::Truecold.expected_mapping(1 << 30, a), 1_075_838_976);
    assert_eq!(
        Engine::Truecold.expected_mapping(1 << 30, RamLayout::HoleInside),
        1 << 30
    );
    // An odd MiB count rounds up to 2 MiB either way.
    assert_eq!(
        Engine::Truecold.expected_mapping(129 << 20, RamLayout::HoleInside),
        130 << 20
    );
    for l in RamLayout::ALL {
        assert_eq!(Engine::Firecracker.expected_mapping(1 << 30, l), 1 << 30);
    }
}

#[test]
fn trace_lines_round_trip() {
    use crate::trace::*;
    let lines = [
        TraceLine::Sync(KmsgSync {
            kmsg_us: 123_456,
            mono_ns: 120_000_001,
            records: 700,
            truncated: false,
        }),
        TraceLine::Initcall(Initcall {
            func: "0xffffffff81f7a2e5".into(),
            start_us: 5_000,
            dur_us: 12,
            ret: -19,
        }),
        TraceLine::Initcall(Initcall {
            func: "pci_subsys_init".into(),
            start_us: 5_100,
            dur_us: 0,
            ret: 0,
        }),
        TraceLine::Mark(KernelMark {
            name: "run_init".into(),
            t_us: 90_000,
        }),
    ];
    for l in lines {
        let m = Message::Trace(l);
        let text = m.encode();
        assert!(text.len() <= MAX_LINE);
        assert_eq!(Message::decode(text.as_bytes()), Ok(m), "{text}");
    }
}

#[test]
fn hostile_trace_lines_are_typed_errors() {
    use crate::trace::*;
    let long_name = format!(
        "TC1 initcall fn={} start_us=1 dur_us=1 ret=0",
        "a".repeat(MAX_NAME + 1)
    );
    let cases: Vec<(String, ProtoError)> = vec![
        (
            "TC1 initcall fn=a start_us=1 dur_us=1".into(),
            ProtoError::MissingKey("ret"),
        ),
        (
            "TC1 initcall fn=a b start_us=1 dur_us=1 ret=0".into(),
            ProtoError::MalformedField("b".into()),
        ),
        (
            "TC1 initcall fn=a/b start_us=1 dur_us=1 ret=0".into(),
            ProtoError::BadValue {
                key: "fn",
                value: "a/b".into(),
            },
        ),
        (
            "TC1 initcall fn= start_us=1 dur_us=1 ret=0".into(),
            ProtoError::BadValue {
                key: "fn",
                value: "".into(),
            },
        ),
        (
            "TC1 initcall fn=a start_us=-1 dur_us=1 ret=0".into(),
            ProtoError::BadValue {
                key: "start_us",
                value: "-1".into(),
            },
        ),
        (
            "TC1 initcall fn=a start_us=1 dur_us=99999999999999999999999 ret=0".into(),
            ProtoError::BadValue {
                key: "dur_us",
                value: "99999999999999999999999".into(),
            },
        ),
        (
            "TC1 initcall fn=a start_us=1 dur_us=1 ret=-".into(),
            ProtoError::BadValue {
                key: "ret",
                value: "-".into(),
            },
        ),
        (
            "TC1 initcall fn=a start_us=1 dur_us=1 ret=99999999999999999999".into(),
            ProtoError::BadValue {
                key: "ret",
                value: "99999999999999999999".into(),
            },
        ),
        (
            "TC1 initcall fn=a start_us=1 dur_us=1 ret=0 ret=1".into(),
            ProtoError::DuplicateKey("ret".into()),
        ),
        (
            "TC1 kmark name=bogus t_us=1".into(),
            ProtoError::BadValue {
                key: "name",
                value: "bogus".into(),
            },
        ),
        (
            "TC1 kmark name=memory t_us=1 x=2".into(),
            ProtoError::UnknownKey("x".into()),
        ),
        (
            "TC1 ksync kmsg_us=1 mono_ns=2 records=3 truncated=yes".into(),
            ProtoError::BadValue {
                key: "truncated",
                value: "yes".into(),
            },
        ),
        (
            long_name,
            ProtoError::BadValue {
                key: "fn",
                value: "a".repeat(MAX_NAME + 1),
            },
        ),
    ];
    for (line, want) in cases {
        assert_eq!(Message::decode(line.as_bytes()), Err(want), "{line}");
    }
    assert_eq!(
        Message::decode(format!("TC1 initcall fn={}", "a".repeat(MAX_LINE)).as_bytes()),
        Err(ProtoError::LineTooLong)
    );
    // Bounds on the host's collection.
    let mut t = GuestTrace::default();
    let call = |i: u64| {
        TraceLine::Initcall(Initcall {
            func: "f".into(),
            start_us: i,
            dur_us: 1,
            ret: 0,
        })
    };
    for i in 0..MAX_INITCALLS as u64 {
        t.push(call(i)).unwrap();
    }
    assert_eq!(
        t.push(call(0)),
        Err(ProtoError::TooMany {
            what: "initcall",
            max: MAX_INITCALLS
        })
    );
    assert_eq!(t.initcalls.len(), MAX_INITCALLS);
    let sync = TraceLine::Sync(KmsgSync {
        kmsg_us: 1,
        mono_ns: 1,
        records: 1,
        truncated: true,
    });
    t.push(sync.clone()).unwrap();
    assert_eq!(t.push(sync), Err(ProtoError::Repeated("ksync")));
    let mark = |n: &str| {
        TraceLine::Mark(KernelMark {
            name: n.into(),
            t_us: 1,
        })
    };
    t.push(mark("memory")).unwrap();
    assert_eq!(t.push(mark("memory")), Err(ProtoError::Repeated("kmark")));
    for (n, _) in KERNEL_MARKS.iter() {
        if *n != "memory" {
            t.push(mark(n)).unwrap();
        }
    }
    assert_eq!(t.marks.len(), MAX_KMARKS);
    assert_eq!(
        t.push(mark("memory")),
        Err(ProtoError::TooMany {
            what: "kmark",
            max: MAX_KMARKS
        })
    );
}

#[test]
fn counters_split_by_the_tiling_spans() {
    use crate::measure::{Mark, Stage, Stamps};
    use crate::report::{Accounting, Counters, ExitTally};
    let stamps = Stamps {
        request: Some(100),
        boot_start: Some(110),
        kvm_open: Some(120),
        vm_created: None,
        memory_ready: Some(140),
        kernel_loaded: Some(150),
        first_run: Some(160),
        init_doorbell: Some(200),
        ready_doorbell: Some(220),
        strict_ready: Some(230),
        record: Some(300),
        exit: Some(310),
        teardown_done: Some(320),
        reaped: Some(330),
        ..Stamps::default()
    };
    let c = |io_out: u64, minflt: u64| Counters {
        exits: ExitTally {
            io_out,
            ..ExitTally::default()
        },
        minflt,
        majflt: 0,
    };
    let mut a = Accounting::default();
    for (m, k) in [
        (Mark::BootStart, c(0, 50)),
        (Mark::KvmOpen, c(0, 55)),
        (Mark::MemoryReady, c(0, 70)),
        (Mark::KernelLoaded, c(0, 90)),
        (Mark::FirstRun, c(0, 95)),
        (Mark::InitDoorbell, c(40, 400)),
        (Mark::ReadyDoorbell, c(45, 410)),
        (Mark::StrictReady, c(47, 411)),
        (Mark::Record, c(60, 420)),
        (Mark::Exit, c(62, 421)),
        (Mark::TeardownDone, c(62, 425)),
    ] {
        a.take(m, k);
    }
    let st = a.stages(&stamps);
    let get = |s: Stage| st.iter().find(|x| x.stage == s).map(|x| x.counters);
    assert_eq!(get(Stage::Spawn), Some(c(0, 50)));
    // vm_created missing: memory absorbs vm_create, as the durations do.
    assert_eq!(get(Stage::VmCreate), None);
    assert_eq!(get(Stage::Memory), Some(c(0, 15)));
    assert_eq!(get(Stage::GuestBoot), Some(c(40, 305)));
    assert_eq!(get(Stage::Challenge), Some(c(2, 1)));
    // teardown ends at reaped: the VMM's last sample (teardown_done) stands for it.
    assert_eq!(get(Stage::Teardown), Some(c(2, 5)));
    // Every host stage's duration has counters over the same span.
    let times = stamps.tile();
    for s in &st {
        assert!(times.get(s.stage).is_some(), "{:?}", s.stage);
    }
    // A counter that went backwards leaves its stage out.
    a.take(Mark::ReadyDoorbell, c(41, 1));
    let st = a.stages(&stamps);
    assert!(st.iter().all(|x| x.stage != Stage::GuestInit));
    assert!(st.iter().any(|x| x.stage == Stage::Challenge));
}
