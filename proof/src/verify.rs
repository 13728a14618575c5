//! `verify DIR`: which kind of directory `DIR` is, and that kind's verifier. A directory
//! holding `bisect.json` is a bisect directory ([`crate::bisect::verify_bisect_dir`]), one
//! holding `tune.json` a tune directory ([`crate::tune::verify_tune_dir`]), one holding
//! `arms.json` a multi-arm directory ([`crate::arms::verify_arms_dir`]), any other one
//! bundle ([`crate::bundle_verify`]).
//!
//! This module sits above every kind: it uses them, none of them uses it (a kind that holds
//! directories of another kind calls that kind's verifier itself). The names a verifier's
//! caller needs are re-exported here from where they live: the verdict
//! ([`crate::verdict`]) and the bundle verifier's checks ([`crate::bundle_verify`]).

use std::path::Path;

pub use crate::fmt::escape_untrusted;
pub use crate::verdict::{
    chain, Check, Reason, SignatureCheck, SignatureState, Verdict, VerifyOptions,
};

/// Verifies the directory `dir`, whatever its kind (no signature check).
pub fn verify_dir(dir: &Path) -> Verdict {
    verify_dir_with(dir, &VerifyOptions::default())
}

/// Verifies the directory `dir` with `opts`, by its kind (see the module doc).
pub fn verify_dir_with(dir: &Path, opts: &VerifyOptions) -> Verdict {
    let _session = crate::fsio::session();
    let mut v = verify_kind(dir, opts);
    crate::html::check(dir, kind_of(dir), &mut v);
    v
}

/// The kind's verifier, the page ([`crate::html`]) aside.
fn verify_kind(dir: &Path, opts: &VerifyOptions) -> Verdict {
    if dir
        .join(crate::names::BISECT_FILE)
        .symlink_metadata()
        .is_ok()
    {
        return crate::bisect::verify_bisect_dir(dir, opts);
    }
    if dir.join(crate::names::TUNE_FILE).symlink_metadata().is_ok() {
        return crate::tune::verify_tune_dir(dir, opts);
    }
    if dir.join(crate::names::ARMS_FILE).symlink_metadata().is_ok() {
        return crate::arms::verify_arms_dir(dir, opts);
    }
    crate::bundle_verify::verify_bundle_with(dir, opts)
}

/// The kinds of directory, as [`verify_dir_with`] tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bisect,
    Tune,
    Arms,
    Bundle,
}

pub(crate) fn kind_of(dir: &Path) -> Kind {
    let here = |name: &str| dir.join(name).symlink_metadata().is_ok();
    if here(crate::names::BISECT_FILE) {
        Kind::Bisect
    } else if here(crate::names::TUNE_FILE) {
        Kind::Tune
    } else if here(crate::names::ARMS_FILE) {
        Kind::Arms
    } else {
        Kind::Bundle
    }
}

/// `verify --json DIR`'s document (and the `verdict` of `truecold run --json`): what the
/// directory is, whether it is valid, every reason and warning, and a bundle's figures. The
/// fields are listed in docs/verify.md; text from the bundle is kept verbatim (JSON escapes
/// it), never terminal-escaped.
pub fn verdict_json(dir: &Path, v: &Verdict) -> serde_json::Value {
    use serde_json::json;
    let kind = match kind_of(dir) {
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
/// one); then the kind's regeneration ([`crate::bundle::regenerate`],
/// [`crate::arms::regenerate_arms`], [`crate::tune::regenerate_tune`],
/// [`crate::bisect::regenerate_bisect`]). Returns the paths rewritten.
pub fn report_dir(dir: &Path) -> Result<Vec<String>, ReportError> {
    report_dir_with(dir, false)
}

/// [`report_dir`], then the page ([`crate::html::write`]) when `html` asks for one or the
/// directory already has one (a page left as it was would be stale).
pub fn report_dir_with(dir: &Path, html: bool) -> Result<Vec<String>, ReportError> {
    let mut written = report_kind(dir)?;
    if html || crate::fsio::is_real_file(&dir.join(crate::names::HTML_FILE)) {
        let names = crate::html::write(dir).map_err(ReportError::Html)?;
        written.retain(|n| !names.contains(n));
        written.extend(names);
    }
    Ok(written)
}

fn report_kind(dir: &Path) -> Result<Vec<String>, ReportError> {
    let kind = kind_of(dir);
    let v = verify_dir(dir);
    if let Some(why) = v.unreadable {
        return Err(ReportError::Unreadable {
            dir: dir.to_path_buf(),
            why: escape_untrusted(&why),
        });
    }
    let attribution = dir
        .join(crate::attribution::JSONL_FILE)
        .symlink_metadata()
        .is_ok();
    let regenerated = |n: &str| match kind {
        Kind::Bisect => crate::bisect::is_regenerated(n),
        Kind::Tune => crate::tune::is_regenerated(n),
        Kind::Arms => crate::arms::is_regenerated(n),
        Kind::Bundle => crate::bundle::is_regenerated(n, attribution),
    };
    let kept = reasons_report_keeps(&v, regenerated);
    if let Some(first) = kept.first() {
        return Err(ReportError::DoesNotVerify {
            dir: dir.to_path_buf(),
            count: kept.len(),
            first: escape_untrusted(&first.detail),
        });
    }
    Ok(match kind {
        Kind::Bisect => crate::bisect::regenerate_bisect(dir)?,
        Kind::Tune => crate::tune::regenerate_tune(dir)?,
        Kind::Arms => crate::arms::regenerate_arms(dir)?,
        Kind::Bundle => crate::bundle::regenerate(dir)?,
    })
}
