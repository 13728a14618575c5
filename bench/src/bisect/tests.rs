use super::*;
use crate::cli::{Cli, Cmd};
use clap::Parser;

#[test]
fn the_cli_takes_the_three_subcommands_and_checks_sizes() {
    let p = |v: &[&str]| Cli::try_parse_from(v).map(|c| c.cmd);
    let Ok(Cmd::Bisect(b)) = p(&[
        "truecold",
        "bisect",
        "step",
        "--baseline",
        "b",
        "--dir",
        "d",
        "-n",
        "4",
    ]) else {
        panic!("step does not parse")
    };
    let BisectCmd::Step(s) = b.cmd else {
        panic!("not step")
    };
    assert_eq!(s.kernel_tree, PathBuf::from("."));
    assert_eq!(s.judge.sizes().unwrap(), (4, 16));
    let o = s.judge.options();
    assert_eq!((o.min_samples, o.threshold_pct, o.alpha), (4, 2.0, 0.01));
    assert!(p(&["truecold", "bisect", "step", "--dir", "d"]).is_err());
    let Ok(Cmd::Bisect(b)) = p(&[
        "truecold",
        "bisect",
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
    let BisectCmd::Run(r) = b.cmd else {
        panic!("not run")
    };
    assert!(r.context.nested);
    assert_eq!(
        (r.context.guest.vcpus.get(), r.context.guest.mem.mib()),
        (1, 1024)
    );
    assert!(matches!(
        r.judge.sizes(),
        Err(BisectRunError::Sizes { n: 6, max_n: 3 })
    ));
    assert!(p(&["truecold", "bisect", "config", "--good", "a", "--bad", "b", "-n", "2"]).is_ok());
    let flags = r.judge.step_flags().join(" ");
    assert!(
        flags.starts_with("-n 6 --threshold-pct 2 --alpha 0.01 --max-n 3"),
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
