//! Writing a bundle atomically, reading one, and regenerating its generated files.
//!
//! A bundle is one flat directory:
//! `README.md`, `result.json`, `samples.csv`, `cmdline.txt`, `config` (Linux only),
//! `latency-cdf.svg`, `stages.svg`, optional extra files, and `SHA256SUMS` over all others.
//!
//! The kind's parts, one file each: `record.rs` (`result.json` read and written, the rows
//! read back, this layer's errors), `write.rs` (the atomic writer, and `report`),
//! `readme.rs` (the README and the set of generated files), and the verifier: `check.rs`
//! (the order of the checks, and what makes a bundle unreadable), with one file per
//! concern — `files.rs`, `contract.rs`, `rows.rs`, `timeline.rs`, `environment.rs`,
//! `evidence.rs`, `summaries.rs`.

mod check;
mod contract;
mod environment;
mod evidence;
mod files;
mod readme;
mod record;
mod rows;
mod summaries;
mod timeline;
mod write;

use std::path::Path;

use crate::kind::{DirKind, Kind};
use crate::verdict::{Verdict, VerifyOptions};

pub(crate) use check::verify_bundle_with;
pub use readme::*;
pub use record::*;
pub(crate) use timeline::{fully_stamped, gap_threshold, last_stamp};
pub use write::*;

/// A bundle: its implementation of [`DirKind`], which [`crate::verify`] dispatches to (a
/// directory that holds no other kind's marker).
pub struct BundleDir;

impl DirKind for BundleDir {
    const KIND: Kind = Kind::Bundle;
    type Error = BundleError;

    fn verify(dir: &Path, opts: &VerifyOptions) -> Verdict {
        verify_bundle_with(dir, opts)
    }

    /// The attribution plots are generated only where the bundle holds its attribution
    /// file.
    fn is_generated(dir: &Path, name: &str) -> bool {
        let attribution = dir
            .join(crate::attribution::JSONL_FILE)
            .symlink_metadata()
            .is_ok();
        is_regenerated(name, attribution)
    }

    fn regenerate(dir: &Path) -> Result<Vec<String>, BundleError> {
        regenerate(dir)
    }
}
