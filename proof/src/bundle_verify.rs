//! `verify DIR`: checks a bundle end to end and collects every reason it is invalid.
//!
//! Exit codes: 0 valid, 1 invalid (every reason listed), 2 unreadable (the directory
//! cannot be read, `result.json` has no or an unknown `schema_version`, or a requested
//! signature check cannot run). Usage errors exit 125 (see `truecold-proof --help`).
//!
//! A bundle is untrusted input. Every file is hashed as a stream through one fixed buffer
//! ([`crate::digest::sha256_reader`]), except the files the verifier parses, which are hashed
//! from the bytes it parses: `result.json`, `cmdline.txt` and `SHA256SUMS`, each read only up
//! to [`MAX_PARSED_BYTES`], and `samples.csv`, read as [`crate::csv::read_samples`] takes
//! it. No other file (an extra file of any size) is held in memory. Everything printed from the bundle
//! (names, labels, error kinds, values) goes through [`escape_untrusted`], so a bundle
//! cannot put terminal control sequences on a reviewer's screen.
//!
//! # Timing rules
//! Every row's *last stamp* is its request plus every present host stage except `queue`,
//! plus its post stages (`workload`, `teardown`): the stages tile the stamps, each ending at
//! its own stamp. A success with both post stages ends at the VMM reaped; a failure's last
//! stamp is the last one it reached.
//! - All modes: the rows span (earliest intended or actual request → latest last stamp) at
//!   most `environment.harness.wall_ns` ([`Check::WallTime`]).
//! - Sequential mode, each consecutive pair `i`, `i+1`: the request of `i+1` is not before
//!   the request of `i` ([`Check::SequentialOrder`]) and not before the last stamp of `i`
//!   ([`Check::SequentialOverlap`]). And when `i` is a success with both post stages, an
//!   idle gap from its last stamp to the request of `i+1` as long as the *shortest launch* or
//!   10 ms, whichever is longer ([`gap_threshold`]: the shortest, over the bundle's successes
//!   with both post stages, of request → last stamp), is a **warning**
//!   ([`Check::SequentialGap`], [`Verdict::warnings`]), not a reason. A row dropped from a
//!   sequential campaign and the rest renumbered leaves a gap of its whole launch (request to
//!   reaped), which is at least the shortest launch; the bench's own bookkeeping between
//!   launches takes far less on a quiet host (in the 1,000-launch probe bundle of 2026-11-30:
//!   under 1 ms, against a shortest launch of ~170 ms) — but a busy host deschedules the
//!   harness for as long: 13.7 ms (2026-12-01, against 21.9 ms), 48.7 ms, 114 ms, and 33.1 ms
//!   against 32.2 ms in CI on 2026-12-02. Nothing in a bundle tells the two apart (a forger
//!   who renumbers rows can shift their stamps as easily), so the verdict says what it saw
//!   and leaves the weighing to the reader, beside the bundle's own `host busy` warnings.
//!   Not looked for when `--drop-caches` ran between
//!   launches (`environment.harness.page_cache_dropped`), nor in one arm of an interleaved
//!   multi-arm directory (`contract.interleaved`: an engines campaign or a tune phase; the
//!   other arms' launches sit in its gaps, and the directory's verifier judges the gaps along
//!   its order). A gap after a failure is not judged: a failure's end (the kill or exit) is
//!   not stamped.
//!
//! # The clock and the knobs
//! `contract.clock` is the host kind's clock ([`HostKind::clock`]: `virtual` on a
//! `nested-emulated` host, `wall` on any other) ([`Check::Clock`]). `configuration.knobs`
//! is a set one arm can run: strictly in catalogue order (so each knob once), no two
//! conflicting, each applying to the contract's guest
//! ([`truecold_proto::tune::check_set`]), and a backing knob's backing is the configuration's
//! ([`Check::Knobs`]).
//!
//! # Physical floor of a success
//! Every host stage of a success except `queue` is present and longer than 0 ns
//! ([`Check::StageFloor`]): a launch is a process spawn, a KVM VM and a guest run, each
//! taking time, so a success at 0 or 1 ns cannot tile. A failure typed `deadline` has no
//! strict-ready inside the deadline ([`Check::DeadlineKind`]).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::bundle::{parse_result, read_capped, result_bytes, JsonError, MAX_PARSED_BYTES};
use crate::cmdline::parse_cmdline_txt;
use crate::csv::read_schema_samples_from;
use crate::digest::{is_sha256_hex, sha256_hex, sha256_reader};
use crate::fsio::{open_regular, FileError};
use crate::names::README_FILE;
use crate::names::REPORTS_FILE;
use crate::names::SIG_FILE;
use crate::names::SUMS_FILE;
use crate::names::{CDF_FILE, STAGES_FILE};
use crate::names::{CMDLINE_FILE, CONFIG_FILE, RESULT_FILE, SAMPLES_FILE};
use crate::report::generated_files;
use crate::schema::Summaries;
use crate::schema::TimelineProblem;
use crate::schema::{
    description_of, required_artifacts, Backing, ContractKind, Engine, HostKind, Mode, Observer,
    ResultJson, Sample, Stage, StageKind, StopRule, HEADLINE, PERCENTILE_DEFINITION,
    SCHEMA_VERSION,
};
use crate::signature::SignError;
use crate::sums::parse_sums;
use crate::verdict::{chain, Check, SignatureState, Verdict, VerifyOptions};
use truecold_proto::path_io::PathIoError;

/// The attribution files ([`crate::attribution::check_bundle`]), each read capped at
/// [`crate::attribution::JSONL_MAX_BYTES`], held to the instrument `cmdline.txt`'s run line
/// asks for (when it asks for attribution launches; an unreadable line is its own reason).
fn check_attribution(
    v: &mut Verdict,
    r: &ResultJson,
    samples: &[Sample],
    files: &BTreeMap<String, Entry>,
    cmdline: Option<&[u8]>,
) {
    let read = |name: &str| {
        let f = files.get(name)?;
        f.reread(crate::attribution::JSONL_MAX_BYTES).ok().flatten()
    };
    let clock = r.environment.host_kind.clock().describe();
    let rec = cmdline.and_then(|c| parse_cmdline_txt(c).ok());
    let asked = rec.as_ref().and_then(|rec| {
        Some(crate::attribution::Asked {
            instrument: rec.attribution_instrument().ok().flatten()?,
            measured_cmdline: rec.guest_cmdline.as_deref(),
        })
    });
    for (file, why) in crate::attribution::check_bundle(read, samples, clock, asked) {
        match file {
            Some(f) => v.add_file(Check::Attribution, &f, why),
            None => v.add(Check::Attribution, why),
        }
    }
}

/// A regular file of the bundle: its path, once hashed its digest, and for a file parsed
/// after it was hashed (samples, reports, lifecycle and attribution files) the one
/// descriptor it was hashed from, read again from the start ([`Entry::reread`]), never
/// opened a second time.
struct Entry {
    path: PathBuf,
    digest: Option<String>,
    open: Option<std::cell::RefCell<fs::File>>,
}

impl Entry {
    /// The kept descriptor, rewound to the start.
    fn rewound(&self) -> std::io::Result<std::cell::RefMut<'_, fs::File>> {
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
    fn reread(&self, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
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

/// Verifies the single bundle in `dir` with `opts`: its files listed, read and hashed once
/// ([`list_files`], [`read_parsed`], [`hash_rest`]), `SHA256SUMS` checked, `result.json`
/// and `samples.csv` parsed, then every check on them. Each step that finds the bundle
/// unreadable says why in `v.unreadable`, and the verdict stops there.
pub(crate) fn verify_bundle_with(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = Verdict::default();
    let Some(mut files) = list_files(&mut v, dir) else {
        return v;
    };
    let Some(parsed) = read_parsed(&mut v, &mut files) else {
        return v;
    };
    if hash_rest(&mut v, &mut files).is_none() {
        return v;
    }
    let digests: BTreeMap<String, String> = files
        .iter()
        .filter_map(|(n, f)| f.digest.clone().map(|d| (n.clone(), d)))
        .collect();
    check_sums(
        &mut v,
        &digests,
        parsed.get(SUMS_FILE).map(Vec::as_slice),
        parse_sums,
    );
    let Some(result) = parse_result_file(&mut v, &parsed) else {
        return v;
    };
    // The columns are those of the bundle's schema (the current one when result.json did
    // not parse: its own error is reported above).
    let schema = result.as_ref().map_or(SCHEMA_VERSION, |r| r.schema_version);
    let Some(samples) = parse_samples_file(&mut v, &files, schema) else {
        return v;
    };
    v.rows = samples.as_ref().map(Vec::len);
    check_required(&mut v, &files, result.as_ref());
    if let Some(r) = &result {
        check_contract(&mut v, r, &digests);
        if let Some(c) = parsed.get(CMDLINE_FILE) {
            check_cmdline(&mut v, r, c);
        }
    }
    if let (Some(r), Some(s)) = (&result, &samples) {
        if check_reports_file(&mut v, r, s, &files).is_none() {
            return v;
        }
        check_observer(&mut v, r, s, &files);
        check_rows(&mut v, r, s);
        check_timeline(&mut v, r, s);
        check_stop_rule(&mut v, r, s);
        check_statistics(&mut v, r, s);
        check_residue(&mut v, r);
        check_nested(&mut v, r);
        check_generated(&mut v, r, s, &digests);
        check_attribution(
            &mut v,
            r,
            s,
            &files,
            parsed.get(CMDLINE_FILE).map(Vec::as_slice),
        );
    }
    check_signature(
        &mut v,
        dir,
        opts,
        files.contains_key(SIG_FILE),
        parsed.get(SUMS_FILE).map(Vec::as_slice),
    );
    v.result = result;
    v.samples = samples;
    v
}

/// The regular files of the bundle, by name; every other entry a [`Check::NotAFile`]
/// reason. `None` when the directory cannot be listed.
fn list_files(v: &mut Verdict, dir: &Path) -> Option<BTreeMap<String, Entry>> {
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
fn read_parsed(
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
fn hash_rest(v: &mut Verdict, files: &mut BTreeMap<String, Entry>) -> Option<()> {
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
fn parse_result_file(
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
fn parse_samples_file(
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
fn check_required(v: &mut Verdict, files: &BTreeMap<String, Entry>, result: Option<&ResultJson>) {
    let mut required = vec![
        README_FILE,
        RESULT_FILE,
        SAMPLES_FILE,
        REPORTS_FILE,
        CMDLINE_FILE,
        CDF_FILE,
        STAGES_FILE,
        SUMS_FILE,
    ];
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

/// `reports.jsonl` against the rows, read from the descriptor it was hashed from. `None`
/// when it cannot be read.
fn check_reports_file(
    v: &mut Verdict,
    r: &ResultJson,
    s: &[Sample],
    files: &BTreeMap<String, Entry>,
) -> Option<()> {
    let Some(f) = files.get(REPORTS_FILE) else {
        return Some(());
    };
    let checked = f.rewound().and_then(|mut file| {
        crate::reports::check(
            std::io::BufReader::new(&mut *file),
            s,
            &crate::reports::Expect::of(r),
            MAX_REPORT_REASONS,
        )
    });
    match checked {
        Ok(bad) => {
            for why in bad {
                v.add(Check::Reports, format!("{REPORTS_FILE}: {why}"));
            }
            Some(())
        }
        Err(err) => {
            v.unreadable = Some(format!("cannot read {REPORTS_FILE}: {err}"));
            None
        }
    }
}

/// The observer's own files and columns: an agent bundle's lifecycle; no cleanup column
/// nor parity record under any other observer.
fn check_observer(v: &mut Verdict, r: &ResultJson, s: &[Sample], files: &BTreeMap<String, Entry>) {
    if r.contract.observer == Observer::Agent {
        let csv = files.get(crate::lifecycle::STATE_CSV).map(|f| {
            f.reread(MAX_PARSED_BYTES)?.ok_or_else(|| {
                std::io::Error::other(format!("larger than {MAX_PARSED_BYTES} bytes"))
            })
        });
        check_lifecycle_file(v, r, s, csv);
        return;
    }
    if s.iter()
        .any(|x| x.cleanup_ok.is_some() || x.cleanup_ns.is_some())
    {
        v.add(
            Check::Lifecycle,
            "cleanup columns filled in a bundle whose observer is not `agent`".to_string(),
        );
    }
    if r.environment.parity.is_some() {
        v.add(
            Check::Lifecycle,
            "environment.parity in a bundle whose observer is not `agent`".to_string(),
        );
    }
}

/// The generated files (README, plots) are what `report` makes of the record and rows.
fn check_generated(
    v: &mut Verdict,
    r: &ResultJson,
    s: &[Sample],
    digests: &BTreeMap<String, String>,
) {
    for (name, bytes) in generated_files(r, s) {
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

/// The signature part of `verify`: notes a `SHA256SUMS.sig` that was not asked for, checks
/// it when `opts` asks.
pub(crate) fn check_signature(
    v: &mut Verdict,
    dir: &Path,
    opts: &VerifyOptions,
    sig_present: bool,
    sums: Option<&[u8]>,
) {
    match &opts.signature {
        None if sig_present => v.signature = SignatureState::PresentNotChecked,
        None => {}
        Some(sc) => {
            let checked = match (sig_present, sums) {
                (false, _) => Err(SignError::Unsigned),
                (true, None) => Err(SignError::Unsigned),
                (true, Some(sums)) => crate::signature::verify_copy(
                    &sc.ssh_keygen,
                    &sc.allowed_signers,
                    sc.identity.as_deref(),
                    &dir.join(SIG_FILE),
                    sums,
                ),
            };
            match checked {
                Ok(principal) => v.signature = SignatureState::Good { principal },
                Err(e) if e.is_finding() => {
                    v.signature = SignatureState::Bad;
                    v.add(Check::Signature, chain(&e));
                }
                Err(e) => {
                    v.unreadable = Some(format!("cannot check the signature: {}", chain(&e)));
                }
            }
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

fn check_cmdline(v: &mut Verdict, r: &ResultJson, bytes: &[u8]) {
    match parse_cmdline_txt(bytes).and_then(|rec| rec.disagreements(r)) {
        Err(e) => v.add(Check::Cmdline, format!("{CMDLINE_FILE}: {e}")),
        Ok(bad) => {
            for b in bad {
                v.add(Check::Cmdline, format!("{CMDLINE_FILE}: {b}"));
            }
        }
    }
}

pub(crate) use crate::skeleton::ParseSums;

/// The top `SHA256SUMS` of a directory tree (a tune or bisect directory): every regular file
/// at most `levels` names deep listed with its digest, nothing else ([`check_sums`]), and
/// every other entry a [`Check::NotAFile`] reason (`dirs` says which directories belong).
/// Returns the `SHA256SUMS` bytes (when readable) and whether a signature is present; `None`
/// when the tree could not be read (`v.unreadable` says why).
pub(crate) fn check_tree_sums(
    v: &mut Verdict,
    dir: &Path,
    levels: usize,
    parse: ParseSums,
    dirs: &str,
) -> Option<(Option<Vec<u8>>, bool)> {
    let (digests, odd) = match crate::sums::tree_digests(dir, levels) {
        Ok(d) => d,
        Err(e) => {
            v.unreadable = Some(chain(&e));
            return None;
        }
    };
    for o in odd {
        v.add(
            Check::NotAFile,
            format!("`{o}` is neither a regular file nor {dirs}"),
        );
    }
    let sums =
        match crate::bundle::read_capped(&dir.join(SUMS_FILE), crate::bundle::MAX_PARSED_BYTES) {
            Ok(Some(b)) => Some(b),
            Ok(None) => {
                v.add(
                    Check::TooLarge,
                    format!(
                        "`{SUMS_FILE}` is larger than {} bytes",
                        crate::bundle::MAX_PARSED_BYTES
                    ),
                );
                None
            }
            Err(_) => None,
        };
    let mut all = digests;
    if let Some(b) = &sums {
        all.insert(SUMS_FILE.to_string(), sha256_hex(b));
    }
    let sig = crate::fsio::is_real_file(&dir.join(SIG_FILE));
    if sig {
        all.insert(SIG_FILE.to_string(), String::new());
    }
    check_sums(v, &all, sums.as_deref(), parse);
    Some((sums, sig))
}

/// SHA256SUMS against the files' `digests`, its names read by `parse`.
pub(crate) fn check_sums(
    v: &mut Verdict,
    digests: &BTreeMap<String, String>,
    sums: Option<&[u8]>,
    parse: ParseSums,
) {
    let Some(sb) = sums else {
        if !digests.contains_key(SUMS_FILE) {
            v.add(Check::SumsMalformed, format!("`{SUMS_FILE}` is missing"));
        }
        return;
    };
    let listed = match parse(sb) {
        Ok(l) => l,
        Err(e) => {
            v.add(Check::SumsMalformed, e.to_string());
            return;
        }
    };
    for (name, digest) in &listed {
        if name == SUMS_FILE {
            v.add(Check::SumsMalformed, format!("`{SUMS_FILE}` lists itself"));
            continue;
        }
        match digests.get(name) {
            None => v.add_file(
                Check::FileMissing,
                name,
                format!("`{name}` is listed in {SUMS_FILE} but missing"),
            ),
            Some(got) => {
                if got != digest {
                    v.add_file(
                        Check::DigestMismatch,
                        name,
                        format!("`{name}`: sha256 is {got}, {SUMS_FILE} says {digest}"),
                    );
                }
            }
        }
    }
    for name in digests.keys() {
        // The signature signs SHA256SUMS, so it cannot be listed in it.
        if name != SUMS_FILE && name != SIG_FILE && !listed.iter().any(|(n, _)| n == name) {
            v.add_file(
                Check::FileUnlisted,
                name,
                format!("`{name}` is present but not listed in {SUMS_FILE}"),
            );
        }
    }
}

fn check_contract(v: &mut Verdict, r: &ResultJson, digests: &BTreeMap<String, String>) {
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

fn check_rows(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let c = &r.contract;
    let cfg = &r.configuration;
    let planned = c.mode.planned_attempts();
    let rows = samples.len() as u64;
    if !c.incomplete && rows != planned {
        v.add(
            Check::AttemptCount,
            format!(
                "{rows} rows, the complete {} campaign planned {planned}",
                c.mode.name()
            ),
        );
    }
    if c.incomplete && rows > planned {
        v.add(
            Check::AttemptCount,
            format!("{rows} rows, more than the {planned} planned"),
        );
    }
    // The layout is truecold-vmm's: a peer's bundle lays RAM out its own way.
    if !cfg.ram_layout.is_absent() && cfg.engine.kind != Engine::Truecold {
        v.add(
            Check::Configuration,
            format!(
                "configuration.ram_layout `{}` for engine `{}`: the layout is truecold-vmm's",
                cfg.ram_layout, cfg.engine.kind
            ),
        );
    }
    if cfg.backing_kind().is_none() {
        v.add(
            Check::Configuration,
            format!(
                "configuration.backing `{}` does not name a backing (anon, thp, hugetlb)",
                cfg.backing
            ),
        );
    }
    match (c.observer, cfg.engine.kind) {
        (Observer::VmExit, Engine::Truecold) => {}
        (Observer::VmExit, e) => v.add(
            Check::Configuration,
            format!(
                "engine `{e}` under the vm-exit observer: only truecold-vmm stamps \
                 strict-ready at a VM exit; other engines are observed on serial"
            ),
        ),
        (Observer::Serial, _) if c.kind != ContractKind::Linux => v.add(
            Check::RowContract,
            "the serial observer reads a Linux guest's TC1 lines: a probe bundle cannot use it",
        ),
        (Observer::Serial, _) => {}
        (Observer::Agent, e) if e.no_parity_launch().is_some() => v.add(
            Check::Configuration,
            format!(
                "engine `{e}` under the agent observer: {}",
                e.no_parity_launch().unwrap_or_default()
            ),
        ),
        (Observer::Agent, _) if c.kind == ContractKind::Linux => {}
        (Observer::Agent, _) => v.add(
            Check::RowContract,
            "the agent observer (the parity contract) is a vsock channel to a Linux guest",
        ),
    }
    if c.kind == ContractKind::Linux && r.environment.host_kind == HostKind::Pvm {
        let ok = samples.iter().filter(|s| s.ok).count();
        if ok > 0 {
            v.add(
                Check::HostKindContract,
                format!(
                    "a `linux` bundle on a `pvm` host has {ok} successful row(s): an \
                     unmodified Linux cannot boot on kvm_pvm, so the data are mislabelled"
                ),
            );
        }
    }
    let mut seen: HashMap<_, u64> = HashMap::new();
    for (pos, s) in samples.iter().enumerate() {
        let i = s.index;
        if i != pos as u64 {
            v.add(
                Check::IndexOrder,
                format!("row {pos} has index {i}: indexes must be 0,1,2,… in row order"),
            );
        }
        if let (ContractKind::Probe, Some(b)) = (s.contract, s.boot_id) {
            v.add(
                Check::ProbeBootId,
                format!(
                    "probe sample {i} carries boot id {b}: the probe guest has no kernel and \
                     no boot id"
                ),
            );
        } else if let Some(b) = s.boot_id {
            if let Some(first) = seen.insert(b, i) {
                v.add(
                    Check::DuplicateBootId,
                    format!("boot id {b} of sample {i} already seen in sample {first}: not a fresh boot"),
                );
            }
        }
        if s.contract != c.kind {
            v.add(
                Check::RowContract,
                format!(
                    "sample {i} is a `{}` row in a `{}` bundle",
                    s.contract.as_str(),
                    c.kind.as_str()
                ),
            );
        }
        if c.kind == ContractKind::Probe && s.guest_platform.is_some() {
            v.add(
                Check::RowContract,
                format!("probe sample {i} carries a Linux guest platform"),
            );
        }
        if c.kind == ContractKind::Probe {
            for st in Stage::ALL.iter().filter(|st| st.kind() == StageKind::Guest) {
                if s.stages.get(*st).is_some() {
                    v.add(
                        Check::RowContract,
                        format!("probe sample {i} carries Linux guest stage `{}`", st.name()),
                    );
                }
            }
        }
        if !c.mode.allows_concurrency(s.concurrency) {
            v.add(
                Check::Concurrency,
                format!(
                    "sample {i}: concurrency {} impossible in {}",
                    s.concurrency,
                    c.mode.describe()
                ),
            );
        }
        check_times(v, c.mode.has_intended_time(), s);
        if s.host_mem_configured != cfg.mem_bytes {
            v.add(
                Check::Configuration,
                format!(
                    "sample {i}: host configured {} bytes, the campaign {}",
                    s.host_mem_configured, cfg.mem_bytes
                ),
            );
        }
        if s.ok {
            check_success(v, r, s);
        } else if s.error_kind.is_empty() {
            v.add(
                Check::ErrorKind,
                format!("failed sample {i} has no error kind"),
            );
        } else if truecold_proto::kinds::ErrorKind::parse(&s.error_kind).is_none() {
            v.add(
                Check::ErrorKind,
                format!(
                    "failed sample {i} has the unknown error kind `{}`",
                    s.error_kind
                ),
            );
        } else if s.error_kind == truecold_proto::kinds::ErrorKind::Deadline.as_string() {
            if let Some(l) = s.latency_ns.filter(|&l| l <= r.contract.deadline_ns) {
                v.add(
                    Check::DeadlineKind,
                    format!(
                        "sample {i} is typed `deadline` but was strict-ready at {l} ns, \
                         inside the {} ns deadline",
                        r.contract.deadline_ns
                    ),
                );
            }
        }
    }
}

fn check_times(v: &mut Verdict, mode_has_intended: bool, s: &Sample) {
    let i = s.index;
    if s.intended_request_ns.is_some() != mode_has_intended {
        v.add(
            Check::IntendedTime,
            format!(
                "sample {i}: intended request time {} but the mode {} one",
                if s.intended_request_ns.is_some() {
                    "present"
                } else {
                    "absent"
                },
                if mode_has_intended { "needs" } else { "has no" }
            ),
        );
    }
    let want_queue = s
        .intended_request_ns
        .map(|t| s.actual_request_ns.checked_sub(t));
    let queue = s.stages.get(Stage::Queue);
    match want_queue {
        None if queue.is_some() => v.add(
            Check::IntendedTime,
            format!("sample {i}: queue stage without an intended time"),
        ),
        Some(None) => v.add(
            Check::IntendedTime,
            format!("sample {i}: actual request before the intended time"),
        ),
        Some(Some(q)) if queue != Some(q) => v.add(
            Check::IntendedTime,
            format!("sample {i}: queue stage {queue:?} ≠ actual − intended = {q}"),
        ),
        _ => {}
    }
    if s.latency_ns != s.derived_latency() {
        v.add(
            Check::Latency,
            format!(
                "sample {i}: latency_ns {} ≠ ready − request origin = {}",
                crate::fmt::opt_ns(s.latency_ns),
                crate::fmt::opt_ns(s.derived_latency())
            ),
        );
    }
}

fn check_success(v: &mut Verdict, r: &ResultJson, s: &Sample) {
    let i = s.index;
    let linux = r.contract.kind == ContractKind::Linux;
    if !s.error_kind.is_empty() {
        v.add(
            Check::ErrorKind,
            format!("sample {i} is ok but has error kind `{}`", s.error_kind),
        );
    }
    if !s.error_detail.is_empty() {
        v.add(
            Check::ErrorDetail,
            format!(
                "sample {i} is ok but carries the error detail {:?}",
                s.error_detail.chars().take(120).collect::<String>()
            ),
        );
    }
    if linux && s.boot_id.is_none() {
        v.add(
            Check::SuccessIncomplete,
            format!("successful Linux sample {i} has no boot id"),
        );
    }
    let Some(lat) = s.latency_ns else {
        v.add(
            Check::SuccessIncomplete,
            format!("successful sample {i} has no strict-ready time"),
        );
        return;
    };
    if lat > r.contract.deadline_ns {
        v.add(
            Check::OverDeadline,
            format!(
                "sample {i} is ok at {lat} ns, after the {} ns deadline",
                r.contract.deadline_ns
            ),
        );
    }
    let (observer, engine) = (r.contract.observer, r.configuration.engine.kind);
    for p in s.timeline_problems(linux, observer, engine) {
        let check = match p {
            TimelineProblem::Missing(st) if st.kind() == StageKind::Guest => {
                Check::SuccessIncomplete
            }
            TimelineProblem::Missing(_) | TimelineProblem::Zero(_) => Check::StageFloor,
            TimelineProblem::Sum { .. } => Check::StageTiling,
            TimelineProblem::Queue => Check::IntendedTime,
            TimelineProblem::NoLatency => Check::SuccessIncomplete,
        };
        v.add(check, format!("successful sample {i}: {p}"));
    }
    if s.protocol_errors > 0 {
        v.add(
            Check::ErrorKind,
            format!(
                "successful sample {i} has {} guest protocol error(s): a success is clean",
                s.protocol_errors
            ),
        );
    }
    let m = s.host_mem_configured;
    // An unknown backing name is a `Configuration` reason of its own (check_rows).
    let backing = r.configuration.backing_kind().unwrap_or(Backing::Anon);
    let mem_bad = s.memory_problems(linux, observer, engine, backing, r.configuration.ram_layout);
    if !mem_bad.is_empty() {
        v.add(
            Check::Memory,
            format!(
                "successful sample {i}: host configured {m} bytes but {}",
                mem_bad.join(", ")
            ),
        );
    }
    if linux {
        if s.workload != truecold_proto::Workload::BenchOk.encode() {
            v.add(
                Check::SuccessIncomplete,
                format!(
                    "successful sample {i}: workload `{}`, not BENCH_OK",
                    s.workload
                ),
            );
        }
        if let Some(why) = s.platform_problem(r.configuration.vcpus) {
            v.add(Check::Platform, format!("successful sample {i}: {why}"));
        }
        if s.guest_cpus != Some(r.configuration.vcpus) {
            v.add(
                Check::Configuration,
                match s.guest_cpus {
                    Some(n) => format!(
                        "successful sample {i}: guest saw {n} CPUs, configured {}",
                        r.configuration.vcpus
                    ),
                    None => format!(
                        "successful sample {i}: the guest reported no CPU count, configured {}",
                        r.configuration.vcpus
                    ),
                },
            );
        }
    }
}

/// The smallest idle gap [`Check::SequentialGap`] reports.
pub(crate) const GAP_FLOOR_NS: u64 = 10_000_000;

/// The one gap rule of sequential rows ([`Check::SequentialGap`], and [`Check::ArmGap`] along
/// the arms' order in [`crate::arms`]): an idle gap after a fully stamped launch is reported
/// (a warning: a dropped row's trace, or a descheduled harness's) when it lasts at least the
/// *shortest launch* (request → last stamp, over `launches`) or [`GAP_FLOOR_NS`], whichever
/// is longer; `None` when no launch is fully stamped.
///
/// A dropped row leaves a gap of its whole launch plus the harness's bookkeeping on both
/// sides, so at least the shortest launch unless the dropped row was itself the shortest by
/// more than that bookkeeping. Half the shortest launch was the rule until 2026-12-01; it
/// proved too tight: a 2-core host running nine reliability tests at once descheduled the
/// harness for 13.7 ms between two probe launches whose shortest took 21.9 ms (an honest
/// bundle judged invalid); on 2026-12-02 a CI host stalled the harness 33.1 ms against a
/// shortest launch of 32.2 ms, and the gap became a warning.
pub(crate) fn gap_threshold(launches: impl Iterator<Item = u64>) -> Option<u64> {
    launches.min().map(|m| m.max(GAP_FLOOR_NS))
}

/// Most reports.jsonl disagreements collected (all rows are still read).
const MAX_REPORT_REASONS: usize = 10_000;

/// The last host-clock stamp of a row (see the module doc), `None` when it overflows.
pub(crate) fn last_stamp(s: &Sample) -> Option<u64> {
    Stage::ALL
        .iter()
        .filter(|st| *st != &Stage::Queue && st.kind() != StageKind::Guest)
        .filter_map(|st| s.stages.get(*st))
        .try_fold(s.actual_request_ns, |t, d| t.checked_add(d))
}

/// Whether a row's end (the VMM reaped) is stamped: a success with both post stages.
pub(crate) fn fully_stamped(s: &Sample) -> bool {
    s.ok && s.stages.get(Stage::Workload).is_some() && s.stages.get(Stage::Teardown).is_some()
}

/// The timing rules of the module doc: wall time, and sequential order, overlap and gaps.
fn check_timeline(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let wall = r.environment.harness.wall_ns;
    let first = samples
        .iter()
        .map(|s| {
            s.intended_request_ns
                .map_or(s.actual_request_ns, |t| t.min(s.actual_request_ns))
        })
        .min();
    let last = samples
        .iter()
        .map(|s| last_stamp(s).unwrap_or(u64::MAX))
        .max();
    if let (Some(a), Some(b)) = (first, last) {
        let span = b.saturating_sub(a);
        if span > wall {
            v.add(
                Check::WallTime,
                format!(
                    "the rows span {span} ns (first request → last stamp), more than the \
                     harness's wall time of {wall} ns"
                ),
            );
        }
    }
    if !matches!(r.contract.mode, Mode::Sequential { .. }) {
        return;
    }
    let threshold = gap_threshold(
        samples
            .iter()
            .filter(|s| fully_stamped(s))
            .filter_map(|s| last_stamp(s).map(|e| e - s.actual_request_ns)),
    );
    // `--drop-caches` syncs and drops the page cache between launches, on purpose. An
    // interleaved bundle is one arm of a multi-arm directory: the other arms' launches fill
    // the gaps between its rows, and the directory's verifier judges the gaps along its
    // order instead ([`crate::arms`]).
    let drops = r.environment.harness.page_cache_dropped.is_some() || r.contract.interleaved;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let end = last_stamp(a).unwrap_or(u64::MAX);
        if b.actual_request_ns < a.actual_request_ns {
            v.add(
                Check::SequentialOrder,
                format!(
                    "sample {} was requested at {} ns, before sample {} ({} ns): a sequential \
                     campaign runs in row order",
                    b.index, b.actual_request_ns, a.index, a.actual_request_ns
                ),
            );
        } else if b.actual_request_ns < end {
            v.add(
                Check::SequentialOverlap,
                format!(
                    "sample {} was requested at {} ns, before sample {} ended ({end} ns): a \
                     sequential campaign runs one launch at a time",
                    b.index, b.actual_request_ns, a.index
                ),
            );
        } else if let Some(m) = threshold.filter(|_| fully_stamped(a) && !drops) {
            let gap = b.actual_request_ns - end;
            if gap >= m {
                v.add(
                    Check::SequentialGap,
                    format!(
                        "{gap} ns pass between the end of sample {} and the request of sample \
                         {}, at least the shortest launch or 10 ms ({m} ns): a dropped row \
                         leaves such a gap, and so does a harness descheduled on a busy host",
                        a.index, b.index
                    ),
                );
            }
        }
    }
}

/// The fail-fast rule ([`StopRule`], [`Check::Stopped`]): `contract.stop_after` only from
/// schema 10, only in a sequential, non-interleaved campaign, and at least 1; with it, the
/// rule re-applied to the rows in order must stop exactly where the rows end when
/// `contract.stopped` says it did (naming that kind, the campaign `incomplete`, fewer rows
/// than planned), and nowhere when it says not (but at the last planned row: nothing was
/// left to stop). `contract.stopped` without `stop_after` is a reason too.
fn check_stop_rule(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let c = &r.contract;
    let Some(after) = c.stop_after else {
        if c.stopped.is_some() {
            v.add_file(
                Check::Stopped,
                RESULT_FILE,
                "`contract.stopped` without `contract.stop_after`: no rule to have stopped it",
            );
        }
        return;
    };
    let planned = match c.mode {
        Mode::Sequential { count } if !c.interleaved && r.schema_version >= 10 => count,
        _ => {
            v.add_file(
                Check::Stopped,
                RESULT_FILE,
                "`contract.stop_after` in a bundle the fail-fast rule does not run in (it runs \
                 in sequential, non-interleaved campaigns of schema 10 on)",
            );
            return;
        }
    };
    if after == 0 {
        v.add_file(
            Check::Stopped,
            RESULT_FILE,
            "`contract.stop_after` is 0: the rule stops after at least one failure",
        );
        return;
    }
    let rule = StopRule { after };
    let first = rule.first_stop(samples.iter().map(|s| s.error_kind.as_str()));
    let rows = samples.len() as u64;
    let last = samples.len().checked_sub(1);
    match (&c.stopped, first) {
        (None, None) => {}
        (None, Some((i, _))) if Some(i) == last && rows == planned => {}
        (None, Some((i, kind))) => v.add(
            Check::Stopped,
            format!(
                "rows {}..={} are {after} consecutive `{kind}` failures, so the campaign \
                 should have stopped after row {} (`contract.stop_after` {after}), but it \
                 has {rows} rows and does not say it stopped",
                (i as u64 + 1).saturating_sub(after),
                i,
                i
            ),
        ),
        (Some(said), Some((i, kind))) if Some(i) == last && *said == kind => {
            if !c.incomplete || rows >= planned {
                v.add(
                    Check::Stopped,
                    format!(
                        "the campaign says it stopped, but it is {} with {rows} of {planned} \
                         rows: a stopped campaign is incomplete, with fewer rows than planned",
                        if c.incomplete {
                            "incomplete"
                        } else {
                            "complete"
                        }
                    ),
                );
            }
        }
        (Some(said), found) => v.add(
            Check::Stopped,
            format!(
                "the campaign says it stopped after {after} consecutive `{said}` failures, but \
                 by its rows the rule {}",
                match found {
                    None => "never fires".to_string(),
                    Some((i, kind)) => format!("fires after row {i} (`{kind}`), of {rows} rows"),
                }
            ),
        ),
    }
}

/// The parity contract's `state.csv`: read, every launch's lifecycle complete by the one rule,
/// and every successful row's launch ended `ok`.
fn check_lifecycle_file(
    v: &mut Verdict,
    r: &ResultJson,
    samples: &[Sample],
    csv: Option<std::io::Result<Vec<u8>>>,
) {
    use crate::lifecycle::{check_lifecycle, read_csv, OUTCOME_OK, STATE_CSV};
    let bytes = match csv {
        None => {
            return v.add(
                Check::Lifecycle,
                format!("`{STATE_CSV}` is missing (every parity bundle carries its lifecycle)"),
            )
        }
        Some(Err(e)) => return v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {e}")),
        Some(Ok(b)) => b,
    };
    match &r.environment.parity {
        None => v.add(
            Check::Lifecycle,
            "environment.parity is missing (every parity bundle states its lifecycle digest)"
                .to_string(),
        ),
        Some(p) if p.journal != crate::lifecycle::JOURNAL => v.add(
            Check::Lifecycle,
            format!(
                "environment.parity.journal is `{}`, not the contract's `{}`",
                p.journal,
                crate::lifecycle::JOURNAL
            ),
        ),
        Some(p) if p.state_sha256 != sha256_hex(&bytes) => v.add(
            Check::Lifecycle,
            format!(
                "environment.parity.state_sha256 is {}, `{STATE_CSV}` hashes to {}",
                p.state_sha256,
                sha256_hex(&bytes)
            ),
        ),
        Some(_) => {}
    }
    let rows = match read_csv(&bytes) {
        Ok(r) => r,
        Err(e) => return v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {e}")),
    };
    for f in check_lifecycle(&rows, samples.len() as u64) {
        v.add(Check::Lifecycle, format!("`{STATE_CSV}`: {f}"));
    }
    // Each launch's lifecycle against its row: CREATED before the request, RUNNING after it
    // and before strict-ready (the contract: persisted before it is declared).
    for s in samples {
        let Some(row) = rows.iter().find(|r| r.idx == s.index) else {
            continue;
        };
        let req = s.actual_request_ns;
        let early = row.created_ns.is_some_and(|c| c > req)
            || row.running_ns.is_some_and(|r| r < req)
            || matches!((row.running_ns, s.ready_ns), (Some(r), Some(ready)) if r > ready)
            || (s.ready_ns.is_some() && row.running_ns.is_none());
        if early {
            v.add(
                Check::Lifecycle,
                format!(
                    "row {}: its lifecycle (created {}, running {}) is not CREATED before \
                     the request and RUNNING between the request and strict-ready ({})",
                    s.index,
                    crate::fmt::opt_ns(row.created_ns),
                    crate::fmt::opt_ns(row.running_ns),
                    crate::fmt::opt_ns(s.ready_ns)
                ),
            );
        }
    }
    for s in samples.iter().filter(|s| s.ok) {
        let ended = rows.iter().find(|r| r.idx == s.index);
        if ended.and_then(|r| r.outcome.as_deref()) != Some(OUTCOME_OK) {
            v.add(
                Check::Lifecycle,
                format!(
                    "row {} is a success, but its launch's lifecycle did not end `{OUTCOME_OK}`",
                    s.index
                ),
            );
        }
    }
}

/// `environment.nested` (schema 7+): present exactly in a `nested-emulated` bundle; absent
/// before schema 7.
fn check_nested(v: &mut Verdict, r: &ResultJson) {
    let nested_host = r.environment.host_kind == HostKind::NestedEmulated;
    match (&r.environment.nested, r.schema_version >= 7, nested_host) {
        (None, true, true) => v.add(
            Check::NestedHarness,
            "environment.nested is missing (every schema-7 nested-emulated bundle names L1's \
             seed and the L0 QEMU)"
                .to_string(),
        ),
        (Some(_), true, false) => v.add(
            Check::NestedHarness,
            format!(
                "environment.nested is present in a bundle whose host kind is {}",
                r.environment.host_kind.as_str()
            ),
        ),
        (Some(_), false, _) => v.add(
            Check::NestedHarness,
            format!(
                "environment.nested is present in a schema-{} bundle (schema 7 added it)",
                r.schema_version
            ),
        ),
        (Some(h), true, true) => match (&h.l1_kernel_sha256, r.schema_version >= 9) {
            (None, true) => v.add(
                Check::NestedHarness,
                "environment.nested.l1_kernel_sha256 is missing (every schema-9 nested bundle \
                 names the L1 kernel its virtual clock ran on)"
                    .to_string(),
            ),
            (Some(d), true) if !is_sha256_hex(d) => v.add(
                Check::NestedHarness,
                format!("environment.nested.l1_kernel_sha256 {d:?} is not 64 lowercase hex digits"),
            ),
            (Some(_), false) => v.add(
                Check::NestedHarness,
                format!(
                    "environment.nested.l1_kernel_sha256 is present in a schema-{} bundle \
                     (schema 9 added it)",
                    r.schema_version
                ),
            ),
            _ => {}
        },
        _ => {}
    }
}

/// `environment.residue` (schema 6+): present, its leaks recomputed exactly from its two
/// readings, each leak also a warning.
fn check_residue(v: &mut Verdict, r: &ResultJson) {
    let env = &r.environment;
    let Some(res) = &env.residue else {
        if r.schema_version >= 6 {
            v.add(
                Check::Residue,
                "environment.residue is missing (every schema-6 bundle records what the \
                 campaign left behind)"
                    .to_string(),
            );
        }
        return;
    };
    let again = crate::residue::leaks(&res.before, &res.after);
    if again != res.leaks {
        v.add(
            Check::Residue,
            format!(
                "environment.residue.leaks is {:?}; its readings give {again:?}",
                res.leaks
            ),
        );
    }
    for l in &res.leaks {
        if !env.warnings.contains(l) {
            v.add(
                Check::Residue,
                format!("the leak `{l}` is not among environment.warnings"),
            );
        }
    }
}

fn check_statistics(v: &mut Verdict, r: &ResultJson, samples: &[Sample]) {
    let again = Summaries::compute_for(&r.contract, samples, r.schema_version);
    let (a, b) = match (
        serde_json::to_value(&again),
        serde_json::to_value(&r.summary),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        _ => return,
    };
    let mut diffs = Vec::new();
    diff("summary", &a, &b, &mut diffs);
    for d in diffs {
        v.add(Check::Statistic, d);
    }
    let histogram: u128 = r.summary.errors.values().map(|&n| u128::from(n)).sum();
    if histogram != u128::from(r.summary.failures) {
        v.add(
            Check::ErrorHistogram,
            format!(
                "summary.errors adds up to {histogram}, summary.failures is {}: every \
                 failure must be in the histogram",
                r.summary.failures
            ),
        );
    }
    let attempts = samples.len() as u64;
    let n = r.summary.headline.with_failures.map(|s| s.n).unwrap_or(0);
    if n != attempts {
        v.add(
            Check::FailuresNotScored,
            format!("headline with failures has n = {n}, the bundle has {attempts} attempts"),
        );
    }
}

/// Lists every leaf where `recomputed` and `stored` differ.
fn diff(
    path: &str,
    recomputed: &serde_json::Value,
    stored: &serde_json::Value,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (recomputed, stored) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{p}: missing in result.json, samples give {x}"))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{p}: result.json says {y}, samples give nothing"))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(format!(
            "{path}: result.json says {}, recomputed from samples.csv: {}",
            short(y),
            short(x)
        )),
        _ => {}
    }
}

fn short(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(200).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}
