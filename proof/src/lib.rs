//! truecold proof bundles: the schema shared by the bench and the verifier, the one
//! percentile definition, the atomic bundle writer, deterministic README/plots, the
//! verifier and the A/B comparison. No KVM anywhere: a reviewer builds this on any host.
//!
//! # The bench's path
//! 1. Per attempt: [`Sample::new`], then [`Sample::set_times`] (the launch's [`Stamps`]
//!    through the one tiling function `truecold_proto::measure::Stamps::tile`: host/post
//!    stages that tile the headline exactly, the queue stage, `ready_ns` and `latency_ns`),
//!    [`StageTimes::set_guest`] (guest-clock stages),
//!    the boot id (Linux rows only; probe rows have none), memory figures, workload, and
//!    `ok` or `error_kind`/`error_detail`.
//!    Failures stay rows; a sample past the deadline is `ok = false` with its error.
//! 2. [`ResultJson::new`]`(`[`Contract::new`]`(kind, observer, clock, interleaved, mode,
//!    deadline_ns, incomplete), configuration, environment, artifacts, &samples)` computes
//!    every summary (`clock` is `environment.host_kind.clock()`; `interleaved` true for an
//!    arm of a multi-arm directory).
//!    Artifact digests: [`digest::sha256_hex`]; names in [`schema::required_artifacts`].
//! 3. [`write_bundle`]`(dest, &result, &samples, &BundleInputs{..})` writes atomically
//!    and returns the verifier's [`Verdict`] on what it wrote.
//!
//! An engines campaign (several engines, one guest, one contract) writes one bundle per arm
//! inside one directory, then [`arms::write_arms`] adds the comparison and the top
//! SHA256SUMS; [`verify_dir`] recognises such a directory by its `arms.json` ([`arms`]).
//!
//! A tune writes its screen phase (`baseline` + one arm per knob) and, when a knob won
//! ([`tune::screen`]), its confirm phase ([`tune::confirm_arms`]) as two such directories
//! inside one tune directory, then [`tune::write_tune`] adds `tune.json`, `README.md` and
//! the top SHA256SUMS; [`verify_dir`] recognises it by its `tune.json` ([`tune`]).
//!
//! # Invariants the verifier holds a bundle to (see [`verify`])
//! The contract's clock is the host kind's, the configuration's knobs a valid set in
//! catalogue order; rows = attempts (= planned unless incomplete), indexes 0.. in order, a unique boot id
//! on every successful Linux row and none on any probe row, rows of the declared contract
//! kind only, no Linux success on a `pvm` host, concurrency and intended times as the mode
//! says, `latency_ns = ready_ns − (intended or actual request)`, host stages summing to
//! the latency for every success and each of them present and > 0, memory agreeing
//! host/guest for every success, no success past the deadline and no `deadline` failure
//! ready in time, rows inside the harness's wall time and (sequential) in order, one at a
//! time (an idle gap as long as the shortest launch or 10 ms a warning, left to the
//! directory's verifier in an interleaved arm), every summary equal to its
//! recomputation, an error histogram that adds up to the failures, artifact digests well
//! formed, `result.json` in the writer's canonical bytes, `cmdline.txt` agreeing with the
//! configuration ([`cmdline`]), README and plots equal to their regeneration, SHA256SUMS
//! exact, and (with `--signature`) `SHA256SUMS.sig` a good SSH signature ([`sign`]).
#![deny(unsafe_code)]

pub mod arms;
pub mod attribution;
pub mod bisect;
pub mod bundle;
pub mod cli_docs;
pub mod cli_text;
pub mod cmdline;
pub mod compare;
pub mod csv;
pub mod digest;
pub mod fleet;
pub mod fmt;
pub mod fsio;
pub mod html;
pub mod html_page;
pub mod kconfig;
pub mod kind;
pub mod lifecycle;
pub mod names;
pub mod plot;
pub mod replay;
pub mod reports;
pub mod residue;
pub mod schema;
/// Seeds as the command lines take and show them: `truecold_proto::seed`, the one parser
/// of every crate's `--seed` (the nested developer tools' too).
pub use truecold_proto::seed;
pub mod sign;
pub mod signature;
pub mod sizing;
pub mod skeleton;
pub mod stats;
pub mod summary;
pub mod sums;
pub mod tune;
pub mod verdict;
pub mod verify;

pub use bundle::{read_bundle, regenerate, write_bundle, BundleError, BundleInputs, Written};
pub use compare::{compare_bundles, CompareOptions, Comparison, Outcome};
pub use schema::{
    Clock, Configuration, Contract, ContractKind, Environment, HarnessLoad, HostKind, Mode,
    ResultJson, Sample, Stage, StageKind, StageTimes, Stamps, StopRule, Summaries, HEADLINE,
    SCHEMA_VERSION,
};
pub use stats::Summary;
pub use verify::{verify_dir, verify_dir_with, Check, Verdict, VerifyOptions};
