use super::arg_error::ArgError;
use super::campaign_plan::CampaignPlan;
use super::common_flags::*;
use super::explicit_args::*;
use super::guest::{GuestSpec, Target};
use crate::artifacts::own_kernel::ConfigForm;
use crate::artifacts::own_kernel::OwnKernel;
use crate::campaign::schedule::{Schedule, ScheduleError};
use crate::cli::Cli;
use crate::cli::{RunArgs, DEFAULT_SEED};
use std::path::{Path, PathBuf};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, Engine};
use truecold_proto::limits::{GuestMem, Vcpus};

fn args(extra: &[&str]) -> Result<RunArgs, clap::Error> {
    let mut v = vec!["truecold", "run"];
    v.extend_from_slice(extra);
    Cli::try_parse_run(v)
}

/// The plan of `truecold run <extra>`.
fn plan(extra: &[&str]) -> Result<CampaignPlan, ArgError> {
    CampaignPlan::from_cli(&args(extra).unwrap())
}

#[test]
fn defaults_are_the_headline_campaign() {
    let a = plan(&[]).unwrap();
    assert_eq!(a.schedule, Schedule::Sequential { n: 1000 });
    assert_eq!((a.guest.vcpus.get(), a.guest.mem.mib()), (2, 16384));
    assert_eq!(a.target, Target::Auto);
    assert_eq!(a.deadline_ms, DEFAULT_DEADLINE_MS);
}

#[test]
fn modes_and_their_flags() {
    let a = plan(&["--mode", "burst", "-n", "50", "--concurrency", "8"]).unwrap();
    assert_eq!(
        a.schedule,
        Schedule::Burst {
            n: 50,
            concurrency: 8
        }
    );
    let a = plan(&["--mode", "open-loop", "-n", "10", "--rate", "2.5"]).unwrap();
    assert_eq!(
        a.schedule,
        Schedule::OpenLoop {
            n: 10,
            interval_ns: 400_000_000,
            max_in_flight: crate::campaign::schedule::DEFAULT_OPEN_LOOP_IN_FLIGHT
        }
    );
    let a = plan(&["--mode", "sweep", "-n", "5", "--max-concurrency", "3"]).unwrap();
    assert_eq!(
        a.schedule,
        Schedule::Sweep {
            n_per_level: 5,
            max_concurrency: 3
        }
    );
    let a = plan(&["--mode", "churn", "-n", "9"]).unwrap();
    assert_eq!(
        a.schedule,
        Schedule::Churn {
            n: 9,
            concurrency: 2
        }
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    let e = |x: &[&str]| plan(x).unwrap_err();
    assert_eq!(e(&["--mode", "open-loop"]), ArgError::RateMissing);
    assert_eq!(
        e(&["--rate", "3"]),
        ArgError::NotForMode {
            flag: "rate",
            applies_to: "open-loop",
            mode: "sequential"
        }
    );
    assert!(matches!(
        e(&["--concurrency", "3"]),
        ArgError::NotForMode { .. }
    ));
    assert!(matches!(
        e(&["--mode", "burst", "--max-concurrency", "3"]),
        ArgError::NotForMode { .. }
    ));
    // No launches, no deadline: values out of range, refused by the parser (exit 125).
    for zero in [&["-n", "0"][..], &["--count", "0"], &["--deadline-ms", "0"]] {
        let err = args(zero).expect_err("0 is out of range");
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{zero:?}"
        );
    }
    // The probe guest reads no kernel command line: words for one are refused, not ignored.
    assert_eq!(
        e(&["--probe", "--cmdline-extra", "quiet"]),
        ArgError::CmdlineExtraProbe
    );
    assert!(plan(&["--probe", "--cmdline-extra", ""]).is_ok());
    assert!(plan(&["--linux", "--cmdline-extra", "quiet"]).is_ok());
    assert_eq!(
        e(&["--mode", "burst", "--concurrency", "0"]),
        ArgError::Schedule(ScheduleError::ZeroConcurrency)
    );
    assert_eq!(
        e(&["--mode", "open-loop", "--rate", "0.0001"]),
        ArgError::RateTooLow(0.0001)
    );
    assert!(matches!(
        e(&["--mode", "open-loop", "--rate=-1"]),
        ArgError::Schedule(ScheduleError::BadRate(_))
    ));
    // Mutually exclusive guest kinds, unknown modes: clap's own errors.
    assert!(args(&["--probe", "--linux"]).is_err());
    assert!(args(&["--mode", "zigzag"]).is_err());
}

#[test]
fn engine_arms_repeatable_or_listed_never_twice() {
    let a = plan(&["--engine", "truecold", "--engine", "firecracker"]).unwrap();
    assert_eq!(a.engines, vec![Engine::Truecold, Engine::Firecracker]);
    assert_eq!(a.seed, DEFAULT_SEED);
    let a = plan(&[
        "--engines",
        "qemu-microvm,cloud-hypervisor",
        "--engine",
        "truecold",
    ])
    .unwrap();
    assert_eq!(
        a.engines,
        vec![
            Engine::Truecold,
            Engine::QemuMicrovm,
            Engine::CloudHypervisor
        ]
    );
    assert_eq!(
        plan(&["--engines", "firecracker,firecracker"]).unwrap_err(),
        ArgError::DuplicateEngine(Engine::Firecracker)
    );
    assert_eq!(
        plan(&["--engine", "truecold", "--engines", "truecold"]).unwrap_err(),
        ArgError::DuplicateEngine(Engine::Truecold)
    );
    // Unknown engines are clap's errors, naming the choices.
    let e = args(&["--engine", "xen"]).unwrap_err().to_string();
    assert!(
        e.contains("truecold, firecracker, cloud-hypervisor, qemu-microvm"),
        "{e}"
    );
    assert!(args(&["--engines", "truecold,"]).is_err());
}

#[test]
fn engines_campaigns_are_sequential_linux_without_console() {
    let e = |x: &[&str]| plan(x).unwrap_err();
    assert_eq!(
        e(&["--engine", "truecold", "--mode", "burst"]),
        ArgError::EnginesMode
    );
    assert_eq!(
        e(&["--engine", "truecold", "--probe"]),
        ArgError::NotForEngines("probe")
    );
    assert_eq!(
        e(&["--engine", "firecracker", "--console"]),
        ArgError::NotForEngines("console")
    );
    // Pinning is truecold-vmm's alone: refused with engines (even truecold alone as one)
    // and under the parity contract, kept in a plain campaign's plan.
    assert_eq!(
        e(&["--engine", "truecold", "--pin-vcpus"]),
        ArgError::PinEngines
    );
    assert!(ArgError::PinEngines.to_string().contains("no peer engine"));
    assert!(matches!(
        e(&["--parity", "--pin-vcpus"]),
        ArgError::Parity(why) if why.contains("--pin-vcpus")
    ));
    assert!(plan(&["--nested", "--pin-vcpus"]).unwrap().guest.pin_vcpus);
    assert!(!plan(&["--nested"]).unwrap().guest.pin_vcpus);
    assert_eq!(
        e(&["--firecracker", "/x"]),
        ArgError::EnginesOnly("firecracker")
    );
    assert_eq!(e(&["--seed", "3"]), ArgError::SeedNotUsed);
    assert_eq!(e(&["--linux", "--seed", "3"]), ArgError::SeedNotUsed);
    let a = plan(&[
        "--engine",
        "firecracker",
        "--nested",
        "--seed",
        "3",
        "-n",
        "3",
    ])
    .unwrap();
    assert_eq!(a.schedule, Schedule::Sequential { n: 3 });
    assert_eq!(a.seed, 3);
}

/// Attribution launches are truecold-vmm's own (its boot report, its RIP sampler): an
/// engines campaign refuses them, whatever the instrument, and says why; so does the parity
/// contract.
#[test]
fn attribution_is_refused_in_engines_and_parity_campaigns() {
    for inst in ["rip", "initcall"] {
        for engines in [
            "truecold",
            "truecold,firecracker",
            "firecracker,cloud-hypervisor",
        ] {
            let e = plan(&[
                "--engines",
                engines,
                "--attribution",
                "2",
                "--attribution-instrument",
                inst,
            ])
            .unwrap_err();
            assert_eq!(e, ArgError::AttributionEngines, "{engines} {inst}");
            let m = e.to_string();
            assert!(
                m.contains("--sample-rip-us") && m.contains("no --engine"),
                "{m}"
            );
        }
    }
    assert!(matches!(
        plan(&["--parity", "--attribution", "2"]).unwrap_err(),
        ArgError::Parity(why) if why.contains("attribution")
    ));
}

/// `rip` is the default instrument; the explicit line names the instrument whenever the
/// campaign makes attribution launches (`rip` with its period, `initcall` alone), so the line
/// means the same whatever a later default is; `initcall` with a period is refused.
#[test]
fn the_attribution_instrument_is_rip_by_default_and_always_spelt_out() {
    use crate::attribution::instrumentation::{Instrument, Instrumentation};
    let a = plan_of(&["--probe", "--attribution", "2"]);
    assert_eq!(a.instrument, Instrumentation::default());
    assert_eq!(a.instrument.instrument, Instrument::Rip);
    let line = explicit(&a, ContractKind::Probe).join(" ");
    assert!(
        line.contains(" --attribution 2 --attribution-instrument rip --attribution-sample-us 100 "),
        "{line}"
    );
    let a = plan_of(&[
        "--linux",
        "--attribution",
        "3",
        "--attribution-sample-us",
        "250",
    ]);
    let line = explicit(&a, ContractKind::Linux).join(" ");
    assert!(
        line.contains(" --attribution 3 --attribution-instrument rip --attribution-sample-us 250 "),
        "{line}"
    );
    let a = plan_of(&[
        "--linux",
        "--attribution",
        "3",
        "--attribution-instrument",
        "initcall",
    ]);
    assert_eq!(a.instrument.instrument, Instrument::Initcall);
    let line = explicit(&a, ContractKind::Linux).join(" ");
    assert!(
        line.contains(" --attribution 3 --attribution-instrument initcall --stop-after "),
        "{line}"
    );
    // No attribution launches: no instrument on the line.
    let line = explicit(&plan_of(&["--linux"]), ContractKind::Linux).join(" ");
    assert!(!line.contains("--attribution"), "{line}");
    assert_eq!(
        plan(&[
            "--attribution",
            "2",
            "--attribution-instrument",
            "initcall",
            "--attribution-sample-us",
            "50"
        ])
        .unwrap_err(),
        ArgError::SamplePeriodNotRip(truecold_proto::rip::SamplePeriod::from_us(50).unwrap())
    );
}

#[test]
fn a_plain_nested_campaign_takes_a_seed_for_l1() {
    let a = plan(&["--nested", "--seed", "3", "-n", "2"]).unwrap();
    assert_eq!(a.schedule, Schedule::Sequential { n: 2 });
    assert!(a.engines.is_empty());
    assert_eq!(a.seed, 3);
    // The default seed stays accepted everywhere (it is not "given").
    let a = plan(&["--nested", "-n", "2"]).unwrap();
    assert_eq!(a.seed, DEFAULT_SEED);
    assert_eq!(a.target, Target::Nested);
    assert_eq!(a.deadline_ms, DEFAULT_NESTED_DEADLINE_MS);
    // The other engines-only flags stay engines-only with --nested.
    assert_eq!(
        plan(&["--nested", "--qemu", "/x"]).unwrap_err(),
        ArgError::EnginesOnly("qemu")
    );
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
fn explicit_arguments_fill_in_every_default() {
    let a = plan_of(&["--probe"]);
    assert_eq!(
        explicit(&a, ContractKind::Probe).join(" "),
        "--probe --mode sequential --count 1000 --vcpus 2 --mem-mib 16384 --backing anon \
         --ram-layout above-4g --deadline-ms 2000 --kill-grace-ms 500 --cmdline-extra  --stop-after 10 \
         --vmm /bin/truecold-vmm --out /r/b"
    );
    let a = plan_of(&["--mode", "burst", "--deadline-ms", "750", "--drop-caches"]);
    assert_eq!(
        explicit(&a, ContractKind::Linux).join(" "),
        "--linux --mode burst --count 1000 --vcpus 2 --mem-mib 16384 --backing thp \
         --ram-layout above-4g --concurrency 2 --deadline-ms 750 --kill-grace-ms 500 --cmdline-extra  \
         --drop-caches --vmm /bin/truecold-vmm --guest-dir /g --out /r/b"
    );
}

/// `--bzimage`: a Linux guest of truecold-vmm, spelt out in the explicit arguments.
#[test]
fn bzimage_boots_a_linux_guest_of_truecold_vmm() {
    let a = plan_of(&["--linux", "--bzimage"]);
    assert!(a.guest.bzimage);
    assert!(explicit(&a, ContractKind::Linux).contains(&"--bzimage".to_string()));
    assert!(!plan_of(&["--linux"]).guest.bzimage);
    for (extra, why) in [
        (&["--probe"][..], "no --probe"),
        (&["--engine", "firecracker"][..], "no --engine"),
        (&["--parity"][..], "no --parity"),
    ] {
        let mut v = vec!["--bzimage"];
        v.extend_from_slice(extra);
        match plan(&v) {
            Err(e @ ArgError::BzImage(_)) => assert!(e.to_string().contains(why), "{e}"),
            Err(ArgError::Parity(_)) if extra == ["--parity"] => {}
            other => panic!("{extra:?}: {other:?}"),
        }
    }
}

/// `--ram-layout`: the plan's (default by memory), spelt out in the explicit arguments
/// and passed to the VMM whatever it is (a line without it means `RamLayout::ABSENT`, not the
/// default), parsed back to the same plan; engines and parity campaigns take it too
/// (truecold-vmm's arm).
#[test]
fn ram_layout_reaches_the_plan_the_explicit_line_and_the_vmm() {
    use truecold_proto::kinds::RamLayout;
    let a = plan_of(&["--linux", "--ram-layout", "hole-inside"]);
    assert_eq!(a.guest.ram_layout, RamLayout::HoleInside);
    let e = explicit(&a, ContractKind::Linux);
    let i = e
        .iter()
        .position(|w| w == "--ram-layout")
        .expect("spelt out");
    assert_eq!(e[i + 1], "hole-inside");
    let words: Vec<&str> = e.iter().map(String::as_str).collect();
    assert_eq!(plan_of(&words).guest.ram_layout, RamLayout::HoleInside);
    // The default follows the memory (RamLayout::default_for): above-4g at run's 16 GiB,
    // hole-inside at 1 GiB.
    let d = plan_of(&["--linux"]);
    assert_eq!(d.guest.ram_layout, RamLayout::Above4g);
    let d = plan_of(&["--linux", "--mem-mib", "1024"]);
    assert_eq!(d.guest.ram_layout, RamLayout::HoleInside);
    let a = plan_of(&["--linux", "--ram-layout", "around-hole"]);
    let e = explicit(&a, ContractKind::Linux);
    let i = e
        .iter()
        .position(|w| w == "--ram-layout")
        .expect("spelt out");
    assert_eq!(e[i + 1], "around-hole");
    let words: Vec<&str> = e.iter().map(String::as_str).collect();
    assert_eq!(plan_of(&words).guest.ram_layout, RamLayout::AroundHole);
    let e = args(&["--ram-layout", "inside"]).unwrap_err().to_string();
    assert!(e.contains("around-hole, hole-inside"), "{e}");
    // Every layout is accepted in an engines or parity campaign (truecold-vmm's arm).
    for l in RamLayout::ALL {
        for extra in [
            &["--engine", "firecracker"][..],
            &["--engines", "truecold,firecracker"][..],
            &["--parity", "--linux"][..],
        ] {
            let mut v = vec!["--ram-layout", l.as_str()];
            v.extend_from_slice(extra);
            let p = plan(&v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
            assert_eq!(p.guest.ram_layout, l);
        }
    }
    // The VMM's arguments: the flag off the default only.
    let mut spec = crate::campaign::spec::CampaignSpec {
        observer: truecold_proof::schema::Observer::VmExit,
        interleaved: false,
        stop_after: None,
        schedule: crate::campaign::schedule::Schedule::Sequential { n: 1 },
        contract: ContractKind::Linux,
        vcpus: Vcpus::new(1).unwrap(),
        mem: GuestMem::from_mib(1024).unwrap(),
        backing: Backing::Thp,
        ram_layout: RamLayout::AroundHole,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 1_000_000_000,
        kill_grace_ns: 500_000_000,
    };
    let around: Vec<String> = crate::run::plain_campaign::vmm_args(
        &spec,
        None,
        "",
        crate::run::plain_campaign::VmmFlags::default(),
        false,
        truecold_proof::schema::HostKind::Hardware,
    )
    .iter()
    .map(|w| w.to_string_lossy().into_owned())
    .collect();
    let i = around
        .iter()
        .position(|w| w == "--ram-layout")
        .expect("passed on");
    assert_eq!(around[i + 1], "around-hole");
    spec.ram_layout = RamLayout::HoleInside;
    let v: Vec<String> = crate::run::plain_campaign::vmm_args(
        &spec,
        None,
        "",
        crate::run::plain_campaign::VmmFlags::default(),
        false,
        truecold_proof::schema::HostKind::Hardware,
    )
    .iter()
    .map(|w| w.to_string_lossy().into_owned())
    .collect();
    let i = v
        .iter()
        .position(|w| w == "--ram-layout")
        .expect("passed on");
    assert_eq!(v[i + 1], "hole-inside");
}

/// Parsing the explicit arguments gives the same campaign, whose explicit arguments are
/// the same again.
#[test]
fn explicit_arguments_rerun_the_same_campaign() {
    for (argv, contract) in [
        (vec![], ContractKind::Linux),
        (
            vec!["--probe", "-n", "7", "--vcpus", "1"],
            ContractKind::Probe,
        ),
        (
            vec!["--mode", "open-loop", "--rate", "2.5", "--backing", "thp"],
            ContractKind::Probe,
        ),
        (
            vec![
                "--mode",
                "open-loop",
                "--rate",
                "0.333",
                "--concurrency",
                "3",
            ],
            ContractKind::Linux,
        ),
        (
            vec!["--mode", "sweep", "--max-concurrency", "3"],
            ContractKind::Linux,
        ),
        (
            vec!["--mode", "churn", "--console", "--kill-grace-ms", "9"],
            ContractKind::Linux,
        ),
        (
            vec!["--cmdline-extra", "quiet loglevel='0' -x", "--nested"],
            ContractKind::Linux,
        ),
        (vec!["--stop-after", "3"], ContractKind::Linux),
        (vec!["--keep-going", "--probe"], ContractKind::Probe),
        (vec!["--bzimage", "--nested"], ContractKind::Linux),
        (
            vec!["--nested", "--pin-vcpus", "--vcpus", "2"],
            ContractKind::Linux,
        ),
    ] {
        let a = plan_of(&argv);
        let e = explicit(&a, contract);
        let words: Vec<&str> = e.iter().map(String::as_str).collect();
        let b = plan_of(&words);
        assert_eq!(b.schedule, a.schedule, "{argv:?}");
        assert_eq!(b.deadline_ms, a.deadline_ms, "{argv:?}");
        let linux = contract == ContractKind::Linux;
        assert_eq!(
            b.backing_of(Engine::Truecold, linux),
            a.backing_of(Engine::Truecold, linux),
            "{argv:?}"
        );
        assert_eq!(
            GuestSpec {
                backing: None,
                ..b.guest.clone()
            },
            GuestSpec {
                backing: None,
                ..a.guest.clone()
            },
            "{argv:?}"
        );
        assert_eq!(b.stop_after, a.stop_after, "{argv:?}");
        assert_eq!(explicit(&b, contract), e, "{argv:?}");
    }
}

/// Each engine's own default backing where none is asked for, `--backing` for every arm,
/// `--arm-backing` for one; the explicit arguments spell every arm's out, and read back as
/// the same backings.
#[test]
fn backings_default_per_engine_and_are_spelled_out() {
    let arms = [
        (Engine::Truecold, PathBuf::from("/bin/truecold-vmm")),
        (Engine::Firecracker, PathBuf::from("/bin/fc")),
        (Engine::CloudHypervisor, PathBuf::from("/bin/ch")),
    ];
    let explicit_words = |a: &CampaignPlan| {
        explicit_args(
            a,
            guest_flag(ContractKind::Linux),
            ArgPaths {
                vmm: Path::new("/bin/truecold-vmm"),
                guest_dir: Some(Path::new("/g")),
                out: Path::new("/r/b"),
                engines: &arms,
            },
        )
    };
    let explicit_engines = |a: &CampaignPlan| explicit_words(a).join(" ");
    let three = ["--engines", "truecold,firecracker,cloud-hypervisor"];
    let a = plan_of(&three);
    let b = |e| a.backing_of(e, true);
    assert_eq!(
        [
            b(Engine::Truecold),
            b(Engine::Firecracker),
            b(Engine::CloudHypervisor)
        ],
        [Backing::Thp, Backing::Anon, Backing::Thp]
    );
    let e = explicit_engines(&a);
    assert!(
        e.contains(
            "--arm-backing truecold=thp --arm-backing firecracker=anon \
             --arm-backing cloud-hypervisor=thp"
        ) && !e.contains("--backing "),
        "{e}"
    );
    // Read back: the same backings, and the same words again.
    let words = explicit_words(&a);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let again = plan_of(&words[1..]);
    for x in [
        Engine::Truecold,
        Engine::Firecracker,
        Engine::CloudHypervisor,
    ] {
        assert_eq!(again.backing_of(x, true), a.backing_of(x, true));
    }
    assert_eq!(explicit_engines(&again), e);
    // --backing: every arm; --arm-backing over it for one.
    let a = plan_of(&[three[0], three[1], "--backing", "anon"]);
    assert!(explicit_engines(&a).contains("--backing anon --ram-layout above-4g --deadline-ms"));
    assert!(!explicit_engines(&a).contains("--arm-backing"));
    let a = plan_of(&[
        three[0],
        three[1],
        "--backing",
        "anon",
        "--arm-backing",
        "truecold=thp",
    ]);
    assert_eq!(a.backing_of(Engine::Truecold, true), Backing::Thp);
    assert_eq!(a.backing_of(Engine::CloudHypervisor, true), Backing::Anon);
    assert!(explicit_engines(&a).contains("--backing anon --arm-backing truecold=thp"));
    // The probe keeps 4 KiB pages; truecold alone on Linux gets THP.
    assert_eq!(
        plan_of(&["--probe"]).backing_of(Engine::Truecold, false),
        Backing::Anon
    );
    assert_eq!(
        plan_of(&["--linux"]).backing_of(Engine::Truecold, true),
        Backing::Thp
    );
    assert_eq!(
        plan(&["--engines", "truecold", "--arm-backing", "firecracker=anon"]).unwrap_err(),
        ArgError::ArmBackingNotAnArm(Engine::Firecracker)
    );
    assert_eq!(
        plan(&[
            three[0],
            three[1],
            "--arm-backing",
            "truecold=thp",
            "--arm-backing",
            "truecold=anon"
        ])
        .unwrap_err(),
        ArgError::ArmBackingTwice(Engine::Truecold)
    );
    assert!(args(&["--engines", "truecold", "--arm-backing", "truecold"]).is_err());
}

/// `--arm-kernel-config` / `--arm-guest-dir`: an arm of a strict engines campaign each, one
/// guest per arm; the explicit arguments spell an arm's own guest directory out.
#[test]
fn an_arm_may_boot_its_own_kernel() {
    let two = ["--engines", "truecold,firecracker"];
    let a = plan_of(&[
        two[0],
        two[1],
        "--arm-kernel-config",
        "firecracker=fc.config",
    ]);
    assert_eq!(a.arm_kernel.len(), 1);
    assert_eq!(a.arm_kernel[0].0, Engine::Firecracker);
    assert_eq!(a.arm_kernel[0].1.config, PathBuf::from("fc.config"));
    assert_eq!(a.arm_kernel[0].1.form, ConfigForm::Full);
    // With --kernel-source for the arm's kernel alone.
    let a = plan_of(&[
        two[0],
        two[1],
        "--arm-kernel-config",
        "firecracker=fc.config",
        "--kernel-source",
        "/src/linux",
    ]);
    assert_eq!(a.arm_kernel[0].1.source, Some(PathBuf::from("/src/linux")));
    assert!(a.own_kernel.is_none());
    let e = |w: &[&str]| plan(w).unwrap_err();
    assert_eq!(
        e(&[
            "--engines",
            "truecold",
            "--arm-kernel-config",
            "firecracker=x"
        ]),
        ArgError::ArmGuestNotAnArm {
            flag: "arm-kernel-config",
            engine: Engine::Firecracker
        }
    );
    assert_eq!(
        e(&[
            two[0],
            two[1],
            "--arm-kernel-config",
            "firecracker=x",
            "--arm-guest-dir",
            "firecracker=/d"
        ]),
        ArgError::ArmGuestTwice(Engine::Firecracker)
    );
    assert!(matches!(
        e(&[
            "--parity",
            two[0],
            two[1],
            "--arm-guest-dir",
            "firecracker=/d"
        ]),
        ArgError::ArmGuest(_)
    ));
    assert!(args(&[two[0], two[1], "--arm-guest-dir", "firecracker="]).is_err());
    // The explicit arguments: the arm's guest directory, absolute, read back alike.
    let a = plan_of(&[two[0], two[1], "--arm-guest-dir", "firecracker=/d/fc"]);
    let bins = [
        (Engine::Truecold, PathBuf::from("/bin/truecold-vmm")),
        (Engine::Firecracker, PathBuf::from("/bin/fc")),
    ];
    let words = explicit_args(
        &a,
        guest_flag(ContractKind::Linux),
        ArgPaths {
            vmm: Path::new("/bin/truecold-vmm"),
            guest_dir: Some(Path::new("/g")),
            out: Path::new("/r/b"),
            engines: &bins,
        },
    );
    assert!(
        words
            .join(" ")
            .contains("--arm-guest-dir firecracker=/d/fc"),
        "{words:?}"
    );
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    assert_eq!(plan_of(&w[1..]).arm_guest_dir, a.arm_guest_dir);
}

/// The fail-fast rule's K: the default in a sequential campaign of truecold alone, none under
/// `--keep-going` or where no rule runs, and `--stop-after` refused there.
#[test]
fn the_fail_fast_rule_where_it_runs() {
    assert_eq!(plan_of(&[]).stop_after, Some(10));
    assert_eq!(plan_of(&["--stop-after", "4"]).stop_after, Some(4));
    assert_eq!(plan_of(&["--keep-going"]).stop_after, None);
    assert_eq!(plan_of(&["--mode", "burst"]).stop_after, None);
    assert_eq!(plan_of(&["--engines", "truecold"]).stop_after, None);
    for words in [
        &["--mode", "burst", "--stop-after", "4"][..],
        &["--engines", "truecold", "--stop-after", "4"][..],
        &["--parity", "--stop-after", "4"][..],
    ] {
        assert!(
            matches!(plan(words), Err(ArgError::StopAfterNotSequential)),
            "{words:?}"
        );
    }
}

fn plan_of(extra: &[&str]) -> CampaignPlan {
    plan(extra).unwrap()
}

/// A plan built in code (a tune arm, a bisect step) spells back as the same `truecold run`
/// the command line would give, and parses back to the same plan.
#[test]
fn a_sequential_plan_built_in_code_is_a_plain_run() {
    let guest = GuestSpec::plain(
        Vcpus::new(1).unwrap(),
        GuestMem::from_mib(1024).unwrap(),
        Backing::Anon,
    );
    let p = CampaignPlan::sequential(Target::Linux, guest, 6, 2000, 500)
        .unwrap()
        .at(Some("/v".into()), Some("/g".into()), Some("/o".into()));
    let e = explicit(&p, ContractKind::Linux);
    assert_eq!(
        e.join(" "),
        "--linux --mode sequential --count 6 --vcpus 1 --mem-mib 1024 --backing anon \
         --ram-layout hole-inside --deadline-ms 2000 --kill-grace-ms 500 --cmdline-extra  --keep-going \
         --vmm /bin/truecold-vmm --guest-dir /g --out /r/b"
    );
    let words: Vec<&str> = e.iter().map(String::as_str).collect();
    let back = plan_of(&words);
    assert_eq!((back.schedule, back.guest), (p.schedule, p.guest.clone()));
    assert_eq!(back.target, Target::Linux);
    // Checked like the command line: no launches, no deadline.
    let g = p.guest.clone();
    assert_eq!(
        CampaignPlan::sequential(Target::Linux, g.clone(), 0, 2000, 500).unwrap_err(),
        ArgError::Schedule(ScheduleError::NoSamples)
    );
    assert_eq!(
        CampaignPlan::sequential(Target::Nested, g, 3, 0, 500).unwrap_err(),
        ArgError::DeadlineZero
    );
}

#[test]
fn an_own_kernel_is_a_linux_campaign_under_the_strict_contract() {
    let a = plan(&["--kernel-config", "my.config", "--nested"]).unwrap();
    assert_eq!(
        a.own_kernel,
        Some(OwnKernel {
            config: "my.config".into(),
            form: ConfigForm::Full,
            source: None
        })
    );
    let a = plan(&["--kernel-fragment", "mine.config", "--kernel-source", "/s"]).unwrap();
    assert_eq!(
        a.own_kernel,
        Some(OwnKernel {
            config: "mine.config".into(),
            form: ConfigForm::Fragment,
            source: Some("/s".into())
        })
    );
    let a = plan(&["--kernel-config", "c", "--kernel-source", "/src/linux"]).unwrap();
    assert_eq!(
        a.own_kernel.and_then(|k| k.source),
        Some(PathBuf::from("/src/linux"))
    );
    assert!(plan(&[]).unwrap().own_kernel.is_none());
    for refused in [
        &["--kernel-config", "c", "--probe"][..],
        &["--kernel-config", "c", "--parity"][..],
        &["--kernel-fragment", "c", "--probe"][..],
        &["--kernel-source", "/src/linux"][..],
    ] {
        assert!(
            matches!(plan(refused), Err(ArgError::OwnKernel(_))),
            "{refused:?}"
        );
    }
    // Both forms at once is a usage error (clap's: exit 125 like every other).
    assert!(args(&["--kernel-config", "a", "--kernel-fragment", "b"]).is_err());
}

#[test]
fn l1s_thp_mode_is_a_nested_setting_spelt_out_on_the_line_that_boots_l1() {
    let p = CampaignPlan::of_words(&["--nested", "--l1-thp", "always"]).unwrap();
    assert_eq!(p.l1_thp, Some(truecold_nested::L1Thp::Always));
    assert_eq!(
        CampaignPlan::of_words(&["--linux", "--l1-thp", "always"]).unwrap_err(),
        ArgError::L1ThpNeedsNested
    );
    let paths = |out: &'static str| crate::plan::explicit_args::ArgPaths {
        vmm: std::path::Path::new("/v"),
        guest_dir: Some(std::path::Path::new("/g")),
        out: std::path::Path::new(out),
        engines: &[],
    };
    let outer = crate::plan::explicit_args::explicit_args(&p, "--nested", paths("/o"));
    assert!(
        outer.windows(2).any(|w| w == ["--l1-thp", "always"]),
        "{outer:?}"
    );
    // The run inside L1 is a --linux campaign: the harness's setting is not its flag.
    let inner = crate::plan::explicit_args::explicit_args(&p, "--linux", paths("/o"));
    assert!(!inner.iter().any(|a| a == "--l1-thp"), "{inner:?}");
}

/// `--packages`/`--invariant-tsc`: checked against the vCPUs once, truecold alone, and
/// spelt out on the explicit line exactly when they are not the default.
#[test]
fn the_cpu_platform_is_checked_once_and_spelt_out() {
    use truecold_proto::platform::{CpuPlatform, PlatformError};
    let a = plan(&[
        "--nested",
        "--vcpus",
        "16",
        "--packages",
        "16",
        "--invariant-tsc",
    ])
    .unwrap();
    assert_eq!(
        a.guest.cpu_platform,
        CpuPlatform {
            packages: 16,
            invariant_tsc: true
        }
    );
    let line = explicit(&a, ContractKind::Linux).join(" ");
    assert!(line.contains(" --packages 16 --invariant-tsc "), "{line}");
    let line = explicit(&plan_of(&["--nested"]), ContractKind::Linux).join(" ");
    assert!(
        !line.contains("--packages") && !line.contains("--invariant-tsc"),
        "{line}"
    );
    assert_eq!(
        plan(&["--vcpus", "6", "--packages", "4"]).unwrap_err(),
        ArgError::Platform(PlatformError::Uneven {
            packages: 4,
            vcpus: 6
        })
    );
    assert_eq!(
        plan(&["--vcpus", "6", "--packages", "2"]).unwrap_err(),
        ArgError::Platform(PlatformError::CoresNotPowerOfTwo {
            packages: 2,
            cores: 3
        })
    );
    assert_eq!(
        plan(&["--engine", "truecold", "--invariant-tsc"]).unwrap_err(),
        ArgError::PlatformEngines
    );
    assert!(matches!(
        plan(&["--parity", "--packages", "2"]).unwrap_err(),
        ArgError::Parity(why) if why.contains("--packages")
    ));
}
