//! `verify DIR` and `report DIR`, whatever the kind of `DIR`: the one dispatcher. A
//! directory's kind is the record that marks it ([`Kind::of`]: `bisect.json` a bisect
//! directory, `tune.json` a tune directory, `arms.json` a multi-arm directory, none of them
//! a bundle), and each kind's verifier and regeneration are its [`DirKind`] implementation
//! ([`BisectDir`], [`TuneDir`], [`ArmsDir`], [`BundleDir`]); this module is the one place
//! that turns the one into the other. `compare A B` from two directories is here too
//! ([`compare_dirs`]): it verifies both, then compares what they verified.
//!
//! This module sits above every kind: it uses them, none of them uses it (a kind that holds
//! directories of another kind calls that kind's verifier itself). The names a verifier's
//! caller needs are re-exported here from where they live: the verdict
//! ([`crate::verdict`]) and the terminal escape ([`crate::fmt::escape_untrusted`]).

use std::path::Path;

use crate::arms::ArmsDir;
use crate::bisect::BisectDir;
use crate::bundle::BundleDir;
use crate::compare::{compare_verified_sized, CompareError, CompareOptions, Comparison};
use crate::fleet::FleetDir;
use crate::kind::{DirKind, Kind};
use crate::tune::TuneDir;

pub use crate::fmt::escape_untrusted;
pub use crate::verdict::{
    chain, Check, Reason, SignatureCheck, SignatureState, Verdict, VerifyOptions,
};

/// Verifies the directory `dir`, whatever its kind (no signature check).
pub fn verify_dir(dir: &Path) -> Verdict {
    verify_dir_with(dir, &VerifyOptions::default())
}

/// Verifies the directory `dir` with `opts`, by its kind (see the module doc), its page
/// ([`crate::html`]) included.
pub fn verify_dir_with(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let kind = Kind::of(dir);
    if let Some(v) = not_a_bundle(dir, kind) {
        return v;
    }
    let mut v = verify_kind(dir, kind, opts);
    crate::html_page::check(dir, kind, &mut v);
    v
}

/// The files whose absence, all of them, makes a directory no bundle at all: a bundle's
/// record and rows, and the checksums every kind has. A directory with any of them is judged
/// as the bundle it claims to be (a bundle missing its `result.json` is INVALID, every
/// missing file a reason).
const ANY_OF_A_BUNDLE: [&str; 3] = [
    crate::names::RESULT_FILE,
    crate::names::SAMPLES_FILE,
    crate::names::SUMS_FILE,
];

/// The verdict on a readable directory that holds none of any kind's files (no marker, none
/// of [`ANY_OF_A_BUNDLE`]): not a bundle, said in one line (exit 2, nothing to judge), where
/// the bundle verifier would list every required file missing. `None` for any other
/// directory, and for one that cannot be read (its verifier says why).
fn not_a_bundle(dir: &Path, kind: Kind) -> Option<Verdict> {
    if kind != Kind::Bundle || std::fs::read_dir(dir).is_err() {
        return None;
    }
    if ANY_OF_A_BUNDLE
        .iter()
        .any(|f| dir.join(f).symlink_metadata().is_ok())
    {
        return None;
    }
    let markers: Vec<&str> = Kind::ALL.iter().filter_map(|k| k.marker()).collect();
    Some(Verdict {
        unreadable: Some(format!(
            "not a truecold directory: none of {}, nor {} (a multi-arm, tune or bisect \
             directory's record)",
            ANY_OF_A_BUNDLE.join(", "),
            markers.join(", ")
        )),
        not_a_bundle: true,
        ..Verdict::default()
    })
}

/// The verifier of `kind`, the page aside.
fn verify_kind(dir: &Path, kind: Kind, opts: &VerifyOptions) -> Verdict {
    match kind {
        Kind::Fleet => FleetDir::verify(dir, opts),
        Kind::Bisect => BisectDir::verify(dir, opts),
        Kind::Tune => TuneDir::verify(dir, opts),
        Kind::Arms => ArmsDir::verify(dir, opts),
        Kind::Bundle => BundleDir::verify(dir, opts),
    }
}

/// `verify --json DIR`'s document (and the `verdict` of `truecold run --json`): what the
/// directory is, whether it is valid, every reason and warning, and a bundle's figures. The
/// fields are listed in docs/verify.md; text from the bundle is kept verbatim (JSON escapes
/// it), never terminal-escaped.
pub fn verdict_json(dir: &Path, v: &Verdict) -> serde_json::Value {
    use serde_json::json;
    let kind = match Kind::of(dir) {
        _ if v.not_a_bundle => "none",
        Kind::Fleet => "fleet",
        Kind::Bisect => "bisect",
        Kind::Tune => "tune",
        Kind::Bundle => "bundle",
        Kind::Arms => match v.arms.as_deref().map(crate::verdict::arms_kind) {
            Some("kernel A/B") => "kernel_ab",
            Some("tune phase") => "tune_phase",
            Some("tune") => "tune",
            Some(_) => "engines",
            None => "multi_arm",
        },
    };
    let findings = |f: &[Reason]| -> Vec<serde_json::Value> {
        f.iter()
            .map(|r| json!({ "check": format!("{:?}", r.check), "message": r.detail, "file": r.file }))
            .collect()
    };
    let signature = match &v.signature {
        SignatureState::NotChecked => json!("not_checked"),
        SignatureState::PresentNotChecked => json!("present_not_checked"),
        SignatureState::Good { principal } => json!({ "good": principal }),
        SignatureState::Bad => json!("bad"),
    };
    let summary = v.result.as_ref().map(|r| {
        let sm = &r.summary;
        let pcts = |s: &Option<crate::stats::Summary>| {
            s.as_ref()
                .map(|s| json!({ "n": s.n, "p50_ns": s.p50, "p99_ns": s.p99, "max_ns": s.max }))
        };
        json!({
            "contract": r.contract.kind.as_str(),
            "label": r.contract.label,
            "mode": r.contract.mode,
            "host_kind": r.environment.host_kind.as_str(),
            "clock": r.contract.clock.as_str(),
            "vcpus": r.configuration.vcpus,
            "mem_bytes": r.configuration.mem_bytes,
            "deadline_ns": r.contract.deadline_ns,
            "attempts": sm.attempts,
            "ok": sm.successes,
            "failed": sm.failures,
            "errors": sm.errors,
            "headline": {
                "metric": crate::schema::HEADLINE,
                "clock": r.contract.clock.as_str(),
                "successes": pcts(&sm.headline.successes),
                "with_failures": pcts(&sm.headline.with_failures),
            },
            "stopped": r.contract.stopped.as_ref().map(|k| json!({
                "after": r.contract.stop_after,
                "kind": k,
            })),
            "incomplete": r.contract.incomplete,
        })
    });
    let parts: Vec<serde_json::Value> = v
        .parts
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "valid": p.valid,
                "clock": p.clock.as_str(),
                "attempts": p.attempts,
                "ok": p.ok,
                "failed": p.failed,
                "headline": p.headline.as_ref().map(|h| json!({
                    "n": h.n, "p50_ns": h.p50, "p99_ns": h.p99, "max_ns": h.max,
                })),
                "host_warnings": p.host_warnings,
            })
        })
        .collect();
    let host_warnings: Vec<serde_json::Value> = v
        .host_warnings()
        .into_iter()
        .map(|(text, by)| json!({ "text": text, "parts": by }))
        .collect();
    json!({
        "path": dir.display().to_string(),
        "kind": kind,
        "label": v.label_text(),
        "valid": v.is_valid(),
        "exit": v.exit_code(),
        "unreadable": v.unreadable,
        "reasons": findings(&v.reasons),
        "warnings": findings(&v.warnings),
        "signature": signature,
        "arms": v.arms,
        "rows": v.rows,
        "summary": summary,
        "parts": parts,
        "host_warnings": host_warnings,
    })
}

/// Why `report DIR` regenerated nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{} cannot be verified, so it is not regenerated: {why}", dir.display())]
    Unreadable {
        dir: std::path::PathBuf,
        why: String,
    },
    #[error(
        "{} does not verify besides the files `report` regenerates ({count} reason(s); the \
         first: {first}): regenerating would launder it",
        dir.display()
    )]
    DoesNotVerify {
        dir: std::path::PathBuf,
        count: usize,
        first: String,
    },
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    #[error(transparent)]
    Arms(#[from] crate::arms::ArmsError),
    #[error(transparent)]
    Tune(#[from] crate::tune::TuneError),
    #[error(transparent)]
    Bisect(#[from] crate::bisect::BisectError),
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    #[error("report.html")]
    Html(#[source] crate::html::HtmlError),
}

/// The reasons of `v` that `report` would not cure: every one that is not about a file it
/// regenerates ([`Reason::file`] and the kind's rule).
pub fn reasons_report_keeps(v: &Verdict, regenerated: impl Fn(&str) -> bool) -> Vec<&Reason> {
    v.reasons
        .iter()
        .filter(|r| !r.file.as_deref().is_some_and(&regenerated))
        .collect()
}

/// `report DIR`, whatever its kind: refused unless `DIR` verifies but for reasons about the
/// files `report` regenerates (a stale or missing README, plot or `SHA256SUMS` entry of
/// one: [`DirKind::is_generated`]); then the kind's regeneration ([`DirKind::regenerate`]).
/// Returns the paths rewritten.
pub fn report_dir(dir: &Path) -> Result<Vec<String>, ReportError> {
    report_dir_with(dir, false)
}

/// [`report_dir`], then the page ([`crate::html_page::write`], from the verdict on the
/// regenerated directory) when `html` asks for one (the current version) or the directory
/// already has one (regenerated as the version it is: a page left as it was would be stale).
pub fn report_dir_with(dir: &Path, html: bool) -> Result<Vec<String>, ReportError> {
    let kind = Kind::of(dir);
    let mut written = match kind {
        Kind::Fleet => report_as::<FleetDir>(dir)?,
        Kind::Bisect => report_as::<BisectDir>(dir)?,
        Kind::Tune => report_as::<TuneDir>(dir)?,
        Kind::Arms => report_as::<ArmsDir>(dir)?,
        Kind::Bundle => report_as::<BundleDir>(dir)?,
    };
    if html || crate::fsio::is_real_file(&dir.join(crate::names::HTML_FILE)) {
        let v = verify_dir(dir);
        let names = crate::html_page::write(dir, kind, &v, html).map_err(ReportError::Html)?;
        written.retain(|n| !names.contains(n));
        written.extend(names);
    }
    Ok(written)
}

/// [`report_dir`] on the directory `dir` of the kind `K`.
fn report_as<K: DirKind>(dir: &Path) -> Result<Vec<String>, ReportError>
where
    ReportError: From<K::Error>,
{
    let v = verify_dir(dir);
    if let Some(why) = v.unreadable {
        return Err(ReportError::Unreadable {
            dir: dir.to_path_buf(),
            why: escape_untrusted(&why),
        });
    }
    let kept = reasons_report_keeps(&v, |n| K::is_generated(dir, n));
    if let Some(first) = kept.first() {
        return Err(ReportError::DoesNotVerify {
            dir: dir.to_path_buf(),
            count: kept.len(),
            first: escape_untrusted(&first.detail),
        });
    }
    Ok(K::regenerate(dir)?)
}

/// `dir` refused unless it is one bundle: a multi-arm, tune or bisect directory (the kinds
/// [`verify_dir`] tells apart) is named as such, with the bundles inside it.
pub fn require_bundle_dir(side: &'static str, dir: &Path) -> Result<(), CompareError> {
    let kind = Kind::of(dir);
    let Some(marker) = kind.marker() else {
        return Ok(());
    };
    let what = kind.describe();
    let mut found = Vec::new();
    bundles_inside(dir, 2, &mut found);
    let mut bundles: Vec<String> = found
        .iter()
        .take(crate::compare::MAX_LISTED)
        .map(|p| p.display().to_string())
        .collect();
    if found.len() > crate::compare::MAX_LISTED {
        bundles.push(format!(
            "… {} more",
            found.len() - crate::compare::MAX_LISTED
        ));
    }
    Err(CompareError::NotABundle {
        side,
        path: dir.display().to_string(),
        what,
        marker,
        bundles,
    })
}

/// The directories under `dir` (at most `depth` levels down, symlinks not followed, at most
/// 4096 entries read a directory) that hold a `result.json`, sorted.
pub fn bundles_inside(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<std::path::PathBuf> = rd
        .take(4096)
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subs.sort();
    for s in subs {
        if s.join("result.json").symlink_metadata().is_ok() {
            out.push(s);
        } else if depth > 1 {
            bundles_inside(&s, depth - 1, out);
        }
    }
}

/// `compare A B` from two directories: each must be one bundle
/// ([`require_bundle_dir`]), then both are verified (`on_invalid` sees each verdict that is
/// not valid, e.g. to print its reasons), compared ([`compare_verified_sized`], each
/// inconclusive metric sized by [`crate::sizing::n_to_decide`]) and the paths
/// recorded in the comparison.
pub fn compare_dirs(
    a: &Path,
    b: &Path,
    o: &CompareOptions,
    mut on_invalid: impl FnMut(&Path, &Verdict),
) -> Result<Comparison, CompareError> {
    require_bundle_dir("A", a)?;
    require_bundle_dir("B", b)?;
    let (va, vb) = (verify_dir(a), verify_dir(b));
    for (dir, v) in [(a, &va), (b, &vb)] {
        if !v.is_valid() {
            on_invalid(dir, v);
        }
    }
    let mut c = compare_verified_sized(&va, &vb, o, &crate::sizing::n_to_decide)?;
    c.path_a = Some(a.display().to_string());
    c.path_b = Some(b.display().to_string());
    c.profile = crate::attribution::differential_of_dirs(a, b);
    Ok(c)
}
