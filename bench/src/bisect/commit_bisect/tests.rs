use super::*;
use crate::cli::DEFAULT_N;
use crate::plan::arg_error::ArgError;
use crate::plan::bisect_plan::{bisect_words, ConfigBisectPlan};

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

#[test]
fn run_and_step_take_the_users_kernel_and_config_does_not() {
    use crate::artifacts::own_kernel::ConfigForm;
    use crate::cli::BisectCmd;
    let p = bisect_words;
    let Ok(BisectCmd::Run(r)) = p(&[
        "run",
        "--kernel-tree",
        "t",
        "--good",
        "v1",
        "--bad",
        "v2",
        "--kernel-config",
        "fc.config",
    ]) else {
        panic!("run does not parse")
    };
    let r = BisectRunPlan::from_cli(&r).unwrap();
    let k = r.own_kernel.unwrap();
    assert_eq!(
        (k.config, k.form),
        (PathBuf::from("fc.config"), ConfigForm::Full)
    );
    let Ok(BisectCmd::Step(s)) = p(&[
        "step",
        "--baseline",
        "b",
        "--dir",
        "d",
        "--kernel-fragment",
        "f",
    ]) else {
        panic!("step does not parse")
    };
    let s = BisectStepPlan::from_cli(&s).unwrap();
    assert_eq!(s.own_kernel.map(|k| k.form), Some(ConfigForm::Fragment));
    assert!(p(&[
        "step",
        "--baseline",
        "b",
        "--dir",
        "d",
        "--kernel-config",
        "a",
        "--kernel-fragment",
        "b"
    ])
    .is_err());
    // A config bisect's good and bad configs are the user's already.
    assert!(p(&[
        "config",
        "--good",
        "a",
        "--bad",
        "b",
        "--kernel-config",
        "c"
    ])
    .is_err());
}

/// A bisect record for the tests below.
fn record(kernel: Option<UserKernel>) -> BisectFile {
    BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: HostKind::NestedEmulated,
        clock: HostKind::NestedEmulated.clock(),
        contract: ContractKind::Linux,
        vcpus: 1,
        mem_bytes: 1 << 30,
        judge: truecold_proof::bisect::JudgeOptions::with_min_samples(3),
        n: 3,
        max_n: 12,
        source: "t".into(),
        good: "g".into(),
        bad: "b".into(),
        steps: Vec::new(),
        result: None,
        wall_seconds: None,
        commands: Vec::new(),
        kernel,
    }
}

/// Every commit is built from the user's config (build.sh `config` on the tree), into a
/// directory of its own per commit; a commit whose resolved config lost a requirement is a
/// build to skip, not an error; a step's config other than the record's is refused.
#[test]
fn each_commit_is_built_from_the_users_config() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("linux");
    std::fs::create_dir(&tree).unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&tree)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(tree.join("Makefile"), "all:\n").unwrap();
    git(&["add", "Makefile"]);
    git(&["commit", "-q", "-m", "x"]);
    let guest = d.path().join("guest");
    std::fs::create_dir(&guest).unwrap();
    for f in ["vmlinux", "initramfs.cpio", "init", "config"] {
        std::fs::write(guest.join(f), f).unwrap();
    }
    let base = guest_files::linux_guest(&guest).unwrap();
    // build.sh config with the tree: the "resolved" config is the start config, less
    // CONFIG_PVH when the tree's marker file says this commit dropped it.
    let script = d.path().join("build.sh");
    std::fs::write(
        &script,
        "set -e\n[ \"$1\" = config ]\n[ -n \"$TRUECOLD_KERNEL_TREE\" ]\nmkdir -p \"$2\"\n\
         if [ -f \"$TRUECOLD_KERNEL_TREE/drop-pvh\" ]; then grep -v CONFIG_PVH \"$3\" > \"$2/config\"; \
         else cp \"$3\" \"$2/config\"; fi\necho k > \"$2/vmlinux\"; echo bz > \"$2/bzImage\"\n",
    )
    .unwrap();
    let j = JudgePlan::from_cli(&crate::cli::JudgeArgs {
        n: 3,
        max_n: None,
        threshold_pct: 2.0,
        alpha: 0.01,
        clock: truecold_proof::schema::Figure::Total,
        paths: crate::cli::KernelPaths {
            vmm: None,
            guest_dir: Some(guest.clone()),
            kernel_dir: Some(d.path().join("kernels")),
            kernel_build: Some(script.clone()),
        },
    })
    .unwrap();
    let dir = d.path().join("bisect");
    std::fs::create_dir(&dir).unwrap();
    let user: String = crate::artifacts::own_kernel::REQUIREMENTS
        .iter()
        .map(|r| format!("{}=y\n", r.symbol))
        .collect();
    let given = d.path().join("fc.config");
    std::fs::write(&given, &user).unwrap();
    let k = crate::artifacts::own_kernel::OwnKernel {
        config: given.clone(),
        form: crate::artifacts::own_kernel::ConfigForm::Full,
        source: None,
    };
    let mut f = record(Some(own_kernel_record(&k, &dir).unwrap()));
    assert_eq!(
        std::fs::read_to_string(dir.join(USER_KERNEL_FILE)).unwrap(),
        user
    );
    let a = commit_kernel(&f, &dir, &tree, "aaaa", &j, &base).unwrap();
    assert!(a.starts_with(d.path().join("kernels/commit-aaaa")), "{a:?}");
    assert_eq!(std::fs::read_to_string(a.join("config")).unwrap(), user);
    carried_into(&mut f, &dir, &a.join("config")).unwrap();
    assert!(f.kernel.as_ref().unwrap().not_carried.is_empty());
    // A step finds the good side's kernel in its commit's directory (by the vmlinux digest
    // its baseline recorded), whatever path the baseline's result names (L1's, nested).
    assert_eq!(
        good_dir_of(&a, &j),
        a,
        "the good kernel is found under commit-aaaa/<key>/"
    );
    // Another commit, another directory; one whose Kconfig drops PVH is skipped.
    std::fs::write(tree.join("drop-pvh"), "").unwrap();
    match commit_kernel(&f, &dir, &tree, "bbbb", &j, &base) {
        Err(BisectRunError::CommitBuild(why)) => assert!(why.contains("CONFIG_PVH"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A step on this directory with another config, or with none recorded, is refused.
    std::fs::write(&given, format!("{user}CONFIG_HZ_100=y\n")).unwrap();
    assert!(matches!(
        same_kernel(&f, &dir, &k),
        Err(BisectRunError::OtherKernel { .. })
    ));
    assert!(matches!(
        same_kernel(&record(None), &dir, &k),
        Err(BisectRunError::OtherKernel { .. })
    ));
    std::fs::write(&given, &user).unwrap();
    same_kernel(&f, &dir, &k).unwrap();
}

/// [`good_kernel`]'s search, on a guest directory's own vmlinux digest (what a baseline
/// records) and the path L1 gave it.
fn good_dir_of(built: &Path, j: &JudgePlan) -> PathBuf {
    let want = guest_files::sha256_file(&built.join("vmlinux")).unwrap();
    good_places(Some("aaaa"), Some("/guest/vmlinux"), &want, j).unwrap()
}
