//! The whole tune ([`tune`]): the host, the knobs and their kernels, the screen phase, the
//! winners, the confirm phase, and the tune directory written and renamed into place.

use super::knob_kernels::{ensure_kernel_got, screen_knobs, OwnBase};
use super::nested_phase::nested_phase;
use super::phase::{run_phase, PhaseEnv};
use super::phase_error::PhaseError;
use super::phase_plan::{
    kconfig_knobs, variant_name, PhaseArm, PhasePlan, BASELINE, CONFIRM, PILOT, SCREEN,
};
use super::tune_error::TuneError;
use crate::artifacts::guest_files::{self, LinuxGuest};
use crate::attribution::instrumentation::Instrument;
use crate::campaign::bundle_out;
use crate::campaign::clock;
use crate::checks::environment;
use crate::checks::preflight;
use crate::checks::preflight::HostLimits;
use crate::checks::preflight::{kvm_host, PVM_EXPLANATION};
use crate::plan::arg_error::ArgError;
use crate::plan::guest::Target;
use crate::plan::tune_plan::KnobChoice;
use crate::plan::tune_plan::{phase_rounds, ProposeFrom, ProposePlan, Sizing, TunePlan};
use crate::terminal::output;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use truecold_proof::bundle::{rename_noreplace, Written};
use truecold_proof::kconfig::USER_KERNEL_FILE;
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::HostKind;
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{Knob, TuneGuest};

/// The arm with every winner.
pub const RECOMMENDED: &str = "recommended";

/// `--propose`'s attribution campaigns: measured launches (the reconciliation's p50) and
/// attribution launches of each instrument.
pub const PROPOSE_LAUNCHES: u64 = 5;
pub const PROPOSE_ATTRIBUTION: u64 = 3;

/// The kernel source tree proposals map functions to Kconfig symbols with: `--propose-source`,
/// else `--kernel-source`, else the pinned package source in the kernel cache
/// (`<cache>/src/*/linux-source-*`) when there is exactly one; `None`: no tree.
pub fn proposal_tree(tp: &TunePlan, pp: &ProposePlan) -> Option<PathBuf> {
    if let Some(s) = pp.source.clone() {
        return Some(s);
    }
    if let Some(s) = tp.own_kernel.as_ref().and_then(|k| k.source.clone()) {
        return Some(s);
    }
    let src = crate::artifacts::kernel_build::cache_root().join("src");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&src)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|v| std::fs::read_dir(v.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("linux-source-"))
        })
        .collect();
    found.sort();
    (found.len() == 1).then(|| found.remove(0))
}

/// The proposals of the attribution bundles `bundles`, merged: costliest row first, each
/// knob once (from its costliest row), those of `classes` only (empty: all), at most
/// [`super::propose::MAX_PROPOSALS`]; the notes of each.
pub fn proposals_of(
    bundles: &[PathBuf],
    tree: Option<&Path>,
    classes: &[truecold_proto::tune::KnobClass],
) -> Result<super::propose::Proposals, TuneError> {
    use super::propose::{propose, Attributed, Proposals, MAX_PROPOSALS};
    let mut all = Proposals::default();
    for b in bundles {
        let p = propose(&Attributed::read(b)?, tree)?;
        all.total_ns = all.total_ns.max(p.total_ns);
        all.proposals.extend(p.proposals);
        for n in p.notes {
            if !all.notes.contains(&n) {
                all.notes.push(n);
            }
        }
    }
    all.proposals
        .sort_by_key(|p| std::cmp::Reverse(p.source.ns));
    let mut seen = std::collections::BTreeSet::new();
    all.proposals.retain(|p| seen.insert(p.knob));
    if !classes.is_empty() {
        let before = all.proposals.len();
        all.proposals.retain(|p| classes.contains(&p.knob.class()));
        let left = before - all.proposals.len();
        if left > 0 {
            all.notes.push(format!(
                "{left} proposal(s) of another class than --propose-class {} left out",
                classes
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    all.proposals.truncate(MAX_PROPOSALS);
    Ok(all)
}

/// A kernel build's error as a proposal's record says it: the chain's first line, at most 400
/// characters (a failed build's error carries its log's tail).
fn unbuilt_reason(e: &TuneError) -> String {
    let chain = truecold_proto::measure::error_chain(e);
    let line = chain.lines().next().unwrap_or("").trim();
    line.chars().take(400).collect()
}

/// `--propose`'s attribution campaigns of the baseline (`initcall`, then `rip`), each a
/// bundle beside `dest` (`<dest>-attribution-<instrument>`) that must verify.
fn attribute_first(
    tp: &TunePlan,
    guest_dir: &Path,
    dest: &Path,
    invocation: &str,
) -> Result<Vec<PathBuf>, TuneError> {
    use crate::attribution::instrumentation::Instrumentation;
    use crate::plan::campaign_plan::CampaignPlan;
    use crate::plan::guest::GuestSpec;
    let mut out = Vec::new();
    for instrument in [Instrument::Initcall, Instrument::Rip] {
        let bundle = PathBuf::from(format!("{}-attribution-{instrument}", dest.display()));
        let mut spec = GuestSpec::plain(tp.vcpus, tp.mem, tp.backing);
        spec.ram_layout = truecold_proto::tune::TUNE_BASELINE_LAYOUT;
        let mut plan = CampaignPlan::sequential(
            Target::linux(tp.nested()),
            spec,
            PROPOSE_LAUNCHES,
            tp.deadline_ms,
            tp.kill_grace_ms,
        )?
        .at(
            tp.paths.vmm.clone(),
            Some(guest_dir.to_path_buf()),
            Some(bundle.clone()),
        )
        .seeded(tp.seed)
        .attributed(PROPOSE_ATTRIBUTION);
        plan.instrument = Instrumentation {
            instrument,
            period: tp.instrument.period,
        };
        crate::note!(
            "truecold: tune: --propose: attributing the baseline ({instrument}) into {}",
            bundle.display()
        );
        let o = crate::run::dispatch::run(&plan, invocation)
            .map_err(|e| TuneError::Run(Box::new(e)))?;
        let w = o.written;
        if !w.verdict.is_valid() {
            return Err(TuneError::AttributionInvalid {
                why: w.verdict.render(&w.path, 3).trim().replace('\n', "; "),
                path: w.path,
            });
        }
        out.push(w.path);
    }
    Ok(out)
}

/// The noise of a verified bundle: its successful headlines' coefficient of variation.
pub fn noise_of(bundle: &Path) -> Result<truecold_proof::tune::Noise, TuneError> {
    let v = truecold_proof::verify::verify_dir(bundle);
    let why = |w: String| TuneError::NoiseBundle {
        path: bundle.to_path_buf(),
        why: w,
    };
    if !v.is_valid() {
        return Err(why(v.render(bundle, 3)));
    }
    let (_, rows) = truecold_proof::read_bundle(bundle).map_err(|e| why(e.to_string()))?;
    let ok = truecold_proof::summary::success_latencies(&rows);
    let cv = truecold_proof::tune::cv_ppm(&ok).ok_or_else(|| {
        why(format!(
            "{} successful row(s): no variation to measure",
            ok.len()
        ))
    })?;
    Ok(truecold_proof::tune::Noise {
        pilot_rounds: None,
        cv_ppm: cv,
        source: format!(
            "{} ({} successful rows)",
            bundle
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| bundle.display().to_string()),
            ok.len()
        ),
    })
}

/// The catalogue as `--list-knobs` prints it.
pub fn catalogue_text() -> String {
    let mut s = String::from("knob\tclass\twhat it changes\tsource of the expected effect\n");
    for k in Knob::ALL {
        s.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            k.as_str(),
            k.class().as_str(),
            k.what(),
            k.source()
        ));
    }
    s
}

/// A finished tune.
#[derive(Debug)]
pub struct TuneOutcome {
    pub written: Written,
    pub warnings: Vec<String>,
}

/// Where a phase runs: here on /dev/kvm, or in one L1 boot of the nested harness.
enum Runner<'a> {
    Native(PhaseEnv<'a>),
    Nested {
        vmm: Option<PathBuf>,
        base_guest_dir: PathBuf,
    },
}

impl Runner<'_> {
    fn run(&self, plan: &PhasePlan, dest: &Path) -> Result<Written, TuneError> {
        match self {
            Runner::Native(env) => {
                let (w, interrupted) = run_phase(plan, env, dest)?;
                if interrupted {
                    return Err(PhaseError::Interrupted(phase_name(&plan.phase)).into());
                }
                Ok(w)
            }
            Runner::Nested {
                vmm,
                base_guest_dir,
            } => Ok(nested_phase(plan, vmm.as_deref(), base_guest_dir, dest)?),
        }
    }
}

fn phase_name(p: &str) -> &'static str {
    match p {
        SCREEN => SCREEN,
        PILOT => PILOT,
        _ => CONFIRM,
    }
}

/// `results/<UTC>-tune-<probe|linux|nested>-<v>vcpu-<m>mib`.
pub fn default_dest(plan: &TunePlan, contract: ContractKind) -> PathBuf {
    let (stamp, _) = clock::utc_now();
    let what = match (contract, plan.nested()) {
        (ContractKind::Probe, _) => "probe",
        (ContractKind::Linux, true) => "nested-linux",
        (ContractKind::Linux, false) => "linux",
    };
    PathBuf::from("results").join(format!(
        "{stamp}-tune-{what}-{}vcpu-{}mib",
        plan.vcpus,
        plan.mem.mib()
    ))
}

/// The host a tune runs on: its kind, whether the VMM is forced (Linux on kvm_pvm) and the
/// contract (a nested tune needs no KVM here: L1 brings its own).
fn tune_host(
    plan: &TunePlan,
    warnings: &mut Vec<String>,
) -> Result<(HostKind, bool, ContractKind), TuneError> {
    if plan.nested() {
        return Ok((HostKind::NestedEmulated, false, ContractKind::Linux));
    }
    let (kind, w) = kvm_host()?;
    warnings.extend(w);
    let (probe, linux) = (plan.target == Target::Probe, plan.target == Target::Linux);
    Ok(match (probe, linux, kind) {
        (true, _, _) => (kind, false, ContractKind::Probe),
        (false, true, HostKind::Pvm) => {
            let w = "--linux on a kvm_pvm host: an unmodified Linux kernel is not expected \
                     to boot here; every failure is kept as data"
                .to_string();
            output::note_once(&w, &format!("truecold: warning: {w}"));
            warnings.push(w);
            (kind, true, ContractKind::Linux)
        }
        (false, false, HostKind::Pvm) => {
            output::note_once(PVM_EXPLANATION, &format!("truecold: {PVM_EXPLANATION}"));
            warnings.push(PVM_EXPLANATION.to_string());
            (kind, false, ContractKind::Probe)
        }
        (false, _, _) => (kind, false, ContractKind::Linux),
    })
}

/// The rounds of both phases and the noise they were sized from (`--noise-from`).
fn rounds_of(
    plan: &TunePlan,
    k: usize,
    noise: Option<&truecold_proof::tune::Noise>,
    launched: u64,
) -> Result<(u64, u64), TuneError> {
    let rounds = match (plan.rounds, noise) {
        (Some(n), _) => n,
        (None, Some(n)) => {
            use truecold_proof::tune::{rounds_for_rule, RuleVersion, MIN_EFFECT_PPM};
            rounds_for_rule(RuleVersion::CURRENT, n.cv_ppm, MIN_EFFECT_PPM, k as u64)
        }
        (None, None) => return Err(TuneError::Sizing),
    };
    if let Some(n) = noise {
        crate::note!(
            "truecold: tune: noise {} ppm CV from {} → {rounds} round(s) per arm",
            n.cv_ppm,
            n.source
        );
    }
    let (screen, confirm) = phase_rounds(
        k as u64,
        rounds,
        plan.confirm_rounds.unwrap_or(rounds),
        plan.budget.map(|b| b.saturating_sub(launched)),
    )?;
    Ok((screen, confirm))
}

/// The pilot's first look on stderr: each knob's p50 against the baseline's, not a verdict (the
/// screen gives those).
fn announce_pilot(dir: &Path, figure: truecold_proof::schema::Figure) {
    let p50s = truecold_proof::tune::pilot_p50s(dir, figure);
    let base = p50s
        .iter()
        .find(|(n, _)| n == BASELINE)
        .and_then(|(_, p)| *p);
    for (name, p50) in p50s.iter().filter(|(n, _)| n != BASELINE) {
        let line = match (p50, base) {
            (Some(a), Some(b)) if b > 0 => {
                let d = *a as i128 - b as i128;
                format!(
                    "{name}: p50 {} ms, {:+.1} % against the baseline's {} ms",
                    truecold_proof::fmt::ms(*a),
                    d as f64 * 100.0 / b as f64,
                    truecold_proof::fmt::ms(b)
                )
            }
            _ => format!("{name}: no p50 (no successful launch)"),
        };
        crate::note!("truecold: tune: pilot (a first look, not a verdict): {line}");
    }
}

/// The warning for a screen whose rounds are too few for any knob to be named a winner under
/// the current verdict rule (Holm over `k` knobs), with the least rounds that can.
pub(super) fn unreachable_winner(rounds: u64, k: u64) -> Option<String> {
    use truecold_proof::tune::{can_name_a_winner, least_rounds_for_a_winner};
    if k == 0 || can_name_a_winner(rounds, k) {
        return None;
    }
    let need = least_rounds_for_a_winner(rounds, k)
        .map(|n| format!("-n {n} or more"))
        .unwrap_or_else(|| "fewer knobs".to_string());
    Some(format!(
        "with {rounds} rounds an arm and {k} knobs no knob can be named a winner (the smallest \
         possible Mann–Whitney p, Holm-adjusted over {k}, is not below 0.05): use {need}"
    ))
}

/// Every arm's guest directory: the base one, or the kernel its Kconfig knobs build (each
/// variant built once).
struct Arms<'a> {
    base: Option<&'a LinuxGuest>,
    /// The user's kernel every Kconfig knob goes over (`None`: truecold's base).
    own: Option<&'a OwnBase>,
    kernel_root: PathBuf,
    script: PathBuf,
    kernels: BTreeMap<String, PathBuf>,
    /// Each Kconfig arm's kernel as it was got, in order (tune.json's `kernel_builds`).
    builds: Vec<truecold_proof::tune::KernelBuild>,
}

impl Arms<'_> {
    fn arm(&mut self, name: String, set: Vec<Knob>) -> Result<PhaseArm, TuneError> {
        let kc = kconfig_knobs(&set);
        let guest_dir = match (self.base, kc.is_empty()) {
            (Some(b), false) => {
                let key = variant_name(&kc);
                match self.kernels.get(&key) {
                    Some(d) => Some(d.clone()),
                    None => {
                        let t0 = std::time::Instant::now();
                        let got = match self.own {
                            Some(o) => o.arm_kernel(&kc, b, &self.kernel_root, &self.script)?,
                            None => ensure_kernel_got(&kc, b, &self.kernel_root, &self.script)?,
                        };
                        self.builds.push(truecold_proof::tune::KernelBuild {
                            knobs: key.clone(),
                            wall_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
                            cached: got.cached,
                        });
                        self.kernels.insert(key, got.dir.clone());
                        Some(got.dir)
                    }
                }
            }
            _ => None,
        };
        Ok(PhaseArm {
            name,
            knobs: set,
            guest_dir,
        })
    }
}

/// The confirm phase's arms: `baseline`, `recommended` (every winner) and, with two winners
/// or more, `recommended-minus-<knob>` (leave one out).
fn confirm_arms(arms: &mut Arms<'_>, winners: &[Knob]) -> Result<Vec<PhaseArm>, TuneError> {
    let mut v = vec![
        arms.arm(BASELINE.to_string(), Vec::new())?,
        arms.arm(RECOMMENDED.to_string(), winners.to_vec())?,
    ];
    if winners.len() >= 2 {
        for w in winners {
            let rest: Vec<Knob> = winners.iter().copied().filter(|k| k != w).collect();
            v.push(arms.arm(format!("{RECOMMENDED}-minus-{w}"), rest)?);
        }
    }
    Ok(v)
}

/// The winners of a screen phase written at `screen`, which must verify: by the same
/// function the verifier runs (`truecold_proof::tune::screen_of_dir`).
fn winners_of(
    screen: &Written,
    seed: u64,
    knobs: &[Knob],
    figure: truecold_proof::schema::Figure,
) -> Result<Vec<Knob>, TuneError> {
    if !screen.verdict.is_valid() {
        return Err(TuneError::PhaseInvalid {
            path: screen.path.clone(),
            reasons: screen
                .verdict
                .reasons
                .iter()
                .map(|r| r.detail.clone())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let winners = truecold_proof::tune::screen_of_dir(&screen.path, seed, knobs, figure)
        .map_err(TuneError::Tune)?
        .recommended;
    crate::note!(
        "truecold: tune: winners of the screen phase: {}",
        if winners.is_empty() {
            "none".to_string()
        } else {
            variant_name(&winners)
        }
    );
    Ok(winners)
}

/// `tune.json`'s record of how this tune was started: the argv as typed, and the options as
/// resolved (the guest found) that `recommended/reproduce.sh` repeats.
pub(super) fn invocation_record(
    tp: &TunePlan,
    contract: ContractKind,
    own: Option<&OwnBase>,
    already_set: Vec<Knob>,
) -> truecold_proof::tune::Invocation {
    use truecold_proof::tune::{Invocation, RunGuest, TuneOptions};
    Invocation {
        argv: std::env::args().collect(),
        options: TuneOptions {
            guest: match (contract, tp.nested()) {
                (ContractKind::Probe, _) => RunGuest::Probe,
                (ContractKind::Linux, true) => RunGuest::Nested,
                (ContractKind::Linux, false) => RunGuest::Linux,
            },
            vcpus: u32::from(tp.vcpus.get()),
            mem_mib: tp.mem.mib(),
            backing: tp.backing,
            deadline_ms: tp.deadline_ms,
            kill_grace_ms: tp.kill_grace_ms,
            attribution: tp.attribution,
            noise_from: tp.noise_from.as_ref().map(|p| p.display().to_string()),
            kernel: own.map(|o| o.record.clone()),
            already_set,
            ram_layout: Some(truecold_proto::tune::TUNE_BASELINE_LAYOUT),
            // Named whenever attribution launches are made (absent reads as
            // `Instrument::ABSENT`), the period with `rip`.
            attribution_instrument: (tp.attribution > 0).then_some(tp.instrument.instrument),
            attribution_sample_us: (tp.attribution > 0
                && tp.instrument.instrument == Instrument::Rip)
                .then_some(tp.instrument.period),
        },
    }
}

/// Runs the whole tune `plan` describes (see the module doc) and writes its directory.
pub fn tune(tp: &TunePlan, invocation: &str) -> Result<TuneOutcome, TuneError> {
    let mut warnings: Vec<String> = Vec::new();
    let (host, force, contract) = tune_host(tp, &mut warnings)?;
    if !tp.nested() {
        // The baseline's guest against this host, before any kernel is built or launched.
        preflight::preflight(HostLimits::read(), tp.mem, &[tp.backing])?;
    }
    let guest = match contract {
        ContractKind::Probe => TuneGuest::Probe,
        ContractKind::Linux => TuneGuest::Linux,
    };
    let knobs = tp.knobs.for_guest(guest)?;
    let dest = tp.out.clone().unwrap_or_else(|| default_dest(tp, contract));
    if dest.symlink_metadata().is_ok() {
        return Err(TuneError::OutExists(dest));
    }
    let base = match contract {
        ContractKind::Linux => Some(guest_files::linux_guest(&tp.paths.guest_dir)?),
        ContractKind::Probe => None,
    };
    // The user's kernel, checked and built before any launch: the baseline's guest.
    let own = match (&tp.own_kernel, &base) {
        (Some(k), Some(b)) => Some(OwnBase::build(
            k,
            u32::from(tp.vcpus.get()),
            b,
            &tp.paths.kernel_root,
            &tp.paths.script,
        )?),
        (Some(_), None) => {
            return Err(ArgError::OwnKernel(
                "the probe guest has no kernel: tune Linux (--linux, --nested)",
            )
            .into())
        }
        (None, _) => None,
    };
    let base_guest_dir = match &own {
        Some(o) => o.dir.clone(),
        None => tp.paths.guest_dir.clone(),
    };
    // The proposals, from the attribution bundle given or from attribution campaigns of the
    // baseline run now: screened with the other knobs.
    let mut proposals = Vec::new();
    let mut knobs = knobs;
    if let Some(pp) = &tp.propose {
        let bundles = match &pp.from {
            ProposeFrom::Bundle(b) => vec![b.clone()],
            ProposeFrom::Attribute => attribute_first(tp, &base_guest_dir, &dest, invocation)?,
        };
        let tree = proposal_tree(tp, pp);
        let p = proposals_of(&bundles, tree.as_deref(), &pp.classes)?;
        crate::note!(
            "truecold: tune: {}",
            super::propose::proposals_text(&p).trim_end()
        );
        for q in &p.proposals {
            if !knobs.contains(&q.knob) {
                knobs.push(q.knob);
            }
        }
        knobs.sort();
        proposals = p.proposals;
    }
    let listed = matches!(tp.knobs, KnobChoice::Listed(_));
    let (knobs, already_set) = screen_knobs(knobs, own.as_ref(), listed)?;
    // A proposal left out (the user's kernel already sets it) is not recorded.
    proposals.retain(|p: &truecold_proof::tune::Proposal| knobs.contains(&p.knob));
    // The noise that sizes the screen, when known before any launch (a pilot measures it
    // later); `-n` given, the screen's rounds are known now and checked against the budget.
    let mut noise = match (&tp.sizing, &tp.noise_from) {
        (Sizing::NoiseFrom, Some(b)) => Some(noise_of(b)?),
        _ => None,
    };
    if !matches!(tp.sizing, Sizing::Pilot(_)) {
        rounds_of(tp, knobs.len(), noise.as_ref(), 0)?;
    }
    let deadline_ms = tp.deadline_ms;
    let vmm = match tp.nested() {
        true => tp.paths.vmm.clone().unwrap_or_default(),
        false => guest_files::find_vmm(tp.paths.vmm.as_deref())?,
    };
    let facts = environment::read_facts(host);
    let runner = if tp.nested() {
        Runner::Nested {
            vmm: tp.paths.vmm.clone(),
            base_guest_dir: base_guest_dir.clone(),
        }
    } else {
        Runner::Native(PhaseEnv {
            vmm,
            guest_dir: base_guest_dir.clone(),
            host,
            facts: &facts,
            warnings: warnings.clone(),
            invocation,
            force,
        })
    };
    let mut arms = Arms {
        base: base.as_ref(),
        own: own.as_ref(),
        kernel_root: tp.paths.kernel_root.clone(),
        script: tp.paths.script.clone(),
        kernels: BTreeMap::new(),
        builds: Vec::new(),
    };
    let plan_of = |phase: &str, rounds: u64, arms: Vec<PhaseArm>, attribute: &[&str]| PhasePlan {
        attribution: tp.attribution,
        instrument: tp.instrument,
        attribute: attribute.iter().map(|a| a.to_string()).collect(),
        phase: phase.to_string(),
        contract,
        seed: tp.seed,
        rounds,
        vcpus: tp.vcpus,
        mem: tp.mem,
        backing: tp.backing,
        deadline_ms,
        kill_grace_ms: tp.kill_grace_ms,
        arms,
    };
    // The command-line and VMM knobs' arms first: they need no kernel of their own.
    let is_kconfig = |k: &Knob| matches!(k.change(), truecold_proto::tune::Change::Kconfig(_));
    let baseline = arms.arm(BASELINE.to_string(), Vec::new())?;
    let mut quick = BTreeMap::new();
    for k in knobs.iter().filter(|k| !is_kconfig(k)) {
        quick.insert(*k, arms.arm(k.as_str().to_string(), vec![*k])?);
    }
    let tmp = bundle_out::staging_dir(&dest, "tune")?;
    // The pilot: the baseline and those knobs, interleaved as the screen runs its arms, for a
    // few rounds, before any Kconfig arm's kernel is built (a first look at them in minutes);
    // their noise sizes the screen.
    let mut launched = 0;
    if let Sizing::Pilot(p) = tp.sizing {
        let pilot_arms: Vec<PhaseArm> = std::iter::once(baseline.clone())
            .chain(quick.values().cloned())
            .collect();
        launched = p.saturating_mul(pilot_arms.len() as u64);
        if let Some(b) = tp.budget.filter(|b| *b < launched) {
            return Err(TuneError::PilotOverBudget {
                budget: b,
                launches: launched,
            });
        }
        let pilot = plan_of(PILOT, p, pilot_arms, &[]);
        runner.run(&pilot, &tmp.join(PILOT))?;
        noise = Some(
            truecold_proof::tune::noise_of_pilot(&tmp.join(PILOT), p, tp.figure)
                .map_err(TuneError::Tune)?,
        );
        announce_pilot(&tmp.join(PILOT), tp.figure);
    }
    // Then every Kconfig arm's kernel (built over the baseline's objects), and the screen's
    // arms in the plan's knob order.
    // A proposal is a guess: one whose kernel cannot be got (its fragment did not take, its
    // build failed) is left out of the screen and recorded so, where a catalogue knob's
    // failure ends the tune.
    let mut screen_arms = vec![baseline];
    let mut unbuilt = Vec::new();
    let mut screened = Vec::new();
    for k in &knobs {
        let arm = match quick.remove(k) {
            Some(a) => Ok(a),
            None => arms.arm(k.as_str().to_string(), vec![*k]),
        };
        match arm {
            Ok(a) => {
                screen_arms.push(a);
                screened.push(*k);
            }
            Err(e) if proposals.iter().any(|p| p.knob == *k) => {
                let why = unbuilt_reason(&e);
                let w = format!("proposal {k} is not screened: its kernel could not be got: {why}");
                output::note_once(&w, &format!("truecold: tune: warning: {w}"));
                warnings.push(w);
                if let Some(i) = proposals.iter().position(|p| p.knob == *k) {
                    unbuilt.push(truecold_proof::tune::Unbuilt {
                        proposal: proposals.remove(i),
                        why,
                    });
                }
            }
            Err(e) => return Err(e),
        }
    }
    let knobs = screened;
    // The screen cannot know whether a knob will win, so it always attributes its baseline
    // (the README shows it when no confirm phase runs); the confirm phase attributes its own
    // baseline and the recommended arm.
    let (rounds_screen, rounds_confirm) = rounds_of(tp, knobs.len(), noise.as_ref(), launched)?;
    if let Some(w) = unreachable_winner(rounds_screen, knobs.len() as u64) {
        output::note_once(&w, &format!("truecold: tune: warning: {w}"));
        warnings.push(w);
    }
    let screen = plan_of(SCREEN, rounds_screen, screen_arms, &[BASELINE]);
    let winners = winners_of(
        &runner.run(&screen, &tmp.join(SCREEN))?,
        tp.seed,
        &knobs,
        tp.figure,
    )?;
    if !winners.is_empty() {
        let confirm = plan_of(
            CONFIRM,
            rounds_confirm,
            confirm_arms(&mut arms, &winners)?,
            &[BASELINE, RECOMMENDED],
        );
        runner.run(&confirm, &tmp.join(CONFIRM))?;
    }
    let plan = truecold_proof::tune::TunePlan {
        seed: tp.seed,
        guest,
        knobs: knobs.clone(),
        vcpus: u32::from(tp.vcpus.get()),
        mem_bytes: tp.mem.bytes(),
        backing: tp.backing,
        rounds_screen,
        rounds_confirm,
        budget: tp.budget,
        noise,
        rule: truecold_proof::tune::RuleVersion::CURRENT,
        invocation: Some(invocation_record(tp, contract, own.as_ref(), already_set)),
        figure: tp.figure,
        kernel_builds: arms.builds.clone(),
        proposals,
        unbuilt,
    };
    if let Some(o) = &own {
        // The user's file as given, beside tune.json (its record's digest; reproduce.sh reads it).
        let f = tmp.join(USER_KERNEL_FILE);
        std::fs::write(&f, &o.bytes).map_err(PathIoError::at("write", &f))?;
    }
    let verdict = truecold_proof::tune::write_tune(&tmp, &plan).map_err(TuneError::Tune)?;
    rename_noreplace(&tmp, &dest).map_err(|source| TuneError::Place {
        path: dest.clone(),
        source,
    })?;
    Ok(TuneOutcome {
        written: Written {
            path: dest,
            verdict,
        },
        warnings,
    })
}
