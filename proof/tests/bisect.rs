//! The bisect directory: a step's judgement (compare's rule, contract broken first), the
//! directory written and verified, and every way a changed directory is caught.
mod common;

use common::*;
use std::path::Path;
use truecold_proof::bisect::{
    judge, read_bisect, write_bisect, BisectFile, BisectKind, BisectResult, JudgeOptions, Step,
    StepOutcome, BASELINE_DIR, BISECT_FILE, BISECT_SCHEMA,
};
use truecold_proof::schema::{Clock, ContractKind, HostKind};
use truecold_proof::verify_dir;

fn fixture(median_ns: f64, seed: u64, fail_every: Option<u64>) -> Fixture {
    Fixture {
        median_ns,
        seed,
        fail_every,
        sigma: 0.02,
        ..Fixture::linux(20)
    }
}

fn opts() -> JudgeOptions {
    JudgeOptions::with_min_samples(10)
}

#[test]
fn a_step_is_judged_by_compares_rule_and_a_broken_contract_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    let good = fixture(30e6, 1, None).write(d.path(), "good");
    let same = fixture(30e6, 2, None).write(d.path(), "same");
    let slow = fixture(36e6, 3, None).write(d.path(), "slow");
    let broken = fixture(30e6, 4, Some(5)).write(d.path(), "broken");
    let j = judge(&good, &slow, &opts()).unwrap();
    assert_eq!(j.outcome, StepOutcome::Regression, "{j:?}");
    assert_eq!(j.outcome.exit_code(), 1);
    assert!(j.delta_pct.unwrap() > 10.0, "{j:?}");
    let j = judge(&good, &same, &opts()).unwrap();
    assert_eq!(j.outcome, StepOutcome::NoRegression, "{j:?}");
    assert_eq!(j.outcome.exit_code(), 0);
    // Faster is good too.
    assert_eq!(
        judge(&slow, &good, &opts()).unwrap().outcome,
        StepOutcome::NoRegression
    );
    let j = judge(&good, &broken, &opts()).unwrap();
    assert_eq!(j.outcome, StepOutcome::ContractBroken, "{j:?}");
    assert!(j.why.starts_with("breaks strict-ready: "), "{}", j.why);
    assert_eq!(j.outcome.exit_code(), 125);
    // Too few launches for the rule: inconclusive, skip.
    let j = judge(&good, &slow, &JudgeOptions::with_min_samples(50)).unwrap();
    assert_eq!(j.outcome, StepOutcome::Inconclusive, "{j:?}");
    assert_eq!(j.outcome.exit_code(), 125);
    // A side that is not a valid bundle is an error, not a verdict.
    std::fs::write(slow.join("samples.csv"), "garbage\n").unwrap();
    assert!(judge(&good, &slow, &opts()).is_err());
    // Different clocks are never judged.
    let mut v = fixture(30e6, 5, None);
    v.host = HostKind::NestedEmulated;
    let virt = v.write(d.path(), "virtual");
    assert!(judge(&good, &virt, &opts()).is_err());
}

fn step(dir: &Path, rel: &str, commit: &str, o: &JudgeOptions) -> Step {
    let j = judge(&dir.join(BASELINE_DIR), &dir.join(rel), o).unwrap();
    Step {
        dir: Some(rel.into()),
        commit: Some(commit.into()),
        subject: Some(format!("subject of {commit}")),
        symbols: Vec::new(),
        config_sha256: None,
        planned: 20,
        outcome: j.outcome,
        why: j.why.clone(),
        judgement: Some(j),
        wall_seconds: 7,
    }
}

/// A finished commit bisect: baseline, a good step, a bad step, a build failure.
fn bisect_dir(root: &Path) -> std::path::PathBuf {
    bisect_dir_on(root, HostKind::Hardware)
}

/// [`bisect_dir`] on `host` (hardware: the wall clock; nested-emulated: the virtual clock).
fn bisect_dir_on(root: &Path, host: HostKind) -> std::path::PathBuf {
    let dir = root.join("bisect");
    std::fs::create_dir_all(dir.join("steps")).unwrap();
    let on = |mut f: Fixture| {
        f.host = host;
        f
    };
    on(fixture(30e6, 1, None)).write(&dir, BASELINE_DIR);
    on(fixture(30e6, 2, None)).write(&dir.join("steps"), "01-aaaa-n20");
    on(fixture(36e6, 3, None)).write(&dir.join("steps"), "02-bbbb-n20");
    let o = opts();
    let steps = vec![
        step(&dir, "steps/01-aaaa-n20", "aaaa", &o),
        step(&dir, "steps/02-bbbb-n20", "bbbb", &o),
        Step {
            dir: None,
            commit: Some("cccc".into()),
            subject: Some("does not build".into()),
            symbols: Vec::new(),
            config_sha256: None,
            planned: 0,
            outcome: StepOutcome::BuildFailed,
            judgement: None,
            why: "the kernel did not build: error".into(),
            wall_seconds: 3,
        },
    ];
    assert_eq!(steps[0].outcome, StepOutcome::NoRegression);
    assert_eq!(steps[1].outcome, StepOutcome::Regression);
    let f = BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: host,
        clock: if host == HostKind::NestedEmulated {
            Clock::Virtual
        } else {
            Clock::Wall
        },
        contract: ContractKind::Linux,
        vcpus: 2,
        mem_bytes: 16384 << 20,
        judge: o,
        n: 20,
        max_n: 80,
        source: "/src/linux".into(),
        good: "aaaa~1".into(),
        bad: "dddd".into(),
        steps,
        result: Some(BisectResult {
            first_bad: Some("bbbb".into()),
            last_good: Some("aaaa".into()),
            culprits: Vec::new(),
            bad_step: Some(1),
            good_step: Some(0),
            effects: Vec::new(),
            summary: "First bad commit: `bbbb`.".into(),
        }),
        wall_seconds: Some(100),
        commands: vec![
            "truecold bisect run --kernel-tree /src/linux --good aaaa~1 --bad dddd".into(),
        ],
    };
    let v = write_bisect(&dir, &f, "git bisect log here\n").unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    dir
}

#[test]
fn a_bisect_directory_verifies_and_its_readme_states_host_clock_contract_and_result() {
    let d = tempfile::tempdir().unwrap();
    let dir = bisect_dir(d.path());
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for want in [
        "host kind: `hardware`",
        "clock: wall",
        "Linux boot: request to strict-ready",
        "first bad commit: `bbbb`",
        "last good commit: `aaaa`",
        "skip (build failed)",
        "bad (regressed)",
        "good (no regression)",
    ] {
        assert!(readme.contains(want), "{want}\n{readme}");
    }
    assert_eq!(read_bisect(&dir).unwrap().steps.len(), 3);
    // sha256sum -c --strict reads the top SHA256SUMS (every file, four levels).
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert!(sums.contains("  steps/02-bbbb-n20/samples.csv\n"), "{sums}");
    assert!(sums.contains("  baseline/result.json\n"), "{sums}");
}

fn reasons(dir: &Path) -> String {
    let v = verify_dir(dir);
    assert!(!v.is_valid(), "a change went unnoticed");
    v.render(dir, 20)
}

/// Rewrites bisect.json with `edit` applied (canonical bytes) and re-sums, so only the
/// semantic checks can catch it.
fn edit_record(dir: &Path, edit: impl FnOnce(&mut BisectFile)) {
    let mut f = read_bisect(dir).unwrap();
    edit(&mut f);
    write_bisect(
        dir,
        &f,
        &std::fs::read_to_string(dir.join("log.txt")).unwrap(),
    )
    .unwrap();
}

#[test]
fn every_change_to_a_bisect_directory_is_caught() {
    let d = tempfile::tempdir().unwrap();
    // A recorded verdict the rows do not give.
    let dir = bisect_dir(&d.path().join("a"));
    edit_record(&dir, |f| {
        f.steps[0].outcome = StepOutcome::Regression;
        f.steps[0].judgement.as_mut().unwrap().outcome = StepOutcome::Regression;
    });
    assert!(reasons(&dir).contains("recorded bad (regressed), the rows give good"));
    // A result pointing at a good step as the bad one.
    let dir = bisect_dir(&d.path().join("b"));
    edit_record(&dir, |f| f.result.as_mut().unwrap().bad_step = Some(0));
    assert!(reasons(&dir).contains("bad step is not bad"));
    // A first bad commit that is not the bad step's.
    let dir = bisect_dir(&d.path().join("c"));
    edit_record(&dir, |f| {
        f.result.as_mut().unwrap().first_bad = Some("aaaa".into())
    });
    assert!(reasons(&dir).contains("not the first bad commit's"));
    // A measured step without its directory.
    let dir = bisect_dir(&d.path().join("e"));
    edit_record(&dir, |f| f.steps[1].dir = None);
    assert!(reasons(&dir).contains("without its campaign directory"));
    // Another clock than the bundles'.
    let dir = bisect_dir(&d.path().join("f"));
    edit_record(&dir, |f| {
        f.clock = Clock::Virtual;
        f.host_kind = HostKind::NestedEmulated;
    });
    assert!(reasons(&dir).contains("another clock or host kind"));
    // A hand-edited README, a changed sample, a removed file, a non-canonical record.
    let dir = bisect_dir(&d.path().join("g"));
    std::fs::write(dir.join("README.md"), "# faster than ever\n").unwrap();
    let r = reasons(&dir);
    assert!(r.contains("README.md"), "{r}");
    let dir = bisect_dir(&d.path().join("h"));
    let csv = dir.join("steps/02-bbbb-n20/samples.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    std::fs::write(&csv, text.replacen(",1,", ",2,", 1)).unwrap();
    assert!(!verify_dir(&dir).is_valid());
    let dir = bisect_dir(&d.path().join("i"));
    std::fs::remove_file(dir.join("log.txt")).unwrap();
    assert!(reasons(&dir).contains("log.txt"));
    // A step pointing at another step's campaign: only a config candidate that resolves
    // like the earlier one may (bench: `bisect config`), never a commit.
    let dir = bisect_dir(&d.path().join("k"));
    edit_record(&dir, |f| f.steps[1].dir = f.steps[0].dir.clone());
    assert!(reasons(&dir).contains("reuses step 1's campaign"));
    let dir = bisect_dir(&d.path().join("j"));
    let b = std::fs::read_to_string(dir.join(BISECT_FILE)).unwrap();
    std::fs::write(dir.join(BISECT_FILE), b.replace("\n  ", "\n ")).unwrap();
    assert!(reasons(&dir).contains("canonical"));
}

/// A bisect on the virtual clock: every campaign of the record on one clock (its L0 QEMU, L1
/// kernel and L1 CPUs). A step measured on another L0 QEMU, another L1 kernel or with another
/// L1 CPU count is caught, and the reason names the step, the campaign it differs from and
/// what differs.
#[test]
fn a_step_on_another_virtual_clock_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let dir = bisect_dir_on(&d.path().join("ok"), HostKind::NestedEmulated);
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    for (i, (what, edit)) in other_virtual_clocks().into_iter().enumerate() {
        let dir = bisect_dir_on(&d.path().join(i.to_string()), HostKind::NestedEmulated);
        forge(&dir.join("steps/02-bbbb-n20"), |r, _| edit(r));
        edit_record(&dir, |_| {});
        let r = reasons(&dir);
        assert!(
            r.contains("steps/02-bbbb-n20: on another virtual clock than") && r.contains(what),
            "{what}: {r}"
        );
    }
}

/// The VMM recipe (`scripts/bisect-vmm-step.sh`, docs/bisect.md): `git bisect run` over a
/// history whose steps are judged by `truecold-proof compare` against a fixed baseline. Here
/// each commit of a scratch repository carries the bundle its step would have measured (the
/// third commit's is 20 % slower); git bisect must name the third commit from compare's exit
/// codes alone.
#[test]
fn git_bisect_run_with_compare_as_the_judge_names_the_slower_commit() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@localhost")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@localhost")
            .output()
            .unwrap();
        assert!(
            out.status.success() || args[0] == "bisect",
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q", "-b", "main"]);
    let baseline = fixture(30e6, 100, None).write(d.path(), "baseline");
    let mut commits = Vec::new();
    for i in 0..6u64 {
        let median = if i >= 3 { 36e6 } else { 30e6 };
        let _ = std::fs::remove_dir_all(repo.join("bundle"));
        fixture(median, 10 + i, None).write(&repo, "bundle");
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", &format!("commit {i}")]);
        commits.push(git(&["rev-parse", "HEAD"]).trim().to_string());
    }
    git(&["bisect", "start", &commits[5], &commits[0]]);
    let out = git(&[
        "bisect",
        "run",
        env!("CARGO_BIN_EXE_truecold-proof"),
        "compare",
        baseline.to_str().unwrap(),
        "bundle",
    ]);
    assert!(
        out.contains(&format!("{} is the first bad commit", commits[3])),
        "{out}"
    );
    git(&["bisect", "reset", "-q"]);
}

/// A step's figures are floats (Δ %, p); `bisect.json` must read back to the same bits, or
/// the verifier's canonical-form and recomputation checks fail on an honest directory. (They
/// did, once in a nested run, before serde_json's `float_roundtrip` parser was enabled.)
#[test]
fn a_judgement_reads_back_to_the_same_bits() {
    let mut rng = Rng(0xb15ec7);
    for _ in 0..200_000 {
        let x = f64::from_bits(rng.next() >> 2) * 1e-300 + rng.unit() * 1000.0;
        let j = truecold_proof::bisect::Judgement {
            outcome: StepOutcome::Regression,
            n: 6,
            good_p50_ns: Some(1),
            p50_ns: Some(2),
            delta_pct: Some(x),
            ci95_ns: Some((-1, 1)),
            p_value: Some(rng.unit()),
            why: String::new(),
        };
        let text = serde_json::to_string(&j).unwrap();
        let back: truecold_proof::bisect::Judgement = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j, "{text}");
    }
}
