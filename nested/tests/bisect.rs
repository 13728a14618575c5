//! `truecold bisect` end to end in the nested harness (virtual clock): a kernel tree with a
//! known regression (`scripts/bisect-fixture.sh`: `mdelay(30)` in a built-in initcall) and a
//! config with a known costly symbol (`CONFIG_FIND_BIT_BENCHMARK`: lib/find_bit_benchmark.c's
//! loops over two 320 Kibit bitmaps at init — compute-bound, so inflated on the virtual clock,
//! with interrupts on throughout, and local to one object, so each candidate of the search
//! rebuilds one file and relinks; `CONFIG_INIT_ON_FREE_DEFAULT_ON`, which this test used
//! before, recompiled everything that includes `linux/mm.h` per candidate, and
//! `CONFIG_CRC32_SELFTEST`, tried instead, stalled L1 with its interrupts-off timing loop,
//! docs/virtual-clock.md finding 6). Kernels are built by `kernel-config/build.sh`
//! (incremental, cached by commit / config in ${TRUECOLD_CACHE}); see docs/bisect.md for
//! what this costs.
//!
//! Prerequisites (the test fails, naming the command, when one is missing):
//! `scripts/build-artifacts.sh` — out/guest, out/l1 and the static binaries; the pinned kernel
//! source extracted by it; git.

#[path = "../../bench/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use truecold_nested::Layout;
use truecold_proof::bisect::{read_bisect, StepOutcome};

fn layout() -> Layout {
    let l = Layout::discover();
    if let Err(e) = l.check() {
        panic!("{e}");
    }
    l
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture() -> (PathBuf, BTreeMap<String, String>, std::fs::File) {
    common::bisect_fixture(&root())
}

/// `truecold bisect …` with the harness's binaries and the repository's build script.
fn bisect(l: &Layout, args: &[&str], kernels: &Path) -> (std::process::ExitStatus, String) {
    let out = Command::new(&l.bench)
        .arg("bisect")
        .args(args)
        .arg("--vmm")
        .arg(&l.vmm)
        .arg("--guest-dir")
        .arg(&l.guest_dir)
        .arg("--kernel-dir")
        .arg(kernels)
        .arg("--kernel-build")
        .arg(root().join("kernel-config/build.sh"))
        .env("CI", "true")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

#[test]
fn bisect_run_names_the_commit_that_adds_the_delay_and_step_skips_what_it_cannot_judge() {
    let l = layout();
    let (tree, ids, _held) = fixture();
    let head = |t: &Path| common::git_head(t);
    let before = head(&tree);
    let d = tempfile::tempdir().unwrap();
    let kernels = d.path().join("kernels");
    let out = d.path().join("bisect");
    let (status, text) = bisect(
        &l,
        &[
            "run",
            "--nested",
            "--kernel-tree",
            tree.to_str().unwrap(),
            "--good",
            &ids["good"],
            "--bad",
            &ids["bad"],
            "-n",
            "7",
            "--out",
            out.to_str().unwrap(),
        ],
        &kernels,
    );
    assert_eq!(status.code(), Some(0), "{text}");
    assert_eq!(head(&tree), before, "the tree was not left as found");
    common::sha256sum_check(&out);
    let v = truecold_proof::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 30));
    let f = read_bisect(&out).unwrap();
    let r = f.result.as_ref().unwrap();
    assert_eq!(
        r.first_bad.as_deref(),
        Some(ids["regression"].as_str()),
        "{text}"
    );
    assert_eq!(f.clock, truecold_proto::kinds::Clock::Virtual);
    // git bisect ran the step and read both answers from it.
    // Schema 2: every measured step a look of an interleaved A/B against the good kernel,
    // both arms in its directory.
    assert_eq!(f.schema, truecold_proof::bisect::BISECT_SCHEMA);
    for st in f.steps.iter().filter(|s| s.outcome.measured()) {
        let dir = out.join(st.dir.as_deref().unwrap());
        assert!(st.look.is_some(), "{st:?}");
        for arm in ["good", "candidate"] {
            assert!(
                dir.join(arm).join("result.json").is_file(),
                "{}",
                dir.display()
            );
        }
    }
    let outcomes: Vec<StepOutcome> = f.steps.iter().map(|s| s.outcome).collect();
    assert!(outcomes.contains(&StepOutcome::Regression), "{outcomes:?}");
    assert!(
        outcomes.contains(&StepOutcome::NoRegression),
        "{outcomes:?}"
    );
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(readme.contains("clock: virtual"), "{readme}");
    assert!(readme.contains(&ids["regression"][..12]), "{readme}");
    // Which function took the time: the culprit's differential profile against its parent
    // (the default --profile, 3 RIP-sampled attribution launches a side, flat on the base
    // kernel) names one function above the noise, the one that spins in mdelay, with about
    // 30 ms of the boot.
    let p = r
        .profile
        .as_ref()
        .expect("the culprit's profile is attached");
    assert_eq!(p.attribution, 3);
    assert!(readme.contains("profile/differential.md"), "{readme}");
    let diff = truecold_proof::attribution::differential_of_dirs(
        &out.join("profile/parent"),
        &out.join("profile/culprit"),
    )
    .expect("both sides sampled");
    let table = diff.markdown("the mdelay commit against its parent");
    let above: Vec<_> = diff.above_noise().collect();
    assert_eq!(above.len(), 1, "{table}");
    assert!(above[0].name.contains("delay"), "{table}");
    assert!(
        (25_000_000..=35_000_000).contains(&above[0].delta_ns),
        "{table}"
    );

    // The step's skips, against the same baseline: a commit that does not build (125, no
    // campaign) and one that never reaches strict-ready (125, its failures are the evidence).
    let baseline = out.join("baseline");
    for (branch, why) in [
        ("broken-build", "the kernel did not build"),
        ("broken-boot", "breaks strict-ready"),
    ] {
        let st = Command::new("git")
            .arg("-C")
            .arg(&tree)
            .args(["checkout", "-q", branch])
            .status()
            .unwrap();
        assert!(st.success());
        let dir = d.path().join(branch);
        let (status, text) = bisect(
            &l,
            &[
                "step",
                "--baseline",
                baseline.to_str().unwrap(),
                "--kernel-tree",
                tree.to_str().unwrap(),
                "--dir",
                dir.to_str().unwrap(),
                "-n",
                "3",
            ],
            &kernels,
        );
        Command::new("git")
            .arg("-C")
            .arg(&tree)
            .args(["checkout", "-q", &before])
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(125), "{branch}: {text}");
        let f = read_bisect(&dir).unwrap();
        assert_eq!(f.steps.len(), 1, "{branch}");
        assert!(f.steps[0].why.contains(why), "{branch}: {}", f.steps[0].why);
        let v = truecold_proof::verify_dir(&dir);
        assert!(v.is_valid(), "{branch}: {}", v.render(&dir, 30));
    }
    // A baseline that is not a bundle: the step cannot judge, and stops `git bisect run`.
    let (status, text) = bisect(
        &l,
        &[
            "step",
            "--baseline",
            d.path().to_str().unwrap(),
            "--kernel-tree",
            tree.to_str().unwrap(),
            "--dir",
            d.path().join("nothing").to_str().unwrap(),
        ],
        &kernels,
    );
    assert_eq!(status.code(), Some(200), "{text}");
}

#[test]
fn bisect_config_names_the_costly_symbol() {
    let l = layout();
    let d = tempfile::tempdir().unwrap();
    // Good: the guest's config with the runtime-testing menu (a menu: it builds nothing by
    // itself). Bad: three more symbols, each local to a few objects, one of them costly;
    // FHANDLE selects EXPORTFS, so the resolved configs differ in four assignments.
    let good = d.path().join("good.config");
    let bad = d.path().join("bad.config");
    let mut text = std::fs::read_to_string(l.guest_dir.join("config")).unwrap();
    text.push_str("CONFIG_RUNTIME_TESTING_MENU=y\n");
    std::fs::write(&good, &text).unwrap();
    for s in [
        "CONFIG_IKCONFIG=y",
        "CONFIG_FHANDLE=y",
        "CONFIG_FIND_BIT_BENCHMARK=y",
    ] {
        text.push_str(s);
        text.push('\n');
    }
    std::fs::write(&bad, text).unwrap();
    let out = d.path().join("bisect");
    let (status, text) = bisect(
        &l,
        &[
            "config",
            "--nested",
            "--good",
            good.to_str().unwrap(),
            "--bad",
            bad.to_str().unwrap(),
            "-n",
            "7",
            "--mem-mib",
            "256",
            "--out",
            out.to_str().unwrap(),
        ],
        &d.path().join("kernels"),
    );
    assert_eq!(status.code(), Some(0), "{text}");
    common::sha256sum_check(&out);
    let v = truecold_proof::verify_dir(&out);
    assert!(v.is_valid(), "{}", v.render(&out, 30));
    let f = read_bisect(&out).unwrap();
    let r = f.result.as_ref().unwrap();
    assert_eq!(r.culprits, ["CONFIG_FIND_BIT_BENCHMARK=y"], "{text}");
    // The culprit's step and its effect are recorded.
    let bad = r.bad_step.map(|i| &f.steps[i]).expect("the culprit's step");
    assert_eq!(bad.symbols, r.culprits, "{text}");
    assert!(bad.dir.is_some(), "{text}");
    assert_eq!(r.effects.len(), 1, "{text}");
    let readme = std::fs::read_to_string(out.join("README.md")).unwrap();
    assert!(
        readme.contains("culprit symbols: `CONFIG_FIND_BIT_BENCHMARK=y`"),
        "{readme}"
    );
}
