//! The fleet directory's verifier: the plan, the tree's `SHA256SUMS`, every shard verified
//! by its own kind's verifier, each shard held to its plan (its launches, its seed, one clock
//! and one set of inputs across shards), and each shard's task record held to the plan it
//! ran under.

use std::collections::BTreeSet;
use std::path::Path;

use super::bisect::wave_problems;
use super::model::*;
use crate::digest::sha256_hex;
use crate::fsio::{is_real_dir, is_real_file, read_capped, MAX_PARSED_BYTES};
use crate::kind::{DirKind, Kind};
use crate::names::{FLEET_FILE, README_FILE, SUMS_FILE};
use crate::schema::{NestedHarness, ResultJson};
use crate::skeleton::check::{check_signature, check_tree_sums};
use crate::verdict::{Check, Verdict, VerifyOptions};

/// One shard as verified: its plan, its verdict (its own kind's), and its task record.
#[derive(Debug)]
pub struct VerifiedShard {
    pub plan: ShardPlan,
    pub verdict: Verdict,
    pub task: Option<TaskRecord>,
}

/// A fleet directory, verified: the plan (when it parsed) and every shard that exists.
#[derive(Debug, Default)]
pub struct VerifiedFleet {
    pub plan: Option<FleetPlan>,
    pub shards: Vec<VerifiedShard>,
}

/// Every way the plan is not a fleet's (empty when it is one).
pub fn plan_problems(p: &FleetPlan) -> Vec<String> {
    let mut bad = Vec::new();
    if p.schema != FLEET_SCHEMA && p.schema != FLEET_SCHEMA_V1 {
        bad.push(format!(
            "schema {}, this verifier reads {FLEET_SCHEMA_V1} and {FLEET_SCHEMA}",
            p.schema
        ));
    }
    if p.shards.is_empty() {
        bad.push("no shards".into());
    }
    let mut next = 0u64;
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in p.shards.iter().enumerate() {
        if !crate::names::is_valid_name(&s.name) || !names.insert(s.name.as_str()) {
            bad.push(format!("shard {i}: name `{}` invalid or repeated", s.name));
        }
        if s.seed != shard_seed(p.seed, i as u64) {
            bad.push(format!(
                "shard `{}`: seed {} is not the plan's shard seed {}",
                s.name,
                s.seed,
                shard_seed(p.seed, i as u64)
            ));
        }
        // What a shard waits for comes before it in the plan (one array, then those after).
        if let Some(a) = &s.after {
            if !p.shards[..i].iter().any(|e| e.name == *a) {
                bad.push(format!(
                    "shard `{}` waits for `{a}`, no earlier shard of the plan",
                    s.name
                ));
            }
        }
        let v2 = p.schema >= FLEET_SCHEMA;
        match (p.kind, s.launches, s.knob, s.builds) {
            (FleetKind::Campaign, Some([a, b]), None, None)
                if a == next && b > a && s.after.is_none() && s.commit.is_none() =>
            {
                next = b
            }
            (FleetKind::Campaign, ..) => bad.push(format!(
                "shard `{}`: not the next range of launches from {next}",
                s.name
            )),
            (FleetKind::TuneScreen, None, Some(k), None) if s.name == k.as_str() => {
                let build = v2 && k.class() == truecold_proto::tune::KnobClass::Kconfig;
                let want = build.then(|| build_shard_name(k));
                if s.after != want || s.commit.is_some() {
                    bad.push(format!(
                        "shard `{}`: waits for {:?}, a {} knob's shard waits for {:?}",
                        s.name,
                        s.after,
                        k.class().as_str(),
                        want
                    ));
                }
            }
            (FleetKind::TuneScreen, None, None, Some(k))
                if v2
                    && s.name == build_shard_name(k)
                    && k.class() == truecold_proto::tune::KnobClass::Kconfig
                    && s.after.is_none()
                    && p.shards.get(i + 1).is_some_and(|n| n.knob == Some(k)) => {}
            (FleetKind::TuneScreen, ..) => bad.push(format!(
                "shard `{}`: not one knob's arm, nor the build of the next shard's Kconfig knob",
                s.name
            )),
            (FleetKind::Bisect, None, None, None) if v2 => {}
            (FleetKind::Bisect, ..) => bad.push(format!("shard `{}`: not a bisect shard", s.name)),
        }
    }
    if p.kind == FleetKind::Bisect {
        bad.extend(wave_problems(p));
    } else if p.bisect.is_some() {
        bad.push(format!("a {} plan names a bisect range", p.kind.as_str()));
    }
    bad
}

/// Verifies the fleet directory `dir` (see the module doc).
pub fn verify_fleet_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let (v, _) = verify_fleet(dir, opts);
    v
}

/// [`verify_fleet_dir`], and what it verified.
pub fn verify_fleet(dir: &Path, opts: &VerifyOptions) -> (Verdict, VerifiedFleet) {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let mut out = VerifiedFleet::default();
    let bytes = match read_capped(&dir.join(FLEET_FILE), MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{FLEET_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return (v, out);
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {FLEET_FILE}: {e}"));
            return (v, out);
        }
    };
    let plan = match serde_json::from_slice::<FleetPlan>(&bytes) {
        Ok(p) => p,
        Err(e) => {
            v.add(
                Check::FleetPlan,
                format!("{FLEET_FILE} does not parse: {e}"),
            );
            return (v, out);
        }
    };
    for why in plan_problems(&plan) {
        v.add(Check::FleetPlan, format!("{FLEET_FILE}: {why}"));
    }
    let plan_sha = sha256_hex(&bytes);
    for r in [FLEET_FILE, README_FILE, SUMS_FILE] {
        if !is_real_file(&dir.join(r)) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing (gather writes it)"),
            );
        }
    }
    let Some((sums, sig)) =
        check_tree_sums(&mut v, dir, LEVELS, parse_fleet_sums, "a shard's directory")
    else {
        return (v, out);
    };
    // Nothing under shards/ but the plan's shards.
    let planned: BTreeSet<&str> = plan.shards.iter().map(|s| s.name.as_str()).collect();
    if let Ok(rd) = std::fs::read_dir(dir.join(SHARDS_DIR)) {
        for e in rd.take(4096).filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            if !planned.contains(n.as_str()) {
                v.add(
                    Check::FleetShard,
                    format!("`{SHARDS_DIR}/{n}` is no shard of the plan"),
                );
            }
        }
    }
    for s in &plan.shards {
        let d = dir.join(SHARDS_DIR).join(&s.name);
        if !is_real_dir(&d) {
            v.add(
                Check::FleetShard,
                format!(
                    "shard `{}` is missing (its task has not written it)",
                    s.name
                ),
            );
            continue;
        }
        let sv = verify_shard(&d, plan.kind, s);
        if !sv.is_valid() {
            let first = sv
                .unreadable
                .clone()
                .or_else(|| sv.reasons.first().map(|r| r.detail.clone()))
                .unwrap_or_default();
            v.add(
                Check::FleetShard,
                format!("shard `{}` does not verify: {first}", s.name),
            );
        }
        let task = read_task(&mut v, dir, s, &plan_sha);
        out.shards.push(VerifiedShard {
            plan: s.clone(),
            verdict: sv,
            task,
        });
    }
    check_alike(&mut v, &plan, &out.shards);
    check_builds_booted(&mut v, dir, &plan);
    if plan.kind == FleetKind::Bisect {
        check_wave(&mut v, dir, &plan);
    }
    let launches: usize = out.shards.iter().filter_map(|s| s.verdict.rows).sum();
    v.rows = Some(launches);
    v.label = Some(format!(
        "a fleet directory ({}, {} shard(s), partition {})",
        plan.kind.as_str(),
        plan.shards.len(),
        plan.partition
    ));
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    out.plan = Some(plan);
    (v, out)
}

/// The shard `s` of a `kind` fleet at `d`, on its own: a bundle, a phase's multi-arm
/// directory or a bisect directory (its own kind's verifier), or a build's record.
pub fn verify_shard(d: &Path, kind: FleetKind, s: &ShardPlan) -> Verdict {
    if s.builds.is_some() {
        verify_build(d, s)
    } else if kind == FleetKind::Bisect {
        if Kind::Bisect.is_marked(d) {
            crate::bisect::BisectDir::verify(d, &VerifyOptions::default())
        } else {
            Verdict {
                unreadable: Some("a bisect shard with no bisect.json".into()),
                ..Default::default()
            }
        }
    } else if Kind::Arms.is_marked(d) {
        crate::arms::ArmsDir::verify(d, &VerifyOptions::default())
    } else {
        crate::bundle::BundleDir::verify(d, &VerifyOptions::default())
    }
}

/// `tasks/<shard>.json`, read and held to the shard and the plan.
fn read_task(v: &mut Verdict, dir: &Path, s: &ShardPlan, plan_sha: &str) -> Option<TaskRecord> {
    let rel = format!("{TASKS_DIR}/{}.json", s.name);
    let t = match read_capped(&dir.join(&rel), MAX_PARSED_BYTES) {
        Ok(Some(b)) => serde_json::from_slice::<TaskRecord>(&b).map_err(|e| e.to_string()),
        Ok(None) => Err(format!("larger than {MAX_PARSED_BYTES} bytes")),
        Err(e) => Err(e.to_string()),
    };
    match t {
        Ok(t) if t.shard != s.name => {
            v.add_file(
                Check::FleetTask,
                &rel,
                format!("`{rel}` is the record of shard `{}`", t.shard),
            );
            None
        }
        Ok(t) if t.plan_sha256 != plan_sha => {
            v.add_file(
                Check::FleetTask,
                &rel,
                format!(
                    "`{rel}`: its task ran under another plan (sha256 {}, this {FLEET_FILE} \
                     is {plan_sha})",
                    t.plan_sha256
                ),
            );
            None
        }
        Ok(t) => Some(t),
        Err(e) => {
            v.add_file(Check::FleetTask, &rel, format!("`{rel}`: {e}"));
            None
        }
    }
}

/// What must hold across shards and against the plan.
fn check_alike(v: &mut Verdict, plan: &FleetPlan, shards: &[VerifiedShard]) {
    let mut first: Option<(&str, &ResultJson)> = None;
    for s in shards {
        let name = s.plan.name.as_str();
        let results: Vec<&ResultJson> = match plan.kind {
            FleetKind::Campaign => s.verdict.result.iter().collect(),
            FleetKind::TuneScreen | FleetKind::Bisect => Vec::new(),
        };
        if plan.kind == FleetKind::TuneScreen && s.plan.builds.is_none() {
            let want = s.plan.knob.map(|k| {
                vec![
                    crate::names::BASELINE_ARM.to_string(),
                    k.as_str().to_string(),
                ]
            });
            if s.verdict.is_valid() && s.verdict.arms != want {
                v.add(
                    Check::FleetShard,
                    format!(
                        "shard `{name}`: its arms are {:?}, the plan's {:?}",
                        s.verdict.arms.clone().unwrap_or_default(),
                        want.unwrap_or_default()
                    ),
                );
            }
        }
        for r in results {
            if r.contract.clock != plan.clock {
                v.add(
                    Check::FleetShard,
                    format!(
                        "shard `{name}` is on the {} clock, the plan's is {}",
                        r.contract.clock.as_str(),
                        plan.clock.as_str()
                    ),
                );
            }
            let planned = r.contract.mode.planned_attempts();
            if planned != s.plan.count() {
                v.add(
                    Check::FleetShard,
                    format!(
                        "shard `{name}` planned {planned} launches, the plan gives it {}",
                        s.plan.count()
                    ),
                );
            }
            if let Some(n) = &r.environment.nested {
                if n.l1_seed != s.plan.seed {
                    v.add(
                        Check::FleetShard,
                        format!(
                            "shard `{name}` ran under L1 seed {}, the plan gives it {}",
                            crate::seed::hex(n.l1_seed),
                            crate::seed::hex(s.plan.seed)
                        ),
                    );
                }
            }
            match first {
                None => first = Some((name, r)),
                Some((f, fr)) => {
                    for why in differ(fr, r) {
                        v.add(
                            Check::FleetShard,
                            format!("shards `{f}` and `{name}` differ: {why}"),
                        );
                    }
                }
            }
        }
    }
}

/// A build shard: its record parses, names the plan's knob, and its `config` is the one it
/// records.
fn verify_build(d: &Path, s: &ShardPlan) -> Verdict {
    let mut v = Verdict::default();
    let rec = match read_capped(&d.join(BUILD_FILE), MAX_PARSED_BYTES) {
        Ok(Some(b)) => serde_json::from_slice::<BuildRecord>(&b).map_err(|e| e.to_string()),
        Ok(None) => Err(format!("larger than {MAX_PARSED_BYTES} bytes")),
        Err(e) => Err(e.to_string()),
    };
    match rec {
        Err(e) => v.unreadable = Some(format!("{BUILD_FILE}: {e}")),
        Ok(r) => {
            if Some(r.knob) != s.builds {
                v.add(
                    Check::FleetShard,
                    format!("{BUILD_FILE} is the build of `{}`", r.knob.as_str()),
                );
            }
            match read_capped(&d.join(crate::names::CONFIG_FILE), MAX_PARSED_BYTES) {
                Ok(Some(c)) if sha256_hex(&c) == r.config_sha256 => {}
                _ => v.add(
                    Check::FleetShard,
                    format!(
                        "its `config` is missing or not the one {BUILD_FILE} records (sha256 {})",
                        r.config_sha256
                    ),
                ),
            }
        }
    }
    v
}

/// Each Kconfig knob's shard booted the kernel its build shard built: the knob's arm records
/// the vmlinux digest the build recorded.
fn check_builds_booted(v: &mut Verdict, dir: &Path, plan: &FleetPlan) {
    for s in &plan.shards {
        let Some(k) = s.builds else { continue };
        let b = dir.join(SHARDS_DIR).join(&s.name).join(BUILD_FILE);
        let Some(rec) = read_capped(&b, MAX_PARSED_BYTES)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<BuildRecord>(&b).ok())
        else {
            continue;
        };
        let arm = dir.join(SHARDS_DIR).join(k.as_str()).join(k.as_str());
        let booted = crate::bundle::read_bundle(&arm)
            .ok()
            .and_then(|(r, _)| r.artifacts.get("vmlinux").cloned());
        if booted.as_deref() != Some(rec.vmlinux_sha256.as_str()) {
            v.add(
                Check::FleetShard,
                format!(
                    "shard `{}` booted vmlinux {}, its build shard `{}` built {}",
                    k.as_str(),
                    booted.as_deref().unwrap_or("(none recorded)"),
                    s.name,
                    rec.vmlinux_sha256
                ),
            );
        }
    }
}

/// A bisect wave: the baseline shard is a bisect directory of the good commit with no step;
/// each probe's is one of the same good commit, with that baseline (byte for byte), whose
/// every step measured the probe's commit.
fn check_wave(v: &mut Verdict, dir: &Path, plan: &FleetPlan) {
    use crate::bisect::{read_bisect, BASELINE_DIR};
    let Some(b) = &plan.bisect else { return };
    let base_result = |d: &Path| {
        read_capped(
            &d.join(BASELINE_DIR).join(crate::names::RESULT_FILE),
            MAX_PARSED_BYTES,
        )
        .ok()
        .flatten()
    };
    let base_dir = dir.join(SHARDS_DIR).join(BASELINE_SHARD);
    let baseline = base_result(&base_dir);
    for s in &plan.shards {
        let d = dir.join(SHARDS_DIR).join(&s.name);
        let Ok(f) = read_bisect(&d) else { continue };
        let mut bad = Vec::new();
        if f.good != b.good {
            bad.push(format!(
                "its good commit is {}, the plan's {}",
                f.good, b.good
            ));
        }
        if s.name == BASELINE_SHARD {
            if !f.steps.is_empty() {
                bad.push(format!("the baseline holds {} step(s)", f.steps.len()));
            }
        } else {
            if base_result(&d) != baseline || baseline.is_none() {
                bad.push("its baseline is not the baseline shard's".into());
            }
            if f.steps.is_empty() {
                bad.push("no step".into());
            }
            for st in &f.steps {
                if st.commit != s.commit {
                    bad.push(format!(
                        "a step measured {}, the plan's probe is {}",
                        st.commit.as_deref().unwrap_or("?"),
                        s.commit.as_deref().unwrap_or("?")
                    ));
                }
            }
        }
        for why in bad {
            v.add(Check::FleetShard, format!("shard `{}`: {why}", s.name));
        }
    }
}

/// How two shards' records differ in what makes them one campaign: the guest, the inputs
/// and the clock.
pub fn differ(a: &ResultJson, b: &ResultJson) -> Vec<String> {
    let mut d = crate::compare::mismatches(a, b);
    if a.configuration.backing_kind() != b.configuration.backing_kind() {
        d.push("backing".into());
    }
    if a.configuration.cmdline != b.configuration.cmdline {
        d.push("guest command line".into());
    }
    if a.artifacts != b.artifacts {
        d.push("artifact digests".into());
    }
    if let (Some(x), Some(y)) = (&a.environment.nested, &b.environment.nested) {
        if let Some(c) =
            NestedHarness::clock_differs((x, a.environment.cores), (y, b.environment.cores))
        {
            d.push(c);
        }
    }
    d
}

/// A verdict's first reason in words (empty for a valid one), for the bench's errors.
pub fn first_reason(v: &Verdict) -> String {
    v.unreadable
        .clone()
        .or_else(|| v.reasons.first().map(|r| r.detail.clone()))
        .unwrap_or_default()
}
