//! The names of a directory's parts, and the one rule for the paths a `SHA256SUMS` may list.
//!
//! Every kind of directory (a bundle, a multi-arm directory, a tune, a bisect) lists its
//! files in one `SHA256SUMS` by path: one to [`levels`](is_valid_path) names, each a
//! bundle file name ([`crate::sums::is_valid_name`]: `[A-Za-z0-9._-]+`, no leading dot), so
//! no path can climb out (`..`), start at the root, or need escaping.

use crate::sums::is_valid_name;

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
