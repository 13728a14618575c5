//! `truecold bisect`: which commit of a kernel tree, or which symbols of a kernel config,
//! made a true-cold boot slower.
//!
//! - `step` is what `git bisect run` calls: build the tree's checkout (base fragments on its
//!   tinyconfig, `kernel-config/build.sh` with `TRUECOLD_KERNEL_TREE`, incremental and cached
//!   by commit), run an n-launch campaign with the baseline's contract, judge it against the
//!   baseline ([`truecold_proof::bisect::judge`]: `compare`'s rule), and exit 0 (good), 1
//!   (bad) or 125 (skip: the build failed, strict-ready broke, or still inconclusive after n
//!   grew to its cap). A setup error (no baseline, another host kind) exits 200, which stops
//!   `git bisect run`. Every step is appended to the bisect directory, which verifies after
//!   each one.
//! - `run` wraps a whole `git bisect` session: the good commit's baseline, a check that the
//!   bad commit is bad, `git bisect start/run/log/reset` with `step` as the judge, and the
//!   result (first bad commit, last good commit) written into the directory. The tree is left
//!   on the commit it was on.
//! - `config` searches the assignments that differ between two resolved configs for the
//!   smallest set that explains the slowdown (delta debugging, ddmin): each candidate is the
//!   good config with a subset of the bad one's assignments, resolved by olddefconfig, built
//!   incrementally, and judged in an interleaved A/B against the good kernel (one L1 boot per
//!   A/B in the nested harness); a candidate that does not build or breaks strict-ready is
//!   unresolved.
//!
//! Every step uses the clock of the host it runs on (virtual in the nested harness, wall on
//! hardware KVM); the baseline's clock is every step's, never mixed.

use crate::artifacts::{self, LinuxGuest};
use crate::cli::DEFAULT_SEED;
pub use crate::cli::{
    BisectArgs, BisectCmd, ConfigBisectArgs, ContextArgs, JudgeArgs, RunBisectArgs, StepArgs,
    DEFAULT_N,
};
use crate::kernel::{KernelBuild, KernelError};
use crate::phase::{PhaseArm, PhaseError, PhasePlan};
use crate::plan::{CampaignPlan, GuestSpec, Target};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use truecold_proof::bisect::{
    judge, read_bisect, write_bisect, BisectError, BisectFile, BisectKind, BisectResult,
    JudgeOptions, Step, StepOutcome, BASELINE_DIR, BISECT_SCHEMA, CANDIDATE_ARM, GOOD_ARM,
    LOG_FILE, STEPS_DIR,
};
use truecold_proof::schema::ContractKind;
use truecold_proof::sums::sha256_hex;
use truecold_proto::kinds::{Backing, HostKind};
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::path_io::PathIoError;

/// Exit status of a step that could not judge at all (stops `git bisect run`).
pub const EXIT_ABORT: u8 = 200;

/// Why a bisect could not run (a step's own verdicts are not errors).
#[derive(Debug, thiserror::Error)]
pub enum BisectRunError {
    #[error("-n must be at least 3 and --max-n at least -n (got -n {n}, --max-n {max_n})")]
    Sizes { n: u64, max_n: u64 },
    #[error("{0} already exists; a bisect directory is never overwritten (choose another --out)")]
    OutExists(PathBuf),
    #[error("the baseline {}: {why}", path.display())]
    Baseline { path: PathBuf, why: String },
    #[error("{} holds another baseline than {}", dir.display(), baseline.display())]
    OtherBaseline { dir: PathBuf, baseline: PathBuf },
    #[error("`git {args}` in {}: {why}", tree.display())]
    Git {
        tree: PathBuf,
        args: String,
        why: String,
    },
    #[error("the kernel tree {} has uncommitted changes to tracked files; commit or stash them", .0.display())]
    Dirty(PathBuf),
    #[error("the {0} side's kernel")]
    Kernel(&'static str, #[source] KernelError),
    #[error("the campaign")]
    Run(#[source] Box<crate::run::RunError>),
    #[error("the A/B")]
    Phase(#[source] Box<PhaseError>),
    #[error("the bisect directory")]
    Record(#[source] BisectError),
    #[error("judging {}", path.display())]
    Judge {
        path: PathBuf,
        #[source]
        source: truecold_proof::bisect::JudgeError,
    },
    #[error("the bad side is not slower than the good one ({0}): nothing to bisect")]
    NotBad(String),
    #[error("the two configs resolve to the same kernel config: nothing to bisect")]
    SameConfig,
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("the campaign wrote {} but it does not verify: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BisectRunError {
    let at = PathIoError::at(op, path);
    move |source| BisectRunError::Io(at(source))
}

impl JudgeArgs {
    fn sizes(&self) -> Result<(u64, u64), BisectRunError> {
        let max_n = self.max_n.unwrap_or(self.n.saturating_mul(4));
        if self.n < 3 || max_n < self.n {
            return Err(BisectRunError::Sizes { n: self.n, max_n });
        }
        Ok((self.n, max_n))
    }

    fn options(&self) -> JudgeOptions {
        let mut o = JudgeOptions::with_min_samples(self.n as usize);
        o.threshold_pct = self.threshold_pct;
        o.alpha = self.alpha;
        o
    }

    fn script(&self) -> PathBuf {
        self.paths.script()
    }

    fn kernel_root(&self) -> PathBuf {
        self.paths.kernel_root("out/bisect-kernels")
    }

    fn base(&self) -> Result<(PathBuf, LinuxGuest), BisectRunError> {
        let dir = self.paths.guest_dir();
        let g = artifacts::linux_guest(&dir).map_err(|e| BisectRunError::Baseline {
            path: dir.clone(),
            why: format!(
                "{} (scripts/build-artifacts.sh builds the guest)",
                truecold_proto::measure::error_chain(&e)
            ),
        })?;
        Ok((dir, g))
    }

    /// The flags a `step` needs to judge like this (for `git bisect run … step`).
    fn step_flags(&self) -> Vec<String> {
        let mut v = vec![
            "-n".to_string(),
            self.n.to_string(),
            "--threshold-pct".into(),
            self.threshold_pct.to_string(),
            "--alpha".into(),
            self.alpha.to_string(),
        ];
        if let Some(m) = self.max_n {
            v.extend(["--max-n".into(), m.to_string()]);
        }
        // Absolute: `git bisect run` runs the step in the kernel tree, not here.
        if let Some(p) = &self.paths.vmm {
            v.extend(["--vmm".into(), abs(p)]);
        }
        v.extend([
            "--guest-dir".into(),
            abs(&self.paths.guest_dir()),
            "--kernel-dir".into(),
            abs(&self.kernel_root()),
            "--kernel-build".into(),
            abs(&self.script()),
        ]);
        v
    }
}

fn abs(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// `git -C tree args…`'s stdout, trimmed.
fn git(tree: &Path, args: &[&str]) -> Result<String, BisectRunError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .map_err(|e| BisectRunError::Git {
            tree: tree.to_path_buf(),
            args: args.join(" "),
            why: format!("cannot run git: {e}"),
        })?;
    if !out.status.success() {
        return Err(BisectRunError::Git {
            tree: tree.to_path_buf(),
            args: args.join(" "),
            why: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// The step campaign's plan: the contract of the record, `n` launches, the kernel in
/// `guest_dir`, the bundle at `out`.
fn campaign_plan(
    f: &BisectFile,
    backing: Backing,
    deadline_ms: u64,
    n: u64,
    j: &JudgeArgs,
    guest_dir: &Path,
    out: &Path,
) -> Result<CampaignPlan, BisectRunError> {
    let (vcpus, mem) = record_guest(f)?;
    let nested = f.host_kind == HostKind::NestedEmulated;
    let plan = CampaignPlan::sequential(
        Target::linux(nested),
        GuestSpec::plain(vcpus, mem, backing),
        n,
        deadline_ms,
        500,
    )
    .map_err(|e| BisectRunError::Run(Box::new(e.into())))?;
    Ok(plan.at(
        j.paths.vmm.clone(),
        Some(guest_dir.to_path_buf()),
        Some(out.to_path_buf()),
    ))
}

/// The record's guest, checked (a record read back from a directory is a boundary).
fn record_guest(f: &BisectFile) -> Result<(Vcpus, GuestMem), BisectRunError> {
    let bad = |e: truecold_proto::limits::LimitError| {
        BisectRunError::Run(Box::new(crate::plan::ArgError::from(e).into()))
    };
    Ok((
        Vcpus::new(u64::from(f.vcpus)).map_err(bad)?,
        GuestMem::from_bytes(f.mem_bytes).map_err(bad)?,
    ))
}

/// Runs one campaign into `out` and checks it verifies.
fn campaign(ra: &CampaignPlan, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let o = crate::run::run(ra, invocation).map_err(|e| BisectRunError::Run(Box::new(e)))?;
    let w = o.written;
    if !w.verdict.is_valid() {
        return Err(BisectRunError::Invalid {
            why: w.verdict.render(&w.path, 3).trim().replace('\n', "; "),
            path: w.path,
        });
    }
    Ok(w.path)
}

/// The baseline bundle's backing and deadline (ms), from its result.json.
fn baseline_context(b: &Path) -> Result<(Backing, u64), BisectRunError> {
    let (r, _) = truecold_proof::read_bundle(b).map_err(|e| BisectRunError::Baseline {
        path: b.to_path_buf(),
        why: truecold_proto::measure::error_chain(&e),
    })?;
    let word = r
        .configuration
        .backing
        .split_whitespace()
        .next()
        .unwrap_or("");
    let backing = Backing::parse(word).map_err(|why| BisectRunError::Baseline {
        path: b.to_path_buf(),
        why: format!("backing `{word}`: {why}"),
    })?;
    Ok((backing, r.contract.deadline_ns / 1_000_000))
}

/// A new record for a commit bisect whose baseline bundle is `baseline`.
fn commit_record(
    baseline: &Path,
    tree: &Path,
    good: &str,
    bad: &str,
    j: &JudgeArgs,
) -> Result<BisectFile, BisectRunError> {
    let v = truecold_proof::verify_dir(baseline);
    let why = |w: String| BisectRunError::Baseline {
        path: baseline.to_path_buf(),
        why: w,
    };
    if !v.is_valid() {
        return Err(why(v.render(baseline, 3)));
    }
    let r = v.result.ok_or_else(|| why("no result".into()))?;
    if r.contract.kind != ContractKind::Linux {
        return Err(why(
            "a probe-guest bundle boots no kernel: bisect needs a Linux bundle".into(),
        ));
    }
    let (n, max_n) = j.sizes()?;
    Ok(BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: r.environment.host_kind,
        clock: r.contract.clock,
        contract: r.contract.kind,
        vcpus: r.configuration.vcpus,
        mem_bytes: r.configuration.mem_bytes,
        judge: j.options(),
        n,
        max_n,
        source: abs(tree),
        good: good.to_string(),
        bad: bad.to_string(),
        steps: Vec::new(),
        result: None,
        wall_seconds: None,
        commands: Vec::new(),
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), BisectRunError> {
    std::fs::create_dir_all(to).map_err(io("create", to))?;
    for e in std::fs::read_dir(from).map_err(io("list", from))? {
        let e = e.map_err(io("list", from))?;
        let ft = e.file_type().map_err(io("stat", &e.path()))?;
        let dest = to.join(e.file_name());
        if ft.is_dir() {
            copy_dir(&e.path(), &dest)?;
        } else if ft.is_file() {
            std::fs::copy(e.path(), &dest).map_err(io("copy", &dest))?;
        }
    }
    Ok(())
}

fn save(dir: &Path, f: &BisectFile, log: &str) -> Result<(), BisectRunError> {
    write_bisect(dir, f, log).map_err(BisectRunError::Record)?;
    Ok(())
}

fn read_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default()
}

/// The next step directory's name: `steps/NN-<what>-n<n>`.
fn step_dir(f: &BisectFile, what: &str, n: u64) -> String {
    format!("{STEPS_DIR}/{:02}-{what}-n{n}", f.steps.len() + 1)
}

/// `truecold bisect step`: returns the exit code for `git bisect run`.
pub fn step(a: &StepArgs, invocation: &str) -> Result<StepOutcome, BisectRunError> {
    let t0 = Instant::now();
    let baseline = if a
        .baseline
        .join(truecold_proof::bisect::BISECT_FILE)
        .is_file()
    {
        a.baseline.join(BASELINE_DIR)
    } else {
        a.baseline.clone()
    };
    let tree = &a.kernel_tree;
    let commit = git(tree, &["rev-parse", "HEAD"])?;
    let subject = git(tree, &["log", "-1", "--format=%s"])?;
    let mut f = if a.dir.join(truecold_proof::bisect::BISECT_FILE).is_file() {
        let f = read_bisect(&a.dir).map_err(BisectRunError::Record)?;
        let same = |p: &Path| std::fs::read(p.join("result.json")).ok();
        if same(&baseline) != same(&a.dir.join(BASELINE_DIR)) {
            return Err(BisectRunError::OtherBaseline {
                dir: a.dir.clone(),
                baseline,
            });
        }
        f
    } else {
        let f = commit_record(&baseline, tree, "?", "?", &a.judge)?;
        copy_dir(&baseline, &a.dir.join(BASELINE_DIR))?;
        f
    };
    let mut log = read_log(&a.dir);
    let st = measure_commit(
        &mut f, &a.dir, tree, &commit, &subject, &a.judge, invocation,
    )?;
    log.push_str(&format!(
        "step {} {}: {} — {} ({} s)\n",
        f.steps.len(),
        short(&commit),
        st.as_str(),
        f.steps.last().map(|s| s.why.as_str()).unwrap_or(""),
        t0.elapsed().as_secs()
    ));
    save(&a.dir, &f, &log)?;
    Ok(st)
}

/// Builds the checked-out commit and measures it (growing n while inconclusive), appending
/// one step per campaign to `f` and saving the directory after each.
fn measure_commit(
    f: &mut BisectFile,
    dir: &Path,
    tree: &Path,
    commit: &str,
    subject: &str,
    j: &JudgeArgs,
    invocation: &str,
) -> Result<StepOutcome, BisectRunError> {
    let t0 = Instant::now();
    let (_, base) = j.base()?;
    if !git(tree, &["status", "--porcelain", "--untracked-files=no"])?.is_empty() {
        return Err(BisectRunError::Dirty(tree.to_path_buf()));
    }
    let kdir = j.kernel_root().join(format!("commit-{commit}"));
    let script = j.script();
    let build = KernelBuild {
        script: &script,
        variant: "base",
        args: Vec::new(),
        tree: Some(tree),
    };
    let mk = |outcome, dir: Option<String>, planned, judgement, why: String, secs| Step {
        dir,
        commit: Some(commit.to_string()),
        subject: Some(subject.to_string()),
        symbols: Vec::new(),
        config_sha256: None,
        planned,
        outcome,
        judgement,
        why,
        wall_seconds: secs,
    };
    let guest = match build.guest_dir(&kdir, &base) {
        Ok(d) => d,
        Err(e @ KernelError::Failed { .. }) => {
            let why = truecold_proto::measure::error_chain(&e);
            let last = why.lines().last().unwrap_or("").to_string();
            eprintln!(
                "truecold bisect: {}: skip (build failed): {last}",
                short(commit)
            );
            f.steps.push(mk(
                StepOutcome::BuildFailed,
                None,
                0,
                None,
                format!("the kernel did not build: {last}"),
                t0.elapsed().as_secs(),
            ));
            save(dir, f, &read_log(dir))?;
            return Ok(StepOutcome::BuildFailed);
        }
        Err(e) => return Err(BisectRunError::Kernel("step", e)),
    };
    let (backing, deadline_ms) = baseline_context(&dir.join(BASELINE_DIR))?;
    let mut n = f.n;
    loop {
        let t1 = Instant::now();
        let rel = step_dir(f, short(commit), n);
        let out = dir.join(&rel);
        let ra = campaign_plan(f, backing, deadline_ms, n, j, &guest, &out)?;
        campaign(&ra, invocation)?;
        let jd = judge(&dir.join(BASELINE_DIR), &out, &f.judge).map_err(|source| {
            BisectRunError::Judge {
                path: out.clone(),
                source,
            }
        })?;
        let outcome = jd.outcome;
        let why = jd.why.clone();
        eprintln!(
            "truecold bisect: {} ({} launches): {} — {why}",
            short(commit),
            n,
            outcome.as_str()
        );
        // The first campaign's step carries the build; a grown one only its own campaign.
        let secs = if n == f.n { t0 } else { t1 }.elapsed().as_secs();
        f.steps.push(mk(outcome, Some(rel), n, Some(jd), why, secs));
        save(dir, f, &read_log(dir))?;
        if outcome == StepOutcome::Inconclusive && n.saturating_mul(2) <= f.max_n {
            n = n.saturating_mul(2);
            continue;
        }
        return Ok(outcome);
    }
}

/// `results/<UTC>-bisect-<kind>-<host>-<v>vcpu-<m>mib`.
fn default_out(kind: &str, c: &ContextArgs) -> PathBuf {
    let (stamp, _) = crate::clock::utc_now();
    PathBuf::from("results").join(format!(
        "{stamp}-bisect-{kind}-{}-{}vcpu-{}mib",
        if c.nested { "nested-linux" } else { "linux" },
        c.guest.vcpus,
        c.guest.mem.mib()
    ))
}

/// The host a bisect measures on and its deadline default.
fn context_host(c: &ContextArgs) -> Result<(HostKind, u64), BisectRunError> {
    if c.nested {
        return Ok((
            HostKind::NestedEmulated,
            crate::plan::DEFAULT_NESTED_DEADLINE_MS,
        ));
    }
    let (k, _) = crate::host::kvm_host().map_err(|e| BisectRunError::Run(Box::new(e.into())))?;
    Ok((k, crate::plan::DEFAULT_DEADLINE_MS))
}

/// `truecold bisect run`: the whole session; returns the directory.
pub fn run(a: &RunBisectArgs, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let t0 = Instant::now();
    let tree = std::path::absolute(&a.kernel_tree).map_err(io("resolve", &a.kernel_tree))?;
    let (n, _) = a.judge.sizes()?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out("commit", &a.context));
    if out.symlink_metadata().is_ok() {
        return Err(BisectRunError::OutExists(out));
    }
    let out = std::path::absolute(&out).map_err(io("resolve", &out))?;
    if !git(&tree, &["status", "--porcelain", "--untracked-files=no"])?.is_empty() {
        return Err(BisectRunError::Dirty(tree.clone()));
    }
    let good = git(
        &tree,
        &["rev-parse", "--verify", &format!("{}^{{commit}}", a.good)],
    )?;
    let bad = git(
        &tree,
        &["rev-parse", "--verify", &format!("{}^{{commit}}", a.bad)],
    )?;
    // Where the tree was: a branch name, else the commit.
    let start = git(&tree, &["symbolic-ref", "-q", "--short", "HEAD"])
        .or_else(|_| git(&tree, &["rev-parse", "HEAD"]))?;
    let session = Session {
        a,
        tree: &tree,
        good: &good,
        bad: &bad,
        out: &out,
        invocation,
    };
    let result = run_session(&session, n, t0);
    // Leave the tree as it was found, whatever happened.
    let _ = git(&tree, &["bisect", "reset"]);
    let _ = git(&tree, &["checkout", "--quiet", &start]);
    result.map(|()| out)
}

/// One `git bisect` session: its tree, its two sides and its directory.
struct Session<'a> {
    a: &'a RunBisectArgs,
    tree: &'a Path,
    good: &'a str,
    bad: &'a str,
    out: &'a Path,
    invocation: &'a str,
}

fn run_session(s: &Session<'_>, n: u64, t0: Instant) -> Result<(), BisectRunError> {
    let (mut f, mut log) = s.baseline(n)?;
    // 2. The bad commit must be bad, or there is nothing to look for.
    let (tree, bad, out) = (s.tree, s.bad, s.out);
    git(tree, &["checkout", "--quiet", bad])?;
    let subject = git(tree, &["log", "-1", "--format=%s"])?;
    let o = measure_commit(&mut f, out, tree, bad, &subject, &s.a.judge, s.invocation)?;
    log.push_str(&format!(
        "check of the bad side {}: {}\n",
        short(bad),
        o.as_str()
    ));
    if o != StepOutcome::Regression {
        f.result = Some(BisectResult::not_bisected(format!(
            "Not bisected: the bad side {} measured {} against the good side.",
            short(bad),
            o.as_str()
        )));
        f.wall_seconds = Some(t0.elapsed().as_secs());
        save(out, &f, &log)?;
        return Err(BisectRunError::NotBad(o.as_str().to_string()));
    }
    save(out, &f, &log)?;
    // 3. git bisect, with `truecold bisect step` as the judge.
    let (status, step_cmd) = s.git_bisect_run()?;
    let git_log = git(tree, &["bisect", "log"]).unwrap_or_default();
    let mut f = read_bisect(out).map_err(BisectRunError::Record)?;
    let mut log = read_log(out);
    log.push_str(&format!("\n# git bisect log\n{git_log}\n"));
    // The first bad commit: what git bisect ended on (refs/bisect/bad), when it ended.
    let first_bad = if status.success() {
        git(tree, &["rev-parse", "refs/bisect/bad"]).ok()
    } else {
        None
    };
    f.result = Some(s.result(&f, first_bad.clone(), status));
    f.wall_seconds = Some(t0.elapsed().as_secs());
    f.commands = vec![
        s.invocation.to_string(),
        format!(
            "# the same by hand: git -C {} bisect start {} {} && git -C {} bisect run {}",
            tree.display(),
            short(bad),
            short(s.good),
            tree.display(),
            step_cmd.join(" ")
        ),
    ];
    save(out, &f, &log)?;
    if first_bad.is_none() {
        return Err(BisectRunError::Git {
            tree: tree.to_path_buf(),
            args: "bisect run".into(),
            why: format!("{status}: no first bad commit"),
        });
    }
    Ok(())
}

impl Session<'_> {
    /// 1. The baseline: the good commit, measured once, into a new record.
    fn baseline(&self, n: u64) -> Result<(BisectFile, String), BisectRunError> {
        let (a, tree, good, out) = (self.a, self.tree, self.good, self.out);
        let (_, base) = a.judge.base()?;
        let (host, deadline_ms) = context_host(&a.context)?;
        let script = a.judge.script();
        git(tree, &["checkout", "--quiet", good])?;
        let kdir = a.judge.kernel_root().join(format!("commit-{good}"));
        let build = KernelBuild {
            script: &script,
            variant: "base",
            args: Vec::new(),
            tree: Some(tree),
        };
        let guest = build
            .guest_dir(&kdir, &base)
            .map_err(|e| BisectRunError::Kernel("good", e))?;
        std::fs::create_dir_all(out.join(STEPS_DIR)).map_err(io("create", out))?;
        let f = BisectFile {
            schema: BISECT_SCHEMA,
            kind: BisectKind::Commit,
            host_kind: host,
            clock: host.clock(),
            contract: ContractKind::Linux,
            vcpus: u32::from(a.context.guest.vcpus.get()),
            mem_bytes: a.context.guest.mem.bytes(),
            judge: a.judge.options(),
            n,
            max_n: a.judge.sizes()?.1,
            source: tree.display().to_string(),
            good: good.to_string(),
            bad: self.bad.to_string(),
            steps: Vec::new(),
            result: None,
            wall_seconds: None,
            commands: Vec::new(),
        };
        eprintln!("truecold bisect: baseline: {} ({n} launches)", short(good));
        let ra = campaign_plan(
            &f,
            Backing::Anon,
            deadline_ms,
            n,
            &a.judge,
            &guest,
            &out.join(BASELINE_DIR),
        )?;
        campaign(&ra, self.invocation)?;
        let log = format!(
            "truecold bisect run: good {good}, bad {}, tree {}\nbaseline: {} launches of {}\n",
            self.bad,
            tree.display(),
            n,
            short(good)
        );
        save(out, &f, &log)?;
        Ok((f, log))
    }

    /// `git bisect start` and `git bisect run` with `truecold bisect step` as the judge: the
    /// run's exit status and the step command it ran.
    fn git_bisect_run(&self) -> Result<(std::process::ExitStatus, Vec<String>), BisectRunError> {
        let (tree, out) = (self.tree, self.out);
        git(tree, &["bisect", "start", self.bad, self.good])?;
        let exe = std::env::current_exe().map_err(io("find", Path::new("the truecold binary")))?;
        let mut step_cmd: Vec<String> = vec![
            exe.display().to_string(),
            "bisect".into(),
            "step".into(),
            "--baseline".into(),
            out.join(BASELINE_DIR).display().to_string(),
            "--kernel-tree".into(),
            tree.display().to_string(),
            "--dir".into(),
            out.display().to_string(),
        ];
        step_cmd.extend(self.a.judge.step_flags());
        eprintln!("truecold bisect: git bisect run {}", step_cmd.join(" "));
        let status = Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(["bisect", "run"])
            .args(&step_cmd)
            .status()
            .map_err(io("run", Path::new("git bisect run")))?;
        Ok((status, step_cmd))
    }

    /// The session's result: the first bad commit (when git bisect ended), its parent, the
    /// steps that measured them.
    fn result(
        &self,
        f: &BisectFile,
        first_bad: Option<String>,
        status: std::process::ExitStatus,
    ) -> BisectResult {
        let tree = self.tree;
        let last_good = match &first_bad {
            Some(c) => git(tree, &["rev-parse", &format!("{c}^")]).ok(),
            None => None,
        };
        let find = |c: &Option<String>, exit: i32| {
            f.steps
                .iter()
                .rposition(|s| s.commit == *c && c.is_some() && s.outcome.exit_code() == exit)
        };
        let bad_step = find(&first_bad, 1);
        let good_step = find(&last_good, 0);
        let subject_of = |c: &Option<String>| {
            c.as_deref()
                .and_then(|c| git(tree, &["log", "-1", "--format=%s", c]).ok())
                .unwrap_or_default()
        };
        let summary = match (&first_bad, good_step) {
            (Some(c), Some(_)) => format!(
                "First bad commit: `{}` ({}). Its parent `{}` measured good.",
                short(c),
                subject_of(&first_bad),
                last_good.as_deref().map(short).unwrap_or("?")
            ),
            (Some(c), None) => format!(
                "First bad commit: `{}` ({}); its parent `{}` is the good side's baseline or \
                 was not measured as a step.",
                short(c),
                subject_of(&first_bad),
                last_good.as_deref().map(short).unwrap_or("?")
            ),
            (None, _) => format!("git bisect run did not finish ({status}); see log.txt."),
        };
        BisectResult {
            first_bad,
            last_good,
            culprits: Vec::new(),
            bad_step,
            good_step,
            effects: Vec::new(),
            summary,
        }
    }
}

// ---- config ------------------------------------------------------------------------------

/// A resolved config's assignments: `CONFIG_X` → value (`n` for "is not set").
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(sym) = rest.strip_suffix(" is not set") {
                if sym.starts_with("CONFIG_") {
                    m.insert(sym.to_string(), "n".to_string());
                }
            }
        } else if let Some((k, v)) = line.split_once('=') {
            if k.starts_with("CONFIG_") {
                m.insert(k.to_string(), v.to_string());
            }
        }
    }
    m
}

/// The assignments of `bad` that differ from `good` (`CONFIG_X=v`, `v` = `n` for unset),
/// sorted.
pub fn config_diff(good: &str, bad: &str) -> Vec<String> {
    let (g, b) = (parse_config(good), parse_config(bad));
    let mut keys: Vec<&String> = g.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let gv = g.get(k).map_or("n", String::as_str);
            let bv = b.get(k).map_or("n", String::as_str);
            (gv != bv).then(|| format!("{k}={bv}"))
        })
        .collect()
}

/// `good` with `assignments` (`CONFIG_X=v`) applied: each replaces the symbol's line, or is
/// appended; `=n` becomes `# CONFIG_X is not set`.
pub fn apply_assignments(good: &str, assignments: &[String]) -> String {
    let mut want: BTreeMap<&str, &str> = BTreeMap::new();
    for a in assignments {
        if let Some((k, v)) = a.split_once('=') {
            want.insert(k, v);
        }
    }
    let line_of = |k: &str, v: &str| {
        if v == "n" {
            format!("# {k} is not set")
        } else {
            format!("{k}={v}")
        }
    };
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for line in good.lines() {
        let sym = line
            .strip_prefix("# ")
            .and_then(|r| r.strip_suffix(" is not set"))
            .or_else(|| line.split_once('=').map(|(k, _)| k));
        match sym.and_then(|s| want.get_key_value(s)) {
            Some((k, v)) => {
                out.push_str(&line_of(k, v));
                done.push(k);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    for (k, v) in &want {
        if !done.contains(k) {
            out.push_str(&line_of(k, v));
            out.push('\n');
        }
    }
    out
}

/// What a delta-debugging test says of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The slowdown is there (the candidate is bad).
    Fails,
    /// It is not (good).
    Passes,
    /// Could not tell (did not build, broke strict-ready, inconclusive).
    Unresolved,
}

/// Zeller's ddmin: a 1-minimal subset of `c` for which `test` fails, given that `c` fails.
/// `test` is called on subsets and complements; unresolved counts as not failing.
pub fn ddmin<T: Clone + PartialEq>(
    c: Vec<T>,
    test: &mut dyn FnMut(&[T]) -> Result<Probe, BisectRunError>,
) -> Result<Vec<T>, BisectRunError> {
    let mut c = c;
    let mut n = 2usize;
    while c.len() >= 2 {
        let chunks: Vec<Vec<T>> = split(&c, n);
        let mut reduced = false;
        for s in &chunks {
            if test(s)? == Probe::Fails {
                c = s.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for s in &chunks {
                let comp: Vec<T> = c.iter().filter(|x| !s.contains(x)).cloned().collect();
                if test(&comp)? == Probe::Fails {
                    c = comp;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= c.len() {
                break;
            }
            n = (2 * n).min(c.len());
        }
    }
    Ok(c)
}

/// `c` cut into `n` contiguous chunks of near-equal size.
fn split<T: Clone>(c: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.min(c.len()).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (c.len() - start) / (n - i);
        out.push(c[start..end].to_vec());
        start = end;
    }
    out
}

/// A config bisect under way: the two sides' kernels, where candidates are built, and the
/// candidates already measured by resolved config.
struct ConfigSearch<'a> {
    a: &'a ConfigBisectArgs,
    invocation: &'a str,
    out: PathBuf,
    base_dir: PathBuf,
    base: LinuxGuest,
    host: HostKind,
    deadline_ms: u64,
    script: PathBuf,
    root: PathBuf,
    good_dir: PathBuf,
    good_cfg: String,
    good_sha: String,
    bad_sha: String,
    /// Every assignment that differs (the whole bad side).
    diff: Vec<String>,
    /// Results by resolved config: a candidate that resolves like an earlier one is not
    /// rerun; its step points at the earlier step's campaign (the same resolved config, so
    /// the same kernel), so every candidate ddmin judged, a culprit above all, has its step.
    seen: BTreeMap<String, usize>,
}

/// 16 hex digits of a config's digest: its kernel directory's and candidate file's key.
fn config_key(text: &str) -> String {
    sha256_hex(text.as_bytes())[..16].to_string()
}

fn read_text(p: &Path) -> Result<String, BisectRunError> {
    std::fs::read_to_string(p).map_err(io("read", p))
}

impl ConfigSearch<'_> {
    fn build(&self, cfg: &Path, dir: &Path) -> Result<PathBuf, KernelError> {
        KernelBuild {
            script: &self.script,
            variant: "config",
            args: vec![cfg.as_os_str().to_owned()],
            tree: self.a.kernel_tree.as_deref(),
        }
        .guest_dir(dir, &self.base)
    }

    /// Builds, resolves and measures one candidate (the good config with `set` applied),
    /// appending its step(s) to `f`.
    fn measure(
        &mut self,
        set: &[String],
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<StepOutcome, BisectRunError> {
        let t1 = Instant::now();
        let text = apply_assignments(&self.good_cfg, set);
        let cdir = self.root.join(format!("config-{}", config_key(&text)));
        std::fs::create_dir_all(&self.root).map_err(io("create", &self.root))?;
        let cfile = self
            .root
            .join(format!("candidate-{}.config", config_key(&text)));
        std::fs::write(&cfile, &text).map_err(io("write", &cfile))?;
        let dir = match self.build(&cfile, &cdir) {
            Ok(d) => d,
            Err(e @ KernelError::Failed { .. }) => {
                let why = truecold_proto::measure::error_chain(&e);
                let last = why.lines().last().unwrap_or("").to_string();
                f.steps.push(config_step(
                    set,
                    t1,
                    StepOutcome::BuildFailed,
                    None,
                    0,
                    None,
                    format!("the kernel did not build: {last}"),
                    None,
                ));
                log.push_str(&format!("[{}] build failed\n", set.join(" ")));
                save(&self.out, f, log)?;
                return Ok(StepOutcome::BuildFailed);
            }
            Err(e) => return Err(BisectRunError::Kernel("candidate", e)),
        };
        let resolved = read_text(&dir.join("config"))?;
        let sha = sha256_hex(resolved.as_bytes());
        if let Some(o) = self.known(set, &sha, t1, f, log)? {
            return Ok(o);
        }
        self.ab(set, &dir, &sha, t1, f, log)
    }

    /// A candidate that needs no campaign: it resolves to one side's config, or like an
    /// earlier candidate (whose step it repeats).
    fn known(
        &self,
        set: &[String],
        sha: &str,
        t1: Instant,
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<Option<StepOutcome>, BisectRunError> {
        let side = if sha == self.good_sha {
            Some(StepOutcome::SameAsGood)
        } else if sha == self.bad_sha && set.len() != self.diff.len() {
            Some(StepOutcome::SameAsBad)
        } else {
            None
        };
        if let Some(o) = side {
            f.steps.push(config_step(
                set,
                t1,
                o,
                None,
                0,
                None,
                "olddefconfig resolves the candidate to that config; nothing to measure".into(),
                Some(sha.to_string()),
            ));
            log.push_str(&format!("[{}] {}\n", set.join(" "), o.as_str()));
            save(&self.out, f, log)?;
            return Ok(Some(o));
        }
        let Some(&k) = self.seen.get(sha) else {
            return Ok(None);
        };
        let earlier = f.steps[k].clone();
        let o = earlier.outcome;
        f.steps.push(Step {
            symbols: set.to_vec(),
            why: format!(
                "olddefconfig resolves it like [{}] (step {}), whose campaign measured it: {}",
                earlier.symbols.join(" "),
                k + 1,
                earlier.why
            ),
            wall_seconds: t1.elapsed().as_secs(),
            ..earlier
        });
        log.push_str(&format!(
            "[{}] resolves like an earlier candidate (step {}): {}\n",
            set.join(" "),
            k + 1,
            o.as_str()
        ));
        save(&self.out, f, log)?;
        Ok(Some(o))
    }

    /// The interleaved A/B of the candidate kernel in `dir` against the good one, its
    /// launches doubled while inconclusive (up to the record's cap); `t1`: when the
    /// candidate's build began.
    #[allow(clippy::too_many_arguments)]
    fn ab(
        &mut self,
        set: &[String],
        dir: &Path,
        sha: &str,
        t1: Instant,
        f: &mut BisectFile,
        log: &mut String,
    ) -> Result<StepOutcome, BisectRunError> {
        let (vcpus, mem) = record_guest(f)?;
        let mut planned = f.n;
        loop {
            let rel = step_dir(f, &format!("cfg{}", f.steps.len() + 1), planned);
            let plan = PhasePlan {
                phase: "ab".into(),
                contract: ContractKind::Linux,
                seed: DEFAULT_SEED.wrapping_add(f.steps.len() as u64),
                rounds: planned,
                vcpus,
                mem,
                backing: Backing::Anon,
                deadline_ms: self.deadline_ms,
                kill_grace_ms: 500,
                arms: vec![
                    PhaseArm {
                        name: GOOD_ARM.into(),
                        knobs: Vec::new(),
                        guest_dir: Some(self.good_dir.clone()),
                    },
                    PhaseArm {
                        name: CANDIDATE_ARM.into(),
                        knobs: Vec::new(),
                        guest_dir: Some(dir.to_path_buf()),
                    },
                ],
                attribution: 0,
                attribute: Vec::new(),
            };
            let dest = self.out.join(&rel);
            let w = crate::phase::run_one_phase(
                &plan,
                self.host == HostKind::NestedEmulated,
                self.a.judge.paths.vmm.as_deref(),
                &self.base_dir,
                &dest,
                self.invocation,
            )
            .map_err(|e| BisectRunError::Phase(Box::new(e)))?;
            if !w.verdict.is_valid() {
                return Err(BisectRunError::Invalid {
                    why: w.verdict.render(&w.path, 3).trim().replace('\n', "; "),
                    path: w.path,
                });
            }
            let (g, c) = truecold_proof::bisect::ab_sides(&dest);
            let jd = judge(&g, &c, &f.judge).map_err(|source| BisectRunError::Judge {
                path: dest.clone(),
                source,
            })?;
            let o = jd.outcome;
            let why = jd.why.clone();
            eprintln!(
                "truecold bisect config: [{}] ({planned} launches a side): {} — {why}",
                set.join(" "),
                o.as_str()
            );
            log.push_str(&format!(
                "[{}] n={planned}: {} — {why}\n",
                set.join(" "),
                o.as_str()
            ));
            f.steps.push(config_step(
                set,
                t1,
                o,
                Some(rel),
                planned,
                Some(jd),
                why,
                Some(sha.to_string()),
            ));
            save(&self.out, f, log)?;
            if o == StepOutcome::Inconclusive && planned.saturating_mul(2) <= f.max_n {
                planned = planned.saturating_mul(2);
                continue;
            }
            self.seen.insert(sha.to_string(), f.steps.len() - 1);
            return Ok(o);
        }
    }
}

/// A config bisect's step for the candidate `set`, begun at `t1`.
#[allow(clippy::too_many_arguments)]
fn config_step(
    set: &[String],
    t1: Instant,
    outcome: StepOutcome,
    dir: Option<String>,
    planned: u64,
    judgement: Option<truecold_proof::bisect::Judgement>,
    why: String,
    sha: Option<String>,
) -> Step {
    Step {
        dir,
        commit: None,
        subject: None,
        symbols: set.to_vec(),
        config_sha256: sha,
        planned,
        outcome,
        judgement,
        why,
        wall_seconds: t1.elapsed().as_secs(),
    }
}

/// The new record of a config bisect between the resolved configs.
fn config_record(
    s: &ConfigSearch<'_>,
    bad_cfg: &str,
    (n, max_n): (u64, u64),
    invocation: &str,
) -> BisectFile {
    let a = s.a;
    BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Config,
        host_kind: s.host,
        clock: s.host.clock(),
        contract: ContractKind::Linux,
        vcpus: u32::from(a.context.guest.vcpus.get()),
        mem_bytes: a.context.guest.mem.bytes(),
        judge: a.judge.options(),
        n,
        max_n,
        source: a
            .kernel_tree
            .as_deref()
            .map(abs)
            .unwrap_or_else(|| "the pinned linux-source-6.12 (kernel-config/build.sh)".to_string()),
        good: format!("{} (resolved sha256 {})", a.good.display(), s.good_sha),
        bad: format!(
            "{} (resolved sha256 {})",
            a.bad.display(),
            sha256_hex(bad_cfg.as_bytes())
        ),
        steps: Vec::new(),
        result: None,
        wall_seconds: None,
        commands: vec![invocation.to_string()],
    }
}

/// `truecold bisect config`: returns the directory.
pub fn config(a: &ConfigBisectArgs, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let t0 = Instant::now();
    let sizes = a.judge.sizes()?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out("config", &a.context));
    if out.symlink_metadata().is_ok() {
        return Err(BisectRunError::OutExists(out));
    }
    let (base_dir, base) = a.judge.base()?;
    let (host, deadline_ms) = context_host(&a.context)?;
    let mut s = ConfigSearch {
        a,
        invocation,
        out: out.clone(),
        base_dir,
        base,
        host,
        deadline_ms,
        script: a.judge.script(),
        root: a.judge.kernel_root(),
        good_dir: PathBuf::new(),
        good_cfg: String::new(),
        good_sha: String::new(),
        bad_sha: String::new(),
        diff: Vec::new(),
        seen: BTreeMap::new(),
    };
    let good_in = read_text(&a.good)?;
    let bad_in = read_text(&a.bad)?;
    let good_dir = s
        .build(
            &a.good,
            &s.root.join(format!("config-{}", config_key(&good_in))),
        )
        .map_err(|e| BisectRunError::Kernel("good", e))?;
    let bad_dir = s
        .build(
            &a.bad,
            &s.root.join(format!("config-{}", config_key(&bad_in))),
        )
        .map_err(|e| BisectRunError::Kernel("bad", e))?;
    let good_cfg = read_text(&good_dir.join("config"))?;
    let bad_cfg = read_text(&bad_dir.join("config"))?;
    s.diff = config_diff(&good_cfg, &bad_cfg);
    if s.diff.is_empty() {
        return Err(BisectRunError::SameConfig);
    }
    std::fs::create_dir_all(out.join(STEPS_DIR)).map_err(io("create", &out))?;
    s.out = std::path::absolute(&out).map_err(io("resolve", &out))?;
    s.good_sha = sha256_hex(good_cfg.as_bytes());
    s.bad_sha = sha256_hex(bad_cfg.as_bytes());
    s.good_dir = good_dir;
    s.good_cfg = good_cfg;
    let mut f = config_record(&s, &bad_cfg, sizes, invocation);
    let mut log = format!(
        "truecold bisect config: {} assignment(s) differ between the resolved configs:\n{}\n",
        s.diff.len(),
        s.diff
            .iter()
            .map(|d| format!("  {d}\n"))
            .collect::<String>()
    );
    save(&s.out, &f, &log)?;
    // 1. The whole difference must be bad.
    let whole = s.measure(&s.diff.clone(), &mut f, &mut log)?;
    if whole != StepOutcome::Regression {
        f.result = Some(BisectResult::not_bisected(format!(
            "Not bisected: the bad config measured {} against the good one.",
            whole.as_str()
        )));
        f.wall_seconds = Some(t0.elapsed().as_secs());
        save(&s.out, &f, &log)?;
        return Err(BisectRunError::NotBad(whole.as_str().to_string()));
    }
    // 2. ddmin over the assignments.
    let probe = |o: StepOutcome| match o.exit_code() {
        1 => Probe::Fails,
        0 => Probe::Passes,
        _ => Probe::Unresolved,
    };
    let diff = s.diff.clone();
    let culprits = {
        let mut test = |set: &[String]| -> Result<Probe, BisectRunError> {
            Ok(probe(s.measure(set, &mut f, &mut log)?))
        };
        ddmin(diff, &mut test)?
    };
    // 3. Each culprit's effect alone (measured unless ddmin already did).
    let mut effects = Vec::new();
    for c in &culprits {
        let one = vec![c.clone()];
        let at = |f: &BisectFile| {
            f.steps
                .iter()
                .rposition(|st| st.symbols == one && st.outcome.measured())
        };
        if at(&f).is_none() {
            s.measure(&one, &mut f, &mut log)?;
        }
        if let Some(i) = at(&f) {
            effects.push((c.clone(), i));
        }
    }
    f.result = Some(config_result(&f, culprits, effects));
    f.wall_seconds = Some(t0.elapsed().as_secs());
    save(&s.out, &f, &log)?;
    Ok(s.out)
}

/// The result of a finished config bisect: the culprits, the step that measured them
/// together, each one's own effect.
fn config_result(
    f: &BisectFile,
    culprits: Vec<String>,
    effects: Vec<(String, usize)>,
) -> BisectResult {
    let bad_step = f
        .steps
        .iter()
        .rposition(|s| s.symbols == culprits && s.outcome.exit_code() == 1);
    BisectResult {
        first_bad: None,
        last_good: None,
        summary: format!(
            "Culprit{}: `{}` — the smallest set of the bad config's assignments found (ddmin) \
             that, applied to the good config, makes the boot slower.",
            if culprits.len() == 1 { "" } else { "s" },
            culprits.join("`, `")
        ),
        culprits,
        bad_step,
        good_step: None,
        effects,
    }
}

#[cfg(test)]
mod tests;
