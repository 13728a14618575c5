//! Writing a bisect directory's top files (the bench, after every step), and `report` on
//! one.

use std::path::Path;

use super::check::*;
use super::model::*;
use super::readme::*;
use crate::kind::Kind;
use crate::names::{BISECT_FILE, README_FILE, SUMS_FILE};
use crate::verdict::{Verdict, VerifyOptions};

/// Writes `dir/name` atomically ([`crate::skeleton::write`]).
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), BisectError> {
    Ok(crate::skeleton::write(dir, name, bytes)?)
}

/// Writes `bisect.json`, `README.md`, `log.txt` and `SHA256SUMS` into `dir` (each
/// atomically; the baseline and step directories are already there) and returns the
/// verifier's verdict on the whole directory.
pub fn write_bisect(dir: &Path, f: &BisectFile, log: &str) -> Result<Verdict, BisectError> {
    if f.result.as_ref().is_some_and(|r| r.profile.is_some()) {
        // The culprit's differential profile, from its two bundles (already there).
        let p = dir.join(PROFILE_DIR);
        let files = culprit_profile_files(dir).map_err(|why| BisectError::Step {
            step: PROFILE_DIR.to_string(),
            why,
        })?;
        for (name, bytes) in files {
            write_atomic(&p, &name, &bytes)?;
        }
    }
    write_atomic(dir, BISECT_FILE, &bisect_bytes(f))?;
    write_atomic(dir, README_FILE, readme(f).as_bytes())?;
    write_atomic(dir, LOG_FILE, log.as_bytes())?;
    crate::skeleton::write_tree_sums(dir, 4)?;
    Ok(verify_bisect_dir(dir, &VerifyOptions::default()))
}

/// Whether `report` regenerates the file `name` (a `SHA256SUMS` path) of a bisect
/// directory: the top `README.md` and page, the differential profile's table and flame
/// graph, and in the baseline, step and profile directories the
/// files `report` regenerates in a bundle or a multi-arm directory (their READMEs, plots,
/// comparison and `SHA256SUMS`); the record, the log and every row are evidence, never
/// regenerated.
pub fn is_regenerated(name: &str) -> bool {
    match name.split_once('/') {
        None => name == README_FILE || name == crate::names::HTML_FILE,
        Some((top, rest)) if top == BASELINE_DIR => bundle_generated(rest),
        Some((top, rest)) if top == STEPS_DIR => match rest.split_once('/') {
            Some((_, f)) => bundle_generated(f) || crate::arms::is_regenerated(f),
            None => false,
        },
        Some((top, rest)) if top == PROFILE_DIR => match rest.split_once('/') {
            Some((side, f)) if side == PARENT_PROFILE || side == CULPRIT_PROFILE => {
                bundle_generated(f)
            }
            Some(_) => false,
            None => rest == PROFILE_TABLE || rest == PROFILE_FLAME,
        },
        Some(_) => false,
    }
}

/// A bundle's own file that `report` on it rewrites (its `SHA256SUMS` included).
fn bundle_generated(name: &str) -> bool {
    name == SUMS_FILE || crate::bundle::is_regenerated(name, true)
}

/// `report DIR` on a bisect directory: every file `report` does not regenerate
/// ([`is_regenerated`]) must match its `SHA256SUMS` entry (the record and the bundles' rows
/// are evidence, never regenerated); then the baseline's and every step's generated files
/// are regenerated (`report` on each: [`crate::bundle::regenerate`],
/// [`crate::arms::regenerate_arms`]), `README.md` is rewritten from `bisect.json` and
/// `SHA256SUMS` anew. Returns the paths rewritten.
pub fn regenerate_bisect(dir: &Path) -> Result<Vec<String>, BisectError> {
    let listed = crate::skeleton::read_listing(dir, parse_bisect_sums)?;
    crate::skeleton::check_unchanged(dir, &listed, is_regenerated)?;
    let f = read_bisect(dir)?;
    let lp = dir.join(LOG_FILE);
    let log = String::from_utf8(crate::skeleton::read_record(&lp)?)
        .map_err(|source| BisectError::NotUtf8 { path: lp, source })?;
    let mut written = Vec::new();
    let profile = f.result.as_ref().is_some_and(|r| r.profile.is_some());
    let inner = std::iter::once(BASELINE_DIR.to_string())
        .filter(|_| f.kind == BisectKind::Commit)
        .chain(f.steps.iter().filter_map(|s| s.dir.clone()))
        .chain(
            [PARENT_PROFILE, CULPRIT_PROFILE]
                .into_iter()
                .filter(|_| profile)
                .map(|side| format!("{PROFILE_DIR}/{side}")),
        );
    for rel in inner {
        let d = dir.join(&rel);
        if !crate::fsio::is_real_dir(&d) {
            continue;
        }
        let names = if Kind::Arms.is_marked(&d) {
            crate::arms::regenerate_arms(&d).map_err(|e| BisectError::Step {
                step: rel.clone(),
                why: crate::verdict::chain(&e),
            })?
        } else {
            crate::bundle::regenerate(&d).map_err(|e| BisectError::Step {
                step: rel.clone(),
                why: crate::verdict::chain(&e),
            })?
        };
        written.extend(names.into_iter().map(|n| format!("{rel}/{n}")));
    }
    write_bisect(dir, &f, &log)?;
    written.extend([README_FILE.to_string(), SUMS_FILE.to_string()]);
    Ok(written)
}
