use super::*;
use crate::tune::nested_phase::l1_plan;
use crate::tune::phase_plan::{CONFIRM, MIN_ROUNDS, SCREEN};
use truecold_proto::kinds::Backing;
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::tune::Knob;

fn plan(arms: Vec<PhaseArm>) -> PhasePlan {
    PhasePlan {
        phase: SCREEN.into(),
        contract: ContractKind::Linux,
        seed: 1,
        rounds: MIN_ROUNDS,
        vcpus: Vcpus::new(2).unwrap(),
        mem: GuestMem::from_mib(1024).unwrap(),
        backing: Backing::Anon,
        deadline_ms: 2000,
        kill_grace_ms: 500,
        arms,
        attribution: 0,
        instrument: crate::attribution::instrumentation::Instrumentation::default(),
        attribute: Vec::new(),
    }
}

fn arm(name: &str, knobs: &[Knob]) -> PhaseArm {
    PhaseArm {
        name: name.into(),
        knobs: knobs.to_vec(),
        guest_dir: None,
    }
}

#[test]
fn a_phase_plan_is_checked_before_anything_runs() {
    let good = plan(vec![
        arm(BASELINE, &[]),
        arm("console", &[Knob::Console]),
        arm("both", &[Knob::RcuExpedited, Knob::Console]),
    ]);
    assert!(good.problems().is_empty(), "{:?}", good.problems());
    let json = serde_json::to_vec(&good).unwrap();
    assert_eq!(serde_json::from_slice::<PhasePlan>(&json).unwrap(), good);
    let bad = plan(vec![
        arm("console", &[Knob::Console]),
        arm("console", &[Knob::Console]),
        arm("x", &[Knob::Console, Knob::RcuExpedited]),
        arm("y", &[Knob::BackingThp, Knob::BackingHugetlb]),
    ]);
    let p = bad.problems().join("\n");
    for want in [
        "first arm",
        "twice",
        "catalogue order",
        "change the same thing",
    ] {
        assert!(p.contains(want), "{want}: {p}");
    }
    let mut few = good.clone();
    few.rounds = 2;
    assert!(few.problems().join(" ").contains("2 rounds"));
    let mut probe = good;
    probe.contract = ContractKind::Probe;
    assert!(probe.problems().join(" ").contains("does not apply"));
    assert!(serde_json::from_slice::<PhasePlan>(br#"{"phase":"screen","extra":1}"#).is_err());
}

/// The plan file is a process boundary (host → L1): its guest is checked when read.
#[test]
fn a_phase_plan_file_carries_a_checked_guest() {
    let good = plan(vec![arm(BASELINE, &[])]);
    let json = serde_json::to_string(&good).unwrap();
    assert!(json.contains("\"mem_bytes\":1073741824"), "{json}");
    assert!(json.contains("\"vcpus\":2"), "{json}");
    let bad_mem = json.replace("1073741824", "1073741825");
    let e = serde_json::from_str::<PhasePlan>(&bad_mem)
        .unwrap_err()
        .to_string();
    assert!(e.contains("MiB"), "{e}");
    let bad_vcpus = json.replace("\"vcpus\":2", "\"vcpus\":33");
    assert!(serde_json::from_str::<PhasePlan>(&bad_vcpus).is_err());
}

/// An arm's own `truecold run` (its bundle's cmdline.txt) is built through the plan
/// constructor and spells the arm's applied knobs.
#[test]
fn an_arms_run_is_a_plain_sequential_plan() {
    let plan = plan(vec![arm(BASELINE, &[]), arm("console", &[Knob::Console])]);
    let applied = knobs::apply(&[Knob::Console], plan.backing);
    let spec = CampaignSpec {
        schedule: Schedule::Sequential { n: plan.rounds },
        contract: plan.contract,
        vcpus: plan.vcpus,
        mem: plan.mem,
        backing: applied.backing,
        ram_layout: applied.ram_layout,
        cpu_platform: truecold_proto::platform::CpuPlatform::ABSENT,
        deadline_ns: 2_000_000_000,
        kill_grace_ns: 500_000_000,
        observer: Observer::VmExit,
        interleaved: true,
        stop_after: None,
    };
    let p = PreparedArm {
        arm: plan.arms[1].clone(),
        launcher: ProcessLauncher {
            command: VmmCommand {
                program: "/v".into(),
                args: Vec::new(),
            },
            deadline_ns: spec.deadline_ns,
            kill_grace_ns: spec.kill_grace_ns,
            from_intended: false,
        },
        applied,
        spec,
        guest: None,
        guest_dir: Some("/g".into()),
    };
    let e = arm_run_args(&plan, &p, Path::new("/v"), Path::new("/o"), false).unwrap();
    let line = e.join(" ");
    assert!(
        line.starts_with(
            "--linux --mode sequential --count 5 --vcpus 2 --mem-mib 1024 --backing anon \
             --ram-layout around-hole --deadline-ms 2000 --kill-grace-ms 500 --cmdline-extra "
        ),
        "{line}"
    );
    assert!(
        line.ends_with(" --vmm /v --guest-dir /g --out /o"),
        "{line}"
    );
    assert!(!line.contains("--attribution"), "{line}");
    // An attributed arm's line runs its attribution launches too, the instrument spelt out
    // (the default `rip` with its period; `initcall` alone).
    let mut attributed = plan.clone();
    attributed.attribution = 2;
    attributed.attribute = vec!["console".into()];
    assert!(attributes(&attributed, &attributed.arms[1], false));
    assert!(!attributes(&attributed, &attributed.arms[1], true));
    assert!(!attributes(&attributed, &attributed.arms[0], false));
    let line = |plan: &PhasePlan| {
        arm_run_args(plan, &p, Path::new("/v"), Path::new("/o"), true)
            .unwrap()
            .join(" ")
    };
    let l = line(&attributed);
    assert!(
        l.contains(" --attribution 2 --attribution-instrument rip --attribution-sample-us 100 "),
        "{l}"
    );
    attributed.instrument.instrument = crate::attribution::instrumentation::Instrument::Initcall;
    let l = line(&attributed);
    assert!(
        l.contains(" --attribution 2 --attribution-instrument initcall --keep-going "),
        "{l}"
    );
}

/// A phase plan always carries its instrumentation; one without the field (written before
/// `rip` became the default, which plans then left out) reads as `initcall`.
#[test]
fn a_phase_plan_names_its_instrument_and_an_absent_one_is_initcall() {
    let mut good = plan(vec![arm(BASELINE, &[])]);
    good.attribution = 2;
    good.attribute = vec![BASELINE.into()];
    let json = serde_json::to_value(&good).unwrap();
    assert_eq!(json["instrument"]["instrument"], "rip", "{json}");
    assert_eq!(json["instrument"]["period"], 100, "{json}");
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("instrument");
    let read: PhasePlan = serde_json::from_value(old).unwrap();
    assert_eq!(
        read.instrument.instrument,
        crate::attribution::instrumentation::Instrument::Initcall
    );
    assert_eq!(
        read.instrument,
        crate::attribution::instrumentation::Instrumentation::absent()
    );
}

/// A phase's L1 boot: a nested campaign with the phase's guest, deadline and paths; the
/// confirm phase's L1 seed differs from the screen's; every attributed arm's launches count.
#[test]
fn a_phase_in_l1_is_a_nested_campaign_seeded_by_the_phase() {
    let mut p = plan(vec![arm(BASELINE, &[]), arm("console", &[Knob::Console])]);
    p.attribution = 2;
    p.attribute = vec![BASELINE.into(), "console".into()];
    let l1 = l1_plan(&p, Some(Path::new("/v")), Path::new("/g"), Path::new("/d")).unwrap();
    assert_eq!(l1.target, Target::Nested);
    assert_eq!(l1.schedule, Schedule::Sequential { n: p.rounds });
    assert_eq!((l1.guest.vcpus, l1.guest.mem), (p.vcpus, p.mem));
    assert_eq!((l1.deadline_ms, l1.kill_grace_ms), (2000, 500));
    assert_eq!(l1.seed, p.seed);
    assert_eq!(l1.attribution, 4);
    assert_eq!(l1.vmm.as_deref(), Some(Path::new("/v")));
    assert_eq!(l1.guest_dir.as_deref(), Some(Path::new("/g")));
    assert_eq!(l1.out.as_deref(), Some(Path::new("/d")));
    p.phase = CONFIRM.into();
    let l1 = l1_plan(&p, None, Path::new("/g"), Path::new("/d")).unwrap();
    assert_eq!(l1.seed, p.seed + 1);
    p.deadline_ms = 0;
    assert!(matches!(
        l1_plan(&p, None, Path::new("/g"), Path::new("/d")),
        Err(PhaseError::Args(
            crate::plan::arg_error::ArgError::DeadlineZero
        ))
    ));
}

/// L1 is sized for the phase's backings: a `backing-hugetlb` arm makes it reserve a pool
/// (`nested::l1_hugetlb_pages`), a phase without one does not.
#[test]
fn a_phase_with_a_hugetlb_arm_sizes_l1_for_a_pool() {
    let p = plan(vec![arm(BASELINE, &[]), arm("console", &[Knob::Console])]);
    let l1 = l1_plan(&p, None, Path::new("/g"), Path::new("/d")).unwrap();
    assert_eq!(crate::run::nested_campaign::l1_hugetlb_pages(&l1), 0);
    let p = plan(vec![
        arm(BASELINE, &[]),
        arm("backing-hugetlb", &[Knob::BackingHugetlb]),
    ]);
    let l1 = l1_plan(&p, None, Path::new("/g"), Path::new("/d")).unwrap();
    assert!(crate::run::nested_campaign::l1_hugetlb_pages(&l1) >= p.mem.huge_pages_at_least());
}

/// A bisect's kernel A/B is sized by the bisect (`-n` 3 is its fewest), a tune phase by
/// tune's rule (at least `MIN_ROUNDS`).
#[test]
fn a_kernel_ab_takes_the_bisects_fewest_rounds() {
    let kernel = |name: &str| PhaseArm {
        guest_dir: Some(PathBuf::from(format!("/k/{name}"))),
        ..arm(name, &[])
    };
    let mut ab = plan(vec![
        kernel(truecold_proof::bisect::GOOD_ARM),
        kernel(truecold_proof::bisect::CANDIDATE_ARM),
    ]);
    ab.rounds = crate::plan::bisect_plan::MIN_N;
    assert!(ab.problems().is_empty(), "{:?}", ab.problems());
    ab.rounds -= 1;
    assert!(
        ab.problems().join(" ").contains("at least 3"),
        "{:?}",
        ab.problems()
    );
    let mut tune = plan(vec![arm(BASELINE, &[]), arm("console", &[Knob::Console])]);
    tune.rounds = crate::plan::bisect_plan::MIN_N;
    assert!(
        tune.problems()
            .join(" ")
            .contains(&format!("at least {MIN_ROUNDS}")),
        "{:?}",
        tune.problems()
    );
}
