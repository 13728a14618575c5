//! The bisect directory: a step's judgement (compare's rule, contract broken first), the
//! directory written and verified, and every way a changed directory is caught.
mod common;

use common::*;
use std::path::Path;
use truecold_proof::bisect::{
    judge, read_bisect, write_bisect, BisectFile, BisectKind, BisectResult, JudgeOptions, Step,
    StepOutcome, BASELINE_DIR, BISECT_SCHEMA_V1,
};
use truecold_proof::names::BISECT_FILE;
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
        look: None,
        outcome: j.outcome,
        why: j.why.clone(),
        judgement: Some(j),
        wall_seconds: 7,
    }
}

/// A finished schema-1 commit bisect (each step one campaign judged against the baseline
/// at the full α, as the committed one under results/ is): baseline, a good step, a bad
/// step, a build failure. Schema 2: [`ab_bisect_dir`].
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
            look: None,
            outcome: StepOutcome::BuildFailed,
            judgement: None,
            why: "the kernel did not build: error".into(),
            wall_seconds: 3,
        },
    ];
    assert_eq!(steps[0].outcome, StepOutcome::NoRegression);
    assert_eq!(steps[1].outcome, StepOutcome::Regression);
    let f = BisectFile {
        schema: BISECT_SCHEMA_V1,
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
            profile: None,
        }),
        wall_seconds: Some(100),
        commands: vec![
            "truecold bisect run --kernel-tree /src/linux --good aaaa~1 --bad dddd".into(),
        ],
        kernel: None,
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
            alpha: None,
        };
        let text = serde_json::to_string(&j).unwrap();
        let back: truecold_proof::bisect::Judgement = serde_json::from_str(&text).unwrap();
        assert_eq!(back, j, "{text}");
    }
}

// Schema 2: every step an interleaved A/B (arms `good`, `candidate`) and the looks' rule.

use truecold_proof::arms::{parse_arms, write_arms, ArmRef, ArmsPlan};
use truecold_proof::bisect::{judge_look, Looks, BISECT_SCHEMA, CANDIDATE_ARM, GOOD_ARM};
use truecold_proof::names::ARMS_FILE;
use truecold_proof::schema::Sample;

/// One A/B look: `rounds` rounds, each launching both arms in a seeded order, one at a
/// time; the good arm's rows around `good_ns`, the candidate's around `cand_ns` (log-sd
/// `sigma`); `good_kernel`: another vmlinux for the good arm than the baseline's.
struct Ab {
    good_ns: f64,
    cand_ns: f64,
    sigma: f64,
    rounds: u64,
    seed: u64,
    host: HostKind,
    good_kernel: Option<&'static [u8]>,
}

impl Ab {
    fn new(good_ns: f64, cand_ns: f64, rounds: u64, seed: u64) -> Self {
        Ab {
            good_ns,
            cand_ns,
            sigma: 0.02,
            rounds,
            seed,
            host: HostKind::Hardware,
            good_kernel: None,
        }
    }

    fn write(&self, parent: &Path, name: &str) -> std::path::PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mk = |median_ns, seed| Fixture {
            median_ns,
            seed,
            fail_every: None,
            sigma: self.sigma,
            host: self.host,
            ..Fixture::linux(self.rounds)
        };
        let fx = [
            mk(self.good_ns, self.seed),
            mk(self.cand_ns, self.seed + 1000),
        ];
        let names = [GOOD_ARM, CANDIDATE_ARM];
        let mut rng = Rng(self.seed ^ 0x0bde);
        let mut order = Vec::new();
        for r in 0..self.rounds {
            let mut ns = names;
            if rng.next() % 2 == 1 {
                ns.swap(0, 1);
            }
            order.extend(ns.iter().map(|n| (r, n.to_string())));
        }
        let mut rngs = [Rng(fx[0].seed), Rng(fx[1].seed)];
        let mut rows: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
        let mut t = START;
        for (_, n) in &order {
            let k = usize::from(n == CANDIDATE_ARM);
            let s = fx[k].sample(rows[k].len() as u64, &mut rngs[k], t);
            t = last_stamp(&s) + GAP;
            rows[k].push(s);
        }
        let wall = wall_ns(&rows.concat());
        for k in 0..2 {
            let mut r = fx[k].result(&rows[k]);
            r.environment.harness.wall_ns = wall;
            r.contract.interleaved = true;
            if let (0, Some(b)) = (k, self.good_kernel) {
                r.artifacts
                    .insert("vmlinux".into(), truecold_proof::digest::sha256_hex(b));
            }
            let dest = dir.join(names[k]);
            let w = truecold_proof::write_bundle(&dest, &r, &rows[k], &fx[k].inputs_for(&rows[k]))
                .unwrap();
            assert!(w.verdict.is_valid(), "{}", w.verdict.render(&dest, 50));
        }
        let plan = ArmsPlan {
            seed: self.seed,
            rounds: self.rounds,
            arms: names.iter().map(|n| ArmRef::tune(*n, Vec::new())).collect(),
            order,
        };
        let v = write_arms(&dir, &plan).unwrap();
        assert!(v.is_valid(), "{}", v.render(&dir, 50));
        dir
    }
}

const N2: u64 = 7;
const MAX_N2: u64 = 28;

fn opts2() -> JudgeOptions {
    JudgeOptions::with_min_samples(N2 as usize)
}

/// A schema-2 step of `commit`: look `look` of the A/B at `rel`, judged by the looks' rule.
fn look_step(dir: &Path, rel: &str, commit: &str, look: u32) -> Step {
    let looks = Looks::new(N2, MAX_N2);
    let (g, c) = truecold_proof::bisect::ab_sides(&dir.join(rel));
    let j = judge_look(&g, &c, &opts2(), &looks).unwrap();
    Step {
        dir: Some(rel.into()),
        commit: Some(commit.into()),
        subject: Some(format!("subject of {commit}")),
        symbols: Vec::new(),
        config_sha256: None,
        planned: looks.size(look).unwrap(),
        look: Some(look),
        outcome: j.outcome,
        why: j.why.clone(),
        judgement: Some(j),
        wall_seconds: 7,
    }
}

/// A finished schema-2 commit bisect: the baseline; `aaaa` inconclusive at look 1 (rows too
/// spread for the interval), good at look 2; `bbbb` bad at look 1; `cccc` does not build.
fn ab_bisect_dir(root: &Path) -> std::path::PathBuf {
    let dir = root.join("bisect");
    std::fs::create_dir_all(dir.join("steps")).unwrap();
    fixture(30e6, 1, None).write(&dir, BASELINE_DIR);
    let steps = dir.join("steps");
    Ab {
        sigma: 0.3,
        ..Ab::new(30e6, 30e6, N2, 2)
    }
    .write(&steps, "01-aaaa-n7");
    Ab::new(30e6, 30e6, 2 * N2, 3).write(&steps, "02-aaaa-n14");
    Ab::new(30e6, 36e6, N2, 4).write(&steps, "03-bbbb-n7");
    let steps = vec![
        look_step(&dir, "steps/01-aaaa-n7", "aaaa", 1),
        look_step(&dir, "steps/02-aaaa-n14", "aaaa", 2),
        look_step(&dir, "steps/03-bbbb-n7", "bbbb", 1),
        Step {
            dir: None,
            commit: Some("cccc".into()),
            subject: Some("does not build".into()),
            symbols: Vec::new(),
            config_sha256: None,
            planned: 0,
            look: None,
            outcome: StepOutcome::BuildFailed,
            judgement: None,
            why: "the kernel did not build: error".into(),
            wall_seconds: 3,
        },
    ];
    let outcomes: Vec<StepOutcome> = steps.iter().map(|s| s.outcome).collect();
    assert_eq!(
        outcomes,
        [
            StepOutcome::Inconclusive,
            StepOutcome::NoRegression,
            StepOutcome::Regression,
            StepOutcome::BuildFailed
        ]
    );
    let f = BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: HostKind::Hardware,
        clock: Clock::Wall,
        contract: ContractKind::Linux,
        vcpus: 2,
        mem_bytes: 16384 << 20,
        judge: opts2(),
        n: N2,
        max_n: MAX_N2,
        source: "/src/linux".into(),
        good: "aaaa~1".into(),
        bad: "dddd".into(),
        steps,
        result: Some(BisectResult {
            first_bad: Some("bbbb".into()),
            last_good: Some("aaaa".into()),
            culprits: Vec::new(),
            bad_step: Some(2),
            good_step: Some(1),
            effects: Vec::new(),
            summary: "First bad commit: `bbbb`.".into(),
            profile: None,
        }),
        wall_seconds: Some(100),
        commands: vec!["truecold bisect run --kernel-tree /src/linux".into()],
        kernel: None,
    };
    let v = write_bisect(&dir, &f, "git bisect log here\n").unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    dir
}

#[test]
fn a_schema_2_bisect_directory_records_both_arms_and_every_look() {
    let d = tempfile::tempdir().unwrap();
    let dir = ab_bisect_dir(d.path());
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for want in [
        "extension rule: every look an interleaved A/B",
        "up to 3 look(s) of 7, 14, 28 launches a side",
        "each look at p < 3.33e-3",
        "14 a side (look 2/3, p < 3.33e-3)",
        "first bad commit: `bbbb`",
    ] {
        assert!(readme.contains(want), "{want}\n{readme}");
    }
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    for arm in [GOOD_ARM, CANDIDATE_ARM] {
        assert!(
            sums.contains(&format!("  steps/03-bbbb-n7/{arm}/samples.csv\n")),
            "{sums}"
        );
    }
    let f = read_bisect(&dir).unwrap();
    let alpha = f.steps[0].judgement.as_ref().unwrap().alpha.unwrap();
    assert_eq!(alpha, 0.01 / 3.0);
}

/// The rule the verifier recomputes is α/K at each look, not the full α: an A/B whose
/// Mann–Whitney p lies between 0.01/3 and 0.01 is bad at the full α (a schema-1 look) and
/// inconclusive under the looks' rule; a record calling it bad is caught.
#[test]
fn a_verdict_at_the_uncorrected_alpha_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let looks = Looks::new(N2, MAX_N2);
    let mut found = None;
    for seed in 0..200 {
        let ab = Ab {
            sigma: 0.03,
            ..Ab::new(30e6, 31.5e6, N2, 100 + seed)
        }
        .write(d.path(), &format!("ab{seed}"));
        let (g, c) = truecold_proof::bisect::ab_sides(&ab);
        let full = judge(&g, &c, &opts2()).unwrap();
        let rule = judge_look(&g, &c, &opts2(), &looks).unwrap();
        if full.outcome == StepOutcome::Regression && rule.outcome != StepOutcome::Regression {
            let p = rule.p_value.unwrap();
            assert!((0.01 / 3.0..0.01).contains(&p), "{p}");
            found = Some((seed, full));
            break;
        }
        std::fs::remove_dir_all(&ab).unwrap();
    }
    let (seed, full) = found.expect("an A/B with p between α/K and α in 200 seeds");
    let dir = ab_bisect_dir(&d.path().join("x"));
    Ab {
        sigma: 0.03,
        ..Ab::new(30e6, 31.5e6, N2, 100 + seed)
    }
    .write(&dir.join("steps"), "05-eeee-n7");
    edit_record(&dir, |f| {
        let mut st = look_step(&dir, "steps/05-eeee-n7", "eeee", 1);
        st.outcome = StepOutcome::Regression;
        st.judgement = Some(Judgement {
            alpha: Some(0.01 / 3.0),
            ..full
        });
        f.steps.push(st);
    });
    let r = reasons(&dir);
    assert!(
        r.contains("step 5: recorded bad (regressed), the rows give skip (inconclusive)"),
        "{r}"
    );
}

use truecold_proof::bisect::Judgement;

#[test]
fn every_change_to_a_schema_2_step_is_caught() {
    let d = tempfile::tempdir().unwrap();
    let at = |name: &str| ab_bisect_dir(&d.path().join(name));
    // A step with only one arm.
    let dir = at("one-arm");
    std::fs::remove_dir_all(dir.join("steps/03-bbbb-n7/candidate")).unwrap();
    edit_record(&dir, |_| {});
    let r = reasons(&dir);
    assert!(
        r.contains("`steps/03-bbbb-n7` has no arm `candidate`: a step is an A/B"),
        "{r}"
    );
    // A step that is one campaign (schema 1's layout) in a schema-2 record.
    let dir = at("bundle");
    std::fs::remove_dir_all(dir.join("steps/03-bbbb-n7")).unwrap();
    fixture(36e6, 3, None).write(&dir.join("steps"), "03-bbbb-n7");
    edit_record(&dir, |_| {});
    let r = reasons(&dir);
    assert!(r.contains("has no arm `good`"), "{r}");
    // An order that does not interleave: round 0 launches the good arm twice.
    let dir = at("order");
    let ab = dir.join("steps/03-bbbb-n7");
    let mut plan = parse_arms(&std::fs::read(ab.join(ARMS_FILE)).unwrap()).unwrap();
    plan.order[0].1 = GOOD_ARM.into();
    plan.order[1].1 = GOOD_ARM.into();
    std::fs::write(ab.join(ARMS_FILE), truecold_proof::arms::arms_bytes(&plan)).unwrap();
    resum_arms(&ab);
    edit_record(&dir, |_| {});
    let r = reasons(&dir);
    assert!(r.contains("does not interleave its arms"), "{r}");
    // The good arm boots another kernel than the baseline's.
    let dir = at("kernel");
    std::fs::remove_dir_all(dir.join("steps/03-bbbb-n7")).unwrap();
    Ab {
        good_kernel: Some(b"another vmlinux"),
        ..Ab::new(30e6, 36e6, N2, 4)
    }
    .write(&dir.join("steps"), "03-bbbb-n7");
    edit_record(&dir, |_| {});
    let r = reasons(&dir);
    assert!(r.contains("does not boot the baseline's kernel"), "{r}");
    // A verdict the rule does not give.
    let dir = at("verdict");
    edit_record(&dir, |f| {
        f.steps[2].outcome = StepOutcome::NoRegression;
        f.steps[2].judgement.as_mut().unwrap().outcome = StepOutcome::NoRegression;
    });
    assert!(reasons(&dir).contains("step 3: recorded good (no regression), the rows give bad"));
    // A judgement recorded at the full α (a schema-1 look) instead of α/K.
    let dir = at("alpha");
    edit_record(&dir, |f| {
        f.steps[2].judgement.as_mut().unwrap().alpha = None
    });
    assert!(reasons(&dir).contains("step 3: recorded bad (regressed), the rows give bad"));
    // Looks: a grown look without the inconclusive one before it; an inconclusive look
    // not followed by its next; a look beyond K; launches the look does not plan; a
    // measured step without its look; a look on a step without a campaign.
    let dir = at("skipped-look");
    edit_record(&dir, |f| {
        f.steps.remove(0);
        let r = f.result.as_mut().unwrap();
        r.bad_step = Some(1);
        r.good_step = Some(0);
    });
    assert!(reasons(&dir).contains("step 1: look 2 where the rule takes look 1"));
    let dir = at("no-next");
    edit_record(&dir, |f| {
        f.steps.remove(1);
        let r = f.result.as_mut().unwrap();
        r.bad_step = Some(1);
        r.good_step = None;
    });
    let r = reasons(&dir);
    assert!(
        r.contains(
            "step 2: step 1 was inconclusive at look 1 of 3, yet its look 2 does not follow"
        ),
        "{r}"
    );
    let dir = at("beyond");
    edit_record(&dir, |f| f.steps[2].look = Some(4));
    assert!(reasons(&dir).contains("step 3: look 4, the rule plans 3 look(s)"));
    let dir = at("size");
    edit_record(&dir, |f| f.steps[1].planned = 28);
    let r = reasons(&dir);
    assert!(
        r.contains("step 2: look 2 plans 14 launches a side, the step says 28"),
        "{r}"
    );
    let dir = at("no-look");
    edit_record(&dir, |f| f.steps[2].look = None);
    assert!(reasons(&dir).contains("step 3: a measured step without its look"));
    let dir = at("build-look");
    edit_record(&dir, |f| f.steps[3].look = Some(1));
    assert!(reasons(&dir).contains("step 4: a look without a campaign"));
}

/// The committed schema-1 layout still verifies by its own rule (each look at the full α,
/// steps against the baseline), and a schema-1 record is not read as a schema-2 one.
#[test]
fn schema_1_is_still_verified_by_its_own_rule() {
    let d = tempfile::tempdir().unwrap();
    let dir = bisect_dir(&d.path().join("v1"));
    assert!(verify_dir(&dir).is_valid());
    // Called schema 2, its steps (one campaign each) are not A/Bs.
    edit_record(&dir, |f| f.schema = BISECT_SCHEMA);
    assert!(reasons(&dir).contains("has no arm `good`"));
    let dir = bisect_dir(&d.path().join("v3"));
    edit_record(&dir, |f| f.schema = 3);
    assert!(reasons(&dir).contains("schema 3, this verifier reads 1 and 2"));
}

/// A schema-2 config bisect: the same looks' rule on candidates (a candidate inconclusive
/// at look 1 and good at look 2, a bad one at look 1, one resolving like it that repeats its
/// campaign and look); a repeat under another look is caught.
#[test]
fn a_schema_2_config_bisect_follows_the_same_rule() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cfg");
    let steps = dir.join("steps");
    std::fs::create_dir_all(&steps).unwrap();
    Ab {
        sigma: 0.3,
        ..Ab::new(30e6, 30e6, N2, 2)
    }
    .write(&steps, "01-cfg1-n7");
    Ab::new(30e6, 30e6, 2 * N2, 3).write(&steps, "02-cfg2-n14");
    Ab::new(30e6, 36e6, N2, 4).write(&steps, "03-cfg3-n7");
    let cfg = |rel: &str, syms: &[&str], look: u32, sha: &str| {
        let mut st = look_step(&dir, rel, "x", look);
        st.commit = None;
        st.subject = None;
        st.symbols = syms.iter().map(|s| s.to_string()).collect();
        st.config_sha256 = Some(sha.repeat(64));
        st
    };
    let mut again = cfg("steps/03-cfg3-n7", &["CONFIG_B=y"], 1, "b");
    again.symbols = vec!["CONFIG_B=y".into(), "CONFIG_X=y".into()];
    let f = BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Config,
        host_kind: HostKind::Hardware,
        clock: Clock::Wall,
        contract: ContractKind::Linux,
        vcpus: 2,
        mem_bytes: 16384 << 20,
        judge: opts2(),
        n: N2,
        max_n: MAX_N2,
        source: "the pinned source".into(),
        good: "good.config".into(),
        bad: "bad.config".into(),
        steps: vec![
            cfg("steps/01-cfg1-n7", &["CONFIG_A=y"], 1, "a"),
            cfg("steps/02-cfg2-n14", &["CONFIG_A=y"], 2, "a"),
            cfg("steps/03-cfg3-n7", &["CONFIG_B=y"], 1, "b"),
            again,
        ],
        result: Some(BisectResult {
            first_bad: None,
            last_good: None,
            culprits: vec!["CONFIG_B=y".into()],
            bad_step: Some(2),
            good_step: None,
            effects: vec![("CONFIG_B=y".into(), 2)],
            summary: "Culprit: `CONFIG_B=y`.".into(),
            profile: None,
        }),
        wall_seconds: Some(10),
        commands: Vec::new(),
        kernel: None,
    };
    let v = write_bisect(&dir, &f, "ddmin log\n").unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    edit_record(&dir, |f| f.steps[3].look = Some(2));
    assert!(reasons(&dir).contains("step 4: repeats a campaign under another look"));
}

/// A commit bisect over the user's kernel records it (`kernel`, the README's line) with the
/// file beside the record; each tampering is a `UserKernel` reason.
#[test]
fn a_bisect_over_the_users_kernel_records_it_and_tampering_is_caught() {
    use truecold_proof::bisect::{read_bisect, write_bisect};
    use truecold_proof::kconfig::{ConfigForm, UserKernel, USER_KERNEL_FILE};
    use truecold_proof::Check;
    let d = tempfile::tempdir().unwrap();
    let dir = bisect_dir(d.path());
    let user = b"CONFIG_64BIT=y\nCONFIG_PVH=y\nCONFIG_GONE=y\n";
    std::fs::write(dir.join(USER_KERNEL_FILE), user).unwrap();
    let mut f = read_bisect(&dir).unwrap();
    let log = std::fs::read_to_string(dir.join("log.txt")).unwrap();
    f.kernel = Some(UserKernel {
        form: ConfigForm::Full,
        sha256: truecold_proof::digest::sha256_hex(user),
        given_as: "fc.config".into(),
        source: None,
        not_carried: vec!["CONFIG_GONE: given y, gone".into()],
    });
    let v = write_bisect(&dir, &f, &log).unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme
            .contains("- kernel config: yours, `user-kernel.config` (`--kernel-config` fc.config"),
        "{readme}"
    );
    let reason = |v: &truecold_proof::Verdict, words: &str| {
        assert!(
            v.reasons
                .iter()
                .any(|r| r.check == Check::UserKernel && r.detail.contains(words)),
            "expected a UserKernel reason with `{words}`:\n{}",
            v.render(&dir, 20)
        );
    };
    // The file edited (the sums rewritten with it).
    std::fs::write(dir.join(USER_KERNEL_FILE), b"CONFIG_64BIT=y\n").unwrap();
    let v = write_bisect(&dir, &f, &log).unwrap();
    reason(&v, "the record says");
    reason(&v, "did not carry over");
    // The file gone.
    std::fs::remove_file(dir.join(USER_KERNEL_FILE)).unwrap();
    let v = write_bisect(&dir, &f, &log).unwrap();
    reason(&v, "is missing");
    // The file without a record.
    std::fs::write(dir.join(USER_KERNEL_FILE), user).unwrap();
    let mut none = f.clone();
    none.kernel = None;
    reason(
        &write_bisect(&dir, &none, &log).unwrap(),
        "names no user's kernel",
    );
    // A config bisect with a user's kernel.
    let mut cfg = f.clone();
    cfg.kind = BisectKind::Config;
    reason(
        &write_bisect(&dir, &cfg, &log).unwrap(),
        "a config bisect records",
    );
}

/// The culprit's differential profile attached to a commit bisect: the parent's and the
/// culprit's bundles under `profile/`, the table and the differential flame graph their
/// attribution launches give (the function that holds the added time named, above the
/// noise), the README's link; verify holds each to its recomputation, and refuses a
/// `profile/` the record does not attach; `report` regenerates them.
#[test]
fn the_culprits_differential_profile_is_attached_and_verified() {
    use truecold_proof::bisect::{CulpritProfile, PROFILE_DIR, PROFILE_FLAME, PROFILE_TABLE};
    let d = tempfile::tempdir().unwrap();
    let dir = bisect_dir(d.path());
    let p = dir.join(PROFILE_DIR);
    std::fs::create_dir_all(&p).unwrap();
    let launches = fixture(30e6, 1, None).samples().len() as u64;
    fixture(30e6, 1, None).write_sampled(&p, "parent", 0);
    fixture(30e6, 1, None).write_sampled(&p, "culprit", 30);
    edit_record(&dir, |f| {
        f.result.as_mut().unwrap().profile = Some(CulpritProfile {
            attribution: launches,
        })
    });
    let v = verify_dir(&dir);
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    let table = std::fs::read_to_string(p.join(PROFILE_TABLE)).unwrap();
    assert!(
        table.contains("| * | +3.000 | [+3.000, +3.000] | 0.000 | 3.000 | fn_delay |"),
        "{table}"
    );
    // The samples added in the fixture's same boots cover time that was not sampled: its
    // change mirrors the function's, within its noise (the launches' stages vary).
    assert!(table.contains("| -3.000 | "), "{table}");
    assert!(
        table.contains("Above the noise: `fn_delay` +3.000 ms."),
        "{table}"
    );
    assert!(std::fs::read_to_string(p.join(PROFILE_FLAME))
        .unwrap()
        .contains("fn_delay"));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("(profile/differential.md)"), "{readme}");
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert!(
        sums.contains("  profile/culprit/attribution.jsonl\n"),
        "{sums}"
    );
    // A hand-edited table: a reason, which `report` cures.
    std::fs::write(p.join(PROFILE_TABLE), table.replace("+3.000", "+0.000")).unwrap();
    truecold_proof::skeleton::write_tree_sums(&dir, 4).unwrap();
    assert!(reasons(&dir).contains("differential.md is not what the two bundles"));
    truecold_proof::verify::report_dir_with(&dir, false).unwrap();
    assert_eq!(
        std::fs::read_to_string(p.join(PROFILE_TABLE)).unwrap(),
        table
    );
    assert!(verify_dir(&dir).is_valid());
    // The record without its profile, the directory still there.
    edit_record(&dir, |f| f.result.as_mut().unwrap().profile = None);
    assert!(reasons(&dir).contains("beside a record that attaches no differential profile"));
}

/// A k-way bisect's wave fanned out over Slurm (`truecold fleet`, `FleetKind::Bisect`): the
/// baseline shard and three probes, each a bisect directory of one step against that
/// baseline; the fleet verifies, its README names the first bad commit, and a probe that
/// measured another commit than the plan's, or against another baseline, is caught.
#[test]
fn a_bisect_wave_fleet_verifies_names_the_commit_and_catches_a_foreign_probe() {
    use truecold_proof::fleet::*;
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("fleet");
    let c = |i: usize| format!("{i:040x}");
    let range: Vec<String> = (1..=3).map(c).collect();
    let places = probes(range.len(), 3);
    assert_eq!(places, [1, 2, 3]);
    let mut shards = vec![ShardPlan {
        name: BASELINE_SHARD.into(),
        seed: shard_seed(1, 0),
        commit: Some(c(0)),
        ..Default::default()
    }];
    for (i, &pl) in places.iter().enumerate() {
        shards.push(ShardPlan {
            name: probe_name(pl, &c(pl)),
            seed: shard_seed(1, i as u64 + 1),
            commit: Some(c(pl)),
            after: Some(BASELINE_SHARD.into()),
            ..Default::default()
        });
    }
    let plan = FleetPlan {
        schema: FLEET_SCHEMA,
        kind: FleetKind::Bisect,
        command: [
            "bisect",
            "run",
            "--kernel-tree",
            "/src/linux",
            "--good",
            "a",
            "--bad",
            "b",
        ]
        .map(String::from)
        .to_vec(),
        seed: 1,
        clock: Clock::Wall,
        partition: "fleet".into(),
        exclusive: true,
        task_mem_mib: 4096,
        shards,
        bisect: Some(BisectRange {
            tree: "/src/linux".into(),
            good: c(0),
            bad: c(3),
            range,
            probes: 3,
        }),
    };
    assert!(
        plan_problems(&plan).is_empty(),
        "{:?}",
        plan_problems(&plan)
    );
    for d in [SHARDS_DIR, TASKS_DIR, LOGS_DIR] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let bytes = plan_bytes(&plan);
    std::fs::write(dir.join(truecold_proof::names::FLEET_FILE), &bytes).unwrap();
    let digest = truecold_proof::digest::sha256_hex(&bytes);
    let record = |steps: Vec<Step>| BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: HostKind::Hardware,
        clock: Clock::Wall,
        contract: ContractKind::Linux,
        vcpus: 2,
        mem_bytes: 16384 << 20,
        judge: opts2(),
        n: N2,
        max_n: MAX_N2,
        source: "/src/linux".into(),
        good: c(0),
        bad: c(3),
        steps,
        result: None,
        wall_seconds: None,
        commands: Vec::new(),
        kernel: None,
    };
    let task = |name: &str| {
        let t = TaskRecord {
            shard: name.into(),
            plan_sha256: digest.clone(),
            job_id: Some("12".into()),
            array_job_id: Some("11".into()),
            array_task_id: Some(0),
            node: "node-a".into(),
            started_unix_s: 100,
            ended_unix_s: 160,
        };
        std::fs::write(
            dir.join(TASKS_DIR).join(format!("{name}.json")),
            task_bytes(&t),
        )
        .unwrap();
    };
    let base = dir.join(SHARDS_DIR).join(BASELINE_SHARD);
    std::fs::create_dir_all(&base).unwrap();
    fixture(30e6, 1, None).write(&base, BASELINE_DIR);
    assert!(write_bisect(&base, &record(Vec::new()), "baseline\n")
        .unwrap()
        .is_valid());
    task(BASELINE_SHARD);
    // The regression is at place 2: place 1 good, places 2 and 3 bad.
    let probe = |pl: usize, commit: &str, base_seed: u64| {
        let name = probe_name(pl, &c(pl));
        let d = dir.join(SHARDS_DIR).join(&name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("steps")).unwrap();
        let _ = std::fs::remove_file(dir.join(TASKS_DIR).join(format!("{name}.json")));
        fixture(30e6, base_seed, None).write(&d, BASELINE_DIR);
        let cand = if pl >= 2 { 36e6 } else { 30e6 };
        let rel = format!("steps/01-{}-n{N2}", &commit[..12]);
        Ab {
            sigma: 0.002,
            ..Ab::new(30e6, cand, N2, 20 + pl as u64)
        }
        .write(&d.join("steps"), &rel[6..]);
        let st = look_step(&d, &rel, commit, 1);
        assert!(write_bisect(&d, &record(vec![st]), "probe\n")
            .unwrap()
            .is_valid());
        task(&name);
        d
    };
    for &pl in &places {
        probe(pl, &c(pl), 1);
    }
    let v = write_fleet(&dir).unwrap();
    assert!(v.is_valid(), "{}", v.render(&dir, 20));
    let outcome_of = |n: &str| probe_outcome(&dir.join(SHARDS_DIR).join(n));
    assert_eq!(
        wave_result(&plan, &outcome_of).0,
        WaveResult::Found {
            first_bad: c(2),
            last_good: c(1)
        }
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("First bad commit: `{}`", &c(2)[..12])),
        "{readme}"
    );

    // A probe that measured another commit than the plan gives it.
    probe(2, &c(3), 1);
    write_fleet(&dir).unwrap();
    let v = verify_dir(&dir);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.detail.contains("a step measured")),
        "{}",
        v.render(&dir, 20)
    );
    // A probe against another baseline than the wave's.
    probe(2, &c(2), 99);
    write_fleet(&dir).unwrap();
    let v = verify_dir(&dir);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.detail.contains("not the baseline shard's")),
        "{}",
        v.render(&dir, 20)
    );
}
