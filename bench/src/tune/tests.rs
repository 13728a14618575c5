use super::knob_kernels::*;
use super::phase_plan::{kconfig_knobs, variant_name};
use super::tune_error::TuneError;
use super::tune_run::{catalogue_text, invocation_record};
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::artifacts::own_kernel::{self, OwnKernel};
use crate::cli::DEFAULT_TUNE_MEM_MIB;
use crate::plan::arg_error::ArgError;
use crate::plan::guest::Target;
use crate::plan::tune_plan::{phase_rounds, KnobChoice, TunePlan};
use std::path::{Path, PathBuf};
use truecold_proof::schema::ContractKind;
use truecold_proto::tune::KnobSetError;
use truecold_proto::tune::{Knob, TuneGuest};

fn parse(extra: &[&str]) -> TunePlan {
    TunePlan::of_words(extra).unwrap()
}

fn chosen_knobs(list: Option<&str>, guest: TuneGuest) -> Result<Vec<Knob>, ArgError> {
    KnobChoice::parse(list, guest)?.for_guest(guest)
}

#[test]
fn the_default_catalogue_is_every_knob_that_applies() {
    assert_eq!(
        chosen_knobs(None, TuneGuest::Probe).unwrap(),
        vec![Knob::BackingThp, Knob::BackingHugetlb, Knob::PinVcpus]
    );
    assert_eq!(
        chosen_knobs(None, TuneGuest::Linux).unwrap(),
        Knob::ALL.to_vec()
    );
    assert_eq!(
        chosen_knobs(Some("console,rcu-expedited"), TuneGuest::Linux).unwrap(),
        vec![Knob::RcuExpedited, Knob::Console]
    );
    assert!(matches!(
        chosen_knobs(Some("console"), TuneGuest::Probe),
        Err(ArgError::Knobs(KnobSetError::NotForGuest(Knob::Console)))
    ));
    assert!(matches!(
        chosen_knobs(Some(" , "), TuneGuest::Linux),
        Err(ArgError::NoKnobs)
    ));
    // A guest not known before the host is: the list parsed against Linux (every knob), and
    // checked again against the guest found.
    let later = KnobChoice::parse(Some("console"), TuneGuest::Linux).unwrap();
    assert_eq!(
        later.for_guest(TuneGuest::Probe),
        Err(ArgError::Knobs(KnobSetError::NotForGuest(Knob::Console)))
    );
    assert_eq!(
        KnobChoice::parse(Some("console,bogus"), TuneGuest::Linux),
        Err(ArgError::Knobs(KnobSetError::Unknown("bogus".into())))
    );
}

#[test]
fn the_budget_shrinks_both_phases_to_the_worst_case() {
    assert_eq!(phase_rounds(2, 10, 8, None).unwrap(), (10, 8));
    // 2 knobs: 3 screen arms + at most 4 confirm arms = 7 arms; 50 / 7 = 7 rounds.
    assert_eq!(phase_rounds(2, 10, 10, Some(50)).unwrap(), (7, 7));
    assert_eq!(phase_rounds(2, 5, 10, Some(50)).unwrap(), (5, 7));
    match phase_rounds(2, 10, 10, Some(27)) {
        Err(ArgError::Budget {
            rounds, arms, need, ..
        }) => assert_eq!((rounds, arms, need), (3, 7, 35)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        phase_rounds(2, 3, 10, None),
        Err(ArgError::TooFewRounds(3))
    ));
}

#[test]
fn kernel_variants_are_named_by_their_kconfig_knobs() {
    let set = [
        Knob::RcuExpedited,
        Knob::Hz1000,
        Knob::NoPrintk,
        Knob::Console,
    ];
    assert_eq!(kconfig_knobs(&set), vec![Knob::Hz1000, Knob::NoPrintk]);
    assert_eq!(variant_name(&kconfig_knobs(&set)), "hz-1000+no-printk");
    let text = catalogue_text();
    for k in Knob::ALL {
        assert!(
            text.contains(&format!("{}\t{}\t", k.as_str(), k.class().as_str())),
            "{k}"
        );
    }
}

#[test]
fn ensure_kernel_runs_the_build_script_with_each_fragment() {
    let d = tempfile::tempdir().unwrap();
    let base_dir = d.path().join("guest");
    std::fs::create_dir(&base_dir).unwrap();
    for f in ["vmlinux", "initramfs.cpio", "init", "config"] {
        std::fs::write(base_dir.join(f), f).unwrap();
    }
    let base = guest_files::linux_guest(&base_dir).unwrap();
    // A stand-in for kernel-config/build.sh: checks its arguments, writes the kernel files.
    let script = d.path().join("build.sh");
    std::fs::write(
        &script,
        "set -e\n[ \"$1\" = tune ]\nmkdir -p \"$2\"\nfor f in \"${@:3}\"; do cat \"$f\" >> \"$2/config\"; done\n\
         echo k > \"$2/vmlinux\"; echo bz > \"$2/bzImage\"\n",
    )
    .unwrap();
    let root = d.path().join("kernels");
    let dir = ensure_kernel(&[Knob::Hz1000, Knob::NoPrintk], &base, &root, &script).unwrap();
    assert_eq!(dir, root.join("hz-1000+no-printk"));
    let g = guest_files::linux_guest(&dir).unwrap();
    let config = std::fs::read_to_string(&g.config).unwrap();
    assert_eq!(
        config,
        "CONFIG_HZ_1000=y\n# CONFIG_HZ_250 is not set\n# CONFIG_PRINTK is not set\n"
    );
    assert_eq!(std::fs::read(&g.initramfs).unwrap(), b"initramfs.cpio");
    // Built, not found in the script's cache; then a script that finds it there.
    let got = ensure_kernel_got(&[Knob::Hz1000], &base, &root, &script).unwrap();
    assert!(!got.cached);
    let hit = d.path().join("hit.sh");
    std::fs::write(
        &hit,
        "mkdir -p \"$2\"; echo c > \"$2/config\"; echo k > \"$2/vmlinux\"\n\
         echo \"kernel-config/build.sh: cache hit /cache/kernel/x\" >&2\n",
    )
    .unwrap();
    let got = ensure_kernel_got(&[Knob::Hz1000], &base, &root, &hit).unwrap();
    assert!(got.cached);
    assert_eq!(got.dir, root.join("hz-1000"));
    let failing = d.path().join("fail.sh");
    std::fs::write(&failing, "exit 3\n").unwrap();
    let e = ensure_kernel(&[Knob::NoSmp], &base, &root, &failing).unwrap_err();
    assert!(
        matches!(
            e,
            TuneError::Kernel {
                source: crate::artifacts::kernel_build::KernelError::Failed { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("no-smp"), "{e}");
    let e = ensure_kernel(&[Knob::NoSmp], &base, &root, &d.path().join("nope")).unwrap_err();
    assert!(
        matches!(
            e,
            TuneError::Kernel {
                source: crate::artifacts::kernel_build::KernelError::ScriptMissing(_),
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn the_cli_takes_a_tune() {
    let a = parse(&[
        "--probe",
        "--knobs",
        "backing-thp",
        "-n",
        "5",
        "--mem-mib",
        "2048",
    ]);
    assert!(a.target == Target::Probe && !a.nested());
    assert_eq!((a.rounds, a.mem.mib()), (Some(5), 2048));
    assert_eq!(a.knobs, KnobChoice::Listed(vec![Knob::BackingThp]));
    assert_eq!(a.paths.kernel_root, PathBuf::from("out/tune-kernels"));
    assert_eq!(
        a.deadline_ms,
        crate::plan::common_flags::DEFAULT_DEADLINE_MS
    );
    let a = parse(&["--nested", "--budget", "1000"]);
    assert_eq!(a.budget, Some(1000));
    assert_eq!(a.mem.mib(), DEFAULT_TUNE_MEM_MIB);
    assert_eq!(
        a.deadline_ms,
        crate::plan::common_flags::DEFAULT_NESTED_DEADLINE_MS
    );
    assert_eq!(a.knobs, KnobChoice::All);
}

/// Every check that needs no host is the plan's: made before the host is probed or a
/// kernel built.
#[test]
fn the_plan_refuses_what_the_flags_alone_rule_out() {
    let e = |w: &[&str]| TunePlan::of_words(w).unwrap_err();
    assert_eq!(
        e(&["--probe", "--knobs", "console"]),
        ArgError::Knobs(KnobSetError::NotForGuest(Knob::Console))
    );
    assert_eq!(
        e(&["--knobs", "hz-1000,hz-1000"]),
        ArgError::Knobs(KnobSetError::Twice(Knob::Hz1000))
    );
    assert_eq!(e(&["--knobs", ","]), ArgError::NoKnobs);
    assert_eq!(e(&["-n", "2"]), ArgError::TooFewRounds(2));
    assert_eq!(e(&["--confirm-rounds", "1"]), ArgError::TooFewRounds(1));
    use clap::Parser;
    let zero = crate::cli::Cli::try_parse_from(["truecold", "tune", "--deadline-ms", "0"])
        .expect_err("a deadline of 0 is out of range");
    assert_eq!(zero.kind(), clap::error::ErrorKind::ValueValidation);
    // 3 probe knobs: 4 + 5 arms; 20 launches leave 2 rounds.
    assert!(matches!(
        e(&["--probe", "--budget", "20", "-n", "5"]),
        ArgError::Budget {
            rounds: 2,
            arms: 9,
            ..
        }
    ));
    // With the guest unknown (no --probe/--linux/--nested) and every knob, the budget waits
    // for the host: the plan is made.
    assert!(TunePlan::of_words(&["--budget", "20"]).is_ok());
    // So does it with rounds sized from a noise bundle, or from the pilot (the default
    // without -n), whose noise is known only once it ran.
    assert!(TunePlan::of_words(&["--probe", "--budget", "20", "--noise-from", "x"]).is_ok());
    let p = TunePlan::of_words(&["--probe", "--budget", "20"]).unwrap();
    assert_eq!(
        p.sizing,
        crate::plan::tune_plan::Sizing::Pilot(crate::plan::tune_plan::DEFAULT_PILOT_ROUNDS)
    );
    assert_eq!(e(&["--pilot-rounds", "3"]), ArgError::TooFewRounds(3));
    assert!(crate::cli::Cli::try_parse_from([
        "truecold",
        "tune",
        "-n",
        "5",
        "--pilot-rounds",
        "6"
    ])
    .is_err());
}

/// `truecold tune`'s attribution launches are `rip` by default; `tune.json`'s invocation
/// names the instrument (and `rip`'s period) whenever it makes them, and nothing when it
/// makes none; a period given to `initcall` is refused.
#[test]
fn tune_attributes_with_rip_by_default_and_records_the_instrument() {
    use crate::attribution::instrumentation::Instrument;
    use truecold_proto::rip::SamplePeriod;
    let tp = parse(&["--nested"]);
    assert_eq!(tp.attribution, 2);
    assert_eq!(tp.instrument.instrument, Instrument::Rip);
    let i = invocation_record(&tp, ContractKind::Linux, None, Vec::new());
    assert_eq!(i.instrument(), Some(Instrument::Rip));
    let o = i.options;
    assert_eq!(o.attribution_instrument, Some(Instrument::Rip));
    assert_eq!(o.attribution_sample_us, Some(SamplePeriod::DEFAULT));
    assert!(o.instrument_problems().is_empty());
    let tp = parse(&["--nested", "--attribution-instrument", "initcall"]);
    let o = invocation_record(&tp, ContractKind::Linux, None, Vec::new()).options;
    assert_eq!(o.attribution_instrument, Some(Instrument::Initcall));
    assert_eq!(o.attribution_sample_us, None);
    let tp = parse(&["--nested", "--attribution", "0"]);
    let i = invocation_record(&tp, ContractKind::Linux, None, Vec::new());
    assert_eq!(i.instrument(), None);
    let o = i.options;
    assert_eq!(
        (o.attribution_instrument, o.attribution_sample_us),
        (None, None)
    );
    assert_eq!(
        TunePlan::of_words(&[
            "--attribution-instrument",
            "initcall",
            "--attribution-sample-us",
            "50"
        ])
        .unwrap_err(),
        ArgError::SamplePeriodNotRip(SamplePeriod::from_us(50).unwrap())
    );
}

#[test]
fn a_screen_that_cannot_name_a_winner_is_warned_with_the_rounds_that_can() {
    // 19 knobs at 5 rounds: Holm compares the smallest p (about 0.012) with 0.05 / 19.
    let w = super::tune_run::unreachable_winner(5, 19).expect("a warning");
    let need = truecold_proof::tune::least_rounds_for_a_winner(5, 19).unwrap();
    assert!(w.contains(&format!("-n {need} or more")), "{w}");
    assert!(w.contains("19 knobs"), "{w}");
    // Two knobs at 5 rounds can win; so can 19 knobs at the rounds the warning names.
    assert_eq!(super::tune_run::unreachable_winner(5, 2), None);
    assert_eq!(super::tune_run::unreachable_winner(need, 19), None);
    assert_eq!(super::tune_run::unreachable_winner(5, 0), None);
}

/// A stand-in for `kernel-config/build.sh config`: olddefconfig as the identity, except that
/// it drops `CONFIG_GONE` and `CONFIG_HZ_1000` (symbols this "source" does not have).
fn fake_config_build(d: &Path) -> PathBuf {
    let script = d.join("build.sh");
    std::fs::write(
        &script,
        "set -e\n[ \"$1\" = config ]\nmkdir -p \"$2\"\n\
         grep -v -e CONFIG_GONE -e CONFIG_HZ_1000 \"$3\" > \"$2/config\" || true\n\
         echo k > \"$2/vmlinux\"; echo bz > \"$2/bzImage\"\n",
    )
    .unwrap();
    script
}

fn fake_base_guest(d: &Path) -> LinuxGuest {
    let base_dir = d.join("guest");
    std::fs::create_dir(&base_dir).unwrap();
    for f in ["vmlinux", "initramfs.cpio", "init", "config"] {
        std::fs::write(base_dir.join(f), f).unwrap();
    }
    guest_files::linux_guest(&base_dir).unwrap()
}

/// The user's complete config: every strict-ready requirement, HZ 100, and a symbol the
/// fake source drops.
fn user_config(d: &Path) -> PathBuf {
    let mut text: String = own_kernel::REQUIREMENTS
        .iter()
        .map(|r| format!("{}=y\n", r.symbol))
        .collect();
    text.push_str("CONFIG_HZ_100=y\n# CONFIG_HZ_250 is not set\nCONFIG_GONE=y\n");
    let p = d.join("fc.config");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_users_kernel_is_the_baseline_and_each_kconfig_knob_goes_over_it() {
    let d = tempfile::tempdir().unwrap();
    let base = fake_base_guest(d.path());
    let script = fake_config_build(d.path());
    let k = OwnKernel {
        config: user_config(d.path()),
        form: own_kernel::ConfigForm::Full,
        source: None,
    };
    let root = d.path().join("kernels");
    let own = OwnBase::build(&k, 2, &base, &root, &script).unwrap();
    assert_eq!(own.record.not_carried, ["CONFIG_GONE: given y, gone"]);
    assert_eq!(
        own.record.sha256,
        truecold_proof::digest::sha256_hex(&std::fs::read(&k.config).unwrap())
    );
    assert_eq!(
        std::fs::read(own.dir.join("initramfs.cpio")).unwrap(),
        b"initramfs.cpio"
    );
    // HZ 100 is already set, and so is "no printk" (the config has no CONFIG_PRINTK).
    let knobs = vec![
        Knob::TscReliable,
        Knob::Hz100,
        Knob::Hz1000,
        Knob::NoPrintk,
        Knob::X2apic,
    ];
    assert_eq!(own.already_set(&knobs), [Knob::Hz100, Knob::NoPrintk]);
    match screen_knobs(knobs.clone(), Some(&own), true) {
        Err(e @ TuneError::KnobAlreadySet { .. }) => {
            assert!(e.to_string().contains("--knobs hz-100,no-printk"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let (rest, set) = screen_knobs(knobs, Some(&own), false).unwrap();
    assert_eq!(rest, [Knob::TscReliable, Knob::Hz1000, Knob::X2apic]);
    assert_eq!(set, [Knob::Hz100, Knob::NoPrintk]);
    assert!(matches!(
        screen_knobs(vec![Knob::Hz100], Some(&own), false),
        Err(TuneError::NoKnobLeft)
    ));
    // A knob's kernel: the user's file, then the knob's fragment, built as the user's kernel.
    let x = own
        .arm_kernel(&[Knob::X2apic], &base, &root, &script)
        .unwrap()
        .dir;
    let cfg = std::fs::read_to_string(x.join("config")).unwrap();
    assert!(cfg.ends_with("# x2apic\nCONFIG_X86_X2APIC=y\n"), "{cfg}");
    assert!(cfg.contains("CONFIG_HZ_100=y\n"), "{cfg}");
    assert_ne!(x, own.dir);
    // A knob that takes SMP away is built (at 2 vCPUs its arm breaks strict-ready, measured
    // as on truecold's base), not refused.
    let no_smp = own
        .arm_kernel(&[Knob::NoSmp], &base, &root, &script)
        .unwrap()
        .dir;
    assert!(std::fs::read_to_string(no_smp.join("config"))
        .unwrap()
        .contains("# no-smp\n"));
    // A knob olddefconfig drops did not take: refused, named.
    match own.arm_kernel(&[Knob::Hz1000], &base, &root, &script) {
        Err(
            e @ TuneError::KnobDidNotTake {
                knob: Knob::Hz1000, ..
            },
        ) => {
            assert!(
                e.to_string().contains("CONFIG_HZ_1000: given y, gone"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
    // The recorded invocation carries the kernel and the knobs left out.
    let tp = parse(&["--nested", "--kernel-config", "fc.config"]);
    let inv = invocation_record(&tp, ContractKind::Linux, Some(&own), vec![Knob::Hz100]);
    assert_eq!(inv.options.kernel.as_ref(), Some(&own.record));
    assert_eq!(inv.options.already_set, [Knob::Hz100]);
}

#[test]
fn a_users_kernel_missing_a_requirement_is_refused_before_the_build() {
    let d = tempfile::tempdir().unwrap();
    let base = fake_base_guest(d.path());
    let p = d.path().join("bad.config");
    std::fs::write(&p, "CONFIG_64BIT=y\nCONFIG_PVH=y\n").unwrap();
    let k = OwnKernel {
        config: p,
        form: own_kernel::ConfigForm::Full,
        source: None,
    };
    // The script does not exist: the refusal comes first.
    let e = OwnBase::build(&k, 1, &base, d.path(), &d.path().join("absent.sh"))
        .err()
        .unwrap();
    let s = truecold_proto::measure::error_chain(&e);
    assert!(s.contains("CONFIG_BLK_DEV_INITRD is not set"), "{s}");
}

#[test]
fn tune_takes_the_users_kernel_flags() {
    use crate::artifacts::own_kernel::ConfigForm;
    let p = parse(&[
        "--nested",
        "--kernel-config",
        "fc.config",
        "--knobs",
        "tsc-reliable,lpj",
    ]);
    assert_eq!(
        p.own_kernel,
        Some(OwnKernel {
            config: "fc.config".into(),
            form: ConfigForm::Full,
            source: None
        })
    );
    let p = parse(&[
        "--linux",
        "--kernel-fragment",
        "f",
        "--kernel-source",
        "/src/linux",
    ]);
    let k = p.own_kernel.unwrap();
    assert_eq!(k.form, ConfigForm::Fragment);
    assert_eq!(k.source.as_deref(), Some(Path::new("/src/linux")));
    assert!(parse(&[]).own_kernel.is_none());
    for bad in [
        &["--kernel-source", "/src/linux"][..],
        &["--probe", "--kernel-config", "fc.config"][..],
    ] {
        assert!(
            matches!(TunePlan::of_words(bad), Err(ArgError::OwnKernel(_))),
            "{bad:?}"
        );
    }
    use clap::Parser;
    assert!(crate::cli::Cli::try_parse_from([
        "truecold",
        "tune",
        "--kernel-config",
        "a",
        "--kernel-fragment",
        "b"
    ])
    .is_err());
}

/// `--propose` and `--propose-from` in the plan: where the proposals come from, the source
/// tree, `--dry-run`; the probe guest refused; a proposed knob listed in `--knobs` by its name.
#[test]
fn proposals_are_planned_from_an_attribution_or_a_bundle() {
    use crate::plan::tune_plan::{ProposeFrom, ProposePlan};
    let p = parse(&["--nested", "--propose-from", "b", "--dry-run"]);
    assert_eq!(
        p.propose,
        Some(ProposePlan {
            from: ProposeFrom::Bundle(PathBuf::from("b")),
            source: None,
            dry_run: true,
            classes: Vec::new(),
        })
    );
    let p = parse(&["--nested", "--propose", "--propose-source", "/src"]);
    assert_eq!(
        p.propose,
        Some(ProposePlan {
            from: ProposeFrom::Attribute,
            source: Some(PathBuf::from("/src")),
            dry_run: false,
            classes: Vec::new(),
        })
    );
    // Only the command-line proposals; a class without a proposal source is refused.
    let p = parse(&["--nested", "--propose", "--propose-class", "cmdline,vmm"]);
    assert_eq!(
        p.propose.map(|p| p.classes),
        Some(vec![
            truecold_proto::tune::KnobClass::Cmdline,
            truecold_proto::tune::KnobClass::Vmm
        ])
    );
    assert!(matches!(
        TunePlan::of_words(&["--nested", "--propose-class", "cmdline"]),
        Err(ArgError::ProposeClass(_))
    ));
    assert!(matches!(
        TunePlan::of_words(&["--nested", "--propose", "--propose-class", "bios"]),
        Err(ArgError::ProposeClass(_))
    ));
    assert_eq!(parse(&["--nested"]).propose, None);
    assert!(matches!(
        TunePlan::of_words(&["--probe", "--propose"]),
        Err(ArgError::ProposeProbe)
    ));
    let p = parse(&[
        "--nested",
        "--knobs",
        "initcall-blacklist-i8042_init,tsc-reliable",
    ]);
    assert_eq!(
        p.knobs,
        KnobChoice::Listed(vec![
            Knob::TscReliable,
            Knob::parse("initcall-blacklist-i8042_init").unwrap()
        ])
    );
    use clap::Parser;
    for bad in [
        &["truecold", "tune", "--dry-run"][..],
        &["truecold", "tune", "--propose", "--propose-from", "b"],
    ] {
        assert!(crate::cli::Cli::try_parse_from(bad).is_err(), "{bad:?}");
    }
}

/// A phase plan's arm with a proposed knob reaches L1 (`truecold tune-phase --plan`) as the
/// knob's name and reads back as the same knob.
#[test]
fn a_proposed_knob_crosses_the_phase_plan_by_its_name() {
    use super::phase_plan::PhaseArm;
    let k = Knob::parse("kconfig-off-SERIO_I8042").unwrap();
    let arm = PhaseArm {
        name: k.as_str().to_string(),
        knobs: vec![k],
        guest_dir: Some(PathBuf::from("/l1/kernels/kconfig-off-SERIO_I8042")),
    };
    let j = serde_json::to_string(&arm).unwrap();
    assert!(j.contains(r#""knobs":["kconfig-off-SERIO_I8042"]"#), "{j}");
    assert_eq!(serde_json::from_str::<PhaseArm>(&j).unwrap(), arm);
    assert_eq!(
        variant_name(&kconfig_knobs(&[Knob::TscReliable, k])),
        "kconfig-off-SERIO_I8042"
    );
}
