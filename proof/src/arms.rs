//! Multi-arm directories: one engines campaign or one tune phase ([`crate::tune`]), one
//! complete bundle per arm, compared.
//!
//! ```text
//! <dir>/README.md        host kind, clock, contract, arms, comparison table, cdf.svg
//! <dir>/arms.json        schema, seed, rounds, arms [{name, engine[, knobs]}],
//!                        order [[round, arm], …]
//! <dir>/comparison.json  per pair of arms: n, p50/p99, ratios b/a with bootstrap CIs, p, verdict
//! <dir>/cdf.svg          every arm's headline CDF (successes) on one axis
//! <dir>/<arm>/           a complete bundle per arm (its own SHA256SUMS; it verifies alone)
//! <dir>/SHA256SUMS       every file under <dir>, arm files as `<arm>/<file>`, itself excluded
//! ```
//!
//! The bench writes every arm bundle inside `dir`, then calls [`write_arms`], which writes the
//! top files from the arms' rows and returns the verifier's [`Verdict`] on the whole
//! directory. [`crate::verify_dir`] recognises `arms.json` and checks ([`verify_arms_dir`]):
//! SHA256SUMS over every file; each arm bundle valid on its own (its reasons are reported with
//! the arm's name in front, under their own [`Check`] kinds); every arm on the same host kind
//! (so the same clock), vCPUs, memory, backing, kernel/initramfs/guest-init/config digests,
//! deadline, contract, mode and count, each marked `contract.interleaved`, under the serial
//! observer, running the engine its name says (a tune phase: every arm truecold under the
//! vm-exit observer, its knobs what its name says, and alike except what its knobs change;
//! [`plan_problems`], `check_same`); the order consistent with the rows (the `i`-th appearance of an arm is its row `i`,
//! rows for a prefix of the order only) and sequential along it as one bundle's rows are
//! (request stamps strictly increasing, each after the previous launch's last stamp, no idle
//! gap as long as the shortest launch or 10 ms: an interleaved arm's bundle leaves its
//! gaps to this check, the other arms' launches fill them); and `comparison.json`,
//! `README.md` and `cdf.svg` byte for byte what [`generated_files`] makes of the verified
//! rows.
//!
//! # The comparison (one definition, [`compare_arms`])
//! For every unordered pair, `a` before `b` in the plan's arm order, over each arm's
//! successful rows (the headline, request → strict-ready): `n`, p50 and p99 (nearest rank,
//! [`crate::stats::percentile_sorted`]); the ratio `b / a` of the p50s and of the p99s in
//! parts per million, `floor(1e6 · b / a)` (integers: nothing stored is a float); a
//! percentile-bootstrap 95 % interval of each ratio ([`RESAMPLES`] resamples of both arms,
//! each resample's ratio computed the same way, the interval the nearest-rank 2.5th and
//! 97.5th of the sorted ratios), drawn from SplitMix64 seeded with `seed + k` for the `k`-th
//! pair (0-based, in `comparison.json` order; `seed` from `arms.json`); the two-sided
//! Mann–Whitney p and the verdict of [`crate::compare`]'s rule (b against a, lower is
//! better; its own bootstrap seeded with `seed`), the p written as text with three
//! significant digits ([`crate::compare::fmt_p`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bundle::{read_bundle, read_capped, regenerate, BundleError, MAX_PARSED_BYTES};
use crate::bundle_verify::{
    check_signature, check_sums, fully_stamped, gap_threshold, last_stamp, verify_bundle_with,
};
use crate::compare::{compare_values, fmt_p, mann_whitney_p, CompareOptions, SplitMix64};
use crate::plot::{arms_cdf_svg, CDF_FILE, STAGES_FILE};
use crate::report::{clock_caption, ms, README_FILE};
use crate::schema::{
    Clock, ContractKind, Engine, HostKind, Observer, ResultJson, Sample, HEADLINE,
    PERCENTILE_DEFINITION,
};
use crate::skeleton::{self, DirError};
use crate::stats::percentile_sorted;
use crate::sums::SIG_FILE;
use crate::sums::{parse_sums_with, sha256_hex, SumsError, SUMS_FILE};
use crate::verdict::{Check, Verdict, VerifyOptions};
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{apply, check_set, Change, Knob, TuneGuest, VmmChange};

/// The plan's file; its presence makes a directory a multi-arm directory.
pub const ARMS_FILE: &str = "arms.json";
/// The comparison's file.
pub const COMPARISON_FILE: &str = "comparison.json";
/// The CDF plot of every arm.
pub const ARMS_CDF_FILE: &str = "cdf.svg";
/// Version of `arms.json` and `comparison.json`.
pub const ARMS_SCHEMA: u32 = 1;
/// Bootstrap resamples per pair.
pub const RESAMPLES: usize = 2000;

/// The files [`generated_files`] makes.
const GENERATED: [&str; 3] = [COMPARISON_FILE, README_FILE, ARMS_CDF_FILE];
/// An arm bundle's files that `report` regenerates.
const ARM_GENERATED: [&str; 4] = [README_FILE, CDF_FILE, STAGES_FILE, SUMS_FILE];

/// One arm: its directory name, its engine and its tune knobs. An engines campaign's arm is
/// named by its engine ([`Engine::as_str`]) and has no knobs; a tune phase's arm runs
/// truecold and is named by its knobs ([`tune_arm_knobs`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmRef {
    pub name: String,
    pub engine: Engine,
    /// The tune knobs this arm applies (catalogue order); empty (and absent from
    /// `arms.json`) for an engines campaign.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<Knob>,
}

impl ArmRef {
    /// An engines campaign's arm: named by its engine, no knobs.
    pub fn engine(engine: Engine) -> Self {
        ArmRef {
            name: engine.as_str().to_string(),
            engine,
            knobs: Vec::new(),
        }
    }

    /// A tune phase's arm: truecold with `knobs`, named `name`.
    pub fn tune(name: impl Into<String>, knobs: Vec<Knob>) -> Self {
        ArmRef {
            name: name.into(),
            engine: Engine::Truecold,
            knobs,
        }
    }
}

pub use crate::names::{BASELINE_ARM, MINUS_PREFIX, RECOMMENDED_ARM};

/// What a tune arm's name says its knobs are, given the `recommended` arm's knobs (`None`:
/// the name is not a tune arm's). `baseline`: none; a knob's name: that knob;
/// `recommended`: every winner; `recommended-minus-<k>`: every winner but `k` (a winner).
pub fn tune_arm_knobs(name: &str, recommended: Option<&[Knob]>) -> Option<Vec<Knob>> {
    if name == BASELINE_ARM {
        return Some(Vec::new());
    }
    if name == RECOMMENDED_ARM {
        return recommended.map(<[Knob]>::to_vec);
    }
    if let Some(k) = name.strip_prefix(MINUS_PREFIX) {
        let k = Knob::parse(k)?;
        let rec = recommended?;
        return rec
            .contains(&k)
            .then(|| rec.iter().copied().filter(|x| *x != k).collect());
    }
    Knob::parse(name).map(|k| vec![k])
}

/// Whether `plan` is a kernel A/B of `truecold bisect config`: exactly the arms
/// [`crate::names::GOOD_ARM`] and [`crate::names::CANDIDATE_ARM`], both truecold, without
/// knobs (each boots its own kernel; the arms' bundles record which).
pub fn is_kernel_ab(plan: &ArmsPlan) -> bool {
    plan.arms.len() == 2
        && plan.arms[0].name == crate::names::GOOD_ARM
        && plan.arms[1].name == crate::names::CANDIDATE_ARM
        && plan
            .arms
            .iter()
            .all(|a| a.engine == Engine::Truecold && a.knobs.is_empty())
}

/// Whether `plan` is a tune phase (an arm has knobs or is named `baseline`); otherwise it is
/// an engines campaign.
pub fn is_tune_phase(plan: &ArmsPlan) -> bool {
    plan.arms
        .iter()
        .any(|a| !a.knobs.is_empty() || a.name == BASELINE_ARM)
}

/// How the campaign interleaved its arms: `order` lists `(round, arm name)` in launch order,
/// every round holding every arm exactly once (shuffled per round from `seed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmsPlan {
    pub seed: u64,
    pub rounds: u64,
    pub arms: Vec<ArmRef>,
    pub order: Vec<(u64, String)>,
}

/// `arms.json`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArmsFile {
    schema: u32,
    seed: u64,
    rounds: u64,
    arms: Vec<ArmRef>,
    order: Vec<(u64, String)>,
}

/// Why a multi-arm directory's files could not be written or regenerated.
#[derive(Debug, thiserror::Error)]
pub enum ArmsError {
    #[error("the arms plan is not consistent: {0}")]
    Plan(String),
    #[error("arm `{arm}`")]
    Arm {
        arm: String,
        #[source]
        source: BundleError,
    },
    #[error("{ARMS_FILE} does not parse")]
    Json(#[source] serde_json::Error),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error(transparent)]
    Dir(#[from] DirError),
}

/// `arms.json`'s bytes for `plan` (the one spelling the verifier accepts).
pub fn arms_bytes(plan: &ArmsPlan) -> Vec<u8> {
    let f = ArmsFile {
        schema: ARMS_SCHEMA,
        seed: plan.seed,
        rounds: plan.rounds,
        arms: plan.arms.clone(),
        order: plan.order.clone(),
    };
    // Only integers and strings: serialisation cannot fail.
    let mut b = serde_json::to_vec_pretty(&f).unwrap_or_default();
    b.push(b'\n');
    b
}

/// Parses `arms.json` (any schema but [`ARMS_SCHEMA`] is an error).
pub fn parse_arms(bytes: &[u8]) -> Result<ArmsPlan, String> {
    let f: ArmsFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if f.schema != ARMS_SCHEMA {
        return Err(format!(
            "schema {}, this verifier reads {ARMS_SCHEMA}",
            f.schema
        ));
    }
    Ok(ArmsPlan {
        seed: f.seed,
        rounds: f.rounds,
        arms: f.arms,
        order: f.order,
    })
}

/// Every way `plan` is not a plan (empty when it is one). An engines campaign: arms named
/// by their engine, each engine once, no knobs. A kernel A/B ([`is_kernel_ab`]): its two arms.
/// A tune phase ([`is_tune_phase`]): every arm
/// runs truecold, names unique, one `baseline`, each arm's knobs what its name says
/// ([`tune_arm_knobs`]), in catalogue order, a valid set
/// ([`truecold_proto::tune::check_set`]). Both: `order` the rounds `0..rounds` in turn, each
/// holding every arm exactly once.
pub fn plan_problems(plan: &ArmsPlan) -> Vec<String> {
    let mut bad = Vec::new();
    if plan.arms.is_empty() {
        bad.push("no arms".into());
    }
    if is_kernel_ab(plan) {
        // Two kernels of one engine: nothing to check beyond the order.
    } else if is_tune_phase(plan) {
        tune_plan_problems(plan, &mut bad);
    } else {
        let mut engines = BTreeSet::new();
        for a in &plan.arms {
            if a.name != a.engine.as_str() {
                bad.push(format!(
                    "arm `{}` runs `{}`: an arm is named by its engine",
                    a.name, a.engine
                ));
            }
            if !engines.insert(a.engine) {
                bad.push(format!("engine `{}` has two arms", a.engine));
            }
        }
    }
    let arm_names: BTreeSet<&str> = plan.arms.iter().map(|a| a.name.as_str()).collect();
    let k = plan.arms.len() as u64;
    if plan.order.len() as u128 != u128::from(plan.rounds) * u128::from(k) {
        bad.push(format!(
            "{} launches in the order, {} rounds × {k} arms planned",
            plan.order.len(),
            plan.rounds
        ));
    }
    for (pos, (round, name)) in plan.order.iter().enumerate() {
        let want = (pos as u64).checked_div(k).unwrap_or(0);
        if *round != want {
            bad.push(format!(
                "launch {pos} is in round {round}, its place says round {want}: rounds run in \
                 turn, each with every arm once"
            ));
            break;
        }
        if !arm_names.contains(name.as_str()) {
            bad.push(format!("launch {pos} names `{name}`, not an arm"));
        }
    }
    if k > 0 {
        for (r, chunk) in plan.order.chunks(k as usize).enumerate() {
            let names: BTreeSet<&str> = chunk.iter().map(|(_, n)| n.as_str()).collect();
            if names.len() != chunk.len() {
                bad.push(format!("round {r} launches an arm twice"));
            }
        }
    }
    bad
}

/// A tune phase's arms: truecold, unique names, one baseline, knobs as named, valid sets.
fn tune_plan_problems(plan: &ArmsPlan, bad: &mut Vec<String>) {
    let recommended = plan
        .arms
        .iter()
        .find(|a| a.name == RECOMMENDED_ARM)
        .map(|a| a.knobs.as_slice());
    let mut names = BTreeSet::new();
    for a in &plan.arms {
        if !names.insert(a.name.as_str()) {
            bad.push(format!("arm `{}` appears twice", a.name));
        }
        if a.engine != Engine::Truecold {
            bad.push(format!(
                "arm `{}` runs `{}`: every arm of a tune phase runs truecold",
                a.name, a.engine
            ));
        }
        if a.name == RECOMMENDED_ARM && a.knobs.is_empty() {
            bad.push(format!("arm `{RECOMMENDED_ARM}` has no knobs"));
        }
        match tune_arm_knobs(&a.name, recommended) {
            None => bad.push(format!(
                "arm `{}` is not a tune arm's name (`{BASELINE_ARM}`, a knob, \
                 `{RECOMMENDED_ARM}`, `{MINUS_PREFIX}<winner>`)",
                a.name
            )),
            Some(k) if k != a.knobs => bad.push(format!(
                "arm `{}` applies [{}], its name says [{}]",
                a.name,
                knob_list(&a.knobs),
                knob_list(&k)
            )),
            Some(_) => {}
        }
        if a.knobs.windows(2).any(|w| w[0] >= w[1]) {
            bad.push(format!(
                "arm `{}`: knobs not in catalogue order, each once",
                a.name
            ));
        }
        if let Err(e) = check_set(&a.knobs, TuneGuest::Linux) {
            bad.push(format!("arm `{}`: {e}", a.name));
        }
    }
    if !names.contains(BASELINE_ARM) {
        bad.push(format!("no `{BASELINE_ARM}` arm"));
    }
}

/// `a, b, c` of knob names.
pub fn knob_list(knobs: &[Knob]) -> String {
    knobs
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One arm as the comparison sees it.
#[derive(Clone, Debug)]
pub struct ArmData {
    pub arm: ArmRef,
    pub result: ResultJson,
    /// Attempts (rows).
    pub attempts: u64,
    /// The successful rows' headlines, ascending.
    pub ok: Vec<u64>,
}

impl ArmData {
    /// From a verified (or about to be verified) bundle.
    pub fn new(arm: ArmRef, result: ResultJson, samples: &[Sample]) -> Self {
        let mut ok: Vec<u64> = samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(|s| s.latency_ns)
            .collect();
        ok.sort_unstable();
        ArmData {
            arm,
            result,
            attempts: samples.len() as u64,
            ok,
        }
    }
}

/// One arm's line of `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArmSummary {
    pub name: String,
    pub engine: Engine,
    /// The engine binary's `--version` line.
    pub version: String,
    pub attempts: u64,
    /// Successful rows.
    pub n: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
}

/// One pair of `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PairComparison {
    pub a: String,
    pub b: String,
    pub n_a: u64,
    pub n_b: u64,
    pub p50_a_ns: Option<u64>,
    pub p50_b_ns: Option<u64>,
    pub p99_a_ns: Option<u64>,
    pub p99_b_ns: Option<u64>,
    /// `floor(1e6 · p50(b) / p50(a))`.
    pub ratio_p50_ppm: Option<u64>,
    pub ratio_p50_ci95_ppm: Option<[u64; 2]>,
    /// `floor(1e6 · p99(b) / p99(a))`.
    pub ratio_p99_ppm: Option<u64>,
    pub ratio_p99_ci95_ppm: Option<[u64; 2]>,
    /// Two-sided Mann–Whitney U p, three significant digits.
    pub mann_whitney_p: Option<String>,
    /// [`crate::compare`]'s verdict of b against a (`improved`: b is faster).
    pub verdict: String,
    pub why: String,
}

/// `comparison.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArmsComparison {
    pub schema: u32,
    pub metric: String,
    pub rows: String,
    pub percentile_definition: String,
    pub ratio: String,
    pub bootstrap: String,
    pub seed: u64,
    pub resamples: u64,
    pub verdict_rule: String,
    pub host_kind: Option<HostKind>,
    pub clock: Option<Clock>,
    pub arms: Vec<ArmSummary>,
    pub pairs: Vec<PairComparison>,
}

/// `floor(1e6 · b / a)`; `None` when `a` is 0.
pub fn ratio_ppm(a: u64, b: u64) -> Option<u64> {
    (a > 0).then(|| (u128::from(b) * 1_000_000 / u128::from(a)).min(u128::from(u64::MAX)) as u64)
}

/// 0-based index of the nearest-rank `p`-th percentile of `n` values.
fn rank0(p: u64, n: usize) -> usize {
    ((p as usize * n).div_ceil(100)).clamp(1, n) - 1
}

/// A resample of `src` into `buf`, and its p50 and p99.
fn resample_p50_p99(src: &[u64], buf: &mut Vec<u64>, rng: &mut SplitMix64) -> (u64, u64) {
    buf.clear();
    buf.extend((0..src.len()).map(|_| src[rng.below(src.len())]));
    let n = buf.len();
    let p50 = *buf.select_nth_unstable(rank0(50, n)).1;
    let p99 = *buf.select_nth_unstable(rank0(99, n)).1;
    (p50, p99)
}

/// The nearest-rank 2.5th and 97.5th of `v` (sorted here).
fn interval(mut v: Vec<u64>) -> Option<[u64; 2]> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let lo = ((25 * n).div_ceil(1000)).clamp(1, n) - 1;
    let hi = ((975 * n).div_ceil(1000)).clamp(1, n) - 1;
    Some([v[lo], v[hi]])
}

/// Percentile-bootstrap 95 % intervals of the p50 and p99 ratios `b / a` (ppm).
pub fn bootstrap_ratio_ci(
    a: &[u64],
    b: &[u64],
    resamples: usize,
    seed: u64,
) -> (Option<[u64; 2]>, Option<[u64; 2]>) {
    if a.is_empty() || b.is_empty() {
        return (None, None);
    }
    let mut rng = SplitMix64(seed);
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let (mut r50, mut r99) = (Vec::new(), Vec::new());
    for _ in 0..resamples {
        let (a50, a99) = resample_p50_p99(a, &mut ba, &mut rng);
        let (b50, b99) = resample_p50_p99(b, &mut bb, &mut rng);
        match (ratio_ppm(a50, b50), ratio_ppm(a99, b99)) {
            (Some(x), Some(y)) => {
                r50.push(x);
                r99.push(y);
            }
            // A zero headline never verifies (every host stage takes time).
            _ => return (None, None),
        }
    }
    (interval(r50), interval(r99))
}

/// The comparison of every pair of `arms` (in plan order).
pub fn compare_arms(seed: u64, arms: &[ArmData]) -> ArmsComparison {
    let host = arms.first().map(|a| a.result.environment.host_kind);
    let opts = CompareOptions {
        seed,
        ..CompareOptions::default()
    };
    let summaries = arms
        .iter()
        .map(|a| ArmSummary {
            name: a.arm.name.clone(),
            engine: a.arm.engine,
            version: a.result.configuration.engine.version.clone(),
            attempts: a.attempts,
            n: a.ok.len() as u64,
            p50_ns: percentile_sorted(&a.ok, 50, 100),
            p99_ns: percentile_sorted(&a.ok, 99, 100),
        })
        .collect();
    let mut pairs = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        for b in &arms[i + 1..] {
            let k = pairs.len() as u64;
            let (p50a, p50b) = (
                percentile_sorted(&a.ok, 50, 100),
                percentile_sorted(&b.ok, 50, 100),
            );
            let (p99a, p99b) = (
                percentile_sorted(&a.ok, 99, 100),
                percentile_sorted(&b.ok, 99, 100),
            );
            let (ci50, ci99) = bootstrap_ratio_ci(&a.ok, &b.ok, RESAMPLES, seed.wrapping_add(k));
            let m = compare_values(HEADLINE, true, &a.ok, &b.ok, &opts);
            pairs.push(PairComparison {
                a: a.arm.name.clone(),
                b: b.arm.name.clone(),
                n_a: a.ok.len() as u64,
                n_b: b.ok.len() as u64,
                p50_a_ns: p50a,
                p50_b_ns: p50b,
                p99_a_ns: p99a,
                p99_b_ns: p99b,
                ratio_p50_ppm: p50a.zip(p50b).and_then(|(x, y)| ratio_ppm(x, y)),
                ratio_p50_ci95_ppm: ci50,
                ratio_p99_ppm: p99a.zip(p99b).and_then(|(x, y)| ratio_ppm(x, y)),
                ratio_p99_ci95_ppm: ci99,
                // Reported whatever the verdict (compare's rule computes none below its
                // minimum sample count).
                mann_whitney_p: mann_whitney_p(&a.ok, &b.ok).map(fmt_p),
                verdict: m.verdict.as_str().to_string(),
                why: m.why,
            });
        }
    }
    ArmsComparison {
        schema: ARMS_SCHEMA,
        metric: HEADLINE.to_string(),
        rows: "each arm's successful rows (as its own bundle verifies them)".into(),
        percentile_definition: PERCENTILE_DEFINITION.to_string(),
        ratio: "b / a in parts per million: floor(1e6 * b / a)".into(),
        bootstrap: format!(
            "percentile bootstrap, 95 %: {RESAMPLES} resamples of both arms, the nearest-rank \
             2.5th and 97.5th of the resampled ratios; pair k (0-based, in this order) draws \
             from SplitMix64 seeded with seed + k"
        ),
        seed,
        resamples: RESAMPLES as u64,
        verdict_rule: format!(
            "truecold-proof compare's rule, b against a (lower is better): alpha {}, \
             threshold {} % of a's median, at least {} successes per arm, 95 % interval of \
             the median difference at most {} % of a's median (its bootstrap seeded with seed)",
            opts.alpha, opts.threshold_pct, opts.min_samples, opts.max_ci_width_pct
        ),
        host_kind: host,
        clock: host.map(HostKind::clock),
        arms: summaries,
        pairs,
    }
}

fn ratio_text(r: Option<u64>, ci: Option<[u64; 2]>) -> String {
    let x = |p: u64| format!("{}.{:03}", p / 1_000_000, (p / 1_000) % 1_000);
    match (r, ci) {
        (Some(r), Some([lo, hi])) => format!("{} [{}, {}]", x(r), x(lo), x(hi)),
        (Some(r), None) => x(r),
        _ => "–".into(),
    }
}

fn opt_ms(v: Option<u64>) -> String {
    v.map_or("–".into(), ms)
}

/// The directory's `README.md`.
pub fn readme(plan: &ArmsPlan, arms: &[ArmData], c: &ArmsComparison) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# truecold engines campaign: {} arm(s), {} round(s)\n",
        plan.arms.len(),
        plan.rounds
    );
    let first = arms.first().map(|a| &a.result);
    if let Some(r) = first {
        let host = r.environment.host_kind;
        let _ = writeln!(s, "- host kind: {}", host.as_str());
        let _ = writeln!(s, "- clock: {}", host.clock().describe());
        if r.contract.observer == Observer::Agent {
            let _ = writeln!(
                s,
                "- contract: parity (docs/parity.md): every sample is request → strict-ready \
                 when both the guest agent's verified answer on vsock and a verified TCP \
                 round trip to the guest over the launch's tap are in; each launch has its \
                 own workspace clone (virtio-blk), its lifecycle committed to SQLite \
                 (state.csv) and its cleanup verified; the same guest (parity kernel, \
                 initramfs, guest-init) for every arm"
            );
        } else {
            let _ = writeln!(
                s,
                "- contract: every sample is request → strict-ready observed on serial: the \
                 bench stamps the request before it spawns the engine, writes a fresh nonce \
                 on the engine's serial input after the guest's ready line, and stamps \
                 strict-ready when the verified answer arrives on the engine's serial output; \
                 the same guest (kernel, initramfs, guest-init) for every arm"
            );
        }
        let cfg = &r.configuration;
        let _ = writeln!(
            s,
            "- each arm: {} vCPU, {}, backing {}, {}, deadline {} ms",
            cfg.vcpus,
            crate::report::mem_text(cfg.mem_bytes),
            cfg.backing_kind().map_or("?", |b| b.as_str()),
            r.contract.mode.describe(),
            ms(r.contract.deadline_ns)
        );
    }
    let _ = writeln!(
        s,
        "- interleaving: each round launches every arm once, in an order shuffled from seed \
         {} ({ARMS_FILE})\n",
        plan.seed
    );
    let _ = writeln!(s, "## Arms\n");
    let _ = writeln!(
        s,
        "| arm | engine version | attempts | ok | p50 ms | p99 ms |\n|---|---|---|---|---|---|"
    );
    for a in &c.arms {
        let _ = writeln!(
            s,
            "| [{n}]({n}/README.md) | `{}` | {} | {} | {} | {} |",
            a.version.replace('|', "\\|").replace('`', "'"),
            a.attempts,
            a.n,
            opt_ms(a.p50_ns),
            opt_ms(a.p99_ns),
            n = a.name,
        );
    }
    let _ = writeln!(
        s,
        "\n## Comparison ({HEADLINE}, successes)\n\nRatios are b / a with a bootstrap 95 % \
         interval; the verdict is `truecold-proof compare`'s rule applied to b against a \
         (`improved`: b is faster than a, `regressed`: b is slower). Exact figures in {COMPARISON_FILE}.\n"
    );
    let _ = writeln!(
        s,
        "| a | b | n a | n b | p50 a ms | p50 b ms | p50 b/a [95 % CI] | p99 b/a [95 % CI] | \
         Mann–Whitney p | verdict |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &c.pairs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.a,
            p.b,
            p.n_a,
            p.n_b,
            opt_ms(p.p50_a_ns),
            opt_ms(p.p50_b_ns),
            ratio_text(p.ratio_p50_ppm, p.ratio_p50_ci95_ppm),
            ratio_text(p.ratio_p99_ppm, p.ratio_p99_ci95_ppm),
            p.mann_whitney_p.as_deref().unwrap_or("–"),
            p.verdict
        );
    }
    let _ = writeln!(
        s,
        "\n![every arm's CDF]({ARMS_CDF_FILE})\n\nEach arm's directory is a complete bundle \
         (`truecold-proof verify <dir>/<arm>`); `truecold-proof verify <dir>` checks them all, \
         the order against their request stamps and this comparison; `sha256sum -c --strict \
         {SUMS_FILE}` checks every file."
    );
    s
}

/// `comparison.json`, `README.md` and `cdf.svg` for `plan` and its arms' data.
pub fn generated_files(plan: &ArmsPlan, arms: &[ArmData]) -> Vec<(String, Vec<u8>)> {
    let c = compare_arms(plan.seed, arms);
    // Integers, strings and options only: serialisation cannot fail.
    let mut json = serde_json::to_vec_pretty(&c).unwrap_or_default();
    json.push(b'\n');
    let clock = c.clock.map_or("no arm", clock_caption);
    let curves: Vec<(String, Vec<u64>)> = arms
        .iter()
        .map(|a| (a.arm.name.clone(), a.ok.clone()))
        .collect();
    let svg = arms_cdf_svg(
        &format!("{HEADLINE}: {} arm(s), successes", arms.len()),
        clock,
        &curves,
    );
    vec![
        (COMPARISON_FILE.to_string(), json),
        (README_FILE.to_string(), readme(plan, arms, &c).into_bytes()),
        (ARMS_CDF_FILE.to_string(), svg.into_bytes()),
    ]
}

/// A `SHA256SUMS` name of a multi-arm directory: a top file, or `<arm>/<file>`.
pub fn is_valid_arms_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 2)
}

/// Parses a multi-arm `SHA256SUMS`.
pub fn parse_arms_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_arms_path)
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ArmsError> {
    Ok(skeleton::write(dir, name, bytes)?)
}

/// Digests of every regular file of the top directory and of each arm directory (arm files
/// as `<arm>/<file>`), `SHA256SUMS` and `SHA256SUMS.sig` of the top excluded.
fn digests_of(dir: &Path, arms: &[ArmRef]) -> Result<BTreeMap<String, String>, ArmsError> {
    let mut out = BTreeMap::new();
    let mut hash_dir = |d: &Path, prefix: &str| -> Result<(), ArmsError> {
        for e in fs::read_dir(d).map_err(PathIoError::at("list", d))? {
            let e = e.map_err(PathIoError::at("list", d))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file {
                continue;
            }
            if prefix.is_empty() && (name == SUMS_FILE || name == SIG_FILE) {
                continue;
            }
            let (d, _) = crate::fsio::hash_file(&e.path()).map_err(DirError::from)?;
            out.insert(format!("{prefix}{name}"), d);
        }
        Ok(())
    };
    hash_dir(dir, "")?;
    for a in arms {
        hash_dir(&dir.join(&a.name), &format!("{}/", a.name))?;
    }
    Ok(out)
}

fn read_arms(dir: &Path, plan: &ArmsPlan) -> Result<Vec<ArmData>, ArmsError> {
    plan.arms
        .iter()
        .map(|a| {
            let (r, s) = read_bundle(&dir.join(&a.name)).map_err(|source| ArmsError::Arm {
                arm: a.name.clone(),
                source,
            })?;
            Ok(ArmData::new(a.clone(), r, &s))
        })
        .collect()
}

/// Writes `arms.json`, `comparison.json`, `README.md`, `cdf.svg` and `SHA256SUMS` into `dir`
/// (each file atomically: written, fsynced, renamed), after every arm bundle was written
/// inside it, and returns the verifier's verdict on the whole directory. An arm whose bundle
/// does not verify is still compared (failures are data); the verdict says why it is invalid.
pub fn write_arms(dir: &Path, plan: &ArmsPlan) -> Result<Verdict, ArmsError> {
    let problems = plan_problems(plan);
    if !problems.is_empty() {
        return Err(ArmsError::Plan(problems.join("; ")));
    }
    let arms = read_arms(dir, plan)?;
    write_atomic(dir, ARMS_FILE, &arms_bytes(plan))?;
    for (name, bytes) in generated_files(plan, &arms) {
        write_atomic(dir, &name, &bytes)?;
    }
    write_sums(dir, plan)?;
    Ok(verify_arms_dir(dir, &VerifyOptions::default()))
}

fn write_sums(dir: &Path, plan: &ArmsPlan) -> Result<(), ArmsError> {
    let digests = digests_of(dir, &plan.arms)?;
    let entries: Vec<(String, String)> = digests.into_iter().collect();
    Ok(skeleton::write_sums(dir, &entries)?)
}

/// `report DIR` on a multi-arm directory: regenerates each arm's README and plots
/// ([`crate::bundle::regenerate`]), then the top `comparison.json`, `README.md`, `cdf.svg`
/// and `SHA256SUMS`. Refuses when a file that is not regenerated differs from its top
/// `SHA256SUMS` entry. Returns the paths rewritten.
pub fn regenerate_arms(dir: &Path) -> Result<Vec<String>, ArmsError> {
    let listed = skeleton::read_listing(dir, parse_arms_sums)?;
    let regenerated = |n: &str| match n.split_once('/') {
        None => GENERATED.contains(&n),
        Some((_, f)) => ARM_GENERATED.contains(&f),
    };
    skeleton::check_unchanged(dir, &listed, regenerated)?;
    let ab = skeleton::read_record(&dir.join(ARMS_FILE))?;
    let plan = parse_arms(&ab).map_err(|e| ArmsError::Plan(e.to_string()))?;
    let problems = plan_problems(&plan);
    if !problems.is_empty() {
        return Err(ArmsError::Plan(problems.join("; ")));
    }
    let mut written = Vec::new();
    for a in &plan.arms {
        let names = regenerate(&dir.join(&a.name)).map_err(|source| ArmsError::Arm {
            arm: a.name.clone(),
            source,
        })?;
        written.extend(names.into_iter().map(|n| format!("{}/{n}", a.name)));
    }
    let arms = read_arms(dir, &plan)?;
    for (name, bytes) in generated_files(&plan, &arms) {
        write_atomic(dir, &name, &bytes)?;
        written.push(name);
    }
    write_sums(dir, &plan)?;
    written.push(SUMS_FILE.to_string());
    Ok(written)
}

/// Verifies `dir` as a multi-arm directory when it holds [`ARMS_FILE`] (anything by that
/// name, even a link: [`verify_arms_dir`] says what is wrong with it), else as one bundle:
/// what a directory that holds bundles or A/B directories (a bisect's steps) verifies each
/// one with.
pub fn verify_arms_or_bundle(dir: &Path, opts: &VerifyOptions) -> Verdict {
    if crate::fsio::exists_here(&dir.join(ARMS_FILE)) {
        verify_arms_dir(dir, opts)
    } else {
        verify_bundle_with(dir, opts)
    }
}

/// Verifies a multi-arm directory (see the module doc); [`crate::verify_dir`] calls this
/// when `dir` holds `arms.json`.
pub fn verify_arms_dir(dir: &Path, opts: &VerifyOptions) -> Verdict {
    verify_arms_rows(dir, opts).verdict
}

/// A multi-arm directory as verified: the verdict, the plan (when `arms.json` parsed) and
/// every arm whose bundle parsed, with exactly the rows its verification judged.
pub(crate) struct ArmsVerified {
    pub verdict: Verdict,
    pub plan: Option<ArmsPlan>,
    pub arms: Vec<ArmData>,
}

/// [`verify_arms_dir`], keeping the plan and the verified rows.
pub(crate) fn verify_arms_rows(dir: &Path, opts: &VerifyOptions) -> ArmsVerified {
    let mut out = ArmsVerified {
        verdict: Verdict::default(),
        plan: None,
        arms: Vec::new(),
    };
    let v = &mut out.verdict;
    let ap = dir.join(ARMS_FILE);
    let plan_bytes = match read_capped(&ap, MAX_PARSED_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.unreadable = Some(format!(
                "{ARMS_FILE} is larger than {MAX_PARSED_BYTES} bytes"
            ));
            return out;
        }
        Err(e) => {
            v.unreadable = Some(format!("cannot read {ARMS_FILE}: {e}"));
            return out;
        }
    };
    let parsed = parse_arms(&plan_bytes);
    let plan_parsed = parsed.is_ok();
    let plan = match parsed {
        Ok(p) => p,
        Err(e) => {
            v.add(Check::ArmsPlan, format!("{ARMS_FILE}: {e}"));
            ArmsPlan {
                seed: 0,
                rounds: 0,
                arms: Vec::new(),
                order: Vec::new(),
            }
        }
    };
    if !v.has(Check::ArmsPlan) {
        if arms_bytes(&plan) != plan_bytes {
            v.add(
                Check::ArmsPlan,
                format!("{ARMS_FILE} is not in the writer's canonical form"),
            );
        }
        for p in plan_problems(&plan) {
            v.add(Check::ArmsPlan, format!("{ARMS_FILE}: {p}"));
        }
    }
    let arm_names: BTreeSet<&str> = plan.arms.iter().map(|a| a.name.as_str()).collect();
    v.arms = Some(plan.arms.iter().map(|a| a.name.clone()).collect());
    // The directory: top files, and a directory per arm.
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return out;
        }
    };
    let mut top: BTreeSet<String> = BTreeSet::new();
    let mut present_arms: BTreeSet<String> = BTreeSet::new();
    for e in entries {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                v.unreadable = Some(format!("cannot list directory: {err}"));
                return out;
            }
        };
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().ok();
        if ft.is_some_and(|t| t.is_file()) {
            top.insert(name);
        } else if ft.is_some_and(|t| t.is_dir()) && arm_names.contains(name.as_str()) {
            present_arms.insert(name);
        } else {
            v.add(
                Check::NotAFile,
                format!("`{name}` is neither a regular file nor an arm's directory"),
            );
        }
    }
    for r in [
        ARMS_FILE,
        COMPARISON_FILE,
        README_FILE,
        ARMS_CDF_FILE,
        SUMS_FILE,
    ] {
        if !top.contains(r) {
            v.add(
                Check::RequiredFileMissing,
                format!("required file `{r}` is missing"),
            );
        }
    }
    for a in &plan.arms {
        if !present_arms.contains(&a.name) {
            v.add(
                Check::ArmMissing,
                format!("arm `{}` has no directory", a.name),
            );
        }
    }
    // SHA256SUMS over every file. An arm named twice in the plan (a reason above) is
    // hashed and verified once: a plan repeating one arm costs no more than naming it once.
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let present: Vec<ArmRef> = plan
        .arms
        .iter()
        .filter(|a| present_arms.contains(&a.name) && seen.insert(a.name.as_str()))
        .cloned()
        .collect();
    let digests = match digests_of(dir, &present) {
        Ok(d) => d,
        Err(e) => {
            v.unreadable = Some(crate::verdict::chain(&e));
            return out;
        }
    };
    let sums = match read_capped(&dir.join(SUMS_FILE), MAX_PARSED_BYTES) {
        Ok(Some(b)) => Some(b),
        Ok(None) => {
            v.add(
                Check::TooLarge,
                format!("`{SUMS_FILE}` is larger than {MAX_PARSED_BYTES} bytes"),
            );
            None
        }
        Err(_) => None,
    };
    let mut all = digests.clone();
    if let Some(b) = &sums {
        all.insert(SUMS_FILE.to_string(), sha256_hex(b));
    }
    if top.contains(SIG_FILE) {
        all.insert(SIG_FILE.to_string(), String::new());
    }
    check_sums(v, &all, sums.as_deref(), parse_arms_sums);
    // Each arm on its own.
    let mut arms: Vec<(ArmData, Vec<Sample>)> = Vec::new();
    for a in &present {
        let av = verify_bundle_with(&dir.join(&a.name), &VerifyOptions::default());
        if let Some(u) = &av.unreadable {
            v.add(
                Check::ArmMissing,
                format!("arm `{}` is unreadable: {u}", a.name),
            );
        }
        for r in &av.reasons {
            v.add(r.check, format!("{}: {}", a.name, r.detail));
        }
        if let (Some(r), Some(s)) = (av.result, av.samples) {
            arms.push((ArmData::new(a.clone(), r, &s), s));
        }
    }
    v.rows = Some(arms.iter().map(|(_, s)| s.len()).sum());
    check_same(v, &plan, &arms);
    check_order(v, &plan, &arms);
    let data: Vec<ArmData> = arms.into_iter().map(|(a, _)| a).collect();
    if data.len() == plan.arms.len() && !plan.arms.is_empty() {
        for (name, bytes) in generated_files(&plan, &data) {
            if digests.get(&name).is_some_and(|d| *d != sha256_hex(&bytes)) {
                let check = if name == COMPARISON_FILE {
                    Check::Comparison
                } else {
                    Check::GeneratedStale
                };
                v.add(
                    check,
                    format!(
                        "`{name}` differs from what `truecold-proof report` makes of the arms' \
                         verified rows"
                    ),
                );
            }
        }
    }
    check_signature(v, dir, opts, top.contains(SIG_FILE), sums.as_deref());
    out.arms = data;
    out.plan = plan_parsed.then_some(plan);
    out
}

/// Every arm measured alike: one host kind (so one clock), one configuration, one guest,
/// one contract, running the engine its name says. An engines campaign: under the serial
/// observer, Linux, every artifact and the backing the same. A tune phase: under the vm-exit
/// observer, probe or Linux, and alike except what the arm's knobs change: the backing is
/// the baseline's with the knobs applied ([`truecold_proto::tune::apply`]); the vmlinux
/// digest is the same for arms with the same Kconfig knobs and `bzimage`, the config digest
/// for arms with the same Kconfig knobs; the command line may differ. A kernel A/B
/// ([`is_kernel_ab`]): under the vm-exit observer, Linux, alike in everything but vmlinux and
/// config.
fn check_same(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    let tune = is_tune_phase(plan);
    // A kernel A/B: observed at the VM exit like a tune, alike in everything but the kernel
    // (vmlinux and config are what it compares).
    let kernel_ab = is_kernel_ab(plan);
    for (a, _) in arms {
        let r = &a.result;
        if r.configuration.engine.kind != a.arm.engine {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` is a `{}` bundle",
                    a.arm.name, r.configuration.engine.kind
                ),
            );
        }
        // An engines campaign measures one contract in every arm: the strict one (serial)
        // or the parity one (agent), as its first arm says.
        let observer = if tune || kernel_ab {
            Observer::VmExit
        } else if arms.first().map(|(f, _)| f.result.contract.observer) == Some(Observer::Agent) {
            Observer::Agent
        } else {
            Observer::Serial
        };
        if r.contract.observer != observer {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` is observed at `{}`: every arm of {} is observed at `{}`",
                    a.arm.name,
                    r.contract.observer.as_str(),
                    if tune {
                        "a tune phase"
                    } else if kernel_ab {
                        "a kernel A/B"
                    } else {
                        "an engines campaign"
                    },
                    observer.as_str()
                ),
            );
        }
        if !tune && r.contract.kind != ContractKind::Linux {
            v.add(
                Check::ArmsMismatch,
                format!("arm `{}` is not a Linux bundle", a.arm.name),
            );
        }
        if !r.contract.interleaved {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` does not say it is interleaved: every arm of a multi-arm \
                     directory is",
                    a.arm.name
                ),
            );
        }
        if tune {
            if let Err(e) = check_set(&a.arm.knobs, r.contract.kind.tune_guest()) {
                v.add(
                    Check::ArmsMismatch,
                    format!("arm `{}`: {e} ({})", a.arm.name, r.contract.kind.as_str()),
                );
            }
        }
        {
            let k = r.configuration.knobs.as_slice();
            if k != a.arm.knobs.as_slice() {
                v.add(
                    Check::ArmsMismatch,
                    format!(
                        "arm `{}`'s bundle applied knobs [{}], the plan says [{}]",
                        a.arm.name,
                        knob_list(k),
                        knob_list(&a.arm.knobs)
                    ),
                );
            }
        }
        if r.contract.mode.planned_attempts() != plan.rounds {
            v.add(
                Check::ArmsMismatch,
                format!(
                    "arm `{}` planned {} attempts, the campaign {} rounds",
                    a.arm.name,
                    r.contract.mode.planned_attempts(),
                    plan.rounds
                ),
            );
        }
    }
    let reference = arms
        .iter()
        .find(|(a, _)| tune && a.arm.name == BASELINE_ARM)
        .or(arms.first());
    let Some((first, _)) = reference else {
        return;
    };
    let f = &first.result;
    let artifact = |r: &ResultJson, k: &str| r.artifacts.get(k).cloned();
    // Tune: the first arm with each kernel key holds that key's digest.
    let mut kernels: BTreeMap<KernelKey, (&str, Option<String>)> = BTreeMap::new();
    let mut configs: BTreeMap<Vec<Knob>, (&str, Option<String>)> = BTreeMap::new();
    if tune {
        kernels.insert(
            kernel_key(&first.arm.knobs),
            (first.arm.name.as_str(), artifact(f, "vmlinux")),
        );
        configs.insert(
            kernel_key(&first.arm.knobs).0,
            (first.arm.name.as_str(), artifact(f, "config")),
        );
    }
    for (a, _) in arms {
        if std::ptr::eq(a, first) {
            continue;
        }
        let r = &a.result;
        let mut differ: Vec<String> = Vec::new();
        let mut same = |what: &str, x: String, y: String| {
            if x != y {
                differ.push(format!("{what} {y} (`{}` has {x})", first.arm.name));
            }
        };
        same(
            "host kind",
            f.environment.host_kind.as_str().into(),
            r.environment.host_kind.as_str().into(),
        );
        same(
            "clock",
            f.contract.clock.as_str().into(),
            r.contract.clock.as_str().into(),
        );
        same(
            "vCPUs",
            f.configuration.vcpus.to_string(),
            r.configuration.vcpus.to_string(),
        );
        same(
            "memory",
            f.configuration.mem_bytes.to_string(),
            r.configuration.mem_bytes.to_string(),
        );
        if !tune {
            same(
                "backing",
                format!("{:?}", f.configuration.backing_kind()),
                format!("{:?}", r.configuration.backing_kind()),
            );
        }
        same(
            "deadline",
            f.contract.deadline_ns.to_string(),
            r.contract.deadline_ns.to_string(),
        );
        same(
            "mode",
            f.contract.mode.describe(),
            r.contract.mode.describe(),
        );
        same(
            "contract",
            f.contract.kind.as_str().into(),
            r.contract.kind.as_str().into(),
        );
        // Parity arms: one workspace image, one network pair, one journal setting.
        if let (Some(x), Some(y)) = (&f.environment.parity, &r.environment.parity) {
            same(
                "workspace image digest",
                x.workspace_sha256.clone(),
                y.workspace_sha256.clone(),
            );
            same("network pair", x.net_pair.clone(), y.net_pair.clone());
            same(
                "journal",
                format!("{:?}", x.journal),
                format!("{:?}", y.journal),
            );
        }
        let kernel_files: &[&str] = if tune || kernel_ab {
            &["initramfs", "guest_init"]
        } else {
            &["vmlinux", "initramfs", "guest_init", "config"]
        };
        for k in kernel_files {
            same(
                &format!("{k} digest"),
                format!("{:?}", artifact(f, k)),
                format!("{:?}", artifact(r, k)),
            );
        }
        if let Some(d) = crate::schema::virtual_clock_differs(&f.environment, &r.environment) {
            differ.push(format!("virtual clock: {d} (against `{}`)", first.arm.name));
        }
        if tune {
            let want = f
                .configuration
                .backing_kind()
                .map(|b| apply(&a.arm.knobs, b).backing);
            if want != r.configuration.backing_kind() {
                differ.push(format!(
                    "backing {:?}, the baseline's with its knobs applied is {want:?}",
                    r.configuration.backing_kind()
                ));
            }
            let key = kernel_key(&a.arm.knobs);
            for (what, (by, digest)) in [
                (
                    "vmlinux",
                    kernels
                        .entry(key.clone())
                        .or_insert((a.arm.name.as_str(), artifact(r, "vmlinux"))),
                ),
                (
                    "config",
                    configs
                        .entry(key.0.clone())
                        .or_insert((a.arm.name.as_str(), artifact(r, "config"))),
                ),
            ] {
                let got = artifact(r, what);
                if *digest != got {
                    differ.push(format!(
                        "{what} digest {got:?} (`{by}`, built with the same Kconfig knobs{}, \
                         has {digest:?})",
                        if what == "vmlinux" { " and image" } else { "" }
                    ));
                }
            }
        }
        for d in differ {
            v.add(
                Check::ArmsMismatch,
                format!("arm `{}`: {d}: every arm runs alike", a.arm.name),
            );
        }
    }
}

/// What a tune arm's kernel is built and booted from: its Kconfig knobs, and whether it
/// boots the bzImage.
type KernelKey = (Vec<Knob>, bool);

/// The [`KernelKey`] of an arm with `knobs`.
fn kernel_key(knobs: &[Knob]) -> KernelKey {
    (
        knobs
            .iter()
            .copied()
            .filter(|k| matches!(k.change(), Change::Kconfig(_)))
            .collect(),
        knobs
            .iter()
            .any(|k| k.change() == Change::Vmm(VmmChange::BzImage)),
    )
}

/// The order against the rows: the `i`-th appearance of an arm is its row `i`; rows exist
/// for a prefix of the order only (all of it unless an arm is incomplete); along the order
/// the campaign is sequential, as one bundle's rows are (the single-bundle timing rules of
/// [`crate::verify`] applied to the launches in order): each request after the previous
/// launch's request and last stamp, and, after a fully stamped launch, an idle gap shorter
/// than the shortest launch of any arm or 10 ms ([`gap_threshold`]; not judged
/// with `--drop-caches`).
fn check_order(v: &mut Verdict, plan: &ArmsPlan, arms: &[(ArmData, Vec<Sample>)]) {
    if arms.len() != plan.arms.len() {
        return;
    }
    let rows: BTreeMap<&str, &Vec<Sample>> =
        arms.iter().map(|(a, s)| (a.arm.name.as_str(), s)).collect();
    let threshold = gap_threshold(
        arms.iter()
            .flat_map(|(_, s)| s.iter())
            .filter(|s| fully_stamped(s))
            .filter_map(|s| last_stamp(s).map(|e| e - s.actual_request_ns)),
    );
    let drops = arms
        .iter()
        .any(|(a, _)| a.result.environment.harness.page_cache_dropped.is_some());
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut prev: Option<(&str, &Sample)> = None;
    let mut ended: Option<usize> = None;
    for (pos, (_, name)) in plan.order.iter().enumerate() {
        let Some(samples) = rows.get(name.as_str()) else {
            continue;
        };
        let i = seen.entry(name.as_str()).or_insert(0);
        let row = samples.get(*i);
        *i += 1;
        let Some(row) = row else {
            ended.get_or_insert(pos);
            continue;
        };
        let idx = *i - 1;
        if let Some(e) = ended {
            v.add(
                Check::ArmOrder,
                format!(
                    "launch {pos} (`{name}` row {idx}) has a row, launch {e} before it has none: \
                     an interrupted campaign stops, it does not skip"
                ),
            );
        }
        let t = row.actual_request_ns;
        if let Some((pn, p)) = prev {
            let end = last_stamp(p).unwrap_or(u64::MAX);
            if t <= p.actual_request_ns {
                v.add(
                    Check::ArmOrder,
                    format!(
                        "launch {pos}: `{name}` row {idx} was requested at {t} ns, not after \
                         `{pn}` row {} ({} ns), which the order puts before it",
                        p.index, p.actual_request_ns
                    ),
                );
            } else if t < end {
                v.add(
                    Check::ArmOrder,
                    format!(
                        "launch {pos}: `{name}` row {idx} was requested at {t} ns, before \
                         `{pn}` row {} ended ({end} ns): the campaign launches one at a time",
                        p.index
                    ),
                );
            } else if let Some(m) = threshold.filter(|_| fully_stamped(p) && !drops) {
                let gap = t - end;
                if gap >= m {
                    v.add(
                        Check::ArmOrder,
                        format!(
                            "{gap} ns pass between the end of `{pn}` row {} and the request of \
                             launch {pos} (`{name}` row {idx}), at least the shortest launch \
                             or 10 ms ({m} ns): the trace of a dropped launch",
                            p.index
                        ),
                    );
                }
            }
        }
        prev = Some((name.as_str(), row));
    }
    for (a, s) in arms {
        let planned = seen.get(a.arm.name.as_str()).copied().unwrap_or(0);
        if s.len() > planned {
            v.add(
                Check::ArmOrder,
                format!(
                    "arm `{}` has {} rows, the order launches it {planned} times",
                    a.arm.name,
                    s.len()
                ),
            );
        }
        if s.len() < planned && !a.result.contract.incomplete {
            v.add(
                Check::ArmOrder,
                format!(
                    "arm `{}` has {} rows, the order launches it {planned} times and the arm \
                     is not marked incomplete",
                    a.arm.name,
                    s.len()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(order: &[(u64, &str)]) -> ArmsPlan {
        ArmsPlan {
            seed: 7,
            rounds: 2,
            arms: vec![
                ArmRef::engine(Engine::Truecold),
                ArmRef::engine(Engine::Firecracker),
            ],
            order: order.iter().map(|(r, n)| (*r, n.to_string())).collect(),
        }
    }

    #[test]
    fn plans_round_trip_and_bad_plans_say_why() {
        let p = plan(&[
            (0, "firecracker"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        assert!(plan_problems(&p).is_empty());
        assert_eq!(parse_arms(&arms_bytes(&p)).unwrap(), p);
        let twice = plan(&[
            (0, "truecold"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        assert!(plan_problems(&twice).iter().any(|m| m.contains("twice")));
        let short = plan(&[(0, "truecold"), (0, "firecracker")]);
        assert!(plan_problems(&short).iter().any(|m| m.contains("launches")));
        let mut misnamed = p.clone();
        misnamed.arms[1].name = "fc".into();
        assert!(plan_problems(&misnamed)
            .iter()
            .any(|m| m.contains("named by its engine")));
    }

    fn tune_plan(arms: Vec<ArmRef>) -> ArmsPlan {
        let order = arms.iter().map(|a| (0, a.name.clone())).collect();
        ArmsPlan {
            seed: 1,
            rounds: 1,
            arms,
            order,
        }
    }

    #[test]
    fn an_engines_plan_is_written_as_before() {
        let p = plan(&[
            (0, "firecracker"),
            (0, "truecold"),
            (1, "truecold"),
            (1, "firecracker"),
        ]);
        let text = String::from_utf8(arms_bytes(&p)).unwrap();
        assert!(!text.contains("knobs"), "{text}");
        assert!(!is_tune_phase(&p));
        // An engine arm with knobs makes it a tune phase, judged by the tune rules.
        let mut k = p.clone();
        k.arms[0].knobs = vec![Knob::Console];
        assert!(is_tune_phase(&k));
        assert!(plan_problems(&k)
            .iter()
            .any(|m| m.contains("runs truecold")));
    }

    #[test]
    fn tune_phase_plans() {
        let screen = tune_plan(vec![
            ArmRef::tune(BASELINE_ARM, vec![]),
            ArmRef::tune("console", vec![Knob::Console]),
            ArmRef::tune("backing-thp", vec![Knob::BackingThp]),
            ArmRef::tune("backing-hugetlb", vec![Knob::BackingHugetlb]),
        ]);
        assert!(is_tune_phase(&screen));
        assert_eq!(plan_problems(&screen), Vec::<String>::new());
        assert_eq!(parse_arms(&arms_bytes(&screen)).unwrap(), screen);
        let rec = vec![Knob::RcuExpedited, Knob::NoPrintk, Knob::Console];
        let confirm = tune_plan(vec![
            ArmRef::tune(BASELINE_ARM, vec![]),
            ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
            ArmRef::tune(
                "recommended-minus-no-printk",
                vec![Knob::RcuExpedited, Knob::Console],
            ),
            ArmRef::tune(
                "recommended-minus-rcu-expedited",
                vec![Knob::NoPrintk, Knob::Console],
            ),
        ]);
        assert_eq!(plan_problems(&confirm), Vec::<String>::new());
        let bad = |arms: Vec<ArmRef>, what: &str| {
            let p = plan_problems(&tune_plan(arms.clone()));
            assert!(p.iter().any(|m| m.contains(what)), "{what}: {p:?} {arms:?}");
        };
        let base = ArmRef::tune(BASELINE_ARM, vec![]);
        bad(
            vec![base.clone(), ArmRef::tune("console", vec![Knob::NoSmp])],
            "its name says [console]",
        );
        bad(
            vec![ArmRef::tune(BASELINE_ARM, vec![Knob::NoSmp])],
            "its name says []",
        );
        bad(
            vec![base.clone(), ArmRef::tune("fast", vec![Knob::NoSmp])],
            "not a tune arm's name",
        );
        bad(
            vec![ArmRef::tune("console", vec![Knob::Console])],
            "no `baseline` arm",
        );
        bad(vec![base.clone(), base.clone()], "appears twice");
        bad(
            vec![
                base.clone(),
                ArmRef {
                    engine: Engine::Firecracker,
                    ..ArmRef::tune("console", vec![Knob::Console])
                },
            ],
            "runs truecold",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, vec![Knob::Hz100, Knob::Hz1000]),
            ],
            "change the same thing",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, vec![Knob::Console, Knob::NoPrintk]),
            ],
            "catalogue order",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
                ArmRef::tune("recommended-minus-no-smp", vec![]),
            ],
            "not a tune arm's name",
        );
        bad(
            vec![
                base.clone(),
                ArmRef::tune(RECOMMENDED_ARM, rec.clone()),
                ArmRef::tune("recommended-minus-console", vec![Knob::RcuExpedited]),
            ],
            "its name says [rcu-expedited, no-printk]",
        );
        bad(
            vec![base, ArmRef::tune(RECOMMENDED_ARM, vec![])],
            "has no knobs",
        );
        // Unknown knobs do not parse.
        let text = String::from_utf8(arms_bytes(&screen))
            .unwrap()
            .replace("\"console\"\n", "\"turbo\"\n");
        assert!(parse_arms(text.as_bytes()).unwrap_err().contains("turbo"));
    }

    #[test]
    fn ratios_are_integer_ppm_and_the_bootstrap_is_deterministic() {
        assert_eq!(ratio_ppm(3, 1), Some(333_333));
        assert_eq!(ratio_ppm(2, 4), Some(2_000_000));
        assert_eq!(ratio_ppm(0, 4), None);
        let a: Vec<u64> = (1..=50).map(|x| x * 1000).collect();
        let b: Vec<u64> = a.iter().map(|x| x * 2).collect();
        let one = bootstrap_ratio_ci(&a, &b, 500, 3);
        assert_eq!(one, bootstrap_ratio_ci(&a, &b, 500, 3));
        let [lo, hi] = one.0.unwrap();
        assert!(lo <= 2_000_000 && 2_000_000 <= hi, "{lo} {hi}");
        // Identical arms scaled by exactly 2: every resampled p99 ratio is near 2.
        assert!(one.1.unwrap()[0] > 1_000_000);
        assert_eq!(bootstrap_ratio_ci(&[], &b, 10, 1), (None, None));
    }

    #[test]
    fn sums_names_may_name_an_arm_file() {
        assert!(is_valid_arms_path("truecold/samples.csv"));
        assert!(is_valid_arms_path("comparison.json"));
        assert!(!is_valid_arms_path("a/b/c"));
        assert!(!is_valid_arms_path("../x"));
        assert!(!is_valid_arms_path("/x"));
    }
}
