use super::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn e(start: u64, end: u64, kind: &str) -> MemmapEntry {
    MemmapEntry {
        start,
        end,
        kind: kind.into(),
    }
}

#[test]
fn memmap_entry_parses_sysfs_text() {
    let m = MemmapEntry::parse("0x100000\n", "0xfffffff\n", "System RAM\n").unwrap();
    assert_eq!(m, e(0x100000, 0xfff_ffff, SYSTEM_RAM));
    assert_eq!(m.len(), 0xfff_ffff - 0x100000 + 1);
}

#[test]
fn memmap_entry_rejects_garbage() {
    assert!(matches!(
        MemmapEntry::parse("100000", "0x1", "System RAM"),
        Err(ParseError::BadHex(_))
    ));
    assert!(matches!(
        MemmapEntry::parse("0x", "0x1", "System RAM"),
        Err(ParseError::BadHex(_))
    ));
    assert!(matches!(
        MemmapEntry::parse("0x1", "0x1ffffffffffffffff", "System RAM"),
        Err(ParseError::BadHex(_))
    ));
    assert!(matches!(
        MemmapEntry::parse("0x10", "0xf", "System RAM"),
        Err(ParseError::InvertedRange {
            start: 0x10,
            end: 0xf
        })
    ));
}

#[test]
fn ram_sum_is_exact_for_the_vmm_layout() {
    // The architecture's layout for 256 MiB: [0, 0xA0000) + [1 MiB, 256 MiB + 384 KiB).
    let low = 0xA0000u64;
    let rest = 256 * MIB - low;
    let map = vec![
        e(0, low - 1, SYSTEM_RAM),
        e(0xA0000, 0xFFFFF, "Reserved"),
        e(0x100000, 0x100000 + rest - 1, SYSTEM_RAM),
    ];
    let s = summarize_ram(&map).unwrap();
    assert_eq!(s.ram_bytes, 256 * MIB);
    assert_eq!(s.top, 0x100000 + rest);
}

#[test]
fn ram_sum_ignores_order_and_other_types_and_rejects_overlap() {
    let map = vec![
        e(0x1_0000_0000, 0x1_3fff_ffff, SYSTEM_RAM),
        e(0, 0xfff, SYSTEM_RAM),
        e(0, 0xffff_ffff, "Reserved"),
    ];
    let s = summarize_ram(&map).unwrap();
    assert_eq!(s.ram_bytes, GIB + 0x1000);
    assert_eq!(s.top, 0x1_4000_0000);
    let overlap = vec![e(0, 0x1fff, SYSTEM_RAM), e(0x1000, 0x2fff, SYSTEM_RAM)];
    assert_eq!(summarize_ram(&overlap), Err(ParseError::Overlap(0x1000)));
    assert_eq!(
        summarize_ram(&[]).unwrap(),
        RamSummary {
            ram_bytes: 0,
            top: 0
        }
    );
}

#[test]
fn ram_sum_overflow_is_an_error() {
    let map = vec![
        e(0, u64::MAX - 1, SYSTEM_RAM),
        e(u64::MAX, u64::MAX, SYSTEM_RAM),
    ];
    assert_eq!(summarize_ram(&map), Err(ParseError::Overflow));
}

#[test]
fn meminfo_total() {
    let t = "MemTotal:         230000 kB\nMemFree:          200000 kB\n";
    assert_eq!(parse_meminfo_total(t).unwrap(), 230000 * 1024);
    assert_eq!(
        parse_meminfo_total("MemFree: 1 kB\n"),
        Err(ParseError::MissingKey("MemTotal"))
    );
    assert_eq!(
        parse_meminfo_total("MemTotal: 12 MB\n"),
        Err(ParseError::BadUnit("MB".into()))
    );
    assert!(matches!(
        parse_meminfo_total("MemTotal: -3 kB\n"),
        Err(ParseError::BadNumber(_))
    ));
    assert_eq!(
        parse_meminfo_total("MemTotal: 18446744073709551615 kB"),
        Err(ParseError::Overflow)
    );
}

/// The zone rule on the map the guest read: the measured figures of the defconfig +
/// kvm_guest.config + PVH kernel under truecold-vmm (1 GiB `hole-inside`, whose MemTotal the
/// calibrated bound rejected) pass; a hidden hole, MemTotal ≠ Σmanaged and more managed than
/// present each fail as their own error, and so their own code.
#[test]
fn zone_rule_on_the_guests_map() {
    use truecold_proto::layout::{ZoneError, ZoneFigures};
    let m = GIB;
    let map = two_ranges(0xA_0000, m);
    let fw = summarize_ram(&map).unwrap().ram_bytes;
    assert_eq!(fw, 1_073_348_608);
    let good = ZoneFigures {
        present: 262_047 * 4096,
        managed: 1_017_999_360,
        mem_total: 1_017_999_360,
    };
    assert_eq!(zone_rule(&map, good), Ok(()));
    assert_eq!(good.reserved() / 4096, 13_512);
    let hidden = ZoneFigures {
        present: good.present - 4096,
        ..good
    };
    assert!(matches!(
        zone_rule(&map, hidden),
        Err(ZoneError::Present { trim: 4096, .. })
    ));
    let total = ZoneFigures {
        mem_total: good.managed - 4096,
        ..good
    };
    assert!(matches!(
        zone_rule(&map, total),
        Err(ZoneError::Managed { .. })
    ));
    let above = ZoneFigures {
        managed: good.present + 4096,
        mem_total: good.present + 4096,
        ..good
    };
    assert!(matches!(
        zone_rule(&map, above),
        Err(ZoneError::ManagedAbovePresent { .. })
    ));
    // T comes from the map the guest read: QEMU microvm's low RAM ends mid-page (0x9fc00),
    // so the same kernel holds 3 KiB less of it present than the map's RAM less page 0.
    let qemu = two_ranges(0x9_fc00, m);
    let fw = summarize_ram(&qemu).unwrap().ram_bytes;
    let z = ZoneFigures {
        present: fw - 7168,
        ..good
    };
    assert_eq!(zone_rule(&qemu, z), Ok(()));
    assert!(zone_rule(
        &qemu,
        ZoneFigures {
            present: fw - 4096,
            ..good
        }
    )
    .is_err());
}

#[test]
fn cpu_lists() {
    assert_eq!(parse_cpu_count("0\n").unwrap(), 1);
    assert_eq!(parse_cpu_count("0-1\n").unwrap(), 2);
    assert_eq!(parse_cpu_count("0-3,5,7-8").unwrap(), 7);
    for bad in ["", "\n", "a", "3-1", "0-", ",", "0,,1"] {
        assert!(parse_cpu_count(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn net_specs() {
    let n = NetSpec::parse("eth0,10.0.2.15/24").unwrap();
    assert_eq!(n.dev, "eth0");
    assert_eq!(n.addr, [10, 0, 2, 15]);
    assert_eq!(n.prefix, 24);
    assert_eq!(n.netmask(), [255, 255, 255, 0]);
    assert_eq!(
        NetSpec::parse("e,1.2.3.4/0").unwrap().netmask(),
        [0, 0, 0, 0]
    );
    assert_eq!(NetSpec::parse("e,1.2.3.4/32").unwrap().netmask(), [255; 4]);
    for bad in [
        "",
        "eth0",
        "eth0,10.0.2.15",
        ",10.0.2.15/24",
        "eth0,10.0.2/24",
        "eth0,10.0.2.15.1/24",
        "eth0,10.0.2.256/24",
        "eth0,10.0.2.15/33",
        "a_very_long_interface_name,1.2.3.4/8",
        "et h0,1.2.3.4/8",
    ] {
        assert!(NetSpec::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn probe_words_differ() {
    let w: Vec<u64> = (0..1024).map(probe_word).collect();
    let mut s = w.clone();
    s.sort_unstable();
    s.dedup();
    assert_eq!(s.len(), w.len());
    assert!(w.iter().all(|x| *x != 0 && *x != u64::MAX));
}

#[test]
fn payload_is_fixed() {
    let p = payload();
    assert_eq!(p.len(), PAYLOAD_LEN);
    assert_eq!(p, payload());
    // Pinned: a change to the payload changes what BENCH_OK means.
    assert_eq!(truecold_proto::hex(&sha256(&p)), PAYLOAD_SHA256_HEX);
}

const PAYLOAD_SHA256_HEX: &str = "e97a7070f844ef664513ec407d6603a27ee8af5d1b0858318298afcfc55822e9";

const CPUINFO_2: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nphysical id\t: 0\n\
siblings\t: 2\ncore id\t\t: 0\ncpu cores\t: 2\napicid\t\t: 0\n\
flags\t\t: fpu tsc constant_tsc nonstop_tsc tsc_deadline_timer hypervisor\n\n\
processor\t: 1\nvendor_id\t: AuthenticAMD\nphysical id\t: 0\nsiblings\t: 2\n\
core id\t\t: 1\ncpu cores\t: 2\napicid\t\t: 1\nflags\t\t: fpu tsc\n\n";

#[test]
fn cpuinfo_one_package_two_cores() {
    let f = parse_cpuinfo(CPUINFO_2).unwrap();
    assert_eq!(
        f,
        truecold_proto::GuestPlatform {
            packages: 1,
            cores_per_package: 2,
            threads_per_core: 1,
            tsc_deadline_timer: true,
            constant_tsc: true,
            nonstop_tsc: true,
            tsc_unstable: false,
            clocksource: None,
        }
    );
}

#[test]
fn cpuinfo_two_sockets_and_smt_and_up() {
    // What truecold's guest saw before the platform fix: two packages of one core.
    let two = CPUINFO_2
        .replace("cpu cores\t: 2", "cpu cores\t: 1")
        .replace("siblings\t: 2", "siblings\t: 1")
        .replacen("physical id\t: 0", "physical id\t: 7", 1);
    let f = parse_cpuinfo(&two).unwrap();
    assert_eq!(
        (f.packages, f.cores_per_package, f.threads_per_core),
        (2, 1, 1)
    );
    assert!(f.tsc_deadline_timer, "flags come from the boot CPU");
    let smt = CPUINFO_2.replace("cpu cores\t: 2", "cpu cores\t: 1");
    let f = parse_cpuinfo(&smt).unwrap();
    assert_eq!(
        (f.packages, f.cores_per_package, f.threads_per_core),
        (1, 1, 2)
    );
    let up = "processor\t: 0\nflags\t\t: fpu tsc\n";
    let f = parse_cpuinfo(up).unwrap();
    assert_eq!(
        (f.packages, f.cores_per_package, f.threads_per_core),
        (1, 1, 1)
    );
    assert!(!f.constant_tsc);
}

#[test]
fn cpuinfo_rejections() {
    assert!(parse_cpuinfo("").is_err());
    assert!(parse_cpuinfo("processor\t: 0\n").is_err(), "no flags");
    let bad_ratio = CPUINFO_2.replace("siblings\t: 2", "siblings\t: 3");
    assert!(parse_cpuinfo(&bad_ratio).is_err());
    let zero = CPUINFO_2.replace("cpu cores\t: 2", "cpu cores\t: 0");
    assert!(parse_cpuinfo(&zero).is_err());
    let junk = CPUINFO_2.replace("physical id\t: 0", "physical id\t: x");
    assert!(parse_cpuinfo(&junk).is_err());
    let two_up = "processor\t: 0\nflags\t\t: fpu\n\nprocessor\t: 1\nflags\t\t: fpu\n";
    assert!(
        parse_cpuinfo(two_up).is_err(),
        "two CPUs without topology lines"
    );
}

/// A firmware map of System RAM `[0, low)` + `[1 MiB, 1 MiB + rest)`, with the gap reserved.
fn two_ranges(low: u64, top: u64) -> Vec<MemmapEntry> {
    vec![
        e(0, low - 1, SYSTEM_RAM),
        e(low, 0xF_FFFF, "Reserved"),
        e(0x10_0000, top - 1, SYSTEM_RAM),
    ]
}

fn check(engine: Engine, configured: u64, map: &[MemmapEntry]) -> Result<(), RamMismatch> {
    exact_ram(
        engine,
        RamLayout::AroundHole,
        configured,
        summarize_ram(map).unwrap(),
        map,
    )
}

fn check_layout(
    layout: RamLayout,
    configured: u64,
    map: &[MemmapEntry],
) -> Result<(), RamMismatch> {
    exact_ram(
        Engine::Truecold,
        layout,
        configured,
        summarize_ram(map).unwrap(),
        map,
    )
}

/// truecold's `hole-inside` layout as the guest sees it: RAM + the declared hole = configured
/// to the byte; the hole missing from the map's `Reserved` entries, or RAM one page off, is a
/// mismatch; the around-hole map fails the hole-inside rule and the other way round.
#[test]
fn exact_ram_under_truecolds_layouts() {
    let m = 256 * MIB;
    let hole_inside = two_ranges(0xA_0000, m);
    let around = two_ranges(0xA_0000, 0x10_0000 + m - 0xA_0000);
    assert_eq!(check_layout(RamLayout::HoleInside, m, &hole_inside), Ok(()));
    assert_eq!(check_layout(RamLayout::AroundHole, m, &around), Ok(()));
    assert!(check_layout(RamLayout::AroundHole, m, &hole_inside).is_err());
    let err = check_layout(RamLayout::HoleInside, m, &around).unwrap_err();
    assert_eq!(err.expected, m - 0x6_0000);
    // The hole not declared: the same RAM, no Reserved entry.
    let undeclared: Vec<_> = hole_inside
        .iter()
        .filter(|e| e.kind == SYSTEM_RAM)
        .cloned()
        .collect();
    let err = check_layout(RamLayout::HoleInside, m, &undeclared).unwrap_err();
    assert_eq!(
        err.found, err.expected,
        "the sum is right, the declaration is not"
    );
    assert!(matches!(
        err.rule,
        truecold_proto::layout::AccountingError::HoleNotDeclared { declared: 0, .. }
    ));
    assert!(
        err.to_string().contains("engine truecold (hole-inside)"),
        "{err}"
    );
    // RAM + hole ≠ configured.
    let short = two_ranges(0xA_0000, m - 4096);
    assert!(check_layout(RamLayout::HoleInside, m, &short).is_err());
    assert!(check_layout(RamLayout::HoleInside, m + 4096, &hole_inside).is_err());
}

/// `above-4g` as the guest sees it: the hole-inside rule on a map whose RAM is split at 256 MiB
/// and resumes at 4 GiB; one page missing above 4 GiB is a mismatch.
#[test]
fn exact_ram_under_the_above_4g_layout() {
    let m = 16384 * MIB;
    let low_top = 256 * MIB;
    let four_g = 4096 * MIB;
    let mut map = two_ranges(0xA_0000, low_top);
    map.push(e(four_g, four_g + m - low_top - 1, SYSTEM_RAM));
    assert_eq!(check_layout(RamLayout::Above4g, m, &map), Ok(()));
    assert!(check_layout(RamLayout::AroundHole, m, &map).is_err());
    let mut short = map.clone();
    short[3] = e(four_g, four_g + m - low_top - 4096 - 1, SYSTEM_RAM);
    let err = check_layout(RamLayout::Above4g, m, &short).unwrap_err();
    assert_eq!(err.expected, m - 0x6_0000);
    assert!(err.to_string().contains("(above-4g)"), "{err}");
}

#[test]
fn exact_ram_per_engine_layout() {
    let m = 256 * MIB;
    // Each engine's documented layout for `-m 256M`: RAM up to the hole and from 1 MiB to
    // the configured top (truecold moves the hole's 384 KiB above the top instead).
    let truecold = two_ranges(0xA_0000, 0x10_0000 + m - 0xA_0000);
    let firecracker = two_ranges(0x9_FC00, m);
    let cloud_hypervisor = two_ranges(0xA_0000, m);
    assert_eq!(check(Engine::Truecold, m, &truecold), Ok(()));
    assert_eq!(check(Engine::Firecracker, m, &firecracker), Ok(()));
    assert_eq!(check(Engine::QemuMicrovm, m, &firecracker), Ok(()));
    assert_eq!(check(Engine::CloudHypervisor, m, &cloud_hypervisor), Ok(()));
    // The measured figures for 256 MiB.
    assert_eq!(summarize_ram(&firecracker).unwrap().ram_bytes, 268_041_216);
    assert_eq!(
        summarize_ram(&cloud_hypervisor).unwrap().ram_bytes,
        268_042_240
    );
    // Each map under another engine's rule: 1 KiB or 384 KiB off, never accepted.
    let err = check(Engine::CloudHypervisor, m, &firecracker).unwrap_err();
    assert_eq!(
        err,
        RamMismatch {
            engine: Engine::CloudHypervisor,
            configured: m,
            expected: m - 0x6_0000,
            found: m - 0x6_0400,
            hole: Engine::CloudHypervisor.low_ram_hole(RamLayout::AroundHole),
            in_hole: None,
            layout: RamLayout::AroundHole,
            rule: truecold_proto::layout::AccountingError::Sum {
                configured: m,
                ram: m - 0x6_0400,
                hole: 0x6_0000,
                expected: m - 0x6_0000
            },
        }
    );
    assert!(check(Engine::Firecracker, m, &cloud_hypervisor).is_err());
    assert!(check(Engine::Truecold, m, &firecracker).is_err());
    assert!(check(Engine::Firecracker, m, &truecold).is_err());
    // Announced RAM the guest lacks, and RAM beyond what was configured.
    assert!(check(Engine::Firecracker, m + 4096, &firecracker).is_err());
    assert!(check(Engine::Firecracker, m - 4096, &firecracker).is_err());
}

#[test]
fn exact_ram_rejects_ram_in_the_hole_even_when_the_sum_is_right() {
    let m = 256 * MIB;
    // Firecracker's sum, but its EBDA (0x9fc00..0xa0000) given as RAM and 1 KiB less at the top.
    let map = two_ranges(0xA_0000, m - 0x400);
    assert_eq!(summarize_ram(&map).unwrap().ram_bytes, m - 0x6_0400);
    let err = check(Engine::Firecracker, m, &map).unwrap_err();
    assert_eq!(err.found, err.expected);
    assert_eq!(err.in_hole, Some((0, 0x9_FFFF)));
    let text = err.to_string();
    assert!(
        text.contains("[0x9fc00, 0x100000) = 394240 bytes"),
        "{text}"
    );
    assert!(
        text.contains("System RAM [0x0, 0x9ffff] lies in the hole"),
        "{text}"
    );
    // A RAM range inside the hole, and one that starts in it.
    let inside = vec![
        e(0, 0x9_FBFF, SYSTEM_RAM),
        e(0xF_0000, 0xF_0FFF, SYSTEM_RAM),
        e(0x10_0000, m - 0x1000 - 1, SYSTEM_RAM),
    ];
    assert_eq!(
        check(Engine::Firecracker, m, &inside).unwrap_err().in_hole,
        Some((0xF_0000, 0xF_0FFF))
    );
    let straddle = vec![
        e(0, 0x9_FBFF, SYSTEM_RAM),
        e(0xF_F000, m - 0x6_0400 + 0xF_F000 - 0x9_FC00 - 1, SYSTEM_RAM),
    ];
    assert!(check(Engine::Firecracker, m, &straddle)
        .unwrap_err()
        .in_hole
        .is_some());
    // The last byte before the hole and the first after it are fine.
    assert_eq!(
        check(Engine::Firecracker, m, &two_ranges(0x9_FC00, m)),
        Ok(())
    );
    // Reserved entries in the hole are what the layout says: not RAM, not counted.
    let text = check(Engine::Truecold, m, &two_ranges(0x9_FC00, m))
        .unwrap_err()
        .to_string();
    assert!(text.contains("hole: none"), "{text}");
}

#[test]
fn bounded_line_reader() {
    use std::io::Cursor;
    let mut r = Cursor::new(b"TC1 nonce value=00\nrest".to_vec());
    assert_eq!(
        read_line_bounded(&mut r).unwrap(),
        LineRead::Line(b"TC1 nonce value=00\n".to_vec())
    );
    assert_eq!(r.position(), 19, "nothing after the newline is consumed");
    assert_eq!(read_line_bounded(&mut r).unwrap(), LineRead::Eof);
    let long = vec![b'a'; truecold_proto::MAX_LINE + 10];
    let mut r = Cursor::new(long);
    assert_eq!(read_line_bounded(&mut r).unwrap(), LineRead::TooLong);
    assert_eq!(r.position() as usize, truecold_proto::MAX_LINE);
    let mut exact = vec![b'a'; truecold_proto::MAX_LINE - 1];
    exact.push(b'\n');
    assert_eq!(
        read_line_bounded(&mut Cursor::new(exact.clone())).unwrap(),
        LineRead::Line(exact)
    );
    // Interrupted reads are retried; other errors come back.
    struct Flaky(u32);
    impl Read for Flaky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0 += 1;
            match self.0 {
                1 => Err(io::ErrorKind::Interrupted.into()),
                2 => {
                    buf[0] = b'\n';
                    Ok(1)
                }
                _ => Err(io::ErrorKind::BrokenPipe.into()),
            }
        }
    }
    let mut f = Flaky(0);
    assert_eq!(
        read_line_bounded(&mut f).unwrap(),
        LineRead::Line(b"\n".to_vec())
    );
    assert_eq!(
        read_line_bounded(&mut f).unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

#[test]
fn nonce_lines() {
    let n: [u8; NONCE_LEN] = core::array::from_fn(|i| i as u8 * 17);
    let line = Message::Nonce(n).encode();
    assert_eq!(nonce_from_line(line.as_bytes()), Ok(n));
    assert_eq!(nonce_from_line(line.trim_end().as_bytes()), Ok(n));
    let id = truecold_proto::BootId::parse("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").unwrap();
    assert_eq!(
        nonce_from_line(Message::Ready { boot_id: id }.encode().as_bytes()),
        Err(NonceLineError::NotNonce("ready"))
    );
    assert_eq!(
        nonce_from_line(
            Message::Reply(truecold_proto::Reply::new(&n, id))
                .encode()
                .as_bytes()
        ),
        Err(NonceLineError::NotNonce("reply"))
    );
    for bad in [
        &b"hello\n"[..],
        b"TC1 nonce value=00\n",
        b"TC1 nonce value=000102030405060708090a0b0c0d0e0f extra=1\n",
        b"TC1 nonce value=000102030405060708090a0b0c0d0e0f\r\n",
        b"\n",
        b"TC1 nonce\n",
    ] {
        assert!(
            matches!(nonce_from_line(bad), Err(NonceLineError::Decode(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn transport_hint_reads_only_the_exact_serial_word() {
    assert_eq!(
        transport_hint("quiet truecold.mem=1x truecold.transport=serial"),
        Transport::Serial
    );
    assert_eq!(transport_hint("truecold.mem=1x"), Transport::Ports);
    assert_eq!(
        transport_hint("truecold.transport=serials x"),
        Transport::Ports
    );
    assert_eq!(
        transport_hint("xtruecold.transport=serial"),
        Transport::Ports
    );
}

#[test]
fn probe_fill_and_check_agree_with_the_pattern_at_every_alignment_and_length() {
    // Lengths around the vector loop's block (16 words) and check span (512 words), every
    // start within a 32-byte vector, so the head, the blocks and the tail are all exercised
    // on whichever path this CPU takes (AVX2 or one word at a time).
    let mut buf = vec![0u64; 2048 + 8];
    for start in 0..4 {
        for len in [0, 1, 3, 15, 16, 17, 31, 33, 511, 512, 513, 1040, 2048] {
            let s = &mut buf[start..start + len];
            s.fill(0);
            probe_fill(s);
            for (i, w) in s.iter().enumerate() {
                assert_eq!(*w, probe_word(i as u64), "start {start} len {len} word {i}");
            }
            assert_eq!(probe_check(s), None, "start {start} len {len}");
        }
    }
}

#[test]
fn probe_check_finds_the_first_wrong_word() {
    let mut buf = vec![0u64; 1500 + 4];
    for start in 0..4 {
        let s = &mut buf[start..start + 1500];
        probe_fill(s);
        for bad in [0, 1, 5, 16, 500, 511, 512, 700, 1487, 1499] {
            let keep = s[bad];
            // One flipped bit, and a word that holds another word's pattern (an alias).
            for wrong in [keep ^ (1 << 37), probe_word(bad as u64 + 1)] {
                s[bad] = wrong;
                assert_eq!(probe_check(s), Some(bad), "start {start} word {bad}");
                s[bad] = keep;
            }
            // A later word wrong too: the first is still the one named.
            if bad + 3 < s.len() {
                let (k1, k2) = (s[bad], s[bad + 3]);
                s[bad] ^= 1;
                s[bad + 3] ^= 1;
                assert_eq!(probe_check(s), Some(bad));
                s[bad] = k1;
                s[bad + 3] = k2;
            }
        }
        assert_eq!(probe_check(s), None);
    }
}

#[test]
fn probe_words_are_affine_in_the_index() {
    // The vector path advances by one addition: the pattern must be base + index × step.
    for i in [0u64, 1, 2, 1000, u64::MAX / 3, u64::MAX] {
        assert_eq!(
            probe_word(i),
            probe::PROBE_BASE.wrapping_add(i.wrapping_mul(probe::PROBE_STEP))
        );
    }
    assert_eq!(probe::PROBE_STEP % 2, 1);
}
