//! `--attribution K`: K more launches after the measured campaign, instrumented by
//! `--attribution-instrument` ([`instrumentation::Instrument`]): `rip` (the default) leaves
//! the guest as measured and has the VMM sample each vCPU's RIP every `--attribution-sample-us`
//! (`truecold-vmm boot --sample-rip-us`, `truecold_proto::rip`); `initcall` adds
//! [`truecold_proto::cmdline::ATTRIBUTION_CMDLINE`] to a Linux guest's command line (a probe
//! guest has no kernel: its launches carry the host stages only). Their lines go to
//! `attribution.jsonl`, never to `samples.csv`; `truecold_proof::attribution` makes
//! `attribution.csv` and `attribution.svg` from them and the measured rows.
//!
//! [`launches::run_for`] is the entry point for any caller with a campaign spec and a VMM
//! command (the tune runner calls it for one arm).
//!
//! [`instrumentation`] is what the launches measure with (a plan's value: `plan` reads it,
//! nothing here runs for it); [`launches`] runs them; [`symbols`] names their addresses and
//! RIPs from the vmlinux symbol table.

pub mod instrumentation;
pub mod launches;
pub mod symbols;
