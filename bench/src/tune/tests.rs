use super::*;
use crate::cli::{Cli, Cmd};
use crate::phase::kconfig_knobs;
use clap::Parser;

fn parse(extra: &[&str]) -> TuneArgs {
    let mut v = vec!["truecold", "tune"];
    v.extend_from_slice(extra);
    match Cli::try_parse_from(v).expect("parses").cmd {
        Cmd::Tune(a) => a,
        _ => panic!("not a tune"),
    }
}

#[test]
fn the_default_catalogue_is_every_knob_that_applies() {
    assert_eq!(
        chosen_knobs(None, TuneGuest::Probe).unwrap(),
        vec![Knob::BackingThp, Knob::BackingHugetlb]
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
        Err(TuneError::Knobs(KnobSetError::NotForGuest(Knob::Console)))
    ));
    assert!(matches!(
        chosen_knobs(Some(" , "), TuneGuest::Linux),
        Err(TuneError::NoKnobs(_))
    ));
}

#[test]
fn the_budget_shrinks_both_phases_to_the_worst_case() {
    assert_eq!(phase_rounds(2, 10, 8, None).unwrap(), (10, 8));
    // 2 knobs: 3 screen arms + at most 4 confirm arms = 7 arms; 50 / 7 = 7 rounds.
    assert_eq!(phase_rounds(2, 10, 10, Some(50)).unwrap(), (7, 7));
    assert_eq!(phase_rounds(2, 5, 10, Some(50)).unwrap(), (5, 7));
    match phase_rounds(2, 10, 10, Some(27)) {
        Err(TuneError::Budget {
            rounds, arms, need, ..
        }) => assert_eq!((rounds, arms, need), (3, 7, 35)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        phase_rounds(2, 3, 10, None),
        Err(TuneError::TooFewRounds(3))
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
    let base = artifacts::linux_guest(&base_dir).unwrap();
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
    let g = artifacts::linux_guest(&dir).unwrap();
    let config = std::fs::read_to_string(&g.config).unwrap();
    assert_eq!(
        config,
        "CONFIG_HZ_1000=y\n# CONFIG_HZ_250 is not set\n# CONFIG_PRINTK is not set\n"
    );
    assert_eq!(std::fs::read(&g.initramfs).unwrap(), b"initramfs.cpio");
    let failing = d.path().join("fail.sh");
    std::fs::write(&failing, "exit 3\n").unwrap();
    let e = ensure_kernel(&[Knob::NoSmp], &base, &root, &failing).unwrap_err();
    assert!(
        matches!(
            e,
            TuneError::Kernel {
                source: crate::kernel::KernelError::Failed { .. },
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
                source: crate::kernel::KernelError::ScriptMissing(_),
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
        "4",
        "--mem-mib",
        "2048",
    ]);
    assert!(a.probe && !a.nested);
    assert_eq!((a.rounds, a.guest.mem.mib()), (Some(4), 2048));
    assert_eq!(a.knobs.as_deref(), Some("backing-thp"));
    assert!(Cli::try_parse_from(["truecold", "tune", "--probe", "--nested"]).is_err());
    let a = parse(&["--nested", "--budget", "100"]);
    assert_eq!(a.budget, Some(100));
    assert_eq!(a.guest.mem.mib(), DEFAULT_TUNE_MEM_MIB);
}
