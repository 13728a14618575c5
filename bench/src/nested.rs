//! The nested-harness campaign (`--nested`): a Linux campaign run inside the QEMU/TCG L1 of
//! `truecold-nested`, labelled nested-emulated. Not built yet: this module is the hook.
//! A nested launcher implements [`crate::schedule::Launcher`] with
//! `Output = crate::launch::Attempt` (stdout = the L2 `truecold-vmm` report as printed inside
//! L1), so scheduling, rows ([`crate::vmm_report::observe_attempt`]) and bundles are shared.
//! To wire it: make [`prepare`] return that launcher, replace the `match … {}` on it in
//! [`crate::run::run`] with a campaign whose contract is Linux and whose host kind is
//! `HostKind::NestedEmulated`, and read the L1 host facts instead of this host's.

use std::path::PathBuf;

/// Why a nested campaign cannot run.
#[derive(Debug, thiserror::Error)]
pub enum NestedError {
    #[error(
        "the nested-harness campaign (--nested) is not built yet; run --probe on this host, \
         or a Linux campaign on a host with hardware KVM"
    )]
    NotBuiltYet,
}

/// What a nested campaign needs (filled in when the harness is wired).
#[derive(Clone, Debug, Default)]
pub struct NestedSetup {
    pub guest_dir: PathBuf,
    pub vmm: PathBuf,
}

/// The nested launcher's constructor; an error until the harness is wired.
pub fn prepare(_setup: &NestedSetup) -> Result<std::convert::Infallible, NestedError> {
    Err(NestedError::NotBuiltYet)
}
