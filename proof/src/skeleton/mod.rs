//! The skeleton every kind of directory shares — a bundle, a multi-arm directory, a tune,
//! a bisect: its records read capped, its `SHA256SUMS` read and written, the check that
//! `report` may regenerate (every file it does not regenerate still matches its entry),
//! and the errors of all of it ([`DirError`]), once. The file I/O under it is
//! [`crate::fsio`]'s (opened once, never through a link, capped; written only as new
//! files); the path rule is [`crate::names::is_valid_path`].

pub(crate) mod check;

use std::path::Path;

use truecold_proto::path_io::PathIoError;

use crate::fsio::{self, FileError, MAX_PARSED_BYTES};
use crate::names::SUMS_FILE;
use crate::sums::{format_sums, tree_digests, SumsError};

/// A `SHA256SUMS` parser: [`crate::sums::parse_sums`] or one with a kind's path rule.
pub type ParseSums = fn(&[u8]) -> Result<Vec<(String, String)>, SumsError>;

/// Why a directory's files could not be read, checked or written.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{SUMS_FILE}")]
    Sums(#[source] SumsError),
    #[error("`{0}` differs from its {SUMS_FILE} entry: refusing to regenerate over a change")]
    Tampered(String),
}

/// A record of the directory (`result.json`, `arms.json`, `tune.json`, `bisect.json`,
/// `SHA256SUMS`…), read whole, at most [`MAX_PARSED_BYTES`].
pub fn read_record(path: &Path) -> Result<Vec<u8>, DirError> {
    Ok(fsio::read_file(path, MAX_PARSED_BYTES)?)
}

/// The entries of `dir`'s `SHA256SUMS` (name, digest), in file order, names by `parse`.
pub fn read_listing(dir: &Path, parse: ParseSums) -> Result<Vec<(String, String)>, DirError> {
    let b = read_record(&dir.join(SUMS_FILE))?;
    parse(&b).map_err(DirError::Sums)
}

/// Before `report` regenerates: every entry of `listed` that is not `regenerated` still
/// matches its file ([`DirError::Tampered`] names the first that does not: regenerating
/// would launder the change). Returns those entries, kept as they are.
pub fn check_unchanged(
    dir: &Path,
    listed: &[(String, String)],
    regenerated: impl Fn(&str) -> bool,
) -> Result<Vec<(String, String)>, DirError> {
    let mut kept = Vec::new();
    for (name, digest) in listed.iter().filter(|(n, _)| !regenerated(n)) {
        let (got, _) = fsio::hash_file(&dir.join(name))?;
        if got != *digest {
            return Err(DirError::Tampered(name.clone()));
        }
        kept.push((name.clone(), digest.clone()));
    }
    Ok(kept)
}

/// Writes `dir/name` atomically, as a new file ([`fsio::write_new`]).
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), DirError> {
    Ok(fsio::write_new(dir, name, bytes)?)
}

/// Writes `dir`'s `SHA256SUMS` over `entries` (sorted there), then fsyncs `dir`.
pub fn write_sums(dir: &Path, entries: &[(String, String)]) -> Result<(), DirError> {
    write(dir, SUMS_FILE, format_sums(entries).as_bytes())?;
    Ok(fsio::sync_dir(dir)?)
}

/// Writes the top `SHA256SUMS` of a tree: every regular file at most `levels` names deep
/// ([`tree_digests`]), then fsyncs `dir`.
pub fn write_tree_sums(dir: &Path, levels: usize) -> Result<(), DirError> {
    let (digests, _) = tree_digests(dir, levels)?;
    let entries: Vec<(String, String)> = digests.into_iter().collect();
    write_sums(dir, &entries)
}
