//! `verify DIR`: which kind of directory `DIR` is, and that kind's verifier. A directory
//! holding `bisect.json` is a bisect directory ([`crate::bisect::verify_bisect_dir`]), one
//! holding `tune.json` a tune directory ([`crate::tune::verify_tune_dir`]), one holding
//! `arms.json` a multi-arm directory ([`crate::arms::verify_arms_dir`]), any other one
//! bundle ([`crate::bundle_verify`]).
//!
//! This module sits above every kind: it uses them, none of them uses it (a kind that holds
//! directories of another kind calls that kind's verifier itself). The names a verifier's
//! caller needs are re-exported here from where they live: the verdict
//! ([`crate::verdict`]) and the bundle verifier's checks ([`crate::bundle_verify`]).

use std::path::Path;

pub use crate::verdict::{
    chain, escape_untrusted, Check, Reason, SignatureCheck, SignatureState, Verdict, VerifyOptions,
};

/// Verifies the directory `dir`, whatever its kind (no signature check).
pub fn verify_dir(dir: &Path) -> Verdict {
    verify_dir_with(dir, &VerifyOptions::default())
}

/// Verifies the directory `dir` with `opts`, by its kind (see the module doc).
pub fn verify_dir_with(dir: &Path, opts: &VerifyOptions) -> Verdict {
    if dir
        .join(crate::bisect::BISECT_FILE)
        .symlink_metadata()
        .is_ok()
    {
        return crate::bisect::verify_bisect_dir(dir, opts);
    }
    if dir.join(crate::tune::TUNE_FILE).symlink_metadata().is_ok() {
        return crate::tune::verify_tune_dir(dir, opts);
    }
    if dir.join(crate::arms::ARMS_FILE).symlink_metadata().is_ok() {
        return crate::arms::verify_arms_dir(dir, opts);
    }
    crate::bundle_verify::verify_bundle_with(dir, opts)
}
