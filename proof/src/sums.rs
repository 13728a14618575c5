//! `SHA256SUMS` in the exact text format `sha256sum -c --strict` accepts:
//! one `<64 lowercase hex><space><space><name>\n` line per file, sorted by name.
//! Bundle file names are restricted to `[A-Za-z0-9._-]`, not starting with `.`, so no
//! escaping is ever needed.

use crate::digest::is_sha256_hex;
use crate::names::{is_valid_name, SIG_FILE, SUMS_FILE};

/// Why a `SHA256SUMS` line is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SumsError {
    #[error("SHA256SUMS is not UTF-8")]
    NotUtf8,
    #[error("SHA256SUMS does not end with a newline")]
    NoFinalNewline,
    #[error("SHA256SUMS line {line}: malformed (want `<64 lowercase hex>  <name>`): {text:?}")]
    Malformed { line: usize, text: String },
    #[error("SHA256SUMS line {line}: `{name}` is not a valid bundle file name")]
    BadName { line: usize, name: String },
    #[error("SHA256SUMS lists `{0}` twice")]
    Duplicate(String),
    #[error("SHA256SUMS is not sorted by name at line {0}")]
    Unsorted(usize),
}

/// Formats the file from `(name, digest)` pairs (sorted here).
pub fn format_sums(entries: &[(String, String)]) -> String {
    let mut e = entries.to_vec();
    e.sort();
    e.iter().map(|(n, d)| format!("{d}  {n}\n")).collect()
}

/// Parses the file strictly into `(name, digest)` pairs, in file order.
pub fn parse_sums(bytes: &[u8]) -> Result<Vec<(String, String)>, SumsError> {
    parse_sums_with(bytes, is_valid_name)
}

/// [`parse_sums`] with another rule for the names (a multi-arm directory's `<arm>/<file>`).
pub fn parse_sums_with(
    bytes: &[u8],
    valid_name: impl Fn(&str) -> bool,
) -> Result<Vec<(String, String)>, SumsError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SumsError::NotUtf8)?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(SumsError::NoFinalNewline);
    }
    let mut out: Vec<(String, String)> = Vec::new();
    // Names seen so far: a repeat is found in constant time per line, whatever the length
    // of the file (a list scanned per line would be quadratic in a hostile file).
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    // Lines end in `\n` alone (`lines()` would also take `\r\n`, accepting a spelling the
    // writer never makes).
    for (i, l) in text.split_terminator('\n').enumerate() {
        let line = i + 1;
        let malformed = || SumsError::Malformed {
            line,
            text: l.chars().take(120).collect(),
        };
        let (d, name) = l.split_once("  ").ok_or_else(malformed)?;
        if !is_sha256_hex(d) {
            return Err(malformed());
        }
        if !valid_name(name) {
            return Err(SumsError::BadName {
                line,
                name: name.chars().take(120).collect(),
            });
        }
        if !seen.insert(name) {
            return Err(SumsError::Duplicate(name.to_string()));
        }
        if out.last().is_some_and(|(n, _)| n.as_str() > name) {
            return Err(SumsError::Unsorted(line));
        }
        out.push((name.to_string(), d.to_string()));
    }
    Ok(out)
}

/// An I/O failure of [`tree_digests`] or [`write_atomic`]: what was being done, to which
/// path (the one path-I/O error of the project).
pub use truecold_proto::path_io::PathIoError as TreeIoError;

/// Digests of every regular file under `dir`, at most `levels` names deep (`a`, `a/b`, …),
/// the top [`SUMS_FILE`] and its `.sig` excluded; and, in the second list, every entry that
/// is neither a regular file nor a directory within that depth. Files are hashed as streams.
pub fn tree_digests(
    dir: &std::path::Path,
    levels: usize,
) -> Result<(std::collections::BTreeMap<String, String>, Vec<String>), TreeIoError> {
    fn walk(
        d: &std::path::Path,
        prefix: &str,
        left: usize,
        out: &mut std::collections::BTreeMap<String, String>,
        odd: &mut Vec<String>,
    ) -> Result<(), TreeIoError> {
        for e in std::fs::read_dir(d).map_err(TreeIoError::at("list", d))? {
            let e = e.map_err(TreeIoError::at("list", d))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e.file_type().map_err(TreeIoError::at("stat", d))?;
            let rel = format!("{prefix}{name}");
            if ft.is_file() {
                if prefix.is_empty() && (name == SUMS_FILE || name == SIG_FILE) {
                    continue;
                }
                let p = e.path();
                // Listed as a regular file, opened without following a link: one swapped
                // in since the listing is refused, never followed.
                let (h, _) = crate::fsio::hash_file(&p).map_err(|e| match e {
                    crate::fsio::FileError::Io(e) => e,
                    other => TreeIoError {
                        op: "read",
                        path: p.clone(),
                        source: other.into_io(),
                    },
                })?;
                out.insert(rel, h);
            } else if ft.is_dir() && left > 1 {
                walk(&e.path(), &format!("{rel}/"), left - 1, out, odd)?;
            } else {
                odd.push(rel);
            }
        }
        Ok(())
    }
    let mut out = std::collections::BTreeMap::new();
    let mut odd = Vec::new();
    walk(dir, "", levels, &mut out, &mut odd)?;
    Ok((out, odd))
}

/// Writes `dir/name` atomically: a new temporary file beside it (never one that is there
/// already, nor through a link), fsynced, renamed into place ([`crate::fsio::write_new`]).
pub fn write_atomic(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<(), TreeIoError> {
    crate::fsio::write_new(dir, name, bytes)
}
