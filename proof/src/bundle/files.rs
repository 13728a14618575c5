//! The bundle's files as the verifier reads them: listed, each read and hashed once, the
//! records parsed (and `result.json` held to its canonical bytes), the required files
//! present, the generated files equal to their regeneration.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use truecold_proto::path_io::PathIoError;

use super::readme::*;
use super::record::*;
use crate::csv::read_schema_samples_from;
use crate::digest::{sha256_hex, sha256_reader};
use crate::fsio::{open_regular, read_capped, FileError, MAX_PARSED_BYTES};
use crate::names::{
    CDF_FILE, CMDLINE_FILE, CONFIG_FILE, README_FILE, REPORTS_FILE, RESULT_FILE, SAMPLES_FILE,
    STAGES_FILE, SUMS_FILE,
};
use crate::schema::{ContractKind, ResultJson, Sample};
use crate::verdict::{chain, Check, Verdict};

/// A regular file of the bundle: its path, once hashed its digest, and for a file parsed
/// after it was hashed (samples, reports, lifecycle and attribution files) the one
/// descriptor it was hashed from, read again from the start ([`Entry::reread`]), never
/// opened a second time.
pub(super) struct Entry {
    pub(super) path: PathBuf,
    pub(super) digest: Option<String>,
    pub(super) open: Option<std::cell::RefCell<fs::File>>,
}

impl Entry {
    /// The kept descriptor, rewound to the start.
    pub(super) fn rewound(&self) -> std::io::Result<std::cell::RefMut<'_, fs::File>> {
        use std::io::Seek as _;
        let mut f = self
            .open
            .as_ref()
            .ok_or_else(|| std::io::Error::other("not kept open"))?
            .borrow_mut();
        f.rewind()?;
        Ok(f)
    }

    /// The whole file from the kept descriptor if it has at most `cap` bytes; `Ok(None)`
    /// when it has more.
    pub(super) fn reread(&self, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
        use std::io::Read as _;
        let mut f = self.rewound()?;
        let mut b = Vec::new();
        (&mut *f).take(cap.saturating_add(1)).read_to_end(&mut b)?;
        Ok((b.len() as u64 <= cap).then_some(b))
    }
}

/// The files of a bundle parsed after they are hashed: kept open between the two.
fn parsed_later(name: &str) -> bool {
    matches!(
        name,
        SAMPLES_FILE | REPORTS_FILE | crate::lifecycle::STATE_CSV
    ) || name == crate::attribution::JSONL_FILE
        || crate::attribution::is_generated(name)
}

/// The regular files of the bundle, by name; every other entry a [`Check::NotAFile`]
/// reason. `None` when the directory cannot be listed.
pub(super) fn list_files(v: &mut Verdict, dir: &Path) -> Option<BTreeMap<String, Entry>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            v.unreadable = Some(format!("cannot read directory: {e}"));
            return None;
        }
    };
    let mut files: BTreeMap<String, Entry> = BTreeMap::new();
    for e in entries {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                v.unreadable = Some(format!("cannot list directory: {err}"));
                return None;
            }
        };
        let name = e.file_name().to_string_lossy().into_owned();
        let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_file {
            v.add(
                Check::NotAFile,
                format!("`{name}` is not a regular file (a bundle is flat)"),
            );
            continue;
        }
        files.insert(
            name,
            Entry {
                path: e.path(),
                digest: None,
                open: None,
            },
        );
    }
    Some(files)
}

/// The files that are parsed whole (`result.json`, `cmdline.txt`, `SHA256SUMS`): each read
/// once, capped, and hashed from those bytes. `None` when one cannot be read.
pub(super) fn read_parsed(
    v: &mut Verdict,
    files: &mut BTreeMap<String, Entry>,
) -> Option<BTreeMap<&'static str, Vec<u8>>> {
    let mut parsed: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    for name in [RESULT_FILE, CMDLINE_FILE, SUMS_FILE] {
        let Some(f) = files.get_mut(name) else {
            continue;
        };
        match read_capped(&f.path, MAX_PARSED_BYTES) {
            Ok(Some(b)) => {
                f.digest = Some(sha256_hex(&b));
                parsed.insert(name, b);
            }
            Ok(None) => v.add(
                Check::TooLarge,
                format!(
                    "`{name}` is larger than {MAX_PARSED_BYTES} bytes, the most this verifier \
                     reads"
                ),
            ),
            Err(err) => {
                v.unreadable = Some(format!("cannot read {name}: {err}"));
                return None;
            }
        }
    }
    Some(parsed)
}

/// Every other file hashed as a stream, never held in memory; the ones parsed later
/// (`samples.csv`, `reports.jsonl`, …: [`parsed_later`]) keep the descriptor they were
/// hashed from. `None` when one cannot be read.
pub(super) fn hash_rest(v: &mut Verdict, files: &mut BTreeMap<String, Entry>) -> Option<()> {
    for (name, f) in files.iter_mut().filter(|(_, f)| f.digest.is_none()) {
        let hashed = open_regular(&f.path)
            .and_then(|mut file| {
                let (d, n) = sha256_reader(&mut file).map_err(PathIoError::at("read", &f.path))?;
                crate::fsio::note(&f.path, &d)?;
                Ok(((d, n), file))
            })
            .map_err(FileError::into_io);
        match hashed {
            Ok(((d, _), file)) => {
                f.digest = Some(d);
                if parsed_later(name) {
                    f.open = Some(std::cell::RefCell::new(file));
                }
            }
            Err(err) => {
                v.unreadable = Some(format!("cannot read {name}: {err}"));
                return None;
            }
        }
    }
    Some(())
}

/// `result.json` parsed (and checked canonical): `Some(None)` when it is missing or does
/// not parse (a reason), `None` when its version makes the bundle unreadable.
pub(super) fn parse_result_file(
    v: &mut Verdict,
    parsed: &BTreeMap<&'static str, Vec<u8>>,
) -> Option<Option<ResultJson>> {
    match parsed.get(RESULT_FILE).map(|b| (b, parse_result(b))) {
        None => Some(None),
        Some((b, Ok(r))) => {
            check_canonical(v, b, &r);
            Some(Some(r))
        }
        Some((_, Err(e @ (JsonError::NoVersion | JsonError::UnknownVersion { .. })))) => {
            v.unreadable = Some(format!("{RESULT_FILE}: {e}"));
            None
        }
        Some((_, Err(e))) => {
            v.add(Check::ResultJson, format!("{RESULT_FILE}: {}", chain(&e)));
            Some(None)
        }
    }
}

/// `samples.csv` parsed from the descriptor it was hashed from, in the columns of
/// `schema`: `Some(None)` when it is missing or does not parse (a reason), `None` when it
/// cannot be read.
pub(super) fn parse_samples_file(
    v: &mut Verdict,
    files: &BTreeMap<String, Entry>,
    schema: u32,
) -> Option<Option<Vec<Sample>>> {
    match files.get(SAMPLES_FILE).map(|f| {
        f.rewound()
            .map(|mut file| read_schema_samples_from(std::io::BufReader::new(&mut *file), schema))
    }) {
        None => Some(None),
        Some(Ok(Ok(s))) => Some(Some(s)),
        Some(Ok(Err(e))) => {
            v.add(Check::SamplesCsv, format!("{SAMPLES_FILE}: {e}"));
            Some(None)
        }
        Some(Err(err)) => {
            v.unreadable = Some(format!("cannot read {SAMPLES_FILE}: {err}"));
            None
        }
    }
}

/// Every file a bundle of its kind must hold.
pub(super) fn check_required(
    v: &mut Verdict,
    files: &BTreeMap<String, Entry>,
    result: Option<&ResultJson>,
) {
    let mut required = vec![
        README_FILE,
        RESULT_FILE,
        SAMPLES_FILE,
        REPORTS_FILE,
        CMDLINE_FILE,
        CDF_FILE,
        STAGES_FILE,
    ];
    // `SHA256SUMS` missing is already a reason of its own (`SumsMalformed`): not twice.
    if !v.has(Check::SumsMalformed) {
        required.push(SUMS_FILE);
    }
    if result.map(|r| r.contract.kind) != Some(ContractKind::Probe) {
        required.push(CONFIG_FILE);
    }
    for r in required {
        if !files.contains_key(r) {
            v.add_file(
                Check::RequiredFileMissing,
                r,
                format!("required file `{r}` is missing"),
            );
        }
    }
}

/// The generated files (README, plots) are what `report` makes of the record and rows.
pub(super) fn check_generated(
    v: &mut Verdict,
    r: &ResultJson,
    s: &[Sample],
    digests: &BTreeMap<String, String>,
    attribution: Option<&[u8]>,
) {
    let section = attribution.and_then(crate::attribution::readme_section);
    for (name, bytes) in generated_files_with(r, s, section.as_deref()) {
        if digests.get(&name).is_some_and(|d| *d != sha256_hex(&bytes)) {
            v.add_file(
                Check::GeneratedStale,
                &name,
                format!(
                    "`{name}` differs from what `truecold-proof report` generates from \
                     result.json and samples.csv (hand-edited, or written by another \
                     renderer: `truecold-proof report` regenerates it)"
                ),
            );
        }
    }
}

/// `result.json` must be exactly what [`result_bytes`] writes for its parsed form: one
/// spelling per document, so a key given twice (serde keeps the last) or any other
/// hand-made variant is a reason.
fn check_canonical(v: &mut Verdict, bytes: &[u8], r: &ResultJson) {
    let want = match result_bytes(r) {
        Ok(w) => w,
        Err(e) => {
            v.add(Check::ResultJson, format!("{RESULT_FILE}: {}", chain(&e)));
            return;
        }
    };
    // A bundle written before knobs were spelt as the CLI spells them is canonical in that
    // spelling.
    if want == bytes
        || truecold_proto::tune::with_legacy_spelling(|| result_bytes(r)).is_ok_and(|w| w == bytes)
    {
        return;
    }
    let cut = |l: &[u8]| {
        let t = String::from_utf8_lossy(l);
        let t: String = t.chars().take(100).collect();
        t
    };
    let (mut a, mut b) = (bytes.split(|&c| c == b'\n'), want.split(|&c| c == b'\n'));
    let mut line = 1;
    let (got, exp) = loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => break (x.map(cut), y.map(cut)),
        }
    };
    v.add(
        Check::ResultNotCanonical,
        format!(
            "{RESULT_FILE} is not in the writer's canonical form (a repeated key, reordered \
             keys, other whitespace or spellings); first difference at line {line}: the file \
             has {}, the writer writes {}",
            got.map_or("nothing".into(), |g| format!("`{g}`")),
            exp.map_or("nothing".into(), |e| format!("`{e}`")),
        ),
    );
}
