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

#[test]
fn memtotal_bounds_follow_the_documented_formula() {
    assert_eq!(
        memtotal_bounds(256 * MIB, 256 * MIB),
        (256 * MIB - 4 * MIB - 32 * MIB, 256 * MIB)
    );
    // Above 4 GiB the swiotlb bounce buffer is also allowed for.
    assert_eq!(
        memtotal_bounds(16 * GIB, 17 * GIB),
        (16 * GIB - 256 * MIB - 32 * MIB - 64 * MIB, 16 * GIB)
    );
    assert_eq!(memtotal_bounds(MIB, MIB), (0, MIB));
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
