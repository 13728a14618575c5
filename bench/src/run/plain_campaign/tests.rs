use super::*;
use crate::checks::preflight::forced_warning;
use truecold_proto::kinds::Detection;
use truecold_proto::kinds::HostKind as V;
use truecold_proto::limits::{GuestMem, Vcpus};

fn parse(extra: &[&str]) -> CampaignPlan {
    CampaignPlan::of_words(extra).unwrap()
}

fn explicit(a: &CampaignPlan, contract: ContractKind) -> Vec<String> {
    let guest_dir = Path::new("/g");
    explicit_args(
        a,
        guest_flag(contract),
        ArgPaths {
            vmm: Path::new("/bin/truecold-vmm"),
            guest_dir: (contract == ContractKind::Linux).then_some(guest_dir),
            out: Path::new("/r/b"),
            engines: &[],
        },
    )
}

#[test]
fn cmdline_txt_has_the_real_deadline_and_no_placeholder() {
    let a = parse(&["--probe", "--deadline-ms", "1234"]);
    let spec = CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        stop_after: None,
        schedule: a.schedule,
        contract: ContractKind::Probe,
        vcpus: Vcpus::new(2).unwrap(),
        mem: GuestMem::from_mib(256).unwrap(),
        backing: truecold_proto::kinds::Backing::Anon,
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 1_234_000_000,
        kill_grace_ns: 500_000_000,
    };
    let cmd = VmmCommand {
        program: "/opt/truecold vmm".into(),
        args: vec!["boot".into(), "--probe".into()],
    };
    let line = vmm_command_line(&cmd, &spec);
    assert_eq!(
        line,
        "'/opt/truecold vmm' boot --probe --request-ns <actual_request_ns> \
         --deadline-at-ns <actual_request_ns+1234000000>"
    );
    let text = cmdline_txt(
        ContractKind::Probe.label(),
        "truecold run --probe --deadline-ms 1234",
        &explicit(&a, ContractKind::Probe),
        &line,
        None,
    );
    assert!(!text.contains("<DEADLINE_MS>"), "{text}");
    assert!(text.starts_with("# VMM floor (probe guest), not a Linux boot\n"));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[4].starts_with("truecold run --probe --mode sequential"));
    assert!(lines[4].contains(" --deadline-ms 1234 "), "{}", lines[4]);
    assert!(lines[4].contains(" --cmdline-extra '' "), "{}", lines[4]);
    assert_eq!(lines[6], line);
    let mut open = spec.clone();
    open.schedule = Schedule::OpenLoop {
        n: 3,
        interval_ns: 1_000_000,
        max_in_flight: 2,
    };
    assert!(vmm_command_line(&cmd, &open)
        .ends_with("--deadline-at-ns <intended_request_ns+1234000000>"));
    // The verifier reads back what this writes.
    let r = truecold_proof::cmdline::parse_cmdline_txt(text.as_bytes()).unwrap();
    assert_eq!(r.invocation.get("--deadline-ms"), Some("1234"));
    assert_eq!(r.vmm_line, line);
}

#[test]
fn drop_caches_needs_root_and_the_sequential_mode() {
    let a = parse(&["--drop-caches"]);
    let s = a.schedule;
    assert!(check_drop_caches(a.drop_caches, &s, Some(0)).is_ok());
    assert!(matches!(
        check_drop_caches(a.drop_caches, &s, Some(1000)),
        Err(RunError::DropCachesNotRoot(1000))
    ));
    // --nested: the caches are L1's, dropped by L1's root init.
    assert!(check_drop_caches(a.drop_caches, &s, None).is_ok());
    let a = parse(&["--drop-caches", "--mode", "churn"]);
    assert!(matches!(
        check_drop_caches(a.drop_caches, &a.schedule, Some(0)),
        Err(RunError::Args(
            crate::plan::arg_error::ArgError::DropCachesMode
        ))
    ));
    let a = parse(&[]);
    assert!(check_drop_caches(a.drop_caches, &a.schedule, Some(1000)).is_ok());
}

#[test]
fn a_forced_host_kind_is_a_warning_naming_both_kinds() {
    let w = forced_warning(&Detection::new(Some(V::Hardware), V::Pvm)).unwrap();
    assert!(
        w.starts_with("host kind forced to hardware (detected pvm)"),
        "{w}"
    );
    assert_eq!(forced_warning(&Detection::new(None, V::Pvm)), None);
}

#[test]
fn every_sample_gets_the_campaign_host_kind() {
    let spec = CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        stop_after: None,
        schedule: crate::campaign::schedule::Schedule::Sequential { n: 1 },
        contract: ContractKind::Probe,
        vcpus: Vcpus::new(2).unwrap(),
        mem: GuestMem::from_mib(16384).unwrap(),
        backing: truecold_proto::kinds::Backing::Anon,
        ram_layout: truecold_proto::kinds::RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 2_000_000_000,
        kill_grace_ns: 500_000_000,
    };
    for kind in [HostKind::Hardware, HostKind::Pvm, HostKind::NestedEmulated] {
        let v: Vec<String> = vmm_args(&spec, None, "", VmmFlags::default(), false, kind)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!v.iter().any(|a| a == "--console" || a == "--pin-vcpus"));
        let flagged: Vec<String> = vmm_args(
            &spec,
            None,
            "",
            VmmFlags {
                console: true,
                pin_vcpus: true,
            },
            false,
            kind,
        )
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
        assert_eq!(
            flagged
                .iter()
                .filter(|a| *a == "--console" || *a == "--pin-vcpus")
                .count(),
            2,
            "{flagged:?}"
        );
        assert_eq!(
            v[..9].join(" "),
            "boot --probe --vcpus 2 --mem-mib 16384 --backing anon --host-kind",
        );
        let at = v.iter().position(|a| a == "--host-kind").unwrap();
        assert_eq!(v[at + 1], kind.as_str());
        // The VMM's parser takes the same spelling.
        assert_eq!(
            truecold_proto::kinds::HostKind::parse(kind.as_str()),
            Ok(kind)
        );
    }
}

#[test]
fn cmdline_extra_is_refused_where_a_kvm_pvm_host_falls_back_to_the_probe() {
    let a = parse(&["--cmdline-extra", "quiet"]);
    let (contract, _, _) = contract_for(a.target, V::Pvm);
    assert_eq!(contract, ContractKind::Probe);
    assert_eq!(
        check_cmdline_extra(&a, contract),
        Err(ArgError::CmdlineExtraProbeFallback)
    );
    assert!(ArgError::CmdlineExtraProbeFallback
        .to_string()
        .contains("probe guest, which has no kernel command line"));
    // Where Linux boots, or without the flag, nothing to refuse.
    let (contract, _, _) = contract_for(a.target, V::Hardware);
    assert_eq!(check_cmdline_extra(&a, contract), Ok(()));
    let a = parse(&[]);
    assert_eq!(check_cmdline_extra(&a, ContractKind::Probe), Ok(()));
}
