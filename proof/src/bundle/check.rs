//! `verify DIR`: checks a bundle end to end and collects every reason it is invalid.
//!
//! Exit codes: 0 valid, 1 invalid (every reason listed), 2 unreadable (the directory
//! cannot be read, `result.json` has no or an unknown `schema_version`, or a requested
//! signature check cannot run). Usage errors exit 125 (see `truecold-proof --help`).
//!
//! A bundle is untrusted input. Every file is hashed as a stream through one fixed buffer
//! ([`crate::digest::sha256_reader`]), except the files the verifier parses, which are hashed
//! from the bytes it parses: `result.json`, `cmdline.txt` and `SHA256SUMS`, each read only up
//! to [`crate::fsio::MAX_PARSED_BYTES`], and `samples.csv`, read as [`crate::csv::read_samples`] takes
//! it. No other file (an extra file of any size) is held in memory. Everything printed from the bundle
//! (names, labels, error kinds, values) goes through [`crate::fmt::escape_untrusted`], so a
//! bundle cannot put terminal control sequences on a reviewer's screen.
//!
//! The checks, one file per concern, are listed in [`crate::bundle`]'s module doc.

use std::collections::BTreeMap;
use std::path::Path;

use super::contract::*;
use super::environment::*;
use super::evidence::*;
use super::files::*;
use super::rows::*;
use super::summaries::*;
use super::timeline::*;
use crate::names::{CMDLINE_FILE, SIG_FILE, SUMS_FILE};
use crate::schema::SCHEMA_VERSION;
use crate::skeleton::check::{check_signature, check_sums};
use crate::sums::parse_sums;
use crate::verdict::{Verdict, VerifyOptions};

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
        let attribution = files
            .get(crate::attribution::JSONL_FILE)
            .and_then(|f| f.reread(crate::attribution::JSONL_MAX_BYTES).ok().flatten());
        check_generated(&mut v, r, s, &digests, attribution.as_deref());
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
