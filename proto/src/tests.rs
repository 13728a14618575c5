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
        }
    );
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
    assert!(p.topology_is(2));
    assert!(!p.topology_is(1));
    let two_sockets = GuestPlatform {
        packages: 2,
        cores_per_package: 1,
        ..p.clone()
    };
    assert!(!two_sockets.topology_is(2));
    let smt = GuestPlatform {
        threads_per_core: 2,
        ..p
    };
    assert!(!smt.topology_is(2));
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
    use kinds::Engine;
    let mib256 = 256u64 << 20;
    // Measured in L1 (notes/environment.md): Firecracker 268,041,216; Cloud Hypervisor
    // 268,042,240; truecold exactly the configured size.
    assert_eq!(
        Engine::Firecracker.expected_firmware_ram(mib256),
        268_041_216
    );
    assert_eq!(
        Engine::CloudHypervisor.expected_firmware_ram(mib256),
        268_042_240
    );
    assert_eq!(Engine::Truecold.expected_firmware_ram(mib256), mib256);
    for e in Engine::ALL {
        assert_eq!(Engine::parse(e.as_str()), Ok(e));
        if let Some(h) = e.low_ram_hole() {
            assert!(h.start < h.end && h.end <= 1 << 20, "{e}");
        }
    }
    assert!(Engine::parse("xen").is_err());
    // Measured in L1: truecold-vmm's mapping for 1 GiB is 1,075,838,976 bytes (1 GiB + 2 MiB).
    assert_eq!(Engine::Truecold.expected_mapping(1 << 30), 1_075_838_976);
    assert_eq!(Engine::Firecracker.expected_mapping(1 << 30), 1 << 30);
}
