//! A bundle's records read and written: `result.json` parsed (its schema version first)
//! and serialised in the writer's canonical bytes, a bundle's record and rows read back
//! ([`read_bundle`]), and the errors of this layer ([`BundleError`]).

use std::path::{Path, PathBuf};

use truecold_proto::path_io::PathIoError;

use crate::csv::{read_schema_samples_from, CsvError};
use crate::names::{RESULT_FILE, SAMPLES_FILE};
use crate::schema::{ResultJson, Sample, READABLE_SCHEMAS, SCHEMA_VERSION};
use crate::skeleton::{self, DirError};

/// Errors of this layer.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("destination {0} already exists; a bundle is never overwritten")]
    Exists(PathBuf),
    #[error("destination {0} has no parent directory or file name")]
    BadDestination(PathBuf),
    #[error("extra file name `{0}` is not allowed (want [A-Za-z0-9._-], no leading dot, not a bundle file name)")]
    BadExtraName(String),
    #[error("a Linux bundle needs the kernel .config; a probe bundle must not carry one")]
    ConfigPresence,
    #[error("result.json: {0}")]
    Json(#[source] JsonError),
    #[error("samples.csv")]
    Csv(#[source] CsvError),
    #[error("cannot serialise result.json")]
    Serialize(#[source] serde_json::Error),
    #[error("the attribution files cannot be regenerated")]
    Attribution(#[source] crate::attribution::AttributionError),
    #[error(transparent)]
    Path(#[from] PathIoError),
    #[error(transparent)]
    File(#[from] crate::fsio::FileError),
    #[error(transparent)]
    Dir(#[from] DirError),
}

/// Why `result.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("not valid JSON")]
    Syntax(#[source] serde_json::Error),
    #[error("no integer `schema_version`")]
    NoVersion,
    #[error("unknown schema_version {found} (this verifier reads 5 to {SCHEMA_VERSION})")]
    UnknownVersion { found: u64 },
    #[error("does not match its schema")]
    Schema(#[source] serde_json::Error),
}

/// Parses `result.json`, checking the schema version first.
pub fn parse_result(bytes: &[u8]) -> Result<ResultJson, JsonError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(JsonError::Syntax)?;
    let found = v
        .get("schema_version")
        .and_then(|x| x.as_u64())
        .ok_or(JsonError::NoVersion)?;
    if !READABLE_SCHEMAS.iter().any(|v| u64::from(*v) == found) {
        return Err(JsonError::UnknownVersion { found });
    }
    serde_json::from_value(v).map_err(JsonError::Schema)
}

/// Serialises `result.json` (pretty, trailing newline; deterministic). An error is
/// returned, never an empty document.
pub fn result_bytes(r: &ResultJson) -> Result<Vec<u8>, BundleError> {
    let mut v = serde_json::to_vec_pretty(r).map_err(BundleError::Serialize)?;
    v.push(b'\n');
    Ok(v)
}

/// Reads and parses `result.json` and `samples.csv` of `dir`.
pub fn read_bundle(dir: &Path) -> Result<(ResultJson, Vec<Sample>), BundleError> {
    let rp = dir.join(RESULT_FILE);
    let rb = skeleton::read_record(&rp)?;
    let result = parse_result(&rb).map_err(BundleError::Json)?;
    let sp = dir.join(SAMPLES_FILE);
    let sf = crate::fsio::open_regular(&sp)?;
    // Hashed while it is parsed, from the same descriptor: within a verification, the rows
    // are the bytes the bundle's digest was checked on ([`crate::fsio::note`]).
    let mut hr = crate::digest::HashingReader::new(sf);
    let samples = read_schema_samples_from(std::io::BufReader::new(&mut hr), result.schema_version)
        .map_err(BundleError::Csv)?;
    let (digest, _) = hr.finish().map_err(PathIoError::at("read", &sp))?;
    crate::fsio::note(&sp, &digest)?;
    Ok((result, samples))
}
