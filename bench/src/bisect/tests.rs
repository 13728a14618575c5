use super::*;
use crate::plan::bisect::{bisect_words, ConfigBisectPlan};
use crate::plan::ArgError;

#[test]
fn the_cli_takes_the_three_subcommands_and_checks_sizes() {
    use crate::cli::BisectCmd;
    let p = bisect_words;
    let Ok(BisectCmd::Step(s)) = p(&["step", "--baseline", "b", "--dir", "d", "-n", "4"]) else {
        panic!("step does not parse")
    };
    let s = BisectStepPlan::from_cli(&s).unwrap();
    assert_eq!(s.kernel_tree, PathBuf::from("."));
    assert_eq!((s.judge.n, s.judge.max_n), (4, 16));
    assert_eq!(
        s.judge.paths.kernel_root,
        PathBuf::from("out/bisect-kernels")
    );
    let o = &s.judge.options;
    assert_eq!((o.min_samples, o.threshold_pct, o.alpha), (4, 2.0, 0.01));
    assert!(p(&["step", "--dir", "d"]).is_err());
    let Ok(BisectCmd::Step(s)) = p(&["step", "--baseline", "b", "--dir", "d", "-n", "2"]) else {
        panic!("step does not parse")
    };
    assert_eq!(
        BisectStepPlan::from_cli(&s),
        Err(ArgError::BisectSizes { n: 2, max_n: 8 })
    );
    let Ok(BisectCmd::Run(r)) = p(&[
        "run",
        "--kernel-tree",
        "t",
        "--good",
        "v1",
        "--bad",
        "v2",
        "--nested",
        "--max-n",
        "3",
    ]) else {
        panic!("run does not parse")
    };
    assert!(r.context.nested);
    assert_eq!(
        (r.context.guest.vcpus.get(), r.context.guest.mem.mib()),
        (1, 1024)
    );
    assert_eq!(
        BisectRunPlan::from_cli(&r),
        Err(ArgError::BisectSizes { n: 7, max_n: 3 })
    );
    let Ok(BisectCmd::Config(c)) = p(&["config", "--good", "a", "--bad", "b", "-n", "2"]) else {
        panic!("config does not parse")
    };
    assert_eq!(
        ConfigBisectPlan::from_cli(&c),
        Err(ArgError::BisectSizes { n: 2, max_n: 8 })
    );
    let Ok(BisectCmd::Run(r)) = p(&[
        "run",
        "--kernel-tree",
        "t",
        "--good",
        "v1",
        "--bad",
        "v2",
        "--nested",
        "--max-n",
        "7",
    ]) else {
        panic!("run does not parse")
    };
    let r = BisectRunPlan::from_cli(&r).unwrap();
    assert_eq!(
        (r.context.nested, r.context.vcpus.get(), r.context.mem.mib()),
        (true, 1, 1024)
    );
    let flags = r.judge.step_flags().join(" ");
    // The default n is the fewest whose first look can reject at the default rule.
    assert_eq!(
        truecold_proof::bisect::Looks::new(DEFAULT_N, 4 * DEFAULT_N).smallest_n(0.01),
        Some(DEFAULT_N)
    );
    assert!(
        flags.starts_with("-n 7 --threshold-pct 2 --alpha 0.01 --max-n 7"),
        "{flags}"
    );
    // Every path absolute: git bisect runs the step inside the kernel tree.
    let here = std::env::current_dir().unwrap();
    for want in ["--kernel-dir", "--kernel-build", "--guest-dir"] {
        let at = r.judge.step_flags().iter().position(|f| f == want).unwrap();
        let path = PathBuf::from(&r.judge.step_flags()[at + 1]);
        assert!(
            path.is_absolute() && path.starts_with(&here),
            "{want} {}",
            path.display()
        );
    }
}
