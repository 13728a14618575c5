//! The skeleton's checks every kind of directory makes: `SHA256SUMS` against the files
//! (a flat directory or a tree), and the signature over it.

use std::collections::BTreeMap;
use std::path::Path;

use super::ParseSums;
use crate::digest::sha256_hex;
use crate::names::{SIG_FILE, SUMS_FILE};
use crate::signature::SignError;
use crate::verdict::{chain, Check, SignatureState, Verdict, VerifyOptions};

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
    let sums = match crate::fsio::read_capped(&dir.join(SUMS_FILE), crate::fsio::MAX_PARSED_BYTES) {
        Ok(Some(b)) => Some(b),
        Ok(None) => {
            v.add(
                Check::TooLarge,
                format!(
                    "`{SUMS_FILE}` is larger than {} bytes",
                    crate::fsio::MAX_PARSED_BYTES
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
