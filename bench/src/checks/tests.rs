use super::environment::*;
use super::preflight::*;
use super::snapshot::*;
use truecold_proof::schema::{Environment, HostKind};
use truecold_proto::kinds::Backing;
use truecold_proto::limits::GuestMem;

fn facts(kind: HostKind, cores: u32) -> Environment {
    Environment {
        cpu_model: "X".into(),
        cores,
        host_kernel: "6.1".into(),
        thp_enabled: "always [madvise] never".into(),
        thp_defrag: "[madvise]".into(),
        hugepages: "2048kB:0".into(),
        governor: None,
        ..empty_environment(kind)
    }
}

fn snap(
    t_s: u64,
    load: &str,
    self_cpu_ms: u64,
    children_ms: u64,
    busy_ms: u64,
    total_ms: u64,
) -> Snapshot {
    Snapshot {
        t_ns: t_s * 1_000_000_000,
        loadavg: load.into(),
        self_user_ns: self_cpu_ms * 1_000_000,
        self_sys_ns: 0,
        children_ns: children_ms * 1_000_000,
        host_busy_ns: busy_ms * 1_000_000,
        host_total_ns: total_ms * 1_000_000,
        residue: Default::default(),
        harness_maps: None,
    }
}

#[test]
fn parses_cpuinfo_and_stat() {
    let ci = "processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t: svm\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9B14\n";
    assert_eq!(cpu_model(ci).as_deref(), Some("AMD EPYC 9B14"));
    assert_eq!(cpu_count(ci), 2);
    assert_eq!(cpu_model("flags: x\n"), None);
    // user nice system idle iowait irq softirq steal guest guest_nice
    let st = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let t = |ticks: u64| ticks * 1_000_000_000 / hz;
    assert_eq!(cpu_times(st), Some((t(150), t(1000))));
    assert_eq!(cpu_times("intr 1 2\n"), None);
    assert_eq!(cpu_times("cpu  1 x 3 4\n"), None);
}

#[test]
fn quiet_hardware_host_has_no_warnings() {
    let b = snap(0, "0.10 0.10 0.10 1/100 1", 0, 0, 0, 0);
    let a = snap(10, "1.00 0.10 0.10 1/100 2", 100, 9_000, 9_300, 20_000);
    let w = warnings(
        &facts(HostKind::Hardware, 2),
        &b,
        &a,
        &RunFacts {
            lanes: 1,
            ..Default::default()
        },
    );
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn busy_host_bottleneck_harness_and_pvm_are_flagged() {
    let b = snap(0, "3.00 1.0 1.0 1/100 1", 0, 0, 0, 0);
    // 10 s wall, harness 6 s CPU (60% of a core), others 20-6-2 = 12 of 20 s total (60%).
    let a = snap(10, "3.00 1.0 1.0 1/100 1", 6_000, 2_000, 20_000, 20_000);
    let run = RunFacts {
        max_start_lag_ns: Some(5_000_000),
        interval_ns: Some(1_000_000),
        lanes: 4,
        in_window: Some((3_000_000, 9_000_000_000)),
        page_cache_dropped: None,
    };
    let w = warnings(&facts(HostKind::Pvm, 2), &b, &a, &run);
    let all = w.join("\n");
    assert_eq!(w.len(), 6, "{all}");
    for needle in [
        "kvm_pvm",
        "busy before",
        "busy during",
        "harness itself",
        "exceeds",
        "fell behind",
    ] {
        assert!(all.contains(needle), "missing {needle}: {all}");
    }
    // `truecold-proof compare` tells a busy host by this prefix (its outcome line says so).
    let busy = truecold_proof::compare::HOST_BUSY_PREFIX;
    assert_eq!(w.iter().filter(|x| x.starts_with(busy)).count(), 2, "{all}");
    let env = environment(&facts(HostKind::Pvm, 2), &b, &a, &run, vec!["extra".into()]);
    assert_eq!(env.harness.wall_ns, 10_000_000_000);
    assert_eq!(env.harness.cpu_user_ns, 6_000_000_000);
    assert_eq!(env.harness.max_start_lag_ns, Some(5_000_000));
    assert_eq!(env.harness.in_window_cpu_ns, Some(3_000_000));
    assert_eq!(env.harness.in_window_wall_ns, Some(9_000_000_000));
    assert_eq!(env.harness.page_cache_dropped, None);
    assert_eq!(env.warnings.last().map(String::as_str), Some("extra"));
}

#[test]
fn reads_this_host() {
    let f = read_facts(HostKind::Hardware);
    assert!(f.cores >= 1);
    assert!(!f.host_kernel.is_empty());
    // Only the host's part: the campaign's fields are `environment`'s to fill.
    assert_eq!(f.host_kind, HostKind::Hardware);
    assert!(f.loadavg_before.is_empty() && f.warnings.is_empty() && f.residue.is_none());
    let s = Snapshot::take();
    assert!(s.t_ns > 0);
    assert!(s.host_total_ns >= s.host_busy_ns);
}

#[test]
fn the_residue_reading_sees_a_new_child_a_zombie_and_a_descriptor() {
    let before = residue_reading();
    assert!(before.harness_fds.is_some_and(|n| n >= 3), "{before:?}");
    assert!(before.harness_threads.is_some_and(|n| n >= 1), "{before:?}");
    assert!(
        before.harness_rss_bytes.is_some_and(|n| n > 0),
        "{before:?}"
    );
    assert!(
        before.mem_available_bytes.is_some_and(|n| n > 0),
        "{before:?}"
    );
    assert!(before.hugepages_total.is_some(), "{before:?}");
    // A child that exits and is not yet reaped, and a descriptor left open.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let file = std::fs::File::open("/proc/self/status").unwrap();
    // Wait (without reaping) until the child has exited: a zombie.
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| stat_parent_and_state(&s))
        .is_none_or(|(_, st)| st != 'Z')
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never exited"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let after = residue_reading();
    // Other tests of this binary run in parallel threads: judge only what this test made.
    assert!(
        after.children >= Some(before.children.unwrap_or(0) + 1),
        "{after:?}"
    );
    assert!(after.zombies >= Some(1), "{after:?}");
    let l = truecold_proof::residue::leaks(&before, &after);
    assert!(l.iter().any(|x| x.contains("zombies")), "{l:?}");
    child.wait().unwrap();
    drop(file);
}

#[test]
fn stat_lines_with_odd_command_names_parse() {
    assert_eq!(
        stat_parent_and_state("42 (a) b (c)) S 7 42 42 0 -1"),
        Some((7, 'S'))
    );
    assert_eq!(stat_parent_and_state("42 (x) Z 1 0"), Some((1, 'Z')));
    assert_eq!(stat_parent_and_state("garbage"), None);
}

/// A host that passes every check before the first launch: 24 GiB of RAM, /dev/kvm opens, a
/// pool of `free` of `total` 2 MiB pages.
fn limits(free: u64, total: u64) -> HostLimits {
    HostLimits {
        mem_total_bytes: Some(24 << 30),
        huge_pages_free: free,
        huge_pages_total: total,
        kvm_open: Ok(()),
    }
}

fn mib(m: u64) -> GuestMem {
    GuestMem::from_mib(m).unwrap()
}

#[test]
fn the_checks_before_the_first_launch_refuse_what_every_launch_would() {
    // The host's RAM: the VMM's own rule, at its edge.
    assert!(preflight(limits(0, 0), mib(24 << 10), &[Backing::Anon]).is_ok());
    let e = preflight(limits(0, 0), mib(200_000), &[Backing::Anon]).unwrap_err();
    assert!(
        matches!(
            e,
            HostError::MemExceedsHost {
                mib: 200_000,
                host_mib: 24576,
                ..
            }
        ),
        "{e:?}"
    );
    let chain = truecold_proto::measure::error_chain(&e);
    assert!(chain.contains("pass --mem-mib 24576 or less"), "{chain}");
    assert!(
        chain.contains("guest memory of 200000 MiB exceeds the host's RAM (24576 MiB)"),
        "{chain}"
    );
    assert!(preflight(limits(0, 0), mib((24 << 10) + 1), &[Backing::Thp]).is_err());
    let unknown = HostLimits {
        mem_total_bytes: None,
        ..limits(0, 0)
    };
    assert!(matches!(
        preflight(unknown, mib(64), &[Backing::Anon]),
        Err(HostError::HostMemUnknown)
    ));
    // The hugetlb pool, for --backing hugetlb only: an empty one, one page short, enough.
    assert!(preflight(limits(0, 0), mib(64), &[Backing::Anon]).is_ok());
    let e = preflight(limits(0, 0), mib(64), &[Backing::Hugetlb]).unwrap_err();
    assert!(
        matches!(
            e,
            HostError::HugetlbPoolShort {
                mib: 64,
                needed: 32,
                free: 0,
                reserve: 34
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("echo 34 > /proc/sys/vm/nr_hugepages"),
        "{e}"
    );
    assert!(e.to_string().contains("--backing anon"), "{e}");
    // Pages in use by others stay in use: the reserve counts them.
    assert!(matches!(
        preflight(limits(31, 100), mib(64), &[Backing::Hugetlb]),
        Err(HostError::HugetlbPoolShort {
            free: 31,
            reserve: 103,
            ..
        })
    ));
    assert!(preflight(limits(32, 32), mib(64), &[Backing::Hugetlb]).is_ok());
    // /dev/kvm: missing, or there but not openable read-write.
    let no_kvm = HostLimits {
        kvm_open: Err(std::io::ErrorKind::NotFound.into()),
        ..limits(0, 0)
    };
    assert!(matches!(
        preflight(no_kvm, mib(64), &[Backing::Anon]),
        Err(HostError::NoKvm)
    ));
    let denied = HostLimits {
        kvm_open: Err(std::io::ErrorKind::PermissionDenied.into()),
        ..limits(0, 0)
    };
    let e = preflight(denied, mib(64), &[Backing::Anon]).unwrap_err();
    assert!(matches!(e, HostError::KvmNotOpenable(_)), "{e:?}");
    let chain = truecold_proto::measure::error_chain(&e);
    assert!(
        chain.contains("read-write") && chain.contains("kvm"),
        "{chain}"
    );
    // /dev/kvm is checked first: nothing else matters without it.
    let neither = HostLimits {
        kvm_open: Err(std::io::ErrorKind::PermissionDenied.into()),
        mem_total_bytes: None,
        ..limits(0, 0)
    };
    assert!(matches!(
        preflight(neither, mib(64), &[Backing::Hugetlb]),
        Err(HostError::KvmNotOpenable(_))
    ));
}
