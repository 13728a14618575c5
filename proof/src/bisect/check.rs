//! The bisect directory's verifier (see [`crate::bisect`]'s module doc).

use std::collections::BTreeMap;
use std::path::Path;

use super::judge::*;
use super::model::*;
use super::readme::*;
use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::names::{BISECT_FILE, CANDIDATE_ARM, GOOD_ARM, README_FILE, SUMS_FILE};
use crate::skeleton::check::check_signature;
use crate::verdict::{Check, Verdict, VerifyOptions};

/// Verifies a bisect directory (see the module doc).
pub fn verify_bisect_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let p = dir.join(BISECT_FILE);
    let bytes = match read_capped(&p, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{BISECT_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return v;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {BISECT_FILE}: {e}"));
            return v;
        }
    };
    let file = match serde_json::from_slice::<BisectFile>(&bytes) {
        Ok(f) if f.schema != BISECT_SCHEMA && f.schema != BISECT_SCHEMA_V1 => {
            v.add(
                Check::BisectRecord,
                format!(
                    "{BISECT_FILE}: schema {}, this verifier reads {BISECT_SCHEMA_V1} and \
                     {BISECT_SCHEMA}",
                    f.schema
                ),
            );
            None
        }
        Ok(f) => {
            if bisect_bytes(&f) != bytes {
                v.add(
                    Check::BisectRecord,
                    format!("{BISECT_FILE} is not in the writer's canonical form"),
                );
            }
            Some(f)
        }
        Err(e) => {
            v.add(
                Check::BisectRecord,
                format!("{BISECT_FILE} does not parse: {e}"),
            );
            None
        }
    };
    for r in [BISECT_FILE, README_FILE, LOG_FILE, SUMS_FILE] {
        if !crate::fsio::is_real_file(&dir.join(r)) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing"),
            );
        }
    }
    let Some((sums, sig)) = crate::skeleton::check::check_tree_sums(
        &mut v,
        dir,
        4,
        parse_bisect_sums,
        "a step's directory",
    ) else {
        return v;
    };
    if let Some(f) = &file {
        v.label = Some(format!(
            "bisect of {} ({} step(s), {} clock){}",
            match f.kind {
                BisectKind::Commit => "commits",
                BisectKind::Config => "config symbols",
            },
            f.steps.len(),
            f.clock.as_str(),
            match &f.result {
                Some(r) => match (&r.first_bad, r.culprits.is_empty()) {
                    (Some(c), _) => format!(": first bad commit {c}"),
                    (None, false) => format!(": culprits {}", r.culprits.join(", ")),
                    (None, true) => ": no culprit".to_string(),
                },
                None => ": under way".to_string(),
            }
        ));
        check_record(&mut v, dir, f);
        if f.kind == BisectKind::Config && f.kernel.is_some() {
            v.add(
                Check::UserKernel,
                format!(
                    "{BISECT_FILE}: a config bisect records a user's kernel (its good and bad \
                     configs are the user's)"
                ),
            );
        }
        crate::kconfig::check_user_kernel(
            &mut v,
            dir,
            f.kernel.as_ref(),
            &dir.join(BASELINE_DIR).join(crate::names::CONFIG_FILE),
        );
        let readme_bytes = read_capped(&dir.join(README_FILE), MAX_PARSED_BYTES)
            .ok()
            .flatten();
        if readme_bytes.as_deref() != Some(readme(f).as_bytes()) {
            v.add_file(
                Check::GeneratedStale,
                README_FILE,
                format!("{README_FILE} is not what {BISECT_FILE} gives"),
            );
        }
    }
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    v
}

/// Every step that reuses an earlier step's campaign directory without being a config step
/// with the same resolved config: none is allowed.
fn bad_reuses(f: &BisectFile) -> Vec<String> {
    let mut first_use: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    let mut bad = Vec::new();
    for (i, st) in f.steps.iter().enumerate() {
        let Some(d) = st.dir.as_deref().filter(|_| st.outcome.measured()) else {
            continue;
        };
        match first_use.get(d) {
            Some(&(k, sha)) => {
                if f.kind != BisectKind::Config || sha != st.config_sha256.as_deref() {
                    bad.push(format!(
                        "step {}: reuses step {}'s campaign `{d}` without its resolved config",
                        i + 1,
                        k + 1
                    ));
                }
            }
            None => {
                first_use.insert(d, (i, st.config_sha256.as_deref()));
            }
        }
    }
    bad
}

/// Every directory of the record verifies and every step's judgement is recomputed: the
/// baseline ([`Steps::baseline`]), each step ([`check_steps`]), then the result
/// ([`check_result`]).
fn check_record(v: &mut Verdict, dir: &Path, f: &BisectFile) {
    let mut st = Steps {
        dir,
        f,
        rows: 0,
        clock0: None,
        baseline_kernel: None,
    };
    if f.kind == BisectKind::Commit {
        st.baseline(v);
    }
    // A step may point at an earlier step's campaign (a config candidate that resolves like
    // an earlier one): only with the same resolved config, and it is verified once. A record
    // reusing a campaign otherwise is refused before any step is verified.
    let bad_reuse = bad_reuses(f);
    if !bad_reuse.is_empty() {
        for why in bad_reuse {
            v.add(Check::BisectSteps, why);
        }
        v.rows = Some(st.rows);
        return;
    }
    check_steps(v, &mut st);
    v.rows = Some(st.rows);
    if f.ab_steps() {
        check_looks(v, f);
    }
    check_result(v, f);
    check_profile(v, &mut st);
}

/// The culprit's differential profile ([`CulpritProfile`]): with one recorded, both bundles
/// verify (never through a link), on the record's clock, with as many attribution launches
/// as recorded, and the table and flame graph are what their `attribution.jsonl` give
/// ([`culprit_profile_files`]); without one, no [`PROFILE_DIR`].
fn check_profile(v: &mut Verdict, st: &mut Steps<'_>) {
    let (dir, f) = (st.dir, st.f);
    let recorded = f.result.as_ref().and_then(|r| r.profile.as_ref());
    let Some(p) = recorded else {
        if crate::fsio::exists_here(&dir.join(PROFILE_DIR)) {
            v.add(
                Check::BisectSteps,
                format!("`{PROFILE_DIR}` beside a record that attaches no differential profile"),
            );
        }
        return;
    };
    if f.kind != BisectKind::Commit
        || f.result
            .as_ref()
            .and_then(|r| r.first_bad.as_ref())
            .is_none()
    {
        v.add(
            Check::BisectSteps,
            "a differential profile without a first bad commit".to_string(),
        );
        return;
    }
    for side in [PARENT_PROFILE, CULPRIT_PROFILE] {
        let rel = format!("{PROFILE_DIR}/{side}");
        if !crate::fsio::is_real_dir_below(dir, &rel) {
            v.add(
                Check::BisectSteps,
                format!("`{rel}` is not a directory (a link is never followed)"),
            );
            return;
        }
        let bv = verify_dir(&dir.join(&rel));
        if let Some(u) = &bv.unreadable {
            v.add(Check::BisectSteps, format!("{rel}: unreadable: {u}"));
        }
        v.add_inner(&rel, &bv);
        if let Some(r) = &bv.result {
            if r.contract.clock != f.clock || r.environment.host_kind != f.host_kind {
                v.add(
                    Check::BisectSteps,
                    format!("{rel}: on another clock or host kind than {BISECT_FILE} says"),
                );
            }
            st.one_clock(v, &rel, &r.environment);
        }
        let launches = crate::fsio::read_file(
            &dir.join(&rel).join(crate::attribution::JSONL_FILE),
            crate::attribution::JSONL_MAX_BYTES,
        )
        .ok()
        .and_then(|b| crate::attribution::parse_lines(&b).ok())
        .map_or(0, |l| l.len() as u64);
        if launches != p.attribution {
            v.add(
                Check::BisectSteps,
                format!(
                    "{rel}: {launches} attribution launch(es), {BISECT_FILE} records {}",
                    p.attribution
                ),
            );
        }
    }
    match culprit_profile_files(dir) {
        Err(why) => v.add(Check::Attribution, format!("{PROFILE_DIR}: {why}")),
        Ok(files) => {
            for (name, want) in files {
                let rel = format!("{PROFILE_DIR}/{name}");
                let got = read_capped(&dir.join(&rel), MAX_PARSED_BYTES)
                    .ok()
                    .flatten();
                if got.as_deref() != Some(want.as_slice()) {
                    v.add_file(
                        Check::Attribution,
                        &rel,
                        format!(
                            "{rel} is not what the two bundles' attribution launches give \
                             (missing, or hand-edited)"
                        ),
                    );
                }
            }
        }
    }
}

/// The differential profile's generated files ([`PROFILE_TABLE`], [`PROFILE_FLAME`]) from
/// `dir`'s `profile/parent` and `profile/culprit` bundles' `attribution.jsonl` (each read
/// capped), or why they cannot be made.
pub fn culprit_profile_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let lines = |side: &str| -> Result<Vec<crate::attribution::AttributionLine>, String> {
        let p = dir
            .join(PROFILE_DIR)
            .join(side)
            .join(crate::attribution::JSONL_FILE);
        let b = crate::fsio::read_file(&p, crate::attribution::JSONL_MAX_BYTES)
            .map_err(|e| format!("{side}: {e}"))?;
        crate::attribution::parse_lines(&b).map_err(|e| format!("{side}: {e}"))
    };
    let (a, b) = (lines(PARENT_PROFILE)?, lines(CULPRIT_PROFILE)?);
    let d = crate::attribution::differential(&a, &b)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            "a side has no attribution launch that reached strict-ready with RIP samples"
                .to_string()
        })?;
    Ok(vec![
        (
            PROFILE_TABLE.to_string(),
            d.markdown("the first bad commit (B) against its parent (A)")
                .into_bytes(),
        ),
        (PROFILE_FLAME.to_string(), d.flame_svg().into_bytes()),
    ])
}

/// The campaigns of a bisect record as they are verified: the rows counted, and the first
/// one's environment (every campaign of the record is on one virtual clock: the same L0
/// QEMU, L1 kernel and L1 CPUs).
pub(super) struct Steps<'a> {
    dir: &'a Path,
    f: &'a BisectFile,
    rows: usize,
    clock0: Option<(String, crate::schema::Environment)>,
    /// The baseline's kernel and config digests (schema 2: every step's good arm boots them).
    baseline_kernel: Option<KernelDigests>,
}

/// A bundle's `vmlinux` and `config` digests.
type KernelDigests = (Option<String>, Option<String>);

fn kernel_digests(r: &crate::schema::ResultJson) -> KernelDigests {
    (
        r.artifacts.get("vmlinux").cloned(),
        r.artifacts.get("config").cloned(),
    )
}

impl Steps<'_> {
    /// The campaign at `rel` is on the first one's virtual clock.
    fn one_clock(&mut self, v: &mut Verdict, rel: &str, env: &crate::schema::Environment) {
        match &self.clock0 {
            None => self.clock0 = Some((rel.to_string(), env.clone())),
            Some((r0, e0)) => {
                if let Some(d) = crate::schema::virtual_clock_differs(e0, env) {
                    v.add(
                        Check::BisectSteps,
                        format!("{rel}: on another virtual clock than {r0} ({d})"),
                    );
                }
            }
        }
    }

    /// The step directory `rel` (under `steps/`, reached through real directories only)
    /// verifies, on the record's clock; whether it is valid.
    fn step(&mut self, v: &mut Verdict, rel: &str) -> bool {
        let (dir, f) = (self.dir, self.f);
        if !is_valid_bisect_path(rel) || rel.split('/').next() != Some(STEPS_DIR) {
            v.add(
                Check::BisectSteps,
                format!("step directory `{rel}` is not under `{STEPS_DIR}/`"),
            );
            return false;
        }
        let d = dir.join(rel);
        if crate::fsio::exists_here(&d) && !crate::fsio::is_real_dir_below(dir, rel) {
            v.add(
                Check::BisectSteps,
                format!("step directory `{rel}` is not a directory (a link is never followed)"),
            );
            return false;
        }
        let sv = verify_dir(&d);
        self.rows += sv.rows.unwrap_or(0);
        if let Some(u) = &sv.unreadable {
            v.add(Check::BisectSteps, format!("{rel}: unreadable: {u}"));
        }
        v.add_inner(rel, &sv);
        if let Some(r) = &sv.result {
            if r.contract.clock != f.clock || r.environment.host_kind != f.host_kind {
                v.add(
                    Check::BisectSteps,
                    format!("{rel}: on another clock or host kind than {BISECT_FILE} says"),
                );
            }
            self.one_clock(v, rel, &r.environment);
        }
        sv.is_valid()
    }

    /// A commit bisect's baseline verifies (never through a link), on the record's clock,
    /// host kind, vCPUs and memory.
    fn baseline(&mut self, v: &mut Verdict) {
        let f = self.f;
        let b = self.dir.join(BASELINE_DIR);
        let bv = if !crate::fsio::exists_here(&b) || crate::fsio::is_real_dir(&b) {
            verify_dir(&b)
        } else {
            Verdict {
                unreadable: Some(format!(
                    "`{BASELINE_DIR}` is not a directory (a link is never followed)"
                )),
                ..Verdict::default()
            }
        };
        // Its reasons one by one, as a step's (each naming its file, so `report` can tell
        // a stale README, which it regenerates, from a changed row, which it refuses).
        if let Some(u) = &bv.unreadable {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: unreadable: {u}"),
            );
        }
        v.add_inner(BASELINE_DIR, &bv);
        let Some(r) = &bv.result else { return };
        self.baseline_kernel = Some(kernel_digests(r));
        self.one_clock(v, BASELINE_DIR, &r.environment);
        if r.contract.clock != f.clock || r.environment.host_kind != f.host_kind {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: on another clock or host kind than {BISECT_FILE} says"),
            );
        }
        if r.configuration.vcpus != f.vcpus || r.configuration.mem_bytes != f.mem_bytes {
            v.add(
                Check::BisectSteps,
                format!("{BASELINE_DIR}: not the recorded vCPUs / memory"),
            );
        }
    }
}

/// Each step: a measured one's campaign verifies (once, however many steps name it) and its
/// judgement recomputes; an unmeasured one has neither campaign nor judgement.
fn check_steps(v: &mut Verdict, sc: &mut Steps<'_>) {
    let (dir, f) = (sc.dir, sc.f);
    let o = f.judge.clone();
    let mut first_use: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    for (i, st) in f.steps.iter().enumerate() {
        match (&st.dir, st.outcome.measured()) {
            (Some(d), true) => {
                if let Some(&(k, sha)) = first_use.get(d.as_str()) {
                    if f.kind != BisectKind::Config || sha != st.config_sha256.as_deref() {
                        v.add(
                            Check::BisectSteps,
                            format!(
                                "step {}: reuses step {}'s campaign `{d}` without its resolved config",
                                i + 1,
                                k + 1
                            ),
                        );
                        continue;
                    }
                    if f.steps[k].judgement != st.judgement || f.steps[k].outcome != st.outcome {
                        v.add(
                            Check::BisectSteps,
                            format!(
                                "step {}: reuses step {}'s campaign with another judgement",
                                i + 1,
                                k + 1
                            ),
                        );
                    }
                    continue;
                }
                first_use.insert(d.as_str(), (i, st.config_sha256.as_deref()));
                // Only inside the directory, through real directories (`step` says why not).
                let inside = is_valid_bisect_path(d)
                    && d.split('/').next() == Some(STEPS_DIR)
                    && crate::fsio::is_real_dir_below(dir, d);
                let ab_ok = !(f.ab_steps() || f.kind == BisectKind::Config)
                    || (inside && check_ab(v, sc, i, d, st));
                if !sc.step(v, d) || !ab_ok {
                    continue;
                }
                let (g, s) = step_sides(dir, f, d);
                let j = if f.ab_steps() {
                    judge_look(&g, &s, &o, &f.looks())
                } else {
                    judge(&g, &s, &o)
                };
                match j {
                    Ok(j) => {
                        if Some(&j) != st.judgement.as_ref() || j.outcome != st.outcome {
                            v.add(
                                Check::BisectSteps,
                                format!(
                                    "step {}: recorded {}, the rows give {} ({})",
                                    i + 1,
                                    st.outcome.as_str(),
                                    j.outcome.as_str(),
                                    j.why
                                ),
                            );
                        }
                    }
                    Err(e) => v.add(
                        Check::BisectSteps,
                        format!("step {}: {}", i + 1, crate::verdict::chain(&e)),
                    ),
                }
            }
            (None, false) => {
                if st.judgement.is_some() {
                    v.add(
                        Check::BisectSteps,
                        format!("step {}: a judgement without a campaign", i + 1),
                    );
                }
            }
            (Some(_), false) => v.add(
                Check::BisectSteps,
                format!(
                    "step {}: {} with a campaign directory",
                    i + 1,
                    st.outcome.as_str()
                ),
            ),
            (None, true) => v.add(
                Check::BisectSteps,
                format!(
                    "step {}: {} without its campaign directory",
                    i + 1,
                    st.outcome.as_str()
                ),
            ),
        }
    }
}

/// A step's A/B (schema 2, and every config step): both arms present, the directory a kernel
/// A/B of `good` and `candidate` whose order interleaves them (each round both arms once, as
/// the arms verifier also checks against the rows), the planned launches a side; schema 2
/// commit steps: the good arm boots the baseline's kernel. Whether the step can be judged.
fn check_ab(v: &mut Verdict, sc: &Steps<'_>, i: usize, rel: &str, st: &Step) -> bool {
    let d = sc.dir.join(rel);
    let mut ok = true;
    for arm in [GOOD_ARM, CANDIDATE_ARM] {
        if !crate::fsio::is_real_dir(&d.join(arm)) {
            v.add(
                Check::BisectSteps,
                format!(
                    "step {}: `{rel}` has no arm `{arm}`: a step is an A/B",
                    i + 1
                ),
            );
            ok = false;
        }
    }
    if !ok {
        return false;
    }
    let plan = read_capped(&d.join(crate::names::ARMS_FILE), MAX_PARSED_BYTES)
        .ok()
        .flatten()
        .ok_or_else(|| format!("no readable {}", crate::names::ARMS_FILE))
        .and_then(|b| crate::arms::parse_arms(&b));
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            v.add(
                Check::BisectSteps,
                format!("step {}: `{rel}` is not an A/B: {e}", i + 1),
            );
            return false;
        }
    };
    if !crate::arms::is_kernel_ab(&plan) {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}` is not a kernel A/B of arms `{GOOD_ARM}` and \
                 `{CANDIDATE_ARM}`",
                i + 1
            ),
        );
        return false;
    }
    let bad = crate::arms::plan_problems(&plan);
    if !bad.is_empty() {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}`'s order does not interleave its arms: {}",
                i + 1,
                bad.join("; ")
            ),
        );
        ok = false;
    }
    if plan.rounds != st.planned {
        v.add(
            Check::BisectSteps,
            format!(
                "step {}: `{rel}` ran {} rounds, the step plans {}",
                i + 1,
                plan.rounds,
                st.planned
            ),
        );
        ok = false;
    }
    if sc.f.ab_steps() && sc.f.kind == BisectKind::Commit {
        let good = crate::read_bundle(&d.join(GOOD_ARM))
            .ok()
            .map(|(r, _)| kernel_digests(&r));
        if good.is_none() || good != sc.baseline_kernel {
            v.add(
                Check::BisectSteps,
                format!(
                    "step {}: `{rel}`'s arm `{GOOD_ARM}` does not boot the baseline's kernel \
                     (vmlinux and config digests)",
                    i + 1
                ),
            );
            ok = false;
        }
    }
    ok
}

/// What a look belongs to: its commit (commits) or its candidate set (config).
type LookKey<'a> = (Option<&'a str>, &'a [String]);

fn look_key(st: &Step) -> LookKey<'_> {
    (st.commit.as_deref(), st.symbols.as_slice())
}

/// Schema 2: the looks of every step follow the rule ([`Looks`]). A measured step names its
/// look, within the K the record plans, with the launches that look plans; a commit's or a
/// candidate's first measured step is look 1; a look after the first directly follows the
/// same commit's or candidate's previous look, which was inconclusive; a look that was
/// inconclusive with looks left is followed by the next one (unless nothing follows it: a
/// search cut short). A step repeating an earlier candidate's campaign repeats its look.
fn check_looks(v: &mut Verdict, f: &BisectFile) {
    let looks = f.looks();
    let mut seen_dirs: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    // The look the next step must be: (its commit or candidate, the look).
    let mut owed: Option<(LookKey<'_>, u32)> = None;
    for (i, st) in f.steps.iter().enumerate() {
        let n = i + 1;
        if !st.outcome.measured() {
            if st.look.is_some() {
                v.add(
                    Check::BisectSteps,
                    format!("step {n}: a look without a campaign"),
                );
            }
            if let Some((_, k)) = owed.take() {
                v.add(
                    Check::BisectSteps,
                    format!(
                        "step {n}: step {i} was inconclusive at look {} of {}, yet its look {k} \
                         does not follow",
                        k - 1,
                        looks.count()
                    ),
                );
            }
            continue;
        }
        let Some(k) = st.look else {
            v.add(
                Check::BisectSteps,
                format!("step {n}: a measured step without its look"),
            );
            owed = None;
            continue;
        };
        if let Some(d) = st.dir.as_deref() {
            if let Some(&earlier) = seen_dirs.get(d) {
                if earlier != Some(k) {
                    v.add(
                        Check::BisectSteps,
                        format!("step {n}: repeats a campaign under another look"),
                    );
                }
                continue;
            }
            seen_dirs.insert(d, Some(k));
        }
        match looks.size(k) {
            None => v.add(
                Check::BisectSteps,
                format!(
                    "step {n}: look {k}, the rule plans {} look(s)",
                    looks.count()
                ),
            ),
            Some(size) if size != st.planned => v.add(
                Check::BisectSteps,
                format!(
                    "step {n}: look {k} plans {size} launches a side, the step says {}",
                    st.planned
                ),
            ),
            Some(_) => {}
        }
        let want = match owed.take() {
            Some((key, want)) if key == look_key(st) => want,
            Some((_, want)) => {
                v.add(
                    Check::BisectSteps,
                    format!(
                        "step {n}: step {i} was inconclusive at look {} of {}, yet its look \
                         {want} does not follow",
                        want - 1,
                        looks.count()
                    ),
                );
                1
            }
            None => 1,
        };
        if k != want {
            v.add(
                Check::BisectSteps,
                format!("step {n}: look {k} where the rule takes look {want}"),
            );
        }
        owed = looks.next(k, st.outcome).map(|next| (look_key(st), next));
    }
}

/// The result names the steps that show it: the bad step bad (the first bad commit's, the
/// culprit set's), the good step good, each effect a step measuring its symbol alone.
fn check_result(v: &mut Verdict, f: &BisectFile) {
    let Some(r) = &f.result else { return };
    let at = |i: Option<usize>| i.and_then(|i| f.steps.get(i));
    match at(r.bad_step) {
        Some(s) if s.outcome.exit_code() == 1 => {
            if f.kind == BisectKind::Commit && s.commit != r.first_bad {
                v.add(
                    Check::BisectSteps,
                    "the result's bad step is not the first bad commit's".to_string(),
                );
            }
            if f.kind == BisectKind::Config && s.symbols != r.culprits {
                v.add(
                    Check::BisectSteps,
                    "the result's bad step is not the culprit set's".to_string(),
                );
            }
        }
        Some(_) => v.add(
            Check::BisectSteps,
            "the result's bad step is not bad".to_string(),
        ),
        None if r.first_bad.is_some() || !r.culprits.is_empty() => v.add(
            Check::BisectSteps,
            "the result names a culprit without the step that shows it bad".to_string(),
        ),
        None => {}
    }
    if let Some(s) = at(r.good_step) {
        if s.outcome.exit_code() != 0 || (f.kind == BisectKind::Commit && s.commit != r.last_good) {
            v.add(
                Check::BisectSteps,
                "the result's good step is not a good step of the last good commit".to_string(),
            );
        }
    }
    for (sym, i) in &r.effects {
        match f.steps.get(*i) {
            Some(s) if s.symbols == [sym.clone()] && s.outcome.measured() => {}
            _ => v.add(
                Check::BisectSteps,
                format!("the effect of `{sym}` does not point at a step measuring it alone"),
            ),
        }
    }
}
