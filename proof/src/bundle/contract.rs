//! The contract and configuration of a bundle against its host and its own rules: the
//! label, description, headline and percentile definition; the artifacts; `cmdline.txt`.
//!
//! # The clock and the knobs
//!
//! `contract.clock` is the host kind's clock ([`HostKind::clock`]: `virtual` on a
//! `nested-emulated` host, `wall` on any other) ([`Check::Clock`]). `configuration.knobs`
//! is a set one arm can run: strictly in catalogue order (so each knob once), no two
//! conflicting, each applying to the contract's guest
//! ([`truecold_proto::tune::check_set`]), and a backing knob's backing is the configuration's
//! ([`Check::Knobs`]).

use std::collections::BTreeMap;

use crate::cmdline::parse_cmdline_txt;
use crate::digest::is_sha256_hex;
use crate::names::{CMDLINE_FILE, CONFIG_FILE};
use crate::schema::{
    description_of, required_artifacts, Backing, ContractKind, ResultJson, HEADLINE,
    PERCENTILE_DEFINITION,
};
use crate::verdict::{Check, Verdict};

pub(super) fn check_contract(v: &mut Verdict, r: &ResultJson, digests: &BTreeMap<String, String>) {
    let c = &r.contract;
    if c.label != c.kind.label() {
        v.add(
            Check::ContractLabel,
            format!(
                "contract kind `{}` must be labelled {:?}, found {:?}",
                c.kind.as_str(),
                c.kind.label(),
                c.label
            ),
        );
    }
    if c.description != description_of(c.kind) {
        v.add(
            Check::ContractDescription,
            format!(
                "contract kind `{}` must be described as {:?}, found {:?}",
                c.kind.as_str(),
                description_of(c.kind),
                c.description
            ),
        );
    }
    if c.headline != HEADLINE {
        v.add(
            Check::ContractLabel,
            format!("headline must be `{HEADLINE}`, found `{}`", c.headline),
        );
    }
    if c.percentile_definition != PERCENTILE_DEFINITION {
        v.add(
            Check::ContractLabel,
            "percentile_definition is not the one this verifier implements",
        );
    }
    for name in required_artifacts(c.kind) {
        if !r.artifacts.contains_key(*name) {
            v.add(
                Check::Artifact,
                format!("artifact digest `{name}` is missing"),
            );
        }
    }
    for (name, d) in &r.artifacts {
        if !is_sha256_hex(d) {
            v.add(
                Check::Artifact,
                format!("artifact `{name}`: `{d}` is not 64 lowercase hex digits"),
            );
        }
    }
    if let (Some(got), Some(d)) = (digests.get(CONFIG_FILE), r.artifacts.get("config")) {
        if got != d {
            v.add(
                Check::ConfigDigest,
                format!("`{CONFIG_FILE}` has sha256 {got}, artifacts.config says {d}"),
            );
        }
    }
    if c.kind == ContractKind::Probe && digests.contains_key(CONFIG_FILE) {
        v.add(
            Check::RowContract,
            "a probe-guest bundle carries a kernel config: it is not a Linux boot",
        );
    }
    let host = r.environment.host_kind;
    if c.clock != host.clock() {
        v.add(
            Check::Clock,
            format!(
                "contract.clock is `{}`, but a `{}` host measures on the {} clock",
                c.clock.as_str(),
                host.as_str(),
                host.clock().as_str()
            ),
        );
    }
    check_knobs(v, r);
}

/// `configuration.knobs` (see the module doc).
fn check_knobs(v: &mut Verdict, r: &ResultJson) {
    let knobs = &r.configuration.knobs;
    // A knob given twice is check_set's reason.
    if let Some(w) = knobs.windows(2).find(|w| w[0] > w[1]) {
        v.add(
            Check::Knobs,
            format!(
                "configuration.knobs lists `{}` before `{}`: knobs are listed in catalogue \
                 order",
                w[0], w[1]
            ),
        );
    }
    if let Err(e) = truecold_proto::tune::check_set(knobs, r.contract.tune_guest()) {
        v.add(
            Check::Knobs,
            format!(
                "configuration.knobs cannot be one arm of a `{}` campaign: {e}",
                r.contract.kind.as_str()
            ),
        );
    }
    // The arm's layout is the one its knobs set (the default without a layout knob).
    let layout = truecold_proto::tune::apply(knobs, Backing::Anon).ram_layout;
    if !knobs.is_empty() && r.configuration.ram_layout != layout {
        v.add(
            Check::Knobs,
            format!(
                "the knobs lay RAM out `{layout}`, configuration.ram_layout is `{}`",
                r.configuration.ram_layout
            ),
        );
    }
    for k in knobs {
        if let truecold_proto::tune::Change::Vmm(truecold_proto::tune::VmmChange::Backing(b)) =
            k.change()
        {
            if r.configuration.backing_kind() != Some(b) {
                v.add(
                    Check::Knobs,
                    format!(
                        "knob `{k}` backs guest memory with `{}`, configuration.backing is `{}`",
                        b.as_str(),
                        r.configuration.backing
                    ),
                );
            }
        }
    }
}

pub(super) fn check_cmdline(v: &mut Verdict, r: &ResultJson, bytes: &[u8]) {
    match parse_cmdline_txt(bytes).and_then(|rec| rec.disagreements(r)) {
        Err(e) => v.add(Check::Cmdline, format!("{CMDLINE_FILE}: {e}")),
        Ok(bad) => {
            for b in bad {
                v.add(Check::Cmdline, format!("{CMDLINE_FILE}: {b}"));
            }
        }
    }
}
