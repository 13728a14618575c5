//! truecold-bench: runs campaigns of true-cold launches of `truecold-vmm` (a fresh process,
//! a fresh KVM VM, a fresh kernel boot per sample) and writes each campaign as a proof bundle
//! through `truecold-proof`.
//!
//! Flow of `truecold run` ([`run::dispatch::run`]): arguments ([`cli`]) → a checked plan,
//! built once ([`plan`]) → the kind of campaign ([`run`]: plain, engines, parity, nested;
//! tune and bisect arms run as a phase, [`tune::phase`]) → host kind and artifacts
//! ([`checks`], [`artifacts`]) → one [`campaign::process_launcher::ProcessLauncher`] (a
//! fresh `truecold-vmm` per sample, request stamp right before the spawn, killed at its
//! deadline) driven by [`campaign::schedule`] (sequential, burst, open loop, sweep, churn)
//! → each attempt becomes a row ([`campaign::vmm_output`], [`campaign::sample`]; failures
//! are rows too) → [`campaign::bundle_out`] builds `result.json` with `truecold-proof`'s
//! statistics and writes the bundle atomically with its writer. Ctrl-C
//! ([`terminal::interrupt`]) stops launching and writes a partial bundle marked incomplete.
//!
//! The folders, lowest first (each imports only from those before it; `cli` imports
//! nothing of the crate): [`terminal`], [`checks`], [`artifacts`], [`campaign`] (one
//! campaign's machinery), [`attribution`], [`plan`], [`parity`], [`engines`] (the engines
//! campaign's arms), [`run`] (`truecold run`), [`tune`], [`bisect`], [`replay`] (`truecold
//! replay`), [`fleet`] (`truecold fleet`: Slurm).

pub mod artifacts;
pub mod attribution;
pub mod bisect;
pub mod campaign;
pub mod checks;
pub mod cli;
pub mod engines;
pub mod fleet;
pub mod parity;
pub mod plan;
pub mod replay;
pub mod run;
pub mod terminal;
pub mod tune;
