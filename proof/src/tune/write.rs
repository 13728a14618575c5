//! Writing a tune directory's record, README and SHA256SUMS (the bench, after both phases),
//! and `report` on one: the results recomputed from the phases' verified rows.

use std::path::Path;

use super::check::*;
use super::measure::*;
use super::model::*;
use super::readme::*;
use crate::arms::regenerate_arms;
use crate::names::{README_FILE, SUMS_FILE, TUNE_FILE};
use crate::verdict::{Verdict, VerifyOptions};

/// Writes `dir/name` atomically; a name `sub/file` (`recommended/…`) into `dir/sub`, made
/// when missing.
pub(super) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), TuneError> {
    match name.split_once('/') {
        Some((sub, file)) => {
            let d = dir.join(sub);
            if !crate::fsio::is_real_dir(&d) {
                std::fs::create_dir(&d).map_err(truecold_proto::path_io::PathIoError::at(
                    "create directory",
                    &d,
                ))?;
            }
            crate::skeleton::write(&d, file, bytes)?;
            Ok(crate::fsio::sync_dir(&d)?)
        }
        None => Ok(crate::skeleton::write(dir, name, bytes)?),
    }
}

pub(super) fn write_sums(dir: &Path) -> Result<(), TuneError> {
    Ok(crate::skeleton::write_tree_sums(dir, 3)?)
}

/// Writes `tune.json`, `README.md` and `SHA256SUMS` into `dir` (each atomically), after the
/// bench wrote `dir/screen` and (when a knob won) `dir/confirm` as multi-arm directories
/// ([`crate::arms::write_arms`]), and returns the verifier's verdict on the whole directory.
/// The results are computed from the arms' rows on disk (an arm that does not verify is
/// still counted; the verdict says why it is invalid).
pub fn write_tune(dir: &Path, plan: &TunePlan) -> Result<Verdict, TuneError> {
    let (m, f) = measure(dir, plan)?;
    for (name, bytes) in generated(&f, &m) {
        write_atomic(dir, &name, &bytes)?;
    }
    write_sums(dir)?;
    Ok(verify_tune_dir(dir, &VerifyOptions::default()))
}

/// Whether `report` regenerates the file `name` (`<file>`, `<phase>/<file>` or
/// `<phase>/<arm>/<file>`) of a tune directory.
pub fn is_regenerated(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [f] => *f == README_FILE || *f == crate::names::HTML_FILE,
        [d, f] if *d == super::recommended::RECOMMENDED_DIR => {
            super::recommended::RECOMMENDED_FILES.contains(f)
        }
        [_, f] => [
            crate::arms::COMPARISON_FILE,
            README_FILE,
            crate::arms::ARMS_CDF_FILE,
            SUMS_FILE,
        ]
        .contains(f),
        [_, _, f] => {
            [
                README_FILE,
                crate::names::CDF_FILE,
                crate::names::STAGES_FILE,
                SUMS_FILE,
            ]
            .contains(f)
                || crate::attribution::is_generated(f)
        }
        _ => false,
    }
}

/// `report DIR` on a tune directory: regenerates each phase ([`regenerate_arms`]), then
/// `README.md`, the `recommended/` files and `SHA256SUMS`. `tune.json` is the record and
/// never rewritten (its results must already be what the rows give: [`crate::verify::report_dir`]
/// refuses otherwise; a file of the legacy knob spelling keeps it). Refuses when a file that
/// is not regenerated differs from its `SHA256SUMS` entry. Returns the paths rewritten.
pub fn regenerate_tune(dir: &Path) -> Result<Vec<String>, TuneError> {
    let listed = crate::skeleton::read_listing(dir, parse_tune_sums)?;
    crate::skeleton::check_unchanged(dir, &listed, is_regenerated)?;
    let tb = crate::skeleton::read_record(&dir.join(TUNE_FILE))?;
    let file: TuneFile = serde_json::from_slice(&tb).map_err(TuneError::Json)?;
    let mut written = Vec::new();
    for phase in [PILOT_DIR, SCREEN_DIR, CONFIRM_DIR] {
        let pd = dir.join(phase);
        if crate::fsio::is_real_dir(&pd) {
            let names = regenerate_arms(&pd).map_err(|source| TuneError::Arms { phase, source })?;
            written.extend(names.into_iter().map(|n| format!("{phase}/{n}")));
        }
    }
    let (m, f) = measure(dir, &file.plan())?;
    for (name, bytes) in generated(&f, &m) {
        if name == TUNE_FILE {
            continue;
        }
        write_atomic(dir, &name, &bytes)?;
        written.push(name);
    }
    write_sums(dir)?;
    written.push(SUMS_FILE.to_string());
    Ok(written)
}
