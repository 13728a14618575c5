//! truecold-bench: runs campaigns of true-cold launches of `truecold-vmm` (a fresh process,
//! a fresh KVM VM, a fresh kernel boot per sample) and writes each campaign as a proof bundle
//! through `truecold-proof`.
//!
//! Flow of `truecold run` ([`run::run`]): arguments ([`cli`]) → a checked plan, built once
//! ([`plan`]) → the kind of campaign ([`plain`], [`engines_campaign`], [`nested`]; tune and
//! bisect arms run as a [`phase`]) → host kind and artifacts
//! ([`host`], [`artifacts`]) → one [`launch::ProcessLauncher`] (a fresh `truecold-vmm` per
//! sample, request stamp right before the spawn, killed at its deadline) driven by
//! [`schedule`] (sequential, burst, open loop, sweep, churn) → each attempt becomes a row
//! ([`vmm_report`], [`sample`]; failures are rows too) → [`campaign`] builds `result.json`
//! with `truecold-proof`'s statistics and writes the bundle atomically with its writer.
//! Ctrl-C ([`interrupt`]) stops launching and writes a partial bundle marked incomplete.

pub mod artifacts;
pub mod attribution;
pub mod bisect;
pub mod campaign;
pub mod checks;
pub mod cli;
pub mod engines;
pub mod parity;
pub mod plan;
pub mod run;
pub mod terminal;
pub mod tune;
