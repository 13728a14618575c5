//! A multi-arm directory's model: its names, its plan (`arms.json`, [`ArmsPlan`]) and
//! the plan's rules, the `SHA256SUMS` path rule, and the errors of writing one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use truecold_proto::kinds::Backing;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{check_set, Knob, TuneGuest};

use crate::bundle::BundleError;
use crate::names::{CDF_FILE, README_FILE, STAGES_FILE, SUMS_FILE};
use crate::schema::Engine;
use crate::skeleton::DirError;
use crate::sums::{parse_sums_with, SumsError};

/// The comparison's file.
pub const COMPARISON_FILE: &str = "comparison.json";

/// The CDF plot of every arm.
pub const ARMS_CDF_FILE: &str = "cdf.svg";

/// Version of `arms.json` and `comparison.json`.
pub const ARMS_SCHEMA: u32 = 1;

/// Bootstrap resamples per pair.
pub const RESAMPLES: usize = 2000;

/// The files [`generated_files`] makes.
pub(super) const GENERATED: [&str; 3] = [COMPARISON_FILE, README_FILE, ARMS_CDF_FILE];

/// An arm bundle's files that `report` regenerates.
pub(super) const ARM_GENERATED: [&str; 4] = [README_FILE, CDF_FILE, STAGES_FILE, SUMS_FILE];

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
    /// An engines campaign whose arms' backings differ (each engine's own default, or
    /// `--arm-backing`) declares every arm's here, and each arm's bundle must have it; absent
    /// (every arm of the campaign alike, and tune arms, whose knobs say it): every arm has the
    /// first arm's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing: Option<Backing>,
    /// An engines-campaign arm that boots a kernel of its own (`--arm-kernel-config`,
    /// `--arm-guest-dir`) declares it: the sha256 of its kernel's config, which its bundle's
    /// `config` must have. Its vmlinux and config are then exempt from "every arm alike"
    /// (its initramfs and guest-init are not); absent: the campaign's kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

impl ArmRef {
    /// An engines campaign's arm: named by its engine, no knobs.
    pub fn engine(engine: Engine) -> Self {
        ArmRef {
            name: engine.as_str().to_string(),
            engine,
            knobs: Vec::new(),
            backing: None,
            kernel: None,
        }
    }

    /// The same arm booting its own kernel, whose config has digest `config_sha256`
    /// ([`ArmRef::kernel`]).
    pub fn with_kernel(mut self, config_sha256: String) -> Self {
        self.kernel = Some(config_sha256);
        self
    }

    /// The same arm with its backing declared ([`ArmRef::backing`]).
    pub fn with_backing(mut self, backing: Backing) -> Self {
        self.backing = Some(backing);
        self
    }

    /// A tune phase's arm: truecold with `knobs`, named `name`.
    pub fn tune(name: impl Into<String>, knobs: Vec<Knob>) -> Self {
        ArmRef {
            name: name.into(),
            engine: Engine::Truecold,
            knobs,
            backing: None,
            kernel: None,
        }
    }
}

use crate::names::ARMS_FILE;
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
pub(super) struct ArmsFile {
    pub(super) schema: u32,
    pub(super) seed: u64,
    pub(super) rounds: u64,
    pub(super) arms: Vec<ArmRef>,
    pub(super) order: Vec<(u64, String)>,
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
    let declared = plan.arms.iter().filter(|a| a.backing.is_some()).count();
    if declared > 0 && (declared < plan.arms.len() || is_tune_phase(plan) || is_kernel_ab(plan)) {
        bad.push(format!(
            "{declared} of {} arms declare a backing: an engines campaign declares every \
             arm's or none (a tune's knobs and a kernel A/B's one configuration say it)",
            plan.arms.len()
        ));
    }
    if plan.arms.iter().any(|a| a.kernel.is_some()) {
        if is_tune_phase(plan) || is_kernel_ab(plan) {
            bad.push(
                "an arm declares a kernel of its own: only an engines campaign's arms do (a \
                 tune's Kconfig knobs and a kernel A/B say theirs)"
                    .into(),
            );
        }
        if plan.arms.iter().all(|a| a.kernel.is_some()) {
            bad.push(
                "every arm declares a kernel of its own: at least one boots the campaign's".into(),
            );
        }
        for a in &plan.arms {
            if let Some(k) = &a.kernel {
                if k.len() != 64 || !k.bytes().all(|b| b.is_ascii_hexdigit()) {
                    bad.push(format!(
                        "arm `{}`: kernel `{k}` is not a sha256 (64 hex digits)",
                        a.name
                    ));
                }
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
pub(super) fn tune_plan_problems(plan: &ArmsPlan, bad: &mut Vec<String>) {
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

/// A `SHA256SUMS` name of a multi-arm directory: a top file, or `<arm>/<file>`.
pub fn is_valid_arms_path(name: &str) -> bool {
    crate::names::is_valid_path(name, 2)
}

/// Parses a multi-arm `SHA256SUMS`.
pub fn parse_arms_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_arms_path)
}
