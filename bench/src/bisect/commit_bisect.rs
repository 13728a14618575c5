//! The commit bisect: `truecold bisect step` (what `git bisect run` calls: build the
//! checkout, A/B it against the good side's kernel, judge, exit 0/1/125, 200 to stop) and
//! `truecold bisect run` (the good commit's baseline, the bad commit checked bad, then the
//! whole `git bisect` session with `step` as the judge).

use super::bisect_error::{io, BisectRunError};
use super::bisect_steps::{
    base, context_host, default_out, note_small_n, record_guest, save, KernelAb,
};
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::artifacts::kernel_build::{KernelBuild, KernelError};
use crate::artifacts::own_kernel;
use crate::artifacts::own_kernel::NotCarried;
use crate::artifacts::own_kernel::OwnKernel;
use crate::plan::bisect_plan::abs;
use crate::plan::bisect_plan::{BisectRunPlan, BisectStepPlan, JudgePlan};
use crate::plan::campaign_plan::CampaignPlan;
use crate::plan::guest::{GuestSpec, Target};
use crate::run::dispatch;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use truecold_proof::bisect::{
    read_bisect, BisectFile, BisectKind, BisectResult, Step, StepOutcome, BASELINE_DIR,
    BISECT_SCHEMA, LOG_FILE, STEPS_DIR,
};
use truecold_proof::kconfig::{not_carried_lines, UserKernel, USER_KERNEL_FILE};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::{Backing, HostKind};

/// Exit status of a step that could not judge at all (stops `git bisect run`).
pub const EXIT_ABORT: u8 = 200;

/// `git -C tree args…`'s stdout, trimmed.
pub(crate) fn git(tree: &Path, args: &[&str]) -> Result<String, BisectRunError> {
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

/// `tree` has no change to a tracked file (a step builds the commit as committed).
fn ensure_clean(tree: &Path) -> Result<(), BisectRunError> {
    if git(tree, &["status", "--porcelain", "--untracked-files=no"])?.is_empty() {
        Ok(())
    } else {
        Err(BisectRunError::Dirty(tree.to_path_buf()))
    }
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
    j: &JudgePlan,
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

/// Runs one campaign into `out` and checks it verifies.
fn campaign(ra: &CampaignPlan, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let o = dispatch::run(ra, invocation).map_err(|e| BisectRunError::Run(Box::new(e)))?;
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
    j: &JudgePlan,
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
    let (n, max_n) = (j.n, j.max_n);
    Ok(BisectFile {
        schema: BISECT_SCHEMA,
        kind: BisectKind::Commit,
        host_kind: r.environment.host_kind,
        clock: r.contract.clock,
        contract: r.contract.kind,
        vcpus: r.configuration.vcpus,
        mem_bytes: r.configuration.mem_bytes,
        judge: j.options.clone(),
        n,
        max_n,
        source: abs(tree),
        good: good.to_string(),
        bad: bad.to_string(),
        steps: Vec::new(),
        result: None,
        wall_seconds: None,
        commands: Vec::new(),
        kernel: None,
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

fn read_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default()
}

/// `truecold bisect step`: returns the exit code for `git bisect run`.
pub fn step(a: &BisectStepPlan, invocation: &str) -> Result<StepOutcome, BisectRunError> {
    let t0 = Instant::now();
    note_small_n(&a.judge);
    let baseline = if a
        .baseline
        .join(truecold_proof::names::BISECT_FILE)
        .is_file()
    {
        a.baseline.join(BASELINE_DIR)
    } else {
        a.baseline.clone()
    };
    let tree = &a.kernel_tree;
    let commit = git(tree, &["rev-parse", "HEAD"])?;
    let subject = git(tree, &["log", "-1", "--format=%s"])?;
    // The good commit: the record the baseline belongs to, else the step's directory's.
    let record_of = |d: &Path| {
        d.join(truecold_proof::names::BISECT_FILE)
            .is_file()
            .then(|| read_bisect(d).ok())
            .flatten()
    };
    let good = baseline
        .parent()
        .and_then(record_of)
        .or_else(|| record_of(&a.dir))
        .map(|f| f.good)
        .filter(|g| g != "?");
    let mut f = if a.dir.join(truecold_proof::names::BISECT_FILE).is_file() {
        let f = read_bisect(&a.dir).map_err(BisectRunError::Record)?;
        if f.schema != BISECT_SCHEMA {
            return Err(BisectRunError::OldSchema {
                dir: a.dir.clone(),
                schema: f.schema,
            });
        }
        let same = |p: &Path| std::fs::read(p.join("result.json")).ok();
        if same(&baseline) != same(&a.dir.join(BASELINE_DIR)) {
            return Err(BisectRunError::OtherBaseline {
                dir: a.dir.clone(),
                baseline,
            });
        }
        if let Some(k) = &a.own_kernel {
            same_kernel(&f, &a.dir, k)?;
        }
        f
    } else {
        let mut f = commit_record(
            &baseline,
            tree,
            good.as_deref().unwrap_or("?"),
            "?",
            &a.judge,
        )?;
        copy_dir(&baseline, &a.dir.join(BASELINE_DIR))?;
        if let Some(k) = &a.own_kernel {
            f.kernel = Some(own_kernel_record(k, &a.dir)?);
            carried_into(&mut f, &a.dir, &a.dir.join(BASELINE_DIR).join("config"))?;
        }
        f
    };
    let mut log = read_log(&a.dir);
    let good_dir = good_kernel(&baseline, good.as_deref(), &a.judge)?;
    let st = measure_commit(
        &mut f, &a.dir, tree, &commit, &subject, &a.judge, &good_dir, invocation,
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

/// The good side's guest directory for a step's A/B: the good commit's cached kernel
/// (`<kernel dir>/commit-<good>`), else the directory of the kernel the baseline recorded;
/// whichever holds the vmlinux the baseline measured (its sha256 in `result.json`).
fn good_kernel(
    baseline: &Path,
    good: Option<&str>,
    j: &JudgePlan,
) -> Result<PathBuf, BisectRunError> {
    let why = |w: String| BisectRunError::Baseline {
        path: baseline.to_path_buf(),
        why: w,
    };
    let (r, _) = truecold_proof::read_bundle(baseline)
        .map_err(|e| why(truecold_proto::measure::error_chain(&e)))?;
    let want = r
        .artifacts
        .get("vmlinux")
        .cloned()
        .ok_or_else(|| why("records no vmlinux digest".into()))?;
    good_places(good, r.configuration.kernel_path.as_deref(), &want, j).map_err(why)
}

/// Where [`good_kernel`] looks for the good side's kernel, whose vmlinux has sha256 `want`:
/// `<kernel dir>/commit-<good>` (truecold's base), its subdirectories (`<key>/`: built from
/// the user's kernel), and the directory of the baseline's recorded `kernel_path`. The
/// first that holds it, or why none does.
fn good_places(
    good: Option<&str>,
    kernel_path: Option<&str>,
    want: &str,
    j: &JudgePlan,
) -> Result<PathBuf, String> {
    let mut places = Vec::new();
    if let Some(g) = good {
        let commit_dir = j.paths.kernel_root.join(format!("commit-{g}"));
        places.push(commit_dir.clone());
        if let Ok(entries) = std::fs::read_dir(&commit_dir) {
            let mut subs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            subs.sort();
            places.extend(subs);
        }
    }
    if let Some(p) = kernel_path.map(Path::new) {
        places.extend(p.parent().map(Path::to_path_buf));
    }
    for p in &places {
        if guest_files::sha256_file(&p.join("vmlinux")).is_ok_and(|d| d == want) {
            return Ok(p.clone());
        }
    }
    Err(format!(
        "the good side's kernel (vmlinux sha256 {want}) is in none of [{}]: a step A/Bs \
         against it; pass the run's --kernel-dir",
        places
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The guest directory of the checked-out `commit` of `tree`: truecold's base fragments on
/// its tinyconfig (`kernel-config/build.sh base`, into `<kernel dir>/commit-<commit>`), or,
/// when the record names the user's kernel, that config (the file beside the record in
/// `dir`) resolved by olddefconfig on this commit, through
/// [`crate::artifacts::own_kernel::prepare`]'s checks and build (into `<kernel
/// dir>/commit-<commit>/<key>`). A kernel that did not build, or whose resolved config lost
/// what strict-ready needs, is [`BisectRunError::CommitBuild`] (a step skips it).
pub(super) fn commit_kernel(
    f: &BisectFile,
    dir: &Path,
    tree: &Path,
    commit: &str,
    j: &JudgePlan,
    base: &LinuxGuest,
) -> Result<PathBuf, BisectRunError> {
    use crate::artifacts::own_kernel::OwnKernelError;
    let kdir = j.paths.kernel_root.join(format!("commit-{commit}"));
    let failed = |e: &dyn std::error::Error| {
        let why = truecold_proto::measure::error_chain(e);
        BisectRunError::CommitBuild(why.lines().last().unwrap_or("").to_string())
    };
    let Some(k) = &f.kernel else {
        let build = KernelBuild {
            script: &j.paths.script,
            variant: "base",
            args: Vec::new(),
            tree: Some(tree),
            git_dir: None,
            lineage: None,
            lineage_from: None,
        };
        return match build.guest_dir(&kdir, base) {
            Ok(d) => Ok(d),
            Err(e @ KernelError::Failed { .. }) => Err(failed(&e)),
            Err(e) => Err(BisectRunError::Kernel("step", e)),
        };
    };
    let own = OwnKernel {
        config: dir.join(USER_KERNEL_FILE),
        form: k.form,
        source: Some(tree.to_path_buf()),
    };
    match own_kernel::prepare(&own, f.vcpus, &[], &j.paths.script, base, &kdir) {
        Ok((d, _)) => Ok(d),
        Err(OwnKernelError::Build(e @ KernelError::Failed { .. })) => Err(failed(&e)),
        Err(e @ OwnKernelError::Lost { .. }) => Err(failed(&e)),
        Err(e) => Err(e.into()),
    }
}

/// The record of the user's kernel `k` for a bisect directory `dir`: the file copied beside
/// the record (what every commit is built from), its digest; the symbols that did not carry
/// over are filled in once the good side's config is known ([`carried_into`]).
fn own_kernel_record(k: &OwnKernel, dir: &Path) -> Result<UserKernel, BisectRunError> {
    let (bytes, _) = own_kernel::read_config(&k.config)?;
    let to = dir.join(USER_KERNEL_FILE);
    std::fs::write(&to, &bytes).map_err(io("write", &to))?;
    Ok(UserKernel {
        form: k.form,
        sha256: truecold_proof::digest::sha256_hex(&bytes),
        given_as: k.config.display().to_string(),
        source: None,
        not_carried: Vec::new(),
    })
}

/// A step given `--kernel-config`/`--kernel-fragment` `k` on a directory whose record builds
/// every commit otherwise: refused (a bisect builds every commit from one config).
fn same_kernel(f: &BisectFile, dir: &Path, k: &OwnKernel) -> Result<(), BisectRunError> {
    let (bytes, _) = own_kernel::read_config(&k.config)?;
    let given = truecold_proof::digest::sha256_hex(&bytes);
    match &f.kernel {
        Some(r) if r.sha256 == given && r.form == k.form => Ok(()),
        r => Err(BisectRunError::OtherKernel {
            dir: dir.to_path_buf(),
            recorded: match r {
                Some(r) => format!("{} {} (sha256 {})", r.form.flag(), r.given_as, r.sha256),
                None => "truecold's base fragments".into(),
            },
            given: format!("{} {} (sha256 {given})", k.form.flag(), k.config.display()),
        }),
    }
}

/// The record's symbols of the user's kernel that did not carry over into the good side's
/// resolved `config` (the baseline's), noted.
fn carried_into(f: &mut BisectFile, dir: &Path, config: &Path) -> Result<(), BisectRunError> {
    let Some(k) = f.kernel.as_mut() else {
        return Ok(());
    };
    let user = dir.join(USER_KERNEL_FILE);
    let read = |p: &Path| std::fs::read(p).map_err(io("read", p));
    let (u, c) = (read(&user)?, read(config)?);
    k.not_carried = not_carried_lines(&String::from_utf8_lossy(&u), &String::from_utf8_lossy(&c));
    let nc: Vec<NotCarried> = own_kernel::not_carried(
        &own_kernel::parse_config(&String::from_utf8_lossy(&u)),
        &own_kernel::parse_config(&String::from_utf8_lossy(&c)),
    );
    own_kernel::note_not_carried(
        "good side's ",
        Path::new(&k.given_as),
        config.parent().unwrap_or(Path::new(".")),
        &nc,
    );
    Ok(())
}

/// Builds the checked-out commit and measures it (growing n while inconclusive), appending
/// one step per campaign to `f` and saving the directory after each.
#[allow(clippy::too_many_arguments)]
fn measure_commit(
    f: &mut BisectFile,
    dir: &Path,
    tree: &Path,
    commit: &str,
    subject: &str,
    j: &JudgePlan,
    good_dir: &Path,
    invocation: &str,
) -> Result<StepOutcome, BisectRunError> {
    let t0 = Instant::now();
    let (_, base) = base(j)?;
    ensure_clean(tree)?;
    let built = commit_kernel(f, dir, tree, commit, j, &base);
    measure_built(f, dir, commit, subject, j, good_dir, invocation, built, t0)
}

/// [`measure_commit`] once `commit`'s kernel is `built` (or did not build): the step's looks.
#[allow(clippy::too_many_arguments)]
fn measure_built(
    f: &mut BisectFile,
    dir: &Path,
    commit: &str,
    subject: &str,
    j: &JudgePlan,
    good_dir: &Path,
    invocation: &str,
    built: Result<PathBuf, BisectRunError>,
    t0: Instant,
) -> Result<StepOutcome, BisectRunError> {
    let mk = |outcome, dir: Option<String>, planned, judgement, why: String, secs| Step {
        dir,
        commit: Some(commit.to_string()),
        subject: Some(subject.to_string()),
        symbols: Vec::new(),
        config_sha256: None,
        planned,
        look: None,
        outcome,
        judgement,
        why,
        wall_seconds: secs,
    };
    let guest = match built {
        Ok(d) => d,
        Err(BisectRunError::CommitBuild(last)) => {
            crate::note!(
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
        Err(e) => return Err(e),
    };
    let (backing, deadline_ms) = baseline_context(&dir.join(BASELINE_DIR))?;
    let ab = KernelAb {
        nested: f.host_kind == HostKind::NestedEmulated,
        vmm: j.paths.vmm.as_deref(),
        base_dir: &j.paths.guest_dir,
        good_dir,
        backing,
        deadline_ms,
        invocation,
    };
    let mut look = 1;
    loop {
        let t1 = Instant::now();
        let (rel, planned, jd) = ab.look(f, dir, &guest, short(commit), look)?;
        let outcome = jd.outcome;
        let why = jd.why.clone();
        crate::note!(
            "truecold bisect: {} (look {look}, {planned} launches a side): {} — {why}",
            short(commit),
            outcome.as_str()
        );
        // The first look's step carries the build; a later one only its own A/B.
        let secs = if look == 1 { t0 } else { t1 }.elapsed().as_secs();
        let mut st = mk(outcome, Some(rel), planned, Some(jd), why, secs);
        st.look = Some(look);
        f.steps.push(st);
        save(dir, f, &read_log(dir))?;
        match f.looks().next(look, outcome) {
            Some(next) => look = next,
            None => return Ok(outcome),
        }
    }
}

/// `truecold bisect run`: the whole session; returns the directory.
pub fn run(a: &BisectRunPlan, invocation: &str) -> Result<PathBuf, BisectRunError> {
    let t0 = Instant::now();
    note_small_n(&a.judge);
    let tree = std::path::absolute(&a.kernel_tree).map_err(io("resolve", &a.kernel_tree))?;
    let n = a.judge.n;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_out("commit", &a.context));
    if out.symlink_metadata().is_ok() {
        return Err(BisectRunError::OutExists(out));
    }
    let out = std::path::absolute(&out).map_err(io("resolve", &out))?;
    ensure_clean(&tree)?;
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
    a: &'a BisectRunPlan,
    tree: &'a Path,
    good: &'a str,
    bad: &'a str,
    out: &'a Path,
    invocation: &'a str,
}

fn run_session(s: &Session<'_>, n: u64, t0: Instant) -> Result<(), BisectRunError> {
    let (mut f, mut log, good_dir) = s.baseline(n)?;
    // 2. The bad commit must be bad, or there is nothing to look for.
    let (tree, bad, out) = (s.tree, s.bad, s.out);
    git(tree, &["checkout", "--quiet", bad])?;
    let subject = git(tree, &["log", "-1", "--format=%s"])?;
    let o = measure_commit(
        &mut f,
        out,
        tree,
        bad,
        &subject,
        &s.a.judge,
        &good_dir,
        s.invocation,
    )?;
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
    save(out, &f, &log)?;
    if let Some(r) = f.result.clone() {
        if let (Some(bad), Some(parent), true) = (&r.first_bad, &r.last_good, s.a.profile > 0) {
            s.profile_culprit(&mut f, bad, parent)?;
        }
    }
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
    /// The baseline (1.): the good commit, measured once, into a new record; the good
    /// side's kernel is what every step's A/B boots as its arm `good`. Returns the record,
    /// the log and the good kernel's guest directory.
    fn baseline(&self, n: u64) -> Result<(BisectFile, String, PathBuf), BisectRunError> {
        let (tree, good) = (self.tree, self.good);
        self.baseline_built(n, &|f, base| {
            git(tree, &["checkout", "--quiet", good])?;
            commit_kernel(f, self.out, tree, good, &self.a.judge, base)
        })
    }

    /// [`Session::baseline`], the good commit's kernel given by `build` (the record, the base
    /// guest).
    fn baseline_built(
        &self,
        n: u64,
        build: &dyn Fn(&BisectFile, &LinuxGuest) -> Result<PathBuf, BisectRunError>,
    ) -> Result<(BisectFile, String, PathBuf), BisectRunError> {
        let (a, tree, good, out) = (self.a, self.tree, self.good, self.out);
        let (_, base) = base(&a.judge)?;
        let (host, deadline_ms) = context_host(&a.context)?;
        std::fs::create_dir_all(out.join(STEPS_DIR)).map_err(io("create", out))?;
        let mut f = BisectFile {
            schema: BISECT_SCHEMA,
            kind: BisectKind::Commit,
            host_kind: host,
            clock: host.clock(),
            contract: ContractKind::Linux,
            vcpus: u32::from(a.context.vcpus.get()),
            mem_bytes: a.context.mem.bytes(),
            judge: a.judge.options.clone(),
            n,
            max_n: a.judge.max_n,
            source: tree.display().to_string(),
            good: good.to_string(),
            bad: self.bad.to_string(),
            steps: Vec::new(),
            result: None,
            wall_seconds: None,
            commands: Vec::new(),
            kernel: a
                .own_kernel
                .as_ref()
                .map(|k| own_kernel_record(k, out))
                .transpose()?,
        };
        let guest = build(&f, &base).map_err(|e| match e {
            BisectRunError::CommitBuild(why) => BisectRunError::Baseline {
                path: tree.to_path_buf(),
                why: format!("the good commit's kernel did not build: {why}"),
            },
            e => e,
        })?;
        carried_into(&mut f, out, &guest.join("config"))?;
        crate::note!("truecold bisect: baseline: {} ({n} launches)", short(good));
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
        Ok((f, log, guest))
    }

    /// The culprit's differential profile against its parent (`--profile K`): each kernel
    /// built (cached by commit) and measured by one campaign of one launch and K RIP-sampled
    /// attribution launches into `profile/parent` and `profile/culprit`; the record then
    /// attaches them and the table and flame graph their lines give
    /// (`truecold_proof::bisect::culprit_profile_files`, written with the record).
    fn profile_culprit(
        &self,
        f: &mut BisectFile,
        bad: &str,
        parent: &str,
    ) -> Result<(), BisectRunError> {
        use truecold_proof::bisect::{
            CulpritProfile, CULPRIT_PROFILE, PARENT_PROFILE, PROFILE_DIR,
        };
        let (a, tree, out) = (self.a, self.tree, self.out);
        let (_, base) = base(&a.judge)?;
        let (backing, deadline_ms) = baseline_context(&out.join(BASELINE_DIR))?;
        for (side, commit) in [(PARENT_PROFILE, parent), (CULPRIT_PROFILE, bad)] {
            git(tree, &["checkout", "--quiet", commit])?;
            let guest = commit_kernel(f, out, tree, commit, &a.judge, &base)?;
            crate::note!(
                "truecold bisect: profile of the {side} {}: {} attribution launches",
                short(commit),
                a.profile
            );
            let mut ra = campaign_plan(
                f,
                backing,
                deadline_ms,
                1,
                &a.judge,
                &guest,
                &out.join(PROFILE_DIR).join(side),
            )?;
            ra.attribution = a.profile;
            campaign(&ra, self.invocation)?;
        }
        if let Some(r) = f.result.as_mut() {
            r.profile = Some(CulpritProfile {
                attribution: a.profile,
            });
        }
        save(out, f, &read_log(out))
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
        crate::note!("truecold bisect: git bisect run {}", step_cmd.join(" "));
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
            profile: None,
        }
    }
}

/// Holds a kernel tree's checkout lock (`<git dir>/truecold-checkout.lock`, `flock`) while
/// alive: the tasks of a fleet sharing one tree take turns to check their commit out and
/// build it, then measure in parallel.
struct TreeLock(#[allow(dead_code)] std::fs::File);

impl TreeLock {
    fn take(tree: &Path) -> Result<TreeLock, BisectRunError> {
        use std::os::fd::AsRawFd;
        let gd = PathBuf::from(git(tree, &["rev-parse", "--absolute-git-dir"])?);
        let p = gd.join("truecold-checkout.lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(io("open", &p))?;
        loop {
            // SAFETY: flock(2) on the descriptor `f` owns, open for the whole call; no memory
            // is passed. The lock is released when `f` is closed (the guard dropped).
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(TreeLock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io("lock", &p)(e));
            }
        }
    }
}

/// `commit`'s kernel (see [`commit_kernel`]) built with `tree` checked out at it under the
/// tree's checkout lock, the tree put back where it was after, whatever the build did.
fn build_at(
    f: &BisectFile,
    dir: &Path,
    tree: &Path,
    commit: &str,
    j: &JudgePlan,
    base: &LinuxGuest,
) -> Result<PathBuf, BisectRunError> {
    let _lock = TreeLock::take(tree)?;
    ensure_clean(tree)?;
    let start = git(tree, &["symbolic-ref", "-q", "--short", "HEAD"])
        .or_else(|_| git(tree, &["rev-parse", "HEAD"]))?;
    git(tree, &["checkout", "--quiet", "--detach", commit])?;
    let built = commit_kernel(f, dir, tree, commit, j, base);
    git(tree, &["checkout", "--quiet", &start])?;
    built
}

/// A fleet's bisect wave, its first shard (docs/fleet.md): the good commit's baseline, as
/// `bisect run` measures it, into a new bisect directory `out` with no step yet.
pub fn fleet_baseline(
    a: &BisectRunPlan,
    good: &str,
    bad: &str,
    out: &Path,
    invocation: &str,
) -> Result<(), BisectRunError> {
    note_small_n(&a.judge);
    let tree = std::path::absolute(&a.kernel_tree).map_err(io("resolve", &a.kernel_tree))?;
    let s = Session {
        a,
        tree: &tree,
        good,
        bad,
        out,
        invocation,
    };
    s.baseline_built(a.judge.n, &|f, base| {
        build_at(f, out, &tree, good, &a.judge, base)
    })?;
    Ok(())
}

/// A fleet's bisect probe: `commit` built (under the tree's lock) and measured as one step of
/// `bisect step` against the wave's baseline shard (a bisect directory), into a new bisect
/// directory `out` holding that baseline and this one step (its looks).
pub fn fleet_probe(
    a: &BisectRunPlan,
    baseline: &Path,
    commit: &str,
    out: &Path,
    invocation: &str,
) -> Result<StepOutcome, BisectRunError> {
    let t0 = Instant::now();
    note_small_n(&a.judge);
    let tree = std::path::absolute(&a.kernel_tree).map_err(io("resolve", &a.kernel_tree))?;
    let mut f = read_bisect(baseline).map_err(BisectRunError::Record)?;
    f.steps.clear();
    f.result = None;
    f.wall_seconds = None;
    f.commands = vec![invocation.to_string()];
    std::fs::create_dir_all(out.join(STEPS_DIR)).map_err(io("create", out))?;
    copy_dir(&baseline.join(BASELINE_DIR), &out.join(BASELINE_DIR))?;
    if f.kernel.is_some() {
        let to = out.join(USER_KERNEL_FILE);
        std::fs::copy(baseline.join(USER_KERNEL_FILE), &to).map_err(io("copy", &to))?;
    }
    let subject = git(&tree, &["log", "-1", "--format=%s", commit])?;
    let good_dir = good_kernel(&out.join(BASELINE_DIR), Some(&f.good), &a.judge)?;
    let (_, base) = base(&a.judge)?;
    let mut log = format!(
        "truecold fleet: a bisect probe of {} against the good commit {}\n",
        short(commit),
        short(&f.good)
    );
    save(out, &f, &log)?;
    let built = build_at(&f, out, &tree, commit, &a.judge, &base);
    let st = measure_built(
        &mut f, out, commit, &subject, &a.judge, &good_dir, invocation, built, t0,
    )?;
    log.push_str(&format!(
        "step {}: {} — {} ({} s)\n",
        short(commit),
        st.as_str(),
        f.steps.last().map(|s| s.why.as_str()).unwrap_or(""),
        t0.elapsed().as_secs()
    ));
    f.wall_seconds = Some(t0.elapsed().as_secs());
    save(out, &f, &log)?;
    Ok(st)
}

#[cfg(test)]
mod tests;
