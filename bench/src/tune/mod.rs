//! `truecold tune`: which knob changes a true-cold boot, by how much, with evidence.
//!
//! 1. The knobs (`truecold_proto::tune`, each one typed change) are checked against the guest.
//! 2. Kconfig knobs get their kernel from `kernel-config/build.sh tune` (base.config plus the
//!    knob's fragment, cached by content), each in a complete guest directory.
//! 3. The screen phase: `baseline` and one arm per knob, interleaved launch by launch in
//!    rounds shuffled from the seed ([`truecold_engine::order`]), strict-ready stamped at the
//!    VM exit as in every truecold campaign; each arm is a complete bundle, the phase a
//!    multi-arm directory ([`phase`]).
//! 4. The winners, from the screen's verified rows by the same function the verifier runs
//!    (`truecold_proof::tune`).
//! 5. The confirm phase (when there is a winner): `baseline`, `recommended` (every winner)
//!    and, with two winners or more, `recommended-minus-<knob>` (leave one out).
//! 6. `truecold_proof::tune::write_tune` writes tune.json, README.md and SHA256SUMS over
//!    both phases; the directory is renamed into place.
//!
//! In the nested harness each phase is one L1 boot: the host builds kernels, packs them with
//! the phase's plan (`phase.json`) into L1, and `truecold tune-phase` runs the phase there.
//!
//! The parts: [`tune_run`] (the whole tune, [`tune_run::tune`]); a phase of interleaved
//! arms, also a bisect's kernel A/B: its plan ([`phase_plan`]), its run on this host
//! ([`phase`]) or in one L1 boot ([`nested_phase`]), its error ([`phase_error`]);
//! [`knob_kernels`] (the arms' kernels, over truecold's base or the user's); [`tune_error`].

pub mod kconfig_map;
pub mod knob_kernels;
pub mod nested_phase;
pub mod phase;
pub mod phase_error;
pub mod phase_plan;
pub mod propose;
pub mod tune_error;
pub mod tune_run;

#[cfg(test)]
mod tests;
