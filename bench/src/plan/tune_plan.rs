//! `truecold tune` and `truecold tune-phase`, checked once: [`TunePlan::from_cli`] and
//! [`TunePhaseRun::from_cli`].

use super::arg_error::ArgError;
use super::common_flags::{deadline_ms, instrumentation};
use super::guest::Target;
use super::kernel_plan::{kernel_config_of, KernelPlan};
use crate::artifacts::guest_files::guest_dir;
use crate::artifacts::own_kernel::OwnKernel;
use crate::attribution::instrumentation::Instrumentation;
use crate::cli::{TuneArgs, TunePhaseArgs};
use std::path::PathBuf;
use truecold_proof::tune::MIN_ROUNDS;
use truecold_proto::kinds::Backing;
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::tune::{self as knobs, Knob, TuneGuest};

/// The pilot's rounds when neither -n, --noise-from nor --pilot-rounds says (the tune's
/// minimum: each arm's CV is measured on this many rows, and the arms' CVs pooled).
pub const DEFAULT_PILOT_ROUNDS: u64 = MIN_ROUNDS;

/// The rounds of a tune's screen the plan fixes before anything runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizing {
    /// `-n`: as given.
    Given(u64),
    /// `--noise-from`: from a bundle's noise.
    NoiseFrom,
    /// From a pilot phase of this many rounds of the screen's arms.
    Pilot(u64),
}

/// The knobs a tune tries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobChoice {
    /// Every catalogue knob that applies to the guest.
    All,
    /// `--knobs`, parsed: each a catalogue knob, once, in catalogue order, not empty.
    Listed(Vec<Knob>),
}

impl KnobChoice {
    /// `--knobs` as given (`None`: every knob), checked against `guest` (for a guest not yet
    /// known, against Linux, to which every knob applies: [`KnobChoice::for_guest`] checks it
    /// again once the guest is known).
    pub fn parse(list: Option<&str>, guest: TuneGuest) -> Result<KnobChoice, ArgError> {
        let Some(l) = list else {
            return Ok(KnobChoice::All);
        };
        let v = knobs::parse_knobs(l, guest).map_err(ArgError::Knobs)?;
        if v.is_empty() {
            return Err(ArgError::NoKnobs);
        }
        Ok(KnobChoice::Listed(v))
    }

    /// The knobs to tune on `guest`: the listed ones (each must apply to it), or every
    /// catalogue knob that does.
    pub fn for_guest(&self, guest: TuneGuest) -> Result<Vec<Knob>, ArgError> {
        let v: Vec<Knob> = match self {
            KnobChoice::All => Knob::ALL
                .iter()
                .copied()
                .filter(|k| k.applies_to(guest))
                .collect(),
            KnobChoice::Listed(v) => {
                if let Some(k) = v.iter().find(|k| !k.applies_to(guest)) {
                    return Err(ArgError::Knobs(knobs::KnobSetError::NotForGuest(*k)));
                }
                v.clone()
            }
        };
        if v.is_empty() {
            return Err(ArgError::NoKnobs);
        }
        Ok(v)
    }
}

/// The rounds of each phase under `--budget`, for `k` knobs: the screen runs `1 + k` arms,
/// the confirm phase at most `2 + k` (baseline, recommended, one leave-one-out arm per
/// winner); both shrink alike to fit the worst case.
pub fn phase_rounds(
    k: u64,
    screen: u64,
    confirm: u64,
    budget: Option<u64>,
) -> Result<(u64, u64), ArgError> {
    for r in [screen, confirm] {
        if r < MIN_ROUNDS {
            return Err(ArgError::TooFewRounds(r));
        }
    }
    let Some(b) = budget else {
        return Ok((screen, confirm));
    };
    let arms = (1 + k) + (2 + k);
    let per = b / arms;
    if per < MIN_ROUNDS {
        return Err(ArgError::Budget {
            budget: b,
            rounds: per,
            arms,
            need: arms * MIN_ROUNDS,
        });
    }
    Ok((screen.min(per), confirm.min(per)))
}

/// Where a tune's proposals come from (`--propose`, `--propose-from`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProposeFrom {
    /// Attribution campaigns of the baseline, run first.
    Attribute,
    /// An attribution bundle.
    Bundle(PathBuf),
}

/// Proposals asked for: from where, the source tree for Kconfig symbols, and whether only to
/// print them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposePlan {
    pub from: ProposeFrom,
    /// `--propose-source` (`None`: `--kernel-source`, else the pinned source if found).
    pub source: Option<PathBuf>,
    pub dry_run: bool,
    /// `--propose-class` (empty: every class).
    pub classes: Vec<truecold_proto::tune::KnobClass>,
}

/// One tune, checked: what `truecold tune` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct TunePlan {
    /// The guest as asked (`Auto`: Linux where this host's /dev/kvm can boot it, else the
    /// probe).
    pub target: Target,
    pub knobs: KnobChoice,
    /// Screen rounds as given (`None`: sized from `noise_from` or a pilot).
    pub rounds: Option<u64>,
    /// How the screen is sized.
    pub sizing: Sizing,
    /// The bundle whose noise sizes the rounds.
    pub noise_from: Option<PathBuf>,
    /// Confirm rounds as given (`None`: the screen's).
    pub confirm_rounds: Option<u64>,
    /// At most this many launches in all.
    pub budget: Option<u64>,
    /// The seed of every phase's shuffled order.
    pub seed: u64,
    pub vcpus: Vcpus,
    pub mem: GuestMem,
    /// The baseline's memory backing.
    pub backing: Backing,
    /// The per-launch deadline in effect, ms.
    pub deadline_ms: u64,
    pub kill_grace_ms: u64,
    /// The tune directory (`None`: the default under `results/`).
    pub out: Option<PathBuf>,
    /// Attribution launches of the last phase's baseline and recommended arms.
    pub attribution: u64,
    /// How they measure the boot.
    pub instrument: Instrumentation,
    pub paths: KernelPlan,
    /// The user's kernel (`--kernel-config` / `--kernel-fragment`, `--kernel-source`): the
    /// baseline's, and the base of every Kconfig knob.
    pub own_kernel: Option<OwnKernel>,
    /// The headline figure the arms are judged on (`--clock`).
    pub figure: truecold_proof::schema::Figure,
    /// Knobs proposed from an attribution (`None`: the catalogue's or --knobs alone).
    pub propose: Option<ProposePlan>,
}

impl TunePlan {
    /// The plan `truecold tune`'s arguments describe, every check made that needs no host:
    /// the knobs (against the guest when it is asked for), the rounds, and the budget when
    /// the knobs and rounds are known.
    pub fn from_cli(a: &TuneArgs) -> Result<TunePlan, ArgError> {
        let target = match (a.probe, a.linux, a.nested) {
            (true, _, _) => Target::Probe,
            (_, true, _) => Target::Linux,
            (_, _, true) => Target::Nested,
            _ => Target::Auto,
        };
        let known = match target {
            Target::Probe => Some(TuneGuest::Probe),
            Target::Linux | Target::Nested => Some(TuneGuest::Linux),
            Target::Auto => None,
        };
        let choice = KnobChoice::parse(a.knobs.as_deref(), known.unwrap_or(TuneGuest::Linux))?;
        for r in [a.rounds, a.confirm_rounds, a.pilot_rounds]
            .into_iter()
            .flatten()
        {
            if r < MIN_ROUNDS {
                return Err(ArgError::TooFewRounds(r));
            }
        }
        let sizing = match (a.rounds, &a.noise_from) {
            (Some(n), _) => Sizing::Given(n),
            (None, Some(_)) => Sizing::NoiseFrom,
            (None, None) => Sizing::Pilot(a.pilot_rounds.unwrap_or(DEFAULT_PILOT_ROUNDS)),
        };
        // The budget against the worst case, when every number it needs is known here.
        let k = match (&choice, known) {
            (KnobChoice::Listed(v), _) => Some(v.len()),
            (KnobChoice::All, Some(g)) => Some(choice.for_guest(g)?.len()),
            (KnobChoice::All, None) => None,
        };
        if let (Some(k), Sizing::Given(rounds)) = (k, sizing) {
            phase_rounds(
                k as u64,
                rounds,
                a.confirm_rounds.unwrap_or(rounds),
                a.budget,
            )?;
        }
        let own_kernel = kernel_config_of(&a.own_kernel, a.kernel_source.as_deref())?;
        if own_kernel.is_some() && target == Target::Probe {
            return Err(ArgError::OwnKernel(
                "the probe guest has no kernel: tune Linux (--linux, --nested)",
            ));
        }
        let deadline_ms = deadline_ms(a.deadline_ms, a.nested);
        if deadline_ms == 0 {
            return Err(ArgError::DeadlineZero);
        }
        if !a.clock.is_total() && target != Target::Nested {
            return Err(ArgError::ParallelNeedsNested);
        }
        let from = match (a.propose, &a.propose_from) {
            (true, _) => Some(ProposeFrom::Attribute),
            (false, Some(b)) => Some(ProposeFrom::Bundle(b.clone())),
            (false, None) => None,
        };
        if from.is_some() && target == Target::Probe {
            return Err(ArgError::ProposeProbe);
        }
        let classes = a
            .propose_class
            .iter()
            .map(|c| {
                truecold_proto::tune::KnobClass::parse(c)
                    .filter(|_| from.is_some())
                    .ok_or_else(|| ArgError::ProposeClass(c.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let propose = from.map(|from| ProposePlan {
            from,
            source: a.propose_source.clone(),
            dry_run: a.dry_run,
            classes,
        });
        Ok(TunePlan {
            target,
            knobs: choice,
            rounds: a.rounds,
            sizing,
            noise_from: a.noise_from.clone(),
            confirm_rounds: a.confirm_rounds,
            budget: a.budget,
            seed: a.seed,
            vcpus: a.guest.vcpus,
            mem: a.guest.mem,
            backing: a.backing,
            deadline_ms,
            kill_grace_ms: a.kill_grace_ms,
            out: a.out.clone(),
            attribution: a.attribution,
            instrument: instrumentation(&a.instrument)?,
            paths: KernelPlan::from_cli(&a.paths, crate::cli::TUNE_KERNEL_DIR),
            own_kernel,
            figure: a.clock,
            propose,
        })
    }

    pub fn nested(&self) -> bool {
        self.target.is_nested()
    }

    /// The plan of `truecold tune <words>` (tests: the words as a user types them).
    #[cfg(test)]
    pub(crate) fn of_words(words: &[&str]) -> Result<TunePlan, ArgError> {
        use clap::Parser;
        let mut v = vec!["truecold", "tune"];
        v.extend_from_slice(words);
        match crate::cli::Cli::try_parse_from(v)
            .unwrap_or_else(|e| panic!("`truecold tune {}`: {e}", words.join(" ")))
            .cmd
        {
            crate::cli::Cmd::Tune(a) => TunePlan::from_cli(&a),
            other => panic!("not a tune: {other:?}"),
        }
    }
}

/// One phase of a tune in L1 (`truecold tune-phase`), its paths resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunePhaseRun {
    /// The phase plan file (JSON, written by `truecold tune`).
    pub plan_file: PathBuf,
    /// The phase directory to write.
    pub out: PathBuf,
    /// The truecold-vmm binary (`None`: next to this binary).
    pub vmm: Option<PathBuf>,
    /// The base guest directory in effect.
    pub guest_dir: PathBuf,
}

impl TunePhaseRun {
    pub fn from_cli(a: &TunePhaseArgs) -> TunePhaseRun {
        TunePhaseRun {
            plan_file: a.plan.clone(),
            out: a.out.clone(),
            vmm: a.vmm.clone(),
            guest_dir: guest_dir(a.guest_dir.as_deref()),
        }
    }
}
