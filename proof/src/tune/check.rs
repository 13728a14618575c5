//! The tune directory's verifier (see the module doc of [`crate::tune`]).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use truecold_proto::tune::check_set;

use crate::arms::{knob_list, ArmRef, BASELINE_ARM};
use crate::bundle::{read_capped, MAX_PARSED_BYTES};
use crate::bundle_verify::check_signature;
use crate::report::README_FILE;
use crate::sums::SUMS_FILE;
use crate::verdict::{Check, Verdict, VerifyOptions};

use super::measure::*;
use super::model::*;
use super::readme::*;
use super::stats::*;

/// Verifies a tune directory (see the module doc); [`crate::verify_dir`] calls this when
/// `dir` holds `tune.json`.
pub fn verify_tune_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let tp = dir.join(TUNE_FILE);
    let bytes = match read_capped(&tp, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{TUNE_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return v;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {TUNE_FILE}: {e}"));
            return v;
        }
    };
    let file: Option<TuneFile> = match serde_json::from_slice::<TuneFile>(&bytes) {
        Ok(f) if f.schema != TUNE_SCHEMA => {
            v.add(
                Check::TunePlan,
                format!(
                    "{TUNE_FILE}: schema {}, this verifier reads {TUNE_SCHEMA}",
                    f.schema
                ),
            );
            None
        }
        Ok(f) => {
            if tune_bytes(&f) != bytes {
                v.add(
                    Check::TunePlan,
                    format!("{TUNE_FILE} is not in the writer's canonical form"),
                );
            }
            Some(f)
        }
        Err(e) => {
            v.add(Check::TunePlan, format!("{TUNE_FILE} does not parse: {e}"));
            None
        }
    };
    let plan = file.as_ref().map(TuneFile::plan);
    if let Some(p) = &plan {
        for why in tune_plan_problems(p) {
            v.add(Check::TunePlan, format!("{TUNE_FILE}: {why}"));
        }
    }
    // Top entries: the tune's files and the two phases.
    let mut phases_present = BTreeSet::new();
    match fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    if name == SCREEN_DIR || name == CONFIRM_DIR {
                        phases_present.insert(name);
                    } else {
                        v.add(
                            Check::NotAFile,
                            format!("`{name}` is a directory but not a phase"),
                        );
                    }
                }
            }
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return v;
        }
    }
    for r in [TUNE_FILE, README_FILE, SUMS_FILE] {
        if !crate::fsio::is_real_file(&dir.join(r)) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing"),
            );
        }
    }
    // SHA256SUMS over every file of the tree.
    let Some((sums, sig)) = crate::bundle_verify::check_tree_sums(
        &mut v,
        dir,
        3,
        parse_tune_sums,
        "a phase's or arm's directory",
    ) else {
        return v;
    };
    // The phases.
    let phase = |name: &'static str, v: &mut Verdict| -> Option<Phase> {
        if !phases_present.contains(name) {
            return None;
        }
        let p = read_phase(&dir.join(name));
        if let Some(u) = &p.verdict.unreadable {
            v.add(Check::TunePhase, format!("{name}: unreadable: {u}"));
        }
        v.add_inner(name, &p.verdict.reasons);
        Some(p)
    };
    let screen = phase(SCREEN_DIR, &mut v);
    let confirm = phase(CONFIRM_DIR, &mut v);
    v.rows = Some(
        screen
            .iter()
            .chain(confirm.iter())
            .map(|p| p.verdict.rows.unwrap_or(0))
            .sum(),
    );
    v.arms = Some(
        screen
            .iter()
            .map(|p| (SCREEN_DIR, p))
            .chain(confirm.iter().map(|p| (CONFIRM_DIR, p)))
            .flat_map(|(n, p)| {
                p.arms
                    .iter()
                    .flatten()
                    .map(move |a| format!("{n}/{}", a.name))
            })
            .collect(),
    );
    let (Some(file), Some(plan)) = (file, plan) else {
        check_signature(&mut v, dir, opts, sig, sums.as_deref());
        return v;
    };
    let Some(screen) = screen else {
        v.add(
            Check::TunePhase,
            format!("the screen phase `{SCREEN_DIR}/` is missing"),
        );
        check_signature(&mut v, dir, opts, sig, sums.as_deref());
        return v;
    };
    let want = screen_arms(&plan.knobs);
    if let Some(a) = &screen.arms {
        if *a != want {
            v.add(
                Check::TunePhase,
                format!(
                    "{SCREEN_DIR}: arms [{}], the plan's knobs make [{}]",
                    names(a),
                    names(&want)
                ),
            );
        }
    }
    if screen.arms.is_some() && screen.rounds != plan.rounds_screen {
        v.add(
            Check::TunePhase,
            format!(
                "{SCREEN_DIR}: {} rounds, {TUNE_FILE} plans {}",
                screen.rounds, plan.rounds_screen
            ),
        );
    }
    check_context(&mut v, &plan, &screen, confirm.as_ref());
    let m = Measured { screen, confirm };
    // The results, recomputed from the verified rows.
    let recomputed = results(&plan, &m);
    let fresh = match recomputed {
        Ok(f) => f,
        Err(e) => {
            v.add(Check::TunePhase, e.why());
            check_signature(&mut v, dir, opts, sig, sums.as_deref());
            return v;
        }
    };
    match (&m.confirm, fresh.screen.recommended.is_empty()) {
        (Some(_), true) => v.add(
            Check::TunePhase,
            format!("a confirm phase `{CONFIRM_DIR}/` without a winner in the screen"),
        ),
        (Some(c), false) => {
            let want = confirm_arms(&fresh.screen.recommended);
            if let Some(a) = &c.arms {
                if *a != want {
                    v.add(
                        Check::TunePhase,
                        format!(
                            "{CONFIRM_DIR}: arms [{}], the screen's winners make [{}]",
                            names(a),
                            names(&want)
                        ),
                    );
                }
                if c.rounds != plan.rounds_confirm {
                    v.add(
                        Check::TunePhase,
                        format!(
                            "{CONFIRM_DIR}: {} rounds, {TUNE_FILE} plans {}",
                            c.rounds, plan.rounds_confirm
                        ),
                    );
                }
            }
        }
        _ => {}
    }
    if let Some(b) = plan.budget.filter(|b| fresh.launches > *b) {
        v.add(
            Check::TunePlan,
            format!("{} launches, over the budget of {b}", fresh.launches),
        );
    }
    compare_results(&mut v, &file, &fresh);
    if let Some(rb) = generated(&fresh, &m)
        .into_iter()
        .find(|(n, _)| n == README_FILE)
        .map(|(_, b)| b)
    {
        // Read capped, never followed through a link: a README larger than the cap is
        // not what the rows give either.
        if read_capped(&dir.join(README_FILE), MAX_PARSED_BYTES)
            .is_ok_and(|b| b.as_deref() != Some(rb.as_slice()))
        {
            v.add_file(
                Check::GeneratedStale,
                README_FILE,
                format!(
                    "`{README_FILE}` differs from what `truecold-proof report` makes of the \
                     verified rows"
                ),
            );
        }
    }
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    v
}

pub(super) fn names(arms: &[ArmRef]) -> String {
    arms.iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The baselines run the plan's context and guest; both phases the same host and guest.
pub(super) fn check_context(
    v: &mut Verdict,
    plan: &TunePlan,
    screen: &Phase,
    confirm: Option<&Phase>,
) {
    let guest = guest_kind(plan.guest);
    for (name, p) in std::iter::once((SCREEN_DIR, screen)).chain(confirm.map(|c| (CONFIRM_DIR, c)))
    {
        let Some(b) = p.data.get(BASELINE_ARM).map(|a| &a.result) else {
            continue;
        };
        let c = &b.configuration;
        let mut differ = Vec::new();
        if b.contract.kind != guest {
            differ.push(format!(
                "contract {} (plan: {})",
                b.contract.kind.as_str(),
                guest.as_str()
            ));
        }
        if c.vcpus != plan.vcpus {
            differ.push(format!("{} vCPUs (plan: {})", c.vcpus, plan.vcpus));
        }
        if c.mem_bytes != plan.mem_bytes {
            differ.push(format!(
                "{} bytes of memory (plan: {})",
                c.mem_bytes, plan.mem_bytes
            ));
        }
        if c.backing_kind() != Some(plan.backing) {
            differ.push(format!(
                "backing `{}` (plan: {})",
                c.backing,
                plan.backing.as_str()
            ));
        }
        for d in differ {
            v.add(
                Check::TunePlan,
                format!("{name}: the baseline runs {d}: every arm runs the tune's context"),
            );
        }
        for a in p.data.values() {
            if let Err(e) = check_set(&a.arm.knobs, a.result.contract.kind.tune_guest()) {
                v.add(Check::TunePlan, format!("{name}/{}: {e}", a.arm.name));
            }
        }
    }
    if let (Some(s), Some(c)) = (
        screen.data.get(BASELINE_ARM),
        confirm.and_then(|c| c.data.get(BASELINE_ARM)),
    ) {
        let (s, c) = (&s.result, &c.result);
        if s.environment.host_kind != c.environment.host_kind {
            v.add(
                Check::TunePhase,
                format!(
                    "the phases ran on different host kinds ({} and {})",
                    s.environment.host_kind.as_str(),
                    c.environment.host_kind.as_str()
                ),
            );
        }
        if s.artifacts != c.artifacts || s.contract.deadline_ns != c.contract.deadline_ns {
            v.add(
                Check::TunePhase,
                "the two phases' baselines differ in their artifacts or deadline: one \
                 baseline, one guest",
            );
        }
    }
}

/// `tune.json` against its recomputation: a specific reason per field that differs, then
/// the bytes.
pub(super) fn compare_results(v: &mut Verdict, file: &TuneFile, fresh: &TuneFile) {
    let before = v.reasons.len();
    for w in &file.screen.winners {
        let e = fresh.screen.effects.iter().find(|e| e.knobs == [*w]);
        match e {
            Some(e) if e.verdict != KnobVerdict::Faster => v.add(
                Check::TuneResults,
                format!(
                    "{TUNE_FILE} names `{w}` a winner; its screen verdict is {}",
                    e.verdict_text()
                ),
            ),
            None => v.add(
                Check::TuneResults,
                format!("{TUNE_FILE} names `{w}` a winner; it was not screened"),
            ),
            _ => {}
        }
    }
    if file.screen.winners != fresh.screen.winners && v.reasons.len() == before {
        v.add(
            Check::TuneResults,
            format!(
                "{TUNE_FILE}'s winners [{}], the verified rows give [{}]",
                knob_list(&file.screen.winners),
                knob_list(&fresh.screen.winners)
            ),
        );
    }
    for e in &fresh.screen.effects {
        if !file.screen.effects.contains(e) {
            v.add(
                Check::TuneResults,
                format!(
                    "{TUNE_FILE}'s effect of `{}` differs from its recomputation (Δp50 {} ns, \
                     {})",
                    knob_list(&e.knobs),
                    e.delta_p50_ns.map_or("–".into(), |d| d.to_string()),
                    e.verdict_text()
                ),
            );
        }
    }
    if file.confirm != fresh.confirm {
        v.add(
            Check::TuneResults,
            format!("{TUNE_FILE}'s final A/B or leave-one-out differs from its recomputation"),
        );
    }
    if v.reasons.len() == before && tune_bytes(file) != tune_bytes(fresh) {
        v.add(
            Check::TuneResults,
            format!("{TUNE_FILE} differs from what the verified rows give"),
        );
    }
}
