//! Engines campaigns (`truecold run --engine …`): the same Linux guest under several engines
//! (`truecold_engine`: truecold-vmm, Firecracker, Cloud Hypervisor, QEMU microvm), observed
//! alike on each engine's serial port. `-n` rounds; each round runs every arm once, in an
//! order shuffled per round from `--seed` ([`truecold_engine::order`]), one launch at a time,
//! so drift and thermal effects hit every arm alike. Each launch is one
//! [`truecold_engine::driver::launch_once`] (request stamp right before the spawn, no
//! retries); its [`truecold_proto::report::EngineRun`] becomes the row ([`arm_rows::row`],
//! through the same classifier as every campaign) and the `reports.jsonl` line. Each arm is
//! a complete bundle in `<dir>/<engine>/`; the multi-arm files (arms.json, comparison,
//! README, cdf.svg, SHA256SUMS) are written over them ([`truecold_proof::arms::ArmsPlan`]);
//! the directory appears atomically.
//!
//! The parts, by role: [`engines_error`], the campaign's spec ([`engines_spec`]), each arm's
//! binary, version, guest and launch set up ([`arm_setup`]), the rounds run
//! ([`rounds`]), a launch's row and evidence ([`arm_rows`]), and the directory written
//! ([`arms_dir`]). The engines and parity campaigns of `truecold run` drive these
//! ([`crate::run::engines_campaign`], [`crate::run::parity_campaign`]).

pub mod arm_rows;
pub mod arm_setup;
pub mod arms_dir;
pub mod engines_error;
pub mod engines_spec;
pub mod rounds;

#[cfg(test)]
mod tests;
