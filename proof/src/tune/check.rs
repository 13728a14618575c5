//! The tune directory's verifier (see the module doc of [`crate::tune`]).

use crate::fmt::or_none;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use truecold_proto::tune::check_set;

use super::measure::*;
use super::model::*;
use super::readme::*;
use super::recommended::*;
use super::stats::*;
use crate::arms::{knob_list, ArmRef, BASELINE_ARM};
use crate::fsio::{read_capped, MAX_PARSED_BYTES};
use crate::names::{README_FILE, SUMS_FILE, TUNE_FILE};
use crate::skeleton::check::check_signature;
use crate::verdict::{Check, Verdict, VerifyOptions};

/// Verifies a tune directory (see the module doc); [`crate::verify_dir`] calls this when
/// `dir` holds `tune.json`: the record ([`read_tune_record`]), the top entries
/// ([`top_phases`]), the tree's `SHA256SUMS`, each phase ([`read_phases`]), then what the
/// phases' verified rows give against the record ([`check_measured`]).
pub fn verify_tune_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let Some(file) = read_tune_record(&mut v, dir) else {
        return v;
    };
    let plan = file.as_ref().map(TuneFile::plan);
    if let Some(p) = &plan {
        for why in tune_plan_problems(p) {
            v.add(Check::TunePlan, format!("{TUNE_FILE}: {why}"));
        }
    }
    let Some(phases_present) = top_phases(&mut v, dir) else {
        return v;
    };
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
    let Some((sums, sig)) = crate::skeleton::check::check_tree_sums(
        &mut v,
        dir,
        3,
        parse_tune_sums,
        "a phase's or arm's directory",
    ) else {
        return v;
    };
    let (pilot, screen, confirm) = read_phases(&mut v, dir, &phases_present);
    if let (Some(file), Some(plan)) = (file, plan) {
        check_measured(&mut v, dir, &file, &plan, pilot, screen, confirm);
    }
    check_signature(&mut v, dir, opts, sig, sums.as_deref());
    v
}

/// `tune.json`, read once (capped) and parsed: `Some(None)` when it does not parse or is of
/// another schema (a reason), `None` when it cannot be read.
fn read_tune_record(v: &mut Verdict, dir: &Path) -> Option<Option<TuneFile>> {
    let tp = dir.join(TUNE_FILE);
    let bytes = match read_capped(&tp, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{TUNE_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return None;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {TUNE_FILE}: {e}"));
            return None;
        }
    };
    Some(match serde_json::from_slice::<TuneFile>(&bytes) {
        Ok(f) if !(TUNE_SCHEMA_MIN..=TUNE_SCHEMA).contains(&f.schema) => {
            v.add(
                Check::TunePlan,
                format!(
                    "{TUNE_FILE}: schema {}, this verifier reads {TUNE_SCHEMA_MIN} to \
                     {TUNE_SCHEMA}",
                    f.schema
                ),
            );
            None
        }
        Ok(f) if f.schema != schema_of(&f.plan()) => {
            v.add(
                Check::TunePlan,
                format!(
                    "{TUNE_FILE}: schema {} {} an invocation and {} proposals: schema \
                     {TUNE_SCHEMA} records proposals, schema {TUNE_SCHEMA_INVOCATION} an \
                     invocation without them, schema {TUNE_SCHEMA_MIN} neither",
                    f.schema,
                    if f.invocation.is_some() {
                        "with"
                    } else {
                        "without"
                    },
                    f.proposals.len() + f.unbuilt.len()
                ),
            );
            None
        }
        Ok(f) => {
            if !truecold_proto::tune::is_canonical_either(&bytes, || tune_bytes(&f)) {
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
    })
}

/// The phase directories at the top (real directories only); any other directory a
/// reason. `None` when the directory cannot be listed.
fn top_phases(v: &mut Verdict, dir: &Path) -> Option<BTreeSet<String>> {
    let mut phases_present = BTreeSet::new();
    match fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    if name == SCREEN_DIR
                        || name == CONFIRM_DIR
                        || name == PILOT_DIR
                        || name == RECOMMENDED_DIR
                    {
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
            return None;
        }
    }
    Some(phases_present)
}

/// Each present phase verified as a multi-arm directory, its reasons the tune's; and the
/// rows and arms they hold.
fn read_phases(
    v: &mut Verdict,
    dir: &Path,
    present: &BTreeSet<String>,
) -> (Option<Phase>, Option<Phase>, Option<Phase>) {
    let mut phase = |name: &'static str| -> Option<Phase> {
        if !present.contains(name) {
            return None;
        }
        let p = read_phase(&dir.join(name));
        if let Some(u) = &p.verdict.unreadable {
            v.add(Check::TunePhase, format!("{name}: unreadable: {u}"));
        }
        v.add_inner(name, &p.verdict);
        Some(p)
    };
    let pilot = phase(PILOT_DIR);
    let screen = phase(SCREEN_DIR);
    let confirm = phase(CONFIRM_DIR);
    v.rows = Some(
        pilot
            .iter()
            .chain(screen.iter())
            .chain(confirm.iter())
            .map(|p| p.verdict.rows.unwrap_or(0))
            .sum(),
    );
    v.arms = Some(
        pilot
            .iter()
            .map(|p| (PILOT_DIR, p))
            .chain(screen.iter().map(|p| (SCREEN_DIR, p)))
            .chain(confirm.iter().map(|p| (CONFIRM_DIR, p)))
            .flat_map(|(n, p)| {
                p.arms
                    .iter()
                    .flatten()
                    .map(move |a| format!("{n}/{}", a.name))
            })
            .collect(),
    );
    (pilot, screen, confirm)
}

/// The phases against the plan, the results recomputed from their verified rows against
/// the record's, and the README against what those rows give.
#[allow(clippy::too_many_arguments)]
fn check_measured(
    v: &mut Verdict,
    dir: &Path,
    file: &TuneFile,
    plan: &TunePlan,
    pilot: Option<Phase>,
    screen: Option<Phase>,
    confirm: Option<Phase>,
) {
    let Some(screen) = screen else {
        v.add(
            Check::TunePhase,
            format!("the screen phase `{SCREEN_DIR}/` is missing"),
        );
        return;
    };
    check_screen(v, plan, &screen);
    check_pilot(v, plan, pilot.as_ref());
    check_context(v, plan, &screen, confirm.as_ref());
    if let Some(p) = &pilot {
        check_context(v, plan, p, None);
    }
    let m = Measured {
        pilot,
        screen,
        confirm,
    };
    // The results, recomputed from the verified rows.
    let fresh = match results(plan, &m) {
        Ok(f) => f,
        Err(e) => {
            v.add(Check::TunePhase, e.why());
            return;
        }
    };
    check_confirm(v, plan, &m, &fresh);
    if let Some(b) = plan.budget.filter(|b| fresh.launches > *b) {
        v.add(
            Check::TunePlan,
            format!("{} launches, over the budget of {b}", fresh.launches),
        );
    }
    compare_results(v, file, &fresh);
    check_tune_readme(v, dir, &fresh, &m);
    if let Some(i) = &file.invocation {
        check_arm_instruments(v, dir, i, &m);
    }
    check_recommended(v, dir, file, &fresh);
    let kernel = file
        .invocation
        .as_ref()
        .and_then(|i| i.options.kernel.as_ref());
    let base_config = dir
        .join(SCREEN_DIR)
        .join(BASELINE_ARM)
        .join(crate::names::CONFIG_FILE);
    crate::kconfig::check_user_kernel(v, dir, kernel, &base_config);
    if let Some(i) = &file.invocation {
        check_already_set(v, plan, &i.options, &base_config);
    }
}

/// Each attributed arm whose run line (`cmdline.txt`) asks for attribution launches — an
/// arm written since the tune records its instrument — asks for the instrument `tune.json`
/// records ([`TuneOptions::instrument`]; the README says what that one measured). The arm's
/// own verifier holds its launches to its line, and reports a line it cannot read.
fn check_arm_instruments(v: &mut Verdict, dir: &Path, i: &Invocation, m: &Measured) {
    let want = i.instrument();
    for (phase_dir, phase) in [
        (SCREEN_DIR, Some(&m.screen)),
        (CONFIRM_DIR, m.confirm.as_ref()),
    ] {
        for arm in phase.map(|p| &p.attributed).into_iter().flatten() {
            let path = dir
                .join(phase_dir)
                .join(arm)
                .join(crate::names::CMDLINE_FILE);
            let Ok(Some(bytes)) = read_capped(&path, MAX_PARSED_BYTES) else {
                continue;
            };
            let Ok(Some(got)) =
                crate::cmdline::parse_cmdline_txt(&bytes).and_then(|r| r.attribution_instrument())
            else {
                continue;
            };
            if want != Some(got) {
                v.add(
                    Check::TunePlan,
                    format!(
                        "{phase_dir}/{arm}: its attribution launches were asked for with \
                         `--attribution-instrument {got}`; {TUNE_FILE}'s invocation records {}",
                        match want {
                            Some(w) => format!("`{w}`"),
                            None => "no attribution launches".into(),
                        }
                    ),
                );
            }
        }
    }
}

/// Each knob `tune.json` records as already set by the user's kernel: a Kconfig knob, not
/// screened, and every symbol of its fragment as the baseline's resolved config holds it
/// (only with a user's kernel).
fn check_already_set(v: &mut Verdict, plan: &TunePlan, o: &TuneOptions, base_config: &Path) {
    if o.already_set.is_empty() {
        return;
    }
    let mut add = |d: String| v.add(Check::UserKernel, format!("{TUNE_FILE}: {d}"));
    if o.kernel.is_none() {
        add("knobs recorded as already set, but no user's kernel".into());
        return;
    }
    let config = read_capped(base_config, MAX_PARSED_BYTES)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    for k in &o.already_set {
        if plan.knobs.contains(k) {
            add(format!(
                "knob `{k}` is both screened and recorded as already set"
            ));
        }
        match (k.change(), &config) {
            (truecold_proto::tune::Change::Kconfig(text), Some(c)) => {
                if !crate::kconfig::sets_all(c, text) {
                    add(format!(
                        "knob `{k}` is recorded as already set, but the baseline's config does \
                         not set every symbol of its fragment"
                    ));
                }
            }
            (truecold_proto::tune::Change::Kconfig(_), None) => {}
            _ => add(format!(
                "knob `{k}` is recorded as already set but is not a Kconfig knob"
            )),
        }
    }
}

/// `recommended/` is exactly what the recomputed winners make of the record's invocation
/// ([`recommended_files`]): every file there byte for byte, nothing else; a schema-1 tune
/// (no invocation) has none. (`SHA256SUMS` covers its files as it covers every file.)
fn check_recommended(v: &mut Verdict, dir: &Path, file: &TuneFile, fresh: &TuneFile) {
    let rd = dir.join(RECOMMENDED_DIR);
    let present = crate::fsio::exists_here(&rd);
    let Some(inv) = &file.invocation else {
        if present {
            v.add(
                Check::TuneRecommended,
                format!(
                    "`{RECOMMENDED_DIR}/` in a {TUNE_FILE} of schema {}: the schema that \
                     records how to repeat it ({TUNE_SCHEMA_INVOCATION}) makes one",
                    file.schema
                ),
            );
        }
        return;
    };
    if !crate::fsio::is_real_dir(&rd) {
        v.add_file(
            Check::TuneRecommended,
            RECOMMENDED_DIR,
            format!("`{RECOMMENDED_DIR}/` is missing (or not a directory)"),
        );
        return;
    }
    let want = recommended_files(&fresh.screen.recommended, inv, fresh.rounds.confirm);
    for (name, bytes) in &want {
        let p = dir.join(name);
        if !crate::fsio::is_real_file(&p) {
            v.add_file(Check::TuneRecommended, name, format!("`{name}` is missing"));
        } else if !read_capped(&p, MAX_PARSED_BYTES).is_ok_and(|b| b.as_ref() == Some(bytes)) {
            v.add_file(
                Check::TuneRecommended,
                name,
                format!(
                    "`{name}` is not what the winners [{}] make of {TUNE_FILE}",
                    knob_list(&fresh.screen.recommended)
                ),
            );
        }
    }
    if let Ok(entries) = fs::read_dir(&rd) {
        for e in entries.flatten() {
            let n = format!("{RECOMMENDED_DIR}/{}", e.file_name().to_string_lossy());
            if !want.iter().any(|(w, _)| *w == n) {
                v.add_file(
                    Check::TuneRecommended,
                    &n,
                    format!("`{n}` is not a file of the recommended configuration"),
                );
            }
        }
    }
}

/// The screen phase's arms and rounds are the plan's.
/// The pilot phase: present exactly when the noise says it measured it, its arms the screen's
/// over the rounds the noise names, and the noise's figure what its verified rows give.
fn check_pilot(v: &mut Verdict, plan: &TunePlan, pilot: Option<&Phase>) {
    let rounds = plan.noise.as_ref().and_then(|n| n.pilot_rounds);
    let (rounds, p) = match (rounds, pilot) {
        (None, None) => return,
        (None, Some(_)) => {
            v.add(
                Check::TunePhase,
                format!("a pilot phase `{PILOT_DIR}/`, and {TUNE_FILE}'s noise is not its"),
            );
            return;
        }
        (Some(_), None) => {
            v.add(
                Check::TunePhase,
                format!("{TUNE_FILE}'s noise names a pilot, and `{PILOT_DIR}/` is missing"),
            );
            return;
        }
        (Some(r), Some(p)) => (r, p),
    };
    let want = pilot_arms(&plan.knobs);
    if p.arms.as_ref() != Some(&want) {
        v.add(
            Check::TunePhase,
            format!(
                "{PILOT_DIR}: arms [{}], the baseline and the screen's command-line and VMM \
                 knobs are [{}]",
                p.arms.as_deref().map(names).unwrap_or_default(),
                names(&want)
            ),
        );
    }
    if p.rounds != rounds {
        v.add(
            Check::TunePhase,
            format!(
                "{PILOT_DIR}: {} rounds, {TUNE_FILE}'s noise names {rounds}",
                p.rounds
            ),
        );
    }
    let got = pilot_cv(p, plan.figure);
    let said = plan.noise.as_ref().map(|n| n.cv_ppm);
    if got != said {
        v.add(
            Check::TuneResults,
            format!(
                "{TUNE_FILE}'s noise is {} ppm CV, the pilot's verified rows give {}",
                or_none(said),
                or_none(got)
            ),
        );
    }
}

fn check_screen(v: &mut Verdict, plan: &TunePlan, screen: &Phase) {
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
}

/// A confirm phase exactly when the screen has winners, with the arms they make and the
/// plan's rounds.
fn check_confirm(v: &mut Verdict, plan: &TunePlan, m: &Measured, fresh: &TuneFile) {
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
}

/// The README is what `report` makes of the verified rows (read capped, never through a
/// link: a README larger than the cap is not what the rows give either).
fn check_tune_readme(v: &mut Verdict, dir: &Path, fresh: &TuneFile, m: &Measured) {
    let Some(rb) = generated(fresh, m)
        .into_iter()
        .find(|(n, _)| n == README_FILE)
        .map(|(_, b)| b)
    else {
        return;
    };
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
            if let Err(e) = check_set(
                &a.arm.knobs,
                truecold_proto::tune::TuneGuest::from(a.result.contract.kind),
            ) {
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
