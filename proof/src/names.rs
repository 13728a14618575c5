//! The names of a directory's parts — the skeleton's files, a bundle's files, the record
//! that marks each kind of directory, the arms every kind names — and the one rule for the
//! paths a `SHA256SUMS` may list.
//!
//! Every kind of directory (a bundle, a multi-arm directory, a tune, a bisect) lists its
//! files in one `SHA256SUMS` by path: one to [`levels`](is_valid_path) names, each a
//! bundle file name ([`is_valid_name`]: `[A-Za-z0-9._-]+`, no leading dot), so
//! no path can climb out (`..`), start at the root, or need escaping.

/// The checksum file of every kind of directory: `sha256sum -c --strict`'s format
/// ([`crate::sums`]).
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The detached SSH signature over [`SUMS_FILE`] ([`crate::sign`]).
pub const SIG_FILE: &str = "SHA256SUMS.sig";
/// Every kind's README, generated from its records.
pub const README_FILE: &str = "README.md";
/// The optional self-contained page of a directory ([`crate::html`]).
pub const HTML_FILE: &str = "report.html";

/// A bundle's record.
pub const RESULT_FILE: &str = "result.json";
/// A bundle's rows.
pub const SAMPLES_FILE: &str = "samples.csv";
/// A bundle's rows' evidence ([`crate::reports`]).
pub const REPORTS_FILE: &str = "reports.jsonl";
/// A bundle's exact command line ([`crate::cmdline`]).
pub const CMDLINE_FILE: &str = "cmdline.txt";
/// The guest kernel's `.config` (Linux bundles).
pub const CONFIG_FILE: &str = "config";
/// A bundle's latency CDF plot ([`crate::plot`]).
pub const CDF_FILE: &str = "latency-cdf.svg";
/// A bundle's per-stage plot ([`crate::plot`]).
pub const STAGES_FILE: &str = "stages.svg";

/// The plan; its presence makes a directory a multi-arm directory ([`crate::arms`]).
pub const ARMS_FILE: &str = "arms.json";
/// The record; its presence makes a directory a tune directory ([`crate::tune`]).
pub const TUNE_FILE: &str = "tune.json";
/// The record; its presence makes a directory a bisect directory ([`crate::bisect`]).
pub const BISECT_FILE: &str = "bisect.json";
/// The plan; its presence makes a directory a fleet directory ([`crate::fleet`]).
pub const FLEET_FILE: &str = "fleet.json";

/// A tune phase's arm without knobs.
pub const BASELINE_ARM: &str = "baseline";
/// A confirm phase's arm with every winner.
pub const RECOMMENDED_ARM: &str = "recommended";
/// A confirm phase's arm with every winner but one: `recommended-minus-<knob>`.
pub const MINUS_PREFIX: &str = "recommended-minus-";
/// A kernel A/B (a config bisect's step): the good arm.
pub const GOOD_ARM: &str = "good";
/// A kernel A/B (a config bisect's step): the candidate arm.
pub const CANDIDATE_ARM: &str = "candidate";

/// A file name allowed in a bundle: `[A-Za-z0-9._-]+`, not starting with `.`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A path a `SHA256SUMS` of a directory `levels` deep may list: 1 to `levels` names joined
/// by `/`, each a valid file name.
pub fn is_valid_path(name: &str, levels: usize) -> bool {
    let mut n = 0usize;
    for part in name.split('/') {
        n += 1;
        if n > levels || !is_valid_name(part) {
            return false;
        }
    }
    n >= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_one_to_levels_valid_names() {
        assert!(is_valid_path("a", 1));
        assert!(!is_valid_path("a/b", 1));
        assert!(is_valid_path("a/b/c", 3));
        assert!(!is_valid_path("a/b/c/d", 3));
        for bad in ["", "/a", "a/", "a//b", "../a", "a/.b", "a b"] {
            assert!(!is_valid_path(bad, 4), "{bad:?}");
        }
    }
}
