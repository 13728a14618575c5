//! A phase's plan ([`PhasePlan`]): its arms (each a knob set and a guest directory), rounds,
//! seed, guest and deadline, checked as it is read (a plan file crosses into L1), and the
//! names a tune gives its phases, arms and kernel variants.

use super::phase_error::PhaseError;
use crate::attribution::instrumentation::Instrumentation;
use crate::plan::bisect_plan::MIN_N;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use truecold_proof::schema::ContractKind;
use truecold_proto::kinds::Backing;
use truecold_proto::limits::{GuestMem, Vcpus};
use truecold_proto::path_io::PathIoError;
use truecold_proto::tune::{self as knobs, Change, Knob, TuneGuest};

/// A tune's phase directories.
pub const SCREEN: &str = "screen";
pub const CONFIRM: &str = "confirm";
pub const PILOT: &str = "pilot";

/// What the L1 QEMU seed of a phase adds to the tune's: each phase's L1 run draws its own
/// random numbers (nonces, boot ids), and each is reproducible.
pub fn phase_seed_offset(phase: &str) -> u64 {
    match phase {
        SCREEN => 0,
        CONFIRM => 1,
        _ => 2,
    }
}
/// The baseline arm's name.
pub const BASELINE: &str = "baseline";
pub use truecold_proof::tune::MIN_ROUNDS;
/// The phase plan's name inside L1.
pub const L1_PHASE_PLAN: &str = "/l1/phase.json";

/// The phase plan's vCPU count, checked when the plan is read (L1 reads the host's).
mod vcpus_count {
    use super::Vcpus;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Vcpus, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(v.get())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vcpus, D::Error> {
        Vcpus::new(u64::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// The phase plan's guest memory, bytes, checked when the plan is read.
mod mem_bytes {
    use super::GuestMem;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &GuestMem, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(m.bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<GuestMem, D::Error> {
        GuestMem::from_bytes(u64::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// One arm of a phase: its name, its knobs and (Linux) the guest directory it boots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseArm {
    pub name: String,
    pub knobs: Vec<Knob>,
    /// A complete guest directory (vmlinux, bzImage when the arm boots it, config,
    /// initramfs.cpio, init); `None`: the base guest directory (or the probe guest).
    pub guest_dir: Option<PathBuf>,
}

/// One phase: everything `truecold tune-phase` needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhasePlan {
    pub phase: String,
    pub contract: ContractKind,
    pub seed: u64,
    pub rounds: u64,
    #[serde(with = "vcpus_count")]
    pub vcpus: Vcpus,
    #[serde(rename = "mem_bytes", with = "mem_bytes")]
    pub mem: GuestMem,
    /// The baseline's backing.
    pub backing: Backing,
    pub deadline_ms: u64,
    pub kill_grace_ms: u64,
    pub arms: Vec<PhaseArm>,
    /// Attribution launches (after the measured rounds, never rows) for each arm named in
    /// `attribute`.
    pub attribution: u64,
    /// How the attribution launches measure the boot: always written; a plan without it
    /// means [`crate::attribution::instrumentation::Instrumentation::absent`] (`initcall`),
    /// what plans written before left out at that default.
    #[serde(default = "crate::attribution::instrumentation::Instrumentation::absent")]
    pub instrument: Instrumentation,
    pub attribute: Vec<String>,
}

impl PhasePlan {
    fn guest(&self) -> TuneGuest {
        match self.contract {
            ContractKind::Probe => TuneGuest::Probe,
            ContractKind::Linux => TuneGuest::Linux,
        }
    }

    /// Every way the plan is not runnable (empty when it is).
    pub fn problems(&self) -> Vec<String> {
        let mut bad = Vec::new();
        let kernel_ab = self.arms.len() == 2
            && self.arms[0].name == truecold_proof::bisect::GOOD_ARM
            && self.arms[1].name == truecold_proof::bisect::CANDIDATE_ARM
            && self
                .arms
                .iter()
                .all(|a| a.knobs.is_empty() && a.guest_dir.is_some());
        // A tune phase's rounds are sized by its rule; a bisect's kernel A/B by the bisect's
        // (`-n`, at least its fewest: a look at 3 launches a side can still call a step good
        // or break strict-ready).
        let least = if kernel_ab { MIN_N } else { MIN_ROUNDS };
        if self.rounds < least {
            bad.push(format!("{} rounds, at least {least}", self.rounds));
        }
        if !kernel_ab
            && self
                .arms
                .first()
                .is_none_or(|a| a.name != BASELINE || !a.knobs.is_empty())
        {
            bad.push(format!(
                "the first arm is not `{BASELINE}` without knobs (nor is the plan a kernel A/B)"
            ));
        }
        let mut names = BTreeSet::new();
        for a in &self.arms {
            if !names.insert(a.name.as_str()) {
                bad.push(format!("arm `{}` twice", a.name));
            }
            if let Err(e) = knobs::check_set(&a.knobs, self.guest()) {
                bad.push(format!("arm `{}`: {e}", a.name));
            }
            let mut sorted = a.knobs.clone();
            sorted.sort();
            if sorted != a.knobs {
                bad.push(format!("arm `{}`: knobs not in catalogue order", a.name));
            }
        }
        bad
    }
}

/// The Kconfig knobs of a set (the ones that need their own kernel).
pub fn kconfig_knobs(set: &[Knob]) -> Vec<Knob> {
    set.iter()
        .copied()
        .filter(|k| matches!(k.change(), Change::Kconfig(_)))
        .collect()
}

/// A kernel variant's directory name: its Kconfig knobs joined by `+`.
pub fn variant_name(kconfig: &[Knob]) -> String {
    kconfig
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

impl PhasePlan {
    /// The plan file `path` (written by `truecold tune`), its guest checked as it is read.
    pub fn read(path: &Path) -> Result<PhasePlan, PhaseError> {
        let bytes = std::fs::read(path).map_err(PathIoError::at("read", path))?;
        serde_json::from_slice(&bytes).map_err(|source| PhaseError::Plan {
            path: path.to_path_buf(),
            source,
        })
    }
}
